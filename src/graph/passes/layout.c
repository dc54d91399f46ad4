/* The layout pass: which layout each IR tensor a GPU step computes is stored in (dense, or NHWC8
 * for the tensor-core paths), decided from the ops' descriptors and recorded in ir_tensor.layout,
 * which the planner's lowering then follows. */
#include "graph/passes.h"
#include "layers/op.h"

static bool can_be_nhwc(const ir_tensor *t) {
    return t && t->rank == 4 && t->dtype == TCI_DTYPE_FLOAT;
}

static bool is_computed(const ir_tensor *t) { return t && !t->data; }

/* A 4-D float engine input is NHWC8 when a node reads it as input 0 in NHWC8 (OP_NHWC_INPUT):
 * converted on the way in rather than by a step. */
static plan_layout input_layout(const ir_graph *g, const ir_tensor *t) {
    if (!can_be_nhwc(t)) return PLAN_LAYOUT_DENSE;
    for (size_t i = 0; i < g->num_nodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n->num_inputs > 0 && n->inputs[0] == t && n->desc &&
            (n->desc->flags & OP_NHWC_INPUT))
            return PLAN_LAYOUT_NHWC8;
    }
    return PLAN_LAYOUT_DENSE;
}

/* An element-wise step runs in NHWC8 when its output is 4-D float, some computed input already
 * is NHWC8 and every computed input is float (constants are uploaded in whatever it runs in). */
static plan_layout follow_inputs(const ir_node *n) {
    if (n->num_outputs < 1 || !can_be_nhwc(n->outputs[0])) return PLAN_LAYOUT_DENSE;
    bool any = false;
    for (int i = 0; i < n->num_inputs; i++) {
        const ir_tensor *t = n->inputs[i];
        if (!is_computed(t)) continue;
        if (t->dtype != TCI_DTYPE_FLOAT) return PLAN_LAYOUT_DENSE;
        if (t->layout == PLAN_LAYOUT_NHWC8) any = true;
    }
    return any ? PLAN_LAYOUT_NHWC8 : PLAN_LAYOUT_DENSE;
}

/* The layout of the step of node n (not fused into another), from its descriptor and the layouts
 * of its inputs, which come earlier. */
static plan_layout step_layout(const ir_node *n) {
    const op_desc *d = n->desc;
    if (!d) return PLAN_LAYOUT_DENSE;
    const ir_tensor *x = n->num_inputs > 0 ? n->inputs[0] : NULL;
    if (d->flags & OP_NHWC_OUTPUT) return PLAN_LAYOUT_NHWC8;
    if (d->flags & OP_PASSTHROUGH) return is_computed(x) ? x->layout : PLAN_LAYOUT_DENSE;
    if (d->flags & OP_FOLLOWS_LAYOUT) return follow_inputs(n);
    if (d->keeps_nhwc && is_computed(x) && x->layout == PLAN_LAYOUT_NHWC8 && d->keeps_nhwc(n))
        return PLAN_LAYOUT_NHWC8;
    if (d->views_as_nhwc && is_computed(x) && x->layout == PLAN_LAYOUT_DENSE && d->views_as_nhwc(n))
        return PLAN_LAYOUT_NHWC8;
    return PLAN_LAYOUT_DENSE;
}

tci_status pass_assign_layouts(ir_graph *graph) {
    for (size_t i = 0; i < graph->num_tensors; i++) graph->tensors[i]->layout = PLAN_LAYOUT_DENSE;
    for (size_t i = 0; i < graph->num_inputs; i++)
        graph->inputs[i]->layout = input_layout(graph, graph->inputs[i]);
    /* in order: a node's inputs are laid out before it; a fused node comes after the node whose
     * step computes it, and its outputs (the epilogue's output among them) are that step's */
    for (size_t i = 0; i < graph->num_nodes; i++) {
        const ir_node *n = graph->nodes[i];
        const ir_node *step = n->fused_into ? n->fused_into : n;
        plan_layout layout = step_layout(step);
        const ir_epilogue *e = step->epilogue;
        for (int o = 0; o < n->num_outputs; o++) {
            ir_tensor *t = n->outputs[o];
            /* a GEMM writing channels-last rows as the NHWC8 tensor (ir_epilogue.nhwc_output) */
            bool nhwc = layout == PLAN_LAYOUT_NHWC8 || (e && e->nhwc_output && t == e->output);
            if (is_computed(t))
                t->layout = nhwc && can_be_nhwc(t) ? PLAN_LAYOUT_NHWC8 : PLAN_LAYOUT_DENSE;
        }
    }
    graph->layouts_assigned = true;
    return TCI_OK;
}

tci_status pass_prepare_for_gpu(ir_graph *graph) {
    TRY_STATUS(pass_emulate_qdq(graph));
    TRY_STATUS(pass_token_image_views(graph));
    TRY_STATUS(pass_fold_group_norm_chains(graph));
    TRY_STATUS(pass_fold_layer_scale(graph));
    TRY_STATUS(pass_merge_sibling_gemms(graph));
    TRY_STATUS(pass_fuse_for_gpu(graph));
    TRY_STATUS(pass_assign_layouts(graph));
    return pass_fold_slices_into_concats(graph);
}

void pass_mark_variant_dims(ir_graph *graph, const ir_graph *ref) {
    for (size_t i = 0; i < graph->num_tensors; i++) {
        ir_tensor *t = graph->tensors[i];
        const ir_tensor *r = ir_graph_find_tensor(ref, t->name);
        if (!r || r->rank != t->rank) continue;
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d] == 1 && r->dims[d] != 1) t->variant_dims |= 1u << d;
    }
}
