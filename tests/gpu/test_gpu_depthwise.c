/* GPU tests of the NHWC8 depthwise convolution (every path: generic, tiled short and tall) against
 * a plain C fp32 reference, its epilogue (bias, residual, activations), the host packers, the
 * argument checks, and a timing of the MobileNetV2 / EfficientNet-B0 shapes at batch 256. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/depthwise.h"
#include "layers/op.h"

static int64_t round8(int64_t c) { return (c + 7) / 8 * 8; }
static float round_half(float v) { return half_to_float(float_to_half(v)); }

typedef struct {
    int64_t n, c, h, w, r, s, sh, sw, dh, dw, pt, pl, pb, pr;
    bool bias, residual;
    act_kind act;
    float alpha, beta;
} dw_case;

static int64_t out_size(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t k, int64_t stride, int64_t dil) {
    return (in + pad_begin + pad_end - dil * (k - 1) - 1) / stride + 1;
}

static void dw_desc(const dw_case *t, kern_depthwise_path path, kern_depthwise_desc *d) {
    memset(d, 0, sizeof *d);
    d->geom.n = t->n, d->geom.c = t->c, d->geom.h = t->h, d->geom.w = t->w;
    d->geom.out_h = out_size(t->h, t->pt, t->pb, t->r, t->sh, t->dh);
    d->geom.out_w = out_size(t->w, t->pl, t->pr, t->s, t->sw, t->dw);
    d->geom.kernel_h = t->r, d->geom.kernel_w = t->s, d->geom.stride_h = t->sh, d->geom.stride_w = t->sw;
    d->geom.dilation_h = t->dh, d->geom.dilation_w = t->dw, d->geom.pad_top = t->pt, d->geom.pad_left = t->pl;
    d->act = t->act, d->act_alpha = t->alpha, d->act_beta = t->beta;
    d->path = path;
}

/* y (n, oh, ow, Cp) from x (n, h, w, Cp) and w (C, R, S), all fp32 values of fp16 data. */
static void ref_depthwise(const kern_depthwise_desc *d, const float *x, const float *w, const float *bias,
                          const float *z, float *y) {
    const int64_t cp = round8(d->geom.c);
    for (int64_t i = 0; i < d->geom.n; i++)
        for (int64_t oh = 0; oh < d->geom.out_h; oh++)
            for (int64_t ow = 0; ow < d->geom.out_w; ow++)
                for (int64_t ch = 0; ch < cp; ch++) {
                    const int64_t o = ((i * d->geom.out_h + oh) * d->geom.out_w + ow) * cp + ch;
                    if (ch >= d->geom.c) {
                        y[o] = 0;
                        continue;
                    }
                    double acc = 0;
                    for (int64_t r = 0; r < d->geom.kernel_h; r++)
                        for (int64_t s = 0; s < d->geom.kernel_w; s++) {
                            const int64_t ih = oh * d->geom.stride_h - d->geom.pad_top + r * d->geom.dilation_h;
                            const int64_t iw = ow * d->geom.stride_w - d->geom.pad_left + s * d->geom.dilation_w;
                            if (ih < 0 || ih >= d->geom.h || iw < 0 || iw >= d->geom.w) continue;
                            acc += (double)x[((i * d->geom.h + ih) * d->geom.w + iw) * cp + ch] *
                                   w[(ch * d->geom.kernel_h + r) * d->geom.kernel_w + s];
                        }
                    if (bias) acc += bias[ch];
                    if (z) acc += z[o];
                    y[o] = (float)gpu_act_reference(d->act, acc, d->act_alpha, d->act_beta);
                }
}

/* Random NHWC8 fp16 (dt BF16: bf16) tensor (padded channels zero) as its bits and as fp32 values. */
static void random_nhwc8(tci_dtype dt, int64_t pixels, int64_t c, uint64_t seed, uint16_t **bits,
                         float **values) {
    const int64_t cp = round8(c);
    const size_t count = (size_t)(pixels * cp);
    *bits = calloc(count + 1, sizeof **bits);
    *values = calloc(count + 1, sizeof **values);
    float *r = malloc((count + 1) * sizeof *r);
    gpu_fill_random(r, count, seed, -1.0f, 1.0f);
    for (size_t i = 0; i < count; i++)
        if ((int64_t)(i % (size_t)cp) < c) {
            gpu_encode(dt, &r[i], &(*bits)[i], 1);
            gpu_decode(dt, &(*bits)[i], &(*values)[i], 1);
        }
    free(r);
}

/* Runs desc on the GPU with fresh (poisoned) y, in place on z when in_place, and compares every
 * element with the reference: padded channels exactly +0, the rest within fp16 rounding (dt
 * BF16: bf16 storage and weights, within GPU_BF16_TOL, one rounding to 8 significant bits). */
static void check_case_as(tci_dtype dt, const dw_case *t, kern_depthwise_path path, bool in_place,
                          uint64_t seed) {
    kern_depthwise_desc d;
    dw_desc(t, path, &d);
    if (dt == TCI_DTYPE_BFLOAT16) d.dtype = dt;
    const int64_t cp = round8(t->c), taps = t->r * t->s;
    const size_t in_count = (size_t)(t->n * t->h * t->w * cp), out_count = (size_t)(t->n * d.geom.out_h * d.geom.out_w * cp);
    uint16_t *xb, *zb;
    float *x, *z;
    random_nhwc8(dt, t->n * t->h * t->w, t->c, seed, &xb, &x);
    random_nhwc8(dt, t->n * d.geom.out_h * d.geom.out_w, t->c, seed + 1, &zb, &z);
    float *w = malloc((size_t)(t->c * taps + 1) * sizeof *w), *bias = malloc((size_t)(t->c + 1) * sizeof *bias);
    gpu_fill_random(w, (size_t)(t->c * taps), seed + 2, -0.5f, 0.5f);
    gpu_round_to(dt, w, (size_t)(t->c * taps));
    gpu_fill_random(bias, (size_t)t->c, seed + 3, -0.5f, 0.5f);
    uint16_t *wp = malloc((size_t)(taps * cp) * sizeof *wp);
    float *bp = malloc((size_t)cp * sizeof *bp);
    if (dt == TCI_DTYPE_BFLOAT16) ck_assert_tci_ok(kern_depthwise_pack_weights_bf16(&d, w, wp));
    else ck_assert_tci_ok(kern_depthwise_pack_weights(&d, w, wp));
    ck_assert_tci_ok(kern_depthwise_pack_bias(&d, bias, bp));

    void *dx = gpu_upload(xb, in_count * 2), *dw = gpu_upload(wp, (size_t)(taps * cp) * 2);
    void *db = gpu_upload(bp, (size_t)cp * 4);
    void *dz = t->residual ? gpu_upload(zb, out_count * 2) : NULL;
    void *dy = in_place ? dz : gpu_upload(NULL, out_count * 2);
    ck_assert_tci_ok(kern_depthwise_conv(&d, dx, dw, t->bias ? db : NULL, dz, dy, 0));
    gpu_sync();
    uint16_t *yb = malloc(out_count * 2);
    gpu_download(yb, dy, out_count * 2);
    float *want = malloc(out_count * sizeof *want);
    ref_depthwise(&d, x, w, t->bias ? bias : NULL, t->residual ? z : NULL, want);
    for (size_t i = 0; i < out_count; i++) {
        const int64_t ch = (int64_t)(i % (size_t)cp);
        if (ch >= t->c) {
            ck_assert_msg(yb[i] == 0, "case n%lld c%lld %lldx%lld k%lldx%lld path %d: padded channel %lld of "
                          "element %zu is 0x%04x, not zero", (long long)t->n, (long long)t->c, (long long)t->h,
                          (long long)t->w, (long long)t->r, (long long)t->s, (int)path, (long long)ch, i, yb[i]);
            continue;
        }
        float got = 0.0f;
        gpu_decode(dt, &yb[i], &got, 1);
        const float tol = (dt == TCI_DTYPE_BFLOAT16 ? (float)GPU_BF16_TOL : 4e-3f) * fmaxf(1.0f, fabsf(want[i]));
        ck_assert_msg(fabsf(got - want[i]) <= tol,
                      "%s case n%lld c%lld %lldx%lld k%lldx%lld s%lldx%lld d%lldx%lld act %d path %d%s: element %zu "
                      "(pixel %zu, channel %lld): got %g want %g", gpu_dtype_tag(dt), (long long)t->n, (long long)t->c,
                      (long long)t->h, (long long)t->w, (long long)t->r, (long long)t->s, (long long)t->sh,
                      (long long)t->sw, (long long)t->dh, (long long)t->dw, (int)t->act, (int)path,
                      in_place ? " in place" : "", i, i / (size_t)cp, (long long)ch, got, want[i]);
    }
    free(xb);
    free(zb);
    free(x);
    free(z);
    free(w);
    free(bias);
    free(wp);
    free(bp);
    free(yb);
    free(want);
    gpu_free(dx);
    gpu_free(dw);
    gpu_free(db);
    if (dz) gpu_free(dz);
    if (!in_place) gpu_free(dy);
}

static void check_case(const dw_case *t, kern_depthwise_path path, bool in_place, uint64_t seed) {
    check_case_as(TCI_DTYPE_FLOAT16, t, path, in_place, seed);
}

/* n, c, h, w, r, s, stride h/w, dilation h/w, pads top/left/bottom/right, bias, residual, act. */
static const dw_case cases[] = {
    {3, 13, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false, ACT_NONE, 0, 0},
    {3, 32, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, ACT_RELU, 0, 0},
    {3, 96, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false, ACT_CLIP, 0, 6},
    {3, 13, 9, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true, ACT_CLIP, -0.25f, 0.25f},
    {3, 32, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false, ACT_SILU, 0, 0},
    {3, 96, 15, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false, ACT_HARD_SWISH, 0, 0},
    {3, 13, 7, 9, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, true, true, ACT_SIGMOID, 0, 0},
    {3, 32, 11, 9, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, true, false, ACT_SILU, 0, 0},
    {3, 96, 7, 9, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true, true, ACT_LEAKY_RELU, 0.1f, 0},
    {3, 40, 16, 18, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, false, false, ACT_NONE, 0, 0},
    /* dilation (generic path only) */
    {3, 13, 7, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, true, true, ACT_RELU, 0, 0},
    {3, 96, 9, 7, 3, 3, 2, 1, 2, 3, 2, 3, 2, 3, true, false, ACT_SIGMOID, 0, 0},
    /* asymmetric and zero pads (SAME_UPPER / VALID), the rarer activations */
    {3, 13, 7, 9, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, true, false, ACT_TANH, 0, 0},
    {3, 32, 8, 10, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, true, true, ACT_ELU, 0.7f, 0},
    {3, 96, 8, 10, 5, 5, 2, 2, 1, 1, 1, 1, 2, 2, true, false, ACT_GELU, 0, 0},
    {3, 13, 7, 9, 5, 5, 1, 1, 1, 1, 0, 2, 4, 2, false, true, ACT_HARD_SIGMOID, 0.2f, 0.5f},
    {3, 32, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false, ACT_ABS, 0, 0},
    /* other kernel shapes and strides: generic */
    {3, 13, 7, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true, false, ACT_NONE, 0, 0},
    {3, 32, 9, 11, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3, true, false, ACT_RELU, 0, 0},
    {3, 13, 7, 9, 3, 5, 1, 2, 1, 1, 1, 2, 1, 2, true, false, ACT_NONE, 0, 0},
    {3, 32, 7, 9, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, true, false, ACT_NONE, 0, 0},
    /* windows that miss the input entirely (pads larger than the kernel reach) */
    {1, 13, 2, 3, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3, true, true, ACT_NONE, 0, 0},
    /* tall tiles with several row and column tiles, channel groups (c 600: 75 chunks, 3 groups) */
    {2, 600, 15, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, ACT_CLIP, 0, 6},
    {2, 300, 29, 9, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, true, false, ACT_SILU, 0, 0},
    {1, 8, 40, 70, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false, ACT_RELU, 0, 0},
};

static bool tiled_applies(const dw_case *t) {
    return t->r == t->s && (t->r == 3 || t->r == 5) && t->sh == t->sw && (t->sh == 1 || t->sh == 2) &&
           t->dh == 1 && t->dw == 1;
}

START_TEST(test_depthwise_cases) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const dw_case *t = &cases[i];
        kern_depthwise_desc d;
        dw_desc(t, KERN_DEPTHWISE_AUTO, &d);
        ck_assert_int_eq(kern_depthwise_is_tiled(&d), tiled_applies(t));
        check_case(t, KERN_DEPTHWISE_AUTO, false, 1000 + 10 * i);
        check_case(t, KERN_DEPTHWISE_GENERIC, false, 2000 + 10 * i);
        if (tiled_applies(t)) {
            check_case(t, KERN_DEPTHWISE_TILED_SHORT, false, 3000 + 10 * i);
            check_case(t, KERN_DEPTHWISE_TILED_TALL, false, 4000 + 10 * i);
        }
    }
}
END_TEST

/* bf16: every case on every path that applies (the tiled kernels take 8 channels per thread for
 * 3x3 and 4 for 5x5, as in fp16), and in place on the residual. */
START_TEST(test_depthwise_bf16) {
    const tci_dtype bf16 = TCI_DTYPE_BFLOAT16;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const dw_case *t = &cases[i];
        check_case_as(bf16, t, KERN_DEPTHWISE_AUTO, false, 7000 + 10 * i);
        check_case_as(bf16, t, KERN_DEPTHWISE_GENERIC, false, 7100 + 10 * i);
        if (tiled_applies(t)) {
            check_case_as(bf16, t, KERN_DEPTHWISE_TILED_SHORT, false, 7200 + 10 * i);
            check_case_as(bf16, t, KERN_DEPTHWISE_TILED_TALL, false, 7300 + 10 * i);
        }
    }
    const dw_case t3 = {3, 13, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, ACT_RELU, 0, 0};
    const dw_case t5 = {2, 40, 9, 7, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true, true, ACT_SILU, 0, 0};
    for (int p = KERN_DEPTHWISE_AUTO; p <= KERN_DEPTHWISE_TILED_TALL; p++) {
        check_case_as(bf16, &t3, (kern_depthwise_path)p, true, 7500 + p);
        check_case_as(bf16, &t5, (kern_depthwise_path)p, true, 7600 + p);
    }
    kern_depthwise_desc d;
    dw_desc(&t3, KERN_DEPTHWISE_AUTO, &d);
    d.dtype = TCI_DTYPE_INT32;
    ck_assert_tci_error(kern_depthwise_conv(&d, NULL, NULL, NULL, NULL, NULL, 0), TCI_ERR_UNSUPPORTED,
                        "fp16, bf16 or fp32");
}
END_TEST

/* z == y: each thread reads its residual just before it overwrites it. */
START_TEST(test_depthwise_in_place_residual) {
    const dw_case t3 = {3, 13, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, ACT_RELU, 0, 0};
    const dw_case t5 = {2, 40, 9, 7, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true, true, ACT_SILU, 0, 0};
    const dw_case td = {2, 13, 7, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, false, true, ACT_NONE, 0, 0};
    for (int p = KERN_DEPTHWISE_AUTO; p <= KERN_DEPTHWISE_TILED_TALL; p++) {
        check_case(&t3, (kern_depthwise_path)p, true, 5000 + p);
        check_case(&t5, (kern_depthwise_path)p, true, 5100 + p);
    }
    check_case(&td, KERN_DEPTHWISE_AUTO, true, 5200);
}
END_TEST

/* Large enough that AUTO takes the tall tiles (and several row tiles per image). */
START_TEST(test_depthwise_auto_tall) {
    const dw_case t = {8, 96, 112, 112, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, ACT_CLIP, 0, 6};
    check_case(&t, KERN_DEPTHWISE_AUTO, false, 6000);
}
END_TEST

START_TEST(test_depthwise_pack) {
    kern_depthwise_desc d;
    memset(&d, 0, sizeof d);
    d.geom.c = 3, d.geom.kernel_h = 1, d.geom.kernel_w = 2;
    const float w[6] = {1, 2, 3, 4, 5, 6}; /* (C, 1, R, S): channel c has taps {2c+1, 2c+2} */
    uint16_t out[16];
    memset(out, 0xff, sizeof out);
    ck_assert_tci_ok(kern_depthwise_pack_weights(&d, w, out));
    for (int tap = 0; tap < 2; tap++)
        for (int ch = 0; ch < 8; ch++)
            ck_assert_uint_eq(out[tap * 8 + ch], ch < 3 ? float_to_half(w[ch * 2 + tap]) : 0);
    float b[8];
    memset(b, 0xff, sizeof b);
    const float bias[3] = {0.5f, -1, 2};
    ck_assert_tci_ok(kern_depthwise_pack_bias(&d, bias, b));
    for (int ch = 0; ch < 8; ch++) ck_assert_float_eq(b[ch], ch < 3 ? bias[ch] : 0.0f);
    ck_assert_tci_ok(kern_depthwise_pack_bias(&d, NULL, b));
    for (int ch = 0; ch < 8; ch++) ck_assert_float_eq(b[ch], 0.0f);
    memset(out, 0xff, sizeof out);
    ck_assert_tci_ok(kern_depthwise_pack_weights_bf16(&d, w, out));
    for (int tap = 0; tap < 2; tap++)
        for (int ch = 0; ch < 8; ch++)
            ck_assert_uint_eq(out[tap * 8 + ch], ch < 3 ? float_to_bfloat16(w[ch * 2 + tap]) : 0);
    ck_assert_tci_error(kern_depthwise_pack_weights(&d, NULL, out), TCI_ERR_INVALID_ARGUMENT, "NULL pointer");
    ck_assert_tci_error(kern_depthwise_pack_weights_bf16(&d, NULL, out), TCI_ERR_INVALID_ARGUMENT,
                        "kern_depthwise_pack_weights_bf16: NULL pointer");
    ck_assert_tci_error(kern_depthwise_pack_bias(NULL, bias, b), TCI_ERR_INVALID_ARGUMENT, "NULL desc");
    d.geom.kernel_w = 0;
    ck_assert_tci_error(kern_depthwise_pack_weights(&d, w, out), TCI_ERR_INVALID_ARGUMENT, "bad sizes");
}
END_TEST

START_TEST(test_depthwise_errors) {
    static const unsigned char zeros[4096];
    char *buf = gpu_upload(zeros, sizeof zeros);
    char *x = buf, *w = buf + 1024, *y = buf + 2048;
    kern_depthwise_desc d;
    const dw_case t = {1, 8, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, ACT_NONE, 0, 0};
    dw_desc(&t, KERN_DEPTHWISE_AUTO, &d); /* x and y: 4*4*8 halves = 256 bytes */
    ck_assert_tci_ok(kern_depthwise_conv(&d, x, w, NULL, NULL, y, 0));
    gpu_sync();
    ck_assert_tci_error(kern_depthwise_conv(NULL, x, w, NULL, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT, "NULL desc");
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, NULL, 0), TCI_ERR_INVALID_ARGUMENT,
                        "NULL buffer");
    ck_assert_tci_error(kern_depthwise_conv(&d, x + 2, w, NULL, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT,
                        "16-byte aligned");
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, buf + 3076, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT,
                        "16-byte aligned");
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, x + 128, 0), TCI_ERR_INVALID_ARGUMENT,
                        "y overlaps x");
    ck_assert_tci_error(kern_depthwise_conv(&d, x, y + 64, NULL, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT,
                        "y overlaps w");
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, y + 16, y, 0), TCI_ERR_INVALID_ARGUMENT,
                        "partly overlaps");
    d.act = (act_kind)99;
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT,
                        "unknown activation 99");
    d.act = ACT_NONE;
    d.path = (kern_depthwise_path)9;
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT,
                        "unknown path 9");
    d.path = KERN_DEPTHWISE_TILED_SHORT;
    d.geom.w = 0; /* empty input: only the generic kernel */
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, y, 0), TCI_ERR_UNSUPPORTED, "non-empty");
    d.path = KERN_DEPTHWISE_AUTO; /* every tap is padding: y = act(bias) */
    ck_assert_tci_ok(kern_depthwise_conv(&d, NULL, w, NULL, NULL, y, 0));
    gpu_sync();
    d.geom.w = 4;
    d.path = KERN_DEPTHWISE_TILED_TALL;
    d.geom.dilation_w = 2;
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, y, 0), TCI_ERR_UNSUPPORTED, "no tiled kernel");
    d.geom.dilation_w = 0;
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT, "must be >= 1");
    d.geom.dilation_w = 1;
    d.geom.pad_left = -1;
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT,
                        "negative pads");
    d.geom.pad_left = 1;
    d.geom.out_h = -1;
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT,
                        "negative size");
    d.geom.out_h = 4;
    d.geom.stride_h = INT64_MAX / 2;
    ck_assert_tci_error(kern_depthwise_conv(&d, x, w, NULL, NULL, y, 0), TCI_ERR_INVALID_ARGUMENT, "too large");
    d.geom.stride_h = 1;
    d.geom.n = 0; /* nothing to write: no buffer is looked at */
    ck_assert_tci_ok(kern_depthwise_conv(&d, NULL, NULL, NULL, NULL, NULL, 0));
    gpu_free(buf);
}
END_TEST

/* ---- timing: the depthwise layers that dominate MobileNetV2 / EfficientNet-B0 at batch 256 ---- */

typedef struct {
    const char *what;
    int64_t n, c, h, w, k, stride;
    act_kind act;
    kern_depthwise_path path;
} dw_timing;

/* Constant input a (no zero data), random weights and bias; checks sampled outputs (interior and
 * border) against the reference, then times 20 runs after a warm-up. */
static void time_one(const dw_timing *t) {
    kern_depthwise_desc d;
    memset(&d, 0, sizeof d);
    const int64_t pad = t->k / 2, cp = round8(t->c), taps = t->k * t->k;
    d.geom.n = t->n, d.geom.c = t->c, d.geom.h = t->h, d.geom.w = t->w;
    d.geom.out_h = out_size(t->h, pad, pad, t->k, t->stride, 1), d.geom.out_w = out_size(t->w, pad, pad, t->k, t->stride, 1);
    d.geom.kernel_h = d.geom.kernel_w = t->k, d.geom.stride_h = d.geom.stride_w = t->stride, d.geom.dilation_h = d.geom.dilation_w = 1;
    d.geom.pad_top = d.geom.pad_left = pad, d.act = t->act, d.act_alpha = 0, d.act_beta = 6, d.path = t->path;
    const size_t in_bytes = (size_t)(t->n * t->h * t->w * cp) * 2;
    const size_t out_bytes = (size_t)(t->n * d.geom.out_h * d.geom.out_w * cp) * 2;
    float *w = malloc((size_t)(t->c * taps) * sizeof *w), *bias = malloc((size_t)t->c * sizeof *bias);
    gpu_fill_random(w, (size_t)(t->c * taps), 77, -0.5f, 0.5f);
    for (int64_t i = 0; i < t->c * taps; i++) w[i] = round_half(w[i]);
    gpu_fill_random(bias, (size_t)t->c, 78, -0.5f, 0.5f);
    uint16_t *wp = malloc((size_t)(taps * cp) * 2);
    float *bp = malloc((size_t)cp * 4);
    ck_assert_tci_ok(kern_depthwise_pack_weights(&d, w, wp));
    ck_assert_tci_ok(kern_depthwise_pack_bias(&d, bias, bp));
    void *dx = NULL, *dy = gpu_upload(NULL, out_bytes);
    ck_assert_int_eq(cudaMalloc(&dx, in_bytes), cudaSuccess);
    ck_assert_int_eq(cudaMemset(dx, 0x3c, in_bytes), cudaSuccess); /* every half 0x3c3c */
    const float a = half_to_float(0x3c3c);
    void *dw = gpu_upload(wp, (size_t)(taps * cp) * 2), *db = gpu_upload(bp, (size_t)cp * 4);
    ck_assert_tci_ok(kern_depthwise_conv(&d, dx, dw, db, NULL, dy, 0));
    gpu_sync();

    uint64_t s = 12345;
    for (int sample = 0; sample < 300; sample++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t img = (int64_t)((s >> 33) % (uint64_t)t->n);
        const int64_t oh = sample % 3 == 0 ? 0 : (int64_t)((s >> 20) % (uint64_t)d.geom.out_h);
        const int64_t ow = sample % 5 == 0 ? d.geom.out_w - 1 : (int64_t)((s >> 8) % (uint64_t)d.geom.out_w);
        uint16_t got[2048];
        ck_assert_int_le(cp, 2048);
        const size_t at = (size_t)(((img * d.geom.out_h + oh) * d.geom.out_w + ow) * cp);
        gpu_download(got, (const uint16_t *)dy + at, (size_t)cp * 2);
        for (int64_t ch = 0; ch < t->c; ch++) {
            double acc = bias[ch];
            for (int64_t r = 0; r < t->k; r++)
                for (int64_t q = 0; q < t->k; q++) {
                    const int64_t ih = oh * t->stride - pad + r, iw = ow * t->stride - pad + q;
                    if (ih >= 0 && ih < t->h && iw >= 0 && iw < t->w) acc += a * w[(ch * t->k + r) * t->k + q];
                }
            const double want = gpu_act_reference(t->act, acc, 0, 6);
            const float g = half_to_float(got[ch]);
            ck_assert_msg(fabs(g - want) <= 4e-3 * fmax(1, fabs(want)),
                          "%s: image %lld (%lld, %lld) channel %lld: got %g want %g", t->what, (long long)img,
                          (long long)oh, (long long)ow, (long long)ch, g, want);
        }
    }

    cudaEvent_t start, stop;
    ck_assert_int_eq(cudaEventCreate(&start), cudaSuccess);
    ck_assert_int_eq(cudaEventCreate(&stop), cudaSuccess);
    for (int i = 0; i < 3; i++) ck_assert_tci_ok(kern_depthwise_conv(&d, dx, dw, db, NULL, dy, 0));
    const int runs = 20;
    ck_assert_int_eq(cudaEventRecord(start, 0), cudaSuccess);
    for (int i = 0; i < runs; i++) ck_assert_tci_ok(kern_depthwise_conv(&d, dx, dw, db, NULL, dy, 0));
    ck_assert_int_eq(cudaEventRecord(stop, 0), cudaSuccess);
    ck_assert_int_eq(cudaEventSynchronize(stop), cudaSuccess);
    float ms = 0;
    ck_assert_int_eq(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
    ms /= runs;
    printf("depthwise %-32s %-7s %8.3f ms  %7.0f GB/s (x + y)\n", t->what,
           t->path == KERN_DEPTHWISE_GENERIC ? "generic" : "auto", ms,
           (double)(in_bytes + out_bytes) / (ms * 1e6));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    free(w);
    free(bias);
    free(wp);
    free(bp);
    gpu_free(dx);
    gpu_free(dy);
    gpu_free(dw);
    gpu_free(db);
}

START_TEST(test_depthwise_timing) {
    static const dw_timing shapes[] = {
        {"3x3 s1 256x96x112x112", 256, 96, 112, 112, 3, 1, ACT_CLIP, KERN_DEPTHWISE_AUTO},
        {"3x3 s1 256x96x112x112", 256, 96, 112, 112, 3, 1, ACT_CLIP, KERN_DEPTHWISE_GENERIC},
        {"3x3 s2 256x96x112x112", 256, 96, 112, 112, 3, 2, ACT_CLIP, KERN_DEPTHWISE_AUTO},
        {"3x3 s1 256x576x14x14", 256, 576, 14, 14, 3, 1, ACT_CLIP, KERN_DEPTHWISE_AUTO},
        {"3x3 s2 256x576x14x14", 256, 576, 14, 14, 3, 2, ACT_CLIP, KERN_DEPTHWISE_AUTO},
        {"3x3 s1 1x96x112x112", 1, 96, 112, 112, 3, 1, ACT_CLIP, KERN_DEPTHWISE_AUTO},
        {"5x5 s2 256x144x56x56", 256, 144, 56, 56, 5, 2, ACT_SILU, KERN_DEPTHWISE_AUTO},
        {"5x5 s1 256x672x14x14", 256, 672, 14, 14, 5, 1, ACT_SILU, KERN_DEPTHWISE_AUTO},
        {"5x5 s1 256x1152x7x7", 256, 1152, 7, 7, 5, 1, ACT_SILU, KERN_DEPTHWISE_AUTO},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) time_one(&shapes[i]);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_depthwise");
    Suite *s = suite_create("gpu_depthwise");
    TCase *tc = tcase_create("depthwise");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_depthwise_pack);
    tcase_add_test(tc, test_depthwise_errors);
    tcase_add_test(tc, test_depthwise_cases);
    tcase_add_test(tc, test_depthwise_in_place_residual);
    tcase_add_test(tc, test_depthwise_bf16);
    tcase_add_test(tc, test_depthwise_auto_tall);
    tcase_add_test(tc, test_depthwise_timing);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
