/* Conv and ConvTranspose: hand-computed cases, cases checked against ONNX Runtime, shape
 * inference with unknown dims, version selection and every error path. */
#include <stdlib.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

/* The ONNX Runtime cases below use these inputs: X from seed 5, W from seed 7, B from seed 3. */
static float *pattern(int64_t count, int64_t seed) {
    float *v = malloc((size_t)(count ? count : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < count; i++) v[i] = (float)((i * seed + 3) % 17 - 8) / 8.0f;
    return v;
}

/* conv_2d_group_want: ONNX Runtime 1.32 output, shape [2, 4, 3, 3] */
static const float conv_2d_group_want[72] = {
    0.125f,     0.46875f,   -0.78125f,  -1.8125f,   -2.546875f, -0.265625f, -1.484375f, 1.265625f,
    -0.625f,    -0.890625f, 0.953125f,  0.578125f,  -1.046875f, -0.59375f,  -1.359375f, 0.625f,
    0.359375f,  -0.09375f,  0.625f,     1.046875f,  0.359375f,  1.859375f,  1.109375f,  -0.734375f,
    1.109375f,  -0.3125f,   0.765625f,  0.90625f,   1.5f,       0.640625f,  2.3125f,    1.6875f,
    -0.65625f,  1.59375f,   -0.1875f,   1.28125f,   -1.328125f, 0.078125f,  -0.15625f,  0.0f,
    0.0625f,    -0.71875f,  0.171875f,  -1.0625f,   0.09375f,   -0.015625f, -1.625f,    -0.421875f,
    -1.71875f,  0.0625f,    0.265625f,  0.359375f,  0.625f,     -1.796875f, 1.4375f,    0.265625f,
    -0.671875f, -1.828125f, -1.515625f, 0.578125f,  0.78125f,   2.015625f,  0.359375f,  1.921875f,
    0.390625f,  -0.15625f,  -1.46875f,  -1.296875f, 1.140625f,  1.203125f,  2.34375f,   0.578125f};
/* conv_3d_want: ONNX Runtime 1.32 output, shape [1, 3, 4, 2, 3] */
static const float conv_3d_want[72] = {
    -0.96875f,  -0.5625f,   -0.484375f, -1.53125f,  -0.84375f,  -0.515625f, -0.75f,     -1.484375f,
    -1.703125f, 0.265625f,  -0.703125f, -1.359375f, -0.984375f, 0.140625f,  -1.71875f,  -2.078125f,
    -1.453125f, 0.625f,     -1.484375f, -2.21875f,  1.71875f,   -0.703125f, -1.40625f,  -2.171875f,
    -0.4375f,   -0.21875f,  -0.171875f, 0.03125f,   -0.796875f, 0.046875f,  -1.484375f, -0.734375f,
    0.09375f,   0.796875f,  -0.546875f, -0.65625f,  1.015625f,  -0.890625f, -1.609375f, -1.46875f,
    2.765625f,  -0.890625f, -0.734375f, -0.515625f, 0.140625f,  -0.546875f, -1.625f,    -0.328125f,
    0.09375f,   0.125f,     0.140625f,  0.0f,       -0.484375f, 0.609375f,  1.234375f,  -1.046875f,
    0.5625f,    -0.265625f, 1.203125f,  -0.484375f, 1.953125f,  1.53125f,   -1.234375f, -0.859375f,
    1.140625f,  -0.015625f, -1.046875f, 0.125f,     0.421875f,  1.203125f,  -1.578125f, 2.3125f};
/* conv_depthwise_want: ONNX Runtime 1.32 output, shape [1, 6, 3, 3] */
static const float conv_depthwise_want[54] = {
    -0.796875f, 1.71875f,   -0.6875f,   -1.625f,    0.890625f,  -0.59375f,  -1.34375f, -0.890625f,
    -0.34375f,  -0.46875f,  -1.4375f,   1.0625f,    -0.25f,     -0.328125f, 0.921875f, -0.015625f,
    2.234375f,  -1.046875f, -0.109375f, 1.984375f,  -1.109375f, 0.84375f,   1.453125f, -0.1875f,
    -0.6875f,   0.390625f,  0.53125f,   0.46875f,   -0.796875f, 1.421875f,  -1.125f,   -1.328125f,
    0.640625f,  0.625f,     -1.15625f,  -0.453125f, 0.515625f,  0.828125f,  -0.53125f, 0.828125f,
    0.015625f,  -0.140625f, 1.234375f,  -0.8125f,   0.8125f,    -1.046875f, 0.28125f,  1.1875f,
    -0.765625f, -0.34375f,  0.796875f,  -0.390625f, -1.1875f,   -0.1875f};
/* convt_2d_want: ONNX Runtime 1.32 output, shape [2, 4, 5, 6] */
static const float convt_2d_want[240] = {
    -0.25f,     -0.484375f, -0.625f,    -0.25f,     -0.71875f,  -0.625f,    -2.390625f, 0.125f,
    -0.625f,    0.53125f,   -1.140625f, -0.625f,    -0.25f,     -0.953125f, -0.625f,    -0.25f,
    -0.390625f, -0.625f,    0.46875f,   -1.5625f,   -0.625f,    -1.59375f,  0.125f,     -0.625f,
    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.21875f,  -0.984375f,
    -0.25f,     -0.296875f, 0.03125f,   -0.25f,     0.59375f,   -2.203125f, -0.25f,     -0.890625f,
    1.15625f,   -0.25f,     -0.375f,    1.046875f,  -0.25f,     -0.1875f,   -1.390625f, -0.25f,
    -0.984375f, 0.4375f,    -0.25f,     0.328125f,  -0.875f,    -0.25f,     -0.25f,     -0.25f,
    -0.25f,     -0.25f,     -0.25f,     -0.25f,     0.609375f,  -0.171875f, 0.125f,     0.03125f,
    0.34375f,   0.125f,     1.40625f,   -0.359375f, 0.125f,     -0.015625f, 0.40625f,   0.125f,
    -0.8125f,   0.59375f,   0.125f,     0.203125f,  0.046875f,  0.125f,     -0.390625f, 1.015625f,
    0.125f,     0.15625f,   0.0f,       0.125f,     0.125f,     0.125f,     0.125f,     0.125f,
    0.125f,     0.125f,     0.28125f,   0.828125f,  0.5f,       0.6875f,    0.46875f,   0.5f,
    -0.046875f, -0.484375f, 0.5f,       0.765625f,  0.65625f,   0.5f,       0.828125f,  -0.15625f,
    0.5f,       0.4375f,    0.546875f,  0.5f,       1.25f,      0.265625f,  0.5f,       0.390625f,
    0.5f,       0.5f,       0.5f,       0.5f,       0.5f,       0.5f,       0.5f,       0.5f,
    -2.375f,    -0.515625f, -0.625f,    -0.25f,     -0.484375f, -0.625f,    -0.796875f, -0.46875f,
    -0.625f,    -2.390625f, 0.125f,     -0.625f,    -0.25f,     -0.71875f,  -0.625f,    -0.25f,
    -0.953125f, -0.625f,    -0.390625f, -0.859375f, -0.625f,    0.46875f,   -1.5625f,   -0.625f,
    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.140625f, -0.140625f,
    -0.25f,     -0.21875f,  -0.984375f, -0.25f,     -0.046875f, -0.515625f, -0.25f,     0.59375f,
    -2.203125f, -0.25f,     -0.296875f, 0.03125f,   -0.25f,     -0.375f,    1.046875f,  -0.25f,
    -0.4375f,   -0.109375f, -0.25f,     -0.984375f, 0.4375f,    -0.25f,     -0.25f,     -0.25f,
    -0.25f,     -0.25f,     -0.25f,     -0.25f,     -0.40625f,  0.375f,     0.125f,     0.609375f,
    -0.171875f, 0.125f,     0.171875f,  0.734375f,  0.125f,     1.40625f,   -0.359375f, 0.125f,
    0.03125f,   0.34375f,   0.125f,     -0.8125f,   0.59375f,   0.125f,     0.125f,     0.4375f,
    0.125f,     -0.390625f, 1.015625f,  0.125f,     0.125f,     0.125f,     0.125f,     0.125f,
    0.125f,     0.125f,     0.671875f,  0.125f,     0.5f,       0.28125f,   0.828125f,  0.5f,
    1.0f,       0.234375f,  0.5f,       -0.046875f, -0.484375f, 0.5f,       0.6875f,    0.46875f,
    0.5f,       0.828125f,  -0.15625f,  0.5f,       0.78125f,   0.5625f,    0.5f,       1.25f,
    0.265625f,  0.5f,       0.5f,       0.5f,       0.5f,       0.5f,       0.5f,       0.5f};
/* convt_3d_want: ONNX Runtime 1.32 output, shape [1, 2, 4, 3, 5] */
static const float convt_3d_want[120] = {
    0.28125f,   -0.15625f, 0.078125f,  0.0f,       0.65625f,   0.296875f,  -0.25f,     -0.6875f,
    0.15625f,   0.203125f, 0.203125f,  0.09375f,   0.40625f,   -0.71875f,  0.53125f,   -0.21875f,
    0.671875f,  0.0625f,   0.75f,      -0.1875f,   -0.328125f, -1.140625f, 0.03125f,   0.171875f,
    0.21875f,   0.078125f, 0.234375f,  -0.71875f,  0.40625f,   -0.46875f,  -0.28125f,  -0.0625f,
    1.328125f,  0.09375f,  -1.25f,     -0.453125f, 0.3125f,    -1.15625f,  -0.34375f,  1.28125f,
    0.015625f,  0.5625f,   -0.25f,     -0.25f,     0.0625f,    -0.03125f,  0.71875f,   -0.109375f,
    -1.328125f, 0.25f,     0.421875f,  -1.46875f,  -0.359375f, 1.171875f,  -0.125f,    0.640625f,
    -0.140625f, 0.125f,    0.03125f,   -0.1875f,   0.34375f,   -0.09375f,  -1.28125f,  -0.09375f,
    0.5625f,    0.375f,    -0.171875f, 0.75f,      0.1875f,    -1.625f,    0.21875f,   0.109375f,
    0.546875f,  -0.59375f, 0.65625f,   -0.15625f,  0.734375f,  0.03125f,   0.65625f,   -0.28125f,
    -0.25f,     -1.0625f,  0.140625f,  0.203125f,  0.25f,      0.09375f,   0.25f,      -0.578125f,
    0.53125f,   -0.34375f, -0.3125f,   -0.09375f,  0.84375f,   0.171875f,  -0.375f,    -0.5625f,
    0.203125f,  0.96875f,  -0.234375f, 0.328125f,  -0.0625f,   0.484375f,  -0.296875f, -0.21875f,
    0.09375f,   -0.0625f,  0.6875f,    -0.0625f,   -1.25f,     0.328125f,  0.3125f,    -1.578125f,
    -0.359375f, 1.28125f,  -0.015625f, 0.5625f,    -0.21875f,  0.078125f,  0.0625f,    -0.15625f};
/* convt_shape_want: ONNX Runtime 1.32 output, shape [1, 1, 8, 6] */
static const float convt_shape_want[48] = {
    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.625f,   -1.40625f, 1.40625f,
    -0.40625f,  -2.171875f, 0.0625f,    -1.625f,    -0.625f,    -0.625f,   -0.625f,   -0.625f,
    -0.625f,    -0.625f,    -0.046875f, 1.015625f,  -1.859375f, -0.21875f, -0.75f,    -1.546875f,
    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.625f,    -0.625f,   1.234375f, -1.625f,
    -1.296875f, 1.8125f,    -1.171875f, -1.078125f, -0.625f,    -0.625f,   -0.625f,   -0.625f,
    -0.625f,    -0.625f,    -1.34375f,  -1.1875f,   0.359375f,  -0.96875f, -1.125f,   -0.234375f};

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define INTS(...)                                                                                  \
    ((const int64_t[]){__VA_ARGS__}), (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static tci_tensor ft(int rank, const int64_t *dims, const float *data) {
    return th_tensor(TCI_DTYPE_FLOAT, rank, dims, data);
}

static tci_tensor unknown_rank(void) {
    tci_tensor t = th_tensor(TCI_DTYPE_FLOAT, 0, NULL, NULL);
    t.rank = -1;
    return t;
}

static tci_tensor omitted(void) { return th_tensor(TCI_DTYPE_UNDEFINED, 0, NULL, NULL); }

/* Runs the node and checks Y's shape and values. */
static void check_y(ir_graph *g, ir_node *n, const tci_tensor *in, int rank, const int64_t *dims,
                    const float *want) {
    tci_tensor y;
    ck_assert_tci_ok(th_run(g, n, in, &y));
    ck_assert_int_eq(y.dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(y.rank, rank);
    int64_t count = 1;
    for (int i = 0; i < rank; i++) {
        ck_assert_int_eq(y.dims[i], dims[i]);
        count *= dims[i];
    }
    th_assert_near(y.data, want, (size_t)count, 1e-5f);
    th_free(&y, 1);
}

/* Runs the node on x = 1, 2, ... (1 x 1 x len) and w (1 x 1 x k) and checks Y's values. */
static void check_1d(ir_graph *g, ir_node *n, int64_t len, const float *w, int64_t k,
                     const float *want, int64_t out_len) {
    float x[16];
    for (int64_t i = 0; i < len; i++) x[i] = (float)(i + 1);
    tci_tensor in[3] = {ft(3, DIMS(1, 1, len), x), ft(3, DIMS(1, 1, k), w), omitted()};
    check_y(g, n, in, 3, DIMS(1, 1, out_len), want);
}

/* Shape inference alone, as at build time. */
static tci_status infer_only(ir_graph *g, ir_node *n, const tci_tensor *in, tci_tensor *y) {
    TRY_STATUS(op_prepare_node(n, g->arena));
    const tci_tensor *ins[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n->num_inputs; i++)
        ins[i] = in[i].dtype == TCI_DTYPE_UNDEFINED && in[i].rank >= 0 ? NULL : &in[i];
    memset(y, 0, sizeof *y);
    y->rank = -1;
    tci_tensor *outs[1] = {y};
    return n->desc->infer(n, ins, outs);
}


static const float ones9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};

/* ---- Conv ---- */

START_TEST(test_conv_2d_pads) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float x[25];
    for (int i = 0; i < 25; i++) x[i] = (float)i;
    tci_tensor in[2] = {ft(4, DIMS(1, 1, 5, 5), x), ft(4, DIMS(1, 1, 3, 3), ones9)};
    /* ONNX's basic_conv_with_padding: 3x3 box sums of 0..24 */
    static const float padded[25] = {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                                     117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84};
    ir_node *n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "pads", INTS(1, 1, 1, 1));
    check_y(g, n, in, 4, DIMS(1, 1, 5, 5), padded);
    static const float valid[9] = {54, 63, 72, 99, 108, 117, 144, 153, 162};
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "kernel_shape", INTS(3, 3));
    check_y(g, n, in, 4, DIMS(1, 1, 3, 3), valid);
    /* stride 2 along H only, asymmetric pads (ONNX conv_with_strides_and_asymmetric_padding) */
    float x35[35];
    for (int i = 0; i < 35; i++) x35[i] = (float)i;
    tci_tensor in35[2] = {ft(4, DIMS(1, 1, 7, 5), x35), ft(4, DIMS(1, 1, 3, 3), ones9)};
    static const float strided[12] = {12, 27, 24, 63, 108, 81, 123, 198, 141, 112, 177, 124};
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "pads", INTS(1, 1, 1, 1));
    th_attr_ints(g, n, "strides", INTS(2, 2));
    check_y(g, n, in35, 4, DIMS(1, 1, 4, 3), strided);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_conv_1d_bias_stride_dilation) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float x[7] = {1, 2, 3, 4, 5, 6, 7}, w[3] = {1, 0, 2}, b[1] = {0.5f};
    tci_tensor in[3] = {ft(3, DIMS(1, 1, 7), x), ft(3, DIMS(1, 1, 3), w), ft(1, DIMS(1), b)};
    /* dilated kernel spans 5: y[j] = x[2j] + 2 x[2j + 4] + 0.5 */
    ir_node *n = th_node(g, "Conv", 11, 3, 1);
    th_attr_ints(g, n, "dilations", INTS(2));
    th_attr_ints(g, n, "strides", INTS(2));
    check_y(g, n, in, 3, DIMS(1, 1, 2), (const float[]){11.5f, 17.5f});
    /* one zero before, two after: windows start at -1, 1, 3 */
    n = th_node(g, "Conv", 11, 3, 1);
    th_attr_ints(g, n, "dilations", INTS(2));
    th_attr_ints(g, n, "strides", INTS(2));
    th_attr_ints(g, n, "pads", INTS(1, 2));
    check_y(g, n, in, 3, DIMS(1, 1, 3), (const float[]){8.5f, 14.5f, 4.5f});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_conv_auto_pad) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* k 3, stride 2 on 1..5: output ceil(5/2) = 3, total pad 2 split 1/1 */
    static const char *const same[] = {"SAME_UPPER", "SAME_LOWER"};
    for (int i = 0; i < 2; i++) {
        ir_node *n = th_node(g, "Conv", 11, 2, 1);
        th_attr_string(g, n, "auto_pad", same[i]);
        th_attr_ints(g, n, "strides", INTS(2));
        check_1d(g, n, 5, ones9, 3, (const float[]){3, 9, 9}, 3);
    }
    /* k 2, stride 1: the odd pad goes at the end for SAME_UPPER, at the start for SAME_LOWER */
    ir_node *n = th_node(g, "Conv", 11, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME_UPPER");
    check_1d(g, n, 5, ones9, 2, (const float[]){3, 5, 7, 9, 5}, 5);
    n = th_node(g, "Conv", 11, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME_LOWER");
    check_1d(g, n, 5, ones9, 2, (const float[]){1, 3, 5, 7, 9}, 5);
    n = th_node(g, "Conv", 1, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME_LOWER");
    check_1d(g, n, 5, ones9, 2, (const float[]){1, 3, 5, 7, 9}, 5);
    /* SAME pads for the dilated extent: k 2 dilation 2 spans 3 */
    n = th_node(g, "Conv", 22, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME_UPPER");
    th_attr_ints(g, n, "dilations", INTS(2));
    check_1d(g, n, 5, ones9, 2, (const float[]){2, 4, 6, 8, 4}, 5);
    n = th_node(g, "Conv", 11, 2, 1);
    th_attr_string(g, n, "auto_pad", "VALID");
    th_attr_ints(g, n, "strides", INTS(2));
    check_1d(g, n, 5, ones9, 3, (const float[]){6, 12}, 2);
    /* SAME even when the kernel is wider than the input */
    n = th_node(g, "Conv", 11, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME_UPPER");
    check_1d(g, n, 2, ones9, 5, (const float[]){3, 3}, 2);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_conv_groups) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float x[4] = {1, 2, 3, 4};
    /* depthwise: channel c is scaled by w[c] alone */
    float w2[2] = {10, 100};
    tci_tensor in[2] = {ft(4, DIMS(1, 2, 1, 2), x), ft(4, DIMS(2, 1, 1, 1), w2)};
    ir_node *n = th_node(g, "Conv", 17, 2, 1);
    th_attr_int(g, n, "group", 2);
    check_y(g, n, in, 4, DIMS(1, 2, 1, 2), (const float[]){10, 20, 300, 400});
    /* channel multiplier 2: outputs 0-1 read input channel 0, outputs 2-3 channel 1 */
    float w4[4] = {1, 2, 3, 4};
    tci_tensor in4[2] = {ft(4, DIMS(1, 2, 1, 2), x), ft(4, DIMS(4, 1, 1, 1), w4)};
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_int(g, n, "group", 2);
    check_y(g, n, in4, 4, DIMS(1, 4, 1, 2), (const float[]){1, 2, 2, 4, 9, 12, 12, 16});
    /* group 1 over two channels sums them */
    float w11[2] = {1, -1};
    tci_tensor in11[2] = {ft(4, DIMS(1, 2, 1, 2), x), ft(4, DIMS(1, 2, 1, 1), w11)};
    n = th_node(g, "Conv", 17, 2, 1);
    check_y(g, n, in11, 4, DIMS(1, 1, 1, 2), (const float[]){-2, -2});
    ir_graph_destroy(g);
}
END_TEST

/* The GPU lowering's merged groups (4 and 6 channels per group, block-diagonal weights of
 * multiples of 8 channels) compute what the original grouped Conv does: the plan's weights and
 * group count, run through the CPU reference, give the original node's output. */
START_TEST(test_conv_group_merge_equivalent) {
    const struct {
        int64_t c, group;
    } cases[] = {{16, 4}, {24, 4}, {48, 8}, {12, 3}};
    for (int t = 0; t < 4; t++) {
        int64_t c = cases[t].c, group = cases[t].group, cg = c / group;
        int64_t xd[4] = {1, c, 5, 5}, wd[4] = {c, cg, 3, 3};
        float *x = pattern(c * 25, 5), *w = pattern(c * cg * 9, 7);
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_tensor *xt = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
        ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w);
        ir_tensor *yt = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
        th_graph_io(g, &xt, 1, &yt, 1);
        ir_node *conv = th_node_io(g, "conv", "Conv", 11, (ir_tensor *[]){xt, wt}, 2, &yt, 1);
        th_attr_int(g, conv, "group", group);
        th_attr_ints(g, conv, "pads", INTS(1, 1, 1, 1));
        ck_assert_tci_ok(pass_optimize(g));
        ck_assert_tci_ok(pass_prepare_for_gpu(g));
        plan *p;
        ck_assert_tci_ok(plan_build(g, NULL, &p));
        const plan_step *s = NULL;
        for (int i = 0; i < p->num_steps; i++)
            if (p->steps[i].kind == PLAN_STEP_CONV) s = &p->steps[i];
        ck_assert_ptr_nonnull(s);
        const plan_tensor *pw = &p->tensors[s->inputs[1]];
        int64_t groups = s->u.conv.geom.groups;
        ck_assert_int_eq((c / groups) % 8 == 0 || groups == 1, 1);
        ck_assert_int_eq(pw->dims[1], c / groups);

        ir_graph *h;
        ck_assert_tci_ok(ir_graph_create(&h));
        ir_node *orig = th_node(h, "Conv", 11, 2, 1);
        th_attr_int(h, orig, "group", group);
        th_attr_ints(h, orig, "pads", INTS(1, 1, 1, 1));
        ir_node *merged = th_node(h, "Conv", 11, 2, 1);
        th_attr_int(h, merged, "group", groups);
        th_attr_ints(h, merged, "pads", INTS(1, 1, 1, 1));
        tci_tensor in0[2] = {ft(4, xd, x), ft(4, wd, w)};
        tci_tensor in1[2] = {ft(4, xd, x), ft(4, pw->dims, pw->host_data)};
        tci_tensor y0, y1;
        ck_assert_tci_ok(th_run(h, orig, in0, &y0));
        ck_assert_tci_ok(th_run(h, merged, in1, &y1));
        ck_assert_int_eq(y1.dims[1], c);
        th_assert_near(y1.data, y0.data, (size_t)(c * 25), 1e-5f);
        th_free(&y0, 1);
        th_free(&y1, 1);
        ir_graph_destroy(h);
        plan_destroy(p);
        ir_graph_destroy(g);
        free(x);
        free(w);
    }
}
END_TEST

START_TEST(test_conv_3d) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tci_tensor in[2] = {ft(5, DIMS(1, 1, 2, 2, 2), x), ft(5, DIMS(1, 1, 2, 2, 2), ones9)};
    ir_node *n = th_node(g, "Conv", 17, 2, 1);
    check_y(g, n, in, 5, DIMS(1, 1, 1, 1, 1), (const float[]){36});
    /* pad one zero after each axis: the corner windows see 8, 7+8, ... */
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "pads", INTS(0, 0, 0, 1, 1, 1));
    check_y(g, n, in, 5, DIMS(1, 1, 2, 2, 2), (const float[]){36, 20, 22, 12, 26, 14, 15, 8});
    float two = 2;
    tci_tensor in1[2] = {ft(5, DIMS(1, 1, 2, 2, 2), x), ft(5, DIMS(1, 1, 1, 1, 1), &two)};
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(2, 2, 2));
    check_y(g, n, in1, 5, DIMS(1, 1, 1, 1, 1), (const float[]){2});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_conv_onnxruntime) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float *x = pattern(160, 5), *w = pattern(72, 7), *b = pattern(4, 3);
    tci_tensor in[3] = {ft(4, DIMS(2, 4, 5, 4), x), ft(4, DIMS(4, 2, 3, 2), w), ft(1, DIMS(4), b)};
    ir_node *n = th_node(g, "Conv", 17, 3, 1);
    th_attr_int(g, n, "group", 2);
    th_attr_ints(g, n, "strides", INTS(2, 1));
    th_attr_ints(g, n, "pads", INTS(1, 0, 2, 1));
    th_attr_ints(g, n, "dilations", INTS(1, 2));
    check_y(g, n, in, 4, DIMS(2, 4, 3, 3), conv_2d_group_want);

    tci_tensor in3[3] = {ft(5, DIMS(1, 2, 4, 3, 3), x), ft(5, DIMS(3, 2, 2, 3, 2), w),
                         ft(1, DIMS(3), b)};
    n = th_node(g, "Conv", 17, 3, 1);
    th_attr_ints(g, n, "strides", INTS(1, 2, 1));
    th_attr_ints(g, n, "pads", INTS(1, 1, 0, 0, 1, 1));
    check_y(g, n, in3, 5, DIMS(1, 3, 4, 2, 3), conv_3d_want);

    tci_tensor indw[3] = {ft(4, DIMS(1, 3, 5, 5), x), ft(4, DIMS(6, 1, 3, 3), w), omitted()};
    n = th_node(g, "Conv", 17, 3, 1);
    th_attr_int(g, n, "group", 3);
    th_attr_string(g, n, "auto_pad", "SAME_LOWER");
    th_attr_ints(g, n, "strides", INTS(2, 2));
    check_y(g, n, indw, 4, DIMS(1, 6, 3, 3), conv_depthwise_want);
    free(x);
    free(w);
    free(b);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_conv_empty) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float dummy = 0, b[2] = {1, 2};
    tci_tensor in[3] = {ft(3, DIMS(0, 1, 5), &dummy), ft(3, DIMS(2, 1, 3), ones9), omitted()};
    ir_node *n = th_node(g, "Conv", 17, 3, 1);
    check_y(g, n, in, 3, DIMS(0, 2, 3), NULL);
    /* no input channels: only the bias is left */
    tci_tensor in0[3] = {ft(3, DIMS(1, 0, 5), &dummy), ft(3, DIMS(2, 0, 3), &dummy),
                         ft(1, DIMS(2), b)};
    n = th_node(g, "Conv", 17, 3, 1);
    check_y(g, n, in0, 3, DIMS(1, 2, 3), (const float[]){1, 1, 1, 2, 2, 2});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_versions) {
    static const int opsets[][2] = {{1, 1},   {7, 1},   {10, 1}, {11, 11},
                                    {21, 11}, {22, 22}, {28, 22}};
    static const char *const ops[] = {"Conv", "ConvTranspose"};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    for (int o = 0; o < 2; o++)
        for (size_t i = 0; i < sizeof opsets / sizeof opsets[0]; i++) {
            ir_node *n = th_node(g, ops[o], opsets[i][0], 2, 1);
            ck_assert_tci_ok(op_prepare_node(n, g->arena));
            ck_assert_int_eq(n->since_version, opsets[i][1]);
        }
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_conv_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor y;
    /* nothing known: rank unknown too */
    tci_tensor none[2] = {unknown_rank(), unknown_rank()};
    ir_node *n = th_node(g, "Conv", 17, 2, 1);
    ck_assert_tci_ok(infer_only(g, n, none, &y));
    ck_assert_int_eq(y.rank, -1);
    ck_assert_int_eq(y.dtype, TCI_DTYPE_FLOAT);
    /* the attributes give the rank */
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(2, 2));
    ck_assert_tci_ok(infer_only(g, n, none, &y));
    th_assert_dims(&y, 4, DIMS(-1, -1, -1, -1));
    /* W known, X rank unknown */
    tci_tensor wk[2] = {unknown_rank(), ft(4, DIMS(8, 3, 3, 3), NULL)};
    n = th_node(g, "Conv", 17, 2, 1);
    ck_assert_tci_ok(infer_only(g, n, wk, &y));
    th_assert_dims(&y, 4, DIMS(-1, 8, -1, -1));
    /* symbolic batch and height */
    tci_tensor part[2] = {ft(4, DIMS(-1, 3, -1, 32), NULL), ft(4, DIMS(8, 3, 3, 3), NULL)};
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "pads", INTS(1, 1, 1, 1));
    th_attr_ints(g, n, "strides", INTS(1, 2));
    ck_assert_tci_ok(infer_only(g, n, part, &y));
    th_assert_dims(&y, 4, DIMS(-1, 8, -1, 16));
    /* SAME needs no kernel size; the bias gives M */
    tci_tensor same[3] = {ft(4, DIMS(1, 3, 15, -1), NULL), unknown_rank(), ft(1, DIMS(5), NULL)};
    n = th_node(g, "Conv", 17, 3, 1);
    th_attr_string(g, n, "auto_pad", "SAME_UPPER");
    th_attr_ints(g, n, "strides", INTS(2, 2));
    ck_assert_tci_ok(infer_only(g, n, same, &y));
    th_assert_dims(&y, 4, DIMS(1, 5, 8, -1));
    /* a known mismatch is an error already at build time */
    tci_tensor bad[2] = {ft(4, DIMS(-1, 4, -1, -1), NULL), ft(4, DIMS(8, 3, 3, 3), NULL)};
    n = th_node(g, "Conv", 17, 2, 1);
    ck_assert_tci_error(infer_only(g, n, bad, &y), TCI_ERR_INVALID_MODEL,
                        "W has 3 channels per group, expected X's 4 channels / group 1 = 4");
    ir_graph_destroy(g);
}
END_TEST

/* Runs the node and expects it to fail with status and text. */
static void expect_error(ir_graph *g, ir_node *n, const tci_tensor *in, tci_status status,
                         const char *text) {
    tci_tensor y[4];
    ck_assert_int_le(n->num_outputs, 4);
    ck_assert_tci_error(th_run(g, n, in, y), status, text);
}

START_TEST(test_conv_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float *data = pattern(400, 5);
    tci_tensor in[3] = {ft(4, DIMS(1, 4, 5, 5), data), ft(4, DIMS(4, 2, 3, 3), data),
                        ft(1, DIMS(4), data)};
    ir_node *n = th_node(g, "Conv", 17, 3, 1);
    th_attr_int(g, n, "group", 3);
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL, "group 3 does not divide X's 4 channels");
    tci_tensor in_m3[2] = {ft(4, DIMS(1, 4, 5, 5), data), ft(4, DIMS(3, 2, 3, 3), data)};
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_int(g, n, "group", 2);
    expect_error(g, n, in_m3, TCI_ERR_INVALID_MODEL,
                 "group 2 does not divide W's 3 output channels");
    n = th_node(g, "Conv", 17, 3, 1);
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "W has 2 channels per group, expected X's 4 channels / group 1 = 4");
    tci_tensor big[2] = {ft(4, DIMS(1, 4, 2, 5), data), ft(4, DIMS(4, 4, 3, 3), data)};
    tci_tensor in_ok[2] = {ft(4, DIMS(1, 4, 5, 5), data), ft(4, DIMS(4, 4, 3, 3), data)};
    n = th_node(g, "Conv", 17, 2, 1);
    expect_error(g, n, big, TCI_ERR_INVALID_MODEL,
                 "spatial dim 0: the kernel (3, 3 with dilation) is larger than the padded input "
                 "(2)");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "dilations", INTS(1, 3));
    expect_error(g, n, in_ok, TCI_ERR_INVALID_MODEL,
                 "spatial dim 1: the kernel (3, 7 with dilation) is larger than the padded input "
                 "(5)");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_int(g, n, "group", 0);
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL, "group 0 must be >= 1");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "pads", INTS(0, -1, 0, 0));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "attribute 'pads' value -1 at index 1 is out of range");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(1, 0));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "attribute 'strides' value 0 at index 1 is out of range");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "dilations", INTS(-2, 1));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "attribute 'dilations' value -2 at index 0 is out of range");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "kernel_shape", INTS(0, 3));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "attribute 'kernel_shape' value 0 at index 0 is out of range");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(1, 1, 1));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL, "X has 2 spatial dims but the attributes give 3");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "kernel_shape", INTS(3, 3));
    th_attr_ints(g, n, "strides", INTS(1));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "attribute 'strides' has 1 values, but other attributes give 2 spatial dims");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "pads", INTS(1, 1, 1));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "attribute 'pads' has 3 values, expected an even count");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "kernel_shape", INTS(3, 2));
    expect_error(g, n, in_ok, TCI_ERR_INVALID_MODEL,
                 "kernel_shape[1] = 2 does not match W's spatial dim 3");
    tci_tensor bias3[3] = {ft(4, DIMS(1, 4, 5, 5), data), ft(4, DIMS(4, 4, 3, 3), data),
                           ft(1, DIMS(3), data)};
    n = th_node(g, "Conv", 17, 3, 1);
    expect_error(g, n, bias3, TCI_ERR_INVALID_MODEL,
                 "B has 3 values, expected one per output channel (4)");
    tci_tensor bias2d[3] = {ft(4, DIMS(1, 4, 5, 5), data), ft(4, DIMS(4, 4, 3, 3), data),
                            ft(2, DIMS(2, 2), data)};
    n = th_node(g, "Conv", 17, 3, 1);
    expect_error(g, n, bias2d, TCI_ERR_INVALID_MODEL, "B has rank 2, expected 1");
    tci_tensor rank2[2] = {ft(2, DIMS(1, 4), data), ft(2, DIMS(4, 4), data)};
    n = th_node(g, "Conv", 17, 2, 1);
    expect_error(g, n, rank2, TCI_ERR_INVALID_MODEL,
                 "X has rank 2, expected at least 3 (N, C and spatial dims)");
    tci_tensor mixed[2] = {ft(3, DIMS(1, 4, 5), data), ft(4, DIMS(4, 4, 3, 3), data)};
    n = th_node(g, "Conv", 17, 2, 1);
    expect_error(g, n, mixed, TCI_ERR_INVALID_MODEL, "X has 1 spatial dims but W has 2");
    tci_tensor empty_k[2] = {ft(3, DIMS(1, 4, 5), data), ft(3, DIMS(4, 4, 0), data)};
    n = th_node(g, "Conv", 17, 2, 1);
    expect_error(g, n, empty_k, TCI_ERR_INVALID_MODEL, "W's spatial dim 0 is 0");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME");
    expect_error(g, n, in_ok, TCI_ERR_INVALID_MODEL,
                 "auto_pad 'SAME' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_string(g, n, "auto_pad", "VALID");
    th_attr_ints(g, n, "pads", INTS(0, 0, 0, 0));
    expect_error(g, n, in_ok, TCI_ERR_INVALID_MODEL,
                 "attribute 'pads' cannot be used together with auto_pad VALID");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_ints(g, n, "output_padding", INTS(1, 1));
    expect_error(g, n, in_ok, TCI_ERR_UNSUPPORTED, "unsupported attribute 'output_padding'");
    n = th_node(g, "Conv", 17, 2, 1);
    th_attr_float(g, n, "group", 2.0f);
    expect_error(g, n, in_ok, TCI_ERR_INVALID_MODEL, "attribute 'group' is float, expected int");
    n = th_node(g, "Conv", 17, 1, 1);
    expect_error(g, n, in_ok, TCI_ERR_INVALID_MODEL, "has 1 inputs, expected 2 to 3");
    double d[64] = {0};
    tci_tensor dbl[2] = {th_tensor(TCI_DTYPE_DOUBLE, 4, DIMS(1, 1, 2, 2), d),
                         th_tensor(TCI_DTYPE_DOUBLE, 4, DIMS(1, 1, 1, 1), d)};
    n = th_node(g, "Conv", 17, 2, 1);
    expect_error(g, n, dbl, TCI_ERR_UNSUPPORTED, "input 0 has unsupported dtype double");
    tci_tensor half[2] = {ft(4, DIMS(1, 1, 2, 2), data),
                          th_tensor(TCI_DTYPE_FLOAT16, 4, DIMS(1, 1, 1, 1), d)};
    n = th_node(g, "Conv", 17, 2, 1);
    expect_error(g, n, half, TCI_ERR_UNSUPPORTED, "input 1 has unsupported dtype float16");
    free(data);
    ir_graph_destroy(g);
}
END_TEST

/* ---- ConvTranspose ---- */

START_TEST(test_convt_2d) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float x[9], w[18];
    for (int i = 0; i < 9; i++) x[i] = (float)i;
    for (int i = 0; i < 18; i++) w[i] = 1;
    tci_tensor in[2] = {ft(4, DIMS(1, 1, 3, 3), x), ft(4, DIMS(1, 2, 3, 3), w)};
    /* ONNX's convtranspose: every input scatters a 3x3 box; both output channels alike */
    static const float box[25] = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                                  27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
    float want[50];
    memcpy(want, box, sizeof box);
    memcpy(want + 25, box, sizeof box);
    ir_node *n = th_node(g, "ConvTranspose", 17, 2, 1);
    check_y(g, n, in, 4, DIMS(1, 2, 5, 5), want);
    /* ONNX's convtranspose_pads: strides (3, 2) make 9 x 7, pads (1, 2, 1, 2) crop to 7 x 3 */
    static const float cropped[21] = {1, 1, 3, 1, 1,  3, 7,  4,  9, 7, 4,
                                      9, 7, 4, 9, 13, 7, 15, 13, 7, 15};
    memcpy(want, cropped, sizeof cropped);
    memcpy(want + 21, cropped, sizeof cropped);
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(3, 2));
    th_attr_ints(g, n, "pads", INTS(1, 2, 1, 2));
    check_y(g, n, in, 4, DIMS(1, 2, 7, 3), want);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_convt_1d) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* 1, 2, 3 at stride 2 under a box of 3 */
    ir_node *n = th_node(g, "ConvTranspose", 11, 2, 1);
    th_attr_ints(g, n, "strides", INTS(2));
    check_1d(g, n, 3, ones9, 3, (const float[]){1, 1, 3, 2, 5, 3, 3}, 7);
    /* output_padding adds a position at the end that only the bias reaches */
    float x[3] = {1, 2, 3}, b[1] = {1};
    tci_tensor in[3] = {ft(3, DIMS(1, 1, 3), x), ft(3, DIMS(1, 1, 3), ones9), ft(1, DIMS(1), b)};
    n = th_node(g, "ConvTranspose", 11, 3, 1);
    th_attr_ints(g, n, "strides", INTS(2));
    th_attr_ints(g, n, "output_padding", INTS(1));
    check_y(g, n, in, 3, DIMS(1, 1, 8), (const float[]){2, 2, 4, 3, 6, 4, 4, 1});
    n = th_node(g, "ConvTranspose", 11, 2, 1);
    th_attr_ints(g, n, "strides", INTS(2));
    th_attr_ints(g, n, "output_padding", INTS(1));
    th_attr_ints(g, n, "pads", INTS(1, 1));
    check_1d(g, n, 3, ones9, 3, (const float[]){1, 3, 2, 5, 3, 3}, 6);
    /* ONNX's convtranspose_dilations */
    float xd[9] = {3, 8, 1, 9, 5, 7, 3, 2, 6}, wd[4] = {7, 2, 1, 9};
    tci_tensor ind[2] = {ft(4, DIMS(1, 1, 3, 3), xd), ft(4, DIMS(1, 1, 2, 2), wd)};
    n = th_node(g, "ConvTranspose", 11, 2, 1);
    th_attr_ints(g, n, "dilations", INTS(2, 2));
    check_y(g, n, ind, 4, DIMS(1, 1, 5, 5),
            (const float[]){21, 56, 13, 16, 2,  63, 35, 67, 10, 14, 24, 22, 76,
                            76, 21, 9,  5,  88, 45, 63, 3,  2,  33, 18, 54});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_convt_auto_pad_output_shape) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* full result of 1, 2, 3 at stride 2 is 1 1 3 2 5 3 3; SAME keeps 3 x 2 = 6 of it */
    ir_node *n = th_node(g, "ConvTranspose", 11, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME_UPPER");
    th_attr_ints(g, n, "strides", INTS(2));
    check_1d(g, n, 3, ones9, 3, (const float[]){1, 1, 3, 2, 5, 3}, 6);
    n = th_node(g, "ConvTranspose", 11, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME_LOWER");
    th_attr_ints(g, n, "strides", INTS(2));
    check_1d(g, n, 3, ones9, 3, (const float[]){1, 3, 2, 5, 3, 3}, 6);
    n = th_node(g, "ConvTranspose", 11, 2, 1);
    th_attr_string(g, n, "auto_pad", "VALID");
    th_attr_ints(g, n, "strides", INTS(2));
    check_1d(g, n, 3, ones9, 3, (const float[]){1, 1, 3, 2, 5, 3, 3}, 7);
    /* output_shape 4 of the stride-1 result 1 3 6 5 3: SAME_UPPER crops the end, the others
     * (per the spec's formula) the start */
    static const char *const modes[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    static const float kept[4][4] = {{3, 6, 5, 3}, {1, 3, 6, 5}, {3, 6, 5, 3}, {3, 6, 5, 3}};
    for (int i = 0; i < 4; i++) {
        n = th_node(g, "ConvTranspose", 11, 2, 1);
        th_attr_string(g, n, "auto_pad", modes[i]);
        th_attr_ints(g, n, "output_shape", INTS(4));
        check_1d(g, n, 3, ones9, 3, kept[i], 4);
    }
    /* output_shape overrides pads */
    n = th_node(g, "ConvTranspose", 11, 2, 1);
    th_attr_ints(g, n, "output_shape", INTS(4));
    th_attr_ints(g, n, "pads", INTS(2, 0));
    check_1d(g, n, 3, ones9, 3, kept[0], 4);
    /* one more than the full result: zero at the end, nothing shifted */
    n = th_node(g, "ConvTranspose", 11, 2, 1);
    th_attr_ints(g, n, "strides", INTS(2));
    th_attr_ints(g, n, "output_shape", INTS(8));
    check_1d(g, n, 3, ones9, 3, (const float[]){1, 1, 3, 2, 5, 3, 3, 0}, 8);
    /* the same at opset 1 */
    n = th_node(g, "ConvTranspose", 1, 2, 1);
    th_attr_ints(g, n, "output_shape", INTS(4));
    check_1d(g, n, 3, ones9, 3, kept[0], 4);

    /* ONNX's convtranspose_output_shape and convtranspose_kernel_shape: 10 x 8 */
    float x[9], w[18];
    for (int i = 0; i < 9; i++) x[i] = (float)i;
    for (int i = 0; i < 18; i++) w[i] = 1;
    tci_tensor in[2] = {ft(4, DIMS(1, 1, 3, 3), x), ft(4, DIMS(1, 2, 3, 3), w)};
    float want[160] = {0};
    static const float rows[3][7] = {
        {0, 0, 1, 1, 3, 2, 2}, {3, 3, 7, 4, 9, 5, 5}, {6, 6, 13, 7, 15, 8, 8}};
    for (int c = 0; c < 2; c++)
        for (int r = 0; r < 9; r++) memcpy(want + c * 80 + r * 8, rows[r / 3], sizeof rows[0]);
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(3, 2));
    th_attr_ints(g, n, "output_shape", INTS(10, 8));
    check_y(g, n, in, 4, DIMS(1, 2, 10, 8), want);
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(3, 2));
    th_attr_ints(g, n, "output_padding", INTS(1, 1));
    check_y(g, n, in, 4, DIMS(1, 2, 10, 8), want);
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(3, 2));
    th_attr_ints(g, n, "output_shape", INTS(10, 8));
    th_attr_ints(g, n, "kernel_shape", INTS(3, 3));
    th_attr_ints(g, n, "output_padding", INTS(1, 1));
    check_y(g, n, in, 4, DIMS(1, 2, 10, 8), want);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_convt_groups) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float x[4] = {1, 2, 3, 4}, w1[2] = {10, 100}, w2[4] = {1, 1, 1, -1};
    tci_tensor in[2] = {ft(3, DIMS(1, 2, 2), x), ft(3, DIMS(2, 1, 1), w1)};
    ir_node *n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_int(g, n, "group", 2);
    check_y(g, n, in, 3, DIMS(1, 2, 2), (const float[]){10, 20, 300, 400});
    /* channel 0 under (1, 1), channel 1 under (1, -1) */
    tci_tensor in2[2] = {ft(3, DIMS(1, 2, 2), x), ft(3, DIMS(2, 1, 2), w2)};
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_int(g, n, "group", 2);
    check_y(g, n, in2, 3, DIMS(1, 2, 3), (const float[]){1, 3, 2, 3, 1, -4});
    /* group 1 with two input channels sums their contributions */
    tci_tensor in3[2] = {ft(3, DIMS(1, 2, 2), x), ft(3, DIMS(2, 1, 2), w2)};
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    check_y(g, n, in3, 3, DIMS(1, 1, 3), (const float[]){4, 4, -2});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_convt_onnxruntime) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float *x = pattern(32, 5), *w = pattern(96, 7), *b = pattern(4, 3);
    tci_tensor in[3] = {ft(4, DIMS(2, 4, 2, 2), x), ft(4, DIMS(4, 2, 3, 2), w), ft(1, DIMS(4), b)};
    ir_node *n = th_node(g, "ConvTranspose", 17, 3, 1);
    th_attr_int(g, n, "group", 2);
    th_attr_ints(g, n, "strides", INTS(2, 3));
    th_attr_ints(g, n, "pads", INTS(1, 0, 0, 1));
    th_attr_ints(g, n, "output_padding", INTS(1, 2));
    check_y(g, n, in, 4, DIMS(2, 4, 5, 6), convt_2d_want);

    tci_tensor in3[3] = {ft(5, DIMS(1, 2, 2, 2, 2), x), ft(5, DIMS(2, 2, 2, 2, 3), w), omitted()};
    n = th_node(g, "ConvTranspose", 17, 3, 1);
    th_attr_ints(g, n, "strides", INTS(2, 1, 2));
    check_y(g, n, in3, 5, DIMS(1, 2, 4, 3, 5), convt_3d_want);

    tci_tensor ins[3] = {ft(4, DIMS(1, 2, 3, 3), x), ft(4, DIMS(2, 1, 3, 3), w), ft(1, DIMS(1), b)};
    n = th_node(g, "ConvTranspose", 17, 3, 1);
    th_attr_ints(g, n, "strides", INTS(2, 2));
    th_attr_ints(g, n, "dilations", INTS(2, 1));
    th_attr_ints(g, n, "output_shape", INTS(8, 6));
    th_attr_string(g, n, "auto_pad", "SAME_LOWER");
    check_y(g, n, ins, 4, DIMS(1, 1, 8, 6), convt_shape_want);
    free(x);
    free(w);
    free(b);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_convt_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor y;
    /* output_shape fixes the spatial dims before X is known */
    tci_tensor in[2] = {unknown_rank(), ft(4, DIMS(3, 2, 3, 3), NULL)};
    ir_node *n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "output_shape", INTS(10, 8));
    th_attr_int(g, n, "group", 3);
    ck_assert_tci_ok(infer_only(g, n, in, &y));
    th_assert_dims(&y, 4, DIMS(-1, 6, 10, 8));
    tci_tensor part[2] = {ft(4, DIMS(-1, 3, 7, -1), NULL), ft(4, DIMS(3, 2, 3, 3), NULL)};
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(2, 2));
    ck_assert_tci_ok(infer_only(g, n, part, &y));
    th_assert_dims(&y, 4, DIMS(-1, 2, 15, -1));
    /* SAME: X * stride, whatever the kernel */
    tci_tensor same[2] = {ft(3, DIMS(1, 3, 7), NULL), unknown_rank()};
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME_UPPER");
    th_attr_ints(g, n, "strides", INTS(3));
    ck_assert_tci_ok(infer_only(g, n, same, &y));
    th_assert_dims(&y, 3, DIMS(1, -1, 21));
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_convt_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float *data = pattern(200, 5);
    tci_tensor in[3] = {ft(3, DIMS(1, 2, 3), data), ft(3, DIMS(2, 1, 3), data),
                        ft(1, DIMS(2), data)};
    ir_node *n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "strides", INTS(2));
    th_attr_ints(g, n, "output_padding", INTS(2));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "output_padding[0] = 2 must be less than the stride or dilation (2)");
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "output_padding", INTS(-1));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "attribute 'output_padding' value -1 at index 0 is out of range");
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "output_shape", INTS(4, 4));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL, "X has 1 spatial dims but the attributes give 2");
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "output_shape", INTS(0));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "attribute 'output_shape' value 0 at index 0 is out of range");
    tci_tensor w3[2] = {ft(3, DIMS(1, 2, 3), data), ft(3, DIMS(3, 1, 3), data)};
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    expect_error(g, n, w3, TCI_ERR_INVALID_MODEL, "W has 3 input channels (dim 0), expected X's 2");
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_ints(g, n, "pads", INTS(3, 3));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "spatial dim 0: the output size would be -1 (pads larger than the result)");
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_int(g, n, "group", 4);
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL, "group 4 does not divide X's 2 channels");
    /* the bias has one value per output channel: W dim 1 x group */
    n = th_node(g, "ConvTranspose", 17, 3, 1);
    th_attr_int(g, n, "group", 2);
    tci_tensor b1[3] = {ft(3, DIMS(1, 2, 3), data), ft(3, DIMS(2, 1, 3), data),
                        ft(1, DIMS(1), data)};
    expect_error(g, n, b1, TCI_ERR_INVALID_MODEL,
                 "B has 1 values, expected one per output channel (2)");
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_string(g, n, "auto_pad", "SAME_UPPER");
    th_attr_ints(g, n, "pads", INTS(1, 1));
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL,
                 "attribute 'pads' cannot be used together with auto_pad SAME_UPPER");
    n = th_node(g, "ConvTranspose", 17, 2, 1);
    th_attr_int(g, n, "bias", 1);
    expect_error(g, n, in, TCI_ERR_UNSUPPORTED, "unsupported attribute 'bias'");
    n = th_node(g, "ConvTranspose", 17, 2, 2);
    expect_error(g, n, in, TCI_ERR_INVALID_MODEL, "has 2 outputs, expected 1 to 1");
    free(data);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("conv");
    tcase_add_test(tc, test_conv_2d_pads);
    tcase_add_test(tc, test_conv_1d_bias_stride_dilation);
    tcase_add_test(tc, test_conv_auto_pad);
    tcase_add_test(tc, test_conv_groups);
    tcase_add_test(tc, test_conv_group_merge_equivalent);
    tcase_add_test(tc, test_conv_3d);
    tcase_add_test(tc, test_conv_onnxruntime);
    tcase_add_test(tc, test_conv_empty);
    tcase_add_test(tc, test_versions);
    tcase_add_test(tc, test_conv_infer_unknown);
    tcase_add_test(tc, test_conv_errors);
    suite_add_tcase(s, tc);
    TCase *tt = tcase_create("conv_transpose");
    tcase_add_test(tt, test_convt_2d);
    tcase_add_test(tt, test_convt_1d);
    tcase_add_test(tt, test_convt_auto_pad_output_shape);
    tcase_add_test(tt, test_convt_groups);
    tcase_add_test(tt, test_convt_onnxruntime);
    tcase_add_test(tt, test_convt_infer_unknown);
    tcase_add_test(tt, test_convt_errors);
    suite_add_tcase(s, tt);
    return test_run_suite(s);
}
