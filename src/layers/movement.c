/* Op family 'movement': Concat, Split, Transpose, Slice and Pad, which move bytes between
 * positions; every dtype is handled by element size. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/shape_util.h"

/* ---- Concat ---- */


static tci_status concat_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"axis", NULL};
    TRY_STATUS(op_check_arity(node, 1, INT_MAX, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
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
        TRY_STATUS(shape_check_elem_dtype(node, in[i], i));
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
    TRY_STATUS(op_normalize_axis(node, p->axis, rank, &axis));
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
    TRY_STATUS(op_normalize_axis(node, p->axis, o->rank, &axis));
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

static tci_status split_parse(ir_node *node, mem_arena *arena) {
    static const char *const known2[] = {"axis", "split", NULL};
    static const char *const known13[] = {"axis", NULL};
    static const char *const known18[] = {"axis", "num_outputs", NULL};
    int v = node->since_version;
    TRY_STATUS(op_check_arity(node, 1, v >= 13 ? 2 : 1, 1, INT_MAX));
    TRY_STATUS(ir_check_attrs(node, v >= 18 ? known18 : v >= 13 ? known13 : known2));
    PARAMS(split_params, p);
    TRY_STATUS(ir_attr_int(node, "axis", 0, &p->axis));
    if (v < 13) {
        TRY_STATUS(ir_attr_ints(node, "split", &p->split, &p->split_count));
        if (p->split && p->split_count != (size_t)node->num_outputs)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'split' has %zu entries for %d outputs", p->split_count,
                                 node->num_outputs);
    }
    if (v >= 18 && ir_node_attr(node, "num_outputs")) {
        int64_t num;
        TRY_STATUS(ir_attr_int(node, "num_outputs", 0, &num));
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
        TRY_STATUS(op_check_dtype(node, st, 1, op_index_types));
        if (st->rank >= 0 && st->rank != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "split (input 1) must be 1-D");
        if (st->rank < 0 || st->dims[0] < 0) return TCI_OK;
        /* an empty split list means "not given", as onnxruntime reads it */
        if (st->dims[0] > 0) {
            if (st->dims[0] != n)
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "split (input 1) has %lld entries for %d outputs",
                                     (long long)st->dims[0], n);
            if (!shape_value_known(st)) return TCI_OK;
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
            if (__builtin_add_overflow(sum, sizes[i], &sum))
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "split sizes add up past int64 (size %d is %lld)", i,
                                     (long long)sizes[i]);
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
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    if (x->rank >= 0) TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t *sizes = malloc(sizeof(int64_t) * (size_t)n);
    if (!sizes) return shape_out_of_memory(node);
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
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    int64_t *sizes = malloc(sizeof(int64_t) * (size_t)n);
    if (!sizes) return shape_out_of_memory(node);
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


/* ---- Transpose ---- */

typedef struct {
    const int64_t *perm; /* NULL: reverse the dims */
    size_t count;
} transpose_params;

static tci_status transpose_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"perm", NULL};
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    PARAMS(transpose_params, p);
    TRY_STATUS(ir_attr_ints(node, "perm", &p->perm, &p->count));
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
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
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
    int64_t **maps;
    TRY_STATUS(shape_maps_alloc(node, o, &maps));
    if (!maps) return TCI_OK; /* an empty output: nothing to copy */
    for (int d = 0; d < o->rank; d++) {
        int64_t s = strides[transpose_axis(p, x->rank, d)];
        for (int64_t i = 0; i < o->dims[d]; i++) maps[d][i] = i * s;
    }
    shape_copy_by_maps(o, x, maps, NULL);
    free(maps);
    return TCI_OK;
}


/* ---- Slice ---- */

typedef struct {
    const int64_t *starts, *ends, *axes; /* attributes (opset 1); axes may be NULL */
    size_t count;
} slice_params;

static tci_status slice_parse(ir_node *node, mem_arena *arena) {
    static const char *const known1[] = {"starts", "ends", "axes", NULL};
    static const char *const known10[] = {NULL};
    bool attr = node->since_version < 10;
    TRY_STATUS(op_check_arity(node, attr ? 1 : 3, attr ? 1 : 5, 1, 1));
    TRY_STATUS(ir_check_attrs(node, attr ? known1 : known10));
    PARAMS(slice_params, p);
    if (!attr) return TCI_OK;
    size_t ns, ne, na;
    TRY_STATUS(ir_attr_ints(node, "starts", &p->starts, &ns));
    TRY_STATUS(ir_attr_ints(node, "ends", &p->ends, &ne));
    TRY_STATUS(ir_attr_ints(node, "axes", &p->axes, &na));
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
        TRY_STATUS(shape_read_int_list(node, in[1], 1, "starts", TCI_MAX_RANK, starts, &ns, &ks));
        TRY_STATUS(shape_read_int_list(node, in[2], 2, "ends", TCI_MAX_RANK, ends, &ne, &ke));
        has_axes = node->num_inputs > 3 && in[3];
        na = nt = -2;
        if (has_axes) TRY_STATUS(shape_read_int_list(node, in[3], 3, "axes", TCI_MAX_RANK, axes, &na, &ka));
        if (node->num_inputs > 4 && in[4])
            TRY_STATUS(shape_read_int_list(node, in[4], 4, "steps", TCI_MAX_RANK, steps, &nt, &kt));
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
    TRY_STATUS(shape_normalize_axes(node, axes, n, rank, norm));
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
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
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
    TRY_STATUS(slice_plan(node, in, start, step, len));
    op_strides(x->rank, x->dims, strides);
    int64_t **maps;
    TRY_STATUS(shape_maps_alloc(node, o, &maps));
    if (!maps) return TCI_OK; /* an empty output: nothing to copy */
    for (int d = 0; d < o->rank; d++)
        for (int64_t i = 0; i < o->dims[d]; i++) maps[d][i] = (start[d] + i * step[d]) * strides[d];
    shape_copy_by_maps(o, x, maps, NULL);
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

static tci_status pad_parse(ir_node *node, mem_arena *arena) {
    static const char *const known2[] = {"mode", "pads", "value", NULL};
    static const char *const known11[] = {"mode", NULL};
    int v = node->since_version;
    TRY_STATUS(op_check_arity(node, v < 11 ? 1 : 2, v < 11 ? 1 : v < 18 ? 3 : 4, 1, 1));
    TRY_STATUS(ir_check_attrs(node, v < 11 ? known2 : known11));
    PARAMS(pad_params, p);
    const char *mode;
    TRY_STATUS(ir_attr_string(node, "mode", "constant", &mode));
    if (strcmp(mode, "constant") == 0) p->mode = PAD_CONSTANT;
    else if (strcmp(mode, "reflect") == 0) p->mode = PAD_REFLECT;
    else if (strcmp(mode, "edge") == 0) p->mode = PAD_EDGE;
    else if (strcmp(mode, "wrap") == 0 && v >= 19) p->mode = PAD_WRAP;
    else
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute 'mode' value '%s' is not supported%s", mode,
                             strcmp(mode, "wrap") == 0 ? " before opset 19" : "");
    if (v < 11) {
        TRY_STATUS(ir_attr_ints(node, "pads", &p->pads, &p->count));
        TRY_STATUS(ir_attr_float(node, "value", 0.0f, &p->value));
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
        TRY_STATUS(shape_read_int_list(node, in[1], 1, "pads", 2 * TCI_MAX_RANK, pads, &np, &kp));
    }
    if (node->num_inputs > 3 && in[3]) {
        TRY_STATUS(shape_read_int_list(node, in[3], 3, "axes", TCI_MAX_RANK, axes, &na, &ka));
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
    TRY_STATUS(shape_normalize_axes(node, axes, na, rank, norm));
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
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
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
        TRY_STATUS(shape_dims_product(node, cv->rank, cv->dims, &c));
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
            TRY_STATUS(shape_check_out_rank(node, o->rank));
            for (int d = 0; d < o->rank; d++) o->dims[d] = -1;
        }
        return TCI_OK;
    }
    int64_t begin[TCI_MAX_RANK], end[TCI_MAX_RANK];
    bool touched[TCI_MAX_RANK], known;
    TRY_STATUS(pad_amounts(node, in, begin, end, touched, &known));
    for (int d = 0; d < x->rank; d++) {
        int64_t n = x->dims[d];
        o->dims[d] = n;
        if (!touched[d]) continue;
        if (!known || n < 0) {
            o->dims[d] = -1;
            continue;
        }
        /* checked: pads come from the model and may be near INT64_MAX or INT64_MIN */
        int64_t kept, sized;
        if (begin[d] == INT64_MIN || end[d] == INT64_MIN ||
            __builtin_sub_overflow(n, begin[d] < 0 ? -begin[d] : 0, &kept) ||
            __builtin_sub_overflow(kept, end[d] < 0 ? -end[d] : 0, &kept) ||
            __builtin_add_overflow(n, begin[d], &sized) ||
            __builtin_add_overflow(sized, end[d], &sized))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "pads %lld, %lld of axis %d overflow int64", (long long)begin[d],
                                 (long long)end[d], d);
        if (kept < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "pads %lld, %lld crop more than axis %d has (%lld)",
                                 (long long)begin[d], (long long)end[d], d, (long long)n);
        o->dims[d] = sized;
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
    TRY_STATUS(pad_amounts(node, in, begin, end, touched, &known));
    if (!known) return ir_node_error(node, TCI_ERR_INTERNAL, "pads unknown at run time");
    /* the fill value in the data's own dtype */
    uint64_t fill_buf = 0;
    tci_tensor fill = {.dtype = x->dtype, .rank = 0, .data = &fill_buf};
    if (node->since_version < 11) op_write_number(&fill, 0, p->value);
    else if (node->num_inputs > 2 && in[2] && op_count(in[2]) > 0)
        memcpy(&fill_buf, in[2]->data, tci_dtype_size(x->dtype));
    op_strides(x->rank, x->dims, strides);
    int64_t **maps;
    TRY_STATUS(shape_maps_alloc(node, o, &maps));
    if (!maps) return TCI_OK; /* an empty output: nothing to copy */
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
    shape_copy_by_maps(o, x, maps, &fill_buf);
    free(maps);
    return TCI_OK;
}

/* ---- GPU lowering ---- */

/* tci_tensor views of a node's IR inputs (NULL where omitted), for the geometry helpers above. */
static void input_views(const ir_node *node, tci_tensor *views, const tci_tensor **in) {
    for (int i = 0; i < node->num_inputs; i++) {
        in[i] = NULL;
        if (!node->inputs[i]) continue;
        ir_tensor_view(node->inputs[i], &views[i]);
        in[i] = &views[i];
    }
}

static const int to_channels_last[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};

/* Whether node's Transpose of the 4-D x is the permutation perm. */
static bool transpose_is(const transpose_params *p, const ir_tensor *x, const int *perm) {
    if (x->rank != 4 || (p->perm && p->count != 4)) return false;
    for (int d = 0; d < 4; d++)
        if (transpose_axis(p, 4, d) != perm[d]) return false;
    return true;
}

/* A channels-last float tensor to NCHW, its channels whole groups of 8: NHWC8's bytes */
static bool transpose_views_as_nhwc(const ir_node *node) {
    const ir_tensor *x = node->inputs[0];
    return x->dtype == TCI_DTYPE_FLOAT && transpose_is(node->params, x, to_nchw) &&
           x->dims[3] > 0 && x->dims[3] % 8 == 0;
}

static tci_status transpose_gpu_lower(plan_builder *b, const ir_node *node) {
    const transpose_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    if (x->rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "rank %d transposes have no GPU path",
                             x->rank);
    int xi, yt;
    /* between NCHW and channels-last with whole groups of 8 channels, NHWC8 is the dense
     * channels-last tensor: the output shares the input's memory */
    if (y->layout == PLAN_LAYOUT_NHWC8) { /* transpose_views_as_nhwc */
        TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
        return lower_alias_across_layouts(b, node, y, xi, &yt);
    }
    if (x->layout == PLAN_LAYOUT_NHWC8 && !x->data && transpose_is(p, x, to_channels_last) &&
        x->dims[1] % 8 == 0) {
        TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_NHWC8, &xi));
        return lower_alias_across_layouts(b, node, y, xi, &yt);
    }
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    /* a permutation that keeps the dims longer than 1 in their order (a batch of 1 moved past
     * the sequence, [1, S, E] -> [S, 1, E]) leaves the dense bytes as they are: an alias */
    bool in_order = true;
    for (int i = 0, d, last = -1; i < x->rank && in_order; i++) {
        d = p->perm ? (int)p->perm[i] : x->rank - 1 - i;
        if (x->dims[d] == 1 && !(x->variant_dims >> d & 1)) continue; /* variant_dims: ir.h */
        in_order = d > last;
        last = d;
    }
    if (in_order && y->layout == PLAN_LAYOUT_DENSE) return lower_alias(b, node, y, xi, &yt);
    TRY_STATUS(lower_output(b, node, y, &yt));
    int64_t in_strides[TCI_MAX_RANK], strides[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, in_strides);
    for (int i = 0; i < x->rank; i++) strides[i] = in_strides[p->perm ? p->perm[i] : x->rank - 1 - i];
    return lower_copy_step(b, node, xi, yt, strides, 0);
}

/* Each input of a Concat is a 2-D block of the output (rows of the dims before the axis, the
 * axis and the dims after it in a row; NHWC8 is dense over (N, H, W, padded C), the block of a
 * channel window holding its real channels): up to PLAN_MAX_STEP_INPUTS blocks a step, one
 * launch (DenseNet's Concats of up to 64 inputs were a launch each). */
static tci_status concat_gpu_lower(plan_builder *b, const ir_node *node) {
    const axis_params *p = node->params;
    const ir_tensor *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, y));
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, y->rank, &axis));
    plan_layout layout = y->layout; /* the layout pass's: its inputs' when they are NHWC8 */
    int yt;
    TRY_STATUS(lower_output(b, node, y, &yt));
    /* (read before lower_input, which may add tensors and move the plan's array) */
    const plan_tensor *yp = lower_tensor(b, yt);
    const size_t elem_size = tci_dtype_size(yp->dtype);
    const bool nhwc = layout == PLAN_LAYOUT_NHWC8;
    /* padding channels between NHWC8 blocks must end up zero */
    if (nhwc && axis == 1 && y->dims[1] % 8) TRY_STATUS(lower_fill_step(b, node, yt, 0));
    static const int physical[4] = {0, 3, 1, 2}; /* NHWC8's dim of each logical one */
    const int pa = nhwc ? physical[axis] : axis, rank = nhwc ? 4 : y->rank;
    const int64_t phys[4] = {y->dims[0], nhwc ? y->dims[2] : 0, nhwc ? y->dims[3] : 0,
                             yp->padded_channels};
    const int64_t *ydims = nhwc ? phys : y->dims;
    int64_t outer = 1, inner = 1, at = 0;
    for (int d = 0; d < pa; d++) outer *= ydims[d];
    for (int d = pa + 1; d < rank; d++) inner *= ydims[d];
    int ins[PLAN_MAX_STEP_INPUTS], pending = 0, last = -1; /* the last input with elements */
    plan_copy_block parts[PLAN_MAX_STEP_INPUTS];
    bool slices = false; /* a step reading a Slice in place is labelled so */
    for (int i = 0; i < node->num_inputs; i++)
        if (lower_count(node->inputs[i])) last = i;
    for (int i = 0; i < node->num_inputs; i++) {
        const ir_tensor *x = node->inputs[i];
        if (lower_count(x) == 0) continue;
        /* a Slice pass_fold_slices_into_concats folded: read in place in what it selects from */
        const ir_node *slice = x->producer && x->producer->fused_into == node ? x->producer : NULL;
        TRY_STATUS(lower_input(b, node, slice ? slice->inputs[0] : x, layout, &ins[pending]));
        /* the input's extent along the axis as stored: its padded channels in NHWC8 */
        const int64_t xa = nhwc && pa == 3 ? lower_tensor(b, ins[pending])->padded_channels
                                           : x->dims[axis];
        plan_copy_block *pb = &parts[pending++];
        *pb = (plan_copy_block){outer, xa * inner, xa * inner, ydims[pa] * inner, at * inner, 0};
        if (slice) {
            slices = true;
            op_pattern pat;
            op_node_pattern(slice, &pat);
            pb->src_ld = slice->inputs[0]->dims[axis] * inner;
            pb->src_offset = pat.start[axis] * inner;
        }
        /* a channel window holds the real channels; one input as wide as the output copies
         * its (zero) padding too */
        if (nhwc && pa == 3 && x->dims[1] != y->dims[1]) pb->len = x->dims[1];
        at += x->dims[axis];
        if (pending < PLAN_MAX_STEP_INPUTS && i != last) continue;
        plan_step *s;
        TRY_STATUS(lower_step(b, PLAN_STEP_COPY, node, slices ? "Slice+Concat" : NULL, &s));
        slices = false;
        s->u.copy.view.pad_dim = -1;
        s->u.copy.elem_size = elem_size;
        s->u.copy.num_blocks = pending;
        memcpy(s->u.copy.blocks, parts, (size_t)pending * sizeof parts[0]);
        lower_step_io(s, pending, ins, 1, &yt);
        pending = 0;
    }
    return TCI_OK;
}

static tci_status split_gpu_lower(plan_builder *b, const ir_node *node) {
    const split_params *p = node->params;
    const ir_tensor *x = node->inputs[0];
    TRY_STATUS(lower_require_known(node, x));
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    /* the layout pass's: NHWC8 where x is (select_keeps_nhwc) */
    plan_layout layout = PLAN_LAYOUT_DENSE;
    for (int o = node->num_outputs - 1; o >= 0; o--)
        if (node->outputs[o]) layout = node->outputs[o]->layout;
    int xi;
    TRY_STATUS(lower_input(b, node, x, layout, &xi));
    int64_t start[TCI_MAX_RANK] = {0}, step[TCI_MAX_RANK];
    for (int d = 0; d < x->rank; d++) step[d] = 1;
    for (int o = 0; o < node->num_outputs; o++) {
        const ir_tensor *y = node->outputs[o];
        if (!y) continue;
        int yt;
        TRY_STATUS(lower_output(b, node, y, &yt));
        if (lower_count(y)) TRY_STATUS(lower_select_step(b, node, xi, yt, start, step));
        start[axis] += y->dims[axis];
    }
    return TCI_OK;
}

/* A 4-D Split or Slice keeps an NHWC8 input NHWC8: the selection copies in its layout. */
static bool select_keeps_nhwc(const ir_node *node) {
    for (int i = 1; i < node->num_inputs; i++)
        if (node->inputs[i] && !node->inputs[i]->data) return false;
    return node->inputs[0]->rank == 4;
}

static tci_status slice_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, y));
    tci_tensor views[5];
    const tci_tensor *in[5];
    input_views(node, views, in);
    for (int i = 1; i < node->num_inputs; i++)
        if (node->inputs[i] && !node->inputs[i]->data)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "input %d must be a constant for the GPU path", i);
    int64_t start[TCI_MAX_RANK], step[TCI_MAX_RANK], len[TCI_MAX_RANK];
    TRY_STATUS(slice_plan(node, in, start, step, len));
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, y->layout, &xi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    if (lower_count(y) == 0) return TCI_OK;
    return lower_select_step(b, node, xi, yt, start, step);
}

static tci_status pad_gpu_lower(plan_builder *b, const ir_node *node) {
    const pad_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, y));
    if (x->rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "rank %d Pad has no GPU path", x->rank);
    if (p->mode == PAD_WRAP)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "Pad mode 'wrap' has no GPU path");
    tci_tensor views[4];
    const tci_tensor *in[4];
    input_views(node, views, in);
    int64_t begin[TCI_MAX_RANK], end[TCI_MAX_RANK];
    bool touched[TCI_MAX_RANK], known;
    TRY_STATUS(pad_amounts(node, in, begin, end, touched, &known));
    if (!known)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "input 1 must be a constant for the GPU path");
    float value = p->value;
    if (node->since_version >= 11) TRY_STATUS(lower_scalar_input(node, 2, 0.0f, &value));
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_PAD, node, NULL, &s));
    s->u.pad.rank = x->rank;
    for (int i = 0; i < x->rank; i++) {
        s->u.pad.dims[i] = x->dims[i];
        s->u.pad.pads_begin[i] = begin[i];
        s->u.pad.pads_end[i] = end[i];
    }
    s->u.pad.mode = p->mode == PAD_CONSTANT ? 0 : p->mode == PAD_REFLECT ? 1 : 2;
    s->u.pad.value = value;
    s->u.pad.elem_size = tci_dtype_size(lower_tensor(b, xi)->dtype);
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

/* ---- descriptors ---- */

SHAPE_OP(concat_op, "Concat", concat_parse, concat_infer, concat_forward,
         OP_MOVES_DATA | OP_FOLLOWS_LAYOUT, concat_gpu_lower, 4, 11, 13);



static void transpose_pattern(const ir_node *node, op_pattern *out) {
    const transpose_params *p = node->params;
    const ir_tensor *x = node->inputs[0];
    out->kind = OP_PATTERN_NONE;
    if (!p || x->rank < 1 || (p->perm && (int)p->count != x->rank)) return;
    out->kind = OP_PATTERN_TRANSPOSE;
    out->rank = x->rank;
    for (int d = 0; d < x->rank; d++) out->perm[d] = transpose_axis(p, x->rank, d);
}

static void split_pattern(const ir_node *node, op_pattern *out) {
    const split_params *p = node->params;
    const ir_tensor *x = node->inputs[0];
    out->kind = OP_PATTERN_NONE;
    int64_t axis = p ? (p->axis < 0 ? p->axis + x->rank : p->axis) : -1;
    if (axis < 0 || axis >= x->rank) return;
    out->kind = OP_PATTERN_SPLIT;
    out->axis = (int)axis;
}

/* A Slice of constant starts, ends, axes and steps, every step positive. */
static void slice_pattern(const ir_node *node, op_pattern *out) {
    const ir_tensor *x = node->inputs[0];
    out->kind = OP_PATTERN_NONE;
    if (x->rank < 1) return;
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] < 0) return;
    for (int i = 1; i < node->num_inputs; i++)
        if (node->inputs[i] && !node->inputs[i]->data) return;
    tci_tensor views[5];
    const tci_tensor *in[5];
    input_views(node, views, in);
    int64_t start[TCI_MAX_RANK], step[TCI_MAX_RANK], len[TCI_MAX_RANK];
    if (slice_plan(node, in, start, step, len) != TCI_OK) return;
    for (int d = 0; d < x->rank; d++)
        if (step[d] < 1 || len[d] < 0) return;
    out->kind = OP_PATTERN_SELECT;
    out->rank = x->rank;
    out->drop_axis = -1;
    for (int d = 0; d < x->rank; d++) {
        out->start[d] = start[d];
        out->step[d] = step[d];
    }
}

static const op_desc split_op = {.op_type = "Split",
                                 .versions = OP_VERSIONS(2, 11, 13, 18),
                                 .parse = split_parse,
                                 .infer = split_infer,
                                 .cpu_forward = split_forward,
                                 .flags = OP_MOVES_DATA,
                                 .gpu_lower = split_gpu_lower,
                                 .binary = BINARY_NONE,
                                 .keeps_nhwc = select_keeps_nhwc,
                                 .pattern = split_pattern};

static const op_desc transpose_op = {.op_type = "Transpose",
                                     .versions = OP_VERSIONS(1, 13, 21, 23, 24, 25),
                                     .parse = transpose_parse,
                                     .infer = transpose_infer,
                                     .cpu_forward = transpose_forward,
                                     .flags = OP_MOVES_DATA,
                                     .gpu_lower = transpose_gpu_lower,
                                     .binary = BINARY_NONE,
                                     .pattern = transpose_pattern,
                                     .views_as_nhwc = transpose_views_as_nhwc};

static const op_desc slice_op = {.op_type = "Slice",
                                 .versions = OP_VERSIONS(1, 10, 11, 13),
                                 .parse = slice_parse,
                                 .infer = slice_infer,
                                 .cpu_forward = slice_forward,
                                 .flags = OP_MOVES_DATA,
                                 .gpu_lower = slice_gpu_lower,
                                 .binary = BINARY_NONE,
                                 .keeps_nhwc = select_keeps_nhwc,
                                 .pattern = slice_pattern};

SHAPE_OP(pad_op, "Pad", pad_parse, pad_infer, pad_forward,
         OP_MOVES_DATA, pad_gpu_lower, 2, 11, 13, 18, 19, 21, 23, 24, 25);

const op_desc *const layer_movement_ops[] = {
    &concat_op,
    &split_op,
    &transpose_op,
    &slice_op,
    &pad_op,
    NULL,
};
