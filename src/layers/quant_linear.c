/* Op family 'quant_linear': the integer products of quantised (QOperator) models on the CPU
 * reference. MatMulInteger and ConvInteger give the int32 sums; QLinearMatMul and QLinearConv
 * requantise them to int8/uint8. As onnxruntime computes them: zero points subtracted, products
 * summed in int32 (wrapping), the multiplier x_scale * w_scale / y_scale in the scales' type
 * (per output column or channel where w's scale is), the sum times it in float, rounded half to
 * even, plus the output zero point, saturated. No GPU path: QOperator models run on the CPU. */
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"
#include "layers/quant.h"
#include "layers/window.h"

static const tci_dtype int8_types[] = {TCI_DTYPE_INT8, TCI_DTYPE_UINT8, 0};
static const tci_dtype scale_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_FLOAT16, 0};

static float round_half(float v) { return half_to_float(float_to_half(v)); }

/* A scale or zero point t (may be NULL: absent): one value for the tensor (a scalar or a single
 * element), or, where `per` names it, a 1-D tensor of len values (len -1: not known yet). */
static tci_status check_param(const ir_node *node, const tci_tensor *t, const char *name,
                              const char *per, int64_t len) {
    if (!t || t->rank < 0) return TCI_OK;
    if (t->rank == 0 || (t->rank == 1 && t->dims[0] == 1)) return TCI_OK;
    if (per && t->rank == 1 && (len < 0 || t->dims[0] < 0 || t->dims[0] == len)) return TCI_OK;
    char dims[128];
    ir_format_dims(t->rank, t->dims, dims, sizeof dims);
    if (per)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "%s has shape [%s]: only one value, or one per %s (%lld), is "
                             "supported",
                             name, dims, per, (long long)len);
    return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                         "%s has shape [%s]: it must be a scalar (per tensor)", name, dims);
}

static int32_t zero_at(const tci_tensor *t, int64_t i) {
    if (!t) return 0;
    return quant_load(t->dtype, t->data, op_count(t) == 1 ? 0 : i);
}

static float scale_at(const tci_tensor *t, int64_t i) {
    return quant_load_scale(t, op_count(t) == 1 ? 0 : i);
}

/* x_scale * w_scale[i] / y_scale in the scales' type (float16 rounds after each operation) */
static float multiplier(const tci_tensor *xs, const tci_tensor *ws, const tci_tensor *ys,
                        int64_t i) {
    float a = scale_at(xs, 0), b = scale_at(ws, i), y = scale_at(ys, 0);
    if (ys->dtype == TCI_DTYPE_FLOAT16) return round_half(round_half(a * b) / y);
    return a * b / y;
}

/* The zero point of input i must have input value's dtype. */
static tci_status check_zero_type(const ir_node *node, const tci_tensor *const *in, int value,
                                  int zero) {
    if (!in[zero]) return TCI_OK;
    return op_check_same_dtype(node, in[value], value, in[zero], zero);
}

/* ---- the integer matrix product ---- */

/* acc (y's elements) = (A - za) (B - zb): za one value or one per row of A, zb one or one per
 * column of B; int32 sums that wrap as onnxruntime's do. */
static tci_status mm_int(const ir_node *node, const tci_tensor *a, const tci_tensor *za,
                         const tci_tensor *b, const tci_tensor *zb, const tci_tensor *y,
                         int32_t *acc) {
    op_matmul_side sa, sb;
    op_matmul_side_of(a, false, &sa);
    op_matmul_side_of(b, true, &sb);
    const int64_t m = sa.rows, k = sa.cols, n = sb.cols;
    const int out_batch_rank = y->rank - (a->rank != 1) - (b->rank != 1);
    int64_t batches = 1;
    for (int i = 0; i < out_batch_rank; i++) batches *= y->dims[i];
    if (batches == 0 || m == 0 || n == 0) return TCI_OK;
    int32_t *bm = malloc((size_t)(k * n + k + 1) * sizeof *bm);
    if (!bm) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for B");
    int32_t *arow = bm + k * n;
    int64_t sta[TCI_MAX_RANK], stb[TCI_MAX_RANK], idx[TCI_MAX_RANK] = {0};
    op_matmul_batch_strides(&sa, out_batch_rank, sta);
    op_matmul_batch_strides(&sb, out_batch_rank, stb);
    int64_t offa = 0, offb = 0, loaded = -1;
    for (int64_t bi = 0; bi < batches; bi++) {
        if (offb != loaded) {
            for (int64_t kk = 0; kk < k; kk++)
                for (int64_t j = 0; j < n; j++)
                    bm[kk * n + j] =
                        quant_load(b->dtype, b->data, offb * k * n + kk * n + j) - zero_at(zb, j);
            loaded = offb;
        }
        for (int64_t i = 0; i < m; i++) {
            uint32_t *row = (uint32_t *)acc + (bi * m + i) * n;
            for (int64_t kk = 0; kk < k; kk++)
                arow[kk] = quant_load(a->dtype, a->data, offa * m * k + i * k + kk) - zero_at(za, i);
            memset(row, 0, (size_t)n * sizeof *row);
            for (int64_t kk = 0; kk < k; kk++) {
                const uint32_t av = (uint32_t)arow[kk];
                const int32_t *brow = bm + kk * n;
                for (int64_t j = 0; j < n; j++) row[j] += av * (uint32_t)brow[j];
            }
        }
        for (int d = out_batch_rank - 1; d >= 0; d--) { /* odometer over the output batch */
            offa += sta[d];
            offb += stb[d];
            if (++idx[d] < y->dims[d]) break;
            offa -= sta[d] * idx[d];
            offb -= stb[d] * idx[d];
            idx[d] = 0;
        }
    }
    free(bm);
    return TCI_OK;
}

/* M (rows of A) and N (columns of B) where known, else -1 */
static void mm_rows_cols(const tci_tensor *a, const tci_tensor *b, int64_t *m, int64_t *n) {
    *m = *n = -1;
    op_matmul_side s;
    if (a->rank >= 1) {
        op_matmul_side_of(a, false, &s);
        *m = s.rows;
    }
    if (b->rank >= 1) {
        op_matmul_side_of(b, true, &s);
        *n = s.cols;
    }
}

/* ---- MatMulInteger ---- */

static tci_status matmul_integer_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 2, 4, 1, 1);
}

static tci_status matmul_integer_infer(const ir_node *node, const tci_tensor *const *in,
                                       tci_tensor *const *out) {
    const tci_tensor *a = in[0], *b = in[1];
    const tci_tensor *za = node->num_inputs > 2 ? in[2] : NULL;
    const tci_tensor *zb = node->num_inputs > 3 ? in[3] : NULL;
    TRY_STATUS(op_check_dtype(node, a, 0, int8_types));
    TRY_STATUS(op_check_dtype(node, b, 1, int8_types));
    if (za) TRY_STATUS(check_zero_type(node, in, 0, 2));
    if (zb) TRY_STATUS(check_zero_type(node, in, 1, 3));
    int64_t m, n;
    mm_rows_cols(a, b, &m, &n);
    TRY_STATUS(check_param(node, za, "a_zero_point", "row of A", m));
    TRY_STATUS(check_param(node, zb, "b_zero_point", "column of B", n));
    op_set_unknown(out[0], TCI_DTYPE_INT32);
    return op_matmul_shape(node, a, b, out[0]);
}

static tci_status matmul_integer_forward(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    return mm_int(node, in[0], node->num_inputs > 2 ? in[2] : NULL, in[1],
                  node->num_inputs > 3 ? in[3] : NULL, out[0], out[0]->data);
}

/* ---- QLinearMatMul ---- */

static tci_status qlinear_matmul_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 8, 8, 1, 1);
}

/* inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point */
static tci_status qlinear_matmul_infer(const ir_node *node, const tci_tensor *const *in,
                                       tci_tensor *const *out) {
    const tci_tensor *a = in[0], *b = in[3];
    TRY_STATUS(op_check_dtype(node, a, 0, int8_types));
    TRY_STATUS(op_check_dtype(node, b, 3, int8_types));
    TRY_STATUS(op_check_dtype(node, in[7], 7, int8_types));
    TRY_STATUS(check_zero_type(node, in, 0, 2));
    TRY_STATUS(check_zero_type(node, in, 3, 5));
    /* scales of version 10 are float; version 21 adds float16 (bfloat16 is not held) */
    const tci_dtype *st = node->since_version >= 21 ? scale_types : op_float_types;
    static const int scales[] = {1, 4, 6};
    for (int i = 0; i < 3; i++) TRY_STATUS(op_check_dtype(node, in[scales[i]], scales[i], st));
    TRY_STATUS(op_check_same_dtype(node, in[1], 1, in[4], 4));
    TRY_STATUS(op_check_same_dtype(node, in[1], 1, in[6], 6));
    int64_t m, n;
    mm_rows_cols(a, b, &m, &n);
    TRY_STATUS(check_param(node, in[1], "a_scale", NULL, m));
    TRY_STATUS(check_param(node, in[2], "a_zero_point", NULL, m));
    TRY_STATUS(check_param(node, in[4], "b_scale", "column of B", n));
    TRY_STATUS(check_param(node, in[5], "b_zero_point", "column of B", n));
    TRY_STATUS(check_param(node, in[6], "y_scale", NULL, -1));
    TRY_STATUS(check_param(node, in[7], "y_zero_point", NULL, -1));
    op_set_unknown(out[0], in[7]->dtype);
    return op_matmul_shape(node, a, b, out[0]);
}

static tci_status qlinear_matmul_forward(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    tci_tensor *y = out[0];
    const int64_t count = op_count(y);
    int32_t *acc = malloc((size_t)(count ? count : 1) * sizeof *acc);
    if (!acc) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for the sums");
    tci_status st = mm_int(node, in[0], in[2], in[3], in[5], y, acc);
    if (st == TCI_OK && count) {
        float lo, hi;
        quant_range(y->dtype, &lo, &hi);
        op_matmul_side sb;
        op_matmul_side_of(in[3], true, &sb);
        const int64_t n = sb.cols; /* y's last dim (1 for a 1-D B): element i is in column i % n */
        const float yz = (float)zero_at(in[7], 0);
        for (int64_t i = 0; i < count; i++) {
            float mult = multiplier(in[1], in[4], in[6], i % n);
            quant_store(y->dtype, y->data, i, quant_saturate((float)acc[i] * mult, yz, lo, hi));
        }
    }
    free(acc);
    return st;
}

/* ---- the integer convolution ---- */

/* acc (N, M, out...) = sum over each group's input channels and the window of
 * (x - xz) (w[m] - wz[m]): an im2col of x - xz (padding is the zero point, so 0) per image and
 * group, then an integer product with each output channel's weights. */
static tci_status conv_int(const ir_node *node, const layer_window *g, const tci_tensor *x,
                           int32_t xz, const tci_tensor *w, const tci_tensor *wz, int32_t *acc) {
    const int sp = g->spatial;
    int64_t out_size = 1, in_size = 1, ksize = 1;
    for (int d = 0; d < sp; d++) {
        out_size *= g->out[d];
        in_size *= g->in[d];
        ksize *= g->kernel[d];
    }
    const int64_t cg = g->in_channels / g->group, mg = g->out_channels / g->group;
    const int64_t rows = cg * ksize;
    if (!out_size || !g->batch || !mg) return TCI_OK;
    int32_t *col = malloc((size_t)(rows * out_size + rows + 1) * sizeof *col);
    if (!col) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for the columns");
    int32_t *wrow = col + rows * out_size;
    for (int64_t n = 0; n < g->batch; n++)
        for (int64_t gi = 0; gi < g->group; gi++) {
            for (int64_t r = 0; r < rows; r++) {
                const int64_t c = gi * cg + r / ksize, base = (n * g->in_channels + c) * in_size;
                int64_t kidx[LAYER_MAX_SPATIAL], oidx[LAYER_MAX_SPATIAL] = {0};
                for (int64_t rest = r % ksize, d = sp - 1; d >= 0; d--) {
                    kidx[d] = rest % g->kernel[d];
                    rest /= g->kernel[d];
                }
                int32_t *dst = col + r * out_size;
                for (int64_t o = 0; o < out_size; o++) {
                    int64_t off = 0;
                    bool inside = true;
                    for (int d = 0; d < sp && inside; d++) {
                        int64_t pos = oidx[d] * g->stride[d] - g->pad_begin[d] +
                                      kidx[d] * g->dilation[d];
                        inside = pos >= 0 && pos < g->in[d];
                        off = off * g->in[d] + pos;
                    }
                    dst[o] = inside ? quant_load(x->dtype, x->data, base + off) - xz : 0;
                    for (int d = sp - 1; d >= 0; d--) {
                        if (++oidx[d] < g->out[d]) break;
                        oidx[d] = 0;
                    }
                }
            }
            for (int64_t mi = 0; mi < mg; mi++) {
                const int64_t m = gi * mg + mi;
                for (int64_t r = 0; r < rows; r++)
                    wrow[r] = quant_load(w->dtype, w->data, m * rows + r) - zero_at(wz, m);
                uint32_t *dst = (uint32_t *)acc + (n * g->out_channels + m) * out_size;
                memset(dst, 0, (size_t)out_size * sizeof *dst);
                for (int64_t r = 0; r < rows; r++) {
                    const uint32_t wv = (uint32_t)wrow[r];
                    const int32_t *src = col + r * out_size;
                    if (wv)
                        for (int64_t o = 0; o < out_size; o++) dst[o] += wv * (uint32_t)src[o];
                }
            }
        }
    free(col);
    return TCI_OK;
}

/* y's dims (N, M, out...) from the window, as far as known */
static void conv_out_shape(const layer_window *g, tci_tensor *y) {
    if (g->spatial < 0) return;
    y->rank = g->spatial + 2;
    y->dims[0] = g->batch;
    y->dims[1] = g->out_channels;
    for (int d = 0; d < g->spatial; d++) y->dims[d + 2] = g->out[d];
}

/* ---- ConvInteger ---- */

static tci_status conv_integer_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 2, 4, 1, 1));
    return layer_conv_parse_attrs(node, arena);
}

static tci_status conv_integer_infer(const ir_node *node, const tci_tensor *const *in,
                                     tci_tensor *const *out) {
    const tci_tensor *xz = node->num_inputs > 2 ? in[2] : NULL;
    const tci_tensor *wz = node->num_inputs > 3 ? in[3] : NULL;
    TRY_STATUS(op_check_dtype(node, in[0], 0, int8_types));
    TRY_STATUS(op_check_dtype(node, in[1], 1, int8_types));
    if (xz) TRY_STATUS(check_zero_type(node, in, 0, 2));
    if (wz) TRY_STATUS(check_zero_type(node, in, 1, 3));
    layer_window g;
    TRY_STATUS(layer_conv_window_of(node, in[0], in[1], &g));
    TRY_STATUS(check_param(node, xz, "x_zero_point", NULL, -1));
    TRY_STATUS(check_param(node, wz, "w_zero_point", "output channel", g.out_channels));
    op_set_unknown(out[0], TCI_DTYPE_INT32);
    conv_out_shape(&g, out[0]);
    return TCI_OK;
}

static tci_status conv_integer_forward(const ir_node *node, const tci_tensor *const *in,
                                       tci_tensor *const *out) {
    layer_window g;
    TRY_STATUS(layer_conv_window_of(node, in[0], in[1], &g));
    const tci_tensor *xz = node->num_inputs > 2 ? in[2] : NULL;
    return conv_int(node, &g, in[0], zero_at(xz, 0), in[1], node->num_inputs > 3 ? in[3] : NULL,
                    out[0]->data);
}

/* ---- QLinearConv ---- */

static tci_status qlinear_conv_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 8, 9, 1, 1));
    return layer_conv_parse_attrs(node, arena);
}

/* inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point[, B] */
static tci_status qlinear_conv_infer(const ir_node *node, const tci_tensor *const *in,
                                     tci_tensor *const *out) {
    const tci_tensor *bias = node->num_inputs > 8 ? in[8] : NULL;
    TRY_STATUS(op_check_dtype(node, in[0], 0, int8_types));
    TRY_STATUS(op_check_dtype(node, in[3], 3, int8_types));
    TRY_STATUS(op_check_dtype(node, in[7], 7, int8_types));
    TRY_STATUS(check_zero_type(node, in, 0, 2));
    TRY_STATUS(check_zero_type(node, in, 3, 5));
    static const int scales[] = {1, 4, 6};
    for (int i = 0; i < 3; i++)
        TRY_STATUS(op_check_dtype(node, in[scales[i]], scales[i], op_float_types));
    TRY_STATUS(op_check_same_dtype(node, in[1], 1, in[4], 4));
    static const tci_dtype bias_types[] = {TCI_DTYPE_INT32, 0};
    if (bias) TRY_STATUS(op_check_dtype(node, bias, 8, bias_types));
    layer_window g;
    TRY_STATUS(layer_conv_window_of(node, in[0], in[3], &g));
    TRY_STATUS(check_param(node, in[1], "x_scale", NULL, -1));
    TRY_STATUS(check_param(node, in[2], "x_zero_point", NULL, -1));
    TRY_STATUS(check_param(node, in[4], "w_scale", "output channel", g.out_channels));
    TRY_STATUS(check_param(node, in[5], "w_zero_point", "output channel", g.out_channels));
    TRY_STATUS(check_param(node, in[6], "y_scale", NULL, -1));
    TRY_STATUS(check_param(node, in[7], "y_zero_point", NULL, -1));
    if (bias && bias->rank >= 0 &&
        (bias->rank != 1 || (bias->dims[0] >= 0 && g.out_channels >= 0 &&
                             bias->dims[0] != g.out_channels)))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "B must be 1-D with one value per output channel (%lld)",
                             (long long)g.out_channels);
    op_set_unknown(out[0], in[7]->dtype);
    conv_out_shape(&g, out[0]);
    return TCI_OK;
}

static tci_status qlinear_conv_forward(const ir_node *node, const tci_tensor *const *in,
                                       tci_tensor *const *out) {
    const tci_tensor *bias = node->num_inputs > 8 ? in[8] : NULL;
    tci_tensor *y = out[0];
    layer_window g;
    TRY_STATUS(layer_conv_window_of(node, in[0], in[3], &g));
    const int64_t count = op_count(y);
    int32_t *acc = malloc((size_t)(count ? count : 1) * sizeof *acc);
    if (!acc) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for the sums");
    tci_status st = conv_int(node, &g, in[0], zero_at(in[2], 0), in[3], in[5], acc);
    if (st == TCI_OK && count) {
        float lo, hi;
        quant_range(y->dtype, &lo, &hi);
        const float yz = (float)zero_at(in[7], 0);
        const int64_t per_channel = count / (g.batch * g.out_channels);
        for (int64_t i = 0; i < count; i++) {
            const int64_t m = (i / per_channel) % g.out_channels;
            uint32_t sum = (uint32_t)acc[i] + (bias ? (uint32_t)((const int32_t *)bias->data)[m] : 0u);
            float mult = multiplier(in[1], in[4], in[6], m);
            quant_store(y->dtype, y->data, i,
                        quant_saturate((float)(int32_t)sum * mult, yz, lo, hi));
        }
    }
    free(acc);
    return st;
}

OP_DESC(matmul_integer_desc, "MatMulInteger", OP_VERSIONS(10), matmul_integer_parse,
        matmul_integer_infer, matmul_integer_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(qlinear_matmul_desc, "QLinearMatMul", OP_VERSIONS(10, 21), qlinear_matmul_parse,
        qlinear_matmul_infer, qlinear_matmul_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(conv_integer_desc, "ConvInteger", OP_VERSIONS(10), conv_integer_parse, conv_integer_infer,
        conv_integer_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(qlinear_conv_desc, "QLinearConv", OP_VERSIONS(10), qlinear_conv_parse, qlinear_conv_infer,
        qlinear_conv_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_quant_linear_ops[] = {&matmul_integer_desc, &qlinear_matmul_desc,
                                                 &conv_integer_desc, &qlinear_conv_desc, NULL};
