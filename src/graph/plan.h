/* The GPU plan, logical half: the optimised IR lowered to a list of steps over device tensors
 * (types in graph/lower.h) by each op's gpu_lower, with arena offsets from the memory planner.
 * Pure C with no CUDA: built and unit-tested anywhere; the GPU executor turns it into device
 * buffers and kernel launches. */
#ifndef TCI_GRAPH_PLAN_H
#define TCI_GRAPH_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/lower.h"

typedef struct plan_options {
    /* Nodes kept in fp32 (--fp32-layers): each entry is a node name or an op type (every node of
     * that type) or a shell pattern over node names (fnmatch without flags: '*' also
     * matches '/'); NULL-terminated, may be NULL. An entry that matches no node's name and is
     * no op type is an error (an op type the model lacks selects nothing). Such a
     * node computes in fp32 and stores its float outputs as FLOAT; nodes fused into its step
     * follow it, data-movement nodes (Reshape, Concat, Slice...) keep the precision of their
     * first input, every other node reads fp16 (a cast step where needed). */
    const char *const *fp32_layers;
    /* Every node in fp32, with tensor-op math off in the libraries: the GPU fp32 baseline. */
    bool all_fp32;
    /* fp32 steps may use TF32 tensor cores in cuDNN / cuBLASLt (--precision tf32); the plan
     * itself is that of all_fp32. */
    bool tf32;
    /* bfloat16 instead of fp16 for every float tensor of the nodes not kept in fp32
     * (--precision bf16); everything else as for fp16. */
    bool bf16;
} plan_options;

/* Lowers an optimised graph (pass_optimize done; every dim of every tensor known) to a plan.
 * An op without a GPU path is an error naming the node; so is a shape that depends on runtime
 * values. */
tci_status plan_build(const ir_graph *graph, const plan_options *options, plan **out_plan);
void plan_destroy(plan *p);

/* Which nodes of graph plan_build runs in fp32 (by node index, graph->num_nodes entries), or the
 * error it would give for options->fp32_layers. */
tci_status plan_fp32_nodes(const ir_graph *graph, const plan_options *options, bool *out);

/* Whether one fp32_layers entry selects node: its name, its op type, or a pattern matching its
 * name. */
bool plan_fp32_selects(const char *entry, const ir_node *node);

/* The kernel family a step runs on ("cuDNN convolution", "tcinfer eltwise", ...); the executor
 * replaces library families with the algorithm it chose. */
const char *plan_step_kernel(const plan_step *step);

#endif
