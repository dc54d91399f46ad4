/* Radix-2 and Bluestein FFTs in double (fft.h). */
#include "layers/fft.h"

#include <math.h>
#include <stdlib.h>

static const double two_pi = 6.283185307179586476925286766559;

static bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

/* In-place iterative radix-2 transform of m values (a power of two), exp(-2 pi i / m) twiddles
 * conjugated when inverse. */
static void radix2(double complex *a, int64_t m, const double complex *tw, bool inverse) {
    for (int64_t i = 1, j = 0; i < m; i++) {
        int64_t bit = m >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j |= bit;
        if (i < j) {
            double complex t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
    }
    for (int64_t len = 2; len <= m; len <<= 1) {
        int64_t half = len >> 1, step = m / len;
        for (int64_t s = 0; s < m; s += len)
            for (int64_t k = 0; k < half; k++) {
                double complex w = inverse ? conj(tw[k * step]) : tw[k * step];
                double complex u = a[s + k], v = a[s + k + half] * w;
                a[s + k] = u + v;
                a[s + k + half] = u - v;
            }
    }
}

bool fft_plan_init(fft_plan *plan, int64_t n) {
    *plan = (fft_plan){.n = n, .m = n};
    if (n < 1 || n > (INT64_C(1) << 40)) return false;
    if (!is_pow2(n)) {
        plan->m = 1;
        while (plan->m < 2 * n - 1) plan->m <<= 1;
    }
    int64_t m = plan->m;
    plan->tw = malloc((size_t)(m / 2 + 1) * sizeof *plan->tw);
    if (!plan->tw) return false;
    /* each twiddle from its own angle (no recurrence, so no error builds up along k) */
    for (int64_t k = 0; k < m / 2; k++) {
        double a = -two_pi * (double)k / (double)m;
        plan->tw[k] = fft_complex(cos(a), sin(a));
    }
    if (m == n) return true;
    plan->chirp = malloc((size_t)n * sizeof *plan->chirp);
    plan->kernel = calloc((size_t)m, sizeof *plan->kernel);
    plan->work = malloc((size_t)m * sizeof *plan->work);
    if (!plan->chirp || !plan->kernel || !plan->work) {
        fft_plan_free(plan);
        return false;
    }
    /* exp(-i pi k^2 / n) with k^2 taken mod 2n, exactly, so large k lose no accuracy */
    int64_t k2 = 0;
    for (int64_t k = 0; k < n; k++) {
        double a = -two_pi / 2 * (double)k2 / (double)n;
        plan->chirp[k] = fft_complex(cos(a), sin(a));
        k2 = (k2 + 2 * k + 1) % (2 * n);
    }
    plan->kernel[0] = conj(plan->chirp[0]);
    for (int64_t k = 1; k < n; k++) plan->kernel[k] = plan->kernel[m - k] = conj(plan->chirp[k]);
    radix2(plan->kernel, m, plan->tw, false);
    return true;
}

void fft_plan_free(fft_plan *plan) {
    free(plan->tw);
    free(plan->chirp);
    free(plan->kernel);
    free(plan->work);
    *plan = (fft_plan){0};
}

void fft_run(const fft_plan *plan, double complex *data, bool inverse) {
    int64_t n = plan->n, m = plan->m;
    if (!plan->chirp) {
        radix2(data, n, plan->tw, inverse);
        return;
    }
    /* the inverse is the conjugate of the forward transform of the conjugate */
    double complex *w = plan->work;
    for (int64_t k = 0; k < n; k++)
        w[k] = (inverse ? conj(data[k]) : data[k]) * plan->chirp[k];
    for (int64_t k = n; k < m; k++) w[k] = 0;
    radix2(w, m, plan->tw, false);
    for (int64_t k = 0; k < m; k++) w[k] *= plan->kernel[k];
    radix2(w, m, plan->tw, true);
    for (int64_t k = 0; k < n; k++) {
        double complex y = w[k] / (double)m * plan->chirp[k];
        data[k] = inverse ? conj(y) : y;
    }
}
