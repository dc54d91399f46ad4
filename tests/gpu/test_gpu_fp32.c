/* GPU tests of the fp32 variants (dtype TCI_DTYPE_FLOAT) of the layout, pooling, resize,
 * depthwise, softmax, LayerNormalization and reduce kernels against double-precision C
 * references on channel tails (C = 3, 13), and of the dtype rule: 0 and TCI_DTYPE_FLOAT16 give
 * the fp16 kernels bit for bit, anything else is refused. Outputs are poisoned (NaN) first;
 * padded channels must come back as +0. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/depthwise.h"
#include "kernels/layout.h"
#include "kernels/norm.h"
#include "kernels/pool.h"
#include "kernels/resize.h"
#include "layers/op.h"

/* fp32 bound: |got - want| <= TOL * scale, scale >= 1 or the sum of the magnitudes that went
 * into the value (the conditioning of a sum), whichever the check names. */
#define TOL 1e-5

static int64_t round8(int64_t c) { return (c + 7) / 8 * 8; }

static float *random_floats(size_t n, uint64_t seed, float lo, float hi) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    gpu_fill_random(v, n, seed, lo, hi);
    return v;
}

static float *download_floats(const void *device, size_t n) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    gpu_download(v, device, n * sizeof *v);
    return v;
}

static uint16_t *download_bits(const void *device, size_t n) {
    uint16_t *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    gpu_download(v, device, n * sizeof *v);
    return v;
}

static uint16_t *to_half(const float *x, size_t n) {
    uint16_t *h = malloc((n ? n : 1) * sizeof *h);
    ck_assert_ptr_nonnull(h);
    gpu_to_half(x, h, n);
    return h;
}

/* Rounds x to fp16 values in place (the inputs of the fp16 comparisons). */
static void round_to_half(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = half_to_float(float_to_half(x[i]));
}

/* +0.0f exactly (not -0, not NaN). */
static bool is_plus_zero(float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits == 0;
}

/* Logical NCHW -> NHWC8 fp32 on the host, padded channels zero. */
static float *host_nhwc8(const float *x, int64_t n, int64_t c, int64_t h, int64_t w) {
    int64_t cp = round8(c);
    float *y = calloc((size_t)(n * h * w * cp) + 1, sizeof *y);
    ck_assert_ptr_nonnull(y);
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t s = 0; s < h * w; s++)
                y[(i * h * w + s) * cp + ch] = x[(i * c + ch) * h * w + s];
    return y;
}

/* NHWC8 output check: channels >= c exactly +0, the rest within TOL * scale[i] of want[i]
 * (scale NULL: max(1, |want|)); bit-exact (as floats) when exact. */
static void check_nhwc8(const char *what, const float *got, const double *want,
                        const double *scale, size_t count, int64_t c, bool exact) {
    int64_t cp = round8(c);
    for (size_t i = 0; i < count; i++) {
        int64_t ch = (int64_t)(i % (size_t)cp);
        if (ch >= c) {
            ck_assert_msg(is_plus_zero(got[i]), "%s: padded channel %lld at %zu is %g", what,
                          (long long)ch, i, (double)got[i]);
            continue;
        }
        if (exact) {
            ck_assert_msg(got[i] == (float)want[i], "%s: [%zu] (channel %lld) = %.9g, want %.9g",
                          what, i, (long long)ch, (double)got[i], want[i]);
            continue;
        }
        double s = scale ? scale[i] : fmax(1.0, fabs(want[i]));
        ck_assert_msg(fabs((double)got[i] - want[i]) <= TOL * s,
                      "%s: [%zu] (channel %lld) = %.9g, want %.9g (scale %g)", what, i,
                      (long long)ch, (double)got[i], want[i], s);
    }
}

/* ================================================================ layout */

static const int64_t layout_shapes[][4] = {
    {2, 13, 7, 9},   /* direct path (Cp 16) */
    {1, 3, 31, 37},  /* Cp 8 */
    {3, 70, 11, 13}, /* tiled path, channel tail in the last tile */
    {1, 129, 33, 2}, /* tiled, 17 chunks */
};

START_TEST(test_layout_fp32) {
    for (size_t t = 0; t < sizeof layout_shapes / sizeof layout_shapes[0]; t++) {
        const int64_t n = layout_shapes[t][0], c = layout_shapes[t][1], h = layout_shapes[t][2],
                      w = layout_shapes[t][3], cp = round8(c);
        const size_t dense = (size_t)(n * c * h * w), padded = (size_t)(n * h * w * cp);
        float *x = random_floats(dense, 700 + t, -3, 3);
        float *want = host_nhwc8(x, n, c, h, w);
        uint16_t *xh = to_half(x, dense);
        void *dx = gpu_upload(x, dense * 4), *dxh = gpu_upload(xh, dense * 2);

        /* fp32 dense -> fp32 NHWC8 -> fp32 dense: exact, padding +0 */
        void *dy = gpu_upload(NULL, padded * 4), *dz = gpu_upload(NULL, dense * 4);
        ck_assert_tci_ok(kern_nchw_f32_to_nhwc8_f32(dx, dy, n, c, h, w, 0));
        ck_assert_tci_ok(kern_nhwc8_f32_to_nchw_f32(dy, dz, n, c, h, w, 0));
        gpu_sync();
        float *y = download_floats(dy, padded), *z = download_floats(dz, dense);
        ck_assert_msg(memcmp(y, want, padded * 4) == 0, "shape %zu: fp32 NHWC8 differs", t);
        ck_assert_msg(memcmp(z, x, dense * 4) == 0, "shape %zu: fp32 round trip differs", t);

        /* the generic entry points, fp32 both sides: the same bytes */
        void *dy2 = gpu_upload(NULL, padded * 4), *dz2 = gpu_upload(NULL, dense * 4);
        const tci_dtype f = TCI_DTYPE_FLOAT;
        ck_assert_tci_ok(kern_nchw_to_nhwc8(dx, f, dy2, f, n, c, h, w, 0));
        ck_assert_tci_ok(kern_nhwc8_to_nchw(dy2, f, dz2, f, n, c, h, w, 0));
        gpu_sync();
        float *y2 = download_floats(dy2, padded), *z2 = download_floats(dz2, dense);
        ck_assert_msg(memcmp(y2, want, padded * 4) == 0, "shape %zu: generic fp32 NHWC8", t);
        ck_assert_msg(memcmp(z2, x, dense * 4) == 0, "shape %zu: generic fp32 dense", t);

        /* fp16 dense -> fp32 NHWC8 (exact widening) and fp32 NHWC8 -> fp16 dense (rounding) */
        void *dy3 = gpu_upload(NULL, padded * 4), *dz3 = gpu_upload(NULL, dense * 2);
        ck_assert_tci_ok(kern_nchw_to_nhwc8(dxh, 0, dy3, TCI_DTYPE_FLOAT, n, c, h, w, 0));
        ck_assert_tci_ok(kern_nhwc8_to_nchw(dy, TCI_DTYPE_FLOAT, dz3, 0, n, c, h, w, 0));
        gpu_sync();
        float *y3 = download_floats(dy3, padded);
        uint16_t *z3 = download_bits(dz3, dense);
        for (size_t i = 0; i < padded; i++) {
            int64_t ch = (int64_t)(i % (size_t)cp);
            float ref = ch < c ? half_to_float(float_to_half(want[i])) : 0.0f;
            ck_assert_msg(memcmp(&y3[i], &ref, 4) == 0,
                          "shape %zu: fp16 -> fp32 NHWC8 [%zu] %g vs %g", t, i, (double)y3[i],
                          (double)ref);
        }
        ck_assert_msg(memcmp(z3, xh, dense * 2) == 0, "shape %zu: fp32 NHWC8 -> fp16 dense", t);

        /* dtype 0 / FLOAT16 on the NHWC8 side is the fp16 layout of the legacy functions */
        void *d16a = gpu_upload(NULL, padded * 2), *d16b = gpu_upload(NULL, padded * 2),
             *d16c = gpu_upload(NULL, padded * 2);
        void *dza = gpu_upload(NULL, dense * 4), *dzb = gpu_upload(NULL, dense * 4);
        ck_assert_tci_ok(kern_nchw_f32_to_nhwc8(dx, d16a, n, c, h, w, 0));
        ck_assert_tci_ok(kern_nchw_to_nhwc8(dx, TCI_DTYPE_FLOAT, d16b, 0, n, c, h, w, 0));
        ck_assert_tci_ok(kern_nchw_to_nhwc8(dxh, 0, d16c, TCI_DTYPE_FLOAT16, n, c, h, w, 0));
        ck_assert_tci_ok(kern_nhwc8_to_nchw_f32(d16a, dza, n, c, h, w, 0));
        ck_assert_tci_ok(kern_nhwc8_to_nchw(d16a, 0, dzb, TCI_DTYPE_FLOAT, n, c, h, w, 0));
        gpu_sync();
        uint16_t *ha = download_bits(d16a, padded), *hb = download_bits(d16b, padded),
                 *hc = download_bits(d16c, padded);
        float *za = download_floats(dza, dense), *zb = download_floats(dzb, dense);
        ck_assert_msg(memcmp(ha, hb, padded * 2) == 0, "shape %zu: dtype 0 differs", t);
        ck_assert_msg(memcmp(ha, hc, padded * 2) == 0, "shape %zu: fp16 -> fp16 differs", t);
        ck_assert_msg(memcmp(za, zb, dense * 4) == 0, "shape %zu: fp16 NHWC8 -> fp32", t);
        for (size_t i = 0; i < padded; i++)
            if ((int64_t)(i % (size_t)cp) >= c) ck_assert_int_eq(ha[i], 0);

        free(x), free(want), free(xh), free(y), free(z), free(y2), free(z2), free(y3), free(z3);
        free(ha), free(hb), free(hc), free(za), free(zb);
        gpu_free(dx), gpu_free(dxh), gpu_free(dy), gpu_free(dz), gpu_free(dy2), gpu_free(dz2);
        gpu_free(dy3), gpu_free(dz3), gpu_free(d16a), gpu_free(d16b), gpu_free(d16c);
        gpu_free(dza), gpu_free(dzb);
    }
}
END_TEST

START_TEST(test_layout_fp32_errors) {
    static const unsigned char zeros[256];
    char *d = gpu_upload(zeros, sizeof zeros);
    const tci_dtype f = TCI_DTYPE_FLOAT;
    ck_assert_tci_error(kern_nchw_to_nhwc8(d, TCI_DTYPE_INT64, d + 128, f, 1, 3, 2, 2, 0),
                        TCI_ERR_UNSUPPORTED, "int64");
    ck_assert_tci_error(kern_nhwc8_to_nchw(d, f, d + 128, TCI_DTYPE_DOUBLE, 1, 3, 2, 2, 0),
                        TCI_ERR_UNSUPPORTED, "kern_nhwc8_to_nchw: dtype double");
    ck_assert_tci_error(kern_nchw_f32_to_nhwc8_f32((float *)d, (float *)(d + 4), 1, 3, 2, 2, 0),
                        TCI_ERR_INVALID_ARGUMENT, "not 16-byte aligned");
    ck_assert_tci_error(kern_nhwc8_f32_to_nchw_f32(NULL, (float *)d, 1, 3, 2, 2, 0),
                        TCI_ERR_INVALID_ARGUMENT, "NULL buffer");
    ck_assert_tci_ok(kern_nhwc8_f32_to_nchw_f32(NULL, NULL, 0, 3, 2, 2, 0));
    gpu_free(d);
}
END_TEST

/* ================================================================ pooling */

typedef struct {
    int64_t n, c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    bool ceil_mode;
} pool_case;

static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                        bool ceil_mode) {
    int64_t span = in + pb + pe - ((k - 1) * d + 1);
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pb) o--;
    return o;
}

static kern_pool2d_desc pool_desc(const pool_case *pc, pool_kind mode, int cip, tci_dtype dt) {
    kern_pool2d_desc p;
    memset(&p, 0, sizeof p);
    p.mode = mode, p.count_include_pad = cip, p.dtype = dt;
    p.geom.n = pc->n, p.geom.c = pc->c, p.geom.h = pc->h, p.geom.w = pc->w;
    p.geom.kernel_h = pc->kh, p.geom.kernel_w = pc->kw, p.geom.stride_h = pc->sh, p.geom.stride_w = pc->sw;
    p.geom.dilation_h = pc->dh, p.geom.dilation_w = pc->dw;
    p.geom.pad_top = pc->pt, p.geom.pad_left = pc->pl, p.geom.pad_bottom = pc->pb, p.geom.pad_right = pc->pr;
    p.geom.out_h = pool_out(pc->h, pc->kh, pc->sh, pc->dh, pc->pt, pc->pb, pc->ceil_mode);
    p.geom.out_w = pool_out(pc->w, pc->kw, pc->sw, pc->dw, pc->pl, pc->pr, pc->ceil_mode);
    return p;
}

/* want / scale over NHWC8 (n, out_h, out_w, Cp) from x NHWC8; max windows that miss the input
 * give lowest (the storage type's lowest finite value). */
static void pool_reference(const kern_pool2d_desc *p, const float *x, double lowest, double *want,
                           double *scale) {
    int64_t cp = round8(p->geom.c);
    for (int64_t i = 0; i < p->geom.n; i++)
        for (int64_t oh = 0; oh < p->geom.out_h; oh++)
            for (int64_t ow = 0; ow < p->geom.out_w; ow++)
                for (int64_t ch = 0; ch < cp; ch++) {
                    int64_t hs = oh * p->geom.stride_h - p->geom.pad_top, ws = ow * p->geom.stride_w - p->geom.pad_left;
                    double acc = p->mode == POOL_MAX ? -INFINITY : 0.0, mag = 0.0;
                    int64_t taps = 0, ch_ = 0, cw_ = 0;
                    for (int64_t a = 0; a < p->geom.kernel_h; a++)
                        if (hs + a * p->geom.dilation_h < p->geom.h + p->geom.pad_bottom) ch_++;
                    for (int64_t b = 0; b < p->geom.kernel_w; b++)
                        if (ws + b * p->geom.dilation_w < p->geom.w + p->geom.pad_right) cw_++;
                    for (int64_t a = 0; a < p->geom.kernel_h; a++)
                        for (int64_t b = 0; b < p->geom.kernel_w; b++) {
                            int64_t ih = hs + a * p->geom.dilation_h, iw = ws + b * p->geom.dilation_w;
                            if (ih < 0 || ih >= p->geom.h || iw < 0 || iw >= p->geom.w) continue;
                            double v = x[((i * p->geom.h + ih) * p->geom.w + iw) * cp + ch];
                            taps++;
                            mag += fabs(v);
                            acc = p->mode == POOL_MAX ? fmax(acc, v) : acc + v;
                        }
                    size_t o = (size_t)(((i * p->geom.out_h + oh) * p->geom.out_w + ow) * cp + ch);
                    if (p->mode == POOL_MAX) {
                        want[o] = taps ? acc : lowest;
                    } else {
                        int64_t div = p->count_include_pad ? ch_ * cw_ : taps;
                        want[o] = div ? acc / (double)div : 0.0;
                        mag = div ? mag / (double)div : 0.0;
                    }
                    scale[o] = 1.0 + mag;
                }
}

static const pool_case pool_cases[] = {
    {2, 13, 9, 11, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true},  /* ceil windows past the pads */
    {1, 3, 8, 8, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false},
    {2, 13, 7, 6, 3, 2, 1, 2, 2, 1, 2, 0, 2, 1, true},   /* dilation, asymmetric pads */
    {1, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},   /* 1x1 windows on the pads: empty */
    {1, 70, 5, 5, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0, false},  /* one window, many chunks */
};

static void check_pool_case(const pool_case *pc, pool_kind mode, int cip, uint64_t seed) {
    kern_pool2d_desc p = pool_desc(pc, mode, cip, TCI_DTYPE_FLOAT);
    const int64_t cp = round8(pc->c);
    const size_t nin = (size_t)(pc->n * pc->h * pc->w * cp),
                 nout = (size_t)(p.geom.n * p.geom.out_h * p.geom.out_w * cp);
    float *xd = random_floats((size_t)(pc->n * pc->c * pc->h * pc->w), seed, -3, 3);
    float *x = host_nhwc8(xd, pc->n, pc->c, pc->h, pc->w);
    double *want = malloc(nout * sizeof *want), *scale = malloc(nout * sizeof *scale);
    pool_reference(&p, x, -FLT_MAX, want, scale);
    void *dx = gpu_upload(x, nin * 4), *dy = gpu_upload(NULL, nout * 4);
    ck_assert_tci_ok(kern_pool2d(&p, dx, dy, 0));
    gpu_sync();
    float *got = download_floats(dy, nout);
    char what[96];
    snprintf(what, sizeof what, "pool2d fp32 seed %llu mode %d cip %d", (unsigned long long)seed,
             (int)mode, cip);
    check_nhwc8(what, got, want, scale, nout, pc->c, mode == POOL_MAX);
    free(xd), free(x), free(want), free(scale), free(got);
    gpu_free(dx), gpu_free(dy);
}

START_TEST(test_pool2d_fp32) {
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        check_pool_case(&pool_cases[i], POOL_MAX, 0, 800 + 10 * i);
        check_pool_case(&pool_cases[i], POOL_AVERAGE, 0, 801 + 10 * i);
        check_pool_case(&pool_cases[i], POOL_AVERAGE, 1, 802 + 10 * i);
    }
}
END_TEST

/* dtype 0 and FLOAT16: the same fp16 bits, close to the reference on fp16 inputs; the empty
 * max window is fp16's lowest value. */
START_TEST(test_pool2d_fp16_dtype_zero) {
    const pool_case *pc = &pool_cases[3];
    for (int mode = POOL_MAX; mode <= POOL_AVERAGE; mode++) {
        kern_pool2d_desc p0 = pool_desc(pc, (pool_kind)mode, 1, 0);
        kern_pool2d_desc p16 = pool_desc(pc, (pool_kind)mode, 1, TCI_DTYPE_FLOAT16);
        const int64_t cp = round8(pc->c);
        const size_t nin = (size_t)(pc->n * pc->h * pc->w * cp),
                     nout = (size_t)(p0.geom.n * p0.geom.out_h * p0.geom.out_w * cp);
        float *xd = random_floats((size_t)(pc->n * pc->c * pc->h * pc->w), 900 + mode, -3, 3);
        round_to_half(xd, (size_t)(pc->n * pc->c * pc->h * pc->w));
        float *x = host_nhwc8(xd, pc->n, pc->c, pc->h, pc->w);
        uint16_t *xh = to_half(x, nin);
        double *want = malloc(nout * sizeof *want), *scale = malloc(nout * sizeof *scale);
        pool_reference(&p0, x, -65504.0, want, scale);
        void *dx = gpu_upload(xh, nin * 2), *d0 = gpu_upload(NULL, nout * 2),
             *d16 = gpu_upload(NULL, nout * 2);
        ck_assert_tci_ok(kern_pool2d(&p0, dx, d0, 0));
        ck_assert_tci_ok(kern_pool2d(&p16, dx, d16, 0));
        gpu_sync();
        uint16_t *b0 = download_bits(d0, nout), *b16 = download_bits(d16, nout);
        ck_assert(memcmp(b0, b16, nout * 2) == 0);
        for (size_t i = 0; i < nout; i++) {
            if ((int64_t)(i % (size_t)cp) >= pc->c) {
                ck_assert_int_eq(b0[i], 0);
                continue;
            }
            double got = half_to_float(b0[i]);
            ck_assert_msg(fabs(got - want[i]) <= 1e-3 * fmax(1.0, fabs(want[i])),
                          "fp16 pool [%zu] = %g, want %g", i, got, want[i]);
        }
        free(xd), free(x), free(xh), free(want), free(scale), free(b0), free(b16);
        gpu_free(dx), gpu_free(d0), gpu_free(d16);
    }
}
END_TEST

static void check_global_pool(int64_t n, int64_t c, int64_t h, int64_t w, pool_kind mode,
                              uint64_t seed) {
    const int64_t cp = round8(c), hw = h * w;
    const size_t nin = (size_t)(n * hw * cp), nout = (size_t)(n * cp);
    float *xd = random_floats((size_t)(n * c * hw), seed, -3, 3);
    float *x = host_nhwc8(xd, n, c, h, w);
    double *want = malloc(nout * sizeof *want), *scale = malloc(nout * sizeof *scale);
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < cp; ch++) {
            double acc = mode == POOL_MAX ? -INFINITY : 0.0, mag = 0.0;
            for (int64_t s = 0; s < hw; s++) {
                double v = x[(i * hw + s) * cp + ch];
                acc = mode == POOL_MAX ? fmax(acc, v) : acc + v;
                mag += fabs(v);
            }
            want[i * cp + ch] = mode == POOL_MAX ? acc : acc / (double)hw;
            scale[i * cp + ch] = 1.0 + mag / (double)hw;
        }
    void *dx = gpu_upload(x, nin * 4), *dy = gpu_upload(NULL, nout * 4);
    ck_assert_tci_ok(kern_global_pool_dtype(mode, dx, dy, n, c, h, w, TCI_DTYPE_FLOAT, 0));
    gpu_sync();
    float *got = download_floats(dy, nout);
    char what[96];
    snprintf(what, sizeof what, "global pool fp32 %lldx%lld mode %d", (long long)h, (long long)w,
             (int)mode);
    check_nhwc8(what, got, want, scale, nout, c, mode == POOL_MAX);
    free(xd), free(x), free(want), free(scale), free(got);
    gpu_free(dx), gpu_free(dy);
}

START_TEST(test_global_pool_fp32) {
    for (int mode = POOL_MAX; mode <= POOL_AVERAGE; mode++) {
        check_global_pool(2, 13, 7, 7, (pool_kind)mode, 1000 + mode);
        check_global_pool(1, 3, 56, 56, (pool_kind)mode, 1010 + mode); /* 1024 threads */
        check_global_pool(3, 13, 1, 1, (pool_kind)mode, 1020 + mode);
        check_global_pool(2, 200, 3, 5, (pool_kind)mode, 1030 + mode); /* 25 chunks */
    }
}
END_TEST

START_TEST(test_global_pool_fp16_dtype_zero) {
    const int64_t n = 2, c = 13, h = 9, w = 9, cp = 16;
    const size_t nin = (size_t)(n * h * w * cp), nout = (size_t)(n * cp);
    float *x = random_floats(nin, 1100, -3, 3);
    uint16_t *xh = to_half(x, nin);
    for (size_t i = 0; i < nin; i++)
        if ((int64_t)(i % cp) >= c) xh[i] = 0;
    void *dx = gpu_upload(xh, nin * 2);
    for (int mode = POOL_MAX; mode <= POOL_AVERAGE; mode++) {
        void *da = gpu_upload(NULL, nout * 2), *db = gpu_upload(NULL, nout * 2),
             *dc = gpu_upload(NULL, nout * 2);
        ck_assert_tci_ok(kern_global_pool((pool_kind)mode, dx, da, n, c, h, w, 0));
        ck_assert_tci_ok(kern_global_pool_dtype((pool_kind)mode, dx, db, n, c, h, w, 0, 0));
        ck_assert_tci_ok(kern_global_pool_dtype((pool_kind)mode, dx, dc, n, c, h, w,
                                                TCI_DTYPE_FLOAT16, 0));
        gpu_sync();
        uint16_t *a = download_bits(da, nout), *b = download_bits(db, nout),
                 *cc = download_bits(dc, nout);
        ck_assert(memcmp(a, b, nout * 2) == 0);
        ck_assert(memcmp(a, cc, nout * 2) == 0);
        for (size_t i = 0; i < nout; i++)
            if ((int64_t)(i % cp) >= c) ck_assert_int_eq(a[i], 0);
            else ck_assert(!isnan(half_to_float(a[i])));
        free(a), free(b), free(cc);
        gpu_free(da), gpu_free(db), gpu_free(dc);
    }
    free(x), free(xh);
    gpu_free(dx);
}
END_TEST

START_TEST(test_pool_fp32_errors) {
    static const unsigned char zeros[512];
    char *d = gpu_upload(zeros, sizeof zeros);
    pool_case pc = {1, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, false};
    kern_pool2d_desc p = pool_desc(&pc, POOL_MAX, 0, TCI_DTYPE_INT32);
    ck_assert_tci_error(kern_pool2d(&p, d, d + 256, 0), TCI_ERR_UNSUPPORTED,
                        "kern_pool2d: dtype int32");
    p.dtype = TCI_DTYPE_FLOAT;
    ck_assert_tci_error(kern_pool2d(&p, d + 8, d + 256, 0), TCI_ERR_INVALID_ARGUMENT,
                        "16-byte aligned");
    ck_assert_tci_ok(kern_pool2d(&p, d, d + 256, 0));
    gpu_sync();
    ck_assert_tci_error(kern_global_pool_dtype(POOL_AVERAGE, d, d + 256, 1, 3, 2, 2,
                                               TCI_DTYPE_UINT8, 0),
                        TCI_ERR_UNSUPPORTED, "kern_global_pool: dtype uint8");
    ck_assert_tci_error(kern_global_pool_dtype(POOL_AVERAGE, d, d + 256, 1, 3, 0, 2,
                                               TCI_DTYPE_FLOAT, 0),
                        TCI_ERR_INVALID_ARGUMENT, "empty plane");
    gpu_free(d);
}
END_TEST

/* ================================================================ resize */

static double resize_coordinate(resize_coord coord, double x, double scale, int64_t in) {
    double length = scale * (double)in;
    switch (coord) {
    case RESIZE_COORD_HALF_PIXEL: return (x + 0.5) / scale - 0.5;
    case RESIZE_COORD_ALIGN_CORNERS:
        return fabs(length - 1.0) < 1e-9 ? 0.0 : x * (double)(in - 1) / (length - 1.0);
    case RESIZE_COORD_ASYMMETRIC: return x / scale;
    default: ck_abort_msg("no reference for coordinate mode %d", (int)coord); return 0.0;
    }
}

static int64_t clamp_index(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

static void resize_axis(const kern_resize_desc *d, int64_t o, double scale, int64_t in,
                        int64_t out, int64_t *i0, int64_t *i1, double *w1) {
    if (in == out && scale == 1.0) {
        *i0 = *i1 = o, *w1 = 0.0;
        return;
    }
    double x = resize_coordinate(d->coord, (double)o, scale, in), base = floor(x), r = x - base;
    if (d->mode == RESIZE_LINEAR) {
        *i0 = clamp_index((int64_t)base, in), *i1 = clamp_index((int64_t)base + 1, in), *w1 = r;
        return;
    }
    int up = 0;
    if (r != 0.0) switch (d->rounding) {
        case RESIZE_ROUND_PREFER_FLOOR: up = r > 0.5; break;
        case RESIZE_ROUND_PREFER_CEIL: up = r >= 0.5; break;
        case RESIZE_ROUND_CEIL: up = 1; break;
        default: up = 0; break;
        }
    *i0 = *i1 = clamp_index((int64_t)base + up, in), *w1 = 0.0;
}

static void check_resize_fp32(kern_resize_desc d, uint64_t seed) {
    const int64_t cp = round8(d.c);
    const size_t nin = (size_t)(d.n * d.in_h * d.in_w * cp),
                 nout = (size_t)(d.n * d.out_h * d.out_w * cp);
    float *xd = random_floats((size_t)(d.n * d.c * d.in_h * d.in_w), seed, -2, 2);
    float *x = host_nhwc8(xd, d.n, d.c, d.in_h, d.in_w);
    double *want = malloc(nout * sizeof *want), *scale = malloc(nout * sizeof *scale);
    for (int64_t n = 0; n < d.n; n++)
        for (int64_t oh = 0; oh < d.out_h; oh++)
            for (int64_t ow = 0; ow < d.out_w; ow++) {
                int64_t h0, h1, w0, w1;
                double fh, fw;
                resize_axis(&d, oh, d.scale_h, d.in_h, d.out_h, &h0, &h1, &fh);
                resize_axis(&d, ow, d.scale_w, d.in_w, d.out_w, &w0, &w1, &fw);
                for (int64_t c = 0; c < cp; c++) {
#define AT(h, w) ((double)x[((n * d.in_h + (h)) * d.in_w + (w)) * cp + c])
                    double v = (1 - fh) * ((1 - fw) * AT(h0, w0) + fw * AT(h0, w1)) +
                               fh * ((1 - fw) * AT(h1, w0) + fw * AT(h1, w1));
#undef AT
                    size_t o = (size_t)(((n * d.out_h + oh) * d.out_w + ow) * cp + c);
                    want[o] = v;
                    scale[o] = 3.0; /* the blend of values in [-2, 2] */
                }
            }
    void *dx = gpu_upload(x, nin * 4), *dy = gpu_upload(NULL, nout * 4);
    ck_assert_tci_ok(kern_resize_nhwc8(dx, dy, &d, 0));
    gpu_sync();
    float *got = download_floats(dy, nout);
    char what[128];
    snprintf(what, sizeof what, "resize fp32 mode %d coord %d %lldx%lld -> %lldx%lld c %lld",
             (int)d.mode, (int)d.coord, (long long)d.in_h, (long long)d.in_w, (long long)d.out_h,
             (long long)d.out_w, (long long)d.c);
    check_nhwc8(what, got, want, scale, nout, d.c, d.mode == RESIZE_NEAREST);
    free(xd), free(x), free(want), free(scale), free(got);
    gpu_free(dx), gpu_free(dy);
}

START_TEST(test_resize_fp32) {
    static const struct {
        int64_t in_h, in_w, out_h, out_w;
        double sh, sw;
    } shapes[] = {
        {7, 9, 13, 20, 1.9, 2.25}, {7, 9, 4, 4, 0.6, 0.5}, {5, 6, 10, 12, 2.0, 2.0},
        {7, 9, 7, 18, 1.0, 2.0}, /* identity rows */
    };
    static const struct {
        resize_mode mode;
        resize_coord coord;
        resize_rounding rounding;
    } modes[] = {
        {RESIZE_NEAREST, RESIZE_COORD_HALF_PIXEL, RESIZE_ROUND_PREFER_FLOOR},
        {RESIZE_NEAREST, RESIZE_COORD_ASYMMETRIC, RESIZE_ROUND_FLOOR},
        {RESIZE_NEAREST, RESIZE_COORD_ALIGN_CORNERS, RESIZE_ROUND_PREFER_CEIL},
        {RESIZE_LINEAR, RESIZE_COORD_HALF_PIXEL, 0},
        {RESIZE_LINEAR, RESIZE_COORD_ALIGN_CORNERS, 0},
        {RESIZE_LINEAR, RESIZE_COORD_ASYMMETRIC, 0},
    };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            kern_resize_desc d;
            memset(&d, 0, sizeof d);
            d.n = 2, d.c = s % 2 ? 13 : 3;
            d.in_h = shapes[s].in_h, d.in_w = shapes[s].in_w;
            d.out_h = shapes[s].out_h, d.out_w = shapes[s].out_w;
            d.scale_h = shapes[s].sh, d.scale_w = shapes[s].sw;
            d.mode = modes[m].mode, d.coord = modes[m].coord, d.rounding = modes[m].rounding;
            d.dtype = TCI_DTYPE_FLOAT;
            check_resize_fp32(d, 1200 + 10 * m + s);
        }
}
END_TEST

START_TEST(test_resize_fp16_dtype_zero_and_errors) {
    kern_resize_desc d;
    memset(&d, 0, sizeof d);
    d.n = 1, d.c = 13, d.in_h = 5, d.in_w = 6, d.out_h = 9, d.out_w = 11;
    d.scale_h = 1.8, d.scale_w = 11.0 / 6.0, d.mode = RESIZE_LINEAR;
    const size_t nin = 5 * 6 * 16, nout = 9 * 11 * 16;
    float *x = random_floats(nin, 1300, -2, 2);
    uint16_t *xh = to_half(x, nin);
    for (size_t i = 0; i < nin; i++)
        if (i % 16 >= 13) xh[i] = 0;
    void *dx = gpu_upload(xh, nin * 2), *d0 = gpu_upload(NULL, nout * 2),
         *d16 = gpu_upload(NULL, nout * 2);
    ck_assert_tci_ok(kern_resize_nhwc8(dx, d0, &d, 0));
    d.dtype = TCI_DTYPE_FLOAT16;
    ck_assert_tci_ok(kern_resize_nhwc8(dx, d16, &d, 0));
    gpu_sync();
    uint16_t *b0 = download_bits(d0, nout), *b16 = download_bits(d16, nout);
    ck_assert(memcmp(b0, b16, nout * 2) == 0);
    for (size_t i = 0; i < nout; i++)
        if (i % 16 >= 13) ck_assert_int_eq(b0[i], 0);
        else ck_assert(!isnan(half_to_float(b0[i])));
    d.dtype = TCI_DTYPE_INT64;
    ck_assert_tci_error(kern_resize_nhwc8(dx, d0, &d, 0), TCI_ERR_UNSUPPORTED,
                        "kern_resize_nhwc8: dtype int64");
    d.dtype = TCI_DTYPE_FLOAT;
    ck_assert_tci_error(kern_resize_nhwc8((char *)dx + 8, d0, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "16-byte aligned");
    free(x), free(xh), free(b0), free(b16);
    gpu_free(dx), gpu_free(d0), gpu_free(d16);
}
END_TEST

/* ================================================================ depthwise */

typedef struct {
    int64_t n, c, h, w, r, s, sh, sw, dh, dw, pt, pl, pb, pr;
    bool bias, residual;
    act_kind act;
    float alpha, beta;
} dw_case;

static int64_t conv_out(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t s, int64_t d) {
    return (in + pb + pe - d * (k - 1) - 1) / s + 1;
}

static kern_depthwise_desc dw_desc(const dw_case *t, kern_depthwise_path path, tci_dtype dt) {
    kern_depthwise_desc d;
    memset(&d, 0, sizeof d);
    d.geom.n = t->n, d.geom.c = t->c, d.geom.h = t->h, d.geom.w = t->w;
    d.geom.out_h = conv_out(t->h, t->pt, t->pb, t->r, t->sh, t->dh);
    d.geom.out_w = conv_out(t->w, t->pl, t->pr, t->s, t->sw, t->dw);
    d.geom.kernel_h = t->r, d.geom.kernel_w = t->s, d.geom.stride_h = t->sh, d.geom.stride_w = t->sw;
    d.geom.dilation_h = t->dh, d.geom.dilation_w = t->dw, d.geom.pad_top = t->pt, d.geom.pad_left = t->pl;
    d.act = t->act, d.act_alpha = t->alpha, d.act_beta = t->beta;
    d.path = path;
    d.dtype = dt;
    return d;
}

static double dw_act(act_kind act, double x, double alpha, double beta) {
    switch (act) {
    case ACT_NONE: return x;
    case ACT_RELU: return x < 0 ? 0 : x;
    case ACT_CLIP: return x < alpha ? alpha : (x > beta ? beta : x);
    case ACT_SIGMOID: return 1 / (1 + exp(-x));
    case ACT_HARD_SWISH: return x * fmin(1, fmax(0, x / 6 + 0.5));
    default: ck_abort_msg("no reference for activation %d", (int)act); return 0;
    }
}

/* x, z NHWC8 (Cp), w (C, R, S) logical, bias C; want / scale NHWC8 of the output. Activations
 * here are 1-Lipschitz or flatter, so the pre-activation bound carries over. */
static void dw_reference(const kern_depthwise_desc *d, const dw_case *t, const float *x,
                         const float *w, const float *bias, const float *z, double *want,
                         double *scale) {
    int64_t cp = round8(d->geom.c);
    for (int64_t i = 0; i < d->geom.n; i++)
        for (int64_t oh = 0; oh < d->geom.out_h; oh++)
            for (int64_t ow = 0; ow < d->geom.out_w; ow++)
                for (int64_t ch = 0; ch < cp; ch++) {
                    size_t o = (size_t)(((i * d->geom.out_h + oh) * d->geom.out_w + ow) * cp + ch);
                    if (ch >= d->geom.c) {
                        want[o] = 0.0, scale[o] = 1.0;
                        continue;
                    }
                    double acc = 0.0, mag = 0.0;
                    for (int64_t r = 0; r < d->geom.kernel_h; r++)
                        for (int64_t s = 0; s < d->geom.kernel_w; s++) {
                            int64_t ih = oh * d->geom.stride_h - d->geom.pad_top + r * d->geom.dilation_h;
                            int64_t iw = ow * d->geom.stride_w - d->geom.pad_left + s * d->geom.dilation_w;
                            if (ih < 0 || ih >= d->geom.h || iw < 0 || iw >= d->geom.w) continue;
                            double term = (double)x[((i * d->geom.h + ih) * d->geom.w + iw) * cp + ch] *
                                          w[(ch * d->geom.kernel_h + r) * d->geom.kernel_w + s];
                            acc += term;
                            mag += fabs(term);
                        }
                    if (t->bias) acc += bias[ch], mag += fabs(bias[ch]);
                    if (t->residual) acc += z[o], mag += fabs(z[o]);
                    want[o] = dw_act(t->act, acc, t->alpha, t->beta);
                    scale[o] = 1.0 + mag;
                }
}

static const dw_case dw_cases[] = {
    {2, 13, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, ACT_RELU, 0, 0},
    {1, 3, 10, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false, ACT_NONE, 0, 0},
    {2, 13, 12, 12, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true, true, ACT_SIGMOID, 0, 0},
    {1, 13, 11, 11, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, false, false, ACT_NONE, 0, 0},
    {1, 24, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false, ACT_HARD_SWISH, 0, 0},
    {2, 3, 8, 7, 2, 3, 1, 2, 2, 1, 1, 0, 1, 1, true, true, ACT_CLIP, 0, 6}, /* generic */
    {1, 13, 9, 9, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, false, true, ACT_NONE, 0, 0}, /* no pads */
};

static bool dw_tiled(const dw_case *t) {
    return t->r == t->s && (t->r == 3 || t->r == 5) && t->sh == t->sw &&
           (t->sh == 1 || t->sh == 2) && t->dh == 1 && t->dw == 1;
}

/* One case on one path, fp32; in_place: z is y. */
static void check_dw_fp32(const dw_case *t, kern_depthwise_path path, bool in_place,
                          uint64_t seed) {
    kern_depthwise_desc d = dw_desc(t, path, TCI_DTYPE_FLOAT);
    const int64_t cp = round8(t->c), taps = t->r * t->s;
    const size_t nin = (size_t)(t->n * t->h * t->w * cp),
                 nout = (size_t)(t->n * d.geom.out_h * d.geom.out_w * cp);
    float *xd = random_floats((size_t)(t->n * t->c * t->h * t->w), seed, -1, 1);
    float *x = host_nhwc8(xd, t->n, t->c, t->h, t->w);
    float *w = random_floats((size_t)(t->c * taps), seed + 1, -0.5f, 0.5f);
    float *bias = random_floats((size_t)t->c, seed + 2, -1, 1);
    float *zd = random_floats((size_t)(t->n * t->c * d.geom.out_h * d.geom.out_w), seed + 3, -1, 1);
    float *z = host_nhwc8(zd, t->n, t->c, d.geom.out_h, d.geom.out_w);
    float *wp = malloc((size_t)(taps * cp) * sizeof *wp), *bp = malloc((size_t)cp * sizeof *bp);
    ck_assert_tci_ok(kern_depthwise_pack_weights_f32(&d, w, wp));
    ck_assert_tci_ok(kern_depthwise_pack_bias(&d, bias, bp));
    double *want = malloc(nout * sizeof *want), *scale = malloc(nout * sizeof *scale);
    dw_reference(&d, t, x, w, bias, z, want, scale);
    void *dx = gpu_upload(x, nin * 4), *dw = gpu_upload(wp, (size_t)(taps * cp) * 4),
         *db = gpu_upload(bp, (size_t)cp * 4), *dz = gpu_upload(z, nout * 4);
    void *dy = in_place ? dz : gpu_upload(NULL, nout * 4);
    const void *zarg = t->residual ? dz : NULL;
    if (!t->residual && in_place) ck_abort_msg("in place needs a residual");
    ck_assert_tci_ok(kern_depthwise_conv(&d, dx, dw, t->bias ? db : NULL, zarg, dy, 0));
    gpu_sync();
    float *got = download_floats(dy, nout);
    char what[96];
    snprintf(what, sizeof what, "depthwise fp32 seed %llu path %d%s", (unsigned long long)seed,
             (int)path, in_place ? " in place" : "");
    check_nhwc8(what, got, want, scale, nout, t->c, false);
    free(xd), free(x), free(w), free(bias), free(zd), free(z), free(wp), free(bp), free(want),
        free(scale), free(got);
    gpu_free(dx), gpu_free(dw), gpu_free(db), gpu_free(dz);
    if (!in_place) gpu_free(dy);
}

START_TEST(test_depthwise_fp32) {
    for (size_t i = 0; i < sizeof dw_cases / sizeof dw_cases[0]; i++) {
        const dw_case *t = &dw_cases[i];
        kern_depthwise_desc d = dw_desc(t, KERN_DEPTHWISE_AUTO, TCI_DTYPE_FLOAT);
        ck_assert_int_eq(kern_depthwise_is_tiled(&d), dw_tiled(t));
        check_dw_fp32(t, KERN_DEPTHWISE_AUTO, false, 1400 + 10 * i);
        check_dw_fp32(t, KERN_DEPTHWISE_GENERIC, false, 1500 + 10 * i);
        if (dw_tiled(t)) {
            check_dw_fp32(t, KERN_DEPTHWISE_TILED_SHORT, false, 1600 + 10 * i);
            check_dw_fp32(t, KERN_DEPTHWISE_TILED_TALL, false, 1700 + 10 * i);
        }
        if (t->residual) {
            check_dw_fp32(t, KERN_DEPTHWISE_AUTO, true, 1800 + 10 * i);
            check_dw_fp32(t, KERN_DEPTHWISE_GENERIC, true, 1900 + 10 * i);
        }
    }
}
END_TEST

/* dtype 0 and FLOAT16 on fp16 data: the same bits on every path, close to the reference. */
START_TEST(test_depthwise_fp16_dtype_zero) {
    const dw_case *t = &dw_cases[0];
    const int64_t cp = round8(t->c), taps = t->r * t->s;
    kern_depthwise_desc d0 = dw_desc(t, KERN_DEPTHWISE_AUTO, 0);
    const size_t nin = (size_t)(t->n * t->h * t->w * cp),
                 nout = (size_t)(t->n * d0.geom.out_h * d0.geom.out_w * cp);
    float *xd = random_floats((size_t)(t->n * t->c * t->h * t->w), 2000, -1, 1);
    round_to_half(xd, (size_t)(t->n * t->c * t->h * t->w));
    float *x = host_nhwc8(xd, t->n, t->c, t->h, t->w);
    float *w = random_floats((size_t)(t->c * taps), 2001, -0.5f, 0.5f);
    round_to_half(w, (size_t)(t->c * taps));
    float *bias = random_floats((size_t)t->c, 2002, -1, 1);
    float *zd = random_floats((size_t)(t->n * t->c * d0.geom.out_h * d0.geom.out_w), 2003, -1, 1);
    round_to_half(zd, (size_t)(t->n * t->c * d0.geom.out_h * d0.geom.out_w));
    float *z = host_nhwc8(zd, t->n, t->c, d0.geom.out_h, d0.geom.out_w);
    uint16_t *xh = to_half(x, nin), *zh = to_half(z, nout);
    uint16_t *wp = malloc((size_t)(taps * cp) * 2);
    float *bp = malloc((size_t)cp * 4);
    ck_assert_tci_ok(kern_depthwise_pack_weights(&d0, w, wp));
    ck_assert_tci_ok(kern_depthwise_pack_bias(&d0, bias, bp));
    double *want = malloc(nout * sizeof *want), *scale = malloc(nout * sizeof *scale);
    dw_reference(&d0, t, x, w, bias, z, want, scale);
    void *dx = gpu_upload(xh, nin * 2), *dw = gpu_upload(wp, (size_t)(taps * cp) * 2),
         *db = gpu_upload(bp, (size_t)cp * 4), *dz = gpu_upload(zh, nout * 2);
    for (int path = KERN_DEPTHWISE_AUTO; path < KERN_DEPTHWISE_PATH_COUNT; path++) {
        kern_depthwise_desc a = dw_desc(t, (kern_depthwise_path)path, 0);
        kern_depthwise_desc b = dw_desc(t, (kern_depthwise_path)path, TCI_DTYPE_FLOAT16);
        void *ya = gpu_upload(NULL, nout * 2), *yb = gpu_upload(NULL, nout * 2);
        ck_assert_tci_ok(kern_depthwise_conv(&a, dx, dw, db, dz, ya, 0));
        ck_assert_tci_ok(kern_depthwise_conv(&b, dx, dw, db, dz, yb, 0));
        gpu_sync();
        uint16_t *ba = download_bits(ya, nout), *bb = download_bits(yb, nout);
        ck_assert_msg(memcmp(ba, bb, nout * 2) == 0, "path %d: dtype 0 and FLOAT16 differ", path);
        for (size_t i = 0; i < nout; i++) {
            if ((int64_t)(i % (size_t)cp) >= t->c) {
                ck_assert_int_eq(ba[i], 0);
                continue;
            }
            double got = half_to_float(ba[i]);
            ck_assert_msg(fabs(got - want[i]) <= 2e-3 * scale[i],
                          "fp16 path %d [%zu] = %g, want %g", path, i, got, want[i]);
        }
        free(ba), free(bb);
        gpu_free(ya), gpu_free(yb);
    }
    free(xd), free(x), free(w), free(bias), free(zd), free(z), free(xh), free(zh), free(wp),
        free(bp), free(want), free(scale);
    gpu_free(dx), gpu_free(dw), gpu_free(db), gpu_free(dz);
}
END_TEST

START_TEST(test_depthwise_fp32_pack_and_errors) {
    kern_depthwise_desc d;
    memset(&d, 0, sizeof d);
    d.geom.c = 3, d.geom.kernel_h = 1, d.geom.kernel_w = 2;
    const float w[6] = {1, 2, 3, 4, 5, 6}; /* (C, 1, R, S): channel c has taps {2c+1, 2c+2} */
    float out[16];
    memset(out, 0xff, sizeof out);
    ck_assert_tci_ok(kern_depthwise_pack_weights_f32(&d, w, out));
    for (int t = 0; t < 2; t++)
        for (int ch = 0; ch < 8; ch++) {
            float want = ch < 3 ? w[ch * 2 + t] : 0.0f;
            ck_assert_msg(memcmp(&out[t * 8 + ch], &want, 4) == 0, "tap %d channel %d: %g", t, ch,
                          (double)out[t * 8 + ch]);
        }
    ck_assert_tci_error(kern_depthwise_pack_weights_f32(&d, w, NULL), TCI_ERR_INVALID_ARGUMENT,
                        "kern_depthwise_pack_weights_f32: NULL pointer");

    static const unsigned char zeros[4096];
    char *buf = gpu_upload(zeros, sizeof zeros);
    const dw_case t = {1, 8, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, ACT_NONE, 0, 0};
    d = dw_desc(&t, KERN_DEPTHWISE_AUTO, TCI_DTYPE_FLOAT); /* x, y: 4*4*8 floats = 512 bytes */
    char *x = buf, *wt = buf + 1024, *y = buf + 2048;
    ck_assert_tci_ok(kern_depthwise_conv(&d, x, wt, NULL, NULL, y, 0));
    gpu_sync();
    /* fp32 sizes in the overlap checks: y 256 bytes after x overlaps its second half */
    ck_assert_tci_error(kern_depthwise_conv(&d, x, wt, NULL, NULL, x + 256, 0),
                        TCI_ERR_INVALID_ARGUMENT, "y overlaps x");
    ck_assert_tci_error(kern_depthwise_conv(&d, x, wt, NULL, NULL, wt + 256, 0),
                        TCI_ERR_INVALID_ARGUMENT, "y overlaps w");
    d.dtype = TCI_DTYPE_INT32;
    ck_assert_tci_error(kern_depthwise_conv(&d, x, wt, NULL, NULL, y, 0), TCI_ERR_UNSUPPORTED,
                        "kern_depthwise_conv: dtype int32");
    gpu_free(buf);
}
END_TEST

/* ================================================================ softmax */

/* inner == 1: the rows launchers (both spellings), else the strided one; mask puts -inf in. */
static void check_softmax_fp32(int64_t outer, int64_t len, int64_t inner, int log_, int mask,
                               uint64_t seed) {
    const size_t n = (size_t)(outer * len * inner);
    float *x = random_floats(n, seed, -8, 8);
    if (mask)
        for (size_t i = 3; i < n; i += 7) x[i] = -INFINITY;
    double *want = malloc(n * sizeof *want);
    gpu_softmax_reference(x, want, outer, len, inner, log_);
    void *dx = gpu_upload(x, n * 4), *dy = gpu_upload(NULL, n * 4);
    const tci_dtype f = TCI_DTYPE_FLOAT;
    if (inner == 1 && log_) ck_assert_tci_ok(kern_log_softmax_rows_dtype(dx, dy, outer, len, f, 0));
    else if (inner == 1) ck_assert_tci_ok(kern_softmax_rows_dtype(dx, dy, outer, len, f, 0));
    else ck_assert_tci_ok(kern_softmax_strided_dtype(dx, dy, outer, len, inner, log_, f, 0));
    gpu_sync();
    float *got = download_floats(dy, n);
    for (size_t i = 0; i < n; i++) {
        if (isinf(want[i])) {
            ck_assert_msg(isinf(got[i]) && got[i] < 0, "log_softmax fp32 [%zu] = %g", i,
                          (double)got[i]);
            continue;
        }
        /* probabilities: relative; log-probabilities: relative to max(1, |want|) */
        double bound = log_ ? TOL * fmax(1.0, fabs(want[i])) : TOL * fabs(want[i]) + 1e-12;
        ck_assert_msg(fabs((double)got[i] - want[i]) <= bound,
                      "%s fp32 (%lld, %lld, %lld) [%zu] = %.9g, want %.9g",
                      log_ ? "log_softmax" : "softmax", (long long)outer, (long long)len,
                      (long long)inner, i, (double)got[i], want[i]);
    }
    free(x), free(want), free(got);
    gpu_free(dx), gpu_free(dy);
}

START_TEST(test_softmax_fp32) {
    check_softmax_fp32(37, 7, 1, 0, 0, 2100);   /* several rows per warp, scalar */
    check_softmax_fp32(13, 1000, 1, 0, 0, 2101); /* warp per row, vectors */
    check_softmax_fp32(5, 4096, 1, 0, 0, 2102);  /* block per row, vectors */
    check_softmax_fp32(4, 1001, 1, 0, 1, 2103);  /* block, scalar, masked */
    check_softmax_fp32(77, 3, 1, 0, 1, 2104);
    check_softmax_fp32(37, 13, 1, 1, 0, 2105);   /* log */
    check_softmax_fp32(5, 4096, 1, 1, 1, 2106);
    check_softmax_fp32(3, 19, 37, 0, 0, 2107);   /* strided */
    check_softmax_fp32(4, 5, 300, 1, 1, 2108);
    check_softmax_fp32(6, 13, 1, 0, 0, 2109);
}
END_TEST

/* ================================================================ layer normalisation */

static void check_layernorm_fp32(int64_t rows, int64_t len, int with_beta, uint64_t seed) {
    const size_t n = (size_t)(rows * len);
    float *x = random_floats(n, seed, -3, 5), *g = random_floats((size_t)len, seed + 1, 0.5f, 1.5f),
          *b = random_floats((size_t)len, seed + 2, -1, 1);
    const float eps = 1e-5f;
    double *want = malloc(n * sizeof *want), *want_mean = malloc((size_t)rows * sizeof(double)),
           *want_inv = malloc((size_t)rows * sizeof(double));
    gpu_layernorm_reference(x, g, with_beta ? b : NULL, rows, len, eps, want, want_mean, want_inv);
    void *dx = gpu_upload(x, n * 4), *dy = gpu_upload(NULL, n * 4);
    void *dg = gpu_upload(g, (size_t)len * 4), *db = gpu_upload(b, (size_t)len * 4);
    float *dmean = gpu_upload(NULL, (size_t)rows * 4), *dinv = gpu_upload(NULL, (size_t)rows * 4);
    ck_assert_tci_ok(kern_layernorm_rows_dtype(dx, dg, with_beta ? db : NULL, dy, dmean, dinv, rows,
                                               len, eps, TCI_DTYPE_FLOAT, 0));
    gpu_sync();
    float *got = download_floats(dy, n), *mean = download_floats(dmean, (size_t)rows),
          *inv = download_floats(dinv, (size_t)rows);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - want[i]) <= TOL * fmax(1.0, fabs(want[i])),
                      "layernorm fp32 (%lld x %lld) [%zu] = %.9g, want %.9g", (long long)rows,
                      (long long)len, i, (double)got[i], want[i]);
    for (int64_t r = 0; r < rows; r++) {
        /* the mean of values in [-3, 5]: bounded by their magnitudes (up to 5) */
        ck_assert_msg(fabs((double)mean[r] - want_mean[r]) <= TOL * 5.0, "mean[%lld] %.9g vs %.9g",
                      (long long)r, (double)mean[r], want_mean[r]);
        ck_assert_msg(fabs((double)inv[r] - want_inv[r]) <= TOL * want_inv[r],
                      "inv_std[%lld] %.9g vs %.9g", (long long)r, (double)inv[r], want_inv[r]);
    }
    free(x), free(g), free(b), free(want), free(want_mean), free(want_inv), free(got), free(mean),
        free(inv);
    gpu_free(dx), gpu_free(dy), gpu_free(dg), gpu_free(db), gpu_free(dmean), gpu_free(dinv);
}

START_TEST(test_layernorm_fp32) {
    check_layernorm_fp32(33, 768, 1, 2200); /* warp per row, vectors */
    check_layernorm_fp32(33, 768, 0, 2201); /* no beta */
    check_layernorm_fp32(10, 13, 1, 2202);  /* scalar */
    check_layernorm_fp32(5, 3000, 1, 2203); /* block per row */
    check_layernorm_fp32(3, 2053, 0, 2204); /* block, scalar */
    check_layernorm_fp32(301, 3, 1, 2205);
}
END_TEST

/* ================================================================ reduce */

static void check_reduce_fp32(int rank, const int64_t *dims, unsigned mask, reduce_op op,
                              uint64_t seed) {
    int64_t n = 1, outputs = 1, count = 1, out_dims[6];
    for (int d = 0; d < rank; d++) {
        n *= dims[d];
        out_dims[d] = mask >> d & 1 ? 1 : dims[d];
        outputs *= out_dims[d];
        if (mask >> d & 1) count *= dims[d];
    }
    float *x = random_floats((size_t)n, seed, -1, 1);
    double *want = calloc((size_t)(outputs ? outputs : 1), sizeof *want),
           *mag = calloc((size_t)(outputs ? outputs : 1), sizeof *mag);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i, o = 0, s = 1;
        for (int d = rank - 1; d >= 0; d--) {
            int64_t idx = r % dims[d];
            r /= dims[d];
            if (!(mask >> d & 1)) o += idx * s, s *= out_dims[d];
        }
        want[o] += x[i];
        mag[o] += fabs(x[i]);
    }
    for (int64_t o = 0; o < outputs; o++)
        if (op == REDUCE_MEAN) {
            want[o] = count ? want[o] / (double)count : NAN;
            mag[o] = count ? mag[o] / (double)count : 0.0;
        }
    void *dx = gpu_upload(x, (size_t)n * 4), *dy = gpu_upload(NULL, (size_t)outputs * 4);
    ck_assert_tci_ok(kern_reduce_dtype(dx, dy, rank, dims, mask, op, TCI_DTYPE_FLOAT, 0));
    gpu_sync();
    float *got = download_floats(dy, (size_t)outputs);
    for (int64_t o = 0; o < outputs; o++) {
        if (isnan(want[o])) {
            ck_assert_msg(isnan(got[o]), "reduce fp32 [%lld] = %g, want NaN", (long long)o,
                          (double)got[o]);
            continue;
        }
        ck_assert_msg(fabs((double)got[o] - want[o]) <= TOL * (1.0 + mag[o]),
                      "reduce fp32 mask 0x%x [%lld] = %.9g, want %.9g", mask, (long long)o,
                      (double)got[o], want[o]);
    }
    free(x), free(want), free(mag), free(got);
    gpu_free(dx), gpu_free(dy);
}

START_TEST(test_reduce_fp32) {
    check_reduce_fp32(3, (int64_t[]){5, 6, 13}, 4, REDUCE_SUM, 2300);     /* rows, scalar */
    check_reduce_fp32(3, (int64_t[]){5, 6, 104}, 6, REDUCE_MEAN, 2301);   /* rows, vectors */
    check_reduce_fp32(2, (int64_t[]){3, 5000}, 2, REDUCE_SUM, 2302);      /* block per row */
    check_reduce_fp32(3, (int64_t[]){50, 7, 3}, 1, REDUCE_SUM, 2303);     /* columns */
    check_reduce_fp32(4, (int64_t[]){2, 9, 11, 16}, 6, REDUCE_MEAN, 2304); /* NHWC8 13 -> 16 */
    check_reduce_fp32(3, (int64_t[]){3, 2000, 64}, 2, REDUCE_SUM, 2305);  /* vectors, deep */
    check_reduce_fp32(3, (int64_t[]){6, 5, 7}, 5, REDUCE_SUM, 2306);      /* generic */
    check_reduce_fp32(5, (int64_t[]){2, 3, 4, 5, 6}, 0x15, REDUCE_MEAN, 2307);
    check_reduce_fp32(3, (int64_t[]){4, 0, 3}, 2, REDUCE_MEAN, 2308);     /* empty: NaN */
    check_reduce_fp32(3, (int64_t[]){4, 0, 3}, 2, REDUCE_SUM, 2309);      /* empty: 0 */
    check_reduce_fp32(2, (int64_t[]){4, 3}, 0, REDUCE_SUM, 2310);         /* a copy */
    check_reduce_fp32(0, NULL, 0, REDUCE_MEAN, 2311);                     /* scalar */
}
END_TEST

/* ================================================================ norm: the dtype rule */

START_TEST(test_norm_fp16_dtype_zero) {
    const int64_t rows = 9, len = 40;
    const size_t n = (size_t)(rows * len);
    float *x = random_floats(n, 2400, -4, 4), *g = random_floats((size_t)len, 2401, 0.5f, 1.5f);
    uint16_t *xh = to_half(x, n), *gh = to_half(g, (size_t)len);
    void *dx = gpu_upload(xh, n * 2), *dg = gpu_upload(gh, (size_t)len * 2);
    void *ya = gpu_upload(NULL, n * 2), *yb = gpu_upload(NULL, n * 2),
         *yc = gpu_upload(NULL, n * 2);
    uint16_t *a, *b, *c;
#define SAME_THREE(what)                                                                           \
    gpu_sync();                                                                                    \
    a = download_bits(ya, n), b = download_bits(yb, n), c = download_bits(yc, n);                  \
    ck_assert_msg(memcmp(a, b, n * 2) == 0 && memcmp(a, c, n * 2) == 0, "%s: dtype 0 differs",     \
                  what);                                                                           \
    for (size_t i = 0; i < n; i++) ck_assert(!isnan(half_to_float(a[i])));                     \
    free(a), free(b), free(c)

    ck_assert_tci_ok(kern_softmax_rows(dx, ya, rows, len, 0));
    ck_assert_tci_ok(kern_softmax_rows_dtype(dx, yb, rows, len, 0, 0));
    ck_assert_tci_ok(kern_softmax_rows_dtype(dx, yc, rows, len, TCI_DTYPE_FLOAT16, 0));
    SAME_THREE("softmax");
    ck_assert_tci_ok(kern_log_softmax_rows(dx, ya, rows, len, 0));
    ck_assert_tci_ok(kern_log_softmax_rows_dtype(dx, yb, rows, len, 0, 0));
    ck_assert_tci_ok(kern_log_softmax_rows_dtype(dx, yc, rows, len, TCI_DTYPE_FLOAT16, 0));
    SAME_THREE("log_softmax");
    ck_assert_tci_ok(kern_softmax_strided(dx, ya, 3, 3, 40, 0, 0));
    ck_assert_tci_ok(kern_softmax_strided_dtype(dx, yb, 3, 3, 40, 0, 0, 0));
    ck_assert_tci_ok(kern_softmax_strided_dtype(dx, yc, 3, 3, 40, 0, TCI_DTYPE_FLOAT16, 0));
    SAME_THREE("softmax_strided");
    ck_assert_tci_ok(kern_layernorm_rows(dx, dg, NULL, ya, NULL, NULL, rows, len, 1e-5f, 0));
    ck_assert_tci_ok(
        kern_layernorm_rows_dtype(dx, dg, NULL, yb, NULL, NULL, rows, len, 1e-5f, 0, 0));
    ck_assert_tci_ok(kern_layernorm_rows_dtype(dx, dg, NULL, yc, NULL, NULL, rows, len, 1e-5f,
                                               TCI_DTYPE_FLOAT16, 0));
    SAME_THREE("layernorm");
#undef SAME_THREE
    /* reduce over the rows: rows outputs */
    const int64_t dims[2] = {rows, len};
    void *ra = gpu_upload(NULL, (size_t)rows * 2), *rb = gpu_upload(NULL, (size_t)rows * 2),
         *rc = gpu_upload(NULL, (size_t)rows * 2);
    ck_assert_tci_ok(kern_reduce(dx, ra, 2, dims, 2, REDUCE_MEAN, 0));
    ck_assert_tci_ok(kern_reduce_dtype(dx, rb, 2, dims, 2, REDUCE_MEAN, 0, 0));
    ck_assert_tci_ok(kern_reduce_dtype(dx, rc, 2, dims, 2, REDUCE_MEAN, TCI_DTYPE_FLOAT16, 0));
    gpu_sync();
    a = download_bits(ra, (size_t)rows), b = download_bits(rb, (size_t)rows),
    c = download_bits(rc, (size_t)rows);
    ck_assert(memcmp(a, b, (size_t)rows * 2) == 0 && memcmp(a, c, (size_t)rows * 2) == 0);
    for (int64_t r = 0; r < rows; r++) {
        double want = 0.0;
        for (int64_t i = 0; i < len; i++) want += half_to_float(xh[r * len + i]);
        want /= (double)len;
        ck_assert_msg(fabs(half_to_float(a[r]) - want) <= 2e-3, "fp16 reduce [%lld]",
                      (long long)r);
    }
    free(a), free(b), free(c);
    free(x), free(g), free(xh), free(gh);
    gpu_free(dx), gpu_free(dg), gpu_free(ya), gpu_free(yb), gpu_free(yc);
    gpu_free(ra), gpu_free(rb), gpu_free(rc);
}
END_TEST

START_TEST(test_norm_dtype_errors) {
    const tci_dtype bad = TCI_DTYPE_INT64;
    ck_assert_tci_error(kern_softmax_rows_dtype(NULL, NULL, 0, 3, bad, 0), TCI_ERR_UNSUPPORTED,
                        "kern_softmax_rows: dtype int64");
    ck_assert_tci_error(kern_log_softmax_rows_dtype(NULL, NULL, 0, 3, bad, 0), TCI_ERR_UNSUPPORTED,
                        "kern_log_softmax_rows: dtype int64");
    ck_assert_tci_error(kern_softmax_strided_dtype(NULL, NULL, 0, 3, 2, 0, bad, 0),
                        TCI_ERR_UNSUPPORTED, "kern_softmax_strided: dtype int64");
    ck_assert_tci_error(kern_layernorm_rows_dtype(NULL, NULL, NULL, NULL, NULL, NULL, 0, 8, 1e-5f,
                                                  bad, 0),
                        TCI_ERR_UNSUPPORTED, "kern_layernorm_rows: dtype int64");
    ck_assert_tci_error(kern_reduce_dtype(NULL, NULL, 0, NULL, 0, REDUCE_SUM, bad, 0),
                        TCI_ERR_UNSUPPORTED, "kern_reduce: dtype int64");
    /* fp32 keeps the other checks */
    ck_assert_tci_error(kern_softmax_rows_dtype(NULL, NULL, -1, 3, TCI_DTYPE_FLOAT, 0),
                        TCI_ERR_INVALID_ARGUMENT, "negative extent");
    ck_assert_tci_error(kern_layernorm_rows_dtype((void *)16, NULL, NULL, (void *)16, NULL, NULL, 2,
                                                  8, 1e-5f, TCI_DTYPE_FLOAT, 0),
                        TCI_ERR_INVALID_ARGUMENT, "NULL gamma");
    ck_assert_tci_ok(kern_reduce_dtype(NULL, NULL, 2, (int64_t[]){0, 3}, 2, REDUCE_SUM,
                                       TCI_DTYPE_FLOAT, 0));
}
END_TEST

int main(void) {
    gpu_require_device("gpu_fp32");
    Suite *s = suite_create("gpu_fp32");
    TCase *tc = tcase_create("fp32");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_layout_fp32);
    tcase_add_test(tc, test_layout_fp32_errors);
    tcase_add_test(tc, test_pool2d_fp32);
    tcase_add_test(tc, test_pool2d_fp16_dtype_zero);
    tcase_add_test(tc, test_global_pool_fp32);
    tcase_add_test(tc, test_global_pool_fp16_dtype_zero);
    tcase_add_test(tc, test_pool_fp32_errors);
    tcase_add_test(tc, test_resize_fp32);
    tcase_add_test(tc, test_resize_fp16_dtype_zero_and_errors);
    tcase_add_test(tc, test_depthwise_fp32);
    tcase_add_test(tc, test_depthwise_fp16_dtype_zero);
    tcase_add_test(tc, test_depthwise_fp32_pack_and_errors);
    tcase_add_test(tc, test_softmax_fp32);
    tcase_add_test(tc, test_layernorm_fp32);
    tcase_add_test(tc, test_reduce_fp32);
    tcase_add_test(tc, test_norm_fp16_dtype_zero);
    tcase_add_test(tc, test_norm_dtype_errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
