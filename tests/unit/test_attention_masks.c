/* The attention fusion's bool masks (src/graph/passes/attention.c): Hugging Face's eager
 * attention exports (BERT, RoBERTa, DistilBERT, GPT-2) add Where(keep, 0, fill) to the scores,
 * keep a bool built from the attention_mask input (and, for GPT-2, a causal constant), and guard
 * the softmax with Where(IsNaN(p), 0, p). Each case checks what fuses, what the plan's attention
 * step reads (the keep mask through broadcast strides, the row rule), and replays the step on the
 * host with the kernel's rules against the CPU reference run of the unfused graph, rows that keep
 * no key included. What cannot be shown equivalent stays unfused. No GPU needed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

enum { B = 2, S = 6, H = 2, D = 32 };

#define FINFO_MIN (-3.4028234663852886e38f)

static ir_tensor *named(ir_graph *g, const char *name) {
    return th_named(g, name, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
}

/* a [1] float constant, as the exporter writes them */
static ir_tensor *const1(ir_graph *g, const char *name, float v) {
    const int64_t one = 1;
    return th_named(g, name, TCI_DTYPE_FLOAT, 1, &one, &v);
}

/* where keep comes from: a bool input (B, 1, 1, S) (padding); the And of a constant causal
 * (1, 1, S, S) and that input (GPT-2); both Expanded to (B, 1, S, S) as the export does; the
 * causal constant alone */
enum keep_form { KEEP_PADDING, KEEP_CAUSAL_PADDING, KEEP_CAUSAL_CONST };
/* the softmax's NaN guard: none, Where(IsNaN(p), 0, p), Where(IsNaN(p), 1, p), or
 * Where(IsNaN(p), 0, p) with p also read by another node */
enum guard_form { GUARD_NONE, GUARD_ZERO, GUARD_ONE, GUARD_SHARED };

typedef struct mask_graph {
    ir_graph *g;
    ir_tensor *xq, *xk, *xv, *pad, *and_out, *keep, *mask, *y;
    ir_node *where, *add, *sm, *isnan, *guard, *pv;
    enum keep_form form;
} mask_graph;

/* Q = Transpose(xq, 0213) * c, K^T = Transpose(Transpose(xk, 0213), 0132) * c, V = Transpose(xv,
 * 0213) on (B, S, H, D) projections, c = D^-1/4; scores + Where(keep, zero, fill) -> Softmax(-1)
 * -> [guard] -> MatMul(., V). */
static void build(mask_graph *t, enum keep_form form, float zero, float fill,
                  enum guard_form guard) {
    memset(t, 0, sizeof *t);
    t->form = form;
    ck_assert_tci_ok(ir_graph_create(&t->g));
    ir_graph *g = t->g;
    const int64_t xd[4] = {B, S, H, D}, pd[4] = {B, 1, 1, S}, cd[4] = {1, 1, S, S};
    t->xq = th_named(g, "xq", TCI_DTYPE_FLOAT, 4, xd, NULL);
    t->xk = th_named(g, "xk", TCI_DTYPE_FLOAT, 4, xd, NULL);
    t->xv = th_named(g, "xv", TCI_DTYPE_FLOAT, 4, xd, NULL);
    ir_tensor *inputs[4] = {t->xq, t->xk, t->xv, NULL};
    int num_in = 3;
    uint8_t causal[S * S];
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) causal[i * S + j] = j <= i;
    if (form != KEEP_CAUSAL_CONST) {
        t->pad = th_named(g, "pad", TCI_DTYPE_BOOL, 4, pd, NULL);
        inputs[num_in++] = t->pad;
    }
    if (form == KEEP_PADDING) {
        t->keep = t->pad;
    } else {
        ir_tensor *c = th_named(g, "causal", TCI_DTYPE_BOOL, 4, cd, causal);
        if (form == KEEP_CAUSAL_CONST) {
            t->keep = c;
        } else {
            t->keep = named(g, "and_out");
            th_node_io(g, "and", "And", 7, (ir_tensor *[]){c, t->pad}, 2, &t->keep, 1);
        }
    }
    if (form != KEEP_CAUSAL_CONST) {
        const int64_t full[4] = {B, 1, S, S};
        ir_tensor *expanded = named(g, "keep");
        th_node_io(g, "expand", "Expand", 13,
                   (ir_tensor *[]){t->keep, th_named(g, "full", TCI_DTYPE_INT64, 1,
                                                     (const int64_t[]){4}, full)},
                   2, &expanded, 1);
        t->and_out = t->keep;
        t->keep = expanded;
    }
    t->y = named(g, "y");
    ir_tensor *outputs[2] = {t->y, NULL};
    ir_tensor *q = named(g, "q"), *k = named(g, "k"), *kt = named(g, "kT"), *v = named(g, "v");
    ir_tensor *qs = named(g, "qs"), *ks = named(g, "ks"), *s = named(g, "s"), *sa = named(g, "sa");
    ir_tensor *p = named(g, "p"), *probs = p;
    ir_tensor *c = const1(g, "c", powf((float)D, -0.25f));
    const int64_t head_split[4] = {0, 2, 1, 3}, last_two[4] = {0, 1, 3, 2};
    ir_node *n = th_node_io(g, "qt", "Transpose", 13, &t->xq, 1, &q, 1);
    th_attr_ints(g, n, "perm", head_split, 4);
    n = th_node_io(g, "kt", "Transpose", 13, &t->xk, 1, &k, 1);
    th_attr_ints(g, n, "perm", head_split, 4);
    n = th_node_io(g, "kt2", "Transpose", 13, &k, 1, &kt, 1);
    th_attr_ints(g, n, "perm", last_two, 4);
    n = th_node_io(g, "vt", "Transpose", 13, &t->xv, 1, &v, 1);
    th_attr_ints(g, n, "perm", head_split, 4);
    th_node_io(g, "mq", "Mul", 14, (ir_tensor *[]){q, c}, 2, &qs, 1);
    th_node_io(g, "mk", "Mul", 14, (ir_tensor *[]){kt, c}, 2, &ks, 1);
    th_node_io(g, "qk", "MatMul", 13, (ir_tensor *[]){qs, ks}, 2, &s, 1);
    t->mask = named(g, "mask");
    ir_tensor *where_in[3] = {t->keep, const1(g, "zero", zero), const1(g, "fill", fill)};
    t->where = th_node_io(g, "where", "Where", 16, where_in, 3, &t->mask, 1);
    t->add = th_node_io(g, "add", "Add", 14, (ir_tensor *[]){s, t->mask}, 2, &sa, 1);
    t->sm = th_node_io(g, "sm", "Softmax", 13, &sa, 1, &p, 1);
    th_attr_int(g, t->sm, "axis", -1);
    if (guard != GUARD_NONE) {
        ir_tensor *nan = named(g, "nan");
        probs = named(g, "probs");
        t->isnan = th_node_io(g, "isnan", "IsNaN", 13, &p, 1, &nan, 1);
        t->guard = th_node_io(
            g, "guard", "Where", 16,
            (ir_tensor *[]){nan, const1(g, "gz", guard == GUARD_ONE ? 1.0f : 0.0f), p}, 3, &probs,
            1);
    }
    if (guard == GUARD_SHARED) outputs[1] = p;
    t->pv = th_node_io(g, "pv", "MatMul", 13, (ir_tensor *[]){probs, v}, 2, &t->y, 1);
    th_graph_io(g, inputs, num_in, outputs, outputs[1] ? 2 : 1);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
}

static const plan_step *find_step(const plan *p, plan_step_kind kind) {
    for (int i = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == kind) return &p->steps[i];
    return NULL;
}

enum { N = B * S * H * D };

/* Runs the CPU reference on seeded inputs, sequence 1 padded on the left by `padded` keys (all
 * of them: rows that keep no key whatever causal says), replays the plan's step against it, and
 * returns the reference output in want (B, H, S, D). */
static void check_against_reference(mask_graph *t, const plan *p, int padded, float *want) {
    static float xq[N], xk[N], xv[N], got[N];
    uint8_t pad[B * S], keep[B * S * S];
    for (int i = 0; i < N; i++) {
        xq[i] = sinf(0.37f * (float)i) * 2.0f;
        xk[i] = cosf(0.11f * (float)i);
        xv[i] = sinf(0.05f * (float)i + 1.0f);
    }
    for (int b = 0; b < B; b++)
        for (int j = 0; j < S; j++) pad[b * S + j] = b == 0 || j >= padded;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++)
                keep[(b * S + i) * S + j] =
                    t->form == KEEP_PADDING ? pad[b * S + j]
                    : t->form == KEEP_CAUSAL_CONST ? j <= i
                                                   : j <= i && pad[b * S + j];
    const plan_step *st = find_step(p, PLAN_STEP_ATTENTION);
    ck_assert_ptr_nonnull(st);
    /* the step reads keep as the graph holds it: the input (B, 1, 1, S), or the And's
     * (B, 1, S, S) */
    th_replay_attention(&st->u.attention, xq, xk, xv, NULL,
                        t->pv->epilogue->attention->keep == t->pad ? pad : keep, got);
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(t->g, &ex));
    const int64_t xd[4] = {B, S, H, D}, pd[4] = {B, 1, 1, S};
    tci_tensor in[4] = {th_tensor(TCI_DTYPE_FLOAT, 4, xd, xq),
                        th_tensor(TCI_DTYPE_FLOAT, 4, xd, xk),
                        th_tensor(TCI_DTYPE_FLOAT, 4, xd, xv),
                        th_tensor(TCI_DTYPE_BOOL, 4, pd, pad)};
    ck_assert_tci_ok(exec_cpu_run(ex, in, t->form == KEEP_CAUSAL_CONST ? 3 : 4));
    const tci_tensor *y = exec_cpu_output(ex, 0);
    ck_assert_int_eq(y->rank, 4);
    memcpy(want, y->data, sizeof(float) * N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(isfinite(want[i]), "reference y[%d] = %g", i, want[i]);
    th_assert_near(got, want, N, 2e-5f);
    exec_cpu_destroy(ex);
}

/* the mean of V over every key, for batch b, head h, element e */
static float v_mean(int b, int h, int e) {
    double acc = 0.0;
    for (int j = 0; j < S; j++) acc += sinf(0.05f * (float)(((b * S + j) * H + h) * D + e) + 1.0f);
    return (float)(acc / S);
}

/* BERT, RoBERTa, DistilBERT: Where(Expand(padding), 0, -inf) with the NaN guard fuses whole;
 * the step reads the bool input before the Expand through broadcast strides; a sequence that
 * keeps no key gets zeros, as the guard makes of the reference's NaN. */
START_TEST(test_padding_guarded_fuses) {
    mask_graph t;
    build(&t, KEEP_PADDING, 0.0f, -INFINITY, GUARD_ZERO);
    const ir_epilogue *e = t.pv->epilogue;
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_nonnull(e->attention);
    const ir_attention *a = e->attention;
    ck_assert_ptr_eq(a->keep, t.pad);
    ck_assert_ptr_null(a->mask);
    ck_assert(!a->keep_row_mean && !a->causal);
    ir_node *parts[] = {t.where, t.add, t.sm, t.isnan, t.guard};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        ck_assert_ptr_eq(parts[i]->fused_into, t.pv);
    ck_assert_int_eq(a->num_nodes, 13);
    ck_assert_ptr_nonnull(strstr(e->label, "(attention, bool mask)"));
    ck_assert_ptr_nonnull(strstr(e->label, "IsNaN"));
    /* a second run changes nothing */
    ck_assert_tci_ok(pass_fuse_for_gpu(t.g));
    ck_assert_ptr_eq(t.pv->epilogue, e);

    plan *p;
    ck_assert_tci_ok(plan_build(t.g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1); /* the attention; the Expand, unread by it, is dropped */
    const plan_step *st = find_step(p, PLAN_STEP_ATTENTION);
    const plan_attention *pa = &st->u.attention;
    ck_assert(pa->has_keep && !pa->has_mask && !pa->keep_row_mean && !pa->causal);
    const int64_t ks[4] = {S, 0, 0, 1};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pa->keep_strides[i], ks[i]);
    ck_assert_int_eq(p->tensors[st->inputs[3]].dtype, TCI_DTYPE_BOOL);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(p->tensors[st->inputs[i]].dtype, TCI_DTYPE_FLOAT16);
    static float want[N];
    check_against_reference(&t, p, S, want);
    for (int i = N / 2; i < N; i++)
        ck_assert_msg(want[i] == 0.0f, "padded row y[%d] = %g", i, want[i]);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* transformers 4's fill torch.finfo(float32).min, no guard: fuses with the row rule of equal
 * scores: a sequence that keeps no key gets the mean of V over every key, in the reference too */
START_TEST(test_finite_fill_row_mean) {
    mask_graph t;
    build(&t, KEEP_PADDING, -0.0f, FINFO_MIN, GUARD_NONE);
    const ir_attention *a = t.pv->epilogue ? t.pv->epilogue->attention : NULL;
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_eq(a->keep, t.pad);
    ck_assert(a->keep_row_mean);
    ck_assert_ptr_nonnull(strstr(t.pv->epilogue->label, "finite fill"));
    plan *p;
    ck_assert_tci_ok(plan_build(t.g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    ck_assert(find_step(p, PLAN_STEP_ATTENTION)->u.attention.keep_row_mean);
    static float want[N];
    check_against_reference(&t, p, S, want);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++)
            for (int e = 0; e < D; e++)
                ck_assert_float_eq_tol(want[((1 * H + h) * S + i) * D + e], v_mean(1, h, e), 1e-5f);
    /* the guard changes nothing there */
    plan_destroy(p);
    ir_graph_destroy(t.g);
    build(&t, KEEP_PADDING, 0.0f, -1e30f, GUARD_ZERO);
    ck_assert_ptr_eq(t.pv->epilogue->attention->keep, t.pad);
    ck_assert(t.pv->epilogue->attention->keep_row_mean);
    ck_assert_tci_ok(plan_build(t.g, NULL, &p));
    check_against_reference(&t, p, 2, want);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* GPT-2: the And of the causal constant and the padding, expanded: with -inf the step takes the
 * causal flag and reads the padding (B, 1, 1, S); with a finite fill (a row without a key
 * averages V over every key, the causal ones too) the And's (B, 1, S, S). Left padding leaves
 * the first rows of sequence 1 without a key. */
START_TEST(test_causal_and_padding) {
    for (int finite = 0; finite < 2; finite++) {
        mask_graph t;
        build(&t, KEEP_CAUSAL_PADDING, 0.0f, finite ? FINFO_MIN : -INFINITY,
              finite ? GUARD_NONE : GUARD_ZERO);
        const ir_attention *a = t.pv->epilogue ? t.pv->epilogue->attention : NULL;
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_eq(a->keep, finite ? t.and_out : t.pad);
        ck_assert_int_eq(a->causal, !finite);
        ck_assert_int_eq(a->keep_row_mean, finite);
        ck_assert_ptr_nonnull(strstr(t.pv->epilogue->label,
                                     finite ? "(attention, bool mask, finite fill)"
                                            : "(attention, causal, bool mask)"));
        plan *p;
        ck_assert_tci_ok(plan_build(t.g, NULL, &p));
        /* the attention, after the And it reads with a finite fill; the Expand (and with
         * -inf the And), unread by it, are dropped */
        ck_assert_int_eq(p->num_steps, finite ? 2 : 1);
        const plan_attention *pa = &find_step(p, PLAN_STEP_ATTENTION)->u.attention;
        ck_assert_int_eq(pa->causal, !finite);
        const int64_t ks[2][4] = {{S, 0, 0, 1}, {S * S, 0, S, 1}};
        for (int i = 0; i < 4; i++) ck_assert_int_eq(pa->keep_strides[i], ks[finite][i]);
        static float want[N];
        check_against_reference(&t, p, 2, want);
        /* rows 0 and 1 of sequence 1 keep no key */
        for (int h = 0; h < H; h++)
            for (int e = 0; e < D; e++)
                ck_assert_float_eq_tol(want[((1 * H + h) * S + 1) * D + e],
                                       finite ? v_mean(1, h, e) : 0.0f, 1e-5f);
        plan_destroy(p);
        ir_graph_destroy(t.g);
    }
}
END_TEST

/* A constant causal keep folds with its Where into a constant mask, which becomes the causal
 * flag: one step, no mask read (every row keeps its diagonal, so -inf needs no guard) */
START_TEST(test_constant_causal_keep) {
    mask_graph t;
    build(&t, KEEP_CAUSAL_CONST, 0.0f, -INFINITY, GUARD_NONE);
    const ir_attention *a = t.pv->epilogue ? t.pv->epilogue->attention : NULL;
    ck_assert_ptr_nonnull(a);
    ck_assert(a->causal);
    ck_assert_ptr_null(a->keep);
    ck_assert_ptr_null(a->mask);
    ck_assert_ptr_nonnull(strstr(t.pv->epilogue->label, "causal"));
    plan *p;
    ck_assert_tci_ok(plan_build(t.g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 1);
    const plan_step *st = find_step(p, PLAN_STEP_ATTENTION);
    ck_assert(st->u.attention.causal && !st->u.attention.has_keep);
    ck_assert_int_eq(st->inputs[3], -1);
    static float want[N];
    check_against_reference(&t, p, 0, want);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

/* What is not provably the kernel's rule stays out of the step: a -inf fill without the guard (a
 * row keeping no key is NaN there) or a fill above -1e30 (the row's scores stay unequal) leaves
 * the Where computing an additive mask; a Where(keep, 1, fill) likewise; a guard of another
 * constant, or whose softmax output something else reads, fuses nothing. */
START_TEST(test_refused) {
    const struct {
        float zero, fill;
        enum guard_form guard;
    } additive[] = {
        {0.0f, -INFINITY, GUARD_NONE},
        {0.0f, -10000.0f, GUARD_ZERO},
        {0.0f, -1e29f, GUARD_NONE},
        {1.0f, -INFINITY, GUARD_ZERO},
        {0.0f, INFINITY, GUARD_ZERO},
    };
    for (size_t i = 0; i < sizeof additive / sizeof additive[0]; i++) {
        mask_graph t;
        build(&t, KEEP_PADDING, additive[i].zero, additive[i].fill, additive[i].guard);
        const ir_attention *a = t.pv->epilogue ? t.pv->epilogue->attention : NULL;
        ck_assert_msg(a != NULL, "case %zu: the attention still fuses", i);
        ck_assert_msg(a->keep == NULL && a->mask == t.mask, "case %zu: an additive mask", i);
        ck_assert_ptr_null(t.where->fused_into);
        ir_graph_destroy(t.g);
    }
    const enum guard_form no_fusion[] = {GUARD_ONE, GUARD_SHARED};
    for (int i = 0; i < 2; i++) {
        mask_graph t;
        build(&t, KEEP_PADDING, 0.0f, -INFINITY, no_fusion[i]);
        ck_assert(!t.pv->epilogue || !t.pv->epilogue->attention);
        ck_assert_ptr_null(t.sm->fused_into);
        ck_assert_ptr_null(t.where->fused_into);
        ir_graph_destroy(t.g);
    }
}
END_TEST

/* The unfused fallback (fp32 storage) lowers the guard's and the mask's nodes as their own
 * steps: IsNaN writes bool, Where selects, nothing lost. */
START_TEST(test_unfused_fallback) {
    mask_graph t;
    build(&t, KEEP_PADDING, 0.0f, -INFINITY, GUARD_ZERO);
    ck_assert_ptr_nonnull(t.pv->epilogue->attention);
    plan_options o = {.precision = TCI_PRECISION_FP32};
    plan *p;
    ck_assert_tci_ok(plan_build(t.g, &o, &p));
    ck_assert_ptr_null(find_step(p, PLAN_STEP_ATTENTION));
    ck_assert_ptr_nonnull(find_step(p, PLAN_STEP_SOFTMAX));
    int with_node[3] = {0, 0, 0};
    const ir_node *nodes[3] = {t.where, t.isnan, t.guard};
    for (int i = 0; i < p->num_steps; i++)
        for (int k = 0; k < 3; k++) with_node[k] += p->steps[i].node == nodes[k];
    for (int k = 0; k < 3; k++) ck_assert_int_eq(with_node[k], 1);
    plan_destroy(p);
    ir_graph_destroy(t.g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("attention_masks");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_padding_guarded_fuses);
    tcase_add_test(tc, test_finite_fill_row_mean);
    tcase_add_test(tc, test_causal_and_padding);
    tcase_add_test(tc, test_constant_causal_keep);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_unfused_fallback);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
