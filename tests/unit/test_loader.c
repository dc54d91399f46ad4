/* ONNX loader: every initializer storage form and dtype, inputs, nodes, attributes, opsets,
 * external data and its containment checks, and malformed models. Fixtures come from
 * tests/data/make_fixtures.py. */
#define _XOPEN_SOURCE 700 /* mkdtemp, symlink */

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "onnx/loader.h"

#define FIXTURE(name) TCI_TEST_DATA "/loader/" name

static ir_graph *load_ok(const char *path) {
    ir_graph *g = NULL;
    ck_assert_tci_ok(onnx_load_file(path, &g));
    ck_assert_ptr_nonnull(g);
    return g;
}

static tci_status load(const char *path) {
    ir_graph *g = (ir_graph *)1;
    tci_status st = onnx_load_file(path, &g);
    ck_assert_ptr_null(g);
    return st;
}

static ir_tensor *tensor(const ir_graph *g, const char *name) {
    ir_tensor *t = ir_graph_find_tensor(g, name);
    ck_assert_msg(t != NULL, "no tensor '%s'", name);
    return t;
}

static ir_node *node(const ir_graph *g, const char *name) {
    for (size_t i = 0; i < g->num_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    ck_abort_msg("no node '%s'", name);
    return NULL;
}

static unsigned char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    unsigned char *buf = malloc(1 << 16);
    *size = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static void write_all(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(data, 1, size, f), size);
    fclose(f);
}

static void assert_shape(const ir_tensor *t, tci_dtype dtype, int rank, const int64_t *dims) {
    ck_assert_int_eq(t->dtype, dtype);
    ck_assert_int_eq(t->rank, rank);
    for (int i = 0; i < rank; i++) ck_assert_int_eq(t->dims[i], dims[i]);
}

/* raw_data and the typed field must give the same bytes. */
static void assert_pair(const ir_graph *g, const char *stem, tci_dtype dtype, const void *want,
                        size_t bytes) {
    char name[64];
    const char *forms[] = {"raw", "typed"};
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "%s_%s", stem, forms[k]);
        const ir_tensor *t = tensor(g, name);
        ck_assert_int_eq(t->dtype, dtype);
        ck_assert_ptr_nonnull(t->data);
        ck_assert_msg(memcmp(t->data, want, bytes) == 0, "%s has the wrong values", name);
        ck_assert(!t->is_graph_input);
    }
}

START_TEST(test_initializers_every_form_and_dtype) {
    ir_graph *g = load_ok(FIXTURE("initializers.onnx"));
    const float f32[] = {1.5f, -2.0f, 3.25f, 0.0f};
    const uint16_t f16[] = {0x3C00, 0xC100, 0x7BFF}; /* 1, -2.5, 65504 */
    const double f64[] = {0.1, -1e300};
    const int64_t i64[] = {-(INT64_C(1) << 40), 7};
    const int32_t i32[] = {INT32_MIN, 5, INT32_MAX};
    const int8_t i8[] = {-128, 0, 127};
    const uint8_t u8[] = {0, 128, 255};
    const uint8_t b[] = {1, 0, 1}; /* the typed form stores 7: any nonzero is true */
    assert_pair(g, "f32", TCI_DTYPE_FLOAT, f32, sizeof f32);
    assert_pair(g, "f16", TCI_DTYPE_FLOAT16, f16, sizeof f16);
    assert_pair(g, "f64", TCI_DTYPE_DOUBLE, f64, sizeof f64);
    assert_pair(g, "i64", TCI_DTYPE_INT64, i64, sizeof i64);
    assert_pair(g, "i32", TCI_DTYPE_INT32, i32, sizeof i32);
    assert_pair(g, "i8", TCI_DTYPE_INT8, i8, sizeof i8);
    assert_pair(g, "u8", TCI_DTYPE_UINT8, u8, sizeof u8);
    assert_pair(g, "bool", TCI_DTYPE_BOOL, b, sizeof b);
    const int64_t d22[] = {2, 2}, d20[] = {2, 0};
    assert_shape(tensor(g, "f32_raw"), TCI_DTYPE_FLOAT, 2, d22);
    /* an empty initializer still has data, which is what marks it constant */
    const ir_tensor *empty = tensor(g, "empty");
    assert_shape(empty, TCI_DTYPE_FLOAT, 2, d20);
    ck_assert_ptr_nonnull(empty->data);
    const ir_tensor *scalar = tensor(g, "scalar");
    assert_shape(scalar, TCI_DTYPE_INT64, 0, NULL);
    ck_assert_int_eq(*(const int64_t *)scalar->data, 42);

    ck_assert_uint_eq(g->num_inputs, 0);
    ck_assert_uint_eq(g->num_outputs, 1);
    ck_assert_ptr_eq(g->outputs[0], tensor(g, "f32_raw"));
    ck_assert(g->outputs[0]->is_graph_output);
    ck_assert_int_eq(g->ir_version, 8);
    ck_assert_str_eq(g->name, "g");
    ck_assert_uint_eq(g->num_opsets, 1);
    ck_assert_str_eq(g->opsets[0].domain, "");
    ck_assert_int_eq(g->opsets[0].version, 13);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_inputs_and_symbolic_dims) {
    ir_graph *g = load_ok(FIXTURE("graph.onnx"));
    /* W is listed as an input too, but it is an initializer: a constant */
    ck_assert_uint_eq(g->num_inputs, 2);
    ir_tensor *x = g->inputs[0];
    const int64_t xd[] = {-1, 3, -1, 4};
    ck_assert_str_eq(x->name, "x");
    assert_shape(x, TCI_DTYPE_FLOAT, 4, xd);
    ck_assert(x->is_graph_input);
    ck_assert_str_eq(x->dim_names[0], "N");
    for (int i = 1; i < 4; i++) ck_assert_ptr_null(x->dim_names[i]);
    ir_tensor *noshape = g->inputs[1];
    ck_assert_str_eq(noshape->name, "noshape");
    ck_assert_int_eq(noshape->dtype, TCI_DTYPE_INT64);
    ck_assert_int_eq(noshape->rank, -1);
    ir_tensor *w = tensor(g, "W");
    ck_assert(!w->is_graph_input);
    ck_assert_float_eq(((const float *)w->data)[5], 6.0f);
    ck_assert_str_eq(g->name, "main_graph");
    ck_assert_int_eq(g->ir_version, 7);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_nodes_and_attributes) {
    ir_graph *g = load_ok(FIXTURE("graph.onnx"));
    ck_assert_uint_eq(g->num_nodes, 3);
    ir_node *custom = node(g, "Custom_0");
    ck_assert_str_eq(custom->op_type, "Custom");
    ck_assert_str_eq(custom->domain, "com.example");
    ck_assert_int_eq(custom->opset, 2);
    ck_assert_int_eq(custom->num_inputs, 3);
    ck_assert_ptr_eq(custom->inputs[0], tensor(g, "x"));
    ck_assert_ptr_null(custom->inputs[1]);
    ck_assert_ptr_eq(custom->inputs[2], tensor(g, "W"));
    ck_assert_int_eq(custom->num_outputs, 2);
    ck_assert_ptr_eq(custom->outputs[0], tensor(g, "y"));
    ck_assert_ptr_null(custom->outputs[1]);

    float f;
    int64_t i;
    const char *s;
    const float *floats;
    const int64_t *ints;
    size_t n;
    ck_assert_tci_ok(ir_attr_float(custom, "f", 0, &f));
    ck_assert_float_eq(f, 0.5f);
    ck_assert_tci_ok(ir_attr_int(custom, "i", 0, &i));
    ck_assert_int_eq(i, -3);
    ck_assert_tci_ok(ir_attr_string(custom, "s", NULL, &s));
    ck_assert_str_eq(s, "hello");
    ck_assert_tci_ok(ir_attr_floats(custom, "floats", &floats, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_float_eq(floats[1], 2.0f);
    ck_assert_tci_ok(ir_attr_ints(custom, "ints", &ints, &n));
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ints[1], -2);
    const ir_attr *strings = ir_node_attr(custom, "strings");
    ck_assert_int_eq(strings->type, IR_ATTR_STRINGS);
    ck_assert_uint_eq(strings->count, 2);
    ck_assert_str_eq(strings->strings[0], "a");
    ck_assert_str_eq(strings->strings[1], "bc");
    /* the tensor attribute is named "y" like the node's output, yet is a separate constant */
    const ir_attr *t = ir_node_attr(custom, "t");
    ck_assert_int_eq(t->type, IR_ATTR_TENSOR);
    ck_assert_ptr_ne(t->tensor, tensor(g, "y"));
    const int64_t d2[] = {2};
    assert_shape(t->tensor, TCI_DTYPE_INT32, 1, d2);
    ck_assert_int_eq(((const int32_t *)t->tensor->data)[1], 5);
    ck_assert_ptr_null(tensor(g, "y")->data);
    ck_assert_int_eq(ir_node_attr(custom, "g")->type, IR_ATTR_GRAPH);
    ck_assert_int_eq(ir_node_attr(custom, "sp")->type, 11); /* ONNX SPARSE_TENSOR */

    /* "ai.onnx" is the default domain */
    ir_node *relu = node(g, "Relu_1");
    ck_assert_str_eq(relu->domain, "");
    ck_assert_int_eq(relu->opset, 13);
    ck_assert_ptr_eq(relu->inputs[0], custom->outputs[0]);
    ir_node *cst = node(g, "const");
    const ir_attr *value = ir_node_attr(cst, "value");
    ck_assert_int_eq(value->tensor->dtype, TCI_DTYPE_FLOAT16);
    ck_assert_uint_eq(*(const uint16_t *)value->tensor->data, 0x3C00);

    ck_assert_uint_eq(g->num_outputs, 3);
    ck_assert_str_eq(g->outputs[0]->name, "z");
    ck_assert_str_eq(g->outputs[1]->name, "c");
    ck_assert_str_eq(g->outputs[2]->name, "W"); /* an initializer may be an output */
    for (size_t k = 0; k < 3; k++) ck_assert(g->outputs[k]->is_graph_output);
    ck_assert_uint_eq(g->num_opsets, 2);
    ck_assert_str_eq(g->opsets[1].domain, "com.example");
    ck_assert_int_eq(g->opsets[1].version, 2);
    ck_assert_tci_ok(ir_graph_sort(g));
    ir_graph_destroy(g);
}
END_TEST

/* onnx.proto here is IR 8; a model from onnx 1.23 carries fields it does not know. */
START_TEST(test_newer_ir_version) {
    ir_graph *g = load_ok(FIXTURE("newer_ir.onnx"));
    ck_assert_int_ge(g->ir_version, 10);
    ir_node *relu = node(g, "relu");
    ck_assert_int_eq(relu->opset, 23);
    const int64_t d1[] = {1};
    assert_shape(g->inputs[0], TCI_DTYPE_FLOAT, 1, d1);
    ck_assert_str_eq(g->outputs[0]->name, "y");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_external_data) {
    ir_graph *g = load_ok(FIXTURE("ext_good.onnx"));
    const float w[] = {1, 2, 3, 4};
    const int64_t tail[] = {-1, 9}; /* no length: to the end of the file */
    const uint16_t h[] = {0x3C00, 0xC000};
    const int64_t d22[] = {2, 2}, d2[] = {2};
    assert_shape(tensor(g, "w"), TCI_DTYPE_FLOAT, 2, d22);
    ck_assert(memcmp(tensor(g, "w")->data, w, sizeof w) == 0);
    assert_shape(tensor(g, "tail"), TCI_DTYPE_INT64, 1, d2);
    ck_assert(memcmp(tensor(g, "tail")->data, tail, sizeof tail) == 0);
    assert_shape(tensor(g, "h"), TCI_DTYPE_FLOAT16, 1, d2);
    ck_assert(memcmp(tensor(g, "h")->data, h, sizeof h) == 0);
    ir_graph_destroy(g);
}
END_TEST

/* A bare file name resolves against the current folder. */
START_TEST(test_external_data_relative_model_path) {
    char cwd[4096];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(FIXTURE("")), 0);
    ir_graph *g = NULL;
    tci_status st = onnx_load_file("ext_good.onnx", &g);
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_tci_ok(st);
    ck_assert_float_eq(((const float *)tensor(g, "w")->data)[3], 4.0f);
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_external_data_errors) {
    ck_assert_tci_error(load(FIXTURE("ext_dotdot.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': external data location "
                        "'ext_sub/../../loader/ext_weights.bin' contains '..'");
    ck_assert_tci_error(load(FIXTURE("ext_absolute.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': external data location '/etc/passwd' is an "
                        "absolute path");
    ck_assert_tci_error(load(FIXTURE("ext_missing.onnx")), TCI_ERR_IO,
                        "initializer 'w': cannot open external data file 'missing.bin': No "
                        "such file");
    ck_assert_tci_error(load(FIXTURE("ext_short.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': external data file 'ext_weights.bin' has 32 bytes, "
                        "too short for offset 24 + length 16");
    ck_assert_tci_error(load(FIXTURE("ext_length.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': external data in 'ext_weights.bin' is 12 bytes, "
                        "expected 16 (4 of float)");
    ck_assert_tci_error(load(FIXTURE("ext_bad_offset.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': external data offset '-4' is not a byte count");
}
END_TEST

START_TEST(test_external_data_needs_base_dir) {
    size_t size;
    unsigned char *bytes = read_all(FIXTURE("ext_good.onnx"), &size);
    ir_graph *g = (ir_graph *)1;
    ck_assert_tci_error(onnx_load_model(bytes, size, NULL, &g), TCI_ERR_INVALID_ARGUMENT,
                        "initializer 'w': external data 'ext_weights.bin' needs the model's "
                        "folder");
    ck_assert_ptr_null(g);
    free(bytes);
}
END_TEST

/* A symlink inside the model's folder may point within it, never out of it. */
START_TEST(test_external_data_symlinks) {
    char outside[] = "/tmp/tci_loader_outXXXXXX", inside[] = "/tmp/tci_loader_inXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(outside));
    ck_assert_ptr_nonnull(mkdtemp(inside));
    const float data[] = {5, 6, 7, 8};
    char secret[256], real[256], link[256], dirlink[256];
    snprintf(secret, sizeof secret, "%s/secret.bin", outside);
    snprintf(real, sizeof real, "%s/real.bin", inside);
    snprintf(link, sizeof link, "%s/link.bin", inside);
    snprintf(dirlink, sizeof dirlink, "%s_alias", inside);
    write_all(secret, data, sizeof data);
    write_all(real, data, sizeof data);
    size_t size;
    unsigned char *bytes = read_all(FIXTURE("ext_link.onnx"), &size);
    ir_graph *g = NULL;

    ck_assert_int_eq(symlink(secret, link), 0);
    ck_assert_tci_error(onnx_load_model(bytes, size, inside, &g), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': external data file 'link.bin' resolves outside the "
                        "model's folder");
    ck_assert_ptr_null(g);

    ck_assert_int_eq(unlink(link), 0);
    ck_assert_int_eq(symlink("real.bin", link), 0);
    ck_assert_tci_ok(onnx_load_model(bytes, size, inside, &g));
    ck_assert_float_eq(((const float *)tensor(g, "w")->data)[2], 7.0f);
    ir_graph_destroy(g);

    /* the base folder itself reached through a symlink */
    ck_assert_int_eq(symlink(inside, dirlink), 0);
    ck_assert_tci_ok(onnx_load_model(bytes, size, dirlink, &g));
    ir_graph_destroy(g);

    free(bytes);
    unlink(dirlink);
    unlink(link);
    unlink(real);
    unlink(secret);
    rmdir(inside);
    rmdir(outside);
}
END_TEST

START_TEST(test_truncated_and_garbage) {
    size_t size;
    unsigned char *bytes = read_all(FIXTURE("graph.onnx"), &size);
    ir_graph *g = (ir_graph *)1;
    ck_assert_tci_error(onnx_load_model(bytes, size / 2, NULL, &g), TCI_ERR_PARSE,
                        "not a valid ONNX model (protobuf parse failed)");
    ck_assert_ptr_null(g);
    ck_assert_tci_error(onnx_load_model(bytes, size - 1, NULL, &g), TCI_ERR_PARSE,
                        "not a valid ONNX model");
    free(bytes);

    const unsigned char junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    ck_assert_tci_error(onnx_load_model(junk, sizeof junk, NULL, &g), TCI_ERR_PARSE,
                        "not a valid ONNX model");

    char dir[] = "/tmp/tci_loader_junkXXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/garbage.onnx", dir);
    const char text[] = "this is not an onnx model\n";
    write_all(path, text, sizeof text - 1);
    tci_status st = load(path);
    char want[300];
    snprintf(want, sizeof want, "model file '%s': not a valid ONNX model", path);
    ck_assert_tci_error(st, TCI_ERR_PARSE, want);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(test_file_errors) {
    ck_assert_tci_error(load(FIXTURE("no_such_model.onnx")), TCI_ERR_IO,
                        "cannot open model file '" FIXTURE("no_such_model.onnx") "'");
    ck_assert_tci_error(load(FIXTURE("ext_sub")), TCI_ERR_IO,
                        "model file '" FIXTURE("ext_sub") "' is not a regular file");
    ir_graph *g;
    ck_assert_tci_error(onnx_load_file(NULL, &g), TCI_ERR_INVALID_ARGUMENT, "NULL path");
}
END_TEST

START_TEST(test_invalid_models) {
    ck_assert_tci_error(load(FIXTURE("no_graph.onnx")), TCI_ERR_INVALID_MODEL,
                        "the model has no graph");
    ir_graph *g = (ir_graph *)1;
    ck_assert_tci_error(onnx_load_model("", 0, NULL, &g), TCI_ERR_INVALID_MODEL, "no graph");
    ck_assert_ptr_null(g);
    ck_assert_tci_error(load(FIXTURE("undefined_output.onnx")), TCI_ERR_INVALID_MODEL,
                        "graph output 'ghost' is not produced by any node, initializer or "
                        "graph input");
    ck_assert_tci_error(load(FIXTURE("unknown_domain.onnx")), TCI_ERR_INVALID_MODEL,
                        "node 'r' (Relu): the model imports no opset for domain 'com.unknown'");
    ck_assert_tci_error(load(FIXTURE("conflicting_opsets.onnx")), TCI_ERR_INVALID_MODEL,
                        "domain 'ai.onnx' is imported twice, as opset 13 and 11");
    ck_assert_tci_error(load(FIXTURE("dup_initializer.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w' is defined twice");
    ck_assert_tci_error(load(FIXTURE("dup_input.onnx")), TCI_ERR_INVALID_MODEL,
                        "graph input 'x' is listed twice");
}
END_TEST

START_TEST(test_unsupported_input_types) {
    ck_assert_tci_error(load(FIXTURE("sequence_input.onnx")), TCI_ERR_UNSUPPORTED,
                        "graph input 'x' is a sequence; only tensors are supported");
    ck_assert_tci_error(load(FIXTURE("map_input.onnx")), TCI_ERR_UNSUPPORTED,
                        "graph input 'x' is a map");
    ck_assert_tci_error(load(FIXTURE("bfloat16_input.onnx")), TCI_ERR_UNSUPPORTED,
                        "graph input 'x' has element type bfloat16, which is not supported");
}
END_TEST

START_TEST(test_bad_initializers) {
    ck_assert_tci_error(load(FIXTURE("raw_length.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': raw_data has 20 bytes, expected 24 (2x3 of float)");
    ck_assert_tci_error(load(FIXTURE("typed_length.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': int64_data has 5 values, expected 6 (2x3)");
    ck_assert_tci_error(load(FIXTURE("wrong_field.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': float_data has 0 values, expected 2 (2)");
    ck_assert_tci_error(load(FIXTURE("negative_dim.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w' has negative dim -3 at axis 1");
    ck_assert_tci_error(load(FIXTURE("overflow_dims.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': element count of shape overflows int64");
    ck_assert_tci_error(load(FIXTURE("int8_range.onnx")), TCI_ERR_INVALID_MODEL,
                        "initializer 'w': int32_data value 300 is out of range for int8");
}
END_TEST

START_TEST(test_unsupported_dtypes) {
    ck_assert_tci_error(load(FIXTURE("bfloat16_init.onnx")), TCI_ERR_UNSUPPORTED,
                        "initializer 'w' has data type bfloat16, which is not supported");
    ck_assert_tci_error(load(FIXTURE("string_init.onnx")), TCI_ERR_UNSUPPORTED,
                        "initializer 'w' has data type string");
    ck_assert_tci_error(load(FIXTURE("float8_init.onnx")), TCI_ERR_UNSUPPORTED,
                        "initializer 'w' has data type float8e4m3fn");
    ck_assert_tci_error(load(FIXTURE("uint16_init.onnx")), TCI_ERR_UNSUPPORTED,
                        "initializer 'w' has data type uint16");
    ck_assert_tci_error(load(FIXTURE("bad_attr_tensor.onnx")), TCI_ERR_UNSUPPORTED,
                        "node 'k' (Constant): attribute 'value' has data type complex64");
}
END_TEST

/* The remaining error paths, one fixture each. */
static const struct {
    const char *file;
    tci_status status;
    const char *message;
} error_cases[] = {
    {"dup_attr.onnx", TCI_ERR_INVALID_MODEL, "node 'r' (Relu): attribute 'alpha' is given twice"},
    {"ref_attr.onnx", TCI_ERR_INVALID_MODEL,
     "node 'r' (Relu): attribute 'alpha' refers to function attribute 'outer'"},
    {"attr_no_name.onnx", TCI_ERR_INVALID_MODEL, "node 'r' (Relu): an attribute has no name"},
    {"attr_tensor_missing.onnx", TCI_ERR_INVALID_MODEL,
     "node 'r' (Relu): attribute 'value' is a tensor attribute without a tensor"},
    {"no_op_type.onnx", TCI_ERR_INVALID_MODEL, "node 0 ('n') has no op_type"},
    {"bad_opset_version.onnx", TCI_ERR_INVALID_MODEL,
     "opset import for domain 'ai.onnx' has invalid version 0"},
    {"input_no_type.onnx", TCI_ERR_INVALID_MODEL, "graph input 'x' has no type"},
    {"input_no_elem.onnx", TCI_ERR_INVALID_MODEL, "graph input 'x' has no element type"},
    {"optional_input.onnx", TCI_ERR_UNSUPPORTED, "graph input 'x' is an optional"},
    {"sparse_input.onnx", TCI_ERR_UNSUPPORTED, "graph input 'x' is a sparse tensor"},
    {"rank9_input.onnx", TCI_ERR_UNSUPPORTED, "graph input 'x' has rank 9; at most 8"},
    {"unnamed_input.onnx", TCI_ERR_INVALID_MODEL, "graph input 0 has no name"},
    {"unnamed_output.onnx", TCI_ERR_INVALID_MODEL, "graph output 0 has no name"},
    {"sequence_output.onnx", TCI_ERR_UNSUPPORTED, "graph output 'y' is a sequence"},
    {"unnamed_init.onnx", TCI_ERR_INVALID_MODEL, "initializer 0 has no name"},
    {"no_dtype.onnx", TCI_ERR_INVALID_MODEL, "initializer 'w' has no data type"},
    {"rank9_init.onnx", TCI_ERR_UNSUPPORTED, "initializer 'w' has rank 9; at most 8"},
    {"segment.onnx", TCI_ERR_UNSUPPORTED, "initializer 'w' is segmented"},
    {"uint8_range.onnx", TCI_ERR_INVALID_MODEL,
     "initializer 'w': int32_data value -1 is out of range for uint8"},
    {"ext_no_location.onnx", TCI_ERR_INVALID_MODEL,
     "initializer 'w': external data has no location"},
    {"ext_directory.onnx", TCI_ERR_IO,
     "initializer 'w': external data 'ext_sub' is not a regular file"},
    {"sparse_initializer.onnx", TCI_ERR_UNSUPPORTED,
     "sparse initializers are not supported (1 found)"},
};

START_TEST(test_error_paths) {
    char path[512];
    snprintf(path, sizeof path, "%s", FIXTURE(""));
    size_t dir_len = strlen(path);
    snprintf(path + dir_len, sizeof path - dir_len, "%s", error_cases[_i].file);
    ck_assert_tci_error(load(path), error_cases[_i].status, error_cases[_i].message);
}
END_TEST

/* IR version 1 attributes have no type field: the set field says it. */
START_TEST(test_untyped_attributes) {
    ir_graph *g = load_ok(FIXTURE("untyped_attrs.onnx"));
    ir_node *r = node(g, "r");
    int64_t count;
    ck_assert_tci_ok(ir_attr_int(r, "count", 0, &count));
    ck_assert_int_eq(count, 5);
    const ir_attr *names = ir_node_attr(r, "names");
    ck_assert_int_eq(names->type, IR_ATTR_STRINGS);
    ck_assert_str_eq(names->strings[1], "q");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_tensor_file) {
    size_t size;
    unsigned char *bytes = read_all(FIXTURE("tensor_f16.pb"), &size);
    tci_tensor t;
    ck_assert_tci_ok(onnx_decode_tensor_file(bytes, size, &t));
    ck_assert_int_eq(t.dtype, TCI_DTYPE_FLOAT16);
    ck_assert_int_eq(t.rank, 1);
    ck_assert_int_eq(t.dims[0], 2);
    ck_assert_uint_eq(((const uint16_t *)t.data)[1], 0x4200);
    free(t.data);
    free(bytes);
    bytes = read_all(FIXTURE("tensor_external.pb"), &size);
    ck_assert_tci_error(onnx_decode_tensor_file(bytes, size, &t), TCI_ERR_INVALID_ARGUMENT,
                        "tensor 'e': external data 'x.bin' needs the model's folder");
    ck_assert_ptr_null(t.data);
    free(bytes);
    const unsigned char junk[] = {0xff, 0xff, 0xff};
    ck_assert_tci_error(onnx_decode_tensor_file(junk, sizeof junk, &t), TCI_ERR_PARSE,
                        "not a valid ONNX TensorProto");
}
END_TEST

int main(void) {
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_initializers_every_form_and_dtype);
    tcase_add_test(tc, test_inputs_and_symbolic_dims);
    tcase_add_test(tc, test_nodes_and_attributes);
    tcase_add_test(tc, test_newer_ir_version);
    tcase_add_test(tc, test_external_data);
    tcase_add_test(tc, test_external_data_relative_model_path);
    tcase_add_test(tc, test_external_data_errors);
    tcase_add_test(tc, test_external_data_needs_base_dir);
    tcase_add_test(tc, test_external_data_symlinks);
    tcase_add_test(tc, test_truncated_and_garbage);
    tcase_add_test(tc, test_file_errors);
    tcase_add_test(tc, test_invalid_models);
    tcase_add_test(tc, test_unsupported_input_types);
    tcase_add_test(tc, test_bad_initializers);
    tcase_add_test(tc, test_unsupported_dtypes);
    tcase_add_loop_test(tc, test_error_paths, 0,
                        (int)(sizeof error_cases / sizeof error_cases[0]));
    tcase_add_test(tc, test_untyped_attributes);
    tcase_add_test(tc, test_tensor_file);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
