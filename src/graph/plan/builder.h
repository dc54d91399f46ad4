/* The plan builder's state, shared by the lowering calls (builder.c) and the build driver
 * (plan.c); nothing outside src/graph/plan/ sees it. */
#ifndef TCI_GRAPH_PLAN_BUILDER_H
#define TCI_GRAPH_PLAN_BUILDER_H

#include "graph/plan.h"

struct plan_builder {
    plan *p;
    const ir_graph *g;
    const plan_options *options;
    int *primary;      /* by IR tensor index: its plan tensor, -1 until produced */
    int *converted;    /* by IR tensor index * 4 + layout * 2 + kept: the same value in another
                          layout and/or float precision (kept: in kept_dtype), -1 if none */
    int *consumers;    /* by IR tensor index: node inputs reading it (+1 for a graph output) */
    bool *kept_node;   /* by node index: kept out of fp16, computes and stores its float outputs
                          in kept_dtype (every node of FP32 and TF32 plans) */
    bool kept;         /* the node being lowered is (its float outputs are kept_dtype) */
    tci_dtype half;    /* the 16-bit float of every other node: FLOAT16, or BFLOAT16 (bf16) */
    tci_dtype kept_dtype; /* FLOAT, or BFLOAT16 (FP16 plans keeping their nodes in bf16) */
    int *dense_const;  /* by IR tensor index * 2 + kept: constant uploaded dense */
    int *nhwc_const;   /* by IR tensor index * 2 + kept: constant uploaded NHWC8 */
};

/* A new plan tensor (not interned: name must outlive the plan). */
tci_status builder_new_tensor(plan_builder *b, const char *name, tci_dtype dtype,
                              plan_layout layout, int rank, const int64_t *dims, int *out_index);
/* The plan tensor of a constant IR tensor in layout (uploaded once per layout and precision). */
tci_status builder_constant(plan_builder *b, const ir_node *node, const ir_tensor *t,
                            plan_layout layout, int *out_index);
bool builder_is_float(tci_dtype d);

#endif
