/* Inlining of control flow decided at build: a node whose constant inputs choose the subgraph it
 * runs (an If with a known condition, op_desc.known_branch) is replaced by that subgraph's nodes,
 * so the graph holds plain nodes only (what the GPU planner can lower). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "layers/op.h"

/* "prefix/name", made unique in g with a numeric suffix; NULL name: an anonymous tensor. */
static tci_status add_tensor_named(ir_graph *g, const char *prefix, const char *name,
                                   ir_tensor **out) {
    if (!name) return ir_graph_add_tensor(g, NULL, out);
    char buf[512];
    snprintf(buf, sizeof buf, "%.240s/%.240s", prefix, name);
    size_t len = strlen(buf);
    for (int k = 1; ir_graph_find_tensor(g, buf); k++)
        snprintf(buf + len, sizeof buf - len, "_%d", k);
    return ir_graph_add_tensor(g, buf, out);
}

/* Where a branch output comes from when the copied nodes cannot write the node's output
 * themselves: an outer value, a constant, or an output listed twice. */
static bool written_by_copy(const ir_graph *b, size_t k) {
    const ir_tensor *t = b->outputs[k];
    if (t->is_outer || t->data || !t->producer) return false;
    for (size_t j = 0; j < k; j++)
        if (b->outputs[j] == t) return false;
    return true;
}

/* Whether n can be replaced: an output of n that is a graph output and that the branch does not
 * compute must be a constant (a graph output keeps its tensor). */
static bool can_inline(const ir_node *n, const ir_graph *b) {
    for (size_t k = 0; k < b->num_outputs; k++) {
        const ir_tensor *out = n->outputs[k];
        if (!out || !out->is_graph_output || written_by_copy(b, k)) continue;
        if (!b->outputs[k]->data) return false;
    }
    return true;
}

static void replace_reads(ir_graph *g, const ir_tensor *from, ir_tensor *to) {
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k] == from) g->nodes[i]->inputs[k] = to;
}

static tci_status inline_node(ir_graph *g, ir_node *n, const ir_graph *b) {
    ir_tensor **map = calloc(b->num_tensors + 1, sizeof *map);
    if (!map) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory inlining");
    tci_status st = TCI_OK;
    for (size_t i = 0; i < b->num_outer; i++)
        map[b->outer[i]->index] = n->inputs[b->outer_slot[i]];
    for (size_t k = 0; k < b->num_outputs; k++)
        if (written_by_copy(b, k) && n->outputs[k]) map[b->outputs[k]->index] = n->outputs[k];
    for (size_t t = 0; t < b->num_tensors && st == TCI_OK; t++) {
        const ir_tensor *bt = b->tensors[t];
        if (map[t] || !bt->name) continue; /* anonymous: an attribute's tensor, read through it */
        st = add_tensor_named(g, n->name, bt->name, &map[t]);
        if (st != TCI_OK) break;
        if (bt->data) { /* a constant of the branch: its bytes are shared, read-only */
            map[t]->dtype = bt->dtype;
            map[t]->rank = bt->rank;
            memcpy(map[t]->dims, bt->dims, sizeof bt->dims);
            map[t]->data = bt->data;
        }
    }
    for (size_t i = 0; i < b->num_nodes && st == TCI_OK; i++) {
        const ir_node *m = b->nodes[i];
        char name[512];
        snprintf(name, sizeof name, "%.240s/%.240s", n->name, m->name);
        ir_node *c;
        st = ir_graph_add_node(g, name, m->op_type, m->domain, m->num_inputs, m->num_outputs, &c);
        if (st != TCI_OK) break;
        c->opset = m->opset;
        c->since_version = m->since_version;
        c->desc = m->desc;
        c->params = m->params;
        c->attrs = m->attrs;
        c->num_attrs = m->num_attrs;
        c->num_implicit_inputs = m->num_implicit_inputs;
        for (int k = 0; k < m->num_inputs; k++)
            c->inputs[k] = m->inputs[k] ? map[m->inputs[k]->index] : NULL;
        for (int k = 0; k < m->num_outputs; k++)
            c->outputs[k] = m->outputs[k] ? map[m->outputs[k]->index] : NULL;
    }
    /* outputs of n that the copies do not write: its readers read the source instead, or (a
     * graph output) it becomes the constant */
    for (size_t k = 0; k < b->num_outputs && st == TCI_OK; k++) {
        ir_tensor *out = n->outputs[k];
        if (!out || written_by_copy(b, k)) continue;
        ir_tensor *src = map[b->outputs[k]->index];
        if (out->is_graph_output) {
            out->dtype = src->dtype;
            out->rank = src->rank;
            memcpy(out->dims, src->dims, sizeof src->dims);
            out->data = src->data;
        } else {
            replace_reads(g, out, src);
        }
    }
    free(map);
    return st;
}

tci_status pass_inline_known_branches(ir_graph *g, bool *changed) {
    *changed = false;
    size_t count = g->num_nodes;
    bool *remove = calloc(count + 1, sizeof *remove);
    if (!remove) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory in pass");
    tci_status st = TCI_OK;
    for (size_t i = 0; i < count && st == TCI_OK; i++) {
        ir_node *n = g->nodes[i];
        const ir_graph *b = n->desc && n->desc->known_branch ? n->desc->known_branch(n) : NULL;
        if (!b || !can_inline(n, b)) continue;
        st = inline_node(g, n, b);
        remove[i] = st == TCI_OK;
        *changed = *changed || remove[i];
    }
    /* the copies were appended after the first count nodes; ir_graph_sort orders them */
    size_t kept = 0;
    for (size_t i = 0; i < g->num_nodes; i++)
        if (i >= count || !remove[i]) g->nodes[kept++] = g->nodes[i];
    g->num_nodes = kept;
    for (size_t i = 0; i < kept; i++) g->nodes[i]->index = i;
    free(remove);
    return st;
}
