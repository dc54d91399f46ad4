/* The tcinfer backend's view of a Triton model configuration (the JSON Triton hands out): what it
 * reads from it, and the auto-completion of inputs, outputs and max_batch_size from the model. */
#ifndef TCI_TRITON_MODEL_CONFIG_H
#define TCI_TRITON_MODEL_CONFIG_H

#include "tcinfer.h"
#include "triton_api.h"

/* max_batch_size filled in by auto-completion for a model whose inputs and outputs all have a
 * symbolic leading dim (Triton's own default for ONNX models is 4; 8 suits tensor cores) */
#define TCT_DEFAULT_MAX_BATCH 8

typedef struct tct_tensor_config {
    char *name;
    tci_dtype dtype;
    int rank; /* dims without the batch dim where max_batch_size > 0 */
    int64_t dims[TCI_MAX_RANK];
} tct_tensor_config;

typedef struct tct_model_config {
    int max_batch;                /* max_batch_size; 0: the model takes no batch dim */
    tci_precision precision;      /* parameter "precision": fp16 (default), bf16, tf32, fp32,
                                     auto */
    int precision_set;            /* the parameter is given */
    double accuracy_target;       /* parameter "accuracy_target" (precision auto); 0: none */
    char **calibration_inputs;    /* parameter "calibration_inputs" (precision auto): tensor
                                     files, one per model input in its order, relative to the
                                     model folder; NULL-terminated; NULL: seeded random inputs */
    char **fp32_layers;           /* parameter "fp32_layers": comma-separated; NULL-terminated */
    tci_precision kept_precision; /* parameter "keep_precision": fp32 (default), tf32, bf16: what
                                     fp32_layers and precision auto keep layers in */
    int kept_set;                 /* the parameter is given */
    char *timing_cache;           /* parameter "timing_cache": a file, relative to the model folder */
    int cpu_threads;              /* parameter "cpu_threads": OpenBLAS threads of CPU instances */
    int64_t *batch_buckets;       /* parameter "batch_buckets": the batch sizes a batch is padded
                                     up to, increasing; "none": num 0 */
    size_t num_batch_buckets;
    int buckets_set;              /* the parameter is given */
    int pipeline_depth;           /* parameter "pipeline_depth": an instance's batches in flight,
                                     1 or 2: with 2 the next batch is gathered while the engine
                                     runs one; 0 (not given): 2 on GPU instances, 1 on CPU ones */
    char *model_filename;         /* default_model_filename, or NULL */
    tct_tensor_config *inputs;
    size_t num_inputs;
    tct_tensor_config *outputs;
    size_t num_outputs;
} tct_model_config;

/* The default batch buckets of a GPU instance for max_batch (> 1): the powers of two below a
 * step, the multiples of the step below max_batch, and max_batch, the step the least power of
 * two from 8 up that keeps the buckets at most TCT_DEFAULT_BUCKETS_MAX (the engine keeps 16
 * shape variants; above 2048 no step does, and the buckets are the powers of two and
 * max_batch): 1,2,4,8,16,24,...,56,64 for 64. Writes them into out (NULL: counts only) and
 * returns how many. */
#define TCT_DEFAULT_BUCKETS_MAX 12
size_t tct_default_buckets(int64_t max_batch, int64_t *out);

/* Parses the configuration JSON; unknown parameters and bad values are errors naming them. */
TRITONSERVER_Error *tct_config_parse(const char *json, size_t size, tct_model_config *out);
void tct_config_free(tct_model_config *config);

/* Fills what the JSON leaves out from the engine: every input and output when the config lists
 * none, and max_batch_size (TCT_DEFAULT_MAX_BATCH) when it is 0, lists no tensors and the model's
 * tensors all have a symbolic leading dim. *out_json: the new JSON (malloc'd) or NULL when nothing
 * changed. */
TRITONSERVER_Error *tct_config_autocomplete(const char *json, size_t size, const tci_engine *engine,
                                            char **out_json);

/* Triton's datatype of a tcinfer dtype and back (TRITONSERVER_TYPE_INVALID / TCI_DTYPE_UNDEFINED
 * where there is none) */
TRITONSERVER_DataType tct_triton_dtype(tci_dtype dtype);
tci_dtype tct_tci_dtype(TRITONSERVER_DataType dtype);

/* A Triton error with printf formatting. */
TRITONSERVER_Error *tct_error(TRITONSERVER_Error_Code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* TCI_TRITON_MODEL_CONFIG_H */
