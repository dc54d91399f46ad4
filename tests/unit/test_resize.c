/* Resize and Upsample: each mode and coordinate transformation on hand-computed cases, the
 * opset differences (attribute scales, Resize-10, roi/sizes, axes and aspect-ratio policies),
 * shape inference with unknown scales or sizes, and every error path. */
#include <math.h>

#include "harness.h"
#include "layers/op.h"

static const float quad[4] = {1, 2, 3, 4};
static const int64_t quad_dims[4] = {1, 1, 2, 2};

static tci_tensor omitted(void) {
    tci_tensor t;
    memset(&t, 0, sizeof t);
    return t;
}

static tci_tensor vec_f(const float *v, int64_t n) {
    return th_tensor(TCI_DTYPE_FLOAT, 1, &n, v);
}

static tci_tensor vec_i(const int64_t *v, int64_t n) {
    return th_tensor(TCI_DTYPE_INT64, 1, &n, v);
}

/* A Resize node taking X, roi, scales, sizes at opset >= 11. */
static ir_node *resize_node(ir_graph *g, int opset, const char *mode, const char *coords) {
    ir_node *n = th_node(g, "Resize", opset, 1 + 3, 1);
    if (mode) th_attr_string(g, n, "mode", mode);
    if (coords) th_attr_string(g, n, "coordinate_transformation_mode", coords);
    return n;
}

/* Runs n and checks the output's dims and values. */
static void expect_resize(ir_graph *g, ir_node *n, const tci_tensor *in, int rank,
                          const int64_t *dims, const float *want, float tol) {
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(out[0].rank, rank);
    int64_t count = 1;
    for (int i = 0; i < rank; i++) {
        ck_assert_int_eq(out[0].dims[i], dims[i]);
        count *= dims[i];
    }
    th_assert_near(out[0].data, want, (size_t)count, tol);
    th_free(out, 1);
}

/* Shape inference only; an input of dtype UNDEFINED is omitted. */
static tci_status infer_only(ir_graph *g, ir_node *n, const tci_tensor *in, tci_tensor *out) {
    const tci_tensor *ins[4] = {0};
    tci_tensor *outs[1] = {out};
    for (int i = 0; i < n->num_inputs; i++) {
        if (in[i].dtype == TCI_DTYPE_UNDEFINED) {
            n->inputs[i] = NULL;
            continue;
        }
        ir_tensor_copy_shape(n->inputs[i], &in[i]);
        ins[i] = &in[i];
    }
    memset(out, 0, sizeof *out);
    out->rank = -1;
    tci_status st = op_prepare_node(n, g->arena);
    if (st != TCI_OK) return st;
    return n->desc->infer(n, ins, outs);
}

START_TEST(test_upsample_7_nearest) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Upsample", 7, 1, 1);
    const float scales[4] = {1, 1, 2, 2};
    th_attr_floats(g, n, "scales", scales, 4);
    tci_tensor in[1] = {th_tensor(TCI_DTYPE_FLOAT, 4, quad_dims, quad)};
    const int64_t dims[4] = {1, 1, 4, 4};
    const float want[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    expect_resize(g, n, in, 4, dims, want, 0);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_upsample_9_and_resize_10_linear) {
    const float scales[4] = {1, 1, 2, 2};
    const int64_t dims[4] = {1, 1, 4, 4};
    /* asymmetric: x = o / 2, the last row and column repeat the edge */
    const float want[16] = {1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 4, quad_dims, quad), vec_f(scales, 4)};
    for (int v = 0; v < 2; v++) {
        ir_node *n = th_node(g, v ? "Resize" : "Upsample", v ? 10 : 9, 2, 1);
        th_attr_string(g, n, "mode", "linear");
        expect_resize(g, n, in, 4, dims, want, 1e-6f);
    }
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_10_nearest_downsample) {
    /* before nearest_mode existed, a downsampled coordinate rounds up: 1.67 -> 2 */
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float xs[8] = {1, 2, 3, 4, 5, 6, 7, 8}, scales[4] = {1, 1, 0.6f, 0.6f};
    const int64_t xdims[4] = {1, 1, 2, 4}, dims[4] = {1, 1, 1, 2};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 4, xdims, xs), vec_f(scales, 4)};
    const float want[2] = {1, 3};
    expect_resize(g, th_node(g, "Resize", 10, 2, 1), in, 4, dims, want, 0);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_linear_half_pixel_and_align_corners) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float scales[4] = {1, 1, 2, 2};
    const int64_t dims[4] = {1, 1, 4, 4};
    tci_tensor in[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, quad_dims, quad), vec_f(NULL, 0),
                        vec_f(scales, 4), omitted()};
    const float half[16] = {1,    1.25f, 1.75f, 2,    1.5f, 1.75f, 2.25f, 2.5f,
                            2.5f, 2.75f, 3.25f, 3.5f, 3,    3.25f, 3.75f, 4};
    expect_resize(g, resize_node(g, 11, "linear", NULL), in, 4, dims, half, 1e-6f);
    const float t = 1.0f / 3;
    const float corners[16] = {1,         1 + t,     1 + 2 * t, 2,         1 + 2 * t, 2 + 0 * t,
                               2 + t,     2 + 2 * t, 2 + t,     2 + 2 * t, 3,         3 + t,
                               3,         3 + t,     3 + 2 * t, 4};
    expect_resize(g, resize_node(g, 13, "linear", "align_corners"), in, 4, dims, corners, 1e-6f);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_nearest_modes) {
    /* asymmetric at scale 4 puts coordinates on 0, .25, .5 and .75 */
    const char *modes[4] = {"floor", "round_prefer_floor", "round_prefer_ceil", "ceil"};
    const float want[4][8] = {{10, 10, 10, 10, 20, 20, 20, 20},
                              {10, 10, 10, 20, 20, 20, 20, 20},
                              {10, 10, 20, 20, 20, 20, 20, 20},
                              {10, 20, 20, 20, 20, 20, 20, 20}};
    const float xs[2] = {10, 20}, scales[1] = {4};
    const int64_t dims[1] = {8};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor in[4] = {vec_f(xs, 2), omitted(), vec_f(scales, 1), omitted()};
    for (int m = 0; m < 4; m++) {
        ir_node *n = resize_node(g, 19, "nearest", "asymmetric");
        th_attr_string(g, n, "nearest_mode", modes[m]);
        expect_resize(g, n, in, 1, dims, want[m], 0);
    }
    /* tf_half_pixel_for_nn (opset 11 only): x = (o + 0.5) / 2 */
    const float scales2[1] = {2}, want_nn[4] = {10, 20, 20, 20};
    const int64_t dims2[1] = {4};
    in[2] = vec_f(scales2, 1);
    expect_resize(g, resize_node(g, 11, "nearest", "tf_half_pixel_for_nn"), in, 1, dims2, want_nn,
                  0);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_tf_crop_and_resize) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float xs[5] = {0, 10, 20, 30, 40}, roi[2] = {0.5f, 1.5f};
    const int64_t sizes3[1] = {3}, sizes1[1] = {1}, dims3[1] = {3}, dims1[1] = {1};
    /* x = 0.5 * 4 + o * 1.0 * 4 / 2 = 2, 4, 6: the last is past the input */
    tci_tensor in[4] = {vec_f(xs, 5), vec_f(roi, 2), omitted(), vec_i(sizes3, 1)};
    ir_node *n = resize_node(g, 13, "linear", "tf_crop_and_resize");
    th_attr_float(g, n, "extrapolation_value", 99);
    const float want3[3] = {20, 40, 99};
    expect_resize(g, n, in, 1, dims3, want3, 1e-4f);
    /* one output samples the centre of the roi */
    in[3] = vec_i(sizes1, 1);
    const float want1[1] = {40};
    expect_resize(g, resize_node(g, 13, "nearest", "tf_crop_and_resize"), in, 1, dims1, want1,
                  1e-4f);
    /* no roi: the whole input */
    in[1] = omitted();
    in[3] = vec_i(sizes3, 1);
    const float whole[3] = {0, 20, 40};
    expect_resize(g, resize_node(g, 13, "linear", "tf_crop_and_resize"), in, 1, dims3, whole,
                  1e-4f);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_cubic) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* A = -0.75 at ratio 0.5 weighs the four taps -3/32, 19/32, 19/32, -3/32 */
    const float xs[5] = {0, 0, 16, 0, 0}, scales[1] = {2};
    const int64_t dims[1] = {10};
    tci_tensor in[4] = {vec_f(xs, 5), omitted(), vec_f(scales, 1), omitted()};
    const float want[10] = {0, -1.5f, 0, 9.5f, 16, 9.5f, 0, -1.5f, 0, 0};
    expect_resize(g, resize_node(g, 18, "cubic", "asymmetric"), in, 1, dims, want, 1e-5f);
    /* exclude_outside drops tap -1 (and tap 5) and renormalises the other three */
    ir_node *n = resize_node(g, 18, "cubic", "asymmetric");
    th_attr_int(g, n, "exclude_outside", 1);
    const float edge = -1.5f / 1.09375f;
    const float excl[10] = {0, edge, 0, 9.5f, 16, 9.5f, 0, edge, 0, 0};
    expect_resize(g, n, in, 1, dims, excl, 1e-5f);
    /* A = -0.5 at ratio 0.5: -1/16, 9/16, 9/16, -1/16 */
    n = resize_node(g, 18, "cubic", "asymmetric");
    th_attr_float(g, n, "cubic_coeff_a", -0.5f);
    const float half_a[10] = {0, -1, 0, 9, 16, 9, 0, -1, 0, 0};
    expect_resize(g, n, in, 1, dims, half_a, 1e-5f);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_half_pixel_variants) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* ONNX's test_resize_upsample_scales_linear_half_pixel_symmetric */
    const float scales[4] = {1, 1, 2.3f, 2.94f};
    tci_tensor in[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, quad_dims, quad), omitted(),
                        vec_f(scales, 4), omitted()};
    const int64_t dims[4] = {1, 1, 4, 5};
    const float want[20] = {1,          1.15986395f, 1.5f,        1.84013605f, 2,
                            1.56521738f, 1.72508133f, 2.06521738f, 2.40535343f, 2.56521738f,
                            2.43478262f, 2.59464657f, 2.93478262f, 3.27491867f, 3.43478262f,
                            3,          3.15986395f, 3.5f,        3.84013605f, 4};
    expect_resize(g, resize_node(g, 19, "linear", "half_pixel_symmetric"), in, 4, dims, want,
                  1e-5f);
    /* pytorch_half_pixel samples 0 for a length-1 output where half_pixel samples the middle */
    const float xs[4] = {0, 10, 20, 30};
    const int64_t one[1] = {1};
    tci_tensor in1[4] = {vec_f(xs, 4), omitted(), omitted(), vec_i(one, 1)};
    const float zero[1] = {0}, middle[1] = {15};
    expect_resize(g, resize_node(g, 13, "linear", "pytorch_half_pixel"), in1, 1, one, zero, 0);
    expect_resize(g, resize_node(g, 13, "linear", "half_pixel"), in1, 1, one, middle, 1e-5f);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_axes_and_aspect_policy) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float scales[1] = {2};
    tci_tensor in[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, quad_dims, quad), omitted(),
                        vec_f(scales, 1), omitted()};
    const int64_t dims[4] = {1, 1, 2, 4};
    const float want[8] = {1, 1, 2, 2, 3, 3, 4, 4};
    const int64_t last[1] = {3}, minus_one[1] = {-1};
    for (int v = 0; v < 2; v++) {
        ir_node *n = resize_node(g, 18, NULL, NULL);
        th_attr_ints(g, n, "axes", v ? minus_one : last, 1);
        expect_resize(g, n, in, 4, dims, want, 0);
    }

    const float zeros[15] = {0};
    const int64_t xdims[2] = {3, 5}, sizes[2] = {4, 4};
    tci_tensor in2[4] = {th_tensor(TCI_DTYPE_FLOAT, 2, xdims, zeros), omitted(), omitted(),
                         vec_i(sizes, 2)};
    const char *policy[3] = {"stretch", "not_larger", "not_smaller"};
    const int64_t want_dims[3][2] = {{4, 4}, {2, 4}, {4, 7}};
    for (int p = 0; p < 3; p++) {
        ir_node *n = resize_node(g, 18, NULL, NULL);
        th_attr_string(g, n, "keep_aspect_ratio_policy", policy[p]);
        tci_tensor out[1];
        ck_assert_tci_ok(th_run(g, n, in2, out));
        ck_assert_int_eq(out[0].dims[0], want_dims[p][0]);
        ck_assert_int_eq(out[0].dims[1], want_dims[p][1]);
        th_free(out, 1);
    }
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_nearest_other_dtypes) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const uint8_t xs[2] = {7, 200};
    const int64_t xdims[1] = {2}, sizes[1] = {4};
    tci_tensor in[4] = {th_tensor(TCI_DTYPE_UINT8, 1, xdims, xs), omitted(), omitted(),
                        vec_i(sizes, 1)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, resize_node(g, 19, "nearest", "asymmetric"), in, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_UINT8);
    const uint8_t *y = out[0].data;
    ck_assert_int_eq(y[0], 7);
    ck_assert_int_eq(y[1], 7);
    ck_assert_int_eq(y[2], 200);
    ck_assert_int_eq(y[3], 200);
    th_free(out, 1);
    ck_assert_tci_error(th_run(g, resize_node(g, 19, "linear", NULL), in, out),
                        TCI_ERR_UNSUPPORTED, "input 0 has unsupported dtype uint8");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xdims[4] = {1, 3, 4, 4}, four = 4, two = 2;
    tci_tensor out;
    /* scales whose value is not known yet */
    tci_tensor in[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, xdims, NULL), omitted(),
                        th_tensor(TCI_DTYPE_FLOAT, 1, &four, NULL), omitted()};
    ck_assert_tci_ok(infer_only(g, resize_node(g, 13, NULL, NULL), in, &out));
    ck_assert_int_eq(out.rank, 4);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(out.dims[i], -1);
    /* with axes, the other axes keep their dims */
    ir_node *n = resize_node(g, 18, NULL, NULL);
    const int64_t axes[2] = {2, 3};
    th_attr_ints(g, n, "axes", axes, 2);
    in[2] = th_tensor(TCI_DTYPE_FLOAT, 1, &two, NULL);
    ck_assert_tci_ok(infer_only(g, n, in, &out));
    ck_assert_int_eq(out.dims[0], 1);
    ck_assert_int_eq(out.dims[1], 3);
    ck_assert_int_eq(out.dims[2], -1);
    ck_assert_int_eq(out.dims[3], -1);
    /* known sizes give the output even where X's dims are unknown */
    const int64_t xunknown[4] = {-1, 3, -1, -1}, sizes[4] = {1, 3, 8, 8};
    tci_tensor in2[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, xunknown, NULL), omitted(), omitted(),
                         vec_i(sizes, 4)};
    ck_assert_tci_ok(infer_only(g, resize_node(g, 13, NULL, NULL), in2, &out));
    for (int i = 0; i < 4; i++) ck_assert_int_eq(out.dims[i], sizes[i]);
    /* known scales scale the known dims only */
    const float scales[4] = {1, 1, 2, 2};
    const int64_t xpartial[4] = {-1, 3, 4, -1};
    tci_tensor in3[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, xpartial, NULL), omitted(),
                         vec_f(scales, 4), omitted()};
    ck_assert_tci_ok(infer_only(g, resize_node(g, 13, NULL, NULL), in3, &out));
    ck_assert_int_eq(out.dims[0], -1);
    ck_assert_int_eq(out.dims[1], 3);
    ck_assert_int_eq(out.dims[2], 8);
    ck_assert_int_eq(out.dims[3], -1);
    /* unknown X rank: the length of sizes gives it */
    tci_tensor in4[4] = {omitted(), omitted(), omitted(),
                         th_tensor(TCI_DTYPE_INT64, 1, &four, NULL)};
    in4[0].dtype = TCI_DTYPE_FLOAT;
    in4[0].rank = -1;
    ck_assert_tci_ok(infer_only(g, resize_node(g, 13, NULL, NULL), in4, &out));
    ck_assert_int_eq(out.rank, 4);
    ck_assert_int_eq(out.dims[2], -1);
    /* Upsample-9 with unknown scales */
    tci_tensor in5[2] = {th_tensor(TCI_DTYPE_FLOAT, 4, xdims, NULL),
                         th_tensor(TCI_DTYPE_FLOAT, 1, &four, NULL)};
    ck_assert_tci_ok(infer_only(g, th_node(g, "Upsample", 9, 2, 1), in5, &out));
    ck_assert_int_eq(out.rank, 4);
    ck_assert_int_eq(out.dims[0], -1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_attribute_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float scales[4] = {1, 1, 2, 2};
    tci_tensor in[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, quad_dims, quad), omitted(),
                        vec_f(scales, 4), omitted()};
    tci_tensor out[1];
    ir_node *n = resize_node(g, 18, "linear", NULL);
    th_attr_int(g, n, "antialias", 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED, "antialias=1 is not supported");
    ck_assert_tci_error(th_run(g, resize_node(g, 19, "area", NULL), in, out), TCI_ERR_UNSUPPORTED,
                        "mode 'area' is not supported (nearest, linear or cubic)");
    n = th_node(g, "Resize", 10, 2, 1);
    th_attr_string(g, n, "mode", "cubic");
    tci_tensor in10[2] = {in[0], in[2]};
    ck_assert_tci_error(th_run(g, n, in10, out), TCI_ERR_UNSUPPORTED,
                        "mode 'cubic' is not supported (nearest or linear)");
    ck_assert_tci_error(th_run(g, resize_node(g, 13, NULL, "tf_half_pixel_for_nn"), in, out),
                        TCI_ERR_UNSUPPORTED,
                        "coordinate_transformation_mode 'tf_half_pixel_for_nn' is not supported "
                        "at opset 13");
    ck_assert_tci_error(th_run(g, resize_node(g, 18, NULL, "half_pixel_symmetric"), in, out),
                        TCI_ERR_UNSUPPORTED,
                        "coordinate_transformation_mode 'half_pixel_symmetric' is not supported");
    n = resize_node(g, 19, NULL, NULL);
    th_attr_string(g, n, "nearest_mode", "round");
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED,
                        "nearest_mode 'round' is not supported");
    n = resize_node(g, 19, NULL, NULL);
    th_attr_string(g, n, "keep_aspect_ratio_policy", "fit");
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED,
                        "keep_aspect_ratio_policy 'fit' is not supported");
    n = resize_node(g, 19, NULL, NULL);
    th_attr_int(g, n, "exclude_outside", 2);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "exclude_outside is 2; must be 0 or 1");
    n = resize_node(g, 13, NULL, NULL);
    const int64_t axes[1] = {3};
    th_attr_ints(g, n, "axes", axes, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED, "unsupported attribute 'axes'");
    n = th_node(g, "Resize", 10, 2, 1);
    th_attr_string(g, n, "coordinate_transformation_mode", "asymmetric");
    ck_assert_tci_error(th_run(g, n, in10, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'coordinate_transformation_mode'");
    ck_assert_tci_error(th_run(g, th_node(g, "Upsample", 7, 1, 1), in, out),
                        TCI_ERR_INVALID_MODEL, "attribute 'scales' is required");
    n = th_node(g, "Upsample", 7, 1, 1);
    th_attr_floats(g, n, "scales", scales, 2);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "scales has 2 entries, expected 4 (one per input axis)");
    n = th_node(g, "Upsample", 9, 2, 1);
    th_attr_string(g, n, "mode", "cubic");
    ck_assert_tci_error(th_run(g, n, in10, out), TCI_ERR_UNSUPPORTED, "mode 'cubic'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_input_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float scales[4] = {1, 1, 2, 2}, bad_scales[4] = {1, 0, 2, 2}, down[4] = {1, 1, 0.5f, 1};
    const int64_t sizes[4] = {1, 1, 4, 4}, neg_sizes[4] = {-1, 1, 4, 4};
    const tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 4, quad_dims, quad);
    tci_tensor out[1];

    tci_tensor both[4] = {x, omitted(), vec_f(scales, 4), vec_i(sizes, 4)};
    ck_assert_tci_error(th_run(g, resize_node(g, 13, NULL, NULL), both, out),
                        TCI_ERR_INVALID_MODEL,
                        "has both 'scales' and 'sizes'; exactly one may be non-empty");
    tci_tensor neither[4] = {x, omitted(), vec_f(NULL, 0), omitted()};
    ck_assert_tci_error(th_run(g, resize_node(g, 11, NULL, NULL), neither, out),
                        TCI_ERR_INVALID_MODEL, "needs a non-empty 'scales' or 'sizes' input");
    tci_tensor short_scales[4] = {x, omitted(), vec_f(scales, 3), omitted()};
    ck_assert_tci_error(th_run(g, resize_node(g, 13, NULL, NULL), short_scales, out),
                        TCI_ERR_INVALID_MODEL,
                        "scales has 3 entries, expected 4 (one per input axis)");
    ir_node *n = resize_node(g, 18, NULL, NULL);
    const int64_t one_axis[1] = {2};
    th_attr_ints(g, n, "axes", one_axis, 1);
    tci_tensor long_sizes[4] = {x, omitted(), omitted(), vec_i(sizes, 2)};
    ck_assert_tci_error(th_run(g, n, long_sizes, out), TCI_ERR_INVALID_MODEL,
                        "sizes has 2 entries, expected 1 (one per entry of axes)");
    tci_tensor zero_scale[4] = {x, omitted(), vec_f(bad_scales, 4), omitted()};
    ck_assert_tci_error(th_run(g, resize_node(g, 13, NULL, NULL), zero_scale, out),
                        TCI_ERR_INVALID_MODEL, "scales[1] is 0; must be positive and finite");
    tci_tensor negative[4] = {x, omitted(), omitted(), vec_i(neg_sizes, 4)};
    ck_assert_tci_error(th_run(g, resize_node(g, 13, NULL, NULL), negative, out),
                        TCI_ERR_INVALID_MODEL, "sizes[0] is -1; must be >= 0");
    const float roi[2] = {0, 1};
    tci_tensor short_roi[4] = {x, vec_f(roi, 2), vec_f(scales, 4), omitted()};
    ck_assert_tci_error(th_run(g, resize_node(g, 13, NULL, "tf_crop_and_resize"), short_roi, out),
                        TCI_ERR_INVALID_MODEL, "roi has 2 entries, expected 8 (starts then ends)");
    n = resize_node(g, 18, NULL, NULL);
    const int64_t repeated[2] = {1, -3};
    th_attr_ints(g, n, "axes", repeated, 2);
    tci_tensor two_scales[4] = {x, omitted(), vec_f(scales, 2), omitted()};
    ck_assert_tci_error(th_run(g, n, two_scales, out), TCI_ERR_INVALID_MODEL,
                        "axis -3 is repeated in axes");
    n = resize_node(g, 18, NULL, NULL);
    const int64_t outside[2] = {1, 4};
    th_attr_ints(g, n, "axes", outside, 2);
    ck_assert_tci_error(th_run(g, n, two_scales, out), TCI_ERR_INVALID_MODEL,
                        "axis 4 out of range for rank 4");
    const int64_t square[2] = {2, 2};
    tci_tensor matrix_scales[4] = {x, omitted(), th_tensor(TCI_DTYPE_FLOAT, 2, square, scales),
                                   omitted()};
    ck_assert_tci_error(th_run(g, resize_node(g, 13, NULL, NULL), matrix_scales, out),
                        TCI_ERR_INVALID_MODEL, "scales must be 1-D, got rank 2");
    const float float_sizes[4] = {1, 1, 4, 4};
    tci_tensor wrong_type[4] = {x, omitted(), omitted(), vec_f(float_sizes, 4)};
    ck_assert_tci_error(th_run(g, resize_node(g, 13, NULL, NULL), wrong_type, out),
                        TCI_ERR_UNSUPPORTED, "input 3 has unsupported dtype float");
    tci_tensor upsample_down[2] = {x, vec_f(down, 4)};
    ck_assert_tci_error(th_run(g, th_node(g, "Upsample", 9, 2, 1), upsample_down, out),
                        TCI_ERR_INVALID_MODEL, "scales[2] is 0.5; Upsample needs scales >= 1");
    tci_tensor empty10[2] = {x, vec_f(NULL, 0)};
    ck_assert_tci_error(th_run(g, th_node(g, "Resize", 10, 2, 1), empty10, out),
                        TCI_ERR_INVALID_MODEL, "needs a non-empty 'scales' input");
    const int64_t empty_dims[4] = {1, 1, 0, 2};
    tci_tensor grow_empty[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, empty_dims, quad), omitted(),
                                omitted(), vec_i(sizes, 4)};
    ck_assert_tci_error(th_run(g, resize_node(g, 13, NULL, NULL), grow_empty, out),
                        TCI_ERR_INVALID_MODEL, "sizes[2] is 4 but input axis 2 is empty");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_resize_versions) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float scales[4] = {1, 1, 2, 2};
    tci_tensor in[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, quad_dims, quad), omitted(),
                        vec_f(scales, 4), omitted()};
    tci_tensor out[1];
    ir_node *n = resize_node(g, 28, NULL, NULL);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 19);
    th_free(out, 1);
    n = th_node(g, "Resize", 9, 2, 1);
    tci_tensor in10[2] = {in[0], in[2]};
    ck_assert_tci_error(th_run(g, n, in10, out), TCI_ERR_UNSUPPORTED,
                        "older than tcinfer supports (from opset 10)");
    n = th_node(g, "Upsample", 28, 2, 1);
    ck_assert_tci_ok(th_run(g, n, in10, out));
    ck_assert_int_eq(n->since_version, 10);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("resize");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_upsample_7_nearest);
    tcase_add_test(tc, test_upsample_9_and_resize_10_linear);
    tcase_add_test(tc, test_resize_10_nearest_downsample);
    tcase_add_test(tc, test_resize_linear_half_pixel_and_align_corners);
    tcase_add_test(tc, test_resize_nearest_modes);
    tcase_add_test(tc, test_resize_tf_crop_and_resize);
    tcase_add_test(tc, test_resize_cubic);
    tcase_add_test(tc, test_resize_half_pixel_variants);
    tcase_add_test(tc, test_resize_axes_and_aspect_policy);
    tcase_add_test(tc, test_resize_nearest_other_dtypes);
    tcase_add_test(tc, test_resize_infer_unknown);
    tcase_add_test(tc, test_resize_attribute_errors);
    tcase_add_test(tc, test_resize_input_errors);
    tcase_add_test(tc, test_resize_versions);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
