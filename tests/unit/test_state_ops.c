/* The recurrent-state and KV-cache ops (linear_attention.c: CausalConvWithState, LinearAttention;
 * index.c: TensorScatter), DeformConv (deform_conv.c), SwiGLU (unary.c) and BitCast (cast.c):
 * values worked by hand, every attribute and shape error with its message, and the GPU planner
 * refusing them naming the node. ONNX's node cases and ops_vs_onnxruntime.py cover the rest. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

START_TEST(test_bit_cast) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float x[2] = {1.0f, -0.0f};
    tci_tensor in = th_tensor(F, 1, (const int64_t[]){2}, x);
    ir_node *n = th_node(g, "BitCast", 26, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_INT32);
    ck_assert_tci_ok(th_run(g, n, &in, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_INT32);
    ck_assert_int_eq(((int32_t *)out[0].data)[0], 0x3f800000);
    ck_assert_int_eq(((int32_t *)out[0].data)[1], INT32_MIN);
    th_free(out, 1);
    n = th_node(g, "BitCast", 26, 1, 1);
    th_attr_int(g, n, "to", TCI_DTYPE_INT64);
    ck_assert_tci_error(th_run(g, n, &in, out), TCI_ERR_INVALID_MODEL,
                        "BitCast keeps the bit width: input float has 32 bits, 'to' int64 64");
    n = th_node(g, "BitCast", 26, 1, 1);
    th_attr_int(g, n, "to", 12); /* UINT32 */
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "attribute 'to' value 12 (UINT32) is not supported");
    n = th_node(g, "BitCast", 26, 1, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'to' is required");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_swiglu) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float a[3] = {0.0f, 2.0f, -1.0f}, b[3] = {5.0f, 3.0f, 2.0f};
    tci_tensor in[2] = {th_tensor(F, 1, (const int64_t[]){3}, a),
                        th_tensor(F, 1, (const int64_t[]){3}, b)};
    ir_node *n = th_node(g, "SwiGLU", 28, 2, 1);
    th_attr_float(g, n, "alpha", 0.5f);
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[3] = {0.0f, 2.0f / (1.0f + expf(-1.0f)) * 3.0f,
                           -1.0f / (1.0f + expf(0.5f)) * 2.0f};
    th_assert_near(out[0].data, want, 3, 1e-6f);
    th_free(out, 1);
    in[1] = th_tensor(F, 2, (const int64_t[]){1, 3}, b);
    n = th_node(g, "SwiGLU", 28, 2, 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "A 3 and B 1x3 differ in shape (SwiGLU does not broadcast)");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_tensor_scatter) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    /* cache (2, 3, 1), update (2, 2, 1), axis 1: batch 0 from 1 (linear), batch 1 from 2
     * wrapping to 0 (circular) */
    const float cache[6] = {0, 0, 0, 0, 0, 0}, update[4] = {1, 2, 3, 4};
    const int64_t at[2] = {1, 2};
    tci_tensor in[3] = {th_tensor(F, 3, (const int64_t[]){2, 3, 1}, cache),
                        th_tensor(F, 3, (const int64_t[]){2, 2, 1}, update),
                        th_tensor(TCI_DTYPE_INT64, 1, (const int64_t[]){2}, at)};
    ir_node *n = th_node(g, "TensorScatter", 24, 3, 1);
    th_attr_int(g, n, "axis", 1);
    th_attr_string(g, n, "mode", "circular");
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[6] = {0, 1, 2, 4, 0, 3};
    th_assert_near(out[0].data, want, 6, 0.0f);
    th_free(out, 1);
    n = th_node(g, "TensorScatter", 24, 3, 1);
    th_attr_int(g, n, "axis", 1);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_ARGUMENT,
                        "write index 2 of batch entry 1: 2 rows do not fit a cache of 3 in mode "
                        "'linear'");
    n = th_node(g, "TensorScatter", 24, 3, 1);
    th_attr_int(g, n, "axis", 0);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "axis 0 is the batch axis; the sequence axis comes after it");
    n = th_node(g, "TensorScatter", 24, 3, 1);
    th_attr_int(g, n, "axis", 2); /* the update's dim 1 (2) differs from the cache's (3) */
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "update 2x2x1 does not fit past_cache 2x3x1");
    n = th_node(g, "TensorScatter", 24, 3, 1);
    th_attr_string(g, n, "mode", "ring");
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'mode' is 'ring'; expected 'linear' or 'circular'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_deform_conv) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    /* a 1x1 kernel over a 2x2 image: output (i, j) samples x at (i, j) + offset */
    const float x[4] = {1, 2, 3, 4}, w[1] = {2};
    const float offset[8] = {0.5f, 0, 0, -2, /* dy */ 0, 0.5f, 0.25f, 0 /* dx */};
    const float mask[4] = {1, 1, 0.5f, 1}, bias[1] = {0.25f};
    tci_tensor in[5] = {th_tensor(F, 4, (const int64_t[]){1, 1, 2, 2}, x),
                        th_tensor(F, 4, (const int64_t[]){1, 1, 1, 1}, w),
                        th_tensor(F, 4, (const int64_t[]){1, 2, 2, 2}, offset),
                        th_tensor(F, 1, (const int64_t[]){1}, bias),
                        th_tensor(F, 4, (const int64_t[]){1, 1, 2, 2}, mask)};
    ir_node *n = th_node(g, "DeformConv", 22, 5, 1);
    ck_assert_tci_ok(th_run(g, n, in, out));
    /* (0.5, 0): 2; (0, 1.5): half of x[0][1] = 1 (the other neighbour is outside);
     * (1, 0.25): 3.25 with mask 0.5; (-1, 1): outside */
    const float want[4] = {2 * 2 + 0.25f, 2 * 1 + 0.25f, 2 * 3.25f * 0.5f + 0.25f, 0.25f};
    th_assert_near(out[0].data, want, 4, 1e-6f);
    th_free(out, 1);
    in[2] = th_tensor(F, 4, (const int64_t[]){1, 4, 2, 2}, NULL);
    n = th_node(g, "DeformConv", 22, 3, 1);
    ck_assert_tci_error(th_infer(g, n, (const tci_tensor *const[]){&in[0], &in[1], &in[2]}, out),
                        TCI_ERR_INVALID_MODEL,
                        "offset has shape 1x4x2x2; expected 1x2x2x2 (batch, "
                        "offset_group * kernel taps * spatial dims, output dims)");
    n = th_node(g, "DeformConv", 22, 3, 1);
    th_attr_int(g, n, "offset_group", 0);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "offset_group 0 must be >= 1");
    n = th_node(g, "DeformConv", 22, 3, 1);
    th_attr_string(g, n, "auto_pad", "SAME_UPPER");
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'auto_pad'");
    n = th_node(g, "Conv", 22, 2, 1);
    th_attr_int(g, n, "offset_group", 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'offset_group'");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_causal_conv_with_state) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[2];
    /* one channel, kernel 3, past (1, 2), input (3, 4, 5): padded 1 2 3 4 5 */
    const float x[3] = {3, 4, 5}, w[3] = {1, 10, 100}, b[1] = {0.5f}, past[2] = {1, 2};
    tci_tensor in[4] = {th_tensor(F, 3, (const int64_t[]){1, 1, 3}, x),
                        th_tensor(F, 3, (const int64_t[]){1, 1, 3}, w),
                        th_tensor(F, 1, (const int64_t[]){1}, b),
                        th_tensor(F, 3, (const int64_t[]){1, 1, 2}, past)};
    ir_node *n = th_node(g, "CausalConvWithState", 27, 4, 2);
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[3] = {321.5f, 432.5f, 543.5f}, state[2] = {4, 5};
    th_assert_near(out[0].data, want, 3, 0.0f);
    th_assert_dims(&out[1], 3, (const int64_t[]){1, 1, 2});
    th_assert_near(out[1].data, state, 2, 0.0f);
    th_free(out, 2);
    n = th_node(g, "CausalConvWithState", 27, 4, 1); /* present_state left out */
    ck_assert_tci_ok(th_run(g, n, in, out));
    th_assert_near(out[0].data, want, 3, 0.0f);
    th_free(out, 1);
    n = th_node(g, "CausalConvWithState", 27, 4, 2);
    th_attr_string(g, n, "activation", "relu");
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "attribute 'activation' is 'relu'; expected 'none', 'silu' or 'swish'");
    in[3] = th_tensor(F, 3, (const int64_t[]){1, 1, 3}, NULL);
    n = th_node(g, "CausalConvWithState", 27, 4, 2);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "past_state has shape 1x1x3; expected 1x1x2 (batch, channels, "
                        "kernel - 1)");
    ir_graph_destroy(g);
}
END_TEST

static ir_node *linear_attention(ir_graph *g, int num_inputs, int q_heads, int kv_heads,
                                 const char *rule) {
    ir_node *n = th_node(g, "LinearAttention", 27, num_inputs, 2);
    th_attr_int(g, n, "q_num_heads", q_heads);
    th_attr_int(g, n, "kv_num_heads", kv_heads);
    if (rule) th_attr_string(g, n, "update_rule", rule);
    return n;
}

START_TEST(test_linear_attention) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[2];
    /* two query heads sharing one KV head (d_k 1, d_v 2), two tokens, the linear rule, scale 1:
     * S_1 = k_1 v_1 = [2, 4], S_2 = S_1 + k_2 v_2 = [2 + 3, 4 - 3]; o = q * S */
    const float q[4] = {1, -1, 2, 0.5f}, k[2] = {2, 1}, v[4] = {1, 2, 3, -3};
    tci_tensor in[3] = {th_tensor(F, 3, (const int64_t[]){1, 2, 2}, q),
                        th_tensor(F, 3, (const int64_t[]){1, 2, 1}, k),
                        th_tensor(F, 3, (const int64_t[]){1, 2, 2}, v)};
    ir_node *n = linear_attention(g, 3, 2, 1, "linear");
    th_attr_float(g, n, "scale", 1.0f);
    ck_assert_tci_ok(th_run(g, n, in, out));
    const float want[8] = {2, 4, -2, -4, 10, 2, 2.5f, 0.5f}, state[2] = {5, 1};
    th_assert_dims(&out[0], 3, (const int64_t[]){1, 2, 4});
    th_assert_near(out[0].data, want, 8, 1e-6f);
    th_assert_dims(&out[1], 4, (const int64_t[]){1, 1, 1, 2});
    th_assert_near(out[1].data, state, 2, 1e-6f);
    th_free(out, 2);
    /* present_state left out: the node has one output */
    n = th_node(g, "LinearAttention", 27, 3, 1);
    th_attr_int(g, n, "q_num_heads", 2);
    th_attr_int(g, n, "kv_num_heads", 1);
    th_attr_string(g, n, "update_rule", "linear");
    th_attr_float(g, n, "scale", 1.0f);
    ck_assert_tci_ok(th_run(g, n, in, out));
    th_assert_near(out[0].data, want, 8, 1e-6f);
    th_free(out, 1);
    /* errors: the heads, the rule's inputs, the shapes */
    n = linear_attention(g, 3, 3, 2, NULL);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "q_num_heads (3) must be a positive multiple of kv_num_heads (2)");
    n = linear_attention(g, 3, 2, 1, NULL);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "update_rule 'gated_delta' needs the input decay");
    n = linear_attention(g, 3, 2, 1, "fast");
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "update_rule 'fast' is not one of linear, gated, delta, gated_delta");
    n = th_node(g, "LinearAttention", 27, 3, 2);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "attributes 'q_num_heads' and 'kv_num_heads' are required");
    n = linear_attention(g, 3, 2, 2, "linear");
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "key's last dim 1 is not a multiple of its 2 heads");
    in[1] = th_tensor(F, 3, (const int64_t[]){1, 2, 2}, NULL);
    n = linear_attention(g, 3, 2, 1, "linear");
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "key has shape 1x2x2; expected 1x2x1 (batch, seq, kv_num_heads "
                        "* head size)");
    ir_graph_destroy(g);
}
END_TEST

/* None of them has a GPU path: the planner refuses each naming the node. */
START_TEST(test_state_ops_gpu_plan) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x = th_named(g, "x", F, 3, (const int64_t[]){1, 8, 6}, NULL);
    ir_tensor *w = th_named(g, "w", F, 3, (const int64_t[]){8, 1, 4}, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *s = th_named(g, "s", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_graph_io(g, (ir_tensor *[]){x, w}, 2, (ir_tensor *[]){y, s}, 2);
    th_node_io(g, "conv", "CausalConvWithState", 27, (ir_tensor *[]){x, w}, 2,
               (ir_tensor *[]){y, s}, 2);
    plan *p = NULL;
    ck_assert_tci_error(th_plan_for_gpu(g, &p), TCI_ERR_UNSUPPORTED,
                        "node 'conv' (CausalConvWithState): op CausalConvWithState has no GPU "
                        "path yet");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("state_ops");
    TCase *t = tcase_create("state_ops");
    tcase_add_test(t, test_bit_cast);
    tcase_add_test(t, test_swiglu);
    tcase_add_test(t, test_tensor_scatter);
    tcase_add_test(t, test_deform_conv);
    tcase_add_test(t, test_causal_conv_with_state);
    tcase_add_test(t, test_linear_attention);
    tcase_add_test(t, test_state_ops_gpu_plan);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
