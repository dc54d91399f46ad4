/* Op family 'cast': Cast between every dtype tcinfer holds, converting as onnxruntime does on
 * x86 (float to integer truncates; NaN and out-of-range values give the integer minimum), and
 * BitCast, the same bytes seen as another type of the same width (CPU reference only). */
#include <math.h>
#include <string.h>

#include "layers/op.h"

/* ---------------------------------------------------------------------------------------------
 * Cast
 * ------------------------------------------------------------------------------------------- */

typedef struct cast_params {
    tci_dtype to;
} cast_params;

static const tci_dtype cast_types[] = {TCI_DTYPE_FLOAT, TCI_DTYPE_DOUBLE, TCI_DTYPE_FLOAT16,
                                       TCI_DTYPE_INT8,  TCI_DTYPE_UINT8,  TCI_DTYPE_INT32,
                                       TCI_DTYPE_INT64, TCI_DTYPE_BOOL,   0};

/* saturate and round_mode only change float8 results, which are refused (Cast's 'to'; CastLike's
 * target has a dtype tcinfer holds) */
static tci_status cast_parse_rounding(const ir_node *node) {
    int64_t saturate;
    const char *round_mode;
    TRY_STATUS(ir_attr_int(node, "saturate", 1, &saturate));
    TRY_STATUS(ir_attr_string(node, "round_mode", "up", &round_mode));
    if (strcmp(round_mode, "up") != 0 && strcmp(round_mode, "down") != 0 &&
        strcmp(round_mode, "nearest") != 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'round_mode' value '%s' is not one of up, down, nearest",
                             round_mode);
    return TCI_OK;
}

/* The attribute 'to' as a dtype tcinfer holds: INVALID_MODEL when absent or no ONNX type,
 * UNSUPPORTED when tcinfer does not store it. */
static tci_status cast_parse_to(ir_node *node, tci_dtype *out) {
    if (!ir_node_attr(node, "to"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'to' is required");
    int64_t to;
    TRY_STATUS(ir_attr_int(node, "to", 0, &to));
    if (!op_onnx_type_name(to))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'to' value %lld is not an ONNX data type", (long long)to);
    bool held = false;
    for (const tci_dtype *d = cast_types; *d; d++)
        if ((int64_t)*d == to) held = true;
    if (!held)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute 'to' value %lld (%s) is not supported", (long long)to,
                             op_onnx_type_name(to));
    *out = (tci_dtype)to;
    return TCI_OK;
}

static tci_status cast_parse(ir_node *node, mem_arena *arena) {
    static const char *const known_v6[] = {"to", NULL};
    static const char *const known_v19[] = {"to", "saturate", NULL};
    static const char *const known_v24[] = {"to", "saturate", "round_mode", NULL};
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 24   ? known_v24
                                 : node->since_version >= 19 ? known_v19
                                                             : known_v6));
    tci_dtype to;
    TRY_STATUS(cast_parse_to(node, &to));
    TRY_STATUS(cast_parse_rounding(node));
    OP_ALLOC_PARAMS(node, arena, cast_params, p);
    p->to = to;
    return TCI_OK;
}

static tci_status cast_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const cast_params *p = node->params;
    TRY_STATUS(op_check_dtype(node, in[0], 0, cast_types));
    op_same_shape(out[0], in[0]);
    out[0]->dtype = p->to;
    return TCI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * BitCast: the input's bytes (little endian, as tcinfer stores them) read as type 'to'
 * ------------------------------------------------------------------------------------------- */

static tci_status bit_cast_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"to", NULL};
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    TRY_STATUS(ir_check_attrs(node, known));
    tci_dtype to;
    TRY_STATUS(cast_parse_to(node, &to));
    OP_ALLOC_PARAMS(node, arena, cast_params, p);
    p->to = to;
    return TCI_OK;
}

static tci_status bit_cast_infer(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const cast_params *p = node->params;
    TRY_STATUS(op_check_dtype(node, in[0], 0, cast_types));
    if (in[0]->dtype != TCI_DTYPE_UNDEFINED &&
        tci_dtype_size(in[0]->dtype) != tci_dtype_size(p->to))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "BitCast keeps the bit width: input %s has %zu bits, 'to' %s %zu",
                             tci_dtype_name(in[0]->dtype), tci_dtype_size(in[0]->dtype) * 8,
                             tci_dtype_name(p->to), tci_dtype_size(p->to) * 8);
    op_same_shape(out[0], in[0]);
    out[0]->dtype = p->to;
    return TCI_OK;
}

static tci_status bit_cast_forward(const ir_node *node, const tci_tensor *const *in,
                                   tci_tensor *const *out) {
    (void)node;
    int64_t n = op_count(in[0]);
    if (n) memcpy(out[0]->data, in[0]->data, (size_t)n * tci_dtype_size(in[0]->dtype));
    return TCI_OK;
}

/* CastLike: Cast to the dtype of input 1 (whose values are not read). */
static tci_status cast_like_parse(ir_node *node, mem_arena *arena) {
    (void)arena;
    static const char *const known_v15[] = {NULL};
    static const char *const known_v19[] = {"saturate", NULL};
    static const char *const known_v25[] = {"saturate", "round_mode", NULL};
    TRY_STATUS(op_check_arity(node, 2, 2, 1, 1));
    TRY_STATUS(ir_check_attrs(node, node->since_version >= 25   ? known_v25
                                 : node->since_version >= 19 ? known_v19
                                                             : known_v15));
    return cast_parse_rounding(node);
}

static tci_status cast_like_infer(const ir_node *node, const tci_tensor *const *in,
                                  tci_tensor *const *out) {
    TRY_STATUS(op_check_dtype(node, in[0], 0, cast_types));
    TRY_STATUS(op_check_dtype(node, in[1], 1, cast_types));
    op_same_shape(out[0], in[0]);
    out[0]->dtype = in[1]->dtype;
    return TCI_OK;
}

static bool is_float_type(tci_dtype d) {
    return d == TCI_DTYPE_FLOAT || d == TCI_DTYPE_DOUBLE || d == TCI_DTYPE_FLOAT16;
}

/* Loads n elements from src + start as double (float sources) or int64 (integer and bool
 * sources: int64 to float must round once, not through double). */
static void cast_load(tci_dtype dtype, const void *src, int64_t start, int64_t n, double *f,
                      int64_t *i) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT:
        for (int64_t k = 0; k < n; k++) f[k] = ((const float *)src)[start + k];
        break;
    case TCI_DTYPE_DOUBLE:
        for (int64_t k = 0; k < n; k++) f[k] = ((const double *)src)[start + k];
        break;
    case TCI_DTYPE_FLOAT16:
        for (int64_t k = 0; k < n; k++) f[k] = half_to_float(((const uint16_t *)src)[start + k]);
        break;
    case TCI_DTYPE_INT8:
        for (int64_t k = 0; k < n; k++) i[k] = ((const int8_t *)src)[start + k];
        break;
    case TCI_DTYPE_UINT8:
        for (int64_t k = 0; k < n; k++) i[k] = ((const uint8_t *)src)[start + k];
        break;
    case TCI_DTYPE_BOOL:
        for (int64_t k = 0; k < n; k++) i[k] = ((const uint8_t *)src)[start + k] != 0;
        break;
    case TCI_DTYPE_INT32:
        for (int64_t k = 0; k < n; k++) i[k] = ((const int32_t *)src)[start + k];
        break;
    case TCI_DTYPE_INT64:
        for (int64_t k = 0; k < n; k++) i[k] = ((const int64_t *)src)[start + k];
        break;
    default: break;
    }
}

static void cast_store_float(tci_dtype dtype, void *dst, int64_t start, int64_t n,
                             const double *f) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT:
        for (int64_t k = 0; k < n; k++) ((float *)dst)[start + k] = (float)f[k];
        break;
    case TCI_DTYPE_DOUBLE:
        for (int64_t k = 0; k < n; k++) ((double *)dst)[start + k] = f[k];
        break;
    default:
        for (int64_t k = 0; k < n; k++) op_store_number(dtype, dst, start + k, f[k]);
        break;
    }
}

/* Integers narrow by keeping the low bits (two's complement), as ONNX specifies. */
static void cast_store_int(tci_dtype dtype, void *dst, int64_t start, int64_t n,
                           const int64_t *v) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT:
        for (int64_t k = 0; k < n; k++) ((float *)dst)[start + k] = (float)v[k];
        break;
    case TCI_DTYPE_DOUBLE:
        for (int64_t k = 0; k < n; k++) ((double *)dst)[start + k] = (double)v[k];
        break;
    case TCI_DTYPE_FLOAT16:
        for (int64_t k = 0; k < n; k++)
            ((uint16_t *)dst)[start + k] = float_to_half((float)v[k]);
        break;
    case TCI_DTYPE_INT8:
        for (int64_t k = 0; k < n; k++) ((int8_t *)dst)[start + k] = (int8_t)(uint8_t)v[k];
        break;
    case TCI_DTYPE_UINT8:
        for (int64_t k = 0; k < n; k++) ((uint8_t *)dst)[start + k] = (uint8_t)v[k];
        break;
    case TCI_DTYPE_BOOL:
        for (int64_t k = 0; k < n; k++) ((uint8_t *)dst)[start + k] = v[k] != 0;
        break;
    case TCI_DTYPE_INT32:
        for (int64_t k = 0; k < n; k++) ((int32_t *)dst)[start + k] = (int32_t)(uint32_t)v[k];
        break;
    case TCI_DTYPE_INT64:
        for (int64_t k = 0; k < n; k++) ((int64_t *)dst)[start + k] = v[k];
        break;
    default: break;
    }
}

static tci_status cast_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    (void)node;
    const tci_tensor *x = in[0];
    tci_tensor *y = out[0];
    const int64_t n = op_count(x);
    if (x->dtype == y->dtype) {
        if (n) memcpy(y->data, x->data, (size_t)n * tci_dtype_size(x->dtype));
        return TCI_OK;
    }
    /* blocks keep the per-dtype switches out of the element loops */
    enum { BLOCK = 256 };
    double f[BLOCK];
    int64_t v[BLOCK];
    bool from_float = is_float_type(x->dtype);
    for (int64_t start = 0; start < n; start += BLOCK) {
        int64_t len = n - start < BLOCK ? n - start : BLOCK;
        cast_load(x->dtype, x->data, start, len, f, v);
        if (from_float)
            cast_store_float(y->dtype, y->data, start, len, f);
        else
            cast_store_int(y->dtype, y->data, start, len, v);
    }
    return TCI_OK;
}

/* ---- GPU lowering ---- */

static tci_status cast_gpu_lower(plan_builder *b, const ir_node *node) {
    const ir_tensor *x = node->inputs[0], *y = node->outputs[0];
    int xi, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    tci_dtype to = TCI_DTYPE_UNDEFINED;
    TRY_STATUS(lower_device_dtype(b, node, y->dtype, &to));
    if (to == lower_tensor(b, xi)->dtype) return lower_alias(b, node, y, xi, &yt);
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_CAST, node, NULL, &s));
    s->u.cast.count = lower_count(y);
    lower_step_io(s, 1, &xi, 1, &yt);
    return TCI_OK;
}

static const int cast_versions[] = {6, 9, 13, 19, 21, 23, 24, 25, 28, 0};

OP_DESC(cast_desc, "Cast", cast_versions, cast_parse, cast_infer, cast_forward, 0, cast_gpu_lower,
        NULL, BINARY_NONE);

OP_DESC(cast_like_desc, "CastLike", OP_VERSIONS(15, 19, 21, 23, 24, 25), cast_like_parse,
        cast_like_infer, cast_forward, 0, cast_gpu_lower, NULL, BINARY_NONE);

OP_DESC(bit_cast_desc, "BitCast", OP_VERSIONS(26), bit_cast_parse, bit_cast_infer,
        bit_cast_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_cast_ops[] = {&cast_desc, &cast_like_desc, &bit_cast_desc, NULL};
