// GPU presence query through the CUDA runtime; a missing driver or GPU is "0 devices", not an error.
#include <cuda_runtime.h>
#include <stdio.h>

#include "kernels/device.h"

extern "C" tci_status kern_device_count(int *out_count, char *name, size_t name_size) {
    *out_count = 0;
    if (name && name_size) name[0] = '\0';
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
        cudaGetLastError(); /* clear the sticky "no device" state */
        return TCI_OK;
    }
    if (err != cudaSuccess) {
        cudaGetLastError();
        return TCI_OK; /* any other driver failure also means: no usable GPU here */
    }
    if (n > 0 && name && name_size) {
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) snprintf(name, name_size, "%s", prop.name);
    }
    *out_count = n;
    return TCI_OK;
}
