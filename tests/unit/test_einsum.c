/* Einsum: parse errors, shape inference (implicit output, ellipsis
 * broadcasting), the CPU reference against hand-written sums, and the GPU
 * lowering replayed on the host (its copy, GEMM and reduce steps) against the
 * CPU reference for the equations exporters emit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

/* Runs Einsum(equation) on n operands; out receives the result (th_free). */
static tci_status run_einsum(const char *equation, const tci_tensor *in, int n, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *node = th_node(g, "Einsum", 12, n, 1);
    if (equation) th_attr_string(g, node, "equation", equation);
    tci_status st = th_run(g, node, in, out);
    ir_graph_destroy(g);
    return st;
}

static void fill(float *x, int n, float scale) {
    for (int i = 0; i < n; i++) x[i] = scale * (float)((i * 7) % 11 - 5);
}

START_TEST(test_parse_errors) {
    float x[6] = {0};
    int64_t d[2] = {2, 3};
    tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 2, d, x), th_tensor(TCI_DTYPE_FLOAT, 2, d, x)};
    tci_tensor out;
    ck_assert_tci_error(run_einsum(NULL, in, 1, &out), TCI_ERR_INVALID_MODEL,
                        "'equation' is required");
    ck_assert_tci_error(run_einsum("i1->i", in, 1, &out), TCI_ERR_INVALID_MODEL,
                        "'1' is not a subscript letter");
    ck_assert_tci_error(run_einsum("ij,jk->ik", in, 1, &out), TCI_ERR_INVALID_MODEL,
                        "2 terms for 1 inputs");
    ck_assert_tci_error(run_einsum("ij->k", in, 1, &out), TCI_ERR_INVALID_MODEL,
                        "'k' is in no input term");
    ck_assert_tci_error(run_einsum("ij->ii", in, 1, &out), TCI_ERR_INVALID_MODEL,
                        "'i' appears twice");
    ck_assert_tci_error(run_einsum("i..j.->i", in, 1, &out), TCI_ERR_INVALID_MODEL, "'...'");
    ck_assert_tci_error(run_einsum("ijk->i", in, 1, &out), TCI_ERR_INVALID_MODEL,
                        "rank 2, its term has 3 subscripts");
    /* j is 3 in one operand and 2 in the other */
    ck_assert_tci_error(run_einsum("ij,ji->i", in, 2, &out), TCI_ERR_INVALID_MODEL,
                        "the same subscript elsewhere");
}
END_TEST

START_TEST(test_infer) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Einsum", 12, 2, 1);
    th_attr_string(g, n, "equation", "...ij,...jk");
    int64_t ad[4] = {2, 1, 3, 4}, bd[3] = {5, 4, 6};
    tci_tensor a = th_shape_only(TCI_DTYPE_FLOAT, 4, ad), b = th_shape_only(TCI_DTYPE_FLOAT, 3, bd);
    tci_tensor out[1];
    ck_assert_tci_ok(th_infer(g, n, (const tci_tensor *[]){&a, &b}, out));
    /* implicit output: the ellipsis, then the subscripts seen once (i, k) in
     * order */
    th_assert_dims(&out[0], 4, (int64_t[]){2, 5, 3, 6});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_reference) {
    float a[6], b[12], sq[9];
    fill(a, 6, 1.0f);
    fill(b, 12, 0.5f);
    fill(sq, 9, 1.0f);
    int64_t ad[2] = {2, 3}, bd[2] = {3, 4}, sd[2] = {3, 3};
    tci_tensor A = th_tensor(TCI_DTYPE_FLOAT, 2, ad, a), B = th_tensor(TCI_DTYPE_FLOAT, 2, bd, b);
    tci_tensor S = th_tensor(TCI_DTYPE_FLOAT, 2, sd, sq), out;
    /* matrix product */
    ck_assert_tci_ok(run_einsum("ij,jk->ik", (tci_tensor[]){A, B}, 2, &out));
    th_assert_dims(&out, 2, (int64_t[]){2, 4});
    float want[8] = {0};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 3; j++) want[i * 4 + k] += a[i * 3 + j] * b[j * 4 + k];
    th_assert_near(out.data, want, 8, 1e-5f);
    th_free(&out, 1);
    /* trace, diagonal, total sum, transpose */
    ck_assert_tci_ok(run_einsum("ii", &S, 1, &out));
    ck_assert_int_eq(out.rank, 0);
    float trace = sq[0] + sq[4] + sq[8];
    th_assert_near(out.data, &trace, 1, 1e-6f);
    th_free(&out, 1);
    ck_assert_tci_ok(run_einsum("ii->i", &S, 1, &out));
    th_assert_near(out.data, (float[]){sq[0], sq[4], sq[8]}, 3, 0);
    th_free(&out, 1);
    ck_assert_tci_ok(run_einsum("ij->", &A, 1, &out));
    float total = 0;
    for (int i = 0; i < 6; i++) total += a[i];
    th_assert_near(out.data, &total, 1, 1e-6f);
    th_free(&out, 1);
    ck_assert_tci_ok(run_einsum("ij->ji", &A, 1, &out));
    th_assert_near(out.data, (float[]){a[0], a[3], a[1], a[4], a[2], a[5]}, 6, 0);
    th_free(&out, 1);
    /* three operands: (A B) summed against a vector */
    float v[4] = {1, -2, 3, 0.5f};
    int64_t vd[1] = {4};
    tci_tensor V = th_tensor(TCI_DTYPE_FLOAT, 1, vd, v);
    ck_assert_tci_ok(run_einsum("ij,jk,k->i", (tci_tensor[]){A, B, V}, 3, &out));
    float want3[2] = {0};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) want3[i] += want[i * 4 + k] * v[k];
    th_assert_near(out.data, want3, 2, 1e-4f);
    th_free(&out, 1);
    /* an empty contraction gives zeros */
    int64_t ed[2] = {2, 0}, fd[2] = {0, 4};
    tci_tensor E = th_tensor(TCI_DTYPE_FLOAT, 2, ed, a), F = th_tensor(TCI_DTYPE_FLOAT, 2, fd, b);
    ck_assert_tci_ok(run_einsum("ij,jk->ik", (tci_tensor[]){E, F}, 2, &out));
    float zeros[8] = {0};
    th_assert_near(out.data, zeros, 8, 0);
    th_free(&out, 1);
}
END_TEST

/* ---- the GPU lowering, replayed on the host ---- */

static float *buffer_of(float **bufs, const plan *p, int index) {
    while (p->tensors[index].alias_of >= 0) index = p->tensors[index].alias_of;
    return bufs[index];
}

static void replay_gemm(const plan_gemm *g, const float *a, const float *b, float *c) {
    for (int64_t t = 0; t < g->batch; t++)
        for (int64_t i = 0; i < g->m; i++)
            for (int64_t j = 0; j < g->n; j++) {
                double acc = 0;
                for (int64_t k = 0; k < g->k; k++) {
                    float av = g->trans_a ? a[t * g->stride_a + k * g->lda + i]
                                          : a[t * g->stride_a + i * g->lda + k];
                    float bv = g->trans_b ? b[t * g->stride_b + j * g->ldb + k]
                                          : b[t * g->stride_b + k * g->ldb + j];
                    acc += (double)av * bv;
                }
                c[t * g->stride_c + i * g->ldc + j] = (float)(g->alpha * acc);
            }
}

/* A contiguous input of view dims summed over the flagged dims, the rest kept
 * in order. */
static void replay_reduce(const plan_step *s, const float *x, float *y, int64_t y_count) {
    const plan_strided *v = &s->u.reduce.view;
    ck_assert_int_eq(s->u.reduce.op, REDUCE_SUM);
    for (int64_t i = 0; i < y_count; i++) y[i] = 0;
    int64_t idx[PLAN_MAX_PHYS_RANK] = {0}, total = 1;
    for (int d = 0; d < v->rank; d++) total *= v->dims[d];
    for (int64_t e = 0; e < total; e++) {
        int64_t o = 0;
        for (int d = 0; d < v->rank; d++)
            if (!s->u.reduce.reduce_dim[d]) o = o * v->dims[d] + idx[d];
        y[o] += x[e];
        for (int d = v->rank - 1; d >= 0; d--) {
            if (++idx[d] < v->dims[d]) break;
            idx[d] = 0;
        }
    }
}

static int64_t count_of(const plan_tensor *t) {
    int64_t c = 1;
    for (int d = 0; d < t->rank; d++) c *= t->dims[d];
    return c;
}

/* Plans Einsum(equation) on dense float operands for the GPU, replays its steps
 * on the host and compares with the CPU reference; returns the number of GEMM
 * steps. */
static int check_lowering(const char *equation, int n, const int *ranks, const int64_t dims[][4]) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x[2];
    float *data[2];
    tci_tensor in[2];
    for (int t = 0; t < n; t++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", t);
        x[t] = th_named(g, name, TCI_DTYPE_FLOAT, ranks[t], dims[t], NULL);
        int64_t c = 1;
        for (int d = 0; d < ranks[t]; d++) c *= dims[t][d];
        data[t] = malloc((size_t)c * sizeof(float));
        fill(data[t], (int)c, t ? 0.25f : 1.0f);
        in[t] = th_tensor(TCI_DTYPE_FLOAT, ranks[t], dims[t], data[t]);
    }
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_node *node = th_node_io(g, "e", "Einsum", 12, x, n, &y, 1);
    th_attr_string(g, node, "equation", equation);
    th_graph_io(g, x, n, &y, 1);
    plan *p;
    ck_assert_tci_ok(th_plan_for_gpu(g, &p));
    float **bufs = calloc((size_t)p->num_tensors, sizeof *bufs);
    for (int i = 0; i < p->num_tensors; i++)
        bufs[i] = calloc((size_t)count_of(&p->tensors[i]) + 1, sizeof(float));
    for (int t = 0; t < n; t++)
        memcpy(bufs[p->input_tensors[t]], data[t],
               (size_t)count_of(&p->tensors[p->input_tensors[t]]) * sizeof(float));
    int gemms = 0;
    for (int i = 0; i < p->num_steps; i++) {
        const plan_step *s = &p->steps[i];
        float *out = buffer_of(bufs, p, s->outputs[0]);
        switch (s->kind) {
        case PLAN_STEP_COPY: th_replay_copy(s, buffer_of(bufs, p, s->inputs[0]), out); break;
        case PLAN_STEP_GEMM:
            ck_assert_int_eq(s->inputs[2], -1);
            replay_gemm(&s->u.gemm, buffer_of(bufs, p, s->inputs[0]),
                        buffer_of(bufs, p, s->inputs[1]), out);
            gemms++;
            break;
        case PLAN_STEP_REDUCE:
            replay_reduce(s, buffer_of(bufs, p, s->inputs[0]), out,
                          count_of(&p->tensors[s->outputs[0]]));
            break;
        default: ck_abort_msg("%s: unexpected step kind %d", equation, s->kind);
        }
    }
    tci_tensor want;
    ck_assert_tci_ok(run_einsum(equation, in, n, &want));
    const plan_tensor *yt = &p->tensors[p->output_tensors[0]];
    ck_assert_int_eq(count_of(yt), op_count(&want));
    th_assert_near(buffer_of(bufs, p, p->output_tensors[0]), want.data, (size_t)op_count(&want),
                   1e-4f);
    th_free(&want, 1);
    for (int i = 0; i < p->num_tensors; i++) free(bufs[i]);
    free(bufs);
    for (int t = 0; t < n; t++) free(data[t]);
    plan_destroy(p);
    ir_graph_destroy(g);
    return gemms;
}

START_TEST(test_gpu_lowering) {
    /* attention scores and context: B is read transposed, no copies */
    ck_assert_int_eq(check_lowering("bhqd,bhkd->bhqk", 2, (int[]){4, 4},
                                    (const int64_t[][4]){{2, 3, 5, 4}, {2, 3, 6, 4}}),
                     1);
    ck_assert_int_eq(check_lowering("bhqk,bhkd->bhqd", 2, (int[]){4, 4},
                                    (const int64_t[][4]){{2, 3, 5, 6}, {2, 3, 6, 4}}),
                     1);
    /* a permuted output (copy after the GEMM) and permuted operands (copies
     * before) */
    check_lowering("bqhd,bkhd->bhqk", 2, (int[]){4, 4},
                   (const int64_t[][4]){{2, 5, 3, 4}, {2, 6, 3, 4}});
    check_lowering("ij,kj->ki", 2, (int[]){2, 2}, (const int64_t[][4]){{3, 4}, {5, 4}});
    check_lowering("ji,jk->ik", 2, (int[]){2, 2}, (const int64_t[][4]){{4, 3}, {4, 5}});
    /* outer and inner products, a linear layer over a batch, the ellipsis */
    check_lowering("i,j->ij", 2, (int[]){1, 1}, (const int64_t[][4]){{3}, {4}});
    check_lowering("i,i->", 2, (int[]){1, 1}, (const int64_t[][4]){{7}, {7}});
    check_lowering("bnd,dk->bnk", 2, (int[]){3, 2}, (const int64_t[][4]){{2, 5, 4}, {4, 6}});
    check_lowering("...d,kd->...k", 2, (int[]){3, 2}, (const int64_t[][4]){{2, 5, 4}, {6, 4}});
    /* one operand: transposes and sums */
    check_lowering("ijk->kij", 1, (int[]){3}, (const int64_t[][4]){{2, 3, 4}});
    check_lowering("ijk->ik", 1, (int[]){3}, (const int64_t[][4]){{2, 3, 4}});
    check_lowering("ijk->ki", 1, (int[]){3}, (const int64_t[][4]){{2, 3, 4}});
    check_lowering("ij->", 1, (int[]){2}, (const int64_t[][4]){{2, 3}});
}
END_TEST

START_TEST(test_gpu_refusals) {
    /* diagonals and three operands run on the CPU reference only, with a named
     * reason */
    const char *const eqs[2] = {"ii->i", "ij,jk,kl->il"};
    for (int c = 0; c < 2; c++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        int n = c ? 3 : 1;
        ir_tensor *x[3];
        int64_t d[2] = {3, 3};
        for (int t = 0; t < n; t++) {
            char name[16];
            snprintf(name, sizeof name, "x%d", t);
            x[t] = th_named(g, name, TCI_DTYPE_FLOAT, 2, d, NULL);
        }
        ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
        ir_node *node = th_node_io(g, "e", "Einsum", 12, x, n, &y, 1);
        th_attr_string(g, node, "equation", eqs[c]);
        th_graph_io(g, x, n, &y, 1);
        plan *p = NULL;
        ck_assert_tci_error(th_plan_for_gpu(g, &p), TCI_ERR_UNSUPPORTED,
                            c ? "3 operands has no GPU path" : "(a diagonal) has no GPU path");
        ir_graph_destroy(g);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("einsum");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_infer);
    tcase_add_test(tc, test_reference);
    tcase_add_test(tc, test_gpu_lowering);
    tcase_add_test(tc, test_gpu_refusals);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
