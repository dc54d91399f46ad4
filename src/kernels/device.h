/* GPU presence and device queries, the first CUDA code linked into the library; host code sees
 * only C. */
#ifndef TCI_KERNELS_DEVICE_H
#define TCI_KERNELS_DEVICE_H

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices; 0 (and TCI_OK) where there is no driver or no GPU. Fills
 * name (may be NULL) with device 0's name when there is one. */
tci_status kern_device_count(int *out_count, char *name, size_t name_size);

/* TCI_OK when `device` is a usable CUDA device index, else TCI_ERR_NO_DEVICE naming how many
 * devices there are. */
tci_status kern_device_check(int device);

/* The name of device `device` into name (name_size bytes); errors as kern_device_check. */
tci_status kern_device_name(int device, char *name, size_t name_size);

/* Makes `device` (checked before: kern_device_check) the calling thread's current CUDA device
 * and puts the one current before in *out_previous, for kern_device_leave. Nothing changes
 * when it is current already. */
tci_status kern_device_enter(int device, int *out_previous);

/* Gives the calling thread back `previous` (kern_device_enter's) after a call on `device`.
 * Failing, it leaves the error text of the call it ends alone and returns TCI_ERR_CUDA. */
tci_status kern_device_leave(int device, int previous);

#ifdef __cplusplus
}
#endif

#endif
