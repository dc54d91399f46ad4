/* Op family 'tfidf': TfIdfVectorizer, the n-gram counts of rows of integer tokens (what skl2onnx
 * emits for scikit-learn's CountVectorizer and TfidfVectorizer, after its tokenizer), weighted
 * as TF, IDF or TFIDF. It finds n-grams as ONNX's reference and onnxruntime do; weights[i] is
 * the i-th pool n-gram's, as the spec says and onnxruntime computes (ONNX's Python reference
 * reads weights by output column: the two agree where ngram_indexes is 0, 1, 2...). String
 * pools and inputs are refused (tcinfer holds no strings). CPU reference only (no GPU path: the
 * planner refuses it naming the node). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/op.h"

typedef enum tfidf_mode { TFIDF_MODE_TF, TFIDF_MODE_IDF, TFIDF_MODE_TFIDF } tfidf_mode;

/* The pool's in-range n-grams as the reference holds them, a trie: a node at depth k is a
 * distinct k-item prefix of those n-grams, and where one of them ends there, its output column
 * and weight. The nodes of one depth are sorted by their parent, then their key, so a node's
 * children are one run of the next depth's nodes, looked up by binary search. */
typedef struct tfidf_node {
    int64_t key;
    int64_t column; /* -1: no n-gram ends here */
    float weight;
    int64_t child_begin, child_end; /* in the next depth's nodes */
} tfidf_node;

typedef struct tfidf_params {
    tfidf_mode mode;
    int64_t min_gram, max_gram, max_skip;
    int64_t columns; /* the output's row length: max(ngram_indexes) + 1 */
    /* nodes[k] (num_nodes[k] of them): depth k + 1, for k < depth; depth 1's are the root's
     * children. depth is the longest n-gram loaded (0: none in range). */
    int64_t depth;
    tfidf_node **nodes;
    int64_t *num_nodes;
} tfidf_params;

/* One pool n-gram while the trie is built. */
typedef struct tfidf_gram {
    const int64_t *items;
    int64_t n;      /* its length */
    int64_t number; /* its position among the pool's n-grams (what ngram_indexes follows) */
} tfidf_gram;

/* Lexicographic, a prefix before what extends it; equal n-grams by their pool position. */
static int gram_cmp(const void *pa, const void *pb) {
    const tfidf_gram *a = pa, *b = pb;
    int64_t common = a->n < b->n ? a->n : b->n;
    for (int64_t k = 0; k < common; k++)
        if (a->items[k] != b->items[k]) return a->items[k] < b->items[k] ? -1 : 1;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    return (a->number > b->number) - (a->number < b->number);
}

/* "(5, 6, 7)" into buf, the items of a gram of length n. */
static const char *format_gram(const int64_t *items, int64_t n, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t k = 0; k < n && used < size; k++) {
        int w = snprintf(buf + used, size - used, "%s%" PRId64 "%s", k ? ", " : "(", items[k],
                         k + 1 == n ? ")" : "");
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

/* Adds the sorted n-grams to the trie in p (its depth arrays allocated, empty), refusing one
 * that the pool holds twice (which column would count it is then ambiguous). Each n-gram shares
 * the nodes of its common prefix with the one before it and adds nodes for the rest, so nodes
 * come in sorted order and a parent's children one after the other. */
static tci_status fill_trie(const ir_node *node, const tfidf_gram *grams, int64_t count,
                            const int64_t *ngram_indexes, const float *weights,
                            int64_t *current, tfidf_params *p) {
    /* current[k]: the node at depth k + 1 of the n-gram being added */
    for (int64_t g = 0; g < count; g++) {
        const tfidf_gram *a = &grams[g], *prev = g ? &grams[g - 1] : NULL;
        int64_t shared = 0;
        if (prev)
            while (shared < a->n && shared < prev->n && a->items[shared] == prev->items[shared])
                shared++;
        if (prev && shared == a->n && prev->n == a->n) {
            char text[160];
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'pool_int64s' holds the %" PRId64
                                 "-gram %s twice (n-grams %" PRId64 " and %" PRId64 ")",
                                 a->n, format_gram(a->items, a->n, text, sizeof text),
                                 prev->number, a->number);
        }
        for (int64_t k = shared; k < a->n; k++) {
            int64_t at = p->num_nodes[k]++;
            p->nodes[k][at] = (tfidf_node){.key = a->items[k], .column = -1};
            current[k] = at;
            if (k) {
                tfidf_node *parent = &p->nodes[k - 1][current[k - 1]];
                if (parent->child_begin == parent->child_end) parent->child_begin = at;
                parent->child_end = at + 1;
            }
        }
        tfidf_node *end = &p->nodes[a->n - 1][current[a->n - 1]];
        end->column = ngram_indexes[a->number];
        end->weight = weights ? weights[a->number] : 1.0f;
    }
    return TCI_OK;
}

/* The trie of the n-grams of lengths min_gram_length to max_gram_length; per_level[i]: the
 * pool's (i + 1)-grams, from starts[i]; their numbers among the pool's n-grams follow on. */
static tci_status build_trie(const ir_node *node, mem_arena *arena, const int64_t *pool,
                             const int64_t *starts, const int64_t *per_level, size_t levels,
                             const int64_t *ngram_indexes, const float *weights,
                             tfidf_params *p) {
    int64_t count = 0, number = 0;
    p->depth = 0;
    for (size_t i = 0; i < levels; i++) {
        int64_t n = (int64_t)i + 1;
        if (n >= p->min_gram && n <= p->max_gram && per_level[i] > 0) {
            count += per_level[i];
            p->depth = n;
        }
    }
    size_t depth = (size_t)(p->depth ? p->depth : 1);
    p->nodes = arena_alloc(arena, depth * sizeof *p->nodes);
    p->num_nodes = arena_alloc(arena, depth * sizeof *p->num_nodes);
    tfidf_gram *grams = malloc((size_t)(count ? count : 1) * sizeof *grams);
    int64_t *current = malloc(depth * sizeof *current);
    bool ok = p->nodes && p->num_nodes && grams && current;
    if (ok) p->num_nodes[0] = 0;
    for (int64_t k = 0; ok && k < p->depth; k++) {
        int64_t longer = 0; /* n-grams of k + 1 items or more: the most nodes at depth k + 1 */
        for (int64_t n = k + 1; n <= p->depth; n++)
            if (n >= p->min_gram) longer += per_level[n - 1];
        p->num_nodes[k] = 0;
        p->nodes[k] = arena_alloc(arena, (size_t)longer * sizeof **p->nodes);
        ok = p->nodes[k] != NULL;
    }
    if (!ok) {
        free(grams);
        free(current);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for %" PRId64
                             " n-grams", count);
    }
    int64_t g = 0;
    for (size_t i = 0; i < levels; i++) {
        int64_t n = (int64_t)i + 1;
        for (int64_t j = 0; j < per_level[i]; j++, number++)
            if (n >= p->min_gram && n <= p->max_gram)
                grams[g++] = (tfidf_gram){.items = pool + starts[i] + j * n, .n = n,
                                          .number = number};
    }
    qsort(grams, (size_t)count, sizeof *grams, gram_cmp);
    tci_status st = fill_trie(node, grams, count, ngram_indexes, weights, current, p);
    free(grams);
    free(current);
    return st;
}

static tci_status require_attrs(const ir_node *node, const char *const *names) {
    for (const char *const *a = names; *a; a++)
        if (!ir_node_attr(node, *a))
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute '%s' is required", *a);
    return TCI_OK;
}

static tci_status parse_mode(const ir_node *node, tfidf_mode *out) {
    const char *mode;
    TRY_STATUS(ir_attr_string(node, "mode", "", &mode));
    static const char *const names[] = {"TF", "IDF", "TFIDF"};
    for (int m = 0; m < 3; m++)
        if (strcmp(mode, names[m]) == 0) {
            *out = (tfidf_mode)m;
            return TCI_OK;
        }
    return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                         "attribute 'mode' is '%s'; expected 'TF', 'IDF' or 'TFIDF'", mode);
}

/* The gram lengths and skips: 1 <= min_gram_length <= max_gram_length, max_skip_count >= 0. */
static tci_status parse_lengths(const ir_node *node, tfidf_params *p) {
    TRY_STATUS(ir_attr_int(node, "min_gram_length", 0, &p->min_gram));
    TRY_STATUS(ir_attr_int(node, "max_gram_length", 0, &p->max_gram));
    TRY_STATUS(ir_attr_int(node, "max_skip_count", 0, &p->max_skip));
    if (p->min_gram < 1)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'min_gram_length' is %" PRId64 "; it must be at least 1",
                             p->min_gram);
    if (p->max_gram < p->min_gram)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'max_gram_length' is %" PRId64
                             ", below min_gram_length %" PRId64,
                             p->max_gram, p->min_gram);
    if (p->max_skip < 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'max_skip_count' is %" PRId64 "; it must be at least 0",
                             p->max_skip);
    return TCI_OK;
}

/* The n-gram count of each length from ngram_counts (the pool index where each length's n-grams
 * start; the last length's run to the pool's end) and the pool's length; *total: all of them. */
static tci_status count_grams(const ir_node *node, const int64_t *starts, size_t levels,
                              size_t pool_len, int64_t *per_level, int64_t *total) {
    for (size_t i = 0; i < levels; i++) {
        if (starts[i] < 0 || starts[i] > (int64_t)pool_len)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'ngram_counts': entry %zu (%" PRId64
                                 ") is outside pool_int64s' %zu items",
                                 i, starts[i], pool_len);
        if (i && starts[i] < starts[i - 1])
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'ngram_counts': entry %zu (%" PRId64
                                 ") is below entry %zu (%" PRId64 "); the starts must not decrease",
                                 i, starts[i], i - 1, starts[i - 1]);
    }
    *total = 0;
    for (size_t i = 0; i < levels; i++) {
        int64_t n = (int64_t)i + 1;
        int64_t end = i + 1 < levels ? starts[i + 1] : (int64_t)pool_len;
        int64_t items = end - starts[i];
        if (items % n != 0)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'ngram_counts': the %" PRId64 " items of %" PRId64
                                 "-grams (pool_int64s[%" PRId64 ":%" PRId64
                                 "]) are not whole %" PRId64 "-grams",
                                 items, n, starts[i], end, n);
        per_level[i] = items / n;
        *total += per_level[i];
    }
    return TCI_OK;
}

/* ngram_indexes: one non-negative output column per n-gram; weights (*weights NULL when absent,
 * or empty, which the reference reads as absent): one per n-gram. */
static tci_status parse_columns(const ir_node *node, const int64_t *indexes, size_t num_indexes,
                                int64_t total_grams, tfidf_params *p, const float **weights) {
    size_t num_weights;
    TRY_STATUS(ir_attr_floats(node, "weights", weights, &num_weights));
    if (num_indexes == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'ngram_indexes' is empty: the output has no column");
    if ((int64_t)num_indexes != total_grams)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'ngram_indexes' has %zu entries; the pool holds %" PRId64
                             " n-grams (one output column each)",
                             num_indexes, total_grams);
    p->columns = 0;
    for (size_t i = 0; i < num_indexes; i++) {
        if (indexes[i] < 0 || indexes[i] == INT64_MAX)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute 'ngram_indexes': entry %zu is %" PRId64
                                 ", not an output column",
                                 i, indexes[i]);
        if (indexes[i] + 1 > p->columns) p->columns = indexes[i] + 1;
    }
    if (num_weights == 0) {
        *weights = NULL;
        return TCI_OK;
    }
    if (num_weights != num_indexes)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute 'weights' has %zu entries; ngram_indexes has %zu (one "
                             "weight per n-gram)",
                             num_weights, num_indexes);
    return TCI_OK;
}

static tci_status tfidf_parse(ir_node *node, mem_arena *arena) {
    TRY_STATUS(op_check_arity(node, 1, 1, 1, 1));
    static const char *const known[] = {"max_gram_length", "min_gram_length", "max_skip_count",
                                        "mode",            "ngram_counts",    "ngram_indexes",
                                        "pool_int64s",     "pool_strings",    "weights",
                                        NULL};
    TRY_STATUS(ir_check_attrs(node, known));
    if (ir_node_attr(node, "pool_strings"))
        return ir_node_error(node, TCI_ERR_UNSUPPORTED,
                             "attribute 'pool_strings': string n-grams are not supported "
                             "(tcinfer holds no strings); only pool_int64s");
    static const char *const needed[] = {"mode",         "min_gram_length", "max_gram_length",
                                         "max_skip_count", "ngram_counts",  "ngram_indexes",
                                         "pool_int64s",  NULL};
    TRY_STATUS(require_attrs(node, needed));
    OP_ALLOC_PARAMS(node, arena, tfidf_params, p);
    TRY_STATUS(parse_mode(node, &p->mode));
    TRY_STATUS(parse_lengths(node, p));
    const int64_t *pool, *starts;
    size_t pool_len, levels;
    TRY_STATUS(ir_attr_ints(node, "pool_int64s", &pool, &pool_len));
    TRY_STATUS(ir_attr_ints(node, "ngram_counts", &starts, &levels));
    if (pool_len == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'pool_int64s' is empty");
    if (levels == 0)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "attribute 'ngram_counts' is empty");
    int64_t *per_level = arena_alloc(arena, levels * sizeof *per_level);
    if (!per_level)
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for parameters");
    int64_t total = 0;
    TRY_STATUS(count_grams(node, starts, levels, pool_len, per_level, &total));
    const int64_t *indexes;
    const float *weights;
    size_t num_indexes;
    TRY_STATUS(ir_attr_ints(node, "ngram_indexes", &indexes, &num_indexes));
    TRY_STATUS(parse_columns(node, indexes, num_indexes, total, p, &weights));
    return build_trie(node, arena, pool, starts, per_level, levels, indexes, weights, p);
}

static tci_status tfidf_infer(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out) {
    const tfidf_params *p = node->params;
    const tci_tensor *x = in[0];
    TRY_STATUS(op_check_dtype(node, x, 0, op_index_types));
    op_set_unknown(out[0], TCI_DTYPE_FLOAT);
    if (x->rank < 0) return TCI_OK;
    /* a scalar too is refused, as ONNX's shape inference (onnxruntime) does */
    if (x->rank != 1 && x->rank != 2)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "input 0 has rank %d; expected [C] or [N, C]", x->rank);
    if (x->rank == 2 && x->dims[0] == 0)
        return ir_node_error(node, TCI_ERR_INVALID_ARGUMENT,
                             "input 0 has no rows ([0, %" PRId64 "]); [N, C] needs N > 0",
                             x->dims[1]);
    out[0]->rank = x->rank;
    if (x->rank == 2) out[0]->dims[0] = x->dims[0];
    out[0]->dims[x->rank - 1] = p->columns;
    return TCI_OK;
}

/* The node among nodes[begin, end) (sorted by key) whose key is value, or -1. */
static int64_t find_child(const tfidf_node *nodes, int64_t begin, int64_t end, int64_t value) {
    while (begin < end) {
        int64_t mid = begin + (end - begin) / 2;
        if (nodes[mid].key == value) return mid;
        if (nodes[mid].key < value) begin = mid + 1;
        else end = mid;
    }
    return -1;
}

/* One row (x: its c tokens) into acc (its columns, zeroed), the reference's walk: for each skip
 * distance d from 1 to max_skip_count + 1 and each start s, the trie is followed along x[s],
 * x[s + d], ... while it has the prefix, and each n-gram of a length in range that ends on the
 * way is found. Unigrams, the same at every distance, are found at distance 1 only. Each n-gram
 * found adds 1 to its column (TF), its weight (TFIDF), or sets the column to its weight (IDF:
 * where n-grams share a column, the last found, as onnxruntime). acc is double so that a count
 * times a weight is rounded once, at the end. */
static void count_row(const tfidf_params *p, const int64_t *x, int64_t c, double *acc) {
    /* from distance c on no n-gram of two or more fits in the row */
    int64_t max_distance = p->max_skip < c - 1 ? p->max_skip + 1 : (c > 1 ? c - 1 : 1);
    int64_t start = p->min_gram;
    for (int64_t d = 1; d <= max_distance; d++) {
        for (int64_t s = 0; s < c; s++) {
            if ((c - 1 - s) / d < start - 1) break; /* no n-gram in range fits from s on */
            int64_t begin = 0, end = p->num_nodes[0];
            for (int64_t k = 0; k < p->depth && begin < end && s + k * d < c; k++) {
                int64_t at = find_child(p->nodes[k], begin, end, x[s + k * d]);
                if (at < 0) break;
                const tfidf_node *hit = &p->nodes[k][at];
                if (k + 1 >= start && hit->column >= 0) {
                    double *y = &acc[hit->column];
                    switch (p->mode) {
                    case TFIDF_MODE_TF: *y += 1; break;
                    case TFIDF_MODE_IDF: *y = hit->weight; break;
                    case TFIDF_MODE_TFIDF: *y += hit->weight; break;
                    }
                }
                begin = hit->child_begin;
                end = hit->child_end;
            }
        }
        if (start == 1) {
            start = 2;
            if (start > p->max_gram) break;
        }
    }
}

static tci_status tfidf_forward(const ir_node *node, const tci_tensor *const *in,
                                tci_tensor *const *out) {
    const tfidf_params *p = node->params;
    const tci_tensor *x = in[0];
    int64_t rows = x->rank == 2 ? x->dims[0] : 1;
    int64_t c = x->dims[x->rank - 1];
    double *acc = malloc((size_t)p->columns * sizeof *acc);
    int64_t *tokens = malloc((size_t)(c ? c : 1) * sizeof *tokens);
    if (!acc || !tokens) {
        free(acc);
        free(tokens);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY,
                             "out of memory for a row of %" PRId64 " tokens and %" PRId64
                             " columns",
                             c, p->columns);
    }
    float *y = out[0]->data;
    for (int64_t r = 0; r < rows; r++, y += p->columns) {
        for (int64_t j = 0; j < p->columns; j++) acc[j] = 0;
        for (int64_t i = 0; i < c; i++) tokens[i] = op_read_int(x, r * c + i);
        if (c) count_row(p, tokens, c, acc);
        for (int64_t j = 0; j < p->columns; j++) y[j] = (float)acc[j];
    }
    free(acc);
    free(tokens);
    return TCI_OK;
}

/* ---- descriptors ---- */

OP_DESC(tfidf_desc, "TfIdfVectorizer", OP_VERSIONS(9), tfidf_parse, tfidf_infer, tfidf_forward,
        0, NULL, NULL, BINARY_NONE);

const op_desc *const layer_tfidf_ops[] = {&tfidf_desc, NULL};
