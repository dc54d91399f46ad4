// tcinfer's Hopper fp16 GEMM: TMA-fed, mbarrier-pipelined, warp-specialised wgmma kernels (one
// template, several tile widths, every transpose) with the WMMA family's fused fp32 epilogue.
// Built for sm_90a alone (CMakeLists.txt); the host side refuses every other device.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

extern "C" {
#include "util/status.h"
}
#include "kernels/cuda_check.h"
#include "kernels/gemm_epilogue.cuh"
#include "kernels/wgmma_gemm.h"

namespace {

// The epilogue: gemm_epilogue.cuh, shared with wmma_gemm.cu (fp16 or fp32 output here).
using gemm_epilogue::Epilogue;
using gemm_epilogue::epilogue_eight;

// ------------------------------------------------------------------------------------------------
// PTX wrappers: shared-memory addresses, mbarriers, the tensor copy, wgmma.

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Waits until the phase of the given parity has completed. A fresh barrier counts its phase
// before the first (parity 1) as complete, which lets the producer fill every stage at once.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

// One box of a 3-d tensor map (inner, outer, batch) into shared memory, completing on bar.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                         int inner, int outer, int batch) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(batch),
                 "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Shared-memory matrix descriptor for the 128-byte swizzle (layout type 1 in bits 62-63).
// Addresses and offsets in bytes, encoded in 16-byte units.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) |
           (static_cast<uint64_t>((lbo & 0x3FFFFu) >> 4) << 16) |
           (static_cast<uint64_t>((sbo & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}

// D (64 x N, fp32, in registers) += A (64 x 16) * B (16 x N), both fp16 in shared memory.
// TA / TB: 0 when the operand is K-major in shared memory, 1 when M- (N-) major.
template <int N, int TA, int TB> struct Wgmma;

template <int TA, int TB> struct Wgmma<64, TA, TB> {
    __device__ __forceinline__ static void run(float (&d)[32], uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                     "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                     "%24, %25, %26, %27, %28, %29, %30, %31"
                     "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                       "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
                       "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                       "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
                       "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                       "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                       "+f"(d[30]), "+f"(d[31])
                     : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB));
    }
};

template <int TA, int TB> struct Wgmma<128, TA, TB> {
    __device__ __forceinline__ static void run(float (&d)[64], uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                     "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                     "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
                     "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
                     "%60, %61, %62, %63"
                     "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                       "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
                       "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                       "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
                       "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                       "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                       "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                       "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
                       "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
                       "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
                       "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                       "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                     : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB));
    }
};

template <int TA, int TB> struct Wgmma<192, TA, TB> {
    __device__ __forceinline__ static void run(float (&d)[96], uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                     "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                     "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
                     "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
                     "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
                     "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "
                     "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                     "}, %96, %97, p, 1, 1, %99, %100;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                       "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
                       "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                       "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
                       "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                       "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                       "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                       "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
                       "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
                       "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
                       "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                       "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
                       "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
                       "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]),
                       "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),
                       "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
                       "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]),
                       "+f"(d[95])
                     : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB));
    }
};

template <int TA, int TB> struct Wgmma<256, TA, TB> {
    __device__ __forceinline__ static void run(float (&d)[128], uint64_t da, uint64_t db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                     "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                     "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
                     "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
                     "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
                     "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "
                     "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                     "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
                     "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "
                     "%120, %121, %122, %123, %124, %125, %126, %127"
                     "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                       "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
                       "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                       "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
                       "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                       "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                       "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                       "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
                       "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
                       "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
                       "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                       "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
                       "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
                       "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]),
                       "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),
                       "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
                       "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]),
                       "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
                       "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
                       "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
                       "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]),
                       "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                       "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]),
                       "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB));
    }
};


// ------------------------------------------------------------------------------------------------
// The kernel

constexpr int kBlockM = 128, kBlockK = 64, kThreads = 384;
constexpr int kTileBytesA = kBlockM * kBlockK * 2;
// One 64 x 64 fp16 block in the 128-byte swizzle: 64 rows of 128 bytes. A K-major tile is 64
// consecutive rows per warpgroup; an MN-major tile is one such block per 64 columns.
constexpr int kSwizzleBlock = 64 * 128;

struct Params {
    const void *c;
    void *d;
    int m, n, tiles_m, tiles_n, k_tiles;
    int a_batched, b_batched;
    int64_t ldc, stride_c;
    int64_t tiles; // tiles_m * tiles_n * batch: the persistent kernels' work list
    Epilogue epi;
};

// The epilogue stages each warpgroup's fp32 accumulators through shared memory (the pipeline's
// stages, free by then) so that D is written in coalesced 16-byte rows: padded by 8 floats, the
// fragment stores of one warp touch every bank at most twice.
template <int BN> __host__ __device__ constexpr int staging_pitch() { return BN + 8; }

template <int BN, int STAGES> constexpr int smem_bytes() {
    return STAGES * (kTileBytesA + BN * kBlockK * 2) + 2 * STAGES * 8 + 1024;
}

__device__ __forceinline__ void named_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ------------------------------------------------------------------------------------------------
// The pipeline, shared by both kernel forms: one producer thread fills a ring of STAGES stages
// with TMA copies (full_bars[s] completes when stage s has landed); the two consumer warpgroups
// run wgmma on each stage and give it back (empty_bars[s], one arrival per consumer warp).

template <int STAGES>
__device__ __forceinline__ void init_ring(uint32_t full_bars, uint32_t empty_bars) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full_bars + 8 * s, 1);
            mbar_init(empty_bars + 8 * s, 8); // one arrival per consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
}

// The producer's copies for one output tile's K steps. s / phase: the ring position, carried
// from tile to tile.
template <int BN, int STAGES, int TA, int TB>
__device__ __forceinline__ void produce_tile(const CUtensorMap *map_a, const CUtensorMap *map_b,
                                             uint32_t smem_a, uint32_t smem_b,
                                             uint32_t full_bars, uint32_t empty_bars, int m0,
                                             int n0, int za, int zb, int k_tiles, int &s,
                                             uint32_t &phase) {
    constexpr int kTileBytesB = BN * kBlockK * 2;
    for (int t = 0; t < k_tiles; ++t) {
        mbar_wait(empty_bars + 8 * s, phase ^ 1u);
        const uint32_t bar = full_bars + 8 * s;
        // out-of-bounds elements are zero-filled and still counted: always full boxes
        mbar_expect_tx(bar, kTileBytesA + kTileBytesB);
        const int k0 = t * kBlockK;
        const uint32_t a_dst = smem_a + s * kTileBytesA, b_dst = smem_b + s * kTileBytesB;
        if (TA) {
#pragma unroll
            for (int j = 0; j < kBlockM / 64; ++j)
                tma_load(a_dst + j * kSwizzleBlock, map_a, bar, m0 + 64 * j, k0, za);
        } else {
            tma_load(a_dst, map_a, bar, k0, m0, za);
        }
        if (TB) {
#pragma unroll
            for (int j = 0; j < BN / 64; ++j)
                tma_load(b_dst + j * kSwizzleBlock, map_b, bar, n0 + 64 * j, k0, zb);
        } else {
            tma_load(b_dst, map_b, bar, k0, n0, zb);
        }
        if (++s == STAGES) s = 0, phase ^= 1u;
    }
}

// A consumer warpgroup's K loop for one output tile (its rows 64 * half .. + 63): acc += A * B
// over k_tiles stages, each stage but the last given back as soon as its wgmma group is done.
// Returns with every group complete and the last stage still held: its index.
template <int BN, int STAGES, int TA, int TB>
__device__ __forceinline__ int consume_tile(float (&acc)[BN / 2], uint32_t smem_a,
                                            uint32_t smem_b, uint32_t full_bars,
                                            uint32_t empty_bars, int half, int lane, int k_tiles,
                                            int &s, uint32_t &phase) {
    constexpr int kTileBytesB = BN * kBlockK * 2;
    int prev_s = s;
    for (int t = 0; t < k_tiles; ++t) {
        mbar_wait(full_bars + 8 * s, phase);
        const uint32_t a_tile = smem_a + s * kTileBytesA + half * kSwizzleBlock;
        const uint32_t b_tile = smem_b + s * kTileBytesB;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBlockK / 16; ++kk) {
            // K-major: the 16-element K step is 32 bytes along the swizzled row (8-row groups
            // 1024 bytes apart); MN-major: 16 rows of 128 bytes further (64-column blocks
            // kSwizzleBlock apart, 8-row K groups 1024 bytes apart)
            const uint64_t da = TA ? smem_desc(a_tile + kk * 2048, kSwizzleBlock, 1024)
                                   : smem_desc(a_tile + kk * 32, 16, 1024);
            const uint64_t db = TB ? smem_desc(b_tile + kk * 2048, kSwizzleBlock, 1024)
                                   : smem_desc(b_tile + kk * 32, 16, 1024);
            Wgmma<BN, TA, TB>::run(acc, da, db);
        }
        wgmma_commit();
        // the previous step's group is done: its stage goes back to the producer
        wgmma_wait<1>();
        if (t > 0 && lane == 0) mbar_arrive(empty_bars + 8 * prev_s);
        prev_s = s;
        if (++s == STAGES) s = 0, phase ^= 1u;
    }
    wgmma_wait<0>();
    return prev_s;
}

// TA / TB: whether A / B is MN-major in memory (A stored K x M, B stored K x N).
template <int BN, int STAGES, int TA, int TB>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_f16(const __grid_constant__ CUtensorMap map_a,
                   const __grid_constant__ CUtensorMap map_b, const Params p) {
    constexpr int kTileBytesB = BN * kBlockK * 2;
    static_assert(BN % 64 == 0 && BN <= 256, "BN: whole 64-column swizzle blocks, at most 256");
    static_assert(STAGES * (kTileBytesA + kTileBytesB) >=
                      kBlockM * staging_pitch<BN>() * (int)sizeof(float),
                  "the epilogue's staging must fit in the pipeline's stages");
    extern __shared__ unsigned char smem_raw[];
    // the 128-byte swizzle repeats every 1024 bytes: stages start on that boundary so the copy
    // engine and the tensor cores agree on the pattern (descriptor base offset 0)
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t smem_a = base, smem_b = base + STAGES * kTileBytesA;
    const uint32_t full_bars = smem_b + STAGES * kTileBytesB, empty_bars = full_bars + 8 * STAGES;

    // groups of 8 tile rows sweep N together: neighbouring blocks share their A and B in L2
    const int group_tiles = 8 * p.tiles_n;
    const int first_m = (int)(blockIdx.x / group_tiles) * 8;
    const int group_rows = min(p.tiles_m - first_m, 8);
    const int in_group = (int)blockIdx.x - first_m * p.tiles_n;
    const int m0 = (first_m + in_group % group_rows) * kBlockM, n0 = (in_group / group_rows) * BN;
    const int z = (int)blockIdx.z;

    init_ring<STAGES>(full_bars, empty_bars);
    const int warpgroup = (int)threadIdx.x / 128;
    if (warpgroup == 0) {
        // producer: one thread issues every copy; the warpgroup gives its registers away
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");
        if (threadIdx.x == 0) {
            int s = 0;
            uint32_t phase = 0;
            produce_tile<BN, STAGES, TA, TB>(&map_a, &map_b, smem_a, smem_b, full_bars, empty_bars,
                                             m0, n0, p.a_batched ? z : 0, p.b_batched ? z : 0,
                                             p.k_tiles, s, phase);
        }
        return;
    }

    // consumers: warpgroup 1 rows 0..63 of the tile, warpgroup 2 rows 64..127
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");
    const int half = warpgroup - 1;
    const int warp = ((int)threadIdx.x / 32) & 3, lane = (int)threadIdx.x & 31;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    int s = 0;
    uint32_t phase = 0;
    consume_tile<BN, STAGES, TA, TB>(acc, smem_a, smem_b, full_bars, empty_bars, half, lane,
                                     p.k_tiles, s, phase);

    // both consumer warpgroups are done reading the stages: stage the accumulators there.
    // Fragment layout of m64nNk16: warp w holds rows 16w + lane/4 (+8), columns 8j + 2(lane%4).
    named_barrier(1, 256);
    float *staging = reinterpret_cast<float *>(smem_raw + (base - smem_addr(smem_raw))) +
                     half * 64 * staging_pitch<BN>();
    {
        const int r = warp * 16 + lane / 4, c = 2 * (lane & 3);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
                *reinterpret_cast<float2 *>(staging + (r + 8 * h) * staging_pitch<BN>() + c +
                                            8 * j) = make_float2(acc[4 * j + 2 * h],
                                                                 acc[4 * j + 2 * h + 1]);
        }
    }
    named_barrier(2 + half, 128);

    const int64_t z_off = (int64_t)z * p.stride_c;
    const int row0 = m0 + half * 64;
    constexpr int kChunksPerRow = BN / 8;
#pragma unroll 1
    for (int i = (int)threadIdx.x & 127; i < 64 * kChunksPerRow; i += 128) {
        const int r = i / kChunksPerRow, col = n0 + (i % kChunksPerRow) * 8;
        if (row0 + r >= p.m || col >= p.n) continue;
        epilogue_eight(p.epi, p.c, p.d, z_off + (int64_t)(row0 + r) * p.ldc + col, col,
                       min(8, p.n - col), staging + r * staging_pitch<BN>() + (col - n0));
    }
}

// The persistent form: one block per multiprocessor walks the tiles of every matrix of the
// batch. The producer runs on into the next tile's K steps while the consumers finish the
// previous tile's epilogue, so that epilogue no longer leaves the copy engine idle; to keep the
// ring free for that, each consumer warp stages its 16 rows through a private 16 x 64 fp32
// buffer (64 columns at a time) instead of the ring.
constexpr int kWarpStagePitch = 64 + 8;
constexpr int kWarpStageBytes = 16 * kWarpStagePitch * 4;

template <int BN, int STAGES> constexpr int persistent_smem_bytes() {
    return STAGES * (kTileBytesA + BN * kBlockK * 2) + 8 * kWarpStageBytes + 2 * STAGES * 8 +
           1024;
}

// Tile index -> origin: the batch's matrix, then groups of 8 tile rows sweeping N (as above).
template <int BN>
__device__ __forceinline__ void tile_origin(int64_t tile, const Params &p, int *m0, int *n0,
                                            int *z) {
    const int64_t per_matrix = (int64_t)p.tiles_m * p.tiles_n;
    *z = (int)(tile / per_matrix);
    const int in_matrix = (int)(tile - *z * per_matrix);
    const int group_tiles = 8 * p.tiles_n;
    const int first_m = (in_matrix / group_tiles) * 8;
    const int group_rows = min(p.tiles_m - first_m, 8);
    const int in_group = in_matrix - first_m * p.tiles_n;
    *m0 = (first_m + in_group % group_rows) * kBlockM;
    *n0 = (in_group / group_rows) * BN;
}

template <int BN, int STAGES, int TA, int TB>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_f16_persistent(const __grid_constant__ CUtensorMap map_a,
                              const __grid_constant__ CUtensorMap map_b, const Params p) {
    constexpr int kTileBytesB = BN * kBlockK * 2;
    static_assert(BN % 64 == 0 && BN <= 256, "BN: whole 64-column swizzle blocks, at most 256");
    extern __shared__ unsigned char smem_raw[];
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t smem_a = base, smem_b = base + STAGES * kTileBytesA;
    const uint32_t stage_area = smem_b + STAGES * kTileBytesB;
    const uint32_t full_bars = stage_area + 8 * kWarpStageBytes,
                   empty_bars = full_bars + 8 * STAGES;

    init_ring<STAGES>(full_bars, empty_bars);
    const int warpgroup = (int)threadIdx.x / 128;
    if (warpgroup == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");
        if (threadIdx.x == 0) {
            int s = 0;
            uint32_t phase = 0;
            for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
                int m0, n0, z;
                tile_origin<BN>(tile, p, &m0, &n0, &z);
                produce_tile<BN, STAGES, TA, TB>(&map_a, &map_b, smem_a, smem_b, full_bars,
                                                 empty_bars, m0, n0, p.a_batched ? z : 0,
                                                 p.b_batched ? z : 0, p.k_tiles, s, phase);
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");
    const int half = warpgroup - 1;
    const int warp = ((int)threadIdx.x / 32) & 3, lane = (int)threadIdx.x & 31;
    float *warp_stage = reinterpret_cast<float *>(smem_raw + (stage_area - smem_addr(smem_raw))) +
                        (half * 4 + warp) * (kWarpStageBytes / 4);
    int s = 0;
    uint32_t phase = 0;
    for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
        int m0, n0, z;
        tile_origin<BN>(tile, p, &m0, &n0, &z);
        float acc[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        const int last = consume_tile<BN, STAGES, TA, TB>(acc, smem_a, smem_b, full_bars,
                                                          empty_bars, half, lane, p.k_tiles, s,
                                                          phase);
        // the tile's last stage goes back too: the producer is already filling the next tile
        if (lane == 0) mbar_arrive(empty_bars + 8 * last);

        // the warp's 16 rows, 64 columns at a time: fragments in, coalesced 8-column runs out.
        // The chunks are a loop, not unrolled, so that the epilogue (every activation, both
        // output types) exists once in the kernel rather than once per chunk; only the fragment
        // stores are unrolled, so that the accumulators keep constant indices.
        const int64_t z_off = (int64_t)z * p.stride_c;
        const int row0 = m0 + half * 64 + warp * 16;
#pragma unroll 1
        for (int chunk = 0; chunk < BN / 64; ++chunk) {
            __syncwarp();
#pragma unroll
            for (int fc = 0; fc < BN / 64; ++fc) {
                if (fc != chunk) continue;
#pragma unroll
                for (int jj = 0; jj < 8; ++jj) {
                    const int j = fc * 8 + jj;
#pragma unroll
                    for (int h = 0; h < 2; ++h)
                        *reinterpret_cast<float2 *>(warp_stage +
                                                    (lane / 4 + 8 * h) * kWarpStagePitch +
                                                    2 * (lane & 3) + 8 * jj) =
                            make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
                }
            }
            __syncwarp();
#pragma unroll 1
            for (int i = lane; i < 16 * 8; i += 32) {
                const int r = i / 8, c = (i % 8) * 8;
                const int row = row0 + r, col = n0 + chunk * 64 + c;
                if (row >= p.m || col >= p.n) continue;
                epilogue_eight(p.epi, p.c, p.d, z_off + (int64_t)row * p.ldc + col, col,
                               min(8, p.n - col), warp_stage + r * kWarpStagePitch + c);
            }
        }
    }
}

using KernelFn = void (*)(CUtensorMap, CUtensorMap, Params);

struct GemmConfig {
    const char *name;
    int bn, smem;
    int persistent; // one block per multiprocessor, walking the tiles
    KernelFn kernel[4]; // by trans_a * 2 + trans_b
};

#define TCI_WGMMA_KERNELS(BN, S)                                                                  \
    {                                                                                             \
        wgmma_gemm_f16<BN, S, 0, 1>, wgmma_gemm_f16<BN, S, 0, 0>, wgmma_gemm_f16<BN, S, 1, 1>,    \
            wgmma_gemm_f16<BN, S, 1, 0>                                                           \
    }

#define TCI_WGMMA_PERSISTENT_KERNELS(BN, S)                                                       \
    {                                                                                             \
        wgmma_gemm_f16_persistent<BN, S, 0, 1>, wgmma_gemm_f16_persistent<BN, S, 0, 0>,           \
            wgmma_gemm_f16_persistent<BN, S, 1, 1>, wgmma_gemm_f16_persistent<BN, S, 1, 0>        \
    }

const GemmConfig kConfigs[] = {
    {"128x256x64 s4", 256, smem_bytes<256, 4>(), 0, TCI_WGMMA_KERNELS(256, 4)},
    {"128x192x64 s5", 192, smem_bytes<192, 5>(), 0, TCI_WGMMA_KERNELS(192, 5)},
    {"128x128x64 s6", 128, smem_bytes<128, 6>(), 0, TCI_WGMMA_KERNELS(128, 6)},
    {"128x64x64 s8", 64, smem_bytes<64, 8>(), 0, TCI_WGMMA_KERNELS(64, 8)},
    {"128x256x64 s3 persistent", 256, persistent_smem_bytes<256, 3>(), 1,
     TCI_WGMMA_PERSISTENT_KERNELS(256, 3)},
    {"128x192x64 s4 persistent", 192, persistent_smem_bytes<192, 4>(), 1,
     TCI_WGMMA_PERSISTENT_KERNELS(192, 4)},
    {"128x128x64 s5 persistent", 128, persistent_smem_bytes<128, 5>(), 1,
     TCI_WGMMA_PERSISTENT_KERNELS(128, 5)},
};
constexpr int kConfigCount = static_cast<int>(sizeof kConfigs / sizeof kConfigs[0]);

// ------------------------------------------------------------------------------------------------
// Host side

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The checks of every tcinfer GEMM family, then this one's element types.
tci_status validate(const char *who, const kern_wgmma_gemm_desc *d, int64_t bn, kern_gemm_lds *out) {
    TRY_STATUS(kern_gemm_desc_check(who, d, kBlockM, bn, out));
    if (d->out_dtype != TCI_DTYPE_FLOAT16 && d->out_dtype != TCI_DTYPE_FLOAT)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: out_dtype %s: the wgmma GEMM writes float16 or float", who,
                         tci_dtype_name(d->out_dtype));
    if (d->in_dtype != TCI_DTYPE_FLOAT16 && d->in_dtype != TCI_DTYPE_UNDEFINED)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: in_dtype %s: the wgmma GEMM reads float16", who,
                         tci_dtype_name(d->in_dtype));
    return TCI_OK;
}

tci_status check_pointers(const char *who, const kern_wgmma_gemm_desc *d, const void *a,
                          const void *b, const float *bias, const void *c, const void *dst) {
    if (!a || !b || !dst)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: a, b and d must not be NULL", who);
    if (d->has_bias && !bias)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: has_bias but bias is NULL", who);
    if (d->beta != 0.0f && !c)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: beta %g needs C, which is NULL", who,
                         (double)d->beta);
    const uintptr_t misaligned = ((uintptr_t)a | (uintptr_t)b | (uintptr_t)dst |
                                  (d->beta != 0.0f ? (uintptr_t)c : 0) |
                                  (d->has_bias ? (uintptr_t)bias : 0)) & 15u;
    if (misaligned)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: a, b, c, d and bias must be 16-byte aligned", who);
    return TCI_OK;
}

// One operand as a 3-d tensor (inner, outer, batch) of fp16 with 64 x box_outer boxes in the
// 128-byte swizzle. Unbatched or broadcast operands get one matrix.
tci_status encode_operand(const char *who, const char *which,
                          PFN_cuTensorMapEncodeTiled_v12000 encode, CUtensorMap *map,
                          const void *ptr, int64_t inner, int64_t outer, int64_t ld,
                          int64_t batches, int64_t batch_stride, uint32_t box_outer) {
    const cuuint64_t dims[3] = {(cuuint64_t)inner, (cuuint64_t)outer, (cuuint64_t)batches};
    const cuuint64_t strides[2] = {(cuuint64_t)ld * 2u, (cuuint64_t)batch_stride * 2u};
    const cuuint32_t box[3] = {64u, box_outer, 1u};
    const cuuint32_t element_strides[3] = {1u, 1u, 1u};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, const_cast<void *>(ptr),
                              dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: the copy engine refuses operand %s (%lld x %lld, row pitch %lld, "
                         "%lld matrices %lld apart): cuTensorMapEncodeTiled error %d",
                         who, which, (long long)outer, (long long)inner, (long long)ld,
                         (long long)batches, (long long)batch_stride, (int)r);
    return TCI_OK;
}

} // namespace

extern "C" {

int kern_wgmma_gemm_config_count(void) { return kConfigCount; }

const char *kern_wgmma_gemm_config_name(int config) {
    return config >= 0 && config < kConfigCount ? kConfigs[config].name : nullptr;
}

int kern_wgmma_gemm_config_smem_bytes(int config) {
    return config >= 0 && config < kConfigCount ? kConfigs[config].smem : 0;
}

int kern_wgmma_gemm_pick_config(const kern_wgmma_gemm_desc *desc, int sm_count) {
    int best = 0;
    for (int i = 0; i < kConfigCount; ++i)
        if (kConfigs[i].persistent) {
            best = i;
            break;
        }
    if (!desc || desc->m < 1 || desc->n < 1 || sm_count < 1) return best;
    const int64_t batch = desc->batch > 0 ? desc->batch : 1;
    // the persistent configurations were the fastest on every shape measured (docs/benchmarks.md);
    // among them: busy fraction of the multiprocessors over the waves of tiles, and of the last
    // tile column inside N, with a mild preference for the wider tiles (more reuse of A)
    double best_score = -1.0;
    int rank = 0;
    for (int i = 0; i < kConfigCount; ++i) {
        if (!kConfigs[i].persistent) continue;
        const int64_t tiles_n = ceil_div(desc->n, kConfigs[i].bn);
        const int64_t tiles = ceil_div(desc->m, kBlockM) * tiles_n * batch;
        const int64_t waves = ceil_div(tiles, sm_count);
        const double fill = (double)tiles / (double)(waves * sm_count);
        const double inside = (double)desc->n / (double)(tiles_n * kConfigs[i].bn);
        const double score = fill * inside * (1.0 - 0.04 * rank++);
        if (score > best_score) best_score = score, best = i;
    }
    return best;
}

tci_status kern_wgmma_gemm_supports(const kern_wgmma_gemm_desc *desc, int config) {
    static const char who[] = "kern_wgmma_gemm";
    if (config < 0 || config >= kConfigCount)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: config %d outside 0..%d", who, config,
                         kConfigCount - 1);
    kern_gemm_lds r{};
    TRY_STATUS(validate(who, desc, kConfigs[config].bn, &r));
    if (r.lda % 8 || r.ldb % 8 || r.ldc % 8)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: lda %lld, ldb %lld, ldc %lld: each must be a multiple of 8 "
                         "(16-byte row pitches for the copy engine); pad the rows",
                         who, (long long)r.lda, (long long)r.ldb, (long long)r.ldc);
    if (desc->batch > 1 && (desc->stride_a % 8 || desc->stride_b % 8 || desc->stride_c % 8))
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: batch strides %lld, %lld, %lld: each must be a multiple of 8", who,
                         (long long)desc->stride_a, (long long)desc->stride_b,
                         (long long)desc->stride_c);
    return TCI_OK;
}

tci_status kern_wgmma_gemm_device_supported(void) {
    int device = 0, major = 0, minor = 0;
    KERN_CUDA_CHECK(cudaGetDevice(&device));
    KERN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    KERN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major != 9 || minor != 0)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "kern_wgmma_gemm: device %d has compute capability %d.%d; the wgmma "
                         "kernels exist for 9.0 (sm_90a) only",
                         device, major, minor);
    return TCI_OK;
}

tci_status kern_wgmma_gemm_run(const kern_wgmma_gemm_desc *desc, int config, const void *a,
                               const void *b, const float *bias, const void *c, void *d,
                               cudaStream_t stream) {
    static const char who[] = "kern_wgmma_gemm_run";
    TRY_STATUS(kern_wgmma_gemm_supports(desc, config));
    TRY_STATUS(check_pointers(who, desc, a, b, bias, c, d));
    TRY_STATUS(kern_wgmma_gemm_device_supported());
    const GemmConfig &g = kConfigs[config];
    int device = 0, limit = 0;
    KERN_CUDA_CHECK(cudaGetDevice(&device));
    KERN_CUDA_CHECK(
        cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (g.smem > limit)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s: config %s needs %d bytes of shared memory, the device grants %d",
                         who, g.name, g.smem, limit);
    kern_gemm_lds r{};
    TRY_STATUS(validate(who, desc, g.bn, &r));

    // the driver's tensor-map encoder, found through the runtime so that nothing links libcuda
    void *entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    KERN_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000,
                                                     cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !entry)
        return status_error(TCI_ERR_UNSUPPORTED, "%s: the driver has no cuTensorMapEncodeTiled",
                         who);
    const PFN_cuTensorMapEncodeTiled_v12000 encode =
        reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);

    const bool batched = desc->batch > 1;
    const bool a_batched = batched && desc->stride_a != 0, b_batched = batched && desc->stride_b != 0;
    const int64_t a_rows = desc->trans_a ? desc->k : desc->m;
    const int64_t a_cols = desc->trans_a ? desc->m : desc->k;
    const int64_t b_rows = desc->trans_b ? desc->n : desc->k;
    const int64_t b_cols = desc->trans_b ? desc->k : desc->n;
    CUtensorMap map_a, map_b;
    // K-major operands come in as one (64 of K) x (rows of the tile) box, MN-major ones as
    // (64 of M or N) x (64 of K) boxes
    TRY_STATUS(encode_operand(who, "A", encode, &map_a, a, a_cols, a_rows, r.lda,
                           a_batched ? desc->batch : 1,
                           a_batched ? desc->stride_a : a_rows * r.lda,
                           desc->trans_a ? 64u : (uint32_t)kBlockM));
    TRY_STATUS(encode_operand(who, "B", encode, &map_b, b, b_cols, b_rows, r.ldb,
                           b_batched ? desc->batch : 1,
                           b_batched ? desc->stride_b : b_rows * r.ldb,
                           desc->trans_b ? (uint32_t)g.bn : 64u));

    Params p;
    p.c = c, p.d = d;
    p.m = (int)desc->m, p.n = (int)desc->n;
    p.tiles_m = (int)ceil_div(desc->m, kBlockM), p.tiles_n = (int)ceil_div(desc->n, g.bn);
    p.k_tiles = (int)ceil_div(desc->k, kBlockK);
    p.a_batched = a_batched, p.b_batched = b_batched;
    p.ldc = r.ldc, p.stride_c = batched ? desc->stride_c : 0;
    p.tiles = (int64_t)p.tiles_m * p.tiles_n * desc->batch;
    p.epi.bias = desc->has_bias ? bias : nullptr;
    p.epi.alpha = desc->alpha, p.epi.beta = desc->beta;
    p.epi.act_alpha = desc->act_alpha, p.epi.act_beta = desc->act_beta;
    p.epi.act = (int)desc->act, p.epi.has_bias = desc->has_bias != 0;
    p.epi.has_c = desc->beta != 0.0f;
    p.epi.out = desc->out_dtype == TCI_DTYPE_FLOAT ? gemm_epilogue::kOutF32 : gemm_epilogue::kOutF16;

    const KernelFn kernel = g.kernel[desc->trans_a * 2 + desc->trans_b];
    // per call rather than once: no global state, and it follows the current device
    KERN_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, g.smem));
    dim3 grid((unsigned)(p.tiles_m * p.tiles_n), 1, (unsigned)desc->batch);
    if (g.persistent) {
        int sm_count = 0;
        KERN_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
        grid = dim3((unsigned)(p.tiles < sm_count ? p.tiles : sm_count), 1, 1);
    }
    kernel<<<grid, kThreads, g.smem, stream>>>(map_a, map_b, p);
    KERN_LAUNCH_CHECK("wgmma_gemm_f16");
    return TCI_OK;
}

} // extern "C"
