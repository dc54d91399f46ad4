/* BitwiseAnd/Or/Xor/Not and BitShift (bitwise.c): broadcasting, each type's wrap-around, the
 * shifts' edges (negative and too-wide shifts of signed values) and the errors. */
#include "harness.h"
#include "layers/op.h"

START_TEST(test_bitwise_values) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    /* (2, 3) & (3,) broadcast, int32 */
    const int32_t a[6] = {0x0f, -1, 6, 0x70, 0, -8};
    const int32_t b[3] = {0x3c, 5, -2};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_INT32, 2, (const int64_t[]){2, 3}, a),
                        th_tensor(TCI_DTYPE_INT32, 1, (const int64_t[]){3}, b)};
    const char *ops[3] = {"BitwiseAnd", "BitwiseOr", "BitwiseXor"};
    const int32_t want[3][6] = {{0x0c, 5, 6, 0x30, 0, -8},
                                {0x3f, -1, -2, 0x7c, 5, -2},
                                {0x33, -6, -8, 0x4c, 5, 6}};
    for (int o = 0; o < 3; o++) {
        ir_node *n = th_node(g, ops[o], 18, 2, 1);
        ck_assert_tci_ok(th_run(g, n, in, out));
        th_assert_dims(&out[0], 2, (const int64_t[]){2, 3});
        for (int i = 0; i < 6; i++) ck_assert_int_eq(((int32_t *)out[0].data)[i], want[o][i]);
        th_free(out, 1);
    }
    /* Not of uint8 and int64 */
    const uint8_t u[2] = {0, 0xa5};
    tci_tensor xu = th_tensor(TCI_DTYPE_UINT8, 1, (const int64_t[]){2}, u);
    ir_node *n = th_node(g, "BitwiseNot", 18, 1, 1);
    ck_assert_tci_ok(th_run(g, n, &xu, out));
    ck_assert_uint_eq(((uint8_t *)out[0].data)[0], 0xff);
    ck_assert_uint_eq(((uint8_t *)out[0].data)[1], 0x5a);
    th_free(out, 1);
    const int64_t l[2] = {INT64_MIN, 41};
    tci_tensor xl = th_tensor(TCI_DTYPE_INT64, 1, (const int64_t[]){2}, l);
    n = th_node(g, "BitwiseNot", 18, 1, 1);
    ck_assert_tci_ok(th_run(g, n, &xl, out));
    ck_assert(((int64_t *)out[0].data)[0] == INT64_MAX && ((int64_t *)out[0].data)[1] == -42);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

static tci_status run_shift(ir_graph *g, int opset, const char *direction, tci_dtype dtype,
                            const void *x, const void *s, int count, tci_tensor *out) {
    ir_node *n = th_node(g, "BitShift", opset, 2, 1);
    if (direction) th_attr_string(g, n, "direction", direction);
    const int64_t d[1] = {count};
    tci_tensor in[2] = {th_tensor(dtype, 1, d, x), th_tensor(dtype, 1, d, s)};
    return th_run(g, n, in, out);
}

START_TEST(test_bit_shift) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    /* uint8 at opset 11: bits shifted out are gone, a shift of 8 or more gives 0 */
    const uint8_t ux[4] = {0x81, 0x81, 3, 200}, us[4] = {1, 7, 8, 255};
    ck_assert_tci_ok(run_shift(g, 11, "LEFT", TCI_DTYPE_UINT8, ux, us, 4, out));
    const uint8_t left[4] = {0x02, 0x80, 0, 0};
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(((uint8_t *)out[0].data)[i], left[i]);
    th_free(out, 1);
    ck_assert_tci_ok(run_shift(g, 11, "RIGHT", TCI_DTYPE_UINT8, ux, us, 4, out));
    const uint8_t right[4] = {0x40, 1, 0, 0};
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(((uint8_t *)out[0].data)[i], right[i]);
    th_free(out, 1);
    /* int64 at opset 28: arithmetic right shifts; negative or too-wide shifts leave the sign
     * fill (-1 right of a negative value, else 0) */
    const int64_t lx[5] = {-9, -9, -9, 5, INT64_MIN}, ls[5] = {1, 64, -1, 63, 63};
    ck_assert_tci_ok(run_shift(g, 28, "RIGHT", TCI_DTYPE_INT64, lx, ls, 5, out));
    const int64_t lr[5] = {-5, -1, -1, 0, -1};
    for (int i = 0; i < 5; i++) ck_assert(((int64_t *)out[0].data)[i] == lr[i]);
    th_free(out, 1);
    ck_assert_tci_ok(run_shift(g, 28, "LEFT", TCI_DTYPE_INT64, lx, ls, 5, out));
    const int64_t ll[5] = {-18, 0, 0, INT64_MIN, 0};
    for (int i = 0; i < 5; i++) ck_assert(((int64_t *)out[0].data)[i] == ll[i]);
    th_free(out, 1);
    /* errors: signed types before opset 28, no or a bad direction, bool, mixed types */
    const int32_t ix[1] = {1};
    ck_assert_tci_error(run_shift(g, 11, "LEFT", TCI_DTYPE_INT32, ix, ix, 1, out),
                        TCI_ERR_INVALID_MODEL, "BitShift-11 shifts unsigned integers; int32 "
                                               "needs opset 28");
    ck_assert_tci_error(run_shift(g, 28, NULL, TCI_DTYPE_INT32, ix, ix, 1, out),
                        TCI_ERR_INVALID_MODEL, "attribute 'direction' is ''");
    ck_assert_tci_error(run_shift(g, 28, "left", TCI_DTYPE_INT32, ix, ix, 1, out),
                        TCI_ERR_INVALID_MODEL, "'direction' is 'left'; expected 'LEFT' or");
    const uint8_t bx[1] = {1};
    ir_node *n = th_node(g, "BitwiseAnd", 18, 2, 1);
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_BOOL, 1, (const int64_t[]){1}, bx),
                        th_tensor(TCI_DTYPE_BOOL, 1, (const int64_t[]){1}, bx)};
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED, "input 0");
    in[0] = th_tensor(TCI_DTYPE_UINT8, 1, (const int64_t[]){1}, bx);
    in[1] = th_tensor(TCI_DTYPE_INT32, 1, (const int64_t[]){1}, ix);
    n = th_node(g, "BitwiseOr", 18, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "input 1 has dtype int32 but input 0 has uint8");
    n = th_node(g, "BitwiseXor", 18, 2, 1);
    th_attr_int(g, n, "axis", 0);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'axis'");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("bitwise");
    TCase *t = tcase_create("bitwise");
    tcase_add_test(t, test_bitwise_values);
    tcase_add_test(t, test_bit_shift);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
