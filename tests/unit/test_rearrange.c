/* The rearrange family (Tile, DepthToSpace, SpaceToDepth, Trilu): parse errors, shape inference,
 * the CPU reference on small cases against hand-written results, and the GPU steps they lower to
 * (one strided copy whose view reproduces the reference). */
#include <stdio.h>
#include <string.h>

#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

static tci_status run_space(const char *op, int opset, int64_t blocksize, const char *mode,
                            const tci_tensor *x, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, opset, 1, 1);
    if (blocksize) th_attr_int(g, n, "blocksize", blocksize);
    if (mode) th_attr_string(g, n, "mode", mode);
    tci_status st = th_run(g, n, x, out);
    ir_graph_destroy(g);
    return st;
}

START_TEST(test_depth_to_space) {
    /* x (1, 8, 1, 1) = 0..7, blocksize 2: C' = 2 */
    float x[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t xd[4] = {1, 8, 1, 1}, yd[4] = {1, 2, 2, 2};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 4, xd, x), out;
    /* DCR: y[c', b1, b2] = x[(b1 * 2 + b2) * C' + c'] */
    ck_assert_tci_ok(run_space("DepthToSpace", 13, 2, NULL, &in, &out));
    th_assert_dims(&out, 4, yd);
    const float dcr[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    th_assert_near(out.data, dcr, 8, 0);
    th_free(&out, 1);
    /* CRD: y[c', b1, b2] = x[c' * 4 + b1 * 2 + b2] */
    ck_assert_tci_ok(run_space("DepthToSpace", 13, 2, "CRD", &in, &out));
    th_assert_near(out.data, x, 8, 0);
    th_free(&out, 1);
    /* opset 1 has no mode attribute */
    ck_assert_tci_error(run_space("DepthToSpace", 1, 2, "CRD", &in, &out), TCI_ERR_UNSUPPORTED,
                        "mode");
    ck_assert_tci_error(run_space("DepthToSpace", 13, 2, "XYZ", &in, &out), TCI_ERR_UNSUPPORTED,
                        "mode 'XYZ'");
    ck_assert_tci_error(run_space("DepthToSpace", 13, 0, NULL, &in, &out), TCI_ERR_INVALID_MODEL,
                        "'blocksize' is required");
    ck_assert_tci_error(run_space("DepthToSpace", 13, 3, NULL, &in, &out), TCI_ERR_INVALID_MODEL,
                        "channels (8) are not a multiple of blocksize^2 (9)");
}
END_TEST

START_TEST(test_space_to_depth_round_trip) {
    /* x (1, 2, 4, 6): SpaceToDepth then DepthToSpace of the same mode gives x back */
    float x[48];
    for (int i = 0; i < 48; i++) x[i] = (float)i;
    int64_t xd[4] = {1, 2, 4, 6}, sd[4] = {1, 8, 2, 3};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 4, xd, x), mid, back;
    for (int crd = 0; crd <= 1; crd++) {
        const char *mode = crd ? "CRD" : "DCR";
        ck_assert_tci_ok(run_space("SpaceToDepth", 28, 2, mode, &in, &mid));
        th_assert_dims(&mid, 4, sd);
        ck_assert_tci_ok(run_space("DepthToSpace", 28, 2, mode, &mid, &back));
        th_assert_near(back.data, x, 48, 0);
        /* DCR channel b1*2*C + b2*C + c at (h', w') is x[c, 2h'+b1, 2w'+b2]; CRD c*4+b1*2+b2 */
        const float *m = mid.data;
        int ch = crd ? 1 * 4 + 1 * 2 + 0 : 1 * 2 * 2 + 0 * 2 + 1; /* c=1, b1=1, b2=0 */
        ck_assert_float_eq(m[(ch * 2 + 1) * 3 + 2], x[(1 * 4 + 3) * 6 + 4]);
        th_free(&mid, 1);
        th_free(&back, 1);
    }
    /* before opset 28 SpaceToDepth has no mode */
    ck_assert_tci_error(run_space("SpaceToDepth", 13, 2, "CRD", &in, &mid), TCI_ERR_UNSUPPORTED,
                        "mode");
    ck_assert_tci_error(run_space("SpaceToDepth", 13, 4, NULL, &in, &mid), TCI_ERR_INVALID_MODEL,
                        "not multiples of blocksize 4");
    int64_t d3[3] = {2, 4, 6};
    tci_tensor r3 = th_tensor(TCI_DTYPE_FLOAT, 3, d3, x);
    ck_assert_tci_error(run_space("SpaceToDepth", 13, 2, NULL, &r3, &mid), TCI_ERR_INVALID_MODEL,
                        "input must be 4-D");
}
END_TEST

static tci_status run_tile(const tci_tensor *x, const int64_t *reps, int64_t n, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *node = th_node(g, "Tile", 13, 2, 1);
    tci_tensor in[2] = {*x, th_tensor(TCI_DTYPE_INT64, 1, &n, reps)};
    tci_status st = th_run(g, node, in, out);
    ir_graph_destroy(g);
    return st;
}

START_TEST(test_tile) {
    int32_t x[6] = {1, 2, 3, 4, 5, 6};
    int64_t xd[2] = {2, 3}, reps[2] = {2, 2}, yd[2] = {4, 6};
    tci_tensor in = th_tensor(TCI_DTYPE_INT32, 2, xd, x), out;
    ck_assert_tci_ok(run_tile(&in, reps, 2, &out));
    th_assert_dims(&out, 2, yd);
    const int32_t want[24] = {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6,
                              1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6};
    ck_assert_mem_eq(out.data, want, sizeof want);
    th_free(&out, 1);
    reps[0] = 0; /* an empty output */
    ck_assert_tci_ok(run_tile(&in, reps, 2, &out));
    ck_assert_int_eq(out.dims[0], 0);
    th_free(&out, 1);
    reps[0] = -1;
    ck_assert_tci_error(run_tile(&in, reps, 2, &out), TCI_ERR_INVALID_MODEL,
                        "repeats[0] is negative (-1)");
    ck_assert_tci_error(run_tile(&in, reps, 1, &out), TCI_ERR_INVALID_MODEL,
                        "repeats has 1 entries for an input of rank 2");
}
END_TEST

static tci_status run_trilu(const tci_tensor *x, int upper, const int64_t *k, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Trilu", 14, k ? 2 : 1, 1);
    if (upper >= 0) th_attr_int(g, n, "upper", upper);
    tci_tensor in[2] = {*x, k ? th_tensor(TCI_DTYPE_INT64, 0, NULL, k) : *x};
    tci_status st = th_run(g, n, in, out);
    ir_graph_destroy(g);
    return st;
}

START_TEST(test_trilu) {
    /* 2 batches of 3x4 */
    float x[24];
    for (int i = 0; i < 24; i++) x[i] = (float)(i + 1);
    int64_t xd[3] = {2, 3, 4};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 3, xd, x), out;
    ck_assert_tci_ok(run_trilu(&in, -1, NULL, &out)); /* upper by default, k 0 */
    th_assert_dims(&out, 3, xd);
    const float upper0[12] = {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12};
    th_assert_near(out.data, upper0, 12, 0);
    const float upper0b[12] = {13, 14, 15, 16, 0, 18, 19, 20, 0, 0, 23, 24};
    th_assert_near((float *)out.data + 12, upper0b, 12, 0);
    th_free(&out, 1);
    int64_t k = -1;
    ck_assert_tci_ok(run_trilu(&in, 0, &k, &out)); /* lower, below the diagonal by one */
    const float lower_m1[12] = {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0};
    th_assert_near(out.data, lower_m1, 12, 0);
    th_free(&out, 1);
    k = 2;
    ck_assert_tci_ok(run_trilu(&in, 1, &k, &out));
    const float upper2[12] = {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0};
    th_assert_near(out.data, upper2, 12, 0);
    th_free(&out, 1);
    ck_assert_tci_error(run_trilu(&in, 2, NULL, &out), TCI_ERR_INVALID_MODEL, "upper");
    int64_t d1[1] = {24};
    tci_tensor flat = th_tensor(TCI_DTYPE_FLOAT, 1, d1, x);
    ck_assert_tci_error(run_trilu(&flat, 1, NULL, &out), TCI_ERR_INVALID_MODEL,
                        "input must have rank >= 2, it has 1");
}
END_TEST

/* ---- GPU plans (built on the CPU) ---- */

static plan *plan_one(ir_graph *g, ir_tensor *x, ir_tensor *y) {
    th_graph_io(g, &x, 1, &y, 1);
    plan *p;
    ck_assert_tci_ok(th_plan_for_gpu(g, &p));
    return p;
}

static const plan_step *only_step(const plan *p, plan_step_kind kind) {
    ck_assert_int_eq(p->num_steps, 1);
    ck_assert_int_eq(p->steps[0].kind, kind);
    return &p->steps[0];
}

START_TEST(test_copy_views_match_reference) {
    float x[48];
    for (int i = 0; i < 48; i++) x[i] = (float)i;
    /* 0: SpaceToDepth (DCR), 1: DepthToSpace CRD, 2: Tile, 3: DepthToSpace DCR */
    for (int op = 0; op < 4; op++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int64_t xd[4] = {1, 8, 2, 2}, td[3] = {2, 3, 8}, reps[3] = {3, 1, 2}, three = 3;
        ir_tensor *xt = op == 2 ? th_named(g, "x", TCI_DTYPE_FLOAT, 3, td, NULL)
                                : th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
        ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
        ir_node *n;
        if (op == 2) {
            ir_tensor *r = th_named(g, "r", TCI_DTYPE_INT64, 1, &three, reps);
            n = th_node_io(g, "n", "Tile", 13, (ir_tensor *[]){xt, r}, 2, &y, 1);
        } else {
            n = th_node_io(g, "n", op ? "DepthToSpace" : "SpaceToDepth", 13, &xt, 1, &y, 1);
            th_attr_int(g, n, "blocksize", 2);
            if (op == 1) th_attr_string(g, n, "mode", "CRD");
        }
        plan *p = plan_one(g, xt, y);
        const plan_step *s = only_step(p, PLAN_STEP_COPY);
        float got[288], *want = NULL;
        tci_tensor in[2], out;
        ir_tensor_view(xt, &in[0]);
        in[0].data = x;
        if (op == 2) {
            in[1] = th_tensor(TCI_DTYPE_INT64, 1, &three, reps);
            ck_assert_tci_ok(op_run_node(n, (const tci_tensor *[]){&in[0], &in[1]},
                                         (tci_tensor *[]){&out}));
        } else {
            ck_assert_tci_ok(op_run_node(n, (const tci_tensor *[]){&in[0]},
                                         (tci_tensor *[]){&out}));
        }
        want = out.data;
        int64_t count = 1;
        for (int d = 0; d < out.rank; d++) count *= out.dims[d];
        ck_assert_int_le(count, 288);
        memset(got, 0xff, sizeof got);
        th_replay_copy(s, x, got);
        th_assert_near(got, want, (size_t)count, 0);
        th_free(&out, 1);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_trilu_gpu_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {2, 2, 5, 3}, k = -2;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *kt = th_named(g, "k", TCI_DTYPE_INT64, 0, NULL, &k);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_node *n = th_node_io(g, "t", "Trilu", 14, (ir_tensor *[]){x, kt}, 2, &y, 1);
    th_attr_int(g, n, "upper", 0);
    plan *p = plan_one(g, x, y);
    const plan_step *s = only_step(p, PLAN_STEP_TRILU);
    ck_assert_int_eq(s->u.trilu.batch, 4);
    ck_assert_int_eq(s->u.trilu.rows, 5);
    ck_assert_int_eq(s->u.trilu.cols, 3);
    ck_assert_int_eq(s->u.trilu.k, -2);
    ck_assert(!s->u.trilu.upper);
    ck_assert_int_eq(s->u.trilu.elem_size, 2);
    ck_assert_int_eq(s->num_inputs, 1);
    plan_destroy(p);
    ir_graph_destroy(g);
    /* k computed at run time: the step reads it from its second input */
    ck_assert_tci_ok(ir_graph_create(&g));
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    kt = th_named(g, "k", TCI_DTYPE_INT64, 0, NULL, NULL);
    y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_node_io(g, "t", "Trilu", 14, (ir_tensor *[]){x, kt}, 2, &y, 1);
    th_graph_io(g, (ir_tensor *[]){x, kt}, 2, &y, 1);
    ck_assert_tci_ok(th_plan_for_gpu(g, &p));
    s = only_step(p, PLAN_STEP_TRILU);
    ck_assert_int_eq(s->num_inputs, 2);
    const plan_tensor *k_dev = &p->tensors[s->inputs[1]];
    ck_assert_int_eq(k_dev->dtype, TCI_DTYPE_INT64);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rearrange");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_depth_to_space);
    tcase_add_test(tc, test_space_to_depth_round_trip);
    tcase_add_test(tc, test_tile);
    tcase_add_test(tc, test_trilu);
    tcase_add_test(tc, test_copy_views_match_reference);
    tcase_add_test(tc, test_trilu_gpu_lowering);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
