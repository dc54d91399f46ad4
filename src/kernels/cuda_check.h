/* Checks for CUDA runtime, cuDNN and cuBLAS calls: each failure is recorded with the call's text,
 * file and line (tci_last_error) and returned as TCI_ERR_CUDA. C and CUDA C++ alike. */
#ifndef TCI_KERNELS_CUDA_CHECK_H
#define TCI_KERNELS_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "util/status.h"

#define KERN_CUDA_CHECK(call)                                                                     \
    do {                                                                                          \
        cudaError_t kern_err_ = (call);                                                           \
        if (kern_err_ != cudaSuccess)                                                             \
            return status_error(TCI_ERR_CUDA, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__,   \
                             cudaGetErrorString(kern_err_));                                      \
    } while (0)

/* After a kernel launch: launch-configuration errors show up here. */
#define KERN_LAUNCH_CHECK(what) KERN_CUDA_CHECK(cudaGetLastError())

#define KERN_CUDNN_CHECK(call)                                                                    \
    do {                                                                                          \
        cudnnStatus_t kern_st_ = (call);                                                          \
        if (kern_st_ != CUDNN_STATUS_SUCCESS)                                                     \
            return status_error(TCI_ERR_CUDA, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__,   \
                             cudnnGetErrorString(kern_st_));                                      \
    } while (0)

#define KERN_CUBLAS_CHECK(call)                                                                   \
    do {                                                                                          \
        cublasStatus_t kern_st_ = (call);                                                         \
        if (kern_st_ != CUBLAS_STATUS_SUCCESS)                                                    \
            return status_error(TCI_ERR_CUDA, "%s failed at %s:%d: cuBLAS status %d", #call,         \
                             __FILE__, __LINE__, (int)kern_st_);                                  \
    } while (0)

#endif
