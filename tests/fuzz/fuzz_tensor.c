/* libFuzzer: the tensor-file readers (.npy and ONNX TensorProto .pb). The first byte picks the
 * reader, the rest is the file. */
#include "api/tensor_io.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    tci_tensor t;
    const char *name = data[0] & 1 ? "input.pb" : "input.npy";
    if (tensor_io_parse(name, data + 1, size - 1, &t) == TCI_OK) {
        /* the reader promises count * dtype size readable bytes */
        int64_t count = tci_tensor_count(&t);
        volatile unsigned char sum = 0;
        const unsigned char *p = t.data;
        for (size_t i = 0; count > 0 && i < (size_t)count * tci_dtype_size(t.dtype); i++) sum ^= p[i];
        (void)sum;
        tci_tensor_release(&t);
    }
    return 0;
}
