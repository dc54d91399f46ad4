/* Stand-in for the CUDA parts when built with -DTCI_CUDA=OFF: reports no GPU. */
#include <stddef.h>

#include "kernels/device.h"

tci_status kern_device_count(int *out_count, char *name, size_t name_size) {
    *out_count = 0;
    if (name && name_size) name[0] = '\0';
    return TCI_OK;
}
