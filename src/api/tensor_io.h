/* Tensor files parsed from memory: what tci_tensor_read_file does after reading the file (and
 * what the fuzz targets call). */
#ifndef TCI_API_TENSOR_IO_H
#define TCI_API_TENSOR_IO_H

#include <stddef.h>

#include "tcinfer.h"

/* .npy when path ends in ".npy", else a serialized TensorProto; path names the data in
 * messages. out_tensor->data is malloc'd (tci_tensor_release). */
tci_status tensor_io_parse(const char *path, const unsigned char *buf, size_t size,
                           tci_tensor *out_tensor);

#endif
