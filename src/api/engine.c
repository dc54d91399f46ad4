/* The public engine and context: load, optimise, and run through the chosen executor. */
#include <stdlib.h>
#include <string.h>

#include "graph/exec_cpu.h"
#include "graph/passes.h"
#include "layers/op.h"
#include "onnx/loader.h"

struct tci_engine {
    ir_graph *graph;
    tci_backend backend;
};

struct tci_context {
    const tci_engine *engine;
    exec_cpu *cpu;
};

void tci_engine_options_init(tci_engine_options *options) {
    memset(options, 0, sizeof *options);
    options->backend = TCI_BACKEND_CPU;
}

static tci_status apply_shape_override(ir_graph *g, const tci_shape_override *o) {
    char want[128], got[128];
    ir_tensor *t = NULL;
    for (size_t i = 0; i < g->num_inputs; i++)
        if (o->name && strcmp(g->inputs[i]->name, o->name) == 0) t = g->inputs[i];
    if (!t)
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "shape given for '%s', which is not a model input",
                         o->name ? o->name : "(null)");
    if (o->rank < 0 || o->rank > TCI_MAX_RANK)
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "shape for '%s' has rank %d", t->name, o->rank);
    bool ok = t->rank < 0 || t->rank == o->rank;
    for (int i = 0; ok && i < o->rank; i++)
        if (o->dims[i] < 0 || (t->rank >= 0 && t->dims[i] >= 0 && t->dims[i] != o->dims[i]))
            ok = false;
    if (!ok)
        return tci_error(TCI_ERR_INVALID_ARGUMENT,
                         "shape %s for input '%s' does not fit the model's %s (only symbolic dims "
                         "may be set)",
                         ir_format_dims(o->rank, o->dims, got, sizeof got), t->name,
                         ir_format_dims(t->rank, t->dims, want, sizeof want));
    t->rank = o->rank;
    for (int i = 0; i < TCI_MAX_RANK; i++) t->dims[i] = i < o->rank ? o->dims[i] : -1;
    return TCI_OK;
}

static tci_status build(ir_graph *g, const tci_engine_options *options) {
    for (size_t i = 0; i < options->num_shapes; i++)
        TCI_TRY(apply_shape_override(g, &options->shapes[i]));
    for (size_t i = 0; i < g->num_inputs; i++) {
        const ir_tensor *t = g->inputs[i];
        if (t->dtype == TCI_DTYPE_UNDEFINED || t->rank < 0)
            return tci_error(TCI_ERR_INVALID_MODEL,
                             "input '%s' has no declared type or shape; give it with --shape",
                             t->name);
    }
    return pass_optimize(g);
}

static tci_status finish_create(ir_graph *g, const tci_engine_options *options,
                                tci_engine **out_engine) {
    tci_engine_options defaults;
    if (!options) {
        tci_engine_options_init(&defaults);
        options = &defaults;
    }
    tci_status st = TCI_OK;
    if (options->backend != TCI_BACKEND_CPU)
        st = tci_error(TCI_ERR_INVALID_ARGUMENT, "unknown backend %d", (int)options->backend);
    if (st == TCI_OK) st = build(g, options);
    tci_engine *e = NULL;
    if (st == TCI_OK) {
        e = calloc(1, sizeof *e);
        if (!e) st = tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating engine");
    }
    if (st != TCI_OK) {
        ir_graph_destroy(g);
        return st;
    }
    e->graph = g;
    e->backend = options->backend;
    *out_engine = e;
    return TCI_OK;
}

tci_status tci_engine_create_from_file(const char *path, const tci_engine_options *options,
                                       tci_engine **out_engine) {
    if (!out_engine) return tci_error(TCI_ERR_INVALID_ARGUMENT, "out_engine is NULL");
    *out_engine = NULL;
    if (!path) return tci_error(TCI_ERR_INVALID_ARGUMENT, "path is NULL");
    ir_graph *g = NULL;
    TCI_TRY(onnx_load_file(path, &g));
    tci_status st = finish_create(g, options, out_engine);
    if (st != TCI_OK) tci_error_prefix(st, "%s", path);
    return st;
}

tci_status tci_engine_create_from_memory(const void *bytes, size_t size, const char *base_dir,
                                         const tci_engine_options *options,
                                         tci_engine **out_engine) {
    if (!out_engine) return tci_error(TCI_ERR_INVALID_ARGUMENT, "out_engine is NULL");
    *out_engine = NULL;
    if (!bytes && size) return tci_error(TCI_ERR_INVALID_ARGUMENT, "bytes is NULL");
    ir_graph *g = NULL;
    TCI_TRY(onnx_load_model(bytes, size, base_dir, &g));
    return finish_create(g, options, out_engine);
}

void tci_engine_destroy(tci_engine *engine) {
    if (!engine) return;
    ir_graph_destroy(engine->graph);
    free(engine);
}

size_t tci_engine_input_count(const tci_engine *engine) {
    return engine ? engine->graph->num_inputs : 0;
}

size_t tci_engine_output_count(const tci_engine *engine) {
    return engine ? engine->graph->num_outputs : 0;
}

static void fill_info(const ir_tensor *t, tci_tensor_info *info) {
    memset(info, 0, sizeof *info);
    info->name = t->name;
    info->dtype = t->dtype;
    info->rank = t->rank;
    for (int i = 0; i < TCI_MAX_RANK; i++) {
        info->dims[i] = t->dims[i];
        info->dim_names[i] = t->dims[i] < 0 ? t->dim_names[i] : NULL;
    }
}

tci_status tci_engine_input_info(const tci_engine *engine, size_t index, tci_tensor_info *out_info) {
    if (!engine || !out_info || index >= engine->graph->num_inputs)
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "no input %zu", index);
    fill_info(engine->graph->inputs[index], out_info);
    return TCI_OK;
}

tci_status tci_engine_output_info(const tci_engine *engine, size_t index,
                                  tci_tensor_info *out_info) {
    if (!engine || !out_info || index >= engine->graph->num_outputs)
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "no output %zu", index);
    fill_info(engine->graph->outputs[index], out_info);
    return TCI_OK;
}

tci_status tci_engine_stats_get(const tci_engine *engine, tci_engine_stats *out_stats) {
    if (!engine || !out_stats) return tci_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    memset(out_stats, 0, sizeof *out_stats);
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
    return TCI_OK;
}

tci_status tci_engine_op_histogram(const tci_engine *engine, tci_op_count_fn fn, void *user) {
    if (!engine || !fn) return tci_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
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
    s->fn(d->op_type, d->versions[0], IR_MAX_KNOWN_OPSET, s->user);
}

void tci_list_ops(tci_op_info_fn fn, void *user) {
    list_ops_state s = {fn, user};
    op_registry_each(list_one, &s);
}

tci_status tci_context_create(const tci_engine *engine, tci_context **out_context) {
    if (!out_context) return tci_error(TCI_ERR_INVALID_ARGUMENT, "out_context is NULL");
    *out_context = NULL;
    if (!engine) return tci_error(TCI_ERR_INVALID_ARGUMENT, "engine is NULL");
    tci_context *c = calloc(1, sizeof *c);
    if (!c) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating context");
    c->engine = engine;
    tci_status st = exec_cpu_create(engine->graph, &c->cpu);
    if (st != TCI_OK) {
        free(c);
        return st;
    }
    *out_context = c;
    return TCI_OK;
}

void tci_context_destroy(tci_context *context) {
    if (!context) return;
    exec_cpu_destroy(context->cpu);
    free(context);
}

tci_status tci_context_run(tci_context *context, const tci_tensor *inputs, size_t num_inputs) {
    if (!context) return tci_error(TCI_ERR_INVALID_ARGUMENT, "context is NULL");
    if (num_inputs && !inputs) return tci_error(TCI_ERR_INVALID_ARGUMENT, "inputs is NULL");
    return exec_cpu_run(context->cpu, inputs, num_inputs);
}

tci_status tci_context_output(const tci_context *context, size_t index, tci_tensor *out_tensor) {
    if (!context || !out_tensor) return tci_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    if (index >= context->engine->graph->num_outputs)
        return tci_error(TCI_ERR_INVALID_ARGUMENT, "no output %zu", index);
    const tci_tensor *t = exec_cpu_output(context->cpu, index);
    if (!t->data) return tci_error(TCI_ERR_INVALID_ARGUMENT, "no run has produced outputs yet");
    *out_tensor = *t;
    out_tensor->name = context->engine->graph->outputs[index]->name;
    return TCI_OK;
}
