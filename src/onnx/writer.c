/* IR graph -> ONNX ModelProto (see writer.h). Every message lives in one arena, freed once
 * protobuf-c has packed the model. */
#include "onnx/writer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/half.h"
#include "onnx/loader.h"
#include "onnx.pb-c.h"
#include "util/arena.h"

typedef struct writer {
    const ir_graph *g;
    mem_arena *arena;
    const char **names; /* by tensor index: the name written */
} writer;

#define NEW(w, type, init_macro, out)                                                              \
    do {                                                                                           \
        static const type init_ = init_macro;                                                      \
        (out) = arena_alloc((w)->arena, sizeof(type));                                         \
        if (!(out)) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");   \
        *(out) = init_;                                                                            \
    } while (0)

static void *alloc(writer *w, size_t size) { return arena_alloc(w->arena, size ? size : 1); }

/* A tensor's bytes as an initializer (or tensor attribute) named name. */
static tci_status write_tensor(writer *w, const ir_tensor *t, const char *name, bool fp16,
                               Onnx__TensorProto **out) {
    if (tci_dtype_size(t->dtype) == 0 || t->rank < 0)
        return status_error(TCI_ERR_UNSUPPORTED, "constant '%s' (%s) cannot be written", name,
                         tci_dtype_name(t->dtype));
    int64_t count;
    TRY_STATUS(ir_count_elements(t->rank, t->dims, &count));
    Onnx__TensorProto *tp;
    NEW(w, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT, tp);
    tp->name = (char *)name;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)(fp16 ? TCI_DTYPE_FLOAT16 : t->dtype);
    tp->n_dims = (size_t)t->rank;
    tp->dims = (int64_t *)t->dims;
    size_t bytes = (size_t)count * (fp16 ? 2 : tci_dtype_size(t->dtype));
    tp->has_raw_data = 1;
    tp->raw_data.len = bytes;
    if (!fp16) {
        tp->raw_data.data = t->data;
    } else {
        uint16_t *h = alloc(w, bytes);
        if (!h) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");
        for (int64_t i = 0; i < count; i++) h[i] = float_to_half(((const float *)t->data)[i]);
        tp->raw_data.data = (uint8_t *)h;
    }
    *out = tp;
    return TCI_OK;
}

static tci_status write_value_info(writer *w, const ir_tensor *t, Onnx__ValueInfoProto **out) {
    Onnx__ValueInfoProto *vi;
    NEW(w, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT, vi);
    vi->name = (char *)w->names[t->index];
    *out = vi;
    if (t->dtype == TCI_DTYPE_UNDEFINED) return TCI_OK;
    Onnx__TypeProto *type;
    Onnx__TypeProto__Tensor *tt;
    NEW(w, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT, type);
    NEW(w, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT, tt);
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)t->dtype;
    vi->type = type;
    if (t->rank < 0) return TCI_OK;
    Onnx__TensorShapeProto *shape;
    NEW(w, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT, shape);
    shape->n_dim = (size_t)t->rank;
    shape->dim = alloc(w, (size_t)t->rank * sizeof *shape->dim);
    if (!shape->dim) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");
    for (int i = 0; i < t->rank; i++) {
        Onnx__TensorShapeProto__Dimension *d;
        NEW(w, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT, d);
        if (t->dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = t->dims[i];
        } else if (t->dim_names[i]) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)t->dim_names[i];
        }
        shape->dim[i] = d;
    }
    tt->shape = shape;
    return TCI_OK;
}

static tci_status write_attr(writer *w, const ir_node *node, const ir_attr *a,
                             Onnx__AttributeProto **out) {
    Onnx__AttributeProto *ap;
    NEW(w, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT, ap);
    ap->name = (char *)a->name;
    ap->has_type = 1;
    ap->type = (Onnx__AttributeProto__AttributeType)a->type;
    switch (a->type) {
    case IR_ATTR_FLOAT: ap->has_f = 1; ap->f = a->f; break;
    case IR_ATTR_INT: ap->has_i = 1; ap->i = a->i; break;
    case IR_ATTR_STRING:
        ap->has_s = 1;
        ap->s.data = (uint8_t *)a->s;
        ap->s.len = strlen(a->s);
        break;
    case IR_ATTR_FLOATS: ap->n_floats = a->count; ap->floats = (float *)a->floats; break;
    case IR_ATTR_INTS: ap->n_ints = a->count; ap->ints = (int64_t *)a->ints; break;
    case IR_ATTR_STRINGS:
        ap->n_strings = a->count;
        ap->strings = alloc(w, a->count * sizeof *ap->strings);
        if (!ap->strings) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");
        for (size_t i = 0; i < a->count; i++) {
            ap->strings[i].data = (uint8_t *)a->strings[i];
            ap->strings[i].len = strlen(a->strings[i]);
        }
        break;
    case IR_ATTR_TENSOR:
        TRY_STATUS(write_tensor(w, a->tensor, a->tensor->name ? a->tensor->name : "", false, &ap->t));
        break;
    default:
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute '%s' (type %d) cannot be written to a model file", a->name,
                             (int)a->type);
    }
    *out = ap;
    return TCI_OK;
}

static tci_status write_node(writer *w, const ir_node *node, Onnx__NodeProto **out) {
    Onnx__NodeProto *np;
    NEW(w, Onnx__NodeProto, ONNX__NODE_PROTO__INIT, np);
    np->name = (char *)node->name;
    np->op_type = (char *)node->op_type;
    np->domain = (char *)node->domain;
    np->n_input = (size_t)node->num_inputs;
    np->n_output = (size_t)node->num_outputs;
    np->input = alloc(w, np->n_input * sizeof(char *));
    np->output = alloc(w, np->n_output * sizeof(char *));
    np->attribute = alloc(w, (size_t)node->num_attrs * sizeof *np->attribute);
    if (!np->input || !np->output || !np->attribute)
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");
    /* an omitted optional input or output is the empty name, as in ONNX */
    for (int k = 0; k < node->num_inputs; k++)
        np->input[k] = (char *)(node->inputs[k] ? w->names[node->inputs[k]->index] : "");
    for (int k = 0; k < node->num_outputs; k++)
        np->output[k] = (char *)(node->outputs[k] ? w->names[node->outputs[k]->index] : "");
    np->n_attribute = (size_t)node->num_attrs;
    for (int k = 0; k < node->num_attrs; k++)
        TRY_STATUS(write_attr(w, node, &node->attrs[k], &np->attribute[k]));
    *out = np;
    return TCI_OK;
}

/* Names every tensor; anonymous ones get "tcinfer_tensor_<index>" (made unique). */
static tci_status name_tensors(writer *w) {
    const ir_graph *g = w->g;
    w->names = alloc(w, g->num_tensors * sizeof *w->names);
    if (!w->names) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");
    for (size_t i = 0; i < g->num_tensors; i++) {
        const ir_tensor *t = g->tensors[i];
        if (t->name && t->name[0]) {
            w->names[i] = t->name;
            continue;
        }
        char buf[64];
        for (int attempt = 0;; attempt++) {
            snprintf(buf, sizeof buf, "tcinfer_tensor_%zu%s%.0d", i, attempt ? "_" : "", attempt);
            if (!ir_graph_find_tensor(g, buf)) break;
        }
        w->names[i] = arena_strdup(w->arena, buf);
        if (!w->names[i]) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");
    }
    return TCI_OK;
}

static tci_status write_graph(writer *w, const bool *as_fp16, Onnx__ModelProto *m) {
    const ir_graph *g = w->g;
    TRY_STATUS(name_tensors(w));
    Onnx__GraphProto *gp;
    NEW(w, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT, gp);
    m->graph = gp;
    gp->name = (char *)(g->name ? g->name : "");

    /* constants some node or graph output reads */
    bool *used = alloc(w, g->num_tensors * sizeof *used);
    gp->initializer = alloc(w, g->num_tensors * sizeof *gp->initializer);
    gp->node = alloc(w, g->num_nodes * sizeof *gp->node);
    gp->input = alloc(w, g->num_inputs * sizeof *gp->input);
    gp->output = alloc(w, g->num_outputs * sizeof *gp->output);
    if (!used || !gp->initializer || !gp->node || !gp->input || !gp->output)
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");
    memset(used, 0, g->num_tensors * sizeof *used);
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k]) used[g->nodes[i]->inputs[k]->index] = true;
    for (size_t i = 0; i < g->num_outputs; i++) used[g->outputs[i]->index] = true;
    for (size_t i = 0; i < g->num_tensors; i++) {
        const ir_tensor *t = g->tensors[i];
        if (!used[i] || !t->data || t->is_graph_input) continue;
        bool fp16 = as_fp16 && as_fp16[i] && t->dtype == TCI_DTYPE_FLOAT;
        TRY_STATUS(write_tensor(w, t, w->names[i], fp16, &gp->initializer[gp->n_initializer++]));
    }
    for (size_t i = 0; i < g->num_inputs; i++)
        TRY_STATUS(write_value_info(w, g->inputs[i], &gp->input[gp->n_input++]));
    for (size_t i = 0; i < g->num_outputs; i++)
        TRY_STATUS(write_value_info(w, g->outputs[i], &gp->output[gp->n_output++]));
    for (size_t i = 0; i < g->num_nodes; i++)
        TRY_STATUS(write_node(w, g->nodes[i], &gp->node[gp->n_node++]));
    return TCI_OK;
}

static tci_status write_model(writer *w, const bool *as_fp16, Onnx__ModelProto **out) {
    const ir_graph *g = w->g;
    Onnx__ModelProto *m;
    NEW(w, Onnx__ModelProto, ONNX__MODEL_PROTO__INIT, m);
    m->has_ir_version = 1;
    m->ir_version = g->ir_version > 0 ? g->ir_version : 8;
    m->producer_name = "tcinfer";
    /* the graph's imports, and the opset of any node domain they lack (graphs built in code) */
    m->opset_import = alloc(w, (g->num_opsets + g->num_nodes) * sizeof *m->opset_import);
    if (!m->opset_import) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");
    for (size_t i = 0; i < g->num_opsets + g->num_nodes; i++) {
        const ir_node *n = i < g->num_opsets ? NULL : g->nodes[i - g->num_opsets];
        const char *domain = n ? n->domain : g->opsets[i].domain;
        bool known = false;
        for (size_t k = 0; k < m->n_opset_import && !known; k++)
            known = strcmp(m->opset_import[k]->domain, domain) == 0;
        if (known) continue;
        Onnx__OperatorSetIdProto *op;
        NEW(w, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT, op);
        op->domain = (char *)domain;
        op->has_version = 1;
        op->version = n ? n->opset : g->opsets[i].version;
        for (size_t k = i + 1; n && k < g->num_opsets + g->num_nodes; k++)
            if (strcmp(g->nodes[k - g->num_opsets]->domain, domain) == 0 &&
                g->nodes[k - g->num_opsets]->opset > op->version)
                op->version = g->nodes[k - g->num_opsets]->opset;
        m->opset_import[m->n_opset_import++] = op;
    }
    TRY_STATUS(write_graph(w, as_fp16, m));
    *out = m;
    return TCI_OK;
}

tci_status onnx_save_model(const ir_graph *graph, const bool *as_fp16, void **out_bytes,
                           size_t *out_size) {
    *out_bytes = NULL;
    *out_size = 0;
    if (!onnx_host_little_endian())
        return status_error(TCI_ERR_UNSUPPORTED, "writing models needs a little-endian host");
    writer w = {graph, arena_create(), NULL};
    if (!w.arena) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model");
    Onnx__ModelProto *m = NULL;
    tci_status st = write_model(&w, as_fp16, &m);
    if (st == TCI_OK) {
        size_t size = onnx__model_proto__get_packed_size(m);
        uint8_t *bytes = malloc(size ? size : 1);
        if (!bytes) {
            st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the model (%zu bytes)", size);
        } else {
            *out_size = onnx__model_proto__pack(m, bytes);
            *out_bytes = bytes;
        }
    }
    arena_destroy(w.arena);
    return st;
}

tci_status onnx_widen_fp16(ir_graph *graph, const char *const *names) {
    for (const char *const *name = names; name && *name; name++) {
        ir_tensor *t = ir_graph_find_tensor(graph, *name);
        if (!t || !t->data || t->dtype != TCI_DTYPE_FLOAT16)
            return status_error(TCI_ERR_INVALID_MODEL, "'%s' is listed as an fp16-stored constant "
                             "but the model has no such FLOAT16 constant", *name);
        int64_t count;
        TRY_STATUS(ir_count_elements(t->rank, t->dims, &count));
        float *wide = arena_alloc(graph->arena, (size_t)(count ? count : 1) * sizeof(float));
        if (!wide) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        for (int64_t i = 0; i < count; i++) wide[i] = half_to_float(((const uint16_t *)t->data)[i]);
        t->data = wide;
        t->dtype = TCI_DTYPE_FLOAT;
    }
    return TCI_OK;
}
