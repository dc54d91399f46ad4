/* tcinfer's Hopper GEMM: fp16 A and B, fp32 accumulation on the warpgroup tensor-core
 * instructions (wgmma, sm_90a only), tiles brought in by the bulk tensor copy engine (TMA), and
 * the same fused fp32 epilogue and problem semantics as the WMMA family (wmma_gemm.h). Another
 * candidate for the planner's autotuner. C API over src/kernels/wgmma_gemm.cu. */
#ifndef TCI_KERNELS_WGMMA_GEMM_H
#define TCI_KERNELS_WGMMA_GEMM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/wmma_gemm.h"
#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The problem is described by the WMMA family's descriptor, field for field the same meaning
 * (see kern_wmma_gemm_desc in wmma_gemm.h; kern_wmma_gemm_desc_init gives the defaults):
 *   D = act(alpha * op(A) op(B) + beta * C + bias[column]), row-major, batched through
 *   blockIdx.z with per-batch strides (0 broadcasts A or B), every term applied to the fp32
 *   accumulator and one rounding to out_dtype (TCI_DTYPE_FLOAT16 or TCI_DTYPE_FLOAT).
 * All four transpose combinations run: A stored M x K or (trans_a) K x M, B stored K x N or
 * (trans_b) N x K. */
typedef kern_wmma_gemm_desc kern_wgmma_gemm_desc;

/* How it works, for whoever tunes it: a block of three warpgroups computes 128 x BN tiles.
 * Warpgroup 0 is the producer: one thread walks K in steps of 64 and has the copy engine bring
 * the A (128 x 64) and B (BN x 64) tiles of each step into a ring of shared-memory stages, in
 * the 128-byte swizzled layout the tensor cores read, each stage's arrival signalled on an
 * mbarrier. Warpgroups 1 and 2 each own 64 rows of the tile and issue m64nBNk16 wgmma
 * instructions straight from shared memory, keeping one group of them in flight while they hand
 * the previous stage back to the producer. The copy engine zero-fills everything outside the
 * matrices, so tails in M, N and K cost nothing and need no padding; the epilogue stages the
 * fp32 accumulators through shared memory and writes only the elements inside D, in coalesced
 * 16-byte runs. Two kinds of configuration:
 *   - one block per tile (grid: tiles x batch); the epilogue reuses the ring's memory;
 *   - "persistent": one block per multiprocessor walks the tiles of the whole batch, and the
 *     producer loads the next tile while the consumers run the previous tile's epilogue (each
 *     consumer warp stages its rows through a small buffer of its own). Faster on every shape
 *     measured so far (docs/benchmarks.md), at one pipeline stage less.
 *
 * Refused with TCI_ERR_UNSUPPORTED (by kern_wgmma_gemm_supports, host only):
 *   - lda, ldb or ldc not a multiple of 8 elements, or (batch > 1) a batch stride stride_a,
 *     stride_b, stride_c not a multiple of 8: the copy engine needs 16-byte row pitches;
 *   - an out_dtype other than float16 or float, or an in_dtype other than float16
 *     (TCI_ERR_INVALID_ARGUMENT, as in the WMMA family).
 * Refused with TCI_ERR_UNSUPPORTED by kern_wgmma_gemm_run only (they need the device):
 *   - a device that is not compute capability 9.0 (the code exists for sm_90a alone; nothing is
 *     launched), see kern_wgmma_gemm_device_supported;
 *   - a configuration whose shared memory exceeds what the device grants a block;
 *   - a layout the copy engine's descriptor rejects (row pitch or batch stride of 2^40 bytes or
 *     more, a dimension above 2^32).
 * Pointers a, b, c, d and bias must be 16-byte aligned. K needs no alignment. */

/* Number of tile configurations; configurations are 0..count-1. */
int kern_wgmma_gemm_config_count(void);

/* "128x256x64 s4", "128x192x64 s4 persistent" (block tile MxNxK, pipeline stages, kind);
 * NULL outside the range. */
const char *kern_wgmma_gemm_config_name(int config);

/* Dynamic shared memory (bytes) of the configuration (the same for every transpose); 0 outside
 * the range. */
int kern_wgmma_gemm_config_smem_bytes(int config);

/* A starting point for the planner (which then times the candidates): the persistent
 * configuration whose tiles fill sm_count multiprocessors in whole waves best, the wider tile on
 * a tie. */
int kern_wgmma_gemm_pick_config(const kern_wgmma_gemm_desc *desc, int sm_count);

/* Whether the configuration runs this problem. TCI_OK; TCI_ERR_INVALID_ARGUMENT for a bad desc
 * (sizes, leading dimensions smaller than the stored rows, overlapping D, unknown act or output
 * type, config out of range); TCI_ERR_UNSUPPORTED as listed above. Host only, no device. */
tci_status kern_wgmma_gemm_supports(const kern_wgmma_gemm_desc *desc, int config);

/* TCI_OK when the current device can run these kernels (compute capability 9.0: H100, H200);
 * TCI_ERR_UNSUPPORTED, with the device's capability in the message, otherwise; TCI_ERR_CUDA. */
tci_status kern_wgmma_gemm_device_supported(void);

/* Enqueues the GEMM on stream: no allocation, no synchronisation, capturable in a CUDA graph
 * (the copy descriptors travel inside the kernel's parameters). bias: n fp32 values when
 * desc->has_bias (ignored otherwise). c: needed when beta != 0 (may be d itself).
 * Errors: those of kern_wgmma_gemm_supports; TCI_ERR_INVALID_ARGUMENT for a NULL or misaligned
 * pointer; TCI_ERR_UNSUPPORTED as listed above; TCI_ERR_CUDA. */
tci_status kern_wgmma_gemm_run(const kern_wgmma_gemm_desc *desc, int config, const void *a,
                               const void *b, const float *bias, const void *c, void *d,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
