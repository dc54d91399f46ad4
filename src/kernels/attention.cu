// Fused attention (attention.h), the WMMA kernel: the fallback where the FA2 kernel
// (attention_fa2.cu) does not apply (element loads), and kern_attention's validation and
// dispatch. One block per 64 query rows of one (batch, head), four warps of
// 16 rows each. Q stays in shared memory; for each tile of 64 keys the block loads K and V, each
// warp computes its 16 x 64 scores with WMMA, runs the online softmax on them in fp32 (two lanes
// per row), writes P in the storage type and accumulates P V with WMMA into its rows of an fp32
// output tile in shared memory, rescaled by the change of the row maximum first. Rows and keys
// beyond the sequence lengths are zero-filled on load and masked out of the softmax.
#include <mma.h>

#include "kernels/attention.h"
#include "kernels/attention_fa2.h"
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"

using namespace nvcuda;
using kern_util::from_float;
using kern_util::to_float;

namespace {

constexpr int kBlockM = 64;  // query rows per block
constexpr int kBlockN = 64;  // keys per tile
constexpr int kWarps = 4;    // 16 query rows each
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = kBlockM / kWarps;
constexpr int kColsPerLane = kBlockN / 2; // two lanes per query row
constexpr float kLog2e = 1.4426950408889634f;

static_assert(kRowsPerWarp == 16, "one WMMA row of fragments per warp");
static_assert(kRowsPerWarp * 2 == 32, "two lanes per query row");
static_assert(kBlockM == kBlockN, "load_tile fills kBlockM rows of Q, K and V tiles alike");

// Shared-memory plan for head dim D. Leading dimensions are padded (+8 halves, +4 floats) so
// that rows fall on different banks while every WMMA tile pointer stays 32-byte aligned (16
// rows of a padded row are a multiple of 32 bytes, and tile columns step by 16 elements).
template <int D> struct Smem {
    static constexpr int kLdIn = D + 8;       // Q, K, V tiles (storage type)
    static constexpr int kLdS = kBlockN + 4;  // scores (fp32)
    static constexpr int kLdP = kBlockN + 8;  // probabilities (storage type)
    static constexpr int kLdO = D + 4;        // output accumulator (fp32)
    static constexpr int64_t kQ = 0;
    static constexpr int64_t kK = kQ + 128 * ((kBlockM * kLdIn * 2 + 127) / 128);
    static constexpr int64_t kV = kK + 128 * ((kBlockN * kLdIn * 2 + 127) / 128);
    static constexpr int64_t kS = kV + 128 * ((kBlockN * kLdIn * 2 + 127) / 128);
    static constexpr int64_t kP = kS + 128 * ((kBlockM * kLdS * 4 + 127) / 128);
    static constexpr int64_t kO = kP + 128 * ((kBlockM * kLdP * 2 + 127) / 128);
    static constexpr int64_t kBytes = kO + 128 * ((kBlockM * kLdO * 4 + 127) / 128);
    static_assert(D % 16 == 0, "head dim in whole WMMA tiles");
    static_assert((16 * kLdIn * 2) % 32 == 0 && (16 * kLdS * 4) % 32 == 0 &&
                      (16 * kLdP * 2) % 32 == 0 && (16 * kLdO * 4) % 32 == 0,
                  "WMMA tile pointers 32-byte aligned");
};

// The base-2 score of a key the keep mask drops with keep_row_mean: finite, so that a row of
// dropped keys alone has equal scores (the softmax then averages V over them) while, against
// any real score, exp2 of the difference is 0 exactly (dropped keys weigh nothing).
constexpr float kDroppedScore = -1e30f;

struct Params {
    const void *q, *k, *v, *mask;
    const unsigned char *keep;
    void *y;
    int64_t heads, q_len, kv_len, tiles_m;
    int64_t qs[4], ks[4], vs[4], ms[4], ps[4], ys[4];
    int64_t mask_mod; // the mask's batch index is b % mask_mod (0: b)
    float scale_log2; // scale * log2(e): the softmax runs in base 2
    float dropped;    // the base-2 score of a key keep drops: -inf, or kDroppedScore
    bool causal, vec;
};

// rows x D elements of a (position, d) view into a padded shared tile; rows past `valid` are zero.
// vec: d stride 1, position stride and base 16-byte aligned: 8 elements per 16-byte load.
template <typename T, int D>
__device__ __forceinline__ void load_tile(T *dst, const T *src, int64_t row_stride,
                                          int64_t d_stride, int64_t first, int64_t valid,
                                          bool vec) {
    constexpr int kLd = Smem<D>::kLdIn;
    if (vec) {
        constexpr int kChunks = D / 8;
        for (int i = threadIdx.x; i < kBlockM * kChunks; i += kThreads) {
            const int r = i / kChunks, c = (i % kChunks) * 8;
            uint4 val = make_uint4(0, 0, 0, 0);
            if (first + r < valid)
                val = *reinterpret_cast<const uint4 *>(src + (first + r) * row_stride + c);
            *reinterpret_cast<uint4 *>(dst + r * kLd + c) = val;
        }
    } else {
        for (int i = threadIdx.x; i < kBlockM * D; i += kThreads) {
            const int r = i / D, c = i % D;
            T val = from_float<T>(0.0f);
            if (first + r < valid) val = src[(first + r) * row_stride + c * d_stride];
            dst[r * kLd + c] = val;
        }
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_kernel(Params p) {
    using S = Smem<D>;
    extern __shared__ __align__(128) unsigned char smem[];
    T *sq = reinterpret_cast<T *>(smem + S::kQ);
    T *sk = reinterpret_cast<T *>(smem + S::kK);
    T *sv = reinterpret_cast<T *>(smem + S::kV);
    float *ss = reinterpret_cast<float *>(smem + S::kS);
    T *sp = reinterpret_cast<T *>(smem + S::kP);
    float *so = reinterpret_cast<float *>(smem + S::kO);

    const int64_t tile = blockIdx.x % p.tiles_m;
    const int64_t bh = blockIdx.x / p.tiles_m;
    const int64_t b = bh / p.heads, h = bh % p.heads;
    const int64_t m0 = tile * kBlockM;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const T *q = static_cast<const T *>(p.q) + b * p.qs[0] + h * p.qs[1];
    const T *k = static_cast<const T *>(p.k) + b * p.ks[0] + h * p.ks[1];
    const T *v = static_cast<const T *>(p.v) + b * p.vs[0] + h * p.vs[1];
    const T *mask = p.mask ? static_cast<const T *>(p.mask) +
                                   (p.mask_mod ? b % p.mask_mod : b) * p.ms[0] + h * p.ms[1]
                             : nullptr;
    const unsigned char *keep = p.keep ? p.keep + b * p.ps[0] + h * p.ps[1] : nullptr;

    load_tile<T, D>(sq, q, p.qs[2], p.qs[3], m0, p.q_len, p.vec);
    for (int i = threadIdx.x; i < kBlockM * S::kLdO; i += kThreads) so[i] = 0.0f;

    // the query row this lane's softmax work is on, and which half of the key tile
    const int row = warp * kRowsPerWarp + lane / 2;
    const int half = lane % 2;
    const int64_t qi = m0 + row;
    float m_run = -INFINITY, l_run = 0.0f; // base-2 running max and sum of the row (both lanes)

    int64_t kv_end = p.kv_len;
    if (p.causal && m0 + kBlockM < kv_end) kv_end = m0 + kBlockM; // no key past the last row
    for (int64_t n0 = 0; n0 < kv_end; n0 += kBlockN) {
        __syncthreads(); // every warp is done with the previous K and V tiles
        load_tile<T, D>(sk, k, p.ks[2], p.ks[3], n0, p.kv_len, p.vec);
        load_tile<T, D>(sv, v, p.vs[2], p.vs[3], n0, p.kv_len, p.vec);
        __syncthreads();

        // scores of this warp's 16 rows: Q_w (16 x D) times K^T (D x 64)
        {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kBlockN / 16];
#pragma unroll
            for (int j = 0; j < kBlockN / 16; ++j) wmma::fill_fragment(acc[j], 0.0f);
#pragma unroll
            for (int kk = 0; kk < D; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> af;
                wmma::load_matrix_sync(af, sq + warp * kRowsPerWarp * S::kLdIn + kk, S::kLdIn);
#pragma unroll
                for (int j = 0; j < kBlockN / 16; ++j) {
                    // K^T's (d, key) element is sk[key][d]: column-major with ld kLdIn
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bf;
                    wmma::load_matrix_sync(bf, sk + j * 16 * S::kLdIn + kk, S::kLdIn);
                    wmma::mma_sync(acc[j], af, bf, acc[j]);
                }
            }
#pragma unroll
            for (int j = 0; j < kBlockN / 16; ++j)
                wmma::store_matrix_sync(ss + warp * kRowsPerWarp * S::kLdS + j * 16, acc[j],
                                        S::kLdS, wmma::mem_row_major);
        }
        __syncwarp();

        // online softmax of the row: this lane's 32 keys, interleaved with its partner's
        float *srow = ss + row * S::kLdS;
        float tile_max = -INFINITY;
        for (int c = 0; c < kColsPerLane; ++c) {
            const int col = c * 2 + half;
            const int64_t kj = n0 + col;
            float x = srow[col] * p.scale_log2;
            if (kj >= p.kv_len || qi >= p.q_len || (p.causal && kj > qi)) {
                x = -INFINITY;
            } else if (keep && !keep[qi * p.ps[2] + kj * p.ps[3]]) {
                x = p.dropped;
            } else if (mask) {
                x += to_float(mask[qi * p.ms[2] + kj * p.ms[3]]) * kLog2e;
            }
            srow[col] = x;
            tile_max = fmaxf(tile_max, x);
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        const float m_new = fmaxf(m_run, tile_max);
        // while every score so far is -inf, subtract 0: exp2(-inf) is 0, never NaN
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = exp2f(m_run - m_use); // m_run -inf: 0 (nothing accumulated yet)
        float sum = 0.0f;
        T *prow = sp + row * S::kLdP;
        for (int c = 0; c < kColsPerLane; ++c) {
            const int col = c * 2 + half;
            const float e = exp2f(srow[col] - m_use);
            sum += e;
            prow[col] = from_float<T>(e);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l_run = l_run * alpha + sum;
        m_run = m_new;
        float *orow = so + row * S::kLdO;
        for (int c = half; c < D; c += 2) orow[c] *= alpha;
        __syncwarp();

        // this warp's rows of O += P_w (16 x 64) times V (64 x D)
#pragma unroll
        for (int j = 0; j < D / 16; ++j) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            float *otile = so + warp * kRowsPerWarp * S::kLdO + j * 16;
            wmma::load_matrix_sync(acc, otile, S::kLdO, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < kBlockN; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> af;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bf;
                wmma::load_matrix_sync(af, sp + warp * kRowsPerWarp * S::kLdP + kk, S::kLdP);
                wmma::load_matrix_sync(bf, sv + kk * S::kLdIn + j * 16, S::kLdIn);
                wmma::mma_sync(acc, af, bf, acc);
            }
            wmma::store_matrix_sync(otile, acc, S::kLdO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    __syncthreads(); // the output tile written by the last WMMA stores (or only zeroed)

    if (qi < p.q_len) {
        const float inv = l_run > 0.0f ? 1.0f / l_run : 0.0f;
        T *yrow = static_cast<T *>(p.y) + b * p.ys[0] + h * p.ys[1] + qi * p.ys[2];
        const float *orow = so + row * S::kLdO;
        for (int c = half; c < D; c += 2) yrow[c * p.ys[3]] = from_float<T>(orow[c] * inv);
    }
}

template <typename T, int D> tci_status launch(const Params &p, unsigned blocks,
                                                cudaStream_t stream) {
    const auto kernel = attention_kernel<T, D>;
    constexpr int kBytes = (int)Smem<D>::kBytes;
    // a per-function attribute, not stream work: legal while capturing, and leaves no state
    // that another caller depends on
    KERN_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    kernel<<<blocks, kThreads, kBytes, stream>>>(p);
    KERN_LAUNCH_CHECK("attention_kernel");
    return TCI_OK;
}

template <typename T> tci_status launch_dim(const Params &p, int64_t d, unsigned blocks,
                                            cudaStream_t stream) {
    switch (d) {
    case 32: return launch<T, 32>(p, blocks, stream);
    case 64: return launch<T, 64>(p, blocks, stream);
    case 80: return launch<T, 80>(p, blocks, stream);
    case 96: return launch<T, 96>(p, blocks, stream);
    case 128: return launch<T, 128>(p, blocks, stream);
    default:
        return status_error(TCI_ERR_UNSUPPORTED,
                            "kern_attention: head dim %lld has no kernel (32, 64, 80, 96, 128)",
                            (long long)d);
    }
}

bool aligned_strides(const int64_t *s) { return s[3] == 1 && s[0] % 8 == 0 && s[1] % 8 == 0 && s[2] % 8 == 0; }

} // namespace

extern "C" bool kern_attention_head_dim_ok(int64_t d) {
    return d == 32 || d == 64 || d == 80 || d == 96 || d == 128;
}

extern "C" tci_status kern_attention(const kern_attention_desc *d, const void *q, const void *k,
                                     const void *v, const void *mask, const void *keep, void *y,
                                     cudaStream_t stream) {
    if (!d || d->batch < 0 || d->heads < 0 || d->q_len < 0 || d->kv_len < 0 || d->head_dim < 0 ||
        d->mask_batch_mod < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_attention: negative extent");
    if (d->dtype != TCI_DTYPE_FLOAT16 && d->dtype != TCI_DTYPE_BFLOAT16 &&
        d->dtype != TCI_DTYPE_UNDEFINED)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "kern_attention: dtype %s (fp16 and bf16 only)",
                            tci_dtype_name(d->dtype));
    if (!kern_attention_head_dim_ok(d->head_dim))
        return status_error(TCI_ERR_UNSUPPORTED,
                            "kern_attention: head dim %lld has no kernel (32, 64, 80, 96, 128)",
                            (long long)d->head_dim);
    const int64_t rows = d->batch * d->heads * d->q_len;
    if (rows == 0) return TCI_OK;
    if (!q || !y || (d->kv_len > 0 && (!k || !v)))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_attention: NULL operand");
    if (d->impl != KERN_ATTENTION_AUTO && d->impl != KERN_ATTENTION_WMMA &&
        d->impl != KERN_ATTENTION_FA2)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_attention: impl %d", (int)d->impl);
    if (d->impl == KERN_ATTENTION_FA2 ||
        (d->impl == KERN_ATTENTION_AUTO && kern_attention_fa2_applies(d, q, k, v)))
        return kern_attention_fa2(d, q, k, v, mask, keep, y, stream);
    Params p;
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
    p.vec = aligned_strides(p.qs) && aligned_strides(p.ks) && aligned_strides(p.vs) &&
            kern_util::aligned16(q) && kern_util::aligned16(k) && kern_util::aligned16(v);
    const int64_t blocks = p.tiles_m * d->batch * d->heads;
    if (blocks > 0x7fffffffLL)
        return status_error(TCI_ERR_UNSUPPORTED, "kern_attention: %lld blocks exceed the grid",
                            (long long)blocks);
    if (d->dtype == TCI_DTYPE_BFLOAT16)
        return launch_dim<__nv_bfloat16>(p, d->head_dim, (unsigned)blocks, stream);
    return launch_dim<__half>(p, d->head_dim, (unsigned)blocks, stream);
}
