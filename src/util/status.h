/* Internal error reporting: set the per-thread message and return the status in one step. */
#ifndef TCI_UTIL_STATUS_H
#define TCI_UTIL_STATUS_H

#include "tcinfer.h"

#if defined(__GNUC__)
#define UTIL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define UTIL_PRINTF(a, b)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Records a printf-style message for tci_last_error() and returns status. */
tci_status status_error(tci_status status, const char *fmt, ...) UTIL_PRINTF(2, 3);

/* Prepends "context: " to the current message, keeping the status; for adding the node or file
 * name on the way up. */
tci_status status_error_prefix(tci_status status, const char *fmt, ...) UTIL_PRINTF(2, 3);

void status_error_clear(void);

#ifdef __cplusplus
}
#endif

/* Propagates a failing status. */
#define TRY_STATUS(expr)                                                                             \
    do {                                                                                          \
        tci_status try_status_ = (expr);                                                      \
        if (try_status_ != TCI_OK) return try_status_;                                    \
    } while (0)

#endif
