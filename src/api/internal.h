/* What the api layer's files share: the engine and context objects, the versioned-struct checks
 * and the engine's log. */
#ifndef TCI_API_INTERNAL_H
#define TCI_API_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/ir.h"
#include "graph/plan.h"
#include "util/status.h"
#if TCI_HAVE_CUDA
#include "graph/gpu/exec_gpu.h"
#endif

/* Where an engine's messages go (tci_engine_options.log_fn, log_user, log_level). */
typedef struct api_log {
    tci_log_fn fn;
    void *user;
    tci_log_level level;
} api_log;

struct tci_engine {
    ir_graph *graph;
    tci_backend backend;
    bool use_cuda_graph;
    plan *plan_only; /* a GPU plan built without a device (tci_engine_options.plan_only) */
    /* the GPU engine's graph before the passes, shapes as built: smaller shapes re-plan a copy
     * (api_replan) */
    ir_graph *pristine;
    /* by input: bit d set when dim d may run smaller than built (api_dynamic_dims) */
    unsigned *dynamic_dims;
    char **fp32_layers;      /* NULL-terminated copy of tci_engine_options.fp32_layers */
    size_t num_auto_fp32;    /* of those, the last ones TCI_PRECISION_AUTO chose */
    double auto_error;       /* TCI_PRECISION_AUTO: the outputs' relative L2 error; else -1 */
    double auto_target;      /* TCI_PRECISION_AUTO: its accuracy_target (0: overflow only) */
    /* TCI_PRECISION_AUTO: the loaded graph that graph (and pristine) were cloned from; the
     * clones share its names, attributes and constant data, so it lives as long as they do */
    ir_graph *clone_source;
    plan_options plan_options; /* fp32 layers, the precision and the kept layers' precision, as
                                  the planner takes them */
    tci_kernels kernels;
    int cpu_threads; /* tci_engine_options.cpu_threads */
    int device;      /* GPU engines: the CUDA device they run on; -1 for CPU and plan_only */
    api_log log;
#if TCI_HAVE_CUDA
    exec_gpu_engine *gpu;
#endif
};

struct tci_context {
    const tci_engine *engine;
    exec_cpu *cpu;
#if TCI_HAVE_CUDA
    exec_gpu_context *gpu;
#endif
    tci_tensor *last_inputs; /* CPU benchmark: deep copies of the last run's inputs */
    size_t num_last_inputs;
};

/* The size of each struct when it first carried struct_size: the least a caller may pass. Fields
 * added later lie past it, and are read only when struct_size covers them. */
#define API_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define API_MIN_ENGINE_OPTIONS API_SIZE_THROUGH(tci_engine_options, log_level)
#define API_MIN_TENSOR_INFO API_SIZE_THROUGH(tci_tensor_info, dim_names)
#define API_MIN_ENGINE_STATS API_SIZE_THROUGH(tci_engine_stats, parameter_bytes)
#define API_MIN_DEVICE_FORMAT API_SIZE_THROUGH(tci_device_format, bytes)
#define API_MIN_NONFINITE_REPORT API_SIZE_THROUGH(tci_nonfinite_report, input_index)
#define API_MIN_GPU_REPORT API_SIZE_THROUGH(tci_gpu_report, layers_cached)
#define API_MIN_COMPARE_RESULT API_SIZE_THROUGH(tci_compare_result, top5_agree)

/* TCI_ERR_INVALID_ARGUMENT naming the struct and its init function when `given` (a struct's
 * struct_size) is below `minimum`. */
tci_status api_check_size(size_t given, size_t minimum, const char *type);

/* Copies a filled struct (full, of full_size bytes, struct_size its first member) to the
 * caller's out, no byte past out's struct_size, which stays as the caller set it. */
void api_copy_out(void *out, const void *full, size_t full_size);

/* The options a caller passed, completed: a copy of `given` up to its struct_size over the
 * defaults (NULL: all defaults). Checks struct_size. */
tci_status api_read_options(const tci_engine_options *given, tci_engine_options *out);

/* Builds an engine of g (owned, also on failure) with options (NULL: the defaults); choices:
 * an engine file's kernel choices, or NULL. TCI_PRECISION_AUTO goes to api_auto_create. */
tci_status api_finish_create(ir_graph *g, const tci_engine_options *options, const char *choices,
                             tci_engine **out_engine);

/* mark_outputs.c: the per-layer outputs of tci_engine_options.mark_all_outputs. */
/* TCI_MARK_OUTPUTS_UNFUSED: the first output of every node of g (optimised, not fused) made a
 * graph output, after the model's own, in node order. */
tci_status api_mark_all_outputs(ir_graph *g);
/* TCI_MARK_OUTPUTS_AS_SHIPPED, on g prepared for the GPU (pass_prepare_for_gpu): plans g, makes
 * the tensor each step of that plan writes (named, not rescaled) a graph output, and plans it
 * again: *out_plan, whose steps are checked to be those of the first plan
 * (TCI_ERR_INTERNAL naming the first step that differs). */
tci_status api_plan_as_shipped(ir_graph *g, const plan_options *options, plan **out_plan);

/* Sets ir_node.kept on every node of g (optimised, before pass_prepare_for_gpu) as a plan built
 * with options keeps it; an fp32_layers entry that selects nothing keeps none here (plan_build
 * reports it). */
tci_status api_mark_kept_nodes(ir_graph *g, const plan_options *options);

/* shapes.c: the shapes a GPU engine runs below the built ones. */
/* By input of g (before tci_engine_options.shapes fixes its dims): bit d set where dim d may run
 * smaller than built: the leading dim (the batch) and every dim the model leaves symbolic or
 * unknown. *out (malloc'd) has g->num_inputs entries. */
tci_status api_dynamic_dims(const ir_graph *g, unsigned **out);
/* Whether a run's inputs (n, in engine order) fit the engine's built shapes: the same rank, every
 * dim as built or, where e->dynamic_dims allows it, from 1 up to the built one. The error names the
 * input, the axis, the size given and the sizes allowed. */
tci_status api_check_run_shapes(const tci_engine *e, const tci_tensor *inputs, size_t n);
/* An exec_gpu_replan_fn (user: the tci_engine, which keeps its pristine graph): a copy of the
 * pristine graph with input i's dims set to dims[i * TCI_MAX_RANK ...], optimised, fused and
 * planned like the built plan (the built graph constrains its folds: ir_graph.like). Needs no
 * GPU. */
tci_status api_replan(void *user, const plan *built, const int64_t *dims, ir_graph **out_graph,
                      plan **out_plan);
/* The CUDA device of a call (device.c). Every public call that reaches CUDA for a GPU engine or
 * its contexts runs between api_device_enter(engine->device, &scope), which makes the engine's
 * device the calling thread's current one, and api_device_leave, which gives the caller's back
 * (device -1, a CPU or plan_only engine: both do nothing). */
typedef struct api_device {
    int device;   /* entered, or -1 */
    int previous; /* the caller's */
} api_device;
/* TCI_ERR_NO_DEVICE naming tci_engine_options.device and the devices there are when device is
 * not a usable CUDA device index. */
tci_status api_device_check(int device);
tci_status api_device_enter(int device, api_device *scope);
/* Gives the caller's device back; returns st, or where st is TCI_OK and that fails, an error. */
tci_status api_device_leave(const api_device *scope, tci_status st);

/* Formats and sends a message to log when its level is enabled. */
void api_log_message(const api_log *log, tci_log_level level, const char *fmt, ...)
    UTIL_PRINTF(3, 4);

/* Logs a failure (the text of tci_last_error()) at TCI_LOG_ERROR and returns st. */
tci_status api_log_failure(const api_log *log, tci_status st);

#endif
