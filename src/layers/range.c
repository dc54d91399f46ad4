/* Op family 'range': Range, the 1-D sequence start, start + delta, ... below limit. Its length
 * depends on its input values, so a GPU engine (static shapes) gets it evaluated at build by
 * constant folding when the values are known there, as with YOLO-style heads whose Range reads
 * the shape of a fixed input; with values only known at run time it is refused, naming the node. */
#include <math.h>

#include "layers/op.h"

static const tci_dtype range_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT32,
                                        TCI_DTYPE_INT64, 0};

static tci_status range_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 3, 3, 1, 1);
}

/* The element count onnxruntime gives: ceil((limit - start) / delta) in double, at least 0. A
 * zero delta, or a count that no tensor can hold, is an error. */
static tci_status range_count(const ir_node *node, const tci_tensor *const *in, int64_t *out) {
    double start = op_read_number(in[0], 0), limit = op_read_number(in[1], 0);
    double delta = op_read_number(in[2], 0);
    if (delta == 0)
        return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT, "delta must not be zero");
    double n = ceil((limit - start) / delta);
    if (!(n < (double)(INT64_C(1) << 40)))
        return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                             "start %g, limit %g and delta %g give a sequence too long to hold",
                             start, limit, delta);
    *out = n > 0 ? (int64_t)n : 0;
    return TCI_OK;
}

static tci_status range_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    static const char *const names[] = {"start", "limit", "delta"};
    bool known = true;
    for (int i = 0; i < 3; i++) {
        TRY_STATUS(op_check_dtype(node, in[i], i, range_types));
        if (in[i]->dtype != TCI_DTYPE_UNDEFINED && in[0]->dtype != TCI_DTYPE_UNDEFINED &&
            in[i]->dtype != in[0]->dtype)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "%s has dtype %s but start has %s", names[i],
                                 tci_dtype_name(in[i]->dtype), tci_dtype_name(in[0]->dtype));
        int64_t count;
        TRY_STATUS(ir_count_elements(in[i]->rank, in[i]->dims, &count));
        if (count >= 0 && count != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "%s must be a scalar, it has %lld elements", names[i],
                                 (long long)count);
        known = known && in[i]->data && in[i]->rank >= 0;
    }
    out[0]->dtype = in[0]->dtype;
    out[0]->rank = 1;
    out[0]->dims[0] = -1;
    if (known) TRY_STATUS(range_count(node, in, &out[0]->dims[0]));
    return TCI_OK;
}

/* Each value is the previous one plus delta, in the output's type, as onnxruntime computes it
 * (so long float sequences drift the same way); integers add in uint64_t, where wrapping is
 * defined. */
#define RANGE_FILL(T, ACC)                                                                        \
    do {                                                                                          \
        T *y = out[0]->data;                                                                      \
        ACC v = (ACC) * (const T *)in[0]->data, d = (ACC) * (const T *)in[2]->data;               \
        for (int64_t i = 0; i < n; i++, v += d) y[i] = (T)v;                                      \
    } while (0)

static tci_status range_forward(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    int64_t n = op_count(out[0]);
    switch (out[0]->dtype) {
    case TCI_DTYPE_FLOAT: RANGE_FILL(float, float); break;
    case TCI_DTYPE_DOUBLE: RANGE_FILL(double, double); break;
    case TCI_DTYPE_INT32: RANGE_FILL(int32_t, uint64_t); break;
    case TCI_DTYPE_INT64: RANGE_FILL(int64_t, uint64_t); break;
    default:
        return ir_node_error(node, TCI_ERR_INTERNAL, "dtype %s", tci_dtype_name(out[0]->dtype));
    }
    return TCI_OK;
}

static const int range_versions[] = {11, 0};

OP_DESC(range_desc, "Range", range_versions, range_parse, range_infer, range_forward, 0, NULL, NULL,
        BINARY_NONE);

const op_desc *const layer_range_ops[] = {&range_desc, NULL};
