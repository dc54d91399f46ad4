/* The attention fusion's strided reads and writes (src/graph/passes/attention.c): Q, K and V read
 * from a packed QKV projection through the movement nodes exporters put before the attention
 * (torchvision's MultiheadAttention: Reshape, Unsqueeze, Transpose, Squeeze, three Gathers,
 * Reshapes and Transposes; timm: Reshape, Transpose, Split, Squeezes; a constant Slice per
 * operand), and Y written through the head merge after it (Transpose, Reshape); torchvision's
 * whole layer, its (batch, seq) Transposes moved through the projections (rows.c). Each case checks
 * which steps the plan keeps and replays the plan's attention step on the host, reading and
 * writing through its offsets and strides exactly as the kernel does, against the CPU
 * reference run of the unfused graph. No GPU needed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

enum { H = 2, D = 32, E = H * D };

static ir_tensor *named(ir_graph *g, const char *name) {
    return th_named(g, name, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
}

static ir_tensor *ints(ir_graph *g, const char *name, int n, const int64_t *v) {
    const int64_t dims[1] = {n};
    return th_named(g, name, TCI_DTYPE_INT64, 1, dims, v);
}

static ir_tensor *index_scalar(ir_graph *g, const char *name, int64_t v) {
    return th_named(g, name, TCI_DTYPE_INT64, 0, NULL, &v);
}

static ir_node *node1(ir_graph *g, const char *name, const char *op, ir_tensor **in, int n_in,
                      ir_tensor *out) {
    return th_node_io(g, name, op, 13, in, n_in, &out, 1);
}

static ir_node *transpose(ir_graph *g, const char *name, ir_tensor *x, ir_tensor *y,
                          const int64_t *perm, int rank) {
    ir_node *n = node1(g, name, "Transpose", &x, 1, y);
    th_attr_ints(g, n, "perm", perm, rank);
    return n;
}

typedef struct views_graph {
    ir_graph *g;
    ir_tensor *qkv, *out;
    ir_node *pv, *gathers[3];
    int64_t b, s;
    /* the whole layer (build_torchvision_layer): input x (b, s, E), the Transposes to and from
     * (s, b, E), the in_proj MatMul and its bias Add, the out_proj Gemm */
    ir_tensor *x, *xt;
    ir_node *to_seq, *to_batch, *in_proj, *in_bias, *out_proj;
} views_graph;

/* The scores, softmax and P V part on Q (b, h, s, d), K (b, h, s, d) and V; Q and K^T scaled by
 * c each (PyTorch's export); Y (b, h, s, d). */
static ir_tensor *sdpa(views_graph *t, ir_tensor *q, ir_tensor *k, ir_tensor *v) {
    ir_graph *g = t->g;
    const float c = sqrtf(1.0f / sqrtf((float)D));
    ir_tensor *cq = th_named(g, "cq", TCI_DTYPE_FLOAT, 0, NULL, &c);
    ir_tensor *kt = named(g, "kT"), *qs = named(g, "qs"), *ks = named(g, "ks");
    ir_tensor *sc = named(g, "scores"), *p = named(g, "probs"), *y = named(g, "y");
    transpose(g, "k_t", k, kt, (const int64_t[]){0, 1, 3, 2}, 4);
    node1(g, "q_scale", "Mul", (ir_tensor *[]){q, cq}, 2, qs);
    node1(g, "k_scale", "Mul", (ir_tensor *[]){kt, cq}, 2, ks);
    node1(g, "qk", "MatMul", (ir_tensor *[]){qs, ks}, 2, sc);
    ir_node *sm = node1(g, "softmax", "Softmax", &sc, 1, p);
    th_attr_int(g, sm, "axis", -1);
    t->pv = node1(g, "pv", "MatMul", (ir_tensor *[]){p, v}, 2, y);
    return y;
}

/* torchvision's MultiheadAttention export from the packed (s, b, 3E) projection t->qkv to Y
 * merged back to (s * b, E) for the output projection (t->out); sq, the (3, s, b, E) tensor before
 * the Gathers, in *sq_out. */
static void torchvision_heads(views_graph *t, ir_tensor **sq_out) {
    ir_graph *g = t->g;
    const int64_t b = t->b, s = t->s;
    ir_tensor *r = named(g, "r"), *u = named(g, "u"), *tr = named(g, "tr"), *sq = named(g, "sq");
    t->out = named(g, "out");
    node1(g, "split_heads", "Reshape",
          (ir_tensor *[]){t->qkv, ints(g, "shape5", 4, (const int64_t[]){s, b, 3, E})}, 2, r);
    node1(g, "unsqueeze", "Unsqueeze", (ir_tensor *[]){r, ints(g, "ax0", 1, (const int64_t[]){0})},
          2, u);
    transpose(g, "qkv_first", u, tr, (const int64_t[]){3, 1, 2, 0, 4}, 5);
    node1(g, "squeeze", "Squeeze", (ir_tensor *[]){tr, ints(g, "ax3", 1, (const int64_t[]){3})}, 2,
          sq);
    ir_tensor *ops[3];
    const int64_t shape3[3] = {s, b * H, D}, shape4[4] = {b, H, s, D};
    ir_tensor *s3 = ints(g, "shape3", 3, shape3), *s4 = ints(g, "shape4", 4, shape4);
    for (int i = 0; i < 3; i++) {
        char nm[6][32];
        const char *kinds[6] = {"g", "r", "t", "op", "idx", "n"};
        for (int k = 0; k < 6; k++) snprintf(nm[k], sizeof nm[k], "%s%d", kinds[k], i);
        ir_tensor *gi = named(g, nm[0]), *ri = named(g, nm[1]), *ti = named(g, nm[2]);
        ops[i] = named(g, nm[3]);
        ir_tensor *idx = index_scalar(g, nm[4], i);
        t->gathers[i] = node1(g, nm[5], "Gather", (ir_tensor *[]){sq, idx}, 2, gi);
        node1(g, "view", "Reshape", (ir_tensor *[]){gi, s3}, 2, ri);
        transpose(g, "swap", ri, ti, (const int64_t[]){1, 0, 2}, 3);
        node1(g, "view4", "Reshape", (ir_tensor *[]){ti, s4}, 2, ops[i]);
    }
    ir_tensor *y = sdpa(t, ops[0], ops[1], ops[2]);
    ir_tensor *yt = named(g, "yt");
    transpose(g, "merge", y, yt, (const int64_t[]){2, 0, 1, 3}, 4);
    node1(g, "flat", "Reshape", (ir_tensor *[]){yt, ints(g, "shape2", 2, (const int64_t[]){s * b, E})},
          2, t->out);
    *sq_out = sq;
}

/* t emptied, for batch b and sequence s, with a new graph: that graph. */
static ir_graph *new_views_graph(views_graph *t, int64_t b, int64_t s) {
    memset(t, 0, sizeof *t);
    t->b = b;
    t->s = s;
    ck_assert_tci_ok(ir_graph_create(&t->g));
    return t->g;
}

/* torchvision's MultiheadAttention export on a packed (s, b, 3E) projection; Y merged back to
 * (s * b, E) for the output projection. squeeze_is_output: the (3, s, b, E) tensor before the
 * Gathers is a graph output too. */
static void build_torchvision(views_graph *t, int64_t b, int64_t s, bool squeeze_is_output) {
    new_views_graph(t, b, s);
    const int64_t qd[3] = {s, b, 3 * E};
    t->qkv = th_named(t->g, "qkv", TCI_DTYPE_FLOAT, 3, qd, NULL);
    ir_tensor *sq;
    torchvision_heads(t, &sq);
    ir_tensor *outs[2] = {t->out, sq};
    th_graph_io(t->g, &t->qkv, 1, outs, squeeze_is_output ? 2 : 1);
    ck_assert_tci_ok(pass_optimize(t->g));
}

/* The projections' weights and biases, the same in every graph built: in_proj W (E, 3E) as the
 * MatMul reads it and its bias (3E), out_proj W (E, E) as the Gemm reads it under transB and
 * its bias (E). */
static float layer_weight(int which, int64_t i) {
    return 0.08f * sinf(0.7f * (float)i + 1.3f * (float)which) + 0.01f * (float)which;
}

/* The whole layer of nn.MultiheadAttention(batch_first=True) as torch.onnx writes it: x (b, s,
 * E), Transpose to (s, b, E), in_proj MatMul + bias Add, the heads above, out_proj Gemm (transB,
 * bias C), Reshape (s, b, E), Transpose back and the residual Add of x. qkv_is_output: the packed
 * projection is a graph output too. */
static void build_torchvision_layer(views_graph *t, int64_t b, int64_t s, bool qkv_is_output) {
    ir_graph *g = new_views_graph(t, b, s);
    const int64_t xd[3] = {b, s, E}, wd[2] = {E, 3 * E}, bd[1] = {3 * E}, ed[1] = {E};
    const int64_t od[2] = {E, E};
    float *w = malloc(sizeof(float) * 3 * E * E), *ob = malloc(sizeof(float) * 3 * E);
    ck_assert(w && ob);
    for (int64_t i = 0; i < 3 * E * E; i++) w[i] = layer_weight(0, i);
    for (int64_t i = 0; i < 3 * E; i++) ob[i] = layer_weight(1, i);
    ir_tensor *wi = th_named(g, "in_proj_weight", TCI_DTYPE_FLOAT, 2, wd, w);
    ir_tensor *bi = th_named(g, "in_proj_bias", TCI_DTYPE_FLOAT, 1, bd, ob);
    for (int64_t i = 0; i < E * E; i++) w[i] = layer_weight(2, i);
    for (int64_t i = 0; i < E; i++) ob[i] = layer_weight(3, i);
    ir_tensor *wo = th_named(g, "out_proj_weight", TCI_DTYPE_FLOAT, 2, od, w);
    ir_tensor *bo = th_named(g, "out_proj_bias", TCI_DTYPE_FLOAT, 1, ed, ob);
    free(w);
    free(ob);
    t->x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    t->xt = named(g, "xt");
    ir_tensor *mm = named(g, "mm");
    t->qkv = named(g, "qkv");
    t->to_seq = transpose(g, "to_seq", t->x, t->xt, (const int64_t[]){1, 0, 2}, 3);
    t->in_proj = node1(g, "in_proj", "MatMul", (ir_tensor *[]){t->xt, wi}, 2, mm);
    t->in_bias = node1(g, "in_bias", "Add", (ir_tensor *[]){mm, bi}, 2, t->qkv);
    ir_tensor *sq, *o = named(g, "o"), *o3 = named(g, "o3"), *ob3 = named(g, "ob3");
    ir_tensor *y = named(g, "layer_out");
    torchvision_heads(t, &sq);
    t->out_proj = node1(g, "out_proj", "Gemm", (ir_tensor *[]){t->out, wo, bo}, 3, o);
    th_attr_int(g, t->out_proj, "transB", 1);
    ir_tensor *sbe = ints(g, "shape_sbe", 3, (const int64_t[]){s, b, E});
    node1(g, "unflat", "Reshape", (ir_tensor *[]){o, sbe}, 2, o3);
    t->to_batch = transpose(g, "to_batch", o3, ob3, (const int64_t[]){1, 0, 2}, 3);
    node1(g, "residual", "Add", (ir_tensor *[]){t->x, ob3}, 2, y);
    t->out = y;
    ir_tensor *outs[2] = {y, t->qkv};
    th_graph_io(g, &t->x, 1, outs, qkv_is_output ? 2 : 1);
    ck_assert_tci_ok(pass_optimize(g));
}

/* timm's Attention export on a packed (b, s, 3E) projection: Reshape (b, s, 3, H, D), Transpose
 * to (3, b, H, s, D), Split and Squeeze; or (slice) one constant Slice of the last dim per operand
 * then Reshape (b, s, H, D) and Transpose; Y merged to (b, s, E). */
static void build_packed(views_graph *t, int64_t b, int64_t s, bool slice) {
    ir_graph *g = new_views_graph(t, b, s);
    const int64_t qd[3] = {b, s, 3 * E};
    t->qkv = th_named(g, "qkv", TCI_DTYPE_FLOAT, 3, qd, NULL);
    t->out = named(g, "out");
    ir_tensor *ops[3];
    char nm[32];
    for (int i = 0; i < 3; i++) ops[i] = named(g, (snprintf(nm, sizeof nm, "op%d", i), nm));
    if (slice) {
        const int64_t shape4[4] = {b, s, H, D}, two = 2;
        ir_tensor *s4 = ints(g, "shape4", 4, shape4), *axis = ints(g, "axis2", 1, &two);
        for (int i = 0; i < 3; i++) {
            const int64_t from = i * E, to = (i + 1) * E;
            ir_tensor *si = named(g, (snprintf(nm, sizeof nm, "s%d", i), nm));
            ir_tensor *ri = named(g, (snprintf(nm, sizeof nm, "r%d", i), nm));
            ir_tensor *st = ints(g, (snprintf(nm, sizeof nm, "st%d", i), nm), 1, &from);
            ir_tensor *en = ints(g, (snprintf(nm, sizeof nm, "en%d", i), nm), 1, &to);
            node1(g, "slice", "Slice", (ir_tensor *[]){t->qkv, st, en, axis}, 4, si);
            node1(g, "view", "Reshape", (ir_tensor *[]){si, s4}, 2, ri);
            transpose(g, "heads", ri, ops[i], (const int64_t[]){0, 2, 1, 3}, 4);
        }
    } else {
        const int64_t shape5[5] = {b, s, 3, H, D}, zero = 0;
        ir_tensor *r = named(g, "r"), *tr = named(g, "tr"), *parts[3];
        ir_tensor *ax0 = ints(g, "ax0", 1, &zero);
        node1(g, "view", "Reshape", (ir_tensor *[]){t->qkv, ints(g, "shape5", 5, shape5)}, 2, r);
        transpose(g, "qkv_first", r, tr, (const int64_t[]){2, 0, 3, 1, 4}, 5);
        for (int i = 0; i < 3; i++) parts[i] = named(g, (snprintf(nm, sizeof nm, "part%d", i), nm));
        th_node_io(g, "split", "Split", 13, &tr, 1, parts, 3);
        for (int i = 0; i < 3; i++)
            node1(g, "squeeze", "Squeeze", (ir_tensor *[]){parts[i], ax0}, 2, ops[i]);
    }
    ir_tensor *y = sdpa(t, ops[0], ops[1], ops[2]);
    ir_tensor *yt = named(g, "yt");
    transpose(g, "merge", y, yt, (const int64_t[]){0, 2, 1, 3}, 4);
    node1(g, "flat", "Reshape", (ir_tensor *[]){yt, ints(g, "shape_out", 3, (const int64_t[]){b, s, E})},
          2, t->out);
    th_graph_io(g, &t->qkv, 1, &t->out, 1);
    ck_assert_tci_ok(pass_optimize(g));
}

static int count_steps(const plan *p, plan_step_kind kind) {
    int n = 0;
    for (int i = 0; i < p->num_steps; i++) n += p->steps[i].kind == kind;
    return n;
}

static const plan_step *find_step(const plan *p, plan_step_kind kind) {
    for (int i = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == kind) return &p->steps[i];
    return NULL;
}

/* The attention step as the kernel computes it, in double: Q, K, V read at their offsets through
 * their strides, Y written through y_strides into y (count elements, NaN first: every element
 * must be written once). */
static void replay(const plan_attention *a, const float *q, const float *k, const float *v,
                   float *y, int64_t count) {
    for (int64_t i = 0; i < count; i++) y[i] = NAN;
    double *srow = malloc((size_t)a->kv_len * sizeof(double));
    ck_assert_ptr_nonnull(srow);
    for (int64_t b = 0; b < a->batch; b++)
        for (int64_t h = 0; h < a->heads; h++)
            for (int64_t i = 0; i < a->q_len; i++) {
                const float *qr = q + a->q_offset + b * a->q_strides[0] + h * a->q_strides[1] +
                                  i * a->q_strides[2];
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < a->kv_len; j++) {
                    const float *kr = k + a->k_offset + b * a->k_strides[0] +
                                      h * a->k_strides[1] + j * a->k_strides[2];
                    double acc = 0.0;
                    for (int64_t e = 0; e < a->head_dim; e++)
                        acc += (double)qr[e * a->q_strides[3]] * kr[e * a->k_strides[3]];
                    srow[j] = acc * a->scale;
                    if (srow[j] > mx) mx = srow[j];
                }
                for (int64_t j = 0; j < a->kv_len; j++) sum += srow[j] = exp(srow[j] - mx);
                for (int64_t e = 0; e < a->head_dim; e++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < a->kv_len; j++)
                        acc += srow[j] * v[a->v_offset + b * a->v_strides[0] +
                                           h * a->v_strides[1] + j * a->v_strides[2] +
                                           e * a->v_strides[3]];
                    const int64_t at = b * a->y_strides[0] + h * a->y_strides[1] +
                                       i * a->y_strides[2] + e * a->y_strides[3];
                    ck_assert_int_ge(at, 0);
                    ck_assert_int_lt(at, count);
                    ck_assert_msg(isnan(y[at]), "y element %lld written twice", (long long)at);
                    y[at] = (float)(acc / sum);
                }
            }
    free(srow);
    for (int64_t i = 0; i < count; i++) ck_assert_msg(!isnan(y[i]), "y[%lld] unwritten", (long long)i);
}

static int64_t count_of(const ir_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
}

/* Runs the CPU reference on a random qkv; replays the plan's attention step on the tensors it
 * reads (qkv itself, or what `source` computes from qkv) and compares with the reference's
 * output. */
static void check_replay(views_graph *t, const plan *p,
                         void (*source)(const views_graph *, const float *, int, float *)) {
    const plan_step *st = find_step(p, PLAN_STEP_ATTENTION);
    ck_assert_ptr_nonnull(st);
    const int64_t n_qkv = count_of(t->qkv), n_out = count_of(t->out);
    float *qkv = malloc((size_t)n_qkv * sizeof(float)), *got = malloc((size_t)n_out * sizeof(float));
    float *src[3] = {qkv, qkv, qkv};
    ck_assert(qkv && got);
    for (int64_t i = 0; i < n_qkv; i++) qkv[i] = sinf(0.37f * (float)i) + 0.5f * cosf(0.011f * (float)(i * i % 977));
    for (int k = 0; k < 3 && source; k++) {
        src[k] = malloc((size_t)n_qkv * sizeof(float));
        ck_assert_ptr_nonnull(src[k]);
        source(t, qkv, k, src[k]);
    }
    replay(&st->u.attention, src[0], src[1], src[2], got, n_out);
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(t->g, &ex));
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, t->qkv->rank, t->qkv->dims, qkv);
    ck_assert_tci_ok(exec_cpu_run(ex, &in, 1));
    const tci_tensor *want = exec_cpu_output(ex, 0);
    ck_assert_int_eq(want->rank, t->out->rank);
    th_assert_near(got, want->data, (size_t)n_out, 2e-5f);
    exec_cpu_destroy(ex);
    for (int k = 0; k < 3 && source; k++) free(src[k]);
    free(qkv);
    free(got);
}

/* A deterministic x of the layer's input shape (malloc'd). */
static float *layer_input(const views_graph *t) {
    const int64_t n = t->b * t->s * E;
    float *x = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = sinf(0.29f * (float)i) + 0.3f * cosf(0.013f * (float)(i * i % 1013));
    return x;
}

/* The plan of the whole layer computed on the host as its steps do: the in_proj GEMM with its
 * bias into the tensor the attention step reads (rows in x's (b, s) order), the attention step
 * replayed through its offsets and strides into the tensor the out_proj reads, then the out_proj
 * with its bias and the residual; against the CPU reference of want_graph (the model's graph). */
static void check_layer_replay(const views_graph *t, const plan *p, ir_graph *want_graph) {
    const int64_t rows = t->b * t->s;
    float *x = layer_input(t), *qkv = malloc(sizeof(float) * (size_t)(rows * 3 * E));
    float *ctx = malloc(sizeof(float) * (size_t)(rows * E));
    float *got = malloc(sizeof(float) * (size_t)(rows * E));
    ck_assert(qkv && ctx && got);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < 3 * E; j++) {
            double acc = layer_weight(1, j);
            for (int64_t k = 0; k < E; k++)
                acc += (double)x[r * E + k] * layer_weight(0, k * 3 * E + j);
            qkv[r * 3 * E + j] = (float)acc;
        }
    const plan_step *st = find_step(p, PLAN_STEP_ATTENTION);
    ck_assert_ptr_nonnull(st);
    replay(&st->u.attention, qkv, qkv, qkv, ctx, rows * E);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < E; j++) {
            double acc = layer_weight(3, j) + x[r * E + j];
            for (int64_t k = 0; k < E; k++)
                acc += (double)ctx[r * E + k] * layer_weight(2, j * E + k);
            got[r * E + j] = (float)acc;
        }
    const int64_t xd[3] = {t->b, t->s, E};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 3, xd, x);
    float *want = th_cpu_output(want_graph, &in, 1, 0);
    th_assert_near(got, want, (size_t)(rows * E), 2e-5f);
    free(want);
    free(x);
    free(qkv);
    free(ctx);
    free(got);
}

/* Graph output `index` of the layer's graph as the GPU passes left it, run on the CPU
 * reference, against the model's graph (built alike, untouched): the same values. */
static void check_same_values(const views_graph *t, ir_graph *model, size_t index) {
    float *x = layer_input(t);
    const int64_t xd[3] = {t->b, t->s, E};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 3, xd, x);
    float *got = th_cpu_output(t->g, &in, 1, index), *want = th_cpu_output(model, &in, 1, index);
    const ir_tensor *out = model->outputs[index];
    th_assert_near(got, want, (size_t)(t->b * t->s * out->dims[out->rank - 1]), 1e-6f);
    free(got);
    free(want);
    free(x);
}

/* Batch 1: every movement node between the packed projection and the attention, and after it,
 * folds; the plan is the attention step alone, reading qkv three times at offsets 0, E, 2E. */
START_TEST(test_torchvision_batch1) {
    views_graph t;
    build_torchvision(&t, 1, 9, false);
    ck_assert_tci_ok(pass_prepare_for_gpu(t.g));
    const ir_epilogue *e = t.pv->epilogue;
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_nonnull(e->attention);
    const ir_attention *a = e->attention;
    ck_assert_ptr_eq(a->q, t.qkv);
    ck_assert_ptr_eq(a->k, t.qkv);
    ck_assert_ptr_eq(a->v, t.qkv);
    ck_assert_ptr_eq(e->output, t.out);
    ck_assert_int_eq(a->q_offset, 0);
    ck_assert_int_eq(a->k_offset, E);
    ck_assert_int_eq(a->v_offset, 2 * E);
    ck_assert_ptr_nonnull(strstr(e->label, "(attention) reading through"));
    for (int i = 0; i < 3; i++) ck_assert_ptr_eq(t.gathers[i]->fused_into, t.pv);
    plan *p;
    ck_assert_tci_ok(plan_build(t.g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    const plan_attention *pa = &p->steps[0].u.attention;
    ck_assert_int_eq(p->steps[0].kind, PLAN_STEP_ATTENTION);
    /* (s, 1, 3, H, D) storage read as (b, h, s, d); Y (s, H, D) */
    const int64_t qs[4] = {3 * E, D, 3 * E, 1}, ys[3] = {D, E, 1};
    for (int i = 1; i < 4; i++) {
        ck_assert_int_eq(pa->q_strides[i], qs[i]);
        ck_assert_int_eq(pa->k_strides[i], qs[i]);
        ck_assert_int_eq(pa->v_strides[i], qs[i]);
        ck_assert_int_eq(pa->y_strides[i], ys[i - 1]);
    }
    check_replay(&t, p, NULL);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* Batch 2: the (s, b*H, D) views of the gathered (s, b, E) thirds merge b and the heads, which
 * are no one run in qkv (b steps 3E, a head D); the Reshape to (b, H, s, D) after the Transpose
 * splits them again, so Q, K and V are still strided views of qkv and every movement node
 * folds: the plan is the attention step alone, as at batch 1. */
START_TEST(test_torchvision_batch2) {
    views_graph t;
    build_torchvision(&t, 2, 7, false);
    ck_assert_tci_ok(pass_prepare_for_gpu(t.g));
    const ir_attention *a = t.pv->epilogue->attention;
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_eq(a->q, t.qkv);
    ck_assert_ptr_eq(a->k, t.qkv);
    ck_assert_ptr_eq(a->v, t.qkv);
    for (int i = 0; i < 3; i++) ck_assert_ptr_eq(t.gathers[i]->fused_into, t.pv);
    ck_assert_int_eq(a->q_offset, 0);
    ck_assert_int_eq(a->k_offset, E);
    ck_assert_int_eq(a->v_offset, 2 * E);
    ck_assert_ptr_eq(t.pv->epilogue->output, t.out);
    plan *p;
    ck_assert_tci_ok(plan_build(t.g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    ck_assert_int_eq(p->steps[0].kind, PLAN_STEP_ATTENTION);
    /* qkv (s, b, 3, H, D) read as (b, h, s, d) */
    const plan_attention *pa = &p->steps[0].u.attention;
    const int64_t qs[4] = {3 * E, D, 2 * 3 * E, 1};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pa->q_strides[i], qs[i]);
        ck_assert_int_eq(pa->k_strides[i], qs[i]);
        ck_assert_int_eq(pa->v_strides[i], qs[i]);
    }
    check_replay(&t, p, NULL);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* sq (3, s, b, E) = the Squeeze's output, qkv's thirds first */
static void squeezed(const views_graph *t, const float *qkv, int k, float *out) {
    (void)k;
    for (int64_t i = 0; i < 3; i++)
        for (int64_t r = 0; r < t->s * t->b; r++)
            for (int64_t e = 0; e < E; e++)
                out[(i * t->s * t->b + r) * E + e] = qkv[r * 3 * E + i * E + e];
}

/* The tensor before the Gathers is a graph output: the chains stop there (it is computed, by
 * the Transpose's copy), and the Gathers fold into offsets into it. */
START_TEST(test_shared_tensor_stops_walk) {
    views_graph t;
    build_torchvision(&t, 1, 5, true);
    ck_assert_tci_ok(pass_prepare_for_gpu(t.g));
    const ir_attention *a = t.pv->epilogue->attention;
    ck_assert_ptr_nonnull(a);
    const ir_tensor *sq = t.gathers[0]->inputs[0];
    ck_assert_ptr_eq(a->q, sq);
    ck_assert_ptr_eq(a->k, sq);
    ck_assert_ptr_eq(a->v, sq);
    ck_assert_ptr_null(sq->producer->fused_into);
    ck_assert_int_eq(a->k_offset, 5 * E);
    plan *p;
    ck_assert_tci_ok(plan_build(t.g, NULL, &p));
    ck_assert_int_eq(count_steps(p, PLAN_STEP_GATHER), 0);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 1);
    check_replay(&t, p, squeezed);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* timm's Split form and the Slice form, batch 2: everything folds, one step. */
START_TEST(test_split_and_slice) {
    for (int slice = 0; slice < 2; slice++) {
        views_graph t;
        build_packed(&t, 2, 11, slice);
        ck_assert_tci_ok(pass_prepare_for_gpu(t.g));
        const ir_attention *a = t.pv->epilogue ? t.pv->epilogue->attention : NULL;
        ck_assert_msg(a != NULL, "slice %d", slice);
        ck_assert_ptr_eq(a->q, t.qkv);
        ck_assert_ptr_eq(a->v, t.qkv);
        ck_assert_int_eq(a->v_offset, slice ? 2 * E : 2 * H * D);
        plan *p;
        ck_assert_tci_ok(plan_build(t.g, NULL, &p));
        ck_assert_int_eq(p->num_steps, 1);
        const plan_attention *pa = &p->steps[0].u.attention;
        const int64_t qs[4] = {11 * 3 * E, D, 3 * E, 1}, ys[4] = {11 * E, D, E, 1};
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(pa->q_strides[i], qs[i]);
            ck_assert_int_eq(pa->k_strides[i], qs[i]);
            ck_assert_int_eq(pa->y_strides[i], ys[i]);
        }
        check_replay(&t, p, NULL);
        plan_destroy(p);
        ir_graph_destroy(t.g);
    }
}
END_TEST

/* A kernel-less head dim lowers every folded node as its own step again, after the attention's
 * MatMul too: the unfused plan computes what the CPU reference does (its step kinds). */
START_TEST(test_unfused_lowers_folded_nodes) {
    views_graph t;
    build_packed(&t, 2, 4, false);
    ck_assert_tci_ok(pass_prepare_for_gpu(t.g));
    ck_assert_ptr_nonnull(t.pv->epilogue->attention);
    plan_options o = {.precision = TCI_PRECISION_FP32};
    plan *p;
    ck_assert_tci_ok(plan_build(t.g, &o, &p));
    ck_assert_int_eq(count_steps(p, PLAN_STEP_ATTENTION), 0);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_SOFTMAX), 1);
    /* the merge Transpose after P V is a copy again, the last step */
    ck_assert_int_eq(p->steps[p->num_steps - 1].kind, PLAN_STEP_COPY);
    /* the Transpose to (3, B, H, S, D), K's transpose and the merge; Q, K and V are parts of the
     * first read in place (2 x 2 x 4 x 32 fp32 values each: 2048 bytes, whole multiples of 256) */
    ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 3);
    ck_assert_int_eq(p->num_views, 3);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* A batch-1 variant of a plan built for batch 2 (an engine running a smaller batch re-plans
 * it, src/api/engine.c): with the built graph as its `like` and the dims that are 1 only at this
 * batch marked, the variant folds exactly what the built plan folds (the engine refuses a
 * variant whose steps differ), and its attention step still computes the graph. */
START_TEST(test_batch_variant_plans_like_built) {
    for (int form = 0; form < 3; form++) {
        views_graph built, variant, model;
        if (form == 0) {
            build_torchvision(&built, 2, 6, false);
            build_torchvision(&variant, 1, 6, false);
        } else if (form == 2) { /* the whole layer: the moved Transposes fold alike */
            build_torchvision_layer(&built, 2, 6, false);
            build_torchvision_layer(&variant, 1, 6, false);
            build_torchvision_layer(&model, 1, 6, false);
        } else {
            build_packed(&variant, 1, 6, false);
            build_packed(&built, 2, 6, false);
        }
        ck_assert_tci_ok(pass_prepare_for_gpu(built.g));
        pass_mark_variant_dims(variant.g, built.g);
        variant.g->like = built.g;
        ck_assert_tci_ok(pass_prepare_for_gpu(variant.g));
        variant.g->like = NULL;
        plan *pb, *pv;
        ck_assert_tci_ok(plan_build(built.g, NULL, &pb));
        ck_assert_tci_ok(plan_build(variant.g, NULL, &pv));
        ck_assert_int_eq(pv->num_steps, pb->num_steps);
        for (int i = 0; i < pb->num_steps; i++) {
            ck_assert_int_eq(pv->steps[i].kind, pb->steps[i].kind);
            ck_assert_str_eq(pv->steps[i].node->name, pb->steps[i].node->name);
            ck_assert_str_eq(pv->steps[i].label, pb->steps[i].label);
        }
        ck_assert_int_eq(count_steps(pv, PLAN_STEP_ATTENTION), 1);
        ck_assert_int_eq(count_steps(pv, PLAN_STEP_COPY), 0);
        if (form == 2) {
            ck_assert_ptr_eq(variant.to_seq->fused_into, variant.pv);
            ck_assert_ptr_eq(variant.to_batch->fused_into, variant.pv);
            check_layer_replay(&variant, pv, model.g);
            ir_graph_destroy(model.g);
        } else {
            check_replay(&variant, pv, NULL);
        }
        plan_destroy(pb);
        plan_destroy(pv);
        ir_graph_destroy(built.g);
        ir_graph_destroy(variant.g);
    }
}
END_TEST

/* The layer with the (b, s, E) <-> (s, b, E) Transposes around its projections, batches 1 and 2:
 * the Transpose before the in_proj moves after it and the one after the out_proj before it
 * (rows.c), and both fold into the attention step, which reads the projection's (b, s, 3E) rows
 * and writes Y as the out_proj's (b * s, E) rows: three steps (GEMM, attention, GEMM with the
 * bias and the residual), no copy. The rewritten graph computes the model's values on the CPU
 * reference, and so does the plan, replayed. */
START_TEST(test_torchvision_layer_transposes_fold) {
    for (int64_t b = 1; b <= 2; b++) {
        views_graph t, model;
        build_torchvision_layer(&t, b, 7, false);
        build_torchvision_layer(&model, b, 7, false);
        ck_assert_tci_ok(pass_prepare_for_gpu(t.g));
        ck_assert_ptr_eq(t.to_seq->fused_into, t.pv);
        ck_assert_ptr_eq(t.to_batch->fused_into, t.pv);
        ck_assert_ptr_eq(t.in_proj->inputs[0], t.x);
        ck_assert_ptr_eq(t.to_seq->outputs[0], t.qkv);
        const ir_attention *a = t.pv->epilogue->attention;
        ck_assert_ptr_eq(a->q, t.in_bias->outputs[0]);
        ck_assert_str_eq(a->q->name, "qkv/rows");
        ck_assert_int_eq(a->q->dims[0], b);
        ck_assert_ptr_eq(t.out_proj->inputs[0], t.pv->epilogue->output);
        plan *p;
        ck_assert_tci_ok(plan_build(t.g, NULL, &p));
        ck_assert_int_eq(p->num_steps, 3);
        ck_assert_int_eq(p->steps[0].kind, PLAN_STEP_GEMM);
        ck_assert_int_eq(p->steps[1].kind, PLAN_STEP_ATTENTION);
        ck_assert_int_eq(p->steps[2].kind, PLAN_STEP_GEMM);
        ck_assert_str_eq(p->steps[2].label, "Gemm+Reshape+Add");
        ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 0);
        /* qkv (b, s, 3, H, D) read as (b, h, s, d); Y into (b, s, H, D) */
        const plan_attention *pa = &p->steps[1].u.attention;
        const int64_t qs[4] = {7 * 3 * E, D, 3 * E, 1}, ys[4] = {7 * E, D, E, 1};
        for (int i = b == 1; i < 4; i++) {
            ck_assert_int_eq(pa->q_strides[i], qs[i]);
            ck_assert_int_eq(pa->v_strides[i], qs[i]);
            ck_assert_int_eq(pa->y_strides[i], ys[i]);
        }
        ck_assert_int_eq(pa->k_offset, E);
        check_layer_replay(&t, p, model.g);
        check_same_values(&t, model.g, 0);
        plan_destroy(p);
        ir_graph_destroy(t.g);
        ir_graph_destroy(model.g);
    }
}
END_TEST

/* The packed projection is a graph output too: the attention's chains stop at it, so the
 * Transpose moved after the in_proj would fold into nothing and stay a copy, of the 3E-wide
 * projection instead of the E-wide input; that move is put back (the in_proj reads the
 * Transpose's output, which is a copy step again), while the one after the out_proj stays. */
START_TEST(test_torchvision_layer_unfolded_move_put_back) {
    views_graph t, model;
    build_torchvision_layer(&t, 2, 5, true);
    build_torchvision_layer(&model, 2, 5, true);
    ck_assert_tci_ok(pass_prepare_for_gpu(t.g));
    ck_assert_ptr_nonnull(t.pv->epilogue->attention);
    ck_assert_ptr_null(t.to_seq->fused_into);
    ck_assert_ptr_eq(t.to_seq->inputs[0], t.x);
    ck_assert_ptr_eq(t.to_seq->outputs[0], t.xt);
    ck_assert_ptr_eq(t.in_proj->inputs[0], t.xt);
    ck_assert_ptr_eq(t.in_bias->outputs[0], t.qkv);
    ck_assert_ptr_eq(t.pv->epilogue->attention->q, t.qkv);
    ck_assert_ptr_eq(t.to_batch->fused_into, t.pv);
    for (size_t i = 0; i < t.g->num_nodes; i++) /* the Reshapes made for the one put back: none */
        ck_assert_ptr_null(strstr(t.g->nodes[i]->name, "to_seq/"));
    plan *p;
    ck_assert_tci_ok(plan_build(t.g, NULL, &p));
    ck_assert_int_eq(count_steps(p, PLAN_STEP_COPY), 1);
    ck_assert_ptr_eq(find_step(p, PLAN_STEP_COPY)->node, t.to_seq);
    check_same_values(&t, model.g, 0);
    check_same_values(&t, model.g, 1); /* the packed projection */
    plan_destroy(p);
    ir_graph_destroy(t.g);
    ir_graph_destroy(model.g);
}
END_TEST

/* A Transpose that moves only dims of length 1 (batch 1 past the sequence) is an alias. */
START_TEST(test_unit_transpose_alias) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xd[3] = {1, 6, 8};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL), *y = named(g, "y");
    ir_tensor *z = named(g, "z");
    transpose(g, "t", x, y, (const int64_t[]){1, 0, 2}, 3);
    transpose(g, "t2", y, z, (const int64_t[]){2, 1, 0}, 3); /* a real one */
    th_graph_io(g, &x, 1, &z, 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    ck_assert_int_eq(p->steps[0].kind, PLAN_STEP_COPY);
    plan_destroy(p);
    ir_graph_destroy(g);

    /* the length-1 dim marked as one only at this batch (ir_tensor.variant_dims): a copy */
    ck_assert_tci_ok(ir_graph_create(&g));
    x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    y = named(g, "y");
    transpose(g, "t", x, y, (const int64_t[]){1, 0, 2}, 3);
    th_graph_io(g, &x, 1, &y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    x->variant_dims = 1u;
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    ck_assert_int_eq(p->steps[0].kind, PLAN_STEP_COPY);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("attention_views");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_torchvision_batch1);
    tcase_add_test(tc, test_torchvision_batch2);
    tcase_add_test(tc, test_shared_tensor_stops_walk);
    tcase_add_test(tc, test_split_and_slice);
    tcase_add_test(tc, test_unfused_lowers_folded_nodes);
    tcase_add_test(tc, test_batch_variant_plans_like_built);
    tcase_add_test(tc, test_unit_transpose_alias);
    tcase_add_test(tc, test_torchvision_layer_transposes_fold);
    tcase_add_test(tc, test_torchvision_layer_unfolded_move_put_back);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
