/* ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp,
 * ReduceSumSquare, ReduceLogSum, and ArgMax, ArgMin, CumSum, CumProd, TopK (argreduce.c):
 * hand-computed results, opset differences, shape inference, error paths. */
#include <math.h>
#include <stdint.h>

#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

static const float rd_x[] = {1, 2, 3, 4, 5, 6};
static const int64_t rd_xd[] = {2, 3};

/* Runs a reduction of rd_x (2x3) with axes from the attribute (axes_count >= 0), from an input
 * (axes_count < 0 and axes_in set) or none. */
static void run_reduce(const char *op, int opset, int keepdims, int noop, const int64_t *axes,
                       int axes_count, bool as_input, int want_rank, const int64_t *want_dims,
                       const float *want) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, opset, as_input ? 2 : 1, 1);
    if (keepdims >= 0) th_attr_int(g, n, "keepdims", keepdims);
    if (noop >= 0) th_attr_int(g, n, "noop_with_empty_axes", noop);
    if (!as_input && axes_count >= 0) th_attr_ints(g, n, "axes", axes, (size_t)axes_count);
    const int64_t ad[] = {axes_count};
    tci_tensor in[2] = {th_tensor(F, 2, rd_xd, rd_x),
                        th_tensor(TCI_DTYPE_INT64, 1, ad, axes_count ? axes : rd_xd)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    th_assert_dims(&out[0], want_rank, want_dims);
    th_assert_near(out[0].data, want, (size_t)tci_tensor_count(&out[0]), 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}

START_TEST(test_reduce_sum_attribute_axes) {
    const int64_t ax1[] = {1}, ax0[] = {0}, axm1[] = {-1}, ax01[] = {0, 1}, dup[] = {1, 1};
    const int64_t d21[] = {2, 1}, d3[] = {3}, d11[] = {1, 1}, d2[] = {2};
    const float rows[] = {6, 15}, cols[] = {5, 7, 9}, all[] = {21};
    for (int opset = 1; opset <= 11; opset += 10) {
        run_reduce("ReduceSum", opset, -1, -1, ax1, 1, false, 2, d21, rows);
        run_reduce("ReduceSum", opset, 0, -1, ax0, 1, false, 1, d3, cols);
        run_reduce("ReduceSum", opset, 0, -1, axm1, 1, false, 1, d2, rows);
        run_reduce("ReduceSum", opset, 1, -1, NULL, -1, false, 2, d11, all);
        run_reduce("ReduceSum", opset, 0, -1, NULL, -1, false, 0, NULL, all);
        run_reduce("ReduceSum", opset, 0, -1, ax01, 2, false, 0, NULL, all);
        /* an empty axes list also means all */
        run_reduce("ReduceSum", opset, 1, -1, NULL, 0, false, 2, d11, all);
        /* a repeated axis counts once, as in onnxruntime */
        run_reduce("ReduceSum", opset, 1, -1, dup, 2, false, 2, d21, rows);
    }
}
END_TEST

START_TEST(test_reduce_axes_input) {
    const int64_t ax1[] = {1}, axm2[] = {-2};
    const int64_t d21[] = {2, 1}, d3[] = {3}, d11[] = {1, 1};
    const float rows[] = {6, 15}, cols[] = {5, 7, 9}, all[] = {21}, mean_rows[] = {2, 5},
                mean_all[] = {3.5f};
    run_reduce("ReduceSum", 13, 1, -1, ax1, 1, true, 2, d21, rows);
    run_reduce("ReduceSum", 13, 0, 0, axm2, 1, true, 1, d3, cols);
    /* axes absent or empty: all, or nothing with noop_with_empty_axes */
    run_reduce("ReduceSum", 13, 1, 0, NULL, -1, false, 2, d11, all);
    run_reduce("ReduceSum", 13, 1, 0, NULL, 0, true, 2, d11, all);
    run_reduce("ReduceSum", 13, 0, 1, NULL, 0, true, 2, rd_xd, rd_x);
    run_reduce("ReduceSum", 13, 0, 1, NULL, -1, false, 2, rd_xd, rd_x);
    run_reduce("ReduceMean", 18, 1, -1, ax1, 1, true, 2, d21, mean_rows);
    run_reduce("ReduceMean", 18, 0, 0, NULL, 0, true, 0, NULL, mean_all);
    run_reduce("ReduceMean", 18, 1, 1, NULL, -1, false, 2, rd_xd, rd_x);
    /* ReduceMean keeps the attribute until opset 18 */
    run_reduce("ReduceMean", 13, 1, -1, ax1, 1, false, 2, d21, mean_rows);
    run_reduce("ReduceMean", 17, 0, -1, NULL, -1, false, 0, NULL, mean_all);
}
END_TEST

START_TEST(test_reduce_middle_axes) {
    /* (2,3,2) reduced over axes 0 and 2 */
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i;
    const int64_t xd[] = {2, 3, 2}, axes[] = {0, 2}, wd[] = {1, 3, 1}, ad[] = {2};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "ReduceMean", 18, 2, 1);
    tci_tensor in[2] = {th_tensor(F, 3, xd, x), th_tensor(TCI_DTYPE_INT64, 1, ad, axes)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    th_assert_dims(&out[0], 3, wd);
    const float want[] = {(0 + 1 + 6 + 7) / 4.0f, (2 + 3 + 8 + 9) / 4.0f, (4 + 5 + 10 + 11) / 4.0f};
    th_assert_near(out[0].data, want, 3, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reduce_integers) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int32_t x32[] = {1, 2, 4, 3, 5, 8};
    const int64_t x64[] = {-1, -2, -4, 3, 5, 8}, axes[] = {1};
    tci_tensor out[1];
    /* integer mean truncates toward zero: 7/3 -> 2, -7/3 -> -2 */
    ir_node *m = th_node(g, "ReduceMean", 11, 1, 1);
    th_attr_ints(g, m, "axes", axes, 1);
    tci_tensor in32[1] = {th_tensor(TCI_DTYPE_INT32, 2, rd_xd, x32)};
    ck_assert_tci_ok(th_run(g, m, in32, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
    ck_assert_int_eq(((int32_t *)out[0].data)[0], 2);
    ck_assert_int_eq(((int32_t *)out[0].data)[1], 5);
    th_free(out, 1);
    ir_node *m64 = th_node(g, "ReduceMean", 11, 1, 1);
    th_attr_ints(g, m64, "axes", axes, 1);
    tci_tensor in64[1] = {th_tensor(TCI_DTYPE_INT64, 2, rd_xd, x64)};
    ck_assert_tci_ok(th_run(g, m64, in64, out));
    ck_assert_int_eq(((int64_t *)out[0].data)[0], -2);
    ck_assert_int_eq(((int64_t *)out[0].data)[1], 5);
    th_free(out, 1);
    /* shape arithmetic: the product-free sum of a shape vector */
    ir_node *s = th_node(g, "ReduceSum", 13, 1, 1);
    th_attr_int(g, s, "keepdims", 0);
    const int64_t big[] = {INT64_C(1) << 40, 3};
    const int64_t bd[] = {2};
    tci_tensor inb[1] = {th_tensor(TCI_DTYPE_INT64, 1, bd, big)};
    ck_assert_tci_ok(th_run(g, s, inb, out));
    ck_assert_int_eq(out[0].rank, 0);
    ck_assert_int_eq(((int64_t *)out[0].data)[0], (INT64_C(1) << 40) + 3);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reduce_empty_and_scalar) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float dummy[1] = {0}, five[] = {5};
    const int64_t xd[] = {2, 0, 2}, axes[] = {1}, ad[] = {1}, wd[] = {2, 1, 2}, w0[] = {2, 0, 1},
                  axes2[] = {2};
    tci_tensor out[1];
    /* summing an empty set gives 0; the mean too, as in onnxruntime */
    const float zeros[] = {0, 0, 0, 0};
    const char *ops[] = {"ReduceSum", "ReduceMean"};
    for (int o = 0; o < 2; o++) {
        ir_node *n = th_node(g, ops[o], 18, 2, 1);
        tci_tensor in[2] = {th_tensor(F, 3, xd, dummy), th_tensor(TCI_DTYPE_INT64, 1, ad, axes)};
        ck_assert_tci_ok(th_run(g, n, in, out));
        th_assert_dims(&out[0], 3, wd);
        th_assert_near(out[0].data, zeros, 4, 0);
        th_free(out, 1);
    }
    /* a zero dim that is kept: empty output */
    ir_node *k = th_node(g, "ReduceSum", 13, 2, 1);
    tci_tensor in_k[2] = {th_tensor(F, 3, xd, dummy), th_tensor(TCI_DTYPE_INT64, 1, ad, axes2)};
    ck_assert_tci_ok(th_run(g, k, in_k, out));
    th_assert_dims(&out[0], 3, w0);
    th_free(out, 1);
    /* rank 0 input: reducing all of nothing is the value itself */
    ir_node *s = th_node(g, "ReduceMean", 13, 1, 1);
    tci_tensor in_s[1] = {th_tensor(F, 0, NULL, five)};
    ck_assert_tci_ok(th_run(g, s, in_s, out));
    ck_assert_int_eq(out[0].rank, 0);
    th_assert_near(out[0].data, five, 1, 0);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reduce_long_sum_accurate) {
    /* 0.1f a million times: a plain fp32 running sum drifts by about 1%, double does not */
    enum { N = 1000000 };
    static float x[N];
    for (int i = 0; i < N; i++) x[i] = 0.1f;
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "ReduceSum", 11, 1, 1);
    const int64_t xd[] = {N};
    tci_tensor in[1] = {th_tensor(F, 1, xd, x)}, out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[] = {(float)(N * (double)0.1f)};
    th_assert_near(out[0].data, want, 1, 0);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reduce_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *kd = th_node(g, "ReduceSum", 11, 1, 1);
    th_attr_int(g, kd, "keepdims", 2);
    ck_assert_tci_error(op_prepare_node(kd, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'keepdims' must be 0 or 1, got 2");
    /* axes becomes an input (with noop_with_empty_axes) in ReduceSum-13, the others' 18 */
    const int64_t axes[] = {1};
    const char *ops[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
    const int input_since[] = {13, 18, 18};
    for (int o = 0; o < 3; o++) {
        ir_node *at = th_node(g, ops[o], input_since[o], 1, 1);
        th_attr_ints(g, at, "axes", axes, 1);
        ck_assert_tci_error(op_prepare_node(at, g->arena), TCI_ERR_UNSUPPORTED,
                            "unsupported attribute 'axes'");
        ir_node *noop = th_node(g, ops[o], input_since[o] - 1, 1, 1);
        th_attr_int(g, noop, "noop_with_empty_axes", 1);
        ck_assert_tci_error(op_prepare_node(noop, g->arena), TCI_ERR_UNSUPPORTED,
                            "unsupported attribute 'noop_with_empty_axes'");
        ir_node *two = th_node(g, ops[o], input_since[o] - 1, 2, 1);
        ck_assert_tci_error(op_prepare_node(two, g->arena), TCI_ERR_INVALID_MODEL,
                            "has 2 inputs, expected 1 to 1");
    }

    tci_tensor out[1];
    const int64_t a3[] = {3}, ad[] = {1}, a2d[] = {1, 1}, fd[] = {1};
    const float fa[] = {1};
    tci_tensor x = th_shape_only(F, 2, rd_xd), dbl = th_shape_only(TCI_DTYPE_UINT8, 2, rd_xd),
               axes3 = th_tensor(TCI_DTYPE_INT64, 1, ad, a3),
               axes_2d = th_tensor(TCI_DTYPE_INT64, 2, a2d, a3),
               axes_f = th_tensor(F, 1, fd, fa);
    ir_node *range = th_node(g, "ReduceSum", 13, 2, 1);
    const tci_tensor *in1[] = {&x, &axes3};
    ck_assert_tci_error(th_infer(g, range, in1, out), TCI_ERR_INVALID_MODEL,
                        "axis 3 out of range for rank 2");
    const tci_tensor *in2[] = {&x, &axes_2d};
    ck_assert_tci_error(th_infer(g, range, in2, out), TCI_ERR_INVALID_MODEL,
                        "input axes must be 1-D, got rank 2");
    const tci_tensor *in3[] = {&x, &axes_f};
    ck_assert_tci_error(th_infer(g, range, in3, out), TCI_ERR_UNSUPPORTED,
                        "input 1 has unsupported dtype float");
    const tci_tensor *in4[] = {&dbl, NULL};
    ck_assert_tci_error(th_infer(g, range, in4, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype uint8");
    ir_node *attr_range = th_node(g, "ReduceMean", 11, 1, 1);
    const int64_t neg[] = {-3};
    th_attr_ints(g, attr_range, "axes", neg, 1);
    const tci_tensor *in5[] = {&x};
    ck_assert_tci_error(th_infer(g, attr_range, in5, out), TCI_ERR_INVALID_MODEL,
                        "axis -3 out of range for rank 2");

    /* at run time the axes must have a value */
    ir_node *rt = th_node(g, "ReduceSum", 13, 2, 1);
    ck_assert_tci_ok(op_prepare_node(rt, g->arena));
    float xv[6] = {0}, yv[6];
    tci_tensor xt = th_tensor(F, 2, rd_xd, xv), at_unknown = th_shape_only(TCI_DTYPE_INT64, 1, ad),
               yt = th_tensor(F, 2, rd_xd, yv);
    const tci_tensor *in6[] = {&xt, &at_unknown};
    tci_tensor *o6[] = {&yt};
    ck_assert_tci_error(rt->desc->cpu_forward(rt, in6, o6), TCI_ERR_INTERNAL,
                        "input axes has no value at run time");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reduce_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t xd[] = {2, 1, -1}, ad[] = {1}, a0[] = {0}, axes[] = {-1};
    tci_tensor x = th_shape_only(F, 3, xd), axes_unknown = th_shape_only(TCI_DTYPE_INT64, 1, ad),
               axes_empty = th_shape_only(TCI_DTYPE_INT64, 1, a0),
               axes_known = th_tensor(TCI_DTYPE_INT64, 1, ad, axes),
               unk = th_shape_only(TCI_DTYPE_UNDEFINED, -1, NULL);
    /* axes not known yet: keepdims keeps the rank, and dims of 1 stay 1 */
    ir_node *k = th_node(g, "ReduceSum", 13, 2, 1);
    const tci_tensor *in1[] = {&x, &axes_unknown};
    ck_assert_tci_ok(th_infer(g, k, in1, out));
    const int64_t w1[] = {-1, 1, -1};
    th_assert_dims(&out[0], 3, w1);
    ir_node *nk = th_node(g, "ReduceSum", 13, 2, 1);
    th_attr_int(g, nk, "keepdims", 0);
    ck_assert_tci_ok(th_infer(g, nk, in1, out));
    ck_assert_int_eq(out[0].rank, -1);
    ck_assert_int_eq(out[0].dtype, F);
    /* an empty axes input is known from its shape alone */
    ir_node *np = th_node(g, "ReduceSum", 13, 2, 1);
    th_attr_int(g, np, "noop_with_empty_axes", 1);
    const tci_tensor *in2[] = {&x, &axes_empty};
    ck_assert_tci_ok(th_infer(g, np, in2, out));
    th_assert_dims(&out[0], 3, xd);
    /* known axes over an unknown dim */
    const tci_tensor *in3[] = {&x, &axes_known};
    ck_assert_tci_ok(th_infer(g, nk, in3, out));
    const int64_t w3[] = {2, 1};
    th_assert_dims(&out[0], 2, w3);
    const tci_tensor *in4[] = {&unk, &axes_known};
    ck_assert_tci_ok(th_infer(g, nk, in4, out));
    ck_assert_int_eq(out[0].rank, -1);
    ir_graph_destroy(g);
}
END_TEST

/* ---- ReduceMax ---- */

START_TEST(test_reduce_max_every_version) {
    const int64_t ax1[] = {1}, axm2[] = {-2}, d21[] = {2, 1}, d3[] = {3}, d11[] = {1, 1};
    const float rows[] = {3, 6}, cols[] = {4, 5, 6}, all[] = {6};
    /* axes from the attribute before opset 18 */
    const int attr_opsets[] = {1, 11, 12, 13, 17};
    for (int i = 0; i < 5; i++) {
        int opset = attr_opsets[i];
        run_reduce("ReduceMax", opset, -1, -1, ax1, 1, false, 2, d21, rows);
        run_reduce("ReduceMax", opset, 0, -1, axm2, 1, false, 1, d3, cols);
        run_reduce("ReduceMax", opset, 1, -1, NULL, -1, false, 2, d11, all);
        run_reduce("ReduceMax", opset, 0, -1, NULL, 0, false, 0, NULL, all);
    }
    /* from an input from 18; absent or empty axes: all, or nothing with noop_with_empty_axes */
    for (int opset = 18; opset <= 28; opset += 2) {
        run_reduce("ReduceMax", opset, -1, -1, ax1, 1, true, 2, d21, rows);
        run_reduce("ReduceMax", opset, 0, 0, axm2, 1, true, 1, d3, cols);
        run_reduce("ReduceMax", opset, 0, 0, NULL, 0, true, 0, NULL, all);
        run_reduce("ReduceMax", opset, 1, -1, NULL, -1, false, 2, d11, all);
        run_reduce("ReduceMax", opset, 0, 1, NULL, 0, true, 2, rd_xd, rd_x);
        run_reduce("ReduceMax", opset, 0, 1, NULL, -1, false, 2, rd_xd, rd_x);
    }
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int opsets[] = {1, 10, 11, 12, 13, 17, 18, 19, 20, 28};
    const int since[] = {1, 1, 11, 12, 13, 13, 18, 18, 20, 20};
    for (int i = 0; i < 10; i++) {
        ir_node *n = th_node(g, "ReduceMax", opsets[i], 1, 1);
        ck_assert_tci_ok(op_prepare_node(n, g->arena));
        ck_assert_int_eq(n->since_version, since[i]);
    }
    ir_graph_destroy(g);
}
END_TEST

/* Runs ReduceMax (opset 18, keepdims 0) of x over the given axes of an input. */
static void run_max(const tci_tensor *x, const int64_t *axes, int64_t num_axes, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "ReduceMax", 18, 2, 1);
    th_attr_int(g, n, "keepdims", 0);
    tci_tensor in[2] = {*x, th_tensor(TCI_DTYPE_INT64, 1, &num_axes, axes)};
    ck_assert_tci_ok(th_run(g, n, in, out));
    ir_graph_destroy(g);
}

START_TEST(test_reduce_max_negative_and_nan) {
    /* all values below 0: the start is -inf, not 0 */
    const float neg[] = {-5, -2, -7, -1, -9, -3}, want_rows[] = {-2, -1},
                want_cols[] = {-1, -2, -3};
    const int64_t ax1[] = {1}, axm2[] = {-2}, ax01[] = {0, 1};
    tci_tensor x = th_tensor(F, 2, rd_xd, neg), out[1];
    run_max(&x, ax1, 1, out);
    th_assert_near(out[0].data, want_rows, 2, 0);
    th_free(out, 1);
    run_max(&x, axm2, 1, out);
    th_assert_near(out[0].data, want_cols, 3, 0);
    th_free(out, 1);
    /* NaN wins wherever it stands (numpy's maximum), in a reduced innermost run or across rows;
     * -inf is an ordinary value */
    const float nan_x[] = {1, NAN, 3, -4, -INFINITY, -6, NAN, 8, 9},
                ninf[] = {-INFINITY, -INFINITY};
    const int64_t xd[] = {3, 3}, nd[] = {2};
    x = th_tensor(F, 2, xd, nan_x);
    run_max(&x, ax1, 1, out);
    const float *r = out[0].data;
    ck_assert(isnan(r[0]) && r[1] == -4.0f && isnan(r[2]));
    th_free(out, 1);
    run_max(&x, axm2, 1, out);
    r = out[0].data;
    ck_assert(isnan(r[0]) && isnan(r[1]) && r[2] == 9.0f);
    th_free(out, 1);
    run_max(&x, ax01, 2, out);
    ck_assert_int_eq(out[0].rank, 0);
    ck_assert(isnan(((float *)out[0].data)[0]));
    th_free(out, 1);
    x = th_tensor(F, 1, nd, ninf);
    run_max(&x, ax1, 0, out);
    ck_assert(isinf(((float *)out[0].data)[0]) && ((float *)out[0].data)[0] < 0);
    th_free(out, 1);
}
END_TEST

START_TEST(test_reduce_max_integers_and_bool) {
    const int32_t x32[] = {1, 2, 4, -3, -5, -8};
    const int64_t x64[] = {INT64_MIN, -2, -4, 3, INT64_MAX, 8}, ax1[] = {1}, ax0[] = {0};
    tci_tensor x = th_tensor(TCI_DTYPE_INT32, 2, rd_xd, x32), out[1];
    run_max(&x, ax1, 1, out);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
    ck_assert_int_eq(((int32_t *)out[0].data)[0], 4);
    ck_assert_int_eq(((int32_t *)out[0].data)[1], -3);
    th_free(out, 1);
    x = th_tensor(TCI_DTYPE_INT64, 2, rd_xd, x64);
    run_max(&x, ax0, 1, out);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT64);
    const int64_t want64[] = {3, INT64_MAX, 8};
    for (int i = 0; i < 3; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], want64[i]);
    th_free(out, 1);
    /* bool from opset 20: False < True */
    const uint8_t xb[] = {1, 1, 1, 0, 0, 1, 0, 0};
    const int64_t bd[] = {4, 2}, bwd[] = {4, 1};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "ReduceMax", 20, 2, 1);
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_BOOL, 2, bd, xb),
                        th_tensor(TCI_DTYPE_INT64, 1, (const int64_t[]){1}, ax1)};
    ck_assert_tci_ok(th_run(g, n, in, out));
    th_assert_dims(&out[0], 2, bwd);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_BOOL);
    const uint8_t wb[] = {1, 1, 1, 0};
    ck_assert_mem_eq(out[0].data, wb, 4);
    th_free(out, 1);
    /* not before 20 */
    ir_node *n18 = th_node(g, "ReduceMax", 18, 2, 1);
    tci_tensor xb_shape = th_shape_only(TCI_DTYPE_BOOL, 2, bd);
    const tci_tensor *in18[] = {&xb_shape, &in[1]};
    ck_assert_tci_error(th_infer(g, n18, in18, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype bool");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reduce_max_empty) {
    /* the max of nothing is -inf for float, the lowest value for integers, false for bool (as
     * onnxruntime and ONNX's empty_set cases) */
    const int64_t xd[] = {2, 0, 2}, ax1[] = {1}, wd[] = {2, 1, 2};
    const uint8_t dummy[8] = {0};
    const tci_dtype types[] = {F, TCI_DTYPE_INT32, TCI_DTYPE_INT64, TCI_DTYPE_BOOL};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    for (int t = 0; t < 4; t++) {
        ir_node *n = th_node(g, "ReduceMax", 20, 2, 1);
        tci_tensor in[2] = {th_tensor(types[t], 3, xd, dummy),
                            th_tensor(TCI_DTYPE_INT64, 1, (const int64_t[]){1}, ax1)},
                   out[1];
        ck_assert_tci_ok(th_run(g, n, in, out));
        th_assert_dims(&out[0], 3, wd);
        for (int i = 0; i < 4; i++) {
            if (types[t] == F) {
                float v = ((float *)out[0].data)[i];
                ck_assert(isinf(v) && v < 0);
            } else if (types[t] == TCI_DTYPE_INT32) {
                ck_assert_int_eq(((int32_t *)out[0].data)[i], INT32_MIN);
            } else if (types[t] == TCI_DTYPE_INT64) {
                ck_assert_int_eq(((int64_t *)out[0].data)[i], INT64_MIN);
            } else {
                ck_assert_int_eq(((uint8_t *)out[0].data)[i], 0);
            }
        }
        th_free(out, 1);
    }
    /* a zero dim that is kept: empty output, nothing to write */
    ir_node *k = th_node(g, "ReduceMax", 13, 1, 1);
    th_attr_ints(g, k, "axes", (const int64_t[]){2}, 1);
    th_attr_int(g, k, "keepdims", 0);
    tci_tensor in_k[1] = {th_tensor(F, 3, xd, dummy)}, out[1];
    ck_assert_tci_ok(th_run(g, k, in_k, out));
    th_assert_dims(&out[0], 2, (const int64_t[]){2, 0});
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

/* ---- ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp, ReduceSumSquare ---- */

/* Every version resolves, axes are an attribute before 18 and an input from 18. */
START_TEST(test_reduce_new_ops_every_version) {
    const char *ops[] = {"ReduceMin",       "ReduceProd",      "ReduceL1",    "ReduceL2",
                         "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum"};
    /* rd_x = {1..6} as 2x3, reduced over axis 1 */
    const float want[7][2] = {{1, 4},
                              {6, 120},
                              {6, 15},
                              {3.7416574f, 8.7749643f},
                              {3.4076059f, 6.4076059f},
                              {14, 77},
                              {1.7917595f, 2.7080502f}};
    const float want_all[7] = {1, 720, 21, 9.5393920f, 6.4561934f, 91, 3.0445224f};
    const int64_t ax1[] = {1}, d21[] = {2, 1}, d2[] = {2}, d11[] = {1, 1};
    for (int o = 0; o < 7; o++) {
        const int attr_opsets[] = {1, 11, 12, 13, 17};
        for (int i = 0; i < 5; i++) {
            run_reduce(ops[o], attr_opsets[i], -1, -1, ax1, 1, false, 2, d21, want[o]);
            run_reduce(ops[o], attr_opsets[i], 0, -1, NULL, -1, false, 0, NULL, &want_all[o]);
        }
        for (int opset = 18; opset <= 28; opset += 5) {
            run_reduce(ops[o], opset, 0, -1, ax1, 1, true, 1, d2, want[o]);
            run_reduce(ops[o], opset, 1, 0, NULL, 0, true, 2, d11, &want_all[o]);
        }
    }
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int opsets[] = {1, 11, 12, 13, 17, 18, 20, 27, 28};
    const int min_since[] = {1, 11, 12, 13, 13, 18, 20, 20, 20};
    const int l1_since[] = {1, 11, 11, 13, 13, 18, 18, 18, 18};
    const int lse_since[] = {1, 11, 11, 13, 13, 18, 18, 18, 28};
    for (int i = 0; i < 9; i++) {
        for (int o = 0; o < 7; o++) {
            ir_node *n = th_node(g, ops[o], opsets[i], 1, 1);
            ck_assert_tci_ok(op_prepare_node(n, g->arena));
            int want_since = o == 0 ? min_since[i] : o == 4 || o == 6 ? lse_since[i] : l1_since[i];
            ck_assert_int_eq(n->since_version, want_since);
        }
    }
    /* an L2 norm or log-sum-exp of integers is refused, naming the node */
    const int32_t xi[] = {1, 2, 3, 4, 5, 6};
    tci_tensor in[1] = {th_tensor(TCI_DTYPE_INT32, 2, rd_xd, xi)}, out[1];
    ir_node *l2 = th_node(g, "ReduceL2", 13, 1, 1);
    ck_assert_tci_error(th_run(g, l2, in, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype int32");
    ir_node *lse = th_node(g, "ReduceLogSumExp", 13, 1, 1);
    ck_assert_tci_error(th_run(g, lse, in, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype int32");
    ir_node *ls = th_node(g, "ReduceLogSum", 18, 1, 1);
    ck_assert_tci_error(th_run(g, ls, in, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype int32");
    ir_graph_destroy(g);
}
END_TEST

/* Runs op (opset 18) of x over axes (an input; num_axes 0: none given). */
static void run_op18(const char *op, const tci_tensor *x, const int64_t *axes, int64_t num_axes,
                     int keepdims, int noop, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, op[6] == 'M' && op[7] == 'i' ? 20 : 18, 2, 1);
    th_attr_int(g, n, "keepdims", keepdims);
    th_attr_int(g, n, "noop_with_empty_axes", noop);
    tci_tensor in[2] = {*x, th_tensor(TCI_DTYPE_INT64, 1, &num_axes, num_axes ? axes : rd_xd)};
    ck_assert_tci_ok(th_run(g, n, in, out));
    ir_graph_destroy(g);
}

START_TEST(test_reduce_new_ops_values) {
    const float sx[] = {-1, 2, -3, 4, -5, 6};
    const int64_t ax0[] = {0}, ax1[] = {1};
    tci_tensor x = th_tensor(F, 2, rd_xd, sx), out[1];
    /* noop_with_empty_axes still maps each value, as ONNX's reference does: |x|, x*x */
    const float absx[] = {1, 2, 3, 4, 5, 6}, sq[] = {1, 4, 9, 16, 25, 36};
    run_op18("ReduceL1", &x, NULL, 0, 1, 1, out);
    th_assert_dims(&out[0], 2, rd_xd);
    th_assert_near(out[0].data, absx, 6, 0);
    th_free(out, 1);
    run_op18("ReduceL2", &x, NULL, 0, 1, 1, out);
    th_assert_near(out[0].data, absx, 6, 0);
    th_free(out, 1);
    run_op18("ReduceSumSquare", &x, NULL, 0, 1, 1, out);
    th_assert_near(out[0].data, sq, 6, 0);
    th_free(out, 1);
    run_op18("ReduceMin", &x, NULL, 0, 1, 1, out);
    th_assert_near(out[0].data, sx, 6, 0);
    th_free(out, 1);
    /* over a size-1 axis too */
    const int64_t cd[] = {6, 1};
    tci_tensor col = th_tensor(F, 2, cd, sx);
    run_op18("ReduceL1", &col, ax1, 1, 0, 0, out);
    th_assert_near(out[0].data, absx, 6, 0);
    th_free(out, 1);
    /* columns of signed values */
    const float min_cols[] = {-1, -5, -3}, prod_cols[] = {-4, -10, -18}, l1_cols[] = {5, 7, 9};
    run_op18("ReduceMin", &x, ax0, 1, 0, 0, out);
    th_assert_near(out[0].data, min_cols, 3, 0);
    th_free(out, 1);
    run_op18("ReduceProd", &x, ax0, 1, 0, 0, out);
    th_assert_near(out[0].data, prod_cols, 3, 0);
    th_free(out, 1);
    run_op18("ReduceL1", &x, ax0, 1, 0, 0, out);
    th_assert_near(out[0].data, l1_cols, 3, 0);
    th_free(out, 1);
    /* log-sum-exp far outside exp's range: log(exp(1000) + exp(1000)) = 1000 + log 2 */
    const float big[] = {1000, 1000, -1000, -1000, -INFINITY, -INFINITY},
                big_want[] = {1000.6931472f, -999.3068528f, -INFINITY};
    const int64_t bd[] = {3, 2};
    tci_tensor xb = th_tensor(F, 2, bd, big);
    run_op18("ReduceLogSumExp", &xb, ax1, 1, 0, 0, out);
    const float *r = out[0].data;
    th_assert_near(r, big_want, 2, 1e-4f);
    ck_assert(isinf(r[2]) && r[2] < 0);
    th_free(out, 1);
    const float with_inf[] = {1, INFINITY, INFINITY, INFINITY, NAN, 2};
    xb = th_tensor(F, 2, bd, with_inf);
    run_op18("ReduceLogSumExp", &xb, ax1, 1, 0, 0, out);
    r = out[0].data;
    ck_assert(isinf(r[0]) && r[0] > 0 && isinf(r[1]) && r[1] > 0 && isnan(r[2]));
    th_free(out, 1);
    /* NaN wins in a min as in a max */
    run_op18("ReduceMin", &xb, ax1, 1, 0, 0, out);
    r = out[0].data;
    ck_assert(r[0] == 1.0f && isinf(r[1]) && isnan(r[2]));
    th_free(out, 1);
    /* double in, double out */
    const double xd[] = {3, 4, -6, 8};
    const int64_t dd[] = {2, 2};
    tci_tensor xdbl = th_tensor(TCI_DTYPE_DOUBLE, 2, dd, xd);
    run_op18("ReduceL2", &xdbl, ax1, 1, 0, 0, out);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_DOUBLE);
    ck_assert(((double *)out[0].data)[0] == 5.0 && ((double *)out[0].data)[1] == 10.0);
    th_free(out, 1);
}
END_TEST

START_TEST(test_reduce_new_ops_integers_and_empty) {
    const int32_t x32[] = {-1, 2, -3, 4, -5, 6};
    const int64_t ax1[] = {1}, ax0[] = {0};
    tci_tensor x = th_tensor(TCI_DTYPE_INT32, 2, rd_xd, x32), out[1];
    const int32_t min_rows[] = {-3, -5}, prod_rows[] = {6, -120}, l1_rows[] = {6, 15},
                  sq_cols[] = {17, 29, 45};
    const char *ops[] = {"ReduceMin", "ReduceProd", "ReduceL1"};
    const int32_t *wants[] = {min_rows, prod_rows, l1_rows};
    for (int o = 0; o < 3; o++) {
        run_op18(ops[o], &x, ax1, 1, 0, 0, out);
        ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
        for (int i = 0; i < 2; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], wants[o][i]);
        th_free(out, 1);
    }
    run_op18("ReduceSumSquare", &x, ax0, 1, 0, 0, out);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], sq_cols[i]);
    th_free(out, 1);
    const int64_t x64[] = {INT64_MAX, 5, -7, INT64_MIN};
    const int64_t d22[] = {2, 2};
    tci_tensor xl = th_tensor(TCI_DTYPE_INT64, 2, d22, x64);
    run_op18("ReduceMin", &xl, ax1, 1, 0, 0, out);
    ck_assert_int_eq(((int64_t *)out[0].data)[0], 5);
    ck_assert_int_eq(((int64_t *)out[0].data)[1], INT64_MIN);
    th_free(out, 1);
    /* bool min (opset 20) is a logical and */
    const uint8_t xb[] = {1, 1, 1, 0, 0, 0};
    const int64_t bd[] = {3, 2};
    tci_tensor b = th_tensor(TCI_DTYPE_BOOL, 2, bd, xb);
    run_op18("ReduceMin", &b, ax1, 1, 0, 0, out);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_BOOL);
    const uint8_t band[] = {1, 0, 0};
    for (int i = 0; i < 3; i++) ck_assert_int_eq(((uint8_t *)out[0].data)[i], band[i]);
    th_free(out, 1);
    /* empty sets: min +inf (the highest integer, true), prod 1, norms and sums 0, log-sum-exp
     * and log-sum -inf (log 0) */
    const int64_t ed[] = {2, 0, 2}, wd[] = {2, 1, 2};
    const uint8_t dummy[8] = {0};
    const char *fops[] = {"ReduceMin",       "ReduceProd",      "ReduceL1",    "ReduceL2",
                          "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum"};
    const float fwant[] = {INFINITY, 1, 0, 0, -INFINITY, 0, -INFINITY};
    tci_tensor e = th_tensor(F, 3, ed, dummy);
    for (int o = 0; o < 7; o++) {
        run_op18(fops[o], &e, ax1, 1, 1, 0, out);
        th_assert_dims(&out[0], 3, wd);
        for (int i = 0; i < 4; i++) ck_assert(((float *)out[0].data)[i] == fwant[o]);
        th_free(out, 1);
    }
    e = th_tensor(TCI_DTYPE_INT32, 3, ed, dummy);
    run_op18("ReduceMin", &e, ax1, 1, 1, 0, out);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], INT32_MAX);
    th_free(out, 1);
    run_op18("ReduceProd", &e, ax1, 1, 1, 0, out);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], 1);
    th_free(out, 1);
    e = th_tensor(TCI_DTYPE_BOOL, 3, ed, dummy);
    run_op18("ReduceMin", &e, ax1, 1, 1, 0, out);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(((uint8_t *)out[0].data)[i], 1);
    th_free(out, 1);
}
END_TEST

/* ---- ArgMax, ArgMin ---- */

/* Runs ArgMax / ArgMin of x at opset 13 (select_last -1: attribute absent) into out. */
static void run_arg(const char *op, const tci_tensor *x, int64_t axis, int keepdims,
                    int select_last, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, 13, 1, 1);
    th_attr_int(g, n, "axis", axis);
    th_attr_int(g, n, "keepdims", keepdims);
    if (select_last >= 0) th_attr_int(g, n, "select_last_index", select_last);
    ck_assert_tci_ok(th_run(g, n, x, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT64);
    ir_graph_destroy(g);
}

static void assert_int64s(const tci_tensor *t, const int64_t *want, int64_t n) {
    ck_assert_int_eq(tci_tensor_count(t), n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(((const int64_t *)t->data)[i] == want[i], "[%lld] = %lld, want %lld",
                      (long long)i, (long long)((const int64_t *)t->data)[i],
                      (long long)want[i]);
}

START_TEST(test_argmax_argmin) {
    const float v[] = {1, 5, 5, 7, 2, 7};
    tci_tensor x = th_tensor(F, 2, rd_xd, v), out[1];
    const int64_t d21[] = {2, 1}, d3[] = {3};
    run_arg("ArgMax", &x, 1, 1, -1, out);
    th_assert_dims(&out[0], 2, d21);
    assert_int64s(&out[0], (const int64_t[]){1, 0}, 2);
    th_free(out, 1);
    run_arg("ArgMax", &x, -1, 1, 1, out); /* ties: the last */
    assert_int64s(&out[0], (const int64_t[]){2, 2}, 2);
    th_free(out, 1);
    run_arg("ArgMax", &x, 0, 0, 0, out);
    th_assert_dims(&out[0], 1, d3);
    assert_int64s(&out[0], (const int64_t[]){1, 0, 1}, 3);
    th_free(out, 1);
    run_arg("ArgMin", &x, 1, 0, -1, out);
    assert_int64s(&out[0], (const int64_t[]){0, 1}, 2);
    th_free(out, 1);
    run_arg("ArgMin", &x, -2, 0, 1, out);
    assert_int64s(&out[0], (const int64_t[]){0, 1, 0}, 3);
    th_free(out, 1);
    /* a NaN wins for both, as in numpy: the first, or the last with select_last_index */
    const float nan_v[] = {1, NAN, 3, NAN};
    const int64_t nd[] = {4};
    x = th_tensor(F, 1, nd, nan_v);
    run_arg("ArgMax", &x, 0, 0, 0, out);
    assert_int64s(&out[0], (const int64_t[]){1}, 1);
    th_free(out, 1);
    run_arg("ArgMin", &x, 0, 0, 0, out);
    assert_int64s(&out[0], (const int64_t[]){1}, 1);
    th_free(out, 1);
    run_arg("ArgMin", &x, 0, 0, 1, out);
    assert_int64s(&out[0], (const int64_t[]){3}, 1);
    th_free(out, 1);
    /* int64 compares exactly (as doubles these two would tie) */
    const int64_t big[] = {INT64_MAX - 1, INT64_MAX, INT64_MIN + 1, INT64_MIN};
    const int64_t bd[] = {2, 2};
    x = th_tensor(TCI_DTYPE_INT64, 2, bd, big);
    run_arg("ArgMax", &x, 1, 0, 0, out);
    assert_int64s(&out[0], (const int64_t[]){1, 0}, 2);
    th_free(out, 1);
    run_arg("ArgMin", &x, 1, 0, 0, out);
    assert_int64s(&out[0], (const int64_t[]){0, 1}, 2);
    th_free(out, 1);

    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int opsets[] = {1, 10, 11, 12, 13, 28}, since[] = {1, 1, 11, 12, 13, 13};
    for (int i = 0; i < 6; i++) {
        ir_node *n = th_node(g, "ArgMin", opsets[i], 1, 1);
        ck_assert_tci_ok(op_prepare_node(n, g->arena));
        ck_assert_int_eq(n->since_version, since[i]);
    }
    /* select_last_index arrives in opset 12 */
    ir_node *old = th_node(g, "ArgMax", 11, 1, 1);
    th_attr_int(g, old, "select_last_index", 1);
    ck_assert_tci_error(op_prepare_node(old, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'select_last_index'");
    ir_node *flag = th_node(g, "ArgMax", 13, 1, 1);
    th_attr_int(g, flag, "keepdims", 3);
    ck_assert_tci_error(op_prepare_node(flag, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'keepdims' must be 0 or 1, got 3");
    /* an empty axis has no position; an out-of-range axis is named */
    const int64_t ed[] = {2, 0};
    tci_tensor e = th_shape_only(F, 2, ed), o[1];
    const tci_tensor *ein[] = {&e};
    ir_node *empty = th_node(g, "ArgMax", 13, 1, 1);
    th_attr_int(g, empty, "axis", 1);
    ck_assert_tci_error(th_infer(g, empty, ein, o), TCI_ERR_INVALID_MODEL,
                        "axis 1 is empty: there is no position to return");
    ir_node *range = th_node(g, "ArgMin", 13, 1, 1);
    th_attr_int(g, range, "axis", 2);
    ck_assert_tci_error(th_infer(g, range, ein, o), TCI_ERR_INVALID_MODEL,
                        "axis 2 out of range for rank 2");
    ir_graph_destroy(g);
}
END_TEST

/* ---- CumSum ---- */

static void run_cumsum(const tci_tensor *x, int64_t axis, int exclusive, int reverse,
                       tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "CumSum", 14, 2, 1);
    if (exclusive) th_attr_int(g, n, "exclusive", 1);
    if (reverse) th_attr_int(g, n, "reverse", 1);
    tci_tensor in[2] = {*x, th_tensor(TCI_DTYPE_INT32, 0, NULL, (const int32_t[]){(int32_t)axis})};
    ck_assert_tci_ok(th_run(g, n, in, out));
    ir_graph_destroy(g);
}

START_TEST(test_cumsum) {
    const float v[] = {1, 2, 3, 4, 5};
    const int64_t d5[] = {5};
    tci_tensor x = th_tensor(F, 1, d5, v), out[1];
    const float plain[] = {1, 3, 6, 10, 15}, excl[] = {0, 1, 3, 6, 10}, rev[] = {15, 14, 12, 9, 5},
                rev_excl[] = {14, 12, 9, 5, 0};
    const float *wants[] = {plain, excl, rev, rev_excl};
    for (int m = 0; m < 4; m++) {
        run_cumsum(&x, 0, m & 1, m >> 1, out);
        th_assert_dims(&out[0], 1, d5);
        th_assert_near(out[0].data, wants[m], 5, 0);
        th_free(out, 1);
    }
    /* 2-D over either axis, negative axis */
    const float rows[] = {1, 3, 6, 4, 9, 15}, cols[] = {1, 2, 3, 5, 7, 9};
    x = th_tensor(F, 2, rd_xd, rd_x);
    run_cumsum(&x, -1, 0, 0, out);
    th_assert_near(out[0].data, rows, 6, 0);
    th_free(out, 1);
    run_cumsum(&x, 0, 0, 0, out);
    th_assert_near(out[0].data, cols, 6, 0);
    th_free(out, 1);
    /* int32 and int64 stay integers */
    const int32_t xi[] = {1, -2, 3, -4, 5, -6};
    x = th_tensor(TCI_DTYPE_INT32, 2, rd_xd, xi);
    run_cumsum(&x, 1, 1, 1, out);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
    const int32_t wi[] = {1, 3, 0, -1, -6, 0};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], wi[i]);
    th_free(out, 1);
    const int64_t xl[] = {INT64_C(1) << 60, INT64_C(1) << 60, 1};
    const int64_t d3[] = {3};
    x = th_tensor(TCI_DTYPE_INT64, 1, d3, xl);
    run_cumsum(&x, 0, 0, 0, out);
    ck_assert_int_eq(((int64_t *)out[0].data)[2], (INT64_C(1) << 61) + 1);
    th_free(out, 1);

    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int opsets[] = {11, 13, 14, 28}, since[] = {11, 11, 14, 14};
    for (int i = 0; i < 4; i++) {
        ir_node *n = th_node(g, "CumSum", opsets[i], 2, 1);
        ck_assert_tci_ok(op_prepare_node(n, g->arena));
        ck_assert_int_eq(n->since_version, since[i]);
    }
    ir_node *ten = th_node(g, "CumSum", 10, 2, 1);
    ck_assert_tci_error(op_prepare_node(ten, g->arena), TCI_ERR_UNSUPPORTED, "opset");
    ir_node *one = th_node(g, "CumSum", 14, 1, 1);
    ck_assert_tci_error(op_prepare_node(one, g->arena), TCI_ERR_INVALID_MODEL,
                        "has 1 inputs, expected 2 to 2");
    tci_tensor xs = th_shape_only(F, 2, rd_xd), o[1];
    const int64_t two[] = {0, 1}, d2[] = {2}, d11[] = {1, 1};
    tci_tensor a2 = th_tensor(TCI_DTYPE_INT64, 1, d2, two), a11 = th_tensor(TCI_DTYPE_INT64, 2, d11, two),
               af = th_tensor(F, 1, (const int64_t[]){1}, rd_x),
               a3 = th_tensor(TCI_DTYPE_INT64, 0, NULL, (const int64_t[]){2});
    ir_node *n = th_node(g, "CumSum", 14, 2, 1);
    const tci_tensor *i1[] = {&xs, &a2}, *i2[] = {&xs, &a11}, *i3[] = {&xs, &af}, *i4[] = {&xs, &a3};
    ck_assert_tci_error(th_infer(g, n, i1, o), TCI_ERR_INVALID_MODEL,
                        "input axis must hold one value, got 2");
    ck_assert_tci_error(th_infer(g, n, i2, o), TCI_ERR_INVALID_MODEL,
                        "input axis must be a scalar, got rank 2");
    ck_assert_tci_error(th_infer(g, n, i3, o), TCI_ERR_UNSUPPORTED,
                        "input 1 has unsupported dtype float");
    ck_assert_tci_error(th_infer(g, n, i4, o), TCI_ERR_INVALID_MODEL,
                        "axis 2 out of range for rank 2");
    ir_graph_destroy(g);
}
END_TEST

/* CumProd (opset 26) of x over axis into out. */
static void run_cumprod(const tci_tensor *x, int64_t axis, int exclusive, int reverse,
                        tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "CumProd", 26, 2, 1);
    if (exclusive) th_attr_int(g, n, "exclusive", 1);
    if (reverse) th_attr_int(g, n, "reverse", 1);
    tci_tensor in[2] = {*x, th_tensor(TCI_DTYPE_INT64, 1, (const int64_t[]){1},
                                      (const int64_t[]){axis})};
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 26);
    ir_graph_destroy(g);
}

START_TEST(test_cumprod) {
    /* float32 (ONNX's cases are double), every mode */
    const float v[] = {1, 2, 3, 4, -5};
    const int64_t d5[] = {5};
    tci_tensor x = th_tensor(F, 1, d5, v), out[1];
    const float plain[] = {1, 2, 6, 24, -120}, excl[] = {1, 1, 2, 6, 24},
                rev[] = {-120, -120, -60, -20, -5}, rev_excl[] = {-120, -60, -20, -5, 1};
    const float *wants[] = {plain, excl, rev, rev_excl};
    for (int m = 0; m < 4; m++) {
        run_cumprod(&x, 0, m & 1, m >> 1, out);
        th_assert_dims(&out[0], 1, d5);
        th_assert_near(out[0].data, wants[m], 5, 0);
        th_free(out, 1);
    }
    /* columns of a 2x3 */
    const float cols[] = {1, 2, 3, 4, 10, 18};
    x = th_tensor(F, 2, rd_xd, rd_x);
    run_cumprod(&x, -2, 0, 0, out);
    th_assert_near(out[0].data, cols, 6, 0);
    th_free(out, 1);
    /* int64 wraps as the type does: 2^62 * 4 = 0 mod 2^64; int32 likewise */
    const int64_t xl[] = {INT64_C(1) << 62, 2, 2, -3};
    const int64_t d4[] = {4};
    x = th_tensor(TCI_DTYPE_INT64, 1, d4, xl);
    run_cumprod(&x, 0, 0, 0, out);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT64);
    ck_assert_int_eq(((int64_t *)out[0].data)[1], INT64_MIN);
    ck_assert_int_eq(((int64_t *)out[0].data)[2], 0);
    th_free(out, 1);
    const int32_t xi[] = {65536, 65536, -1};
    const int64_t d3[] = {3};
    x = th_tensor(TCI_DTYPE_INT32, 1, d3, xi);
    run_cumprod(&x, 0, 0, 1, out);
    ck_assert_int_eq(((int32_t *)out[0].data)[0], 0);
    ck_assert_int_eq(((int32_t *)out[0].data)[1], -65536);
    th_free(out, 1);
    /* only opset 26 on; the flags are 0 or 1 */
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *old = th_node(g, "CumProd", 25, 2, 1);
    ck_assert_tci_error(op_prepare_node(old, g->arena), TCI_ERR_UNSUPPORTED, "from opset 26");
    ir_node *n = th_node(g, "CumProd", 28, 2, 1);
    th_attr_int(g, n, "reverse", 2);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL, "reverse");
    ir_graph_destroy(g);
}
END_TEST

/* ---- TopK ---- */

/* TopK of x at opset 11 over axis with k from an input; largest / sorted -1: absent. */
static void run_topk(const tci_tensor *x, int64_t k, int64_t axis, int largest, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "TopK", 11, 2, 2);
    th_attr_int(g, n, "axis", axis);
    if (largest >= 0) th_attr_int(g, n, "largest", largest);
    const int64_t kd[] = {1};
    tci_tensor in[2] = {*x, th_tensor(TCI_DTYPE_INT64, 1, kd, &k)};
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(out[1].dtype, TCI_DTYPE_INT64);
    ir_graph_destroy(g);
}

START_TEST(test_topk) {
    const float v[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    const int64_t xd[] = {3, 4}, d32[] = {3, 2}, d24[] = {2, 4};
    tci_tensor x = th_tensor(F, 2, xd, v), out[2];
    run_topk(&x, 2, 1, -1, out);
    th_assert_dims(&out[0], 2, d32);
    th_assert_dims(&out[1], 2, d32);
    th_assert_near(out[0].data, (const float[]){4, 3, 9, 6, 8, 5}, 6, 0);
    /* the two 5s of row 2: the lower position first */
    assert_int64s(&out[1], (const int64_t[]){2, 0, 1, 3, 3, 0}, 6);
    th_free(out, 2);
    run_topk(&x, 2, 1, 0, out);
    th_assert_near(out[0].data, (const float[]){1, 1, 2, 5, 3, 5}, 6, 0);
    assert_int64s(&out[1], (const int64_t[]){1, 3, 2, 0, 1, 0}, 6);
    th_free(out, 2);
    run_topk(&x, 2, -2, 1, out); /* down the columns */
    th_assert_dims(&out[0], 2, d24);
    th_assert_near(out[0].data, (const float[]){5, 9, 5, 8, 5, 3, 4, 6}, 8, 0);
    assert_int64s(&out[1], (const int64_t[]){1, 1, 2, 2, 2, 2, 0, 1}, 8);
    th_free(out, 2);
    /* NaN ranks above every number: first when largest, last when smallest */
    const float nv[] = {2, NAN, 7, -1};
    const int64_t nd[] = {4};
    x = th_tensor(F, 1, nd, nv);
    run_topk(&x, 2, 0, 1, out);
    ck_assert(isnan(((float *)out[0].data)[0]) && ((float *)out[0].data)[1] == 7.0f);
    assert_int64s(&out[1], (const int64_t[]){1, 2}, 2);
    th_free(out, 2);
    run_topk(&x, 4, 0, 0, out);
    assert_int64s(&out[1], (const int64_t[]){3, 0, 2, 1}, 4);
    th_free(out, 2);
    /* k = 0: empty outputs */
    run_topk(&x, 0, 0, 1, out);
    th_assert_dims(&out[0], 1, (const int64_t[]){0});
    th_free(out, 2);
    /* int64 exactly, values bit for bit */
    const int64_t lv[] = {INT64_MAX - 1, INT64_MIN, INT64_MAX};
    const int64_t ld[] = {3};
    x = th_tensor(TCI_DTYPE_INT64, 1, ld, lv);
    run_topk(&x, 2, 0, 1, out);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT64);
    assert_int64s(&out[0], (const int64_t[]){INT64_MAX, INT64_MAX - 1}, 2);
    assert_int64s(&out[1], (const int64_t[]){2, 0}, 2);
    th_free(out, 2);

    /* opset 1: k and axis are attributes */
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n1 = th_node(g, "TopK", 1, 1, 2);
    th_attr_int(g, n1, "k", 1);
    x = th_tensor(F, 2, xd, v);
    ck_assert_tci_ok(th_run(g, n1, &x, out));
    th_assert_near(out[0].data, (const float[]){4, 9, 8}, 3, 0);
    assert_int64s(&out[1], (const int64_t[]){2, 1, 3}, 3);
    th_free(out, 2);
    const int opsets[] = {1, 9, 10, 11, 23, 24, 28}, since[] = {1, 1, 10, 11, 11, 24, 24};
    for (int i = 0; i < 7; i++) {
        ir_node *n = th_node(g, "TopK", opsets[i], opsets[i] >= 10 ? 2 : 1, 2);
        if (opsets[i] < 10) th_attr_int(g, n, "k", 1);
        ck_assert_tci_ok(op_prepare_node(n, g->arena));
        ck_assert_int_eq(n->since_version, since[i]);
    }
    ir_node *nok = th_node(g, "TopK", 1, 1, 2);
    ck_assert_tci_error(op_prepare_node(nok, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'k' is required");
    ir_node *largest10 = th_node(g, "TopK", 10, 2, 2);
    th_attr_int(g, largest10, "largest", 0);
    ck_assert_tci_error(op_prepare_node(largest10, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'largest'");
    tci_tensor xs = th_shape_only(F, 2, xd), o[2];
    tci_tensor k5 = th_tensor(TCI_DTYPE_INT64, 1, (const int64_t[]){1}, (const int64_t[]){5}),
               kneg = th_tensor(TCI_DTYPE_INT64, 1, (const int64_t[]){1}, (const int64_t[]){-1}),
               k32 = th_tensor(TCI_DTYPE_INT32, 1, (const int64_t[]){1}, (const int32_t[]){1}),
               kunk = th_shape_only(TCI_DTYPE_INT64, 1, (const int64_t[]){1});
    ir_node *n = th_node(g, "TopK", 11, 2, 2);
    const tci_tensor *i1[] = {&xs, &k5}, *i2[] = {&xs, &kneg}, *i3[] = {&xs, &k32},
                     *i4[] = {&xs, &kunk};
    ck_assert_tci_error(th_infer(g, n, i1, o), TCI_ERR_INVALID_MODEL,
                        "K 5 is larger than axis 1 (4)");
    ck_assert_tci_error(th_infer(g, n, i2, o), TCI_ERR_INVALID_MODEL, "K must be >= 0, got -1");
    ck_assert_tci_error(th_infer(g, n, i3, o), TCI_ERR_UNSUPPORTED,
                        "input 1 has unsupported dtype int32");
    ck_assert_tci_ok(th_infer(g, n, i4, o));
    th_assert_dims(&o[0], 2, (const int64_t[]){3, -1});
    ck_assert_int_eq(o[1].dtype, TCI_DTYPE_INT64);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("reduce");
    TCase *rd = tcase_create("reduce");
    tcase_add_test(rd, test_reduce_sum_attribute_axes);
    tcase_add_test(rd, test_reduce_axes_input);
    tcase_add_test(rd, test_reduce_middle_axes);
    tcase_add_test(rd, test_reduce_integers);
    tcase_add_test(rd, test_reduce_empty_and_scalar);
    tcase_add_test(rd, test_reduce_long_sum_accurate);
    tcase_add_test(rd, test_reduce_errors);
    tcase_add_test(rd, test_reduce_infer_unknown);
    suite_add_tcase(s, rd);
    TCase *mx = tcase_create("max");
    tcase_add_test(mx, test_reduce_max_every_version);
    tcase_add_test(mx, test_reduce_max_negative_and_nan);
    tcase_add_test(mx, test_reduce_max_integers_and_bool);
    tcase_add_test(mx, test_reduce_max_empty);
    suite_add_tcase(s, mx);
    TCase *more = tcase_create("min_prod_norms");
    tcase_add_test(more, test_reduce_new_ops_every_version);
    tcase_add_test(more, test_reduce_new_ops_values);
    tcase_add_test(more, test_reduce_new_ops_integers_and_empty);
    suite_add_tcase(s, more);
    TCase *axis = tcase_create("argreduce");
    tcase_add_test(axis, test_argmax_argmin);
    tcase_add_test(axis, test_cumsum);
    tcase_add_test(axis, test_cumprod);
    tcase_add_test(axis, test_topk);
    suite_add_tcase(s, axis);
    return test_run_suite(s);
}
