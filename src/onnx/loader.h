/* ONNX ModelProto -> IR graph, through the protobuf-c bindings generated from onnx.proto. */
#ifndef TCI_ONNX_LOADER_H
#define TCI_ONNX_LOADER_H

#include "graph/ir.h"

/* Parses a serialized ModelProto into a new graph:
 * - initializers become tensors with data (in the graph arena, in their stored dtype; every
 *   storage form: raw_data, float_data, int32_data, int64_data, double_data; external data
 *   resolved relative to base_dir, which it may not leave; base_dir NULL refuses external data);
 * - graph inputs that are not initializers go to graph->inputs with their declared dtype and
 *   shape (dim_param dims are -1 with dim_names set; a missing shape leaves rank -1);
 * - graph outputs go to graph->outputs (is_graph_output set);
 * - nodes keep their attributes (tensor attributes become constant tensors); node->opset is the
 *   version the model imports for the node's domain ("" and "ai.onnx" are the same domain).
 * It neither resolves ops nor sorts nor infers shapes. *out_graph is NULL on failure. */
tci_status onnx_load_model(const void *bytes, size_t size, const char *base_dir,
                           ir_graph **out_graph);

/* Same, under limits (NULL: the defaults), which the graph keeps for the passes: the model's
 * size, the nesting depth and node count of its wire format (checked before unpacking), the
 * memory protobuf-c may take, and the elements and bytes of its constants. */
tci_status onnx_load_model_limits(const void *bytes, size_t size, const char *base_dir,
                                  const ir_limits *limits, ir_graph **out_graph);

/* Whether this host stores integers little-endian, as ONNX's raw_data does. */
bool onnx_host_little_endian(void);

/* Reads path and loads it with the file's folder as base_dir. */
tci_status onnx_load_file(const char *path, ir_graph **out_graph);
tci_status onnx_load_file_limits(const char *path, const ir_limits *limits, ir_graph **out_graph);

/* Decodes a serialized TensorProto (an input or output file of ONNX's test data) into a tensor
 * whose data is malloc'd. */
tci_status onnx_decode_tensor_file(const void *bytes, size_t size, tci_tensor *out_tensor);

#endif
