/* Op family 'rearrange': Tile, DepthToSpace, SpaceToDepth, Trilu and Expand, which place every
 * element of their input at positions fixed by the shapes and attributes alone (no index
 * tensors). On the GPU all but Trilu are one strided copy each; Trilu has its own step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/shape_util.h"

/* ---- Tile ---- */

static tci_status tile_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 2, 2, 1, 1);
}

/* repeats (input 1): *len -1 while unknown, *known whether vals holds them. */
static tci_status tile_repeats(const ir_node *node, const tci_tensor *const *in, int64_t *vals,
                               int *len, bool *known) {
    if (in[1]->dtype != TCI_DTYPE_UNDEFINED && in[1]->dtype != TCI_DTYPE_INT64)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "repeats must be int64, not %s",
                             tci_dtype_name(in[1]->dtype));
    TRY_STATUS(shape_read_int_list(node, in[1], 1, "repeats", TCI_MAX_RANK, vals, len, known));
    const tci_tensor *x = in[0];
    if (*len >= 0 && x->rank >= 0 && *len != x->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "repeats has %d entries for an input of rank %d", *len, x->rank);
    for (int i = 0; *known && i < *len; i++)
        if (vals[i] < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "repeats[%d] is negative (%lld)",
                                 i, (long long)vals[i]);
    return TCI_OK;
}

static tci_status tile_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t reps[TCI_MAX_RANK];
    int len;
    bool known;
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    TRY_STATUS(tile_repeats(node, in, reps, &len, &known));
    op_same_shape(o, x);
    if (x->rank < 0) return TCI_OK;
    for (int d = 0; d < x->rank; d++) {
        o->dims[d] = -1;
        if (known && x->dims[d] >= 0 && __builtin_mul_overflow(x->dims[d], reps[d], &o->dims[d]))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "dim %d of the output (%lld x repeats %lld) overflows int64", d,
                                 (long long)x->dims[d], (long long)reps[d]);
    }
    return TCI_OK;
}

static tci_status tile_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t strides[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, strides);
    int64_t **maps;
    TRY_STATUS(shape_maps_alloc(node, o, &maps));
    if (!maps) return TCI_OK; /* an empty output: nothing to copy */
    for (int d = 0; d < o->rank; d++)
        for (int64_t i = 0; i < o->dims[d]; i++) maps[d][i] = (i % x->dims[d]) * strides[d];
    shape_copy_by_maps(o, x, maps, NULL);
    free(maps);
    return TCI_OK;
}

/* ---- DepthToSpace and SpaceToDepth ---- */

typedef struct {
    int64_t blocksize;
    bool crd; /* column-row-depth order, else depth-column-row */
} space_depth_params;

static tci_status space_depth_parse(ir_node *node, mem_arena *arena, bool has_mode) {
    static const char *const known1[] = {"blocksize", NULL};
    static const char *const known_mode[] = {"blocksize", "mode", NULL};
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    TRY_STATUS(ir_check_attrs(node, has_mode ? known_mode : known1));
    PARAMS(space_depth_params, p);
    if (!ir_node_attr(node, "blocksize"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'blocksize' is required");
    TRY_STATUS(ir_attr_int(node, "blocksize", 0, &p->blocksize));
    if (p->blocksize < 1 || p->blocksize > (1 << 20))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "blocksize %lld is not positive",
                             (long long)p->blocksize);
    const char *mode;
    TRY_STATUS(ir_attr_string(node, "mode", "DCR", &mode));
    if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "mode '%s' is not DCR or CRD", mode);
    p->crd = strcmp(mode, "CRD") == 0;
    return TCI_OK;
}

static tci_status depth_to_space_parse(ir_node *node, mem_arena *arena) {
    return space_depth_parse(node, arena, node->since_version >= 11);
}

static tci_status space_to_depth_parse(ir_node *node, mem_arena *arena) {
    return space_depth_parse(node, arena, node->since_version >= 28);
}

/* Output dims of DepthToSpace (to_space) or SpaceToDepth of a 4-D x; -1 where unknown. */
static tci_status space_depth_infer(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out, bool to_space) {
    const space_depth_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t b = p->blocksize;
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    op_same_shape(o, x);
    if (x->rank < 0) return TCI_OK;
    if (x->rank != 4)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input must be 4-D, it has rank %d",
                             x->rank);
    int64_t c = x->dims[1], h = x->dims[2], w = x->dims[3];
    if (to_space) {
        if (c >= 0 && c % (b * b))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "channels (%lld) are not a multiple of blocksize^2 (%lld)",
                                 (long long)c, (long long)(b * b));
        o->dims[1] = c < 0 ? -1 : c / (b * b);
        o->dims[2] = h < 0 ? -1 : h * b;
        o->dims[3] = w < 0 ? -1 : w * b;
        return TCI_OK;
    }
    if ((h >= 0 && h % b) || (w >= 0 && w % b))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "height and width (%lld, %lld) are not multiples of blocksize %lld",
                             (long long)h, (long long)w, (long long)b);
    o->dims[1] = c < 0 ? -1 : c * b * b;
    o->dims[2] = h < 0 ? -1 : h / b;
    o->dims[3] = w < 0 ? -1 : w / b;
    return TCI_OK;
}

static tci_status depth_to_space_infer(const ir_node *node, const tci_tensor *const *in,
                                       tci_tensor *const *out) {
    return space_depth_infer(node, in, out, true);
}

static tci_status space_to_depth_infer(const ir_node *node, const tci_tensor *const *in,
                                       tci_tensor *const *out) {
    return space_depth_infer(node, in, out, false);
}

/* The output as 6 dims (row-major, the output's own order) and the input strides each one reads
 * x (dense N, C, H, W) with: the reshape-transpose-reshape of the ONNX definitions. */
static void space_depth_view(const space_depth_params *p, bool to_space, const int64_t *x,
                             int64_t *dims, int64_t *src) {
    int64_t b = p->blocksize, n = x[0], c = x[1], h = x[2], w = x[3], sn = c * h * w;
    if (to_space) {
        /* DCR reads x as (N, b1, b2, C', H, W), CRD as (N, C', b1, b2, H, W); both write
         * (N, C', H, b1, W, b2) */
        int64_t cc = c / (b * b);
        int64_t sc = p->crd ? b * b * h * w : h * w;
        int64_t sb1 = p->crd ? b * h * w : b * cc * h * w;
        int64_t sb2 = p->crd ? h * w : cc * h * w;
        int64_t d[6] = {n, cc, h, b, w, b}, s[6] = {sn, sc, w, sb1, 1, sb2};
        memcpy(dims, d, sizeof d);
        memcpy(src, s, sizeof s);
        return;
    }
    /* x read as (N, C, H', b1, W', b2); DCR writes (N, b1, b2, C, H', W'), CRD (N, C, b1, b2,
     * H', W') */
    int64_t hh = h / b, ww = w / b, sc = h * w, sh = b * w, sb1 = w, sw = b, sb2 = 1;
    if (p->crd) {
        int64_t d[6] = {n, c, b, b, hh, ww}, s[6] = {sn, sc, sb1, sb2, sh, sw};
        memcpy(dims, d, sizeof d);
        memcpy(src, s, sizeof s);
    } else {
        int64_t d[6] = {n, b, b, c, hh, ww}, s[6] = {sn, sb1, sb2, sc, sh, sw};
        memcpy(dims, d, sizeof d);
        memcpy(src, s, sizeof s);
    }
}

static tci_status space_depth_forward(const ir_node *node, const tci_tensor *const *in,
                                      tci_tensor *const *out, bool to_space) {
    const tci_tensor *x = in[0];
    tci_tensor o6 = *out[0];
    int64_t src[6];
    o6.rank = 6;
    space_depth_view(node->params, to_space, x->dims, o6.dims, src);
    int64_t **maps;
    TRY_STATUS(shape_maps_alloc(node, &o6, &maps)); /* o6: out[0] viewed in 6-D */
    if (!maps) return TCI_OK; /* an empty output: nothing to copy */
    for (int d = 0; d < 6; d++)
        for (int64_t i = 0; i < o6.dims[d]; i++) maps[d][i] = i * src[d];
    shape_copy_by_maps(&o6, x, maps, NULL);
    free(maps);
    return TCI_OK;
}

static tci_status depth_to_space_forward(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    return space_depth_forward(node, in, out, true);
}

static tci_status space_to_depth_forward(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    return space_depth_forward(node, in, out, false);
}

/* ---- Trilu ---- */

typedef struct {
    bool upper;
} trilu_params;

static tci_status trilu_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"upper", NULL};
    TRY_STATUS(op_check_arity(node, 1, 2, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    PARAMS(trilu_params, p);
    int upper;
    TRY_STATUS(op_read_flag(node, "upper", 1, &upper));
    p->upper = upper != 0;
    return TCI_OK;
}

static tci_status trilu_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const tci_tensor *x = in[0], *k = node->num_inputs > 1 ? in[1] : NULL;
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    if (k) {
        if (k->dtype != TCI_DTYPE_UNDEFINED && k->dtype != TCI_DTYPE_INT64)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "k must be int64, not %s",
                                 tci_dtype_name(k->dtype));
        if (k->rank > 1 || (k->rank == 1 && k->dims[0] >= 0 && k->dims[0] != 1))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "k must be a scalar");
    }
    if (x->rank >= 0 && x->rank < 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input must have rank >= 2, it has %d",
                             x->rank);
    op_same_shape(out[0], x);
    return TCI_OK;
}

/* The diagonal offset: input 1 when given, else 0. */
static int64_t trilu_k(const ir_node *node, const tci_tensor *const *in) {
    const tci_tensor *k = node->num_inputs > 1 ? in[1] : NULL;
    return k && op_count(k) > 0 ? op_read_int(k, 0) : 0;
}

static bool trilu_keep(bool upper, int64_t row, int64_t col, int64_t k) {
    return upper ? col - row >= k : col - row <= k;
}

static tci_status trilu_forward(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const trilu_params *p = node->params;
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t k = trilu_k(node, in), rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    int64_t batch = lower_prod(x->dims, 0, x->rank - 2);
    size_t es = tci_dtype_size(x->dtype);
    const char *src = x->data;
    char *dst = o->data;
    for (int64_t m = 0; m < batch; m++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++, src += es, dst += es) {
                if (trilu_keep(p->upper, r, c, k)) memcpy(dst, src, es);
                else memset(dst, 0, es);
            }
    return TCI_OK;
}

/* ---- GPU lowering ---- */

/* One strided copy of dense x into a new dense y viewed as `rank` dims, x read with `src`
 * strides (y written row-major over dims). */
static tci_status view_copy(plan_builder *b, const ir_node *node, int rank, const int64_t *dims,
                            const int64_t *src, const int64_t *dst) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    if (rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "needs a %d-D strided copy; the GPU path has at most %d dims", rank,
                             PLAN_MAX_PHYS_RANK);
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    if (lower_count(y) == 0) return TCI_OK;
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_COPY, node, NULL, &s));
    plan_strided *v = &s->u.copy.view;
    memset(v, 0, sizeof *v);
    v->pad_dim = -1;
    v->rank = rank;
    for (int i = 0; i < rank; i++) {
        v->dims[i] = dims[i];
        v->strides[0][i] = src[i];
        v->out_strides[i] = dst[i];
    }
    s->u.copy.elem_size = tci_dtype_size(lower_tensor(b, yt)->dtype);
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

static tci_status tile_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, y));
    int64_t xs[TCI_MAX_RANK], ys[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, xs);
    op_strides(y->rank, y->dims, ys);
    /* each tiled dim of extent > 1 becomes (repeat, extent): the repeat reads with stride 0 */
    int64_t dims[2 * TCI_MAX_RANK], src[2 * TCI_MAX_RANK], dst[2 * TCI_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++) {
        int64_t n = x->dims[d], reps = n ? y->dims[d] / n : 0;
        if (y->dims[d] == 1) continue;
        if (reps > 1) {
            dims[rank] = reps;
            src[rank] = 0;
            dst[rank++] = n * ys[d];
        }
        if (n > 1 || reps <= 1) {
            dims[rank] = n;
            src[rank] = xs[d];
            dst[rank++] = ys[d];
        }
    }
    return view_copy(b, node, rank, dims, src, dst);
}

static tci_status space_depth_gpu_lower(plan_builder *b, const ir_node *node, bool to_space) {
    const ir_tensor *x = node->inputs[0];
    TRY_STATUS(lower_require_known(node, x));
    int64_t dims[6], src[6], dst[6];
    space_depth_view(node->params, to_space, x->dims, dims, src);
    op_strides(6, dims, dst);
    return view_copy(b, node, 6, dims, src, dst);
}

static tci_status depth_to_space_gpu_lower(plan_builder *b, const ir_node *node) {
    return space_depth_gpu_lower(b, node, true);
}

static tci_status space_to_depth_gpu_lower(plan_builder *b, const ir_node *node) {
    return space_depth_gpu_lower(b, node, false);
}

static tci_status trilu_gpu_lower(plan_builder *b, const ir_node *node) {
    const trilu_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    const ir_tensor *kt = node->num_inputs > 1 ? node->inputs[1] : NULL;
    TRY_STATUS(lower_require_known(node, x));
    int64_t k = 0;
    int io[2], n = 1;
    if (kt && kt->data) {
        tci_tensor v;
        ir_tensor_view(kt, &v);
        if (op_count(&v) > 0) k = op_read_int(&v, 0);
    } else if (kt) {
        /* k computed at run time: the kernel reads it on the device */
        TRY_STATUS(lower_require_known(node, kt));
        if (lower_count(kt) != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "k must have one element");
        TRY_STATUS(lower_input(b, node, kt, PLAN_LAYOUT_DENSE, &io[n++]));
    }
    int yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &io[0]));
    TRY_STATUS(lower_output(b, node, y, &yt));
    if (lower_count(y) == 0) return TCI_OK;
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_TRILU, node, NULL, &s));
    s->u.trilu.batch = lower_prod(x->dims, 0, x->rank - 2);
    s->u.trilu.rows = x->dims[x->rank - 2];
    s->u.trilu.cols = x->dims[x->rank - 1];
    s->u.trilu.k = k;
    s->u.trilu.upper = p->upper;
    s->u.trilu.elem_size = tci_dtype_size(lower_tensor(b, yt)->dtype);
    lower_step_io(s, n, io, 1, &yt);
    return TCI_OK;
}

/* ---- Expand ---- */

static tci_status expand_parse(ir_node *node, mem_arena *arena) {
    return op_parse_no_attrs(node, 2, 2, 1, 1);
}

static tci_status expand_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *o = out[0];
    int64_t shape[TCI_MAX_RANK];
    int len;
    bool known;
    TRY_STATUS(shape_check_elem_dtype(node, x, 0));
    TRY_STATUS(shape_read_int_list(node, in[1], 1, "shape", TCI_MAX_RANK, shape, &len, &known));
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
    int64_t **maps;
    TRY_STATUS(shape_maps_alloc(node, o, &maps));
    if (!maps) return TCI_OK; /* an empty output: nothing to copy */
    int shift = o->rank - x->rank;
    for (int d = 0; d < o->rank; d++) {
        int k = d - shift;
        bool broadcast = k < 0 || x->dims[k] == 1;
        for (int64_t i = 0; i < o->dims[d]; i++) maps[d][i] = broadcast ? 0 : i * strides[k];
    }
    shape_copy_by_maps(o, x, maps, NULL);
    free(maps);
    return TCI_OK;
}

/* Expand on the GPU: one strided copy, the broadcast dims read with stride 0. */
static tci_status expand_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, y));
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    int64_t strides[TCI_MAX_RANK]; /* y's rank: above PLAN_MAX_PHYS_RANK the copy step refuses */
    lower_operand_strides(lower_tensor(b, yt), lower_tensor(b, xi), strides);
    return lower_copy_step(b, node, xi, yt, strides, 0);
}

/* ---- descriptors ---- */

SHAPE_OP(tile_op, "Tile", tile_parse, tile_infer, tile_forward, OP_MOVES_DATA, tile_gpu_lower, 6,
         13);

SHAPE_OP(depth_to_space_op, "DepthToSpace", depth_to_space_parse, depth_to_space_infer,
         depth_to_space_forward, OP_MOVES_DATA, depth_to_space_gpu_lower, 1, 11, 13, 28);

SHAPE_OP(space_to_depth_op, "SpaceToDepth", space_to_depth_parse, space_to_depth_infer,
         space_to_depth_forward, OP_MOVES_DATA, space_to_depth_gpu_lower, 1, 13, 28);

SHAPE_OP(trilu_op, "Trilu", trilu_parse, trilu_infer, trilu_forward, OP_MOVES_DATA,
         trilu_gpu_lower, 14);

/* what the attention fusion reads through broadcast strides instead (a bool mask expanded) */
static void expand_pattern(const ir_node *node, op_pattern *out) {
    (void)node;
    out->kind = OP_PATTERN_BROADCAST;
}

SHAPE_OP_PATTERN(expand_op, "Expand", expand_parse, expand_infer, expand_forward, OP_MOVES_DATA,
                 expand_gpu_lower, expand_pattern, 8, 13);

const op_desc *const layer_rearrange_ops[] = {
    &tile_op,
    &depth_to_space_op,
    &space_to_depth_op,
    &trilu_op,
    &expand_op,
    NULL,
};
