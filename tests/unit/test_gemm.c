/* Gemm and MatMul: hand-computed results, opset differences, shape inference, error paths. */
#include <math.h>

#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

/* A (2x3) and B (3x2) with A*B = [[4, 5], [10, 11]] */
static const float mat_a[] = {1, 2, 3, 4, 5, 6};
static const float mat_a_t[] = {1, 4, 2, 5, 3, 6};
static const float mat_b[] = {1, 0, 0, 1, 1, 1};
static const float mat_b_t[] = {1, 0, 1, 0, 1, 1};
static const int64_t dims_23[] = {2, 3}, dims_32[] = {3, 2};


/* ---- Gemm ---- */

START_TEST(test_gemm_alpha_beta_bias_row) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Gemm", 13, 3, 1);
    th_attr_float(g, n, "alpha", 2.0f);
    th_attr_float(g, n, "beta", 0.5f);
    const float c[] = {10, 20};
    const int64_t cd[] = {2};
    tci_tensor in[3] = {th_tensor(F, 2, dims_23, mat_a), th_tensor(F, 2, dims_32, mat_b),
                        th_tensor(F, 1, cd, c)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const int64_t want_dims[] = {2, 2};
    th_assert_dims(&out[0], 2, want_dims);
    const float want[] = {13, 20, 25, 32};
    th_assert_near(out[0].data, want, 4, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

/* The pattern role a pass moves row permutations through (OP_PATTERN_ROWS): row i of the
 * result from row i of A alone, so not under transA, nor with a C of more than one row that
 * beta keeps. */
START_TEST(test_gemm_rows_role) {
    const struct {
        int trans_a, c_rank;
        int64_t c_rows;
        float beta;
        bool rows;
    } cases[] = {
        {0, 0, 0, 1.0f, true},  /* no C */
        {0, 1, 0, 1.0f, true},  /* C (N) */
        {0, 2, 1, 1.0f, true},  /* C (1, N) */
        {0, 2, 4, 1.0f, false}, /* C (M, N) */
        {0, 2, 4, 0.0f, true},  /* beta 0: C is not read */
        {1, 1, 0, 1.0f, false}, /* transA */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "Gemm", 13, cases[i].c_rank ? 3 : 2, 1);
        th_attr_int(g, n, "transA", cases[i].trans_a);
        th_attr_float(g, n, "beta", cases[i].beta);
        if (cases[i].c_rank) {
            ir_tensor *c = n->inputs[2];
            c->dtype = F;
            c->rank = cases[i].c_rank;
            c->dims[0] = cases[i].c_rank == 2 ? cases[i].c_rows : 3;
            c->dims[c->rank - 1] = 3;
        }
        ck_assert_tci_ok(op_prepare_node(n, g->arena));
        op_pattern pat = {0};
        n->desc->pattern(n, &pat);
        ck_assert_msg((pat.kind == OP_PATTERN_ROWS) == cases[i].rows, "case %zu", i);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_gemm_transposes) {
    const float want[] = {4, 5, 10, 11};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            ir_graph *g;
            ck_assert_tci_ok(ir_graph_create(&g));
            ir_node *n = th_node(g, "Gemm", 11, 2, 1);
            th_attr_int(g, n, "transA", ta);
            th_attr_int(g, n, "transB", tb);
            tci_tensor in[2] = {th_tensor(F, 2, ta ? dims_32 : dims_23, ta ? mat_a_t : mat_a),
                                th_tensor(F, 2, tb ? dims_23 : dims_32, tb ? mat_b_t : mat_b)};
            tci_tensor out[1];
            ck_assert_tci_ok(th_run(g, n, in, out));
            th_assert_near(out[0].data, want, 4, 1e-6f);
            th_free(out, 1);
            ir_graph_destroy(g);
        }
}
END_TEST

START_TEST(test_gemm_bias_broadcast_shapes) {
    /* C as scalar, (1), (2,1), (1,2), (2,2): Y = AB + C */
    const float c_vals[] = {1, 2, 3, 4};
    const int64_t shapes[][2] = {{0, 0}, {1, 0}, {2, 1}, {1, 2}, {2, 2}};
    const int ranks[] = {0, 1, 2, 2, 2};
    const float want[][4] = {
        {5, 6, 11, 12}, {5, 6, 11, 12}, {5, 6, 12, 13}, {5, 7, 11, 13}, {5, 7, 13, 15}};
    for (int s = 0; s < 5; s++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "Gemm", 7, 3, 1);
        tci_tensor in[3] = {th_tensor(F, 2, dims_23, mat_a), th_tensor(F, 2, dims_32, mat_b),
                            th_tensor(F, ranks[s], shapes[s], c_vals)};
        tci_tensor out[1];
        ck_assert_tci_ok(th_run(g, n, in, out));
        th_assert_near(out[0].data, want[s], 4, 1e-6f);
        th_free(out, 1);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_gemm_beta_zero_ignores_c) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Gemm", 13, 3, 1);
    th_attr_float(g, n, "beta", 0.0f);
    const float c[] = {NAN};
    const int64_t cd[] = {1};
    tci_tensor in[3] = {th_tensor(F, 2, dims_23, mat_a), th_tensor(F, 2, dims_32, mat_b),
                        th_tensor(F, 1, cd, c)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[] = {4, 5, 10, 11};
    th_assert_near(out[0].data, want, 4, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_gemm_empty_k_and_m) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Gemm", 13, 3, 1);
    th_attr_float(g, n, "beta", 3.0f);
    const float c[] = {1, 2}, dummy[1] = {0};
    const int64_t ad[] = {2, 0}, bd[] = {0, 2}, cd[] = {2};
    tci_tensor in[3] = {th_tensor(F, 2, ad, dummy), th_tensor(F, 2, bd, dummy),
                        th_tensor(F, 1, cd, c)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[] = {3, 6, 3, 6};
    th_assert_near(out[0].data, want, 4, 0);
    th_free(out, 1);

    /* M = 0: an empty output, nothing computed */
    ir_node *m = th_node(g, "Gemm", 13, 2, 1);
    const int64_t ad0[] = {0, 3};
    tci_tensor in0[2] = {th_tensor(F, 2, ad0, dummy), th_tensor(F, 2, dims_32, mat_b)};
    ck_assert_tci_ok(th_run(g, m, in0, out));
    const int64_t want_dims[] = {0, 2};
    th_assert_dims(&out[0], 2, want_dims);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_gemm_c_required_before_opset_11) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Gemm", 9, 2, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "has 2 inputs, expected 3 to 3");
    ir_node *n11 = th_node(g, "Gemm", 11, 2, 1);
    ck_assert_tci_ok(op_prepare_node(n11, g->arena));
    ck_assert_int_eq(n11->since_version, 11);
    ir_node *n28 = th_node(g, "Gemm", 28, 2, 1);
    ck_assert_tci_ok(op_prepare_node(n28, g->arena));
    ck_assert_int_eq(n28->since_version, 13);
    /* opset 6 had the `broadcast` attribute; not supported */
    ir_node *n6 = th_node(g, "Gemm", 6, 3, 1);
    ck_assert_tci_error(op_prepare_node(n6, g->arena), TCI_ERR_UNSUPPORTED,
                        "older than tcinfer supports (from opset 7)");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_gemm_attribute_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Gemm", 13, 2, 1);
    th_attr_int(g, n, "broadcast", 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'broadcast'");
    ir_node *t = th_node(g, "Gemm", 13, 2, 1);
    th_attr_int(g, t, "transA", 2);
    ck_assert_tci_error(op_prepare_node(t, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'transA' must be 0 or 1, got 2");
    ir_node *a = th_node(g, "Gemm", 13, 2, 1);
    th_attr_int(g, a, "alpha", 2);
    ck_assert_tci_error(op_prepare_node(a, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'alpha' is int, expected float");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_gemm_shape_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t d3[] = {2, 3, 4}, d43[] = {4, 3}, d34[] = {3, 4}, c3[] = {1, 2, 4}, c5[] = {5},
                  c32[] = {3, 2};
    tci_tensor a = th_shape_only(F, 2, dims_23), a3 = th_shape_only(F, 3, d3),
               b = th_shape_only(F, 2, d34), b_bad = th_shape_only(F, 2, d43),
               cr3 = th_shape_only(F, 3, c3), cbad = th_shape_only(F, 1, c5),
               cbad2 = th_shape_only(F, 2, c32), dbl = th_shape_only(TCI_DTYPE_DOUBLE, 2, d34);

    ir_node *n = th_node(g, "Gemm", 13, 2, 1);
    const tci_tensor *in1[] = {&a3, &b};
    ck_assert_tci_error(th_infer(g, n, in1, out), TCI_ERR_INVALID_MODEL,
                        "input A must be 2-D, got rank 3");
    const tci_tensor *in2[] = {&a, &a3};
    ck_assert_tci_error(th_infer(g, n, in2, out), TCI_ERR_INVALID_MODEL,
                        "input B must be 2-D, got rank 3");
    const tci_tensor *in3[] = {&a, &b_bad};
    ck_assert_tci_error(th_infer(g, n, in3, out), TCI_ERR_INVALID_MODEL,
                        "inner dimensions differ: A gives K=3, B gives K=4");
    const tci_tensor *in4[] = {&a, &dbl};
    ck_assert_tci_error(th_infer(g, n, in4, out), TCI_ERR_UNSUPPORTED,
                        "input 1 has unsupported dtype");

    ir_node *c = th_node(g, "Gemm", 13, 3, 1);
    const tci_tensor *in5[] = {&a, &b, &cr3};
    ck_assert_tci_error(th_infer(g, c, in5, out), TCI_ERR_INVALID_MODEL,
                        "input C must have rank <= 2 to broadcast to (M, N), got rank 3");
    const tci_tensor *in6[] = {&a, &b, &cbad};
    ck_assert_tci_error(th_infer(g, c, in6, out), TCI_ERR_INVALID_MODEL,
                        "input C of shape 5 does not broadcast to (M, N) = (2, 4)");
    const tci_tensor *in7[] = {&a, &b, &cbad2};
    ck_assert_tci_error(th_infer(g, c, in7, out), TCI_ERR_INVALID_MODEL,
                        "input C of shape 3x2 does not broadcast to (M, N) = (2, 4)");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_gemm_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const int64_t bd[] = {4, 5}, ad[] = {-1, 3};
    tci_tensor a_unk = th_shape_only(TCI_DTYPE_UNDEFINED, -1, NULL);
    tci_tensor b = th_shape_only(F, 2, bd);
    ir_node *n = th_node(g, "Gemm", 13, 2, 1);
    const tci_tensor *in1[] = {&a_unk, &b};
    ck_assert_tci_ok(th_infer(g, n, in1, out));
    const int64_t want1[] = {-1, 5};
    th_assert_dims(&out[0], 2, want1);
    ck_assert_int_eq(out[0].dtype, F);

    /* transA: M comes from A's second dim, which is known */
    ir_node *t = th_node(g, "Gemm", 13, 2, 1);
    th_attr_int(g, t, "transA", 1);
    th_attr_int(g, t, "transB", 1);
    tci_tensor a = th_shape_only(F, 2, ad), b_unk = th_shape_only(F, -1, NULL);
    const tci_tensor *in2[] = {&a, &b_unk};
    ck_assert_tci_ok(th_infer(g, t, in2, out));
    const int64_t want2[] = {3, -1};
    th_assert_dims(&out[0], 2, want2);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_gemm_blas_size_limit) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Gemm", 13, 2, 1);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    float dummy[1] = {0};
    const int64_t ad[] = {INT64_C(1) << 32, 1}, bd[] = {1, 1}, yd[] = {INT64_C(1) << 32, 1};
    tci_tensor a = th_tensor(F, 2, ad, dummy), b = th_tensor(F, 2, bd, dummy),
               y = th_tensor(F, 2, yd, dummy);
    const tci_tensor *in[] = {&a, &b};
    tci_tensor *out[] = {&y};
    ck_assert_tci_error(n->desc->cpu_forward(n, in, out), TCI_ERR_UNSUPPORTED,
                        "exceed the BLAS int range");
    ir_graph_destroy(g);
}
END_TEST

/* ---- MatMul ---- */

static void run_matmul(int opset, int ra, const int64_t *da, const float *a, int rb,
                       const int64_t *db, const float *b, int want_rank, const int64_t *want_dims,
                       const float *want) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "MatMul", opset, 2, 1);
    tci_tensor in[2] = {th_tensor(F, ra, da, a), th_tensor(F, rb, db, b)};
    tci_tensor out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    th_assert_dims(&out[0], want_rank, want_dims);
    th_assert_near(out[0].data, want, (size_t)tci_tensor_count(&out[0]), 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}

START_TEST(test_matmul_2d) {
    const int64_t wd[] = {2, 2};
    const float want[] = {4, 5, 10, 11};
    run_matmul(1, 2, dims_23, mat_a, 2, dims_32, mat_b, 2, wd, want);
    run_matmul(9, 2, dims_23, mat_a, 2, dims_32, mat_b, 2, wd, want);
    run_matmul(13, 2, dims_23, mat_a, 2, dims_32, mat_b, 2, wd, want);
}
END_TEST

START_TEST(test_matmul_vectors) {
    const float v1[] = {1, 2, 3}, v2[] = {4, 5, 6}, ones[] = {1, 1, 1};
    const int64_t d3[] = {3}, d2[] = {2};
    const float dot[] = {32};
    run_matmul(13, 1, d3, v1, 1, d3, v2, 0, NULL, dot);
    const float vm[] = {2, 2}; /* (3) x (3x2) -> (2) */
    run_matmul(13, 1, d3, ones, 2, dims_32, mat_b, 1, d2, vm);
    const float mv[] = {6, 15}; /* (2x3) x (3) -> (2) */
    run_matmul(13, 2, dims_23, mat_a, 1, d3, ones, 1, d2, mv);
    /* (3) x (2x3x2) -> (2x2): the vector meets every batch matrix */
    const float bb[] = {1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 2, 2};
    const int64_t dbb[] = {2, 3, 2}, w22[] = {2, 2};
    const float vbb[] = {2, 2, 4, 4};
    run_matmul(13, 1, d3, ones, 3, dbb, bb, 2, w22, vbb);
}
END_TEST

START_TEST(test_matmul_batch_broadcast) {
    /* A (2,1,1,2) x B (3,2,1) -> (2,3,1,1): batch dims (2,1) and (3) broadcast to (2,3) */
    const float a[] = {1, 2, 3, 4}, b[] = {1, 0, 0, 1, 1, 1};
    const int64_t da[] = {2, 1, 1, 2}, db[] = {3, 2, 1}, want_dims[] = {2, 3, 1, 1};
    const float want[] = {1, 2, 3, 3, 4, 7};
    run_matmul(13, 4, da, a, 3, db, b, 4, want_dims, want);
    /* one weight matrix for a batch of A: (2,2,3) x (3,2) */
    const float a2[] = {1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1};
    const int64_t da2[] = {2, 2, 3}, wd2[] = {2, 2, 2};
    const float want2[] = {4, 5, 10, 11, 10, 9, 4, 3};
    run_matmul(13, 3, da2, a2, 2, dims_32, mat_b, 3, wd2, want2);
    /* batch dims of 1 on B only: (2,3) x (1,1,3,2) -> (1,1,2,2) */
    const int64_t db3[] = {1, 1, 3, 2}, wd3[] = {1, 1, 2, 2};
    const float want3[] = {4, 5, 10, 11};
    run_matmul(13, 2, dims_23, mat_a, 4, db3, mat_b, 4, wd3, want3);
}
END_TEST

START_TEST(test_matmul_empty_k) {
    const float dummy[1] = {0};
    const int64_t da[] = {2, 0}, db[] = {0, 3}, wd[] = {2, 3};
    const float want[] = {0, 0, 0, 0, 0, 0};
    run_matmul(13, 2, da, dummy, 2, db, dummy, 2, wd, want);
    const int64_t da0[] = {0, 2, 3}, wd0[] = {0, 2, 2};
    run_matmul(13, 3, da0, dummy, 2, dims_32, mat_b, 3, wd0, want);
}
END_TEST

START_TEST(test_matmul_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    ir_node *n = th_node(g, "MatMul", 13, 2, 1);
    const int64_t da[] = {-1, 3, 4}, db[] = {4, -1}, d5[] = {5, 1, 4, 2}, d1[] = {-1, 2, 3, 4};
    tci_tensor a = th_shape_only(F, 3, da), b = th_shape_only(F, 2, db),
               unk = th_shape_only(F, -1, NULL), b5 = th_shape_only(F, 4, d5),
               a1 = th_shape_only(F, 4, d1);
    const tci_tensor *in1[] = {&a, &b};
    ck_assert_tci_ok(th_infer(g, n, in1, out));
    const int64_t w1[] = {-1, 3, -1};
    th_assert_dims(&out[0], 3, w1);
    const tci_tensor *in2[] = {&unk, &b};
    ck_assert_tci_ok(th_infer(g, n, in2, out));
    ck_assert_int_eq(out[0].rank, -1);
    ck_assert_int_eq(out[0].dtype, F);
    /* batch: (-1, 2) vs (5, 1) -> (5, 2) */
    const tci_tensor *in3[] = {&a1, &b5};
    ck_assert_tci_ok(th_infer(g, n, in3, out));
    const int64_t w3[] = {5, 2, 3, 2};
    th_assert_dims(&out[0], 4, w3);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_matmul_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    ir_node *n = th_node(g, "MatMul", 13, 2, 1);
    const int64_t d23[] = {2, 3}, d43[] = {4, 3}, d223[] = {2, 2, 3}, d332[] = {3, 3, 2};
    tci_tensor s = th_shape_only(F, 0, NULL), a = th_shape_only(F, 2, d23),
               b_bad = th_shape_only(F, 2, d43), a3 = th_shape_only(F, 3, d223),
               b3 = th_shape_only(F, 3, d332), i32 = th_shape_only(TCI_DTYPE_INT32, 2, d23);
    const tci_tensor *in1[] = {&s, &a};
    ck_assert_tci_error(th_infer(g, n, in1, out), TCI_ERR_INVALID_MODEL,
                        "operands must have rank >= 1, got ranks 0 and 2");
    const tci_tensor *in2[] = {&a, &b_bad};
    ck_assert_tci_error(th_infer(g, n, in2, out), TCI_ERR_INVALID_MODEL,
                        "inner dimensions differ: 2x3 times 4x3 (K=3 vs 4)");
    const tci_tensor *in3[] = {&a3, &b3};
    ck_assert_tci_error(th_infer(g, n, in3, out), TCI_ERR_INVALID_MODEL,
                        "shapes do not broadcast: dim 0 is 2 vs 3");
    const tci_tensor *in4[] = {&i32, &b3};
    ck_assert_tci_error(th_infer(g, n, in4, out), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype int32");
    ir_node *attr = th_node(g, "MatMul", 13, 2, 1);
    th_attr_int(g, attr, "transA", 1);
    ck_assert_tci_error(op_prepare_node(attr, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'transA'");
    ir_node *arity = th_node(g, "MatMul", 13, 3, 1);
    ck_assert_tci_error(op_prepare_node(arity, g->arena), TCI_ERR_INVALID_MODEL,
                        "has 3 inputs, expected 2 to 2");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_matmul_blas_size_limit) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "MatMul", 13, 2, 1);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    float dummy[1] = {0};
    /* per-batch path (B has batches) and the stacked path (B shared) */
    const int64_t ad[] = {2, INT64_C(1) << 31, 1}, bd[] = {2, 1, 1}, yd[] = {2, INT64_C(1) << 31, 1};
    tci_tensor a = th_tensor(F, 3, ad, dummy), b = th_tensor(F, 3, bd, dummy),
               y = th_tensor(F, 3, yd, dummy);
    const tci_tensor *in[] = {&a, &b};
    tci_tensor *out[] = {&y};
    ck_assert_tci_error(n->desc->cpu_forward(n, in, out), TCI_ERR_UNSUPPORTED,
                        "exceed the BLAS int range");
    const int64_t ad2[] = {1 << 16, 1 << 16, 1}, bd2[] = {1, 1}, yd2[] = {1 << 16, 1 << 16, 1};
    a = th_tensor(F, 3, ad2, dummy);
    b = th_tensor(F, 2, bd2, dummy);
    y = th_tensor(F, 3, yd2, dummy);
    ck_assert_tci_error(n->desc->cpu_forward(n, in, out), TCI_ERR_UNSUPPORTED,
                        "exceed the BLAS int range");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gemm");
    TCase *gemm = tcase_create("gemm");
    tcase_add_test(gemm, test_gemm_alpha_beta_bias_row);
    tcase_add_test(gemm, test_gemm_transposes);
    tcase_add_test(gemm, test_gemm_rows_role);
    tcase_add_test(gemm, test_gemm_bias_broadcast_shapes);
    tcase_add_test(gemm, test_gemm_beta_zero_ignores_c);
    tcase_add_test(gemm, test_gemm_empty_k_and_m);
    tcase_add_test(gemm, test_gemm_c_required_before_opset_11);
    tcase_add_test(gemm, test_gemm_attribute_errors);
    tcase_add_test(gemm, test_gemm_shape_errors);
    tcase_add_test(gemm, test_gemm_infer_unknown);
    tcase_add_test(gemm, test_gemm_blas_size_limit);
    suite_add_tcase(s, gemm);
    TCase *matmul = tcase_create("matmul");
    tcase_add_test(matmul, test_matmul_2d);
    tcase_add_test(matmul, test_matmul_vectors);
    tcase_add_test(matmul, test_matmul_batch_broadcast);
    tcase_add_test(matmul, test_matmul_empty_k);
    tcase_add_test(matmul, test_matmul_infer_unknown);
    tcase_add_test(matmul, test_matmul_errors);
    tcase_add_test(matmul, test_matmul_blas_size_limit);
    suite_add_tcase(s, matmul);
    return test_run_suite(s);
}
