/* The plan build: engine inputs, then every node lowered in order by its descriptor's gpu_lower
 * (in the kept precision where fp32 layers ask for it), each tensor in the layout the layout
 * pass recorded, graph outputs bound, then lifetimes and arena offsets from the memory planner. */
#define _POSIX_C_SOURCE 200809L /* fnmatch */
#include "graph/plan.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "graph/plan/builder.h"
#include "graph/plan/memplan.h"
#include "layers/op.h"

const char *plan_step_kernel(const plan_step *step) {
    switch (step->kind) {
    case PLAN_STEP_ELTWISE: return "tcinfer eltwise";
    case PLAN_STEP_POOL: return "tcinfer pool2d";
    case PLAN_STEP_GLOBAL_POOL: return "tcinfer global_pool";
    case PLAN_STEP_COPY: return "tcinfer strided_copy";
    case PLAN_STEP_FILL: return "tcinfer fill";
    case PLAN_STEP_LAYOUT: return "tcinfer layout";
    case PLAN_STEP_CAST: return "tcinfer cast";
    case PLAN_STEP_SOFTMAX: return "tcinfer softmax";
    case PLAN_STEP_LAYERNORM:
        return step->u.layernorm.rms ? "tcinfer rmsnorm" : "tcinfer layernorm";
    case PLAN_STEP_GROUPNORM: return "tcinfer groupnorm";
    case PLAN_STEP_LRN: return "tcinfer lrn";
    case PLAN_STEP_GRID_SAMPLE: return "tcinfer grid_sample";
    case PLAN_STEP_ATTENTION: return "tcinfer flash_attention";
    case PLAN_STEP_ROTARY: return "tcinfer rotary_embedding";
    case PLAN_STEP_REDUCE: return "tcinfer reduce";
    case PLAN_STEP_RESIZE: return "tcinfer resize";
    case PLAN_STEP_GATHER: return "tcinfer gather";
    case PLAN_STEP_PAD: return "tcinfer pad";
    case PLAN_STEP_GATHER_ELEMENTS: return "tcinfer gather_elements";
    case PLAN_STEP_SCATTER: return step->u.index.nd ? "tcinfer scatter_nd" : "tcinfer scatter_elements";
    case PLAN_STEP_TRILU: return "tcinfer trilu";
    case PLAN_STEP_ONE_HOT: return "tcinfer one_hot";
    case PLAN_STEP_ARG_REDUCE: return "tcinfer arg_reduce";
    case PLAN_STEP_CUMSUM: return "tcinfer cumsum";
    case PLAN_STEP_TOPK: return "tcinfer topk";
    case PLAN_STEP_CONV: return step->u.conv.depthwise ? "tcinfer depthwise" : "cuDNN convolution";
    case PLAN_STEP_CONV_TRANSPOSE: return "cuDNN backward-data convolution";
    case PLAN_STEP_GEMM: return "cuBLASLt GEMM";
    case PLAN_STEP_RNN: return "tcinfer rnn";
    }
    return "?";
}

/* ---- the build ---- */


static tci_status lower_inputs(plan_builder *b) {
    const ir_graph *g = b->g;
    for (size_t i = 0; i < g->num_inputs; i++) {
        const ir_tensor *t = g->inputs[i];
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d] < 0)
                return status_error(TCI_ERR_INVALID_ARGUMENT,
                                 "input '%s' has a symbolic dim %d; the GPU engine is built for "
                                 "fixed (maximum) shapes: fix it in tci_engine_options.shapes",
                                 t->name, d);
        /* a float input is in the kept precision where a kept node reads it (so that no
         * precision or range is lost before it; fp16 readers get a cast) */
        bool kept = false;
        for (size_t n = 0; n < g->num_nodes && !kept; n++)
            for (int k = 0; k < g->nodes[n]->num_inputs; k++)
                if (g->nodes[n]->inputs[k] == t && b->kept_node[n]) kept = true;
        tci_dtype dtype;
        if (t->dtype == TCI_DTYPE_FLOAT) dtype = kept ? b->kept_dtype : b->half;
        else if (t->dtype == TCI_DTYPE_INT64 || t->dtype == TCI_DTYPE_INT32 ||
                 t->dtype == TCI_DTYPE_BOOL) dtype = t->dtype;
        else
            return status_error(TCI_ERR_UNSUPPORTED, "input '%s' has dtype %s, which has no GPU path",
                             t->name, tci_dtype_name(t->dtype));
        /* in the layout the layout pass chose: NHWC8 ones (feeding spatial ops) arrive so
         * straight from the input kernel */
        int idx;
        TRY_STATUS(builder_new_tensor(b, t->name, dtype, t->layout, t->rank, t->dims, &idx));
        b->p->tensors[idx].input_index = (int)i;
        b->primary[t->index] = idx;
        b->p->input_tensors[i] = idx;
    }
    return TCI_OK;
}

static int root_of(const plan *p, int t) { return p->tensors[t].alias_of >= 0 ? p->tensors[t].alias_of : t; }

/* Drops the steps whose results nothing reads: no step kept after them, no engine output. A
 * fused step may read less than the nodes it fused did (the attention step reads a bool mask
 * before its And with a causal constant and its Expand), leaving the nodes that built the rest
 * without a reader. */
static tci_status drop_unread_steps(plan *p) {
    bool *live = calloc((size_t)p->num_tensors + 1, sizeof(bool));
    bool *kept = calloc((size_t)p->num_steps + 1, sizeof(bool));
    if (!live || !kept) {
        free(live);
        free(kept);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory planning steps");
    }
    for (int i = 0; i < p->num_outputs; i++) live[root_of(p, p->output_tensors[i])] = true;
    for (int s = p->num_steps - 1; s >= 0; s--) {
        const plan_step *st = &p->steps[s];
        kept[s] = st->num_outputs == 0;
        for (int k = 0; k < st->num_outputs; k++)
            if (st->outputs[k] >= 0 && live[root_of(p, st->outputs[k])]) kept[s] = true;
        for (int k = 0; kept[s] && k < st->num_inputs; k++)
            if (st->inputs[k] >= 0) live[root_of(p, st->inputs[k])] = true;
    }
    int n = 0;
    for (int s = 0; s < p->num_steps; s++) {
        if (kept[s]) p->steps[n++] = p->steps[s];
        else if (p->steps[s].kind == PLAN_STEP_LAYOUT) p->num_layout_conversions--;
    }
    p->num_steps = n;
    free(live);
    free(kept);
    return TCI_OK;
}

bool plan_is_part(const plan *p, int t) {
    const plan_tensor *pt = &p->tensors[t];
    return pt->alias_of >= 0 && (pt->view_bytes != 0 || pt->bytes != p->tensors[pt->alias_of].bytes);
}

/* Whether step st reads a part of the tensor r (a view that is not all of it): its elements
 * sit elsewhere than where the step writes them, so st cannot write over r. */
static bool reads_part_of(const plan *p, const plan_step *st, int r) {
    for (int k = 0; k < st->num_inputs; k++) {
        int in = st->inputs[k];
        if (in >= 0 && root_of(p, in) == r && plan_is_part(p, in)) return true;
    }
    return false;
}

/* Lifetimes from the step order, then offsets from the memory planner. */
static tci_status assign_memory(plan *p) {
    int n = p->num_tensors;
    for (int t = 0; t < n; t++) p->tensors[t].first_step = p->tensors[t].last_step = -1;
    for (int t = 0; t < n; t++)
        if (p->tensors[t].input_index >= 0) p->tensors[t].first_step = p->tensors[t].last_step = 0;
    for (int s = 0; s < p->num_steps; s++) {
        const plan_step *st = &p->steps[s];
        for (int k = 0; k < st->num_inputs; k++) {
            if (st->inputs[k] < 0) continue;
            plan_tensor *t = &p->tensors[root_of(p, st->inputs[k])];
            if (t->first_step < 0) t->first_step = s;
            if (t->last_step < s) t->last_step = s;
        }
        for (int k = 0; k < st->num_outputs; k++) {
            plan_tensor *t = &p->tensors[root_of(p, st->outputs[k])];
            if (t->first_step < 0 || t->first_step > s) t->first_step = s;
            if (t->last_step < s) t->last_step = s;
        }
    }
    for (int i = 0; i < p->num_outputs; i++) {
        plan_tensor *t = &p->tensors[root_of(p, p->output_tensors[i])];
        if (t->first_step < 0) t->first_step = 0;
        t->last_step = p->num_steps;
    }
    memplan_buffer *buffers = calloc((size_t)n + 1, sizeof *buffers);
    size_t *offsets = calloc((size_t)n + 1, sizeof *offsets);
    if (!buffers || !offsets) {
        free(buffers);
        free(offsets);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory planning memory");
    }
    for (int t = 0; t < n; t++) {
        const plan_tensor *pt = &p->tensors[t];
        bool placed = pt->memory == PLAN_MEM_ARENA && pt->alias_of < 0 && pt->first_step >= 0;
        buffers[t].bytes = placed ? pt->bytes : 0;
        buffers[t].first_step = placed ? pt->first_step : 0;
        buffers[t].last_step = placed ? pt->last_step : 0;
        buffers[t].inplace_of = -1;
    }
    /* element-wise steps may write over a same-sized input that dies there */
    for (int s = 0; s < p->num_steps; s++) {
        const plan_step *st = &p->steps[s];
        if (st->kind != PLAN_STEP_ELTWISE || st->num_outputs != 1) continue;
        int out = st->outputs[0];
        if (p->tensors[out].alias_of >= 0 || p->tensors[out].memory != PLAN_MEM_ARENA) continue;
        for (int k = 0; k < st->num_inputs; k++) {
            int in = st->inputs[k];
            if (in < 0 || in == out) continue;
            int r = root_of(p, in);
            if (p->tensors[r].memory == PLAN_MEM_ARENA && p->tensors[r].bytes == p->tensors[out].bytes &&
                p->tensors[r].last_step == s && p->tensors[r].output_index < 0 &&
                !reads_part_of(p, st, r)) {
                buffers[out].inplace_of = r;
                break;
            }
        }
    }
    memplan_totals totals;
    tci_status st = memplan_plan(buffers, n, PLAN_ALIGNMENT, offsets, &totals);
    if (st == TCI_OK) {
        for (int t = 0; t < n; t++) p->tensors[t].offset = offsets[t];
        for (int t = 0; t < n; t++)
            if (p->tensors[t].alias_of >= 0)
                p->tensors[t].offset =
                    p->tensors[p->tensors[t].alias_of].offset + p->tensors[t].view_bytes;
        p->arena_bytes = totals.arena_bytes;
        p->naive_bytes = totals.naive_bytes;
    }
    free(buffers);
    free(offsets);
    return st;
}

void plan_destroy(plan *p) {
    if (!p) return;
    free(p->tensors);
    free(p->steps);
    free(p->input_tensors);
    free(p->output_tensors);
    arena_destroy(p->arena);
    free(p);
}

typedef struct op_lookup {
    const char *op_type;
    bool found;
} op_lookup;

static void match_op(const op_desc *d, void *user) {
    op_lookup *l = user;
    if (strcmp(d->op_type, l->op_type) == 0) l->found = true;
}

bool plan_all_fp32(const plan_options *options) {
    return options &&
           (options->precision == TCI_PRECISION_FP32 || options->precision == TCI_PRECISION_TF32);
}

tci_dtype plan_half_dtype(const plan_options *options) {
    return options && options->precision == TCI_PRECISION_BF16 ? TCI_DTYPE_BFLOAT16
                                                               : TCI_DTYPE_FLOAT16;
}

/* The kept precision that applies: an FP16 plan's kept_precision, FP32 for every other. */
static tci_precision kept_precision(const plan_options *options) {
    if (!options || options->precision != TCI_PRECISION_FP16) return TCI_PRECISION_FP32;
    return options->kept_precision == TCI_PRECISION_TF32 ||
                   options->kept_precision == TCI_PRECISION_BF16
               ? options->kept_precision
               : TCI_PRECISION_FP32;
}

tci_dtype plan_kept_dtype(const plan_options *options) {
    return kept_precision(options) == TCI_PRECISION_BF16 ? TCI_DTYPE_BFLOAT16 : TCI_DTYPE_FLOAT;
}

bool plan_allows_tf32(const plan_options *options) {
    return (options && options->precision == TCI_PRECISION_TF32) ||
           kept_precision(options) == TCI_PRECISION_TF32;
}

const char *plan_kept_name(const plan_options *options) {
    tci_precision p = kept_precision(options);
    return p == TCI_PRECISION_BF16 ? "bf16" : p == TCI_PRECISION_TF32 ? "tf32" : "fp32";
}

bool plan_fp32_selects(const char *entry, const ir_node *node) {
    return strcmp(node->name, entry) == 0 || strcmp(node->op_type, entry) == 0 ||
           fnmatch(entry, node->name, 0) == 0;
}

/* Marks the nodes kept out of fp16 (plan_options). */
static tci_status mark_kept_nodes(plan_builder *b) {
    const ir_graph *g = b->g;
    const plan_options *o = b->options;
    if (!o) return TCI_OK;
    for (size_t i = 0; i < g->num_nodes; i++) b->kept_node[i] = plan_all_fp32(o);
    for (const char *const *name = o->fp32_layers; name && *name; name++) {
        bool found = false;
        for (size_t i = 0; i < g->num_nodes; i++)
            if (plan_fp32_selects(*name, g->nodes[i])) {
                b->kept_node[i] = true;
                found = true;
            }
        op_lookup known = {*name, false};
        if (!found) op_registry_each(match_op, &known);
        if (!found && !known.found)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "fp32 layers: no node name matches '%s' and it is no op type "
                             "(node names are those after optimisation: BatchNormalization "
                             "folded into Conv, Identity and Dropout removed)",
                             *name);
    }
    return TCI_OK;
}

tci_status plan_fp32_nodes(const ir_graph *graph, const plan_options *options, bool *out) {
    plan_builder b = {0};
    b.g = graph;
    b.options = options;
    b.kept_node = out;
    for (size_t i = 0; i < graph->num_nodes; i++) out[i] = false;
    return mark_kept_nodes(&b);
}

/* Whether node computes in the kept precision: kept by the options, or a data-movement node
 * whose first input is stored in it. */
static bool node_kept(const plan_builder *b, const ir_node *node) {
    if (b->kept_node[node->index]) return true;
    return (node->desc->flags & OP_MOVES_DATA) && node->num_inputs && node->inputs[0] &&
           !node->inputs[0]->data && b->primary[node->inputs[0]->index] >= 0 &&
           b->p->tensors[b->primary[node->inputs[0]->index]].dtype == b->kept_dtype &&
           b->kept_dtype != b->half;
}

static tci_status lower_node(plan_builder *b, const ir_node *node) {
    /* an If whose condition is known at build was inlined (pass_inline_known_branches) */
    if (node->desc->flags & OP_CONTROL_FLOW)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "data-dependent control flow runs on the CPU reference: "
                             "TCI_BACKEND_CPU, tci_engine_options.backend");
    b->kept = node_kept(b, node);
    /* an output whose shape needs run-time values (Range of runtime scalars...) is the reason,
     * whatever the op */
    for (int o = 0; o < node->num_outputs; o++)
        if (node->outputs[o] && lower_is_read(b, node->outputs[o]))
            TRY_STATUS(lower_require_known(node, node->outputs[o]));
    if (!node->desc->gpu_lower)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "op %s has no GPU path yet (run it with TCI_BACKEND_CPU, "
                             "tci_engine_options.backend)",
                             node->op_type);
    return node->desc->gpu_lower(b, node);
}

bool lower_node_kept(const plan_builder *b, const ir_node *node) {
    return b->kept_node[node->index];
}

tci_status lower_fused_node(plan_builder *b, const ir_node *node) {
    const bool owner_kept = b->kept;
    tci_status st = lower_node(b, node);
    b->kept = owner_kept;
    return st;
}

static tci_status build(plan_builder *b) {
    const ir_graph *g = b->g;
    TRY_STATUS(mark_kept_nodes(b));
    TRY_STATUS(lower_inputs(b));
    for (size_t i = 0; i < g->num_nodes; i++)
        if (!g->nodes[i]->fused_into) TRY_STATUS(lower_node(b, g->nodes[i]));
    for (size_t i = 0; i < g->num_outputs; i++) {
        const ir_tensor *t = g->outputs[i];
        int idx = -1;
        if (t->data) {
            TRY_STATUS(builder_constant(b, g->nodes[0], t, PLAN_LAYOUT_DENSE, &idx));
        } else {
            idx = b->primary[t->index];
        }
        if (idx < 0) return status_error(TCI_ERR_INTERNAL, "graph output '%s' was not lowered", t->name);
        b->p->output_tensors[i] = idx;
        if (b->p->tensors[idx].output_index < 0) b->p->tensors[idx].output_index = (int)i;
    }
    TRY_STATUS(drop_unread_steps(b->p));
    return assign_memory(b->p);
}

tci_status plan_build(const ir_graph *graph, const plan_options *options, plan **out_plan) {
    *out_plan = NULL;
    if (graph->num_nodes == 0)
        return status_error(TCI_ERR_UNSUPPORTED, "the model has no nodes to run on the GPU");
    if (!graph->layouts_assigned)
        return status_error(TCI_ERR_INTERNAL,
                         "the graph's GPU layouts are not assigned (pass_assign_layouts)");
    plan *p = calloc(1, sizeof *p);
    plan_builder b = {0};
    size_t nt = graph->num_tensors, nn = graph->num_nodes;
    b.p = p;
    b.g = graph;
    b.options = options;
    b.half = plan_half_dtype(options);
    b.kept_dtype = plan_kept_dtype(options);
    if (p) {
        p->arena = arena_create();
        p->num_inputs = (int)graph->num_inputs;
        p->num_outputs = (int)graph->num_outputs;
        p->input_tensors = calloc(graph->num_inputs + 1, sizeof(int));
        p->output_tensors = calloc(graph->num_outputs + 1, sizeof(int));
    }
    b.primary = malloc(nt * sizeof(int));
    b.converted = malloc(nt * 4 * sizeof(int));
    b.dense_const = malloc(nt * 2 * sizeof(int));
    b.nhwc_const = malloc(nt * 2 * sizeof(int));
    b.consumers = calloc(nt, sizeof(int));
    b.kept_node = calloc(nn, sizeof(bool));
    tci_status st = TCI_OK;
    if (!p || !p->arena || !p->input_tensors || !p->output_tensors || !b.primary ||
        !b.converted || !b.dense_const || !b.nhwc_const || !b.consumers ||
        !b.kept_node)
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory building the GPU plan");
    if (st == TCI_OK) {
        for (size_t i = 0; i < nt; i++) b.primary[i] = -1;
        for (size_t i = 0; i < nt * 4; i++) b.converted[i] = -1;
        for (size_t i = 0; i < nt * 2; i++) b.dense_const[i] = b.nhwc_const[i] = -1;
        for (size_t i = 0; i < nn; i++)
            for (int k = 0; k < graph->nodes[i]->num_inputs; k++)
                if (graph->nodes[i]->inputs[k]) b.consumers[graph->nodes[i]->inputs[k]->index]++;
        for (size_t i = 0; i < graph->num_outputs; i++) b.consumers[graph->outputs[i]->index]++;
        st = build(&b);
    }
    free(b.primary);
    free(b.converted);
    free(b.dense_const);
    free(b.nhwc_const);
    free(b.consumers);
    free(b.kept_node);
    if (st != TCI_OK) {
        plan_destroy(p);
        return st;
    }
    *out_plan = p;
    return TCI_OK;
}