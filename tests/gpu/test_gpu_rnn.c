/* LSTM, GRU and RNN on the GPU engine against the fp32 CPU engine on the same model, on both
 * candidates for the recurrence: tcinfer's (input projection GEMM + the kern_rnn steps,
 * tci_kernels WMMA) and cuDNN's RNN (tci_kernels LIBRARY), and the timed choice (AUTO).
 * Bidirectional with sequence_lens (an empty sequence included) or without, initial states,
 * peepholes, both GRU forms, batch-major layout, in fp16, bf16 and fp32 storage; the layers
 * cuDNN must refuse (sequence_lens, reverse, peepholes, GRU linear_before_reset=0, bf16) say so
 * in the step's kernel and run on tcinfer's recurrence.
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
    int32_t lens[B]; /* all 0: no sequence_lens input */
} rnn_case;

static bool has_lens(const rnn_case *c) { return c->lens[0] || c->lens[1] || c->lens[2]; }

/* The one-node model of c, its weights from seed: inputs X, sequence_lens (unless c has none),
 * initial_h (and initial_c for LSTM); outputs Y, Y_h (and Y_c). */
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
                        has_lens(c) ? th_named(g, "lens", TCI_DTYPE_INT32, 1, sd, NULL) : NULL,
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
    ir_tensor *graph_in[4];
    int num_graph_in = 0;
    for (int k = 0; k < 7; k++)
        if ((k == 0 || k >= 4) && in[k]) graph_in[num_graph_in++] = in[k];
    th_graph_io(g, graph_in, num_graph_in, out, num_out);
    ck_assert_tci_ok(onnx_save_model(g, NULL, bytes, size));
    ir_graph_destroy(g);
}

/* The kernel of the recurrence step ("RNN recurrence", ...), from tci_engine_layers. */
static void find_recurrence(size_t index, const char *node, const char *fused_ops,
                            const char *kernel, const char *layout, void *user) {
    (void)index;
    (void)node;
    (void)layout;
    if (strstr(fused_ops, "recurrence")) snprintf(user, 256, "%s", kernel);
}

/* Runs the model on one backend; returns the outputs' fp32 copies and (GPU) the recurrence
 * step's kernel text in kernel[256]. */
static void run_model(const void *bytes, size_t size, tci_backend backend,
                      tci_precision precision, tci_kernels kernels, const tci_tensor *inputs,
                      int num_inputs, float **outputs, int64_t *counts, int num_outputs,
                      char *kernel) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.backend = backend;
    o.precision = precision;
    o.kernels = kernels;
    tci_engine *e = NULL;
    tci_context *ctx = NULL;
    ck_assert_msg(tci_engine_create_from_memory(bytes, size, NULL, &o, &e) == TCI_OK, "%s",
                  tci_last_error());
    if (kernel) {
        kernel[0] = '\0';
        ck_assert_msg(tci_engine_layers(e, find_recurrence, kernel) == TCI_OK, "%s",
                      tci_last_error());
    }
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

/* What the recurrence must run on: tcinfer's because cuDNN refuses the layer (the step's kernel
 * says why), tcinfer's because it was asked for, cuDNN's, or whichever was faster. */
typedef enum expect { REFUSED, OURS, CUDNN, TIMED } expect;

static void check_kernel(const rnn_case *c, tci_kernels kernels, expect want, const char *kernel) {
    printf("%s %s kernels %d: %s\n", c->op, c->direction, (int)kernels, kernel);
    switch (want) {
    case REFUSED:
        ck_assert_msg(strncmp(kernel, "tcinfer rnn", 11) == 0 && strstr(kernel, "cuDNN refuses: "),
                      "%s %s: '%s'", c->op, c->direction, kernel);
        break;
    case OURS:
        ck_assert_msg(strcmp(kernel, "tcinfer rnn (projection GEMM + per-step kernel)") == 0,
                      "%s %s: '%s'", c->op, c->direction, kernel);
        break;
    case CUDNN:
        ck_assert_msg(strncmp(kernel, "cuDNN RNN (standard, ", 21) == 0, "%s %s: '%s'", c->op,
                      c->direction, kernel);
        break;
    case TIMED: /* both times shown */
        ck_assert_msg(strstr(kernel, " us; ") && !strstr(kernel, "refuses"), "%s %s: '%s'",
                      c->op, c->direction, kernel);
        break;
    }
}

static void check_case_on(const rnn_case *c, tci_precision precision, double tol,
                          tci_kernels kernels, expect on) {
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
    tci_tensor all[4] = {
        {"X", TCI_DTYPE_FLOAT, 3, {c->layout ? B : T, c->layout ? T : B, IN}, x},
        {"lens", TCI_DTYPE_INT32, 1, {B}, lens},
        {"h0", TCI_DTYPE_FLOAT, 3, {c->layout ? B : D, c->layout ? D : B, H}, h0},
        {"c0", TCI_DTYPE_FLOAT, 3, {c->layout ? B : D, c->layout ? D : B, H}, c0}};
    tci_tensor in[4];
    int num_in = 0, num_out = lstm ? 3 : 2;
    for (int k = 0; k < (lstm ? 4 : 3); k++)
        if (k != 1 || has_lens(c)) in[num_in++] = all[k];
    float *want[3], *got[3];
    int64_t nw[3], ng[3];
    char kernel[256];
    run_model(bytes, size, TCI_BACKEND_CPU, TCI_PRECISION_FP16, TCI_KERNELS_AUTO, in, num_in, want,
              nw, num_out, NULL);
    run_model(bytes, size, TCI_BACKEND_GPU, precision, kernels, in, num_in, got, ng, num_out,
              kernel);
    free(bytes);
    check_kernel(c, kernels, on, kernel);
    static const char *const names[3] = {"Y", "Y_h", "Y_c"};
    for (int k = 0; k < num_out; k++) {
        ck_assert_int_eq(ng[k], nw[k]);
        double worst = 0.0;
        for (int64_t i = 0; i < nw[k]; i++) {
            ck_assert_msg(isfinite(got[k][i]), "%s %s: %s[%lld] is %g", c->op, c->direction,
                          names[k], (long long)i, got[k][i]);
            worst = fmax(worst, fabs((double)got[k][i] - want[k][i]));
        }
        printf("%s %s layout %d lbr %d lens %d precision %d kernels %d: %s max abs difference "
               "%.3g (bound %.3g)\n",
               c->op, c->direction, c->layout, c->linear_before_reset, has_lens(c),
               (int)precision, (int)kernels, names[k], worst, tol);
        ck_assert_msg(worst <= tol, "%s %s (precision %d): %s differs by %g > %g", c->op,
                      c->direction, (int)precision, names[k], worst, tol);
        free(want[k]);
        free(got[k]);
    }
}

/* Each case on tcinfer's recurrence and on cuDNN's (or its refusal), and timed. */
static void check_case(const rnn_case *c, tci_precision precision, double tol, bool cudnn_applies) {
    check_case_on(c, precision, tol, TCI_KERNELS_WMMA, OURS);
    check_case_on(c, precision, tol, TCI_KERNELS_LIBRARY, cudnn_applies ? CUDNN : REFUSED);
    check_case_on(c, precision, tol, TCI_KERNELS_AUTO, cudnn_applies ? TIMED : REFUSED);
}

/* cuDNN refuses: sequence_lens, peepholes, GRU linear_before_reset=0, reverse */
static const rnn_case lstm_bi = {"LSTM", 4, "bidirectional", 0, 0, 1, {T, 4, 0}};
static const rnn_case gru_bi = {"GRU", 3, "bidirectional", 0, 0, 0, {5, T, 1}};
static const rnn_case gru_bi_lbr = {"GRU", 3, "bidirectional", 1, 1, 0, {T, 2, 6}};
static const rnn_case lstm_reverse_batch_major = {"LSTM", 4, "reverse", 1, 0, 0, {3, T, 5}};
static const rnn_case rnn_forward = {"RNN", 1, "forward", 0, 0, 0, {T, 1, 4}};
static const rnn_case gru_reverse_full = {"GRU", 3, "reverse", 0, 1, 0, {0, 0, 0}};
static const rnn_case gru_bi_reset_first = {"GRU", 3, "bidirectional", 0, 0, 0, {0, 0, 0}};
static const rnn_case lstm_bi_peep_full = {"LSTM", 4, "bidirectional", 0, 0, 1, {0, 0, 0}};
/* cuDNN applies: no sequence_lens, forward or bidirectional, no peepholes, GRU lbr=1; both
 * layouts (layout 0 bidirectional: cuDNN's Y interleaves the directions, moved to ONNX's) */
static const rnn_case lstm_bi_full = {"LSTM", 4, "bidirectional", 0, 0, 0, {0, 0, 0}};
static const rnn_case lstm_fwd_batch_major = {"LSTM", 4, "forward", 1, 0, 0, {0, 0, 0}};
static const rnn_case gru_bi_lbr_full = {"GRU", 3, "bidirectional", 0, 1, 0, {0, 0, 0}};
static const rnn_case gru_bi_lbr_batch_major = {"GRU", 3, "bidirectional", 1, 1, 0, {0, 0, 0}};
static const rnn_case rnn_bi_full = {"RNN", 1, "bidirectional", 0, 0, 0, {0, 0, 0}};

START_TEST(test_lstm_bidirectional) {
    check_case(&lstm_bi, TCI_PRECISION_FP16, 1e-2, false);
    check_case(&lstm_bi, TCI_PRECISION_BF16, 8e-2, false);
    check_case(&lstm_bi, TCI_PRECISION_FP32, 1e-4, false);
}
END_TEST

START_TEST(test_gru_bidirectional) {
    check_case(&gru_bi, TCI_PRECISION_FP16, 1e-2, false);
    check_case(&gru_bi, TCI_PRECISION_FP32, 1e-4, false);
    check_case(&gru_bi_lbr, TCI_PRECISION_FP16, 1e-2, false);
    check_case(&gru_bi_lbr, TCI_PRECISION_BF16, 8e-2, false);
}
END_TEST

START_TEST(test_reverse_and_rnn) {
    check_case(&lstm_reverse_batch_major, TCI_PRECISION_FP16, 1e-2, false);
    check_case(&rnn_forward, TCI_PRECISION_FP16, 1e-2, false);
    check_case(&rnn_forward, TCI_PRECISION_FP32, 1e-4, false);
}
END_TEST

/* Full-length sequences that cuDNN still cannot compute as ONNX defines them. */
START_TEST(test_cudnn_refusals) {
    check_case(&gru_reverse_full, TCI_PRECISION_FP16, 1e-2, false);
    check_case(&gru_bi_reset_first, TCI_PRECISION_FP16, 1e-2, false);
    check_case(&lstm_bi_peep_full, TCI_PRECISION_FP16, 1e-2, false);
    check_case(&lstm_bi_full, TCI_PRECISION_BF16, 8e-2, false); /* bf16 storage */
}
END_TEST

START_TEST(test_cudnn_lstm) {
    check_case(&lstm_bi_full, TCI_PRECISION_FP16, 1e-2, true);
    check_case(&lstm_bi_full, TCI_PRECISION_FP32, 1e-4, true);
    check_case(&lstm_fwd_batch_major, TCI_PRECISION_FP16, 1e-2, true);
}
END_TEST

START_TEST(test_cudnn_gru_rnn) {
    check_case(&gru_bi_lbr_full, TCI_PRECISION_FP16, 1e-2, true);
    check_case(&gru_bi_lbr_full, TCI_PRECISION_FP32, 1e-4, true);
    check_case(&gru_bi_lbr_batch_major, TCI_PRECISION_FP16, 1e-2, true);
    check_case(&rnn_bi_full, TCI_PRECISION_FP16, 1e-2, true);
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
    tcase_add_test(tc, test_cudnn_refusals);
    tcase_add_test(tc, test_cudnn_lstm);
    tcase_add_test(tc, test_cudnn_gru_rnn);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
