// Data-movement kernels (strided copy, Gather, Pad, fill): raw elements of 1-8 bytes, widened to
// 16-byte vectors wherever the layout and alignment allow; see copy.h for the contracts.
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "kernels/copy.h"
// util/status.h has no extern "C" guard of its own; cuda_check.h includes it after this
extern "C" {
#include "util/status.h"
}
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"

using namespace kern_util;

namespace {

constexpr int kMaxRank = KERN_COPY_MAX_RANK;
constexpr int kTile = 32;
constexpr int kTileRows = 8;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = 1 << 20; // beyond this, threads loop; keeps launches cheap to size

bool valid_elem_size(int s) { return s == 1 || s == 2 || s == 4 || s == 8; }

int64_t abs64(int64_t a) { return a < 0 ? -a : a; }

// Widest power-of-two vector (<= 16 bytes, a multiple of elem_size) that divides every byte
// quantity given and both addresses.
int vector_bytes(int elem_size, const void *a, const void *b, const int64_t *byte_counts, int n) {
    for (int v = 16; v > elem_size; v /= 2) {
        bool ok = (uintptr_t)a % v == 0 && (uintptr_t)b % v == 0;
        for (int i = 0; ok && i < n; i++) ok = byte_counts[i] % v == 0;
        if (ok) return v;
    }
    return elem_size;
}

// ---------------------------------------------------------------- strided copy

struct RowsDesc {
    int outer_rank; // dims before the innermost
    int64_t outer_shape[kMaxRank];
    int64_t outer_dst[kMaxRank];
    int64_t outer_src[kMaxRank];
    int64_t rows; // product of outer_shape
    int64_t len;  // innermost extent
    int64_t dst_inner, src_inner;
};

// One row (all outer indices fixed) per threadIdx.y; the threads of x walk the innermost dim.
template <typename T>
__global__ void copy_rows_kernel(T *__restrict__ dst, const T *__restrict__ src, RowsDesc d) {
    for (int64_t row = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; row < d.rows;
         row += (int64_t)gridDim.y * blockDim.y) {
        int64_t r = row, doff = 0, soff = 0;
#pragma unroll
        for (int k = kMaxRank - 1; k >= 0; k--) {
            if (k >= d.outer_rank) continue;
            int64_t q = div_fast(r, d.outer_shape[k]);
            int64_t i = r - q * d.outer_shape[k];
            r = q;
            doff += i * d.outer_dst[k];
            soff += i * d.outer_src[k];
        }
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.len;
             i += (int64_t)gridDim.x * blockDim.x)
            dst[doff + i * d.dst_inner] = src[soff + i * d.src_inner];
    }
}

// Rows whose source is one element (Expand along the innermost dim): each row reads its element
// once and writes it as V-wide vectors of that element repeated.
template <typename E, typename V>
__global__ void broadcast_rows_kernel(V *__restrict__ dst, const E *__restrict__ src, RowsDesc d) {
    constexpr int kCopies = sizeof(V) / sizeof(E);
    for (int64_t row = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; row < d.rows;
         row += (int64_t)gridDim.y * blockDim.y) {
        int64_t r = row, doff = 0, soff = 0;
#pragma unroll
        for (int k = kMaxRank - 1; k >= 0; k--) {
            if (k >= d.outer_rank) continue;
            int64_t q = div_fast(r, d.outer_shape[k]);
            int64_t i = r - q * d.outer_shape[k];
            r = q;
            doff += i * d.outer_dst[k];
            soff += i * d.outer_src[k];
        }
        const E e = src[soff];
        E lanes[kCopies];
#pragma unroll
        for (int c = 0; c < kCopies; c++) lanes[c] = e;
        V v;
        memcpy(&v, lanes, sizeof v);
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < d.len;
             i += (int64_t)gridDim.x * blockDim.x)
            dst[doff + i] = v;
    }
}

struct TileDesc {
    int64_t len_i, src_i;          // innermost dim: dst stride 1
    int64_t len_j, dst_j, src_j;   // the dim along which src is contiguous (src_j == +-1)
    int rest_rank;
    int64_t rest_shape[kMaxRank];
    int64_t rest_dst[kMaxRank];
    int64_t rest_src[kMaxRank];
    int64_t rest; // product of rest_shape
};

// Transposing copy: a 32x32 tile is read along j (coalesced in src) and written along i
// (coalesced in dst) through shared memory. Loop bounds depend on block indices only, so every
// thread of a block reaches the same __syncthreads.
template <typename T>
__global__ void copy_tile_kernel(T *__restrict__ dst, const T *__restrict__ src, TileDesc d) {
    __shared__ T tile[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t z = blockIdx.z; z < d.rest; z += gridDim.z) {
        int64_t r = z, doff = 0, soff = 0;
#pragma unroll
        for (int k = kMaxRank - 1; k >= 0; k--) {
            if (k >= d.rest_rank) continue;
            int64_t q = div_fast(r, d.rest_shape[k]);
            int64_t i = r - q * d.rest_shape[k];
            r = q;
            doff += i * d.rest_dst[k];
            soff += i * d.rest_src[k];
        }
        for (int64_t jb = (int64_t)blockIdx.y * kTile; jb < d.len_j; jb += (int64_t)gridDim.y * kTile) {
            for (int64_t ib = (int64_t)blockIdx.x * kTile; ib < d.len_i;
                 ib += (int64_t)gridDim.x * kTile) {
#pragma unroll
                for (int k = 0; k < kTile; k += kTileRows) {
                    int64_t i = ib + ty + k, j = jb + tx;
                    if (i < d.len_i && j < d.len_j)
                        tile[ty + k][tx] = src[soff + i * d.src_i + j * d.src_j];
                }
                __syncthreads();
#pragma unroll
                for (int k = 0; k < kTile; k += kTileRows) {
                    int64_t j = jb + ty + k, i = ib + tx;
                    if (i < d.len_i && j < d.len_j) dst[doff + i + j * d.dst_j] = tile[tx][ty + k];
                }
                __syncthreads();
            }
        }
    }
}

template <typename T>
tci_status launch_rows(void *dst, const void *src, const RowsDesc &d, cudaStream_t stream) {
    int bx = 1;
    while (bx < 256 && bx < d.len) bx *= 2;
    int by = 256 / bx;
    dim3 block((unsigned)bx, (unsigned)by);
    dim3 grid((unsigned)min64(ceil_div(d.len, bx), kMaxGridX),
              (unsigned)min64(ceil_div(d.rows, by), kMaxGridY));
    copy_rows_kernel<T><<<grid, block, 0, stream>>>((T *)dst, (const T *)src, d);
    KERN_LAUNCH_CHECK("copy_rows_kernel");
    return TCI_OK;
}

template <typename T>
tci_status launch_tile(void *dst, const void *src, const TileDesc &d, cudaStream_t stream) {
    dim3 block(kTile, kTileRows);
    dim3 grid((unsigned)min64(ceil_div(d.len_i, kTile), kMaxGridX),
              (unsigned)min64(ceil_div(d.len_j, kTile), kMaxGridY), (unsigned)min64(d.rest, kMaxGridY));
    copy_tile_kernel<T><<<grid, block, 0, stream>>>((T *)dst, (const T *)src, d);
    KERN_LAUNCH_CHECK("copy_tile_kernel");
    return TCI_OK;
}

tci_status dispatch_rows(int bytes, void *dst, const void *src, const RowsDesc &d,
                         cudaStream_t stream) {
    switch (bytes) {
    case 1: return launch_rows<uint8_t>(dst, src, d, stream);
    case 2: return launch_rows<uint16_t>(dst, src, d, stream);
    case 4: return launch_rows<uint32_t>(dst, src, d, stream);
    case 8: return launch_rows<uint2>(dst, src, d, stream);
    default: return launch_rows<uint4>(dst, src, d, stream);
    }
}

template <typename E, typename V>
tci_status launch_broadcast(void *dst, const void *src, const RowsDesc &d, cudaStream_t stream) {
    if constexpr (sizeof(V) < sizeof(E)) // vector_bytes never picks a width below the element
        return status_error(TCI_ERR_INTERNAL, "kern_strided_copy: vector narrower than element");
    int bx = 1;
    while (bx < 256 && bx < d.len) bx *= 2;
    int by = 256 / bx;
    dim3 block((unsigned)bx, (unsigned)by);
    dim3 grid((unsigned)min64(ceil_div(d.len, bx), kMaxGridX),
              (unsigned)min64(ceil_div(d.rows, by), kMaxGridY));
    if constexpr (sizeof(V) >= sizeof(E))
        broadcast_rows_kernel<E, V><<<grid, block, 0, stream>>>((V *)dst, (const E *)src, d);
    KERN_LAUNCH_CHECK("broadcast_rows_kernel");
    return TCI_OK;
}

// Vector width v (bytes) for elements of elem bytes; v is a multiple of elem.
template <typename E>
tci_status dispatch_broadcast_elem(int v, void *dst, const void *src, const RowsDesc &d,
                                   cudaStream_t stream) {
    switch (v) {
    case 2: return launch_broadcast<E, uint16_t>(dst, src, d, stream);
    case 4: return launch_broadcast<E, uint32_t>(dst, src, d, stream);
    case 8: return launch_broadcast<E, uint2>(dst, src, d, stream);
    default: return launch_broadcast<E, uint4>(dst, src, d, stream);
    }
}

tci_status dispatch_broadcast(int elem, int v, void *dst, const void *src, const RowsDesc &d,
                              cudaStream_t stream) {
    switch (elem) {
    case 1: return dispatch_broadcast_elem<uint8_t>(v, dst, src, d, stream);
    case 2: return dispatch_broadcast_elem<uint16_t>(v, dst, src, d, stream);
    case 4: return dispatch_broadcast_elem<uint32_t>(v, dst, src, d, stream);
    default: return dispatch_broadcast_elem<uint2>(v, dst, src, d, stream);
    }
}

tci_status dispatch_tile(int bytes, void *dst, const void *src, const TileDesc &d,
                         cudaStream_t stream) {
    switch (bytes) {
    case 1: return launch_tile<uint8_t>(dst, src, d, stream);
    case 2: return launch_tile<uint16_t>(dst, src, d, stream);
    case 4: return launch_tile<uint32_t>(dst, src, d, stream);
    default: return launch_tile<uint2>(dst, src, d, stream);
    }
}

// ---------------------------------------------------------------- gather

template <typename T, typename Index>
__global__ void gather_kernel(T *__restrict__ out, const T *__restrict__ data,
                              const Index *__restrict__ indices, int64_t total, int64_t inner,
                              int64_t num_indices, int64_t axis_dim, int *error_flag) {
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = div_fast(e, inner);
        int64_t k = e - t * inner;
        int64_t o = div_fast(t, num_indices);
        int64_t q = t - o * num_indices;
        int64_t idx = (int64_t)indices[q];
        if (idx < 0) idx += axis_dim;
        if (idx < 0 || idx >= axis_dim) {
            if (error_flag) *error_flag = 1;
            if (axis_dim == 0) {
                out[e] = T{};
                continue;
            }
            idx = idx < 0 ? 0 : axis_dim - 1;
        }
        out[e] = data[(o * axis_dim + idx) * inner + k];
    }
}

template <typename T>
tci_status launch_gather(void *out, const void *data, const void *indices, int index_is_int32,
                         int64_t total, int64_t inner, int64_t num_indices, int64_t axis_dim,
                         int *error_flag, cudaStream_t stream) {
    int block = 256;
    unsigned grid = (unsigned)min64(ceil_div(total, block), kMaxGridX);
    if (index_is_int32)
        gather_kernel<T, int32_t><<<grid, block, 0, stream>>>(
            (T *)out, (const T *)data, (const int32_t *)indices, total, inner, num_indices,
            axis_dim, error_flag);
    else
        gather_kernel<T, int64_t><<<grid, block, 0, stream>>>(
            (T *)out, (const T *)data, (const int64_t *)indices, total, inner, num_indices,
            axis_dim, error_flag);
    KERN_LAUNCH_CHECK("gather_kernel");
    return TCI_OK;
}

// ---------------------------------------------------------------- pad

struct PadDim {
    int64_t out_dim, in_stride, lead, crop, kept;
};

struct PadDesc {
    int rank; // the last dim is the one walked by threadIdx.x
    int mode;
    PadDim dim[kMaxRank];
    int64_t rows; // product of out_dim over all but the last
    uint4 value;  // the constant replicated over 16 bytes
};

// Input index along one dim for output index o, or -1 where the constant is written.
__device__ __forceinline__ int64_t pad_map(const PadDim &p, int mode, int64_t o) {
    int64_t j = o - p.lead;
    if (j >= 0 && j < p.kept) return j + p.crop;
    switch (mode) {
    case KERN_PAD_CONSTANT: return -1;
    case KERN_PAD_EDGE: j = j < 0 ? 0 : p.kept - 1; break;
    case KERN_PAD_WRAP: j = ((j % p.kept) + p.kept) % p.kept; break;
    default: // reflect
        if (p.kept == 1) {
            j = 0;
        } else {
            int64_t period = 2 * (p.kept - 1);
            j = ((j % period) + period) % period;
            if (j >= p.kept) j = period - j;
        }
        break;
    }
    return j + p.crop;
}

template <typename T>
__global__ void pad_kernel(T *__restrict__ out, const T *__restrict__ in, PadDesc d) {
    const PadDim &last = d.dim[d.rank - 1];
    T value;
    memcpy(&value, &d.value, sizeof(T));
    for (int64_t row = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; row < d.rows;
         row += (int64_t)gridDim.y * blockDim.y) {
        int64_t r = row, soff = 0;
        bool outside = false;
#pragma unroll
        for (int k = kMaxRank - 2; k >= 0; k--) {
            if (k >= d.rank - 1) continue;
            int64_t q = div_fast(r, d.dim[k].out_dim);
            int64_t i = r - q * d.dim[k].out_dim;
            r = q;
            int64_t j = pad_map(d.dim[k], d.mode, i);
            if (j < 0) outside = true;
            soff += j * d.dim[k].in_stride;
        }
        T *orow = out + row * last.out_dim;
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < last.out_dim;
             i += (int64_t)gridDim.x * blockDim.x) {
            int64_t j = outside ? -1 : pad_map(last, d.mode, i);
            orow[i] = j < 0 ? value : in[soff + j];
        }
    }
}

template <typename T>
tci_status launch_pad(void *out, const void *in, const PadDesc &d, cudaStream_t stream) {
    int64_t len = d.dim[d.rank - 1].out_dim;
    int bx = 1;
    while (bx < 256 && bx < len) bx *= 2;
    int by = 256 / bx;
    dim3 block((unsigned)bx, (unsigned)by);
    dim3 grid((unsigned)min64(ceil_div(len, bx), kMaxGridX),
              (unsigned)min64(ceil_div(d.rows, by), kMaxGridY));
    pad_kernel<T><<<grid, block, 0, stream>>>((T *)out, (const T *)in, d);
    KERN_LAUNCH_CHECK("pad_kernel");
    return TCI_OK;
}

// ---------------------------------------------------------------- fill

template <typename T>
__global__ void fill_kernel(T *__restrict__ dst, int64_t num_vectors, int64_t tail, uint4 pattern) {
    T value;
    memcpy(&value, &pattern, sizeof(T));
    uint4 *vec = (uint4 *)dst;
    T *rest = (T *)(vec + num_vectors);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < num_vectors + tail;
         i += (int64_t)gridDim.x * blockDim.x) {
        if (i < num_vectors) vec[i] = pattern;
        else rest[i - num_vectors] = value;
    }
}

template <typename T>
tci_status launch_fill(void *dst, int64_t num_vectors, int64_t tail, uint4 pattern,
                       cudaStream_t stream) {
    int block = 256;
    unsigned grid = (unsigned)min64(ceil_div(num_vectors + tail, block), kMaxGridX);
    fill_kernel<T><<<grid, block, 0, stream>>>((T *)dst, num_vectors, tail, pattern);
    KERN_LAUNCH_CHECK("fill_kernel");
    return TCI_OK;
}

uint4 replicate(uint64_t value_bits, int elem_size) {
    unsigned char bytes[16];
    for (int i = 0; i < 16; i++) bytes[i] = (unsigned char)(value_bits >> (8 * (i % elem_size)));
    uint4 v;
    memcpy(&v, bytes, sizeof v);
    return v;
}

} // namespace

// ---------------------------------------------------------------- blocks (Concat)

namespace {

struct BlocksDesc {
    const void *src[KERN_COPY_MAX_BLOCKS];
    int64_t rows[KERN_COPY_MAX_BLOCKS], len[KERN_COPY_MAX_BLOCKS]; // len in vectors
    int64_t src_ld[KERN_COPY_MAX_BLOCKS], dst_ld[KERN_COPY_MAX_BLOCKS];
    int64_t dst_offset[KERN_COPY_MAX_BLOCKS];
};

// blockIdx.y picks the block; the threads walk its rows x len vectors, grid-stride
template <typename T> __global__ void copy_blocks_kernel(T *__restrict__ dst, BlocksDesc d) {
    const int b = blockIdx.y;
    const T *__restrict__ src = static_cast<const T *>(d.src[b]);
    const int64_t len = d.len[b], total = d.rows[b] * len;
    T *out = dst + d.dst_offset[b];
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / len, c = i - r * len;
        out[r * d.dst_ld[b] + c] = src[r * d.src_ld[b] + c];
    }
}

template <typename T>
tci_status launch_blocks(void *dst, const BlocksDesc &d, int n, int64_t most, cudaStream_t stream) {
    constexpr int kThreads = 256;
    dim3 grid((unsigned)min64(ceil_div(most, kThreads), kMaxGridX), (unsigned)n);
    copy_blocks_kernel<T><<<grid, kThreads, 0, stream>>>((T *)dst, d);
    KERN_LAUNCH_CHECK("copy_blocks_kernel");
    return TCI_OK;
}

} // namespace

extern "C" tci_status kern_copy_blocks(void *dst, const void *const *srcs,
                                       const kern_copy_block *blocks, int num_blocks,
                                       int elem_size, cudaStream_t stream) {
    if (!blocks || !srcs || num_blocks < 0 || num_blocks > KERN_COPY_MAX_BLOCKS)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_copy_blocks: %d blocks (at most %d, with their sources)",
                            num_blocks, KERN_COPY_MAX_BLOCKS);
    if (!valid_elem_size(elem_size))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "kern_copy_blocks: element size %d is not 1, 2, 4 or 8", elem_size);
    // the widest vector every block allows: lengths, strides, offsets and addresses
    int v = 16;
    int n = 0;
    for (int b = 0; b < num_blocks; b++) {
        const kern_copy_block *k = &blocks[b];
        if (k->rows < 0 || k->len < 0 || k->src_ld < k->len || k->dst_ld < k->len ||
            k->dst_offset < 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                                "kern_copy_blocks: block %d: rows %lld, len %lld, src_ld %lld, "
                                "dst_ld %lld, offset %lld",
                                b, (long long)k->rows, (long long)k->len, (long long)k->src_ld,
                                (long long)k->dst_ld, (long long)k->dst_offset);
        if (!k->rows || !k->len) continue;
        if (!dst || !srcs[b])
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_copy_blocks: NULL buffer");
        const int64_t bytes[4] = {k->len * elem_size, k->src_ld * elem_size,
                                  k->dst_ld * elem_size, k->dst_offset * elem_size};
        const int w = vector_bytes(elem_size, dst, srcs[b], bytes, 4);
        if (w < v) v = w;
        n++;
    }
    if (n == 0) return TCI_OK;
    const int per = v / elem_size;
    BlocksDesc d;
    memset(&d, 0, sizeof d);
    int64_t most = 0;
    int at = 0;
    for (int b = 0; b < num_blocks; b++) {
        const kern_copy_block *k = &blocks[b];
        if (!k->rows || !k->len) continue;
        d.src[at] = srcs[b];
        d.rows[at] = k->rows;
        d.len[at] = k->len / per;
        d.src_ld[at] = k->src_ld / per;
        d.dst_ld[at] = k->dst_ld / per;
        d.dst_offset[at] = k->dst_offset / per;
        if (k->rows * d.len[at] > most) most = k->rows * d.len[at];
        at++;
    }
    switch (v) {
    case 1: return launch_blocks<uint8_t>(dst, d, n, most, stream);
    case 2: return launch_blocks<uint16_t>(dst, d, n, most, stream);
    case 4: return launch_blocks<uint32_t>(dst, d, n, most, stream);
    case 8: return launch_blocks<uint2>(dst, d, n, most, stream);
    default: return launch_blocks<uint4>(dst, d, n, most, stream);
    }
}

// ---------------------------------------------------------------- launchers

extern "C" tci_status kern_strided_copy(void *dst, const void *src, const kern_copy_desc *desc,
                                        cudaStream_t stream) {
    if (!desc) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_strided_copy: desc is NULL");
    if (desc->rank < 0 || desc->rank > kMaxRank)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_strided_copy: rank %d is outside 0..%d",
                         desc->rank, kMaxRank);
    if (!valid_elem_size(desc->elem_size))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_strided_copy: element size %d is not 1, 2, 4 or 8", desc->elem_size);
    for (int d = 0; d < desc->rank; d++)
        if (desc->shape[d] < 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_strided_copy: shape[%d] is %lld", d,
                             (long long)desc->shape[d]);
    for (int d = 0; d < desc->rank; d++)
        if (desc->shape[d] == 0) return TCI_OK;
    int rank = 0;
    int64_t shape[kMaxRank], ds[kMaxRank], ss[kMaxRank];
    for (int d = 0; d < desc->rank; d++) {
        if (desc->shape[d] == 1) continue;
        if (desc->dst_strides[d] == 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "kern_strided_copy: dst stride %d is 0 over an extent of %lld", d,
                             (long long)desc->shape[d]);
        shape[rank] = desc->shape[d];
        ds[rank] = desc->dst_strides[d];
        ss[rank] = desc->src_strides[d];
        rank++;
    }
    if (!dst || !src)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_strided_copy: NULL %s buffer",
                         dst ? "source" : "destination");
    if ((uintptr_t)dst % desc->elem_size || (uintptr_t)src % desc->elem_size)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_strided_copy: buffers not aligned to %d-byte elements",
                         desc->elem_size);
    // innermost = smallest |dst stride|, so that writes coalesce
    for (int i = 1; i < rank; i++)
        for (int k = i; k > 0 && abs64(ds[k - 1]) < abs64(ds[k]); k--) {
            int64_t t;
            t = shape[k], shape[k] = shape[k - 1], shape[k - 1] = t;
            t = ds[k], ds[k] = ds[k - 1], ds[k - 1] = t;
            t = ss[k], ss[k] = ss[k - 1], ss[k - 1] = t;
        }
    for (int i = 1; i < rank; i++)
        if (abs64(ds[i - 1]) == abs64(ds[i]))
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "kern_strided_copy: two dims share dst stride %lld, so writes overlap",
                             (long long)abs64(ds[i]));
    // merge dims contiguous on both sides, from the inside out
    int merged = 0;
    for (int i = rank - 1; i >= 0; i--) {
        if (merged > 0) {
            int in = kMaxRank - merged; // innermost kept so far lives at the back
            if (ds[i] == ds[in] * shape[in] && ss[i] == ss[in] * shape[in]) {
                shape[in] *= shape[i];
                continue;
            }
        }
        merged++;
        int at = kMaxRank - merged;
        shape[at] = shape[i], ds[at] = ds[i], ss[at] = ss[i];
    }
    rank = merged;
    int64_t *sh = shape + kMaxRank - rank, *dst_st = ds + kMaxRank - rank,
            *src_st = ss + kMaxRank - rank;
    if (rank == 0) { // a single element
        rank = 1;
        sh = shape, dst_st = ds, src_st = ss;
        sh[0] = 1, dst_st[0] = 1, src_st[0] = 1;
    }
    int elem = desc->elem_size;
    int last = rank - 1;

    if (dst_st[last] == 1 && src_st[last] == 1) {
        int64_t bytes[2 * kMaxRank + 1];
        int n = 0;
        bytes[n++] = sh[last] * elem;
        for (int d = 0; d < last; d++) bytes[n++] = dst_st[d] * elem, bytes[n++] = src_st[d] * elem;
        int v = vector_bytes(elem, dst, src, bytes, n);
        RowsDesc rd;
        memset(&rd, 0, sizeof rd);
        rd.outer_rank = last;
        rd.rows = 1;
        for (int d = 0; d < last; d++) {
            rd.outer_shape[d] = sh[d];
            rd.outer_dst[d] = dst_st[d] * elem / v;
            rd.outer_src[d] = src_st[d] * elem / v;
            rd.rows *= sh[d];
        }
        rd.len = sh[last] * elem / v;
        rd.dst_inner = rd.src_inner = 1;
        return dispatch_rows(v, dst, src, rd, stream);
    }

    if (dst_st[last] == 1 && src_st[last] == 0) { // innermost broadcast: vector stores
        int64_t bytes[kMaxRank + 1];
        int n = 0;
        bytes[n++] = sh[last] * elem;
        for (int d = 0; d < last; d++) bytes[n++] = dst_st[d] * elem;
        int v = vector_bytes(elem, dst, dst, bytes, n);
        if (v > elem) {
            RowsDesc rd;
            memset(&rd, 0, sizeof rd);
            rd.outer_rank = last;
            rd.rows = 1;
            for (int d = 0; d < last; d++) {
                rd.outer_shape[d] = sh[d];
                rd.outer_dst[d] = dst_st[d] * elem / v; // in vectors
                rd.outer_src[d] = src_st[d];           // in elements
                rd.rows *= sh[d];
            }
            rd.len = sh[last] * elem / v;
            return dispatch_broadcast(elem, v, dst, src, rd, stream);
        }
    }

    int j = -1; // a dim along which the source is contiguous: transpose through shared memory
    if (dst_st[last] == 1 && abs64(src_st[last]) != 1 && sh[last] >= 8)
        for (int d = last - 1; d >= 0; d--)
            if (abs64(src_st[d]) == 1 && sh[d] >= 8) {
                j = d;
                break;
            }
    if (j >= 0) {
        TileDesc td;
        memset(&td, 0, sizeof td);
        td.len_i = sh[last], td.src_i = src_st[last];
        td.len_j = sh[j], td.dst_j = dst_st[j], td.src_j = src_st[j];
        td.rest = 1;
        for (int d = 0; d < last; d++) {
            if (d == j) continue;
            td.rest_shape[td.rest_rank] = sh[d];
            td.rest_dst[td.rest_rank] = dst_st[d];
            td.rest_src[td.rest_rank] = src_st[d];
            td.rest_rank++;
            td.rest *= sh[d];
        }
        return dispatch_tile(elem, dst, src, td, stream);
    }

    RowsDesc rd;
    memset(&rd, 0, sizeof rd);
    rd.outer_rank = last;
    rd.rows = 1;
    for (int d = 0; d < last; d++) {
        rd.outer_shape[d] = sh[d];
        rd.outer_dst[d] = dst_st[d];
        rd.outer_src[d] = src_st[d];
        rd.rows *= sh[d];
    }
    rd.len = sh[last];
    rd.dst_inner = dst_st[last];
    rd.src_inner = src_st[last];
    return dispatch_rows(elem, dst, src, rd, stream);
}

extern "C" tci_status kern_gather(void *out, const void *data, const void *indices,
                                  int index_is_int32, int64_t outer, int64_t axis_dim,
                                  int64_t inner, int64_t num_indices, int elem_size,
                                  int *error_flag, cudaStream_t stream) {
    if (!valid_elem_size(elem_size))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_gather: element size %d is not 1, 2, 4 or 8", elem_size);
    if (outer < 0 || axis_dim < 0 || inner < 0 || num_indices < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_gather: negative extent (outer %lld, axis %lld, inner %lld, "
                         "indices %lld)",
                         (long long)outer, (long long)axis_dim, (long long)inner,
                         (long long)num_indices);
    if (outer == 0 || inner == 0 || num_indices == 0) return TCI_OK;
    if (!out || !indices || (!data && axis_dim > 0))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_gather: NULL buffer");
    int64_t row_bytes = inner * elem_size;
    int v = vector_bytes(elem_size, out, data ? data : out, &row_bytes, 1);
    int64_t inner_v = row_bytes / v;
    int64_t total = outer * num_indices * inner_v;
    switch (v) {
    case 1:
        return launch_gather<uint8_t>(out, data, indices, index_is_int32, total, inner_v,
                                      num_indices, axis_dim, error_flag, stream);
    case 2:
        return launch_gather<uint16_t>(out, data, indices, index_is_int32, total, inner_v,
                                       num_indices, axis_dim, error_flag, stream);
    case 4:
        return launch_gather<uint32_t>(out, data, indices, index_is_int32, total, inner_v,
                                       num_indices, axis_dim, error_flag, stream);
    case 8:
        return launch_gather<uint2>(out, data, indices, index_is_int32, total, inner_v,
                                    num_indices, axis_dim, error_flag, stream);
    default:
        return launch_gather<uint4>(out, data, indices, index_is_int32, total, inner_v,
                                    num_indices, axis_dim, error_flag, stream);
    }
}

extern "C" tci_status kern_pad(void *out, const void *in, int rank, const int64_t *in_dims,
                               const int64_t *pads_begin, const int64_t *pads_end,
                               kern_pad_mode mode, uint64_t value_bits, int elem_size,
                               cudaStream_t stream) {
    if (rank < 1 || rank > kMaxRank)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pad: rank %d is outside 1..%d", rank,
                         kMaxRank);
    if (!valid_elem_size(elem_size))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pad: element size %d is not 1, 2, 4 or 8",
                         elem_size);
    if (mode != KERN_PAD_CONSTANT && mode != KERN_PAD_REFLECT && mode != KERN_PAD_EDGE &&
        mode != KERN_PAD_WRAP)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pad: unknown mode %d", (int)mode);
    if (!in_dims || !pads_begin || !pads_end)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pad: NULL dims or pads");
    PadDim dims[kMaxRank];
    int64_t in_stride = 1;
    bool empty = false;
    for (int d = rank - 1; d >= 0; d--) {
        PadDim &p = dims[d];
        if (in_dims[d] < 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pad: in_dims[%d] is %lld", d,
                             (long long)in_dims[d]);
        p.out_dim = in_dims[d] + pads_begin[d] + pads_end[d];
        if (p.out_dim < 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "kern_pad: dim %d: pads %lld and %lld on extent %lld leave %lld", d,
                             (long long)pads_begin[d], (long long)pads_end[d],
                             (long long)in_dims[d], (long long)p.out_dim);
        p.crop = pads_begin[d] < 0 ? -pads_begin[d] : 0;
        p.lead = pads_begin[d] > 0 ? pads_begin[d] : 0;
        p.kept = in_dims[d] - p.crop - (pads_end[d] < 0 ? -pads_end[d] : 0);
        p.in_stride = in_stride;
        in_stride *= in_dims[d];
        if (p.out_dim == 0) empty = true;
    }
    if (empty) return TCI_OK;
    for (int d = 0; d < rank; d++)
        if (mode != KERN_PAD_CONSTANT && dims[d].kept <= 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "kern_pad: dim %d keeps no elements to extend in %s mode", d,
                             mode == KERN_PAD_EDGE ? "edge" : mode == KERN_PAD_WRAP ? "wrap" : "reflect");
    if (!out || (!in && in_stride > 0))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_pad: NULL buffer");

    // merge runs of unpadded dims (the layouts are row-major on both sides)
    PadDesc pd;
    memset(&pd, 0, sizeof pd);
    pd.mode = (int)mode;
    int n = 0;
    for (int d = 0; d < rank; d++) {
        bool plain = dims[d].lead == 0 && dims[d].crop == 0 && dims[d].kept == dims[d].out_dim;
        if (n > 0) {
            PadDim &prev = pd.dim[n - 1];
            bool prev_plain = prev.lead == 0 && prev.crop == 0 && prev.kept == prev.out_dim;
            if (plain && prev_plain) {
                prev.out_dim *= dims[d].out_dim;
                prev.kept = prev.out_dim;
                prev.in_stride = dims[d].in_stride;
                continue;
            }
        }
        pd.dim[n++] = dims[d];
    }
    pd.rank = n;
    int elem = elem_size, v = elem;
    PadDim &last = pd.dim[n - 1];
    if (last.lead == 0 && last.crop == 0 && last.kept == last.out_dim) {
        // innermost rows copied whole: widen the element
        int64_t bytes[2] = {last.out_dim * elem, 0};
        v = vector_bytes(elem, out, in ? in : out, bytes, 1);
        if (v != elem) {
            int f = v / elem;
            last.out_dim /= f;
            last.kept /= f;
            for (int d = 0; d < n - 1; d++) pd.dim[d].in_stride /= f;
        }
    }
    pd.rows = 1;
    for (int d = 0; d < n - 1; d++) pd.rows *= pd.dim[d].out_dim;
    pd.value = replicate(value_bits, elem);
    switch (v) {
    case 1: return launch_pad<uint8_t>(out, in, pd, stream);
    case 2: return launch_pad<uint16_t>(out, in, pd, stream);
    case 4: return launch_pad<uint32_t>(out, in, pd, stream);
    case 8: return launch_pad<uint2>(out, in, pd, stream);
    default: return launch_pad<uint4>(out, in, pd, stream);
    }
}

extern "C" tci_status kern_fill(void *dst, int64_t count, int elem_size, uint64_t value_bits,
                                cudaStream_t stream) {
    if (!valid_elem_size(elem_size))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_fill: element size %d is not 1, 2, 4 or 8", elem_size);
    if (count < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_fill: count %lld is negative",
                         (long long)count);
    if (count == 0) return TCI_OK;
    if (!dst) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_fill: dst is NULL");
    if ((uintptr_t)dst % elem_size != 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "kern_fill: dst is not aligned to its %d-byte elements", elem_size);
    uint4 pattern = replicate(value_bits, elem_size);
    unsigned char bytes[16];
    memcpy(bytes, &pattern, sizeof bytes);
    bool one_byte = true;
    for (int i = 1; i < elem_size; i++) one_byte = one_byte && bytes[i] == bytes[0];
    if (one_byte) {
        KERN_CUDA_CHECK(cudaMemsetAsync(dst, bytes[0], (size_t)count * elem_size, stream));
        return TCI_OK;
    }
    int64_t num_vectors = 0, tail = count;
    if ((uintptr_t)dst % 16 == 0) {
        num_vectors = count * elem_size / 16;
        tail = count - num_vectors * (16 / elem_size);
    }
    switch (elem_size) {
    case 1: return launch_fill<uint8_t>(dst, num_vectors, tail, pattern, stream);
    case 2: return launch_fill<uint16_t>(dst, num_vectors, tail, pattern, stream);
    case 4: return launch_fill<uint32_t>(dst, num_vectors, tail, pattern, stream);
    default: return launch_fill<uint2>(dst, num_vectors, tail, pattern, stream);
    }
}
