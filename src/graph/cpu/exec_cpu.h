/* The fp32 CPU reference executor: runs any graph of registered ops, node by node. */
#ifndef TCI_GRAPH_CPU_EXEC_CPU_H
#define TCI_GRAPH_CPU_EXEC_CPU_H

#include "graph/ir.h"

typedef struct exec_cpu exec_cpu;

/* Prepares to run graph (sorted, prepared, optimised); the graph must outlive the executor. */
tci_status exec_cpu_create(const ir_graph *graph, exec_cpu **out_exec);
void exec_cpu_destroy(exec_cpu *exec);
/* inputs[i] feeds graph->inputs[i]. Outputs stay owned by the executor until the next run. */
tci_status exec_cpu_run(exec_cpu *exec, const tci_tensor *inputs, size_t num_inputs);
const tci_tensor *exec_cpu_output(const exec_cpu *exec, size_t index);

#endif
