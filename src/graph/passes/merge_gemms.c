/* The siblings' merge for the GPU: GEMMs with constant weights that read the same activation
 * (Hugging Face's query, key and value Linears) become one GEMM over their weights side by side,
 * each part read back through a Slice of the last dim, so that the attention fusion reads Q, K
 * and V from the one packed result at offsets, as it reads a packed QKV projection's. The op
 * type is written here only to create the Slices; nodes are recognised by their descriptors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/lower.h"
#include "graph/passes.h"
#include "layers/op.h"

/* The opset the Slices are created at: starts, ends and axes as inputs. */
enum { MERGE_SLICE_OPSET = 13 };

/* One GEMM of a group: the product, its bias Add (or NULL) and what the rest of the graph reads
 * (the Add's output, else the product's). */
typedef struct gemm_part {
    ir_node *gemm, *add;
    ir_tensor *out;
    int bias_side;   /* the Add's input holding the bias */
    int64_t columns;
} gemm_part;

typedef struct merge_state {
    int *readers;      /* the node inputs reading each tensor */
    ir_node **reader;  /* the last node found reading it (the only one where readers is 1) */
    bool *source;      /* the tensor is what a fused attention reads its Q, K or V from */
    bool *folded;      /* the node (by index) is folded into an attention step */
} merge_state;

static bool known_float(const ir_tensor *t) {
    if (!t || t->dtype != TCI_DTYPE_FLOAT || t->rank < 1) return false;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) return false;
    return true;
}

static bool same_dims(const ir_tensor *a, const ir_tensor *b) {
    return a->rank == b->rank && memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0;
}

static op_pattern_kind role_of(const ir_node *n) {
    op_pattern pat;
    return op_node_pattern(n, &pat);
}

/* t is computed, read by one node input, and no graph output. */
static bool read_once(const merge_state *s, const ir_tensor *t) {
    return t && !t->data && !t->is_graph_output && s->readers[t->index] == 1;
}

/* A constant float of y's last dim's values (or one), every other dim 1, no more dims than y. */
static bool bias_of(const ir_tensor *c, const ir_tensor *y) {
    if (!c || !c->data || c->dtype != TCI_DTYPE_FLOAT || c->rank < 0 || c->rank > y->rank)
        return false;
    for (int i = 0; i + 1 < c->rank; i++)
        if (c->dims[i] != 1) return false;
    return c->rank == 0 || c->dims[c->rank - 1] == 1 || c->dims[c->rank - 1] == y->dims[y->rank - 1];
}

/* The activation n reads: its input 0, or, where that is a reshape read by n alone, the
 * reshape's input (the dynamo exporter's Linears each reshape the same tensor to rows). */
static const ir_tensor *activation_of(const merge_state *s, const ir_node *n) {
    const ir_tensor *a = n->inputs[0];
    if (read_once(s, a) && a->producer && a->producer->num_outputs == 1 &&
        role_of(a->producer) == OP_PATTERN_RESHAPE)
        return a->producer->inputs[0];
    return a;
}

/* Fills *part for n when it is a product with constant weights (op_desc.merge_columns), its
 * weights read by it alone, not kept out of 16-bit storage (nor its Add: the packed product
 * has one precision), followed by an optional bias Add. */
static bool product_part(const merge_state *s, ir_node *n, gemm_part *part) {
    memset(part, 0, sizeof *part);
    if (!n->desc || !n->desc->merge_columns || n->kept ||
        n->num_inputs < 2 || n->num_outputs != 1 || !n->inputs[0] || n->inputs[0]->data ||
        !known_float(n->inputs[0]) || !known_float(n->outputs[0]) || !n->inputs[1] ||
        !n->inputs[1]->data || n->inputs[1]->is_graph_output || s->readers[n->inputs[1]->index] != 1)
        return false;
    part->gemm = n;
    part->out = n->outputs[0];
    part->columns = part->out->dims[part->out->rank - 1];
    ir_node *add = read_once(s, part->out) ? s->reader[part->out->index] : NULL;
    if (add && add->desc && add->desc->binary == BINARY_ADD && add->num_inputs == 2 &&
        add->num_outputs == 1 && known_float(add->outputs[0]) &&
        same_dims(add->outputs[0], part->out)) {
        int side = add->inputs[0] == part->out ? 1 : 0;
        if (add->inputs[1 - side] == part->out && bias_of(add->inputs[side], part->out) &&
            !add->kept) {
            part->add = add;
            part->bias_side = side;
            part->out = add->outputs[0];
        }
    }
    return true;
}

/* product_part, whose result a fused attention reads Q, K or V from (s->source, s->folded:
 * find_attention_sources), through nodes it folds, and nothing else reads: the attention step
 * will read the part in place in the packed result, so the merge adds no copy. */
static bool part_of(const merge_state *s, ir_node *n, gemm_part *part) {
    if (!product_part(s, n, part)) return false;
    const ir_node *reader = read_once(s, part->out) ? s->reader[part->out->index] : NULL;
    return s->source[part->out->index] && reader && s->folded[reader->index];
}

/* Whether parts a and b can be one product: the same op, both with a bias Add or neither, on
 * the same activation of the same dims. */
static bool siblings(const merge_state *s, const gemm_part *a, const gemm_part *b) {
    return a->gemm->desc == b->gemm->desc && (a->add != NULL) == (b->add != NULL) &&
           activation_of(s, a->gemm) == activation_of(s, b->gemm) &&
           same_dims(a->gemm->inputs[0], b->gemm->inputs[0]);
}

/* Whether two products of g could merge at all, before asking which ones an attention reads:
 * most graphs have none, and need no attention probe. */
static tci_status any_siblings(const ir_graph *g, const merge_state *s, bool *found) {
    gemm_part *parts = calloc(g->num_nodes + 1, sizeof *parts);
    if (!parts) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory merging GEMMs");
    size_t num = 0;
    *found = false;
    for (size_t i = 0; i < g->num_nodes && !*found; i++) {
        if (!product_part(s, g->nodes[i], &parts[num])) continue;
        for (size_t j = 0; j < num && !*found; j++) *found = siblings(s, &parts[j], &parts[num]);
        num++;
    }
    free(parts);
    return TCI_OK;
}

/* A computed tensor of like's dtype and dims but the last. Anonymous: the model has no tensor
 * of its values, so per-layer comparisons with the CPU reference (matched by name) leave it
 * out. */
static tci_status packed_tensor(ir_graph *g, const ir_tensor *like, int64_t columns,
                                ir_tensor **out) {
    TRY_STATUS(ir_graph_add_tensor(g, NULL, out));
    ir_tensor *t = *out;
    t->dtype = like->dtype;
    t->rank = like->rank;
    memcpy(t->dims, like->dims, sizeof like->dims);
    t->dims[t->rank - 1] = columns;
    t->variant_dims = like->variant_dims & ~(1u << (t->rank - 1));
    return TCI_OK;
}

/* part = Slice(packed, first, first + columns, last axis), named after the part. */
static tci_status add_slice(ir_graph *g, ir_tensor *packed, int64_t first, ir_tensor *part) {
    ir_tensor *in[4] = {packed, NULL, NULL, NULL};
    /* starts, ends and axes, one value each */
    const int64_t one = 1, args[3] = {first, first + part->dims[part->rank - 1], -1};
    for (int i = 0; i < 3; i++)
        TRY_STATUS(ir_graph_add_int64_constant(g, &args[i], 1, &one, &in[i + 1]));
    char name[512];
    snprintf(name, sizeof name, "%s/slice", part->name ? part->name : "merged");
    ir_node *n;
    TRY_STATUS(ir_graph_add_node(g, name, "Slice", "", 4, 1, &n));
    n->opset = MERGE_SLICE_OPSET;
    for (int i = 0; i < 4; i++) n->inputs[i] = in[i];
    n->outputs[0] = part;
    return op_prepare_node(n, g->arena);
}

/* A tensor nobody reads, for the output of a node that the merge leaves dead. */
static tci_status retire_output(ir_graph *g, ir_node *n) {
    ir_tensor *dead;
    TRY_STATUS(ir_graph_add_tensor(g, NULL, &dead));
    dead->dtype = n->outputs[0]->dtype;
    n->outputs[0] = dead;
    return TCI_OK;
}

/* parts[0]'s product becomes the packed one (its weights, and its Add's bias, side by side);
 * each part's output is a Slice of the packed result; the other products and Adds are left
 * writing tensors nobody reads. *done false where the op refuses the merge. */
static tci_status merge_group(ir_graph *g, gemm_part *parts, int count, bool *done) {
    ir_node *nodes[64];
    int64_t total = 0;
    for (int i = 0; i < count; i++) {
        nodes[i] = parts[i].gemm;
        total += parts[i].columns;
    }
    TRY_STATUS(parts[0].gemm->desc->merge_columns(g, nodes, count, done));
    if (!*done) return TCI_OK;
    ir_node *gemm = parts[0].gemm, *add = parts[0].add;
    ir_tensor *product, *packed;
    TRY_STATUS(packed_tensor(g, gemm->outputs[0], total, &product));
    gemm->outputs[0] = product;
    packed = product;
    if (add) {
        float *bias = malloc((size_t)total * sizeof *bias);
        if (!bias) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory merging GEMMs");
        int64_t first = 0;
        for (int i = 0; i < count; i++) {
            const ir_tensor *c = parts[i].add->inputs[parts[i].bias_side];
            const float *v = c->data;
            bool one = c->rank == 0 || c->dims[c->rank - 1] == 1;
            for (int64_t j = 0; j < parts[i].columns; j++) bias[first + j] = v[one ? 0 : j];
            first += parts[i].columns;
        }
        ir_tensor *merged_bias;
        tci_status st = ir_graph_add_float_constant(g, bias, 1, &total, &merged_bias);
        free(bias);
        TRY_STATUS(st);
        TRY_STATUS(packed_tensor(g, add->outputs[0], total, &packed));
        add->inputs[parts[0].bias_side] = merged_bias;
        add->inputs[1 - parts[0].bias_side] = product;
        add->outputs[0] = packed;
    }
    int64_t first = 0;
    for (int i = 0; i < count; i++) {
        if (i > 0) {
            TRY_STATUS(retire_output(g, parts[i].gemm));
            if (parts[i].add) {
                parts[i].add->inputs[1 - parts[i].bias_side] = parts[i].gemm->outputs[0];
                TRY_STATUS(retire_output(g, parts[i].add));
            }
        }
        TRY_STATUS(add_slice(g, packed, first, parts[i].out));
        first += parts[i].columns;
    }
    return TCI_OK;
}

/* Groups the parts that read one activation (each with a bias Add or none) and merges each
 * group of two or more. */
static tci_status merge_all(ir_graph *g, merge_state *s, bool *any) {
    size_t num = g->num_nodes; /* the Slices added are not visited */
    gemm_part *parts = calloc(num + 1, sizeof *parts);
    bool *taken = calloc(num + 1, sizeof *taken);
    tci_status st = parts && taken ? TCI_OK
                                   : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory merging GEMMs");
    for (size_t i = 0; st == TCI_OK && i < num; i++) taken[i] = !part_of(s, g->nodes[i], &parts[i]);
    for (size_t i = 0; st == TCI_OK && i < num; i++) {
        if (taken[i]) continue;
        gemm_part group[64];
        int count = 0;
        for (size_t j = i; j < num && count < 64; j++) {
            if (taken[j] || !siblings(s, &parts[i], &parts[j])) continue;
            group[count++] = parts[j];
            taken[j] = true;
        }
        bool done = false;
        /* the packed product reads the first part's input (the others' reshapes die with them) */
        if (count >= 2) st = merge_group(g, group, count, &done);
        *any = *any || done;
    }
    free(parts);
    free(taken);
    return st;
}

/* Whether the attention step is one kernel: a head dim it has, none of its nodes kept out of
 * 16-bit storage (ir_node.kept); elsewhere its movement nodes, the Slices among them, are copy
 * steps of their own. */
static bool one_kernel(const ir_attention *a) {
    if (!plan_attention_head_dim_ok(a->head_dim)) return false;
    for (int i = 0; i < a->num_nodes; i++)
        if (a->nodes[i]->kept) return false;
    return true;
}

/* The attention fusion as it finds the graph, run on a copy: it rewrites the graph it fuses
 * (rows.c moves Transposes, adds tensors and nodes), and the merge decides on g as it is. Which
 * tensors of g its one-kernel steps read Q, K and V from (s->source) and which nodes of g fold
 * into a step (s->folded): the copy's tensors and nodes of g's indices are g's (ir_graph_clone),
 * the ones the fusion made have no counterpart in g and are left out. */
static tci_status find_attention_sources(const ir_graph *g, merge_state *s) {
    ir_graph *c = NULL;
    const size_t num_nodes = g->num_nodes, num_tensors = g->num_tensors;
    ir_node **copies = malloc((num_nodes + 1) * sizeof *copies);
    if (!copies) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory merging GEMMs");
    tci_status st = ir_graph_clone(g, &c);
    if (st == TCI_OK) {
        c->like = g->like;
        /* the fusion sorts the copy again: its nodes of g's, by g's index, taken before */
        memcpy(copies, c->nodes, num_nodes * sizeof *copies);
    }
    for (size_t i = 0; st == TCI_OK && i < num_nodes; i++)
        st = op_prepare_node(c->nodes[i], c->arena);
    if (st == TCI_OK) st = pass_fuse_attention(c);
    for (size_t i = 0; st == TCI_OK && i < num_nodes; i++) {
        s->folded[i] = copies[i]->fused_into != NULL;
        const ir_epilogue *e = copies[i]->epilogue;
        if (!e || !e->attention || !one_kernel(e->attention)) continue;
        const ir_attention *a = e->attention;
        const ir_tensor *read[3] = {a->q, a->k, a->v};
        for (int k = 0; k < 3; k++)
            if (read[k]->index < num_tensors) s->source[read[k]->index] = true;
    }
    ir_graph_destroy(c);
    free(copies);
    return st;
}

tci_status pass_merge_sibling_gemms(ir_graph *g) {
    /* a fused graph's tensors are read by its steps: merge before fusing only */
    for (size_t i = 0; i < g->num_nodes; i++)
        if (g->nodes[i]->epilogue || g->nodes[i]->fused_into) return TCI_OK;
    merge_state s;
    s.readers = calloc(g->num_tensors + 1, sizeof *s.readers);
    s.reader = calloc(g->num_tensors + 1, sizeof *s.reader);
    s.source = calloc(g->num_tensors + 1, sizeof *s.source);
    s.folded = calloc(g->num_nodes + 1, sizeof *s.folded);
    tci_status st = TCI_OK;
    bool any = false;
    if (!s.readers || !s.reader || !s.source || !s.folded)
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory merging GEMMs");
    for (size_t i = 0; st == TCI_OK && i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_inputs; k++) {
            const ir_tensor *t = g->nodes[i]->inputs[k];
            if (!t) continue;
            s.readers[t->index]++;
            s.reader[t->index] = g->nodes[i];
        }
    bool candidates = false;
    if (st == TCI_OK) st = any_siblings(g, &s, &candidates);
    if (st == TCI_OK && candidates) st = find_attention_sources(g, &s);
    if (st == TCI_OK && candidates) st = merge_all(g, &s, &any);
    free(s.readers);
    free(s.reader);
    free(s.source);
    free(s.folded);
    if (st != TCI_OK || !any) return st;
    TRY_STATUS(ir_graph_sort(g));
    return pass_eliminate_dead_nodes(g);
}
