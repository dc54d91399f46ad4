/* Per-channel constants folded into the node before them, for the GPU:
 * - the layer scale: a Mul by a per-channel constant after a GEMM (ConvNeXt's gamma) folded into
 *   the GEMM's constant weights and bias, so that the residual Add after it becomes the GEMM
 *   step's epilogue (fuse.c) instead of two element-wise steps;
 * - a GroupNorm exported as Reshape -> InstanceNormalization -> Reshape -> Mul -> Add made one
 *   GroupNormalization with per-channel scale and bias. */
#include <stdio.h>
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

/* The dim of y that constant c (broadcast against y) varies along: -1 where it varies along
 * none (a scalar, every dim 1) or along more than one. */
static int varying_axis(const ir_tensor *c, const ir_tensor *y) {
    if (!c || c->rank < 0 || c->rank > y->rank) return -1;
    int axis = -1;
    for (int i = 0; i < c->rank; i++) {
        if (c->dims[i] == 1) continue;
        if (axis >= 0) return -1;
        axis = y->rank - c->rank + i;
    }
    return axis;
}

/* Mul node m: y = t * gamma, with t the result of a product with constant weights (a GEMM's
 * columns, a convolution's output channels), through a bias Add and a Transpose (each optional,
 * in that order), read by that chain alone, and gamma constant along every dim but the one the
 * product's channels become. Folds gamma into the product and the bias, and gives m's readers
 * t: *done says whether it did. */
static tci_status fold_one(ir_graph *g, int *readers, ir_node *m, bool *done) {
    *done = false;
    ir_tensor *gamma = NULL, *y = m->outputs[0];
    int side;
    ir_tensor *t = with_constant(m, BINARY_MUL, &gamma, &side);
    if (!t || y->is_graph_output || !private_tensor(readers, t)) return TCI_OK;
    /* a per-channel gamma only (a scalar scale is left to the attention fusion's scalings) */
    int64_t count;
    const int axis = varying_axis(gamma, y);
    if (axis < 0 || !per_channel(gamma, y, axis, &count) || count < 2) return TCI_OK;
    ir_tensor *cur = t;
    ir_tensor *chain[3] = {t, NULL, NULL}; /* t back to the product's result: scaled once folded */
    int cur_axis = axis;
    ir_node *p = cur->producer;
    op_pattern pat;
    if (op_node_pattern(p, &pat) == OP_PATTERN_TRANSPOSE && p->outputs[0] == cur &&
        private_tensor(readers, p->inputs[0])) {
        cur_axis = pat.perm[axis]; /* output dim d is input dim perm[d] */
        cur = chain[1] = p->inputs[0];
        p = cur->producer;
    }
    int64_t bias_count = 0;
    ir_tensor *bias = NULL;
    int bias_side = 0;
    ir_node *add = NULL;
    ir_tensor *u = p && p->outputs[0] == cur ? with_constant(p, BINARY_ADD, &bias, &bias_side)
                                             : NULL;
    if (u && cur_axis == cur->rank - 1 && private_tensor(readers, u) &&
        per_channel(bias, cur, cur_axis, &bias_count)) {
        add = p;
        cur = chain[2] = u;
        p = cur->producer;
    }
    if (!p || !p->desc || !p->desc->scale_columns || p->num_outputs < 1 || p->outputs[0] != cur ||
        count != cur->dims[cur_axis])
        return TCI_OK;
    TRY_STATUS(p->desc->scale_columns(g, p, cur_axis, gamma->data, count, done));
    if (!*done) return TCI_OK;
    if (add) TRY_STATUS(scale_bias(g, add, bias_side, bias_count, gamma->data, count));
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

/* ---- GroupNorm chains ---- */

static bool is_op(const ir_node *n, const char *op_type) {
    return n && n->desc && n->domain[0] == '\0' && strcmp(n->op_type, op_type) == 0;
}

/* A constant float vector of count values. */
static const float *constant_vector(const ir_tensor *t, int64_t count) {
    return op_constant_float(t) && t->rank == 1 && t->dims[0] == count ? t->data : NULL;
}

/* Node name for the GroupNormalization replacing instance norm `in`: its name with
 * "InstanceNormalization" (at its end) as "GroupNormalization", else with that appended. */
static void group_norm_name(const ir_node *in, char *name, size_t size) {
    const char *old = "InstanceNormalization";
    size_t len = strlen(in->name), olen = strlen(old);
    if (len >= olen && strcmp(in->name + len - olen, old) == 0)
        snprintf(name, size, "%.*sGroupNormalization", (int)(len - olen), in->name);
    else
        snprintf(name, size, "%s/GroupNormalization", in->name);
}

/* The node reading *end alone when it is op(*end, c) with c constant per channel of x (dim 1):
 * c (its value count in *count), with *end and *last moved on to that node's output and the
 * node; else NULL. */
static const ir_tensor *channel_step(const ir_graph *g, const int *readers, binary_op op,
                                     const ir_tensor *x, ir_tensor **end, ir_node **last,
                                     int64_t *count) {
    ir_node *n = ir_graph_sole_reader(g, readers, *end);
    ir_tensor *c = NULL;
    int side;
    if (!n || with_constant(n, op, &c, &side) != *end || !per_channel(c, x, 1, count))
        return NULL;
    *last = n;
    *end = n->outputs[0];
    return c;
}

/* Instance norm node `in` whose input is Reshape(x, (N, G, -1)) of a float x of rank 3 or more
 * (N, C, ...) and whose result goes on through a Reshape back to x's shape, then optionally a Mul
 * and an Add by per-channel constants (each read by the next node alone): one
 * GroupNormalization-21 of x with G groups and per-channel scale and bias (the instance norm's
 * per-group ones times the Mul's, plus the Add's) takes the chain's place. *done says whether. */
static tci_status fold_group_norm(ir_graph *g, const int *readers, ir_node *in, bool *done) {
    *done = false;
    if (!is_op(in, "InstanceNormalization") || in->num_inputs != 3 || in->num_outputs != 1)
        return TCI_OK;
    ir_node *r1 = in->inputs[0] ? in->inputs[0]->producer : NULL;
    if (!is_op(r1, "Reshape") || !private_tensor(readers, in->inputs[0])) return TCI_OK;
    ir_tensor *x = r1->inputs[0];
    const ir_tensor *v = in->inputs[0];
    if (!x || x->data || x->dtype != TCI_DTYPE_FLOAT || x->rank < 3 || v->rank != 3)
        return TCI_OK;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] < 1) return TCI_OK;
    const int64_t n = x->dims[0], c = x->dims[1], groups = v->dims[1];
    int64_t spatial = 1;
    for (int i = 2; i < x->rank; i++) spatial *= x->dims[i];
    const float *in_scale = constant_vector(in->inputs[1], groups);
    const float *in_bias = constant_vector(in->inputs[2], groups);
    if (v->dims[0] != n || groups < 1 || c % groups || v->dims[2] != c / groups * spatial ||
        !in_scale || !in_bias)
        return TCI_OK;
    ir_node *r2 = ir_graph_sole_reader(g, readers, in->outputs[0]);
    if (!is_op(r2, "Reshape") || !r2->outputs[0] || !same_dims(r2->outputs[0], x)) return TCI_OK;
    ir_tensor *end = r2->outputs[0];
    ir_node *last = r2;
    int64_t gamma_count = 0, beta_count = 0;
    const ir_tensor *gamma = channel_step(g, readers, BINARY_MUL, x, &end, &last, &gamma_count);
    const ir_tensor *beta = channel_step(g, readers, BINARY_ADD, x, &end, &last, &beta_count);
    float *scale = malloc((size_t)c * 2 * sizeof *scale);
    if (!scale) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding a GroupNorm");
    float *bias = scale + c;
    for (int64_t ch = 0; ch < c; ch++) {
        const int64_t grp = ch / (c / groups);
        const float gm = gamma ? ((const float *)gamma->data)[gamma_count == 1 ? 0 : ch] : 1.0f;
        const float bt = beta ? ((const float *)beta->data)[beta_count == 1 ? 0 : ch] : 0.0f;
        scale[ch] = in_scale[grp] * gm;
        bias[ch] = in_bias[grp] * gm + bt;
    }
    ir_tensor *scale_t = NULL, *bias_t = NULL, *dead = NULL;
    tci_status st = ir_graph_add_float_constant(g, scale, 1, &c, &scale_t);
    if (st == TCI_OK) st = ir_graph_add_float_constant(g, bias, 1, &c, &bias_t);
    free(scale);
    TRY_STATUS(st);
    float epsilon;
    TRY_STATUS(ir_attr_float(in, "epsilon", 1e-5f, &epsilon));
    char name[512];
    group_norm_name(in, name, sizeof name);
    ir_node *gn;
    TRY_STATUS(ir_graph_add_node(g, name, "GroupNormalization", "", 3, 1, &gn));
    ir_attr *attrs = arena_alloc(g->arena, 2 * sizeof *attrs);
    if (!attrs) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding a GroupNorm");
    memset(attrs, 0, 2 * sizeof *attrs);
    attrs[0].name = "num_groups";
    attrs[0].type = IR_ATTR_INT;
    attrs[0].i = groups;
    attrs[1].name = "epsilon";
    attrs[1].type = IR_ATTR_FLOAT;
    attrs[1].f = epsilon;
    gn->attrs = attrs;
    gn->num_attrs = 2;
    gn->opset = 21; /* per-channel scale and bias */
    gn->inputs[0] = x;
    gn->inputs[1] = scale_t;
    gn->inputs[2] = bias_t;
    TRY_STATUS(ir_graph_add_tensor(g, NULL, &dead));
    dead->dtype = end->dtype;
    last->outputs[0] = dead;
    gn->outputs[0] = end;
    TRY_STATUS(op_prepare_node(gn, g->arena));
    *done = true;
    return TCI_OK;
}

tci_status pass_fold_group_norm_chains(ir_graph *g) {
    return pass_rewrite_each(g, fold_group_norm, "folding GroupNorms");
}
