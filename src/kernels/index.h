/* Index kernels on device buffers: GatherElements, ScatterElements, ScatterND, OneHot, and
 * Trilu's masking. Tensors are dense row-major; indices are int32 (index_is_int32 != 0) or
 * int64, on the device.
 *
 * A negative index counts from the end of its axis. One still outside [0, dim) never reads or
 * writes out of bounds: a gather clamps it (zero when the axis is empty), a scatter skips that
 * update; either way, when error_flag (a device int, may be NULL) is given, 1 is stored there.
 * The caller zeroes it beforehand and checks it afterwards.
 *
 * Every launcher validates its arguments, enqueues work on `stream` and returns without
 * synchronising (capturable into a CUDA graph); a launch failure is TCI_ERR_CUDA with the call in
 * tci_last_error(). Empty work enqueues nothing. No state is kept between calls. */
#ifndef TCI_KERNELS_INDEX_H
#define TCI_KERNELS_INDEX_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_INDEX_MAX_RANK 6

/* How a scatter combines an update u with the element x it lands on: u, x + u, x * u, max, min.
 * Float storage (fp16, bf16) combines in fp32 and rounds once; max and min propagate NaN. */
typedef enum kern_scatter_reduce {
    KERN_SCATTER_NONE = 0,
    KERN_SCATTER_ADD,
    KERN_SCATTER_MUL,
    KERN_SCATTER_MAX,
    KERN_SCATTER_MIN,
} kern_scatter_reduce;

/* out[i] = data[i with coordinate `axis` replaced by indices[i]]. data has `rank`
 * (1..KERN_INDEX_MAX_RANK) dims data_dims; indices and out have index_dims, each at most
 * data_dims along the other axes. Elements of elem_size (1, 2, 4, 8) bytes. */
tci_status kern_gather_elements(void *out, const void *data, const void *indices,
                                int index_is_int32, int rank, const int64_t *data_dims,
                                const int64_t *index_dims, int axis, int elem_size,
                                int *error_flag, cudaStream_t stream);

/* out = data (copied unless out == data; they must not otherwise overlap), then for every
 * element i of indices, in row-major order: out[i with coordinate `axis` replaced by
 * indices[i]] = reduce(that element, updates[i]). updates has the indices' dims index_dims.
 * dtype is the storage: FLOAT16, BFLOAT16, FLOAT, INT32, INT64, or (reduce NONE only) BOOL.
 * Updates that land on one element apply in order (one thread walks each line along axis), so
 * the result is deterministic and matches the CPU reference. */
tci_status kern_scatter_elements(void *out, const void *data, const void *indices,
                                 int index_is_int32, const void *updates, int rank,
                                 const int64_t *data_dims, const int64_t *index_dims, int axis,
                                 kern_scatter_reduce reduce, tci_dtype dtype, int *error_flag,
                                 cudaStream_t stream);

/* out = data (as above), then for u in 0..num_updates, in order: the slice of out at the k-tuple
 * indices[u*k .. u*k+k) (k <= rank; the slice has dims data_dims[k..rank)) is combined with
 * updates[u*slice .. (u+1)*slice). One thread per slice element walks the updates in order. */
tci_status kern_scatter_nd(void *out, const void *data, const void *indices, int index_is_int32,
                           const void *updates, int rank, const int64_t *data_dims, int k,
                           int64_t num_updates, kern_scatter_reduce reduce, tci_dtype dtype,
                           int *error_flag, cudaStream_t stream);

/* out = in over (batch, rows, cols), with zero (all bits clear) where the column minus the row is
 * below k (upper) or above k (lower). k_device, when not NULL, is a device int64 read in place of
 * k (a diagonal computed at run time). */
tci_status kern_trilu(void *out, const void *in, int64_t batch, int64_t rows, int64_t cols,
                      int64_t k, const int64_t *k_device, int upper, int elem_size,
                      cudaStream_t stream);

/* out viewed as (outer, depth, inner): on where indices[o * inner + i] (negative adds depth)
 * equals the depth position, off elsewhere (also for an index outside [-depth, depth)).
 * off_bits and on_bits hold the values' bytes in their low elem_size bytes. */
tci_status kern_one_hot(void *out, const void *indices, int index_is_int32, int64_t outer,
                        int64_t depth, int64_t inner, uint64_t off_bits, uint64_t on_bits,
                        int elem_size, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
