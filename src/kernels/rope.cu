// RotaryEmbedding: one thread per element of x (grid-stride), reading its pair's partner and the
// cache row of its token; see rope.h for the contract.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"
#include "kernels/rope.h"

using namespace kern_util;

namespace {

struct RopeGeom {
    int64_t heads, seq, head, half, cache_batch, positions, ids_batch, total;
    bool heads_first, interleaved, ids_int32;
};

// The cache row of (sequence b, token s): the token's own row, or the one its position id names
// (clamped into the caches, the flag raised, when outside them).
__device__ __forceinline__ int64_t cache_row(const RopeGeom &g, const void *ids, int64_t b,
                                             int64_t s, int *error_flag) {
    if (!ids) return (g.cache_batch == 1 ? 0 : b) * g.seq + s;
    const int64_t at = (g.ids_batch == 1 ? 0 : b) * g.seq + s;
    int64_t id = g.ids_int32 ? (int64_t) static_cast<const int32_t *>(ids)[at]
                             : static_cast<const int64_t *>(ids)[at];
    if (id < 0 || id >= g.positions) {
        if (error_flag) *error_flag = 1;
        id = id < 0 ? 0 : g.positions - 1;
    }
    return id;
}

template <typename T>
__global__ void rope_kernel(const T *x, const T *cos_cache, const T *sin_cache, const void *ids,
                            T *y, RopeGeom g, int *error_flag) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < g.total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t d = e % g.head;
        if (d >= 2 * g.half) {
            y[e] = x[e];
            continue;
        }
        // (batch, token) of the element: 4-D (b, h, s, d), 3-D (b, s, h, d)
        int64_t rest = e / g.head, b, s;
        if (g.heads_first) {
            s = rest % g.seq;
            b = rest / g.seq / g.heads;
        } else {
            rest /= g.heads;
            s = rest % g.seq;
            b = rest / g.seq;
        }
        bool first;
        int64_t i, partner;
        if (g.interleaved) {
            first = (d & 1) == 0;
            i = d / 2;
            partner = first ? e + 1 : e - 1;
        } else {
            first = d < g.half;
            i = first ? d : d - g.half;
            partner = first ? e + g.half : e - g.half;
        }
        const int64_t row = cache_row(g, ids, b, s, error_flag);
        const float c = to_float(cos_cache[row * g.half + i]);
        const float sn = to_float(sin_cache[row * g.half + i]);
        const float self = to_float(x[e]), other = to_float(x[partner]);
        y[e] = from_float<T>(first ? c * self - sn * other : sn * other + c * self);
    }
}

}  // namespace

extern "C" tci_status kern_rotary_embedding(const kern_rope_desc *d, const void *x,
                                            const void *cos_cache, const void *sin_cache,
                                            const void *position_ids, void *y, int *error_flag,
                                            cudaStream_t stream) {
    if (!d) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_rotary_embedding: NULL descriptor");
    Storage st = Storage::kHalf;
    TRY_STATUS(storage_type("kern_rotary_embedding", d->dtype, &st));
    if (d->batch < 0 || d->heads < 1 || d->seq < 0 || d->head_size < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_rotary_embedding: bad extents (batch %lld, heads %lld, seq "
                            "%lld, head size %lld)",
                            (long long)d->batch, (long long)d->heads, (long long)d->seq,
                            (long long)d->head_size);
    const int64_t total = d->batch * d->heads * d->seq * d->head_size;
    if (total == 0) return TCI_OK;
    if (d->rotary_dim < 2 || d->rotary_dim % 2 || d->rotary_dim > d->head_size)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_rotary_embedding: rotary_dim %lld must be even, at least 2 and "
                            "at most the head size %lld",
                            (long long)d->rotary_dim, (long long)d->head_size);
    const int64_t by_batch = position_ids ? d->ids_batch : d->cache_batch;
    if (by_batch != 1 && by_batch != d->batch)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_rotary_embedding: %s batch %lld is neither 1 nor %lld",
                            position_ids ? "the position ids'" : "the caches'",
                            (long long)by_batch, (long long)d->batch);
    if (position_ids && d->positions < 1)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_rotary_embedding: the caches hold %lld positions",
                            (long long)d->positions);
    if (!x || !y || !cos_cache || !sin_cache)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_rotary_embedding: NULL buffer");
    RopeGeom g;
    g.heads = d->heads;
    g.seq = d->seq;
    g.head = d->head_size;
    g.half = d->rotary_dim / 2;
    g.cache_batch = d->cache_batch;
    g.positions = d->positions;
    g.ids_batch = d->ids_batch;
    g.total = total;
    g.heads_first = d->heads_first != 0;
    g.interleaved = d->interleaved != 0;
    g.ids_int32 = d->ids_int32 != 0;
    const int block = 256;
    const unsigned grid = blocks_for(total, block);
    return with_storage(st, [&](auto tag) {
        using T = typename decltype(tag)::type;
        rope_kernel<T><<<grid, block, 0, stream>>>((const T *)x, (const T *)cos_cache,
                                                   (const T *)sin_cache, position_ids, (T *)y, g,
                                                   error_flag);
        KERN_LAUNCH_CHECK("rope_kernel");
        return TCI_OK;
    });
}
