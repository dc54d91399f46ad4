/* Tensor files: .npy read/write and TensorProto (.pb) read, for the CLI and embedders. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/tensor_io.h"
#include "onnx/loader.h"
#include "util/file.h"
#include "util/status.h"

typedef struct npy_type {
    const char *descr;
    tci_dtype dtype;
} npy_type;

static const npy_type npy_types[] = {
    {"<f4", TCI_DTYPE_FLOAT}, {"<f8", TCI_DTYPE_DOUBLE}, {"<f2", TCI_DTYPE_FLOAT16},
    {"|i1", TCI_DTYPE_INT8},  {"|u1", TCI_DTYPE_UINT8},  {"<i4", TCI_DTYPE_INT32},
    {"<i8", TCI_DTYPE_INT64}, {"|b1", TCI_DTYPE_BOOL},
};

/* Finds `'key':` in the header dict and returns the text after it. */
static const char *npy_field(const char *header, const char *key) {
    char pattern[32];
    snprintf(pattern, sizeof pattern, "'%s':", key);
    const char *p = strstr(header, pattern);
    if (!p) return NULL;
    p += strlen(pattern);
    while (*p == ' ') p++;
    return p;
}

static tci_status parse_npy(const char *path, const unsigned char *buf, size_t size,
                            tci_tensor *out) {
    if (size < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return status_error(TCI_ERR_PARSE, "'%s' is not a .npy file", path);
    size_t header_len, offset;
    if (buf[6] == 1) {
        header_len = buf[8] | (size_t)buf[9] << 8;
        offset = 10;
    } else if (buf[6] == 2 || buf[6] == 3) {
        if (size < 12) return status_error(TCI_ERR_PARSE, "'%s': truncated .npy header", path);
        header_len = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        offset = 12;
    } else {
        return status_error(TCI_ERR_PARSE, "'%s': unsupported .npy version %d", path, buf[6]);
    }
    if (header_len > size - offset || header_len > 65536)
        return status_error(TCI_ERR_PARSE, "'%s': truncated .npy header", path);
    char header[65537];
    memcpy(header, buf + offset, header_len);
    header[header_len] = '\0';
    const char *descr = npy_field(header, "descr");
    const char *fortran = npy_field(header, "fortran_order");
    const char *shape = npy_field(header, "shape");
    if (!descr || !fortran || !shape)
        return status_error(TCI_ERR_PARSE, "'%s': malformed .npy header", path);
    if (strncmp(fortran, "False", 5) != 0)
        return status_error(TCI_ERR_UNSUPPORTED, "'%s': Fortran-order .npy is not supported", path);
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (descr[0] == '\'' && strncmp(descr + 1, npy_types[i].descr, 3) == 0 && descr[4] == '\'')
            out->dtype = npy_types[i].dtype;
    if (out->dtype == TCI_DTYPE_UNDEFINED)
        return status_error(TCI_ERR_UNSUPPORTED, "'%s': unsupported .npy dtype %.8s", path, descr);
    if (*shape != '(') return status_error(TCI_ERR_PARSE, "'%s': malformed .npy shape", path);
    const char *p = shape + 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char *end;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        if (end == p || d < 0 || errno)
            return status_error(TCI_ERR_PARSE, "'%s': malformed .npy shape", path);
        if (out->rank == TCI_MAX_RANK)
            return status_error(TCI_ERR_UNSUPPORTED, "'%s': rank above %d", path, TCI_MAX_RANK);
        out->dims[out->rank++] = d;
        p = end;
    }
    int64_t count = 1;
    for (int i = 0; i < out->rank; i++) {
        if (out->dims[i] && count > INT64_MAX / 16 / out->dims[i])
            return status_error(TCI_ERR_PARSE, "'%s': .npy shape overflows", path);
        count *= out->dims[i];
    }
    size_t bytes = (size_t)count * tci_dtype_size(out->dtype);
    size_t data_off = offset + header_len;
    if (size - data_off != bytes)
        return status_error(TCI_ERR_PARSE, "'%s': .npy data is %zu bytes, its header says %zu", path,
                         size - data_off, bytes);
    out->data = malloc(bytes ? bytes : 1);
    if (!out->data) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path);
    memcpy(out->data, buf + data_off, bytes);
    return TCI_OK;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

tci_status tci_tensor_read_file(const char *path, tci_tensor *out_tensor) {
    if (!path || !out_tensor) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    memset(out_tensor, 0, sizeof *out_tensor);
    unsigned char *buf;
    size_t size;
    TRY_STATUS(util_read_file(path, "", &buf, &size));
    tci_status st = tensor_io_parse(path, buf, size, out_tensor);
    free(buf);
    return st;
}

tci_status tensor_io_parse(const char *path, const unsigned char *buf, size_t size,
                           tci_tensor *out_tensor) {
    memset(out_tensor, 0, sizeof *out_tensor);
    tci_status st;
    if (ends_with(path, ".npy")) {
        st = parse_npy(path, buf, size, out_tensor);
    } else {
        st = onnx_decode_tensor_file(buf, size, out_tensor);
        if (st != TCI_OK) status_error_prefix(st, "'%s'", path);
    }
    if (st != TCI_OK) tci_tensor_release(out_tensor);
    return st;
}

void tci_tensor_release(tci_tensor *tensor) {
    if (!tensor) return;
    free(tensor->data);
    memset(tensor, 0, sizeof *tensor);
}

tci_status tci_tensor_write_npy(const char *path, const tci_tensor *t) {
    if (!path || !t) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL argument");
    int64_t count = tci_tensor_count(t);
    if (count < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "cannot write a tensor of rank %d (0..%d), negative dims or an element "
                            "count past int64 as .npy",
                            t->rank, TCI_MAX_RANK);
    if (count > 0 && !t->data) return status_error(TCI_ERR_INVALID_ARGUMENT, "tensor has no data");
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].dtype == t->dtype) descr = npy_types[i].descr;
    if (!descr) return status_error(TCI_ERR_UNSUPPORTED, "cannot write dtype %s as .npy",
                                 tci_dtype_name(t->dtype));
    char header[512];
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->rank; i++)
        n += snprintf(header + n, sizeof header - (size_t)n, "%lld,%s", (long long)t->dims[i],
                      i + 1 < t->rank ? " " : "");
    n += snprintf(header + n, sizeof header - (size_t)n, "), }");
    /* pad with spaces so the data starts on a 64-byte boundary, newline last */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return status_error(TCI_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    size_t header_len = (size_t)n + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(header_len & 0xff),
                             (unsigned char)(header_len >> 8)};
    size_t bytes = (size_t)count * tci_dtype_size(t->dtype);
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    if (ok && bytes) ok = fwrite(t->data, 1, bytes, f) == bytes;
    if (fclose(f) != 0) ok = false;
    if (!ok) return status_error(TCI_ERR_IO, "error writing '%s'", path);
    return TCI_OK;
}
