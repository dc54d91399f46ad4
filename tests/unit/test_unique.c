/* Unique (unique.c): NaN as one value after every number, bool, a scalar, first-occurrence order
 * with an axis, and the errors; the node cases cover sorted values of the common types. */
#include <math.h>

#include "harness.h"
#include "layers/op.h"

#define I64 TCI_DTYPE_INT64

static void assert_i64(const tci_tensor *t, const int64_t *want, int64_t n) {
    th_assert_dims(t, 1, (const int64_t[]){n});
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(((const int64_t *)t->data)[i] == want[i], "[%lld]: %lld, expected %lld",
                      (long long)i, (long long)((const int64_t *)t->data)[i],
                      (long long)want[i]);
}

START_TEST(test_unique_nan_and_order) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[4];
    const float nan = NAN;
    const float v[7] = {2, nan, -1, 2, nan, -0.0f, 0};
    tci_tensor x = th_tensor(TCI_DTYPE_FLOAT, 1, (const int64_t[]){7}, v);
    /* sorted: -1, 0 (-0 and 0 are one value, the first kept), 2, then NaN (both NaNs one) */
    ir_node *n = th_node(g, "Unique", 11, 1, 4);
    ck_assert_tci_ok(th_run(g, n, &x, out));
    th_assert_dims(&out[0], 1, (const int64_t[]){4});
    const float *y = out[0].data;
    ck_assert(y[0] == -1 && y[1] == 0 && signbit(y[1]) && y[2] == 2 && isnan(y[3]));
    assert_i64(&out[1], (const int64_t[]){2, 5, 0, 1}, 4);
    assert_i64(&out[2], (const int64_t[]){2, 3, 0, 2, 3, 1, 1}, 7);
    assert_i64(&out[3], (const int64_t[]){1, 2, 2, 2}, 4);
    th_free(out, 4);
    /* in order of first occurrence: 2, NaN, -1, -0 */
    n = th_node(g, "Unique", 11, 1, 4);
    th_attr_int(g, n, "sorted", 0);
    ck_assert_tci_ok(th_run(g, n, &x, out));
    y = out[0].data;
    ck_assert(y[0] == 2 && isnan(y[1]) && y[2] == -1 && y[3] == 0);
    assert_i64(&out[1], (const int64_t[]){0, 1, 2, 5}, 4);
    assert_i64(&out[2], (const int64_t[]){0, 1, 2, 0, 1, 3, 3}, 7);
    assert_i64(&out[3], (const int64_t[]){2, 2, 1, 2}, 4);
    th_free(out, 4);
    /* bool, and a scalar (one element) */
    const uint8_t b[5] = {1, 0, 1, 1, 0};
    tci_tensor xb = th_tensor(TCI_DTYPE_BOOL, 1, (const int64_t[]){5}, b);
    n = th_node(g, "Unique", 11, 1, 4);
    ck_assert_tci_ok(th_run(g, n, &xb, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_BOOL);
    ck_assert(((uint8_t *)out[0].data)[0] == 0 && ((uint8_t *)out[0].data)[1] == 1);
    assert_i64(&out[3], (const int64_t[]){2, 3}, 2);
    th_free(out, 4);
    const int64_t s = 7;
    tci_tensor xs = th_tensor(I64, 0, NULL, &s);
    n = th_node(g, "Unique", 11, 1, 1);
    ck_assert_tci_ok(th_run(g, n, &xs, out));
    th_assert_dims(&out[0], 1, (const int64_t[]){1});
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_unique_axis_first_occurrence) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[4];
    /* columns of a 2 x 4: c0 = (3, 1), c1 = (0, 5), c2 = (3, 1), c3 = (0, 4) */
    const int32_t v[8] = {3, 0, 3, 0, 1, 5, 1, 4};
    tci_tensor x = th_tensor(TCI_DTYPE_INT32, 2, (const int64_t[]){2, 4}, v);
    ir_node *n = th_node(g, "Unique", 11, 1, 4);
    th_attr_int(g, n, "axis", 1);
    th_attr_int(g, n, "sorted", 0);
    ck_assert_tci_ok(th_run(g, n, &x, out));
    th_assert_dims(&out[0], 2, (const int64_t[]){2, 3});
    const int32_t want[6] = {3, 0, 0, 1, 5, 4};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], want[i]);
    assert_i64(&out[1], (const int64_t[]){0, 1, 3}, 3);
    assert_i64(&out[2], (const int64_t[]){0, 1, 0, 2}, 4);
    assert_i64(&out[3], (const int64_t[]){2, 1, 1}, 3);
    th_free(out, 4);
    /* sorted, lexicographic by the column's elements: (0, 4), (0, 5), (3, 1) */
    n = th_node(g, "Unique", 11, 1, 2);
    th_attr_int(g, n, "axis", -1);
    ck_assert_tci_ok(th_run(g, n, &x, out));
    const int32_t sorted[6] = {0, 0, 3, 4, 5, 1};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], sorted[i]);
    assert_i64(&out[1], (const int64_t[]){3, 1, 0}, 3);
    th_free(out, 2);
    /* errors */
    n = th_node(g, "Unique", 11, 1, 1);
    th_attr_int(g, n, "axis", 2);
    ck_assert_tci_error(th_run(g, n, &x, out), TCI_ERR_INVALID_MODEL, "axis");
    n = th_node(g, "Unique", 11, 1, 1);
    th_attr_int(g, n, "sorted", 2);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL, "sorted");
    n = th_node(g, "Unique", 11, 1, 1);
    th_attr_int(g, n, "return_counts", 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'return_counts'");
    const uint16_t bf[2] = {0, 0};
    tci_tensor xbf = th_tensor(TCI_DTYPE_BFLOAT16, 1, (const int64_t[]){2}, bf);
    n = th_node(g, "Unique", 11, 1, 1);
    ck_assert_tci_error(th_run(g, n, &xbf, out), TCI_ERR_UNSUPPORTED, "input 0");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("unique");
    TCase *t = tcase_create("unique");
    tcase_add_test(t, test_unique_nan_and_order);
    tcase_add_test(t, test_unique_axis_first_occurrence);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
