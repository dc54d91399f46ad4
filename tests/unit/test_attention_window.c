/* The attention fusion's window masks (src/graph/passes/attention.c, match_window_mask): Swin's
 * shifted-window attention adds a per-head relative position bias (1, h, N, N) to the scores of
 * B * nW windows, splits the batch into (B, nW) with a Reshape to add each window's mask
 * (1, nW, 1, N, N), and merges it back before the softmax. The fused step reads one mask, the
 * two constants summed, of nW batch entries, batch b reading entry b % nW. Each case checks the
 * mask made, the plan step, and replays the step on the host against the CPU reference run of
 * the unfused graph. Swin v2 also scales each head's scores by its own constant (h, 1, 1)
 * (move_head_scales): that Mul moves onto Q before the MatMul, a step of its own, and the
 * attention still fuses. No GPU needed. */
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

enum { NW = 2, H = 2, W = 5, D = 32 };

static ir_tensor *named(ir_graph *g, const char *name) {
    return th_named(g, name, TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
}

static float bias_at(int h, int i, int j) { return 0.3f * sinf((float)(h * 31 + i * 7 + j)); }
/* the shifted windows' mask: -100 between tokens of different regions, as Swin fills it */
static float mask_at(int w, int i, int j) { return (w + i + j) % 3 == 0 ? -100.0f : 0.0f; }
/* Swin v2's per-head logit scale */
static float head_scale_at(int h) { return 2.0f + 3.5f * (float)h; }

typedef struct window_graph {
    ir_graph *g;
    ir_tensor *xq, *xk, *xv, *y;
    ir_node *pv;
    int64_t images;
    bool head_scales;
} window_graph;

/* q, k, v (B nW, h, N, D) inputs; S = MatMul(q * c, Transpose(k)) + bias(1, h, N, N) ->
 * Reshape(B, nW, h, N, N) -> + mask(1, nW, 1, N, N) -> Reshape(B nW, h, N, N) -> Softmax ->
 * MatMul(., v); with head_scales, S = MatMul(q, Transpose(k)) * scale(h, 1, 1) instead. */
static void build_graph(window_graph *t, int64_t images, bool head_scales, bool for_gpu) {
    memset(t, 0, sizeof *t);
    t->images = images;
    t->head_scales = head_scales;
    ck_assert_tci_ok(ir_graph_create(&t->g));
    ir_graph *g = t->g;
    const int64_t bw = images * NW;
    const int64_t xd[4] = {bw, H, W, D}, bd[4] = {1, H, W, W}, md[5] = {1, NW, 1, W, W};
    const int64_t split[5] = {images, NW, H, W, W}, merge[4] = {bw, H, W, W};
    float bias[H * W * W], mask[NW * W * W];
    for (int h = 0; h < H; h++)
        for (int i = 0; i < W; i++)
            for (int j = 0; j < W; j++) bias[(h * W + i) * W + j] = bias_at(h, i, j);
    for (int w = 0; w < NW; w++)
        for (int i = 0; i < W; i++)
            for (int j = 0; j < W; j++) mask[(w * W + i) * W + j] = mask_at(w, i, j);
    t->xq = th_named(g, "q", TCI_DTYPE_FLOAT, 4, xd, NULL);
    t->xk = th_named(g, "k", TCI_DTYPE_FLOAT, 4, xd, NULL);
    t->xv = th_named(g, "v", TCI_DTYPE_FLOAT, 4, xd, NULL);
    t->y = named(g, "y");
    const float c = 1.0f / sqrtf((float)D);
    const int64_t one = 1, five = 5, four = 4;
    ir_tensor *qs = named(g, "qs"), *kt = named(g, "kT"), *s = named(g, "s"), *sb = named(g, "sb");
    ir_tensor *s5 = named(g, "s5"), *sm5 = named(g, "sm5"), *sm = named(g, "smi"), *p = named(g, "p");
    ir_node *n = th_node_io(g, "kt", "Transpose", 13, &t->xk, 1, &kt, 1);
    th_attr_ints(g, n, "perm", (const int64_t[]){0, 1, 3, 2}, 4);
    if (head_scales) {
        const int64_t hd[3] = {H, 1, 1};
        float hs[H];
        for (int h = 0; h < H; h++) hs[h] = head_scale_at(h);
        ir_tensor *raw = named(g, "raw");
        th_node_io(g, "qk", "MatMul", 13, (ir_tensor *[]){t->xq, kt}, 2, &raw, 1);
        th_node_io(g, "mh", "Mul", 14,
                   (ir_tensor *[]){raw, th_named(g, "hs", TCI_DTYPE_FLOAT, 3, hd, hs)}, 2, &s, 1);
    } else {
        th_node_io(g, "mq", "Mul", 14,
                   (ir_tensor *[]){t->xq, th_named(g, "c", TCI_DTYPE_FLOAT, 1, &one, &c)}, 2,
                   &qs, 1);
        th_node_io(g, "qk", "MatMul", 13, (ir_tensor *[]){qs, kt}, 2, &s, 1);
    }
    th_node_io(g, "addb", "Add", 14,
               (ir_tensor *[]){s, th_named(g, "bias", TCI_DTYPE_FLOAT, 4, bd, bias)}, 2, &sb, 1);
    th_node_io(g, "split", "Reshape", 14,
               (ir_tensor *[]){sb, th_named(g, "split_shape", TCI_DTYPE_INT64, 1, &five, split)},
               2, &s5, 1);
    th_node_io(g, "addm", "Add", 14,
               (ir_tensor *[]){th_named(g, "mask", TCI_DTYPE_FLOAT, 5, md, mask), s5}, 2, &sm5,
               1);
    th_node_io(g, "merge", "Reshape", 14,
               (ir_tensor *[]){sm5, th_named(g, "merge_shape", TCI_DTYPE_INT64, 1, &four, merge)},
               2, &sm, 1);
    n = th_node_io(g, "sm", "Softmax", 13, &sm, 1, &p, 1);
    th_attr_int(g, n, "axis", -1);
    t->pv = th_node_io(g, "pv", "MatMul", 13, (ir_tensor *[]){p, t->xv}, 2, &t->y, 1);
    th_graph_io(g, (ir_tensor *[]){t->xq, t->xk, t->xv}, 3, &t->y, 1);
    ck_assert_tci_ok(pass_optimize(g));
    if (for_gpu) ck_assert_tci_ok(pass_prepare_for_gpu(g));
}

static void build(window_graph *t, int64_t images, bool head_scales) {
    build_graph(t, images, head_scales, true);
}

/* The fused step's mask, its plan step replayed on the host against the CPU reference. */
static void check(window_graph *t) {
    const int64_t bw = t->images * NW, n = bw * H * W * D;
    const ir_epilogue *e = t->pv->epilogue;
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_nonnull(e->attention);
    ck_assert_msg(strstr(e->label, "window mask") != NULL, "label %s", e->label);
    const ir_attention *a = e->attention;
    ck_assert_ptr_nonnull(a->mask);
    ck_assert_int_eq(a->mask->rank, 4);
    const int64_t want_dims[4] = {NW, H, W, W};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(a->mask->dims[i], want_dims[i]);
    /* one image: the mask covers the batch, no modulo; more: entry b % nW */
    ck_assert_int_eq(a->mask_batch_mod, t->images > 1 ? NW : 0);
    const float *m = a->mask->data;
    for (int w = 0; w < NW; w++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < W; i++)
                for (int j = 0; j < W; j++)
                    ck_assert_float_eq(m[((w * H + h) * W + i) * W + j],
                                       bias_at(h, i, j) + mask_at(w, i, j));
    plan *p;
    ck_assert_tci_ok(plan_build(t->g, NULL, &p));
    const plan_step *st = NULL;
    int attention_steps = 0;
    for (int i = 0; i < p->num_steps; i++)
        if (p->steps[i].kind == PLAN_STEP_ATTENTION) {
            st = &p->steps[i];
            attention_steps++;
        }
    ck_assert_int_eq(attention_steps, 1);
    /* the Reshapes and Adds are the step's; per-head scales a step of their own on Q */
    ck_assert_int_eq(p->num_steps, t->head_scales ? 2 : 1);
    ck_assert_int_eq(st->u.attention.mask_batch_mod, a->mask_batch_mod);
    float *q = malloc((size_t)n * sizeof(float)), *k = malloc((size_t)n * sizeof(float));
    float *v = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
    ck_assert(q && k && v && got);
    for (int64_t i = 0; i < n; i++) {
        q[i] = sinf(0.37f * (float)i) * 2.0f;
        k[i] = cosf(0.11f * (float)i);
        v[i] = sinf(0.05f * (float)i + 1.0f);
    }
    /* the step reads Q as given, or Q scaled per head by the step before it */
    float *qread = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(qread);
    for (int64_t i = 0; i < n; i++)
        qread[i] = t->head_scales ? q[i] * head_scale_at((int)(i / (W * D) % H)) : q[i];
    if (t->head_scales) ck_assert_float_eq(st->u.attention.scale, 1.0f);
    th_replay_attention(&st->u.attention, qread, k, v, m, NULL, got);
    free(qread);
    /* the reference: the graph as written, without the GPU passes' rewrites */
    window_graph ref;
    build_graph(&ref, t->images, t->head_scales, false);
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(ref.g, &ex));
    const int64_t xd[4] = {bw, H, W, D};
    tci_tensor in[3] = {th_tensor(TCI_DTYPE_FLOAT, 4, xd, q), th_tensor(TCI_DTYPE_FLOAT, 4, xd, k),
                        th_tensor(TCI_DTYPE_FLOAT, 4, xd, v)};
    ck_assert_tci_ok(exec_cpu_run(ex, in, 3));
    const tci_tensor *y = exec_cpu_output(ex, 0);
    th_assert_near(got, y->data, (size_t)n, 2e-5f);
    exec_cpu_destroy(ex);
    ir_graph_destroy(ref.g);
    plan_destroy(p);
    free(q), free(k), free(v), free(got);
}

/* Three images of two windows: batch entries 0..5 read mask entries 0, 1, 0, 1, 0, 1. */
START_TEST(test_window_mask_images) {
    window_graph t;
    build(&t, 3, false);
    check(&t);
    ir_graph_destroy(t.g);
}
END_TEST

/* One image: the mask's two entries are the batch's, read without a modulo. */
START_TEST(test_window_mask_one_image) {
    window_graph t;
    build(&t, 1, false);
    check(&t);
    ir_graph_destroy(t.g);
}
END_TEST

/* Swin v2: the scores scaled per head, then the window mask; two images. */
START_TEST(test_window_mask_head_scales) {
    window_graph t;
    build(&t, 2, true);
    check(&t);
    ir_graph_destroy(t.g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("attention_window");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_window_mask_images);
    tcase_add_test(tc, test_window_mask_one_image);
    tcase_add_test(tc, test_window_mask_head_scales);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
