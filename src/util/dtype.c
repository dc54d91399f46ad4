/* Dtype names and sizes, tensor element counts, the version string. */
#include "tcinfer.h"

const char *tci_version(void) { return TCI_VERSION_STRING; }

const char *tci_dtype_name(tci_dtype dtype) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT: return "float";
    case TCI_DTYPE_UINT8: return "uint8";
    case TCI_DTYPE_INT8: return "int8";
    case TCI_DTYPE_INT32: return "int32";
    case TCI_DTYPE_INT64: return "int64";
    case TCI_DTYPE_BOOL: return "bool";
    case TCI_DTYPE_FLOAT16: return "float16";
    case TCI_DTYPE_DOUBLE: return "double";
    case TCI_DTYPE_BFLOAT16: return "bfloat16";
    default: return "undefined";
    }
}

size_t tci_dtype_size(tci_dtype dtype) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT: return 4;
    case TCI_DTYPE_UINT8: return 1;
    case TCI_DTYPE_INT8: return 1;
    case TCI_DTYPE_INT32: return 4;
    case TCI_DTYPE_INT64: return 8;
    case TCI_DTYPE_BOOL: return 1;
    case TCI_DTYPE_FLOAT16: return 2;
    case TCI_DTYPE_DOUBLE: return 8;
    case TCI_DTYPE_BFLOAT16: return 2;
    default: return 0;
    }
}

int64_t tci_tensor_count(const tci_tensor *tensor) {
    if (!tensor || tensor->rank < 0 || tensor->rank > TCI_MAX_RANK) return -1;
    int64_t c = 1;
    for (int i = 0; i < tensor->rank; i++)
        if (tensor->dims[i] < 0 || __builtin_mul_overflow(c, tensor->dims[i], &c)) return -1;
    return c;
}
