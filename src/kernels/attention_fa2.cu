// The FlashAttention-2-style kernel of kern_attention (attention_fa2.h): one block per 64 query
// rows of one (batch, head), four warps of 16 rows each, and per tile of 64 keys:
//   S = Q K^T   mma.sync m16n8k16 (fp16 or bf16 in, fp32 accumulate), Q's fragments loaded once
//               by ldmatrix and held in registers for the whole block, K's by ldmatrix x4;
//   softmax     online, in fp32 registers: each thread holds 2 rows x 16 keys of S, the row
//               maximum is reduced over the 4 lanes of a quad, the row sum stays a per-thread
//               partial until the end; base 2 with the scale prescaled by log2(e);
//   O += P V    P converted from S's accumulator layout to A fragments in registers (no shared
//               memory), V's fragments by ldmatrix x4 .trans, O accumulated in registers.
// K and V tiles are double-buffered in shared memory with cp.async (the next tile loads while
// this one is computed); positions past the sequence lengths are zero-filled by the copy
// (src-size 0). Masks (the tail tile, causal, an additive or keep mask) are applied only on the
// tiles that need them. Y is staged through Q's shared tile, then written through its strides.
//
// Why 64 rows and 4 warps, not 128 and 8: a warp's registers are the same either way (16 rows:
// Q fragments D/4, S 32, O D/2 fp32 per thread; ptxas: min_blocks below), so the choice is the
// block's granularity. 197 queries (ViT) fill 4 tiles of 64 or 2 of 128 with the same padding,
// and 64-row blocks give twice the blocks for small batches and finer causal work.
#include "kernels/attention_fa2.h"
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"

using kern_util::to_float;

namespace {

constexpr int kBlockM = 64;  // query rows per block
constexpr int kBlockN = 64;  // keys per tile
constexpr int kWarps = 4;    // 16 query rows each
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;
// the base-2 score of a key keep drops with keep_row_mean (attention.cu's rule)
constexpr float kDroppedScore = -1e30f;

static_assert(kBlockM == kWarps * 16, "one m16 row of fragments per warp");
static_assert(kBlockM == kBlockN, "Q, K and V tiles share one shape");

// Shared memory for head dim D: Q, then K and V in two stages each, rows padded by 8 elements
// (16 bytes) so that the 8 row addresses of an ldmatrix fall on different bank groups and every
// 16-byte chunk stays 16-byte aligned for cp.async.
template <int D> struct Fa2Smem {
    static constexpr int kLd = D + 8;             // elements per row
    static constexpr int kTile = kBlockM * kLd;   // elements per tile
    static constexpr int kBytes = 5 * kTile * 2;  // Q, K[2], V[2]
    static_assert(D % 16 == 0, "head dim in whole k16 steps and ldmatrix x4 pairs");
    static_assert((kLd * 2) % 16 == 0, "16-byte aligned rows");
};

struct Fa2Params {
    const void *q, *k, *v, *mask;
    const unsigned char *keep;
    void *y;
    int64_t heads, q_len, kv_len, tiles_m;
    int64_t qs[4], ks[4], vs[4], ms[4], ps[4], ys[4];
    int64_t mask_mod; // the mask's batch index is b % mask_mod (0: b)
    float scale_log2; // scale * log2(e): the softmax runs in base 2
    float dropped;    // the base-2 score of a key keep drops: -inf, or kDroppedScore
    bool causal, y_vec;
};

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; zero-filled when !valid (nothing is read then)
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid) {
    const int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// c += a (16 x 16, row) b (16 x 8, col), fp32 accumulate
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1);

template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const uint32_t (&a)[4],
                                                 uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4],
                                                        uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// two floats rounded to the storage type, lo in the low half (the lower k or column index)
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);

template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

// 2^x; 2^-inf is +0 exactly, as exp2f's
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// rows [first, first + 64) of a (position, d) view with d stride 1 into a padded shared tile,
// asynchronously; rows at or past `valid` are zero-filled
template <typename T, int D>
__device__ __forceinline__ void load_tile_async(T *dst, const T *src, int64_t row_stride,
                                                int first, int valid) {
    constexpr int kChunks = D / 8; // 16-byte chunks per row
    constexpr int kLd = Fa2Smem<D>::kLd;
    static_assert((kBlockM * kChunks) % kThreads == 0, "whole chunks per thread");
#pragma unroll
    for (int it = 0; it < kBlockM * kChunks / kThreads; ++it) {
        const int i = it * kThreads + threadIdx.x;
        const int r = i / kChunks, c = (i % kChunks) * 8;
        const bool ok = first + r < valid;
        const T *g = ok ? src + (first + r) * row_stride + c : src;
        cp_async16(smem_addr(dst + r * kLd + c), g, ok);
    }
}

// Blocks per SM the register budget is set for (ptxas -v, sm_90, no spills): D 32: 4 (114
// registers), 64: 3 (152; 4 would cap it at 128 and spill), 80 and 96: 3 (158, 163), 128: 2
// (238).
// Shared memory allows as many (46 KB a block at D 64, 85 KB at 128).
template <int D> constexpr int min_blocks() { return D <= 32 ? 4 : D <= 96 ? 3 : 2; }

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, min_blocks<D>()) attention_fa2_kernel(Fa2Params p) {
    using S = Fa2Smem<D>;
    constexpr int kLd = S::kLd;
    extern __shared__ __align__(128) unsigned char smem[];
    T *sq = reinterpret_cast<T *>(smem);
    T *sk = sq + S::kTile;     // stage s at sk + s * kTile
    T *sv = sk + 2 * S::kTile; // stage s at sv + s * kTile

    // positions fit an int (kern_attention_fa2_applies): 32-bit index math
    const int q_len = (int)p.q_len, kv_len = (int)p.kv_len;
    const int tile = (int)(blockIdx.x % p.tiles_m);
    const int64_t bh = blockIdx.x / p.tiles_m;
    const int64_t b = bh / p.heads, h = bh % p.heads;
    const int m0 = tile * kBlockM;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4; // an accumulator's row (and row + 8) and column pair
    const T *q = static_cast<const T *>(p.q) + b * p.qs[0] + h * p.qs[1];
    const T *k = static_cast<const T *>(p.k) + b * p.ks[0] + h * p.ks[1];
    const T *v = static_cast<const T *>(p.v) + b * p.vs[0] + h * p.vs[1];
    const T *mask = p.mask ? static_cast<const T *>(p.mask) +
                                   (p.mask_mod ? b % p.mask_mod : b) * p.ms[0] + h * p.ms[1]
                             : nullptr;
    const unsigned char *keep = p.keep ? p.keep + b * p.ps[0] + h * p.ps[1] : nullptr;

    int kv_end = kv_len;
    if (p.causal && m0 + kBlockM < kv_end) kv_end = m0 + kBlockM; // no key past the last row
    const int n_tiles = (kv_end + kBlockN - 1) / kBlockN;

    load_tile_async<T, D>(sq, q, p.qs[2], m0, q_len);
    if (n_tiles > 0) {
        load_tile_async<T, D>(sk, k, p.ks[2], 0, kv_len);
        load_tile_async<T, D>(sv, v, p.vs[2], 0, kv_len);
    }
    cp_async_commit();

    // this thread's rows: m0 + warp * 16 + g (r = 0) and + 8 (r = 1)
    const int qrow[2] = {m0 + warp * 16 + g, m0 + warp * 16 + g + 8};
    float o[D / 8][4];
#pragma unroll
    for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}; // base-2 running maximum of each row
    float l_run[2] = {0.0f, 0.0f};           // this thread's part of each row's running sum
    uint32_t qf[D / 16][4];                  // Q's A fragments, loaded at the first tile

    for (int it = 0; it < n_tiles; ++it) {
        const int stage = it & 1;
        if (it + 1 < n_tiles) { // the next tile into the other stage, freed at the last barrier
            const int n1 = (it + 1) * kBlockN;
            load_tile_async<T, D>(sk + (stage ^ 1) * S::kTile, k, p.ks[2], n1, kv_len);
            load_tile_async<T, D>(sv + (stage ^ 1) * S::kTile, v, p.vs[2], n1, kv_len);
            cp_async_commit();
            cp_async_wait<1>(); // this tile (and Q) landed; the next may still be in flight
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (it == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
                ldmatrix_x4(qf[kk], smem_addr(sq + (warp * 16 + lane % 16) * kLd + kk * 16 +
                                              (lane / 16) * 8));
        }

        // S (16 x 64 per warp) = Q_w K^T
        const T *kt = sk + stage * S::kTile;
        float s[kBlockN / 8][4];
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
            for (int nb = 0; nb < kBlockN / 16; ++nb) {
                // matrices: keys +0 / +8 (lane / 16), d +0 / +8 ((lane / 8) % 2)
                uint32_t kb[4];
                ldmatrix_x4(kb, smem_addr(kt + (nb * 16 + (lane / 16) * 8 + lane % 8) * kLd +
                                          kk * 16 + ((lane / 8) % 2) * 8));
                mma16816<T>(s[2 * nb], qf[kk], kb[0], kb[1]);
                mma16816<T>(s[2 * nb + 1], qf[kk], kb[2], kb[3]);
            }
        }

        // base-2 scores, the masks where this tile needs them (attention.cu's rules, in order)
        const int n0 = it * kBlockN;
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[j][e] *= p.scale_log2;
        const bool edge = n0 + kBlockN > kv_len || (p.causal && n0 + kBlockN - 1 > m0) ||
                          mask != nullptr || keep != nullptr;
        if (edge) {
#pragma unroll
            for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int qi = qrow[e / 2];
                    const int kj = n0 + j * 8 + 2 * t + (e % 2);
                    float x = s[j][e];
                    if (kj >= kv_len || qi >= q_len || (p.causal && kj > qi)) {
                        x = -INFINITY;
                    } else if (keep && !keep[qi * p.ps[2] + kj * p.ps[3]]) {
                        x = p.dropped;
                    } else if (mask) {
                        x += to_float(mask[qi * p.ms[2] + kj * p.ms[3]]) * kLog2e;
                    }
                    s[j][e] = x;
                }
        }

        // online softmax per row: the maximum over the quad, rescale, exponentials
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < kBlockN / 8; ++j)
                mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m_run[r], mx);
            // while every score so far is -inf, subtract 0: exp2(-inf) is 0, never NaN
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            const float alpha = fast_exp2(m_run[r] - m_use); // m_run -inf: 0
            m_run[r] = m_new;
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < kBlockN / 8; ++j) {
                s[j][2 * r] = fast_exp2(s[j][2 * r] - m_use);
                s[j][2 * r + 1] = fast_exp2(s[j][2 * r + 1] - m_use);
                sum += s[j][2 * r] + s[j][2 * r + 1];
            }
            l_run[r] = l_run[r] * alpha + sum;
#pragma unroll
            for (int j = 0; j < D / 8; ++j) {
                o[j][2 * r] *= alpha;
                o[j][2 * r + 1] *= alpha;
            }
        }

        // O += P V: P's accumulator layout is the A fragment's, two n8 blocks per k16 step
        const T *vt = sv + stage * S::kTile;
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
            uint32_t a[4];
            a[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
            a[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
            a[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            a[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int db = 0; db < D / 16; ++db) {
                // matrices (transposed): keys +0 / +8 ((lane / 8) % 2), d +0 / +8 (lane / 16)
                uint32_t vb[4];
                ldmatrix_x4_trans(vb, smem_addr(vt + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) *
                                                         kLd +
                                                db * 16 + (lane / 16) * 8));
                mma16816<T>(o[2 * db], a, vb[0], vb[1]);
                mma16816<T>(o[2 * db + 1], a, vb[2], vb[3]);
            }
        }
        __syncthreads(); // every warp is done with this stage before it is refilled
    }
    cp_async_wait<0>(); // no tile at all: Q's copy still lands before its tile is reused
    __syncthreads();

    // Y: this warp's rows through its own rows of Q's tile (read by no other warp), rounded once
    T *so = sq + warp * 16 * kLd;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float l = l_run[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
        for (int j = 0; j < D / 8; ++j)
            *reinterpret_cast<uint32_t *>(so + (g + 8 * r) * kLd + j * 8 + 2 * t) =
                pack2<T>(o[j][2 * r] * inv, o[j][2 * r + 1] * inv);
    }
    __syncwarp();
    T *y = static_cast<T *>(p.y) + b * p.ys[0] + h * p.ys[1];
    constexpr int kChunks = D / 8;
    for (int i = lane; i < 16 * kChunks; i += 32) {
        const int r = i / kChunks, c = (i % kChunks) * 8;
        const int qi = m0 + warp * 16 + r;
        if (qi >= q_len) continue;
        const T *src = so + r * kLd + c;
        if (p.y_vec) {
            *reinterpret_cast<uint4 *>(y + qi * p.ys[2] + c) =
                *reinterpret_cast<const uint4 *>(src);
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) y[qi * p.ys[2] + (c + e) * p.ys[3]] = src[e];
        }
    }
}

template <typename T, int D> tci_status launch(const Fa2Params &p, unsigned blocks,
                                                cudaStream_t stream) {
    const auto kernel = attention_fa2_kernel<T, D>;
    constexpr int kBytes = Fa2Smem<D>::kBytes;
    // a per-function attribute, not stream work: legal while capturing
    KERN_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    kernel<<<blocks, kThreads, kBytes, stream>>>(p);
    KERN_LAUNCH_CHECK("attention_fa2_kernel");
    return TCI_OK;
}

template <typename T> tci_status launch_dim(const Fa2Params &p, int64_t d, unsigned blocks,
                                            cudaStream_t stream) {
    switch (d) {
    case 32: return launch<T, 32>(p, blocks, stream);
    case 64: return launch<T, 64>(p, blocks, stream);
    case 80: return launch<T, 80>(p, blocks, stream);
    case 96: return launch<T, 96>(p, blocks, stream);
    case 128: return launch<T, 128>(p, blocks, stream);
    default:
        return status_error(TCI_ERR_UNSUPPORTED,
                            "kern_attention: head dim %lld has no FA2 kernel (32, 64, 80, 96, "
                            "128)",
                            (long long)d);
    }
}

bool aligned_strides(const int64_t *s) {
    return s[3] == 1 && s[0] % 8 == 0 && s[1] % 8 == 0 && s[2] % 8 == 0;
}

} // namespace

extern "C" bool kern_attention_fa2_applies(const kern_attention_desc *d, const void *q,
                                           const void *k, const void *v) {
    const int64_t hd = d->head_dim;
    // positions in 32-bit index math, with a tile of room
    if (d->q_len > 0x7fffff00LL || d->kv_len > 0x7fffff00LL) return false;
    if (hd != 32 && hd != 64 && hd != 80 && hd != 96 && hd != 128) return false;
    if (d->dtype != TCI_DTYPE_FLOAT16 && d->dtype != TCI_DTYPE_BFLOAT16 &&
        d->dtype != TCI_DTYPE_UNDEFINED)
        return false;
    // cp.async moves 16 bytes: 8 contiguous, 16-byte aligned elements of every row
    return aligned_strides(d->q_strides) && kern_util::aligned16(q) &&
           (d->kv_len == 0 || (aligned_strides(d->k_strides) && aligned_strides(d->v_strides) &&
                               kern_util::aligned16(k) && kern_util::aligned16(v)));
}

extern "C" tci_status kern_attention_fa2(const kern_attention_desc *d, const void *q,
                                         const void *k, const void *v, const void *mask,
                                         const void *keep, void *y, cudaStream_t stream) {
    if (!kern_attention_fa2_applies(d, q, k, v))
        return status_error(TCI_ERR_UNSUPPORTED,
                            "kern_attention: the FA2 kernel needs head dim 32, 64, 80, 96 or 128, "
                            "fp16 or bf16, and Q, K, V with a head_dim stride of 1, the other "
                            "strides multiples of 8 elements and 16-byte aligned bases");
    Fa2Params p;
    p.q = q;
    p.k = k;
    p.v = v;
    p.mask = mask;
    p.keep = static_cast<const unsigned char *>(keep);
    p.y = y;
    p.heads = d->heads;
    p.q_len = d->q_len;
    p.kv_len = d->kv_len;
    p.tiles_m = kern_util::ceil_div(d->q_len, kBlockM);
    p.mask_mod = d->mask_batch_mod;
    for (int i = 0; i < 4; ++i) {
        p.qs[i] = d->q_strides[i];
        p.ks[i] = d->k_strides[i];
        p.vs[i] = d->v_strides[i];
        p.ms[i] = d->mask_strides[i];
        p.ps[i] = d->keep_strides[i];
        p.ys[i] = d->y_strides[i];
    }
    if (!p.ys[0] && !p.ys[1] && !p.ys[2] && !p.ys[3]) { // dense (batch, heads, q_len, head_dim)
        p.ys[3] = 1;
        p.ys[2] = d->head_dim;
        p.ys[1] = d->q_len * d->head_dim;
        p.ys[0] = d->heads * d->q_len * d->head_dim;
    }
    p.scale_log2 = d->scale * kLog2e;
    p.dropped = d->keep_row_mean ? kDroppedScore : -INFINITY;
    p.causal = d->causal;
    p.y_vec = aligned_strides(p.ys) && kern_util::aligned16(y);
    const int64_t blocks = p.tiles_m * d->batch * d->heads;
    if (blocks == 0) return TCI_OK;
    if (blocks > 0x7fffffffLL)
        return status_error(TCI_ERR_UNSUPPORTED, "kern_attention: %lld blocks exceed the grid",
                            (long long)blocks);
    if (d->dtype == TCI_DTYPE_BFLOAT16)
        return launch_dim<__nv_bfloat16>(p, d->head_dim, (unsigned)blocks, stream);
    return launch_dim<__half>(p, d->head_dim, (unsigned)blocks, stream);
}
