/* The CUDA device of a call on a GPU engine (tci_engine_options.device): made current for the
 * call, the caller's given back after it. */
#include "api/internal.h"
#include "kernels/device.h"

tci_status api_device_check(int device) {
    tci_status st = kern_device_check(device);
    if (st != TCI_OK) status_error_prefix(st, "tci_engine_options.device");
    return st;
}

tci_status api_device_enter(int device, api_device *scope) {
    scope->device = scope->previous = -1;
    if (device < 0) return TCI_OK;
    TRY_STATUS(kern_device_enter(device, &scope->previous));
    scope->device = device;
    return TCI_OK;
}

tci_status api_device_leave(const api_device *scope, tci_status st) {
    if (scope->device < 0) return st;
    if (kern_device_leave(scope->device, scope->previous) == TCI_OK || st != TCI_OK) return st;
    return status_error(TCI_ERR_CUDA,
                        "the call on CUDA device %d succeeded, but giving the calling thread its "
                        "device %d back failed",
                        scope->device, scope->previous);
}
