/* Op family 'image': reshaping image tensors by their values' sizes rather than by a window:
 * CenterCropPad (each chosen axis cropped or zero-padded to a size, centred) and Col2Im (columns
 * of sliding blocks summed back into an N-d image, the inverse of im2col, as torch's Fold).
 * Elements of any stored type for CenterCropPad, fp32 for Col2Im; CPU reference only (no GPU
 * path yet). */
#include <stdint.h>
#include <string.h>

#include "layers/op.h"

#define IMAGE_MAX_SPATIAL (TCI_MAX_RANK - 2)

/* Reads a 1-D int32/int64 input's n values (n <= max), checking its rank; *known false while
 * the values (or its length) are not known. */
static tci_status read_int_vector(const ir_node *node, const tci_tensor *t, int index,
                                  const char *what, int max, int64_t *values, int *n,
                                  bool *known) {
    TRY_STATUS(op_check_dtype(node, t, index, op_index_types));
    *known = false;
    *n = -1;
    if (t->rank < 0) return TCI_OK;
    if (t->rank != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s must be 1-D, got rank %d", what,
                             t->rank);
    if (t->dims[0] < 0) return TCI_OK;
    if (t->dims[0] > max)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "%s has %lld entries, over %d", what,
                             (long long)t->dims[0], max);
    *n = (int)t->dims[0];
    if (!t->data) return TCI_OK;
    for (int i = 0; i < *n; i++) values[i] = op_read_int(t, i);
    *known = true;
    return TCI_OK;
}

/* ---- CenterCropPad ---- */

typedef struct crop_pad_params {
    const int64_t *axes; /* NULL: every axis */
    size_t num_axes;
} crop_pad_params;

static tci_status crop_pad_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    static const char *const known[] = {"axes", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, crop_pad_params, p);
    return ir_attr_ints(node, "axes", &p->axes, &p->num_axes);
}

/* The output dims (input rank known): *known false while the shape input's values are not. */
static tci_status crop_pad_dims(const ir_node *node, const tci_tensor *x, const tci_tensor *shape,
                                int64_t *dims, bool *known) {
    const crop_pad_params *p = node->params;
    int64_t sizes[TCI_MAX_RANK];
    int n;
    TRY_STATUS(read_int_vector(node, shape, 1, "input shape", TCI_MAX_RANK, sizes, &n, known));
    int want = p->axes ? (int)p->num_axes : x->rank;
    if (n >= 0 && n != want)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input shape has %d entries; expected %d (one per %s)", n, want,
                             p->axes ? "entry of axes" : "input axis");
    bool seen[TCI_MAX_RANK] = {false};
    int axis_of[TCI_MAX_RANK];
    for (int i = 0; i < want; i++) {
        int axis = i;
        if (p->axes) TRY_STATUS(op_normalize_axis(node, p->axes[i], x->rank, &axis));
        if (seen[axis])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "axes names axis %d twice", axis);
        seen[axis] = true;
        axis_of[i] = axis;
    }
    for (int i = 0; i < x->rank; i++) dims[i] = x->dims[i];
    for (int i = 0; i < want; i++) {
        if (!*known) {
            dims[axis_of[i]] = -1;
            continue;
        }
        if (sizes[i] < 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input shape[%d] is %lld; negative",
                                 i, (long long)sizes[i]);
        dims[axis_of[i]] = sizes[i];
    }
    return TCI_OK;
}

static tci_status crop_pad_infer(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    op_set_unknown(out[0], in[0]->dtype);
    if (in[0]->rank < 0) return TCI_OK;
    bool known;
    out[0]->rank = in[0]->rank;
    return crop_pad_dims(node, in[0], in[1], out[0]->dims, &known);
}

/* Output index o on an axis reads input o + shift: shift = floor((in - out) / 2) when cropping,
 * -floor((out - in) / 2) when padding; outside the input is a zero. */
static tci_status crop_pad_forward(const ir_node *node, const tci_tensor *const *in,
                                   tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    tci_tensor *y = out[0];
    int rank = x->rank;
    size_t elem = tci_dtype_size(x->dtype);
    int64_t shift[TCI_MAX_RANK], xs[TCI_MAX_RANK], idx[TCI_MAX_RANK] = {0};
    op_strides(rank, x->dims, xs);
    for (int d = 0; d < rank; d++)
        shift[d] = x->dims[d] >= y->dims[d] ? (x->dims[d] - y->dims[d]) / 2
                                            : -((y->dims[d] - x->dims[d]) / 2);
    int64_t count = op_count(y);
    memset(y->data, 0, (size_t)count * elem);
    if (count == 0) return TCI_OK;
    if (rank == 0) {
        memcpy(y->data, x->data, elem);
        return TCI_OK;
    }
    /* one run of the last axis at a time */
    int last = rank - 1;
    int64_t lo = shift[last] < 0 ? -shift[last] : 0;
    int64_t hi = x->dims[last] - shift[last];
    if (hi > y->dims[last]) hi = y->dims[last];
    for (int64_t row = 0; row < count / y->dims[last]; row++) {
        bool inside = true;
        int64_t at = 0;
        for (int d = 0; d < last; d++) {
            int64_t i = idx[d] + shift[d];
            if (i < 0 || i >= x->dims[d]) inside = false;
            at += i * xs[d];
        }
        if (inside && hi > lo)
            memcpy((char *)y->data + (size_t)(row * y->dims[last] + lo) * elem,
                   (const char *)x->data + (size_t)(at + lo + shift[last]) * elem,
                   (size_t)(hi - lo) * elem);
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < y->dims[d]) break;
            idx[d] = 0;
        }
    }
    return TCI_OK;
}

/* ---- Col2Im ---- */

typedef struct col2im_params {
    const int64_t *dilations, *pads, *strides; /* NULL: 1s, 0s, 1s */
    size_t num_dilations, num_pads, num_strides;
} col2im_params;

static tci_status check_positive_ints(const ir_node *node, const char *name, const int64_t *v,
                                      size_t n, int64_t min) {
    for (size_t i = 0; v && i < n; i++)
        if (v[i] < min || v[i] > INT32_MAX)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s[%zu] is %lld; must be %s", name,
                                 i, (long long)v[i], min ? "positive" : "non-negative");
    return TCI_OK;
}

static tci_status col2im_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 3, 3, 1, 1));
    static const char *const known[] = {"dilations", "pads", "strides", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, col2im_params, p);
    TRY_STATUS(ir_attr_ints(node, "dilations", &p->dilations, &p->num_dilations));
    TRY_STATUS(ir_attr_ints(node, "pads", &p->pads, &p->num_pads));
    TRY_STATUS(ir_attr_ints(node, "strides", &p->strides, &p->num_strides));
    TRY_STATUS(check_positive_ints(node, "dilations", p->dilations, p->num_dilations, 1));
    TRY_STATUS(check_positive_ints(node, "pads", p->pads, p->num_pads, 0));
    return check_positive_ints(node, "strides", p->strides, p->num_strides, 1);
}

/* The geometry once image_shape and block_shape are known: per spatial axis the image size,
 * block size, dilation, stride, leading pad and the number of block positions. */
typedef struct col2im_geom {
    int k;
    int64_t image[IMAGE_MAX_SPATIAL], block[IMAGE_MAX_SPATIAL], dilation[IMAGE_MAX_SPATIAL];
    int64_t stride[IMAGE_MAX_SPATIAL], pad[IMAGE_MAX_SPATIAL], blocks[IMAGE_MAX_SPATIAL];
    int64_t block_size, positions; /* products of block and blocks */
} col2im_geom;

static tci_status col2im_plan(const ir_node *node, const tci_tensor *const *in, col2im_geom *g,
                              bool *known) {
    const col2im_params *p = node->params;
    int n_image, n_block;
    bool image_known, block_known;
    TRY_STATUS(read_int_vector(node, in[1], 1, "image_shape", IMAGE_MAX_SPATIAL, g->image,
                               &n_image, &image_known));
    TRY_STATUS(read_int_vector(node, in[2], 2, "block_shape", IMAGE_MAX_SPATIAL, g->block,
                               &n_block, &block_known));
    *known = image_known && block_known;
    g->k = n_image >= 0 ? n_image : n_block;
    if (n_image >= 0 && n_block >= 0 && n_image != n_block)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "image_shape has %d entries but block_shape %d", n_image, n_block);
    if (g->k == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "image_shape is empty");
    if (g->k < 0) return TCI_OK;
    struct {
        const char *name;
        const int64_t *v;
        size_t n, want;
    } attrs[3] = {{"dilations", p->dilations, p->num_dilations, (size_t)g->k},
                  {"pads", p->pads, p->num_pads, 2 * (size_t)g->k},
                  {"strides", p->strides, p->num_strides, (size_t)g->k}};
    for (int a = 0; a < 3; a++)
        if (attrs[a].v && attrs[a].n != attrs[a].want)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "%s has %zu entries; expected %zu for %d spatial axes",
                                 attrs[a].name, attrs[a].n, attrs[a].want, g->k);
    if (!*known) return TCI_OK;
    g->block_size = g->positions = 1;
    for (int d = 0; d < g->k; d++) {
        if (g->image[d] < 1 || g->block[d] < 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "image_shape[%d] %lld and block_shape[%d] %lld must be positive",
                                 d, (long long)g->image[d], d, (long long)g->block[d]);
        g->dilation[d] = p->dilations ? p->dilations[d] : 1;
        g->stride[d] = p->strides ? p->strides[d] : 1;
        g->pad[d] = p->pads ? p->pads[d] : 0;
        int64_t padded = g->image[d] + g->pad[d] + (p->pads ? p->pads[d + g->k] : 0);
        int64_t extent = g->dilation[d] * (g->block[d] - 1) + 1;
        if (padded < extent)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "block extent %lld is larger than the padded image %lld on "
                                 "spatial axis %d",
                                 (long long)extent, (long long)padded, d);
        g->blocks[d] = (padded - extent) / g->stride[d] + 1;
        g->block_size *= g->block[d];
        g->positions *= g->blocks[d];
    }
    const tci_tensor *x = in[0];
    if (x->rank == 3 && x->dims[1] >= 0 && x->dims[1] % g->block_size != 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input dim 1 (%lld) is not a multiple of the block size %lld",
                             (long long)x->dims[1], (long long)g->block_size);
    if (x->rank == 3 && x->dims[2] >= 0 && x->dims[2] != g->positions)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input dim 2 is %lld; the blocks fit at %lld positions",
                             (long long)x->dims[2], (long long)g->positions);
    return TCI_OK;
}

static tci_status col2im_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    if (x->rank >= 0 && x->rank != 3)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input must be 3-D (N, C x block size, positions), got rank %d",
                             x->rank);
    col2im_geom g;
    bool known;
    TRY_STATUS(col2im_plan(node, in, &g, &known));
    tci_tensor *y = out[0];
    op_set_unknown(y, x->dtype);
    if (g.k < 0) return TCI_OK;
    y->rank = 2 + g.k;
    y->dims[0] = x->rank == 3 ? x->dims[0] : -1;
    y->dims[1] = x->rank == 3 && x->dims[1] >= 0 && known ? x->dims[1] / g.block_size : -1;
    for (int d = 0; d < g.k; d++) y->dims[2 + d] = in[1]->data ? g.image[d] : -1;
    return TCI_OK;
}

static tci_status col2im_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const tci_tensor *x = in[0];
    col2im_geom g;
    bool known;
    TRY_STATUS(col2im_plan(node, in, &g, &known));
    int64_t planes = x->dims[0] * (x->dims[1] / g.block_size), image_size = 1;
    for (int d = 0; d < g.k; d++) image_size *= g.image[d];
    const float *col = x->data;
    float *img = out[0]->data;
    memset(img, 0, (size_t)(planes * image_size) * sizeof *img);
    int64_t image_strides[IMAGE_MAX_SPATIAL];
    op_strides(g.k, g.image, image_strides);
    /* column row (plane, block offset), column l (block position): both odometers */
    for (int64_t plane = 0; plane < planes; plane++) {
        float *dst = img + plane * image_size;
        int64_t off[IMAGE_MAX_SPATIAL] = {0};
        for (int64_t b = 0; b < g.block_size; b++) {
            const float *src = col + (plane * g.block_size + b) * g.positions;
            int64_t pos[IMAGE_MAX_SPATIAL] = {0};
            for (int64_t l = 0; l < g.positions; l++) {
                int64_t at = 0;
                bool inside = true;
                for (int d = 0; d < g.k; d++) {
                    int64_t i = pos[d] * g.stride[d] - g.pad[d] + off[d] * g.dilation[d];
                    if (i < 0 || i >= g.image[d]) inside = false;
                    at += i * image_strides[d];
                }
                if (inside) dst[at] += src[l];
                for (int d = g.k - 1; d >= 0 && ++pos[d] == g.blocks[d]; d--) pos[d] = 0;
            }
            for (int d = g.k - 1; d >= 0 && ++off[d] == g.block[d]; d--) off[d] = 0;
        }
    }
    return TCI_OK;
}

/* ---- descriptors ---- */

OP_DESC(crop_pad_desc, "CenterCropPad", OP_VERSIONS(18), crop_pad_parse, crop_pad_infer,
        crop_pad_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(col2im_desc, "Col2Im", OP_VERSIONS(18), col2im_parse, col2im_infer, col2im_forward, 0,
        NULL, NULL, BINARY_NONE);

const op_desc *const layer_image_ops[] = {&crop_pad_desc, &col2im_desc, NULL};
