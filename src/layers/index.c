/* Op family 'index': GatherElements, ScatterElements (and Scatter, its old name), ScatterND,
 * OneHot and TensorScatter (a KV cache's update; CPU reference only), which read or write
 * elements at positions an integer tensor gives. Indices may be int32
 * or int64 and negative (counted from the end); one still out of range is an error on the CPU
 * reference and is skipped (flagged, never written out of bounds) on the GPU. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/shape_util.h"
#include "util/half.h"

/* Wraps a negative index v into [0, dim) or reports it out of range, naming the node. */
static tci_status wrap_index(const ir_node *node, int64_t v, int64_t dim, int axis,
                             int64_t *out) {
    int64_t w = v < 0 ? v + dim : v;
    if (w < 0 || w >= dim)
        return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                             "index %lld out of range for axis %d of size %lld", (long long)v,
                             axis, (long long)dim);
    *out = w;
    return TCI_OK;
}

/* Advances a row-major multi-index over dims; returns false after the last one. */
static bool next_index(int rank, const int64_t *dims, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < dims[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* ---- reductions of the scatters ---- */

typedef struct {
    int64_t axis;
    plan_scatter_reduce reduce;
} scatter_params;

static tci_status parse_reduction(ir_node *node, plan_scatter_reduce *out) {
    const char *r;
    TRY_STATUS(ir_attr_string(node, "reduction", "none", &r));
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    int allowed = node->since_version >= 18 ? 5 : node->since_version >= 16 ? 3 : 1;
    for (int i = 0; i < allowed; i++)
        if (strcmp(r, names[i]) == 0) {
            *out = (plan_scatter_reduce)i;
            return TCI_OK;
        }
    return ir_node_error(node, TCI_ERR_UNSUPPORTED, "reduction '%s' is not defined at opset %d",
                         r, node->since_version);
}

/* dst element i (dtype) combined with src element j by op. Integers combine in 64-bit
 * two's-complement arithmetic (wrapping as onnxruntime's do), floats in double. */
static void reduce_element(tci_dtype dtype, plan_scatter_reduce op, void *dst, int64_t i,
                           const void *src, int64_t j) {
    size_t es = tci_dtype_size(dtype);
    if (op == PLAN_SCATTER_NONE) {
        memcpy((char *)dst + (size_t)i * es, (const char *)src + (size_t)j * es, es);
        return;
    }
    tci_tensor d = {.dtype = dtype, .data = dst}, s = {.dtype = dtype, .data = (void *)src};
    if (dtype == TCI_DTYPE_FLOAT || dtype == TCI_DTYPE_DOUBLE || dtype == TCI_DTYPE_FLOAT16) {
        double a = op_read_number(&d, i), b = op_read_number(&s, j), r = a;
        switch (op) {
        case PLAN_SCATTER_ADD: r = a + b; break;
        case PLAN_SCATTER_MUL: r = a * b; break;
        case PLAN_SCATTER_MAX: r = b > a || b != b ? b : a; break;
        case PLAN_SCATTER_MIN: r = b < a || b != b ? b : a; break;
        default: break;
        }
        op_write_number(&d, i, r);
        return;
    }
    int64_t a = op_read_int(&d, i), b = op_read_int(&s, j), r = a;
    switch (op) {
    case PLAN_SCATTER_ADD: r = (int64_t)((uint64_t)a + (uint64_t)b); break;
    case PLAN_SCATTER_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
    case PLAN_SCATTER_MAX: r = b > a ? b : a; break;
    case PLAN_SCATTER_MIN: r = b < a ? b : a; break;
    default: break;
    }
    switch (dtype) {
    case TCI_DTYPE_INT8: ((int8_t *)dst)[i] = (int8_t)r; break;
    case TCI_DTYPE_UINT8: ((uint8_t *)dst)[i] = (uint8_t)r; break;
    case TCI_DTYPE_INT32: ((int32_t *)dst)[i] = (int32_t)r; break;
    default: ((int64_t *)dst)[i] = r; break;
    }
}

/* The dtypes a reduction other than none accepts: the numeric ones (no bool, no bfloat16). */
static tci_status check_reduce_dtype(const ir_node *node, plan_scatter_reduce op,
                                     const tci_tensor *x) {
    if (op == PLAN_SCATTER_NONE) return shape_check_elem_dtype(node, x, 0);
    return op_check_dtype(node, x, 0, op_numeric_types);
}

/* ---- GatherElements and ScatterElements: indices of the data's rank ---- */

/* Checks that indices (and updates, when given) match data as the *Elements ops need: same rank,
 * at most data's extent along every other axis, updates of the indices' shape. */
static tci_status check_elements_shapes(const ir_node *node, const tci_tensor *x,
                                        const tci_tensor *idx, const tci_tensor *upd, int axis) {
    if (x->rank < 0 || idx->rank < 0) return TCI_OK;
    if (idx->rank != x->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "indices have rank %d but data has rank %d", idx->rank, x->rank);
    for (int d = 0; d < x->rank; d++)
        if (d != axis && x->dims[d] >= 0 && idx->dims[d] > x->dims[d])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "indices dim %d is %lld, larger than the data's %lld", d,
                                 (long long)idx->dims[d], (long long)x->dims[d]);
    if (!upd || upd->rank < 0) return TCI_OK;
    if (upd->rank != idx->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "updates have rank %d but indices have rank %d", upd->rank,
                             idx->rank);
    for (int d = 0; d < idx->rank; d++)
        if (upd->dims[d] >= 0 && idx->dims[d] >= 0 && upd->dims[d] != idx->dims[d])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "updates dim %d is %lld but indices dim %d is %lld", d,
                                 (long long)upd->dims[d], d, (long long)idx->dims[d]);
    return TCI_OK;
}

static tci_status gather_elements_parse(ir_node *node, mem_arena *arena) {
    return shape_parse_axis(node, arena, 2, 0);
}

static tci_status gather_elements_infer(const ir_node *node, const tci_tensor *const *in,
                                        tci_tensor *const *out) {
    const axis_params *p = node->params;
    const tci_tensor *x = in[0], *idx = in[1];
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    TRY_STATUS(op_check_dtype(node, idx, 1, op_index_types));
    op_same_shape(out[0], idx);
    out[0]->dtype = x->dtype;
    int rank = x->rank >= 0 ? x->rank : idx->rank, axis = 0;
    if (rank < 0) return TCI_OK;
    if (rank == 0) return ir_node_error(node, TCI_ERR_INVALID_MODEL, "data must not be a scalar");
    TRY_STATUS(op_normalize_axis(node, p->axis, rank, &axis));
    return check_elements_shapes(node, x, idx, NULL, axis);
}

static tci_status gather_elements_forward(const ir_node *node, const tci_tensor *const *in,
                                          tci_tensor *const *out) {
    const axis_params *p = node->params;
    const tci_tensor *x = in[0], *idx = in[1];
    tci_tensor *o = out[0];
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t count = op_count(idx), xs[TCI_MAX_RANK], pos[TCI_MAX_RANK] = {0};
    if (count == 0) return TCI_OK;
    op_strides(x->rank, x->dims, xs);
    size_t es = tci_dtype_size(x->dtype);
    for (int64_t e = 0; e < count; e++, next_index(idx->rank, idx->dims, pos)) {
        int64_t v = 0, src = 0;
        TRY_STATUS(wrap_index(node, op_read_int(idx, e), x->dims[axis], axis, &v));
        for (int d = 0; d < x->rank; d++) src += (d == axis ? v : pos[d]) * xs[d];
        memcpy((char *)o->data + (size_t)e * es, (const char *)x->data + (size_t)src * es, es);
    }
    return TCI_OK;
}

static tci_status scatter_elements_parse(ir_node *node, mem_arena *arena) {
    static const char *const known11[] = {"axis", NULL};
    static const char *const known16[] = {"axis", "reduction", NULL};
    TRY_STATUS(op_check_arity(node, 3, 3, 1, 1));
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 16 ? known16 : known11));
    PARAMS(scatter_params, p);
    TRY_STATUS(ir_attr_int(node, "axis", 0, &p->axis));
    return parse_reduction(node, &p->reduce);
}

/* data and updates agree in dtype; the output is data's shape. */
static tci_status scatter_common_infer(const ir_node *node, const tci_tensor *const *in,
                                       tci_tensor *const *out) {
    const scatter_params *p = node->params;
    const tci_tensor *x = in[0], *upd = in[2];
    TRY_STATUS(check_reduce_dtype(node, p->reduce, x));
    TRY_STATUS(op_check_dtype(node, in[1], 1, op_index_types));
    if (x->dtype != TCI_DTYPE_UNDEFINED && upd->dtype != TCI_DTYPE_UNDEFINED &&
        x->dtype != upd->dtype)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "updates have dtype %s but data %s",
                             tci_dtype_name(upd->dtype), tci_dtype_name(x->dtype));
    op_same_shape(out[0], x);
    if (x->rank == 0) return ir_node_error(node, TCI_ERR_INVALID_MODEL, "data must not be a scalar");
    return TCI_OK;
}

static tci_status scatter_elements_infer(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    const scatter_params *p = node->params;
    TRY_STATUS(scatter_common_infer(node, in, out));
    int rank = in[0]->rank >= 0 ? in[0]->rank : in[1]->rank, axis;
    if (rank < 0) return TCI_OK;
    TRY_STATUS(op_normalize_axis(node, p->axis, rank, &axis));
    return check_elements_shapes(node, in[0], in[1], in[2], axis);
}

static tci_status scatter_elements_forward(const ir_node *node, const tci_tensor *const *in,
                                           tci_tensor *const *out) {
    const scatter_params *p = node->params;
    const tci_tensor *x = in[0], *idx = in[1], *upd = in[2];
    tci_tensor *o = out[0];
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    shape_copy_all(o, x);
    int64_t count = op_count(idx), xs[TCI_MAX_RANK], pos[TCI_MAX_RANK] = {0};
    if (count == 0) return TCI_OK;
    op_strides(x->rank, x->dims, xs);
    for (int64_t e = 0; e < count; e++, next_index(idx->rank, idx->dims, pos)) {
        int64_t v = 0, dst = 0;
        TRY_STATUS(wrap_index(node, op_read_int(idx, e), x->dims[axis], axis, &v));
        for (int d = 0; d < x->rank; d++) dst += (d == axis ? v : pos[d]) * xs[d];
        reduce_element(x->dtype, p->reduce, o->data, dst, upd->data, e);
    }
    return TCI_OK;
}

/* ---- ScatterND ---- */

static tci_status scatter_nd_parse(ir_node *node, mem_arena *arena) {
    static const char *const known11[] = {NULL};
    static const char *const known16[] = {"reduction", NULL};
    TRY_STATUS(op_check_arity(node, 3, 3, 1, 1));
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 16 ? known16 : known11));
    PARAMS(scatter_params, p);
    return parse_reduction(node, &p->reduce);
}

static tci_status scatter_nd_infer(const ir_node *node, const tci_tensor *const *in,
                                   tci_tensor *const *out) {
    const tci_tensor *x = in[0], *idx = in[1], *upd = in[2];
    TRY_STATUS(scatter_common_infer(node, in, out));
    if (idx->rank == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "indices must not be a scalar");
    if (x->rank < 0 || idx->rank < 0) return TCI_OK;
    int64_t k = idx->dims[idx->rank - 1];
    if (k < 0) return TCI_OK;
    if (k > x->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "index tuples have %lld entries but data has rank %d", (long long)k,
                             x->rank);
    if (upd->rank < 0) return TCI_OK;
    int want = idx->rank - 1 + x->rank - (int)k;
    if (upd->rank != want)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "updates have rank %d, expected %d (indices rank %d - 1 + data rank "
                             "%d - %lld)",
                             upd->rank, want, idx->rank, x->rank, (long long)k);
    for (int d = 0; d < want; d++) {
        int64_t e = d < idx->rank - 1 ? idx->dims[d] : x->dims[k + d - (idx->rank - 1)];
        if (e >= 0 && upd->dims[d] >= 0 && e != upd->dims[d])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "updates dim %d is %lld, expected %lld", d,
                                 (long long)upd->dims[d], (long long)e);
    }
    return TCI_OK;
}

static tci_status scatter_nd_forward(const ir_node *node, const tci_tensor *const *in,
                                     tci_tensor *const *out) {
    const scatter_params *p = node->params;
    const tci_tensor *x = in[0], *idx = in[1], *upd = in[2];
    tci_tensor *o = out[0];
    shape_copy_all(o, x);
    int k = (int)idx->dims[idx->rank - 1];
    int64_t xs[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, xs);
    int64_t slice = lower_prod(x->dims, k, x->rank);
    int64_t num = lower_prod(idx->dims, 0, idx->rank - 1);
    for (int64_t u = 0; u < num; u++) {
        int64_t base = 0;
        for (int j = 0; j < k; j++) {
            int64_t v = 0;
            TRY_STATUS(wrap_index(node, op_read_int(idx, u * k + j), x->dims[j], j, &v));
            base += v * xs[j];
        }
        for (int64_t e = 0; e < slice; e++)
            reduce_element(x->dtype, p->reduce, o->data, base + e, upd->data, u * slice + e);
    }
    return TCI_OK;
}

/* ---- OneHot ---- */

static tci_status one_hot_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"axis", NULL};
    TRY_STATUS(op_check_arity(node, 3, 3, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    PARAMS(axis_params, p);
    return ir_attr_int(node, "axis", -1, &p->axis);
}

/* depth as an integer (a float depth is truncated, as onnxruntime casts it); -1 if unknown. */
static tci_status one_hot_depth(const ir_node *node, const tci_tensor *depth, int64_t *out) {
    *out = -1;
    if (depth->rank > 1 || (depth->rank == 1 && depth->dims[0] >= 0 && depth->dims[0] != 1))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "depth must have exactly one element");
    if (!shape_value_known(depth) || depth->rank < 0 ||
        (depth->rank == 1 && depth->dims[0] < 0))
        return TCI_OK;
    double v = op_read_number(depth, 0);
    if (!(v >= 0) || v > (double)INT64_MAX / 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "depth %g is negative or too large", v);
    *out = (int64_t)v;
    return TCI_OK;
}

static tci_status one_hot_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const axis_params *p = node->params;
    const tci_tensor *idx = in[0], *values = in[2];
    tci_tensor *o = out[0];
    TRY_STATUS(op_check_dtype(node, idx, 0, op_numeric_types));
    TRY_STATUS(op_check_dtype(node, in[1], 1, op_numeric_types));
    TRY_STATUS(shape_check_elem_dtype(node, values, 2));
    if (values->rank >= 0 && (values->rank != 1 || (values->dims[0] >= 0 && values->dims[0] != 2)))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "values must be a 1-D tensor of two elements [off, on]");
    int64_t depth;
    TRY_STATUS(one_hot_depth(node, in[1], &depth));
    o->dtype = values->dtype;
    o->rank = -1;
    if (idx->rank < 0) return TCI_OK;
    TRY_STATUS(shape_check_out_rank(node, idx->rank + 1));
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, idx->rank + 1, &axis));
    o->rank = idx->rank + 1;
    for (int d = 0, k = 0; d < o->rank; d++) o->dims[d] = d == axis ? depth : idx->dims[k++];
    return TCI_OK;
}

static tci_status one_hot_forward(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const axis_params *p = node->params;
    const tci_tensor *idx = in[0], *values = in[2];
    tci_tensor *o = out[0];
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, o->rank, &axis));
    int64_t depth = o->dims[axis];
    int64_t outer = lower_prod(o->dims, 0, axis), inner = lower_prod(o->dims, axis + 1, o->rank);
    size_t es = tci_dtype_size(o->dtype);
    const char *off = values->data, *on = off + es;
    char *dst = o->data;
    for (int64_t r = 0; r < outer; r++)
        for (int64_t c = 0; c < depth; c++)
            for (int64_t i = 0; i < inner; i++, dst += es) {
                double v = op_read_number(idx, r * inner + i);
                int64_t hot = v < 0 ? (int64_t)v + depth : (int64_t)v;
                memcpy(dst, hot == c && v >= -(double)depth && v < (double)depth ? on : off, es);
            }
    return TCI_OK;
}

/* ---- GPU lowering ---- */

static tci_status require_gpu_rank(const ir_node *node, int rank) {
    if (rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "rank %d has no GPU path (at most %d dims)", rank,
                             PLAN_MAX_PHYS_RANK);
    return TCI_OK;
}

/* A GATHER_ELEMENTS or SCATTER step over dense x, indices (and updates) into a new dense y. */
static tci_status index_step(plan_builder *b, const ir_node *node, plan_step_kind kind,
                             plan_step **out_step) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    int n = node->num_inputs, io[3], yt;
    for (int i = 0; i < n; i++) TRY_STATUS(lower_require_known(node, node->inputs[i]));
    TRY_STATUS(require_gpu_rank(node, x->rank));
    for (int i = 0; i < n; i++)
        TRY_STATUS(lower_input(b, node, node->inputs[i], PLAN_LAYOUT_DENSE, &io[i]));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, kind, node, NULL, &s));
    s->u.index.rank = x->rank;
    for (int d = 0; d < x->rank; d++) s->u.index.data_dims[d] = x->dims[d];
    s->u.index.elem_size = tci_dtype_size(lower_tensor(b, yt)->dtype);
    lower_step_io(s, n, io, 1, &yt);
    *out_step = s;
    return TCI_OK;
}

/* The *Elements ops' axis and index dims into the step. */
static tci_status elements_step(plan_builder *b, const ir_node *node, plan_step_kind kind,
                                int64_t axis_attr, plan_step **out_step) {
    const ir_tensor *idx = node->inputs[1];
    plan_step *s;
    TRY_STATUS(index_step(b, node, kind, &s));
    int axis;
    TRY_STATUS(op_normalize_axis(node, axis_attr, s->u.index.rank, &axis));
    s->u.index.axis = axis;
    for (int d = 0; d < idx->rank; d++) s->u.index.index_dims[d] = idx->dims[d];
    *out_step = s;
    return TCI_OK;
}

static tci_status gather_elements_gpu_lower(plan_builder *b, const ir_node *node) {
    const axis_params *p = node->params;
    plan_step *s;
    return elements_step(b, node, PLAN_STEP_GATHER_ELEMENTS, p->axis, &s);
}

/* What the scatter kernel combines in: any dtype for 'none', float storage or int32/int64 for
 * the others. */
static tci_status scatter_check_device(plan_builder *b, const ir_node *node, const plan_step *s) {
    tci_dtype t = lower_tensor(b, s->outputs[0])->dtype;
    if (s->u.index.reduce != PLAN_SCATTER_NONE && t == TCI_DTYPE_BOOL)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "a reduction over dtype bool has no GPU path");
    return TCI_OK;
}

static tci_status scatter_elements_gpu_lower(plan_builder *b, const ir_node *node) {
    const scatter_params *p = node->params;
    plan_step *s;
    TRY_STATUS(elements_step(b, node, PLAN_STEP_SCATTER, p->axis, &s));
    s->u.index.reduce = p->reduce;
    return scatter_check_device(b, node, s);
}

static tci_status scatter_nd_gpu_lower(plan_builder *b, const ir_node *node) {
    const scatter_params *p = node->params;
    const ir_tensor *idx = node->inputs[1];
    plan_step *s;
    TRY_STATUS(index_step(b, node, PLAN_STEP_SCATTER, &s));
    s->u.index.nd = true;
    s->u.index.k = (int)idx->dims[idx->rank - 1];
    s->u.index.num_updates = lower_prod(idx->dims, 0, idx->rank - 1);
    s->u.index.reduce = p->reduce;
    return scatter_check_device(b, node, s);
}

static tci_status one_hot_gpu_lower(plan_builder *b, const ir_node *node) {
    const axis_params *p = node->params;
    const ir_tensor *idx = node->inputs[0], *values = node->inputs[2], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, y));
    if (idx->dtype != TCI_DTYPE_INT32 && idx->dtype != TCI_DTYPE_INT64)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "indices of dtype %s have no GPU path (int32 or int64 only)",
                             tci_dtype_name(idx->dtype));
    if (!values->data)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "values (input 2) must be a constant for the GPU path");
    tci_tensor v;
    ir_tensor_view(values, &v);
    double off, on;
    if (v.dtype == TCI_DTYPE_BFLOAT16) {
        off = bfloat16_to_float(((const uint16_t *)v.data)[0]);
        on = bfloat16_to_float(((const uint16_t *)v.data)[1]);
    } else {
        off = op_read_number(&v, 0);
        on = op_read_number(&v, 1);
    }
    int axis, ii, yt;
    TRY_STATUS(op_normalize_axis(node, p->axis, y->rank, &axis));
    TRY_STATUS(lower_input(b, node, idx, PLAN_LAYOUT_DENSE, &ii));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_ONE_HOT, node, NULL, &s));
    s->u.one_hot.outer = lower_prod(y->dims, 0, axis);
    s->u.one_hot.depth = y->dims[axis];
    s->u.one_hot.inner = lower_prod(y->dims, axis + 1, y->rank);
    s->u.one_hot.off = off;
    s->u.one_hot.on = on;
    lower_step_io(s, 1, &ii, 1, &yt);
    return TCI_OK;
}

/* ---- TensorScatter: update's rows along axis written into a copy of past_cache from each batch
 * entry's write index on (circular: modulo the cache length) ---- */

typedef struct tensor_scatter_params {
    bool circular;
    int64_t axis; /* as given; normalised against the cache's rank */
} tensor_scatter_params;

static tci_status tensor_scatter_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"axis", "mode", NULL};
    TRY_STATUS(op_check_arity(node, 2, 3, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    PARAMS(tensor_scatter_params, p);
    const char *mode;
    TRY_STATUS(ir_attr_string(node, "mode", "linear", &mode));
    if (strcmp(mode, "linear") != 0 && strcmp(mode, "circular") != 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'mode' is '%s'; expected 'linear' or 'circular'", mode);
    p->circular = strcmp(mode, "circular") == 0;
    return ir_attr_int(node, "axis", -2, &p->axis);
}

/* The sequence axis, which may not be the batch axis 0 (write_indices are per batch entry). */
static tci_status tensor_scatter_axis(const ir_node *node, int rank, int *out_axis) {
    const tensor_scatter_params *p = node->params;
    TRY_STATUS(op_normalize_axis(node, p->axis, rank, out_axis));
    if (*out_axis == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "axis %lld is the batch axis; the sequence axis comes after it",
                             (long long)p->axis);
    return TCI_OK;
}

static tci_status tensor_scatter_infer(const ir_node *node, const tci_tensor *const *in,
                                       tci_tensor *const *out) {
    const tci_tensor *past = in[0], *update = in[1];
    const tci_tensor *wi = node->num_inputs > 2 ? in[2] : NULL;
    TRY_STATUS(op_check_same_dtype(node, past, 0, update, 1));
    if (wi) TRY_STATUS(op_check_dtype(node, wi, 2, (const tci_dtype[]){TCI_DTYPE_INT64, 0}));
    op_same_shape(out[0], past);
    if (past->rank < 0) return TCI_OK;
    int axis;
    TRY_STATUS(tensor_scatter_axis(node, past->rank, &axis));
    if (update->rank >= 0) {
        bool fits = update->rank == past->rank;
        for (int d = 0; fits && d < past->rank; d++) {
            int64_t u = update->dims[d], c = past->dims[d];
            if (u >= 0 && c >= 0) fits = d == axis ? u <= c : u == c;
        }
        if (!fits) {
            char ps[128], us[128];
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "update %s does not fit past_cache %s: the same dims but a "
                                 "sequence (axis %d) no longer than the cache's",
                                 ir_format_dims(update->rank, update->dims, us, sizeof us),
                                 ir_format_dims(past->rank, past->dims, ps, sizeof ps), axis);
        }
    }
    if (wi && wi->rank >= 0 &&
        (wi->rank != 1 || (wi->dims[0] >= 0 && past->dims[0] >= 0 && wi->dims[0] != past->dims[0])))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "write_indices must be 1-D with one index per batch entry (%lld)",
                             (long long)past->dims[0]);
    return TCI_OK;
}

static tci_status tensor_scatter_forward(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    const tensor_scatter_params *p = node->params;
    const tci_tensor *past = in[0], *update = in[1];
    const tci_tensor *wi = node->num_inputs > 2 ? in[2] : NULL;
    int axis;
    TRY_STATUS(tensor_scatter_axis(node, past->rank, &axis));
    size_t elem = tci_dtype_size(past->dtype);
    int64_t count = op_count(past);
    if (count) memcpy(out[0]->data, past->data, (size_t)count * elem);
    int64_t max_len = past->dims[axis], seq = update->dims[axis], inner = 1, per_batch = 1;
    for (int d = axis + 1; d < past->rank; d++) inner *= past->dims[d];
    for (int d = 1; d < axis; d++) per_batch *= past->dims[d];
    int64_t outer = past->dims[0] * per_batch;
    size_t row = (size_t)inner * elem;
    for (int64_t o = 0; o < outer && seq; o++) {
        int64_t start = wi ? ((const int64_t *)wi->data)[o / per_batch] : 0;
        if (start < 0 || (!p->circular && start > max_len - seq))
            return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                 "write index %lld of batch entry %lld: %lld rows do not fit "
                                 "a cache of %lld in mode '%s'",
                                 (long long)start, (long long)(o / per_batch), (long long)seq,
                                 (long long)max_len, p->circular ? "circular" : "linear");
        for (int64_t t = 0; t < seq; t++) {
            int64_t at = (start % max_len + t) % max_len;
            memcpy((char *)out[0]->data + ((size_t)(o * max_len + at)) * row,
                   (const char *)update->data + ((size_t)(o * seq + t)) * row, row);
        }
    }
    return TCI_OK;
}

/* ---- descriptors ---- */

SHAPE_OP(gather_elements_op, "GatherElements", gather_elements_parse, gather_elements_infer,
         gather_elements_forward, OP_MOVES_DATA, gather_elements_gpu_lower, 11, 13);

SHAPE_OP(scatter_elements_op, "ScatterElements", scatter_elements_parse, scatter_elements_infer,
         scatter_elements_forward, OP_MOVES_DATA, scatter_elements_gpu_lower, 11, 13, 16, 18);

/* Scatter: ScatterElements under its deprecated name (opsets 9 and 11, no reduction) */
SHAPE_OP(scatter_op, "Scatter", scatter_elements_parse, scatter_elements_infer,
         scatter_elements_forward, OP_MOVES_DATA, scatter_elements_gpu_lower, 9, 11);

SHAPE_OP(scatter_nd_op, "ScatterND", scatter_nd_parse, scatter_nd_infer, scatter_nd_forward,
         OP_MOVES_DATA, scatter_nd_gpu_lower, 11, 13, 16, 18);

SHAPE_OP(one_hot_op, "OneHot", one_hot_parse, one_hot_infer, one_hot_forward, 0,
         one_hot_gpu_lower, 9, 11, 28);

SHAPE_OP(tensor_scatter_op, "TensorScatter", tensor_scatter_parse, tensor_scatter_infer,
         tensor_scatter_forward, 0, NULL, 24);

const op_desc *const layer_index_ops[] = {
    &gather_elements_op,
    &scatter_elements_op,
    &scatter_op,
    &scatter_nd_op,
    &one_hot_op,
    &tensor_scatter_op,
    NULL,
};
