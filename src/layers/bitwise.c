/* Op family 'bitwise': BitwiseAnd, BitwiseOr, BitwiseXor (numpy broadcasting), BitwiseNot and
 * BitShift, on the integer types tcinfer stores (int8, uint8, int32, int64; ONNX's int16 and the
 * wider unsigned types are refused where the tensor is read). Values are computed in 64 bits and
 * stored back truncated, which is each type's own wrap-around. CPU reference only (no GPU path:
 * the planner refuses them naming the node). */
#include <stdint.h>
#include <string.h>

#include "layers/op.h"

static const tci_dtype bitwise_types[] = {TCI_DTYPE_INT8, TCI_DTYPE_UINT8, TCI_DTYPE_INT32,
                                          TCI_DTYPE_INT64, 0};

/* Element i of integer data as int64 (sign- or zero-extended) / v stored there, truncated. */
static int64_t load_int(tci_dtype dtype, const void *p, int64_t i) {
    switch (dtype) {
    case TCI_DTYPE_INT8: return ((const int8_t *)p)[i];
    case TCI_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case TCI_DTYPE_INT32: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

static void store_int(tci_dtype dtype, void *p, int64_t i, uint64_t v) {
    switch (dtype) {
    case TCI_DTYPE_INT8: {
        uint8_t b = (uint8_t)v;
        memcpy((int8_t *)p + i, &b, 1);
        break;
    }
    case TCI_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case TCI_DTYPE_INT32: {
        uint32_t w = (uint32_t)v;
        memcpy((int32_t *)p + i, &w, 4);
        break;
    }
    default: memcpy((int64_t *)p + i, &v, 8); break;
    }
}

typedef enum bit_op { BIT_AND, BIT_OR, BIT_XOR, BIT_SHIFT_LEFT, BIT_SHIFT_RIGHT } bit_op;

typedef struct bitwise_params {
    bit_op op;
} bitwise_params;

/* x shifted by s in a type of `bits` bits: ONNX's BitShift-28 rules (a shift that is negative or
 * not below the width leaves the sign fill alone: -1 right of a negative x, else 0; a signed right
 * shift is arithmetic). Version 11 holds unsigned types only, where the same rules apply. */
static uint64_t shift(bit_op op, int64_t x, int64_t s, int bits, bool is_signed) {
    bool negative = is_signed && x < 0;
    if (s < 0 || s >= bits) return op == BIT_SHIFT_RIGHT && negative ? UINT64_MAX : 0;
    if (op == BIT_SHIFT_LEFT) return (uint64_t)x << s;
    /* x >= 0 here is its own zero-extended value; a negative one shifts its complement */
    return negative ? ~(~(uint64_t)x >> s) : (uint64_t)x >> s;
}

static uint64_t apply(bit_op op, int64_t a, int64_t b, int bits, bool is_signed) {
    switch (op) {
    case BIT_AND: return (uint64_t)a & (uint64_t)b;
    case BIT_OR: return (uint64_t)a | (uint64_t)b;
    case BIT_XOR: return (uint64_t)a ^ (uint64_t)b;
    case BIT_SHIFT_LEFT:
    case BIT_SHIFT_RIGHT: return shift(op, a, b, bits, is_signed);
    }
    return 0;
}

static tci_status binary_parse(ir_node *node, mem_arena *arena, bit_op op) {
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    OP_ALLOC_PARAMS(node, arena, bitwise_params, p);
    p->op = op;
    if (op != BIT_SHIFT_LEFT) return op_parse_no_attrs(node, 2, 2, 1, 1);
    static const char *const known[] = {"direction", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    const char *direction;
    TRY_STATUS(ir_attr_string(node, "direction", "", &direction));
    if (strcmp(direction, "LEFT") == 0) return TCI_OK;
    if (strcmp(direction, "RIGHT") == 0) {
        p->op = BIT_SHIFT_RIGHT;
        return TCI_OK;
    }
    return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                         "attribute 'direction' is '%s'; expected 'LEFT' or 'RIGHT' (required)",
                         direction);
}

static tci_status and_parse(ir_node *node, mem_arena *arena) {
    return binary_parse(node, arena, BIT_AND);
}
static tci_status or_parse(ir_node *node, mem_arena *arena) {
    return binary_parse(node, arena, BIT_OR);
}
static tci_status xor_parse(ir_node *node, mem_arena *arena) {
    return binary_parse(node, arena, BIT_XOR);
}
/* direction decides between the two shifts */
static tci_status shift_parse(ir_node *node, mem_arena *arena) {
    return binary_parse(node, arena, BIT_SHIFT_LEFT);
}

static tci_status binary_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *a = in[0], *b = in[1];
    TRY_STATUS(op_check_dtype(node, a, 0, bitwise_types));
    TRY_STATUS(op_check_dtype(node, b, 1, bitwise_types));
    TRY_STATUS(op_check_same_dtype(node, a, 0, b, 1));
    const bitwise_params *p = node->params;
    bool is_shift = p->op == BIT_SHIFT_LEFT || p->op == BIT_SHIFT_RIGHT;
    if (is_shift && node->since_version < 28 && a->dtype != TCI_DTYPE_UINT8 &&
        a->dtype != TCI_DTYPE_UNDEFINED)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "BitShift-11 shifts unsigned integers; %s needs opset 28",
                             tci_dtype_name(a->dtype));
    op_set_unknown(out[0], a->dtype);
    if (a->rank < 0 || b->rank < 0) return TCI_OK;
    return op_broadcast_shape(node, a->rank, a->dims, b->rank, b->dims, &out[0]->rank,
                              out[0]->dims);
}

static tci_status binary_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const bitwise_params *p = node->params;
    tci_dtype dtype = in[0]->dtype;
    int bits = (int)tci_dtype_size(dtype) * 8;
    bool is_signed = dtype != TCI_DTYPE_UINT8;
    const tci_tensor *ops[2] = {in[0], in[1]};
    op_bcast it;
    op_bcast_init(&it, out[0], ops, 2);
    int64_t o, off[2];
    while (op_bcast_next(&it, &o, off))
        for (int64_t k = 0; k < it.row; k++) {
            int64_t a = load_int(dtype, in[0]->data, off[0] + k * it.row_stride[0]);
            int64_t b = load_int(dtype, in[1]->data, off[1] + k * it.row_stride[1]);
            store_int(dtype, out[0]->data, o + k, apply(p->op, a, b, bits, is_signed));
        }
    return TCI_OK;
}

/* ---- BitwiseNot ---- */

static tci_status not_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 1, 1, 1, 1);
}

static tci_status not_infer(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    TRY_STATUS(op_check_dtype(node, in[0], 0, bitwise_types));
    op_same_shape(out[0], in[0]);
    return TCI_OK;
}

static tci_status not_forward(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    (void)node;
    tci_dtype dtype = in[0]->dtype;
    int64_t n = op_count(in[0]);
    for (int64_t i = 0; i < n; i++)
        store_int(dtype, out[0]->data, i, ~(uint64_t)load_int(dtype, in[0]->data, i));
    return TCI_OK;
}

/* ---- descriptors ---- */

OP_DESC(bitwise_and_desc, "BitwiseAnd", OP_VERSIONS(18), and_parse, binary_infer,
        binary_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(bitwise_or_desc, "BitwiseOr", OP_VERSIONS(18), or_parse, binary_infer, binary_forward, 0,
        NULL, NULL, BINARY_NONE);
OP_DESC(bitwise_xor_desc, "BitwiseXor", OP_VERSIONS(18), xor_parse, binary_infer,
        binary_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(bitwise_not_desc, "BitwiseNot", OP_VERSIONS(18), not_parse, not_infer, not_forward, 0,
        NULL, NULL, BINARY_NONE);
OP_DESC(bit_shift_desc, "BitShift", OP_VERSIONS(11, 28), shift_parse, binary_infer,
        binary_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_bitwise_ops[] = {&bitwise_and_desc, &bitwise_or_desc,
                                            &bitwise_xor_desc, &bitwise_not_desc,
                                            &bit_shift_desc,   NULL};
