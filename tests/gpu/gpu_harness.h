/* Shared bits of the GPU tests: skip visibly without a GPU, device buffers, fp16 helpers. */
#ifndef TCI_GPU_HARNESS_H
#define TCI_GPU_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "kernels/eltwise.h"

/* Exit code ctest reads as "skipped". */
#define GPU_SKIP_CODE 77

/* Prints "SKIP: <suite>: no CUDA GPU (...)" and exits 77 when no GPU is usable. */
void gpu_require_device(const char *suite);

/* Device buffer from host bytes (NULL host: uninitialised, then filled with 0xFF bytes so
 * unwritten outputs show as NaN in fp16/fp32). Freed with gpu_free. Asserts on failure. */
void *gpu_upload(const void *host, size_t bytes);
void gpu_download(void *host, const void *device, size_t bytes);
void gpu_free(void *device);
void gpu_sync(void);

/* fp32 arrays <-> fp16 bits (round to nearest even). */
void gpu_to_half(const float *src, uint16_t *dst, size_t n);
void gpu_from_half(const uint16_t *src, float *dst, size_t n);

/* (log-)softmax over the middle axis of x viewed as (outer, len, inner), in double: the
 * reference of the softmax kernels' tests. */
void gpu_softmax_reference(const float *x, double *y, int64_t outer, int64_t len, int64_t inner,
                           int log_);

/* Layer normalisation of rows x len values in double: y = (x - mean) / sqrt(var + eps) * g
 * (+ b when b is not NULL); mean and inv_std (rows entries each) receive the row statistics.
 * The reference of the layernorm kernels' tests. */
void gpu_layernorm_reference(const float *x, const float *g, const float *b, int64_t rows,
                             int64_t len, float eps, double *y, double *mean, double *inv_std);

/* An activation of eltwise.h (parameters a, b as there) in double: the reference of every
 * kernel that applies one. */
double gpu_act_reference(kern_act act, double x, double a, double b);

/* Deterministic uniform [lo, hi) floats. */
void gpu_fill_random(float *dst, size_t n, uint64_t seed, float lo, float hi);

#endif
