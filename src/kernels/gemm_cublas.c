/* GEMM plans over cuBLASLt: row-major problems mapped onto cuBLASLt's column-major API (D^T =
 * op(B)^T op(A)^T, so B goes first), heuristics, timing of the top candidates, epilogues. */
#include "kernels/gemm_cublas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_check.h"
#include "util/status.h"

enum { MAX_CANDIDATES = 16 };

_Static_assert(sizeof(cublasLtMatmulAlgo_t) == KERN_GEMM_ALGO_BYTES,
               "kern_gemm_info.algo must hold a cublasLtMatmulAlgo_t");

struct kern_gemm_plan {
    kern_gemm_desc desc; /* with lda / ldb / ldc / alignment resolved */
    kern_gemm_info info;
    cublasLtMatmulAlgo_t algo;
    char algorithm_name[128];
};

/* Descriptors live on the stack of each call (cuBLASLt's *Init functions exist for this), so
 * a plan never changes after creation and runs from several threads do not interfere. In
 * cuBLASLt's terms: its A is our B, its B is our A, its C / D are our C / D transposed. */
typedef struct {
    cublasLtMatmulDescOpaque_t op;
    cublasLtMatrixLayoutOpaque_t lt_a, lt_b, lt_cd;
} gemm_descs;

static cudaDataType_t data_type(const kern_gemm_plan *p) {
    return p->desc.dtype == KERN_GEMM_FP16   ? CUDA_R_16F
           : p->desc.dtype == KERN_GEMM_BF16 ? CUDA_R_16BF
                                             : CUDA_R_32F;
}

static size_t element_size(kern_gemm_dtype dtype) { return dtype == KERN_GEMM_FP32 ? 4 : 2; }

static int has_bias(kern_gemm_epilogue e) {
    return e == KERN_GEMM_EPILOGUE_BIAS || e == KERN_GEMM_EPILOGUE_RELU_BIAS ||
           e == KERN_GEMM_EPILOGUE_GELU_BIAS;
}

static cublasLtEpilogue_t lt_epilogue(kern_gemm_epilogue e) {
    switch (e) {
    case KERN_GEMM_EPILOGUE_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case KERN_GEMM_EPILOGUE_RELU: return CUBLASLT_EPILOGUE_RELU;
    case KERN_GEMM_EPILOGUE_RELU_BIAS: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case KERN_GEMM_EPILOGUE_GELU: return CUBLASLT_EPILOGUE_GELU;
    case KERN_GEMM_EPILOGUE_GELU_BIAS: return CUBLASLT_EPILOGUE_GELU_BIAS;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

static tci_status set_layout(cublasLtMatrixLayout_t l, cudaDataType_t type, int64_t rows,
                             int64_t cols, int64_t ld, int batch, int64_t stride) {
    KERN_CUBLAS_CHECK(cublasLtMatrixLayoutInit(l, type, (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        int32_t count = batch;
        KERN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                           &count, sizeof count));
        KERN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return TCI_OK;
}

static tci_status make_descs(const kern_gemm_plan *p, int64_t m, int batch, const void *bias,
                             gemm_descs *g) {
    const kern_gemm_desc *d = &p->desc;
    cudaDataType_t type = data_type(p);
    cublasLtMatmulDesc_t op = &g->op;
    KERN_CUBLAS_CHECK(cublasLtMatmulDescInit(
        op, d->dtype == KERN_GEMM_FP32 && d->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
        CUDA_R_32F));
    cublasOperation_t ta = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    KERN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    KERN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t epi = lt_epilogue(d->epilogue);
    KERN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (has_bias(d->epilogue)) {
        int32_t bias_type = (int32_t)type;
        KERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                         &bias_type, sizeof bias_type));
        KERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                         &bias, sizeof bias));
    }
    /* stored shapes (row-major) seen column-major: rows and columns swap */
    int64_t a_rows = d->trans_a ? d->k : m, a_cols = d->trans_a ? m : d->k;
    int64_t b_rows = d->trans_b ? d->n : d->k, b_cols = d->trans_b ? d->k : d->n;
    TRY_STATUS(set_layout(&g->lt_a, type, b_cols, b_rows, d->ldb, batch, d->stride_b));
    TRY_STATUS(set_layout(&g->lt_b, type, a_cols, a_rows, d->lda, batch, d->stride_a));
    TRY_STATUS(set_layout(&g->lt_cd, type, d->n, m, d->ldc, batch, d->stride_c));
    return TCI_OK;
}

static tci_status make_preference(const kern_gemm_plan *p, size_t workspace_limit,
                                  cublasLtMatmulPreferenceOpaque_t *storage) {
    cublasLtMatmulPreference_t pref = storage;
    KERN_CUBLAS_CHECK(cublasLtMatmulPreferenceInit(pref));
    uint64_t ws = workspace_limit;
    KERN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    uint32_t align = (uint32_t)p->desc.alignment;
    const cublasLtMatmulPreferenceAttributes_t which[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++)
        KERN_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(pref, which[i], &align, sizeof align));
    return TCI_OK;
}

/* A bias address aligned to exactly the promised alignment, for the heuristics: they read the
 * pointer's alignment, never its target. */
static const void *promised_bias(const kern_gemm_plan *p) {
    return has_bias(p->desc.epilogue) ? (const void *)(uintptr_t)p->desc.alignment : NULL;
}

static tci_status heuristics(const kern_gemm_plan *p, cublasLtHandle_t h, int64_t m, int batch,
                             size_t workspace_limit, int want,
                             cublasLtMatmulHeuristicResult_t *results, int *out_count) {
    gemm_descs g;
    cublasLtMatmulPreferenceOpaque_t pref;
    TRY_STATUS(make_descs(p, m, batch, promised_bias(p), &g));
    TRY_STATUS(make_preference(p, workspace_limit, &pref));
    int returned = 0;
    *out_count = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, &g.op, &g.lt_a, &g.lt_b, &g.lt_cd,
                                                       &g.lt_cd, &pref, want, results, &returned);
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
        return status_error(TCI_ERR_CUDA,
                         "gemm plan: cublasLtMatmulAlgoGetHeuristic: cuBLAS status %d", (int)st);
    int kept = 0;
    for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < returned; i++)
        if (results[i].state == CUBLAS_STATUS_SUCCESS &&
            results[i].workspaceSize <= workspace_limit)
            results[kept++] = results[i];
    if (kept == 0)
        return status_error(TCI_ERR_UNSUPPORTED,
                         "gemm plan: cuBLASLt has no %s algorithm for m %lld n %lld k %lld (lda "
                         "%lld ldb %lld ldc %lld, batch %d, alignment %d, workspace %zu); pad K "
                         "and N to multiples of 8",
                         p->desc.dtype == KERN_GEMM_FP16   ? "fp16"
                         : p->desc.dtype == KERN_GEMM_BF16 ? "bf16"
                                                           : "fp32",
                         (long long)m,
                         (long long)p->desc.n, (long long)p->desc.k, (long long)p->desc.lda,
                         (long long)p->desc.ldb, (long long)p->desc.ldc, batch, p->desc.alignment,
                         workspace_limit);
    *out_count = kept;
    return TCI_OK;
}

static cublasStatus_t execute(const kern_gemm_plan *p, cublasLtHandle_t h, cudaStream_t stream,
                              const gemm_descs *g, const cublasLtMatmulAlgo_t *algo, const void *a,
                              const void *b, const void *c, void *d, void *ws, size_t ws_bytes) {
    /* cuBLASLt takes the descriptors as non-const handles but does not change them */
    gemm_descs *gm = (gemm_descs *)g;
    return cublasLtMatmul(h, &gm->op, &p->desc.alpha, b, &gm->lt_a, a, &gm->lt_b, &p->desc.beta,
                          c ? c : d, &gm->lt_cd, d, &gm->lt_cd, algo, ws, ws_bytes, stream);
}

static void describe_algo(kern_gemm_plan *p) {
    int32_t id = -1, splitk = 1;
    uint32_t tile = 0, stages = 0, swizzle = 0, custom = 0;
    size_t w;
    cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile,
                                         &w);
    cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                         sizeof stages, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                         sizeof splitk, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                         sizeof swizzle, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom,
                                         sizeof custom, &w);
    snprintf(p->algorithm_name, sizeof p->algorithm_name,
             "cublasLt algo %d tile %u stages %u splitK %d swizzle %u custom %u", (int)id, tile,
             stages, (int)splitk, swizzle, custom);
    p->info.algorithm = p->algorithm_name;
}

/* Times one candidate: a trial run (cuBLASLt may still refuse it), then the best of three
 * rounds of five back-to-back runs.
 * *out_ms < 0 when refused. */
static tci_status time_candidate(const kern_gemm_plan *p, cublasLtHandle_t h, cudaStream_t stream,
                                 const gemm_descs *g, const cublasLtMatmulAlgo_t *algo,
                                 const kern_gemm_scratch *sc, float *out_ms) {
    *out_ms = -1.0f;
    cublasStatus_t st = execute(p, h, stream, g, algo, sc->a, sc->b, sc->c, sc->d, sc->workspace,
                                sc->workspace_bytes);
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED &&
        st != CUBLAS_STATUS_INVALID_VALUE)
        return status_error(TCI_ERR_CUDA, "gemm plan: trial cublasLtMatmul: cuBLAS status %d",
                         (int)st);
    KERN_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (st != CUBLAS_STATUS_SUCCESS) return TCI_OK;
    /* back-to-back runs, as in a CUDA graph replay: timing single runs would count launch
     * latency that a replay hides */
    enum { ROUNDS = 3, ITERS = 5 };
    float ms[ROUNDS];
    cudaEvent_t start = NULL, stop = NULL;
    cudaError_t ce = cudaEventCreate(&start);
    if (ce == cudaSuccess) ce = cudaEventCreate(&stop);
    for (int i = 0; i < ROUNDS && ce == cudaSuccess && st == CUBLAS_STATUS_SUCCESS; i++) {
        ce = cudaEventRecord(start, stream);
        for (int j = 0; j < ITERS && ce == cudaSuccess && st == CUBLAS_STATUS_SUCCESS; j++)
            st = execute(p, h, stream, g, algo, sc->a, sc->b, sc->c, sc->d, sc->workspace,
                         sc->workspace_bytes);
        if (ce != cudaSuccess || st != CUBLAS_STATUS_SUCCESS) break;
        ce = cudaEventRecord(stop, stream);
        if (ce == cudaSuccess) ce = cudaEventSynchronize(stop);
        if (ce == cudaSuccess) ce = cudaEventElapsedTime(&ms[i], start, stop);
        ms[i] /= ITERS;
    }
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (ce != cudaSuccess)
        return status_error(TCI_ERR_CUDA, "gemm plan: timing: %s", cudaGetErrorString(ce));
    if (st != CUBLAS_STATUS_SUCCESS)
        return status_error(TCI_ERR_CUDA, "gemm plan: timing cublasLtMatmul: cuBLAS status %d",
                         (int)st);
    *out_ms = ms[0];
    for (int i = 1; i < ROUNDS; i++)
        if (ms[i] < *out_ms) *out_ms = ms[i];
    return TCI_OK;
}

static int misaligned(const void *ptr, int alignment) {
    return ptr && ((uintptr_t)ptr & (uintptr_t)(alignment - 1)) != 0;
}

static tci_status validate(kern_gemm_desc *d) {
    if (d->dtype != KERN_GEMM_FP16 && d->dtype != KERN_GEMM_FP32 && d->dtype != KERN_GEMM_BF16)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "gemm plan: unknown dtype %d", (int)d->dtype);
    if (d->epilogue < KERN_GEMM_EPILOGUE_NONE || d->epilogue > KERN_GEMM_EPILOGUE_GELU_BIAS)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "gemm plan: unknown epilogue %d",
                         (int)d->epilogue);
    if (d->m < 1 || d->n < 1 || d->k < 1 || d->m > INT32_MAX || d->n > INT32_MAX ||
        d->k > INT32_MAX || d->batch_count < 1)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm plan: m %lld, n %lld, k %lld and batch %d must be in 1..2^31-1",
                         (long long)d->m, (long long)d->n, (long long)d->k, d->batch_count);
    int64_t a_cols = d->trans_a ? d->m : d->k, b_cols = d->trans_b ? d->k : d->n;
    if (d->lda == 0) d->lda = a_cols;
    if (d->ldb == 0) d->ldb = b_cols;
    if (d->ldc == 0) d->ldc = d->n;
    if (d->lda < a_cols || d->ldb < b_cols || d->ldc < d->n)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm plan: leading dimensions lda %lld, ldb %lld, ldc %lld below the "
                         "stored widths %lld, %lld, %lld",
                         (long long)d->lda, (long long)d->ldb, (long long)d->ldc, (long long)a_cols,
                         (long long)b_cols, (long long)d->n);
    if (d->batch_count > 1 && (d->stride_a < 0 || d->stride_b < 0 || d->stride_c < d->m * d->ldc))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm plan: batch strides a %lld, b %lld must be >= 0 and c %lld >= m * "
                         "ldc = %lld (D matrices must not overlap)",
                         (long long)d->stride_a, (long long)d->stride_b, (long long)d->stride_c,
                         (long long)(d->m * d->ldc));
    if (d->alignment == 0) d->alignment = 256;
    if (d->alignment < (int)element_size(d->dtype) || (d->alignment & (d->alignment - 1)) != 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm plan: alignment %d must be a power of two >= the element size",
                         d->alignment);
    return TCI_OK;
}

static tci_status check_scratch(const kern_gemm_plan *p, const kern_gemm_scratch *sc) {
    const kern_gemm_desc *d = &p->desc;
    if (!sc->a || !sc->b || !sc->d || (d->beta != 0.0f && !sc->c) ||
        (has_bias(d->epilogue) && !sc->bias) || (sc->workspace_bytes && !sc->workspace))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm plan: scratch buffers missing (a, b, d, and c / bias / workspace "
                         "where the plan has them)");
    if (misaligned(sc->a, d->alignment) || misaligned(sc->b, d->alignment) ||
        misaligned(sc->c, d->alignment) || misaligned(sc->d, d->alignment) ||
        misaligned(sc->bias, d->alignment))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm plan: scratch buffers not aligned to %d bytes", d->alignment);
    return TCI_OK;
}

static tci_status create_steps(kern_gemm_plan *p, cublasLtHandle_t h, cudaStream_t stream,
                               const kern_gemm_scratch *sc) {
    TRY_STATUS(validate(&p->desc));
    if (sc) TRY_STATUS(check_scratch(p, sc));
    const kern_gemm_desc *d = &p->desc;
    size_t limit = d->workspace_limit;
    if (sc && sc->workspace_bytes < limit) limit = sc->workspace_bytes;
    if (d->use_algo) {
        /* a choice made before: only check that cuBLASLt still takes it */
        gemm_descs g;
        TRY_STATUS(make_descs(p, d->m, d->batch_count, sc ? sc->bias : NULL, &g));
        memcpy(&p->algo, d->use_algo, sizeof p->algo);
        cublasLtMatmulHeuristicResult_t check;
        memset(&check, 0, sizeof check);
        if (cublasLtMatmulAlgoCheck(h, &g.op, &g.lt_a, &g.lt_b, &g.lt_cd, &g.lt_cd, &p->algo,
                                    &check) != CUBLAS_STATUS_SUCCESS ||
            check.workspaceSize > limit)
            return status_error(TCI_ERR_UNSUPPORTED,
                             "gemm plan: the given cuBLASLt algorithm is not available here");
        p->info.workspace_bytes = check.workspaceSize;
        memcpy(p->info.algo, &p->algo, sizeof p->algo);
        describe_algo(p);
        return TCI_OK;
    }
    int want = d->candidates > 1 ? d->candidates : 1;
    if (want > MAX_CANDIDATES) want = MAX_CANDIDATES;
    cublasLtMatmulHeuristicResult_t results[MAX_CANDIDATES];
    int count = 0;
    TRY_STATUS(heuristics(p, h, d->m, d->batch_count, limit, want, results, &count));
    int best = 0;
    if (sc && want > 1) {
        gemm_descs g;
        TRY_STATUS(make_descs(p, d->m, d->batch_count, sc->bias, &g));
        float best_ms = -1.0f;
        best = -1;
        for (int i = 0; i < count; i++) {
            float ms;
            TRY_STATUS(time_candidate(p, h, stream, &g, &results[i].algo, sc, &ms));
            if (ms >= 0.0f) p->info.candidates_timed++;
            if (ms >= 0.0f && (best < 0 || ms < best_ms)) {
                best = i;
                best_ms = ms;
            }
        }
        if (best < 0)
            return status_error(TCI_ERR_UNSUPPORTED,
                             "gemm plan: cublasLtMatmul refused all %d candidate algorithms",
                             count);
        p->info.time_ms = best_ms;
    }
    p->algo = results[best].algo;
    p->info.workspace_bytes = results[best].workspaceSize;
    memcpy(p->info.algo, &p->algo, sizeof p->algo);
    describe_algo(p);
    return TCI_OK;
}

tci_status kern_gemm_create(cublasLtHandle_t handle, cudaStream_t stream,
                            const kern_gemm_desc *desc, const kern_gemm_scratch *scratch,
                            kern_gemm_plan **out_plan) {
    if (!out_plan) return status_error(TCI_ERR_INVALID_ARGUMENT, "gemm plan: out_plan is NULL");
    *out_plan = NULL;
    if (!handle || !desc)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "gemm plan: handle and desc are required");
    kern_gemm_plan *p = calloc(1, sizeof *p);
    if (!p) return status_error(TCI_ERR_OUT_OF_MEMORY, "gemm plan: out of host memory");
    p->desc = *desc;
    p->info.time_ms = -1.0f;
    tci_status st = create_steps(p, handle, stream, scratch);
    if (st != TCI_OK) {
        free(p);
        return st;
    }
    *out_plan = p;
    return TCI_OK;
}

tci_status kern_gemm_run(const kern_gemm_plan *p, cublasLtHandle_t handle, cudaStream_t stream,
                         int64_t m, int batch_count, const void *a, const void *b, const void *c,
                         void *d, const void *bias, void *workspace, size_t workspace_bytes) {
    if (!p || !handle || !a || !b || !d)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm run: plan, handle, a, b and d are required");
    const kern_gemm_desc *desc = &p->desc;
    if (m == 0) m = desc->m;
    if (batch_count == 0) batch_count = desc->batch_count;
    if (m < 1 || m > desc->m || batch_count < 1 || batch_count > desc->batch_count)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm run: m %lld / batch %d outside the plan's 1..%lld / 1..%d",
                         (long long)m, batch_count, (long long)desc->m, desc->batch_count);
    if ((bias != NULL) != has_bias(desc->epilogue))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "gemm run: bias %s but the epilogue %s one",
                         bias ? "given" : "missing", has_bias(desc->epilogue) ? "needs" : "has no");
    if (desc->beta != 0.0f && !c)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "gemm run: beta %g needs C", (double)desc->beta);
    if (misaligned(a, desc->alignment) || misaligned(b, desc->alignment) ||
        misaligned(c, desc->alignment) || misaligned(d, desc->alignment) ||
        misaligned(bias, desc->alignment))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm run: a pointer is not aligned to the plan's %d bytes",
                         desc->alignment);
    gemm_descs g;
    TRY_STATUS(make_descs(p, m, batch_count, bias, &g));
    cublasLtMatmulAlgo_t algo = p->algo;
    size_t need = p->info.workspace_bytes;
    if (m != desc->m || batch_count != desc->batch_count) {
        cublasLtMatmulHeuristicResult_t check;
        memset(&check, 0, sizeof check);
        cublasStatus_t st = cublasLtMatmulAlgoCheck(handle, &g.op, &g.lt_a, &g.lt_b, &g.lt_cd,
                                                    &g.lt_cd, &algo, &check);
        if (st == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= workspace_bytes) {
            need = check.workspaceSize;
        } else {
            cublasLtMatmulHeuristicResult_t r[1];
            int count = 0;
            TRY_STATUS(heuristics(p, handle, m, batch_count, workspace_bytes, 1, r, &count));
            algo = r[0].algo;
            need = r[0].workspaceSize;
        }
    }
    if (need > workspace_bytes || (need && !workspace))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "gemm run: %s needs %zu workspace bytes, got %zu", p->algorithm_name, need,
                         workspace ? workspace_bytes : 0);
    cublasStatus_t st =
        execute(p, handle, stream, &g, &algo, a, b, c, d, workspace, workspace_bytes);
    if (st != CUBLAS_STATUS_SUCCESS)
        return status_error(TCI_ERR_CUDA,
                         "gemm run: cublasLtMatmul (%s, m %lld n %lld k %lld batch "
                         "%d) failed: cuBLAS status %d",
                         p->algorithm_name, (long long)m, (long long)desc->n, (long long)desc->k,
                         batch_count, (int)st);
    KERN_LAUNCH_CHECK("gemm run");
    return TCI_OK;
}

void kern_gemm_get_info(const kern_gemm_plan *p, kern_gemm_info *out_info) { *out_info = p->info; }

void kern_gemm_destroy(kern_gemm_plan *p) { free(p); }
