/* The GPU lowering of a fused attention (what src/graph/passes/attention.c recorded on the
 * MatMul of P and V): one PLAN_STEP_ATTENTION reading Q, K and V through the strides of the
 * Transposes it folded, or, where the kernel has no variant (fp32 storage, a head dim other than
 * 32, 64, 80, 96, 128; a node of the chain kept in fp32), every node of the chain lowered on
 * its own, as unfused, in its own precision. */
#include <stdio.h>
#include <string.h>

#include "layers/op.h"

/* Element strides along the logical dims of an operand of rank r read from the dense tensor t
 * through perm, as the kernel's four (batch, head, position, d): rank 3 has no batch. */
static void operand_strides(const ir_tensor *t, const int *perm, int r, int64_t *out) {
    int64_t st[TCI_MAX_RANK];
    op_strides(t->rank, t->dims, st);
    int64_t logical[4];
    for (int i = 0; i < r; i++) logical[i] = st[perm[i]];
    if (r == 3) {
        out[0] = 0;
        for (int i = 0; i < 3; i++) out[i + 1] = logical[i];
    } else {
        for (int i = 0; i < 4; i++) out[i] = logical[i];
    }
}

/* The mask's strides along the scores' dims (right-aligned, 0 where it broadcasts), as four. */
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
    const ir_tensor *q = a->q, *y = e->output;
    const int64_t head_dim = q->dims[a->q_perm[r - 1]];
    char reason[128];
    *out_fused = false;
    *out_reason = NULL;
    bool fp32_part = false;
    for (int i = 0; i < a->num_nodes; i++) fp32_part |= lower_node_fp32(b, a->nodes[i]);
    if (lower_float_dtype(b) == TCI_DTYPE_FLOAT || fp32_part) {
        snprintf(reason, sizeof reason, "%s (attention unfused: %s)", node->op_type,
                 lower_float_dtype(b) == TCI_DTYPE_FLOAT ? "fp32 storage" : "a part kept in fp32");
    } else if (!plan_attention_head_dim_ok(head_dim)) {
        snprintf(reason, sizeof reason,
                 "%s (attention unfused: head dim %lld; the kernel has 32, 64, 80, 96, 128)",
                 node->op_type, (long long)head_dim);
    } else {
        reason[0] = '\0';
    }
    if (reason[0]) {
        /* the chain as it stands in the graph, every node its own step(s) */
        for (int i = 0; i < a->num_nodes - 1; i++) TRY_STATUS(lower_fused_node(b, a->nodes[i]));
        *out_reason = lower_intern(b, reason);
        return *out_reason ? TCI_OK
                           : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory lowering attention");
    }
    int qi, ki, vi, mi = -1, yi;
    TRY_STATUS(lower_input(b, node, a->q, PLAN_LAYOUT_DENSE, &qi));
    TRY_STATUS(lower_input(b, node, a->k, PLAN_LAYOUT_DENSE, &ki));
    TRY_STATUS(lower_input(b, node, a->v, PLAN_LAYOUT_DENSE, &vi));
    if (a->mask) TRY_STATUS(lower_input(b, node, a->mask, PLAN_LAYOUT_DENSE, &mi));
    TRY_STATUS(lower_output(b, node, y, &yi));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_ATTENTION, node, lower_intern(b, e->label), &s));
    plan_attention *pa = &s->u.attention;
    int64_t scores[4];
    for (int i = 0; i < r - 2; i++) scores[i] = y->dims[i];
    scores[r - 2] = q->dims[a->q_perm[r - 2]];
    scores[r - 1] = a->k->dims[a->k_perm[r - 2]];
    pa->batch = r == 4 ? scores[0] : 1;
    pa->heads = scores[r - 3];
    pa->q_len = scores[r - 2];
    pa->kv_len = scores[r - 1];
    pa->head_dim = head_dim;
    operand_strides(a->q, a->q_perm, r, pa->q_strides);
    operand_strides(a->k, a->k_perm, r, pa->k_strides);
    operand_strides(a->v, a->v_perm, r, pa->v_strides);
    if (a->mask) mask_strides(a->mask, scores, r, pa->mask_strides);
    pa->scale = a->scale;
    pa->causal = a->causal;
    pa->has_mask = a->mask != NULL;
    lower_step_io(s, 4, (int[]){qi, ki, vi, mi}, 1, &yi);
    *out_fused = true;
    return TCI_OK;
}
