/* IR construction, attribute access and topological sorting. */
#include "graph/ir.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tci_status ir_graph_create(ir_graph **out_graph) {
    *out_graph = NULL;
    ir_graph *g = calloc(1, sizeof *g);
    if (!g) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating graph");
    g->arena = arena_create();
    if (!g->arena) {
        free(g);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating graph arena");
    }
    *out_graph = g;
    return TCI_OK;
}

void ir_graph_destroy(ir_graph *graph) {
    if (!graph) return;
    /* node/tensor pointer arrays grow with realloc; everything they point at is in the arena */
    free(graph->nodes);
    free(graph->tensors);
    arena_destroy(graph->arena);
    free(graph);
}

tci_status ir_graph_clone(const ir_graph *src, ir_graph **out_graph) {
    *out_graph = NULL;
    ir_graph *g = NULL;
    TRY_STATUS(ir_graph_create(&g));
    mem_arena *a = g->arena;
    g->name = src->name;
    g->ir_version = src->ir_version;
    g->opsets = src->opsets;
    g->num_opsets = src->num_opsets;
    g->tensors = malloc((src->num_tensors + 1) * sizeof *g->tensors);
    g->nodes = malloc((src->num_nodes + 1) * sizeof *g->nodes);
    g->inputs = arena_alloc(a, (src->num_inputs + 1) * sizeof *g->inputs);
    g->outputs = arena_alloc(a, (src->num_outputs + 1) * sizeof *g->outputs);
    bool ok = g->tensors && g->nodes && g->inputs && g->outputs;
    g->cap_tensors = g->tensors ? src->num_tensors + 1 : 0;
    g->cap_nodes = g->nodes ? src->num_nodes + 1 : 0;
    for (size_t i = 0; ok && i < src->num_tensors; i++) {
        ir_tensor *t = arena_memdup(a, src->tensors[i], sizeof *t);
        ok = t != NULL;
        if (ok) {
            t->producer = NULL; /* relinked below */
            t->index = i;
            g->tensors[g->num_tensors++] = t;
        }
    }
    for (size_t i = 0; ok && i < src->num_nodes; i++) {
        const ir_node *s = src->nodes[i];
        ir_node *n = arena_memdup(a, s, sizeof *n);
        ok = n != NULL;
        if (ok) {
            n->params = NULL;
            n->epilogue = NULL;
            n->fused_into = NULL;
            n->index = i;
            n->inputs = arena_alloc(a, sizeof(ir_tensor *) * (size_t)(s->num_inputs + 1));
            n->outputs = arena_alloc(a, sizeof(ir_tensor *) * (size_t)(s->num_outputs + 1));
            ok = n->inputs && n->outputs;
        }
        for (int k = 0; ok && k < s->num_inputs; k++)
            n->inputs[k] = s->inputs[k] ? g->tensors[s->inputs[k]->index] : NULL;
        for (int k = 0; ok && k < s->num_outputs; k++) {
            n->outputs[k] = s->outputs[k] ? g->tensors[s->outputs[k]->index] : NULL;
            if (n->outputs[k]) n->outputs[k]->producer = n;
        }
        if (ok) g->nodes[g->num_nodes++] = n;
    }
    for (size_t i = 0; ok && i < src->num_inputs; i++) g->inputs[i] = g->tensors[src->inputs[i]->index];
    for (size_t i = 0; ok && i < src->num_outputs; i++)
        g->outputs[i] = g->tensors[src->outputs[i]->index];
    g->num_inputs = src->num_inputs;
    g->num_outputs = src->num_outputs;
    if (!ok) {
        ir_graph_destroy(g);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory copying the graph");
    }
    *out_graph = g;
    return TCI_OK;
}

static tci_status grow(void **array, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return TCI_OK;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *p = realloc(*array, n * elem);
    if (!p) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory growing graph");
    *array = p;
    *cap = n;
    return TCI_OK;
}

ir_tensor *ir_graph_find_tensor(const ir_graph *graph, const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < graph->num_tensors; i++) {
        const char *n = graph->tensors[i]->name;
        if (n && strcmp(n, name) == 0) return graph->tensors[i];
    }
    return NULL;
}

tci_status ir_graph_add_tensor(ir_graph *graph, const char *name, ir_tensor **out_tensor) {
    *out_tensor = NULL;
    if (name && ir_graph_find_tensor(graph, name))
        return status_error(TCI_ERR_INVALID_MODEL, "tensor '%s' is defined twice", name);
    TRY_STATUS(grow((void **)&graph->tensors, &graph->cap_tensors, graph->num_tensors + 1,
                 sizeof(ir_tensor *)));
    ir_tensor *t = arena_alloc(graph->arena, sizeof *t);
    if (!t) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory adding tensor");
    t->name = arena_strdup(graph->arena, name);
    if (name && !t->name) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory adding tensor");
    t->rank = -1;
    for (int i = 0; i < TCI_MAX_RANK; i++) t->dims[i] = -1;
    t->index = graph->num_tensors;
    graph->tensors[graph->num_tensors++] = t;
    *out_tensor = t;
    return TCI_OK;
}

tci_status ir_graph_add_node(ir_graph *graph, const char *name, const char *op_type,
                             const char *domain, int num_inputs, int num_outputs,
                             ir_node **out_node) {
    *out_node = NULL;
    TRY_STATUS(grow((void **)&graph->nodes, &graph->cap_nodes, graph->num_nodes + 1,
                 sizeof(ir_node *)));
    mem_arena *a = graph->arena;
    ir_node *n = arena_alloc(a, sizeof *n);
    if (!n) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory adding node");
    n->op_type = arena_strdup(a, op_type);
    n->domain = arena_strdup(a, domain ? domain : "");
    if (name && name[0]) {
        n->name = arena_strdup(a, name);
    } else {
        char buf[160];
        snprintf(buf, sizeof buf, "%s_%zu", op_type, graph->num_nodes);
        n->name = arena_strdup(a, buf);
    }
    n->num_inputs = num_inputs;
    n->num_outputs = num_outputs;
    n->inputs = arena_alloc(a, sizeof(ir_tensor *) * (size_t)(num_inputs + 1));
    n->outputs = arena_alloc(a, sizeof(ir_tensor *) * (size_t)(num_outputs + 1));
    if (!n->op_type || !n->domain || !n->name || !n->inputs || !n->outputs)
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory adding node");
    graph->nodes[graph->num_nodes++] = n;
    *out_node = n;
    return TCI_OK;
}

/* Kahn's algorithm over producer links; stable with respect to the file's order. */
tci_status ir_graph_sort(ir_graph *graph) {
    size_t n = graph->num_nodes;
    for (size_t t = 0; t < graph->num_tensors; t++) graph->tensors[t]->producer = NULL;
    for (size_t i = 0; i < n; i++) {
        ir_node *node = graph->nodes[i];
        for (int o = 0; o < node->num_outputs; o++) {
            ir_tensor *t = node->outputs[o];
            if (!t) continue;
            if (t->producer)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "output '%s' is also produced by node '%s'", t->name,
                                     t->producer->name);
            if (t->data || t->is_graph_input)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "output '%s' is also a graph input or initializer",
                                     t->name);
            t->producer = node;
        }
    }
    for (size_t i = 0; i < n; i++) {
        ir_node *node = graph->nodes[i];
        for (int k = 0; k < node->num_inputs; k++) {
            ir_tensor *t = node->inputs[k];
            if (t && !t->producer && !t->data && !t->is_graph_input)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "input '%s' is not produced by any node, initializer or "
                                     "graph input",
                                     t->name ? t->name : "?");
        }
    }
    if (n == 0) return TCI_OK;
    ir_node **order = malloc(n * sizeof *order);
    unsigned char *state = calloc(n, 1); /* 0 pending, 1 placed */
    if (!order || !state) {
        free(order);
        free(state);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory sorting graph");
    }
    for (size_t i = 0; i < n; i++) graph->nodes[i]->index = i;
    /* repeated sweeps: quadratic only for adversarial orders; exported graphs are almost always
     * sorted already, so one sweep suffices */
    size_t placed = 0;
    bool progress = true;
    while (placed < n && progress) {
        progress = false;
        for (size_t i = 0; i < n; i++) {
            if (state[i]) continue;
            ir_node *node = graph->nodes[i];
            bool ready = true;
            for (int k = 0; k < node->num_inputs && ready; k++) {
                ir_tensor *t = node->inputs[k];
                if (t && t->producer && !state[t->producer->index]) ready = false;
            }
            if (ready) {
                order[placed++] = node;
                state[i] = 1;
                progress = true;
            }
        }
    }
    tci_status st = TCI_OK;
    if (placed < n) {
        for (size_t i = 0; i < n; i++)
            if (!state[i]) {
                st = ir_node_error(graph->nodes[i], TCI_ERR_INVALID_MODEL,
                                   "the graph has a cycle through this node");
                break;
            }
    } else {
        memcpy(graph->nodes, order, n * sizeof *order);
        for (size_t i = 0; i < n; i++) graph->nodes[i]->index = i;
    }
    free(order);
    free(state);
    return st;
}

tci_status ir_count_elements(int rank, const int64_t *dims, int64_t *out_count) {
    *out_count = -1;
    if (rank < 0) return TCI_OK;
    int64_t c = 1;
    bool unknown = false;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) {
            unknown = true;
            continue;
        }
        if (dims[i] != 0 && c > INT64_MAX / dims[i])
            return status_error(TCI_ERR_INVALID_MODEL, "element count of shape overflows int64");
        c *= dims[i];
    }
    *out_count = unknown ? -1 : c;
    return TCI_OK;
}

const ir_attr *ir_node_attr(const ir_node *node, const char *name) {
    for (int i = 0; i < node->num_attrs; i++)
        if (strcmp(node->attrs[i].name, name) == 0) return &node->attrs[i];
    return NULL;
}

static const char *attr_type_name(ir_attr_type t) {
    static const char *names[] = {"undefined", "float",   "int",     "string",  "tensor", "graph",
                                  "floats",    "ints",    "strings", "tensors", "graphs"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static tci_status attr_get(const ir_node *node, const char *name, ir_attr_type want,
                           const ir_attr **out) {
    *out = ir_node_attr(node, name);
    if (*out && (*out)->type != want)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute '%s' is %s, expected %s",
                             name, attr_type_name((*out)->type), attr_type_name(want));
    return TCI_OK;
}

tci_status ir_attr_int(const ir_node *node, const char *name, int64_t def, int64_t *out) {
    const ir_attr *a;
    TRY_STATUS(attr_get(node, name, IR_ATTR_INT, &a));
    *out = a ? a->i : def;
    return TCI_OK;
}

tci_status ir_attr_float(const ir_node *node, const char *name, float def, float *out) {
    const ir_attr *a;
    TRY_STATUS(attr_get(node, name, IR_ATTR_FLOAT, &a));
    *out = a ? a->f : def;
    return TCI_OK;
}

tci_status ir_attr_string(const ir_node *node, const char *name, const char *def,
                          const char **out) {
    const ir_attr *a;
    TRY_STATUS(attr_get(node, name, IR_ATTR_STRING, &a));
    *out = a ? a->s : def;
    return TCI_OK;
}

tci_status ir_attr_ints(const ir_node *node, const char *name, const int64_t **out,
                        size_t *count) {
    const ir_attr *a;
    TRY_STATUS(attr_get(node, name, IR_ATTR_INTS, &a));
    *out = a ? a->ints : NULL;
    *count = a ? a->count : 0;
    return TCI_OK;
}

tci_status ir_attr_floats(const ir_node *node, const char *name, const float **out,
                          size_t *count) {
    const ir_attr *a;
    TRY_STATUS(attr_get(node, name, IR_ATTR_FLOATS, &a));
    *out = a ? a->floats : NULL;
    *count = a ? a->count : 0;
    return TCI_OK;
}

tci_status ir_check_attrs(const ir_node *node, const char *const *known) {
    for (int i = 0; i < node->num_attrs; i++) {
        bool ok = false;
        for (const char *const *k = known; *k; k++)
            if (strcmp(*k, node->attrs[i].name) == 0) ok = true;
        if (!ok)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED, "unsupported attribute '%s'",
                                 node->attrs[i].name);
    }
    return TCI_OK;
}

tci_status ir_node_error(const ir_node *node, tci_status status, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return status_error(status, "node '%s' (%s): %s", node->name, node->op_type, msg);
}

void ir_tensor_copy_shape(ir_tensor *dst, const tci_tensor *src) {
    dst->dtype = src->dtype;
    dst->rank = src->rank;
    for (int i = 0; i < TCI_MAX_RANK; i++) dst->dims[i] = i < src->rank ? src->dims[i] : -1;
}

void ir_tensor_view(const ir_tensor *t, tci_tensor *out) {
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->rank = t->rank;
    for (int i = 0; i < TCI_MAX_RANK; i++) out->dims[i] = t->dims[i];
    out->data = t->data;
}

const char *ir_format_dims(int rank, const int64_t *dims, char *buf, size_t size) {
    if (rank < 0) {
        snprintf(buf, size, "(unknown rank)");
        return buf;
    }
    if (rank == 0) {
        snprintf(buf, size, "scalar");
        return buf;
    }
    size_t pos = 0;
    buf[0] = '\0';
    for (int i = 0; i < rank && pos < size; i++) {
        int w = dims[i] < 0 ? snprintf(buf + pos, size - pos, "%s?", i ? "x" : "")
                            : snprintf(buf + pos, size - pos, "%s%" PRId64, i ? "x" : "", dims[i]);
        if (w < 0) break;
        pos += (size_t)w;
    }
    return buf;
}
