/* GPU ArgMax / ArgMin, CumSum and TopK kernels (src/kernels/argreduce.h) against C references on
 * the same storage-rounded inputs: positions and TopK values exactly, running sums within the
 * storage's rounding. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/argreduce.h"

#define F16 TCI_DTYPE_FLOAT16
#define BF16 TCI_DTYPE_BFLOAT16
#define F32 TCI_DTYPE_FLOAT

/* n values in [lo, hi) rounded to dt; every nan_every-th (when > 0) NaN; a few repeated so that
 * ties occur. Returns host floats and the storage bits (*bits, free both). */
static float *make_input(tci_dtype dt, int64_t n, uint64_t seed, int nan_every, void **bits) {
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    ck_assert_ptr_nonnull(x);
    gpu_fill_random(x, (size_t)n, seed, -4.0f, 4.0f);
    for (int64_t i = 3; i < n; i += 7) x[i] = x[i - 3]; /* ties */
    if (nan_every > 0)
        for (int64_t i = nan_every / 2; i < n; i += nan_every) x[i] = NAN;
    gpu_round_to(dt, x, (size_t)n);
    *bits = malloc(gpu_dtype_size(dt) * (size_t)(n ? n : 1));
    ck_assert_ptr_nonnull(*bits);
    gpu_encode(dt, x, *bits, (size_t)n);
    return x;
}

/* ---- ArgMax / ArgMin ---- */

static int64_t ref_arg(const float *p, int64_t len, int64_t inner, bool is_min, bool last) {
    float best = p[0];
    int64_t at = 0;
    for (int64_t j = 1; j < len; j++) {
        float v = p[j * inner];
        bool better, equal;
        if (isnan(v) || isnan(best)) { /* NaN beats every number, as numpy's argmin/argmax */
            better = isnan(v) && !isnan(best);
            equal = isnan(v) && isnan(best);
        } else {
            better = is_min ? v < best : v > best;
            equal = v == best;
        }
        if (better || (last && equal)) best = v, at = j;
    }
    return at;
}

static void check_arg(tci_dtype dt, int64_t outer, int64_t len, int64_t inner, bool is_min,
                      bool last, int nan_every, uint64_t seed) {
    int64_t n = outer * len * inner, outs = outer * inner;
    void *bits;
    float *x = make_input(dt, n, seed, nan_every, &bits);
    void *dx = gpu_upload(bits, gpu_dtype_size(dt) * (size_t)n);
    int64_t *dy = gpu_upload(NULL, sizeof(int64_t) * (size_t)outs);
    ck_assert_tci_ok(kern_arg_reduce(dx, dy, outer, len, inner, is_min, last, dt, 0));
    gpu_sync();
    int64_t *got = malloc(sizeof(int64_t) * (size_t)(outs ? outs : 1));
    gpu_download(got, dy, sizeof(int64_t) * (size_t)outs);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            int64_t want = ref_arg(x + o * len * inner + k, len, inner, is_min, last);
            ck_assert_msg(got[o * inner + k] == want,
                          "%s %s%s (%lld,%lld,%lld)[%lld,%lld]: %lld, want %lld", gpu_dtype_tag(dt), is_min ? "argmin" : "argmax", last ? " last" : "",
                          (long long)outer, (long long)len, (long long)inner, (long long)o,
                          (long long)k, (long long)got[o * inner + k], (long long)want);
        }
    gpu_free(dx);
    gpu_free(dy);
    free(x), free(bits), free(got);
}

START_TEST(test_arg_reduce) {
    const tci_dtype types[] = {F16, BF16, F32};
    for (int t = 0; t < 3; t++)
        for (int m = 0; m < 4; m++) {
            bool is_min = m & 1, last = m >> 1;
            uint64_t seed = 10 * (uint64_t)t + (uint64_t)m;
            check_arg(types[t], 37, 100, 1, is_min, last, 0, seed + 1);  /* rows */
            check_arg(types[t], 5, 40, 33, is_min, last, 0, seed + 2);   /* strided */
            check_arg(types[t], 1, 5000, 1, is_min, last, 0, seed + 3);  /* one long run */
            check_arg(types[t], 300, 1, 7, is_min, last, 0, seed + 4);   /* length 1 */
            check_arg(types[t], 6, 50, 9, is_min, last, 23, seed + 5);   /* NaN */
            check_arg(types[t], 3, 2, 2, is_min, last, 2, seed + 6);     /* NaN everywhere */
        }
    /* int32 and int64 compare exactly */
    const int32_t x32[] = {4, 9, 9, -1, 7, -3};
    const int64_t x64[] = {INT64_MAX - 1, INT64_MAX, INT64_MIN, INT64_MIN + 1};
    void *d32 = gpu_upload(x32, sizeof x32), *d64 = gpu_upload(x64, sizeof x64);
    int64_t *dy = gpu_upload(NULL, 2 * sizeof(int64_t)), got[2];
    ck_assert_tci_ok(kern_arg_reduce(d32, dy, 2, 3, 1, 0, 1, TCI_DTYPE_INT32, 0));
    gpu_download(got, dy, sizeof got);
    ck_assert(got[0] == 2 && got[1] == 1);
    ck_assert_tci_ok(kern_arg_reduce(d64, dy, 2, 2, 1, 1, 0, TCI_DTYPE_INT64, 0));
    gpu_download(got, dy, sizeof got);
    ck_assert(got[0] == 0 && got[1] == 0);
    ck_assert_tci_ok(kern_arg_reduce(d64, dy, 1, 2, 2, 0, 0, TCI_DTYPE_INT64, 0));
    gpu_download(got, dy, sizeof got);
    ck_assert(got[0] == 0 && got[1] == 0);
    ck_assert_tci_error(kern_arg_reduce(d32, dy, 2, 0, 1, 0, 0, TCI_DTYPE_INT32, 0),
                        TCI_ERR_INVALID_ARGUMENT, "the axis is empty");
    ck_assert_tci_error(kern_arg_reduce(d32, dy, 2, 3, 1, 0, 0, TCI_DTYPE_BOOL, 0),
                        TCI_ERR_UNSUPPORTED, "kern_arg_reduce");
    gpu_free(d32), gpu_free(d64), gpu_free(dy);
}
END_TEST

/* ---- CumSum ---- */

static void check_cumsum(tci_dtype dt, int64_t outer, int64_t len, int64_t inner, bool exclusive,
                         bool reverse, uint64_t seed) {
    int64_t n = outer * len * inner;
    void *bits;
    float *x = make_input(dt, n, seed, 0, &bits);
    size_t elem = gpu_dtype_size(dt);
    void *dx = gpu_upload(bits, elem * (size_t)n), *dy = gpu_upload(NULL, elem * (size_t)n);
    ck_assert_tci_ok(kern_cumsum(dx, dy, outer, len, inner, exclusive, reverse, dt, 0));
    gpu_sync();
    void *got_bits = malloc(elem * (size_t)(n ? n : 1));
    float *got = malloc(sizeof(float) * (size_t)(n ? n : 1));
    gpu_download(got_bits, dy, elem * (size_t)n);
    gpu_decode(dt, got_bits, got, (size_t)n);
    /* fp32 accumulation: each addition rounds by at most 2^-24 of the partial sum, so the
     * drift is bounded by 2^-24 times the sum of the partial sums' magnitudes (counted twice for
     * margin); then one rounding to the storage type (2^-11 in fp16, GPU_BF16_TOL in bf16) */
    double rel = dt == F32 ? 0.0 : dt == BF16 ? GPU_BF16_TOL : 1.0 / 1024;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            double acc = 0, drift = 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t at = o * len * inner + (reverse ? len - 1 - j : j) * inner + k;
                double v = x[at];
                if (!exclusive) acc += v, drift += fabs(acc) / 8388608.0;
                double bound = rel * fmax(1.0, fabs(acc)) + drift + 1e-6;
                ck_assert_msg(fabs(got[at] - acc) <= bound, "%s cumsum[%lld] = %.7g, want %.7g",
                              gpu_dtype_tag(dt), (long long)at, (double)got[at], acc);
                if (exclusive) acc += v, drift += fabs(acc) / 8388608.0;
            }
        }
    gpu_free(dx);
    gpu_free(dy);
    free(x), free(bits), free(got_bits), free(got);
}

START_TEST(test_cumsum) {
    const tci_dtype types[] = {F16, BF16, F32};
    for (int t = 0; t < 3; t++)
        for (int m = 0; m < 4; m++) {
            bool exclusive = m & 1, reverse = m >> 1;
            uint64_t seed = 100 + 10 * (uint64_t)t + (uint64_t)m;
            check_cumsum(types[t], 13, 64, 1, exclusive, reverse, seed + 1);
            check_cumsum(types[t], 4, 30, 17, exclusive, reverse, seed + 2);
            check_cumsum(types[t], 1, 3000, 1, exclusive, reverse, seed + 3);
            check_cumsum(types[t], 7, 1, 5, exclusive, reverse, seed + 4);
        }
    /* in place, and integers in int64 */
    const int32_t x32[] = {1, -2, 3, -4, 5, -6};
    void *d = gpu_upload(x32, sizeof x32);
    ck_assert_tci_ok(kern_cumsum(d, d, 2, 3, 1, 1, 1, TCI_DTYPE_INT32, 0));
    int32_t got[6];
    gpu_download(got, d, sizeof got);
    const int32_t want[] = {1, 3, 0, -1, -6, 0};
    for (int i = 0; i < 6; i++) ck_assert_int_eq(got[i], want[i]);
    gpu_free(d);
    const int64_t x64[] = {INT64_C(1) << 60, INT64_C(1) << 60, 1};
    d = gpu_upload(x64, sizeof x64);
    ck_assert_tci_ok(kern_cumsum(d, d, 1, 3, 1, 0, 0, TCI_DTYPE_INT64, 0));
    int64_t got64[3];
    gpu_download(got64, d, sizeof got64);
    ck_assert(got64[2] == (INT64_C(1) << 61) + 1);
    ck_assert_tci_error(kern_cumsum(d, d, -1, 3, 1, 0, 0, TCI_DTYPE_INT64, 0),
                        TCI_ERR_INVALID_ARGUMENT, "negative extent");
    gpu_free(d);
}
END_TEST

/* ---- TopK ---- */

/* Whether (a, ia) goes before (b, ib): NaN above every number, ties by position. */
static bool topk_before(float a, int64_t ia, float b, int64_t ib, bool largest) {
    bool a_above = !isnan(b) && (isnan(a) || a > b), b_above = !isnan(a) && (isnan(b) || b > a);
    if (a_above || b_above) return largest ? a_above : b_above;
    return ia < ib;
}

static void check_topk(tci_dtype dt, int64_t outer, int64_t len, int64_t inner, int64_t k,
                       bool largest, int nan_every, uint64_t seed) {
    int64_t n = outer * len * inner, outs = outer * k * inner;
    void *bits;
    float *x = make_input(dt, n, seed, nan_every, &bits);
    size_t elem = gpu_dtype_size(dt);
    void *dx = gpu_upload(bits, elem * (size_t)n), *dv = gpu_upload(NULL, elem * (size_t)outs);
    int64_t *di = gpu_upload(NULL, sizeof(int64_t) * (size_t)outs);
    ck_assert_tci_ok(kern_topk(dx, dv, di, outer, len, inner, k, largest, dt, 0));
    gpu_sync();
    void *vbits = malloc(elem * (size_t)(outs ? outs : 1));
    float *vals = malloc(sizeof(float) * (size_t)(outs ? outs : 1));
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(outs ? outs : 1));
    gpu_download(vbits, dv, elem * (size_t)outs);
    gpu_download(idx, di, sizeof(int64_t) * (size_t)outs);
    gpu_decode(dt, vbits, vals, (size_t)outs);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)len);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t kk = 0; kk < inner; kk++) {
            const float *p = x + o * len * inner + kk;
            /* insertion sort of the positions: the reference order */
            for (int64_t j = 0; j < len; j++) {
                int64_t at = j;
                while (at > 0 && topk_before(p[j * inner], j, p[order[at - 1] * inner],
                                             order[at - 1], largest)) {
                    order[at] = order[at - 1];
                    at--;
                }
                order[at] = j;
            }
            for (int64_t r = 0; r < k; r++) {
                int64_t at = o * k * inner + r * inner + kk;
                float want = p[order[r] * inner];
                ck_assert_msg(idx[at] == order[r], "%s topk index [%lld] = %lld, want %lld",
                              gpu_dtype_tag(dt), (long long)at, (long long)idx[at],
                              (long long)order[r]);
                ck_assert_msg(isnan(want) ? isnan(vals[at]) : vals[at] == want,
                              "%s topk value [%lld] = %g, want %g", gpu_dtype_tag(dt),
                              (long long)at, (double)vals[at], (double)want);
            }
        }
    gpu_free(dx), gpu_free(dv), gpu_free(di);
    free(x), free(bits), free(vbits), free(vals), free(idx), free(order);
}

START_TEST(test_topk) {
    const tci_dtype types[] = {F16, BF16, F32};
    for (int t = 0; t < 3; t++)
        for (int largest = 0; largest < 2; largest++) {
            uint64_t seed = 200 + 10 * (uint64_t)t + (uint64_t)largest;
            check_topk(types[t], 20, 100, 1, 5, largest, 0, seed + 1);
            check_topk(types[t], 3, 80, 11, 1, largest, 0, seed + 2);
            check_topk(types[t], 2, 64, 3, 64, largest, 0, seed + 3);  /* k = len = the most */
            check_topk(types[t], 1, 8400, 1, 50, largest, 0, seed + 4); /* a detection head */
            check_topk(types[t], 4, 40, 2, 10, largest, 9, seed + 5);   /* NaN */
            check_topk(types[t], 4, 40, 2, 0, largest, 0, seed + 6);    /* k = 0 */
        }
    void *d = gpu_upload(NULL, 64);
    int64_t *di = gpu_upload(NULL, 64);
    ck_assert_tci_error(kern_topk(d, d, di, 1, 100, 1, KERN_TOPK_MAX_K + 1, 1, F32, 0),
                        TCI_ERR_INVALID_ARGUMENT, "kern_topk: k 65 is outside");
    ck_assert_tci_error(kern_topk(d, d, di, 1, 3, 1, 4, 1, F32, 0), TCI_ERR_INVALID_ARGUMENT,
                        "kern_topk: k 4 is outside");
    ck_assert_tci_error(kern_topk(d, d, di, 1, 3, 1, 1, 1, TCI_DTYPE_BOOL, 0),
                        TCI_ERR_UNSUPPORTED, "kern_topk");
    gpu_free(d), gpu_free(di);
    /* int64 exactly, ties by position */
    const int64_t xl[] = {INT64_MAX - 1, INT64_MIN, INT64_MAX, INT64_MAX};
    int64_t vals[2], idx[2];
    void *dx = gpu_upload(xl, sizeof xl), *dv = gpu_upload(NULL, sizeof vals);
    int64_t *dis = gpu_upload(NULL, sizeof idx);
    ck_assert_tci_ok(kern_topk(dx, dv, dis, 1, 4, 1, 2, 1, TCI_DTYPE_INT64, 0));
    gpu_download(vals, dv, sizeof vals);
    gpu_download(idx, dis, sizeof idx);
    ck_assert(vals[0] == INT64_MAX && vals[1] == INT64_MAX && idx[0] == 2 && idx[1] == 3);
    ck_assert_tci_ok(kern_topk(dx, dv, dis, 1, 4, 1, 2, 0, TCI_DTYPE_INT64, 0));
    gpu_download(vals, dv, sizeof vals);
    gpu_download(idx, dis, sizeof idx);
    ck_assert(vals[0] == INT64_MIN && vals[1] == INT64_MAX - 1 && idx[0] == 1 && idx[1] == 0);
    gpu_free(dx), gpu_free(dv), gpu_free(dis);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_argreduce");
    Suite *s = suite_create("gpu_argreduce");
    TCase *tc = tcase_create("argreduce");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_arg_reduce);
    tcase_add_test(tc, test_cumsum);
    tcase_add_test(tc, test_topk);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
