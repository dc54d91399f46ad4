/* The lowering interface (graph/lower.h) over the builder's state: plan tensors and steps,
 * layout conversions and casts inserted where a reader needs them, constants uploaded once per
 * layout and precision, and the fusion queries the op families use. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/plan/builder.h"
#include "layers/op.h"

bool builder_is_float(tci_dtype d) {
    return d == TCI_DTYPE_FLOAT16 || d == TCI_DTYPE_BFLOAT16 || d == TCI_DTYPE_FLOAT;
}

/* fp32 -> the bits of a 16-bit float dtype (FLOAT16 or BFLOAT16) */
static uint16_t half_bits(tci_dtype dtype, float v) {
    return dtype == TCI_DTYPE_BFLOAT16 ? float_to_bfloat16(v) : float_to_half(v);
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
    if (!q) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory building the GPU plan");
    *array = q;
    *cap = n;
    return TCI_OK;
}

static size_t tensor_bytes(const plan_tensor *t) {
    int64_t count = 1;
    for (int i = 0; i < t->rank; i++) count *= i == 1 && t->layout == PLAN_LAYOUT_NHWC8 ? t->padded_channels : t->dims[i];
    return (size_t)count * tci_dtype_size(t->dtype);
}

tci_status builder_new_tensor(plan_builder *b, const char *name, tci_dtype dtype, plan_layout layout,
                             int rank, const int64_t *dims, int *out_index) {
    plan *p = b->p;
    TRY_STATUS(grow((void **)&p->tensors, &p->cap_tensors, p->num_tensors + 1, sizeof(plan_tensor)));
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

tci_status lower_step(plan_builder *b, plan_step_kind kind, const ir_node *node, const char *label,
                           plan_step **out_step) {
    plan *p = b->p;
    TRY_STATUS(grow((void **)&p->steps, &p->cap_steps, p->num_steps + 1, sizeof(plan_step)));
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

const char *lower_intern(plan_builder *b, const char *text) {
    return arena_strdup(b->p->arena, text);
}

/* Device float dtype of what the node being lowered produces: fp16 (bf16 in --precision bf16),
 * or the kept dtype (fp32, or bf16 in an fp16 plan keeping layers in bf16) in kept layers. */
tci_dtype lower_float_dtype(const plan_builder *b) { return b->kept ? b->kept_dtype : b->half; }

const char *lower_kept_name(const plan_builder *b) { return plan_kept_name(b->options); }

tci_status lower_device_dtype(const plan_builder *b, const ir_node *node, tci_dtype dtype,
                               tci_dtype *out) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT: *out = lower_float_dtype(b); return TCI_OK;
    case TCI_DTYPE_INT64:
    case TCI_DTYPE_INT32:
    case TCI_DTYPE_BOOL: *out = dtype; return TCI_OK;
    default:
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "dtype %s has no GPU path",
                             tci_dtype_name(dtype));
    }
}

tci_status lower_require_known(const ir_node *node, const ir_tensor *t) {
    if (t->rank < 0)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "the rank of '%s' depends on runtime values; the GPU engine needs "
                             "static shapes (fix inputs with tci_engine_options.shapes)",
                             t->name ? t->name : "?");
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0)
            return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                                 "dim %d of '%s' depends on runtime values; the GPU engine needs "
                                 "static shapes (fix inputs with tci_engine_options.shapes)",
                                 i, t->name ? t->name : "?");
    return TCI_OK;
}

/* fp32 host values of a float constant */
const float *lower_const_floats(const ir_tensor *t) {
    return t->dtype == TCI_DTYPE_FLOAT ? (const float *)t->data : NULL;
}

int64_t lower_count(const ir_tensor *t) {
    int64_t c = 1;
    for (int i = 0; i < t->rank; i++) c *= t->dims[i];
    return c;
}

/* Uploads a constant in the given layout (converting fp32 to fp16 or bf16; NHWC8 takes the
 * constant right-aligned to rank 4, as broadcasting does). */
tci_status builder_constant(plan_builder *b, const ir_node *node, const ir_tensor *t,
                                  plan_layout layout, int *out_index) {
    int *cache = layout == PLAN_LAYOUT_NHWC8 ? b->nhwc_const : b->dense_const;
    size_t key = t->index * 2 + (b->kept ? 1 : 0);
    if (cache[key] >= 0) {
        *out_index = cache[key];
        return TCI_OK;
    }
    tci_dtype dtype = TCI_DTYPE_UNDEFINED;
    TRY_STATUS(lower_device_dtype(b, node, t->dtype, &dtype));
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
    TRY_STATUS(builder_new_tensor(b, t->name, dtype, layout, rank, dims, &idx));
    plan_tensor *pt = &b->p->tensors[idx];
    pt->memory = PLAN_MEM_CONSTANT;
    void *host = arena_alloc(b->p->arena, pt->bytes ? pt->bytes : 1);
    if (!host) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory converting constants");
    int64_t count = lower_count(t);
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
static tci_status convert_step(plan_builder *b, const ir_node *node, const ir_tensor *t, int src,
                               plan_layout layout, tci_dtype dtype, int *out_index) {
    /* a copy: builder_new_tensor below may move the tensor array */
    const plan_tensor src_tensor = b->p->tensors[src];
    const plan_tensor *pt = &src_tensor;
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
    /* the kept precision named (":fp32", ":bf16"); the 16-bit one of the plan not */
    snprintf(name, sizeof name, "%s:%s%s%s", t->name,
             layout == PLAN_LAYOUT_NHWC8 ? "nhwc8" : "dense", dtype != b->half ? ":" : "",
             dtype != b->half ? float_name(dtype) : "");
    int conv;
    TRY_STATUS(builder_new_tensor(b, lower_intern(b, name), dtype, layout, rank, dims, &conv));
    plan_step *s;
    char cast_label[32];
    snprintf(cast_label, sizeof cast_label, "cast %s->%s", float_name(pt->dtype), float_name(dtype));
    const char *label = !relayout                      ? lower_intern(b, cast_label)
                        : layout == PLAN_LAYOUT_NHWC8 ? "layout dense->NHWC8"
                                                      : "layout NHWC8->dense";
    TRY_STATUS(lower_step(b, relayout ? PLAN_STEP_LAYOUT : PLAN_STEP_CAST, node, label, &s));
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

/* The plan tensor holding IR tensor t in the wanted layout and, for float values, in the float
 * precision of the node being lowered, inserting a layout conversion and/or a cast the first
 * time one is needed. */
tci_status lower_input(plan_builder *b, const ir_node *node, const ir_tensor *t, plan_layout want,
                       int *out_index) {
    if (is_constant(t)) return builder_constant(b, node, t, want, out_index);
    int idx = b->primary[t->index];
    if (idx < 0)
        return ir_node_error(node, TCI_ERR_INTERNAL, "input '%s' has not been lowered", t->name);
    const plan_tensor *pt = &b->p->tensors[idx];
    plan_layout layout = want;
    tci_dtype dtype = builder_is_float(pt->dtype) ? lower_float_dtype(b) : pt->dtype;
    if (pt->layout == layout && pt->dtype == dtype) {
        *out_index = idx;
        return TCI_OK;
    }
    if (pt->layout != layout && !builder_is_float(pt->dtype))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "'%s' (%s) cannot change layout",
                             t->name, tci_dtype_name(pt->dtype));
    int *cache = &b->converted[t->index * 4];
    int want_key = (int)layout * 2 + (dtype != b->half);
    if (cache[want_key] >= 0) {
        *out_index = cache[want_key];
        return TCI_OK;
    }
    /* the layout first, in the stored precision, then the cast */
    int src = idx;
    if (pt->layout != layout) {
        int key = (int)layout * 2 + (pt->dtype != b->half);
        if (cache[key] < 0) TRY_STATUS(convert_step(b, node, t, idx, layout, pt->dtype, &cache[key]));
        src = cache[key];
    }
    if (b->p->tensors[src].dtype != dtype) {
        int cast;
        TRY_STATUS(convert_step(b, node, t, src, layout, dtype, &cast));
        src = cast;
    }
    cache[want_key] = src;
    *out_index = src;
    return TCI_OK;
}

/* Creates the plan tensor for node output t in the layout the layout pass recorded. */
tci_status lower_output(plan_builder *b, const ir_node *node, const ir_tensor *t, int *out_index) {
    TRY_STATUS(lower_require_known(node, t));
    tci_dtype dtype = TCI_DTYPE_UNDEFINED;
    TRY_STATUS(lower_device_dtype(b, node, t->dtype, &dtype));
    if (t->layout == PLAN_LAYOUT_NHWC8 && (t->rank != 4 || !builder_is_float(dtype)))
        return ir_node_error(node, TCI_ERR_INTERNAL,
                             "'%s' is laid out NHWC8 but is no 4-D float tensor", t->name);
    TRY_STATUS(builder_new_tensor(b, t->name, dtype, t->layout, t->rank, t->dims, out_index));
    b->primary[t->index] = *out_index;
    return TCI_OK;
}

/* The layout pass's record and the layout a lowering gives t disagree: a bug, named. */
static tci_status layout_mismatch(const ir_node *node, const ir_tensor *t) {
    return ir_node_error(node, TCI_ERR_INTERNAL,
                         "'%s' is lowered in another layout than the layout pass recorded",
                         t->name);
}

/* Plan tensor t shares src's memory from `bytes` past where src starts (src's root: an alias
 * of an alias is one of the root). */
static void share_memory(plan *p, int t, int src, size_t bytes) {
    const plan_tensor *s = &p->tensors[src];
    p->tensors[t].alias_of = s->alias_of >= 0 ? s->alias_of : src;
    p->tensors[t].view_bytes = s->view_bytes + bytes;
}

/* An output sharing the memory of src with new dims (Reshape and friends on dense data). */
tci_status lower_alias(plan_builder *b, const ir_node *node, const ir_tensor *t, int src,
                               int *out_index) {
    TRY_STATUS(lower_require_known(node, t));
    if (t->layout != PLAN_LAYOUT_DENSE) return layout_mismatch(node, t);
    plan_tensor copy = b->p->tensors[src];
    int idx;
    TRY_STATUS(builder_new_tensor(b, t->name, copy.dtype, PLAN_LAYOUT_DENSE, t->rank, t->dims, &idx));
    plan_tensor *pt = &b->p->tensors[idx];
    if (copy.memory == PLAN_MEM_CONSTANT) {
        pt->memory = PLAN_MEM_CONSTANT;
        pt->host_data = copy.host_data;
    } else {
        share_memory(b->p, idx, src, 0);
    }
    b->primary[t->index] = idx;
    *out_index = idx;
    return TCI_OK;
}

tci_status lower_alias_across_layouts(plan_builder *b, const ir_node *node, const ir_tensor *t,
                                      int src, int *out_index) {
    TRY_STATUS(lower_require_known(node, t));
    const plan_tensor copy = b->p->tensors[src];
    /* NHWC8 (N, C, H, W) with C a multiple of 8 (no padding) holds dense (N, H, W, C)'s bytes */
    bool to_nhwc = t->layout == PLAN_LAYOUT_NHWC8;
    const int64_t *nchw = to_nhwc ? t->dims : copy.dims, *nhwc = to_nhwc ? copy.dims : t->dims;
    bool ok = copy.memory != PLAN_MEM_CONSTANT && copy.layout != t->layout && t->rank == 4 &&
              copy.rank == 4 && nchw[1] % 8 == 0 && nhwc[0] == nchw[0] && nhwc[1] == nchw[2] &&
              nhwc[2] == nchw[3] && nhwc[3] == nchw[1];
    if (!ok)
        return ir_node_error(node, TCI_ERR_INTERNAL,
                             "'%s' cannot share the memory of '%s' in the other layout", t->name,
                             copy.name);
    int idx;
    TRY_STATUS(builder_new_tensor(b, t->name, copy.dtype, t->layout, t->rank, t->dims, &idx));
    share_memory(b->p, idx, src, 0);
    b->primary[t->index] = idx;
    *out_index = idx;
    return TCI_OK;
}

/* Identity: the output is src in its layout and dims (an alias, or the constant itself). */
tci_status lower_forward(plan_builder *b, const ir_node *node, const ir_tensor *t, int src) {
    const plan_tensor copy = b->p->tensors[src];
    int idx;
    if (copy.layout != t->layout) return layout_mismatch(node, t);
    if (copy.layout == PLAN_LAYOUT_DENSE) return lower_alias(b, node, t, src, &idx);
    TRY_STATUS(builder_new_tensor(b, t->name, copy.dtype, copy.layout, copy.rank, copy.dims, &idx));
    plan_tensor *pt = &b->p->tensors[idx];
    if (copy.memory == PLAN_MEM_CONSTANT) {
        pt->memory = PLAN_MEM_CONSTANT;
        pt->host_data = copy.host_data;
    } else {
        share_memory(b->p, idx, src, 0);
    }
    b->primary[t->index] = idx;
    return TCI_OK;
}

tci_status lower_temporary(plan_builder *b, const char *name, tci_dtype dtype,
                           plan_layout layout, int rank, const int64_t *dims, int *out_index) {
    return builder_new_tensor(b, lower_intern(b, name), dtype, layout, rank, dims, out_index);
}

tci_status lower_layout_step(plan_builder *b, const ir_node *node, int src, int dst) {
    const plan_tensor *x = &b->p->tensors[src], *y = &b->p->tensors[dst];
    const plan_tensor *nhwc = x->layout == PLAN_LAYOUT_NHWC8 ? x : y;
    const plan_tensor *dense = x->layout == PLAN_LAYOUT_NHWC8 ? y : x;
    bool ok = x->layout != y->layout && x->dtype == y->dtype && nhwc->rank == 4 &&
              dense->rank >= 2 && dense->dims[0] == nhwc->dims[0] &&
              dense->dims[1] == nhwc->dims[1] &&
              lower_prod(dense->dims, 2, dense->rank) == lower_prod(nhwc->dims, 2, 4);
    if (!ok)
        return ir_node_error(node, TCI_ERR_INTERNAL,
                             "no layout conversion between '%s' (rank %d, %s) and '%s' (rank %d, "
                             "%s)", x->name, x->rank, tci_dtype_name(x->dtype), y->name, y->rank,
                             tci_dtype_name(y->dtype));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_LAYOUT, node,
                          y->layout == PLAN_LAYOUT_NHWC8 ? "layout dense->NHWC8"
                                                         : "layout NHWC8->dense",
                          &s));
    s->u.layout.to_dense = y->layout == PLAN_LAYOUT_DENSE;
    lower_step_io(s, 1, &src, 1, &dst);
    b->p->num_layout_conversions++;
    return TCI_OK;
}

void lower_step_io(plan_step *s, int num_inputs, const int *inputs, int num_outputs,
                   const int *outputs) {
    for (int i = 0; i < num_inputs; i++) s->inputs[i] = inputs[i];
    for (int i = 0; i < num_outputs; i++) s->outputs[i] = outputs[i];
    s->num_inputs = num_inputs;
    s->num_outputs = num_outputs;
}

const plan_tensor *lower_tensor(const plan_builder *b, int index) { return &b->p->tensors[index]; }

/* ---- consumers and fusion ---- */

bool lower_is_read(const plan_builder *b, const ir_tensor *t) { return b->consumers[t->index] > 0; }

const ir_epilogue *lower_epilogue(const ir_node *node, ir_epilogue *none) {
    if (node->epilogue) return node->epilogue;
    memset(none, 0, sizeof *none);
    none->label = node->op_type;
    none->output = node->num_outputs ? node->outputs[0] : NULL;
    return none;
}

/* Scalar value of an optional constant input (Clip's min/max); def when absent. */
tci_status lower_scalar_input(const ir_node *n, int index, float def, float *out) {
    *out = def;
    if (index >= n->num_inputs || !n->inputs[index]) return TCI_OK;
    const ir_tensor *t = n->inputs[index];
    if (!t->data || t->dtype != TCI_DTYPE_FLOAT || lower_count(t) != 1)
        return ir_node_error(n, TCI_ERR_UNSUPPORTED,
                             "input %d must be a constant float scalar on the GPU", index);
    *out = ((const float *)t->data)[0];
    return TCI_OK;
}

/* A float host constant of the given dims: fp32 (dense: a packing source, see below) or
 * converted to fp16. */
tci_status lower_host_constant(plan_builder *b, const char *name, const float *values, int rank,
                                const int64_t *dims, tci_dtype dtype, plan_layout layout,
                                int *out_index) {
    int idx;
    TRY_STATUS(builder_new_tensor(b, lower_intern(b, name), dtype, layout, rank, dims, &idx));
    plan_tensor *pt = &b->p->tensors[idx];
    pt->memory = PLAN_MEM_CONSTANT;
    void *host = arena_alloc(b->p->arena, pt->bytes ? pt->bytes : 1);
    if (!host) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory converting constants");
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
     * bias (fp16 or bf16 on the device, fp32 in fp32 layers); the NHWC8 ones are uploaded as
     * they are */
    pt->packed_source = dtype == TCI_DTYPE_FLOAT && layout == PLAN_LAYOUT_DENSE;
    bool packed_16 = lower_float_dtype(b) != TCI_DTYPE_FLOAT;
    b->p->weight_bytes += pt->packed_source && packed_16 ? pt->bytes / 2 : pt->bytes;
    *out_index = idx;
    return TCI_OK;
}

tci_status lower_host_data(plan_builder *b, const char *name, const float *values, int rank,
                           const int64_t *dims, tci_dtype dtype, int *out_index) {
    TRY_STATUS(lower_host_constant(b, name, values, rank, dims, dtype, PLAN_LAYOUT_DENSE, out_index));
    plan_tensor *pt = &b->p->tensors[*out_index];
    if (pt->packed_source && lower_float_dtype(b) != TCI_DTYPE_FLOAT)
        b->p->weight_bytes += pt->bytes - pt->bytes / 2;
    pt->packed_source = false;
    return TCI_OK;
}

/* ---- Conv ---- */


int64_t lower_prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}


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
void lower_operand_strides(const plan_tensor *out, const plan_tensor *in, int64_t *strides) {
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

tci_status lower_output_view(const ir_node *node, const plan_tensor *out, plan_strided *v) {
    memset(v, 0, sizeof *v);
    if (out->layout != PLAN_LAYOUT_NHWC8 && out->rank > PLAN_MAX_PHYS_RANK)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED, "a rank-%d output of an element-wise or "
                             "strided step; the GPU path has at most %d dims", out->rank,
                             PLAN_MAX_PHYS_RANK);
    v->rank = physical_dims(out, v->dims);
    int64_t s = 1;
    for (int i = v->rank - 1; i >= 0; i--) {
        v->out_strides[i] = s;
        s *= v->dims[i];
    }
    v->pad_dim = out->layout == PLAN_LAYOUT_NHWC8 ? 3 : -1;
    v->real_channels = out->layout == PLAN_LAYOUT_NHWC8 ? out->dims[1] : 0;
    return TCI_OK;
}

tci_status lower_fill_step(plan_builder *b, const ir_node *node, int yt, double value) {
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_FILL, node, "fill", &s));
    const plan_tensor *y = &b->p->tensors[yt];
    s->u.fill.value = value;
    s->u.fill.count = (int64_t)(y->bytes / tci_dtype_size(y->dtype));
    lower_step_io(s, 0, NULL, 1, &yt);
    return TCI_OK;
}

/* Whether the part of the dense x that start and step select as y's dims is one run of x's
 * elements: y is 1 along the axes before some axis k, and whole along the axes after it. */
static bool selects_run(const plan_tensor *x, const plan_tensor *y, const int64_t *start,
                        const int64_t *step) {
    int k = 0;
    while (k < y->rank - 1 && y->dims[k] == 1) k++;
    if (y->rank && y->dims[k] > 1 && step[k] != 1) return false;
    for (int d = k + 1; d < y->rank; d++)
        if (y->dims[d] != x->dims[d] || start[d] != 0 || step[d] != 1) return false;
    return true;
}

/* y as a view of x from element offset on (no step), where that is allowed: x is computed (not
 * a constant), in y's dtype, and the view starts on the plan's alignment. */
static bool select_as_view(plan_builder *b, int xi, int yt, int64_t offset) {
    const plan_tensor *x = &b->p->tensors[xi], *y = &b->p->tensors[yt];
    size_t bytes = (size_t)offset * tci_dtype_size(x->dtype);
    if (x->memory == PLAN_MEM_CONSTANT || x->dtype != y->dtype ||
        (x->view_bytes + bytes) % PLAN_ALIGNMENT)
        return false;
    share_memory(b->p, yt, xi, bytes);
    b->p->num_views++;
    return true;
}

tci_status lower_select_step(plan_builder *b, const ir_node *node, int xi, int yt,
                             const int64_t *start, const int64_t *step) {
    const plan_tensor x = b->p->tensors[xi], y = b->p->tensors[yt];
    if (x.layout != y.layout || x.rank != y.rank)
        return ir_node_error(node, TCI_ERR_INTERNAL, "'%s' selects from '%s' in another layout",
                             y.name, x.name);
    int64_t xs[TCI_MAX_RANK], strides[TCI_MAX_RANK], offset = 0;
    if (x.layout == PLAN_LAYOUT_DENSE) {
        op_strides(x.rank, x.dims, xs);
        for (int d = 0; d < x.rank; d++) {
            strides[d] = xs[d] * step[d];
            offset += start[d] * xs[d];
        }
        if (selects_run(&x, &y, start, step) && select_as_view(b, xi, yt, offset)) return TCI_OK;
        return lower_copy_step(b, node, xi, yt, strides, offset);
    }
    /* NHWC8: physical (N, H, W, padded C); xs by logical dim (N, C, H, W) */
    static const int logical[4] = {0, 2, 3, 1};
    const int64_t xcp = x.padded_channels, ycp = y.padded_channels;
    const int64_t xlog[4] = {x.dims[2] * x.dims[3] * xcp, 1, x.dims[3] * xcp, xcp};
    const int64_t yphys[4] = {y.dims[2] * y.dims[3] * ycp, y.dims[3] * ycp, ycp, 1};
    /* all the channels: their zero padding is copied with them; otherwise it is filled */
    const bool channels = start[1] == 0 && step[1] == 1 && y.dims[1] == x.dims[1];
    if (!channels && y.dims[1] % 8) TRY_STATUS(lower_fill_step(b, node, yt, 0));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_COPY, node, NULL, &s));
    plan_strided *v = &s->u.copy.view;
    memset(v, 0, sizeof *v);
    v->pad_dim = -1;
    v->rank = 4;
    s->u.copy.elem_size = tci_dtype_size(y.dtype);
    for (int i = 0; i < 4; i++) {
        int d = logical[i];
        v->dims[i] = y.dims[d];
        v->strides[0][i] = xlog[d] * step[d];
        v->out_strides[i] = yphys[i];
        v->in_offset[0] += start[d] * xlog[d];
    }
    if (channels) v->dims[3] = ycp;
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

/* One element-wise step: y = act(op(inputs...)) over IR inputs, output IR tensor `out`, all in
 * the layout recorded for out. */
tci_status lower_copy_step(plan_builder *b, const ir_node *node, int xi, int yt,
                           const int64_t *strides, int64_t in_offset) {
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_COPY, node, NULL, &s));
    const plan_tensor *y = lower_tensor(b, yt);
    TRY_STATUS(lower_output_view(node, y, &s->u.copy.view));
    s->u.copy.view.pad_dim = -1;
    s->u.copy.elem_size = tci_dtype_size(y->dtype);
    for (int i = 0; i < s->u.copy.view.rank; i++) s->u.copy.view.strides[0][i] = strides[i];
    s->u.copy.view.in_offset[0] = in_offset;
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

tci_status lower_eltwise_step(plan_builder *b, const ir_node *node, binary_op op,
                              const ir_tensor *const *inputs, int num_inputs,
                              const ir_tensor *out, act_params act, const char *label,
                              int out_override) {
    int idx[PLAN_MAX_STEP_INPUTS];
    for (int i = 0; i < num_inputs; i++)
        TRY_STATUS(lower_input(b, node, inputs[i], out->layout, &idx[i]));
    int yt = out_override;
    if (yt < 0) TRY_STATUS(lower_output(b, node, out, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_ELTWISE, node, label, &s));
    s->u.eltwise.op = op;
    s->u.eltwise.act = act;
    const plan_tensor *y = &b->p->tensors[yt];
    TRY_STATUS(lower_output_view(node, y, &s->u.eltwise.view));
    for (int i = 0; i < num_inputs; i++) {
        s->inputs[i] = idx[i];
        lower_operand_strides(y, &b->p->tensors[idx[i]], s->u.eltwise.view.strides[i]);
    }
    s->num_inputs = num_inputs;
    s->outputs[0] = yt;
    s->num_outputs = 1;
    return TCI_OK;
}
