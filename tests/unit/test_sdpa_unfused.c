/* The unfused GPU plan of ONNX's Attention (src/layers/sdpa_unfused.c), where the fused step has
 * no variant: the plan's steps replayed on the host (copies, batched GEMMs, element-wise steps,
 * softmax, a row maximum) against the CPU reference, on fp32 plans with grouped-query heads,
 * head sizes the kernel lacks, 3-D and 4-D operands, causal and window bounds, bool masks and
 * float masks of -inf and -3.4e38 (rows of each alone among them), softcap, the past and
 * present states and every qk_matmul_output_mode; the fp16 plans' choice between the fused and
 * the unfused steps; and what neither computes, refused naming it. No GPU needed. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"
#include "util/half.h"

#define F TCI_DTYPE_FLOAT

/* ---- the plan replayed on the host, every tensor as floats (bools 0 / 1) ---- */

typedef struct replay {
    const plan *p;
    float **buf; /* per plan tensor; aliases share their root's */
} replay;

static int64_t count_of(const plan_tensor *t) {
    int64_t c = 1;
    for (int i = 0; i < t->rank; i++) c *= t->dims[i];
    return c;
}

/* x rounded to a 16-bit storage dtype (FLOAT16, BFLOAT16); as it is otherwise. */
static float stored(tci_dtype dtype, float x) {
    if (dtype == TCI_DTYPE_FLOAT16) return half_to_float(float_to_half(x));
    if (dtype == TCI_DTYPE_BFLOAT16) return bfloat16_to_float(float_to_bfloat16(x));
    return x;
}

/* Buffers for every tensor: constants converted, inputs copied from in[] (bools as bytes; float
 * ones rounded to their storage, as the engine's input conversion does). */
static void replay_init(replay *r, const plan *p, const void *const *in) {
    r->p = p;
    r->buf = calloc((size_t)p->num_tensors, sizeof *r->buf);
    ck_assert_ptr_nonnull(r->buf);
    for (int t = 0; t < p->num_tensors; t++) {
        const plan_tensor *pt = &p->tensors[t];
        ck_assert_int_eq(pt->layout, PLAN_LAYOUT_DENSE);
        if (pt->alias_of >= 0) continue;
        int64_t n = count_of(pt);
        float *b = calloc((size_t)(n > 0 ? n : 1), sizeof *b);
        ck_assert_ptr_nonnull(b);
        const void *src = pt->memory == PLAN_MEM_CONSTANT ? pt->host_data
                          : pt->input_index >= 0         ? in[pt->input_index]
                                                         : NULL;
        const bool input = pt->memory != PLAN_MEM_CONSTANT;
        for (int64_t i = 0; src && i < n; i++) {
            if (input && pt->dtype != TCI_DTYPE_BOOL)
                b[i] = stored(pt->dtype, ((const float *)src)[i]);
            else if (pt->dtype == TCI_DTYPE_FLOAT) b[i] = ((const float *)src)[i];
            else if (pt->dtype == TCI_DTYPE_BOOL) b[i] = ((const uint8_t *)src)[i] != 0;
            else if (pt->dtype == TCI_DTYPE_FLOAT16) b[i] = half_to_float(((const uint16_t *)src)[i]);
            else if (pt->dtype == TCI_DTYPE_BFLOAT16)
                b[i] = bfloat16_to_float(((const uint16_t *)src)[i]);
            else ck_abort_msg("tensor '%s' of dtype %s", pt->name, tci_dtype_name(pt->dtype));
        }
        if (pt->memory == PLAN_MEM_ARENA && pt->input_index < 0)
            for (int64_t i = 0; i < n; i++) b[i] = NAN; /* unwritten shows */
        r->buf[t] = b;
    }
    for (int t = 0; t < p->num_tensors; t++)
        if (p->tensors[t].alias_of >= 0) r->buf[t] = r->buf[p->tensors[t].alias_of];
}

static void replay_free(replay *r) {
    for (int t = 0; t < r->p->num_tensors; t++)
        if (r->p->tensors[t].alias_of < 0) free(r->buf[t]);
    free(r->buf);
}

static void replay_gemm(const plan_gemm *g, const float *a, const float *b, float *y) {
    ck_assert(!g->trans_a && !g->has_bias && !g->has_c);
    for (int64_t n = 0; n < (g->batch > 0 ? g->batch : 1); n++)
        for (int64_t i = 0; i < g->m; i++)
            for (int64_t j = 0; j < g->n; j++) {
                double acc = 0.0;
                for (int64_t k = 0; k < g->k; k++) {
                    double av = a[n * g->stride_a + i * g->lda + k];
                    double bv = g->trans_b ? b[n * g->stride_b + j * g->ldb + k]
                                           : b[n * g->stride_b + k * g->ldb + j];
                    acc += av * bv;
                }
                y[n * g->stride_c + i * g->ldc + j] =
                    act_apply_host(g->act.kind, g->alpha * (float)acc, g->act.alpha, g->act.beta);
            }
}

static void replay_eltwise(const plan_step *s, float *const *in, float *y) {
    const plan_strided *v = &s->u.eltwise.view;
    int64_t idx[PLAN_MAX_PHYS_RANK] = {0}, total = 1;
    for (int d = 0; d < v->rank; d++) total *= v->dims[d];
    for (int64_t e = 0; e < total; e++) {
        float x[3] = {0, 0, 0};
        int64_t oi = v->out_offset;
        for (int k = 0; k < s->num_inputs; k++) {
            int64_t at = v->in_offset[k];
            for (int d = 0; d < v->rank; d++) at += idx[d] * v->strides[k][d];
            x[k] = in[k][at];
        }
        for (int d = 0; d < v->rank; d++) oi += idx[d] * v->out_strides[d];
        float r;
        switch (s->u.eltwise.op) {
        case BINARY_NONE: r = x[0]; break;
        case BINARY_ADD: r = x[0] + x[1]; break;
        case BINARY_WHERE: r = x[0] != 0.0f ? x[1] : x[2]; break;
        case BINARY_GREATER: r = x[0] > x[1]; break;
        default: ck_abort_msg("element-wise op %s", binary_name(s->u.eltwise.op)); r = 0.0f;
        }
        const act_params *a = &s->u.eltwise.act;
        y[oi] = act_apply_host(a->kind, r, a->alpha, a->beta);
        for (int d = v->rank - 1; d >= 0; d--) {
            if (++idx[d] < v->dims[d]) break;
            idx[d] = 0;
        }
    }
}

/* The kernel's rule: a row of -inf alone is NaN (exp(-inf - -inf)). */
static void replay_softmax(const plan_step *s, const float *x, float *y) {
    for (int64_t r = 0; r < s->u.softmax.rows; r++) {
        const float *xr = x + r * s->u.softmax.length;
        float *yr = y + r * s->u.softmax.length;
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < s->u.softmax.length; j++) mx = fmax(mx, xr[j]);
        for (int64_t j = 0; j < s->u.softmax.length; j++) sum += exp((double)xr[j] - mx);
        for (int64_t j = 0; j < s->u.softmax.length; j++)
            yr[j] = (float)(exp((double)xr[j] - mx) / sum);
    }
}

/* A maximum over the last dim of a dense input (the one reduction the lowering emits). */
static void replay_reduce(const plan_step *s, const float *x, float *y) {
    const plan_strided *v = &s->u.reduce.view;
    ck_assert_int_eq(s->u.reduce.op, REDUCE_MAX);
    for (int d = 0; d < v->rank; d++) ck_assert(s->u.reduce.reduce_dim[d] == (d == v->rank - 1));
    const int64_t len = v->dims[v->rank - 1];
    int64_t rows = 1;
    for (int d = 0; d < v->rank - 1; d++) rows *= v->dims[d];
    for (int64_t r = 0; r < rows; r++) {
        float m = -INFINITY;
        for (int64_t j = 0; j < len; j++) m = fmaxf(m, x[r * len + j]);
        y[r] = m;
    }
}

static void replay_run(replay *r) {
    for (int i = 0; i < r->p->num_steps; i++) {
        const plan_step *s = &r->p->steps[i];
        float *in[PLAN_MAX_STEP_INPUTS] = {0};
        for (int k = 0; k < s->num_inputs; k++)
            if (s->inputs[k] >= 0) in[k] = r->buf[s->inputs[k]];
        float *y = r->buf[s->outputs[0]];
        switch (s->kind) {
        case PLAN_STEP_COPY: th_replay_copy(s, in[0], y); break;
        case PLAN_STEP_GEMM: replay_gemm(&s->u.gemm, in[0], in[1], y); break;
        case PLAN_STEP_ELTWISE: replay_eltwise(s, in, y); break;
        case PLAN_STEP_SOFTMAX: replay_softmax(s, in[0], y); break;
        case PLAN_STEP_REDUCE: replay_reduce(s, in[0], y); break;
        case PLAN_STEP_CAST: memcpy(y, in[0], (size_t)s->u.cast.count * sizeof *y); break;
        default: ck_abort_msg("step %d (%s) of kind %d", i, s->label, (int)s->kind);
        }
        /* every step stores its output in the output's dtype */
        const plan_tensor *out = &r->p->tensors[s->outputs[0]];
        for (int64_t e = 0; e < count_of(out); e++) y[e] = stored(out->dtype, y[e]);
    }
}

/* ---- graphs of one Attention node ---- */

typedef struct sdpa_case {
    int rank;
    int64_t batch, q_heads, kv_heads, q_len, kv_len, past, head, v_head;
    tci_dtype mask_dtype; /* UNDEFINED: no mask */
    int mask_rank;
    int64_t mask_dims[4];
    int causal;
    float softcap, scale; /* 0: none */
    int qk_mode;          /* -1: no qk_matmul_output output */
    bool present;         /* present_key / present_value outputs */
    bool empty_past;      /* past_key / past_value of 0 positions (past 0) */
    int opset;
    int64_t left, right;  /* -1: unbounded */
} sdpa_case;

typedef struct sdpa_graph {
    ir_graph *g;
    ir_node *node;
    ir_tensor *in[6];
    int num_in;
    int num_out;
    void *data[6];
} sdpa_graph;

static int64_t prod(const int64_t *d, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= d[i];
    return p;
}

/* Seeded values; a mask whose rows vary: bool rows keeping none, some, all; float rows of 0
 * and small values with -inf and -3.4e38 among them, a row of -3.4e38 alone, one of -inf. */
static void *fill(const ir_tensor *t, int which) {
    const int64_t n = prod(t->dims, t->rank);
    if (t->dtype == TCI_DTYPE_BOOL) {
        uint8_t *m = malloc((size_t)n + 1);
        const int64_t len = t->dims[t->rank - 1];
        for (int64_t i = 0; i < n; i++) {
            const int64_t row = i / len, j = i % len;
            m[i] = row % 4 == 1 ? 0 : row % 4 == 2 ? j % 3 != 0 : 1;
        }
        return m;
    }
    float *x = malloc((size_t)n * sizeof *x + 1);
    if (which == 3) {
        const int64_t len = t->dims[t->rank - 1];
        for (int64_t i = 0; i < n; i++) {
            const int64_t row = i / len, j = i % len;
            x[i] = row % 5 == 1   ? -FLT_MAX
                   : row % 5 == 3 ? -INFINITY
                   : j % 4 == 1   ? -INFINITY
                   : j % 4 == 2   ? -FLT_MAX
                                  : 0.3f * sinf((float)i);
        }
        return x;
    }
    for (int64_t i = 0; i < n; i++) x[i] = sinf(0.37f * (float)i + (float)which) * 1.5f;
    return x;
}

static void build(sdpa_graph *t, const sdpa_case *c) {
    memset(t, 0, sizeof *t);
    ck_assert_tci_ok(ir_graph_create(&t->g));
    ir_graph *g = t->g;
    const int64_t q4[4] = {c->batch, c->q_heads, c->q_len, c->head},
                  k4[4] = {c->batch, c->kv_heads, c->kv_len, c->head},
                  v4[4] = {c->batch, c->kv_heads, c->kv_len, c->v_head},
                  q3[3] = {c->batch, c->q_len, c->q_heads * c->head},
                  k3[3] = {c->batch, c->kv_len, c->kv_heads * c->head},
                  v3[3] = {c->batch, c->kv_len, c->kv_heads * c->v_head},
                  pk[4] = {c->batch, c->kv_heads, c->past, c->head},
                  pv[4] = {c->batch, c->kv_heads, c->past, c->v_head};
    ir_tensor *node_in[6] = {0};
    node_in[0] = th_named(g, "q", F, c->rank, c->rank == 4 ? q4 : q3, NULL);
    node_in[1] = th_named(g, "k", F, c->rank, c->rank == 4 ? k4 : k3, NULL);
    node_in[2] = th_named(g, "v", F, c->rank, c->rank == 4 ? v4 : v3, NULL);
    int num_node_in = 3;
    if (c->mask_dtype != TCI_DTYPE_UNDEFINED)
        node_in[3] = th_named(g, "mask", c->mask_dtype, c->mask_rank, c->mask_dims, NULL);
    if (node_in[3]) num_node_in = 4;
    if (c->past || c->empty_past) {
        node_in[4] = th_named(g, "past_key", F, 4, pk, NULL);
        node_in[5] = th_named(g, "past_value", F, 4, pv, NULL);
        num_node_in = 6;
    }
    for (int i = 0; i < 6; i++)
        if (node_in[i]) {
            t->data[t->num_in] = fill(node_in[i], i);
            t->in[t->num_in++] = node_in[i];
        }
    static const char *const names[4] = {"y", "present_key", "present_value", "qk"};
    t->num_out = c->qk_mode >= 0 ? 4 : c->present ? 3 : 1;
    ir_tensor *out[4];
    for (int o = 0; o < t->num_out; o++)
        out[o] = th_named(g, names[o], TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    t->node = th_node_io(g, "attention", "Attention", c->opset ? c->opset : 23, node_in,
                         num_node_in, out, t->num_out);
    if (c->rank == 3) {
        th_attr_int(g, t->node, "q_num_heads", c->q_heads);
        th_attr_int(g, t->node, "kv_num_heads", c->kv_heads);
    }
    if (c->causal) th_attr_int(g, t->node, "is_causal", 1);
    if (c->softcap > 0.0f) th_attr_float(g, t->node, "softcap", c->softcap);
    if (c->scale > 0.0f) th_attr_float(g, t->node, "scale", c->scale);
    if (c->qk_mode >= 0) th_attr_int(g, t->node, "qk_matmul_output_mode", c->qk_mode);
    if (c->left >= 0) th_attr_int(g, t->node, "left_window_size", c->left);
    if (c->right >= 0) th_attr_int(g, t->node, "right_window_size", c->right);
    th_graph_io(g, t->in, t->num_in, out, t->num_out);
}

static void destroy(sdpa_graph *t) {
    for (int i = 0; i < t->num_in; i++) free(t->data[i]);
    ir_graph_destroy(t->g);
}

static tci_status plan_at(sdpa_graph *t, tci_precision precision, plan **out) {
    ck_assert_tci_ok(pass_optimize(t->g));
    ck_assert_tci_ok(pass_prepare_for_gpu(t->g));
    plan_options o = {.precision = precision};
    return plan_build(t->g, &o, out);
}

static int count_kind(const plan *p, plan_step_kind kind) {
    int n = 0;
    for (int i = 0; i < p->num_steps; i++) n += p->steps[i].kind == kind;
    return n;
}

/* The plan of precision replayed against the CPU reference, every output within tol
 * (relative, 1 + |want|); NaN and infinities only where the reference has them. tweak, when
 * given, sets input values after build. */
static void check_plan(const sdpa_case *c, tci_precision precision, float tol,
                       void (*tweak)(sdpa_graph *)) {
    sdpa_graph t;
    build(&t, c);
    if (tweak) tweak(&t);
    plan *p = NULL;
    ck_assert_tci_ok(plan_at(&t, precision, &p));
    ck_assert_int_eq(count_kind(p, PLAN_STEP_ATTENTION), 0);
    ck_assert_int_eq(count_kind(p, PLAN_STEP_GEMM), 2);
    replay r;
    replay_init(&r, p, (const void *const *)t.data);
    replay_run(&r);
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(t.g, &ex));
    tci_tensor in[6];
    for (int i = 0; i < t.num_in; i++)
        in[i] = th_tensor(t.in[i]->dtype, t.in[i]->rank, t.in[i]->dims, t.data[i]);
    ck_assert_tci_ok(exec_cpu_run(ex, in, (size_t)t.num_in));
    for (int o = 0; o < t.num_out; o++) {
        const tci_tensor *want = exec_cpu_output(ex, (size_t)o);
        const plan_tensor *pt = &p->tensors[p->output_tensors[o]];
        ck_assert_int_eq(count_of(pt), op_count(want));
        const float *got = r.buf[p->output_tensors[o]], *w = want->data;
        for (int64_t i = 0; i < op_count(want); i++) {
            if (isnan(w[i]) || isinf(w[i])) {
                ck_assert_msg(isnan(w[i]) ? isnan(got[i]) : got[i] == w[i],
                              "output %d [%lld]: %g, want %g", o, (long long)i, (double)got[i],
                              (double)w[i]);
                continue;
            }
            ck_assert_msg(fabsf(got[i] - w[i]) <= tol * (1.0f + fabsf(w[i])),
                          "output %d [%lld]: %g, want %g", o, (long long)i, (double)got[i],
                          (double)w[i]);
        }
    }
    exec_cpu_destroy(ex);
    replay_free(&r);
    plan_destroy(p);
    destroy(&t);
}

static void check_case(const sdpa_case *c) { check_plan(c, TCI_PRECISION_FP32, 2e-5f, NULL); }

/* 3-D with grouped-query heads (4 query heads on 2 K/V heads), head size 8, is_causal and a
 * bool mask (batch, 1, q, keys) leaving rows without a key. */
START_TEST(test_unfused_gqa_causal_bool_mask) {
    sdpa_case c = {.rank = 3, .batch = 2, .q_heads = 4, .kv_heads = 2, .q_len = 5, .kv_len = 7,
                   .head = 8, .v_head = 8, .mask_dtype = TCI_DTYPE_BOOL, .mask_rank = 4,
                   .mask_dims = {2, 1, 5, 7}, .causal = 1, .qk_mode = -1, .left = -1,
                   .right = -1};
    check_case(&c);
    c.mask_rank = 2; /* (q, keys), no causal */
    c.mask_dims[0] = 5;
    c.mask_dims[1] = 7;
    c.causal = 0;
    check_case(&c);
}
END_TEST

/* 4-D, a float mask of -inf and -3.4e38 (rows of each alone: zeros and the mean of V, as the
 * reference's fp32 scores give), softcap and a scale, V's head size other than Q's. */
START_TEST(test_unfused_float_mask_softcap) {
    sdpa_case c = {.rank = 4, .batch = 2, .q_heads = 2, .kv_heads = 2, .q_len = 6, .kv_len = 9,
                   .head = 16, .v_head = 12, .mask_dtype = F, .mask_rank = 4,
                   .mask_dims = {2, 2, 6, 9}, .softcap = 1.5f, .scale = 0.3f, .qk_mode = -1,
                   .left = -1, .right = -1};
    check_case(&c);
    c.softcap = 0.0f;
    c.mask_rank = 3; /* (heads, q, keys) with causal */
    c.mask_dims[0] = 2;
    c.mask_dims[1] = 6;
    c.mask_dims[2] = 9;
    c.causal = 1;
    check_case(&c);
}
END_TEST

/* The past and present states with is_causal (the frontier offset by the past), and each
 * qk_matmul_output_mode (with softcap and a mask where the mode has one to show). */
START_TEST(test_unfused_past_present_qk) {
    sdpa_case c = {.rank = 4, .batch = 1, .q_heads = 4, .kv_heads = 2, .q_len = 3, .kv_len = 3,
                   .past = 5, .head = 32, .v_head = 32, .mask_dtype = TCI_DTYPE_UNDEFINED,
                   .causal = 1, .qk_mode = -1, .present = true, .left = -1, .right = -1};
    check_case(&c);
    for (int mode = 0; mode < 4; mode++) {
        c.qk_mode = mode;
        c.softcap = mode == 0 ? 0.0f : 2.0f;
        c.mask_dtype = mode >= 2 ? TCI_DTYPE_BOOL : TCI_DTYPE_UNDEFINED;
        c.mask_rank = 2;
        c.mask_dims[0] = 3;
        c.mask_dims[1] = 8;
        check_case(&c);
    }
    /* 3-D with a past and no present read */
    sdpa_case d = {.rank = 3, .batch = 2, .q_heads = 2, .kv_heads = 2, .q_len = 4, .kv_len = 4,
                   .past = 2, .head = 8, .v_head = 8, .mask_dtype = TCI_DTYPE_UNDEFINED,
                   .qk_mode = -1, .left = -1, .right = -1};
    check_case(&d);
}
END_TEST

static int steps_of(const sdpa_case *c) {
    sdpa_graph t;
    build(&t, c);
    plan *p = NULL;
    ck_assert_tci_ok(plan_at(&t, TCI_PRECISION_FP32, &p));
    int n = p->num_steps;
    plan_destroy(p);
    destroy(&t);
    return n;
}

/* Attention-25's sliding window, with rows it leaves no key (queries past every key); the
 * steps do not depend on whether the shapes leave such a row (a shape variant, a shorter
 * sequence, must have the built plan's steps). */
START_TEST(test_unfused_window) {
    sdpa_case c = {.rank = 4, .batch = 1, .q_heads = 2, .kv_heads = 1, .q_len = 9, .kv_len = 6,
                   .head = 8, .v_head = 8, .mask_dtype = TCI_DTYPE_UNDEFINED, .qk_mode = -1,
                   .opset = 25, .left = 2, .right = 0};
    check_case(&c);
    const int steps = steps_of(&c);
    c.q_len = 3;
    check_case(&c);
    ck_assert_int_eq(steps_of(&c), steps);
    /* the past's length likewise: an empty past is still its copy step */
    sdpa_case d = {.rank = 4, .batch = 1, .q_heads = 2, .kv_heads = 2, .q_len = 3, .kv_len = 3,
                   .past = 4, .head = 8, .v_head = 8, .mask_dtype = TCI_DTYPE_UNDEFINED,
                   .causal = 1, .qk_mode = -1, .present = true, .left = -1, .right = -1};
    const int with_past = steps_of(&d);
    d.past = 0;
    d.empty_past = true;
    check_case(&d);
    ck_assert_int_eq(steps_of(&d), with_past);
}
END_TEST

/* fp16 plans: the fused step where it fits; the unfused steps, in fp16, for a head size the
 * kernel lacks and for grouped-query heads, labelled with why. */
START_TEST(test_unfused_fp16_choice) {
    static const struct {
        int64_t kv_heads, head;
        const char *why;
    } cases[] = {
        {2, 32, NULL},
        {2, 8, "(unfused: head size 8 (the kernel has 32, 64, 80, 96, 128))"},
        {1, 32, "(unfused: grouped-query heads (q heads != kv heads))"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sdpa_case c = {.rank = 4, .batch = 1, .q_heads = 2, .kv_heads = cases[i].kv_heads,
                       .q_len = 4, .kv_len = 4, .head = cases[i].head, .v_head = cases[i].head,
                       .mask_dtype = TCI_DTYPE_UNDEFINED, .qk_mode = -1, .left = -1, .right = -1};
        sdpa_graph t;
        build(&t, &c);
        plan *p = NULL;
        ck_assert_tci_ok(plan_at(&t, TCI_PRECISION_FP16, &p));
        ck_assert_int_eq(count_kind(p, PLAN_STEP_ATTENTION), cases[i].why ? 0 : 1);
        ck_assert_int_eq(count_kind(p, PLAN_STEP_GEMM), cases[i].why ? 2 : 0);
        for (int s = 0; s < p->num_steps; s++) {
            const plan_step *st = &p->steps[s];
            if (cases[i].why) ck_assert_msg(strstr(st->label, cases[i].why), "%s", st->label);
            /* the GEMMs in fp16, the softmax in fp32 */
            if (st->kind == PLAN_STEP_GEMM || st->kind == PLAN_STEP_ATTENTION)
                ck_assert_int_eq(p->tensors[st->outputs[0]].dtype, TCI_DTYPE_FLOAT16);
            if (st->kind == PLAN_STEP_SOFTMAX)
                ck_assert_int_eq(p->tensors[st->outputs[0]].dtype, TCI_DTYPE_FLOAT);
        }
        plan_destroy(p);
        destroy(&t);
    }
}
END_TEST

/* Query 1 of every head scores -72 on every key (Q -3, K 3, scale 1, head 8), and its mask row
 * is fp16's -65504 everywhere (Hugging Face's fill for fp16 models): -72 - 65504 overflows fp16
 * but not fp32, where the bias and the softmax run, so the row is the mean of V as on the CPU,
 * not NaN. */
static void fill_overflow(sdpa_graph *t) {
    float *q = t->data[0], *k = t->data[1], *m = t->data[3];
    const ir_tensor *qt = t->in[0], *mt = t->in[3];
    const int64_t heads = qt->dims[1], len = qt->dims[2], d = qt->dims[3];
    for (int64_t h = 0; h < heads; h++)
        for (int64_t e = 0; e < d; e++) q[(h * len + 1) * d + e] = -3.0f;
    for (int64_t i = 0; i < lower_count(t->in[1]); i++) k[i] = 3.0f;
    const int64_t keys = mt->dims[3];
    for (int64_t j = 0; j < keys; j++) m[1 * keys + j] = -65504.0f;
}

/* fp16 and bf16 plans replayed with their storage rounding: the unfused steps (grouped-query
 * heads, head size 8) against the CPU reference within the storage's bound, on a float mask
 * of -inf and -3.4e38 keys (dropped: -3.4e38 is -inf in fp16 and bf16) and rows of -inf alone
 * (zeros), and on the fp16 fill row of fill_overflow. (A row of -3.4e38 alone is zeros in 16
 * bits, the mean of V on the CPU: test_cli's test_gpu_onnx_attention holds the GPU to it.) */
START_TEST(test_unfused_16bit) {
    sdpa_case c = {.rank = 4, .batch = 1, .q_heads = 2, .kv_heads = 1, .q_len = 4, .kv_len = 6,
                   .head = 8, .v_head = 8, .mask_dtype = F, .mask_rank = 4,
                   .mask_dims = {1, 1, 4, 6}, .scale = 1.0f, .qk_mode = -1, .left = -1,
                   .right = -1};
    check_plan(&c, TCI_PRECISION_FP16, 1e-2f, fill_overflow);
    check_plan(&c, TCI_PRECISION_BF16, 6e-2f, fill_overflow);
    /* 3-D, is_causal, a bool mask */
    sdpa_case d = {.rank = 3, .batch = 2, .q_heads = 4, .kv_heads = 2, .q_len = 5, .kv_len = 7,
                   .head = 8, .v_head = 8, .mask_dtype = TCI_DTYPE_BOOL, .mask_rank = 4,
                   .mask_dims = {2, 1, 5, 7}, .causal = 1, .qk_mode = -1, .left = -1,
                   .right = -1};
    check_plan(&d, TCI_PRECISION_FP16, 1e-2f, NULL);
}
END_TEST

/* What neither the fused step nor the unfused steps compute: refused at plan build, naming it. */
START_TEST(test_unfused_refusals) {
    static const char *const want[] = {
        "a softmax_precision other than float: no GPU path (neither the fused attention step "
        "nor the unfused steps compute it)",
        "an attn_mask shorter than the keys",
        "the qk_matmul_output output before softcap",
    };
    for (int i = 0; i < 3; i++) {
        sdpa_case c = {.rank = 4, .batch = 1, .q_heads = 2, .kv_heads = 2, .q_len = 4,
                       .kv_len = 5, .head = 8, .v_head = 8, .mask_dtype = TCI_DTYPE_UNDEFINED,
                       .qk_mode = i == 2 ? 0 : -1, .softcap = i == 2 ? 1.0f : 0.0f, .left = -1,
                       .right = -1};
        if (i == 1) {
            c.mask_dtype = TCI_DTYPE_BOOL;
            c.mask_rank = 2;
            c.mask_dims[0] = 4;
            c.mask_dims[1] = 4;
        }
        sdpa_graph t;
        build(&t, &c);
        if (i == 0) th_attr_int(t.g, t.node, "softmax_precision", TCI_DTYPE_FLOAT16);
        plan *p = NULL;
        ck_assert_tci_error(plan_at(&t, TCI_PRECISION_FP32, &p), TCI_ERR_UNSUPPORTED, want[i]);
        ck_assert_msg(strstr(tci_last_error(), "'attention' (Attention)"), "%s", tci_last_error());
        destroy(&t);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("sdpa_unfused");
    TCase *t = tcase_create("plan");
    tcase_add_test(t, test_unfused_gqa_causal_bool_mask);
    tcase_add_test(t, test_unfused_float_mask_softcap);
    tcase_add_test(t, test_unfused_past_present_qk);
    tcase_add_test(t, test_unfused_window);
    tcase_add_test(t, test_unfused_fp16_choice);
    tcase_add_test(t, test_unfused_16bit);
    tcase_add_test(t, test_unfused_refusals);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
