/* libFuzzer: a serialized ModelProto through loading, shape inference and constant folding
 * (tci_engine_create_from_memory, CPU backend), then one run where the inputs are small. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_engine_bytes(data, size);
    return 0;
}
