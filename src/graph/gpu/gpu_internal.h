/* Internal to the GPU executor (src/graph/gpu/): the engine's and the context's state, and the
 * functions its files share (prefix gpu_). */
#ifndef TCI_GRAPH_GPU_INTERNAL_H
#define TCI_GRAPH_GPU_INTERNAL_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/gpu/exec_gpu.h"
#include "kernels/attention_cudnn.h"
#include "kernels/conv_cudnn.h"
#include "kernels/conv_transpose_cudnn.h"
#include "kernels/depthwise.h"
#include "kernels/eltwise.h"
#include "kernels/gemm_cublas.h"
#include "kernels/rnn_cudnn.h"
#include "kernels/rope.h"
#include "kernels/wmma_conv.h"
#include "kernels/wmma_gemm.h"

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
    kern_rnn_cudnn_plan *rnn;  /* a recurrence (RNN STEPS step) cuDNN runs, else NULL */
    int rnn_projection;        /* with rnn: the GEMM step whose projection cuDNN computes */
    kern_attention_cudnn_plan *sdpa; /* an attention step cuDNN runs, else NULL */
    bool skipped;              /* a GEMM step whose work a later step's cuDNN RNN does: not run */
    float library_ms, wmma_ms; /* timed at build (-1: not timed / none applies); an RNN's:
                                  cuDNN, and tcinfer's projection GEMM + recurrence; an
                                  attention's: cuDNN and tcinfer's */
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
    /* A shape variant (inputs smaller than the engine was built for: batch, sequence) is
     * planned anew by the base engine's replan function but borrows its parent's packed
     * weights, library plans and every constant whose bytes are the same; the step arrays
     * below are then the parent's. */
    const exec_gpu_engine *parent;
    exec_gpu_replan_fn replan; /* base engine: plans other shapes, or NULL (none runs) */
    void *replan_user;
    ir_graph *graph;           /* variant: the graph replan built its plan from (steps point
                                  into it) */
    plan_options options;      /* what the plan was built with (tf32, of the engine or of its
                                  kept layers, steers the kernel descriptors and the
                                  timing-cache keys; bf16 steps are told by their dtype) */
    tci_kernels kernels;       /* which kernel families may run convolutions */
    timing_cache *cache;       /* during creation only: the choices of the timing-cache file
                                  and of the engine file, and those timed so far */
    int layers_timed, layers_cached;
    bool *owns_constant;       /* by plan tensor: constants[t] is this engine's to free */
    void **constants;          /* by plan tensor: device copy of a constant, else NULL */
    step_impl *impl;           /* by step */
    size_t workspace_bytes;
};

/* One set of input shapes a context has run: the base engine's, or a variant planned on first
 * use. */
typedef struct shape_variant {
    int64_t *dims;             /* by engine input, TCI_MAX_RANK dims each (unused ones 0) */
    uint64_t last_used;        /* the context's run count when it last ran */
    exec_gpu_engine *engine;   /* owned; NULL for the base (the context's base engine) */
    cudaGraphExec_t graph;
    bool captured;
    void **captured_io;        /* the device I/O buffers the graph was captured with (NULLs:
                                  the staging buffers), inputs then outputs */
} shape_variant;

struct exec_gpu_context {
    const exec_gpu_engine *base;
    const exec_gpu_engine *engine; /* the current shapes': base or a variant */
    shape_variant *variants;   /* [0] is the base; at most 1 + EXEC_GPU_MAX_VARIANTS */
    int num_variants, current;
    uint64_t runs;             /* variant selections so far (shape_variant.last_used) */
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasLtHandle_t lt;
    void *arena;
    size_t arena_bytes;
    void *workspace;
    size_t workspace_bytes;    /* the largest of the variants' run so far */
    void **input_staging;      /* by engine input: the caller's data as given (fp32, int64...) */
    void **output_staging;     /* by engine output: fp32 / int64 / bool, dense NCHW */
    tci_tensor *outputs;       /* host copies */
    int *gather_error;         /* device flag: an index (gather, scatter, position id) out of
                                  range */
    unsigned int *nonfinite;   /* device: NaN/Inf values by output in the last run, then one
                                  counter for exec_gpu_locate_nonfinite */
    unsigned int *nonfinite_host; /* by output: the host copy (exec_gpu_run) */
    bool nonfinite_on_host;    /* nonfinite_host holds the last run's (not a device run's) */
    bool outputs_staged;       /* output_staging holds the last run's outputs (it was an
                                  exec_gpu_run that succeeded) */
    bool use_graph;
    cudaEvent_t *events;       /* 2 per step, for profiling */
    /* device I/O (exec_gpu_run_device): the caller's buffers, inputs then outputs, or NULLs */
    void **device_io;
    void **redirect;           /* by plan tensor of the current engine: the caller's buffer that
                                  replaces its arena storage, or NULL */
    int redirect_count;        /* entries of redirect */
    bool *copy_output;         /* by output: written to the caller's buffer by a copy */
    cudaEvent_t caller_ready, done;
    bool lost;                 /* a sticky CUDA error broke the CUDA context (exec_gpu_guard) */
    char lost_text[512];       /* what broke it, returned by every later call */
};

/* Room for one kernel choice as the timing cache stores it (gpu_choice_value). */
enum { CHOICE_BYTES = 2 * KERN_GEMM_ALGO_BYTES + 16 };

/* step_desc.c: plan step -> kernel descriptor */
/* fp32 steps may use TF32 tensor cores (TCI_PRECISION_TF32, or layers kept in tf32). */
bool gpu_allows_tf32(const exec_gpu_engine *e);
bool gpu_step_fp32(const plan *p, const plan_step *s);
act_params gpu_conv_activation(const plan_conv *c);
void gpu_depthwise_desc_of(const plan_conv *c, tci_dtype dtype, kern_depthwise_desc *d);
void gpu_wmma_desc_of(const plan_conv *c, tci_dtype dtype, kern_wmma_conv_desc *d);
void gpu_conv_desc_of(const exec_gpu_engine *e, const plan_conv *c, tci_dtype dtype,
                      kern_conv_desc *d);
void gpu_convt_desc_of(const exec_gpu_engine *e, const plan_conv *c, tci_dtype dtype,
                       kern_convt_desc *d);
void gpu_gemm_desc_of(const exec_gpu_engine *e, const plan_gemm *g, tci_dtype dtype,
                      kern_gemm_desc *d);
void gpu_wmma_gemm_desc_of(const plan_gemm *g, tci_dtype dtype, kern_wmma_gemm_desc *d);
/* The activation a cuBLASLt plan of the step leaves to a step of its own (ACT_NONE when its
 * epilogue computes the step's: the same function, and no residual, whose order against the
 * activation cuBLASLt does not document). tcinfer's kernels fuse every activation. */
act_params gpu_gemm_library_post_act(const plan_gemm *g);
void gpu_gemm_config_name(int cfg, char *buf, size_t size);
void gpu_attention_desc_of(const plan_attention *a, tci_dtype dtype, kern_attention_desc *d);

/* run_step.c: tensors' device storage, and one step launched */
const plan_tensor *gpu_tensor_of(const plan *p, int index);
void *gpu_device_ptr(const exec_gpu_engine *e, void *arena, int index);
int64_t gpu_count_of(const plan_tensor *t);
/* A GEMM step on one of tcinfer's configs (c: the residual when g->has_c, else NULL). */
tci_status gpu_run_wmma_gemm(const plan_gemm *g, int cfg, const step_impl *im, const void *a,
                             const void *b, const void *c, void *d, cudaStream_t stream);
/* A GEMM step on its cuBLASLt plan, at m rows and batch matrices (0: as planned), then the
 * activation its epilogue lacks (gpu_gemm_library_post_act) in place on y, d's tensor. */
tci_status gpu_run_library_gemm(const plan_gemm *g, const step_impl *im, cublasLtHandle_t lt,
                                cudaStream_t stream, int64_t m, int batch, const void *a,
                                const void *b, const void *c, void *d, const plan_tensor *y,
                                void *workspace, size_t workspace_bytes);
/* An in-place activation over a whole NHWC8 or dense tensor (what an epilogue cannot fuse). */
tci_status gpu_run_activation(const plan_tensor *t, void *data, act_params act,
                              cudaStream_t stream);
void *gpu_tensor_ptr(const exec_gpu_engine *e, const exec_gpu_context *c, void *arena,
                     int index);
tci_status gpu_run_step(const exec_gpu_engine *e, exec_gpu_context *c, void *arena, int index,
                        cudaStream_t stream);
/* An attention step's Q, K and V where the step reads them (NULL where absent). */
void gpu_attention_operands(const exec_gpu_engine *e, const exec_gpu_context *c, void *arena,
                            int index, const void **q, const void **k, const void **v);
tci_status gpu_step_error(const plan_step *s, tci_status st);
/* The rotary step's kernel description (s->u.rotary's geometry; position ids int32 or int64,
 * the storage dtype). */
void gpu_rope_desc(const plan_step *s, bool ids_int32, tci_dtype dtype, kern_rope_desc *d);

/* pack.c: constants packed and uploaded */
tci_status gpu_upload_bytes(const void *host, size_t bytes, void **out);
/* cudaMalloc of bytes (0 allocates 1) for `what`: the GPU running out is TCI_ERR_OUT_OF_MEMORY
 * with the bytes asked and available (the error is cleared, so the process goes on); *out is
 * NULL on failure. */
tci_status gpu_malloc(void **out, size_t bytes, const char *what);
/* Whether ptr is memory the GPU can address (device, managed or mapped host memory). */
bool gpu_device_accessible(const void *ptr);
/* The CUDA device whose memory ptr is (cudaMalloc'd memory), or -1 (managed or host memory, or
 * unknown to the driver). */
int gpu_device_of(const void *ptr);
/* Bytes of the device allocation holding ptr from ptr to its end; false where the driver
 * cannot tell (then nothing is known about the size). */
bool gpu_device_room(const void *ptr, size_t *out_bytes);
/* After a call that failed with TCI_ERR_CUDA: whether the CUDA context is broken for good (a
 * kernel fault or another sticky error, which every later CUDA call returns); text gets its
 * name. A non-sticky error is cleared. */
bool gpu_context_broken(char *text, size_t size);
tci_status gpu_pack_conv(exec_gpu_engine *e, int index);
tci_status gpu_pack_conv_transpose(exec_gpu_engine *e, int index);
tci_status gpu_pack_gemm_bias(exec_gpu_engine *e, int index);

/* timing_cache.c */
void gpu_cache_free(timing_cache *c);
cache_entry *gpu_cache_find(const timing_cache *c, const char *key);
tci_status gpu_cache_put(timing_cache *c, const char *key, const char *value, float library_ms,
                         float wmma_ms, const char *origin);
tci_status gpu_cache_load(const char *path, const char *choices, timing_cache **out);
tci_status gpu_cache_save(const timing_cache *c);
void gpu_problem_key(const exec_gpu_engine *e, const plan_step *s, char *buf, size_t size);

/* autotune.c: kernel choice of the conv, GEMM and RNN steps, and the library plans */
/* The time of one run of launch(user, stream) as the engine runs it: inside a CUDA graph, the
 * best of a few replays. */
typedef tci_status (*gpu_launch_fn)(const void *user, cudaStream_t stream);
tci_status gpu_time_graph(gpu_launch_fn launch, const void *user, cudaStream_t stream,
                          float *out_ms);
void gpu_choice_value(const exec_gpu_engine *e, int i, char *value, size_t size);
bool gpu_tuned_step(const plan_step *s);
/* The kernel text of a step timed between tcinfer's kernel and a library's: the kept one and
 * its time (kept_ms < 0: not timed), then the other's time, or why the library refused. */
void gpu_describe_choice(step_impl *im, const char *kept, float kept_ms, const char *other,
                         float other_ms, const char *why);
/* The same for a cached choice: kept (its name), where the choice came from, and the times the
 * cache holds (library_kept: library_ms is the kept one's; other names the other family). */
void gpu_describe_cached(step_impl *im, const char *kept, bool library_kept, const char *other,
                         const cache_entry *hit);
tci_status gpu_create_library_plans(exec_gpu_engine *e, tci_progress_fn progress,
                                    void *progress_user);

/* A library's plan for a step against tcinfer's kernel (cuDNN's RNN, cuDNN's fused attention):
 * what gpu_choose_library needs from the step's kind. */
typedef struct gpu_library_choice {
    const char *ours;    /* tcinfer's kernel as reports name it */
    const char *library; /* the library's candidate, named when tcinfer's is kept */
    const char *failed;  /* "cuDNN's RNN": "<failed> failed in a CUDA graph: <why>" */
    gpu_launch_fn launch; /* runs the step on whichever candidate select set last */
    void *trial;          /* launch's user */
    void (*select)(void *trial, void *lib); /* the trial runs lib (NULL: tcinfer's kernel) */
    void (*keep)(exec_gpu_engine *e, int i, void *lib); /* step i runs lib from now on */
    const char *(*name)(const void *lib);
    void (*destroy)(void *lib);
} gpu_library_choice;
/* Step i's choice between the library's plan lib (NULL where the library refused: why says
 * why, or the kernels are forced to tcinfer's) and tcinfer's kernel: both timed in CUDA graphs
 * and the faster kept (the library alone where it is forced, timed all the same); a library
 * failure inside the graph (a call that does not capture) leaves the step to tcinfer's kernel,
 * the reason in its kernel text. lib is kept (k->keep) or destroyed. */
tci_status gpu_choose_library(exec_gpu_engine *e, int i, void *lib, const char *why,
                              const gpu_library_choice *k, cudaStream_t stream);

/* rnn_choice.c: a recurrence (its RNN STEPS step, with the GEMM step projecting its input) on
 * tcinfer's kernels or cuDNN's RNN */
bool gpu_rnn_tuned_step(const plan_step *s);
/* Times both (TCI_KERNELS_AUTO) or takes the family the engine was told to (TCI_KERNELS_WMMA:
 * tcinfer's; TCI_KERNELS_LIBRARY: cuDNN where it computes the layer exactly); cuDNN's
 * refusals keep tcinfer's, with the reason in the step's kernel text. */
tci_status gpu_rnn_choose(exec_gpu_engine *e, int i, cudnnHandle_t cudnn, cublasLtHandle_t lt,
                          cudaStream_t stream, void *arena, void *workspace);
/* A cached choice ("rnn cudnn" or "rnn tcinfer") made real; TCI_ERR_UNSUPPORTED when cuDNN
 * refuses the layer now. */
tci_status gpu_rnn_apply_cached(exec_gpu_engine *e, int i, const cache_entry *hit,
                                cudnnHandle_t cudnn);
/* The step's cuDNN plan run on the context's buffers (c->cudnn, c->workspace). */
tci_status gpu_run_rnn_cudnn(const exec_gpu_engine *e, const exec_gpu_context *c, void *arena,
                             int i, const kern_rnn_cudnn_plan *rnn, cudaStream_t stream);
/* The workspace the step's cuDNN plan needs at its plan's (a variant's) sizes; 0 without one. */
tci_status gpu_rnn_workspace(const exec_gpu_engine *e, int i, cudnnHandle_t cudnn,
                             size_t *out_bytes);

/* attention_choice.c: a fused attention step on tcinfer's kernel or cuDNN's fused attention */
bool gpu_attention_tuned_step(const plan_step *s);
/* Times both (TCI_KERNELS_AUTO) or takes the family the engine was told to; cuDNN's refusals
 * keep tcinfer's, the reason in the step's kernel text. */
tci_status gpu_attention_choose(exec_gpu_engine *e, int i, cudnnHandle_t cudnn,
                                cublasLtHandle_t lt, cudaStream_t stream, void *arena,
                                void *workspace);
/* A cached choice ("attention cudnn" or "attention tcinfer") made real; TCI_ERR_UNSUPPORTED
 * when cuDNN refuses the step now. */
tci_status gpu_attention_apply_cached(exec_gpu_engine *e, int i, const cache_entry *hit,
                                      cudnnHandle_t cudnn);

/* engine.c: shape variants (dims as exec_gpu_replan_fn takes them). cudnn (the calling
 * context's handle) sizes the variant's workspace_bytes: cuDNN's algorithms may need more
 * workspace at a smaller batch. */
tci_status gpu_variant_create(const exec_gpu_engine *base, const int64_t *dims,
                              cudnnHandle_t cudnn, exec_gpu_engine **out);

#endif
