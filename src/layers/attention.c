/* The GPU lowering of a fused attention (what src/graph/passes/attention.c recorded on the
 * MatMul of P and V): one PLAN_STEP_ATTENTION reading Q, K and V and writing Y through the
 * strides and offsets of the movement nodes it folded, or, where the kernel has no variant (fp32 storage, a head dim other than
 * 32, 64, 80, 96, 128; a node of the chain kept in fp32), every node of the chain lowered on
 * its own, as unfused, in its own precision. */
#include <stdio.h>
#include <string.h>

#include "layers/op.h"

/* A mask's strides along the scores' dims (right-aligned, 0 where it broadcasts), as four. */
static void mask_strides(const ir_tensor *mask, const int64_t *scores_dims, int r,
                         int64_t *out) {
    int64_t st[TCI_MAX_RANK], logical[4] = {0, 0, 0, 0};
    op_strides(mask->rank, mask->dims, st);
    for (int i = 0; i < mask->rank; i++) {
        int d = r - mask->rank + i;
        logical[d] = mask->dims[i] == 1 && scores_dims[d] != 1 ? 0 : st[i];
    }
    if (r == 3) {
        out[0] = 0;
        for (int i = 0; i < 3; i++) out[i + 1] = logical[i];
    } else {
        for (int i = 0; i < 4; i++) out[i] = logical[i];
    }
}

tci_status layer_lower_attention(plan_builder *b, const ir_node *node, const ir_epilogue *e,
                                 bool *out_fused, const char **out_reason) {
    const ir_attention *a = e->attention;
    const int r = a->rank;
    const ir_tensor *y = e->output;
    char reason[128];
    *out_fused = false;
    *out_reason = NULL;
    bool kept_part = false;
    for (int i = 0; i < a->num_nodes; i++) kept_part |= lower_node_kept(b, a->nodes[i]);
    if (lower_float_dtype(b) == TCI_DTYPE_FLOAT || kept_part) {
        snprintf(reason, sizeof reason, "%s (attention unfused: %s%s)", node->op_type,
                 lower_float_dtype(b) == TCI_DTYPE_FLOAT ? "fp32 storage" : "a part kept in ",
                 lower_float_dtype(b) == TCI_DTYPE_FLOAT ? "" : lower_kept_name(b));
    } else if (!plan_attention_head_dim_ok(a->head_dim)) {
        snprintf(reason, sizeof reason,
                 "%s (attention unfused: head dim %lld; the kernel has 32, 64, 80, 96, 128)",
                 node->op_type, (long long)a->head_dim);
    } else {
        reason[0] = '\0';
    }
    if (reason[0]) {
        /* the chain before the owner as it stands in the graph, every node its own step(s);
         * the caller lowers the owner, then layer_lower_attention_after the rest */
        for (int i = 0; i < a->owner; i++) TRY_STATUS(lower_fused_node(b, a->nodes[i]));
        *out_reason = lower_intern(b, reason);
        return *out_reason ? TCI_OK
                           : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory lowering attention");
    }
    int qi, ki, vi, mi = -1, yi;
    TRY_STATUS(lower_input(b, node, a->q, PLAN_LAYOUT_DENSE, &qi));
    TRY_STATUS(lower_input(b, node, a->k, PLAN_LAYOUT_DENSE, &ki));
    TRY_STATUS(lower_input(b, node, a->v, PLAN_LAYOUT_DENSE, &vi));
    if (a->mask) TRY_STATUS(lower_input(b, node, a->mask, PLAN_LAYOUT_DENSE, &mi));
    if (a->mask && a->keep)
        return ir_node_error(node, TCI_ERR_INTERNAL, "attention with an additive and a bool mask");
    if (a->keep) TRY_STATUS(lower_input(b, node, a->keep, PLAN_LAYOUT_DENSE, &mi));
    TRY_STATUS(lower_output(b, node, y, &yi));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_ATTENTION, node, lower_intern(b, e->label), &s));
    plan_attention *pa = &s->u.attention;
    int64_t scores[4];
    if (r == 4) scores[0] = a->batch;
    scores[r - 3] = a->heads;
    scores[r - 2] = a->q_len;
    scores[r - 1] = a->kv_len;
    pa->batch = a->batch;
    pa->heads = a->heads;
    pa->q_len = a->q_len;
    pa->kv_len = a->kv_len;
    pa->head_dim = a->head_dim;
    for (int i = 0; i < 4; i++) {
        pa->q_strides[i] = a->q_strides[i];
        pa->k_strides[i] = a->k_strides[i];
        pa->v_strides[i] = a->v_strides[i];
        pa->y_strides[i] = a->y_strides[i];
    }
    pa->q_offset = a->q_offset;
    pa->k_offset = a->k_offset;
    pa->v_offset = a->v_offset;
    if (a->mask) mask_strides(a->mask, scores, r, pa->mask_strides);
    if (a->keep) mask_strides(a->keep, scores, r, pa->keep_strides);
    pa->scale = a->scale;
    pa->causal = a->causal;
    pa->has_mask = a->mask != NULL;
    pa->has_keep = a->keep != NULL;
    pa->keep_row_mean = a->keep_row_mean;
    pa->mask_batch_mod = a->mask_batch_mod;
    lower_step_io(s, 4, (int[]){qi, ki, vi, mi}, 1, &yi);
    *out_fused = true;
    return TCI_OK;
}

tci_status layer_lower_attention_after(plan_builder *b, const ir_epilogue *e) {
    const ir_attention *a = e->attention;
    for (int i = a->owner + 1; i < a->num_nodes; i++) TRY_STATUS(lower_fused_node(b, a->nodes[i]));
    return TCI_OK;
}
