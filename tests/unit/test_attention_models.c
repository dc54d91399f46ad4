/* The generated bert_block and gpt2_block (models/generate.py: transformers' eager attention as
 * torch.onnx writes it, bool masks, Where(keep, 0, fill), the softmax's NaN guard), loaded from
 * the ONNX files, optimised and planned for the GPU at batch 3 and sequence 13: every attention
 * step of the plan is replayed on the host with the kernel's rules, reading the tensors the step
 * reads as the CPU reference computes them, against the reference's own output of the step
 * (which tests/models holds to onnxruntime). The masks leave rows without a key: a sequence all
 * padding, and left padding under GPT-2's causal mask. No GPU needed; the models come from the
 * models.generate fixture (TCI_TEST_MODELS_DIR). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/cpu/exec_cpu.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "onnx/loader.h"

enum { N = 3, S = 13, E = 128 };

static int64_t count_of(const ir_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
}

/* The index of t among the graph outputs, appending it when it is none. */
static size_t output_index(ir_graph *g, ir_tensor *t) {
    for (size_t i = 0; i < g->num_outputs; i++)
        if (g->outputs[i] == t) return i;
    ir_tensor **outputs = arena_alloc(g->arena, (g->num_outputs + 1) * sizeof *outputs);
    ck_assert_ptr_nonnull(outputs);
    memcpy(outputs, g->outputs, g->num_outputs * sizeof *outputs);
    outputs[g->num_outputs] = t;
    t->is_graph_output = true;
    g->outputs = outputs;
    return g->num_outputs++;
}

/* models_dir/name.onnx, every input's first two dims (N, S), optimised. */
static ir_graph *load_model(const char *name) {
    const char *dir = getenv("TCI_TEST_MODELS_DIR");
    ck_assert_msg(dir != NULL, "TCI_TEST_MODELS_DIR is not set (ctest sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    ir_graph *g;
    ck_assert_tci_ok(onnx_load_file(path, &g));
    for (size_t i = 0; i < g->num_inputs; i++) {
        ir_tensor *t = g->inputs[i];
        t->dims[0] = N;
        t->dims[1] = S;
    }
    ck_assert_tci_ok(pass_optimize(g));
    return g;
}

/* Loads models_dir/name.onnx at (N, S), plans it, replays its attention steps (expected:
 * `steps`, of which `causal` with the causal flag and `row_mean` with keep_row_mean). */
static void check_model(const char *name, int steps, int causal, int row_mean) {
    ir_graph *g = load_model(name);
    ck_assert_int_eq(g->num_inputs, 2);
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));

    /* the tensors each attention step reads and writes, as outputs of the CPU run */
    enum { MAX_STEPS = 4 };
    const plan_step *att[MAX_STEPS];
    const ir_attention *irs[MAX_STEPS];
    size_t io[MAX_STEPS][5];
    int found = 0, with_causal = 0, with_mean = 0;
    for (int i = 0; i < p->num_steps; i++) {
        const plan_step *st = &p->steps[i];
        ck_assert_int_ne(st->kind, PLAN_STEP_SOFTMAX);
        if (st->kind != PLAN_STEP_ATTENTION) continue;
        ck_assert_int_lt(found, MAX_STEPS);
        const ir_epilogue *e = st->node->epilogue;
        const ir_attention *a = e->attention;
        ck_assert(st->u.attention.has_keep && a->keep && !a->mask);
        with_causal += st->u.attention.causal;
        with_mean += st->u.attention.keep_row_mean;
        ir_tensor *ts[5] = {a->q, a->k, a->v, a->keep, e->output};
        for (int k = 0; k < 5; k++) io[found][k] = output_index(g, ts[k]);
        irs[found] = a;
        att[found++] = st;
    }
    ck_assert_int_eq(found, steps);
    ck_assert_int_eq(with_causal, causal);
    ck_assert_int_eq(with_mean, row_mean);

    static float x[N * S * E];
    int64_t mask[N * S];
    for (int i = 0; i < N * S * E; i++)
        x[i] = sinf(0.37f * (float)i) + 0.3f * cosf(0.013f * (float)i);
    for (int b = 0; b < N; b++)
        for (int j = 0; j < S; j++)
            mask[b * S + j] = b == 1 ? 0 : b == 2 ? j >= 4 : j < S - 2; /* none; left; right */
    const int64_t xd[3] = {N, S, E}, md[2] = {N, S};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 3, xd, x),
                        th_tensor(TCI_DTYPE_INT64, 2, md, mask)};
    exec_cpu *ex;
    ck_assert_tci_ok(exec_cpu_create(g, &ex));
    ck_assert_tci_ok(exec_cpu_run(ex, in, 2));
    for (int s = 0; s < found; s++) {
        const tci_tensor *q = exec_cpu_output(ex, io[s][0]), *k = exec_cpu_output(ex, io[s][1]);
        const tci_tensor *v = exec_cpu_output(ex, io[s][2]), *keep = exec_cpu_output(ex, io[s][3]);
        const tci_tensor *want = exec_cpu_output(ex, io[s][4]);
        ck_assert_int_eq(keep->dtype, TCI_DTYPE_BOOL);
        const int64_t n = count_of(irs[s]->nodes[irs[s]->owner]->epilogue->output);
        float *got = malloc((size_t)n * sizeof(float));
        ck_assert_ptr_nonnull(got);
        for (int64_t i = 0; i < n; i++) got[i] = NAN;
        th_replay_attention(&att[s]->u.attention, q->data, k->data, v->data, NULL, keep->data,
                            got);
        const float *w = want->data;
        int zero_rows = 0;
        for (int64_t i = 0; i < n; i++) {
            ck_assert_msg(isfinite(w[i]), "%s step %d: reference y[%lld] = %g", name, s,
                          (long long)i, w[i]);
            zero_rows += w[i] == 0.0f;
        }
        /* the -inf fill's rows without a key are zeros in the reference (NaN, then the guard) */
        if (!att[s]->u.attention.keep_row_mean) ck_assert_int_gt(zero_rows, 0);
        th_assert_near(got, w, (size_t)n, 2e-5f);
        free(got);
    }
    exec_cpu_destroy(ex);
    plan_destroy(p);
    ir_graph_destroy(g);
}

/* The graph of models_dir/name.onnx at (N, S) prepared for the GPU with or without the
 * siblings' merge (pass_merge_sibling_gemms; without it, the other GPU passes in
 * pass_prepare_for_gpu's order), and its plan's steps, GEMM steps and copy steps; with the
 * merge, and either way for the first `packed` attention steps (a packed QKV projection's),
 * each attention step checked to read Q, K and V from one tensor at offsets 0, E and 2 E, and
 * either way what it reads checked to be what a GEMM step writes. */
static ir_graph *count_steps(const char *name, bool merge, int packed, int *steps, int *gemms,
                             int *copies) {
    ir_graph *g = load_model(name);
    if (merge) {
        ck_assert_tci_ok(pass_prepare_for_gpu(g));
    } else {
        ck_assert_tci_ok(pass_emulate_qdq(g));
        ck_assert_tci_ok(pass_fold_layer_scale(g));
        ck_assert_tci_ok(pass_fuse_for_gpu(g));
        ck_assert_tci_ok(pass_assign_layouts(g));
    }
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    *steps = p->num_steps;
    *gemms = *copies = 0;
    for (int i = 0, attention = 0; i < p->num_steps; i++) {
        const plan_step *st = &p->steps[i];
        *gemms += st->kind == PLAN_STEP_GEMM;
        *copies += st->kind == PLAN_STEP_COPY;
        if (st->kind != PLAN_STEP_ATTENTION) continue;
        const ir_attention *a = st->node->epilogue->attention;
        const ir_node *producer = a->q->producer;
        if (merge || attention++ < packed) {
            ck_assert_ptr_eq(a->k, a->q);
            ck_assert_ptr_eq(a->v, a->q);
            ck_assert_int_eq(a->q_offset, 0);
            ck_assert_int_eq(a->k_offset, E);
            ck_assert_int_eq(a->v_offset, 2 * E);
        } else {
            ck_assert_ptr_ne(a->k, a->q);
        }
        /* what the step reads is what a GEMM step writes (its bias Add fused into it) */
        const ir_node *gemm = producer->fused_into ? producer->fused_into : producer;
        bool written = false;
        for (int j = 0; j < i; j++)
            written = written || (p->steps[j].kind == PLAN_STEP_GEMM && p->steps[j].node == gemm);
        ck_assert_msg(written, "%s: attention step %d reads a tensor no GEMM step writes", name,
                      i);
    }
    plan_destroy(p);
    return g;
}

/* Output 0 of g on the CPU reference: input [N, S, E] and, where g has one, the mask [N, S]
 * keeping the first S - 2 keys of each sequence. */
static float *cpu_output(ir_graph *g) {
    static float x[N * S * E];
    int64_t mask[N * S];
    for (int i = 0; i < N * S * E; i++) x[i] = sinf(0.21f * (float)i) + 0.2f * cosf(0.07f * (float)i);
    for (int i = 0; i < N * S; i++) mask[i] = i % S < S - 2;
    const int64_t xd[3] = {N, S, E}, md[2] = {N, S};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 3, xd, x),
                        th_tensor(TCI_DTYPE_INT64, 2, md, mask)};
    return th_cpu_output(g, in, g->num_inputs, 0);
}

/* Hugging Face's separate query, key and value projections: three GEMM steps a block without
 * the merge, one with it in each of `blocks` blocks, no copy step added, after `packed` blocks
 * on a packed projection; the merged graph computes on the CPU reference what the unmerged one
 * does. */
static void check_merge(const char *name, int packed, int blocks, int steps_before,
                        int gemms_before, int copies_before) {
    int steps, gemms, copies;
    ir_graph *unmerged = count_steps(name, false, packed, &steps, &gemms, &copies);
    ck_assert_int_eq(steps, steps_before);
    ck_assert_int_eq(gemms, gemms_before);
    ck_assert_int_eq(copies, copies_before);
    ir_graph *merged = count_steps(name, true, packed, &steps, &gemms, &copies);
    ck_assert_int_eq(steps, steps_before - 2 * blocks);
    ck_assert_int_eq(gemms, gemms_before - 2 * blocks);
    ck_assert_int_eq(copies, copies_before);
    float *want = cpu_output(unmerged), *got = cpu_output(merged);
    th_assert_near(got, want, N * S * E, 1e-5f);
    free(got);
    free(want);
    ir_graph_destroy(unmerged);
    ir_graph_destroy(merged);
}

/* the mask's Cast and And, 2 x (Q, K, V, attention, output projection) */
START_TEST(test_bert_block_merged_projections) { check_merge("bert_block", 0, 2, 12, 8, 0); }
END_TEST

/* 5 LayerNorms, 2 x (Q, K, V, attention, output projection, FC1, FC2) */
START_TEST(test_vit_layers_merged_projections) { check_merge("vit_layers", 0, 2, 19, 12, 0); }
END_TEST

/* four blocks: SDPA's export with a padding mask, the manual causal form, head dims 40 and 128;
 * the third (head dim 40) lowers as unfused steps, where the merge would add copies: not it */
START_TEST(test_attention_block_merged_projections) {
    check_merge("attention_block", 0, 3, 30, 18, 4);
}
END_TEST

/* torchvision's MultiheadAttention (its Transposes moved onto the attention step's strided reads
 * and writes: no copy either way) then the SDPA export's separate Q, K and V projections, merged:
 * the cast, sub and mul of the mask, in_proj, attention, out_proj, then Q, K, V (one GEMM
 * merged), attention, output projection */
START_TEST(test_mixed_attention_block_merged_projections) {
    check_merge("mixed_attention_block", 1, 1, 11, 6, 0);
}
END_TEST

/* torchvision's MultiheadAttention, where the attention fusion moves the Transposes around the
 * projections (rows.c) before it matches: the merge finds the attention steps on a copy, so the
 * graph it is given stays as it is (no node, tensor or edge changed, no fusion mark) when there
 * is nothing to merge, and the fusion proper still moves and folds the Transposes: the plan has
 * its 12 steps, three attention steps and no copy step. */
START_TEST(test_merge_probe_leaves_graph) {
    ir_graph *g = load_model("packed_attention_block");
    const size_t num_nodes = g->num_nodes, num_tensors = g->num_tensors;
    ir_node **nodes = malloc(num_nodes * sizeof *nodes);
    ir_tensor **edges = malloc(num_nodes * 2 * 8 * sizeof *edges);
    ck_assert_ptr_nonnull(nodes);
    ck_assert_ptr_nonnull(edges);
    for (size_t i = 0; i < num_nodes; i++) {
        nodes[i] = g->nodes[i];
        ck_assert_int_le(nodes[i]->num_inputs, 8);
        ck_assert_int_le(nodes[i]->num_outputs, 8);
        for (int k = 0; k < nodes[i]->num_inputs; k++) edges[i * 16 + k] = nodes[i]->inputs[k];
        for (int k = 0; k < nodes[i]->num_outputs; k++)
            edges[i * 16 + 8 + k] = nodes[i]->outputs[k];
    }
    ck_assert_tci_ok(pass_merge_sibling_gemms(g));
    ck_assert_uint_eq(g->num_nodes, num_nodes);
    ck_assert_uint_eq(g->num_tensors, num_tensors);
    for (size_t i = 0; i < num_nodes; i++) {
        const ir_node *n = g->nodes[i];
        ck_assert_ptr_eq(n, nodes[i]);
        ck_assert_ptr_null(n->epilogue);
        ck_assert_ptr_null(n->fused_into);
        for (int k = 0; k < n->num_inputs; k++) ck_assert_ptr_eq(n->inputs[k], edges[i * 16 + k]);
        for (int k = 0; k < n->num_outputs; k++)
            ck_assert_ptr_eq(n->outputs[k], edges[i * 16 + 8 + k]);
        for (int k = 0; k < n->num_outputs; k++)
            if (n->outputs[k]) ck_assert_ptr_eq(n->outputs[k]->producer, n);
    }
    free(nodes);
    free(edges);
    ir_graph_destroy(g);
    g = load_model("packed_attention_block");
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    int attentions = 0, copies = 0;
    for (int i = 0; i < p->num_steps; i++) {
        attentions += p->steps[i].kind == PLAN_STEP_ATTENTION;
        copies += p->steps[i].kind == PLAN_STEP_COPY;
    }
    ck_assert_int_eq(p->num_steps, 12);
    ck_assert_int_eq(attentions, 3);
    ck_assert_int_eq(copies, 0);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* two blocks: -inf fill with the guard, then the finite torch.finfo.min fill */
START_TEST(test_bert_block) { check_model("bert_block", 2, 0, 1); }
END_TEST

/* two blocks, causal and padding And-ed: the causal flag and the padding read */
START_TEST(test_gpt2_block) { check_model("gpt2_block", 2, 2, 0); }
END_TEST

int main(void) {
    Suite *s = suite_create("attention_models");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_bert_block);
    tcase_add_test(tc, test_gpt2_block);
    tcase_add_test(tc, test_bert_block_merged_projections);
    tcase_add_test(tc, test_vit_layers_merged_projections);
    tcase_add_test(tc, test_attention_block_merged_projections);
    tcase_add_test(tc, test_merge_probe_leaves_graph);
    tcase_add_test(tc, test_mixed_attention_block_merged_projections);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
