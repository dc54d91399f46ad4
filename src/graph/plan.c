/* Lowering of the optimised IR to the logical GPU plan: layout assignment (NHWC8 for the spatial
 * part of a network, dense elsewhere, with a conversion only where an op needs the other one),
 * BatchNorm folded into Conv weights, bias/activation/residual fused into Conv and GEMM steps,
 * and arena offsets from the memory planner. */
#define _POSIX_C_SOURCE 200809L /* fnmatch */
#include "graph/plan.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/memplan.h"
#include "layers/op.h"
#include "layers/window.h"

enum { PLAN_ALIGNMENT = 256 };

typedef struct builder {
    plan *p;
    const ir_graph *g;
    const plan_options *options;
    int *primary;      /* by IR tensor index: its plan tensor, -1 until produced */
    int *converted;    /* by IR tensor index * 4 + layout * 2 + fp32: the same value in another
                          layout and/or float precision, -1 if none */
    int *consumers;    /* by IR tensor index: node inputs reading it (+1 for a graph output) */
    bool *fused;       /* by node index: lowered as part of an earlier node's step */
    bool *fp32_node;   /* by node index: computes and stores its float outputs in fp32 */
    bool fp32;         /* the node being lowered does (its float outputs are FLOAT) */
    tci_dtype half;    /* the 16-bit float of every other node: FLOAT16, or BFLOAT16 (bf16) */
    int *dense_const;  /* by IR tensor index * 2 + fp32: constant uploaded dense */
    int *nhwc_const;   /* by IR tensor index * 2 + fp32: constant uploaded NHWC8 */
} builder;

static bool is_float(tci_dtype d) {
    return d == TCI_DTYPE_FLOAT16 || d == TCI_DTYPE_BFLOAT16 || d == TCI_DTYPE_FLOAT;
}

/* fp32 -> the bits of a 16-bit float dtype (FLOAT16 or BFLOAT16) */
static uint16_t half_bits(tci_dtype dtype, float v) {
    return dtype == TCI_DTYPE_BFLOAT16 ? op_float_to_bfloat16(v) : op_float_to_half(v);
}

/* "fp32", "fp16", "bf16": the short names of float dtypes in labels */
static const char *float_name(tci_dtype dtype) {
    return dtype == TCI_DTYPE_FLOAT ? "fp32" : dtype == TCI_DTYPE_BFLOAT16 ? "bf16" : "fp16";
}

int64_t plan_pad8(int64_t c) { return (c + 7) / 8 * 8; }

/* ---- tensors and steps ---- */

static tci_status grow(void **array, int *cap, int need, size_t elem) {
    if (need <= *cap) return TCI_OK;
    int n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *q = realloc(*array, (size_t)n * elem);
    if (!q) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory building the GPU plan");
    *array = q;
    *cap = n;
    return TCI_OK;
}

static size_t tensor_bytes(const plan_tensor *t) {
    int64_t count = 1;
    for (int i = 0; i < t->rank; i++) count *= i == 1 && t->layout == PLAN_LAYOUT_NHWC8 ? t->padded_channels : t->dims[i];
    return (size_t)count * tci_dtype_size(t->dtype);
}

static tci_status new_tensor(builder *b, const char *name, tci_dtype dtype, plan_layout layout,
                             int rank, const int64_t *dims, int *out_index) {
    plan *p = b->p;
    TCI_TRY(grow((void **)&p->tensors, &p->cap_tensors, p->num_tensors + 1, sizeof(plan_tensor)));
    plan_tensor *t = &p->tensors[p->num_tensors];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = dtype;
    t->layout = layout;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    if (layout == PLAN_LAYOUT_NHWC8) t->padded_channels = plan_pad8(dims[1]);
    t->bytes = tensor_bytes(t);
    t->alias_of = -1;
    t->input_index = -1;
    t->output_index = -1;
    t->first_step = t->last_step = -1;
    *out_index = p->num_tensors++;
    return TCI_OK;
}

static tci_status add_step(builder *b, plan_step_kind kind, const ir_node *node, const char *label,
                           plan_step **out_step) {
    plan *p = b->p;
    TCI_TRY(grow((void **)&p->steps, &p->cap_steps, p->num_steps + 1, sizeof(plan_step)));
    plan_step *s = &p->steps[p->num_steps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->node = node;
    s->label = label ? label : node->op_type;
    for (int i = 0; i < PLAN_MAX_STEP_INPUTS; i++) s->inputs[i] = -1;
    s->outputs[0] = s->outputs[1] = -1;
    *out_step = s;
    return TCI_OK;
}

static const char *intern(builder *b, const char *text) {
    return tci_arena_strdup(b->p->arena, text);
}

/* Device float dtype of what the node being lowered produces: fp16 (bf16 in --precision bf16),
 * or fp32 in fp32 layers. */
static tci_dtype float_dtype(const builder *b) { return b->fp32 ? TCI_DTYPE_FLOAT : b->half; }

static tci_status device_dtype(const builder *b, const ir_node *node, tci_dtype dtype,
                               tci_dtype *out) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT: *out = float_dtype(b); return TCI_OK;
    case TCI_DTYPE_INT64:
    case TCI_DTYPE_INT32:
    case TCI_DTYPE_BOOL: *out = dtype; return TCI_OK;
    default:
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "dtype %s has no GPU path",
                             tci_dtype_name(dtype));
    }
}

static tci_status require_known(const ir_node *node, const ir_tensor *t) {
    if (t->rank < 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the rank of '%s' depends on runtime values; the GPU engine needs "
                             "static shapes (fix inputs with --shape)",
                             t->name ? t->name : "?");
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "dim %d of '%s' depends on runtime values; the GPU engine needs "
                                 "static shapes (fix inputs with --shape)",
                                 i, t->name ? t->name : "?");
    return TCI_OK;
}

/* fp32 host values of a float constant */
static const float *const_floats(const ir_tensor *t) {
    return t->dtype == TCI_DTYPE_FLOAT ? (const float *)t->data : NULL;
}

static int64_t ir_count(const ir_tensor *t) {
    int64_t c = 1;
    for (int i = 0; i < t->rank; i++) c *= t->dims[i];
    return c;
}

/* Uploads a constant in the given layout (converting fp32 to fp16; NHWC8 takes the constant
 * right-aligned to rank 4, as broadcasting does). */
static tci_status constant_tensor(builder *b, const ir_node *node, const ir_tensor *t,
                                  plan_layout layout, int *out_index) {
    int *cache = layout == PLAN_LAYOUT_NHWC8 ? b->nhwc_const : b->dense_const;
    size_t key = t->index * 2 + (b->fp32 ? 1 : 0);
    if (cache[key] >= 0) {
        *out_index = cache[key];
        return TCI_OK;
    }
    tci_dtype dtype = TCI_DTYPE_UNDEFINED;
    TCI_TRY(device_dtype(b, node, t->dtype, &dtype));
    int64_t dims[TCI_MAX_RANK];
    int rank = t->rank;
    for (int i = 0; i < rank; i++) dims[i] = t->dims[i];
    if (layout == PLAN_LAYOUT_NHWC8) {
        if (rank > 4 || t->dtype != TCI_DTYPE_FLOAT)
            return ir_node_error(node, TCI_ERR_INTERNAL, "constant '%s' cannot be NHWC8", t->name);
        int shift = 4 - rank;
        for (int i = 3; i >= 0; i--) dims[i] = i - shift >= 0 ? t->dims[i - shift] : 1;
        rank = 4;
    }
    int idx;
    TCI_TRY(new_tensor(b, t->name, dtype, layout, rank, dims, &idx));
    plan_tensor *pt = &b->p->tensors[idx];
    pt->memory = PLAN_MEM_CONSTANT;
    void *host = tci_arena_alloc(b->p->arena, pt->bytes ? pt->bytes : 1);
    if (!host) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory converting constants");
    int64_t count = ir_count(t);
    if (t->dtype != TCI_DTYPE_FLOAT || (dtype == TCI_DTYPE_FLOAT && layout == PLAN_LAYOUT_DENSE)) {
        memcpy(host, t->data, (size_t)count * tci_dtype_size(t->dtype));
    } else if (dtype == TCI_DTYPE_FLOAT) {
        const float *src = t->data;
        float *dst = host;
        int64_t n = dims[0], c = dims[1], h = dims[2], w = dims[3], cp = pt->padded_channels;
        memset(dst, 0, pt->bytes);
        for (int64_t in = 0; in < n; in++)
            for (int64_t ic = 0; ic < c; ic++)
                for (int64_t ih = 0; ih < h; ih++)
                    for (int64_t iw = 0; iw < w; iw++)
                        dst[((in * h + ih) * w + iw) * cp + ic] = src[((in * c + ic) * h + ih) * w + iw];
    } else if (layout == PLAN_LAYOUT_DENSE) {
        const float *src = t->data;
        uint16_t *dst = host;
        for (int64_t i = 0; i < count; i++) dst[i] = half_bits(dtype, src[i]);
    } else {
        const float *src = t->data;
        uint16_t *dst = host;
        int64_t n = dims[0], c = dims[1], h = dims[2], w = dims[3], cp = pt->padded_channels;
        for (int64_t in = 0; in < n; in++)
            for (int64_t ic = 0; ic < c; ic++)
                for (int64_t ih = 0; ih < h; ih++)
                    for (int64_t iw = 0; iw < w; iw++)
                        dst[((in * h + ih) * w + iw) * cp + ic] =
                            half_bits(dtype, src[((in * c + ic) * h + ih) * w + iw]);
    }
    pt->host_data = host;
    b->p->weight_bytes += pt->bytes;
    cache[key] = idx;
    *out_index = idx;
    return TCI_OK;
}

static bool is_constant(const ir_tensor *t) { return t && t->data; }

/* A new plan tensor holding src in another layout (same dtype) or another float dtype (same
 * layout), and the step that fills it. */
static tci_status convert_step(builder *b, const ir_node *node, const ir_tensor *t, int src,
                               plan_layout layout, tci_dtype dtype, int *out_index) {
    const plan_tensor *pt = &b->p->tensors[src];
    int64_t dims[TCI_MAX_RANK] = {0};
    int rank = pt->rank;
    bool relayout = layout != pt->layout;
    if (relayout && layout == PLAN_LAYOUT_NHWC8) {
        if (rank > 4)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "'%s' has rank %d and cannot be laid out NHWC", t->name, rank);
        for (int i = 3; i >= 0; i--) dims[i] = i - (4 - rank) >= 0 ? pt->dims[i - (4 - rank)] : 1;
        rank = 4;
    } else {
        for (int i = 0; i < rank; i++) dims[i] = pt->dims[i];
    }
    char name[256];
    snprintf(name, sizeof name, "%s:%s%s", t->name,
             layout == PLAN_LAYOUT_NHWC8 ? "nhwc8" : "dense",
             dtype == TCI_DTYPE_FLOAT ? ":fp32" : "");
    int conv;
    TCI_TRY(new_tensor(b, intern(b, name), dtype, layout, rank, dims, &conv));
    plan_step *s;
    char cast_label[32];
    snprintf(cast_label, sizeof cast_label, "cast %s->%s", float_name(pt->dtype), float_name(dtype));
    const char *label = !relayout                      ? intern(b, cast_label)
                        : layout == PLAN_LAYOUT_NHWC8 ? "layout dense->NHWC8"
                                                      : "layout NHWC8->dense";
    TCI_TRY(add_step(b, relayout ? PLAN_STEP_LAYOUT : PLAN_STEP_CAST, node, label, &s));
    s->inputs[0] = src;
    s->num_inputs = 1;
    s->outputs[0] = conv;
    s->num_outputs = 1;
    if (relayout) {
        s->u.layout.to_dense = layout == PLAN_LAYOUT_DENSE;
        b->p->num_layout_conversions++;
    } else {
        /* padded channels are zeros and stay zeros */
        s->u.cast.count = (int64_t)(b->p->tensors[conv].bytes / tci_dtype_size(dtype));
    }
    *out_index = conv;
    return TCI_OK;
}

/* The plan tensor holding IR tensor t in the wanted layout (-1: whatever it has) and, for float
 * values, in the float precision of the node being lowered, inserting a layout conversion
 * and/or a cast the first time one is needed. */
static tci_status get_input(builder *b, const ir_node *node, const ir_tensor *t, int want,
                            int *out_index) {
    if (is_constant(t)) {
        plan_layout layout = want == PLAN_LAYOUT_NHWC8 ? PLAN_LAYOUT_NHWC8 : PLAN_LAYOUT_DENSE;
        return constant_tensor(b, node, t, layout, out_index);
    }
    int idx = b->primary[t->index];
    if (idx < 0)
        return ir_node_error(node, TCI_ERR_INTERNAL, "input '%s' has not been lowered", t->name);
    const plan_tensor *pt = &b->p->tensors[idx];
    plan_layout layout = want < 0 ? pt->layout : (plan_layout)want;
    tci_dtype dtype = is_float(pt->dtype) ? float_dtype(b) : pt->dtype;
    if (pt->layout == layout && pt->dtype == dtype) {
        *out_index = idx;
        return TCI_OK;
    }
    if (pt->layout != layout && !is_float(pt->dtype))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "'%s' (%s) cannot change layout",
                             t->name, tci_dtype_name(pt->dtype));
    int *cache = &b->converted[t->index * 4];
    int want_key = (int)layout * 2 + (dtype == TCI_DTYPE_FLOAT);
    if (cache[want_key] >= 0) {
        *out_index = cache[want_key];
        return TCI_OK;
    }
    /* the layout first, in the stored precision, then the cast */
    int src = idx;
    if (pt->layout != layout) {
        int key = (int)layout * 2 + (pt->dtype == TCI_DTYPE_FLOAT);
        if (cache[key] < 0) TCI_TRY(convert_step(b, node, t, idx, layout, pt->dtype, &cache[key]));
        src = cache[key];
    }
    if (b->p->tensors[src].dtype != dtype) {
        int cast;
        TCI_TRY(convert_step(b, node, t, src, layout, dtype, &cast));
        src = cast;
    }
    cache[want_key] = src;
    *out_index = src;
    return TCI_OK;
}

/* Creates the plan tensor for node output t in the given layout. */
static tci_status make_output(builder *b, const ir_node *node, const ir_tensor *t,
                              plan_layout layout, int *out_index) {
    TCI_TRY(require_known(node, t));
    tci_dtype dtype = TCI_DTYPE_UNDEFINED;
    TCI_TRY(device_dtype(b, node, t->dtype, &dtype));
    if (layout == PLAN_LAYOUT_NHWC8 && (t->rank != 4 || !is_float(dtype)))
        layout = PLAN_LAYOUT_DENSE;
    TCI_TRY(new_tensor(b, t->name, dtype, layout, t->rank, t->dims, out_index));
    b->primary[t->index] = *out_index;
    return TCI_OK;
}

/* An output sharing the memory of src with new dims (Reshape and friends on dense data). */
static tci_status alias_output(builder *b, const ir_node *node, const ir_tensor *t, int src,
                               int *out_index) {
    TCI_TRY(require_known(node, t));
    plan_tensor copy = b->p->tensors[src];
    int idx;
    TCI_TRY(new_tensor(b, t->name, copy.dtype, PLAN_LAYOUT_DENSE, t->rank, t->dims, &idx));
    plan_tensor *pt = &b->p->tensors[idx];
    int root = copy.alias_of >= 0 ? copy.alias_of : src;
    if (copy.memory == PLAN_MEM_CONSTANT) {
        pt->memory = PLAN_MEM_CONSTANT;
        pt->host_data = copy.host_data;
    } else {
        pt->alias_of = root;
    }
    b->primary[t->index] = idx;
    *out_index = idx;
    return TCI_OK;
}

/* ---- consumers and fusion ---- */

static int single_consumer(const builder *b, const ir_tensor *t, ir_node **out_node) {
    *out_node = NULL;
    if (b->consumers[t->index] != 1 || t->is_graph_output) return 0;
    const ir_graph *g = b->g;
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k] == t) {
                *out_node = g->nodes[i];
                return 1;
            }
    return 0;
}

static bool op_is(const ir_node *n, const char *op) { return n && strcmp(n->op_type, op) == 0; }

/* Scalar value of an optional constant input (Clip's min/max); def when absent. */
static tci_status scalar_input(const ir_node *n, int index, float def, float *out) {
    *out = def;
    if (index >= n->num_inputs || !n->inputs[index]) return TCI_OK;
    const ir_tensor *t = n->inputs[index];
    if (!t->data || t->dtype != TCI_DTYPE_FLOAT || ir_count(t) != 1)
        return ir_node_error(n, TCI_ERR_UNSUPPORTED,
                             "input %d must be a constant float scalar on the GPU", index);
    *out = ((const float *)t->data)[0];
    return TCI_OK;
}

/* The activation a unary node computes, if it is one the epilogues know. */
static tci_status activation_of(const ir_node *n, bool *is_act, plan_activation *act) {
    *is_act = true;
    memset(act, 0, sizeof *act);
    const char *op = n->op_type;
    if (!strcmp(op, "Relu")) act->kind = PLAN_ACT_RELU;
    else if (!strcmp(op, "Sigmoid")) act->kind = PLAN_ACT_SIGMOID;
    else if (!strcmp(op, "Tanh")) act->kind = PLAN_ACT_TANH;
    else if (!strcmp(op, "HardSwish")) act->kind = PLAN_ACT_HARD_SWISH;
    else if (!strcmp(op, "Softplus")) act->kind = PLAN_ACT_SOFTPLUS;
    else if (!strcmp(op, "Sqrt")) act->kind = PLAN_ACT_SQRT;
    else if (!strcmp(op, "Erf")) act->kind = PLAN_ACT_ERF;
    else if (!strcmp(op, "LeakyRelu")) {
        act->kind = PLAN_ACT_LEAKY_RELU;
        TCI_TRY(ir_attr_float(n, "alpha", 0.01f, &act->alpha));
    } else if (!strcmp(op, "Elu")) {
        act->kind = PLAN_ACT_ELU;
        TCI_TRY(ir_attr_float(n, "alpha", 1.0f, &act->alpha));
    } else if (!strcmp(op, "Selu")) {
        act->kind = PLAN_ACT_SELU;
        TCI_TRY(ir_attr_float(n, "alpha", 1.67326319217681884765625f, &act->alpha));
        TCI_TRY(ir_attr_float(n, "gamma", 1.05070102214813232421875f, &act->beta));
    } else if (!strcmp(op, "HardSigmoid")) {
        act->kind = PLAN_ACT_HARD_SIGMOID;
        TCI_TRY(ir_attr_float(n, "alpha", 0.2f, &act->alpha));
        TCI_TRY(ir_attr_float(n, "beta", 0.5f, &act->beta));
    } else if (!strcmp(op, "Gelu")) {
        const char *approx;
        TCI_TRY(ir_attr_string(n, "approximate", "none", &approx));
        act->kind = strcmp(approx, "tanh") == 0 ? PLAN_ACT_GELU_TANH : PLAN_ACT_GELU;
    } else if (!strcmp(op, "Clip")) {
        act->kind = PLAN_ACT_CLIP;
        if (n->since_version < 11) {
            TCI_TRY(ir_attr_float(n, "min", -INFINITY, &act->alpha));
            TCI_TRY(ir_attr_float(n, "max", INFINITY, &act->beta));
        } else {
            TCI_TRY(scalar_input(n, 1, -INFINITY, &act->alpha));
            TCI_TRY(scalar_input(n, 2, INFINITY, &act->beta));
        }
    } else {
        *is_act = false;
    }
    return TCI_OK;
}

/* x -> Sigmoid -> s, Mul(x, s): SiLU, as exporters write it. Returns the Mul when t's only
 * readers are exactly that pair. */
static ir_node *silu_mul(const builder *b, const ir_tensor *t) {
    if (b->consumers[t->index] != 2 || t->is_graph_output) return NULL;
    ir_node *sig = NULL, *mul = NULL;
    const ir_graph *g = b->g;
    for (size_t i = 0; i < g->num_nodes; i++) {
        ir_node *n = g->nodes[i];
        for (int k = 0; k < n->num_inputs; k++)
            if (n->inputs[k] == t) {
                if (op_is(n, "Sigmoid")) sig = n;
                else if (op_is(n, "Mul")) mul = n;
            }
    }
    if (!sig || !mul || mul->num_inputs != 2) return NULL;
    const ir_tensor *s = sig->outputs[0];
    if (b->consumers[s->index] != 1 || s->is_graph_output) return NULL;
    bool pair = (mul->inputs[0] == t && mul->inputs[1] == s) ||
                (mul->inputs[1] == t && mul->inputs[0] == s);
    return pair ? mul : NULL;
}

/* Follows t into a fusable activation: sets *act and returns the node whose output replaces t
 * (NULL when nothing fuses). Marks the fused nodes. */
static tci_status fuse_activation(builder *b, const ir_tensor *t, plan_activation *act,
                                  const ir_tensor **out_tensor, char *label, size_t label_size) {
    memset(act, 0, sizeof *act);
    *out_tensor = t;
    ir_node *mul = silu_mul(b, t);
    if (mul) {
        ir_node *sig = NULL;
        for (size_t i = 0; i < b->g->num_nodes; i++)
            if (op_is(b->g->nodes[i], "Sigmoid") && b->g->nodes[i]->inputs[0] == t)
                sig = b->g->nodes[i];
        act->kind = PLAN_ACT_SILU;
        b->fused[sig->index] = b->fused[mul->index] = true;
        *out_tensor = mul->outputs[0];
        strncat(label, "+SiLU", label_size - strlen(label) - 1);
        return TCI_OK;
    }
    ir_node *next;
    if (!single_consumer(b, t, &next)) return TCI_OK;
    bool is_act;
    plan_activation a;
    TCI_TRY(activation_of(next, &is_act, &a));
    if (!is_act || next->inputs[0] != t) return TCI_OK;
    *act = a;
    b->fused[next->index] = true;
    *out_tensor = next->outputs[0];
    strncat(label, "+", label_size - strlen(label) - 1);
    strncat(label, next->op_type, label_size - strlen(label) - 1);
    return TCI_OK;
}

/* A float host constant of the given dims: fp32 (dense: a packing source, see below) or
 * converted to fp16. */
static tci_status host_constant(builder *b, const char *name, const float *values, int rank,
                                const int64_t *dims, tci_dtype dtype, plan_layout layout,
                                int *out_index) {
    int idx;
    TCI_TRY(new_tensor(b, intern(b, name), dtype, layout, rank, dims, &idx));
    plan_tensor *pt = &b->p->tensors[idx];
    pt->memory = PLAN_MEM_CONSTANT;
    void *host = tci_arena_alloc(b->p->arena, pt->bytes ? pt->bytes : 1);
    if (!host) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory converting constants");
    int64_t count = 1;
    for (int i = 0; i < rank; i++) count *= dims[i];
    if (dtype == TCI_DTYPE_FLOAT && layout == PLAN_LAYOUT_DENSE) {
        memcpy(host, values, (size_t)count * sizeof(float));
    } else if (dtype == TCI_DTYPE_FLOAT) { /* NHWC8 of a (1, C, 1, 1) per-channel vector */
        memset(host, 0, pt->bytes);
        memcpy(host, values, (size_t)dims[1] * sizeof(float));
    } else if (layout == PLAN_LAYOUT_DENSE) {
        for (int64_t i = 0; i < count; i++) ((uint16_t *)host)[i] = half_bits(dtype, values[i]);
    } else { /* NHWC8 of a (1, C, 1, 1) per-channel vector */
        for (int64_t c = 0; c < dims[1]; c++) ((uint16_t *)host)[c] = half_bits(dtype, values[c]);
    }
    pt->host_data = host;
    /* dense fp32 host constants are what the executor packs for Conv, ConvTranspose and GEMM
     * bias (fp16 on the device, fp32 in fp32 layers); the NHWC8 ones are uploaded as they are */
    pt->packed_source = dtype == TCI_DTYPE_FLOAT && layout == PLAN_LAYOUT_DENSE;
    b->p->weight_bytes += pt->packed_source && !b->fp32 ? pt->bytes / 2 : pt->bytes;
    *out_index = idx;
    return TCI_OK;
}

/* ---- Conv ---- */

/* The 2-D geometry of a Conv or ConvTranspose step from its window. */
static void conv_geometry(plan_conv *pc, const layer_window *win) {
    pc->n = win->batch;
    pc->c = win->in_channels;
    pc->h = win->in[0];
    pc->w = win->in[1];
    pc->k = win->out_channels;
    pc->r = win->kernel[0];
    pc->s = win->kernel[1];
    pc->out_h = win->out[0];
    pc->out_w = win->out[1];
    pc->pad_top = win->pad_begin[0];
    pc->pad_left = win->pad_begin[1];
    pc->pad_bottom = win->pad_end[0];
    pc->pad_right = win->pad_end[1];
    pc->stride_h = win->stride[0];
    pc->stride_w = win->stride[1];
    pc->dilation_h = win->dilation[0];
    pc->dilation_w = win->dilation[1];
    pc->groups = win->group;
}

/* The checks Conv and ConvTranspose share (2-D, static input, constant float weights and bias)
 * and their window; `what` names the op in the refusal. */
static tci_status conv_window(const ir_node *node, const char *what, layer_window *win) {
    const ir_tensor *x = node->inputs[0], *w = node->inputs[1];
    const ir_tensor *bias = node->num_inputs > 2 ? node->inputs[2] : NULL;
    TCI_TRY(require_known(node, x));
    if (x->rank != 4)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "only 2-D %s run on the GPU", what);
    if (!is_constant(w) || w->dtype != TCI_DTYPE_FLOAT || (bias && !is_constant(bias)))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the GPU path needs constant float weights and bias");
    tci_tensor vx, vw, vb;
    ir_tensor_view(x, &vx);
    ir_tensor_view(w, &vw);
    if (bias) ir_tensor_view(bias, &vb);
    const tci_tensor *views[3] = {&vx, &vw, bias ? &vb : NULL};
    return layer_conv_window(node, views, win);
}

/* Conv (+BatchNormalization) (+Add) (+activation) as one step. */
static tci_status lower_conv(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *w = node->inputs[1];
    const ir_tensor *bias = node->num_inputs > 2 ? node->inputs[2] : NULL;
    layer_window win;
    TCI_TRY(conv_window(node, "convolutions", &win));
    int64_t k = win.out_channels, c = win.in_channels, group = win.group;
    int64_t r = win.kernel[0], s = win.kernel[1], cg = c / group;
    bool depthwise = group > 1 && group == c && k == c;
    if (group > 1 && !depthwise && (cg % 8 || (k / group) % 8))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "grouped convolution with %lld channels per group: the GPU path "
                             "needs multiples of 8 (or depthwise)",
                             (long long)cg);
    int64_t kp = plan_pad8(k);

    /* fold a following BatchNormalization into weights and bias */
    const float *wsrc = const_floats(w);
    float *scale = calloc((size_t)kp, sizeof(float));
    float *shift = calloc((size_t)kp, sizeof(float));
    if (!scale || !shift) {
        free(scale);
        free(shift);
        return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding BatchNormalization");
    }
    for (int64_t i = 0; i < k; i++) {
        scale[i] = 1.0f;
        shift[i] = bias ? const_floats(bias)[i] : 0.0f;
    }
    char label[256];
    snprintf(label, sizeof label, "Conv");
    const ir_tensor *out = node->outputs[0];
    ir_node *next;
    tci_status st = TCI_OK;
    if (single_consumer(b, out, &next) && op_is(next, "BatchNormalization") &&
        next->inputs[0] == out && next->num_outputs == 1) {
        bool all_const = true;
        for (int i = 1; i < 5; i++)
            if (!is_constant(next->inputs[i]) || next->inputs[i]->dtype != TCI_DTYPE_FLOAT ||
                ir_count(next->inputs[i]) != k)
                all_const = false;
        float eps;
        st = ir_attr_float(next, "epsilon", 1e-5f, &eps);
        if (st == TCI_OK && all_const) {
            const float *gamma = next->inputs[1]->data, *beta = next->inputs[2]->data;
            const float *mean = next->inputs[3]->data, *var = next->inputs[4]->data;
            for (int64_t i = 0; i < k; i++) {
                double sc = gamma[i] / sqrt((double)var[i] + eps);
                scale[i] = (float)sc;
                shift[i] = (float)((shift[i] - mean[i]) * sc + beta[i]);
            }
            b->fused[next->index] = true;
            out = next->outputs[0];
            strncat(label, "+BatchNormalization", sizeof label - strlen(label) - 1);
        }
    }
    /* residual Add (the other operand already computed), then an activation */
    int residual = -1;
    plan_activation act = {0};
    if (st == TCI_OK && single_consumer(b, out, &next) && op_is(next, "Add") &&
        next->num_inputs == 2) {
        const ir_tensor *other = next->inputs[0] == out ? next->inputs[1] : next->inputs[0];
        bool same = other->rank == 4 && !is_constant(other) && b->primary[other->index] >= 0;
        for (int i = 0; same && i < 4; i++) same = other->dims[i] == out->dims[i];
        if (same && other != out) {
            st = get_input(b, next, other, PLAN_LAYOUT_NHWC8, &residual);
            if (st == TCI_OK) {
                b->fused[next->index] = true;
                out = next->outputs[0];
                strncat(label, "+Add", sizeof label - strlen(label) - 1);
            }
        }
    }
    if (st == TCI_OK) st = fuse_activation(b, out, &act, &out, label, sizeof label);

    /* folded fp32 weights (K, C/group, R, S) and bias (K); the executor packs them into the
     * layout the convolution library wants */
    int wt = -1, bt = -1, xt = -1, yt = -1;
    if (st == TCI_OK) {
        int64_t wdims[4] = {k, cg, r, s};
        float *folded = malloc((size_t)(k * cg * r * s) * sizeof(float));
        if (!folded) st = tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory folding weights");
        for (int64_t i = 0; st == TCI_OK && i < k * cg * r * s; i++)
            folded[i] = wsrc[i] * scale[i / (cg * r * s)];
        if (st == TCI_OK)
            st = host_constant(b, w->name, folded, 4, wdims, TCI_DTYPE_FLOAT, PLAN_LAYOUT_DENSE, &wt);
        free(folded);
    }
    if (st == TCI_OK) {
        int64_t bdims[1] = {k};
        st = host_constant(b, "bias", shift, 1, bdims, TCI_DTYPE_FLOAT, PLAN_LAYOUT_DENSE, &bt);
    }
    free(scale);
    free(shift);
    TCI_TRY(st);
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_NHWC8, &xt));
    TCI_TRY(make_output(b, node, out, PLAN_LAYOUT_NHWC8, &yt));
    plan_step *step;
    TCI_TRY(add_step(b, PLAN_STEP_CONV, node, intern(b, label), &step));
    plan_conv *pc = &step->u.conv;
    conv_geometry(pc, &win);
    pc->has_bias = true;
    pc->has_residual = residual >= 0;
    pc->fused = step->label;
    /* cuDNN's fused call applies ReLU (or nothing); other activations run after it. The
     * depthwise kernel (cuDNN's NHWC depthwise is far off bandwidth) fuses any of them. */
    pc->depthwise = depthwise;
    if (depthwise || act.kind == PLAN_ACT_RELU || act.kind == PLAN_ACT_NONE) pc->act = act;
    else pc->post_act = act;
    step->inputs[0] = xt;
    step->inputs[1] = wt;
    step->inputs[2] = bt;
    step->inputs[3] = residual;
    step->num_inputs = 4;
    step->outputs[0] = yt;
    step->num_outputs = 1;
    return TCI_OK;
}

/* 2-D ConvTranspose: cuDNN's backward data; weights stay in ONNX order for the executor to
 * pack, activations follow as an in-place step. */
static tci_status lower_conv_transpose(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *w = node->inputs[1];
    const ir_tensor *bias = node->num_inputs > 2 ? node->inputs[2] : NULL;
    layer_window win;
    TCI_TRY(conv_window(node, "ConvTranspose nodes", &win));
    int64_t k = win.out_channels;
    float *shift = calloc((size_t)k, sizeof(float));
    if (!shift) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; bias && i < k; i++) shift[i] = const_floats(bias)[i];
    int wt = -1, bt = -1, xt = -1, yt = -1;
    tci_status st = host_constant(b, w->name, const_floats(w), 4, w->dims, TCI_DTYPE_FLOAT,
                                  PLAN_LAYOUT_DENSE, &wt);
    int64_t bdims[1] = {k};
    if (st == TCI_OK)
        st = host_constant(b, "bias", shift, 1, bdims, TCI_DTYPE_FLOAT, PLAN_LAYOUT_DENSE, &bt);
    free(shift);
    TCI_TRY(st);
    char label[256] = "ConvTranspose";
    plan_activation act;
    const ir_tensor *out = node->outputs[0];
    TCI_TRY(fuse_activation(b, out, &act, &out, label, sizeof label));
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_NHWC8, &xt));
    TCI_TRY(make_output(b, node, out, PLAN_LAYOUT_NHWC8, &yt));
    plan_step *step;
    TCI_TRY(add_step(b, PLAN_STEP_CONV_TRANSPOSE, node, intern(b, label), &step));
    plan_conv *pc = &step->u.conv;
    conv_geometry(pc, &win);
    pc->has_bias = true;
    pc->post_act = act;
    pc->fused = step->label;
    step->inputs[0] = xt;
    step->inputs[1] = wt;
    step->inputs[2] = bt;
    step->num_inputs = 3;
    step->outputs[0] = yt;
    step->num_outputs = 1;
    return TCI_OK;
}

/* ---- GEMM ---- */

/* A following Add of a constant vector of length n (a Linear layer's bias), as bias values. */
static tci_status fuse_bias(builder *b, const ir_tensor *t, int64_t n, float scale,
                            const ir_tensor **out_tensor, float **out_bias, char *label,
                            size_t label_size) {
    *out_bias = NULL;
    *out_tensor = t;
    ir_node *next;
    if (!single_consumer(b, t, &next) || !op_is(next, "Add") || next->num_inputs != 2)
        return TCI_OK;
    const ir_tensor *c = next->inputs[0] == t ? next->inputs[1] : next->inputs[0];
    if (!is_constant(c) || c->dtype != TCI_DTYPE_FLOAT || ir_count(c) != n || c->rank < 1 ||
        c->dims[c->rank - 1] != n || next->outputs[0]->rank != t->rank)
        return TCI_OK;
    float *bias = malloc((size_t)n * sizeof(float));
    if (!bias) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++) bias[i] = scale * ((const float *)c->data)[i];
    b->fused[next->index] = true;
    *out_tensor = next->outputs[0];
    *out_bias = bias;
    strncat(label, "+Add", label_size - strlen(label) - 1);
    return TCI_OK;
}

/* ReLU and tanh-GELU are cuBLASLt epilogues; anything else stays a separate step. */
static tci_status fuse_gemm_activation(builder *b, const ir_tensor *t, plan_activation *act,
                                       const ir_tensor **out_tensor, char *label,
                                       size_t label_size) {
    memset(act, 0, sizeof *act);
    *out_tensor = t;
    ir_node *next;
    if (!single_consumer(b, t, &next)) return TCI_OK;
    bool is_act;
    plan_activation a;
    TCI_TRY(activation_of(next, &is_act, &a));
    if (!is_act || (a.kind != PLAN_ACT_RELU && a.kind != PLAN_ACT_GELU_TANH)) return TCI_OK;
    *act = a;
    b->fused[next->index] = true;
    *out_tensor = next->outputs[0];
    strncat(label, "+", label_size - strlen(label) - 1);
    strncat(label, next->op_type, label_size - strlen(label) - 1);
    return TCI_OK;
}

static tci_status finish_gemm(builder *b, ir_node *node, plan_gemm *g, int a_index, int b_index,
                              const ir_tensor *out, const char *label, float *bias) {
    tci_status st = TCI_OK;
    int bias_index = -1, yt = -1;
    if (bias) {
        int64_t dims[1] = {g->n};
        st = host_constant(b, "bias", bias, 1, dims, TCI_DTYPE_FLOAT, PLAN_LAYOUT_DENSE,
                           &bias_index);
        free(bias);
    }
    TCI_TRY(st);
    TCI_TRY(make_output(b, node, out, PLAN_LAYOUT_DENSE, &yt));
    plan_step *step;
    TCI_TRY(add_step(b, PLAN_STEP_GEMM, node, intern(b, label), &step));
    g->has_bias = bias_index >= 0;
    g->fused = step->label;
    step->u.gemm = *g;
    step->inputs[0] = a_index;
    step->inputs[1] = b_index;
    step->inputs[2] = bias_index;
    step->num_inputs = 3;
    step->outputs[0] = yt;
    step->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_gemm(builder *b, ir_node *node) {
    const ir_tensor *a = node->inputs[0], *bm = node->inputs[1];
    const ir_tensor *c = node->num_inputs > 2 ? node->inputs[2] : NULL;
    int64_t trans_a, trans_b;
    float alpha, beta;
    TCI_TRY(ir_attr_int(node, "transA", 0, &trans_a));
    TCI_TRY(ir_attr_int(node, "transB", 0, &trans_b));
    TCI_TRY(ir_attr_float(node, "alpha", 1.0f, &alpha));
    TCI_TRY(ir_attr_float(node, "beta", 1.0f, &beta));
    TCI_TRY(require_known(node, a));
    TCI_TRY(require_known(node, bm));
    plan_gemm g = {0};
    g.batch = 1;
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.m = trans_a ? a->dims[1] : a->dims[0];
    g.k = trans_a ? a->dims[0] : a->dims[1];
    g.n = trans_b ? bm->dims[0] : bm->dims[1];
    g.lda = a->dims[1];
    g.ldb = bm->dims[1];
    g.ldc = g.n;
    g.alpha = alpha;
    char label[256] = "Gemm";
    float *bias = NULL;
    if (c && beta != 0.0f) {
        if (!is_constant(c) || c->dtype != TCI_DTYPE_FLOAT || ir_count(c) != g.n ||
            c->dims[c->rank - 1] != g.n)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "the GPU path takes C only as a constant bias of N values");
        bias = malloc((size_t)g.n * sizeof(float));
        if (!bias) return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        for (int64_t i = 0; i < g.n; i++) bias[i] = beta * ((const float *)c->data)[i];
    }
    const ir_tensor *out = node->outputs[0];
    tci_status st = fuse_gemm_activation(b, out, &g.act, &out, label, sizeof label);
    int ai = -1, bi = -1;
    if (st == TCI_OK) st = get_input(b, node, a, PLAN_LAYOUT_DENSE, &ai);
    if (st == TCI_OK) st = get_input(b, node, bm, PLAN_LAYOUT_DENSE, &bi);
    if (st != TCI_OK) {
        free(bias);
        return st;
    }
    return finish_gemm(b, node, &g, ai, bi, out, label, bias);
}

static int64_t prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

static tci_status lower_matmul(builder *b, ir_node *node) {
    const ir_tensor *a = node->inputs[0], *bm = node->inputs[1], *y = node->outputs[0];
    TCI_TRY(require_known(node, a));
    TCI_TRY(require_known(node, bm));
    TCI_TRY(require_known(node, y));
    if (a->rank < 2 || bm->rank < 2)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "the GPU path needs operands of rank >= 2");
    plan_gemm g = {0};
    g.m = a->dims[a->rank - 2];
    g.k = a->dims[a->rank - 1];
    g.n = bm->dims[bm->rank - 1];
    g.lda = g.k;
    g.ldb = g.n;
    g.ldc = g.n;
    g.alpha = 1.0f;
    int yb = y->rank - 2;
    int64_t a_batch = prod(a->dims, 0, a->rank - 2), b_batch = prod(bm->dims, 0, bm->rank - 2);
    int64_t y_batch = prod(y->dims, 0, yb);
    if (b_batch == 1) { /* weights or a shared matrix: one tall GEMM */
        g.m *= a_batch;
        g.batch = 1;
    } else {
        /* each side's batch dims must be the output's or all ones */
        bool a_ok = a_batch == 1 || (a_batch == y_batch && a->rank - 2 == yb);
        bool b_ok = b_batch == y_batch && bm->rank - 2 == yb;
        for (int i = 0; a_ok && a_batch != 1 && i < yb; i++) a_ok = a->dims[i] == y->dims[i];
        for (int i = 0; b_ok && i < yb; i++) b_ok = bm->dims[i] == y->dims[i];
        if (!a_ok || !b_ok)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "batch broadcasting of this MatMul has no GPU path");
        g.batch = y_batch;
        g.stride_a = a_batch == 1 ? 0 : g.m * g.k;
        g.stride_b = g.k * g.n;
        g.stride_c = g.m * g.n;
    }
    char label[256] = "MatMul";
    float *bias = NULL;
    const ir_tensor *out = y;
    tci_status st = fuse_bias(b, out, g.n, 1.0f, &out, &bias, label, sizeof label);
    if (st == TCI_OK) st = fuse_gemm_activation(b, out, &g.act, &out, label, sizeof label);
    int ai = -1, bi = -1;
    if (st == TCI_OK) st = get_input(b, node, a, PLAN_LAYOUT_DENSE, &ai);
    if (st == TCI_OK) st = get_input(b, node, bm, PLAN_LAYOUT_DENSE, &bi);
    if (st != TCI_OK) {
        free(bias);
        return st;
    }
    return finish_gemm(b, node, &g, ai, bi, out, label, bias);
}

/* ---- element-wise ---- */

/* Physical output dims of a plan tensor: NHWC8 -> (N, H, W, Cp); dense -> its dims. */
static int physical_dims(const plan_tensor *t, int64_t *dims) {
    if (t->layout == PLAN_LAYOUT_NHWC8) {
        dims[0] = t->dims[0];
        dims[1] = t->dims[2];
        dims[2] = t->dims[3];
        dims[3] = t->padded_channels;
        return 4;
    }
    for (int i = 0; i < t->rank; i++) dims[i] = t->dims[i];
    return t->rank;
}

/* Strides (elements) of operand `in` read along the physical dims of `out`, 0 where in
 * broadcasts. in has out's layout; a dense operand of lower rank is right-aligned. */
static void operand_strides(const plan_tensor *out, const plan_tensor *in, int64_t *strides) {
    if (out->layout == PLAN_LAYOUT_NHWC8) {
        int64_t cp = in->padded_channels, h = in->dims[2], w = in->dims[3];
        strides[0] = in->dims[0] == 1 && out->dims[0] != 1 ? 0 : h * w * cp;
        strides[1] = h == 1 && out->dims[2] != 1 ? 0 : w * cp;
        strides[2] = w == 1 && out->dims[3] != 1 ? 0 : cp;
        strides[3] = in->dims[1] == 1 && out->dims[1] != 1 ? 0 : 1;
        return;
    }
    int r = out->rank, shift = r - in->rank;
    int64_t s = 1;
    for (int i = r - 1; i >= 0; i--) {
        int j = i - shift;
        int64_t d = j >= 0 ? in->dims[j] : 1;
        strides[i] = d == 1 && out->dims[i] != 1 ? 0 : s;
        s *= d;
    }
}

static void output_view(const plan_tensor *out, plan_strided *v) {
    memset(v, 0, sizeof *v);
    v->rank = physical_dims(out, v->dims);
    int64_t s = 1;
    for (int i = v->rank - 1; i >= 0; i--) {
        v->out_strides[i] = s;
        s *= v->dims[i];
    }
    v->pad_dim = out->layout == PLAN_LAYOUT_NHWC8 ? 3 : -1;
    v->real_channels = out->layout == PLAN_LAYOUT_NHWC8 ? out->dims[1] : 0;
}

/* Lays out an element-wise node's output: NHWC8 when it is 4-D float and some non-constant
 * float input already is NHWC8, else dense. */
static plan_layout eltwise_layout(const builder *b, const ir_node *node, const ir_tensor *out) {
    if (out->rank != 4 || out->dtype != TCI_DTYPE_FLOAT) return PLAN_LAYOUT_DENSE;
    bool any = false;
    for (int i = 0; i < node->num_inputs; i++) {
        const ir_tensor *t = node->inputs[i];
        if (!t || is_constant(t)) continue;
        if (t->dtype != TCI_DTYPE_FLOAT) return PLAN_LAYOUT_DENSE;
        int idx = b->primary[t->index];
        if (idx >= 0 && b->p->tensors[idx].layout == PLAN_LAYOUT_NHWC8) any = true;
    }
    return any ? PLAN_LAYOUT_NHWC8 : PLAN_LAYOUT_DENSE;
}

/* One element-wise step: y = act(op(inputs...)) over IR inputs, output IR tensor `out`. */
static tci_status eltwise_step(builder *b, const ir_node *node, plan_binary op,
                               const ir_tensor *const *inputs, int num_inputs,
                               const ir_tensor *out, plan_activation act, const char *label,
                               int out_override, plan_layout layout) {
    int idx[PLAN_MAX_STEP_INPUTS];
    for (int i = 0; i < num_inputs; i++)
        TCI_TRY(get_input(b, node, inputs[i], layout, &idx[i]));
    int yt = out_override;
    if (yt < 0) TCI_TRY(make_output(b, node, out, layout, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_ELTWISE, node, label, &s));
    s->u.eltwise.op = op;
    s->u.eltwise.act = act;
    const plan_tensor *y = &b->p->tensors[yt];
    output_view(y, &s->u.eltwise.view);
    for (int i = 0; i < num_inputs; i++) {
        s->inputs[i] = idx[i];
        operand_strides(y, &b->p->tensors[idx[i]], s->u.eltwise.view.strides[i]);
    }
    s->num_inputs = num_inputs;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static plan_binary binary_of(const char *op) {
    static const struct {
        const char *name;
        plan_binary op;
    } table[] = {{"Add", PLAN_BIN_ADD},   {"Sub", PLAN_BIN_SUB},   {"Mul", PLAN_BIN_MUL},
                 {"Div", PLAN_BIN_DIV},   {"Pow", PLAN_BIN_POW},   {"Max", PLAN_BIN_MAX},
                 {"Min", PLAN_BIN_MIN},   {"Sum", PLAN_BIN_ADD},   {"PRelu", PLAN_BIN_PRELU},
                 {"Equal", PLAN_BIN_EQUAL}, {"Where", PLAN_BIN_WHERE}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, op) == 0) return table[i].op;
    return PLAN_BIN_NONE;
}

static tci_status lower_eltwise(builder *b, ir_node *node) {
    const ir_tensor *out = node->outputs[0];
    TCI_TRY(require_known(node, out));
    plan_layout layout = eltwise_layout(b, node, out);
    char label[256];
    snprintf(label, sizeof label, "%s", node->op_type);
    bool is_act;
    plan_activation act;
    TCI_TRY(activation_of(node, &is_act, &act));
    if (is_act) {
        /* x -> Sigmoid feeding Mul(x, sigmoid): SiLU in one step */
        if (act.kind == PLAN_ACT_SIGMOID) {
            ir_node *mul = silu_mul(b, node->inputs[0]);
            if (mul && !b->fused[mul->index]) {
                b->fused[mul->index] = true;
                act.kind = PLAN_ACT_SILU;
                out = mul->outputs[0];
                snprintf(label, sizeof label, "Sigmoid+Mul(SiLU)");
            }
        }
        return eltwise_step(b, node, PLAN_BIN_NONE, (const ir_tensor *const *)node->inputs, 1,
                            out, act, intern(b, label), -1, layout);
    }
    plan_binary op = binary_of(node->op_type);
    if (op == PLAN_BIN_NONE)
        return ir_node_error(node, TCI_ERR_INTERNAL, "not an element-wise op");
    /* the kernels take one value dtype (Where's condition aside) */
    for (int i = op == PLAN_BIN_WHERE ? 2 : 1; i < node->num_inputs; i++) {
        const ir_tensor *first = node->inputs[op == PLAN_BIN_WHERE ? 1 : 0];
        if (node->inputs[i] && node->inputs[i]->dtype != first->dtype)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "inputs of dtypes %s and %s: mixed dtypes have no GPU path",
                                 tci_dtype_name(first->dtype),
                                 tci_dtype_name(node->inputs[i]->dtype));
    }
    if (op == PLAN_BIN_WHERE)
        return eltwise_step(b, node, op, (const ir_tensor *const *)node->inputs, 3, out, act,
                            intern(b, label), -1, PLAN_LAYOUT_DENSE);
    int n = node->num_inputs;
    if (n == 1) { /* Sum/Max/Min of one input: a copy */
        plan_activation none = {0};
        return eltwise_step(b, node, PLAN_BIN_NONE, (const ir_tensor *const *)node->inputs, 1,
                            out, none, intern(b, label), -1, layout);
    }
    /* a chain of binary steps for Sum/Max/Min; the activation fuses into the last */
    const ir_tensor *final_out = out;
    TCI_TRY(fuse_activation(b, out, &act, &final_out, label, sizeof label));
    int acc = -1;
    for (int i = 1; i < n; i++) {
        const ir_tensor *pair[2] = {node->inputs[0], node->inputs[i]};
        bool last = i == n - 1;
        plan_activation none = {0};
        if (i == 1) {
            int yt = -1;
            if (!last) {
                TCI_TRY(new_tensor(b, intern(b, "partial"), float_dtype(b), layout, out->rank,
                                   out->dims, &yt));
            }
            TCI_TRY(eltwise_step(b, node, op, pair, 2, final_out, last ? act : none,
                                 intern(b, label), yt, layout));
            acc = b->p->steps[b->p->num_steps - 1].outputs[0];
            continue;
        }
        /* acc (already lowered) with input i */
        int other;
        TCI_TRY(get_input(b, node, node->inputs[i], layout, &other));
        int yt = -1;
        if (last) TCI_TRY(make_output(b, node, final_out, layout, &yt));
        else
            TCI_TRY(new_tensor(b, intern(b, "partial"), float_dtype(b), layout, out->rank,
                               out->dims, &yt));
        plan_step *s;
        TCI_TRY(add_step(b, PLAN_STEP_ELTWISE, node, intern(b, label), &s));
        s->u.eltwise.op = op;
        s->u.eltwise.act = last ? act : none;
        const plan_tensor *y = &b->p->tensors[yt];
        output_view(y, &s->u.eltwise.view);
        operand_strides(y, &b->p->tensors[acc], s->u.eltwise.view.strides[0]);
        operand_strides(y, &b->p->tensors[other], s->u.eltwise.view.strides[1]);
        s->inputs[0] = acc;
        s->inputs[1] = other;
        s->num_inputs = 2;
        s->outputs[0] = yt;
        s->num_outputs = 1;
        acc = yt;
    }
    return TCI_OK;
}

/* Standalone BatchNormalization: y = x * scale + shift per channel, two element-wise steps. */
static tci_status lower_batchnorm(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TCI_TRY(require_known(node, x));
    if (x->rank != 4 || node->num_outputs > 1)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the GPU path takes inference-mode 4-D BatchNormalization");
    int64_t c = x->dims[1];
    for (int i = 1; i < 5; i++)
        if (!is_constant(node->inputs[i]) || node->inputs[i]->dtype != TCI_DTYPE_FLOAT ||
            ir_count(node->inputs[i]) != c)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED, "statistics must be constants");
    float eps;
    TCI_TRY(ir_attr_float(node, "epsilon", 1e-5f, &eps));
    float *scale = malloc((size_t)c * sizeof(float)), *shift = malloc((size_t)c * sizeof(float));
    if (!scale || !shift) {
        free(scale);
        free(shift);
        return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    const float *gamma = node->inputs[1]->data, *beta = node->inputs[2]->data;
    const float *mean = node->inputs[3]->data, *var = node->inputs[4]->data;
    for (int64_t i = 0; i < c; i++) {
        scale[i] = (float)(gamma[i] / sqrt((double)var[i] + eps));
        shift[i] = beta[i] - mean[i] * scale[i];
    }
    int64_t dims[4] = {1, c, 1, 1};
    int si = -1, hi = -1, xi = -1, tmp = -1, yt = -1;
    tci_status st = host_constant(b, "bn_scale", scale, 4, dims, float_dtype(b),
                                  PLAN_LAYOUT_NHWC8, &si);
    if (st == TCI_OK)
        st = host_constant(b, "bn_shift", shift, 4, dims, float_dtype(b), PLAN_LAYOUT_NHWC8, &hi);
    free(scale);
    free(shift);
    TCI_TRY(st);
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_NHWC8, &xi));
    TCI_TRY(new_tensor(b, intern(b, "bn_scaled"), float_dtype(b), PLAN_LAYOUT_NHWC8, 4, x->dims,
                       &tmp));
    char label[256] = "BatchNormalization";
    plan_activation act;
    const ir_tensor *out = y;
    TCI_TRY(fuse_activation(b, y, &act, &out, label, sizeof label));
    TCI_TRY(make_output(b, node, out, PLAN_LAYOUT_NHWC8, &yt));
    const int pairs[2][3] = {{xi, si, tmp}, {tmp, hi, yt}};
    for (int k = 0; k < 2; k++) {
        plan_step *s;
        TCI_TRY(add_step(b, PLAN_STEP_ELTWISE, node, intern(b, label), &s));
        s->u.eltwise.op = k == 0 ? PLAN_BIN_MUL : PLAN_BIN_ADD;
        if (k == 1) s->u.eltwise.act = act;
        const plan_tensor *o = &b->p->tensors[pairs[k][2]];
        output_view(o, &s->u.eltwise.view);
        operand_strides(o, &b->p->tensors[pairs[k][0]], s->u.eltwise.view.strides[0]);
        operand_strides(o, &b->p->tensors[pairs[k][1]], s->u.eltwise.view.strides[1]);
        s->inputs[0] = pairs[k][0];
        s->inputs[1] = pairs[k][1];
        s->num_inputs = 2;
        s->outputs[0] = pairs[k][2];
        s->num_outputs = 1;
    }
    return TCI_OK;
}

/* ---- pooling ---- */

static tci_status lower_pool(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0];
    TCI_TRY(require_known(node, x));
    if (x->rank != 4 || (node->num_outputs > 1 && node->outputs[1] &&
                         b->consumers[node->outputs[1]->index]))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the GPU path pools 2-D inputs without the Indices output");
    tci_tensor vx;
    ir_tensor_view(x, &vx);
    const tci_tensor *views[1] = {&vx};
    layer_window win;
    TCI_TRY(layer_pool_window(node, views, &win));
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_NHWC8, &xi));
    char label[256];
    snprintf(label, sizeof label, "%s", node->op_type);
    plan_activation act;
    const ir_tensor *out = node->outputs[0];
    TCI_TRY(fuse_activation(b, out, &act, &out, label, sizeof label));
    TCI_TRY(make_output(b, node, out, PLAN_LAYOUT_NHWC8, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_POOL, node, intern(b, label), &s));
    plan_pool *pp = &s->u.pool;
    pp->max = win.is_max;
    pp->count_include_pad = win.count_include_pad;
    pp->n = x->dims[0];
    pp->c = x->dims[1];
    pp->h = x->dims[2];
    pp->w = x->dims[3];
    pp->out_h = win.out[0];
    pp->out_w = win.out[1];
    pp->kernel_h = win.kernel[0];
    pp->kernel_w = win.kernel[1];
    pp->stride_h = win.stride[0];
    pp->stride_w = win.stride[1];
    pp->pad_top = win.pad_begin[0];
    pp->pad_left = win.pad_begin[1];
    pp->dilation_h = win.dilation[0];
    pp->dilation_w = win.dilation[1];
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    if (act.kind != PLAN_ACT_NONE) /* pooling kernels have no epilogue: apply it in place */
        return eltwise_step(b, node, PLAN_BIN_NONE, (const ir_tensor *const *)&out, 1, out, act,
                            intern(b, label), yt, PLAN_LAYOUT_NHWC8);
    return TCI_OK;
}

static tci_status global_pool_step(builder *b, ir_node *node, const ir_tensor *x,
                                   const ir_tensor *out, bool max) {
    TCI_TRY(require_known(node, x));
    if (x->rank != 4)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "the GPU path pools 4-D inputs");
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_NHWC8, &xi));
    TCI_TRY(make_output(b, node, out, PLAN_LAYOUT_NHWC8, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_GLOBAL_POOL, node, NULL, &s));
    s->u.pool.max = max;
    s->u.pool.n = x->dims[0];
    s->u.pool.c = x->dims[1];
    s->u.pool.h = x->dims[2];
    s->u.pool.w = x->dims[3];
    s->u.pool.out_h = s->u.pool.out_w = 1;
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_global_pool(builder *b, ir_node *node) {
    return global_pool_step(b, node, node->inputs[0], node->outputs[0],
                            op_is(node, "GlobalMaxPool"));
}

/* ---- data movement ---- */

/* Identity, Dropout: the output is the input. */
static tci_status lower_passthrough(builder *b, ir_node *node) {
    if (op_is(node, "Dropout")) {
        /* inference only: training mode with a non-zero ratio drops values, and the mask output
         * would need a kernel of its own */
        for (int o = 1; o < node->num_outputs; o++)
            if (node->outputs[o] && b->consumers[node->outputs[o]->index])
                return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                     "the Dropout mask output has no GPU path");
        if (node->num_inputs > 2 && node->inputs[2]) {
            const ir_tensor *mode = node->inputs[2], *ratio = node->num_inputs > 1 ? node->inputs[1] : NULL;
            float r = 0.5f;
            if (ratio && is_constant(ratio) && ratio->dtype == TCI_DTYPE_FLOAT) r = *(const float *)ratio->data;
            bool training = !is_constant(mode) || *(const uint8_t *)mode->data;
            if (training && (r != 0.0f || (ratio && !is_constant(ratio))))
                return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                     "training-mode Dropout has no GPU path (inference only)");
        }
    }
    int src;
    TCI_TRY(get_input(b, node, node->inputs[0], -1, &src));
    const plan_tensor copy = b->p->tensors[src];
    if (copy.layout == PLAN_LAYOUT_DENSE) {
        int idx;
        return alias_output(b, node, node->outputs[0], src, &idx);
    }
    int idx;
    TCI_TRY(new_tensor(b, node->outputs[0]->name, copy.dtype, copy.layout, copy.rank, copy.dims, &idx));
    b->p->tensors[idx].alias_of = copy.alias_of >= 0 ? copy.alias_of : src;
    if (copy.memory == PLAN_MEM_CONSTANT) {
        b->p->tensors[idx].alias_of = -1;
        b->p->tensors[idx].memory = PLAN_MEM_CONSTANT;
        b->p->tensors[idx].host_data = copy.host_data;
    }
    b->primary[node->outputs[0]->index] = idx;
    return TCI_OK;
}

/* Reshape, Flatten, Squeeze, Unsqueeze: the dense bytes with new dims. */
static tci_status lower_reshape(builder *b, ir_node *node) {
    int src, idx;
    TCI_TRY(get_input(b, node, node->inputs[0], PLAN_LAYOUT_DENSE, &src));
    return alias_output(b, node, node->outputs[0], src, &idx);
}

static void copy_step_init(plan_step *s, const plan_tensor *y) {
    output_view(y, &s->u.copy.view);
    s->u.copy.view.pad_dim = -1;
    s->u.copy.elem_size = tci_dtype_size(y->dtype);
}

static tci_status lower_transpose(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TCI_TRY(require_known(node, x));
    if (x->rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "rank %d transposes have no GPU path",
                             x->rank);
    const int64_t *perm;
    size_t np;
    TCI_TRY(ir_attr_ints(node, "perm", &perm, &np));
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
    int64_t in_strides[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, in_strides);
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_COPY, node, NULL, &s));
    copy_step_init(s, &b->p->tensors[yt]);
    for (int i = 0; i < x->rank; i++) {
        int64_t p = np ? perm[i] : x->rank - 1 - i;
        s->u.copy.view.strides[0][i] = in_strides[p];
    }
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status fill_step(builder *b, const ir_node *node, int yt, double value) {
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_FILL, node, "fill", &s));
    const plan_tensor *y = &b->p->tensors[yt];
    s->u.fill.value = value;
    s->u.fill.count = (int64_t)(y->bytes / tci_dtype_size(y->dtype));
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

/* Copies a block of `src` into `dst` at logical element offsets `at` along dst's dims; the
 * block has src's logical dims. Both share a layout; in NHWC8 only the real channels move. */
static tci_status block_copy(builder *b, const ir_node *node, int src, int dst,
                             const int64_t *at) {
    const plan_tensor *x = &b->p->tensors[src], *y = &b->p->tensors[dst];
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_COPY, node, NULL, &s));
    plan_strided *v = &s->u.copy.view;
    memset(v, 0, sizeof *v);
    v->pad_dim = -1;
    s->u.copy.elem_size = tci_dtype_size(y->dtype);
    int64_t xs[TCI_MAX_RANK], ys[TCI_MAX_RANK];
    if (y->layout == PLAN_LAYOUT_NHWC8) {
        /* physical (N, H, W, C) with the channel count of the block */
        static const int logical[4] = {0, 2, 3, 1};
        int64_t xcp = x->padded_channels, ycp = y->padded_channels;
        int64_t xstr[4] = {x->dims[2] * x->dims[3] * xcp, x->dims[3] * xcp, xcp, 1};
        int64_t ystr[4] = {y->dims[2] * y->dims[3] * ycp, y->dims[3] * ycp, ycp, 1};
        v->rank = 4;
        for (int i = 0; i < 4; i++) {
            v->dims[i] = x->dims[logical[i]];
            v->strides[0][i] = xstr[i];
            v->out_strides[i] = ystr[i];
            v->out_offset += at[logical[i]] * ystr[i];
        }
        /* a block with the same padded channels as dst copies its (zero) padding too */
        if (x->dims[1] == y->dims[1]) v->dims[3] = xcp;
    } else {
        op_strides(x->rank, x->dims, xs);
        op_strides(y->rank, y->dims, ys);
        v->rank = x->rank;
        for (int i = 0; i < x->rank; i++) {
            v->dims[i] = x->dims[i];
            v->strides[0][i] = xs[i];
            v->out_strides[i] = ys[i];
            v->out_offset += at[i] * ys[i];
        }
    }
    s->inputs[0] = src;
    s->num_inputs = 1;
    s->outputs[0] = dst;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_concat(builder *b, ir_node *node) {
    const ir_tensor *y = node->outputs[0];
    TCI_TRY(require_known(node, y));
    int64_t axis64;
    TCI_TRY(ir_attr_int(node, "axis", 0, &axis64));
    int axis;
    TCI_TRY(op_normalize_axis(node, axis64, y->rank, &axis));
    plan_layout layout = eltwise_layout(b, node, y);
    int yt;
    TCI_TRY(make_output(b, node, y, layout, &yt));
    layout = b->p->tensors[yt].layout;
    /* padding channels between NHWC8 blocks must end up zero */
    if (layout == PLAN_LAYOUT_NHWC8 && axis == 1 && y->dims[1] % 8) TCI_TRY(fill_step(b, node, yt, 0));
    int64_t at[TCI_MAX_RANK] = {0};
    for (int i = 0; i < node->num_inputs; i++) {
        const ir_tensor *x = node->inputs[i];
        if (ir_count(x) == 0) continue;
        int xi;
        TCI_TRY(get_input(b, node, x, layout, &xi));
        TCI_TRY(block_copy(b, node, xi, yt, at));
        at[axis] += x->dims[axis];
    }
    return TCI_OK;
}

static tci_status lower_split(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0];
    TCI_TRY(require_known(node, x));
    int64_t axis64;
    TCI_TRY(ir_attr_int(node, "axis", 0, &axis64));
    int axis;
    TCI_TRY(op_normalize_axis(node, axis64, x->rank, &axis));
    int xi;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    int64_t start = 0;
    for (int o = 0; o < node->num_outputs; o++) {
        const ir_tensor *y = node->outputs[o];
        if (!y) continue;
        int yt;
        TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
        plan_step *s;
        TCI_TRY(add_step(b, PLAN_STEP_COPY, node, NULL, &s));
        copy_step_init(s, &b->p->tensors[yt]);
        int64_t xs[TCI_MAX_RANK];
        op_strides(x->rank, x->dims, xs);
        for (int i = 0; i < x->rank; i++) s->u.copy.view.strides[0][i] = xs[i];
        s->u.copy.view.in_offset[0] = start * xs[axis];
        s->inputs[0] = xi;
        s->num_inputs = 1;
        s->outputs[0] = yt;
        s->num_outputs = 1;
        start += y->dims[axis];
    }
    return TCI_OK;
}

/* Reads an int list from a constant input or, for old opsets, an attribute. */
static tci_status int_list(const ir_node *node, int input, const char *attr, int64_t *values,
                           int *count, int max, bool *present) {
    *count = 0;
    *present = false;
    if (attr) {
        const int64_t *v;
        size_t n;
        TCI_TRY(ir_attr_ints(node, attr, &v, &n));
        if (v) {
            if ((int)n > max) return ir_node_error(node, TCI_ERR_UNSUPPORTED, "too many %s", attr);
            for (size_t i = 0; i < n; i++) values[i] = v[i];
            *count = (int)n;
            *present = true;
            return TCI_OK;
        }
    }
    if (input < 0 || input >= node->num_inputs || !node->inputs[input]) return TCI_OK;
    const ir_tensor *t = node->inputs[input];
    if (!t->data)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "input %d must be a constant for the GPU path", input);
    tci_tensor v;
    ir_tensor_view(t, &v);
    int64_t n = ir_count(t);
    if (n > max) return ir_node_error(node, TCI_ERR_UNSUPPORTED, "input %d is too long", input);
    for (int64_t i = 0; i < n; i++) values[i] = op_read_int(&v, i);
    *count = (int)n;
    *present = true;
    return TCI_OK;
}

static tci_status lower_slice(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TCI_TRY(require_known(node, x));
    TCI_TRY(require_known(node, y));
    int64_t starts[TCI_MAX_RANK], axes[TCI_MAX_RANK], steps[TCI_MAX_RANK];
    int ns, na, nst;
    bool present;
    bool old = node->since_version < 10;
    TCI_TRY(int_list(node, old ? -1 : 1, old ? "starts" : NULL, starts, &ns, TCI_MAX_RANK, &present));
    TCI_TRY(int_list(node, old ? -1 : 3, old ? "axes" : NULL, axes, &na, TCI_MAX_RANK, &present));
    if (!present)
        for (int i = 0; i < ns; i++) axes[i] = i;
    TCI_TRY(int_list(node, old ? -1 : 4, NULL, steps, &nst, TCI_MAX_RANK, &present));
    if (!present)
        for (int i = 0; i < ns; i++) steps[i] = 1;
    int64_t first[TCI_MAX_RANK] = {0}, step_of[TCI_MAX_RANK];
    for (int i = 0; i < x->rank; i++) step_of[i] = 1;
    for (int i = 0; i < ns; i++) {
        int axis;
        TCI_TRY(op_normalize_axis(node, axes[i], x->rank, &axis));
        int64_t d = x->dims[axis], s = starts[i], st = steps[i];
        if (s < 0) s += d;
        if (st > 0) s = s < 0 ? 0 : (s > d ? d : s);
        else s = s < 0 ? 0 : (s > d - 1 ? d - 1 : s);
        first[axis] = s;
        step_of[axis] = st;
    }
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
    if (ir_count(y) == 0) return TCI_OK;
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_COPY, node, NULL, &s));
    copy_step_init(s, &b->p->tensors[yt]);
    int64_t xs[TCI_MAX_RANK];
    op_strides(x->rank, x->dims, xs);
    for (int i = 0; i < x->rank; i++) {
        s->u.copy.view.strides[0][i] = xs[i] * step_of[i];
        s->u.copy.view.in_offset[0] += first[i] * xs[i];
    }
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_expand(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TCI_TRY(require_known(node, y));
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_COPY, node, NULL, &s));
    copy_step_init(s, &b->p->tensors[yt]);
    operand_strides(&b->p->tensors[yt], &b->p->tensors[xi], s->u.copy.view.strides[0]);
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_gather(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *idx = node->inputs[1], *y = node->outputs[0];
    TCI_TRY(require_known(node, x));
    TCI_TRY(require_known(node, idx));
    int64_t axis64;
    TCI_TRY(ir_attr_int(node, "axis", 0, &axis64));
    int axis;
    TCI_TRY(op_normalize_axis(node, axis64, x->rank, &axis));
    int xi, ii, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TCI_TRY(get_input(b, node, idx, PLAN_LAYOUT_DENSE, &ii));
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_GATHER, node, NULL, &s));
    s->u.gather.outer = prod(x->dims, 0, axis);
    s->u.gather.axis_dim = x->dims[axis];
    s->u.gather.inner = prod(x->dims, axis + 1, x->rank);
    s->u.gather.num_indices = ir_count(idx);
    s->u.gather.elem_size = tci_dtype_size(b->p->tensors[xi].dtype);
    s->inputs[0] = xi;
    s->inputs[1] = ii;
    s->num_inputs = 2;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_cast(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    tci_dtype to = TCI_DTYPE_UNDEFINED;
    TCI_TRY(device_dtype(b, node, y->dtype, &to));
    if (to == b->p->tensors[xi].dtype) return alias_output(b, node, y, xi, &yt);
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_CAST, node, NULL, &s));
    s->u.cast.count = ir_count(y);
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_pad(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TCI_TRY(require_known(node, x));
    TCI_TRY(require_known(node, y));
    if (x->rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "rank %d Pad has no GPU path", x->rank);
    int64_t pads[2 * TCI_MAX_RANK], axes[TCI_MAX_RANK];
    int np, na;
    bool present, has_axes;
    bool old = node->since_version < 11;
    TCI_TRY(int_list(node, old ? -1 : 1, old ? "pads" : NULL, pads, &np, 2 * TCI_MAX_RANK, &present));
    TCI_TRY(int_list(node, old ? -1 : 3, NULL, axes, &na, TCI_MAX_RANK, &has_axes));
    const char *mode;
    TCI_TRY(ir_attr_string(node, "mode", "constant", &mode));
    float value = 0;
    if (old) TCI_TRY(ir_attr_float(node, "value", 0.0f, &value));
    else TCI_TRY(scalar_input(node, 2, 0.0f, &value));
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_PAD, node, NULL, &s));
    s->u.pad.rank = x->rank;
    int k = has_axes ? na : x->rank;
    for (int i = 0; i < x->rank; i++) s->u.pad.dims[i] = x->dims[i];
    for (int i = 0; i < k; i++) {
        int axis = i;
        if (has_axes) TCI_TRY(op_normalize_axis(node, axes[i], x->rank, &axis));
        s->u.pad.pads_begin[axis] = pads[i];
        s->u.pad.pads_end[axis] = pads[i + k];
    }
    if (!strcmp(mode, "constant")) s->u.pad.mode = 0;
    else if (!strcmp(mode, "reflect")) s->u.pad.mode = 1;
    else if (!strcmp(mode, "edge")) s->u.pad.mode = 2;
    else return ir_node_error(node, TCI_ERR_UNSUPPORTED, "Pad mode '%s' has no GPU path", mode);
    s->u.pad.value = value;
    s->u.pad.elem_size = tci_dtype_size(b->p->tensors[xi].dtype);
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

/* ---- normalisation and reductions ---- */

static tci_status lower_softmax(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TCI_TRY(require_known(node, x));
    int64_t axis64;
    TCI_TRY(ir_attr_int(node, "axis", node->since_version < 13 ? 1 : -1, &axis64));
    int axis;
    TCI_TRY(op_normalize_axis(node, axis64, x->rank, &axis));
    if (node->since_version >= 13 && axis != x->rank - 1)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "softmax over axis %d (not the last) has no GPU path", axis);
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_SOFTMAX, node, NULL, &s));
    s->u.softmax.rows = prod(x->dims, 0, axis);
    s->u.softmax.length = prod(x->dims, axis, x->rank);
    s->u.softmax.log = op_is(node, "LogSoftmax");
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_layernorm(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    const ir_tensor *scale = node->inputs[1], *bias = node->num_inputs > 2 ? node->inputs[2] : NULL;
    TCI_TRY(require_known(node, x));
    for (int o = 1; o < node->num_outputs; o++)
        if (node->outputs[o] && (b->consumers[node->outputs[o]->index]))
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "the Mean/InvStdDev outputs have no GPU path");
    int64_t axis64;
    float eps;
    TCI_TRY(ir_attr_int(node, "axis", -1, &axis64));
    TCI_TRY(ir_attr_float(node, "epsilon", 1e-5f, &eps));
    int axis;
    TCI_TRY(op_normalize_axis(node, axis64, x->rank, &axis));
    int64_t length = prod(x->dims, axis, x->rank);
    if (ir_count(scale) != length || (bias && ir_count(bias) != length))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "scale and bias must cover the normalised dims on the GPU");
    int xi, si, bi = -1, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TCI_TRY(get_input(b, node, scale, PLAN_LAYOUT_DENSE, &si));
    if (bias) TCI_TRY(get_input(b, node, bias, PLAN_LAYOUT_DENSE, &bi));
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_LAYERNORM, node, NULL, &s));
    s->u.layernorm.rows = prod(x->dims, 0, axis);
    s->u.layernorm.length = length;
    s->u.layernorm.epsilon = eps;
    s->u.layernorm.has_bias = bias != NULL;
    s->inputs[0] = xi;
    s->inputs[1] = si;
    s->inputs[2] = bi;
    s->num_inputs = 3;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_reduce(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TCI_TRY(require_known(node, x));
    TCI_TRY(require_known(node, y));
    bool mean = op_is(node, "ReduceMean");
    bool axes_input = mean ? node->since_version >= 18 : node->since_version >= 13;
    int64_t axes[TCI_MAX_RANK];
    int na;
    bool present;
    TCI_TRY(int_list(node, axes_input ? 1 : -1, axes_input ? NULL : "axes", axes, &na,
                     TCI_MAX_RANK, &present));
    int64_t keepdims, noop;
    TCI_TRY(ir_attr_int(node, "keepdims", 1, &keepdims));
    TCI_TRY(ir_attr_int(node, "noop_with_empty_axes", 0, &noop));
    bool reduce[TCI_MAX_RANK] = {false};
    if (na == 0 && !noop)
        for (int i = 0; i < x->rank; i++) reduce[i] = true;
    for (int i = 0; i < na; i++) {
        int a;
        TCI_TRY(op_normalize_axis(node, axes[i], x->rank, &a));
        reduce[a] = true;
    }
    if (na == 0 && noop) {
        int src, idx;
        TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &src));
        return alias_output(b, node, y, src, &idx);
    }
    /* the spatial mean of an NHWC8 activation is a global average pool */
    int pi = b->primary[x->index];
    if (x->rank == 4 && reduce[2] && reduce[3] && !reduce[0] && !reduce[1] && keepdims && mean &&
        pi >= 0 && b->p->tensors[pi].layout == PLAN_LAYOUT_NHWC8)
        return global_pool_step(b, node, x, y, false);
    if (x->rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "rank %d reductions have no GPU path",
                             x->rank);
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_DENSE, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_REDUCE, node, NULL, &s));
    plan_strided *v = &s->u.reduce.view;
    memset(v, 0, sizeof *v);
    v->rank = x->rank;
    v->pad_dim = -1;
    for (int i = 0; i < x->rank; i++) {
        v->dims[i] = x->dims[i];
        s->u.reduce.reduce_dim[i] = reduce[i];
    }
    op_strides(x->rank, x->dims, v->strides[0]);
    s->u.reduce.mean = mean;
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

static tci_status lower_resize(builder *b, ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    TCI_TRY(require_known(node, x));
    TCI_TRY(require_known(node, y));
    if (x->rank != 4 || x->dims[0] != y->dims[0] || x->dims[1] != y->dims[1])
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the GPU path resizes the two spatial dims of 4-D inputs");
    /* before opset 11 coordinates are asymmetric and nearest truncates */
    const char *mode, *coord = "asymmetric", *nearest = "floor";
    TCI_TRY(ir_attr_string(node, "mode", "nearest", &mode));
    bool resize = op_is(node, "Resize");
    if (resize && node->since_version >= 11) {
        TCI_TRY(ir_attr_string(node, "coordinate_transformation_mode", "half_pixel", &coord));
        TCI_TRY(ir_attr_string(node, "nearest_mode", "round_prefer_floor", &nearest));
    }
    bool linear = !strcmp(mode, "linear") || !strcmp(mode, "bilinear");
    if (!linear && strcmp(mode, "nearest"))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "Resize mode '%s' has no GPU path", mode);
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                         "asymmetric", "half_pixel_symmetric", NULL};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil", NULL};
    int ci = -1, ni = -1;
    for (int i = 0; coords[i]; i++)
        if (!strcmp(coord, coords[i])) ci = i;
    for (int i = 0; nearests[i]; i++)
        if (!strcmp(nearest, nearests[i])) ni = i;
    if (ci < 0 || ni < 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "Resize coordinate mode '%s' / nearest mode '%s' has no GPU path",
                             coord, nearest);
    if (!resize || node->since_version < 11) ni = PLAN_NEAREST_LEGACY;
    /* scales: given ones (the spec computes coordinates from them), else output/input */
    float sh = (float)y->dims[2] / (float)x->dims[2], sw = (float)y->dims[3] / (float)x->dims[3];
    int scales_input = !resize ? (node->since_version >= 9 ? 1 : -1)
                               : (node->since_version >= 11 ? 2 : 1);
    if (!resize && node->since_version < 9) {
        const float *sc;
        size_t n;
        TCI_TRY(ir_attr_floats(node, "scales", &sc, &n));
        if (n == 4) {
            sh = sc[2];
            sw = sc[3];
        }
    } else if (scales_input < node->num_inputs && node->inputs[scales_input] &&
               is_constant(node->inputs[scales_input]) &&
               ir_count(node->inputs[scales_input]) == 4) {
        const float *sc = node->inputs[scales_input]->data;
        sh = sc[2];
        sw = sc[3];
    }
    int xi, yt;
    TCI_TRY(get_input(b, node, x, PLAN_LAYOUT_NHWC8, &xi));
    TCI_TRY(make_output(b, node, y, PLAN_LAYOUT_NHWC8, &yt));
    plan_step *s;
    TCI_TRY(add_step(b, PLAN_STEP_RESIZE, node, NULL, &s));
    s->u.resize.n = x->dims[0];
    s->u.resize.c = x->dims[1];
    s->u.resize.h = x->dims[2];
    s->u.resize.w = x->dims[3];
    s->u.resize.out_h = y->dims[2];
    s->u.resize.out_w = y->dims[3];
    s->u.resize.linear = linear;
    s->u.resize.coord_mode = ci;
    s->u.resize.nearest_mode = ni;
    s->u.resize.scale_h = sh;
    s->u.resize.scale_w = sw;
    s->inputs[0] = xi;
    s->num_inputs = 1;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}

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
    case PLAN_STEP_LAYERNORM: return "tcinfer layernorm";
    case PLAN_STEP_REDUCE: return "tcinfer reduce";
    case PLAN_STEP_RESIZE: return "tcinfer resize";
    case PLAN_STEP_GATHER: return "tcinfer gather";
    case PLAN_STEP_PAD: return "tcinfer pad";
    case PLAN_STEP_CONV: return step->u.conv.depthwise ? "tcinfer depthwise" : "cuDNN convolution";
    case PLAN_STEP_CONV_TRANSPOSE: return "cuDNN backward-data convolution";
    case PLAN_STEP_GEMM: return "cuBLASLt GEMM";
    }
    return "?";
}

/* ---- the build ---- */

typedef tci_status (*lower_fn)(builder *b, ir_node *node);

static const struct {
    const char *op;
    lower_fn fn;
} lowerings[] = {
    {"Conv", lower_conv},
    {"ConvTranspose", lower_conv_transpose},
    {"Gemm", lower_gemm},
    {"MatMul", lower_matmul},
    {"BatchNormalization", lower_batchnorm},
    {"MaxPool", lower_pool},
    {"AveragePool", lower_pool},
    {"GlobalAveragePool", lower_global_pool},
    {"GlobalMaxPool", lower_global_pool},
    {"Relu", lower_eltwise},
    {"LeakyRelu", lower_eltwise},
    {"PRelu", lower_eltwise},
    {"Clip", lower_eltwise},
    {"Sigmoid", lower_eltwise},
    {"HardSigmoid", lower_eltwise},
    {"HardSwish", lower_eltwise},
    {"Tanh", lower_eltwise},
    {"Elu", lower_eltwise},
    {"Selu", lower_eltwise},
    {"Softplus", lower_eltwise},
    {"Sqrt", lower_eltwise},
    {"Erf", lower_eltwise},
    {"Gelu", lower_eltwise},
    {"Add", lower_eltwise},
    {"Sub", lower_eltwise},
    {"Mul", lower_eltwise},
    {"Div", lower_eltwise},
    {"Pow", lower_eltwise},
    {"Sum", lower_eltwise},
    {"Max", lower_eltwise},
    {"Min", lower_eltwise},
    {"Equal", lower_eltwise},
    {"Where", lower_eltwise},
    {"Identity", lower_passthrough},
    {"Dropout", lower_passthrough},
    {"Reshape", lower_reshape},
    {"Flatten", lower_reshape},
    {"Squeeze", lower_reshape},
    {"Unsqueeze", lower_reshape},
    {"Transpose", lower_transpose},
    {"Concat", lower_concat},
    {"Split", lower_split},
    {"Slice", lower_slice},
    {"Expand", lower_expand},
    {"Gather", lower_gather},
    {"Cast", lower_cast},
    {"Pad", lower_pad},
    {"Softmax", lower_softmax},
    {"LogSoftmax", lower_softmax},
    {"LayerNormalization", lower_layernorm},
    {"ReduceMean", lower_reduce},
    {"ReduceSum", lower_reduce},
    {"Resize", lower_resize},
    {"Upsample", lower_resize},
};

static lower_fn find_lowering(const char *op) {
    for (size_t i = 0; i < sizeof lowerings / sizeof lowerings[0]; i++)
        if (strcmp(lowerings[i].op, op) == 0) return lowerings[i].fn;
    return NULL;
}

static tci_status lower_inputs(builder *b) {
    const ir_graph *g = b->g;
    for (size_t i = 0; i < g->num_inputs; i++) {
        const ir_tensor *t = g->inputs[i];
        for (int d = 0; d < t->rank; d++)
            if (t->dims[d] < 0)
                return tci_error(TCI_ERR_INVALID_ARGUMENT,
                                 "input '%s' has a symbolic dim %d; the GPU engine is built for "
                                 "fixed (maximum) shapes: give --shape %s:...",
                                 t->name, d, t->name);
        /* a float input is fp32 where an fp32 node reads it (so that no precision is lost
         * before it; fp16 readers get a cast) */
        bool fp32 = false;
        for (size_t n = 0; n < g->num_nodes && !fp32; n++)
            for (int k = 0; k < g->nodes[n]->num_inputs; k++)
                if (g->nodes[n]->inputs[k] == t && b->fp32_node[n]) fp32 = true;
        tci_dtype dtype;
        if (t->dtype == TCI_DTYPE_FLOAT) dtype = fp32 ? TCI_DTYPE_FLOAT : b->half;
        else if (t->dtype == TCI_DTYPE_INT64 || t->dtype == TCI_DTYPE_INT32 ||
                 t->dtype == TCI_DTYPE_BOOL) dtype = t->dtype;
        else
            return tci_error(TCI_ERR_UNSUPPORTED, "input '%s' has dtype %s, which has no GPU path",
                             t->name, tci_dtype_name(t->dtype));
        /* 4-D float inputs feeding spatial ops arrive NHWC8 straight from the input kernel */
        plan_layout layout = PLAN_LAYOUT_DENSE;
        if (t->rank == 4 && is_float(dtype)) {
            for (size_t n = 0; n < g->num_nodes; n++) {
                const ir_node *node = g->nodes[n];
                if (node->inputs[0] == t &&
                    (op_is(node, "Conv") || op_is(node, "MaxPool") || op_is(node, "AveragePool") ||
                     op_is(node, "GlobalAveragePool") || op_is(node, "BatchNormalization") ||
                     op_is(node, "Resize")))
                    layout = PLAN_LAYOUT_NHWC8;
            }
        }
        int idx;
        TCI_TRY(new_tensor(b, t->name, dtype, layout, t->rank, t->dims, &idx));
        b->p->tensors[idx].input_index = (int)i;
        b->primary[t->index] = idx;
        b->p->input_tensors[i] = idx;
    }
    return TCI_OK;
}

static int root_of(const plan *p, int t) { return p->tensors[t].alias_of >= 0 ? p->tensors[t].alias_of : t; }

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
        return tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory planning memory");
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
                p->tensors[r].last_step == s && p->tensors[r].output_index < 0) {
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
            if (p->tensors[t].alias_of >= 0) p->tensors[t].offset = p->tensors[p->tensors[t].alias_of].offset;
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
    tci_arena_destroy(p->arena);
    free(p);
}

/* Ops that only move or select data: exact in any precision, so they keep their input's. */
static bool moves_data(const ir_node *n) {
    static const char *const ops[] = {"Identity", "Dropout", "Reshape", "Flatten", "Squeeze",
                                      "Unsqueeze", "Transpose", "Concat", "Split", "Slice",
                                      "Expand", "Gather", "Pad"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (op_is(n, ops[i])) return true;
    return false;
}

typedef struct op_lookup {
    const char *op_type;
    bool found;
} op_lookup;

static void match_op(const op_desc *d, void *user) {
    op_lookup *l = user;
    if (strcmp(d->op_type, l->op_type) == 0) l->found = true;
}

bool plan_fp32_selects(const char *entry, const ir_node *node) {
    return strcmp(node->name, entry) == 0 || strcmp(node->op_type, entry) == 0 ||
           fnmatch(entry, node->name, 0) == 0;
}

/* Marks the nodes that run in fp32 (plan_options). */
static tci_status mark_fp32_nodes(builder *b) {
    const ir_graph *g = b->g;
    const plan_options *o = b->options;
    if (!o) return TCI_OK;
    for (size_t i = 0; i < g->num_nodes; i++) b->fp32_node[i] = o->all_fp32;
    for (const char *const *name = o->fp32_layers; name && *name; name++) {
        bool found = false;
        for (size_t i = 0; i < g->num_nodes; i++)
            if (plan_fp32_selects(*name, g->nodes[i])) {
                b->fp32_node[i] = true;
                found = true;
            }
        op_lookup known = {*name, false};
        if (!found) op_registry_each(match_op, &known);
        if (!found && !known.found)
            return tci_error(TCI_ERR_INVALID_ARGUMENT,
                             "fp32 layers: no node name matches '%s' and it is no op type "
                             "(node names are those after optimisation: BatchNormalization "
                             "folded into Conv, Identity and Dropout removed)",
                             *name);
    }
    return TCI_OK;
}

tci_status plan_fp32_nodes(const ir_graph *graph, const plan_options *options, bool *out) {
    builder b = {0};
    b.g = graph;
    b.options = options;
    b.fp32_node = out;
    for (size_t i = 0; i < graph->num_nodes; i++) out[i] = false;
    return mark_fp32_nodes(&b);
}

static tci_status build(builder *b) {
    const ir_graph *g = b->g;
    TCI_TRY(mark_fp32_nodes(b));
    TCI_TRY(lower_inputs(b));
    for (size_t i = 0; i < g->num_nodes; i++) {
        ir_node *node = g->nodes[i];
        if (b->fused[i]) continue;
        b->fp32 = b->fp32_node[i];
        if (!b->fp32 && moves_data(node) && node->num_inputs && node->inputs[0] &&
            !is_constant(node->inputs[0]) && b->primary[node->inputs[0]->index] >= 0)
            b->fp32 = b->p->tensors[b->primary[node->inputs[0]->index]].dtype == TCI_DTYPE_FLOAT;
        lower_fn fn = find_lowering(node->op_type);
        if (!fn)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "op %s has no GPU path yet (run it with --backend cpu)",
                                 node->op_type);
        TCI_TRY(fn(b, node));
    }
    for (size_t i = 0; i < g->num_outputs; i++) {
        const ir_tensor *t = g->outputs[i];
        int idx = -1;
        if (is_constant(t)) {
            TCI_TRY(constant_tensor(b, g->nodes[0], t, PLAN_LAYOUT_DENSE, &idx));
        } else {
            idx = b->primary[t->index];
        }
        if (idx < 0) return tci_error(TCI_ERR_INTERNAL, "graph output '%s' was not lowered", t->name);
        b->p->output_tensors[i] = idx;
        if (b->p->tensors[idx].output_index < 0) b->p->tensors[idx].output_index = (int)i;
    }
    return assign_memory(b->p);
}

tci_status plan_build(const ir_graph *graph, const plan_options *options, plan **out_plan) {
    *out_plan = NULL;
    if (graph->num_nodes == 0)
        return tci_error(TCI_ERR_UNSUPPORTED, "the model has no nodes to run on the GPU");
    plan *p = calloc(1, sizeof *p);
    builder b = {0};
    size_t nt = graph->num_tensors, nn = graph->num_nodes;
    b.p = p;
    b.g = graph;
    b.options = options;
    b.half = options && options->bf16 ? TCI_DTYPE_BFLOAT16 : TCI_DTYPE_FLOAT16;
    if (p) {
        p->arena = tci_arena_create();
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
    b.fused = calloc(nn, sizeof(bool));
    b.fp32_node = calloc(nn, sizeof(bool));
    tci_status st = TCI_OK;
    if (!p || !p->arena || !p->input_tensors || !p->output_tensors || !b.primary ||
        !b.converted || !b.dense_const || !b.nhwc_const || !b.consumers || !b.fused ||
        !b.fp32_node)
        st = tci_error(TCI_ERR_OUT_OF_MEMORY, "out of memory building the GPU plan");
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
    free(b.fused);
    free(b.fp32_node);
    if (st != TCI_OK) {
        plan_destroy(p);
        return st;
    }
    *out_plan = p;
    return TCI_OK;
}
