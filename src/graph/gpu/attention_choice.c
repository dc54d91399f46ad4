/* A fused attention step on tcinfer's kernel (kernels/attention.h) or on cuDNN's fused attention
 * (kernels/attention_cudnn.h), chosen like a convolution's kernel: both timed inside CUDA graphs
 * on the step's real buffers at build, the faster kept, the choice cached. cuDNN is offered
 * where it computes the step as planned: no additive or keep mask, fp16 or bf16, Q, K and V
 * starting on 16-byte boundaries. */
#include <stdio.h>
#include <string.h>

#include "graph/gpu/gpu_internal.h"

bool gpu_attention_tuned_step(const plan_step *s) { return s->kind == PLAN_STEP_ATTENTION; }

/* cuDNN's plan for step i (TCI_ERR_UNSUPPORTED with the reason where it does not apply), its
 * workspace counted in the engine's. */
static tci_status create_plan(exec_gpu_engine *e, int i, cudnnHandle_t cudnn,
                              kern_attention_cudnn_plan **out) {
    *out = NULL;
    const plan_step *s = &e->plan->steps[i];
    const plan_attention *a = &s->u.attention;
    const tci_dtype dtype = gpu_tensor_of(e->plan, s->outputs[0])->dtype;
    const int64_t es = (int64_t)tci_dtype_size(dtype);
    if ((a->q_offset * es) % 16 || (a->k_offset * es) % 16 || (a->v_offset * es) % 16)
        return status_error(TCI_ERR_UNSUPPORTED, "Q, K or V starts off a 16-byte boundary");
    kern_attention_desc d;
    gpu_attention_desc_of(a, dtype, &d);
    TRY_STATUS(kern_attention_cudnn_create(cudnn, &d, a->has_mask || a->has_keep, out));
    const size_t need = kern_attention_cudnn_workspace(*out);
    if (need > WORKSPACE_LIMIT) {
        kern_attention_cudnn_destroy(*out);
        *out = NULL;
        return status_error(TCI_ERR_UNSUPPORTED, "cuDNN's attention needs %zu bytes of workspace",
                            need);
    }
    if (need > e->workspace_bytes) e->workspace_bytes = need;
    return TCI_OK;
}

/* The step as the engine runs it (cuDNN's plan where impl's sdpa is set, else tcinfer's), on a
 * context made of the tuning's handles, arena and workspace. */
typedef struct attention_trial {
    exec_gpu_engine *e;
    exec_gpu_context *c;
    void *arena;
    int step;
} attention_trial;

static tci_status launch_attention_trial(const void *user, cudaStream_t stream) {
    const attention_trial *t = user;
    return gpu_run_step(t->e, t->c, t->arena, t->step, stream);
}

static void select_plan(void *trial, void *lib) {
    attention_trial *t = trial;
    t->e->impl[t->step].sdpa = lib;
}

static void keep_plan(exec_gpu_engine *e, int i, void *lib) { e->impl[i].sdpa = lib; }

static const char *plan_name(const void *lib) { return kern_attention_cudnn_name(lib); }

static void destroy_plan(void *lib) { kern_attention_cudnn_destroy(lib); }

static const char OURS[] = "tcinfer attention";

tci_status gpu_attention_choose(exec_gpu_engine *e, int i, cudnnHandle_t cudnn,
                                cublasLtHandle_t lt, cudaStream_t stream, void *arena,
                                void *workspace) {
    e->impl[i].sdpa = NULL;
    kern_attention_cudnn_plan *sdpa = NULL;
    char why[256] = "";
    if (e->kernels != TCI_KERNELS_WMMA) {
        tci_status st = create_plan(e, i, cudnn, &sdpa);
        if (st != TCI_OK && st != TCI_ERR_UNSUPPORTED) return st;
        if (st != TCI_OK) snprintf(why, sizeof why, "%s", tci_last_error());
        status_error_clear();
    }
    exec_gpu_context tuning;
    memset(&tuning, 0, sizeof tuning);
    tuning.cudnn = cudnn;
    tuning.lt = lt;
    tuning.workspace = workspace;
    attention_trial t = {e, &tuning, arena, i};
    if (sdpa) { /* the timing must run cuDNN's plan, which the step runs only where it applies */
        kern_attention_desc d;
        const plan_step *s = &e->plan->steps[i];
        gpu_attention_desc_of(&s->u.attention, gpu_tensor_of(e->plan, s->outputs[0])->dtype, &d);
        const void *q, *k, *v;
        gpu_attention_operands(e, &tuning, arena, i, &q, &k, &v);
        if (!kern_attention_cudnn_applies(sdpa, &d, q, k, v,
                                          gpu_tensor_ptr(e, &tuning, arena, s->outputs[0]))) {
            kern_attention_cudnn_destroy(sdpa);
            sdpa = NULL;
            snprintf(why, sizeof why, "the step's buffers are not 16-byte aligned");
        }
    }
    const gpu_library_choice k = {OURS,        "cuDNN fused attention", "cuDNN's attention",
                                  launch_attention_trial, &t, select_plan, keep_plan, plan_name,
                                  destroy_plan};
    return gpu_choose_library(e, i, sdpa, why, &k, stream);
}

tci_status gpu_attention_apply_cached(exec_gpu_engine *e, int i, const cache_entry *hit,
                                      cudnnHandle_t cudnn) {
    step_impl *im = &e->impl[i];
    im->sdpa = NULL;
    if (strcmp(hit->value, "attention cudnn") == 0) {
        TRY_STATUS(create_plan(e, i, cudnn, &im->sdpa));
        gpu_describe_cached(im, kern_attention_cudnn_name(im->sdpa), true, "tcinfer", hit);
    } else if (strcmp(hit->value, "attention tcinfer") == 0) {
        gpu_describe_cached(im, OURS, false, "cuDNN", hit);
    } else {
        return status_error(TCI_ERR_UNSUPPORTED, "malformed cached attention choice");
    }
    return TCI_OK;
}
