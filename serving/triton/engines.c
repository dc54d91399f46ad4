/* The Triton backend's engines: one per model and device, built from the model's ONNX file or
 * loaded from its engine file, checked against the model's config, shared by its instances
 * (backend.h). */
#define _POSIX_C_SOURCE 200809L
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tct_engine_options(const tct_model *m, tci_engine_options *o) {
    tci_engine_options_init(o);
    o->log_fn = tct_engine_log;
    o->log_user = m->name;
    o->log_level = TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_VERBOSE) ? TCI_LOG_INFO
                                                                       : TCI_LOG_WARNING;
}

/* Every engine input is a config input of the same dtype and dims (the batch dim aside), every
 * config output an engine output; with max_batch_size, a fixed leading dim of an input must hold
 * the largest batch (GPU engines run any smaller one; CPU engines only the fixed one, so there
 * it must be 1 with max_batch_size 1). */
TRITONSERVER_Error *tct_check_engine(const tct_model *m, const tci_engine *e, int gpu) {
    const tct_model_config *c = &m->config;
    int batched = c->max_batch > 0;
    for (int o = 0; o < 2; o++) {
        size_t n = o ? c->num_outputs : c->num_inputs;
        const tct_tensor_config *tcs = o ? c->outputs : c->inputs;
        const char *kind = o ? "output" : "input";
        if (!o && n != tci_engine_input_count(e))
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "config.pbtxt declares %zu inputs; "
                             "the model has %zu", n, tci_engine_input_count(e));
        for (size_t i = 0; i < n; i++) {
            size_t index;
            tci_tensor_info info;
            tci_tensor_info_init(&info);
            if ((o ? tci_engine_output_index(e, tcs[i].name, &index)
                   : tci_engine_input_index(e, tcs[i].name, &index)) != TCI_OK ||
                (o ? tci_engine_output_info(e, index, &info)
                   : tci_engine_input_info(e, index, &info)) != TCI_OK)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "config.pbtxt %s '%s': %s", kind,
                                 tcs[i].name, tci_last_error());
            if (info.dtype != tcs[i].dtype)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "config.pbtxt %s '%s' is %s; the "
                                 "model's is %s", kind, tcs[i].name, tci_dtype_name(tcs[i].dtype),
                                 tci_dtype_name(info.dtype));
            if (info.rank < 0) continue;
            if (!o && batched && info.rank >= 1 && info.dims[0] >= 0 &&
                (gpu ? info.dims[0] < c->max_batch
                     : info.dims[0] != 1 || c->max_batch > 1))
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' has a fixed batch "
                                 "dim of %lld, which cannot run batches of 1..%d%s", tcs[i].name,
                                 (long long)info.dims[0], c->max_batch,
                                 gpu ? " (an engine file is built for one largest batch)"
                                     : ": set max_batch_size: 0 and give the full dims");
            if (info.rank != tcs[i].rank + batched)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "config.pbtxt %s '%s' has %d "
                                 "dims%s; the model's has rank %d", kind, tcs[i].name,
                                 tcs[i].rank, batched ? " besides the batch dim" : "", info.rank);
            for (int d = 0; d < tcs[i].rank; d++) {
                int64_t md = info.dims[d + batched], cd = tcs[i].dims[d];
                if (md >= 0 && cd >= 0 && md != cd)
                    return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "config.pbtxt %s '%s' dim %d "
                                     "is %lld; the model's is %lld", kind, tcs[i].name,
                                     d + batched, (long long)cd, (long long)md);
            }
        }
    }
    return NULL;
}

static TRITONSERVER_Error *build_cpu_engine(tct_model *m, tci_engine **out) {
    if (m->is_engine_file)
        return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "%s is a GPU engine file: CPU instances "
                         "(KIND_CPU) need model.onnx", m->model_path);
    const tct_model_config *c = &m->config;
    if (c->precision_set || c->fp32_layers || c->kept_set || c->timing_cache) {
        char msg[512];
        snprintf(msg, sizeof msg, "model '%s': the parameters precision, fp32_layers, "
                 "keep_precision and timing_cache apply to GPU instances; the CPU instances run "
                 "the fp32 reference",
                 m->name);
        tct_log_message(TRITONSERVER_LOG_WARN, msg);
    }
    tci_engine_options o;
    tct_engine_options(m, &o);
    o.backend = TCI_BACKEND_CPU;
    o.cpu_threads = m->config.cpu_threads;
    tci_status st = tci_engine_create_from_file(m->model_path, &o, out);
    return st == TCI_OK ? NULL : tct_tci_failure(st, m->name);
}

#if TCI_HAVE_CUDA
/* A file named in a parameter: absolute, or relative to the model's folder. */
static char *parameter_path(const tct_model *m, const char *path) {
    return path[0] == '/' ? tct_join_path("", path + 1) : tct_join_path(m->repo_dir, path);
}

/* Parameter calibration_inputs: the tensor files read (*out NULL, *count 0 without it: the
 * library's seeded random inputs). Released by release_tensors, also on failure. */
static TRITONSERVER_Error *read_calibration(const tct_model *m, tci_tensor **out, size_t *count) {
    char **files = m->config.calibration_inputs;
    *out = NULL;
    *count = 0;
    while (files && files[*count]) (*count)++;
    if (!*count) return NULL;
    if (!(*out = calloc(*count, sizeof **out)))
        return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    for (size_t i = 0; i < *count; i++) {
        char *path = parameter_path(m, files[i]);
        if (!path) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        tci_status st = tci_tensor_read_file(path, &(*out)[i]);
        free(path);
        if (st != TCI_OK)
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': parameter "
                             "calibration_inputs, entry %zu ('%s'): %s", m->name, i + 1, files[i],
                             tci_last_error());
        /* the engines the search measures layer by layer run their built batch only */
        const tci_tensor *t = &(*out)[i];
        int max_batch = m->config.max_batch;
        if (max_batch > 0 && (t->rank < 1 || t->dims[0] != max_batch))
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': parameter "
                             "calibration_inputs, entry %zu ('%s'): its leading (batch) dim is "
                             "%lld; the engines are built for max_batch_size %d", m->name, i + 1,
                             files[i], t->rank < 1 ? 0LL : (long long)t->dims[0], max_batch);
    }
    return NULL;
}

static void release_tensors(tci_tensor *t, size_t count) {
    for (size_t i = 0; t && i < count; i++) tci_tensor_release(&t[i]);
    free(t);
}

typedef struct auto_summary {
    char text[768];
    size_t pos, count;
} auto_summary;

static void add_auto_layer(const char *layer, int automatic, void *user) {
    auto_summary *a = user;
    if (!automatic) return;
    if (a->pos < sizeof a->text) {
        int w = snprintf(a->text + a->pos, sizeof a->text - a->pos, "%s'%s'", a->count ? ", " : "",
                         layer);
        a->pos = w < 0 ? sizeof a->text : a->pos + (size_t)w;
    }
    a->count++;
}

/* Precision auto's choice, in the server's log: the layers kept in fp32 and the error reached. */
static void log_auto_result(const tct_model *m, int device, const tci_engine *e) {
    auto_summary a;
    memset(&a, 0, sizeof a);
    double error = -1, goal = 0;
    if (tci_engine_auto_error(e, &error) != TCI_OK) return; /* not built by precision auto */
    tci_engine_auto_target(e, &goal);
    tci_engine_fp32_layers(e, add_auto_layer, &a);
    if (a.pos >= sizeof a.text) memcpy(a.text + sizeof a.text - 5, "...", 4);
    char msg[1024], target[64] = "";
    if (goal > 0) snprintf(target, sizeof target, " (accuracy_target %g)", goal);
    const char *inputs = m->is_engine_file              ? "engine file's calibration"
                         : m->config.calibration_inputs ? "given calibration"
                                                        : "seeded random";
    /* an engine file's kept precision is not reported by the API: named only when built here */
    const char *kept = m->is_engine_file                                   ? "out of fp16"
                       : m->config.kept_precision == TCI_PRECISION_BF16 ? "in bf16"
                       : m->config.kept_precision == TCI_PRECISION_TF32 ? "in tf32"
                                                                         : "in fp32";
    snprintf(msg, sizeof msg, "model '%s', GPU %d: precision auto kept %zu layer%s %s%s%s; "
             "the outputs' relative L2 error against the GPU fp32 engine on the %s inputs: %.3g%s",
             m->name, device, a.count, a.count == 1 ? "" : "s", kept, a.count ? ": " : "",
             a.text, inputs, error, target);
    tct_log_message(TRITONSERVER_LOG_INFO, msg);
}

/* GPU engines are built for fixed shapes: max_batch_size and the config's dims. */
static TRITONSERVER_Error *build_gpu_engine(tct_model *m, int device, tci_engine **out) {
    const tct_model_config *c = &m->config;
    tci_engine_options o;
    tct_engine_options(m, &o);
    o.device = device; /* built (or loaded) and run there */
    if (m->is_engine_file) {
        if (c->precision_set || c->fp32_layers || c->kept_set || c->timing_cache)
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "%s is an engine file, which holds "
                             "its precision and fp32 layers: leave out the parameters precision "
                             "(with accuracy_target and calibration_inputs), fp32_layers, "
                             "keep_precision and timing_cache", m->model_path);
        tci_status st = tci_engine_load(m->model_path, &o, out);
        if (st == TCI_OK) log_auto_result(m, device, *out); /* a file precision auto built */
        return st == TCI_OK ? NULL : tct_tci_failure(st, m->name);
    }
    tci_shape_override *shapes = calloc(c->num_inputs ? c->num_inputs : 1, sizeof *shapes);
    char *cache = c->timing_cache ? parameter_path(m, c->timing_cache) : NULL;
    tci_tensor *calibration = NULL;
    size_t num_calibration = 0;
    TRITONSERVER_Error *err = NULL;
    if (!shapes || (c->timing_cache && !cache))
        err = tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    if (!err && c->precision == TCI_PRECISION_AUTO)
        err = read_calibration(m, &calibration, &num_calibration);
    for (size_t i = 0; !err && i < c->num_inputs; i++) {
        const tct_tensor_config *t = &c->inputs[i];
        int b = c->max_batch > 0;
        shapes[i].name = t->name;
        shapes[i].rank = t->rank + b;
        if (b) shapes[i].dims[0] = c->max_batch;
        for (int d = 0; d < t->rank; d++) {
            if (t->dims[d] < 0)
                err = tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input '%s': GPU instances need "
                                "fixed dims in config.pbtxt (dim %d is -1)", t->name, d);
            shapes[i].dims[d + b] = t->dims[d];
        }
    }
    if (!err) {
        o.backend = TCI_BACKEND_GPU;
        o.shapes = shapes;
        o.num_shapes = c->num_inputs;
        o.precision = c->precision;
        o.fp32_layers = (const char *const *)c->fp32_layers;
        o.kept_precision = c->kept_precision;
        o.timing_cache = cache;
        o.calibration_inputs = calibration;
        o.num_calibration_inputs = num_calibration;
        o.accuracy_target = c->accuracy_target;
        tci_status st = tci_engine_create_from_file(m->model_path, &o, out);
        if (st != TCI_OK) err = tct_tci_failure(st, m->name);
        else log_auto_result(m, device, *out);
    }
    release_tensors(calibration, num_calibration);
    free(shapes);
    free(cache);
    return err;
}
#endif

/* The engine of device (-1: CPU), built on first use. */
TRITONSERVER_Error *tct_model_engine(tct_model *m, int device, const tci_engine **out) {
    if (device >= TCT_MAX_DEVICES)
        return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "GPU %d: the tcinfer backend serves "
                         "GPUs 0..%d", device, TCT_MAX_DEVICES - 1);
#if !TCI_HAVE_CUDA
    if (device >= 0)
        return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "this tcinfer backend is built without "
                         "CUDA: use KIND_CPU instances");
#endif
    pthread_mutex_lock(&m->lock);
    tci_engine **slot = device < 0 ? &m->cpu_engine : &m->gpu_engines[device];
    TRITONSERVER_Error *err = NULL;
    if (!*slot) {
        tci_engine *e = NULL;
#if TCI_HAVE_CUDA
        err = device < 0 ? build_cpu_engine(m, &e) : build_gpu_engine(m, device, &e);
#else
        err = build_cpu_engine(m, &e);
#endif
        if (!err) err = tct_check_engine(m, e, device >= 0);
        if (err) tci_engine_destroy(e);
        else *slot = e;
    }
    *out = *slot;
    pthread_mutex_unlock(&m->lock);
    return err;
}
