/* Stand-in for the CUDA parts when built with -DTCI_CUDA=OFF: reports no GPU. */
#include <stddef.h>

#include "kernels/device.h"
#include "util/status.h"

tci_status kern_device_count(int *out_count, char *name, size_t name_size) {
    *out_count = 0;
    if (name && name_size) name[0] = '\0';
    return TCI_OK;
}

tci_status kern_device_check(int device) {
    return status_error(TCI_ERR_NO_DEVICE,
                        "CUDA device %d does not exist: this build has no CUDA support", device);
}

tci_status kern_device_name(int device, char *name, size_t name_size) {
    if (name && name_size) name[0] = '\0';
    return kern_device_check(device);
}

tci_status kern_device_enter(int device, int *out_previous) {
    *out_previous = device;
    return kern_device_check(device);
}

tci_status kern_device_leave(int device, int previous) {
    (void)device;
    (void)previous;
    return TCI_OK;
}
