/* Op family 'sdpa': ONNX's Attention as unfused GPU steps, where the fused attention step has
 * no variant (fp32 storage, head sizes the kernel lacks, grouped-query heads, softcap, the past
 * and present states, a sliding window, the qk_matmul_output output):
 *   Q, K, V       copied to (batch, heads, seq, head) where they are 3-D; the past then the new
 *                 keys (values) copied into present_key (present_value) where there is either
 *   S = scale Q K^T   one batched GEMM per (batch, K/V head): the query heads that share a K/V
 *                 head are consecutive rows of Q and of S, so grouped-query heads cost no copy
 *   S = softcap tanh(S / softcap)   the GEMM's tanh, then a scaling
 *   S = S + bias  the float mask, or 0 / -inf from a bool one, plus the causal frontier and the
 *                 window as a constant 0 / -inf (queries x keys) made at build
 *   P = softmax(S) over the keys; where the bias may leave a row no key, P = 0 on the rows whose
 *                 bias is -inf everywhere (ONNX's rule; the softmax makes them NaN): a row
 *                 maximum of the bias, compared with -inf
 *   Y = P V       one batched GEMM, copied to the heads-merged layout of a 3-D Y.
 * Q, K, V, the two GEMMs and Y are in the node's float storage; from the scores to P, the bias,
 * the softmax and the row rule run in fp32 in every plan (16-bit ones cast the scores and the
 * mask to fp32 and P back), as the fused step computes them: a mask's fill near fp16's limit
 * (-65504, what Hugging Face writes for fp16 models) added to a score stays finite there, so
 * its row is the softmax of the scores, not a mix of -inf and finite values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/sdpa.h"

typedef struct unfused {
    plan_builder *b;
    const ir_node *node;
    const sdpa_params *p;
    const sdpa_geom *g;
    const char *why;
    tci_dtype dtype; /* the node's float storage */
    int qk;          /* the plan tensor of the qk_matmul_output output, or -1 */
} unfused;

static const ir_tensor *input_at(const ir_node *node, int i) {
    return node->num_inputs > i ? node->inputs[i] : NULL;
}

static const ir_tensor *read_output(const unfused *u, int o) {
    const ir_node *n = u->node;
    return n->num_outputs > o && n->outputs[o] && lower_is_read(u->b, n->outputs[o])
               ? n->outputs[o]
               : NULL;
}

/* "Attention Q K^T (unfused: fp32 storage ...)": what the step computes and why unfused. */
static const char *label(const unfused *u, const char *part) {
    char text[256];
    snprintf(text, sizeof text, "%s %s (unfused: %s)", u->node->op_type, part, u->why);
    return lower_intern(u->b, text);
}

static tci_status temporary(const unfused *u, const char *part, tci_dtype dtype, int rank,
                            const int64_t *dims, int *out) {
    char name[256];
    snprintf(name, sizeof name, "%s:%s", u->node->name ? u->node->name : "attention", part);
    return lower_temporary(u->b, name, dtype, PLAN_LAYOUT_DENSE, rank, dims, out);
}

static void dense_strides4(const int64_t *dims, int64_t *st) {
    st[3] = 1;
    for (int d = 2; d >= 0; d--) st[d] = st[d + 1] * dims[d + 1];
}

/* Element strides of a 3-D (batch, seq, heads * head) or 4-D (batch, heads, seq, head) operand
 * along (batch, head, position, head). */
static void operand_strides(int rank, int64_t heads, int64_t len, int64_t head, int64_t *st) {
    st[0] = heads * len * head;
    st[1] = rank == 4 ? len * head : head;
    st[2] = rank == 4 ? head : heads * head;
    st[3] = 1;
}

/* A copy step over dims (rank 4): dst[out_offset + sum i_d out_st[d]] = src[sum i_d in_st[d]]. */
static tci_status copy_into(const unfused *u, const char *part, int src, int dst,
                            const int64_t *dims, const int64_t *in_st, const int64_t *out_st,
                            int64_t out_offset) {
    const size_t elem = tci_dtype_size(lower_tensor(u->b, dst)->dtype);
    plan_step *s;
    TRY_STATUS(lower_step(u->b, PLAN_STEP_COPY, u->node, label(u, part), &s));
    plan_strided *v = &s->u.copy.view;
    memset(v, 0, sizeof *v);
    v->rank = 4;
    v->pad_dim = -1;
    for (int d = 0; d < 4; d++) {
        v->dims[d] = dims[d];
        v->strides[0][d] = in_st[d];
        v->out_strides[d] = out_st[d];
    }
    v->out_offset = out_offset;
    s->u.copy.elem_size = elem;
    lower_step_io(s, 1, &src, 1, &dst);
    return TCI_OK;
}

/* Q as the dense (batch, q heads, q seq, head) plan tensor the first GEMM reads. */
static tci_status queries(const unfused *u, int *out) {
    const sdpa_geom *g = u->g;
    const ir_tensor *q = u->node->inputs[SDPA_IN_Q];
    int qi;
    TRY_STATUS(lower_input(u->b, u->node, q, PLAN_LAYOUT_DENSE, &qi));
    if (g->rank == 4) {
        *out = qi;
        return TCI_OK;
    }
    const int64_t dims[4] = {g->batch, g->q_heads, g->q_len, g->head};
    int64_t in_st[4], out_st[4];
    operand_strides(3, g->q_heads, g->q_len, g->head, in_st);
    dense_strides4(dims, out_st);
    TRY_STATUS(temporary(u, "q heads", u->dtype, 4, dims, out));
    return copy_into(u, "Q heads split", qi, *out, dims, in_st, out_st, 0);
}

/* K (which 0) or V (1) as the dense (batch, kv heads, total, head) plan tensor the GEMMs read:
 * the past positions, then the new ones, in present_key / present_value where the node's output
 * is read, else in a temporary; the new ones in place where there is neither a past nor a
 * present and they are 4-D. */
static tci_status keys_or_values(const unfused *u, int which, int *out) {
    const sdpa_geom *g = u->g;
    const int64_t head = which ? g->v_head : g->head;
    const ir_tensor *cur = u->node->inputs[which ? SDPA_IN_V : SDPA_IN_K];
    const ir_tensor *past = input_at(u->node, which ? SDPA_IN_PAST_V : SDPA_IN_PAST_K);
    const ir_tensor *present = read_output(u, which ? SDPA_OUT_PRESENT_V : SDPA_OUT_PRESENT_K);
    int ci;
    TRY_STATUS(lower_input(u->b, u->node, cur, PLAN_LAYOUT_DENSE, &ci));
    if (!past && !present && g->rank == 4) {
        *out = ci;
        return TCI_OK;
    }
    const int64_t all[4] = {g->batch, g->kv_heads, g->total, head};
    int64_t out_st[4], in_st[4];
    dense_strides4(all, out_st);
    if (present) TRY_STATUS(lower_output(u->b, u->node, present, out));
    else TRY_STATUS(temporary(u, which ? "values" : "keys", u->dtype, 4, all, out));
    if (past) {
        int pi;
        TRY_STATUS(lower_input(u->b, u->node, past, PLAN_LAYOUT_DENSE, &pi));
        const int64_t dims[4] = {g->batch, g->kv_heads, g->past, head};
        dense_strides4(dims, in_st);
        TRY_STATUS(copy_into(u, which ? "past values" : "past keys", pi, *out, dims, in_st, out_st,
                             0));
    }
    const int64_t dims[4] = {g->batch, g->kv_heads, g->kv_len, head};
    operand_strides(g->rank, g->kv_heads, g->kv_len, head, in_st);
    return copy_into(u, which ? "new values" : "new keys", ci, *out, dims, in_st, out_st,
                     g->past * head);
}

/* Y = alpha op(A) op(B) (act after), batched over (batch, kv heads): A (m x k), B (k x n, or
 * n x k when trans_b), Y (m x n), each dense per batch. */
static tci_status gemm(const unfused *u, const char *part, int a, int bm, int y, int64_t m,
                       int64_t n, int64_t k, bool trans_b, float alpha, act_params act) {
    plan_gemm gm;
    memset(&gm, 0, sizeof gm);
    gm.batch = u->g->batch * u->g->kv_heads;
    gm.m = m;
    gm.n = n;
    gm.k = k;
    gm.trans_b = trans_b;
    gm.lda = k;
    gm.ldb = trans_b ? k : n;
    gm.ldc = n;
    if (gm.batch > 1) {
        gm.stride_a = m * k;
        gm.stride_b = k * n;
        gm.stride_c = m * n;
    }
    gm.alpha = alpha;
    gm.act = act;
    plan_step *s;
    TRY_STATUS(lower_step(u->b, PLAN_STEP_GEMM, u->node, label(u, part), &s));
    gm.fused = s->label;
    s->u.gemm = gm;
    lower_step_io(s, 4, (int[]){a, bm, -1, -1}, 1, &y);
    return TCI_OK;
}

/* y = act(op(inputs)), broadcast by strides (dense, right-aligned) over y's dims. */
static tci_status eltwise(const unfused *u, const char *part, binary_op op, const int *in,
                          int num_in, int y, act_params act) {
    plan_step *s;
    TRY_STATUS(lower_step(u->b, PLAN_STEP_ELTWISE, u->node, label(u, part), &s));
    s->u.eltwise.op = op;
    s->u.eltwise.act = act;
    const plan_tensor *yt = lower_tensor(u->b, y);
    TRY_STATUS(lower_output_view(u->node, yt, &s->u.eltwise.view));
    for (int i = 0; i < num_in; i++)
        lower_operand_strides(yt, lower_tensor(u->b, in[i]), s->u.eltwise.view.strides[i]);
    lower_step_io(s, num_in, in, 1, &y);
    return TCI_OK;
}

/* A one-element fp32 constant (the bias and the row rule run in fp32). */
static tci_status scalar(const unfused *u, const char *name, float value, int *out) {
    const int64_t one[1] = {1};
    return lower_host_data(u->b, name, &value, 1, one, TCI_DTYPE_FLOAT, out);
}

/* A cast step from src into dst (same dims, another float dtype). */
static tci_status cast_into(const unfused *u, const char *part, int src, int dst) {
    const plan_tensor *t = lower_tensor(u->b, dst);
    int64_t count = 1;
    for (int d = 0; d < t->rank; d++) count *= t->dims[d];
    plan_step *s;
    TRY_STATUS(lower_step(u->b, PLAN_STEP_CAST, u->node, label(u, part), &s));
    s->u.cast.count = count;
    lower_step_io(s, 1, &src, 1, &dst);
    return TCI_OK;
}

/* src as fp32: itself in fp32 plans, else a cast into a new temporary. */
static tci_status to_fp32(const unfused *u, const char *part, int src, int *out) {
    if (u->dtype == TCI_DTYPE_FLOAT) {
        *out = src;
        return TCI_OK;
    }
    const plan_tensor t = *lower_tensor(u->b, src);
    TRY_STATUS(temporary(u, part, TCI_DTYPE_FLOAT, t.rank, t.dims, out));
    return cast_into(u, part, src, *out);
}

/* The (q seq, total) constant of the causal frontier and the window (0 kept, -inf dropped), as
 * the reference composes them. */
static tci_status constant_bias(const unfused *u, int *out) {
    const sdpa_params *p = u->p;
    const sdpa_geom *g = u->g;
    float *c = malloc((size_t)(g->q_len * g->total > 0 ? g->q_len * g->total : 1) * sizeof *c);
    if (!c) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory lowering attention");
    for (int64_t i = 0; i < g->q_len; i++)
        for (int64_t j = 0; j < g->total; j++) {
            const int64_t diff = i + g->past - j;
            bool drop = (p->causal && diff < 0) || (p->left >= 0 && diff > p->left) ||
                        (p->right >= 0 && -diff > p->right);
            c[i * g->total + j] = drop ? -INFINITY : 0.0f;
        }
    const int64_t dims[2] = {g->q_len, g->total};
    char name[256];
    snprintf(name, sizeof name, "%s:causal/window bias", u->node->name ? u->node->name : "");
    tci_status st = lower_host_data(u->b, name, c, 2, dims, TCI_DTYPE_FLOAT, out);
    free(c);
    return st;
}

/* The qk_matmul_output output where its mode is `stage` and the stage is in the storage dtype,
 * else a temporary of the scores' dims in dtype. */
static tci_status stage_tensor(const unfused *u, int stage, int mode, const char *part,
                               tci_dtype dtype, int *out) {
    const sdpa_geom *g = u->g;
    if (u->qk >= 0 && stage == mode && dtype == u->dtype) {
        *out = u->qk;
        return TCI_OK;
    }
    const int64_t dims[4] = {g->batch, g->q_heads, g->q_len, g->total};
    return temporary(u, part, dtype, 4, dims, out);
}

/* What the unfused steps do not compute (NULL: nothing). */
static const char *unfused_refusal(const unfused *u, const ir_tensor *mask) {
    const sdpa_params *p = u->p;
    if (input_at(u->node, SDPA_IN_NONPAD)) return "nonpad_kv_seqlen (lengths read at run time)";
    if (p->softmax_dtype != TCI_DTYPE_FLOAT) return "a softmax_precision other than float";
    if (mask && mask->dims[mask->rank - 1] != u->g->total)
        return "an attn_mask shorter than the keys";
    if (read_output(u, SDPA_OUT_QK) && p->qk_mode == SDPA_QK_RAW && p->softcap > 0.0f)
        return "the qk_matmul_output output before softcap";
    return NULL;
}

tci_status layer_sdpa_lower_unfused(plan_builder *b, const ir_node *node, const sdpa_geom *g,
                                    const char *why) {
    unfused u = {.b = b, .node = node, .p = node->params, .g = g, .why = why, .qk = -1,
                 .dtype = lower_float_dtype(b)};
    const sdpa_params *p = u.p;
    const ir_tensor *mask = input_at(node, SDPA_IN_MASK);
    const char *refused = unfused_refusal(&u, mask);
    if (refused)
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "%s: no GPU path (neither the fused attention step nor the unfused "
                             "steps compute it)",
                             refused);
    const ir_tensor *qk_out = read_output(&u, SDPA_OUT_QK);
    if (qk_out) TRY_STATUS(lower_output(b, node, qk_out, &u.qk));
    /* the stage qk_matmul_output holds: the latest one there is at or before its mode */
    const bool has_const = p->causal || p->left >= 0 || p->right >= 0;
    const bool stage_exists[4] = {p->softcap <= 0.0f, p->softcap > 0.0f, mask || has_const, true};
    int mode = p->qk_mode;
    while (mode > 0 && !stage_exists[mode]) mode--;
    const int64_t group = g->q_heads / g->kv_heads;
    int qi, ki, vi, s;
    TRY_STATUS(queries(&u, &qi));
    TRY_STATUS(keys_or_values(&u, 0, &ki));
    TRY_STATUS(keys_or_values(&u, 1, &vi));
    /* S = scale Q K^T, its tanh divided by softcap first */
    const float scale = layer_sdpa_scale(p, g->head);
    act_params act = {ACT_NONE, 0.0f, 0.0f};
    if (p->softcap > 0.0f) act.kind = ACT_TANH;
    TRY_STATUS(stage_tensor(&u, SDPA_QK_RAW, mode, "scores", u.dtype, &s));
    TRY_STATUS(gemm(&u, "Q K^T", qi, ki, s, group * g->q_len, g->total, g->head, true,
                    p->softcap > 0.0f ? scale / p->softcap : scale, act));
    if (p->softcap > 0.0f) {
        int capped;
        TRY_STATUS(
            stage_tensor(&u, SDPA_QK_SOFTCAPPED, mode, "softcapped scores", u.dtype, &capped));
        TRY_STATUS(eltwise(&u, "softcap", BINARY_NONE, &s, 1, capped,
                           (act_params){ACT_SCALE, p->softcap, 0.0f}));
        s = capped;
    }
    TRY_STATUS(to_fp32(&u, "scores to fp32", s, &s));
    /* the bias, in fp32: the mask (a bool one as 0 / -inf) with the constant of causal and
     * window */
    int bias = -1, neg_inf = -1;
    int ci = -1;
    if (has_const) TRY_STATUS(constant_bias(&u, &ci));
    if (mask && mask->dtype == TCI_DTYPE_BOOL) TRY_STATUS(scalar(&u, "-inf", -INFINITY, &neg_inf));
    if (mask) {
        int mi;
        TRY_STATUS(lower_input(b, node, mask, PLAN_LAYOUT_DENSE, &mi));
        if (mask->dtype != TCI_DTYPE_BOOL) TRY_STATUS(to_fp32(&u, "mask to fp32", mi, &mi));
        int64_t dims[4];
        for (int d = 0; d < 4; d++) {
            const int i = d - (4 - mask->rank);
            dims[d] = i >= 0 ? mask->dims[i] : 1;
        }
        if (has_const) { /* (q seq, total) broadcast into the mask's dims */
            dims[2] = g->q_len;
            dims[3] = g->total;
        }
        if (mask->dtype == TCI_DTYPE_BOOL) {
            int zero = ci;
            if (zero < 0) TRY_STATUS(scalar(&u, "0", 0.0f, &zero));
            TRY_STATUS(temporary(&u, "bias", TCI_DTYPE_FLOAT, 4, dims, &bias));
            TRY_STATUS(eltwise(&u, "bool mask", BINARY_WHERE, (int[]){mi, zero, neg_inf}, 3,
                               bias, (act_params){ACT_NONE, 0.0f, 0.0f}));
        } else if (has_const) {
            TRY_STATUS(temporary(&u, "bias", TCI_DTYPE_FLOAT, 4, dims, &bias));
            TRY_STATUS(eltwise(&u, "mask and causal", BINARY_ADD, (int[]){mi, ci}, 2, bias,
                               (act_params){ACT_NONE, 0.0f, 0.0f}));
        } else {
            bias = mi;
        }
    } else {
        bias = ci;
    }
    if (bias >= 0) {
        int biased;
        TRY_STATUS(
            stage_tensor(&u, SDPA_QK_BIASED, mode, "biased scores", TCI_DTYPE_FLOAT, &biased));
        TRY_STATUS(eltwise(&u, "bias", BINARY_ADD, (int[]){s, bias}, 2, biased,
                           (act_params){ACT_NONE, 0.0f, 0.0f}));
        s = biased;
        if (u.qk >= 0 && mode == SDPA_QK_BIASED && u.dtype != TCI_DTYPE_FLOAT)
            TRY_STATUS(cast_into(&u, "qk output", s, u.qk));
    }
    /* P = softmax(S), and the rows whose bias drops every key zeros where there may be one: a
     * mask, or a left window bound (queries past every key); causal and the right bound always
     * keep key 0. Decided on the node, not the shapes, so that a shape variant (a shorter
     * sequence) has the built plan's steps. */
    const bool guard = mask || p->left >= 0;
    int prob;
    if (guard) {
        const int64_t dims[4] = {g->batch, g->q_heads, g->q_len, g->total};
        TRY_STATUS(temporary(&u, "softmax", TCI_DTYPE_FLOAT, 4, dims, &prob));
    } else {
        TRY_STATUS(
            stage_tensor(&u, SDPA_QK_SOFTMAX, mode, "probabilities", TCI_DTYPE_FLOAT, &prob));
    }
    plan_step *st;
    TRY_STATUS(lower_step(b, PLAN_STEP_SOFTMAX, node, label(&u, "softmax"), &st));
    st->u.softmax.rows = g->batch * g->q_heads * g->q_len;
    st->u.softmax.length = g->total;
    st->u.softmax.log = false;
    lower_step_io(st, 1, &s, 1, &prob);
    if (guard) {
        const plan_tensor bt = *lower_tensor(b, bias);
        int64_t rdims[4];
        for (int d = 0; d < bt.rank; d++) rdims[d] = d == bt.rank - 1 ? 1 : bt.dims[d];
        int row_max, keeps;
        TRY_STATUS(temporary(&u, "bias row max", TCI_DTYPE_FLOAT, bt.rank, rdims, &row_max));
        TRY_STATUS(lower_step(b, PLAN_STEP_REDUCE, node, label(&u, "bias row max"), &st));
        plan_strided *v = &st->u.reduce.view;
        memset(v, 0, sizeof *v);
        v->rank = bt.rank;
        v->pad_dim = -1;
        for (int d = 0; d < bt.rank; d++) v->dims[d] = bt.dims[d];
        op_strides(bt.rank, bt.dims, v->strides[0]);
        st->u.reduce.reduce_dim[bt.rank - 1] = true;
        st->u.reduce.op = REDUCE_MAX;
        lower_step_io(st, 1, &bias, 1, &row_max);
        if (neg_inf < 0) TRY_STATUS(scalar(&u, "-inf", -INFINITY, &neg_inf));
        int zero;
        TRY_STATUS(scalar(&u, "0", 0.0f, &zero));
        TRY_STATUS(temporary(&u, "row keeps a key", TCI_DTYPE_BOOL, bt.rank, rdims, &keeps));
        TRY_STATUS(eltwise(&u, "row keeps a key", BINARY_GREATER, (int[]){row_max, neg_inf}, 2,
                           keeps, (act_params){ACT_NONE, 0.0f, 0.0f}));
        int kept;
        TRY_STATUS(
            stage_tensor(&u, SDPA_QK_SOFTMAX, mode, "probabilities", TCI_DTYPE_FLOAT, &kept));
        TRY_STATUS(eltwise(&u, "rows without a key", BINARY_WHERE, (int[]){keeps, prob, zero}, 3,
                           kept, (act_params){ACT_NONE, 0.0f, 0.0f}));
        prob = kept;
    }
    if (u.dtype != TCI_DTYPE_FLOAT) { /* P in the storage dtype for the GEMM (the qk output) */
        int stored;
        TRY_STATUS(stage_tensor(&u, SDPA_QK_SOFTMAX, mode, "probabilities", u.dtype, &stored));
        TRY_STATUS(cast_into(&u, "probabilities from fp32", prob, stored));
        prob = stored;
    }
    /* Y = P V, heads merged after it for a 3-D Y */
    const ir_tensor *y = node->outputs[SDPA_OUT_Y];
    int y4, yi = -1;
    const int64_t ydims[4] = {g->batch, g->q_heads, g->q_len, g->v_head};
    if (g->rank == 4) {
        TRY_STATUS(lower_output(b, node, y, &y4));
    } else {
        TRY_STATUS(temporary(&u, "y heads", u.dtype, 4, ydims, &y4));
        TRY_STATUS(lower_output(b, node, y, &yi));
    }
    TRY_STATUS(gemm(&u, "P V", prob, vi, y4, group * g->q_len, g->v_head, g->total, false, 1.0f,
                    (act_params){ACT_NONE, 0.0f, 0.0f}));
    if (g->rank == 3) {
        int64_t in_st[4], out_st[4];
        dense_strides4(ydims, in_st);
        operand_strides(3, g->q_heads, g->q_len, g->v_head, out_st);
        TRY_STATUS(copy_into(&u, "Y heads merged", y4, yi, ydims, in_st, out_st, 0));
    }
    return TCI_OK;
}
