/* Plan step -> kernel descriptor: what each kernel family is told about a convolution or GEMM
 * step, and the mapping of the plan's activations and binary ops to the kernels' enums. */
#include <stdio.h>
#include <string.h>

#include "graph/gpu/gpu_internal.h"
#include "kernels/wgmma_gemm.h"

bool gpu_allows_tf32(const exec_gpu_engine *e) { return plan_allows_tf32(&e->options); }

/* A step of an fp32 (or tf32) layer, or of the fp32 baseline: its output is FLOAT on the
 * device. */
bool gpu_step_fp32(const plan *p, const plan_step *s) {
    return s->num_outputs && p->tensors[s->outputs[0]].dtype == TCI_DTYPE_FLOAT;
}

void gpu_depthwise_desc_of(const plan_conv *c, tci_dtype dtype, kern_depthwise_desc *d) {
    memset(d, 0, sizeof *d);
    d->dtype = dtype;
    d->geom = c->geom;
    d->act = c->act.kind;
    d->act_alpha = c->act.alpha;
    d->act_beta = c->act.beta;
}

/* The activation the step applies after bias and residual (WMMA fuses any). */
act_params gpu_conv_activation(const plan_conv *c) {
    return c->act.kind != ACT_NONE ? c->act : c->post_act;
}

void gpu_wmma_desc_of(const plan_conv *c, tci_dtype dtype, kern_wmma_conv_desc *d) {
    memset(d, 0, sizeof *d);
    d->dtype = dtype;
    d->geom = c->geom;
    d->alpha = 1.0f;
    act_params a = gpu_conv_activation(c);
    d->act = a.kind;
    d->act_alpha = a.alpha;
    d->act_beta = a.beta;
}

void gpu_conv_desc_of(const exec_gpu_engine *e, const plan_conv *c, tci_dtype dtype,
                      kern_conv_desc *d) {
    bool fp32 = dtype == TCI_DTYPE_FLOAT;
    memset(d, 0, sizeof *d);
    d->geom = c->geom;
    d->activation = c->act.kind == ACT_RELU ? KERN_CONV_ACT_RELU : KERN_CONV_ACT_NONE;
    d->has_bias = c->has_bias;
    d->has_residual = c->has_residual;
    d->mode = fp32                          ? KERN_CONV_FP32_NHWC8
              : dtype == TCI_DTYPE_BFLOAT16 ? KERN_CONV_BF16_NHWC8
                                            : KERN_CONV_FP16_NHWC8;
    d->allow_tf32 = fp32 && gpu_allows_tf32(e);
    d->workspace_limit = WORKSPACE_LIMIT;
}

void gpu_convt_desc_of(const exec_gpu_engine *e, const plan_conv *c, tci_dtype dtype,
                       kern_convt_desc *d) {
    memset(d, 0, sizeof *d);
    d->fp32 = dtype == TCI_DTYPE_FLOAT;
    d->bf16 = dtype == TCI_DTYPE_BFLOAT16;
    d->allow_tf32 = d->fp32 && gpu_allows_tf32(e);
    d->geom = c->geom;
    d->has_bias = 1;
    d->workspace_limit = WORKSPACE_LIMIT;
}

act_params gpu_gemm_library_post_act(const plan_gemm *g) {
    act_params none = {ACT_NONE, 0.0f, 0.0f};
    bool fused = g->act.kind == ACT_NONE ||
                 ((act_flags(g->act.kind) & ACT_FUSES_CUBLASLT) && !g->has_c);
    return fused ? none : g->act;
}

/* cuBLASLt's epilogue: bias, and the activation when it has the same one (ACT_FUSES_CUBLASLT:
 * ReLU, and GELU, its tanh form). */
static kern_gemm_epilogue gemm_epilogue(const plan_gemm *g) {
    act_kind act = gpu_gemm_library_post_act(g).kind == ACT_NONE ? g->act.kind : ACT_NONE;
    if (act == ACT_RELU) return g->has_bias ? KERN_GEMM_EPILOGUE_RELU_BIAS : KERN_GEMM_EPILOGUE_RELU;
    if (act == ACT_GELU_TANH)
        return g->has_bias ? KERN_GEMM_EPILOGUE_GELU_BIAS : KERN_GEMM_EPILOGUE_GELU;
    return g->has_bias ? KERN_GEMM_EPILOGUE_BIAS : KERN_GEMM_EPILOGUE_NONE;
}

void gpu_gemm_desc_of(const exec_gpu_engine *e, const plan_gemm *g, tci_dtype dtype,
                      kern_gemm_desc *d) {
    bool fp32 = dtype == TCI_DTYPE_FLOAT;
    memset(d, 0, sizeof *d);
    d->m = g->m;
    d->n = g->n;
    d->k = g->k;
    d->trans_a = g->trans_a;
    d->trans_b = g->trans_b;
    d->lda = g->lda;
    d->ldb = g->ldb;
    d->ldc = g->ldc;
    d->batch_count = (int)(g->batch > 0 ? g->batch : 1);
    d->stride_a = g->stride_a;
    d->stride_b = g->stride_b;
    d->stride_c = g->stride_c;
    d->alpha = g->alpha;
    d->beta = g->has_c ? g->beta : 0.0f;
    d->epilogue = gemm_epilogue(g);
    d->dtype = fp32 ? KERN_GEMM_FP32 : dtype == TCI_DTYPE_BFLOAT16 ? KERN_GEMM_BF16 : KERN_GEMM_FP16;
    d->allow_tf32 = fp32 && e && gpu_allows_tf32(e);
    d->workspace_limit = WORKSPACE_LIMIT;
    d->alignment = 0;
    d->candidates = GEMM_CANDIDATES;
}

void gpu_wmma_gemm_desc_of(const plan_gemm *g, tci_dtype dtype, kern_wmma_gemm_desc *d) {
    kern_wmma_gemm_desc_init(d, g->m, g->n, g->k, g->trans_a, g->trans_b);
    d->batch = (int)(g->batch > 0 ? g->batch : 1);
    d->lda = g->lda;
    d->ldb = g->ldb;
    d->ldc = g->ldc;
    d->stride_a = g->stride_a;
    d->stride_b = g->stride_b;
    d->stride_c = g->stride_c;
    d->alpha = g->alpha;
    d->beta = g->has_c ? g->beta : 0.0f;
    d->has_bias = g->has_bias;
    d->act = g->act.kind;
    d->act_alpha = g->act.alpha;
    d->act_beta = g->act.beta;
    d->in_dtype = dtype == TCI_DTYPE_FLOAT ? TCI_DTYPE_FLOAT16 : dtype; /* tf32: a variant's */
    d->out_dtype = dtype;
}

/* "wmma gemm 128x128x32 s3 warp 64x64", "wmma gemm tf32 16x16x8", "wgmma gemm 128x256x64 s3
 * persistent": a GEMM config's name for reports. */
void gpu_gemm_config_name(int cfg, char *buf, size_t size) {
    snprintf(buf, size, "%s %s", cfg >= WGMMA ? "wgmma gemm" : "wmma gemm",
             cfg >= WGMMA       ? kern_wgmma_gemm_config_name(cfg - WGMMA)
             : cfg == WMMA_TF32 ? "tf32 16x16x8"
                                : kern_wmma_gemm_config_name(cfg));
}

void gpu_attention_desc_of(const plan_attention *a, tci_dtype dtype, kern_attention_desc *d) {
    memset(d, 0, sizeof *d);
    d->batch = a->batch;
    d->heads = a->heads;
    d->q_len = a->q_len;
    d->kv_len = a->kv_len;
    d->head_dim = a->head_dim;
    for (int i = 0; i < 4; i++) {
        d->q_strides[i] = a->q_strides[i];
        d->k_strides[i] = a->k_strides[i];
        d->v_strides[i] = a->v_strides[i];
        d->mask_strides[i] = a->mask_strides[i];
        d->keep_strides[i] = a->keep_strides[i];
        d->y_strides[i] = a->y_strides[i];
    }
    d->scale = a->scale;
    d->causal = a->causal;
    d->keep_row_mean = a->keep_row_mean;
    d->mask_batch_mod = a->mask_batch_mod;
    d->dtype = dtype;
}
