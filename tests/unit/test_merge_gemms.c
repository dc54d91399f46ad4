/* The siblings' merge (pass_merge_sibling_gemms): the query, key and value Linears of an
 * attention on one activation become one GEMM over their weights side by side, read back through
 * Slices. The merged weights and bias are checked value by value, the merged graph against the
 * unmerged one on the CPU reference, the plan for one GEMM step read in place by the attention
 * step, and the cases that must not merge. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

enum { B = 2, S = 5, E = 64, HEADS = 2, D = 32, PARTS = 3 };

static const ir_node *node_named(const ir_graph *g, const char *name) {
    for (size_t i = 0; i < g->num_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    return NULL;
}

/* Products with constant weights (MatMul or Gemm with a constant input 1). */
static int weighted_products(const ir_graph *g) {
    int count = 0;
    for (size_t i = 0; i < g->num_nodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->desc && n->desc->merge_columns && n->inputs[1] && n->inputs[1]->data) count++;
    }
    return count;
}

/* What the attention graph is built from. */
typedef struct block {
    float x[B * S * E];
    float w[PARTS][E * E], bias[PARTS][E];
} block;

static void block_init(block *k) {
    th_fill(k->x, B * S * E, 1);
    for (int p = 0; p < PARTS; p++) {
        th_fill(k->w[p], E * E, 10 + (unsigned)p);
        th_fill(k->bias[p], E, 20 + (unsigned)p);
    }
}

/* How a test graph departs from the plain attention. */
typedef struct variant {
    bool shared_key_weight; /* the key's weights also feed a graph output's MatMul */
    bool key_is_output;     /* the key's Linear's result is a graph output too */
    bool no_bias;           /* MatMuls without their bias Adds */
    bool gemm;              /* Reshape to rows [B S, E], then Gemm(rows, w^T, bias) */
    int heads;              /* 0: HEADS (of D values each) */
    const char *kept;       /* the node the plan keeps out of 16-bit storage ("*": every node,
                               an fp32 or tf32 plan), ir_node.kept; NULL: none */
} variant;

/* x [B, S, E] -> {query, key, value}: MatMul(w) + Add(bias) (or variant's) -> Reshape
 * [B, S, HEADS, D] ->
 * Transpose (0 2 1 3; the key 0 2 3 1) -> Q K^T / sqrt(D) -> Softmax -> P V -> Transpose
 * (0 2 1 3) -> Reshape [B, S, E] = y: Hugging Face's self-attention without its masks. */
static ir_graph *attention_graph(const block *k, const variant *v) {
    static const char *const names[PARTS] = {"query", "key", "value"};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int64_t xd[3] = {B, S, E}, wd[2] = {E, E}, e = E, four = 4, three = 3;
    const int heads = v->heads ? v->heads : HEADS;
    const int64_t heads_shape[4] = {B, S, heads, E / heads}, merged_shape[3] = {B, S, E};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    ir_tensor *split = th_named(g, "heads_shape", TCI_DTYPE_INT64, 1, &four, heads_shape);
    ir_tensor *merge = th_named(g, "merged_shape", TCI_DTYPE_INT64, 1, &three, merged_shape);
    const int64_t two = 2, rows_dims[2] = {B * S, E};
    ir_tensor *rows_shape = th_named(g, "rows_shape", TCI_DTYPE_INT64, 1, &two, rows_dims);
    float root = sqrtf((float)(E / heads));
    ir_tensor *scale = th_named(g, "root_d", TCI_DTYPE_FLOAT, 0, NULL, &root);
    ir_tensor *ops[PARTS], *outs[3];
    int num_outs = 0;
    ir_tensor *y = th_act(g, "y");
    outs[num_outs++] = y;
    for (int p = 0; p < PARTS; p++) {
        char name[64], out[64];
        snprintf(name, sizeof name, "%s.w", names[p]);
        ir_tensor *w = th_named(g, name, TCI_DTYPE_FLOAT, 2, wd, k->w[p]);
        snprintf(name, sizeof name, "%s.b", names[p]);
        ir_tensor *bias = th_named(g, name, TCI_DTYPE_FLOAT, 1, &e, k->bias[p]);
        snprintf(out, sizeof out, "%s.mm", names[p]);
        ir_tensor *mm = th_act(g, out);
        if (v->gemm) {
            snprintf(name, sizeof name, "%s.rows", names[p]);
            ir_tensor *rows = th_act(g, name);
            th_node_io(g, name, "Reshape", 17, (ir_tensor *[]){x, rows_shape}, 2, &rows, 1);
            ir_node *n = th_node_io(g, out, "Gemm", 17, (ir_tensor *[]){rows, w, bias}, 3, &mm, 1);
            th_attr_int(g, n, "transB", 1);
        } else {
            th_node_io(g, out, "MatMul", 17, (ir_tensor *[]){x, w}, 2, &mm, 1);
        }
        ir_tensor *lin = mm;
        if (!v->no_bias && !v->gemm) {
            snprintf(out, sizeof out, "%s.lin", names[p]);
            lin = th_act(g, out);
            th_node_io(g, out, "Add", 17, (ir_tensor *[]){mm, bias}, 2, &lin, 1);
        }
        if (p == 1 && v->key_is_output) outs[num_outs++] = lin;
        if (p == 1 && v->shared_key_weight) {
            ir_tensor *other = th_act(g, "other");
            th_node_io(g, "other", "MatMul", 17, (ir_tensor *[]){x, w}, 2, &other, 1);
            outs[num_outs++] = other;
        }
        snprintf(out, sizeof out, "%s.heads", names[p]);
        ir_tensor *h = th_act(g, out);
        th_node_io(g, out, "Reshape", 17, (ir_tensor *[]){lin, split}, 2, &h, 1);
        snprintf(out, sizeof out, "%s.t", names[p]);
        ops[p] = th_act(g, out);
        ir_node *t = th_node_io(g, out, "Transpose", 17, &h, 1, &ops[p], 1);
        th_attr_ints(g, t, "perm", p == 1 ? (const int64_t[]){0, 2, 3, 1}
                                          : (const int64_t[]){0, 2, 1, 3}, 4);
    }
    ir_tensor *scores = th_act(g, "scores"), *scaled = th_act(g, "scaled"), *probs = th_act(g, "probs"),
              *ctx = th_act(g, "ctx"), *ctx_t = th_act(g, "ctx_t");
    th_node_io(g, "qk", "MatMul", 17, (ir_tensor *[]){ops[0], ops[1]}, 2, &scores, 1);
    th_node_io(g, "scale", "Div", 17, (ir_tensor *[]){scores, scale}, 2, &scaled, 1);
    ir_node *sm = th_node_io(g, "softmax", "Softmax", 17, &scaled, 1, &probs, 1);
    th_attr_int(g, sm, "axis", -1);
    th_node_io(g, "pv", "MatMul", 17, (ir_tensor *[]){probs, ops[2]}, 2, &ctx, 1);
    ir_node *t = th_node_io(g, "ctx.t", "Transpose", 17, &ctx, 1, &ctx_t, 1);
    th_attr_ints(g, t, "perm", (const int64_t[]){0, 2, 1, 3}, 4);
    th_node_io(g, "ctx.merge", "Reshape", 17, (ir_tensor *[]){ctx_t, merge}, 2, &y, 1);
    th_graph_io(g, &x, 1, outs, num_outs);
    ck_assert_tci_ok(pass_optimize(g));
    for (size_t i = 0; v->kept && i < g->num_nodes; i++)
        g->nodes[i]->kept = strcmp(v->kept, "*") == 0 || strcmp(v->kept, g->nodes[i]->name) == 0;
    return g;
}

/* Every output of g on the CPU reference, one malloc'd array each. */
static void run_all(ir_graph *g, const block *k, float **out) {
    int64_t xd[3] = {B, S, E};
    tci_tensor in = th_tensor(TCI_DTYPE_FLOAT, 3, xd, k->x);
    for (size_t i = 0; i < g->num_outputs; i++) out[i] = th_cpu_output(g, &in, 1, i);
}

/* Runs the pass on the variant's graph and checks that the outputs are those of the unmerged
 * graph (the merged products compute the same sums, to fp32 rounding) and the model's own
 * constants untouched; returns the products with constant weights left. */
static int merge_and_compare(const variant *v, ir_graph **out_graph) {
    static block k;
    block_init(&k);
    ir_graph *g = attention_graph(&k, v);
    float *want[3] = {NULL}, *got[3] = {NULL};
    run_all(g, &k, want);
    ck_assert_int_eq(weighted_products(g), PARTS + v->shared_key_weight);
    ck_assert_tci_ok(pass_merge_sibling_gemms(g));
    run_all(g, &k, got);
    const int64_t sizes[3] = {B * S * E, B * S * E, B * S * E};
    for (size_t i = 0; i < g->num_outputs; i++) {
        th_assert_near(got[i], want[i], (size_t)sizes[i], 1e-5f);
        free(got[i]);
        free(want[i]);
    }
    ck_assert_mem_eq(ir_graph_find_tensor(g, "key.w")->data, k.w[1], sizeof k.w[1]);
    ck_assert_mem_eq(ir_graph_find_tensor(g, "value.b")->data, k.bias[2], sizeof k.bias[2]);
    int left = weighted_products(g);
    if (out_graph)
        *out_graph = g;
    else
        ir_graph_destroy(g);
    return left;
}

/* The three Linears become one MatMul of [E, 3E] weights (query's columns, then key's, then
 * value's) and one Add of the three biases; each part is a Slice of the packed result. */
START_TEST(test_merges_query_key_value) {
    block k;
    block_init(&k);
    variant v = {0};
    ir_graph *g;
    ck_assert_int_eq(merge_and_compare(&v, &g), 1);
    const ir_node *mm = node_named(g, "query.mm"), *add = node_named(g, "query.lin");
    ck_assert_ptr_nonnull(mm);
    ck_assert_ptr_nonnull(add);
    ck_assert_ptr_null(node_named(g, "key.mm"));
    ck_assert_ptr_null(node_named(g, "value.lin"));
    const ir_tensor *w = mm->inputs[1], *bias = add->inputs[1];
    ck_assert_int_eq(w->rank, 2);
    ck_assert_int_eq(w->dims[0], E);
    ck_assert_int_eq(w->dims[1], PARTS * E);
    ck_assert_int_eq(bias->rank, 1);
    ck_assert_int_eq(bias->dims[0], PARTS * E);
    const float *wv = w->data, *bv = bias->data;
    for (int p = 0; p < PARTS; p++)
        for (int col = 0; col < E; col++) {
            for (int row = 0; row < E; row++)
                ck_assert_float_eq(wv[row * PARTS * E + p * E + col], k.w[p][row * E + col]);
            ck_assert_float_eq(bv[p * E + col], k.bias[p][col]);
        }
    ck_assert_ptr_eq(add->inputs[0], mm->outputs[0]);
    /* each part's tensor: a Slice of the packed result, columns p E to (p + 1) E */
    static const char *const parts[PARTS] = {"query.lin", "key.lin", "value.lin"};
    for (int p = 0; p < PARTS; p++) {
        const ir_tensor *t = ir_graph_find_tensor(g, parts[p]);
        ck_assert_ptr_nonnull(t->producer);
        op_pattern pat;
        memset(&pat, 0, sizeof pat);
        t->producer->desc->pattern(t->producer, &pat);
        ck_assert_int_eq(pat.kind, OP_PATTERN_SELECT);
        ck_assert_ptr_eq(t->producer->inputs[0], add->outputs[0]);
        ck_assert_int_eq(pat.start[2], p * E);
        ck_assert_int_eq(t->dims[2], E);
    }
    /* a second run finds nothing more to merge */
    size_t nodes = g->num_nodes;
    ck_assert_tci_ok(pass_merge_sibling_gemms(g));
    ck_assert_int_eq(g->num_nodes, nodes);
    ck_assert_int_eq(weighted_products(g), 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_merges_without_bias) {
    variant v = {.no_bias = true};
    ck_assert_int_eq(merge_and_compare(&v, NULL), 1);
}
END_TEST

/* The key's weights read by another MatMul too: the key stays as it is (a copy would double its
 * weights on the device); query and value still merge. */
START_TEST(test_shared_weight_stays) {
    variant v = {.shared_key_weight = true};
    ir_graph *g;
    ck_assert_int_eq(merge_and_compare(&v, &g), 3); /* query+value, key, other */
    const ir_node *key = node_named(g, "key.mm");
    ck_assert_ptr_nonnull(key);
    ck_assert_ptr_eq(key->inputs[1], ir_graph_find_tensor(g, "key.w"));
    ck_assert_ptr_eq(ir_graph_find_tensor(g, "key.lin")->producer, node_named(g, "key.lin"));
    ir_graph_destroy(g);
}
END_TEST

/* The key's result a graph output: it is not merged (the merged tensor would be a Slice copy). */
START_TEST(test_output_part_stays) {
    variant v = {.key_is_output = true};
    ir_graph *g;
    ck_assert_int_eq(merge_and_compare(&v, &g), 2); /* query+value, key */
    ck_assert_ptr_eq(node_named(g, "key.mm")->inputs[1], ir_graph_find_tensor(g, "key.w"));
    ir_graph_destroy(g);
}
END_TEST

/* Where the attention step would be its unfused steps, the Slices would be copies of their own:
 * nothing merges, for a head dim the kernel lacks (8), a plan storing fp32, a node of the
 * attention kept in fp32 (the softmax; the head merge after it). A projection kept in fp32
 * stays as it is; the other two merge (the packed product has one precision). */
START_TEST(test_no_merge_where_attention_unfused) {
    const variant unfused[] = {{.heads = E / 8}, {.kept = "*"}, {.kept = "softmax"},
                               {.kept = "ctx.merge"}};
    for (size_t i = 0; i < sizeof unfused / sizeof unfused[0]; i++)
        ck_assert_int_eq(merge_and_compare(&unfused[i], NULL), PARTS);
    variant kept_key = {.kept = "key.mm"};
    ck_assert_int_eq(merge_and_compare(&kept_key, NULL), 2);
}
END_TEST

/* Planned for the GPU: one GEMM step (the packed projection with its bias) and the attention
 * step reading Q, K and V from its output at offsets 0, E and 2E: no copy between. */
START_TEST(test_plan_one_gemm_read_in_place) {
    block k;
    block_init(&k);
    variant v = {0};
    ir_graph *g = attention_graph(&k, &v);
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    int gemms = 0, attention = 0;
    const plan_step *gemm = NULL, *att = NULL;
    for (int i = 0; i < p->num_steps; i++) {
        if (p->steps[i].kind == PLAN_STEP_GEMM) gemm = &p->steps[i], gemms++;
        if (p->steps[i].kind == PLAN_STEP_ATTENTION) att = &p->steps[i], attention++;
    }
    ck_assert_int_eq(gemms, 1);
    ck_assert_int_eq(attention, 1);
    ck_assert_int_eq(p->num_steps, 2);
    const ir_attention *a = att->node->epilogue->attention;
    const ir_tensor *packed = gemm->node->epilogue->output;
    ck_assert_ptr_eq(a->q, packed);
    ck_assert_ptr_eq(a->k, packed);
    ck_assert_ptr_eq(a->v, packed);
    ck_assert_int_eq(a->q_offset, 0);
    ck_assert_int_eq(a->k_offset, E);
    ck_assert_int_eq(a->v_offset, 2 * E);
    plan_destroy(p);
    ir_graph_destroy(g);
}
END_TEST

/* The dynamo exporter's Linears: each part reshapes x to rows [B S, E] itself and runs a Gemm
 * under transB with its bias as C. One Gemm is left, reading the first part's rows, with B's
 * rows (the parts' output columns) one block after another and C side by side; the other
 * reshapes are gone with their Gemms. */
START_TEST(test_gemm_trans_b_merge) {
    block k;
    block_init(&k);
    variant v = {.gemm = true};
    ir_graph *g;
    ck_assert_int_eq(merge_and_compare(&v, &g), 1);
    const ir_node *fc = node_named(g, "query.mm");
    ck_assert_ptr_nonnull(fc);
    ck_assert_ptr_null(node_named(g, "key.mm"));
    ck_assert_ptr_null(node_named(g, "value.rows"));
    ck_assert_ptr_eq(fc->inputs[0], ir_graph_find_tensor(g, "query.rows"));
    const ir_tensor *wt = fc->inputs[1], *ct = fc->inputs[2];
    ck_assert_int_eq(wt->dims[0], PARTS * E);
    ck_assert_int_eq(wt->dims[1], E);
    ck_assert_int_eq(ct->rank, 1);
    ck_assert_int_eq(ct->dims[0], PARTS * E);
    const float *wv = wt->data, *cv = ct->data;
    for (int p = 0; p < PARTS; p++) {
        for (int j = 0; j < E * E; j++) ck_assert_float_eq(wv[p * E * E + j], k.w[p][j]);
        for (int j = 0; j < E; j++) ck_assert_float_eq(cv[p * E + j], k.bias[p][j]);
    }
    ir_graph_destroy(g);
}
END_TEST

/* The descriptor's merge of n1 and n2 (weights b1 and another) is refused, n1 left as it was. */
static void assert_refused(ir_graph *g, ir_node *n1, ir_node *n2, const ir_tensor *b1) {
    ck_assert_tci_ok(op_prepare_node(n1, g->arena));
    ck_assert_tci_ok(op_prepare_node(n2, g->arena));
    bool done = true;
    ck_assert_tci_ok(n1->desc->merge_columns(g, (ir_node *[]){n1, n2}, 2, &done));
    ck_assert(!done);
    ck_assert_ptr_eq(n1->inputs[1], b1);
}

/* Gemms of which one reads its A transposed (another K where A is not square, another
 * operand where it is) never merge. */
START_TEST(test_descriptor_refuses_other_trans_a) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float w[4 * 4] = {0};
    int64_t wd[2] = {4, 4};
    ir_tensor *a = th_named(g, "a", TCI_DTYPE_FLOAT, 2, wd, NULL);
    ir_tensor *b1 = th_named(g, "b1", TCI_DTYPE_FLOAT, 2, wd, w);
    ir_tensor *b2 = th_named(g, "b2", TCI_DTYPE_FLOAT, 2, wd, w);
    ir_tensor *y1 = th_act(g, "y1"), *y2 = th_act(g, "y2");
    ir_node *n1 = th_node_io(g, "g1", "Gemm", 13, (ir_tensor *[]){a, b1}, 2, &y1, 1);
    ir_node *n2 = th_node_io(g, "g2", "Gemm", 13, (ir_tensor *[]){a, b2}, 2, &y2, 1);
    th_attr_int(g, n2, "transA", 1);
    assert_refused(g, n1, n2, b1);
    ir_graph_destroy(g);
}
END_TEST

/* Weights of different K never merge, whatever reads them (the descriptor's own check). */
START_TEST(test_descriptor_refuses_other_k) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    float w1[4 * 3] = {0}, w2[5 * 3] = {0};
    int64_t d1[2] = {4, 3}, d2[2] = {5, 3}, ad[2] = {2, 4};
    ir_tensor *a = th_named(g, "a", TCI_DTYPE_FLOAT, 2, ad, NULL);
    ir_tensor *b1 = th_named(g, "b1", TCI_DTYPE_FLOAT, 2, d1, w1);
    ir_tensor *b2 = th_named(g, "b2", TCI_DTYPE_FLOAT, 2, d2, w2);
    ir_tensor *y1 = th_act(g, "y1"), *y2 = th_act(g, "y2");
    ir_node *n1 = th_node_io(g, "m1", "MatMul", 13, (ir_tensor *[]){a, b1}, 2, &y1, 1);
    ir_node *n2 = th_node_io(g, "m2", "MatMul", 13, (ir_tensor *[]){a, b2}, 2, &y2, 1);
    assert_refused(g, n1, n2, b1);
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("merge_gemms");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_merges_query_key_value);
    tcase_add_test(tc, test_merges_without_bias);
    tcase_add_test(tc, test_shared_weight_stays);
    tcase_add_test(tc, test_output_part_stays);
    tcase_add_test(tc, test_no_merge_where_attention_unfused);
    tcase_add_test(tc, test_plan_one_gemm_read_in_place);
    tcase_add_test(tc, test_gemm_trans_b_merge);
    tcase_add_test(tc, test_descriptor_refuses_other_trans_a);
    tcase_add_test(tc, test_descriptor_refuses_other_k);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
