/* Op family 'deform_conv': DeformConv (opset 19, 22), the convolution whose kernel taps sample
 * the input at learned fractional offsets (bilinear, or multilinear past 2-D, zero outside the
 * input) scaled by an optional mask. The sampled taps of each image and group are gathered into a
 * column matrix and multiplied by the group's weights with one sgemm. CPU reference only (no GPU
 * path: the planner refuses it naming the node). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"
#include "layers/window.h"

static tci_status deform_conv_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 3, 5, 1, 1));
    return layer_deform_conv_parse_attrs(node, arena);
}

static const tci_tensor *input_at(const ir_node *node, const tci_tensor *const *in, int i) {
    return node->num_inputs > i ? in[i] : NULL;
}

/* offset (N, offset_group * taps * spatial, out...) or mask (N, offset_group * taps, out...):
 * known dims that differ are an error. */
static tci_status check_sampling_input(const ir_node *node, const layer_window *g,
                                       const tci_tensor *t, const char *name, int64_t per_tap) {
    if (!t || t->rank < 0) return TCI_OK;
    int64_t want[TCI_MAX_RANK];
    int64_t taps = 1;
    for (int i = 0; i < g->spatial; i++)
        taps = g->kernel[i] < 0 || taps < 0 ? -1 : taps * g->kernel[i];
    want[0] = g->batch;
    want[1] = taps < 0 ? -1 : g->offset_group * taps * per_tap;
    for (int i = 0; i < g->spatial; i++) want[i + 2] = g->out[i];
    bool fits = t->rank == g->spatial + 2;
    for (int d = 0; fits && d < t->rank; d++)
        fits = t->dims[d] < 0 || want[d] < 0 || t->dims[d] == want[d];
    if (fits) return TCI_OK;
    char ts[128], ws[128];
    return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                         "%s has shape %s; expected %s (batch, offset_group * kernel taps%s, "
                         "output dims)",
                         name, ir_format_dims(t->rank, t->dims, ts, sizeof ts),
                         ir_format_dims(g->spatial + 2, want, ws, sizeof ws),
                         per_tap > 1 ? " * spatial dims" : "");
}

static tci_status deform_conv_geometry(const ir_node *node, const tci_tensor *const *in,
                                       layer_window *g) {
    for (int i = 0; i < node->num_inputs; i++)
        if (in[i]) TRY_STATUS(op_check_dtype(node, in[i], i, op_float_types));
    TRY_STATUS(layer_conv_window_of(node, in[0], in[1], g));
    const tci_tensor *b = input_at(node, in, 3);
    bool bias_differs = b && b->rank == 1 && b->dims[0] >= 0 && g->out_channels >= 0 &&
                        b->dims[0] != g->out_channels;
    if (b && b->rank >= 0 && (b->rank != 1 || bias_differs))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "B must be 1-D with one value per output channel (%lld)",
                             (long long)g->out_channels);
    if (g->in_channels >= 0 && g->in_channels % g->offset_group)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "offset_group %lld does not divide X's %lld channels",
                             (long long)g->offset_group, (long long)g->in_channels);
    if (g->spatial < 0) return TCI_OK;
    TRY_STATUS(check_sampling_input(node, g, in[2], "offset", g->spatial));
    return check_sampling_input(node, g, input_at(node, in, 4), "mask", 1);
}

static tci_status deform_conv_infer(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    layer_window g;
    TRY_STATUS(deform_conv_geometry(node, in, &g));
    return layer_conv_output(&g, out[0]);
}

/* The image (spatial dims in[]) sampled at pos[], multilinearly from its 2^spatial neighbours,
 * a neighbour outside the image counting 0 (GridSample's zeros padding with align_corners). */
static float sample(const float *image, const layer_window *g, const double *pos) {
    int64_t lo[LAYER_MAX_SPATIAL];
    double frac[LAYER_MAX_SPATIAL];
    for (int i = 0; i < g->spatial; i++) {
        /* also false for NaN: such a tap reads nothing */
        if (!(pos[i] > -1.0 && pos[i] < (double)g->in[i])) return 0.0f;
        double f = floor(pos[i]);
        lo[i] = (int64_t)f;
        frac[i] = pos[i] - f;
    }
    double sum = 0.0;
    for (unsigned corner = 0; corner < (1u << g->spatial); corner++) {
        double weight = 1.0;
        int64_t at = 0;
        bool inside = true;
        for (int i = 0; i < g->spatial && inside; i++) {
            bool up = (corner >> i) & 1u;
            int64_t idx = lo[i] + up;
            inside = idx >= 0 && idx < g->in[i];
            weight *= up ? frac[i] : 1.0 - frac[i];
            at = at * g->in[i] + idx;
        }
        if (inside && weight != 0.0) sum += weight * image[at];
    }
    return (float)sum;
}

/* Row-major multi-index of flat index i over dims[0..n). */
static void unravel(int64_t i, int n, const int64_t *dims, int64_t *idx) {
    for (int d = n - 1; d >= 0; d--) {
        idx[d] = i % dims[d];
        i /= dims[d];
    }
}

static tci_status deform_conv_forward(const ir_node *node, const tci_tensor *const *in,
                                      tci_tensor *const *out) {
    layer_window g;
    TRY_STATUS(deform_conv_geometry(node, in, &g));
    const tci_tensor *b = input_at(node, in, 3), *mask = input_at(node, in, 4);
    const float *x = in[0]->data, *w = in[1]->data, *offset = in[2]->data;
    float *y = out[0]->data;
    int s = g.spatial;
    int64_t taps = 1, outs = 1, image = 1;
    for (int i = 0; i < s; i++) {
        taps *= g.kernel[i];
        outs *= g.out[i];
        image *= g.in[i];
    }
    int64_t cg = g.in_channels / g.group, mg = g.out_channels / g.group;
    int64_t per_offset_group = g.in_channels / g.offset_group, rows = cg * taps;
    if (!op_count(out[0])) return TCI_OK;
    TRY_STATUS(op_check_blas_dims(node, mg, outs, rows));
    float *col = malloc((size_t)(rows * outs + 1) * sizeof *col);
    int64_t *tap_idx = malloc((size_t)(taps * s + 1) * sizeof *tap_idx);
    int64_t *out_idx = malloc((size_t)(outs * s + 1) * sizeof *out_idx);
    if (!col || !tap_idx || !out_idx) {
        free(col);
        free(tap_idx);
        free(out_idx);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for the column matrix");
    }
    for (int64_t t = 0; t < taps; t++) unravel(t, s, g.kernel, tap_idx + t * s);
    for (int64_t o = 0; o < outs; o++) unravel(o, s, g.out, out_idx + o * s);

    for (int64_t n = 0; n < g.batch; n++) {
        for (int64_t grp = 0; grp < g.group; grp++) {
            for (int64_t ci = 0; ci < cg; ci++) {
                int64_t c = grp * cg + ci, og = c / per_offset_group;
                const float *img = x + (n * g.in_channels + c) * image;
                for (int64_t t = 0; t < taps; t++) {
                    int64_t sel = og * taps + t;
                    const float *off = offset + (n * g.offset_group * taps + sel) * s * outs;
                    const float *m = mask ? (const float *)mask->data +
                                                (n * g.offset_group * taps + sel) * outs
                                          : NULL;
                    float *row = col + (ci * taps + t) * outs;
                    for (int64_t o = 0; o < outs; o++) {
                        double pos[LAYER_MAX_SPATIAL];
                        for (int i = 0; i < s; i++)
                            pos[i] = (double)(out_idx[o * s + i] * g.stride[i] - g.pad_begin[i] +
                                              tap_idx[t * s + i] * g.dilation[i]) +
                                     off[i * outs + o];
                        row[o] = sample(img, &g, pos) * (m ? m[o] : 1.0f);
                    }
                }
            }
            float *yg = y + (n * g.out_channels + grp * mg) * outs;
            if (!rows) {
                memset(yg, 0, (size_t)(mg * outs) * sizeof *yg);
                continue;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mg, (int)outs, (int)rows,
                        1.0f, w + grp * mg * rows, (int)rows, col, (int)outs, 0.0f, yg,
                        (int)outs);
        }
        if (b)
            for (int64_t k = 0; k < g.out_channels; k++) {
                float bias = ((const float *)b->data)[k];
                float *yk = y + (n * g.out_channels + k) * outs;
                for (int64_t o = 0; o < outs; o++) yk[o] += bias;
            }
    }
    free(col);
    free(tap_idx);
    free(out_idx);
    return TCI_OK;
}

OP_DESC(deform_conv_desc, "DeformConv", OP_VERSIONS(19, 22), deform_conv_parse, deform_conv_infer,
        deform_conv_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_deform_conv_ops[] = {&deform_conv_desc, NULL};
