/* The checks every tcinfer GEMM family (WMMA, wgmma) makes of a kern_wmma_gemm_desc. */
#include "kernels/wmma_gemm.h"

#include <stdint.h>

#include "util/status.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

tci_status kern_gemm_desc_check(const char *who, const kern_wmma_gemm_desc *d, int64_t tile_m,
                                int64_t tile_n, kern_gemm_lds *out) {
    if (!d) return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: desc is NULL", who);
    if (d->batch < 1 || d->batch > 65535)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: batch %d outside 1..65535", who, d->batch);
    if (d->m < 1 || d->n < 1 || d->k < 1 || d->m > INT32_MAX || d->n > INT32_MAX ||
        d->k > INT32_MAX)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: m %lld, n %lld, k %lld: each must be in 1..2^31-1", who,
                         (long long)d->m, (long long)d->n, (long long)d->k);
    if ((d->trans_a != 0 && d->trans_a != 1) || (d->trans_b != 0 && d->trans_b != 1))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: trans_a %d / trans_b %d must be 0 or 1",
                         who, d->trans_a, d->trans_b);
    const int64_t a_cols = d->trans_a ? d->m : d->k, b_cols = d->trans_b ? d->k : d->n;
    out->lda = d->lda ? d->lda : a_cols;
    out->ldb = d->ldb ? d->ldb : b_cols;
    out->ldc = d->ldc ? d->ldc : d->n;
    if (out->lda < a_cols || out->ldb < b_cols || out->ldc < d->n)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: leading dimensions lda %lld, ldb %lld, ldc %lld are smaller than "
                         "the stored columns (%lld, %lld, %lld)",
                         who, (long long)out->lda, (long long)out->ldb, (long long)out->ldc,
                         (long long)a_cols, (long long)b_cols, (long long)d->n);
    if (d->batch > 1) {
        if (d->stride_a < 0 || d->stride_b < 0)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "%s: negative batch stride (stride_a %lld, stride_b %lld)", who,
                             (long long)d->stride_a, (long long)d->stride_b);
        if (d->stride_c < d->m * out->ldc)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "%s: stride_c %lld lets the D matrices of the batch overlap (needs "
                             ">= m * ldc = %lld)",
                             who, (long long)d->stride_c, (long long)(d->m * out->ldc));
    }
    if ((int)d->act < 0 || (int)d->act >= ACT_COUNT)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: unknown act %d", who, (int)d->act);
    if (ceil_div(d->m, tile_m) * ceil_div(d->n, tile_n) > INT32_MAX)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: %lld x %lld needs too many tiles", who,
                         (long long)d->m, (long long)d->n);
    return TCI_OK;
}
