/* Shape inference and constant folding in one topological sweep: folding a node can make the
 * next node's shape known, so the two cannot run as separate passes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "layers/op.h"

/* Upper bound on a folded constant; beyond it the node stays in the graph and runs at run time,
 * so a ConstantOfShape of a huge activation does not bloat the engine. */
enum { FOLD_MAX_BYTES = 64 << 20 };

static bool shape_known(const ir_tensor *t) {
    if (t->rank < 0) return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) return false;
    return true;
}

static bool foldable(const ir_node *n) {
    if (n->desc->flags & OP_PASSTHROUGH) return false; /* removed by its own pass */
    for (int i = 0; i < n->num_inputs; i++) {
        const ir_tensor *t = n->inputs[i];
        if (!t || t->data) continue;
        if ((n->desc->flags & OP_FOLD_FROM_SHAPE) && i == 0 && shape_known(t)) continue;
        return false;
    }
    return true;
}

/* Merges the inferred shape into the tensor, keeping what a declaration already fixed. */
static tci_status merge_shape(const ir_node *n, ir_tensor *t, const tci_tensor *inferred) {
    if (inferred->rank < 0) {
        if (t->dtype == TCI_DTYPE_UNDEFINED) t->dtype = inferred->dtype;
        return TCI_OK;
    }
    /* where a declaration disagrees in rank, inference wins; where ranks agree, a dim the
     * declaration fixes fills one inference left unknown */
    int64_t dims[TCI_MAX_RANK];
    for (int i = 0; i < inferred->rank; i++) {
        dims[i] = inferred->dims[i];
        if (dims[i] < -1)
            return ir_node_error(n, TCI_ERR_INVALID_MODEL, "inferred negative dim for '%s'",
                                 t->name ? t->name : "?");
        if (dims[i] < 0 && t->rank == inferred->rank && t->dims[i] >= 0) dims[i] = t->dims[i];
    }
    t->dtype = inferred->dtype;
    t->rank = inferred->rank;
    for (int i = 0; i < TCI_MAX_RANK; i++) t->dims[i] = i < inferred->rank ? dims[i] : -1;
    return TCI_OK;
}

/* outs and out have n->num_outputs entries of scratch. */
static tci_status fold_node(ir_graph *g, ir_node *n, const tci_tensor *const *in,
                            tci_tensor *outs, tci_tensor **out, bool *folded) {
    *folded = false;
    /* Shape-only ops get a view whose data is NULL: their forward reads dims only. */
    for (int o = 0; o < n->num_outputs; o++) out[o] = n->outputs[o] ? &outs[o] : NULL;
    TRY_STATUS(op_run_node_limited(n, in, out, g->limits.max_tensor_elements));
    tci_status st = TCI_OK;
    for (int o = 0; o < n->num_outputs; o++) {
        if (!out[o]) continue;
        size_t bytes = (size_t)op_count(out[o]) * tci_dtype_size(out[o]->dtype);
        if (st == TCI_OK) {
            ir_tensor *t = n->outputs[o];
            st = merge_shape(n, t, out[o]);
            if (st == TCI_OK) {
                char what[300];
                snprintf(what, sizeof what, "node '%.200s' folded to a constant", n->name);
                st = ir_graph_charge_constant(g, what, op_count(out[o]),
                                              tci_dtype_size(out[o]->dtype));
            }
            if (st == TCI_OK) {
                t->data = arena_memdup(g->arena, out[o]->data, bytes ? bytes : 1);
                if (!t->data) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding '%s'", n->name);
            }
        }
        free(out[o]->data);
    }
    if (st == TCI_OK) *folded = true;
    return st;
}

/* Bytes of the node's outputs; -1 when unknown or past INT64_MAX (checked: the dims come from
 * the model, e.g. through ConstantOfShape). */
static int64_t output_bytes_bound(const ir_node *n) {
    int64_t total = 0;
    for (int o = 0; o < n->num_outputs; o++) {
        const ir_tensor *t = n->outputs[o];
        if (!t) continue;
        int64_t c, bytes;
        if (ir_count_elements(t->rank, t->dims, &c) != TCI_OK || c < 0) return -1;
        int64_t elem = (int64_t)(tci_dtype_size(t->dtype) ? tci_dtype_size(t->dtype) : 8);
        if (__builtin_mul_overflow(c, elem, &bytes) || __builtin_add_overflow(total, bytes, &total))
            return -1;
    }
    return total;
}

/* Every inferred output within limits.max_tensor_elements. */
static tci_status check_output_sizes(const ir_graph *g, const ir_node *n) {
    for (int o = 0; o < n->num_outputs; o++) {
        const ir_tensor *t = n->outputs[o];
        if (!t) continue;
        int64_t c;
        tci_status st = ir_count_elements(t->rank, t->dims, &c);
        if (st != TCI_OK) return status_error_prefix(st, "node '%s' (%s)", n->name, n->op_type);
        if (c > g->limits.max_tensor_elements)
            return ir_node_error(n, TCI_ERR_UNSUPPORTED,
                                 "output '%s' would have %" PRId64
                                 " elements, over the limit of %" PRId64 " (max_tensor_elements)",
                                 t->name ? t->name : "?", c, g->limits.max_tensor_elements);
    }
    return TCI_OK;
}

/* One node: inference, then folding when its inputs are constants. The scratch arrays have room
 * for the node's inputs and outputs. */
static tci_status infer_node(ir_graph *g, ir_node *n, tci_tensor *views, const tci_tensor **in,
                             tci_tensor *outs, tci_tensor **out, bool *folded) {
    *folded = false;
    for (int k = 0; k < n->num_inputs; k++) {
        in[k] = NULL;
        if (!n->inputs[k]) continue;
        ir_tensor_view(n->inputs[k], &views[k]);
        in[k] = &views[k];
    }
    for (int o = 0; o < n->num_outputs; o++) {
        out[o] = NULL;
        if (!n->outputs[o]) continue;
        memset(&outs[o], 0, sizeof outs[o]);
        outs[o].rank = -1;
        for (int d = 0; d < TCI_MAX_RANK; d++) outs[o].dims[d] = -1;
        out[o] = &outs[o];
    }
    TRY_STATUS(n->desc->infer(n, in, out));
    for (int o = 0; o < n->num_outputs; o++)
        if (out[o]) TRY_STATUS(merge_shape(n, n->outputs[o], out[o]));
    TRY_STATUS(check_output_sizes(g, n));
    /* a pass-through of a constant (Identity of an exported weight) is that constant: the
     * nodes after it fold in this same sweep (NF-Nets' weight standardisation); it shares the
     * input's bytes, so nothing new counts against max_constant_bytes */
    if ((n->desc->flags & OP_PASSTHROUGH) && n->inputs[0] && n->inputs[0]->data &&
        n->num_outputs >= 1 && n->outputs[0]) {
        bool others = false;
        for (int o = 1; o < n->num_outputs; o++) others = others || n->outputs[o];
        if (!others) {
            n->outputs[0]->data = n->inputs[0]->data;
            *folded = true;
            return TCI_OK;
        }
    }
    if (foldable(n)) {
        int64_t bytes = output_bytes_bound(n);
        if (bytes >= 0 && bytes <= FOLD_MAX_BYTES) TRY_STATUS(fold_node(g, n, in, outs, out, folded));
    }
    return TCI_OK;
}

tci_status pass_infer_and_fold(ir_graph *g) {
    /* scratch sized for the widest node: Concat and Split take any number of tensors */
    size_t width = 1;
    for (size_t i = 0; i < g->num_nodes; i++) {
        if ((size_t)g->nodes[i]->num_inputs > width) width = (size_t)g->nodes[i]->num_inputs;
        if ((size_t)g->nodes[i]->num_outputs > width) width = (size_t)g->nodes[i]->num_outputs;
    }
    tci_tensor *views = calloc(width, sizeof *views), *outs = calloc(width, sizeof *outs);
    const tci_tensor **in = calloc(width, sizeof *in);
    tci_tensor **out = calloc(width, sizeof *out);
    tci_status st = TCI_OK;
    if (!views || !outs || !in || !out)
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory for shape inference");
    size_t kept = 0;
    for (size_t i = 0; i < g->num_nodes && st == TCI_OK; i++) {
        bool folded = false;
        st = infer_node(g, g->nodes[i], views, in, outs, out, &folded);
        if (st == TCI_OK && !folded) g->nodes[kept++] = g->nodes[i];
    }
    free(views);
    free(outs);
    free(in);
    free(out);
    TRY_STATUS(st);
    g->num_nodes = kept;
    for (size_t i = 0; i < kept; i++) g->nodes[i]->index = i;
    return TCI_OK;
}
