/* Elementwise ops: activations, broadcast arithmetic, Equal, Where, Clip, PRelu, Cast. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "layers/op.h"
#include "harness.h"

static const float X5[5] = {-2.0f, -0.5f, 0.0f, 0.5f, 3.0f};
static const int64_t D5[1] = {5};

/* Runs node and checks a float output of the given shape against want. */
static void expect_float(ir_graph *g, ir_node *n, const tci_tensor *in, int rank,
                         const int64_t *dims, const float *want, float tol) {
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(out[0].rank, rank);
    for (int i = 0; i < rank; i++) ck_assert_int_eq(out[0].dims[i], dims[i]);
    int64_t count = tci_tensor_count(&out[0]);
    th_assert_near(out[0].data, want, (size_t)count, tol);
    th_free(out, 1);
}

/* One unary op at opset on X5; attributes set by the caller through the returned node. */
static void check_unary(const char *op, int opset, const char *attr, float value,
                        const float *want) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, opset, 1, 1);
    if (attr) th_attr_float(g, n, attr, value);
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, D5, X5);
    expect_float(g, n, &in, 1, D5, want, 1e-6f);
    ir_graph_destroy(g);
}

START_TEST(test_activations) {
    check_unary("Relu", 14, NULL, 0, (const float[]){0, 0, 0, 0.5f, 3});
    check_unary("Relu", 6, NULL, 0, (const float[]){0, 0, 0, 0.5f, 3});
    check_unary("LeakyRelu", 16, "alpha", 0.1f, (const float[]){-0.2f, -0.05f, 0, 0.5f, 3});
    check_unary("LeakyRelu", 6, NULL, 0, (const float[]){-0.02f, -0.005f, 0, 0.5f, 3});
    check_unary("Sigmoid", 13, NULL, 0,
                (const float[]){0.11920292f, 0.37754067f, 0.5f, 0.62245933f, 0.95257413f});
    check_unary("HardSigmoid", 22, NULL, 0, (const float[]){0.1f, 0.4f, 0.5f, 0.6f, 1.0f});
    check_unary("HardSigmoid", 6, "alpha", 0.5f, (const float[]){0, 0.25f, 0.5f, 0.75f, 1});
    check_unary("HardSwish", 14, NULL, 0,
                (const float[]){-1.0f / 3, -0.5f * 5 / 12, 0, 0.5f * 7 / 12, 3});
    check_unary("Tanh", 13, NULL, 0,
                (const float[]){-0.96402758f, -0.46211716f, 0, 0.46211716f, 0.99505475f});
    check_unary("Elu", 6, NULL, 0, (const float[]){-0.86466472f, -0.39346934f, 0, 0.5f, 3});
    check_unary("Elu", 22, "alpha", 2.0f, (const float[]){-1.72932943f, -0.78693868f, 0, 0.5f, 3});
    check_unary("Selu", 22, NULL, 0,
                (const float[]){-1.52016647f, -0.69175819f, 0, 0.52535051f, 3.15210307f});
    check_unary("Softplus", 1, NULL, 0,
                (const float[]){0.12692801f, 0.47407698f, 0.69314718f, 0.97407698f, 3.04858735f});
    check_unary("Erf", 13, NULL, 0,
                (const float[]){-0.99532227f, -0.52049988f, 0, 0.52049988f, 0.99997791f});
    check_unary("Gelu", 20, NULL, 0,
                (const float[]){-0.04550026f, -0.15426877f, 0, 0.34573123f, 2.99595031f});
}
END_TEST

/* X5 = -2, -0.5, 0, 0.5, 3 */
START_TEST(test_more_activations) {
    check_unary("Neg", 13, NULL, 0, (const float[]){2, 0.5f, 0, -0.5f, -3});
    check_unary("Abs", 6, NULL, 0, (const float[]){2, 0.5f, 0, 0.5f, 3});
    check_unary("Sign", 9, NULL, 0, (const float[]){-1, -1, 0, 1, 1});
    check_unary("Exp", 13, NULL, 0,
                (const float[]){0.13533528f, 0.60653066f, 1, 1.64872127f, 20.08553692f});
    check_unary("Floor", 6, NULL, 0, (const float[]){-2, -1, 0, 0, 3});
    check_unary("Ceil", 13, NULL, 0, (const float[]){-2, -0.0f, 0, 1, 3});
    /* halves to even: -0.5 and 0.5 go to 0 */
    check_unary("Round", 11, NULL, 0, (const float[]){-2, 0, 0, 0, 3});
    check_unary("Softsign", 22, NULL, 0, (const float[]){-2.0f / 3, -1.0f / 3, 0, 1.0f / 3, 0.75f});
    check_unary("Mish", 18, NULL, 0,
                (const float[]){-0.25250148f, -0.22074377f, 0, 0.37524521f, 2.98653500f});
    check_unary("Celu", 12, NULL, 0, (const float[]){-0.86466472f, -0.39346934f, 0, 0.5f, 3});
    check_unary("Celu", 28, "alpha", 2.0f,
                (const float[]){2 * -0.63212056f, 2 * -0.22119922f, 0, 0.5f, 3});
    check_unary("ThresholdedRelu", 10, NULL, 0, (const float[]){0, 0, 0, 0, 3});
    check_unary("ThresholdedRelu", 22, "alpha", -1.0f, (const float[]){0, -0.5f, 0, 0.5f, 3});
    check_unary("Sin", 7, NULL, 0,
                (const float[]){-0.90929743f, -0.47942554f, 0, 0.47942554f, 0.14112001f});
    check_unary("Cos", 22, NULL, 0,
                (const float[]){-0.41614684f, 0.87758256f, 1, 0.87758256f, -0.98999250f});

    /* edges: Log and Reciprocal of 0 and of a negative value, Round of exact halves */
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t d[1] = {4};
    const float x[4] = {0, -1, 4, 2.5f};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, d, x), out[1];
    ck_assert_tci_ok(th_run(g, th_node(g, "Log", 13, 1, 1), &in, out));
    const float *y = out[0].data;
    ck_assert(isinf(y[0]) && y[0] < 0);
    ck_assert(isnan(y[1]));
    ck_assert_float_eq_tol(y[2], 1.38629436f, 1e-7f);
    th_free(out, 1);
    ck_assert_tci_ok(th_run(g, th_node(g, "Reciprocal", 6, 1, 1), &in, out));
    y = out[0].data;
    ck_assert(isinf(y[0]) && y[0] > 0);
    ck_assert_float_eq(y[1], -1);
    ck_assert_float_eq(y[2], 0.25f);
    ck_assert_float_eq(y[3], 0.4f);
    th_free(out, 1);
    const float halves[4] = {1.5f, 2.5f, -3.5f, -0.5f};
    in = th_tensor(TCI_DTYPE_FLOAT, 1, d, halves);
    expect_float(g, th_node(g, "Round", 22, 1, 1), &in, 1, d, (const float[]){2, 2, -4, -0.0f}, 0);
    ir_graph_destroy(g);
}
END_TEST

/* Neg, Abs and Sign take integers (wrapping at the minimum, as onnxruntime) and double. */
START_TEST(test_neg_abs_sign_integers) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t d[1] = {4};
    const int32_t x32[4] = {-7, 0, 5, INT32_MIN};
    tci_tensor in = th_tensor(TCI_DTYPE_INT32, 1, d, x32), out[1];
    const struct {
        const char *op;
        int32_t want[4];
    } cases[] = {{"Neg", {7, 0, -5, INT32_MIN}},
                 {"Abs", {7, 0, 5, INT32_MIN}},
                 {"Sign", {-1, 0, 1, -1}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ck_assert_tci_ok(th_run(g, th_node(g, cases[c].op, 13, 1, 1), &in, out));
        ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(((const int32_t *)out[0].data)[i] == cases[c].want[i], "%s [%d]: %d",
                          cases[c].op, i, ((const int32_t *)out[0].data)[i]);
        th_free(out, 1);
    }
    const int64_t x64[4] = {-3, 0, INT64_MAX, INT64_MIN};
    in = th_tensor(TCI_DTYPE_INT64, 1, d, x64);
    ck_assert_tci_ok(th_run(g, th_node(g, "Abs", 13, 1, 1), &in, out));
    ck_assert_int_eq(((const int64_t *)out[0].data)[0], 3);
    ck_assert_int_eq(((const int64_t *)out[0].data)[2], INT64_MAX);
    ck_assert_int_eq(((const int64_t *)out[0].data)[3], INT64_MIN);
    th_free(out, 1);
    const int8_t x8[4] = {-128, -1, 0, 127};
    in = th_tensor(TCI_DTYPE_INT8, 1, d, x8);
    ck_assert_tci_ok(th_run(g, th_node(g, "Neg", 6, 1, 1), &in, out));
    ck_assert_int_eq(((const int8_t *)out[0].data)[0], -128);
    ck_assert_int_eq(((const int8_t *)out[0].data)[1], 1);
    ck_assert_int_eq(((const int8_t *)out[0].data)[3], -127);
    th_free(out, 1);
    const uint8_t xu[4] = {0, 1, 200, 255};
    in = th_tensor(TCI_DTYPE_UINT8, 1, d, xu);
    ck_assert_tci_ok(th_run(g, th_node(g, "Sign", 13, 1, 1), &in, out));
    ck_assert_uint_eq(((const uint8_t *)out[0].data)[0], 0);
    ck_assert_uint_eq(((const uint8_t *)out[0].data)[2], 1);
    th_free(out, 1);
    ck_assert_tci_ok(th_run(g, th_node(g, "Abs", 13, 1, 1), &in, out));
    ck_assert_uint_eq(((const uint8_t *)out[0].data)[3], 255);
    th_free(out, 1);
    const double xd[4] = {-2.5, -0.0, 1e300, NAN};
    in = th_tensor(TCI_DTYPE_DOUBLE, 1, d, xd);
    ck_assert_tci_ok(th_run(g, th_node(g, "Sign", 13, 1, 1), &in, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_DOUBLE);
    const double *yd = out[0].data;
    ck_assert_double_eq(yd[0], -1);
    ck_assert_double_eq(yd[1], 0);
    ck_assert_double_eq(yd[2], 1);
    ck_assert(isnan(yd[3]));
    th_free(out, 1);

    /* Neg has no unsigned types; the float-only ones no integers */
    in = th_tensor(TCI_DTYPE_UINT8, 1, d, xu);
    ck_assert_tci_error(th_run(g, th_node(g, "Neg", 13, 1, 1), &in, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype uint8");
    in = th_tensor(TCI_DTYPE_INT32, 1, d, x32);
    ck_assert_tci_error(th_run(g, th_node(g, "Floor", 13, 1, 1), &in, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype int32");
    /* Celu divides by alpha */
    ir_node *n = th_node(g, "Celu", 12, 1, 1);
    th_attr_float(g, n, "alpha", 0.0f);
    in = th_tensor(TCI_DTYPE_FLOAT, 1, D5, X5);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL, "attribute 'alpha' is 0");
    n = th_node(g, "Sin", 22, 1, 1);
    th_attr_float(g, n, "alpha", 1.0f);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'alpha'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_selu_gamma_and_sqrt) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Selu", 6, 1, 1);
    th_attr_float(g, n, "alpha", 1.0f);
    th_attr_float(g, n, "gamma", 2.0f);
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, D5, X5);
    expect_float(g, n, &in, 1, D5, (const float[]){-1.72932943f, -0.78693868f, 0, 1.0f, 6.0f},
                 1e-6f);

    n = th_node(g, "Sqrt", 13, 1, 1);
    const int64_t dims[2] = {2, 2};
    in = th_tensor(TCI_DTYPE_FLOAT, 2, dims, (const float[]){0, 0.25f, 4, -1});
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, &in, out));
    const float *y = out[0].data;
    ck_assert_float_eq(y[0], 0);
    ck_assert_float_eq(y[1], 0.5f);
    ck_assert_float_eq(y[2], 2);
    ck_assert(isnan(y[3]));
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_gelu_tanh_and_bad_mode) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Gelu", 20, 1, 1);
    th_attr_string(g, n, "approximate", "tanh");
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, D5, X5);
    expect_float(g, n, &in, 1, D5,
                 (const float[]){-0.04540231f, -0.15428599f, 0, 0.34571401f, 2.99636261f}, 1e-6f);

    n = th_node(g, "Gelu", 20, 1, 1);
    th_attr_string(g, n, "approximate", "sigmoid");
    tci_tensor out[1];
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED,
                        "attribute 'approximate' value 'sigmoid' is not supported");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_sigmoid_softplus_extremes) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t d[1] = {4};
    const float x[4] = {-200, 200, -1e30f, 1e30f};
    ir_node *n = th_node(g, "Sigmoid", 13, 1, 1);
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, d, x);
    expect_float(g, n, &in, 1, d, (const float[]){0, 1, 0, 1}, 0);
    n = th_node(g, "Softplus", 22, 1, 1);
    expect_float(g, n, &in, 1, d, (const float[]){0, 200, 0, 1e30f}, 0);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_unary_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const double xd[5] = {0};
    tci_tensor in = th_tensor(TCI_DTYPE_DOUBLE, 1, D5, xd);
    ir_node *n = th_node(g, "Relu", 14, 1, 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype double");
    n = th_node(g, "Relu", 14, 1, 1);
    th_attr_float(g, n, "alpha", 1.0f);
    in = th_tensor(TCI_DTYPE_FLOAT, 1, D5, X5);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'alpha'");
    n = th_node(g, "Tanh", 13, 2, 1);
    tci_tensor two[2] = {in, in};
    ck_assert_tci_error(th_run(g, n, two, out), TCI_ERR_INVALID_MODEL, "has 2 inputs");
    /* opset 5 would select Relu-1, whose consumed_inputs we do not implement */
    n = th_node(g, "Relu", 5, 1, 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED, "older than tcinfer supports");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_clip_versions) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, D5, X5);
    /* opset 6: attributes, max defaulting to FLT_MAX */
    ir_node *n = th_node(g, "Clip", 6, 1, 1);
    th_attr_float(g, n, "min", -1.0f);
    expect_float(g, n, &in, 1, D5, (const float[]){-1, -0.5f, 0, 0.5f, 3}, 0);
    n = th_node(g, "Clip", 6, 1, 1);
    th_attr_float(g, n, "min", -1.0f);
    th_attr_float(g, n, "max", 0.25f);
    expect_float(g, n, &in, 1, D5, (const float[]){-1, -0.5f, 0, 0.25f, 0.25f}, 0);

    /* opset 11+: inputs; an omitted min keeps the lowest value */
    const float hi = 1.0f, lo = 2.0f;
    tci_tensor ins[3] = {in, {0}, th_tensor(TCI_DTYPE_FLOAT, 0, NULL, &hi)};
    n = th_node(g, "Clip", 11, 3, 1);
    expect_float(g, n, ins, 1, D5, (const float[]){-2, -0.5f, 0, 0.5f, 1}, 0);
    n = th_node(g, "Clip", 13, 1, 1);
    expect_float(g, n, &in, 1, D5, X5, 0);
    /* min > max: every value becomes max */
    ins[1] = th_tensor(TCI_DTYPE_FLOAT, 0, NULL, &lo);
    n = th_node(g, "Clip", 13, 3, 1);
    expect_float(g, n, ins, 1, D5, (const float[]){1, 1, 1, 1, 1}, 0);
    /* only min given, as a 2-input node */
    n = th_node(g, "Clip", 12, 2, 1);
    expect_float(g, n, ins, 1, D5, (const float[]){2, 2, 2, 2, 3}, 0);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_clip_integers) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t x[4] = {-5, 0, 7, INT64_MAX}, lo = 0, one[1] = {1};
    const int64_t d[1] = {4};
    tci_tensor ins[3] = {
        th_tensor(TCI_DTYPE_INT64, 1, d, x), th_tensor(TCI_DTYPE_INT64, 1, one, &lo), {0}};
    ir_node *n = th_node(g, "Clip", 13, 3, 1);
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, ins, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT64);
    const int64_t *y = out[0].data;
    ck_assert_int_eq(y[0], 0);
    ck_assert_int_eq(y[1], 0);
    ck_assert_int_eq(y[2], 7);
    ck_assert_int_eq(y[3], INT64_MAX);
    th_free(out, 1);

    const uint8_t xu[3] = {0, 100, 250}, hu = 200;
    const int64_t d3[1] = {3};
    tci_tensor insu[3] = {
        th_tensor(TCI_DTYPE_UINT8, 1, d3, xu), {0}, th_tensor(TCI_DTYPE_UINT8, 0, NULL, &hu)};
    n = th_node(g, "Clip", 13, 3, 1);
    ck_assert_tci_ok(th_run(g, n, insu, out));
    const uint8_t *yu = out[0].data;
    ck_assert_uint_eq(yu[0], 0);
    ck_assert_uint_eq(yu[1], 100);
    ck_assert_uint_eq(yu[2], 200);
    th_free(out, 1);

    /* integer inputs arrived in opset 12 */
    n = th_node(g, "Clip", 11, 3, 1);
    ck_assert_tci_error(th_run(g, n, ins, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype int64");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_clip_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, D5, X5);
    ir_node *n = th_node(g, "Clip", 11, 1, 1);
    th_attr_float(g, n, "min", 0.0f);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED, "unsupported attribute 'min'");
    n = th_node(g, "Clip", 6, 2, 1);
    tci_tensor two[2] = {in, in};
    ck_assert_tci_error(th_run(g, n, two, out), TCI_ERR_INVALID_MODEL, "has 2 inputs");
    n = th_node(g, "Clip", 13, 2, 1);
    ck_assert_tci_error(th_run(g, n, two, out), TCI_ERR_INVALID_MODEL,
                        "input 1 (min) must be a scalar, it has 5 elements");
    const double lo = 0;
    tci_tensor mixed[2] = {in, th_tensor(TCI_DTYPE_DOUBLE, 0, NULL, &lo)};
    n = th_node(g, "Clip", 13, 2, 1);
    ck_assert_tci_error(th_run(g, n, mixed, out), TCI_ERR_INVALID_MODEL,
                        "input 1 has dtype double but input 0 has float");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_prelu) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* NCHW with a [C,1,1] slope, as old exporters write it */
    const int64_t xd[4] = {1, 2, 2, 2}, sd[3] = {2, 1, 1};
    const float x[8] = {-1, 2, -3, 4, -1, 2, -3, 4}, s[2] = {0.5f, 0.25f};
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_FLOAT, 4, xd, x),
                         th_tensor(TCI_DTYPE_FLOAT, 3, sd, s)};
    ir_node *n = th_node(g, "PRelu", 7, 2, 1);
    expect_float(g, n, ins, 4, xd, (const float[]){-0.5f, 2, -1.5f, 4, -0.25f, 2, -0.75f, 4}, 0);
    /* a single shared slope */
    const int64_t one[1] = {1};
    ins[1] = th_tensor(TCI_DTYPE_FLOAT, 1, one, s);
    n = th_node(g, "PRelu", 16, 2, 1);
    expect_float(g, n, ins, 4, xd, (const float[]){-0.5f, 2, -1.5f, 4, -0.5f, 2, -1.5f, 4}, 0);

    /* slope [2] aligns with W=2 under numpy rules, not with C */
    const int64_t two[1] = {2};
    ins[1] = th_tensor(TCI_DTYPE_FLOAT, 1, two, s);
    n = th_node(g, "PRelu", 9, 2, 1);
    expect_float(g, n, ins, 4, xd, (const float[]){-0.5f, 2, -1.5f, 4, -0.5f, 2, -1.5f, 4}, 0);

    /* the slope may not grow X */
    const int64_t big[4] = {2, 2, 2, 2};
    const float sb[16] = {0};
    ins[1] = th_tensor(TCI_DTYPE_FLOAT, 4, big, sb);
    n = th_node(g, "PRelu", 16, 2, 1);
    tci_tensor out[1];
    ck_assert_tci_error(th_run(g, n, ins, out), TCI_ERR_INVALID_MODEL,
                        "slope of shape 2x2x2x2 does not broadcast to X of shape 1x2x2x2");
    const int64_t three[1] = {3};
    ins[1] = th_tensor(TCI_DTYPE_FLOAT, 1, three, sb);
    n = th_node(g, "PRelu", 16, 2, 1);
    ck_assert_tci_error(th_run(g, n, ins, out), TCI_ERR_INVALID_MODEL, "does not broadcast");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_add_sub_mul_div_broadcast) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t ad[2] = {2, 3}, bd[1] = {3}, cd[2] = {2, 1}, scalar[1] = {0};
    const float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, c[2] = {2, 4}, s = 2;
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_FLOAT, 2, ad, a),
                         th_tensor(TCI_DTYPE_FLOAT, 1, bd, b)};
    expect_float(g, th_node(g, "Add", 14, 2, 1), ins, 2, ad,
                 (const float[]){11, 22, 33, 14, 25, 36}, 0);
    expect_float(g, th_node(g, "Sub", 7, 2, 1), ins, 2, ad,
                 (const float[]){-9, -18, -27, -6, -15, -24}, 0);
    ins[1] = th_tensor(TCI_DTYPE_FLOAT, 2, cd, c);
    expect_float(g, th_node(g, "Mul", 13, 2, 1), ins, 2, ad, (const float[]){2, 4, 6, 16, 20, 24},
                 0);
    expect_float(g, th_node(g, "Div", 14, 2, 1), ins, 2, ad,
                 (const float[]){0.5f, 1, 1.5f, 1, 1.25f, 1.5f}, 0);
    /* scalar on the left; [2,1] x [3] grows both sides */
    tci_tensor sl[2] = {th_tensor(TCI_DTYPE_FLOAT, 0, scalar, &s),
                        th_tensor(TCI_DTYPE_FLOAT, 2, ad, a)};
    expect_float(g, th_node(g, "Div", 7, 2, 1), sl, 2, ad,
                 (const float[]){2, 1, 2.0f / 3, 0.5f, 0.4f, 2.0f / 6}, 1e-7f);
    tci_tensor both[2] = {th_tensor(TCI_DTYPE_FLOAT, 2, cd, c),
                          th_tensor(TCI_DTYPE_FLOAT, 1, bd, b)};
    expect_float(g, th_node(g, "Sub", 14, 2, 1), both, 2, ad,
                 (const float[]){-8, -18, -28, -6, -16, -26}, 0);
    ir_graph_destroy(g);
}
END_TEST

/* Reference for random broadcast cases: index arithmetic done the slow, obvious way. */
static float ref_at(const float *data, int rank, const int64_t *dims, int out_rank,
                    const int64_t *out_dims, int64_t flat) {
    int64_t idx[TCI_MAX_RANK];
    for (int i = out_rank - 1; i >= 0; i--) {
        idx[i] = flat % out_dims[i];
        flat /= out_dims[i];
    }
    int64_t off = 0;
    for (int i = 0; i < rank; i++) {
        int64_t k = idx[i + out_rank - rank];
        off = off * dims[i] + (dims[i] == 1 ? 0 : k);
    }
    return data[off];
}

START_TEST(test_broadcast_patterns) {
    /* shapes that exercise dim merging, size-1 dropping and stride-0 rows */
    static const struct {
        int ra;
        int64_t a[4];
        int rb;
        int64_t b[4];
    } cases[] = {
        {4, {2, 3, 4, 5}, 3, {3, 1, 5}},    {4, {2, 3, 4, 5}, 4, {2, 3, 1, 1}},
        {4, {2, 3, 4, 5}, 1, {5}},          {4, {1, 3, 1, 5}, 4, {2, 1, 4, 1}},
        {3, {4, 1, 6}, 3, {4, 5, 1}},       {2, {1, 1}, 3, {3, 2, 1}},
        {4, {2, 3, 4, 5}, 4, {2, 3, 4, 5}}, {2, {7, 1}, 1, {1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int64_t na = 1, nb = 1;
        for (int i = 0; i < cases[c].ra; i++) na *= cases[c].a[i];
        for (int i = 0; i < cases[c].rb; i++) nb *= cases[c].b[i];
        float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb);
        for (int64_t i = 0; i < na; i++) a[i] = (float)(i * 7 % 13);
        for (int64_t i = 0; i < nb; i++) b[i] = (float)(i % 5 + 1);
        tci_tensor ins[2] = {th_tensor(TCI_DTYPE_FLOAT, cases[c].ra, cases[c].a, a),
                             th_tensor(TCI_DTYPE_FLOAT, cases[c].rb, cases[c].b, b)};
        tci_tensor out[1];
        ck_assert_tci_ok(th_run(g, th_node(g, "Sub", 14, 2, 1), ins, out));
        int64_t n = tci_tensor_count(&out[0]);
        const float *y = out[0].data;
        for (int64_t i = 0; i < n; i++) {
            float want = ref_at(a, cases[c].ra, cases[c].a, out[0].rank, out[0].dims, i) -
                         ref_at(b, cases[c].rb, cases[c].b, out[0].rank, out[0].dims, i);
            ck_assert_msg(y[i] == want, "case %zu element %lld: %g vs %g", c, (long long)i,
                          (double)y[i], (double)want);
        }
        th_free(out, 1);
        free(a);
        free(b);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_integer_arithmetic) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t d[1] = {5};
    const int32_t a[5] = {-7, 7, -7, 7, INT32_MIN}, b[5] = {2, -2, -2, 2, -1};
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_INT32, 1, d, a), th_tensor(TCI_DTYPE_INT32, 1, d, b)};
    tci_tensor out[1];
    /* truncation toward zero, as onnxruntime; MIN / -1 wraps */
    ck_assert_tci_ok(th_run(g, th_node(g, "Div", 14, 2, 1), ins, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
    const int32_t *y = out[0].data;
    const int32_t want_div[5] = {-3, -3, 3, 3, INT32_MIN};
    for (int i = 0; i < 5; i++) ck_assert_int_eq(y[i], want_div[i]);
    th_free(out, 1);
    /* overflow wraps */
    ck_assert_tci_ok(th_run(g, th_node(g, "Add", 14, 2, 1), ins, out));
    y = out[0].data;
    ck_assert_int_eq(y[0], -5);
    ck_assert_int_eq(y[4], INT32_MAX);
    th_free(out, 1);

    const int64_t shape[3] = {1, 3, 224}, two[1] = {2};
    const int64_t s64[3] = {1, 3, 224}, half = 2, idx[2] = {-7, 9};
    tci_tensor l[2] = {th_tensor(TCI_DTYPE_INT64, 1, (const int64_t[]){3}, s64),
                       th_tensor(TCI_DTYPE_INT64, 0, NULL, &half)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Mul", 14, 2, 1), l, out));
    const int64_t *z = out[0].data;
    ck_assert_int_eq(out[0].rank, 1);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(z[i], shape[i] * 2);
    th_free(out, 1);
    l[0] = th_tensor(TCI_DTYPE_INT64, 1, two, idx);
    ck_assert_tci_ok(th_run(g, th_node(g, "Div", 13, 2, 1), l, out));
    z = out[0].data;
    ck_assert_int_eq(z[0], -3);
    ck_assert_int_eq(z[1], 4);
    th_free(out, 1);
    ck_assert_tci_ok(th_run(g, th_node(g, "Add", 7, 2, 1), l, out));
    z = out[0].data;
    ck_assert_int_eq(z[0], -5);
    ck_assert_int_eq(z[1], 11);
    th_free(out, 1);

    const int8_t a8[2] = {100, -128}, b8[2] = {100, 1};
    tci_tensor i8[2] = {th_tensor(TCI_DTYPE_INT8, 1, two, a8),
                        th_tensor(TCI_DTYPE_INT8, 1, two, b8)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Add", 14, 2, 1), i8, out));
    const int8_t *y8 = out[0].data;
    ck_assert_int_eq(y8[0], -56);
    ck_assert_int_eq(y8[1], -127);
    th_free(out, 1);

    const double ad[2] = {1.5, -3}, bd[2] = {0.5, 2};
    tci_tensor f64[2] = {th_tensor(TCI_DTYPE_DOUBLE, 1, two, ad),
                         th_tensor(TCI_DTYPE_DOUBLE, 1, two, bd)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Mul", 14, 2, 1), f64, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_DOUBLE);
    ck_assert_double_eq(((double *)out[0].data)[0], 0.75);
    ck_assert_double_eq(((double *)out[0].data)[1], -6);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_binary_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t d[1] = {2}, zero[2] = {4, 0};
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_INT64, 1, d, (const int64_t[]){1, 2}),
                         th_tensor(TCI_DTYPE_INT64, 1, d, zero)};
    ck_assert_tci_error(th_run(g, th_node(g, "Div", 14, 2, 1), ins, out), TCI_ERR_INVALID_ARGUMENT,
                        "integer division by zero");
    ck_assert_ptr_null(out[0].data);
    const float f[2] = {1, 2};
    ins[0] = th_tensor(TCI_DTYPE_FLOAT, 1, d, f);
    ck_assert_tci_error(th_run(g, th_node(g, "Add", 14, 2, 1), ins, out), TCI_ERR_INVALID_MODEL,
                        "input 1 has dtype int64 but input 0 has float");
    const int64_t d3[1] = {3};
    ins[1] = th_tensor(TCI_DTYPE_FLOAT, 1, d3, (const float[]){1, 2, 3});
    ck_assert_tci_error(th_run(g, th_node(g, "Mul", 14, 2, 1), ins, out), TCI_ERR_INVALID_MODEL,
                        "shapes do not broadcast: dim 0 is 2 vs 3");
    const uint16_t h[2] = {0x3c00, 0x3c00};
    ins[0] = th_tensor(TCI_DTYPE_FLOAT16, 1, d, h);
    ins[1] = ins[0];
    ck_assert_tci_error(th_run(g, th_node(g, "Add", 14, 2, 1), ins, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype float16");
    ir_node *n = th_node(g, "Add", 14, 2, 1);
    th_attr_int(g, n, "broadcast", 1);
    ck_assert_tci_error(th_run(g, n, ins, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'broadcast'");
    ck_assert_tci_error(th_run(g, th_node(g, "Add", 6, 2, 1), ins, out), TCI_ERR_UNSUPPORTED,
                        "older than tcinfer supports (from opset 7)");
    ir_graph_destroy(g);
}
END_TEST

/* A Mod node with the given fmod attribute (-1: none, the default 0). */
static ir_node *mod_node(ir_graph *g, int opset, int fmod_attr) {
    ir_node *n = th_node(g, "Mod", opset, 2, 1);
    if (fmod_attr >= 0) th_attr_int(g, n, "fmod", fmod_attr);
    return n;
}

START_TEST(test_mod_integers) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    /* negative operands both ways; MIN % -1 is 0 (it traps when computed as x86's idiv) */
    const int64_t d[1] = {7};
    const int32_t a[7] = {-7, 7, -7, 7, 0, INT32_MIN, INT32_MIN};
    const int32_t b[7] = {3, -3, -3, 3, -5, -1, INT32_MAX};
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_INT32, 1, d, a), th_tensor(TCI_DTYPE_INT32, 1, d, b)};
    const int32_t want_mod[7] = {2, -2, -1, 1, 0, 0, INT32_MAX - 1}; /* Python's % */
    const int32_t want_fmod[7] = {-1, 1, -1, 1, 0, 0, -1};           /* C's % */
    for (int f = -1; f <= 1; f++) {
        ck_assert_tci_ok(th_run(g, mod_node(g, f < 0 ? 10 : 13, f), ins, out));
        ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
        const int32_t *y = out[0].data;
        for (int i = 0; i < 7; i++)
            ck_assert_msg(y[i] == (f == 1 ? want_fmod : want_mod)[i], "fmod=%d element %d: %d",
                          f, i, y[i]);
        th_free(out, 1);
    }

    /* int64 [2,3] by a [3] row and by a scalar */
    const int64_t ad[2] = {2, 3}, rd[1] = {3};
    const int64_t a64[6] = {-5, 5, -9, 9, INT64_MIN, -1}, row[3] = {4, -4, 7}, three = -3;
    tci_tensor l[2] = {th_tensor(TCI_DTYPE_INT64, 2, ad, a64), th_tensor(TCI_DTYPE_INT64, 1, rd, row)};
    ck_assert_tci_ok(th_run(g, mod_node(g, 13, 0), l, out));
    ck_assert_int_eq(out[0].rank, 2);
    const int64_t want_row[6] = {3, -3, 5, 1, 0, 6};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], want_row[i]);
    th_free(out, 1);
    l[1] = th_tensor(TCI_DTYPE_INT64, 0, NULL, &three);
    ck_assert_tci_ok(th_run(g, mod_node(g, 13, 1), l, out));
    const int64_t want_scalar[6] = {-2, 2, 0, 0, -2, -1};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], want_scalar[i]);
    th_free(out, 1);

    /* int8 with its extremes; uint8, where both modes agree */
    const int64_t two[1] = {2};
    const int8_t a8[2] = {-128, 127}, b8[2] = {-1, -128};
    tci_tensor i8[2] = {th_tensor(TCI_DTYPE_INT8, 1, two, a8), th_tensor(TCI_DTYPE_INT8, 1, two, b8)};
    ck_assert_tci_ok(th_run(g, mod_node(g, 13, 0), i8, out));
    ck_assert_int_eq(((int8_t *)out[0].data)[0], 0);
    ck_assert_int_eq(((int8_t *)out[0].data)[1], -1);
    th_free(out, 1);
    const uint8_t au[2] = {250, 7}, bu[2] = {7, 250};
    tci_tensor u8[2] = {th_tensor(TCI_DTYPE_UINT8, 1, two, au),
                        th_tensor(TCI_DTYPE_UINT8, 1, two, bu)};
    for (int f = 0; f <= 1; f++) {
        ck_assert_tci_ok(th_run(g, mod_node(g, 13, f), u8, out));
        ck_assert_int_eq(((uint8_t *)out[0].data)[0], 5);
        ck_assert_int_eq(((uint8_t *)out[0].data)[1], 7);
        th_free(out, 1);
    }

    /* a zero divisor is reported as Div's is (onnxruntime's x % 0 is undefined) */
    const int32_t zero[7] = {1, 1, 1, 0, 1, 1, 1};
    ins[1] = th_tensor(TCI_DTYPE_INT32, 1, d, zero);
    for (int f = 0; f <= 1; f++) {
        ck_assert_tci_error(th_run(g, mod_node(g, 13, f), ins, out), TCI_ERR_INVALID_ARGUMENT,
                            "integer division by zero");
        ck_assert_ptr_null(out[0].data);
    }
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_mod_floats) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    /* fmod=1: C's fmod, the dividend's sign; [2,1] x [3] broadcasts both sides */
    const int64_t cd[2] = {2, 1}, rd[1] = {3}, od[2] = {2, 3};
    const float a[2] = {-4.5f, 7.0f}, b[3] = {2.0f, -3.0f, 0.5f};
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_FLOAT, 2, cd, a), th_tensor(TCI_DTYPE_FLOAT, 1, rd, b)};
    expect_float(g, mod_node(g, 13, 1), ins, 2, od, (const float[]){-0.5f, -1.5f, -0.0f, 1, 1, 0},
                 0);
    /* Mod-28's fmod=0 on floats is numpy.mod: the divisor's sign */
    expect_float(g, mod_node(g, 28, 0), ins, 2, od, (const float[]){1.5f, -1.5f, 0, 1, -2, 0}, 0);

    /* numpy.mod's edge cases, in double: a zero takes the divisor's sign, an infinite divisor
     * returns x or y, inf or NaN operands and a zero divisor give NaN */
    const int64_t d[1] = {8};
    const double x[8] = {0.0, -0.0, -3, 3, INFINITY, 1, NAN, 1};
    const double y[8] = {-2, 2, INFINITY, -INFINITY, 2, 0, 2, NAN};
    tci_tensor dd[2] = {th_tensor(TCI_DTYPE_DOUBLE, 1, d, x), th_tensor(TCI_DTYPE_DOUBLE, 1, d, y)};
    ck_assert_tci_ok(th_run(g, mod_node(g, 28, -1), dd, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_DOUBLE);
    const double *z = out[0].data;
    ck_assert(z[0] == 0 && signbit(z[0]));
    ck_assert(z[1] == 0 && !signbit(z[1]));
    ck_assert_double_eq(z[2], INFINITY);
    ck_assert_double_eq(z[3], -INFINITY);
    for (int i = 4; i < 8; i++) ck_assert(isnan(z[i]));
    th_free(out, 1);
    ck_assert_tci_ok(th_run(g, mod_node(g, 13, 1), dd, out));
    z = out[0].data;
    ck_assert(z[0] == 0 && !signbit(z[0])); /* fmod keeps the dividend's sign */
    ck_assert(z[1] == 0 && signbit(z[1]));
    ck_assert_double_eq(z[2], -3);
    ck_assert_double_eq(z[3], 3);
    for (int i = 4; i < 8; i++) ck_assert(isnan(z[i]));
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_mod_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t d[1] = {2};
    const float f[2] = {1, 2};
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_FLOAT, 1, d, f), th_tensor(TCI_DTYPE_FLOAT, 1, d, f)};
    /* floats with fmod=0 before opset 28: refused, as onnxruntime does */
    ck_assert_tci_error(th_run(g, mod_node(g, 13, -1), ins, out), TCI_ERR_INVALID_MODEL,
                        "(Mod): fmod=0 (integer modulus) with float inputs: before opset 28, "
                        "floating-point inputs require fmod=1");
    const double f64[2] = {1, 2};
    tci_tensor dd[2] = {th_tensor(TCI_DTYPE_DOUBLE, 1, d, f64), th_tensor(TCI_DTYPE_DOUBLE, 1, d, f64)};
    ck_assert_tci_error(th_run(g, mod_node(g, 10, 0), dd, out), TCI_ERR_INVALID_MODEL,
                        "fmod=0 (integer modulus) with double inputs");
    ck_assert_tci_error(th_run(g, mod_node(g, 13, 2), ins, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'fmod' is 2, not 0 or 1");
    ir_node *n = mod_node(g, 13, 1);
    th_attr_int(g, n, "broadcast", 1);
    ck_assert_tci_error(th_run(g, n, ins, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'broadcast'");
    ins[1] = th_tensor(TCI_DTYPE_INT64, 1, d, (const int64_t[]){1, 2});
    ck_assert_tci_error(th_run(g, mod_node(g, 13, 1), ins, out), TCI_ERR_INVALID_MODEL,
                        "input 1 has dtype int64 but input 0 has float");
    const uint16_t h[2] = {0x3c00, 0x3c00};
    ins[0] = ins[1] = th_tensor(TCI_DTYPE_FLOAT16, 1, d, h);
    ck_assert_tci_error(th_run(g, mod_node(g, 13, 1), ins, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype float16");
    ck_assert_tci_error(th_run(g, mod_node(g, 9, 1), ins, out), TCI_ERR_UNSUPPORTED,
                        "older than tcinfer supports (from opset 10)");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_pow) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t d[1] = {4};
    const float x[4] = {2, -3, 4, 0.5f}, e = 2, ef[4] = {3, 2, 0.5f, -1};
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_FLOAT, 1, d, x),
                         th_tensor(TCI_DTYPE_FLOAT, 0, NULL, &e)};
    expect_float(g, th_node(g, "Pow", 7, 2, 1), ins, 1, d, (const float[]){4, 9, 16, 0.25f}, 0);
    ins[1] = th_tensor(TCI_DTYPE_FLOAT, 1, d, ef);
    expect_float(g, th_node(g, "Pow", 15, 2, 1), ins, 1, d, (const float[]){8, 9, 2, 2}, 1e-6f);

    /* opset 12+: the exponent's dtype may differ; the output takes the base's */
    const int64_t ei[4] = {3, 3, -1, 0};
    ins[1] = th_tensor(TCI_DTYPE_INT64, 1, d, ei);
    expect_float(g, th_node(g, "Pow", 12, 2, 1), ins, 1, d, (const float[]){8, -27, 0.25f, 1},
                 1e-6f);
    const int64_t bi[4] = {2, -3, 2, 5};
    tci_tensor ii[2] = {th_tensor(TCI_DTYPE_INT64, 1, d, bi), th_tensor(TCI_DTYPE_INT64, 1, d, ei)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Pow", 13, 2, 1), ii, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT64);
    const int64_t want[4] = {8, -27, 0, 1};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], want[i]);
    th_free(out, 1);
    const int32_t b32[2] = {2, 3};
    const float fe[2] = {0.5f, 2.7f};
    const int64_t two[1] = {2};
    tci_tensor mix[2] = {th_tensor(TCI_DTYPE_INT32, 1, two, b32),
                         th_tensor(TCI_DTYPE_FLOAT, 1, two, fe)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Pow", 15, 2, 1), mix, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
    ck_assert_int_eq(((int32_t *)out[0].data)[0], 1);
    ck_assert_int_eq(((int32_t *)out[0].data)[1], 19);
    th_free(out, 1);

    /* before opset 12 both sides share one type */
    ck_assert_tci_error(th_run(g, th_node(g, "Pow", 7, 2, 1), ins, out), TCI_ERR_INVALID_MODEL,
                        "input 1 has dtype int64 but input 0 has float");
    const int8_t b8[4] = {1, 2, 3, 4};
    ins[0] = th_tensor(TCI_DTYPE_INT8, 1, d, b8);
    ck_assert_tci_error(th_run(g, th_node(g, "Pow", 15, 2, 1), ins, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype int8");
    ir_graph_destroy(g);
}
END_TEST

static void expect_bools(const tci_tensor *out, const uint8_t *want, int n) {
    ck_assert_int_eq(out->dtype, TCI_DTYPE_BOOL);
    for (int i = 0; i < n; i++)
        ck_assert_msg(((const uint8_t *)out->data)[i] == want[i], "element %d: got %d want %d", i,
                      ((const uint8_t *)out->data)[i], want[i]);
}

START_TEST(test_equal) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t ad[2] = {2, 2}, bd[1] = {2};
    const int64_t a[4] = {1, 2, 3, 2}, b[2] = {1, 2};
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_INT64, 2, ad, a),
                         th_tensor(TCI_DTYPE_INT64, 1, bd, b)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Equal", 7, 2, 1), ins, out));
    ck_assert_int_eq(out[0].rank, 2);
    expect_bools(&out[0], (const uint8_t[]){1, 1, 0, 1}, 4);
    th_free(out, 1);
    const float fa[4] = {1, NAN, -0.0f, 2}, fb[4] = {1, NAN, 0.0f, 3};
    const int64_t d4[1] = {4};
    tci_tensor f[2] = {th_tensor(TCI_DTYPE_FLOAT, 1, d4, fa),
                       th_tensor(TCI_DTYPE_FLOAT, 1, d4, fb)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Equal", 11, 2, 1), f, out));
    expect_bools(&out[0], (const uint8_t[]){1, 0, 1, 0}, 4);
    th_free(out, 1);
    const uint8_t ba[4] = {0, 1, 0, 1}, bb[4] = {0, 0, 1, 1};
    tci_tensor bo[2] = {th_tensor(TCI_DTYPE_BOOL, 1, d4, ba), th_tensor(TCI_DTYPE_BOOL, 1, d4, bb)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Equal", 19, 2, 1), bo, out));
    expect_bools(&out[0], (const uint8_t[]){1, 0, 0, 1}, 4);
    th_free(out, 1);
    /* Add has no bool kernel */
    ck_assert_tci_error(th_run(g, th_node(g, "Add", 14, 2, 1), bo, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype bool");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_where) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    /* cond [2,1], X [1,3], Y scalar: all three broadcast */
    const int64_t cd[2] = {2, 1}, xd[2] = {1, 3}, od[2] = {2, 3};
    const uint8_t c[2] = {1, 0};
    const float x[3] = {1, 2, 3}, y = -1;
    tci_tensor ins[3] = {th_tensor(TCI_DTYPE_BOOL, 2, cd, c), th_tensor(TCI_DTYPE_FLOAT, 2, xd, x),
                         th_tensor(TCI_DTYPE_FLOAT, 0, NULL, &y)};
    expect_float(g, th_node(g, "Where", 9, 3, 1), ins, 2, od, (const float[]){1, 2, 3, -1, -1, -1},
                 0);
    /* int64, same shapes */
    const int64_t d[1] = {4};
    const uint8_t c4[4] = {1, 0, 0, 1};
    const int64_t xi[4] = {1, 2, 3, 4}, yi[4] = {-1, -2, -3, -4};
    tci_tensor ii[3] = {th_tensor(TCI_DTYPE_BOOL, 1, d, c4), th_tensor(TCI_DTYPE_INT64, 1, d, xi),
                        th_tensor(TCI_DTYPE_INT64, 1, d, yi)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Where", 16, 3, 1), ii, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT64);
    const int64_t want[4] = {1, -2, -3, 4};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], want[i]);
    th_free(out, 1);

    ii[0] = th_tensor(TCI_DTYPE_INT64, 1, d, xi);
    ck_assert_tci_error(th_run(g, th_node(g, "Where", 16, 3, 1), ii, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype int64");
    ii[0] = th_tensor(TCI_DTYPE_BOOL, 1, d, c4);
    ii[2] = th_tensor(TCI_DTYPE_INT32, 1, d, (const int32_t[]){0, 0, 0, 0});
    ck_assert_tci_error(th_run(g, th_node(g, "Where", 16, 3, 1), ii, out), TCI_ERR_INVALID_MODEL,
                        "input 2 has dtype int32 but input 1 has int64");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_variadic) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t ad[2] = {2, 2}, bd[1] = {2}, one[1] = {1};
    const float a[4] = {1, 5, 3, NAN}, b[2] = {2, 4}, c = 10;
    tci_tensor ins[3] = {th_tensor(TCI_DTYPE_FLOAT, 2, ad, a), th_tensor(TCI_DTYPE_FLOAT, 1, bd, b),
                         th_tensor(TCI_DTYPE_FLOAT, 1, one, &c)};
    expect_float(g, th_node(g, "Sum", 8, 3, 1), ins, 2, ad, (const float[]){13, 19, 15, NAN}, 0);
    expect_float(g, th_node(g, "Max", 13, 2, 1), ins, 2, ad, (const float[]){2, 5, 3, NAN}, 0);
    expect_float(g, th_node(g, "Min", 6, 2, 1), ins, 2, ad, (const float[]){1, 4, 2, NAN}, 0);
    expect_float(g, th_node(g, "Min", 12, 3, 1), ins, 2, ad, (const float[]){1, 4, 2, NAN}, 0);
    /* NaN on the right propagates too */
    tci_tensor swapped[2] = {ins[1], ins[0]};
    expect_float(g, th_node(g, "Max", 13, 2, 1), swapped, 2, ad, (const float[]){2, 5, 3, NAN}, 0);
    expect_float(g, th_node(g, "Sum", 13, 1, 1), ins, 2, ad, a, 0);

    const int32_t ia[3] = {-5, 7, 0}, ib[3] = {3, -2, 0};
    const int64_t d3[1] = {3};
    tci_tensor ii[2] = {th_tensor(TCI_DTYPE_INT32, 1, d3, ia),
                        th_tensor(TCI_DTYPE_INT32, 1, d3, ib)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Max", 12, 2, 1), ii, out));
    ck_assert_int_eq(((int32_t *)out[0].data)[0], 3);
    ck_assert_int_eq(((int32_t *)out[0].data)[1], 7);
    th_free(out, 1);
    ck_assert_tci_ok(th_run(g, th_node(g, "Sum", 13, 2, 1), ii, out));
    ck_assert_int_eq(((int32_t *)out[0].data)[0], -2);
    ck_assert_int_eq(((int32_t *)out[0].data)[1], 5);
    th_free(out, 1);

    ii[1] = th_tensor(TCI_DTYPE_INT64, 1, d3, (const int64_t[]){1, 2, 3});
    ck_assert_tci_error(th_run(g, th_node(g, "Sum", 13, 2, 1), ii, out), TCI_ERR_INVALID_MODEL,
                        "input 1 has dtype int64 but input 0 has int32");
    ck_assert_tci_error(th_run(g, th_node(g, "Max", 13, 0, 1), ii, out), TCI_ERR_INVALID_MODEL,
                        "has 0 inputs");
    ii[1].dtype = TCI_DTYPE_UNDEFINED; /* an empty input name */
    ck_assert_tci_error(th_run(g, th_node(g, "Min", 13, 2, 1), ii, out), TCI_ERR_INVALID_MODEL,
                        "input 1 is missing");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_empty_tensors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t ad[2] = {0, 3}, bd[1] = {3};
    const float b[3] = {1, 2, 3};
    tci_tensor ins[2] = {th_tensor(TCI_DTYPE_FLOAT, 2, ad, b),
                         th_tensor(TCI_DTYPE_FLOAT, 1, bd, b)};
    ck_assert_tci_ok(th_run(g, th_node(g, "Add", 14, 2, 1), ins, out));
    ck_assert_int_eq(out[0].rank, 2);
    ck_assert_int_eq(out[0].dims[0], 0);
    ck_assert_int_eq(out[0].dims[1], 3);
    th_free(out, 1);
    ck_assert_tci_ok(th_run(g, th_node(g, "Relu", 14, 1, 1), ins, out));
    ck_assert_int_eq(out[0].dims[0], 0);
    th_free(out, 1);
    ir_node *n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_INT64);
    ck_assert_tci_ok(th_run(g, n, ins, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT64);
    ck_assert_int_eq(out[0].dims[0], 0);
    th_free(out, 1);
    tci_tensor three[3] = {th_tensor(TCI_DTYPE_BOOL, 2, ad, b), ins[1], ins[1]};
    ck_assert_tci_ok(th_run(g, th_node(g, "Where", 16, 3, 1), three, out));
    ck_assert_int_eq(out[0].dims[0], 0);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_infer_unknown_shapes) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor a = {0}, b = {0}, c = {0}, out = {0};
    tci_tensor *outs[1] = {&out};

    ir_node *n = th_node(g, "Add", 14, 2, 1);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    a.dtype = TCI_DTYPE_FLOAT;
    a.rank = 3;
    a.dims[0] = -1;
    a.dims[1] = 1;
    a.dims[2] = 8;
    b.dtype = TCI_DTYPE_FLOAT;
    b.rank = 2;
    b.dims[0] = 4;
    b.dims[1] = -1;
    const tci_tensor *ins[3] = {&a, &b, &c};
    ck_assert_tci_ok(n->desc->infer(n, ins, outs));
    ck_assert_int_eq(out.rank, 3);
    ck_assert_int_eq(out.dims[0], -1);
    ck_assert_int_eq(out.dims[1], 4);
    ck_assert_int_eq(out.dims[2], 8);
    ck_assert_int_eq(out.dtype, TCI_DTYPE_FLOAT);

    b.rank = -1;
    ck_assert_tci_ok(n->desc->infer(n, ins, outs));
    ck_assert_int_eq(out.rank, -1);

    /* dtype not yet known on one side: taken from the other */
    a.dtype = TCI_DTYPE_UNDEFINED;
    b.dtype = TCI_DTYPE_INT64;
    ck_assert_tci_ok(n->desc->infer(n, ins, outs));
    ck_assert_int_eq(out.dtype, TCI_DTYPE_INT64);

    n = th_node(g, "Where", 16, 3, 1);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    a.dtype = TCI_DTYPE_BOOL;
    a.rank = 2;
    a.dims[0] = -1;
    a.dims[1] = 1;
    b.dtype = TCI_DTYPE_FLOAT;
    b.rank = 1;
    b.dims[0] = 5;
    c.dtype = TCI_DTYPE_FLOAT;
    c.rank = 0;
    ck_assert_tci_ok(n->desc->infer(n, ins, outs));
    ck_assert_int_eq(out.rank, 2);
    ck_assert_int_eq(out.dims[0], -1);
    ck_assert_int_eq(out.dims[1], 5);
    ck_assert_int_eq(out.dtype, TCI_DTYPE_FLOAT);

    n = th_node(g, "Sum", 13, 3, 1);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    a.dtype = TCI_DTYPE_FLOAT;
    c.rank = 3;
    c.dims[0] = 2;
    c.dims[1] = -1;
    c.dims[2] = 1;
    ck_assert_tci_ok(n->desc->infer(n, ins, outs));
    ck_assert_int_eq(out.rank, 3);
    ck_assert_int_eq(out.dims[0], 2);
    ck_assert_int_eq(out.dims[1], -1);
    ck_assert_int_eq(out.dims[2], 5);

    n = th_node(g, "Equal", 13, 2, 1);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    a.dtype = TCI_DTYPE_UNDEFINED;
    b.dtype = TCI_DTYPE_UNDEFINED;
    ck_assert_tci_ok(n->desc->infer(n, ins, outs));
    ck_assert_int_eq(out.dtype, TCI_DTYPE_BOOL);

    n = th_node(g, "PRelu", 16, 2, 1);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    a.dtype = TCI_DTYPE_FLOAT;
    a.rank = 4;
    a.dims[0] = -1;
    a.dims[1] = 16;
    a.dims[2] = -1;
    a.dims[3] = -1;
    b.dtype = TCI_DTYPE_FLOAT;
    b.rank = 3;
    b.dims[0] = 16;
    b.dims[1] = 1;
    b.dims[2] = 1;
    ck_assert_tci_ok(n->desc->infer(n, ins, outs));
    ck_assert_int_eq(out.rank, 4);
    ck_assert_int_eq(out.dims[1], 16);
    ck_assert_int_eq(out.dims[2], -1);
    b.dims[0] = 8;
    ck_assert_tci_error(n->desc->infer(n, ins, outs), TCI_ERR_INVALID_MODEL,
                        "slope of shape 8x1x1 does not broadcast to X of shape ?x16x?x?");

    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_INT64);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    ck_assert_tci_ok(n->desc->infer(n, ins, outs));
    ck_assert_int_eq(out.dtype, TCI_DTYPE_INT64);
    ck_assert_int_eq(out.rank, 4);
    ck_assert_int_eq(out.dims[0], -1);

    n = th_node(g, "Clip", 13, 3, 1);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    b.rank = -1;
    c.dtype = TCI_DTYPE_FLOAT;
    c.rank = 1;
    c.dims[0] = -1;
    ck_assert_tci_ok(n->desc->infer(n, ins, outs));
    ck_assert_int_eq(out.rank, 4);
    ck_assert_int_eq(out.dims[1], 16);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_cast_values) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t d[1] = {8};
    const float x[8] = {NAN, 3e9f, -3e9f, 300.7f, -1.5f, 1e20f, -0.0f, 255.9f};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, d, x);

    /* float to integers behaves like onnxruntime on x86: truncation, INT_MIN when out of range,
     * low bits kept for narrow types */
    ir_node *n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_INT32);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
    const int32_t w32[8] = {INT32_MIN, INT32_MIN, INT32_MIN, 300, -1, INT32_MIN, 0, 255};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], w32[i]);
    th_free(out, 1);
    n = th_node(g, "Cast", 6, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_UINT8);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    const uint8_t wu8[8] = {0, 0, 0, 44, 255, 0, 0, 255};
    for (int i = 0; i < 8; i++) ck_assert_uint_eq(((uint8_t *)out[0].data)[i], wu8[i]);
    th_free(out, 1);
    n = th_node(g, "Cast", 9, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_INT64);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    const int64_t w64[8] = {INT64_MIN, 3000000000LL, -3000000000LL, 300, -1, INT64_MIN, 0, 255};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], w64[i]);
    th_free(out, 1);
    n = th_node(g, "Cast", 19, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_BOOL);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    expect_bools(&out[0], (const uint8_t[]){1, 1, 1, 1, 1, 1, 0, 1}, 8);
    th_free(out, 1);

    /* float <-> float16 */
    const int64_t d3[1] = {3};
    const float hf[3] = {1.0f, -2.5f, 1e6f};
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_FLOAT16);
    in = th_tensor(TCI_DTYPE_FLOAT, 1, d3, hf);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    const uint16_t wh[3] = {0x3c00, 0xc100, 0x7c00};
    for (int i = 0; i < 3; i++) ck_assert_uint_eq(((uint16_t *)out[0].data)[i], wh[i]);
    th_free(out, 1);
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_FLOAT);
    in = th_tensor(TCI_DTYPE_FLOAT16, 1, d3, wh);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    th_assert_near(out[0].data, (const float[]){1.0f, -2.5f}, 2, 0);
    ck_assert(isinf(((float *)out[0].data)[2]));
    th_free(out, 1);

    /* integers: wrap when narrowing; int64 rounds once to float */
    const int32_t i32[3] = {200, -129, 70000};
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_INT8);
    in = th_tensor(TCI_DTYPE_INT32, 1, d3, i32);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    const int8_t w8[3] = {-56, 127, 112};
    for (int i = 0; i < 3; i++) ck_assert_int_eq(((int8_t *)out[0].data)[i], w8[i]);
    th_free(out, 1);
    const int64_t big[3] = {(INT64_C(1) << 62) + 1, -5, (INT64_C(1) << 24) + 1};
    n = th_node(g, "Cast", 21, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_FLOAT);
    in = th_tensor(TCI_DTYPE_INT64, 1, d3, big);
    expect_float(g, n, &in, 1, d3, (const float[]){4.611686e18f, -5, 16777216.0f}, 0);
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_DOUBLE);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ck_assert_double_eq(((double *)out[0].data)[1], -5.0);
    ck_assert_double_eq(((double *)out[0].data)[2], 16777217.0);
    th_free(out, 1);

    /* bool source: nonzero bytes read as true */
    const uint8_t bs[3] = {0, 1, 7};
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_FLOAT);
    in = th_tensor(TCI_DTYPE_BOOL, 1, d3, bs);
    expect_float(g, n, &in, 1, d3, (const float[]){0, 1, 1}, 0);
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_INT64);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ck_assert_int_eq(((int64_t *)out[0].data)[2], 1);
    th_free(out, 1);

    /* same type copies; more than one block */
    enum { N = 1000 };
    static double dv[N];
    for (int i = 0; i < N; i++) dv[i] = i * 0.5 - 100;
    const int64_t dn[1] = {N};
    n = th_node(g, "Cast", 28, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_FLOAT);
    in = th_tensor(TCI_DTYPE_DOUBLE, 1, dn, dv);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    for (int i = 0; i < N; i++) ck_assert_float_eq(((float *)out[0].data)[i], (float)dv[i]);
    th_free(out, 1);
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_DOUBLE);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ck_assert_double_eq(((double *)out[0].data)[N - 1], dv[N - 1]);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_cast_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, D5, X5);
    ir_node *n = th_node(g, "Cast", 13, 1, 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'to' is required");
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", 8);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED,
                        "attribute 'to' value 8 (STRING) is not supported");
    n = th_node(g, "Cast", 19, 1, 1);
    th_attr_int(g, n, "to", 17);
    th_attr_int(g, n, "saturate", 0);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED,
                        "attribute 'to' value 17 (FLOAT8E4M3FN) is not supported");
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", 16);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED, "(BFLOAT16)");
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", 99);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'to' value 99 is not an ONNX data type");
    /* saturate exists from opset 19, round_mode from 24 */
    n = th_node(g, "Cast", 13, 1, 1);
    th_attr_int(g, n, "to", 1);
    th_attr_int(g, n, "saturate", 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'saturate'");
    n = th_node(g, "Cast", 21, 1, 1);
    th_attr_int(g, n, "to", 1);
    th_attr_int(g, n, "saturate", 0);
    expect_float(g, n, &in, 1, D5, X5, 0);
    n = th_node(g, "Cast", 23, 1, 1);
    th_attr_int(g, n, "to", 1);
    th_attr_string(g, n, "round_mode", "up");
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'round_mode'");
    n = th_node(g, "Cast", 25, 1, 1);
    th_attr_int(g, n, "to", 1);
    th_attr_string(g, n, "round_mode", "sideways");
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'round_mode' value 'sideways' is not one of up, down, nearest");
    n = th_node(g, "Cast", 28, 1, 1);
    th_attr_int(g, n, "to", 7);
    th_attr_string(g, n, "round_mode", "nearest");
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ck_assert_int_eq(((int64_t *)out[0].data)[0], -2);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

/* Every op resolves at every opset from its first listed version to 28, and versions are listed
 * in full. */
START_TEST(test_version_tables) {
    static const struct {
        const char *op;
        int first;
    } ops[] = {
        {"Relu", 6},  {"LeakyRelu", 6}, {"Sigmoid", 6}, {"HardSigmoid", 6}, {"HardSwish", 14},
        {"Tanh", 6},  {"Elu", 6},       {"Selu", 6},    {"Softplus", 1},    {"Sqrt", 6},
        {"Erf", 9},   {"Gelu", 20},     {"Clip", 6},    {"PRelu", 7},       {"Add", 7},
        {"Sub", 7},   {"Mul", 7},       {"Div", 7},     {"Pow", 7},         {"Equal", 7},
        {"Where", 9}, {"Sum", 6},       {"Max", 6},     {"Min", 6},         {"Cast", 6},
        {"Mod", 10},  {"Neg", 6},       {"Abs", 6},     {"Sign", 9},        {"Exp", 6},
        {"Log", 6},   {"Reciprocal", 6}, {"Floor", 6},  {"Ceil", 6},        {"Round", 11},
        {"Softsign", 1}, {"Mish", 18},  {"Celu", 12},   {"ThresholdedRelu", 10},
        {"Sin", 7},   {"Cos", 7},
    };
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        for (int opset = ops[i].first; opset <= IR_MAX_KNOWN_OPSET; opset++) {
            ir_node *n = th_node(g, ops[i].op, opset, 1, 1);
            const op_desc *desc;
            int since;
            ck_assert_tci_ok(op_registry_resolve(n, &desc, &since));
            ck_assert_int_le(since, opset);
        }
        if (ops[i].first > 1) {
            ir_node *n = th_node(g, ops[i].op, ops[i].first - 1, 1, 1);
            const op_desc *desc;
            int since;
            ck_assert_tci_error(op_registry_resolve(n, &desc, &since), TCI_ERR_UNSUPPORTED,
                                "older than tcinfer supports");
        }
    }
    /* spot checks of the selected version */
    const struct {
        const char *op;
        int opset, since;
    } picks[] = {{"Cast", 28, 28}, {"Cast", 18, 13}, {"Pow", 14, 13}, {"Equal", 21, 19},
                 {"Clip", 12, 12}, {"Relu", 17, 14}, {"Max", 11, 8},  {"Softplus", 21, 1},
                 {"Mod", 12, 10},  {"Mod", 27, 13},  {"Mod", 28, 28}, {"Celu", 27, 12},
                 {"Celu", 28, 28}, {"Round", 21, 11}, {"Mish", 22, 22}, {"Neg", 12, 6}};
    for (size_t i = 0; i < sizeof picks / sizeof picks[0]; i++) {
        ir_node *n = th_node(g, picks[i].op, picks[i].opset, 1, 1);
        const op_desc *desc;
        int since;
        ck_assert_tci_ok(op_registry_resolve(n, &desc, &since));
        ck_assert_int_eq(since, picks[i].since);
    }
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("eltwise");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_activations);
    tcase_add_test(tc, test_more_activations);
    tcase_add_test(tc, test_neg_abs_sign_integers);
    tcase_add_test(tc, test_selu_gamma_and_sqrt);
    tcase_add_test(tc, test_gelu_tanh_and_bad_mode);
    tcase_add_test(tc, test_sigmoid_softplus_extremes);
    tcase_add_test(tc, test_unary_errors);
    tcase_add_test(tc, test_clip_versions);
    tcase_add_test(tc, test_clip_integers);
    tcase_add_test(tc, test_clip_errors);
    tcase_add_test(tc, test_prelu);
    tcase_add_test(tc, test_add_sub_mul_div_broadcast);
    tcase_add_test(tc, test_broadcast_patterns);
    tcase_add_test(tc, test_integer_arithmetic);
    tcase_add_test(tc, test_binary_errors);
    tcase_add_test(tc, test_mod_integers);
    tcase_add_test(tc, test_mod_floats);
    tcase_add_test(tc, test_mod_errors);
    tcase_add_test(tc, test_pow);
    tcase_add_test(tc, test_equal);
    tcase_add_test(tc, test_where);
    tcase_add_test(tc, test_variadic);
    tcase_add_test(tc, test_empty_tensors);
    tcase_add_test(tc, test_infer_unknown_shapes);
    tcase_add_test(tc, test_cast_values);
    tcase_add_test(tc, test_cast_errors);
    tcase_add_test(tc, test_version_tables);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
