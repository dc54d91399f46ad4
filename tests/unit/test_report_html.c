/* The --report helpers of the command (src/cli/report_svg.c, onnx_nodes.c) and the report
 * itself, fed what a GPU run with --compare-layers and --profile records, on a CPU engine. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "cli/onnx_nodes.h"
#include "cli/report_svg.h"
#include "harness.h"

#define DEMO_MODEL TCI_TEST_DATA "/../../models/demo/tiny_cnn.onnx"

static char *escaped(const char *s) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    ck_assert_ptr_nonnull(f);
    html_escape(f, s);
    fclose(f);
    return buf;
}

START_TEST(escapes_html) {
    char *e = escaped("<a href=\"x\">&'\x01\tb</a>");
    ck_assert_str_eq(e, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&#xFFFD;\tb&lt;/a&gt;");
    free(e);
    e = escaped("conv/1:0 \xc3\xa9");
    ck_assert_str_eq(e, "conv/1:0 \xc3\xa9"); /* UTF-8 passes */
    free(e);
    e = escaped(NULL);
    ck_assert_str_eq(e, "");
    free(e);
}
END_TEST

START_TEST(numbers_are_finite) {
    char b[32];
    ck_assert_str_eq(svg_num(b, 12.5), "12.5");
    ck_assert_str_eq(svg_num(b, NAN), "0");
    ck_assert_str_eq(svg_num(b, -INFINITY), "0");
    ck_assert_str_eq(svg_num(b, 1234567.0), "1.235e+06");
}
END_TEST

START_TEST(log_axis) {
    double v[] = {3e-4, 0, NAN, 2e-2, INFINITY, 1e-12};
    svg_log_axis a = svg_log_axis_of(v, 6, 1e-9);
    ck_assert_int_eq(a.lo, -9); /* 1e-12 counts as the least, 1e-9 */
    ck_assert_int_eq(a.hi, -1);
    ck_assert(fabs(svg_log_pos(&a, 1e-5, 80) - 40) < 1e-9);
    ck_assert(svg_log_pos(&a, 0, 80) == 0);
    ck_assert(svg_log_pos(&a, NAN, 80) == 0);
    ck_assert(svg_log_pos(&a, 1e3, 80) == 80);
    svg_log_axis none = svg_log_axis_of(v + 1, 2, 1e-9);
    ck_assert_int_eq(none.lo, -9);
    ck_assert_int_eq(none.hi, -8);
    double one[] = {1e-3};
    svg_log_axis decade = svg_log_axis_of(one, 1, 1e-9);
    ck_assert_int_eq(decade.lo, -3);
    ck_assert_int_eq(decade.hi, -2);
}
END_TEST

START_TEST(histogram) {
    float x[] = {0, 0.1f, 0.5f, 1, NAN, 2, -1};
    float y[] = {3, INFINITY};
    double lo, hi;
    ck_assert_int_eq(hist_range(x, 7, y, 2, &lo, &hi), 1);
    ck_assert(lo == -1 && hi == 3);
    unsigned c[4];
    ck_assert_uint_eq(hist_fill(x, 7, 0, 1, c, 4), 4); /* NaN, 2 and -1 outside */
    ck_assert_uint_eq(c[0], 2);
    ck_assert_uint_eq(c[2], 1);
    ck_assert_uint_eq(c[3], 1); /* hi itself in the last bin */
    float same[] = {2, 2};
    ck_assert_int_eq(hist_range(same, 2, NULL, 0, &lo, &hi), 1);
    ck_assert(lo == 1.5 && hi == 2.5);
    float bad[] = {NAN};
    ck_assert_int_eq(hist_range(bad, 1, NULL, 0, &lo, &hi), 0);
}
END_TEST

START_TEST(kernel_families) {
    ck_assert_str_eq(kernel_family("wgmma gemm 128x256x64 s3"), "wgmma");
    ck_assert_str_eq(kernel_family("wmma gemm 128x128x32 s3 warp 64x64"), "wmma");
    ck_assert_str_eq(kernel_family("cuDNN convolution algo 1"), "cuDNN");
    ck_assert_str_eq(kernel_family("cublaslt 3"), "cuBLASLt");
    ck_assert_str_eq(kernel_family("tcinfer eltwise"), "tcinfer");
    /* the profile's descriptions as the H200 printed them: the note names the candidates beaten */
    ck_assert_str_eq(kernel_family("IMPLICIT_PRECOMP_GEMM fused tensor-op (5.6 us; best tcinfer "
                                   "kernel 6.8 us)"),
                     "cuDNN");
    ck_assert_str_eq(kernel_family("wmma 32x64x64 w4 8x32x16 s3 splitk8 (9.4 us; cuDNN "
                                   "IMPLICIT_PRECOMP_GEMM fused tensor-op 11.7 us)"),
                     "wmma");
    ck_assert_str_eq(kernel_family("cublasLt algo 66 tile 10 (5.6 us; best tcinfer kernel 9.3 us)"),
                     "cuBLASLt");
    ck_assert_str_eq(kernel_family("tcinfer pool2d"), "tcinfer");
    ck_assert_str_eq(kernel_family(NULL), "other");
    ck_assert_str_ne(kernel_family_colour("wmma"), kernel_family_colour("cuDNN"));
}
END_TEST

START_TEST(onnx_node_list) {
    cli_onnx_graph g;
    char err[256];
    ck_assert_int_eq(cli_onnx_graph_read(DEMO_MODEL, &g, err, sizeof err), 0);
    ck_assert_uint_eq(g.num_nodes, 12);
    ck_assert_str_eq(g.nodes[0].name, "conv_0");
    ck_assert_str_eq(g.nodes[0].op_type, "Conv");
    ck_assert_str_eq(g.nodes[0].output, "conv_0_out");
    ck_assert_str_eq(g.nodes[11].name, "probabilities");
    ck_assert_uint_eq(g.num_outputs, 1);
    ck_assert_str_eq(g.outputs[0], "probabilities_out");
    cli_onnx_graph_free(&g);
    /* graph (7) holding a node (1) named (3) "a" with op_type (4) "Relu" */
    const unsigned char ok[] = {0x3a, 0x08, 0x0a, 0x06, 0x1a, 0x01, 'a', 0x22, 0x01, 'R'};
    ck_assert_int_eq(cli_onnx_graph_parse(ok, sizeof ok, &g, err, sizeof err), 0);
    ck_assert_str_eq(g.nodes[0].name, "a");
    ck_assert_str_eq(g.nodes[0].output, "");
    cli_onnx_graph_free(&g);
    /* a length past the end, and a file without a graph */
    const unsigned char cut[] = {0x3a, 0x08, 0x0a, 0x09, 0x1a, 0x01, 'a'};
    ck_assert_int_eq(cli_onnx_graph_parse(cut, sizeof cut, &g, err, sizeof err), -1);
    ck_assert_str_eq(err, "malformed wire format");
    cli_onnx_graph_free(&g);
    const unsigned char none[] = {0x08, 0x07};
    ck_assert_int_eq(cli_onnx_graph_parse(none, sizeof none, &g, err, sizeof err), -1);
    ck_assert_str_eq(err, "no graph");
    cli_onnx_graph_free(&g);
    ck_assert_int_eq(cli_onnx_graph_read("/nonexistent.onnx", &g, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent.onnx"));
}
END_TEST

/* word as a whole word of s, any case (NaN, inf: a number that is not finite) */
static bool has_word(const char *s, const char *word) {
    size_t n = strlen(word);
    for (const char *p = s; *p; p++) {
        if (strncasecmp(p, word, n) != 0) continue;
        bool start = p == s || !isalpha((unsigned char)p[-1]);
        if (start && !isalpha((unsigned char)p[n])) return true;
    }
    return false;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* A made-up time for each step of a plan (layouts are left to the report). */
static void profile_step(size_t index, const char *node, const char *fused_ops,
                         const char *kernel, const char *layout, void *user) {
    (void)layout;
    cli_report_profile_step(user, index, node, fused_ops, kernel, 0.01f * (float)(index + 1));
}

/* What a GPU run with --compare-layers --profile records, fed to the report of a CPU engine
 * (no GPU here): every section is drawn, names escaped. */
START_TEST(gpu_shaped_report) {
    const char *path = TCI_BUILD_DIR "/test_report_html.html";
    cli_args a;
    memset(&a, 0, sizeof a);
    a.model = DEMO_MODEL;
    a.backend = TCI_BACKEND_GPU;
    a.compare = a.compare_layers = a.random = a.quiet = true;
    a.tolerance = 1e-2;
    a.report = path;
    char fp32_text[] = "gemm_0";
    a.fp32_text = fp32_text;
    a.fp32_layers[0] = fp32_text;
    cli_report *r = cli_report_create(&a);
    ck_assert_ptr_nonnull(r);
    tci_engine *e = NULL;
    tci_context *ctx = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, NULL, &e));
    ck_assert_tci_ok(tci_context_create(e, &ctx));
    tci_tensor in = {.dtype = TCI_DTYPE_FLOAT, .rank = 4, .dims = {1, 3, 64, 64}};
    float *x = calloc(3 * 64 * 64, sizeof *x);
    for (int i = 0; i < 3 * 64 * 64; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1;
    in.data = x;
    tci_tensor_info info;
    tci_tensor_info_init(&info);
    ck_assert_tci_ok(tci_engine_input_info(e, 0, &info));
    for (int i = 0; i < info.rank; i++) ck_assert_int_eq(info.dims[i], in.dims[i]);
    ck_assert_tci_ok(tci_context_run(ctx, &in, 1));
    tci_tensor out;
    ck_assert_tci_ok(tci_context_output(ctx, 0, &out));
    float *perturbed = malloc(10 * sizeof *perturbed);
    for (int i = 0; i < 10; i++) perturbed[i] = ((float *)out.data)[i] * (1 + 1e-3f * (float)i);
    tci_tensor test = out;
    test.data = perturbed;
    tci_compare_result res;
    tci_compare_result_init(&res);
    ck_assert_tci_ok(tci_compare(&test, &out, &res));
    /* the model's output first, then the layers, as --compare-layers measures them on the
     * engine as it ships: each step's output, a fused step's under its last node */
    cli_report_compared(r, true, &test, &out, &res, NULL);
    const char *layers[] = {"relu_0_out", "relu_1_out", "maxpool_0_out", "relu_2_out",
                            "gemm_0_out"};
    const char *steps[] = {"conv_0+batchnormalization_0+relu_0", "conv_1+relu_1", NULL,
                           "conv_2+relu_2", NULL};
    double errors[] = {3e-4, 5e-4, 5e-4, 9e-2, 0};
    for (int i = 0; i < 5; i++) {
        tci_compare_result l = res;
        l.relative_l2 = errors[i];
        tci_tensor t = test;
        t.name = layers[i];
        cli_report_compared(r, true, &t, &out, &l, steps[i]);
    }
    cli_report_layer_jump(r, 1e-2, 4, 4);
    /* the GPU plan of the model with gemm_0 in fp32, built without a GPU, gives the steps */
    tci_engine_options po;
    tci_engine_options_init(&po);
    po.backend = TCI_BACKEND_GPU;
    po.plan_only = 1;
    const char *fp32[] = {"gemm_0", NULL};
    po.fp32_layers = fp32;
    tci_engine *planned = NULL;
    ck_assert_tci_ok(tci_engine_create_from_file(DEMO_MODEL, &po, &planned));
    ck_assert_tci_ok(tci_engine_layers(planned, profile_step, r));
    cli_report_profile_step(r, 10, "extra_<in>", "layout", "wmma conv 64x64 <fast>", 0.002f);
    ck_assert_int_eq(cli_write_report(&a, r, planned, ctx, NULL), 0);
    tci_engine_destroy(planned);
    char *html = slurp(path);
    ck_assert_ptr_nonnull(strstr(html, "<!DOCTYPE html>"));
    ck_assert_ptr_nonnull(strstr(html, "</html>"));
    ck_assert_ptr_null(strstr(html, "<script"));
    ck_assert(!has_word(html, "nan") && !has_word(html, "inf") && !has_word(html, "infinity"));
    ck_assert_ptr_nonnull(strstr(html, "first jump: relu_2<"));
    ck_assert_ptr_nonnull(strstr(html, "extra_&lt;in&gt;"));          /* escaped, in the extra steps */
    /* gemm_0 kept in fp32: its cast step and its GEMM, in the higher-precision table */
    const char *hp = strstr(html, "<h2>Layers kept in higher precision</h2>");
    const char *layers_h2 = strstr(html, "<h2>Layers</h2>");
    ck_assert(hp && layers_h2);
    const char *gemm = strstr(hp, "<td>Gemm</td>");
    ck_assert(gemm && gemm < layers_h2);
    ck_assert_ptr_nonnull(strstr(gemm, "dense fp32"));
    ck_assert_ptr_nonnull(strstr(html, "stroke-width=\"2\"/>"));      /* an fp32 bar outlined */
    /* in the layer table gemm_0 is the GEMM's step (7), its cast among the other steps */
    ck_assert_ptr_nonnull(strstr(layers_h2, "<td class=\"name\">gemm_0</td><td>Gemm</td>"));
    const char *other = strstr(layers_h2, "The other steps");
    ck_assert_ptr_nonnull(other);
    ck_assert_ptr_nonnull(strstr(other, "<td class=\"name\">gemm_0</td><td class=\"n\">6</td>"
                                        "<td>cast fp16-&gt;fp32</td>"));
    ck_assert_ptr_nonnull(strstr(html, "wmma conv 64x64 &lt;fast&gt;"));
    ck_assert_ptr_nonnull(strstr(html, "stroke-dasharray=\"6 4\""));    /* the threshold line */
    ck_assert_ptr_nonnull(strstr(html, ">probabilities_out</td>"));     /* the outputs table */
    ck_assert_ptr_nonnull(
        strstr(html, "<title>relu_2 (relu_2_out), step conv_2+relu_2: rel L2 0.09</title>"));
    ck_assert_ptr_nonnull(strstr(html, "<title>maxpool_0 (maxpool_0_out): rel L2 0.0005</title>"));
    ck_assert_ptr_nonnull(strstr(html, "every step's of the engine as it ships"));
    /* in the layer table the fused step's error is on its last node's row, naming the step */
    const char *row = strstr(html, "<td class=\"name\">relu_0</td>");
    ck_assert_ptr_nonnull(row);
    ck_assert(strstr(row, "title=\"step conv_0+batchnormalization_0+relu_0\">0.0003</td>") <
              strstr(row, "</tr>"));
    row = strstr(html, "<td class=\"name\">conv_0</td>");
    ck_assert(strstr(row, "<td class=\"n\">-</td>") < strstr(row, "</tr>"));
    ck_assert_ptr_null(strstr(html, "class=\"omitted\""));             /* every section drawn */
    /* the nodes the labels name, each consuming the one before, are marked fused */
    const char *fused = strstr(html, "<td class=\"name\">batchnormalization_0</td>");
    ck_assert_ptr_nonnull(fused);
    ck_assert_ptr_nonnull(strstr(fused, "fused into step 0</td>"));
    ck_assert(strstr(fused, "fused into step 0</td>") < strstr(html, ">relu_0</td>"));
    const char *relu = strstr(html, "<td class=\"name\">relu_0</td>");
    ck_assert(strstr(relu, "fused into step 0</td>") < strstr(html, ">conv_1</td>"));
    relu = strstr(html, "<td class=\"name\">relu_1</td>");
    ck_assert(strstr(relu, "fused into step 1</td>") < strstr(html, ">maxpool_0</td>"));
    relu = strstr(html, "<td class=\"name\">relu_2</td>");
    ck_assert(strstr(relu, "fused into step 3</td>") < strstr(html, ">globalaveragepool_0</td>"));
    ck_assert(!strstr(strstr(html, ">maxpool_0</td>"), "fused into step 2"));
    const char *nodes[] = {"conv_0", "batchnormalization_0", "relu_0", "conv_1", "relu_1",
                           "maxpool_0", "conv_2", "relu_2", "globalaveragepool_0", "flatten_0",
                           "gemm_0", "probabilities"};
    for (int i = 0; i < 12; i++) {
        char cell[64];
        snprintf(cell, sizeof cell, "<td class=\"name\">%s</td>", nodes[i]);
        ck_assert_msg(strstr(html, cell), "node %s missing from the layer table", nodes[i]);
    }
    free(html);
    free(perturbed);
    free(x);
    cli_report_destroy(r);
    tci_context_destroy(ctx);
    tci_engine_destroy(e);
}
END_TEST

int main(void) {
    Suite *s = suite_create("report_html");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, escapes_html);
    tcase_add_test(tc, numbers_are_finite);
    tcase_add_test(tc, log_axis);
    tcase_add_test(tc, histogram);
    tcase_add_test(tc, kernel_families);
    tcase_add_test(tc, onnx_node_list);
    tcase_add_test(tc, gpu_shaped_report);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
