/* Hardmax, LpNormalization, MeanVarianceNormalization (axisnorm.c): what ONNX's conformance cases
 * leave out: the opsets before 13 (Hardmax's 2-D coercion), ties and NaN, negative values under
 * an L1 norm, zero norms, MVN over other axes, and the errors. */
#include <math.h>

#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

/* Runs op at opset on x (axis attribute unless axis_absent), expecting success. */
static void run_axis_op(const char *op, int opset, const tci_tensor *x, bool set_axis,
                        int64_t axis, int64_t p, tci_tensor *out, int *since) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, opset, 1, 1);
    if (set_axis) th_attr_int(g, n, "axis", axis);
    if (p) th_attr_int(g, n, "p", p);
    ck_assert_tci_ok(th_run(g, n, x, out));
    if (since) *since = n->since_version;
    ir_graph_destroy(g);
}

START_TEST(test_hardmax_versions_and_coercion) {
    /* (2, 2, 2): before opset 13, axis 1 makes rows of 4 (dims 1 and 2 together) */
    const float x[] = {1, 5, 3, 2, 4, 0, 9, 1};
    const int64_t xd[] = {2, 2, 2};
    tci_tensor in = th_tensor(F, 3, xd, x), out[1];
    const float coerced[] = {0, 1, 0, 0, 0, 0, 1, 0}, last[] = {0, 1, 1, 0, 1, 0, 1, 0},
                middle[] = {0, 1, 1, 0, 0, 0, 1, 1};
    const int opsets[] = {1, 11, 12, 13, 28}, want_since[] = {1, 11, 11, 13, 13};
    for (int i = 0; i < 5; i++) {
        int since;
        run_axis_op("Hardmax", opsets[i], &in, false, 0, 0, out, &since);
        ck_assert_int_eq(since, want_since[i]);
        th_assert_dims(&out[0], 3, xd);
        th_assert_near(out[0].data, opsets[i] < 13 ? coerced : last, 8, 0);
        th_free(out, 1);
    }
    /* axis 2 at opset 11: rows of 2, the same as the last axis at 13 */
    run_axis_op("Hardmax", 11, &in, true, 2, 0, out, NULL);
    th_assert_near(out[0].data, last, 8, 0);
    th_free(out, 1);
    /* axis 1 at 13 is that axis alone: columns of 2 */
    run_axis_op("Hardmax", 13, &in, true, 1, 0, out, NULL);
    th_assert_near(out[0].data, middle, 8, 0);
    th_free(out, 1);
}
END_TEST

START_TEST(test_hardmax_ties_and_nan) {
    /* ties: the first maximum; NaN: the first NaN (numpy's argmax); -inf alone: the first */
    const float x[] = {2, 7, 7, 1, 3, NAN, 9, NAN, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    const int64_t xd[] = {3, 4};
    tci_tensor in = th_tensor(F, 2, xd, x), out[1];
    const float want[] = {0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0};
    run_axis_op("Hardmax", 13, &in, false, 0, 0, out, NULL);
    th_assert_near(out[0].data, want, 12, 0);
    th_free(out, 1);
}
END_TEST

START_TEST(test_lp_normalization) {
    const float x[] = {3, -4, 0, 0, -1, 1};
    const int64_t xd[] = {3, 2};
    tci_tensor in = th_tensor(F, 2, xd, x), out[1];
    /* L1 takes |x|; a zero norm gives zeros, not NaN */
    const float l1[] = {3.0f / 7, -4.0f / 7, 0, 0, -0.5f, 0.5f};
    const float l2[] = {0.6f, -0.8f, 0, 0, -0.70710678f, 0.70710678f};
    int since;
    run_axis_op("LpNormalization", 1, &in, false, 0, 1, out, &since);
    ck_assert_int_eq(since, 1);
    th_assert_near(out[0].data, l1, 6, 1e-7f);
    th_free(out, 1);
    run_axis_op("LpNormalization", 22, &in, true, 1, 0, out, &since);
    ck_assert_int_eq(since, 22);
    th_assert_near(out[0].data, l2, 6, 1e-7f);
    th_free(out, 1);
    /* axis 0: columns (3, 0, -1) and (-4, 0, 1) */
    const float cols[] = {0.94868330f, -0.97014250f, 0, 0, -0.31622777f, 0.24253563f};
    run_axis_op("LpNormalization", 21, &in, true, -2, 2, out, NULL);
    th_assert_near(out[0].data, cols, 6, 1e-7f);
    th_free(out, 1);
}
END_TEST

START_TEST(test_mvn_axes) {
    /* (2, 3) over axis 1: rows {1, 2, 3} and {4, 4, 4} (zero variance: zeros, eps keeps 0/0 away) */
    const float x[] = {1, 2, 3, 4, 4, 4};
    const int64_t xd[] = {2, 3}, axes[] = {1};
    tci_tensor in = th_tensor(F, 2, xd, x), out[1];
    const float want[] = {-1.2247449f, 0, 1.2247449f, 0, 0, 0};
    const int opsets[] = {9, 13, 28}, want_since[] = {9, 13, 13};
    for (int i = 0; i < 3; i++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "MeanVarianceNormalization", opsets[i], 1, 1);
        th_attr_ints(g, n, "axes", axes, 1);
        ck_assert_tci_ok(th_run(g, n, &in, out));
        ck_assert_int_eq(n->since_version, want_since[i]);
        th_assert_dims(&out[0], 2, xd);
        th_assert_near(out[0].data, want, 6, 1e-6f);
        th_free(out, 1);
        ir_graph_destroy(g);
    }
    /* the default axes (0, 2, 3) on (2, 2, 1, 1): per channel over the batch */
    const float x4[] = {1, 10, 3, 20};
    const int64_t d4[] = {2, 2, 1, 1};
    const float want4[] = {-1, -1, 1, 1};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "MeanVarianceNormalization", 13, 1, 1);
    in = th_tensor(F, 4, d4, x4);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    th_assert_near(out[0].data, want4, 4, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_axisnorm_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float x[] = {1, 2, 3, 4};
    const int64_t xd[] = {2, 2};
    tci_tensor in = th_tensor(F, 2, xd, x), out[1];
    ir_node *n = th_node(g, "LpNormalization", 22, 1, 1);
    th_attr_int(g, n, "p", 3);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "p is 3; must be 1 or 2");
    n = th_node(g, "Hardmax", 13, 1, 1);
    th_attr_int(g, n, "axis", 2);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL, "axis 2 out of range for rank 2");
    n = th_node(g, "Hardmax", 13, 1, 1);
    th_attr_float(g, n, "beta", 1.0f);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'beta'");
    /* the default axes need rank 4 */
    n = th_node(g, "MeanVarianceNormalization", 13, 1, 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL, "axis 2 out of range for rank 2");
    const int64_t twice[] = {1, -1};
    n = th_node(g, "MeanVarianceNormalization", 13, 1, 1);
    th_attr_ints(g, n, "axes", twice, 2);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL, "axes names dim 1 twice");
    n = th_node(g, "MeanVarianceNormalization", 13, 1, 1);
    th_attr_ints(g, n, "axes", twice, 0);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL, "axes is empty");
    n = th_node(g, "MeanVarianceNormalization", 8, 1, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED, "from opset 9");
    /* fp32 only on the reference; a scalar has no axis */
    const double xd64[] = {1, 2, 3, 4};
    tci_tensor dbl = th_tensor(TCI_DTYPE_DOUBLE, 2, xd, xd64);
    n = th_node(g, "LpNormalization", 22, 1, 1);
    ck_assert_tci_error(th_run(g, n, &dbl, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype double");
    tci_tensor scalar = th_tensor(F, 0, NULL, x);
    n = th_node(g, "Hardmax", 13, 1, 1);
    ck_assert_tci_error(th_run(g, n, &scalar, out), TCI_ERR_INVALID_MODEL, "rank >= 1");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("axisnorm");
    TCase *t = tcase_create("axisnorm");
    tcase_add_test(t, test_hardmax_versions_and_coercion);
    tcase_add_test(t, test_hardmax_ties_and_nan);
    tcase_add_test(t, test_lp_normalization);
    tcase_add_test(t, test_mvn_axes);
    tcase_add_test(t, test_axisnorm_errors);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
