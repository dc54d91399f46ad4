/* GPU presence query, the first CUDA code linked into the library; host code sees only C. */
#ifndef TCI_KERNELS_DEVICE_H
#define TCI_KERNELS_DEVICE_H

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices; 0 (and TCI_OK) where there is no driver or no GPU. Fills
 * name (may be NULL) with device 0's name when there is one. */
tci_status kern_device_count(int *out_count, char *name, size_t name_size);

#ifdef __cplusplus
}
#endif

#endif
