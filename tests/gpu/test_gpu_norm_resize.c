/* GPU softmax, LayerNormalization, GroupNormalization, LRN, Reduce (the rows of
 * util/reduce_ops.h) and Resize kernels (src/kernels/norm.h, resize.h) against double-precision C
 * references on the same fp16- (or bf16-) rounded inputs. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/norm.h"
#include "kernels/resize.h"

#define F16 TCI_DTYPE_FLOAT16
#define BF16 TCI_DTYPE_BFLOAT16
#define F32 TCI_DTYPE_FLOAT

/* n random values of dt (fp16 or bf16) in [lo, hi): bits in *out_bits, their exact values as
 * floats in *out. */
static void random_half(tci_dtype dt, size_t n, uint64_t seed, float lo, float hi,
                        uint16_t **out_bits, float **out) {
    float *f = malloc(sizeof(float) * (n ? n : 1));
    uint16_t *h = malloc(sizeof(uint16_t) * (n ? n : 1));
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(h);
    gpu_fill_random(f, n, seed, lo, hi);
    gpu_encode(dt, f, h, n);
    gpu_decode(dt, h, f, n);
    *out_bits = h;
    *out = f;
}

/* Downloads n fp16 (bf16) values as floats. */
static float *download_half(tci_dtype dt, const void *device, size_t n) {
    uint16_t *h = malloc(2 * (n ? n : 1));
    float *f = malloc(sizeof(float) * (n ? n : 1));
    gpu_download(h, device, 2 * n);
    gpu_decode(dt, h, f, n);
    free(h);
    return f;
}

/* The relative tolerance of a test whose fp16 bound is f16_tol: bf16 outputs are rounded once to
 * 8 significant bits, see GPU_BF16_TOL. */
static double tol_for(tci_dtype dt, double f16_tol) { return dt == BF16 ? GPU_BF16_TOL : f16_tol; }

/* |got - want| <= rel * max(floor, |want|) everywhere (NaN matches NaN only, an infinity
 * itself only). */
static void assert_close(const float *got, const double *want, size_t n, double rel, double floor_,
                         const char *what) {
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i])) {
            ck_assert_msg(isnan(got[i]), "%s[%zu] = %g, want NaN", what, i, (double)got[i]);
            continue;
        }
        if (isinf(want[i])) {
            ck_assert_msg((double)got[i] == want[i], "%s[%zu] = %g, want %g", what, i,
                          (double)got[i], want[i]);
            continue;
        }
        double scale = fabs(want[i]) > floor_ ? fabs(want[i]) : floor_;
        ck_assert_msg(fabs((double)got[i] - want[i]) <= rel * scale, "%s[%zu] = %.6g, want %.6g",
                      what, i, (double)got[i], want[i]);
    }
}

/* ---- softmax ---- */

/* Rows (inner == 1 through kern_*softmax_rows, else kern_softmax_strided); a few -inf inputs
 * (masked positions) when mask is set. */
static void check_softmax(tci_dtype dt, int64_t outer, int64_t len, int64_t inner, int log_,
                          int mask, uint64_t seed) {
    size_t n = (size_t)(outer * len * inner);
    uint16_t *xh;
    float *x;
    random_half(dt, n, seed, -8.0f, 8.0f, &xh, &x);
    if (mask)
        for (size_t i = 3; i < n; i += 7) xh[i] = dt == BF16 ? 0xff80 : 0xfc00, x[i] = -INFINITY;
    double *want = malloc(sizeof(double) * n);
    gpu_softmax_reference(x, want, outer, len, inner, log_);
    void *dx = gpu_upload(xh, 2 * n), *dy = gpu_upload(NULL, 2 * n);
    if (dt == BF16 && inner == 1 && log_)
        ck_assert_tci_ok(kern_log_softmax_rows_dtype(dx, dy, outer, len, dt, 0));
    else if (dt == BF16 && inner == 1)
        ck_assert_tci_ok(kern_softmax_rows_dtype(dx, dy, outer, len, dt, 0));
    else if (dt == BF16)
        ck_assert_tci_ok(kern_softmax_strided_dtype(dx, dy, outer, len, inner, log_, dt, 0));
    else if (inner == 1 && log_) ck_assert_tci_ok(kern_log_softmax_rows(dx, dy, outer, len, 0));
    else if (inner == 1) ck_assert_tci_ok(kern_softmax_rows(dx, dy, outer, len, 0));
    else ck_assert_tci_ok(kern_softmax_strided(dx, dy, outer, len, inner, log_, 0));
    gpu_sync();
    float *got = download_half(dt, dy, n);
    const double tol = tol_for(dt, 2e-3);
    if (log_) { /* -inf in, -inf out */
        for (size_t i = 0; i < n; i++)
            if (isinf(want[i])) ck_assert_msg(isinf(got[i]) && got[i] < 0, "log_softmax[%zu]", i);
            else ck_assert_msg(fabs(got[i] - want[i]) <= tol * fmax(1.0, fabs(want[i])),
                               "log_softmax[%zu] = %g, want %g", i, (double)got[i], want[i]);
    } else {
        assert_close(got, want, n, tol, 1e-3, "softmax");
    }
    gpu_free(dx);
    gpu_free(dy);
    free(xh);
    free(x);
    free(want);
    free(got);
}

START_TEST(test_softmax_rows) {
    check_softmax(F16, 37, 7, 1, 0, 0, 1);      /* warp per row, scalar loads */
    check_softmax(F16, 13, 1000, 1, 0, 0, 2);   /* warp per row, vectors */
    check_softmax(F16, 5, 4096, 1, 0, 0, 3);    /* block per row */
    check_softmax(F16, 3, 32768, 1, 0, 0, 4);
    check_softmax(F16, 4, 1001, 1, 0, 1, 5);    /* block, scalar, masked */
    check_softmax(F16, 9, 64, 1, 0, 1, 6);
    /* several rows per warp: 8, 4, 2 and 1 lanes per row, rows not filling the last block */
    check_softmax(F16, 77, 3, 1, 0, 0, 7);
    check_softmax(F16, 1001, 32, 1, 0, 0, 8);
    check_softmax(F16, 45, 16, 1, 0, 1, 9);
    check_softmax(F16, 50, 1, 1, 0, 0, 10);
}
END_TEST

START_TEST(test_log_softmax_rows) {
    check_softmax(F16, 37, 7, 1, 1, 0, 11);
    check_softmax(F16, 13, 1000, 1, 1, 0, 12);
    check_softmax(F16, 5, 4096, 1, 1, 1, 13);
    check_softmax(F16, 2, 5003, 1, 1, 0, 14);
}
END_TEST

START_TEST(test_softmax_strided) {
    check_softmax(F16, 3, 19, 37, 0, 0, 21);
    check_softmax(F16, 2, 1000, 9, 1, 0, 22);
    check_softmax(F16, 4, 5, 300, 0, 1, 23);
}
END_TEST

START_TEST(test_softmax_errors) {
    ck_assert_tci_error(kern_softmax_rows(NULL, NULL, -1, 3, 0), TCI_ERR_INVALID_ARGUMENT,
                        "negative extent");
    ck_assert_tci_error(kern_log_softmax_rows(NULL, NULL, 2, 3, 0), TCI_ERR_INVALID_ARGUMENT,
                        "kern_log_softmax_rows: NULL buffer");
    ck_assert_tci_ok(kern_softmax_rows(NULL, NULL, 0, 3, 0));
    ck_assert_tci_error(kern_softmax_strided(NULL, NULL, 2, 3, -4, 0, 0), TCI_ERR_INVALID_ARGUMENT,
                        "negative extent");
}
END_TEST

/* ---- layer normalisation ---- */

static void check_layernorm(tci_dtype dt, int64_t rows, int64_t len, int with_beta,
                            int with_stats, uint64_t seed) {
    size_t n = (size_t)(rows * len);
    uint16_t *xh, *gh, *bh;
    float *x, *g, *b;
    random_half(dt, n, seed, -3.0f, 5.0f, &xh, &x);
    random_half(dt, (size_t)len, seed + 1, 0.5f, 1.5f, &gh, &g);
    random_half(dt, (size_t)len, seed + 2, -1.0f, 1.0f, &bh, &b);
    const float eps = 1e-5f;
    double *want = malloc(sizeof(double) * n), *want_mean = malloc(sizeof(double) * (size_t)rows),
           *want_inv = malloc(sizeof(double) * (size_t)rows);
    gpu_layernorm_reference(x, g, with_beta ? b : NULL, rows, len, eps, want, want_mean, want_inv);
    void *dx = gpu_upload(xh, 2 * n), *dy = gpu_upload(NULL, 2 * n);
    void *dg = gpu_upload(gh, 2 * (size_t)len), *db = gpu_upload(bh, 2 * (size_t)len);
    float *dmean = gpu_upload(NULL, sizeof(float) * (size_t)rows);
    float *dinv = gpu_upload(NULL, sizeof(float) * (size_t)rows);
    if (dt == BF16)
        ck_assert_tci_ok(kern_layernorm_rows_dtype(dx, dg, with_beta ? db : NULL, dy,
                                                   with_stats ? dmean : NULL,
                                                   with_stats ? dinv : NULL, rows, len, eps, dt, 0));
    else
        ck_assert_tci_ok(kern_layernorm_rows(dx, dg, with_beta ? db : NULL, dy,
                                             with_stats ? dmean : NULL, with_stats ? dinv : NULL,
                                             rows, len, eps, 0));
    gpu_sync();
    float *got = download_half(dt, dy, n);
    assert_close(got, want, n, tol_for(dt, 4e-3), 1.0, "layernorm");
    if (with_stats) {
        float *mean = malloc(sizeof(float) * (size_t)rows), *inv = malloc(sizeof(float) * (size_t)rows);
        gpu_download(mean, dmean, sizeof(float) * (size_t)rows);
        gpu_download(inv, dinv, sizeof(float) * (size_t)rows);
        assert_close(mean, want_mean, (size_t)rows, 1e-4, 1e-2, "mean");
        assert_close(inv, want_inv, (size_t)rows, 1e-4, 1.0, "inv_std");
        free(mean);
        free(inv);
    }
    gpu_free(dx);
    gpu_free(dy);
    gpu_free(dg);
    gpu_free(db);
    gpu_free(dmean);
    gpu_free(dinv);
    free(xh), free(gh), free(bh), free(x), free(g), free(b);
    free(want), free(want_mean), free(want_inv), free(got);
}

/* LayerNormalization of x + r (the residual Add fused in): the sum rounded to the storage type
 * once, as an Add step stores it, then normalised; the sum written out is exactly that. */
static void check_layernorm_residual(tci_dtype dt, int64_t rows, int64_t len, int with_sum,
                                     uint64_t seed) {
    size_t n = (size_t)(rows * len);
    uint16_t *xh, *rh, *gh, *bh;
    float *x, *r, *g, *b;
    random_half(dt, n, seed, -3.0f, 5.0f, &xh, &x);
    random_half(dt, n, seed + 3, -2.0f, 2.0f, &rh, &r);
    random_half(dt, (size_t)len, seed + 1, 0.5f, 1.5f, &gh, &g);
    random_half(dt, (size_t)len, seed + 2, -1.0f, 1.0f, &bh, &b);
    float *sum = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) sum[i] = x[i] + r[i];
    gpu_round_to(dt, sum, n);
    double *want = malloc(sizeof(double) * n), *mean = malloc(sizeof(double) * (size_t)rows),
           *inv = malloc(sizeof(double) * (size_t)rows);
    gpu_layernorm_reference(sum, g, b, rows, len, 1e-5f, want, mean, inv);
    void *dx = gpu_upload(xh, 2 * n), *dr = gpu_upload(rh, 2 * n), *dy = gpu_upload(NULL, 2 * n);
    void *ds = gpu_upload(NULL, 2 * n);
    void *dg = gpu_upload(gh, 2 * (size_t)len), *db = gpu_upload(bh, 2 * (size_t)len);
    ck_assert_tci_ok(kern_layernorm_residual_rows_dtype(dx, dr, dg, db, dy, with_sum ? ds : NULL,
                                                        NULL, NULL, rows, len, 1e-5f, dt, 0));
    gpu_sync();
    float *got = download_half(dt, dy, n);
    assert_close(got, want, n, tol_for(dt, 4e-3), 1.0, "layernorm of x + residual");
    if (with_sum) {
        float *got_sum = download_half(dt, ds, n);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(got_sum[i] == sum[i], "sum[%zu] = %g, want %g", i, got_sum[i], sum[i]);
        free(got_sum);
    }
    gpu_free(dx), gpu_free(dr), gpu_free(dy), gpu_free(ds), gpu_free(dg), gpu_free(db);
    free(xh), free(rh), free(gh), free(bh), free(x), free(r), free(g), free(b), free(sum);
    free(want), free(mean), free(inv), free(got);
}

START_TEST(test_layernorm_residual) {
    check_layernorm_residual(F16, 33, 768, 1, 41);  /* warp per row, vectors, sum written */
    check_layernorm_residual(F16, 10, 7, 0, 42);    /* scalar */
    check_layernorm_residual(BF16, 5, 3000, 1, 43); /* block per row */
    check_layernorm_residual(F16, 3, 2053, 1, 44);  /* block, scalar */
    ck_assert_tci_error(kern_layernorm_residual_rows_dtype((void *)16, NULL, (void *)16, NULL,
                                                           (void *)16, (void *)16, NULL, NULL, 2,
                                                           8, 1e-5f, F16, 0),
                        TCI_ERR_INVALID_ARGUMENT, "without a residual");
}
END_TEST

START_TEST(test_layernorm) {
    check_layernorm(F16, 33, 768, 1, 1, 31);   /* warp per row, vectors */
    check_layernorm(F16, 33, 768, 0, 0, 32);   /* no beta */
    check_layernorm(F16, 10, 7, 1, 1, 33);     /* scalar */
    check_layernorm(F16, 5, 3000, 1, 1, 34);   /* block per row */
    check_layernorm(F16, 3, 2053, 0, 1, 35);   /* block, scalar */
    check_layernorm(F16, 45, 16, 1, 1, 36);    /* two lanes per row */
    check_layernorm(F16, 301, 3, 0, 1, 37);
    ck_assert_tci_error(kern_layernorm_rows((void *)16, NULL, NULL, (void *)16, NULL, NULL, 2, 8,
                                            1e-5f, 0),
                        TCI_ERR_INVALID_ARGUMENT, "NULL gamma");
    ck_assert_tci_error(kern_layernorm_rows(NULL, NULL, NULL, NULL, NULL, NULL, 2, 8, -1.0f, 0),
                        TCI_ERR_INVALID_ARGUMENT, "epsilon");
}
END_TEST

/* ---- reduce ---- */

/* The reductions of util/reduce_ops.h written out on their own in double, so that a wrong row
 * shows: the start, one value taken in, and the result. */
static double ref_start(reduce_op op) {
    switch (op) {
    case REDUCE_MAX: return -INFINITY;
    case REDUCE_MIN: return INFINITY;
    case REDUCE_PROD: return 1.0;
    default: return 0.0; /* sums; a log-sum-exp sums exp(x) and takes the log at the end */
    }
}

static double ref_take(reduce_op op, double a, double v) {
    switch (op) {
    case REDUCE_MAX: return isnan(a) || isnan(v) ? NAN : fmax(a, v);
    case REDUCE_MIN: return isnan(a) || isnan(v) ? NAN : fmin(a, v);
    case REDUCE_PROD: return a * v;
    case REDUCE_L1: return a + fabs(v);
    case REDUCE_L2:
    case REDUCE_SUM_SQUARE: return a + v * v;
    case REDUCE_LOG_SUM_EXP: return a + exp(v);
    default: return a + v;
    }
}

static double ref_result(reduce_op op, double a, int64_t count) {
    switch (op) {
    case REDUCE_MEAN: return count ? a / (double)count : NAN;
    case REDUCE_L2: return sqrt(a);
    case REDUCE_LOG_SUM_EXP: return log(a);
    default: return a;
    }
}

/* kern_reduce of random values (fp16, bf16 or fp32 storage) against a double reference: sums,
 * means, products, norms and log-sum-exp within the storage's rounding, a max or min exactly.
 * A max draws values below 0 and a min above 0, so that a start of 0 would show; a product
 * values near 1; and with nan_every > 0 every nan_every-th value is NaN, which must reach its
 * output (fmaxf would drop it). */
static void check_reduce_nan(tci_dtype dt, int rank, const int64_t *dims, unsigned mask,
                             reduce_op op, int nan_every, uint64_t seed) {
    int64_t n = 1, outputs = 1, count = 1, out_dims[6];
    for (int d = 0; d < rank; d++) {
        n *= dims[d];
        out_dims[d] = mask >> d & 1 ? 1 : dims[d];
        outputs *= out_dims[d];
        if (mask >> d & 1) count *= dims[d];
    }
    const bool exact = op == REDUCE_MAX || op == REDUCE_MIN;
    const float lo = op == REDUCE_MAX ? -3.0f : op == REDUCE_MIN ? 1.0f
                     : op == REDUCE_PROD ? 0.9f : -1.0f;
    const float hi = op == REDUCE_MAX ? -1.0f : op == REDUCE_MIN ? 3.0f
                     : op == REDUCE_PROD ? 1.1f : 1.0f;
    const size_t elem = dt == F32 ? 4 : 2;
    float *x;
    void *xbits;
    if (dt == F32) {
        x = malloc(sizeof(float) * (size_t)(n ? n : 1));
        ck_assert_ptr_nonnull(x);
        gpu_fill_random(x, (size_t)n, seed, lo, hi);
        xbits = x;
    } else {
        uint16_t *h;
        random_half(dt, (size_t)n, seed, lo, hi, &h, &x);
        xbits = h;
    }
    if (nan_every > 0) {
        for (int64_t i = nan_every / 2; i < n; i += nan_every) x[i] = NAN;
        if (dt != F32) gpu_encode(dt, x, xbits, (size_t)n);
    }
    double *want = malloc(sizeof(double) * (size_t)(outputs ? outputs : 1));
    for (int64_t o = 0; o < outputs; o++) want[o] = ref_start(op);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i, o = 0;
        for (int d = rank - 1, s = 1; d >= 0; d--) {
            int64_t idx = r % dims[d];
            r /= dims[d];
            if (!(mask >> d & 1)) o += idx * s, s *= (int)out_dims[d];
        }
        want[o] = ref_take(op, want[o], x[i]);
    }
    for (int64_t o = 0; o < outputs; o++) want[o] = ref_result(op, want[o], count);
    void *dx = gpu_upload(xbits, elem * (size_t)n), *dy = gpu_upload(NULL, elem * (size_t)outputs);
    if (dt == F16) ck_assert_tci_ok(kern_reduce(dx, dy, rank, dims, mask, op, 0));
    else ck_assert_tci_ok(kern_reduce_dtype(dx, dy, rank, dims, mask, op, dt, 0));
    gpu_sync();
    float *got;
    if (dt == F32) {
        got = malloc(sizeof(float) * (size_t)(outputs ? outputs : 1));
        gpu_download(got, dy, elem * (size_t)outputs);
    } else {
        got = download_half(dt, dy, (size_t)outputs);
    }
    /* fp32: a product or a log-sum-exp rounds once per value taken in, a sum in a tree */
    double f32_tol = op == REDUCE_PROD || op == REDUCE_LOG_SUM_EXP ? 1e-4 : 1e-5;
    double tol = exact ? 0.0 : dt == F32 ? f32_tol : tol_for(dt, 3e-3);
    assert_close(got, want, (size_t)outputs, tol, 1.0, "reduce");
    gpu_free(dx);
    gpu_free(dy);
    if (xbits != x) free(xbits);
    free(x), free(want), free(got);
}

static void check_reduce(tci_dtype dt, int rank, const int64_t *dims, unsigned mask,
                         reduce_op op, uint64_t seed) {
    check_reduce_nan(dt, rank, dims, mask, op, 0, seed);
}

START_TEST(test_reduce_inner) {
    check_reduce(F16, 3, (int64_t[]){5, 6, 100}, 4, REDUCE_SUM, 41);   /* rows, scalar */
    check_reduce(F16, 3, (int64_t[]){5, 6, 104}, 6, REDUCE_MEAN, 42);  /* rows of 624, vectors */
    check_reduce(F16, 2, (int64_t[]){3, 5000}, 2, REDUCE_SUM, 43);     /* block per row */
    check_reduce(F16, 4, (int64_t[]){2, 3, 1, 7}, 0xd, REDUCE_MEAN, 44); /* size-1 dims */
    check_reduce(F16, 2, (int64_t[]){7, 9}, 3, REDUCE_SUM, 45);         /* everything */
    check_reduce(F16, 2, (int64_t[]){100, 8}, 2, REDUCE_SUM, 46);       /* one lane per row */
    check_reduce(F16, 2, (int64_t[]){37, 3}, 2, REDUCE_MEAN, 47);
}
END_TEST

START_TEST(test_reduce_outer) {
    check_reduce(F16, 3, (int64_t[]){50, 7, 3}, 1, REDUCE_SUM, 51);          /* columns */
    check_reduce(F16, 4, (int64_t[]){2, 9, 11, 24}, 6, REDUCE_MEAN, 52);     /* NHWC over H, W */
    check_reduce(F16, 3, (int64_t[]){3, 2000, 5}, 2, REDUCE_MEAN, 53);       /* long columns */
    check_reduce(F16, 2, (int64_t[]){300, 37}, 1, REDUCE_SUM, 54);
    check_reduce(F16, 3, (int64_t[]){3, 2000, 64}, 2, REDUCE_SUM, 55);       /* vectors, deep */
    check_reduce(F16, 3, (int64_t[]){4, 3, 16}, 2, REDUCE_MEAN, 56);         /* short columns */
    check_reduce(F16, 3, (int64_t[]){40, 50, 264}, 2, REDUCE_MEAN, 57);      /* many blocks */
}
END_TEST

START_TEST(test_reduce_generic_and_edges) {
    check_reduce(F16, 3, (int64_t[]){6, 5, 7}, 5, REDUCE_SUM, 61);          /* dims 0 and 2 */
    check_reduce(F16, 5, (int64_t[]){2, 3, 4, 5, 6}, 0x15, REDUCE_MEAN, 62);
    check_reduce(F16, 3, (int64_t[]){4, 0, 3}, 2, REDUCE_MEAN, 63);         /* empty: NaN */
    check_reduce(F16, 3, (int64_t[]){4, 0, 3}, 2, REDUCE_SUM, 64);          /* empty: 0 */
    check_reduce(F16, 2, (int64_t[]){4, 3}, 0, REDUCE_SUM, 65);             /* nothing reduced */
    check_reduce(F16, 0, NULL, 0, REDUCE_MEAN, 66);                         /* scalar */
    ck_assert_tci_error(kern_reduce(NULL, NULL, 2, (int64_t[]){2, 2}, 4, REDUCE_SUM, 0),
                        TCI_ERR_INVALID_ARGUMENT, "beyond rank 2");
    ck_assert_tci_error(kern_reduce(NULL, NULL, 7, NULL, 0, REDUCE_SUM, 0),
                        TCI_ERR_INVALID_ARGUMENT, "rank 7");
}
END_TEST

/* ReduceMax on every path in fp16 and fp32: exact, -inf for an empty reduction, NaN propagated. */
START_TEST(test_reduce_max) {
    const tci_dtype types[] = {F16, F32};
    for (int t = 0; t < 2; t++) {
        tci_dtype dt = types[t];
        check_reduce_nan(dt, 3, (int64_t[]){5, 6, 100}, 4, REDUCE_MAX, 0, 71);   /* rows, scalar */
        check_reduce_nan(dt, 3, (int64_t[]){5, 6, 104}, 6, REDUCE_MAX, 0, 72);   /* rows, vectors */
        check_reduce_nan(dt, 2, (int64_t[]){3, 5000}, 2, REDUCE_MAX, 0, 73);     /* block per row */
        check_reduce_nan(dt, 2, (int64_t[]){100, 8}, 2, REDUCE_MAX, 0, 74);      /* lane per row */
        check_reduce_nan(dt, 3, (int64_t[]){50, 7, 3}, 1, REDUCE_MAX, 0, 75);    /* columns */
        check_reduce_nan(dt, 4, (int64_t[]){2, 9, 11, 24}, 6, REDUCE_MAX, 0, 76); /* NHWC H, W */
        check_reduce_nan(dt, 3, (int64_t[]){3, 2000, 64}, 2, REDUCE_MAX, 0, 77); /* deep columns */
        check_reduce_nan(dt, 3, (int64_t[]){6, 5, 7}, 5, REDUCE_MAX, 0, 78);     /* generic */
        check_reduce_nan(dt, 5, (int64_t[]){2, 3, 4, 5, 6}, 0x15, REDUCE_MAX, 0, 79);
        /* NaN in some groups and not in others, on each path */
        check_reduce_nan(dt, 3, (int64_t[]){5, 6, 104}, 4, REDUCE_MAX, 211, 81);   /* rows */
        check_reduce_nan(dt, 2, (int64_t[]){3, 5000}, 2, REDUCE_MAX, 7001, 82);    /* block */
        check_reduce_nan(dt, 4, (int64_t[]){2, 9, 11, 24}, 6, REDUCE_MAX, 301, 83); /* columns */
        check_reduce_nan(dt, 3, (int64_t[]){50, 7, 3}, 1, REDUCE_MAX, 97, 84);     /* scalar cols */
        check_reduce_nan(dt, 3, (int64_t[]){6, 5, 7}, 5, REDUCE_MAX, 37, 85);      /* generic */
        check_reduce_nan(dt, 3, (int64_t[]){4, 0, 3}, 2, REDUCE_MAX, 0, 86);       /* empty: -inf */
        check_reduce_nan(dt, 2, (int64_t[]){4, 3}, 0, REDUCE_MAX, 0, 87);          /* a copy */
        check_reduce_nan(dt, 0, NULL, 0, REDUCE_MAX, 0, 88);                       /* scalar */
    }
    ck_assert_tci_error(kern_reduce(NULL, NULL, 0, NULL, 0, REDUCE_COUNT, 0),
                        TCI_ERR_INVALID_ARGUMENT, "unknown op");
}
END_TEST

/* ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSumExp, ReduceSumSquare on every path in
 * fp16 and fp32; nothing reduced (mask 0, or only size-1 dims) still maps each value (|x|, x*x). */
START_TEST(test_reduce_more_ops) {
    const tci_dtype types[] = {F16, F32};
    const reduce_op ops[] = {REDUCE_MIN, REDUCE_PROD, REDUCE_L1, REDUCE_L2, REDUCE_LOG_SUM_EXP,
                             REDUCE_SUM_SQUARE};
    for (int t = 0; t < 2; t++) {
        for (int o = 0; o < 6; o++) {
            tci_dtype dt = types[t];
            reduce_op op = ops[o];
            uint64_t seed = 100 + 20 * (uint64_t)o + 10 * (uint64_t)t;
            check_reduce_nan(dt, 3, (int64_t[]){5, 6, 100}, 4, op, 0, seed + 1);   /* rows */
            check_reduce_nan(dt, 3, (int64_t[]){5, 6, 104}, 6, op, 0, seed + 2);   /* vectors */
            check_reduce_nan(dt, 2, (int64_t[]){3, 5000}, 2, op, 0, seed + 3);     /* block */
            check_reduce_nan(dt, 2, (int64_t[]){100, 8}, 2, op, 0, seed + 4);      /* lane */
            check_reduce_nan(dt, 3, (int64_t[]){50, 7, 3}, 1, op, 0, seed + 5);    /* columns */
            check_reduce_nan(dt, 4, (int64_t[]){2, 9, 11, 24}, 6, op, 0, seed + 6); /* NHWC */
            check_reduce_nan(dt, 3, (int64_t[]){3, 2000, 64}, 2, op, 0, seed + 7); /* deep */
            check_reduce_nan(dt, 3, (int64_t[]){6, 5, 7}, 5, op, 0, seed + 8);     /* generic */
            check_reduce_nan(dt, 3, (int64_t[]){4, 0, 3}, 2, op, 0, seed + 9);     /* empty */
            check_reduce_nan(dt, 2, (int64_t[]){4, 3}, 0, op, 0, seed + 10);       /* none */
            check_reduce_nan(dt, 3, (int64_t[]){4, 1, 3}, 2, op, 0, seed + 11);    /* size 1 */
            check_reduce_nan(dt, 0, NULL, 0, op, 0, seed + 12);                    /* scalar */
        }
        /* NaN reaches a min on each path */
        check_reduce_nan(types[t], 3, (int64_t[]){5, 6, 104}, 4, REDUCE_MIN, 211, 91);
        check_reduce_nan(types[t], 2, (int64_t[]){3, 5000}, 2, REDUCE_MIN, 7001, 92);
        check_reduce_nan(types[t], 4, (int64_t[]){2, 9, 11, 24}, 6, REDUCE_MIN, 301, 93);
        check_reduce_nan(types[t], 3, (int64_t[]){6, 5, 7}, 5, REDUCE_MIN, 37, 94);
    }
}
END_TEST

/* ---- resize ---- */

/* Source coordinate per the ONNX reference (onnx/reference/ops/op_resize.py), output length
 * measured as scale * in. */
static double ref_coordinate(resize_coord coord, double x, double scale, int64_t in,
                             int64_t out) {
    double length = scale * (double)in;
    int single = fabs(length - 1.0) < 1e-9;
    switch (coord) {
    case RESIZE_COORD_HALF_PIXEL: return (x + 0.5) / scale - 0.5;
    case RESIZE_COORD_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)out / length, center = (double)in / 2.0;
        return center * (1.0 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    case RESIZE_COORD_PYTORCH_HALF_PIXEL: return single ? 0.0 : (x + 0.5) / scale - 0.5;
    case RESIZE_COORD_ALIGN_CORNERS: return single ? 0.0 : x * (double)(in - 1) / (length - 1.0);
    case RESIZE_COORD_ASYMMETRIC: return x / scale;
    case RESIZE_COORD_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / scale;
    case RESIZE_COORD_TF_CROP_AND_RESIZE: /* not a kernel mode */
    case RESIZE_COORD_COUNT: break;
    }
    return 0.0;
}

static int64_t clampi(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

/* Taps and weights along one axis, from the ONNX spec: nearest one index; linear two, cubic
 * four from floor(x) - 1 with the Keys weights of coefficient a; exclude_outside zeroes the taps
 * past the edge and renormalises; indices past the edge repeat the edge. */
static int ref_axis(const kern_resize_desc *d, int64_t o, double scale, int64_t in, int64_t out,
                    int64_t *idx, double *w) {
    if (in == out && scale == 1.0) {
        idx[0] = o, w[0] = 1.0;
        return 1;
    }
    double x = ref_coordinate(d->coord, (double)o, scale, in, out), base = floor(x), r = x - base;
    if (d->mode == RESIZE_NEAREST) {
        int up = 0;
        if (r != 0.0) switch (d->rounding) {
            case RESIZE_ROUND_PREFER_FLOOR: up = r > 0.5; break;
            case RESIZE_ROUND_PREFER_CEIL: up = r >= 0.5; break;
            case RESIZE_ROUND_FLOOR: up = 0; break;
            case RESIZE_ROUND_CEIL: up = 1; break;
            case RESIZE_ROUND_LEGACY: up = scale < 1.0; break;
            case RESIZE_ROUNDING_COUNT: break;
            }
        idx[0] = clampi((int64_t)base + up, in), w[0] = 1.0;
        return 1;
    }
    int n = d->mode == RESIZE_LINEAR ? 2 : 4;
    int64_t first = (int64_t)base - (n == 4);
    for (int k = 0; k < n; k++) {
        double t = fabs((double)(first + k) - x), a = d->cubic_a;
        if (n == 2) w[k] = 1.0 - t;
        else if (t <= 1.0) w[k] = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
        else w[k] = ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a;
    }
    double sum = 0.0;
    for (int k = 0; k < n; k++) {
        if (d->exclude_outside && (first + k < 0 || first + k >= in)) w[k] = 0.0;
        sum += w[k];
        idx[k] = clampi(first + k, in);
    }
    if (d->exclude_outside && sum != 0.0)
        for (int k = 0; k < n; k++) w[k] /= sum;
    return n;
}

static int resize_cases_run;

static void check_resize(kern_resize_desc d, uint64_t seed) {
    const tci_dtype dt = d.dtype == BF16 ? BF16 : F16;
    int64_t cp = (d.c + 7) / 8 * 8;
    size_t nin = (size_t)(d.n * d.in_h * d.in_w * cp), nout = (size_t)(d.n * d.out_h * d.out_w * cp);
    uint16_t *xh;
    float *x;
    random_half(dt, nin, seed, -2.0f, 2.0f, &xh, &x);
    for (size_t i = 0; i < nin; i++)
        if ((int64_t)(i % (size_t)cp) >= d.c) xh[i] = 0, x[i] = 0.0f;
    double *want = malloc(sizeof(double) * nout);
    for (int64_t n = 0; n < d.n; n++)
        for (int64_t oh = 0; oh < d.out_h; oh++)
            for (int64_t ow = 0; ow < d.out_w; ow++) {
                int64_t hi[4], wi[4];
                double hw[4], ww[4];
                int nh = ref_axis(&d, oh, d.scale_h, d.in_h, d.out_h, hi, hw);
                int nw = ref_axis(&d, ow, d.scale_w, d.in_w, d.out_w, wi, ww);
                for (int64_t c = 0; c < cp; c++) {
                    double v = 0.0;
                    for (int i = 0; i < nh; i++)
                        for (int j = 0; j < nw; j++)
                            v += hw[i] * ww[j] *
                                 (double)x[(((n * d.in_h) + hi[i]) * d.in_w + wi[j]) * cp + c];
                    want[((n * d.out_h + oh) * d.out_w + ow) * cp + c] = c < d.c ? v : 0.0;
                }
            }
    void *dx = gpu_upload(xh, 2 * nin), *dy = gpu_upload(NULL, 2 * nout);
    ck_assert_tci_ok(kern_resize_nhwc8(dx, dy, &d, 0));
    gpu_sync();
    uint16_t *bits = malloc(2 * nout);
    gpu_download(bits, dy, 2 * nout);
    float *got = download_half(dt, dy, nout);
    for (size_t i = 0; i < nout; i++) {
        int64_t c = (int64_t)(i % (size_t)cp);
        if (c >= d.c) {
            ck_assert_msg(bits[i] == 0, "padded channel %lld at %zu is 0x%04x", (long long)c, i,
                          bits[i]);
            continue;
        }
        double tol = d.mode == RESIZE_NEAREST ? 0.0
                     : tol_for(dt, d.mode == RESIZE_CUBIC ? 4e-3 : 2e-3) * fmax(1.0, fabs(want[i]));
        ck_assert_msg(fabs((double)got[i] - want[i]) <= tol,
                      "mode %d coord %d rounding %d %lldx%lld->%lldx%lld: [%zu] = %g, want %g",
                      (int)d.mode, (int)d.coord, (int)d.rounding, (long long)d.in_h,
                      (long long)d.in_w, (long long)d.out_h, (long long)d.out_w, i,
                      (double)got[i], want[i]);
    }
    resize_cases_run++;
    gpu_free(dx);
    gpu_free(dy);
    free(xh), free(x), free(want), free(bits), free(got);
}

/* Shapes: fractional up- and down-scales, exact 2x (ties at .5), sizes giving a 1-pixel axis,
 * an identity axis; C = 5 (one padded chunk) and 13 (two chunks). */
static void resize_shapes(kern_resize_desc d, uint64_t seed) {
    static const struct {
        int64_t in_h, in_w, out_h, out_w;
        double sh, sw;
    } shapes[] = {
        {7, 9, 13, 20, 1.9, 2.25},
        {7, 9, 4, 4, 0.6, 0.5},
        {7, 9, 1, 5, 1.0 / 7.0, 5.0 / 9.0},
        {5, 6, 10, 12, 2.0, 2.0},
        {7, 9, 7, 18, 1.0, 2.0},
        {4, 4, 3, 7, 0.75, 1.75},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        d.in_h = shapes[s].in_h, d.in_w = shapes[s].in_w;
        d.out_h = shapes[s].out_h, d.out_w = shapes[s].out_w;
        d.scale_h = shapes[s].sh, d.scale_w = shapes[s].sw;
        d.n = 2, d.c = s % 2 ? 13 : 5;
        check_resize(d, seed + s);
    }
}

START_TEST(test_resize_nearest) {
    resize_cases_run = 0;
    for (int coord = RESIZE_COORD_HALF_PIXEL; coord <= RESIZE_COORD_TF_HALF_PIXEL_FOR_NN; coord++)
        for (int r = RESIZE_ROUND_PREFER_FLOOR; r <= RESIZE_ROUND_LEGACY; r++) {
            kern_resize_desc d = {.mode = RESIZE_NEAREST, .coord = (resize_coord)coord,
                                  .rounding = (resize_rounding)r};
            resize_shapes(d, 100 + (uint64_t)(coord * 10 + r));
        }
    ck_assert_int_eq(resize_cases_run, 6 * 5 * 6);
}
END_TEST

START_TEST(test_resize_linear) {
    resize_cases_run = 0;
    for (int coord = RESIZE_COORD_HALF_PIXEL; coord <= RESIZE_COORD_ASYMMETRIC; coord++) {
        kern_resize_desc d = {.mode = RESIZE_LINEAR, .coord = (resize_coord)coord};
        resize_shapes(d, 200 + (uint64_t)coord);
    }
    ck_assert_int_eq(resize_cases_run, 5 * 6);
}
END_TEST

/* Cubic (coefficients -0.75 and -0.5) and linear with exclude_outside: the taps past the edge
 * weigh 0 and the rest are renormalised. */
START_TEST(test_resize_cubic_and_exclude_outside) {
    resize_cases_run = 0;
    static const resize_coord coords[3] = {RESIZE_COORD_HALF_PIXEL, RESIZE_COORD_ALIGN_CORNERS,
                                           RESIZE_COORD_ASYMMETRIC};
    for (int c = 0; c < 3; c++)
        for (int ex = 0; ex <= 1; ex++) {
            kern_resize_desc d = {.mode = RESIZE_CUBIC, .coord = coords[c], .cubic_a = -0.75f,
                                  .exclude_outside = ex};
            resize_shapes(d, 300 + (uint64_t)(c * 2 + ex));
            d.cubic_a = -0.5f;
            resize_shapes(d, 400 + (uint64_t)(c * 2 + ex));
            d.mode = RESIZE_LINEAR;
            if (ex) resize_shapes(d, 500 + (uint64_t)c);
        }
    ck_assert_int_eq(resize_cases_run, (3 * 2 * 2 + 3) * 6);
}
END_TEST

/* bf16 storage: the same kernels through the *_dtype launchers / desc.dtype, on a cross-section
 * of the fp16 cases (every path: warp and block rows, scalar and vector loads, masked rows,
 * strided, reduce rows / columns / generic / empty, resize nearest and linear with padded
 * channels). */
/* ---- GroupNormalization / InstanceNormalization, LRN ---- */

/* n random values of dt (fp16, bf16 or fp32) in [lo, hi): device bytes in *out_bits, their exact
 * values as floats in *out. */
static void random_any(tci_dtype dt, size_t n, uint64_t seed, float lo, float hi, void **out_bits,
                       float **out) {
    float *f = malloc(sizeof(float) * (n ? n : 1));
    void *h = malloc(gpu_dtype_size(dt) * (n ? n : 1));
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(h);
    gpu_fill_random(f, n, seed, lo, hi);
    gpu_encode(dt, f, h, n);
    gpu_decode(dt, h, f, n);
    *out_bits = h;
    *out = f;
}

static float *download_any(tci_dtype dt, const void *device, size_t n) {
    void *h = malloc(gpu_dtype_size(dt) * (n ? n : 1));
    float *f = malloc(sizeof(float) * (n ? n : 1));
    gpu_download(h, device, gpu_dtype_size(dt) * n);
    gpu_decode(dt, h, f, n);
    free(h);
    return f;
}

/* The fp16 bound of these tests; fp32 storage is held to 1e-5, bf16 to one bf16 rounding. */
static double tol_any(tci_dtype dt) { return dt == F32 ? 1e-5 : tol_for(dt, 4e-3); }

/* kern_groupnorm_dtype against the reference in double (what groupnorm.c's cpu_forward
 * computes): per (image, group) mean and biased variance, over dense (n, c, spatial) or NHWC8
 * (n, spatial, round_up(c, 8)), whose padding channels must come out zero. */
static void check_groupnorm_chunks(tci_dtype dt, int64_t n, int64_t c, int64_t spatial, int nhwc8,
                                   int64_t groups, int per_group, int64_t chunks, uint64_t seed) {
    int64_t cp = nhwc8 ? (c + 7) / 8 * 8 : c;
    size_t count = (size_t)(n * cp * spatial);
    int64_t ns = per_group ? groups : c;
    void *xh, *gh, *bh;
    float *x, *g, *b;
    random_any(dt, count, seed, -3.0f, 5.0f, &xh, &x);
    random_any(dt, (size_t)ns, seed + 1, 0.5f, 1.5f, &gh, &g);
    random_any(dt, (size_t)ns, seed + 2, -1.0f, 1.0f, &bh, &b);
    const float eps = 1e-5f;
    /* offset of (image, channel, position) in the stored layout */
#define GN_AT(img, ch, pos)                                                                       \
    ((size_t)((img) * cp * spatial + (nhwc8 ? (pos) * cp + (ch) : (ch) * spatial + (pos))))
    double *want = malloc(sizeof(double) * (count ? count : 1));
    for (size_t e = 0; e < count; e++) want[e] = 0.0; /* NHWC8 padding */
    int64_t per = c / groups, len = per * spatial;
    for (int64_t img = 0; img < n; img++)
        for (int64_t grp = 0; grp < groups; grp++) {
            double sum = 0.0, sq = 0.0;
            for (int64_t ch = grp * per; ch < (grp + 1) * per; ch++)
                for (int64_t pos = 0; pos < spatial; pos++) sum += x[GN_AT(img, ch, pos)];
            double mean = sum / (double)len;
            for (int64_t ch = grp * per; ch < (grp + 1) * per; ch++)
                for (int64_t pos = 0; pos < spatial; pos++) {
                    double d = x[GN_AT(img, ch, pos)] - mean;
                    sq += d * d;
                }
            double inv = 1.0 / sqrt(sq / (double)len + eps);
            for (int64_t ch = grp * per; ch < (grp + 1) * per; ch++) {
                int64_t k = per_group ? grp : ch;
                for (int64_t pos = 0; pos < spatial; pos++)
                    want[GN_AT(img, ch, pos)] = (x[GN_AT(img, ch, pos)] - mean) * inv * g[k] + b[k];
            }
        }
#undef GN_AT
    size_t es = gpu_dtype_size(dt);
    void *dx = gpu_upload(xh, es * count), *dy = gpu_upload(NULL, es * count);
    void *dg = gpu_upload(gh, es * (size_t)ns), *db = gpu_upload(bh, es * (size_t)ns);
    if (nhwc8) { /* garbage where the padding goes, to see it overwritten */
        void *junk = malloc(es * count);
        memset(junk, 0x3c, es * count);
        gpu_free(dy);
        dy = gpu_upload(junk, es * count);
        free(junk);
    }
    float *partials = chunks > 1 ? gpu_upload(NULL, sizeof(float) * 2 * (size_t)(n * groups * chunks))
                                 : NULL;
    ck_assert_tci_ok(kern_groupnorm_dtype(dx, dg, db, dy, n, c, spatial, nhwc8, groups, per_group,
                                          eps, chunks, partials, dt, 0));
    gpu_sync();
    float *got = download_any(dt, dy, count);
    assert_close(got, want, count, tol_any(dt), 1.0, "groupnorm");
    gpu_free(dx), gpu_free(dy), gpu_free(dg), gpu_free(db);
    if (partials) gpu_free(partials);
    free(xh), free(gh), free(bh), free(x), free(g), free(b), free(want), free(got);
}

static void check_groupnorm(tci_dtype dt, int64_t n, int64_t c, int64_t spatial, int nhwc8,
                            int64_t groups, int per_group, uint64_t seed) {
    check_groupnorm_chunks(dt, n, c, spatial, nhwc8, groups, per_group, 1, seed);
}

START_TEST(test_groupnorm) {
    const tci_dtype dts[] = {F16, BF16, F32};
    for (int d = 0; d < 3; d++) {
        /* chunked: GroupNorm(1) as PoolFormer's (contiguous, 16-byte vectors, dense and NHWC8) */
        check_groupnorm_chunks(dts[d], 1, 64, 3136, 1, 1, 0, 98, 81);
        check_groupnorm_chunks(dts[d], 1, 64, 3136, 0, 1, 0, 98, 82);
        check_groupnorm_chunks(dts[d], 2, 64, 49, 0, 4, 1, 5, 83);  /* groups per image */
        check_groupnorm_chunks(dts[d], 1, 5, 7, 0, 1, 0, 3, 84);    /* odd length: scalar */
        check_groupnorm_chunks(dts[d], 2, 6, 45, 1, 1, 0, 4, 85);   /* NHWC8 padding */
        check_groupnorm_chunks(dts[d], 1, 16, 9, 1, 2, 0, 7, 86);   /* NHWC8, two groups */
        check_groupnorm_chunks(dts[d], 1, 8, 3, 0, 1, 0, 40, 87);   /* more chunks than fit */
        for (int nhwc8 = 0; nhwc8 <= 1; nhwc8++) {
            check_groupnorm(dts[d], 2, 6, 9, nhwc8, 3, 1, 71);      /* GroupNormalization-18 */
            check_groupnorm(dts[d], 2, 6, 9, nhwc8, 3, 0, 72);      /* 21: per channel */
            check_groupnorm(dts[d], 3, 5, 7, nhwc8, 5, 0, 73);      /* InstanceNormalization */
            check_groupnorm(dts[d], 1, 64, 3136, nhwc8, 32, 0, 74); /* long groups */
            check_groupnorm(dts[d], 2, 16, 5, nhwc8, 16, 0, 76);    /* no padding */
        }
        check_groupnorm(dts[d], 2, 3, 1, 0, 1, 1, 75); /* rank 2: one value a channel */
    }
    void *p16 = (void *)16;
    ck_assert_tci_error(kern_groupnorm_dtype(p16, p16, p16, p16, 1, 6, 4, 0, 4, 0, 1e-5f, 1, NULL,
                                             F16, 0),
                        TCI_ERR_INVALID_ARGUMENT, "kern_groupnorm: bad extents");
    ck_assert_tci_error(kern_groupnorm_dtype(NULL, NULL, NULL, NULL, 1, 6, 4, 0, 3, 0, 1e-5f, 1,
                                             NULL, F16, 0),
                        TCI_ERR_INVALID_ARGUMENT, "kern_groupnorm: NULL buffer");
    ck_assert_tci_error(kern_groupnorm_dtype(NULL, NULL, NULL, NULL, 1, 6, 4, 0, 3, 0, 1e-5f, 1,
                                             NULL, TCI_DTYPE_INT32, 0),
                        TCI_ERR_UNSUPPORTED, "kern_groupnorm: dtype int32");
    ck_assert_tci_error(kern_groupnorm_dtype(p16, p16, p16, p16, 1, 6, 4, 0, 3, 0, 1e-5f, 4, NULL,
                                             F16, 0),
                        TCI_ERR_INVALID_ARGUMENT, "kern_groupnorm: 4 chunks need the partials");
}
END_TEST

/* kern_lrn_dtype against the reference in double, dense (n, c, spatial) or NHWC8 (n, spatial,
 * round_up(c, 8)) whose padding channels must come out zero. */
static void check_lrn(tci_dtype dt, int64_t n, int64_t c, int64_t spatial, int nhwc8,
                      int64_t size, uint64_t seed) {
    int64_t cp = nhwc8 ? (c + 7) / 8 * 8 : c;
    size_t count = (size_t)(n * cp * spatial);
    void *xh;
    float *x;
    random_any(dt, count, seed, -3.0f, 3.0f, &xh, &x);
    const float alpha = 0.02f, beta = 0.75f, bias = 1.5f;
    int64_t before = (size - 1) / 2, after = size - 1 - before;
    int64_t cs = nhwc8 ? 1 : spatial, ss = nhwc8 ? cp : 1;
    if (nhwc8) /* the NHWC8 invariant: padding channels hold zeros */
        for (size_t e = 0; e < count; e++)
            if ((int64_t)e % cp >= c) x[e] = 0.0f;
    gpu_encode(dt, x, xh, count);
    double *want = malloc(sizeof(double) * (count ? count : 1));
    for (int64_t img = 0; img < n; img++)
        for (int64_t ch = 0; ch < cp; ch++)
            for (int64_t pos = 0; pos < spatial; pos++) {
                const float *base = x + img * cp * spatial + pos * ss;
                size_t at = (size_t)(img * cp * spatial + pos * ss + ch * cs);
                if (ch >= c) {
                    want[at] = 0.0;
                    continue;
                }
                double sq = 0.0;
                for (int64_t j = ch - before; j <= ch + after; j++)
                    if (j >= 0 && j < c) sq += (double)base[j * cs] * base[j * cs];
                want[at] = base[ch * cs] / pow(bias + alpha / (double)size * sq, beta);
            }
    size_t es = gpu_dtype_size(dt);
    void *dx = gpu_upload(xh, es * count), *dy = gpu_upload(NULL, es * count);
    ck_assert_tci_ok(kern_lrn_dtype(dx, dy, n, c, spatial, nhwc8, size, alpha, beta, bias, dt, 0));
    gpu_sync();
    float *got = download_any(dt, dy, count);
    assert_close(got, want, count, tol_any(dt), 1e-3, "lrn");
    gpu_free(dx), gpu_free(dy);
    free(xh), free(x), free(want), free(got);
}

START_TEST(test_lrn) {
    const tci_dtype dts[] = {F16, BF16, F32};
    for (int d = 0; d < 3; d++) {
        check_lrn(dts[d], 2, 5, 9, 1, 3, 81);   /* NHWC8, padded channels */
        check_lrn(dts[d], 2, 16, 10, 1, 5, 82); /* NHWC8, no padding */
        check_lrn(dts[d], 2, 5, 9, 0, 3, 83);   /* dense */
        check_lrn(dts[d], 1, 7, 4, 0, 4, 84);   /* even size: more channels after than before */
        check_lrn(dts[d], 3, 3, 1, 0, 1, 85);
    }
    ck_assert_tci_error(kern_lrn_dtype((void *)16, (void *)16, 1, 4, 4, 0, 3, 1.0f, 0.75f, 1.0f,
                                       F16, 0),
                        TCI_ERR_INVALID_ARGUMENT, "kern_lrn: y must not alias x");
    ck_assert_tci_error(kern_lrn_dtype(NULL, NULL, 1, 4, 4, 0, 0, 1.0f, 0.75f, 1.0f, F16, 0),
                        TCI_ERR_INVALID_ARGUMENT, "kern_lrn: bad extents");
}
END_TEST

START_TEST(test_bf16) {
    check_softmax(BF16, 37, 7, 1, 0, 0, 1);
    check_softmax(BF16, 13, 1000, 1, 0, 0, 2);
    check_softmax(BF16, 5, 4096, 1, 0, 1, 3);
    check_softmax(BF16, 77, 3, 1, 0, 0, 7);
    check_softmax(BF16, 13, 1000, 1, 1, 0, 12);
    check_softmax(BF16, 4, 1001, 1, 1, 1, 13);
    check_softmax(BF16, 3, 19, 37, 0, 0, 21);
    check_softmax(BF16, 2, 1000, 9, 1, 1, 22);
    check_layernorm(BF16, 33, 768, 1, 1, 31);
    check_layernorm(BF16, 10, 7, 1, 1, 33);
    check_layernorm(BF16, 3, 2053, 0, 1, 35);
    check_layernorm(BF16, 5, 3000, 1, 0, 34);
    check_reduce(BF16, 3, (int64_t[]){5, 6, 100}, 4, REDUCE_SUM, 41);
    check_reduce(BF16, 3, (int64_t[]){5, 6, 104}, 6, REDUCE_MEAN, 42);
    check_reduce(BF16, 2, (int64_t[]){3, 5000}, 2, REDUCE_SUM, 43);
    check_reduce(BF16, 4, (int64_t[]){2, 9, 11, 24}, 6, REDUCE_MEAN, 52);
    check_reduce(BF16, 3, (int64_t[]){3, 2000, 5}, 2, REDUCE_MEAN, 53);
    check_reduce(BF16, 3, (int64_t[]){6, 5, 7}, 5, REDUCE_SUM, 61);
    check_reduce(BF16, 3, (int64_t[]){4, 0, 3}, 2, REDUCE_MEAN, 63); /* NaN bits of bf16 */
    check_reduce(BF16, 3, (int64_t[]){4, 0, 3}, 2, REDUCE_SUM, 64);
    check_reduce(BF16, 2, (int64_t[]){4, 3}, 0, REDUCE_SUM, 65);
    check_reduce_nan(BF16, 3, (int64_t[]){5, 6, 104}, 4, REDUCE_MAX, 211, 81);
    check_reduce_nan(BF16, 4, (int64_t[]){2, 9, 11, 24}, 6, REDUCE_MAX, 301, 83);
    check_reduce_nan(BF16, 3, (int64_t[]){6, 5, 7}, 5, REDUCE_MAX, 37, 85);
    check_reduce_nan(BF16, 3, (int64_t[]){4, 0, 3}, 2, REDUCE_MAX, 0, 86); /* -inf bits of bf16 */
    check_reduce_nan(BF16, 3, (int64_t[]){4, 0, 3}, 2, REDUCE_MIN, 0, 87); /* +inf bits */
    check_reduce_nan(BF16, 3, (int64_t[]){5, 6, 104}, 4, REDUCE_L2, 0, 88);
    check_reduce_nan(BF16, 4, (int64_t[]){2, 9, 11, 24}, 6, REDUCE_LOG_SUM_EXP, 0, 89);
    check_reduce_nan(BF16, 3, (int64_t[]){6, 5, 7}, 5, REDUCE_PROD, 0, 90);
    check_reduce_nan(BF16, 2, (int64_t[]){4, 3}, 0, REDUCE_L1, 0, 91);
    resize_cases_run = 0;
    kern_resize_desc d = {.mode = RESIZE_NEAREST, .coord = RESIZE_COORD_HALF_PIXEL,
                          .rounding = RESIZE_ROUND_PREFER_FLOOR, .dtype = BF16};
    resize_shapes(d, 300);
    d.mode = RESIZE_LINEAR;
    resize_shapes(d, 310);
    d.coord = RESIZE_COORD_ALIGN_CORNERS;
    resize_shapes(d, 320);
    ck_assert_int_eq(resize_cases_run, 3 * 6);
    /* a dtype outside fp16 / bf16 / fp32 */
    ck_assert_tci_error(kern_softmax_rows_dtype(NULL, NULL, 1, 1, TCI_DTYPE_DOUBLE, 0),
                        TCI_ERR_UNSUPPORTED, "fp16, bf16 or fp32");
    d.dtype = TCI_DTYPE_INT32;
    ck_assert_tci_error(kern_resize_nhwc8(NULL, NULL, &d, 0), TCI_ERR_UNSUPPORTED, "int32");
}
END_TEST

/* Spot values from the ONNX backend tests, independent of the reference above. */
START_TEST(test_resize_onnx_cases) {
    /* resize_upsample_scales_nearest: 2x2 -> 4x6 (scales 2, 3), half_pixel, round_prefer_floor
     * gives each input pixel as a 2x3 block. In channel 0; channel 1 (padding) must stay 0. */
    float in[4] = {1, 2, 3, 4};
    uint16_t x[4 * 8] = {0}, y[24 * 8];
    for (int i = 0; i < 4; i++) gpu_to_half(&in[i], &x[i * 8], 1);
    void *dx = gpu_upload(x, sizeof x), *dy = gpu_upload(NULL, sizeof y);
    kern_resize_desc d = {.n = 1, .c = 1, .in_h = 2, .in_w = 2, .out_h = 4, .out_w = 6,
                          .scale_h = 2.0, .scale_w = 3.0, .mode = RESIZE_NEAREST,
                          .coord = RESIZE_COORD_HALF_PIXEL,
                          .rounding = RESIZE_ROUND_PREFER_FLOOR};
    ck_assert_tci_ok(kern_resize_nhwc8(dx, dy, &d, 0));
    gpu_sync();
    gpu_download(y, dy, sizeof y);
    for (int h = 0; h < 4; h++)
        for (int w = 0; w < 6; w++) {
            float v;
            gpu_from_half(&y[(h * 6 + w) * 8], &v, 1);
            ck_assert_float_eq(v, in[(h / 2) * 2 + w / 3]);
            ck_assert_uint_eq(y[(h * 6 + w) * 8 + 1], 0);
        }
    /* resize_upsample_scales_linear_align_corners: 2x2 -> 4x4; first row 1, 1.333, 1.667, 2 */
    d.out_w = 4, d.scale_w = 2.0, d.mode = RESIZE_LINEAR, d.coord = RESIZE_COORD_ALIGN_CORNERS;
    ck_assert_tci_ok(kern_resize_nhwc8(dx, dy, &d, 0));
    gpu_sync();
    gpu_download(y, dy, 16 * 8 * 2);
    const float row0[4] = {1.0f, 1.3333333f, 1.6666667f, 2.0f};
    for (int w = 0; w < 4; w++) {
        float v;
        gpu_from_half(&y[w * 8], &v, 1);
        ck_assert_float_eq_tol(v, row0[w], 1e-3f);
    }
    gpu_free(dx);
    gpu_free(dy);
}
END_TEST

START_TEST(test_resize_errors) {
    kern_resize_desc d = {.n = 1, .c = 3, .in_h = 2, .in_w = 2, .out_h = 4, .out_w = 4,
                          .scale_h = 2.0, .scale_w = 0.0};
    ck_assert_tci_error(kern_resize_nhwc8((void *)16, (void *)16, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "must be positive");
    d.scale_w = 2.0;
    ck_assert_tci_error(kern_resize_nhwc8((void *)8, (void *)16, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "16-byte aligned");
    d.mode = (resize_mode)7;
    ck_assert_tci_error(kern_resize_nhwc8((void *)16, (void *)16, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "unknown mode 7");
    d.mode = RESIZE_LINEAR;
    d.in_h = 0;
    ck_assert_tci_error(kern_resize_nhwc8((void *)16, (void *)16, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "empty input");
    ck_assert_tci_error(kern_resize_nhwc8(NULL, NULL, NULL, 0), TCI_ERR_INVALID_ARGUMENT,
                        "desc is NULL");
}
END_TEST

int main(void) {
    gpu_require_device("gpu_norm_resize");
    Suite *s = suite_create("gpu_norm_resize");
    TCase *tc = tcase_create("norm_resize");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_softmax_rows);
    tcase_add_test(tc, test_log_softmax_rows);
    tcase_add_test(tc, test_softmax_strided);
    tcase_add_test(tc, test_softmax_errors);
    tcase_add_test(tc, test_layernorm);
    tcase_add_test(tc, test_layernorm_residual);
    tcase_add_test(tc, test_reduce_inner);
    tcase_add_test(tc, test_reduce_outer);
    tcase_add_test(tc, test_reduce_generic_and_edges);
    tcase_add_test(tc, test_reduce_max);
    tcase_add_test(tc, test_reduce_more_ops);
    tcase_add_test(tc, test_resize_nearest);
    tcase_add_test(tc, test_resize_linear);
    tcase_add_test(tc, test_resize_cubic_and_exclude_outside);
    tcase_add_test(tc, test_resize_onnx_cases);
    tcase_add_test(tc, test_resize_errors);
    tcase_add_test(tc, test_bf16);
    tcase_add_test(tc, test_groupnorm);
    tcase_add_test(tc, test_lrn);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
