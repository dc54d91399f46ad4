/* Control flow: If, which runs one of two subgraphs (then_branch, else_branch) chosen by a bool
 * condition, and Loop, which runs its body while a trip count and a condition allow (at most
 * max_loop_iterations times), carrying values from one iteration to the next and stacking
 * per-iteration scan outputs. Subgraphs read the enclosing graph's tensors through the node's
 * implicit inputs (ir_node.num_implicit_inputs); it runs on the CPU reference only, unless a
 * pass inlines the branch a constant condition chooses (src/graph/passes/inline.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

typedef struct if_params {
    ir_graph *branch[2]; /* [0] else_branch, [1] then_branch */
} if_params;

static const char *const branch_attr[2] = {"else_branch", "then_branch"};

static tci_status if_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"then_branch", "else_branch", NULL};
    int explicit_inputs = node->num_inputs - node->num_implicit_inputs;
    if (explicit_inputs != 1 || !node->inputs[0])
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "If takes exactly one input, the condition (%d given)",
                             explicit_inputs);
    if (node->num_outputs < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "If needs at least one output");
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, if_params, p);
    for (int b = 0; b < 2; b++) {
        const ir_attr *a = ir_node_attr(node, branch_attr[b]);
        if (!a)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute '%s' is missing",
                                 branch_attr[b]);
        if (a->type != IR_ATTR_GRAPH || !a->graph)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute '%s' is not a graph",
                                 branch_attr[b]);
        ir_graph *g = a->graph;
        if (g->num_inputs)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "subgraph '%s' declares %zu inputs; an If branch takes none",
                                 branch_attr[b], g->num_inputs);
        if (g->num_outputs != (size_t)node->num_outputs)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "subgraph '%s' has %zu outputs, the node %d", branch_attr[b],
                                 g->num_outputs, node->num_outputs);
        TRY_STATUS(op_prepare_subgraph(g, node, branch_attr[b]));
        p->branch[b] = g;
    }
    return TCI_OK;
}

static const tci_dtype cond_types[] = {TCI_DTYPE_BOOL, 0};

/* The branch the condition chooses: 1 (then), 0 (else), -1 while it is not known. */
static tci_status if_choice(const ir_node *node, const tci_tensor *cond, int *out) {
    *out = -1;
    TRY_STATUS(op_check_dtype(node, cond, 0, cond_types));
    int64_t count;
    TRY_STATUS(ir_count_elements(cond->rank, cond->dims, &count));
    if (count >= 0 && count != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the condition has %lld elements; it must have one",
                             (long long)count);
    if (cond->data && count == 1 && cond->dtype == TCI_DTYPE_BOOL)
        *out = ((const uint8_t *)cond->data)[0] != 0;
    return TCI_OK;
}

/* Outputs where the two branches agree; dims (or the rank) they disagree on stay unknown. */
static tci_status if_merge(const ir_node *node, int o, const tci_tensor *a, const tci_tensor *b,
                           tci_tensor *out) {
    if (a->dtype != TCI_DTYPE_UNDEFINED && b->dtype != TCI_DTYPE_UNDEFINED &&
        a->dtype != b->dtype)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "output %d is %s in then_branch and %s in else_branch", o,
                             tci_dtype_name(a->dtype), tci_dtype_name(b->dtype));
    out->dtype = a->dtype != TCI_DTYPE_UNDEFINED ? a->dtype : b->dtype;
    out->rank = a->rank == b->rank ? a->rank : -1;
    for (int d = 0; d < TCI_MAX_RANK; d++)
        out->dims[d] = out->rank > d && a->dims[d] == b->dims[d] ? a->dims[d] : -1;
    return TCI_OK;
}

static tci_status if_infer(const ir_node *node, const tci_tensor *const *in,
                           tci_tensor *const *out) {
    const if_params *p = node->params;
    int choice;
    TRY_STATUS(if_choice(node, in[0], &choice));
    size_t n = (size_t)node->num_outputs;
    tci_tensor *outs = calloc(2 * n, sizeof *outs);
    if (!outs) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory inferring");
    /* with the condition unknown, a branch whose inference fails (a Squeeze of a dim these
     * shapes do not give) cannot be the one a successful run takes: the other decides */
    tci_status st = TCI_OK, branch_st[2] = {TCI_OK, TCI_OK};
    char first_error[512] = "";
    for (int b = 0; b < 2; b++) {
        if (choice >= 0 && choice != b) continue;
        branch_st[b] = op_infer_subgraph(p->branch[b], NULL, in, outs + (size_t)b * n);
        if (branch_st[b] != TCI_OK && !first_error[0])
            snprintf(first_error, sizeof first_error, "%s", tci_last_error());
    }
    if (choice >= 0 ? branch_st[choice] != TCI_OK
                    : branch_st[0] != TCI_OK && branch_st[1] != TCI_OK) {
        int b = choice >= 0 ? choice : 0;
        free(outs);
        return status_error(branch_st[b], "node '%s' (If), subgraph '%s': %s", node->name,
                            branch_attr[b], first_error);
    }
    if (choice < 0 && branch_st[0] != TCI_OK) choice = 1;
    if (choice < 0 && branch_st[1] != TCI_OK) choice = 0;
    for (size_t o = 0; o < n && st == TCI_OK; o++) {
        if (!out[o]) continue;
        const tci_tensor *e = &outs[o], *t = &outs[n + o];
        if (choice >= 0) {
            const tci_tensor *taken = choice ? t : e;
            out[o]->dtype = taken->dtype;
            out[o]->rank = taken->rank;
            memcpy(out[o]->dims, taken->dims, sizeof out[o]->dims);
        } else {
            st = if_merge(node, (int)o, t, e, out[o]);
        }
    }
    free(outs);
    return st;
}

static tci_status if_run(const ir_node *node, const tci_tensor *const *in, tci_tensor *const *out,
                         int64_t max_elements) {
    const if_params *p = node->params;
    int choice;
    TRY_STATUS(if_choice(node, in[0], &choice));
    if (choice < 0)
        return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT, "the condition has no value");
    size_t n = (size_t)node->num_outputs;
    tci_tensor *outs = calloc(n, sizeof *outs);
    if (!outs) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory running If");
    tci_status st = op_run_subgraph(p->branch[choice], NULL, in, outs, max_elements);
    if (st != TCI_OK) {
        free(outs);
        return status_error_prefix(st, "node '%s' (If), subgraph '%s'", node->name,
                                   branch_attr[choice]);
    }
    for (size_t o = 0; o < n; o++) {
        if (!out[o]) {
            free(outs[o].data);
            continue;
        }
        const char *name = out[o]->name;
        *out[o] = outs[o];
        out[o]->name = name;
    }
    free(outs);
    return TCI_OK;
}

static const ir_graph *if_known_branch(const ir_node *node) {
    const if_params *p = node->params;
    const ir_tensor *cond = node->inputs[0];
    if (!p || !cond->data || cond->dtype != TCI_DTYPE_BOOL) return NULL;
    int64_t count;
    if (ir_count_elements(cond->rank, cond->dims, &count) != TCI_OK || count != 1) return NULL;
    return p->branch[((const uint8_t *)cond->data)[0] != 0];
}

static const op_desc if_op = {.op_type = "If",
                              .versions = OP_VERSIONS(1, 11, 13, 16, 19, 21, 23, 24, 25),
                              .parse = if_parse,
                              .infer = if_infer,
                              .flags = OP_CONTROL_FLOW,
                              .binary = BINARY_NONE,
                              .cpu_run = if_run,
                              .known_branch = if_known_branch};

/* ---- Loop ---- */

typedef struct loop_params {
    ir_graph *body;
    int carried; /* N: loop-carried values (inputs 2.., outputs 0..N-1) */
    int scans;   /* K: scan outputs (outputs N..) */
} loop_params;

static tci_status loop_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"body", NULL};
    int explicit_inputs = node->num_inputs - node->num_implicit_inputs;
    if (explicit_inputs < 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "Loop takes M, cond and the loop-carried values (%d inputs given)",
                             explicit_inputs);
    if (!node->inputs[0] && !node->inputs[1])
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "neither a trip count M nor a condition is given: the loop would "
                             "never end");
    TRY_STATUS(ir_check_attrs(node, known));
    const ir_attr *a = ir_node_attr(node, "body");
    if (!a || a->type != IR_ATTR_GRAPH || !a->graph)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'body' %s",
                             a ? "is not a graph" : "is missing");
    OP_ALLOC_PARAMS(node, arena, loop_params, p);
    p->body = a->graph;
    p->carried = explicit_inputs - 2;
    p->scans = node->num_outputs - p->carried;
    for (int k = 2; k < explicit_inputs; k++)
        if (!node->inputs[k])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "loop-carried input %d is omitted",
                                 k);
    if (p->scans < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%d outputs for %d loop-carried values", node->num_outputs,
                             p->carried);
    if (p->body->num_inputs != (size_t)(2 + p->carried) ||
        p->body->num_outputs != (size_t)(1 + p->carried + p->scans))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the body has %zu inputs and %zu outputs; with %d loop-carried "
                             "values and %d scan outputs it needs %d and %d",
                             p->body->num_inputs, p->body->num_outputs, p->carried, p->scans,
                             2 + p->carried, 1 + p->carried + p->scans);
    return op_prepare_subgraph(p->body, node, "body");
}

static const tci_dtype trip_types[] = {TCI_DTYPE_INT64, 0};

static tci_status loop_scalar(const ir_node *node, const tci_tensor *t, int index,
                              const tci_dtype *types) {
    TRY_STATUS(op_check_dtype(node, t, index, types));
    int64_t count;
    TRY_STATUS(ir_count_elements(t->rank, t->dims, &count));
    if (count >= 0 && count != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input %d has %lld elements; it must have one", index,
                             (long long)count);
    return TCI_OK;
}

static tci_status loop_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const loop_params *p = node->params;
    if (in[0]) TRY_STATUS(loop_scalar(node, in[0], 0, trip_types));
    if (in[1]) TRY_STATUS(loop_scalar(node, in[1], 1, cond_types));
    int n = p->carried, nb = (int)p->body->num_outputs;
    tci_tensor *body_in = calloc((size_t)(2 + n) + (size_t)nb, sizeof *body_in);
    const tci_tensor **bind = calloc((size_t)(2 + n), sizeof *bind);
    if (!body_in || !bind) {
        free(body_in);
        free(bind);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory inferring");
    }
    tci_tensor *body_out = body_in + 2 + n;
    body_in[0] = (tci_tensor){.dtype = TCI_DTYPE_INT64, .rank = 0};
    body_in[1] = (tci_tensor){.dtype = TCI_DTYPE_BOOL, .rank = 0};
    bind[0] = &body_in[0];
    bind[1] = &body_in[1];
    /* the first iteration's shapes, values left out (they change from one to the next) */
    for (int k = 0; k < n; k++) {
        body_in[2 + k] = *in[2 + k];
        body_in[2 + k].data = NULL;
        bind[2 + k] = &body_in[2 + k];
    }
    tci_status st = op_infer_subgraph(p->body, bind, in, body_out);
    if (st != TCI_OK) st = status_error_prefix(st, "node '%s' (Loop)", node->name);
    /* a carried value keeps the dims the body leaves as they were; scan outputs stack the
     * iterations, M of them when the trip count alone decides */
    int64_t trips = -1;
    if (in[0] && in[0]->data && !in[1]) trips = op_read_int(in[0], 0);
    for (int k = 0; st == TCI_OK && k < n + p->scans; k++) {
        if (!out[k]) continue;
        const tci_tensor *b = &body_out[1 + k];
        if (k < n) {
            const tci_tensor *init = in[2 + k];
            if (b->dtype != TCI_DTYPE_UNDEFINED && init->dtype != TCI_DTYPE_UNDEFINED &&
                b->dtype != init->dtype) {
                st = ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                   "loop-carried value %d is %s, the body makes it %s", k,
                                   tci_dtype_name(init->dtype), tci_dtype_name(b->dtype));
                break;
            }
            out[k]->dtype = init->dtype;
            out[k]->rank = b->rank == init->rank ? init->rank : -1;
            for (int d = 0; d < TCI_MAX_RANK; d++)
                out[k]->dims[d] = d < out[k]->rank && b->dims[d] == init->dims[d] ? init->dims[d]
                                                                                 : -1;
        } else if (b->rank >= TCI_MAX_RANK) {
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "scan output %d would have rank %d; at most %d is supported",
                               k - n, b->rank + 1, TCI_MAX_RANK);
        } else {
            out[k]->dtype = b->dtype;
            out[k]->rank = b->rank < 0 ? -1 : b->rank + 1;
            out[k]->dims[0] = trips >= 0 ? trips : -1;
            for (int d = 0; d < b->rank; d++) out[k]->dims[d + 1] = b->dims[d];
        }
    }
    free(body_in);
    free(bind);
    return st;
}

/* The iterations' values of one scan output, stacked as they come. */
typedef struct loop_stack {
    tci_tensor first;   /* shape and dtype of every iteration's value */
    unsigned char *data;
    size_t bytes, cap;  /* bytes used and allocated */
    int64_t count;      /* iterations stacked */
} loop_stack;

static tci_status stack_push(const ir_node *node, int k, loop_stack *s, const tci_tensor *v) {
    if (s->count == 0) {
        s->first = *v;
        s->first.data = NULL;
    } else if (v->dtype != s->first.dtype || v->rank != s->first.rank ||
               memcmp(v->dims, s->first.dims, sizeof(int64_t) * (size_t)v->rank) != 0) {
        char a[128], b[128];
        return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                             "scan output %d is %s at iteration %lld, %s at the first", k,
                             ir_format_dims(v->rank, v->dims, a, sizeof a), (long long)s->count,
                             ir_format_dims(s->first.rank, s->first.dims, b, sizeof b));
    }
    size_t bytes = (size_t)op_count(v) * tci_dtype_size(v->dtype);
    if (s->bytes + bytes > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        while (cap < s->bytes + bytes) cap *= 2;
        unsigned char *grown = realloc(s->data, cap);
        if (!grown) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory stacking");
        s->data = grown;
        s->cap = cap;
    }
    if (bytes) memcpy(s->data + s->bytes, v->data, bytes);
    s->bytes += bytes;
    s->count++;
    return TCI_OK;
}

/* A malloc'd copy of a value the loop does not own (an initial value never replaced). */
static tci_status copy_value(const ir_node *node, tci_tensor *dst, const tci_tensor *src) {
    const char *name = dst->name;
    size_t bytes = (size_t)op_count(src) * tci_dtype_size(src->dtype);
    *dst = *src;
    dst->name = name;
    dst->data = malloc(bytes ? bytes : 1);
    if (!dst->data) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    if (bytes) memcpy(dst->data, src->data, bytes);
    return TCI_OK;
}

static tci_status loop_iterate(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *carried, bool *owned, loop_stack *stacks,
                               tci_tensor *body_out, int64_t max_elements) {
    const loop_params *p = node->params;
    int n = p->carried;
    const tci_tensor **bind = calloc((size_t)(2 + n), sizeof *bind);
    if (!bind) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory running Loop");
    int64_t trips = in[0] ? op_read_int(in[0], 0) : INT64_MAX;
    uint8_t cond = in[1] ? ((const uint8_t *)in[1]->data)[0] != 0 : 1;
    const uint64_t limit = p->body->limits.max_loop_iterations;
    tci_status st = TCI_OK;
    for (int64_t i = 0; i < trips && cond && st == TCI_OK; i++) {
        if ((uint64_t)i >= limit) {
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "the Loop is still running after %" PRIu64 " iterations, the limit "
                               "(max_loop_iterations)",
                               limit);
            break;
        }
        int64_t iter = i;
        tci_tensor iter_t = {.dtype = TCI_DTYPE_INT64, .rank = 0, .data = &iter};
        tci_tensor cond_t = {.dtype = TCI_DTYPE_BOOL, .rank = 0, .data = &cond};
        bind[0] = &iter_t;
        bind[1] = &cond_t;
        for (int k = 0; k < n; k++) bind[2 + k] = &carried[k];
        st = op_run_subgraph(p->body, bind, in, body_out, max_elements);
        if (st != TCI_OK) break;
        const tci_tensor *c = &body_out[0];
        if (c->dtype != TCI_DTYPE_BOOL || op_count(c) != 1)
            st = ir_node_error(node, TCI_ERR_INVALID_MODEL,
                               "the body's condition output is not one bool");
        else if (in[1])
            cond = ((const uint8_t *)c->data)[0] != 0;
        for (int k = 0; k < n && st == TCI_OK; k++)
            if (body_out[1 + k].dtype != carried[k].dtype)
                st = ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                   "loop-carried value %d is %s, the body makes it %s", k,
                                   tci_dtype_name(carried[k].dtype),
                                   tci_dtype_name(body_out[1 + k].dtype));
        for (int k = 0; k < p->scans && st == TCI_OK; k++)
            st = stack_push(node, k, &stacks[k], &body_out[1 + n + k]);
        free(body_out[0].data);
        for (int k = 0; k < n; k++) {
            if (st != TCI_OK) {
                free(body_out[1 + k].data);
                continue;
            }
            if (owned[k]) free(carried[k].data);
            carried[k] = body_out[1 + k];
            owned[k] = true;
        }
        for (int k = 0; k < p->scans; k++) free(body_out[1 + n + k].data);
    }
    free(bind);
    return st;
}

/* The per-iteration shapes of the scan outputs of a loop that ran no iteration: the body's
 * inference from the initial values, which must know them. */
static tci_status loop_empty_shapes(const ir_node *node, const tci_tensor *const *in,
                                    loop_stack *stacks) {
    const loop_params *p = node->params;
    int n = p->carried;
    tci_tensor *outs = calloc((size_t)n + (size_t)p->scans, sizeof *outs);
    tci_tensor **views = calloc((size_t)n + (size_t)p->scans, sizeof *views);
    tci_status st = TCI_OK;
    if (!outs || !views) st = ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; st == TCI_OK && k < n + p->scans; k++) {
        outs[k].rank = -1;
        views[k] = &outs[k];
    }
    if (st == TCI_OK) st = loop_infer(node, in, views);
    for (int k = 0; st == TCI_OK && k < p->scans; k++) {
        if (stacks[k].count) continue;
        const tci_tensor *o = &outs[n + k];
        int64_t count = -1;
        if (o->rank >= 1) ir_count_elements(o->rank - 1, o->dims + 1, &count);
        if (count < 0 || o->dtype == TCI_DTYPE_UNDEFINED) {
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "the loop ran no iteration and the body's inference does not "
                               "give scan output %d's shape",
                               k);
            break;
        }
        stacks[k].first.dtype = o->dtype;
        stacks[k].first.rank = o->rank - 1;
        memcpy(stacks[k].first.dims, o->dims + 1, sizeof(int64_t) * (size_t)(o->rank - 1));
    }
    free(outs);
    free(views);
    return st;
}

static tci_status loop_run(const ir_node *node, const tci_tensor *const *in,
                           tci_tensor *const *out, int64_t max_elements) {
    const loop_params *p = node->params;
    int n = p->carried, nb = (int)p->body->num_outputs;
    if (in[0]) TRY_STATUS(loop_scalar(node, in[0], 0, trip_types));
    if (in[1]) TRY_STATUS(loop_scalar(node, in[1], 1, cond_types));
    tci_tensor *carried = calloc((size_t)n + 1, sizeof *carried);
    bool *owned = calloc((size_t)n + 1, sizeof *owned);
    loop_stack *stacks = calloc((size_t)p->scans + 1, sizeof *stacks);
    tci_tensor *body_out = calloc((size_t)nb, sizeof *body_out);
    tci_status st = TCI_OK;
    if (!carried || !owned || !stacks || !body_out)
        st = ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory running Loop");
    for (int k = 0; st == TCI_OK && k < n; k++) carried[k] = *in[2 + k];
    if (st == TCI_OK) st = loop_iterate(node, in, carried, owned, stacks, body_out, max_elements);
    if (st != TCI_OK) st = status_error_prefix(st, "node '%s' (Loop)", node->name);
    /* no iteration ran: each scan output is empty, its other dims from the body's inference */
    bool empty = false;
    for (int k = 0; st == TCI_OK && k < p->scans; k++) empty = empty || stacks[k].count == 0;
    if (st == TCI_OK && empty) st = loop_empty_shapes(node, in, stacks);
    for (int k = 0; st == TCI_OK && k < n; k++) {
        if (!out[k]) continue;
        if (owned[k]) {
            const char *name = out[k]->name;
            *out[k] = carried[k];
            out[k]->name = name;
            owned[k] = false;
        } else {
            st = copy_value(node, out[k], &carried[k]);
        }
    }
    for (int k = 0; st == TCI_OK && k < p->scans; k++) {
        tci_tensor *o = out[n + k];
        loop_stack *s = &stacks[k];
        if (!o) continue;
        if (s->first.rank >= TCI_MAX_RANK) {
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "scan output %d would have rank %d; at most %d is supported", k,
                               s->first.rank + 1, TCI_MAX_RANK);
            break;
        }
        const char *name = o->name;
        memset(o, 0, sizeof *o);
        o->name = name;
        o->dtype = s->first.dtype;
        o->rank = s->first.rank + 1;
        o->dims[0] = s->count;
        for (int d = 0; d < s->first.rank; d++) o->dims[d + 1] = s->first.dims[d];
        if (op_count(o) > max_elements) {
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "scan output %d would have %lld elements, over the limit of %lld "
                               "(max_tensor_elements)",
                               k, (long long)op_count(o), (long long)max_elements);
            break;
        }
        o->data = s->data ? s->data : malloc(1);
        s->data = NULL;
        if (!o->data) st = ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (st != TCI_OK)
        for (int k = 0; k < node->num_outputs; k++)
            if (out[k]) {
                free(out[k]->data);
                out[k]->data = NULL;
            }
    for (int k = 0; owned && k < n; k++)
        if (owned[k]) free(carried[k].data);
    for (int k = 0; stacks && k < p->scans; k++) free(stacks[k].data);
    free(carried);
    free(owned);
    free(stacks);
    free(body_out);
    return st;
}

static const op_desc loop_op = {.op_type = "Loop",
                                .versions = OP_VERSIONS(1, 11, 13, 16, 19, 21, 23, 24, 25),
                                .parse = loop_parse,
                                .infer = loop_infer,
                                .flags = OP_CONTROL_FLOW,
                                .binary = BINARY_NONE,
                                .cpu_run = loop_run};

/* ---- Scan (opset 9 on) ---- */

typedef struct scan_params {
    ir_graph *body;
    int states;  /* N: state values (inputs and outputs 0..N-1) */
    int inputs;  /* M: scan inputs (inputs N..) */
    int outputs; /* K: scan outputs (outputs N..) */
    const int64_t *in_axes, *in_dirs, *out_axes, *out_dirs; /* NULL: all 0 */
} scan_params;

/* An optional INTS attribute of `want` entries, each within [lo, hi] (hi < lo: any axis). */
static tci_status scan_list(const ir_node *node, const char *name, int want, bool direction,
                            const int64_t **out) {
    size_t count;
    TRY_STATUS(ir_attr_ints(node, name, out, &count));
    if (!*out) return TCI_OK;
    if (count != (size_t)want)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s has %zu entries, not %d", name,
                             count, want);
    for (size_t i = 0; direction && i < count; i++)
        if ((*out)[i] != 0 && (*out)[i] != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "%s[%zu] is %lld; a direction is 0 (forward) or 1 (reverse)",
                                 name, i, (long long)(*out)[i]);
    return TCI_OK;
}

static tci_status scan_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"body",          "num_scan_inputs",        "scan_input_axes",
                                        "scan_input_directions", "scan_output_axes",
                                        "scan_output_directions", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    int explicit_inputs = node->num_inputs - node->num_implicit_inputs;
    for (int k = 0; k < explicit_inputs; k++)
        if (!node->inputs[k])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input %d is omitted", k);
    const ir_attr *a = ir_node_attr(node, "body");
    if (!a || a->type != IR_ATTR_GRAPH || !a->graph)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'body' %s",
                             a ? "is not a graph" : "is missing");
    int64_t m;
    TRY_STATUS(ir_attr_int(node, "num_scan_inputs", -1, &m));
    if (m < 1 || m > explicit_inputs)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "num_scan_inputs is %lld; it must be in [1, %d] (the inputs)",
                             (long long)m, explicit_inputs);
    OP_ALLOC_PARAMS(node, arena, scan_params, p);
    p->body = a->graph;
    p->inputs = (int)m;
    p->states = explicit_inputs - p->inputs;
    p->outputs = node->num_outputs - p->states;
    if (p->outputs < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%d outputs for %d state values",
                             node->num_outputs, p->states);
    if (p->body->num_inputs != (size_t)(p->states + p->inputs) ||
        p->body->num_outputs != (size_t)(p->states + p->outputs))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the body has %zu inputs and %zu outputs; with %d state values, "
                             "%d scan inputs and %d scan outputs it needs %d and %d",
                             p->body->num_inputs, p->body->num_outputs, p->states, p->inputs,
                             p->outputs, p->states + p->inputs, p->states + p->outputs);
    TRY_STATUS(scan_list(node, "scan_input_axes", p->inputs, false, &p->in_axes));
    TRY_STATUS(scan_list(node, "scan_input_directions", p->inputs, true, &p->in_dirs));
    TRY_STATUS(scan_list(node, "scan_output_axes", p->outputs, false, &p->out_axes));
    TRY_STATUS(scan_list(node, "scan_output_directions", p->outputs, true, &p->out_dirs));
    return op_prepare_subgraph(p->body, node, "body");
}

/* Scan input j's axis for its rank, normalised. */
static tci_status scan_in_axis(const ir_node *node, int j, int rank, int *out) {
    const scan_params *p = node->params;
    if (rank < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "scan input %d is a scalar", j);
    return op_normalize_axis(node, p->in_axes ? p->in_axes[j] : 0, rank, out);
}

/* The sequence length: every scan input's length along its axis; -1 while unknown. */
static tci_status scan_length(const ir_node *node, const tci_tensor *const *in, int64_t *out) {
    const scan_params *p = node->params;
    *out = -1;
    for (int j = 0; j < p->inputs; j++) {
        const tci_tensor *x = in[p->states + j];
        if (x->rank < 0) continue;
        int axis;
        TRY_STATUS(scan_in_axis(node, j, x->rank, &axis));
        int64_t len = x->dims[axis];
        if (len < 0) continue;
        if (*out >= 0 && len != *out)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "scan input %d has %lld elements along its axis, scan input 0 "
                                 "%lld",
                                 j, (long long)len, (long long)*out);
        *out = len;
    }
    return TCI_OK;
}

static tci_status scan_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const scan_params *p = node->params;
    int64_t len;
    TRY_STATUS(scan_length(node, in, &len));
    int nin = p->states + p->inputs, nout = p->states + p->outputs;
    tci_tensor *body_in = calloc((size_t)(nin + nout), sizeof *body_in);
    const tci_tensor **bind = calloc((size_t)nin, sizeof *bind);
    if (!body_in || !bind) {
        free(body_in);
        free(bind);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory inferring");
    }
    tci_tensor *body_out = body_in + nin;
    tci_status st = TCI_OK;
    for (int k = 0; k < nin && st == TCI_OK; k++) {
        body_in[k] = *in[k];
        body_in[k].data = NULL;
        bind[k] = &body_in[k];
        if (k < p->states || in[k]->rank < 0) continue;
        int axis; /* a slice: the scan axis left out */
        st = scan_in_axis(node, k - p->states, in[k]->rank, &axis);
        body_in[k].rank = in[k]->rank - 1;
        for (int d = axis; d < TCI_MAX_RANK - 1; d++) body_in[k].dims[d] = in[k]->dims[d + 1];
    }
    if (st == TCI_OK) st = op_infer_subgraph(p->body, bind, in, body_out);
    if (st != TCI_OK) st = status_error_prefix(st, "node '%s' (Scan)", node->name);
    for (int k = 0; st == TCI_OK && k < nout; k++) {
        if (!out[k]) continue;
        const tci_tensor *b = &body_out[k];
        if (k < p->states) {
            const tci_tensor *init = in[k];
            if (b->dtype != TCI_DTYPE_UNDEFINED && init->dtype != TCI_DTYPE_UNDEFINED &&
                b->dtype != init->dtype) {
                st = ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                   "state %d is %s, the body makes it %s", k,
                                   tci_dtype_name(init->dtype), tci_dtype_name(b->dtype));
                break;
            }
            out[k]->dtype = init->dtype;
            out[k]->rank = b->rank == init->rank ? init->rank : -1;
            for (int d = 0; d < TCI_MAX_RANK; d++)
                out[k]->dims[d] = d < out[k]->rank && b->dims[d] == init->dims[d] ? init->dims[d]
                                                                                 : -1;
            continue;
        }
        out[k]->dtype = b->dtype;
        if (b->rank < 0) continue;
        if (b->rank >= TCI_MAX_RANK) {
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "scan output %d would have rank %d; at most %d is supported",
                               k - p->states, b->rank + 1, TCI_MAX_RANK);
            break;
        }
        int axis;
        st = op_normalize_axis(node, p->out_axes ? p->out_axes[k - p->states] : 0, b->rank + 1,
                               &axis);
        if (st != TCI_OK) break;
        out[k]->rank = b->rank + 1;
        for (int d = 0, s = 0; d <= b->rank; d++) out[k]->dims[d] = d == axis ? len : b->dims[s++];
    }
    free(body_in);
    free(bind);
    return st;
}

/* Element block geometry of an axis: outer blocks of len * inner elements. */
static void scan_geometry(int rank, const int64_t *dims, int axis, int64_t *outer,
                          int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < axis; d++) *outer *= dims[d];
    for (int d = axis + 1; d < rank; d++) *inner *= dims[d];
}

/* slice = x[..., index, ...] along axis (its data allocated by the caller). */
static void scan_slice(const tci_tensor *x, int axis, int64_t index, tci_tensor *slice) {
    int64_t outer, inner, len = x->dims[axis];
    scan_geometry(x->rank, x->dims, axis, &outer, &inner);
    size_t es = tci_dtype_size(x->dtype), row = (size_t)inner * es;
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)slice->data + (size_t)o * row,
               (const char *)x->data + ((size_t)(o * len + index)) * row, row);
}

/* The stacked iterations (iteration order) into out, along axis, reversed when asked. */
static void scan_place(const loop_stack *s, int axis, bool reverse, tci_tensor *out) {
    int64_t len = s->count, outer, inner;
    scan_geometry(out->rank, out->dims, axis, &outer, &inner);
    size_t es = tci_dtype_size(out->dtype), row = (size_t)inner * es;
    size_t per = (size_t)op_count(&s->first) * es;
    for (int64_t t = 0; t < len; t++) {
        int64_t pos = reverse ? len - 1 - t : t;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out->data + ((size_t)(o * len + pos)) * row,
                   s->data + (size_t)t * per + (size_t)o * row, row);
    }
}

static tci_status scan_steps(const ir_node *node, const tci_tensor *const *in, int64_t len,
                             tci_tensor *states, bool *owned, tci_tensor *slices,
                             loop_stack *stacks, tci_tensor *body_out, int64_t max_elements) {
    const scan_params *p = node->params;
    int n = p->states, nin = p->states + p->inputs;
    const tci_tensor **bind = calloc((size_t)nin, sizeof *bind);
    if (!bind) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory running Scan");
    tci_status st = TCI_OK;
    for (int64_t t = 0; t < len && st == TCI_OK; t++) {
        for (int k = 0; k < n; k++) bind[k] = &states[k];
        for (int j = 0; j < p->inputs; j++) {
            const tci_tensor *x = in[n + j];
            int axis;
            scan_in_axis(node, j, x->rank, &axis);
            bool reverse = p->in_dirs && p->in_dirs[j];
            scan_slice(x, axis, reverse ? len - 1 - t : t, &slices[j]);
            bind[n + j] = &slices[j];
        }
        st = op_run_subgraph(p->body, bind, in, body_out, max_elements);
        if (st != TCI_OK) break;
        for (int k = 0; k < n && st == TCI_OK; k++)
            if (body_out[k].dtype != states[k].dtype)
                st = ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                   "state %d is %s, the body makes it %s", k,
                                   tci_dtype_name(states[k].dtype),
                                   tci_dtype_name(body_out[k].dtype));
        for (int k = 0; k < p->outputs && st == TCI_OK; k++)
            st = stack_push(node, k, &stacks[k], &body_out[n + k]);
        for (int k = 0; k < n; k++) {
            if (st != TCI_OK) {
                free(body_out[k].data);
                continue;
            }
            if (owned[k]) free(states[k].data);
            states[k] = body_out[k];
            owned[k] = true;
        }
        for (int k = 0; k < p->outputs; k++) free(body_out[n + k].data);
    }
    free(bind);
    return st;
}

/* Scan's inputs sliced: one buffer per scan input, its shape the input's without the axis. */
static tci_status scan_slices(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *slices) {
    const scan_params *p = node->params;
    for (int j = 0; j < p->inputs; j++) {
        const tci_tensor *x = in[p->states + j];
        int axis;
        TRY_STATUS(scan_in_axis(node, j, x->rank, &axis));
        slices[j].dtype = x->dtype;
        slices[j].rank = x->rank - 1;
        for (int d = 0, s = 0; d < x->rank; d++)
            if (d != axis) slices[j].dims[s++] = x->dims[d];
        size_t bytes = (size_t)op_count(&slices[j]) * tci_dtype_size(x->dtype);
        slices[j].data = malloc(bytes ? bytes : 1);
        if (!slices[j].data) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return TCI_OK;
}

static tci_status scan_run(const ir_node *node, const tci_tensor *const *in,
                           tci_tensor *const *out, int64_t max_elements) {
    const scan_params *p = node->params;
    int n = p->states;
    int64_t len;
    TRY_STATUS(scan_length(node, in, &len));
    tci_tensor *states = calloc((size_t)n + 1, sizeof *states);
    bool *owned = calloc((size_t)n + 1, sizeof *owned);
    tci_tensor *slices = calloc((size_t)p->inputs, sizeof *slices);
    loop_stack *stacks = calloc((size_t)p->outputs + 1, sizeof *stacks);
    tci_tensor *body_out = calloc((size_t)(n + p->outputs) + 1, sizeof *body_out);
    tci_status st = TCI_OK;
    if (!states || !owned || !slices || !stacks || !body_out)
        st = ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory running Scan");
    for (int k = 0; st == TCI_OK && k < n; k++) states[k] = *in[k];
    if (st == TCI_OK) st = scan_slices(node, in, slices);
    if (st == TCI_OK)
        st = scan_steps(node, in, len, states, owned, slices, stacks, body_out, max_elements);
    if (st != TCI_OK && states) st = status_error_prefix(st, "node '%s' (Scan)", node->name);
    if (st == TCI_OK && len == 0 && p->outputs)
        st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                           "the scan inputs are empty along their axis: no iteration gives the "
                           "scan outputs' shapes");
    for (int k = 0; st == TCI_OK && k < n; k++) {
        if (!out[k]) continue;
        if (owned[k]) {
            const char *name = out[k]->name;
            *out[k] = states[k];
            out[k]->name = name;
            owned[k] = false;
        } else {
            st = copy_value(node, out[k], &states[k]);
        }
    }
    for (int k = 0; st == TCI_OK && k < p->outputs; k++) {
        tci_tensor *o = out[n + k];
        const loop_stack *s = &stacks[k];
        if (!o) continue;
        if (s->first.rank >= TCI_MAX_RANK) {
            st = ir_node_error(node, TCI_ERR_UNSUPPORTED,
                               "scan output %d would have rank %d; at most %d is supported", k,
                               s->first.rank + 1, TCI_MAX_RANK);
            break;
        }
        int axis;
        st = op_normalize_axis(node, p->out_axes ? p->out_axes[k] : 0, s->first.rank + 1, &axis);
        if (st != TCI_OK) break;
        const char *name = o->name;
        memset(o, 0, sizeof *o);
        o->name = name;
        o->dtype = s->first.dtype;
        o->rank = s->first.rank + 1;
        for (int d = 0, j = 0; d < o->rank; d++) o->dims[d] = d == axis ? len : s->first.dims[j++];
        size_t bytes = (size_t)op_count(o) * tci_dtype_size(o->dtype);
        o->data = malloc(bytes ? bytes : 1);
        if (!o->data) {
            st = ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        scan_place(s, axis, p->out_dirs && p->out_dirs[k], o);
    }
    if (st != TCI_OK)
        for (int k = 0; k < node->num_outputs; k++)
            if (out[k]) {
                free(out[k]->data);
                out[k]->data = NULL;
            }
    for (int k = 0; owned && k < n; k++)
        if (owned[k]) free(states[k].data);
    for (int j = 0; slices && j < p->inputs; j++) free(slices[j].data);
    for (int k = 0; stacks && k < p->outputs; k++) free(stacks[k].data);
    free(states);
    free(owned);
    free(slices);
    free(stacks);
    free(body_out);
    return st;
}

static const op_desc scan_op = {.op_type = "Scan",
                                .versions = OP_VERSIONS(9, 11, 16, 19, 21, 23, 24, 25),
                                .parse = scan_parse,
                                .infer = scan_infer,
                                .flags = OP_CONTROL_FLOW,
                                .binary = BINARY_NONE,
                                .cpu_run = scan_run};

const op_desc *const layer_control_ops[] = {&if_op, &loop_op, &scan_op, NULL};
