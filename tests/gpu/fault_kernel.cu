// A kernel that writes through an invalid device address, for test_gpu_faults: the sticky
// CUDA error it leaves must put tcinfer contexts into TCI_ERR_DEVICE_LOST.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "fault_kernel.h"

__global__ void write_invalid(int *p) { p[threadIdx.x] = 1; }

extern "C" int gpu_test_fault(void) {
    // an address no allocation holds: the first page is never mapped
    write_invalid<<<1, 32>>>(reinterpret_cast<int *>(static_cast<uintptr_t>(64)));
    cudaError_t launch = cudaGetLastError();
    if (launch != cudaSuccess) return static_cast<int>(launch);
    return static_cast<int>(cudaDeviceSynchronize());
}
