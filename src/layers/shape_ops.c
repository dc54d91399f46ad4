/* Op family 'shape': Reshape, Flatten, Squeeze, Unsqueeze, Gather, Shape, Constant,
 * ConstantOfShape, Identity and Dropout, plus the byte-moving helpers the shape families share
 * (shape_util.h). They only move bytes, so every op handles every dtype by element size. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "layers/shape_util.h"

/* ---- helpers ---- */

tci_status shape_check_elem_dtype(const ir_node *node, const tci_tensor *t, int index) {
    if (t && t->dtype != TCI_DTYPE_UNDEFINED && tci_dtype_size(t->dtype) == 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "input %d has unsupported dtype %d", index,
                             (int)t->dtype);
    return TCI_OK;
}

bool shape_dims_known(int rank, const int64_t *dims) {
    if (rank < 0) return false;
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0) return false;
    return true;
}

/* An empty tensor's value is known even without a buffer (an empty initializer may have none). */
bool shape_value_known(const tci_tensor *t) {
    if (!t || !shape_dims_known(t->rank, t->dims)) return false;
    if (t->data) return true;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] == 0) return true;
    return false;
}

/* Product of dims, -1 when any is unknown; errors on overflow. */
tci_status shape_dims_product(const ir_node *node, int rank, const int64_t *dims, int64_t *out) {
    tci_status st = ir_count_elements(rank, dims, out);
    if (st != TCI_OK) return status_error_prefix(st, "node '%s' (%s)", node->name, node->op_type);
    return TCI_OK;
}

tci_status shape_check_out_rank(const ir_node *node, int64_t rank) {
    if (rank > TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "output rank %lld exceeds the supported maximum %d", (long long)rank,
                             TCI_MAX_RANK);
    return TCI_OK;
}

/* Reads a 1-D integer input (shape, axes, pads, ...). *out_len is -1 while its length is unknown
 * and *out_known says whether vals holds the values; lists longer than max are refused. */
tci_status shape_read_int_list(const ir_node *node, const tci_tensor *t, int index,
                                const char *what, int max, int64_t *vals, int *out_len,
                                bool *out_known) {
    *out_len = -1;
    *out_known = false;
    TRY_STATUS(op_check_dtype(node, t, index, op_index_types));
    if (t->rank < 0) return TCI_OK;
    if (t->rank > 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s (input %d) must be 1-D, got rank %d",
                             what, index, t->rank);
    int64_t len = t->rank == 0 ? 1 : t->dims[0];
    if (len < 0) return TCI_OK;
    if (len > max)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "%s (input %d) has %lld entries; at most %d are supported", what,
                             index, (long long)len, max);
    *out_len = (int)len;
    if (!shape_value_known(t)) return TCI_OK;
    for (int i = 0; i < len; i++) vals[i] = op_read_int(t, i);
    *out_known = true;
    return TCI_OK;
}

/* Normalises a list of axes against rank; duplicates are an error. */
tci_status shape_normalize_axes(const ir_node *node, const int64_t *axes, int count, int rank,
                                 int *out) {
    bool seen[TCI_MAX_RANK] = {false};
    for (int i = 0; i < count; i++) {
        TRY_STATUS(op_normalize_axis(node, axes[i], rank, &out[i]));
        if (seen[out[i]])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axis %lld is repeated",
                                 (long long)axes[i]);
        seen[out[i]] = true;
    }
    return TCI_OK;
}

void shape_copy_elem(char *dst, const char *src, size_t es) {
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es); break;
    }
}

void shape_copy_all(tci_tensor *out, const tci_tensor *in) {
    size_t bytes = (size_t)op_count(in) * tci_dtype_size(in->dtype);
    if (bytes && out->data != in->data) memcpy(out->data, in->data, bytes);
}

tci_status shape_maps_alloc(const ir_node *node, const tci_tensor *out, int64_t ***out_maps) {
    *out_maps = NULL;
    if (op_count(out) == 0) return TCI_OK; /* nothing to copy */
    int rank = out->rank;
    size_t total = 0;
    for (int d = 0; d < rank; d++) total += (size_t)out->dims[d];
    int64_t **maps = malloc(sizeof(int64_t *) * (size_t)(rank ? rank : 1) +
                            sizeof(int64_t) * (total ? total : 1));
    if (!maps) return shape_out_of_memory(node);
    int64_t *p = (int64_t *)(maps + (rank ? rank : 1));
    for (int d = 0; d < rank; d++) {
        maps[d] = p;
        p += out->dims[d];
    }
    *out_maps = maps;
    return TCI_OK;
}

void shape_copy_by_maps(tci_tensor *out, const tci_tensor *in, int64_t *const *maps,
                         const void *fill) {
    size_t es = tci_dtype_size(out->dtype);
    int rank = out->rank;
    int64_t count = op_count(out);
    char *dst = out->data;
    const char *src = in->data;
    if (count == 0) return;
    if (rank == 0) {
        memcpy(dst, src, es);
        return;
    }
    int inner = rank - 1;
    int64_t n = out->dims[inner];
    const int64_t *im = maps[inner];
    bool contiguous = im[0] >= 0;
    for (int64_t i = 1; i < n && contiguous; i++) contiguous = im[i] == im[0] + i;
    int64_t idx[TCI_MAX_RANK] = {0};
    for (int64_t row = 0, rows = count / n; row < rows; row++) {
        int64_t base = 0;
        bool filled = false;
        for (int d = 0; d < inner; d++) {
            int64_t m = maps[d][idx[d]];
            if (m < 0) filled = true;
            base += m;
        }
        if (filled) {
            for (int64_t i = 0; i < n; i++) shape_copy_elem(dst + (size_t)i * es, fill, es);
        } else if (contiguous) {
            memcpy(dst, src + (size_t)(base + im[0]) * es, (size_t)n * es);
        } else {
            for (int64_t i = 0; i < n; i++)
                shape_copy_elem(dst + (size_t)i * es,
                          im[i] < 0 ? (const char *)fill : src + (size_t)(base + im[i]) * es, es);
        }
        dst += (size_t)n * es;
        for (int d = inner - 1; d >= 0; d--) {
            if (++idx[d] < out->dims[d]) break;
            idx[d] = 0;
        }
    }
}

tci_status shape_out_of_memory(const ir_node *node) {
    return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
}

void *shape_params_alloc(ir_node *node, mem_arena *arena, size_t size) {
    node->params = arena_alloc(arena, size);
    return node->params;
}

tci_status shape_parse_axis(ir_node *node, mem_arena *arena, int num_inputs, int64_t def) {
    static const char *const known[] = {"axis", NULL};
    TRY_STATUS(op_check_arity(node, num_inputs, num_inputs, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    PARAMS(axis_params, p);
    return ir_attr_int(node, "axis", def, &p->axis);
}

/* ---- Flatten ---- */

static tci_status flatten_parse(ir_node *node, mem_arena *arena) {
    return shape_parse_axis(node, arena, 1, 1);
}

static tci_status flatten_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const axis_params *p = node->params;
    const tci_tensor *x = in[0];
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    out[0]->dtype = x->dtype;
    out[0]->rank = 2;
    out[0]->dims[0] = out[0]->dims[1] = -1;
    if (x->rank < 0) return TCI_OK;
    int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
    if (axis < 0 || axis > x->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axis %lld out of range for rank %d",
                             (long long)p->axis, x->rank);
    TRY_STATUS(shape_dims_product(node, (int)axis, x->dims, &out[0]->dims[0]));
    TRY_STATUS(shape_dims_product(node, x->rank - (int)axis, x->dims + axis, &out[0]->dims[1]));
    return TCI_OK;
}

static tci_status copy_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    shape_copy_all(out[0], in[0]);
    return TCI_OK;
}

/* ---- Reshape ---- */

typedef struct {
    int64_t allowzero;
} reshape_params;

static tci_status reshape_parse(ir_node *node, mem_arena *arena) {
    static const char *const known5[] = {NULL};
    static const char *const known14[] = {"allowzero", NULL};
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 14 ? known14 : known5));
    PARAMS(reshape_params, p);
    TRY_STATUS(ir_attr_int(node, "allowzero", 0, &p->allowzero));
    if (p->allowzero != 0 && p->allowzero != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'allowzero' is %lld, not 0 or 1", (long long)p->allowzero);
    return TCI_OK;
}

static tci_status reshape_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const reshape_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t shape[TCI_MAX_RANK];
    int len;
    bool known;
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    TRY_STATUS(shape_read_int_list(node, in[1], 1, "shape", TCI_MAX_RANK, shape, &len, &known));
    o->dtype = x->dtype;
    o->rank = len;
    for (int i = 0; i < len; i++) o->dims[i] = -1;
    if (len < 0 || !known) return TCI_OK;
    int infer_at = -1;
    bool has_zero = false;
    for (int i = 0; i < len; i++) {
        int64_t v = shape[i];
        if (v == -1) {
            if (infer_at >= 0)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL, "shape has more than one -1");
            infer_at = i;
        } else if (v < -1) {
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "shape[%d] is %lld", i, (long long)v);
        } else if (v == 0 && !p->allowzero) {
            if (x->rank >= 0 && i >= x->rank)
                return ir_node_error(
                    node, TCI_ERR_INVALID_MODEL,
                    "shape[%d] is 0 (copy the input dim) but the input has rank %d", i, x->rank);
            o->dims[i] = x->rank >= 0 ? x->dims[i] : -1;
        } else {
            has_zero |= v == 0;
            o->dims[i] = v;
        }
    }
    if (has_zero && infer_at >= 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "with allowzero=1, shape may not hold both 0 and -1");
    int64_t in_count, others;
    TRY_STATUS(shape_dims_product(node, x->rank, x->dims, &in_count));
    if (infer_at >= 0) o->dims[infer_at] = 1;
    TRY_STATUS(shape_dims_product(node, len, o->dims, &others));
    if (infer_at >= 0) o->dims[infer_at] = -1;
    if (in_count < 0 || others < 0) return TCI_OK;
    char a[128], b[128];
    if (infer_at >= 0) {
        if (others == 0 || in_count % others != 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "cannot reshape input of shape %s (%lld elements): no value for "
                                 "the -1 in shape %s fits",
                                 ir_format_dims(x->rank, x->dims, a, sizeof a), (long long)in_count,
                                 ir_format_dims(len, o->dims, b, sizeof b));
        o->dims[infer_at] = in_count / others;
    } else if (in_count != others) {
        return ir_node_error(
            node, TCI_ERR_INVALID_MODEL,
            "cannot reshape input of shape %s (%lld elements) to %s (%lld elements)",
            ir_format_dims(x->rank, x->dims, a, sizeof a), (long long)in_count,
            ir_format_dims(len, o->dims, b, sizeof b), (long long)others);
    }
    return TCI_OK;
}


/* ---- Squeeze / Unsqueeze ---- */

typedef struct {
    const int64_t *axes; /* attribute (before opset 13); NULL when absent */
    size_t count;
} axes_params;

static tci_status axes_parse(ir_node *node, mem_arena *arena, bool required) {
    static const char *const known1[] = {"axes", NULL};
    static const char *const known13[] = {NULL};
    bool attr = node->since_version < 13;
    TRY_STATUS(op_check_arity(node, 1 + (!attr && required), attr ? 1 : 2, 1, 1));
    TRY_STATUS(ir_check_attrs(node, attr ? known1 : known13));
    PARAMS(axes_params, p);
    if (!attr) return TCI_OK;
    TRY_STATUS(ir_attr_ints(node, "axes", &p->axes, &p->count));
    if (required && !p->axes)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'axes' is required");
    if (p->count > TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "axes has %zu entries; at most %d are supported", p->count,
                             TCI_MAX_RANK);
    return TCI_OK;
}

static tci_status squeeze_parse(ir_node *node, mem_arena *arena) {
    return axes_parse(node, arena, false);
}

static tci_status unsqueeze_parse(ir_node *node, mem_arena *arena) {
    return axes_parse(node, arena, true);
}

/* The axes list from the attribute or input 1: *len -1 if its length is unknown, *known whether
 * the values are. */
static tci_status get_axes(const ir_node *node, const tci_tensor *const *in, int64_t *axes,
                           int *len, bool *known) {
    const axes_params *p = node->params;
    if (node->since_version < 13) {
        *len = (int)p->count;
        *known = true;
        for (size_t i = 0; i < p->count; i++) axes[i] = p->axes[i];
        return TCI_OK;
    }
    if (node->num_inputs < 2 || !in[1]) {
        *len = 0;
        *known = true;
        return TCI_OK;
    }
    return shape_read_int_list(node, in[1], 1, "axes", TCI_MAX_RANK, axes, len, known);
}

static tci_status squeeze_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t axes[TCI_MAX_RANK];
    int len;
    bool known;
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    TRY_STATUS(get_axes(node, in, axes, &len, &known));
    o->dtype = x->dtype;
    o->rank = -1;
    if (x->rank < 0) return TCI_OK;
    if (len < 0) return TCI_OK;
    if (!known) {
        o->rank = x->rank - len;
        if (o->rank < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%d axes for rank %d", len, x->rank);
        for (int d = 0; d < o->rank; d++) o->dims[d] = -1;
        return TCI_OK;
    }
    bool drop[TCI_MAX_RANK] = {false};
    if (len == 0) { /* no axes: every dim of size 1 goes, which needs the dims */
        for (int d = 0; d < x->rank; d++) {
            if (x->dims[d] < 0) return TCI_OK;
            drop[d] = x->dims[d] == 1;
        }
    } else {
        int norm[TCI_MAX_RANK];
        TRY_STATUS(shape_normalize_axes(node, axes, len, x->rank, norm));
        for (int i = 0; i < len; i++) {
            int64_t dim = x->dims[norm[i]];
            if (dim >= 0 && dim != 1)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "cannot squeeze axis %lld of size %lld", (long long)axes[i],
                                     (long long)dim);
            drop[norm[i]] = true;
        }
    }
    o->rank = 0;
    for (int d = 0; d < x->rank; d++)
        if (!drop[d]) o->dims[o->rank++] = x->dims[d];
    return TCI_OK;
}

static tci_status unsqueeze_infer(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t axes[TCI_MAX_RANK];
    int len;
    bool known;
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    TRY_STATUS(get_axes(node, in, axes, &len, &known));
    o->dtype = x->dtype;
    o->rank = -1;
    if (x->rank < 0 || len < 0) return TCI_OK;
    int rank = x->rank + len;
    TRY_STATUS(shape_check_out_rank(node, rank));
    o->rank = rank;
    for (int d = 0; d < rank; d++) o->dims[d] = -1;
    if (!known) return TCI_OK;
    int norm[TCI_MAX_RANK];
    TRY_STATUS(shape_normalize_axes(node, axes, len, rank, norm));
    bool ones[TCI_MAX_RANK] = {false};
    for (int i = 0; i < len; i++) ones[norm[i]] = true;
    for (int d = 0, k = 0; d < rank; d++) o->dims[d] = ones[d] ? 1 : x->dims[k++];
    return TCI_OK;
}


/* ---- Gather ---- */

static tci_status gather_parse(ir_node *node, mem_arena *arena) {
    return shape_parse_axis(node, arena, 2, 0);
}

static tci_status gather_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const axis_params *p = node->params;
    const tci_tensor *x = in[0], *idx = in[1];
    tci_tensor *o = out[0];
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    TRY_STATUS(op_check_dtype(node, idx, 1, op_index_types));
    o->dtype = x->dtype;
    o->rank = -1;
    if (x->rank < 0 || idx->rank < 0) return TCI_OK;
    if (x->rank == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "cannot gather from a scalar");
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    TRY_STATUS(shape_check_out_rank(node, x->rank + idx->rank - 1));
    o->rank = x->rank + idx->rank - 1;
    int k = 0;
    for (int d = 0; d < axis; d++) o->dims[k++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++) o->dims[k++] = idx->dims[d];
    for (int d = axis + 1; d < x->rank; d++) o->dims[k++] = x->dims[d];
    int64_t n = x->dims[axis];
    if (n >= 0 && shape_value_known(idx))
        for (int64_t i = 0, c = op_count(idx); i < c; i++) {
            int64_t v = op_read_int(idx, i);
            if (v < -n || v >= n)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "index %lld out of range for axis %d of size %lld",
                                     (long long)v, axis, (long long)n);
        }
    return TCI_OK;
}

static tci_status gather_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const axis_params *p = node->params;
    const tci_tensor *x = in[0], *idx = in[1];
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    size_t es = tci_dtype_size(x->dtype);
    int64_t outer = 1, inner = 1, n = x->dims[axis], count = op_count(idx);
    for (int d = 0; d < axis; d++) outer *= x->dims[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
    size_t block = (size_t)inner * es;
    char *dst = out[0]->data;
    const char *src = x->data;
    for (int64_t r = 0; r < outer; r++)
        for (int64_t i = 0; i < count; i++) {
            int64_t v = op_read_int(idx, i);
            if (v < 0) v += n;
            if (block) memcpy(dst, src + (size_t)(r * n + v) * block, block);
            dst += block;
        }
    return TCI_OK;
}

/* ---- Shape ---- */

typedef struct {
    int64_t start, end;
    bool has_end;
} shape_params;

static tci_status shape_parse(ir_node *node, mem_arena *arena) {
    static const char *const known1[] = {NULL};
    static const char *const known15[] = {"start", "end", NULL};
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 15 ? known15 : known1));
    PARAMS(shape_params, p);
    TRY_STATUS(ir_attr_int(node, "start", 0, &p->start));
    p->has_end = ir_node_attr(node, "end") != NULL;
    return ir_attr_int(node, "end", 0, &p->end);
}

/* [start, end) of the dims Shape reports, clamped as the spec says. */
static void shape_range(const shape_params *p, int rank, int64_t *start, int64_t *end) {
    int64_t s = p->start, e = p->has_end ? p->end : rank;
    if (s < 0) s += rank;
    if (e < 0) e += rank;
    *start = s < 0 ? 0 : s > rank ? rank : s;
    *end = e < 0 ? 0 : e > rank ? rank : e;
    if (*end < *start) *end = *start;
}

static tci_status shape_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    out[0]->dtype = TCI_DTYPE_INT64;
    out[0]->rank = 1;
    out[0]->dims[0] = -1;
    if (x->rank < 0) return TCI_OK;
    int64_t s, e;
    shape_range(node->params, x->rank, &s, &e);
    out[0]->dims[0] = e - s;
    return TCI_OK;
}

static tci_status shape_forward(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    int64_t s, e;
    shape_range(node->params, in[0]->rank, &s, &e);
    for (int64_t i = s; i < e; i++) ((int64_t *)out[0]->data)[i - s] = in[0]->dims[i];
    return TCI_OK;
}

/* ---- Size: the element count, an int64 scalar ---- */

static tci_status size_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 1, 1, 1, 1);
}

static tci_status size_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    TRY_STATUS(shape_check_elem_dtype(node, in[0], 0));
    out[0]->dtype = TCI_DTYPE_INT64;
    out[0]->rank = 0;
    return TCI_OK;
}

static tci_status size_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    int64_t count;
    TRY_STATUS(ir_count_elements(in[0]->rank, in[0]->dims, &count));
    if (count < 0) return ir_node_error(node, TCI_ERR_INTERNAL, "input shape not known");
    *(int64_t *)out[0]->data = count;
    return TCI_OK;
}

/* ---- Constant / ConstantOfShape ---- */

typedef struct {
    tci_dtype dtype;
    int rank;
    int64_t dims[TCI_MAX_RANK];
    const void *data;
} constant_params;

static tci_status constant_parse(ir_node *node, mem_arena *arena) {
    static const char *const known1[] = {"value", NULL};
    static const char *const known11[] = {"value", "sparse_value", NULL};
    static const char *const known12[] = {"value",        "sparse_value",  "value_float",
                                          "value_floats", "value_int",     "value_ints",
                                          "value_string", "value_strings", NULL};
    int v = node->since_version;
    TRY_STATUS(op_check_arity(node, 0, 0, 1, 1));
    TRY_STATUS(ir_check_attrs(node, v >= 12 ? known12 : v >= 11 ? known11 : known1));
    if (node->num_attrs != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "needs exactly one value attribute, has %d", node->num_attrs);
    const ir_attr *a = &node->attrs[0];
    PARAMS(constant_params, p);
    if (strcmp(a->name, "sparse_value") == 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute 'sparse_value' (sparse constants) is not supported");
    if (strncmp(a->name, "value_string", 12) == 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute '%s' (string constants) is not supported", a->name);
    if (strcmp(a->name, "value") == 0) {
        if (a->type != IR_ATTR_TENSOR || !a->tensor)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'value' is not a tensor");
        const ir_tensor *t = a->tensor;
        if (tci_dtype_size(t->dtype) == 0)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "attribute 'value' has unsupported dtype %d", (int)t->dtype);
        if (t->rank < 0 || t->rank > TCI_MAX_RANK || !shape_dims_known(t->rank, t->dims))
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "attribute 'value' has unsupported rank %d", t->rank);
        p->dtype = t->dtype;
        p->rank = t->rank;
        memcpy(p->dims, t->dims, sizeof p->dims);
        p->data = t->data;
        int64_t count;
        TRY_STATUS(shape_dims_product(node, p->rank, p->dims, &count));
        if (count > 0 && !p->data)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'value' has no data");
        return TCI_OK;
    }
    bool is_float = strncmp(a->name, "value_float", 11) == 0;
    bool is_list = a->name[strlen(a->name) - 1] == 's';
    p->dtype = is_float ? TCI_DTYPE_FLOAT : TCI_DTYPE_INT64;
    p->rank = is_list ? 1 : 0;
    if (is_float && is_list) {
        const float *values;
        size_t count;
        TRY_STATUS(ir_attr_floats(node, a->name, &values, &count));
        p->data = values;
        p->dims[0] = (int64_t)count;
    } else if (is_list) {
        const int64_t *values;
        size_t count;
        TRY_STATUS(ir_attr_ints(node, a->name, &values, &count));
        p->data = values;
        p->dims[0] = (int64_t)count;
    } else if (is_float) {
        float f;
        TRY_STATUS(ir_attr_float(node, a->name, 0, &f));
        p->data = &a->f;
    } else {
        int64_t i;
        TRY_STATUS(ir_attr_int(node, a->name, 0, &i));
        p->data = &a->i;
    }
    return TCI_OK;
}

static tci_status constant_infer(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const constant_params *p = node->params;
    out[0]->dtype = p->dtype;
    out[0]->rank = p->rank;
    memcpy(out[0]->dims, p->dims, sizeof p->dims);
    return TCI_OK;
}

static tci_status constant_forward(const ir_node *node, const tci_tensor *const *in,
                                   tci_tensor *const *out) {
    const constant_params *p = node->params;
    size_t bytes = (size_t)op_count(out[0]) * tci_dtype_size(p->dtype);
    if (bytes) memcpy(out[0]->data, p->data, bytes);
    return TCI_OK;
}

typedef struct {
    tci_dtype dtype;
    const void *value; /* one element */
} fill_params;

static const float default_fill = 0.0f;

static tci_status constant_of_shape_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"value", NULL};
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    PARAMS(fill_params, p);
    p->dtype = TCI_DTYPE_FLOAT;
    p->value = &default_fill;
    const ir_attr *a = ir_node_attr(node, "value");
    if (!a) return TCI_OK;
    if (a->type != IR_ATTR_TENSOR || !a->tensor)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'value' is not a tensor");
    const ir_tensor *t = a->tensor;
    if (tci_dtype_size(t->dtype) == 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute 'value' has unsupported dtype %d", (int)t->dtype);
    int64_t count;
    TRY_STATUS(shape_dims_product(node, t->rank, t->dims, &count));
    if (count != 1 || !t->data)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'value' must hold one element, has %lld", (long long)count);
    p->dtype = t->dtype;
    p->value = t->data;
    return TCI_OK;
}

static tci_status constant_of_shape_infer(const ir_node *node, const tci_tensor *const *in,
                                          tci_tensor *const *out) {
    const fill_params *p = node->params;
    tci_tensor *o = out[0];
    int64_t shape[TCI_MAX_RANK];
    int len;
    bool known;
    TRY_STATUS(shape_read_int_list(node, in[0], 0, "shape", TCI_MAX_RANK, shape, &len, &known));
    o->dtype = p->dtype;
    o->rank = len;
    for (int i = 0; i < len; i++) {
        if (known && shape[i] < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "shape[%d] is negative (%lld)", i,
                                 (long long)shape[i]);
        o->dims[i] = known ? shape[i] : -1;
    }
    return TCI_OK;
}

static tci_status constant_of_shape_forward(const ir_node *node, const tci_tensor *const *in,
                                            tci_tensor *const *out) {
    const fill_params *p = node->params;
    size_t es = tci_dtype_size(p->dtype);
    char *dst = out[0]->data;
    for (int64_t i = 0, n = op_count(out[0]); i < n; i++)
        shape_copy_elem(dst + (size_t)i * es, p->value, es);
    return TCI_OK;
}

/* ---- Identity / Dropout ---- */

static tci_status identity_parse(ir_node *node, mem_arena *arena) {
    return op_parse_no_attrs(node, 1, 1, 1, 1);
}

static tci_status identity_infer(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    TRY_STATUS(shape_check_elem_dtype(node, in[0], 0));
    op_same_shape(out[0], in[0]);
    return TCI_OK;
}

static tci_status dropout_parse(ir_node *node, mem_arena *arena) {
    static const char *const known7[] = {"ratio", NULL};
    static const char *const known12[] = {"seed", NULL};
    bool v12 = node->since_version >= 12;
    TRY_STATUS(op_check_arity(node, 1, v12 ? 3 : 1, 1, 2));
    return ir_check_attrs(node, v12 ? known12 : known7);
}

static const tci_dtype bool_types[] = {TCI_DTYPE_BOOL, 0};

static tci_status dropout_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    TRY_STATUS(shape_check_elem_dtype(node, in[0], 0));
    if (node->num_inputs > 2 && in[2]) {
        const tci_tensor *mode = in[2];
        TRY_STATUS(op_check_dtype(node, mode, 2, bool_types));
        /* training with ratio 0 drops nothing, so it is still the identity; the ratio may
         * only become known at run time */
        const tci_tensor *ratio = in[1];
        bool zero_ratio = ratio && (!shape_value_known(ratio) ||
                                    (op_count(ratio) > 0 && op_read_number(ratio, 0) == 0));
        if (shape_value_known(mode) && op_count(mode) > 0 && op_read_number(mode, 0) != 0 && !zero_ratio)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "training_mode=true is not supported (inference only) unless "
                                 "ratio is 0");
    }
    op_same_shape(out[0], in[0]);
    if (node->num_outputs > 1 && out[1]) {
        op_same_shape(out[1], in[0]);
        /* opset 7 typed the mask like the data; opset 10 made it bool */
        if (node->since_version >= 10) out[1]->dtype = TCI_DTYPE_BOOL;
    }
    return TCI_OK;
}

static tci_status dropout_forward(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    shape_copy_all(out[0], in[0]);
    if (node->num_outputs > 1 && out[1])
        for (int64_t i = 0, n = op_count(out[1]); i < n; i++) op_write_number(out[1], i, 1);
    return TCI_OK;
}

/* ---- GPU lowering ---- */

/* Identity: the output is the input. */
static tci_status identity_gpu_lower(plan_builder *b, const ir_node *node) {
    int src;
    TRY_STATUS(lower_input(b, node, node->inputs[0], node->outputs[0]->layout, &src));
    return lower_forward(b, node, node->outputs[0], src);
}

/* Inference-mode Dropout is the identity; training mode with a non-zero ratio drops values and
 * the mask output would need a kernel of its own. */
static tci_status dropout_gpu_lower(plan_builder *b, const ir_node *node) {
    for (int o = 1; o < node->num_outputs; o++)
        if (node->outputs[o] && lower_is_read(b, node->outputs[o]))
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "the Dropout mask output has no GPU path");
    if (node->num_inputs > 2 && node->inputs[2]) {
        const ir_tensor *mode = node->inputs[2], *ratio = node->inputs[1];
        float r = 0.5f;
        if (ratio && ratio->data && ratio->dtype == TCI_DTYPE_FLOAT) r = *(const float *)ratio->data;
        bool training = !mode->data || *(const uint8_t *)mode->data;
        if (training && (r != 0.0f || (ratio && !ratio->data)))
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "training-mode Dropout has no GPU path (inference only)");
    }
    return identity_gpu_lower(b, node);
}

/* Reshape, Flatten, Squeeze, Unsqueeze: the dense bytes with new dims. */
static tci_status reshape_gpu_lower(plan_builder *b, const ir_node *node) {
    int src, idx;
    TRY_STATUS(lower_input(b, node, node->inputs[0], PLAN_LAYOUT_DENSE, &src));
    return lower_alias(b, node, node->outputs[0], src, &idx);
}

static tci_status gather_gpu_lower(plan_builder *b, const ir_node *node) {
    const axis_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *idx = node->inputs[1], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, idx));
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int xi, ii, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_input(b, node, idx, PLAN_LAYOUT_DENSE, &ii));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_GATHER, node, NULL, &s));
    s->u.gather.outer = lower_prod(x->dims, 0, axis);
    s->u.gather.axis_dim = x->dims[axis];
    s->u.gather.inner = lower_prod(x->dims, axis + 1, x->rank);
    s->u.gather.num_indices = lower_count(idx);
    s->u.gather.elem_size = tci_dtype_size(lower_tensor(b, xi)->dtype);
    lower_step_io(s, 2, (int[]){xi, ii}, 1, &yt);
    return TCI_OK;
}

/* ---- pattern roles (the attention fusion reads through these without a copy) ---- */

static void reshape_pattern(const ir_node *node, op_pattern *out) {
    (void)node;
    out->kind = OP_PATTERN_RESHAPE;
}

/* A Gather of one constant index (a scalar drops the axis, a one-element list keeps it). */
static void gather_pattern(const ir_node *node, op_pattern *out) {
    const axis_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *idx = node->inputs[1];
    out->kind = OP_PATTERN_NONE;
    if (!p || !x || !idx || !idx->data || x->rank < 1 || idx->rank > 1 ||
        (idx->rank == 1 && idx->dims[0] != 1) ||
        (idx->dtype != TCI_DTYPE_INT64 && idx->dtype != TCI_DTYPE_INT32))
        return;
    int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
    if (axis < 0 || axis >= x->rank || x->dims[axis] < 1) return;
    int64_t i = idx->dtype == TCI_DTYPE_INT64 ? *(const int64_t *)idx->data
                                              : *(const int32_t *)idx->data;
    if (i < 0) i += x->dims[axis];
    if (i < 0 || i >= x->dims[axis]) return;
    out->kind = OP_PATTERN_SELECT;
    out->rank = x->rank;
    for (int d = 0; d < x->rank; d++) {
        out->start[d] = 0;
        out->step[d] = 1;
    }
    out->start[axis] = i;
    out->drop_axis = idx->rank == 0 ? (int)axis : -1;
}

/* ---- descriptors ---- */

SHAPE_OP_PATTERN(flatten_op, "Flatten", flatten_parse, flatten_infer, copy_forward,
         OP_MOVES_DATA, reshape_gpu_lower, reshape_pattern, 1, 9, 11, 13, 21, 23, 24, 25);

SHAPE_OP_PATTERN(reshape_op, "Reshape", reshape_parse, reshape_infer, copy_forward,
         OP_MOVES_DATA, reshape_gpu_lower, reshape_pattern, 5, 13, 14, 19, 21, 23, 24, 25);

SHAPE_OP_PATTERN(squeeze_op, "Squeeze", squeeze_parse, squeeze_infer, copy_forward,
         OP_MOVES_DATA, reshape_gpu_lower, reshape_pattern, 1, 11, 13, 21, 23, 24, 25);

SHAPE_OP_PATTERN(unsqueeze_op, "Unsqueeze", unsqueeze_parse, unsqueeze_infer, copy_forward,
         OP_MOVES_DATA, reshape_gpu_lower, reshape_pattern, 1, 11, 13, 21, 23, 24, 25);

SHAPE_OP_PATTERN(gather_op, "Gather", gather_parse, gather_infer, gather_forward,
                 OP_MOVES_DATA, gather_gpu_lower, gather_pattern, 1, 11, 13);

SHAPE_OP(shape_op, "Shape", shape_parse, shape_infer, shape_forward,
         OP_FOLD_FROM_SHAPE, NULL, 1, 13, 15, 19, 21, 23, 24, 25);

SHAPE_OP(size_op, "Size", size_parse, size_infer, size_forward,
         OP_FOLD_FROM_SHAPE, NULL, 1, 13, 19, 21, 23, 24, 25);

SHAPE_OP(constant_op, "Constant", constant_parse, constant_infer, constant_forward,
         0, NULL, 1, 9, 11, 12, 13, 19, 21, 23, 24, 25);

SHAPE_OP(constant_of_shape_op, "ConstantOfShape", constant_of_shape_parse,
         constant_of_shape_infer, constant_of_shape_forward,
         0, NULL, 9, 20, 21, 23, 24, 25);

SHAPE_OP(identity_op, "Identity", identity_parse, identity_infer, copy_forward,
         OP_PASSTHROUGH | OP_MOVES_DATA, identity_gpu_lower, 1, 13, 14, 16, 19, 21, 23, 24, 25);

SHAPE_OP(dropout_op, "Dropout", dropout_parse, dropout_infer, dropout_forward,
         OP_PASSTHROUGH | OP_MOVES_DATA, dropout_gpu_lower, 7, 10, 12, 13, 22);

const op_desc *const layer_shape_ops[] = {
    &flatten_op,
    &reshape_op,
    &squeeze_op,
    &unsqueeze_op,
    &gather_op,
    &shape_op,
    &size_op,
    &constant_op,
    &constant_of_shape_op,
    &identity_op,
    &dropout_op,
    NULL,
};
