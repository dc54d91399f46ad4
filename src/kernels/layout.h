/* Layout conversions of the GPU engine: dense NCHW (fp32, fp16 or bf16) <-> NHWC8 (fp16, bf16 or
 * fp32), and dense fp32 <-> fp16 / bf16 casts. C API over src/kernels/layout.cu. */
#ifndef TCI_KERNELS_LAYOUT_H
#define TCI_KERNELS_LAYOUT_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* All pointers are device pointers; fp16 and bf16 buffers are `void *` (IEEE half bits, bfloat16
 * bits: the top 16 bits of an fp32). n, c, h, w are the
 * logical NCHW dims; the NHWC8 side has Cp = round_up(c, 8) channels, element (n,c,h,w) at
 * ((n*h + h)*w + w)*Cp + c. NHWC8 buffers must be 16-byte aligned (Cp*2 bytes per pixel makes
 * every pixel 16-byte aligned then; the same holds for bf16). Each call only enqueues work on stream; an empty tensor
 * enqueues nothing. Errors: TCI_ERR_INVALID_ARGUMENT (negative dims, NULL or misaligned buffer,
 * size overflow), TCI_ERR_CUDA (launch failure). Source and destination must not overlap. */

/* Dense NCHW fp32 -> NHWC8 fp16; the padded channels are written as zeros. */
tci_status kern_nchw_f32_to_nhwc8(const float *src, void *dst_f16, int64_t n, int64_t c, int64_t h,
                                  int64_t w, cudaStream_t stream);

/* NHWC8 fp16 -> dense NCHW fp32; the padded channels are dropped. */
tci_status kern_nhwc8_to_nchw_f32(const void *src_f16, float *dst, int64_t n, int64_t c, int64_t h,
                                  int64_t w, cudaStream_t stream);

/* The same conversions with dense NCHW fp16 on the logical side, for ops that need logical
 * order (Reshape/Flatten of a 4-D tensor, ...). */
tci_status kern_nchw_f16_to_nhwc8(const void *src_f16, void *dst_f16, int64_t n, int64_t c,
                                  int64_t h, int64_t w, cudaStream_t stream);
tci_status kern_nhwc8_to_nchw_f16(const void *src_f16, void *dst_f16, int64_t n, int64_t c,
                                  int64_t h, int64_t w, cudaStream_t stream);

/* The same conversions for any pairing of element types: src_dtype / dst_dtype are each
 * TCI_DTYPE_FLOAT16 (or 0, which means fp16), TCI_DTYPE_BFLOAT16 or TCI_DTYPE_FLOAT; anything
 * else is TCI_ERR_UNSUPPORTED. A bf16 NHWC8 tensor has the fp16 layout (2-byte elements); an fp32
 * one has the same layout with 4-byte elements (Cp*4 bytes per pixel, padded channels zero); it
 * must be 16-byte aligned too. The dense side needs no alignment. Padded channels are written as
 * zeros (to NHWC8) or dropped (from NHWC8); values convert through fp32 with round to nearest even
 * where the destination is narrower (fp16 <-> bf16 rounds once, from the exact fp32 value). */
tci_status kern_nchw_to_nhwc8(const void *src, tci_dtype src_dtype, void *dst, tci_dtype dst_dtype,
                              int64_t n, int64_t c, int64_t h, int64_t w, cudaStream_t stream);
tci_status kern_nhwc8_to_nchw(const void *src, tci_dtype src_dtype, void *dst, tci_dtype dst_dtype,
                              int64_t n, int64_t c, int64_t h, int64_t w, cudaStream_t stream);

/* fp32 on both sides: host-order NCHW fp32 <-> NHWC8 fp32 (the fp32 layers and baseline). */
tci_status kern_nchw_f32_to_nhwc8_f32(const float *src, float *dst, int64_t n, int64_t c, int64_t h,
                                      int64_t w, cudaStream_t stream);
tci_status kern_nhwc8_f32_to_nchw_f32(const float *src, float *dst, int64_t n, int64_t c, int64_t h,
                                      int64_t w, cudaStream_t stream);

/* Dense casts of count elements (round to nearest even; no alignment needed, aligned buffers go
 * faster). */
tci_status kern_f32_to_f16(const float *src, void *dst_f16, int64_t count, cudaStream_t stream);
tci_status kern_f16_to_f32(const void *src_f16, float *dst, int64_t count, cudaStream_t stream);
tci_status kern_f32_to_bf16(const float *src, void *dst_bf16, int64_t count, cudaStream_t stream);
tci_status kern_bf16_to_f32(const void *src_bf16, float *dst, int64_t count, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
