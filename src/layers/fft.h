/* Fast Fourier transforms of any length in double precision, for the spectral ops (spectral.c):
 * radix-2 where the length is a power of two, Bluestein's chirp-z (a power-of-two convolution)
 * otherwise, so every length costs O(n log n). */
#ifndef TCI_LAYERS_FFT_H
#define TCI_LAYERS_FFT_H

#include <complex.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct fft_plan {
    int64_t n;              /* the transform's length */
    int64_t m;              /* the power of two it runs at: n, or Bluestein's >= 2n - 1 */
    double complex *tw;     /* m / 2 twiddles exp(-2 pi i k / m) */
    double complex *chirp;  /* Bluestein: n values exp(-i pi k^2 / n); NULL for a power of two */
    double complex *kernel; /* Bluestein: the transform of the conjugate chirp, m values */
    double complex *work;   /* Bluestein: m values of scratch */
} fft_plan;

/* Prepares a plan of length n (1 <= n <= 2^40); false when out of memory. */
bool fft_plan_init(fft_plan *plan, int64_t n);
void fft_plan_free(fft_plan *plan);
/* data[k] = sum_j data[j] exp(-+2 pi i j k / n) in place (n values): the sign + when inverse,
 * unnormalised (the caller divides an inverse by n). */
void fft_run(const fft_plan *plan, double complex *data, bool inverse);

/* re + i im, exactly (also for infinities and NaN, which re + im * I mixes into the real part):
 * C11's CMPLX where the compiler has it (clang before 12 does not), else through the layout C11
 * gives a complex number, an array of its two parts. */
static inline double complex fft_complex(double re, double im) {
#ifdef CMPLX
    return CMPLX(re, im);
#else
    union {
        double complex z;
        double parts[2];
    } u;
    u.parts[0] = re;
    u.parts[1] = im;
    return u.z;
#endif
}

#endif
