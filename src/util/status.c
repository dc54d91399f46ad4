/* Status strings and the per-thread error message behind tci_last_error(). */
#include "util/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Per-thread by design: each thread reads the message of its own last failure. */
static _Thread_local char error_message[2048];

const char *tci_status_string(tci_status status) {
    switch (status) {
#define TCI_STATUS_CASE(name, text)                                                               \
    case name: return text;
        TCI_STATUS_LIST(TCI_STATUS_CASE)
#undef TCI_STATUS_CASE
    }
    return "unknown status";
}

const char *tci_last_error(void) { return error_message; }

void status_error_clear(void) { error_message[0] = '\0'; }

tci_status status_error(tci_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    va_end(ap);
    return status;
}

tci_status status_error_prefix(tci_status status, const char *fmt, ...) {
    char prefix[512];
    char old[sizeof error_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, error_message, sizeof old);
    /* truncation is acceptable: the start of a message carries the most context */
    size_t n = strlen(prefix);
    if (n > sizeof error_message - 3) n = sizeof error_message - 3;
    memcpy(error_message, prefix, n);
    memcpy(error_message + n, ": ", 2);
    size_t rest = sizeof error_message - n - 3;
    size_t m = strlen(old);
    if (m > rest) m = rest;
    memcpy(error_message + n + 2, old, m);
    error_message[n + 2 + m] = '\0';
    return status;
}
