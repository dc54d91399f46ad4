/* The layer-scale fold for the GPU: a Mul by a per-channel constant after a GEMM (ConvNeXt's
 * gamma), folded into the GEMM's constant weights and bias, so that the residual Add after it
 * becomes the GEMM step's epilogue (fuse.c) instead of two element-wise steps. */
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "layers/op.h"

/* t has known dims and is read by exactly one node input (readers), not by the graph's outputs. */
static bool private_tensor(const int *readers, const ir_tensor *t) {
    if (!t || t->data || t->rank < 1 || t->is_graph_output || readers[t->index] != 1) return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) return false;
    return true;
}

static bool same_dims(const ir_tensor *a, const ir_tensor *b) {
    return a->rank == b->rank && memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0;
}

static bool is_binary(const ir_node *n, binary_op op) {
    return n && n->desc && n->desc->binary == op && n->num_inputs == 2 && n->num_outputs == 1;
}

/* c is a constant float that, broadcast against y (of y's shape), is constant along every dim
 * but axis: its value count (1, or y's length along axis) in *count. */
static bool per_channel(const ir_tensor *c, const ir_tensor *y, int axis, int64_t *count) {
    if (!c || !c->data || c->dtype != TCI_DTYPE_FLOAT || c->rank < 0 || c->rank > y->rank)
        return false;
    *count = 1;
    for (int i = 0; i < c->rank; i++) {
        int d = y->rank - c->rank + i;
        if (c->dims[i] == 1) continue;
        if (d != axis || c->dims[i] != y->dims[axis]) return false;
        *count = c->dims[i];
    }
    return true;
}

/* n = Add(x, constant) or Mul(x, constant), either side, with y = n's output of x's dims: x, and
 * the constant in *c (its side in *side), else NULL. */
static ir_tensor *with_constant(const ir_node *n, binary_op op, ir_tensor **c, int *side) {
    if (!is_binary(n, op) || !n->outputs[0] || n->outputs[0]->dtype != TCI_DTYPE_FLOAT)
        return NULL;
    for (int s = 0; s < 2; s++) {
        ir_tensor *x = n->inputs[1 - s];
        if (n->inputs[s] && n->inputs[s]->data && x && !x->data && x->dtype == TCI_DTYPE_FLOAT &&
            same_dims(x, n->outputs[0])) {
            *c = n->inputs[s];
            *side = s;
            return x;
        }
    }
    return NULL;
}

/* The bias Add's constant b (per column, count values) times scale (n columns): a new constant
 * of b's shape with its last dim n (rank 1 where b is a scalar), set as the Add's input side. */
static tci_status scale_bias(ir_graph *g, ir_node *add, int side, int64_t count,
                             const float *scale, int64_t n) {
    const ir_tensor *b = add->inputs[side];
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding a layer scale");
    for (int64_t j = 0; j < n; j++) v[j] = ((const float *)b->data)[count == 1 ? 0 : j] * scale[j];
    int64_t dims[TCI_MAX_RANK];
    int rank = b->rank > 0 ? b->rank : 1;
    for (int i = 0; i < rank; i++) dims[i] = i < b->rank ? b->dims[i] : 1;
    dims[rank - 1] = n;
    tci_status st = ir_graph_add_float_constant(g, v, rank, dims, &add->inputs[side]);
    free(v);
    return st;
}

/* Mul node m: y = t * gamma, with t the GEMM's result, through a bias Add and a Transpose (each
 * optional, in that order), read by that chain alone, and gamma constant along every dim but
 * the one the GEMM's columns become. Folds gamma into the GEMM and the bias, and gives m's
 * readers t: *done says whether it did. */
static tci_status fold_one(ir_graph *g, int *readers, ir_node *m, bool *done) {
    *done = false;
    ir_tensor *gamma = NULL, *y = m->outputs[0];
    int side;
    ir_tensor *t = with_constant(m, BINARY_MUL, &gamma, &side);
    if (!t || y->is_graph_output || !private_tensor(readers, t)) return TCI_OK;
    ir_tensor *cur = t;
    ir_tensor *chain[3] = {t, NULL, NULL}; /* t back to the GEMM's result: scaled once folded */
    int axis = t->rank - 1;
    ir_node *p = cur->producer;
    op_pattern pat;
    memset(&pat, 0, sizeof pat);
    if (p && p->desc && p->desc->pattern) p->desc->pattern(p, &pat);
    if (pat.kind == OP_PATTERN_TRANSPOSE && p->outputs[0] == cur &&
        private_tensor(readers, p->inputs[0])) {
        for (int d = 0; d < pat.rank; d++)
            if (pat.perm[d] == pat.rank - 1) axis = d;
        cur = chain[1] = p->inputs[0];
        p = cur->producer;
    }
    int64_t n = cur->dims[cur->rank - 1], count, bias_count = 0;
    ir_tensor *bias = NULL;
    int bias_side = 0;
    ir_node *add = NULL;
    ir_tensor *u = p && p->outputs[0] == cur ? with_constant(p, BINARY_ADD, &bias, &bias_side)
                                             : NULL;
    if (u && private_tensor(readers, u) &&
        per_channel(bias, cur, cur->rank - 1, &bias_count)) {
        add = p;
        cur = chain[2] = u;
        p = cur->producer;
    }
    /* a per-channel gamma only (a scalar scale is left to the attention fusion's scalings) */
    if (!p || !p->desc || !p->desc->scale_columns || p->num_outputs < 1 || p->outputs[0] != cur ||
        !per_channel(gamma, y, axis, &count) || count != n || n < 2)
        return TCI_OK;
    TRY_STATUS(p->desc->scale_columns(g, p, gamma->data, count, done));
    if (!*done) return TCI_OK;
    if (add) TRY_STATUS(scale_bias(g, add, bias_side, bias_count, gamma->data, n));
    for (int i = 0; i < 3; i++)
        if (chain[i]) chain[i]->rescaled = true;
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k] == y) g->nodes[i]->inputs[k] = t;
    readers[t->index] = readers[y->index];
    readers[y->index] = 0;
    return TCI_OK;
}

tci_status pass_fold_layer_scale(ir_graph *g) {
    /* a fused graph's tensors are read by its steps: fold before fusing only */
    for (size_t i = 0; i < g->num_nodes; i++)
        if (g->nodes[i]->epilogue || g->nodes[i]->fused_into) return TCI_OK;
    int *readers = calloc(g->num_tensors + 1, sizeof *readers);
    if (!readers) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding layer scales");
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k]) readers[g->nodes[i]->inputs[k]->index]++;
    tci_status st = TCI_OK;
    bool any = false;
    for (size_t i = 0; st == TCI_OK && i < g->num_nodes; i++) {
        bool done = false;
        st = fold_one(g, readers, g->nodes[i], &done);
        any = any || done;
    }
    free(readers);
    /* the folded Muls are read by nothing now */
    return st == TCI_OK && any ? pass_eliminate_dead_nodes(g) : st;
}
