/* The attention fusion: finds the scaled-dot-product attention that exporters write,
 *   MatMul(Q', K') -> Mul/Div by constant scalars -> [Add(mask)] -> Softmax(last axis)
 *   -> [Where(IsNaN(p), 0, p)] -> MatMul(., V)
 * and records it on the last MatMul (ir_epilogue.attention): its step computes the whole chain.
 * A mask that is Where(keep, 0, fill) of a bool keep (Hugging Face's exports: padding and causal
 * masks built as bools) folds too, the step reading keep itself: fill -inf only with the NaN
 * guard after the softmax (a row of -inf scores is NaN without it, zeros with it, and the step
 * writes zeros); a finite fill at most -1e30 (torch.finfo.min) makes
 * a row whose keys are all dropped the mean of V, as the softmax of its equal scores does.
 * Q', K' (= K^T) and V are followed back through the movement nodes that only re-index their
 * input (Transpose, Reshape/Squeeze/Unsqueeze/Flatten, a Gather of one constant index, a constant
 * Slice, Split) and through constant scalar scalings of Q' and K', to the tensors that hold
 * their values (a packed QKV projection read three times, or three projections): the step reads
 * them there through strides and offsets (view.h: dims merged on the way that no one stride
 * says, batch and heads of a packed tensor, are fine once split again). The output is followed
 * forward through Transposes and Reshapes (the head merge before an output projection) and
 * written there through strides. A tensor between them that anything outside the attention reads
 * stops the walk there.
 * The nodes stay in the graph, marked fused_into, so the CPU reference runs them as before. Roles
 * come from the descriptors (op_desc.pattern, op_desc.binary), never from op names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"
#include "graph/passes/rows.h"
#include "graph/passes/view.h"
#include "layers/op.h"

/* The node's role; none for a node another fusion has taken. */
static op_pattern_kind role_of(const ir_node *n, op_pattern *pat) {
    return op_node_pattern(n && !n->fused_into && !n->epilogue ? n : NULL, pat);
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

/* n = x * c, c * x or x / c with c a constant scalar (op_scaling_input), n not fused yet: x's
 * index and the factor, else -1. */
static int scaling_input(const ir_node *n, float *factor) {
    if (!n || n->fused_into || n->epilogue) return -1;
    return op_scaling_input(n, factor);
}

#define CHAIN_MAX 16
#define CORE_MAX 12
#define ATTN_MAX_NODES (CORE_MAX + 4 * CHAIN_MAX + 1)
#define WINDOW_ADDS_MAX 4
/* the largest window mask made (elements, fp32 at build) */
#define WINDOW_MASK_MAX ((int64_t)1 << 24)

/* The nodes between an operand of the attention and the tensor its values are read from:
 * nodes[i] computes outs[i] from outs[i + 1] (from src for the last); outs[0] is the operand. */
typedef struct operand_chain {
    ir_tensor *src;
    ir_node *nodes[CHAIN_MAX];
    ir_tensor *outs[CHAIN_MAX];
    int num;
} operand_chain;

typedef struct attn_match {
    /* NaN guard (Where, IsNaN), Softmax, mask Add, mask Where, scalings of the scores, Q K^T
     * MatMul */
    ir_node *core[CORE_MAX];
    int num_core;
    operand_chain ops[3];      /* Q', K^T, V */
    ir_node *after[CHAIN_MAX]; /* Transposes and Reshapes of Y, in order */
    int num_after;
    ir_node *nodes[ATTN_MAX_NODES];
    int num;
    ir_attention a;
    /* a constant mask may become the causal flag (in a shape variant only where it did in the
     * built graph: at a sequence of 1 any mask keeps exactly the keys j <= i) */
    bool may_be_causal;
    /* a window mask (match_window_mask): the Adds of constants whose sum record() makes the
     * mask, which repeats every win_period batch entries */
    ir_node *win_adds[WINDOW_ADDS_MAX];
    int num_win_adds;
    int64_t win_period;
} attn_match;

/* The input whose values a movement node or a scaling moves: the scaled one, else 0. */
static int data_input(const ir_node *n) {
    float f;
    int x = scaling_input(n, &f);
    return x >= 0 ? x : 0;
}

/* Whether n re-indexes its input 0 (a role above, or a constant scaling when scales is set), and
 * reads a float tensor of known dims into its float output `out`. */
static bool movement_node(const ir_node *n, const ir_tensor *out, bool scales, op_pattern *pat) {
    float f;
    if (!n || !known_float(out) || !n->num_inputs || !known_float(n->inputs[data_input(n)]))
        return false;
    if (scales && scaling_input(n, &f) >= 0) {
        pat->kind = OP_PATTERN_NONE;
        return true;
    }
    op_pattern_kind k = role_of(n, pat);
    return k == OP_PATTERN_TRANSPOSE || k == OP_PATTERN_RESHAPE || k == OP_PATTERN_SELECT ||
           k == OP_PATTERN_SPLIT;
}

/* v, a view of n's input 0, becomes the view of n's output out (movement_node's pat). */
static bool view_forward(view *v, const ir_node *n, const ir_tensor *out, const op_pattern *pat) {
    int64_t start[TCI_MAX_RANK], step[TCI_MAX_RANK], len[TCI_MAX_RANK];
    switch (pat->kind) {
    case OP_PATTERN_NONE: break; /* a scaling */
    case OP_PATTERN_TRANSPOSE:
        if (pat->rank != v->rank) return false;
        view_permute(v, pat->perm, false);
        break;
    case OP_PATTERN_RESHAPE:
        if (!view_reshape(v, out->rank, out->dims)) return false;
        break;
    case OP_PATTERN_SELECT: {
        const int drop = pat->drop_axis;
        if (pat->rank != v->rank || out->rank != v->rank - (drop >= 0)) return false;
        for (int d = 0, o = 0; d < v->rank; d++) {
            start[d] = pat->start[d];
            step[d] = pat->step[d];
            len[d] = d == drop ? 1 : out->dims[o++];
        }
        if (!view_select(v, start, step, len, drop)) return false;
        break;
    }
    case OP_PATTERN_SPLIT: {
        const int axis = pat->axis;
        if (out->rank != v->rank || axis < 0 || axis >= v->rank) return false;
        int64_t first = 0;
        int k = 0;
        for (; k < n->num_outputs && n->outputs[k] != out; k++) {
            if (!n->outputs[k] || n->outputs[k]->rank != v->rank || n->outputs[k]->dims[axis] < 0)
                return false;
            first += n->outputs[k]->dims[axis];
        }
        if (k == n->num_outputs) return false;
        for (int d = 0; d < v->rank; d++) {
            start[d] = d == axis ? first : 0;
            step[d] = 1;
            len[d] = d == axis ? out->dims[axis] : v->dims[d];
        }
        if (!view_select(v, start, step, len, -1)) return false;
        break;
    }
    default: return false;
    }
    /* the view must have the output's dims */
    if (v->rank != out->rank) return false;
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] != out->dims[d]) return false;
    return true;
}

/* The view of c's operand (outs[0]) in c->src, through the first num nodes of c (num < c->num:
 * src is outs[num]); false where it is not one stride a dim (dims between may be several). */
static bool chain_view(const operand_chain *c, int num, bool scales, view *v) {
    const ir_tensor *src = num == c->num ? c->src : c->outs[num];
    view_dense(v, src->rank, src->dims);
    for (int i = num - 1; i >= 0; i--) {
        op_pattern pat;
        if (!movement_node(c->nodes[i], c->outs[i], scales, &pat) ||
            !view_forward(v, c->nodes[i], c->outs[i], &pat))
            return false;
    }
    return view_plain(v);
}

/* Whether n may fold into the attention that owner computes: in a shape variant (g->like), only
 * when it did in the graph at the built shapes (nodes are known there by their first output). */
static bool folds_like(const ir_graph *g, const ir_node *n, const ir_node *owner) {
    if (!g->like) return true;
    const ir_tensor *t = n->num_outputs ? n->outputs[0] : NULL;
    const ir_tensor *lt = t ? ir_graph_find_tensor(g->like, t->name) : NULL;
    const ir_tensor *lo = ir_graph_find_tensor(g->like, owner->outputs[0]->name);
    return lt && lo && lt->producer && lo->producer && lt->producer->fused_into == lo->producer;
}

/* Follows operand t back through movement nodes (and, with scales, constant scalings) as far as
 * the operand stays a strided view of what is reached. */
static void walk_operand(const ir_graph *g, const ir_node *pv, ir_tensor *t, bool scales,
                         operand_chain *c) {
    memset(c, 0, sizeof *c);
    c->src = t;
    while (c->num < CHAIN_MAX) {
        ir_node *p = c->src->producer;
        op_pattern pat;
        view v;
        if (!p || c->src->data || c->src->is_graph_output ||
            !movement_node(p, c->src, scales, &pat) || !folds_like(g, p, pv))
            break;
        c->nodes[c->num] = p;
        c->outs[c->num] = c->src;
        c->num++;
        ir_tensor *prev = c->src;
        c->src = p->inputs[data_input(p)];
        if (!chain_view(c, c->num, scales, &v)) {
            c->num--;
            c->src = prev;
            break;
        }
    }
}

static bool in_match(const attn_match *m, const ir_node *n) {
    for (int i = 0; i < m->num; i++)
        if (m->nodes[i] == n) return true;
    return false;
}

/* m->nodes: the core, the chains and the nodes after, each once. */
static void collect_nodes(attn_match *m, ir_node *pv) {
    m->num = 0;
    ir_node *all[ATTN_MAX_NODES];
    int n = 0;
    for (int i = 0; i < m->num_core; i++) all[n++] = m->core[i];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < m->ops[k].num; i++) all[n++] = m->ops[k].nodes[i];
    all[n++] = pv;
    for (int i = 0; i < m->num_after; i++) all[n++] = m->after[i];
    for (int i = 0; i < n; i++)
        if (!in_match(m, all[i])) m->nodes[m->num++] = all[i];
}

/* Whether every reader of t is a node of m (and t is no graph output). */
static bool read_inside(const int *consumers, const attn_match *m, const ir_tensor *t) {
    if (t->is_graph_output) return false;
    int inside = 0;
    for (int i = 0; i < m->num; i++)
        for (int k = 0; k < m->nodes[i]->num_inputs; k++)
            inside += m->nodes[i]->inputs[k] == t;
    return inside == consumers[t->index];
}

/* Shortens the operand chains until no tensor the fused step leaves unwritten is read outside
 * it, and the tensors it reads are not computed inside it; false when nothing changed. */
static bool prune_once(const int *consumers, attn_match *m, ir_node *pv, bool *ok) {
    collect_nodes(m, pv);
    for (int k = 0; k < 3; k++) {
        operand_chain *c = &m->ops[k];
        for (int i = 0; i < c->num; i++) {
            const ir_node *n = c->nodes[i];
            bool private_outputs = true;
            for (int o = 0; o < n->num_outputs && private_outputs; o++)
                if (n->outputs[o]) private_outputs = read_inside(consumers, m, n->outputs[o]);
            if (!private_outputs) {
                c->src = c->outs[i];
                c->num = i;
                return true;
            }
        }
    }
    /* a source computed by a node another chain folded: that chain stops before the node */
    for (int k = 0; k < 3; k++) {
        const ir_node *p = m->ops[k].src->producer;
        if (!p || !in_match(m, p)) continue;
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < m->ops[j].num; i++)
                if (m->ops[j].nodes[i] == p) {
                    m->ops[j].src = m->ops[j].outs[i];
                    m->ops[j].num = i;
                    return true;
                }
        *ok = false; /* a core node computes it: no attention */
        return false;
    }
    return false;
}

/* The four kernel strides (batch, head, position, d) of a logical operand view of rank r. */
static void kernel_strides(const view *v, int r, bool swap_last, int64_t *out) {
    int64_t st[4];
    for (int i = 0; i < r; i++) st[i] = view_stride(v, i);
    if (swap_last) {
        int64_t t = st[r - 1];
        st[r - 1] = st[r - 2];
        st[r - 2] = t;
    }
    if (r == 3) {
        out[0] = 0;
        for (int i = 0; i < 3; i++) out[i + 1] = st[i];
    } else {
        for (int i = 0; i < 4; i++) out[i] = st[i];
    }
}

/* Follows Y forward through single-reader Transposes and Reshapes while Y stays a strided view
 * of the last tensor reached; sets m->after and the Y strides into that tensor. */
static void walk_output(const int *consumers, const ir_graph *g, ir_node *pv, attn_match *m,
                        int64_t *y_strides) {
    ir_tensor *y = pv->outputs[0];
    const int r = y->rank;
    view v;
    view_dense(&v, y->rank, y->dims);
    kernel_strides(&v, r, false, y_strides);
    m->num_after = 0;
    for (;;) {
        ir_tensor *t = m->num_after ? m->after[m->num_after - 1]->outputs[0] : y;
        if (!private_tensor(consumers, t) || m->num_after == CHAIN_MAX) return;
        ir_node *next = ir_graph_reader(g, t, pv->index + 1, NULL);
        op_pattern pat;
        if (!next || next->inputs[0] != t || next->num_outputs != 1 ||
            !movement_node(next, next->outputs[0], false, &pat) || !folds_like(g, next, pv) ||
            (pat.kind != OP_PATTERN_TRANSPOSE && pat.kind != OP_PATTERN_RESHAPE))
            return;
        /* Y in the new last tensor: back from its dense view through the inverses */
        m->after[m->num_after++] = next;
        view_dense(&v, next->outputs[0]->rank, next->outputs[0]->dims);
        bool ok = true;
        for (int i = m->num_after - 1; i >= 0 && ok; i--) {
            const ir_node *n = m->after[i];
            const ir_tensor *in = n->inputs[0];
            role_of(n, &pat);
            if (pat.kind == OP_PATTERN_RESHAPE) {
                ok = view_reshape(&v, in->rank, in->dims);
            } else {
                ok = pat.rank == v.rank;
                if (ok) view_permute(&v, pat.perm, true);
            }
        }
        if (!ok || v.rank != r || !view_plain(&v)) {
            m->num_after--;
            return;
        }
        kernel_strides(&v, r, false, y_strides);
    }
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

/* The scores chain below the Softmax's input x: optional constant scalings (their product
 * into *scale), then a MatMul with Q' and K'; the nodes into m->core. */
static bool match_scores(const int *consumers, ir_tensor *x, attn_match *m, float *scale,
                         ir_node **out_qk) {
    float f;
    int i;
    for (int steps = 0; steps < 3; steps++) {
        ir_node *p = x->producer;
        if (!private_tensor(consumers, x) || (i = scaling_input(p, &f)) < 0) break;
        *scale *= f;
        m->core[m->num_core++] = p;
        x = p->inputs[i];
    }
    ir_node *qk = x->producer;
    op_pattern pat;
    if (!private_tensor(consumers, x) || role_of(qk, &pat) != OP_PATTERN_MATMUL ||
        qk->num_inputs != 2)
        return false;
    m->core[m->num_core++] = qk;
    *out_qk = qk;
    return true;
}

/* Whether t's dims are known and broadcast into scores' (right-aligned; 1 or equal). */
static bool broadcasts(const ir_tensor *t, const ir_tensor *scores) {
    if (!t || t->rank < 0 || t->rank > scores->rank) return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) return false;
    for (int i = 0; i < t->rank; i++) {
        int64_t d = t->dims[i], s = scores->dims[scores->rank - t->rank + i];
        if (d != 1 && d != s) return false;
    }
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

/* A constant bool that is true exactly at the keys j <= i of a (q_len, kv_len) score matrix,
 * broadcast over every leading dim: a causal mask built as bools. */
static bool is_causal_keep(const ir_tensor *t, int64_t q_len, int64_t kv_len) {
    if (!t->data || t->dtype != TCI_DTYPE_BOOL || t->rank < 2 ||
        t->dims[t->rank - 2] != q_len || t->dims[t->rank - 1] != kv_len)
        return false;
    for (int i = 0; i < t->rank - 2; i++)
        if (t->dims[i] != 1) return false;
    const uint8_t *v = t->data;
    for (int64_t i = 0; i < q_len; i++)
        for (int64_t j = 0; j < kv_len; j++)
            if ((v[i * kv_len + j] != 0) != (j <= i)) return false;
    return true;
}

/* keep as the step reads it: an Expand's input in its place (broadcast strides read the same
 * values), then, for a -inf fill, And(causal constant, x) as x with the causal flag (the step
 * skips the keys past the query instead of reading them; with a finite fill a row that keeps no
 * key averages V over every key, the causal ones too, so there it stays a read mask). */
static ir_tensor *reduce_keep(ir_tensor *keep, const ir_tensor *scores, bool minus_inf,
                              bool may_be_causal, bool *causal) {
    *causal = false;
    op_pattern pat;
    ir_node *p = keep->producer;
    if (p && role_of(p, &pat) == OP_PATTERN_BROADCAST && p->num_inputs >= 1 && p->inputs[0] &&
        p->inputs[0]->dtype == TCI_DTYPE_BOOL && broadcasts(p->inputs[0], scores))
        keep = p->inputs[0];
    p = keep->producer;
    if (!may_be_causal || !minus_inf || !p || !p->desc || p->desc->binary != BINARY_AND ||
        p->num_inputs != 2 || p->fused_into || p->epilogue)
        return keep;
    const int r = scores->rank;
    for (int side = 0; side < 2; side++) {
        ir_tensor *c = p->inputs[side], *x = p->inputs[1 - side];
        if (c && x && x->dtype == TCI_DTYPE_BOOL && broadcasts(x, scores) &&
            is_causal_keep(c, scores->dims[r - 2], scores->dims[r - 1])) {
            *causal = true;
            return x;
        }
    }
    return keep;
}

/* The mask Where(keep, 0, fill) added to the scores: keep a computed bool of known dims
 * broadcasting into them (a constant one folded the Where to a constant mask: is_causal_mask),
 * 0 and fill constant scalars, mask read by the Add alone; fill -inf needs the NaN guard
 * (guarded), a finite fill must be at most -1e30 (every score of the row rounds to fill when it
 * is added, so equal scores stay equal). Sets m->a.keep (reduce_keep), causal and keep_row_mean,
 * and adds the Where to the core. */
static bool match_keep(const int *consumers, ir_tensor *mask, const ir_tensor *scores,
                       bool guarded, attn_match *m) {
    ir_node *w = mask->producer;
    float zero, fill;
    if (!private_tensor(consumers, mask) || !w || !w->desc || w->desc->binary != BINARY_WHERE ||
        w->num_inputs != 3 || w->fused_into || w->epilogue || m->num_core >= CORE_MAX)
        return false;
    ir_tensor *keep = w->inputs[0];
    if (!keep || keep->dtype != TCI_DTYPE_BOOL || !broadcasts(keep, scores) ||
        !same_dims(keep, mask) || !ir_float_scalar(w->inputs[1], &zero) || zero != 0.0f ||
        !ir_float_scalar(w->inputs[2], &fill))
        return false;
    if (keep->data || (fill == -INFINITY ? !guarded : !(isfinite(fill) && fill <= -1e30f)))
        return false;
    m->core[m->num_core++] = w;
    m->a.keep = reduce_keep(keep, scores, fill == -INFINITY, m->may_be_causal, &m->a.causal);
    m->a.keep_row_mean = fill != -INFINITY;
    return true;
}

/* The input of Add n that is a float constant broadcasting into its other input, whose dims
 * are the Add's output's: its index, else -1. */
static int constant_addend(const ir_node *n) {
    if (!n || !n->desc || n->desc->binary != BINARY_ADD || n->num_inputs != 2 || n->fused_into ||
        n->epilogue || !n->outputs[0])
        return -1;
    for (int side = 0; side < 2; side++) {
        const ir_tensor *c = n->inputs[side], *x = n->inputs[1 - side];
        if (c && x && c != x && c->data && known_float(c) && !x->data && known_float(x) &&
            same_dims(x, n->outputs[0]) && broadcasts(c, x))
            return side;
    }
    return -1;
}

/* After how many entries of its leading dim (of `entry` elements each) the constant c, added
 * to a tensor of dims d (c right-aligned, broadcasting), repeats: its values depend on the
 * flat index modulo the product of d from c's outermost dim that is not 1. 0 where that
 * product neither divides entry nor is a multiple of it. */
static int64_t addend_period(const ir_tensor *c, const ir_tensor *d, int64_t entry) {
    int k = d->rank;
    for (int i = 0; i < c->rank; i++)
        if (c->dims[i] != 1) {
            k = d->rank - c->rank + i;
            break;
        }
    int64_t span = 1;
    for (int i = k; i < d->rank; i++) span *= d->dims[i];
    if (span % entry == 0) return span / entry;
    return entry % span == 0 ? 1 : 0;
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Swin's shifted windows: between the scores and the Softmax's input x, Reshapes and Adds of
 * constants only, such as
 *   S + bias(1, h, N, N) -> Reshape(B, nW, h, N, N) -> + mask(1, nW, 1, N, N) -> Reshape(B nW, h, N, N)
 * (the windows of each image share the nW masks). Their sum is one additive mask of the scores'
 * dims that repeats along the batch (the scores' dim 0) every win_period entries; the Adds go
 * into m->win_adds, every node into the core, and record() makes the mask. At least one
 * Reshape: a single Add of a broadcasting mask is the usual mask. */
static bool match_window_mask(const int *consumers, ir_tensor *x, attn_match *m, float *scale,
                              ir_node **out_qk) {
    const int mark = m->num_core;
    int reshapes = 0;
    m->num_win_adds = 0;
    ir_tensor *t = x;
    for (int steps = 0; steps < 2 * WINDOW_ADDS_MAX; steps++) {
        ir_node *p = t->producer;
        op_pattern pat;
        int side;
        if (!private_tensor(consumers, t) || !p || p->fused_into || p->epilogue ||
            m->num_core >= CORE_MAX - 4)
            break;
        if (role_of(p, &pat) == OP_PATTERN_RESHAPE && p->num_inputs >= 1 &&
            known_float(p->inputs[0]) && known_float(t)) {
            m->core[m->num_core++] = p;
            reshapes++;
            t = p->inputs[0];
        } else if (m->num_win_adds < WINDOW_ADDS_MAX && (side = constant_addend(p)) >= 0) {
            m->core[m->num_core++] = p;
            m->win_adds[m->num_win_adds++] = p;
            t = p->inputs[1 - side];
        } else {
            break;
        }
    }
    float f = 1.0f;
    ir_node *qk = NULL;
    if (reshapes && m->num_win_adds && match_scores(consumers, t, m, &f, &qk) &&
        qk->outputs[0]->rank == 4 && same_dims(t, qk->outputs[0]) && same_dims(x, t)) {
        const ir_tensor *sc = qk->outputs[0];
        const int64_t entry = sc->dims[1] * sc->dims[2] * sc->dims[3];
        int64_t period = 1;
        for (int i = 0; i < m->num_win_adds && period; i++) {
            const ir_node *a = m->win_adds[i];
            const int side = constant_addend(a);
            const int64_t per = addend_period(a->inputs[side], a->inputs[1 - side], entry);
            period = per ? period / gcd64(period, per) * per : 0;
        }
        if (period && sc->dims[0] % period == 0 && period * entry <= WINDOW_MASK_MAX) {
            m->win_period = period;
            *scale *= f;
            *out_qk = qk;
            return true;
        }
    }
    m->num_core = mark;
    m->num_win_adds = 0;
    return false;
}

/* The mask match_window_mask found, of dims (win_period, h, Sq, Sk): at each flat index of the
 * scores, the sum of every Add's constant at its place in that Add's dims. */
static tci_status make_window_mask(ir_graph *g, attn_match *m, const ir_tensor *scores) {
    const int64_t entry = scores->dims[1] * scores->dims[2] * scores->dims[3];
    const int64_t n = m->win_period * entry;
    TRY_STATUS(ir_graph_charge_constant(g, "an attention's window mask", n, sizeof(float)));
    float *sum = calloc((size_t)n, sizeof(float));
    if (!sum) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory making a window mask");
    for (int i = 0; i < m->num_win_adds; i++) {
        const ir_node *a = m->win_adds[i];
        const int side = constant_addend(a);
        const ir_tensor *c = a->inputs[side], *d = a->inputs[1 - side];
        const float *cv = c->data;
        int64_t cst[TCI_MAX_RANK];
        op_strides(c->rank, c->dims, cst);
        for (int64_t f = 0; f < n; f++) {
            int64_t rest = f, at = 0;
            for (int k = d->rank - 1; k >= 0; k--) {
                const int64_t idx = rest % d->dims[k];
                rest /= d->dims[k];
                const int ck = k - (d->rank - c->rank);
                if (ck >= 0 && c->dims[ck] != 1) at += idx * cst[ck];
            }
            sum[f] += cv[at];
        }
    }
    const int64_t dims[4] = {m->win_period, scores->dims[1], scores->dims[2], scores->dims[3]};
    tci_status st = ir_graph_add_float_constant(g, sum, 4, dims, &m->a.mask);
    free(sum);
    if (st != TCI_OK) return st;
    m->a.mask_batch_mod = m->win_period > 1 && m->win_period < scores->dims[0] ? m->win_period : 0;
    return TCI_OK;
}

/* The NaN guard Where(IsNaN(p), 0, p) that Hugging Face's exports put between the softmax and
 * the P V MatMul, reading probs: p, read by the guard's two nodes alone, else probs itself (no
 * guard); *guarded says which. The guard's nodes go into the core. */
static ir_tensor *skip_nan_guard(const int *consumers, ir_tensor *probs, attn_match *m,
                                 bool *guarded) {
    *guarded = false;
    ir_node *w = probs->producer;
    float zero;
    op_pattern pat;
    if (!private_tensor(consumers, probs) || !w || !w->desc || w->desc->binary != BINARY_WHERE ||
        w->num_inputs != 3 || w->fused_into || w->epilogue)
        return probs;
    ir_tensor *cond = w->inputs[0], *p = w->inputs[2];
    ir_node *test = cond ? cond->producer : NULL;
    if (!p || p->data || p->is_graph_output || consumers[p->index] != 2 ||
        !private_tensor(consumers, cond) || role_of(test, &pat) != OP_PATTERN_IS_NAN ||
        test->num_inputs != 1 || test->inputs[0] != p || !ir_float_scalar(w->inputs[1], &zero) ||
        zero != 0.0f || !same_dims(p, probs))
        return probs;
    m->core[m->num_core++] = w;
    m->core[m->num_core++] = test;
    *guarded = true;
    return p;
}

static int cmp_index(const void *a, const void *b) {
    size_t x = (*(ir_node *const *)a)->index, y = (*(ir_node *const *)b)->index;
    return x < y ? -1 : x > y;
}

/* Whether pv's attention may take the causal flag: always, except in a shape variant
 * (g->like), where only when the built graph's did. */
static bool causal_like(const ir_graph *g, const ir_node *pv) {
    if (!g->like) return true;
    const ir_tensor *t = ir_graph_find_tensor(g->like, pv->outputs[0]->name);
    const ir_node *p = t ? t->producer : NULL;
    return p && p->epilogue && p->epilogue->attention && p->epilogue->attention->causal;
}

/* The attention ending at pv, the MatMul of the probabilities and V, into m. */
static bool match_attention(const int *consumers, const ir_graph *g, ir_node *pv,
                            attn_match *m) {
    op_pattern pat;
    memset(m, 0, sizeof *m);
    if (role_of(pv, &pat) != OP_PATTERN_MATMUL || pv->num_inputs != 2 || !pv->outputs[0])
        return false;
    m->may_be_causal = causal_like(g, pv);
    ir_tensor *v_in = pv->inputs[1];
    bool guarded;
    ir_tensor *probs = skip_nan_guard(consumers, pv->inputs[0], m, &guarded);
    ir_node *sm = probs->producer;
    if ((!guarded && !private_tensor(consumers, probs)) ||
        role_of(sm, &pat) != OP_PATTERN_SOFTMAX_LAST)
        return false;
    m->core[m->num_core++] = sm;
    ir_tensor *x = sm->inputs[0];
    ir_node *qk = NULL, *add = x->producer;
    float scale = 1.0f;
    int mark = m->num_core;
    if (private_tensor(consumers, x) && add && add->desc && add->desc->binary == BINARY_ADD &&
        add->num_inputs == 2 && !add->fused_into && !add->epilogue) {
        for (int side = 0; side < 2 && !qk; side++) {
            m->num_core = mark;
            m->core[m->num_core++] = add;
            ir_tensor *mask = add->inputs[1 - side];
            scale = 1.0f;
            if (add->inputs[side] == mask || !add->inputs[side] || !mask) continue;
            if (!match_scores(consumers, add->inputs[side], m, &scale, &qk)) continue;
            const ir_tensor *sc = qk->outputs[0];
            if (!same_dims(add->outputs[0], sc)) qk = NULL;
            else if (!match_keep(consumers, mask, sc, guarded, m)) {
                if (mask_fits(mask, sc)) m->a.mask = mask;
                else qk = NULL;
            }
        }
    }
    if (!qk) {
        m->num_core = mark;
        m->a.mask = m->a.keep = NULL;
        m->a.causal = m->a.keep_row_mean = false;
        scale = 1.0f;
        if (!match_window_mask(consumers, x, m, &scale, &qk) &&
            !match_scores(consumers, x, m, &scale, &qk))
            return false;
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
    /* the operand chains stop where anything outside reads a tensor (prune_once) */
    walk_operand(g, pv, qk->inputs[0], true, &m->ops[0]);
    walk_operand(g, pv, qk->inputs[1], true, &m->ops[1]);
    walk_operand(g, pv, v_in, false, &m->ops[2]);
    walk_output(consumers, g, pv, m, m->a.y_strides);
    /* shorten the chains until the step is closed; then every chain's view, shortening a chain
     * whose view from its new source strides cannot say */
    bool ok = true;
    for (int rounds = 0; rounds < 4 * 3 * CHAIN_MAX + 8 && ok; rounds++) {
        if (prune_once(consumers, m, pv, &ok)) continue;
        if (!ok) break;
        bool shortened = false;
        view views[3];
        for (int k = 0; k < 3; k++) {
            operand_chain *c = &m->ops[k];
            while (!chain_view(c, c->num, k < 2, &views[k])) {
                c->num--;
                c->src = c->outs[c->num];
                shortened = true;
            }
        }
        if (shortened) continue;
        /* closed: record */
        float f = 1.0f;
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < m->ops[k].num; i++)
                if (scaling_input(m->ops[k].nodes[i], &f) >= 0) scale *= f;
        m->a.q = m->ops[0].src;
        m->a.k = m->ops[1].src;
        m->a.v = m->ops[2].src;
        kernel_strides(&views[0], r, false, m->a.q_strides);
        kernel_strides(&views[1], r, true, m->a.k_strides); /* K is K^T's last two dims */
        kernel_strides(&views[2], r, false, m->a.v_strides);
        m->a.q_offset = views[0].offset;
        m->a.k_offset = views[1].offset;
        m->a.v_offset = views[2].offset;
        m->a.rank = r;
        m->a.batch = r == 4 ? s->dims[0] : 1;
        m->a.heads = s->dims[r - 3];
        m->a.q_len = sq;
        m->a.kv_len = sk;
        m->a.head_dim = d;
        m->a.scale = scale;
        if (!isfinite(m->a.scale) || m->a.scale == 0.0f || m->num >= ATTN_MAX_NODES) return false;
        if (m->a.mask && m->may_be_causal && is_causal_mask(m->a.mask, sq, sk)) {
            m->a.causal = true;
            m->a.mask = NULL;
        }
        /* the masks and sources come from outside the step */
        const ir_tensor *outside[5] = {m->a.q, m->a.k, m->a.v, m->a.mask, m->a.keep};
        for (int k = 0; k < 5; k++)
            if (outside[k] && outside[k]->producer && in_match(m, outside[k]->producer))
                return false;
        qsort(m->nodes, (size_t)m->num, sizeof m->nodes[0], cmp_index);
        for (int i = 0; i < m->num; i++)
            if (m->nodes[i] == pv) m->a.owner = i;
        /* every node before the owner comes before it in the graph, the rest after */
        return m->a.owner == m->num - 1 - m->num_after;
    }
    return false;
}

static tci_status record(ir_graph *g, ir_node *pv, attn_match *m) {
    ir_epilogue e;
    memset(&e, 0, sizeof e);
    if (m->num_win_adds) TRY_STATUS(make_window_mask(g, m, pv->inputs[0]));
    /* the computing nodes by op type; the movement nodes folded into the strides by count */
    char label[256] = "";
    int moves = 0;
    for (int i = 0; i < m->num; i++) {
        op_pattern pat;
        op_pattern_kind k = role_of(m->nodes[i], &pat);
        if (k == OP_PATTERN_TRANSPOSE || k == OP_PATTERN_RESHAPE || k == OP_PATTERN_SELECT ||
            k == OP_PATTERN_SPLIT) {
            moves++;
            continue;
        }
        if (label[0]) strncat(label, "+", sizeof label - strlen(label) - 1);
        strncat(label, m->nodes[i]->op_type, sizeof label - strlen(label) - 1);
    }
    strncat(label,
            m->a.causal && m->a.keep ? " (attention, causal, bool mask)"
            : m->a.causal            ? " (attention, causal)"
            : m->a.keep              ? (m->a.keep_row_mean ? " (attention, bool mask, finite fill)"
                                                           : " (attention, bool mask)")
            : m->num_win_adds        ? " (attention, window mask)"
                                     : " (attention)",
            sizeof label - strlen(label) - 1);
    if (moves)
        snprintf(label + strlen(label), sizeof label - strlen(label),
                 " reading through %d movement nodes", moves);
    e.output = m->num_after ? m->after[m->num_after - 1]->outputs[0] : pv->outputs[0];
    e.label = arena_strdup(g->arena, label);
    m->a.nodes = arena_memdup(g->arena, m->nodes, (size_t)m->num * sizeof m->nodes[0]);
    m->a.num_nodes = m->num;
    e.attention = arena_memdup(g->arena, &m->a, sizeof m->a);
    pv->epilogue = e.label && m->a.nodes && e.attention ? arena_memdup(g->arena, &e, sizeof e)
                                                        : NULL;
    if (!pv->epilogue) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing attention");
    for (int i = 0; i < m->num; i++)
        if (m->nodes[i] != pv) m->nodes[i]->fused_into = pv;
    return TCI_OK;
}

/* Whether t is read, through at most 4 Reshapes and Adds, by a Softmax over its last axis. */
static bool softmax_follows(const ir_graph *g, const int *consumers, const ir_tensor *t) {
    for (int steps = 0; steps < 5; steps++) {
        const ir_node *next = ir_graph_sole_reader(g, consumers, t);
        if (!next) return false;
        op_pattern pat;
        const op_pattern_kind kind = role_of(next, &pat);
        if (kind == OP_PATTERN_SOFTMAX_LAST) return true;
        if (kind != OP_PATTERN_RESHAPE && !(next->desc && next->desc->binary == BINARY_ADD))
            return false;
        t = next->outputs[0];
    }
    return false;
}

/* Swin v2's cosine attention scales each head's scores by its own constant (the clamped exp of
 * a learnt logit scale): Mul(MatMul(Q', K'), c) with c of dims (h, 1, 1), which the step's one
 * scale cannot hold. The same product is Q' scaled per head, so the Mul moves before the
 * MatMul: MatMul(Mul(Q', c), K'), computed by a step of its own on Q' (D values a query row
 * instead of Sk), and the scores are the MatMul's again. Only where a Softmax over the last axis
 * reads the scores (through Adds and Reshapes), c is not a scalar (a scalar is the step's
 * scale already), varies only over the scores' dims before the last two, and Q' has the
 * scores' leading dims. */
static tci_status move_head_scales(ir_graph *g, bool *moved) {
    *moved = false;
    int *consumers = ir_graph_count_readers(g);
    if (!consumers) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing attention");
    for (size_t i = 0; i < g->num_nodes; i++) {
        ir_node *mul = g->nodes[i];
        if (!mul->desc || mul->desc->binary != BINARY_MUL || mul->num_inputs != 2 ||
            mul->fused_into || mul->epilogue || !mul->outputs[0])
            continue;
        for (int side = 0; side < 2; side++) {
            ir_tensor *c = mul->inputs[side], *x = mul->inputs[1 - side];
            ir_node *mm = x ? x->producer : NULL;
            op_pattern pat;
            float f;
            if (!c || !c->data || !known_float(c) || ir_float_scalar(c, &f) || !x ||
                !private_tensor(consumers, x) || role_of(mm, &pat) != OP_PATTERN_MATMUL ||
                mm->num_inputs != 2 || !known_float(x) || x->rank < 3 || !broadcasts(c, x) ||
                !same_dims(x, mul->outputs[0]))
                continue;
            const ir_tensor *a = mm->inputs[0];
            bool fits = a && known_float(a) && a->rank == x->rank;
            for (int k = 0; fits && k < c->rank; k++) {
                const int d = x->rank - c->rank + k;
                fits = d < x->rank - 2 ? true : c->dims[k] == 1;
            }
            for (int k = 0; fits && k < x->rank - 2; k++) fits = a->dims[k] == x->dims[k];
            if (!fits || !softmax_follows(g, consumers, mul->outputs[0])) continue;
            /* Mul(Q', c) -> q2, MatMul(q2, K') -> the Mul's output; x is read no more */
            ir_tensor *q2, *scores = mul->outputs[0];
            tci_status st = ir_graph_add_tensor(g, NULL, &q2);
            if (st != TCI_OK) {
                free(consumers);
                return st;
            }
            q2->dtype = a->dtype;
            q2->rank = a->rank;
            memcpy(q2->dims, a->dims, sizeof(int64_t) * (size_t)a->rank);
            mul->inputs[1 - side] = mm->inputs[0];
            mul->outputs[0] = q2;
            mm->inputs[0] = q2;
            mm->outputs[0] = scores;
            consumers[x->index] = 0;
            *moved = true;
            break;
        }
    }
    free(consumers);
    return *moved ? ir_graph_sort(g) : TCI_OK;
}

static tci_status fuse_all(ir_graph *g) {
    int *consumers = ir_graph_count_readers(g);
    if (!consumers) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing attention");
    tci_status st = TCI_OK;
    attn_match *m = malloc(sizeof *m);
    if (!m) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory fusing attention");
    for (size_t i = 0; st == TCI_OK && i < g->num_nodes; i++) {
        ir_node *n = g->nodes[i];
        if (!n->fused_into && !n->epilogue && match_attention(consumers, g, n, m))
            st = record(g, n, m);
    }
    free(m);
    free(consumers);
    return st;
}

/* The row Transposes around the projections moved first (rows.c), kept where a step folds them. */
tci_status pass_fuse_attention(ir_graph *g) {
    bool moved;
    TRY_STATUS(move_head_scales(g, &moved));
    rows_moves moves;
    TRY_STATUS(rows_move_transposes(g, &moves));
    bool refuse = false;
    tci_status st = fuse_all(g);
    tci_status kept = rows_keep_folded(g, &moves, &refuse);
    if (st == TCI_OK) st = kept;
    return st == TCI_OK && refuse ? fuse_all(g) : st;
}
