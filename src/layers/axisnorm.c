/* Op family 'axisnorm': the ops that rescale values along chosen axes by statistics of those
 * axes: Hardmax (one-hot of the first maximum), LpNormalization (divided by the L1 or L2 norm)
 * and MeanVarianceNormalization (zero mean, unit variance). fp32 reference only; sums accumulate
 * in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

typedef struct axis_params {
    int64_t axis;
    bool coerce_2d; /* Hardmax before opset 13: the dims from axis on form one row */
    int64_t p;      /* LpNormalization: 1 or 2 */
} axis_params;

typedef struct mvn_params {
    const int64_t *axes;
    size_t num_axes;
} mvn_params;

static int64_t dims_product(const int64_t *dims, int from, int to) {
    int64_t c = 1;
    for (int i = from; i < to; i++) c *= dims[i];
    return c;
}

/* A float input of rank >= 1 with axis inside it; the output has its shape. */
static tci_status axis_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const axis_params *p = node->params;
    TRY_STATUS(op_check_dtype(node, in[0], 0, op_float_types));
    if (in[0]->rank == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input must have rank >= 1");
    if (in[0]->rank < 0) {
        op_set_unknown(out[0], in[0]->dtype);
        return TCI_OK;
    }
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, in[0]->rank, &axis));
    op_same_shape(out[0], in[0]);
    return TCI_OK;
}

/* The input as outer x n x inner with the normalised axis (or, coerced to 2-D, the dims from it
 * on) as n. */
static tci_status axis_split(const ir_node *node, const tci_tensor *x, int64_t *outer, int64_t *n,
                             int64_t *inner) {
    const axis_params *p = node->params;
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    *outer = dims_product(x->dims, 0, axis);
    if (p->coerce_2d) {
        *n = dims_product(x->dims, axis, x->rank);
        *inner = 1;
    } else {
        *n = x->dims[axis];
        *inner = dims_product(x->dims, axis + 1, x->rank);
    }
    return TCI_OK;
}

/* ---- Hardmax ---- */

static tci_status hardmax_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    static const char *const known[] = {"axis", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, axis_params, p);
    p->coerce_2d = node->since_version < 13;
    p->p = 0;
    return ir_attr_int(node, "axis", p->coerce_2d ? 1 : -1, &p->axis);
}

/* 1 at the first maximum of each row, 0 elsewhere. A NaN is the maximum where it is first met,
 * as numpy's argmax (ONNX's reference) has it. */
static tci_status hardmax_forward(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    int64_t outer, n, inner;
    TRY_STATUS(axis_split(node, in[0], &outer, &n, &inner));
    const float *x = in[0]->data;
    float *y = out[0]->data;
    memset(y, 0, (size_t)(outer * n * inner) * sizeof *y);
    if (n == 0) return TCI_OK;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            const float *row = x + o * n * inner + j;
            int64_t best = 0;
            for (int64_t k = 1; k < n && !isnan(row[best * inner]); k++)
                if (isnan(row[k * inner]) || row[k * inner] > row[best * inner]) best = k;
            y[o * n * inner + best * inner + j] = 1.0f;
        }
    return TCI_OK;
}

/* ---- LpNormalization ---- */

static tci_status lp_normalization_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    static const char *const known[] = {"axis", "p", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, axis_params, p);
    p->coerce_2d = false;
    TRY_STATUS(ir_attr_int(node, "axis", -1, &p->axis));
    TRY_STATUS(ir_attr_int(node, "p", 2, &p->p));
    if (p->p != 1 && p->p != 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "p is %lld; must be 1 or 2",
                             (long long)p->p);
    return TCI_OK;
}

/* x / ||x||_p along the axis; a zero norm gives zeros, as onnxruntime does (not 0/0). */
static tci_status lp_normalization_forward(const ir_node *node, const tci_tensor *const *in,
                                           tci_tensor *const *out) {
    const axis_params *p = node->params;
    int64_t outer, n, inner;
    TRY_STATUS(axis_split(node, in[0], &outer, &n, &inner));
    const float *x = in[0]->data;
    float *y = out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            const float *row = x + o * n * inner + j;
            float *yrow = y + o * n * inner + j;
            double norm = 0.0;
            for (int64_t k = 0; k < n; k++) {
                double v = row[k * inner];
                norm += p->p == 1 ? fabs(v) : v * v;
            }
            if (p->p == 2) norm = sqrt(norm);
            for (int64_t k = 0; k < n; k++)
                yrow[k * inner] = norm != 0.0 ? (float)(row[k * inner] / norm) : 0.0f;
        }
    return TCI_OK;
}

/* ---- MeanVarianceNormalization ---- */

static const int64_t mvn_default_axes[] = {0, 2, 3};

static tci_status mvn_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    static const char *const known[] = {"axes", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, mvn_params, p);
    TRY_STATUS(ir_attr_ints(node, "axes", &p->axes, &p->num_axes));
    if (!p->axes) {
        p->axes = mvn_default_axes;
        p->num_axes = 3;
    }
    if (p->num_axes == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axes is empty");
    return TCI_OK;
}

/* Which dims of a rank-`rank` input the statistics run over; a repeated axis is an error. */
static tci_status mvn_mask(const ir_node *node, int rank, bool *mask) {
    const mvn_params *p = node->params;
    for (int i = 0; i < rank; i++) mask[i] = false;
    for (size_t i = 0; i < p->num_axes; i++) {
        int axis;
        TRY_STATUS(op_normalize_axis(node, p->axes[i], rank, &axis));
        if (mask[axis])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axes names dim %d twice", axis);
        mask[axis] = true;
    }
    return TCI_OK;
}

static tci_status mvn_infer(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    TRY_STATUS(op_check_dtype(node, in[0], 0, op_float_types));
    if (in[0]->rank < 0) {
        op_set_unknown(out[0], in[0]->dtype);
        return TCI_OK;
    }
    bool mask[TCI_MAX_RANK];
    TRY_STATUS(mvn_mask(node, in[0]->rank, mask));
    op_same_shape(out[0], in[0]);
    return TCI_OK;
}

/* Offsets of element i's group: each element's statistics index from its kept dims. */
typedef struct mvn_walk {
    int rank;
    int64_t dims[TCI_MAX_RANK], group_strides[TCI_MAX_RANK]; /* 0 on the normalised axes */
    int64_t idx[TCI_MAX_RANK], group;
} mvn_walk;

static void mvn_walk_start(mvn_walk *w) {
    memset(w->idx, 0, sizeof w->idx);
    w->group = 0;
}

static void mvn_walk_next(mvn_walk *w) {
    for (int d = w->rank - 1; d >= 0; d--) {
        w->group += w->group_strides[d];
        if (++w->idx[d] < w->dims[d]) return;
        w->group -= w->group_strides[d] * w->idx[d];
        w->idx[d] = 0;
    }
}

/* (x - mean) / (sqrt(variance) + 1e-9) over the axes, ONNX's definition (its function body's
 * epsilon); the variance from the squared deviations, which cannot come out negative. */
static tci_status mvn_forward(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    bool mask[TCI_MAX_RANK];
    TRY_STATUS(mvn_mask(node, x->rank, mask));
    mvn_walk w;
    w.rank = x->rank;
    int64_t groups = 1, total = op_count(x);
    for (int d = x->rank - 1; d >= 0; d--) {
        w.dims[d] = x->dims[d];
        w.group_strides[d] = mask[d] ? 0 : groups;
        if (!mask[d]) groups *= x->dims[d];
    }
    if (total == 0) return TCI_OK;
    double *mean = calloc((size_t)groups, sizeof *mean), *var = calloc((size_t)groups, sizeof *var);
    if (!mean || !var) {
        free(mean);
        free(var);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for statistics");
    }
    const float *xd = x->data;
    float *y = out[0]->data;
    double count = (double)(total / groups);
    mvn_walk_start(&w);
    for (int64_t i = 0; i < total; i++, mvn_walk_next(&w)) mean[w.group] += xd[i];
    for (int64_t g = 0; g < groups; g++) mean[g] /= count;
    mvn_walk_start(&w);
    for (int64_t i = 0; i < total; i++, mvn_walk_next(&w)) {
        double dev = xd[i] - mean[w.group];
        var[w.group] += dev * dev;
    }
    for (int64_t g = 0; g < groups; g++) var[g] = sqrt(var[g] / count) + 1e-9;
    mvn_walk_start(&w);
    for (int64_t i = 0; i < total; i++, mvn_walk_next(&w))
        y[i] = (float)((xd[i] - mean[w.group]) / var[w.group]);
    free(mean);
    free(var);
    return TCI_OK;
}

/* ---- descriptors (CPU only: no GPU path yet) ---- */

static const int hardmax_versions[] = {1, 11, 13, 0};
static const int lp_normalization_versions[] = {1, 22, 0};
static const int mvn_versions[] = {9, 13, 0};

OP_DESC(hardmax_desc, "Hardmax", hardmax_versions, hardmax_parse, axis_infer, hardmax_forward, 0,
        NULL, NULL, BINARY_NONE);
OP_DESC(lp_normalization_desc, "LpNormalization", lp_normalization_versions,
        lp_normalization_parse, axis_infer, lp_normalization_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(mvn_desc, "MeanVarianceNormalization", mvn_versions, mvn_parse, mvn_infer, mvn_forward, 0,
        NULL, NULL, BINARY_NONE);

const op_desc *const layer_axisnorm_ops[] = {&hardmax_desc, &lp_normalization_desc, &mvn_desc,
                                             NULL};
