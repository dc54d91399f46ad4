/* LSTM, GRU and RNN: attribute refusals, shape inference, the fp32 reference on hand-checked
 * single steps and on sequence_lens, and the GPU plan they lower to. */
#include <math.h>

#include "graph/passes.h"
#include "graph/plan.h"
#include "harness.h"
#include "layers/op.h"

static float sig(float x) { return 1.0f / (1.0f + expf(-x)); }

static tci_tensor absent(void) { return th_tensor(TCI_DTYPE_UNDEFINED, 0, NULL, NULL); }

/* One LSTM step, one unit: every gate written out from ONNX's equations. */
START_TEST(test_lstm_one_step) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "LSTM", 22, 8, 3);
    th_attr_int(g, n, "hidden_size", 1);
    int64_t xd[3] = {1, 1, 1}, wd[3] = {1, 4, 1}, bd[2] = {1, 8}, sd[1] = {1}, hd[3] = {1, 1, 1},
            pd[2] = {1, 3};
    float x = 0.5f, w[4] = {1.0f, 2.0f, -1.0f, 0.5f}, r[4] = {0.3f, -0.4f, 0.2f, 0.7f};
    float bias[8] = {0.1f, -0.2f, 0.3f, 0.05f, 0.02f, 0.04f, -0.06f, 0.08f};
    float h0 = 0.6f, c0 = -0.2f, peep[3] = {0.5f, -0.3f, 0.25f}; /* i, o, f */
    int32_t len = 1;
    tci_tensor in[8] = {
        th_tensor(TCI_DTYPE_FLOAT, 3, xd, &x),   th_tensor(TCI_DTYPE_FLOAT, 3, wd, w),
        th_tensor(TCI_DTYPE_FLOAT, 3, wd, r),    th_tensor(TCI_DTYPE_FLOAT, 2, bd, bias),
        th_tensor(TCI_DTYPE_INT32, 1, sd, &len), th_tensor(TCI_DTYPE_FLOAT, 3, hd, &h0),
        th_tensor(TCI_DTYPE_FLOAT, 3, hd, &c0),  th_tensor(TCI_DTYPE_FLOAT, 2, pd, peep)};
    tci_tensor out[3];
    ck_assert_tci_ok(th_run(g, n, in, out));
    /* gate order i, o, f, c in W, R and each half of B */
    float gi = sig(x * 1.0f + h0 * 0.3f + 0.1f + 0.02f + 0.5f * c0);
    float gf = sig(x * -1.0f + h0 * 0.2f + 0.3f - 0.06f + 0.25f * c0);
    float gc = tanhf(x * 0.5f + h0 * 0.7f + 0.05f + 0.08f);
    float c1 = gf * c0 + gi * gc;
    float go = sig(x * 2.0f + h0 * -0.4f - 0.2f + 0.04f - 0.3f * c1);
    float h1 = go * tanhf(c1);
    int64_t yd[4] = {1, 1, 1, 1};
    th_assert_dims(&out[0], 4, yd);
    th_assert_dims(&out[1], 3, hd);
    th_assert_near(out[0].data, &h1, 1, 1e-6f);
    th_assert_near(out[1].data, &h1, 1, 1e-6f);
    th_assert_near(out[2].data, &c1, 1, 1e-6f);
    th_free(out, 3);
    ir_graph_destroy(g);
}
END_TEST

/* One GRU step with two units (so that r (.) h_{t-1} mixes units through R_h), both forms. */
static void gru_step(int linear_before_reset) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "GRU", 14, 6, 2);
    th_attr_int(g, n, "hidden_size", 2);
    if (linear_before_reset) th_attr_int(g, n, "linear_before_reset", 1);
    int64_t xd[3] = {1, 1, 1}, wd[3] = {1, 6, 1}, rd[3] = {1, 6, 2}, bd[2] = {1, 12},
            hd[3] = {1, 1, 2};
    float x = -0.7f, w[6] = {0.4f, -0.3f, 0.9f, 0.2f, -0.5f, 1.1f};
    float r[12] = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, -0.9f, 0.35f, 0.45f, -0.15f};
    float bias[12] = {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f,
                      -0.07f, 0.08f, -0.09f, 0.1f, -0.11f, 0.12f};
    float h0[2] = {0.3f, -0.8f};
    tci_tensor in[6] = {
        th_tensor(TCI_DTYPE_FLOAT, 3, xd, &x), th_tensor(TCI_DTYPE_FLOAT, 3, wd, w),
        th_tensor(TCI_DTYPE_FLOAT, 3, rd, r),  th_tensor(TCI_DTYPE_FLOAT, 2, bd, bias),
        absent(),                              th_tensor(TCI_DTYPE_FLOAT, 3, hd, h0)};
    tci_tensor out[2];
    ck_assert_tci_ok(th_run(g, n, in, out));
    /* rows of W/R: z0 z1 r0 r1 h0 h1; B: Wb (6) then Rb (6) */
    float z[2], rr[2], want[2];
    for (int j = 0; j < 2; j++) {
        z[j] = sig(x * w[j] + h0[0] * r[j * 2] + h0[1] * r[j * 2 + 1] + bias[j] + bias[6 + j]);
        rr[j] = sig(x * w[2 + j] + h0[0] * r[(2 + j) * 2] + h0[1] * r[(2 + j) * 2 + 1] +
                    bias[2 + j] + bias[8 + j]);
    }
    for (int j = 0; j < 2; j++) {
        const float *rh = &r[(4 + j) * 2];
        float hh;
        if (linear_before_reset)
            hh = tanhf(x * w[4 + j] + bias[4 + j] +
                       rr[j] * (h0[0] * rh[0] + h0[1] * rh[1] + bias[10 + j]));
        else
            hh = tanhf(x * w[4 + j] + bias[4 + j] + rr[0] * h0[0] * rh[0] +
                       rr[1] * h0[1] * rh[1] + bias[10 + j]);
        want[j] = (1.0f - z[j]) * hh + z[j] * h0[j];
    }
    th_assert_near(out[0].data, want, 2, 1e-6f);
    th_assert_near(out[1].data, want, 2, 1e-6f);
    th_free(out, 2);
    ir_graph_destroy(g);
}

START_TEST(test_gru_one_step) {
    gru_step(0);
    gru_step(1);
}
END_TEST

/* RNN, reverse, batch-major, two sequences of lengths 2 and 3 in a 3-step batch: each runs
 * backward from its own last step; Y is zero past a sequence's end. */
START_TEST(test_rnn_reverse_sequence_lens) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "RNN", 22, 5, 2);
    th_attr_int(g, n, "hidden_size", 1);
    th_attr_int(g, n, "layout", 1);
    th_attr_string(g, n, "direction", "reverse");
    int64_t xd[3] = {2, 3, 1}, wd[3] = {1, 1, 1}, sd[1] = {2};
    float x[6] = {0.1f, 0.2f, 9.0f, -0.3f, 0.4f, 0.5f}; /* x[0][2] lies past the end */
    float w = 0.8f, r = -0.5f;
    int32_t lens[2] = {2, 3};
    tci_tensor in[5] = {th_tensor(TCI_DTYPE_FLOAT, 3, xd, x), th_tensor(TCI_DTYPE_FLOAT, 3, wd, &w),
                        th_tensor(TCI_DTYPE_FLOAT, 3, wd, &r), absent(),
                        th_tensor(TCI_DTYPE_INT32, 1, sd, lens)};
    tci_tensor out[2];
    ck_assert_tci_ok(th_run(g, n, in, out));
    float a1 = tanhf(w * 0.2f), a0 = tanhf(w * 0.1f + r * a1);
    float b2 = tanhf(w * 0.5f), b1 = tanhf(w * 0.4f + r * b2), b0 = tanhf(w * -0.3f + r * b1);
    float y[6] = {a0, a1, 0.0f, b0, b1, b2}, yh[2] = {a0, b0}; /* (B, T, D, H), (B, D, H) */
    int64_t yd[4] = {2, 3, 1, 1}, hd[3] = {2, 1, 1};
    th_assert_dims(&out[0], 4, yd);
    th_assert_dims(&out[1], 3, hd);
    th_assert_near(out[0].data, y, 6, 1e-6f);
    th_assert_near(out[1].data, yh, 2, 1e-6f);
    th_free(out, 2);
    /* an empty sequence has a zero final state (onnxruntime's), and a length past T is an error */
    lens[0] = 0;
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_float_eq(((float *)out[1].data)[0], 0.0f);
    th_assert_near((float *)out[0].data, (float[]){0.0f, 0.0f, 0.0f}, 3, 0.0f);
    th_free(out, 2);
    lens[0] = 4;
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_ARGUMENT,
                        "sequence_lens[0] = 4 is outside [0, 3]");
    ir_graph_destroy(g);
}
END_TEST

/* Bidirectional: the backward half of Y and Y_h is the forward run of the reversed sequence. */
START_TEST(test_lstm_bidirectional_mirrors) {
    int64_t xd[3] = {3, 1, 2}, wd[3] = {2, 8, 2}, rd[3] = {2, 8, 2};
    float x[6] = {0.3f, -0.1f, 0.5f, 0.2f, -0.4f, 0.6f};
    float xr[6] = {-0.4f, 0.6f, 0.5f, 0.2f, 0.3f, -0.1f}; /* the time steps reversed */
    float w[32], r[32];
    for (int i = 0; i < 32; i++) {
        w[i] = 0.05f * (float)((i * 7) % 11) - 0.25f;
        r[i] = 0.04f * (float)((i * 5) % 13) - 0.2f;
    }
    tci_tensor out_bi[2], out_fw[2];
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *bi = th_node(g, "LSTM", 7, 3, 2);
    th_attr_string(g, bi, "direction", "bidirectional");
    tci_tensor in[3] = {th_tensor(TCI_DTYPE_FLOAT, 3, xd, x), th_tensor(TCI_DTYPE_FLOAT, 3, wd, w),
                        th_tensor(TCI_DTYPE_FLOAT, 3, rd, r)};
    ck_assert_tci_ok(th_run(g, bi, in, out_bi));
    /* the same second-direction weights, forward, on the reversed input */
    ir_node *fw = th_node(g, "LSTM", 7, 3, 2);
    th_attr_int(g, fw, "hidden_size", 2);
    int64_t wd1[3] = {1, 8, 2};
    tci_tensor in_fw[3] = {th_tensor(TCI_DTYPE_FLOAT, 3, xd, xr),
                           th_tensor(TCI_DTYPE_FLOAT, 3, wd1, w + 16),
                           th_tensor(TCI_DTYPE_FLOAT, 3, wd1, r + 16)};
    ck_assert_tci_ok(th_run(g, fw, in_fw, out_fw));
    const float *ybi = out_bi[0].data, *yfw = out_fw[0].data; /* (T, D, B, H) */
    for (int t = 0; t < 3; t++)
        th_assert_near(ybi + (t * 2 + 1) * 2, yfw + (2 - t) * 2, 2, 1e-6f);
    th_assert_near((const float *)out_bi[1].data + 2, out_fw[1].data, 2, 1e-6f);
    th_free(out_bi, 2);
    th_free(out_fw, 2);
    ir_graph_destroy(g);
}
END_TEST

static tci_status parse_with(const char *op, int opset, void (*set)(ir_graph *, ir_node *)) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, opset, 3, 2);
    set(g, n);
    tci_status st = op_prepare_node(n, g->arena);
    ir_graph_destroy(g);
    return st;
}
static void set_direction(ir_graph *g, ir_node *n) { th_attr_string(g, n, "direction", "both"); }
static void set_activations(ir_graph *g, ir_node *n) {
    static const char *const acts[2] = {"Relu", "Tanh"};
    th_attr_strings(g, n, "activations", acts, 2);
}
static void set_default_activations(ir_graph *g, ir_node *n) {
    static const char *const acts[6] = {"Sigmoid", "Tanh", "Tanh", "sigmoid", "tanh", "TANH"};
    th_attr_string(g, n, "direction", "bidirectional");
    th_attr_strings(g, n, "activations", acts, 6);
}
static void set_clip(ir_graph *g, ir_node *n) { th_attr_float(g, n, "clip", 3.0f); }
static void set_input_forget(ir_graph *g, ir_node *n) { th_attr_int(g, n, "input_forget", 1); }
static void set_layout(ir_graph *g, ir_node *n) { th_attr_int(g, n, "layout", 1); }
static void set_lbr(ir_graph *g, ir_node *n) { th_attr_int(g, n, "linear_before_reset", 1); }
static void set_hidden(ir_graph *g, ir_node *n) { th_attr_int(g, n, "hidden_size", 0); }
static void set_unknown(ir_graph *g, ir_node *n) { th_attr_int(g, n, "units", 4); }

START_TEST(test_rnn_parse_errors) {
    ck_assert_tci_error(parse_with("LSTM", 22, set_direction), TCI_ERR_INVALID_MODEL,
                        "direction 'both' is not forward, reverse or bidirectional");
    ck_assert_tci_error(parse_with("GRU", 22, set_activations), TCI_ERR_UNSUPPORTED,
                        "activations [Relu, Tanh] are not supported: only the defaults "
                        "(Sigmoid, Tanh per direction)");
    ck_assert_tci_error(parse_with("RNN", 22, set_clip), TCI_ERR_UNSUPPORTED,
                        "node 'RNN_0' (RNN): attribute 'clip' (cell clipping) is not supported");
    ck_assert_tci_error(parse_with("LSTM", 22, set_input_forget), TCI_ERR_UNSUPPORTED,
                        "input_forget=1");
    ck_assert_tci_error(parse_with("GRU", 7, set_layout), TCI_ERR_INVALID_MODEL,
                        "attribute 'layout' exists from opset 14");
    ck_assert_tci_error(parse_with("LSTM", 22, set_lbr), TCI_ERR_INVALID_MODEL,
                        "attribute 'linear_before_reset' is GRU's");
    ck_assert_tci_error(parse_with("RNN", 14, set_hidden), TCI_ERR_INVALID_MODEL,
                        "hidden_size must be positive");
    ck_assert_tci_error(parse_with("RNN", 14, set_unknown), TCI_ERR_UNSUPPORTED, "units");
    ck_assert_tci_ok(parse_with("GRU", 14, set_layout));
    ck_assert_tci_ok(parse_with("LSTM", 14, set_default_activations));
    ck_assert_tci_ok(parse_with("GRU", 3, set_lbr));
}
END_TEST

START_TEST(test_rnn_shapes) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, "GRU", 22, 3, 2);
    th_attr_string(g, n, "direction", "bidirectional");
    th_attr_int(g, n, "layout", 1);
    int64_t xd[3] = {4, -1, 10}, wd[3] = {2, 24, 10}, rd[3] = {2, 24, 8};
    tci_tensor x = th_shape_only(TCI_DTYPE_FLOAT, 3, xd), w = th_shape_only(TCI_DTYPE_FLOAT, 3, wd),
               r = th_shape_only(TCI_DTYPE_FLOAT, 3, rd);
    const tci_tensor *in[3] = {&x, &w, &r};
    tci_tensor out[3];
    ck_assert_tci_ok(th_infer(g, n, in, out));
    th_assert_dims(&out[0], 4, (int64_t[]){4, -1, 2, 8}); /* hidden size from R */
    th_assert_dims(&out[1], 3, (int64_t[]){4, 2, 8});
    wd[2] = 9;
    w = th_shape_only(TCI_DTYPE_FLOAT, 3, wd);
    ck_assert_tci_error(th_infer(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "input W has shape 2x24x9, expected 2x24x10");
    ir_graph_destroy(g);
    ck_assert_tci_ok(ir_graph_create(&g));
    n = th_node(g, "LSTM", 22, 3, 3);
    th_attr_int(g, n, "hidden_size", 8);
    wd[0] = rd[0] = 1, wd[1] = rd[1] = 32, wd[2] = 10;
    int64_t x0[3] = {5, 3, 10};
    x = th_shape_only(TCI_DTYPE_FLOAT, 3, x0);
    w = th_shape_only(TCI_DTYPE_FLOAT, 3, wd);
    r = th_shape_only(TCI_DTYPE_FLOAT, 3, rd);
    ck_assert_tci_ok(th_infer(g, n, in, out));
    th_assert_dims(&out[0], 4, (int64_t[]){5, 1, 3, 8});
    th_assert_dims(&out[2], 3, (int64_t[]){1, 3, 8});
    r = th_shape_only(TCI_DTYPE_FLOAT, 3, (int64_t[]){1, 24, 8});
    ck_assert_tci_error(th_infer(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "input R has shape 1x24x8, expected 1x32x8");
    ir_graph_destroy(g);
}
END_TEST

/* A bidirectional LSTM with sequence_lens as a graph input: one projection GEMM over every step
 * and direction, then the recurrence's three steps; W given at run time is refused by name. */
static ir_graph *lstm_graph(bool constant_w) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    static float w[2 * 16 * 3], r[2 * 16 * 4], bias[2 * 32];
    int64_t xd[3] = {6, 2, 3}, wd[3] = {2, 16, 3}, rd[3] = {2, 16, 4}, bd[2] = {2, 32}, sd[1] = {2};
    ir_tensor *x = th_named(g, "x", TCI_DTYPE_FLOAT, 3, xd, NULL);
    ir_tensor *wt = th_named(g, "w", TCI_DTYPE_FLOAT, 3, wd, constant_w ? w : NULL);
    ir_tensor *rt = th_named(g, "r", TCI_DTYPE_FLOAT, 3, rd, r);
    ir_tensor *bt = th_named(g, "b", TCI_DTYPE_FLOAT, 2, bd, bias);
    ir_tensor *lens = th_named(g, "lens", TCI_DTYPE_INT32, 1, sd, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *yc = th_named(g, "yc", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    ir_tensor *ins[5] = {x, wt, rt, bt, lens}, *outs[3] = {y, NULL, yc};
    ir_node *n = th_node_io(g, "lstm", "LSTM", 22, ins, 5, outs, 3);
    th_attr_string(g, n, "direction", "bidirectional");
    ir_tensor *graph_in[3] = {x, lens, wt}, *graph_out[2] = {y, yc};
    th_graph_io(g, graph_in, constant_w ? 2 : 3, graph_out, 2);
    return g;
}

START_TEST(test_rnn_gpu_plan) {
    ir_graph *g = lstm_graph(true);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_fuse_for_gpu(g));
    plan *p;
    ck_assert_tci_ok(pass_assign_layouts(g));
    ck_assert_tci_ok(plan_build(g, NULL, &p));
    ck_assert_int_eq(p->num_steps, 4);
    const plan_step *s = p->steps;
    ck_assert_int_eq(s[0].kind, PLAN_STEP_GEMM);
    ck_assert_int_eq(s[0].u.gemm.m, 12);
    ck_assert_int_eq(s[0].u.gemm.n, 2 * 16);
    ck_assert_int_eq(s[0].u.gemm.k, 3);
    ck_assert(s[0].u.gemm.trans_b && s[0].u.gemm.has_bias);
    for (int i = 1; i < 4; i++) {
        ck_assert_int_eq(s[i].kind, PLAN_STEP_RNN);
        ck_assert_int_eq(s[i].u.rnn.phase, i - 1);
        ck_assert_int_eq(s[i].u.rnn.cell, PLAN_RNN_LSTM);
        ck_assert_int_eq(s[i].u.rnn.seq_length, 6);
        ck_assert_int_eq(s[i].u.rnn.directions, 2);
    }
    ck_assert_int_eq(s[2].inputs[0], s[0].outputs[0]); /* the projection feeds the steps */
    ck_assert_int_ge(s[2].inputs[2], 0);                /* sequence_lens */
    ck_assert_int_eq(s[2].num_inputs, 5);               /* X too, for cuDNN's candidate */
    ck_assert_int_eq(s[2].inputs[4], s[0].inputs[0]);
    ck_assert_int_eq(s[2].num_outputs, 1);              /* Y */
    ck_assert(!s[3].u.rnn.has_y_h && s[3].u.rnn.has_y_c);
    ck_assert_int_eq(s[3].num_outputs, 1);
    /* the recurrent weights: R transposed, Rb and P per direction, uploaded as fp32 */
    const plan_tensor *wt = &p->tensors[s[2].inputs[1]];
    ck_assert_int_eq(wt->dtype, TCI_DTYPE_FLOAT);
    ck_assert(!wt->packed_source);
    ck_assert_int_eq(wt->dims[0], 2 * 4 * 16 + 2 * 16 + 2 * 12);
    plan_destroy(p);
    ir_graph_destroy(g);
    g = lstm_graph(false);
    ck_assert_tci_ok(pass_optimize(g));
    ck_assert_tci_ok(pass_prepare_for_gpu(g));
    ck_assert_tci_error(plan_build(g, NULL, &p), TCI_ERR_UNSUPPORTED,
                        "node 'lstm' (LSTM): the GPU path takes W, R, B and P only as fp32 "
                        "constants");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rnn");
    TCase *tc = tcase_create("rnn");
    tcase_add_test(tc, test_lstm_one_step);
    tcase_add_test(tc, test_gru_one_step);
    tcase_add_test(tc, test_rnn_reverse_sequence_lens);
    tcase_add_test(tc, test_lstm_bidirectional_mirrors);
    tcase_add_test(tc, test_rnn_parse_errors);
    tcase_add_test(tc, test_rnn_shapes);
    tcase_add_test(tc, test_rnn_gpu_plan);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
