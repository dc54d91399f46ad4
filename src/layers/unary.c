/* Op family 'unary': the element-wise activations and math functions of one
 * input (Relu, Sigmoid, Gelu, Exp, Sin, Shrink...), each a row of
 * util/elementwise.h's ACT_LIST, and Clip; one element-wise step on the GPU, or
 * an epilogue of the step before. SwiGLU, the Swish of one input gating another
 * of its shape, is the CPU reference's only (no GPU path). */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "layers/op.h"
#include "util/elementwise.h"

/* ---------------------------------------------------------------------------------------------
 * Unary float activations
 * -------------------------------------------------------------------------------------------
 */

/* alpha and beta as in util/elementwise.h's ACT_LIST (Selu's gamma is beta). */
typedef struct unary_params {
    act_kind kind;
    float alpha, beta;
    const tci_dtype *types; /* the input dtypes it takes */
} unary_params;

typedef struct unary_spec {
    const char *op_type;
    act_kind kind;
    const char *attrs[3];
    float alpha, beta;      /* ONNX defaults */
    const tci_dtype *types; /* NULL: float */
} unary_spec;

/* Neg, Abs and Sign take integers and double too (Neg no unsigned ones). */
static const tci_dtype neg_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT8,
                                      TCI_DTYPE_INT32, TCI_DTYPE_INT64,  0};
static const tci_dtype abs_sign_types[] = {TCI_DTYPE_FLOAT,
                                           TCI_DTYPE_DOUBLE,
                                           TCI_DTYPE_INT8,
                                           TCI_DTYPE_UINT8,
                                           TCI_DTYPE_INT32,
                                           TCI_DTYPE_INT64,
                                           0};

static const unary_spec unary_specs[] = {
    {"Relu", ACT_RELU, {NULL}, 0, 0, NULL},
    {"LeakyRelu", ACT_LEAKY_RELU, {"alpha", NULL}, 0.01f, 0, NULL},
    {"Sigmoid", ACT_SIGMOID, {NULL}, 0, 0, NULL},
    {"HardSigmoid", ACT_HARD_SIGMOID, {"alpha", "beta", NULL}, 0.2f, 0.5f, NULL},
    {"HardSwish", ACT_HARD_SWISH, {NULL}, 0, 0, NULL},
    {"Tanh", ACT_TANH, {NULL}, 0, 0, NULL},
    {"Elu", ACT_ELU, {"alpha", NULL}, 1.0f, 0, NULL},
    {"Selu",
     ACT_SELU,
     {"alpha", "gamma", NULL},
     1.67326319217681884765625f,
     1.05070102214813232421875f,
     NULL},
    {"Softplus", ACT_SOFTPLUS, {NULL}, 0, 0, NULL},
    {"Sqrt", ACT_SQRT, {NULL}, 0, 0, NULL},
    {"Erf", ACT_ERF, {NULL}, 0, 0, NULL},
    {"Gelu", ACT_GELU, {"approximate", NULL}, 0, 0, NULL},
    {"Neg", ACT_NEG, {NULL}, 0, 0, neg_types},
    {"Abs", ACT_ABS, {NULL}, 0, 0, abs_sign_types},
    {"Sign", ACT_SIGN, {NULL}, 0, 0, abs_sign_types},
    {"Exp", ACT_EXP, {NULL}, 0, 0, NULL},
    {"Log", ACT_LOG, {NULL}, 0, 0, NULL},
    {"Reciprocal", ACT_RECIPROCAL, {NULL}, 0, 0, NULL},
    {"Floor", ACT_FLOOR, {NULL}, 0, 0, NULL},
    {"Ceil", ACT_CEIL, {NULL}, 0, 0, NULL},
    {"Round", ACT_ROUND, {NULL}, 0, 0, NULL},
    {"Softsign", ACT_SOFTSIGN, {NULL}, 0, 0, NULL},
    {"Mish", ACT_MISH, {NULL}, 0, 0, NULL},
    {"Celu", ACT_CELU, {"alpha", NULL}, 1.0f, 0, NULL},
    {"ThresholdedRelu", ACT_THRESHOLDED_RELU, {"alpha", NULL}, 1.0f, 0, NULL},
    {"Sin", ACT_SIN, {NULL}, 0, 0, NULL},
    {"Cos", ACT_COS, {NULL}, 0, 0, NULL},
    {"Tan", ACT_TAN, {NULL}, 0, 0, NULL},
    {"Asin", ACT_ASIN, {NULL}, 0, 0, NULL},
    {"Acos", ACT_ACOS, {NULL}, 0, 0, NULL},
    {"Atan", ACT_ATAN, {NULL}, 0, 0, NULL},
    {"Sinh", ACT_SINH, {NULL}, 0, 0, NULL},
    {"Cosh", ACT_COSH, {NULL}, 0, 0, NULL},
    {"Asinh", ACT_ASINH, {NULL}, 0, 0, NULL},
    {"Acosh", ACT_ACOSH, {NULL}, 0, 0, NULL},
    {"Atanh", ACT_ATANH, {NULL}, 0, 0, NULL},
    {"Shrink", ACT_SHRINK, {"lambd", "bias", NULL}, 0.5f, 0, NULL},
    {"Swish", ACT_SWISH, {"alpha", NULL}, 1.0f, 0, NULL},
};

static tci_status unary_parse(ir_node *node, mem_arena *arena) {
    const unary_spec *spec = NULL;
    for (size_t i = 0; i < sizeof unary_specs / sizeof unary_specs[0]; i++)
        if (strcmp(unary_specs[i].op_type, node->op_type) == 0) spec = &unary_specs[i];
    if (!spec) return ir_node_error(node, TCI_ERR_INTERNAL, "not a unary op");
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    TRY_STATUS(ir_check_attrs(node, spec->attrs));
    OP_ALLOC_PARAMS(node, arena, unary_params, p);
    p->kind = spec->kind;
    p->alpha = spec->alpha;
    p->beta = spec->beta;
    p->types = spec->types ? spec->types : op_float_types;
    for (int i = 0; spec->attrs[i]; i++) {
        const char *name = spec->attrs[i];
        if (strcmp(name, "alpha") == 0 || strcmp(name, "lambd") == 0)
            TRY_STATUS(ir_attr_float(node, name, p->alpha, &p->alpha));
        if (strcmp(name, "beta") == 0 || strcmp(name, "gamma") == 0 || strcmp(name, "bias") == 0)
            TRY_STATUS(ir_attr_float(node, name, p->beta, &p->beta));
    }
    if (spec->kind == ACT_GELU) {
        const char *approximate;
        TRY_STATUS(ir_attr_string(node, "approximate", "none", &approximate));
        if (strcmp(approximate, "tanh") == 0)
            p->kind = ACT_GELU_TANH;
        else if (strcmp(approximate, "none") != 0)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "attribute 'approximate' value '%s' is not supported (none, "
                                 "tanh)",
                                 approximate);
    }
    /* Celu divides by alpha */
    if (spec->kind == ACT_CELU && p->alpha == 0.0f)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'alpha' is 0");
    return TCI_OK;
}

static tci_status unary_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const unary_params *p = node->params;
    TRY_STATUS(op_check_dtype(node, in[0], 0, p->types));
    op_same_shape(out[0], in[0]);
    return TCI_OK;
}

/* Neg, Abs and Sign of signed integers, wrapping like onnxruntime (Neg and Abs
 * of the minimum are the minimum), computed unsigned: signed overflow is
 * undefined in C. */
#define INT_UNARY_LOOP(T, UT)                                                                      \
    do {                                                                                           \
        const T *x = in[0]->data;                                                                  \
        T *y = out[0]->data;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T v = x[i];                                                                      \
            const T neg = (T)((UT)0 - (UT)v);                                                      \
            y[i] = p->kind == ACT_NEG   ? neg                                                      \
                   : p->kind == ACT_ABS ? (v < 0 ? neg : v)                                        \
                                        : (T)((v > 0) - (v < 0));                                  \
        }                                                                                          \
    } while (0)

static tci_status unary_forward(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const unary_params *p = node->params;
    const int64_t n = op_count(in[0]);
    switch (in[0]->dtype) {
    case TCI_DTYPE_FLOAT: {
        const float *x = in[0]->data;
        float *y = out[0]->data;
        for (int64_t i = 0; i < n; i++) y[i] = act_apply_host(p->kind, x[i], p->alpha, p->beta);
        return TCI_OK;
    }
    case TCI_DTYPE_DOUBLE: {
        const double *x = in[0]->data;
        double *y = out[0]->data;
        for (int64_t i = 0; i < n; i++) {
            const double v = x[i];
            y[i] = p->kind == ACT_NEG   ? -v
                   : p->kind == ACT_ABS ? fabs(v)
                                        : (v > 0   ? 1
                                           : v < 0 ? -1
                                                   : v);
        }
        return TCI_OK;
    }
    case TCI_DTYPE_UINT8: { /* Abs or Sign */
        const uint8_t *x = in[0]->data;
        uint8_t *y = out[0]->data;
        for (int64_t i = 0; i < n; i++) y[i] = p->kind == ACT_ABS ? x[i] : x[i] > 0;
        return TCI_OK;
    }
    case TCI_DTYPE_INT8: INT_UNARY_LOOP(int8_t, uint8_t); return TCI_OK;
    case TCI_DTYPE_INT32: INT_UNARY_LOOP(int32_t, uint32_t); return TCI_OK;
    case TCI_DTYPE_INT64: INT_UNARY_LOOP(int64_t, uint64_t); return TCI_OK;
    default:
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "no kernel for dtype %s",
                             tci_dtype_name(in[0]->dtype));
    }
}

/* ---------------------------------------------------------------------------------------------
 * Clip
 * -------------------------------------------------------------------------------------------
 */

typedef struct clip_params {
    float min, max; /* attributes before opset 11 */
} clip_params;

static const tci_dtype clip_float_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, 0};
static const tci_dtype clip_types[] = {TCI_DTYPE_FLOAT,
                                       TCI_DTYPE_DOUBLE,
                                       TCI_DTYPE_INT8,
                                       TCI_DTYPE_UINT8,
                                       TCI_DTYPE_INT32,
                                       TCI_DTYPE_INT64,
                                       0};

static tci_status clip_parse(ir_node *node, mem_arena *arena) {
    OP_ALLOC_PARAMS(node, arena, clip_params, p);
    if (node->since_version < 11) {
        static const char *const known[] = {"min", "max", NULL};
        TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
        TRY_STATUS(ir_check_attrs(node, known));
        TRY_STATUS(ir_attr_float(node, "min", -FLT_MAX, &p->min));
        TRY_STATUS(ir_attr_float(node, "max", FLT_MAX, &p->max));
        return TCI_OK;
    }
    return op_parse_no_attrs(node, 1, 3, 1, 1);
}

static tci_status clip_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    /* integer inputs arrived in opset 12 */
    TRY_STATUS(
        op_check_dtype(node, in[0], 0, node->since_version >= 12 ? clip_types : clip_float_types));
    for (int i = 1; i < node->num_inputs; i++) {
        if (!in[i]) continue;
        TRY_STATUS(op_check_same_dtype(node, in[0], 0, in[i], i));
        int64_t count;
        TRY_STATUS(ir_count_elements(in[i]->rank, in[i]->dims, &count));
        if (count >= 0 && count != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "input %d (%s) must be a scalar, it has %lld elements", i,
                                 i == 1 ? "min" : "max", (long long)count);
    }
    op_same_shape(out[0], in[0]);
    return TCI_OK;
}

#define CLIP_LOOP(T, lo_value, hi_value)                                                           \
    do {                                                                                           \
        const T *x = in[0]->data, lo = (T)(lo_value), hi = (T)(hi_value);                          \
        T *y = out[0]->data;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T v = x[i] < lo ? lo : x[i];                                                           \
            y[i] = v > hi ? hi : v;                                                                \
        }                                                                                          \
    } while (0)

static tci_status clip_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const clip_params *p = node->params;
    const int64_t n = op_count(in[0]);
    const tci_tensor *tmin = node->num_inputs > 1 ? in[1] : NULL;
    const tci_tensor *tmax = node->num_inputs > 2 ? in[2] : NULL;
    bool old = node->since_version < 11;
    /* bounds default to the dtype's lowest and highest values (ONNX's
     * numeric_limits) */
    switch (in[0]->dtype) {
    case TCI_DTYPE_FLOAT:
        CLIP_LOOP(float,
                  old    ? p->min
                  : tmin ? op_read_number(tmin, 0)
                         : -FLT_MAX,
                  old    ? p->max
                  : tmax ? op_read_number(tmax, 0)
                         : FLT_MAX);
        break;
    case TCI_DTYPE_DOUBLE:
        CLIP_LOOP(double,
                  old    ? p->min
                  : tmin ? op_read_number(tmin, 0)
                         : -DBL_MAX,
                  old    ? p->max
                  : tmax ? op_read_number(tmax, 0)
                         : DBL_MAX);
        break;
    case TCI_DTYPE_INT8:
        CLIP_LOOP(int8_t, tmin ? op_read_int(tmin, 0) : INT8_MIN,
                  tmax ? op_read_int(tmax, 0) : INT8_MAX);
        break;
    case TCI_DTYPE_UINT8:
        CLIP_LOOP(uint8_t, tmin ? op_read_int(tmin, 0) : 0,
                  tmax ? op_read_int(tmax, 0) : UINT8_MAX);
        break;
    case TCI_DTYPE_INT32:
        CLIP_LOOP(int32_t, tmin ? op_read_int(tmin, 0) : INT32_MIN,
                  tmax ? op_read_int(tmax, 0) : INT32_MAX);
        break;
    case TCI_DTYPE_INT64:
        CLIP_LOOP(int64_t, tmin ? op_read_int(tmin, 0) : INT64_MIN,
                  tmax ? op_read_int(tmax, 0) : INT64_MAX);
        break;
    default:
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "no kernel for dtype %s",
                             tci_dtype_name(in[0]->dtype));
    }
    return TCI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * GPU lowering
 * -------------------------------------------------------------------------------------------
 */

static tci_status unary_epilogue(const ir_node *node, act_params *act) {
    const unary_params *p = node->params;
    act->kind = p->kind;
    act->alpha = p->alpha;
    act->beta = p->beta;
    return TCI_OK;
}

static tci_status clip_epilogue(const ir_node *node, act_params *act) {
    const clip_params *p = node->params;
    act->kind = ACT_CLIP;
    if (node->since_version < 11) {
        act->alpha = p->min;
        act->beta = p->max;
        return TCI_OK;
    }
    TRY_STATUS(lower_scalar_input(node, 1, -INFINITY, &act->alpha));
    return lower_scalar_input(node, 2, INFINITY, &act->beta);
}

/* An activation node (Relu, Clip, Gelu...): one element-wise step, Sigmoid with
 * the Mul of a SiLU pair included. */
static tci_status activation_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *out = node->outputs[0];
    TRY_STATUS(lower_require_known(node, out));
    /* the fusion passes turn a Sigmoid whose Mul completes a SiLU into one SiLU
     * step */
    ir_epilogue none;
    const ir_epilogue *e = lower_epilogue(node, &none);
    act_params act;
    TRY_STATUS(node->desc->epilogue(node, &act));
    /* the kernel's value types: float storage, and int64 for what act_i64 has */
    const tci_dtype t = node->inputs[0]->dtype;
    const bool int64_ok = act.kind == ACT_NEG || act.kind == ACT_ABS || act.kind == ACT_SIGN;
    if (t != TCI_DTYPE_FLOAT && !(t == TCI_DTYPE_INT64 && int64_ok))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "input dtype %s has no GPU path (%s)",
                             tci_dtype_name(t), int64_ok ? "float, int64" : "float");
    if (node->epilogue) act = e->act;
    const char *label = e->label;
    out = e->output;
    return lower_eltwise_step(b, node, BINARY_NONE, (const ir_tensor *const *)node->inputs, 1, out,
                              act, lower_intern(b, label), -1);
}

/* ---------------------------------------------------------------------------------------------
 * Descriptors
 * -------------------------------------------------------------------------------------------
 */

#define OP(var, name, family, lower, epilogue_fn, op_flags, ...)                                   \
    OP_DESC(var, name, OP_VERSIONS(__VA_ARGS__), family##_parse, family##_infer, family##_forward, \
            op_flags, lower, epilogue_fn, BINARY_NONE)
#define UNARY_OP(var, name, ...)                                                                   \
    OP(var, name, unary, activation_gpu_lower, unary_epilogue, OP_FOLLOWS_LAYOUT, __VA_ARGS__)

UNARY_OP(relu_op, "Relu", 6, 13, 14);
UNARY_OP(leaky_relu_op, "LeakyRelu", 6, 16);
UNARY_OP(sigmoid_op, "Sigmoid", 6, 13);
UNARY_OP(hard_sigmoid_op, "HardSigmoid", 6, 22);
UNARY_OP(hard_swish_op, "HardSwish", 14, 22);
UNARY_OP(tanh_op, "Tanh", 6, 13);
UNARY_OP(elu_op, "Elu", 6, 22);
UNARY_OP(selu_op, "Selu", 6, 22);
UNARY_OP(softplus_op, "Softplus", 1, 22);
UNARY_OP(sqrt_op, "Sqrt", 6, 13);
UNARY_OP(erf_op, "Erf", 9, 13);
UNARY_OP(gelu_op, "Gelu", 20);
UNARY_OP(neg_op, "Neg", 6, 13);
UNARY_OP(abs_op, "Abs", 6, 13);
UNARY_OP(sign_op, "Sign", 9, 13);
UNARY_OP(exp_op, "Exp", 6, 13);
UNARY_OP(log_op, "Log", 6, 13);
UNARY_OP(reciprocal_op, "Reciprocal", 6, 13);
UNARY_OP(floor_op, "Floor", 6, 13);
UNARY_OP(ceil_op, "Ceil", 6, 13);
UNARY_OP(round_op, "Round", 11, 22);
UNARY_OP(softsign_op, "Softsign", 1, 22);
UNARY_OP(mish_op, "Mish", 18, 22);
UNARY_OP(celu_op, "Celu", 12, 28);
UNARY_OP(thresholded_relu_op, "ThresholdedRelu", 10, 22);
UNARY_OP(sin_op, "Sin", 7, 22);
UNARY_OP(cos_op, "Cos", 7, 22);
UNARY_OP(tan_op, "Tan", 7, 22);
UNARY_OP(asin_op, "Asin", 7, 22);
UNARY_OP(acos_op, "Acos", 7, 22);
UNARY_OP(atan_op, "Atan", 7, 22);
UNARY_OP(sinh_op, "Sinh", 9, 22);
UNARY_OP(cosh_op, "Cosh", 9, 22);
UNARY_OP(asinh_op, "Asinh", 9, 22);
UNARY_OP(acosh_op, "Acosh", 9, 22);
UNARY_OP(atanh_op, "Atanh", 9, 22);
UNARY_OP(shrink_op, "Shrink", 9);
UNARY_OP(swish_op, "Swish", 24);
OP(clip_op, "Clip", clip, activation_gpu_lower, clip_epilogue, OP_FOLLOWS_LAYOUT, 6, 11, 12, 13);

/* ---- SwiGLU: Y = Swish_alpha(A) * B, A and B of one shape (no broadcast) ---- */

typedef struct swiglu_params {
    float alpha;
} swiglu_params;

static tci_status swiglu_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"alpha", NULL};
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, swiglu_params, p);
    return ir_attr_float(node, "alpha", 1.0f, &p->alpha);
}

static tci_status swiglu_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *a = in[0], *b = in[1];
    TRY_STATUS(op_check_dtype(node, a, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, b, 1, op_float_types));
    bool differ = a->rank >= 0 && b->rank >= 0 && a->rank != b->rank;
    for (int d = 0; !differ && a->rank >= 0 && d < a->rank && b->rank == a->rank; d++)
        differ = a->dims[d] >= 0 && b->dims[d] >= 0 && a->dims[d] != b->dims[d];
    if (differ) {
        char as[128], bs[128];
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "A %s and B %s differ in shape (SwiGLU does not broadcast)",
                             ir_format_dims(a->rank, a->dims, as, sizeof as),
                             ir_format_dims(b->rank, b->dims, bs, sizeof bs));
    }
    op_same_shape(out[0], a->rank >= 0 ? a : b);
    if (a->rank >= 0 && b->rank == a->rank)
        for (int d = 0; d < a->rank; d++)
            if (out[0]->dims[d] < 0) out[0]->dims[d] = b->dims[d];
    out[0]->dtype = TCI_DTYPE_FLOAT;
    return TCI_OK;
}

static tci_status swiglu_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const swiglu_params *p = node->params;
    const float *a = in[0]->data, *b = in[1]->data;
    float *y = out[0]->data;
    int64_t n = op_count(out[0]);
    for (int64_t i = 0; i < n; i++) y[i] = act_apply_host(ACT_SWISH, a[i], p->alpha, 0.0f) * b[i];
    return TCI_OK;
}

OP_DESC(swiglu_op, "SwiGLU", OP_VERSIONS(28), swiglu_parse, swiglu_infer, swiglu_forward, 0, NULL,
        NULL, BINARY_NONE);

const op_desc *const layer_unary_ops[] = {
    &relu_op,  &leaky_relu_op, &sigmoid_op,    &hard_sigmoid_op, &hard_swish_op,
    &tanh_op,  &elu_op,        &selu_op,       &softplus_op,     &sqrt_op,
    &erf_op,   &gelu_op,       &neg_op,        &abs_op,          &sign_op,
    &exp_op,   &log_op,        &reciprocal_op, &floor_op,        &ceil_op,
    &round_op, &softsign_op,   &mish_op,       &celu_op,         &thresholded_relu_op,
    &sin_op,   &cos_op,        &tan_op,        &asin_op,         &acos_op,
    &atan_op,  &sinh_op,       &cosh_op,       &asinh_op,        &acosh_op,
    &atanh_op, &shrink_op,     &swish_op,      &clip_op,         &swiglu_op,
    NULL,
};
