/* The layer-scale fold (pass_fold_layer_scale) and the residual through a channels-last view:
 * ConvNeXt's block tail, Linear -> Transpose to NCHW -> Mul(gamma) -> Add(x), folded and fused
 * into one GEMM step. The folded graph is run on the CPU reference against the unfolded one,
 * and the fused GEMM step replayed on the host from the plan's own constants. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"
#include "util/half.h"

enum { NB = 2, H = 3, W = 4, MAXC = 24 };

static int count_binary(const ir_graph *g, binary_op op) {
    int count = 0;
    for (size_t i = 0; i < g->num_nodes; i++)
        if (g->nodes[i]->desc && g->nodes[i]->desc->binary == op) count++;
    return count;
}

static const ir_node *node_named(const ir_graph *g, const char *name) {
    for (size_t i = 0; i < g->num_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    return NULL;
}

/* Element i of a plan constant, in the dtype the plan stores it in. */
static float constant_at(const plan_tensor *t, int64_t i) {
    ck_assert_ptr_nonnull(t->host_data);
    switch (t->dtype) {
    case TCI_DTYPE_FLOAT: return ((const float *)t->host_data)[i];
    case TCI_DTYPE_FLOAT16: return half_to_float(((const uint16_t *)t->host_data)[i]);
    case TCI_DTYPE_BFLOAT16: return bfloat16_to_float(((const uint16_t *)t->host_data)[i]);
    default: ck_abort_msg("'%s' is no float constant", t->name);
    }
    return 0.0f;
}

/* What a test graph is built from. */
typedef struct block {
    int c;                       /* channels */
    float conv_w[MAXC * MAXC], conv_b[MAXC];
    float w[MAXC * MAXC], bias[MAXC], gamma[MAXC];
    float x0[NB * MAXC * H * W]; /* the input */
} block;

static void block_init(block *k, int c) {
    memset(k, 0, sizeof *k);
    k->c = c;
    th_fill(k->conv_w, c * c, 1);
    th_fill(k->conv_b, c, 2);
    th_fill(k->w, c * c, 3);
    th_fill(k->bias, c, 4);
    th_fill(k->gamma, c, 5);
    th_fill(k->x0, NB * c * H * W, 6);
}

/* x0 [NB, c, H, W] -> Conv 1x1 (+bias) -> x; Transpose(x, 0 2 3 1) -> MatMul(w [c, c]) ->
 * Add(bias) -> Transpose(0 3 1 2) -> Mul(gamma of gamma_rank dims: (c, 1, 1) or (1, c, 1, 1))
 * -> Add(x) -> y: ConvNeXt's block with its depthwise convolution, norm and first Linear left
 * out. extra_reader: the MatMul's result is also a graph output. */
static ir_graph *block_graph(const block *k, int gamma_rank, bool extra_reader) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t c = k->c, xd[4] = {NB, c, H, W}, cwd[4] = {c, c, 1, 1}, wd[2] = {c, c},
            gd[4] = {1, c, 1, 1};
    ir_tensor *x0 = th_named(g, "x0", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *cw = th_named(g, "conv.w", TCI_DTYPE_FLOAT, 4, cwd, k->conv_w);
    ir_tensor *cb = th_named(g, "conv.b", TCI_DTYPE_FLOAT, 1, &c, k->conv_b);
    ir_tensor *w = th_named(g, "pw2.w", TCI_DTYPE_FLOAT, 2, wd, k->w);
    ir_tensor *b = th_named(g, "pw2.b", TCI_DTYPE_FLOAT, 1, &c, k->bias);
    ir_tensor *gamma = th_named(g, "gamma", TCI_DTYPE_FLOAT, gamma_rank, gd + 4 - gamma_rank,
                                k->gamma);
    ir_tensor *x = th_act(g, "x"), *rows = th_act(g, "rows"), *mm = th_act(g, "mm"), *lin = th_act(g, "lin"),
              *back = th_act(g, "back"), *scaled = th_act(g, "scaled"), *y = th_act(g, "y");
    th_graph_io(g, &x0, 1, extra_reader ? (ir_tensor *[]){y, mm} : &y, extra_reader ? 2 : 1);
    th_node_io(g, "conv", "Conv", 17, (ir_tensor *[]){x0, cw, cb}, 3, &x, 1);
    ir_node *t = th_node_io(g, "to_rows", "Transpose", 17, &x, 1, &rows, 1);
    th_attr_ints(g, t, "perm", (const int64_t[]){0, 2, 3, 1}, 4);
    th_node_io(g, "pw2", "MatMul", 17, (ir_tensor *[]){rows, w}, 2, &mm, 1);
    th_node_io(g, "pw2.add", "Add", 17, (ir_tensor *[]){mm, b}, 2, &lin, 1);
    t = th_node_io(g, "to_nchw", "Transpose", 17, &lin, 1, &back, 1);
    th_attr_ints(g, t, "perm", (const int64_t[]){0, 3, 1, 2}, 4);
    th_node_io(g, "layer_scale", "Mul", 17, (ir_tensor *[]){back, gamma}, 2, &scaled, 1);
    th_node_io(g, "residual", "Add", 17, (ir_tensor *[]){scaled, x}, 2, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    return g;
}

static float *reference(ir_graph *g, const block *k) {
    int64_t xd[4] = {NB, k->c, H, W};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 4, xd, k->x0);
    return th_cpu_output(g, &in, 1, 0);
}

/* The folded graph computes what the unfolded one does, from new weights w * gamma per column
 * and bias * gamma; the model's own constants are left as they were. */
static void check_fold(int gamma_rank) {
    block k;
    block_init(&k, 16);
    ir_graph *g = block_graph(&k, gamma_rank, false);
    float *want = reference(g, &k);
    ir_tensor *w = ir_graph_find_tensor(g, "pw2.w"), *b = ir_graph_find_tensor(g, "pw2.b");
    ck_assert_int_eq(count_binary(g, BINARY_MUL), 1);
    ck_assert_tci_ok(pass_fold_layer_scale(g));
    ck_assert_int_eq(count_binary(g, BINARY_MUL), 0);
    ck_assert_ptr_null(node_named(g, "layer_scale"));
    const ir_node *mm = node_named(g, "pw2"), *add = node_named(g, "pw2.add");
    const ir_node *res = node_named(g, "residual");
    ck_assert_ptr_nonnull(mm);
    ck_assert_ptr_nonnull(add);
    ck_assert_ptr_nonnull(res);
    ck_assert_ptr_eq(res->inputs[0], ir_graph_find_tensor(g, "back"));
    /* new constants; the old ones untouched */
    const ir_tensor *fw = mm->inputs[1], *fb = add->inputs[1];
    ck_assert_ptr_ne(fw, w);
    ck_assert_ptr_ne(fb, b);
    ck_assert_mem_eq(w->data, k.w, sizeof(float) * 256);
    ck_assert_mem_eq(b->data, k.bias, sizeof(float) * 16);
    ck_assert_int_eq(fw->rank, 2);
    ck_assert_int_eq(fb->rank, 1);
    ck_assert_int_eq(fb->dims[0], 16);
    for (int row = 0; row < 16; row++)
        for (int col = 0; col < 16; col++)
            ck_assert_float_eq(((const float *)fw->data)[row * 16 + col],
                               k.w[row * 16 + col] * k.gamma[col]);
    for (int col = 0; col < 16; col++)
        ck_assert_float_eq(((const float *)fb->data)[col], k.bias[col] * k.gamma[col]);
    float *got = reference(g, &k);
    th_assert_near(got, want, NB * 16 * H * W, 1e-5f);
    /* a second run finds nothing more to fold */
    size_t nodes = g->num_nodes;
    ck_assert_tci_ok(pass_fold_layer_scale(g));
    ck_assert_int_eq(g->num_nodes, nodes);
    free(got);
    free(want);
    ir_graph_destroy(g);
}

START_TEST(test_fold_gamma_c11) { check_fold(3); }
END_TEST

START_TEST(test_fold_gamma_1c11) { check_fold(4); }
END_TEST

/* The MatMul's result read elsewhere too (a graph output): nothing folds. */
START_TEST(test_no_fold_when_read_elsewhere) {
    block k;
    block_init(&k, 16);
    ir_graph *g = block_graph(&k, 3, true);
    ck_assert_tci_ok(pass_fold_layer_scale(g));
    ck_assert_int_eq(count_binary(g, BINARY_MUL), 1);
    ck_assert_ptr_eq(node_named(g, "pw2")->inputs[1], ir_graph_find_tensor(g, "pw2.w"));
    ir_graph_destroy(g);
}
END_TEST

/* Gemm(a, w, c, transB) -> Mul(s) -> Relu with s of the given shape, one of:
 * (N) per column, (M, 1) per row, (1) a scalar; c of shape c_dims (c_rank 0 for none). The
 * weights w also feed a second Gemm (shared), whose output is the graph's second. Returns
 * whether the Mul folded; the folded graph's outputs must equal the unfolded one's. */
static bool check_gemm(int s_rank, const int64_t *s_dims, int c_rank, const int64_t *c_dims) {
    enum { M = 5, K = 6, N = 8 };
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float a[M * K], w[N * K], c[M * N], s[M * N];
    th_fill(a, M * K, 7);
    th_fill(w, N * K, 8);
    th_fill(c, M * N, 9);
    th_fill(s, M * N, 10);
    int64_t ad[2] = {M, K}, wd[2] = {N, K};
    ir_tensor *at = th_named(g, "a", TCI_DTYPE_FLOAT, 2, ad, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 2, wd, w);
    ir_tensor *ct = c_rank ? th_named(g, "c", TCI_DTYPE_FLOAT, c_rank, c_dims, c) : NULL;
    ir_tensor *st = th_named(g, "s", TCI_DTYPE_FLOAT, s_rank, s_dims, s);
    ir_tensor *y0 = th_act(g, "y0"), *y = th_act(g, "y"), *r = th_act(g, "r"), *other = th_act(g, "other");
    th_graph_io(g, &at, 1, (ir_tensor *[]){r, other}, 2);
    ir_node *gemm = th_node_io(g, "fc", "Gemm", 13, (ir_tensor *[]){at, wt, ct}, ct ? 3 : 2,
                               &y0, 1);
    th_attr_int(g, gemm, "transB", 1);
    th_attr_float(g, gemm, "beta", 0.5f);
    th_node_io(g, "scale", "Mul", 13, (ir_tensor *[]){st, y0}, 2, &y, 1);
    th_node_io(g, "relu", "Relu", 13, &y, 1, &r, 1);
    ir_node *shared = th_node_io(g, "fc2", "Gemm", 13, (ir_tensor *[]){at, wt}, 2, &other, 1);
    th_attr_int(g, shared, "transB", 1);
    ck_assert_tci_ok(pass_optimize(g));
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 2, ad, a);
    float *want = th_cpu_output(g, &in, 1, 0), *want_other = th_cpu_output(g, &in, 1, 1);
    ck_assert_tci_ok(pass_fold_layer_scale(g));
    bool folded = count_binary(g, BINARY_MUL) == 0;
    float *got = th_cpu_output(g, &in, 1, 0), *got_other = th_cpu_output(g, &in, 1, 1);
    th_assert_near(got, want, M * N, 1e-5f);
    th_assert_near(got_other, want_other, M * N, 0.0f);
    ck_assert_ptr_eq(node_named(g, "fc2")->inputs[1], wt);
    ck_assert_mem_eq(wt->data, w, sizeof w);
    free(got);
    free(got_other);
    free(want);
    free(want_other);
    ir_graph_destroy(g);
    return folded;
}

START_TEST(test_gemm_fold) {
    const int64_t n[1] = {8}, one_n[2] = {1, 8}, m1[2] = {5, 1}, one[1] = {1}, mn[2] = {5, 8};
    ck_assert(check_gemm(1, n, 0, NULL));
    ck_assert(check_gemm(2, one_n, 1, n));
    ck_assert(check_gemm(1, n, 1, one));   /* a scalar C becomes N values */
    ck_assert(check_gemm(1, n, 2, m1));    /* C per row becomes (M, N) */
    ck_assert(check_gemm(1, n, 2, mn));
    ck_assert(!check_gemm(2, m1, 1, n));   /* per row: not the GEMM's columns */
    ck_assert(!check_gemm(1, one, 1, n));  /* a scalar is left alone */
}
END_TEST

/* The block planned for the GPU at 16 channels: the Mul folded, the Transpose a view, the
 * residual Add in the GEMM's epilogue reading x NHWC8 as the GEMM's rows: two steps (the Conv
 * and the GEMM). The GEMM step replayed on the host from the plan's constants matches the
 * unfolded graph on the CPU reference. */
START_TEST(test_plan_fuses_residual_through_view) {
    enum { C = 16 };
    block k;
    block_init(&k, C);
    ir_graph *g = block_graph(&k, 3, false);
    float *want = reference(g, &k);
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    int gemms = 0, eltwise = 0;
    const plan_step *s = NULL;
    for (int i = 0; i < p->num_steps; i++) {
        if (p->steps[i].kind == PLAN_STEP_GEMM) {
            s = &p->steps[i];
            gemms++;
        }
        if (p->steps[i].kind == PLAN_STEP_ELTWISE) eltwise++;
    }
    ck_assert_int_eq(p->num_steps, 2);
    ck_assert_int_eq(gemms, 1);
    ck_assert_int_eq(eltwise, 0);
    ck_assert_str_eq(s->label, "MatMul+Add+Transpose+Add");
    ck_assert(s->u.gemm.has_c);
    ck_assert(s->u.gemm.has_bias);
    ck_assert_float_eq(s->u.gemm.beta, 1.0f);
    ck_assert_int_eq(s->u.gemm.m, NB * H * W);
    ck_assert_int_eq(s->u.gemm.n, C);
    ck_assert_int_eq(s->u.gemm.k, C);
    const plan_tensor *out = &p->tensors[s->outputs[0]], *res = &p->tensors[s->inputs[3]];
    ck_assert_int_eq(out->layout, PLAN_LAYOUT_NHWC8);
    ck_assert_int_eq(out->dims[1], C);
    ck_assert_int_eq(res->layout, PLAN_LAYOUT_NHWC8);
    /* the residual is the Conv's output itself, and A its channels-last alias: no copies */
    int root_a = p->tensors[s->inputs[0]].alias_of, root_c = res->alias_of;
    if (root_a < 0) root_a = s->inputs[0];
    if (root_c < 0) root_c = s->inputs[3];
    ck_assert_int_eq(root_a, root_c);
    /* replay: x = Conv(x0) on the host; rows r = (n, h, w) of x channels-last are A and C */
    const plan_tensor *bw = &p->tensors[s->inputs[1]], *bb = &p->tensors[s->inputs[2]];
    static float x_rows[NB * H * W * C], got[NB * C * H * W];
    for (int n = 0; n < NB; n++)
        for (int pix = 0; pix < H * W; pix++)
            for (int o = 0; o < C; o++) {
                double sum = k.conv_b[o];
                for (int i = 0; i < C; i++)
                    sum += (double)k.conv_w[o * C + i] * k.x0[(n * C + i) * H * W + pix];
                x_rows[(n * H * W + pix) * C + o] = (float)sum;
            }
    for (int r = 0; r < NB * H * W; r++)
        for (int j = 0; j < C; j++) {
            double sum = constant_at(bb, j) + x_rows[r * C + j];
            for (int i = 0; i < C; i++)
                sum += (double)x_rows[r * C + i] * constant_at(bw, i * C + j);
            /* NHWC8 of 16 channels: row r's channel j, read back as NCHW */
            got[((r / (H * W)) * C + j) * H * W + r % (H * W)] = (float)sum;
        }
    /* the weights as the plan holds them (fp16 in a 16-bit plan) */
    th_assert_near(got, want, NB * C * H * W, bw->dtype == TCI_DTYPE_FLOAT ? 1e-4f : 2e-2f);
    plan_destroy(p);
    free(want);
    ir_graph_destroy(g);
}
END_TEST

/* At 20 channels NHWC8 pads the channels-last rows: the Transpose stays a step and the residual
 * Add its own, but the Mul still folds into the GEMM. */
START_TEST(test_plan_padded_channels_fold_only) {
    block k;
    block_init(&k, 20);
    ir_graph *g = block_graph(&k, 3, false);
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_int_eq(count_binary(g, BINARY_MUL), 0);
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    int eltwise = 0;
    for (int i = 0; i < p->num_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (s->kind == PLAN_STEP_GEMM) ck_assert_str_eq(s->label, "MatMul+Add");
        if (s->kind == PLAN_STEP_ELTWISE) eltwise++;
    }
    ck_assert_int_eq(eltwise, 1); /* the residual Add alone */
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

static int count_op(const ir_graph *g, const char *op_type) {
    int count = 0;
    for (size_t i = 0; i < g->num_nodes; i++)
        if (strcmp(g->nodes[i]->op_type, op_type) == 0) count++;
    return count;
}

static int count_steps(const plan *p, plan_step_kind kind) {
    int count = 0;
    for (int i = 0; i < p->num_steps; i++) count += p->steps[i].kind == kind;
    return count;
}

/* g planned for the GPU: one step of kind, and no element-wise step. */
static void assert_one_step(ir_graph *g, plan_step_kind kind) {
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(count_steps(p, kind), 1);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_ELTWISE), 0);
    plan_destroy(p);
}

/* x0 [NB, 8, H, W] -> Conv 1x1 (+bias) -> Mul(gamma of gamma_dims) -> Add(x0) -> y: PoolFormer's
 * MLP tail. Whether the Mul folded into the convolution; the folded graph's output must equal
 * the unfolded one's on the CPU reference. */
static bool check_conv_fold(int gamma_rank, const int64_t *gamma_dims) {
    enum { C = 8 };
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float w[C * C], b[C], gamma[C * H], x0[NB * C * H * W];
    th_fill(w, C * C, 11);
    th_fill(b, C, 12);
    th_fill(gamma, C * H, 13);
    th_fill(x0, NB * C * H * W, 14);
    int64_t c = C, xd[4] = {NB, C, H, W}, wd[4] = {C, C, 1, 1};
    ir_tensor *x = th_named(g, "x0", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 4, wd, w);
    ir_tensor *bt = th_named(g, "b", TCI_DTYPE_FLOAT, 1, &c, b);
    ir_tensor *gt = th_named(g, "gamma", TCI_DTYPE_FLOAT, gamma_rank, gamma_dims, gamma);
    ir_tensor *conv = th_act(g, "conv"), *scaled = th_act(g, "scaled"), *y = th_act(g, "y");
    th_graph_io(g, &x, 1, &y, 1);
    th_node_io(g, "fc2", "Conv", 17, (ir_tensor *[]){x, wt, bt}, 3, &conv, 1);
    th_node_io(g, "layer_scale", "Mul", 17, (ir_tensor *[]){conv, gt}, 2, &scaled, 1);
    th_node_io(g, "residual", "Add", 17, (ir_tensor *[]){x, scaled}, 2, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 4, xd, x0);
    float *want = th_cpu_output(g, &in, 1, 0);
    ck_assert_tci_ok(pass_fold_layer_scale(g));
    bool folded = count_binary(g, BINARY_MUL) == 0;
    float *got = th_cpu_output(g, &in, 1, 0);
    th_assert_near(got, want, NB * C * H * W, 1e-5f);
    ck_assert_mem_eq(wt->data, w, sizeof w); /* the model's own weights untouched */
    if (folded) /* planned: the residual Add in the convolution's epilogue, one step */
        assert_one_step(g, PLAN_STEP_CONV);
    free(got);
    free(want);
    ir_graph_destroy(g);
    return folded;
}

START_TEST(test_conv_fold) {
    const int64_t c11[3] = {8, 1, 1}, c1c11[4] = {1, 8, 1, 1}, h1[2] = {H, 1}, one[1] = {1};
    ck_assert(check_conv_fold(3, c11));
    ck_assert(check_conv_fold(4, c1c11));
    ck_assert(!check_conv_fold(2, h1));  /* along H: not the output channels */
    ck_assert(!check_conv_fold(1, one)); /* a scalar is left alone */
}
END_TEST

/* x0 [NB, 8, H, W] -> Reshape(0, groups, -1) -> InstanceNormalization(s, b of groups values) ->
 * Reshape(x0's shape) -> [Mul(gamma (8, 1, 1))] -> [Add(beta (1, 8, 1, 1))] -> y, as TorchScript
 * exports nn.GroupNorm: one GroupNormalization after pass_fold_group_norm_chains, with the same
 * output on the CPU reference, and one GPU step. extra_reader: the Reshape's result is also a
 * graph output, and nothing folds. */
static void check_group_norm_chain(int64_t groups, bool mul, bool add, bool extra_reader) {
    enum { C = 8 };
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float s[C], b[C], gamma[C], beta[C], x0[NB * C * H * W];
    th_fill(s, C, 21);
    th_fill(b, C, 22);
    th_fill(gamma, C, 23);
    th_fill(beta, C, 24);
    th_fill(x0, NB * C * H * W, 25);
    for (int i = 0; i < NB * C * H * W; i++) x0[i] = 3.0f * x0[i] + 0.5f * (float)(i % 7);
    int64_t xd[4] = {NB, C, H, W}, sd[1] = {3}, fd[1] = {4}, gd[3] = {C, 1, 1},
            bd[4] = {1, C, 1, 1};
    const int64_t split[3] = {0, groups, -1};
    ir_tensor *x = th_named(g, "x0", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *split_t = th_named(g, "split", TCI_DTYPE_INT64, 1, sd, split);
    ir_tensor *back_t = th_named(g, "back", TCI_DTYPE_INT64, 1, fd, xd);
    ir_tensor *st = th_named(g, "s", TCI_DTYPE_FLOAT, 1, &groups, s);
    ir_tensor *bt = th_named(g, "b", TCI_DTYPE_FLOAT, 1, &groups, b);
    ir_tensor *gt = th_named(g, "gamma", TCI_DTYPE_FLOAT, 3, gd, gamma);
    ir_tensor *betat = th_named(g, "beta", TCI_DTYPE_FLOAT, 4, bd, beta);
    ir_tensor *v = th_act(g, "v"), *nv = th_act(g, "nv"), *r = th_act(g, "r"), *m = th_act(g, "m"),
              *y = th_act(g, "y");
    ir_tensor *last = add ? y : mul ? m : r;
    if (!add && mul) m = y, last = y;
    if (!add && !mul) r = y, last = y;
    th_graph_io(g, &x, 1, extra_reader ? (ir_tensor *[]){last, v} : &last, extra_reader ? 2 : 1);
    th_node_io(g, "norm/Reshape", "Reshape", 14, (ir_tensor *[]){x, split_t}, 2, &v, 1);
    ir_node *in = th_node_io(g, "norm/InstanceNormalization", "InstanceNormalization", 6,
                             (ir_tensor *[]){v, st, bt}, 3, &nv, 1);
    th_attr_float(g, in, "epsilon", 1e-3f);
    th_node_io(g, "norm/Reshape_1", "Reshape", 14, (ir_tensor *[]){nv, back_t}, 2, &r, 1);
    if (mul) th_node_io(g, "norm/Mul", "Mul", 14, (ir_tensor *[]){r, gt}, 2, &m, 1);
    if (add)
        th_node_io(g, "norm/Add", "Add", 14, (ir_tensor *[]){betat, mul ? m : r}, 2, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    tci_tensor input = th_tensor(TCI_DTYPE_FLOAT, 4, xd, x0);
    float *want = th_cpu_output(g, &input, 1, 0);
    ck_assert_tci_ok(pass_fold_group_norm_chains(g));
    float *got = th_cpu_output(g, &input, 1, 0);
    th_assert_near(got, want, NB * C * H * W, 1e-5f);
    if (extra_reader) {
        ck_assert_int_eq(count_op(g, "InstanceNormalization"), 1);
        ck_assert_int_eq(count_op(g, "GroupNormalization"), 0);
    } else {
        ck_assert_int_eq(count_op(g, "InstanceNormalization"), 0);
        ck_assert_int_eq(count_op(g, "Reshape"), 0);
        ck_assert_int_eq(count_binary(g, BINARY_MUL) + count_binary(g, BINARY_ADD), 0);
        ck_assert_int_eq(g->num_nodes, 1);
        ck_assert_str_eq(g->nodes[0]->name, "norm/GroupNormalization");
        ck_assert_int_eq(g->nodes[0]->since_version, 21);
        ck_assert_ptr_eq(g->nodes[0]->inputs[0], x);
        assert_one_step(g, PLAN_STEP_GROUPNORM);
    }
    free(got);
    free(want);
    ir_graph_destroy(g);
}

START_TEST(test_group_norm_chain) {
    check_group_norm_chain(1, true, true, false); /* timm's GroupNorm(1) */
    check_group_norm_chain(2, true, true, false);
    check_group_norm_chain(4, true, false, false);
    check_group_norm_chain(2, false, true, false);
    check_group_norm_chain(8, false, false, false);
    check_group_norm_chain(2, true, true, true);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("layer_scale");
    TCase *tc = tcase_create("fold");
    tcase_add_test(tc, test_fold_gamma_c11);
    tcase_add_test(tc, test_fold_gamma_1c11);
    tcase_add_test(tc, test_no_fold_when_read_elsewhere);
    tcase_add_test(tc, test_gemm_fold);
    tcase_add_test(tc, test_plan_fuses_residual_through_view);
    tcase_add_test(tc, test_plan_padded_channels_fold_only);
    tcase_add_test(tc, test_conv_fold);
    tcase_add_test(tc, test_group_norm_chain);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_run_suite(suite()); }
