/* The shapes a GPU engine runs below the ones it was built for: which dims of each input may be
 * smaller (the leading one, the batch, and every dim the model leaves symbolic), the check of a
 * run's inputs against them, and the re-plan of the graph at such a shape (a shape variant). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "graph/passes.h"

tci_status api_dynamic_dims(const ir_graph *g, unsigned **out) {
    *out = calloc(g->num_inputs + 1, sizeof **out);
    if (!*out) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < g->num_inputs; i++) {
        const ir_tensor *t = g->inputs[i];
        unsigned mask = 1u; /* the batch: checked by the re-plan, as it always was */
        for (int d = 1; d < TCI_MAX_RANK; d++)
            if (t->rank < 0 || (d < t->rank && t->dims[d] < 0)) mask |= 1u << d;
        (*out)[i] = mask;
    }
    return TCI_OK;
}

tci_status api_check_run_shapes(const tci_engine *e, const tci_tensor *inputs, size_t n) {
    const ir_graph *g = e->graph;
    char got[128], built[128];
    for (size_t i = 0; i < n && i < g->num_inputs; i++) {
        const ir_tensor *t = g->inputs[i];
        const tci_tensor *in = &inputs[i];
        if (in->rank != t->rank)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                                "input '%s' has rank %d (shape %s); the engine was built for "
                                "rank %d (%s)",
                                t->name, in->rank, ir_format_dims(in->rank, in->dims, got, sizeof got),
                                t->rank, ir_format_dims(t->rank, t->dims, built, sizeof built));
        unsigned dynamic = e->dynamic_dims ? e->dynamic_dims[i] : 1u;
        for (int d = 0; d < t->rank; d++) {
            int64_t v = in->dims[d], max = t->dims[d];
            if (v == max) continue;
            if (!(dynamic >> d & 1u))
                return status_error(TCI_ERR_INVALID_ARGUMENT,
                                    "input '%s' is %s: axis %d is %" PRId64 ", but the model fixes "
                                    "it at %" PRId64 " (only the leading dim and the model's "
                                    "symbolic dims may be smaller than built)",
                                    t->name, ir_format_dims(in->rank, in->dims, got, sizeof got),
                                    d, v, max);
            if (v > max)
                return status_error(TCI_ERR_INVALID_ARGUMENT,
                                    "input '%s' is %s: axis %d is %" PRId64 ", more than the %" PRId64
                                    " the engine was built for (built %s; build for the largest "
                                    "shape to run with tci_engine_options.shapes)",
                                    t->name, ir_format_dims(in->rank, in->dims, got, sizeof got),
                                    d, v, max, ir_format_dims(t->rank, t->dims, built, sizeof built));
            if (v < 1)
                return status_error(TCI_ERR_INVALID_ARGUMENT,
                                    "input '%s' is %s: axis %d is %" PRId64 "; a dim below the "
                                    "built %" PRId64 " must be at least 1",
                                    t->name, ir_format_dims(in->rank, in->dims, got, sizeof got),
                                    d, v, max);
        }
    }
    return TCI_OK;
}

/* Sets the dims of g's inputs to those of the plan's inputs (dims: built->num_inputs rows of
 * TCI_MAX_RANK; NULL: the built plan's own). */
static tci_status set_input_dims(ir_graph *g, const plan *built, const int64_t *dims) {
    for (int i = 0; i < built->num_inputs; i++) {
        const plan_tensor *pt = &built->tensors[built->input_tensors[i]];
        ir_tensor *t = ir_graph_find_tensor(g, pt->name);
        if (!t || !t->is_graph_input || t->rank != pt->rank)
            return status_error(TCI_ERR_INTERNAL, "input '%s' is missing from the graph copy",
                                pt->name);
        for (int d = 0; d < pt->rank; d++)
            t->dims[d] = dims ? dims[(size_t)i * TCI_MAX_RANK + (size_t)d] : pt->dims[d];
    }
    return TCI_OK;
}

/* A copy of the pristine graph at dims (see set_input_dims), optimised. */
static tci_status optimised_copy(const tci_engine *e, const plan *built, const int64_t *dims,
                                 ir_graph **out) {
    ir_graph *g = NULL;
    tci_status st = ir_graph_clone(e->pristine, &g);
    if (st == TCI_OK) st = set_input_dims(g, built, dims);
    if (st == TCI_OK) st = pass_optimize(g);
    if (st != TCI_OK) {
        ir_graph_destroy(g);
        g = NULL;
    }
    *out = g;
    return st;
}

tci_status api_replan(void *user, const plan *built, const int64_t *dims, ir_graph **out_graph,
                      plan **out_plan) {
    const tci_engine *e = user;
    *out_graph = NULL;
    *out_plan = NULL;
    if (!e->pristine)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "this engine keeps no graph to plan other shapes from (engines that "
                            "mark every layer as an output run only the shape they were built for)");
    ir_graph *g = NULL, *ref = NULL;
    plan *p = NULL;
    tci_status st = optimised_copy(e, built, dims, &g);
    /* the graph the built plan came from, fused for the GPU: the dims of length 1 only at this
     * shape, and the attention folds, as there, so that both plans have the same steps */
    if (st == TCI_OK) st = optimised_copy(e, built, NULL, &ref);
    if (st == TCI_OK) st = api_mark_kept_nodes(ref, &e->plan_options);
    if (st == TCI_OK) st = api_mark_kept_nodes(g, &e->plan_options);
    if (st == TCI_OK) st = pass_prepare_for_gpu(ref);
    if (st == TCI_OK) {
        pass_mark_variant_dims(g, ref);
        g->like = ref;
        st = pass_prepare_for_gpu(g);
        if (st == TCI_OK) st = plan_build(g, &e->plan_options, &p);
        g->like = NULL;
    }
    ir_graph_destroy(ref);
    if (st != TCI_OK) {
        ir_graph_destroy(g);
        return st;
    }
    *out_graph = g;
    *out_plan = p;
    return TCI_OK;
}
