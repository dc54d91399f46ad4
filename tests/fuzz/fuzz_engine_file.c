/* libFuzzer: engine files (--save-engine). The input is tried as a whole file (header checks)
 * and as a payload behind a valid header and checksum (the record parser); a parsed file's model
 * is then loaded like an ONNX model (CPU backend: no GPU here). */
#include "api/engine_file.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t fnv1a64(const unsigned char *p, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void parse(const unsigned char *bytes, size_t size) {
    engine_file f;
    if (engine_file_parse(bytes, size, "fuzz.tci", &f) != TCI_OK) return;
    if (f.model) fuzz_engine_bytes(f.model, f.model_size);
    engine_file_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    parse(data, size);
    unsigned char *file = malloc(size + 32);
    if (!file) return 0;
    memcpy(file, "TCIENGIN", 8);
    put_le(file + 8, ENGINE_FILE_VERSION, 4);
    put_le(file + 12, 0, 4);
    put_le(file + 16, size, 8);
    put_le(file + 24, fnv1a64(data, size), 8);
    if (size) memcpy(file + 32, data, size);
    parse(file, size + 32);
    free(file);
    return 0;
}
