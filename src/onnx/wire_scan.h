/* A check of a serialized protobuf message before protobuf-c unpacks it: protobuf-c recurses once
 * per nested message, so a file nested a few thousand deep would overflow the stack there. */
#ifndef TCI_ONNX_WIRE_SCAN_H
#define TCI_ONNX_WIRE_SCAN_H

#include <protobuf-c/protobuf-c.h>

#include "graph/ir.h"

/* Walks the wire format of a `root` message iteratively (no recursion), following the message
 * fields its descriptor names, and refuses (TCI_ERR_UNSUPPORTED) a file nested deeper than
 * limits->max_nesting or holding more than limits->max_nodes NodeProtos; broken wire format is
 * TCI_ERR_PARSE. `what` names the file in messages ("model", "tensor file"). */
tci_status onnx_wire_check(const void *bytes, size_t size, const ProtobufCMessageDescriptor *root,
                           const ir_limits *limits, const char *what);

/* A ProtobufCAllocator over malloc that refuses to hand out more than `budget` bytes at a time
 * in all; `taken` and `peak` are what it holds and held at most. */
typedef struct onnx_budget {
    ProtobufCAllocator allocator; /* pass &budget.allocator to protobuf-c */
    uint64_t budget, taken, peak;
    bool refused;                 /* an allocation went over the budget */
} onnx_budget;

void onnx_budget_init(onnx_budget *b, uint64_t budget);

#endif
