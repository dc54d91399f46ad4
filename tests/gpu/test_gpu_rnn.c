/* LSTM, GRU and RNN on the GPU engine (input projection GEMM + the kern_rnn steps) against the
 * fp32 CPU engine on the same model: bidirectional with sequence_lens (an empty sequence
 * included), initial states, peepholes, both GRU forms, batch-major layout, in fp16, bf16 and
 * fp32 storage.
 *
 * Bounds (max |gpu - cpu| over every output; the outputs are tanh-bounded, |h| < 1, and the
 * weights are scaled so that pre-activations stay within a few units): fp16 storage rounds X,
 * W, initial_h/c and the projection X W^T + Wb to 11 significant bits (2^-11 relative, 1.5e-3
 * absolute on a pre-activation of 3) and Y to 11 bits again; sigmoid and tanh have slopes <= 1,
 * and the forget gate (< 1) damps what carries over from step to step, so 1e-2 holds with room
 * while an error of the size of a wrong gate, weight or time index (> 0.1) fails. bf16 keeps
 * 8 bits: 8x the fp16 figure, 8e-2. fp32 storage differs from the CPU only in summation order:
 * 1e-4. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "graph/ir.h"
#include "onnx/writer.h"

/* H = 80: two full chunks of 32 units and a partial one, split over several blocks per
 * sequence */
enum { T = 7, B = 3, IN = 10, H = 80 };

typedef struct rnn_case {
    const char *op;
    int gates;
    const char *direction;
    int layout;
    int linear_before_reset;
    int peepholes;
    int32_t lens[B];
} rnn_case;

/* The one-node model of c, its weights from seed: inputs X, sequence_lens, initial_h (and
 * initial_c for LSTM); outputs Y, Y_h (and Y_c). */
static void build_model(const rnn_case *c, uint64_t seed, void **bytes, size_t *size) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int D = strcmp(c->direction, "bidirectional") == 0 ? 2 : 1, G = c->gates;
    const bool lstm = strcmp(c->op, "LSTM") == 0;
    int64_t xd[3] = {c->layout ? B : T, c->layout ? T : B, IN}, wd[3] = {D, G * H, IN},
            rd[3] = {D, G * H, H}, bd[2] = {D, 2 * G * H}, sd[1] = {B},
            hd[3] = {c->layout ? B : D, c->layout ? D : B, H}, pd[2] = {D, 3 * H};
    size_t nw = (size_t)(D * G * H * IN), nr = (size_t)(D * G * H * H);
    float *w = malloc(nw * sizeof(float)), *r = malloc(nr * sizeof(float));
    float bias[2 * 2 * 4 * H], peep[2 * 3 * H];
    gpu_fill_random(w, nw, seed, -0.4f, 0.4f);
    /* R scaled by sqrt(16 / H): the recurrent pre-activations as large as with 16 units */
    gpu_fill_random(r, nr, seed + 1, -0.25f * sqrtf(16.0f / H), 0.25f * sqrtf(16.0f / H));
    gpu_fill_random(bias, (size_t)(D * 2 * G * H), seed + 2, -0.3f, 0.3f);
    gpu_fill_random(peep, (size_t)(D * 3 * H), seed + 3, -0.5f, 0.5f);
    ir_tensor *in[8] = {th_named(g, "X", TCI_DTYPE_FLOAT, 3, xd, NULL),
                        th_named(g, "W", TCI_DTYPE_FLOAT, 3, wd, w),
                        th_named(g, "R", TCI_DTYPE_FLOAT, 3, rd, r),
                        th_named(g, "B", TCI_DTYPE_FLOAT, 2, bd, bias),
                        th_named(g, "lens", TCI_DTYPE_INT32, 1, sd, NULL),
                        th_named(g, "h0", TCI_DTYPE_FLOAT, 3, hd, NULL),
                        lstm ? th_named(g, "c0", TCI_DTYPE_FLOAT, 3, hd, NULL) : NULL,
                        lstm && c->peepholes ? th_named(g, "P", TCI_DTYPE_FLOAT, 2, pd, peep)
                                             : NULL};
    free(w);
    free(r);
    ir_tensor *out[3] = {th_named(g, "Y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
                         th_named(g, "Y_h", TCI_DTYPE_UNDEFINED, -1, NULL, NULL),
                         lstm ? th_named(g, "Y_c", TCI_DTYPE_UNDEFINED, -1, NULL, NULL) : NULL};
    int num_in = lstm ? (c->peepholes ? 8 : 7) : 6, num_out = lstm ? 3 : 2;
    ir_node *n = th_node_io(g, "rnn", c->op, 22, in, num_in, out, num_out);
    th_attr_int(g, n, "hidden_size", H);
    th_attr_string(g, n, "direction", c->direction);
    if (c->layout) th_attr_int(g, n, "layout", 1);
    if (c->linear_before_reset) th_attr_int(g, n, "linear_before_reset", 1);
    ir_tensor *graph_in[4] = {in[0], in[4], in[5], in[6]};
    th_graph_io(g, graph_in, lstm ? 4 : 3, out, num_out);
    ck_assert_tci_ok(onnx_save_model(g, NULL, bytes, size));
    ir_graph_destroy(g);
}

/* Runs the model on one backend; returns the outputs' fp32 copies. */
static void run_model(const void *bytes, size_t size, tci_backend backend,
                      tci_precision precision, const tci_tensor *inputs, int num_inputs,
                      float **outputs, int64_t *counts, int num_outputs) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = backend;
    o.precision = precision;
    tci_engine *e = NULL;
    tci_context *ctx = NULL;
    ck_assert_msg(tci_engine_create_from_memory(bytes, size, NULL, &o, &e) == TCI_OK, "%s",
                  tci_last_error());
    ck_assert_msg(tci_context_create(e, &ctx) == TCI_OK, "%s", tci_last_error());
    ck_assert_msg(tci_context_run(ctx, inputs, (size_t)num_inputs) == TCI_OK, "%s",
                  tci_last_error());
    for (int k = 0; k < num_outputs; k++) {
        tci_tensor t;
        ck_assert_msg(tci_context_output(ctx, (size_t)k, &t) == TCI_OK, "%s", tci_last_error());
        ck_assert_int_eq(t.dtype, TCI_DTYPE_FLOAT);
        counts[k] = tci_tensor_count(&t);
        outputs[k] = malloc((size_t)counts[k] * sizeof(float) + 1);
        memcpy(outputs[k], t.data, (size_t)counts[k] * sizeof(float));
    }
    tci_context_destroy(ctx);
    tci_engine_destroy(e);
}

static void check_case(const rnn_case *c, tci_precision precision, double tol) {
    const bool lstm = strcmp(c->op, "LSTM") == 0;
    const int D = strcmp(c->direction, "bidirectional") == 0 ? 2 : 1;
    void *bytes = NULL;
    size_t size = 0;
    build_model(c, 100 + (uint64_t)c->gates, &bytes, &size);
    float x[T * B * IN], h0[2 * B * H], c0[2 * B * H];
    gpu_fill_random(x, T * B * IN, 7, -1.5f, 1.5f);
    gpu_fill_random(h0, (size_t)(D * B * H), 8, -0.8f, 0.8f);
    gpu_fill_random(c0, (size_t)(D * B * H), 9, -1.0f, 1.0f);
    int32_t lens[B];
    memcpy(lens, c->lens, sizeof lens);
    tci_tensor in[4] = {
        {"X", TCI_DTYPE_FLOAT, 3, {c->layout ? B : T, c->layout ? T : B, IN}, x},
        {"lens", TCI_DTYPE_INT32, 1, {B}, lens},
        {"h0", TCI_DTYPE_FLOAT, 3, {c->layout ? B : D, c->layout ? D : B, H}, h0},
        {"c0", TCI_DTYPE_FLOAT, 3, {c->layout ? B : D, c->layout ? D : B, H}, c0}};
    int num_in = lstm ? 4 : 3, num_out = lstm ? 3 : 2;
    float *want[3], *got[3];
    int64_t nw[3], ng[3];
    run_model(bytes, size, TCI_BACKEND_CPU, TCI_PRECISION_FP16, in, num_in, want, nw, num_out);
    run_model(bytes, size, TCI_BACKEND_GPU, precision, in, num_in, got, ng, num_out);
    free(bytes);
    static const char *const names[3] = {"Y", "Y_h", "Y_c"};
    for (int k = 0; k < num_out; k++) {
        ck_assert_int_eq(ng[k], nw[k]);
        double worst = 0.0;
        for (int64_t i = 0; i < nw[k]; i++) {
            ck_assert_msg(isfinite(got[k][i]), "%s %s: %s[%lld] is %g", c->op, c->direction,
                          names[k], (long long)i, got[k][i]);
            worst = fmax(worst, fabs((double)got[k][i] - want[k][i]));
        }
        printf("%s %s layout %d lbr %d precision %d: %s max abs difference %.3g (bound %.3g)\n",
               c->op, c->direction, c->layout, c->linear_before_reset, (int)precision, names[k],
               worst, tol);
        ck_assert_msg(worst <= tol, "%s %s (precision %d): %s differs by %g > %g", c->op,
                      c->direction, (int)precision, names[k], worst, tol);
        free(want[k]);
        free(got[k]);
    }
}

static const rnn_case lstm_bi = {"LSTM", 4, "bidirectional", 0, 0, 1, {T, 4, 0}};
static const rnn_case gru_bi = {"GRU", 3, "bidirectional", 0, 0, 0, {5, T, 1}};
static const rnn_case gru_bi_lbr = {"GRU", 3, "bidirectional", 1, 1, 0, {T, 2, 6}};
static const rnn_case lstm_reverse_batch_major = {"LSTM", 4, "reverse", 1, 0, 0, {3, T, 5}};
static const rnn_case rnn_forward = {"RNN", 1, "forward", 0, 0, 0, {T, 1, 4}};

START_TEST(test_lstm_bidirectional) {
    check_case(&lstm_bi, TCI_PRECISION_FP16, 1e-2);
    check_case(&lstm_bi, TCI_PRECISION_BF16, 8e-2);
    check_case(&lstm_bi, TCI_PRECISION_FP32, 1e-4);
}
END_TEST

START_TEST(test_gru_bidirectional) {
    check_case(&gru_bi, TCI_PRECISION_FP16, 1e-2);
    check_case(&gru_bi, TCI_PRECISION_FP32, 1e-4);
    check_case(&gru_bi_lbr, TCI_PRECISION_FP16, 1e-2);
    check_case(&gru_bi_lbr, TCI_PRECISION_BF16, 8e-2);
}
END_TEST

START_TEST(test_reverse_and_rnn) {
    check_case(&lstm_reverse_batch_major, TCI_PRECISION_FP16, 1e-2);
    check_case(&rnn_forward, TCI_PRECISION_FP16, 1e-2);
    check_case(&rnn_forward, TCI_PRECISION_FP32, 1e-4);
}
END_TEST

int main(void) {
    gpu_require_device("rnn");
    Suite *s = suite_create("gpu_rnn");
    TCase *tc = tcase_create("rnn");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_lstm_bidirectional);
    tcase_add_test(tc, test_gru_bidirectional);
    tcase_add_test(tc, test_reverse_and_rnn);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
