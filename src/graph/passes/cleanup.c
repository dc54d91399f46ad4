/* Pass-through removal, dead-node elimination, and the pass pipeline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "layers/op.h"

static void compact(ir_graph *g, const bool *remove) {
    size_t kept = 0;
    for (size_t i = 0; i < g->num_nodes; i++)
        if (!remove[i]) g->nodes[kept++] = g->nodes[i];
    g->num_nodes = kept;
    for (size_t i = 0; i < kept; i++) g->nodes[i]->index = i;
}

static bool is_read(const ir_graph *g, const ir_tensor *t) {
    if (t->is_graph_output) return true;
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k] == t) return true;
    return false;
}

tci_status pass_remove_passthrough(ir_graph *g) {
    if (g->num_nodes == 0) return TCI_OK;
    bool *remove = calloc(g->num_nodes, sizeof *remove);
    if (!remove) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory in pass");
    for (size_t i = 0; i < g->num_nodes; i++) {
        ir_node *n = g->nodes[i];
        if (!(n->desc->flags & OP_PASSTHROUGH) || !n->inputs[0] || !n->outputs[0]) continue;
        ir_tensor *src = n->inputs[0], *dst = n->outputs[0];
        /* a graph output must keep its name, and extra outputs (Dropout's mask) must be made */
        bool extra = false;
        for (int o = 1; o < n->num_outputs; o++)
            if (n->outputs[o] && is_read(g, n->outputs[o])) extra = true;
        if (extra || dst->is_graph_output) continue;
        for (size_t j = 0; j < g->num_nodes; j++)
            for (int k = 0; k < g->nodes[j]->num_inputs; k++)
                if (g->nodes[j]->inputs[k] == dst) g->nodes[j]->inputs[k] = src;
        remove[i] = true;
    }
    compact(g, remove);
    free(remove);
    return TCI_OK;
}

tci_status pass_rewrite_each(ir_graph *g, pass_rewrite_fn fn, const char *what) {
    tci_status st = TCI_OK;
    bool any = false, done = true;
    int *readers = NULL;
    const size_t num_nodes = g->num_nodes; /* the nodes added are not visited */
    for (size_t i = 0; st == TCI_OK && i < num_nodes; i++) {
        if (done) st = ir_graph_recount_readers(g, &readers, what);
        if (st != TCI_OK) break;
        done = false;
        st = fn(g, readers, g->nodes[i], &done);
        any = any || done;
    }
    free(readers);
    if (st != TCI_OK || !any) return st;
    TRY_STATUS(ir_graph_sort(g));
    return pass_eliminate_dead_nodes(g);
}

tci_status pass_eliminate_dead_nodes(ir_graph *g) {
    if (g->num_nodes == 0) return TCI_OK;
    bool *remove = calloc(g->num_nodes, sizeof *remove);
    size_t *readers = calloc(g->num_tensors, sizeof *readers);
    if (!remove || !readers) {
        free(remove);
        free(readers);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory in pass");
    }
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k]) readers[g->nodes[i]->inputs[k]->index]++;
    /* backwards, so removing a node can free its producers in the same sweep */
    for (size_t i = g->num_nodes; i-- > 0;) {
        ir_node *n = g->nodes[i];
        bool live = false;
        for (int o = 0; o < n->num_outputs; o++) {
            const ir_tensor *t = n->outputs[o];
            if (t && (t->is_graph_output || readers[t->index])) live = true;
        }
        if (live) continue;
        remove[i] = true;
        for (int k = 0; k < n->num_inputs; k++)
            if (n->inputs[k]) readers[n->inputs[k]->index]--;
    }
    compact(g, remove);
    free(remove);
    free(readers);
    return TCI_OK;
}

/* Prepares every node. What is unsupported (an op, a version, an attribute) is reported for all
 * the nodes at once, so one attempt names everything a model would need; any other error stops
 * at its node. */
static tci_status prepare_nodes(ir_graph *g) {
    char all[1800];
    size_t pos = 0, unsupported = 0;
    all[0] = '\0';
    for (size_t i = 0; i < g->num_nodes; i++) {
        tci_status st = op_prepare_node(g->nodes[i], g->arena);
        if (st == TCI_OK) continue;
        if (st != TCI_ERR_UNSUPPORTED) return st;
        if (unsupported++ == 0) {
            snprintf(all, sizeof all, "%s", tci_last_error());
            pos = strlen(all);
        } else if (pos < sizeof all) {
            int w = snprintf(all + pos, sizeof all - pos, "; %s", tci_last_error());
            pos = w < 0 ? sizeof all : pos + (size_t)w;
        }
    }
    if (!unsupported) return TCI_OK;
    if (pos >= sizeof all) memcpy(all + sizeof all - 5, "...", 4);
    if (unsupported == 1) return status_error(TCI_ERR_UNSUPPORTED, "%s", all);
    return status_error(TCI_ERR_UNSUPPORTED, "%zu nodes use what is not supported: %s",
                        unsupported, all);
}

tci_status pass_optimize(ir_graph *g) {
    TRY_STATUS(ir_graph_sort(g));
    TRY_STATUS(prepare_nodes(g));
    TRY_STATUS(pass_infer_and_fold(g));
    /* each round removes an inlined node; a branch may hold the next one */
    for (bool changed = true; changed;) {
        TRY_STATUS(pass_inline_known_branches(g, &changed));
        if (!changed) break;
        TRY_STATUS(ir_graph_sort(g));
        TRY_STATUS(pass_infer_and_fold(g));
    }
    TRY_STATUS(pass_remove_passthrough(g));
    return pass_eliminate_dead_nodes(g);
}
