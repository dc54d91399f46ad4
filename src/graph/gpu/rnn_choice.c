/* A recurrent layer's recurrence on tcinfer's kernels (the projection GEMM step, then the
 * per-step kernel) or on cuDNN's RNN (one cudnnRNNForward over X, the projection included; the
 * GEMM step then does not run), chosen like a convolution's kernel: both timed inside CUDA
 * graphs on the layer's real shapes at build, the faster kept, the choice cached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/gpu/gpu_internal.h"
#include "util/half.h"

bool gpu_rnn_tuned_step(const plan_step *s) {
    return s->kind == PLAN_STEP_RNN && s->u.rnn.phase == PLAN_RNN_STEPS;
}

/* The GEMM step writing step i's xw (the layer's input projection), or -1. */
static int projection_step(const plan *p, int i) {
    for (int j = i - 1; j >= 0; j--)
        if (p->steps[j].kind == PLAN_STEP_GEMM && p->steps[j].num_outputs == 1 &&
            p->steps[j].outputs[0] == p->steps[i].inputs[0])
            return j;
    return -1;
}

/* The fp32 values of a constant held in FLOAT, FLOAT16 or BFLOAT16 (malloc'd), or NULL. */
static float *constant_floats(const plan_tensor *t) {
    if (t->memory != PLAN_MEM_CONSTANT || !t->host_data) return NULL;
    int64_t n = gpu_count_of(t);
    float *v = malloc((size_t)n * sizeof(float) + 1);
    if (!v) return NULL;
    for (int64_t k = 0; k < n; k++) {
        if (t->dtype == TCI_DTYPE_FLOAT) v[k] = ((const float *)t->host_data)[k];
        else if (t->dtype == TCI_DTYPE_FLOAT16)
            v[k] = half_to_float(((const uint16_t *)t->host_data)[k]);
        else if (t->dtype == TCI_DTYPE_BFLOAT16)
            v[k] = bfloat16_to_float(((const uint16_t *)t->host_data)[k]);
        else {
            free(v);
            return NULL;
        }
    }
    return v;
}

/* cuDNN's plan for step i (TCI_ERR_UNSUPPORTED with the reason where it does not apply), its
 * workspace counted in the engine's. */
static tci_status create_plan(exec_gpu_engine *e, int i, cudnnHandle_t cudnn,
                              kern_rnn_cudnn_plan **out) {
    *out = NULL;
    const plan *p = e->plan;
    const plan_step *s = &p->steps[i];
    const plan_rnn *r = &s->u.rnn;
    const int j = projection_step(p, i);
    if (j < 0 || s->num_inputs < 5 || s->inputs[4] < 0)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "the layer's input is not projected by a GEMM step");
    const plan_step *g = &p->steps[j];
    const plan_tensor *x = gpu_tensor_of(p, s->inputs[4]), *blob = gpu_tensor_of(p, s->inputs[1]);
    const plan_tensor *xw = gpu_tensor_of(p, s->inputs[0]);
    kern_rnn_cudnn_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = x->dtype;
    d.cell = r->cell == PLAN_RNN_LSTM ? KERN_RNN_LSTM : r->cell == PLAN_RNN_GRU ? KERN_RNN_GRU
                                                                                : KERN_RNN_TANH;
    d.seq_length = r->seq_length;
    d.batch = r->batch;
    d.input = g->u.gemm.k;
    d.hidden = r->hidden;
    d.directions = r->directions;
    d.reverse = r->reverse;
    d.batch_major = r->batch_major;
    d.linear_before_reset = r->linear_before_reset;
    d.has_seq_lens = s->inputs[2] >= 0;
    d.tf32 = x->dtype == TCI_DTYPE_FLOAT && gpu_allows_tf32(e);
    if (xw->dtype != x->dtype ||
        (s->num_outputs && gpu_tensor_of(p, s->outputs[0])->dtype != x->dtype))
        return status_error(TCI_ERR_UNSUPPORTED, "X, the projection and Y differ in precision");
    const int64_t D = r->directions, H = r->hidden, GH = kern_rnn_cudnn_gates(d.cell) * H;
    if (blob->dtype != TCI_DTYPE_FLOAT || !blob->host_data ||
        gpu_count_of(blob) != D * H * GH + D * GH + D * 3 * H)
        return status_error(TCI_ERR_INTERNAL, "the recurrent weights are not plan_rnn's");
    float *w = constant_floats(gpu_tensor_of(p, g->inputs[1]));
    float *wb = g->inputs[2] >= 0 ? constant_floats(gpu_tensor_of(p, g->inputs[2])) : NULL;
    tci_status st = TCI_OK;
    if (!w || (g->inputs[2] >= 0 && !wb))
        st = status_error(TCI_ERR_UNSUPPORTED, "the projection's weights are not constants");
    if (st == TCI_OK) {
        const float *rt = blob->host_data;
        kern_rnn_onnx_weights ow = {w, rt, wb, rt + D * H * GH,
                                    d.cell == KERN_RNN_LSTM ? rt + D * H * GH + D * GH : NULL};
        st = kern_rnn_cudnn_create(cudnn, &d, &ow, out);
    }
    free(w);
    free(wb);
    size_t need = 0;
    if (st == TCI_OK) st = kern_rnn_cudnn_workspace(*out, cudnn, r->seq_length, r->batch, &need);
    if (st == TCI_OK && need > WORKSPACE_LIMIT)
        st = status_error(TCI_ERR_UNSUPPORTED, "cuDNN's RNN needs %zu bytes of workspace", need);
    if (st != TCI_OK) {
        kern_rnn_cudnn_destroy(*out);
        *out = NULL;
        return st;
    }
    if (need > e->workspace_bytes) e->workspace_bytes = need;
    return TCI_OK;
}

tci_status gpu_run_rnn_cudnn(const exec_gpu_engine *e, const exec_gpu_context *c, void *arena,
                             int i, const kern_rnn_cudnn_plan *rnn, cudaStream_t stream) {
    const plan_step *s = &e->plan->steps[i];
    const plan_rnn *r = &s->u.rnn;
    return kern_rnn_cudnn_run(rnn, c->cudnn, stream, r->seq_length, r->batch,
                              gpu_tensor_ptr(e, c, arena, s->inputs[4]),
                              gpu_tensor_ptr(e, c, arena, s->inputs[3]),
                              s->num_outputs ? gpu_tensor_ptr(e, c, arena, s->outputs[0]) : NULL,
                              c->workspace, e->workspace_bytes);
}

tci_status gpu_rnn_workspace(const exec_gpu_engine *e, int i, cudnnHandle_t cudnn,
                             size_t *out_bytes) {
    *out_bytes = 0;
    const step_impl *im = &e->impl[i];
    if (!im->rnn) return TCI_OK;
    const plan_rnn *r = &e->plan->steps[i].u.rnn;
    return kern_rnn_cudnn_workspace(im->rnn, cudnn, r->seq_length, r->batch, out_bytes);
}

/* One candidate as timed: cuDNN's plan, or (rnn NULL) the projection GEMM and tcinfer's
 * recurrence, on a context made of the tuning's handles, arena and workspace. */
typedef struct rnn_trial {
    const exec_gpu_engine *e;
    exec_gpu_context *c;
    void *arena;
    int step, projection;
    const kern_rnn_cudnn_plan *rnn;
} rnn_trial;

static tci_status launch_rnn_trial(const void *user, cudaStream_t stream) {
    const rnn_trial *t = user;
    if (t->rnn) return gpu_run_rnn_cudnn(t->e, t->c, t->arena, t->step, t->rnn, stream);
    TRY_STATUS(gpu_run_step(t->e, t->c, t->arena, t->projection, stream));
    return gpu_run_step(t->e, t->c, t->arena, t->step, stream);
}

/* Step i runs on cuDNN's plan: the projection step is skipped, both named in reports. */
static void keep_cudnn(exec_gpu_engine *e, int i, kern_rnn_cudnn_plan *rnn, int j) {
    step_impl *im = &e->impl[i];
    im->rnn = rnn;
    im->rnn_projection = j;
    e->impl[j].skipped = true;
    snprintf(e->impl[j].text, sizeof e->impl[j].text,
             "not run: cuDNN's RNN (step %d) projects the input", i);
    e->impl[j].kernel = e->impl[j].text;
}

static void select_plan(void *trial, void *lib) { ((rnn_trial *)trial)->rnn = lib; }

static void keep_plan(exec_gpu_engine *e, int i, void *lib) {
    keep_cudnn(e, i, lib, projection_step(e->plan, i));
}

static const char *plan_name(const void *lib) { return kern_rnn_cudnn_name(lib); }

static void destroy_plan(void *lib) { kern_rnn_cudnn_destroy(lib); }

static const char OURS[] = "tcinfer rnn (projection GEMM + per-step kernel)";

tci_status gpu_rnn_choose(exec_gpu_engine *e, int i, cudnnHandle_t cudnn, cublasLtHandle_t lt,
                          cudaStream_t stream, void *arena, void *workspace) {
    kern_rnn_cudnn_plan *rnn = NULL;
    char why[256] = "";
    if (e->kernels != TCI_KERNELS_WMMA) {
        tci_status st = create_plan(e, i, cudnn, &rnn);
        if (st != TCI_OK && st != TCI_ERR_UNSUPPORTED) return st;
        if (st != TCI_OK) snprintf(why, sizeof why, "%s", tci_last_error());
        status_error_clear();
    }
    exec_gpu_context tuning;
    memset(&tuning, 0, sizeof tuning);
    tuning.cudnn = cudnn;
    tuning.lt = lt;
    tuning.workspace = workspace;
    /* the workspace the trials get is the tuning's (WORKSPACE_LIMIT), which the engine's
     * workspace_bytes, passed to the kernels, never exceeds */
    rnn_trial t = {e, &tuning, arena, i, projection_step(e->plan, i), NULL};
    const gpu_library_choice k = {OURS,   "cuDNN RNN",  "cuDNN's RNN", launch_rnn_trial,
                                  &t,     select_plan,  keep_plan,     plan_name,
                                  destroy_plan};
    return gpu_choose_library(e, i, rnn, why, &k, stream);
}

tci_status gpu_rnn_apply_cached(exec_gpu_engine *e, int i, const cache_entry *hit,
                                cudnnHandle_t cudnn) {
    step_impl *im = &e->impl[i];
    if (strcmp(hit->value, "rnn cudnn") == 0) {
        kern_rnn_cudnn_plan *rnn = NULL;
        TRY_STATUS(create_plan(e, i, cudnn, &rnn));
        keep_cudnn(e, i, rnn, projection_step(e->plan, i));
        gpu_describe_cached(im, kern_rnn_cudnn_name(rnn), true, "tcinfer", hit);
    } else if (strcmp(hit->value, "rnn tcinfer") == 0) {
        gpu_describe_cached(im, OURS, false, "cuDNN", hit);
    } else {
        return status_error(TCI_ERR_UNSUPPORTED, "malformed cached RNN choice");
    }
    return TCI_OK;
}
