/* Robustness: the wire-format pre-scan and parse budget, limits, the name index and the sort
 * on large graphs, checked arithmetic, and API misuse that used to read out of bounds
 * (docs/robustness.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "onnx.pb-c.h"
#include "onnx/loader.h"
#include "onnx/wire_scan.h"

/* ---- protobuf wire helpers ---- */

typedef struct buf {
    unsigned char *p;
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n) {
    b->p = realloc(b->p, b->n + n + 1);
    ck_assert_ptr_nonnull(b->p);
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void varint(buf *b, uint64_t v) {
    do {
        unsigned char c = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v) c |= 0x80;
        put(b, &c, 1);
    } while (v);
}

/* field `num` holding `inner` (consumed) */
static buf wrap(int num, buf inner) {
    buf b = {0};
    varint(&b, (uint64_t)num << 3 | 2);
    varint(&b, inner.n);
    put(&b, inner.p, inner.n);
    free(inner.p);
    return b;
}

static buf model_of(buf graph) {
    buf m = {0};
    varint(&m, 1 << 3);
    varint(&m, 8);
    buf opset = {0};
    varint(&opset, 2 << 3);
    varint(&opset, 17);
    buf o = wrap(8, opset);
    put(&m, o.p, o.n);
    free(o.p);
    buf g = wrap(7, graph);
    put(&m, g.p, g.n);
    free(g.p);
    return m;
}

/* If nodes whose then_branch nests `levels` deep */
static buf deep_if(int levels) {
    buf inner = {0};
    for (int i = 0; i < levels; i++) {
        buf attr = {0};
        buf name = {0};
        put(&name, "then_branch", 11);
        buf nf = wrap(1, name);
        put(&attr, nf.p, nf.n);
        free(nf.p);
        varint(&attr, 20 << 3);
        varint(&attr, 5);
        buf g = wrap(6, inner);
        put(&attr, g.p, g.n);
        free(g.p);
        buf node = {0};
        buf op = {0};
        put(&op, "If", 2);
        buf of = wrap(4, op);
        put(&node, of.p, of.n);
        free(of.p);
        buf af = wrap(5, attr);
        put(&node, af.p, af.n);
        free(af.p);
        inner = wrap(1, node);
    }
    return model_of(inner);
}

START_TEST(test_deep_subgraphs_refused_before_unpack) {
    /* 5,000 levels (15,000 messages deep) overflowed protobuf-c's recursion before the scan */
    buf m = deep_if(5000);
    ir_graph *g = NULL;
    ck_assert_tci_error(onnx_load_model(m.p, m.n, NULL, &g), TCI_ERR_UNSUPPORTED,
                        "nests messages more than 64 deep");
    ck_assert_ptr_null(g);
    tci_engine *e = NULL;
    ck_assert_tci_error(tci_engine_create_from_memory(m.p, m.n, NULL, NULL, &e),
                        TCI_ERR_UNSUPPORTED, "max_nesting_depth");
    free(m.p);
}
END_TEST

START_TEST(test_nesting_limit_is_exact) {
    /* ModelProto > GraphProto > (NodeProto > AttributeProto > GraphProto) x levels */
    buf m = deep_if(3);
    ir_limits lim;
    ir_limits_default(&lim);
    lim.max_nesting = 2 + 3 * 3;
    ck_assert_tci_ok(onnx_wire_check(m.p, m.n, &onnx__model_proto__descriptor, &lim, "model"));
    lim.max_nesting--;
    ck_assert_tci_error(onnx_wire_check(m.p, m.n, &onnx__model_proto__descriptor, &lim, "model"),
                        TCI_ERR_UNSUPPORTED, "more than 10 deep");
    free(m.p);
}
END_TEST

START_TEST(test_wire_check_refuses_broken_bytes) {
    ir_limits lim;
    ir_limits_default(&lim);
    const unsigned char truncated_varint[] = {0x08, 0x80};
    const unsigned char past_end[] = {0x3a, 0x7f, 0x00};
    const unsigned char group[] = {0x3b};
    const unsigned char fixed64_short[] = {0x09, 1, 2, 3};
    const unsigned char *cases[] = {truncated_varint, past_end, group, fixed64_short};
    size_t sizes[] = {sizeof truncated_varint, sizeof past_end, sizeof group, sizeof fixed64_short};
    for (int i = 0; i < 4; i++)
        ck_assert_tci_error(onnx_wire_check(cases[i], sizes[i], &onnx__model_proto__descriptor,
                                            &lim, "model"),
                            TCI_ERR_PARSE, "not a valid ONNX model");
}
END_TEST

START_TEST(test_node_count_checked_before_unpack) {
    buf graph = {0};
    for (int i = 0; i < 101; i++) put(&graph, "\x0a\x00", 2);
    buf m = model_of(graph);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.max_nodes = 100;
    tci_engine *e = NULL;
    ck_assert_tci_error(tci_engine_create_from_memory(m.p, m.n, NULL, &o, &e), TCI_ERR_UNSUPPORTED,
                        "more than 100 nodes (max_nodes)");
    free(m.p);
}
END_TEST

START_TEST(test_parse_budget) {
    onnx_budget b;
    onnx_budget_init(&b, 100);
    void *p = b.allocator.alloc(b.allocator.allocator_data, 60);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_null(b.allocator.alloc(b.allocator.allocator_data, 41));
    ck_assert(b.refused);
    void *q = b.allocator.alloc(b.allocator.allocator_data, 40);
    ck_assert_ptr_nonnull(q);
    b.allocator.free(b.allocator.allocator_data, p);
    ck_assert_uint_eq(b.taken, 40);
    ck_assert_uint_eq(b.peak, 100);
    b.allocator.free(b.allocator.allocator_data, q);
    ck_assert_uint_eq(b.taken, 0);
    ck_assert_ptr_null(b.allocator.alloc(b.allocator.allocator_data, SIZE_MAX - 8));
}
END_TEST

START_TEST(test_limit_options_checked) {
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.max_nesting_depth = 5000;
    tci_engine *e = NULL;
    ck_assert_tci_error(tci_engine_create_from_memory("", 0, NULL, &o, &e),
                        TCI_ERR_INVALID_ARGUMENT, "max_nesting_depth 5000");
    o.max_nesting_depth = 0;
    o.max_tensor_elements = -1;
    ck_assert_tci_error(tci_engine_create_from_memory("", 0, NULL, &o, &e),
                        TCI_ERR_INVALID_ARGUMENT, "max_tensor_elements is negative");
}
END_TEST

/* ---- the name index and the sort at scale ---- */

START_TEST(test_name_index_many_tensors) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    enum { N = 20000 };
    char name[32];
    for (int i = 0; i < N; i++) {
        ir_tensor *t;
        snprintf(name, sizeof name, "t%d", i);
        ck_assert_tci_ok(ir_graph_add_tensor(g, name, &t));
        ir_tensor *anon;
        ck_assert_tci_ok(ir_graph_add_tensor(g, NULL, &anon)); /* unnamed: not indexed */
    }
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "t%d", i);
        ir_tensor *t = ir_graph_find_tensor(g, name);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->name, name);
        ck_assert_uint_eq(t->index, 2 * (size_t)i);
    }
    ck_assert_ptr_null(ir_graph_find_tensor(g, "t20000"));
    ck_assert_ptr_null(ir_graph_find_tensor(g, ""));
    ir_tensor *dup;
    ck_assert_tci_error(ir_graph_add_tensor(g, "t123", &dup), TCI_ERR_INVALID_MODEL,
                        "defined twice");
    ir_graph *c;
    ck_assert_tci_ok(ir_graph_clone(g, &c));
    ck_assert_ptr_eq(ir_graph_find_tensor(c, "t777"), c->tensors[2 * 777]);
    ir_graph_destroy(c);
    ir_graph_destroy(g);
}
END_TEST

/* A chain stored in reverse (the old sort's worst case) sorts into chain order; ready nodes
 * keep their file order. */
START_TEST(test_sort_reversed_chain_and_stability) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    enum { N = 50000 };
    ir_tensor **t = malloc((N + 1) * sizeof *t);
    char name[32];
    for (int i = 0; i <= N; i++) {
        snprintf(name, sizeof name, "t%d", i);
        ck_assert_tci_ok(ir_graph_add_tensor(g, name, &t[i]));
    }
    t[0]->is_graph_input = true;
    for (int i = N - 1; i >= 0; i--) {
        ir_node *n;
        snprintf(name, sizeof name, "n%d", i);
        ck_assert_tci_ok(ir_graph_add_node(g, name, "Relu", "", 1, 1, &n));
        n->inputs[0] = t[i];
        n->outputs[0] = t[i + 1];
    }
    ck_assert_tci_ok(ir_graph_sort(g));
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "n%d", i);
        ck_assert_str_eq(g->nodes[i]->name, name);
        ck_assert_uint_eq(g->nodes[i]->index, (size_t)i);
    }
    ir_graph_destroy(g);
    free(t);

    /* x -> b, x -> a, b -> c: independent nodes stay in file order (b, a, c) */
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_tensor *x, *ta, *tb, *tc;
    ck_assert_tci_ok(ir_graph_add_tensor(g, "x", &x));
    x->is_graph_input = true;
    ck_assert_tci_ok(ir_graph_add_tensor(g, "a", &ta));
    ck_assert_tci_ok(ir_graph_add_tensor(g, "b", &tb));
    ck_assert_tci_ok(ir_graph_add_tensor(g, "c", &tc));
    ir_node *nc, *nb, *na;
    ck_assert_tci_ok(ir_graph_add_node(g, "c", "Add", "", 2, 1, &nc));
    ck_assert_tci_ok(ir_graph_add_node(g, "b", "Relu", "", 1, 1, &nb));
    ck_assert_tci_ok(ir_graph_add_node(g, "a", "Relu", "", 1, 1, &na));
    nc->inputs[0] = tb;
    nc->inputs[1] = tb; /* the same producer twice */
    nc->outputs[0] = tc;
    nb->inputs[0] = x;
    nb->outputs[0] = tb;
    na->inputs[0] = x;
    na->outputs[0] = ta;
    ck_assert_tci_ok(ir_graph_sort(g));
    ck_assert_str_eq(g->nodes[0]->name, "b");
    ck_assert_str_eq(g->nodes[1]->name, "c");
    ck_assert_str_eq(g->nodes[2]->name, "a");
    ir_graph_destroy(g);
}
END_TEST

/* ---- checked arithmetic and API misuse ---- */

START_TEST(test_tensor_count_checked) {
    tci_tensor t = {.dtype = TCI_DTYPE_FLOAT, .rank = 3, .dims = {1 << 30, 1 << 30, 1 << 30}};
    ck_assert_int_eq(tci_tensor_count(&t), -1); /* overflowed int64 (UBSan) before */
    t.rank = 2;
    ck_assert_int_eq(tci_tensor_count(&t), (int64_t)1 << 60);
    t.dims[1] = 0;
    ck_assert_int_eq(tci_tensor_count(&t), 0);
    t.dims[1] = -3;
    ck_assert_int_eq(tci_tensor_count(&t), -1);
    t.rank = 9;
    ck_assert_int_eq(tci_tensor_count(&t), -1);
    t.rank = -1;
    ck_assert_int_eq(tci_tensor_count(&t), -1);
    ck_assert_int_eq(tci_tensor_count(NULL), -1);
    t.rank = 0;
    ck_assert_int_eq(tci_tensor_count(&t), 1);
}
END_TEST

/* dims has TCI_MAX_RANK entries: a struct whose rank says more must not be read past them */
typedef struct padded_tensor {
    tci_tensor t;
} padded_tensor;

START_TEST(test_rank_over_max_never_read_past_dims) {
    padded_tensor *p = calloc(1, sizeof *p); /* heap: ASan sees a read past dims */
    float data[4] = {0};
    p->t.dtype = TCI_DTYPE_FLOAT;
    p->t.rank = 1000;
    p->t.data = data;
    tci_compare_result r;
    tci_compare_result_init(&r);
    ck_assert_tci_error(tci_compare(&p->t, &p->t, &r), TCI_ERR_INVALID_ARGUMENT,
                        "rank of 0..8");
    ck_assert_tci_error(tci_tensor_write_npy("/dev/null", &p->t), TCI_ERR_INVALID_ARGUMENT,
                        "rank 1000");
    char text[128];
    ck_assert_str_eq(ir_format_dims(1000, p->t.dims, text, sizeof text),
                     "(rank 1000, over the maximum of 8)");
    /* a run with such an input: the message was formatted from dims[0..1000) */
    tci_engine *e = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(TCI_TEST_DATA "/../../models/demo/tiny_cnn.onnx",
                                                 NULL, &e));
    tci_context *c = NULL;
    ck_assert_tci_ok(tci_context_create(e, &c));
    ck_assert_tci_error(tci_context_run(c, &p->t, 1), TCI_ERR_INVALID_ARGUMENT,
                        "has shape (rank 1000, over the maximum of 8)");
    tci_context_destroy(c);
    tci_engine_destroy(e);
    free(p);
}
END_TEST

START_TEST(test_compare_and_npy_need_data) {
    tci_tensor t = {.dtype = TCI_DTYPE_FLOAT, .rank = 1, .dims = {4}};
    tci_compare_result r;
    tci_compare_result_init(&r);
    ck_assert_tci_error(tci_compare(&t, &t, &r), TCI_ERR_INVALID_ARGUMENT, "no data");
    ck_assert_tci_error(tci_tensor_write_npy("/dev/null", &t), TCI_ERR_INVALID_ARGUMENT, "no data");
    t.dims[0] = -2;
    ck_assert_tci_error(tci_compare(&t, &t, &r), TCI_ERR_INVALID_ARGUMENT, "non-negative dims");
}
END_TEST

START_TEST(test_null_shapes_with_count) {
    unsigned char model[] = {0x08, 0x08, 0x42, 0x02, 0x10, 0x11, 0x3a, 0x00};
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.num_shapes = 2;
    tci_engine *e = NULL;
    ck_assert_tci_error(tci_engine_create_from_memory(model, sizeof model, NULL, &o, &e),
                        TCI_ERR_INVALID_ARGUMENT, "num_shapes is 2 but shapes is NULL");
    ck_assert_ptr_null(e);
}
END_TEST

/* A caller built against the 0.1 header passes a struct_size that ends before the limits: they
 * keep their defaults, whatever lies past it. */
START_TEST(test_limits_past_struct_size_keep_defaults) {
    buf graph = {0};
    for (int i = 0; i < 3; i++) put(&graph, "\x0a\x00", 2);
    buf m = model_of(graph);
    tci_engine_options o;
    tci_engine_options_init(&o);
    o.max_nodes = 2;
    tci_engine *e = NULL;
    ck_assert_tci_error(tci_engine_create_from_memory(m.p, m.n, NULL, &o, &e), TCI_ERR_UNSUPPORTED,
                        "more than 2 nodes (max_nodes)");
    o.struct_size = offsetof(tci_engine_options, max_model_bytes);
    o.max_nesting_depth = 5000; /* out of range, but not read */
    /* past the node count: the loader reaches the nodes themselves */
    ck_assert_tci_error(tci_engine_create_from_memory(m.p, m.n, NULL, &o, &e),
                        TCI_ERR_INVALID_MODEL, "has no op_type");
    free(m.p);
}
END_TEST

int main(void) {
    Suite *s = suite_create("robust");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_deep_subgraphs_refused_before_unpack);
    tcase_add_test(tc, test_nesting_limit_is_exact);
    tcase_add_test(tc, test_wire_check_refuses_broken_bytes);
    tcase_add_test(tc, test_node_count_checked_before_unpack);
    tcase_add_test(tc, test_parse_budget);
    tcase_add_test(tc, test_limit_options_checked);
    tcase_add_test(tc, test_name_index_many_tensors);
    tcase_add_test(tc, test_sort_reversed_chain_and_stability);
    tcase_add_test(tc, test_tensor_count_checked);
    tcase_add_test(tc, test_rank_over_max_never_read_past_dims);
    tcase_add_test(tc, test_compare_and_npy_need_data);
    tcase_add_test(tc, test_null_shapes_with_count);
    tcase_add_test(tc, test_limits_past_struct_size_keep_defaults);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
