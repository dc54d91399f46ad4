/* IR graph -> ONNX ModelProto, through the same protobuf-c bindings as the loader. The GPU
 * engine file stores its optimised graph this way, and reads it back with onnx_load_model. */
#ifndef TCI_ONNX_WRITER_H
#define TCI_ONNX_WRITER_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/ir.h"

/* Serializes graph (its nodes in their current order, opset imports, inputs with their
 * declared shapes, outputs, and every constant a node or output reads, as raw little-endian
 * initializers; a tensor without a name gets a unique made-up one). as_fp16 (by tensor index,
 * may be NULL) marks FLOAT constants to store rounded to FLOAT16, half the bytes: the reader
 * widens them back (see onnx_widen_fp16). Graph attributes are refused naming the node.
 * *out_bytes is malloc'd. */
tci_status onnx_save_model(const ir_graph *graph, const bool *as_fp16, void **out_bytes,
                           size_t *out_size);

/* Converts the named FLOAT16 constants of graph (NULL-terminated list) back to FLOAT, in the
 * graph's arena: a constant a model stored in fp16 for size, but which its nodes read as float.
 * A name that is missing or not a FLOAT16 constant is an error. */
tci_status onnx_widen_fp16(ir_graph *graph, const char *const *names);

#endif
