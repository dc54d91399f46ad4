/* Op family 'grid_sample': GridSample, the sampler of spatial transformer networks and flow
 * warps: Y[n, c, p] interpolates X[n, c] at the normalised position grid[n, p, :] (last entry
 * the fastest dim, x before y as in PyTorch). Any number of spatial dims for the linear and
 * nearest modes, two for cubic; zeros, border and reflection padding; computed as PyTorch's
 * grid_sample does (onnxruntime follows it), in float. And AffineGrid, the grid such a sampler
 * reads: every output position's normalised coordinates moved by an affine matrix, as PyTorch's
 * affine_grid. No GPU path yet: the planner refuses the nodes, naming them. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "layers/op.h"

typedef enum { GS_LINEAR, GS_NEAREST, GS_CUBIC } gs_mode;
typedef enum { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_padding;

typedef struct grid_sample_params {
    gs_mode mode;
    gs_padding padding;
    bool align_corners;
} grid_sample_params;

enum { GS_MAX_SPATIAL = 3 };

static tci_status grid_sample_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"align_corners", "mode", "padding_mode", NULL};
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, grid_sample_params, p);
    int64_t align;
    const char *mode, *padding;
    TRY_STATUS(ir_attr_int(node, "align_corners", 0, &align));
    /* opset 16 spelled the modes bilinear and bicubic */
    TRY_STATUS(
        ir_attr_string(node, "mode", node->since_version >= 20 ? "linear" : "bilinear", &mode));
    TRY_STATUS(ir_attr_string(node, "padding_mode", "zeros", &padding));
    p->align_corners = align != 0;
    const bool v16 = node->since_version < 20;
    if (strcmp(mode, v16 ? "bilinear" : "linear") == 0)
        p->mode = GS_LINEAR;
    else if (strcmp(mode, "nearest") == 0)
        p->mode = GS_NEAREST;
    else if (strcmp(mode, v16 ? "bicubic" : "cubic") == 0)
        p->mode = GS_CUBIC;
    else
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'mode' value '%s' is not one of %s", mode,
                             v16 ? "bilinear, nearest, bicubic" : "linear, nearest, cubic");
    if (strcmp(padding, "zeros") == 0)
        p->padding = GS_ZEROS;
    else if (strcmp(padding, "border") == 0)
        p->padding = GS_BORDER;
    else if (strcmp(padding, "reflection") == 0)
        p->padding = GS_REFLECTION;
    else
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'padding_mode' value '%s' is not one of zeros, border, "
                             "reflection",
                             padding);
    return TCI_OK;
}

static tci_status grid_sample_infer(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    const grid_sample_params *p = node->params;
    const tci_tensor *x = in[0], *grid = in[1];
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, grid, 1, op_float_types));
    out[0]->dtype = x->dtype;
    out[0]->rank = -1;
    if (x->rank < 0 || grid->rank < 0) return TCI_OK;
    const int r = x->rank - 2;
    if (r < 1 || grid->rank != x->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "X of rank %d and grid of rank %d: X must be (N, C, d1..dr) and grid "
                             "(N, D1..Dr, r)",
                             x->rank, grid->rank);
    if (node->since_version < 20 && r != 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "opset %d GridSample takes 4-D X only, it has rank %d",
                             node->since_version, x->rank);
    if (r > GS_MAX_SPATIAL || (p->mode == GS_CUBIC && r != 2))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "%d spatial dims are not supported in this mode (linear and nearest "
                             "take up to %d, cubic 2)",
                             r, GS_MAX_SPATIAL);
    if (grid->dims[x->rank - 1] >= 0 && grid->dims[x->rank - 1] != r)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "grid's last dim is %lld, X has %d spatial dims",
                             (long long)grid->dims[x->rank - 1], r);
    if (x->dims[0] >= 0 && grid->dims[0] >= 0 && x->dims[0] != grid->dims[0])
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "X has batch %lld, grid %lld",
                             (long long)x->dims[0], (long long)grid->dims[0]);
    out[0]->rank = x->rank;
    out[0]->dims[0] = x->dims[0];
    out[0]->dims[1] = x->dims[1];
    for (int i = 0; i < r; i++) out[0]->dims[2 + i] = grid->dims[1 + i];
    return TCI_OK;
}

/* PyTorch's grid_sampler helpers: the normalised position in pixels, reflection about the
 * borders, and the padding applied to a position. */
static float unnormalize(float g, int64_t size, bool align) {
    return align ? (g + 1.0f) / 2.0f * (float)(size - 1) : ((g + 1.0f) * (float)size - 1.0f) / 2.0f;
}

static float reflect(float v, float twice_low, float twice_high) {
    if (twice_low == twice_high) return 0.0f;
    float lo = twice_low / 2.0f, span = (twice_high - twice_low) / 2.0f;
    v = fabsf(v - lo);
    float extra = fmodf(v, span);
    int flips = (int)floorf(v / span);
    return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

static float clip_to(float v, int64_t size) {
    return fminf(fmaxf(v, 0.0f), (float)(size - 1));
}

static float pad_coord(float v, int64_t size, gs_padding padding, bool align) {
    if (padding == GS_BORDER) return clip_to(v, size);
    if (padding == GS_REFLECTION) {
        v = align ? reflect(v, 0.0f, 2.0f * (float)(size - 1))
                  : reflect(v, -1.0f, 2.0f * (float)size - 1.0f);
        return clip_to(v, size);
    }
    return v;
}

/* X[plane] at integer position pos (r dims), 0 outside. */
static float tap(const float *plane, const int64_t *size, const int64_t *pos, int r) {
    int64_t off = 0;
    for (int d = 0; d < r; d++) {
        if (pos[d] < 0 || pos[d] >= size[d]) return 0.0f;
        off = off * size[d] + pos[d];
    }
    return plane[off];
}

static float cubic1(float x, float a) {
    return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
}

static float cubic2(float x, float a) {
    return ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
}

/* One output value: pixel coordinates c (dims in X's order, before padding). */
static float sample(const grid_sample_params *p, const float *plane, const int64_t *size, int r,
                    const float *c) {
    int64_t pos[GS_MAX_SPATIAL];
    if (p->mode == GS_NEAREST) {
        for (int d = 0; d < r; d++)
            pos[d] = (int64_t)nearbyintf(pad_coord(c[d], size[d], p->padding, p->align_corners));
        return tap(plane, size, pos, r);
    }
    if (p->mode == GS_LINEAR) {
        float pc[GS_MAX_SPATIAL], frac[GS_MAX_SPATIAL];
        int64_t base[GS_MAX_SPATIAL];
        for (int d = 0; d < r; d++) {
            pc[d] = pad_coord(c[d], size[d], p->padding, p->align_corners);
            base[d] = (int64_t)floorf(pc[d]);
            frac[d] = pc[d] - (float)base[d];
        }
        float acc = 0.0f;
        for (int corner = 0; corner < (1 << r); corner++) {
            float w = 1.0f;
            for (int d = 0; d < r; d++) {
                int up = (corner >> (r - 1 - d)) & 1;
                pos[d] = base[d] + up;
                w *= up ? frac[d] : 1.0f - frac[d];
            }
            acc += w * tap(plane, size, pos, r);
        }
        return acc;
    }
    /* cubic, two dims: 4x4 taps around the position, the padding applied to each tap */
    const float a = -0.75f;
    float coef[2][4];
    int64_t base[2];
    for (int d = 0; d < 2; d++) {
        float f = floorf(c[d]);
        float t = c[d] - f;
        base[d] = (int64_t)f - 1;
        coef[d][0] = cubic2(t + 1.0f, a);
        coef[d][1] = cubic1(t, a);
        coef[d][2] = cubic1(1.0f - t, a);
        coef[d][3] = cubic2(2.0f - t, a);
    }
    float acc = 0.0f;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int64_t q[2] = {base[0] + i, base[1] + j};
            for (int d = 0; d < 2; d++)
                if (p->padding != GS_ZEROS)
                    q[d] = (int64_t)pad_coord((float)q[d], size[d], p->padding, p->align_corners);
            acc += coef[0][i] * coef[1][j] * tap(plane, size, q, 2);
        }
    return acc;
}

static tci_status grid_sample_forward(const ir_node *node, const tci_tensor *const *in,
                                      tci_tensor *const *out) {
    const grid_sample_params *p = node->params;
    const tci_tensor *x = in[0], *grid = in[1];
    const int r = x->rank - 2;
    const int64_t n = x->dims[0], channels = x->dims[1];
    int64_t size[GS_MAX_SPATIAL], in_plane = 1, out_plane = 1;
    for (int d = 0; d < r; d++) {
        size[d] = x->dims[2 + d];
        in_plane *= size[d];
        out_plane *= grid->dims[1 + d];
    }
    const float *xd = x->data, *gd = grid->data;
    float *y = out[0]->data;
    for (int64_t b = 0; b < n; b++)
        for (int64_t o = 0; o < out_plane; o++) {
            /* grid's last dim lists x (the last spatial dim) first */
            const float *g = gd + (b * out_plane + o) * r;
            float c[GS_MAX_SPATIAL];
            for (int d = 0; d < r; d++) c[d] = unnormalize(g[r - 1 - d], size[d], p->align_corners);
            for (int64_t ch = 0; ch < channels; ch++)
                y[(b * channels + ch) * out_plane + o] =
                    sample(p, xd + (b * channels + ch) * in_plane, size, r, c);
        }
    return TCI_OK;
}

/* ---- AffineGrid ---- */

static tci_status affine_grid_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    static const char *const known[] = {"align_corners", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, grid_sample_params, p);
    int align;
    TRY_STATUS(op_read_flag(node, "align_corners", 0, &align));
    p->align_corners = align != 0;
    return TCI_OK;
}

/* size (N, C, spatial...) of 2 or 3 spatial dims: *r the spatial rank (-1 while unknown) and
 * *known whether its values are. theta must be (N, r, r + 1). */
static tci_status affine_grid_plan(const ir_node *node, const tci_tensor *const *in, int *r,
                                   int64_t *size, bool *known) {
    const tci_tensor *theta = in[0], *sz = in[1];
    static const tci_dtype int64_only[] = {TCI_DTYPE_INT64, 0};
    TRY_STATUS(op_check_dtype(node, theta, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, sz, 1, int64_only));
    *r = -1;
    *known = false;
    if (sz->rank >= 0 && sz->rank != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "size must be 1-D, got rank %d",
                             sz->rank);
    if (sz->rank == 1 && sz->dims[0] >= 0) {
        if (sz->dims[0] != 4 && sz->dims[0] != 5)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "size has %lld entries; must be 4 (N, C, H, W) or 5 "
                                 "(N, C, D, H, W)",
                                 (long long)sz->dims[0]);
        *r = (int)sz->dims[0] - 2;
    }
    if (theta->rank >= 0) {
        if (theta->rank != 3)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "theta must be 3-D, got rank %d",
                                 theta->rank);
        if (*r < 0 && theta->dims[1] >= 0) *r = (int)theta->dims[1];
        if (*r >= 0 && ((theta->dims[1] >= 0 && theta->dims[1] != *r) ||
                        (theta->dims[2] >= 0 && theta->dims[2] != *r + 1)))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "theta must be (N, %d, %d) for %d spatial dims, got (%lld, %lld, "
                                 "%lld)",
                                 *r, *r + 1, *r, (long long)theta->dims[0],
                                 (long long)theta->dims[1], (long long)theta->dims[2]);
    }
    if (*r < 0 || !sz->data || sz->rank != 1) return TCI_OK;
    for (int i = 0; i < *r + 2; i++) {
        size[i] = op_read_int(sz, i);
        if (size[i] < 0 || size[i] > INT32_MAX)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "size[%d] is %lld", i,
                                 (long long)size[i]);
    }
    if (theta->rank == 3 && theta->dims[0] >= 0 && theta->dims[0] != size[0])
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "theta holds %lld matrices for a batch of %lld",
                             (long long)theta->dims[0], (long long)size[0]);
    *known = true;
    return TCI_OK;
}

static tci_status affine_grid_infer(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    int r;
    int64_t size[5];
    bool known;
    TRY_STATUS(affine_grid_plan(node, in, &r, size, &known));
    op_set_unknown(out[0], in[0]->dtype);
    if (r < 0) return TCI_OK;
    out[0]->rank = r + 2;
    out[0]->dims[0] = known ? size[0] : in[0]->rank == 3 ? in[0]->dims[0] : -1;
    for (int d = 0; d < r; d++) out[0]->dims[1 + d] = known ? size[2 + d] : -1;
    out[0]->dims[r + 1] = r;
    return TCI_OK;
}

/* The normalised coordinate of position i of n: the pixel centres of [-1, 1], or with
 * align_corners its two ends on the first and last. A single position with align_corners sits at
 * -1, as numpy's arange in ONNX's reference gives; the others disagree there (onnxruntime 1.32
 * gives 1, PyTorch's affine_grid 0), and ONNX's cases do not test it. */
static double affine_coordinate(int64_t i, int64_t n, bool align_corners) {
    if (align_corners) return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)n;
}

static tci_status affine_grid_forward(const ir_node *node, const tci_tensor *const *in,
                                      tci_tensor *const *out) {
    const grid_sample_params *p = node->params;
    int r;
    int64_t size[5];
    bool known;
    TRY_STATUS(affine_grid_plan(node, in, &r, size, &known));
    const float *theta = in[0]->data;
    float *y = out[0]->data;
    int64_t points = 1;
    for (int d = 0; d < r; d++) points *= size[2 + d];
    for (int64_t n = 0; n < size[0]; n++) {
        const float *t = theta + n * r * (r + 1);
        int64_t idx[3] = {0, 0, 0};
        for (int64_t q = 0; q < points; q++, y += r) {
            /* homogeneous (x, y[, z], 1): x along the last spatial dim */
            double h[4];
            for (int k = 0; k < r; k++)
                h[k] = affine_coordinate(idx[r - 1 - k], size[2 + r - 1 - k], p->align_corners);
            h[r] = 1.0;
            for (int j = 0; j < r; j++) {
                double v = 0.0;
                for (int k = 0; k <= r; k++) v += (double)t[j * (r + 1) + k] * h[k];
                y[j] = (float)v;
            }
            for (int d = r - 1; d >= 0 && ++idx[d] == size[2 + d]; d--) idx[d] = 0;
        }
    }
    return TCI_OK;
}

OP_DESC(affine_grid_desc, "AffineGrid", OP_VERSIONS(20), affine_grid_parse, affine_grid_infer,
        affine_grid_forward, 0, NULL, NULL, BINARY_NONE);

OP_DESC(grid_sample_desc, "GridSample", OP_VERSIONS(16, 20, 22), grid_sample_parse,
        grid_sample_infer, grid_sample_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_grid_sample_ops[] = {&grid_sample_desc, &affine_grid_desc, NULL};
