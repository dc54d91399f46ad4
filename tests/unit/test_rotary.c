/* RotaryEmbedding: a quarter turn by hand (halves and interleaved), position_ids of batch 1
 * serving every batch, a 3-D input's heads, shape and value errors. */
#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT
#define I64 TCI_DTYPE_INT64

/* caches of 2 positions, half 2: position 0 turns by 0, position 1 by a quarter turn */
static const float cos2[] = {1, 1, 0, 0}, sin2[] = {0, 0, 1, 1};
static const int64_t cache_d[] = {2, 2};

START_TEST(test_rotary_quarter_turn) {
    const float x[] = {1, 2, 3, 4};
    const int64_t xd[] = {1, 1, 1, 4}, pd[] = {1, 1}, pos[] = {1};
    /* halves (1, 2) and (3, 4): (x1, x2) -> (-x2, x1); interleaved pairs (1, 2), (3, 4) */
    const float want_halves[] = {-3, -4, 1, 2}, want_pairs[] = {-2, 1, -4, 3};
    for (int inter = 0; inter < 2; inter++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "RotaryEmbedding", 23, 4, 1);
        th_attr_int(g, n, "interleaved", inter);
        tci_tensor in[4] = {th_tensor(F, 4, xd, x), th_tensor(F, 2, cache_d, cos2),
                            th_tensor(F, 2, cache_d, sin2), th_tensor(I64, 2, pd, pos)},
                   out[1];
        ck_assert_tci_ok(th_run(g, n, in, out));
        th_assert_dims(&out[0], 4, xd);
        th_assert_near(out[0].data, inter ? want_pairs : want_halves, 4, 0.0f);
        th_free(out, 1);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_rotary_3d_batch1_positions_partial) {
    /* X (2 batches, 2 tokens, 2 heads x 4); rotary_embedding_dim 2 turns values 0 and 1 of each
     * head, copies 2 and 3; position_ids (1, 2) = (0, 1) serve both batches */
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i + 1);
    const float cos1[] = {1, 0}, sin1[] = {0, 1};
    const int64_t xd[] = {2, 2, 8}, cd[] = {2, 1}, pd[] = {1, 2}, pos[] = {0, 1};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "RotaryEmbedding", 23, 4, 1);
    th_attr_int(g, n, "num_heads", 2);
    th_attr_int(g, n, "rotary_embedding_dim", 2);
    tci_tensor in[4] = {th_tensor(F, 3, xd, x), th_tensor(F, 2, cd, cos1),
                        th_tensor(F, 2, cd, sin1), th_tensor(I64, 2, pd, pos)},
               out[1];
    ck_assert_tci_ok(th_run(g, n, in, out));
    float want[32];
    for (int i = 0; i < 32; i++) want[i] = x[i];
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 2; h++) { /* token 1 of each batch: (a, c) -> (-c, a) */
            int at = b * 16 + 8 + h * 4;
            want[at] = -x[at + 1];
            want[at + 1] = x[at];
        }
    th_assert_near(out[0].data, want, 32, 0.0f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_rotary_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "RotaryEmbedding", 23, 3, 1);
    const int64_t xd[] = {-1, 8, -1, 64}, cd[] = {-1, -1, 32};
    tci_tensor x = th_shape_only(F, 4, xd), c = th_shape_only(F, 3, cd), out[1];
    ck_assert_tci_ok(th_infer(g, n, (const tci_tensor *[]){&x, &c, &c}, out));
    th_assert_dims(&out[0], 4, xd);
    ir_graph_destroy(g);
}
END_TEST

/* Runs a RotaryEmbedding of X xd (rank xr) with the quarter-turn caches and position ids pos
 * (one per token of batch 1), attr set to value unless attr is NULL; returns the status. */
static tci_status run_rotary(int xr, const int64_t *xd, const char *attr, int64_t value,
                             int64_t position) {
    static float x[64];
    const int64_t pd[] = {1, 1};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "RotaryEmbedding", 23, 4, 1);
    if (attr) th_attr_int(g, n, attr, value);
    tci_tensor in[4] = {th_tensor(F, xr, xd, x), th_tensor(F, 2, cache_d, cos2),
                        th_tensor(F, 2, cache_d, sin2), th_tensor(I64, 2, pd, &position)},
               out[1];
    tci_status st = th_run(g, n, in, out);
    if (st == TCI_OK) th_free(out, 1);
    ir_graph_destroy(g);
    return st;
}

START_TEST(test_rotary_errors) {
    const int64_t x4[] = {1, 1, 1, 4}, x3[] = {1, 1, 8}, x2[] = {1, 4};
    ck_assert_tci_ok(run_rotary(4, x4, NULL, 0, 1));
    ck_assert_tci_error(run_rotary(4, x4, NULL, 0, 2), TCI_ERR_INVALID_ARGUMENT,
                        "position id 2 (batch 0, token 0) is outside the caches' 2 positions");
    ck_assert_tci_error(run_rotary(4, x4, NULL, 0, -1), TCI_ERR_INVALID_ARGUMENT,
                        "position id -1");
    ck_assert_tci_error(run_rotary(3, x3, NULL, 0, 0), TCI_ERR_INVALID_MODEL,
                        "a 3-D X needs the attribute num_heads");
    ck_assert_tci_error(run_rotary(3, x3, "num_heads", 3, 0), TCI_ERR_INVALID_MODEL,
                        "hidden size 8 is not a multiple of num_heads 3");
    ck_assert_tci_ok(run_rotary(3, x3, "num_heads", 2, 0));
    ck_assert_tci_error(run_rotary(4, x4, "num_heads", 2, 0), TCI_ERR_INVALID_MODEL,
                        "num_heads is 2 but the 4-D X has 1 heads");
    ck_assert_tci_error(run_rotary(4, x4, "rotary_embedding_dim", 3, 0), TCI_ERR_INVALID_MODEL,
                        "rotary_embedding_dim is 3; must be even");
    ck_assert_tci_error(run_rotary(4, x4, "rotary_embedding_dim", 6, 0), TCI_ERR_INVALID_MODEL,
                        "rotary_embedding_dim 6 does not fit head size 4");
    /* the caches' last dim (2) is half of a full rotation of 4, not of 2 */
    ck_assert_tci_error(run_rotary(4, x4, "rotary_embedding_dim", 2, 0), TCI_ERR_INVALID_MODEL,
                        "cos_cache has shape 2x2; expected (max_position_id + 1, n)");
    ck_assert_tci_error(run_rotary(4, x4, "interleaved", 2, 0), TCI_ERR_INVALID_MODEL,
                        "'interleaved' must be 0 or 1");
    ck_assert_tci_error(run_rotary(4, x4, "scale", 2, 0), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'scale'");
    ck_assert_tci_error(run_rotary(2, x2, NULL, 0, 0), TCI_ERR_INVALID_MODEL,
                        "X has rank 2");
}
END_TEST

START_TEST(test_rotary_cache_shape_without_positions) {
    /* without position_ids the caches are (batch, seq, half): a 2-D one is refused */
    const float x[4] = {0};
    const int64_t xd[] = {1, 1, 1, 4};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "RotaryEmbedding", 23, 3, 1);
    tci_tensor in[3] = {th_tensor(F, 4, xd, x), th_tensor(F, 2, cache_d, cos2),
                        th_tensor(F, 2, cache_d, sin2)},
               out[1];
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "expected (batch, seq, n) without position_ids");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rotary");
    TCase *t = tcase_create("rotary");
    tcase_add_test(t, test_rotary_quarter_turn);
    tcase_add_test(t, test_rotary_3d_batch1_positions_partial);
    tcase_add_test(t, test_rotary_infer_unknown);
    tcase_add_test(t, test_rotary_errors);
    tcase_add_test(t, test_rotary_cache_shape_without_positions);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
