/* Op family 'quant': QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear on the CPU
 * reference, per tensor, per axis and blocked, to and from int8 and uint8 (and int32 for
 * DequantizeLinear), rounding half to even and saturating as onnxruntime does. The other quantised
 * types (int16, uint16, the 4- and 2-bit and float8 types) are refused by name. On the GPU a
 * DequantizeLinear of constants folds at build like any node; a pair on activations has no GPU
 * path and is refused naming the node. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"
#include "layers/quant.h"

/* ---- shared with quant_linear.c ---- */

bool quant_range(tci_dtype type, float *lo, float *hi) {
    switch (type) {
    case TCI_DTYPE_INT8: *lo = -128.f, *hi = 127.f; return true;
    case TCI_DTYPE_UINT8: *lo = 0.f, *hi = 255.f; return true;
    default: return false;
    }
}

/* onnxruntime on x86 clamps x/scale to [lo - zp, hi - zp] with maxps/minps before rounding, so a
 * NaN there gives the type's minimum; the clamp before or after the rounding is the same, the
 * bounds being integers. */
int32_t quant_saturate(float v, float zero_point, float lo, float hi) {
    float r = nearbyintf(v) + zero_point;
    if (!(r >= lo)) return (int32_t)lo;
    if (r > hi) return (int32_t)hi;
    return (int32_t)r;
}

void quant_store(tci_dtype type, void *data, int64_t i, int32_t v) {
    if (type == TCI_DTYPE_INT8)
        ((int8_t *)data)[i] = (int8_t)v;
    else
        ((uint8_t *)data)[i] = (uint8_t)v;
}

int32_t quant_load(tci_dtype type, const void *data, int64_t i) {
    switch (type) {
    case TCI_DTYPE_INT8: return ((const int8_t *)data)[i];
    case TCI_DTYPE_UINT8: return ((const uint8_t *)data)[i];
    case TCI_DTYPE_INT32: return ((const int32_t *)data)[i];
    default: return 0;
    }
}

float quant_load_scale(const tci_tensor *t, int64_t i) {
    return t->dtype == TCI_DTYPE_FLOAT16 ? half_to_float(((const uint16_t *)t->data)[i])
                                         : ((const float *)t->data)[i];
}

static float round_half(float v) { return half_to_float(float_to_half(v)); }

/* ---- parameters ---- */

typedef struct quant_params {
    int64_t axis;         /* as given; normalised against x's rank where it is used */
    int64_t block_size;   /* 0: per tensor or per axis */
    tci_dtype output;     /* output_dtype; UNDEFINED when absent */
    tci_dtype precision;  /* QuantizeLinear's division type; UNDEFINED: the scale's */
} quant_params;

static bool is_quant_type(int64_t t) {
    const char *name = op_onnx_type_name(t);
    static const char *const quantised[] = {
        "UINT8", "INT8",      "UINT16",     "INT16",       "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
        "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1", "UINT2", "INT2",
        "FLOAT6E2M3", "FLOAT6E3M2", NULL};
    for (const char *const *q = quantised; name && *q; q++)
        if (strcmp(*q, name) == 0) return true;
    return false;
}

/* A type attribute: 0 (absent) or one of allowed; a type ONNX allows there but tcinfer does
 * not hold is UNSUPPORTED by name, anything else INVALID_MODEL. */
static tci_status parse_type_attr(const ir_node *node, const char *name, bool quantised,
                                  const tci_dtype *allowed, tci_dtype *out) {
    int64_t v;
    TRY_STATUS(ir_attr_int(node, name, 0, &v));
    *out = TCI_DTYPE_UNDEFINED;
    if (v == 0) return TCI_OK;
    for (const tci_dtype *a = allowed; *a; a++)
        if ((int64_t)*a == v) {
            *out = *a;
            return TCI_OK;
        }
    const char *type = op_onnx_type_name(v);
    bool known = quantised ? is_quant_type(v)
                           : (type && (strcmp(type, "FLOAT") == 0 || strcmp(type, "FLOAT16") == 0 ||
                                       strcmp(type, "BFLOAT16") == 0));
    if (known)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute '%s' value %lld (%s) is not supported", name,
                             (long long)v, type);
    return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                         "attribute '%s' value %lld (%s) is not a type this op allows", name,
                         (long long)v, type ? type : "no ONNX data type");
}

static const tci_dtype quant_int_types[] = {TCI_DTYPE_INT8, TCI_DTYPE_UINT8, 0};
static const tci_dtype quant_float_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_FLOAT16, 0};

static tci_status quant_parse_common(ir_node *node, mem_arena *arena, bool quantize) {
    static const char *const v10[] = {NULL};
    static const char *const v13[] = {"axis", NULL};
    static const char *const q19[] = {"axis", "saturate", NULL};
    static const char *const q21[] = {"axis", "saturate", "block_size", "output_dtype", NULL};
    static const char *const q23[] = {"axis",         "saturate",  "block_size",
                                      "output_dtype", "precision", NULL};
    static const char *const d21[] = {"axis", "block_size", NULL};
    static const char *const d23[] = {"axis", "block_size", "output_dtype", NULL};
    int v = node->since_version;
    const char *const *known = v >= 23   ? (quantize ? q23 : d23)
                               : v >= 21 ? (quantize ? q21 : d21)
                               : v >= 19 ? (quantize ? q19 : v13)
                               : v >= 13 ? v13
                                         : v10;
    TRY_STATUS(op_check_arity(node, 2, 3, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, quant_params, p);
    TRY_STATUS(ir_attr_int(node, "axis", 1, &p->axis));
    TRY_STATUS(ir_attr_int(node, "block_size", 0, &p->block_size));
    if (p->block_size < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'block_size' is %lld, must "
                             "be >= 0", (long long)p->block_size);
    /* saturate changes float8 results only, and float8 is refused below */
    int saturate;
    TRY_STATUS(op_read_flag(node, "saturate", 1, &saturate));
    TRY_STATUS(parse_type_attr(node, "output_dtype", quantize,
                               quantize ? quant_int_types : quant_float_types, &p->output));
    TRY_STATUS(parse_type_attr(node, "precision", false, quant_float_types, &p->precision));
    return TCI_OK;
}

static tci_status quantize_parse(ir_node *node, mem_arena *arena) {
    return quant_parse_common(node, arena, true);
}
static tci_status dequantize_parse(ir_node *node, mem_arena *arena) {
    return quant_parse_common(node, arena, false);
}

/* ---- how the scale maps onto x ---- */

typedef struct quant_map {
    int64_t inner, axis_len, blocks, block; /* blocks == 0: per tensor; block == 0: per axis */
} quant_map;

static int64_t quant_index(const quant_map *m, int64_t i) {
    if (!m->blocks) return 0;
    int64_t in = i % m->inner, rest = i / m->inner;
    int64_t d = rest % m->axis_len, outer = rest / m->axis_len;
    if (!m->block) return d;
    return (outer * m->blocks + d / m->block) * m->inner + in;
}

/* Checks scale (input si, named sname) and the zero point against x and fills map when x's
 * and the scale's shapes are known. */
static tci_status quant_check_scale(const ir_node *node, const tci_tensor *x,
                                    const tci_tensor *scale, const tci_tensor *zp,
                                    const char *sname, quant_map *map) {
    const quant_params *p = node->params;
    memset(map, 0, sizeof *map);
    if (zp && zp->rank >= 0 && scale->rank >= 0) {
        bool same = zp->rank == scale->rank;
        for (int d = 0; same && d < zp->rank; d++)
            same = zp->dims[d] < 0 || scale->dims[d] < 0 || zp->dims[d] == scale->dims[d];
        if (!same)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "the zero point's shape differs from %s's", sname);
    }
    if (scale->rank < 0 || x->rank < 0) return TCI_OK;
    int64_t scount = tci_tensor_count(scale);
    if (!p->block_size && (scale->rank == 0 || (scale->rank == 1 && scount == 1))) return TCI_OK;
    if (!p->block_size && scale->rank != 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s has rank %d: expected a scalar (per tensor) or 1-D (per axis); "
                             "blocked quantisation needs block_size",
                             sname, scale->rank);
    int axis;
    TRY_STATUS(op_normalize_axis(node, p->axis, x->rank, &axis));
    map->inner = 1;
    for (int d = axis + 1; d < x->rank; d++) map->inner *= x->dims[d] < 0 ? 1 : x->dims[d];
    map->axis_len = x->dims[axis];
    if (!p->block_size) {
        if (x->dims[axis] >= 0 && scale->dims[0] >= 0 && scale->dims[0] != x->dims[axis])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "%s has %lld values, but x has %lld along axis %d",
                                 sname, (long long)scale->dims[0], (long long)x->dims[axis], axis);
        map->blocks = map->axis_len;
        return TCI_OK;
    }
    if (scale->rank != x->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s has rank %d; blocked quantisation needs x's rank %d", sname,
                             scale->rank, x->rank);
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d] < 0 || scale->dims[d] < 0) continue;
        int64_t want = d == axis ? (x->dims[d] + p->block_size - 1) / p->block_size : x->dims[d];
        if (scale->dims[d] != want)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "%s has %lld at dim %d, expected %lld (x's dims, with "
                                 "ceil(%lld / block_size %lld) along axis %d)",
                                 sname, (long long)scale->dims[d], d, (long long)want,
                                 (long long)x->dims[d], (long long)p->block_size, axis);
    }
    map->blocks = scale->dims[axis];
    map->block = p->block_size;
    return TCI_OK;
}

/* ---- QuantizeLinear ---- */

static tci_dtype quantize_output(const ir_node *node, const tci_tensor *zp) {
    const quant_params *p = node->params;
    if (zp) return zp->dtype;
    return p->output ? p->output : TCI_DTYPE_UINT8;
}

static tci_status quantize_infer(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const quant_params *p = node->params;
    const tci_tensor *x = in[0], *scale = in[1], *zp = node->num_inputs > 2 ? in[2] : NULL;
    static const tci_dtype x_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_FLOAT16, TCI_DTYPE_INT32, 0};
    TRY_STATUS(op_check_dtype(node, x, 0, x_types));
    TRY_STATUS(op_check_dtype(node, scale, 1, quant_float_types));
    if (zp) TRY_STATUS(op_check_dtype(node, zp, 2, quant_int_types));
    if (zp && p->output && zp->dtype && zp->dtype != p->output)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "output_dtype %s differs from y_zero_point's type %s",
                             tci_dtype_name(p->output), tci_dtype_name(zp->dtype));
    quant_map map;
    TRY_STATUS(quant_check_scale(node, x, scale, zp, "y_scale", &map));
    op_same_shape(out[0], x);
    out[0]->dtype = quantize_output(node, zp);
    return TCI_OK;
}

static tci_status quantize_forward(const ir_node *node, const tci_tensor *const *in,
                                   tci_tensor *const *out) {
    const quant_params *p = node->params;
    const tci_tensor *x = in[0], *scale = in[1], *zp = node->num_inputs > 2 ? in[2] : NULL;
    tci_tensor *y = out[0];
    quant_map map;
    TRY_STATUS(quant_check_scale(node, x, scale, zp, "y_scale", &map));
    float lo, hi;
    quant_range(y->dtype, &lo, &hi);
    /* the division is in the precision attribute's type, else the scale's */
    bool half = (p->precision ? p->precision : scale->dtype) == TCI_DTYPE_FLOAT16;
    const int64_t n = op_count(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = quant_index(&map, i);
        float xv = x->dtype == TCI_DTYPE_INT32 ? (float)((const int32_t *)x->data)[i]
                                               : quant_load_scale(x, i);
        float s = quant_load_scale(scale, k);
        float q = half ? round_half(round_half(xv) / round_half(s)) : xv / s;
        float z = zp ? (float)quant_load(zp->dtype, zp->data, k) : 0.f;
        quant_store(y->dtype, y->data, i, quant_saturate(q, z, lo, hi));
    }
    return TCI_OK;
}

/* ---- DequantizeLinear ---- */

static tci_status dequantize_infer(const ir_node *node, const tci_tensor *const *in,
                                   tci_tensor *const *out) {
    const quant_params *p = node->params;
    const tci_tensor *x = in[0], *scale = in[1], *zp = node->num_inputs > 2 ? in[2] : NULL;
    static const tci_dtype x_types[] = {TCI_DTYPE_INT8, TCI_DTYPE_UINT8, TCI_DTYPE_INT32, 0};
    TRY_STATUS(op_check_dtype(node, x, 0, x_types));
    TRY_STATUS(op_check_dtype(node, scale, 1, quant_float_types));
    if (zp) TRY_STATUS(op_check_same_dtype(node, x, 0, zp, 2));
    quant_map map;
    TRY_STATUS(quant_check_scale(node, x, scale, zp, "x_scale", &map));
    op_same_shape(out[0], x);
    out[0]->dtype = p->output ? p->output : scale->dtype;
    return TCI_OK;
}

static tci_status dequantize_forward(const ir_node *node, const tci_tensor *const *in,
                                     tci_tensor *const *out) {
    const tci_tensor *x = in[0], *scale = in[1], *zp = node->num_inputs > 2 ? in[2] : NULL;
    tci_tensor *y = out[0];
    quant_map map;
    TRY_STATUS(quant_check_scale(node, x, scale, zp, "x_scale", &map));
    /* a float16 output multiplies by the scale as float16, in float, rounding once (as
     * onnxruntime: x - zp as float16 first would overflow for int32 x) */
    bool half = y->dtype == TCI_DTYPE_FLOAT16;
    const int64_t n = op_count(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = quant_index(&map, i);
        int64_t z = zp ? quant_load(zp->dtype, zp->data, k) : 0;
        float d = (float)((int64_t)quant_load(x->dtype, x->data, i) - z);
        float s = quant_load_scale(scale, k);
        if (half)
            ((uint16_t *)y->data)[i] = float_to_half(d * round_half(s));
        else
            ((float *)y->data)[i] = d * s;
    }
    return TCI_OK;
}

/* ---- DynamicQuantizeLinear ---- */

static tci_status dynamic_quantize_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    return op_parse_no_attrs(node, 1, 1, 3, 3);
}

static tci_status dynamic_quantize_infer(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    TRY_STATUS(op_check_dtype(node, in[0], 0, op_float_types));
    if (out[0]) {
        op_same_shape(out[0], in[0]);
        out[0]->dtype = TCI_DTYPE_UINT8;
    }
    tci_dtype types[3] = {TCI_DTYPE_UINT8, TCI_DTYPE_FLOAT, TCI_DTYPE_UINT8};
    for (int o = 1; o < 3; o++)
        if (out[o]) {
            out[o]->dtype = types[o];
            out[o]->rank = 0;
        }
    return TCI_OK;
}

/* onnxruntime's GetQuantizationParameter: the range always holds 0, and a range of one value (all
 * zeros) has scale 1 (ONNX's reference gives 1/255 there; y and the zero point are 0 either way). */
static tci_status dynamic_quantize_forward(const ir_node *node, const tci_tensor *const *in,
                                           tci_tensor *const *out) {
    (void)node;
    const tci_tensor *x = in[0];
    const float *xv = x->data;
    const int64_t n = op_count(x);
    float mn = 0.f, mx = 0.f;
    for (int64_t i = 0; i < n; i++) {
        mn = fminf(mn, xv[i]);
        mx = fmaxf(mx, xv[i]);
    }
    float scale = mx == mn ? 1.0f : (mx - mn) / 255.f;
    float initial = 0.f - mn / scale;
    float zp = nearbyintf(fmaxf(0.f, fminf(255.f, initial)));
    if (out[0])
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)out[0]->data)[i] = (uint8_t)quant_saturate(xv[i] / scale, zp, 0.f, 255.f);
    if (out[1]) *(float *)out[1]->data = scale;
    if (out[2]) *(uint8_t *)out[2]->data = (uint8_t)zp;
    return TCI_OK;
}

/* ---- roles in the GPU's emulation of a pair (src/graph/passes/qdq.c) ---- */

static void quant_pattern_common(const ir_node *node, op_pattern_kind kind, op_pattern *out) {
    const quant_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *scale = node->inputs[1];
    memset(out, 0, sizeof *out);
    out->kind = OP_PATTERN_NONE;
    if (p->block_size || x->rank < 0 || scale->rank < 0) return;
    int64_t count = 1;
    for (int d = 0; d < scale->rank; d++) count *= scale->dims[d];
    out->axis = -1;
    if (count != 1 && op_normalize_axis(node, p->axis, x->rank, &out->axis) != TCI_OK) return;
    out->kind = kind;
    out->rank = x->rank;
}

static void quantize_pattern(const ir_node *node, op_pattern *out) {
    quant_pattern_common(node, OP_PATTERN_QUANTIZE, out);
}
static void dequantize_pattern(const ir_node *node, op_pattern *out) {
    quant_pattern_common(node, OP_PATTERN_DEQUANTIZE, out);
}

static const int quant_versions[] = {10, 13, 19, 21, 23, 24, 25, 28, 0};

OP_DESC_PATTERN(quantize_desc, "QuantizeLinear", quant_versions, quantize_parse, quantize_infer,
                quantize_forward, 0, NULL, quantize_pattern);
OP_DESC_PATTERN(dequantize_desc, "DequantizeLinear", quant_versions, dequantize_parse,
                dequantize_infer, dequantize_forward, 0, NULL, dequantize_pattern);
OP_DESC(dynamic_quantize_desc, "DynamicQuantizeLinear", OP_VERSIONS(11), dynamic_quantize_parse,
        dynamic_quantize_infer, dynamic_quantize_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_quant_ops[] = {&quantize_desc, &dequantize_desc,
                                          &dynamic_quantize_desc, NULL};
