/* The quantisation ops (quant.c, quant_linear.c) where the ONNX node cases do not reach: ties
 * rounded half to even, saturation and NaN, int32 and float16 paths, blocks with a remainder,
 * per-row/per-column/per-channel zero points, groups and strides, the refusals by name; and what
 * a GPU build makes of a QDQ graph: the weight's DequantizeLinear folded, a pair on activations
 * per tensor rewritten into float ops (the same values on the CPU reference as the pair), a pair
 * it does not match (per channel, scales that differ) refused naming the node. */
#include <math.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"
#include "util/half.h"

#define T(dtype, rank, dims, data) th_tensor(TCI_DTYPE_##dtype, rank, dims, data)
#define NONE th_tensor(TCI_DTYPE_UNDEFINED, 0, NULL, NULL)

static tci_status run1(const char *op, int opset, int num_in, const tci_tensor *in,
                       tci_tensor *out, void (*attrs)(ir_graph *, ir_node *)) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, opset, num_in, 1);
    if (attrs) attrs(g, n);
    tci_status st = th_run(g, n, in, out);
    ir_graph_destroy(g);
    return st;
}

START_TEST(test_quantize_ties_saturation_nan) {
    /* x / 0.5: 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, -0.5 -> 0 (half to even), 300 and -300 saturate,
     * NaN gives the minimum (onnxruntime's x86 clamp) */
    float x[8] = {1.25f, 1.75f, -1.25f, -0.25f, 150.f, -150.f, NAN, 0.26f};
    float scale = 0.5f;
    int8_t zp = 0;
    int64_t d = 8;
    tci_tensor in[3] = {T(FLOAT, 1, &d, x), T(FLOAT, 0, NULL, &scale), T(INT8, 0, NULL, &zp)};
    tci_tensor y;
    ck_assert_tci_ok(run1("QuantizeLinear", 13, 3, in, &y, NULL));
    ck_assert_int_eq(y.dtype, TCI_DTYPE_INT8);
    const int8_t want[8] = {2, 4, -2, 0, 127, -128, -128, 1};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(((int8_t *)y.data)[i], want[i]);
    th_free(&y, 1);
    /* no zero point: uint8, zero 0 */
    ck_assert_tci_ok(run1("QuantizeLinear", 10, 2, in, &y, NULL));
    ck_assert_int_eq(y.dtype, TCI_DTYPE_UINT8);
    const uint8_t want_u[8] = {2, 4, 0, 0, 255, 0, 0, 1};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(((uint8_t *)y.data)[i], want_u[i]);
    th_free(&y, 1);
}
END_TEST

static void attr_axis_last(ir_graph *g, ir_node *n) { th_attr_int(g, n, "axis", -1); }
static void attr_block(ir_graph *g, ir_node *n) {
    th_attr_int(g, n, "axis", 1);
    th_attr_int(g, n, "block_size", 2);
}

START_TEST(test_quantize_per_axis_and_blocks) {
    /* per axis -1 over a 2x3 x: column scales 1, 2, 4, zero points 10, 20, 30 */
    float x[6] = {3.f, 3.f, 3.f, -5.f, -5.f, -5.f};
    float scale[3] = {1.f, 2.f, 4.f};
    uint8_t zp[3] = {10, 20, 30};
    int64_t xd[2] = {2, 3}, sd = 3;
    tci_tensor in[3] = {T(FLOAT, 2, xd, x), T(FLOAT, 1, &sd, scale), T(UINT8, 1, &sd, zp)};
    tci_tensor y;
    ck_assert_tci_ok(run1("QuantizeLinear", 13, 3, in, &y, attr_axis_last));
    /* 3/2 = 1.5 -> 2, 3/4 -> 1, -5/2 = -2.5 -> -2, -5/4 -> -1 */
    const uint8_t want[6] = {13, 22, 31, 5, 18, 29};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(((uint8_t *)y.data)[i], want[i]);
    th_free(&y, 1);
    /* blocks of 2 along axis 1 of a 1x5 x: scales for [0,1], [2,3], [4] (the remainder) */
    float xb[5] = {1.f, 2.f, 3.f, 4.f, 5.f};
    float sb[3] = {1.f, 2.f, 5.f};
    int64_t xbd[2] = {1, 5}, sbd[2] = {1, 3};
    tci_tensor inb[2] = {T(FLOAT, 2, xbd, xb), T(FLOAT, 2, sbd, sb)};
    ck_assert_tci_ok(run1("QuantizeLinear", 21, 2, inb, &y, attr_block));
    const uint8_t want_b[5] = {1, 2, 2, 2, 1}; /* 3/2 = 1.5 -> 2 */
    for (int i = 0; i < 5; i++) ck_assert_int_eq(((uint8_t *)y.data)[i], want_b[i]);
    th_free(&y, 1);
    /* the same blocks dequantised back */
    uint8_t q[5] = {1, 2, 2, 2, 1};
    tci_tensor ind[2] = {T(UINT8, 2, xbd, q), T(FLOAT, 2, sbd, sb)};
    ck_assert_tci_ok(run1("DequantizeLinear", 21, 2, ind, &y, attr_block));
    const float want_d[5] = {1.f, 2.f, 4.f, 4.f, 5.f};
    th_assert_near(y.data, want_d, 5, 0.f);
    th_free(&y, 1);
    /* a scale of the wrong length, named */
    float s4[4] = {1, 1, 1, 1};
    int64_t s4d = 4;
    tci_tensor bad[2] = {T(FLOAT, 2, xd, x), T(FLOAT, 1, &s4d, s4)};
    ck_assert_tci_error(run1("QuantizeLinear", 13, 2, bad, &y, attr_axis_last),
                        TCI_ERR_INVALID_MODEL, "y_scale has 4 values, but x has 3 along axis 1");
    /* blocked: the scale's dims must be x's with ceil(D / block) on the axis */
    int64_t s2d[2] = {1, 2};
    tci_tensor badb[2] = {T(FLOAT, 2, xbd, xb), T(FLOAT, 2, s2d, sb)};
    ck_assert_tci_error(run1("QuantizeLinear", 21, 2, badb, &y, attr_block),
                        TCI_ERR_INVALID_MODEL, "y_scale has 2 at dim 1, expected 3");
}
END_TEST

static void attr_fp16_out(ir_graph *g, ir_node *n) { th_attr_int(g, n, "output_dtype", 10); }

START_TEST(test_dequantize_int32_and_float16) {
    /* int32 (a bias): no zero point */
    int32_t x[3] = {-70000, 0, 123456};
    float scale = 0.25f;
    int64_t d = 3;
    tci_tensor in[2] = {T(INT32, 1, &d, x), T(FLOAT, 0, NULL, &scale)};
    tci_tensor y;
    ck_assert_tci_ok(run1("DequantizeLinear", 10, 2, in, &y, NULL));
    ck_assert_int_eq(y.dtype, TCI_DTYPE_FLOAT);
    const float want[3] = {-17500.f, 0.f, 30864.f};
    th_assert_near(y.data, want, 3, 0.f);
    th_free(&y, 1);
    /* output_dtype float16: the product rounded once to float16 (-70000 itself is past
     * float16's range: the difference is not rounded to float16 first) */
    ck_assert_tci_ok(run1("DequantizeLinear", 23, 2, in, &y, attr_fp16_out));
    ck_assert_int_eq(y.dtype, TCI_DTYPE_FLOAT16);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq(half_to_float(((uint16_t *)y.data)[i]),
                           half_to_float(float_to_half(want[i])));
    ck_assert_float_eq(half_to_float(((uint16_t *)y.data)[0]), -17504.f);
    th_free(&y, 1);
    /* a float16 scale makes the output float16; x - zero point for int8 */
    int8_t q[2] = {-128, 127};
    int8_t zp = -1;
    uint16_t hs = float_to_half(0.5f);
    int64_t d2 = 2;
    tci_tensor inh[3] = {T(INT8, 1, &d2, q), T(FLOAT16, 0, NULL, &hs), T(INT8, 0, NULL, &zp)};
    ck_assert_tci_ok(run1("DequantizeLinear", 19, 3, inh, &y, NULL));
    ck_assert_int_eq(y.dtype, TCI_DTYPE_FLOAT16);
    ck_assert_float_eq(half_to_float(((uint16_t *)y.data)[0]), -63.5f);
    ck_assert_float_eq(half_to_float(((uint16_t *)y.data)[1]), 64.f);
    th_free(&y, 1);
    /* zero point of another type than x */
    uint8_t uzp = 0;
    tci_tensor mixed[3] = {T(INT8, 1, &d2, q), T(FLOAT, 0, NULL, &scale), T(UINT8, 0, NULL, &uzp)};
    ck_assert_tci_error(run1("DequantizeLinear", 19, 3, mixed, &y, NULL), TCI_ERR_INVALID_MODEL,
                        "dtype");
}
END_TEST

static void attr_int16(ir_graph *g, ir_node *n) { th_attr_int(g, n, "output_dtype", 5); }
static void attr_bf16_precision(ir_graph *g, ir_node *n) { th_attr_int(g, n, "precision", 16); }
static void attr_negative_block(ir_graph *g, ir_node *n) { th_attr_int(g, n, "block_size", -2); }
static void attr_axis(ir_graph *g, ir_node *n) { th_attr_int(g, n, "axis", 0); }
static void attr_uint8_out(ir_graph *g, ir_node *n) { th_attr_int(g, n, "output_dtype", 2); }

START_TEST(test_quant_refusals) {
    float x = 1.f, scale = 1.f;
    int8_t zp = 0;
    tci_tensor in[3] = {T(FLOAT, 0, NULL, &x), T(FLOAT, 0, NULL, &scale), T(INT8, 0, NULL, &zp)};
    tci_tensor y;
    ck_assert_tci_error(run1("QuantizeLinear", 21, 2, in, &y, attr_int16), TCI_ERR_UNSUPPORTED,
                        "attribute 'output_dtype' value 5 (INT16) is not supported");
    ck_assert_tci_error(run1("QuantizeLinear", 23, 2, in, &y, attr_bf16_precision),
                        TCI_ERR_UNSUPPORTED,
                        "attribute 'precision' value 16 (BFLOAT16) is not supported");
    ck_assert_tci_error(run1("QuantizeLinear", 21, 2, in, &y, attr_negative_block),
                        TCI_ERR_INVALID_MODEL, "'block_size' is -2");
    /* attributes of later versions are refused by name in earlier ones */
    ck_assert_tci_error(run1("QuantizeLinear", 10, 2, in, &y, attr_axis), TCI_ERR_UNSUPPORTED,
                        "axis");
    ck_assert_tci_error(run1("DequantizeLinear", 21, 2, in, &y, attr_fp16_out),
                        TCI_ERR_UNSUPPORTED, "output_dtype");
    /* output_dtype and the zero point's type disagree */
    ck_assert_tci_error(run1("QuantizeLinear", 21, 3, in, &y, attr_uint8_out),
                        TCI_ERR_INVALID_MODEL, "output_dtype uint8 differs from y_zero_point's");
    /* DequantizeLinear of float */
    ck_assert_tci_error(run1("DequantizeLinear", 19, 2, in, &y, NULL), TCI_ERR_UNSUPPORTED,
                        "input 0");
}
END_TEST

START_TEST(test_dynamic_quantize_all_zero) {
    /* a range of one value: scale 1 as onnxruntime gives it, y and zero point 0 */
    float x[3] = {0.f, 0.f, 0.f};
    int64_t d = 3;
    tci_tensor in[1] = {T(FLOAT, 1, &d, x)};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "DynamicQuantizeLinear", 11, 1, 3);
    tci_tensor out[3];
    ck_assert_tci_ok(th_run(g, n, in, out));
    for (int i = 0; i < 3; i++) ck_assert_int_eq(((uint8_t *)out[0].data)[i], 0);
    ck_assert_float_eq(*(float *)out[1].data, 1.f);
    ck_assert_int_eq(*(uint8_t *)out[2].data, 0);
    th_free(out, 3);
    /* all negative: the range is [min, 0], zero point 255 */
    float neg[2] = {-2.55f, -1.f};
    int64_t d2 = 2;
    tci_tensor inn[1] = {T(FLOAT, 1, &d2, neg)};
    ck_assert_tci_ok(th_run(g, n, inn, out));
    ck_assert_int_eq(*(uint8_t *)out[2].data, 255);
    ck_assert_int_eq(((uint8_t *)out[0].data)[0], 0);
    ck_assert_int_eq(((uint8_t *)out[0].data)[1], 155); /* -1 / 0.01 + 255 */
    th_free(out, 3);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_matmul_integer_zero_points_and_batch) {
    /* A 2x(2x3) int8 with a per-row zero point, B 3x2 uint8 with a per-column one */
    int8_t a[12] = {1, 2, 3, 4, 5, 6, -1, -2, -3, 127, -128, 0};
    uint8_t b[6] = {10, 20, 30, 40, 50, 60};
    int8_t za[2] = {1, -1};
    uint8_t zb[2] = {10, 20};
    int64_t ad[3] = {2, 2, 3}, bd[2] = {3, 2}, zd = 2;
    tci_tensor in[4] = {T(INT8, 3, ad, a), T(UINT8, 2, bd, b), T(INT8, 1, &zd, za),
                        T(UINT8, 1, &zd, zb)};
    tci_tensor y;
    ck_assert_tci_ok(run1("MatMulInteger", 10, 4, in, &y, NULL));
    ck_assert_int_eq(y.dtype, TCI_DTYPE_INT32);
    int64_t yd[3] = {2, 2, 2};
    th_assert_dims(&y, 3, yd);
    /* B - zb = [[0, 0], [10, 20], [20, 40]] */
    int32_t want[8];
    for (int bi = 0; bi < 2; bi++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                int32_t s = 0;
                for (int k = 0; k < 3; k++)
                    s += (a[(bi * 2 + i) * 3 + k] - za[i]) * (b[k * 2 + j] - zb[j]);
                want[(bi * 2 + i) * 2 + j] = s;
            }
    for (int i = 0; i < 8; i++) ck_assert_int_eq(((int32_t *)y.data)[i], want[i]);
    ck_assert_int_eq(want[7], 128 * 0 + (-128 + 1) * 20 + 1 * 40); /* a worked sum */
    th_free(&y, 1);
    /* a zero point of another length */
    int64_t z3 = 3;
    int8_t za3[3] = {0, 0, 0};
    tci_tensor bad[3] = {T(INT8, 3, ad, a), T(UINT8, 2, bd, b), T(INT8, 1, &z3, za3)};
    ck_assert_tci_error(run1("MatMulInteger", 10, 3, bad, &y, NULL), TCI_ERR_UNSUPPORTED,
                        "a_zero_point has shape [3]: only one value, or one per row of A (2)");
}
END_TEST

START_TEST(test_qlinear_matmul_per_column) {
    /* 1x2 times 2x2 with b scaled per column: y = round(sum * a_s * b_s[j] / y_s) + y_zp */
    uint8_t a[2] = {130, 126}, azp = 128, b[4] = {3, 1, 2, 5}, bzp[2] = {0, 1}, yzp = 100;
    float as = 0.5f, bs[2] = {1.f, 0.25f}, ys = 1.f;
    int64_t ad[2] = {1, 2}, bd[2] = {2, 2}, zd = 2;
    tci_tensor in[8] = {T(UINT8, 2, ad, a),     T(FLOAT, 0, NULL, &as), T(UINT8, 0, NULL, &azp),
                        T(UINT8, 2, bd, b),     T(FLOAT, 1, &zd, bs),   T(UINT8, 1, &zd, bzp),
                        T(FLOAT, 0, NULL, &ys), T(UINT8, 0, NULL, &yzp)};
    tci_tensor y;
    ck_assert_tci_ok(run1("QLinearMatMul", 21, 8, in, &y, NULL));
    /* (2, -2) x [[3, 0], [2, 4]] = (2, -8); * 0.5 * (1, 0.25) = (1, -1) */
    ck_assert_int_eq(((uint8_t *)y.data)[0], 101);
    ck_assert_int_eq(((uint8_t *)y.data)[1], 99);
    th_free(&y, 1);
    /* per column on A's side is refused */
    tci_tensor bad[8];
    memcpy(bad, in, sizeof bad);
    bad[1] = T(FLOAT, 1, &zd, bs);
    ck_assert_tci_error(run1("QLinearMatMul", 21, 8, bad, &y, NULL), TCI_ERR_INVALID_MODEL,
                        "a_scale has shape [2]: it must be a scalar");
}
END_TEST

static void attr_conv_group_stride(ir_graph *g, ir_node *n) {
    th_attr_int(g, n, "group", 2);
    const int64_t strides[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
    th_attr_ints(g, n, "strides", strides, 2);
    th_attr_ints(g, n, "pads", pads, 4);
}

/* The integer convolution by its definition, for x (1, 2, 3, 3), w (2, 1, 2, 2), group 2,
 * stride 2, pads 1: output (1, 2, 2, 2). */
static void conv_reference(const uint8_t *x, int32_t xz, const int8_t *w, const int8_t *wz,
                           int32_t *y) {
    for (int m = 0; m < 2; m++)
        for (int oy = 0; oy < 2; oy++)
            for (int ox = 0; ox < 2; ox++) {
                int32_t s = 0;
                for (int ky = 0; ky < 2; ky++)
                    for (int kx = 0; kx < 2; kx++) {
                        int iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
                        if (iy < 0 || iy >= 3 || ix < 0 || ix >= 3) continue;
                        s += (x[m * 9 + iy * 3 + ix] - xz) * (w[m * 4 + ky * 2 + kx] - wz[m]);
                    }
                y[(m * 2 + oy) * 2 + ox] = s;
            }
}

START_TEST(test_conv_integer_groups_and_channel_zero_points) {
    uint8_t x[18];
    for (int i = 0; i < 18; i++) x[i] = (uint8_t)(i * 13 % 251);
    int8_t w[8] = {1, -2, 3, -4, 127, -128, 5, 0}, wz[2] = {1, -3};
    uint8_t xz = 7;
    int64_t xd[4] = {1, 2, 3, 3}, wd[4] = {2, 1, 2, 2}, zd = 2;
    tci_tensor in[4] = {T(UINT8, 4, xd, x), T(INT8, 4, wd, w), T(UINT8, 0, NULL, &xz),
                        T(INT8, 1, &zd, wz)};
    tci_tensor y;
    ck_assert_tci_ok(run1("ConvInteger", 10, 4, in, &y, attr_conv_group_stride));
    int64_t yd[4] = {1, 2, 2, 2};
    th_assert_dims(&y, 4, yd);
    int32_t want[8];
    conv_reference(x, xz, w, wz, want);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(((int32_t *)y.data)[i], want[i]);
    th_free(&y, 1);

    /* QLinearConv of the same, with a bias and per-channel w scales: (sum + B) * x_s * w_s / y_s
     * rounded half to even, + y_zp, saturated */
    float xs = 0.5f, ws[2] = {0.25f, 1.f}, ys = 2.f;
    int8_t yz = -10;
    int32_t bias[2] = {3, -1000};
    tci_tensor q[9] = {T(UINT8, 4, xd, x),     T(FLOAT, 0, NULL, &xs), T(UINT8, 0, NULL, &xz),
                       T(INT8, 4, wd, w),      T(FLOAT, 1, &zd, ws),   T(INT8, 1, &zd, wz),
                       T(FLOAT, 0, NULL, &ys), T(INT8, 0, NULL, &yz),  T(INT32, 1, &zd, bias)};
    ck_assert_tci_ok(run1("QLinearConv", 10, 9, q, &y, attr_conv_group_stride));
    ck_assert_int_eq(y.dtype, TCI_DTYPE_INT8);
    for (int i = 0; i < 8; i++) {
        int m = i / 4;
        float v = nearbyintf((float)(want[i] + bias[m]) * (xs * ws[m] / ys)) + (float)yz;
        int32_t e = v < -128.f ? -128 : v > 127.f ? 127 : (int32_t)v;
        ck_assert_int_eq(((int8_t *)y.data)[i], e);
    }
    th_free(&y, 1);
    /* B of the wrong length */
    int64_t d3 = 3;
    int32_t bias3[3] = {0, 0, 0};
    q[8] = T(INT32, 1, &d3, bias3);
    ck_assert_tci_error(run1("QLinearConv", 10, 9, q, &y, attr_conv_group_stride),
                        TCI_ERR_INVALID_MODEL, "B must be 1-D with one value per output channel");
}
END_TEST

/* x -> QuantizeLinear -> DequantizeLinear -> Conv(W = DequantizeLinear(int8 constant)) -> y */
static ir_graph *qdq_graph(void) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 2, 4, 4}, wd[4] = {2, 2, 1, 1}, cd = 2;
    int8_t w[4] = {10, -20, 30, 127};
    float ws[2] = {0.01f, 0.02f}, xs = 0.05f;
    int8_t wz[2] = {0, 0}, xz = 3;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *xq_s = th_named(g, "x_scale", TCI_DTYPE_FLOAT, 0, NULL, &xs);
    ir_tensor *xq_z = th_named(g, "x_zero", TCI_DTYPE_INT8, 0, NULL, &xz);
    ir_tensor *wq = th_named(g, "w_q", TCI_DTYPE_INT8, 4, wd, w);
    ir_tensor *wq_s = th_named(g, "w_scale", TCI_DTYPE_FLOAT, 1, &cd, ws);
    ir_tensor *wq_z = th_named(g, "w_zero", TCI_DTYPE_INT8, 1, &cd, wz);
    ir_tensor *xq = th_named(g, "x_q", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *xdq = th_named(g, "x_dq", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *wdq = th_named(g, "w_dq", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *q_in[3] = {x, xq_s, xq_z}, *dq_in[3] = {xq, xq_s, xq_z};
    ir_tensor *w_in[3] = {wq, wq_s, wq_z}, *conv_in[2] = {xdq, wdq};
    th_node_io(g, "q", "QuantizeLinear", 13, q_in, 3, &xq, 1);
    th_node_io(g, "dq", "DequantizeLinear", 13, dq_in, 3, &xdq, 1);
    ir_node *wn = th_node_io(g, "w_dq", "DequantizeLinear", 13, w_in, 3, &wdq, 1);
    th_attr_int(g, wn, "axis", 0);
    th_node_io(g, "conv", "Conv", 13, conv_in, 2, &y, 1);
    th_graph_io(g, &x, 1, &y, 1);
    return g;
}

START_TEST(test_qdq_weights_fold_for_the_gpu) {
    ir_graph *g = qdq_graph();
    ck_assert_tci_ok(pass_optimize(g));
    /* the weight's DequantizeLinear is gone: Conv reads an fp32 constant */
    const ir_node *conv = NULL;
    for (size_t i = 0; i < g->num_nodes; i++) {
        ck_assert_str_ne(g->nodes[i]->name, "w_dq");
        if (strcmp(g->nodes[i]->name, "conv") == 0) conv = g->nodes[i];
    }
    ck_assert_ptr_nonnull(conv);
    const ir_tensor *w = conv->inputs[1];
    ck_assert_ptr_nonnull(w->data);
    ck_assert_int_eq(w->dtype, TCI_DTYPE_FLOAT);
    const float want[4] = {0.1f, -0.2f, 0.6f, 2.54f}; /* per output channel: 0.01, 0.02 */
    th_assert_near(w->data, want, 4, 1e-7f);
    /* the pair on the activation becomes float ops (test_qdq_pair_emulated_for_the_gpu): the
     * whole graph plans for the GPU */
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* x (1, 3, 4, 4) -> QuantizeLinear -> DequantizeLinear -> Relu -> y; per tensor (int8, zero
 * point 3) or per channel along axis 1 (uint8, zero points 0, 128, 250). */
static ir_graph *pair_graph(bool per_channel) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 3, 4, 4}, cd = 3;
    static const float s1 = 0.1f, s3[3] = {0.1f, 0.25f, 0.02f};
    static const int8_t z1 = 3;
    static const uint8_t z3[3] = {0, 128, 250};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *s = per_channel ? th_named(g, "s", TCI_DTYPE_FLOAT, 1, &cd, s3)
                               : th_named(g, "s", TCI_DTYPE_FLOAT, 0, NULL, &s1);
    ir_tensor *z = per_channel ? th_named(g, "z", TCI_DTYPE_UINT8, 1, &cd, z3)
                               : th_named(g, "z", TCI_DTYPE_INT8, 0, NULL, &z1);
    ir_tensor *q = th_named(g, "q", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *dq = th_named(g, "dq", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *q_in[3] = {x, s, z}, *dq_in[3] = {q, s, z};
    th_node_io(g, "quant", "QuantizeLinear", 13, q_in, 3, &q, 1);
    th_node_io(g, "dequant", "DequantizeLinear", 13, dq_in, 3, &dq, 1);
    th_node_io(g, "relu", "Relu", 13, &dq, 1, &y, 1);
    th_graph_io(g, &x, 1, &y, 1);
    return g;
}

static void run_graph(const ir_graph *g, const float *x, float *y, int n) {
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(g, &ex));
    int64_t xd[4] = {1, 3, 4, 4};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 4, xd, x);
    ck_assert_tci_ok(exec_cpu_run(ex, &in, 1));
    memcpy(y, exec_cpu_output(ex, 0)->data, (size_t)n * sizeof *y);
    exec_cpu_destroy(ex);
}

START_TEST(test_qdq_pair_emulated_for_the_gpu) {
    enum { N = 48 };
    float x[N], want[N], got[N];
    /* ties (k + 0.5) * s, values past both ends of the range, and others */
    for (int i = 0; i < N; i++)
        x[i] = i % 4 == 0 ? ((float)(i - 24) + 0.5f) * 0.1f
               : i % 4 == 1 ? (float)(i - 24) * 4.f
                            : sinf((float)i) * 3.f;
    ir_graph *g = pair_graph(false);
    ck_assert_tci_ok(pass_optimize(g));
    run_graph(g, x, want, N);
    ir_graph_destroy(g);

    g = pair_graph(false);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_emulate_qdq(g));
    /* Div, Round, Clip, Mul, Relu: no quantisation node is left */
    ck_assert_int_eq(g->num_nodes, 5);
    for (size_t i = 0; i < g->num_nodes; i++) {
        op_pattern pat = {0};
        if (g->nodes[i]->desc->pattern) g->nodes[i]->desc->pattern(g->nodes[i], &pat);
        ck_assert_int_ne(pat.kind, OP_PATTERN_QUANTIZE);
        ck_assert_int_ne(pat.kind, OP_PATTERN_DEQUANTIZE);
    }
    /* the float ops give the pair's values on the reference, ties and saturation included */
    run_graph(g, x, got, N);
    int ties = 0, saturated = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_msg(got[i] == want[i], "element %d (x %g): %g, expected %g", i, (double)x[i],
                      (double)got[i], (double)want[i]);
        ties += x[i] / 0.1f - floorf(x[i] / 0.1f) == 0.5f;
        saturated += want[i] == (127.f - 3.f) * 0.1f;
    }
    ck_assert_int_gt(ties, 0);
    ck_assert_int_gt(saturated, 0);
    /* for the GPU: Round in the Div's step (x / s rounded in fp32), and a plan is built */
    ck_assert_tci_ok(pass_fuse_for_gpu(g));
    ck_assert_tci_ok(pass_assign_layouts(g));
    bool round_fused = false;
    for (size_t i = 0; i < g->num_nodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->epilogue && n->desc->binary == BINARY_DIV && n->epilogue->act.kind == ACT_ROUND)
            round_fused = true;
    }
    ck_assert(round_fused);
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    plan_destroy(p);
    ir_graph_destroy(g);
    /* per channel: stays (a per-channel Div would divide NHWC8's padding by zero), refused */
    g = pair_graph(true);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_int_eq(g->num_nodes, 3);
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED,
                        "node 'quant' (QuantizeLinear): op QuantizeLinear has no GPU path");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_qdq_pair_unmatched_stays) {
    /* the DequantizeLinear's scale differs from the QuantizeLinear's: left alone, refused */
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[2] = {2, 2};
    float s1 = 0.5f, s2 = 0.25f;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL);
    ir_tensor *sa = th_named(g, "sa", TCI_DTYPE_FLOAT, 0, NULL, &s1);
    ir_tensor *sb = th_named(g, "sb", TCI_DTYPE_FLOAT, 0, NULL, &s2);
    ir_tensor *q = th_named(g, "q", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *q_in[2] = {x, sa}, *dq_in[2] = {q, sb};
    th_node_io(g, "quant", "QuantizeLinear", 13, q_in, 2, &q, 1);
    th_node_io(g, "dequant", "DequantizeLinear", 13, dq_in, 2, &y, 1);
    th_graph_io(g, &x, 1, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_int_eq(g->num_nodes, 2);
    plan *p;
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED,
                        "node 'quant' (QuantizeLinear): op QuantizeLinear has no GPU path");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("quant");
    tcase_add_test(tc, test_quantize_ties_saturation_nan);
    tcase_add_test(tc, test_quantize_per_axis_and_blocks);
    tcase_add_test(tc, test_dequantize_int32_and_float16);
    tcase_add_test(tc, test_quant_refusals);
    tcase_add_test(tc, test_dynamic_quantize_all_zero);
    tcase_add_test(tc, test_matmul_integer_zero_points_and_batch);
    tcase_add_test(tc, test_qlinear_matmul_per_column);
    tcase_add_test(tc, test_conv_integer_groups_and_channel_zero_points);
    tcase_add_test(tc, test_qdq_weights_fold_for_the_gpu);
    tcase_add_test(tc, test_qdq_pair_emulated_for_the_gpu);
    tcase_add_test(tc, test_qdq_pair_unmatched_stays);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
