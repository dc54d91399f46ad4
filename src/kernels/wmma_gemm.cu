// tcinfer's WMMA GEMMs: the cp.async-pipelined fp16 family (one kernel template, several tile
// configurations) and simpler shared-memory-tiled kernels for every other WMMA type and shape.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>

#include <type_traits>

extern "C" {
#include "util/status.h"
}
#include "kernels/cuda_check.h"
#include "kernels/gemm_epilogue.cuh"
#include "kernels/kern_util.cuh"
#include "kernels/wmma_gemm.h"

using namespace nvcuda;

namespace {

using gemm_epilogue::Epilogue;
using gemm_epilogue::epilogue_eight;
using gemm_epilogue::epilogue_one;
using gemm_epilogue::kOutBf16;
using gemm_epilogue::kOutF16;
using gemm_epilogue::kOutF32;

// ------------------------------------------------------------------------------------------------
// The fp16 family (and its bf16 twin: the same template over __nv_bfloat16)

struct GemmParams {
    const void *a, *b; // of the kernel's element type E
    const void *c;
    void *d;
    int m, n, k;
    int tiles_m, tiles_n;
    int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
    Epilogue epi;
};

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int src_bytes) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    // src_bytes < 16 zero-fills the rest: that is how every tail (M, N, K) is padded
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool TA, bool TB> struct Tile {
    static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN, kWarps = kWarpsM * kWarpsN;
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kFragsM = WM / 16, kFragsN = WN / 16;
    // 16 bytes of padding per shared row: consecutive rows start 4 banks apart, so the eight
    // 16-byte rows a fragment load (or a cp.async phase) touches fall into distinct banks
    static constexpr int kPad = 8;
    // A is kept as stored: M x K rows when not transposed (row_major fragments), K x M when
    // transposed (col_major fragments); likewise B
    static constexpr int kARows = TA ? BK : BM, kACols = TA ? BM : BK, kALd = kACols + kPad;
    static constexpr int kBRows = TB ? BN : BK, kBCols = TB ? BK : BN, kBLd = kBCols + kPad;
    static constexpr int kAStage = kARows * kALd, kBStage = kBRows * kBLd; // halves
    static constexpr int kPipeBytes = STAGES * (kAStage + kBStage) * 2;
    static constexpr int kEpiLd = WN + 4; // floats
    static constexpr int kEpiBytes = kWarps * 16 * kEpiLd * 4;
    static constexpr int kSmemBytes = kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes;
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
    static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "16x16x16 fragments");
    static_assert(STAGES >= 2 && STAGES <= 4, "2 to 4 stages");
};

// Stages one operand's tiles (ROWS x COLS 16-bit elements as stored, COLS contiguous) into shared
// memory with 16-byte asynchronous copies. K runs along the stored columns (KCOLS: A as stored, B
// transposed) or along the stored rows. Every address and bounds test that does not move with K
// is worked out once, in the constructor: the main loop issues so few instructions besides the
// tensor-core ones that this per-tile arithmetic was worth about a tenth of the throughput.
// Each thread copies one 8-element chunk in each of ITERS passes, RS rows apart; a chunk sticking
// out of the matrix copies only its inside and zero-fills the rest, which pads every tail (M, N, K).
template <int ROWS, int COLS, int LD, int THREADS, bool KCOLS, class E> struct OperandLoader {
    static constexpr int kChunksPerRow = COLS / 8, RS = THREADS / kChunksPerRow;
    static constexpr int ITERS = ROWS / RS;
    static_assert(THREADS % kChunksPerRow == 0 && ROWS % RS == 0, "whole rows of chunks per pass");
    const E *matrix, *first; // first: the thread's chunk of the tile at K step 0
    int64_t k_step, pass_step; // elements to the next K step's tile; to the next pass's row
    int k_pos, k_lim;          // the chunk's K coordinate at step 0 (its column if KCOLS, else row)
    unsigned rows_in;          // KCOLS: bit i set when pass i's row is inside the matrix
    int cols_in;               // !KCOLS: elements of the chunk inside the matrix's columns (0..8)
    int s_off;                 // the thread's chunk in the shared tile (elements)

    // The tile at K step 0 starts at row row0, column col0 of a matrix of row_lim x col_lim
    // elements with row stride ld.
    __device__ __forceinline__ OperandLoader(const E *g, int64_t ld, int row0, int row_lim, int col0,
                                             int col_lim, int tid) {
        const int r = tid / kChunksPerRow, c = (tid % kChunksPerRow) * 8;
        matrix = g;
        first = g + static_cast<int64_t>(row0 + r) * ld + col0 + c;
        pass_step = RS * ld;
        s_off = r * LD + c;
        rows_in = 0, cols_in = 0;
        if constexpr (KCOLS) {
            k_step = COLS, k_pos = col0 + c, k_lim = col_lim;
#pragma unroll
            for (int i = 0; i < ITERS; ++i) rows_in |= (row0 + r + i * RS < row_lim ? 1u : 0u) << i;
        } else {
            k_step = ROWS * ld, k_pos = row0 + r, k_lim = row_lim;
            const int left = col_lim - (col0 + c);
            cols_in = left < 0 ? 0 : (left > 8 ? 8 : left);
        }
    }

    // Copies the tile of K step kt into s when every chunk of it lies inside the matrix (the
    // block's tile is inside M and N, and kt is not the K tail): no bounds tests, no zero fill.
    // Most tiles of a large GEMM take this path; its 6 copies of a 256x128x32 tile cost about 30
    // instructions instead of the 100 of load() below.
    __device__ __forceinline__ void load_inside(E *s, int kt) const {
        const E *src = first + kt * k_step;
#pragma unroll
        for (int i = 0; i < ITERS; ++i) {
            cp_async16(s + s_off + i * RS * LD, src);
            src += pass_step;
        }
    }

    // Copies the tile of K step kt into s.
    __device__ __forceinline__ void load(E *s, int kt) const {
        const E *src = first + kt * k_step;
        const int k0 = kt * (KCOLS ? COLS : ROWS);
        int k_in = 0; // KCOLS: elements of the chunk inside K
        if constexpr (KCOLS) {
            k_in = k_lim - (k_pos + k0);
            k_in = k_in < 0 ? 0 : (k_in > 8 ? 8 : k_in);
        }
#pragma unroll
        for (int i = 0; i < ITERS; ++i) {
            const int valid = KCOLS ? ((rows_in >> i) & 1u ? k_in : 0)
                                    : (k_pos + k0 + i * RS < k_lim ? cols_in : 0);
            // nothing is read when valid == 0; the matrix base is just a harmless address
            cp_async16(s + s_off + i * RS * LD, valid ? src + i * pass_step : matrix, valid * 2);
        }
    }
};

// At least one block per multiprocessor, said explicitly: left to itself ptxas held the 128x128x64
// kernel to 128 registers for two blocks and spilled the double-buffered fragments.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool TA, bool TB, class E>
__global__ void __launch_bounds__(Tile<BM, BN, BK, WM, WN, STAGES, TA, TB>::kThreads, 1)
    wmma_gemm_f16(const GemmParams p) {
    using T = Tile<BM, BN, BK, WM, WN, STAGES, TA, TB>;
    using ALayout = std::conditional_t<TA, wmma::col_major, wmma::row_major>;
    using BLayout = std::conditional_t<TB, wmma::col_major, wmma::row_major>;
    extern __shared__ __align__(128) unsigned char smem[];
    E *sa = reinterpret_cast<E *>(smem);
    E *sb = sa + STAGES * T::kAStage;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int wm = warp / T::kWarpsN, wn = warp % T::kWarpsN;

    // Grouped order: consecutive blocks sweep the N tiles of a band of kGroup M tiles, so the
    // band's A rows and the B columns in use stay in L2 together.
    constexpr int kGroup = 8;
    const int pid = blockIdx.x;
    const int per_group = kGroup * p.tiles_n;
    const int first_m = (pid / per_group) * kGroup;
    const int group_rows = min(p.tiles_m - first_m, kGroup);
    const int tm = first_m + (pid % per_group) % group_rows;
    const int tn = (pid % per_group) / group_rows;
    const int m0 = tm * BM, n0 = tn * BN;

    const int64_t z = blockIdx.z;
    const E *A = static_cast<const E *>(p.a) + z * p.stride_a;
    const E *B = static_cast<const E *>(p.b) + z * p.stride_b;
    const int kt_count = (p.k + BK - 1) / BK;

    // A stored M x K (K along its columns) or, transposed, K x M; B stored K x N or N x K
    using ALoader = OperandLoader<T::kARows, T::kACols, T::kALd, T::kThreads, !TA, E>;
    using BLoader = OperandLoader<T::kBRows, T::kBCols, T::kBLd, T::kThreads, TB, E>;
    const ALoader load_a = TA ? ALoader(A, p.lda, 0, p.k, m0, p.m, tid)
                              : ALoader(A, p.lda, m0, p.m, 0, p.k, tid);
    const BLoader load_b = TB ? BLoader(B, p.ldb, n0, p.n, 0, p.k, tid)
                              : BLoader(B, p.ldb, 0, p.k, n0, p.n, tid);
    const bool tile_inside = m0 + BM <= p.m && n0 + BN <= p.n;
    const int kt_whole = p.k / BK; // K steps before the K tail
    auto load_stage = [&](int stage, int kt) {
        if (tile_inside && kt < kt_whole) {
            load_a.load_inside(sa + stage * T::kAStage, kt);
            load_b.load_inside(sb + stage * T::kBStage, kt);
        } else {
            load_a.load(sa + stage * T::kAStage, kt);
            load_b.load(sb + stage * T::kBStage, kt);
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[T::kFragsM][T::kFragsN];
#pragma unroll
    for (int i = 0; i < T::kFragsM; ++i)
#pragma unroll
        for (int j = 0; j < T::kFragsN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < kt_count) load_stage(s, s);
        cp_async_commit();
    }

    // Fragments are double-buffered in registers: those of the next 16-wide K step are loaded
    // from shared memory while the current step's MMAs run, across shared tiles too (the first
    // step of tile kt + 1 is loaded during the last step of tile kt, right after the barrier
    // that says it landed). With two warps per scheduler there is little else to hide the
    // fragment loads behind: in the tile sweep at 4096^3 (docs/benchmarks.md, 2026-11-30 03:10)
    // the 256x128 tile ran at 0.52x cuBLAS with it and 0.36x without.
    constexpr int kSteps = BK / 16;
    static_assert(kSteps % 2 == 0, "an even number of fragment steps per tile: buffer = step & 1");
    wmma::fragment<wmma::matrix_a, 16, 16, 16, E, ALayout> af[2][T::kFragsM];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, E, BLayout> bf[2][T::kFragsN];
    auto load_fragments = [&](int buf, int stage, int kk) {
        const E *ta = sa + stage * T::kAStage, *tb = sb + stage * T::kBStage;
#pragma unroll
        for (int i = 0; i < T::kFragsM; ++i) {
            const int row = wm * WM + i * 16;
            wmma::load_matrix_sync(af[buf][i], TA ? ta + kk * T::kALd + row : ta + row * T::kALd + kk,
                                   T::kALd);
        }
#pragma unroll
        for (int j = 0; j < T::kFragsN; ++j) {
            const int col = wn * WN + j * 16;
            wmma::load_matrix_sync(bf[buf][j], TB ? tb + col * T::kBLd + kk : tb + kk * T::kBLd + col,
                                   T::kBLd);
        }
    };

    cp_async_wait<STAGES - 2>(); // tile 0 has landed
    __syncthreads();
    if (kt_count > 0) load_fragments(0, 0, 0);
    // stage: where tile kt lies; fill: where tile kt + STAGES - 1 goes (the stage of tile kt - 1,
    // which every warp finished reading before the previous iteration's barrier)
    int stage = 0, fill = STAGES - 1;
    for (int kt = 0; kt < kt_count; ++kt) {
        const int next = kt + STAGES - 1;
        if (next < kt_count) load_stage(fill, next);
        cp_async_commit();
        fill = fill == STAGES - 1 ? 0 : fill + 1;
        const int next_stage = stage == STAGES - 1 ? 0 : stage + 1;
#pragma unroll
        for (int step = 0; step < kSteps; ++step) {
            const int buf = step & 1;
            if (step == kSteps - 1) {
                cp_async_wait<STAGES - 2>(); // tile kt + 1 has landed
                __syncthreads();
                if (kt + 1 < kt_count) load_fragments(buf ^ 1, next_stage, 0);
            } else {
                load_fragments(buf ^ 1, stage, (step + 1) * 16);
            }
            // serpentine over the fragment grid: consecutive MMAs share an operand
#pragma unroll
            for (int i = 0; i < T::kFragsM; ++i)
#pragma unroll
                for (int j = 0; j < T::kFragsN; ++j) {
                    const int jj = (i & 1) ? T::kFragsN - 1 - j : j;
                    wmma::mma_sync(acc[i][jj], af[buf][i], bf[buf][jj], acc[i][jj]);
                }
        }
        stage = next_stage;
    }
    cp_async_wait<0>();
    __syncthreads(); // the pipeline's shared memory becomes the epilogue's scratch

    // Each warp passes one 16-row strip of its fragments through its own shared scratch, so
    // that every lane then owns 8 consecutive columns: 16-byte loads of C and bias and 16-byte
    // stores of D.
    // The strips are a loop, not unrolled: the epilogue's code (every activation, every output
    // type) then exists once per kernel instead of once per strip and chunk (unrolled, the
    // 128x128 kernel was 72K instructions and took minutes to compile; its speed was the same).
    // Only the fragment stores are unrolled, so that the accumulators keep constant indices (and
    // stay in registers).
    float *scratch = reinterpret_cast<float *>(smem) + warp * 16 * T::kEpiLd;
    const int64_t zc = z * p.stride_c;
    constexpr int kChunksPerRow = WN / 8;
#pragma unroll 1
    for (int i = 0; i < T::kFragsM; ++i) {
#pragma unroll
        for (int fi = 0; fi < T::kFragsM; ++fi)
            if (fi == i)
#pragma unroll
                for (int j = 0; j < T::kFragsN; ++j)
                    wmma::store_matrix_sync(scratch + j * 16, acc[fi][j], T::kEpiLd,
                                            wmma::mem_row_major);
        __syncwarp();
        const int row_base = m0 + wm * WM + i * 16;
#pragma unroll 1
        for (int t = 0; t < 16 * kChunksPerRow / 32; ++t) {
            const int chunk = lane + t * 32;
            const int r = chunk / kChunksPerRow, cc = (chunk % kChunksPerRow) * 8;
            const int row = row_base + r, col = n0 + wn * WN + cc;
            if (row < p.m && col < p.n) {
                epilogue_eight(p.epi, p.c, p.d, zc + static_cast<int64_t>(row) * p.ldc + col, col,
                               p.n - col, scratch + r * T::kEpiLd + cc);
            }
        }
        __syncwarp();
    }
}

typedef void (*GemmKernel)(GemmParams);

// bf16 kernels exist for A as stored (trans_a 0) only: each is one more long ptxas run, and the
// engine's GEMMs with a transposed A are rare (cuBLASLt takes them).
struct GemmConfig {
    const char *name;
    int bm, bn, bk, threads;
    GemmKernel kernel[4];      // fp16; index trans_a * 2 + trans_b
    GemmKernel kernel_bf16[2]; // bf16, trans_a 0; index trans_b
    int smem[4];
};

#define WMMA_TILE(BM, BN, BK, WM, WN, S, TA, TB) Tile<BM, BN, BK, WM, WN, S, TA, TB>
#define WMMA_KERNEL(BM, BN, BK, WM, WN, S, TA, TB) wmma_gemm_f16<BM, BN, BK, WM, WN, S, TA, TB, __half>
#define WMMA_KERNEL_BF16(BM, BN, BK, WM, WN, S, TB)                                               \
    wmma_gemm_f16<BM, BN, BK, WM, WN, S, false, TB, __nv_bfloat16>
#define WMMA_CONFIG(BM, BN, BK, WM, WN, S)                                                        \
    {#BM "x" #BN "x" #BK " s" #S " warp " #WM "x" #WN,                                          \
     BM,                                                                                          \
     BN,                                                                                          \
     BK,                                                                                          \
     WMMA_TILE(BM, BN, BK, WM, WN, S, false, false)::kThreads,                                    \
     {WMMA_KERNEL(BM, BN, BK, WM, WN, S, false, false),                                           \
      WMMA_KERNEL(BM, BN, BK, WM, WN, S, false, true),                                            \
      WMMA_KERNEL(BM, BN, BK, WM, WN, S, true, false),                                            \
      WMMA_KERNEL(BM, BN, BK, WM, WN, S, true, true)},                                            \
     {WMMA_KERNEL_BF16(BM, BN, BK, WM, WN, S, false),                                             \
      WMMA_KERNEL_BF16(BM, BN, BK, WM, WN, S, true)},                                             \
     {WMMA_TILE(BM, BN, BK, WM, WN, S, false, false)::kSmemBytes,                                 \
      WMMA_TILE(BM, BN, BK, WM, WN, S, false, true)::kSmemBytes,                                  \
      WMMA_TILE(BM, BN, BK, WM, WN, S, true, false)::kSmemBytes,                                  \
      WMMA_TILE(BM, BN, BK, WM, WN, S, true, true)::kSmemBytes}}

// Largest block tiles first (kern_wmma_gemm_pick_config walks the list in this order). Every
// config is four fp16 and two bf16 kernels whose ptxas time dominates the build. On the H200
// (bench/bench_gemm.c; docs/benchmarks.md, 2026-11-30):
// - 256x128 and 128x256 (8 warps of 64x64, one block of 232-248 registers per thread per
//   multiprocessor) are the fastest on large GEMMs once the interior tiles load without bounds
//   tests and fragments are double-buffered: 0.52-0.54x cuBLAS at 4096^3, against 0.44x for
//   128x128. They lost before those changes.
// - 128x128x32 runs 3 stages: 4 were as fast within the sweeps' noise (about 5%) and need 76 KB
//   of shared memory instead of 57 KB; 128x256 keeps the 4 it was measured with.
// - 64x64x64 never won a measured shape and was dropped.
const GemmConfig kConfigs[] = {
    WMMA_CONFIG(256, 128, 32, 64, 64, 3),
    WMMA_CONFIG(128, 256, 32, 64, 64, 4),
    WMMA_CONFIG(128, 128, 32, 64, 64, 3),
    WMMA_CONFIG(128, 128, 64, 64, 32, 3),
    WMMA_CONFIG(128, 64, 32, 64, 32, 4),
    WMMA_CONFIG(64, 64, 32, 32, 32, 2),
};
constexpr int kConfigCount = static_cast<int>(sizeof kConfigs / sizeof kConfigs[0]);

// ------------------------------------------------------------------------------------------------
// The other WMMA types and shapes: 4 warps (2 x 2), each 2 x 2 fragments, two fragment-K steps
// per shared tile. Shared tiles are stored per K step as [step][row][FK + pad] for both A
// (rows = M) and B (rows = N, read as col_major), so every fragment starts on a 32-byte
// boundary whatever the element size and shape (a plain B[k][n] layout would put 32x8x16's
// 8-column fragments 16 bytes apart).

struct VariantParams {
    const void *a, *b, *c;
    void *d;
    int m, n, k, trans_a, trans_b;
    int tiles_n;
    int64_t lda, ldb, ldc, stride_a, stride_b, stride_c;
    Epilogue epi;
};

template <typename In_, typename Frag_, typename Acc_, int FM_, int FN_, int FK_>
struct VariantTraits {
    using In = In_;     // A/B element in memory and in shared memory
    using Frag = Frag_; // fragment element type (precision::tf32 for tf32)
    using Acc = Acc_;
    static constexpr int FM = FM_, FN = FN_, FK = FK_;
    static constexpr int kWarpFrags = 2, kKSteps = 2;
    static constexpr int BM = 2 * kWarpFrags * FM, BN = 2 * kWarpFrags * FN, BK = kKSteps * FK;
    static constexpr int kLdk = FK + 16 / static_cast<int>(sizeof(In));   // 16-byte row pad
    static constexpr int kLdo = FN + 16 / static_cast<int>(sizeof(Acc_)); // likewise
};

template <typename T> __device__ __forceinline__ T zero_of() { return T{}; }
template <> __device__ __forceinline__ __half zero_of<__half>() { return __float2half(0.0f); }
template <> __device__ __forceinline__ __nv_bfloat16 zero_of<__nv_bfloat16>() {
    return __float2bfloat16(0.0f);
}

template <typename T> __device__ __forceinline__ float to_float(T v) {
    return static_cast<float>(v);
}
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }

template <class V> __global__ void __launch_bounds__(128) wmma_variant(const VariantParams p) {
    using In = typename V::In;
    using Acc = typename V::Acc;
    constexpr int FM = V::FM, FN = V::FN, FK = V::FK, BM = V::BM, BN = V::BN, BK = V::BK;
    constexpr bool kTf32 = std::is_same<typename V::Frag, wmma::precision::tf32>::value;
    __shared__ __align__(128) In sa[V::kKSteps][BM][V::kLdk];
    __shared__ __align__(128) In sb[V::kKSteps][BN][V::kLdk];
    __shared__ __align__(128) Acc so[4][FM * V::kLdo];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int wm = warp >> 1, wn = warp & 1;
    const int m0 = (blockIdx.x / p.tiles_n) * BM, n0 = (blockIdx.x % p.tiles_n) * BN;
    const int64_t z = blockIdx.z;
    const In *A = static_cast<const In *>(p.a) + z * p.stride_a;
    const In *B = static_cast<const In *>(p.b) + z * p.stride_b;

    wmma::fragment<wmma::accumulator, FM, FN, FK, Acc> acc[V::kWarpFrags][V::kWarpFrags];
#pragma unroll
    for (int i = 0; i < V::kWarpFrags; ++i)
#pragma unroll
        for (int j = 0; j < V::kWarpFrags; ++j) wmma::fill_fragment(acc[i][j], zero_of<Acc>());

    for (int k0 = 0; k0 < p.k; k0 += BK) {
        // consecutive threads walk the stored rows' contiguous dimension (coalesced reads)
        for (int idx = tid; idx < BM * BK; idx += 128) {
            const int r = p.trans_a ? idx % BM : idx / BK, kk = p.trans_a ? idx / BM : idx % BK;
            const int gr = m0 + r, gk = k0 + kk;
            In v = zero_of<In>();
            if (gr < p.m && gk < p.k) {
                v = A[p.trans_a ? static_cast<int64_t>(gk) * p.lda + gr
                                : static_cast<int64_t>(gr) * p.lda + gk];
                if constexpr (kTf32) v = wmma::__float_to_tf32(v);
            }
            sa[kk / FK][r][kk % FK] = v;
        }
        for (int idx = tid; idx < BN * BK; idx += 128) {
            const int cn = p.trans_b ? idx / BK : idx % BN, kk = p.trans_b ? idx % BK : idx / BN;
            const int gc = n0 + cn, gk = k0 + kk;
            In v = zero_of<In>();
            if (gc < p.n && gk < p.k) {
                v = B[p.trans_b ? static_cast<int64_t>(gc) * p.ldb + gk
                                : static_cast<int64_t>(gk) * p.ldb + gc];
                if constexpr (kTf32) v = wmma::__float_to_tf32(v);
            }
            sb[kk / FK][cn][kk % FK] = v;
        }
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < V::kKSteps; ++ks) {
            wmma::fragment<wmma::matrix_a, FM, FN, FK, typename V::Frag, wmma::row_major>
                af[V::kWarpFrags];
            wmma::fragment<wmma::matrix_b, FM, FN, FK, typename V::Frag, wmma::col_major>
                bf[V::kWarpFrags];
#pragma unroll
            for (int i = 0; i < V::kWarpFrags; ++i)
                wmma::load_matrix_sync(af[i], &sa[ks][(wm * V::kWarpFrags + i) * FM][0], V::kLdk);
#pragma unroll
            for (int j = 0; j < V::kWarpFrags; ++j)
                wmma::load_matrix_sync(bf[j], &sb[ks][(wn * V::kWarpFrags + j) * FN][0], V::kLdk);
#pragma unroll
            for (int i = 0; i < V::kWarpFrags; ++i)
#pragma unroll
                for (int j = 0; j < V::kWarpFrags; ++j)
                    wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
        }
        __syncthreads();
    }

    const int64_t zc = z * p.stride_c;
#pragma unroll
    for (int i = 0; i < V::kWarpFrags; ++i)
#pragma unroll
        for (int j = 0; j < V::kWarpFrags; ++j) {
            wmma::store_matrix_sync(so[warp], acc[i][j], V::kLdo, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < FM * FN; e += 32) {
                const int r = e / FN, cn = e % FN;
                const int row = m0 + (wm * V::kWarpFrags + i) * FM + r;
                const int col = n0 + (wn * V::kWarpFrags + j) * FN + cn;
                if (row >= p.m || col >= p.n) continue;
                const int64_t off = zc + static_cast<int64_t>(row) * p.ldc + col;
                const Acc v = so[warp][r * V::kLdo + cn];
                if constexpr (std::is_same<Acc, int>::value) {
                    static_cast<int *>(p.d)[off] = v;
                } else if constexpr (std::is_same<Acc, double>::value) {
                    double x = static_cast<double>(p.epi.alpha) * v;
                    if (p.epi.has_c)
                        x += static_cast<double>(p.epi.beta) * static_cast<const double *>(p.c)[off];
                    static_cast<double *>(p.d)[off] = x;
                } else {
                    epilogue_one(p.epi, p.c, p.d, off, col, to_float(v));
                }
            }
            __syncwarp();
        }
}

enum VariantKind { kKindF16, kKindBf16, kKindTf32, kKindInt8, kKindF64 };

typedef void (*VariantKernel)(VariantParams);

struct VariantConfig {
    const char *name;
    VariantKind kind;
    int in_size, bm, bn;
    VariantKernel kernel;
};

#define WMMA_VARIANT(NAME, KIND, IN, FRAG, ACC, FM, FN, FK)                                       \
    {NAME, KIND, static_cast<int>(sizeof(IN)), VariantTraits<IN, FRAG, ACC, FM, FN, FK>::BM,       \
     VariantTraits<IN, FRAG, ACC, FM, FN, FK>::BN,                                                \
     wmma_variant<VariantTraits<IN, FRAG, ACC, FM, FN, FK>>}

// In kern_wmma_variant order (checked by the static_assert below).
const VariantConfig kVariants[] = {
    WMMA_VARIANT("f16 acc f32 16x16x16", kKindF16, __half, __half, float, 16, 16, 16),
    WMMA_VARIANT("f16 acc f32 32x8x16", kKindF16, __half, __half, float, 32, 8, 16),
    WMMA_VARIANT("f16 acc f32 8x32x16", kKindF16, __half, __half, float, 8, 32, 16),
    WMMA_VARIANT("f16 acc f16 16x16x16", kKindF16, __half, __half, __half, 16, 16, 16),
    WMMA_VARIANT("f16 acc f16 32x8x16", kKindF16, __half, __half, __half, 32, 8, 16),
    WMMA_VARIANT("f16 acc f16 8x32x16", kKindF16, __half, __half, __half, 8, 32, 16),
    WMMA_VARIANT("bf16 acc f32 16x16x16", kKindBf16, __nv_bfloat16, __nv_bfloat16, float, 16, 16, 16),
    WMMA_VARIANT("bf16 acc f32 32x8x16", kKindBf16, __nv_bfloat16, __nv_bfloat16, float, 32, 8, 16),
    WMMA_VARIANT("bf16 acc f32 8x32x16", kKindBf16, __nv_bfloat16, __nv_bfloat16, float, 8, 32, 16),
    WMMA_VARIANT("tf32 acc f32 16x16x8", kKindTf32, float, wmma::precision::tf32, float, 16, 16, 8),
    WMMA_VARIANT("s8 acc s32 16x16x16", kKindInt8, signed char, signed char, int, 16, 16, 16),
    WMMA_VARIANT("s8 acc s32 32x8x16", kKindInt8, signed char, signed char, int, 32, 8, 16),
    WMMA_VARIANT("s8 acc s32 8x32x16", kKindInt8, signed char, signed char, int, 8, 32, 16),
    WMMA_VARIANT("u8 acc s32 16x16x16", kKindInt8, unsigned char, unsigned char, int, 16, 16, 16),
    WMMA_VARIANT("u8 acc s32 32x8x16", kKindInt8, unsigned char, unsigned char, int, 32, 8, 16),
    WMMA_VARIANT("u8 acc s32 8x32x16", kKindInt8, unsigned char, unsigned char, int, 8, 32, 16),
    WMMA_VARIANT("f64 acc f64 8x8x4", kKindF64, double, double, double, 8, 8, 4),
};
static_assert((int)(sizeof kVariants / sizeof kVariants[0]) == (int)KERN_WMMA_VARIANT_COUNT,
              "kVariants must list every kern_wmma_variant");

// ------------------------------------------------------------------------------------------------
// Host side

using kern_util::ceil_div;

Epilogue epilogue_of(const kern_wmma_gemm_desc *d, const float *bias) {
    Epilogue e;
    e.bias = d->has_bias ? bias : nullptr;
    e.alpha = d->alpha, e.beta = d->beta, e.act_alpha = d->act_alpha, e.act_beta = d->act_beta;
    e.act = (int)d->act, e.has_bias = d->has_bias != 0, e.has_c = d->beta != 0.0f;
    e.out = d->out_dtype == TCI_DTYPE_FLOAT      ? kOutF32
            : d->out_dtype == TCI_DTYPE_BFLOAT16 ? kOutBf16
                                                 : kOutF16;
    return e;
}

// ab_align / cd_align / bias_align: the byte alignment A and B, C and D, and bias need.
tci_status check_pointers(const char *who, const kern_wmma_gemm_desc *d, const void *a,
                          const void *b, const float *bias, const void *c, void *dst,
                          unsigned ab_align, unsigned cd_align, unsigned bias_align) {
    if (!a || !b || !dst)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: a, b and d must not be NULL", who);
    if (d->has_bias && !bias)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: has_bias but bias is NULL", who);
    if (d->beta != 0.0f && !c)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: beta %g needs C, which is NULL", who,
                         (double)d->beta);
    if (((uintptr_t)a % ab_align) || ((uintptr_t)b % ab_align))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: a and b must be %u-byte aligned", who,
                         ab_align);
    if (((uintptr_t)dst % cd_align) || (d->beta != 0.0f && ((uintptr_t)c % cd_align)))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: c and d must be %u-byte aligned", who,
                         cd_align);
    if (d->has_bias && ((uintptr_t)bias % bias_align))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: bias must be %u-byte aligned", who,
                         bias_align);
    return TCI_OK;
}

tci_status shared_memory_limit(int *out_bytes) {
    int device = 0;
    KERN_CUDA_CHECK(cudaGetDevice(&device));
    KERN_CUDA_CHECK(
        cudaDeviceGetAttribute(out_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return TCI_OK;
}

} // namespace

extern "C" {

void kern_wmma_gemm_desc_init(kern_wmma_gemm_desc *desc, int64_t m, int64_t n, int64_t k,
                              int trans_a, int trans_b) {
    if (!desc) return;
    *desc = kern_wmma_gemm_desc{};
    desc->batch = 1;
    desc->m = m, desc->n = n, desc->k = k, desc->trans_a = trans_a, desc->trans_b = trans_b;
    desc->alpha = 1.0f;
    desc->act = ACT_NONE;
    desc->out_dtype = TCI_DTYPE_FLOAT16;
    desc->in_dtype = TCI_DTYPE_FLOAT16;
}

int kern_wmma_gemm_config_count(void) { return kConfigCount; }

const char *kern_wmma_gemm_config_name(int config) {
    return config >= 0 && config < kConfigCount ? kConfigs[config].name : nullptr;
}

int kern_wmma_gemm_config_smem_bytes(int config, int trans_a, int trans_b) {
    if (config < 0 || config >= kConfigCount) return 0;
    return kConfigs[config].smem[(trans_a ? 2 : 0) + (trans_b ? 1 : 0)];
}

int kern_wmma_gemm_pick_config(const kern_wmma_gemm_desc *desc, int sm_count) {
    if (!desc || desc->m < 1 || desc->n < 1) return kConfigCount - 1;
    const int64_t batch = desc->batch > 0 ? desc->batch : 1;
    for (int i = 0; i < kConfigCount; ++i) {
        const GemmConfig &g = kConfigs[i];
        // of two transposed tiles, the one whose long side lies along the problem's long side
        if (g.bm != g.bn && (g.bm > g.bn) != (desc->m >= desc->n)) continue;
        if (ceil_div(desc->m, g.bm) * ceil_div(desc->n, g.bn) * batch >= sm_count) return i;
    }
    return kConfigCount - 1;
}

tci_status kern_wmma_gemm_supports(const kern_wmma_gemm_desc *desc, int config) {
    static const char who[] = "kern_wmma_gemm";
    if (config < 0 || config >= kConfigCount)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: config %d outside 0..%d", who, config,
                         kConfigCount - 1);
    kern_gemm_lds r{};
    TRY_STATUS(kern_gemm_desc_check(who, desc, kConfigs[config].bm, kConfigs[config].bn, &r));
    const bool bf16 = desc->in_dtype == TCI_DTYPE_BFLOAT16;
    if (!bf16 && desc->in_dtype != TCI_DTYPE_FLOAT16 && desc->in_dtype != TCI_DTYPE_UNDEFINED)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: in_dtype %s: the family reads float16 or bfloat16", who,
                         tci_dtype_name(desc->in_dtype));
    if (desc->out_dtype != (bf16 ? TCI_DTYPE_BFLOAT16 : TCI_DTYPE_FLOAT16) &&
        desc->out_dtype != TCI_DTYPE_FLOAT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: out_dtype %s: %s inputs give %s or float",
                         who, tci_dtype_name(desc->out_dtype), bf16 ? "bfloat16" : "float16",
                         bf16 ? "bfloat16" : "float16");
    if (bf16 && desc->trans_a)
        return status_error(TCI_ERR_UNSUPPORTED, "%s: bfloat16 with a transposed A is not built", who);
    if (r.lda % 8 || r.ldb % 8 || r.ldc % 8)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: lda %lld, ldb %lld, ldc %lld: each must be a multiple of 8 "
                         "(16-byte rows for the asynchronous copies); pad the rows",
                         who, (long long)r.lda, (long long)r.ldb, (long long)r.ldc);
    if (desc->batch > 1 && (desc->stride_a % 8 || desc->stride_b % 8 || desc->stride_c % 8))
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: batch strides %lld, %lld, %lld: each must be a multiple of 8", who,
                         (long long)desc->stride_a, (long long)desc->stride_b,
                         (long long)desc->stride_c);
    return TCI_OK;
}

tci_status kern_wmma_gemm_run(const kern_wmma_gemm_desc *desc, int config, const void *a,
                              const void *b, const float *bias, const void *c, void *d,
                              cudaStream_t stream) {
    static const char who[] = "kern_wmma_gemm_run";
    TRY_STATUS(kern_wmma_gemm_supports(desc, config));
    TRY_STATUS(check_pointers(who, desc, a, b, bias, c, d, 16, 16, 16));
    const GemmConfig &g = kConfigs[config];
    const int which = desc->trans_a * 2 + desc->trans_b;
    const int smem = g.smem[which];
    int limit = 0;
    TRY_STATUS(shared_memory_limit(&limit));
    if (smem > limit)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: config %s needs %d bytes of shared memory, the device grants %d",
                         who, g.name, smem, limit);
    kern_gemm_lds r{};
    TRY_STATUS(kern_gemm_desc_check(who, desc, g.bm, g.bn, &r));

    GemmParams p;
    p.a = a, p.b = b;
    p.c = c, p.d = d;
    p.m = (int)desc->m, p.n = (int)desc->n, p.k = (int)desc->k;
    p.tiles_m = (int)ceil_div(desc->m, g.bm), p.tiles_n = (int)ceil_div(desc->n, g.bn);
    p.lda = r.lda, p.ldb = r.ldb, p.ldc = r.ldc;
    const bool batched = desc->batch > 1;
    p.stride_a = batched ? desc->stride_a : 0, p.stride_b = batched ? desc->stride_b : 0;
    p.stride_c = batched ? desc->stride_c : 0;
    p.epi = epilogue_of(desc, bias);

    // per call rather than once: no global state, and it follows the current device
    const GemmKernel kernel =
        desc->in_dtype == TCI_DTYPE_BFLOAT16 ? g.kernel_bf16[desc->trans_b] : g.kernel[which];
    KERN_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const dim3 grid((unsigned)(p.tiles_m * p.tiles_n), 1, (unsigned)desc->batch);
    kernel<<<grid, g.threads, smem, stream>>>(p);
    KERN_LAUNCH_CHECK("wmma_gemm_f16");
    return TCI_OK;
}

const char *kern_wmma_variant_name(kern_wmma_variant variant) {
    return (int)variant >= 0 && variant < KERN_WMMA_VARIANT_COUNT ? kVariants[variant].name
                                                                   : nullptr;
}

int kern_wmma_variant_input_size(kern_wmma_variant variant) {
    return (int)variant >= 0 && variant < KERN_WMMA_VARIANT_COUNT ? kVariants[variant].in_size : 0;
}

tci_status kern_wmma_variant_supports(const kern_wmma_gemm_desc *desc, kern_wmma_variant variant) {
    static const char who[] = "kern_wmma_variant";
    if ((int)variant < 0 || variant >= KERN_WMMA_VARIANT_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: variant %d outside 0..%d", who,
                         (int)variant, KERN_WMMA_VARIANT_COUNT - 1);
    const VariantConfig &v = kVariants[variant];
    kern_gemm_lds r{};
    TRY_STATUS(kern_gemm_desc_check(who, desc, v.bm, v.bn, &r));
    const tci_dtype out = desc->out_dtype;
    switch (v.kind) {
    case kKindF16:
        if (out != TCI_DTYPE_FLOAT16 && out != TCI_DTYPE_FLOAT)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "%s %s: out_dtype %s: fp16 variants write float16 or float", who,
                             v.name, tci_dtype_name(out));
        break;
    case kKindBf16:
    case kKindTf32:
        if (out != TCI_DTYPE_FLOAT)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "%s %s: out_dtype %s: it writes float", who,
                             v.name, tci_dtype_name(out));
        break;
    case kKindInt8:
        if (out != TCI_DTYPE_INT32)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "%s %s: out_dtype %s: it writes int32", who,
                             v.name, tci_dtype_name(out));
        if (desc->alpha != 1.0f || desc->beta != 0.0f || desc->has_bias ||
            desc->act != ACT_NONE)
            return status_error(TCI_ERR_UNSUPPORTED,
                             "%s %s: integer GEMMs are exact, D = A B: alpha 1, beta 0, no bias, "
                             "no act",
                             who, v.name);
        break;
    case kKindF64:
        if (out != TCI_DTYPE_DOUBLE)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "%s %s: out_dtype %s: it writes double",
                             who, v.name, tci_dtype_name(out));
        if (desc->has_bias || desc->act != ACT_NONE)
            return status_error(TCI_ERR_UNSUPPORTED, "%s %s: no bias or act in fp64", who, v.name);
        break;
    }
    return TCI_OK;
}

tci_status kern_wmma_variant_run(const kern_wmma_gemm_desc *desc, kern_wmma_variant variant,
                                 const void *a, const void *b, const float *bias, const void *c,
                                 void *d, cudaStream_t stream) {
    static const char who[] = "kern_wmma_variant_run";
    TRY_STATUS(kern_wmma_variant_supports(desc, variant));
    const VariantConfig &v = kVariants[variant];
    TRY_STATUS(check_pointers(who, desc, a, b, bias, c, d, (unsigned)v.in_size,
                           (unsigned)tci_dtype_size(desc->out_dtype), 4));
    kern_gemm_lds r{};
    TRY_STATUS(kern_gemm_desc_check(who, desc, v.bm, v.bn, &r));

    VariantParams p;
    p.a = a, p.b = b, p.c = c, p.d = d;
    p.m = (int)desc->m, p.n = (int)desc->n, p.k = (int)desc->k;
    p.trans_a = desc->trans_a, p.trans_b = desc->trans_b;
    p.tiles_n = (int)ceil_div(desc->n, v.bn);
    p.lda = r.lda, p.ldb = r.ldb, p.ldc = r.ldc;
    const bool batched = desc->batch > 1;
    p.stride_a = batched ? desc->stride_a : 0, p.stride_b = batched ? desc->stride_b : 0;
    p.stride_c = batched ? desc->stride_c : 0;
    p.epi = epilogue_of(desc, bias);
    const dim3 grid((unsigned)(ceil_div(desc->m, v.bm) * p.tiles_n), 1, (unsigned)desc->batch);
    v.kernel<<<grid, 128, 0, stream>>>(p);
    KERN_LAUNCH_CHECK("wmma_variant");
    return TCI_OK;
}

} // extern "C"
