/* Control flow: If, which runs one of two subgraphs (then_branch, else_branch) chosen by a bool
 * condition. Its subgraphs read the enclosing graph's tensors through the node's implicit
 * inputs (ir_node.num_implicit_inputs); it runs on the CPU reference only, unless a pass
 * inlines the branch a constant condition chooses (src/graph/passes/inline.c). */
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

const op_desc *const layer_control_ops[] = {&if_op, NULL};
