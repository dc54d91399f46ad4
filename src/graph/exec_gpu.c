/* The GPU executor: uploads and packs constants, chooses each convolution's and GEMM's kernel
 * (tcinfer's WMMA configs against cuDNN / cuBLASLt, timed inside CUDA graphs on the real buffers,
 * or taken from a timing cache), and runs the plan's steps on a context's stream, captured in a
 * CUDA graph per batch size. Host-side C over the kernels' C launchers. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "graph/exec_gpu.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cast.h"
#include "kernels/conv_cudnn.h"
#include "kernels/conv_transpose_cudnn.h"
#include "kernels/copy.h"
#include "kernels/depthwise.h"
#include "kernels/cuda_check.h"
#include "kernels/eltwise.h"
#include "kernels/gemm_cublas.h"
#include "kernels/layout.h"
#include "kernels/norm.h"
#include "kernels/pool.h"
#include "kernels/resize.h"
#include "kernels/wmma_conv.h"
#include "kernels/wgmma_gemm.h"
#include "kernels/wmma_gemm.h"
#include "graph/passes.h"
#include "layers/op.h"

/* Largest workspace one convolution or GEMM algorithm may ask for. The "configs" of GEMM steps
 * on tcinfer's own kernels: 0.. the WMMA family's, WMMA_TF32 an fp32 step (--precision tf32) on
 * the WMMA tf32 16x16x8 kernel, WGMMA + k the Hopper wgmma kernel's config k. */
enum { WORKSPACE_LIMIT = 256 << 20, GEMM_CANDIDATES = 8, WMMA_TF32 = 1000, WGMMA = 2000 };

/* How one step runs: packed weights, the library plan or own kernel chosen, and what timing
 * found. */
typedef struct step_impl {
    tci_dtype dtype;           /* of the step's (first) output: for conv and GEMM steps the
                                  precision they compute in (FLOAT16, BFLOAT16 or FLOAT) */
    void *weights;             /* packed conv weights (fp16 / bf16, or fp32 in fp32 layers) */
    void *bias;                /* packed conv bias / GEMM bias, in the tensors' dtype */
    void *bias_f32;            /* conv (Kp) / GEMM (n) bias as floats, for the WMMA kernels */
    kern_conv_plan *conv;
    kern_gemm_plan *gemm;
    kern_convt_plan *convt;
    int wmma;                  /* conv / GEMM: the WMMA config that runs it, or -1 for the
                                  library (cuDNN, cuBLASLt) */
    float library_ms, wmma_ms; /* timed at build (-1: not timed / none applies) */
    const char *kernel;        /* what runs it, for reports */
    char text[160];            /* storage for kernel when it is composed */
} step_impl;

/* A timing cache: the kernel choice of each tuned problem, valid for one GPU model and one set
 * of CUDA / cuDNN / cuBLASLt versions (the header line says which). */
typedef struct cache_entry {
    char *key, *value;         /* problem, choice */
    float library_ms, wmma_ms; /* what the timing measured, for reports */
    const char *origin;        /* "timing cache", "engine file", or "timed on an identical layer"
                                  (this build's: an identical later layer reuses it) */
} cache_entry;

typedef struct timing_cache {
    const char *path;
    char header[512];          /* this machine's */
    cache_entry *entries;
    int count, cap;
} timing_cache;

struct exec_gpu_engine {
    plan *plan;
    /* A batch variant (a smaller batch than the engine was built for) is planned anew from
     * the pristine graph but borrows its parent's packed weights, library plans and every
     * constant whose bytes are the same; the step arrays below are then the parent's. */
    const exec_gpu_engine *parent;
    const ir_graph *pristine;  /* base engine: the graph before the passes, or NULL */
    ir_graph *graph;           /* variant: its optimised copy of the graph (steps point into it) */
    plan_options options;      /* what the plan was built with; variants are planned alike */
    tci_kernels kernels;       /* which kernel families may run convolutions */
    timing_cache *cache;       /* during creation only: the choices of the timing-cache file
                                  and of the engine file, and those timed so far */
    int layers_timed, layers_cached;
    bool *owns_constant;       /* by plan tensor: constants[t] is this engine's to free */
    void **constants;          /* by plan tensor: device copy of a constant, else NULL */
    step_impl *impl;           /* by step */
    size_t workspace_bytes;
};

/* One batch size a context has run: the base engine's, or a variant planned on first use. */
typedef struct batch_variant {
    int64_t *dim0;             /* leading dim of each engine input */
    exec_gpu_engine *engine;   /* owned; NULL for the base (the context's base engine) */
    cudaGraphExec_t graph;
    bool captured;
    void **captured_io;        /* the device I/O buffers the graph was captured with (NULLs:
                                  the staging buffers), inputs then outputs */
} batch_variant;

struct exec_gpu_context {
    const exec_gpu_engine *base;
    const exec_gpu_engine *engine; /* the current batch's: base or a variant */
    batch_variant *variants;   /* [0] is the base */
    int num_variants, current;
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasLtHandle_t lt;
    void *arena;
    size_t arena_bytes;
    void *workspace;
    void **input_staging;      /* by engine input: the caller's data as given (fp32, int64...) */
    void **output_staging;     /* by engine output: fp32 / int64 / bool, dense NCHW */
    tci_tensor *outputs;       /* host copies */
    int *gather_error;         /* device flag for out-of-range Gather indices */
    bool use_graph;
    cudaEvent_t *events;       /* 2 per step, for profiling */
    /* device I/O (exec_gpu_run_device): the caller's buffers, inputs then outputs, or NULLs */
    void **device_io;
    void **redirect;           /* by plan tensor of the current engine: the caller's buffer that
                                  replaces its arena storage, or NULL */
    int redirect_count;        /* entries of redirect */
    bool *copy_output;         /* by output: written to the caller's buffer by a copy */
    cudaEvent_t caller_ready, done;
};

/* ---- small helpers ---- */

static const plan_tensor *tensor_of(const plan *p, int index) { return &p->tensors[index]; }

static void *device_ptr(const exec_gpu_engine *e, void *arena, int index) {
    const plan_tensor *t = &e->plan->tensors[index];
    if (t->memory == PLAN_MEM_CONSTANT) return e->constants[index];
    return (char *)arena + t->offset;
}

/* Host dtype of an engine input/output: float stays fp32 on the host. */
static tci_dtype host_dtype(const plan_tensor *t) {
    return t->dtype == TCI_DTYPE_FLOAT16 || t->dtype == TCI_DTYPE_BFLOAT16 ? TCI_DTYPE_FLOAT
                                                                          : t->dtype;
}

static int64_t count_of(const plan_tensor *t) {
    int64_t c = 1;
    for (int i = 0; i < t->rank; i++) c *= t->dims[i];
    return c;
}

static uint64_t fill_bits(tci_dtype dtype, double value) {
    uint64_t bits = 0;
    switch (dtype) {
    case TCI_DTYPE_FLOAT16: bits = op_float_to_half((float)value); break;
    case TCI_DTYPE_BFLOAT16: bits = op_float_to_bfloat16((float)value); break;
    case TCI_DTYPE_FLOAT: {
        float f = (float)value;
        uint32_t u;
        memcpy(&u, &f, 4);
        bits = u;
        break;
    }
    case TCI_DTYPE_INT32: bits = (uint32_t)(int32_t)value; break;
    case TCI_DTYPE_INT64: bits = (uint64_t)(int64_t)value; break;
    default: bits = value != 0; break;
    }
    return bits;
}

/* TEMPORARY (until plan_act / plan_binary are replaced at integration): act_of and binary_op_of
 * return util/elementwise.h's enums, which replaced kern_act and kern_eltwise_op. */
static act_kind act_of(plan_act a) {
    switch (a) {
    case PLAN_ACT_RELU: return ACT_RELU;
    case PLAN_ACT_LEAKY_RELU: return ACT_LEAKY_RELU;
    case PLAN_ACT_CLIP: return ACT_CLIP;
    case PLAN_ACT_SIGMOID: return ACT_SIGMOID;
    case PLAN_ACT_HARD_SIGMOID: return ACT_HARD_SIGMOID;
    case PLAN_ACT_HARD_SWISH: return ACT_HARD_SWISH;
    case PLAN_ACT_TANH: return ACT_TANH;
    case PLAN_ACT_ELU: return ACT_ELU;
    case PLAN_ACT_SELU: return ACT_SELU;
    case PLAN_ACT_SOFTPLUS: return ACT_SOFTPLUS;
    case PLAN_ACT_SILU: return ACT_SILU;
    case PLAN_ACT_GELU: return ACT_GELU;
    case PLAN_ACT_GELU_TANH: return ACT_GELU_TANH;
    case PLAN_ACT_SQRT: return ACT_SQRT;
    case PLAN_ACT_ERF: return ACT_ERF;
    default: return ACT_NONE;
    }
}

static binary_op binary_op_of(plan_binary b) {
    switch (b) {
    case PLAN_BIN_ADD: return BINARY_ADD;
    case PLAN_BIN_SUB: return BINARY_SUB;
    case PLAN_BIN_MUL: return BINARY_MUL;
    case PLAN_BIN_DIV: return BINARY_DIV;
    case PLAN_BIN_POW: return BINARY_POW;
    case PLAN_BIN_MAX: return BINARY_MAX;
    case PLAN_BIN_MIN: return BINARY_MIN;
    case PLAN_BIN_PRELU: return BINARY_PRELU;
    case PLAN_BIN_EQUAL: return BINARY_EQUAL;
    case PLAN_BIN_WHERE: return BINARY_WHERE;
    default: return BINARY_NONE;
    }
}

/* An in-place activation over a whole NHWC8 or dense tensor (what an epilogue cannot fuse). */
static tci_status run_activation(const plan_tensor *t, void *data, plan_activation act,
                                 cudaStream_t stream) {
    int64_t dims[PLAN_MAX_PHYS_RANK];
    int rank;
    if (t->layout == PLAN_LAYOUT_NHWC8) {
        dims[0] = t->dims[0];
        dims[1] = t->dims[2];
        dims[2] = t->dims[3];
        dims[3] = t->padded_channels;
        rank = 4;
    } else {
        dims[0] = count_of(t);
        rank = 1;
    }
    kern_eltwise_desc d;
    /* TEMPORARY: BINARY_NONE was KERN_ELTWISE_UNARY (see act_of) */
    kern_eltwise_desc_init(&d, BINARY_NONE, t->dtype, rank, dims);
    d.act = act_of(act.kind);
    d.act_alpha = act.alpha;
    d.act_beta = act.beta;
    if (t->layout == PLAN_LAYOUT_NHWC8) {
        d.pad_dim = 3;
        d.real_c = t->dims[1];
    }
    const void *in[1] = {data};
    return kern_eltwise(&d, in, data, stream);
}

/* A step of an fp32 layer (or of the fp32 baseline): its output is FLOAT on the device. */
static bool step_fp32(const plan *p, const plan_step *s) {
    return s->num_outputs && p->tensors[s->outputs[0]].dtype == TCI_DTYPE_FLOAT;
}

static void depthwise_desc_of(const plan_conv *c, tci_dtype dtype, kern_depthwise_desc *d) {
    memset(d, 0, sizeof *d);
    d->dtype = dtype;
    d->n = c->n;
    d->c = c->c;
    d->in_h = c->h;
    d->in_w = c->w;
    d->out_h = c->out_h;
    d->out_w = c->out_w;
    d->kernel_h = c->r;
    d->kernel_w = c->s;
    d->stride_h = c->stride_h;
    d->stride_w = c->stride_w;
    d->dilation_h = c->dilation_h;
    d->dilation_w = c->dilation_w;
    d->pad_top = c->pad_top;
    d->pad_left = c->pad_left;
    d->act = act_of(c->act.kind);
    d->act_alpha = c->act.alpha;
    d->act_beta = c->act.beta;
}

/* The activation the step applies after bias and residual (WMMA fuses any). */
static plan_activation conv_activation(const plan_conv *c) {
    return c->act.kind != PLAN_ACT_NONE ? c->act : c->post_act;
}

static void wmma_desc_of(const plan_conv *c, tci_dtype dtype, kern_wmma_conv_desc *d) {
    memset(d, 0, sizeof *d);
    d->dtype = dtype;
    d->n = c->n;
    d->c = c->c;
    d->h = c->h;
    d->w = c->w;
    d->k = c->k;
    d->r = c->r;
    d->s = c->s;
    d->out_h = c->out_h;
    d->out_w = c->out_w;
    d->pad_top = c->pad_top;
    d->pad_left = c->pad_left;
    d->stride_h = c->stride_h;
    d->stride_w = c->stride_w;
    d->dilation_h = c->dilation_h;
    d->dilation_w = c->dilation_w;
    d->groups = c->groups;
    d->alpha = 1.0f;
    plan_activation a = conv_activation(c);
    d->act = act_of(a.kind);
    d->act_alpha = a.alpha;
    d->act_beta = a.beta;
}

static void conv_desc_of(const exec_gpu_engine *e, const plan_conv *c, tci_dtype dtype,
                         kern_conv_desc *d) {
    bool fp32 = dtype == TCI_DTYPE_FLOAT;
    memset(d, 0, sizeof *d);
    d->n = (int)c->n;
    d->c = (int)c->c;
    d->h = (int)c->h;
    d->w = (int)c->w;
    d->k = (int)c->k;
    d->r = (int)c->r;
    d->s = (int)c->s;
    d->pads[0] = (int)c->pad_top;
    d->pads[1] = (int)c->pad_left;
    d->pads[2] = (int)c->pad_bottom;
    d->pads[3] = (int)c->pad_right;
    d->strides[0] = (int)c->stride_h;
    d->strides[1] = (int)c->stride_w;
    d->dilations[0] = (int)c->dilation_h;
    d->dilations[1] = (int)c->dilation_w;
    d->groups = (int)c->groups;
    d->activation = c->act.kind == PLAN_ACT_RELU ? KERN_CONV_ACT_RELU : KERN_CONV_ACT_NONE;
    d->has_bias = c->has_bias;
    d->has_residual = c->has_residual;
    d->mode = fp32                          ? KERN_CONV_FP32_NHWC8
              : dtype == TCI_DTYPE_BFLOAT16 ? KERN_CONV_BF16_NHWC8
                                            : KERN_CONV_FP16_NHWC8;
    d->allow_tf32 = fp32 && e->options.tf32;
    d->workspace_limit = WORKSPACE_LIMIT;
}

static void convt_desc_of(const exec_gpu_engine *e, const plan_conv *c, tci_dtype dtype,
                          kern_convt_desc *d) {
    memset(d, 0, sizeof *d);
    d->fp32 = dtype == TCI_DTYPE_FLOAT;
    d->bf16 = dtype == TCI_DTYPE_BFLOAT16;
    d->allow_tf32 = d->fp32 && e->options.tf32;
    d->n = (int)c->n;
    d->c = (int)c->c;
    d->h = (int)c->h;
    d->w = (int)c->w;
    d->k = (int)c->k;
    d->r = (int)c->r;
    d->s = (int)c->s;
    d->out_h = (int)c->out_h;
    d->out_w = (int)c->out_w;
    d->pads[0] = (int)c->pad_top;
    d->pads[1] = (int)c->pad_left;
    d->pads[2] = (int)c->pad_bottom;
    d->pads[3] = (int)c->pad_right;
    d->strides[0] = (int)c->stride_h;
    d->strides[1] = (int)c->stride_w;
    d->dilations[0] = (int)c->dilation_h;
    d->dilations[1] = (int)c->dilation_w;
    d->groups = (int)c->groups;
    d->has_bias = 1;
    d->workspace_limit = WORKSPACE_LIMIT;
}

static kern_gemm_epilogue gemm_epilogue(const plan_gemm *g) {
    if (g->act.kind == PLAN_ACT_RELU) return g->has_bias ? KERN_GEMM_EPILOGUE_RELU_BIAS : KERN_GEMM_EPILOGUE_RELU;
    if (g->act.kind == PLAN_ACT_GELU_TANH)
        return g->has_bias ? KERN_GEMM_EPILOGUE_GELU_BIAS : KERN_GEMM_EPILOGUE_GELU;
    return g->has_bias ? KERN_GEMM_EPILOGUE_BIAS : KERN_GEMM_EPILOGUE_NONE;
}

static void gemm_desc_of(const exec_gpu_engine *e, const plan_gemm *g, tci_dtype dtype,
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
    d->beta = 0.0f;
    d->epilogue = gemm_epilogue(g);
    d->dtype = fp32 ? KERN_GEMM_FP32 : dtype == TCI_DTYPE_BFLOAT16 ? KERN_GEMM_BF16 : KERN_GEMM_FP16;
    d->allow_tf32 = fp32 && e && e->options.tf32;
    d->workspace_limit = WORKSPACE_LIMIT;
    d->alignment = 0;
    d->candidates = GEMM_CANDIDATES;
}

static void wmma_gemm_desc_of(const plan_gemm *g, tci_dtype dtype, kern_wmma_gemm_desc *d) {
    kern_wmma_gemm_desc_init(d, g->m, g->n, g->k, g->trans_a, g->trans_b);
    d->batch = (int)(g->batch > 0 ? g->batch : 1);
    d->lda = g->lda;
    d->ldb = g->ldb;
    d->ldc = g->ldc;
    d->stride_a = g->stride_a;
    d->stride_b = g->stride_b;
    d->stride_c = g->stride_c;
    d->alpha = g->alpha;
    d->has_bias = g->has_bias;
    d->act = act_of(g->act.kind);
    d->act_alpha = g->act.alpha;
    d->act_beta = g->act.beta;
    d->in_dtype = dtype == TCI_DTYPE_FLOAT ? TCI_DTYPE_FLOAT16 : dtype; /* tf32: a variant's */
    d->out_dtype = dtype;
}

/* Whether this device runs the wgmma kernels (Hopper); asked per use, it is two attribute
 * queries. */
static bool wgmma_device(void) {
    if (kern_wgmma_gemm_device_supported() == TCI_OK) return true;
    tci_error_clear();
    return false;
}

/* "wmma gemm 128x128x32 s3 warp 64x64", "wmma gemm tf32 16x16x8", "wgmma gemm 128x256x64 s3
 * persistent": a GEMM config's name for reports. */
static void gemm_config_name(int cfg, char *buf, size_t size) {
    snprintf(buf, size, "%s %s", cfg >= WGMMA ? "wgmma gemm" : "wmma gemm",
             cfg >= WGMMA       ? kern_wgmma_gemm_config_name(cfg - WGMMA)
             : cfg == WMMA_TF32 ? "tf32 16x16x8"
                                : kern_wmma_gemm_config_name(cfg));
}

/* A GEMM step on one of tcinfer's configs cfg: the fp16 (bf16) WMMA family, the wgmma kernel,
 * or for fp32 steps (WMMA_TF32) the tf32 kernel, whose bias is the step's fp32 one. */
static tci_status run_wmma_gemm(const plan_gemm *g, int cfg, const step_impl *im, const void *a,
                                const void *b, void *d, cudaStream_t stream) {
    kern_wmma_gemm_desc wd;
    wmma_gemm_desc_of(g, im->dtype, &wd);
    if (cfg == WMMA_TF32)
        return kern_wmma_variant_run(&wd, KERN_WMMA_TF32_16X16X8, a, b, im->bias, NULL, d, stream);
    if (cfg >= WGMMA) return kern_wgmma_gemm_run(&wd, cfg - WGMMA, a, b, im->bias_f32, NULL, d, stream);
    return kern_wmma_gemm_run(&wd, cfg, a, b, im->bias_f32, NULL, d, stream);
}

/* ---- one step ---- */

/* device_ptr, with the caller's buffers in place of redirected tensors (device I/O) */
static void *tensor_ptr(const exec_gpu_engine *e, const exec_gpu_context *c, void *arena,
                        int index) {
    if (c && c->redirect && index < c->redirect_count) {
        int root = e->plan->tensors[index].alias_of >= 0 ? e->plan->tensors[index].alias_of : index;
        if (c->redirect[root]) return c->redirect[root];
    }
    return device_ptr(e, arena, index);
}

static tci_status run_step(const exec_gpu_engine *e, exec_gpu_context *c, void *arena, int index,
                           cudaStream_t stream) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[index];
    void *in[PLAN_MAX_STEP_INPUTS] = {0};
    for (int k = 0; k < s->num_inputs; k++)
        if (s->inputs[k] >= 0) in[k] = tensor_ptr(e, c, arena, s->inputs[k]);
    void *out = s->num_outputs ? tensor_ptr(e, c, arena, s->outputs[0]) : NULL;
    const plan_tensor *y = s->num_outputs ? tensor_of(p, s->outputs[0]) : NULL;
    switch (s->kind) {
    case PLAN_STEP_CONV:
        if (s->u.conv.depthwise) {
            kern_depthwise_desc d;
            depthwise_desc_of(&s->u.conv, e->impl[index].dtype, &d);
            return kern_depthwise_conv(&d, in[0], e->impl[index].weights, e->impl[index].bias,
                                       s->u.conv.has_residual ? in[3] : NULL, out, stream);
        }
        if (e->impl[index].wmma >= 0) {
            kern_wmma_conv_desc wd;
            wmma_desc_of(&s->u.conv, e->impl[index].dtype, &wd);
            return kern_wmma_conv_run(&wd, e->impl[index].wmma, s->u.conv.n, in[0],
                                      e->impl[index].weights, e->impl[index].bias_f32,
                                      s->u.conv.has_residual ? in[3] : NULL, out, c->workspace,
                                      e->workspace_bytes, stream);
        }
        TCI_TRY(kern_conv_run(e->impl[index].conv, c->cudnn, stream, (int)s->u.conv.n, in[0],
                              e->impl[index].weights, e->impl[index].bias,
                              s->u.conv.has_residual ? in[3] : NULL, out, c->workspace,
                              e->workspace_bytes));
        if (s->u.conv.post_act.kind != PLAN_ACT_NONE)
            TCI_TRY(run_activation(y, out, s->u.conv.post_act, stream));
        return TCI_OK;
    case PLAN_STEP_CONV_TRANSPOSE:
        TCI_TRY(kern_convt_run(e->impl[index].convt, c->cudnn, stream, (int)s->u.conv.n, in[0],
                               e->impl[index].weights, e->impl[index].bias, out, c->workspace,
                               e->workspace_bytes));
        if (s->u.conv.post_act.kind != PLAN_ACT_NONE)
            TCI_TRY(run_activation(y, out, s->u.conv.post_act, stream));
        return TCI_OK;
    case PLAN_STEP_GEMM:
        if (e->impl[index].wmma >= 0)
            return run_wmma_gemm(&s->u.gemm, e->impl[index].wmma, &e->impl[index], in[0], in[1],
                                 out, stream);
        /* a batch variant runs the parent's plan on its own (smaller) m and batch count */
        return kern_gemm_run(e->impl[index].gemm, c->lt, stream, s->u.gemm.m,
                             (int)(s->u.gemm.batch > 0 ? s->u.gemm.batch : 1), in[0], in[1], NULL,
                             out, e->impl[index].bias, c->workspace, e->workspace_bytes);
    case PLAN_STEP_ELTWISE: {
        const plan_strided *v = &s->u.eltwise.view;
        int value_input = s->u.eltwise.op == PLAN_BIN_WHERE ? 1 : 0;
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, binary_op_of(s->u.eltwise.op),
                               tensor_of(p, s->inputs[value_input])->dtype, v->rank, v->dims);
        d.act = act_of(s->u.eltwise.act.kind);
        d.act_alpha = s->u.eltwise.act.alpha;
        d.act_beta = s->u.eltwise.act.beta;
        for (int k = 0; k < s->num_inputs; k++)
            for (int i = 0; i < v->rank; i++) d.strides[k][i] = v->strides[k][i];
        d.pad_dim = v->pad_dim;
        d.real_c = v->real_channels;
        return kern_eltwise(&d, (const void *const *)in, out, stream);
    }
    case PLAN_STEP_POOL: {
        const plan_pool *pp = &s->u.pool;
        kern_pool2d_desc d = {0};
        d.dtype = y->dtype;
        d.mode = pp->max ? KERN_POOL_MAX : KERN_POOL_AVG;
        d.count_include_pad = pp->count_include_pad;
        d.n = pp->n;
        d.c = pp->c;
        d.in_h = pp->h;
        d.in_w = pp->w;
        d.out_h = pp->out_h;
        d.out_w = pp->out_w;
        d.kernel_h = pp->kernel_h;
        d.kernel_w = pp->kernel_w;
        d.stride_h = pp->stride_h;
        d.stride_w = pp->stride_w;
        d.dilation_h = pp->dilation_h;
        d.dilation_w = pp->dilation_w;
        d.pad_top = pp->pad_top;
        d.pad_left = pp->pad_left;
        /* what the output size implies beyond the input: the end padding (or ceil overhang) */
        d.pad_bottom = (pp->out_h - 1) * pp->stride_h + (pp->kernel_h - 1) * pp->dilation_h + 1 -
                       pp->h - pp->pad_top;
        d.pad_right = (pp->out_w - 1) * pp->stride_w + (pp->kernel_w - 1) * pp->dilation_w + 1 -
                      pp->w - pp->pad_left;
        if (d.pad_bottom < 0) d.pad_bottom = 0;
        if (d.pad_right < 0) d.pad_right = 0;
        return kern_pool2d(&d, in[0], out, stream);
    }
    case PLAN_STEP_GLOBAL_POOL:
        return kern_global_pool_dtype(s->u.pool.max ? KERN_POOL_MAX : KERN_POOL_AVG, in[0], out,
                                      s->u.pool.n, s->u.pool.c, s->u.pool.h, s->u.pool.w,
                                      y->dtype, stream);
    case PLAN_STEP_COPY: {
        const plan_strided *v = &s->u.copy.view;
        kern_copy_desc d = {0};
        d.rank = v->rank;
        d.elem_size = (int)s->u.copy.elem_size;
        for (int i = 0; i < v->rank; i++) {
            d.shape[i] = v->dims[i];
            d.src_strides[i] = v->strides[0][i];
            d.dst_strides[i] = v->out_strides[i];
        }
        const char *src = (const char *)in[0] + v->in_offset[0] * (int64_t)s->u.copy.elem_size;
        char *dst = (char *)out + v->out_offset * (int64_t)s->u.copy.elem_size;
        return kern_strided_copy(dst, src, &d, stream);
    }
    case PLAN_STEP_FILL:
        return kern_fill(out, s->u.fill.count, (int)tci_dtype_size(y->dtype),
                         fill_bits(y->dtype, s->u.fill.value), stream);
    case PLAN_STEP_LAYOUT: {
        const plan_tensor *x = tensor_of(p, s->inputs[0]);
        const plan_tensor *nhwc = s->u.layout.to_dense ? x : y;
        if (s->u.layout.to_dense)
            return kern_nhwc8_to_nchw(in[0], x->dtype, out, y->dtype, nhwc->dims[0],
                                      nhwc->dims[1], nhwc->dims[2], nhwc->dims[3], stream);
        return kern_nchw_to_nhwc8(in[0], x->dtype, out, y->dtype, nhwc->dims[0], nhwc->dims[1],
                                  nhwc->dims[2], nhwc->dims[3], stream);
    }
    case PLAN_STEP_CAST:
        return kern_cast(in[0], tensor_of(p, s->inputs[0])->dtype, out, y->dtype,
                         s->u.cast.count, stream);
    case PLAN_STEP_SOFTMAX:
        return s->u.softmax.log ? kern_log_softmax_rows_dtype(in[0], out, s->u.softmax.rows,
                                                              s->u.softmax.length, y->dtype, stream)
                                : kern_softmax_rows_dtype(in[0], out, s->u.softmax.rows,
                                                          s->u.softmax.length, y->dtype, stream);
    case PLAN_STEP_LAYERNORM:
        return kern_layernorm_rows_dtype(in[0], in[1], s->u.layernorm.has_bias ? in[2] : NULL, out,
                                         NULL, NULL, s->u.layernorm.rows, s->u.layernorm.length,
                                         s->u.layernorm.epsilon, y->dtype, stream);
    case PLAN_STEP_REDUCE: {
        unsigned mask = 0;
        for (int i = 0; i < s->u.reduce.view.rank; i++)
            if (s->u.reduce.reduce_dim[i]) mask |= 1u << i;
        return kern_reduce_dtype(in[0], out, s->u.reduce.view.rank, s->u.reduce.view.dims, mask,
                                 s->u.reduce.mean ? KERN_REDUCE_MEAN : KERN_REDUCE_SUM, y->dtype,
                                 stream);
    }
    case PLAN_STEP_RESIZE: {
        static const kern_resize_coord coords[] = {
            KERN_RESIZE_HALF_PIXEL, KERN_RESIZE_PYTORCH_HALF_PIXEL, KERN_RESIZE_ALIGN_CORNERS,
            KERN_RESIZE_ASYMMETRIC, KERN_RESIZE_HALF_PIXEL_SYMMETRIC};
        static const kern_resize_rounding roundings[] = {
            KERN_RESIZE_ROUND_PREFER_FLOOR, KERN_RESIZE_ROUND_PREFER_CEIL, KERN_RESIZE_FLOOR,
            KERN_RESIZE_CEIL, KERN_RESIZE_ROUND_LEGACY};
        kern_resize_desc d;
        memset(&d, 0, sizeof d);
        d.dtype = y->dtype;
        d.n = s->u.resize.n;
        d.c = s->u.resize.c;
        d.in_h = s->u.resize.h;
        d.in_w = s->u.resize.w;
        d.out_h = s->u.resize.out_h;
        d.out_w = s->u.resize.out_w;
        d.scale_h = s->u.resize.scale_h;
        d.scale_w = s->u.resize.scale_w;
        d.mode = s->u.resize.linear ? KERN_RESIZE_LINEAR : KERN_RESIZE_NEAREST;
        d.coord = coords[s->u.resize.coord_mode];
        d.rounding = roundings[s->u.resize.nearest_mode];
        return kern_resize_nhwc8(in[0], out, &d, stream);
    }
    case PLAN_STEP_GATHER:
        return kern_gather(out, in[0], in[1], tensor_of(p, s->inputs[1])->dtype == TCI_DTYPE_INT32,
                           s->u.gather.outer, s->u.gather.axis_dim, s->u.gather.inner,
                           s->u.gather.num_indices, (int)s->u.gather.elem_size, c->gather_error,
                           stream);
    case PLAN_STEP_PAD: {
        static const kern_pad_mode modes[] = {KERN_PAD_CONSTANT, KERN_PAD_REFLECT, KERN_PAD_EDGE};
        return kern_pad(out, in[0], s->u.pad.rank, s->u.pad.dims, s->u.pad.pads_begin,
                        s->u.pad.pads_end, modes[s->u.pad.mode],
                        fill_bits(y->dtype, s->u.pad.value), (int)s->u.pad.elem_size, stream);
    }
    }
    return tci_error(TCI_ERR_INTERNAL, "unknown plan step kind %d", (int)s->kind);
}

static tci_status step_error(const plan_step *s, tci_status st) {
    if (st == TCI_OK) return st;
    return tci_error_prefix(st, "GPU step '%s' (%s) of node '%s'", s->label, s->node->op_type,
                            s->node->name);
}

/* ---- engine ---- */

static tci_status upload(const void *host, size_t bytes, void **out) {
    *out = NULL;
    KERN_CUDA_CHECK(cudaMalloc(out, bytes ? bytes : 1));
    if (bytes) KERN_CUDA_CHECK(cudaMemcpy(*out, host, bytes, cudaMemcpyHostToDevice));
    return TCI_OK;
}

static tci_status pack_depthwise(exec_gpu_engine *e, int index) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[index];
    kern_depthwise_desc d;
    bool fp32 = step_fp32(p, s);
    depthwise_desc_of(&s->u.conv, e->impl[index].dtype, &d);
    int64_t cp = plan_pad8(s->u.conv.c);
    size_t wbytes = (size_t)(s->u.conv.r * s->u.conv.s * cp) * (fp32 ? 4 : 2), bbytes = (size_t)cp * 4;
    void *hw = malloc(wbytes);
    float *hb = malloc(bbytes);
    tci_status st = hw && hb ? TCI_OK : tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory packing weights");
    const float *weights = tensor_of(p, s->inputs[1])->host_data;
    if (st == TCI_OK)
        st = fp32                              ? kern_depthwise_pack_weights_f32(&d, weights, hw)
             : d.dtype == TCI_DTYPE_BFLOAT16 ? kern_depthwise_pack_weights_bf16(&d, weights, hw)
                                             : kern_depthwise_pack_weights(&d, weights, hw);
    if (st == TCI_OK) st = kern_depthwise_pack_bias(&d, tensor_of(p, s->inputs[2])->host_data, hb);
    if (st == TCI_OK) st = upload(hw, wbytes, &e->impl[index].weights);
    if (st == TCI_OK) st = upload(hb, bbytes, &e->impl[index].bias);
    free(hw);
    free(hb);
    return st;
}

static tci_status pack_conv(exec_gpu_engine *e, int index) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[index];
    if (s->u.conv.depthwise) return pack_depthwise(e, index);
    kern_conv_desc d;
    bool fp32 = step_fp32(p, s);
    conv_desc_of(e, &s->u.conv, e->impl[index].dtype, &d);
    /* the packing does not depend on the padding; cuDNN's own refusal of asymmetric pads comes
     * at plan creation, where the WMMA kernels can still take the layer */
    d.pads[2] = d.pads[0];
    d.pads[3] = d.pads[1];
    kern_conv_info info;
    TCI_TRY(kern_conv_shapes(&d, &info));
    size_t elem = fp32 ? 4 : 2;
    size_t wbytes = info.weight_elements * elem, bbytes = info.bias_elements * elem;
    size_t kp = (size_t)plan_pad8(s->u.conv.k);
    void *hw = malloc(wbytes ? wbytes : 1), *hb = malloc(bbytes ? bbytes : 1);
    float *hf = calloc(kp + 1, sizeof(float));
    tci_status st = hw && hb && hf ? TCI_OK : tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory packing weights");
    const float *bias = tensor_of(p, s->inputs[2])->host_data;
    if (st == TCI_OK) st = kern_conv_pack_weights(&d, tensor_of(p, s->inputs[1])->host_data, hw);
    if (st == TCI_OK) st = kern_conv_pack_bias(&d, bias, hb);
    if (st == TCI_OK) st = upload(hw, wbytes, &e->impl[index].weights);
    if (st == TCI_OK) st = upload(hb, bbytes, &e->impl[index].bias);
    if (st == TCI_OK && !fp32 && e->kernels != TCI_KERNELS_LIBRARY) {
        for (int64_t k = 0; k < s->u.conv.k; k++) hf[k] = bias[k];
        st = upload(hf, kp * sizeof(float), &e->impl[index].bias_f32);
    }
    free(hw);
    free(hb);
    free(hf);
    return st;
}

static tci_status pack_conv_transpose(exec_gpu_engine *e, int index) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[index];
    kern_convt_desc d;
    bool fp32 = step_fp32(p, s);
    convt_desc_of(e, &s->u.conv, e->impl[index].dtype, &d);
    kern_convt_info info;
    TCI_TRY(kern_convt_shapes(&d, &info));
    size_t elem = fp32 ? 4 : 2;
    size_t wbytes = info.weight_elements * elem, bbytes = info.bias_elements * elem;
    void *hw = malloc(wbytes ? wbytes : 1), *hb = malloc(bbytes ? bbytes : 1);
    tci_status st = hw && hb ? TCI_OK : tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory packing weights");
    if (st == TCI_OK) st = kern_convt_pack_weights(&d, tensor_of(p, s->inputs[1])->host_data, hw);
    if (st == TCI_OK) st = kern_convt_pack_bias(&d, tensor_of(p, s->inputs[2])->host_data, hb);
    if (st == TCI_OK) st = upload(hw, wbytes, &e->impl[index].weights);
    if (st == TCI_OK) st = upload(hb, bbytes, &e->impl[index].bias);
    free(hw);
    free(hb);
    return st;
}

static tci_status pack_gemm_bias(exec_gpu_engine *e, int index) {
    const plan_step *s = &e->plan->steps[index];
    if (s->inputs[2] < 0) return TCI_OK;
    const plan_tensor *t = tensor_of(e->plan, s->inputs[2]);
    int64_t n = count_of(t);
    if (step_fp32(e->plan, s)) return upload(t->host_data, (size_t)n * 4, &e->impl[index].bias);
    if (e->kernels != TCI_KERNELS_LIBRARY)
        TCI_TRY(upload(t->host_data, (size_t)n * 4, &e->impl[index].bias_f32));
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    if (!h) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    bool bf16 = e->impl[index].dtype == TCI_DTYPE_BFLOAT16;
    for (int64_t i = 0; i < n; i++) {
        float v = ((const float *)t->host_data)[i];
        h[i] = bf16 ? op_float_to_bfloat16(v) : op_float_to_half(v);
    }
    tci_status st = upload(h, (size_t)n * 2, &e->impl[index].bias);
    free(h);
    return st;
}

/* ---- the timing cache ---- */

tci_status exec_gpu_machine(char *buf, size_t size) {
    int device = 0, runtime = 0;
    struct cudaDeviceProp prop;
    KERN_CUDA_CHECK(cudaGetDevice(&device));
    KERN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    KERN_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    /* the WMMA choices are config indices: a build with other configs must not reuse them */
    uint32_t tables = 2166136261u;
    int nc = kern_wmma_conv_config_count(), ng = kern_wmma_gemm_config_count();
    int nw = kern_wgmma_gemm_config_count();
    for (int i = 0; i < nc + ng + nw; i++) {
        const char *name = i < nc        ? kern_wmma_conv_config_name(i)
                           : i < nc + ng ? kern_wmma_gemm_config_name(i - nc)
                                         : kern_wgmma_gemm_config_name(i - nc - ng);
        for (const char *c = name; *c; c++) tables = (tables ^ (unsigned char)*c) * 16777619u;
    }
    snprintf(buf, size,
             "%s\tsm_%d%d\tcudart %d\tcudnn %zu\tcublasLt %zu\twmma %d+%d+%d configs %08x",
             prop.name, prop.major, prop.minor, runtime, cudnnGetVersion(), cublasLtGetVersion(),
             nc, ng, nw, tables);
    return TCI_OK;
}

static tci_status cache_header(char *buf, size_t size) {
    int n = snprintf(buf, size, "tcinfer timing cache 1\t");
    return exec_gpu_machine(buf + n, size - (size_t)n);
}

static void cache_free(timing_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->count; i++) {
        free(c->entries[i].key);
        free(c->entries[i].value);
    }
    free(c->entries);
    free(c);
}

static cache_entry *cache_find(const timing_cache *c, const char *key) {
    for (int i = 0; c && i < c->count; i++)
        if (strcmp(c->entries[i].key, key) == 0) return &c->entries[i];
    return NULL;
}

static const char FRESH[] = "timed on an identical layer";

static tci_status cache_put(timing_cache *c, const char *key, const char *value, float library_ms,
                            float wmma_ms, const char *origin) {
    cache_entry *e = cache_find(c, key);
    if (!e) {
        if (c->count == c->cap) {
            int cap = c->cap ? 2 * c->cap : 64;
            cache_entry *grown = realloc(c->entries, (size_t)cap * sizeof *grown);
            if (!grown) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
            c->entries = grown;
            c->cap = cap;
        }
        e = &c->entries[c->count];
        e->key = strdup(key);
        e->value = NULL;
        if (!e->key) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        c->count++;
    }
    free(e->value);
    e->value = strdup(value);
    if (!e->value) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    e->library_ms = library_ms;
    e->wmma_ms = wmma_ms;
    e->origin = origin;
    return TCI_OK;
}

/* One "key TAB choice TAB library_ms TAB wmma_ms" line into c; origin names where it comes
 * from, in errors and reports. */
static tci_status cache_parse_line(timing_cache *c, char *line, const char *origin) {
    line[strcspn(line, "\n")] = '\0';
    if (!line[0]) return TCI_OK;
    char *save = NULL;
    char *key = strtok_r(line, "\t", &save), *value = strtok_r(NULL, "\t", &save),
         *lib = strtok_r(NULL, "\t", &save), *wmma = strtok_r(NULL, "\t", &save);
    if (!key || !value || !lib || !wmma)
        return tci_error(TCI_ERR_PARSE, "%s: malformed kernel choice '%s'", origin, line);
    return cache_put(c, key, value, strtof(lib, NULL), strtof(wmma, NULL), origin);
}

/* Reads the cache at path (NULL: none, an in-memory cache). A missing file is an empty cache;
 * one written on another GPU model or with other library versions (another header) is not
 * used, and is replaced on save. choices (may be NULL): lines of choices known to be valid here
 * (an engine file's), added first. */
static tci_status cache_load(const char *path, const char *choices, timing_cache **out) {
    *out = NULL;
    timing_cache *c = calloc(1, sizeof *c);
    if (!c) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    c->path = path;
    tci_status st = cache_header(c->header, sizeof c->header);
    char *text = st == TCI_OK && choices ? strdup(choices) : NULL;
    if (choices && !text && st == TCI_OK) st = tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    char *save = NULL;
    for (char *line = text ? strtok_r(text, "\n", &save) : NULL; st == TCI_OK && line;
         line = strtok_r(NULL, "\n", &save))
        st = cache_parse_line(c, line, "engine file");
    free(text);
    FILE *f = st == TCI_OK && path ? fopen(path, "r") : NULL;
    char line[1024];
    bool valid = false;
    if (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        valid = strcmp(line, c->header) == 0;
    }
    while (st == TCI_OK && valid && fgets(line, sizeof line, f)) {
        st = cache_parse_line(c, line, "timing cache");
        if (st != TCI_OK) tci_error_prefix(st, "%s", path);
    }
    if (f) fclose(f);
    if (st != TCI_OK) {
        cache_free(c);
        return st;
    }
    *out = c;
    return TCI_OK;
}

/* Writes every entry (those loaded and those this engine added) through a temporary file. */
static tci_status cache_save(const timing_cache *c) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", c->path);
    FILE *f = fopen(tmp, "w");
    if (!f) return tci_error(TCI_ERR_IO, "cannot write the timing cache %s", tmp);
    bool ok = fprintf(f, "%s\n", c->header) > 0;
    for (int i = 0; ok && i < c->count; i++)
        ok = fprintf(f, "%s\t%s\t%.6f\t%.6f\n", c->entries[i].key, c->entries[i].value,
                     c->entries[i].library_ms, c->entries[i].wmma_ms) > 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, c->path) != 0) {
        remove(tmp);
        return tci_error(TCI_ERR_IO, "cannot write the timing cache %s", c->path);
    }
    return TCI_OK;
}

/* The problem a conv or GEMM step poses, as a cache key: every field its kernel choice depends
 * on, the kernel families allowed, and the precision. */
static void problem_key(const exec_gpu_engine *e, const plan_step *s, char *buf, size_t size) {
    bool fp32 = step_fp32(e->plan, s);
    const char *half = e->options.bf16 ? "bf16" : "fp16";
    if (s->kind == PLAN_STEP_GEMM) {
        const plan_gemm *g = &s->u.gemm;
        snprintf(buf, size,
                 "gemm %s k%d b%" PRId64 " m%" PRId64 " n%" PRId64 " k%" PRId64 " t%d%d ld%" PRId64
                 ",%" PRId64 ",%" PRId64 " st%" PRId64 ",%" PRId64 ",%" PRId64 " a%g bias%d act%d,%g,%g",
                 fp32 ? (e->options.tf32 ? "tf32" : "fp32") : half, (int)e->kernels, g->batch, g->m, g->n, g->k, g->trans_a,
                 g->trans_b, g->lda, g->ldb, g->ldc, g->stride_a, g->stride_b, g->stride_c,
                 g->alpha, g->has_bias, (int)g->act.kind, g->act.alpha, g->act.beta);
        return;
    }
    const plan_conv *c = &s->u.conv;
    plan_activation a = conv_activation(c);
    snprintf(buf, size,
             "conv %s k%d n%" PRId64 " c%" PRId64 " %" PRId64 "x%" PRId64 " k%" PRId64 " %" PRId64
             "x%" PRId64 " o%" PRId64 "x%" PRId64 " p%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
             " s%" PRId64 ",%" PRId64 " d%" PRId64 ",%" PRId64 " g%" PRId64 " b%d z%d act%d,%d,%g,%g",
             fp32 ? (e->options.tf32 ? "tf32" : "fp32") : half, (int)e->kernels, c->n, c->c, c->h, c->w, c->k, c->r, c->s,
             c->out_h, c->out_w, c->pad_top, c->pad_left, c->pad_bottom, c->pad_right,
             c->stride_h, c->stride_w, c->dilation_h, c->dilation_w, c->groups, c->has_bias,
             c->has_residual, (int)c->act.kind, (int)a.kind, a.alpha, a.beta);
}

/* One candidate of a convolution or GEMM step, launched on a stream (for timing). */
typedef struct kernel_trial {
    const plan_step *step;
    const step_impl *impl;
    int wmma;                  /* config, or -1 for the library plan */
    cudnnHandle_t cudnn;
    cublasLtHandle_t lt;
    const void *x, *z;         /* conv: input and residual; GEMM: A and B */
    void *y, *workspace;
} kernel_trial;

static tci_status launch_trial(const kernel_trial *t, cudaStream_t stream) {
    if (t->step->kind == PLAN_STEP_GEMM) {
        const plan_gemm *g = &t->step->u.gemm;
        if (t->wmma < 0)
            return kern_gemm_run(t->impl->gemm, t->lt, stream, 0, 0, t->x, t->z, NULL, t->y,
                                 t->impl->bias, t->workspace, WORKSPACE_LIMIT);
        return run_wmma_gemm(g, t->wmma, t->impl, t->x, t->z, t->y, stream);
    }
    const plan_conv *c = &t->step->u.conv;
    if (t->wmma < 0)
        return kern_conv_run(t->impl->conv, t->cudnn, stream, (int)c->n, t->x, t->impl->weights,
                             t->impl->bias, t->z, t->y, t->workspace, WORKSPACE_LIMIT);
    kern_wmma_conv_desc d;
    wmma_desc_of(c, t->impl->dtype, &d);
    return kern_wmma_conv_run(&d, t->wmma, c->n, t->x, t->impl->weights, t->impl->bias_f32, t->z,
                              t->y, t->workspace, WORKSPACE_LIMIT, stream);
}

/* Time of one run of a candidate as the engine runs it, inside a CUDA graph: one checked
 * eager run, then ITERS runs captured in a graph, the best of ROUNDS replays. Timing eager
 * calls would count host overhead that graph replay hides (cuDNN's is tens of microseconds a
 * call, more than many batch-1 layers take). */
static tci_status time_trial(const kernel_trial *t, cudaStream_t stream, float *out_ms) {
    enum { ROUNDS = 3, ITERS = 5 };
    *out_ms = -1.0f;
    TCI_TRY(launch_trial(t, stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    KERN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    tci_status st = TCI_OK;
    for (int i = 0; st == TCI_OK && i < ITERS; i++) st = launch_trial(t, stream);
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (st == TCI_OK && end != cudaSuccess)
        st = tci_error(TCI_ERR_CUDA, "capturing a convolution for timing: %s", cudaGetErrorString(end));
    if (st == TCI_OK && (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess ||
                         cudaEventCreate(&start) != cudaSuccess ||
                         cudaEventCreate(&stop) != cudaSuccess))
        st = tci_error(TCI_ERR_CUDA, "preparing the timing of a convolution failed");
    for (int r = 0; st == TCI_OK && r <= ROUNDS; r++) { /* round 0 warms the graph up */
        float ms = 0.0f;
        if (cudaEventRecord(start, stream) != cudaSuccess ||
            cudaGraphLaunch(exec, stream) != cudaSuccess ||
            cudaEventRecord(stop, stream) != cudaSuccess ||
            cudaEventSynchronize(stop) != cudaSuccess ||
            cudaEventElapsedTime(&ms, start, stop) != cudaSuccess)
            st = tci_error(TCI_ERR_CUDA, "timing a convolution failed");
        ms /= ITERS;
        if (st == TCI_OK && r > 0 && (*out_ms < 0.0f || ms < *out_ms)) *out_ms = ms;
    }
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    return st;
}

/* Whether WMMA config cfg runs the trial's step (conv: within the workspace limit too). */
static bool wmma_applies(const kernel_trial *t, int cfg) {
    if (t->step->kind == PLAN_STEP_GEMM) {
        kern_wmma_gemm_desc d;
        wmma_gemm_desc_of(&t->step->u.gemm, t->impl->dtype, &d);
        if (cfg == WMMA_TF32) return kern_wmma_variant_supports(&d, KERN_WMMA_TF32_16X16X8) == TCI_OK;
        if (cfg >= WGMMA)
            return kern_wgmma_gemm_supports(&d, cfg - WGMMA) == TCI_OK && wgmma_device();
        return kern_wmma_gemm_supports(&d, cfg) == TCI_OK;
    }
    kern_wmma_conv_desc d;
    wmma_desc_of(&t->step->u.conv, t->impl->dtype, &d);
    return kern_wmma_conv_supports(&d, cfg) == TCI_OK &&
           kern_wmma_conv_workspace(&d, cfg) <= WORKSPACE_LIMIT;
}

/* Times every WMMA config that applies to the trial's step; *best is -1 when none does. A
 * config the device cannot run (more shared memory than it grants) is passed over. */
static tci_status fastest_wmma(kernel_trial *t, cudaStream_t stream, bool tf32, int *best,
                               float *best_ms) {
    bool gemm = t->step->kind == PLAN_STEP_GEMM;
    int nw = gemm && !tf32 && t->impl->dtype == TCI_DTYPE_FLOAT16 && wgmma_device()
                 ? kern_wgmma_gemm_config_count()
                 : 0;
    int count = tf32 ? 1 : gemm ? kern_wmma_gemm_config_count() + nw : kern_wmma_conv_config_count();
    *best = -1;
    *best_ms = 0.0f;
    for (int k = 0; k < count; k++) {
        /* the WMMA configs, then the wgmma ones */
        int cfg = tf32 ? WMMA_TF32 : k >= count - nw ? WGMMA + k - (count - nw) : k;
        if (!wmma_applies(t, cfg)) continue;
        float ms = -1.0f;
        t->wmma = cfg;
        tci_status st = time_trial(t, stream, &ms);
        if (st == TCI_ERR_UNSUPPORTED) continue;
        TCI_TRY(st);
        if (*best < 0 || ms < *best_ms) {
            *best = cfg;
            *best_ms = ms;
        }
    }
    t->wmma = -1;
    return TCI_OK;
}

/* Records the contest's outcome in the step: WMMA config `best` (or the library plan, when it
 * is at least as fast under TCI_KERNELS_AUTO) and both times for --info / --profile. */
static void keep_fastest(step_impl *im, tci_kernels kernels, bool library_ok, int best,
                         float best_ms, const char *wmma_name, const char *library) {
    im->wmma_ms = best < 0 ? -1.0f : best_ms;
    if (best < 0) return;
    if (library_ok && kernels == TCI_KERNELS_AUTO && im->library_ms <= best_ms) {
        snprintf(im->text, sizeof im->text, "%s (%.1f us; best tcinfer kernel %.1f us)", im->kernel,
                 1e3 * im->library_ms, 1e3 * best_ms);
    } else {
        im->wmma = best;
        if (library_ok)
            snprintf(im->text, sizeof im->text, "%s (%.1f us; %s %s %.1f us)", wmma_name,
                     1e3 * best_ms, library, im->kernel, 1e3 * im->library_ms);
        else
            snprintf(im->text, sizeof im->text, "%s (%.1f us; %s refuses the layer)", wmma_name,
                     1e3 * best_ms, library);
    }
    im->kernel = im->text;
}

/* Chooses how a (non-depthwise) convolution runs: cuDNN's algorithm (its pick among its own)
 * against every WMMA config that applies, each timed inside a CUDA graph on the same buffers;
 * the faster wins (TCI_KERNELS_AUTO), or the family the engine was told to use. cuDNN refusing
 * the layer (asymmetric pads) leaves it to WMMA. */
static tci_status time_conv(exec_gpu_engine *e, int i, cudnnHandle_t cudnn, cudaStream_t stream,
                            void *arena, void *workspace) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[i];
    step_impl *im = &e->impl[i];
    bool fp32 = step_fp32(p, s);
    bool try_wmma = !fp32 && e->kernels != TCI_KERNELS_LIBRARY;
    kernel_trial trial = {s, im, -1, cudnn, NULL, device_ptr(e, arena, s->inputs[0]),
                        s->u.conv.has_residual ? device_ptr(e, arena, s->inputs[3]) : NULL,
                        device_ptr(e, arena, s->outputs[0]), workspace};
    tci_status lib = TCI_ERR_UNSUPPORTED;
    if (e->kernels != TCI_KERNELS_WMMA || !try_wmma) {
        kern_conv_desc d;
        conv_desc_of(e, &s->u.conv, im->dtype, &d);
        kern_conv_scratch scratch = {trial.x, im->weights, im->bias, trial.z, trial.y, workspace,
                                     WORKSPACE_LIMIT};
        lib = kern_conv_create(cudnn, stream, &d, &scratch, &im->conv);
        if (lib != TCI_OK && (lib != TCI_ERR_UNSUPPORTED || !try_wmma)) return lib;
        if (lib == TCI_OK) {
            kern_conv_info info;
            kern_conv_get_info(im->conv, &info);
            im->kernel = info.algorithm;
            if (info.workspace_bytes > e->workspace_bytes) e->workspace_bytes = info.workspace_bytes;
            /* cuDNN chose its algorithm by eager timing; the contest is held in graphs */
            if (try_wmma) TCI_TRY(time_trial(&trial, stream, &im->library_ms));
        }
    }
    if (!try_wmma) return lib;
    int best;
    float best_ms;
    TCI_TRY(fastest_wmma(&trial, stream, false, &best, &best_ms));
    if (best < 0 && lib != TCI_OK)
        return tci_error(TCI_ERR_UNSUPPORTED,
                         "neither cuDNN nor a WMMA kernel runs this convolution (%" PRId64
                         " groups of %" PRId64 " -> %" PRId64 " channels)",
                         s->u.conv.groups, s->u.conv.c, s->u.conv.k);
    keep_fastest(im, e->kernels, lib == TCI_OK, best, best_ms,
                 best < 0 ? NULL : kern_wmma_conv_config_name(best), "cuDNN");
    if (im->wmma >= 0) {
        kern_wmma_conv_desc wd;
        wmma_desc_of(&s->u.conv, im->dtype, &wd);
        size_t ws = kern_wmma_conv_workspace(&wd, im->wmma);
        if (ws > e->workspace_bytes) e->workspace_bytes = ws;
    }
    return TCI_OK;
}

/* A GEMM step: cuBLASLt's plan (its algorithm chosen by its own timing) against every WMMA
 * config, each timed inside a CUDA graph; the faster wins (TCI_KERNELS_AUTO) or the family the
 * engine was told to use. */
static tci_status time_gemm(exec_gpu_engine *e, int i, cublasLtHandle_t lt, cudaStream_t stream,
                            void *arena, void *workspace) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[i];
    step_impl *im = &e->impl[i];
    bool fp32 = step_fp32(p, s);
    kern_gemm_desc d;
    gemm_desc_of(e, &s->u.gemm, im->dtype, &d);
    kernel_trial trial = {s, im, -1, NULL, lt, device_ptr(e, arena, s->inputs[0]),
                        device_ptr(e, arena, s->inputs[1]), device_ptr(e, arena, s->outputs[0]),
                        workspace};
    kern_gemm_scratch scratch = {trial.x, trial.z, NULL, im->bias, trial.y, workspace,
                                 WORKSPACE_LIMIT};
    TCI_TRY(kern_gemm_create(lt, stream, &d, &scratch, &im->gemm));
    kern_gemm_info info;
    kern_gemm_get_info(im->gemm, &info);
    im->kernel = info.algorithm;
    if (info.workspace_bytes > e->workspace_bytes) e->workspace_bytes = info.workspace_bytes;
    /* fp32 steps: the WMMA tf32 kernel in --precision tf32, else the library alone */
    bool tf32 = fp32 && e->options.tf32;
    if ((fp32 && !tf32) || e->kernels == TCI_KERNELS_LIBRARY) return TCI_OK;
    TCI_TRY(time_trial(&trial, stream, &im->library_ms));
    int best;
    float best_ms;
    TCI_TRY(fastest_wmma(&trial, stream, tf32, &best, &best_ms));
    char name[80] = "";
    if (best >= 0) gemm_config_name(best, name, sizeof name);
    keep_fastest(im, e->kernels, true, best, best_ms, name, "cuBLASLt");
    return TCI_OK;
}

/* "NAME (ORIGIN: T us; OTHER T2 us)" for a step taken from the cache or an identical layer,
 * leaving out the times that were never measured (negative: the family was not timed). */
static void describe_reused(char *out, size_t size, const char *name, const char *origin,
                            float ms, const char *other, float other_ms) {
    int n = snprintf(out, size, "%s (%s", name, origin);
    if (n >= 0 && (size_t)n < size && ms >= 0.0f)
        n += snprintf(out + n, size - (size_t)n, ": %.1f us", 1e3 * ms);
    if (n >= 0 && (size_t)n < size && other_ms >= 0.0f)
        n += snprintf(out + n, size - (size_t)n, "; %s %.1f us", other, 1e3 * other_ms);
    if (n >= 0 && (size_t)n < size) snprintf(out + n, size - (size_t)n, ")");
}

/* The choice a cache entry records, made real without timing: the WMMA config, or the library
 * plan created with the recorded algorithm. TCI_ERR_UNSUPPORTED when it no longer applies. */
static tci_status apply_cached(exec_gpu_engine *e, int i, const cache_entry *hit,
                               cudnnHandle_t cudnn, cublasLtHandle_t lt, cudaStream_t stream,
                               void *arena, void *workspace) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[i];
    step_impl *im = &e->impl[i];
    bool gemm = s->kind == PLAN_STEP_GEMM, fp32 = step_fp32(p, s);
    kernel_trial t = {s, im, -1, cudnn, lt, NULL, NULL, NULL, workspace};
    const char *origin = hit->origin;
    int cfg = -1;
    if (sscanf(hit->value, "wmma %d", &cfg) == 1) {
        bool tf32 = cfg == WMMA_TF32;
        if (cfg < 0 || tf32 != fp32 || (tf32 && (!gemm || !e->options.tf32)) ||
            !wmma_applies(&t, cfg))
            return tci_error(TCI_ERR_UNSUPPORTED, "cached WMMA config %d does not apply", cfg);
        im->wmma = cfg;
        if (!gemm) {
            kern_wmma_conv_desc wd;
            wmma_desc_of(&s->u.conv, im->dtype, &wd);
            size_t ws = kern_wmma_conv_workspace(&wd, cfg);
            if (ws > e->workspace_bytes) e->workspace_bytes = ws;
        }
        char name[80];
        if (gemm) gemm_config_name(cfg, name, sizeof name);
        else snprintf(name, sizeof name, "%s", kern_wmma_conv_config_name(cfg));
        describe_reused(im->text, sizeof im->text, name, origin, hit->wmma_ms,
                        gemm ? "cuBLASLt" : "cuDNN", hit->library_ms);
    } else if (gemm) {
        unsigned char algo[KERN_GEMM_ALGO_BYTES];
        const char *hex = strchr(hit->value, ' ');
        for (int b = 0; b < KERN_GEMM_ALGO_BYTES; b++) {
            unsigned v = 0;
            if (!hex || sscanf(hex + 1 + 2 * b, "%2x", &v) != 1)
                return tci_error(TCI_ERR_UNSUPPORTED, "malformed cached cuBLASLt algorithm");
            algo[b] = (unsigned char)v;
        }
        kern_gemm_desc d;
        gemm_desc_of(e, &s->u.gemm, im->dtype, &d);
        d.use_algo = algo;
        kern_gemm_scratch scratch = {device_ptr(e, arena, s->inputs[0]),
                                     device_ptr(e, arena, s->inputs[1]), NULL, im->bias,
                                     device_ptr(e, arena, s->outputs[0]), workspace,
                                     WORKSPACE_LIMIT};
        TCI_TRY(kern_gemm_create(lt, stream, &d, &scratch, &im->gemm));
        kern_gemm_info info;
        kern_gemm_get_info(im->gemm, &info);
        if (info.workspace_bytes > e->workspace_bytes) e->workspace_bytes = info.workspace_bytes;
        describe_reused(im->text, sizeof im->text, info.algorithm, origin, hit->library_ms,
                        "best tcinfer kernel", hit->wmma_ms);
    } else {
        kern_conv_desc d;
        conv_desc_of(e, &s->u.conv, im->dtype, &d);
        d.use_choice = 1;
        if (sscanf(hit->value, "cudnn %d %d %d", &d.choice.algo, &d.choice.math,
                   &d.choice.fused) != 3)
            return tci_error(TCI_ERR_UNSUPPORTED, "malformed cached cuDNN choice");
        kern_conv_scratch scratch = {device_ptr(e, arena, s->inputs[0]), im->weights, im->bias,
                                     s->u.conv.has_residual ? device_ptr(e, arena, s->inputs[3])
                                                            : NULL,
                                     device_ptr(e, arena, s->outputs[0]), workspace,
                                     WORKSPACE_LIMIT};
        TCI_TRY(kern_conv_create(cudnn, stream, &d, &scratch, &im->conv));
        kern_conv_info info;
        kern_conv_get_info(im->conv, &info);
        if (info.workspace_bytes > e->workspace_bytes) e->workspace_bytes = info.workspace_bytes;
        describe_reused(im->text, sizeof im->text, info.algorithm, origin, hit->library_ms,
                        "best tcinfer kernel", hit->wmma_ms);
    }
    im->library_ms = hit->library_ms;
    im->wmma_ms = hit->wmma_ms;
    im->kernel = im->text;
    return TCI_OK;
}

enum { CHOICE_BYTES = 2 * KERN_GEMM_ALGO_BYTES + 16 };

/* The kernel choice of a tuned step, as the timing cache stores it. */
static void choice_value(const exec_gpu_engine *e, int i, char *value, size_t size) {
    const step_impl *im = &e->impl[i];
    if (im->wmma >= 0) {
        snprintf(value, size, "wmma %d", im->wmma);
    } else if (e->plan->steps[i].kind == PLAN_STEP_GEMM) {
        kern_gemm_info info;
        kern_gemm_get_info(im->gemm, &info);
        int n = snprintf(value, size, "cublaslt ");
        for (int b = 0; b < KERN_GEMM_ALGO_BYTES; b++)
            n += snprintf(value + n, size - (size_t)n, "%02x", info.algo[b]);
    } else {
        kern_conv_info info;
        kern_conv_get_info(im->conv, &info);
        snprintf(value, size, "cudnn %d %d %d", info.choice.algo, info.choice.math,
                 info.choice.fused);
    }
}

/* Conv (not depthwise: our own kernel only) and GEMM steps choose their kernel by timing. */
static bool tuned_step(const plan_step *s) {
    return s->kind == PLAN_STEP_GEMM || (s->kind == PLAN_STEP_CONV && !s->u.conv.depthwise);
}

/* Tunes a conv or GEMM step: from the timing cache when it has the problem, else by timing
 * (and the choice goes into the cache). */
static tci_status tune_step(exec_gpu_engine *e, int i, cudnnHandle_t cudnn, cublasLtHandle_t lt,
                            cudaStream_t stream, void *arena, void *workspace) {
    const plan_step *s = &e->plan->steps[i];
    step_impl *im = &e->impl[i];
    char key[512];
    problem_key(e, s, key, sizeof key);
    const cache_entry *hit = e->cache ? cache_find(e->cache, key) : NULL;
    if (hit) {
        tci_status st = apply_cached(e, i, hit, cudnn, lt, stream, arena, workspace);
        if (st == TCI_OK) {
            /* the same problem as an earlier layer of this build takes its choice: identical
             * layers run identical kernels (and a saved engine reproduces them exactly) */
            if (hit->origin == FRESH) e->layers_timed++;
            else e->layers_cached++;
            return TCI_OK;
        }
        if (st != TCI_ERR_UNSUPPORTED) return st;
        /* stale for this machine after all: time it again (and overwrite the entry) */
        im->wmma = -1;
    }
    TCI_TRY(s->kind == PLAN_STEP_GEMM ? time_gemm(e, i, lt, stream, arena, workspace)
                                      : time_conv(e, i, cudnn, stream, arena, workspace));
    e->layers_timed++;
    char value[CHOICE_BYTES];
    choice_value(e, i, value, sizeof value);
    return cache_put(e->cache, key, value, im->library_ms, im->wmma_ms, FRESH);
}

/* Library plans are chosen by timing them on real buffers: a scratch arena stands in for a
 * context's. */
static tci_status create_library_plans(exec_gpu_engine *e) {
    const plan *p = e->plan;
    cudaStream_t stream = NULL;
    cudnnHandle_t cudnn = NULL;
    cublasLtHandle_t lt = NULL;
    void *arena = NULL, *workspace = NULL;
    tci_status st = TCI_OK;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudnnCreate(&cudnn) != CUDNN_STATUS_SUCCESS || cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS ||
        cudaMalloc(&arena, p->arena_bytes ? p->arena_bytes : 1) != cudaSuccess ||
        cudaMalloc(&workspace, WORKSPACE_LIMIT) != cudaSuccess)
        st = tci_error(TCI_ERR_CUDA, "cannot create the CUDA stream, library handles or scratch "
                                     "buffers (%zu + %d bytes) for tuning",
                       p->arena_bytes, WORKSPACE_LIMIT);
    if (st == TCI_OK && cudaMemset(arena, 0, p->arena_bytes ? p->arena_bytes : 1) != cudaSuccess)
        st = tci_error(TCI_ERR_CUDA, "cudaMemset of the tuning arena failed");
    for (int i = 0; st == TCI_OK && i < p->num_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (tuned_step(s)) {
            st = tune_step(e, i, cudnn, lt, stream, arena, workspace);
        } else if (s->kind == PLAN_STEP_CONV) { /* depthwise */
            e->impl[i].kernel = "tcinfer depthwise";
        } else if (s->kind == PLAN_STEP_CONV_TRANSPOSE) {
            kern_convt_desc d;
            convt_desc_of(e, &s->u.conv, e->impl[i].dtype, &d);
            kern_convt_scratch scratch = {device_ptr(e, arena, s->inputs[0]), e->impl[i].weights,
                                          e->impl[i].bias, device_ptr(e, arena, s->outputs[0]),
                                          workspace, WORKSPACE_LIMIT};
            st = kern_convt_create(cudnn, stream, &d, &scratch, &e->impl[i].convt);
            if (st == TCI_OK) {
                kern_convt_info info;
                kern_convt_get_info(e->impl[i].convt, &info);
                e->impl[i].kernel = info.algorithm;
                if (info.workspace_bytes > e->workspace_bytes) e->workspace_bytes = info.workspace_bytes;
            }
        }
        if (st != TCI_OK) st = step_error(s, st);
    }
    cudaFree(workspace);
    cudaFree(arena);
    if (lt) cublasLtDestroy(lt);
    if (cudnn) cudnnDestroy(cudnn);
    if (stream) cudaStreamDestroy(stream);
    return st;
}

tci_status exec_gpu_engine_create(const ir_graph *graph, const ir_graph *pristine,
                                  const plan_options *options, tci_kernels kernels,
                                  const char *timing_cache_path, const char *choices,
                                  exec_gpu_engine **out_engine) {
    *out_engine = NULL;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        cudaGetLastError();
        return tci_error(TCI_ERR_NO_DEVICE,
                         "no CUDA GPU is available here; use --backend cpu for the fp32 "
                         "reference executor");
    }
    exec_gpu_engine *e = calloc(1, sizeof *e);
    if (!e) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating the GPU engine");
    e->pristine = pristine;
    e->kernels = kernels;
    if (options) e->options = *options;
    tci_status st = plan_build(graph, options, &e->plan);
    if (st == TCI_OK) {
        size_t nt = (size_t)e->plan->num_tensors + 1, ns = (size_t)e->plan->num_steps + 1;
        e->constants = calloc(nt, sizeof(void *));
        e->owns_constant = calloc(nt, sizeof(bool));
        e->impl = calloc(ns, sizeof *e->impl);
        for (size_t i = 0; e->impl && i < ns; i++) {
            e->impl[i].wmma = -1;
            e->impl[i].library_ms = e->impl[i].wmma_ms = -1.0f;
            const plan_step *s = i < (size_t)e->plan->num_steps ? &e->plan->steps[i] : NULL;
            e->impl[i].dtype = s && s->num_outputs ? e->plan->tensors[s->outputs[0]].dtype
                                                   : TCI_DTYPE_UNDEFINED;
        }
        if (!e->constants || !e->owns_constant || !e->impl)
            st = tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating the GPU engine");
    }
    const plan *p = e->plan;
    /* conv weights/bias are packed per step; every other constant is uploaded as laid out */
    for (int i = 0; st == TCI_OK && i < p->num_steps; i++) {
        e->impl[i].kernel = plan_step_kernel(&p->steps[i]);
        if (p->steps[i].kind == PLAN_STEP_CONV) st = step_error(&p->steps[i], pack_conv(e, i));
        else if (p->steps[i].kind == PLAN_STEP_CONV_TRANSPOSE)
            st = step_error(&p->steps[i], pack_conv_transpose(e, i));
        else if (p->steps[i].kind == PLAN_STEP_GEMM) st = pack_gemm_bias(e, i);
    }
    for (int t = 0; st == TCI_OK && t < p->num_tensors; t++) {
        const plan_tensor *pt = &p->tensors[t];
        if (pt->memory != PLAN_MEM_CONSTANT || pt->packed_source) continue;
        st = upload(pt->host_data, pt->bytes, &e->constants[t]);
        e->owns_constant[t] = true;
    }
    if (st == TCI_OK) st = cache_load(timing_cache_path, choices, &e->cache);
    if (st == TCI_OK) st = create_library_plans(e);
    if (st == TCI_OK && timing_cache_path && e->layers_timed) st = cache_save(e->cache);
    cache_free(e->cache);
    e->cache = NULL;
    if (st != TCI_OK) {
        exec_gpu_engine_destroy(e);
        return st;
    }
    *out_engine = e;
    return TCI_OK;
}

void exec_gpu_engine_destroy(exec_gpu_engine *e) {
    if (!e) return;
    if (e->plan && !e->parent) {
        for (int i = 0; i < e->plan->num_steps; i++) {
            if (!e->impl) break;
            kern_conv_destroy(e->impl[i].conv);
            kern_gemm_destroy(e->impl[i].gemm);
            kern_convt_destroy(e->impl[i].convt);
            cudaFree(e->impl[i].weights);
            cudaFree(e->impl[i].bias);
            cudaFree(e->impl[i].bias_f32);
        }
    }
    for (int t = 0; e->plan && e->constants && e->owns_constant && t < e->plan->num_tensors; t++)
        if (e->owns_constant[t]) cudaFree(e->constants[t]);
    if (!e->parent) {
        free(e->impl);
    }
    free(e->constants);
    free(e->owns_constant);
    plan_destroy(e->plan);
    ir_graph_destroy(e->graph);
    free(e);
}

/* ---- batch variants ---- */

static bool same_conv_but_batch(const plan_conv *a, const plan_conv *b) {
    return b->n <= a->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k &&
           a->r == b->r && a->s == b->s && a->out_h == b->out_h && a->out_w == b->out_w &&
           a->pad_top == b->pad_top && a->pad_left == b->pad_left &&
           a->pad_bottom == b->pad_bottom && a->pad_right == b->pad_right &&
           a->stride_h == b->stride_h && a->stride_w == b->stride_w &&
           a->dilation_h == b->dilation_h && a->dilation_w == b->dilation_w &&
           a->groups == b->groups && a->has_bias == b->has_bias &&
           a->has_residual == b->has_residual && a->depthwise == b->depthwise &&
           a->act.kind == b->act.kind && a->act.alpha == b->act.alpha &&
           a->act.beta == b->act.beta && a->post_act.kind == b->post_act.kind &&
           a->post_act.alpha == b->post_act.alpha && a->post_act.beta == b->post_act.beta;
}

static bool same_gemm_but_batch(const plan_gemm *a, const plan_gemm *b) {
    kern_gemm_desc x, y; /* memset by gemm_desc_of, so padding compares equal */
    gemm_desc_of(NULL, a, TCI_DTYPE_FLOAT16, &x);
    gemm_desc_of(NULL, b, TCI_DTYPE_FLOAT16, &y);
    if (y.m > x.m || y.batch_count > x.batch_count) return false;
    y.m = x.m;
    y.batch_count = x.batch_count;
    return memcmp(&x, &y, sizeof x) == 0;
}

/* Whether the variant's step can run on the parent's packed weights and library plan. */
static bool step_matches(const plan_step *a, const plan_step *b) {
    if (a->kind != b->kind || strcmp(a->node->name, b->node->name) != 0 ||
        strcmp(a->label, b->label) != 0)
        return false;
    switch (a->kind) {
    case PLAN_STEP_CONV:
    case PLAN_STEP_CONV_TRANSPOSE: return same_conv_but_batch(&a->u.conv, &b->u.conv);
    case PLAN_STEP_GEMM: return same_gemm_but_batch(&a->u.gemm, &b->u.gemm);
    default: return true;
    }
}

/* The parent's device copy of constant t when the variant's is the same bytes in the same
 * layout (weights always are; shape-derived constants may differ with the batch). */
static void *borrow_constant(const exec_gpu_engine *parent, const plan_tensor *t, int index) {
    const plan *p = parent->plan;
    if (index >= p->num_tensors) return NULL;
    const plan_tensor *u = &p->tensors[index];
    if (u->memory != PLAN_MEM_CONSTANT || !parent->constants[index] || u->dtype != t->dtype ||
        u->layout != t->layout || u->bytes != t->bytes || strcmp(u->name, t->name) != 0)
        return NULL;
    if (t->bytes && (!u->host_data || !t->host_data || memcmp(u->host_data, t->host_data, t->bytes)))
        return NULL;
    return parent->constants[index];
}

/* Plans the pristine graph with input i's leading dim set to dim0[i] and ties the result to
 * the base engine's weights and library plans. A plan whose steps differ from the base's other
 * than in the batch (a model whose structure depends on the batch) is refused. */
static tci_status variant_create(const exec_gpu_engine *base, const int64_t *dim0,
                                 exec_gpu_engine **out) {
    *out = NULL;
    const plan *bp = base->plan;
    exec_gpu_engine *e = calloc(1, sizeof *e);
    if (!e) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory planning another batch");
    e->parent = base;
    tci_status st = ir_graph_clone(base->pristine, &e->graph);
    for (int i = 0; st == TCI_OK && i < bp->num_inputs; i++) {
        const char *name = bp->tensors[bp->input_tensors[i]].name;
        ir_tensor *t = ir_graph_find_tensor(e->graph, name);
        if (!t || !t->is_graph_input || t->rank < 1)
            st = tci_error(TCI_ERR_INTERNAL, "input '%s' is missing from the graph copy", name);
        else
            t->dims[0] = dim0[i];
    }
    if (st == TCI_OK) st = pass_optimize(e->graph);
    if (st == TCI_OK) st = plan_build(e->graph, &base->options, &e->plan);
    const plan *p = e->plan;
    if (st == TCI_OK && (p->num_steps != bp->num_steps || p->num_inputs != bp->num_inputs ||
                         p->num_outputs != bp->num_outputs))
        st = tci_error(TCI_ERR_UNSUPPORTED,
                       "the plan for batch %" PRId64 " has %d steps, the built one %d: the model's "
                       "structure depends on the batch; build the engine for this batch (--shape)",
                       dim0[0], p->num_steps, bp->num_steps);
    /* the context's staging buffers are sized for the base engine's inputs and outputs */
    for (int i = 0; st == TCI_OK && i < p->num_inputs + p->num_outputs; i++) {
        bool in = i < p->num_inputs;
        int k = in ? i : i - p->num_inputs;
        const plan_tensor *t = &p->tensors[in ? p->input_tensors[k] : p->output_tensors[k]];
        const plan_tensor *u = &bp->tensors[in ? bp->input_tensors[k] : bp->output_tensors[k]];
        if (count_of(t) > count_of(u) || t->dtype != u->dtype || t->rank != u->rank)
            st = tci_error(TCI_ERR_UNSUPPORTED,
                           "at batch %" PRId64 ", %s '%s' does not shrink with the batch; build "
                           "the engine for this batch (--shape)",
                           dim0[0], in ? "input" : "output", t->name);
    }
    for (int i = 0; st == TCI_OK && i < p->num_steps; i++)
        if (!step_matches(&bp->steps[i], &p->steps[i]))
            st = tci_error(TCI_ERR_UNSUPPORTED,
                           "at batch %" PRId64 ", step %d ('%s', node '%s') differs from the built "
                           "plan's other than in the batch; build the engine for this batch "
                           "(--shape)",
                           dim0[0], i, p->steps[i].label, p->steps[i].node->name);
    if (st == TCI_OK) {
        e->impl = base->impl;
        e->kernels = base->kernels;
        e->workspace_bytes = base->workspace_bytes;
        e->options = base->options;
        e->constants = calloc((size_t)p->num_tensors + 1, sizeof(void *));
        e->owns_constant = calloc((size_t)p->num_tensors + 1, sizeof(bool));
        if (!e->constants || !e->owns_constant)
            st = tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory planning another batch");
    }
    for (int t = 0; st == TCI_OK && t < p->num_tensors; t++) {
        const plan_tensor *pt = &p->tensors[t];
        if (pt->memory != PLAN_MEM_CONSTANT || pt->packed_source) continue;
        e->constants[t] = borrow_constant(base, pt, t);
        if (e->constants[t]) continue;
        st = upload(pt->host_data, pt->bytes, &e->constants[t]);
        e->owns_constant[t] = st == TCI_OK;
    }
    if (st != TCI_OK) {
        exec_gpu_engine_destroy(e);
        return st;
    }
    *out = e;
    return TCI_OK;
}

tci_status exec_gpu_engine_choices(const exec_gpu_engine *e, char **out_text) {
    *out_text = NULL;
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    if (!text) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    text[0] = '\0';
    for (int i = 0; i < e->plan->num_steps; i++) {
        const plan_step *s = &e->plan->steps[i];
        if (!tuned_step(s)) continue;
        char key[512], value[CHOICE_BYTES], line[1024];
        problem_key(e, s, key, sizeof key);
        choice_value(e, i, value, sizeof value);
        int n = snprintf(line, sizeof line, "%s\t%s\t%.6f\t%.6f\n", key, value,
                         e->impl[i].library_ms, e->impl[i].wmma_ms);
        if (len + (size_t)n + 1 > cap) {
            while (len + (size_t)n + 1 > cap) cap *= 2;
            char *grown = realloc(text, cap);
            if (!grown) {
                free(text);
                return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
            }
            text = grown;
        }
        memcpy(text + len, line, (size_t)n + 1);
        len += (size_t)n;
    }
    *out_text = text;
    return TCI_OK;
}

const plan *exec_gpu_engine_plan(const exec_gpu_engine *engine) { return engine->plan; }

void exec_gpu_engine_tuning(const exec_gpu_engine *engine, int *layers_timed, int *layers_cached) {
    *layers_timed = engine->layers_timed;
    *layers_cached = engine->layers_cached;
}

const char *exec_gpu_step_kernel(const exec_gpu_engine *engine, int step) {
    const char *k = engine->impl[step].kernel;
    return k ? k : "?";
}

/* ---- context ---- */

tci_status exec_gpu_context_create(const exec_gpu_engine *e, bool use_graph,
                                   exec_gpu_context **out_context) {
    *out_context = NULL;
    const plan *p = e->plan;
    exec_gpu_context *c = calloc(1, sizeof *c);
    if (!c) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating a GPU context");
    c->base = e;
    c->engine = e;
    c->use_graph = use_graph;
    c->arena_bytes = p->arena_bytes;
    tci_status st = TCI_OK;
    c->variants = calloc(1, sizeof *c->variants);
    if (c->variants) {
        c->num_variants = 1;
        c->variants[0].dim0 = calloc((size_t)p->num_inputs + 1, sizeof(int64_t));
        for (int i = 0; c->variants[0].dim0 && i < p->num_inputs; i++) {
            const plan_tensor *t = tensor_of(p, p->input_tensors[i]);
            c->variants[0].dim0[i] = t->rank ? t->dims[0] : 1;
        }
    }
    if (!c->variants || !c->variants[0].dim0)
        st = tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating a GPU context");
    c->input_staging = calloc((size_t)p->num_inputs + 1, sizeof(void *));
    c->output_staging = calloc((size_t)p->num_outputs + 1, sizeof(void *));
    c->outputs = calloc((size_t)p->num_outputs + 1, sizeof(tci_tensor));
    c->events = calloc((size_t)p->num_steps * 2 + 2, sizeof(cudaEvent_t));
    c->device_io = calloc((size_t)(p->num_inputs + p->num_outputs) + 1, sizeof(void *));
    c->copy_output = calloc((size_t)p->num_outputs + 1, sizeof(bool));
    if (!c->input_staging || !c->output_staging || !c->outputs || !c->events || !c->device_io ||
        !c->copy_output)
        st = tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating a GPU context");
#define CTX_CHECK(call)                                                                           \
    if (st == TCI_OK && (call) != 0)                                                              \
        st = tci_error(TCI_ERR_CUDA, "%s failed creating a GPU context", #call);
    CTX_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CTX_CHECK(cudnnCreate(&c->cudnn));
    CTX_CHECK(cublasLtCreate(&c->lt));
    CTX_CHECK(cudaMalloc(&c->arena, p->arena_bytes ? p->arena_bytes : 1));
    CTX_CHECK(cudaMalloc(&c->workspace, e->workspace_bytes ? e->workspace_bytes : 1));
    CTX_CHECK(cudaMalloc((void **)&c->gather_error, sizeof(int)));
    CTX_CHECK(cudaMemset(c->gather_error, 0, sizeof(int)));
    for (int i = 0; i < p->num_inputs; i++) {
        const plan_tensor *t = tensor_of(p, p->input_tensors[i]);
        CTX_CHECK(cudaMalloc(&c->input_staging[i],
                             (size_t)count_of(t) * tci_dtype_size(host_dtype(t)) + 1));
    }
    for (int i = 0; i < p->num_outputs; i++) {
        const plan_tensor *t = tensor_of(p, p->output_tensors[i]);
        size_t bytes = (size_t)count_of(t) * tci_dtype_size(host_dtype(t));
        CTX_CHECK(cudaMalloc(&c->output_staging[i], bytes + 1));
        tci_tensor *o = &c->outputs[i];
        o->name = t->name;
        o->dtype = host_dtype(t);
        o->rank = t->rank;
        for (int d = 0; d < t->rank; d++) o->dims[d] = t->dims[d];
        o->data = malloc(bytes + 1);
        if (st == TCI_OK && !o->data) st = tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < p->num_steps * 2 + 2; i++) CTX_CHECK(cudaEventCreate(&c->events[i]));
    CTX_CHECK(cudaEventCreateWithFlags(&c->caller_ready, cudaEventDisableTiming));
    CTX_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
#undef CTX_CHECK
    if (st != TCI_OK) {
        exec_gpu_context_destroy(c);
        return st;
    }
    *out_context = c;
    return TCI_OK;
}

static void drop_graphs(exec_gpu_context *c) {
    for (int v = 0; v < c->num_variants; v++) {
        if (c->variants[v].captured) cudaGraphExecDestroy(c->variants[v].graph);
        c->variants[v].captured = false;
    }
}

void exec_gpu_context_destroy(exec_gpu_context *c) {
    if (!c) return;
    const plan *p = c->base->plan;
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->variants) drop_graphs(c);
    for (int v = 0; c->variants && v < c->num_variants; v++) {
        free(c->variants[v].dim0);
        free(c->variants[v].captured_io);
        exec_gpu_engine_destroy(c->variants[v].engine);
    }
    for (int i = 0; c->events && i < p->num_steps * 2 + 2; i++)
        if (c->events[i]) cudaEventDestroy(c->events[i]);
    for (int i = 0; c->input_staging && i < p->num_inputs; i++) cudaFree(c->input_staging[i]);
    for (int i = 0; c->output_staging && i < p->num_outputs; i++) cudaFree(c->output_staging[i]);
    for (int i = 0; c->outputs && i < p->num_outputs; i++) free(c->outputs[i].data);
    cudaFree(c->gather_error);
    cudaFree(c->workspace);
    cudaFree(c->arena);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->cudnn) cudnnDestroy(c->cudnn);
    if (c->stream) cudaStreamDestroy(c->stream);
    if (c->caller_ready) cudaEventDestroy(c->caller_ready);
    if (c->done) cudaEventDestroy(c->done);
    free(c->variants);
    free(c->device_io);
    free(c->redirect);
    free(c->copy_output);
    free(c->input_staging);
    free(c->output_staging);
    free(c->outputs);
    free(c->events);
    free(c);
}

/* The caller's layout -> the plan's, for every input. */
static tci_status convert_inputs(exec_gpu_context *c) {
    const plan *p = c->engine->plan;
    for (int i = 0; i < p->num_inputs; i++) {
        const plan_tensor *t = tensor_of(p, p->input_tensors[i]);
        void *dst = device_ptr(c->engine, c->arena, p->input_tensors[i]);
        if (host_dtype(t) == t->dtype && t->layout != PLAN_LAYOUT_NHWC8) {
            KERN_CUDA_CHECK(cudaMemcpyAsync(dst, c->input_staging[i], t->bytes,
                                            cudaMemcpyDeviceToDevice, c->stream));
        } else if (t->layout == PLAN_LAYOUT_NHWC8) {
            TCI_TRY(kern_nchw_to_nhwc8(c->input_staging[i], TCI_DTYPE_FLOAT, dst, t->dtype,
                                       t->dims[0], t->dims[1], t->dims[2], t->dims[3], c->stream));
        } else if (t->dtype == TCI_DTYPE_BFLOAT16) {
            TCI_TRY(kern_f32_to_bf16(c->input_staging[i], dst, count_of(t), c->stream));
        } else {
            TCI_TRY(kern_f32_to_f16(c->input_staging[i], dst, count_of(t), c->stream));
        }
    }
    return TCI_OK;
}

static tci_status convert_outputs(exec_gpu_context *c) {
    const plan *p = c->engine->plan;
    for (int i = 0; i < p->num_outputs; i++) {
        const plan_tensor *t = tensor_of(p, p->output_tensors[i]);
        const void *src = device_ptr(c->engine, c->arena, p->output_tensors[i]);
        if (host_dtype(t) == t->dtype && t->layout != PLAN_LAYOUT_NHWC8) {
            KERN_CUDA_CHECK(cudaMemcpyAsync(c->output_staging[i], src, t->bytes,
                                            cudaMemcpyDeviceToDevice, c->stream));
        } else if (t->layout == PLAN_LAYOUT_NHWC8) {
            TCI_TRY(kern_nhwc8_to_nchw(src, t->dtype, c->output_staging[i], TCI_DTYPE_FLOAT,
                                       t->dims[0], t->dims[1], t->dims[2], t->dims[3], c->stream));
        } else if (t->dtype == TCI_DTYPE_BFLOAT16) {
            TCI_TRY(kern_bf16_to_f32(src, c->output_staging[i], count_of(t), c->stream));
        } else {
            TCI_TRY(kern_f16_to_f32(src, c->output_staging[i], count_of(t), c->stream));
        }
    }
    return TCI_OK;
}

/* Points the current engine's inputs and outputs at the caller's device buffers (io: inputs
 * then outputs), or back at the arena and staging buffers (io NULL). */
static tci_status set_device_io(exec_gpu_context *c, void *const *io) {
    const plan *p = c->engine->plan;
    if (c->redirect_count < p->num_tensors) {
        void **grown = realloc(c->redirect, (size_t)p->num_tensors * sizeof *grown);
        if (!grown) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        c->redirect = grown;
        c->redirect_count = p->num_tensors;
    }
    memset(c->redirect, 0, (size_t)c->redirect_count * sizeof *c->redirect);
    for (int i = 0; i < p->num_inputs + p->num_outputs; i++) c->device_io[i] = io ? io[i] : NULL;
    if (!io) return TCI_OK;
    for (int i = 0; i < p->num_inputs; i++) c->redirect[p->input_tensors[i]] = io[i];
    for (int k = 0; k < p->num_outputs; k++) {
        int t = p->output_tensors[k];
        int root = p->tensors[t].alias_of >= 0 ? p->tensors[t].alias_of : t;
        /* written in place where the output owns arena storage no other output claimed; views
         * of inputs or constants and shared storage are copied at the end */
        c->copy_output[k] = p->tensors[root].memory != PLAN_MEM_ARENA || c->redirect[root];
        if (!c->copy_output[k]) c->redirect[root] = io[p->num_inputs + k];
    }
    return TCI_OK;
}

/* inputs and outputs are the caller's device buffers (all set, or none) */
static bool device_mode(const exec_gpu_context *c) {
    const plan *p = c->engine->plan;
    return p->num_inputs + p->num_outputs > 0 && c->device_io[0] != NULL;
}

/* Everything between the staging (or the caller's) buffers: what the CUDA graph captures. */
static tci_status enqueue_all(exec_gpu_context *c) {
    const exec_gpu_engine *e = c->engine;
    const plan *p = e->plan;
    bool device = device_mode(c);
    if (!device) TCI_TRY(convert_inputs(c));
    for (int i = 0; i < p->num_steps; i++)
        TCI_TRY(step_error(&p->steps[i], run_step(e, c, c->arena, i, c->stream)));
    if (!device) return convert_outputs(c);
    for (int k = 0; k < p->num_outputs; k++) {
        const plan_tensor *t = tensor_of(p, p->output_tensors[k]);
        if (c->copy_output[k] && t->bytes)
            KERN_CUDA_CHECK(cudaMemcpyAsync(c->device_io[p->num_inputs + k],
                                            tensor_ptr(e, c, c->arena, p->output_tensors[k]),
                                            t->bytes, cudaMemcpyDeviceToDevice, c->stream));
    }
    return TCI_OK;
}

static tci_status launch(exec_gpu_context *c) {
    if (!c->use_graph) return enqueue_all(c);
    batch_variant *v = &c->variants[c->current];
    size_t io_bytes = (size_t)(c->base->plan->num_inputs + c->base->plan->num_outputs) *
                      sizeof(void *);
    if (v->captured && memcmp(v->captured_io, c->device_io, io_bytes) != 0) {
        /* other device buffers than the graph was captured with */
        KERN_CUDA_CHECK(cudaStreamSynchronize(c->stream));
        cudaGraphExecDestroy(v->graph);
        v->captured = false;
    }
    if (!v->captured) {
        if (!v->captured_io) {
            v->captured_io = calloc(1, io_bytes + sizeof(void *));
            if (!v->captured_io) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(v->captured_io, c->device_io, io_bytes);
        cudaGraph_t graph;
        KERN_CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
        tci_status st = enqueue_all(c);
        cudaError_t end = cudaStreamEndCapture(c->stream, &graph);
        if (st != TCI_OK) {
            if (end == cudaSuccess) cudaGraphDestroy(graph);
            return st;
        }
        KERN_CUDA_CHECK(end);
        cudaError_t inst = cudaGraphInstantiate(&v->graph, graph, 0);
        cudaGraphDestroy(graph);
        KERN_CUDA_CHECK(inst);
        v->captured = true;
    }
    KERN_CUDA_CHECK(cudaGraphLaunch(v->graph, c->stream));
    return TCI_OK;
}

/* Makes the variant for the inputs' leading dims current, planning it on first use, and grows
 * the arena when it needs more (the captured graphs then point at the old one: dropped). */
static tci_status select_batch(exec_gpu_context *c, const int64_t *dim0) {
    const plan *bp = c->base->plan;
    size_t dims_bytes = (size_t)bp->num_inputs * sizeof(int64_t);
    int found = -1;
    for (int v = 0; v < c->num_variants && found < 0; v++)
        if (memcmp(c->variants[v].dim0, dim0, dims_bytes) == 0) found = v;
    if (found < 0) {
        if (!c->base->pristine)
            return tci_error(TCI_ERR_INVALID_ARGUMENT,
                             "this GPU engine runs only the batch it was built for (engines that "
                             "mark every layer as an output do not re-plan)");
        batch_variant *grown = realloc(c->variants, (size_t)(c->num_variants + 1) * sizeof *grown);
        if (!grown) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        c->variants = grown;
        batch_variant *v = &c->variants[c->num_variants];
        memset(v, 0, sizeof *v);
        v->dim0 = malloc(dims_bytes + 1);
        if (!v->dim0) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        memcpy(v->dim0, dim0, dims_bytes);
        tci_status st = variant_create(c->base, dim0, &v->engine);
        if (st != TCI_OK) {
            free(v->dim0);
            return st;
        }
        found = c->num_variants++;
    }
    const exec_gpu_engine *e = found ? c->variants[found].engine : c->base;
    if (e->plan->arena_bytes > c->arena_bytes) {
        KERN_CUDA_CHECK(cudaStreamSynchronize(c->stream));
        drop_graphs(c);
        cudaFree(c->arena);
        c->arena = NULL;
        c->arena_bytes = 0;
        KERN_CUDA_CHECK(cudaMalloc(&c->arena, e->plan->arena_bytes));
        c->arena_bytes = e->plan->arena_bytes;
    }
    c->current = found;
    c->engine = e;
    return TCI_OK;
}

tci_status exec_gpu_run(exec_gpu_context *c, const tci_tensor *inputs, size_t num_inputs) {
    const plan *bp = c->base->plan;
    char want[128], got[128];
    if (num_inputs != (size_t)bp->num_inputs)
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "got %zu inputs, the model has %d", num_inputs,
                         bp->num_inputs);
    /* every dim as built, except that the leading one may be smaller: another batch size */
    int64_t *dim0 = calloc((size_t)bp->num_inputs + 1, sizeof(int64_t));
    if (!dim0) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    tci_status st = TCI_OK;
    for (int i = 0; st == TCI_OK && i < bp->num_inputs; i++) {
        const plan_tensor *t = tensor_of(bp, bp->input_tensors[i]);
        const tci_tensor *in = &inputs[i];
        bool ok = in->dtype == host_dtype(t) && in->rank == t->rank;
        for (int d = 0; ok && d < t->rank; d++)
            ok = d ? in->dims[d] == t->dims[d] : in->dims[0] >= 1 && in->dims[0] <= t->dims[0];
        dim0[i] = t->rank ? in->dims[0] : 1;
        if (!ok)
            st = tci_error(TCI_ERR_INVALID_ARGUMENT,
                           "input '%s' is %s %s; the GPU engine was built for %s %s (a smaller "
                           "leading dim runs too; rebuild with --shape for anything else)",
                           t->name, tci_dtype_name(in->dtype),
                           ir_format_dims(in->rank, in->dims, got, sizeof got),
                           tci_dtype_name(host_dtype(t)),
                           ir_format_dims(t->rank, t->dims, want, sizeof want));
    }
    if (st == TCI_OK) st = select_batch(c, dim0);
    free(dim0);
    TCI_TRY(st);
    TCI_TRY(set_device_io(c, NULL));
    const plan *p = c->engine->plan;
    for (int i = 0; i < p->num_inputs; i++) {
        const plan_tensor *t = tensor_of(p, p->input_tensors[i]);
        size_t bytes = (size_t)count_of(t) * tci_dtype_size(host_dtype(t));
        if (bytes) KERN_CUDA_CHECK(cudaMemcpyAsync(c->input_staging[i], inputs[i].data, bytes,
                                                   cudaMemcpyHostToDevice, c->stream));
    }
    for (int i = 0; i < p->num_outputs; i++) {
        const plan_tensor *t = tensor_of(p, p->output_tensors[i]);
        for (int d = 0; d < t->rank; d++) c->outputs[i].dims[d] = t->dims[d];
    }
    TCI_TRY(launch(c));
    for (int i = 0; i < p->num_outputs; i++) {
        tci_tensor *o = &c->outputs[i];
        size_t bytes = (size_t)tci_tensor_count(o) * tci_dtype_size(o->dtype);
        if (bytes) KERN_CUDA_CHECK(cudaMemcpyAsync(o->data, c->output_staging[i], bytes,
                                                   cudaMemcpyDeviceToHost, c->stream));
    }
    int gather_error = 0;
    KERN_CUDA_CHECK(cudaMemcpyAsync(&gather_error, c->gather_error, sizeof gather_error,
                                    cudaMemcpyDeviceToHost, c->stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    if (gather_error) {
        cudaMemset(c->gather_error, 0, sizeof(int));
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "a Gather index was out of range");
    }
    return TCI_OK;
}

const tci_tensor *exec_gpu_output(const exec_gpu_context *c, size_t index) {
    return &c->outputs[index];
}

const plan_tensor *exec_gpu_io_tensor(const exec_gpu_engine *e, bool output, size_t index) {
    const plan *p = e->plan;
    if (output) return index < (size_t)p->num_outputs ? &p->tensors[p->output_tensors[index]] : NULL;
    return index < (size_t)p->num_inputs ? &p->tensors[p->input_tensors[index]] : NULL;
}

tci_status exec_gpu_run_device(exec_gpu_context *c, const void *const *inputs, void *const *outputs,
                               const int64_t *leading_dims, cudaStream_t caller) {
    const plan *bp = c->base->plan;
    int nio = bp->num_inputs + bp->num_outputs;
    void **io = calloc((size_t)nio + 1, sizeof *io);
    int64_t *dim0 = calloc((size_t)bp->num_inputs + 1, sizeof *dim0);
    tci_status st = io && dim0 ? TCI_OK : tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; st == TCI_OK && i < nio; i++) {
        bool in = i < bp->num_inputs;
        io[i] = in ? (void *)(uintptr_t)inputs[i] : outputs[i - bp->num_inputs];
        if (!io[i] || ((uintptr_t)io[i] & 15u))
            st = tci_error(TCI_ERR_INVALID_ARGUMENT, "device %s %d is %s", in ? "input" : "output",
                           in ? i : i - bp->num_inputs, io[i] ? "not 16-byte aligned" : "NULL");
    }
    for (int i = 0; st == TCI_OK && i < bp->num_inputs; i++) {
        const plan_tensor *t = tensor_of(bp, bp->input_tensors[i]);
        dim0[i] = t->rank ? t->dims[0] : 1;
        if (leading_dims && t->rank) dim0[i] = leading_dims[i];
        if (dim0[i] < 1 || dim0[i] > (t->rank ? t->dims[0] : 1))
            st = tci_error(TCI_ERR_INVALID_ARGUMENT,
                           "leading dim %" PRId64 " of input '%s' is outside 1..%" PRId64, dim0[i],
                           t->name, t->rank ? t->dims[0] : 1);
    }
    if (st == TCI_OK) st = select_batch(c, dim0);
    if (st == TCI_OK) st = set_device_io(c, io);
    free(io);
    free(dim0);
    TCI_TRY(st);
    KERN_CUDA_CHECK(cudaEventRecord(c->caller_ready, caller));
    KERN_CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->caller_ready, 0));
    TCI_TRY(launch(c));
    KERN_CUDA_CHECK(cudaEventRecord(c->done, c->stream));
    KERN_CUDA_CHECK(cudaStreamWaitEvent(caller, c->done, 0));
    return TCI_OK;
}

tci_status exec_gpu_bench(exec_gpu_context *c, int iterations, int warmup, float *times_ms) {
    for (int i = 0; i < warmup; i++) TCI_TRY(launch(c));
    cudaEvent_t start = c->events[0], stop = c->events[1];
    for (int i = 0; i < iterations; i++) {
        KERN_CUDA_CHECK(cudaEventRecord(start, c->stream));
        TCI_TRY(launch(c));
        KERN_CUDA_CHECK(cudaEventRecord(stop, c->stream));
        KERN_CUDA_CHECK(cudaEventSynchronize(stop));
        KERN_CUDA_CHECK(cudaEventElapsedTime(&times_ms[i], start, stop));
    }
    return TCI_OK;
}

static int compare_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

tci_status exec_gpu_profile(exec_gpu_context *c, int iterations, float *step_ms) {
    const exec_gpu_engine *e = c->engine;
    int n = e->plan->num_steps;
    if (iterations < 1) iterations = 1;
    float *samples = calloc((size_t)n * (size_t)iterations + 1, sizeof(float));
    if (!samples) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory profiling");
    tci_status st = device_mode(c) ? TCI_OK : convert_inputs(c);
    for (int it = 0; st == TCI_OK && it < iterations; it++) {
        for (int i = 0; st == TCI_OK && i < n; i++) {
            if (cudaEventRecord(c->events[2 * i], c->stream) != cudaSuccess)
                st = tci_error(TCI_ERR_CUDA, "cudaEventRecord failed");
            if (st == TCI_OK)
                st = step_error(&e->plan->steps[i], run_step(e, c, c->arena, i, c->stream));
            if (st == TCI_OK && cudaEventRecord(c->events[2 * i + 1], c->stream) != cudaSuccess)
                st = tci_error(TCI_ERR_CUDA, "cudaEventRecord failed");
        }
        if (st == TCI_OK && cudaStreamSynchronize(c->stream) != cudaSuccess)
            st = tci_error(TCI_ERR_CUDA, "cudaStreamSynchronize failed while profiling");
        for (int i = 0; st == TCI_OK && i < n; i++)
            cudaEventElapsedTime(&samples[(size_t)i * (size_t)iterations + (size_t)it],
                                 c->events[2 * i], c->events[2 * i + 1]);
    }
    for (int i = 0; st == TCI_OK && i < n; i++) {
        float *row = &samples[(size_t)i * (size_t)iterations];
        qsort(row, (size_t)iterations, sizeof(float), compare_float);
        step_ms[i] = row[iterations / 2];
    }
    free(samples);
    return st;
}
