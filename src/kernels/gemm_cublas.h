/* Row-major (batched) GEMM through cuBLASLt with fused bias / ReLU / GELU epilogues: a plan made
 * once at engine build (algorithm from heuristics, optionally timed), then run many times. */
#ifndef TCI_KERNELS_GEMM_CUBLAS_H
#define TCI_KERNELS_GEMM_CUBLAS_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Applied to the fp32 accumulator before the single rounding to the output type. GELU is
 * cuBLASLt's tanh approximation 0.5x(1 + tanh(0.79788456(x + 0.044715x^3))), not the erf form
 * (ONNX Gelu approximate="none"); the two differ by up to about 5e-4 absolute. */
typedef enum {
    KERN_GEMM_EPILOGUE_NONE = 0,
    KERN_GEMM_EPILOGUE_BIAS,      /* + bias[column] */
    KERN_GEMM_EPILOGUE_RELU,
    KERN_GEMM_EPILOGUE_RELU_BIAS, /* relu(x + bias[column]) */
    KERN_GEMM_EPILOGUE_GELU,
    KERN_GEMM_EPILOGUE_GELU_BIAS, /* gelu(x + bias[column]) */
} kern_gemm_epilogue;

typedef enum {
    KERN_GEMM_FP16 = 0, /* fp16 A, B, C, D and bias; fp32 accumulation and scale */
    KERN_GEMM_FP32 = 1, /* fp32 everywhere, no TF32: the GPU fp32 baseline */
    KERN_GEMM_BF16 = 2, /* bfloat16 A, B, C, D and bias; fp32 accumulation and scale */
} kern_gemm_dtype;

/* D = epilogue(alpha * op(A) op(B) + beta * C), all matrices row-major; op(A) is M x K, op(B)
 * K x N, C and D M x N (C and D share one layout). A is stored M x K (K x M when trans_a), B
 * K x N (N x K when trans_b). */
typedef struct {
    int64_t m, n, k;       /* m is the largest the plan will run (see kern_gemm_run) */
    int trans_a, trans_b;
    int64_t lda, ldb, ldc; /* row strides in elements; 0 = packed (the stored column count) */
    int batch_count;       /* >= 1; the largest the plan will run */
    /* elements between consecutive matrices of the batch; 0 broadcasts that operand (A or B;
     * C only when beta == 0 or C is to be broadcast; D never). Ignored when batch_count == 1. */
    int64_t stride_a, stride_b, stride_c;
    float alpha, beta;     /* beta != 0 needs C at run time */
    kern_gemm_epilogue epilogue;
    kern_gemm_dtype dtype;
    size_t workspace_limit; /* the most workspace (bytes) the chosen algorithm may use */
    /* every pointer handed to kern_gemm_run (A, B, C, D, bias) is aligned to this many bytes
     * (power of two, >= element size); 0 means 256, what cudaMalloc gives. Smaller promises
     * exclude the algorithms that need more. */
    int alignment;
    int candidates;         /* algorithms to time at creation (with scratch); <= 1: the first */
    /* KERN_GEMM_ALGO_BYTES bytes of an earlier plan's kern_gemm_info.algo, or NULL: that
     * algorithm is run without heuristics or timing (TCI_ERR_UNSUPPORTED if cuBLASLt no longer
     * accepts it for this problem within workspace_limit). */
    const void *use_algo;
    /* KERN_GEMM_FP32: 1 computes with TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32,
     * --precision tf32); 0 keeps full fp32. */
    int allow_tf32;
} kern_gemm_desc;

/* Size of a cublasLtMatmulAlgo_t, which kern_gemm_info.algo holds as plain bytes. */
#define KERN_GEMM_ALGO_BYTES 64

/* Device buffers for timing at creation, laid out as for kern_gemm_run with the desc's m and
 * batch_count. d is overwritten; c may be NULL when beta == 0; bias NULL without a bias epilogue;
 * workspace holds workspace_bytes (>= desc.workspace_limit lets every allowed algorithm run). */
typedef struct {
    const void *a, *b, *c, *bias;
    void *d;
    void *workspace;
    size_t workspace_bytes;
} kern_gemm_scratch;

typedef struct {
    const char *algorithm;  /* "cublasLt algo 21 tile 23 stages 8 splitK 1 ..." (in the plan) */
    float time_ms;          /* measured at creation; -1 when not timed */
    size_t workspace_bytes; /* workspace kern_gemm_run needs at the desc's m and batch_count */
    int candidates_timed;
    unsigned char algo[KERN_GEMM_ALGO_BYTES]; /* the chosen algorithm, for kern_gemm_desc.use_algo */
} kern_gemm_info;

typedef struct kern_gemm_plan kern_gemm_plan;

/* Validates desc, asks cublasLtMatmulAlgoGetHeuristic for algorithms within workspace_limit and,
 * with scratch and desc.candidates > 1, times up to that many on stream (synchronising it) and
 * keeps the fastest. Not capturable: call at build.
 * Errors: TCI_ERR_INVALID_ARGUMENT (shapes, strides, alignment); TCI_ERR_UNSUPPORTED when
 * cuBLASLt offers no algorithm (e.g. for leading dimensions it cannot handle: pad K and N to
 * multiples of 8, which is also what makes tensor cores fast); TCI_ERR_CUDA. *out_plan is NULL
 * on failure. */
tci_status kern_gemm_create(cublasLtHandle_t handle, cudaStream_t stream,
                            const kern_gemm_desc *desc, const kern_gemm_scratch *scratch,
                            kern_gemm_plan **out_plan);

/* One GEMM on stream. m (1..desc.m) and batch_count (1..desc.batch_count) may be smaller than
 * at creation (0 = as created): the chosen algorithm is reused when cuBLASLt accepts it for the
 * smaller problem, otherwise the heuristics' first choice for it is taken (host work only).
 * c: NULL when beta == 0 (then D is not read); may equal d. bias: desc.n elements of the data
 * type, exactly when the epilogue has a bias; shared by every batch. workspace: at least
 * kern_gemm_info.workspace_bytes (checked). Thread-safe; capturable in a CUDA graph. */
tci_status kern_gemm_run(const kern_gemm_plan *plan, cublasLtHandle_t handle, cudaStream_t stream,
                         int64_t m, int batch_count, const void *a, const void *b, const void *c,
                         void *d, const void *bias, void *workspace, size_t workspace_bytes);

void kern_gemm_get_info(const kern_gemm_plan *plan, kern_gemm_info *out_info);

void kern_gemm_destroy(kern_gemm_plan *plan);

#ifdef __cplusplus
}
#endif

#endif
