/* Op family 'eltwise': activations, numpy-broadcast arithmetic (binary and variadic), Equal,
 * Where, Clip, PRelu and Cast, with the fp32 reference kernels. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "layers/op.h"
#include "util/elementwise.h"

/* ---------------------------------------------------------------------------------------------
 * Scalar helpers
 * ------------------------------------------------------------------------------------------- */

static tci_status check_same_dtype(const ir_node *node, const tci_tensor *a, int ia,
                                   const tci_tensor *b, int ib) {
    if (a->dtype != TCI_DTYPE_UNDEFINED && b->dtype != TCI_DTYPE_UNDEFINED &&
        a->dtype != b->dtype)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input %d has dtype %s but input %d has %s", ib,
                             tci_dtype_name(b->dtype), ia, tci_dtype_name(a->dtype));
    return TCI_OK;
}

static const char *const no_attrs[] = {NULL};

/* ---------------------------------------------------------------------------------------------
 * Unary float activations
 * ------------------------------------------------------------------------------------------- */

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
static const tci_dtype abs_sign_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT8,
                                           TCI_DTYPE_UINT8, TCI_DTYPE_INT32,  TCI_DTYPE_INT64,
                                           0};

static const unary_spec unary_specs[] = {
    {"Relu", ACT_RELU, {NULL}, 0, 0, NULL},
    {"LeakyRelu", ACT_LEAKY_RELU, {"alpha", NULL}, 0.01f, 0, NULL},
    {"Sigmoid", ACT_SIGMOID, {NULL}, 0, 0, NULL},
    {"HardSigmoid", ACT_HARD_SIGMOID, {"alpha", "beta", NULL}, 0.2f, 0.5f, NULL},
    {"HardSwish", ACT_HARD_SWISH, {NULL}, 0, 0, NULL},
    {"Tanh", ACT_TANH, {NULL}, 0, 0, NULL},
    {"Elu", ACT_ELU, {"alpha", NULL}, 1.0f, 0, NULL},
    {"Selu", ACT_SELU, {"alpha", "gamma", NULL}, 1.67326319217681884765625f,
     1.05070102214813232421875f, NULL},
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
        if (strcmp(name, "alpha") == 0) TRY_STATUS(ir_attr_float(node, name, p->alpha, &p->alpha));
        if (strcmp(name, "beta") == 0 || strcmp(name, "gamma") == 0)
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

/* Neg, Abs and Sign of signed integers, wrapping like onnxruntime (Neg and Abs of the minimum
 * are the minimum), computed unsigned: signed overflow is undefined in C. */
#define INT_UNARY_LOOP(T, UT)                                                                     \
    do {                                                                                          \
        const T *x = in[0]->data;                                                                 \
        T *y = out[0]->data;                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                         \
            const T v = x[i];                                                                     \
            const T neg = (T)((UT)0 - (UT)v);                                                     \
            y[i] = p->kind == ACT_NEG   ? neg                                                     \
                   : p->kind == ACT_ABS ? (v < 0 ? neg : v)                                       \
                                        : (T)((v > 0) - (v < 0));                                 \
        }                                                                                         \
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
                                        : (v > 0 ? 1 : v < 0 ? -1 : v);
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
 * Binary kernels: one per (operation, dtype), over a row with operand strides 0 or 1
 * ------------------------------------------------------------------------------------------- */

/* Returns nonzero when an element could not be computed (integer division by zero). */
typedef int (*binary_kernel)(void *out, const void *a, int64_t sa, const void *b, int64_t sb,
                             int64_t n);

/* The four loops let the compiler vectorise the same-shape and scalar-operand cases. */
#define BINARY_KERNEL(NAME, T, OT, FN)                                                            \
    static int NAME(void *out, const void *pa, int64_t sa, const void *pb, int64_t sb,            \
                    int64_t n) {                                                                  \
        OT *o = out;                                                                              \
        const T *a = pa, *b = pb;                                                                 \
        int bad = 0;                                                                              \
        if (sa && sb) {                                                                           \
            for (int64_t i = 0; i < n; i++) o[i] = FN(a[i], b[i], &bad);                          \
        } else if (sa) {                                                                          \
            const T y = b[0];                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = FN(a[i], y, &bad);                             \
        } else if (sb) {                                                                          \
            const T x = a[0];                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = FN(x, b[i], &bad);                             \
        } else {                                                                                  \
            const OT v = FN(a[0], b[0], &bad);                                                    \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                             \
        }                                                                                         \
        return bad;                                                                               \
    }

/* Float types: IEEE semantics; Max/Min propagate NaN like numpy and onnxruntime. */
#define FLOAT_OPS(T, S)                                                                           \
    static inline T add_##S(T x, T y, int *bad) { (void)bad; return x + y; }                     \
    static inline T sub_##S(T x, T y, int *bad) { (void)bad; return x - y; }                     \
    static inline T mul_##S(T x, T y, int *bad) { (void)bad; return x * y; }                     \
    static inline T div_##S(T x, T y, int *bad) { (void)bad; return x / y; }                     \
    static inline T max_##S(T x, T y, int *bad) { (void)bad; return (x != x || x > y) ? x : y; } \
    static inline T min_##S(T x, T y, int *bad) { (void)bad; return (x != x || x < y) ? x : y; } \
    static inline uint8_t eq_##S(T x, T y, int *bad) { (void)bad; return x == y; }

/* Integer types: wrap-around like onnxruntime (computed unsigned: signed overflow is undefined in
 * C); division truncates toward zero as onnxruntime does (not numpy's floor). */
#define INT_OPS(T, UT, S)                                                                         \
    static inline T add_##S(T x, T y, int *bad) { (void)bad; return (T)((UT)x + (UT)y); }        \
    static inline T sub_##S(T x, T y, int *bad) { (void)bad; return (T)((UT)x - (UT)y); }        \
    static inline T mul_##S(T x, T y, int *bad) { (void)bad; return (T)((UT)x * (UT)y); }        \
    static inline T max_##S(T x, T y, int *bad) { (void)bad; return x > y ? x : y; }             \
    static inline T min_##S(T x, T y, int *bad) { (void)bad; return x < y ? x : y; }             \
    static inline uint8_t eq_##S(T x, T y, int *bad) { (void)bad; return x == y; }

#define SIGNED_DIV(T, UT, S)                                                                      \
    static inline T div_##S(T x, T y, int *bad) {                                                 \
        if (y == 0) {                                                                             \
            *bad = 1;                                                                             \
            return 0;                                                                             \
        }                                                                                         \
        if (y == -1) return (T)((UT)0 - (UT)x); /* MIN / -1 wraps instead of trapping */          \
        return (T)(x / y);                                                                        \
    }

#define UNSIGNED_DIV(T, S)                                                                        \
    static inline T div_##S(T x, T y, int *bad) {                                                 \
        if (y == 0) {                                                                             \
            *bad = 1;                                                                             \
            return 0;                                                                             \
        }                                                                                         \
        return (T)(x / y);                                                                        \
    }

/* Mod's fmod=1 for integers: the remainder with the dividend's sign (C's %). A zero divisor is
 * reported like Div's: onnxruntime's x % 0 is undefined behaviour (SIGFPE on x86). x % -1 is 0,
 * answered without dividing: MIN % -1 traps on x86. */
#define SIGNED_REM(T, S)                                                                          \
    static inline T fmod_##S(T x, T y, int *bad) {                                                \
        if (y == 0) {                                                                             \
            *bad = 1;                                                                             \
            return 0;                                                                             \
        }                                                                                         \
        return y == -1 ? 0 : (T)(x % y);                                                          \
    }

/* Unsigned, where both of Mod's remainders agree. */
#define UNSIGNED_REM(T, S)                                                                        \
    static inline T fmod_##S(T x, T y, int *bad) {                                                \
        if (y == 0) {                                                                             \
            *bad = 1;                                                                             \
            return 0;                                                                             \
        }                                                                                         \
        return (T)(x % y);                                                                        \
    }                                                                                             \
    static inline T mod_##S(T x, T y, int *bad) { return fmod_##S(x, y, bad); }

FLOAT_OPS(float, f32)
FLOAT_OPS(double, f64)
INT_OPS(int8_t, uint8_t, i8)
INT_OPS(uint8_t, uint8_t, u8)
INT_OPS(int32_t, uint32_t, i32)
INT_OPS(int64_t, uint64_t, i64)
SIGNED_DIV(int8_t, uint8_t, i8)
UNSIGNED_DIV(uint8_t, u8)
SIGNED_DIV(int32_t, uint32_t, i32)
SIGNED_DIV(int64_t, uint64_t, i64)
SIGNED_REM(int8_t, i8)
UNSIGNED_REM(uint8_t, u8)
SIGNED_REM(int32_t, i32)
SIGNED_REM(int64_t, i64)

static inline uint8_t eq_bool(uint8_t x, uint8_t y, int *bad) {
    (void)bad;
    return (x != 0) == (y != 0);
}

/* A libm function of two arguments as an element function. */
#define LIBM_OP(NAME, T, FN)                                                                      \
    static inline T NAME(T x, T y, int *bad) {                                                    \
        (void)bad;                                                                                \
        return FN(x, y);                                                                          \
    }

/* Mod's fmod=0 from fmod_: Python's % for integers, numpy.mod for floats (Mod-28): the divisor's
 * sign, a zero result's too; inf, NaN and a zero divisor give what fmod gives. r + y cannot
 * overflow: r and y have opposite signs and |r| < |y|. */
#define FLOORED_MOD(T, S)                                                                         \
    static inline T mod_##S(T x, T y, int *bad) {                                                 \
        T r = fmod_##S(x, y, bad);                                                                \
        return r != 0 ? ((r < 0) != (y < 0) ? (T)(r + y) : r) : (T)copysign(0.0, (double)y);      \
    }

LIBM_OP(pow_f32, float, powf)
LIBM_OP(pow_f64, double, pow)
LIBM_OP(fmod_f32, float, fmodf)
LIBM_OP(fmod_f64, double, fmod)
FLOORED_MOD(float, f32)
FLOORED_MOD(double, f64)
FLOORED_MOD(int8_t, i8)
FLOORED_MOD(int32_t, i32)
FLOORED_MOD(int64_t, i64)

static inline float prelu_f32(float x, float slope, int *bad) {
    (void)bad;
    return x < 0 ? x * slope : x;
}

#define KERNELS_FOR_TYPE(T, S)                                                                    \
    BINARY_KERNEL(k_add_##S, T, T, add_##S)                                                       \
    BINARY_KERNEL(k_sub_##S, T, T, sub_##S)                                                       \
    BINARY_KERNEL(k_mul_##S, T, T, mul_##S)                                                       \
    BINARY_KERNEL(k_div_##S, T, T, div_##S)                                                       \
    BINARY_KERNEL(k_max_##S, T, T, max_##S)                                                       \
    BINARY_KERNEL(k_min_##S, T, T, min_##S)                                                       \
    BINARY_KERNEL(k_fmod_##S, T, T, fmod_##S)                                                     \
    BINARY_KERNEL(k_mod_##S, T, T, mod_##S)                                                       \
    BINARY_KERNEL(k_eq_##S, T, uint8_t, eq_##S)

KERNELS_FOR_TYPE(float, f32)
KERNELS_FOR_TYPE(double, f64)
KERNELS_FOR_TYPE(int8_t, i8)
KERNELS_FOR_TYPE(uint8_t, u8)
KERNELS_FOR_TYPE(int32_t, i32)
KERNELS_FOR_TYPE(int64_t, i64)
BINARY_KERNEL(k_eq_bool, uint8_t, uint8_t, eq_bool)
BINARY_KERNEL(k_pow_f32, float, float, pow_f32)
BINARY_KERNEL(k_pow_f64, double, double, pow_f64)
BINARY_KERNEL(k_prelu_f32, float, float, prelu_f32)

/* Slots of the kernel table by dtype. */
enum { SLOT_F32, SLOT_F64, SLOT_I8, SLOT_U8, SLOT_I32, SLOT_I64, SLOT_BOOL, SLOT_COUNT };

static int dtype_slot(tci_dtype dtype) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT: return SLOT_F32;
    case TCI_DTYPE_DOUBLE: return SLOT_F64;
    case TCI_DTYPE_INT8: return SLOT_I8;
    case TCI_DTYPE_UINT8: return SLOT_U8;
    case TCI_DTYPE_INT32: return SLOT_I32;
    case TCI_DTYPE_INT64: return SLOT_I64;
    case TCI_DTYPE_BOOL: return SLOT_BOOL;
    default: return -1;
    }
}

#define TYPED_ROW(op)                                                                             \
    {k_##op##_f32, k_##op##_f64, k_##op##_i8, k_##op##_u8, k_##op##_i32, k_##op##_i64, NULL}

static const binary_kernel binary_kernels[BINARY_COUNT][SLOT_COUNT] = {
    [BINARY_ADD] = TYPED_ROW(add),
    [BINARY_SUB] = TYPED_ROW(sub),
    [BINARY_MUL] = TYPED_ROW(mul),
    [BINARY_DIV] = TYPED_ROW(div),
    [BINARY_MAX] = TYPED_ROW(max),
    [BINARY_MIN] = TYPED_ROW(min),
    [BINARY_EQUAL] = {k_eq_f32, k_eq_f64, k_eq_i8, k_eq_u8, k_eq_i32, k_eq_i64, k_eq_bool},
    [BINARY_POW] = {k_pow_f32, k_pow_f64, NULL, NULL, NULL, NULL, NULL},
    [BINARY_MOD] = TYPED_ROW(mod),
    [BINARY_FMOD] = TYPED_ROW(fmod),
};

/* Runs kernel over out = a (op) b with broadcasting; *bad is set when a row reported a failure. */
static void run_binary(binary_kernel kernel, tci_tensor *out, const tci_tensor *a,
                       const tci_tensor *b, int *bad) {
    const tci_tensor *ops[2] = {a, b};
    op_bcast it;
    op_bcast_init(&it, out, ops, 2);
    int64_t o, off[2];
    size_t out_size = tci_dtype_size(out->dtype);
    while (op_bcast_next(&it, &o, off))
        *bad |= kernel((char *)out->data + o * (int64_t)out_size, op_element(a, off[0]),
                       it.row_stride[0], op_element(b, off[1]), it.row_stride[1], it.row);
}

/* Pow of mixed dtypes (opset 12+): rare and small (shape arithmetic), so computed through double
 * like onnxruntime's std::pow. */
static void run_pow_generic(tci_tensor *out, const tci_tensor *a, const tci_tensor *b) {
    const tci_tensor *ops[2] = {a, b};
    op_bcast it;
    op_bcast_init(&it, out, ops, 2);
    int64_t o, off[2];
    while (op_bcast_next(&it, &o, off))
        for (int64_t i = 0; i < it.row; i++) {
            double x = op_load_number(a->dtype, a->data, off[0] + i * it.row_stride[0]);
            double y = op_load_number(b->dtype, b->data, off[1] + i * it.row_stride[1]);
            op_store_number(out->dtype, out->data, o + i, pow(x, y));
        }
}

/* ---------------------------------------------------------------------------------------------
 * Binary ops: Add, Sub, Mul, Div, Pow, Equal, Mod; variadic: Sum, Max, Min
 * ------------------------------------------------------------------------------------------- */

typedef struct binary_params {
    binary_op kind;
} binary_params;

static const struct {
    const char *op_type;
    binary_op kind;
} binary_names[] = {
    {"Add", BINARY_ADD}, {"Sub", BINARY_SUB},     {"Mul", BINARY_MUL}, {"Div", BINARY_DIV},
    {"Pow", BINARY_POW}, {"Equal", BINARY_EQUAL}, {"Sum", BINARY_ADD}, {"Max", BINARY_MAX},
    {"Min", BINARY_MIN},
};

static const tci_dtype arith_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT8,
                                        TCI_DTYPE_UINT8, TCI_DTYPE_INT32,  TCI_DTYPE_INT64, 0};
static const tci_dtype equal_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT8,
                                        TCI_DTYPE_UINT8, TCI_DTYPE_INT32,  TCI_DTYPE_INT64,
                                        TCI_DTYPE_BOOL,  0};
static const tci_dtype pow_base_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT32,
                                           TCI_DTYPE_INT64, 0};

static tci_status binary_kind_parse(ir_node *node, mem_arena *arena) {
    OP_ALLOC_PARAMS(node, arena, binary_params, p);
    for (size_t i = 0; i < sizeof binary_names / sizeof binary_names[0]; i++)
        if (strcmp(binary_names[i].op_type, node->op_type) == 0) {
            p->kind = binary_names[i].kind;
            return ir_check_attrs(node, no_attrs);
        }
    return ir_node_error(node, TCI_ERR_INTERNAL, "not a binary op");
}

static tci_status binary_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    return binary_kind_parse(node, arena);
}

/* Mod's kind comes from its fmod attribute: 1 is C's fmod, 0 Python's % (numpy.mod). */
static tci_status mod_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"fmod", NULL};
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    int64_t fmod_attr;
    TRY_STATUS(ir_attr_int(node, "fmod", 0, &fmod_attr));
    if (fmod_attr != 0 && fmod_attr != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'fmod' is %lld, not 0 or 1",
                             (long long)fmod_attr);
    OP_ALLOC_PARAMS(node, arena, binary_params, p);
    p->kind = fmod_attr ? BINARY_FMOD : BINARY_MOD;
    return TCI_OK;
}

static tci_status binary_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const binary_params *p = node->params;
    if (p->kind == BINARY_POW) {
        TRY_STATUS(op_check_dtype(node, in[0], 0, pow_base_types));
        TRY_STATUS(op_check_dtype(node, in[1], 1, arith_types));
        /* the exponent got its own type constraint in opset 12 */
        if (node->since_version < 12) TRY_STATUS(check_same_dtype(node, in[0], 0, in[1], 1));
    } else {
        const tci_dtype *allowed = p->kind == BINARY_EQUAL ? equal_types : arith_types;
        TRY_STATUS(op_check_dtype(node, in[0], 0, allowed));
        TRY_STATUS(op_check_dtype(node, in[1], 1, allowed));
        TRY_STATUS(check_same_dtype(node, in[0], 0, in[1], 1));
    }
    tci_dtype t = in[0]->dtype != TCI_DTYPE_UNDEFINED ? in[0]->dtype : in[1]->dtype;
    /* Mod-28 defined fmod=0 for floats; onnxruntime refuses it before */
    if (p->kind == BINARY_MOD && (t == TCI_DTYPE_FLOAT || t == TCI_DTYPE_DOUBLE) &&
        node->since_version < 28)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "fmod=0 (integer modulus) with %s inputs: before opset 28, "
                             "floating-point inputs require fmod=1",
                             tci_dtype_name(t));
    TRY_STATUS(op_broadcast_shape(node, in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims,
                               &out[0]->rank, out[0]->dims));
    if (p->kind == BINARY_EQUAL)
        out[0]->dtype = TCI_DTYPE_BOOL;
    else if (p->kind == BINARY_POW || in[0]->dtype != TCI_DTYPE_UNDEFINED)
        out[0]->dtype = in[0]->dtype;
    else
        out[0]->dtype = in[1]->dtype;
    return TCI_OK;
}

static tci_status binary_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const binary_params *p = node->params;
    int bad = 0;
    if (p->kind == BINARY_POW &&
        (in[0]->dtype != in[1]->dtype || dtype_slot(in[0]->dtype) > SLOT_F64)) {
        run_pow_generic(out[0], in[0], in[1]);
        return TCI_OK;
    }
    int slot = dtype_slot(in[0]->dtype);
    binary_kernel kernel = slot >= 0 ? binary_kernels[p->kind][slot] : NULL;
    if (!kernel)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "no kernel for dtype %s",
                             tci_dtype_name(in[0]->dtype));
    run_binary(kernel, out[0], in[0], in[1], &bad);
    if (bad)
        return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT, "integer division by zero");
    return TCI_OK;
}

static tci_status variadic_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 1, 1 << 20, 1, 1));
    for (int i = 0; i < node->num_inputs; i++)
        if (!node->inputs[i])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input %d is missing", i);
    return binary_kind_parse(node, arena);
}

/* Opsets 6 and 7 required equal shapes; broadcasting them too is a superset that changes no
 * valid model. */
static tci_status variadic_infer(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    for (int i = 0; i < node->num_inputs; i++) {
        TRY_STATUS(op_check_dtype(node, in[i], i, arith_types));
        if (i > 0) TRY_STATUS(check_same_dtype(node, in[0], 0, in[i], i));
    }
    op_same_shape(out[0], in[0]);
    for (int i = 1; i < node->num_inputs; i++) {
        int rank = out[0]->rank;
        int64_t dims[TCI_MAX_RANK];
        memcpy(dims, out[0]->dims, sizeof dims);
        TRY_STATUS(op_broadcast_shape(node, rank, dims, in[i]->rank, in[i]->dims, &out[0]->rank,
                                   out[0]->dims));
        if (out[0]->dtype == TCI_DTYPE_UNDEFINED) out[0]->dtype = in[i]->dtype;
    }
    return TCI_OK;
}

static tci_status variadic_forward(const ir_node *node, const tci_tensor *const *in,
                                   tci_tensor *const *out) {
    const binary_params *p = node->params;
    int slot = dtype_slot(in[0]->dtype);
    binary_kernel kernel = slot >= 0 ? binary_kernels[p->kind][slot] : NULL;
    if (!kernel)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "no kernel for dtype %s",
                             tci_dtype_name(in[0]->dtype));
    int bad = 0;
    if (node->num_inputs == 1) {
        size_t bytes = (size_t)op_count(in[0]) * tci_dtype_size(in[0]->dtype);
        if (bytes) memcpy(out[0]->data, in[0]->data, bytes);
        return TCI_OK;
    }
    /* fold left into the output: kernels read each element before writing it, so out may be an
     * operand of its own row */
    run_binary(kernel, out[0], in[0], in[1], &bad);
    for (int i = 2; i < node->num_inputs; i++) run_binary(kernel, out[0], out[0], in[i], &bad);
    return TCI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Where
 * ------------------------------------------------------------------------------------------- */

static const tci_dtype bool_types[] = {TCI_DTYPE_BOOL, 0};
static const tci_dtype any_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16,
                                      TCI_DTYPE_INT8,  TCI_DTYPE_UINT8,  TCI_DTYPE_INT32,
                                      TCI_DTYPE_INT64, TCI_DTYPE_BOOL,   0};

#define WHERE_ROW(NAME, T)                                                                        \
    static void NAME(void *out, const uint8_t *c, const void *px, const void *py,                 \
                     const int64_t *s, int64_t n) {                                               \
        T *o = out;                                                                               \
        const T *x = px, *y = py;                                                                 \
        if (s[0] && s[1] && s[2])                                                                 \
            for (int64_t i = 0; i < n; i++) o[i] = c[i] ? x[i] : y[i];                            \
        else                                                                                      \
            for (int64_t i = 0; i < n; i++) o[i] = c[i * s[0]] ? x[i * s[1]] : y[i * s[2]];       \
    }

WHERE_ROW(where_1, uint8_t)
WHERE_ROW(where_2, uint16_t)
WHERE_ROW(where_4, uint32_t)
WHERE_ROW(where_8, uint64_t)

static tci_status where_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    TRY_STATUS(op_check_arity(node, 3, 3, 1, 1));
    return ir_check_attrs(node, no_attrs);
}

static tci_status where_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    TRY_STATUS(op_check_dtype(node, in[0], 0, bool_types));
    TRY_STATUS(op_check_dtype(node, in[1], 1, any_types));
    TRY_STATUS(op_check_dtype(node, in[2], 2, any_types));
    TRY_STATUS(check_same_dtype(node, in[1], 1, in[2], 2));
    int rank;
    int64_t dims[TCI_MAX_RANK];
    TRY_STATUS(op_broadcast_shape(node, in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims, &rank,
                               dims));
    TRY_STATUS(op_broadcast_shape(node, rank, dims, in[2]->rank, in[2]->dims, &out[0]->rank,
                               out[0]->dims));
    out[0]->dtype = in[1]->dtype != TCI_DTYPE_UNDEFINED ? in[1]->dtype : in[2]->dtype;
    return TCI_OK;
}

static tci_status where_forward(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    void (*row)(void *, const uint8_t *, const void *, const void *, const int64_t *, int64_t);
    size_t size = tci_dtype_size(out[0]->dtype);
    switch (size) {
    case 1: row = where_1; break;
    case 2: row = where_2; break;
    case 4: row = where_4; break;
    case 8: row = where_8; break;
    default:
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "no kernel for dtype %s",
                             tci_dtype_name(out[0]->dtype));
    }
    op_bcast it;
    op_bcast_init(&it, out[0], in, 3);
    int64_t o, off[3];
    while (op_bcast_next(&it, &o, off))
        row((char *)out[0]->data + o * (int64_t)size, (const uint8_t *)op_element(in[0], off[0]),
            op_element(in[1], off[1]), op_element(in[2], off[2]), it.row_stride, it.row);
    return TCI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Clip
 * ------------------------------------------------------------------------------------------- */

typedef struct clip_params {
    float min, max; /* attributes before opset 11 */
} clip_params;

static const tci_dtype clip_float_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, 0};
static const tci_dtype clip_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT8,
                                       TCI_DTYPE_UINT8, TCI_DTYPE_INT32,  TCI_DTYPE_INT64, 0};

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
    TRY_STATUS(op_check_arity(node, 1, 3, 1, 1));
    return ir_check_attrs(node, no_attrs);
}

static tci_status clip_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    /* integer inputs arrived in opset 12 */
    TRY_STATUS(op_check_dtype(node, in[0], 0,
                           node->since_version >= 12 ? clip_types : clip_float_types));
    for (int i = 1; i < node->num_inputs; i++) {
        if (!in[i]) continue;
        TRY_STATUS(check_same_dtype(node, in[0], 0, in[i], i));
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

#define CLIP_LOOP(T, lo_value, hi_value)                                                          \
    do {                                                                                          \
        const T *x = in[0]->data, lo = (T)(lo_value), hi = (T)(hi_value);                         \
        T *y = out[0]->data;                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                         \
            T v = x[i] < lo ? lo : x[i];                                                          \
            y[i] = v > hi ? hi : v;                                                               \
        }                                                                                         \
    } while (0)

static tci_status clip_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const clip_params *p = node->params;
    const int64_t n = op_count(in[0]);
    const tci_tensor *tmin = node->num_inputs > 1 ? in[1] : NULL;
    const tci_tensor *tmax = node->num_inputs > 2 ? in[2] : NULL;
    bool old = node->since_version < 11;
    /* bounds default to the dtype's lowest and highest values (ONNX's numeric_limits) */
    switch (in[0]->dtype) {
    case TCI_DTYPE_FLOAT:
        CLIP_LOOP(float, old ? p->min : tmin ? op_read_number(tmin, 0) : -FLT_MAX,
                  old ? p->max : tmax ? op_read_number(tmax, 0) : FLT_MAX);
        break;
    case TCI_DTYPE_DOUBLE:
        CLIP_LOOP(double, old ? p->min : tmin ? op_read_number(tmin, 0) : -DBL_MAX,
                  old ? p->max : tmax ? op_read_number(tmax, 0) : DBL_MAX);
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
 * PRelu
 * ------------------------------------------------------------------------------------------- */

static tci_status prelu_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    return ir_check_attrs(node, no_attrs);
}

/* The slope broadcasts to X one way (opset 7+): the output always has X's shape. */
static tci_status prelu_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const tci_tensor *x = in[0], *slope = in[1];
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, slope, 1, op_float_types));
    if (x->rank >= 0 && slope->rank >= 0) {
        bool ok = slope->rank <= x->rank;
        for (int i = 0; ok && i < slope->rank; i++) {
            int64_t s = slope->dims[i], d = x->dims[i + x->rank - slope->rank];
            if (s != 1 && s >= 0 && d >= 0 && s != d) ok = false;
        }
        if (!ok) {
            char xs[96], ss[96];
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "slope of shape %s does not broadcast to X of shape %s",
                                 ir_format_dims(slope->rank, slope->dims, ss, sizeof ss),
                                 ir_format_dims(x->rank, x->dims, xs, sizeof xs));
        }
    }
    op_same_shape(out[0], x);
    out[0]->dtype = TCI_DTYPE_FLOAT;
    return TCI_OK;
}

static tci_status prelu_forward(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    (void)node;
    int bad = 0;
    run_binary(k_prelu_f32, out[0], in[0], in[1], &bad);
    return TCI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * GPU lowering
 * ------------------------------------------------------------------------------------------- */

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

/* An activation node (Relu, Clip, Gelu...): one element-wise step, Sigmoid with the Mul of a
 * SiLU pair included. */
static tci_status activation_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *out = node->outputs[0];
    TRY_STATUS(lower_require_known(node, out));
    /* the fusion passes turn a Sigmoid whose Mul completes a SiLU into one SiLU step */
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
    return lower_eltwise_step(b, node, BINARY_NONE, (const ir_tensor *const *)node->inputs, 1,
                              out, act, lower_intern(b, label), -1);
}

/* Add, Mul, Where, PRelu, Mod... and the variadic Sum/Max/Min as a chain of binary steps with
 * the following activation fused into the last. */
static tci_status lower_binary(plan_builder *b, const ir_node *node, binary_op op) {
    const ir_tensor *out = node->outputs[0];
    TRY_STATUS(lower_require_known(node, out));
    plan_layout layout = out->layout; /* the layout pass's, for the chain's temporaries */
    /* the kernels take one value dtype (Where's condition aside) */
    int first = op == BINARY_WHERE ? 1 : 0;
    for (int i = first + 1; i < node->num_inputs; i++)
        if (node->inputs[i] && node->inputs[i]->dtype != node->inputs[first]->dtype)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "inputs of dtypes %s and %s: mixed dtypes have no GPU path",
                                 tci_dtype_name(node->inputs[first]->dtype),
                                 tci_dtype_name(node->inputs[i]->dtype));
    act_params act = {0};
    const ir_tensor *const *inputs = (const ir_tensor *const *)node->inputs;
    const char *label = lower_intern(b, node->op_type);
    if (op == BINARY_WHERE)
        return lower_eltwise_step(b, node, op, inputs, 3, out, act, label, -1);
    int n = node->num_inputs;
    if (n == 1) /* Sum/Max/Min of one input: a copy */
        return lower_eltwise_step(b, node, BINARY_NONE, inputs, 1, out, act, label, -1);
    /* the activation the fusion passes gave it goes into the last step of the chain */
    ir_epilogue no_epilogue;
    const ir_epilogue *e = lower_epilogue(node, &no_epilogue);
    const ir_tensor *final_out = e->output;
    act = e->act;
    label = lower_intern(b, e->label);
    act_params none = {0};
    int acc = -1;
    for (int i = 1; i < n; i++) {
        bool last = i == n - 1;
        int yt = -1;
        if (!last || i > 1) {
            if (last) TRY_STATUS(lower_output(b, node, final_out, &yt));
            else
                TRY_STATUS(lower_temporary(b, "partial", lower_float_dtype(b), layout, out->rank,
                                        out->dims, &yt));
        }
        if (i == 1) { /* inputs 0 and 1 */
            const ir_tensor *pair[2] = {node->inputs[0], node->inputs[1]};
            TRY_STATUS(lower_eltwise_step(b, node, op, pair, 2, final_out, last ? act : none, label,
                                       yt));
        } else { /* acc (already lowered) with input i */
            int other;
            TRY_STATUS(lower_input(b, node, node->inputs[i], layout, &other));
            plan_step *s;
            TRY_STATUS(lower_step(b, PLAN_STEP_ELTWISE, node, label, &s));
            s->u.eltwise.op = op;
            s->u.eltwise.act = last ? act : none;
            const plan_tensor *y = lower_tensor(b, yt);
            lower_output_view(y, &s->u.eltwise.view);
            lower_operand_strides(y, lower_tensor(b, acc), s->u.eltwise.view.strides[0]);
            lower_operand_strides(y, lower_tensor(b, other), s->u.eltwise.view.strides[1]);
            lower_step_io(s, 2, (int[]){acc, other}, 1, &yt);
        }
        acc = yt;
    }
    return TCI_OK;
}

static tci_status binary_gpu_lower(plan_builder *b, const ir_node *node) {
    return lower_binary(b, node, node->desc->binary);
}

/* MOD or FMOD, as parsed from the fmod attribute. */
static tci_status mod_gpu_lower(plan_builder *b, const ir_node *node) {
    const binary_params *p = node->params;
    return lower_binary(b, node, p->kind);
}

/* ---------------------------------------------------------------------------------------------
 * Descriptors
 * ------------------------------------------------------------------------------------------- */

#define OP(var, name, family, lower, epilogue_fn, binary_op, op_flags, ...)                       \
    OP_DESC(var, name, OP_VERSIONS(__VA_ARGS__), family##_parse, family##_infer,                  \
            family##_forward, op_flags, lower, epilogue_fn, binary_op)
/* a binary takes a following activation into its step, which runs in its inputs' layout (Where
 * stays dense) */
#define BINARY_FLAGS (OP_EPILOGUE_ACT | OP_FOLLOWS_LAYOUT)
#define UNARY_OP(var, name, ...)                                                                  \
    OP(var, name, unary, activation_gpu_lower, unary_epilogue, BINARY_NONE, OP_FOLLOWS_LAYOUT,    \
       __VA_ARGS__)

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
OP(clip_op, "Clip", clip, activation_gpu_lower, clip_epilogue, BINARY_NONE, OP_FOLLOWS_LAYOUT, 6,
   11, 12, 13);
OP(prelu_op, "PRelu", prelu, binary_gpu_lower, NULL, BINARY_PRELU, BINARY_FLAGS, 7, 9, 16);
OP(add_op, "Add", binary, binary_gpu_lower, NULL, BINARY_ADD, BINARY_FLAGS, 7, 13, 14);
OP(sub_op, "Sub", binary, binary_gpu_lower, NULL, BINARY_SUB, BINARY_FLAGS, 7, 13, 14);
OP(mul_op, "Mul", binary, binary_gpu_lower, NULL, BINARY_MUL, BINARY_FLAGS, 7, 13, 14);
OP(div_op, "Div", binary, binary_gpu_lower, NULL, BINARY_DIV, BINARY_FLAGS, 7, 13, 14);
OP(pow_op, "Pow", binary, binary_gpu_lower, NULL, BINARY_POW, BINARY_FLAGS, 7, 12, 13, 15);
OP(equal_op, "Equal", binary, binary_gpu_lower, NULL, BINARY_EQUAL, BINARY_FLAGS, 7, 11, 13, 19);
OP(where_op, "Where", where, binary_gpu_lower, NULL, BINARY_WHERE, 0, 9, 16);
OP(sum_op, "Sum", variadic, binary_gpu_lower, NULL, BINARY_ADD, BINARY_FLAGS, 6, 8, 13);
OP(max_op, "Max", variadic, binary_gpu_lower, NULL, BINARY_MAX, BINARY_FLAGS, 6, 8, 12, 13);
OP(min_op, "Min", variadic, binary_gpu_lower, NULL, BINARY_MIN, BINARY_FLAGS, 6, 8, 12, 13);

/* Mod shares Add's inference and reference through binary_params' kind: MOD or FMOD by the fmod
 * attribute (.binary, which only fusion patterns read, says MOD for both). 13 added bfloat16, 28
 * fmod=0 for floats. */
OP_DESC(mod_op, "Mod", OP_VERSIONS(10, 13, 28), mod_parse, binary_infer, binary_forward,
        BINARY_FLAGS, mod_gpu_lower, NULL, BINARY_MOD);
const op_desc *const layer_eltwise_ops[] = {
    &relu_op,  &leaky_relu_op, &sigmoid_op, &hard_sigmoid_op, &hard_swish_op, &tanh_op,
    &elu_op,   &selu_op,       &softplus_op, &sqrt_op,        &erf_op,        &gelu_op,
    &clip_op,  &prelu_op,      &add_op,     &sub_op,          &mul_op,        &div_op,
    &pow_op,   &equal_op,      &where_op,   &sum_op,          &max_op,        &min_op,
    &mod_op,   &neg_op,        &abs_op,     &sign_op,         &exp_op,        &log_op,
    &reciprocal_op, &floor_op, &ceil_op,    &round_op,        &softsign_op,   &mish_op,
    &celu_op,  &thresholded_relu_op, &sin_op, &cos_op,        NULL,
};
