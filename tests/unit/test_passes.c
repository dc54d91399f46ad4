/* Graph passes: shape-chain folding, pass-through removal, dead nodes, inference of shapes; the
 * GPU fusions and layouts. */
#include <math.h>
#include <stdio.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

static ir_tensor *named(ir_graph *g, const char *name) {
    return th_named(g, name, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
}

static ir_tensor *const_i64(ir_graph *g, const char *name, const int64_t *v, int64_t n) {
    return th_named(g, name, TCI_DTYPE_INT64, 1, &n, v);
}

/* x[N,3,4] -> Shape -> Gather(0) -> Unsqueeze -> Concat(.., [-1]) -> Reshape(x) -> Identity
 * -> Relu -> y, plus a dead Sigmoid: after the passes only Reshape and Relu remain, and the
 * Reshape's shape input is a folded constant [2, 12]. */
START_TEST(test_pytorch_shape_chain_folds) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xdims[3] = {2, 3, 4};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xdims, NULL);
    const int64_t zero = 0, minus_one = -1;
    ir_tensor *idx = const_i64(g, "idx", &zero, 1);
    idx->rank = 0; /* scalar index: Gather drops the axis */
    ir_tensor *axes = const_i64(g, "axes", &zero, 1);
    ir_tensor *rest = const_i64(g, "rest", &minus_one, 1);
    ir_tensor *s = named(g, "s"), *gathered = named(g, "g"), *u = named(g, "u"),
              *shape = named(g, "shape"), *r = named(g, "r"), *id = named(g, "id"),
              *y = named(g, "y"), *dead = named(g, "dead");
    th_graph_io(g, &x, 1, &y, 1);
    /* deliberately out of order: the sort must fix it */
    th_node_io(g, "relu", "Relu", 17, (ir_tensor *[]){id}, 1, (ir_tensor *[]){y}, 1);
    th_node_io(g, "shape", "Shape", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){s}, 1);
    th_node_io(g, "gather", "Gather", 17, (ir_tensor *[]){s, idx}, 2, (ir_tensor *[]){gathered}, 1);
    ir_node *unsq = th_node_io(g, "unsqueeze", "Unsqueeze", 17, (ir_tensor *[]){gathered, axes}, 2,
                         (ir_tensor *[]){u}, 1);
    (void)unsq;
    ir_node *concat = th_node_io(g, "concat", "Concat", 17, (ir_tensor *[]){u, rest}, 2,
                           (ir_tensor *[]){shape}, 1);
    th_attr_int(g, concat, "axis", 0);
    th_node_io(g, "reshape", "Reshape", 17, (ir_tensor *[]){x, shape}, 2, (ir_tensor *[]){r}, 1);
    th_node_io(g, "identity", "Identity", 17, (ir_tensor *[]){r}, 1, (ir_tensor *[]){id}, 1);
    th_node_io(g, "unused", "Sigmoid", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){dead}, 1);

    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_uint_eq(g->num_nodes, 2);
    ck_assert_str_eq(g->nodes[0]->op_type, "Reshape");
    ck_assert_str_eq(g->nodes[1]->op_type, "Relu");
    ck_assert_ptr_eq(g->nodes[1]->inputs[0], r); /* Identity bypassed */
    ck_assert_ptr_nonnull(shape->data);
    ck_assert_int_eq(((int64_t *)shape->data)[0], 2);
    ck_assert_int_eq(((int64_t *)shape->data)[1], -1);
    ck_assert_int_eq(y->rank, 2);
    ck_assert_int_eq(y->dims[0], 2);
    ck_assert_int_eq(y->dims[1], 12);

    /* and it still computes: relu(reshape(x)) */
    exec_cpu *e;
    ck_assert_tci_ok(exec_cpu_create(g, &e));
    float data[24];
    for (int i = 0; i < 24; i++) data[i] = (float)(i - 12);
    int64_t dims[3] = {2, 3, 4};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 3, dims, data);
    ck_assert_tci_ok(exec_cpu_run(e, &in, 1));
    const tci_tensor *out = exec_cpu_output(e, 0);
    ck_assert_int_eq(out->rank, 2);
    ck_assert_int_eq(out->dims[1], 12);
    for (int i = 0; i < 24; i++)
        ck_assert_float_eq(((float *)out->data)[i], data[i] > 0 ? data[i] : 0.0f);
    /* wrong input shape is refused with both shapes named */
    int64_t bad[3] = {2, 3, 5};
    tci_tensor wrong = th_tensor(TCI_DTYPE_FLOAT, 3, bad, data);
    ck_assert_tci_error(exec_cpu_run(e, &wrong, 1), TCI_ERR_INVALID_ARGUMENT,
                        "input 'x' has shape 2x3x5, the model expects 2x3x4");
    exec_cpu_destroy(e);
    ir_graph_destroy(g);
}
END_TEST

/* An output produced by a graph-output Identity keeps its node. */
START_TEST(test_identity_to_graph_output_kept) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x = named(g, "x"), *y = named(g, "y");
    x->is_graph_input = true;
    x->dtype = TCI_DTYPE_FLOAT;
    x->rank = 1;
    x->dims[0] = 3;
    y->is_graph_output = true;
    th_node_io(g, "id", "Identity", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){y}, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_uint_eq(g->num_nodes, 1);
    ck_assert_int_eq(y->dims[0], 3);
    ir_graph_destroy(g);
}
END_TEST

/* An Identity of a constant (exporters put one on shared weights) is that constant, so what
 * reads it folds in the same sweep: NF-Nets' weight standardisation, a training-mode
 * BatchNormalization of the weight, leaves no node. */
START_TEST(test_identity_of_constant_folds_through) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const float w[6] = {1, 2, 3, 4, 5, 7}, gain[2] = {1, 1}, zero[2] = {0, 0}, one[2] = {1, 1};
    int64_t wd[3] = {1, 2, 3}, cd[1] = {2};
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 3, wd, w);
    ir_tensor *gt = th_named(g, "gain", TCI_DTYPE_FLOAT, 1, cd, gain);
    ir_tensor *g2 = th_named(g, "gain_id", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *b = th_named(g, "b", TCI_DTYPE_FLOAT, 1, cd, zero);
    ir_tensor *m = th_named(g, "m", TCI_DTYPE_FLOAT, 1, cd, zero);
    ir_tensor *v = th_named(g, "v", TCI_DTYPE_FLOAT, 1, cd, one);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_node_io(g, "id", "Identity", 17, &gt, 1, &g2, 1);
    ir_node *bn =
        th_node_io(g, "bn", "BatchNormalization", 15, (ir_tensor *[]){wt, g2, b, m, v}, 5, &y, 1);
    th_attr_int(g, bn, "training_mode", 1);
    y->is_graph_output = true;
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_uint_eq(g->num_nodes, 0);
    ck_assert_ptr_nonnull(y->data);
    /* channel 0 holds 1, 2, 3: mean 2, biased variance 2/3 */
    const float *yd = y->data;
    ck_assert_float_eq_tol(yd[0], -1.0f / sqrtf(2.0f / 3.0f + 1e-5f), 1e-5f);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_duplicate_producer_rejected) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x = named(g, "x"), *y = named(g, "y");
    x->is_graph_input = true;
    th_node_io(g, "a", "Relu", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){y}, 1);
    th_node_io(g, "b", "Relu", 17, (ir_tensor *[]){x}, 1, (ir_tensor *[]){y}, 1);
    ck_assert_tci_error(pass_optimize(g), TCI_ERR_INVALID_MODEL,
                        "output 'y' is also produced by node 'a'");
    ir_graph_destroy(g);
}
END_TEST

/* ---- GPU fusion passes (pass_fuse_for_gpu): decisions on the IR, no plan, no GPU ---- */

static ir_tensor *const_f32(ir_graph *g, const char *name, const float *v, int rank,
                            const int64_t *dims) {
    return th_named(g, name, TCI_DTYPE_FLOAT, rank, dims, v);
}

/* x -> Conv(w, b) -> BatchNormalization -> Add(shortcut = x) -> Relu -> y */
START_TEST(test_fuse_conv_bn_residual_relu) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 2, 3, 3}, wd[4] = {2, 2, 1, 1}, vd[1] = {2};
    const float w[4] = {1, 2, 3, 4}, b[2] = {0.5f, -1}, gamma[2] = {2, 1}, beta[2] = {0, 1},
                mean[2] = {1, 0}, var[2] = {3, 0};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *c = named(g, "c"), *bn = named(g, "bn"), *sum = named(g, "sum"), *y = named(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    ir_node *conv = th_node_io(
        g, "conv", "Conv", 17,
        (ir_tensor *[]){x, const_f32(g, "w", w, 4, wd), const_f32(g, "b", b, 1, vd)}, 3, &c, 1);
    ir_node *bnn = th_node_io(g, "bn", "BatchNormalization", 15,
                              (ir_tensor *[]){c, const_f32(g, "gamma", gamma, 1, vd),
                                              const_f32(g, "beta", beta, 1, vd),
                                              const_f32(g, "mean", mean, 1, vd),
                                              const_f32(g, "var", var, 1, vd)},
                              5, &bn, 1);
    ir_node *add = th_node_io(g, "add", "Add", 14, (ir_tensor *[]){bn, x}, 2, &sum, 1);
    ir_node *relu = th_node_io(g, "relu", "Relu", 14, &sum, 1, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_fuse_for_gpu(g));

    const ir_epilogue *e = conv->epilogue;
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->label, "Conv+BatchNormalization+Add+Relu");
    ck_assert_ptr_eq(e->output, y);
    ck_assert_ptr_eq(e->residual, x);
    ck_assert_ptr_eq(e->residual_add, add);
    ck_assert_int_eq(e->act.kind, ACT_RELU);
    ck_assert_ptr_eq(bnn->fused_into, conv);
    ck_assert_ptr_eq(add->fused_into, conv);
    ck_assert_ptr_eq(relu->fused_into, conv);
    /* folded: w * gamma / sqrt(var + eps), (b - mean) * that + beta; the Conv's own inputs are
     * untouched, so the CPU reference still computes the unfused graph */
    const float *fw = e->weights->data, *fb = e->bias->data;
    double s0 = 2 / sqrt(3 + 1e-5), s1 = 1 / sqrt(0 + 1e-5);
    ck_assert_float_eq_tol(fw[0], (float)(1 * s0), 1e-6f);
    ck_assert_float_eq_tol(fw[3], (float)(4 * s1), 1e-2f);
    ck_assert_float_eq_tol(fb[0], (float)((0.5 - 1) * s0 + 0), 1e-6f);
    ck_assert_float_eq_tol(fb[1], (float)(-1 * s1 + 1), 1e-2f);
    ck_assert_float_eq(((const float *)conv->inputs[1]->data)[0], 1.0f);
    ck_assert_uint_eq(g->num_nodes, 4);

    /* a second run finds the graph fused and changes nothing */
    size_t tensors = g->num_tensors;
    ck_assert_tci_ok(pass_fuse_for_gpu(g));
    ck_assert_uint_eq(g->num_tensors, tensors);
    ck_assert_ptr_eq(conv->epilogue, e);
    ir_graph_destroy(g);
}
END_TEST

/* MatMul + Add(bias) + Gelu(tanh) fuse, and so does Gemm + Sigmoid (tcinfer's GEMM kernels
 * apply any activation; a cuBLASLt plan runs the ones it lacks as a step of their own), and a
 * SiLU pair after Add fuses whole, as does a Sigmoid+Mul on its own. */
START_TEST(test_fuse_gemm_and_silu) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[2] = {2, 3}, wd[2] = {3, 3}, bd[1] = {3};
    const float w[9] = {0}, bias[3] = {1, 2, 3};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL);
    ir_tensor *m = named(g, "m"), *mb = named(g, "mb"), *ge = named(g, "ge"), *gm = named(g, "gm"),
              *sg = named(g, "sg"), *a = named(g, "a"), *as = named(g, "as"),
              *silu = named(g, "silu"), *s2 = named(g, "s2"), *y = named(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    ir_tensor *wt = const_f32(g, "w", w, 2, wd), *bt = const_f32(g, "bias", bias, 1, bd);
    ir_node *mm = th_node_io(g, "mm", "MatMul", 17, (ir_tensor *[]){x, wt}, 2, &m, 1);
    ir_node *badd = th_node_io(g, "badd", "Add", 14, (ir_tensor *[]){m, bt}, 2, &mb, 1);
    ir_node *gelu = th_node_io(g, "gelu", "Gelu", 20, &mb, 1, &ge, 1);
    th_attr_string(g, gelu, "approximate", "tanh");
    ir_node *gemm = th_node_io(g, "gemm", "Gemm", 13, (ir_tensor *[]){ge, wt}, 2, &gm, 1);
    ir_node *sig = th_node_io(g, "sig", "Sigmoid", 13, &gm, 1, &sg, 1);
    ir_node *add = th_node_io(g, "add", "Add", 14, (ir_tensor *[]){sg, x}, 2, &a, 1);
    ir_node *sig2 = th_node_io(g, "sig2", "Sigmoid", 13, &a, 1, &as, 1);
    ir_node *mul = th_node_io(g, "mul", "Mul", 14, (ir_tensor *[]){a, as}, 2, &silu, 1);
    ir_node *sig3 = th_node_io(g, "sig3", "Sigmoid", 13, &silu, 1, &s2, 1);
    ir_node *mul2 = th_node_io(g, "mul2", "Mul", 14, (ir_tensor *[]){s2, silu}, 2, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_fuse_for_gpu(g));

    ck_assert_str_eq(mm->epilogue->label, "MatMul+Add+Gelu");
    ck_assert_ptr_eq(mm->epilogue->bias, bt);
    ck_assert_int_eq(mm->epilogue->act.kind, ACT_GELU_TANH);
    ck_assert_ptr_eq(badd->fused_into, mm);
    ck_assert_ptr_eq(gelu->fused_into, mm);
    ck_assert_str_eq(gemm->epilogue->label, "Gemm+Sigmoid");
    ck_assert_int_eq(gemm->epilogue->act.kind, ACT_SIGMOID);
    ck_assert_ptr_eq(gemm->epilogue->output, sg);
    ck_assert_ptr_eq(sig->fused_into, gemm);
    ck_assert_str_eq(add->epilogue->label, "Add+SiLU");
    ck_assert_int_eq(add->epilogue->act.kind, ACT_SILU);
    ck_assert_ptr_eq(add->epilogue->output, silu);
    ck_assert_ptr_eq(sig2->fused_into, add);
    ck_assert_ptr_eq(mul->fused_into, add);
    /* Sigmoid of silu feeding Mul(s2, silu): silu has two readers, so the standalone pair */
    ck_assert_str_eq(sig3->epilogue->label, "Sigmoid+Mul(SiLU)");
    ck_assert_ptr_eq(mul2->fused_into, sig3);
    ck_assert_ptr_eq(sig3->epilogue->output, y);
    ir_graph_destroy(g);
}
END_TEST

/* ---- the layout pass (pass_assign_layouts): layouts recorded on the IR, no GPU ---- */

/* x[1,3,4,4] -> Conv(8 out, 1x1) -> Relu -> Add(x2) -> y: the Conv writes NHWC8 (its Relu fused
 * into the step, its output the step's), the Add follows its NHWC8 input, the engine input the
 * Conv reads arrives NHWC8 and the one only the Add reads stays dense. */
START_TEST(test_layouts_conv_relu_add) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 3, 4, 4}, x2d[4] = {1, 8, 4, 4}, wd[4] = {8, 3, 1, 1};
    float w[24] = {0};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *x2 = th_named(g, "x2", TCI_DTYPE_FLOAT, 4, x2d, NULL);
    ir_tensor *wt = const_f32(g, "w", w, 4, wd);
    ir_tensor *c = named(g, "c"), *r = named(g, "r"), *y = named(g, "y");
    th_graph_io(g, (ir_tensor *[]){x, x2}, 2, &y, 1);
    ir_node *conv = th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x, wt}, 2, &c, 1);
    ir_node *relu = th_node_io(g, "relu", "Relu", 14, &c, 1, &r, 1);
    ir_node *add = th_node_io(g, "add", "Add", 14, (ir_tensor *[]){r, x2}, 2, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_fuse_for_gpu(g));
    ck_assert_ptr_eq(relu->fused_into, conv);
    ck_assert_ptr_null(add->fused_into);
    ck_assert(!g->layouts_assigned);
    ck_assert_tci_ok(pass_assign_layouts(g));
    ck_assert(g->layouts_assigned);
    ck_assert_int_eq(x->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(x2->layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(wt->layout, PLAN_LAYOUT_DENSE); /* constants: whatever a reader wants */
    ck_assert_int_eq(c->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(r->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(y->layout, PLAN_LAYOUT_NHWC8);
    /* again: the same */
    ck_assert_tci_ok(pass_assign_layouts(g));
    ck_assert_int_eq(x->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(x2->layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(y->layout, PLAN_LAYOUT_NHWC8);
    /* the planner lowers them so: x arrives NHWC8, x2 is converted for the Add, no other step */
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->tensors[p->input_tensors[0]].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(p->tensors[p->input_tensors[1]].layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(p->tensors[p->output_tensors[0]].layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(p->num_layout_conversions, 1);
    ck_assert_int_eq(p->num_steps, 3); /* Conv+Relu, x2 to NHWC8, Add */
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* x[2,4,8] -> MatMul -> Add(bias) -> Relu -> MatMul -> Add(x) -> y: rank 3, no NHWC8 op, dense
 * throughout (fused or not). */
START_TEST(test_layouts_matmul_chain_dense) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[3] = {2, 4, 8}, wd[2] = {8, 8}, bd[1] = {8};
    float w[64] = {0}, bias[8] = {0};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    ir_tensor *wt = const_f32(g, "w", w, 2, wd), *bt = const_f32(g, "bias", bias, 1, bd);
    ir_tensor *m = named(g, "m"), *mb = named(g, "mb"), *r = named(g, "r"), *m2 = named(g, "m2"),
              *y = named(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "mm", "MatMul", 13, (ir_tensor *[]){x, wt}, 2, &m, 1);
    th_node_io(g, "badd", "Add", 14, (ir_tensor *[]){m, bt}, 2, &mb, 1);
    th_node_io(g, "relu", "Relu", 14, &mb, 1, &r, 1);
    th_node_io(g, "mm2", "MatMul", 13, (ir_tensor *[]){r, wt}, 2, &m2, 1);
    th_node_io(g, "add", "Add", 14, (ir_tensor *[]){m2, x}, 2, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    for (size_t i = 0; i < g->num_tensors; i++)
        ck_assert_msg(g->tensors[i]->layout == PLAN_LAYOUT_DENSE, "'%s' is not dense",
                      g->tensors[i]->name ? g->tensors[i]->name : "?");
    ir_graph_destroy(g);
}
END_TEST

/* c = Conv(x) is NHWC8 and read by many (nothing fuses): 4-D float element-wise ops and Concat
 * fed by it follow it (constants and dense inputs notwithstanding); what is not 4-D float, what
 * reads only dense inputs, Where, and ops without a layout of their own (Transpose, Reshape,
 * Softmax) are dense. */
START_TEST(test_layouts_eltwise_follows) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 3, 4, 4}, x3d[4] = {1, 8, 4, 4}, wd[4] = {8, 3, 1, 1}, kd[3] = {8, 1, 1},
            sd[1] = {3};
    float w[24] = {0}, k[8] = {0};
    const int64_t shape[3] = {1, 8, 16};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *x3 = th_named(g, "x3", TCI_DTYPE_FLOAT, 4, x3d, NULL);
    ir_tensor *wt = const_f32(g, "w", w, 4, wd), *kt = const_f32(g, "k", k, 3, kd);
    ir_tensor *st = th_named(g, "shape", TCI_DTYPE_INT64, 1, sd, shape);
    ir_tensor *c = named(g, "c"), *a = named(g, "a"), *m = named(g, "m"), *d = named(g, "d"),
              *q = named(g, "q"), *sg = named(g, "sg"), *t = named(g, "t"), *u = named(g, "u"),
              *r3 = named(g, "r3"), *e = named(g, "e"), *eq = named(g, "eq"),
              *wh = named(g, "wh"), *sm = named(g, "sm"), *ci = named(g, "ci");
    ir_tensor *outs[] = {a, m, d, q, sg, u, e, wh, sm, ci};
    th_graph_io(g, (ir_tensor *[]){x, x3}, 2, outs, 10);
    th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x, wt}, 2, &c, 1);
    th_node_io(g, "add_const", "Add", 14, (ir_tensor *[]){c, kt}, 2, &a, 1);
    th_node_io(g, "mul_dense", "Mul", 14, (ir_tensor *[]){x3, c}, 2, &m, 1);
    th_node_io(g, "add_dense", "Add", 14, (ir_tensor *[]){x3, x3}, 2, &d, 1);
    ir_node *cat = th_node_io(g, "cat", "Concat", 13, (ir_tensor *[]){x3, c}, 2, &q, 1);
    th_attr_int(g, cat, "axis", 1);
    th_node_io(g, "sig", "Sigmoid", 13, &c, 1, &sg, 1);
    th_node_io(g, "transpose", "Transpose", 13, &c, 1, &t, 1);
    th_node_io(g, "relu_t", "Relu", 14, &t, 1, &u, 1);
    th_node_io(g, "reshape", "Reshape", 14, (ir_tensor *[]){c, st}, 2, &r3, 1);
    th_node_io(g, "relu_3d", "Relu", 14, &r3, 1, &e, 1);
    th_node_io(g, "equal", "Equal", 13, (ir_tensor *[]){c, x3}, 2, &eq, 1);
    th_node_io(g, "where", "Where", 16, (ir_tensor *[]){eq, c, x3}, 3, &wh, 1);
    th_node_io(g, "softmax", "Softmax", 13, &c, 1, &sm, 1);
    ir_node *cast = th_node_io(g, "cast", "Cast", 13, &c, 1, &ci, 1);
    th_attr_int(g, cast, "to", TCI_DTYPE_INT64);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_fuse_for_gpu(g));
    for (size_t i = 0; i < g->num_nodes; i++) ck_assert_ptr_null(g->nodes[i]->fused_into);
    ck_assert_tci_ok(pass_assign_layouts(g));
    ck_assert_int_eq(x3->layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(c->layout, PLAN_LAYOUT_NHWC8);
    const ir_tensor *nhwc[] = {a, m, q, sg};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(nhwc[i]->layout == PLAN_LAYOUT_NHWC8, "'%s' is not NHWC8", nhwc[i]->name);
    const ir_tensor *dense[] = {d, t, u, r3, e, eq, wh, sm, ci};
    for (int i = 0; i < 9; i++)
        ck_assert_msg(dense[i]->layout == PLAN_LAYOUT_DENSE, "'%s' is not dense", dense[i]->name);
    ir_graph_destroy(g);
}
END_TEST

/* ReduceMean / ReduceMax over H and W (keepdims) of an NHWC8 activation keep NHWC8, and the
 * planner lowers them to global pools; other axes, keepdims=0, ReduceSum, or a dense input give
 * a dense output and a REDUCE step. */
START_TEST(test_layouts_reduce_global_pool) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[4] = {1, 3, 4, 4}, wd[4] = {8, 3, 1, 1};
    float w[24] = {0};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *x2 = th_named(g, "x2", TCI_DTYPE_FLOAT, 4, xd, NULL); /* read by no Conv */
    ir_tensor *wt = const_f32(g, "w", w, 4, wd), *c = named(g, "c");
    ir_tensor *mean = named(g, "mean"), *max = named(g, "max"), *flat = named(g, "flat"),
              *sum = named(g, "sum"), *chan = named(g, "chan"), *in = named(g, "in");
    ir_tensor *outs[] = {mean, max, flat, sum, chan, in};
    th_graph_io(g, (ir_tensor *[]){x, x2}, 2, outs, 6);
    th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x, wt}, 2, &c, 1);
    const struct {
        const char *name, *op;
        ir_tensor *from, *to;
        int64_t axes[2];
        int num_axes, keepdims;
    } reductions[] = {
        {"r_mean", "ReduceMean", c, mean, {2, 3}, 2, 1},
        {"r_max", "ReduceMax", c, max, {-1, -2}, 2, 1},
        {"r_flat", "ReduceMean", c, flat, {2, 3}, 2, 0},
        {"r_sum", "ReduceSum", c, sum, {2, 3}, 2, 1},
        {"r_chan", "ReduceMean", c, chan, {1}, 1, 1},
        {"r_in", "ReduceMean", x2, in, {2, 3}, 2, 1},
    };
    for (int i = 0; i < 6; i++) {
        int64_t n = reductions[i].num_axes;
        ir_tensor *from = reductions[i].from, *to = reductions[i].to;
        bool sum_op = strcmp(reductions[i].op, "ReduceSum") == 0;
        /* ReduceSum takes its axes as an input from 13 on; the others as an attribute at 13 */
        ir_node *r = sum_op ? th_node_io(g, reductions[i].name, reductions[i].op, 13,
                                         (ir_tensor *[]){from, th_named(g, NULL, TCI_DTYPE_INT64, 1,
                                                                        &n, reductions[i].axes)},
                                         2, &to, 1)
                            : th_node_io(g, reductions[i].name, reductions[i].op, 13, &from, 1,
                                         &to, 1);
        if (!sum_op) th_attr_ints(g, r, "axes", reductions[i].axes, (size_t)n);
        th_attr_int(g, r, "keepdims", reductions[i].keepdims);
    }
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_int_eq(x2->layout, PLAN_LAYOUT_DENSE);
    ck_assert_int_eq(mean->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(max->layout, PLAN_LAYOUT_NHWC8);
    const ir_tensor *dense[] = {flat, sum, chan, in};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(dense[i]->layout == PLAN_LAYOUT_DENSE, "'%s' is not dense", dense[i]->name);
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    int pools = 0, reduces = 0;
    for (int i = 0; i < p->num_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (s->kind == PLAN_STEP_GLOBAL_POOL) {
            pools++;
            ck_assert((s->u.pool.kind == POOL_MAX) == (strcmp(s->node->name, "r_max") == 0));
            ck_assert_int_eq(p->tensors[s->outputs[0]].layout, PLAN_LAYOUT_NHWC8);
        }
        if (s->kind == PLAN_STEP_REDUCE) reduces++;
    }
    ck_assert_int_eq(pools, 2);
    ck_assert_int_eq(reduces, 4);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* Concat of 20 inputs (DenseNet) and Split into 20 outputs: shapes are inferred, a Concat of
 * constants folds, and the reference runs them (shape inference once refused more than 16). */
START_TEST(test_wide_concat_and_split) {
    enum { WIDE = 20 };
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[2] = {2, 3}, cd[2] = {2, 1};
    float cv[WIDE][2];
    ir_tensor *cat_in[WIDE], *folded_in[WIDE], *parts[WIDE];
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 2, xd, NULL);
    cat_in[0] = x;
    for (int i = 0; i < WIDE; i++) {
        char name[16];
        cv[i][0] = (float)i;
        cv[i][1] = (float)(100 + i);
        snprintf(name, sizeof name, "c%d", i);
        folded_in[i] = const_f32(g, name, cv[i], 2, cd);
        if (i) cat_in[i] = folded_in[i];
        snprintf(name, sizeof name, "part%d", i);
        parts[i] = named(g, name);
    }
    ir_tensor *cat = named(g, "cat"), *consts = named(g, "consts"), *sum = named(g, "sum");
    ir_node *n = th_node_io(g, "cat", "Concat", 13, cat_in, WIDE, &cat, 1);
    th_attr_int(g, n, "axis", 1);
    n = th_node_io(g, "consts", "Concat", 13, folded_in, WIDE, &consts, 1);
    th_attr_int(g, n, "axis", 1);
    /* split sizes 3, 1, 1, ...: x comes back as the first part */
    int64_t sizes[WIDE];
    for (int i = 0; i < WIDE; i++) sizes[i] = i ? 1 : 3;
    ir_tensor *split = const_i64(g, "sizes", sizes, WIDE);
    n = th_node_io(g, "split", "Split", 13, (ir_tensor *[]){cat, split}, 2, parts, WIDE);
    th_attr_int(g, n, "axis", 1);
    th_node_io(g, "sum", "Add", 14, (ir_tensor *[]){parts[WIDE - 1], consts}, 2, &sum, 1);
    ir_tensor *outs[WIDE + 1];
    for (int i = 0; i < WIDE; i++) outs[i] = parts[i];
    outs[WIDE] = sum;
    th_graph_io(g, &x, 1, outs, WIDE + 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_int_eq(g->num_nodes, 3); /* the constant Concat folded */
    ck_assert_ptr_nonnull(consts->data);
    ck_assert_int_eq(consts->dims[1], WIDE);
    ck_assert_int_eq(cat->dims[1], 22);
    ck_assert_int_eq(parts[WIDE - 1]->dims[1], 1);
    exec_cpu *e;
    ck_assert_tci_ok(exec_cpu_create(g, &e));
    float xv[6] = {-1, -2, -3, -4, -5, -6};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 2, xd, xv);
    ck_assert_tci_ok(exec_cpu_run(e, &in, 1));
    th_assert_near(exec_cpu_output(e, 0)->data, xv, 6, 0);
    const float *last = exec_cpu_output(e, WIDE - 1)->data;
    ck_assert_float_eq(last[0], 19);
    ck_assert_float_eq(last[1], 119);
    const float *s = exec_cpu_output(e, WIDE)->data; /* 19 + consts[0, :], 119 + consts[1, :] */
    for (int i = 0; i < WIDE; i++) {
        ck_assert_float_eq(s[i], 19.0f + (float)i);
        ck_assert_float_eq(s[WIDE + i], 219.0f + (float)i);
    }
    exec_cpu_destroy(e);
    ir_graph_destroy(g);
}
END_TEST

/* h = Add(x, r) -> LayerNormalization: the Add folds into the normalisation's step. In a
 * pre-LN block the sum is read again after the LayerNormalization (the next residual): the step
 * writes it as a second output; a reader of the sum before the normalisation keeps the Add. */
START_TEST(test_fuse_residual_layernorm) {
    for (int variant = 0; variant < 3; variant++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int64_t xd[3] = {2, 4, 8}, vd[1] = {8};
        float gamma[8], beta[8];
        for (int i = 0; i < 8; i++) gamma[i] = 1.0f + 0.1f * (float)i, beta[i] = 0.05f * (float)i;
        ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
        ir_tensor *r = th_named(g, "r", TCI_DTYPE_FLOAT, 3, xd, NULL);
        ir_tensor *gt = const_f32(g, "gamma", gamma, 1, vd), *bt = const_f32(g, "beta", beta, 1, vd);
        ir_tensor *h = named(g, "h"), *y = named(g, "y"), *early = named(g, "early"),
                  *z = named(g, "z");
        th_graph_io(g, (ir_tensor *[]){x, r}, 2, (ir_tensor *[]){variant ? z : y}, 1);
        ir_node *add = th_node_io(g, "add", "Add", 14, (ir_tensor *[]){x, r}, 2, &h, 1);
        if (variant == 2) /* a reader of h before the LayerNormalization */
            th_node_io(g, "relu", "Relu", 14, &h, 1, &early, 1);
        ir_node *ln = th_node_io(g, "ln", "LayerNormalization", 17,
                                 (ir_tensor *[]){variant == 2 ? early : h, gt, bt}, 3, &y, 1);
        if (variant) /* the next residual reads h after the LayerNormalization */
            th_node_io(g, "next", "Add", 14, (ir_tensor *[]){h, y}, 2, &z, 1);
        ck_assert_tci_ok(pass_optimize(g));
        ck_assert_tci_ok(pass_prepare_for_gpu(g));
        if (variant == 2) {
            ck_assert_ptr_null(add->fused_into);
            ck_assert_ptr_null(ln->epilogue);
            ir_graph_destroy(g);
            continue;
        }
        ck_assert_ptr_eq(add->fused_into, ln);
        ck_assert_ptr_nonnull(ln->epilogue);
        ck_assert_ptr_eq(ln->epilogue->residual_add, add);
        ck_assert_ptr_eq(ln->epilogue->residual, r);
        ck_assert_ptr_eq(ln->epilogue->sum_output, variant ? h : NULL);
        ck_assert_str_eq(ln->epilogue->label, "Add+LayerNormalization");
        plan *p;
        ck_assert_tci_ok(plan_build(g, NULL, &p));
        const plan_step *s = NULL;
        for (int i = 0; i < p->num_steps; i++)
            if (p->steps[i].kind == PLAN_STEP_LAYERNORM) s = &p->steps[i];
        ck_assert_ptr_nonnull(s);
        ck_assert(s->u.layernorm.has_residual && s->u.layernorm.has_bias);
        ck_assert_str_eq(p->tensors[s->inputs[0]].name, "x");
        ck_assert_str_eq(p->tensors[s->inputs[3]].name, "r");
        ck_assert_int_eq(s->num_outputs, variant ? 2 : 1);
        if (variant) ck_assert_str_eq(p->tensors[s->outputs[1]].name, "h");
        /* no Add step before it; the next residual is the only element-wise step */
        int eltwise = 0;
        for (int i = 0; i < p->num_steps; i++) eltwise += p->steps[i].kind == PLAN_STEP_ELTWISE;
        ck_assert_int_eq(eltwise, variant ? 1 : 0);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("passes");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_pytorch_shape_chain_folds);
    tcase_add_test(tc, test_identity_to_graph_output_kept);
    tcase_add_test(tc, test_identity_of_constant_folds_through);
    tcase_add_test(tc, test_duplicate_producer_rejected);
    tcase_add_test(tc, test_fuse_conv_bn_residual_relu);
    tcase_add_test(tc, test_fuse_gemm_and_silu);
    tcase_add_test(tc, test_fuse_residual_layernorm);
    tcase_add_test(tc, test_layouts_conv_relu_add);
    tcase_add_test(tc, test_layouts_matmul_chain_dense);
    tcase_add_test(tc, test_layouts_eltwise_follows);
    tcase_add_test(tc, test_layouts_reduce_global_pool);
    tcase_add_test(tc, test_wide_concat_and_split);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
