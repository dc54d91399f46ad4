/* GPU tests of the layout conversions (NCHW fp32/fp16/bf16 <-> NHWC8, dense casts) and of the
 * NHWC8 pooling kernels (windowed max/average, global; fp16 and bf16) against plain C references. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/cast.h"
#include "kernels/layout.h"
#include "kernels/pool.h"
#include "layers/op.h"

static int64_t round8(int64_t c) { return (c + 7) / 8 * 8; }

static float *random_floats(size_t n, uint64_t seed, float lo, float hi) {
    float *v = malloc(n * sizeof *v + 1);
    gpu_fill_random(v, n, seed, lo, hi);
    return v;
}

static float round_half(float v) { return half_to_float(float_to_half(v)); }

#define F16 TCI_DTYPE_FLOAT16
#define BF16 TCI_DTYPE_BFLOAT16
#define F32 TCI_DTYPE_FLOAT

/* Host NCHW -> NHWC8 of dt's bits (padding zero): fp16 (what the fp16 tests compare with) or any
 * other float storage type, element size gpu_dtype_size(dt). */
static void *host_to_nhwc8_as(tci_dtype dt, const float *x, int64_t n, int64_t c, int64_t h,
                              int64_t w) {
    int64_t cp = round8(c);
    size_t es = gpu_dtype_size(dt);
    unsigned char *y = calloc((size_t)(n * h * w * cp) * es + 1, 1);
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t s = 0; s < h * w; s++)
                gpu_encode(dt, &x[(i * c + ch) * h * w + s], y + (size_t)((i * h * w + s) * cp + ch) * es,
                           1);
    return y;
}

static uint16_t *host_to_nhwc8(const float *x, int64_t n, int64_t c, int64_t h, int64_t w) {
    return host_to_nhwc8_as(F16, x, n, c, h, w);
}

/* ---- layout -------------------------------------------------------------------------------- */

static const int64_t layout_shapes[][4] = {
    {2, 13, 7, 9},   /* direct path (Cp 16), C not a multiple of 8 */
    {1, 3, 31, 37},  /* Cp 8, image-like */
    {3, 70, 11, 13}, /* tiled path, C not a multiple of 64, h*w not a multiple of 32 */
    {1, 256, 5, 5},  /* tiled, several channel tiles */
    {2, 8, 1, 1},    /* exactly one chunk */
    {1, 129, 33, 2},
};

START_TEST(test_nchw_f32_nhwc8_round_trip) {
    for (size_t t = 0; t < sizeof layout_shapes / sizeof layout_shapes[0]; t++) {
        int64_t n = layout_shapes[t][0], c = layout_shapes[t][1], h = layout_shapes[t][2],
                w = layout_shapes[t][3], cp = round8(c);
        size_t dense = (size_t)(n * c * h * w), padded = (size_t)(n * h * w * cp);
        float *x = random_floats(dense, 200 + t, -3, 3);
        float *dx = gpu_upload(x, dense * 4);
        void *dy = gpu_upload(NULL, padded * 2);
        float *dz = gpu_upload(NULL, dense * 4);
        ck_assert_tci_ok(kern_nchw_f32_to_nhwc8(dx, dy, n, c, h, w, 0));
        ck_assert_tci_ok(kern_nhwc8_to_nchw_f32(dy, dz, n, c, h, w, 0));
        gpu_sync();
        uint16_t *y = malloc(padded * 2);
        float *z = malloc(dense * 4);
        gpu_download(y, dy, padded * 2);
        gpu_download(z, dz, dense * 4);
        uint16_t *want = host_to_nhwc8(x, n, c, h, w);
        for (size_t i = 0; i < padded; i++)
            ck_assert_msg(y[i] == want[i],
                          "shape %zu NHWC8 element %zu (channel %lld): got 0x%04x want 0x%04x", t,
                          i, (long long)(i % (size_t)cp), y[i], want[i]);
        for (size_t i = 0; i < dense; i++)
            ck_assert_msg(z[i] == round_half(x[i]), "shape %zu NCHW element %zu: got %g want %g", t,
                          i, z[i], round_half(x[i]));
        free(want);
        free(x);
        free(y);
        free(z);
        gpu_free(dx);
        gpu_free(dy);
        gpu_free(dz);
    }
}
END_TEST

START_TEST(test_nchw_f16_nhwc8_round_trip) {
    for (size_t t = 0; t < sizeof layout_shapes / sizeof layout_shapes[0]; t++) {
        int64_t n = layout_shapes[t][0], c = layout_shapes[t][1], h = layout_shapes[t][2],
                w = layout_shapes[t][3], cp = round8(c);
        size_t dense = (size_t)(n * c * h * w), padded = (size_t)(n * h * w * cp);
        float *x = random_floats(dense, 300 + t, -3, 3);
        uint16_t *xh = malloc(dense * 2);
        gpu_to_half(x, xh, dense);
        void *dx = gpu_upload(xh, dense * 2);
        void *dy = gpu_upload(NULL, padded * 2);
        void *dz = gpu_upload(NULL, dense * 2);
        ck_assert_tci_ok(kern_nchw_f16_to_nhwc8(dx, dy, n, c, h, w, 0));
        ck_assert_tci_ok(kern_nhwc8_to_nchw_f16(dy, dz, n, c, h, w, 0));
        gpu_sync();
        uint16_t *y = malloc(padded * 2), *z = malloc(dense * 2);
        gpu_download(y, dy, padded * 2);
        gpu_download(z, dz, dense * 2);
        uint16_t *want = host_to_nhwc8(x, n, c, h, w);
        ck_assert_msg(memcmp(y, want, padded * 2) == 0, "shape %zu: NHWC8 differs", t);
        ck_assert_msg(memcmp(z, xh, dense * 2) == 0, "shape %zu: NCHW round trip differs", t);
        free(want);
        free(x);
        free(xh);
        free(y);
        free(z);
        gpu_free(dx);
        gpu_free(dy);
        gpu_free(dz);
    }
}
END_TEST

/* Dense casts: odd counts (a tail after the 8-wide vectors), misaligned buffers (scalar path),
 * values that round, overflow to infinity and underflow to subnormals. */
START_TEST(test_dense_casts) {
    const int64_t counts[] = {1, 7, 8, 1001, 65536 + 3};
    for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++)
        for (size_t misalign = 0; misalign <= 4; misalign += 4) {
            int64_t n = counts[t];
            float *x = random_floats((size_t)n, 400 + t, -100, 100);
            if (n > 3)
                x[0] = 70000.0f, x[1] = -1e-6f, x[2] = 1.0f + 1.0f / 2048,
                x[3] = 1.0f + 3.0f / 2048; /* inf, subnormal, ties */
            unsigned char *dx = gpu_upload(NULL, (size_t)n * 4 + 8);
            unsigned char *dh = gpu_upload(NULL, (size_t)n * 2 + 8);
            unsigned char *dz = gpu_upload(NULL, (size_t)n * 4 + 8);
            ck_assert_int_eq(cudaMemcpy(dx + misalign, x, (size_t)n * 4, cudaMemcpyHostToDevice),
                             cudaSuccess);
            ck_assert_tci_ok(
                kern_f32_to_f16((const float *)(dx + misalign), dh + misalign / 2, n, 0));
            ck_assert_tci_ok(kern_f16_to_f32(dh + misalign / 2, (float *)(dz + misalign), n, 0));
            gpu_sync();
            uint16_t *h = malloc((size_t)n * 2);
            float *z = malloc((size_t)n * 4);
            gpu_download(h, dh + misalign / 2, (size_t)n * 2);
            gpu_download(z, dz + misalign, (size_t)n * 4);
            for (int64_t i = 0; i < n; i++) {
                ck_assert_msg(h[i] == float_to_half(x[i]),
                              "count %lld element %lld: 0x%04x vs 0x%04x", (long long)n,
                              (long long)i, h[i], float_to_half(x[i]));
                ck_assert_msg(z[i] == half_to_float(h[i]),
                              "count %lld element %lld back: %g vs %g", (long long)n, (long long)i,
                              z[i], half_to_float(h[i]));
            }
            free(x);
            free(h);
            free(z);
            gpu_free(dx);
            gpu_free(dh);
            gpu_free(dz);
        }
}
END_TEST

/* kern_nchw_to_nhwc8 / kern_nhwc8_to_nchw for every pairing of fp32, fp16 and bf16: bit-exact
 * against the host conversion (each value rounds once, to nearest even, from its exact source
 * value), padded channels written as zero bits, and back again. */
START_TEST(test_layout_any_pairing) {
    static const tci_dtype types[] = {F32, F16, BF16};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t t = 0; t < sizeof layout_shapes / sizeof layout_shapes[0]; t++) {
                const tci_dtype st = types[a], dt = types[b];
                const size_t ses = gpu_dtype_size(st), des = gpu_dtype_size(dt);
                int64_t n = layout_shapes[t][0], c = layout_shapes[t][1], h = layout_shapes[t][2],
                        w = layout_shapes[t][3];
                size_t dense = (size_t)(n * c * h * w), padded = (size_t)(n * h * w * round8(c));
                float *x = random_floats(dense, 900 + t * 9 + a * 3 + b, -3, 3);
                x[0] = 1.0f + 1.0f / 256; /* a bf16 tie */
                gpu_round_to(st, x, dense);
                void *xs = malloc(dense * ses);
                gpu_encode(st, x, xs, dense);
                void *dx = gpu_upload(xs, dense * ses);
                void *dy = gpu_upload(NULL, padded * des);
                void *dz = gpu_upload(NULL, dense * ses);
                ck_assert_tci_ok(kern_nchw_to_nhwc8(dx, st, dy, dt, n, c, h, w, 0));
                ck_assert_tci_ok(kern_nhwc8_to_nchw(dy, dt, dz, st, n, c, h, w, 0));
                gpu_sync();
                unsigned char *y = malloc(padded * des), *z = malloc(dense * ses);
                gpu_download(y, dy, padded * des);
                gpu_download(z, dz, dense * ses);
                unsigned char *want = host_to_nhwc8_as(dt, x, n, c, h, w);
                ck_assert_msg(memcmp(y, want, padded * des) == 0, "%s -> %s shape %zu: NHWC8 differs",
                              gpu_dtype_tag(st), gpu_dtype_tag(dt), t);
                /* back: the NHWC8 values, converted to st */
                float *yf = malloc(padded * sizeof(float));
                gpu_decode(dt, y, yf, padded);
                int64_t cp = round8(c);
                for (int64_t i = 0; i < n; i++)
                    for (int64_t ch = 0; ch < c; ch++)
                        for (int64_t sp = 0; sp < h * w; sp++) {
                            size_t at = (size_t)((i * c + ch) * h * w + sp);
                            unsigned char bits[4];
                            gpu_encode(st, &yf[(i * h * w + sp) * cp + ch], bits, 1);
                            ck_assert_msg(memcmp(z + at * ses, bits, ses) == 0,
                                          "%s -> %s -> %s shape %zu element %zu differs",
                                          gpu_dtype_tag(st), gpu_dtype_tag(dt), gpu_dtype_tag(st),
                                          t, at);
                        }
                free(x), free(xs), free(y), free(z), free(want), free(yf);
                gpu_free(dx);
                gpu_free(dy);
                gpu_free(dz);
            }
}
END_TEST

/* kern_f32_to_bf16 / kern_bf16_to_f32 as test_dense_casts: tails, misaligned buffers, ties,
 * overflow to infinity and fp32 subnormals (bf16 keeps fp32's exponent range). Bit-exact. */
START_TEST(test_dense_casts_bf16) {
    const int64_t counts[] = {1, 7, 8, 1001, 65536 + 3};
    for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++)
        for (size_t misalign = 0; misalign <= 4; misalign += 4) {
            int64_t n = counts[t];
            float *x = random_floats((size_t)n, 450 + t, -100, 100);
            if (n > 4)
                x[0] = 3.4e38f, x[1] = -1e-39f, x[2] = 1.0f + 1.0f / 256,
                x[3] = 1.0f + 3.0f / 256, x[4] = -0.0f; /* inf, subnormal, ties, -0 */
            unsigned char *dx = gpu_upload(NULL, (size_t)n * 4 + 8);
            unsigned char *dh = gpu_upload(NULL, (size_t)n * 2 + 8);
            unsigned char *dz = gpu_upload(NULL, (size_t)n * 4 + 8);
            ck_assert_int_eq(cudaMemcpy(dx + misalign, x, (size_t)n * 4, cudaMemcpyHostToDevice),
                             cudaSuccess);
            ck_assert_tci_ok(
                kern_f32_to_bf16((const float *)(dx + misalign), dh + misalign / 2, n, 0));
            ck_assert_tci_ok(kern_bf16_to_f32(dh + misalign / 2, (float *)(dz + misalign), n, 0));
            gpu_sync();
            uint16_t *h = malloc((size_t)n * 2);
            float *z = malloc((size_t)n * 4);
            gpu_download(h, dh + misalign / 2, (size_t)n * 2);
            gpu_download(z, dz + misalign, (size_t)n * 4);
            for (int64_t i = 0; i < n; i++) {
                ck_assert_msg(h[i] == float_to_bfloat16(x[i]),
                              "count %lld element %lld: 0x%04x vs 0x%04x", (long long)n,
                              (long long)i, h[i], float_to_bfloat16(x[i]));
                ck_assert_msg(memcmp(&z[i], &(float){bfloat16_to_float(h[i])}, 4) == 0,
                              "count %lld element %lld back: %g vs %g", (long long)n, (long long)i,
                              z[i], bfloat16_to_float(h[i]));
            }
            free(x);
            free(h);
            free(z);
            gpu_free(dx);
            gpu_free(dh);
            gpu_free(dz);
        }
    void *d = gpu_upload(NULL, 64);
    ck_assert_tci_error(kern_f32_to_bf16(d, d, -1, 0), TCI_ERR_INVALID_ARGUMENT, "negative count");
    ck_assert_tci_error(kern_bf16_to_f32(NULL, d, 4, 0), TCI_ERR_INVALID_ARGUMENT,
                        "kern_bf16_to_f32: NULL buffer");
    ck_assert_tci_error(kern_nchw_to_nhwc8(d, TCI_DTYPE_DOUBLE, d, BF16, 1, 8, 1, 1, 0),
                        TCI_ERR_UNSUPPORTED, "fp16, bf16 or fp32");
    ck_assert_tci_error(kern_nhwc8_to_nchw(d, BF16, d, TCI_DTYPE_INT8, 1, 8, 1, 1, 0),
                        TCI_ERR_UNSUPPORTED, "int8");
    gpu_free(d);
}
END_TEST

/* kern_cast to and from bf16: floats round once to nearest even, bf16 widens exactly, to integers
 * truncates toward zero, to bool is x != 0. */
START_TEST(test_cast_bf16) {
    enum { N = 9 };
    const float f[N] = {1.0f + 1.0f / 256, -2.75f, 0.0f, 300.5f, -0.4f, 1e-39f, 3.4e38f, 7.0f, -1e4f};
    uint16_t h[N];
    gpu_to_half(f, h, N);
    float *df = gpu_upload(f, sizeof f);
    void *dh = gpu_upload(h, sizeof h), *db = gpu_upload(NULL, N * 2), *dx = gpu_upload(NULL, N * 8);
    uint16_t b[N], back[N];
    /* fp32 -> bf16 -> fp32 */
    ck_assert_tci_ok(kern_cast(df, TCI_DTYPE_FLOAT, db, TCI_DTYPE_BFLOAT16, N, 0));
    gpu_sync();
    gpu_download(b, db, sizeof b);
    for (int i = 0; i < N; i++) ck_assert_uint_eq(b[i], float_to_bfloat16(f[i]));
    ck_assert_tci_ok(kern_cast(db, TCI_DTYPE_BFLOAT16, dx, TCI_DTYPE_FLOAT, N, 0));
    float wide[N];
    gpu_sync();
    gpu_download(wide, dx, sizeof wide);
    for (int i = 0; i < N; i++) ck_assert_float_eq(wide[i], bfloat16_to_float(b[i]));
    /* fp16 -> bf16 and bf16 -> fp16: one rounding from the exact source value */
    ck_assert_tci_ok(kern_cast(dh, TCI_DTYPE_FLOAT16, db, TCI_DTYPE_BFLOAT16, N, 0));
    gpu_sync();
    gpu_download(b, db, sizeof b);
    for (int i = 0; i < N; i++) ck_assert_uint_eq(b[i], float_to_bfloat16(half_to_float(h[i])));
    ck_assert_tci_ok(kern_cast(db, TCI_DTYPE_BFLOAT16, dh, TCI_DTYPE_FLOAT16, N, 0));
    gpu_sync();
    gpu_download(back, dh, sizeof back);
    for (int i = 0; i < N; i++) ck_assert_uint_eq(back[i], float_to_half(bfloat16_to_float(b[i])));
    /* bf16 -> int64 (toward zero) and bool; int64 -> bf16 */
    ck_assert_tci_ok(kern_cast(df, TCI_DTYPE_FLOAT, db, TCI_DTYPE_BFLOAT16, 6, 0));
    ck_assert_tci_ok(kern_cast(db, TCI_DTYPE_BFLOAT16, dx, TCI_DTYPE_INT64, 6, 0));
    int64_t ints[6];
    gpu_sync();
    gpu_download(ints, dx, sizeof ints);
    for (int i = 0; i < 6; i++) ck_assert_int_eq(ints[i], (int64_t)bfloat16_to_float(float_to_bfloat16(f[i])));
    ck_assert_tci_ok(kern_cast(db, TCI_DTYPE_BFLOAT16, dx, TCI_DTYPE_BOOL, 6, 0));
    uint8_t flags[6];
    gpu_sync();
    gpu_download(flags, dx, sizeof flags);
    for (int i = 0; i < 6; i++) ck_assert_uint_eq(flags[i], f[i] != 0.0f);
    const int64_t big[3] = {257, -3, 1000001};
    void *di = gpu_upload(big, sizeof big);
    ck_assert_tci_ok(kern_cast(di, TCI_DTYPE_INT64, db, TCI_DTYPE_BFLOAT16, 3, 0));
    gpu_sync();
    gpu_download(b, db, 6);
    for (int i = 0; i < 3; i++) ck_assert_uint_eq(b[i], float_to_bfloat16((float)big[i]));
    ck_assert_tci_error(kern_cast(db, TCI_DTYPE_BFLOAT16, dx, TCI_DTYPE_DOUBLE, 3, 0),
                        TCI_ERR_INVALID_ARGUMENT, "bfloat16 -> double");
    gpu_free(df), gpu_free(dh), gpu_free(db), gpu_free(dx), gpu_free(di);
}
END_TEST

START_TEST(test_layout_errors) {
    static const unsigned char zeros[128];
    void *d = gpu_upload(zeros, sizeof zeros);
    ck_assert_tci_error(kern_nchw_f32_to_nhwc8(d, d, 1, -1, 2, 2, 0), TCI_ERR_INVALID_ARGUMENT,
                        "negative dims");
    ck_assert_tci_error(kern_nchw_f32_to_nhwc8(NULL, d, 1, 1, 2, 2, 0), TCI_ERR_INVALID_ARGUMENT,
                        "NULL buffer");
    ck_assert_tci_error(kern_nhwc8_to_nchw_f16((char *)d + 2, d, 1, 1, 2, 2, 0),
                        TCI_ERR_INVALID_ARGUMENT, "not 16-byte aligned");
    ck_assert_tci_error(kern_nchw_f16_to_nhwc8(d, d, INT64_MAX / 2, 9, 4, 4, 0),
                        TCI_ERR_INVALID_ARGUMENT, "too large");
    ck_assert_tci_error(kern_f32_to_f16(d, d, -1, 0), TCI_ERR_INVALID_ARGUMENT, "negative count");
    ck_assert_tci_error(kern_f16_to_f32(NULL, d, 4, 0), TCI_ERR_INVALID_ARGUMENT, "NULL buffer");
    /* empty tensors enqueue nothing */
    ck_assert_tci_ok(kern_nchw_f32_to_nhwc8(NULL, NULL, 0, 3, 4, 4, 0));
    ck_assert_tci_ok(kern_f16_to_f32(NULL, NULL, 0, 0));
    gpu_free(d);
}
END_TEST

/* ---- pooling ------------------------------------------------------------------------------- */

/* Output size as the engine computes it (ONNX explicit pads, floor or ceil mode). */
static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                        bool ceil_mode) {
    int64_t span = in + pb + pe - ((k - 1) * d + 1);
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pb)
        o--; /* the last window must start inside input or pad */
    return o;
}

/* The fp32 reference on NCHW data (the semantics of src/layers/pool.c). */
static float pool_ref(const kern_pool2d_desc *p, const float *x, int64_t img, int64_t ch,
                      int64_t oh, int64_t ow) {
    int64_t hs = oh * p->geom.stride_h - p->geom.pad_top, ws = ow * p->geom.stride_w - p->geom.pad_left;
    double acc = p->mode == POOL_MAX ? -INFINITY : 0;
    int64_t taps = 0, counted_h = 0, counted_w = 0;
    for (int64_t a = 0; a < p->geom.kernel_h; a++) {
        int64_t ih = hs + a * p->geom.dilation_h;
        if (ih < p->geom.h + p->geom.pad_bottom)
            counted_h++;
        for (int64_t b = 0; b < p->geom.kernel_w; b++) {
            int64_t iw = ws + b * p->geom.dilation_w;
            if (a == 0 && iw < p->geom.w + p->geom.pad_right)
                counted_w++;
            if (ih < 0 || ih >= p->geom.h || iw < 0 || iw >= p->geom.w)
                continue;
            float v = x[((img * p->geom.c + ch) * p->geom.h + ih) * p->geom.w + iw];
            acc = p->mode == POOL_MAX ? fmax(acc, v) : acc + v;
            taps++;
        }
    }
    if (p->mode == POOL_MAX)
        return taps ? (float)acc : p->dtype == BF16 ? -3.38953139e38f : -65504.0f;
    int64_t divisor = p->count_include_pad ? counted_h * counted_w : taps;
    return divisor ? (float)(acc / (double)divisor) : 0.0f;
}

typedef struct pool_case {
    int64_t n, c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    bool ceil_mode;
} pool_case;

/* dt: fp16 or bf16 storage */
static void check_pool(tci_dtype dt, const pool_case *pc, pool_kind mode,
                       int count_include_pad, uint64_t seed) {
    kern_pool2d_desc p;
    memset(&p, 0, sizeof p);
    p.dtype = dt == BF16 ? BF16 : 0; /* 0: fp16, as a zeroed desc */
    p.mode = mode;
    p.count_include_pad = count_include_pad;
    p.geom.n = pc->n, p.geom.c = pc->c, p.geom.h = pc->h, p.geom.w = pc->w;
    p.geom.kernel_h = pc->kh, p.geom.kernel_w = pc->kw, p.geom.stride_h = pc->sh, p.geom.stride_w = pc->sw;
    p.geom.dilation_h = pc->dh, p.geom.dilation_w = pc->dw;
    p.geom.pad_top = pc->pt, p.geom.pad_left = pc->pl, p.geom.pad_bottom = pc->pb, p.geom.pad_right = pc->pr;
    p.geom.out_h = pool_out(pc->h, pc->kh, pc->sh, pc->dh, pc->pt, pc->pb, pc->ceil_mode);
    p.geom.out_w = pool_out(pc->w, pc->kw, pc->sw, pc->dw, pc->pl, pc->pr, pc->ceil_mode);
    int64_t cp = round8(pc->c);
    size_t dense = (size_t)(pc->n * pc->c * pc->h * pc->w);
    size_t in_padded = (size_t)(pc->n * pc->h * pc->w * cp),
           out_padded = (size_t)(pc->n * p.geom.out_h * p.geom.out_w * cp);
    float *x = random_floats(dense, seed, -3, 3);
    gpu_round_to(dt, x, dense);
    uint16_t *xh = host_to_nhwc8_as(dt, x, pc->n, pc->c, pc->h, pc->w);
    void *dx = gpu_upload(xh, in_padded * 2);
    void *dy = gpu_upload(NULL, out_padded * 2);
    ck_assert_tci_ok(kern_pool2d(&p, dx, dy, 0));
    gpu_sync();
    uint16_t *y = malloc(out_padded * 2 + 2);
    gpu_download(y, dy, out_padded * 2);
    for (int64_t img = 0; img < pc->n; img++)
        for (int64_t oh = 0; oh < p.geom.out_h; oh++)
            for (int64_t ow = 0; ow < p.geom.out_w; ow++)
                for (int64_t ch = 0; ch < cp; ch++) {
                    float got = 0.0f;
                    gpu_decode(dt, &y[((img * p.geom.out_h + oh) * p.geom.out_w + ow) * cp + ch], &got, 1);
                    if (ch >= pc->c) {
                        ck_assert_msg(y[((img * p.geom.out_h + oh) * p.geom.out_w + ow) * cp + ch] == 0,
                                      "padded channel %lld is %g", (long long)ch, got);
                        continue;
                    }
                    float want = pool_ref(&p, x, img, ch, oh, ow);
                    const double tol = dt == BF16 ? GPU_BF16_TOL : 2e-3;
                    ck_assert_msg(
                        fabs((double)got - want) <= tol * fmax(1.0, fabs(want)),
                        "%s %s cip %d out %lldx%lld at (%lld,%lld,%lld,%lld): got %g want %g",
                        gpu_dtype_tag(dt), mode == POOL_MAX ? "max" : "avg", count_include_pad,
                        (long long)p.geom.out_h, (long long)p.geom.out_w, (long long)img, (long long)ch,
                        (long long)oh, (long long)ow, got, want);
                }
    free(x);
    free(xh);
    free(y);
    gpu_free(dx);
    gpu_free(dy);
}

static const pool_case pool_cases[] = {
    /* n  c   h   w  kh kw sh sw dh dw pt pl pb pr ceil */
    {2, 13, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false},  /* 3x3 s1 same-padded */
    {2, 13, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false},  /* ResNet stem style */
    {2, 13, 7, 9, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true},   /* ceil mode: windows past the end */
    {1, 21, 12, 11, 2, 3, 2, 3, 1, 1, 1, 0, 0, 2, true}, /* asymmetric pads, ceil */
    {2, 5, 9, 10, 3, 2, 1, 2, 2, 3, 2, 1, 1, 2, false},  /* dilations */
    {1, 70, 15, 14, 5, 5, 3, 3, 2, 1, 2, 2, 2, 2, true}, /* dilation + ceil, C > 64 */
    {3, 8, 6, 6, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false},   /* exact 2x2 */
    {1, 3, 4, 5, 1, 1, 3, 2, 1, 1, 0, 0, 0, 0, true},    /* 1x1 strided */
    {1, 9, 3, 3, 2, 2, 1, 1, 4, 4, 2, 2, 2, 2, false},   /* dilated windows that miss the input */
};

START_TEST(test_pool2d) {
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        check_pool(F16, &pool_cases[i], POOL_MAX, 0, 500 + i);
        check_pool(F16, &pool_cases[i], POOL_AVERAGE, 0, 600 + i);
        check_pool(F16, &pool_cases[i], POOL_AVERAGE, 1, 700 + i);
    }
}
END_TEST

/* Ceil-mode output sizes the helper above gives (as ONNX / onnxruntime). */
START_TEST(test_pool_out_sizes) {
    ck_assert_int_eq(pool_out(7, 3, 2, 1, 0, 0, false), 3);
    ck_assert_int_eq(pool_out(7, 3, 2, 1, 0, 0, true), 3);
    ck_assert_int_eq(pool_out(8, 3, 2, 1, 0, 0, true), 4);
    ck_assert_int_eq(pool_out(8, 3, 2, 1, 0, 0, false), 3);
    ck_assert_int_eq(pool_out(112, 3, 2, 1, 1, 1, false), 56);
    ck_assert_int_eq(pool_out(5, 2, 2, 1, 1, 1, true),
                     3); /* a 4th window would start in the end pad */
}
END_TEST

static void check_global(tci_dtype dt, pool_kind mode, int64_t n, int64_t c, int64_t h,
                         int64_t w, uint64_t seed) {
    int64_t cp = round8(c);
    size_t dense = (size_t)(n * c * h * w), padded = (size_t)(n * h * w * cp);
    float *x = random_floats(dense, seed, -2, 3);
    gpu_round_to(dt, x, dense);
    uint16_t *xh = host_to_nhwc8_as(dt, x, n, c, h, w);
    void *dx = gpu_upload(xh, padded * 2);
    void *dy = gpu_upload(NULL, (size_t)(n * cp) * 2);
    if (dt == BF16) ck_assert_tci_ok(kern_global_pool_dtype(mode, dx, dy, n, c, h, w, dt, 0));
    else ck_assert_tci_ok(kern_global_pool(mode, dx, dy, n, c, h, w, 0));
    gpu_sync();
    uint16_t *y = malloc((size_t)(n * cp) * 2);
    gpu_download(y, dy, (size_t)(n * cp) * 2);
    for (int64_t img = 0; img < n; img++)
        for (int64_t ch = 0; ch < cp; ch++) {
            uint16_t bits = y[img * cp + ch];
            if (ch >= c) {
                ck_assert_msg(bits == 0, "global pool %lldx%lld padded channel %lld: 0x%04x",
                              (long long)h, (long long)w, (long long)ch, bits);
                continue;
            }
            double acc = mode == POOL_MAX ? -INFINITY : 0;
            const float *plane = x + (img * c + ch) * h * w;
            for (int64_t s = 0; s < h * w; s++)
                acc = mode == POOL_MAX ? fmax(acc, plane[s]) : acc + plane[s];
            if (mode == POOL_AVERAGE)
                acc /= (double)(h * w);
            float got = 0.0f;
            gpu_decode(dt, &bits, &got, 1);
            ck_assert_msg(fabs(got - acc) <= (dt == BF16 ? GPU_BF16_TOL : 2e-3) * fmax(1.0, fabs(acc)),
                          "global %s %s %lldx%lldx%lld image %lld channel %lld: got %g want %g",
                          gpu_dtype_tag(dt), mode == POOL_MAX ? "max" : "avg", (long long)c, (long long)h,
                          (long long)w, (long long)img, (long long)ch, got, acc);
        }
    free(x);
    free(xh);
    free(y);
    gpu_free(dx);
    gpu_free(dy);
}

START_TEST(test_global_pool) {
    const int64_t shapes[][4] = {
        {2, 13, 56, 56}, {1, 64, 56, 56}, {2, 2048, 7, 7},  {3, 13, 7, 7},
        {1, 70, 1, 1},   {2, 5, 3, 11},   {1, 300, 33, 31}, {65, 8, 2, 2},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int mode = 0; mode < 2; mode++)
            check_global(F16, (pool_kind)mode, shapes[i][0], shapes[i][1], shapes[i][2],
                         shapes[i][3], 800 + i);
}
END_TEST

/* An average over a large plane of equal values must stay exact-ish: fp32 accumulation, not fp16.
 */
START_TEST(test_global_avg_accumulates_fp32) {
    const int64_t n = 1, c = 16, h = 112, w = 112;
    size_t padded = (size_t)(n * h * w * c);
    uint16_t *xh = malloc(padded * 2);
    for (size_t i = 0; i < padded; i++)
        xh[i] = float_to_half(1.001f);
    void *dx = gpu_upload(xh, padded * 2);
    void *dy = gpu_upload(NULL, (size_t)c * 2);
    ck_assert_tci_ok(kern_global_pool(POOL_AVERAGE, dx, dy, n, c, h, w, 0));
    gpu_sync();
    uint16_t y[16];
    gpu_download(y, dy, sizeof y);
    for (int ch = 0; ch < 16; ch++)
        ck_assert_uint_eq(y[ch], xh[0]);
    free(xh);
    gpu_free(dx);
    gpu_free(dy);
}
END_TEST

/* bf16 storage: every windowed case and the global shapes of the fp16 tests (padded channels
 * zero, max windows that miss the input give bf16's lowest finite value). */
START_TEST(test_pool_bf16) {
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        check_pool(BF16, &pool_cases[i], POOL_MAX, 0, 1500 + i);
        check_pool(BF16, &pool_cases[i], POOL_AVERAGE, 0, 1600 + i);
        check_pool(BF16, &pool_cases[i], POOL_AVERAGE, 1, 1700 + i);
    }
    const int64_t shapes[][4] = {{2, 13, 56, 56}, {2, 2048, 7, 7}, {2, 5, 3, 11}, {65, 8, 2, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int mode = 0; mode < 2; mode++)
            check_global(BF16, (pool_kind)mode, shapes[i][0], shapes[i][1], shapes[i][2],
                         shapes[i][3], 1800 + i);
    kern_pool2d_desc p;
    memset(&p, 0, sizeof p);
    p.dtype = TCI_DTYPE_INT64;
    ck_assert_tci_error(kern_pool2d(&p, NULL, NULL, 0), TCI_ERR_UNSUPPORTED, "int64");
    ck_assert_tci_error(kern_global_pool_dtype(POOL_MAX, NULL, NULL, 1, 8, 1, 1,
                                               TCI_DTYPE_DOUBLE, 0),
                        TCI_ERR_UNSUPPORTED, "fp16, bf16 or fp32");
}
END_TEST

START_TEST(test_pool_errors) {
    static const unsigned char zeros[128];
    char *d = gpu_upload(zeros, sizeof zeros);
    kern_pool2d_desc p;
    memset(&p, 0, sizeof p);
    p.mode = POOL_MAX;
    p.geom.n = 1, p.geom.c = 8, p.geom.h = p.geom.w = 2, p.geom.out_h = p.geom.out_w = 1;
    p.geom.kernel_h = p.geom.kernel_w = 2, p.geom.stride_h = p.geom.stride_w = 1, p.geom.dilation_h = p.geom.dilation_w = 1;
    ck_assert_tci_ok(kern_pool2d(&p, d, d + 64, 0));
    gpu_sync();
    ck_assert_tci_error(kern_pool2d(NULL, d, d, 0), TCI_ERR_INVALID_ARGUMENT, "NULL desc");
    p.geom.stride_w = 0;
    ck_assert_tci_error(kern_pool2d(&p, d, d, 0), TCI_ERR_INVALID_ARGUMENT, "must be >= 1");
    p.geom.stride_w = 1;
    p.geom.pad_right = -1;
    ck_assert_tci_error(kern_pool2d(&p, d, d, 0), TCI_ERR_INVALID_ARGUMENT, "negative pads");
    p.geom.pad_right = 0;
    p.geom.out_h = -1;
    ck_assert_tci_error(kern_pool2d(&p, d, d, 0), TCI_ERR_INVALID_ARGUMENT, "negative size");
    p.geom.out_h = 1;
    p.mode = (pool_kind)7;
    ck_assert_tci_error(kern_pool2d(&p, d, d, 0), TCI_ERR_INVALID_ARGUMENT, "unknown mode 7");
    p.mode = POOL_AVERAGE;
    ck_assert_tci_error(kern_pool2d(&p, d + 2, d, 0), TCI_ERR_INVALID_ARGUMENT, "16-byte aligned");
    ck_assert_tci_error(kern_pool2d(&p, NULL, d, 0), TCI_ERR_INVALID_ARGUMENT, "NULL buffer");
    p.geom.stride_h = INT64_MAX / 2;
    ck_assert_tci_error(kern_pool2d(&p, d, d, 0), TCI_ERR_INVALID_ARGUMENT, "too large");
    ck_assert_tci_error(kern_global_pool(POOL_AVERAGE, d, d, 1, 8, 0, 3, 0),
                        TCI_ERR_INVALID_ARGUMENT, "empty plane");
    ck_assert_tci_error(kern_global_pool(POOL_MAX, d, d + 8, 1, 8, 2, 3, 0),
                        TCI_ERR_INVALID_ARGUMENT, "16-byte aligned");
    ck_assert_tci_error(kern_global_pool(POOL_MAX, d, d, -1, 8, 2, 3, 0),
                        TCI_ERR_INVALID_ARGUMENT, "negative dims");
    ck_assert_tci_ok(kern_global_pool(POOL_MAX, NULL, NULL, 0, 8, 2, 3, 0));
    gpu_free(d);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_layout_pool");
    Suite *s = suite_create("gpu_layout_pool");
    TCase *tc = tcase_create("layout_pool");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_nchw_f32_nhwc8_round_trip);
    tcase_add_test(tc, test_nchw_f16_nhwc8_round_trip);
    tcase_add_test(tc, test_dense_casts);
    tcase_add_test(tc, test_layout_any_pairing);
    tcase_add_test(tc, test_dense_casts_bf16);
    tcase_add_test(tc, test_cast_bf16);
    tcase_add_test(tc, test_layout_errors);
    tcase_add_test(tc, test_pool_out_sizes);
    tcase_add_test(tc, test_pool2d);
    tcase_add_test(tc, test_global_pool);
    tcase_add_test(tc, test_global_avg_accumulates_fp32);
    tcase_add_test(tc, test_pool_bf16);
    tcase_add_test(tc, test_pool_errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
