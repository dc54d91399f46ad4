/* A deliberate kernel fault (fault_kernel.cu), for test_gpu_faults. */
#ifndef TCI_TEST_FAULT_KERNEL_H
#define TCI_TEST_FAULT_KERNEL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Launches a kernel that writes to an invalid address and waits: the cudaError_t it returns
 * (cudaErrorIllegalAddress on a healthy device). The process's CUDA context is lost after. */
int gpu_test_fault(void);

#ifdef __cplusplus
}
#endif

#endif
