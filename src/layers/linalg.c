/* Op family 'linalg': matrix functions beyond products (gemm.c has those): Det, the determinant
 * of each square matrix in the last two dims, by LU factorisation with partial pivoting in
 * double. fp32 reference only (no GPU path yet). */
#include <math.h>
#include <stdlib.h>

#include "layers/op.h"

static tci_status det_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 1, 1, 1, 1);
}

static tci_status det_infer(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    op_set_unknown(out[0], x->dtype);
    if (x->rank < 0) return TCI_OK;
    if (x->rank < 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input must have rank >= 2 (matrices in the last two dims), got %d",
                             x->rank);
    int64_t m = x->dims[x->rank - 2], n = x->dims[x->rank - 1];
    if (m >= 0 && n >= 0 && m != n)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "matrices must be square, got %lldx%lld",
                             (long long)m, (long long)n);
    out[0]->rank = x->rank - 2;
    for (int i = 0; i < x->rank - 2; i++) out[0]->dims[i] = x->dims[i];
    return TCI_OK;
}

/* The determinant of the n x n matrix in a (overwritten). A zero pivot column makes it 0; a NaN
 * anywhere makes it NaN (numpy's too), which pivoting past a zero column would miss. */
static double det_lu(double *a, int64_t n) {
    for (int64_t i = 0; i < n * n; i++)
        if (isnan(a[i])) return NAN;
    double det = 1.0;
    for (int64_t k = 0; k < n; k++) {
        int64_t pivot = k;
        for (int64_t i = k + 1; i < n; i++)
            if (fabs(a[i * n + k]) > fabs(a[pivot * n + k])) pivot = i;
        if (a[pivot * n + k] == 0.0) return 0.0;
        if (pivot != k) {
            for (int64_t j = 0; j < n; j++) {
                double t = a[k * n + j];
                a[k * n + j] = a[pivot * n + j];
                a[pivot * n + j] = t;
            }
            det = -det;
        }
        double d = a[k * n + k];
        det *= d;
        for (int64_t i = k + 1; i < n; i++) {
            double f = a[i * n + k] / d;
            for (int64_t j = k + 1; j < n; j++) a[i * n + j] -= f * a[k * n + j];
        }
    }
    return det;
}

static tci_status det_forward(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    int64_t n = x->dims[x->rank - 1], count = op_count(out[0]);
    double *a = malloc((size_t)(n > 0 ? n * n : 1) * sizeof *a);
    if (!a) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for a %lldx%lld matrix",
                                 (long long)n, (long long)n);
    const float *xd = x->data;
    float *y = out[0]->data;
    for (int64_t b = 0; b < count; b++) {
        for (int64_t i = 0; i < n * n; i++) a[i] = xd[b * n * n + i];
        y[b] = (float)det_lu(a, n); /* an empty matrix's determinant is 1 */
    }
    free(a);
    return TCI_OK;
}

OP_DESC(det_desc, "Det", OP_VERSIONS(11, 22), det_parse, det_infer, det_forward, 0, NULL, NULL,
        BINARY_NONE);

const op_desc *const layer_linalg_ops[] = {&det_desc, NULL};
