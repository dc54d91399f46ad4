/* Op family 'sdpa': ONNX's own Attention (opsets 23, 24, 25), scaled dot-product attention on the
 * fp32 reference. Per (batch, query head): scores = (Q sqrt(scale)) (K sqrt(scale))^T over the
 * past and new keys, softcap, plus the bias of the mask, the causal frontier, the sliding window
 * and the padding of nonpad_kv_seqlen, softmax (a row whose bias is -inf everywhere is zeros),
 * times V. Grouped-query heads share K/V heads (query head h reads K/V head h / (q_heads /
 * kv_heads)). On the GPU it is the fused attention step (attention.c's PLAN_STEP_ATTENTION) where
 * its parameters are what that step computes, and the unfused steps of sdpa_unfused.c elsewhere. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/sdpa.h"

enum { IN_Q = SDPA_IN_Q, IN_K, IN_V, IN_MASK, IN_PAST_K, IN_PAST_V, IN_NONPAD };
enum { OUT_Y = SDPA_OUT_Y, OUT_PRESENT_K, OUT_PRESENT_V, OUT_QK };
enum { QK_RAW = SDPA_QK_RAW, QK_SOFTCAPPED, QK_BIASED, QK_SOFTMAX };

static tci_status sdpa_parse(ir_node *node, mem_arena *arena) {
    const int v = node->since_version;
    TRY_STATUS(op_check_arity(node, 3, v >= 24 ? 7 : 6, 1, 4));
    static const char *const known_v23[] = {"is_causal", "kv_num_heads", "q_num_heads",
                                            "qk_matmul_output_mode", "scale", "softcap",
                                            "softmax_precision", NULL};
    static const char *const known_v25[] = {"is_causal", "kv_num_heads", "q_num_heads",
                                            "qk_matmul_output_mode", "scale", "softcap",
                                            "softmax_precision", "left_window_size",
                                            "right_window_size", NULL};
    TRY_STATUS(ir_check_attrs(node, v >= 25 ? known_v25 : known_v23));
    OP_ALLOC_PARAMS(node, arena, sdpa_params, p);
    TRY_STATUS(op_read_flag(node, "is_causal", 0, &p->causal));
    TRY_STATUS(ir_attr_int(node, "q_num_heads", 0, &p->q_heads));
    TRY_STATUS(ir_attr_int(node, "kv_num_heads", 0, &p->kv_heads));
    static const char *const head_attrs[] = {"q_num_heads", "kv_num_heads"};
    for (int i = 0; i < 2; i++) {
        int64_t h = i ? p->kv_heads : p->q_heads;
        if (ir_node_attr(node, head_attrs[i]) && h < 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s is %lld; must be >= 1",
                                 head_attrs[i], (long long)h);
    }
    p->has_scale = ir_node_attr(node, "scale") != NULL;
    TRY_STATUS(ir_attr_float(node, "scale", 0.0f, &p->scale));
    if (p->has_scale && !(p->scale >= 0.0f && isfinite(p->scale)))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "scale is %g; must be finite and >= 0 (Q and K are each scaled by "
                             "its square root)",
                             (double)p->scale);
    TRY_STATUS(ir_attr_float(node, "softcap", 0.0f, &p->softcap));
    if (!(p->softcap >= 0.0f && isfinite(p->softcap)))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "softcap is %g; must be finite and >= 0 (0: none)",
                             (double)p->softcap);
    int64_t mode;
    TRY_STATUS(ir_attr_int(node, "qk_matmul_output_mode", QK_RAW, &mode));
    if (mode < QK_RAW || mode > QK_SOFTMAX)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "qk_matmul_output_mode is %lld; must be 0, 1, 2 or 3",
                             (long long)mode);
    p->qk_mode = (int)mode;
    int64_t precision;
    TRY_STATUS(ir_attr_int(node, "softmax_precision", TCI_DTYPE_FLOAT, &precision));
    if (precision != TCI_DTYPE_FLOAT && precision != TCI_DTYPE_FLOAT16 &&
        precision != TCI_DTYPE_DOUBLE && precision != TCI_DTYPE_BFLOAT16)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "softmax_precision is %lld; must be 1 (float), 10 (float16), 11 "
                             "(double) or 16 (bfloat16)",
                             (long long)precision);
    p->softmax_dtype = (tci_dtype)precision;
    TRY_STATUS(ir_attr_int(node, "left_window_size", -1, &p->left));
    TRY_STATUS(ir_attr_int(node, "right_window_size", -1, &p->right));
    if (p->left < -1 || p->right < -1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s is %lld; must be -1 (unbounded) or >= 0",
                             p->left < -1 ? "left_window_size" : "right_window_size",
                             (long long)(p->left < -1 ? p->left : p->right));
    const bool past_k = node->num_inputs > IN_PAST_K && node->inputs[IN_PAST_K];
    const bool past_v = node->num_inputs > IN_PAST_V && node->inputs[IN_PAST_V];
    if (past_k != past_v)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "past_key and past_value must be given together");
    const bool nonpad = node->num_inputs > IN_NONPAD && node->inputs[IN_NONPAD];
    const bool present = (node->num_outputs > OUT_PRESENT_K && node->outputs[OUT_PRESENT_K]) ||
                         (node->num_outputs > OUT_PRESENT_V && node->outputs[OUT_PRESENT_V]);
    if (nonpad && (past_k || present))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "nonpad_kv_seqlen (an external cache) does not go with %s",
                             past_k ? "past_key/past_value" : "present_key/present_value");
    return TCI_OK;
}

static bool differ(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

/* hidden / heads, -1 when hidden is unknown; an error when heads does not divide it. */
static tci_status split_hidden(const ir_node *node, const char *what, int64_t hidden,
                               int64_t heads, const char *attr, int64_t *out) {
    if (hidden >= 0 && hidden % heads)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s's hidden size %lld is not a multiple of %s %lld", what,
                             (long long)hidden, attr, (long long)heads);
    *out = hidden >= 0 ? hidden / heads : -1;
    return TCI_OK;
}

/* Checks a past state: (batch, kv_heads, past, head). */
static tci_status check_past(const ir_node *node, const char *what, const tci_tensor *t,
                             const sdpa_geom *g, int64_t head) {
    if (t->rank < 0) return TCI_OK;
    const int64_t want[4] = {g->batch, g->kv_heads, -1, head};
    bool ok = t->rank == 4;
    for (int d = 0; ok && d < 4; d++) ok = !differ(t->dims[d], want[d]);
    if (ok) return TCI_OK;
    char ts[128];
    return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                         "%s has shape %s; expected (batch %lld, kv heads %lld, past, head size "
                         "%lld)",
                         what, ir_format_dims(t->rank, t->dims, ts, sizeof ts),
                         (long long)g->batch, (long long)g->kv_heads, (long long)head);
}

tci_status layer_sdpa_geometry(const ir_node *node, const tci_tensor *const *in, sdpa_geom *g) {
    const sdpa_params *p = node->params;
    const tci_tensor *q = in[IN_Q], *k = in[IN_K], *v = in[IN_V];
    if (q->rank != 3 && q->rank != 4)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "Q has rank %d; expected 4 (batch, heads, seq, head size) or 3 "
                             "(batch, seq, heads * head size)",
                             q->rank);
    if (k->rank != q->rank || v->rank != q->rank)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "Q, K and V have ranks %d, %d and %d; expected all 3 or all 4",
                             q->rank, k->rank, v->rank);
    g->rank = q->rank;
    g->batch = q->dims[0];
    int64_t k_head = -1, v_heads = -1, v_len = -1;
    if (q->rank == 4) {
        if (node->since_version >= 25 && (p->q_heads || p->kv_heads))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "q_num_heads and kv_num_heads are for 3-D Q, K and V only");
        g->q_heads = q->dims[1];
        g->q_len = q->dims[2];
        g->head = q->dims[3];
        g->kv_heads = k->dims[1];
        g->kv_len = k->dims[2];
        k_head = k->dims[3];
        v_heads = v->dims[1];
        v_len = v->dims[2];
        g->v_head = v->dims[3];
        if ((p->q_heads && differ(p->q_heads, g->q_heads)) ||
            (p->kv_heads && differ(p->kv_heads, g->kv_heads)))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "q_num_heads %lld / kv_num_heads %lld differ from the heads of "
                                 "the 4-D Q (%lld) and K (%lld)",
                                 (long long)p->q_heads, (long long)p->kv_heads,
                                 (long long)g->q_heads, (long long)g->kv_heads);
        if (differ(v_heads, g->kv_heads))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "K has %lld heads but V %lld",
                                 (long long)g->kv_heads, (long long)v_heads);
    } else {
        if (!p->q_heads || !p->kv_heads)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "3-D Q, K and V need the attributes q_num_heads and "
                                 "kv_num_heads");
        g->q_heads = p->q_heads;
        g->kv_heads = p->kv_heads;
        g->q_len = q->dims[1];
        g->kv_len = k->dims[1];
        v_len = v->dims[1];
        TRY_STATUS(split_hidden(node, "Q", q->dims[2], p->q_heads, "q_num_heads", &g->head));
        TRY_STATUS(split_hidden(node, "K", k->dims[2], p->kv_heads, "kv_num_heads", &k_head));
        TRY_STATUS(split_hidden(node, "V", v->dims[2], p->kv_heads, "kv_num_heads", &g->v_head));
    }
    if (differ(g->batch, k->dims[0]) || differ(g->batch, v->dims[0]))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "Q, K and V have batches %lld, %lld and %lld", (long long)g->batch,
                             (long long)k->dims[0], (long long)v->dims[0]);
    if (differ(g->head, k_head))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "Q's head size %lld differs from K's %lld", (long long)g->head,
                             (long long)k_head);
    if (g->head == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "Q and K have a head size of 0");
    if (differ(g->kv_len, v_len))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "K holds %lld keys but V %lld values", (long long)g->kv_len,
                             (long long)v_len);
    if (g->q_heads > 0 && g->kv_heads > 0 && g->q_heads % g->kv_heads)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%lld query heads are not a multiple of %lld K/V heads",
                             (long long)g->q_heads, (long long)g->kv_heads);
    if (g->kv_heads == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "K and V have no head");
    g->past = 0;
    const tci_tensor *pk = node->num_inputs > IN_PAST_K ? in[IN_PAST_K] : NULL;
    const tci_tensor *pv = node->num_inputs > IN_PAST_V ? in[IN_PAST_V] : NULL;
    if (pk) {
        TRY_STATUS(check_past(node, "past_key", pk, g, g->head));
        TRY_STATUS(check_past(node, "past_value", pv, g, g->v_head));
        g->past = pk->rank == 4 ? pk->dims[2] : -1;
        int64_t pv_len = pv->rank == 4 ? pv->dims[2] : -1;
        if (differ(g->past, pv_len))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "past_key holds %lld positions but past_value %lld",
                                 (long long)g->past, (long long)pv_len);
    }
    g->total = g->past >= 0 && g->kv_len >= 0 ? g->past + g->kv_len : -1;
    if (g->total == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "there is no key to attend (K and "
                                                          "past_key hold 0 positions)");
    return TCI_OK;
}

/* attn_mask: broadcast to (batch, q_heads, q_len, total) right-aligned, except that its last dim
 * may be shorter (the keys past it are masked). */
static tci_status check_mask(const ir_node *node, const tci_tensor *m, const sdpa_geom *g) {
    if (m->rank < 0) return TCI_OK;
    const int64_t target[4] = {g->batch, g->q_heads, g->q_len, g->total};
    bool ok = m->rank >= 1 && m->rank <= 4;
    for (int i = 0; ok && i < m->rank; i++) {
        int64_t d = m->dims[i], t = target[4 - m->rank + i];
        ok = i == m->rank - 1 ? d < 0 || t < 0 || d <= t : d == 1 || !differ(d, t);
    }
    if (ok) return TCI_OK;
    char ms[128];
    return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                         "attn_mask of shape %s does not broadcast to (batch %lld, q heads %lld, "
                         "q seq %lld, at most %lld keys)",
                         ir_format_dims(m->rank, m->dims, ms, sizeof ms), (long long)g->batch,
                         (long long)g->q_heads, (long long)g->q_len, (long long)g->total);
}

static void set_dims4(tci_tensor *t, tci_dtype dtype, int64_t a, int64_t b, int64_t c,
                      int64_t d) {
    op_set_unknown(t, dtype);
    t->rank = 4;
    t->dims[0] = a;
    t->dims[1] = b;
    t->dims[2] = c;
    t->dims[3] = d;
}

static tci_status sdpa_infer(const ir_node *node, const tci_tensor *const *in,
                             tci_tensor *const *out) {
    const tci_tensor *q = in[IN_Q], *k = in[IN_K], *v = in[IN_V];
    const tci_tensor *mask = node->num_inputs > IN_MASK ? in[IN_MASK] : NULL;
    const tci_tensor *nonpad = node->num_inputs > IN_NONPAD ? in[IN_NONPAD] : NULL;
    for (int i = IN_Q; i <= IN_PAST_V && i < node->num_inputs; i++)
        if (in[i] && i != IN_MASK) TRY_STATUS(op_check_dtype(node, in[i], i, op_float_types));
    if (mask && mask->dtype != TCI_DTYPE_BOOL && mask->dtype != TCI_DTYPE_UNDEFINED &&
        mask->dtype != q->dtype)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attn_mask has dtype %s; it must be bool (keys to keep) or Q's "
                             "%s (added to the scores)",
                             tci_dtype_name(mask->dtype), tci_dtype_name(q->dtype));
    if (nonpad)
        TRY_STATUS(
            op_check_dtype(node, nonpad, IN_NONPAD, (const tci_dtype[]){TCI_DTYPE_INT64, 0}));
    for (int o = 0; o < node->num_outputs; o++)
        if (out[o]) op_set_unknown(out[o], o == OUT_PRESENT_V ? v->dtype : q->dtype);
    if (q->rank < 0 || k->rank < 0 || v->rank < 0) return TCI_OK;
    sdpa_geom g;
    TRY_STATUS(layer_sdpa_geometry(node, in, &g));
    if (mask) TRY_STATUS(check_mask(node, mask, &g));
    if (nonpad && nonpad->rank >= 0 &&
        (nonpad->rank != 1 || differ(nonpad->dims[0], g.batch))) {
        char ns[128];
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "nonpad_kv_seqlen has shape %s; expected (batch %lld)",
                             ir_format_dims(nonpad->rank, nonpad->dims, ns, sizeof ns),
                             (long long)g.batch);
    }
    tci_tensor *y = out[OUT_Y];
    if (g.rank == 4) {
        set_dims4(y, q->dtype, g.batch, g.q_heads, g.q_len, g.v_head);
    } else {
        op_set_unknown(y, q->dtype);
        y->rank = 3;
        y->dims[0] = g.batch;
        y->dims[1] = g.q_len;
        y->dims[2] = g.v_head >= 0 ? g.q_heads * g.v_head : -1;
    }
    if (node->num_outputs > OUT_PRESENT_K && out[OUT_PRESENT_K])
        set_dims4(out[OUT_PRESENT_K], k->dtype, g.batch, g.kv_heads, g.total, g.head);
    if (node->num_outputs > OUT_PRESENT_V && out[OUT_PRESENT_V])
        set_dims4(out[OUT_PRESENT_V], v->dtype, g.batch, g.kv_heads, g.total, g.v_head);
    if (node->num_outputs > OUT_QK && out[OUT_QK])
        set_dims4(out[OUT_QK], q->dtype, g.batch, g.q_heads, g.q_len, g.total);
    return TCI_OK;
}

/* ONNX scales Q and K each by sqrt(scale) (default 1/sqrt(head size)) in fp32, so the product
 * by that root's square. */
float layer_sdpa_scale(const sdpa_params *p, int64_t head) {
    const double scale = p->has_scale ? (double)p->scale : 1.0 / sqrt((double)head);
    const float root = (float)sqrt(scale);
    return root * root;
}

/* The new positions of a K or V (rank 3 or 4) appended after the past ones into present, which
 * is (batch, kv_heads, total, head). */
static void fill_present(const sdpa_geom *g, const tci_tensor *past, const tci_tensor *cur,
                         int64_t head, float *present) {
    for (int64_t b = 0; b < g->batch; b++)
        for (int64_t h = 0; h < g->kv_heads; h++) {
            float *dst = present + (b * g->kv_heads + h) * g->total * head;
            if (past)
                memcpy(dst, (const float *)past->data + (b * g->kv_heads + h) * g->past * head,
                       (size_t)(g->past * head) * sizeof *dst);
            dst += g->past * head;
            const float *src = cur->data;
            for (int64_t s = 0; s < g->kv_len; s++) {
                int64_t at = g->rank == 4 ? ((b * g->kv_heads + h) * g->kv_len + s) * head
                                          : (b * g->kv_len + s) * g->kv_heads * head + h * head;
                memcpy(dst + s * head, src + at, (size_t)head * sizeof *dst);
            }
        }
}

/* The fp32 value x takes in dtype (the softmax's precision) and back. */
static float in_precision(tci_dtype dtype, float x) {
    if (dtype == TCI_DTYPE_FLOAT16) return half_to_float(float_to_half(x));
    if (dtype == TCI_DTYPE_BFLOAT16) return bfloat16_to_float(float_to_bfloat16(x));
    return x;
}

/* What one (batch, query head) pass reads besides the scores. */
typedef struct sdpa_row_ctx {
    const sdpa_params *p;
    const sdpa_geom *g;
    const tci_tensor *mask;
    int64_t mask_strides[4]; /* along (batch, q heads, q seq, keys); 0 where it broadcasts */
    int64_t mask_len;        /* keys the mask covers; the rest are masked */
    const int64_t *nonpad;   /* per batch, or NULL */
} sdpa_row_ctx;

/* The additive bias of query i of (b, h) over the keys (-inf where masked); whether every key is
 * masked (the row is then zeros). */
static bool row_bias(const sdpa_row_ctx *c, int64_t b, int64_t h, int64_t i, float *bias) {
    const sdpa_params *p = c->p;
    const sdpa_geom *g = c->g;
    /* the count of valid keys before the query block: the past, or the external cache's */
    int64_t offset = g->past;
    if (c->nonpad) offset = c->nonpad[b] - g->q_len;
    const int64_t at = b * c->mask_strides[0] + h * c->mask_strides[1] + i * c->mask_strides[2];
    bool all_masked = true;
    for (int64_t j = 0; j < g->total; j++) {
        float x = 0.0f;
        if (c->mask) {
            if (j >= c->mask_len) x = -INFINITY;
            else if (c->mask->dtype == TCI_DTYPE_BOOL)
                x = ((const uint8_t *)c->mask->data)[at + j * c->mask_strides[3]] ? 0.0f
                                                                                  : -INFINITY;
            else x = ((const float *)c->mask->data)[at + j * c->mask_strides[3]];
        }
        /* each constraint adds -inf, as ONNX composes them (so a +inf mask value meets it as
         * NaN, not as a kept key) */
        const int64_t diff = i + offset - j;
        if (p->causal && diff < 0) x += -INFINITY;
        if (p->left >= 0 && diff > p->left) x += -INFINITY;
        if (p->right >= 0 && -diff > p->right) x += -INFINITY;
        if (c->nonpad && j >= c->nonpad[b]) x += -INFINITY;
        bias[j] = x;
        if (x != -INFINITY) all_masked = false;
    }
    return all_masked;
}

/* Softmax of x in place in double (its inputs and results rounded to softmax_precision); an
 * all -inf row is zeros, a NaN anywhere makes the row NaN as the max does. */
static void softmax_row(tci_dtype precision, float *x, int64_t n) {
    double max = -INFINITY;
    bool nan = false;
    for (int64_t j = 0; j < n; j++) {
        x[j] = in_precision(precision, x[j]);
        if (isnan(x[j])) nan = true;
        else if (x[j] > max) max = x[j];
    }
    if (nan) max = NAN;
    else if (max == -INFINITY) max = 0.0; /* every key masked: exp(-inf) = 0 everywhere */
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) sum += exp((double)x[j] - max);
    if (sum == 0.0) sum = 1.0;
    for (int64_t j = 0; j < n; j++)
        x[j] = in_precision(precision, (float)(exp((double)x[j] - max) / sum));
}

static tci_status sdpa_forward(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const sdpa_params *p = node->params;
    const tci_tensor *q = in[IN_Q], *k = in[IN_K], *v = in[IN_V];
    const tci_tensor *mask = node->num_inputs > IN_MASK ? in[IN_MASK] : NULL;
    const tci_tensor *past_k = node->num_inputs > IN_PAST_K ? in[IN_PAST_K] : NULL;
    const tci_tensor *past_v = node->num_inputs > IN_PAST_V ? in[IN_PAST_V] : NULL;
    const tci_tensor *nonpad = node->num_inputs > IN_NONPAD ? in[IN_NONPAD] : NULL;
    tci_tensor *pres_k = node->num_outputs > OUT_PRESENT_K ? out[OUT_PRESENT_K] : NULL;
    tci_tensor *pres_v = node->num_outputs > OUT_PRESENT_V ? out[OUT_PRESENT_V] : NULL;
    tci_tensor *qk_out = node->num_outputs > OUT_QK ? out[OUT_QK] : NULL;
    sdpa_geom g;
    TRY_STATUS(layer_sdpa_geometry(node, in, &g));
    const int64_t T = g.total, D = g.head, Dv = g.v_head, Sq = g.q_len;
    TRY_STATUS(op_check_blas_dims(node, Sq, T, D));
    TRY_STATUS(op_check_blas_dims(node, Sq, Dv, T));
    sdpa_row_ctx c = {.p = p, .g = &g, .mask = mask};
    if (nonpad) {
        c.nonpad = nonpad->data;
        for (int64_t b = 0; b < g.batch; b++)
            if (c.nonpad[b] < 0 || c.nonpad[b] > T)
                return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                     "nonpad_kv_seqlen[%lld] is %lld; must be within 0..%lld "
                                     "(K's positions)",
                                     (long long)b, (long long)c.nonpad[b], (long long)T);
    }
    if (mask) {
        int64_t st[TCI_MAX_RANK];
        op_strides(mask->rank, mask->dims, st);
        for (int d = 0; d < 4; d++) {
            int i = d - (4 - mask->rank);
            c.mask_strides[d] = i >= 0 && (mask->dims[i] != 1 || d == 3) ? st[i] : 0;
        }
        c.mask_len = mask->dims[mask->rank - 1];
    }
    tci_status st = TCI_OK;
    /* the present states are the outputs when asked for, else scratch (never malloc(0)) */
    const size_t fs = sizeof(float);
    float *keys = pres_k ? pres_k->data : malloc((size_t)(g.batch * g.kv_heads * T * D) * fs + 1);
    float *vals = pres_v ? pres_v->data : malloc((size_t)(g.batch * g.kv_heads * T * Dv) * fs + 1);
    float *scores = malloc((size_t)(Sq * T) * fs + 1);
    float *bias = malloc((size_t)T * sizeof *bias);
    if (!keys || !vals || !scores || !bias) {
        st = ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for the attention");
        goto done;
    }
    fill_present(&g, past_k, k, D, keys);
    fill_present(&g, past_v, v, Dv, vals);
    const float alpha = layer_sdpa_scale(p, D);
    const int64_t group = g.q_heads / g.kv_heads;
    const int64_t q_ld = g.rank == 4 ? D : g.q_heads * D;
    const int64_t y_ld = g.rank == 4 ? Dv : g.q_heads * Dv;
    const float *qd = q->data;
    float *y = out[OUT_Y]->data;
    for (int64_t b = 0; b < g.batch && Sq > 0; b++)
        for (int64_t h = 0; h < g.q_heads; h++) {
            const int64_t kvh = h / group;
            const float *qv = qd + (g.rank == 4 ? (b * g.q_heads + h) * Sq * D
                                                : b * Sq * g.q_heads * D + h * D);
            float *yv = y + (g.rank == 4 ? (b * g.q_heads + h) * Sq * Dv
                                         : b * Sq * g.q_heads * Dv + h * Dv);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Sq, (int)T, (int)D, alpha,
                        qv, (int)q_ld, keys + (b * g.kv_heads + kvh) * T * D, (int)D, 0.0f,
                        scores, (int)T);
            for (int64_t i = 0; i < Sq; i++) {
                float *row = scores + i * T;
                float *qk = qk_out ? (float *)qk_out->data + ((b * g.q_heads + h) * Sq + i) * T
                                   : NULL;
                /* mode 0 is the product before softcap, as the spec and its function body say
                 * (onnx 1.23's reference op returns it softcapped; no node case has both) */
                if (qk && p->qk_mode == QK_RAW) memcpy(qk, row, (size_t)T * sizeof *qk);
                if (p->softcap > 0.0f)
                    for (int64_t j = 0; j < T; j++)
                        row[j] = p->softcap * tanhf(row[j] / p->softcap);
                if (qk && p->qk_mode == QK_SOFTCAPPED) memcpy(qk, row, (size_t)T * sizeof *qk);
                const bool all_masked = row_bias(&c, b, h, i, bias);
                for (int64_t j = 0; j < T; j++) row[j] += bias[j];
                if (qk && p->qk_mode == QK_BIASED) memcpy(qk, row, (size_t)T * sizeof *qk);
                softmax_row(p->softmax_dtype, row, T);
                /* ONNX decides a fully masked row on the bias, not on the scores */
                if (all_masked) memset(row, 0, (size_t)T * sizeof *row);
                if (qk && p->qk_mode == QK_SOFTMAX) memcpy(qk, row, (size_t)T * sizeof *qk);
            }
            if (Dv > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Sq, (int)Dv, (int)T,
                            1.0f, scores, (int)T, vals + (b * g.kv_heads + kvh) * T * Dv,
                            (int)Dv, 0.0f, yv, (int)y_ld);
        }
done:
    if (!pres_k) free(keys);
    if (!pres_v) free(vals);
    free(scores);
    free(bias);
    return st;
}

/* Element strides of a 3-D (batch, seq, heads * head) or 4-D (batch, heads, seq, head) operand
 * along (batch, head, position, head). */
static void operand_strides(int rank, int64_t heads, int64_t len, int64_t head, int64_t *st) {
    st[0] = heads * len * head;
    st[1] = rank == 4 ? len * head : head;
    st[2] = rank == 4 ? head : heads * head;
    st[3] = 1;
}

static const ir_tensor *input_at(const ir_node *node, int i) {
    return node->num_inputs > i ? node->inputs[i] : NULL;
}

static bool output_read(plan_builder *b, const ir_node *node, int o) {
    return node->num_outputs > o && node->outputs[o] && lower_is_read(b, node->outputs[o]);
}

/* What keeps the node off the fused attention step (NULL: nothing), written into why. The step
 * computes softmax(scale Q K^T + mask) V per (batch, head) in fp16 or bf16 with one head count
 * and one head size for Q, K and V, the causal frontier j <= i (ONNX's without a past or an
 * external cache), a bool mask as keep (a row that keeps no key is zeros, as ONNX's) or a float
 * one added, every key covered. A float mask is stored in fp16 like any activation: a fill below
 * -65504 (torch.finfo.min) becomes -inf there, so a row masked only by such a fill is zeros on
 * the GPU where ONNX's fp32 scores tie and give the mean of V. */
static const char *gpu_refusal(plan_builder *b, const ir_node *node, const sdpa_geom *g,
                               const ir_tensor *mask, char *why, size_t size) {
    const sdpa_params *p = node->params;
    if (lower_float_dtype(b) == TCI_DTYPE_FLOAT) return "fp32 storage (the kernel has fp16 and bf16)";
    if (g->q_heads != g->kv_heads) return "grouped-query heads (q heads != kv heads)";
    if (g->head != g->v_head) return "a head size of V other than Q's";
    if (!plan_attention_head_dim_ok(g->head)) {
        snprintf(why, size, "head size %lld (the kernel has 32, 64, 80, 96, 128)",
                 (long long)g->head);
        return why;
    }
    if (input_at(node, IN_PAST_K)) return "past_key/past_value";
    if (input_at(node, IN_NONPAD)) return "nonpad_kv_seqlen";
    if (output_read(b, node, OUT_PRESENT_K) || output_read(b, node, OUT_PRESENT_V))
        return "the present_key/present_value outputs";
    if (output_read(b, node, OUT_QK)) return "the qk_matmul_output output";
    if (p->softcap > 0.0f) return "softcap";
    if (p->softmax_dtype != TCI_DTYPE_FLOAT) return "a softmax_precision other than float";
    if (p->left >= 0 || p->right >= 0) return "a sliding window";
    if (mask && mask->dims[mask->rank - 1] != g->total)
        return "an attn_mask shorter than the keys";
    return NULL;
}

/* One PLAN_STEP_ATTENTION reading Q, K, V (and the mask) in place through their strides and
 * writing Y in the node's layout (3-D: heads merged), where gpu_refusal finds nothing; the
 * unfused steps (sdpa_unfused.c) elsewhere. */
static tci_status sdpa_gpu_lower(plan_builder *b, const ir_node *node) {
    const sdpa_params *p = node->params;
    const ir_tensor *q = node->inputs[IN_Q], *k = node->inputs[IN_K], *v = node->inputs[IN_V];
    const ir_tensor *mask = input_at(node, IN_MASK), *y = node->outputs[OUT_Y];
    tci_tensor views[7];
    const tci_tensor *in[7] = {0};
    for (int i = 0; i < node->num_inputs && i < 7; i++)
        if (node->inputs[i]) {
            TRY_STATUS(lower_require_known(node, node->inputs[i]));
            ir_tensor_view(node->inputs[i], &views[i]);
            in[i] = &views[i];
        }
    sdpa_geom g;
    TRY_STATUS(layer_sdpa_geometry(node, in, &g));
    char why[96];
    const char *refused = gpu_refusal(b, node, &g, mask, why, sizeof why);
    if (refused) return layer_sdpa_lower_unfused(b, node, &g, refused);
    int qi, ki, vi, mi = -1, yi;
    TRY_STATUS(lower_input(b, node, q, PLAN_LAYOUT_DENSE, &qi));
    TRY_STATUS(lower_input(b, node, k, PLAN_LAYOUT_DENSE, &ki));
    TRY_STATUS(lower_input(b, node, v, PLAN_LAYOUT_DENSE, &vi));
    if (mask) TRY_STATUS(lower_input(b, node, mask, PLAN_LAYOUT_DENSE, &mi));
    TRY_STATUS(lower_output(b, node, y, &yi));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_ATTENTION, node, NULL, &s));
    plan_attention *pa = &s->u.attention;
    pa->batch = g.batch;
    pa->heads = g.q_heads;
    pa->q_len = g.q_len;
    pa->kv_len = g.kv_len;
    pa->head_dim = g.head;
    operand_strides(g.rank, g.q_heads, g.q_len, g.head, pa->q_strides);
    operand_strides(g.rank, g.kv_heads, g.kv_len, g.head, pa->k_strides);
    operand_strides(g.rank, g.kv_heads, g.kv_len, g.head, pa->v_strides);
    operand_strides(g.rank, g.q_heads, g.q_len, g.head, pa->y_strides);
    if (mask) {
        /* right-aligned to (batch, heads, queries, keys), 0 where it broadcasts */
        int64_t st[TCI_MAX_RANK], *out = mask->dtype == TCI_DTYPE_BOOL ? pa->keep_strides
                                                                       : pa->mask_strides;
        const int64_t full[4] = {g.batch, g.q_heads, g.q_len, g.total};
        op_strides(mask->rank, mask->dims, st);
        for (int d = 0; d < 4; d++) {
            int i = d - (4 - mask->rank);
            out[d] = i >= 0 && (mask->dims[i] != 1 || full[d] == 1) ? st[i] : 0;
        }
        pa->has_keep = mask->dtype == TCI_DTYPE_BOOL;
        pa->has_mask = !pa->has_keep;
    }
    pa->scale = layer_sdpa_scale(p, g.head);
    pa->causal = p->causal;
    pa->keep_row_mean = false; /* ONNX: a row that keeps no key is zeros */
    lower_step_io(s, 4, (int[]){qi, ki, vi, mi}, 1, &yi);
    return TCI_OK;
}

OP_DESC(sdpa_desc, "Attention", OP_VERSIONS(23, 24, 25), sdpa_parse, sdpa_infer, sdpa_forward, 0,
        sdpa_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_sdpa_ops[] = {&sdpa_desc, NULL};
