/* Shared bits of the GPU tests. */
#include "gpu_harness.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/device.h"
#include "layers/op.h"

void gpu_require_device(const char *suite) {
    int n = 0;
    char name[256];
    if (kern_device_count(&n, name, sizeof name) != TCI_OK || n == 0) {
        printf("SKIP: %s: no CUDA GPU on this machine (tests/gpu run on the GPU machine)\n", suite);
        exit(GPU_SKIP_CODE);
    }
    printf("%s: running on %s\n", suite, name);
}

void *gpu_upload(const void *host, size_t bytes) {
    void *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, bytes ? bytes : 1), cudaSuccess);
    if (host)
        ck_assert_int_eq(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    else
        ck_assert_int_eq(cudaMemset(d, 0xff, bytes), cudaSuccess);
    return d;
}

void gpu_download(void *host, const void *device, size_t bytes) {
    ck_assert_int_eq(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

void gpu_free(void *device) { cudaFree(device); }

void gpu_sync(void) { ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess); }

void gpu_to_half(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = float_to_half(src[i]);
}

void gpu_from_half(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = half_to_float(src[i]);
}

void gpu_to_bf16(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = float_to_bfloat16(src[i]);
}

void gpu_from_bf16(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bfloat16_to_float(src[i]);
}

size_t gpu_dtype_size(tci_dtype dtype) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT16:
    case TCI_DTYPE_BFLOAT16: return 2;
    case TCI_DTYPE_FLOAT: return 4;
    default: ck_abort_msg("not a float storage type: %d", (int)dtype); return 0;
    }
}

void gpu_encode(tci_dtype dtype, const float *src, void *dst, size_t n) {
    if (dtype == TCI_DTYPE_FLOAT16) gpu_to_half(src, dst, n);
    else if (dtype == TCI_DTYPE_BFLOAT16) gpu_to_bf16(src, dst, n);
    else memcpy(dst, src, n * gpu_dtype_size(dtype));
}

void gpu_decode(tci_dtype dtype, const void *src, float *dst, size_t n) {
    if (dtype == TCI_DTYPE_FLOAT16) gpu_from_half(src, dst, n);
    else if (dtype == TCI_DTYPE_BFLOAT16) gpu_from_bf16(src, dst, n);
    else memcpy(dst, src, n * gpu_dtype_size(dtype));
}

void gpu_round_to(tci_dtype dtype, float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (dtype == TCI_DTYPE_FLOAT16) v[i] = half_to_float(float_to_half(v[i]));
        else if (dtype == TCI_DTYPE_BFLOAT16) v[i] = bfloat16_to_float(float_to_bfloat16(v[i]));
    }
}

const char *gpu_dtype_tag(tci_dtype dtype) {
    return dtype == TCI_DTYPE_FLOAT16 ? "f16" : dtype == TCI_DTYPE_BFLOAT16 ? "bf16" : "f32";
}

void gpu_fill_random(float *dst, size_t n, uint64_t seed, float lo, float hi) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        dst[i] = lo + (hi - lo) * (float)((s >> 11) * (1.0 / 9007199254740992.0));
    }
}

void gpu_softmax_reference(const float *x, double *y, int64_t outer, int64_t len,
                           int64_t inner, int log_) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            const float *xc = x + o * len * inner + k;
            double m = -INFINITY, s = 0.0;
            for (int64_t i = 0; i < len; i++)
                if (xc[i * inner] > m) m = xc[i * inner];
            for (int64_t i = 0; i < len; i++) s += exp((double)xc[i * inner] - m);
            for (int64_t i = 0; i < len; i++) {
                double v = (double)xc[i * inner] - m;
                y[o * len * inner + k + i * inner] = log_ ? v - log(s) : exp(v) / s;
            }
        }
}

void gpu_layernorm_reference(const float *x, const float *g, const float *b, int64_t rows,
                             int64_t len, float eps, double *y, double *mean, double *inv_std) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * len;
        double m = 0.0, var = 0.0;
        for (int64_t i = 0; i < len; i++) m += xr[i];
        m /= (double)len;
        for (int64_t i = 0; i < len; i++) var += (xr[i] - m) * (xr[i] - m);
        var /= (double)len;
        double inv = 1.0 / sqrt(var + eps);
        mean[r] = m, inv_std[r] = inv;
        for (int64_t i = 0; i < len; i++)
            y[r * len + i] = (xr[i] - m) * inv * g[i] + (b ? b[i] : 0.0);
    }
}

double gpu_act_reference(act_kind act, double x, double a, double b) {
    switch (act) {
    case ACT_NONE: return x;
    case ACT_RELU: return x < 0 ? 0 : x;
    case ACT_LEAKY_RELU: return x < 0 ? a * x : x;
    case ACT_CLIP: return x < a ? a : (x > b ? b : x);
    case ACT_SIGMOID: return 1 / (1 + exp(-x));
    case ACT_HARD_SIGMOID: return fmin(1, fmax(0, a * x + b));
    case ACT_HARD_SWISH: return x * fmin(1, fmax(0, x / 6 + 0.5));
    case ACT_TANH: return tanh(x);
    case ACT_ELU: return x < 0 ? a * expm1(x) : x;
    case ACT_SELU: return x <= 0 ? b * (a * expm1(x)) : b * x;
    case ACT_SOFTPLUS: return fmax(x, 0) + log1p(exp(-fabs(x)));
    case ACT_SQRT: return sqrt(x);
    case ACT_ERF: return erf(x);
    case ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case ACT_GELU_TANH:
        return 0.5 * x * (1 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
    case ACT_SILU: return x / (1 + exp(-x));
    case ACT_NEG: return -x;
    case ACT_ABS: return fabs(x);
    case ACT_EXP: return exp(x);
    case ACT_LOG: return log(x);
    case ACT_RECIPROCAL: return 1 / x;
    case ACT_FLOOR: return floor(x);
    case ACT_CEIL: return ceil(x);
    case ACT_ROUND: return nearbyint(x); /* halves to even in the default rounding mode */
    case ACT_SIGN: return x > 0 ? 1 : (x < 0 ? -1 : x);
    case ACT_SOFTSIGN: return x / (1 + fabs(x));
    case ACT_MISH: return x * tanh(log1p(exp(x)));
    case ACT_CELU: return fmax(0, x) + fmin(0, a * expm1(x / a));
    case ACT_THRESHOLDED_RELU: return x > a ? x : 0;
    case ACT_SIN: return sin(x);
    case ACT_COS: return cos(x);
    case ACT_NOT: return x == 0;
    case ACT_IS_NAN: return isnan(x);
    case ACT_IS_INF: return isinf(x) && (x > 0 ? b != 0 : a != 0);
    case ACT_TAN: return tan(x);
    case ACT_ASIN: return asin(x);
    case ACT_ACOS: return acos(x);
    case ACT_ATAN: return atan(x);
    case ACT_SINH: return sinh(x);
    case ACT_COSH: return cosh(x);
    case ACT_ASINH: return asinh(x);
    case ACT_ACOSH: return acosh(x);
    case ACT_ATANH: return atanh(x);
    case ACT_SHRINK: return x < -a ? x + b : (x > a ? x - b : 0);
    case ACT_SWISH: return x / (1 + exp(-a * x));
    case ACT_SCALE: return a * x;
    case ACT_GELU_OF_DIV: return 0.5 * a * x * (1 + erf(x));
    case ACT_GELU_SCALED: return 0.5 * x * (1 + erf(x * a));
    default: ck_abort_msg("no reference for activation %d", (int)act); return 0;
    }
}
