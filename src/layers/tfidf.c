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

/* The pool's n-grams of one length n, sorted lexicographically: n-gram g is
 * keys[g * n .. g * n + n), counted in output column columns[g] with weight weights[g]. */
typedef struct tfidf_level {
    int64_t count;
    int64_t *keys;
    int64_t *columns;
    float *weights;
} tfidf_level;

typedef struct tfidf_params {
    tfidf_mode mode;
    int64_t min_gram, max_gram, max_skip;
    int64_t columns; /* the output's row length: max(ngram_indexes) + 1 */
    /* levels[n - 1]: the n-grams of length n, filled for min_gram <= n <= max_gram only (the
     * others are never counted); num_levels is ngram_counts' length */
    int64_t num_levels;
    tfidf_level *levels;
} tfidf_params;

/* One pool n-gram while the levels are sorted. */
typedef struct tfidf_gram {
    const int64_t *items;
    int64_t n;      /* its length */
    int64_t number; /* its position among the pool's n-grams (what ngram_indexes follows) */
} tfidf_gram;

static int gram_cmp(const void *pa, const void *pb) {
    const tfidf_gram *a = pa, *b = pb;
    for (int64_t k = 0; k < a->n; k++)
        if (a->items[k] != b->items[k]) return a->items[k] < b->items[k] ? -1 : 1;
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

/* Sorts the in-range n-grams of length n (pool items start .. start + count * n) into level,
 * refusing one that the pool holds twice (which column would count it is then ambiguous). */
static tci_status build_level(const ir_node *node, mem_arena *arena, const int64_t *pool,
                              int64_t start, int64_t n, int64_t count, int64_t first_number,
                              const int64_t *ngram_indexes, const float *weights,
                              tfidf_level *level) {
    level->count = count;
    level->keys = arena_alloc(arena, (size_t)(count * n) * sizeof *level->keys);
    level->columns = arena_alloc(arena, (size_t)count * sizeof *level->columns);
    level->weights = arena_alloc(arena, (size_t)count * sizeof *level->weights);
    tfidf_gram *grams = malloc((size_t)count * sizeof *grams);
    if (!level->keys || !level->columns || !level->weights || !grams) {
        free(grams);
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for %" PRId64
                             " %" PRId64 "-grams", count, n);
    }
    for (int64_t g = 0; g < count; g++)
        grams[g] = (tfidf_gram){.items = pool + start + g * n, .n = n, .number = first_number + g};
    qsort(grams, (size_t)count, sizeof *grams, gram_cmp);
    for (int64_t g = 0; g < count; g++) {
        if (g && memcmp(grams[g - 1].items, grams[g].items, (size_t)n * sizeof(int64_t)) == 0) {
            char text[160];
            tci_status st = ir_node_error(
                node, TCI_ERR_INVALID_MODEL,
                "attribute 'pool_int64s' holds the %" PRId64 "-gram %s twice (n-grams %" PRId64
                " and %" PRId64 ")",
                n, format_gram(grams[g].items, n, text, sizeof text), grams[g - 1].number,
                grams[g].number);
            free(grams);
            return st;
        }
        memcpy(level->keys + g * n, grams[g].items, (size_t)n * sizeof(int64_t));
        level->columns[g] = ngram_indexes[grams[g].number];
        level->weights[g] = weights ? weights[grams[g].number] : 1.0f;
    }
    free(grams);
    return TCI_OK;
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
    p->levels = arena_alloc(arena, levels * sizeof *p->levels);
    if (!per_level || !p->levels)
        return ir_node_error(node, TCI_ERR_OUT_OF_MEMORY, "out of memory for parameters");
    p->num_levels = (int64_t)levels;
    int64_t total = 0;
    TRY_STATUS(count_grams(node, starts, levels, pool_len, per_level, &total));
    const int64_t *indexes;
    const float *weights;
    size_t num_indexes;
    TRY_STATUS(ir_attr_ints(node, "ngram_indexes", &indexes, &num_indexes));
    TRY_STATUS(parse_columns(node, indexes, num_indexes, total, p, &weights));
    int64_t number = 0; /* the first n-gram of this length among the pool's n-grams */
    for (size_t i = 0; i < levels; i++) {
        int64_t n = (int64_t)i + 1;
        p->levels[i] = (tfidf_level){0};
        if (n >= p->min_gram && n <= p->max_gram && per_level[i] > 0)
            TRY_STATUS(build_level(node, arena, pool, starts[i], n, per_level[i], number, indexes,
                                   weights, &p->levels[i]));
        number += per_level[i];
    }
    return TCI_OK;
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

/* The entry of the n-gram x[0], x[skip], ..., x[(n - 1) * skip] in level (sorted), or -1 when
 * the pool does not hold it. */
static int64_t find_gram(const tfidf_level *level, int64_t n, const int64_t *x, int64_t skip) {
    int64_t lo = 0, hi = level->count;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const int64_t *key = level->keys + mid * n;
        int c = 0;
        for (int64_t k = 0; k < n && !c; k++)
            if (key[k] != x[k * skip]) c = key[k] < x[k * skip] ? -1 : 1;
        if (!c) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* One row (x: its c tokens) into acc (its columns, zeroed). Each skip distance d from 1 to
 * max_skip_count + 1 finds the n-grams x[s], x[s + d], ... of every length in range from every
 * start s; unigrams, the same at every distance, only at distance 1 (the reference's rule). Each
 * n-gram found adds 1 to its column (TF), its weight (TFIDF), or sets the column to its weight
 * (IDF: where n-grams share a column, the last found, as onnxruntime). acc is double so that a
 * count times a weight is rounded once, at the end. */
static void count_row(const tfidf_params *p, const int64_t *x, int64_t c, double *acc) {
    int64_t top = p->max_gram < p->num_levels ? p->max_gram : p->num_levels;
    /* from distance c on no n-gram of two or more fits in the row */
    int64_t max_distance = p->max_skip < c - 1 ? p->max_skip + 1 : (c > 1 ? c - 1 : 1);
    int64_t start = p->min_gram;
    for (int64_t d = 1; d <= max_distance; d++) {
        for (int64_t s = 0; s < c; s++) {
            if ((c - 1 - s) / d < start - 1) break; /* no n-gram in range fits from s on */
            for (int64_t n = start; n <= top && (c - 1 - s) / d >= n - 1; n++) {
                const tfidf_level *level = &p->levels[n - 1];
                if (!level->count) continue;
                int64_t g = find_gram(level, n, x + s, d);
                if (g < 0) continue;
                double *y = &acc[level->columns[g]];
                switch (p->mode) {
                case TFIDF_MODE_TF: *y += 1; break;
                case TFIDF_MODE_IDF: *y = level->weights[g]; break;
                case TFIDF_MODE_TFIDF: *y += level->weights[g]; break;
                }
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
