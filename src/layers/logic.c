/* Op family 'logic': the element-wise ops whose result is bool: comparisons (Less, Greater,
 * LessOrEqual, GreaterOrEqual), logical ops (And, Or, Xor, Not) and tests (IsNaN, IsInf), with
 * the fp32 reference kernels. Each is a row of util/elementwise.h (BINARY_LIST or ACT_LIST), so
 * the GPU runs them through the element-wise step; Equal lives with the arithmetic (eltwise.c). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "layers/op.h"
#include "util/elementwise.h"

/* The op of a comparison or logical descriptor is its .binary; a test's activation is parsed. */
typedef struct test_params {
    act_params act;
} test_params;

static const tci_dtype compare_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_INT8,
                                          TCI_DTYPE_UINT8, TCI_DTYPE_INT32,  TCI_DTYPE_INT64,
                                          0};
static const tci_dtype bool_types[] = {TCI_DTYPE_BOOL, 0};
static const tci_dtype test_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16, 0};

static tci_status check_same_dtype(const ir_node *node, const tci_tensor *const *in) {
    if (in[0]->dtype != TCI_DTYPE_UNDEFINED && in[1]->dtype != TCI_DTYPE_UNDEFINED &&
        in[0]->dtype != in[1]->dtype)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input 1 has dtype %s but input 0 has %s",
                             tci_dtype_name(in[1]->dtype), tci_dtype_name(in[0]->dtype));
    return TCI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Comparisons and logical ops: two broadcast inputs, one bool output
 * ------------------------------------------------------------------------------------------- */

static tci_status binary_logic_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 2, 2, 1, 1);
}

static tci_status binary_logic_infer(const ir_node *node, const tci_tensor *const *in,
                                     tci_tensor *const *out) {
    const tci_dtype *allowed =
        binary_flags(node->desc->binary) & BINARY_BOOL_INPUTS ? bool_types : compare_types;
    TRY_STATUS(op_check_dtype(node, in[0], 0, allowed));
    TRY_STATUS(op_check_dtype(node, in[1], 1, allowed));
    TRY_STATUS(check_same_dtype(node, in));
    TRY_STATUS(op_broadcast_shape(node, in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims,
                               &out[0]->rank, out[0]->dims));
    out[0]->dtype = TCI_DTYPE_BOOL;
    return TCI_OK;
}

/* One row of out = a (op) b, operand strides 0 or 1. */
#define COMPARE_ROW(S, T)                                                                         \
    static void compare_##S(binary_op op, uint8_t *o, const void *pa, int64_t sa,                 \
                            const void *pb, int64_t sb, int64_t n) {                              \
        const T *a = pa, *b = pb;                                                                 \
        switch (op) {                                                                             \
        case BINARY_LESS:                                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = a[i * sa] < b[i * sb];                         \
            break;                                                                                \
        case BINARY_LESS_EQUAL:                                                                   \
            for (int64_t i = 0; i < n; i++) o[i] = a[i * sa] <= b[i * sb];                        \
            break;                                                                                \
        case BINARY_GREATER:                                                                      \
            for (int64_t i = 0; i < n; i++) o[i] = a[i * sa] > b[i * sb];                         \
            break;                                                                                \
        case BINARY_GREATER_EQUAL:                                                                \
            for (int64_t i = 0; i < n; i++) o[i] = a[i * sa] >= b[i * sb];                        \
            break;                                                                                \
        default: break;                                                                           \
        }                                                                                         \
    }

COMPARE_ROW(f32, float)
COMPARE_ROW(f64, double)
COMPARE_ROW(i8, int8_t)
COMPARE_ROW(u8, uint8_t)
COMPARE_ROW(i32, int32_t)
COMPARE_ROW(i64, int64_t)

/* Bools as ONNX stores them (one byte); any nonzero byte reads as true. */
static void logical_row(binary_op op, uint8_t *o, const void *pa, int64_t sa, const void *pb,
                        int64_t sb, int64_t n) {
    const uint8_t *a = pa, *b = pb;
    for (int64_t i = 0; i < n; i++) {
        const bool x = a[i * sa] != 0, y = b[i * sb] != 0;
        o[i] = op == BINARY_AND ? x && y : op == BINARY_OR ? x || y : x != y;
    }
}

typedef void (*logic_row)(binary_op op, uint8_t *o, const void *pa, int64_t sa, const void *pb,
                          int64_t sb, int64_t n);

static tci_status binary_logic_forward(const ir_node *node, const tci_tensor *const *in,
                                       tci_tensor *const *out) {
    const binary_op op = node->desc->binary;
    logic_row row = NULL;
    switch (in[0]->dtype) {
    case TCI_DTYPE_FLOAT: row = compare_f32; break;
    case TCI_DTYPE_DOUBLE: row = compare_f64; break;
    case TCI_DTYPE_INT8: row = compare_i8; break;
    case TCI_DTYPE_UINT8: row = compare_u8; break;
    case TCI_DTYPE_INT32: row = compare_i32; break;
    case TCI_DTYPE_INT64: row = compare_i64; break;
    case TCI_DTYPE_BOOL: row = logical_row; break;
    default: break;
    }
    if (!row || (row == logical_row) != ((binary_flags(op) & BINARY_BOOL_INPUTS) != 0))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "no kernel for dtype %s",
                             tci_dtype_name(in[0]->dtype));
    const tci_tensor *ops[2] = {in[0], in[1]};
    op_bcast it;
    op_bcast_init(&it, out[0], ops, 2);
    int64_t o, off[2];
    while (op_bcast_next(&it, &o, off))
        row(op, (uint8_t *)out[0]->data + o, op_element(in[0], off[0]), it.row_stride[0],
            op_element(in[1], off[1]), it.row_stride[1], it.row);
    return TCI_OK;
}

/* One step of the element-wise kernel, which compares float storage and int64 and combines
 * bools. */
static tci_status binary_logic_gpu_lower(plan_builder *b, const ir_node *node) {
    const binary_op op = node->desc->binary;
    const ir_tensor *out = node->outputs[0];
    TRY_STATUS(lower_require_known(node, out));
    const tci_dtype t = node->inputs[0]->dtype;
    const bool logical = binary_flags(op) & BINARY_BOOL_INPUTS;
    if (logical ? t != TCI_DTYPE_BOOL : (t != TCI_DTYPE_FLOAT && t != TCI_DTYPE_INT64))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "input dtype %s has no GPU path (%s)",
                             tci_dtype_name(t), logical ? "bool" : "float, int64");
    act_params none = {0};
    return lower_eltwise_step(b, node, op, (const ir_tensor *const *)node->inputs, 2, out, none,
                              NULL, -1);
}

/* ---------------------------------------------------------------------------------------------
 * Tests and Not: one input, a bool output of its shape, the formula an ACT_BOOL_RESULT row's
 * ------------------------------------------------------------------------------------------- */

static tci_status not_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_parse_no_attrs(node, 1, 1, 1, 1));
    OP_ALLOC_PARAMS(node, arena, test_params, p);
    p->act = (act_params){ACT_NOT, 0, 0};
    return TCI_OK;
}

static tci_status isnan_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_parse_no_attrs(node, 1, 1, 1, 1));
    OP_ALLOC_PARAMS(node, arena, test_params, p);
    p->act = (act_params){ACT_IS_NAN, 0, 0};
    return TCI_OK;
}

static tci_status isinf_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"detect_negative", "detect_positive", NULL};
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    int negative, positive;
    TRY_STATUS(op_read_flag(node, "detect_negative", 1, &negative));
    TRY_STATUS(op_read_flag(node, "detect_positive", 1, &positive));
    OP_ALLOC_PARAMS(node, arena, test_params, p);
    p->act = (act_params){ACT_IS_INF, (float)negative, (float)positive};
    return TCI_OK;
}

static tci_status test_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const test_params *p = node->params;
    TRY_STATUS(op_check_dtype(node, in[0], 0, p->act.kind == ACT_NOT ? bool_types : test_types));
    op_same_shape(out[0], in[0]);
    out[0]->dtype = TCI_DTYPE_BOOL;
    return TCI_OK;
}

static tci_status test_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const test_params *p = node->params;
    const int64_t n = op_count(in[0]);
    uint8_t *y = out[0]->data;
    const float a = p->act.alpha, b = p->act.beta;
    switch (in[0]->dtype) {
    case TCI_DTYPE_BOOL:
    case TCI_DTYPE_FLOAT:
    case TCI_DTYPE_FLOAT16:
        /* exact in float: bools are 0 or 1, and fp16 values (inf and NaN included) are floats */
        for (int64_t i = 0; i < n; i++)
            y[i] = act_apply_host(p->act.kind, (float)op_read_number(in[0], i), a, b) != 0.0f;
        return TCI_OK;
    case TCI_DTYPE_DOUBLE: {
        /* a finite double may overflow float: each value stands for itself by its class */
        const double *x = in[0]->data;
        for (int64_t i = 0; i < n; i++) {
            const float v = isfinite(x[i]) ? 0.0f : (float)x[i];
            y[i] = act_apply_host(p->act.kind, v, a, b) != 0.0f;
        }
        return TCI_OK;
    }
    default:
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "no kernel for dtype %s",
                             tci_dtype_name(in[0]->dtype));
    }
}

/* Float storage (IsNaN, IsInf) or bools (Not). The test runs on the stored value: in fp16 a
 * finite float beyond 65504 is already infinite. Never an epilogue (the result is bool). */
static tci_status test_gpu_lower(plan_builder *b, const ir_node *node) {
    const test_params *p = node->params;
    const ir_tensor *out = node->outputs[0];
    TRY_STATUS(lower_require_known(node, out));
    const tci_dtype t = node->inputs[0]->dtype;
    const tci_dtype want = p->act.kind == ACT_NOT ? TCI_DTYPE_BOOL : TCI_DTYPE_FLOAT;
    if (t != want)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "input dtype %s has no GPU path (%s)",
                             tci_dtype_name(t), tci_dtype_name(want));
    return lower_eltwise_step(b, node, BINARY_NONE, (const ir_tensor *const *)node->inputs, 1,
                              out, p->act, NULL, -1);
}

/* The attention fusion's NaN guard after a softmax (Where(IsNaN(p), 0, p)) looks for this role. */
static void isnan_pattern(const ir_node *node, op_pattern *out) {
    (void)node;
    out->kind = OP_PATTERN_IS_NAN;
}

/* ---------------------------------------------------------------------------------------------
 * Descriptors
 * ------------------------------------------------------------------------------------------- */

#define BINARY_LOGIC_OP(var, name, op, ...)                                                       \
    OP_DESC(var, name, OP_VERSIONS(__VA_ARGS__), binary_logic_parse, binary_logic_infer,          \
            binary_logic_forward, 0, binary_logic_gpu_lower, NULL, op)
#define TEST_OP(var, name, parse, ...)                                                            \
    OP_DESC(var, name, OP_VERSIONS(__VA_ARGS__), parse, test_infer, test_forward, 0,              \
            test_gpu_lower, NULL, BINARY_NONE)

/* Less and Greater 7 took floats only and 9 added integers; accepting integers at 7 too changes
 * no valid model. Version 1 of these (and of And, Or, Xor) had the legacy broadcast attribute. */
BINARY_LOGIC_OP(less_op, "Less", BINARY_LESS, 7, 9, 13);
BINARY_LOGIC_OP(greater_op, "Greater", BINARY_GREATER, 7, 9, 13);
BINARY_LOGIC_OP(less_equal_op, "LessOrEqual", BINARY_LESS_EQUAL, 12, 16);
BINARY_LOGIC_OP(greater_equal_op, "GreaterOrEqual", BINARY_GREATER_EQUAL, 12, 16);
BINARY_LOGIC_OP(and_op, "And", BINARY_AND, 7);
BINARY_LOGIC_OP(or_op, "Or", BINARY_OR, 7);
BINARY_LOGIC_OP(xor_op, "Xor", BINARY_XOR, 7);
TEST_OP(not_op, "Not", not_parse, 1);
OP_DESC_PATTERN(isnan_op, "IsNaN", OP_VERSIONS(9, 13, 20), isnan_parse, test_infer, test_forward,
                0, test_gpu_lower, isnan_pattern);
TEST_OP(isinf_op, "IsInf", isinf_parse, 10, 20);

const op_desc *const layer_logic_ops[] = {
    &less_op, &greater_op, &less_equal_op, &greater_equal_op, &and_op, &or_op,
    &xor_op,  &not_op,     &isnan_op,      &isinf_op,         NULL,
};
