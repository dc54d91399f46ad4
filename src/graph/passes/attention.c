/* The attention fusion: finds the scaled-dot-product attention that exporters write,
 *   MatMul(Q', K') -> Mul/Div by constant scalars -> [Add(mask)] -> Softmax(last axis) -> MatMul(., V)
 * with Q' and K' (= K^T) reached through single-reader Transposes and scalings by constant
 * scalars (PyTorch's scaled_dot_product_attention export scales Q and K^T by sqrt(scale) each),
 * and records it on the last MatMul (ir_epilogue.attention): its step computes the whole chain.
 * The nodes stay in the graph, marked fused_into, so the CPU reference runs them as before. Roles
 * come from the descriptors (op_desc.pattern, op_desc.binary), never from op names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "layers/op.h"

#define ATTN_MAX_NODES 24

typedef struct attn_match {
    ir_node *nodes[ATTN_MAX_NODES];
    int num;
    ir_attention a;
} attn_match;

static void add_node(attn_match *m, ir_node *n) {
    if (m->num < ATTN_MAX_NODES) m->nodes[m->num++] = n;
}

/* The node's role; none for a node another fusion has taken. */
static op_pattern_kind role_of(const ir_node *n, op_pattern *pat) {
    memset(pat, 0, sizeof *pat);
    if (!n || !n->desc || !n->desc->pattern || n->fused_into || n->epilogue) return OP_PATTERN_NONE;
    n->desc->pattern(n, pat);
    return pat->kind;
}

/* t is read once, by the next node of the chain, and is no graph output. */
static bool private_tensor(const int *consumers, const ir_tensor *t) {
    return t && !t->data && !t->is_graph_output && consumers[t->index] == 1;
}

static bool known_float(const ir_tensor *t) {
    if (!t || t->dtype != TCI_DTYPE_FLOAT || t->rank < 0) return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) return false;
    return true;
}

static bool same_dims(const ir_tensor *a, const ir_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* The value of a constant float tensor of one element. */
static bool scalar_constant(const ir_tensor *t, float *v) {
    if (!t || !t->data || t->dtype != TCI_DTYPE_FLOAT) return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] != 1) return false;
    *v = *(const float *)t->data;
    return isfinite(*v) && *v != 0.0f;
}

/* n = x * c, c * x or x / c with c a constant scalar and the output of x's shape: x's index and
 * the factor, else -1. */
static int scaling_input(const ir_node *n, float *factor) {
    if (!n || !n->desc || n->fused_into || n->epilogue || n->num_inputs != 2) return -1;
    binary_op op = n->desc->binary;
    float c;
    int x = -1;
    if (op == BINARY_MUL && scalar_constant(n->inputs[1], &c)) {
        x = 0;
        *factor = c;
    } else if (op == BINARY_MUL && scalar_constant(n->inputs[0], &c)) {
        x = 1;
        *factor = c;
    } else if (op == BINARY_DIV && scalar_constant(n->inputs[1], &c)) {
        x = 0;
        *factor = 1.0f / c;
    }
    if (x < 0 || !n->inputs[x] || !same_dims(n->inputs[x], n->outputs[0])) return -1;
    return x;
}

/* Follows operand t back through single-reader Transposes (and, with scales, constant scalings),
 * adding their nodes to m: *src is the tensor reached and perm maps the operand's dims to its
 * dims (operand dim d is dim perm[d] of *src). */
static void walk_operand(const int *consumers, ir_tensor *t, int rank, attn_match *m,
                         float *scale, int *perm, ir_tensor **src) {
    for (int d = 0; d < rank; d++) perm[d] = d;
    for (int steps = 0; steps < 6 && m->num < ATTN_MAX_NODES - 8; steps++) {
        ir_node *p = t->producer;
        if (!p || !private_tensor(consumers, t)) break;
        op_pattern pat;
        float f;
        int x;
        if (role_of(p, &pat) == OP_PATTERN_TRANSPOSE && pat.rank == rank && p->inputs[0] &&
            p->inputs[0]->rank == rank && p->inputs[0]->dtype == TCI_DTYPE_FLOAT) {
            /* t dim d is input dim pat.perm[d] */
            for (int d = 0; d < rank; d++) perm[d] = pat.perm[perm[d]];
            add_node(m, p);
            t = p->inputs[0];
        } else if (scale && (x = scaling_input(p, &f)) >= 0 &&
                   p->inputs[x]->dtype == TCI_DTYPE_FLOAT) {
            *scale *= f;
            add_node(m, p);
            t = p->inputs[x];
        } else {
            break;
        }
    }
    *src = t;
}

/* A constant mask that keeps exactly the keys j <= i of a (q_len, kv_len) score matrix (0 there,
 * -inf or below -1e30 elsewhere), broadcast over every leading dim: the causal mask exporters
 * fold to a constant. */
static bool is_causal_mask(const ir_tensor *mask, int64_t q_len, int64_t kv_len) {
    if (!mask->data || mask->rank < 2 || mask->dims[mask->rank - 2] != q_len ||
        mask->dims[mask->rank - 1] != kv_len)
        return false;
    for (int i = 0; i < mask->rank - 2; i++)
        if (mask->dims[i] != 1) return false;
    const float *v = mask->data;
    for (int64_t i = 0; i < q_len; i++)
        for (int64_t j = 0; j < kv_len; j++) {
            float x = v[i * kv_len + j];
            if (j <= i ? x != 0.0f : !(x == -INFINITY || x <= -1e30f)) return false;
        }
    return true;
}

/* The scores chain below the Softmax's input x: optional constant scalings, then a MatMul with
 * Q' and K'. */
static bool match_scores(const int *consumers, ir_tensor *x, attn_match *m, ir_node **out_qk) {
    float scale = 1.0f, f;
    int i;
    for (int steps = 0; steps < 3; steps++) {
        ir_node *p = x->producer;
        if (!private_tensor(consumers, x) || (i = scaling_input(p, &f)) < 0) break;
        scale *= f;
        add_node(m, p);
        x = p->inputs[i];
    }
    ir_node *qk = x->producer;
    op_pattern pat;
    if (!private_tensor(consumers, x) || role_of(qk, &pat) != OP_PATTERN_MATMUL ||
        qk->num_inputs != 2)
        return false;
    add_node(m, qk);
    m->a.scale = scale;
    *out_qk = qk;
    return true;
}

/* Whether mask broadcasts into scores (dims right-aligned; 1 or equal) and is float. */
static bool mask_fits(const ir_tensor *mask, const ir_tensor *scores) {
    if (!known_float(mask) || mask->rank > scores->rank) return false;
    for (int i = 0; i < mask->rank; i++) {
        int64_t d = mask->dims[i], s = scores->dims[scores->rank - mask->rank + i];
        if (d != 1 && d != s) return false;
    }
    return true;
}

static int cmp_index(const void *a, const void *b) {
    size_t x = (*(ir_node *const *)a)->index, y = (*(ir_node *const *)b)->index;
    return x < y ? -1 : x > y;
}

/* The attention ending at pv, the MatMul of the probabilities and V, into m. */
static bool match_attention(const int *consumers, ir_node *pv, attn_match *m) {
    op_pattern pat;
    memset(m, 0, sizeof *m);
    if (role_of(pv, &pat) != OP_PATTERN_MATMUL || pv->num_inputs != 2 || !pv->outputs[0])
        return false;
    ir_tensor *probs = pv->inputs[0], *v_in = pv->inputs[1];
    ir_node *sm = probs->producer;
    if (!private_tensor(consumers, probs) || role_of(sm, &pat) != OP_PATTERN_SOFTMAX_LAST)
        return false;
    add_node(m, sm);
    ir_tensor *x = sm->inputs[0];
    ir_node *qk = NULL, *add = x->producer;
    int mark = m->num;
    if (private_tensor(consumers, x) && add && add->desc && add->desc->binary == BINARY_ADD &&
        add->num_inputs == 2 && !add->fused_into && !add->epilogue) {
        for (int side = 0; side < 2 && !qk; side++) {
            m->num = mark;
            add_node(m, add);
            ir_tensor *mask = add->inputs[1 - side];
            if (add->inputs[side] == mask || !add->inputs[side]) continue;
            if (match_scores(consumers, add->inputs[side], m, &qk) &&
                !(mask_fits(mask, qk->outputs[0]) && same_dims(add->outputs[0], qk->outputs[0])))
                qk = NULL;
            if (qk) m->a.mask = mask;
        }
    }
    if (!qk) {
        m->num = mark;
        m->a.mask = NULL;
        if (!match_scores(consumers, x, m, &qk)) return false;
    }
    /* shapes: scores (..., Sq, Sk) of rank 3 or 4, Q (..., Sq, D), K^T (..., D, Sk),
     * V (..., Sk, D), no broadcasting between them */
    const ir_tensor *qt = qk->inputs[0], *kt = qk->inputs[1], *s = qk->outputs[0];
    const ir_tensor *y = pv->outputs[0];
    int r = s->rank;
    if (r < 3 || r > 4 || !known_float(qt) || !known_float(kt) || !known_float(v_in) ||
        !known_float(s) || !known_float(y) || qt->rank != r || kt->rank != r ||
        v_in->rank != r || y->rank != r || !same_dims(s, sm->outputs[0]))
        return false;
    for (int i = 0; i < r - 2; i++)
        if (qt->dims[i] != s->dims[i] || kt->dims[i] != s->dims[i] || v_in->dims[i] != s->dims[i])
            return false;
    int64_t sq = qt->dims[r - 2], d = qt->dims[r - 1], sk = kt->dims[r - 1];
    if (kt->dims[r - 2] != d || v_in->dims[r - 2] != sk || v_in->dims[r - 1] != d ||
        s->dims[r - 2] != sq || s->dims[r - 1] != sk || sq < 1 || sk < 1 || d < 1)
        return false;
    int kt_perm[4];
    walk_operand(consumers, qk->inputs[0], r, m, &m->a.scale, m->a.q_perm, &m->a.q);
    walk_operand(consumers, qk->inputs[1], r, m, &m->a.scale, kt_perm, &m->a.k);
    walk_operand(consumers, v_in, r, m, NULL, m->a.v_perm, &m->a.v);
    /* K is K^T with its last two dims exchanged */
    for (int i = 0; i < r; i++) m->a.k_perm[i] = kt_perm[i];
    m->a.k_perm[r - 2] = kt_perm[r - 1];
    m->a.k_perm[r - 1] = kt_perm[r - 2];
    m->a.rank = r;
    if (!isfinite(m->a.scale) || m->a.scale == 0.0f || m->num >= ATTN_MAX_NODES) return false;
    if (m->a.mask && is_causal_mask(m->a.mask, sq, sk)) {
        m->a.causal = true;
        m->a.mask = NULL;
    }
    add_node(m, pv);
    qsort(m->nodes, (size_t)m->num, sizeof m->nodes[0], cmp_index);
    return m->nodes[m->num - 1] == pv;
}

static tci_status record(ir_graph *g, ir_node *pv, attn_match *m) {
    ir_epilogue e;
    memset(&e, 0, sizeof e);
    char label[256] = "";
    for (int i = 0; i < m->num; i++) {
        if (i) strncat(label, "+", sizeof label - strlen(label) - 1);
        strncat(label, m->nodes[i]->op_type, sizeof label - strlen(label) - 1);
    }
    strncat(label, m->a.causal ? " (attention, causal)" : " (attention)",
            sizeof label - strlen(label) - 1);
    e.output = pv->outputs[0];
    e.label = arena_strdup(g->arena, label);
    m->a.nodes = arena_memdup(g->arena, m->nodes, (size_t)m->num * sizeof m->nodes[0]);
    m->a.num_nodes = m->num;
    e.attention = arena_memdup(g->arena, &m->a, sizeof m->a);
    pv->epilogue = e.label && m->a.nodes && e.attention ? arena_memdup(g->arena, &e, sizeof e)
                                                        : NULL;
    if (!pv->epilogue) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing attention");
    for (int i = 0; i < m->num - 1; i++) m->nodes[i]->fused_into = pv;
    return TCI_OK;
}

tci_status pass_fuse_attention(ir_graph *g) {
    int *consumers = calloc(g->num_tensors + 1, sizeof(int));
    if (!consumers) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing attention");
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++)
            if (g->nodes[i]->inputs[k]) consumers[g->nodes[i]->inputs[k]->index]++;
    for (size_t i = 0; i < g->num_outputs; i++) consumers[g->outputs[i]->index]++;
    tci_status st = TCI_OK;
    attn_match *m = malloc(sizeof *m);
    if (!m) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing attention");
    for (size_t i = 0; st == TCI_OK && i < g->num_nodes; i++) {
        ir_node *n = g->nodes[i];
        if (!n->fused_into && !n->epilogue && match_attention(consumers, n, m))
            st = record(g, n, m);
    }
    free(m);
    free(consumers);
    return st;
}
