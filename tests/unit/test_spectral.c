/* The FFTs (fft.c: radix-2 and Bluestein) against a direct DFT in long double at lengths the
 * conformance cases do not reach, and DFT, STFT and MelWeightMatrix (spectral.c): hand-computed
 * values and the errors. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "layers/fft.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT

START_TEST(test_fft_against_direct_dft) {
    const int64_t lengths[] = {1, 2, 3, 5, 8, 10, 16, 17, 31, 64, 100, 127, 128, 1000, 4099};
    uint64_t seed = 12345;
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
        int64_t n = lengths[t];
        double complex *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        ck_assert(x && y);
        for (int64_t k = 0; k < n; k++) {
            double v[2];
            for (int i = 0; i < 2; i++) {
                seed = seed * 6364136223846793005u + 1442695040888963407u;
                v[i] = (double)(seed >> 11) / 9007199254740992.0 - 0.5;
            }
            x[k] = y[k] = CMPLX(v[0], v[1]);
        }
        fft_plan fp;
        ck_assert(fft_plan_init(&fp, n));
        fft_run(&fp, y, false);
        double worst = 0, scale = 0;
        for (int64_t k = 0; k < n; k++) {
            long double re = 0, im = 0;
            for (int64_t j = 0; j < n; j++) {
                long double a = -2.0L * 3.14159265358979323846264338327950288L *
                                (long double)((j * k) % n) / (long double)n;
                re += creall(x[j]) * cosl(a) - cimagl(x[j]) * sinl(a);
                im += creall(x[j]) * sinl(a) + cimagl(x[j]) * cosl(a);
            }
            double e = cabs(y[k] - CMPLX((double)re, (double)im));
            if (e > worst) worst = e;
            if (cabs(y[k]) > scale) scale = cabs(y[k]);
        }
        ck_assert_msg(worst <= 1e-12 * (scale > 1 ? scale : 1), "n=%lld: error %g of %g",
                      (long long)n, worst, scale);
        /* the inverse (unnormalised) brings the input back n times */
        fft_run(&fp, y, true);
        for (int64_t k = 0; k < n; k++)
            ck_assert_msg(cabs(y[k] / (double)n - x[k]) < 1e-12, "n=%lld: inverse at %lld",
                          (long long)n, (long long)k);
        fft_plan_free(&fp);
        free(x);
        free(y);
    }
    fft_plan fp;
    ck_assert(!fft_plan_init(&fp, 0));
}
END_TEST

/* Runs DFT-20 on x (real: c 1) with the optional dft_length / axis (< 0 or INT64_MIN: absent). */
static tci_status run_dft(ir_graph *g, int inverse, int onesided, const tci_tensor *x,
                          int64_t length, int64_t axis, tci_tensor *out) {
    static int64_t len_v, axis_v;
    len_v = length;
    axis_v = axis;
    ir_node *n = th_node(g, "DFT", 20, 3, 1);
    if (inverse) th_attr_int(g, n, "inverse", 1);
    if (onesided) th_attr_int(g, n, "onesided", 1);
    tci_tensor in[3] = {*x, th_tensor(TCI_DTYPE_UNDEFINED, 0, NULL, NULL),
                        th_tensor(TCI_DTYPE_UNDEFINED, 0, NULL, NULL)};
    if (length >= 0) in[1] = th_tensor(TCI_DTYPE_INT64, 0, NULL, &len_v);
    if (axis != INT64_MIN) in[2] = th_tensor(TCI_DTYPE_INT64, 0, NULL, &axis_v);
    return th_run(g, n, in, out);
}

START_TEST(test_dft_values) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float real4[4] = {1, 2, 3, 4};
    tci_tensor x = th_tensor(F, 3, (const int64_t[]){1, 4, 1}, real4);
    /* [1 2 3 4] -> [10, -2+2i, -2, -2-2i]; the default axis -2 */
    ck_assert_tci_ok(run_dft(g, 0, 0, &x, -1, INT64_MIN, out));
    th_assert_dims(&out[0], 3, (const int64_t[]){1, 4, 2});
    th_assert_near(out[0].data, (const float[]){10, 0, -2, 2, -2, 0, -2, -2}, 8, 1e-6f);
    th_free(out, 1);
    /* one-sided, zero-padded to 6: [1 2 3 4 0 0] -> bins 0..3 */
    ck_assert_tci_ok(run_dft(g, 0, 1, &x, 6, 1, out));
    th_assert_dims(&out[0], 3, (const int64_t[]){1, 4, 2});
    const float s3 = 1.7320508f;
    th_assert_near(out[0].data,
                   (const float[]){10, 0, -3.5f, -2.5f * s3, 2.5f, 0.5f * s3, -2, 0}, 8, 1e-5f);
    th_free(out, 1);
    /* truncated to 2: [1 2] -> [3, -1] */
    ck_assert_tci_ok(run_dft(g, 0, 0, &x, 2, -2, out));
    th_assert_near(out[0].data, (const float[]){3, 0, -1, 0}, 4, 1e-6f);
    th_free(out, 1);
    /* IRFFT of an odd length: [6, -1.5 + 0.866i] is the half spectrum of [1 2 3] */
    const float half[4] = {6, 0, -1.5f, 0.8660254f};
    tci_tensor h = th_tensor(F, 3, (const int64_t[]){1, 2, 2}, half);
    ck_assert_tci_ok(run_dft(g, 1, 1, &h, 3, 1, out));
    th_assert_dims(&out[0], 3, (const int64_t[]){1, 3, 1});
    th_assert_near(out[0].data, (const float[]){1, 2, 3}, 3, 1e-6f);
    th_free(out, 1);
    /* its default length is 2 * (2 - 1) = 2: [6, -1.5] -> [2.25, 3.75] */
    ck_assert_tci_ok(run_dft(g, 1, 1, &h, -1, 1, out));
    th_assert_near(out[0].data, (const float[]){2.25f, 3.75f}, 2, 1e-6f);
    th_free(out, 1);
    /* the inverse of the forward transform, complex, along axis 0 of (4, 1, 2) */
    const float spec[8] = {10, 0, -2, 2, -2, 0, -2, -2};
    tci_tensor sp = th_tensor(F, 3, (const int64_t[]){4, 1, 2}, spec);
    ck_assert_tci_ok(run_dft(g, 1, 0, &sp, -1, 0, out));
    th_assert_near(out[0].data, (const float[]){1, 0, 2, 0, 3, 0, 4, 0}, 8, 1e-6f);
    th_free(out, 1);
    /* opset 17: axis is an attribute (default 1) */
    ir_node *n = th_node(g, "DFT", 17, 1, 1);
    ck_assert_tci_ok(th_run(g, n, &x, out));
    ck_assert_int_eq(n->since_version, 17);
    th_assert_near(out[0].data, (const float[]){10, 0, -2, 2, -2, 0, -2, -2}, 8, 1e-6f);
    th_free(out, 1);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_dft_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float v[8] = {0};
    tci_tensor real = th_tensor(F, 3, (const int64_t[]){1, 4, 1}, v);
    tci_tensor cplx = th_tensor(F, 3, (const int64_t[]){1, 4, 2}, v);
    tci_tensor three = th_tensor(F, 3, (const int64_t[]){1, 2, 3}, v);
    ck_assert_tci_error(run_dft(g, 0, 1, &cplx, -1, 1, out), TCI_ERR_INVALID_MODEL,
                        "onesided=1 with inverse=0 (RFFT) takes a real input");
    ck_assert_tci_error(run_dft(g, 1, 1, &real, -1, 1, out), TCI_ERR_INVALID_MODEL,
                        "onesided=1 with inverse=1 (IRFFT) takes a complex input");
    ck_assert_tci_error(run_dft(g, 0, 0, &real, -1, -1, out), TCI_ERR_INVALID_MODEL,
                        "axis is -1; must be in [-3, -2] or [0, 1]");
    ck_assert_tci_error(run_dft(g, 0, 0, &real, -1, 2, out), TCI_ERR_INVALID_MODEL,
                        "axis is 2");
    ck_assert_tci_error(run_dft(g, 0, 0, &real, 0, 1, out), TCI_ERR_INVALID_MODEL,
                        "dft_length is 0; must be in [1, ");
    ck_assert_tci_error(run_dft(g, 0, 0, &three, -1, 1, out), TCI_ERR_INVALID_MODEL,
                        "the input's last dim is 3");
    /* a one-value half spectrum has no default IRFFT length */
    tci_tensor one = th_tensor(F, 3, (const int64_t[]){1, 1, 2}, v);
    ck_assert_tci_error(run_dft(g, 1, 1, &one, -1, 1, out), TCI_ERR_INVALID_MODEL,
                        "the IRFFT's default length 2 * (dim - 1) is 0");
    const double d[4] = {0};
    tci_tensor dbl = th_tensor(TCI_DTYPE_DOUBLE, 3, (const int64_t[]){1, 4, 1}, d);
    ck_assert_tci_error(run_dft(g, 0, 0, &dbl, -1, 1, out), TCI_ERR_UNSUPPORTED, "input 0");
    /* opset 17 takes no axis input, 20 no axis attribute */
    ir_node *n = th_node(g, "DFT", 17, 3, 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL, "input");
    n = th_node(g, "DFT", 20, 1, 1);
    th_attr_int(g, n, "axis", 1);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED,
                        "unsupported attribute 'axis'");
    n = th_node(g, "DFT", 20, 1, 1);
    th_attr_int(g, n, "inverse", 2);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL, "inverse");
    ir_graph_destroy(g);
}
END_TEST

/* STFT of signal (b, len, c) with frame_step and the optional window / frame_length. */
static tci_status run_stft(ir_graph *g, int onesided, const tci_tensor *signal, int64_t step,
                           const tci_tensor *window, int64_t length, tci_tensor *out) {
    static int64_t step_v, len_v;
    step_v = step;
    len_v = length;
    ir_node *n = th_node(g, "STFT", 17, 4, 1);
    if (onesided >= 0) th_attr_int(g, n, "onesided", onesided);
    tci_tensor in[4] = {*signal, th_tensor(TCI_DTYPE_INT64, 0, NULL, &step_v),
                        th_tensor(TCI_DTYPE_UNDEFINED, 0, NULL, NULL),
                        th_tensor(TCI_DTYPE_UNDEFINED, 0, NULL, NULL)};
    if (window) in[2] = *window;
    if (length >= 0) in[3] = th_tensor(TCI_DTYPE_INT64, 0, NULL, &len_v);
    return th_run(g, n, in, out);
}

START_TEST(test_stft) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    const float five[5] = {1, 2, 3, 4, 5};
    tci_tensor sig = th_tensor(F, 3, (const int64_t[]){1, 5, 1}, five);
    /* frames [1 2] and [3 4] (5 left over), one-sided by default: bins 0 and 1 */
    ck_assert_tci_ok(run_stft(g, -1, &sig, 2, NULL, 2, out));
    th_assert_dims(&out[0], 4, (const int64_t[]){1, 2, 2, 2});
    th_assert_near(out[0].data, (const float[]){3, 0, -1, 0, 7, 0, -1, 0}, 8, 1e-6f);
    th_free(out, 1);
    /* a window of 3 sets the frame length; two-sided: 3 bins; frames [1 2 3], [3 4 5] */
    const float win[3] = {1, 0, 1};
    tci_tensor w = th_tensor(F, 1, (const int64_t[]){3}, win);
    ck_assert_tci_ok(run_stft(g, 0, &sig, 2, &w, -1, out));
    th_assert_dims(&out[0], 4, (const int64_t[]){1, 2, 3, 2});
    const float c = -0.5f, s = 0.8660254f;
    /* [a 0 b] -> a + b, a + b e^{-4 pi i / 3}, a + b e^{-8 pi i / 3} */
    th_assert_near(out[0].data,
                   (const float[]){4, 0, 1 + 3 * c, 3 * s, 1 + 3 * c, -3 * s, 8, 0, 3 + 5 * c, 5 * s,
                                   3 + 5 * c, -5 * s},
                   12, 1e-5f);
    th_free(out, 1);
    /* neither window nor frame_length: one frame of the whole signal */
    ck_assert_tci_ok(run_stft(g, 1, &sig, 1, NULL, -1, out));
    th_assert_dims(&out[0], 4, (const int64_t[]){1, 1, 3, 2});
    th_free(out, 1);
    /* errors */
    ck_assert_tci_error(run_stft(g, 1, &sig, 2, &w, 4, out), TCI_ERR_INVALID_MODEL,
                        "window has 3 values but frame_length is 4");
    ck_assert_tci_error(run_stft(g, 1, &sig, 2, NULL, 6, out), TCI_ERR_INVALID_MODEL,
                        "the signal (5 samples) is shorter than a frame (6)");
    ck_assert_tci_error(run_stft(g, 1, &sig, 0, NULL, 2, out), TCI_ERR_INVALID_MODEL,
                        "frame_step is 0");
    const float ten[10] = {0};
    tci_tensor cs = th_tensor(F, 3, (const int64_t[]){1, 5, 2}, ten);
    ck_assert_tci_error(run_stft(g, -1, &cs, 1, NULL, 2, out), TCI_ERR_INVALID_MODEL,
                        "onesided=1 takes a real signal");
    tci_tensor flat = th_tensor(F, 2, (const int64_t[]){1, 5}, five);
    ck_assert_tci_error(run_stft(g, 1, &flat, 1, NULL, 2, out), TCI_ERR_INVALID_MODEL,
                        "signal must be 3-D");
    ir_graph_destroy(g);
}
END_TEST

static tci_status run_mel(ir_graph *g, int dtype, int64_t bins, int64_t dft, int64_t rate,
                          float lo, float hi, tci_tensor *out) {
    static int64_t v[3];
    static float e[2];
    v[0] = bins;
    v[1] = dft;
    v[2] = rate;
    e[0] = lo;
    e[1] = hi;
    ir_node *n = th_node(g, "MelWeightMatrix", 17, 5, 1);
    if (dtype) th_attr_int(g, n, "output_datatype", dtype);
    tci_tensor in[5] = {th_tensor(TCI_DTYPE_INT64, 0, NULL, &v[0]),
                        th_tensor(TCI_DTYPE_INT64, 0, NULL, &v[1]),
                        th_tensor(TCI_DTYPE_INT64, 0, NULL, &v[2]), th_tensor(F, 0, NULL, &e[0]),
                        th_tensor(F, 0, NULL, &e[1])};
    return th_run(g, n, in, out);
}

START_TEST(test_mel_weight_matrix) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor out[1];
    /* 2 bins over 0..4000 Hz of a 16-point DFT at 8 kHz: 4 points 0, 1, 2, 3 quarters of
     * mel(4000) = 2146.1 (ONNX's step: (high - low) / (bins + 2)), at 0, 427, 1114, 2220 Hz, map
     * to spectrogram bins floor(17 f / 8000): 0, 0, 2, 4 (the first filter rises from nothing) */
    ck_assert_tci_ok(run_mel(g, 0, 2, 16, 8000, 0, 4000, out));
    th_assert_dims(&out[0], 2, (const int64_t[]){9, 2});
    const float *y = out[0].data;
    /* each filter peaks at 1 */
    for (int i = 0; i < 2; i++) {
        float peak = 0;
        for (int j = 0; j < 9; j++) peak = y[j * 2 + i] > peak ? y[j * 2 + i] : peak;
        ck_assert(peak == 1.0f);
    }
    th_assert_near(y, (const float[]){1, 0, 0.5f, 0.5f, 0, 1, 0, 0.5f, 0, 0}, 10, 0);
    th_free(out, 1);
    /* float16 output */
    ck_assert_tci_ok(run_mel(g, TCI_DTYPE_FLOAT16, 2, 16, 8000, 0, 4000, out));
    ck_assert_int_eq(out[0].dtype, TCI_DTYPE_FLOAT16);
    ck_assert_uint_eq(((uint16_t *)out[0].data)[0], 0x3c00);
    ck_assert_uint_eq(((uint16_t *)out[0].data)[2], 0x3800);
    th_free(out, 1);
    /* an upper edge far past Nyquist lands past the last bin */
    ck_assert_tci_error(run_mel(g, 0, 4, 16, 8000, 0, 20000, out), TCI_ERR_INVALID_ARGUMENT,
                        "falls outside the 9 spectrogram bins");
    ck_assert_tci_error(run_mel(g, 0, 0, 16, 8000, 0, 4000, out), TCI_ERR_INVALID_MODEL,
                        "num_mel_bins is 0");
    ck_assert_tci_error(run_mel(g, TCI_DTYPE_INT32, 2, 16, 8000, 0, 4000, out),
                        TCI_ERR_UNSUPPORTED, "attribute 'output_datatype' is INT32");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("spectral");
    TCase *t = tcase_create("spectral");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_fft_against_direct_dft);
    tcase_add_test(t, test_dft_values);
    tcase_add_test(t, test_dft_errors);
    tcase_add_test(t, test_stft);
    tcase_add_test(t, test_mel_weight_matrix);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
