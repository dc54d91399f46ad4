/* Shared bits of the GPU tests: skip visibly without a GPU, device buffers, fp16 and bf16
 * helpers. */
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

/* fp32 <-> bf16 arrays through float_to_bfloat16 / bfloat16_to_float (layers/op.h) */
void gpu_to_bf16(const float *src, uint16_t *dst, size_t n);
void gpu_from_bf16(const uint16_t *src, float *dst, size_t n);

/* Bound on |got - want| / max(1, |want|) for a bf16 kernel output that is rounded once from fp32
 * math on bf16-rounded inputs: bf16 keeps 8 significant bits, so one round-to-nearest-even is off
 * by at most 2^-8 = 3.9e-3 relative; the fp32 arithmetic before it (accumulation, fast exp/log/
 * reciprocal) adds well under 1e-5. 1.5 * 2^-8 covers that with room, while a truncating store
 * or a second rounding (off by up to 2^-7) exceeds it on enough of a random tensor to fail. */
#define GPU_BF16_TOL (1.5 / 256.0)

/* The float storage types of the kernels, TCI_DTYPE_FLOAT16, TCI_DTYPE_BFLOAT16 and
 * TCI_DTYPE_FLOAT: bytes per element (asserts on anything else), host floats to storage (rounded
 * to nearest even) and back. gpu_round_to rounds v in place to the values dtype can hold, so a
 * reference computed from v sees what the kernel reads. */
size_t gpu_dtype_size(tci_dtype dtype);
void gpu_encode(tci_dtype dtype, const float *src, void *dst, size_t n);
void gpu_decode(tci_dtype dtype, const void *src, float *dst, size_t n);
void gpu_round_to(tci_dtype dtype, float *v, size_t n);
/* "f16", "bf16" or "f32", for messages. */
const char *gpu_dtype_tag(tci_dtype dtype);

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
double gpu_act_reference(act_kind act, double x, double a, double b);

/* Deterministic uniform [lo, hi) floats. */
void gpu_fill_random(float *dst, size_t n, uint64_t seed, float lo, float hi);

#endif
