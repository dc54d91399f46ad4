/* Op family 'unique': Unique, the distinct elements (or slices along an axis) of a tensor, sorted
 * or in order of first occurrence, with where each first occurs, where each element went and how
 * often each occurs. Output sizes follow from the values: infer computes them once the input is
 * known (the reference's run). Every stored type (version 28 adds bfloat16, which tcinfer does
 * not store); NaNs are one value, after every number (numpy's unique). CPU reference only (no
 * GPU path: the planner refuses it naming the node). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

static const tci_dtype unique_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16,
                                         TCI_DTYPE_INT8,  TCI_DTYPE_UINT8,  TCI_DTYPE_INT32,
                                         TCI_DTYPE_INT64, TCI_DTYPE_BOOL,   0};

typedef struct unique_params {
    bool has_axis;
    int64_t axis;
    int sorted;
} unique_params;

static tci_status unique_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 4));
    static const char *const known[] = {"axis", "sorted", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, unique_params, p);
    p->has_axis = ir_node_attr(node, "axis") != NULL;
    TRY_STATUS(ir_attr_int(node, "axis", 0, &p->axis));
    return op_read_flag(node, "sorted", 1, &p->sorted);
}

/* The input seen as outer x n x inner: the n slices compared (the flattened elements when no
 * axis, each one element). */
typedef struct unique_view {
    const tci_tensor *x;
    int axis; /* -1: flattened */
    int64_t outer, n, inner;
} unique_view;

/* Three-way comparison of elements a and b, NaN after every number and equal to NaN. */
static int element_cmp(tci_dtype dtype, const void *data, int64_t a, int64_t b) {
    switch (dtype) {
    case TCI_DTYPE_INT8: return (((const int8_t *)data)[a] > ((const int8_t *)data)[b]) -
                                (((const int8_t *)data)[a] < ((const int8_t *)data)[b]);
    case TCI_DTYPE_UINT8:
    case TCI_DTYPE_BOOL: return (((const uint8_t *)data)[a] > ((const uint8_t *)data)[b]) -
                                (((const uint8_t *)data)[a] < ((const uint8_t *)data)[b]);
    case TCI_DTYPE_INT32: return (((const int32_t *)data)[a] > ((const int32_t *)data)[b]) -
                                 (((const int32_t *)data)[a] < ((const int32_t *)data)[b]);
    case TCI_DTYPE_INT64: return (((const int64_t *)data)[a] > ((const int64_t *)data)[b]) -
                                 (((const int64_t *)data)[a] < ((const int64_t *)data)[b]);
    default: {
        double x = op_load_number(dtype, data, a), y = op_load_number(dtype, data, b);
        if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
        return (x > y) - (x < y);
    }
    }
}

/* Lexicographic comparison of slices i and j (their elements in row-major order). */
static int slice_cmp(const unique_view *v, int64_t i, int64_t j) {
    for (int64_t o = 0; o < v->outer; o++)
        for (int64_t r = 0; r < v->inner; r++) {
            int c = element_cmp(v->x->dtype, v->x->data, (o * v->n + i) * v->inner + r,
                                (o * v->n + j) * v->inner + r);
            if (c) return c;
        }
    return 0;
}

/* Stable merge sort of the slice numbers idx[0..n) by slice_cmp. */
static void sort_slices(const unique_view *v, int64_t *idx, int64_t *tmp, int64_t n) {
    if (n < 2) return;
    int64_t h = n / 2;
    sort_slices(v, idx, tmp, h);
    sort_slices(v, idx + h, tmp, n - h);
    int64_t a = 0, b = h, k = 0;
    while (a < h && b < n) tmp[k++] = slice_cmp(v, idx[b], idx[a]) < 0 ? idx[b++] : idx[a++];
    while (a < h) tmp[k++] = idx[a++];
    while (b < n) tmp[k++] = idx[b++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

/* The distinct slices, in output order: groups of them; first[g] the slice where group g first
 * occurs, count[g] its occurrences, inverse[i] the group of slice i. */
typedef struct unique_result {
    int64_t groups;
    int64_t *first, *count, *inverse;
} unique_result;

static void unique_result_free(unique_result *r) {
    free(r->first);
    free(r->count);
    free(r->inverse);
}

static tci_status unique_view_of(const ir_node *node, const tci_tensor *x, unique_view *v) {
    const unique_params *p = node->params;
    *v = (unique_view){.x = x, .axis = -1, .outer = 1, .n = op_count(x), .inner = 1};
    if (!p->has_axis) return TCI_OK;
    int a;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &a));
    v->axis = a;
    v->n = x->dims[a];
    for (int d = 0; d < a; d++) v->outer *= x->dims[d];
    for (int d = a + 1; d < x->rank; d++) v->inner *= x->dims[d];
    return TCI_OK;
}

static tci_status unique_find(const ir_node *node, const unique_view *v, unique_result *r) {
    const unique_params *p = node->params;
    int64_t n = v->n;
    *r = (unique_result){0};
    size_t bytes = (size_t)(n ? n : 1) * sizeof(int64_t);
    int64_t *idx = malloc(bytes), *tmp = malloc(bytes);
    r->first = malloc(bytes);
    r->count = malloc(bytes);
    r->inverse = malloc(bytes);
    if (!idx || !tmp || !r->first || !r->count || !r->inverse) {
        free(idx);
        free(tmp);
        unique_result_free(r);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for %lld slices",
                             (long long)n);
    }
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    sort_slices(v, idx, tmp, n);
    /* equal slices are neighbours now, each run in input order (the sort is stable) */
    for (int64_t k = 0; k < n; k++) {
        if (k == 0 || slice_cmp(v, idx[k - 1], idx[k]) != 0) {
            r->first[r->groups] = idx[k];
            r->count[r->groups++] = 0;
        }
        r->count[r->groups - 1]++;
        r->inverse[idx[k]] = r->groups - 1;
    }
    if (!p->sorted) {
        /* groups in order of first occurrence: walking the input, a group is new the first time
         * one of its slices is met */
        int64_t *rank = idx, *first = tmp, next = 0;
        for (int64_t g = 0; g < r->groups; g++) rank[g] = -1;
        for (int64_t i = 0; i < n; i++) {
            int64_t g = r->inverse[i];
            if (rank[g] < 0) rank[g] = next++;
            r->inverse[i] = rank[g];
        }
        for (int64_t g = 0; g < r->groups; g++) first[rank[g]] = r->first[g];
        memcpy(r->first, first, (size_t)r->groups * sizeof *first);
        for (int64_t g = 0; g < r->groups; g++) first[rank[g]] = r->count[g];
        memcpy(r->count, first, (size_t)r->groups * sizeof *first);
    }
    free(idx);
    free(tmp);
    return TCI_OK;
}

static tci_status unique_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const unique_params *p = node->params;
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, unique_types));
    int64_t groups = -1, n = -1;
    if (x->rank >= 0) {
        if (p->has_axis) {
            int a;
            TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &a));
            n = x->dims[a];
        } else {
            TRY_STATUS(ir_count_elements(x->rank, x->dims, &n));
        }
        if (x->data) {
            unique_view v;
            unique_result r;
            TRY_STATUS(unique_view_of(node, x, &v));
            TRY_STATUS(unique_find(node, &v, &r));
            groups = r.groups;
            unique_result_free(&r);
        }
    }
    if (out[0]) {
        op_set_unknown(out[0], x->dtype);
        if (!p->has_axis) {
            out[0]->rank = 1;
            out[0]->dims[0] = groups;
        } else if (x->rank >= 0) {
            int a;
            TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &a));
            op_same_shape(out[0], x);
            out[0]->dims[a] = groups;
        }
    }
    for (int o = 1; o < node->num_outputs; o++) {
        if (!out[o]) continue;
        out[o]->dtype = TCI_DTYPE_INT64;
        out[o]->rank = 1;
        out[o]->dims[0] = o == 2 ? n : groups;
    }
    return TCI_OK;
}

static tci_status unique_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    unique_view v;
    unique_result r;
    TRY_STATUS(unique_view_of(node, x, &v));
    TRY_STATUS(unique_find(node, &v, &r));
    if (out[0]) {
        /* slice first[g] of every outer block, in group order */
        size_t row = (size_t)v.inner * tci_dtype_size(x->dtype);
        char *y = out[0]->data;
        const char *xd = x->data;
        for (int64_t o = 0; o < v.outer; o++)
            for (int64_t g = 0; g < r.groups; g++)
                memcpy(y + (size_t)(o * r.groups + g) * row,
                       xd + (size_t)(o * v.n + r.first[g]) * row, row);
    }
    const int64_t *src[4] = {NULL, r.first, r.inverse, r.count};
    int64_t len[4] = {0, r.groups, v.n, r.groups};
    for (int o = 1; o < node->num_outputs; o++)
        if (out[o] && len[o]) memcpy(out[o]->data, src[o], (size_t)len[o] * sizeof(int64_t));
    unique_result_free(&r);
    return TCI_OK;
}

/* ---- descriptors ---- */

OP_DESC(unique_desc, "Unique", OP_VERSIONS(11, 28), unique_parse, unique_infer, unique_forward, 0,
        NULL, NULL, BINARY_NONE);

const op_desc *const layer_unique_ops[] = {&unique_desc, NULL};
