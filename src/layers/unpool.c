/* Op family 'unpool': MaxUnpool, the partial inverse of MaxPool: each value of X written at its
 * index (MaxPool's Indices: a row-major offset into the whole output, batch and channel
 * included), zeros elsewhere. The output is (N, C, (in - 1) * stride - pads + kernel ...), or
 * output_shape when given (its pads then ignored), the indices reading into that shape as
 * onnxruntime's kernel does. fp32 on the CPU reference only (no GPU path: the planner refuses it
 * naming the node). */
#include <stdint.h>
#include <string.h>

#include "layers/op.h"

#define UNPOOL_MAX_SPATIAL (TCI_MAX_RANK - 2)

typedef struct unpool_params {
    int spatial;
    int64_t kernel[UNPOOL_MAX_SPATIAL], stride[UNPOOL_MAX_SPATIAL];
    int64_t pad_begin[UNPOOL_MAX_SPATIAL], pad_end[UNPOOL_MAX_SPATIAL];
} unpool_params;

static tci_status unpool_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 3, 1, 1));
    static const char *const known[] = {"kernel_shape", "pads", "strides", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, unpool_params, p);
    const int64_t *kernel, *pads, *strides;
    size_t nk, np, ns;
    TRY_STATUS(ir_attr_ints(node, "kernel_shape", &kernel, &nk));
    TRY_STATUS(ir_attr_ints(node, "pads", &pads, &np));
    TRY_STATUS(ir_attr_ints(node, "strides", &strides, &ns));
    if (!kernel)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'kernel_shape' is required");
    if (nk < 1 || nk > UNPOOL_MAX_SPATIAL)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "kernel_shape has %zu axes; 1 to %d spatial axes are supported", nk,
                             UNPOOL_MAX_SPATIAL);
    if (pads && np != 2 * nk)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "pads has %zu entries, expected %zu (begin and end per axis)", np,
                             2 * nk);
    if (strides && ns != nk)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "strides has %zu entries, expected %zu", ns, nk);
    p->spatial = (int)nk;
    for (size_t d = 0; d < nk; d++) {
        p->kernel[d] = kernel[d];
        p->stride[d] = strides ? strides[d] : 1;
        p->pad_begin[d] = pads ? pads[d] : 0;
        p->pad_end[d] = pads ? pads[nk + d] : 0;
        if (p->kernel[d] < 1 || p->stride[d] < 1 || p->pad_begin[d] < 0 || p->pad_end[d] < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "axis %zu: kernel %lld and stride %lld must be >= 1, pads "
                                 "(%lld, %lld) >= 0",
                                 d, (long long)p->kernel[d], (long long)p->stride[d],
                                 (long long)p->pad_begin[d], (long long)p->pad_end[d]);
    }
    return TCI_OK;
}

static tci_status unpool_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const unpool_params *p = node->params;
    const tci_tensor *x = in[0], *idx = in[1];
    const tci_tensor *shape = node->num_inputs > 2 ? in[2] : NULL;
    static const tci_dtype int64_only[] = {TCI_DTYPE_INT64, 0};
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, idx, 1, int64_only));
    if (shape) TRY_STATUS(op_check_dtype(node, shape, 2, int64_only));
    int rank = p->spatial + 2;
    if (x->rank >= 0 && x->rank != rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "X has rank %d; kernel_shape makes it (N, C) and %d spatial axes",
                             x->rank, p->spatial);
    if (x->rank >= 0 && idx->rank >= 0) {
        bool same = idx->rank == x->rank;
        for (int d = 0; same && d < rank; d++)
            same = x->dims[d] < 0 || idx->dims[d] < 0 || x->dims[d] == idx->dims[d];
        if (!same)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "I must have X's shape");
    }
    out[0]->dtype = TCI_DTYPE_FLOAT;
    out[0]->rank = rank;
    if (shape) {
        if (shape->rank >= 0 && (shape->rank != 1 || (shape->dims[0] >= 0 &&
                                                      shape->dims[0] != rank)))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "output_shape must be 1-D with %d entries (X's rank)", rank);
        for (int d = 0; d < rank; d++) {
            out[0]->dims[d] = shape->data ? op_read_int(shape, d) : -1;
            if (shape->data && out[0]->dims[d] < 0)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "output_shape[%d] is %lld; negative", d,
                                     (long long)out[0]->dims[d]);
        }
        return TCI_OK;
    }
    out[0]->dims[0] = x->rank >= 0 ? x->dims[0] : -1;
    out[0]->dims[1] = x->rank >= 0 ? x->dims[1] : -1;
    for (int d = 0; d < p->spatial; d++) {
        int64_t in_d = x->rank >= 0 ? x->dims[d + 2] : -1, o = -1;
        if (in_d >= 0) {
            o = (in_d - 1) * p->stride[d] - p->pad_begin[d] - p->pad_end[d] + p->kernel[d];
            if (in_d == 0) o = 0;
            if (o < 0)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "spatial axis %d: the pads leave a size of %lld", d,
                                     (long long)o);
        }
        out[0]->dims[d + 2] = o;
    }
    return TCI_OK;
}

static tci_status unpool_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const float *x = in[0]->data;
    const int64_t *idx = in[1]->data;
    float *y = out[0]->data;
    int64_t n = op_count(in[0]), total = op_count(out[0]);
    memset(y, 0, (size_t)total * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= total)
            return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                 "index %lld (element %lld of I) is outside the output's %lld "
                                 "elements",
                                 (long long)idx[i], (long long)i, (long long)total);
        y[idx[i]] = x[i];
    }
    return TCI_OK;
}

/* ---- descriptors ---- */

OP_DESC(max_unpool_desc, "MaxUnpool", OP_VERSIONS(9, 11, 22), unpool_parse, unpool_infer,
        unpool_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_unpool_ops[] = {&max_unpool_desc, NULL};
