/* IR construction, the name index, limits, attribute access and topological sorting. */
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
    ir_limits_default(&g->limits);
    *out_graph = g;
    return TCI_OK;
}

void ir_limits_default(ir_limits *limits) {
    limits->max_model_bytes = IR_DEFAULT_MAX_MODEL_BYTES;
    limits->max_tensor_elements = IR_DEFAULT_MAX_TENSOR_ELEMENTS;
    limits->max_constant_bytes = IR_DEFAULT_MAX_CONSTANT_BYTES;
    limits->max_nodes = IR_DEFAULT_MAX_NODES;
    limits->max_nesting = IR_DEFAULT_MAX_NESTING;
    limits->max_parse_bytes = IR_DEFAULT_MAX_PARSE_BYTES;
    limits->max_loop_iterations = IR_DEFAULT_MAX_LOOP_ITERATIONS;
}

tci_status ir_graph_charge_constant(ir_graph *graph, const char *what, int64_t elements,
                                    size_t elem_size) {
    if (elements > graph->limits.max_tensor_elements)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "%s has %" PRId64 " elements, over the limit of %" PRId64
                            " (max_tensor_elements)",
                            what, elements, graph->limits.max_tensor_elements);
    uint64_t bytes = (uint64_t)(elements < 0 ? 0 : elements) * (uint64_t)elem_size;
    if (bytes > graph->limits.max_constant_bytes ||
        graph->constant_bytes > graph->limits.max_constant_bytes - bytes)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "%s: %" PRIu64 " more bytes of constants would pass the limit of %" PRIu64
                            " (max_constant_bytes; %" PRIu64 " taken so far)",
                            what, bytes, graph->limits.max_constant_bytes, graph->constant_bytes);
    graph->constant_bytes += bytes;
    return TCI_OK;
}

/* FNV-1a */
static size_t name_hash(const char *s) {
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

static void index_put(ir_tensor **slots, size_t cap, ir_tensor *t) {
    size_t i = name_hash(t->name) & (cap - 1);
    while (slots[i]) i = (i + 1) & (cap - 1);
    slots[i] = t;
}

/* Adds a named tensor to the hash index, doubling it at half load. */
static tci_status index_insert(ir_graph *g, ir_tensor *t) {
    if (!t->name) return TCI_OK;
    if (g->num_tensors * 2 >= g->by_name_cap) {
        size_t cap = g->by_name_cap ? g->by_name_cap * 2 : 64;
        while (cap < g->num_tensors * 2 + 2) cap *= 2;
        ir_tensor **slots = calloc(cap, sizeof *slots);
        if (!slots) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory indexing tensors");
        for (size_t i = 0; i < g->by_name_cap; i++)
            if (g->by_name[i]) index_put(slots, cap, g->by_name[i]);
        free(g->by_name);
        g->by_name = slots;
        g->by_name_cap = cap;
    }
    index_put(g->by_name, g->by_name_cap, t);
    return TCI_OK;
}

static void free_arrays(ir_graph *graph) {
    /* node/tensor pointer arrays grow with realloc; everything they point at is in the arena */
    free(graph->by_name);
    free(graph->nodes);
    free(graph->tensors);
}

void ir_graph_destroy(ir_graph *graph) {
    if (!graph) return;
    if (graph->parent) return; /* a subgraph belongs to its root */
    for (size_t i = 0; i < graph->num_subgraphs; i++) {
        free_arrays(graph->subgraphs[i]);
        free(graph->subgraphs[i]);
    }
    free(graph->subgraphs);
    free_arrays(graph);
    arena_destroy(graph->arena);
    free(graph);
}

const ir_graph *ir_graph_root(const ir_graph *graph) {
    while (graph->parent) graph = graph->parent;
    return graph;
}

tci_status ir_graph_add_subgraph(ir_graph *parent, ir_graph **out_graph) {
    *out_graph = NULL;
    ir_graph *root = parent;
    while (root->parent) root = (ir_graph *)root->parent;
    ir_graph **list = realloc(root->subgraphs, (root->num_subgraphs + 1) * sizeof *list);
    if (!list) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory adding a subgraph");
    root->subgraphs = list;
    ir_graph *g = calloc(1, sizeof *g);
    if (!g) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory adding a subgraph");
    g->arena = root->arena;
    g->parent = parent;
    g->limits = root->limits;
    g->opsets = root->opsets;
    g->num_opsets = root->num_opsets;
    g->ir_version = root->ir_version;
    root->subgraphs[root->num_subgraphs++] = g;
    *out_graph = g;
    return TCI_OK;
}

tci_status ir_graph_clone(const ir_graph *src, ir_graph **out_graph) {
    *out_graph = NULL;
    ir_graph *g = NULL;
    TRY_STATUS(ir_graph_create(&g));
    mem_arena *a = g->arena;
    g->name = src->name;
    g->ir_version = src->ir_version;
    g->limits = src->limits;
    g->constant_bytes = src->constant_bytes;
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
            ok = index_insert(g, t) == TCI_OK;
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
    if (!name || !graph->by_name_cap) return NULL;
    size_t mask = graph->by_name_cap - 1;
    for (size_t i = name_hash(name) & mask; graph->by_name[i]; i = (i + 1) & mask)
        if (strcmp(graph->by_name[i]->name, name) == 0) return graph->by_name[i];
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
    TRY_STATUS(index_insert(graph, t));
    graph->tensors[graph->num_tensors++] = t;
    *out_tensor = t;
    return TCI_OK;
}

static tci_status add_constant(ir_graph *graph, tci_dtype dtype, size_t elem, const void *values,
                               int rank, const int64_t *dims, ir_tensor **out_tensor) {
    TRY_STATUS(ir_graph_add_tensor(graph, NULL, out_tensor));
    ir_tensor *t = *out_tensor;
    int64_t count = 1;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) count *= t->dims[i] = dims[i];
    t->data = arena_memdup(graph->arena, values, (size_t)count * elem);
    if (!t->data && count)
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory adding a constant");
    return TCI_OK;
}

tci_status ir_graph_add_float_constant(ir_graph *graph, const float *values, int rank,
                                       const int64_t *dims, ir_tensor **out_tensor) {
    return add_constant(graph, TCI_DTYPE_FLOAT, sizeof(float), values, rank, dims, out_tensor);
}

tci_status ir_graph_add_int64_constant(ir_graph *graph, const int64_t *values, int rank,
                                       const int64_t *dims, ir_tensor **out_tensor) {
    return add_constant(graph, TCI_DTYPE_INT64, sizeof(int64_t), values, rank, dims, out_tensor);
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

/* Binary min-heap of node indices: Kahn's algorithm takes the ready node that comes first in
 * the file, so the order is stable and a sorted graph stays as it is. */
static void heap_push(size_t *heap, size_t *len, size_t v) {
    size_t i = (*len)++;
    while (i > 0 && heap[(i - 1) / 2] > v) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = v;
}

static size_t heap_pop(size_t *heap, size_t *len) {
    size_t top = heap[0], v = heap[--*len], i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *len) break;
        if (c + 1 < *len && heap[c + 1] < heap[c]) c++;
        if (heap[c] >= v) break;
        heap[i] = heap[c];
        i = c;
    }
    if (*len) heap[i] = v;
    return top;
}

/* Kahn's algorithm over producer links: O(E + n log n) for n nodes and E input edges. */
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
            if (t->data || t->is_graph_input || t->is_outer)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "output '%s' is also a graph input or initializer%s",
                                     t->name, t->is_outer ? " of an enclosing graph" : "");
            t->producer = node;
        }
    }
    size_t edges = 0;
    for (size_t i = 0; i < n; i++) {
        ir_node *node = graph->nodes[i];
        for (int k = 0; k < node->num_inputs; k++) {
            ir_tensor *t = node->inputs[k];
            if (t && !t->producer && !t->data && !t->is_graph_input && !t->is_outer)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "input '%s' is not produced by any node, initializer or "
                                     "graph input",
                                     t->name ? t->name : "?");
            if (t && t->producer) edges++;
        }
    }
    if (n == 0) return TCI_OK;
    /* consumers of each node in CSR form: first[p]..first[p+1] index into next[] */
    ir_node **order = malloc(n * sizeof *order);
    size_t *pending = calloc(n, sizeof *pending), *first = calloc(n + 1, sizeof *first);
    size_t *next = malloc((edges ? edges : 1) * sizeof *next), *heap = malloc(n * sizeof *heap);
    tci_status st = TCI_OK;
    if (!order || !pending || !first || !next || !heap) {
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory sorting graph");
        goto done;
    }
    for (size_t i = 0; i < n; i++) graph->nodes[i]->index = i;
    for (size_t i = 0; i < n; i++) {
        const ir_node *node = graph->nodes[i];
        for (int k = 0; k < node->num_inputs; k++) {
            const ir_tensor *t = node->inputs[k];
            if (t && t->producer) {
                first[t->producer->index + 1]++;
                pending[i]++;
            }
        }
    }
    for (size_t p = 0; p < n; p++) first[p + 1] += first[p];
    for (size_t i = 0; i < n; i++) {
        const ir_node *node = graph->nodes[i];
        for (int k = 0; k < node->num_inputs; k++) {
            const ir_tensor *t = node->inputs[k];
            if (t && t->producer) next[first[t->producer->index]++] = i;
        }
    }
    /* first[p] now ends p's run; shift back so that first[p] starts it */
    for (size_t p = n; p > 0; p--) first[p] = first[p - 1];
    first[0] = 0;
    size_t heap_len = 0, placed = 0;
    for (size_t i = 0; i < n; i++)
        if (!pending[i]) heap_push(heap, &heap_len, i);
    while (heap_len) {
        size_t i = heap_pop(heap, &heap_len);
        order[placed++] = graph->nodes[i];
        for (size_t e = first[i]; e < first[i + 1]; e++)
            if (--pending[next[e]] == 0) heap_push(heap, &heap_len, next[e]);
    }
    if (placed < n) {
        for (size_t i = 0; i < n; i++)
            if (pending[i]) {
                st = ir_node_error(graph->nodes[i], TCI_ERR_INVALID_MODEL,
                                   "the graph has a cycle through this node");
                break;
            }
    } else {
        memcpy(graph->nodes, order, n * sizeof *order);
        for (size_t i = 0; i < n; i++) graph->nodes[i]->index = i;
    }
done:
    free(order);
    free(pending);
    free(first);
    free(next);
    free(heap);
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

int *ir_graph_count_readers(const ir_graph *g) {
    int *readers = calloc(g->num_tensors + 1, sizeof *readers);
    if (!readers) return NULL;
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k]) readers[g->nodes[i]->inputs[k]->index]++;
    for (size_t i = 0; i < g->num_outputs; i++) readers[g->outputs[i]->index]++;
    return readers;
}

tci_status ir_graph_recount_readers(const ir_graph *g, int **readers, const char *what) {
    free(*readers);
    *readers = ir_graph_count_readers(g);
    return *readers ? TCI_OK : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory %s", what);
}

ir_node *ir_graph_reader(const ir_graph *g, const ir_tensor *t, size_t from, int *slot) {
    for (size_t i = from; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k] == t) {
                if (slot) *slot = k;
                return g->nodes[i];
            }
    return NULL;
}

ir_node *ir_graph_sole_reader(const ir_graph *g, const int *readers, const ir_tensor *t) {
    if (!t || t->is_graph_output || readers[t->index] != 1) return NULL;
    return ir_graph_reader(g, t, 0, NULL);
}

bool ir_float_scalar(const ir_tensor *t, float *out_value) {
    if (!t || !t->data || t->dtype != TCI_DTYPE_FLOAT || t->rank < 0) return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] != 1) return false;
    *out_value = *(const float *)t->data;
    return true;
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
    if (rank > TCI_MAX_RANK) { /* a caller's tensor: dims holds only TCI_MAX_RANK entries */
        snprintf(buf, size, "(rank %d, over the maximum of %d)", rank, TCI_MAX_RANK);
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
