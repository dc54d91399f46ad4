/* EyeLike, HannWindow, HammingWindow, BlackmanWindow (generate.c): diagonals and types ONNX's
 * cases leave out, the errors, and that both fold to constants at build (what keeps them off the
 * GPU's plan). */
#include <math.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

START_TEST(test_eye_like_diagonals_and_types) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t d32[] = {3, 2};
    const int32_t x[6] = {7, 7, 7, 7, 7, 7};
    tci_tensor in = th_tensor(TCI_DTYPE_INT32, 2, d32, x), out[1];
    /* k = -1: the diagonal below the main one; the input's type without dtype */
    ir_node *n = th_node(g, "EyeLike", 9, 1, 1);
    th_attr_int(g, n, "k", -1);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ck_assert_int_eq(n->since_version, 9);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
    th_assert_dims(&out[0], 2, d32);
    const int32_t below[6] = {0, 0, 1, 0, 0, 1};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], below[i]);
    th_free(out, 1);
    /* a k past either side: zeros (and no overflow at the extremes) */
    const int64_t ks[] = {2, -3, INT64_MAX, INT64_MIN};
    for (int t = 0; t < 4; t++) {
        n = th_node(g, "EyeLike", 22, 1, 1);
        th_attr_int(g, n, "k", ks[t]);
        th_attr_int(g, n, "dtype", TCI_DTYPE_BOOL);
        ck_assert_tci_ok(th_run(g, n, &in, out));
        ck_assert_int_eq(n->since_version, 22);
        ck_assert_int_eq(out[0].dtype, TCI_DTYPE_BOOL);
        for (int i = 0; i < 6; i++) ck_assert_int_eq(((uint8_t *)out[0].data)[i], 0);
        th_free(out, 1);
    }
    /* float16 ones */
    n = th_node(g, "EyeLike", 22, 1, 1);
    th_attr_int(g, n, "dtype", TCI_DTYPE_FLOAT16);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    const uint16_t one = 0x3c00, h_want[6] = {one, 0, 0, one, 0, 0};
    for (int i = 0; i < 6; i++) ck_assert_uint_eq(((uint16_t *)out[0].data)[i], h_want[i]);
    th_free(out, 1);
    /* errors: a dtype tcinfer does not store, a 3-D input */
    n = th_node(g, "EyeLike", 22, 1, 1);
    th_attr_int(g, n, "dtype", 8);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "attribute 'dtype' value 8 is not a data type this op can produce");
    const int64_t d3[] = {1, 3, 2};
    tci_tensor x3 = th_tensor(TCI_DTYPE_INT32, 3, d3, x);
    n = th_node(g, "EyeLike", 22, 1, 1);
    ck_assert_tci_error(th_run(g, n, &x3, out), TCI_ERR_INVALID_MODEL,
                        "input must be 2-D, got rank 3");
    n = th_node(g, "EyeLike", 22, 1, 1);
    th_attr_float(g, n, "alpha", 1.0f);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'alpha'");
    ir_graph_destroy(g);
}
END_TEST

/* The window op of size (an input) into out. */
static void run_window(const char *op, int64_t size, int periodic, int dtype, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, 17, 1, 1);
    if (periodic >= 0) th_attr_int(g, n, "periodic", periodic);
    if (dtype) th_attr_int(g, n, "output_datatype", dtype);
    tci_tensor in = th_tensor(TCI_DTYPE_INT64, 0, NULL, &size);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ir_graph_destroy(g);
}

START_TEST(test_windows) {
    tci_tensor out[1];
    /* Hann of 4, periodic (the default): 0.5 - 0.5 cos(2 pi n / 4) */
    run_window("HannWindow", 4, -1, 0, out);
    th_assert_dims(&out[0], 1, (const int64_t[]){4});
    th_assert_near(out[0].data, (const float[]){0, 0.5f, 1, 0.5f}, 4, 1e-7f);
    th_free(out, 1);
    /* symmetric: over size - 1 */
    run_window("HannWindow", 3, 0, 0, out);
    th_assert_near(out[0].data, (const float[]){0, 1, 0}, 3, 1e-7f);
    th_free(out, 1);
    /* Hamming with alpha 25/46, in double */
    run_window("HammingWindow", 2, 1, TCI_DTYPE_DOUBLE, out);
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_DOUBLE);
    ck_assert(fabs(((double *)out[0].data)[0] - 4.0 / 46.0) < 1e-15);
    ck_assert(fabs(((double *)out[0].data)[1] - 1.0) < 1e-15);
    th_free(out, 1);
    /* Blackman of 4 symmetric: n = 0 and 3 give 0.42 - 0.5 + 0.08 = 0 */
    run_window("BlackmanWindow", 4, 0, 0, out);
    th_assert_near(out[0].data, (const float[]){0, 0.63f, 0.63f, 0}, 4, 1e-6f);
    th_free(out, 1);
    /* integers truncate; a symmetric window of one value is 0/0 (NaN); size 0 is empty */
    run_window("HannWindow", 4, 1, TCI_DTYPE_INT64, out);
    const int64_t trunc[4] = {0, 0, 1, 0};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], trunc[i]);
    th_free(out, 1);
    run_window("HammingWindow", 1, 0, 0, out);
    ck_assert(isnan(((float *)out[0].data)[0]));
    th_free(out, 1);
    run_window("BlackmanWindow", 0, 1, 0, out);
    th_assert_dims(&out[0], 1, (const int64_t[]){0});
    th_free(out, 1);

    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t size = -2;
    tci_tensor in = th_tensor(TCI_DTYPE_INT64, 0, NULL, &size);
    ir_node *n = th_node(g, "HannWindow", 17, 1, 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL, "size is -2");
    n = th_node(g, "HannWindow", 17, 1, 1);
    th_attr_int(g, n, "output_datatype", TCI_DTYPE_BOOL);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "'output_datatype' may not be bool");
    n = th_node(g, "BlackmanWindow", 17, 1, 1);
    th_attr_int(g, n, "periodic", 2);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL, "periodic");
    const int64_t two[2] = {3, 4}, d2[] = {2};
    in = th_tensor(TCI_DTYPE_INT64, 1, d2, two);
    n = th_node(g, "HannWindow", 17, 1, 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL,
                        "input size must be a scalar");
    float fsize = 3;
    in = th_tensor(F, 0, NULL, &fsize);
    n = th_node(g, "HannWindow", 17, 1, 1);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype float");
    n = th_node(g, "HannWindow", 16, 1, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED, "from opset 17");
    ir_graph_destroy(g);
}
END_TEST

/* x [3, 4] (an input: no values) + EyeLike(x), and w = HannWindow(constant 4) * v: after the
 * passes EyeLike and the window are constants and only the Add and the Mul are left to run. */
START_TEST(test_generate_folds_at_build) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xd[] = {3, 4}, vd[] = {4}, four = 4;
    ir_tensor *x = th_named(g, "x", F, 2, xd, NULL);
    ir_tensor *v = th_named(g, "v", F, 1, vd, NULL);
    ir_tensor *size = th_named(g, "size", TCI_DTYPE_INT64, 0, NULL, &four);
    ir_tensor *eye = th_named(g, "eye", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *win = th_named(g, "win", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *w = th_named(g, "w", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_graph_io(g, (ir_tensor *[]){x, v}, 2, (ir_tensor *[]){y, w}, 2);
    th_node_io(g, "eye", "EyeLike", 22, (ir_tensor *[]){x}, 1, (ir_tensor *[]){eye}, 1);
    th_node_io(g, "add", "Add", 17, (ir_tensor *[]){x, eye}, 2, (ir_tensor *[]){y}, 1);
    th_node_io(g, "hann", "HannWindow", 17, (ir_tensor *[]){size}, 1, (ir_tensor *[]){win}, 1);
    th_node_io(g, "mul", "Mul", 17, (ir_tensor *[]){win, v}, 2, (ir_tensor *[]){w}, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_uint_eq(g->num_nodes, 2);
    ck_assert_str_eq(g->nodes[0]->op_type, "Add");
    ck_assert_str_eq(g->nodes[1]->op_type, "Mul");
    ck_assert_ptr_nonnull(eye->data);
    ck_assert_int_eq(eye->rank, 2);
    ck_assert(eye->dims[0] == 3 && eye->dims[1] == 4 && eye->dtype == F);
    const float eye_want[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    th_assert_near(eye->data, eye_want, 12, 0);
    ck_assert_ptr_nonnull(win->data);
    th_assert_near(win->data, (const float[]){0, 0.5f, 1, 0.5f}, 4, 1e-7f);
    ir_graph_destroy(g);
}
END_TEST

/* The GPU planner never meets a folded EyeLike (it has no GPU step), and names a window whose
 * size is a run-time value, which cannot fold (its length is then a run-time value too). */
START_TEST(test_generate_gpu_plan) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xd[] = {4, 4};
    ir_tensor *x = th_named(g, "x", F, 2, xd, NULL);
    ir_tensor *eye = th_named(g, "eye", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "eye", "EyeLike", 22, (ir_tensor *[]){x}, 1, (ir_tensor *[]){eye}, 1);
    th_node_io(g, "mul", "Mul", 17, (ir_tensor *[]){x, eye}, 2, (ir_tensor *[]){y}, 1);
    plan *p = NULL;
    ck_assert_tci_ok(th_plan_for_gpu(g, &p));
    plan_destroy(p);
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *size = th_named(g, "size", TCI_DTYPE_INT64, 0, NULL, NULL);
    ir_tensor *v = th_named(g, "v", F, 1, (const int64_t[]){4}, NULL);
    ir_tensor *win = th_named(g, "win", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *w = th_named(g, "w", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_graph_io(g, (ir_tensor *[]){size, v}, 2, &w, 1);
    th_node_io(g, "hann", "HannWindow", 17, (ir_tensor *[]){size}, 1, (ir_tensor *[]){win}, 1);
    th_node_io(g, "mul", "Mul", 17, (ir_tensor *[]){win, v}, 2, (ir_tensor *[]){w}, 1);
    p = NULL;
    ck_assert_tci_error(th_plan_for_gpu(g, &p), TCI_ERR_UNSUPPORTED,
                        "node 'hann' (HannWindow): dim 0 of 'win' depends on runtime values");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("generate");
    TCase *t = tcase_create("generate");
    tcase_add_test(t, test_eye_like_diagonals_and_types);
    tcase_add_test(t, test_windows);
    tcase_add_test(t, test_generate_folds_at_build);
    tcase_add_test(t, test_generate_gpu_plan);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
