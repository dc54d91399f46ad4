/* Op family 'reduce': ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
 * ReduceLogSumExp, ReduceSumSquare and ReduceLogSum. The reductions themselves are the rows of
 * util/reduce_ops.h; they accumulate in double (int64 for integers and bool) so long sums stay
 * close to onnxruntime. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"
#include "util/reduce_ops.h"

typedef struct reduce_params {
    reduce_op op;
    const tci_dtype *types; /* what input 0 may be */
    int keepdims;
    int noop_with_empty_axes;
    bool axes_from_input; /* from the op's axes_input_since (ReduceSum 13, the others 18) */
    const int64_t *axes;  /* from the attribute, before that */
    size_t num_axes;
} reduce_params;

static const tci_dtype reduce_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT32,
                                         TCI_DTYPE_INT64, 0};
/* ReduceMax and ReduceMin from opset 20 also take bool (False < True) */
static const tci_dtype reduce_bool_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT32,
                                              TCI_DTYPE_INT64, TCI_DTYPE_BOOL, 0};
/* an L2 norm, a log-sum-exp and a log-sum of integers would round a real result: floats only */
static const tci_dtype reduce_float_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, 0};

#define REDUCE_START_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES) [REDUCE_##NAME] = (START),
static const double reduce_start[REDUCE_COUNT] = {REDUCE_LIST(REDUCE_START_ROW)};
#undef REDUCE_START_ROW
#define REDUCE_DIVIDES_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES) [REDUCE_##NAME] = (DIVIDES),
static const bool reduce_divides[REDUCE_COUNT] = {REDUCE_LIST(REDUCE_DIVIDES_ROW)};
#undef REDUCE_DIVIDES_ROW

/* FINISH of each row, on a double (floats) or an int64 (integers and bool) accumulator. */
#define REDUCE_FINISH_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES)                             \
    static double reduce_finish_##NAME(double a) { return (FINISH); }                             \
    static int64_t reduce_finish_int_##NAME(int64_t a) { return (int64_t)(FINISH); }
REDUCE_LIST(REDUCE_FINISH_ROW)
#undef REDUCE_FINISH_ROW
#define REDUCE_FINISH_TABLE_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES)                       \
    [REDUCE_##NAME] = reduce_finish_##NAME,
static double (*const reduce_finish[REDUCE_COUNT])(double) = {
    REDUCE_LIST(REDUCE_FINISH_TABLE_ROW)};
#undef REDUCE_FINISH_TABLE_ROW
#define REDUCE_FINISH_INT_TABLE_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES)                   \
    [REDUCE_##NAME] = reduce_finish_int_##NAME,
static int64_t (*const reduce_finish_int[REDUCE_COUNT])(int64_t) = {
    REDUCE_LIST(REDUCE_FINISH_INT_TABLE_ROW)};
#undef REDUCE_FINISH_INT_TABLE_ROW

/* Parses the attributes of a reduction op whose axes move from an attribute to an input at
 * opset axes_input_since. */
static tci_status reduce_parse(ir_node *node, mem_arena *arena, reduce_op op, int axes_input_since,
                               const tci_dtype *types) {
    OP_ALLOC_PARAMS(node, arena, reduce_params, p);
    p->op = op;
    p->types = types;
    p->axes_from_input = node->since_version >= axes_input_since;
    TRY_STATUS(op_check_arity(node, 1, p->axes_from_input ? 2 : 1, 1, 1));
    static const char *const known_attr[] = {"axes", "keepdims", NULL};
    static const char *const known_input[] = {"keepdims", "noop_with_empty_axes", NULL};
    TRY_STATUS(ir_check_attrs(node, p->axes_from_input ? known_input : known_attr));
    TRY_STATUS(op_read_flag(node, "keepdims", 1, &p->keepdims));
    TRY_STATUS(op_read_flag(node, "noop_with_empty_axes", 0, &p->noop_with_empty_axes));
    if (!p->axes_from_input) TRY_STATUS(ir_attr_ints(node, "axes", &p->axes, &p->num_axes));
    return TCI_OK;
}

typedef enum reduce_plan_kind {
    REDUCE_PLAN_UNKNOWN, /* axes come from an input whose value is not known yet */
    REDUCE_PLAN_NOOP,    /* empty axes with noop_with_empty_axes: nothing reduced (each value
                            still goes through its row's MAP and FINISH: an L1 norm gives |x|,
                            as ONNX's reference has it) */
    REDUCE_PLAN_AXES,    /* reduce the dims flagged in mask */
} reduce_plan_kind;

/* Works out which dims of in[0] (rank known) are reduced. Duplicate axes count once, as in
 * onnxruntime. */
static tci_status reduce_plan(const ir_node *node, const tci_tensor *const *in,
                              reduce_plan_kind *kind, bool *mask) {
    const reduce_params *p = node->params;
    int rank = in[0]->rank;
    const tci_tensor *axes_in = p->axes_from_input && node->num_inputs > 1 ? in[1] : NULL;
    int64_t count = (int64_t)p->num_axes;
    if (axes_in) {
        TRY_STATUS(op_check_dtype(node, axes_in, 1, op_index_types));
        if (axes_in->rank > 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input axes must be 1-D, got rank %d",
                                 axes_in->rank);
        TRY_STATUS(ir_count_elements(axes_in->rank, axes_in->dims, &count));
        if (count != 0 && !axes_in->data) {
            *kind = REDUCE_PLAN_UNKNOWN;
            return TCI_OK;
        }
    }
    for (int i = 0; i < rank; i++) mask[i] = count == 0 && !p->noop_with_empty_axes;
    if (count == 0) {
        *kind = p->noop_with_empty_axes ? REDUCE_PLAN_NOOP : REDUCE_PLAN_AXES;
        return TCI_OK;
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t a = axes_in ? op_read_int(axes_in, i) : p->axes[i];
        int axis;
        TRY_STATUS(op_normalize_axis(node, a, rank, &axis));
        mask[axis] = true;
    }
    *kind = REDUCE_PLAN_AXES;
    return TCI_OK;
}

static tci_status reduce_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const reduce_params *p = node->params;
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, p->types));
    tci_tensor *y = out[0];
    op_set_unknown(y, x->dtype);
    if (x->rank < 0) return TCI_OK;
    reduce_plan_kind kind;
    bool mask[TCI_MAX_RANK];
    TRY_STATUS(reduce_plan(node, in, &kind, mask));
    if (kind == REDUCE_PLAN_NOOP) {
        op_same_shape(y, x);
    } else if (kind == REDUCE_PLAN_UNKNOWN) {
        /* which dims go is unknown; with keepdims the rank survives and 1s stay 1 */
        if (p->keepdims) {
            y->rank = x->rank;
            for (int i = 0; i < x->rank; i++) y->dims[i] = x->dims[i] == 1 ? 1 : -1;
        }
    } else {
        int r = 0;
        for (int i = 0; i < x->rank; i++) {
            if (!mask[i]) y->dims[r++] = x->dims[i];
            else if (p->keepdims) y->dims[r++] = 1;
        }
        y->rank = r;
    }
    return TCI_OK;
}

/* The input with size-1 dims dropped and neighbouring dims of the same kind (reduced or kept)
 * merged, so the innermost loop runs over as many contiguous elements as possible. */
typedef struct reduce_walk {
    int rank;
    int64_t dims[TCI_MAX_RANK];
    int64_t out_strides[TCI_MAX_RANK]; /* 0 for reduced dims */
    bool inner_reduced;
} reduce_walk;

static void reduce_walk_of(const tci_tensor *x, const bool *mask, reduce_walk *w) {
    bool reduced[TCI_MAX_RANK];
    w->rank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (x->dims[i] == 1) continue;
        if (w->rank > 0 && reduced[w->rank - 1] == mask[i]) {
            w->dims[w->rank - 1] *= x->dims[i];
        } else {
            w->dims[w->rank] = x->dims[i];
            reduced[w->rank++] = mask[i];
        }
    }
    int64_t s = 1;
    for (int i = w->rank - 1; i >= 0; i--) {
        w->out_strides[i] = reduced[i] ? 0 : s;
        if (!reduced[i]) s *= w->dims[i];
    }
    w->inner_reduced = w->rank > 0 && reduced[w->rank - 1];
}

/* The start of a reduction in an integer type: -inf and inf stand for the type's lowest and
 * highest values. */
static int64_t reduce_int_start(double start, int64_t lowest, int64_t highest) {
    return start == -INFINITY ? lowest : start == INFINITY ? highest : (int64_t)start;
}

/* Takes every input element into acc[its output index], in input order; acc holds the start on
 * entry. A reduced innermost run is combined on its own first, then into acc. */
#define DEFINE_REDUCE_ACCUMULATE(NAME, T, ACC, START, MAP, COMBINE)                               \
    static void NAME(const reduce_walk *w, const T *x, ACC *acc) {                                \
        if (w->rank == 0) {                                                                       \
            ACC v = (ACC)x[0];                                                                    \
            v = (MAP);                                                                            \
            ACC a = acc[0];                                                                       \
            acc[0] = (COMBINE);                                                                   \
            return;                                                                               \
        }                                                                                         \
        int last = w->rank - 1;                                                                   \
        int64_t n = w->dims[last], outer = 1, idx[TCI_MAX_RANK] = {0}, off = 0;                   \
        for (int i = 0; i < last; i++) outer *= w->dims[i];                                       \
        for (int64_t o = 0; o < outer; o++, x += n) {                                             \
            if (w->inner_reduced) {                                                               \
                ACC run = (START);                                                                \
                for (int64_t j = 0; j < n; j++) {                                                 \
                    ACC v = (ACC)x[j];                                                            \
                    v = (MAP);                                                                    \
                    ACC a = run;                                                                  \
                    run = (COMBINE);                                                              \
                }                                                                                 \
                ACC a = acc[off], v = run;                                                        \
                acc[off] = (COMBINE);                                                             \
            } else {                                                                              \
                for (int64_t j = 0; j < n; j++) {                                                 \
                    ACC v = (ACC)x[j];                                                            \
                    v = (MAP);                                                                    \
                    ACC a = acc[off + j];                                                         \
                    acc[off + j] = (COMBINE);                                                     \
                }                                                                                 \
            }                                                                                     \
            for (int d = last - 1; d >= 0; d--) {                                                 \
                off += w->out_strides[d];                                                         \
                if (++idx[d] < w->dims[d]) break;                                                 \
                off -= w->out_strides[d] * idx[d];                                                \
                idx[d] = 0;                                                                       \
            }                                                                                     \
        }                                                                                         \
    }

/* One accumulator per reduction and input type: floats in double, integers and bool in int64. */
#define REDUCE_ACCUMULATE_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES)                         \
    DEFINE_REDUCE_ACCUMULATE(reduce_##NAME##_float, float, double, (START), MAP, COMBINE)         \
    DEFINE_REDUCE_ACCUMULATE(reduce_##NAME##_double, double, double, (START), MAP, COMBINE)       \
    DEFINE_REDUCE_ACCUMULATE(reduce_##NAME##_int32, int32_t, int64_t,                             \
                             reduce_int_start((START), INT64_MIN, INT64_MAX), MAP, COMBINE)       \
    DEFINE_REDUCE_ACCUMULATE(reduce_##NAME##_int64, int64_t, int64_t,                             \
                             reduce_int_start((START), INT64_MIN, INT64_MAX), MAP, COMBINE)       \
    DEFINE_REDUCE_ACCUMULATE(reduce_##NAME##_bool, uint8_t, int64_t,                              \
                             reduce_int_start((START), INT64_MIN, INT64_MAX), MAP, COMBINE)
REDUCE_LIST(REDUCE_ACCUMULATE_ROW)
#undef REDUCE_ACCUMULATE_ROW

typedef struct reduce_accumulators {
    void (*float_in)(const reduce_walk *w, const float *x, double *acc);
    void (*double_in)(const reduce_walk *w, const double *x, double *acc);
    void (*int32_in)(const reduce_walk *w, const int32_t *x, int64_t *acc);
    void (*int64_in)(const reduce_walk *w, const int64_t *x, int64_t *acc);
    void (*bool_in)(const reduce_walk *w, const uint8_t *x, int64_t *acc);
} reduce_accumulators;

#define REDUCE_TABLE_ROW(NAME, START, MAP, COMBINE, FINISH, DIVIDES)                              \
    [REDUCE_##NAME] = {reduce_##NAME##_float, reduce_##NAME##_double, reduce_##NAME##_int32,      \
                       reduce_##NAME##_int64, reduce_##NAME##_bool},
static const reduce_accumulators reduce_accumulate[REDUCE_COUNT] = {
    REDUCE_LIST(REDUCE_TABLE_ROW)};
#undef REDUCE_TABLE_ROW

static tci_status reduce_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const reduce_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *y = out[0];
    reduce_plan_kind kind;
    bool mask[TCI_MAX_RANK];
    TRY_STATUS(reduce_plan(node, in, &kind, mask));
    if (kind == REDUCE_PLAN_UNKNOWN)
        return ir_node_error(node, TCI_ERR_INTERNAL, "input axes has no value at run time");
    int64_t in_count = op_count(x), out_count = op_count(y);
    if (out_count == 0) return TCI_OK;
    /* an empty reduction gives the start: a mean too (0 rather than 0/0), as onnxruntime does */
    int64_t group = in_count / out_count;
    bool is_float = x->dtype == TCI_DTYPE_FLOAT || x->dtype == TCI_DTYPE_DOUBLE;
    bool divides = reduce_divides[p->op] && group;
    double start = reduce_start[p->op];
    void *acc = malloc((size_t)out_count * (is_float ? sizeof(double) : sizeof(int64_t)));
    if (!acc) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for accumulators");
    for (int64_t i = 0; i < out_count; i++) {
        if (is_float) ((double *)acc)[i] = start;
        else ((int64_t *)acc)[i] = reduce_int_start(start, INT64_MIN, INT64_MAX);
    }
    if (in_count) {
        reduce_walk w;
        reduce_walk_of(x, mask, &w);
        const reduce_accumulators *r = &reduce_accumulate[p->op];
        if (x->dtype == TCI_DTYPE_FLOAT) r->float_in(&w, x->data, acc);
        else if (x->dtype == TCI_DTYPE_DOUBLE) r->double_in(&w, x->data, acc);
        else if (x->dtype == TCI_DTYPE_INT32) r->int32_in(&w, x->data, acc);
        else if (x->dtype == TCI_DTYPE_BOOL) r->bool_in(&w, x->data, acc);
        else r->int64_in(&w, x->data, acc);
    }
    for (int64_t i = 0; i < out_count; i++) {
        if (is_float) {
            double v = ((double *)acc)[i];
            v = reduce_finish[p->op](divides ? v / (double)group : v);
            if (x->dtype == TCI_DTYPE_DOUBLE) ((double *)y->data)[i] = v;
            else ((float *)y->data)[i] = (float)v;
            continue;
        }
        /* integer mean truncates toward zero, like onnxruntime */
        int64_t v = ((int64_t *)acc)[i];
        if (divides) v /= group;
        v = reduce_finish_int[p->op](v);
        /* an empty reduction gives the start in the output's own type (INT64_MIN and INT64_MAX
         * are the accumulator's extremes) */
        if (x->dtype == TCI_DTYPE_INT32)
            ((int32_t *)y->data)[i] =
                (int32_t)(group ? v : reduce_int_start(start, INT32_MIN, INT32_MAX));
        else if (x->dtype == TCI_DTYPE_BOOL)
            ((uint8_t *)y->data)[i] =
                (uint8_t)(group ? v != 0 : reduce_int_start(start, 0, 1) != 0);
        else ((int64_t *)y->data)[i] = v;
    }
    free(acc);
    return TCI_OK;
}

/* Views of input 0 and the axes input (in[1] NULL when absent); false when the axes are not a
 * constant. */
static bool reduce_views(const ir_node *node, tci_tensor *views, const tci_tensor **in) {
    ir_tensor_view(node->inputs[0], &views[0]);
    in[0] = &views[0];
    in[1] = NULL;
    if (node->num_inputs > 1 && node->inputs[1]) {
        if (!node->inputs[1]->data) return false;
        ir_tensor_view(node->inputs[1], &views[1]);
        in[1] = &views[1];
    }
    return true;
}

/* Over H and W (only) of a known, non-empty 4-D float tensor with keepdims, a mean is a global
 * average pool and a max a global max pool (whose kernel takes fmaxf: a NaN there is dropped,
 * not propagated). On an NHWC8 input (the only time the layout pass asks) the step is that pool
 * and its output stays NHWC8. */
static bool reduce_keeps_nhwc(const ir_node *node) {
    const reduce_params *p = node->params;
    const ir_tensor *x = node->inputs[0];
    if (x->rank != 4 || x->dtype != TCI_DTYPE_FLOAT || !p->keepdims ||
        (p->op != REDUCE_MEAN && p->op != REDUCE_MAX))
        return false;
    for (int i = 0; i < 4; i++)
        if (x->dims[i] < 0) return false;
    tci_tensor views[2];
    const tci_tensor *in[2];
    reduce_plan_kind kind;
    bool reduce[TCI_MAX_RANK] = {false};
    if (x->dims[2] * x->dims[3] == 0 || !reduce_views(node, views, in) ||
        reduce_plan(node, in, &kind, reduce) != TCI_OK)
        return false;
    return kind == REDUCE_PLAN_AXES && reduce[2] && reduce[3] && !reduce[0] && !reduce[1];
}

static tci_status reduce_gpu_lower(plan_builder *b, const ir_node *node) {
    const reduce_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, y));
    tci_tensor views[2];
    const tci_tensor *in[2];
    if (!reduce_views(node, views, in))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "input 1 must be a constant for the GPU path");
    reduce_plan_kind kind;
    bool reduce[TCI_MAX_RANK] = {false};
    TRY_STATUS(reduce_plan(node, in, &kind, reduce));
    if (x->dtype != TCI_DTYPE_FLOAT)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "%s reductions have no GPU path (float only)",
                             tci_dtype_name(x->dtype));
    /* the layout pass kept the output NHWC8: a global pool (reduce_keeps_nhwc) */
    if (y->layout == PLAN_LAYOUT_NHWC8)
        return layer_lower_global_pool(b, node, x, y,
                                       p->op == REDUCE_MAX ? POOL_MAX : POOL_AVERAGE);
    if (x->rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "rank %d reductions have no GPU path",
                             x->rank);
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_REDUCE, node, NULL, &s));
    plan_strided *v = &s->u.reduce.view;
    memset(v, 0, sizeof *v);
    v->rank = x->rank;
    v->pad_dim = -1;
    for (int i = 0; i < x->rank; i++) {
        v->dims[i] = x->dims[i];
        s->u.reduce.reduce_dim[i] = reduce[i];
    }
    op_strides(x->rank, x->dims, v->strides[0]);
    s->u.reduce.op = p->op;
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

/* ---- the descriptors ---- */

static tci_status reduce_sum_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_SUM, 13, reduce_types);
}

static tci_status reduce_mean_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_MEAN, 18, reduce_types);
}

static tci_status reduce_max_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_MAX, 18,
                        node->since_version >= 20 ? reduce_bool_types : reduce_types);
}

static tci_status reduce_min_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_MIN, 18,
                        node->since_version >= 20 ? reduce_bool_types : reduce_types);
}

static tci_status reduce_prod_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_PROD, 18, reduce_types);
}

static tci_status reduce_l1_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_L1, 18, reduce_types);
}

static tci_status reduce_l2_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_L2, 18, reduce_float_types);
}

static tci_status reduce_log_sum_exp_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_LOG_SUM_EXP, 18, reduce_float_types);
}

static tci_status reduce_sum_square_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_SUM_SQUARE, 18, reduce_types);
}

static tci_status reduce_log_sum_parse(ir_node *node, mem_arena *arena) {
    return reduce_parse(node, arena, REDUCE_LOG_SUM, 18, reduce_float_types);
}

static const int reduce_sum_versions[] = {1, 11, 13, 0};
static const int reduce_mean_versions[] = {1, 11, 13, 18, 0};
static const int reduce_max_versions[] = {1, 11, 12, 13, 18, 20, 0};
/* ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare */
static const int reduce_18_versions[] = {1, 11, 13, 18, 0};
/* ReduceLogSumExp, ReduceLogSum */
static const int reduce_log_sum_exp_versions[] = {1, 11, 13, 18, 28, 0};

#define REDUCE_DESC(var, name, versions, parse)                                                   \
    OP_DESC_KEEPS_NHWC(var, name, versions, parse, reduce_infer, reduce_forward, 0,               \
                       reduce_gpu_lower, reduce_keeps_nhwc)

REDUCE_DESC(reduce_sum_desc, "ReduceSum", reduce_sum_versions, reduce_sum_parse);
REDUCE_DESC(reduce_mean_desc, "ReduceMean", reduce_mean_versions, reduce_mean_parse);
REDUCE_DESC(reduce_max_desc, "ReduceMax", reduce_max_versions, reduce_max_parse);
REDUCE_DESC(reduce_min_desc, "ReduceMin", reduce_max_versions, reduce_min_parse);
REDUCE_DESC(reduce_prod_desc, "ReduceProd", reduce_18_versions, reduce_prod_parse);
REDUCE_DESC(reduce_l1_desc, "ReduceL1", reduce_18_versions, reduce_l1_parse);
REDUCE_DESC(reduce_l2_desc, "ReduceL2", reduce_18_versions, reduce_l2_parse);
REDUCE_DESC(reduce_log_sum_exp_desc, "ReduceLogSumExp", reduce_log_sum_exp_versions,
            reduce_log_sum_exp_parse);
REDUCE_DESC(reduce_sum_square_desc, "ReduceSumSquare", reduce_18_versions,
            reduce_sum_square_parse);
/* CPU only for now: kern_reduce expands its row too, but no GPU run has checked it yet */
OP_DESC(reduce_log_sum_desc, "ReduceLogSum", reduce_log_sum_exp_versions, reduce_log_sum_parse,
        reduce_infer, reduce_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_reduce_ops[] = {
    &reduce_sum_desc, &reduce_mean_desc,        &reduce_max_desc,        &reduce_min_desc,
    &reduce_prod_desc, &reduce_l1_desc,         &reduce_l2_desc,         &reduce_log_sum_exp_desc,
    &reduce_sum_square_desc, &reduce_log_sum_desc, NULL};
