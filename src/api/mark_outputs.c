/* The per-layer outputs of tci_engine_options.mark_all_outputs: every node's output before the
 * GPU passes (unfused), or every step's output of the GPU plan as it ships (fused); and the
 * nodes an engine output is the result of (tci_engine_output_nodes). */
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

/* Appends the tensors of g selected in mark (by tensor index, in the order of the nodes that
 * compute them) to the graph outputs. */
static tci_status append_outputs(ir_graph *g, const bool *mark) {
    size_t n = g->num_outputs;
    ir_tensor **outputs = arena_alloc(g->arena, (n + g->num_nodes + 1) * sizeof *outputs);
    if (!outputs) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory marking outputs");
    for (size_t i = 0; i < n; i++) outputs[i] = g->outputs[i];
    for (size_t i = 0; i < g->num_nodes; i++) {
        const ir_node *node = g->nodes[i];
        ir_tensor *t = node->epilogue && node->epilogue->output ? node->epilogue->output
                       : node->num_outputs                      ? node->outputs[0]
                                                                : NULL;
        if (node->fused_into || !t || !mark[t->index] || t->is_graph_output) continue;
        t->is_graph_output = true;
        outputs[n++] = t;
    }
    g->outputs = outputs;
    g->num_outputs = n;
    return TCI_OK;
}

static bool has_name(const ir_tensor *t) { return t && t->name && t->name[0]; }

tci_status api_mark_all_outputs(ir_graph *g) {
    bool *mark = calloc(g->num_tensors + 1, sizeof *mark);
    if (!mark) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory marking outputs");
    for (size_t i = 0; i < g->num_nodes; i++) {
        const ir_tensor *t = g->nodes[i]->num_outputs ? g->nodes[i]->outputs[0] : NULL;
        if (has_name(t)) mark[t->index] = true;
    }
    tci_status st = append_outputs(g, mark);
    free(mark);
    return st;
}

static int root_of(const plan *p, int t) {
    return p->tensors[t].alias_of >= 0 ? p->tensors[t].alias_of : t;
}

/* Marks in out (by IR tensor index of g) the named tensors whose values a step of p writes,
 * directly or as a view of what it writes. */
static tci_status computed_tensors(const ir_graph *g, const plan *p, bool *out) {
    bool *written = calloc((size_t)p->num_tensors + 1, sizeof *written);
    if (!written) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory marking outputs");
    for (int s = 0; s < p->num_steps; s++)
        for (int k = 0; k < p->steps[s].num_outputs; k++)
            if (p->steps[s].outputs[k] >= 0) written[root_of(p, p->steps[s].outputs[k])] = true;
    for (int i = 0; i < p->num_tensors; i++) {
        const plan_tensor *pt = &p->tensors[i];
        const ir_tensor *t = pt->name && written[root_of(p, i)]
                                 ? ir_graph_find_tensor(g, pt->name)
                                 : NULL;
        if (t) out[t->index] = true;
    }
    free(written);
    return TCI_OK;
}

/* -1 where the steps of a and b are the same (kind, first node, fused chain, and the layout,
 * dtype and shape of what they write), else the first step that differs. */
static int first_difference(const plan *a, const plan *b) {
    int n = a->num_steps < b->num_steps ? a->num_steps : b->num_steps;
    for (int s = 0; s < n; s++) {
        const plan_step *x = &a->steps[s], *y = &b->steps[s];
        bool same = x->kind == y->kind && x->node == y->node &&
                    strcmp(x->label ? x->label : "", y->label ? y->label : "") == 0 &&
                    x->num_inputs == y->num_inputs && x->num_outputs == y->num_outputs;
        for (int k = 0; same && k < x->num_outputs; k++) {
            if ((x->outputs[k] < 0) != (y->outputs[k] < 0)) same = false;
            if (!same || x->outputs[k] < 0) continue;
            const plan_tensor *u = &a->tensors[x->outputs[k]], *v = &b->tensors[y->outputs[k]];
            same = u->layout == v->layout && u->dtype == v->dtype && u->rank == v->rank &&
                   memcmp(u->dims, v->dims, sizeof u->dims) == 0;
        }
        if (!same) return s;
    }
    return a->num_steps == b->num_steps ? -1 : n;
}

tci_status api_plan_as_shipped(ir_graph *g, const plan_options *options, plan **out_plan) {
    *out_plan = NULL;
    plan *shipped = NULL, *marked = NULL;
    TRY_STATUS(plan_build(g, options, &shipped));
    bool *mark = calloc(g->num_tensors + 1, sizeof *mark);
    tci_status st = mark ? computed_tensors(g, shipped, mark)
                         : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory marking outputs");
    /* outputs keep their ONNX names, matched by name with the CPU reference's: a tensor whose
     * values a GPU pass changed would be compared with other values */
    for (size_t i = 0; st == TCI_OK && i < g->num_tensors; i++)
        if (!has_name(g->tensors[i]) || g->tensors[i]->rescaled) mark[i] = false;
    if (st == TCI_OK) st = append_outputs(g, mark);
    if (st == TCI_OK) st = plan_build(g, options, &marked);
    int at = st == TCI_OK ? first_difference(shipped, marked) : -1;
    if (at >= 0) {
        const plan_step *s = at < shipped->num_steps ? &shipped->steps[at] : &marked->steps[at];
        st = status_error(TCI_ERR_INTERNAL,
                          "marking the steps' outputs changed the GPU plan at step %d ('%s', %s; "
                          "%d steps built, %d as shipped)",
                          at, s->node ? s->node->name : "?", s->label ? s->label : "?",
                          marked->num_steps, shipped->num_steps);
    }
    free(mark);
    plan_destroy(shipped);
    if (st != TCI_OK) {
        plan_destroy(marked);
        return st;
    }
    *out_plan = marked;
    return TCI_OK;
}

tci_status tci_engine_output_nodes(const tci_engine *engine, size_t index, tci_node_fn fn,
                                   void *user) {
    if (!engine || !fn) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    const ir_graph *g = engine->graph;
    if (index >= g->num_outputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "no output %zu (the engine has %zu)", index,
                            g->num_outputs);
    const ir_node *p = g->outputs[index]->producer;
    const ir_node *step = p && p->fused_into ? p->fused_into : p;
    for (size_t i = 0; step && i < g->num_nodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n == step || n->fused_into == step) fn(n->name, n->op_type, user);
    }
    return TCI_OK;
}
