/* RMSNormalization: hand-computed rows, a Scale that varies over X's leading dims (beyond the
 * normalised shape the ONNX cases use), shape inference, attribute and shape errors. */
#include <math.h>

#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

START_TEST(test_rmsnorm_last_axis) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "RMSNormalization", 23, 2, 1);
    th_attr_float(g, n, "epsilon", 0.5f);
    /* rows (3, 4) and (0, 0): mean squares 12.5 and 0, + 0.5 */
    const float x[] = {3, 4, 0, 0}, scale[] = {1, 2};
    const int64_t xd[] = {2, 2}, sd[] = {2};
    tci_tensor in[2] = {th_tensor(F, 2, xd, x), th_tensor(F, 1, sd, scale)}, out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float r = 1.0f / sqrtf(13.0f);
    const float want[] = {3 * r, 8 * r, 0, 0};
    th_assert_dims(&out[0], 2, xd);
    th_assert_near(out[0].data, want, 4, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_rmsnorm_scale_over_leading_dims) {
    /* axis 1 of (2, 2); Scale (2, 1) broadcasts unidirectionally to X, one value per row */
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "RMSNormalization", 28, 2, 1);
    th_attr_int(g, n, "axis", 1);
    th_attr_float(g, n, "epsilon", 0.0f);
    th_attr_int(g, n, "stash_type", 1);
    const float x[] = {1, 1, 2, -2}, scale[] = {10, -1};
    const int64_t xd[] = {2, 2}, sd[] = {2, 1};
    tci_tensor in[2] = {th_tensor(F, 2, xd, x), th_tensor(F, 2, sd, scale)}, out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 23);
    const float want[] = {10, 10, -1, 1};
    th_assert_near(out[0].data, want, 4, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_rmsnorm_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "RMSNormalization", 23, 2, 1);
    const int64_t xd[] = {-1, 7, 16}, sd[] = {16};
    tci_tensor x = th_shape_only(F, 3, xd), s = th_shape_only(F, 1, sd), out[1];
    ck_assert_tci_ok(th_infer(g, n, (const tci_tensor *[]){&x, &s}, out));
    th_assert_dims(&out[0], 3, xd);
    ck_assert_int_eq(out[0].dtype, F);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_rmsnorm_errors) {
    const float x[4] = {0}, s3[3] = {0};
    const int64_t xd[] = {2, 2}, sd[] = {2}, s3d[] = {3};
    tci_tensor in[2] = {th_tensor(F, 2, xd, x), th_tensor(F, 1, sd, x)}, out[1];
    ir_graph *g;

    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "RMSNormalization", 23, 2, 1);
    th_attr_int(g, n, "stash_type", 11);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED, "stash_type=11");
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    n = th_node(g, "RMSNormalization", 23, 2, 1);
    th_attr_int(g, n, "axes", 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED, "attribute 'axes'");
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    n = th_node(g, "RMSNormalization", 23, 2, 1);
    th_attr_int(g, n, "axis", 2);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL, "axis 2 out of range");
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    n = th_node(g, "RMSNormalization", 23, 2, 1);
    in[1] = th_tensor(F, 1, s3d, s3);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "scale of shape 3 does not broadcast");
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    n = th_node(g, "RMSNormalization", 22, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED, "from opset 23");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rmsnorm");
    TCase *t = tcase_create("rmsnorm");
    tcase_add_test(t, test_rmsnorm_last_axis);
    tcase_add_test(t, test_rmsnorm_scale_over_leading_dims);
    tcase_add_test(t, test_rmsnorm_infer_unknown);
    tcase_add_test(t, test_rmsnorm_errors);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
