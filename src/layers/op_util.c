/* Helpers shared by the op family files: arity, dtype and broadcast checks, element access. */
#include <math.h>
#include <string.h>

#include "layers/op.h"

const tci_dtype op_float_types[] = {TCI_DTYPE_FLOAT, 0};
const tci_dtype op_numeric_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16,
                                      TCI_DTYPE_INT8,  TCI_DTYPE_INT32,  TCI_DTYPE_INT64,
                                      TCI_DTYPE_UINT8, 0};
const tci_dtype op_index_types[] = {TCI_DTYPE_INT32, TCI_DTYPE_INT64, 0};

tci_status op_check_arity(const ir_node *node, int min_in, int max_in, int min_out,
                          int max_out) {
    if (node->num_inputs < min_in || node->num_inputs > max_in)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "has %d inputs, expected %d to %d",
                             node->num_inputs, min_in, max_in);
    if (node->num_outputs < min_out || node->num_outputs > max_out)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "has %d outputs, expected %d to %d",
                             node->num_outputs, min_out, max_out);
    for (int i = 0; i < min_in; i++)
        if (!node->inputs[i])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "required input %d is missing", i);
    for (int i = 0; i < min_out; i++)
        if (!node->outputs[i])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "required output %d is missing",
                                 i);
    return TCI_OK;
}

tci_status op_check_dtype(const ir_node *node, const tci_tensor *in, int index,
                          const tci_dtype *allowed) {
    if (in->dtype == TCI_DTYPE_UNDEFINED) return TCI_OK;
    for (const tci_dtype *d = allowed; *d; d++)
        if (*d == in->dtype) return TCI_OK;
    return ir_node_error(node, TCI_ERR_UNSUPPORTED, "input %d has unsupported dtype %s", index,
                         tci_dtype_name(in->dtype));
}

tci_status op_broadcast_shape(const ir_node *node, int rank_a, const int64_t *dims_a, int rank_b,
                              const int64_t *dims_b, int *out_rank, int64_t *out_dims) {
    if (rank_a < 0 || rank_b < 0) {
        *out_rank = -1;
        return TCI_OK;
    }
    int r = rank_a > rank_b ? rank_a : rank_b;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - rank_a), ib = i - (r - rank_b);
        int64_t a = ia >= 0 ? dims_a[ia] : 1, b = ib >= 0 ? dims_b[ib] : 1;
        int64_t d;
        if (a == b) d = a;
        else if (a == 1) d = b;
        else if (b == 1) d = a;
        else if (a < 0) d = b;
        else if (b < 0) d = a;
        else
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "shapes do not broadcast: dim %d is %lld vs %lld", i,
                                 (long long)a, (long long)b);
        out_dims[i] = d;
    }
    *out_rank = r;
    return TCI_OK;
}

int64_t op_count(const tci_tensor *t) {
    int64_t c = 1;
    for (int i = 0; i < t->rank; i++) c *= t->dims[i];
    return c;
}

tci_status op_normalize_axis(const ir_node *node, int64_t axis, int rank, int *out_axis) {
    if (axis < -rank || axis >= rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axis %lld out of range for rank %d",
                             (long long)axis, rank);
    *out_axis = (int)(axis < 0 ? axis + rank : axis);
    return TCI_OK;
}

int64_t op_read_int(const tci_tensor *t, int64_t i) {
    switch (t->dtype) {
    case TCI_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case TCI_DTYPE_INT64: return ((const int64_t *)t->data)[i];
    default: return (int64_t)op_read_number(t, i);
    }
}

double op_read_number(const tci_tensor *t, int64_t i) {
    switch (t->dtype) {
    case TCI_DTYPE_FLOAT: return ((const float *)t->data)[i];
    case TCI_DTYPE_DOUBLE: return ((const double *)t->data)[i];
    case TCI_DTYPE_FLOAT16: return op_half_to_float(((const uint16_t *)t->data)[i]);
    case TCI_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case TCI_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    case TCI_DTYPE_BOOL: return ((const uint8_t *)t->data)[i] != 0;
    case TCI_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case TCI_DTYPE_INT64: return (double)((const int64_t *)t->data)[i];
    default: return 0;
    }
}

void op_write_number(tci_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case TCI_DTYPE_FLOAT: ((float *)t->data)[i] = (float)v; break;
    case TCI_DTYPE_DOUBLE: ((double *)t->data)[i] = v; break;
    case TCI_DTYPE_FLOAT16: ((uint16_t *)t->data)[i] = op_float_to_half((float)v); break;
    case TCI_DTYPE_INT8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case TCI_DTYPE_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case TCI_DTYPE_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    case TCI_DTYPE_INT32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case TCI_DTYPE_INT64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    default: break;
    }
}

float op_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t op_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
    if (absx < 0x38800000u) {                                  /* subnormal or zero in half */
        if (absx < 0x33000000u) return (uint16_t)sign;         /* below half of min subnormal */
        /* value = m * 2^(e-150); in units of the half subnormal 2^-24 that is m >> (126-e) */
        uint32_t e = absx >> 23, m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((absx - 0x38000000u) >> 13);
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

float op_bfloat16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t op_float_to_bfloat16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    /* round to nearest even on the 16 dropped bits; a carry into the exponent is correct,
     * up to rounding the largest finite values to inf */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

void op_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

void op_same_shape(tci_tensor *out, const tci_tensor *in) {
    out->dtype = in->dtype;
    out->rank = in->rank;
    for (int i = 0; i < TCI_MAX_RANK; i++) out->dims[i] = in->dims[i];
}
