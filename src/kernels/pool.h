/* 2-D max/average pooling and global pooling on NHWC8 fp16, bf16 or fp32 tensors (fp32
 * accumulation).
 * C API over src/kernels/pool.cu. */
#ifndef TCI_KERNELS_POOL_H
#define TCI_KERNELS_POOL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tcinfer.h"
#include "util/conv_geom.h"
#include "util/pool_kinds.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The window (geom: util/conv_geom.h; k and groups are not read); taps outside the input are
 * skipped. out_h/out_w are the engine's (floor or ceil mode); pad_bottom/pad_right only set the
 * divisor of count_include_pad: taps inside the input or its bottom/right padding are counted
 * (the engine passes the padding the output size implies). A max window that misses the input gives the
 * lowest finite value of the storage type (fp16 -65504, bf16 -3.3895e38, fp32 -FLT_MAX); an
 * average one gives 0.
 * dtype: 0 or TCI_DTYPE_FLOAT16: fp16 tensors; TCI_DTYPE_BFLOAT16: bf16 tensors in the same
 * layout; TCI_DTYPE_FLOAT: fp32 tensors in the same NHWC8 layout (Cp channels of 4 bytes);
 * anything else is TCI_ERR_UNSUPPORTED. */
typedef struct kern_pool2d_desc {
    pool_kind mode;
    int count_include_pad; /* average only */
    conv_geom geom;        /* logical channels c; the tensors have Cp = round_up(c, 8) */
    tci_dtype dtype; /* of src and dst: 0 / TCI_DTYPE_FLOAT16, TCI_DTYPE_BFLOAT16 or
                        TCI_DTYPE_FLOAT */
} kern_pool2d_desc;

/* src (n, in_h, in_w, Cp) -> dst (n, out_h, out_w, Cp), both NHWC8 of desc->dtype, 16-byte
 * aligned, not overlapping; padded channels of dst are written as zeros. Errors:
 * TCI_ERR_INVALID_ARGUMENT (bad sizes, NULL or misaligned buffer), TCI_ERR_UNSUPPORTED (dtype),
 * TCI_ERR_CUDA. */
tci_status kern_pool2d(const kern_pool2d_desc *desc, const void *src, void *dst,
                       cudaStream_t stream);

/* GlobalAveragePool / GlobalMaxPool: src (n, h, w, Cp) -> dst (n, 1, 1, Cp), NHWC8 fp16, 16-byte
 * aligned; h*w must be > 0. One block reduces a group of channels of one image over h*w, so large
 * (56x56) and small (7x7) planes both spread over the GPU. */
tci_status kern_global_pool(pool_kind mode, const void *src_f16, void *dst_f16, int64_t n,
                            int64_t c, int64_t h, int64_t w, cudaStream_t stream);

/* The same for any storage type: dtype 0 or TCI_DTYPE_FLOAT16 is kern_global_pool,
 * TCI_DTYPE_BFLOAT16 reads and writes NHWC8 bf16 and TCI_DTYPE_FLOAT NHWC8 fp32 (dst (n, 1, 1, Cp)
 * of that type, padded channels zero); anything else is TCI_ERR_UNSUPPORTED. */
tci_status kern_global_pool_dtype(pool_kind mode, const void *src, void *dst, int64_t n,
                                  int64_t c, int64_t h, int64_t w, tci_dtype dtype,
                                  cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
