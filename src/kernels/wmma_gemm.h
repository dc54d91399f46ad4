/* tcinfer's own tensor-core GEMMs on the CUDA WMMA API: a tiled, cp.async-pipelined fp16 GEMM
 * family with a fused fp32 epilogue (the planner's alternative to cuBLASLt, same problem
 * semantics as gemm_cublas.h), and one simpler kernel for every other WMMA element type and
 * fragment shape. C API over src/kernels/wmma_gemm.cu. */
#ifndef TCI_KERNELS_WMMA_GEMM_H
#define TCI_KERNELS_WMMA_GEMM_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tcinfer.h"
#include "util/elementwise.h"

#ifdef __cplusplus
extern "C" {
#endif

/* D = act(alpha * op(A) op(B) + beta * C + bias[column]), all matrices row-major as in
 * gemm_cublas.h: op(A) is M x K, op(B) K x N, C and D M x N and share one layout (ldc,
 * stride_c). A is stored M x K (K x M when trans_a), B K x N (N x K when trans_b). Every term is
 * applied to the fp32 accumulator (bias and C included) and the result is rounded once to the
 * output type. beta == 0 reads no C. C may be D itself (exactly: each element is read before
 * it is written by the same thread); no other overlap of D with an input is allowed.
 * Matrix i of the batch is at a + i * stride_a (likewise b; c and d at i * stride_c). */
typedef struct kern_wmma_gemm_desc {
    int batch;              /* 1..65535 */
    int64_t m, n, k;        /* each 1..2^31-1 */
    int trans_a, trans_b;   /* 0 or 1 */
    int64_t lda, ldb, ldc;  /* row strides in elements; 0 = packed (the stored column count) */
    /* elements between consecutive matrices of the batch (ignored when batch == 1). 0
     * broadcasts A or B to every batch; stride_c must keep the D matrices apart (>= m * ldc). */
    int64_t stride_a, stride_b, stride_c;
    float alpha, beta;
    int has_bias;           /* bias: n fp32 values, shared by every batch */
    act_kind act;           /* any, as in util/elementwise.h; precise fp32 functions */
    float act_alpha, act_beta;
    /* type of D (and of C). Flagship family: in_dtype (FLOAT16 or BFLOAT16) or TCI_DTYPE_FLOAT.
     * Variants: see kern_wmma_variant. */
    tci_dtype out_dtype;
    /* flagship family: type of A and B, TCI_DTYPE_FLOAT16 (or 0) or TCI_DTYPE_BFLOAT16 (the
     * bf16 twin, built for trans_a 0 only). Variants ignore it (their type is the variant's). */
    tci_dtype in_dtype;
} kern_wmma_gemm_desc;

/* Defaults: batch 1, packed, alpha 1, beta 0, no bias, no activation, fp16 in and out. */
void kern_wmma_gemm_desc_init(kern_wmma_gemm_desc *desc, int64_t m, int64_t n, int64_t k,
                              int trans_a, int trans_b);

/* Leading dimensions with 0 (packed) resolved to the stored column counts. */
typedef struct kern_gemm_lds {
    int64_t lda, ldb, ldc;
} kern_gemm_lds;

/* The checks every tcinfer GEMM family (WMMA, wgmma) makes of desc, element types aside: sizes,
 * transposes, leading dimensions against the stored columns, batch strides (D matrices apart),
 * the activation, and a tile_m x tile_n grid that fits 2^31-1 tiles. TCI_OK with *out filled, or
 * TCI_ERR_INVALID_ARGUMENT naming `who`. Host only. */
tci_status kern_gemm_desc_check(const char *who, const kern_wmma_gemm_desc *desc, int64_t tile_m,
                                int64_t tile_n, kern_gemm_lds *out);

/* ---- The flagship fp16 family ---------------------------------------------------------------
 * fp16 A and B, fp32 accumulation in 16x16x16 fragments, one kernel template instantiated per
 * tile configuration (block tile BMxBNxBK, warp tile, pipeline stages) and per (trans_a,
 * trans_b). Block tiles travel global -> shared memory by 16-byte cp.async in a 2-4 stage
 * pipeline, shared rows padded by 16 bytes so fragment loads hit distinct banks.
 * Tails in M, N and K (any K >= 1) are zero-filled by the copies themselves.
 * Refused with TCI_ERR_UNSUPPORTED: lda, ldb or ldc not a multiple of 8 elements, or a batch
 * stride (stride_a, stride_b, stride_c) not a multiple of 8 (each 16-byte copy has to start on
 * a 16-byte boundary: pad the rows, as the engine's NHWC8 layout does), and configurations
 * whose shared memory exceeds what the current device grants a block (run only).
 * Pointers handed to kern_wmma_gemm_run (a, b, c, d, bias) must be 16-byte aligned. */

/* Number of tile configurations; configurations are 0..count-1. */
int kern_wmma_gemm_config_count(void);

/* "128x128x32 s4 warp 64x64" (block tile MxNxK, stages, warp tile); NULL outside the range. */
const char *kern_wmma_gemm_config_name(int config);

/* Dynamic shared memory (bytes) the configuration needs for the given transposes; 0 outside
 * the range. */
int kern_wmma_gemm_config_smem_bytes(int config, int trans_a, int trans_b);

/* A starting point for the planner (which then times the candidates): the largest block tile
 * that still gives every one of sm_count multiprocessors about one block. */
int kern_wmma_gemm_pick_config(const kern_wmma_gemm_desc *desc, int sm_count);

/* Whether the configuration runs this problem. TCI_OK; TCI_ERR_INVALID_ARGUMENT for a bad desc
 * (sizes, leading dimensions smaller than the stored rows, overlapping D, unknown act or output
 * type, config out of range); TCI_ERR_UNSUPPORTED as listed above. Host only, no device. */
tci_status kern_wmma_gemm_supports(const kern_wmma_gemm_desc *desc, int config);

/* Enqueues the GEMM on stream: no allocation, no synchronisation, capturable in a CUDA graph.
 * bias: n fp32 values when desc->has_bias (ignored otherwise). c: needed when beta != 0.
 * Errors: those of kern_wmma_gemm_supports; TCI_ERR_INVALID_ARGUMENT for a NULL or misaligned
 * pointer; TCI_ERR_UNSUPPORTED when the device lacks the shared memory; TCI_ERR_CUDA. */
tci_status kern_wmma_gemm_run(const kern_wmma_gemm_desc *desc, int config, const void *a,
                              const void *b, const float *bias, const void *c, void *d,
                              cudaStream_t stream);

/* ---- Every other WMMA type and fragment shape -------------------------------------------------
 * Simpler kernels (4 warps, each 2x2 fragments, shared-memory tiles loaded element by element,
 * so any lda/ldb/ldc >= the stored columns, any alignment and any tails) that cover the rest
 * of the nvcuda::wmma API. Input types are those of A and B in memory; "acc" the accumulator
 * fragment's type; out the allowed desc.out_dtype (C, when beta != 0, has the same type):
 *   F16_*   : __half A, B;           out TCI_DTYPE_FLOAT16 or TCI_DTYPE_FLOAT, full epilogue
 *   BF16_*  : __nv_bfloat16 A, B, fp32 acc; out TCI_DTYPE_FLOAT, full epilogue
 *   TF32    : float A, B rounded to tf32 (precision::tf32), fp32 acc; out TCI_DTYPE_FLOAT, full
 *             epilogue (the future --precision tf32 mode)
 *   S8_*, U8_*: signed / unsigned char A, B, int32 acc; out TCI_DTYPE_INT32, D = A B exactly
 *             (alpha 1, beta 0, no bias, no act; anything else TCI_ERR_UNSUPPORTED)
 *   F64     : double A, B, C, D; D = alpha A B + beta C (no bias, no act)
 * The sub-byte experimental types (precision::s4, u4, b1) are not provided. */
typedef enum kern_wmma_variant {
    KERN_WMMA_F16_F32ACC_16X16X16 = 0,
    KERN_WMMA_F16_F32ACC_32X8X16,
    KERN_WMMA_F16_F32ACC_8X32X16,
    KERN_WMMA_F16_F16ACC_16X16X16, /* fp16 accumulation: error grows with K (about K * 2^-11) */
    KERN_WMMA_F16_F16ACC_32X8X16,
    KERN_WMMA_F16_F16ACC_8X32X16,
    KERN_WMMA_BF16_16X16X16,
    KERN_WMMA_BF16_32X8X16,
    KERN_WMMA_BF16_8X32X16,
    KERN_WMMA_TF32_16X16X8,
    KERN_WMMA_S8_16X16X16,
    KERN_WMMA_S8_32X8X16,
    KERN_WMMA_S8_8X32X16,
    KERN_WMMA_U8_16X16X16,
    KERN_WMMA_U8_32X8X16,
    KERN_WMMA_U8_8X32X16,
    KERN_WMMA_F64_8X8X4, /* the GPU-side fp64 reference GEMM */
    KERN_WMMA_VARIANT_COUNT
} kern_wmma_variant;

/* "f16 acc f32 16x16x16", ...; NULL outside the range. */
const char *kern_wmma_variant_name(kern_wmma_variant variant);

/* Bytes of one A/B element of the variant (2, 4, 1 or 8); 0 outside the range. */
int kern_wmma_variant_input_size(kern_wmma_variant variant);

/* Same contract as kern_wmma_gemm_supports, with the type rules above; no alignment or
 * leading-dimension refusals. */
tci_status kern_wmma_variant_supports(const kern_wmma_gemm_desc *desc, kern_wmma_variant variant);

/* Enqueues the variant's GEMM; same contract as kern_wmma_gemm_run, except that pointers need
 * only their element alignment. */
tci_status kern_wmma_variant_run(const kern_wmma_gemm_desc *desc, kern_wmma_variant variant,
                                 const void *a, const void *b, const float *bias, const void *c,
                                 void *d, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
