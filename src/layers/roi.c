/* Op family 'roi': pooling over regions of interest given as boxes, the detection heads of
 * two-stage detectors (torchvision's Faster / Mask R-CNN exports): RoiAlign. fp32 on the CPU
 * reference only (no GPU path: the planner refuses it naming the node). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "layers/op.h"

/* ---- RoiAlign ---- */

typedef struct roi_align_params {
    int half_pixel; /* coordinate_transformation_mode: half_pixel (1) or output_half_pixel (0) */
    int max_mode;   /* mode: max (1) or avg (0) */
    int64_t out_h, out_w;
    int64_t sampling_ratio; /* 0: adaptive, ceil(roi size / output size) samples per bin */
    float spatial_scale;
} roi_align_params;

static tci_status roi_align_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 3, 3, 1, 1));
    /* version 10 has no coordinate_transformation_mode: its behaviour is output_half_pixel */
    static const char *const known10[] = {"mode", "output_height", "output_width",
                                          "sampling_ratio", "spatial_scale", NULL};
    static const char *const known16[] = {"coordinate_transformation_mode", "mode",
                                          "output_height", "output_width", "sampling_ratio",
                                          "spatial_scale", NULL};
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 16 ? known16 : known10));
    OP_ALLOC_PARAMS(node, arena, roi_align_params, p);
    const char *ctm = "output_half_pixel", *mode;
    if (node->since_version >= 16)
        TRY_STATUS(ir_attr_string(node, "coordinate_transformation_mode", "half_pixel", &ctm));
    if (strcmp(ctm, "half_pixel") == 0)
        p->half_pixel = 1;
    else if (strcmp(ctm, "output_half_pixel") == 0)
        p->half_pixel = 0;
    else
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'coordinate_transformation_mode' is '%s'; expected "
                             "'half_pixel' or 'output_half_pixel'",
                             ctm);
    TRY_STATUS(ir_attr_string(node, "mode", "avg", &mode));
    if (strcmp(mode, "avg") == 0)
        p->max_mode = 0;
    else if (strcmp(mode, "max") == 0)
        p->max_mode = 1;
    else
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'mode' is '%s'; expected 'avg' or 'max'", mode);
    TRY_STATUS(ir_attr_int(node, "output_height", 1, &p->out_h));
    TRY_STATUS(ir_attr_int(node, "output_width", 1, &p->out_w));
    TRY_STATUS(ir_attr_int(node, "sampling_ratio", 0, &p->sampling_ratio));
    TRY_STATUS(ir_attr_float(node, "spatial_scale", 1.0f, &p->spatial_scale));
    if (p->out_h < 1 || p->out_w < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attributes 'output_height' and 'output_width' must be >= 1 "
                             "(got %lld, %lld)",
                             (long long)p->out_h, (long long)p->out_w);
    if (p->sampling_ratio < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'sampling_ratio' is %lld; must be >= 0 (0: adaptive)",
                             (long long)p->sampling_ratio);
    if (!isfinite(p->spatial_scale))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'spatial_scale' is not finite");
    return TCI_OK;
}

static tci_status roi_align_infer(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    const roi_align_params *p = node->params;
    const tci_tensor *x = in[0], *rois = in[1], *bi = in[2];
    static const tci_dtype int64_only[] = {TCI_DTYPE_INT64, 0};
    TRY_STATUS(op_check_dtype(node, x, 0, op_float_types));
    TRY_STATUS(op_check_dtype(node, rois, 1, op_float_types));
    TRY_STATUS(op_check_dtype(node, bi, 2, int64_only));
    if (x->rank >= 0 && x->rank != 4)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "input X must be 4-D (N, C, H, W), got "
                             "rank %d", x->rank);
    if (rois->rank >= 0 && (rois->rank != 2 || (rois->dims[1] >= 0 && rois->dims[1] != 4)))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input rois must be (num_rois, 4), got rank %d%s", rois->rank,
                             rois->rank == 2 ? " with a last dim other than 4" : "");
    if (bi->rank >= 0 && bi->rank != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input batch_indices must be 1-D, got rank %d", bi->rank);
    int64_t n_rois = rois->rank == 2 ? rois->dims[0] : -1;
    if (bi->rank == 1 && bi->dims[0] >= 0) {
        if (n_rois >= 0 && bi->dims[0] != n_rois)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "batch_indices has %lld entries but rois %lld rows",
                                 (long long)bi->dims[0], (long long)n_rois);
        n_rois = bi->dims[0];
    }
    out[0]->dtype = TCI_DTYPE_FLOAT;
    out[0]->rank = 4;
    out[0]->dims[0] = n_rois;
    out[0]->dims[1] = x->rank == 4 ? x->dims[1] : -1;
    out[0]->dims[2] = p->out_h;
    out[0]->dims[3] = p->out_w;
    return TCI_OK;
}

/* One sample point's four neighbours (offsets in an H x W plane) and bilinear weights; a point
 * more than one pixel outside the map has weights 0. */
typedef struct roi_sample {
    int64_t pos[4];
    float w[4];
} roi_sample;

static roi_sample roi_sample_at(float y, float x, int64_t height, int64_t width) {
    roi_sample s = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    if (y < -1.0f || y > (float)height || x < -1.0f || x > (float)width) return s;
    if (y < 0) y = 0;
    if (x < 0) x = 0;
    int64_t y_low = (int64_t)y, x_low = (int64_t)x, y_high, x_high;
    if (y_low >= height - 1) {
        y_high = y_low = height - 1;
        y = (float)y_low;
    } else {
        y_high = y_low + 1;
    }
    if (x_low >= width - 1) {
        x_high = x_low = width - 1;
        x = (float)x_low;
    } else {
        x_high = x_low + 1;
    }
    float ly = y - (float)y_low, lx = x - (float)x_low, hy = 1.0f - ly, hx = 1.0f - lx;
    s.pos[0] = y_low * width + x_low;
    s.pos[1] = y_low * width + x_high;
    s.pos[2] = y_high * width + x_low;
    s.pos[3] = y_high * width + x_high;
    s.w[0] = hy * hx;
    s.w[1] = hy * lx;
    s.w[2] = ly * hx;
    s.w[3] = ly * lx;
    return s;
}

/* ONNX's reference numerics (onnx/reference/ops/op_roi_align.py, onnxruntime's kernel), in fp32
 * as they compute: the bin split into a grid of sampling points, each bilinearly interpolated;
 * avg sums the interpolated values and divides by the grid's size, max takes the largest of the
 * weighted corner values (w_i * v_i, not the interpolated value: ONNX's definition). Samples are
 * visited in the reference's order, so the sums round as its do. */
static tci_status roi_align_forward(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    const roi_align_params *p = node->params;
    const tci_tensor *x = in[0];
    const float *xd = x->data, *rois = in[1]->data;
    const int64_t *batch = in[2]->data;
    float *y = out[0]->data;
    int64_t n_batch = x->dims[0], channels = x->dims[1], height = x->dims[2], width = x->dims[3];
    int64_t n_rois = out[0]->dims[0], oh = p->out_h, ow = p->out_w, plane = height * width;
    const float offset = p->half_pixel ? 0.5f : 0.0f;
    for (int64_t n = 0; n < n_rois; n++) {
        int64_t b = batch[n];
        if (b < 0 || b >= n_batch)
            return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                 "batch_indices[%lld] is %lld; X has %lld images",
                                 (long long)n, (long long)b, (long long)n_batch);
        const float *r = rois + n * 4;
        float start_w = r[0] * p->spatial_scale - offset;
        float start_h = r[1] * p->spatial_scale - offset;
        float end_w = r[2] * p->spatial_scale - offset;
        float end_h = r[3] * p->spatial_scale - offset;
        float roi_w = end_w - start_w, roi_h = end_h - start_h;
        if (!p->half_pixel) {
            /* malformed boxes count as 1 x 1 */
            if (roi_w < 1.0f) roi_w = 1.0f;
            if (roi_h < 1.0f) roi_h = 1.0f;
        }
        float bin_h = roi_h / (float)oh, bin_w = roi_w / (float)ow;
        double grid_hd = p->sampling_ratio > 0 ? (double)p->sampling_ratio : ceil(bin_h);
        double grid_wd = p->sampling_ratio > 0 ? (double)p->sampling_ratio : ceil(bin_w);
        if (!(grid_hd < 1e9 && grid_wd < 1e9) || grid_hd * grid_wd > 1e12)
            return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                 "roi %lld samples a %g x %g grid per bin (a box "
                                 "coordinate not finite, or too large for spatial_scale)",
                                 (long long)n, grid_hd, grid_wd);
        /* a negative size (half_pixel boxes with end < start) samples nothing */
        int64_t grid_h = grid_hd > 0 ? (int64_t)grid_hd : 0;
        int64_t grid_w = grid_wd > 0 ? (int64_t)grid_wd : 0;
        int64_t count = grid_h * grid_w > 1 ? grid_h * grid_w : 1;
        float *yn = y + n * channels * oh * ow;
        const float *xb = xd + b * channels * plane;
        for (int64_t ph = 0; ph < oh; ph++)
            for (int64_t pw = 0; pw < ow; pw++) {
                int64_t o = ph * ow + pw;
                for (int64_t c = 0; c < channels; c++) yn[c * oh * ow + o] = 0.0f;
                bool first = true;
                for (int64_t iy = 0; iy < grid_h; iy++) {
                    float sy = start_h + (float)ph * bin_h +
                               ((float)iy + 0.5f) * bin_h / (float)grid_h;
                    for (int64_t ix = 0; ix < grid_w; ix++) {
                        float sx = start_w + (float)pw * bin_w +
                                   ((float)ix + 0.5f) * bin_w / (float)grid_w;
                        roi_sample s = roi_sample_at(sy, sx, height, width);
                        for (int64_t c = 0; c < channels; c++) {
                            const float *xc = xb + c * plane;
                            float *acc = &yn[c * oh * ow + o];
                            if (!p->max_mode) {
                                *acc += s.w[0] * xc[s.pos[0]] + s.w[1] * xc[s.pos[1]] +
                                        s.w[2] * xc[s.pos[2]] + s.w[3] * xc[s.pos[3]];
                                continue;
                            }
                            /* Python's max: the earlier value unless a later one is larger */
                            float v = s.w[0] * xc[s.pos[0]];
                            for (int k = 1; k < 4; k++) {
                                float t = s.w[k] * xc[s.pos[k]];
                                if (t > v) v = t;
                            }
                            if (first || v > *acc) *acc = v;
                        }
                        first = false;
                    }
                }
                if (!p->max_mode)
                    for (int64_t c = 0; c < channels; c++) yn[c * oh * ow + o] /= (float)count;
            }
    }
    return TCI_OK;
}

/* ---- descriptors ---- */

OP_DESC(roi_align_desc, "RoiAlign", OP_VERSIONS(10, 16, 22), roi_align_parse, roi_align_infer,
        roi_align_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_roi_ops[] = {&roi_align_desc, NULL};
