/* GPU plan lowering, run on the CPU: layouts, BN folding, epilogue fusion, conversions, memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

static ir_tensor *vec(ir_graph *g, const char *name, const float *v, int64_t n) {
    return th_named(g, name, TCI_DTYPE_FLOAT, 1, &n, v);
}

/* g optimised, prepared for the GPU and planned with the default options. */
static plan *gpu_plan(ir_graph *g) {
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p = NULL;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    return p;
}

static const plan_step *find_step(const plan *p, plan_step_kind kind, int nth) {
    for (int i = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == kind && nth-- == 0) return &p->steps[i];
    return NULL;
}

/* g, optimized and prepared for the GPU, refused by the planner with message; g destroyed. */
static void expect_gpu_refusal(ir_graph *g, const char *message) {
    plan *p;
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED, message);
    ir_graph_destroy(g);
}

/* x[1,3,5,5] -> Conv(4 out, 3x3, pad 1) -> BN -> Add(x2) -> Relu -> y, where x2 = Conv1x1(x):
 * the second conv's output is computed first, so the 3x3 conv takes it as its residual. */
START_TEST(test_conv_bn_add_relu_fuse) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 3, 5, 5}, wd[4] = {4, 3, 3, 3}, w1d[4] = {4, 3, 1, 1};
    float w[108], w1[12];
    for (int i = 0; i < 108; i++) w[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 12; i++) w1[i] = 0.5f;
    const float gamma[4] = {1, 2, 3, 4}, beta[4] = {0.5f, 0, 0, -1}, mean[4] = {1, 0, 0, 0},
                var[4] = {3, 1, 1, 1}, bias[4] = {2, 0, 0, 0};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w);
    ir_tensor *w1t = th_named(g, "w1", TCI_DTYPE_FLOAT, 4, w1d, w1);
    ir_tensor *b = vec(g, "b", bias, 4);
    ir_tensor *ga = vec(g, "gamma", gamma, 4), *be = vec(g, "beta", beta, 4),
              *me = vec(g, "mean", mean, 4), *va = vec(g, "var", var, 4);
    ir_tensor *short_cut = th_act(g, "shortcut"), *c = th_act(g, "c"), *bn = th_act(g, "bn"),
              *sum = th_act(g, "sum"), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "proj", "Conv", 17, (ir_tensor *[]){x, w1t}, 2, &short_cut, 1);
    ir_node *conv = th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x, wt, b}, 3, &c, 1);
    th_attr_ints(g, conv, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    th_node_io(g, "bn", "BatchNormalization", 15, (ir_tensor *[]){c, ga, be, me, va}, 5, &bn, 1);
    th_node_io(g, "add", "Add", 14, (ir_tensor *[]){bn, short_cut}, 2, &sum, 1);
    th_node_io(g, "relu", "Relu", 14, &sum, 1, &y, 1);
    plan *p = gpu_plan(g);
    ck_assert_int_eq(p->num_steps, 2);
    const plan_step *s = find_step(p, PLAN_STEP_CONV, 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s->label, "Conv+BatchNormalization+Add+Relu");
    ck_assert(s->u.conv.has_residual);
    ck_assert_int_eq(s->u.conv.act.kind, ACT_RELU);
    ck_assert_int_eq(s->u.conv.geom.pad_top, 1);
    ck_assert_int_eq(s->u.conv.geom.out_h, 5);
    /* folded weights: w * gamma / sqrt(var + eps), still (K, C, R, S) fp32 */
    const plan_tensor *pw = &p->tensors[s->inputs[1]];
    ck_assert_int_eq(pw->dims[0], 4);
    ck_assert_int_eq(pw->dims[1], 3);
    const float *hw = pw->host_data;
    double sc0 = 1.0 / sqrt(3.0 + 1e-5);
    ck_assert_float_eq_tol(hw[0], (float)(w[0] * sc0), 1e-6f);
    int at = ((1 * 3 + 2) * 3 + 0) * 3 + 1;
    ck_assert_float_eq_tol(hw[at], w[at] * (float)(2.0 / sqrt(1.0 + 1e-5)), 1e-5f);
    const float *hb = p->tensors[s->inputs[2]].host_data;
    ck_assert_float_eq_tol(hb[0], (float)((2.0 - 1.0) * sc0 + 0.5), 1e-5f);
    ck_assert_float_eq_tol(hb[3], -1.0f, 1e-5f);
    ck_assert_int_eq(p->tensors[s->inputs[2]].dims[0], 4);
    /* layouts: everything NHWC8, no conversions */
    ck_assert_int_eq(p->num_layout_conversions, 0);
    ck_assert_int_eq(p->tensors[s->outputs[0]].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(p->tensors[s->outputs[0]].padded_channels, 8);
    ck_assert_int_eq(p->tensors[p->output_tensors[0]].output_index, 0);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* CNN head: GlobalAveragePool -> Flatten -> Gemm(+bias) -> Relu: one NHWC8 -> dense conversion,
 * the bias and ReLU in the GEMM step. */
START_TEST(test_head_conversion_and_gemm_fusion) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {2, 12, 7, 7}, wd[2] = {5, 12};
    float w[60], bias[5] = {1, 2, 3, 4, 5};
    for (int i = 0; i < 60; i++) w[i] = 0.01f * (float)i;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wt = th_named(g, "fc.w", TCI_DTYPE_FLOAT, 2, wd, w), *bt = vec(g, "fc.b", bias, 5);
    ir_tensor *gap = th_act(g, "gap"), *flat = th_act(g, "flat"), *fc = th_act(g, "fc"), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "gap", "GlobalAveragePool", 17, &x, 1, &gap, 1);
    th_node_io(g, "flatten", "Flatten", 17, &gap, 1, &flat, 1);
    ir_node *gemm = th_node_io(g, "fc", "Gemm", 17, (ir_tensor *[]){flat, wt, bt}, 3, &fc, 1);
    th_attr_int(g, gemm, "transB", 1);
    th_node_io(g, "relu", "Relu", 14, &fc, 1, &y, 1);
    plan *p = gpu_plan(g);
    ck_assert_int_eq(p->num_layout_conversions, 1);
    ck_assert_ptr_nonnull(find_step(p, PLAN_STEP_GLOBAL_POOL, 0));
    ck_assert_ptr_nonnull(find_step(p, PLAN_STEP_LAYOUT, 0));
    const plan_step *s = find_step(p, PLAN_STEP_GEMM, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s->label, "Gemm+Relu");
    ck_assert(s->u.gemm.has_bias);
    ck_assert(s->u.gemm.trans_b);
    ck_assert_int_eq(s->u.gemm.m, 2);
    ck_assert_int_eq(s->u.gemm.n, 5);
    ck_assert_int_eq(s->u.gemm.k, 12);
    ck_assert_int_eq(s->u.gemm.act.kind, ACT_RELU);
    ck_assert_int_eq(p->num_steps, 3);
    /* the input feeds a pooling op, so it arrives NHWC8 */
    ck_assert_int_eq(p->tensors[p->input_tensors[0]].layout, PLAN_LAYOUT_NHWC8);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* A chain of element-wise ops reuses memory: the arena is far below the naive sum, and the
 * broadcast strides of a per-channel operand are zero where it broadcasts. (The chain starts
 * with a Sigmoid: a per-channel Mul right after the Conv would fold into its weights.) */
START_TEST(test_eltwise_chain_memory_and_strides) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 10, 4, 4}, wd[4] = {10, 10, 1, 1}, cd[4] = {1, 10, 1, 1};
    float w[100] = {0}, chan[10];
    for (int i = 0; i < 10; i++) chan[i] = (float)i;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w);
    ir_tensor *ct = th_named(g, "chan", TCI_DTYPE_FLOAT, 4, cd, chan);
    ir_tensor *t[12];
    char name[8];
    for (int i = 0; i < 12; i++) {
        snprintf(name, sizeof name, "t%d", i);
        t[i] = th_act(g, name);
    }
    th_graph_io(g, &x, 1, &t[11], 1);
    th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x, wt}, 2, &t[0], 1);
    for (int i = 1; i < 12; i++) {
        snprintf(name, sizeof name, "mul%d", i);
        th_node_io(g, name, i % 2 ? "Sigmoid" : "Mul", 14, (ir_tensor *[]){t[i - 1], ct},
                   i % 2 ? 1 : 2, &t[i], 1);
    }
    plan *p = gpu_plan(g);
    const plan_step *mul = find_step(p, PLAN_STEP_ELTWISE, 0);
    ck_assert_ptr_nonnull(mul);
    ck_assert_int_eq(mul->u.eltwise.op, BINARY_MUL);
    ck_assert_int_eq(mul->u.eltwise.view.rank, 4);
    ck_assert_int_eq(mul->u.eltwise.view.dims[3], 16); /* N, H, W, Cp */
    ck_assert_int_eq(mul->u.eltwise.view.pad_dim, 3);
    ck_assert_int_eq(mul->u.eltwise.view.real_channels, 10);
    ck_assert_int_eq(mul->u.eltwise.view.dims[0], 1);
    ck_assert_int_eq(mul->u.eltwise.view.strides[1][1], 0);
    ck_assert_int_eq(mul->u.eltwise.view.strides[1][2], 0);
    ck_assert_int_eq(mul->u.eltwise.view.strides[1][3], 1);
    ck_assert_int_eq(mul->u.eltwise.view.strides[0][1], 4 * 16);
    ck_assert_uint_gt(p->naive_bytes, 0);
    ck_assert_uint_le(p->arena_bytes * 3, p->naive_bytes);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* LRN lowers to one LRN step: NHWC8 for 4-D (what its Conv and pooling neighbours use), dense
 * otherwise. */
START_TEST(test_lrn_lowering) {
    for (int rank = 3; rank <= 4; rank++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int64_t xd[4] = {2, 5, 3, 3};
        ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, rank, xd, NULL), *y = th_act(g, "y");
        th_graph_io(g, &x, 1, &y, 1);
        ir_node *lrn = th_node_io(g, "norm1", "LRN", 13, &x, 1, &y, 1);
        th_attr_int(g, lrn, "size", 3);
        th_attr_float(g, lrn, "alpha", 0.5f);
        plan *p = gpu_plan(g);
        const plan_step *s = find_step(p, PLAN_STEP_LRN, 0);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(s->u.lrn.n, 2);
        ck_assert_int_eq(s->u.lrn.c, 5);
        ck_assert_int_eq(s->u.lrn.spatial, rank == 4 ? 9 : 3);
        ck_assert_int_eq(s->u.lrn.size, 3);
        ck_assert_float_eq(s->u.lrn.alpha, 0.5f);
        ck_assert_float_eq(s->u.lrn.beta, 0.75f);
        ck_assert_float_eq(s->u.lrn.bias, 1.0f);
        ck_assert_int_eq(p->tensors[s->inputs[0]].layout,
                         rank == 4 ? PLAN_LAYOUT_NHWC8 : PLAN_LAYOUT_DENSE);
        ck_assert_int_eq(p->tensors[s->outputs[0]].layout,
                         rank == 4 ? PLAN_LAYOUT_NHWC8 : PLAN_LAYOUT_DENSE);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

/* Grouped convolutions whose groups are not multiples of 8 channels merge consecutive groups into
 * block-diagonal ones that are: 4 per group merge 2 at a time, 6 per group 4 at a time; when no
 * divisor of the group count does, one dense group. */
START_TEST(test_grouped_conv_merge) {
    const struct {
        int64_t c, group, want_groups;
    } cases[] = {{16, 4, 2}, {48, 8, 2}, {128, 32, 16}, {12, 3, 1}, {32, 4, 4}};
    for (int t = 0; t < 5; t++) {
        int64_t c = cases[t].c, group = cases[t].group, cg = c / group;
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int64_t xd[4] = {1, c, 5, 5}, wd[4] = {c, cg, 3, 3};
        int64_t wn = c * cg * 9;
        float *w = malloc((size_t)wn * sizeof *w);
        ck_assert_ptr_nonnull(w);
        for (int64_t i = 0; i < wn; i++) w[i] = (float)(i % 11) + 1.0f; /* never 0 */
        ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
        ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w), *y = th_act(g, "y");
        th_graph_io(g, &x, 1, &y, 1);
        ir_node *conv = th_node_io(g, "conv", "Conv", 11, (ir_tensor *[]){x, wt}, 2, &y, 1);
        th_attr_int(g, conv, "group", group);
        th_attr_ints(g, conv, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
        plan *p = gpu_plan(g);
        const plan_step *s = find_step(p, PLAN_STEP_CONV, 0);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(s->u.conv.geom.groups, cases[t].want_groups);
        ck_assert(!s->u.conv.depthwise);
        int64_t merge = group / cases[t].want_groups, mc = cg * merge;
        const plan_tensor *pw = &p->tensors[s->inputs[1]];
        ck_assert_int_eq(pw->dims[0], c);
        ck_assert_int_eq(pw->dims[1], mc);
        const float *hw = pw->host_data;
        /* output channel o keeps its cg x 9 weights at its group's slot, zeros elsewhere */
        for (int64_t o = 0; o < c; o++) {
            int64_t slot = o / cg % merge; /* here K == C, so K/group == cg */
            for (int64_t j = 0; j < mc * 9; j++) {
                int64_t ci = j / 9;
                float want = ci / cg == slot ? w[(o * cg + ci % cg) * 9 + j % 9] : 0.0f;
                ck_assert_float_eq(hw[o * mc * 9 + j], want);
            }
        }
        plan_destroy(p);
        free(w);
        ir_graph_destroy(g);
    }
}
END_TEST

/* BatchNormalization of rank 2 and 3 (LeViT) lowers to two dense element-wise steps over an
 * (N, C, inner) view with the per-channel vectors broadcast along N and inner. */
START_TEST(test_batchnorm_any_rank_lowering) {
    for (int rank = 2; rank <= 3; rank++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int64_t xd[3] = {2, 4, 5};
        const float gamma[4] = {1, 2, 3, 4}, beta[4] = {0, 1, 0, 1}, mean[4] = {0, 0, 1, 1},
                    var[4] = {1, 1, 1, 1};
        ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, rank, xd, NULL), *y = th_act(g, "y");
        ir_tensor *ga = vec(g, "gamma", gamma, 4), *be = vec(g, "beta", beta, 4),
                  *me = vec(g, "mean", mean, 4), *va = vec(g, "var", var, 4);
        th_graph_io(g, &x, 1, &y, 1);
        th_node_io(g, "bn", "BatchNormalization", 15, (ir_tensor *[]){x, ga, be, me, va}, 5, &y,
                   1);
        plan *p = gpu_plan(g);
        ck_assert_int_eq(p->num_steps, 2);
        for (int k = 0; k < 2; k++) {
            const plan_step *s = find_step(p, PLAN_STEP_ELTWISE, k);
            ck_assert_int_eq(s->u.eltwise.op, k ? BINARY_ADD : BINARY_MUL);
            const plan_strided *v = &s->u.eltwise.view;
            ck_assert_int_eq(v->rank, 3);
            ck_assert_int_eq(v->dims[0], 2);
            ck_assert_int_eq(v->dims[1], 4);
            ck_assert_int_eq(v->dims[2], rank == 3 ? 5 : 1);
            ck_assert_int_eq(v->strides[1][0], 0);
            ck_assert_int_eq(v->strides[1][1], 1);
            ck_assert_int_eq(v->strides[1][2], 0);
            ck_assert_int_eq(v->strides[0][1], rank == 3 ? 5 : 1);
            ck_assert_int_eq(p->tensors[s->outputs[0]].layout, PLAN_LAYOUT_DENSE);
        }
        const plan_step *mul = find_step(p, PLAN_STEP_ELTWISE, 0);
        const float *scale = p->tensors[mul->inputs[1]].host_data;
        ck_assert_ptr_nonnull(scale);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

/* Training-mode BatchNormalization on constant weights (NF-Nets' weight standardisation) folds
 * at build into the Conv's weights; on a computed X it is refused naming the node. */
START_TEST(test_batchnorm_training_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 3, 4, 4}, wd[4] = {4, 3, 1, 1};
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = (float)((i * 5) % 7);
    const float gamma[3] = {1, 1, 1}, beta[3] = {0, 0, 0}, zero[3] = {0, 0, 0},
                one[3] = {1, 1, 1};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wraw = th_named(g, "wraw", TCI_DTYPE_FLOAT, 4, wd, w), *wstd = th_act(g, "wstd");
    ir_tensor *ga = vec(g, "gamma", gamma, 3), *be = vec(g, "beta", beta, 3),
              *me = vec(g, "mean", zero, 3), *va = vec(g, "var", one, 3), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    ir_node *bn = th_node_io(g, "ws", "BatchNormalization", 15,
                             (ir_tensor *[]){wraw, ga, be, me, va}, 5, &wstd, 1);
    th_attr_int(g, bn, "training_mode", 1);
    th_node_io(g, "conv", "Conv", 11, (ir_tensor *[]){x, wstd}, 2, &y, 1);
    plan *p = gpu_plan(g);
    ck_assert_int_eq(p->num_steps, 1);
    const plan_step *s = find_step(p, PLAN_STEP_CONV, 0);
    ck_assert_ptr_nonnull(s);
    const float *hw = p->tensors[s->inputs[1]].host_data;
    for (int c = 0; c < 3; c++) {
        double mean = 0, var = 0;
        for (int k = 0; k < 4; k++) mean += w[k * 3 + c] / 4.0;
        for (int k = 0; k < 4; k++) var += (w[k * 3 + c] - mean) * (w[k * 3 + c] - mean) / 4.0;
        for (int k = 0; k < 4; k++)
            ck_assert_float_eq_tol(hw[k * 3 + c], (float)((w[k * 3 + c] - mean) /
                                                          sqrt(var + 1e-5)),
                                   1e-5f);
    }
    plan_destroy(p);
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t d2[2] = {2, 3};
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, d2, NULL);
    ga = vec(g, "gamma", gamma, 3), be = vec(g, "beta", beta, 3), me = vec(g, "mean", zero, 3),
    va = vec(g, "var", one, 3), y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    bn = th_node_io(g, "bn", "BatchNormalization", 15, (ir_tensor *[]){x, ga, be, me, va}, 5, &y,
                    1);
    th_attr_int(g, bn, "training_mode", 1);
    expect_gpu_refusal(g, "node 'bn' (BatchNormalization): training_mode=1 on a computed X has no "
                       "GPU path");
}
END_TEST

/* GroupNormalization and InstanceNormalization of 4-D activations lower to one GROUPNORM step
 * each, in the NHWC8 layout of the Conv before them (no conversion between); other ranks dense. */
START_TEST(test_groupnorm_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {2, 6, 3, 3}, wd[4] = {6, 6, 1, 1};
    float w[36];
    for (int i = 0; i < 36; i++) w[i] = 0.1f * (float)(i % 5);
    const float s3[3] = {1, 2, 3}, b3[3] = {0, 0, 1}, s6[6] = {1, 1, 1, 2, 2, 2},
                b6[6] = {0, 0, 0, 1, 1, 1};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w), *c = th_act(g, "c"),
              *gn = th_act(g, "gn"), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "conv", "Conv", 11, (ir_tensor *[]){x, wt}, 2, &c, 1);
    ir_node *n = th_node_io(g, "gn", "GroupNormalization", 18,
                            (ir_tensor *[]){c, vec(g, "s3", s3, 3), vec(g, "b3", b3, 3)}, 3, &gn,
                            1);
    th_attr_int(g, n, "num_groups", 3);
    th_node_io(g, "in", "InstanceNormalization", 6,
               (ir_tensor *[]){gn, vec(g, "s6", s6, 6), vec(g, "b6", b6, 6)}, 3, &y, 1);
    plan *p = gpu_plan(g);
    const plan_step *s = find_step(p, PLAN_STEP_GROUPNORM, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->u.groupnorm.n, 2);
    ck_assert_int_eq(s->u.groupnorm.c, 6);
    ck_assert_int_eq(s->u.groupnorm.spatial, 9);
    ck_assert_int_eq(s->u.groupnorm.groups, 3);
    ck_assert(s->u.groupnorm.scale_per_group);
    ck_assert_int_eq(p->tensors[s->inputs[0]].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(p->tensors[s->outputs[0]].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(p->tensors[s->inputs[1]].dims[0], 3);
    s = find_step(p, PLAN_STEP_GROUPNORM, 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->u.groupnorm.groups, 6);
    ck_assert(!s->u.groupnorm.scale_per_group);
    /* conv -> GroupNormalization -> InstanceNormalization, each reading the last one's output */
    ck_assert_int_eq(find_step(p, PLAN_STEP_GROUPNORM, 0)->inputs[0],
                     find_step(p, PLAN_STEP_CONV, 0)->outputs[0]);
    ck_assert_int_eq(s->inputs[0], find_step(p, PLAN_STEP_GROUPNORM, 0)->outputs[0]);
    plan_destroy(p);
    ir_graph_destroy(g);

    /* rank 3: dense */
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t d3[3] = {2, 6, 7};
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, d3, NULL);
    y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    n = th_node_io(g, "gn", "GroupNormalization", 21,
                   (ir_tensor *[]){x, vec(g, "s6", s6, 6), vec(g, "b6", b6, 6)}, 3, &y, 1);
    th_attr_int(g, n, "num_groups", 2);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    s = find_step(p, PLAN_STEP_GROUPNORM, 0);
    ck_assert_int_eq(s->u.groupnorm.spatial, 7);
    ck_assert(!s->u.groupnorm.scale_per_group);
    ck_assert_int_eq(p->tensors[s->inputs[0]].layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(s->u.groupnorm.chunks, 1); /* 4 (image, group) pairs of 21 values */
    ck_assert_int_eq(s->num_outputs, 1);
    plan_destroy(p);
    ir_graph_destroy(g);

    /* GroupNorm(1) over one long image: its statistics gathered by 98 blocks of 2048 values,
     * which meet in a float temporary, the step's second output */
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t dl[3] = {1, 64, 3136};
    float ones[64], zeros[64];
    for (int i = 0; i < 64; i++) ones[i] = 1.0f, zeros[i] = 0.0f;
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, dl, NULL);
    y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    n = th_node_io(g, "gn", "GroupNormalization", 21,
                   (ir_tensor *[]){x, vec(g, "s64", ones, 64), vec(g, "b64", zeros, 64)}, 3, &y,
                   1);
    th_attr_int(g, n, "num_groups", 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    s = find_step(p, PLAN_STEP_GROUPNORM, 0);
    ck_assert_int_eq(s->u.groupnorm.chunks, 98);
    ck_assert_int_eq(s->num_outputs, 2);
    const plan_tensor *partials = &p->tensors[s->outputs[1]];
    ck_assert_int_eq(partials->dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(partials->rank, 1);
    ck_assert_int_eq(partials->dims[0], 2 * 98);
    ck_assert_int_eq(partials->memory, PLAN_MEM_ARENA);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* Found on the GPU: the Dropout mask and integer Pow exponents must be refused, not run wrongly. */
/* The planner follows the layout pass's record; without it, no plan rather than a dense one. */
START_TEST(test_needs_layout_pass) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 4, 3, 3};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "relu", "Relu", 14, &x, 1, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_fuse_for_gpu(g));
    plan *p;
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_INTERNAL,
                        "layouts are not assigned (pass_assign_layouts)");
    ck_assert_ptr_null(p);
    ck_assert_tci_ok(pass_assign_layouts(g));
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_gpu_refusals) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[2] = {3, 4};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL), *y = th_act(g, "y"),
              *mask = th_act(g, "mask");
    ir_tensor *outs[2] = {y, mask};
    th_graph_io(g, &x, 1, outs, 2);
    th_node_io(g, "drop", "Dropout", 13, &x, 1, outs, 2);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED,
                        "node 'drop' (Dropout): the Dropout mask output has no GPU path");
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    const int32_t two = 2;
    int64_t one = 1;
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL);
    ir_tensor *e = th_named(g, "e", TCI_DTYPE_INT32, 1, &one, &two);
    y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "pow", "Pow", 15, (ir_tensor *[]){x, e}, 2, &y, 1);
    expect_gpu_refusal(g, "inputs of dtypes float and int32: mixed dtypes have no GPU path");

    /* a 3-D convolution has no GPU path (1-D and 2-D ones do) */
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t x5[5] = {1, 2, 4, 4, 4}, w5[5] = {2, 2, 1, 1, 1};
    const float wv[4] = {1, 2, 3, 4};
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 5, x5, NULL);
    ir_tensor *w = th_named(g, "w", TCI_DTYPE_FLOAT, 5, w5, wv);
    y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "conv3d", "Conv", 11, (ir_tensor *[]){x, w}, 2, &y, 1);
    expect_gpu_refusal(g, "node 'conv3d' (Conv): only 1-D and 2-D convolutions run on the GPU");

    /* element-wise steps take at most 6 dims: a rank-8 Relu is refused naming it (found by
     * fuzz_gpu_plan: the view's arrays were overrun) */
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t x8[8] = {1, 2, 1, 2, 1, 2, 1, 2};
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 8, x8, NULL);
    y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "relu8", "Relu", 14, &x, 1, &y, 1);
    expect_gpu_refusal(g, "node 'relu8' (Relu): a rank-8 output of an element-wise or strided "
                       "step; the GPU path has at most 6 dims");
}
END_TEST

/* ReduceMax lowers to a REDUCE step carrying REDUCE_MAX; over H and W of an NHWC8 activation to a
 * global max pool; an integer one is refused. */
START_TEST(test_reduce_max_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[3] = {2, 3, 4}, one = 1;
    const int64_t last = -1;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL), *y = th_act(g, "y");
    ir_tensor *axes = th_named(g, "axes", TCI_DTYPE_INT64, 1, &one, &last);
    th_graph_io(g, &x, 1, &y, 1);
    ir_node *n = th_node_io(g, "rmax", "ReduceMax", 18, (ir_tensor *[]){x, axes}, 2, &y, 1);
    th_attr_int(g, n, "keepdims", 0);
    plan *p = gpu_plan(g);
    ck_assert_int_eq(p->num_steps, 1);
    const plan_step *s = find_step(p, PLAN_STEP_REDUCE, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->u.reduce.op, REDUCE_MAX);
    ck_assert_int_eq(s->u.reduce.view.rank, 3);
    ck_assert(!s->u.reduce.reduce_dim[0] && !s->u.reduce.reduce_dim[1] &&
              s->u.reduce.reduce_dim[2]);
    plan_destroy(p);
    ir_graph_destroy(g);

    /* x[1,3,6,6] -> Conv 1x1 (NHWC8) -> ReduceMax over H, W (keepdims) */
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t cd[4] = {1, 3, 6, 6}, wd[4] = {4, 3, 1, 1};
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = 0.1f * (float)i;
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, cd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w), *c = th_act(g, "c");
    y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x, wt}, 2, &c, 1);
    n = th_node_io(g, "rmax", "ReduceMax", 13, &c, 1, &y, 1);
    th_attr_ints(g, n, "axes", (const int64_t[]){2, -1}, 2);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    s = find_step(p, PLAN_STEP_GLOBAL_POOL, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->u.pool.kind, POOL_MAX);
    ck_assert_int_eq(s->u.pool.geom.h, 6);
    ck_assert_ptr_null(find_step(p, PLAN_STEP_REDUCE, 0));
    ck_assert_int_eq(p->tensors[s->inputs[0]].layout, PLAN_LAYOUT_NHWC8);
    plan_destroy(p);
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    x = th_named(g, "x", TCI_DTYPE_INT64, 3, xd, NULL);
    y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "rmax", "ReduceMax", 13, &x, 1, &y, 1);
    expect_gpu_refusal(g, "node 'rmax' (ReduceMax): int64 reductions have no GPU path");
}
END_TEST

/* Mod lowers to one element-wise step whose op follows the parsed fmod attribute: FMOD for
 * fmod=1 (here with a Relu fused), MOD for the default 0 on int64. */
START_TEST(test_mod_lowering) {
    for (int fmod_attr = 0; fmod_attr <= 1; fmod_attr++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        tci_dtype dt = fmod_attr ? TCI_DTYPE_FLOAT : TCI_DTYPE_INT64;
        int64_t xd[2] = {2, 3}, yd[1] = {3};
        ir_tensor *in[2] = {th_named(g, "x", dt, 2, xd, NULL), th_named(g, "y", dt, 1, yd, NULL)};
        ir_tensor *z = th_act(g, "z"), *w = th_act(g, "w");
        ir_node *mod = th_node_io(g, "mod", "Mod", 13, in, 2, &z, 1);
        if (fmod_attr) {
            th_attr_int(g, mod, "fmod", 1);
            th_node_io(g, "relu", "Relu", 14, &z, 1, &w, 1);
        }
        th_graph_io(g, in, 2, fmod_attr ? &w : &z, 1);
        plan *p = gpu_plan(g);
        ck_assert_int_eq(p->num_steps, 1);
        const plan_step *s = find_step(p, PLAN_STEP_ELTWISE, 0);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(s->u.eltwise.op, fmod_attr ? BINARY_FMOD : BINARY_MOD);
        ck_assert_int_eq(s->u.eltwise.act.kind, fmod_attr ? ACT_RELU : ACT_NONE);
        ck_assert_str_eq(s->label, fmod_attr ? "Mod+Relu" : "Mod");
        ck_assert_int_eq(s->u.eltwise.view.strides[1][0], 0);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

/* A standalone 4-D BatchNormalization (its input no convolution's) and its Relu: one depthwise
 * 1x1 convolution step, the folded scale as its weights and the shift as its fp32 bias. */
START_TEST(test_batchnorm_as_depthwise_step) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {2, 10, 5, 5};
    float gamma[10], beta[10], mean[10], var[10];
    for (int i = 0; i < 10; i++)
        gamma[i] = 1.0f + i, beta[i] = 0.5f * i, mean[i] = 0.1f * i, var[i] = 4.0f;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *bn = th_act(g, "bn"), *y = th_act(g, "y");
    ir_tensor *ga = vec(g, "gamma", gamma, 10), *be = vec(g, "beta", beta, 10),
              *me = vec(g, "mean", mean, 10), *va = vec(g, "var", var, 10);
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "bn", "BatchNormalization", 15, (ir_tensor *[]){x, ga, be, me, va}, 5, &bn, 1);
    th_node_io(g, "relu", "Relu", 14, &bn, 1, &y, 1);
    plan *p = gpu_plan(g);
    const plan_step *s = find_step(p, PLAN_STEP_CONV, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_null(find_step(p, PLAN_STEP_ELTWISE, 0));
    ck_assert_str_eq(s->label, "BatchNormalization+Relu");
    const plan_conv *c = &s->u.conv;
    ck_assert(c->depthwise && c->has_bias && !c->has_residual);
    ck_assert_int_eq(c->geom.groups, 10);
    ck_assert_int_eq(c->geom.k, 10);
    ck_assert_int_eq(c->geom.kernel_h * c->geom.kernel_w, 1);
    ck_assert_int_eq(c->geom.out_h * c->geom.out_w, 25);
    ck_assert_int_eq(c->act.kind, ACT_RELU);
    const plan_tensor *w = &p->tensors[s->inputs[1]], *b = &p->tensors[s->inputs[2]];
    ck_assert_int_eq(w->dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(b->dtype, TCI_DTYPE_FLOAT);
    const float *wv = w->host_data, *bv = b->host_data;
    for (int i = 0; i < 10; i++) {
        float scale = (float)(gamma[i] / sqrt(4.0 + 1e-5));
        ck_assert_float_eq_tol(wv[i], scale, 1e-6f);
        ck_assert_float_eq_tol(bv[i], beta[i] - mean[i] * scale, 1e-6f);
    }
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* x * c, c * x and x / c by a float scalar constant: one step over x alone whose activation
 * scales in fp32 (ACT_SCALE c, 1 / c), no constant read in the storage type; a scalar Mul with
 * a fused Relu and a Mul by a vector stay binary steps. */
START_TEST(test_scalar_factor_lowering) {
    const float c = 0.05103103630798288f; /* 1 / sqrt(384): no fp16 value */
    for (int k = 0; k < 5; k++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int64_t xd[2] = {2, 3}, one = 1, three = 3;
        const float v[3] = {c, c, c};
        ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL);
        ir_tensor *f = k == 4 ? th_named(g, "c", TCI_DTYPE_FLOAT, 1, &three, v)
                              : th_named(g, "c", TCI_DTYPE_FLOAT, k == 1 ? 0 : 1, &one, &c);
        ir_tensor *z = th_act(g, "z"), *w = th_act(g, "w");
        const char *op = k == 2 ? "Div" : "Mul";
        th_node_io(g, "scale", op, 14, k == 1 ? (ir_tensor *[]){f, x} : (ir_tensor *[]){x, f}, 2,
                   &z, 1);
        if (k == 3) th_node_io(g, "relu", "Relu", 14, &z, 1, &w, 1);
        th_graph_io(g, &x, 1, k == 3 ? &w : &z, 1);
        plan *p = gpu_plan(g);
        ck_assert_int_eq(p->num_steps, 1);
        const plan_step *s = find_step(p, PLAN_STEP_ELTWISE, 0);
        ck_assert_ptr_nonnull(s);
        if (k <= 2) {
            ck_assert_int_eq(s->u.eltwise.op, BINARY_NONE);
            ck_assert_int_eq(s->num_inputs, 1);
            ck_assert_int_eq(s->u.eltwise.act.kind, ACT_SCALE);
            ck_assert_float_eq(s->u.eltwise.act.alpha, k == 2 ? 1.0f / c : c);
        } else {
            ck_assert_int_eq(s->u.eltwise.op, BINARY_MUL);
            ck_assert_int_eq(s->num_inputs, 2);
            ck_assert_int_eq(s->u.eltwise.act.kind, k == 3 ? ACT_RELU : ACT_NONE);
        }
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

/* A reduction with noop_with_empty_axes and no axes reduces nothing, but still maps each value
 * (|x| for ReduceL1): a REDUCE step with no reduced dim, not an alias of its input. */
START_TEST(test_reduce_noop_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[2] = {4, 6};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    ir_node *n = th_node_io(g, "l1", "ReduceL1", 18, &x, 1, &y, 1);
    th_attr_int(g, n, "noop_with_empty_axes", 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_assign_layouts(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    const plan_step *s = find_step(p, PLAN_STEP_REDUCE, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->u.reduce.op, REDUCE_L1);
    ck_assert(!s->u.reduce.reduce_dim[0] && !s->u.reduce.reduce_dim[1]);
    ck_assert_int_eq(p->tensors[s->outputs[0]].alias_of, -1);
    ck_assert_int_eq(p->tensors[s->outputs[0]].dims[1], 6);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* ArgMin, CumSum and TopK lower to their axis steps, viewed around the axis; a TopK whose K
 * the per-row kernel cannot keep, and a CumSum whose axis is a runtime value, are refused naming
 * the node. */
START_TEST(test_argreduce_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[3] = {2, 5, 3}, one = 1;
    const int64_t k2 = 2;
    const int32_t axis1 = 1;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    ir_tensor *am = th_act(g, "am"), *cs = th_act(g, "cs"), *tv = th_act(g, "tv"), *ti = th_act(g, "ti");
    ir_tensor *kt = th_named(g, "k", TCI_DTYPE_INT64, 1, &one, &k2);
    ir_tensor *at = th_named(g, "axis", TCI_DTYPE_INT32, 0, NULL, &axis1);
    ir_tensor *outs[4] = {am, cs, tv, ti};
    th_graph_io(g, &x, 1, outs, 4);
    ir_node *n = th_node_io(g, "amax", "ArgMin", 13, &x, 1, &am, 1);
    th_attr_int(g, n, "axis", -2);
    th_attr_int(g, n, "select_last_index", 1);
    n = th_node_io(g, "csum", "CumSum", 14, (ir_tensor *[]){x, at}, 2, &cs, 1);
    th_attr_int(g, n, "reverse", 1);
    n = th_node_io(g, "topk", "TopK", 11, (ir_tensor *[]){x, kt}, 2, (ir_tensor *[]){tv, ti}, 2);
    th_attr_int(g, n, "axis", 1);
    th_attr_int(g, n, "largest", 0);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_assign_layouts(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    const plan_step *s = find_step(p, PLAN_STEP_ARG_REDUCE, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert(s->u.axis.outer == 2 && s->u.axis.len == 5 && s->u.axis.inner == 3);
    ck_assert(s->u.axis.is_min && s->u.axis.select_last);
    ck_assert_int_eq(p->tensors[s->outputs[0]].dtype, TCI_DTYPE_INT64);
    s = find_step(p, PLAN_STEP_CUMSUM, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert(s->u.axis.len == 5 && s->u.axis.reverse && !s->u.axis.exclusive);
    s = find_step(p, PLAN_STEP_TOPK, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->num_outputs, 2);
    ck_assert(s->u.axis.k == 2 && !s->u.axis.largest && s->u.axis.inner == 3);
    ck_assert_int_eq(p->tensors[s->outputs[1]].dtype, TCI_DTYPE_INT64);
    ck_assert_int_eq(p->tensors[s->outputs[0]].dims[1], 2);
    plan_destroy(p);
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t wide[2] = {2, 100};
    const int64_t k65 = 65;
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, wide, NULL);
    tv = th_act(g, "tv"), ti = th_act(g, "ti");
    kt = th_named(g, "k", TCI_DTYPE_INT64, 1, &one, &k65);
    th_graph_io(g, &x, 1, (ir_tensor *[]){tv, ti}, 2);
    th_node_io(g, "topk", "TopK", 11, (ir_tensor *[]){x, kt}, 2, (ir_tensor *[]){tv, ti}, 2);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_assign_layouts(g));
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED,
                        "node 'topk' (TopK): K 65 has no GPU path");
    ir_graph_destroy(g);

    ck_assert_tci_ok(ir_graph_create(&g));
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    cs = th_act(g, "cs");
    at = th_named(g, "axis", TCI_DTYPE_INT32, 0, NULL, NULL);
    th_graph_io(g, (ir_tensor *[]){x, at}, 2, &cs, 1);
    th_node_io(g, "csum", "CumSum", 14, (ir_tensor *[]){x, at}, 2, &cs, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_assign_layouts(g));
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED,
                        "node 'csum' (CumSum): input axis must be a constant for the GPU path");
    ir_graph_destroy(g);
}
END_TEST

/* x[2,12,7,7] -> GlobalAveragePool -> Flatten -> Gemm "fc" -> Softmax "sm" -> y, and x -> Relu
 * "r" -> z (a second output). */
static ir_graph *head_graph(void) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {2, 12, 7, 7}, wd[2] = {5, 12};
    static float w[60], bias[5] = {1, 2, 3, 4, 5};
    for (int i = 0; i < 60; i++) w[i] = 0.01f * (float)i;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wt = th_named(g, "fc.w", TCI_DTYPE_FLOAT, 2, wd, w), *bt = vec(g, "fc.b", bias, 5);
    ir_tensor *gap = th_act(g, "gap"), *flat = th_act(g, "flat"), *fc = th_act(g, "fc"), *y = th_act(g, "y"),
              *z = th_act(g, "z");
    th_graph_io(g, &x, 1, (ir_tensor *[]){y, z}, 2);
    th_node_io(g, "gap", "GlobalAveragePool", 17, &x, 1, &gap, 1);
    th_node_io(g, "flatten", "Flatten", 17, &gap, 1, &flat, 1);
    ir_node *gemm = th_node_io(g, "fc", "Gemm", 17, (ir_tensor *[]){flat, wt, bt}, 3, &fc, 1);
    th_attr_int(g, gemm, "transB", 1);
    th_node_io(g, "sm", "Softmax", 13, &fc, 1, &y, 1);
    th_node_io(g, "r", "Relu", 14, &x, 1, &z, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    return g;
}

static int count_steps(const plan *p, plan_step_kind kind) {
    int n = 0;
    for (int i = 0; i < p->num_steps; i++) n += p->steps[i].kind == kind;
    return n;
}

/* x -> Relu -> Less(r, c) -> Not, and IsNaN(x): the comparison and the tests lower to element-wise
 * steps writing bool, and neither the Not nor the IsNaN is fused into the step before it (their
 * results are bool); Neg of int64 lowers, of int32 and a float comparison of int32 are refused. */
START_TEST(test_logic_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[2] = {2, 3};
    const float cv[3] = {0, 1, 2};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL), *r = th_act(g, "r");
    ir_tensor *c = vec(g, "c", cv, 3), *l = th_act(g, "l"), *nl = th_act(g, "nl"), *nan = th_act(g, "nan");
    ir_tensor *outs[2] = {nl, nan};
    th_graph_io(g, &x, 1, outs, 2);
    th_node_io(g, "relu", "Relu", 14, &x, 1, &r, 1);
    th_node_io(g, "less", "Less", 13, (ir_tensor *[]){r, c}, 2, &l, 1);
    th_node_io(g, "not", "Not", 1, &l, 1, &nl, 1);
    th_node_io(g, "isnan", "IsNaN", 20, &r, 1, &nan, 1);
    plan *p = gpu_plan(g);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_ELTWISE), 4);
    const plan_step *s = find_step(p, PLAN_STEP_ELTWISE, 1);
    ck_assert_int_eq(s->u.eltwise.op, BINARY_LESS);
    ck_assert_int_eq(s->u.eltwise.act.kind, ACT_NONE);
    ck_assert_int_eq(p->tensors[s->outputs[0]].dtype, TCI_DTYPE_BOOL);
    s = find_step(p, PLAN_STEP_ELTWISE, 2);
    ck_assert_int_eq(s->u.eltwise.op, BINARY_NONE);
    ck_assert_int_eq(s->u.eltwise.act.kind, ACT_NOT);
    ck_assert_int_eq(p->tensors[s->inputs[0]].dtype, TCI_DTYPE_BOOL);
    ck_assert_int_eq(p->tensors[s->outputs[0]].dtype, TCI_DTYPE_BOOL);
    s = find_step(p, PLAN_STEP_ELTWISE, 3);
    ck_assert_int_eq(s->u.eltwise.act.kind, ACT_IS_NAN);
    ck_assert_int_eq(p->tensors[s->inputs[0]].dtype, TCI_DTYPE_FLOAT16);
    ck_assert_int_eq(p->tensors[s->outputs[0]].dtype, TCI_DTYPE_BOOL);
    plan_destroy(p);
    ir_graph_destroy(g);

    /* Add(int64) -> Sign: the Sign is the Add step's activation */
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *in[2] = {th_named(g, "a", TCI_DTYPE_INT64, 2, xd, NULL),
                        th_named(g, "b", TCI_DTYPE_INT64, 2, xd, NULL)};
    ir_tensor *sum = th_act(g, "sum"), *sg = th_act(g, "sg");
    th_graph_io(g, in, 2, &sg, 1);
    th_node_io(g, "add", "Add", 14, in, 2, &sum, 1);
    th_node_io(g, "sign", "Sign", 13, &sum, 1, &sg, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(count_steps(p, PLAN_STEP_ELTWISE), 1);
    s = find_step(p, PLAN_STEP_ELTWISE, 0);
    ck_assert_int_eq(s->u.eltwise.op, BINARY_ADD);
    ck_assert_int_eq(s->u.eltwise.act.kind, ACT_SIGN);
    plan_destroy(p);
    ir_graph_destroy(g);

    /* refusals name the node */
    const char *ops[2] = {"Neg", "Less"};
    const char *want[2] = {"node 'n' (Neg): input dtype int32 has no GPU path (float, int64)",
                           "node 'n' (Less): input dtype int32 has no GPU path (float, int64)"};
    for (int k = 0; k < 2; k++) {
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_tensor *a = th_named(g, "a", TCI_DTYPE_INT32, 2, xd, NULL), *y = th_act(g, "y");
        th_graph_io(g, &a, 1, &y, 1);
        th_node_io(g, "n", ops[k], 13, (ir_tensor *[]){a, a}, k + 1, &y, 1);
        ck_assert_tci_ok(pass_optimize(g));
        ck_assert_tci_ok(pass_prepare_for_gpu(g));
        ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED, want[k]);
        ir_graph_destroy(g);
    }
}
END_TEST

/* MatMul with a 1-D operand (a YOLO head's distribution @ projection): a 1-D B is one column,
 * folded into one tall GEMM; a 1-D A is one row broadcast over B's batch. */
START_TEST(test_matmul_1d_operands) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t ad[3] = {2, 5, 4}, bd[3] = {3, 4, 6}, vd[1] = {4};
    const float proj[4] = {0, 1, 2, 3};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, ad, NULL);
    ir_tensor *m = th_named(g, "m", TCI_DTYPE_FLOAT, 3, bd, NULL);
    ir_tensor *v = th_named(g, "v", TCI_DTYPE_FLOAT, 1, vd, NULL);
    ir_tensor *w = vec(g, "w", proj, 4), *y1 = th_act(g, "y1"), *y2 = th_act(g, "y2");
    th_graph_io(g, (ir_tensor *[]){x, m, v}, 3, (ir_tensor *[]){y1, y2}, 2);
    th_node_io(g, "col", "MatMul", 13, (ir_tensor *[]){x, w}, 2, &y1, 1);
    th_node_io(g, "row", "MatMul", 13, (ir_tensor *[]){v, m}, 2, &y2, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_int_eq(y1->rank, 2);
    ck_assert_int_eq(y2->rank, 2);
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    const plan_step *s = find_step(p, PLAN_STEP_GEMM, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->u.gemm.batch, 1);
    ck_assert_int_eq(s->u.gemm.m, 10);
    ck_assert_int_eq(s->u.gemm.k, 4);
    ck_assert_int_eq(s->u.gemm.n, 1);
    s = find_step(p, PLAN_STEP_GEMM, 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->u.gemm.batch, 3);
    ck_assert_int_eq(s->u.gemm.m, 1);
    ck_assert_int_eq(s->u.gemm.n, 6);
    ck_assert_int_eq(s->u.gemm.stride_a, 0);
    ck_assert_int_eq(s->u.gemm.stride_b, 24);
    ck_assert_int_eq(s->u.gemm.stride_c, 6);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* --fp32-layers: the named node computes and stores in fp32, a cast feeds it, its neighbours
 * stay fp16; an op type selects every node of that type; unknown names are refused. */
START_TEST(test_fp32_layers) {
    ir_graph *g = head_graph();
    const char *names[] = {"sm", NULL};
    plan_options o = {.fp32_layers = names};
    plan *p;
    ck_assert_tci_ok(plan_build(g, &o, &p));
    const plan_step *sm = find_step(p, PLAN_STEP_SOFTMAX, 0), *fc = find_step(p, PLAN_STEP_GEMM, 0);
    ck_assert_ptr_nonnull(sm);
    ck_assert_int_eq(p->tensors[sm->inputs[0]].dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(p->tensors[sm->outputs[0]].dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(p->tensors[fc->outputs[0]].dtype, TCI_DTYPE_FLOAT16);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_CAST), 1);
    const plan_step *cast = find_step(p, PLAN_STEP_CAST, 0);
    ck_assert_str_eq(cast->label, "cast fp16->fp32");
    ck_assert_int_eq(cast->inputs[0], fc->outputs[0]);
    ck_assert_int_eq(cast->outputs[0], sm->inputs[0]);
    ck_assert_int_eq(cast->u.cast.count, 10);
    /* the engine input is fp16: no fp32 node reads it */
    ck_assert_int_eq(p->tensors[p->input_tensors[0]].dtype, TCI_DTYPE_FLOAT16);
    plan_destroy(p);

    const char *types[] = {"Relu", NULL};
    o.fp32_layers = types;
    ck_assert_tci_ok(plan_build(g, &o, &p));
    /* x is read by the fp32 Relu: it arrives fp32 (NHWC8 for the pooling), and the fp16 pooling
     * gets a cast */
    const plan_tensor *x = &p->tensors[p->input_tensors[0]];
    ck_assert_int_eq(x->dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(x->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_uint_eq(x->bytes, 2 * 16 * 7 * 7 * 4);
    const plan_step *pool = find_step(p, PLAN_STEP_GLOBAL_POOL, 0);
    ck_assert_int_eq(p->tensors[pool->inputs[0]].dtype, TCI_DTYPE_FLOAT16);
    ck_assert_int_eq(p->tensors[p->output_tensors[1]].dtype, TCI_DTYPE_FLOAT);
    ck_assert_int_eq(p->tensors[p->output_tensors[0]].dtype, TCI_DTYPE_FLOAT16);
    plan_destroy(p);

    const char *unknown[] = {"nope", NULL};
    o.fp32_layers = unknown;
    ck_assert_tci_error(plan_build(g, &o, &p), TCI_ERR_INVALID_ARGUMENT, "'nope'");
    ir_graph_destroy(g);
}
END_TEST

/* --fp32-layers patterns: shell wildcards over node names ('*' crosses '/'), beside exact names
 * and op types; a pattern that matches nothing is refused like an unknown name. */
START_TEST(test_fp32_layer_patterns) {
    ir_graph *g = head_graph(); /* nodes gap, flatten, fc, sm, r */
    bool mask[8];
    ck_assert_uint_eq(g->num_nodes, 5);
    const char *f_star[] = {"f*", NULL};
    plan_options o = {.fp32_layers = f_star};
    ck_assert_tci_ok(plan_fp32_nodes(g, &o, mask));
    for (size_t i = 0; i < g->num_nodes; i++)
        ck_assert_int_eq(mask[i], g->nodes[i]->name[0] == 'f');
    const char *mixed[] = {"?m", "Relu", NULL};
    o.fp32_layers = mixed;
    ck_assert_tci_ok(plan_fp32_nodes(g, &o, mask));
    for (size_t i = 0; i < g->num_nodes; i++)
        ck_assert_int_eq(mask[i], strcmp(g->nodes[i]->name, "sm") == 0 ||
                                      strcmp(g->nodes[i]->name, "r") == 0);
    ck_assert(plan_fp32_selects("/layer1/*", &(ir_node){.name = "/layer1/layer1.0/conv1/Conv",
                                                         .op_type = "Conv"}));
    ck_assert(!plan_fp32_selects("/layer1/*", &(ir_node){.name = "/layer2/layer2.0/conv1/Conv",
                                                          .op_type = "Conv"}));
    const char *none[] = {"q*", NULL};
    o.fp32_layers = none;
    ck_assert_tci_error(plan_fp32_nodes(g, &o, mask), TCI_ERR_INVALID_ARGUMENT, "'q*'");
    ir_graph_destroy(g);
}
END_TEST

/* The GPU fp32 baseline: every float tensor fp32, no casts, the GEMM bias still a packing source
 * and counted at fp32 size. */
START_TEST(test_all_fp32) {
    ir_graph *g = head_graph();
    plan_options o = {.precision = TCI_PRECISION_FP32};
    plan *p, *half;
    ck_assert_tci_ok(plan_build(g, &o, &p));
    ck_assert_tci_ok(plan_build(g, NULL, &half));
    ck_assert_int_eq(count_steps(p, PLAN_STEP_CAST), 0);
    for (int t = 0; t < p->num_tensors; t++)
        ck_assert_msg(p->tensors[t].dtype == TCI_DTYPE_FLOAT, "tensor %s is %s", p->tensors[t].name,
                      tci_dtype_name(p->tensors[t].dtype));
    const plan_step *fc = find_step(p, PLAN_STEP_GEMM, 0);
    ck_assert(p->tensors[fc->inputs[2]].packed_source);
    ck_assert(!p->tensors[fc->inputs[1]].packed_source);
    ck_assert_uint_eq(p->weight_bytes, 2 * half->weight_bytes);
    ck_assert_int_eq(p->num_steps, half->num_steps);
    plan_destroy(half);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* --precision bf16: the fp16 plan with every 16-bit float tensor bfloat16 (same steps, sizes and
 * layouts), constants rounded to bf16, and fp32 layers reached through "cast bf16->fp32". */
START_TEST(test_bf16) {
    ir_graph *g = head_graph();
    const char *names[] = {"sm", NULL};
    plan_options o = {.precision = TCI_PRECISION_BF16, .fp32_layers = names}, ho = {.fp32_layers = names};
    plan *p, *half;
    ck_assert_tci_ok(plan_build(g, &o, &p));
    ck_assert_tci_ok(plan_build(g, &ho, &half));
    ck_assert_int_eq(p->num_steps, half->num_steps);
    ck_assert_int_eq(p->num_tensors, half->num_tensors);
    ck_assert_uint_eq(p->weight_bytes, half->weight_bytes);
    for (int t = 0; t < p->num_tensors; t++) {
        const plan_tensor *a = &p->tensors[t], *b = &half->tensors[t];
        tci_dtype want = b->dtype == TCI_DTYPE_FLOAT16 ? TCI_DTYPE_BFLOAT16 : b->dtype;
        ck_assert_msg(a->dtype == want, "tensor %s is %s", a->name, tci_dtype_name(a->dtype));
        ck_assert_uint_eq(a->bytes, b->bytes);
        ck_assert_int_eq(a->layout, b->layout);
    }
    const plan_step *cast = find_step(p, PLAN_STEP_CAST, 0), *fc = find_step(p, PLAN_STEP_GEMM, 0);
    ck_assert_str_eq(cast->label, "cast bf16->fp32");
    /* the GEMM weights (0.01 * i) are uploaded as bfloat16 bits */
    const plan_tensor *w = &p->tensors[fc->inputs[1]];
    ck_assert_int_eq(w->memory, PLAN_MEM_CONSTANT);
    const uint16_t *bits = w->host_data;
    for (int i = 0; i < 60; i++) ck_assert_uint_eq(bits[i], float_to_bfloat16(0.01f * (float)i));
    plan_destroy(half);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* 1-D Conv (+Relu) and ConvTranspose run as 2-D ones over N x C x 1 x L: each
 * step reads and writes NHWC8 4-D temporaries, with layout steps from and to the dense 3-D
 * tensors, and carries the geometry with a unit first axis. */
START_TEST(test_conv1d_lowering) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[3] = {2, 16, 20}, wd[3] = {16, 8, 5}, td[3] = {16, 4, 4};
    float w[16 * 8 * 5], wt_values[16 * 4 * 4];
    for (int i = 0; i < 16 * 8 * 5; i++) w[i] = (float)(i % 9) - 4.0f;
    for (int i = 0; i < 16 * 4 * 4; i++) wt_values[i] = (float)(i % 5) - 2.0f;
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 3, wd, w);
    ir_tensor *tw = th_named(g, "tw", TCI_DTYPE_FLOAT, 3, td, wt_values);
    ir_tensor *c = th_act(g, "c"), *r = th_act(g, "r"), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    ir_node *conv = th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x, wt}, 2, &c, 1);
    th_attr_ints(g, conv, "pads", (const int64_t[]){2, 2}, 2);
    th_attr_ints(g, conv, "dilations", (const int64_t[]){1}, 1);
    th_attr_int(g, conv, "group", 2);
    th_node_io(g, "relu", "Relu", 14, &c, 1, &r, 1);
    ir_node *convt = th_node_io(g, "up", "ConvTranspose", 17, (ir_tensor *[]){r, tw}, 2, &y, 1);
    th_attr_ints(g, convt, "strides", (const int64_t[]){2}, 1);
    th_attr_ints(g, convt, "pads", (const int64_t[]){1, 1}, 2);
    plan *p = gpu_plan(g);

    const plan_step *s = find_step(p, PLAN_STEP_CONV, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s->label, "Conv+Relu");
    ck_assert(!s->u.conv.has_residual);
    ck_assert_int_eq(s->u.conv.act.kind, ACT_RELU);
    const conv_geom *cg = &s->u.conv.geom;
    ck_assert_int_eq(cg->n, 2);
    ck_assert_int_eq(cg->c, 16);
    ck_assert_int_eq(cg->k, 16);
    ck_assert_int_eq(cg->h, 1);
    ck_assert_int_eq(cg->w, 20);
    ck_assert_int_eq(cg->kernel_h, 1);
    ck_assert_int_eq(cg->kernel_w, 5);
    ck_assert_int_eq(cg->out_h, 1);
    ck_assert_int_eq(cg->out_w, 20);
    ck_assert_int_eq(cg->stride_h, 1);
    ck_assert_int_eq(cg->stride_w, 1);
    ck_assert_int_eq(cg->dilation_h, 1);
    ck_assert_int_eq(cg->pad_top + cg->pad_bottom, 0);
    ck_assert_int_eq(cg->pad_left, 2);
    ck_assert_int_eq(cg->pad_right, 2);
    ck_assert_int_eq(cg->groups, 2);
    /* weights (K, C/group, 1, S), the values unchanged */
    const plan_tensor *pw = &p->tensors[s->inputs[1]];
    ck_assert_int_eq(pw->rank, 4);
    ck_assert_int_eq(pw->dims[2], 1);
    ck_assert_int_eq(pw->dims[3], 5);
    ck_assert_float_eq(((const float *)pw->host_data)[17], w[17]);
    /* X as an NHWC8 N x C x 1 x L, filled from x by a layout step */
    const plan_tensor *in = &p->tensors[s->inputs[0]];
    ck_assert_int_eq(in->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(in->rank, 4);
    ck_assert_int_eq(in->dims[1], 16);
    ck_assert_int_eq(in->dims[2], 1);
    ck_assert_int_eq(in->dims[3], 20);
    const plan_tensor *out = &p->tensors[s->outputs[0]];
    ck_assert_int_eq(out->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(out->dims[2], 1);
    ck_assert_int_eq(out->dims[3], 20);
    /* the step before the conv fills its input from the dense x; the one after writes 'r' */
    const plan_step *before = s - 1, *after = s + 1;
    ck_assert_int_eq(before->kind, PLAN_STEP_LAYOUT);
    ck_assert(!before->u.layout.to_dense);
    ck_assert_int_eq(after->kind, PLAN_STEP_LAYOUT);
    ck_assert(after->u.layout.to_dense);
    ck_assert_int_eq(after->inputs[0], s->outputs[0]);
    const plan_tensor *rd = &p->tensors[after->outputs[0]];
    ck_assert_str_eq(rd->name, "r");
    ck_assert_int_eq(rd->layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(rd->rank, 3);

    /* ConvTranspose: (C, K/group, 1, S) weights, out (20 - 1) * 2 - 2 + 4 = 40 */
    const plan_step *t = find_step(p, PLAN_STEP_CONV_TRANSPOSE, 0);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->u.conv.geom.h, 1);
    ck_assert_int_eq(t->u.conv.geom.out_h, 1);
    ck_assert_int_eq(t->u.conv.geom.out_w, 40);
    ck_assert_int_eq(t->u.conv.geom.stride_w, 2);
    ck_assert_int_eq(t->u.conv.geom.kernel_w, 4);
    ck_assert_int_eq(t->u.conv.geom.k, 4);
    const plan_tensor *tww = &p->tensors[t->inputs[1]];
    ck_assert_int_eq(tww->rank, 4);
    ck_assert_int_eq(tww->dims[0], 16);
    ck_assert_int_eq(tww->dims[1], 4);
    ck_assert_int_eq(tww->dims[2], 1);
    ck_assert_int_eq(p->tensors[t->inputs[0]].dims[3], 20);
    const plan_step *last = &p->steps[p->num_steps - 1];
    ck_assert_int_eq(last->kind, PLAN_STEP_LAYOUT);
    ck_assert_int_eq(last->inputs[0], t->outputs[0]);
    const plan_tensor *yd = &p->tensors[last->outputs[0]];
    ck_assert_int_eq(yd->rank, 3);
    ck_assert_int_eq(yd->dims[2], 40);
    ck_assert_int_eq(yd->output_index, 0);
    /* x -> NHWC8, conv -> r, r -> NHWC8, convT -> y */
    ck_assert_int_eq(p->num_layout_conversions, 4);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_pad8) {
    ck_assert_int_eq(plan_pad8(1), 8);
    ck_assert_int_eq(plan_pad8(8), 8);
    ck_assert_int_eq(plan_pad8(9), 16);
    ck_assert_int_eq(plan_pad8(2048), 2048);
}
END_TEST

/* DenseNet's Concat: 7 convolutions' NHWC8 outputs (16, 8, 8, 8, 8, 8 and 3 channels) joined on
 * the channels, then a dense Concat of 6 inputs on axis 1: each input a 2-D block of the output,
 * up to PLAN_MAX_STEP_INPUTS blocks a step (one launch), the NHWC8 padding filled first. */
START_TEST(test_concat_blocks) {
    enum { K = 7, D = 6 };
    static const int64_t ch[K] = {16, 8, 8, 8, 8, 8, 3};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 8, 6, 6}, zd[2] = {2, 3};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *z = th_named(g, "z", TCI_DTYPE_FLOAT, 2, zd, NULL);
    static float w[16 * 8];
    for (int i = 0; i < 16 * 8; i++) w[i] = 0.01f * (float)(i % 13);
    ir_tensor *parts[K], *dparts[D];
    for (int k = 0; k < K; k++) {
        char name[16];
        int64_t wd[4] = {ch[k], 8, 1, 1};
        snprintf(name, sizeof name, "w%d", k);
        ir_tensor *wt = th_named(g, name, TCI_DTYPE_FLOAT, 4, wd, w);
        snprintf(name, sizeof name, "c%d", k);
        parts[k] = th_act(g, name);
        th_node_io(g, name, "Conv", 17, (ir_tensor *[]){x, wt}, 2, &parts[k], 1);
    }
    for (int k = 0; k < D; k++) {
        char name[16];
        snprintf(name, sizeof name, "e%d", k);
        dparts[k] = th_act(g, name);
        th_node_io(g, name, "Relu", 14, &z, 1, &dparts[k], 1);
    }
    ir_tensor *cat = th_act(g, "cat"), *y = th_act(g, "y"), *dcat = th_act(g, "dcat");
    th_attr_int(g, th_node_io(g, "cat", "Concat", 13, parts, K, &cat, 1), "axis", 1);
    th_node_io(g, "relu", "Relu", 14, &cat, 1, &y, 1);
    th_attr_int(g, th_node_io(g, "dcat", "Concat", 13, dparts, D, &dcat, 1), "axis", 1);
    th_graph_io(g, (ir_tensor *[]){x, z}, 2, (ir_tensor *[]){y, dcat}, 2);
    plan *p = gpu_plan(g);
    const plan_step *s0 = find_step(p, PLAN_STEP_COPY, 0), *s1 = find_step(p, PLAN_STEP_COPY, 1);
    ck_assert_ptr_nonnull(s0);
    ck_assert_ptr_nonnull(s1);
    ck_assert_int_eq(p->tensors[s0->outputs[0]].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(s0->u.copy.num_blocks, 5);
    ck_assert_int_eq(s1->u.copy.num_blocks, 2);
    ck_assert_int_eq(s1->outputs[0], s0->outputs[0]);
    const int64_t at[K] = {0, 16, 24, 32, 40, 48, 56};
    for (int k = 0; k < K; k++) {
        const plan_copy_block *b = &(k < 5 ? s0 : s1)->u.copy.blocks[k < 5 ? k : k - 5];
        const int64_t cp = (ch[k] + 7) / 8 * 8;
        ck_assert_int_eq(b->rows, 36);
        ck_assert_int_eq(b->len, ch[k]);
        ck_assert_int_eq(b->src_ld, cp);
        ck_assert_int_eq(b->dst_ld, 64); /* 59 channels, padded */
        ck_assert_int_eq(b->dst_offset, at[k]);
    }
    const plan_step *fill = find_step(p, PLAN_STEP_FILL, 0);
    ck_assert_ptr_nonnull(fill);
    ck_assert(fill < s0);
    /* the dense Concat: 6 blocks of (2 rows, 3), 18 apart, in two steps */
    const plan_step *d0 = find_step(p, PLAN_STEP_COPY, 2), *d1 = find_step(p, PLAN_STEP_COPY, 3);
    ck_assert_ptr_nonnull(d1);
    ck_assert_ptr_null(find_step(p, PLAN_STEP_COPY, 4));
    ck_assert_int_eq(d0->u.copy.num_blocks, 5);
    ck_assert_int_eq(d1->u.copy.num_blocks, 1);
    ck_assert_int_eq(p->tensors[d0->outputs[0]].layout, PLAN_LAYOUT_DENSE);
    const plan_copy_block *last = &d1->u.copy.blocks[0];
    ck_assert_int_eq(last->rows, 2);
    ck_assert_int_eq(last->len, 3);
    ck_assert_int_eq(last->src_ld, 3);
    ck_assert_int_eq(last->dst_ld, 18);
    ck_assert_int_eq(last->dst_offset, 15);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* A roll (torch.roll exports two Slices and a Concat) on axis 1, then one on axis 2 of its
 * result, as Swin's shifted windows: each Concat reads its Slices in place (one step each, no
 * Slice step), and the planned blocks, replayed on the host, give the CPU reference's output. */
START_TEST(test_concat_reads_slices) {
    enum { N = 2, H = 7, W = 5, C = 3 };
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {N, H, W, C};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    const int64_t one[1] = {1};
    int64_t roll_h[2][2] = {{4, 7}, {0, 4}}, roll_w[2][2] = {{3, 5}, {0, 3}};
    ir_tensor *t = x, *outs[2];
    for (int r = 0; r < 2; r++) {
        ir_tensor *parts[2];
        for (int k = 0; k < 2; k++) {
            char name[24];
            const int64_t *range = r ? roll_w[k] : roll_h[k];
            int64_t axis = r ? 2 : 1;
            snprintf(name, sizeof name, "s%d%d", r, k);
            ir_tensor *st = th_named(g, NULL, TCI_DTYPE_INT64, 1, one, &range[0]);
            ir_tensor *en = th_named(g, NULL, TCI_DTYPE_INT64, 1, one, &range[1]);
            ir_tensor *ax = th_named(g, NULL, TCI_DTYPE_INT64, 1, one, &axis);
            parts[k] = th_act(g, name);
            th_node_io(g, name, "Slice", 13, (ir_tensor *[]){t, st, en, ax}, 4, &parts[k], 1);
        }
        outs[r] = th_act(g, r ? "y" : "rolled_h");
        th_attr_int(g, th_node_io(g, r ? "cat_w" : "cat_h", "Concat", 13, parts, 2, &outs[r], 1),
                    "axis", r ? 2 : 1);
        t = outs[r];
    }
    th_graph_io(g, &x, 1, &outs[1], 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan_options o = {.precision = TCI_PRECISION_FP32};
    plan *p;
    ck_assert_tci_ok(plan_build(g, &o, &p));
    ck_assert_int_eq(p->num_steps, 2);
    float *buf[64] = {0};
    ck_assert_int_lt(p->num_tensors, 64);
    float xv[N * H * W * C];
    for (int i = 0; i < N * H * W * C; i++) xv[i] = (float)i;
    for (int i = 0; i < p->num_tensors; i++) {
        const plan_tensor *pt = &p->tensors[i];
        int64_t count = 1;
        for (int d = 0; d < pt->rank; d++) count *= pt->dims[d];
        buf[i] = calloc((size_t)count, sizeof(float));
    }
    memcpy(buf[p->input_tensors[0]], xv, sizeof xv);
    for (int i = 0; i < p->num_steps; i++) {
        const plan_step *s = &p->steps[i];
        ck_assert_int_eq(s->kind, PLAN_STEP_COPY);
        ck_assert_str_eq(s->label, "Slice+Concat");
        ck_assert_int_eq(s->u.copy.num_blocks, 2);
        for (int k = 0; k < s->u.copy.num_blocks; k++) {
            const plan_copy_block *b = &s->u.copy.blocks[k];
            const float *src = buf[s->inputs[k]] + b->src_offset;
            float *dst = buf[s->outputs[0]] + b->dst_offset;
            for (int64_t r = 0; r < b->rows; r++)
                for (int64_t c = 0; c < b->len; c++) dst[r * b->dst_ld + c] = src[r * b->src_ld + c];
        }
    }
    /* y[n, h, w, c] = x[n, (h + 4) % 7, (w + 3) % 5, c] */
    const float *y = buf[p->output_tensors[0]];
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++)
                for (int c = 0; c < C; c++)
                    ck_assert_float_eq(y[((n * H + h) * W + w) * C + c],
                                       xv[((n * H + (h + 4) % H) * W + (w + 3) % W) * C + c]);
    for (int i = 0; i < p->num_tensors; i++) free(buf[i]);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

static int plan_tensor_named(const plan *p, const char *name) {
    for (int i = 0; i < p->num_tensors; i++)
        if (p->tensors[i].name && strcmp(p->tensors[i].name, name) == 0) return i;
    ck_abort_msg("no plan tensor '%s'", name);
    return -1;
}

/* r = Relu(x[6, 64]); Split(r, [2, 1, 3]) along rows: a part that starts on the plan's
 * alignment is a view of r (no step), one that does not is copied. fp16 rows are 128 bytes (the
 * third part starts at 384: copied), fp32 rows 256 (every part a view). */
START_TEST(test_split_views) {
    for (int fp32 = 0; fp32 < 2; fp32++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int64_t xd[2] = {6, 64};
        ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL), *r = th_act(g, "r");
        th_node_io(g, "relu", "Relu", 13, &x, 1, &r, 1);
        const int64_t sizes[3] = {2, 1, 3}, three = 3;
        ir_tensor *split = th_named(g, NULL, TCI_DTYPE_INT64, 1, &three, sizes);
        ir_tensor *parts[3] = {th_act(g, "a"), th_act(g, "b"), th_act(g, "c")};
        th_attr_int(g, th_node_io(g, "split", "Split", 13, (ir_tensor *[]){r, split}, 2, parts, 3),
                    "axis", 0);
        ir_tensor *ys[3] = {th_act(g, "ya"), th_act(g, "yb"), th_act(g, "yc")};
        for (int k = 0; k < 3; k++) th_node_io(g, NULL, "Sigmoid", 13, &parts[k], 1, &ys[k], 1);
        th_graph_io(g, &x, 1, ys, 3);
        ck_assert_tci_ok(pass_optimize(g));
        ck_assert_tci_ok(pass_prepare_for_gpu(g));
        plan_options o = {.precision = fp32 ? TCI_PRECISION_FP32 : TCI_PRECISION_FP16};
        plan *p;
        ck_assert_tci_ok(plan_build(g, &o, &p));
        ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), fp32 ? 0 : 1);
        ck_assert_int_eq(p->num_views, fp32 ? 3 : 2);
        ck_assert_int_eq(p->num_steps, fp32 ? 4 : 5);
        const size_t row = (size_t)64 * (fp32 ? 4 : 2);
        int ri = plan_tensor_named(p, "r");
        for (int k = 0; k < 3; k++) {
            const plan_tensor *t = &p->tensors[plan_tensor_named(p, (const char *[]){"a", "b", "c"}[k])];
            bool view = fp32 || k < 2;
            ck_assert_int_eq(t->alias_of, view ? ri : -1);
            ck_assert_uint_eq(t->view_bytes, view ? row * (size_t)(k ? sizes[0] + (k > 1) : 0) : 0);
            if (view) ck_assert_uint_eq(t->offset, p->tensors[ri].offset + t->view_bytes);
        }
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

/* y = Add(b, r) with b the second row of r[2, 64] (a view at 256 bytes in fp32), after a Sigmoid
 * of the first row: r dies at the Add and is y's size, but the Add reads b where it would write
 * y, so y gets memory of its own. */
START_TEST(test_no_write_over_a_viewed_tensor) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[2] = {2, 64};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL), *r = th_act(g, "r");
    th_node_io(g, "relu", "Relu", 13, &x, 1, &r, 1);
    ir_tensor *parts[2] = {th_act(g, "a"), th_act(g, "b")}, *y = th_act(g, "y"), *ya = th_act(g, "ya");
    th_attr_int(g, th_node_io(g, "split", "Split", 18, &r, 1, parts, 2), "axis", 0);
    th_attr_int(g, g->nodes[g->num_nodes - 1], "num_outputs", 2);
    th_node_io(g, "sig", "Sigmoid", 13, &parts[0], 1, &ya, 1);
    th_node_io(g, "add", "Add", 14, (ir_tensor *[]){parts[1], r}, 2, &y, 1);
    th_graph_io(g, &x, 1, (ir_tensor *[]){y, ya}, 2);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan_options o = {.precision = TCI_PRECISION_FP32};
    plan *p;
    ck_assert_tci_ok(plan_build(g, &o, &p));
    ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 0);
    const plan_tensor *rt = &p->tensors[plan_tensor_named(p, "r")];
    const plan_tensor *bt = &p->tensors[plan_tensor_named(p, "b")];
    const plan_tensor *yt = &p->tensors[plan_tensor_named(p, "y")];
    ck_assert_uint_eq(bt->view_bytes, 256);
    /* y's bytes and r's do not overlap */
    ck_assert(yt->offset >= rt->offset + rt->bytes || rt->offset >= yt->offset + yt->bytes);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_conv_bn_add_relu_fuse);
    tcase_add_test(tc, test_head_conversion_and_gemm_fusion);
    tcase_add_test(tc, test_eltwise_chain_memory_and_strides);
    tcase_add_test(tc, test_needs_layout_pass);
    tcase_add_test(tc, test_lrn_lowering);
    tcase_add_test(tc, test_grouped_conv_merge);
    tcase_add_test(tc, test_batchnorm_any_rank_lowering);
    tcase_add_test(tc, test_batchnorm_training_lowering);
    tcase_add_test(tc, test_groupnorm_lowering);
    tcase_add_test(tc, test_gpu_refusals);
    tcase_add_test(tc, test_reduce_max_lowering);
    tcase_add_test(tc, test_reduce_noop_lowering);
    tcase_add_test(tc, test_argreduce_lowering);
    tcase_add_test(tc, test_mod_lowering);
    tcase_add_test(tc, test_scalar_factor_lowering);
    tcase_add_test(tc, test_batchnorm_as_depthwise_step);
    tcase_add_test(tc, test_logic_lowering);
    tcase_add_test(tc, test_matmul_1d_operands);
    tcase_add_test(tc, test_fp32_layers);
    tcase_add_test(tc, test_fp32_layer_patterns);
    tcase_add_test(tc, test_all_fp32);
    tcase_add_test(tc, test_bf16);
    tcase_add_test(tc, test_pad8);
    tcase_add_test(tc, test_conv1d_lowering);
    tcase_add_test(tc, test_concat_blocks);
    tcase_add_test(tc, test_concat_reads_slices);
    tcase_add_test(tc, test_split_views);
    tcase_add_test(tc, test_no_write_over_a_viewed_tensor);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
