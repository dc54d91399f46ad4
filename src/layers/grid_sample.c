/* Op family 'grid_sample': GridSample, the sampler of spatial transformer networks and flow
 * warps: Y[n, c, p] interpolates X[n, c] at the normalised position grid[n, p, :] (last entry
 * the fastest dim, x before y as in PyTorch). Any number of spatial dims for the linear and
 * nearest modes, two for cubic; zeros, border and reflection padding; computed as PyTorch's
 * grid_sample does (onnxruntime follows it), in float. And AffineGrid, the grid such a sampler
 * reads: every output position's normalised coordinates moved by an affine matrix, as PyTorch's
 * affine_grid. The arithmetic is util/grid_sample_math.h's, which the GPU kernel shares;
 * GridSample runs on the GPU too (one step, dense), AffineGrid on the CPU reference only (its
 * output is usually a constant, folded at build). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "layers/op.h"
#include "util/grid_sample_math.h"

typedef struct grid_sample_params {
    gs_mode mode;
    gs_padding padding;
    bool align_corners;
} grid_sample_params;

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
            int64_t pos[GS_MAX_TAPS][GS_MAX_SPATIAL], at[GS_MAX_TAPS];
            float w[GS_MAX_TAPS];
            const int taps = gs_taps(p->mode, p->padding, p->align_corners, r, size,
                                     gd + (b * out_plane + o) * r, pos, w);
            for (int t = 0; t < taps; t++) at[t] = gs_offset(size, pos[t], r);
            for (int64_t ch = 0; ch < channels; ch++) {
                const float *plane = xd + (b * channels + ch) * in_plane;
                float acc = 0.0f;
                for (int t = 0; t < taps; t++) acc += w[t] * (at[t] < 0 ? 0.0f : plane[at[t]]);
                y[(b * channels + ch) * out_plane + o] = acc;
            }
        }
    return TCI_OK;
}

/* One PLAN_STEP_GRID_SAMPLE: X, grid and Y dense, in the plan's float dtype. */
static tci_status grid_sample_gpu_lower(plan_builder *b, const ir_node *node) {
    const grid_sample_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *grid = node->inputs[1], *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, grid));
    int xi, gi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_input(b, node, grid, PLAN_LAYOUT_DENSE, &gi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_GRID_SAMPLE, node, NULL, &s));
    s->u.grid_sample.n = x->dims[0];
    s->u.grid_sample.c = x->dims[1];
    s->u.grid_sample.r = x->rank - 2;
    for (int d = 0; d < x->rank - 2; d++) {
        s->u.grid_sample.in[d] = x->dims[2 + d];
        s->u.grid_sample.out[d] = y->dims[2 + d];
    }
    s->u.grid_sample.mode = p->mode;
    s->u.grid_sample.padding = p->padding;
    s->u.grid_sample.align_corners = p->align_corners;
    lower_step_io(s, 2, (int[]){xi, gi}, 1, &yt);
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
        grid_sample_infer, grid_sample_forward, 0, grid_sample_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_grid_sample_ops[] = {&grid_sample_desc, &affine_grid_desc, NULL};
