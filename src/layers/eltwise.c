/* Op family 'eltwise': numpy-broadcast arithmetic (binary, and variadic Sum/Max/Min/Mean),
 * Equal, Mod, Where and PRelu, with the fp32 reference kernels (activations: unary.c). */
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

static const char *const no_attrs[] = {NULL};

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
    {"Min", BINARY_MIN}, {"Mean", BINARY_ADD},
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
        if (node->since_version < 12) TRY_STATUS(op_check_same_dtype(node, in[0], 0, in[1], 1));
    } else {
        const tci_dtype *allowed = p->kind == BINARY_EQUAL ? equal_types : arith_types;
        TRY_STATUS(op_check_dtype(node, in[0], 0, allowed));
        TRY_STATUS(op_check_dtype(node, in[1], 1, allowed));
        TRY_STATUS(op_check_same_dtype(node, in[0], 0, in[1], 1));
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
        if (i > 0) TRY_STATUS(op_check_same_dtype(node, in[0], 0, in[i], i));
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
    TRY_STATUS(op_check_same_dtype(node, in[1], 1, in[2], 2));
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

/* Mean: the variadic sum of floats, times 1/n. */
static tci_status mean_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    static const tci_dtype types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, 0};
    for (int i = 0; i < node->num_inputs; i++) TRY_STATUS(op_check_dtype(node, in[i], i, types));
    return variadic_infer(node, in, out);
}

static tci_status mean_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    TRY_STATUS(variadic_forward(node, in, out));
    const int64_t n = op_count(out[0]);
    const double scale = 1.0 / node->num_inputs;
    if (out[0]->dtype == TCI_DTYPE_DOUBLE)
        for (int64_t i = 0; i < n; i++) ((double *)out[0]->data)[i] *= scale;
    else
        for (int64_t i = 0; i < n; i++) ((float *)out[0]->data)[i] *= (float)scale;
    return TCI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * GPU lowering
 * ------------------------------------------------------------------------------------------- */

/* Add, Mul, Where, PRelu, Mod... and the variadic Sum/Max/Min/Mean as a chain of binary steps
 * with the following activation (or, non-NULL, last_act: Mean's 1/n) fused into the last. */
static tci_status lower_binary(plan_builder *b, const ir_node *node, binary_op op,
                               const act_params *last_act) {
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
    if (n == 1) /* Sum/Max/Min/Mean of one input: a copy */
        return lower_eltwise_step(b, node, BINARY_NONE, inputs, 1, out, act, label, -1);
    /* the activation the fusion passes gave it goes into the last step of the chain */
    ir_epilogue no_epilogue;
    const ir_epilogue *e = lower_epilogue(node, &no_epilogue);
    const ir_tensor *final_out = e->output;
    act = last_act ? *last_act : e->act;
    label = lower_intern(b, e->label);
    /* a Div that took its erf-expanded Gelu (fuse.c): the activation reads the dividend and
     * divides in fp32 itself */
    if (op == BINARY_DIV && act.kind == ACT_GELU_SCALED)
        return lower_eltwise_step(b, node, BINARY_NONE, inputs, 1, final_out, act, label, -1);
    /* x * c, c * x or x / c by a float scalar constant, nothing fused: the factor in fp32
     * (ACT_SCALE over x), as PyTorch's half-precision ops take a Python number. The constant
     * read in the storage type (1 / sqrt(384) is not exact in fp16) would scale every output by
     * the same relative error, up to 2^-12, which every mean over the tensor keeps. */
    float factor;
    int x = act.kind == ACT_NONE && n == 2 ? op_scaling_input(node, &factor) : -1;
    if (x >= 0 && node->inputs[x]->dtype == TCI_DTYPE_FLOAT)
        return lower_eltwise_step(b, node, BINARY_NONE, &inputs[x], 1, final_out,
                                  (act_params){ACT_SCALE, factor, 0.0f}, label, -1);
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
            TRY_STATUS(lower_output_view(node, y, &s->u.eltwise.view));
            lower_operand_strides(y, lower_tensor(b, acc), s->u.eltwise.view.strides[0]);
            lower_operand_strides(y, lower_tensor(b, other), s->u.eltwise.view.strides[1]);
            lower_step_io(s, 2, (int[]){acc, other}, 1, &yt);
        }
        acc = yt;
    }
    return TCI_OK;
}

static tci_status binary_gpu_lower(plan_builder *b, const ir_node *node) {
    return lower_binary(b, node, node->desc->binary, NULL);
}

static tci_status mean_gpu_lower(plan_builder *b, const ir_node *node) {
    act_params scale = {ACT_SCALE, 1.0f / (float)node->num_inputs, 0.0f};
    return lower_binary(b, node, BINARY_ADD, &scale);
}

/* MOD or FMOD, as parsed from the fmod attribute. */
static tci_status mod_gpu_lower(plan_builder *b, const ir_node *node) {
    const binary_params *p = node->params;
    return lower_binary(b, node, p->kind, NULL);
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
/* no activation fuses into Mean's last step, which applies the 1/n */
OP_DESC(mean_op, "Mean", OP_VERSIONS(6, 8, 13), variadic_parse, mean_infer, mean_forward,
        OP_FOLLOWS_LAYOUT, mean_gpu_lower, NULL, BINARY_NONE);

/* Mod shares Add's inference and reference through binary_params' kind: MOD or FMOD by the fmod
 * attribute (.binary, which only fusion patterns read, says MOD for both). 13 added bfloat16, 28
 * fmod=0 for floats. */
OP_DESC(mod_op, "Mod", OP_VERSIONS(10, 13, 28), mod_parse, binary_infer, binary_forward,
        BINARY_FLAGS, mod_gpu_lower, NULL, BINARY_MOD);
const op_desc *const layer_eltwise_ops[] = {
    &prelu_op, &add_op, &sub_op,  &mul_op, &div_op,  &pow_op,  &equal_op,
    &where_op, &sum_op, &max_op,  &min_op, &mod_op,  &mean_op, NULL,
};
