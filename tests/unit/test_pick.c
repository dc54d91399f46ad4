/* GatherND, Compress, ReverseSequence (pick.c): negative and out-of-range indices, whole-element
 * tuples, conditions shorter than the axis, lengths 0 and full, trailing dims, shape inference
 * before the values are known, versions and the errors. */
#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT
#define I64 TCI_DTYPE_INT64

static const float iota12[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

START_TEST(test_gather_nd) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xd[] = {2, 3, 2};
    tci_tensor out[1];
    /* full tuples (one element each), negative entries counting back */
    const int64_t idx[] = {1, -1, 0, 0, 2, 1};
    const int64_t id[] = {2, 3};
    tci_tensor in[2] = {th_tensor(F, 3, xd, iota12), th_tensor(I64, 2, id, idx)};
    ir_node *n = th_node(g, "GatherND", 11, 2, 1);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 11);
    th_assert_dims(&out[0], 1, (const int64_t[]){2});
    th_assert_near(out[0].data, (const float[]){10, 5}, 2, 0);
    th_free(out, 1);
    /* batch_dims 1, tuples of one: rows of each batch entry */
    const int64_t rows[] = {2, -3}, rd[] = {2, 1, 1};
    in[1] = th_tensor(I64, 3, rd, rows);
    n = th_node(g, "GatherND", 13, 2, 1);
    th_attr_int(g, n, "batch_dims", 1);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 13);
    th_assert_dims(&out[0], 3, (const int64_t[]){2, 1, 2});
    th_assert_near(out[0].data, (const float[]){4, 5, 6, 7}, 4, 0);
    th_free(out, 1);
    /* errors */
    const int64_t bad[] = {2, 0};
    const int64_t bd[] = {1, 2};
    in[1] = th_tensor(I64, 2, bd, bad);
    n = th_node(g, "GatherND", 12, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_ARGUMENT,
                        "index 2 out of range for axis 0 of size 2");
    n = th_node(g, "GatherND", 11, 2, 1);
    th_attr_int(g, n, "batch_dims", 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'batch_dims'");
    n = th_node(g, "GatherND", 13, 2, 1);
    th_attr_int(g, n, "batch_dims", 2);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "batch_dims 2 must be below both ranks (data 3, indices 2)");
    const int64_t four[4] = {0, 0, 0, 0}, d14[] = {1, 4};
    in[1] = th_tensor(I64, 2, d14, four);
    n = th_node(g, "GatherND", 13, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "index tuples have 4 entries; must be 1 to 3");
    const int32_t i32[2] = {0, 0};
    in[1] = th_tensor(TCI_DTYPE_INT32, 2, bd, i32);
    n = th_node(g, "GatherND", 13, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED,
                        "input 1 has unsupported dtype int32");
    /* shape inference: the tuple length sets the rank; unknown, nothing is known */
    tci_tensor xs = th_shape_only(F, 3, xd), is = th_shape_only(I64, 3, (const int64_t[]){-1, 4, 2}),
               iu = th_shape_only(I64, 2, (const int64_t[]){5, -1}), o[1];
    const tci_tensor *ins[2] = {&xs, &is};
    n = th_node(g, "GatherND", 13, 2, 1);
    ck_assert_tci_ok(th_infer(g, n, ins, o));
    th_assert_dims(&o[0], 3, (const int64_t[]){-1, 4, 2});
    ins[1] = &iu;
    ck_assert_tci_ok(th_infer(g, n, ins, o));
    ck_assert_int_eq(o[0].rank, -1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_compress) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xd[] = {3, 4};
    tci_tensor out[1];
    /* a condition shorter than the axis drops the rest; int64 elements copy whole */
    const int64_t x64[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, INT64_MAX};
    const uint8_t c2[2] = {0, 1};
    const int64_t cd2[] = {2};
    tci_tensor in[2] = {th_tensor(I64, 2, xd, x64), th_tensor(TCI_DTYPE_BOOL, 1, cd2, c2)};
    ir_node *n = th_node(g, "Compress", 9, 2, 1);
    th_attr_int(g, n, "axis", 1);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 9);
    th_assert_dims(&out[0], 2, (const int64_t[]){3, 1});
    const int64_t col1[3] = {1, 5, 9};
    for (int i = 0; i < 3; i++) ck_assert_int_eq(((int64_t *)out[0].data)[i], col1[i]);
    th_free(out, 1);
    /* flattened (no axis); nothing selected gives an empty result */
    const uint8_t c12[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    const int64_t cd12[] = {12};
    in[1] = th_tensor(TCI_DTYPE_BOOL, 1, cd12, c12);
    n = th_node(g, "Compress", 28, 2, 1);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 28);
    th_assert_dims(&out[0], 1, (const int64_t[]){1});
    ck_assert_int_eq(((int64_t *)out[0].data)[0], INT64_MAX);
    th_free(out, 1);
    const uint8_t none[3] = {0, 0, 0};
    const int64_t cd3[] = {3};
    in[0] = th_tensor(F, 2, xd, iota12);
    in[1] = th_tensor(TCI_DTYPE_BOOL, 1, cd3, none);
    n = th_node(g, "Compress", 11, 2, 1);
    th_attr_int(g, n, "axis", -2);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 11);
    th_assert_dims(&out[0], 2, (const int64_t[]){0, 4});
    th_free(out, 1);
    /* errors */
    n = th_node(g, "Compress", 9, 2, 1);
    th_attr_int(g, n, "axis", -1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "axis -1 is negative; opset 9 takes [0, rank)");
    const uint8_t five[5] = {1, 1, 1, 1, 1};
    const int64_t cd5[] = {5};
    in[1] = th_tensor(TCI_DTYPE_BOOL, 1, cd5, five);
    n = th_node(g, "Compress", 11, 2, 1);
    th_attr_int(g, n, "axis", 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "condition has 5 entries, more than the 4 it selects from");
    in[1] = th_tensor(TCI_DTYPE_INT32, 1, cd3, (const int32_t[]){1, 0, 1});
    n = th_node(g, "Compress", 11, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_UNSUPPORTED,
                        "input 1 has unsupported dtype int32");
    /* before the condition's values: the selected dim is unknown, the others known */
    tci_tensor xs = th_shape_only(F, 2, xd), cs = th_shape_only(TCI_DTYPE_BOOL, 1, cd3), o[1];
    const tci_tensor *ins[2] = {&xs, &cs};
    n = th_node(g, "Compress", 11, 2, 1);
    th_attr_int(g, n, "axis", 0);
    ck_assert_tci_ok(th_infer(g, n, ins, o));
    th_assert_dims(&o[0], 2, (const int64_t[]){-1, 4});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reverse_sequence) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* (time 3, batch 2, 2): batch 0 reversed over all 3 steps, batch 1 over none */
    const int64_t xd[] = {3, 2, 2}, ld[] = {2};
    const int64_t lens[2] = {3, 0};
    tci_tensor in[2] = {th_tensor(F, 3, xd, iota12), th_tensor(I64, 1, ld, lens)}, out[1];
    ir_node *n = th_node(g, "ReverseSequence", 10, 2, 1);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 10);
    th_assert_dims(&out[0], 3, xd);
    const float want[12] = {8, 9, 2, 3, 4, 5, 6, 7, 0, 1, 10, 11};
    th_assert_near(out[0].data, want, 12, 0);
    th_free(out, 1);
    /* batch-major (batch 2, time 3, 2), int32 lengths 2 and 1 */
    const int64_t bd[] = {2, 3, 2};
    in[0] = th_tensor(F, 3, bd, iota12);
    in[1] = th_tensor(TCI_DTYPE_INT32, 1, ld, (const int32_t[]){2, 1});
    n = th_node(g, "ReverseSequence", 28, 2, 1);
    th_attr_int(g, n, "batch_axis", 0);
    th_attr_int(g, n, "time_axis", 1);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 28);
    const float want_b[12] = {2, 3, 0, 1, 4, 5, 6, 7, 8, 9, 10, 11};
    th_assert_near(out[0].data, want_b, 12, 0);
    th_free(out, 1);
    /* errors */
    in[1] = th_tensor(I64, 1, ld, (const int64_t[]){4, 0});
    n = th_node(g, "ReverseSequence", 28, 2, 1);
    th_attr_int(g, n, "batch_axis", 0);
    th_attr_int(g, n, "time_axis", 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_ARGUMENT,
                        "sequence_lens[0] is 4; must be in [0, 3]");
    n = th_node(g, "ReverseSequence", 28, 2, 1);
    th_attr_int(g, n, "batch_axis", 0);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "batch_axis 0 and time_axis 0 must be 0 and 1 in some order");
    const int64_t l3[] = {3};
    in[0] = th_tensor(F, 3, xd, iota12);
    in[1] = th_tensor(I64, 1, l3, (const int64_t[]){1, 1, 1});
    n = th_node(g, "ReverseSequence", 28, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "sequence_lens has 3 entries for a batch of 2");
    in[0] = th_tensor(F, 1, l3, iota12);
    n = th_node(g, "ReverseSequence", 28, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "input must have rank >= 2, got 1");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pick");
    TCase *t = tcase_create("pick");
    tcase_add_test(t, test_gather_nd);
    tcase_add_test(t, test_compress);
    tcase_add_test(t, test_reverse_sequence);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
