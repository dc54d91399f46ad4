// GPU presence and device queries through the CUDA runtime; a missing driver or GPU is
// "0 devices", not an error.
#include <cuda_runtime.h>
#include <stdio.h>

#include "kernels/device.h"
#include "util/status.h"

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
        else cudaGetLastError();
    }
    *out_count = n;
    return TCI_OK;
}

extern "C" tci_status kern_device_check(int device) {
    int n = 0;
    tci_status st = kern_device_count(&n, NULL, 0);
    if (st != TCI_OK) return st;
    if (device >= 0 && device < n) return TCI_OK;
    if (n == 0)
        return status_error(TCI_ERR_NO_DEVICE, "CUDA device %d does not exist: there is no usable "
                                               "CUDA GPU here", device);
    return status_error(TCI_ERR_NO_DEVICE, "CUDA device %d does not exist: there %s %d (%s%d)",
                        device, n == 1 ? "is" : "are", n, n == 1 ? "device " : "devices 0..",
                        n - 1);
}

extern "C" tci_status kern_device_name(int device, char *name, size_t name_size) {
    if (name && name_size) name[0] = '\0';
    tci_status st = kern_device_check(device);
    if (st != TCI_OK) return st;
    cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return status_error(TCI_ERR_CUDA, "cudaGetDeviceProperties(%d) failed: %s", device,
                            cudaGetErrorString(err));
    }
    if (name && name_size) snprintf(name, name_size, "%s", prop.name);
    return TCI_OK;
}

extern "C" tci_status kern_device_enter(int device, int *out_previous) {
    *out_previous = device;
    int current = 0;
    cudaError_t err = cudaGetDevice(&current);
    if (err == cudaSuccess && current != device) err = cudaSetDevice(device);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return status_error(TCI_ERR_CUDA, "making CUDA device %d current failed: %s", device,
                            cudaGetErrorString(err));
    }
    *out_previous = current;
    return TCI_OK;
}

extern "C" tci_status kern_device_leave(int device, int previous) {
    if (previous == device) return TCI_OK;
    cudaError_t err = cudaSetDevice(previous);
    if (err == cudaSuccess) return TCI_OK;
    cudaGetLastError();
    return TCI_ERR_CUDA;
}
