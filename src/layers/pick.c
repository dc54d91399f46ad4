/* Op family 'pick': ops that copy the elements of their first input picked by the values of
 * another: GatherND (index tuples), Compress (a mask along one axis) and ReverseSequence (a
 * length per batch entry). Elements of any stored type are copied whole; fp32 reference only
 * (no GPU path yet). */
#include <stdint.h>
#include <string.h>

#include "layers/op.h"

static int64_t dims_product(const int64_t *dims, int from, int to) {
    int64_t c = 1;
    for (int i = from; i < to; i++) c *= dims[i];
    return c;
}

/* ---- GatherND ---- */

typedef struct gather_nd_params {
    int64_t batch_dims;
} gather_nd_params;

static tci_status gather_nd_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    static const char *const known_11[] = {NULL};
    static const char *const known_12[] = {"batch_dims", NULL};
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 12 ? known_12 : known_11));
    OP_ALLOC_PARAMS(node, arena, gather_nd_params, p);
    TRY_STATUS(ir_attr_int(node, "batch_dims", 0, &p->batch_dims));
    if (p->batch_dims < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "batch_dims is %lld; must be >= 0",
                             (long long)p->batch_dims);
    return TCI_OK;
}

/* Output: indices' dims but the last, then data's dims past batch_dims + the tuple length. */
static tci_status gather_nd_infer(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const gather_nd_params *p = node->params;
    const tci_tensor *data = in[0], *idx = in[1];
    static const tci_dtype int64_only[] = {TCI_DTYPE_INT64, 0};
    TRY_STATUS(op_check_dtype(node, idx, 1, int64_only));
    op_set_unknown(out[0], data->dtype);
    if (data->rank < 0 || idx->rank < 0) return TCI_OK;
    int64_t b = p->batch_dims;
    if (data->rank < 1 || idx->rank < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "data and indices must have rank >= 1, got %d and %d", data->rank,
                             idx->rank);
    if (b >= data->rank || b >= idx->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "batch_dims %lld must be below both ranks (data %d, indices %d)",
                             (long long)b, data->rank, idx->rank);
    for (int i = 0; i < b; i++)
        if (data->dims[i] >= 0 && idx->dims[i] >= 0 && data->dims[i] != idx->dims[i])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "batch dim %d is %lld in data but %lld in indices", i,
                                 (long long)data->dims[i], (long long)idx->dims[i]);
    int64_t last = idx->dims[idx->rank - 1];
    if (last < 0) return TCI_OK; /* the output's rank depends on it */
    if (last < 1 || last > data->rank - b)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "index tuples have %lld entries; must be 1 to %lld (data rank %d "
                             "less batch_dims)",
                             (long long)last, (long long)(data->rank - b), data->rank);
    int rank = idx->rank - 1 + data->rank - (int)b - (int)last;
    if (rank > TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "output rank %d is over %d", rank,
                             TCI_MAX_RANK);
    tci_tensor *y = out[0];
    y->rank = 0;
    for (int i = 0; i < idx->rank - 1; i++)
        y->dims[y->rank++] = i < b && idx->dims[i] < 0 ? data->dims[i] : idx->dims[i];
    for (int i = (int)(b + last); i < data->rank; i++) y->dims[y->rank++] = data->dims[i];
    return TCI_OK;
}

static tci_status gather_nd_forward(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    const gather_nd_params *p = node->params;
    const tci_tensor *data = in[0], *idx = in[1];
    int b = (int)p->batch_dims;
    int64_t last = idx->dims[idx->rank - 1];
    size_t elem = tci_dtype_size(data->dtype);
    int64_t batches = dims_product(data->dims, 0, b);
    int64_t tuples = dims_product(idx->dims, b, idx->rank - 1); /* per batch entry */
    int64_t slice = dims_product(data->dims, b + (int)last, data->rank); /* elements per tuple */
    int64_t batch_stride = dims_product(data->dims, b, data->rank);
    int64_t strides[TCI_MAX_RANK];
    op_strides(data->rank, data->dims, strides);
    const int64_t *ix = idx->data;
    const char *src = data->data;
    char *dst = out[0]->data;
    for (int64_t bi = 0; bi < batches; bi++)
        for (int64_t t = 0; t < tuples; t++, ix += last, dst += (size_t)slice * elem) {
            int64_t at = bi * batch_stride;
            for (int64_t k = 0; k < last; k++) {
                int64_t dim = data->dims[b + k], v = ix[k];
                if (v < -dim || v >= dim)
                    return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                         "index %lld out of range for axis %lld of size %lld",
                                         (long long)v, (long long)(b + k), (long long)dim);
                at += (v < 0 ? v + dim : v) * strides[b + k];
            }
            memcpy(dst, src + (size_t)at * elem, (size_t)slice * elem);
        }
    return TCI_OK;
}

/* ---- Compress ---- */

typedef struct compress_params {
    bool has_axis; /* without: the flattened input */
    int64_t axis;
} compress_params;

static tci_status compress_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    static const char *const known[] = {"axis", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, compress_params, p);
    p->has_axis = ir_node_attr(node, "axis") != NULL;
    return ir_attr_int(node, "axis", 0, &p->axis);
}

/* The axis (-1 for the flattened input) and its length; the selected count from condition's
 * values, -1 while they are unknown. */
static tci_status compress_plan(const ir_node *node, const tci_tensor *x, const tci_tensor *cond,
                                int *axis, int64_t *len, int64_t *selected) {
    const compress_params *p = node->params;
    static const tci_dtype bool_only[] = {TCI_DTYPE_BOOL, 0};
    TRY_STATUS(op_check_dtype(node, cond, 1, bool_only));
    if (cond->rank >= 0 && cond->rank != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "condition must be 1-D, got rank %d",
                             cond->rank);
    *axis = -1;
    *len = -1;
    *selected = -1;
    if (x->rank < 0) return TCI_OK;
    if (p->has_axis) {
        if (p->axis < 0 && node->since_version < 11)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "axis %lld is negative; opset 9 takes [0, rank)",
                                 (long long)p->axis);
        TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, axis));
        *len = x->dims[*axis];
    } else {
        *len = 1;
        for (int i = 0; i < x->rank; i++) *len = x->dims[i] < 0 || *len < 0 ? -1 : *len * x->dims[i];
    }
    if (cond->rank < 0) return TCI_OK;
    if (cond->dims[0] >= 0 && *len >= 0 && cond->dims[0] > *len)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "condition has %lld entries, more than the %lld it selects from",
                             (long long)cond->dims[0], (long long)*len);
    if (!cond->data) return TCI_OK;
    *selected = 0;
    for (int64_t i = 0; i < cond->dims[0]; i++) *selected += ((const uint8_t *)cond->data)[i] != 0;
    return TCI_OK;
}

static tci_status compress_infer(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    int axis;
    int64_t len, selected;
    TRY_STATUS(compress_plan(node, in[0], in[1], &axis, &len, &selected));
    tci_tensor *y = out[0];
    op_set_unknown(y, in[0]->dtype);
    if (axis < 0) {
        y->rank = 1;
        y->dims[0] = selected;
    } else {
        op_same_shape(y, in[0]);
        y->dims[axis] = selected;
    }
    return TCI_OK;
}

static tci_status compress_forward(const ir_node *node, const tci_tensor *const *in,
                                   tci_tensor *const *out) {
    const tci_tensor *x = in[0], *cond = in[1];
    int axis;
    int64_t len, selected;
    TRY_STATUS(compress_plan(node, x, cond, &axis, &len, &selected));
    size_t elem = tci_dtype_size(x->dtype);
    int64_t outer = axis < 0 ? 1 : dims_product(x->dims, 0, axis);
    int64_t inner = axis < 0 ? 1 : dims_product(x->dims, axis + 1, x->rank);
    size_t run = (size_t)inner * elem;
    const uint8_t *c = cond->data;
    const char *src = x->data;
    char *dst = out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < cond->dims[0]; i++)
            if (c[i]) {
                memcpy(dst, src + ((size_t)(o * len + i)) * run, run);
                dst += run;
            }
    return TCI_OK;
}

/* ---- ReverseSequence ---- */

typedef struct reverse_sequence_params {
    int batch_axis, time_axis;
} reverse_sequence_params;

static tci_status reverse_sequence_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    static const char *const known[] = {"batch_axis", "time_axis", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, reverse_sequence_params, p);
    int64_t batch, time;
    TRY_STATUS(ir_attr_int(node, "batch_axis", 1, &batch));
    TRY_STATUS(ir_attr_int(node, "time_axis", 0, &time));
    if ((batch != 0 && batch != 1) || (time != 0 && time != 1) || batch == time)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "batch_axis %lld and time_axis %lld must be 0 and 1 in some order",
                             (long long)batch, (long long)time);
    p->batch_axis = (int)batch;
    p->time_axis = (int)time;
    return TCI_OK;
}

static tci_status reverse_sequence_infer(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    const reverse_sequence_params *p = node->params;
    const tci_tensor *x = in[0], *lens = in[1];
    TRY_STATUS(op_check_dtype(node, lens, 1, op_index_types));
    if (x->rank >= 0 && x->rank < 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input must have rank >= 2, got %d",
                             x->rank);
    if (lens->rank >= 0 && lens->rank != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "sequence_lens must be 1-D, got rank %d", lens->rank);
    if (x->rank >= 0 && lens->rank == 1 && x->dims[p->batch_axis] >= 0 && lens->dims[0] >= 0 &&
        x->dims[p->batch_axis] != lens->dims[0])
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "sequence_lens has %lld entries for a batch of %lld",
                             (long long)lens->dims[0], (long long)x->dims[p->batch_axis]);
    op_same_shape(out[0], x);
    return TCI_OK;
}

/* Entry b's first lens[b] time steps reversed, the rest copied. */
static tci_status reverse_sequence_forward(const ir_node *node, const tci_tensor *const *in,
                                           tci_tensor *const *out) {
    const reverse_sequence_params *p = node->params;
    const tci_tensor *x = in[0], *lens = in[1];
    size_t elem = tci_dtype_size(x->dtype);
    int64_t time = x->dims[p->time_axis], batch = x->dims[p->batch_axis];
    int64_t inner = dims_product(x->dims, 2, x->rank);
    /* the steps of dims 0 and 1, in elements */
    int64_t stride0 = x->dims[1] * inner, stride1 = inner;
    int64_t time_stride = p->time_axis == 0 ? stride0 : stride1;
    int64_t batch_stride = p->batch_axis == 0 ? stride0 : stride1;
    size_t run = (size_t)inner * elem;
    for (int64_t b = 0; b < batch; b++) {
        int64_t len = op_read_int(lens, b);
        if (len < 0 || len > time)
            return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                 "sequence_lens[%lld] is %lld; must be in [0, %lld]",
                                 (long long)b, (long long)len, (long long)time);
        for (int64_t t = 0; t < time; t++) {
            int64_t from = t < len ? len - 1 - t : t;
            memcpy((char *)out[0]->data + (size_t)(b * batch_stride + t * time_stride) * elem,
                   (const char *)x->data + (size_t)(b * batch_stride + from * time_stride) * elem,
                   run);
        }
    }
    return TCI_OK;
}

/* ---- descriptors ---- */

OP_DESC(gather_nd_desc, "GatherND", OP_VERSIONS(11, 12, 13), gather_nd_parse, gather_nd_infer,
        gather_nd_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(compress_desc, "Compress", OP_VERSIONS(9, 11, 28), compress_parse, compress_infer,
        compress_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(reverse_sequence_desc, "ReverseSequence", OP_VERSIONS(10, 28), reverse_sequence_parse,
        reverse_sequence_infer, reverse_sequence_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_pick_ops[] = {&gather_nd_desc, &compress_desc, &reverse_sequence_desc,
                                         NULL};
