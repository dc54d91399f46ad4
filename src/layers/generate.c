/* Op family 'generate': ops whose output follows from shapes and attributes, or from a size, and
 * from no input's values: EyeLike (from its input's shape: OP_FOLD_FROM_SHAPE, so it becomes a
 * constant at build wherever that shape is known) and the window functions HannWindow,
 * HammingWindow and BlackmanWindow (constants at build wherever their size is one). Neither has
 * a GPU step: folded, the GPU build never sees them. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "layers/op.h"

/* What the outputs may be stored as: every type op_store_number writes. */
static const tci_dtype generate_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16,
                                           TCI_DTYPE_INT8,  TCI_DTYPE_UINT8,  TCI_DTYPE_INT32,
                                           TCI_DTYPE_INT64, TCI_DTYPE_BOOL,   0};

/* Reads a data-type attribute (ONNX's TensorProto numbering, which tci_dtype shares); absent
 * gives def. A type tcinfer does not store is UNSUPPORTED, naming it. */
static tci_status read_dtype_attr(const ir_node *node, const char *name, tci_dtype def,
                                  tci_dtype *out) {
    int64_t v;
    TRY_STATUS(ir_attr_int(node, name, (int64_t)def, &v));
    *out = TCI_DTYPE_UNDEFINED;
    for (const tci_dtype *d = generate_types; *d; d++)
        if ((int64_t)*d == v) *out = *d;
    if (*out == TCI_DTYPE_UNDEFINED)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute '%s' value %lld is not a data type this op can produce "
                             "(float, double, float16, int8, uint8, int32, int64, bool)",
                             name, (long long)v);
    return TCI_OK;
}

/* ---- EyeLike ---- */

typedef struct eye_like_params {
    tci_dtype dtype; /* UNDEFINED: the input's */
    int64_t k;       /* the diagonal: 0 main, > 0 above, < 0 below */
} eye_like_params;

static tci_status eye_like_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    static const char *const known[] = {"dtype", "k", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, eye_like_params, p);
    p->dtype = TCI_DTYPE_UNDEFINED;
    if (ir_node_attr(node, "dtype"))
        TRY_STATUS(read_dtype_attr(node, "dtype", TCI_DTYPE_FLOAT, &p->dtype));
    return ir_attr_int(node, "k", 0, &p->k);
}

static tci_status eye_like_infer(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const eye_like_params *p = node->params;
    const tci_tensor *x = in[0];
    if (x->dtype != TCI_DTYPE_UNDEFINED) {
        bool held = false;
        for (const tci_dtype *d = generate_types; *d; d++)
            if (*d == x->dtype) held = true;
        if (!held)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED, "input 0 has unsupported dtype %s",
                                 tci_dtype_name(x->dtype));
    }
    if (x->rank >= 0 && x->rank != 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input must be 2-D, got rank %d",
                             x->rank);
    out[0]->rank = 2;
    out[0]->dims[0] = x->rank == 2 ? x->dims[0] : -1;
    out[0]->dims[1] = x->rank == 2 ? x->dims[1] : -1;
    out[0]->dtype = p->dtype != TCI_DTYPE_UNDEFINED ? p->dtype : x->dtype;
    return TCI_OK;
}

/* Reads the input's dims only (its data may be NULL when folded from the shape). */
static tci_status eye_like_forward(const ir_node *node, const tci_tensor *const *in,
                                   tci_tensor *const *out) {
    const eye_like_params *p = node->params;
    tci_tensor *y = out[0];
    int64_t rows = in[0]->dims[0], cols = in[0]->dims[1];
    memset(y->data, 0, (size_t)(rows * cols) * tci_dtype_size(y->dtype));
    /* row i holds its one on column i + k, when that is inside (a k beyond either side leaves
     * all zeros) */
    for (int64_t i = 0; i < rows && p->k < cols && p->k > -rows; i++) {
        int64_t j = i + p->k;
        if (j >= 0 && j < cols) op_store_number(y->dtype, y->data, i * cols + j, 1.0);
    }
    return TCI_OK;
}

/* ---- HannWindow, HammingWindow, BlackmanWindow ---- */

/* w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N the size (periodic) or size - 1
 * (symmetric). */
typedef struct window_params {
    double a0, a1, a2;
    tci_dtype dtype;
    int periodic;
} window_params;

/* Sizes past this are refused rather than allocated (a size input is data, not a shape). */
#define WINDOW_MAX_SIZE (INT64_C(1) << 31)

static tci_status window_parse(ir_node *node, mem_arena *arena, double a0, double a1,
                               double a2) {
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    static const char *const known[] = {"output_datatype", "periodic", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, window_params, p);
    p->a0 = a0;
    p->a1 = a1;
    p->a2 = a2;
    TRY_STATUS(read_dtype_attr(node, "output_datatype", TCI_DTYPE_FLOAT, &p->dtype));
    if (p->dtype == TCI_DTYPE_BOOL)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'output_datatype' may not be bool");
    return op_read_flag(node, "periodic", 1, &p->periodic);
}

static tci_status hann_window_parse(ir_node *node, mem_arena *arena) {
    return window_parse(node, arena, 0.5, 0.5, 0.0);
}

static tci_status hamming_window_parse(ir_node *node, mem_arena *arena) {
    /* ONNX's alpha 25/46 (the exact zero of the first side lobe), not the rounded 0.54 */
    return window_parse(node, arena, 25.0 / 46.0, 1.0 - 25.0 / 46.0, 0.0);
}

static tci_status blackman_window_parse(ir_node *node, mem_arena *arena) {
    return window_parse(node, arena, 0.42, 0.5, 0.08);
}

/* The size input: a scalar (or one element) of int32 / int64, >= 0; *size -1 while unknown. */
static tci_status window_size(const ir_node *node, const tci_tensor *s, int64_t *size) {
    TRY_STATUS(op_check_dtype(node, s, 0, op_index_types));
    *size = -1;
    if (s->rank < 0) return TCI_OK;
    int64_t count;
    TRY_STATUS(ir_count_elements(s->rank, s->dims, &count));
    if (s->rank > 1 || (count >= 0 && count != 1))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input size must be a scalar");
    if (!s->data) return TCI_OK;
    *size = op_read_int(s, 0);
    if (*size < 0 || *size > WINDOW_MAX_SIZE)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "size is %lld; must be in [0, %lld]",
                             (long long)*size, (long long)WINDOW_MAX_SIZE);
    return TCI_OK;
}

static tci_status window_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const window_params *p = node->params;
    int64_t size;
    TRY_STATUS(window_size(node, in[0], &size));
    out[0]->dtype = p->dtype;
    out[0]->rank = 1;
    out[0]->dims[0] = size;
    return TCI_OK;
}

static tci_status window_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const window_params *p = node->params;
    int64_t size;
    TRY_STATUS(window_size(node, in[0], &size));
    /* a symmetric window of one value divides 0 by 0: NaN, as ONNX's reference gives */
    double n_1 = (double)(p->periodic ? size : size - 1);
    for (int64_t n = 0; n < size; n++) {
        double t = 2.0 * 3.14159265358979323846 * (double)n / n_1;
        op_store_number(out[0]->dtype, out[0]->data, n, p->a0 - p->a1 * cos(t) + p->a2 * cos(2 * t));
    }
    return TCI_OK;
}

/* ---- descriptors ---- */

OP_DESC(eye_like_desc, "EyeLike", OP_VERSIONS(9, 22), eye_like_parse, eye_like_infer,
        eye_like_forward, OP_FOLD_FROM_SHAPE, NULL, NULL, BINARY_NONE);
OP_DESC(hann_window_desc, "HannWindow", OP_VERSIONS(17), hann_window_parse, window_infer,
        window_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(hamming_window_desc, "HammingWindow", OP_VERSIONS(17), hamming_window_parse,
        window_infer, window_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(blackman_window_desc, "BlackmanWindow", OP_VERSIONS(17), blackman_window_parse,
        window_infer, window_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_generate_ops[] = {&eye_like_desc, &hann_window_desc,
                                             &hamming_window_desc, &blackman_window_desc, NULL};
