/* BatchNormalization, LayerNormalization, Softmax, LogSoftmax: hand-computed results, opset
 * differences, shape inference, error paths. */
#include <math.h>

#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT


/* ---- BatchNormalization ---- */

/* X (1,2,1,2); channel 0: (x-1)/2, channel 1: (x-2)*2+1 */
static const float bn_x[] = {1, 2, 3, 4}, bn_scale[] = {1, 2}, bn_bias[] = {0, 1},
                   bn_mean[] = {1, 2}, bn_var[] = {4, 1}, bn_want[] = {0, 0.5f, 3, 5};
static const int64_t bn_xd[] = {1, 2, 1, 2}, bn_cd[] = {2};

static void bn_inputs(tci_tensor *in) {
    in[0] = th_tensor(F, 4, bn_xd, bn_x);
    in[1] = th_tensor(F, 1, bn_cd, bn_scale);
    in[2] = th_tensor(F, 1, bn_cd, bn_bias);
    in[3] = th_tensor(F, 1, bn_cd, bn_mean);
    in[4] = th_tensor(F, 1, bn_cd, bn_var);
}

START_TEST(test_batchnorm_every_version) {
    const int opsets[] = {1, 6, 7, 9, 14, 15, 28};
    const int since[] = {1, 6, 7, 9, 14, 15, 15};
    for (int v = 0; v < 7; v++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "BatchNormalization", opsets[v], 5, 1);
        th_attr_float(g, n, "epsilon", 0.0f);
        th_attr_float(g, n, "momentum", 0.5f);
        if (opsets[v] == 1) {
            const int64_t consumed[] = {0, 0, 0, 1, 1};
            th_attr_ints(g, n, "consumed_inputs", consumed, 5);
        }
        if (opsets[v] < 7) th_attr_int(g, n, "is_test", 1);
        if (opsets[v] < 9) th_attr_int(g, n, "spatial", 1);
        if (opsets[v] >= 14) th_attr_int(g, n, "training_mode", 0);
        tci_tensor in[5], out[1];
        bn_inputs(in);
        ck_assert_tci_ok(th_run(g, n, in, out));
        ck_assert_int_eq(n->since_version, since[v]);
        th_assert_dims(&out[0], 4, bn_xd);
        th_assert_near(out[0].data, bn_want, 4, 1e-6f);
        th_free(out, 1);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_batchnorm_epsilon_and_rank2) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "BatchNormalization", 15, 5, 1);
    th_attr_float(g, n, "epsilon", 0.5f);
    /* X (2,2) as after a Gemm: (x - mean) / sqrt(var + 0.5) * scale + B */
    const float x[] = {1, 2, 3, 4}, var[] = {0.5f, 3.5f};
    const int64_t xd[] = {2, 2};
    tci_tensor in[5], out[1];
    bn_inputs(in);
    in[0] = th_tensor(F, 2, xd, x);
    in[4] = th_tensor(F, 1, bn_cd, var);
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[] = {0, 1, 2, 3};
    th_assert_near(out[0].data, want, 4, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_batchnorm_non_spatial) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "BatchNormalization", 7, 5, 1);
    th_attr_int(g, n, "spatial", 0);
    th_attr_float(g, n, "epsilon", 0.0f);
    /* statistics per element of dims[1:] = (2,2) */
    const float x[] = {1, 2, 3, 4}, ones[] = {1, 1, 1, 1}, zeros[] = {0, 0, 0, 0},
                mean[] = {0, 1, 2, 3}, var[] = {1, 1, 4, 4};
    const int64_t xd[] = {1, 2, 2}, pd[] = {2, 2};
    tci_tensor in[5] = {th_tensor(F, 3, xd, x), th_tensor(F, 2, pd, ones),
                        th_tensor(F, 2, pd, zeros), th_tensor(F, 2, pd, mean),
                        th_tensor(F, 2, pd, var)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[] = {1, 1, 0.5f, 0.5f};
    th_assert_near(out[0].data, want, 4, 1e-6f);
    th_free(out, 1);

    /* the same statistics with spatial=1 do not fit */
    ir_node *s = th_node(g, "BatchNormalization", 7, 5, 1);
    ck_assert_tci_error(th_run(g, s, in, out), TCI_ERR_INVALID_MODEL,
                        "input scale has shape 2x2, expected 2 for X of shape 1x2x2");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_batchnorm_training_outputs_checked) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *e = th_node(g, "BatchNormalization", 14, 5, 3);
    ck_assert_tci_error(op_prepare_node(e, g->arena), TCI_ERR_INVALID_MODEL,
                        "outputs running_mean/running_var are only valid with training_mode=1");
    ir_node *old = th_node(g, "BatchNormalization", 9, 5, 5);
    old->outputs[1] = NULL; /* omitted optional outputs do not count */
    old->outputs[2] = NULL;
    ck_assert_tci_error(op_prepare_node(old, g->arena), TCI_ERR_UNSUPPORTED,
                        "training mode (2 statistics outputs) is not supported");
    ir_node *many = th_node(g, "BatchNormalization", 15, 5, 4);
    ck_assert_tci_error(op_prepare_node(many, g->arena), TCI_ERR_INVALID_MODEL,
                        "has 4 outputs, expected 1 to 3");
    ir_graph_destroy(g);
}
END_TEST

/* training_mode=1: X (2,2,1); channel 0 {1,3}: mean 2, var 1; channel 1 {2,6}: mean 4, var 4
 * (biased). running = input * 0.9 + batch * 0.1. */
START_TEST(test_batchnorm_training_mode) {
    const float x[] = {1, 2, 3, 6}, scale[] = {1, 2}, bias[] = {0, 1}, mean[] = {0, 0},
                var[] = {1, 1};
    const float want[] = {-1, -1, 1, 3}, want_mean[] = {0.2f, 0.4f}, want_var[] = {1.0f, 1.3f};
    const int64_t xd[] = {2, 2, 1}, cd[] = {2};
    for (int outputs = 1; outputs <= 3; outputs += 2) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "BatchNormalization", 15, 5, outputs);
        th_attr_int(g, n, "training_mode", 1);
        th_attr_float(g, n, "epsilon", 0.0f);
        tci_tensor in[5] = {th_tensor(F, 3, xd, x), th_tensor(F, 1, cd, scale),
                            th_tensor(F, 1, cd, bias), th_tensor(F, 1, cd, mean),
                            th_tensor(F, 1, cd, var)};
        tci_tensor out[3];
        ck_assert_tci_ok(th_run(g, n, in, out));
        th_assert_dims(&out[0], 3, xd);
        th_assert_near(out[0].data, want, 4, 1e-6f);
        if (outputs == 3) {
            th_assert_dims(&out[1], 1, cd);
            th_assert_dims(&out[2], 1, cd);
            th_assert_near(out[1].data, want_mean, 2, 1e-6f);
            th_assert_near(out[2].data, want_var, 2, 1e-6f);
        }
        th_free(out, outputs);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_batchnorm_attribute_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *sp = th_node(g, "BatchNormalization", 9, 5, 1);
    th_attr_int(g, sp, "spatial", 1);
    ck_assert_tci_error(op_prepare_node(sp, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'spatial'");
    ir_node *it = th_node(g, "BatchNormalization", 7, 5, 1);
    th_attr_int(g, it, "is_test", 1);
    ck_assert_tci_error(op_prepare_node(it, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'is_test'");
    ir_node *tm = th_node(g, "BatchNormalization", 13, 5, 1);
    th_attr_int(g, tm, "training_mode", 0);
    ck_assert_tci_error(op_prepare_node(tm, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'training_mode'");
    ir_node *bad = th_node(g, "BatchNormalization", 7, 5, 1);
    th_attr_int(g, bad, "spatial", 3);
    ck_assert_tci_error(op_prepare_node(bad, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'spatial' must be 0 or 1, got 3");
    ir_node *ci = th_node(g, "BatchNormalization", 6, 5, 1);
    th_attr_ints(g, ci, "consumed_inputs", NULL, 0);
    ck_assert_tci_error(op_prepare_node(ci, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'consumed_inputs'");
    ir_node *eps = th_node(g, "BatchNormalization", 15, 5, 1);
    th_attr_int(g, eps, "epsilon", 1);
    ck_assert_tci_error(op_prepare_node(eps, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'epsilon' is int, expected float");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_batchnorm_shape_errors_and_infer) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "BatchNormalization", 15, 5, 1);
    tci_tensor out[1];
    const int64_t xd[] = {-1, 3, -1}, c3[] = {3}, c4[] = {4}, cu[] = {-1};
    tci_tensor x = th_shape_only(F, 3, xd), p3 = th_shape_only(F, 1, c3), p4 = th_shape_only(F, 1, c4),
               pu = th_shape_only(F, 1, cu), unk = th_shape_only(F, -1, NULL),
               scalar = th_shape_only(F, 0, NULL),
               dbl = th_shape_only(TCI_DTYPE_DOUBLE, 1, c3);
    const tci_tensor *ok[] = {&x, &p3, &pu, &unk, &p3};
    ck_assert_tci_ok(th_infer(g, n, ok, out));
    th_assert_dims(&out[0], 3, xd);
    ck_assert_int_eq(out[0].dtype, F);
    const tci_tensor *all_unknown[] = {&unk, &unk, &unk, &unk, &unk};
    ck_assert_tci_ok(th_infer(g, n, all_unknown, out));
    ck_assert_int_eq(out[0].rank, -1);
    const tci_tensor *bad[] = {&x, &p3, &p3, &p4, &p3};
    ck_assert_tci_error(th_infer(g, n, bad, out), TCI_ERR_INVALID_MODEL,
                        "input mean has shape 4, expected 3 for X of shape ?x3x?");
    const tci_tensor *rank0[] = {&scalar, &p3, &p3, &p3, &p3};
    ck_assert_tci_error(th_infer(g, n, rank0, out), TCI_ERR_INVALID_MODEL,
                        "input X must have rank >= 1");
    const tci_tensor *d[] = {&x, &p3, &p3, &p3, &dbl};
    ck_assert_tci_error(th_infer(g, n, d, out), TCI_ERR_UNSUPPORTED,
                        "input 4 has unsupported dtype double");
    ir_graph_destroy(g);
}
END_TEST

/* ---- InstanceNormalization, GroupNormalization ---- */

/* X (1,2,2): channel 0 {1,3} and channel 1 {0,4} both normalise to {-1,1} (epsilon 0). */
START_TEST(test_instancenorm_every_version) {
    const float x[] = {1, 3, 0, 4}, scale[] = {2, 1}, bias[] = {0, 1}, want[] = {-2, 2, 0, 2};
    const int64_t xd[] = {1, 2, 2}, cd[] = {2};
    const int opsets[] = {1, 6, 22, 28}, since[] = {1, 6, 22, 22};
    for (int v = 0; v < 4; v++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "InstanceNormalization", opsets[v], 3, 1);
        th_attr_float(g, n, "epsilon", 0.0f);
        tci_tensor in[3] = {th_tensor(F, 3, xd, x), th_tensor(F, 1, cd, scale),
                            th_tensor(F, 1, cd, bias)};
        tci_tensor out[1];
        ck_assert_tci_ok(th_run(g, n, in, out));
        ck_assert_int_eq(n->since_version, since[v]);
        th_assert_dims(&out[0], 3, xd);
        th_assert_near(out[0].data, want, 4, 1e-6f);
        th_free(out, 1);
        ir_graph_destroy(g);
    }
}
END_TEST

/* Epsilon is added to the variance: one channel {0, 2} has variance 1. */
START_TEST(test_instancenorm_epsilon_rank4) {
    const float x[] = {0, 2, 5, 5}, one[] = {1}, zero[] = {0};
    const int64_t xd[] = {2, 1, 1, 2}, cd[] = {1};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "InstanceNormalization", 6, 3, 1);
    th_attr_float(g, n, "epsilon", 3.0f);
    tci_tensor in[3] = {th_tensor(F, 4, xd, x), th_tensor(F, 1, cd, one),
                        th_tensor(F, 1, cd, zero)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[] = {-0.5f, 0.5f, 0, 0}; /* the second image is constant: 0 */
    th_assert_near(out[0].data, want, 4, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

/* X (1,4,1) in 2 groups: {1,3} and {0,4} normalise to {-1,1}. Opset 18 scales per group, 21 per
 * channel. */
START_TEST(test_groupnorm_18_and_21) {
    const float x[] = {1, 3, 0, 4};
    const int64_t xd[] = {1, 4, 1}, gd[] = {2}, cd[] = {4};
    const float s18[] = {2, 3}, b18[] = {0, 1}, want18[] = {-2, 2, -2, 4};
    const float s21[] = {1, 2, 3, 4}, b21[] = {0, 0, 1, 1}, want21[] = {-1, 2, -2, 5};
    for (int v = 0; v < 2; v++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "GroupNormalization", v ? 21 : 18, 3, 1);
        th_attr_float(g, n, "epsilon", 0.0f);
        th_attr_int(g, n, "num_groups", 2);
        if (v) th_attr_int(g, n, "stash_type", 1);
        tci_tensor in[3] = {th_tensor(F, 3, xd, x), th_tensor(F, 1, v ? cd : gd, v ? s21 : s18),
                            th_tensor(F, 1, v ? cd : gd, v ? b21 : b18)};
        tci_tensor out[1];
        ck_assert_tci_ok(th_run(g, n, in, out));
        ck_assert_int_eq(n->since_version, v ? 21 : 18);
        th_assert_near(out[0].data, v ? want21 : want18, 4, 1e-6f);
        th_free(out, 1);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_groupnorm_errors_and_infer) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *missing = th_node(g, "GroupNormalization", 21, 3, 1);
    ck_assert_tci_error(op_prepare_node(missing, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'num_groups' is required");
    ir_node *zero = th_node(g, "GroupNormalization", 21, 3, 1);
    th_attr_int(g, zero, "num_groups", 0);
    ck_assert_tci_error(op_prepare_node(zero, g->arena), TCI_ERR_INVALID_MODEL,
                        "num_groups is 0; must be >= 1");
    ir_node *stash = th_node(g, "GroupNormalization", 21, 3, 1);
    th_attr_int(g, stash, "num_groups", 2);
    th_attr_int(g, stash, "stash_type", 10);
    ck_assert_tci_error(op_prepare_node(stash, g->arena), TCI_ERR_UNSUPPORTED,
                        "stash_type=10 is not supported");
    ir_node *stash18 = th_node(g, "GroupNormalization", 18, 3, 1);
    th_attr_int(g, stash18, "num_groups", 2);
    th_attr_int(g, stash18, "stash_type", 1);
    ck_assert_tci_error(op_prepare_node(stash18, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'stash_type'");
    ir_node *consumed = th_node(g, "InstanceNormalization", 6, 3, 1);
    th_attr_ints(g, consumed, "consumed_inputs", (const int64_t[]){0, 0, 0}, 3);
    ck_assert_tci_error(op_prepare_node(consumed, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'consumed_inputs'");

    /* shapes: num_groups must divide C; scale holds groups (18) or channels (21) values */
    const int64_t xd[] = {2, 6, 3, 3}, g3[] = {3}, c6[] = {6};
    ir_node *n18 = th_node(g, "GroupNormalization", 18, 3, 1);
    th_attr_int(g, n18, "num_groups", 3);
    ck_assert_tci_ok(op_prepare_node(n18, g->arena));
    tci_tensor x = th_shape_only(F, 4, xd), s3 = th_shape_only(F, 1, g3),
               s6 = th_shape_only(F, 1, c6), out;
    ck_assert_tci_ok(th_infer(g, n18, (const tci_tensor *const[]){&x, &s3, &s3}, &out));
    th_assert_dims(&out, 4, xd);
    ck_assert_tci_error(th_infer(g, n18, (const tci_tensor *const[]){&x, &s6, &s3}, &out),
                        TCI_ERR_INVALID_MODEL, "input scale has shape 6, expected (3)");
    ir_node *n21 = th_node(g, "GroupNormalization", 21, 3, 1);
    th_attr_int(g, n21, "num_groups", 3);
    ck_assert_tci_ok(op_prepare_node(n21, g->arena));
    ck_assert_tci_ok(th_infer(g, n21, (const tci_tensor *const[]){&x, &s6, &s6}, &out));
    ck_assert_tci_error(th_infer(g, n21, (const tci_tensor *const[]){&x, &s6, &s3}, &out),
                        TCI_ERR_INVALID_MODEL, "input B has shape 3, expected (6)");
    ir_node *n4 = th_node(g, "GroupNormalization", 21, 3, 1);
    th_attr_int(g, n4, "num_groups", 4);
    ck_assert_tci_ok(op_prepare_node(n4, g->arena));
    ck_assert_tci_error(th_infer(g, n4, (const tci_tensor *const[]){&x, &s6, &s6}, &out),
                        TCI_ERR_INVALID_MODEL, "num_groups 4 does not divide the 6 channels");
    /* InstanceNormalization needs N x C x D1...: rank 2 is refused */
    const int64_t d2[] = {2, 6};
    tci_tensor x2 = th_shape_only(F, 2, d2);
    ir_node *in = th_node(g, "InstanceNormalization", 22, 3, 1);
    ck_assert_tci_ok(op_prepare_node(in, g->arena));
    ck_assert_tci_error(th_infer(g, in, (const tci_tensor *const[]){&x2, &s6, &s6}, &out),
                        TCI_ERR_INVALID_MODEL,
                        "input has rank 2; expected N x C x D1 ... (rank >= 3)");
    ir_graph_destroy(g);
}
END_TEST

/* ---- LayerNormalization ---- */

static const float ln_x[] = {1, 2, 3, 2, 4, 6};
static const int64_t ln_xd[] = {2, 3};

START_TEST(test_layernorm_last_axis) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "LayerNormalization", 17, 3, 3);
    th_attr_float(g, n, "epsilon", 0.0f);
    const float scale[] = {1, 1, 2}, bias[] = {0, 0, 1};
    const int64_t cd[] = {3};
    tci_tensor in[3] = {th_tensor(F, 2, ln_xd, ln_x), th_tensor(F, 1, cd, scale),
                        th_tensor(F, 1, cd, bias)};
    tci_tensor out[3];
    ck_assert_tci_ok(th_run(g, n, in, out));
    /* row 0: mean 2, var 2/3; row 1: mean 4, var 8/3 */
    const float want[] = {-1.2247449f, 0, 3.4494897f, -1.2247449f, 0, 3.4494897f};
    const float want_mean[] = {2, 4}, want_inv[] = {1.2247449f, 0.61237244f};
    const int64_t stat_dims[] = {2, 1};
    th_assert_dims(&out[0], 2, ln_xd);
    th_assert_near(out[0].data, want, 6, 1e-6f);
    th_assert_dims(&out[1], 2, stat_dims);
    ck_assert_int_eq(out[1].dtype, F);
    th_assert_near(out[1].data, want_mean, 2, 1e-6f);
    th_assert_dims(&out[2], 2, stat_dims);
    th_assert_near(out[2].data, want_inv, 2, 1e-6f);
    th_free(out, 3);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_layernorm_axis0_no_bias_one_output) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "LayerNormalization", 21, 2, 1);
    th_attr_int(g, n, "axis", 0);
    th_attr_float(g, n, "epsilon", 0.0f);
    /* whole tensor: mean 3, var 16/6; Scale (3) broadcast over both rows */
    const float scale[] = {1, 2, 1};
    const int64_t cd[] = {3};
    tci_tensor in[2] = {th_tensor(F, 2, ln_xd, ln_x), th_tensor(F, 1, cd, scale)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float inv = 0.61237244f;
    const float want[] = {-2 * inv, -2 * inv, 0, -inv, 2 * inv, 3 * inv};
    th_assert_near(out[0].data, want, 6, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_layernorm_scale_per_row) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "LayerNormalization", 17, 3, 3);
    th_attr_float(g, n, "epsilon", 0.0f);
    n->outputs[1] = NULL;
    /* Scale (2,3) and B (2,1) vary between rows */
    const float scale[] = {1, 1, 1, 2, 2, 2}, bias[] = {0, 10};
    const int64_t sd[] = {2, 3}, bd[] = {2, 1};
    tci_tensor in[3] = {th_tensor(F, 2, ln_xd, ln_x), th_tensor(F, 2, sd, scale),
                        th_tensor(F, 2, bd, bias)};
    tci_tensor out[3];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[] = {-1.2247449f, 0, 1.2247449f, 10 - 2.4494897f, 10, 10 + 2.4494897f};
    th_assert_near(out[0].data, want, 6, 1e-5f);
    const float want_inv[] = {1.2247449f, 0.61237244f};
    th_assert_near(out[2].data, want_inv, 2, 1e-6f);
    th_free(out, 3);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_layernorm_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *st = th_node(g, "LayerNormalization", 17, 2, 1);
    th_attr_int(g, st, "stash_type", 11);
    ck_assert_tci_error(op_prepare_node(st, g->arena), TCI_ERR_UNSUPPORTED,
                        "stash_type=11 is not supported (only 1, float)");
    ir_node *old = th_node(g, "LayerNormalization", 16, 2, 1);
    ck_assert_tci_error(op_prepare_node(old, g->arena), TCI_ERR_UNSUPPORTED,
                        "older than tcinfer supports (from opset 17)");
    ir_node *at = th_node(g, "LayerNormalization", 17, 2, 1);
    th_attr_int(g, at, "axes", 1);
    ck_assert_tci_error(op_prepare_node(at, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'axes'");

    tci_tensor out[3];
    const int64_t c3[] = {3}, c4[] = {4}, c0[] = {0}, xe[] = {2, 0};
    tci_tensor x = th_shape_only(F, 2, ln_xd), s3 = th_shape_only(F, 1, c3), s4 = th_shape_only(F, 1, c4),
               s0 = th_shape_only(F, 1, c0), empty = th_shape_only(F, 2, xe),
               h = th_shape_only(TCI_DTYPE_FLOAT16, 2, ln_xd);
    ir_node *ax = th_node(g, "LayerNormalization", 17, 2, 1);
    th_attr_int(g, ax, "axis", 2);
    const tci_tensor *in1[] = {&x, &s3};
    ck_assert_tci_error(th_infer(g, ax, in1, out), TCI_ERR_INVALID_MODEL,
                        "axis 2 out of range for rank 2");
    ir_node *n = th_node(g, "LayerNormalization", 17, 3, 1);
    const tci_tensor *in2[] = {&x, &s3, &s4};
    ck_assert_tci_error(th_infer(g, n, in2, out), TCI_ERR_INVALID_MODEL,
                        "B of shape 4 does not broadcast to 2x3");
    const tci_tensor *in3[] = {&x, &s4, NULL};
    ck_assert_tci_error(th_infer(g, n, in3, out), TCI_ERR_INVALID_MODEL,
                        "Scale of shape 4 does not broadcast to 2x3");
    const tci_tensor *in4[] = {&empty, &s0, NULL};
    ck_assert_tci_error(th_infer(g, n, in4, out), TCI_ERR_INVALID_MODEL,
                        "the normalized dims X.shape[1:] hold no elements");
    const tci_tensor *in5[] = {&h, &s3, NULL};
    ck_assert_tci_error(th_infer(g, n, in5, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype float16");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_layernorm_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "LayerNormalization", 17, 2, 3);
    th_attr_int(g, n, "axis", -2);
    tci_tensor out[3];
    const int64_t xd[] = {-1, 5, 4}, sd[] = {-1, 4};
    tci_tensor x = th_shape_only(F, 3, xd), s = th_shape_only(F, 2, sd), unk = th_shape_only(F, -1, NULL);
    const tci_tensor *in1[] = {&x, &s};
    ck_assert_tci_ok(th_infer(g, n, in1, out));
    th_assert_dims(&out[0], 3, xd);
    const int64_t stat[] = {-1, 1, 1};
    th_assert_dims(&out[1], 3, stat);
    th_assert_dims(&out[2], 3, stat);
    ck_assert_int_eq(out[2].dtype, F);
    const tci_tensor *in2[] = {&unk, &s};
    ck_assert_tci_ok(th_infer(g, n, in2, out));
    ck_assert_int_eq(out[0].rank, -1);
    ck_assert_int_eq(out[1].rank, -1);
    ck_assert_int_eq(out[1].dtype, F);
    ir_graph_destroy(g);
}
END_TEST

/* ---- Softmax, LogSoftmax ---- */

static void run_softmax_tol(const char *op, int opset, int64_t axis, bool set_axis, int rank,
                            const int64_t *dims, const float *x, const float *want, size_t count,
                            float tol) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, opset, 1, 1);
    if (set_axis) th_attr_int(g, n, "axis", axis);
    tci_tensor in[1] = {th_tensor(F, rank, dims, x)}, out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    th_assert_dims(&out[0], rank, dims);
    th_assert_near(out[0].data, want, count, tol);
    th_free(out, 1);
    ir_graph_destroy(g);
}

static void run_softmax(const char *op, int opset, int64_t axis, bool set_axis, int rank,
                        const int64_t *dims, const float *x, const float *want, size_t count) {
    run_softmax_tol(op, opset, axis, set_axis, rank, dims, x, want, count, 1e-6f);
}

static const float sm_x[] = {0, 1, 2, 3, 0, 0, 0, 0};
static const int64_t sm_d222[] = {2, 2, 2};

START_TEST(test_softmax_last_axis) {
    const float x[] = {0, 1, 2, 0, 0, 0};
    const int64_t d[] = {2, 3};
    const float t = 1.0f / 3;
    const float want[] = {0.09003057f, 0.24472847f, 0.66524096f, t, t, t};
    run_softmax("Softmax", 13, 0, false, 2, d, x, want, 6);
    run_softmax("Softmax", 13, -1, true, 2, d, x, want, 6);
    run_softmax("Softmax", 11, 1, false, 2, d, x, want, 6);
    const float log_want[] = {-2.40760596f, -1.40760596f, -0.40760596f,
                              -1.09861229f, -1.09861229f, -1.09861229f};
    run_softmax("LogSoftmax", 13, 0, false, 2, d, x, log_want, 6);
    run_softmax("LogSoftmax", 1, 0, false, 2, d, x, log_want, 6);
}
END_TEST

START_TEST(test_softmax_coerced_2d_before_13) {
    /* opset < 13, axis 1 of (2,2,2): each batch is one row of 4 */
    const float want[] = {0.0320586f, 0.08714432f, 0.23688282f, 0.64391426f,
                          0.25f,      0.25f,       0.25f,       0.25f};
    run_softmax("Softmax", 11, 0, false, 3, sm_d222, sm_x, want, 8);
    run_softmax("Softmax", 1, 1, true, 3, sm_d222, sm_x, want, 8);
    run_softmax("Softmax", 11, -2, true, 3, sm_d222, sm_x, want, 8);
    /* axis 0: the whole tensor is one row */
    const float s = 1 + 2.71828183f + 7.3890561f + 20.0855369f + 4;
    const float whole[] = {1 / s, 2.71828183f / s, 7.3890561f / s, 20.0855369f / s,
                           1 / s, 1 / s,           1 / s,          1 / s};
    run_softmax("Softmax", 11, 0, true, 3, sm_d222, sm_x, whole, 8);
}
END_TEST

START_TEST(test_softmax_inner_axis_from_13) {
    /* opset 13, axis 1 of (2,2,2): pairs (x[b,0,j], x[b,1,j]) */
    const float want[] = {0.11920292f, 0.11920292f, 0.88079708f, 0.88079708f,
                          0.5f,        0.5f,        0.5f,        0.5f};
    run_softmax("Softmax", 13, 1, true, 3, sm_d222, sm_x, want, 8);
    const float log_want[] = {-2.12692801f, -2.12692801f, -0.12692801f, -0.12692801f,
                              -0.69314718f, -0.69314718f, -0.69314718f, -0.69314718f};
    run_softmax("LogSoftmax", 13, -2, true, 3, sm_d222, sm_x, log_want, 8);
}
END_TEST

/* Softmax over a middle axis on the GPU: a copy putting the axis last, the row softmax and a
 * copy back, replayed on the host against the reference. */
START_TEST(test_softmax_inner_axis_gpu_steps) {
    for (int log = 0; log <= 1; log++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int64_t d[4] = {2, 3, 4, 5};
        ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, d, NULL);
        ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
        ir_node *n = th_node_io(g, "s", log ? "LogSoftmax" : "Softmax", 13, &x, 1, &y, 1);
        th_attr_int(g, n, "axis", 1);
        th_graph_io(g, &x, 1, &y, 1);
        plan *p;
        ck_assert_tci_ok(th_plan_for_gpu(g, &p));
        ck_assert_int_eq(p->num_steps, 3);
        ck_assert_int_eq(p->steps[0].kind, PLAN_STEP_COPY);
        ck_assert_int_eq(p->steps[1].kind, PLAN_STEP_SOFTMAX);
        ck_assert_int_eq(p->steps[2].kind, PLAN_STEP_COPY);
        float xv[120], t1[120], t2[120], got[120];
        for (int i = 0; i < 120; i++) xv[i] = 0.1f * (float)((i * 37) % 23) - 1.0f;
        th_replay_copy(&p->steps[0], xv, t1);
        const plan_step *sm = &p->steps[1];
        ck_assert_int_eq(sm->u.softmax.rows * sm->u.softmax.length, 120);
        for (int64_t r = 0; r < sm->u.softmax.rows; r++) {
            const float *row = t1 + r * sm->u.softmax.length;
            float m = row[0], sum = 0;
            for (int64_t i = 1; i < sm->u.softmax.length; i++) m = row[i] > m ? row[i] : m;
            for (int64_t i = 0; i < sm->u.softmax.length; i++) sum += expf(row[i] - m);
            for (int64_t i = 0; i < sm->u.softmax.length; i++)
                t2[r * sm->u.softmax.length + i] =
                    sm->u.softmax.log ? row[i] - m - logf(sum) : expf(row[i] - m) / sum;
        }
        th_replay_copy(&p->steps[2], t2, got);
        tci_tensor in, out;
        ir_tensor_view(x, &in);
        in.data = xv;
        ck_assert_tci_ok(op_run_node(n, (const tci_tensor *[]){&in}, (tci_tensor *[]){&out}));
        th_assert_near(got, out.data, 120, 1e-5f);
        th_free(&out, 1);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_softmax_stable_and_long) {
    const float big[] = {1000, 1000, -1000};
    const int64_t d3[] = {3};
    const float want[] = {0.5f, 0.5f, 0};
    run_softmax("Softmax", 13, 0, false, 1, d3, big, want, 3);
    /* the shift by the max keeps the small terms exact next to the large one */
    const float log_want[] = {-0.69314718f, -0.69314718f, -2000.6931f};
    run_softmax_tol("LogSoftmax", 13, 0, false, 1, d3, big, log_want, 3, 2e-4f);
    const float near[] = {1000, 1000, 999};
    const float near_want[] = {-0.86199480f, -0.86199480f, -1.86199480f};
    run_softmax("LogSoftmax", 13, 0, false, 1, d3, near, near_want, 3);
    /* a long row of equal values: every output is exactly 1/n */
    enum { N = 100000 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = 0.25f;
        y[i] = 1.0f / N;
    }
    const int64_t dn[] = {N};
    run_softmax("Softmax", 13, 0, false, 1, dn, x, y, N);
    /* empty tensor along the axis */
    const int64_t d0[] = {2, 0};
    run_softmax("Softmax", 13, 1, true, 2, d0, x, y, 0);
}
END_TEST

START_TEST(test_softmax_errors_and_infer) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t d[] = {2, -1};
    tci_tensor x = th_shape_only(F, 2, d), s = th_shape_only(F, 0, NULL), unk = th_shape_only(F, -1, NULL),
               dbl = th_shape_only(TCI_DTYPE_DOUBLE, 2, d);
    ir_node *n = th_node(g, "Softmax", 13, 1, 1);
    const tci_tensor *in1[] = {&x};
    ck_assert_tci_ok(th_infer(g, n, in1, out));
    th_assert_dims(&out[0], 2, d);
    const tci_tensor *in2[] = {&unk};
    ck_assert_tci_ok(th_infer(g, n, in2, out));
    ck_assert_int_eq(out[0].rank, -1);
    ck_assert_int_eq(out[0].dtype, F);
    const tci_tensor *in3[] = {&s};
    ck_assert_tci_error(th_infer(g, n, in3, out), TCI_ERR_INVALID_MODEL, "input must have rank >= 1");
    const tci_tensor *in4[] = {&dbl};
    ck_assert_tci_error(th_infer(g, n, in4, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype double");
    ir_node *ax = th_node(g, "LogSoftmax", 11, 1, 1);
    th_attr_int(g, ax, "axis", -3);
    ck_assert_tci_error(th_infer(g, ax, in1, out), TCI_ERR_INVALID_MODEL,
                        "axis -3 out of range for rank 2");
    ir_node *at = th_node(g, "Softmax", 13, 1, 1);
    th_attr_float(g, at, "beta", 1.0f);
    ck_assert_tci_error(op_prepare_node(at, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'beta'");
    ir_node *ar = th_node(g, "LogSoftmax", 13, 2, 1);
    ck_assert_tci_error(op_prepare_node(ar, g->arena), TCI_ERR_INVALID_MODEL,
                        "has 2 inputs, expected 1 to 1");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("norm");
    TCase *bn = tcase_create("batchnorm");
    tcase_add_test(bn, test_batchnorm_every_version);
    tcase_add_test(bn, test_batchnorm_epsilon_and_rank2);
    tcase_add_test(bn, test_batchnorm_non_spatial);
    tcase_add_test(bn, test_batchnorm_training_outputs_checked);
    tcase_add_test(bn, test_batchnorm_training_mode);
    tcase_add_test(bn, test_batchnorm_attribute_errors);
    tcase_add_test(bn, test_batchnorm_shape_errors_and_infer);
    suite_add_tcase(s, bn);
    TCase *gn = tcase_create("groupnorm");
    tcase_add_test(gn, test_instancenorm_every_version);
    tcase_add_test(gn, test_instancenorm_epsilon_rank4);
    tcase_add_test(gn, test_groupnorm_18_and_21);
    tcase_add_test(gn, test_groupnorm_errors_and_infer);
    suite_add_tcase(s, gn);
    TCase *ln = tcase_create("layernorm");
    tcase_add_test(ln, test_layernorm_last_axis);
    tcase_add_test(ln, test_layernorm_axis0_no_bias_one_output);
    tcase_add_test(ln, test_layernorm_scale_per_row);
    tcase_add_test(ln, test_layernorm_errors);
    tcase_add_test(ln, test_layernorm_infer_unknown);
    suite_add_tcase(s, ln);
    TCase *sm = tcase_create("softmax");
    tcase_add_test(sm, test_softmax_last_axis);
    tcase_add_test(sm, test_softmax_coerced_2d_before_13);
    tcase_add_test(sm, test_softmax_inner_axis_from_13);
    tcase_add_test(sm, test_softmax_inner_axis_gpu_steps);
    tcase_add_test(sm, test_softmax_stable_and_long);
    tcase_add_test(sm, test_softmax_errors_and_infer);
    suite_add_tcase(s, sm);
    return test_run_suite(s);
}
