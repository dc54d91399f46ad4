/* RotaryEmbedding on the device (ONNX's op, opset 23): each head's first rotary_dim values are
 * rotated in pairs by the angle whose cosine and sine the caches hold for the token's position,
 * the rest copied. The pairs are (i, i + rotary_dim / 2) or, interleaved, (2i, 2i + 1):
 *   y1 = cos[i] x1 - sin[i] x2,   y2 = sin[i] x1 + cos[i] x2,   i < rotary_dim / 2
 * in fp32 from the stored values, rounded once to the storage type.
 *
 * The launcher validates its arguments, enqueues on `stream` and returns without synchronising
 * (capturable into a CUDA graph); a launch failure is TCI_ERR_CUDA with the call in
 * tci_last_error(). Empty work enqueues nothing. */
#ifndef TCI_KERNELS_ROPE_H
#define TCI_KERNELS_ROPE_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_rope_desc {
    /* x (and y): (batch, heads, seq, head_size) when heads_first, else (batch, seq,
     * heads * head_size); dense, row-major */
    int64_t batch, heads, seq, head_size;
    int heads_first;
    int64_t rotary_dim; /* even, 2 <= rotary_dim <= head_size */
    int interleaved;    /* pairs (2i, 2i + 1), else (i, i + rotary_dim / 2) */
    /* Without position ids (position_ids NULL) the caches are (cache_batch, seq, rotary_dim / 2),
     * cache_batch 1 (one for every sequence) or batch. With them the caches are (positions,
     * rotary_dim / 2) and the ids (ids_batch, seq), ids_batch 1 or batch, int64 or, with
     * ids_int32, int32. An id outside [0, positions) reads position 0 or positions - 1 (the
     * nearer) and stores 1 in *error_flag (a device int, may be NULL; the caller zeroes it
     * beforehand and checks it afterwards). */
    int64_t cache_batch, positions, ids_batch;
    int ids_int32;
    tci_dtype dtype; /* of x, y and the caches: FLOAT16 (or 0), BFLOAT16, FLOAT */
} kern_rope_desc;

/* y must not overlap x (each value reads its pair's). */
tci_status kern_rotary_embedding(const kern_rope_desc *d, const void *x, const void *cos_cache,
                                 const void *sin_cache, const void *position_ids, void *y,
                                 int *error_flag, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
