/* Op family 'linear_attention': the recurrent-state ops of linear-attention and state-space LLM
 * blocks (Gated DeltaNet, Mamba): CausalConvWithState (opset 27), a causal depthwise 1-D
 * convolution that carries its last k - 1 inputs between calls, and LinearAttention (opset 27),
 * the token-by-token recurrence of a (d_k x d_v) state per KV head under the linear, gated, delta
 * or gated-delta rule. Both run in fp32 as ONNX's reference does. CPU reference only (no GPU
 * path: the planner refuses them naming the node). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"
#include "util/elementwise.h"

static const tci_tensor *input_at(const ir_node *node, const tci_tensor *const *in, int i) {
    return node->num_inputs > i ? in[i] : NULL;
}

/* The present state output, NULL when the node leaves it out. */
static tci_tensor *state_output(const ir_node *node, tci_tensor *const *out) {
    return node->num_outputs > 1 ? out[1] : NULL;
}

static bool has_input(const ir_node *node, int i) {
    return node->num_inputs > i && node->inputs[i];
}

/* A known dim that is not want (also known) is an error naming the tensor. */
static tci_status check_dims(const ir_node *node, const tci_tensor *t, const char *name, int rank,
                             const int64_t *want, const char *layout) {
    if (!t || t->rank < 0) return TCI_OK;
    bool fits = t->rank == rank;
    for (int d = 0; fits && d < rank; d++)
        fits = t->dims[d] < 0 || want[d] < 0 || t->dims[d] == want[d];
    if (fits) return TCI_OK;
    char ts[128], ws[128];
    return ir_node_error(node, TCI_ERR_INVALID_MODEL, "%s has shape %s; expected %s %s", name,
                         ir_format_dims(t->rank, t->dims, ts, sizeof ts),
                         ir_format_dims(rank, want, ws, sizeof ws), layout);
}

/* ---------------------------------------------------------------------------------------------
 * CausalConvWithState: output[b, c, t] = bias[c] + sum_j weight[c, 0, j] * padded[b, c, t + j]
 * over padded = past_state (zeros without it) followed by input; present_state is padded's last
 * k - 1 positions
 * ------------------------------------------------------------------------------------------- */

typedef struct causal_conv_params {
    bool silu;
} causal_conv_params;

static tci_status causal_conv_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"activation", NULL};
    TRY_STATUS(op_check_arity(node, 2, 4, 1, 2));
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, causal_conv_params, p);
    const char *activation;
    TRY_STATUS(ir_attr_string(node, "activation", "none", &activation));
    p->silu = strcmp(activation, "silu") == 0 || strcmp(activation, "swish") == 0;
    if (!p->silu && strcmp(activation, "none") != 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'activation' is '%s'; expected 'none', 'silu' or 'swish'",
                             activation);
    return TCI_OK;
}

static tci_status causal_conv_infer(const ir_node *node, const tci_tensor *const *in,
                                    tci_tensor *const *out) {
    const tci_tensor *x = in[0], *w = in[1];
    const tci_tensor *bias = input_at(node, in, 2), *past = input_at(node, in, 3);
    for (int i = 0; i < node->num_inputs; i++)
        if (in[i]) TRY_STATUS(op_check_dtype(node, in[i], i, op_float_types));
    if (x->rank >= 0 && x->rank != 3)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input has rank %d; expected (batch, channels, length)", x->rank);
    int64_t batch = x->rank == 3 ? x->dims[0] : -1, channels = x->rank == 3 ? x->dims[1] : -1;
    if (w->rank >= 0 && w->rank != 3)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "weight has rank %d; expected (channels, 1, kernel)", w->rank);
    int64_t k = w->rank == 3 ? w->dims[2] : -1;
    if (k == 0) return ir_node_error(node, TCI_ERR_INVALID_MODEL, "weight's kernel size is 0");
    TRY_STATUS(check_dims(node, w, "weight", 3, (const int64_t[]){channels, 1, k},
                          "(channels, 1, kernel)"));
    TRY_STATUS(check_dims(node, bias, "bias", 1, (const int64_t[]){channels}, "(channels)"));
    int64_t state[3] = {batch, channels, k < 0 ? -1 : k - 1};
    TRY_STATUS(check_dims(node, past, "past_state", 3, state, "(batch, channels, kernel - 1)"));
    op_same_shape(out[0], x);
    tci_tensor *present = state_output(node, out);
    if (present) {
        present->dtype = TCI_DTYPE_FLOAT;
        present->rank = 3;
        memcpy(present->dims, state, sizeof state);
    }
    return TCI_OK;
}

static tci_status causal_conv_forward(const ir_node *node, const tci_tensor *const *in,
                                      tci_tensor *const *out) {
    const causal_conv_params *p = node->params;
    const tci_tensor *bias = input_at(node, in, 2), *past = input_at(node, in, 3);
    int64_t batch = in[0]->dims[0], channels = in[0]->dims[1], len = in[0]->dims[2];
    int64_t k = in[1]->dims[2], keep = k - 1, padded_len = len + keep;
    tci_tensor *present = state_output(node, out);
    float *padded = malloc((size_t)(padded_len + 1) * sizeof *padded);
    if (!padded) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t bc = 0; bc < batch * channels; bc++) {
        int64_t c = bc % channels;
        if (past)
            memcpy(padded, (const float *)past->data + bc * keep, (size_t)keep * sizeof *padded);
        else
            memset(padded, 0, (size_t)keep * sizeof *padded);
        memcpy(padded + keep, (const float *)in[0]->data + bc * len, (size_t)len * sizeof *padded);
        const float *w = (const float *)in[1]->data + c * k;
        float b = bias ? ((const float *)bias->data)[c] : 0.0f;
        float *y = (float *)out[0]->data + bc * len;
        for (int64_t t = 0; t < len; t++) {
            float sum = b;
            for (int64_t j = 0; j < k; j++) sum += w[j] * padded[t + j];
            y[t] = p->silu ? act_apply_host(ACT_SILU, sum, 0.0f, 0.0f) : sum;
        }
        if (present)
            memcpy((float *)present->data + bc * keep, padded + len, (size_t)keep * sizeof *padded);
    }
    free(padded);
    return TCI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * LinearAttention. Per batch entry and KV head, a state S (d_k x d_v) from past_state (zeros
 * without it); for each token t, with g_t the decay (log space) and beta_t the update rate:
 *   gated rules:  S = exp(g_t) * S                       (per key row, or one per head)
 *   delta rules:  v_t = beta_t * (v_t - S^T k_t)
 *   always:       S = S + k_t v_t^T;  o_t = scale * S^T q_t for each query head of the group
 * Q, K, V, decay and beta are (B, T, heads * dim); the output (B, T, q_heads * d_v).
 * ------------------------------------------------------------------------------------------- */

enum { LA_QUERY, LA_KEY, LA_VALUE, LA_PAST, LA_DECAY, LA_BETA };

typedef struct linear_attention_params {
    int64_t q_heads, kv_heads;
    float scale; /* 0: 1 / sqrt(d_k) */
    bool gated, delta;
} linear_attention_params;

static tci_status linear_attention_parse(ir_node *node, mem_arena *arena) {
    static const char *const known[] = {"chunk_size", "kv_num_heads", "q_num_heads", "scale",
                                        "update_rule", NULL};
    static const char *const rules[] = {"linear", "gated", "delta", "gated_delta"};
    TRY_STATUS(op_check_arity(node, 3, 6, 1, 2));
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, linear_attention_params, p);
    if (!ir_node_attr(node, "q_num_heads") || !ir_node_attr(node, "kv_num_heads"))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attributes 'q_num_heads' and 'kv_num_heads' are required");
    TRY_STATUS(ir_attr_int(node, "q_num_heads", 0, &p->q_heads));
    TRY_STATUS(ir_attr_int(node, "kv_num_heads", 0, &p->kv_heads));
    if (p->q_heads < 1 || p->kv_heads < 1 || p->q_heads % p->kv_heads)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "q_num_heads (%lld) must be a positive multiple of kv_num_heads "
                             "(%lld)",
                             (long long)p->q_heads, (long long)p->kv_heads);
    int64_t chunk;
    TRY_STATUS(ir_attr_int(node, "chunk_size", 64, &chunk));
    if (chunk < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "chunk_size %lld must be >= 1",
                             (long long)chunk);
    TRY_STATUS(ir_attr_float(node, "scale", 0.0f, &p->scale));
    if (!isfinite(p->scale))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "scale %g is not finite",
                             (double)p->scale);
    const char *rule;
    TRY_STATUS(ir_attr_string(node, "update_rule", "gated_delta", &rule));
    int which = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(rule, rules[i]) == 0) which = i;
    if (which < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "update_rule '%s' is not one of linear, gated, delta, gated_delta",
                             rule);
    p->gated = which == 1 || which == 3;
    p->delta = which >= 2;
    if (p->gated != has_input(node, LA_DECAY))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "update_rule '%s' %s the input decay",
                             rule, p->gated ? "needs" : "takes no");
    if (p->delta != has_input(node, LA_BETA))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "update_rule '%s' %s the input beta",
                             rule, p->delta ? "needs" : "takes no");
    return TCI_OK;
}

/* The sizes of one call; -1 where unknown. */
typedef struct la_geom {
    int64_t batch, seq, d_k, d_v, decay_width, beta_width;
} la_geom;

/* dim / heads, or an error when heads does not divide it */
static tci_status head_size(const ir_node *node, const tci_tensor *t, const char *name,
                            int64_t heads, int64_t *out) {
    *out = -1;
    if (t->rank < 0) return TCI_OK;
    if (t->rank != 3)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s has rank %d; expected (batch, seq, heads * head size)", name,
                             t->rank);
    int64_t d = t->dims[2];
    if (d >= 0 && d % heads)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "%s's last dim %lld is not a multiple of its %lld heads", name,
                             (long long)d, (long long)heads);
    *out = d < 0 ? -1 : d / heads;
    return TCI_OK;
}

static tci_status la_geometry(const ir_node *node, const tci_tensor *const *in, la_geom *g) {
    const linear_attention_params *p = node->params;
    const tci_tensor *q = in[LA_QUERY], *k = in[LA_KEY], *v = in[LA_VALUE];
    for (int i = 0; i < node->num_inputs; i++)
        if (in[i]) TRY_STATUS(op_check_dtype(node, in[i], i, op_float_types));
    int64_t dk_k;
    TRY_STATUS(head_size(node, q, "query", p->q_heads, &g->d_k));
    TRY_STATUS(head_size(node, k, "key", p->kv_heads, &dk_k));
    TRY_STATUS(head_size(node, v, "value", p->kv_heads, &g->d_v));
    if (g->d_k < 0) g->d_k = dk_k;
    g->batch = q->rank == 3 ? q->dims[0] : -1;
    g->seq = q->rank == 3 ? q->dims[1] : -1;
    int64_t qkv_dims[3] = {g->batch, g->seq, g->d_k < 0 ? -1 : p->kv_heads * g->d_k};
    const char *layout = "(batch, seq, kv_num_heads * head size)";
    TRY_STATUS(check_dims(node, k, "key", 3, qkv_dims, layout));
    qkv_dims[2] = -1;
    TRY_STATUS(check_dims(node, v, "value", 3, qkv_dims, layout));
    int64_t state[4] = {g->batch, p->kv_heads, g->d_k, g->d_v};
    TRY_STATUS(check_dims(node, input_at(node, in, LA_PAST), "past_state", 4, state,
                          "(batch, kv_num_heads, d_k, d_v)"));
    g->decay_width = g->beta_width = -1;
    const tci_tensor *decay = input_at(node, in, LA_DECAY), *beta = input_at(node, in, LA_BETA);
    if (decay && decay->rank >= 0) {
        TRY_STATUS(check_dims(node, decay, "decay", 3, qkv_dims, layout));
        int64_t wd = decay->dims[2];
        if (wd >= 0 && wd != p->kv_heads && (g->d_k < 0 || wd != p->kv_heads * g->d_k))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "decay's last dim %lld is neither kv_num_heads (%lld) nor "
                                 "kv_num_heads * d_k",
                                 (long long)wd, (long long)p->kv_heads);
        g->decay_width = wd;
    }
    if (beta && beta->rank >= 0) {
        TRY_STATUS(check_dims(node, beta, "beta", 3, qkv_dims, layout));
        int64_t wb = beta->dims[2];
        if (wb >= 0 && wb != p->kv_heads && wb != 1)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "beta's last dim %lld is neither kv_num_heads (%lld) nor 1",
                                 (long long)wb, (long long)p->kv_heads);
        g->beta_width = wb;
    }
    return TCI_OK;
}

static tci_status linear_attention_infer(const ir_node *node, const tci_tensor *const *in,
                                         tci_tensor *const *out) {
    const linear_attention_params *p = node->params;
    la_geom g;
    TRY_STATUS(la_geometry(node, in, &g));
    out[0]->dtype = TCI_DTYPE_FLOAT;
    out[0]->rank = 3;
    out[0]->dims[0] = g.batch;
    out[0]->dims[1] = g.seq;
    out[0]->dims[2] = g.d_v < 0 ? -1 : p->q_heads * g.d_v;
    tci_tensor *present = state_output(node, out);
    if (present) {
        present->dtype = TCI_DTYPE_FLOAT;
        present->rank = 4;
        present->dims[0] = g.batch;
        present->dims[1] = p->kv_heads;
        present->dims[2] = g.d_k;
        present->dims[3] = g.d_v;
    }
    return TCI_OK;
}

static tci_status linear_attention_forward(const ir_node *node, const tci_tensor *const *in,
                                           tci_tensor *const *out) {
    const linear_attention_params *p = node->params;
    la_geom g;
    TRY_STATUS(la_geometry(node, in, &g));
    const float *q = in[LA_QUERY]->data, *k = in[LA_KEY]->data, *v = in[LA_VALUE]->data;
    const tci_tensor *past = input_at(node, in, LA_PAST);
    const tci_tensor *decay = input_at(node, in, LA_DECAY), *beta = input_at(node, in, LA_BETA);
    int64_t hq = p->q_heads, hkv = p->kv_heads, group = hq / hkv, dk = g.d_k, dv = g.d_v;
    float scale = p->scale != 0.0f ? p->scale : 1.0f / sqrtf((float)dk);
    size_t state_size = (size_t)(dk * dv);
    float *state = malloc((state_size + (size_t)dv + 1) * sizeof *state);
    if (!state) return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for the state");
    float *update = state + state_size;
    tci_tensor *present = state_output(node, out);
    float *y = out[0]->data;
    for (int64_t b = 0; b < g.batch; b++)
        for (int64_t h = 0; h < hkv; h++) {
            if (past)
                memcpy(state, (const float *)past->data + (b * hkv + h) * (int64_t)state_size,
                       state_size * sizeof *state);
            else
                memset(state, 0, state_size * sizeof *state);
            for (int64_t t = 0; t < g.seq; t++) {
                int64_t token = b * g.seq + t;
                const float *kt = k + (token * hkv + h) * dk;
                const float *vt = v + (token * hkv + h) * dv;
                if (p->gated) {
                    const float *gt = (const float *)decay->data + token * g.decay_width;
                    bool per_row = g.decay_width != hkv;
                    for (int64_t d = 0; d < dk; d++) {
                        float factor = expf(per_row ? gt[h * dk + d] : gt[h]);
                        for (int64_t m = 0; m < dv; m++) state[d * dv + m] *= factor;
                    }
                }
                if (p->delta) {
                    float bt = ((const float *)beta->data)[token * g.beta_width +
                                                           (g.beta_width == 1 ? 0 : h)];
                    for (int64_t m = 0; m < dv; m++) {
                        float retrieved = 0.0f;
                        for (int64_t d = 0; d < dk; d++) retrieved += state[d * dv + m] * kt[d];
                        update[m] = bt * (vt[m] - retrieved);
                    }
                } else {
                    memcpy(update, vt, (size_t)dv * sizeof *update);
                }
                for (int64_t d = 0; d < dk; d++)
                    for (int64_t m = 0; m < dv; m++) state[d * dv + m] += kt[d] * update[m];
                for (int64_t r = 0; r < group; r++) {
                    int64_t head = h * group + r;
                    const float *qt = q + (token * hq + head) * dk;
                    float *ot = y + (token * hq + head) * dv;
                    for (int64_t m = 0; m < dv; m++) ot[m] = 0.0f;
                    for (int64_t d = 0; d < dk; d++)
                        for (int64_t m = 0; m < dv; m++) ot[m] += qt[d] * state[d * dv + m];
                    for (int64_t m = 0; m < dv; m++) ot[m] *= scale;
                }
            }
            if (present)
                memcpy((float *)present->data + (b * hkv + h) * (int64_t)state_size, state,
                       state_size * sizeof *state);
        }
    free(state);
    return TCI_OK;
}

OP_DESC(causal_conv_desc, "CausalConvWithState", OP_VERSIONS(27), causal_conv_parse,
        causal_conv_infer, causal_conv_forward, 0, NULL, NULL, BINARY_NONE);
OP_DESC(linear_attention_desc, "LinearAttention", OP_VERSIONS(27), linear_attention_parse,
        linear_attention_infer, linear_attention_forward, 0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_linear_attention_ops[] = {&causal_conv_desc, &linear_attention_desc,
                                                     NULL};
