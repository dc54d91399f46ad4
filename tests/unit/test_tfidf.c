/* TfIdfVectorizer (tfidf.c): hand-worked counts of each mode, skips, the gram length range,
 * unigrams counted at one skip distance only, 1-D and 2-D inputs of int32 and int64, and
 * every refusal's message; the node cases and ops_vs_onnxruntime cover the rest. */
#include "harness.h"
#include "layers/op.h"

#define I32 TCI_DTYPE_INT32
#define I64 TCI_DTYPE_INT64

/* Pool A: unigrams 2, 3, 5 and bigrams (3, 5), (5, 3), in output columns 4, 0, 1, 2, 3. */
static const int64_t pool_a[7] = {2, 3, 5, 3, 5, 5, 3};
static const int64_t starts_a[2] = {0, 3};
static const int64_t columns_a[5] = {4, 0, 1, 2, 3};

/* A pool's three list attributes. */
typedef struct pool_spec {
    const int64_t *starts, *columns, *items; /* ngram_counts, ngram_indexes, pool_int64s */
    size_t num_starts, num_columns, num_items;
} pool_spec;

static const pool_spec spec_a = {starts_a, columns_a, pool_a, 2, 5, 7};

/* Sets every required attribute of n. */
static void set_attrs(ir_graph *g, ir_node *n, const char *mode, int64_t min_gram,
                      int64_t max_gram, int64_t max_skip, const pool_spec *spec) {
    th_attr_string(g, n, "mode", mode);
    th_attr_int(g, n, "min_gram_length", min_gram);
    th_attr_int(g, n, "max_gram_length", max_gram);
    th_attr_int(g, n, "max_skip_count", max_skip);
    th_attr_ints(g, n, "ngram_counts", spec->starts, spec->num_starts);
    th_attr_ints(g, n, "ngram_indexes", spec->columns, spec->num_columns);
    th_attr_ints(g, n, "pool_int64s", spec->items, spec->num_items);
}

static ir_node *node_a(ir_graph *g, const char *mode, int64_t min_gram, int64_t max_gram,
                       int64_t max_skip) {
    ir_node *n = th_node(g, "TfIdfVectorizer", 9, 1, 1);
    set_attrs(g, n, mode, min_gram, max_gram, max_skip, &spec_a);
    return n;
}

static void run_expect(ir_graph *g, ir_node *n, const tci_tensor *x, int rank,
                       const int64_t *dims, const float *want) {
    tci_tensor y;
    ck_assert_tci_ok(th_run(g, n, x, &y));
    ck_assert_int_eq(y.dtype, TCI_DTYPE_FLOAT);
    th_assert_dims(&y, rank, dims);
    int64_t count = 1;
    for (int d = 0; d < rank; d++) count *= dims[d];
    th_assert_near(y.data, want, (size_t)count, 0);
    th_free(&y, 1);
}

/* x = 3 7 5 3 9 5. Unigrams: 3 and 5 twice each. Bigrams at distance 1 (skip 0): (5, 3) once;
 * at distance 2: (3, 5) twice (x0 x2, x3 x5); at 3 and 4 none; at 5: (3, 5) once (x0 x5). */
START_TEST(test_tfidf_skips_and_lengths) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int32_t v[6] = {3, 7, 5, 3, 9, 5};
    tci_tensor x = th_tensor(I32, 1, (const int64_t[]){6}, v);
    const int64_t d5[1] = {5};
    run_expect(g, node_a(g, "TF", 1, 2, 0), &x, 1, d5, (const float[]){2, 2, 0, 1, 0});
    run_expect(g, node_a(g, "TF", 1, 2, 1), &x, 1, d5, (const float[]){2, 2, 2, 1, 0});
    /* distances 1 to 6 (6 fits no bigram in 6 tokens); the unigrams are counted once */
    run_expect(g, node_a(g, "TF", 1, 2, 5), &x, 1, d5, (const float[]){2, 2, 3, 1, 0});
    run_expect(g, node_a(g, "TF", 1, 2, 100), &x, 1, d5, (const float[]){2, 2, 3, 1, 0});
    /* bigrams alone, unigrams alone */
    run_expect(g, node_a(g, "TF", 2, 2, 5), &x, 1, d5, (const float[]){0, 0, 3, 1, 0});
    run_expect(g, node_a(g, "TF", 1, 1, 5), &x, 1, d5, (const float[]){2, 2, 0, 0, 0});
    /* max_gram_length past the pool's lengths counts what the pool has */
    run_expect(g, node_a(g, "TF", 2, 7, 1), &x, 1, d5, (const float[]){0, 0, 2, 1, 0});
    ir_graph_destroy(g);
}
END_TEST

/* Counts of x with skip 1: 2 2 2 1 0. weights[i] is pool n-gram i's (the spec's and
 * onnxruntime's reading): columns 0 to 4 hold n-grams 1, 2, 3, 4, 0, weighed 1.5, 2, 4, 8, 0.5. */
START_TEST(test_tfidf_modes) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t v[6] = {3, 7, 5, 3, 9, 5};
    tci_tensor x = th_tensor(I64, 1, (const int64_t[]){6}, v);
    const int64_t d5[1] = {5};
    const float w[5] = {0.5f, 1.5f, 2.0f, 4.0f, 8.0f};
    ir_node *n = node_a(g, "IDF", 1, 2, 1);
    run_expect(g, n, &x, 1, d5, (const float[]){1, 1, 1, 1, 0});
    n = node_a(g, "IDF", 1, 2, 1);
    th_attr_floats(g, n, "weights", w, 5);
    run_expect(g, n, &x, 1, d5, (const float[]){1.5f, 2.0f, 4.0f, 8.0f, 0});
    n = node_a(g, "TFIDF", 1, 2, 1);
    th_attr_floats(g, n, "weights", w, 5);
    run_expect(g, n, &x, 1, d5, (const float[]){3.0f, 4.0f, 8.0f, 8.0f, 0});
    n = node_a(g, "TFIDF", 1, 2, 1);
    run_expect(g, n, &x, 1, d5, (const float[]){2, 2, 2, 1, 0});
    /* TF ignores weights */
    n = node_a(g, "TF", 1, 2, 1);
    th_attr_floats(g, n, "weights", w, 5);
    run_expect(g, n, &x, 1, d5, (const float[]){2, 2, 2, 1, 0});
    /* a count times a weight rounds once: 7 x 0.1f is 0.7f, where seven float additions of 0.1f
     * give 0.70000005f */
    const int64_t threes[7] = {3, 3, 3, 3, 3, 3, 3};
    tci_tensor x7 = th_tensor(I64, 1, (const int64_t[]){7}, threes);
    n = node_a(g, "TFIDF", 1, 1, 0);
    th_attr_floats(g, n, "weights", (const float[]){1, 0.1f, 1, 1, 1}, 5);
    run_expect(g, n, &x7, 1, d5, (const float[]){0.7f, 0, 0, 0, 0});
    ir_graph_destroy(g);
}
END_TEST

/* Unigrams 3 and 5 both counted in column 0, weighed 2 and 10: TF adds the counts, TFIDF the
 * weights of every n-gram found, IDF takes the weight of the last one found. */
START_TEST(test_tfidf_shared_column) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    static const char *const modes[3] = {"TF", "IDF", "TFIDF"};
    const float want[2][3] = {{3, 10, 22}, {3, 2, 22}};
    const int64_t v[2][3] = {{3, 5, 5}, {5, 5, 3}};
    for (int k = 0; k < 2; k++)
        for (int m = 0; m < 3; m++) {
            ir_node *n = th_node(g, "TfIdfVectorizer", 9, 1, 1);
            const pool_spec shared = {(const int64_t[]){0}, (const int64_t[]){0, 0},
                                      (const int64_t[]){3, 5}, 1, 2, 2};
            set_attrs(g, n, modes[m], 1, 1, 0, &shared);
            th_attr_floats(g, n, "weights", (const float[]){2, 10}, 2);
            tci_tensor x = th_tensor(I64, 1, (const int64_t[]){3}, v[k]);
            run_expect(g, n, &x, 1, (const int64_t[]){1}, &want[k][m]);
        }
    ir_graph_destroy(g);
}
END_TEST

/* Rows are counted apart: row 0 = 3 5 3 5 2 7, row 1 = 5 3 5 3 5 3 (skip 0). */
START_TEST(test_tfidf_rows) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t v[12] = {3, 5, 3, 5, 2, 7, 5, 3, 5, 3, 5, 3};
    tci_tensor x = th_tensor(I64, 2, (const int64_t[]){2, 6}, v);
    run_expect(g, node_a(g, "TF", 1, 2, 0), &x, 2, (const int64_t[]){2, 5},
               (const float[]){2, 2, 2, 1, 1, 3, 3, 2, 3, 0});
    const int32_t v32[12] = {3, 5, 3, 5, 2, 7, 5, 3, 5, 3, 5, 3};
    tci_tensor x32 = th_tensor(I32, 2, (const int64_t[]){2, 6}, v32);
    run_expect(g, node_a(g, "IDF", 2, 2, 0), &x32, 2, (const int64_t[]){2, 5},
               (const float[]){0, 0, 1, 1, 0, 0, 0, 1, 1, 0});
    /* no tokens: zeros of the output's shape (what follows a tokenizer's empty row) */
    tci_tensor empty = th_tensor(I64, 2, (const int64_t[]){3, 0}, v);
    run_expect(g, node_a(g, "TF", 1, 2, 0), &empty, 2, (const int64_t[]){3, 5},
               (const float[15]){0});
    /* one token, at every skip count */
    const int32_t three = 3;
    tci_tensor one = th_tensor(I32, 1, (const int64_t[]){1}, &three);
    run_expect(g, node_a(g, "TF", 1, 2, 3), &one, 1, (const int64_t[]){5},
               (const float[]){1, 0, 0, 0, 0});
    ir_graph_destroy(g);
}
END_TEST

/* Pool B: the unigram 4, the bigram (4, 4) and the trigram (4, 4, 4); x = 4 4 4 4. At distance
 * 1 there are 3 bigrams and 2 trigrams, at 2 two bigrams (x0 x2, x1 x3) and no trigram. */
static ir_node *node_b(ir_graph *g, int64_t min_gram, int64_t max_gram, int64_t max_skip) {
    static const int64_t pool[6] = {4, 4, 4, 4, 4, 4}, starts[3] = {0, 1, 3}, cols[3] = {0, 1, 2};
    static const pool_spec spec_b = {starts, cols, pool, 3, 3, 6};
    ir_node *n = th_node(g, "TfIdfVectorizer", 9, 1, 1);
    set_attrs(g, n, "TF", min_gram, max_gram, max_skip, &spec_b);
    return n;
}

START_TEST(test_tfidf_gram_range) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t v[4] = {4, 4, 4, 4};
    tci_tensor x = th_tensor(I64, 1, (const int64_t[]){4}, v);
    const int64_t d3[1] = {3};
    run_expect(g, node_b(g, 2, 3, 0), &x, 1, d3, (const float[]){0, 3, 2});
    run_expect(g, node_b(g, 2, 3, 1), &x, 1, d3, (const float[]){0, 5, 2});
    run_expect(g, node_b(g, 1, 3, 1), &x, 1, d3, (const float[]){4, 5, 2});
    run_expect(g, node_b(g, 3, 3, 1), &x, 1, d3, (const float[]){0, 0, 2});
    run_expect(g, node_b(g, 1, 2, 2), &x, 1, d3, (const float[]){4, 6, 0});
    ir_graph_destroy(g);
}
END_TEST

/* A TF node of pool A (gram lengths min_gram to 2, no skips) with one list attribute replaced,
 * for the refusals. */
static ir_node *node_min_with(ir_graph *g, int64_t min_gram, const char *name,
                              const int64_t *values, size_t count) {
    pool_spec spec = spec_a;
    if (strcmp(name, "ngram_counts") == 0) {
        spec.starts = values;
        spec.num_starts = count;
    } else if (strcmp(name, "ngram_indexes") == 0) {
        spec.columns = values;
        spec.num_columns = count;
    } else {
        spec.items = values;
        spec.num_items = count;
    }
    ir_node *n = th_node(g, "TfIdfVectorizer", 9, 1, 1);
    set_attrs(g, n, "TF", min_gram, 2, 0, &spec);
    return n;
}

static ir_node *node_with(ir_graph *g, const char *name, const int64_t *values, size_t count) {
    return node_min_with(g, 1, name, values, count);
}

static void expect_parse_error(ir_graph *g, ir_node *n, tci_status status, const char *text) {
    ck_assert_tci_error(op_prepare_node(n, g->arena), status, text);
}

START_TEST(test_tfidf_attribute_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = node_a(g, "TF", 1, 2, 0);
    th_attr_strings(g, n, "pool_strings", (const char *const[]){"a", "b"}, 2);
    expect_parse_error(g, n, TCI_ERR_UNSUPPORTED,
                       "(TfIdfVectorizer): attribute 'pool_strings': string n-grams are not "
                       "supported");
    n = th_node(g, "TfIdfVectorizer", 9, 1, 1);
    th_attr_int(g, n, "min_gram_length", 1);
    expect_parse_error(g, n, TCI_ERR_INVALID_MODEL, "attribute 'mode' is required");
    expect_parse_error(g, node_a(g, "BM25", 1, 2, 0), TCI_ERR_INVALID_MODEL,
                       "attribute 'mode' is 'BM25'; expected 'TF', 'IDF' or 'TFIDF'");
    expect_parse_error(g, node_a(g, "TF", 0, 2, 0), TCI_ERR_INVALID_MODEL,
                       "attribute 'min_gram_length' is 0; it must be at least 1");
    expect_parse_error(g, node_a(g, "TF", 2, 1, 0), TCI_ERR_INVALID_MODEL,
                       "attribute 'max_gram_length' is 1, below min_gram_length 2");
    expect_parse_error(g, node_a(g, "TF", 1, 2, -1), TCI_ERR_INVALID_MODEL,
                       "attribute 'max_skip_count' is -1");
    n = node_a(g, "TF", 1, 2, 0);
    th_attr_int(g, n, "max_ngram", 3);
    expect_parse_error(g, n, TCI_ERR_UNSUPPORTED, "max_ngram");
    /* the pool's layout */
    expect_parse_error(g, node_with(g, "pool_int64s", pool_a, 0), TCI_ERR_INVALID_MODEL,
                       "attribute 'pool_int64s' is empty");
    expect_parse_error(g, node_with(g, "ngram_counts", pool_a, 0), TCI_ERR_INVALID_MODEL,
                       "attribute 'ngram_counts' is empty");
    expect_parse_error(g, node_with(g, "ngram_counts", (const int64_t[]){0, 8}, 2),
                       TCI_ERR_INVALID_MODEL,
                       "attribute 'ngram_counts': entry 1 (8) is outside pool_int64s' 7 items");
    expect_parse_error(g, node_with(g, "ngram_counts", (const int64_t[]){0, 3, 1}, 3),
                       TCI_ERR_INVALID_MODEL,
                       "entry 2 (1) is below entry 1 (3); the starts must not decrease");
    expect_parse_error(g, node_with(g, "ngram_counts", (const int64_t[]){0, 2}, 2),
                       TCI_ERR_INVALID_MODEL,
                       "the 5 items of 2-grams (pool_int64s[2:7]) are not whole 2-grams");
    expect_parse_error(g, node_with(g, "ngram_indexes", (const int64_t[]){0, 1, 2, 3}, 4),
                       TCI_ERR_INVALID_MODEL,
                       "attribute 'ngram_indexes' has 4 entries; the pool holds 5 n-grams");
    expect_parse_error(g, node_with(g, "ngram_indexes", pool_a, 0), TCI_ERR_INVALID_MODEL,
                       "attribute 'ngram_indexes' is empty");
    expect_parse_error(g, node_with(g, "ngram_indexes", (const int64_t[]){0, 1, -2, 3, 4}, 5),
                       TCI_ERR_INVALID_MODEL,
                       "attribute 'ngram_indexes': entry 2 is -2, not an output column");
    expect_parse_error(g, node_with(g, "pool_int64s", (const int64_t[]){2, 3, 5, 3, 5, 3, 5}, 7),
                       TCI_ERR_INVALID_MODEL,
                       "attribute 'pool_int64s' holds the 2-gram (3, 5) twice (n-grams 3 and 4)");
    /* a duplicate among lengths out of range is never loaded (as onnxruntime) */
    n = node_min_with(g, 2, "pool_int64s", (const int64_t[]){3, 3, 5, 3, 5, 5, 3}, 7);
    ck_assert_tci_ok(op_prepare_node(n, g->arena));
    /* weights: one per n-gram, and one for every output column */
    n = node_a(g, "TFIDF", 1, 2, 0);
    th_attr_floats(g, n, "weights", (const float[]){1, 2, 3, 4}, 4);
    expect_parse_error(g, n, TCI_ERR_INVALID_MODEL,
                       "attribute 'weights' has 4 entries; ngram_indexes has 5");
    /* columns left unused are zeros; the output's width is the largest column + 1 */
    n = node_with(g, "ngram_indexes", (const int64_t[]){0, 1, 2, 3, 9}, 5);
    th_attr_floats(g, n, "weights", (const float[]){1, 2, 3, 4, 5}, 5);
    const int64_t v[3] = {2, 9, 2};
    tci_tensor x = th_tensor(I64, 1, (const int64_t[]){3}, v);
    run_expect(g, n, &x, 1, (const int64_t[]){10}, (const float[]){2, 0, 0, 0, 0, 0, 0, 0, 0, 0});
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_tfidf_input_errors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    tci_tensor y;
    const float f[4] = {3, 5, 3, 5};
    tci_tensor xf = th_tensor(TCI_DTYPE_FLOAT, 1, (const int64_t[]){4}, f);
    ck_assert_tci_error(th_run(g, node_a(g, "TF", 1, 2, 0), &xf, &y), TCI_ERR_UNSUPPORTED,
                        "input 0 has unsupported dtype float");
    const int64_t v[8] = {3, 5, 3, 5, 2, 7, 5, 3};
    tci_tensor x3 = th_tensor(I64, 3, (const int64_t[]){2, 2, 2}, v);
    ck_assert_tci_error(th_run(g, node_a(g, "TF", 1, 2, 0), &x3, &y), TCI_ERR_INVALID_MODEL,
                        "input 0 has rank 3; expected [C] or [N, C]");
    tci_tensor scalar = th_tensor(I64, 0, NULL, v);
    ck_assert_tci_error(th_run(g, node_a(g, "TF", 1, 2, 0), &scalar, &y), TCI_ERR_INVALID_MODEL,
                        "input 0 has rank 0; expected [C] or [N, C]");
    tci_tensor x0 = th_tensor(I64, 2, (const int64_t[]){0, 4}, v);
    ck_assert_tci_error(th_run(g, node_a(g, "TF", 1, 2, 0), &x0, &y), TCI_ERR_INVALID_ARGUMENT,
                        "input 0 has no rows ([0, 4]); [N, C] needs N > 0");
    /* shape inference before values: [N, C] gives [N, columns], an unknown rank stays unknown */
    ir_node *n = node_a(g, "TF", 1, 2, 0);
    tci_tensor shape = th_shape_only(I32, 2, (const int64_t[]){-1, 6});
    const tci_tensor *in[1] = {&shape};
    ck_assert_tci_ok(th_infer(g, n, in, &y));
    th_assert_dims(&y, 2, (const int64_t[]){-1, 5});
    n = node_a(g, "TF", 1, 2, 0);
    shape = th_shape_only(I64, -1, NULL);
    ck_assert_tci_ok(th_infer(g, n, in, &y));
    ck_assert_int_eq(y.rank, -1);
    ck_assert_int_eq(y.dtype, TCI_DTYPE_FLOAT);
    ir_graph_destroy(g);
}
END_TEST

/* The GPU planner refuses it naming the node (no GPU path: CPU reference only). */
START_TEST(test_tfidf_gpu_plan) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x = th_named(g, "x", I64, 2, (const int64_t[]){2, 6}, NULL);
    ir_tensor *y = th_named(g, "y", TCI_DTYPE_UNDEFINED, -1, NULL, NULL);
    th_graph_io(g, &x, 1, &y, 1);
    ir_node *n = th_node_io(g, "vec", "TfIdfVectorizer", 9, &x, 1, &y, 1);
    set_attrs(g, n, "TF", 1, 2, 0, &spec_a);
    plan *p = NULL;
    ck_assert_tci_error(th_plan_for_gpu(g, &p), TCI_ERR_UNSUPPORTED,
                        "node 'vec' (TfIdfVectorizer): op TfIdfVectorizer has no GPU path yet");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("tfidf");
    TCase *t = tcase_create("tfidf");
    tcase_add_test(t, test_tfidf_skips_and_lengths);
    tcase_add_test(t, test_tfidf_modes);
    tcase_add_test(t, test_tfidf_shared_column);
    tcase_add_test(t, test_tfidf_rows);
    tcase_add_test(t, test_tfidf_gram_range);
    tcase_add_test(t, test_tfidf_attribute_errors);
    tcase_add_test(t, test_tfidf_input_errors);
    tcase_add_test(t, test_tfidf_gpu_plan);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}
