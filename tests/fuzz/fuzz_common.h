/* Shared by the libFuzzer targets: limits small enough that libFuzzer's own 2 GB RSS limit
 * is never the one to stop a hostile input. */
#ifndef TCI_FUZZ_COMMON_H
#define TCI_FUZZ_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tcinfer.h"

static inline void fuzz_options(tci_engine_options *o) {
    tci_engine_options_init(o);
    o->backend = TCI_BACKEND_CPU;
    o->max_tensor_elements = (int64_t)1 << 22;
    o->max_constant_bytes = (uint64_t)64 << 20;
    o->max_parse_bytes = (uint64_t)256 << 20;
}

/* Creates the engine; where every input's shape is known and small, runs it once on zeros, so
 * that the ops' CPU code sees what shape inference let through. */
static inline void fuzz_engine_bytes(const uint8_t *data, size_t size) {
    tci_engine_options o;
    fuzz_options(&o);
    tci_engine *e = NULL;
    if (tci_engine_create_from_memory(data, size, NULL, &o, &e) != TCI_OK) return;
    size_t n = tci_engine_input_count(e);
    tci_tensor *in = calloc(n + 1, sizeof *in);
    int runnable = in != NULL;
    for (size_t i = 0; runnable && i < n; i++) {
        tci_tensor_info info;
        tci_tensor_info_init(&info);
        if (tci_engine_input_info(e, i, &info) != TCI_OK || info.rank < 0) {
            runnable = 0;
            break;
        }
        in[i].dtype = info.dtype;
        in[i].rank = info.rank;
        for (int d = 0; d < info.rank; d++) in[i].dims[d] = info.dims[d];
        int64_t count = tci_tensor_count(&in[i]);
        if (count < 0 || count > (1 << 16)) {
            runnable = 0;
            break;
        }
        in[i].data = calloc((size_t)count + 1, tci_dtype_size(info.dtype) + 1);
        runnable = in[i].data != NULL;
    }
    tci_context *c = NULL;
    if (runnable && tci_context_create(e, &c) == TCI_OK) {
        if (tci_context_run(c, in, n) == TCI_OK) {
            tci_tensor out;
            for (size_t i = 0; i < tci_engine_output_count(e); i++)
                (void)tci_context_output(c, i, &out);
        }
        tci_context_destroy(c);
    }
    for (size_t i = 0; in && i < n; i++) free(in[i].data);
    free(in);
    tci_engine_destroy(e);
}

#endif
