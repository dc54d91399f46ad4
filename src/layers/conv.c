/* Conv and ConvTranspose over any number of spatial dims: shared attribute parsing and output
 * geometry, then im2col + sgemm (Conv) or sgemm + col2im (ConvTranspose) per image and group. */
#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"
#include "layers/window.h"

/* Attribute values above this are refused, so the geometry arithmetic below cannot overflow
 * int64 (kernel * dilation and size * stride stay below 2^56). */
#define CONV_MAX_ATTR (INT64_C(1) << 24)
#define CONV_MAX_DIM ((int64_t)INT32_MAX)

typedef enum conv_auto_pad {
    CONV_PAD_NOTSET,
    CONV_PAD_SAME_UPPER,
    CONV_PAD_SAME_LOWER,
    CONV_PAD_VALID,
} conv_auto_pad;

/* An absent list attribute has count 0 and takes its default per axis. */
typedef struct conv_list {
    const int64_t *values;
    size_t count;
} conv_list;

typedef struct conv_params {
    bool transpose;
    conv_auto_pad auto_pad;
    int64_t group;
    int64_t offset_group; /* DeformConv; 1 for the others */
    int spatial; /* spatial rank fixed by the list attributes; -1 when none is given */
    conv_list kernel_shape, pads, strides, dilations, output_padding, output_shape;
} conv_params;


static const char *const auto_pad_names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};

static int64_t list_at(const conv_list *l, size_t i, int64_t def) {
    return l->count ? l->values[i] : def;
}

/* ---- parse ---- */

static tci_status parse_list(ir_node *node, mem_arena *arena, const char *name, size_t per_axis,
                             int64_t min, int64_t max, conv_params *p, conv_list *out) {
    const int64_t *values;
    size_t count;
    TRY_STATUS(ir_attr_ints(node, name, &values, &count));
    out->values = NULL;
    out->count = 0;
    if (!count && ir_node_attr(node, name))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute '%s' is given with no values (leave it out for the "
                             "default)",
                             name);
    if (!count) return TCI_OK;
    if (count % per_axis)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute '%s' has %zu values, expected an even count (begin and "
                             "end per spatial dim)",
                             name, count);
    int spatial = (int)(count / per_axis);
    if (count / per_axis > LAYER_MAX_SPATIAL)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute '%s' has %zu values: more than %d spatial dims are not "
                             "supported",
                             name, count, LAYER_MAX_SPATIAL);
    if (p->spatial >= 0 && p->spatial != spatial)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute '%s' has %zu values, but other attributes give %d spatial "
                             "dims",
                             name, count, p->spatial);
    p->spatial = spatial;
    for (size_t i = 0; i < count; i++)
        if (values[i] < min || values[i] > max)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute '%s' value %lld at index %zu is out of range "
                                 "[%lld, %lld]",
                                 name, (long long)values[i], i, (long long)min, (long long)max);
    out->values = arena_memdup(arena, values, count * sizeof *values);
    if (!out->values)
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory parsing attributes");
    out->count = count;
    return TCI_OK;
}

/* deform: DeformConv's attributes, Conv's less auto_pad and with offset_group */
static tci_status conv_parse_attrs(ir_node *node, mem_arena *arena, bool transpose, bool deform) {
    static const char *const conv_attrs[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                             "pads",     "strides",   NULL};
    static const char *const deform_attrs[] = {"dilations", "group",   "kernel_shape",
                                               "offset_group", "pads", "strides", NULL};
    static const char *const transpose_attrs[] = {"auto_pad",       "dilations",    "group",
                                                  "kernel_shape",   "pads",         "strides",
                                                  "output_padding", "output_shape", NULL};
    TRY_STATUS(ir_check_attrs(node, transpose ? transpose_attrs
                                    : deform  ? deform_attrs
                                              : conv_attrs));

    conv_params *p = arena_alloc(arena, sizeof *p);
    if (!p) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory parsing attributes");
    p->transpose = transpose;
    p->spatial = -1;

    const char *auto_pad;
    TRY_STATUS(ir_attr_string(node, "auto_pad", "NOTSET", &auto_pad));
    int mode = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(auto_pad, auto_pad_names[i]) == 0) mode = i;
    if (mode < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                             auto_pad);
    p->auto_pad = (conv_auto_pad)mode;

    TRY_STATUS(ir_attr_int(node, "group", 1, &p->group));
    if (p->group < 1 || p->group > CONV_MAX_DIM)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "group %lld must be >= 1",
                             (long long)p->group);
    TRY_STATUS(ir_attr_int(node, "offset_group", 1, &p->offset_group));
    if (p->offset_group < 1 || p->offset_group > CONV_MAX_DIM)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "offset_group %lld must be >= 1",
                             (long long)p->offset_group);

    TRY_STATUS(parse_list(node, arena, "kernel_shape", 1, 1, CONV_MAX_ATTR, p, &p->kernel_shape));
    TRY_STATUS(parse_list(node, arena, "strides", 1, 1, CONV_MAX_ATTR, p, &p->strides));
    TRY_STATUS(parse_list(node, arena, "dilations", 1, 1, CONV_MAX_ATTR, p, &p->dilations));
    TRY_STATUS(parse_list(node, arena, "pads", 2, 0, CONV_MAX_ATTR, p, &p->pads));
    if (transpose) {
        TRY_STATUS(
            parse_list(node, arena, "output_padding", 1, 0, CONV_MAX_ATTR, p, &p->output_padding));
        TRY_STATUS(parse_list(node, arena, "output_shape", 1, 1, CONV_MAX_DIM, p, &p->output_shape));
    }
    /* the spec forbids both; ONNX Runtime refuses the model, so silently picking one would
     * produce outputs nobody else agrees with */
    if (p->pads.count && p->auto_pad != CONV_PAD_NOTSET)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'pads' cannot be used together with auto_pad %s",
                             auto_pad_names[p->auto_pad]);
    for (size_t i = 0; i < p->output_padding.count; i++) {
        int64_t s = list_at(&p->strides, i, 1), d = list_at(&p->dilations, i, 1);
        int64_t limit = s > d ? s : d;
        if (p->output_padding.values[i] >= limit)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "output_padding[%zu] = %lld must be less than the stride or "
                                 "dilation (%lld)",
                                 i, (long long)p->output_padding.values[i], (long long)limit);
    }
    node->params = p;
    return TCI_OK;
}

static tci_status conv_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 3, 1, 1));
    return conv_parse_attrs(node, arena, false, false);
}

static tci_status conv_transpose_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 3, 1, 1));
    return conv_parse_attrs(node, arena, true, false);
}

tci_status layer_conv_parse_attrs(ir_node *node, mem_arena *arena) {
    return conv_parse_attrs(node, arena, false, false);
}

tci_status layer_deform_conv_parse_attrs(ir_node *node, mem_arena *arena) {
    return conv_parse_attrs(node, arena, false, true);
}

/* ---- geometry ---- */

static tci_status check_spatial(const ir_node *node, const conv_params *p, const char *what,
                                int spatial, int *io_spatial) {
    if (p->spatial >= 0 && p->spatial != spatial)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s has %d spatial dims but the attributes give %d", what, spatial,
                             p->spatial);
    if (*io_spatial >= 0 && *io_spatial != spatial)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "X has %d spatial dims but W has %d",
                             *io_spatial, spatial);
    *io_spatial = spatial;
    return TCI_OK;
}

static tci_status check_rank(const ir_node *node, const conv_params *p, const tci_tensor *t,
                             const char *name, int *io_spatial) {
    if (t->rank < 0) return TCI_OK;
    if (t->rank < 3)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s has rank %d, expected at least 3 (N, C and spatial dims)", name,
                             t->rank);
    for (int i = 2; i < t->rank; i++)
        if (t->dims[i] > CONV_MAX_DIM)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED, "%s spatial dim %d (%lld) is too large",
                                 name, i - 2, (long long)t->dims[i]);
    return check_spatial(node, p, name, t->rank - 2, io_spatial);
}

/* Conv: Y = ceil(X / stride) for SAME_*, else the kernel slides over the padded input. */
static tci_status conv_axis(const ir_node *node, const conv_params *p, layer_window *g, int i) {
    int64_t in = g->in[i], k = g->kernel[i], s = g->stride[i], d = g->dilation[i];
    g->out[i] = g->pad_begin[i] = g->pad_end[i] = -1;
    if (p->auto_pad == CONV_PAD_SAME_UPPER || p->auto_pad == CONV_PAD_SAME_LOWER) {
        if (in < 0) return TCI_OK;
        g->out[i] = (in + s - 1) / s;
        if (k < 0) return TCI_OK;
        int64_t need = (g->out[i] - 1) * s + (k - 1) * d + 1 - in;
        if (need < 0) need = 0;
        g->pad_begin[i] = p->auto_pad == CONV_PAD_SAME_UPPER ? need / 2 : (need + 1) / 2;
        g->pad_end[i] = need - g->pad_begin[i];
        return TCI_OK;
    }
    bool explicit_pads = p->auto_pad == CONV_PAD_NOTSET;
    g->pad_begin[i] = explicit_pads ? list_at(&p->pads, (size_t)i, 0) : 0;
    g->pad_end[i] = explicit_pads ? list_at(&p->pads, (size_t)(i + g->spatial), 0) : 0;
    if (in < 0 || k < 0) return TCI_OK;
    int64_t padded = in + g->pad_begin[i] + g->pad_end[i], extent = (k - 1) * d + 1;
    if (padded < extent)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "spatial dim %d: the kernel (%lld, %lld with dilation) is larger "
                             "than the padded input (%lld)",
                             i, (long long)k, (long long)extent, (long long)padded);
    g->out[i] = (padded - extent) / s + 1;
    return TCI_OK;
}

/* ConvTranspose, following the spec's formulas: an explicit output_shape or SAME_* fixes the
 * output size and the padding follows from it; otherwise the pads fix the output size. */
static tci_status conv_transpose_axis(const ir_node *node, const conv_params *p, layer_window *g,
                                      int i) {
    int64_t in = g->in[i], k = g->kernel[i], s = g->stride[i], d = g->dilation[i];
    int64_t adj = list_at(&p->output_padding, (size_t)i, 0);
    g->out[i] = g->pad_begin[i] = g->pad_end[i] = -1;
    bool same = p->auto_pad == CONV_PAD_SAME_UPPER || p->auto_pad == CONV_PAD_SAME_LOWER;
    if (p->output_shape.count || same) {
        if (p->output_shape.count)
            g->out[i] = p->output_shape.values[i];
        else if (in >= 0)
            g->out[i] = in * s;
        if (in < 0 || k < 0 || g->out[i] < 0) return TCI_OK;
        int64_t total = s * (in - 1) + adj + (k - 1) * d + 1 - g->out[i];
        /* an output larger than the full result is zero-extended at the end (as in the ONNX
         * backend test convtranspose_output_shape and ONNX Runtime), not shifted. For SAME_*
         * ONNX Runtime shrinks such an output to the full result; the spec says X * stride. */
        if (total < 0) total = 0;
        g->pad_begin[i] = p->auto_pad == CONV_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        g->pad_end[i] = total - g->pad_begin[i];
        return TCI_OK;
    }
    bool explicit_pads = p->auto_pad == CONV_PAD_NOTSET;
    g->pad_begin[i] = explicit_pads ? list_at(&p->pads, (size_t)i, 0) : 0;
    g->pad_end[i] = explicit_pads ? list_at(&p->pads, (size_t)(i + g->spatial), 0) : 0;
    if (in < 0 || k < 0) return TCI_OK;
    int64_t out = s * (in - 1) + adj + (k - 1) * d + 1 - g->pad_begin[i] - g->pad_end[i];
    if (out < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "spatial dim %d: the output size would be %lld (pads larger than "
                             "the result)",
                             i, (long long)out);
    g->out[i] = out;
    return TCI_OK;
}

/* Everything infer and cpu_forward need from the inputs' shapes, with every check the known
 * values allow: -1 wherever the shapes known so far do not tell. */
static tci_status conv_geometry_of(const ir_node *node, const tci_tensor *x, const tci_tensor *w,
                                   const tci_tensor *b, layer_window *g) {
    const conv_params *p = node->params;
    memset(g, 0, sizeof *g);
    g->group = p->group;
    g->offset_group = p->offset_group;
    g->spatial = p->spatial;
    TRY_STATUS(check_rank(node, p, x, "X", &g->spatial));
    TRY_STATUS(check_rank(node, p, w, "W", &g->spatial));
    if (b && b->rank >= 0 && b->rank != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "B has rank %d, expected 1", b->rank);

    int64_t group = p->group;
    g->batch = x->rank >= 0 ? x->dims[0] : -1;
    g->in_channels = x->rank >= 0 ? x->dims[1] : -1;
    int64_t w0 = w->rank >= 0 ? w->dims[0] : -1, w1 = w->rank >= 0 ? w->dims[1] : -1;
    int64_t c = g->in_channels;
    if (c >= 0 && c % group)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "group %lld does not divide X's %lld channels", (long long)group,
                             (long long)c);
    if (!p->transpose) {
        /* W is (M, C/group, kernel...) */
        if (w0 >= 0 && w0 % group)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "group %lld does not divide W's %lld output channels",
                                 (long long)group, (long long)w0);
        if (c >= 0 && w1 >= 0 && w1 != c / group)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "W has %lld channels per group, expected X's %lld channels / "
                                 "group %lld = %lld",
                                 (long long)w1, (long long)c, (long long)group,
                                 (long long)(c / group));
        g->out_channels = w0;
    } else {
        /* W is (C, M/group, kernel...) */
        if (c >= 0 && w0 >= 0 && w0 != c)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "W has %lld input channels (dim 0), expected X's %lld",
                                 (long long)w0, (long long)c);
        g->out_channels = w1 >= 0 ? w1 * group : -1;
    }
    if (b && b->rank == 1 && b->dims[0] >= 0) {
        if (g->out_channels >= 0 && b->dims[0] != g->out_channels)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "B has %lld values, expected one per output channel (%lld)",
                                 (long long)b->dims[0], (long long)g->out_channels);
        g->out_channels = b->dims[0];
    }
    if (g->spatial < 0) return TCI_OK;

    for (int i = 0; i < g->spatial; i++) {
        int64_t from_w = w->rank >= 0 ? w->dims[i + 2] : -1;
        if (from_w == 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "W's spatial dim %d is 0", i);
        int64_t k = list_at(&p->kernel_shape, (size_t)i, from_w);
        if (from_w >= 0 && k != from_w)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "kernel_shape[%d] = %lld does not match W's spatial dim %lld", i,
                                 (long long)k, (long long)from_w);
        g->kernel[i] = k;
        g->in[i] = x->rank >= 0 ? x->dims[i + 2] : -1;
        g->stride[i] = list_at(&p->strides, (size_t)i, 1);
        g->dilation[i] = list_at(&p->dilations, (size_t)i, 1);
        TRY_STATUS(p->transpose ? conv_transpose_axis(node, p, g, i) : conv_axis(node, p, g, i));
    }
    return TCI_OK;
}

static tci_status conv_geometry(const ir_node *node, const tci_tensor *const *in, layer_window *g) {
    for (int i = 0; i < node->num_inputs; i++)
        if (in[i]) TRY_STATUS(op_check_dtype(node, in[i], i, op_float_types));
    return conv_geometry_of(node, in[0], in[1], node->num_inputs > 2 ? in[2] : NULL, g);
}

tci_status layer_conv_window(const ir_node *node, const tci_tensor *const *in,
                             layer_window *out_window) {
    return conv_geometry(node, in, out_window);
}

tci_status layer_conv_window_of(const ir_node *node, const tci_tensor *x, const tci_tensor *w,
                                layer_window *out_window) {
    return conv_geometry_of(node, x, w, NULL, out_window);
}

tci_status layer_conv_output(const layer_window *g, tci_tensor *y) {
    y->dtype = TCI_DTYPE_FLOAT;
    y->rank = g->spatial < 0 ? -1 : g->spatial + 2;
    if (y->rank < 0) return TCI_OK;
    y->dims[0] = g->batch;
    y->dims[1] = g->out_channels;
    for (int i = 0; i < g->spatial; i++) y->dims[i + 2] = g->out[i];
    int64_t count;
    return ir_count_elements(y->rank, y->dims, &count);
}

static tci_status conv_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    layer_window g;
    TRY_STATUS(conv_geometry(node, in, &g));
    return layer_conv_output(&g, out[0]);
}

/* ---- forward ---- */

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* Moves values between an image (channels x image dims) and its column matrix (channels x
 * kernel rows, one column per grid position): gathers for im2col, scatter-adds for col2im. Grid
 * position q and kernel offset t meet image coordinate q * stride - pad_begin + t * dilation;
 * for Conv the grid is Y and the image X, for ConvTranspose the grid is X and the image Y. */
static void conv_columns(const layer_window *g, const int64_t *grid, const int64_t *image,
                         int64_t channels, float *img, float *col, bool gather) {
    int n = g->spatial, last = n - 1;
    int64_t kernel_size = 1, grid_size = 1, image_size = 1;
    for (int i = 0; i < n; i++) {
        kernel_size *= g->kernel[i];
        grid_size *= grid[i];
        image_size *= image[i];
    }
    int64_t inner = grid[last];
    if (grid_size == 0) return;
    int64_t outer = grid_size / inner;
    int64_t s_last = g->stride[last];
    for (int64_t c = 0; c < channels; c++) {
        float *im = img + c * image_size;
        for (int64_t t = 0; t < kernel_size; t++) {
            int64_t kpos[LAYER_MAX_SPATIAL], rest = t;
            for (int i = last; i >= 0; i--) {
                kpos[i] = rest % g->kernel[i];
                rest /= g->kernel[i];
            }
            float *row = col + (c * kernel_size + t) * grid_size;
            /* along the last dim, positions [lo, hi) land inside the image */
            int64_t offset = kpos[last] * g->dilation[last] - g->pad_begin[last];
            int64_t lo = offset >= 0 ? 0 : ceil_div(-offset, s_last);
            int64_t hi = ceil_div(image[last] - offset, s_last);
            if (lo > inner) lo = inner;
            if (hi > inner) hi = inner;
            if (hi < lo) hi = lo;
            int64_t qpos[LAYER_MAX_SPATIAL] = {0};
            for (int64_t o = 0; o < outer; o++) {
                bool inside = true;
                int64_t base = 0;
                for (int i = 0; i < last; i++) {
                    int64_t pos =
                        qpos[i] * g->stride[i] - g->pad_begin[i] + kpos[i] * g->dilation[i];
                    if (pos < 0 || pos >= image[i]) inside = false;
                    base = base * image[i] + pos;
                }
                base = base * image[last] + offset;
                float *r = row + o * inner;
                if (gather) {
                    if (!inside) {
                        memset(r, 0, (size_t)inner * sizeof *r);
                    } else {
                        for (int64_t q = 0; q < lo; q++) r[q] = 0;
                        for (int64_t q = lo; q < hi; q++) r[q] = im[base + q * s_last];
                        for (int64_t q = hi; q < inner; q++) r[q] = 0;
                    }
                } else if (inside) {
                    for (int64_t q = lo; q < hi; q++) im[base + q * s_last] += r[q];
                }
                for (int i = last - 1; i >= 0; i--) {
                    if (++qpos[i] < grid[i]) break;
                    qpos[i] = 0;
                }
            }
        }
    }
}

static void fill_bias(float *y, const tci_tensor *b, int64_t batch, int64_t channels,
                      int64_t size) {
    const float *bias = b ? b->data : NULL;
    for (int64_t n = 0; n < batch; n++)
        for (int64_t m = 0; m < channels; m++) {
            float *dst = y + (n * channels + m) * size;
            float v = bias ? bias[m] : 0.0f;
            for (int64_t i = 0; i < size; i++) dst[i] = v;
        }
}

static tci_status conv_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    layer_window g;
    TRY_STATUS(conv_geometry(node, in, &g));
    const conv_params *p = node->params;
    const tci_tensor *b = node->num_inputs > 2 ? in[2] : NULL;
    float *x = in[0]->data;
    const float *w = in[1]->data;
    float *y = out[0]->data;
    int64_t kernel_size = 1, in_size = 1, out_size = 1;
    bool direct = true; /* a 1x1 kernel, stride 1, no padding: X is its own column matrix */
    for (int i = 0; i < g.spatial; i++) {
        kernel_size *= g.kernel[i];
        in_size *= g.in[i];
        out_size *= g.out[i];
        if (g.kernel[i] != 1 || g.stride[i] != 1 || g.pad_begin[i] || g.pad_end[i]) direct = false;
    }
    fill_bias(y, b, g.batch, g.out_channels, out_size);
    int64_t group_in = g.in_channels / p->group, group_out = g.out_channels / p->group;
    int64_t depth = group_in * kernel_size;
    if (g.batch == 0 || group_out == 0 || out_size == 0 || depth == 0) return TCI_OK;
    TRY_STATUS(op_check_blas_dims(node, group_out, out_size, depth));
    float *col = NULL;
    if (!direct) {
        col = malloc((size_t)depth * (size_t)out_size * sizeof *col);
        if (!col)
            return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY,
                                 "cannot allocate the %lld x %lld column matrix", (long long)depth,
                                 (long long)out_size);
    }
    for (int64_t n = 0; n < g.batch; n++)
        for (int64_t grp = 0; grp < p->group; grp++) {
            float *xg = x + (n * g.in_channels + grp * group_in) * in_size;
            const float *cols = xg;
            if (!direct) {
                conv_columns(&g, g.out, g.in, group_in, xg, col, true);
                cols = col;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)group_out, (int)out_size,
                        (int)depth, 1.0f, w + grp * group_out * depth, (int)depth, cols,
                        (int)out_size, 1.0f, y + (n * g.out_channels + grp * group_out) * out_size,
                        (int)out_size);
        }
    free(col);
    return TCI_OK;
}

static tci_status conv_transpose_forward(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    layer_window g;
    TRY_STATUS(conv_geometry(node, in, &g));
    const conv_params *p = node->params;
    const tci_tensor *b = node->num_inputs > 2 ? in[2] : NULL;
    const float *x = in[0]->data, *w = in[1]->data;
    float *y = out[0]->data;
    int64_t kernel_size = 1, in_size = 1, out_size = 1;
    bool direct = true; /* the column matrix is Y itself: 1x1 kernel, stride 1, same size */
    for (int i = 0; i < g.spatial; i++) {
        kernel_size *= g.kernel[i];
        in_size *= g.in[i];
        out_size *= g.out[i];
        if (g.kernel[i] != 1 || g.stride[i] != 1 || g.pad_begin[i] || g.out[i] != g.in[i])
            direct = false;
    }
    fill_bias(y, b, g.batch, g.out_channels, out_size);
    int64_t group_in = g.in_channels / p->group, group_out = g.out_channels / p->group;
    int64_t rows = group_out * kernel_size;
    if (g.batch == 0 || group_in == 0 || in_size == 0 || rows == 0 || out_size == 0) return TCI_OK;
    TRY_STATUS(op_check_blas_dims(node, rows, in_size, group_in));
    float *col = NULL;
    if (!direct) {
        col = malloc((size_t)rows * (size_t)in_size * sizeof *col);
        if (!col)
            return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY,
                                 "cannot allocate the %lld x %lld column matrix", (long long)rows,
                                 (long long)in_size);
    }
    for (int64_t n = 0; n < g.batch; n++)
        for (int64_t grp = 0; grp < p->group; grp++) {
            float *yg = y + (n * g.out_channels + grp * group_out) * out_size;
            /* columns = W_g^T X_g, with W_g (C/group) x (M/group * kernel) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rows, (int)in_size,
                        (int)group_in, 1.0f, w + grp * group_in * rows, (int)rows,
                        x + (n * g.in_channels + grp * group_in) * in_size, (int)in_size,
                        direct ? 1.0f : 0.0f, direct ? yg : col, (int)in_size);
            if (!direct) conv_columns(&g, g.in, g.out, group_out, yg, col, false);
        }
    free(col);
    return TCI_OK;
}

/* ---- GPU lowering ---- */

void layer_window_geom(const layer_window *win, conv_geom *out) {
    out->n = win->batch;
    out->c = win->in_channels;
    out->h = win->in[0];
    out->w = win->in[1];
    out->k = win->out_channels;
    out->kernel_h = win->kernel[0];
    out->kernel_w = win->kernel[1];
    out->out_h = win->out[0];
    out->out_w = win->out[1];
    out->stride_h = win->stride[0];
    out->stride_w = win->stride[1];
    out->dilation_h = win->dilation[0];
    out->dilation_w = win->dilation[1];
    out->pad_top = win->pad_begin[0];
    out->pad_left = win->pad_begin[1];
    out->pad_bottom = win->pad_end[0];
    out->pad_right = win->pad_end[1];
    out->groups = win->group;
}

/* The checks Conv and ConvTranspose share (1-D or 2-D, static input, constant float weights and
 * bias) and their window, a 1-D one as the 2-D window over N x C x 1 x L it runs as (a unit
 * first spatial axis: kernel, stride and dilation 1, no padding); `what` names the op in the
 * refusal. */
static tci_status conv_window(const ir_node *node, const char *what, layer_window *win) {
    const ir_tensor *x = node->inputs[0], *w = node->inputs[1];
    const ir_tensor *bias = node->num_inputs > 2 ? node->inputs[2] : NULL;
    TRY_STATUS(lower_require_known(node, x));
    if (x->rank != 3 && x->rank != 4)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "only 1-D and 2-D %s run on the GPU",
                             what);
    if (!w->data || w->dtype != TCI_DTYPE_FLOAT || (bias && !bias->data))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the GPU path needs constant float weights and bias");
    tci_tensor vx, vw, vb;
    ir_tensor_view(x, &vx);
    ir_tensor_view(w, &vw);
    if (bias) ir_tensor_view(bias, &vb);
    const tci_tensor *views[3] = {&vx, &vw, bias ? &vb : NULL};
    TRY_STATUS(layer_conv_window(node, views, win));
    if (win->spatial == 1) {
        int64_t *axes[] = {win->in,       win->out,       win->kernel, win->stride,
                           win->dilation, win->pad_begin, win->pad_end};
        for (size_t i = 0; i < sizeof axes / sizeof axes[0]; i++) axes[i][1] = axes[i][0];
        win->in[0] = win->out[0] = win->kernel[0] = win->stride[0] = win->dilation[0] = 1;
        win->pad_begin[0] = win->pad_end[0] = 0;
        win->spatial = 2;
    }
    return TCI_OK;
}

/* A 1-D convolution's N x C x L tensor t as the NHWC8 N x C x 1 x L its 2-D step reads: t dense
 * (in the node's precision), then a layout conversion into a temporary. */
static tci_status conv1d_input(plan_builder *b, const ir_node *node, const ir_tensor *t,
                               int *out_index) {
    int dense;
    TRY_STATUS(lower_input(b, node, t, PLAN_LAYOUT_DENSE, &dense));
    const plan_tensor *pt = lower_tensor(b, dense);
    int64_t dims[4] = {pt->dims[0], pt->dims[1], 1, pt->dims[2]};
    char name[256];
    snprintf(name, sizeof name, "%s:as-2d:nhwc8", t->name);
    TRY_STATUS(lower_temporary(b, name, pt->dtype, PLAN_LAYOUT_NHWC8, 4, dims, out_index));
    return lower_layout_step(b, node, dense, *out_index);
}

/* The output of a convolution step: node output t itself (2-D), or (1-D) an NHWC8
 * N x K x 1 x L temporary the step writes; conv1d_output then converts it into t. */
static tci_status conv_step_output(plan_builder *b, const ir_node *node, const ir_tensor *t,
                                   int *out_index) {
    if (t->rank != 3) return lower_output(b, node, t, out_index);
    int64_t dims[4] = {t->dims[0], t->dims[1], 1, t->dims[2]};
    char name[256];
    snprintf(name, sizeof name, "%s:as-2d:nhwc8", t->name);
    return lower_temporary(b, name, lower_float_dtype(b), PLAN_LAYOUT_NHWC8, 4, dims, out_index);
}

/* After the step of a 1-D convolution: its NHWC8 result `step_out` into node output t (dense). */
static tci_status conv1d_output(plan_builder *b, const ir_node *node, const ir_tensor *t,
                                int step_out) {
    if (t->rank != 3) return TCI_OK;
    int yt;
    TRY_STATUS(lower_output(b, node, t, &yt));
    return lower_layout_step(b, node, step_out, yt);
}

/* The NHWC8 plan tensor a convolution step reads for t (X, or the residual of an epilogue). */
static tci_status conv_nhwc_input(plan_builder *b, const ir_node *node, const ir_tensor *t,
                                  int *out_index) {
    if (t->rank == 3) return conv1d_input(b, node, t, out_index);
    return lower_input(b, node, t, PLAN_LAYOUT_NHWC8, out_index);
}

/* How many consecutive groups of cg input and kg output channels one kernel group takes: the
 * fewest (a divisor of group) that make both counts multiples of 8, what the NHWC8 kernels and
 * cuDNN's tensor-op paths need; all of them (one dense group) when no smaller count does. */
static int64_t conv_group_merge(int64_t group, int64_t cg, int64_t kg) {
    for (int64_t m = 1; m < group; m++)
        if (group % m == 0 && (m * cg) % 8 == 0 && (m * kg) % 8 == 0) return m;
    return group;
}

/* Weights (K, cg, rs) of `group` groups as (K, merge * cg, rs) of group / merge groups: each
 * output channel's weights sit at its group's place within the merged group, zeros elsewhere
 * (block-diagonal). Caller frees; NULL when out of memory. */
static float *conv_merge_weights(const float *w, int64_t k, int64_t group, int64_t cg, int64_t rs,
                                 int64_t merge) {
    int64_t kg = k / group, row = merge * cg * rs;
    float *out = calloc((size_t)(k * row > 0 ? k * row : 1), sizeof *out);
    if (!out) return NULL;
    for (int64_t o = 0; o < k; o++) {
        int64_t slot = (o / kg) % merge; /* the group's place within its merged group */
        memcpy(out + o * row + slot * cg * rs, w + o * cg * rs, (size_t)(cg * rs) * sizeof *out);
    }
    return out;
}

/* Conv (+BatchNormalization) (+Add) (+activation) as one step. */
static tci_status conv_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *x = node->inputs[0], *w = node->inputs[1];
    const ir_tensor *bias = node->num_inputs > 2 ? node->inputs[2] : NULL;
    layer_window win;
    TRY_STATUS(conv_window(node, "convolutions", &win));
    int64_t k = win.out_channels, c = win.in_channels, group = win.group;
    int64_t r = win.kernel[0], s = win.kernel[1], cg = c / group;
    bool depthwise = group > 1 && group == c && k == c;
    /* the kernels take groups of multiples of 8 channels in and out; smaller groups are merged
     * `merge` at a time into block-diagonal ones */
    int64_t merge = depthwise ? 1 : conv_group_merge(group, cg, k / group);
    /* the fusion passes' epilogue: folded weights and bias, residual, activation */
    ir_epilogue none;
    const ir_epilogue *e = lower_epilogue(node, &none);
    const ir_tensor *out = e->output;
    act_params act = e->act;
    int residual = -1, wt = -1, bt = -1, xt = -1, yt = -1;
    if (e->residual) TRY_STATUS(conv_nhwc_input(b, e->residual_add, e->residual, &residual));
    /* fp32 weights (K, C/group, R, S) and bias (K); the executor packs them into the layout the
     * convolution library wants */
    int64_t wdims[4] = {k, cg * merge, r, s}, bdims[1] = {k};
    const float *wsrc = lower_const_floats(e->weights ? e->weights : w);
    float *merged = NULL;
    if (merge > 1) {
        merged = conv_merge_weights(wsrc, k, group, cg, r * s, merge);
        if (!merged) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        wsrc = merged;
    }
    tci_status wst = lower_host_constant(b, w->name, wsrc, 4, wdims, TCI_DTYPE_FLOAT,
                                         PLAN_LAYOUT_DENSE, &wt);
    free(merged);
    TRY_STATUS(wst);
    const ir_tensor *bsrc = e->bias ? e->bias : bias;
    float *shift = calloc((size_t)k, sizeof(float));
    if (!shift) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; bsrc && i < k; i++) shift[i] = lower_const_floats(bsrc)[i];
    tci_status st = lower_host_constant(b, "bias", shift, 1, bdims, TCI_DTYPE_FLOAT,
                                        PLAN_LAYOUT_DENSE, &bt);
    free(shift);
    TRY_STATUS(st);
    TRY_STATUS(conv_nhwc_input(b, node, x, &xt));
    TRY_STATUS(conv_step_output(b, node, out, &yt));
    plan_step *step;
    TRY_STATUS(lower_step(b, PLAN_STEP_CONV, node, lower_intern(b, e->label), &step));
    plan_conv *pc = &step->u.conv;
    layer_window_geom(&win, &pc->geom);
    pc->geom.groups = group / merge;
    pc->has_bias = true;
    pc->has_residual = residual >= 0;
    pc->fused = step->label;
    /* cuDNN's fused call applies ReLU (or nothing); other activations run after it. The
     * depthwise kernel (cuDNN's NHWC depthwise is far off bandwidth) fuses any of them. */
    pc->depthwise = depthwise;
    if (depthwise || (act_flags(act.kind) & ACT_FUSES_CUDNN)) pc->act = act;
    else pc->post_act = act;
    lower_step_io(step, 4, (int[]){xt, wt, bt, residual}, 1, &yt);
    return conv1d_output(b, node, out, yt);
}

tci_status layer_lower_channel_affine(plan_builder *b, const ir_node *node, const ir_tensor *x,
                                      const float *scale, const float *shift, act_params act,
                                      const ir_tensor *out, const char *label) {
    const int64_t c = x->dims[1], wdims[4] = {c, 1, 1, 1}, bdims[1] = {c};
    int wt = -1, bt = -1, xt = -1, yt = -1;
    TRY_STATUS(lower_host_constant(b, "channel_scale", scale, 4, wdims, TCI_DTYPE_FLOAT,
                                   PLAN_LAYOUT_DENSE, &wt));
    TRY_STATUS(lower_host_constant(b, "channel_shift", shift, 1, bdims, TCI_DTYPE_FLOAT,
                                   PLAN_LAYOUT_DENSE, &bt));
    TRY_STATUS(conv_nhwc_input(b, node, x, &xt));
    TRY_STATUS(conv_step_output(b, node, out, &yt));
    plan_step *step;
    TRY_STATUS(lower_step(b, PLAN_STEP_CONV, node, label, &step));
    plan_conv *pc = &step->u.conv;
    pc->geom = (conv_geom){.n = x->dims[0], .c = c, .h = x->dims[2], .w = x->dims[3], .k = c,
                           .kernel_h = 1, .kernel_w = 1, .out_h = x->dims[2],
                           .out_w = x->dims[3], .stride_h = 1, .stride_w = 1, .dilation_h = 1,
                           .dilation_w = 1, .groups = c};
    pc->has_bias = true;
    pc->fused = step->label;
    pc->depthwise = true;
    pc->act = act;
    lower_step_io(step, 4, (int[]){xt, wt, bt, -1}, 1, &yt);
    return TCI_OK;
}

/* 1-D and 2-D ConvTranspose: cuDNN's backward data; weights stay in ONNX order for the
 * executor to pack, activations follow as an in-place step. */
static tci_status conv_transpose_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *x = node->inputs[0], *w = node->inputs[1];
    const ir_tensor *bias = node->num_inputs > 2 ? node->inputs[2] : NULL;
    layer_window win;
    TRY_STATUS(conv_window(node, "ConvTranspose nodes", &win));
    int64_t k = win.out_channels;
    float *shift = calloc((size_t)k, sizeof(float));
    if (!shift) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; bias && i < k; i++) shift[i] = lower_const_floats(bias)[i];
    int wt = -1, bt = -1, xt = -1, yt = -1;
    /* (C, K/group, R, S); a 1-D one's (C, K/group, S) is the same values with R = 1 */
    int64_t wdims[4] = {w->dims[0], w->dims[1], win.kernel[0], win.kernel[1]};
    tci_status st = lower_host_constant(b, w->name, lower_const_floats(w), 4, wdims,
                                        TCI_DTYPE_FLOAT, PLAN_LAYOUT_DENSE, &wt);
    int64_t bdims[1] = {k};
    if (st == TCI_OK)
        st = lower_host_constant(b, "bias", shift, 1, bdims, TCI_DTYPE_FLOAT, PLAN_LAYOUT_DENSE, &bt);
    free(shift);
    TRY_STATUS(st);
    ir_epilogue none;
    const ir_epilogue *e = lower_epilogue(node, &none);
    const ir_tensor *out = e->output;
    TRY_STATUS(conv_nhwc_input(b, node, x, &xt));
    TRY_STATUS(conv_step_output(b, node, out, &yt));
    plan_step *step;
    TRY_STATUS(lower_step(b, PLAN_STEP_CONV_TRANSPOSE, node, lower_intern(b, e->label), &step));
    plan_conv *pc = &step->u.conv;
    layer_window_geom(&win, &pc->geom);
    pc->has_bias = true;
    pc->post_act = e->act;
    pc->fused = step->label;
    lower_step_io(step, 3, (int[]){xt, wt, bt}, 1, &yt);
    return conv1d_output(b, node, out, yt);
}

/* 22 only added bfloat16, which infer refuses. ConvTranspose-1's text splits an odd padding the
 * other way round from 11; ONNX Runtime follows 11's split at every opset, and so do we. */
static const int conv_versions[] = {1, 11, 22, 0};
static const int conv_transpose_versions[] = {1, 11, 22, 0};

/* Output channel k (output dim 1) of the convolution times scale[k]: its weights (K, C / group,
 * ...) along K and its bias (op_desc.scale_columns; PoolFormer's layer scale after its MLP). */
static tci_status conv_scale_columns(ir_graph *g, ir_node *node, int axis, const float *scale,
                                     int64_t count, bool *done) {
    ir_tensor *w = node->inputs[1], *bias = node->num_inputs > 2 ? node->inputs[2] : NULL;
    *done = false;
    if (axis != 1 || !op_constant_float(w) || w->rank < 3 ||
        (count != 1 && count != w->dims[0]) ||
        (bias && (!op_constant_float(bias) || bias->rank != 1)))
        return TCI_OK;
    ir_tensor *scaled_w = NULL, *scaled_b = NULL;
    TRY_STATUS(op_scaled_copy(g, w, 0, scale, count, &scaled_w));
    if (bias) TRY_STATUS(op_scaled_copy(g, bias, 0, scale, count, &scaled_b));
    node->inputs[1] = scaled_w;
    if (bias) node->inputs[2] = scaled_b;
    *done = true;
    return TCI_OK;
}

static const op_desc conv_desc = {.op_type = "Conv",
                                  .versions = conv_versions,
                                  .parse = conv_parse,
                                  .infer = conv_infer,
                                  .cpu_forward = conv_forward,
                                  .flags = OP_NHWC_INPUT | OP_NHWC_OUTPUT | OP_FOLDS_BATCHNORM |
                                           OP_EPILOGUE_RESIDUAL | OP_EPILOGUE_ACT,
                                  .gpu_lower = conv_gpu_lower,
                                  .binary = BINARY_NONE,
                                  .scale_columns = conv_scale_columns};

OP_DESC(conv_transpose_desc, "ConvTranspose", conv_transpose_versions, conv_transpose_parse,
        conv_infer, conv_transpose_forward, OP_NHWC_OUTPUT | OP_EPILOGUE_ACT,
        conv_transpose_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_conv_ops[] = {&conv_desc, &conv_transpose_desc, NULL};
