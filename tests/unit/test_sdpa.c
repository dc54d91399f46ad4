/* Attention (ONNX's own op): what the ONNX node cases do not reach. Hand-computed scores and
 * their qk_matmul_output modes, fully masked rows of a float mask (zeros) beside rows masked
 * only by a finite fill (uniform), a mask shorter than the keys, softmax_precision below fp32,
 * the present states of 3-D K and V, shape inference with unknown dims, and every refusal. */
#include <math.h>

#include "harness.h"
#include "layers/op.h"
#include "util/half.h"

#define F TCI_DTYPE_FLOAT
#define B TCI_DTYPE_BOOL
#define NONE ((tci_tensor){.dtype = TCI_DTYPE_UNDEFINED})

/* One query (1, 0) against keys (1, 0) and (0, 1), head size 2; V holds 1 and 0, so Y is the
 * first key's probability. */
static const float q1[] = {1, 0}, k2[] = {1, 0, 0, 1}, v2[] = {1, 0};
static const int64_t q1d[] = {1, 1, 1, 2}, k2d[] = {1, 1, 2, 2}, v2d[] = {1, 1, 2, 1};

static void hand_inputs(tci_tensor *in) {
    in[0] = th_tensor(F, 4, q1d, q1);
    in[1] = th_tensor(F, 4, k2d, k2);
    in[2] = th_tensor(F, 4, v2d, v2);
}

static float first_key_probability(float s0, float s1) {
    return 1.0f / (1.0f + expf(s1 - s0));
}

START_TEST(test_sdpa_hand_scores_and_modes) {
    /* scale 1/sqrt(2) by default; softcap 1 gives tanh of the scaled scores. Mode 0 is the raw
     * product (the spec's text and its function body; the reference op of onnx 1.23 returns
     * the softcapped scores there, which no node case checks) */
    const float s = 1.0f / sqrtf(2.0f);
    const float raw[] = {s, 0}, capped[] = {tanhf(s), 0};
    for (int mode = 0; mode < 4; mode++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "Attention", 23, 3, 4);
        th_attr_float(g, n, "softcap", 1.0f);
        th_attr_int(g, n, "qk_matmul_output_mode", mode);
        n->outputs[1] = n->outputs[2] = NULL;
        tci_tensor in[3], out[4];
        hand_inputs(in);
        ck_assert_tci_ok(th_run(g, n, in, out));
        const float p = first_key_probability(capped[0], capped[1]);
        const float probs[] = {p, 1 - p};
        const float *want = mode == 0 ? raw : mode == 3 ? probs : capped;
        const int64_t yd[] = {1, 1, 1, 1}, qkd[] = {1, 1, 1, 2};
        th_assert_dims(&out[0], 4, yd);
        th_assert_dims(&out[3], 4, qkd);
        th_assert_near(out[0].data, &p, 1, 1e-6f);
        th_assert_near(out[3].data, want, 2, 1e-6f);
        th_free(out, 4);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_sdpa_scale_attribute) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Attention", 24, 3, 1);
    th_attr_float(g, n, "scale", 2.0f);
    tci_tensor in[3], out[1];
    hand_inputs(in);
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want = first_key_probability(2.0f, 0.0f);
    th_assert_near(out[0].data, &want, 1, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_sdpa_float_mask_rows) {
    /* two queries over two keys, float mask rows: (-inf, -inf) is fully masked, so Y's row and
     * mode 3's are zeros, not NaN, even where the query's inf makes its scores inf and NaN (ONNX
     * decides on the bias); (-1e30, -1e30) is a finite fill, so the scores tie and the row is
     * the mean of V */
    const float q[] = {INFINITY, 0, 1, 0}, mask[] = {-INFINITY, -INFINITY, -1e30f, -1e30f};
    const int64_t qd[] = {1, 1, 2, 2}, md[] = {2, 2};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Attention", 23, 4, 4);
    th_attr_int(g, n, "qk_matmul_output_mode", 3);
    n->outputs[1] = n->outputs[2] = NULL;
    tci_tensor in[4], out[4];
    hand_inputs(in);
    in[0] = th_tensor(F, 4, qd, q);
    in[3] = th_tensor(F, 2, md, mask);
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float y[] = {0, 0.5f}, probs[] = {0, 0, 0.5f, 0.5f};
    th_assert_near(out[0].data, y, 2, 1e-6f);
    th_assert_near(out[3].data, probs, 4, 1e-6f);
    th_free(out, 4);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_sdpa_short_mask_and_window) {
    /* a bool mask of one key over two: the second key is masked, Y is V's first value. Then
     * Attention-25's right window 0 without a mask: key 1 lies right of query 0 */
    const uint8_t keep[] = {1};
    const int64_t md[] = {1};
    for (int window = 0; window < 2; window++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "Attention", window ? 25 : 23, window ? 3 : 4, 1);
        if (window) th_attr_int(g, n, "right_window_size", 0);
        tci_tensor in[4], out[1];
        hand_inputs(in);
        if (!window) in[3] = th_tensor(B, 1, md, keep);
        ck_assert_tci_ok(th_run(g, n, in, out));
        const float want = 1.0f;
        th_assert_near(out[0].data, &want, 1, 1e-6f);
        th_free(out, 1);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_sdpa_softmax_precision) {
    /* bfloat16: the scores and the probabilities are rounded to it (mode 3 shows them); float:
     * they are not (the probability of the hand case has bits below bfloat16's) */
    for (int bf16 = 0; bf16 < 2; bf16++) {
        ir_graph *g;
        ck_assert_tci_ok(ir_graph_create(&g));
        ir_node *n = th_node(g, "Attention", 23, 3, 4);
        th_attr_int(g, n, "qk_matmul_output_mode", 3);
        th_attr_int(g, n, "softmax_precision", bf16 ? TCI_DTYPE_BFLOAT16 : TCI_DTYPE_FLOAT);
        n->outputs[1] = n->outputs[2] = NULL;
        tci_tensor in[3], out[4];
        hand_inputs(in);
        ck_assert_tci_ok(th_run(g, n, in, out));
        const float *p = out[3].data;
        const float exact = first_key_probability(1.0f / sqrtf(2.0f), 0.0f);
        th_assert_near(p, &exact, 1, bf16 ? 4e-3f : 1e-6f);
        bool representable = bfloat16_to_float(float_to_bfloat16(p[0])) == p[0];
        ck_assert_int_eq(representable, bf16);
        th_free(out, 4);
        ir_graph_destroy(g);
    }
}
END_TEST

START_TEST(test_sdpa_present_from_3d) {
    /* 3-D K (batch 1, 2 tokens, 2 heads x 1) and a past of 1 position: present_key is
     * (1, 2 heads, 3 positions, 1), the past first, then each head's tokens */
    const float q[] = {1, 1}, k[] = {10, 20, 11, 21}, v[] = {1, 2, 3, 4}, past[] = {-1, -2};
    const int64_t qd[] = {1, 1, 2}, kd[] = {1, 2, 2}, pd[] = {1, 2, 1, 1};
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Attention", 23, 6, 3);
    th_attr_int(g, n, "q_num_heads", 2);
    th_attr_int(g, n, "kv_num_heads", 2);
    th_attr_float(g, n, "scale", 0.0f); /* every score 0: Y is the mean of each head's values */
    tci_tensor in[6] = {th_tensor(F, 3, qd, q),      th_tensor(F, 3, kd, k),
                        th_tensor(F, 3, kd, v),      NONE,
                        th_tensor(F, 4, pd, past), th_tensor(F, 4, pd, past)},
               out[3];
    ck_assert_tci_ok(th_run(g, n, in, out));
    const int64_t presd[] = {1, 2, 3, 1}, yd[] = {1, 1, 2};
    const float pk[] = {-1, 10, 11, -2, 20, 21}, pv[] = {-1, 1, 3, -2, 2, 4};
    const float y[] = {1.0f, 4.0f / 3.0f};
    th_assert_dims(&out[0], 3, yd);
    th_assert_dims(&out[1], 4, presd);
    th_assert_near(out[1].data, pk, 6, 0.0f);
    th_assert_near(out[2].data, pv, 6, 0.0f);
    th_assert_near(out[0].data, y, 2, 1e-6f);
    th_free(out, 3);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_sdpa_infer_unknown) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Attention", 23, 6, 4);
    th_attr_int(g, n, "q_num_heads", 8);
    th_attr_int(g, n, "kv_num_heads", 2);
    const int64_t qd[] = {-1, -1, 64}, kd[] = {-1, -1, 16}, vd[] = {-1, -1, 32},
                  pkd[] = {-1, 2, 5, 8}, pvd[] = {-1, 2, 5, 16};
    tci_tensor q = th_shape_only(F, 3, qd), k = th_shape_only(F, 3, kd),
               v = th_shape_only(F, 3, vd), pk = th_shape_only(F, 4, pkd),
               pv = th_shape_only(F, 4, pvd), out[4];
    ck_assert_tci_ok(th_infer(g, n, (const tci_tensor *[]){&q, &k, &v, NULL, &pk, &pv}, out));
    const int64_t yd[] = {-1, -1, 128}, pkod[] = {-1, 2, -1, 8}, pvod[] = {-1, 2, -1, 16},
                  qkd[] = {-1, 8, -1, -1};
    th_assert_dims(&out[0], 3, yd);
    th_assert_dims(&out[1], 4, pkod);
    th_assert_dims(&out[2], 4, pvod);
    th_assert_dims(&out[3], 4, qkd);
    ir_graph_destroy(g);
}
END_TEST

/* Runs the hand case at opset with attribute attr = value (attr NULL: none), the mask (NULL:
 * none) and nonpad_kv_seqlen (< 0: none). */
static tci_status run_hand(int opset, const char *attr, int64_t value, const tci_tensor *mask,
                           int64_t nonpad) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    int nin = nonpad >= 0 ? 7 : mask ? 4 : 3;
    ir_node *n = th_node(g, "Attention", opset, nin, 1);
    if (attr) th_attr_int(g, n, attr, value);
    tci_tensor in[7] = {NONE, NONE, NONE, NONE, NONE, NONE, NONE}, out[1];
    hand_inputs(in);
    if (mask) in[3] = *mask;
    const int64_t nd[] = {1};
    if (nonpad >= 0) in[6] = th_tensor(TCI_DTYPE_INT64, 1, nd, &nonpad);
    tci_status st = th_run(g, n, in, out);
    if (st == TCI_OK) th_free(out, 1);
    ir_graph_destroy(g);
    return st;
}

START_TEST(test_sdpa_attribute_errors) {
    ck_assert_tci_ok(run_hand(23, "q_num_heads", 1, NULL, -1));
    ck_assert_tci_error(run_hand(23, "q_num_heads", 2, NULL, -1), TCI_ERR_INVALID_MODEL,
                        "q_num_heads 2 / kv_num_heads 0 differ from the heads of the 4-D Q");
    ck_assert_tci_error(run_hand(25, "q_num_heads", 1, NULL, -1), TCI_ERR_INVALID_MODEL,
                        "q_num_heads and kv_num_heads are for 3-D Q, K and V only");
    ck_assert_tci_error(run_hand(23, "kv_num_heads", 0, NULL, -1), TCI_ERR_INVALID_MODEL,
                        "kv_num_heads is 0; must be >= 1");
    ck_assert_tci_error(run_hand(23, "is_causal", 2, NULL, -1), TCI_ERR_INVALID_MODEL,
                        "'is_causal' must be 0 or 1");
    ck_assert_tci_error(run_hand(23, "qk_matmul_output_mode", 4, NULL, -1), TCI_ERR_INVALID_MODEL,
                        "qk_matmul_output_mode is 4");
    ck_assert_tci_error(run_hand(23, "softmax_precision", 7, NULL, -1), TCI_ERR_INVALID_MODEL,
                        "softmax_precision is 7");
    ck_assert_tci_error(run_hand(24, "left_window_size", 2, NULL, -1), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'left_window_size'");
    ck_assert_tci_error(run_hand(25, "right_window_size", -2, NULL, -1), TCI_ERR_INVALID_MODEL,
                        "right_window_size is -2");
    ck_assert_tci_error(run_hand(23, "window", 1, NULL, -1), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'window'");
    ck_assert_tci_error(run_hand(22, NULL, 0, NULL, -1), TCI_ERR_UNSUPPORTED, "from opset 23");
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Attention", 23, 3, 1);
    th_attr_float(g, n, "softcap", -1.0f);
    tci_tensor in[3], out[1];
    hand_inputs(in);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL, "softcap is -1");
    ir_graph_destroy(g);
    ck_assert_tci_ok(ir_graph_create(&g));
    n = th_node(g, "Attention", 23, 3, 1);
    th_attr_float(g, n, "scale", -0.5f);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL, "scale is -0.5");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_sdpa_input_errors) {
    /* masks */
    const int32_t imask[] = {0, 0};
    const float fmask[] = {0, 0, 0};
    const int64_t m2[] = {2}, m3[] = {3}, m31[] = {3, 2};
    tci_tensor mask = th_tensor(TCI_DTYPE_INT32, 1, m2, imask);
    ck_assert_tci_error(run_hand(23, NULL, 0, &mask, -1), TCI_ERR_UNSUPPORTED,
                        "attn_mask has dtype int32");
    mask = th_tensor(F, 1, m3, fmask);
    ck_assert_tci_error(run_hand(23, NULL, 0, &mask, -1), TCI_ERR_INVALID_MODEL,
                        "attn_mask of shape 3 does not broadcast");
    mask = th_tensor(F, 2, m31, fmask);
    ck_assert_tci_error(run_hand(23, NULL, 0, &mask, -1), TCI_ERR_INVALID_MODEL,
                        "attn_mask of shape 3x2 does not broadcast");
    /* nonpad_kv_seqlen: opset 24 on, within K's positions */
    ck_assert_tci_ok(run_hand(24, NULL, 0, NULL, 2));
    ck_assert_tci_error(run_hand(24, NULL, 0, NULL, 3), TCI_ERR_INVALID_ARGUMENT,
                        "nonpad_kv_seqlen[0] is 3; must be within 0..2");
    ck_assert_tci_error(run_hand(23, NULL, 0, NULL, 2), TCI_ERR_INVALID_MODEL,
                        "has 7 inputs, expected 3 to 6");

    ir_graph *g;
    tci_tensor in[7] = {NONE, NONE, NONE, NONE, NONE, NONE, NONE}, out[3];
    hand_inputs(in);
    const float past[2] = {0};
    const int64_t pd[] = {1, 1, 1, 2}, nd[] = {1}, n1 = 1;
    /* past_key alone */
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "Attention", 23, 5, 1);
    in[4] = th_tensor(F, 4, pd, past);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "past_key and past_value must be given together");
    ir_graph_destroy(g);
    /* nonpad_kv_seqlen with present outputs */
    ck_assert_tci_ok(ir_graph_create(&g));
    n = th_node(g, "Attention", 24, 7, 3);
    in[4] = NONE;
    in[6] = th_tensor(TCI_DTYPE_INT64, 1, nd, &n1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "nonpad_kv_seqlen (an external cache) does not go with "
                        "present_key/present_value");
    ir_graph_destroy(g);

    /* shapes: ranks, heads, head sizes */
    const float x[24] = {0};
    const int64_t q3[] = {1, 1, 6}, k3[] = {1, 2, 4}, q4h3[] = {1, 3, 1, 2}, k4h2[] = {1, 2, 2, 2},
                  k4d3[] = {1, 1, 2, 3};
    struct {
        int qr, kr;
        const int64_t *qd, *kd;
        int64_t q_heads, kv_heads;
        const char *want;
    } bad[] = {
        {3, 4, q3, k4h2, 0, 0, "Q, K and V have ranks 3, 4 and 4"},
        {3, 3, q3, k3, 0, 0, "need the attributes q_num_heads and kv_num_heads"},
        {3, 3, q3, k3, 4, 2, "Q's hidden size 6 is not a multiple of q_num_heads 4"},
        {3, 3, q3, k3, 3, 2, "3 query heads are not a multiple of 2 K/V heads"},
        {4, 4, q4h3, k4h2, 0, 0, "3 query heads are not a multiple of 2 K/V heads"},
        {4, 4, q1d, k4d3, 0, 0, "Q's head size 2 differs from K's 3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_tci_ok(ir_graph_create(&g));
        n = th_node(g, "Attention", 23, 3, 1);
        if (bad[i].q_heads) th_attr_int(g, n, "q_num_heads", bad[i].q_heads);
        if (bad[i].kv_heads) th_attr_int(g, n, "kv_num_heads", bad[i].kv_heads);
        tci_tensor qkv[3] = {th_tensor(F, bad[i].qr, bad[i].qd, x),
                             th_tensor(F, bad[i].kr, bad[i].kd, x),
                             th_tensor(F, bad[i].kr, bad[i].kd, x)};
        ck_assert_tci_error(th_run(g, n, qkv, out), TCI_ERR_INVALID_MODEL, bad[i].want);
        ir_graph_destroy(g);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("sdpa");
    TCase *t = tcase_create("attention");
    tcase_add_test(t, test_sdpa_hand_scores_and_modes);
    tcase_add_test(t, test_sdpa_scale_attribute);
    tcase_add_test(t, test_sdpa_float_mask_rows);
    tcase_add_test(t, test_sdpa_short_mask_and_window);
    tcase_add_test(t, test_sdpa_softmax_precision);
    tcase_add_test(t, test_sdpa_present_from_3d);
    tcase_add_test(t, test_sdpa_infer_unknown);
    tcase_add_test(t, test_sdpa_attribute_errors);
    tcase_add_test(t, test_sdpa_input_errors);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
