/* MaxUnpool (unpool.c): indices into output_shape (MaxPool's input) as onnxruntime reads them,
 * the default shape with pads, and the errors the node cases do not reach. */
#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT
#define I64 TCI_DTYPE_INT64

START_TEST(test_max_unpool) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t d[] = {1, 1, 2};
    const float x[2] = {7, 9};
    const int64_t idx[2] = {1, 4};
    /* 1-D, kernel 2 stride 2 from 2 values: (2 - 1) * 2 + 2 = 4, less pads (0, 1): 3 */
    ir_node *n = th_node(g, "MaxUnpool", 22, 2, 1);
    th_attr_ints(g, n, "kernel_shape", (const int64_t[]){2}, 1);
    th_attr_ints(g, n, "strides", (const int64_t[]){2}, 1);
    th_attr_ints(g, n, "pads", (const int64_t[]){0, 1}, 2);
    tci_tensor in[3] = {th_tensor(F, 3, d, x), th_tensor(I64, 3, d, idx)};
    /* index 4 is past the 3 outputs */
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_ARGUMENT,
                        "index 4 (element 1 of I) is outside the output's 3 elements");
    /* output_shape (1, 1, 5): the pads ignored, the indices read into its 5 elements */
    const int64_t shape[3] = {1, 1, 5};
    in[2] = th_tensor(I64, 1, (const int64_t[]){3}, shape);
    n = th_node(g, "MaxUnpool", 11, 3, 1);
    th_attr_ints(g, n, "kernel_shape", (const int64_t[]){2}, 1);
    th_attr_ints(g, n, "strides", (const int64_t[]){2}, 1);
    th_attr_ints(g, n, "pads", (const int64_t[]){0, 1}, 2);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 11);
    th_assert_dims(&out[0], 3, shape);
    th_assert_near(out[0].data, (const float[]){0, 7, 0, 0, 9}, 5, 0);
    th_free(out, 1);
    /* errors */
    n = th_node(g, "MaxUnpool", 9, 2, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'kernel_shape' is required");
    n = th_node(g, "MaxUnpool", 9, 2, 1);
    th_attr_ints(g, n, "kernel_shape", (const int64_t[]){2}, 1);
    th_attr_ints(g, n, "pads", (const int64_t[]){1}, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "pads has 1 entries, expected 2");
    n = th_node(g, "MaxUnpool", 9, 2, 1);
    th_attr_ints(g, n, "kernel_shape", (const int64_t[]){2}, 1);
    th_attr_int(g, n, "storage_order", 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'storage_order'");
    const int64_t short_shape[2] = {1, 5};
    in[2] = th_tensor(I64, 1, (const int64_t[]){2}, short_shape);
    n = th_node(g, "MaxUnpool", 22, 3, 1);
    th_attr_ints(g, n, "kernel_shape", (const int64_t[]){2}, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "output_shape must be 1-D with 3 entries");
    const int64_t d2[] = {1, 1, 1};
    in[1] = th_tensor(I64, 3, d2, idx);
    n = th_node(g, "MaxUnpool", 22, 2, 1);
    th_attr_ints(g, n, "kernel_shape", (const int64_t[]){2}, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL, "I must have X's shape");
    n = th_node(g, "MaxUnpool", 22, 2, 1);
    th_attr_ints(g, n, "kernel_shape", (const int64_t[]){2, 2}, 2);
    in[1] = th_tensor(I64, 3, d, idx);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "X has rank 3; kernel_shape makes it (N, C) and 2 spatial axes");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("unpool");
    TCase *t = tcase_create("unpool");
    tcase_add_test(t, test_max_unpool);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
