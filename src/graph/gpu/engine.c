/* The GPU engine: a plan made real (packed weights and constants on the device, kernels chosen),
 * immutable once built; shape variants (smaller batch or sequence) share its weights. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/gpu/gpu_internal.h"
#include "kernels/wgmma_gemm.h"

tci_status exec_gpu_check_device(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        cudaGetLastError();
        return status_error(TCI_ERR_NO_DEVICE,
                         "no CUDA GPU is available here; use TCI_BACKEND_CPU "
                         "(tci_engine_options.backend) for the fp32 reference executor");
    }
    return TCI_OK;
}

tci_status exec_gpu_engine_create(plan *built, const plan_options *options, tci_kernels kernels,
                                  const char *timing_cache_path, const char *choices,
                                  exec_gpu_replan_fn replan, void *replan_user,
                                  tci_progress_fn progress, void *progress_user,
                                  exec_gpu_engine **out_engine) {
    *out_engine = NULL;
    tci_status st = exec_gpu_check_device();
    exec_gpu_engine *e = NULL;
    if (st == TCI_OK) {
        e = calloc(1, sizeof *e);
        if (!e) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating the GPU engine");
    }
    if (st != TCI_OK) {
        plan_destroy(built);
        return st;
    }
    e->plan = built;
    e->replan = replan;
    e->replan_user = replan_user;
    e->kernels = kernels;
    if (options) e->options = *options;
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
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating the GPU engine");
    const plan *p = e->plan;
    /* conv weights/bias are packed per step; every other constant is uploaded as laid out */
    for (int i = 0; st == TCI_OK && i < p->num_steps; i++) {
        e->impl[i].kernel = plan_step_kernel(&p->steps[i]);
        if (p->steps[i].kind == PLAN_STEP_CONV)
            st = gpu_step_error(&p->steps[i], gpu_pack_conv(e, i));
        else if (p->steps[i].kind == PLAN_STEP_CONV_TRANSPOSE)
            st = gpu_step_error(&p->steps[i], gpu_pack_conv_transpose(e, i));
        else if (p->steps[i].kind == PLAN_STEP_GEMM) st = gpu_pack_gemm_bias(e, i);
    }
    for (int t = 0; st == TCI_OK && t < p->num_tensors; t++) {
        const plan_tensor *pt = &p->tensors[t];
        if (pt->memory != PLAN_MEM_CONSTANT || pt->packed_source) continue;
        st = gpu_upload_bytes(pt->host_data, pt->bytes, &e->constants[t]);
        e->owns_constant[t] = true;
    }
    if (st == TCI_OK) st = gpu_cache_load(timing_cache_path, choices, &e->cache);
    if (st == TCI_OK) st = gpu_create_library_plans(e, progress, progress_user);
    if (st == TCI_OK && timing_cache_path && e->layers_timed) st = gpu_cache_save(e->cache);
    gpu_cache_free(e->cache);
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
            kern_rnn_cudnn_destroy(e->impl[i].rnn);
            kern_attention_cudnn_destroy(e->impl[i].sdpa);
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

/* ---- shape variants ---- */

/* "input 1x77x128, mask 1x77": the input shapes of dims (as exec_gpu_replan_fn takes them). */
static const char *shapes_text(const plan *bp, const int64_t *dims, char *buf, size_t size) {
    size_t pos = 0;
    buf[0] = '\0';
    for (int i = 0; i < bp->num_inputs && pos < size; i++) {
        const plan_tensor *t = &bp->tensors[bp->input_tensors[i]];
        char shape[128];
        int w = snprintf(buf + pos, size - pos, "%s%s %s", i ? ", " : "", t->name,
                         ir_format_dims(t->rank, &dims[(size_t)i * TCI_MAX_RANK], shape,
                                       sizeof shape));
        if (w < 0) break;
        pos += (size_t)w;
    }
    return buf;
}

static bool same_conv_but_batch(const plan_conv *a, const plan_conv *b) {
    conv_geom ga = a->geom, gb = b->geom; /* int64 fields only: no padding to compare */
    if (gb.n > ga.n) return false;
    gb.n = ga.n;
    return memcmp(&ga, &gb, sizeof ga) == 0 && a->has_bias == b->has_bias &&
           a->has_residual == b->has_residual && a->depthwise == b->depthwise &&
           a->act.kind == b->act.kind && a->act.alpha == b->act.alpha &&
           a->act.beta == b->act.beta && a->post_act.kind == b->post_act.kind &&
           a->post_act.alpha == b->post_act.alpha && a->post_act.beta == b->post_act.beta;
}

/* Whether tcinfer's GEMM config cfg runs the variant's step b (the kernels take every size
 * from the step; the config must accept them: alignment, multiples of its tile's K). */
static bool wmma_runs(const plan_gemm *b, const step_impl *im) {
    kern_wmma_gemm_desc d;
    gpu_wmma_gemm_desc_of(b, im->dtype, &d);
    if (im->wmma == WMMA_TF32) return kern_wmma_variant_supports(&d, KERN_WMMA_TF32_16X16X8) == TCI_OK;
    if (im->wmma >= WGMMA) return kern_wgmma_gemm_supports(&d, im->wmma - WGMMA) == TCI_OK;
    return kern_wmma_gemm_supports(&d, im->wmma) == TCI_OK;
}

/* The built step a against the variant's b: a cuBLASLt plan runs fewer rows (m) and fewer
 * matrices (batch) than it was made for, re-checking its algorithm at the smaller problem
 * (kern_gemm_run), but keeps n, k and the strides; tcinfer's kernels take every size from the
 * variant's step (a sequence variant's attention scores: n and k shrink too). */
static bool same_gemm_but_rows(const plan_gemm *a, const plan_gemm *b, const step_impl *im) {
    kern_gemm_desc x, y; /* memset by gpu_gemm_desc_of, so padding compares equal */
    gpu_gemm_desc_of(NULL, a, TCI_DTYPE_FLOAT16, &x);
    gpu_gemm_desc_of(NULL, b, TCI_DTYPE_FLOAT16, &y);
    if (y.m > x.m || y.batch_count > x.batch_count || y.n > x.n || y.k > x.k) return false;
    y.m = x.m;
    y.batch_count = x.batch_count;
    if (im->wmma >= 0) {
        if (!wmma_runs(b, im)) return false;
        y.n = x.n;
        y.k = x.k;
        y.lda = x.lda;
        y.ldb = x.ldb;
        y.ldc = x.ldc;
        y.stride_a = x.stride_a;
        y.stride_b = x.stride_b;
        y.stride_c = x.stride_c;
    } else if (x.batch_count == 1) {
        y.stride_a = x.stride_a; /* not read for one matrix */
        y.stride_b = x.stride_b;
        y.stride_c = x.stride_c;
    }
    return memcmp(&x, &y, sizeof x) == 0;
}

/* Whether the variant's step b can run on the parent's packed weights and library plan (im:
 * the built step a's). */
static bool step_matches(const plan_step *a, const plan_step *b, const step_impl *im) {
    if (a->kind != b->kind || strcmp(a->node->name, b->node->name) != 0 ||
        strcmp(a->label, b->label) != 0)
        return false;
    switch (a->kind) {
    case PLAN_STEP_CONV:
    case PLAN_STEP_CONV_TRANSPOSE: return same_conv_but_batch(&a->u.conv, &b->u.conv);
    case PLAN_STEP_GEMM: return same_gemm_but_rows(&a->u.gemm, &b->u.gemm, im);
    case PLAN_STEP_RNN: /* cuDNN's plan runs fewer steps and sequences, not more */
        return !im->rnn || (b->u.rnn.seq_length <= a->u.rnn.seq_length &&
                            b->u.rnn.batch <= a->u.rnn.batch && b->num_inputs == a->num_inputs);
    default: return true;
    }
}

/* The parent's device copy of constant t when the variant's is the same bytes in the same
 * layout (weights always are; shape-derived constants may differ with the shapes). A constant
 * a pass made (a folded BatchNormalization's, merged GEMMs' weights) has no name. */
static void *borrow_constant(const exec_gpu_engine *parent, const plan_tensor *t, int index) {
    const plan *p = parent->plan;
    if (index >= p->num_tensors) return NULL;
    const plan_tensor *u = &p->tensors[index];
    bool same_name = u->name && t->name ? strcmp(u->name, t->name) == 0 : u->name == t->name;
    if (u->memory != PLAN_MEM_CONSTANT || !parent->constants[index] || u->dtype != t->dtype ||
        u->layout != t->layout || u->bytes != t->bytes || !same_name)
        return NULL;
    if (t->bytes && (!u->host_data || !t->host_data || memcmp(u->host_data, t->host_data, t->bytes)))
        return NULL;
    return parent->constants[index];
}

/* The workspace the variant's steps need at its shapes, at least the base's: the library
 * plans are the base's, run at a smaller n, and cuDNN may ask more there (ResNet-50 built for
 * 64: IMPLICIT_PRECOMP_GEMM needs 6.3 MB at batch 24 where the built batch needed 8 KB). */
static tci_status variant_workspace(exec_gpu_engine *e, cudnnHandle_t cudnn) {
    e->workspace_bytes = e->parent->workspace_bytes;
    for (int i = 0; i < e->plan->num_steps; i++) {
        const plan_step *s = &e->plan->steps[i];
        const step_impl *im = &e->impl[i];
        size_t need = 0;
        if (s->kind == PLAN_STEP_CONV && !s->u.conv.depthwise && im->wmma >= 0) {
            kern_wmma_conv_desc wd;
            gpu_wmma_desc_of(&s->u.conv, im->dtype, &wd);
            need = kern_wmma_conv_workspace(&wd, im->wmma);
        } else if (s->kind == PLAN_STEP_CONV && !s->u.conv.depthwise && im->conv) {
            TRY_STATUS(kern_conv_workspace_at(im->conv, cudnn, (int)s->u.conv.geom.n, &need));
        } else if (s->kind == PLAN_STEP_CONV_TRANSPOSE && im->convt) {
            TRY_STATUS(kern_convt_workspace_at(im->convt, cudnn, (int)s->u.conv.geom.n, &need));
        } else if (im->rnn) {
            TRY_STATUS(gpu_rnn_workspace(e, i, cudnn, &need));
        }
        if (need > e->workspace_bytes) e->workspace_bytes = need;
    }
    return TCI_OK;
}

/* Has the base engine's replan function plan the input shapes of dims and ties the result to
 * the base engine's weights and library plans. A plan whose steps differ from the base's other
 * than in sizes the kernels take at run time (a model whose structure depends on the shapes,
 * a convolution over a shorter axis) is refused. */
tci_status gpu_variant_create(const exec_gpu_engine *base, const int64_t *dims,
                              cudnnHandle_t cudnn, exec_gpu_engine **out) {
    *out = NULL;
    const plan *bp = base->plan;
    char shapes[512];
    shapes_text(bp, dims, shapes, sizeof shapes);
    exec_gpu_engine *e = calloc(1, sizeof *e);
    if (!e) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory planning other shapes");
    e->parent = base;
    tci_status st = base->replan(base->replan_user, bp, dims, &e->graph, &e->plan);
    if (st != TCI_OK) status_error_prefix(st, "planning the inputs %s", shapes);
    const plan *p = e->plan;
    if (st == TCI_OK && (p->num_steps != bp->num_steps || p->num_inputs != bp->num_inputs ||
                         p->num_outputs != bp->num_outputs))
        st = status_error(TCI_ERR_UNSUPPORTED,
                       "the plan for the inputs %s has %d steps, the built one %d: the model's "
                       "structure depends on the shapes; build the engine for these shapes "
                       "(tci_engine_options.shapes)",
                       shapes, p->num_steps, bp->num_steps);
    /* the context's staging buffers are sized for the base engine's inputs and outputs */
    for (int i = 0; st == TCI_OK && i < p->num_inputs + p->num_outputs; i++) {
        bool in = i < p->num_inputs;
        int k = in ? i : i - p->num_inputs;
        const plan_tensor *t = &p->tensors[in ? p->input_tensors[k] : p->output_tensors[k]];
        const plan_tensor *u = &bp->tensors[in ? bp->input_tensors[k] : bp->output_tensors[k]];
        if (gpu_count_of(t) > gpu_count_of(u) || t->dtype != u->dtype || t->rank != u->rank)
            st = status_error(TCI_ERR_UNSUPPORTED,
                           "at the inputs %s, %s '%s' does not shrink with them; build the "
                           "engine for these shapes (tci_engine_options.shapes)",
                           shapes, in ? "input" : "output", t->name);
    }
    for (int i = 0; st == TCI_OK && i < p->num_steps; i++)
        if (!step_matches(&bp->steps[i], &p->steps[i], &base->impl[i]))
            st = status_error(TCI_ERR_UNSUPPORTED,
                           "at the inputs %s, step %d ('%s', node '%s', on %s) differs from the "
                           "built plan's in more than the sizes its kernel takes at run time; "
                           "build the engine for these shapes (tci_engine_options.shapes)",
                           shapes, i, p->steps[i].label, p->steps[i].node->name,
                           exec_gpu_step_kernel(base, i));
    if (st == TCI_OK) {
        e->impl = base->impl;
        e->kernels = base->kernels;
        e->options = base->options;
        e->constants = calloc((size_t)p->num_tensors + 1, sizeof(void *));
        e->owns_constant = calloc((size_t)p->num_tensors + 1, sizeof(bool));
        if (!e->constants || !e->owns_constant)
            st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory planning other shapes");
    }
    if (st == TCI_OK) st = variant_workspace(e, cudnn);
    for (int t = 0; st == TCI_OK && t < p->num_tensors; t++) {
        const plan_tensor *pt = &p->tensors[t];
        if (pt->memory != PLAN_MEM_CONSTANT || pt->packed_source) continue;
        e->constants[t] = borrow_constant(base, pt, t);
        if (e->constants[t]) continue;
        st = gpu_upload_bytes(pt->host_data, pt->bytes, &e->constants[t]);
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
    if (!text) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    text[0] = '\0';
    for (int i = 0; i < e->plan->num_steps; i++) {
        const plan_step *s = &e->plan->steps[i];
        if (!gpu_tuned_step(s)) continue;
        char key[512], value[CHOICE_BYTES], line[1024];
        gpu_problem_key(e, s, key, sizeof key);
        gpu_choice_value(e, i, value, sizeof value);
        int n = snprintf(line, sizeof line, "%s\t%s\t%.6f\t%.6f\n", key, value,
                         e->impl[i].library_ms, e->impl[i].wmma_ms);
        if (len + (size_t)n + 1 > cap) {
            while (len + (size_t)n + 1 > cap) cap *= 2;
            char *grown = realloc(text, cap);
            if (!grown) {
                free(text);
                return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
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

const plan_tensor *exec_gpu_io_tensor(const exec_gpu_engine *e, bool output, size_t index) {
    const plan *p = e->plan;
    if (output) return index < (size_t)p->num_outputs ? &p->tensors[p->output_tensors[index]] : NULL;
    return index < (size_t)p->num_inputs ? &p->tensors[p->input_tensors[index]] : NULL;
}
