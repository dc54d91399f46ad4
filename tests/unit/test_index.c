/* The index family (GatherElements, ScatterElements, ScatterND, OneHot): parse errors, shape
 * inference, the CPU reference on small cases (negative and out-of-range indices, every
 * reduction, duplicates applied in order), and the GPU steps they lower to. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

/* Runs a fresh node of op at opset; reduction/axis set when given (NULL / INT64_MIN: absent). */
static tci_status run_op(const char *op, int opset, const char *reduction, int64_t axis,
                         const tci_tensor *in, int num_in, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, opset, num_in, 1);
    if (reduction) th_attr_string(g, n, "reduction", reduction);
    if (axis != INT64_MIN) th_attr_int(g, n, "axis", axis);
    tci_status st = th_run(g, n, in, out);
    ir_graph_destroy(g);
    return st;
}

START_TEST(test_gather_elements) {
    /* data 3x3, indices 2x3 along axis 0 with a negative index, int32 */
    float data[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t idx[6] = {1, 2, 0, 2, -1, 1};
    int64_t dd[2] = {3, 3}, id[2] = {2, 3};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 2, dd, data),
                        th_tensor(TCI_DTYPE_INT32, 2, id, idx)};
    tci_tensor out;
    ck_assert_tci_ok(run_op("GatherElements", 13, NULL, 0, in, 2, &out));
    th_assert_dims(&out, 2, id);
    const float want0[6] = {4, 8, 3, 7, 8, 6};
    th_assert_near(out.data, want0, 6, 0);
    th_free(&out, 1);
    /* axis -1 (1), int64 indices 3x2: fewer columns than the data */
    int64_t idx64[6] = {0, 0, 1, 0, -3, 2};
    int64_t id2[2] = {3, 2};
    in[1] = th_tensor(TCI_DTYPE_INT64, 2, id2, idx64);
    ck_assert_tci_ok(run_op("GatherElements", 11, NULL, -1, in, 2, &out));
    const float want1[6] = {1, 1, 5, 4, 7, 9};
    th_assert_near(out.data, want1, 6, 0);
    th_free(&out, 1);
    idx64[5] = 3;
    ck_assert_tci_error(run_op("GatherElements", 13, NULL, 1, in, 2, &out),
                        TCI_ERR_INVALID_ARGUMENT, "index 3 out of range for axis 1 of size 3");
    idx64[5] = -4;
    ck_assert_tci_error(run_op("GatherElements", 13, NULL, 1, in, 2, &out),
                        TCI_ERR_INVALID_ARGUMENT, "index -4 out of range");
    /* indices wider than the data along a non-axis dim */
    int64_t id3[2] = {1, 4};
    in[1] = th_tensor(TCI_DTYPE_INT64, 2, id3, idx64);
    ck_assert_tci_error(run_op("GatherElements", 13, NULL, 0, in, 2, &out),
                        TCI_ERR_INVALID_MODEL, "indices dim 1 is 4, larger than the data's 3");
    int64_t id4[1] = {3};
    in[1] = th_tensor(TCI_DTYPE_INT64, 1, id4, idx64);
    ck_assert_tci_error(run_op("GatherElements", 13, NULL, 0, in, 2, &out),
                        TCI_ERR_INVALID_MODEL, "indices have rank 1 but data has rank 2");
    in[1] = th_tensor(TCI_DTYPE_FLOAT, 2, id2, data);
    ck_assert_tci_error(run_op("GatherElements", 13, NULL, 0, in, 2, &out),
                        TCI_ERR_UNSUPPORTED, "float");
}
END_TEST

START_TEST(test_scatter_elements_reductions) {
    /* data 1x5, updates at columns 1, 1 (duplicate), -1 */
    float data[5] = {1, 2, 3, 4, 5}, upd[3] = {10, 20, 0.5f};
    int64_t idx[3] = {1, 1, -1};
    int64_t dd[2] = {1, 5}, id[2] = {1, 3};
    tci_tensor in[3] = {th_tensor(TCI_DTYPE_FLOAT, 2, dd, data),
                        th_tensor(TCI_DTYPE_INT64, 2, id, idx),
                        th_tensor(TCI_DTYPE_FLOAT, 2, id, upd)};
    static const struct {
        const char *reduction;
        float want[5];
    } cases[] = {
        {"none", {1, 20, 3, 4, 0.5f}}, /* the later duplicate wins, as applied in order */
        {"add", {1, 32, 3, 4, 5.5f}},
        {"mul", {1, 400, 3, 4, 2.5f}},
        {"max", {1, 20, 3, 4, 5}},
        {"min", {1, 2, 3, 4, 0.5f}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tci_tensor out;
        ck_assert_tci_ok(run_op("ScatterElements", 18, cases[c].reduction, 1, in, 3, &out));
        th_assert_dims(&out, 2, dd);
        th_assert_near(out.data, cases[c].want, 5, 0);
        th_free(&out, 1);
    }
    /* Scatter, the old name: no reduction attribute at all */
    tci_tensor out;
    ck_assert_tci_ok(run_op("Scatter", 9, NULL, 1, in, 3, &out));
    th_assert_near(out.data, cases[0].want, 5, 0);
    th_free(&out, 1);
    ck_assert_tci_error(run_op("Scatter", 11, "add", 1, in, 3, &out), TCI_ERR_UNSUPPORTED,
                        "reduction");
    /* max and min only from opset 18, reductions from 16 */
    ck_assert_tci_error(run_op("ScatterElements", 16, "max", 1, in, 3, &out),
                        TCI_ERR_UNSUPPORTED, "reduction 'max' is not defined at opset 16");
    ck_assert_tci_error(run_op("ScatterElements", 13, "add", 1, in, 3, &out),
                        TCI_ERR_UNSUPPORTED, "reduction");
    ck_assert_tci_error(run_op("ScatterElements", 18, "avg", 1, in, 3, &out),
                        TCI_ERR_UNSUPPORTED, "reduction 'avg'");
    idx[2] = 5;
    ck_assert_tci_error(run_op("ScatterElements", 18, NULL, 1, in, 3, &out),
                        TCI_ERR_INVALID_ARGUMENT, "index 5 out of range for axis 1 of size 5");
    /* int64 data combine exactly beyond 2^53 */
    int64_t big[2] = {(int64_t)1 << 60, 7}, bump[1] = {1}, at[1] = {0};
    int64_t d1[1] = {2}, i1[1] = {1};
    tci_tensor ints[3] = {th_tensor(TCI_DTYPE_INT64, 1, d1, big),
                          th_tensor(TCI_DTYPE_INT64, 1, i1, at),
                          th_tensor(TCI_DTYPE_INT64, 1, i1, bump)};
    ck_assert_tci_ok(run_op("ScatterElements", 18, "add", INT64_MIN, ints, 3, &out));
    ck_assert(((int64_t *)out.data)[0] == ((int64_t)1 << 60) + 1);
    ck_assert(((int64_t *)out.data)[1] == 7);
    th_free(&out, 1);
    /* updates must match the indices' shape */
    int64_t ud[2] = {1, 2};
    in[2] = th_tensor(TCI_DTYPE_FLOAT, 2, ud, upd);
    idx[2] = 0;
    ck_assert_tci_error(run_op("ScatterElements", 18, NULL, 1, in, 3, &out),
                        TCI_ERR_INVALID_MODEL, "updates dim 1 is 2 but indices dim 1 is 3");
}
END_TEST

START_TEST(test_scatter_nd) {
    /* data 4x2, tuples of one index: rows 0 and -1 get slices, reduction add and none */
    float data[8] = {1, 1, 2, 2, 3, 3, 4, 4}, upd[6] = {10, 20, 30, 40, 50, 60};
    int32_t idx[3] = {0, -1, 0};
    int64_t dd[2] = {4, 2}, id[2] = {3, 1}, ud[2] = {3, 2};
    tci_tensor in[3] = {th_tensor(TCI_DTYPE_FLOAT, 2, dd, data),
                        th_tensor(TCI_DTYPE_INT32, 2, id, idx),
                        th_tensor(TCI_DTYPE_FLOAT, 2, ud, upd)};
    tci_tensor out;
    ck_assert_tci_ok(run_op("ScatterND", 16, "add", INT64_MIN, in, 3, &out));
    const float want_add[8] = {61, 81, 2, 2, 3, 3, 34, 44};
    th_assert_near(out.data, want_add, 8, 0);
    th_free(&out, 1);
    ck_assert_tci_ok(run_op("ScatterND", 11, NULL, INT64_MIN, in, 3, &out));
    const float want_none[8] = {50, 60, 2, 2, 3, 3, 30, 40};
    th_assert_near(out.data, want_none, 8, 0);
    th_free(&out, 1);
    /* element tuples (k == rank): 2 updates of scalars, max */
    int64_t tuples[4] = {1, 0, 3, 1}, td[2] = {2, 2}, sd[1] = {2};
    float two[2] = {-5, 9};
    tci_tensor el[3] = {in[0], th_tensor(TCI_DTYPE_INT64, 2, td, tuples),
                        th_tensor(TCI_DTYPE_FLOAT, 1, sd, two)};
    ck_assert_tci_ok(run_op("ScatterND", 18, "max", INT64_MIN, el, 3, &out));
    const float want_max[8] = {1, 1, 2, 2, 3, 3, 4, 9};
    th_assert_near(out.data, want_max, 8, 0);
    th_free(&out, 1);
    tuples[2] = 4;
    ck_assert_tci_error(run_op("ScatterND", 18, NULL, INT64_MIN, el, 3, &out),
                        TCI_ERR_INVALID_ARGUMENT, "index 4 out of range for axis 0 of size 4");
    tuples[2] = 3;
    /* shape errors: updates of the wrong rank, tuples longer than the rank */
    el[2] = th_tensor(TCI_DTYPE_FLOAT, 2, td, data);
    ck_assert_tci_error(run_op("ScatterND", 18, NULL, INT64_MIN, el, 3, &out),
                        TCI_ERR_INVALID_MODEL, "updates have rank 2, expected 1");
    int64_t long_d[2] = {1, 3};
    el[1] = th_tensor(TCI_DTYPE_INT64, 2, long_d, tuples);
    ck_assert_tci_error(run_op("ScatterND", 18, NULL, INT64_MIN, el, 3, &out),
                        TCI_ERR_INVALID_MODEL, "index tuples have 3 entries but data has rank 2");
    /* a reduction over bool is refused naming the node; 'none' moves bool bytes */
    uint8_t flags[8] = {0}, set[2] = {1, 1};
    tci_tensor b[3] = {th_tensor(TCI_DTYPE_BOOL, 2, dd, flags),
                       th_tensor(TCI_DTYPE_INT64, 2, td, tuples),
                       th_tensor(TCI_DTYPE_BOOL, 1, sd, set)};
    ck_assert_tci_error(run_op("ScatterND", 18, "add", INT64_MIN, b, 3, &out),
                        TCI_ERR_UNSUPPORTED, "bool");
    ck_assert_tci_ok(run_op("ScatterND", 18, NULL, INT64_MIN, b, 3, &out));
    ck_assert_int_eq(((uint8_t *)out.data)[2], 1);
    ck_assert_int_eq(((uint8_t *)out.data)[7], 1);
    ck_assert_int_eq(((uint8_t *)out.data)[0], 0);
    th_free(&out, 1);
}
END_TEST

START_TEST(test_one_hot) {
    /* indices [1, -1, 5, 0] (5 is outside [-3, 3): all off), depth 3, values [off, on] */
    int64_t idx[4] = {1, -1, 5, 0}, id[1] = {4}, two[1] = {2};
    float depth = 3, values[2] = {-1, 7};
    tci_tensor in[3] = {th_tensor(TCI_DTYPE_INT64, 1, id, idx),
                        th_tensor(TCI_DTYPE_FLOAT, 0, NULL, &depth),
                        th_tensor(TCI_DTYPE_FLOAT, 1, two, values)};
    tci_tensor out;
    ck_assert_tci_ok(run_op("OneHot", 11, NULL, INT64_MIN, in, 3, &out));
    int64_t od[2] = {4, 3};
    th_assert_dims(&out, 2, od);
    const float want[12] = {-1, 7, -1, -1, -1, 7, -1, -1, -1, 7, -1, -1};
    th_assert_near(out.data, want, 12, 0);
    th_free(&out, 1);
    /* axis 0: the depth dim first; int32 values give an int32 output */
    int32_t ivals[2] = {0, 1};
    in[2] = th_tensor(TCI_DTYPE_INT32, 1, two, ivals);
    ck_assert_tci_ok(run_op("OneHot", 9, NULL, 0, in, 3, &out));
    int64_t od0[2] = {3, 4};
    th_assert_dims(&out, 2, od0);
    ck_assert_int_eq(out.dtype, TCI_DTYPE_INT32);
    const int32_t want0[12] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0};
    ck_assert_mem_eq(out.data, want0, sizeof want0);
    th_free(&out, 1);
    ck_assert_tci_error(run_op("OneHot", 11, NULL, 2, in, 3, &out), TCI_ERR_INVALID_MODEL,
                        "axis");
    depth = -2;
    ck_assert_tci_error(run_op("OneHot", 11, NULL, INT64_MIN, in, 3, &out),
                        TCI_ERR_INVALID_MODEL, "depth -2 is negative");
    depth = 3;
    int64_t three[1] = {3};
    in[2] = th_tensor(TCI_DTYPE_FLOAT, 1, three, values);
    ck_assert_tci_error(run_op("OneHot", 11, NULL, INT64_MIN, in, 3, &out),
                        TCI_ERR_INVALID_MODEL, "two elements");
}
END_TEST

START_TEST(test_index_shape_inference) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* ScatterND: output is data's shape with unknown dims kept unknown */
    ir_node *n = th_node(g, "ScatterND", 18, 3, 1);
    int64_t dd[3] = {-1, 4, 5}, id[2] = {6, 2}, ud[2] = {6, 5};
    tci_tensor x = th_shape_only(TCI_DTYPE_FLOAT, 3, dd), i = th_shape_only(TCI_DTYPE_INT64, 2, id),
               u = th_shape_only(TCI_DTYPE_FLOAT, 2, ud), y;
    const tci_tensor *in[3] = {&x, &i, &u};
    ck_assert_tci_ok(th_infer(g, n, in, &y));
    th_assert_dims(&y, 3, dd);
    tci_tensor wrong = th_shape_only(TCI_DTYPE_INT32, 2, ud);
    in[2] = &wrong;
    ck_assert_tci_error(th_infer(g, n, in, &y), TCI_ERR_INVALID_MODEL,
                        "updates have dtype int32 but data float");
    /* OneHot with an unknown depth: rank known, the depth dim -1 */
    ir_node *oh = th_node(g, "OneHot", 11, 3, 1);
    int64_t two[1] = {2}, idd[2] = {2, 3};
    tci_tensor idx = th_shape_only(TCI_DTYPE_INT64, 2, idd),
               depth = th_shape_only(TCI_DTYPE_INT64, 0, NULL),
               vals = th_shape_only(TCI_DTYPE_FLOAT, 1, two);
    const tci_tensor *ohin[3] = {&idx, &depth, &vals};
    ck_assert_tci_ok(th_infer(g, oh, ohin, &y));
    int64_t want[3] = {2, 3, -1};
    th_assert_dims(&y, 3, want);
    /* GatherElements: the indices' shape */
    ir_node *ge = th_node(g, "GatherElements", 13, 2, 1);
    int64_t gd[2] = {5, 4}, gi[2] = {7, 4};
    tci_tensor gx = th_shape_only(TCI_DTYPE_FLOAT16, 2, gd), gix = th_shape_only(TCI_DTYPE_INT32, 2, gi);
    const tci_tensor *gein[2] = {&gx, &gix};
    ck_assert_tci_ok(th_infer(g, ge, gein, &y));
    th_assert_dims(&y, 2, gi);
    ck_assert_int_eq(y.dtype, TCI_DTYPE_FLOAT16);
    /* attributes: unknown ones refused, reduction absent before opset 16 */
    ir_node *bad = th_node(g, "ScatterElements", 13, 3, 1);
    th_attr_string(g, bad, "reduction", "add");
    ck_assert_tci_error(op_prepare_node(bad, g->arena), TCI_ERR_UNSUPPORTED, "reduction");
    ir_graph_destroy(g);
}
END_TEST

/* ---- GPU plans (built on the CPU) ---- */

static const plan_step *find_step(const plan *p, plan_step_kind kind) {
    for (int i = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == kind) return &p->steps[i];
    return NULL;
}

START_TEST(test_index_gpu_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[3] = {2, 5, 4}, id[3] = {2, 3, 4}, nd[2] = {3, 2}, ud[2] = {3, 4};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    ir_tensor *i = th_named(g, "i", TCI_DTYPE_INT32, 3, id, NULL);
    ir_tensor *ti = th_named(g, "ti", TCI_DTYPE_INT64, 2, nd, NULL);
    ir_tensor *u = th_named(g, "u", TCI_DTYPE_FLOAT, 2, ud, NULL);
    ir_tensor *a = th_named(g, "a", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_node *ge = th_node_io(g, "ge", "GatherElements", 13, (ir_tensor *[]){x, i}, 2, &a, 1);
    th_attr_int(g, ge, "axis", -2);
    ir_node *sn = th_node_io(g, "sn", "ScatterND", 18, (ir_tensor *[]){x, ti, u}, 3, &y, 1);
    th_attr_string(g, sn, "reduction", "min");
    ir_tensor *outs[2] = {a, y};
    th_graph_io(g, (ir_tensor *[]){x, i, ti, u}, 4, outs, 2);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    const plan_step *s = find_step(p, PLAN_STEP_GATHER_ELEMENTS);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->u.index.axis, 1);
    ck_assert_int_eq(s->u.index.rank, 3);
    ck_assert_int_eq(s->u.index.index_dims[1], 3);
    ck_assert_int_eq(s->u.index.data_dims[1], 5);
    ck_assert_int_eq(s->u.index.elem_size, 2); /* fp16 storage */
    s = find_step(p, PLAN_STEP_SCATTER);
    ck_assert_ptr_nonnull(s);
    ck_assert(s->u.index.nd);
    ck_assert_int_eq(s->u.index.k, 2);
    ck_assert_int_eq(s->u.index.num_updates, 3);
    ck_assert_int_eq(s->u.index.reduce, PLAN_SCATTER_MIN);
    ck_assert_int_eq(s->num_inputs, 3);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_one_hot_gpu_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t id[2] = {2, 3}, two[1] = {2};
    int64_t depth = 4;
    float values[2] = {0.25f, 3};
    ir_tensor *i = th_named(g, "i", TCI_DTYPE_INT64, 2, id, NULL);
    ir_tensor *d = th_named(g, "d", TCI_DTYPE_INT64, 0, NULL, &depth);
    ir_tensor *v = th_named(g, "v", TCI_DTYPE_FLOAT, 1, two, values);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_node *n = th_node_io(g, "oh", "OneHot", 11, (ir_tensor *[]){i, d, v}, 3, &y, 1);
    th_attr_int(g, n, "axis", 1);
    th_graph_io(g, &i, 1, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    const plan_step *s = find_step(p, PLAN_STEP_ONE_HOT);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->u.one_hot.outer, 2);
    ck_assert_int_eq(s->u.one_hot.depth, 4);
    ck_assert_int_eq(s->u.one_hot.inner, 3);
    ck_assert(s->u.one_hot.off == 0.25 && s->u.one_hot.on == 3);
    plan_destroy(p);
    ir_graph_destroy(g);
    /* float indices have no GPU path */
    ck_assert_tci_ok(ir_graph_create(&g));
    i = th_named(g, "i", TCI_DTYPE_FLOAT, 2, id, NULL);
    d = th_named(g, "d", TCI_DTYPE_INT64, 0, NULL, &depth);
    v = th_named(g, "v", TCI_DTYPE_FLOAT, 1, two, values);
    y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_node_io(g, "oh", "OneHot", 11, (ir_tensor *[]){i, d, v}, 3, &y, 1);
    th_graph_io(g, &i, 1, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED,
                        "indices of dtype float have no GPU path");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("index");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_gather_elements);
    tcase_add_test(tc, test_scatter_elements_reductions);
    tcase_add_test(tc, test_scatter_nd);
    tcase_add_test(tc, test_one_hot);
    tcase_add_test(tc, test_index_shape_inference);
    tcase_add_test(tc, test_index_gpu_lowering);
    tcase_add_test(tc, test_one_hot_gpu_lowering);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
