/* The fp32 CPU reference executor: runs any graph of registered ops, node by node. */
#ifndef TCI_GRAPH_CPU_EXEC_CPU_H
#define TCI_GRAPH_CPU_EXEC_CPU_H

#include "graph/ir.h"

/* Runs one prepared node: infers output shapes from the input values, allocates each non-NULL
 * out[] data with malloc (the caller frees it, also on failure it is freed and set NULL) and runs
 * the op's cpu_forward. in[] has node->num_inputs entries (NULL where omitted), all with data. */
tci_status exec_cpu_node(const ir_node *node, const tci_tensor *const *in, tci_tensor *const *out);

typedef struct exec_cpu exec_cpu;

/* Prepares to run graph (sorted, prepared, optimised); the graph must outlive the executor. */
tci_status exec_cpu_create(const ir_graph *graph, exec_cpu **out_exec);
void exec_cpu_destroy(exec_cpu *exec);
/* inputs[i] feeds graph->inputs[i]. Outputs stay owned by the executor until the next run. */
tci_status exec_cpu_run(exec_cpu *exec, const tci_tensor *inputs, size_t num_inputs);
const tci_tensor *exec_cpu_output(const exec_cpu *exec, size_t index);

#endif
