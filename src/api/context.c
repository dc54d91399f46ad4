/* The public context: runs an engine through its executor, inputs by position or by name, and
 * the outputs, reports and timings of its runs. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "api/internal.h"
#include "graph/compare.h"

tci_status tci_context_create(const tci_engine *engine, tci_context **out_context) {
    if (!out_context) return status_error(TCI_ERR_INVALID_ARGUMENT, "out_context is NULL");
    *out_context = NULL;
    if (!engine) return status_error(TCI_ERR_INVALID_ARGUMENT, "engine is NULL");
    if (engine->plan_only)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "the engine was built with plan_only and cannot run");
    tci_context *c = calloc(1, sizeof *c);
    if (!c) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating context");
    c->engine = engine;
    tci_status st;
#if TCI_HAVE_CUDA
    if (engine->gpu) {
        api_device scope;
        st = api_device_enter(engine->device, &scope);
        if (st == TCI_OK)
            st = api_device_leave(&scope, exec_gpu_guard(NULL, exec_gpu_context_create(
                                                                   engine->gpu,
                                                                   engine->use_cuda_graph,
                                                                   &c->gpu)));
    } else
#endif
        st = exec_cpu_create(engine->graph, &c->cpu);
    if (st != TCI_OK) {
        free(c);
        return api_log_failure(&engine->log, st);
    }
    *out_context = c;
    return TCI_OK;
}

static void release_inputs(tci_context *c) {
    for (size_t i = 0; i < c->num_last_inputs; i++) free(c->last_inputs[i].data);
    free(c->last_inputs);
    c->last_inputs = NULL;
    c->num_last_inputs = 0;
}

void tci_context_destroy(tci_context *context) {
    if (!context) return;
    exec_cpu_destroy(context->cpu);
#if TCI_HAVE_CUDA
    api_device scope;
    /* a device that cannot be made current: freed from the caller's, as CUDA allows */
    tci_status st = api_device_enter(context->engine->device, &scope);
    exec_gpu_context_destroy(context->gpu);
    if (st == TCI_OK) (void)api_device_leave(&scope, TCI_OK);
#endif
    release_inputs(context);
    free(context);
}

/* The CPU benchmark re-runs the last inputs, which the caller may have freed: keep copies. */
static tci_status keep_inputs(tci_context *c, const tci_tensor *inputs, size_t n) {
    release_inputs(c);
    c->last_inputs = calloc(n + 1, sizeof *c->last_inputs);
    if (!c->last_inputs) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    c->num_last_inputs = n;
    for (size_t i = 0; i < n; i++) {
        size_t bytes = (size_t)tci_tensor_count(&inputs[i]) * tci_dtype_size(inputs[i].dtype);
        c->last_inputs[i] = inputs[i];
        c->last_inputs[i].data = malloc(bytes ? bytes : 1);
        if (!c->last_inputs[i].data) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        if (bytes) memcpy(c->last_inputs[i].data, inputs[i].data, bytes);
    }
    return TCI_OK;
}

/* OpenBLAS's own thread count before any engine set one: what cpu_threads 0 runs at. */
static int default_threads;
static pthread_once_t default_threads_once = PTHREAD_ONCE_INIT;
static void read_default_threads(void) { default_threads = openblas_get_num_threads(); }

/* tci_engine_options.cpu_threads: OpenBLAS holds one count per process, set here when it
 * differs from the engine's. */
static void set_cpu_threads(const tci_engine *e) {
    pthread_once(&default_threads_once, read_default_threads);
    int want = e->cpu_threads > 0 ? e->cpu_threads : default_threads;
    if (want > 0 && openblas_get_num_threads() != want) openblas_set_num_threads(want);
}

/* Runs on host inputs, or (device_inputs) on inputs in the GPU engine's device memory. */
static tci_status run(tci_context *context, const tci_tensor *inputs, size_t num_inputs,
                      bool device_inputs) {
#if TCI_HAVE_CUDA
    if (context->gpu) {
        TRY_STATUS(exec_gpu_check_lost(context->gpu));
        if (num_inputs == tci_engine_input_count(context->engine))
            TRY_STATUS(api_check_run_shapes(context->engine, inputs, num_inputs));
        api_device scope;
        TRY_STATUS(api_device_enter(context->engine->device, &scope));
        return api_device_leave(&scope, exec_gpu_guard(context->gpu,
                                                       exec_gpu_run(context->gpu, inputs,
                                                                    num_inputs, device_inputs)));
    }
#endif
    if (device_inputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "inputs in device memory need a GPU engine; this context runs on the "
                            "CPU");
    set_cpu_threads(context->engine);
    TRY_STATUS(exec_cpu_run(context->cpu, inputs, num_inputs));
    return keep_inputs(context, inputs, num_inputs);
}

tci_status tci_context_run(tci_context *context, const tci_tensor *inputs, size_t num_inputs) {
    if (!context) return status_error(TCI_ERR_INVALID_ARGUMENT, "context is NULL");
    if (num_inputs && !inputs) return status_error(TCI_ERR_INVALID_ARGUMENT, "inputs is NULL");
    return api_log_failure(&context->engine->log, run(context, inputs, num_inputs, false));
}

tci_status tci_context_run_device_inputs(tci_context *context, const tci_tensor *inputs,
                                         size_t num_inputs) {
    if (!context) return status_error(TCI_ERR_INVALID_ARGUMENT, "context is NULL");
    if (num_inputs && !inputs) return status_error(TCI_ERR_INVALID_ARGUMENT, "inputs is NULL");
    return api_log_failure(&context->engine->log, run(context, inputs, num_inputs, true));
}

/* inputs put in engine order by name (ordered[i]: engine input i). */
static tci_status order_by_name(const tci_engine *e, const char *const *names,
                                const tci_tensor *inputs, size_t n, tci_tensor *ordered) {
    size_t want = tci_engine_input_count(e);
    bool *given = calloc(want + 1, sizeof *given);
    if (!given) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    tci_status st = TCI_OK;
    for (size_t k = 0; st == TCI_OK && k < n; k++) {
        const char *name = names ? names[k] : inputs[k].name;
        size_t i = 0;
        st = tci_engine_input_index(e, name, &i);
        if (st == TCI_OK && given[i])
            st = status_error(TCI_ERR_INVALID_ARGUMENT, "input '%s' is given twice", name);
        if (st == TCI_OK) {
            given[i] = true;
            ordered[i] = inputs[k];
        }
    }
    for (size_t i = 0; st == TCI_OK && i < want; i++)
        if (!given[i])
            st = status_error(TCI_ERR_INVALID_ARGUMENT,
                              "no tensor given for input '%s' (%zu of the engine's %zu inputs "
                              "given)",
                              e->graph->inputs[i]->name, n, want);
    free(given);
    return st;
}

tci_status tci_context_run_named(tci_context *context, const char *const *names,
                                 const tci_tensor *inputs, size_t num_inputs) {
    if (!context) return status_error(TCI_ERR_INVALID_ARGUMENT, "context is NULL");
    if (num_inputs && !inputs) return status_error(TCI_ERR_INVALID_ARGUMENT, "inputs is NULL");
    size_t want = tci_engine_input_count(context->engine);
    tci_tensor *ordered = calloc(want + 1, sizeof *ordered);
    if (!ordered) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    tci_status st = order_by_name(context->engine, names, inputs, num_inputs, ordered);
    if (st == TCI_OK) st = run(context, ordered, want, false);
    free(ordered);
    return api_log_failure(&context->engine->log, st);
}

tci_status tci_engine_device_format(const tci_engine *engine, int is_output, size_t index,
                                    tci_device_format *out) {
    if (!engine || !out) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    TRY_STATUS(api_check_size(out->struct_size, API_MIN_DEVICE_FORMAT, "tci_device_format"));
#if TCI_HAVE_CUDA
    if (engine->gpu) {
        const plan_tensor *t = exec_gpu_io_tensor(engine->gpu, is_output != 0, index);
        if (!t) return status_error(TCI_ERR_INVALID_ARGUMENT, "no %s %zu", is_output ? "output" : "input", index);
        tci_device_format format, *out_format = &format;
        tci_device_format_init(&format);
        out_format->dtype = t->dtype;
        out_format->layout = t->layout == PLAN_LAYOUT_NHWC8 ? TCI_DEVICE_NHWC8 : TCI_DEVICE_DENSE;
        out_format->rank = t->rank;
        for (int i = 0; i < t->rank; i++) out_format->dims[i] = t->dims[i];
        out_format->padded_channels = t->layout == PLAN_LAYOUT_NHWC8 ? t->padded_channels : 0;
        out_format->bytes = t->bytes;
        api_copy_out(out, &format, sizeof format);
        return TCI_OK;
    }
#endif
    (void)is_output;
    (void)index;
    return status_error(TCI_ERR_INVALID_ARGUMENT, "device formats belong to GPU engines; this one runs on the %s",
                     engine->plan_only ? "GPU planner only (plan_only)" : "CPU");
}

tci_status tci_context_run_device(tci_context *context, const void *const *inputs,
                                  size_t num_inputs, void *const *outputs, size_t num_outputs,
                                  const int64_t *leading_dims, void *cuda_stream) {
    if (!context) return status_error(TCI_ERR_INVALID_ARGUMENT, "context is NULL");
    const ir_graph *g = context->engine->graph;
    if (num_inputs != g->num_inputs || num_outputs != g->num_outputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "got %zu inputs and %zu outputs; the model has %zu and %zu", num_inputs,
                         num_outputs, g->num_inputs, g->num_outputs);
    if ((num_inputs && !inputs) || (num_outputs && !outputs))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "inputs or outputs is NULL");
#if TCI_HAVE_CUDA
    if (context->gpu) {
        api_device scope = {-1, -1};
        tci_status st = exec_gpu_check_lost(context->gpu);
        if (st == TCI_OK) st = api_device_enter(context->engine->device, &scope);
        if (st == TCI_OK)
            st = api_device_leave(&scope, exec_gpu_guard(context->gpu, exec_gpu_run_device(
                                                                           context->gpu, inputs,
                                                                           outputs, leading_dims,
                                                                           (cudaStream_t)
                                                                               cuda_stream)));
        return api_log_failure(&context->engine->log, st);
    }
#endif
    (void)leading_dims;
    (void)cuda_stream;
    return status_error(TCI_ERR_INVALID_ARGUMENT,
                     "device buffers need a GPU engine; this context runs on the CPU");
}

tci_status tci_context_output(const tci_context *context, size_t index, tci_tensor *out_tensor) {
    if (!context || !out_tensor) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    if (index >= context->engine->graph->num_outputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "no output %zu", index);
    const tci_tensor *t;
#if TCI_HAVE_CUDA
    if (context->gpu) {
        TRY_STATUS(exec_gpu_check_lost(context->gpu));
        t = exec_gpu_output(context->gpu, index);
    }
    else
#endif
        t = exec_cpu_output(context->cpu, index);
    if (!t->data) return status_error(TCI_ERR_INVALID_ARGUMENT, "no run has produced outputs yet");
    *out_tensor = *t;
    out_tensor->name = context->engine->graph->outputs[index]->name;
    return TCI_OK;
}

tci_status tci_context_output_device(const tci_context *context, size_t index,
                                    tci_tensor *out_tensor) {
    if (!context || !out_tensor) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    if (index >= context->engine->graph->num_outputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "no output %zu", index);
#if TCI_HAVE_CUDA
    if (context->gpu) {
        TRY_STATUS(exec_gpu_check_lost(context->gpu));
        TRY_STATUS(exec_gpu_output_device(context->gpu, index, out_tensor));
        out_tensor->name = context->engine->graph->outputs[index]->name;
        return TCI_OK;
    }
#endif
    return status_error(TCI_ERR_INVALID_ARGUMENT,
                        "outputs on the device belong to GPU engines; this context runs on the "
                        "CPU (tci_context_output has its outputs)");
}

tci_status tci_context_output_into(const tci_context *context, size_t index, void *host_buffer,
                                   size_t bytes) {
    tci_tensor t;
    TRY_STATUS(tci_context_output(context, index, &t));
    size_t need = (size_t)tci_tensor_count(&t) * tci_dtype_size(t.dtype);
    if (!host_buffer && need)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "host_buffer is NULL");
    if (bytes < need)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "output '%s' (%s, %" PRId64 " elements) needs %zu bytes; the buffer "
                            "has %zu",
                            t.name, tci_dtype_name(t.dtype), tci_tensor_count(&t), need, bytes);
    if (need) memcpy(host_buffer, t.data, need);
    return TCI_OK;
}

static uint64_t count_nonfinite_host(const tci_tensor *t) {
    uint64_t n = 0;
    if (t->dtype != TCI_DTYPE_FLOAT || !t->data) return 0;
    const float *v = t->data;
    for (int64_t i = 0, count = tci_tensor_count(t); i < count; i++) n += !isfinite(v[i]);
    return n;
}

static tci_status nonfinite(tci_context *context, tci_nonfinite_report *out_report);

tci_status tci_context_nonfinite(tci_context *context, tci_nonfinite_report *out) {
    if (!context || !out) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    TRY_STATUS(api_check_size(out->struct_size, API_MIN_NONFINITE_REPORT, "tci_nonfinite_report"));
    tci_nonfinite_report r;
    tci_nonfinite_report_init(&r);
    const api_log *log = &context->engine->log;
    api_device scope;
    TRY_STATUS(api_log_failure(log, api_device_enter(context->engine->device, &scope)));
    TRY_STATUS(api_log_failure(log, api_device_leave(&scope, nonfinite(context, &r))));
    if (r.count) {
        const char *name = context->engine->graph->outputs[r.output_index]->name;
        if (r.found)
            api_log_message(log, TCI_LOG_WARNING,
                            "the outputs hold %llu NaN/Inf values (first in '%s'); they first "
                            "appear in the output of layer '%s' (%s)",
                            (unsigned long long)r.count, name, r.layer, r.op_type);
        else
            api_log_message(log, TCI_LOG_WARNING,
                            "the outputs hold %llu NaN/Inf values (first in '%s')",
                            (unsigned long long)r.count, name);
    }
    api_copy_out(out, &r, sizeof r);
    return TCI_OK;
}

static tci_status nonfinite(tci_context *context, tci_nonfinite_report *out_report) {
    size_t n = context->engine->graph->num_outputs;
    uint64_t *counts = calloc(n + 1, sizeof *counts);
    if (!counts) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    tci_status st = TCI_OK;
#if TCI_HAVE_CUDA
    if (context->gpu) {
        st = exec_gpu_check_lost(context->gpu);
        if (st == TCI_OK) st = exec_gpu_guard(context->gpu, exec_gpu_nonfinite(context->gpu, counts));
    }
    else
#endif
        for (size_t k = 0; k < n; k++) counts[k] = count_nonfinite_host(exec_cpu_output(context->cpu, k));
    for (size_t k = n; st == TCI_OK && k-- > 0;) {
        if (counts[k]) out_report->output_index = k;
        out_report->count += counts[k];
    }
    free(counts);
    TRY_STATUS(st);
#if TCI_HAVE_CUDA
    if (context->gpu && out_report->count) {
        int input = -1, step = -1;
        TRY_STATUS(exec_gpu_guard(context->gpu,
                                  exec_gpu_locate_nonfinite(context->gpu, &input, &step)));
        out_report->input_index = input;
        if (step >= 0) {
            const plan_step *s = &exec_gpu_context_plan(context->gpu)->steps[step];
            out_report->found = 1;
            snprintf(out_report->layer, sizeof out_report->layer, "%s", s->node->name);
            snprintf(out_report->op_type, sizeof out_report->op_type, "%s", s->label);
        }
    }
#endif
    return TCI_OK;
}

tci_status tci_context_benchmark(tci_context *context, int iterations, int warmup,
                                 float *times_ms) {
    if (!context || !times_ms || iterations < 1 || warmup < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "bad benchmark arguments");
#if TCI_HAVE_CUDA
    if (context->gpu) {
        TRY_STATUS(exec_gpu_check_lost(context->gpu));
        api_device scope;
        TRY_STATUS(api_device_enter(context->engine->device, &scope));
        return api_device_leave(&scope, exec_gpu_guard(context->gpu,
                                                       exec_gpu_bench(context->gpu, iterations,
                                                                      warmup, times_ms)));
    }
#endif
    if (!context->last_inputs) return status_error(TCI_ERR_INVALID_ARGUMENT, "run once before benchmarking");
    set_cpu_threads(context->engine);
    for (int i = 0; i < warmup + iterations; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        TRY_STATUS(exec_cpu_run(context->cpu, context->last_inputs, context->num_last_inputs));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (i >= warmup)
            times_ms[i - warmup] = (float)((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    }
    return TCI_OK;
}

tci_status tci_context_profile(tci_context *context, int iterations, tci_profile_fn fn,
                               void *user) {
    if (!context || !fn) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
#if TCI_HAVE_CUDA
    if (context->gpu) {
        const exec_gpu_engine *ge = context->engine->gpu;
        const plan *p = exec_gpu_engine_plan(ge);
        float *ms = calloc((size_t)p->num_steps + 1, sizeof(float));
        if (!ms) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        api_device scope = {-1, -1};
        tci_status st = exec_gpu_check_lost(context->gpu);
        if (st == TCI_OK) st = api_device_enter(context->engine->device, &scope);
        if (st == TCI_OK)
            st = api_device_leave(&scope, exec_gpu_guard(context->gpu,
                                                         exec_gpu_profile(context->gpu,
                                                                          iterations, ms)));
        for (int i = 0; st == TCI_OK && i < p->num_steps; i++)
            fn((size_t)i, p->steps[i].node->name, p->steps[i].label, exec_gpu_step_kernel(ge, i),
               ms[i], user);
        free(ms);
        return st;
    }
#endif
    (void)iterations;
    (void)user;
    return status_error(TCI_ERR_INVALID_ARGUMENT, "per-layer profiles are for GPU engines");
}

tci_status tci_compare(const tci_tensor *test, const tci_tensor *baseline,
                       tci_compare_result *out) {
    if (!test || !baseline || !out) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    TRY_STATUS(api_check_size(out->struct_size, API_MIN_COMPARE_RESULT, "tci_compare_result"));
    tci_compare_result result, *out_result = &result;
    tci_compare_result_init(&result);
    if (out->struct_size >= API_SIZE_THROUGH(tci_compare_result, rtol)) {
        result.atol = out->atol;
        result.rtol = out->rtol;
    }
    if (!(result.atol >= 0) || !isfinite(result.atol) || !(result.rtol >= 0) ||
        !isfinite(result.rtol))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_compare_result.atol and .rtol are %g and %g; finite numbers >= 0 "
                            "expected",
                            result.atol, result.rtol);
    if (test->dtype != TCI_DTYPE_FLOAT || baseline->dtype != TCI_DTYPE_FLOAT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare needs float tensors");
    int64_t count = tci_tensor_count(test);
    if (count < 0 || tci_tensor_count(baseline) < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "compared tensors need a rank of 0..%d and non-negative dims",
                            TCI_MAX_RANK);
    if (count > 0 && (!test->data || !baseline->data))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compared tensors have no data");
    bool same = test->rank == baseline->rank;
    for (int i = 0; same && i < test->rank; i++) same = test->dims[i] == baseline->dims[i];
    if (!same) return status_error(TCI_ERR_INVALID_ARGUMENT, "compared tensors differ in shape");
    compare_metrics m;
    TRY_STATUS(compare_arrays(test->data, baseline->data, (size_t)count, &m));
    out_result->max_abs = m.max_abs_error;
    out_result->mean_abs = m.mean_abs_error;
    out_result->relative_l2 = m.relative_l2_error;
    out_result->cosine = m.cosine_similarity;
    out_result->non_finite = m.nonfinite_count;
    compare_bound bound;
    TRY_STATUS(compare_within_bound(test->data, baseline->data, (size_t)count, result.atol,
                                    result.rtol, &bound));
    out_result->bound_failures = bound.failures;
    out_result->worst_index = bound.worst_index;
    out_result->worst_test = count ? ((const float *)test->data)[bound.worst_index] : 0;
    out_result->worst_baseline = count ? ((const float *)baseline->data)[bound.worst_index] : 0;
    out_result->max_rel = bound.max_relative;
    if (test->rank == 2 && test->dims[1] > 1) {
        compare_topk k;
        TRY_STATUS(compare_classification(test->data, baseline->data, (size_t)test->dims[0],
                                       (size_t)test->dims[1], &k));
        out_result->rows = k.rows;
        out_result->top1_agree = k.top1_matches;
        out_result->top5_agree = k.top5_hits;
    }
    api_copy_out(out, &result, sizeof result);
    return TCI_OK;
}

tci_status tci_find_error_jump(const double *errors, size_t count, double threshold,
                               double factor, int *out_first_jump, int *out_first_over) {
    if (!out_first_jump || !out_first_over)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    compare_jump j;
    TRY_STATUS(compare_find_jump(errors, count, threshold, factor, &j));
    *out_first_jump = j.first_jump;
    *out_first_over = j.first_over_threshold;
    return TCI_OK;
}
