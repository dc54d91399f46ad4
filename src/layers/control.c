/* Control flow: If, which runs one of two subgraphs (then_branch, else_branch) chosen by a bool
 * condition, and Loop, which runs its body while a trip count and a condition allow (at most
 * max_loop_iterations times), carrying values from one iteration to the next and stacking
 * per-iteration scan outputs (Scan: scan.c). Subgraphs read the enclosing graph's tensors through the node's
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
            st = op_carried_infer(node, "loop-carried value", k, in[2 + k], b, out[k]);
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

static tci_status loop_iterate(const ir_node *node, const tci_tensor *const *in, op_carried *c,
                               op_value_stack *stacks, tci_tensor *body_out,
                               int64_t max_elements) {
    const loop_params *p = node->params;
    int n = p->carried, nb = (int)p->body->num_outputs;
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
        for (int k = 0; k < n; k++) bind[2 + k] = &c->v[k];
        st = op_run_subgraph(p->body, bind, in, body_out, max_elements);
        if (st != TCI_OK) { /* named by the body's node: this one's name goes before */
            st = status_error_prefix(st, "node '%s' (Loop)", node->name);
            break;
        }
        const tci_tensor *next = &body_out[0];
        if (next->dtype != TCI_DTYPE_BOOL || op_count(next) != 1)
            st = ir_node_error(node, TCI_ERR_INVALID_MODEL,
                               "the body's condition output is not one bool");
        else if (in[1])
            cond = ((const uint8_t *)next->data)[0] != 0;
        if (st == TCI_OK) st = op_carried_take(node, c, body_out + 1);
        for (int k = 0; k < p->scans && st == TCI_OK; k++)
            st = op_stack_push(node, k, &stacks[k], &body_out[1 + n + k]);
        for (int k = 0; k < nb; k++) free(body_out[k].data);
    }
    free(bind);
    return st;
}

static tci_status loop_run(const ir_node *node, const tci_tensor *const *in,
                           tci_tensor *const *out, int64_t max_elements) {
    const loop_params *p = node->params;
    int n = p->carried;
    if (in[0]) TRY_STATUS(loop_scalar(node, in[0], 0, trip_types));
    if (in[1]) TRY_STATUS(loop_scalar(node, in[1], 1, cond_types));
    op_carried c = {0};
    op_value_stack *stacks = calloc((size_t)p->scans + 1, sizeof *stacks);
    tci_tensor *body_out = calloc(p->body->num_outputs, sizeof *body_out);
    tci_status st = stacks && body_out
                        ? op_carried_init(node, &c, "loop-carried value", n, in + 2)
                        : ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory running Loop");
    if (st == TCI_OK) st = loop_iterate(node, in, &c, stacks, body_out, max_elements);
    /* no iteration ran: each scan output is empty, its other dims from the body's inference */
    if (st == TCI_OK) st = op_stack_infer_empty(node, loop_infer, in, n, p->scans, stacks, NULL);
    if (st == TCI_OK) st = op_carried_out(node, &c, out);
    for (int k = 0; st == TCI_OK && k < p->scans; k++)
        if (out[n + k])
            st = op_stack_output(node, k, &stacks[k], 0, false, max_elements, out[n + k]);
    if (st != TCI_OK)
        for (int k = 0; k < node->num_outputs; k++)
            if (out[k]) {
                free(out[k]->data);
                out[k]->data = NULL;
            }
    op_carried_free(&c);
    for (int k = 0; stacks && k < p->scans; k++) free(stacks[k].data);
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

const op_desc *const layer_control_ops[] = {&if_op, &loop_op, NULL};
