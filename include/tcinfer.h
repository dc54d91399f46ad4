/* tcinfer: run ONNX networks; the whole public C API.
 *
 * Usage in brief:
 *   tci_engine_options opts;
 *   tci_engine_options_init(&opts);      // sets struct_size and the defaults
 *   tci_engine *engine = NULL;
 *   if (tci_engine_create_from_file("model.onnx", &opts, &engine) != TCI_OK)
 *       fprintf(stderr, "%s\n", tci_last_error());
 *   tci_context *ctx = NULL;
 *   tci_context_create(engine, &ctx);
 *   const char *names[] = {"images"};
 *   tci_tensor in = {...};
 *   tci_context_run_named(ctx, names, &in, 1);  // or tci_context_run: in engine order
 *   float probs[1000];
 *   tci_context_output_into(ctx, 0, probs, sizeof probs);  // or tci_context_output: a view
 *   tci_context_destroy(ctx);
 *   tci_engine_destroy(engine);
 *
 * Ownership: whoever creates an object destroys it; every *_destroy(NULL) is a no-op.
 * Thread safety: an engine is immutable after creation and may be shared by threads; each thread
 * runs through its own context. Error text is per thread (tci_last_error).
 * Versioned structs: every options, info and report struct starts with `size_t struct_size`,
 * which its *_init function sets to the size the caller was compiled with. The library reads
 * and writes no byte past it, so fields added at the end later keep old callers working; a
 * struct_size smaller than the first versioned struct is TCI_ERR_INVALID_ARGUMENT naming the
 * struct. Output structs are initialised too before they are passed (tci_tensor_info_init...).
 * Output: the library prints nothing; its messages go to the log callback of the engine options
 * (tci_engine_options.log_fn), and the detail of a failure to tci_last_error().
 */
#ifndef TCINFER_H
#define TCINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TCI_VERSION_MAJOR 0
#define TCI_VERSION_MINOR 2
#define TCI_VERSION_PATCH 0

/* Library version as "major.minor.patch". */
const char *tci_version(void);

/* Every function that can fail returns one of these; the detail is in tci_last_error(). */
#define TCI_STATUS_LIST(X)                                                                        \
    X(TCI_OK, "ok")                                                                               \
    X(TCI_ERR_INVALID_ARGUMENT, "invalid argument")                                               \
    X(TCI_ERR_IO, "input/output error")                                                           \
    X(TCI_ERR_PARSE, "malformed model file")                                                      \
    X(TCI_ERR_INVALID_MODEL, "invalid model")                                                     \
    X(TCI_ERR_UNSUPPORTED, "unsupported")                                                         \
    X(TCI_ERR_OUT_OF_MEMORY, "out of memory")                                                     \
    X(TCI_ERR_NO_DEVICE, "no GPU device")                                                         \
    X(TCI_ERR_CUDA, "CUDA error")                                                                 \
    X(TCI_ERR_INTERNAL, "internal error")                                                         \
    X(TCI_ERR_DEVICE_LOST, "GPU context lost") /* since 0.2: a kernel failed or the CUDA context \
        holds a sticky error; every later call on the context returns it: restart the process */

typedef enum tci_status {
#define TCI_STATUS_ENUM(name, text) name,
    TCI_STATUS_LIST(TCI_STATUS_ENUM)
#undef TCI_STATUS_ENUM
} tci_status;

/* Short fixed text of a status ("invalid model"). */
const char *tci_status_string(tci_status status);

/* Detailed message of the last failure on the calling thread ("" if none). The pointer stays
 * valid until the next failing call on the same thread. */
const char *tci_last_error(void);

/* Element types; the values are ONNX's TensorProto.DataType numbers. */
typedef enum tci_dtype {
    TCI_DTYPE_UNDEFINED = 0,
    TCI_DTYPE_FLOAT = 1,
    TCI_DTYPE_UINT8 = 2,
    TCI_DTYPE_INT8 = 3,
    TCI_DTYPE_INT32 = 6,
    TCI_DTYPE_INT64 = 7,
    TCI_DTYPE_BOOL = 9,
    TCI_DTYPE_FLOAT16 = 10,
    TCI_DTYPE_DOUBLE = 11,
    TCI_DTYPE_BFLOAT16 = 16,
} tci_dtype;

/* Name of a dtype ("float", "int64", ...); "undefined" for anything else. */
const char *tci_dtype_name(tci_dtype dtype);
/* Bytes per element; 0 for an unknown dtype. */
size_t tci_dtype_size(tci_dtype dtype);

#define TCI_MAX_RANK 8

/* A dense row-major (C order) tensor in host memory, not owned by the struct. */
typedef struct tci_tensor {
    const char *name;             /* informational; may be NULL for inputs */
    tci_dtype dtype;
    int rank;
    int64_t dims[TCI_MAX_RANK];
    void *data;
} tci_tensor;

/* Element count of a tensor's dims; 0 when any dim is 0; -1 when tensor is NULL, its rank is
 * outside 0..TCI_MAX_RANK, a dim is negative or the count overflows int64. */
int64_t tci_tensor_count(const tci_tensor *tensor);

/* Description of an engine input or output. A dim of -1 is symbolic (its name in dim_names). */
typedef struct tci_tensor_info {
    size_t struct_size; /* tci_tensor_info_init */
    const char *name;
    tci_dtype dtype;
    int rank;                      /* -1 when the model does not say */
    int64_t dims[TCI_MAX_RANK];
    const char *dim_names[TCI_MAX_RANK]; /* NULL where the dim is fixed */
} tci_tensor_info;
void tci_tensor_info_init(tci_tensor_info *info);

typedef enum tci_backend {
    TCI_BACKEND_CPU = 0, /* fp32 reference executor */
    TCI_BACKEND_GPU = 1, /* fp16 tensor-core executor (needs a CUDA GPU) */
} tci_backend;

/* Fixes the shape of one input, overriding the model's (symbolic) dims. A GPU engine runs it
 * and every smaller size of the dims the model left symbolic, and of the leading dim (see
 * tci_context_run): give the largest batch and sequence length to run. */
typedef struct tci_shape_override {
    const char *name;
    int rank;
    int64_t dims[TCI_MAX_RANK];
} tci_shape_override;

/* Precision of float tensors on the GPU. */
typedef enum tci_precision {
    TCI_PRECISION_FP16 = 0, /* fp16 storage, fp32 accumulation, tensor cores */
    TCI_PRECISION_FP32 = 1, /* fp32 storage and math, tensor-op math off: the GPU fp32 baseline */
    TCI_PRECISION_TF32 = 2, /* fp32 storage, TF32 tensor cores in cuDNN / cuBLASLt (inputs of
                               each product rounded to a 10-bit mantissa, fp32 accumulation):
                               fp32 models without converting them to fp16 */
    TCI_PRECISION_BF16 = 3, /* bfloat16 storage (fp32's 8-bit exponent, 8-bit mantissa), fp32
                               accumulation, tensor cores: fp32's range, less precision than fp16 */
    TCI_PRECISION_AUTO = 4, /* since 0.2: fp16 with the layers that overflow it kept in fp32,
                               found at build: the fp16 engine runs on calibration inputs
                               (tci_engine_options.calibration_inputs) against the GPU fp32
                               engine; while its outputs hold NaN or Inf where the fp32 ones are
                               finite, the first layer producing them (as tci_context_nonfinite
                               names it) joins fp32_layers, with every layer that produces them
                               from finite inputs in a run with every layer marked (parallel
                               branches), and the engine is rebuilt, at most
                               TCI_PRECISION_AUTO_MAX_ROUNDS times; where that layer is kept
                               already, it reads values fp16 lost (an underflow) and the layers
                               producing its inputs join it. A layer that does not come right
                               with those, or NaN/Inf that no layer explains, is an error naming
                               it. The engine built is an fp16 engine with those layers kept in
                               tci_engine_options.kept_precision (tci_engine_fp32_layers lists
                               them; engine files keep them, with the error reached and the
                               target) */
} tci_precision;

#define TCI_PRECISION_AUTO_MAX_ROUNDS 16

/* Kernel families for convolutions on the GPU (fp16). */
typedef enum tci_kernels {
    TCI_KERNELS_AUTO = 0,    /* per layer, whichever is faster: tcinfer's WMMA kernels or cuDNN */
    TCI_KERNELS_WMMA = 1,    /* tcinfer's own kernels wherever one applies (WMMA; for fp16
                                GEMMs on Hopper also the wgmma kernel, whichever is faster) */
    TCI_KERNELS_LIBRARY = 2, /* cuDNN (and cuBLASLt for GEMMs) only */
} tci_kernels;

/* Since 0.2, the values of tci_engine_options.mark_all_outputs: which tensors an engine built for
 * per-layer comparisons also makes outputs (after the model's own, in execution order, under
 * their ONNX tensor names, so that they match the CPU reference's by name). */
typedef enum tci_mark_outputs {
    TCI_MARK_OUTPUTS_NONE = 0,    /* the model's outputs only (the default) */
    TCI_MARK_OUTPUTS_UNFUSED = 1, /* the first output of every node, marked before the GPU
                                     fusion passes, as Polygraphy's "mark all" does: fusion does
                                     not cross a marked tensor, so a GPU engine runs unfused */
    /* GPU: the engine as it ships: the tensor every step of the normal build writes, marked
     * after fusion and layout assignment (a fused step, "Conv+BatchNormalization+Add+Relu", at
     * its output, the tensor of its last node; tci_engine_output_nodes names the nodes it
     * covers). The steps (ops, fused chains, kernels, precision, layouts) are the normal
     * build's; only the outputs' copies are added. Skipped: steps the normal build drops as
     * unread, and tensors a GPU pass gave other values than the model's (a layer scale folded
     * into its GEMM). On the CPU backend, which does not fuse, as TCI_MARK_OUTPUTS_UNFUSED. */
    TCI_MARK_OUTPUTS_AS_SHIPPED = 2,
} tci_mark_outputs;

/* Log levels, most severe first: a callback gets messages at or above its engine's log_level. */
typedef enum tci_log_level {
    TCI_LOG_ERROR = 0,   /* a call failed: the text of tci_last_error() */
    TCI_LOG_WARNING = 1, /* a result needs attention (NaN/Inf in the outputs, ...) */
    TCI_LOG_INFO = 2,    /* what the engine build did: graph sizes, the GPU plan, kernel timing */
    TCI_LOG_DEBUG = 3,   /* per layer: the kernel kept for every GPU step */
} tci_log_level;

/* Receives one message (no trailing newline; valid during the call only). Called on the thread
 * that made the API call; engines shared by threads get calls from several threads at once. */
typedef void (*tci_log_fn)(tci_log_level level, const char *message, void *user);

/* Since 0.2: progress of long work, for a progress line. stage names the work ("optimizing
 * graph"; GPU builds: "choosing kernels", one step per convolution or GEMM layer timed or taken
 * from a timing cache or engine file); done counts its finished steps out of total. Each stage
 * is reported with done 0 first, then with done growing to total (done <= total always);
 * stages come one after the other. Called on the thread that made the API call. */
typedef void (*tci_progress_fn)(const char *stage, size_t done, size_t total, void *user);

typedef struct tci_engine_options {
    size_t struct_size; /* set by tci_engine_options_init */
    tci_backend backend;
    const tci_shape_override *shapes; /* not copied beyond tci_engine_create_* */
    size_t num_shapes;
    /* GPU: run without capturing the plan in a CUDA graph (for comparison and debugging). */
    int no_cuda_graph;
    /* GPU: only build the plan (steps, fusion, layouts, memory) for tci_engine_gpu_report and
     * tci_engine_layers; needs no GPU, and no context can run the engine. */
    int plan_only;
    /* Per-layer comparisons: a tci_mark_outputs value. TCI_MARK_OUTPUTS_UNFUSED (1) makes the
     * first output of every node an engine output too (after the model's own), as Polygraphy's
     * "mark all" does; fusion does not cross a marked tensor, so the engine runs unfused.
     * Since 0.2, TCI_MARK_OUTPUTS_AS_SHIPPED (2): on the GPU, the output of every step of the
     * engine as it ships (fused). Another value: TCI_ERR_INVALID_ARGUMENT. An engine built
     * with either runs at its built shapes only. */
    int mark_all_outputs;
    /* GPU: precision of the whole engine (TCI_PRECISION_FP16 by default). */
    tci_precision precision;
    /* GPU, fp16: nodes kept in fp32 (computed and stored), each a node name, an op type or a
     * shell pattern over node names (fnmatch: '*' also matches '/'); NULL-terminated, copied
     * at creation. Against fp16 overflow and for accuracy-critical layers: casts are inserted
     * at the boundaries. An entry that matches no node name and is no op type is an error. */
    const char *const *fp32_layers;
    /* GPU: kernel families for convolutions and GEMMs (TCI_KERNELS_AUTO by default). */
    tci_kernels kernels;
    /* GPU: a timing-cache file (NULL: none). Layers whose problem it holds for this GPU model
     * and these CUDA / cuDNN / cuBLASLt versions take the recorded kernel without timing; the
     * others are timed and the file is rewritten with them. A file from another GPU or other
     * versions is not used, and is replaced. */
    const char *timing_cache;
    /* CPU: threads of the reference backend's matrix products (OpenBLAS); 0: OpenBLAS's default
     * (OPENBLAS_NUM_THREADS or the core count). OpenBLAS keeps one count per process: each CPU
     * run sets it when it differs from its engine's, so engines with different counts are best
     * run one after the other. A count gives the same bits run after run; another count may
     * differ in the last bits (OpenBLAS splits the products differently). */
    int cpu_threads;
    /* Messages of this engine (its build, its contexts' runs) at or above log_level (default
     * TCI_LOG_WARNING) go to log_fn with log_user; NULL (default): nothing is logged. */
    tci_log_fn log_fn;
    void *log_user;
    tci_log_level log_level;
    /* Since 0.2: limits against hostile models (docs/robustness.md). 0 selects the default
     * given after each; a model over a limit is refused with TCI_ERR_UNSUPPORTED naming it. */
    uint64_t max_model_bytes;    /* the serialized model: 2 GiB */
    int64_t max_tensor_elements; /* any one tensor, constant or inferred: 2^31 - 1 */
    uint64_t max_constant_bytes; /* initializers, tensor attributes and folded constants: 4 GiB */
    uint64_t max_nodes;          /* NodeProtos in the file, subgraphs included: 2^20 */
    int max_nesting_depth;       /* protobuf message nesting (subgraphs, nested types): 64; at
                                    most 1000 */
    uint64_t max_parse_bytes;    /* memory protobuf-c may take to unpack the file: 4 GiB */
    /* Since 0.2: the builds of tci_engine_create_* and tci_engine_load report their progress
     * to progress_fn with progress_user (NULL, the default: not reported). */
    tci_progress_fn progress_fn;
    void *progress_user;
    /* Since 0.2, TCI_PRECISION_AUTO: the inputs its search runs, engine input i at position i
     * (as tci_context_run; read during the build only), num_calibration_inputs of them, one per
     * engine input. NULL (and 0): seeded random inputs (floats uniform in [-1, 1), integers
     * 0..9, booleans half true), the same for every build. Given with another precision:
     * TCI_ERR_INVALID_ARGUMENT. */
    const tci_tensor *calibration_inputs;
    size_t num_calibration_inputs;
    /* Since 0.2, TCI_PRECISION_AUTO: > 0 also holds the outputs' relative L2 error against the
     * GPU fp32 engine, on the calibration inputs, to at most this. Where it is over, every layer
     * is measured (the engines built with TCI_MARK_OUTPUTS_UNFUSED, each layer's output
     * against the fp32 engine's), the layers are ranked by the error each adds to what it
     * reads, and the fewest from the top of that ranking that bring the error to the target
     * join the fp32 layers, found by bisection on the engine as it ships (fused). 0 (the
     * default): overflow only.
     * Negative, not finite, or given with another precision: TCI_ERR_INVALID_ARGUMENT. */
    double accuracy_target;
    /* Since 0.2, GPU: the CUDA device (index as cudaSetDevice counts them, 0 by default) the
     * engine is built, loaded and run on; its weights, its contexts' buffers and streams live
     * there. Calls on the engine and its contexts make it the calling thread's current device for
     * their duration and give the caller's back before returning. Out of range:
     * TCI_ERR_NO_DEVICE naming the devices there are (plan_only uses no device: not checked);
     * negative, or other than 0 with TCI_BACKEND_CPU (which runs on no GPU):
     * TCI_ERR_INVALID_ARGUMENT. An engine file or timing cache written on one device runs on
     * another of the same GPU model. */
    int device;
    /* Since 0.2, GPU, fp16 and TCI_PRECISION_AUTO engines: the precision of the layers kept out
     * of fp16 (fp32_layers and those the precision search keeps). TCI_PRECISION_FP32 (the
     * default): fp32 storage and math, tensor-op math off. TCI_PRECISION_TF32: fp32 storage,
     * TF32 tensor cores (fp16's mantissa on the products' inputs, fp32's range and
     * accumulation). TCI_PRECISION_BF16: bf16 storage, tensor cores (fp32's range, less
     * precision than fp16: against overflow, not for accuracy). Any other value, or given with
     * an engine of another precision: TCI_ERR_INVALID_ARGUMENT. */
    tci_precision kept_precision;
    /* Since 0.2, a limit against hostile models as those above (0: the default, 2^20): the
     * iterations one run of a Loop node may make (the CPU reference, and constant folding at
     * build, which runs a Loop of constants); a Loop that reaches it without its trip count or
     * condition ending it is refused with TCI_ERR_UNSUPPORTED naming it, never left running. */
    uint64_t max_loop_iterations;
} tci_engine_options;

/* Sets struct_size and the defaults: CPU backend, no shape overrides, CUDA graphs on, no log. */
void tci_engine_options_init(tci_engine_options *options);

typedef struct tci_engine tci_engine;
typedef struct tci_context tci_context;

/* Loads and optimises a model. External data is resolved relative to the model's folder and
 * may not leave it. options may be NULL for the defaults. *out_engine is NULL on failure. */
tci_status tci_engine_create_from_file(const char *path, const tci_engine_options *options,
                                       tci_engine **out_engine);

/* Same from a serialized ModelProto in memory (an engine built from memory: a model embedded in
 * the program or received over a network); base_dir (may be NULL: the model may then have no
 * external data) is where external data lives. The bytes are not needed after the call. */
tci_status tci_engine_create_from_memory(const void *bytes, size_t size, const char *base_dir,
                                         const tci_engine_options *options,
                                         tci_engine **out_engine);

/* Writes a GPU engine to an engine file: its optimised graph (the FLOAT weights of fp16
 * convolutions and GEMMs stored as fp16), the precision, kernel family and fp32 layers it was
 * built with (of a TCI_PRECISION_AUTO engine also which layers the search chose, the error it
 * reached and its accuracy target), and the kernel chosen for every convolution and GEMM,
 * versioned and checksummed. A CPU or plan_only engine is TCI_ERR_INVALID_ARGUMENT. */
tci_status tci_engine_save(const tci_engine *engine, const char *path);

/* Builds a GPU engine from an engine file without timing any kernel. A file written on another
 * GPU model, or with other CUDA / cuDNN / cuBLASLt versions or another tcinfer, is refused
 * (TCI_ERR_UNSUPPORTED) naming both (the GPU model is the one of options->device; the file holds
 * no device index, so a file written on one device loads on any device of the same model); a
 * damaged or truncated one is TCI_ERR_PARSE. Of options (may be NULL) only no_cuda_graph,
 * device, the log and the progress fields apply: shapes, precision, fp32 layers and
 * kernels come from the file, and setting them (or a timing cache, or calibration inputs) is
 * TCI_ERR_INVALID_ARGUMENT.
 * Smaller batches run as with any GPU engine; the file keeps the built shapes only, so other
 * dims than the leading one run as built. */
tci_status tci_engine_load(const char *path, const tci_engine_options *options,
                           tci_engine **out_engine);

void tci_engine_destroy(tci_engine *engine);

size_t tci_engine_input_count(const tci_engine *engine);
size_t tci_engine_output_count(const tci_engine *engine);
/* The info's strings live as long as the engine. out_info: initialised by tci_tensor_info_init. */
tci_status tci_engine_input_info(const tci_engine *engine, size_t index, tci_tensor_info *out_info);
tci_status tci_engine_output_info(const tci_engine *engine, size_t index,
                                  tci_tensor_info *out_info);

/* Position of the input (output) called name. An unknown name is TCI_ERR_INVALID_ARGUMENT whose
 * message lists the valid names. */
tci_status tci_engine_input_index(const tci_engine *engine, const char *name, size_t *out_index);
tci_status tci_engine_output_index(const tci_engine *engine, const char *name, size_t *out_index);

/* Since 0.2: the fp32 layers of a GPU engine (tci_engine_options.fp32_layers, then the layers
 * TCI_PRECISION_AUTO added; an engine file's as it stores them): calls fn once per entry, in that
 * order, with automatic 1 for the layers TCI_PRECISION_AUTO chose (ONNX node names). A CPU
 * engine has none. */
typedef void (*tci_fp32_layer_fn)(const char *layer, int automatic, void *user);
tci_status tci_engine_fp32_layers(const tci_engine *engine, tci_fp32_layer_fn fn, void *user);

/* Since 0.2: the largest relative L2 error of an engine's float outputs against the GPU fp32
 * engine on the calibration inputs, as TCI_PRECISION_AUTO's last round measured it (with its
 * fp32 layers; an engine file of such an engine keeps it). An engine not built by
 * TCI_PRECISION_AUTO is TCI_ERR_INVALID_ARGUMENT. */
tci_status tci_engine_auto_error(const tci_engine *engine, double *out_relative_l2);

/* Since 0.2: the accuracy target TCI_PRECISION_AUTO built the engine to
 * (tci_engine_options.accuracy_target; 0: overflow only), an engine file's as it keeps it. An
 * engine not built by TCI_PRECISION_AUTO is TCI_ERR_INVALID_ARGUMENT. */
tci_status tci_engine_auto_target(const tci_engine *engine, double *out_target);

/* Since 0.2: a GPU engine's precision (TCI_PRECISION_FP16, _BF16, _TF32 or _FP32; one built by
 * TCI_PRECISION_AUTO is FP16 with kept layers, which tci_engine_auto_error tells apart) and what
 * its kept layers run in (tci_engine_options.kept_precision: TCI_PRECISION_FP32 unless set), an
 * engine file's as it stores them. Either out may be NULL. A CPU engine (the fp32 reference) is
 * TCI_ERR_INVALID_ARGUMENT. */
tci_status tci_engine_precision(const tci_engine *engine, tci_precision *out_precision,
                                tci_precision *out_kept);

/* Counts of the optimised graph, for reports. */
typedef struct tci_engine_stats {
    size_t struct_size; /* tci_engine_stats_init */
    size_t num_nodes;
    size_t num_initializers;
    int64_t num_parameters; /* elements of all float initializers */
    int64_t parameter_bytes;
} tci_engine_stats;
void tci_engine_stats_init(tci_engine_stats *stats);
tci_status tci_engine_stats_get(const tci_engine *engine, tci_engine_stats *out_stats);

/* Op histogram of the optimised graph: calls fn once per distinct op type. */
typedef void (*tci_op_count_fn)(const char *op_type, size_t count, void *user);
tci_status tci_engine_op_histogram(const tci_engine *engine, tci_op_count_fn fn, void *user);

/* Every op tcinfer supports, with the opset range and whether the GPU engine runs it (has_gpu;
 * every op runs on the CPU reference backend): calls fn once per op. */
typedef void (*tci_op_info_fn)(const char *op_type, int min_opset, int max_opset, int has_gpu,
                               void *user);
void tci_list_ops(tci_op_info_fn fn, void *user);

tci_status tci_context_create(const tci_engine *engine, tci_context **out_context);
void tci_context_destroy(tci_context *context);

/* Runs the network. inputs[i] is engine input i (same dtype; dims must match the fixed dims of
 * the engine's input and fill in its symbolic ones). Data is read during the call only.
 * GPU engines also run inputs smaller than they were built for in the leading dim (batch) and
 * in every dim the model leaves symbolic (a sequence length; tci_engine_options.shapes fixes
 * the largest), every other dim as built; a dim larger than built, or a fixed one that differs,
 * is TCI_ERR_INVALID_ARGUMENT naming the input and axis. The first run at new input shapes
 * plans them (keeping the built weights and library algorithms), later runs at those shapes
 * replay them; a context keeps 16 such variants besides the built shapes, replacing the one
 * used least recently past that. The outputs have the shapes of the run (tci_context_output). */
tci_status tci_context_run(tci_context *context, const tci_tensor *inputs, size_t num_inputs);

/* Runs the network with the inputs bound by name, in any order: inputs[k] feeds the engine input
 * called names[k] (names NULL: inputs[k].name). Every engine input is given exactly once; an
 * unknown name (the message lists the valid ones), a repeated one or a missing input is
 * TCI_ERR_INVALID_ARGUMENT. Otherwise as tci_context_run. */
tci_status tci_context_run_named(tci_context *context, const char *const *names,
                                 const tci_tensor *inputs, size_t num_inputs);

/* ---- device buffers (GPU engines): zero-copy pipelines ---- */

typedef enum tci_device_layout {
    TCI_DEVICE_DENSE = 0, /* row-major in the logical (ONNX) order */
    TCI_DEVICE_NHWC8 = 1, /* 4-D (N,C,H,W) stored N,H,W,Cp with Cp = C rounded up to a multiple
                             of 8; channels C..Cp-1 are zero on input and written as zero */
} tci_device_layout;

/* How an engine input or output is held on the device: float tensors as fp16 (FLOAT16; BFLOAT16
 * in bf16 engines and where layers kept in bf16 read or write them, FLOAT where fp32 or tf32
 * layers do), 4-D ones in NHWC8; other dtypes dense in their own dtype (BOOL as one byte). */
typedef struct tci_device_format {
    size_t struct_size; /* tci_device_format_init */
    tci_dtype dtype;
    tci_device_layout layout;
    int rank;
    int64_t dims[TCI_MAX_RANK]; /* logical dims, as built */
    int64_t padded_channels;    /* NHWC8: Cp; else 0 */
    size_t bytes;               /* size as built; a smaller batch needs proportionally less */
} tci_device_format;
void tci_device_format_init(tci_device_format *format);

tci_status tci_engine_device_format(const tci_engine *engine, int is_output, size_t index,
                                    tci_device_format *out_format);

/* Runs on device buffers in the engine's device formats: inputs are read where they are and
 * outputs written where they are (an output that is a view of an input or constant, or that
 * shares its storage with another output, is copied there). The work is ordered after what is
 * already queued on `cuda_stream` (a cudaStream_t; NULL for the legacy default stream) and before
 * what is queued on it afterwards; the call returns without waiting for the GPU, and the buffers
 * must stay valid until the stream has passed this work. leading_dims: the batch of each input
 * (NULL = as built; see tci_context_run). The context's CUDA graph is captured for the buffers
 * given and re-captured when they change: reuse buffers for the fastest replay. An out-of-range
 * Gather index (clamped into range) is reported by the next tci_context_run, not here.
 *
 * A complete zero-copy loop (error checks left out; one input, one output; the producer of the
 * input, e.g. a decoder kernel, writes d_in on `stream` in the input's device format):
 *
 *   tci_device_format in_fmt, out_fmt;
 *   tci_device_format_init(&in_fmt);
 *   tci_device_format_init(&out_fmt);
 *   tci_engine_device_format(engine, 0, 0, &in_fmt);    // e.g. FLOAT16, NHWC8, 1x3x224x224
 *   tci_engine_device_format(engine, 1, 0, &out_fmt);   // e.g. FLOAT16, dense, 1x1000
 *   void *d_in, *d_out;
 *   cudaMalloc(&d_in, in_fmt.bytes);
 *   cudaMalloc(&d_out, out_fmt.bytes);
 *   cudaStream_t stream;
 *   cudaStreamCreate(&stream);
 *   for (;;) {
 *       produce_input_nhwc8_fp16<<<grid, block, 0, stream>>>(d_in);  // the caller's kernel
 *       const void *ins[1] = {d_in};
 *       void *outs[1] = {d_out};
 *       tci_context_run_device(ctx, ins, 1, outs, 1, NULL, stream);  // queued, returns at once
 *       consume_output_fp16<<<grid, block, 0, stream>>>(d_out);      // ordered after the run
 *   }
 *   cudaStreamSynchronize(stream);  // before freeing d_in / d_out or destroying the context
 *
 * The same buffers every iteration replay the captured CUDA graph; nothing crosses to the host.
 * tci_context_nonfinite afterwards waits for the stream and checks the last run's outputs. */
tci_status tci_context_run_device(tci_context *context, const void *const *inputs,
                                  size_t num_inputs, void *const *outputs, size_t num_outputs,
                                  const int64_t *leading_dims, void *cuda_stream);

/* Runs like tci_context_run (same checks, outputs on the host after it), with each input's data
 * in the memory of the engine's GPU instead of the host's: dense, row-major, in the input's
 * dtype, as tci_context_run takes them (e.g. an inference server's CUDA shared memory). The
 * engine copies them into its own device buffers, device to device, before the run; nothing
 * crosses to the host but the outputs. GPU engines only: a CPU engine's context, a pointer the
 * GPU cannot address, memory of another device or an allocation smaller than the tensor is
 * TCI_ERR_INVALID_ARGUMENT naming the input. The engine's stream does not wait for the caller's:
 * the GPU work that writes the inputs must be complete when the call is made (e.g. after
 * cudaStreamSynchronize on its stream; a device-to-device cudaMemcpy can return before its copy
 * is done). The buffers are the caller's again when the call returns. */
tci_status tci_context_run_device_inputs(tci_context *context, const tci_tensor *inputs,
                                         size_t num_inputs);

/* Output `index` of the last run. Its data belongs to the context and stays valid until the next
 * run or tci_context_destroy. */
tci_status tci_context_output(const tci_context *context, size_t index, tci_tensor *out_tensor);

/* Output `index` of the last tci_context_run (or tci_context_run_device_inputs) in the memory of
 * the engine's GPU: what tci_context_output holds on the host (dense, row-major, the output's
 * dtype and the run's dims), the data a device pointer, e.g. to copy device to device into an
 * inference server's CUDA shared memory. It belongs to the context and stays valid until the
 * next run or tci_context_destroy; the GPU is done writing it when the run returns (a run
 * refused before it starts, e.g. for its input's dims, leaves the last outputs as they were).
 * A CPU engine's context, no run yet, a run that failed on the GPU or a last run through
 * tci_context_run_device (whose outputs are the caller's buffers) is TCI_ERR_INVALID_ARGUMENT. */
tci_status tci_context_output_device(const tci_context *context, size_t index,
                                     tci_tensor *out_tensor);

/* Copies output `index` of the last run into host_buffer, a caller's buffer of `bytes` bytes
 * (dense, row-major, the output's dtype; the output's dims from tci_context_output or, when
 * fixed, tci_engine_output_info). A buffer smaller than the output is TCI_ERR_INVALID_ARGUMENT
 * naming the size needed; a larger one is written at its start. */
tci_status tci_context_output_into(const tci_context *context, size_t index, void *host_buffer,
                                   size_t bytes);

/* NaN and Inf in the outputs of the last run. A wrong answer is never silent: fp16 holds at most
 * 65504, and a layer whose values exceed that (or a bf16 one, fp32's range) yields Inf, then
 * NaN. GPU runs count these values on the device as part of every run. */
typedef struct tci_nonfinite_report {
    size_t struct_size;    /* tci_nonfinite_report_init */
    uint64_t count;        /* NaN and +-Inf values over all outputs of the last run; 0: none */
    size_t output_index;   /* the first output holding one (count > 0) */
    /* GPU engines, count > 0: the last run's inputs are run again layer by layer to find the
     * first one whose output holds NaN or Inf: */
    int found;             /* 1: layer and op_type name it; 0: not located (a CPU engine, or
                              an input holds them: input_index) */
    char layer[256];       /* the first node of that layer (the ONNX node name) */
    char op_type[128];     /* the ops fused into it, e.g. "Conv+BatchNormalization+Relu" */
    long input_index;      /* >= 0: engine input that already holds NaN or Inf */
} tci_nonfinite_report;
void tci_nonfinite_report_init(tci_nonfinite_report *report);

/* Fills out_report for the last run (tci_context_run, or tci_context_run_device once its stream
 * has passed the run: this call waits for it). Locating the layer re-runs the network once
 * without the CUDA graph, on the last inputs (device runs: the buffers must still hold them). */
tci_status tci_context_nonfinite(tci_context *context, tci_nonfinite_report *out_report);

/* ---- GPU ---- */

/* Number of usable CUDA GPUs (0 where there is none or the build has no CUDA); name (may be NULL)
 * receives device 0's name. */
int tci_gpu_count(char *name, size_t name_size);

/* Since 0.2: the name of CUDA device `device` (counted as tci_engine_options.device counts them)
 * into name, name_size bytes (truncated to fit). A device out of range is TCI_ERR_NO_DEVICE
 * naming the devices there are (none where there is no GPU or the build has no CUDA). */
tci_status tci_gpu_name(int device, char *name, size_t name_size);

/* Memory and layout figures of a GPU engine's plan. */
typedef struct tci_gpu_report {
    size_t struct_size;            /* tci_gpu_report_init */
    size_t num_steps;              /* kernel launches per run (fused layers count once) */
    size_t weight_bytes;           /* constants on the device */
    size_t arena_bytes;            /* planned activation arena */
    size_t naive_activation_bytes; /* one buffer per activation: what the plan saves against */
    size_t layout_conversions;     /* NHWC8 <-> dense conversions the plan had to insert */
    size_t layers_timed;           /* conv / GEMM layers whose kernel was chosen by timing */
    size_t layers_cached;          /* ... and taken from the timing cache */
    /* Since 0.2: parts of a tensor (a Split's or Slice's contiguous part, starting on the
     * arena's 256-byte alignment) that its readers read in place: no copy step */
    size_t views;
} tci_gpu_report;
void tci_gpu_report_init(tci_gpu_report *report);
/* TCI_ERR_INVALID_ARGUMENT for a CPU engine. */
tci_status tci_engine_gpu_report(const tci_engine *engine, tci_gpu_report *out_report);

/* One line per GPU step: index, the first node it implements, the ops fused into it (e.g.
 * "Conv+BatchNormalization+Add+Relu"), the kernel or library algorithm, and the layout of its
 * output ("NHWC8" or "dense", followed by " fp32" or " bf16" when it is not fp16). */
typedef void (*tci_layer_fn)(size_t index, const char *node, const char *fused_ops,
                             const char *kernel, const char *layout, void *user);
tci_status tci_engine_layers(const tci_engine *engine, tci_layer_fn fn, void *user);

/* Since 0.2: the ONNX nodes whose computation engine output `index` is the result of, in graph
 * order, through fn (node name and op type): on a GPU engine the nodes of the step that computes
 * it (a fused step: the node it begins at and every node fused into it, e.g. Conv,
 * BatchNormalization, Add and Relu, the output being the last one's), otherwise the node that
 * computes it alone; none for an output that is an engine input or a constant. For the
 * per-layer outputs of tci_engine_options.mark_all_outputs. */
typedef void (*tci_node_fn)(const char *node, const char *op_type, void *user);
tci_status tci_engine_output_nodes(const tci_engine *engine, size_t index, tci_node_fn fn,
                                   void *user);

/* Times `iterations` runs on the inputs of the last tci_context_run, after `warmup` untimed ones:
 * GPU: device time of the whole plan by CUDA events (no host copies); CPU: wall time of a run.
 * times_ms receives `iterations` values. */
tci_status tci_context_benchmark(tci_context *context, int iterations, int warmup,
                                 float *times_ms);

/* GPU: runs the plan step by step `iterations` times on the last inputs and reports each step's
 * median time through fn (index and names as tci_engine_layers). */
typedef void (*tci_profile_fn)(size_t index, const char *node, const char *fused_ops,
                               const char *kernel, float median_ms, void *user);
tci_status tci_context_profile(tci_context *context, int iterations, tci_profile_fn fn,
                               void *user);

/* ---- accuracy ---- */

/* Error of `test` against `baseline` (same dims; float). top-1/top-5 only for 2-D (N x C) with
 * C > 1, else rows = 0. The bound check uses the result's atol and rtol (read only when its
 * struct_size covers them; else 0). */
typedef struct tci_compare_result {
    size_t struct_size;  /* tci_compare_result_init */
    double max_abs, mean_abs, relative_l2, cosine;
    size_t non_finite;   /* NaN/Inf in test where the baseline is finite */
    size_t rows;         /* N of an N x C output, else 0 */
    size_t top1_agree;   /* rows whose arg-max matches */
    size_t top5_agree;   /* rows whose baseline top-1 is within the test's top-5 */
    /* Since 0.2: the element-wise bound of Polygraphy's --atol/--rtol. atol and rtol are read:
     * set them after tci_compare_result_init (which sets both to 0: exact equality) and
     * before the call; each must be finite and >= 0. Element i fails when
     * |test[i] - baseline[i]| > atol + rtol * |baseline[i]|; a NaN or Inf fails unless the
     * baseline holds the same value there. */
    double atol, rtol;
    size_t bound_failures; /* elements that fail */
    size_t worst_index;    /* flat (row-major) index of the element furthest past its bound
                              (largest |test - baseline| - bound; the first on ties), or
                              closest to it when none fails; 0 for an empty tensor */
    double worst_test, worst_baseline; /* the values at worst_index */
    double max_rel;        /* max |test - baseline| / |baseline| where baseline != 0 (both
                              finite); 0 when there is no such element */
} tci_compare_result;
void tci_compare_result_init(tci_compare_result *result);
tci_status tci_compare(const tci_tensor *test, const tci_tensor *baseline,
                       tci_compare_result *out_result);

/* Where per-layer errors (relative L2, in execution order) break: the first layer whose error
 * exceeds threshold and is more than `factor` times the previous layer's (*out_first_jump), and
 * the first that exceeds threshold at all (*out_first_over); -1 where none. */
tci_status tci_find_error_jump(const double *errors, size_t count, double threshold,
                               double factor, int *out_first_jump, int *out_first_over);

/* ---- tensor files ---- */

/* Reads a tensor from a .npy file (C order; float32/64, float16, int8/32/64, uint8, bool) or,
 * for any other extension, from a serialized ONNX TensorProto (.pb). out_tensor->data is
 * malloc'd and belongs to the caller: release it with tci_tensor_release. */
tci_status tci_tensor_read_file(const char *path, tci_tensor *out_tensor);

/* Writes a tensor as .npy (version 1.0, C order). */
tci_status tci_tensor_write_npy(const char *path, const tci_tensor *tensor);

/* Frees data obtained from tci_tensor_read_file and clears the struct; NULL is a no-op. */
void tci_tensor_release(tci_tensor *tensor);

#ifdef __cplusplus
}
#endif

#endif /* TCINFER_H */
