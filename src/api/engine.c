/* The public engine: load, optimise and build for the chosen backend; engine files; what an
 * engine holds (inputs and outputs by position and by name, statistics, the GPU plan). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/engine_file.h"
#include "api/internal.h"
#include "api/precision_auto.h"
#include "graph/compare.h"
#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "kernels/device.h"
#include "layers/op.h"
#include "onnx/loader.h"
#include "onnx/writer.h"
#if TCI_HAVE_CUDA
#include "graph/gpu/exec_gpu.h"
#endif

int tci_gpu_count(char *name, size_t name_size) {
    int n = 0;
    if (kern_device_count(&n, name, name_size) != TCI_OK) return 0;
    return n;
}

tci_status tci_gpu_name(int device, char *name, size_t name_size) {
    if (!name || !name_size)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "name is NULL or name_size 0");
    return kern_device_name(device, name, name_size);
}

static tci_status apply_shape_override(ir_graph *g, const tci_shape_override *o) {
    char want[128], got[128];
    ir_tensor *t = NULL;
    for (size_t i = 0; i < g->num_inputs; i++)
        if (o->name && strcmp(g->inputs[i]->name, o->name) == 0) t = g->inputs[i];
    if (!t)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "shape given for '%s', which is not a model input",
                         o->name ? o->name : "(null)");
    if (o->rank < 0 || o->rank > TCI_MAX_RANK)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "shape for '%s' has rank %d", t->name, o->rank);
    bool ok = t->rank < 0 || t->rank == o->rank;
    for (int i = 0; ok && i < o->rank; i++)
        if (o->dims[i] < 0 || (t->rank >= 0 && t->dims[i] >= 0 && t->dims[i] != o->dims[i]))
            ok = false;
    if (!ok)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "shape %s for input '%s' does not fit the model's %s (only symbolic dims "
                         "may be set)",
                         ir_format_dims(o->rank, o->dims, got, sizeof got), t->name,
                         ir_format_dims(t->rank, t->dims, want, sizeof want));
    t->rank = o->rank;
    for (int i = 0; i < TCI_MAX_RANK; i++) t->dims[i] = i < o->rank ? o->dims[i] : -1;
    return TCI_OK;
}

tci_status api_mark_kept_nodes(ir_graph *g, const plan_options *options) {
    bool *kept = calloc(g->num_nodes + 1, sizeof *kept);
    if (!kept) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory marking kept nodes");
    bool known = plan_fp32_nodes(g, options, kept) == TCI_OK;
    for (size_t i = 0; i < g->num_nodes; i++) g->nodes[i]->kept = known && kept[i];
    free(kept);
    return TCI_OK;
}

/* The GPU plan of an optimised graph: the fusion and layout passes, then the planner; mark: the
 * options' mark_all_outputs (TCI_MARK_OUTPUTS_AS_SHIPPED marks the steps' outputs here). */
static tci_status plan_for_gpu(ir_graph *g, const plan_options *options, int mark,
                               plan **out_plan) {
    TRY_STATUS(api_mark_kept_nodes(g, options));
    TRY_STATUS(pass_prepare_for_gpu(g));
    if (mark == TCI_MARK_OUTPUTS_AS_SHIPPED) return api_plan_as_shipped(g, options, out_plan);
    return plan_build(g, options, out_plan);
}

/* dynamic: which dims the model leaves open, before the shapes fix them (api_dynamic_dims) */
static tci_status build(ir_graph *g, const tci_engine_options *options, ir_graph **pristine,
                        unsigned **dynamic) {
    if (options->num_shapes && !options->shapes)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "tci_engine_options.num_shapes is %zu but shapes is NULL",
                            options->num_shapes);
    TRY_STATUS(api_dynamic_dims(g, dynamic));
    for (size_t i = 0; i < options->num_shapes; i++)
        TRY_STATUS(apply_shape_override(g, &options->shapes[i]));

    for (size_t i = 0; i < g->num_inputs; i++) {
        const ir_tensor *t = g->inputs[i];
        if (t->dtype == TCI_DTYPE_UNDEFINED || t->rank < 0)
            return status_error(TCI_ERR_INVALID_MODEL,
                             "input '%s' has no declared type or shape; give it with "
                             "tci_engine_options.shapes",
                             t->name);
    }
    if (pristine) TRY_STATUS(ir_graph_clone(g, pristine));
    static const char stage[] = "optimizing graph";
    if (options->progress_fn) options->progress_fn(stage, 0, 1, options->progress_user);
    TRY_STATUS(pass_optimize(g));
    if (options->progress_fn) options->progress_fn(stage, 1, 1, options->progress_user);
    /* after the passes: in execution order, and only tensors that are really computed (the
     * GPU marks the engine as it ships after its own passes: plan_for_gpu) */
    bool unfused = options->mark_all_outputs == TCI_MARK_OUTPUTS_UNFUSED ||
                   (options->mark_all_outputs == TCI_MARK_OUTPUTS_AS_SHIPPED &&
                    options->backend == TCI_BACKEND_CPU);
    return unfused ? api_mark_all_outputs(g) : TCI_OK;
}

/* A NULL-terminated deep copy (NULL for NULL). */
static tci_status copy_strings(const char *const *src, char ***out) {
    *out = NULL;
    if (!src) return TCI_OK;
    size_t n = 0;
    while (src[n]) n++;
    char **copy = calloc(n + 1, sizeof *copy);
    if (!copy) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    *out = copy;
    for (size_t i = 0; i < n; i++) {
        copy[i] = strdup(src[i]);
        if (!copy[i]) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return TCI_OK;
}

#if TCI_HAVE_CUDA
/* Plans g and makes the plan real on the GPU, on options->device (no planning where there is
 * no GPU or no such device). */
static tci_status create_gpu(tci_engine *e, ir_graph *g, const tci_engine_options *options,
                             const char *choices) {
    plan *built = NULL;
    TRY_STATUS(exec_gpu_check_device());
    TRY_STATUS(api_device_check(options->device));
    TRY_STATUS(plan_for_gpu(g, &e->plan_options, options->mark_all_outputs, &built));
    api_device scope;
    tci_status st = api_device_enter(options->device, &scope);
    if (st != TCI_OK) {
        plan_destroy(built);
        return st;
    }
    e->device = options->device;
    st = exec_gpu_guard(NULL, exec_gpu_engine_create(built, &e->plan_options, options->kernels,
                                                     options->timing_cache, choices,
                                                     e->pristine ? api_replan : NULL, e,
                                                     options->progress_fn,
                                                     options->progress_user, &e->gpu));
    return api_device_leave(&scope, st);
}
#endif

/* choices: an engine file's kernel choices (tci_engine_load), or NULL. */
static const plan *engine_plan(const tci_engine *engine) {
#if TCI_HAVE_CUDA
    if (engine->gpu) return exec_gpu_engine_plan(engine->gpu);
#endif
    return engine->plan_only;
}

static const char *step_kernel(const tci_engine *engine, int step) {
#if TCI_HAVE_CUDA
    if (engine->gpu) return exec_gpu_step_kernel(engine->gpu, step);
#endif
    return plan_step_kernel(&engine->plan_only->steps[step]);
}

/* The engine's build as log messages: graph sizes, then for GPU engines the plan and (debug)
 * the kernel of every step. */
static void log_build(const tci_engine *e, size_t loaded_nodes) {
    const api_log *log = &e->log;
    api_log_message(log, TCI_LOG_INFO, "graph: %zu nodes loaded, %zu after optimisation; %s",
                    loaded_nodes, e->graph->num_nodes,
                    e->backend == TCI_BACKEND_CPU ? "CPU reference backend (fp32)"
                    : e->plan_only                ? "GPU plan only (plan_only)"
                                                  : "GPU backend");
    const plan *p = engine_plan(e);
    if (!p) return;
    api_log_message(log, TCI_LOG_INFO,
                    "GPU plan: %d steps, %d layout conversions, weights %.2f MB, activation "
                    "arena %.2f MB",
                    p->num_steps, p->num_layout_conversions, (double)p->weight_bytes / 1e6,
                    (double)p->arena_bytes / 1e6);
    size_t kept = 0;
    while (e->fp32_layers && e->fp32_layers[kept]) kept++;
    if (kept && !plan_all_fp32(&e->plan_options))
        api_log_message(log, TCI_LOG_INFO, "fp32 layers: %zu entr%s, kept in %s", kept,
                        kept == 1 ? "y" : "ies", plan_kept_name(&e->plan_options));
#if TCI_HAVE_CUDA
    if (e->gpu) {
        int timed = 0, cached = 0;
        exec_gpu_engine_tuning(e->gpu, &timed, &cached);
        api_log_message(log, TCI_LOG_INFO,
                        "kernel choice: %d convolution/GEMM layers timed, %d taken from the "
                        "timing cache or engine file",
                        timed, cached);
    }
#endif
    for (int i = 0; log->fn && log->level >= TCI_LOG_DEBUG && i < p->num_steps; i++)
        api_log_message(log, TCI_LOG_DEBUG, "step %d: %s (%s): %s", i, p->steps[i].node->name,
                        p->steps[i].label, step_kernel(e, i));
}

tci_status api_finish_create(ir_graph *g, const tci_engine_options *given, const char *choices,
                             tci_engine **out_engine) {
    tci_engine_options all;
    const tci_engine_options *options = &all;
    size_t loaded_nodes = g->num_nodes;
    tci_status st = api_read_options(given, &all);
    if (st == TCI_OK && options->backend == TCI_BACKEND_CPU && options->device != 0)
        st = status_error(TCI_ERR_INVALID_ARGUMENT,
                          "tci_engine_options.device is %d, but the backend is TCI_BACKEND_CPU, "
                          "which runs on no GPU: leave the device at 0 or use TCI_BACKEND_GPU",
                          options->device);
    if (st == TCI_OK && (options->mark_all_outputs < TCI_MARK_OUTPUTS_NONE ||
                         options->mark_all_outputs > TCI_MARK_OUTPUTS_AS_SHIPPED))
        st = status_error(TCI_ERR_INVALID_ARGUMENT,
                          "tci_engine_options.mark_all_outputs is %d: TCI_MARK_OUTPUTS_NONE (0), "
                          "_UNFUSED (1) or _AS_SHIPPED (2)",
                          options->mark_all_outputs);
    if (st == TCI_OK && options->precision == TCI_PRECISION_AUTO && !choices)
        return api_auto_create(g, options, out_engine);
    if (st == TCI_OK && (options->calibration_inputs || options->num_calibration_inputs ||
                         options->accuracy_target != 0))
        st = status_error(TCI_ERR_INVALID_ARGUMENT,
                          "tci_engine_options.calibration_inputs and accuracy_target are for "
                          "TCI_PRECISION_AUTO; the precision is %d",
                          (int)options->precision);
    if (st == TCI_OK && options->backend != TCI_BACKEND_CPU && options->backend != TCI_BACKEND_GPU)
        st = status_error(TCI_ERR_INVALID_ARGUMENT, "unknown backend %d", (int)options->backend);
#if !TCI_HAVE_CUDA
    if (st == TCI_OK && options->backend == TCI_BACKEND_GPU && !options->plan_only)
        st = status_error(TCI_ERR_NO_DEVICE,
                       "this build has no CUDA support; use TCI_BACKEND_CPU "
                       "(tci_engine_options.backend) for the fp32 reference executor");
#endif
    tci_engine *e = NULL;
    if (st == TCI_OK) {
        e = calloc(1, sizeof *e);
        if (!e) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating engine");
        else {
            e->auto_error = -1;
            e->device = -1;
        }
    }
    /* shapes below the built one re-plan the graph as it was before the passes (api_replan; a
     * plan_only engine keeps it too, so that its re-plans can be checked without a GPU); the
     * layer marking of mark_all_outputs is for comparisons at one shape and is not replayed */
    bool keep_pristine = options->backend == TCI_BACKEND_GPU && !options->mark_all_outputs &&
                         (TCI_HAVE_CUDA || options->plan_only);
    if (st == TCI_OK && options->precision != TCI_PRECISION_FP16 &&
        options->precision != TCI_PRECISION_FP32 && options->precision != TCI_PRECISION_TF32 &&
        options->precision != TCI_PRECISION_BF16)
        st = status_error(TCI_ERR_INVALID_ARGUMENT, "unknown precision %d", (int)options->precision);
    if (st == TCI_OK && (options->kernels < TCI_KERNELS_AUTO || options->kernels > TCI_KERNELS_LIBRARY))
        st = status_error(TCI_ERR_INVALID_ARGUMENT, "unknown kernel family %d", (int)options->kernels);
    if (st == TCI_OK) st = copy_strings(options->fp32_layers, &e->fp32_layers);
    if (st == TCI_OK) {
        e->plan_options.fp32_layers = (const char *const *)e->fp32_layers;
        e->plan_options.precision = options->precision;
        e->plan_options.kept_precision = options->kept_precision;
        e->kernels = options->kernels;
        e->cpu_threads = options->cpu_threads;
        e->log = (api_log){options->log_fn, options->log_user, options->log_level};
    }
    if (st == TCI_OK)
        st = build(g, options, keep_pristine ? &e->pristine : NULL, &e->dynamic_dims);
    if (st == TCI_OK) {
        e->graph = g;
        e->backend = options->backend;
        e->use_cuda_graph = !options->no_cuda_graph;
        if (e->backend == TCI_BACKEND_GPU && options->plan_only)
            st = plan_for_gpu(g, &e->plan_options, options->mark_all_outputs, &e->plan_only);
#if TCI_HAVE_CUDA
        else if (e->backend == TCI_BACKEND_GPU)
            st = create_gpu(e, g, options, choices);
#endif
    }
    if (st != TCI_OK) {
        if (e) {
            e->graph = NULL;
            tci_engine_destroy(e);
        }
        ir_graph_destroy(g);
        return st;
    }
    log_build(e, loaded_nodes);
    *out_engine = e;
    return TCI_OK;
}

/* The log of options, for failures before an engine exists. */
static api_log options_log(const tci_engine_options *options) {
    api_log log = {NULL, NULL, TCI_LOG_WARNING};
    if (options && options->struct_size >= API_MIN_ENGINE_OPTIONS)
        log = (api_log){options->log_fn, options->log_user, options->log_level};
    return log;
}

/* The loader's limits from the options' fields (read up to their struct_size and checked by
 * api_read_options), 0 giving the default. */
static tci_status limits_from_options(const tci_engine_options *given, ir_limits *out) {
    ir_limits_default(out);
    tci_engine_options o;
    TRY_STATUS(api_read_options(given, &o));
    if (o.max_model_bytes) out->max_model_bytes = o.max_model_bytes;
    if (o.max_tensor_elements) out->max_tensor_elements = o.max_tensor_elements;
    if (o.max_constant_bytes) out->max_constant_bytes = o.max_constant_bytes;
    if (o.max_nodes) out->max_nodes = o.max_nodes;
    if (o.max_nesting_depth) out->max_nesting = o.max_nesting_depth;
    if (o.max_parse_bytes) out->max_parse_bytes = o.max_parse_bytes;
    if (o.max_loop_iterations) out->max_loop_iterations = o.max_loop_iterations;
    return TCI_OK;
}

tci_status tci_engine_create_from_file(const char *path, const tci_engine_options *options,
                                       tci_engine **out_engine) {
    if (!out_engine) return status_error(TCI_ERR_INVALID_ARGUMENT, "out_engine is NULL");
    *out_engine = NULL;
    if (!path) return status_error(TCI_ERR_INVALID_ARGUMENT, "path is NULL");
    ir_graph *g = NULL;
    api_log log = options_log(options);
    ir_limits limits;
    tci_status st = limits_from_options(options, &limits);
    if (st == TCI_OK) st = onnx_load_file_limits(path, &limits, &g);
    if (st == TCI_OK) {
        api_log_message(&log, TCI_LOG_INFO, "loaded %s: %zu nodes, %zu inputs, %zu outputs", path,
                        g->num_nodes, g->num_inputs, g->num_outputs);
        st = api_finish_create(g, options, NULL, out_engine);
        if (st != TCI_OK) status_error_prefix(st, "%s", path);
    }
    return api_log_failure(&log, st);
}

tci_status tci_engine_create_from_memory(const void *bytes, size_t size, const char *base_dir,
                                         const tci_engine_options *options,
                                         tci_engine **out_engine) {
    if (!out_engine) return status_error(TCI_ERR_INVALID_ARGUMENT, "out_engine is NULL");
    *out_engine = NULL;
    if (!bytes && size) return status_error(TCI_ERR_INVALID_ARGUMENT, "bytes is NULL");
    ir_graph *g = NULL;
    api_log log = options_log(options);
    ir_limits limits;
    tci_status st = limits_from_options(options, &limits);
    if (st == TCI_OK) st = onnx_load_model_limits(bytes, size, base_dir, &limits, &g);
    if (st == TCI_OK) {
        api_log_message(&log, TCI_LOG_INFO,
                        "loaded a model of %zu bytes from memory: %zu nodes, %zu inputs, %zu "
                        "outputs",
                        size, g->num_nodes, g->num_inputs, g->num_outputs);
        st = api_finish_create(g, options, NULL, out_engine);
    }
    return api_log_failure(&log, st);
}

/* ---- engine files ---- */

#if TCI_HAVE_CUDA
static bool is_op(const ir_node *n, const char *op_type) {
    return n->domain[0] == '\0' && strcmp(n->op_type, op_type) == 0;
}

/* What writes an engine file, and what may read it: "tcinfer VERSION". */
static void producer_name(char *buf, size_t size) {
    snprintf(buf, size, "tcinfer %s", tci_version());
}

/* FLOAT constants of g (the graph to save) that only fp16 convolutions and GEMMs read, as their
 * weights (input 1), with no arithmetic before the GPU rounds them to fp16: storing them rounded
 * changes nothing. Biases stay fp32 (the epilogues add them in fp32). *out_names lists them
 * (NULL-terminated; the strings are the graph's). */
static tci_status fp16_weights(const ir_graph *g, const plan_options *options, bool **out_mask,
                               char ***out_names) {
    *out_mask = calloc(g->num_tensors + 1, sizeof(bool));
    bool *fp32 = calloc(g->num_nodes + 1, sizeof(bool));
    bool *other = calloc(g->num_tensors + 1, sizeof(bool));
    *out_names = calloc(g->num_tensors + 1, sizeof(char *));
    if (!*out_mask || !fp32 || !other || !*out_names) {
        free(fp32);
        free(other);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory saving the engine");
    }
    tci_status st = plan_fp32_nodes(g, options, fp32);
    for (size_t i = 0; st == TCI_OK && i < g->num_nodes; i++) {
        const ir_node *n = g->nodes[i];
        /* the plan folds a BatchNormalization into its convolution (graph_to_save did) */
        bool weights = !fp32[i] && (is_op(n, "Conv") || is_op(n, "ConvTranspose") ||
                                    is_op(n, "Gemm") || is_op(n, "MatMul"));
        for (int k = 0; k < n->num_inputs; k++) {
            if (!n->inputs[k]) continue;
            if (weights && k == 1) (*out_mask)[n->inputs[k]->index] = true;
            else other[n->inputs[k]->index] = true;
        }
    }
    size_t count = 0;
    for (size_t t = 0; t < g->num_tensors; t++) {
        const ir_tensor *x = g->tensors[t];
        bool ok = (*out_mask)[t] && !other[t] && x->data && !x->producer && !x->is_graph_input &&
                  !x->is_graph_output && x->dtype == TCI_DTYPE_FLOAT && x->name && x->name[0];
        (*out_mask)[t] = ok;
        if (ok) (*out_names)[count++] = (char *)x->name;
    }
    free(fp32);
    free(other);
    return st;
}

/* A constant of g named after base and suffix (made unique), viewing data. */
static tci_status add_constant(ir_graph *g, const char *base, const char *suffix, int rank,
                               const int64_t *dims, const void *data, ir_tensor **out) {
    char name[512];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    for (int i = 1; ir_graph_find_tensor(g, name); i++)
        snprintf(name, sizeof name, "%s%s_%d", base, suffix, i);
    TRY_STATUS(ir_graph_add_tensor(g, name, out));
    (*out)->dtype = TCI_DTYPE_FLOAT;
    (*out)->rank = rank;
    for (int i = 0; i < TCI_MAX_RANK; i++) (*out)->dims[i] = i < rank ? dims[i] : -1;
    (*out)->data = (void *)data;
    return TCI_OK;
}

/* The graph an engine file stores: the engine's, with every BatchNormalization the plan folded
 * into a convolution folded for good. The convolution takes the plan's folded weights and bias
 * (its very values) and writes the BatchNormalization's output; a loaded engine then plans the
 * same steps with the same numbers, and those weights too can be stored in fp16. The copy
 * shares the engine graph's and plan's data; *dropped lists the removed nodes' names. */
static tci_status graph_to_save(const tci_engine *engine, ir_graph **out, const char ***dropped) {
    const plan *p = exec_gpu_engine_plan(engine->gpu);
    ir_graph *g = NULL;
    TRY_STATUS(ir_graph_clone(engine->graph, &g));
    bool *drop = calloc(g->num_nodes + 1, sizeof(bool));
    *dropped = calloc(g->num_nodes + 1, sizeof(char *));
    tci_status st = drop && *dropped ? TCI_OK : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    size_t num_dropped = 0;
    for (int i = 0; st == TCI_OK && i < p->num_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (s->kind != PLAN_STEP_CONV || !strstr(s->label, "+BatchNormalization")) continue;
        /* the clone's nodes are in the engine graph's order */
        size_t at = 0, bn_at = 0;
        while (at < g->num_nodes && engine->graph->nodes[at] != s->node) at++;
        ir_node *conv = at < g->num_nodes ? g->nodes[at] : NULL, *bn = NULL;
        for (size_t n = 0; conv && n < g->num_nodes && conv->num_outputs == 1; n++)
            if (is_op(g->nodes[n], "BatchNormalization") &&
                g->nodes[n]->inputs[0] == conv->outputs[0]) {
                bn = g->nodes[n];
                bn_at = n;
            }
        if (!bn || bn->num_outputs != 1) {
            st = status_error(TCI_ERR_INTERNAL, "saving: the BatchNormalization folded into '%s' "
                           "was not found", s->node->name);
            break;
        }
        const plan_tensor *pw = &p->tensors[s->inputs[1]], *pb = &p->tensors[s->inputs[2]];
        ir_tensor **in = arena_alloc(g->arena, 3 * sizeof *in);
        if (!in) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        if (st == TCI_OK) {
            in[0] = conv->inputs[0];
            st = add_constant(g, conv->name, ".folded_W", pw->rank, pw->dims, pw->host_data, &in[1]);
        }
        if (st == TCI_OK)
            st = add_constant(g, conv->name, ".folded_B", pb->rank, pb->dims, pb->host_data, &in[2]);
        if (st != TCI_OK) break;
        conv->inputs = in;
        conv->num_inputs = 3;
        conv->outputs[0] = bn->outputs[0];
        conv->outputs[0]->producer = conv;
        drop[bn_at] = true;
        (*dropped)[num_dropped++] = bn->name;
    }
    size_t kept = 0;
    for (size_t n = 0; st == TCI_OK && n < g->num_nodes; n++)
        if (!drop[n]) g->nodes[kept++] = g->nodes[n];
    if (st == TCI_OK) g->num_nodes = kept;
    free(drop);
    if (st != TCI_OK) {
        ir_graph_destroy(g);
        return st;
    }
    *out = g;
    return TCI_OK;
}
#endif

tci_status tci_engine_save(const tci_engine *engine, const char *path) {
    if (!engine || !path) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
#if TCI_HAVE_CUDA
    if (engine->gpu) {
        char machine[512];
        engine_file f = {0};
        bool *mask = NULL;
        char producer[64];
        producer_name(producer, sizeof producer);
        f.machine = machine;
        f.producer = producer;
        f.precision = (int32_t)engine->plan_options.precision;
        f.kept_precision = (int32_t)engine->plan_options.kept_precision;
        f.kernels = (int32_t)engine->kernels;
        ir_graph *g = NULL;
        const char **dropped = NULL;
        char **fp32_layers = NULL;
        /* the model of the engine's device: a file written here loads on any device of it */
        api_device scope;
        tci_status st = api_device_enter(engine->device, &scope);
        if (st == TCI_OK) st = api_device_leave(&scope, exec_gpu_machine(machine, sizeof machine));
        if (st == TCI_OK) st = graph_to_save(engine, &g, &dropped);
        /* fp32 layers naming a folded BatchNormalization (or a pattern matching only such
         * nodes): its convolution decided already, and the saved graph lacks the node */
        if (st == TCI_OK) st = copy_strings((const char *const *)engine->fp32_layers, &fp32_layers);
        size_t kept = 0, num_fp32 = 0;
        while (fp32_layers && fp32_layers[num_fp32]) num_fp32++;
        /* TCI_PRECISION_AUTO's layers are the last ones: count those kept */
        f.has_auto = !(engine->auto_error < 0); /* -1: not built by it; NaN is an error reached */
        f.auto_error = engine->auto_error;
        f.auto_target = engine->auto_target;
        for (size_t i = 0; st == TCI_OK && fp32_layers && fp32_layers[i]; i++) {
            bool gone = false;
            for (const char **d = dropped; *d && !gone; d++) gone = strcmp(*d, fp32_layers[i]) == 0;
            if (!gone && strpbrk(fp32_layers[i], "*?[")) {
                gone = true;
                for (size_t n = 0; n < g->num_nodes && gone; n++)
                    gone = !plan_fp32_selects(fp32_layers[i], g->nodes[n]);
            }
            if (gone) free(fp32_layers[i]);
            else fp32_layers[kept++] = fp32_layers[i];
            if (!gone && i >= num_fp32 - engine->num_auto_fp32) f.num_auto_fp32++;
        }
        if (fp32_layers) fp32_layers[kept] = NULL;
        f.fp32_layers = fp32_layers;
        /* bf16 engines keep fp32 weights: fp16 then bf16 would round them twice */
        if (st == TCI_OK && engine->plan_options.precision != TCI_PRECISION_BF16)
            st = fp16_weights(g, &engine->plan_options, &mask, &f.fp16_tensors);
        if (st == TCI_OK) st = onnx_save_model(g, mask, &f.model, &f.model_size);
        if (st == TCI_OK) st = exec_gpu_engine_choices(engine->gpu, &f.choices);
        if (st == TCI_OK) st = engine_file_write(path, &f);
        for (char **l = fp32_layers; l && *l; l++) free(*l);
        free(fp32_layers);
        free(dropped);
        ir_graph_destroy(g);
        free(mask);
        free(f.fp16_tensors);
        free(f.model);
        free(f.choices);
        return st;
    }
#endif
    (void)path;
    return status_error(TCI_ERR_INVALID_ARGUMENT, "only GPU engines are saved; this one %s",
                     engine->plan_only ? "is a plan without a GPU (plan_only)" : "runs on the CPU");
}

tci_status tci_engine_load(const char *path, const tci_engine_options *options,
                           tci_engine **out_engine) {
    if (!out_engine) return status_error(TCI_ERR_INVALID_ARGUMENT, "out_engine is NULL");
    *out_engine = NULL;
    if (!path) return status_error(TCI_ERR_INVALID_ARGUMENT, "path is NULL");
    tci_engine_options given;
    api_log log = options_log(options);
    TRY_STATUS(api_log_failure(&log, api_read_options(options, &given)));
    if (given.num_shapes || given.plan_only || given.mark_all_outputs ||
        given.precision != TCI_PRECISION_FP16 || given.fp32_layers ||
        given.kernels != TCI_KERNELS_AUTO || given.timing_cache || given.calibration_inputs ||
        given.num_calibration_inputs || given.accuracy_target != 0 ||
        given.kept_precision != TCI_PRECISION_FP32)
        return api_log_failure(
            &log, status_error(TCI_ERR_INVALID_ARGUMENT,
                               "%s: an engine file fixes the shapes, precision, fp32 layers (and "
                               "their kept precision) and kernels it was built with (no timing "
                               "cache or calibration inputs either): of tci_engine_options only "
                               "no_cuda_graph, device, the log and the progress fields may be "
                               "set",
                               path));
    engine_file f;
    TRY_STATUS(api_log_failure(&log, engine_file_read(path, &f)));
#if TCI_HAVE_CUDA
    char machine[512], producer[64];
    producer_name(producer, sizeof producer);
    /* the file's GPU model against the one of the device it is loaded on */
    api_device scope = {-1, -1};
    tci_status st = tci_gpu_count(NULL, 0) > 0
                        ? api_device_check(given.device)
                        : status_error(TCI_ERR_NO_DEVICE, "no CUDA GPU is available here to run "
                                                       "the engine file %s", path);
    if (st == TCI_OK) st = api_device_enter(given.device, &scope);
    if (st == TCI_OK) st = exec_gpu_machine(machine, sizeof machine);
    if (st == TCI_OK && strcmp(f.producer, producer) != 0)
        st = status_error(TCI_ERR_UNSUPPORTED,
                       "engine file %s was written by %s; this is %s: rebuild it from the ONNX "
                       "model",
                       path, f.producer, producer);
    if (st == TCI_OK && strcmp(f.machine, machine) != 0) {
        for (char *c = f.machine; *c; c++) *c = *c == '\t' ? ' ' : *c; /* fields, for reading */
        for (char *c = machine; *c; c++) *c = *c == '\t' ? ' ' : *c;
        st = status_error(TCI_ERR_UNSUPPORTED,
                       "engine file %s was built for %s; device %d here is %s: rebuild it "
                       "from the ONNX model",
                       path, f.machine, given.device, machine);
    }
    ir_graph *g = NULL;
    bool checked = st == TCI_OK; /* later errors come from the graph, and get the file's name */
    if (st == TCI_OK) st = onnx_load_model(f.model, f.model_size, NULL, &g);
    if (st == TCI_OK) st = onnx_widen_fp16(g, (const char *const *)f.fp16_tensors);
    if (st == TCI_OK) {
        tci_engine_options o;
        tci_engine_options_init(&o);
        o.backend = TCI_BACKEND_GPU;
        o.no_cuda_graph = given.no_cuda_graph;
        o.log_fn = given.log_fn;
        o.log_user = given.log_user;
        o.log_level = given.log_level;
        o.progress_fn = given.progress_fn;
        o.progress_user = given.progress_user;
        o.device = given.device;
        o.precision = (tci_precision)f.precision;
        o.kept_precision = (tci_precision)f.kept_precision;
        o.kernels = (tci_kernels)f.kernels;
        o.fp32_layers = (const char *const *)f.fp32_layers;
        st = api_finish_create(g, &o, f.choices, out_engine); /* owns g, also on failure */
        g = NULL;
    }
    if (st == TCI_OK && f.has_auto) {
        /* what TCI_PRECISION_AUTO chose, as the build that wrote the file reported it */
        (*out_engine)->num_auto_fp32 = f.num_auto_fp32;
        (*out_engine)->auto_error = f.auto_error;
        (*out_engine)->auto_target = f.auto_target;
    }
    ir_graph_destroy(g);
    engine_file_free(&f);
    st = api_device_leave(&scope, st);
    if (st != TCI_OK && checked) status_error_prefix(st, "%s", path);
    return api_log_failure(&log, st);
#else
    engine_file_free(&f);
    return api_log_failure(&log, status_error(TCI_ERR_NO_DEVICE, "this build has no CUDA "
                                                                 "support: engine files run on "
                                                                 "the GPU"));
#endif
}

void tci_engine_destroy(tci_engine *engine) {
    if (!engine) return;
#if TCI_HAVE_CUDA
    api_device scope;
    /* a device that cannot be made current: freed from the caller's, as CUDA allows */
    tci_status st = api_device_enter(engine->device, &scope);
    exec_gpu_engine_destroy(engine->gpu);
    if (st == TCI_OK) (void)api_device_leave(&scope, TCI_OK);
#endif
    plan_destroy(engine->plan_only);
    ir_graph_destroy(engine->pristine);
    free(engine->dynamic_dims);
    for (char **s = engine->fp32_layers; s && *s; s++) free(*s);
    free(engine->fp32_layers);
    ir_graph_destroy(engine->graph);
    ir_graph_destroy(engine->clone_source); /* after the clones sharing its data */
    free(engine);
}

tci_status tci_engine_fp32_layers(const tci_engine *engine, tci_fp32_layer_fn fn, void *user) {
    if (!engine || !fn) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    if (engine->backend != TCI_BACKEND_GPU) return TCI_OK;
    size_t n = 0;
    while (engine->fp32_layers && engine->fp32_layers[n]) n++;
    for (size_t i = 0; i < n; i++)
        fn(engine->fp32_layers[i], i >= n - engine->num_auto_fp32, user);
    return TCI_OK;
}

/* TCI_ERR_INVALID_ARGUMENT unless TCI_PRECISION_AUTO built the engine (here, or the one an
 * engine file was written from). */
static tci_status check_auto(const tci_engine *engine, const void *out, const char *what) {
    if (!engine || !out) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    if (engine->auto_error < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "the engine was not built with TCI_PRECISION_AUTO: it has no %s",
                            what);
    return TCI_OK;
}

tci_status tci_engine_auto_error(const tci_engine *engine, double *out_relative_l2) {
    TRY_STATUS(check_auto(engine, out_relative_l2, "measured error against the fp32 engine"));
    *out_relative_l2 = engine->auto_error;
    return TCI_OK;
}

tci_status tci_engine_auto_target(const tci_engine *engine, double *out_target) {
    TRY_STATUS(check_auto(engine, out_target, "accuracy target"));
    *out_target = engine->auto_target;
    return TCI_OK;
}

tci_status tci_engine_precision(const tci_engine *engine, tci_precision *out_precision,
                                tci_precision *out_kept) {
    if (!engine) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    if (engine->backend != TCI_BACKEND_GPU)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "a CPU engine runs the fp32 reference: it has no GPU precision");
    if (out_precision) *out_precision = engine->plan_options.precision;
    if (out_kept) *out_kept = engine->plan_options.kept_precision;
    return TCI_OK;
}

size_t tci_engine_input_count(const tci_engine *engine) {
    return engine ? engine->graph->num_inputs : 0;
}

size_t tci_engine_output_count(const tci_engine *engine) {
    return engine ? engine->graph->num_outputs : 0;
}

static tci_status fill_info(const ir_tensor *t, tci_tensor_info *out) {
    TRY_STATUS(api_check_size(out->struct_size, API_MIN_TENSOR_INFO, "tci_tensor_info"));
    tci_tensor_info info;
    tci_tensor_info_init(&info);
    info.name = t->name;
    info.dtype = t->dtype;
    info.rank = t->rank;
    for (int i = 0; i < TCI_MAX_RANK; i++) {
        info.dims[i] = t->dims[i];
        info.dim_names[i] = t->dims[i] < 0 ? t->dim_names[i] : NULL;
    }
    api_copy_out(out, &info, sizeof info);
    return TCI_OK;
}

tci_status tci_engine_input_info(const tci_engine *engine, size_t index, tci_tensor_info *out_info) {
    if (!engine || !out_info || index >= engine->graph->num_inputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "no input %zu", index);
    return fill_info(engine->graph->inputs[index], out_info);
}

tci_status tci_engine_output_info(const tci_engine *engine, size_t index,
                                  tci_tensor_info *out_info) {
    if (!engine || !out_info || index >= engine->graph->num_outputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "no output %zu", index);
    return fill_info(engine->graph->outputs[index], out_info);
}

/* The index of the tensor called name among list, or an error listing the names there are. */
static tci_status find_by_name(ir_tensor *const *list, size_t n, const char *name,
                               const char *what, size_t *out_index) {
    if (!out_index) return status_error(TCI_ERR_INVALID_ARGUMENT, "out_index is NULL");
    for (size_t i = 0; name && i < n; i++)
        if (list[i]->name && strcmp(list[i]->name, name) == 0) {
            *out_index = i;
            return TCI_OK;
        }
    char names[1024];
    size_t pos = 0;
    names[0] = '\0';
    for (size_t i = 0; i < n && pos < sizeof names; i++) {
        int w = snprintf(names + pos, sizeof names - pos, "%s'%s'", i ? ", " : "", list[i]->name);
        if (w < 0) break;
        pos += (size_t)w;
    }
    if (pos >= sizeof names) memcpy(names + sizeof names - 5, "...", 4);
    return status_error(TCI_ERR_INVALID_ARGUMENT, "the engine has no %s named '%s'; its %ss: %s",
                        what, name ? name : "(null)", what, n ? names : "none");
}

tci_status tci_engine_input_index(const tci_engine *engine, const char *name, size_t *out_index) {
    if (!engine) return status_error(TCI_ERR_INVALID_ARGUMENT, "engine is NULL");
    return find_by_name(engine->graph->inputs, engine->graph->num_inputs, name, "input", out_index);
}

tci_status tci_engine_output_index(const tci_engine *engine, const char *name, size_t *out_index) {
    if (!engine) return status_error(TCI_ERR_INVALID_ARGUMENT, "engine is NULL");
    return find_by_name(engine->graph->outputs, engine->graph->num_outputs, name, "output",
                        out_index);
}

tci_status tci_engine_stats_get(const tci_engine *engine, tci_engine_stats *out) {
    if (!engine || !out) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    TRY_STATUS(api_check_size(out->struct_size, API_MIN_ENGINE_STATS, "tci_engine_stats"));
    tci_engine_stats stats, *out_stats = &stats;
    tci_engine_stats_init(&stats);
    const ir_graph *g = engine->graph;
    out_stats->num_nodes = g->num_nodes;
    /* count each constant a remaining node reads, once */
    for (size_t t = 0; t < g->num_tensors; t++) {
        const ir_tensor *x = g->tensors[t];
        if (!x->data) continue;
        bool used = x->is_graph_output;
        for (size_t i = 0; i < g->num_nodes && !used; i++)
            for (int k = 0; k < g->nodes[i]->num_inputs; k++)
                if (g->nodes[i]->inputs[k] == x) used = true;
        if (!used) continue;
        int64_t count;
        if (ir_count_elements(x->rank, x->dims, &count) != TCI_OK || count < 0) continue;
        out_stats->num_initializers++;
        out_stats->parameter_bytes += count * (int64_t)tci_dtype_size(x->dtype);
        if (x->dtype == TCI_DTYPE_FLOAT || x->dtype == TCI_DTYPE_FLOAT16 ||
            x->dtype == TCI_DTYPE_DOUBLE)
            out_stats->num_parameters += count;
    }
    api_copy_out(out, &stats, sizeof stats);
    return TCI_OK;
}

tci_status tci_engine_op_histogram(const tci_engine *engine, tci_op_count_fn fn, void *user) {
    if (!engine || !fn) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    const ir_graph *g = engine->graph;
    for (size_t i = 0; i < g->num_nodes; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(g->nodes[j]->op_type, g->nodes[i]->op_type) == 0;
        if (seen) continue;
        size_t count = 0;
        for (size_t j = i; j < g->num_nodes; j++)
            count += strcmp(g->nodes[j]->op_type, g->nodes[i]->op_type) == 0;
        fn(g->nodes[i]->op_type, count, user);
    }
    return TCI_OK;
}

typedef struct list_ops_state {
    tci_op_info_fn fn;
    void *user;
} list_ops_state;

static void list_one(const op_desc *d, void *user) {
    const list_ops_state *s = user;
    /* versions run up to the newest known opset by the registry's rule */
    s->fn(d->op_type, d->versions[0], IR_MAX_KNOWN_OPSET, d->gpu_lower != NULL, s->user);
}

void tci_list_ops(tci_op_info_fn fn, void *user) {
    list_ops_state s = {fn, user};
    op_registry_each(list_one, &s);
}
tci_status tci_engine_gpu_report(const tci_engine *engine, tci_gpu_report *out) {
    if (!engine || !out) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    TRY_STATUS(api_check_size(out->struct_size, API_MIN_GPU_REPORT, "tci_gpu_report"));
    tci_gpu_report report, *out_report = &report;
    tci_gpu_report_init(&report);
    const plan *p = engine_plan(engine);
    if (!p) return status_error(TCI_ERR_INVALID_ARGUMENT, "not a GPU engine");
    out_report->num_steps = (size_t)p->num_steps;
    out_report->weight_bytes = p->weight_bytes;
    out_report->arena_bytes = p->arena_bytes;
    out_report->naive_activation_bytes = p->naive_bytes;
    out_report->layout_conversions = (size_t)p->num_layout_conversions;
    out_report->views = (size_t)p->num_views;
#if TCI_HAVE_CUDA
    if (engine->gpu) {
        int timed = 0, cached = 0;
        exec_gpu_engine_tuning(engine->gpu, &timed, &cached);
        out_report->layers_timed = (size_t)timed;
        out_report->layers_cached = (size_t)cached;
    }
#endif
    api_copy_out(out, &report, sizeof report);
    return TCI_OK;
}

tci_status tci_engine_layers(const tci_engine *engine, tci_layer_fn fn, void *user) {
    if (!engine || !fn) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    const plan *p = engine_plan(engine);
    if (!p) return status_error(TCI_ERR_INVALID_ARGUMENT, "not a GPU engine");
    for (int i = 0; i < p->num_steps; i++) {
        const plan_step *s = &p->steps[i];
        const char *layout = "-";
        if (s->num_outputs) {
            const plan_tensor *y = &p->tensors[s->outputs[0]];
            bool fp32 = y->dtype == TCI_DTYPE_FLOAT, bf16 = y->dtype == TCI_DTYPE_BFLOAT16;
            layout = y->layout == PLAN_LAYOUT_NHWC8
                         ? (fp32 ? "NHWC8 fp32" : bf16 ? "NHWC8 bf16" : "NHWC8")
                         : (fp32 ? "dense fp32" : bf16 ? "dense bf16" : "dense");
        }
        fn((size_t)i, s->node->name, s->label, step_kernel(engine, i), layout, user);
    }
    return TCI_OK;
}
