/* Helpers shared by the op family files: arity, dtype and broadcast checks, element access. */
#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

const tci_dtype op_float_types[] = {TCI_DTYPE_FLOAT, 0};
const tci_dtype op_numeric_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16,
                                      TCI_DTYPE_INT8,  TCI_DTYPE_INT32,  TCI_DTYPE_INT64,
                                      TCI_DTYPE_UINT8, 0};
const tci_dtype op_index_types[] = {TCI_DTYPE_INT32, TCI_DTYPE_INT64, 0};

/* TensorProto.DataType names, for messages about types we do not hold. */
static const char *const onnx_type_names[] = {
    "UNDEFINED", "FLOAT",       "UINT8",         "INT8",       "UINT16",         "INT16",
    "INT32",     "INT64",       "STRING",        "BOOL",       "FLOAT16",        "DOUBLE",
    "UINT32",    "UINT64",      "COMPLEX64",     "COMPLEX128", "BFLOAT16",       "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4",          "FLOAT4E2M1",
    "FLOAT8E8M0", "UINT2",      "INT2",          "FLOAT6E2M3", "FLOAT6E3M2",
};

int op_scaling_input(const ir_node *node, float *factor) {
    if (!node || !node->desc || node->num_inputs != 2 || !node->outputs[0]) return -1;
    binary_op op = node->desc->binary;
    float c;
    int x = -1;
    if (op == BINARY_MUL && ir_float_scalar(node->inputs[1], &c)) x = 0;
    else if (op == BINARY_MUL && ir_float_scalar(node->inputs[0], &c)) x = 1;
    else if (op == BINARY_DIV && ir_float_scalar(node->inputs[1], &c)) x = 0;
    if (x < 0 || !isfinite(c) || c == 0.0f) return -1;
    float f = op == BINARY_DIV ? 1.0f / c : c;
    const ir_tensor *in = node->inputs[x], *out = node->outputs[0];
    if (!in || !isfinite(f) || in->rank != out->rank) return -1;
    for (int i = 0; i < in->rank; i++)
        if (in->dims[i] != out->dims[i]) return -1;
    *factor = f;
    return x;
}

const char *op_onnx_type_name(int64_t type) {
    const int64_t count = (int64_t)(sizeof onnx_type_names / sizeof onnx_type_names[0]);
    return type > 0 && type < count ? onnx_type_names[type] : NULL;
}

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
    case TCI_DTYPE_FLOAT16: return half_to_float(((const uint16_t *)t->data)[i]);
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
    case TCI_DTYPE_FLOAT16: ((uint16_t *)t->data)[i] = float_to_half((float)v); break;
    case TCI_DTYPE_INT8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case TCI_DTYPE_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case TCI_DTYPE_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    case TCI_DTYPE_INT32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case TCI_DTYPE_INT64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    default: break;
    }
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

void op_set_unknown(tci_tensor *t, tci_dtype dtype) {
    t->dtype = dtype;
    t->rank = -1;
    for (int i = 0; i < TCI_MAX_RANK; i++) t->dims[i] = -1;
}

tci_status op_read_flag(const ir_node *node, const char *name, int64_t def, int *out) {
    int64_t v;
    TRY_STATUS(ir_attr_int(node, name, def, &v));
    if (v != 0 && v != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute '%s' must be 0 or 1, got %lld",
                             name, (long long)v);
    *out = (int)v;
    return TCI_OK;
}

/* Float to integer as x86 onnxruntime does it (cvttss2si): truncation, and the "integer
 * indefinite" minimum for NaN and out-of-range values; narrower types keep the low bits. */
static int64_t float_to_int64(double v) {
    if (v >= -9223372036854775808.0 && v < 9223372036854775808.0) return (int64_t)v;
    return INT64_MIN;
}

static int32_t float_to_int32(double v) {
    if (v > -2147483649.0 && v < 2147483648.0) return (int32_t)v;
    return INT32_MIN;
}

double op_load_number(tci_dtype dtype, const void *p, int64_t i) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT: return ((const float *)p)[i];
    case TCI_DTYPE_DOUBLE: return ((const double *)p)[i];
    case TCI_DTYPE_FLOAT16: return half_to_float(((const uint16_t *)p)[i]);
    case TCI_DTYPE_INT8: return ((const int8_t *)p)[i];
    case TCI_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case TCI_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    case TCI_DTYPE_INT32: return ((const int32_t *)p)[i];
    case TCI_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    default: return 0;
    }
}

void op_store_number(tci_dtype dtype, void *p, int64_t i, double v) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case TCI_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
    case TCI_DTYPE_FLOAT16: ((uint16_t *)p)[i] = float_to_half((float)v); break;
    case TCI_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)float_to_int32(v); break;
    case TCI_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)float_to_int32(v); break;
    case TCI_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case TCI_DTYPE_INT32: ((int32_t *)p)[i] = float_to_int32(v); break;
    case TCI_DTYPE_INT64: ((int64_t *)p)[i] = float_to_int64(v); break;
    default: break;
    }
}

tci_status op_check_blas_dims(const ir_node *node, int64_t m, int64_t n, int64_t k) {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "matrix dims %lldx%lldx%lld exceed the BLAS int range", (long long)m,
                             (long long)n, (long long)k);
    return TCI_OK;
}

tci_status op_parse_no_attrs(const ir_node *node, int min_in, int max_in, int min_out,
                             int max_out) {
    static const char *const none[] = {NULL};
    TRY_STATUS(op_check_arity(node, min_in, max_in, min_out, max_out));
    return ir_check_attrs(node, none);
}


void op_bcast_init(op_bcast *it, const tci_tensor *out, const tci_tensor *const *ops,
                       int num_ops) {
    memset(it, 0, sizeof *it);
    it->num_ops = num_ops;
    int64_t dims[TCI_MAX_RANK], st[OP_BCAST_MAX_OPS][TCI_MAX_RANK], own[OP_BCAST_MAX_OPS][TCI_MAX_RANK];
    for (int k = 0; k < num_ops; k++) op_strides(ops[k]->rank, ops[k]->dims, own[k]);
    int r = 0;
    for (int i = 0; i < out->rank; i++) {
        if (out->dims[i] == 1) continue;
        dims[r] = out->dims[i];
        for (int k = 0; k < num_ops; k++) {
            int j = i - (out->rank - ops[k]->rank);
            st[k][r] = j >= 0 && ops[k]->dims[j] != 1 ? own[k][j] : 0;
        }
        r++;
    }
    int c = 0;
    for (int i = 0; i < r; i++) {
        bool merge = c > 0;
        for (int k = 0; k < num_ops && merge; k++)
            if (st[k][c - 1] != st[k][i] * dims[i]) merge = false;
        if (merge) {
            dims[c - 1] *= dims[i];
            for (int k = 0; k < num_ops; k++) st[k][c - 1] = st[k][i];
            continue;
        }
        dims[c] = dims[i];
        for (int k = 0; k < num_ops; k++) st[k][c] = st[k][i];
        c++;
    }
    int64_t count = op_count(out);
    if (c == 0) {
        it->row = 1;
    } else {
        it->row = dims[c - 1];
        for (int k = 0; k < num_ops; k++) it->row_stride[k] = st[k][c - 1];
        it->outer_rank = c - 1;
        for (int d = 0; d < c - 1; d++) {
            it->outer_dims[d] = dims[d];
            for (int k = 0; k < num_ops; k++) it->outer_strides[k][d] = st[k][d];
        }
    }
    it->rows = count > 0 ? count / it->row : 0;
}

bool op_bcast_next(op_bcast *it, int64_t *out_offset, int64_t *op_offsets) {
    if (it->next >= it->rows) return false;
    *out_offset = it->next * it->row;
    for (int k = 0; k < it->num_ops; k++) op_offsets[k] = it->offset[k];
    it->next++;
    for (int d = it->outer_rank - 1; d >= 0; d--) {
        it->index[d]++;
        for (int k = 0; k < it->num_ops; k++) it->offset[k] += it->outer_strides[k][d];
        if (it->index[d] < it->outer_dims[d]) break;
        for (int k = 0; k < it->num_ops; k++)
            it->offset[k] -= it->outer_strides[k][d] * it->outer_dims[d];
        it->index[d] = 0;
    }
    return true;
}

const void *op_element(const tci_tensor *t, int64_t offset) {
    return (const char *)t->data + offset * (int64_t)tci_dtype_size(t->dtype);
}

tci_status op_check_same_dtype(const ir_node *node, const tci_tensor *a, int ia,
                               const tci_tensor *b, int ib) {
    if (a->dtype != TCI_DTYPE_UNDEFINED && b->dtype != TCI_DTYPE_UNDEFINED &&
        a->dtype != b->dtype)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input %d has dtype %s but input %d has %s", ib,
                             tci_dtype_name(b->dtype), ia, tci_dtype_name(a->dtype));
    return TCI_OK;
}

void op_matmul_side_of(const tci_tensor *t, bool is_b, op_matmul_side *s) {
    int r = t->rank;
    s->batch = t->dims;
    s->batch_rank = r == 1 ? 0 : r - 2;
    s->rows = r == 1 ? (is_b ? t->dims[0] : 1) : t->dims[r - 2];
    s->cols = r == 1 ? (is_b ? 1 : t->dims[0]) : t->dims[r - 1];
}

tci_status op_matmul_shape(const ir_node *node, const tci_tensor *a, const tci_tensor *b,
                           tci_tensor *y) {
    if (a->rank == 0 || b->rank == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "operands must have rank >= 1, got ranks %d and %d", a->rank,
                             b->rank);
    if (a->rank < 0 || b->rank < 0) return TCI_OK;
    op_matmul_side sa, sb;
    op_matmul_side_of(a, false, &sa);
    op_matmul_side_of(b, true, &sb);
    if (sa.cols >= 0 && sb.rows >= 0 && sa.cols != sb.rows) {
        char as[128], bs[128];
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "inner dimensions differ: %s times %s (K=%lld vs %lld)",
                             ir_format_dims(a->rank, a->dims, as, sizeof as),
                             ir_format_dims(b->rank, b->dims, bs, sizeof bs),
                             (long long)sa.cols, (long long)sb.rows);
    }
    int r;
    TRY_STATUS(op_broadcast_shape(node, sa.batch_rank, sa.batch, sb.batch_rank, sb.batch, &r,
                                  y->dims));
    if (a->rank != 1) y->dims[r++] = sa.rows;
    if (b->rank != 1) y->dims[r++] = sb.cols;
    y->rank = r;
    return TCI_OK;
}

void op_matmul_batch_strides(const op_matmul_side *s, int out_batch_rank, int64_t *strides) {
    int64_t st = 1;
    for (int i = out_batch_rank - 1; i >= 0; i--) {
        int j = i - (out_batch_rank - s->batch_rank);
        int64_t d = j >= 0 ? s->batch[j] : 1;
        strides[i] = d == 1 ? 0 : st;
        st *= d;
    }
}

op_pattern_kind op_node_pattern(const ir_node *node, op_pattern *out) {
    memset(out, 0, sizeof *out);
    if (node && node->desc && node->desc->pattern) node->desc->pattern(node, out);
    return out->kind;
}

bool op_constant_float(const ir_tensor *t) {
    if (!t || !t->data || t->dtype != TCI_DTYPE_FLOAT || t->rank < 0) return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) return false;
    return true;
}

tci_status op_scaled_copy(ir_graph *g, const ir_tensor *w, int col, const float *scale,
                          int64_t count, ir_tensor **out) {
    int64_t total = lower_count(w), inner = lower_prod(w->dims, col + 1, w->rank);
    float *v = malloc((size_t)(total > 0 ? total : 1) * sizeof *v);
    if (!v) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding a layer scale");
    const float *src = w->data;
    for (int64_t i = 0; i < total; i++)
        v[i] = src[i] * scale[count == 1 ? 0 : (i / inner) % w->dims[col]];
    tci_status st = ir_graph_add_float_constant(g, v, w->rank, w->dims, out);
    free(v);
    return st;
}
