/* libtriton_tcinfer.so: a Triton Inference Server backend that runs tcinfer engines.
 *
 * One engine per model and device, shared by the model's instances on that device (CPU instances
 * share the reference-backend engine); one context per instance. A KIND_GPU instance's device
 * (instance_group gpus: [N]) is its engine's tci_engine_options.device, which every tcinfer call
 * on the engine and its contexts makes current; the backend sets it itself only for its own
 * copies to and from Triton's buffers. All requests of one execute call
 * whose non-batch dims agree run as one batch, padded with zero rows up to the instance's next
 * batch bucket (parameter batch_buckets: a GPU engine plans and captures each batch size it
 * meets). Inputs are gathered from Triton's buffers (CPU memory, or GPU memory copied over),
 * outputs written into the buffers Triton hands out. */
#define _POSIX_C_SOURCE 200809L
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#if TCI_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* Copy threads per instance beside its own for the batch gather (gather.h): one thread copies
 * about 10 GB/s, 2.9 ms for 45 rows of ResNet-50 on the H200; the gather is split four ways */
#define TCT_GATHER_WORKERS 3
/* Threads per instance beside its runner that answer a batch's requests: Triton takes 30-70 us
 * to make and send a response (on the H200, answered on the runner alone, a request of a batch
 * of 20-44 waited 0.7 ms on average for its answer: docs/serving.md), so batches of
 * TCT_ANSWER_PARALLEL_MIN requests or more are answered TCT_ANSWER_THREADS ways (backend.h) */
#define TCT_ANSWER_WORKERS (TCT_ANSWER_THREADS - 1)
#define TCT_ANSWER_PARALLEL_MIN 4
/* An answering thread makes this many responses, then waits once for their copies to Triton's
 * GPU buffers, then sends them */
#define TCT_ANSWER_CHUNK 16

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* Triton's steady clock */
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tct_log_message(TRITONSERVER_LogLevel level, const char *msg) {
    TRITONSERVER_Error *err = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, msg);
    if (err) TRITONSERVER_ErrorDelete(err);
}

void tct_engine_log(tci_log_level level, const char *message, void *user) {
    const char *model = user;
    char line[1024];
    snprintf(line, sizeof line, "tcinfer (%s): %s", model, message);
    tct_log_message(level == TCI_LOG_ERROR ? TRITONSERVER_LOG_ERROR
                : level == TCI_LOG_WARNING ? TRITONSERVER_LOG_WARN
                : level == TCI_LOG_INFO ? TRITONSERVER_LOG_INFO : TRITONSERVER_LOG_VERBOSE,
                line);
}

/* A failed tcinfer call as a Triton error carrying tcinfer's message. */
TRITONSERVER_Error *tct_tci_failure(tci_status status, const char *model) {
    TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
    switch (status) {
    case TCI_ERR_INVALID_ARGUMENT:
    case TCI_ERR_PARSE:
    case TCI_ERR_INVALID_MODEL: code = TRITONSERVER_ERROR_INVALID_ARG; break;
    case TCI_ERR_UNSUPPORTED:
    case TCI_ERR_NO_DEVICE: code = TRITONSERVER_ERROR_UNSUPPORTED; break;
    case TCI_ERR_IO: code = TRITONSERVER_ERROR_NOT_FOUND; break;
    default: break;
    }
    return tct_error(code, "model '%s': tcinfer: %s", model, tci_last_error());
}

char *tct_join_path(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

#if TCI_HAVE_CUDA
static TRITONSERVER_Error *set_device(int device) {
    cudaError_t e = cudaSetDevice(device);
    return e == cudaSuccess ? NULL
                            : tct_error(TRITONSERVER_ERROR_INTERNAL, "cudaSetDevice(%d): %s", device,
                                        cudaGetErrorString(e));
}
#endif

/* Copies n bytes between host and Triton buffers in any memory. */
static TRITONSERVER_Error *copy_bytes(void *dst, TRITONSERVER_MemoryType dst_type, const void *src,
                                      TRITONSERVER_MemoryType src_type, size_t n) {
    if (n == 0) return NULL;
    if (dst_type != TRITONSERVER_MEMORY_GPU && src_type != TRITONSERVER_MEMORY_GPU) {
        memcpy(dst, src, n);
        return NULL;
    }
#if TCI_HAVE_CUDA
    cudaError_t e = cudaMemcpy(dst, src, n, cudaMemcpyDefault);
    return e == cudaSuccess ? NULL
                            : tct_error(TRITONSERVER_ERROR_INTERNAL, "copying %zu bytes to or from "
                                        "GPU memory: %s", n, cudaGetErrorString(e));
#else
    return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "a tensor in GPU memory, but this tcinfer "
                     "backend is built without CUDA");
#endif
}

/* An error the backend cannot hand on: into the log. */
static void log_error(TRITONSERVER_Error *e) {
    if (!e) return;
    tct_log_message(TRITONSERVER_LOG_ERROR, TRITONSERVER_ErrorMessage(e));
    TRITONSERVER_ErrorDelete(e);
}

/* ---- backend ---- */

TRITONSERVER_Error *TRITONBACKEND_Initialize(TRITONBACKEND_Backend *backend) {
    uint32_t major = 0, minor = 0;
    RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
    if (major != TCI_TRITONBACKEND_API_MAJOR || minor < TCI_TRITONBACKEND_API_MINOR)
        return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "the tcinfer backend needs TRITONBACKEND "
                         "API %u.%u or a later %u.x; this server has %u.%u",
                         TCI_TRITONBACKEND_API_MAJOR, TCI_TRITONBACKEND_API_MINOR,
                         TCI_TRITONBACKEND_API_MAJOR, major, minor);
    char msg[128];
    snprintf(msg, sizeof msg, "tcinfer backend %s (TRITONBACKEND API %u.%u)", tci_version(), major,
             minor);
    tct_log_message(TRITONSERVER_LOG_INFO, msg);
    return NULL;
}

/* ---- models ---- */

static void model_free(tct_model *m) {
    if (!m) return;
    tci_engine_destroy(m->cpu_engine);
    for (int d = 0; d < TCT_MAX_DEVICES; d++)
        tci_engine_destroy(m->gpu_engines[d]); /* on its device, as every call on it */
    tct_config_free(&m->config);
    pthread_mutex_destroy(&m->lock);
    free(m->name);
    free(m->repo_dir);
    free(m->model_path);
    free(m);
}

static TRITONSERVER_Error *config_json(TRITONBACKEND_Model *model, TRITONSERVER_Message **msg,
                                       const char **json, size_t *size) {
    RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, msg));
    TRITONSERVER_Error *err = TRITONSERVER_MessageSerializeToJson(*msg, json, size);
    if (err) {
        TRITONSERVER_MessageDelete(*msg);
        *msg = NULL;
    }
    return err;
}

/* Auto-completion: fills inputs, outputs and max_batch_size from the model (built once on the CPU,
 * an engine kept for the CPU instances; an engine file is loaded on device 0). */
static TRITONSERVER_Error *autocomplete(tct_model *m, TRITONBACKEND_Model *model) {
    TRITONSERVER_Message *msg = NULL;
    const char *json;
    size_t size;
    RETURN_IF_ERROR(config_json(model, &msg, &json, &size));
    tct_model_config probe;
    TRITONSERVER_Error *err = tct_config_parse(json, size, &probe);
    int complete = !err && probe.num_inputs > 0 && probe.num_outputs > 0;
    if (!err) tct_config_free(&probe);
    tci_engine *engine = NULL;
    char *completed = NULL;
    if (!err && !complete) {
        tci_engine_options o;
        tct_engine_options(m, &o);
        o.cpu_threads = m->is_engine_file ? 0 : m->config.cpu_threads;
        tci_status st = m->is_engine_file ? tci_engine_load(m->model_path, &o, &engine)
                                          : tci_engine_create_from_file(m->model_path, &o, &engine);
        if (st != TCI_OK) err = tct_tci_failure(st, m->name);
        if (!err) err = tct_config_autocomplete(json, size, engine, &completed);
    }
    TRITONSERVER_MessageDelete(msg);
    msg = NULL;
    if (!err && completed) {
        err = TRITONSERVER_MessageNewFromSerializedJson(&msg, completed, strlen(completed));
        if (!err) err = TRITONBACKEND_ModelSetConfig(model, 1, msg);
        if (msg) TRITONSERVER_MessageDelete(msg);
    }
    free(completed);
    if (!err && engine && !m->is_engine_file) m->cpu_engine = engine; /* checked in model_init */
    else tci_engine_destroy(engine);
    return err;
}

static TRITONSERVER_Error *model_init(tct_model *m, TRITONBACKEND_Model *model) {
    const char *name, *location;
    uint64_t version;
    TRITONBACKEND_ArtifactType artifact;
    RETURN_IF_ERROR(TRITONBACKEND_ModelName(model, &name));
    RETURN_IF_ERROR(TRITONBACKEND_ModelVersion(model, &version));
    RETURN_IF_ERROR(TRITONBACKEND_ModelRepository(model, &artifact, &location));
    if (artifact != TRITONBACKEND_ARTIFACT_FILESYSTEM)
        return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': the tcinfer backend reads "
                         "models from a file system", name);
    char version_dir[32];
    snprintf(version_dir, sizeof version_dir, "%llu", (unsigned long long)version);
    m->name = malloc(strlen(name) + 1);
    m->repo_dir = malloc(strlen(location) + 1);
    char *dir = tct_join_path(location, version_dir);
    if (!m->name || !m->repo_dir || !dir) {
        free(dir);
        return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
    strcpy(m->name, name);
    strcpy(m->repo_dir, location);

    /* the model file: default_model_filename, else model.tci where there is one, else model.onnx */
    TRITONSERVER_Message *msg = NULL;
    const char *json;
    size_t size;
    TRITONSERVER_Error *err = config_json(model, &msg, &json, &size);
    if (!err) {
        err = tct_config_parse(json, size, &m->config);
        TRITONSERVER_MessageDelete(msg);
    }
    if (!err) {
        const char *file = m->config.model_filename;
        if (!file) {
            char *tci = tct_join_path(dir, "model.tci");
            file = tci && file_exists(tci) ? "model.tci" : "model.onnx";
            free(tci);
        }
        size_t n = strlen(file);
        m->is_engine_file = n > 4 && strcmp(file + n - 4, ".tci") == 0;
        if (!(m->model_path = tct_join_path(dir, file)))
            err = tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        else if (!file_exists(m->model_path))
            err = tct_error(TRITONSERVER_ERROR_NOT_FOUND, "model '%s': no model file %s (the "
                            "tcinfer backend runs model.onnx or an engine file model.tci)", name,
                            m->model_path);
    }
    free(dir);
    bool auto_complete = false;
    if (!err) err = TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete);
    if (!err && auto_complete) err = autocomplete(m, model);
    tct_config_free(&m->config);
    /* the configuration as Triton now holds it */
    if (!err) err = config_json(model, &msg, &json, &size);
    if (!err) {
        err = tct_config_parse(json, size, &m->config);
        TRITONSERVER_MessageDelete(msg);
    }
    if (!err && (m->config.num_inputs == 0 || m->config.num_outputs == 0))
        err = tct_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': config.pbtxt lists no "
                        "inputs or outputs and auto-completion is off (--disable-auto-complete-"
                        "config)", name);
    /* the engine auto-completion built: checked against the final configuration here, since
     * tct_model_engine checks only the engines it builds */
    if (!err && m->cpu_engine) err = tct_check_engine(m, m->cpu_engine, 0);
    return err;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model *model) {
    tct_model *m = calloc(1, sizeof *m);
    if (!m) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    pthread_mutex_init(&m->lock, NULL);
    TRITONSERVER_Error *err = model_init(m, model);
    if (!err) err = TRITONBACKEND_ModelSetState(model, m);
    if (err) model_free(m);
    return err;
}

TRITONSERVER_Error *TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model *model) {
    void *state = NULL;
    RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
    model_free(state);
    return NULL;
}

/* ---- instances ---- */

static void run_job(void *job, void *instance);
static void finish_job(void *job, void *instance);

/* Stops the pipeline once it has answered every submitted batch, then frees what the instance
 * owns. */
static void instance_free(tct_instance *in) {
    if (!in) return;
    tct_pipeline_free(in->pipeline);
    for (int k = 0; k < TCT_PIPELINE_MAX_SLOTS; k++)
        tci_context_destroy(in->ctxs[k]); /* on its engine's device */
#if TCI_HAVE_CUDA
    if (in->device >= 0) log_error(set_device(in->device)); /* the device buffers' */
    if (in->copy_stream) cudaStreamDestroy((cudaStream_t)in->copy_stream);
    for (int k = 0; k < TCT_ANSWER_THREADS; k++)
        if (in->answer_streams[k]) cudaStreamDestroy((cudaStream_t)in->answer_streams[k]);
#endif
    for (int s = 0; s < TCT_PIPELINE_MAX_SLOTS; s++) {
        tct_slot *slot = &in->slots[s];
        for (size_t i = 0; slot->scratch && i < in->num_inputs; i++) {
#if TCI_HAVE_CUDA
            if (slot->device_scratch) cudaFree(slot->device_scratch[i]);
            if (in->pinned_scratch) cudaFreeHost(slot->scratch[i]);
            else
#endif
                free(slot->scratch[i]);
        }
        free(slot->scratch);
        free(slot->scratch_bytes);
        free(slot->device_scratch);
        free(slot->device_scratch_bytes);
    }
    free(in->input_names);
    free(in->buckets);
    tct_workers_free(in->copier);
    tct_workers_free(in->answerers);
    free(in->copies);
    free(in);
}

static TRITONSERVER_Error *grow_scratch(tct_instance *in, tct_slot *slot, size_t i, size_t need,
                                        size_t row, int on_device);

/* The instance's batch buckets: parameter batch_buckets where given, else on a GPU instance of a
 * batching model tct_default_buckets. */
static TRITONSERVER_Error *choose_buckets(tct_instance *in) {
    const tct_model_config *c = &in->model->config;
    size_t n = 0;
    if (c->buckets_set) {
        if (c->num_batch_buckets && c->max_batch <= 0)
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': parameter batch_buckets "
                             "pads batches, but max_batch_size is 0 (no batch dim)",
                             in->model->name);
        for (size_t i = 0; i < c->num_batch_buckets; i++)
            if (c->batch_buckets[i] > c->max_batch)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': parameter "
                                 "batch_buckets has %lld, above max_batch_size %d",
                                 in->model->name, (long long)c->batch_buckets[i], c->max_batch);
        n = c->num_batch_buckets;
    } else if (in->device >= 0 && c->max_batch > 1) {
        n = tct_default_buckets(c->max_batch, NULL);
    }
    if (n == 0) return NULL;
    if (!(in->buckets = calloc(n, sizeof *in->buckets)))
        return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    if (c->buckets_set) memcpy(in->buckets, c->batch_buckets, n * sizeof *in->buckets);
    else tct_default_buckets(c->max_batch, in->buckets);
    in->num_buckets = n;
    return NULL;
}

/* Runs each bucket once on zero inputs, so that its shape variant is planned (and on a GPU
 * captured) while the model loads rather than on a request. Models with other variable dims
 * than the batch are left to warm up on their requests. */
static TRITONSERVER_Error *warm_up(tct_instance *in) {
    tci_tensor tensors[TCT_MAX_INPUTS];
    size_t rows[TCT_MAX_INPUTS];
    tct_slot *slot = &in->slots[0]; /* before the runner starts: the instance's thread alone */
    uint64_t start = now_ns();
    for (size_t i = 0; i < in->num_inputs; i++) { /* each input's dims, and its bytes a row */
        tci_tensor_info info;
        tci_tensor_info_init(&info);
        tci_status st = tci_engine_input_info(in->engine, i, &info);
        if (st != TCI_OK) return tct_tci_failure(st, in->model->name);
        rows[i] = tci_dtype_size(info.dtype);
        for (int d = 1; d < info.rank; d++) {
            if (info.dims[d] < 1) return NULL;
            rows[i] *= (size_t)info.dims[d];
        }
        tensors[i] = (tci_tensor){.name = info.name, .dtype = info.dtype, .rank = info.rank};
        memcpy(tensors[i].dims, info.dims, sizeof info.dims);
    }
    for (size_t b = 0; b < in->num_buckets; b++) {
        for (size_t i = 0; i < in->num_inputs; i++) {
            size_t need = rows[i] * (size_t)in->buckets[b];
            RETURN_IF_ERROR(grow_scratch(in, slot, i, need, rows[i], 0));
            memset(slot->scratch[i], 0, need);
            tensors[i].data = slot->scratch[i];
            tensors[i].dims[0] = in->buckets[b];
        }
        for (int k = 0; k < in->num_slots; k++) {
            tci_status st = tci_context_run(in->ctxs[k], tensors, in->num_inputs);
            if (st != TCI_OK) return tct_tci_failure(st, in->model->name);
        }
    }
    char msg[256];
    snprintf(msg, sizeof msg, "model '%s': %zu batch sizes (%lld to %lld) warmed up in %.0f ms",
             in->model->name, in->num_buckets, (long long)in->buckets[0],
             (long long)in->buckets[in->num_buckets - 1], (double)(now_ns() - start) / 1e6);
    tct_log_message(TRITONSERVER_LOG_INFO, msg);
    return NULL;
}

static TRITONSERVER_Error *instance_init(tct_instance *in, TRITONBACKEND_ModelInstance *instance) {
    TRITONBACKEND_Model *model;
    void *state;
    TRITONSERVER_InstanceGroupKind kind;
    int32_t device;
    RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
    RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
    RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceKind(instance, &kind));
    RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceDeviceId(instance, &device));
    in->model = state;
    in->triton = instance;
    if (kind == TRITONSERVER_INSTANCEGROUPKIND_CPU) in->device = -1;
    else if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU) in->device = device;
    else
        return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': the tcinfer backend runs "
                         "KIND_CPU and KIND_GPU instances", in->model->name);
    if (in->device < 0 && in->model->config.precision == TCI_PRECISION_AUTO)
        return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s': parameter precision 'auto' "
                         "builds and runs the fp16 and fp32 GPU engines to choose the fp32 layers; "
                         "KIND_CPU instances run the fp32 reference: use KIND_GPU instances, or "
                         "leave the parameter out", in->model->name);
    RETURN_IF_ERROR(tct_model_engine(in->model, in->device, &in->engine));
    in->num_inputs = tci_engine_input_count(in->engine);
    if (in->num_inputs > TCT_MAX_INPUTS)
        return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s' has %zu inputs; the tcinfer "
                         "backend serves models of at most %d", in->model->name, in->num_inputs,
                         TCT_MAX_INPUTS);
    const size_t slots = in->num_inputs ? in->num_inputs : 1;
    in->input_names = calloc(slots, sizeof *in->input_names);
    if (!in->input_names) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    /* the CPU engine's threads would share the cores with the next batch's gather: CPU instances
     * pipeline only when asked to */
    in->num_slots = in->model->config.pipeline_depth ? in->model->config.pipeline_depth
                    : in->device >= 0                ? 2
                                                     : 1;
    for (int s = 0; s < in->num_slots; s++) {
        tci_status st = tci_context_create(in->engine, &in->ctxs[s]); /* on the engine's device */
        if (st != TCI_OK) return tct_tci_failure(st, in->model->name);
        in->slots[s].scratch = calloc(slots, sizeof *in->slots[s].scratch);
        in->slots[s].scratch_bytes = calloc(slots, sizeof *in->slots[s].scratch_bytes);
        if (!in->slots[s].scratch || !in->slots[s].scratch_bytes)
            return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        if (in->device >= 0 &&
            (!(in->slots[s].device_scratch = calloc(slots, sizeof(void *))) ||
             !(in->slots[s].device_scratch_bytes = calloc(slots, sizeof(size_t)))))
            return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
    in->pinned_scratch = in->device >= 0;
    for (size_t i = 0; i < in->num_inputs; i++) {
        tci_tensor_info info;
        tci_tensor_info_init(&info);
        tci_status st = tci_engine_input_info(in->engine, i, &info);
        if (st != TCI_OK)
            return tct_tci_failure(st, in->model->name);
        in->input_names[i] = info.name;
    }
    int e = tct_workers_create(TCT_GATHER_WORKERS, &in->copier);
    if (e)
        return tct_error(TRITONSERVER_ERROR_INTERNAL, "model '%s': starting %d copy threads: %s",
                         in->model->name, TCT_GATHER_WORKERS, strerror(e));
    if ((e = tct_workers_create(TCT_ANSWER_WORKERS, &in->answerers)))
        return tct_error(TRITONSERVER_ERROR_INTERNAL, "model '%s': starting %d answer threads: "
                         "%s", in->model->name, TCT_ANSWER_WORKERS, strerror(e));
    RETURN_IF_ERROR(choose_buckets(in));
#if TCI_HAVE_CUDA
    if (in->device >= 0) RETURN_IF_ERROR(set_device(in->device)); /* the streams' device */
    for (int k = 0; in->device >= 0 && k < TCT_ANSWER_THREADS; k++) {
        cudaStream_t stream = NULL;
        cudaError_t ce = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        if (ce != cudaSuccess)
            return tct_error(TRITONSERVER_ERROR_INTERNAL, "model '%s': creating the answers' "
                             "streams: %s", in->model->name, cudaGetErrorString(ce));
        in->answer_streams[k] = stream;
    }
#endif
    if (in->device >= 0) RETURN_IF_ERROR(warm_up(in));
    if ((e = tct_pipeline_create(in->num_slots, run_job, finish_job, in, &in->pipeline)))
        return tct_error(TRITONSERVER_ERROR_INTERNAL, "model '%s': starting the instance's "
                         "runner thread: %s", in->model->name, strerror(e));
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance *instance) {
    tct_instance *in = calloc(1, sizeof *in);
    if (!in) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    TRITONSERVER_Error *err = instance_init(in, instance);
    if (!err) err = TRITONBACKEND_ModelInstanceSetState(instance, in);
    if (err) instance_free(in);
    return err;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance *instance) {
    void *state = NULL;
    RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
    instance_free(state);
    return NULL;
}

/* ---- execution ---- */

/* One request's inputs, in engine order, checked against the model. */
typedef struct tct_request {
    TRITONBACKEND_Request *request;
    TRITONSERVER_Error *error; /* set: answered with this error */
    TRITONBACKEND_Input **inputs;
    int64_t batch; /* rows of the leading dim (1 where the model takes no batch dim) */
    int taken;     /* in a group */
    int queued;    /* in a job: the runner answers it */
} tct_request;

static TRITONSERVER_Error *check_request(const tct_instance *in, tct_request *r) {
    const tct_model_config *c = &in->model->config;
    int batched = c->max_batch > 0;
    uint32_t count;
    RETURN_IF_ERROR(TRITONBACKEND_RequestInputCount(r->request, &count));
    if (count != in->num_inputs)
        return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "model '%s' takes %zu inputs; the request "
                         "has %u", in->model->name, in->num_inputs, count);
    r->batch = 1;
    for (size_t i = 0; i < in->num_inputs; i++) {
        const char *name = in->input_names[i];
        TRITONSERVER_Error *missing = TRITONBACKEND_RequestInput(r->request, name, &r->inputs[i]);
        if (missing || !r->inputs[i]) {
            if (missing) TRITONSERVER_ErrorDelete(missing);
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "the request lacks input '%s'", name);
        }
        TRITONSERVER_DataType dt;
        const int64_t *shape;
        uint32_t rank;
        uint64_t bytes;
        RETURN_IF_ERROR(TRITONBACKEND_InputProperties(r->inputs[i], NULL, &dt, &shape, &rank,
                                                      &bytes, NULL));
        tci_tensor_info info;
        tci_tensor_info_init(&info);
        tci_status st = tci_engine_input_info(in->engine, i, &info);
        if (st != TCI_OK) return tct_tci_failure(st, in->model->name);
        if (tct_tci_dtype(dt) != info.dtype)
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' must be %s, not Triton "
                             "datatype %d", name, tci_dtype_name(info.dtype), (int)dt);
        if (rank > TCI_MAX_RANK || (batched && rank == 0))
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' has rank %u", name, rank);
        int64_t n = 1;
        for (uint32_t d = 0; d < rank; d++) {
            if (shape[d] < 0 || (shape[d] > 0 && n > INT64_MAX / shape[d]))
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input '%s': bad dim %lld", name,
                                 (long long)shape[d]);
            n *= shape[d];
        }
        if ((uint64_t)n * tci_dtype_size(info.dtype) != bytes)
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' holds %llu bytes; its "
                             "shape and dtype need %llu", name, (unsigned long long)bytes,
                             (unsigned long long)((uint64_t)n * tci_dtype_size(info.dtype)));
        if (batched) {
            if (i > 0 && shape[0] != r->batch)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input '%s' has batch %lld; '%s' "
                                 "has %lld", name, (long long)shape[0], in->input_names[0],
                                 (long long)r->batch);
            r->batch = shape[0];
            if (r->batch < 1 || r->batch > c->max_batch)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input '%s': batch %lld is "
                                 "outside 1..max_batch_size %d", name, (long long)r->batch,
                                 c->max_batch);
        }
    }
    return NULL;
}

/* Whether two checked requests can run in one batch: the same dims besides the batch dim. */
static int same_item_shape(const tct_instance *in, const tct_request *a, const tct_request *b) {
    for (size_t i = 0; i < in->num_inputs; i++) {
        const int64_t *sa, *sb;
        uint32_t ra, rb;
        TRITONSERVER_Error *ea = TRITONBACKEND_InputProperties(a->inputs[i], NULL, NULL, &sa, &ra,
                                                               NULL, NULL);
        TRITONSERVER_Error *eb = TRITONBACKEND_InputProperties(b->inputs[i], NULL, NULL, &sb, &rb,
                                                               NULL, NULL);
        int failed = ea || eb;
        if (ea) TRITONSERVER_ErrorDelete(ea);
        if (eb) TRITONSERVER_ErrorDelete(eb);
        if (failed || ra != rb) return 0;
        for (uint32_t d = 1; d < ra; d++)
            if (sa[d] != sb[d]) return 0;
    }
    return 1;
}

/* Adds a host copy to the batch's list (run by the copy workers once every request is read). */
static TRITONSERVER_Error *add_copy(tct_instance *in, void *dst, const void *src, size_t bytes) {
    if (in->num_copies == in->copies_cap) {
        size_t cap = in->copies_cap ? 2 * in->copies_cap : 64;
        tct_copy *grown = realloc(in->copies, cap * sizeof *grown);
        if (!grown) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        in->copies = grown;
        in->copies_cap = cap;
    }
    in->copies[in->num_copies++] = (tct_copy){dst, src, bytes};
    return NULL;
}

#if TCI_HAVE_CUDA
/* A failed CUDA call of the device gather as a Triton error. */
static TRITONSERVER_Error *gather_cuda_error(const tct_instance *in, cudaError_t e,
                                             const char *what) {
    return e == cudaSuccess ? NULL
                            : tct_error(TRITONSERVER_ERROR_INTERNAL, "model '%s', GPU %d: %s: %s",
                                        in->model->name, in->device, what, cudaGetErrorString(e));
}

/* *out: whether every buffer of every input of group[0..n) lies in the memory of the GPU
 * instance's device (CUDA shared memory), so that the batch is gathered there. */
static TRITONSERVER_Error *all_on_device(const tct_instance *in, tct_request **group, size_t n,
                                         int *out) {
    *out = in->device >= 0;
    for (size_t g = 0; *out && g < n; g++)
        for (size_t i = 0; *out && i < in->num_inputs; i++) {
            uint32_t buffers;
            RETURN_IF_ERROR(TRITONBACKEND_InputProperties(group[g]->inputs[i], NULL, NULL, NULL,
                                                          NULL, NULL, &buffers));
            for (uint32_t k = 0; *out && k < buffers; k++) {
                const void *buf;
                uint64_t size;
                TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
                int64_t type_id = 0;
                RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(group[g]->inputs[i], k, &buf, &size,
                                                          &type, &type_id));
                *out = type == TRITONSERVER_MEMORY_GPU && type_id == in->device;
            }
        }
    return NULL;
}
#endif

/* n bytes from src (NULL: zeros) to dst, both in the GPU instance's memory, on its copy stream
 * (which the caller synchronizes). */
static TRITONSERVER_Error *device_fill(tct_instance *in, void *dst, const void *src, size_t n) {
    if (n == 0) return NULL;
#if TCI_HAVE_CUDA
    cudaStream_t stream = (cudaStream_t)in->copy_stream;
    return src ? gather_cuda_error(in,
                                   cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream),
                                   "gathering an input on the device")
               : gather_cuda_error(in, cudaMemsetAsync(dst, 0, n, stream),
                                   "zeroing the padding rows on the device");
#else
    (void)dst;
    (void)src;
    return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "model '%s': a device gather, but this "
                     "tcinfer backend is built without CUDA", in->model->name);
#endif
}

/* Gathers an input of a request to dst (bytes: its size, checked). On the host (on_device 0):
 * buffers in GPU memory are copied at once, those in host memory are added to the instance's
 * copy list. On the device (dst and every buffer in the GPU instance's memory): copied there on
 * the instance's copy stream, which the caller synchronizes. */
static TRITONSERVER_Error *gather_input(tct_instance *in, TRITONBACKEND_Input *input, char *dst,
                                        uint64_t bytes, int on_device) {
    uint32_t buffers;
    RETURN_IF_ERROR(TRITONBACKEND_InputProperties(input, NULL, NULL, NULL, NULL, NULL, &buffers));
    uint64_t at = 0;
    for (uint32_t k = 0; k < buffers; k++) {
        const void *buf;
        uint64_t size;
        TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
        int64_t type_id = 0;
        RETURN_IF_ERROR(TRITONBACKEND_InputBuffer(input, k, &buf, &size, &type, &type_id));
        if (size > bytes - at)
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input buffers exceed %llu bytes",
                             (unsigned long long)bytes);
        if (on_device)
            RETURN_IF_ERROR(device_fill(in, dst + at, buf, size));
        else if (type == TRITONSERVER_MEMORY_GPU)
            RETURN_IF_ERROR(copy_bytes(dst + at, TRITONSERVER_MEMORY_CPU, buf, type, size));
        else if (size)
            RETURN_IF_ERROR(add_copy(in, dst + at, buf, size));
        at += size;
    }
    if (at != bytes)
        return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "input buffers hold %llu bytes, not %llu",
                         (unsigned long long)at, (unsigned long long)bytes);
    return NULL;
}

/* Makes input i's buffer in slot hold need bytes (max_batch_size rows where row > 0): on the
 * host, pinned on a GPU instance; or (on_device) in the GPU instance's memory. */
static TRITONSERVER_Error *grow_scratch(tct_instance *in, tct_slot *slot, size_t i, size_t need,
                                        size_t row, int on_device) {
    void **buf = on_device ? &slot->device_scratch[i] : &slot->scratch[i];
    size_t *have = on_device ? &slot->device_scratch_bytes[i] : &slot->scratch_bytes[i];
    if (need <= *have) return NULL;
    int max_batch = in->model->config.max_batch;
    size_t largest = max_batch > 0 ? row * (size_t)max_batch : 0;
    size_t size = need <= largest ? largest : need;
    void *p = NULL;
#if TCI_HAVE_CUDA
    if (on_device || in->pinned_scratch) {
        cudaError_t e = on_device ? cudaMalloc(&p, size)
                                  : cudaHostAlloc(&p, size, cudaHostAllocPortable);
        if (e != cudaSuccess)
            return tct_error(TRITONSERVER_ERROR_INTERNAL, "model '%s': %s %zu bytes for input "
                             "'%s': %s", in->model->name,
                             on_device ? "allocating on the GPU" : "pinning host memory of", size,
                             in->input_names[i], cudaGetErrorString(e));
        if (on_device) cudaFree(*buf);
        else cudaFreeHost(*buf);
    }
#endif
    if (!on_device && !in->pinned_scratch && !(p = realloc(*buf, size)))
        return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    *buf = p;
    *have = size;
    return NULL;
}

/* Copies bytes of output index (offset bytes in) to buf, a Triton output buffer in memory
 * type: from the host copy t, or on a GPU instance into GPU memory from the run's output on the
 * device, on stream (NULL: copied before the call returns; else *queued is set and the caller
 * synchronizes stream before sending the response). */
static TRITONSERVER_Error *copy_output(tct_instance *in, tci_context *ctx, void *stream,
                                       size_t index,
                                       const tci_tensor *t, size_t offset, size_t bytes, void *buf,
                                       TRITONSERVER_MemoryType type, int *queued) {
#if TCI_HAVE_CUDA
    tci_tensor dt;
    if (bytes && stream && type == TRITONSERVER_MEMORY_GPU && in->device >= 0 &&
        tci_context_output_device(ctx, index, &dt) == TCI_OK) {
        cudaError_t e = cudaMemcpyAsync(buf, (const char *)dt.data + offset, bytes,
                                        cudaMemcpyDefault, (cudaStream_t)stream);
        if (e != cudaSuccess)
            return tct_error(TRITONSERVER_ERROR_INTERNAL, "copying %zu bytes of output '%s' "
                             "into GPU memory: %s", bytes, t->name, cudaGetErrorString(e));
        *queued = 1;
        return NULL;
    }
#else
    (void)in;
    (void)ctx;
    (void)stream;
    (void)index;
    (void)queued;
#endif
    return copy_bytes(buf, type, (const char *)t->data + offset, TRITONSERVER_MEMORY_CPU, bytes);
}

/* Writes the requested outputs of request, rows [row, row + batch) of the outputs of ctx's run
 * (copies into GPU memory queued on stream where one is given: copy_output). */
static TRITONSERVER_Error *respond(tct_instance *in, tci_context *ctx, void *stream,
                                   TRITONBACKEND_Request *request,
                                   int64_t batch, int64_t row, int64_t total,
                                   TRITONBACKEND_Response *response, int *queued) {
    int batched = in->model->config.max_batch > 0;
    uint32_t count;
    RETURN_IF_ERROR(TRITONBACKEND_RequestOutputCount(request, &count));
    for (uint32_t k = 0; k < count; k++) {
        const char *name;
        size_t index;
        tci_tensor t;
        RETURN_IF_ERROR(TRITONBACKEND_RequestOutputName(request, k, &name));
        tci_status st = tci_engine_output_index(in->engine, name, &index);
        if (st == TCI_OK) st = tci_context_output(ctx, index, &t);
        if (st != TCI_OK) return tct_tci_failure(st, in->model->name);
        int64_t n = tci_tensor_count(&t);
        if (n < 0) return tct_error(TRITONSERVER_ERROR_INTERNAL, "output '%s': bad dims", name);
        int64_t shape[TCI_MAX_RANK];
        memcpy(shape, t.dims, sizeof shape);
        size_t offset = 0, bytes = (size_t)n * tci_dtype_size(t.dtype);
        if (batched) {
            if (t.rank < 1 || t.dims[0] != total)
                return tct_error(TRITONSERVER_ERROR_INTERNAL, "output '%s' has leading dim %lld, "
                                 "not the batch %lld: it cannot be split per request", name,
                                 t.rank < 1 ? 0LL : (long long)t.dims[0], (long long)total);
            bytes = total ? bytes / (size_t)total : 0;
            offset = bytes * (size_t)row;
            bytes *= (size_t)batch;
            shape[0] = batch;
        }
        TRITONSERVER_DataType dt = tct_triton_dtype(t.dtype);
        if (dt == TRITONSERVER_TYPE_INVALID)
            return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "output '%s' is %s", name,
                             tci_dtype_name(t.dtype));
        TRITONBACKEND_Output *out;
        void *buf;
        TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
        int64_t type_id = 0;
        RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(response, &out, name, dt, shape,
                                                     (uint32_t)t.rank));
        RETURN_IF_ERROR(TRITONBACKEND_OutputBuffer(out, &buf, bytes, &type, &type_id));
        RETURN_IF_ERROR(copy_output(in, ctx, stream, index, &t, offset, bytes, buf, type,
                                    queued));
    }
    return NULL;
}

/* A response being made: its error (NULL: its outputs are written) */
typedef struct {
    TRITONBACKEND_Response *response; /* NULL: none could be made */
    TRITONSERVER_Error *error;
} tct_answer;

/* Makes request's response: with error where one is given (the caller keeps it), else with its
 * outputs, rows [row, row + batch) of the run of instance in on ctx (padded rows in all), copies
 * into GPU memory queued on stream where one is given (*queued set: see copy_output). */
static tct_answer answer_make(tct_instance *in, tci_context *ctx, void *stream,
                              TRITONBACKEND_Request *request, TRITONSERVER_Error *error,
                              int64_t batch, int64_t row, int64_t padded, int *queued) {
    tct_answer a = {NULL, NULL};
    TRITONSERVER_Error *rerr = TRITONBACKEND_ResponseNew(&a.response, request);
    if (rerr) {
        log_error(rerr); /* no response to send: Triton answers the released request */
        a.response = NULL;
        return a;
    }
    a.error = error ? TRITONSERVER_ErrorNew(TRITONSERVER_ErrorCode(error),
                                            TRITONSERVER_ErrorMessage(error))
                    : respond(in, ctx, stream, request, batch, row, padded, a.response, queued);
    return a;
}

/* Sends a made response (its copies done) and releases request, its statistics reported. */
static void answer_send(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request *request,
                        tct_answer a, const uint64_t times[3]) {
    if (a.response) {
        TRITONSERVER_Error *serr = TRITONBACKEND_ResponseSend(
            a.response, TCI_TRITONSERVER_RESPONSE_COMPLETE_FINAL, a.error);
        if (serr) { /* not sent: the response is still ours */
            log_error(serr);
            log_error(TRITONBACKEND_ResponseDelete(a.response));
        }
    }
    log_error(TRITONBACKEND_ModelInstanceReportStatistics(
        instance, request, a.response && !a.error, times[0], times[1], times[2], now_ns()));
    if (a.error) TRITONSERVER_ErrorDelete(a.error);
    log_error(TRITONBACKEND_RequestRelease(request, TCI_TRITONSERVER_REQUEST_RELEASE_ALL));
}

/* Answers request with error at once (the caller keeps error). */
static void answer_error(TRITONBACKEND_ModelInstance *instance, TRITONBACKEND_Request *request,
                         TRITONSERVER_Error *error, const uint64_t times[3]) {
    TRITONSERVER_Error *none = error ? NULL
                                     : tct_error(TRITONSERVER_ERROR_INTERNAL, "the request was "
                                                 "neither run nor refused");
    answer_send(instance, request,
                answer_make(NULL, NULL, NULL, request, error ? error : none, 0, 0, 0, NULL), times);
    if (none) TRITONSERVER_ErrorDelete(none);
}

static void job_free(tct_job *job) {
    if (!job) return;
    free(job->requests);
    free(job->batches);
    free(job);
}

/* A batch's answers shared by an instance's finisher and its answer workers. */
typedef struct {
    tct_instance *in;
    const tct_job *job;
} answer_job;

/* Answers slot's share of the job's requests (tct_workers_each). */
static void answer_slot(void *arg, int slot, int slots) {
    const answer_job *a = arg;
    const tct_job *job = a->job;
    size_t n = job->num_requests, lo = n * (size_t)slot / (size_t)slots,
           hi = n * (size_t)(slot + 1) / (size_t)slots;
    if (lo == hi) return;
    TRITONSERVER_Error *err = job->run_error, *device_err = NULL;
#if TCI_HAVE_CUDA
    /* the thread's copies to Triton's GPU buffers, on the instance's device */
    if (a->in->device >= 0 && !err) err = device_err = set_device(a->in->device);
#endif
    int64_t row = 0;
    for (size_t g = 0; g < lo; g++) row += job->batches[g];
    tci_context *ctx = a->in->ctxs[job->slot];
    void *stream = a->in->answer_streams[slot];
    /* in chunks: the responses made (copies to GPU buffers queued on the thread's stream), one
     * wait for the copies, the responses sent */
    for (size_t first = lo; first < hi; first += TCT_ANSWER_CHUNK) {
        size_t end = first + TCT_ANSWER_CHUNK < hi ? first + TCT_ANSWER_CHUNK : hi;
        tct_answer made[TCT_ANSWER_CHUNK];
        int queued = 0;
        for (size_t g = first; g < end; g++) {
            made[g - first] = answer_make(a->in, ctx, stream, job->requests[g], err,
                                          job->batches[g], row, job->padded, &queued);
            row += job->batches[g];
        }
#if TCI_HAVE_CUDA
        cudaError_t e = queued ? cudaStreamSynchronize((cudaStream_t)stream) : cudaSuccess;
        for (size_t g = first; e != cudaSuccess && g < end; g++)
            if (made[g - first].response && !made[g - first].error)
                made[g - first].error = tct_error(TRITONSERVER_ERROR_INTERNAL, "copying the "
                                                  "outputs into GPU memory: %s",
                                                  cudaGetErrorString(e));
#endif
        for (size_t g = first; g < end; g++)
            answer_send(a->in->triton, job->requests[g], made[g - first], job->times);
    }
    if (device_err) TRITONSERVER_ErrorDelete(device_err);
}

/* The pipeline's run: runs a job's batch on its slot's context. */
static void run_job(void *arg, void *instance) {
    tct_job *job = arg;
    tct_instance *in = instance;
    TRITONSERVER_Error *err = NULL;
#if TCI_HAVE_CUDA
    /* the instance's device current on the runner as on the backend's other threads (tcinfer
     * makes the engine's device current for its own calls) */
    if (in->device >= 0) err = set_device(in->device);
#endif
    tci_context *ctx = in->ctxs[job->slot];
    job->times[0] = job->exec_start;
    job->times[1] = now_ns();
    tci_status st = err                 ? TCI_OK
                    : job->device_inputs ? tci_context_run_device_inputs(ctx, job->tensors,
                                                                         in->num_inputs)
                                         : tci_context_run(ctx, job->tensors, in->num_inputs);
    if (st != TCI_OK) err = tct_tci_failure(st, in->model->name);
    job->times[2] = now_ns();
    job->run_error = err;
}

/* The pipeline's finish: answers a run job's requests (the finisher and the answer workers),
 * reports the batch and frees the job. */
static void finish_job(void *arg, void *instance) {
    tct_job *job = arg;
    tct_instance *in = instance;
    answer_job answers = {in, job};
    tct_workers_each(job->num_requests >= TCT_ANSWER_PARALLEL_MIN ? in->answerers : NULL,
                     answer_slot, &answers);
    int64_t row = 0;
    for (size_t g = 0; g < job->num_requests; g++) row += job->batches[g];
    if (!job->run_error)
        log_error(TRITONBACKEND_ModelInstanceReportBatchStatistics(
            in->triton, (uint64_t)row, job->times[0], job->times[1], job->times[2], now_ns()));
    if (job->run_error) TRITONSERVER_ErrorDelete(job->run_error);
    job_free(job);
}

/* Gathers requests group[0..n) into one batch in a free slot (waited for): *out, the job to
 * submit. On an error the slot is free again and the requests are the caller's to answer. */
static TRITONSERVER_Error *gather_group(tct_instance *in, tct_request **group, size_t n,
                                        uint64_t exec_start, tct_job **out) {
    int batched = in->model->config.max_batch > 0;
    int64_t total = 0;
    for (size_t g = 0; g < n; g++) total += group[g]->batch;
    tct_job *job = calloc(1, sizeof *job);
    if (!job || !(job->requests = calloc(n, sizeof *job->requests)) ||
        !(job->batches = calloc(n, sizeof *job->batches))) {
        job_free(job);
        return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
    job->num_requests = n;
    job->exec_start = exec_start;
    for (size_t g = 0; g < n; g++) {
        job->requests[g] = group[g]->request;
        job->batches[g] = group[g]->batch;
    }
    /* the run's batch: the smallest bucket that holds the rows, the rest zeros */
    job->padded = total;
    for (size_t b = 0; batched && b < in->num_buckets; b++)
        if (in->buckets[b] >= total) {
            job->padded = in->buckets[b];
            break;
        }
    job->slot = tct_pipeline_take(in->pipeline);
    tct_slot *slot = &in->slots[job->slot];
    TRITONSERVER_Error *err = NULL;
    in->num_copies = 0;
    /* inputs all in the GPU instance's memory: gathered there, the engine reading them device
     * to device (else through the slot's host buffers) */
    int on_device = 0;
#if TCI_HAVE_CUDA
    err = all_on_device(in, group, n, &on_device);
    if (!err && on_device && !in->copy_stream) {
        cudaStream_t stream = NULL;
        err = gather_cuda_error(in, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                "creating the gather's stream");
        in->copy_stream = stream;
    }
#endif
    job->device_inputs = on_device;
    for (size_t i = 0; !err && i < in->num_inputs; i++) {
        TRITONSERVER_DataType dt;
        const int64_t *shape;
        uint32_t rank, buffers;
        uint64_t bytes;
        err = TRITONBACKEND_InputProperties(group[0]->inputs[i], NULL, &dt, &shape, &rank, &bytes,
                                            &buffers);
        if (err) break;
        tci_tensor *t = &job->tensors[i];
        t->name = in->input_names[i];
        t->dtype = tct_tci_dtype(dt);
        t->rank = (int)rank;
        memcpy(t->dims, shape, rank * sizeof *shape);
        if (batched) t->dims[0] = job->padded;
        const void *direct = NULL;
        if (n == 1 && buffers == 1 && job->padded == total) {
            /* one request in CPU memory: read where it is (until the runner releases it) */
            uint64_t size;
            TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
            int64_t type_id = 0;
            err = TRITONBACKEND_InputBuffer(group[0]->inputs[i], 0, &direct, &size, &type,
                                            &type_id);
            if (type == TRITONSERVER_MEMORY_GPU && !on_device) direct = NULL;
        }
        if (err) break;
        if (direct) {
            t->data = (void *)direct; /* read only */
            continue;
        }
        size_t row = (size_t)bytes / (size_t)group[0]->batch, need = row * (size_t)job->padded;
        void **scratch = on_device ? slot->device_scratch : slot->scratch;
        if (need == 0) { /* an empty batch: no data to read */
            t->data = scratch[i];
            continue;
        }
        if ((err = grow_scratch(in, slot, i, need, batched ? row : 0, on_device))) break;
        size_t at = 0;
        for (size_t g = 0; !err && g < n; g++) {
            uint64_t b;
            err = TRITONBACKEND_InputProperties(group[g]->inputs[i], NULL, NULL, NULL, NULL, &b,
                                                NULL);
            if (!err)
                err = gather_input(in, group[g]->inputs[i], (char *)scratch[i] + at, b, on_device);
            at += (size_t)b;
        }
        /* the padding rows */
        if (!err && on_device) err = device_fill(in, (char *)scratch[i] + at, NULL, need - at);
        else if (!err) memset((char *)scratch[i] + at, 0, need - at);
        t->data = scratch[i];
    }
#if TCI_HAVE_CUDA
    /* the engine's stream does not wait for this one */
    if (!err && on_device)
        err = gather_cuda_error(in, cudaStreamSynchronize((cudaStream_t)in->copy_stream),
                                "gathering the inputs on the device");
#endif
    if (!err) tct_copy_run(in->copier, in->copies, in->num_copies);
    if (err) {
        tct_pipeline_give_back(in->pipeline, job->slot);
        job_free(job);
        return err;
    }
    *out = job;
    return NULL;
}

TRITONSERVER_Error *TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance *instance,
                                                       TRITONBACKEND_Request **requests,
                                                       const uint32_t request_count) {
    uint64_t exec_start = now_ns();
    void *state = NULL;
    TRITONSERVER_Error *err = TRITONBACKEND_ModelInstanceState(instance, &state);
    tct_instance *in = state;
    tct_request *reqs = calloc(request_count ? request_count : 1, sizeof *reqs);
    tct_request **group = calloc(request_count ? request_count : 1, sizeof *group);
    TRITONBACKEND_Input **inputs = NULL;
    if (!err && (!reqs || !group ||
                 !(inputs = calloc((size_t)request_count * (in->num_inputs ? in->num_inputs : 1),
                                   sizeof *inputs))))
        err = tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
#if TCI_HAVE_CUDA
    /* the backend's own copies from Triton's GPU buffers, on the instance's device (tcinfer's
     * calls make the engine's device current themselves) */
    if (!err && in->device >= 0) err = set_device(in->device);
#endif
    if (err) { /* every request gets the error */
        for (uint32_t k = 0; k < request_count; k++) {
            uint64_t t = now_ns(), times[3] = {exec_start, t, t};
            answer_error(instance, requests[k], err, times);
        }
        TRITONSERVER_ErrorDelete(err);
        free(reqs);
        free(group);
        free(inputs);
        return NULL;
    }
    for (uint32_t k = 0; k < request_count; k++) {
        reqs[k].request = requests[k];
        reqs[k].inputs = inputs + (size_t)k * in->num_inputs;
        reqs[k].error = check_request(in, &reqs[k]);
    }
    int batched = in->model->config.max_batch > 0;
    for (uint32_t k = 0; k < request_count; k++) {
        if (reqs[k].error || reqs[k].taken) continue;
        size_t n = 0;
        int64_t rows = 0;
        for (uint32_t j = k; j < request_count; j++) {
            tct_request *r = &reqs[j];
            if (r->error || r->taken || (n > 0 && !batched)) continue;
            if (n > 0 && (rows + r->batch > in->model->config.max_batch ||
                          !same_item_shape(in, group[0], r)))
                continue;
            group[n++] = r;
            rows += r->batch;
            r->taken = 1;
        }
        tct_job *job = NULL;
        TRITONSERVER_Error *gerr = gather_group(in, group, n, exec_start, &job);
        for (size_t g = 0; g < n; g++) {
            if (gerr)
                group[g]->error = TRITONSERVER_ErrorNew(TRITONSERVER_ErrorCode(gerr),
                                                        TRITONSERVER_ErrorMessage(gerr));
            else group[g]->queued = 1; /* the runner answers it */
        }
        if (gerr) TRITONSERVER_ErrorDelete(gerr);
        else tct_pipeline_submit(in->pipeline, job->slot, job);
    }
    for (uint32_t k = 0; k < request_count; k++) {
        if (reqs[k].queued) continue;
        uint64_t t = now_ns(), times[3] = {exec_start, t, t};
        answer_error(instance, reqs[k].request, reqs[k].error, times);
        TRITONSERVER_ErrorDelete(reqs[k].error);
    }
    free(reqs);
    free(group);
    free(inputs);
    /* ready for the next batch once a slot is free: with one slot, once this batch is answered */
    tct_pipeline_wait_free(in->pipeline);
    return NULL;
}
