/* Fused scaled-dot-product attention, flash-attention style: Y = softmax(scale * Q K^T + mask) V
 * in one kernel, the scores never leaving the chip. Q, K, V and Y are fp16 or bf16; Q K^T and
 * P V run on tensor cores (fp32 accumulation: mma.sync m16n8k16 in the FA2 kernel,
 * attention_fa2.h, WMMA 16x16x16 in the fallback, see kern_attention_impl), the softmax is the
 * online one (a running maximum and sum per query row, fp32), and Y is rounded once at the end.
 *
 * Logical shapes: Q (batch, heads, q_len, head_dim), K and V (batch, heads, kv_len, head_dim),
 * the mask (batch, heads, q_len, kv_len) read through strides (0 where it broadcasts), Y written
 * through its strides (dense (batch, heads, q_len, head_dim) unless given: the [B, S, heads *
 * head_dim] layout of an output projection, say). Q, K and V are read through element strides in that order,
 * so a head split (Transpose) of the projection before them costs no copy; the fast loads need
 * a head_dim stride of 1 and the other strides multiples of 8 elements, anything else is read
 * element by element. */
#ifndef TCI_KERNELS_ATTENTION_H
#define TCI_KERNELS_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which kernel runs a kern_attention call. AUTO (0, a zeroed descriptor): the FA2 kernel
 * (attention_fa2.h: mma.sync, everything in registers, cp.async double buffering) where it
 * applies (head dims 32 to 128 as below, Q, K and V read 16 bytes at a time), the WMMA kernel
 * otherwise (element loads). WMMA and FA2 force one (tests and the micro-benchmark time one
 * against the other); FA2 forced where it does not apply is UNSUPPORTED. */
typedef enum kern_attention_impl {
    KERN_ATTENTION_AUTO = 0,
    KERN_ATTENTION_WMMA = 1,
    KERN_ATTENTION_FA2 = 2
} kern_attention_impl;

typedef struct kern_attention_desc {
    int64_t batch, heads, q_len, kv_len, head_dim;
    /* element strides along (batch, head, position, head_dim) */
    int64_t q_strides[4], k_strides[4], v_strides[4];
    /* element strides of the additive mask along (batch, head, query, key); 0 broadcasts */
    int64_t mask_strides[4];
    /* > 0: batch b reads the mask's batch b % mask_batch_mod (a mask that repeats along the
     * batch: Swin's shifted windows, nW windows of each image in the batch); 0: b */
    int64_t mask_batch_mod;
    /* element strides of the bool keep mask along (batch, head, query, key); 0 broadcasts */
    int64_t keep_strides[4];
    /* element strides of Y along (batch, head, query, head_dim); all 0: dense (batch, heads,
     * q_len, head_dim) */
    int64_t y_strides[4];
    float scale;  /* multiplies Q K^T before the mask is added */
    bool causal;  /* key j is seen by query i only when j <= i */
    /* a query row that keep drops every key of (causal and kv_len aside) gets the mean of V
     * over the keys keep drops, as the softmax of the equal scores a finite fill (at most
     * -1e30) gives, instead of zeros */
    bool keep_row_mean;
    tci_dtype dtype; /* of Q, K, V, mask and Y: FLOAT16 (0 too) or BFLOAT16 */
    kern_attention_impl impl; /* AUTO (0) unless a caller forces one */
} kern_attention_desc;

/* Whether kern_attention has a kernel for this head dim (32, 64, 80, 96, 128). */
bool kern_attention_head_dim_ok(int64_t head_dim);

/* Y = softmax(scale * Q K^T + mask, over keys) V for every (batch, head, query); mask may be
 * NULL. keep, a bool mask (one byte per element, nonzero: true) or NULL, drops key j from query
 * i where it is false. A query row that every key is masked out of (all -inf, or all dropped
 * without keep_row_mean) gets zeros. Validates the
 * descriptor (UNSUPPORTED for another head dim or dtype, INVALID_ARGUMENT for a negative extent or
 * a NULL operand), enqueues on stream without synchronising (legal inside a CUDA graph capture);
 * empty work enqueues nothing. y must not overlap the inputs, and y_strides must map no two
 * elements to one place. */
tci_status kern_attention(const kern_attention_desc *desc, const void *q, const void *k,
                          const void *v, const void *mask, const void *keep, void *y,
                          cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
