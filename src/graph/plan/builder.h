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
    int *converted;    /* by IR tensor index * 4 + layout * 2 + fp32: the same value in another
                          layout and/or float precision, -1 if none */
    int *consumers;    /* by IR tensor index: node inputs reading it (+1 for a graph output) */
    bool *fp32_node;   /* by node index: computes and stores its float outputs in fp32 */
    bool fp32;         /* the node being lowered does (its float outputs are FLOAT) */
    tci_dtype half;    /* the 16-bit float of every other node: FLOAT16, or BFLOAT16 (bf16) */
    int *dense_const;  /* by IR tensor index * 2 + fp32: constant uploaded dense */
    int *nhwc_const;   /* by IR tensor index * 2 + fp32: constant uploaded NHWC8 */
};

/* A new plan tensor (not interned: name must outlive the plan). */
tci_status builder_new_tensor(plan_builder *b, const char *name, tci_dtype dtype,
                              plan_layout layout, int rank, const int64_t *dims, int *out_index);
/* The plan tensor of a constant IR tensor in layout (uploaded once per layout and precision). */
tci_status builder_constant(plan_builder *b, const ir_node *node, const ir_tensor *t,
                            plan_layout layout, int *out_index);
bool builder_is_float(tci_dtype d);

#endif
