/* Graph passes run at engine build: shape inference with constant folding, pass-through removal,
 * dead-node elimination. Each takes a sorted graph whose nodes are prepared (op_prepare_node). */
#ifndef TCI_GRAPH_PASSES_H
#define TCI_GRAPH_PASSES_H

#include "graph/ir.h"

/* Infers every tensor's dtype and shape in topological order, and evaluates each node whose
 * inputs are all known (or whose op reads only its input's shape, like Shape) on the CPU
 * reference path, turning its outputs into constants and dropping the node. This is what folds
 * PyTorch's Shape->Gather->Unsqueeze->Concat->Reshape chains once the input shape is known. */
tci_status pass_infer_and_fold(ir_graph *graph);

/* Removes Identity and inference-mode Dropout nodes by rewiring their consumers. */
tci_status pass_remove_passthrough(ir_graph *graph);

/* Removes nodes none of whose outputs is read by another node or is a graph output. */
tci_status pass_eliminate_dead_nodes(ir_graph *graph);

/* The whole optimisation: sort, prepare every node (resolve op, parse attributes), then the
 * passes above in order. */
tci_status pass_optimize(ir_graph *graph);

#endif
