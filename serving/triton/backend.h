/* The Triton backend's shared parts (backend.c: the entry points, instances and execution;
 * engines.c: building and checking a model's engines). */
#ifndef TCI_SERVING_TRITON_BACKEND_H
#define TCI_SERVING_TRITON_BACKEND_H

#include <pthread.h>

#include "gather.h"
#include "model_config.h"
#include "pipeline.h"

#define TCT_MAX_DEVICES 64

typedef struct tct_model {
    char *name;
    char *repo_dir;   /* the model's folder: config.pbtxt, version folders */
    char *model_path; /* <repo_dir>/<version>/model.onnx (or model.tci, an engine file) */
    int is_engine_file;
    tct_model_config config;
    pthread_mutex_t lock; /* guards the engines below while instances are created */
    tci_engine *cpu_engine;
    tci_engine *gpu_engines[TCT_MAX_DEVICES];
} tct_model;

/* The threads answering a batch's requests: the runner and TCT_ANSWER_THREADS - 1 workers */
#define TCT_ANSWER_THREADS 4
/* The most inputs a model served by the backend may have */
#define TCT_MAX_INPUTS 64
/* Where a batch's inputs are gathered: per input a buffer of at most max_batch_size rows (on a
 * GPU instance pinned host memory: the engine's copy to the device is one DMA, not staged by the
 * driver through a second host copy) */
typedef struct tct_slot {
    void **scratch;
    size_t *scratch_bytes;
    /* a GPU instance's buffers on its device, for batches whose inputs all lie in its memory
     * (CUDA shared memory): gathered there and read by the engine device to device */
    void **device_scratch;
    size_t *device_scratch_bytes;
} tct_slot;

/* A gathered batch on its way to the engine: its inputs (a slot's buffers, or a lone request's
 * own buffer) and its requests, which the pipeline's runner answers and releases */
typedef struct tct_job {
    int slot;
    tci_tensor tensors[TCT_MAX_INPUTS];
    TRITONBACKEND_Request **requests;
    int64_t *batches; /* each request's rows */
    size_t num_requests;
    int64_t padded; /* the rows run, zero rows after the requests' */
    uint64_t exec_start;
    int device_inputs; /* the tensors' data lie in the GPU instance's memory */
    /* set by the run, for the answers */
    TRITONSERVER_Error *run_error; /* NULL: the run succeeded */
    uint64_t times[3];             /* execution start, compute start, compute end (ns) */
} tct_job;

typedef struct tct_instance {
    tct_model *model;
    TRITONBACKEND_ModelInstance *triton;
    int device; /* -1: a CPU instance */
    const tci_engine *engine;
    /* a context per slot (pipeline.h), run by the pipeline's runner alone once the instance is
     * up: a batch's outputs stay in its slot's context while the finisher answers them and the
     * runner runs the next batch in another */
    tci_context *ctxs[TCT_PIPELINE_MAX_SLOTS];
    size_t num_inputs;
    const char **input_names; /* engine order; the strings live as long as the engine */
    int pinned_scratch;       /* a GPU instance's slots are pinned host memory (cudaHostAlloc) */
    void *copy_stream;        /* a GPU instance's stream (cudaStream_t) for the device gather */
    /* a GPU instance's streams (cudaStream_t) for the answers' copies into Triton's GPU
     * buffers, one per answering thread (tct_workers_each's slots) */
    void *answer_streams[TCT_ANSWER_THREADS];
    /* the batch sizes a batch is padded up to (zero rows), increasing: each new batch size is
     * a new shape variant of the engine (planned and captured on first use, 16 kept), so a
     * GPU instance runs a few sizes only; NULL: every batch as it comes */
    int64_t *buckets;
    size_t num_buckets;
    /* the gather's copy workers (gather.h), and the host copies of the batch being gathered */
    tct_workers *copier;
    /* the threads that answer a batch's requests beside the runner (gather.h) */
    tct_workers *answerers;
    tct_copy *copies;
    size_t num_copies, copies_cap;
    /* the batches in flight (pipeline.h): the gather's buffers of each slot, and the pipeline
     * whose runner runs the engine and answers the requests */
    tct_slot slots[TCT_PIPELINE_MAX_SLOTS];
    int num_slots;
    tct_pipeline *pipeline;
} tct_instance;

#define RETURN_IF_ERROR(expr)                                                                     \
    do {                                                                                          \
        TRITONSERVER_Error *err_ = (expr);                                                        \
        if (err_) return err_;                                                                    \
    } while (0)

void tct_log_message(TRITONSERVER_LogLevel level, const char *msg);
/* tcinfer's log callback: the message into Triton's log, user the model's name */
void tct_engine_log(tci_log_level level, const char *message, void *user);
/* A failed tcinfer call as a Triton error carrying tcinfer's message. */
TRITONSERVER_Error *tct_tci_failure(tci_status status, const char *model);
/* a "/" b, malloc'ed (NULL when out of memory) */
char *tct_join_path(const char *a, const char *b);

/* m's engine options (precision, fp32 layers, timing cache from its config; the log) */
void tct_engine_options(const tct_model *m, tci_engine_options *o);
/* Whether engine e's inputs and outputs are what m's config says (gpu: a GPU engine). */
TRITONSERVER_Error *tct_check_engine(const tct_model *m, const tci_engine *e, int gpu);
/* m's engine for device (-1: the CPU reference), built or loaded once and shared. */
TRITONSERVER_Error *tct_model_engine(tct_model *m, int device, const tci_engine **out);

#endif
