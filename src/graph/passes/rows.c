/* Row permutations moved through row-wise products, for the attention fusion. torchvision's
 * MultiheadAttention works sequence-first: its export transposes (batch, seq, E) to (seq, batch,
 * E) before the packed in_proj and back after the out_proj, two copies around every attention.
 * A product that computes each row of its output from the same row of its input commutes with a
 * Transpose that permutes only the rows (the leading dims): the Transpose before the in_proj
 * moves after it, onto the packed QKV that the attention step reads through strides, and the one
 * after the out_proj moves before it, onto the head-merged Y that the attention step writes
 * through strides (with a Reshape on each side where the product is a 2-D Gemm). A move stays
 * only where the attention step folds it (rows_keep_folded); elsewhere, where the Transpose would
 * still be a copy, of a wider tensor perhaps, the graph is put back. The op type is written here
 * only to create the Reshape nodes; nodes are recognised by their descriptors' roles. */
#include "graph/passes/rows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/lower.h"
#include "graph/passes.h"
#include "layers/op.h"

/* The opset of the Reshapes made: 13 reads the shape as an input and has no allowzero. */
enum { ROWS_OPSET = 13 };

#define ROWS_CHAIN_MAX 4
#define ROWS_MAX_INPUTS 3
#define ROWS_MAX_SAVED (ROWS_CHAIN_MAX + 2)

/* A node's inputs and output as they were before a move. */
typedef struct rows_saved {
    ir_node *node;
    ir_tensor *inputs[ROWS_MAX_INPUTS];
    ir_tensor *output;
} rows_saved;

struct rows_move {
    ir_node *transpose;
    ir_node *added[2]; /* the Reshapes made around a 2-D product, else NULL */
    rows_saved saved[ROWS_MAX_SAVED];
    int num_saved;
};

static bool known_dims(const ir_tensor *t) {
    if (!t || t->rank < 0) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] < 0) return false;
    return true;
}

/* t is computed, read by one node input and by no graph output, its dims known. */
static bool private_tensor(const int *readers, const ir_tensor *t) {
    return t && !t->data && !t->is_graph_input && !t->is_graph_output && !t->is_outer &&
           readers[t->index] == 1 && known_dims(t);
}

static op_pattern_kind role_of(const ir_node *n, op_pattern *pat) {
    return op_node_pattern(n && !n->fused_into && !n->epilogue ? n : NULL, pat);
}

/* n is a Transpose of a known float tensor that keeps the last dim last and moves another. */
static bool row_transpose(const ir_node *n, op_pattern *pat) {
    if (role_of(n, pat) != OP_PATTERN_TRANSPOSE || n->num_inputs != 1 || n->num_outputs != 1)
        return false;
    const ir_tensor *x = n->inputs[0], *y = n->outputs[0];
    if (!x || !y || !known_dims(x) || !known_dims(y) || x->dtype != TCI_DTYPE_FLOAT ||
        pat->rank != x->rank || pat->rank < 2 || pat->perm[pat->rank - 1] != pat->rank - 1)
        return false;
    for (int d = 0; d < pat->rank; d++)
        if (pat->perm[d] != d) return true;
    return false;
}

/* Whether n computes row i (along the last dim) of its one output from row i of input k alone,
 * the output's rows being input k's: a MatMul by a 2-D input 1, a Gemm of role ROWS, or an
 * element-wise binary op whose other operand is the same for every row (all its dims but the
 * last 1). */
static bool row_wise(const ir_node *n, int k) {
    if (!n || !n->desc || n->fused_into || n->epilogue || n->num_outputs != 1 || k < 0 ||
        k >= n->num_inputs || n->num_inputs > ROWS_MAX_INPUTS)
        return false;
    const ir_tensor *x = n->inputs[k], *y = n->outputs[0];
    if (!x || !y || !known_dims(x) || !known_dims(y) || x->rank < 2 || y->rank != x->rank)
        return false;
    for (int d = 0; d < x->rank - 1; d++)
        if (x->dims[d] != y->dims[d]) return false;
    op_pattern pat;
    switch (role_of(n, &pat)) {
    case OP_PATTERN_MATMUL:
        return k == 0 && n->num_inputs == 2 && n->inputs[1] && n->inputs[1]->rank == 2;
    case OP_PATTERN_ROWS: return k == 0;
    default: break;
    }
    if (n->desc->binary == BINARY_NONE || n->num_inputs != 2) return false;
    const ir_tensor *c = n->inputs[1 - k];
    if (!c || !known_dims(c) || c->rank > y->rank || x->dims[x->rank - 1] != y->dims[y->rank - 1])
        return false;
    for (int d = 0; d < c->rank - 1; d++)
        if (c->dims[d] != 1) return false;
    return true;
}

/* A new float tensor of these dims in place of `like` (named "<like>/rows" where that name is
 * free, so that a shape variant's graph finds it by name; anonymous otherwise), with the dims of
 * length 1 here that the built graph's tensor of that name has longer marked as a variant's. */
static tci_status new_tensor(ir_graph *g, const ir_tensor *like, int rank, const int64_t *dims,
                             ir_tensor **out) {
    char name[512] = "";
    if (like->name && like->name[0]) snprintf(name, sizeof name, "%s/rows", like->name);
    const bool free_name = name[0] && !ir_graph_find_tensor(g, name);
    TRY_STATUS(ir_graph_add_tensor(g, free_name ? name : NULL, out));
    ir_tensor *t = *out;
    t->dtype = like->dtype;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof dims[0]);
    const ir_tensor *built = g->like && t->name ? ir_graph_find_tensor(g->like, t->name) : NULL;
    if (built && built->rank == rank)
        for (int d = 0; d < rank; d++)
            if (dims[d] == 1 && built->dims[d] != 1) t->variant_dims |= 1u << d;
    return TCI_OK;
}

/* n writes t (its one output), the tensor it wrote before no longer written by it. */
static void write(ir_node *n, ir_tensor *t) {
    if (n->outputs[0] && n->outputs[0]->producer == n) n->outputs[0]->producer = NULL;
    n->outputs[0] = t;
    t->producer = n;
}

/* Node Reshape(x, y's dims) -> y, named "<p>/<what>". */
static tci_status add_reshape(ir_graph *g, const ir_node *p, const char *what, ir_tensor *x,
                              ir_tensor *y, ir_node **out_node) {
    char name[512];
    snprintf(name, sizeof name, "%s/%s", p->name, what);
    ir_tensor *shape;
    const int64_t rank = y->rank;
    TRY_STATUS(ir_graph_add_int64_constant(g, y->dims, 1, &rank, &shape));
    ir_node *n;
    TRY_STATUS(ir_graph_add_node(g, name, "Reshape", "", 2, 1, out_node));
    n = *out_node;
    n->opset = ROWS_OPSET;
    n->inputs[0] = x;
    n->inputs[1] = shape;
    write(n, y);
    return op_prepare_node(n, g->arena);
}

static void save(rows_move *mv, ir_node *n) {
    rows_saved *s = &mv->saved[mv->num_saved++];
    s->node = n;
    for (int k = 0; k < n->num_inputs && k < ROWS_MAX_INPUTS; k++) s->inputs[k] = n->inputs[k];
    s->output = n->outputs[0];
}

/* dims of t seen before the Transpose of permutation perm (rank entries): t = Transpose(u)
 * has t.dims[d] = u.dims[perm[d]]. */
static void unpermuted(const ir_tensor *t, const int *perm, int64_t *dims) {
    for (int d = 0; d < t->rank; d++) dims[perm[d]] = t->dims[d];
}

static void permuted(const ir_tensor *u, const int *perm, int64_t *dims) {
    for (int d = 0; d < u->rank; d++) dims[d] = u->dims[perm[d]];
}

/* p = Transpose(x) -> t, read by row-wise products: they read x, and p permutes the last one's
 * result into the tensor it wrote. */
static tci_status push_down(ir_graph *g, const int *readers, ir_node *p, const op_pattern *pat,
                            rows_move *mv, bool *moved) {
    ir_tensor *t = p->outputs[0], *cur = t;
    ir_node *chain[ROWS_CHAIN_MAX];
    int slot[ROWS_CHAIN_MAX], num = 0;
    if (!private_tensor(readers, t)) return TCI_OK;
    while (num < ROWS_CHAIN_MAX) {
        int k = -1;
        ir_node *r = ir_graph_reader(g, cur, 0, &k);
        if (!row_wise(r, k)) break;
        chain[num] = r;
        slot[num++] = k;
        cur = r->outputs[0];
        if (!private_tensor(readers, cur)) break;
    }
    if (!num) return TCI_OK;
    save(mv, p);
    for (int i = 0; i < num; i++) save(mv, chain[i]);
    ir_tensor *in = p->inputs[0], *last = chain[num - 1]->outputs[0];
    for (int i = 0; i < num; i++) {
        int64_t dims[TCI_MAX_RANK];
        ir_tensor *o = chain[i]->outputs[0], *o2;
        unpermuted(o, pat->perm, dims);
        TRY_STATUS(new_tensor(g, o, o->rank, dims, &o2));
        chain[i]->inputs[slot[i]] = in;
        write(chain[i], o2);
        in = o2;
    }
    p->inputs[0] = in;
    write(p, last);
    *moved = true;
    return TCI_OK;
}

/* p = Transpose(r) -> out, r computed by row-wise products (through a reshape that splits the
 * rows of a 2-D one): they read their first input's rows permuted by p, and write out. */
static tci_status pull_up(ir_graph *g, const int *readers, ir_node *p, const op_pattern *pat,
                          rows_move *mv, bool *moved) {
    ir_tensor *r = p->inputs[0], *out = p->outputs[0], *bottom = r;
    ir_node *split = NULL, *chain[ROWS_CHAIN_MAX];
    int slot[ROWS_CHAIN_MAX], num = 0;
    op_pattern sp;
    if (!private_tensor(readers, r)) return TCI_OK;
    /* rows of a 2-D product split by a reshape that keeps them whole */
    if (role_of(r->producer, &sp) == OP_PATTERN_RESHAPE && r->producer->num_outputs == 1) {
        ir_tensor *g2 = r->producer->inputs[0];
        if (!private_tensor(readers, g2) || g2->rank != 2 ||
            g2->dims[1] != r->dims[r->rank - 1])
            return TCI_OK;
        split = r->producer;
        bottom = g2;
    }
    /* the products, bottom up: chain[0] computes bottom */
    for (ir_tensor *cur = bottom; num < ROWS_CHAIN_MAX;) {
        ir_node *q = cur->producer;
        int k = -1;
        for (int s = 0; q && s < q->num_inputs && k < 0; s++)
            if (row_wise(q, s) && q->inputs[s] && q->inputs[s]->rank == cur->rank) k = s;
        if (k < 0 || q->outputs[0] != cur) break;
        chain[num] = q;
        slot[num++] = k;
        cur = q->inputs[k];
        if (!private_tensor(readers, cur)) break;
    }
    if (!num) return TCI_OK;
    ir_node *top = chain[num - 1];
    ir_tensor *c = top->inputs[slot[num - 1]];
    if (c->data) return TCI_OK;
    /* the split reshape is reused on c: c must have the product's result's dims */
    if (split && (c->rank != 2 || c->dims[0] != bottom->dims[0] || c->dims[1] != bottom->dims[1]))
        return TCI_OK;
    save(mv, p);
    for (int i = 0; i < num; i++) save(mv, chain[i]);
    int64_t dims[TCI_MAX_RANK];
    ir_tensor *in;
    if (split) {
        /* c -> split (r's dims) -> p (out's dims) -> merged back to c's dims -> the products,
         * whose result, split to out's dims, is out */
        save(mv, split);
        ir_tensor *ap;
        TRY_STATUS(new_tensor(g, out, out->rank, out->dims, &ap));
        TRY_STATUS(new_tensor(g, c, c->rank, c->dims, &in));
        split->inputs[0] = c;
        write(p, ap);
        TRY_STATUS(add_reshape(g, p, "merge_rows", ap, in, &mv->added[0]));
    } else {
        permuted(c, pat->perm, dims);
        TRY_STATUS(new_tensor(g, c, c->rank, dims, &in));
        p->inputs[0] = c;
        write(p, in);
    }
    for (int i = num - 1; i >= 0; i--) {
        ir_tensor *o = chain[i]->outputs[0], *o2;
        chain[i]->inputs[slot[i]] = in;
        if (i == 0 && !split) {
            write(chain[i], out);
            break;
        }
        if (split) memcpy(dims, o->dims, sizeof dims);
        else permuted(o, pat->perm, dims);
        TRY_STATUS(new_tensor(g, o, o->rank, dims, &o2));
        write(chain[i], o2);
        in = o2;
    }
    if (split) TRY_STATUS(add_reshape(g, p, "split_rows", in, out, &mv->added[1]));
    *moved = true;
    return TCI_OK;
}

tci_status rows_move_transposes(ir_graph *g, rows_moves *out) {
    memset(out, 0, sizeof *out);
    size_t num_nodes = g->num_nodes; /* the Reshapes added below are not visited */
    int *readers = ir_graph_count_readers(g);
    out->moves = calloc(num_nodes + 1, sizeof *out->moves);
    if (!readers || !out->moves) {
        free(readers);
        free(out->moves);
        out->moves = NULL;
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory moving rows");
    }
    tci_status st = TCI_OK;
    for (size_t i = 0; st == TCI_OK && i < num_nodes; i++) {
        ir_node *p = g->nodes[i];
        op_pattern pat;
        bool moved = false;
        if (!row_transpose(p, &pat)) continue;
        rows_move *mv = &out->moves[out->num];
        memset(mv, 0, sizeof *mv);
        mv->transpose = p;
        st = push_down(g, readers, p, &pat, mv, &moved);
        if (st == TCI_OK && !moved) st = pull_up(g, readers, p, &pat, mv, &moved);
        if (moved) {
            out->num++;
            /* the tensors a move rewired are no longer private to the next one's walk */
            st = ir_graph_recount_readers(g, &readers, "moving rows");
        }
    }
    free(readers);
    if (st == TCI_OK && out->num) st = ir_graph_sort(g);
    if (st != TCI_OK) { /* the build fails: nothing to put back */
        free(out->moves);
        memset(out, 0, sizeof *out);
    }
    return st;
}

/* The attention step that computes n (n itself where it is a step's owner), else NULL. */
static ir_node *attention_of(ir_node *n) {
    ir_node *owner = n && n->fused_into ? n->fused_into : n;
    return owner && owner->epilogue && owner->epilogue->attention ? owner : NULL;
}

/* Clears the fusion of the attention that owner computes: its nodes are their own again. */
static void unfuse(ir_node *owner) {
    const ir_attention *a = owner->epilogue->attention;
    for (int i = 0; i < a->num_nodes; i++) a->nodes[i]->fused_into = NULL;
    owner->epilogue = NULL;
}

/* Whether an attention fused while the moves were in place reads what a node put back
 * computes: it was matched on the moved graph, and reading through the restored nodes (a
 * Transpose after the projection, which an engine file's graph holds from the build that
 * moved it) it may fold more of them. */
static bool reads_restored(const ir_node *owner, ir_node *const *restored, size_t num) {
    const ir_attention *a = owner->epilogue->attention;
    for (int i = 0; i < a->num_nodes; i++)
        for (int k = 0; k < a->nodes[i]->num_inputs; k++)
            for (size_t r = 0; r < num; r++)
                if (a->nodes[i]->inputs[k] && a->nodes[i]->inputs[k] == restored[r]->outputs[0])
                    return true;
    return false;
}

tci_status rows_keep_folded(ir_graph *g, rows_moves *moves, bool *refuse) {
    bool undone = false;
    *refuse = false;
    size_t num_restored = 0, num_kept = 0;
    ir_node **restored = malloc((moves->num * (ROWS_MAX_SAVED + 1) + 1) * sizeof *restored);
    ir_node **kept = malloc((moves->num + 1) * sizeof *kept);
    if (!restored || !kept) {
        free(restored);
        free(kept);
        free(moves->moves);
        moves->moves = NULL;
        moves->num = 0;
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory keeping row moves");
    }
    /* the last move first: a node two moves rewired gets back the state before both (each
     * move saved it as the one before it left it) */
    for (size_t i = moves->num; i-- > 0;) {
        rows_move *mv = &moves->moves[i];
        ir_node *parts[3] = {mv->transpose, mv->added[0], mv->added[1]}, *owner = NULL;
        for (int k = 0; k < 3 && !owner; k++) owner = attention_of(parts[k]);
        if (owner && plan_attention_head_dim_ok(owner->epilogue->attention->head_dim)) {
            kept[num_kept++] = owner;
            continue;
        }
        if (owner) { /* strides into the moved graph, for unfused steps: match it again after */
            unfuse(owner);
            *refuse = true;
        }
        for (int s = mv->num_saved - 1; s >= 0; s--) {
            rows_saved *sv = &mv->saved[s];
            for (int k = 0; k < sv->node->num_inputs && k < ROWS_MAX_INPUTS; k++)
                sv->node->inputs[k] = sv->inputs[k];
            sv->node->outputs[0] = sv->output;
            restored[num_restored++] = sv->node;
        }
        restored[num_restored++] = mv->transpose;
        /* the Reshapes made write nothing anyone reads now: dead nodes */
        for (int k = 0; k < 2; k++)
            if (mv->added[k]) mv->added[k]->outputs[0] = NULL;
        undone = true;
    }
    free(moves->moves);
    moves->moves = NULL;
    moves->num = 0;
    /* (an attention that folds a kept move stays as it is: matched again it might not) */
    for (size_t i = 0; undone && i < g->num_nodes; i++) {
        ir_node *n = g->nodes[i];
        bool keeps = false;
        for (size_t k = 0; k < num_kept && !keeps; k++) keeps = kept[k] == n;
        if (!keeps && n->epilogue && n->epilogue->attention &&
            reads_restored(n, restored, num_restored)) {
            unfuse(n);
            *refuse = true;
        }
    }
    free(restored);
    free(kept);
    if (!undone) return TCI_OK;
    TRY_STATUS(pass_eliminate_dead_nodes(g));
    return ir_graph_sort(g);
}
