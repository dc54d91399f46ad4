/* Data-movement kernels on device buffers: strided copy (Concat, Split, Slice, Transpose, Expand),
 * Gather, Pad and fill. They move raw elements of 1, 2, 4 or 8 bytes and never look at values.
 *
 * Every launcher validates its arguments, enqueues work on `stream` and returns without
 * synchronising (they may be captured into a CUDA graph); a launch failure is TCI_ERR_CUDA with
 * the call in tci_last_error(). Empty work (a zero extent) enqueues nothing and returns TCI_OK.
 * Descriptors are read on the host during the call only. No state is kept between calls. */
#ifndef TCI_KERNELS_COPY_H
#define TCI_KERNELS_COPY_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_COPY_MAX_RANK 6

/* dst[i0..i5] = src[i0..i5] over `shape`, both addressed through their own strides, counted in
 * elements. `dst` points at the element written for index (0,...,0) (for Concat, the window of
 * the output that this input fills) and `src` at the element read for (0,...,0): a Slice with
 * negative steps passes negative src strides and src pointing at the first element it reads.
 * A src stride of 0 broadcasts (Expand). Dst strides must be non-zero along extents > 1 (two
 * writes to one element would race) and dst and src must not overlap.
 * The dims may be given in any order; the launcher sorts them by |dst stride|, merges dims that
 * are contiguous in both, then picks a path: vector loads/stores (up to 16 bytes) when the
 * innermost dim is contiguous on both sides, repeated-element vector stores when the innermost
 * source stride is 0, a shared-memory tile when the source is contiguous along another dim
 * (transposes), else a plain strided loop. */
typedef struct kern_copy_desc {
    int rank;      /* 0..KERN_COPY_MAX_RANK; 0 copies one element */
    int elem_size; /* bytes: 1, 2, 4 or 8 */
    int64_t shape[KERN_COPY_MAX_RANK];
    int64_t dst_strides[KERN_COPY_MAX_RANK];
    int64_t src_strides[KERN_COPY_MAX_RANK];
} kern_copy_desc;

tci_status kern_strided_copy(void *dst, const void *src, const kern_copy_desc *desc,
                             cudaStream_t stream);

/* Up to KERN_COPY_MAX_BLOCKS 2-D blocks in one launch (a Concat's inputs into their windows of
 * the output): block b copies rows x len elements from srcs[b] (rows src_ld apart) to dst +
 * dst_offset (rows dst_ld apart), counted in elements of elem_size (1, 2, 4 or 8) bytes. The
 * blocks must not overlap in dst, nor any src with dst. Vectors of up to 16 bytes move where
 * every block's lengths, strides, offsets and base addresses allow. */
#define KERN_COPY_MAX_BLOCKS 8
typedef struct kern_copy_block {
    int64_t rows, len, src_ld, dst_ld, dst_offset;
} kern_copy_block;

tci_status kern_copy_blocks(void *dst, const void *const *srcs, const kern_copy_block *blocks,
                            int num_blocks, int elem_size, cudaStream_t stream);

/* Gather along one axis of data viewed as (outer, axis_dim, inner), elements of elem_size bytes,
 * row-major; out is (outer, num_indices, inner). indices are int64 (index_is_int32 == 0) or
 * int32, num_indices of them, on the device. A negative index counts from the end (adds
 * axis_dim). An index still outside [0, axis_dim) is clamped into range (so nothing is read out
 * of bounds) and, when error_flag (a device int, may be NULL) is given, 1 is stored there; the
 * caller zeroes it beforehand and checks it afterwards. With axis_dim == 0 every output element
 * is zero-filled and flagged. */
tci_status kern_gather(void *out, const void *data, const void *indices, int index_is_int32,
                       int64_t outer, int64_t axis_dim, int64_t inner, int64_t num_indices,
                       int elem_size, int *error_flag, cudaStream_t stream);

typedef enum kern_pad_mode {
    KERN_PAD_CONSTANT,
    KERN_PAD_REFLECT, /* mirror without repeating the edge; a 1-wide range repeats its element */
    KERN_PAD_EDGE,
    KERN_PAD_WRAP,
} kern_pad_mode;

/* ONNX Pad of a row-major tensor of `rank` (1..KERN_COPY_MAX_RANK) dims `in_dims`, elements of
 * elem_size bytes (any mode works for every size: only constant writes a value). pads_begin and
 * pads_end have rank entries; negative ones crop. As in the CPU reference, cropping happens
 * first and reflect/edge/wrap then extend the kept range. Output dims are
 * in_dims[d] + pads_begin[d] + pads_end[d] (each must be >= 0), row-major in `out`.
 * value_bits: the constant's bytes in its low elem_size bytes (little endian: fp16 bits for
 * fp16, bf16 bits (the top half of the fp32 bits, rounded to nearest even) for bf16). reflect/edge/wrap need a non-empty kept range along every dim that is padded.
 * For NHWC8 data pass the physical (N, H, W, Cp) shape with zero pads on the channel dim: the
 * padded channels stay zero in every mode. */
tci_status kern_pad(void *out, const void *in, int rank, const int64_t *in_dims,
                    const int64_t *pads_begin, const int64_t *pads_end, kern_pad_mode mode,
                    uint64_t value_bits, int elem_size, cudaStream_t stream);

/* dst[0..count) = value: the low elem_size (1, 2, 4 or 8) bytes of value_bits, little endian. */
tci_status kern_fill(void *dst, int64_t count, int elem_size, uint64_t value_bits,
                     cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
