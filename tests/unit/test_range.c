/* Range: the fp32/int reference against onnxruntime's arithmetic, its shape inference, and what
 * a GPU plan makes of it (folded when its inputs are known at build, refused otherwise). */
#include <math.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

static tci_status run_range(tci_dtype dtype, const void *start, const void *limit,
                            const void *delta, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Range", 11, 3, 1);
    tci_tensor in[3] = {th_tensor(dtype, 0, NULL, start), th_tensor(dtype, 0, NULL, limit),
                        th_tensor(dtype, 0, NULL, delta)};
    tci_status st = th_run(g, n, in, out);
    ir_graph_destroy(g);
    return st;
}

START_TEST(test_range_float) {
    float start = 1.0f, limit = 2.0f, delta = 0.3f;
    tci_tensor out;
    ck_assert_tci_ok(run_range(TCI_DTYPE_FLOAT, &start, &limit, &delta, &out));
    ck_assert_int_eq(out.rank, 1);
    ck_assert_int_eq(out.dims[0], 4); /* ceil(1 / 0.3) */
    /* accumulated in float, as onnxruntime does: 1, 1.3, 1.6, 1.9 */
    float want[4], v = start;
    for (int i = 0; i < 4; i++, v += delta) want[i] = v;
    th_assert_near(out.data, want, 4, 0.0f);
    th_free(&out, 1);
}
END_TEST

START_TEST(test_range_int_negative_and_empty) {
    int64_t start = 10, limit = 4, delta = -3;
    tci_tensor out;
    ck_assert_tci_ok(run_range(TCI_DTYPE_INT64, &start, &limit, &delta, &out));
    ck_assert_int_eq(out.dims[0], 2);
    ck_assert_int_eq(((int64_t *)out.data)[0], 10);
    ck_assert_int_eq(((int64_t *)out.data)[1], 7);
    th_free(&out, 1);
    int32_t s32 = 5, l32 = 5, d32 = 1; /* empty: limit reached before the first value */
    ck_assert_tci_ok(run_range(TCI_DTYPE_INT32, &s32, &l32, &d32, &out));
    ck_assert_int_eq(out.dims[0], 0);
    th_free(&out, 1);
    l32 = 0; /* positive delta away from limit: empty too */
    ck_assert_tci_ok(run_range(TCI_DTYPE_INT32, &s32, &l32, &d32, &out));
    ck_assert_int_eq(out.dims[0], 0);
    th_free(&out, 1);
}
END_TEST

START_TEST(test_range_errors) {
    double start = 0, limit = 1, delta = 0;
    tci_tensor out;
    ck_assert_tci_error(run_range(TCI_DTYPE_DOUBLE, &start, &limit, &delta, &out),
                        TCI_ERR_INVALID_ARGUMENT, "delta must not be zero");
    delta = 1e-30;
    ck_assert_tci_error(run_range(TCI_DTYPE_DOUBLE, &start, &limit, &delta, &out),
                        TCI_ERR_INVALID_ARGUMENT, "too long");
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Range", 11, 3, 1);
    tci_tensor f = th_shape_only(TCI_DTYPE_FLOAT, 0, NULL), i = th_shape_only(TCI_DTYPE_INT64, 0, NULL);
    const tci_tensor *mixed[3] = {&f, &i, &f};
    tci_tensor y;
    ck_assert_tci_error(th_infer(g, n, mixed, &y), TCI_ERR_INVALID_MODEL,
                        "limit has dtype int64 but start has float");
    int64_t two[1] = {2};
    tci_tensor v = th_shape_only(TCI_DTYPE_FLOAT, 1, two);
    const tci_tensor *vector[3] = {&f, &v, &f};
    ck_assert_tci_error(th_infer(g, n, vector, &y), TCI_ERR_INVALID_MODEL,
                        "limit must be a scalar, it has 2 elements");
    /* values unknown: a 1-D output of unknown length */
    const tci_tensor *unknown[3] = {&f, &f, &f};
    ck_assert_tci_ok(th_infer(g, n, unknown, &y));
    int64_t dims[1] = {-1};
    th_assert_dims(&y, 1, dims);
    ir_graph_destroy(g);
}
END_TEST

/* x (2x4) + Range(0, limit, 1) broadcast over the rows. */
static ir_graph *range_graph(bool constant_limit) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[2] = {2, 4};
    float zero = 0, one = 1, four = 4;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL);
    ir_tensor *start = th_named(g, "start", TCI_DTYPE_FLOAT, 0, NULL, &zero);
    ir_tensor *limit = th_named(g, "limit", TCI_DTYPE_FLOAT, 0, NULL, constant_limit ? &four : NULL);
    ir_tensor *delta = th_named(g, "delta", TCI_DTYPE_FLOAT, 0, NULL, &one);
    ir_tensor *r = th_named(g, "r", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *range_in[3] = {start, limit, delta}, *add_in[2] = {x, r};
    th_node_io(g, "range", "Range", 17, range_in, 3, &r, 1);
    th_node_io(g, "add", "Add", 17, add_in, 2, &y, 1);
    ir_tensor *ins[2] = {x, limit};
    th_graph_io(g, ins, constant_limit ? 1 : 2, &y, 1);
    return g;
}

START_TEST(test_range_gpu_plan) {
    /* known at build: the pass folds Range into a constant and the plan has one eltwise step */
    ir_graph *g = range_graph(true);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    ck_assert_int_eq(p->steps[0].kind, PLAN_STEP_ELTWISE);
    plan_destroy(p);
    ir_graph_destroy(g);
    /* limit only known at run time: the length of r is too, which the plan refuses by name */
    g = range_graph(false);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED,
                        "node 'range' (Range): dim 0 of 'r' depends on runtime values");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("range");
    TCase *tc = tcase_create("range");
    tcase_add_test(tc, test_range_float);
    tcase_add_test(tc, test_range_int_negative_and_empty);
    tcase_add_test(tc, test_range_errors);
    tcase_add_test(tc, test_range_gpu_plan);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
