/* What the two files of the 'sdpa' family share: ONNX Attention's parsed attributes, the
 * geometry of its operands (sdpa.c) and its lowering to unfused GPU steps (sdpa_unfused.c),
 * which runs where the fused attention step has no variant. */
#ifndef TCI_LAYERS_SDPA_H
#define TCI_LAYERS_SDPA_H

#include "layers/op.h"

enum { SDPA_IN_Q, SDPA_IN_K, SDPA_IN_V, SDPA_IN_MASK, SDPA_IN_PAST_K, SDPA_IN_PAST_V,
       SDPA_IN_NONPAD };
enum { SDPA_OUT_Y, SDPA_OUT_PRESENT_K, SDPA_OUT_PRESENT_V, SDPA_OUT_QK };

/* qk_matmul_output_mode: what output 3 holds */
enum { SDPA_QK_RAW, SDPA_QK_SOFTCAPPED, SDPA_QK_BIASED, SDPA_QK_SOFTMAX };

typedef struct sdpa_params {
    int causal;
    int64_t q_heads, kv_heads; /* 0: not given */
    bool has_scale;
    float scale;
    float softcap; /* 0: none */
    int qk_mode;
    tci_dtype softmax_dtype; /* FLOAT when not given */
    int64_t left, right;     /* the window's bounds (Attention-25); -1: unbounded */
} sdpa_params;

/* Q, K and V as (batch, heads, seq, head_size); -1 where unknown. */
typedef struct sdpa_geom {
    int rank; /* of Q, K and V: 3 or 4 */
    int64_t batch, q_heads, kv_heads, q_len, kv_len, past, total, head, v_head;
} sdpa_geom;

/* The geometry of known-rank Q, K, V and the past states (in: the node's inputs, NULL where
 * omitted), every inconsistency an error naming the node. */
tci_status layer_sdpa_geometry(const ir_node *node, const tci_tensor *const *in, sdpa_geom *g);

/* What Q K^T is multiplied by (ONNX scales Q and K each by the root of the scale). */
float layer_sdpa_scale(const sdpa_params *p, int64_t head);

/* The unfused GPU steps of the Attention node (geometry g): the batched GEMMs of Q K^T and P V,
 * softcap, the mask and the causal and window constraints as an additive bias, the softmax
 * with its rows that keep no key zeros, the past and present states; `why` is what keeps it
 * off the fused step, for the steps' labels. UNSUPPORTED naming the node for what they do not
 * compute. */
tci_status layer_sdpa_lower_unfused(plan_builder *b, const ir_node *node, const sdpa_geom *g,
                                    const char *why);

#endif
