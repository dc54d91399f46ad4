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
    /* Nodes kept out of fp16 (--fp32-layers): each entry is a node name or an op type (every
     * node of that type) or a shell pattern over node names (fnmatch without flags: '*' also
     * matches '/'); NULL-terminated, may be NULL. An entry that matches no node's name and is
     * no op type is an error (an op type the model lacks selects nothing). Such a
     * node computes in fp32 (or kept_precision) and stores its float outputs as FLOAT (BFLOAT16
     * when kept in bf16); nodes fused into its step follow it, data-movement nodes (Reshape,
     * Concat, Slice...) keep the precision of their first input, every other node reads fp16 (a
     * cast step where needed). */
    const char *const *fp32_layers;
    /* The engine's precision, one value from the options to the kernels: FP16 or BF16 store
     * every float tensor of the nodes not kept in fp32 in that 16-bit type; FP32 (tensor-op math
     * off: the GPU fp32 baseline) and TF32 (the same plan, TF32 tensor cores allowed in cuDNN,
     * cuBLASLt and the WMMA tf32 kernel) store every float tensor as FLOAT. Each plan tensor
     * carries the storage dtype that follows (plan_tensor.dtype). */
    tci_precision precision;
    /* FP16 plans: the precision of the kept nodes (fp32_layers). FP32 (or FP16, a zeroed
     * struct's 0) stores them FLOAT, tensor-op math off; TF32 stores them FLOAT, their conv and
     * GEMM steps allowed TF32 tensor cores; BF16 stores them BFLOAT16, every step of theirs as in
     * a bf16 plan. Plans of another precision keep their nodes in fp32 (the api refuses TF32 or
     * BF16 with them). */
    tci_precision kept_precision;
} plan_options;

/* Whether every node of a plan built with options runs in fp32 (FP32 and TF32). */
bool plan_all_fp32(const plan_options *options);
/* The 16-bit float of the nodes not kept in fp32: BFLOAT16 for BF16, else FLOAT16. */
tci_dtype plan_half_dtype(const plan_options *options);
/* The float storage of the kept nodes: BFLOAT16 in an FP16 plan keeping them in BF16, else
 * FLOAT. */
tci_dtype plan_kept_dtype(const plan_options *options);
/* Whether FLOAT steps may use TF32 tensor cores: TF32 plans, and FP16 plans keeping their nodes
 * in TF32 (their FLOAT steps are the kept ones). */
bool plan_allows_tf32(const plan_options *options);
/* "fp32", "tf32" or "bf16": the name of what the kept nodes of a plan built with options run
 * in, for messages. */
const char *plan_kept_name(const plan_options *options);

/* Lowers an optimised graph (pass_optimize done; every dim of every tensor known; for the GPU,
 * pass_fuse_for_gpu and pass_assign_layouts done) to a plan.
 * An op without a GPU path is an error naming the node; so is a shape that depends on runtime
 * values. Steps whose results no later step and no engine output reads are dropped. */
tci_status plan_build(const ir_graph *graph, const plan_options *options, plan **out_plan);
void plan_destroy(plan *p);
/* Whether tensor t of p is a part of the memory it aliases (from view_bytes on, or fewer bytes
 * than it): not all of it. */
bool plan_is_part(const plan *p, int t);

/* Which nodes of graph plan_build keeps (fp32_layers, in options->kept_precision; by node index,
 * graph->num_nodes entries), or the error it would give for options->fp32_layers. */
tci_status plan_fp32_nodes(const ir_graph *graph, const plan_options *options, bool *out);

/* Whether one fp32_layers entry selects node: its name, its op type, or a pattern matching its
 * name. */
bool plan_fp32_selects(const char *entry, const ir_node *node);

/* The kernel family a step runs on ("cuDNN convolution", "tcinfer eltwise", ...); the executor
 * replaces library families with the algorithm it chose. */
const char *plan_step_kernel(const plan_step *step);

#endif
