/* Autotuning: each convolution's, GEMM's, recurrence's and fused attention's kernel chosen by
 * timing the candidates (tcinfer's WMMA / wgmma configs against cuDNN / cuBLASLt; tcinfer's
 * recurrence against cuDNN's RNN, rnn_choice.c; tcinfer's attention kernel against cuDNN's,
 * attention_choice.c) inside CUDA graphs, or taken from the cache. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "graph/gpu/gpu_internal.h"
#include "kernels/cuda_check.h"
#include "kernels/wgmma_gemm.h"

/* Whether this device runs the wgmma kernels (Hopper); asked per use, it is two attribute
 * queries. */
static bool wgmma_device(void) {
    if (kern_wgmma_gemm_device_supported() == TCI_OK) return true;
    status_error_clear();
    return false;
}

static const char FRESH[] = "timed on an identical layer";

/* One candidate of a convolution or GEMM step, launched on a stream (for timing). A library
 * candidate includes the activation step it leaves to tcinfer (post_act), which the fused
 * kernels it runs against do not need. */
typedef struct kernel_trial {
    const plan_step *step;
    const step_impl *impl;
    int wmma;                  /* config, or -1 for the library plan */
    cudnnHandle_t cudnn;
    cublasLtHandle_t lt;
    const void *x, *z;         /* conv: input and residual; GEMM: A and B */
    void *y, *workspace;
    const void *c;             /* GEMM: the residual (C), or NULL */
    const plan_tensor *out;    /* y's tensor */
} kernel_trial;

static tci_status launch_trial(const kernel_trial *t, cudaStream_t stream) {
    if (t->step->kind == PLAN_STEP_GEMM) {
        const plan_gemm *g = &t->step->u.gemm;
        if (t->wmma < 0)
            return gpu_run_library_gemm(g, t->impl, t->lt, stream, 0, 0, t->x, t->z, t->c, t->y,
                                        t->out, t->workspace, WORKSPACE_LIMIT);
        return gpu_run_wmma_gemm(g, t->wmma, t->impl, t->x, t->z, t->c, t->y, stream);
    }
    const plan_conv *c = &t->step->u.conv;
    if (t->wmma < 0) {
        TRY_STATUS(kern_conv_run(t->impl->conv, t->cudnn, stream, (int)c->geom.n, t->x,
                                 t->impl->weights, t->impl->bias, t->z, t->y, t->workspace,
                                 WORKSPACE_LIMIT));
        return c->post_act.kind == ACT_NONE ? TCI_OK
                                            : gpu_run_activation(t->out, t->y, c->post_act, stream);
    }
    kern_wmma_conv_desc d;
    gpu_wmma_desc_of(c, t->impl->dtype, &d);
    return kern_wmma_conv_run(&d, t->wmma, c->geom.n, t->x, t->impl->weights, t->impl->bias_f32, t->z,
                              t->y, t->workspace, WORKSPACE_LIMIT, stream);
}

/* Time of one run of a candidate as the engine runs it, inside a CUDA graph: one checked
 * eager run, then ITERS runs captured in a graph, the best of ROUNDS replays. Timing eager
 * calls would count host overhead that graph replay hides (cuDNN's is tens of microseconds a
 * call, more than many batch-1 layers take). */
tci_status gpu_time_graph(gpu_launch_fn launch, const void *user, cudaStream_t stream,
                          float *out_ms) {
    enum { ROUNDS = 3, ITERS = 5 };
    *out_ms = -1.0f;
    TRY_STATUS(launch(user, stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaEvent_t start = NULL, stop = NULL;
    tci_status st;
    cudaError_t end;
    /* another thread's device-wide call (cudaFree, a context created beside this build) can
     * invalidate a capture without any fault of its own: nothing ran, the error is not
     * sticky, and the capture is tried again (a few times) */
    for (int attempt = 0;; attempt++) {
        KERN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        st = TCI_OK;
        for (int i = 0; st == TCI_OK && i < ITERS; i++) st = launch(user, stream);
        end = cudaStreamEndCapture(stream, &graph);
        if (end != cudaErrorStreamCaptureInvalidated || attempt == 3) break;
        (void)cudaGetLastError();
    }
    if (st == TCI_OK && end != cudaSuccess)
        st = status_error(TCI_ERR_CUDA, "capturing a layer for timing: %s",
                          cudaGetErrorString(end));
    if (st == TCI_OK && (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess ||
                         cudaEventCreate(&start) != cudaSuccess ||
                         cudaEventCreate(&stop) != cudaSuccess))
        st = status_error(TCI_ERR_CUDA, "preparing the timing of a layer failed");
    for (int r = 0; st == TCI_OK && r <= ROUNDS; r++) { /* round 0 warms the graph up */
        float ms = 0.0f;
        if (cudaEventRecord(start, stream) != cudaSuccess ||
            cudaGraphLaunch(exec, stream) != cudaSuccess ||
            cudaEventRecord(stop, stream) != cudaSuccess ||
            cudaEventSynchronize(stop) != cudaSuccess ||
            cudaEventElapsedTime(&ms, start, stop) != cudaSuccess)
            st = status_error(TCI_ERR_CUDA, "timing a layer failed");
        ms /= ITERS;
        if (st == TCI_OK && r > 0 && (*out_ms < 0.0f || ms < *out_ms)) *out_ms = ms;
    }
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    return st;
}

static tci_status launch_kernel_trial(const void *user, cudaStream_t stream) {
    return launch_trial(user, stream);
}

static tci_status time_trial(const kernel_trial *t, cudaStream_t stream, float *out_ms) {
    return gpu_time_graph(launch_kernel_trial, t, stream, out_ms);
}

/* Whether WMMA config cfg runs the trial's step (conv: within the workspace limit too). */
static bool wmma_applies(const kernel_trial *t, int cfg) {
    if (t->step->kind == PLAN_STEP_GEMM) {
        kern_wmma_gemm_desc d;
        gpu_wmma_gemm_desc_of(&t->step->u.gemm, t->impl->dtype, &d);
        if (cfg == WMMA_TF32) return kern_wmma_variant_supports(&d, KERN_WMMA_TF32_16X16X8) == TCI_OK;
        if (cfg >= WGMMA)
            return kern_wgmma_gemm_supports(&d, cfg - WGMMA) == TCI_OK && wgmma_device();
        return kern_wmma_gemm_supports(&d, cfg) == TCI_OK;
    }
    kern_wmma_conv_desc d;
    gpu_wmma_desc_of(&t->step->u.conv, t->impl->dtype, &d);
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
        TRY_STATUS(st);
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
    bool fp32 = gpu_step_fp32(p, s);
    bool try_wmma = !fp32 && e->kernels != TCI_KERNELS_LIBRARY;
    kernel_trial trial = {s, im, -1, cudnn, NULL, gpu_device_ptr(e, arena, s->inputs[0]),
                        s->u.conv.has_residual ? gpu_device_ptr(e, arena, s->inputs[3]) : NULL,
                        gpu_device_ptr(e, arena, s->outputs[0]), workspace, NULL,
                        gpu_tensor_of(p, s->outputs[0])};
    tci_status lib = TCI_ERR_UNSUPPORTED;
    if (e->kernels != TCI_KERNELS_WMMA || !try_wmma) {
        kern_conv_desc d;
        gpu_conv_desc_of(e, &s->u.conv, im->dtype, &d);
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
            if (try_wmma) TRY_STATUS(time_trial(&trial, stream, &im->library_ms));
        }
    }
    if (!try_wmma) return lib;
    int best;
    float best_ms;
    TRY_STATUS(fastest_wmma(&trial, stream, false, &best, &best_ms));
    if (best < 0 && lib != TCI_OK)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "neither cuDNN nor a WMMA kernel runs this convolution (%" PRId64
                         " groups of %" PRId64 " -> %" PRId64 " channels)",
                         s->u.conv.geom.groups, s->u.conv.geom.c, s->u.conv.geom.k);
    keep_fastest(im, e->kernels, lib == TCI_OK, best, best_ms,
                 best < 0 ? NULL : kern_wmma_conv_config_name(best), "cuDNN");
    if (im->wmma >= 0) {
        kern_wmma_conv_desc wd;
        gpu_wmma_desc_of(&s->u.conv, im->dtype, &wd);
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
    bool fp32 = gpu_step_fp32(p, s);
    kern_gemm_desc d;
    gpu_gemm_desc_of(e, &s->u.gemm, im->dtype, &d);
    kernel_trial trial = {s, im, -1, NULL, lt, gpu_device_ptr(e, arena, s->inputs[0]),
                        gpu_device_ptr(e, arena, s->inputs[1]),
                        gpu_device_ptr(e, arena, s->outputs[0]), workspace,
                        s->u.gemm.has_c ? gpu_device_ptr(e, arena, s->inputs[3]) : NULL,
                        gpu_tensor_of(p, s->outputs[0])};
    kern_gemm_scratch scratch = {trial.x, trial.z, trial.c, im->bias, trial.y, workspace,
                                 WORKSPACE_LIMIT};
    TRY_STATUS(kern_gemm_create(lt, stream, &d, &scratch, &im->gemm));
    kern_gemm_info info;
    kern_gemm_get_info(im->gemm, &info);
    im->kernel = info.algorithm;
    if (info.workspace_bytes > e->workspace_bytes) e->workspace_bytes = info.workspace_bytes;
    /* fp32 steps: the WMMA tf32 kernel in --precision tf32, else the library alone */
    bool tf32 = fp32 && gpu_allows_tf32(e);
    if ((fp32 && !tf32) || e->kernels == TCI_KERNELS_LIBRARY) return TCI_OK;
    TRY_STATUS(time_trial(&trial, stream, &im->library_ms));
    int best;
    float best_ms;
    TRY_STATUS(fastest_wmma(&trial, stream, tf32, &best, &best_ms));
    char name[80] = "";
    if (best >= 0) gpu_gemm_config_name(best, name, sizeof name);
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
    bool gemm = s->kind == PLAN_STEP_GEMM, fp32 = gpu_step_fp32(p, s);
    kernel_trial t = {s, im, -1, cudnn, lt, NULL, NULL, NULL, workspace, NULL, NULL};
    const char *origin = hit->origin;
    int cfg = -1;
    if (sscanf(hit->value, "wmma %d", &cfg) == 1) {
        bool tf32 = cfg == WMMA_TF32;
        if (cfg < 0 || tf32 != fp32 || (tf32 && (!gemm || !gpu_allows_tf32(e))) ||
            !wmma_applies(&t, cfg))
            return status_error(TCI_ERR_UNSUPPORTED, "cached WMMA config %d does not apply", cfg);
        im->wmma = cfg;
        if (!gemm) {
            kern_wmma_conv_desc wd;
            gpu_wmma_desc_of(&s->u.conv, im->dtype, &wd);
            size_t ws = kern_wmma_conv_workspace(&wd, cfg);
            if (ws > e->workspace_bytes) e->workspace_bytes = ws;
        }
        char name[80];
        if (gemm) gpu_gemm_config_name(cfg, name, sizeof name);
        else snprintf(name, sizeof name, "%s", kern_wmma_conv_config_name(cfg));
        describe_reused(im->text, sizeof im->text, name, origin, hit->wmma_ms,
                        gemm ? "cuBLASLt" : "cuDNN", hit->library_ms);
    } else if (gemm) {
        unsigned char algo[KERN_GEMM_ALGO_BYTES];
        const char *hex = strchr(hit->value, ' ');
        for (int b = 0; b < KERN_GEMM_ALGO_BYTES; b++) {
            unsigned v = 0;
            if (!hex || sscanf(hex + 1 + 2 * b, "%2x", &v) != 1)
                return status_error(TCI_ERR_UNSUPPORTED, "malformed cached cuBLASLt algorithm");
            algo[b] = (unsigned char)v;
        }
        kern_gemm_desc d;
        gpu_gemm_desc_of(e, &s->u.gemm, im->dtype, &d);
        d.use_algo = algo;
        kern_gemm_scratch scratch = {gpu_device_ptr(e, arena, s->inputs[0]),
                                     gpu_device_ptr(e, arena, s->inputs[1]),
                                     s->u.gemm.has_c ? gpu_device_ptr(e, arena, s->inputs[3]) : NULL,
                                     im->bias, gpu_device_ptr(e, arena, s->outputs[0]), workspace,
                                     WORKSPACE_LIMIT};
        TRY_STATUS(kern_gemm_create(lt, stream, &d, &scratch, &im->gemm));
        kern_gemm_info info;
        kern_gemm_get_info(im->gemm, &info);
        if (info.workspace_bytes > e->workspace_bytes) e->workspace_bytes = info.workspace_bytes;
        describe_reused(im->text, sizeof im->text, info.algorithm, origin, hit->library_ms,
                        "best tcinfer kernel", hit->wmma_ms);
    } else {
        kern_conv_desc d;
        gpu_conv_desc_of(e, &s->u.conv, im->dtype, &d);
        d.use_choice = 1;
        if (sscanf(hit->value, "cudnn %d %d %d", &d.choice.algo, &d.choice.math,
                   &d.choice.fused) != 3)
            return status_error(TCI_ERR_UNSUPPORTED, "malformed cached cuDNN choice");
        kern_conv_scratch scratch = {gpu_device_ptr(e, arena, s->inputs[0]), im->weights, im->bias,
                                     s->u.conv.has_residual ? gpu_device_ptr(e, arena, s->inputs[3])
                                                            : NULL,
                                     gpu_device_ptr(e, arena, s->outputs[0]), workspace,
                                     WORKSPACE_LIMIT};
        TRY_STATUS(kern_conv_create(cudnn, stream, &d, &scratch, &im->conv));
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

/* The kernel choice of a tuned step, as the timing cache stores it. */
void gpu_choice_value(const exec_gpu_engine *e, int i, char *value, size_t size) {
    const step_impl *im = &e->impl[i];
    if (gpu_rnn_tuned_step(&e->plan->steps[i])) {
        snprintf(value, size, "rnn %s", im->rnn ? "cudnn" : "tcinfer");
    } else if (gpu_attention_tuned_step(&e->plan->steps[i])) {
        snprintf(value, size, "attention %s", im->sdpa ? "cudnn" : "tcinfer");
    } else if (im->wmma >= 0) {
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

void gpu_describe_choice(step_impl *im, const char *kept, float kept_ms, const char *other,
                         float other_ms, const char *why) {
    int n = snprintf(im->text, sizeof im->text, "%s", kept);
    if (n >= 0 && (size_t)n < sizeof im->text && kept_ms >= 0.0f)
        n += snprintf(im->text + n, sizeof im->text - (size_t)n, " (%.1f us", 1e3 * kept_ms);
    else if (n >= 0 && (size_t)n < sizeof im->text)
        n += snprintf(im->text + n, sizeof im->text - (size_t)n, " (");
    if (n >= 0 && (size_t)n < sizeof im->text) {
        const char *sep = kept_ms >= 0.0f ? "; " : "";
        if (why)
            n += snprintf(im->text + n, sizeof im->text - (size_t)n, "%scuDNN refuses: %s)", sep,
                          why);
        else if (other_ms >= 0.0f)
            n += snprintf(im->text + n, sizeof im->text - (size_t)n, "%s%s %.1f us)", sep, other,
                          1e3 * other_ms);
        else
            n += snprintf(im->text + n, sizeof im->text - (size_t)n, "%s%s not timed)", sep,
                          other);
    }
    im->kernel = im->text;
}

tci_status gpu_choose_library(exec_gpu_engine *e, int i, void *lib, const char *why,
                              const gpu_library_choice *k, cudaStream_t stream) {
    step_impl *im = &e->impl[i];
    im->library_ms = im->wmma_ms = -1.0f;
    if (!lib) {
        if (e->kernels == TCI_KERNELS_WMMA) snprintf(im->text, sizeof im->text, "%s", k->ours);
        else gpu_describe_choice(im, k->ours, -1.0f, "cuDNN", -1.0f, why);
        im->kernel = im->text;
        return TCI_OK;
    }
    char failure[256] = "";
    k->select(k->trial, lib);
    tci_status st = gpu_time_graph(k->launch, k->trial, stream, &im->library_ms);
    k->select(k->trial, NULL);
    if (st == TCI_ERR_CUDA && !gpu_context_broken(failure, sizeof failure)) {
        snprintf(failure, sizeof failure, "%s failed in a CUDA graph: %s", k->failed,
                 tci_last_error());
        status_error_clear();
        k->destroy(lib);
        im->library_ms = -1.0f;
        gpu_describe_choice(im, k->ours, -1.0f, "cuDNN", -1.0f, failure);
        return TCI_OK;
    }
    if (st == TCI_OK && e->kernels == TCI_KERNELS_LIBRARY) {
        k->keep(e, i, lib);
        snprintf(im->text, sizeof im->text, "%s (%.1f us; tcinfer's not timed)", k->name(lib),
                 1e3 * im->library_ms);
        im->kernel = im->text;
        return TCI_OK;
    }
    if (st == TCI_OK) st = gpu_time_graph(k->launch, k->trial, stream, &im->wmma_ms);
    if (st != TCI_OK) {
        k->destroy(lib);
        return st;
    }
    if (im->library_ms < im->wmma_ms) {
        k->keep(e, i, lib);
        gpu_describe_choice(im, k->name(lib), im->library_ms, k->ours, im->wmma_ms, NULL);
    } else {
        k->destroy(lib);
        gpu_describe_choice(im, k->ours, im->wmma_ms, k->library, im->library_ms, NULL);
    }
    return TCI_OK;
}

void gpu_describe_cached(step_impl *im, const char *kept, bool library_kept, const char *other,
                         const cache_entry *hit) {
    im->library_ms = hit->library_ms;
    im->wmma_ms = hit->wmma_ms;
    const float kept_ms = library_kept ? hit->library_ms : hit->wmma_ms;
    const float other_ms = library_kept ? hit->wmma_ms : hit->library_ms;
    int n = snprintf(im->text, sizeof im->text, "%s (%s", kept, hit->origin);
    if (n >= 0 && (size_t)n < sizeof im->text && kept_ms >= 0.0f)
        n += snprintf(im->text + n, sizeof im->text - (size_t)n, ": %.1f us", 1e3 * kept_ms);
    if (n >= 0 && (size_t)n < sizeof im->text && other_ms >= 0.0f)
        n += snprintf(im->text + n, sizeof im->text - (size_t)n, "; %s %.1f us", other,
                      1e3 * other_ms);
    if (n >= 0 && (size_t)n < sizeof im->text)
        snprintf(im->text + n, sizeof im->text - (size_t)n, ")");
    im->kernel = im->text;
}

/* Conv (not depthwise: our own kernel only), GEMM, recurrence (RNN STEPS) and fused attention
 * steps choose their kernel by timing. */
bool gpu_tuned_step(const plan_step *s) {
    return s->kind == PLAN_STEP_GEMM || (s->kind == PLAN_STEP_CONV && !s->u.conv.depthwise) ||
           gpu_rnn_tuned_step(s) || gpu_attention_tuned_step(s);
}

/* Tunes a conv or GEMM step: from the timing cache when it has the problem, else by timing
 * (and the choice goes into the cache). */
static tci_status tune_step(exec_gpu_engine *e, int i, cudnnHandle_t cudnn, cublasLtHandle_t lt,
                            cudaStream_t stream, void *arena, void *workspace) {
    const plan_step *s = &e->plan->steps[i];
    step_impl *im = &e->impl[i];
    char key[512];
    gpu_problem_key(e, s, key, sizeof key);
    const cache_entry *hit = e->cache ? gpu_cache_find(e->cache, key) : NULL;
    const bool rnn = gpu_rnn_tuned_step(s), attention = gpu_attention_tuned_step(s);
    if (hit) {
        tci_status st = rnn         ? gpu_rnn_apply_cached(e, i, hit, cudnn)
                        : attention ? gpu_attention_apply_cached(e, i, hit, cudnn)
                                    : apply_cached(e, i, hit, cudnn, lt, stream, arena, workspace);
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
    if (rnn) TRY_STATUS(gpu_rnn_choose(e, i, cudnn, lt, stream, arena, workspace));
    else if (attention)
        TRY_STATUS(gpu_attention_choose(e, i, cudnn, lt, stream, arena, workspace));
    else if (s->kind == PLAN_STEP_GEMM) TRY_STATUS(time_gemm(e, i, lt, stream, arena, workspace));
    else TRY_STATUS(time_conv(e, i, cudnn, stream, arena, workspace));
    e->layers_timed++;
    char value[CHOICE_BYTES];
    gpu_choice_value(e, i, value, sizeof value);
    return gpu_cache_put(e->cache, key, value, im->library_ms, im->wmma_ms, FRESH);
}

/* Library plans are chosen by timing them on real buffers: a scratch arena stands in for a
 * context's. */
tci_status gpu_create_library_plans(exec_gpu_engine *e, tci_progress_fn progress,
                                    void *progress_user) {
    const plan *p = e->plan;
    static const char stage[] = "choosing kernels";
    size_t tuned = 0, total = 0;
    for (int i = 0; i < p->num_steps; i++) total += gpu_tuned_step(&p->steps[i]);
    if (progress && total) progress(stage, 0, total, progress_user);
    cudaStream_t stream = NULL;
    cudnnHandle_t cudnn = NULL;
    cublasLtHandle_t lt = NULL;
    void *arena = NULL, *workspace = NULL;
    tci_status st = TCI_OK;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudnnCreate(&cudnn) != CUDNN_STATUS_SUCCESS || cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
        st = status_error(TCI_ERR_CUDA, "cannot create the CUDA stream or library handles for tuning");
    if (st == TCI_OK) st = gpu_malloc(&arena, p->arena_bytes, "the tuning arena (activations)");
    if (st == TCI_OK) st = gpu_malloc(&workspace, WORKSPACE_LIMIT, "the tuning workspace");
    if (st == TCI_OK && cudaMemset(arena, 0, p->arena_bytes ? p->arena_bytes : 1) != cudaSuccess)
        st = status_error(TCI_ERR_CUDA, "cudaMemset of the tuning arena failed");
    for (int i = 0; st == TCI_OK && i < p->num_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (gpu_tuned_step(s)) {
            st = tune_step(e, i, cudnn, lt, stream, arena, workspace);
            if (st == TCI_OK && progress) progress(stage, ++tuned, total, progress_user);
        } else if (s->kind == PLAN_STEP_CONV) { /* depthwise */
            e->impl[i].kernel = "tcinfer depthwise";
        } else if (s->kind == PLAN_STEP_CONV_TRANSPOSE) {
            kern_convt_desc d;
            gpu_convt_desc_of(e, &s->u.conv, e->impl[i].dtype, &d);
            kern_convt_scratch scratch = {gpu_device_ptr(e, arena, s->inputs[0]),
                                          e->impl[i].weights, e->impl[i].bias,
                                          gpu_device_ptr(e, arena, s->outputs[0]), workspace,
                                          WORKSPACE_LIMIT};
            st = kern_convt_create(cudnn, stream, &d, &scratch, &e->impl[i].convt);
            if (st == TCI_OK) {
                kern_convt_info info;
                kern_convt_get_info(e->impl[i].convt, &info);
                e->impl[i].kernel = info.algorithm;
                if (info.workspace_bytes > e->workspace_bytes) e->workspace_bytes = info.workspace_bytes;
            }
        }
        if (st != TCI_OK) st = gpu_step_error(s, st);
    }
    cudaFree(workspace);
    cudaFree(arena);
    if (lt) cublasLtDestroy(lt);
    if (cudnn) cudnnDestroy(cudnn);
    if (stream) cudaStreamDestroy(stream);
    return st;
}
