/* The logic family: comparisons, And/Or/Xor/Not, IsNaN and IsInf (bool results), on the CPU
 * reference; parse and inference errors; version tables. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "layers/op.h"
#include "harness.h"

/* Runs node and checks a bool output of the given shape against want. */
static void expect_bool(ir_graph *g, ir_node *n, const tci_tensor *in, int rank,
                        const int64_t *dims, const uint8_t *want) {
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_BOOL);
    ck_assert_int_eq(out[0].rank, rank);
    for (int i = 0; i < rank; i++) ck_assert_int_eq(out[0].dims[i], dims[i]);
    const uint8_t *y = out[0].data;
    for (int64_t i = 0; i < tci_tensor_count(&out[0]); i++)
        ck_assert_msg(y[i] == want[i], "%s element %lld: got %d want %d", n->op_type,
                      (long long)i, y[i], want[i]);
    th_free(out, 1);
}

START_TEST(test_comparisons_float) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t d[1] = {6};
    const float a[6] = {1, 2, 3, NAN, -INFINITY, -0.0f}, b[6] = {2, 2, 2, NAN, -INFINITY, 0};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 1, d, a), th_tensor(TCI_DTYPE_FLOAT, 1, d, b)};
    /* NaN compares false; -0 == 0 */
    expect_bool(g, th_node(g, "Less", 13, 2, 1), in, 1, d, (const uint8_t[]){1, 0, 0, 0, 0, 0});
    expect_bool(g, th_node(g, "Greater", 7, 2, 1), in, 1, d, (const uint8_t[]){0, 0, 1, 0, 0, 0});
    expect_bool(g, th_node(g, "LessOrEqual", 16, 2, 1), in, 1, d,
                (const uint8_t[]){1, 1, 0, 0, 1, 1});
    expect_bool(g, th_node(g, "GreaterOrEqual", 12, 2, 1), in, 1, d,
                (const uint8_t[]){0, 1, 1, 0, 1, 1});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_comparisons_broadcast_and_integers) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* [2,3] against [3] and against a scalar */
    const int64_t ad[2] = {2, 3}, bd[1] = {3};
    const int64_t a[6] = {1, 5, INT64_MIN, 4, 5, INT64_MAX}, b[3] = {2, 5, 0}, s = 4;
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_INT64, 2, ad, a), th_tensor(TCI_DTYPE_INT64, 1, bd, b)};
    expect_bool(g, th_node(g, "Less", 9, 2, 1), in, 2, ad, (const uint8_t[]){1, 0, 1, 0, 0, 0});
    expect_bool(g, th_node(g, "GreaterOrEqual", 16, 2, 1), in, 2, ad,
                (const uint8_t[]){0, 1, 0, 1, 1, 1});
    tci_tensor sl[2] = {th_tensor(TCI_DTYPE_INT64, 0, NULL, &s), in[0]};
    expect_bool(g, th_node(g, "Greater", 13, 2, 1), sl, 2, ad,
                (const uint8_t[]){1, 0, 1, 0, 0, 0});
    expect_bool(g, th_node(g, "LessOrEqual", 12, 2, 1), sl, 2, ad,
                (const uint8_t[]){0, 1, 0, 1, 1, 1});

    const int64_t two[1] = {2};
    const uint8_t u[2] = {0, 200}, v[2] = {255, 100};
    tci_tensor uu[2] = {th_tensor(TCI_DTYPE_UINT8, 1, two, u), th_tensor(TCI_DTYPE_UINT8, 1, two, v)};
    expect_bool(g, th_node(g, "Greater", 13, 2, 1), uu, 1, two, (const uint8_t[]){0, 1});
    const int8_t i8a[2] = {-128, 127}, i8b[2] = {127, -128};
    tci_tensor ii[2] = {th_tensor(TCI_DTYPE_INT8, 1, two, i8a),
                        th_tensor(TCI_DTYPE_INT8, 1, two, i8b)};
    expect_bool(g, th_node(g, "Less", 13, 2, 1), ii, 1, two, (const uint8_t[]){1, 0});
    const int32_t i32a[2] = {-1, 7}, i32b[2] = {-1, 8};
    tci_tensor i32[2] = {th_tensor(TCI_DTYPE_INT32, 1, two, i32a),
                         th_tensor(TCI_DTYPE_INT32, 1, two, i32b)};
    expect_bool(g, th_node(g, "LessOrEqual", 16, 2, 1), i32, 1, two, (const uint8_t[]){1, 1});
    const double da[2] = {1e300, -1}, db[2] = {1e299, -1};
    tci_tensor dd[2] = {th_tensor(TCI_DTYPE_DOUBLE, 1, two, da),
                        th_tensor(TCI_DTYPE_DOUBLE, 1, two, db)};
    expect_bool(g, th_node(g, "Greater", 13, 2, 1), dd, 1, two, (const uint8_t[]){1, 0});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_logical) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t d[2] = {2, 2}, row[1] = {2};
    const uint8_t a[4] = {0, 0, 1, 1}, b[4] = {0, 1, 0, 1}, r[2] = {1, 0};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_BOOL, 2, d, a), th_tensor(TCI_DTYPE_BOOL, 2, d, b)};
    expect_bool(g, th_node(g, "And", 7, 2, 1), in, 2, d, (const uint8_t[]){0, 0, 0, 1});
    expect_bool(g, th_node(g, "Or", 7, 2, 1), in, 2, d, (const uint8_t[]){0, 1, 1, 1});
    expect_bool(g, th_node(g, "Xor", 7, 2, 1), in, 2, d, (const uint8_t[]){0, 1, 1, 0});
    expect_bool(g, th_node(g, "Not", 1, 1, 1), in, 2, d, (const uint8_t[]){1, 1, 0, 0});
    /* a row broadcast over both rows */
    tci_tensor br[2] = {in[0], th_tensor(TCI_DTYPE_BOOL, 1, row, r)};
    expect_bool(g, th_node(g, "Xor", 7, 2, 1), br, 2, d, (const uint8_t[]){1, 0, 0, 1});
    expect_bool(g, th_node(g, "And", 7, 2, 1), br, 2, d, (const uint8_t[]){0, 0, 1, 0});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_isnan_isinf) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t d[1] = {6};
    const float x[6] = {NAN, INFINITY, -INFINITY, FLT_MAX, 0, -1};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 1, d, x);
    expect_bool(g, th_node(g, "IsNaN", 20, 1, 1), &in, 1, d, (const uint8_t[]){1, 0, 0, 0, 0, 0});
    expect_bool(g, th_node(g, "IsInf", 10, 1, 1), &in, 1, d, (const uint8_t[]){0, 1, 1, 0, 0, 0});
    ir_node *n = th_node(g, "IsInf", 20, 1, 1);
    th_attr_int(g, n, "detect_negative", 0);
    expect_bool(g, n, &in, 1, d, (const uint8_t[]){0, 1, 0, 0, 0, 0});
    n = th_node(g, "IsInf", 20, 1, 1);
    th_attr_int(g, n, "detect_positive", 0);
    expect_bool(g, n, &in, 1, d, (const uint8_t[]){0, 0, 1, 0, 0, 0});

    /* a double beyond float's range is finite; fp16 keeps inf and NaN */
    const double xd[6] = {NAN, INFINITY, -INFINITY, 1e300, -1e300, 0};
    in = th_tensor(TCI_DTYPE_DOUBLE, 1, d, xd);
    expect_bool(g, th_node(g, "IsInf", 20, 1, 1), &in, 1, d, (const uint8_t[]){0, 1, 1, 0, 0, 0});
    expect_bool(g, th_node(g, "IsNaN", 13, 1, 1), &in, 1, d, (const uint8_t[]){1, 0, 0, 0, 0, 0});
    const uint16_t xh[6] = {0x7e00, 0x7c00, 0xfc00, 0x7bff, 0x0001, 0x8000};
    in = th_tensor(TCI_DTYPE_FLOAT16, 1, d, xh);
    expect_bool(g, th_node(g, "IsInf", 20, 1, 1), &in, 1, d, (const uint8_t[]){0, 1, 1, 0, 0, 0});
    expect_bool(g, th_node(g, "IsNaN", 9, 1, 1), &in, 1, d, (const uint8_t[]){1, 0, 0, 0, 0, 0});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t d[1] = {2};
    const float f[2] = {0, 1};
    const uint8_t bo[2] = {0, 1};
    const int32_t i[2] = {0, 1};
    tci_tensor out[1];
    tci_tensor ff[2] = {th_tensor(TCI_DTYPE_FLOAT, 1, d, f), th_tensor(TCI_DTYPE_FLOAT, 1, d, f)};
    tci_tensor bb[2] = {th_tensor(TCI_DTYPE_BOOL, 1, d, bo), th_tensor(TCI_DTYPE_BOOL, 1, d, bo)};
    tci_tensor fi[2] = {ff[0], th_tensor(TCI_DTYPE_INT32, 1, d, i)};
    ck_assert_tci_error(th_run(g, th_node(g, "And", 7, 2, 1), ff, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype float");
    ck_assert_tci_error(th_run(g, th_node(g, "Less", 13, 2, 1), bb, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype bool");
    ck_assert_tci_error(th_run(g, th_node(g, "Greater", 13, 2, 1), fi, out),
                        TCI_ERR_INVALID_MODEL, "input 1 has dtype int32 but input 0 has float");
    ck_assert_tci_error(th_run(g, th_node(g, "Not", 1, 1, 1), ff, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype float");
    ck_assert_tci_error(th_run(g, th_node(g, "IsNaN", 20, 1, 1), bb, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype bool");
    ck_assert_tci_error(th_run(g, th_node(g, "Xor", 7, 1, 1), bb, out), TCI_ERR_INVALID_MODEL,
                        "has 1 input");
    ir_node *n = th_node(g, "IsInf", 20, 1, 1);
    th_attr_int(g, n, "detect_positive", 2);
    ck_assert_tci_error(th_run(g, n, ff, out), TCI_ERR_INVALID_MODEL,
                        "attribute 'detect_positive' must be 0 or 1, got 2");
    n = th_node(g, "Less", 13, 2, 1);
    th_attr_int(g, n, "broadcast", 1);
    ck_assert_tci_error(th_run(g, n, ff, out), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'broadcast'");
    /* shapes that do not broadcast */
    const int64_t d3[1] = {3};
    const float f3[3] = {0};
    tci_tensor bad[2] = {ff[0], th_tensor(TCI_DTYPE_FLOAT, 1, d3, f3)};
    ck_assert_tci_error(th_run(g, th_node(g, "Less", 13, 2, 1), bad, out),
                        TCI_ERR_INVALID_MODEL, "broadcast");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t ad[2] = {-1, 3}, bd[1] = {3};
    tci_tensor a = th_shape_only(TCI_DTYPE_FLOAT, 2, ad), b = th_shape_only(TCI_DTYPE_FLOAT, 1, bd);
    const tci_tensor *in[2] = {&a, &b};
    tci_tensor out[1];
    ck_assert_tci_ok(th_infer(g, th_node(g, "GreaterOrEqual", 16, 2, 1), in, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_BOOL);
    th_assert_dims(&out[0], 2, ad);
    ck_assert_tci_ok(th_infer(g, th_node(g, "IsInf", 20, 1, 1), in, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_BOOL);
    th_assert_dims(&out[0], 2, ad);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_version_tables) {
    static const struct {
        const char *op;
        int first;
    } ops[] = {{"Less", 7},  {"Greater", 7}, {"LessOrEqual", 12}, {"GreaterOrEqual", 12},
               {"And", 7},   {"Or", 7},      {"Xor", 7},          {"Not", 1},
               {"IsNaN", 9}, {"IsInf", 10}};
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
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("logic");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_comparisons_float);
    tcase_add_test(tc, test_comparisons_broadcast_and_integers);
    tcase_add_test(tc, test_logical);
    tcase_add_test(tc, test_isnan_isinf);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_infer_unknown);
    tcase_add_test(tc, test_version_tables);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
