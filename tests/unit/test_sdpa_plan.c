/* The GPU plan of ONNX's own Attention op (src/layers/sdpa.c): one fused attention step where the
 * node's parameters are what the step computes, the step replayed on the host with the kernel's
 * rules against the CPU reference (4-D with is_causal and a bool mask that leaves rows without a
 * key; 3-D with a float mask and a scale), the unfused steps where the step lacks a parameter
 * (test_sdpa_unfused replays them), and each refusal with its reason. No GPU needed. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

enum { B = 2, H = 2, SQ = 5, SK = 7, D = 32 };

typedef struct sdpa_graph {
    ir_graph *g;
    ir_node *node;
    ir_tensor *in[4];
    int num_in;
} sdpa_graph;

/* One Attention node of Q, K, V (rank 4: (B, H, S, D); rank 3: (B, S, H * D)) and, when
 * mask_rank > 0, a mask of mask_dims; y, and the outputs after it when num_outputs > 1, are
 * graph outputs. */
static void build(sdpa_graph *t, int rank, int64_t heads, int64_t kv_heads, int64_t d,
                  tci_dtype mask_dtype, int mask_rank, const int64_t *mask_dims,
                  int num_outputs) {
    memset(t, 0, sizeof *t);
    ck_assert_tci_ok(ir_graph_create(&t->g));
    ir_graph *g = t->g;
    const int64_t q4[4] = {B, heads, SQ, d}, k4[4] = {B, kv_heads, SK, d};
    const int64_t q3[3] = {B, SQ, heads * d}, k3[3] = {B, SK, kv_heads * d};
    t->in[0] = th_named(g, "q", F, rank, rank == 4 ? q4 : q3, NULL);
    t->in[1] = th_named(g, "k", F, rank, rank == 4 ? k4 : k3, NULL);
    t->in[2] = th_named(g, "v", F, rank, rank == 4 ? k4 : k3, NULL);
    t->num_in = 3;
    if (mask_rank)
        t->in[t->num_in++] = th_named(g, "mask", mask_dtype, mask_rank, mask_dims, NULL);
    ir_tensor *out[4];
    static const char *const names[4] = {"y", "present_key", "present_value", "qk"};
    for (int o = 0; o < num_outputs; o++)
        out[o] = th_named(g, names[o], TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    t->node = th_node_io(g, "attention", "Attention", 23, t->in, t->num_in, out, num_outputs);
    if (rank == 3) {
        th_attr_int(g, t->node, "q_num_heads", heads);
        th_attr_int(g, t->node, "kv_num_heads", kv_heads);
    }
    th_graph_io(g, t->in, t->num_in, out, num_outputs);
}

static const plan_step *attention_step(const plan *p) {
    for (int i = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == PLAN_STEP_ATTENTION) return &p->steps[i];
    return NULL;
}

enum { NQ = B * H * SQ * D, NK = B * H * SK * D };

/* Replays the plan's step on seeded inputs (mask: the float or bool values the graph's mask
 * holds, or NULL) and checks it against the CPU reference run of the graph. */
static void check_against_reference(sdpa_graph *t, const plan *p, const void *mask) {
    static float q[NQ], k[NK], v[NK], got[NQ];
    for (int i = 0; i < NQ; i++) q[i] = sinf(0.37f * (float)i) * 2.0f;
    for (int i = 0; i < NK; i++) {
        k[i] = cosf(0.11f * (float)i);
        v[i] = sinf(0.05f * (float)i + 1.0f);
    }
    const plan_step *st = attention_step(p);
    ck_assert_ptr_nonnull(st);
    const plan_attention *a = &st->u.attention;
    for (int i = 0; i < NQ; i++) got[i] = NAN;
    th_replay_attention(a, q, k, v, a->has_mask ? mask : NULL, a->has_keep ? mask : NULL, got);
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(t->g, &ex));
    tci_tensor in[4];
    const float *data[3] = {q, k, v};
    for (int i = 0; i < t->num_in; i++) {
        const ir_tensor *x = t->in[i];
        in[i] = th_tensor(x->dtype, x->rank, x->dims, i < 3 ? (const void *)data[i] : mask);
    }
    ck_assert_tci_ok(exec_cpu_run(ex, in, (size_t)t->num_in));
    const tci_tensor *y = exec_cpu_output(ex, 0);
    ck_assert_int_eq(op_count(y), NQ);
    th_assert_near(got, y->data, NQ, 2e-5f);
    exec_cpu_destroy(ex);
}

/* 4-D, is_causal and a bool keep mask (B, 1, SQ, SK): the step takes the causal flag and reads
 * the mask as keep through broadcast strides; sequence 1 keeps no key for query 0 (its row is
 * zeros in both), and the causal frontier j <= i holds with more keys than queries. */
START_TEST(test_sdpa_plan_causal_bool_mask) {
    sdpa_graph t;
    const int64_t md[4] = {B, 1, SQ, SK};
    build(&t, 4, H, H, D, TCI_DTYPE_BOOL, 4, md, 1);
    th_attr_int(t.g, t.node, "is_causal", 1);
    plan *p;
    ck_assert_tci_ok(th_plan_for_gpu(t.g, &p));
    ck_assert_int_eq(p->num_steps, 1);
    const plan_step *st = attention_step(p);
    ck_assert_ptr_nonnull(st);
    const plan_attention *a = &st->u.attention;
    ck_assert(a->causal && a->has_keep && !a->has_mask && !a->keep_row_mean);
    ck_assert_int_eq(a->heads, H);
    ck_assert_int_eq(a->q_len, SQ);
    ck_assert_int_eq(a->kv_len, SK);
    ck_assert_int_eq(a->head_dim, D);
    ck_assert_float_eq_tol(a->scale, 1.0f / sqrtf((float)D), 1e-7f);
    const int64_t ks[4] = {SQ * SK, 0, SK, 1}, qs[4] = {H * SQ * D, SQ * D, D, 1};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(a->keep_strides[i], ks[i]);
        ck_assert_int_eq(a->q_strides[i], qs[i]);
        ck_assert_int_eq(a->y_strides[i], qs[i]);
    }
    ck_assert_int_eq(p->tensors[st->inputs[3]].dtype, TCI_DTYPE_BOOL);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(p->tensors[st->inputs[i]].dtype, TCI_DTYPE_FLOAT16);
    uint8_t keep[B * SQ * SK];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < SQ; i++)
            for (int j = 0; j < SK; j++) keep[(b * SQ + i) * SK + j] = b == 0 || j >= 1;
    check_against_reference(&t, p, keep);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* 3-D (heads merged), a float mask (SQ, SK) broadcast over batch and heads, a scale: Q, K, V
 * read and Y written in the merged layout, the mask added. */
START_TEST(test_sdpa_plan_3d_float_mask) {
    sdpa_graph t;
    const int64_t md[2] = {SQ, SK};
    build(&t, 3, H, H, D, F, 2, md, 1);
    th_attr_float(t.g, t.node, "scale", 0.25f);
    plan *p;
    ck_assert_tci_ok(th_plan_for_gpu(t.g, &p));
    const plan_step *st = attention_step(p);
    ck_assert_ptr_nonnull(st);
    const plan_attention *a = &st->u.attention;
    ck_assert(!a->causal && a->has_mask && !a->has_keep);
    ck_assert_float_eq_tol(a->scale, 0.25f, 1e-7f);
    const int64_t ms[4] = {0, 0, SK, 1}, qs[4] = {SQ * H * D, D, H * D, 1},
                  ks[4] = {SK * H * D, D, H * D, 1};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(a->mask_strides[i], ms[i]);
        ck_assert_int_eq(a->q_strides[i], qs[i]);
        ck_assert_int_eq(a->y_strides[i], qs[i]);
        ck_assert_int_eq(a->k_strides[i], ks[i]);
        ck_assert_int_eq(a->v_strides[i], ks[i]);
    }
    float mask[SQ * SK];
    for (int i = 0; i < SQ * SK; i++) mask[i] = i % 3 == 0 ? -INFINITY : 0.1f * (float)(i % 5);
    check_against_reference(&t, p, mask);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* Each parameter the fused step lacks: the unfused steps instead (two GEMMs, no attention
 * step; test_sdpa_unfused checks what they compute), or, for what they lack too, refused at
 * plan build naming it. */
START_TEST(test_sdpa_plan_refusals) {
    static const struct {
        int64_t kv_heads, d;
        const char *attr;
        int64_t value;
        int num_outputs;
        const char *want; /* NULL: the unfused steps */
    } cases[] = {
        {1, D, NULL, 0, 1, NULL},
        {H, 8, NULL, 0, 1, NULL},
        {H, D, "softcap", 0, 1, NULL},
        {H, D, NULL, 0, 4, NULL},
        {H, D, "softmax_precision", TCI_DTYPE_DOUBLE, 1,
         "a softmax_precision other than float: no GPU path"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sdpa_graph t;
        build(&t, 4, H, cases[c].kv_heads, cases[c].d, F, 0, NULL, cases[c].num_outputs);
        if (cases[c].attr && strcmp(cases[c].attr, "softcap") == 0)
            th_attr_float(t.g, t.node, "softcap", 2.0f);
        else if (cases[c].attr)
            th_attr_int(t.g, t.node, cases[c].attr, cases[c].value);
        plan *p = NULL;
        if (cases[c].want) {
            ck_assert_tci_error(th_plan_for_gpu(t.g, &p), TCI_ERR_UNSUPPORTED, cases[c].want);
        } else {
            ck_assert_tci_ok(th_plan_for_gpu(t.g, &p));
            ck_assert_ptr_null(attention_step(p));
            int gemms = 0;
            for (int i = 0; i < p->num_steps; i++) gemms += p->steps[i].kind == PLAN_STEP_GEMM;
            ck_assert_int_eq(gemms, 2);
            plan_destroy(p);
        }
        ir_graph_destroy(t.g);
    }
    /* fp32 storage: the whole plan (TCI_PRECISION_FP32), or the node kept in fp32, lowers
     * unfused, in fp32; a bf16 plan takes the step */
    for (int kept = 0; kept < 3; kept++) {
        sdpa_graph t;
        build(&t, 4, H, H, D, F, 0, NULL, 1);
        ck_assert_tci_ok(pass_optimize(t.g));
        ck_assert_tci_ok(pass_prepare_for_gpu(t.g));
        const char *const layers[] = {"attention", NULL};
        plan_options o = {.precision = kept == 1 ? TCI_PRECISION_FP16
                                     : kept == 2 ? TCI_PRECISION_BF16
                                                 : TCI_PRECISION_FP32,
                          .fp32_layers = kept == 1 ? layers : NULL};
        plan *p = NULL;
        ck_assert_tci_ok(plan_build(t.g, &o, &p));
        if (kept == 2) {
            ck_assert_ptr_nonnull(attention_step(p));
        } else {
            ck_assert_ptr_null(attention_step(p));
            for (int i = 0; i < p->num_steps; i++) {
                const plan_step *st = &p->steps[i];
                if (st->kind != PLAN_STEP_GEMM) continue;
                ck_assert_int_eq(p->tensors[st->outputs[0]].dtype, TCI_DTYPE_FLOAT);
                ck_assert_msg(strstr(st->label, "(unfused: fp32 storage"), "%s", st->label);
            }
        }
        plan_destroy(p);
        ir_graph_destroy(t.g);
    }
    /* a mask over fewer keys than K holds (ONNX masks the rest) */
    sdpa_graph t;
    const int64_t md[2] = {SQ, SK - 1};
    build(&t, 4, H, H, D, TCI_DTYPE_BOOL, 2, md, 1);
    plan *p = NULL;
    ck_assert_tci_error(th_plan_for_gpu(t.g, &p), TCI_ERR_UNSUPPORTED,
                        "an attn_mask shorter than the keys: no GPU path");
    ir_graph_destroy(t.g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sdpa_plan");
    TCase *t = tcase_create("plan");
    tcase_add_test(t, test_sdpa_plan_causal_bool_mask);
    tcase_add_test(t, test_sdpa_plan_3d_float_mask);
    tcase_add_test(t, test_sdpa_plan_refusals);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
