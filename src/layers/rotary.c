/* Op family 'rotary': RotaryEmbedding (opset 23), rotary positional embeddings. Each head's first
 * rotary_embedding_dim values are rotated in pairs (the two halves, or neighbours when
 * interleaved) by the angle whose cosine and sine the caches hold for the token's position; the
 * rest are copied. X is (batch, heads, seq, head_size) or (batch, seq, heads * head_size). On the
 * GPU: one step, src/kernels/rope.cu. */
#include <string.h>

#include "layers/op.h"

typedef struct rotary_params {
    int interleaved;
    int64_t rotary_dim; /* 0: the whole head */
    int64_t num_heads;  /* 0: not given */
} rotary_params;

static tci_status rotary_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 3, 4, 1, 1));
    static const char *const known[] = {"interleaved", "num_heads", "rotary_embedding_dim", NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    OP_ALLOC_PARAMS(node, arena, rotary_params, p);
    TRY_STATUS(op_read_flag(node, "interleaved", 0, &p->interleaved));
    TRY_STATUS(ir_attr_int(node, "rotary_embedding_dim", 0, &p->rotary_dim));
    TRY_STATUS(ir_attr_int(node, "num_heads", 0, &p->num_heads));
    if (p->rotary_dim < 0 || p->rotary_dim % 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "rotary_embedding_dim is %lld; must be even and >= 0 (0: the whole "
                             "head)",
                             (long long)p->rotary_dim);
    if (p->num_heads < 0 || (ir_node_attr(node, "num_heads") && p->num_heads == 0))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "num_heads is %lld; must be >= 1",
                             (long long)p->num_heads);
    return TCI_OK;
}

/* The input's geometry; -1 where unknown. */
typedef struct rotary_geom {
    int64_t batch, heads, seq, head, rot;
} rotary_geom;

static tci_status rotary_geometry(const ir_node *node, const tci_tensor *x, rotary_geom *g) {
    const rotary_params *p = node->params;
    if (x->rank != 3 && x->rank != 4)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "X has rank %d; expected (batch, heads, seq, head_size) or (batch, "
                             "seq, hidden)",
                             x->rank);
    g->batch = x->dims[0];
    if (x->rank == 4) {
        g->heads = x->dims[1];
        g->seq = x->dims[2];
        g->head = x->dims[3];
        if (p->num_heads && g->heads >= 0 && p->num_heads != g->heads)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "num_heads is %lld but the 4-D X has %lld heads",
                                 (long long)p->num_heads, (long long)g->heads);
    } else {
        if (!p->num_heads)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "a 3-D X needs the attribute num_heads");
        int64_t hidden = x->dims[2];
        g->heads = p->num_heads;
        g->seq = x->dims[1];
        if (hidden >= 0 && hidden % p->num_heads)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "hidden size %lld is not a multiple of num_heads %lld",
                                 (long long)hidden, (long long)p->num_heads);
        g->head = hidden >= 0 ? hidden / p->num_heads : -1;
    }
    g->rot = p->rotary_dim ? p->rotary_dim : g->head;
    if (g->head >= 0 && (g->rot > g->head || g->rot % 2))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "rotary_embedding_dim %lld does not fit head size %lld (even, at most "
                             "the head size)",
                             (long long)g->rot, (long long)g->head);
    return TCI_OK;
}

/* A dim that must be want or, for a batch dim, 1; unknown values pass. */
static bool dim_fits(int64_t d, int64_t want, bool may_broadcast) {
    return d < 0 || want < 0 || d == want || (may_broadcast && d == 1);
}

static tci_status rotary_infer(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out) {
    const tci_tensor *x = in[0], *cos = in[1], *sin = in[2];
    const tci_tensor *pos = node->num_inputs > 3 ? in[3] : NULL;
    for (int i = 0; i < 3; i++) TRY_STATUS(op_check_dtype(node, in[i], i, op_float_types));
    if (pos) TRY_STATUS(op_check_dtype(node, pos, 3, (const tci_dtype[]){TCI_DTYPE_INT64, 0}));
    TRY_STATUS(op_check_same_dtype(node, x, 0, cos, 1));
    TRY_STATUS(op_check_same_dtype(node, x, 0, sin, 2));
    if (x->rank < 0) {
        op_set_unknown(out[0], x->dtype);
        return TCI_OK;
    }
    rotary_geom g;
    TRY_STATUS(rotary_geometry(node, x, &g));
    int64_t half = g.rot >= 0 ? g.rot / 2 : -1;
    /* caches: (positions, rot/2) with position_ids (batch, seq), else (batch, seq, rot/2); a
     * batch dim of 1 serves every batch */
    int want_rank = pos ? 2 : 3;
    for (int i = 1; i < 3; i++) {
        const tci_tensor *c = in[i];
        if (c->rank < 0) continue;
        bool ok = c->rank == want_rank && dim_fits(c->dims[want_rank - 1], half, false);
        if (ok && !pos)
            ok = dim_fits(c->dims[0], g.batch, true) && dim_fits(c->dims[1], g.seq, false);
        if (!ok) {
            char cs[128];
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "%s has shape %s; expected %s with a last dim of %lld "
                                 "(rotary_embedding_dim / 2)",
                                 i == 1 ? "cos_cache" : "sin_cache",
                                 ir_format_dims(c->rank, c->dims, cs, sizeof cs),
                                 pos ? "(max_position_id + 1, n) with position_ids"
                                     : "(batch, seq, n) without position_ids",
                                 (long long)half);
        }
    }
    if (cos->rank >= 0 && sin->rank == cos->rank)
        for (int d = 0; d < cos->rank; d++)
            if (cos->dims[d] >= 0 && sin->dims[d] >= 0 && cos->dims[d] != sin->dims[d]) {
                char cs[128], ss[128];
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "cos_cache %s and sin_cache %s differ in shape",
                                     ir_format_dims(cos->rank, cos->dims, cs, sizeof cs),
                                     ir_format_dims(sin->rank, sin->dims, ss, sizeof ss));
            }
    if (pos && pos->rank >= 0 &&
        (pos->rank != 2 || !dim_fits(pos->dims[0], g.batch, true) ||
         !dim_fits(pos->dims[1], g.seq, false))) {
        char ps[128];
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "position_ids has shape %s; expected (batch %lld, seq %lld)",
                             ir_format_dims(pos->rank, pos->dims, ps, sizeof ps),
                             (long long)g.batch, (long long)g.seq);
    }
    op_same_shape(out[0], x);
    return TCI_OK;
}

static tci_status rotary_forward(const ir_node *node, const tci_tensor *const *in,
                                 tci_tensor *const *out) {
    const rotary_params *p = node->params;
    const tci_tensor *x = in[0], *cos = in[1], *sin = in[2];
    const tci_tensor *pos = node->num_inputs > 3 ? in[3] : NULL;
    rotary_geom g;
    TRY_STATUS(rotary_geometry(node, x, &g));
    const int64_t half = g.rot / 2;
    const bool four_d = x->rank == 4;
    const float *xd = x->data, *cd = cos->data, *sd = sin->data;
    float *y = out[0]->data;
    /* a cache or position_ids of batch 1 serves every batch */
    const tci_tensor *by_batch = pos ? pos : cos;
    const bool one_batch = by_batch->dims[0] == 1;
    const int64_t positions = pos ? cos->dims[0] : 0;
    for (int64_t b = 0; b < g.batch; b++)
        for (int64_t s = 0; s < g.seq; s++) {
            int64_t row = (one_batch ? 0 : b) * g.seq + s;
            if (pos) {
                int64_t id = ((const int64_t *)pos->data)[row];
                if (id < 0 || id >= positions)
                    return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                                         "position id %lld (batch %lld, token %lld) is outside "
                                         "the caches' %lld positions",
                                         (long long)id, (long long)b, (long long)s,
                                         (long long)positions);
                row = id;
            }
            const float *c = cd + row * half, *sn = sd + row * half;
            for (int64_t h = 0; h < g.heads; h++) {
                int64_t at = four_d ? ((b * g.heads + h) * g.seq + s) * g.head
                                    : (b * g.seq + s) * g.heads * g.head + h * g.head;
                const float *src = xd + at;
                float *dst = y + at;
                for (int64_t i = 0; i < half; i++) {
                    /* the pair rotated: neighbours (2i, 2i+1) or the halves' (i, i + half) */
                    int64_t i1 = p->interleaved ? 2 * i : i;
                    int64_t i2 = p->interleaved ? 2 * i + 1 : i + half;
                    float x1 = src[i1], x2 = src[i2];
                    dst[i1] = c[i] * x1 - sn[i] * x2;
                    dst[i2] = sn[i] * x1 + c[i] * x2;
                }
                memcpy(dst + g.rot, src + g.rot, (size_t)(g.head - g.rot) * sizeof *dst);
            }
        }
    return TCI_OK;
}

/* One PLAN_STEP_ROTARY (src/kernels/rope.h) over the dense X, caches and position ids. */
static tci_status rotary_gpu_lower(plan_builder *b, const ir_node *node) {
    const rotary_params *p = node->params;
    const ir_tensor *x = node->inputs[0], *cos = node->inputs[1], *sin = node->inputs[2];
    const ir_tensor *pos = node->num_inputs > 3 ? node->inputs[3] : NULL;
    const ir_tensor *y = node->outputs[0];
    TRY_STATUS(lower_require_known(node, x));
    TRY_STATUS(lower_require_known(node, cos));
    TRY_STATUS(lower_require_known(node, sin));
    if (pos) TRY_STATUS(lower_require_known(node, pos));
    tci_tensor xv;
    ir_tensor_view(x, &xv);
    rotary_geom g;
    TRY_STATUS(rotary_geometry(node, &xv, &g));
    if (pos && cos->dims[0] == 0 && lower_count(x) > 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the caches hold no position for position_ids to name");
    int xi, ci, si, pi = -1, yt;
    TRY_STATUS(lower_input(b, node, x, PLAN_LAYOUT_DENSE, &xi));
    TRY_STATUS(lower_input(b, node, cos, PLAN_LAYOUT_DENSE, &ci));
    TRY_STATUS(lower_input(b, node, sin, PLAN_LAYOUT_DENSE, &si));
    if (pos) TRY_STATUS(lower_input(b, node, pos, PLAN_LAYOUT_DENSE, &pi));
    TRY_STATUS(lower_output(b, node, y, &yt));
    plan_step *s;
    TRY_STATUS(lower_step(b, PLAN_STEP_ROTARY, node, NULL, &s));
    s->u.rotary.batch = g.batch;
    s->u.rotary.heads = g.heads;
    s->u.rotary.seq = g.seq;
    s->u.rotary.head_size = g.head;
    s->u.rotary.rotary_dim = g.rot;
    s->u.rotary.heads_first = x->rank == 4;
    s->u.rotary.interleaved = p->interleaved != 0;
    /* a cache or position_ids of batch 1 serves every batch (rotary_infer checked the shapes) */
    s->u.rotary.cache_batch = pos ? 1 : cos->dims[0];
    s->u.rotary.positions = pos ? cos->dims[0] : 0;
    s->u.rotary.ids_batch = pos ? pos->dims[0] : 1;
    lower_step_io(s, 4, (int[]){xi, ci, si, pi}, 1, &yt);
    return TCI_OK;
}

OP_DESC(rotary_desc, "RotaryEmbedding", OP_VERSIONS(23), rotary_parse, rotary_infer,
        rotary_forward, 0, rotary_gpu_lower, NULL, BINARY_NONE);

const op_desc *const layer_rotary_ops[] = {&rotary_desc, NULL};
