/* Shape and data-movement ops: Concat, Split, Reshape, Transpose, Slice, Pad, Gather, Constant...
 * They only move bytes, so every op handles every dtype by element size rather than by type. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

/* ---- helpers ---- */

static tci_status check_elem_dtype(const ir_node *node, const tci_tensor *t, int index) {
    if (t && t->dtype != TCI_DTYPE_UNDEFINED && tci_dtype_size(t->dtype) == 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "input %d has unsupported dtype %d", index,
                             (int)t->dtype);
    return TCI_OK;
}

static bool dims_known(int rank, const int64_t *dims) {
    if (rank < 0) return false;
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0) return false;
    return true;
}

/* An empty tensor's value is known even without a buffer (an empty initializer may have none). */
static bool value_known(const tci_tensor *t) {
    if (!t || !dims_known(t->rank, t->dims)) return false;
    if (t->data) return true;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] == 0) return true;
    return false;
}

/* Product of dims, -1 when any is unknown; errors on overflow. */
static tci_status dims_product(const ir_node *node, int rank, const int64_t *dims, int64_t *out) {
    tci_status st = ir_count_elements(rank, dims, out);
    if (st != TCI_OK) return tci_error_prefix(st, "node '%s' (%s)", node->name, node->op_type);
    return TCI_OK;
}

static tci_status check_out_rank(const ir_node *node, int64_t rank) {
    if (rank > TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "output rank %lld exceeds the supported maximum %d", (long long)rank,
                             TCI_MAX_RANK);
    return TCI_OK;
}

/* Reads a 1-D integer input (shape, axes, pads, ...). *out_len is -1 while its length is unknown
 * and *out_known says whether vals holds the values; lists longer than max are refused. */
static tci_status read_int_list(const ir_node *node, const tci_tensor *t, int index,
                                const char *what, int max, int64_t *vals, int *out_len,
                                bool *out_known) {
    *out_len = -1;
    *out_known = false;
    TCI_TRY(op_check_dtype(node, t, index, op_index_types));
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
    if (!value_known(t)) return TCI_OK;
    for (int i = 0; i < len; i++) vals[i] = op_read_int(t, i);
    *out_known = true;
    return TCI_OK;
}

/* Normalises a list of axes against rank; duplicates are an error. */
static tci_status normalize_axes(const ir_node *node, const int64_t *axes, int count, int rank,
                                 int *out) {
    bool seen[TCI_MAX_RANK] = {false};
    for (int i = 0; i < count; i++) {
        TCI_TRY(op_normalize_axis(node, axes[i], rank, &out[i]));
        if (seen[out[i]])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axis %lld is repeated",
                                 (long long)axes[i]);
        seen[out[i]] = true;
    }
    return TCI_OK;
}

static void copy_elem(char *dst, const char *src, size_t es) {
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es); break;
    }
}

static void copy_all(tci_tensor *out, const tci_tensor *in) {
    size_t bytes = (size_t)op_count(in) * tci_dtype_size(in->dtype);
    if (bytes && out->data != in->data) memcpy(out->data, in->data, bytes);
}

/* One index map per output dim: maps[d][i] is the source element offset that output index i of
 * dim d contributes, or -1 for "fill". Sum over dims gives the source element; this one kernel
 * serves Transpose, Slice, Expand and every Pad mode. */
static int64_t **maps_alloc(int rank, const int64_t *dims) {
    size_t total = 0;
    for (int d = 0; d < rank; d++) total += (size_t)dims[d];
    int64_t **maps = malloc(sizeof(int64_t *) * (size_t)(rank ? rank : 1) +
                            sizeof(int64_t) * (total ? total : 1));
    if (!maps) return NULL;
    int64_t *p = (int64_t *)(maps + (rank ? rank : 1));
    for (int d = 0; d < rank; d++) {
        maps[d] = p;
        p += dims[d];
    }
    return maps;
}

static void copy_by_maps(tci_tensor *out, const tci_tensor *in, int64_t *const *maps,
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
            for (int64_t i = 0; i < n; i++) copy_elem(dst + (size_t)i * es, fill, es);
        } else if (contiguous) {
            memcpy(dst, src + (size_t)(base + im[0]) * es, (size_t)n * es);
        } else {
            for (int64_t i = 0; i < n; i++)
                copy_elem(dst + (size_t)i * es,
                          im[i] < 0 ? (const char *)fill : src + (size_t)(base + im[i]) * es, es);
        }
        dst += (size_t)n * es;
        for (int d = inner - 1; d >= 0; d--) {
            if (++idx[d] < out->dims[d]) break;
            idx[d] = 0;
        }
    }
}

static tci_status out_of_memory(const ir_node *node) {
    return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
}

static void *params_alloc(ir_node *node, tci_arena *arena, size_t size) {
    node->params = tci_arena_alloc(arena, size);
    return node->params;
}

#define PARAMS(type, var)                                                                          \
    type *var = params_alloc(node, arena, sizeof(type));                                           \
    if (!var) return out_of_memory(node)

/* ---- Concat ---- */

typedef struct {
    int64_t axis;
} axis_params;

static tci_status concat_parse(ir_node *node, tci_arena *arena) {
    static const char *const known[] = {"axis", NULL};
    TCI_TRY(op_check_arity(node, 1, INT_MAX, 1, 1));
    TCI_TRY(ir_check_attrs(node, known));
    for (int i = 0; i < node->num_inputs; i++)
        if (!node->inputs[i])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input %d is missing", i);
    if (!ir_node_attr(node, "axis"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'axis' is required");
    PARAMS(axis_params, p);
    return ir_attr_int(node, "axis", 0, &p->axis);
}

static tci_status concat_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const axis_params *p = node->params;
    tci_tensor *o = out[0];
    int n = node->num_inputs, rank = -1;
    o->dtype = TCI_DTYPE_UNDEFINED;
    for (int i = 0; i < n; i++) {
        TCI_TRY(check_elem_dtype(node, in[i], i));
        if (in[i]->dtype != TCI_DTYPE_UNDEFINED) {
            if (o->dtype == TCI_DTYPE_UNDEFINED) o->dtype = in[i]->dtype;
            else if (o->dtype != in[i]->dtype)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "input %d has dtype %s, other inputs %s", i,
                                     tci_dtype_name(in[i]->dtype), tci_dtype_name(o->dtype));
        }
        if (in[i]->rank >= 0) {
            if (rank < 0) rank = in[i]->rank;
            else if (rank != in[i]->rank)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "input %d has rank %d, other inputs rank %d", i, in[i]->rank,
                                     rank);
        }
    }
    o->rank = rank;
    if (rank < 0) return TCI_OK;
    if (rank == 0) return ir_node_error(node, TCI_ERR_INVALID_MODEL, "cannot concatenate scalars");
    int axis;
    TCI_TRY(op_normalize_axis(node, p->axis, rank, &axis));
    for (int d = 0; d < rank; d++) {
        int64_t dim = d == axis ? 0 : -1;
        for (int i = 0; i < n; i++) {
            if (in[i]->rank < 0) {
                if (d == axis) dim = -1;
                continue;
            }
            int64_t v = in[i]->dims[d];
            if (d == axis) {
                dim = dim < 0 || v < 0 ? -1 : dim + v;
                if (v < 0) break;
            } else if (v >= 0) {
                if (dim >= 0 && dim != v)
                    return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                         "input %d has dim %d = %lld, other inputs %lld", i, d,
                                         (long long)v, (long long)dim);
                dim = v;
            }
        }
        o->dims[d] = dim;
    }
    return TCI_OK;
}

static tci_status concat_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const axis_params *p = node->params;
    tci_tensor *o = out[0];
    int axis;
    TCI_TRY(op_normalize_axis(node, p->axis, o->rank, &axis));
    size_t es = tci_dtype_size(o->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= o->dims[d];
    for (int d = axis + 1; d < o->rank; d++) inner *= o->dims[d];
    char *dst = o->data;
    for (int64_t r = 0; r < outer; r++)
        for (int i = 0; i < node->num_inputs; i++) {
            size_t block = (size_t)(in[i]->dims[axis] * inner) * es;
            if (block) memcpy(dst, (const char *)in[i]->data + (size_t)r * block, block);
            dst += block;
        }
    return TCI_OK;
}

/* ---- Split ---- */

typedef struct {
    int64_t axis;
    const int64_t *split; /* attribute (before opset 13); NULL when absent */
    size_t split_count;
} split_params;

static tci_status split_parse(ir_node *node, tci_arena *arena) {
    static const char *const known2[] = {"axis", "split", NULL};
    static const char *const known13[] = {"axis", NULL};
    static const char *const known18[] = {"axis", "num_outputs", NULL};
    int v = node->since_version;
    TCI_TRY(op_check_arity(node, 1, v >= 13 ? 2 : 1, 1, INT_MAX));
    TCI_TRY(ir_check_attrs(node, v >= 18 ? known18 : v >= 13 ? known13 : known2));
    PARAMS(split_params, p);
    TCI_TRY(ir_attr_int(node, "axis", 0, &p->axis));
    if (v < 13) {
        TCI_TRY(ir_attr_ints(node, "split", &p->split, &p->split_count));
        if (p->split && p->split_count != (size_t)node->num_outputs)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'split' has %zu entries for %d outputs", p->split_count,
                                 node->num_outputs);
    }
    if (v >= 18 && ir_node_attr(node, "num_outputs")) {
        int64_t num;
        TCI_TRY(ir_attr_int(node, "num_outputs", 0, &num));
        if (node->num_inputs > 1 && node->inputs[1])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "input 'split' and attribute 'num_outputs' are both given");
        if (num != node->num_outputs)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'num_outputs' is %lld but the node has %d outputs",
                                 (long long)num, node->num_outputs);
    }
    return TCI_OK;
}

/* Sizes of the outputs along the split axis of length dim (-1 if unknown); -1 where unknown. */
static tci_status split_sizes(const ir_node *node, const tci_tensor *const *in, int64_t dim,
                              int64_t *sizes) {
    const split_params *p = node->params;
    int n = node->num_outputs;
    const tci_tensor *st = node->num_inputs > 1 ? in[1] : NULL;
    bool given = false;
    for (int i = 0; i < n; i++) sizes[i] = -1;
    if (p->split) {
        for (int i = 0; i < n; i++) sizes[i] = p->split[i];
        given = true;
    } else if (st) {
        TCI_TRY(op_check_dtype(node, st, 1, op_index_types));
        if (st->rank >= 0 && st->rank != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "split (input 1) must be 1-D");
        if (st->rank < 0 || st->dims[0] < 0) return TCI_OK;
        /* an empty split list means "not given", as onnxruntime reads it */
        if (st->dims[0] > 0) {
            if (st->dims[0] != n)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "split (input 1) has %lld entries for %d outputs",
                                     (long long)st->dims[0], n);
            if (!value_known(st)) return TCI_OK;
            for (int i = 0; i < n; i++) sizes[i] = op_read_int(st, i);
            given = true;
        }
    }
    if (given) {
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            if (sizes[i] < 0)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "split size %d is negative (%lld)", i, (long long)sizes[i]);
            sum += sizes[i];
        }
        if (dim >= 0 && sum != dim)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "split sizes add up to %lld but the axis has %lld", (long long)sum,
                                 (long long)dim);
        return TCI_OK;
    }
    if (dim < 0) return TCI_OK;
    if (node->since_version >= 18) {
        /* opset 18: chunks of ceil(dim / n), the last one smaller */
        int64_t chunk = (dim + n - 1) / n, last = dim - chunk * (n - 1);
        if (last < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "cannot split an axis of size %lld into %d outputs",
                                 (long long)dim, n);
        for (int i = 0; i < n; i++) sizes[i] = i == n - 1 ? last : chunk;
        return TCI_OK;
    }
    if (dim % n != 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "cannot split an axis of size %lld evenly into %d outputs",
                             (long long)dim, n);
    for (int i = 0; i < n; i++) sizes[i] = dim / n;
    return TCI_OK;
}

static tci_status split_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const split_params *p = node->params;
    const tci_tensor *x = in[0];
    int n = node->num_outputs, axis = 0;
    TCI_TRY(check_elem_dtype(node, x, 0));
    if (x->rank >= 0) TCI_TRY(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t *sizes = malloc(sizeof(int64_t) * (size_t)n);
    if (!sizes) return out_of_memory(node);
    tci_status st = split_sizes(node, in, x->rank >= 0 ? x->dims[axis] : -1, sizes);
    for (int i = 0; i < n && st == TCI_OK; i++) {
        if (!out[i]) continue;
        op_same_shape(out[i], x);
        if (x->rank >= 0) out[i]->dims[axis] = sizes[i];
    }
    free(sizes);
    return st;
}

static tci_status split_forward(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const split_params *p = node->params;
    const tci_tensor *x = in[0];
    int n = node->num_outputs, axis;
    TCI_TRY(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t *sizes = malloc(sizeof(int64_t) * (size_t)n);
    if (!sizes) return out_of_memory(node);
    tci_status st = split_sizes(node, in, x->dims[axis], sizes);
    if (st == TCI_OK) {
        size_t es = tci_dtype_size(x->dtype);
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < axis; d++) outer *= x->dims[d];
        for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
        size_t row = (size_t)(x->dims[axis] * inner) * es, offset = 0;
        for (int i = 0; i < n; i++) {
            size_t block = (size_t)(sizes[i] * inner) * es;
            if (out[i] && block)
                for (int64_t r = 0; r < outer; r++)
                    memcpy((char *)out[i]->data + (size_t)r * block,
                           (const char *)x->data + (size_t)r * row + offset, block);
            offset += block;
        }
    }
    free(sizes);
    return st;
}

/* ---- Flatten ---- */

static tci_status flatten_parse(ir_node *node, tci_arena *arena) {
    static const char *const known[] = {"axis", NULL};
    TCI_TRY(op_check_arity(node, 1, 1, 1, 1));
    TCI_TRY(ir_check_attrs(node, known));
    PARAMS(axis_params, p);
    return ir_attr_int(node, "axis", 1, &p->axis);
}

static tci_status flatten_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const axis_params *p = node->params;
    const tci_tensor *x = in[0];
    TCI_TRY(check_elem_dtype(node, x, 0));
    out[0]->dtype = x->dtype;
    out[0]->rank = 2;
    out[0]->dims[0] = out[0]->dims[1] = -1;
    if (x->rank < 0) return TCI_OK;
    int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
    if (axis < 0 || axis > x->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axis %lld out of range for rank %d",
                             (long long)p->axis, x->rank);
    TCI_TRY(dims_product(node, (int)axis, x->dims, &out[0]->dims[0]));
    TCI_TRY(dims_product(node, x->rank - (int)axis, x->dims + axis, &out[0]->dims[1]));
    return TCI_OK;
}

static tci_status copy_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    copy_all(out[0], in[0]);
    return TCI_OK;
}

/* ---- Reshape ---- */

typedef struct {
    int64_t allowzero;
} reshape_params;

static tci_status reshape_parse(ir_node *node, tci_arena *arena) {
    static const char *const known5[] = {NULL};
    static const char *const known14[] = {"allowzero", NULL};
    TCI_TRY(op_check_arity(node, 2, 2, 1, 1));
    TCI_TRY(ir_check_attrs(node, node->since_version >= 14 ? known14 : known5));
    PARAMS(reshape_params, p);
    TCI_TRY(ir_attr_int(node, "allowzero", 0, &p->allowzero));
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
    TCI_TRY(check_elem_dtype(node, x, 0));
    TCI_TRY(read_int_list(node, in[1], 1, "shape", TCI_MAX_RANK, shape, &len, &known));
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
    TCI_TRY(dims_product(node, x->rank, x->dims, &in_count));
    if (infer_at >= 0) o->dims[infer_at] = 1;
    TCI_TRY(dims_product(node, len, o->dims, &others));
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

/* ---- Transpose ---- */

typedef struct {
    const int64_t *perm; /* NULL: reverse the dims */
    size_t count;
} transpose_params;

static tci_status transpose_parse(ir_node *node, tci_arena *arena) {
    static const char *const known[] = {"perm", NULL};
    TCI_TRY(op_check_arity(node, 1, 1, 1, 1));
    TCI_TRY(ir_check_attrs(node, known));
    PARAMS(transpose_params, p);
    TCI_TRY(ir_attr_ints(node, "perm", &p->perm, &p->count));
    if (!p->perm) return TCI_OK;
    if (p->count > TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "perm has %zu entries; at most %d are supported", p->count,
                             TCI_MAX_RANK);
    bool seen[TCI_MAX_RANK] = {false};
    for (size_t i = 0; i < p->count; i++) {
        int64_t v = p->perm[i];
        if (v < 0 || v >= (int64_t)p->count || seen[v])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'perm' is not a permutation (entry %zu is %lld)", i,
                                 (long long)v);
        seen[v] = true;
    }
    return TCI_OK;
}

static int transpose_axis(const transpose_params *p, int rank, int d) {
    return p->perm ? (int)p->perm[d] : rank - 1 - d;
}

static tci_status transpose_infer(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const transpose_params *p = node->params;
    const tci_tensor *x = in[0];
    TCI_TRY(check_elem_dtype(node, x, 0));
    out[0]->dtype = x->dtype;
    out[0]->rank = p->perm ? (int)p->count : x->rank;
    if (x->rank < 0) {
        for (int d = 0; d < out[0]->rank; d++) out[0]->dims[d] = -1;
        return TCI_OK;
    }
    if (p->perm && (int)p->count != x->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "perm has %zu entries for rank %d",
                             p->count, x->rank);
    for (int d = 0; d < x->rank; d++) out[0]->dims[d] = x->dims[transpose_axis(p, x->rank, d)];
    return TCI_OK;
}

static tci_status transpose_forward(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    const transpose_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t strides[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, strides);
    int64_t **maps = maps_alloc(o->rank, o->dims);
    if (!maps) return out_of_memory(node);
    for (int d = 0; d < o->rank; d++) {
        int64_t s = strides[transpose_axis(p, x->rank, d)];
        for (int64_t i = 0; i < o->dims[d]; i++) maps[d][i] = i * s;
    }
    copy_by_maps(o, x, maps, NULL);
    free(maps);
    return TCI_OK;
}

/* ---- Squeeze / Unsqueeze ---- */

typedef struct {
    const int64_t *axes; /* attribute (before opset 13); NULL when absent */
    size_t count;
} axes_params;

static tci_status axes_parse(ir_node *node, tci_arena *arena, bool required) {
    static const char *const known1[] = {"axes", NULL};
    static const char *const known13[] = {NULL};
    bool attr = node->since_version < 13;
    TCI_TRY(op_check_arity(node, 1 + (!attr && required), attr ? 1 : 2, 1, 1));
    TCI_TRY(ir_check_attrs(node, attr ? known1 : known13));
    PARAMS(axes_params, p);
    if (!attr) return TCI_OK;
    TCI_TRY(ir_attr_ints(node, "axes", &p->axes, &p->count));
    if (required && !p->axes)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'axes' is required");
    if (p->count > TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "axes has %zu entries; at most %d are supported", p->count,
                             TCI_MAX_RANK);
    return TCI_OK;
}

static tci_status squeeze_parse(ir_node *node, tci_arena *arena) {
    return axes_parse(node, arena, false);
}

static tci_status unsqueeze_parse(ir_node *node, tci_arena *arena) {
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
    return read_int_list(node, in[1], 1, "axes", TCI_MAX_RANK, axes, len, known);
}

static tci_status squeeze_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t axes[TCI_MAX_RANK];
    int len;
    bool known;
    TCI_TRY(check_elem_dtype(node, x, 0));
    TCI_TRY(get_axes(node, in, axes, &len, &known));
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
        TCI_TRY(normalize_axes(node, axes, len, x->rank, norm));
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
    TCI_TRY(check_elem_dtype(node, x, 0));
    TCI_TRY(get_axes(node, in, axes, &len, &known));
    o->dtype = x->dtype;
    o->rank = -1;
    if (x->rank < 0 || len < 0) return TCI_OK;
    int rank = x->rank + len;
    TCI_TRY(check_out_rank(node, rank));
    o->rank = rank;
    for (int d = 0; d < rank; d++) o->dims[d] = -1;
    if (!known) return TCI_OK;
    int norm[TCI_MAX_RANK];
    TCI_TRY(normalize_axes(node, axes, len, rank, norm));
    bool ones[TCI_MAX_RANK] = {false};
    for (int i = 0; i < len; i++) ones[norm[i]] = true;
    for (int d = 0, k = 0; d < rank; d++) o->dims[d] = ones[d] ? 1 : x->dims[k++];
    return TCI_OK;
}

/* ---- Slice ---- */

typedef struct {
    const int64_t *starts, *ends, *axes; /* attributes (opset 1); axes may be NULL */
    size_t count;
} slice_params;

static tci_status slice_parse(ir_node *node, tci_arena *arena) {
    static const char *const known1[] = {"starts", "ends", "axes", NULL};
    static const char *const known10[] = {NULL};
    bool attr = node->since_version < 10;
    TCI_TRY(op_check_arity(node, attr ? 1 : 3, attr ? 1 : 5, 1, 1));
    TCI_TRY(ir_check_attrs(node, attr ? known1 : known10));
    PARAMS(slice_params, p);
    if (!attr) return TCI_OK;
    size_t ns, ne, na;
    TCI_TRY(ir_attr_ints(node, "starts", &p->starts, &ns));
    TCI_TRY(ir_attr_ints(node, "ends", &p->ends, &ne));
    TCI_TRY(ir_attr_ints(node, "axes", &p->axes, &na));
    if (!p->starts || !p->ends)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attributes 'starts' and 'ends' are required");
    if (ns != ne || (p->axes && na != ns))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "starts, ends and axes have different lengths (%zu, %zu, %zu)", ns, ne,
                             p->axes ? na : ns);
    if (ns > TCI_MAX_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "starts has %zu entries; at most %d are supported", ns, TCI_MAX_RANK);
    p->count = ns;
    return TCI_OK;
}

/* Per input dim: first index, step and output length; len -1 where unknown. Unknown slice
 * parameters leave the dims they may touch at -1. */
static tci_status slice_plan(const ir_node *node, const tci_tensor *const *in, int64_t *start,
                             int64_t *step, int64_t *len) {
    const slice_params *p = node->params;
    const tci_tensor *x = in[0];
    int rank = x->rank;
    int64_t starts[TCI_MAX_RANK], ends[TCI_MAX_RANK], axes[TCI_MAX_RANK], steps[TCI_MAX_RANK];
    int ns, ne, na, nt;
    bool ks, ke, ka = true, kt = true, has_axes;
    if (node->since_version < 10) {
        ns = ne = (int)p->count;
        ks = ke = true;
        memcpy(starts, p->starts, p->count * sizeof(int64_t));
        memcpy(ends, p->ends, p->count * sizeof(int64_t));
        has_axes = p->axes != NULL;
        na = has_axes ? (int)p->count : -2;
        if (has_axes) memcpy(axes, p->axes, p->count * sizeof(int64_t));
        nt = -2;
    } else {
        TCI_TRY(read_int_list(node, in[1], 1, "starts", TCI_MAX_RANK, starts, &ns, &ks));
        TCI_TRY(read_int_list(node, in[2], 2, "ends", TCI_MAX_RANK, ends, &ne, &ke));
        has_axes = node->num_inputs > 3 && in[3];
        na = nt = -2;
        if (has_axes) TCI_TRY(read_int_list(node, in[3], 3, "axes", TCI_MAX_RANK, axes, &na, &ka));
        if (node->num_inputs > 4 && in[4])
            TCI_TRY(read_int_list(node, in[4], 4, "steps", TCI_MAX_RANK, steps, &nt, &kt));
    }
    int n = ns >= 0 ? ns : ne >= 0 ? ne : na >= 0 ? na : nt >= 0 ? nt : -1;
    int lens[4] = {ns, ne, na, nt};
    for (int i = 0; i < 4; i++)
        if (lens[i] >= 0 && n >= 0 && lens[i] != n)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "starts, ends, axes and steps have different lengths");
    for (int d = 0; d < rank; d++) {
        start[d] = 0;
        step[d] = 1;
        len[d] = x->dims[d];
    }
    bool known = ks && ke && ka && kt && n >= 0;
    if (!known) {
        /* mark what the slice may touch as unknown */
        if (!has_axes && n >= 0) {
            for (int d = 0; d < n && d < rank; d++) len[d] = -1;
        } else if (has_axes && ka && na >= 0) {
            for (int i = 0; i < na; i++)
                if (axes[i] >= -rank && axes[i] < rank)
                    len[axes[i] < 0 ? axes[i] + rank : axes[i]] = -1;
        } else {
            for (int d = 0; d < rank; d++) len[d] = -1;
        }
        return TCI_OK;
    }
    if (n > rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%d slice entries for rank %d", n, rank);
    if (!has_axes)
        for (int i = 0; i < n; i++) axes[i] = i;
    if (nt < 0)
        for (int i = 0; i < n; i++) steps[i] = 1;
    int norm[TCI_MAX_RANK];
    TCI_TRY(normalize_axes(node, axes, n, rank, norm));
    for (int i = 0; i < n; i++) {
        int d = norm[i];
        int64_t dim = x->dims[d], s = steps[i], b = starts[i], e = ends[i];
        if (s == 0) return ir_node_error(node, TCI_ERR_INVALID_MODEL, "step for axis %d is 0", d);
        step[d] = s;
        if (dim < 0) {
            len[d] = -1;
            continue;
        }
        if (b < 0) b += dim;
        if (e < 0) e += dim;
        /* written so that INT64_MIN/INT64_MAX starts, ends and steps cannot overflow */
        if (s > 0) {
            b = b < 0 ? 0 : b > dim ? dim : b;
            e = e < 0 ? 0 : e > dim ? dim : e;
            len[d] = e > b ? (e - b - 1) / s + 1 : 0;
        } else {
            int64_t back = s == INT64_MIN ? INT64_MAX : -s;
            b = b < 0 ? 0 : b > dim - 1 ? dim - 1 : b;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            len[d] = b > e ? (b - e - 1) / back + 1 : 0;
        }
        start[d] = b;
    }
    return TCI_OK;
}

static tci_status slice_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    int64_t start[TCI_MAX_RANK], step[TCI_MAX_RANK];
    TCI_TRY(check_elem_dtype(node, x, 0));
    out[0]->dtype = x->dtype;
    out[0]->rank = x->rank;
    if (x->rank < 0) return TCI_OK;
    if (x->rank == 0) return ir_node_error(node, TCI_ERR_INVALID_MODEL, "cannot slice a scalar");
    return slice_plan(node, in, start, step, out[0]->dims);
}

static tci_status slice_forward(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t start[TCI_MAX_RANK], step[TCI_MAX_RANK], len[TCI_MAX_RANK], strides[TCI_MAX_RANK];
    TCI_TRY(slice_plan(node, in, start, step, len));
    op_strides(x->rank, x->dims, strides);
    int64_t **maps = maps_alloc(o->rank, o->dims);
    if (!maps) return out_of_memory(node);
    for (int d = 0; d < o->rank; d++)
        for (int64_t i = 0; i < o->dims[d]; i++) maps[d][i] = (start[d] + i * step[d]) * strides[d];
    copy_by_maps(o, x, maps, NULL);
    free(maps);
    return TCI_OK;
}

/* ---- Pad ---- */

typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

typedef struct {
    pad_mode mode;
    const int64_t *pads; /* attribute (opset 2) */
    size_t count;
    float value;
} pad_params;

static tci_status pad_parse(ir_node *node, tci_arena *arena) {
    static const char *const known2[] = {"mode", "pads", "value", NULL};
    static const char *const known11[] = {"mode", NULL};
    int v = node->since_version;
    TCI_TRY(op_check_arity(node, v < 11 ? 1 : 2, v < 11 ? 1 : v < 18 ? 3 : 4, 1, 1));
    TCI_TRY(ir_check_attrs(node, v < 11 ? known2 : known11));
    PARAMS(pad_params, p);
    const char *mode;
    TCI_TRY(ir_attr_string(node, "mode", "constant", &mode));
    if (strcmp(mode, "constant") == 0) p->mode = PAD_CONSTANT;
    else if (strcmp(mode, "reflect") == 0) p->mode = PAD_REFLECT;
    else if (strcmp(mode, "edge") == 0) p->mode = PAD_EDGE;
    else if (strcmp(mode, "wrap") == 0 && v >= 19) p->mode = PAD_WRAP;
    else
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute 'mode' value '%s' is not supported%s", mode,
                             strcmp(mode, "wrap") == 0 ? " before opset 19" : "");
    if (v < 11) {
        TCI_TRY(ir_attr_ints(node, "pads", &p->pads, &p->count));
        TCI_TRY(ir_attr_float(node, "value", 0.0f, &p->value));
        if (!p->pads)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'pads' is required");
        if (p->count > 2 * TCI_MAX_RANK)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "pads has %zu entries; at most %d are supported", p->count,
                                 2 * TCI_MAX_RANK);
    }
    return TCI_OK;
}

/* Pad amounts per dim of x (begin/end, negative crops). *known false when they are not known yet;
 * touched[d] says which dims the pads may change. */
static tci_status pad_amounts(const ir_node *node, const tci_tensor *const *in, int64_t *begin,
                              int64_t *end, bool *touched, bool *known) {
    const pad_params *p = node->params;
    int rank = in[0]->rank;
    int64_t pads[2 * TCI_MAX_RANK] = {0}, axes[TCI_MAX_RANK] = {0};
    int np, na;
    bool kp, ka = true;
    if (node->since_version < 11) {
        np = (int)p->count;
        kp = true;
        memcpy(pads, p->pads, p->count * sizeof(int64_t));
    } else {
        TCI_TRY(read_int_list(node, in[1], 1, "pads", 2 * TCI_MAX_RANK, pads, &np, &kp));
    }
    if (node->num_inputs > 3 && in[3]) {
        TCI_TRY(read_int_list(node, in[3], 3, "axes", TCI_MAX_RANK, axes, &na, &ka));
        ka = ka && na >= 0;
    } else {
        na = rank;
        for (int d = 0; d < rank; d++) axes[d] = d;
    }
    for (int d = 0; d < rank; d++) {
        begin[d] = end[d] = 0;
        touched[d] = !ka;
    }
    *known = false;
    if (!ka) return TCI_OK;
    int norm[TCI_MAX_RANK];
    TCI_TRY(normalize_axes(node, axes, na, rank, norm));
    for (int i = 0; i < na; i++) touched[norm[i]] = true;
    if (np >= 0 && np != 2 * na)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "pads has %d entries, expected %d", np,
                             2 * na);
    if (!kp) return TCI_OK;
    for (int i = 0; i < na; i++) {
        begin[norm[i]] = pads[i];
        end[norm[i]] = pads[na + i];
    }
    *known = true;
    return TCI_OK;
}

static tci_status pad_infer(const ir_node *node, const tci_tensor *const *in,
                            tci_tensor *const *out) {
    const pad_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    TCI_TRY(check_elem_dtype(node, x, 0));
    o->dtype = x->dtype;
    o->rank = x->rank;
    if (node->num_inputs > 2 && in[2]) {
        const tci_tensor *cv = in[2];
        if (cv->dtype != TCI_DTYPE_UNDEFINED && x->dtype != TCI_DTYPE_UNDEFINED &&
            cv->dtype != x->dtype)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "constant_value has dtype %s, data %s", tci_dtype_name(cv->dtype),
                                 tci_dtype_name(x->dtype));
        int64_t c;
        TCI_TRY(dims_product(node, cv->rank, cv->dims, &c));
        if (c > 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "constant_value must be a scalar, has %lld elements",
                                 (long long)c);
    }
    if (x->rank < 0) {
        /* without axes, the pads' length gives the rank */
        if (node->since_version >= 11 && !(node->num_inputs > 3 && in[3]) && in[1]->rank == 1 &&
            in[1]->dims[0] >= 0 && in[1]->dims[0] % 2 == 0) {
            o->rank = (int)(in[1]->dims[0] / 2);
            TCI_TRY(check_out_rank(node, o->rank));
            for (int d = 0; d < o->rank; d++) o->dims[d] = -1;
        }
        return TCI_OK;
    }
    int64_t begin[TCI_MAX_RANK], end[TCI_MAX_RANK];
    bool touched[TCI_MAX_RANK], known;
    TCI_TRY(pad_amounts(node, in, begin, end, touched, &known));
    for (int d = 0; d < x->rank; d++) {
        int64_t n = x->dims[d];
        o->dims[d] = n;
        if (!touched[d]) continue;
        if (!known || n < 0) {
            o->dims[d] = -1;
            continue;
        }
        int64_t kept = n - (begin[d] < 0 ? -begin[d] : 0) - (end[d] < 0 ? -end[d] : 0);
        if (kept < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "pads %lld, %lld crop more than axis %d has (%lld)",
                                 (long long)begin[d], (long long)end[d], d, (long long)n);
        o->dims[d] = n + begin[d] + end[d];
        if (p->mode != PAD_CONSTANT && kept == 0 && o->dims[d] > 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "cannot pad axis %d of size 0 in %s mode", d,
                                 p->mode == PAD_REFLECT ? "reflect"
                                 : p->mode == PAD_EDGE  ? "edge"
                                                        : "wrap");
    }
    return TCI_OK;
}

static tci_status pad_forward(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const pad_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t begin[TCI_MAX_RANK], end[TCI_MAX_RANK], strides[TCI_MAX_RANK];
    bool touched[TCI_MAX_RANK], known;
    TCI_TRY(pad_amounts(node, in, begin, end, touched, &known));
    if (!known) return ir_node_error(node, TCI_ERR_INTERNAL, "pads unknown at run time");
    /* the fill value in the data's own dtype */
    uint64_t fill_buf = 0;
    tci_tensor fill = {.dtype = x->dtype, .rank = 0, .data = &fill_buf};
    if (node->since_version < 11) op_write_number(&fill, 0, p->value);
    else if (node->num_inputs > 2 && in[2] && op_count(in[2]) > 0)
        memcpy(&fill_buf, in[2]->data, tci_dtype_size(x->dtype));
    op_strides(x->rank, x->dims, strides);
    int64_t **maps = maps_alloc(o->rank, o->dims);
    if (!maps) return out_of_memory(node);
    for (int d = 0; d < o->rank; d++) {
        /* negative pads crop first; the kept range is then padded by the positive parts */
        int64_t crop = begin[d] < 0 ? -begin[d] : 0, lead = begin[d] > 0 ? begin[d] : 0;
        int64_t kept = x->dims[d] - crop - (end[d] < 0 ? -end[d] : 0);
        for (int64_t i = 0; i < o->dims[d]; i++) {
            int64_t j = i - lead;
            if (j < 0 || j >= kept) {
                switch (p->mode) {
                case PAD_CONSTANT: j = -1; break;
                case PAD_EDGE: j = j < 0 ? 0 : kept - 1; break;
                case PAD_WRAP: j = ((j % kept) + kept) % kept; break;
                case PAD_REFLECT:
                    if (kept == 1) {
                        j = 0;
                    } else { /* mirror without repeating the edge: period 2 * (kept - 1) */
                        int64_t period = 2 * (kept - 1);
                        j = ((j % period) + period) % period;
                        if (j >= kept) j = period - j;
                    }
                    break;
                }
            }
            maps[d][i] = j < 0 ? -1 : (j + crop) * strides[d];
        }
    }
    copy_by_maps(o, x, maps, &fill_buf);
    free(maps);
    return TCI_OK;
}

/* ---- Expand ---- */

static tci_status expand_parse(ir_node *node, tci_arena *arena) {
    static const char *const known[] = {NULL};
    TCI_TRY(op_check_arity(node, 2, 2, 1, 1));
    return ir_check_attrs(node, known);
}

static tci_status expand_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t shape[TCI_MAX_RANK];
    int len;
    bool known;
    TCI_TRY(check_elem_dtype(node, x, 0));
    TCI_TRY(read_int_list(node, in[1], 1, "shape", TCI_MAX_RANK, shape, &len, &known));
    o->dtype = x->dtype;
    o->rank = -1;
    if (len < 0 || x->rank < 0) return TCI_OK;
    if (!known) {
        o->rank = len > x->rank ? len : x->rank;
        for (int d = 0; d < o->rank; d++) o->dims[d] = -1;
        return TCI_OK;
    }
    for (int i = 0; i < len; i++)
        if (shape[i] < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "shape[%d] is negative (%lld)", i,
                                 (long long)shape[i]);
    return op_broadcast_shape(node, x->rank, x->dims, len, shape, &o->rank, o->dims);
}

static tci_status expand_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t strides[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, strides);
    int64_t **maps = maps_alloc(o->rank, o->dims);
    if (!maps) return out_of_memory(node);
    int shift = o->rank - x->rank;
    for (int d = 0; d < o->rank; d++) {
        int k = d - shift;
        bool broadcast = k < 0 || x->dims[k] == 1;
        for (int64_t i = 0; i < o->dims[d]; i++) maps[d][i] = broadcast ? 0 : i * strides[k];
    }
    copy_by_maps(o, x, maps, NULL);
    free(maps);
    return TCI_OK;
}

/* ---- Gather ---- */

static tci_status gather_parse(ir_node *node, tci_arena *arena) {
    static const char *const known[] = {"axis", NULL};
    TCI_TRY(op_check_arity(node, 2, 2, 1, 1));
    TCI_TRY(ir_check_attrs(node, known));
    PARAMS(axis_params, p);
    return ir_attr_int(node, "axis", 0, &p->axis);
}

static tci_status gather_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const axis_params *p = node->params;
    const tci_tensor *x = in[0], *idx = in[1];
    tci_tensor *o = out[0];
    TCI_TRY(check_elem_dtype(node, x, 0));
    TCI_TRY(op_check_dtype(node, idx, 1, op_index_types));
    o->dtype = x->dtype;
    o->rank = -1;
    if (x->rank < 0 || idx->rank < 0) return TCI_OK;
    if (x->rank == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "cannot gather from a scalar");
    int axis;
    TCI_TRY(op_normalize_axis(node, p->axis, x->rank, &axis));
    TCI_TRY(check_out_rank(node, x->rank + idx->rank - 1));
    o->rank = x->rank + idx->rank - 1;
    int k = 0;
    for (int d = 0; d < axis; d++) o->dims[k++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++) o->dims[k++] = idx->dims[d];
    for (int d = axis + 1; d < x->rank; d++) o->dims[k++] = x->dims[d];
    int64_t n = x->dims[axis];
    if (n >= 0 && value_known(idx))
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
    TCI_TRY(op_normalize_axis(node, p->axis, x->rank, &axis));
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

static tci_status shape_parse(ir_node *node, tci_arena *arena) {
    static const char *const known1[] = {NULL};
    static const char *const known15[] = {"start", "end", NULL};
    TCI_TRY(op_check_arity(node, 1, 1, 1, 1));
    TCI_TRY(ir_check_attrs(node, node->since_version >= 15 ? known15 : known1));
    PARAMS(shape_params, p);
    TCI_TRY(ir_attr_int(node, "start", 0, &p->start));
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
    TCI_TRY(check_elem_dtype(node, x, 0));
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

/* ---- Constant / ConstantOfShape ---- */

typedef struct {
    tci_dtype dtype;
    int rank;
    int64_t dims[TCI_MAX_RANK];
    const void *data;
} constant_params;

static tci_status constant_parse(ir_node *node, tci_arena *arena) {
    static const char *const known1[] = {"value", NULL};
    static const char *const known11[] = {"value", "sparse_value", NULL};
    static const char *const known12[] = {"value",        "sparse_value",  "value_float",
                                          "value_floats", "value_int",     "value_ints",
                                          "value_string", "value_strings", NULL};
    int v = node->since_version;
    TCI_TRY(op_check_arity(node, 0, 0, 1, 1));
    TCI_TRY(ir_check_attrs(node, v >= 12 ? known12 : v >= 11 ? known11 : known1));
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
        if (t->rank < 0 || t->rank > TCI_MAX_RANK || !dims_known(t->rank, t->dims))
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "attribute 'value' has unsupported rank %d", t->rank);
        p->dtype = t->dtype;
        p->rank = t->rank;
        memcpy(p->dims, t->dims, sizeof p->dims);
        p->data = t->data;
        int64_t count;
        TCI_TRY(dims_product(node, p->rank, p->dims, &count));
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
        TCI_TRY(ir_attr_floats(node, a->name, &values, &count));
        p->data = values;
        p->dims[0] = (int64_t)count;
    } else if (is_list) {
        const int64_t *values;
        size_t count;
        TCI_TRY(ir_attr_ints(node, a->name, &values, &count));
        p->data = values;
        p->dims[0] = (int64_t)count;
    } else if (is_float) {
        float f;
        TCI_TRY(ir_attr_float(node, a->name, 0, &f));
        p->data = &a->f;
    } else {
        int64_t i;
        TCI_TRY(ir_attr_int(node, a->name, 0, &i));
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

static tci_status constant_of_shape_parse(ir_node *node, tci_arena *arena) {
    static const char *const known[] = {"value", NULL};
    TCI_TRY(op_check_arity(node, 1, 1, 1, 1));
    TCI_TRY(ir_check_attrs(node, known));
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
    TCI_TRY(dims_product(node, t->rank, t->dims, &count));
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
    TCI_TRY(read_int_list(node, in[0], 0, "shape", TCI_MAX_RANK, shape, &len, &known));
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
        copy_elem(dst + (size_t)i * es, p->value, es);
    return TCI_OK;
}

/* ---- Identity / Dropout ---- */

static tci_status identity_parse(ir_node *node, tci_arena *arena) {
    static const char *const known[] = {NULL};
    TCI_TRY(op_check_arity(node, 1, 1, 1, 1));
    return ir_check_attrs(node, known);
}

static tci_status identity_infer(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    TCI_TRY(check_elem_dtype(node, in[0], 0));
    op_same_shape(out[0], in[0]);
    return TCI_OK;
}

static tci_status dropout_parse(ir_node *node, tci_arena *arena) {
    static const char *const known7[] = {"ratio", NULL};
    static const char *const known12[] = {"seed", NULL};
    bool v12 = node->since_version >= 12;
    TCI_TRY(op_check_arity(node, 1, v12 ? 3 : 1, 1, 2));
    return ir_check_attrs(node, v12 ? known12 : known7);
}

static const tci_dtype bool_types[] = {TCI_DTYPE_BOOL, 0};

static tci_status dropout_infer(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    TCI_TRY(check_elem_dtype(node, in[0], 0));
    if (node->num_inputs > 2 && in[2]) {
        const tci_tensor *mode = in[2];
        TCI_TRY(op_check_dtype(node, mode, 2, bool_types));
        /* training with ratio 0 drops nothing, so it is still the identity; the ratio may
         * only become known at run time */
        const tci_tensor *ratio = in[1];
        bool zero_ratio = ratio && (!value_known(ratio) ||
                                    (op_count(ratio) > 0 && op_read_number(ratio, 0) == 0));
        if (value_known(mode) && op_count(mode) > 0 && op_read_number(mode, 0) != 0 && !zero_ratio)
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
    copy_all(out[0], in[0]);
    if (node->num_outputs > 1 && out[1])
        for (int64_t i = 0, n = op_count(out[1]); i < n; i++) op_write_number(out[1], i, 1);
    return TCI_OK;
}

/* ---- descriptors ---- */

#define VERSIONS(...)                                                                              \
    (const int[]) {                                                                                \
        __VA_ARGS__, 0                                                                             \
    }

static const op_desc concat_op = {"Concat",     VERSIONS(4, 11, 13), concat_parse,
                                  concat_infer, concat_forward,      0};
static const op_desc split_op = {"Split",     VERSIONS(2, 11, 13, 18), split_parse,
                                 split_infer, split_forward,           0};
static const op_desc flatten_op = {"Flatten",     VERSIONS(1, 9, 11, 13, 21, 23, 24, 25),
                                   flatten_parse, flatten_infer,
                                   copy_forward,  0};
static const op_desc reshape_op = {"Reshape",     VERSIONS(5, 13, 14, 19, 21, 23, 24, 25),
                                   reshape_parse, reshape_infer,
                                   copy_forward,  0};
static const op_desc transpose_op = {"Transpose",       VERSIONS(1, 13, 21, 23, 24, 25),
                                     transpose_parse,   transpose_infer,
                                     transpose_forward, 0};
static const op_desc squeeze_op = {
    "Squeeze", VERSIONS(1, 11, 13, 21, 23, 24, 25), squeeze_parse, squeeze_infer, copy_forward, 0};
static const op_desc unsqueeze_op = {"Unsqueeze",     VERSIONS(1, 11, 13, 21, 23, 24, 25),
                                     unsqueeze_parse, unsqueeze_infer,
                                     copy_forward,    0};
static const op_desc slice_op = {"Slice",     VERSIONS(1, 10, 11, 13), slice_parse,
                                 slice_infer, slice_forward,           0};
static const op_desc pad_op = {
    "Pad", VERSIONS(2, 11, 13, 18, 19, 21, 23, 24, 25), pad_parse, pad_infer, pad_forward, 0};
static const op_desc expand_op = {"Expand",     VERSIONS(8, 13), expand_parse,
                                  expand_infer, expand_forward,  0};
static const op_desc gather_op = {"Gather",     VERSIONS(1, 11, 13), gather_parse,
                                  gather_infer, gather_forward,      0};
static const op_desc shape_op = {"Shape",       VERSIONS(1, 13, 15, 19, 21, 23, 24, 25),
                                 shape_parse,   shape_infer,
                                 shape_forward, OP_FOLD_FROM_SHAPE};
static const op_desc constant_op = {
    "Constant",       VERSIONS(1, 9, 11, 12, 13, 19, 21, 23, 24, 25),
    constant_parse,   constant_infer,
    constant_forward, 0};
static const op_desc constant_of_shape_op = {
    "ConstantOfShape",       VERSIONS(9, 20, 21, 23, 24, 25), constant_of_shape_parse,
    constant_of_shape_infer, constant_of_shape_forward,       0};
static const op_desc identity_op = {"Identity",     VERSIONS(1, 13, 14, 16, 19, 21, 23, 24, 25),
                                    identity_parse, identity_infer,
                                    copy_forward,   OP_PASSTHROUGH};
static const op_desc dropout_op = {"Dropout",       VERSIONS(7, 10, 12, 13, 22),
                                   dropout_parse,   dropout_infer,
                                   dropout_forward, OP_PASSTHROUGH};

const op_desc *const layer_shape_ops[] = {
    &concat_op,    &split_op,
    &flatten_op,   &reshape_op,
    &transpose_op, &squeeze_op,
    &unsqueeze_op, &slice_op,
    &pad_op,       &expand_op,
    &gather_op,    &shape_op,
    &constant_op,  &constant_of_shape_op,
    &identity_op,  &dropout_op,
    NULL,
};
