/* Op family 'argreduce': the ops that walk one axis and keep positions or running values rather
 * than one reduced value: ArgMax, ArgMin, CumSum, CumProd and TopK. Each views its input as (outer,
 * len, inner) around the axis; on the GPU each is one step of src/kernels/argreduce.h (CumProd
 * has no GPU path yet).
 *
 * NaN orders as numpy's sort has it (ONNX's reference): above every number. ArgMax and ArgMin
 * return the first NaN of a run (numpy's argmax and argmin), the last with select_last_index;
 * TopK with largest puts NaN first, with smallest last. Integers compare exactly (int64 too). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

/* The input around axis: outer x len x inner. */
static void axis_view(const int64_t *dims, int rank, int axis, int64_t *outer, int64_t *len,
                      int64_t *inner) {
    *outer = lower_prod(dims, 0, axis);
    *len = dims[axis];
    *inner = lower_prod(dims, axis + 1, rank);
}

/* Element i of t as a sort key: a double, or the int64 itself for int64 tensors. */
typedef struct axis_key {
    double d;
    int64_t i;
} axis_key;

static axis_key key_of(const tci_tensor *t, int64_t i) {
    axis_key k = {0, 0};
    if (t->dtype == TCI_DTYPE_INT64) k.i = ((const int64_t *)t->data)[i];
    else k.d = op_read_number(t, i);
    return k;
}

/* Whether a ranks strictly above b: NaN above every number, NaNs equal. */
static bool key_above(bool is_int64, axis_key a, axis_key b) {
    if (is_int64) return a.i > b.i;
    if (isnan(b.d)) return false;
    return isnan(a.d) || a.d > b.d;
}

/* ---- ArgMax, ArgMin ---- */

typedef struct arg_params {
    bool is_min;
    int64_t axis;
    int keepdims;
    int select_last;
} arg_params;

static tci_status arg_parse(ir_node *node, mem_arena *arena, bool is_min) {
    OP_ALLOC_PARAMS(node, arena, arg_params, p);
    p->is_min = is_min;
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    static const char *const known_11[] = {"axis", "keepdims", NULL};
    static const char *const known_12[] = {"axis", "keepdims", "select_last_index", NULL};
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 12 ? known_12 : known_11));
    TRY_STATUS(ir_attr_int(node, "axis", 0, &p->axis));
    TRY_STATUS(op_read_flag(node, "keepdims", 1, &p->keepdims));
    TRY_STATUS(op_read_flag(node, "select_last_index", 0, &p->select_last));
    return TCI_OK;
}

static tci_status argmax_parse(ir_node *node, mem_arena *arena) {
    return arg_parse(node, arena, false);
}

static tci_status argmin_parse(ir_node *node, mem_arena *arena) {
    return arg_parse(node, arena, true);
}

static tci_status arg_infer(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    const arg_params *p = node->params;
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, op_numeric_types));
    tci_tensor *y = out[0];
    op_set_unknown(y, TCI_DTYPE_INT64);
    if (x->rank < 0) return TCI_OK;
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    if (x->dims[axis] == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "axis %d is empty: there is no position to return", axis);
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i != axis) y->dims[r++] = x->dims[i];
        else if (p->keepdims) y->dims[r++] = 1;
    }
    y->rank = r;
    return TCI_OK;
}

static tci_status arg_forward(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const arg_params *p = node->params;
    const tci_tensor *x = in[0];
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t outer, len, inner;
    axis_view(x->dims, x->rank, axis, &outer, &len, &inner);
    const bool is_int64 = x->dtype == TCI_DTYPE_INT64;
    int64_t *y = out[0]->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t k = 0; k < inner; k++) {
            const int64_t base = o * len * inner + k;
            axis_key best = key_of(x, base);
            int64_t at = 0;
            for (int64_t j = 1; j < len; j++) {
                axis_key v = key_of(x, base + j * inner);
                /* a NaN beats every number in both directions, as numpy's argmin has it */
                bool better, equal;
                if (!is_int64 && (isnan(v.d) || isnan(best.d))) {
                    better = isnan(v.d) && !isnan(best.d);
                    equal = isnan(v.d) && isnan(best.d);
                } else {
                    better = p->is_min ? key_above(is_int64, best, v)
                                       : key_above(is_int64, v, best);
                    equal = is_int64 ? v.i == best.i : v.d == best.d;
                }
                if (better || (p->select_last && equal)) best = v, at = j;
            }
            y[o * inner + k] = at;
        }
    }
    return TCI_OK;
}

/* The dtypes the axis kernels take (float, int32, int64), else UNSUPPORTED naming the node. */
static tci_status axis_gpu_dtype(const ir_node *node, const ir_tensor *x) {
    if (x->dtype == TCI_DTYPE_FLOAT || x->dtype == TCI_DTYPE_INT32 || x->dtype == TCI_DTYPE_INT64)
        return TCI_OK;
    return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                         "%s input has no GPU path (float, int32, int64 only)",
                         tci_dtype_name(x->dtype));
}

static tci_status arg_gpu_lower(plan_builder *b, const ir_node *node) {
    const arg_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(axis_gpu_dtype(node, x));
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_ARG_REDUCE, node, NULL, &s));
    axis_view(x->dims, x->rank, axis, &s->u.axis.outer, &s->u.axis.len, &s->u.axis.inner);
    s->u.axis.is_min = p->is_min;
    s->u.axis.select_last = p->select_last;
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

/* ---- CumSum, CumProd ---- */

typedef struct cumsum_params {
    int exclusive;
    int reverse;
    bool product; /* CumProd: running products, from 1 */
} cumsum_params;

static const tci_dtype cumsum_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16,
                                         TCI_DTYPE_INT32, TCI_DTYPE_INT64, 0};

static tci_status running_parse(ir_node *node, mem_arena *arena, bool product) {
    OP_ALLOC_PARAMS(node, arena, cumsum_params, p);
    p->product = product;
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    static const char *const known[] = {"exclusive", "reverse", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    TRY_STATUS(op_read_flag(node, "exclusive", 0, &p->exclusive));
    TRY_STATUS(op_read_flag(node, "reverse", 0, &p->reverse));
    return TCI_OK;
}

static tci_status cumsum_parse(ir_node *node, mem_arena *arena) {
    return running_parse(node, arena, false);
}

static tci_status cumprod_parse(ir_node *node, mem_arena *arena) {
    return running_parse(node, arena, true);
}

/* The axis input (a scalar or one element of int32 / int64) normalised to [0, rank); *known
 * false while its value is not known. */
static tci_status cumsum_axis(const ir_node *node, const tci_tensor *a, int rank, bool *known,
                              int *axis) {
    TRY_STATUS(op_check_dtype(node, a, 1, op_index_types));
    *known = false;
    if (a->rank < 0) return TCI_OK;
    if (a->rank > 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input axis must be a scalar, got rank %d",
                             a->rank);
    int64_t count;
    TRY_STATUS(ir_count_elements(a->rank, a->dims, &count));
    if (count >= 0 && count != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input axis must hold one value, got %lld", (long long)count);
    if (!a->data || rank < 0) return TCI_OK;
    TRY_STATUS(op_normalize_axis(node, op_read_int(a, 0), rank, axis));
    *known = true;
    return TCI_OK;
}

static tci_status cumsum_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    TRY_STATUS(op_check_dtype(node, in[0], 0, cumsum_types));
    bool known;
    int axis;
    TRY_STATUS(cumsum_axis(node, in[1], in[0]->rank, &known, &axis));
    op_same_shape(out[0], in[0]);
    return TCI_OK;
}

static tci_status cumsum_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const cumsum_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *y = out[0];
    bool known;
    int axis;
    TRY_STATUS(cumsum_axis(node, in[1], x->rank, &known, &axis));
    if (!known) return ir_node_error(node, TCI_ERR_INTERNAL, "input axis has no value at run time");
    int64_t outer, len, inner;
    axis_view(x->dims, x->rank, axis, &outer, &len, &inner);
    /* floats run in double, integers in uint64 (wrapping as the stored type does: two's
     * complement sums and products are the same in unsigned arithmetic) */
    const bool integer = x->dtype == TCI_DTYPE_INT32 || x->dtype == TCI_DTYPE_INT64;
    const bool prod = p->product;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t k = 0; k < inner; k++) {
            double acc = prod ? 1 : 0;
            uint64_t iacc = prod ? 1 : 0;
            for (int64_t j = 0; j < len; j++) {
                const int64_t at = o * len * inner + (p->reverse ? len - 1 - j : j) * inner + k;
                if (integer) {
                    const uint64_t v = (uint64_t)op_read_int(x, at);
                    if (!p->exclusive) iacc = prod ? iacc * v : iacc + v;
                    if (x->dtype == TCI_DTYPE_INT32) ((int32_t *)y->data)[at] = (int32_t)iacc;
                    else ((int64_t *)y->data)[at] = (int64_t)iacc;
                    if (p->exclusive) iacc = prod ? iacc * v : iacc + v;
                } else {
                    const double v = op_read_number(x, at);
                    if (!p->exclusive) acc = prod ? acc * v : acc + v;
                    op_write_number(y, at, acc);
                    if (p->exclusive) acc = prod ? acc * v : acc + v;
                }
            }
        }
    }
    return TCI_OK;
}

static tci_status cumsum_gpu_lower(plan_builder *b, const ir_node *node) {
    const cumsum_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(axis_gpu_dtype(node, x));
    if (!node->inputs[1]->data)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "input axis must be a constant for the GPU path");
    tci_tensor a;
    ir_tensor_view(node->inputs[1], &a);
    bool known;
    int axis;
    TRY_STATUS(cumsum_axis(node, &a, x->rank, &known, &axis));
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_CUMSUM, node, NULL, &s));
    axis_view(x->dims, x->rank, axis, &s->u.axis.outer, &s->u.axis.len, &s->u.axis.inner);
    s->u.axis.exclusive = p->exclusive;
    s->u.axis.reverse = p->reverse;
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

/* ---- TopK ---- */

typedef struct topk_params {
    int64_t axis;
    int64_t k;         /* opset 1: the attribute; later from input 1 */
    bool k_from_input;
    int largest;
    int sorted;        /* the order of an unsorted result is unspecified: it is sorted anyway */
} topk_params;

static tci_status topk_parse(ir_node *node, mem_arena *arena) {
    OP_ALLOC_PARAMS(node, arena, topk_params, p);
    p->k_from_input = node->since_version >= 10;
    TRY_STATUS(op_check_arity(node, p->k_from_input ? 2 : 1, p->k_from_input ? 2 : 1, 2, 2));
    static const char *const known_1[] = {"axis", "k", NULL};
    static const char *const known_10[] = {"axis", NULL};
    static const char *const known_11[] = {"axis", "largest", "sorted", NULL};
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 11   ? known_11
                                 : node->since_version >= 10 ? known_10
                                                             : known_1));
    TRY_STATUS(ir_attr_int(node, "axis", -1, &p->axis));
    TRY_STATUS(op_read_flag(node, "largest", 1, &p->largest));
    TRY_STATUS(op_read_flag(node, "sorted", 1, &p->sorted));
    if (!p->k_from_input) {
        TRY_STATUS(ir_attr_int(node, "k", -1, &p->k));
        if (p->k < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'k' is required and must be >= 0");
    }
    return TCI_OK;
}

/* k from the attribute or input 1 (one int64), or -1 while unknown. */
static tci_status topk_k(const ir_node *node, const tci_tensor *const *in, int64_t *k) {
    const topk_params *p = node->params;
    *k = p->k;
    if (!p->k_from_input) return TCI_OK;
    static const tci_dtype k_types[] = {TCI_DTYPE_INT64, 0};
    const tci_tensor *kt = in[1];
    TRY_STATUS(op_check_dtype(node, kt, 1, k_types));
    *k = -1;
    if (kt->rank > 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input K must be 1-D, got rank %d",
                             kt->rank);
    if (kt->rank < 0) return TCI_OK;
    int64_t count;
    TRY_STATUS(ir_count_elements(kt->rank, kt->dims, &count));
    if (count >= 0 && count != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input K must hold one value, got %lld",
                             (long long)count);
    if (!kt->data) return TCI_OK;
    *k = op_read_int(kt, 0);
    if (*k < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "K must be >= 0, got %lld",
                             (long long)*k);
    return TCI_OK;
}

static tci_status topk_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const topk_params *p = node->params;
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, op_numeric_types));
    int64_t k;
    TRY_STATUS(topk_k(node, in, &k));
    op_set_unknown(out[0], x->dtype);
    op_set_unknown(out[1], TCI_DTYPE_INT64);
    if (x->rank < 0) return TCI_OK;
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    if (k >= 0 && x->dims[axis] >= 0 && k > x->dims[axis])
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "K %lld is larger than axis %d (%lld)", (long long)k, axis,
                             (long long)x->dims[axis]);
    for (int o = 0; o < 2; o++) {
        out[o]->rank = x->rank;
        memcpy(out[o]->dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
        out[o]->dims[axis] = k;
    }
    return TCI_OK;
}

/* One element of a run: its key and position. Orders best first: largest or smallest key, ties
 * by the lower position, so the order is total and qsort's lack of stability does not show. */
typedef struct topk_entry {
    axis_key key;
    int64_t pos;
} topk_entry;

#define TOPK_COMPARE(NAME, IS_INT64, LARGEST)                                                     \
    static int NAME(const void *pa, const void *pb) {                                             \
        const topk_entry *a = pa, *b = pb;                                                        \
        if (key_above(IS_INT64, a->key, b->key)) return (LARGEST) ? -1 : 1;                       \
        if (key_above(IS_INT64, b->key, a->key)) return (LARGEST) ? 1 : -1;                       \
        return a->pos < b->pos ? -1 : a->pos > b->pos;                                            \
    }
TOPK_COMPARE(topk_largest, false, true)
TOPK_COMPARE(topk_smallest, false, false)
TOPK_COMPARE(topk_largest_int64, true, true)
TOPK_COMPARE(topk_smallest_int64, true, false)
#undef TOPK_COMPARE

static tci_status topk_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const topk_params *p = node->params;
    const tci_tensor *x = in[0];
    int64_t k;
    TRY_STATUS(topk_k(node, in, &k));
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t outer, len, inner;
    axis_view(x->dims, x->rank, axis, &outer, &len, &inner);
    if (k == 0 || outer == 0 || inner == 0) return TCI_OK;
    topk_entry *run = malloc(sizeof(topk_entry) * (size_t)len);
    if (!run) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for TopK");
    const bool is_int64 = x->dtype == TCI_DTYPE_INT64;
    int (*compare)(const void *, const void *) =
        is_int64 ? (p->largest ? topk_largest_int64 : topk_smallest_int64)
                 : (p->largest ? topk_largest : topk_smallest);
    const size_t elem = tci_dtype_size(x->dtype);
    int64_t *indices = out[1]->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t kk = 0; kk < inner; kk++) {
            for (int64_t j = 0; j < len; j++) {
                run[j].key = key_of(x, o * len * inner + j * inner + kk);
                run[j].pos = j;
            }
            qsort(run, (size_t)len, sizeof *run, compare);
            for (int64_t r = 0; r < k; r++) {
                const int64_t at = o * k * inner + r * inner + kk;
                const int64_t from = o * len * inner + run[r].pos * inner + kk;
                /* the value itself, bit for bit */
                memcpy((char *)out[0]->data + (size_t)at * elem,
                       (const char *)x->data + (size_t)from * elem, elem);
                indices[at] = run[r].pos;
            }
        }
    }
    free(run);
    return TCI_OK;
}

static tci_status topk_gpu_lower(plan_builder *b, const ir_node *node) {
    const topk_params *p = node->params;
    const ir_tensor *x = node->inputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(axis_gpu_dtype(node, x));
    tci_tensor views[2];
    const tci_tensor *in[2] = {&views[0], NULL};
    ir_tensor_view(x, &views[0]);
    if (p->k_from_input) {
        if (!node->inputs[1]->data)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "input K must be a constant for the GPU path");
        ir_tensor_view(node->inputs[1], &views[1]);
        in[1] = &views[1];
    }
    int64_t k;
    TRY_STATUS(topk_k(node, in, &k));
    if (k > PLAN_TOPK_MAX_K)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "K %lld has no GPU path (the per-row kernel keeps at most %d)",
                             (long long)k, PLAN_TOPK_MAX_K);
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int xi, outs[2];
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_output(b, node, node->outputs[0], &outs[0]));
    TRY_STATUS(lower_output(b, node, node->outputs[1], &outs[1]));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_TOPK, node, NULL, &s));
    axis_view(x->dims, x->rank, axis, &s->u.axis.outer, &s->u.axis.len, &s->u.axis.inner);
    s->u.axis.k = k;
    s->u.axis.largest = p->largest;
    lower_step_io(s, 1, &xi, 2, outs);
    return TCI_OK;
}

/* ---- the descriptors ---- */

OP_DESC(argmax_desc, "ArgMax", OP_VERSIONS(1, 11, 12, 13), argmax_parse, arg_infer, arg_forward,
        0, arg_gpu_lower, NULL, BINARY_NONE);
OP_DESC(argmin_desc, "ArgMin", OP_VERSIONS(1, 11, 12, 13), argmin_parse, arg_infer, arg_forward,
        0, arg_gpu_lower, NULL, BINARY_NONE);
OP_DESC(cumsum_desc, "CumSum", OP_VERSIONS(11, 14), cumsum_parse, cumsum_infer, cumsum_forward, 0,
        cumsum_gpu_lower, NULL, BINARY_NONE);
OP_DESC(cumprod_desc, "CumProd", OP_VERSIONS(26), cumprod_parse, cumsum_infer, cumsum_forward,
        0, NULL, NULL, BINARY_NONE);
OP_DESC(topk_desc, "TopK", OP_VERSIONS(1, 10, 11, 24), topk_parse, topk_infer, topk_forward, 0,
        topk_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_argreduce_ops[] = {&argmax_desc, &argmin_desc, &cumsum_desc,
                                              &topk_desc,   &cumprod_desc, NULL};
