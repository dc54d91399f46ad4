/* IR basics: arena, tensors, attributes, topological sort, fp16 conversion. */
#include <math.h>

#include "layers/op.h"
#include "harness.h"

START_TEST(test_sort_detects_cycle) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *a, *b;
    ck_assert_tci_ok(ir_graph_add_tensor(g, "a", &a));
    ck_assert_tci_ok(ir_graph_add_tensor(g, "b", &b));
    ir_node *n1, *n2;
    ck_assert_tci_ok(ir_graph_add_node(g, "first", "Relu", "", 1, 1, &n1));
    ck_assert_tci_ok(ir_graph_add_node(g, "second", "Relu", "", 1, 1, &n2));
    n1->inputs[0] = b;
    n1->outputs[0] = a;
    n2->inputs[0] = a;
    n2->outputs[0] = b;
    ck_assert_tci_error(ir_graph_sort(g), TCI_ERR_INVALID_MODEL, "cycle");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_sort_orders_nodes) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x, *a, *b;
    ck_assert_tci_ok(ir_graph_add_tensor(g, "x", &x));
    x->is_graph_input = true;
    ck_assert_tci_ok(ir_graph_add_tensor(g, "a", &a));
    ck_assert_tci_ok(ir_graph_add_tensor(g, "b", &b));
    ir_node *n1, *n2;
    ck_assert_tci_ok(ir_graph_add_node(g, "late", "Relu", "", 1, 1, &n1));
    ck_assert_tci_ok(ir_graph_add_node(g, "early", "Relu", "", 1, 1, &n2));
    n1->inputs[0] = a;
    n1->outputs[0] = b;
    n2->inputs[0] = x;
    n2->outputs[0] = a;
    ck_assert_tci_ok(ir_graph_sort(g));
    ck_assert_str_eq(g->nodes[0]->name, "early");
    ck_assert_ptr_eq(b->producer, n1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_sort_rejects_unproduced_input) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *a, *b;
    ck_assert_tci_ok(ir_graph_add_tensor(g, "ghost", &a));
    ck_assert_tci_ok(ir_graph_add_tensor(g, "b", &b));
    ir_node *n;
    ck_assert_tci_ok(ir_graph_add_node(g, "lonely", "Relu", "", 1, 1, &n));
    n->inputs[0] = a;
    n->outputs[0] = b;
    ck_assert_tci_error(ir_graph_sort(g), TCI_ERR_INVALID_MODEL, "'ghost' is not produced");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_duplicate_tensor_name) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *a;
    ck_assert_tci_ok(ir_graph_add_tensor(g, "a", &a));
    ck_assert_tci_error(ir_graph_add_tensor(g, "a", &a), TCI_ERR_INVALID_MODEL, "defined twice");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_count_overflow) {
    int64_t dims[3] = {INT64_C(1) << 40, INT64_C(1) << 30, 4}, c;
    ck_assert_tci_error(ir_count_elements(3, dims, &c), TCI_ERR_INVALID_MODEL, "overflows");
    int64_t ok[2] = {3, -1};
    ck_assert_tci_ok(ir_count_elements(2, ok, &c));
    ck_assert_int_eq(c, -1);
}
END_TEST

START_TEST(test_attr_type_mismatch) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Relu", 14, 1, 1);
    th_attr_float(g, n, "alpha", 1.0f);
    int64_t v;
    ck_assert_tci_error(ir_attr_int(n, "alpha", 0, &v), TCI_ERR_INVALID_MODEL,
                        "attribute 'alpha' is float, expected int");
    const char *known[] = {"beta", NULL};
    ck_assert_tci_error(ir_check_attrs(n, known), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'alpha'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_half_round_trip) {
    const float values[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.1f};
    const uint16_t bits[] = {0x0000, 0x3c00, 0xc100, 0x7bff, 0x0400, 0x0001, 0x2e66};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        ck_assert_uint_eq(float_to_half(values[i]), bits[i]);
        if (i != 6) ck_assert_float_eq(half_to_float(bits[i]), values[i]);
    }
    ck_assert_uint_eq(float_to_half(1e6f), 0x7c00);
    ck_assert_uint_eq(float_to_half(2.9802322e-08f), 0x0000); /* tie rounds to even zero */
}
END_TEST

START_TEST(test_bfloat16_round_trip) {
    /* 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even (1); 1 + 3 * 2^-8 ties
     * up to 1 + 2^-6; the largest float rounds to inf; a NaN stays a NaN */
    const float values[] = {0.0f, 1.0f, -2.5f, 1.00390625f, 1.01171875f, 3.0e38f, 1.0e-40f};
    const uint16_t bits[] = {0x0000, 0x3f80, 0xc020, 0x3f80, 0x3f82, 0x7f62, 0x0001};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        ck_assert_uint_eq(float_to_bfloat16(values[i]), bits[i]);
    ck_assert_float_eq(bfloat16_to_float(0xc020), -2.5f);
    ck_assert_uint_eq(float_to_bfloat16(3.4028235e38f), 0x7f80);
    const uint16_t nan = float_to_bfloat16(nanf(""));
    ck_assert(isnan(bfloat16_to_float(nan)));
}
END_TEST

START_TEST(test_unknown_op_named) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "FancyOp", 17, 1, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "op 'FancyOp' (opset 17) is not supported");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ir");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sort_detects_cycle);
    tcase_add_test(tc, test_bfloat16_round_trip);
    tcase_add_test(tc, test_sort_orders_nodes);
    tcase_add_test(tc, test_sort_rejects_unproduced_input);
    tcase_add_test(tc, test_duplicate_tensor_name);
    tcase_add_test(tc, test_count_overflow);
    tcase_add_test(tc, test_attr_type_mismatch);
    tcase_add_test(tc, test_half_round_trip);
    tcase_add_test(tc, test_unknown_op_named);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
