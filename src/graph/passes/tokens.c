/* Token sequences and images, for the GPU: vision transformers with convolutions (CoaT's
 * position encodings, PVT, Twins) turn their tokens (B, H*W, C) into an image with
 *   Transpose(0, 2, 1) -> Reshape(B, C, H, W)
 * and back with
 *   Reshape(B, C, H*W) -> Transpose(0, 2, 1),
 * two copies each way on the GPU. The same values come out of
 *   Reshape(B, H, W, C) -> Transpose(0, 3, 1, 2)   and   Transpose(0, 2, 3, 1) -> Reshape(B, H*W, C),
 * whose Transposes are views of NHWC8 where C is a multiple of 8 (op_desc.views_as_nhwc and the
 * channels-last alias of movement.c) and whose Reshapes are dense aliases: no copy at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "layers/op.h"

/* n plays role kind (op_desc.pattern) and has its one output. */
static bool plays(const ir_node *n, op_pattern_kind kind, op_pattern *pat) {
    return op_node_pattern(n, pat) == kind && n->num_outputs == 1 && n->outputs[0];
}

static bool known_float(const ir_tensor *t, int rank) {
    if (!t || t->data || t->dtype != TCI_DTYPE_FLOAT || t->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (t->dims[i] < 1) return false;
    return true;
}

/* n is a Transpose of (0, 2, 1): tokens and channels swapped. */
static bool swaps_last_two(const ir_node *n) {
    op_pattern pat;
    return plays(n, OP_PATTERN_TRANSPOSE, &pat) && pat.rank == 3 && pat.perm[0] == 0 &&
           pat.perm[1] == 2 && pat.perm[2] == 1;
}

/* n is a Reshape (or another op keeping the row-major order) of u. */
static bool reshapes(const ir_node *n, const ir_tensor *u) {
    op_pattern pat;
    return plays(n, OP_PATTERN_RESHAPE, &pat) && n->inputs[0] == u;
}

/* Node op_type(in, extra) -> out, named after the node it replaces. */
static tci_status add_node(ir_graph *g, const ir_node *old, const char *op_type, ir_tensor *in,
                           ir_tensor *extra, ir_tensor *out, ir_node **made) {
    char name[512];
    snprintf(name, sizeof name, "%s/%s", old->name, op_type);
    TRY_STATUS(ir_graph_add_node(g, name, op_type, "", extra ? 2 : 1, 1, made));
    (*made)->opset = old->opset > 14 ? old->opset : 14;
    (*made)->inputs[0] = in;
    if (extra) (*made)->inputs[1] = extra;
    (*made)->outputs[0] = out;
    return TCI_OK;
}

static tci_status set_perm(ir_graph *g, ir_node *n, const int64_t *perm) {
    ir_attr *a = arena_alloc(g->arena, sizeof *a);
    int64_t *v = arena_alloc(g->arena, 4 * sizeof *v);
    if (!a || !v) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory rewriting tokens");
    memset(a, 0, sizeof *a);
    memcpy(v, perm, 4 * sizeof *v);
    a->name = "perm";
    a->type = IR_ATTR_INTS;
    a->ints = v;
    a->count = 4;
    n->attrs = a;
    n->num_attrs = 1;
    return TCI_OK;
}

/* A float activation of the given dims. */
static tci_status activation(ir_graph *g, const int64_t *dims, int rank, ir_tensor **out) {
    TRY_STATUS(ir_graph_add_tensor(g, NULL, out));
    (*out)->dtype = TCI_DTYPE_FLOAT;
    (*out)->rank = rank;
    memcpy((*out)->dims, dims, (size_t)rank * sizeof *dims);
    return TCI_OK;
}

/* first(x) -> second -> y rewritten as Reshape/Transpose (or Transpose/Reshape) nodes made
 * here: first_op with its extra input (a shape or NULL) to mid of mid_dims, then second_op to
 * y; the old second node is left writing a tensor nobody reads. */
static tci_status rewrite(ir_graph *g, ir_node *old_second, ir_tensor *x, const char *first_op,
                          const int64_t *first_arg, const int64_t *mid_dims, int mid_rank,
                          const char *second_op, const int64_t *second_arg, int second_rank) {
    ir_tensor *mid, *dead, *shape = NULL, *y = old_second->outputs[0];
    TRY_STATUS(activation(g, mid_dims, mid_rank, &mid));
    const bool first_reshape = strcmp(first_op, "Reshape") == 0;
    const int64_t shape_len = first_reshape ? mid_rank : second_rank;
    TRY_STATUS(ir_graph_add_int64_constant(g, first_reshape ? first_arg : second_arg, 1,
                                           &shape_len, &shape));
    ir_node *a, *b;
    TRY_STATUS(add_node(g, old_second, first_op, x, first_reshape ? shape : NULL, mid, &a));
    TRY_STATUS(add_node(g, old_second, second_op, mid, first_reshape ? NULL : shape, y, &b));
    TRY_STATUS(set_perm(g, first_reshape ? b : a, first_reshape ? second_arg : first_arg));
    TRY_STATUS(ir_graph_add_tensor(g, NULL, &dead));
    dead->dtype = y->dtype;
    old_second->outputs[0] = dead;
    TRY_STATUS(op_prepare_node(a, g->arena));
    return op_prepare_node(b, g->arena);
}

/* t (B, N, C) -> Transpose(0, 2, 1) -> Reshape(B, C, H, W), N = H W: *done when rewritten. */
static tci_status to_image(ir_graph *g, const int *readers, ir_node *tr, bool *done) {
    static const int64_t to_nchw[4] = {0, 3, 1, 2};
    if (!swaps_last_two(tr) || !known_float(tr->inputs[0], 3)) return TCI_OK;
    ir_tensor *t = tr->inputs[0], *u = tr->outputs[0];
    ir_node *r = ir_graph_sole_reader(g, readers, u);
    if (!reshapes(r, u) || !known_float(r->outputs[0], 4)) return TCI_OK;
    const int64_t *y = r->outputs[0]->dims;
    if (y[0] != t->dims[0] || y[1] != t->dims[2] || y[2] * y[3] != t->dims[1]) return TCI_OK;
    const int64_t mid[4] = {y[0], y[2], y[3], y[1]};
    TRY_STATUS(rewrite(g, r, t, "Reshape", mid, mid, 4, "Transpose", to_nchw, 4));
    *done = true;
    return TCI_OK;
}

/* y (B, C, H, W) -> Reshape(B, C, H W) -> Transpose(0, 2, 1): *done when rewritten. */
static tci_status to_tokens(ir_graph *g, const int *readers, ir_node *r, bool *done) {
    static const int64_t to_last[4] = {0, 2, 3, 1};
    op_pattern pat;
    if (!plays(r, OP_PATTERN_RESHAPE, &pat)) return TCI_OK;
    ir_tensor *x = r->inputs[0], *u = r->outputs[0];
    if (!known_float(x, 4) || !known_float(u, 3)) return TCI_OK;
    ir_node *tr = ir_graph_sole_reader(g, readers, u);
    if (!swaps_last_two(tr) || !known_float(tr->outputs[0], 3)) return TCI_OK;
    const int64_t *d = x->dims;
    if (u->dims[0] != d[0] || u->dims[1] != d[1] || u->dims[2] != d[2] * d[3]) return TCI_OK;
    const int64_t mid[4] = {d[0], d[2], d[3], d[1]}, tokens[3] = {d[0], d[2] * d[3], d[1]};
    TRY_STATUS(rewrite(g, tr, x, "Transpose", to_last, mid, 4, "Reshape", tokens, 3));
    *done = true;
    return TCI_OK;
}

static tci_status to_image_or_tokens(ir_graph *g, const int *readers, ir_node *n, bool *done) {
    TRY_STATUS(to_image(g, readers, n, done));
    return *done ? TCI_OK : to_tokens(g, readers, n, done);
}

tci_status pass_token_image_views(ir_graph *g) {
    for (size_t i = 0; i < g->num_nodes; i++)
        if (g->nodes[i]->epilogue || g->nodes[i]->fused_into) return TCI_OK;
    return pass_rewrite_each(g, to_image_or_tokens, "rewriting tokens");
}
