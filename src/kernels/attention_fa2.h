/* The FlashAttention-2-style kernel behind kern_attention (attention.h): mma.sync m16n8k16 with
 * Q, S, the softmax statistics and O in registers, ldmatrix from shared memory and cp.async
 * double-buffered K and V tiles. The same contract and results (within the storage type's
 * rounding) as the WMMA kernel, for the inputs it applies to: head dims 32, 64, 80, 96 and 128,
 * fp16 or bf16, and Q, K and V read 16 bytes at a time (a head_dim stride of 1, the other
 * strides multiples of 8 elements, 16-byte aligned bases). Masks, causal, keep_row_mean and Y's
 * strides are all its own. kern_attention picks it where it applies unless the descriptor's
 * impl says otherwise; callers go through kern_attention. */
#ifndef TCI_KERNELS_ATTENTION_FA2_H
#define TCI_KERNELS_ATTENTION_FA2_H

#include <stdbool.h>

#include <cuda_runtime_api.h>

#include "kernels/attention.h"
#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether kern_attention_fa2 runs this descriptor with these operands (see above). */
bool kern_attention_fa2_applies(const kern_attention_desc *desc, const void *q, const void *k,
                                const void *v);

/* kern_attention's work on the FA2 kernel, for a descriptor kern_attention has validated (non-
 * negative extents, non-NULL operands); UNSUPPORTED where kern_attention_fa2_applies is false. */
tci_status kern_attention_fa2(const kern_attention_desc *desc, const void *q, const void *k,
                              const void *v, const void *mask, const void *keep, void *y,
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
