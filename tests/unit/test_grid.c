/* AffineGrid (grid_sample.c): the coordinates of either corner rule, single positions, the x-first
 * order, shape inference before the size's values, and the errors; GridSample's GPU step. */
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT
#define I64 TCI_DTYPE_INT64

static tci_status run_affine(ir_graph *g, int align, const float *theta, const int64_t *theta_dims,
                             const int64_t *size, int64_t size_len, tci_tensor *out) {
    ir_node *n = th_node(g, "AffineGrid", 20, 2, 1);
    if (align >= 0) th_attr_int(g, n, "align_corners", align);
    tci_tensor in[2] = {th_tensor(F, 3, theta_dims, theta), th_tensor(I64, 1, &size_len, size)};
    return th_run(g, n, in, out);
}

START_TEST(test_affine_grid) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* x scaled by 2 and shifted by 1, y kept, over H 1 x W 2: x at -0.5 and 0.5 (pixel
     * centres), the single row's y at 0 */
    const float theta[6] = {2, 0, 1, 0, 1, 0};
    const int64_t td[] = {1, 2, 3}, size[] = {1, 3, 1, 2};
    tci_tensor out[1];
    ck_assert_tci_ok(run_affine(g, -1, theta, td, size, 4, out));
    th_assert_dims(&out[0], 4, (const int64_t[]){1, 1, 2, 2});
    th_assert_near(out[0].data, (const float[]){0, 0, 2, 0}, 4, 1e-6f);
    th_free(out, 1);
    /* align_corners: the ends at -1 and 1, a single row at -1 */
    ck_assert_tci_ok(run_affine(g, 1, theta, td, size, 4, out));
    th_assert_near(out[0].data, (const float[]){-1, -1, 3, -1}, 4, 1e-6f);
    th_free(out, 1);
    /* 3-D: (x, y, z) take W, H, D; z' = z + 0.5 over D 2 gives -0.5 + 0.5 and 0.5 + 0.5 */
    const float theta3[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0.5f};
    const int64_t td3[] = {1, 3, 4}, size3[] = {1, 1, 2, 1, 1};
    ck_assert_tci_ok(run_affine(g, 0, theta3, td3, size3, 5, out));
    th_assert_dims(&out[0], 5, (const int64_t[]){1, 2, 1, 1, 3});
    th_assert_near(out[0].data, (const float[]){0, 0, 0, 0, 0, 1}, 6, 1e-6f);
    th_free(out, 1);
    /* errors */
    const int64_t bad_len[] = {1, 3, 2};
    ck_assert_tci_error(run_affine(g, 0, theta, td, bad_len, 3, out), TCI_ERR_INVALID_MODEL,
                        "size has 3 entries; must be 4 (N, C, H, W) or 5");
    ck_assert_tci_error(run_affine(g, 0, theta, td, size3, 5, out), TCI_ERR_INVALID_MODEL,
                        "theta must be (N, 3, 4) for 3 spatial dims, got (1, 2, 3)");
    const int64_t two[] = {2, 3, 1, 2};
    ck_assert_tci_error(run_affine(g, 0, theta, td, two, 4, out), TCI_ERR_INVALID_MODEL,
                        "theta holds 1 matrices for a batch of 2");
    ir_node *n = th_node(g, "AffineGrid", 20, 2, 1);
    th_attr_int(g, n, "align_corners", 2);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL, "align_corners");
    n = th_node(g, "AffineGrid", 19, 2, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED, "from opset 20");
    /* before the size's values: the rank from its length, the batch from theta */
    tci_tensor ts = th_shape_only(F, 3, (const int64_t[]){5, 2, 3}),
               ss = th_shape_only(I64, 1, (const int64_t[]){4}), o[1];
    const tci_tensor *ins[2] = {&ts, &ss};
    n = th_node(g, "AffineGrid", 20, 2, 1);
    ck_assert_tci_ok(th_infer(g, n, ins, o));
    th_assert_dims(&o[0], 4, (const int64_t[]){5, -1, -1, 2});
    ir_graph_destroy(g);
}
END_TEST

/* GridSample planned for the GPU: one step, X, grid and Y dense, the attributes carried. */
START_TEST(test_grid_sample_gpu_step) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xd[4] = {2, 3, 5, 7}, gd[4] = {2, 4, 6, 2};
    ir_tensor *x = th_named(g, "x", F, 4, xd, NULL), *grid = th_named(g, "grid", F, 4, gd, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_graph_io(g, (ir_tensor *[]){x, grid}, 2, &y, 1);
    ir_node *n = th_node_io(g, "gs", "GridSample", 16, (ir_tensor *[]){x, grid}, 2, &y, 1);
    th_attr_string(g, n, "mode", "bicubic");
    th_attr_string(g, n, "padding_mode", "reflection");
    th_attr_int(g, n, "align_corners", 1);
    plan *p;
    ck_assert_tci_ok(th_plan_for_gpu(g, &p));
    ck_assert_int_eq(p->num_steps, 1);
    const plan_step *s = &p->steps[0];
    ck_assert_int_eq(s->kind, PLAN_STEP_GRID_SAMPLE);
    ck_assert_int_eq(s->u.grid_sample.n, 2);
    ck_assert_int_eq(s->u.grid_sample.c, 3);
    ck_assert_int_eq(s->u.grid_sample.r, 2);
    ck_assert_int_eq(s->u.grid_sample.in[0], 5);
    ck_assert_int_eq(s->u.grid_sample.in[1], 7);
    ck_assert_int_eq(s->u.grid_sample.out[0], 4);
    ck_assert_int_eq(s->u.grid_sample.out[1], 6);
    ck_assert_int_eq(s->u.grid_sample.mode, GS_CUBIC);
    ck_assert_int_eq(s->u.grid_sample.padding, GS_REFLECTION);
    ck_assert(s->u.grid_sample.align_corners);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(p->tensors[s->inputs[i]].layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(p->tensors[s->outputs[0]].layout, PLAN_LAYOUT_DENSE);
    const plan_tensor *yt = &p->tensors[s->outputs[0]];
    ck_assert_int_eq(yt->rank, 4);
    ck_assert_int_eq(yt->dims[2], 4);
    ck_assert_int_eq(yt->dims[3], 6);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("grid");
    TCase *t = tcase_create("grid");
    tcase_add_test(t, test_affine_grid);
    tcase_add_test(t, test_grid_sample_gpu_step);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
