/* The GPU plans of RMSNormalization (LayerNormalization's step in its RMS mode, with a residual
 * Add folded in) and RotaryEmbedding (one PLAN_STEP_ROTARY): the step's parameters, the step
 * replayed on the host with the kernels' rules (src/kernels/norm.cu, src/kernels/rope.cu)
 * against the CPU reference, and the refusals. No GPU needed. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

static const plan_step *find_step(const plan *p, plan_step_kind kind) {
    for (int i = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == kind) return &p->steps[i];
    return NULL;
}

static int count_steps(const plan *p, plan_step_kind kind) {
    int n = 0;
    for (int i = 0; i < p->num_steps; i++) n += p->steps[i].kind == kind;
    return n;
}

static void fill(float *v, int64_t n, float a, float b) {
    for (int64_t i = 0; i < n; i++) v[i] = sinf(a * (float)i + b) * 1.5f;
}

/* ---- RMSNormalization ---- */

/* A LAYERNORM step in RMS mode on the host: rows of (x + residual), each scaled by
 * 1 / sqrt(mean of squares + epsilon) and by the scale row. */
static void replay_rms(const plan_step *s, const float *x, const float *r, const float *scale,
                       float *y, float *sum) {
    const int64_t rows = s->u.layernorm.rows, len = s->u.layernorm.length;
    for (int64_t row = 0; row < rows; row++) {
        double sq = 0.0;
        for (int64_t i = 0; i < len; i++) {
            float v = x[row * len + i] + (r ? r[row * len + i] : 0.0f);
            if (sum) sum[row * len + i] = v;
            sq += (double)v * v;
        }
        double inv = 1.0 / sqrt(sq / (double)len + s->u.layernorm.epsilon);
        for (int64_t i = 0; i < len; i++) {
            float v = x[row * len + i] + (r ? r[row * len + i] : 0.0f);
            y[row * len + i] = (float)(v * inv * scale[i]);
        }
    }
}

/* X (2, 3, 8) against a scale over its dims from axis on: axis -1 (rows of 8) and axis 1 (rows
 * of 24, a (3, 8) scale). */
START_TEST(test_rms_plan_axes) {
    for (int k = 0; k < 2; k++) {
        const int64_t axis = k == 0 ? -1 : 1, rows = k == 0 ? 6 : 2, len = k == 0 ? 8 : 24;
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        const int64_t xd[3] = {2, 3, 8}, sd1[1] = {8}, sd2[2] = {3, 8};
        float scale[24];
        fill(scale, 24, 0.3f, 1.0f);
        ir_tensor *in[2] = {th_named(g, "x", F, 3, xd, NULL),
                            th_named(g, "scale", F, k == 0 ? 1 : 2, k == 0 ? sd1 : sd2, scale)};
        ir_tensor *out = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
        ir_node *n = th_node_io(g, "rms", "RMSNormalization", 23, in, 2, &out, 1);
        th_attr_int(g, n, "axis", axis);
        th_attr_float(g, n, "epsilon", 1e-3f);
        th_graph_io(g, in, 1, &out, 1);
        plan *p;
        ck_assert_tci_ok(th_plan_for_gpu(g, &p));
        ck_assert_int_eq(p->num_steps, 1);
        const plan_step *s = find_step(p, PLAN_STEP_LAYERNORM);
        ck_assert_ptr_nonnull(s);
        ck_assert(s->u.layernorm.rms && !s->u.layernorm.has_bias && !s->u.layernorm.has_residual);
        ck_assert_int_eq(s->u.layernorm.rows, rows);
        ck_assert_int_eq(s->u.layernorm.length, len);
        ck_assert_float_eq_tol(s->u.layernorm.epsilon, 1e-3f, 1e-9f);
        ck_assert_str_eq(plan_step_kernel(s), "tcinfer rmsnorm");
        ck_assert_int_eq(p->tensors[s->inputs[0]].dtype, TCI_DTYPE_FLOAT16);
        ck_assert_int_eq(p->tensors[s->inputs[1]].dtype, TCI_DTYPE_FLOAT16);
        ck_assert_int_eq(s->inputs[2], -1);
        ck_assert_int_eq(s->inputs[3], -1);
        float x[48], got[48];
        fill(x, 48, 0.7f, 0.2f);
        replay_rms(s, x, NULL, scale, got, NULL);
        tci_tensor tin = th_tensor(F, 3, xd, x);
        float *want = th_cpu_output(g, &tin, 1, 0);
        th_assert_near(got, want, 48, 1e-5f);
        free(want);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

/* h = a + b, then RMSNormalization(h), and h read again (a LLaMA block's residual stream): the
 * Add folds into the step, which reads a and b and also writes h. */
START_TEST(test_rms_plan_residual) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xd[2] = {5, 16}, sd[1] = {16};
    float scale[16];
    fill(scale, 16, 0.9f, 0.5f);
    ir_tensor *a = th_named(g, "a", F, 2, xd, NULL), *bb = th_named(g, "b", F, 2, xd, NULL);
    ir_tensor *ra = th_named(g, "ra", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *rb = th_named(g, "rb", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *h = th_named(g, "h", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *sc = th_named(g, "scale", F, 1, sd, scale);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *z = th_named(g, "z", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    /* the Add's operands are computed (Relu, Neg), as a block's are */
    th_node_io(g, "relu", "Relu", 17, &a, 1, &ra, 1);
    th_node_io(g, "neg", "Neg", 17, &bb, 1, &rb, 1);
    th_node_io(g, "add", "Add", 17, (ir_tensor *[]){ra, rb}, 2, &h, 1);
    th_node_io(g, "rms", "RMSNormalization", 23, (ir_tensor *[]){h, sc}, 2, &y, 1);
    th_node_io(g, "add2", "Add", 17, (ir_tensor *[]){y, h}, 2, &z, 1);
    th_graph_io(g, (ir_tensor *[]){a, bb}, 2, &z, 1);
    plan *p;
    ck_assert_tci_ok(th_plan_for_gpu(g, &p));
    const plan_step *s = find_step(p, PLAN_STEP_LAYERNORM);
    ck_assert_ptr_nonnull(s);
    ck_assert(s->u.layernorm.rms && s->u.layernorm.has_residual);
    ck_assert_int_eq(s->num_outputs, 2);
    ck_assert_str_eq(s->label, "Add+RMSNormalization");
    ck_assert_int_eq(s->u.layernorm.rows, 5);
    ck_assert_int_eq(s->u.layernorm.length, 16);
    /* Relu, Neg, the fused step and the last Add: no step of its own for the first Add */
    ck_assert_int_eq(count_steps(p, PLAN_STEP_ELTWISE), 3);
    ck_assert_int_eq(count_steps(p, PLAN_STEP_LAYERNORM), 1);
    float av[80], bv[80], ra_v[80], rb_v[80], yv[80], hv[80], got[80];
    fill(av, 80, 0.31f, 0.0f);
    fill(bv, 80, 0.17f, 0.4f);
    for (int i = 0; i < 80; i++) {
        ra_v[i] = av[i] > 0.0f ? av[i] : 0.0f;
        rb_v[i] = -bv[i];
    }
    replay_rms(s, ra_v, rb_v, scale, yv, hv);
    for (int i = 0; i < 80; i++) got[i] = yv[i] + hv[i];
    tci_tensor tin[2] = {th_tensor(F, 2, xd, av), th_tensor(F, 2, xd, bv)};
    float *want = th_cpu_output(g, tin, 2, 0);
    th_assert_near(got, want, 80, 1e-5f);
    free(want);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* A scale that is not one row for every row of X (varying over the rows, or broadcast within
 * one), and a negative epsilon: refused at plan build, naming the node and what. */
START_TEST(test_rms_plan_refusal) {
    static const struct {
        int scale_rank;
        int64_t scale_dims[3];
        float epsilon;
        const char *want;
    } cases[] = {
        {3, {2, 1, 8}, 1e-5f, "scale of shape 2x1x8 is not one full row of X's dims from axis 2 "
                              "on (X is 2x3x8)"},
        {1, {1}, 1e-5f, "scale of shape 1 is not one full row"},
        {1, {8}, -1.0f, "epsilon -1 is negative"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        const int64_t xd[3] = {2, 3, 8};
        float scale[16] = {0};
        ir_tensor *in[2] = {th_named(g, "x", F, 3, xd, NULL),
                            th_named(g, "scale", F, cases[c].scale_rank, cases[c].scale_dims,
                                     scale)};
        ir_tensor *out = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
        ir_node *n = th_node_io(g, "rms", "RMSNormalization", 23, in, 2, &out, 1);
        th_attr_float(g, n, "epsilon", cases[c].epsilon);
        th_graph_io(g, in, 1, &out, 1);
        plan *p = NULL;
        ck_assert_tci_error(th_plan_for_gpu(g, &p), TCI_ERR_UNSUPPORTED,
                            "node 'rms' (RMSNormalization): ");
        ck_assert_msg(strstr(tci_last_error(), cases[c].want), "%s lacks %s", tci_last_error(),
                      cases[c].want);
        ir_graph_destroy(g);
    }
}
END_TEST

/* ---- RotaryEmbedding ---- */

/* A ROTARY step on the host, element by element as rope.cu computes it. */
static void replay_rotary(const plan_step *s, const float *x, const float *cosv,
                          const float *sinv, const int64_t *ids, float *y) {
    const int64_t H = s->u.rotary.heads, S = s->u.rotary.seq, D = s->u.rotary.head_size;
    const int64_t half = s->u.rotary.rotary_dim / 2;
    const int64_t total = s->u.rotary.batch * H * S * D;
    for (int64_t e = 0; e < total; e++) {
        const int64_t d = e % D;
        if (d >= 2 * half) {
            y[e] = x[e];
            continue;
        }
        int64_t rest = e / D, b, t;
        if (s->u.rotary.heads_first) {
            t = rest % S;
            b = rest / S / H;
        } else {
            rest /= H;
            t = rest % S;
            b = rest / S;
        }
        bool first;
        int64_t i, partner;
        if (s->u.rotary.interleaved) {
            first = d % 2 == 0;
            i = d / 2;
            partner = first ? e + 1 : e - 1;
        } else {
            first = d < half;
            i = first ? d : d - half;
            partner = first ? e + half : e - half;
        }
        int64_t row = (s->u.rotary.cache_batch == 1 ? 0 : b) * S + t;
        if (ids) {
            row = ids[(s->u.rotary.ids_batch == 1 ? 0 : b) * S + t];
            ck_assert(row >= 0 && row < s->u.rotary.positions);
        }
        const float c = cosv[row * half + i], sn = sinv[row * half + i];
        y[e] = first ? c * x[e] - sn * x[partner] : sn * x[partner] + c * x[e];
    }
}

enum { RB = 2, RS = 5, RH = 3, RD = 8, RPOS = 11 };

typedef struct rotary_case {
    int rank;        /* 3: (B, S, H * D) with num_heads; 4: (B, H, S, D) */
    int interleaved;
    int64_t rot;     /* rotary_embedding_dim, 0: the head */
    int with_ids;    /* position_ids (ids_batch, S), caches (RPOS, rot / 2) */
    int64_t batch1;  /* ids or caches of batch 1 */
} rotary_case;

START_TEST(test_rotary_plan_replay) {
    static const rotary_case cases[] = {
        {3, 0, 0, 1, 0}, /* LLaMA's first layer: 3-D, position ids */
        {4, 0, 0, 1, 1}, /* its second: 4-D, ids of batch 1 */
        {4, 1, 4, 0, 0}, /* interleaved, partial, caches per sequence */
        {3, 1, 6, 0, 1}, /* 3-D interleaved, partial, caches of batch 1 */
        {3, 0, 4, 1, 0}, /* halves, partial, with ids */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const rotary_case *k = &cases[c];
        const int64_t rot = k->rot ? k->rot : RD, half = rot / 2;
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        const int64_t x4[4] = {RB, RH, RS, RD}, x3[3] = {RB, RS, RH * RD};
        const int64_t cache_b = k->batch1 ? 1 : RB;
        const int64_t c2[2] = {RPOS, half}, c3[3] = {cache_b, RS, half};
        const int64_t idd[2] = {k->batch1 ? 1 : RB, RS};
        const int64_t cache_n = k->with_ids ? RPOS * half : cache_b * RS * half;
        float cosv[RPOS * RD], sinv[RPOS * RD];
        for (int64_t i = 0; i < cache_n; i++) {
            cosv[i] = cosf(0.3f * (float)i);
            sinv[i] = sinf(0.3f * (float)i);
        }
        ir_tensor *in[4];
        in[0] = th_named(g, "x", F, k->rank, k->rank == 4 ? x4 : x3, NULL);
        in[1] = th_named(g, "cos", F, k->with_ids ? 2 : 3, k->with_ids ? c2 : c3, cosv);
        in[2] = th_named(g, "sin", F, k->with_ids ? 2 : 3, k->with_ids ? c2 : c3, sinv);
        if (k->with_ids) in[3] = th_named(g, "ids", TCI_DTYPE_INT64, 2, idd, NULL);
        ir_tensor *out = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
        ir_node *n = th_node_io(g, "rope", "RotaryEmbedding", 23, in, k->with_ids ? 4 : 3, &out,
                                1);
        if (k->rank == 3) th_attr_int(g, n, "num_heads", RH);
        if (k->interleaved) th_attr_int(g, n, "interleaved", 1);
        if (k->rot) th_attr_int(g, n, "rotary_embedding_dim", k->rot);
        ir_tensor *graph_in[2] = {in[0], k->with_ids ? in[3] : NULL};
        th_graph_io(g, graph_in, k->with_ids ? 2 : 1, &out, 1);
        plan *p;
        ck_assert_tci_ok(th_plan_for_gpu(g, &p));
        ck_assert_int_eq(p->num_steps, 1);
        const plan_step *s = find_step(p, PLAN_STEP_ROTARY);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(plan_step_kernel(s), "tcinfer rotary_embedding");
        ck_assert_int_eq(s->u.rotary.batch, RB);
        ck_assert_int_eq(s->u.rotary.heads, RH);
        ck_assert_int_eq(s->u.rotary.seq, RS);
        ck_assert_int_eq(s->u.rotary.head_size, RD);
        ck_assert_int_eq(s->u.rotary.rotary_dim, rot);
        ck_assert_int_eq(s->u.rotary.heads_first, k->rank == 4);
        ck_assert_int_eq(s->u.rotary.interleaved, k->interleaved);
        ck_assert_int_eq(s->u.rotary.cache_batch, k->with_ids ? 1 : cache_b);
        ck_assert_int_eq(s->u.rotary.positions, k->with_ids ? RPOS : 0);
        ck_assert_int_eq(s->u.rotary.ids_batch, k->with_ids ? idd[0] : 1);
        ck_assert_int_eq(p->tensors[s->inputs[0]].dtype, TCI_DTYPE_FLOAT16);
        ck_assert_int_eq(p->tensors[s->inputs[1]].dtype, TCI_DTYPE_FLOAT16);
        if (k->with_ids)
            ck_assert_int_eq(p->tensors[s->inputs[3]].dtype, TCI_DTYPE_INT64);
        else
            ck_assert_int_eq(s->inputs[3], -1);
        enum { N = RB * RS * RH * RD };
        float x[N], got[N];
        int64_t ids[RB * RS];
        fill(x, N, 0.41f, 0.3f);
        for (int i = 0; i < RB * RS; i++) ids[i] = (7 * i + 3) % RPOS;
        replay_rotary(s, x, cosv, sinv, k->with_ids ? ids : NULL, got);
        tci_tensor tin[2] = {th_tensor(F, k->rank, k->rank == 4 ? x4 : x3, x),
                             th_tensor(TCI_DTYPE_INT64, 2, idd, ids)};
        float *want = th_cpu_output(g, tin, k->with_ids ? 2 : 1, 0);
        th_assert_near(got, want, N, 1e-6f);
        free(want);
        plan_destroy(p);
        ir_graph_destroy(g);
    }
}
END_TEST

/* position_ids with caches of no position: refused at build, naming the node. */
START_TEST(test_rotary_plan_refusal) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t xd[4] = {1, 2, 3, 4}, cd[2] = {0, 2}, idd[2] = {1, 3};
    ir_tensor *in[4] = {th_named(g, "x", F, 4, xd, NULL), th_named(g, "cos", F, 2, cd, NULL),
                        th_named(g, "sin", F, 2, cd, NULL),
                        th_named(g, "ids", TCI_DTYPE_INT64, 2, idd, NULL)};
    ir_tensor *out = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_node_io(g, "rope", "RotaryEmbedding", 23, in, 4, &out, 1);
    th_graph_io(g, in, 4, &out, 1);
    plan *p = NULL;
    ck_assert_tci_error(th_plan_for_gpu(g, &p), TCI_ERR_INVALID_MODEL,
                        "node 'rope' (RotaryEmbedding): the caches hold no position");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("llama_plan");
    TCase *t = tcase_create("plan");
    tcase_add_test(t, test_rms_plan_axes);
    tcase_add_test(t, test_rms_plan_residual);
    tcase_add_test(t, test_rms_plan_refusal);
    tcase_add_test(t, test_rotary_plan_replay);
    tcase_add_test(t, test_rotary_plan_refusal);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
