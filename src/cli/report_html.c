/* --report FILE: one self-contained HTML file (inline CSS and SVG, no script) of a run: the
 * header, the outputs against the fp32 baseline, per-layer error and time, output histograms,
 * the layers kept in higher precision and every node of the model. It collects what --compare,
 * --compare-layers and --profile computed (the cli_report_* calls in compare.c and report.c)
 * and reads the rest from the engine and the context. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/onnx_nodes.h"
#include "cli/report_svg.h"

enum { HIST_BINS = 48, MAX_HISTOGRAMS = 8 };

typedef struct rep_compared {
    char *name;       /* the tensor */
    const char *node; /* the ONNX node that computes it (name when the model does not say) */
    char *step;       /* the nodes of the fused step computing it, joined by '+', or NULL */
    tci_compare_result r;
    bool model_output;
} rep_compared;

typedef struct rep_hist {
    char *name;
    double lo, hi;
    unsigned engine[HIST_BINS], base[HIST_BINS];
    bool has_base;
    size_t count, nonfinite;
} rep_hist;

typedef struct rep_step {
    size_t index;
    char *node, *fused, *kernel, *layout;
    float ms;
    bool timed;
} rep_step;

struct cli_report {
    cli_onnx_graph model;
    bool have_model;
    rep_compared *compared;
    size_t num_compared, cap_compared;
    rep_hist hist[MAX_HISTOGRAMS];
    size_t num_hist, hist_left_out; /* past MAX_HISTOGRAMS */
    bool layers_done;
    double threshold;
    int jump, over; /* indices into compared, -1: none */
    rep_step *steps;
    size_t num_steps, cap_steps;
    bool profiled, failed; /* failed: out of memory while collecting */
};

static void *push(void **items, size_t *count, size_t *cap, size_t size) {
    if (*count == *cap) {
        size_t n = *cap ? 2 * *cap : 64;
        void *p = realloc(*items, n * size);
        if (!p) return NULL;
        *items = p;
        *cap = n;
    }
    void *item = (char *)*items + (*count)++ * size;
    memset(item, 0, size);
    return item;
}

static char *dup(const char *s) {
    return strdup(s ? s : "");
}

cli_report *cli_report_create(const cli_args *a) {
    cli_report *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "tcinfer: out of memory\n");
        return NULL;
    }
    r->jump = r->over = -1;
    if (a->model) {
        char err[512];
        if (cli_onnx_graph_read(a->model, &r->model, err, sizeof err) != 0) {
            fprintf(stderr, "tcinfer: --report cannot list the nodes of '%s': %s\n", a->model, err);
            cli_report_destroy(r);
            return NULL;
        }
        r->have_model = true;
    }
    return r;
}

void cli_report_destroy(cli_report *r) {
    if (!r) return;
    cli_onnx_graph_free(&r->model);
    for (size_t i = 0; i < r->num_compared; i++) {
        free(r->compared[i].name);
        free(r->compared[i].step);
    }
    for (size_t i = 0; i < r->num_hist; i++) free(r->hist[i].name);
    for (size_t i = 0; i < r->num_steps; i++) {
        free(r->steps[i].node);
        free(r->steps[i].fused);
        free(r->steps[i].kernel);
        free(r->steps[i].layout);
    }
    free(r->compared);
    free(r->steps);
    free(r);
}

static bool is_model_output(const cli_report *r, const char *name) {
    for (size_t i = 0; i < r->model.num_outputs; i++)
        if (strcmp(r->model.outputs[i], name) == 0) return true;
    return false;
}

/* A histogram of engine (and baseline, when given) values. */
static void add_hist(cli_report *r, const tci_tensor *test, const tci_tensor *ref) {
    if (test->dtype != TCI_DTYPE_FLOAT) return;
    if (r->num_hist == MAX_HISTOGRAMS) {
        r->hist_left_out++;
        return;
    }
    rep_hist *h = &r->hist[r->num_hist];
    size_t n = (size_t)tci_tensor_count(test), m = ref ? (size_t)tci_tensor_count(ref) : 0;
    memset(h, 0, sizeof *h);
    if (!hist_range(test->data, n, ref ? ref->data : NULL, m, &h->lo, &h->hi)) {
        h->lo = 0;
        h->hi = 1;
    }
    h->count = n;
    h->nonfinite = n - hist_fill(test->data, n, h->lo, h->hi, h->engine, HIST_BINS);
    if (ref) hist_fill(ref->data, m, h->lo, h->hi, h->base, HIST_BINS);
    h->has_base = ref != NULL;
    if (!(h->name = dup(test->name))) r->failed = true;
    else r->num_hist++;
}

void cli_report_compared(cli_report *r, bool layers, const tci_tensor *test,
                         const tci_tensor *ref, const tci_compare_result *result,
                         const char *step_nodes) {
    if (!r) return;
    rep_compared *c = push((void **)&r->compared, &r->num_compared, &r->cap_compared, sizeof *c);
    if (!c || !(c->name = dup(test->name)) || (step_nodes && !(c->step = dup(step_nodes)))) {
        if (c) free(c->name);
        if (c) r->num_compared--;
        r->failed = true;
        return;
    }
    c->r = *result;
    c->node = c->name;
    for (size_t i = 0; i < r->model.num_nodes; i++)
        if (*r->model.nodes[i].name && strcmp(r->model.nodes[i].output, c->name) == 0) {
            c->node = r->model.nodes[i].name;
            break;
        }
    c->model_output = !layers || is_model_output(r, c->name);
    if (c->model_output) add_hist(r, test, ref);
}

void cli_report_layer_jump(cli_report *r, double threshold, int jump, int over) {
    if (!r) return;
    r->layers_done = true;
    r->threshold = threshold;
    r->jump = jump;
    r->over = over;
}

static rep_step *add_step(cli_report *r, size_t index, const char *node, const char *fused,
                          const char *kernel) {
    for (size_t i = 0; i < r->num_steps; i++)
        if (r->steps[i].index == index) return &r->steps[i];
    rep_step *s = push((void **)&r->steps, &r->num_steps, &r->cap_steps, sizeof *s);
    if (!s) return NULL;
    s->index = index;
    s->node = dup(node);
    s->fused = dup(fused);
    s->kernel = dup(kernel);
    s->layout = dup("");
    if (!s->node || !s->fused || !s->kernel || !s->layout) return NULL;
    return s;
}

void cli_report_profile_step(cli_report *r, size_t index, const char *node, const char *fused,
                             const char *kernel, float median_ms) {
    if (!r) return;
    rep_step *s = add_step(r, index, node, fused, kernel);
    if (!s) {
        r->failed = true;
        return;
    }
    s->ms = median_ms;
    s->timed = true;
    r->profiled = true;
}

static void collect_layer(size_t index, const char *node, const char *fused_ops,
                          const char *kernel, const char *layout, void *user) {
    cli_report *r = user;
    rep_step *s = add_step(r, index, node, fused_ops, kernel);
    if (!s) {
        r->failed = true;
        return;
    }
    free(s->layout);
    if (!(s->layout = dup(layout))) r->failed = true;
}

static int by_index(const void *x, const void *y) {
    const rep_step *a = x, *b = y;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* ---- writing ---- */

typedef struct out {
    FILE *f;
    const cli_args *a;
    cli_report *r;
} out;

static void esc(out *o, const char *s) {
    html_escape(o->f, s);
}

/* A measured number as text ("non-finite" for NaN/Inf). */
static const char *val(char buf[32], const char *fmt, double v) {
    if (!isfinite(v)) return "non-finite";
    snprintf(buf, 32, fmt, v);
    return buf;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static const char *css =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;"
    "margin:24px auto;max-width:1140px;color:#222;padding:0 12px}"
    "h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:28px 0 8px;"
    "border-bottom:1px solid #ddd;padding-bottom:4px}"
    "table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;text-align:left;"
    "border-bottom:1px solid #eee;vertical-align:top}th{background:#f4f4f4}"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}"
    "table.meta th{background:none;color:#666;font-weight:normal}"
    ".omitted{color:#777;font-style:italic}.bad{color:#b2182b;font-weight:600}"
    ".ok{color:#1b7837}td.fused{color:#777}code{font:12px ui-monospace,Menlo,Consolas,monospace}"
    "td.name{max-width:360px;overflow-wrap:anywhere}"
    "svg{display:block;margin:8px 0;font:11px system-ui,Helvetica,Arial,sans-serif}"
    ".hists{display:flex;flex-wrap:wrap;gap:12px}"
    ".legend span{display:inline-block;margin-right:14px}"
    ".sw{display:inline-block;width:12px;height:12px;vertical-align:-2px;margin-right:4px}";

static void omitted(out *o, const char *title, const char *text) {
    fprintf(o->f, "<h2>%s</h2>\n<p class=\"omitted\">%s</p>\n", title, text);
}

static void write_op_count(const char *op_type, size_t count, void *user) {
    out *o = user;
    esc(o, op_type);
    fprintf(o->f, "&nbsp;%zu ", count);
}

static void write_header(out *o, const tci_engine *engine) {
    const cli_args *a = o->a;
    const char *model = a->load_engine ? a->load_engine : a->model;
    bool gpu = a->backend == TCI_BACKEND_GPU;
    char device[256] = "CPU", date[64] = "?";
    if (gpu) {
        char name[200] = "";
        if (tci_gpu_name(a->device, name, sizeof name) == TCI_OK)
            snprintf(device, sizeof device, "%s (device %d)", name, a->device);
        else
            snprintf(device, sizeof device, "none found");
    }
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tm);
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>tcinfer "
          "report: ", o->f);
    esc(o, base_name(model));
    fprintf(o->f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>tcinfer report: ", css);
    esc(o, base_name(model));
    fputs("</h1>\n<table class=\"meta\">\n<tr><th>model</th><td><code>", o->f);
    esc(o, model);
    fputs("</code></td></tr>\n", o->f);
    fprintf(o->f, "<tr><th>backend</th><td>%s</td></tr>\n",
            gpu ? "GPU (tensor cores)" : "CPU (fp32 reference)");
    fputs("<tr><th>precision</th><td>", o->f);
    if (!gpu) fputs("fp32", o->f);
    else {
        esc(o, cli_precision_name(a->precision));
        if (a->fp32_text) fputs(", with <code>--fp32-layers</code>", o->f);
        if (a->kept_precision != TCI_PRECISION_FP32) {
            fputs(", kept layers in ", o->f);
            esc(o, cli_precision_name(a->kept_precision));
        }
    }
    fputs("</td></tr>\n<tr><th>device</th><td>", o->f);
    esc(o, device);
    fputs("</td></tr>\n<tr><th>inputs</th><td>", o->f);
    if (a->random && !a->num_inputs) fprintf(o->f, "random, seed %llu", (unsigned long long)a->seed);
    for (int i = 0; i < a->num_inputs; i++) {
        fputs(i ? ", <code>" : "<code>", o->f);
        if (a->inputs[i].name) {
            esc(o, a->inputs[i].name);
            fputs("=", o->f);
        }
        esc(o, a->inputs[i].path);
        fputs("</code>", o->f);
    }
    tci_engine_stats stats;
    tci_engine_stats_init(&stats);
    tci_engine_stats_get(engine, &stats);
    fputs("</td></tr>\n<tr><th>graph</th><td>", o->f);
    if (o->r->have_model) fprintf(o->f, "%zu nodes in the model, ", o->r->model.num_nodes);
    fprintf(o->f, "%zu after optimisation", stats.num_nodes);
    tci_gpu_report g;
    tci_gpu_report_init(&g);
    if (tci_engine_gpu_report(engine, &g) == TCI_OK) fprintf(o->f, ", %zu GPU steps", g.num_steps);
    fputs("</td></tr>\n<tr><th>ops</th><td>", o->f);
    tci_engine_op_histogram(engine, write_op_count, o);
    fprintf(o->f, "</td></tr>\n<tr><th>date</th><td>%s</td></tr>\n", date);
    fputs("<tr><th>tcinfer</th><td>", o->f);
    esc(o, tci_version());
    fputs("</td></tr>\n</table>\n", o->f);
}

static void write_outputs(out *o) {
    const cli_report *r = o->r;
    const cli_args *a = o->a;
    if (!a->compare) {
        omitted(o, "Outputs against the fp32 baseline",
                "Not collected in this run: <code>--compare</code> fills it.");
        return;
    }
    fprintf(o->f, "<h2>Outputs against the fp32 baseline (%s)</h2>\n",
            a->baseline_gpu ? "GPU fp32" : "CPU reference");
    fputs("<table>\n<tr><th>output</th><th class=\"n\">max abs</th><th class=\"n\">mean abs</th>"
          "<th class=\"n\">rel L2</th><th class=\"n\">cosine</th><th class=\"n\">top-1</th>"
          "<th class=\"n\">top-5</th><th class=\"n\">non-finite</th></tr>\n", o->f);
    for (size_t i = 0; i < r->num_compared; i++) {
        const rep_compared *c = &r->compared[i];
        if (!c->model_output) continue;
        char b[6][32];
        bool over = a->tolerance >= 0 && !(c->r.relative_l2 <= a->tolerance);
        fputs("<tr><td class=\"name\">", o->f);
        esc(o, c->name);
        fprintf(o->f, "</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n%s\">%s"
                "</td><td class=\"n\">%s</td>",
                val(b[0], "%.3g", c->r.max_abs), val(b[1], "%.3g", c->r.mean_abs),
                over ? " bad" : "", val(b[2], "%.3g", c->r.relative_l2),
                val(b[3], "%.6f", c->r.cosine));
        if (c->r.rows)
            fprintf(o->f, "<td class=\"n\">%zu/%zu</td><td class=\"n\">%zu/%zu</td>",
                    c->r.top1_agree, c->r.rows, c->r.top5_agree, c->r.rows);
        else
            fputs("<td class=\"n\">-</td><td class=\"n\">-</td>", o->f);
        fprintf(o->f, "<td class=\"n%s\">%zu</td></tr>\n", c->r.non_finite ? " bad" : "",
                c->r.non_finite);
    }
    fputs("</table>\n", o->f);
    if (a->tolerance >= 0) {
        char b[32];
        fprintf(o->f, "<p>Tolerance (relative L2): %s.</p>\n", val(b, "%g", a->tolerance));
    }
}

/* Per-layer relative L2 error along the network: layers in execution order, then the model's
 * outputs; log scale, the threshold line and the first jump marked. */
static void write_layer_errors(out *o) {
    const cli_report *r = o->r;
    if (!r->layers_done) {
        omitted(o, "Per-layer error",
                "Not collected in this run: <code>--compare-layers</code> fills it.");
        return;
    }
    size_t n = r->num_compared;
    size_t *order = calloc(n + 1, sizeof *order);
    double *v = calloc(n + 2, sizeof *v);
    if (!order || !v) {
        free(order);
        free(v);
        omitted(o, "Per-layer error", "Out of memory drawing it.");
        return;
    }
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++)
            if (o->r->compared[i].model_output == (pass == 1)) order[k++] = i;
    for (size_t i = 0; i < n; i++) v[i] = r->compared[i].r.relative_l2;
    v[n] = r->threshold;
    svg_log_axis ax = svg_log_axis_of(v, n + 1, 1e-9);
    const double W = 1100, H = 340, L = 64, R = 16, T = 16, B = 46;
    const double pw = W - L - R, ph = H - T - B;
    char b1[32], b2[32], b3[32], b4[32];
    fputs("<h2>Per-layer error against the fp32 baseline</h2>\n", o->f);
    fprintf(o->f, "<p>Relative L2 error of every layer's output (%s), in execution order, then "
            "the model's outputs. Threshold %s.", o->a->compare_unfused
                ? "every node's, the engine built unfused, <code>--compare-layers=unfused</code>"
                : "every step's of the engine as it ships, a fused step's at its last node, "
                  "<code>--compare-layers</code>", val(b1, "%g", r->threshold));
    if (r->jump >= 0) {
        fputs(" First jump (past the threshold and 10&times; the layer before): <b>", o->f);
        esc(o, r->compared[r->jump].node);
        fputs("</b>.", o->f);
    } else if (r->over >= 0) {
        fputs(" No jump; first over the threshold: <b>", o->f);
        esc(o, r->compared[r->over].node);
        fputs("</b>.", o->f);
    } else {
        fputs(" Every layer within the threshold.", o->f);
    }
    fputs(" Values below 1e-9 (and 0) are drawn at the bottom.</p>\n", o->f);
    fprintf(o->f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
            "viewBox=\"0 0 %g %g\" role=\"img\">\n", W, H, W, H);
    fprintf(o->f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"#fafafa\" "
            "stroke=\"#ccc\"/>\n", L, T, pw, ph);
    for (int e = ax.lo; e <= ax.hi; e++) {
        double y = T + ph - svg_log_pos(&ax, pow(10, e), ph);
        fprintf(o->f, "<line x1=\"%g\" x2=\"%g\" y1=\"%s\" y2=\"%s\" stroke=\"#e3e3e3\"/>"
                "<text x=\"%g\" y=\"%s\" text-anchor=\"end\" dominant-baseline=\"middle\">"
                "1e%d</text>\n", L, L + pw, svg_num(b1, y), b1, L - 6, b1, e);
    }
    double step = k > 1 ? pw / (double)(k - 1) : 0;
    fputs("<polyline fill=\"none\" stroke=\"#2166ac\" stroke-width=\"1.5\" points=\"", o->f);
    for (size_t j = 0; j < k; j++) {
        double x = L + (k > 1 ? step * (double)j : pw / 2);
        double y = T + ph - svg_log_pos(&ax, r->compared[order[j]].r.relative_l2, ph);
        fprintf(o->f, "%s%s,%s", j ? " " : "", svg_num(b1, x), svg_num(b2, y));
    }
    fputs("\"/>\n", o->f);
    for (size_t j = 0; j < k; j++) {
        const rep_compared *c = &r->compared[order[j]];
        double x = L + (k > 1 ? step * (double)j : pw / 2);
        double y = T + ph - svg_log_pos(&ax, c->r.relative_l2, ph);
        bool over = !(c->r.relative_l2 <= r->threshold);
        fprintf(o->f, "<circle cx=\"%s\" cy=\"%s\" r=\"%s\" fill=\"%s\"><title>",
                svg_num(b1, x), svg_num(b2, y), c->model_output ? "4" : "2.5",
                over ? "#b2182b" : c->model_output ? "#222" : "#2166ac");
        esc(o, c->node);
        if (c->node != c->name) {
            fputs(" (", o->f);
            esc(o, c->name);
            fputs(")", o->f);
        }
        if (c->step) {
            fputs(", step ", o->f);
            esc(o, c->step);
        }
        fprintf(o->f, ": rel L2 %s</title></circle>\n", val(b3, "%.3g", c->r.relative_l2));
    }
    double ty = T + ph - svg_log_pos(&ax, r->threshold, ph);
    fprintf(o->f, "<line x1=\"%g\" x2=\"%g\" y1=\"%s\" y2=\"%s\" stroke=\"#b2182b\" "
            "stroke-dasharray=\"6 4\"/><text x=\"%g\" y=\"%s\" text-anchor=\"end\" "
            "fill=\"#b2182b\">threshold %s</text>\n",
            L, L + pw, svg_num(b1, ty), b1, L + pw - 4, svg_num(b2, ty - 4),
            val(b4, "%g", r->threshold));
    for (size_t j = 0; r->jump >= 0 && j < k; j++) {
        if (order[j] != (size_t)r->jump) continue;
        double x = L + (k > 1 ? step * (double)j : pw / 2);
        bool right = x > L + pw * 0.6;
        fprintf(o->f, "<line x1=\"%s\" x2=\"%s\" y1=\"%g\" y2=\"%g\" stroke=\"#e08214\" "
                "stroke-width=\"2\"/><text x=\"%s\" y=\"%g\" text-anchor=\"%s\" "
                "fill=\"#a05000\">first jump: ", svg_num(b1, x), b1, T, T + ph,
                svg_num(b2, right ? x - 4 : x + 4), T + 12, right ? "end" : "start");
        esc(o, r->compared[r->jump].node);
        fputs("</text>\n", o->f);
    }
    fprintf(o->f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">layers in execution order "
            "(%zu; hover a point for its name)</text>\n", L + pw / 2, H - 12, k);
    fprintf(o->f, "<text x=\"%g\" y=\"%g\" text-anchor=\"start\">1</text>"
            "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%zu</text>\n",
            L, T + ph + 14, L + pw, T + ph + 14, k);
    fputs("</svg>\n", o->f);
    free(order);
    free(v);
}

static const char *step_precision(const char *layout) {
    return strstr(layout, "fp32") ? "fp32" : strstr(layout, "bf16") ? "bf16" : "";
}

/* Per-step time as horizontal bars in execution order, coloured by kernel family; steps kept
 * in fp32 or bf16 outlined. */
static void write_times(out *o) {
    const cli_report *r = o->r;
    if (!r->profiled) {
        omitted(o, "Per-layer time",
                "Not collected in this run: <code>--profile FILE</code> on the GPU backend fills "
                "it.");
        return;
    }
    double max_ms = 0, total = 0;
    size_t n = 0;
    for (size_t i = 0; i < r->num_steps; i++) {
        if (!r->steps[i].timed) continue;
        n++;
        total += r->steps[i].ms;
        if (r->steps[i].ms > max_ms) max_ms = r->steps[i].ms;
    }
    const double W = 1100, L = 330, RT = 150, row = 16, T = 8;
    double H = T + row * (double)n + 8;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    fprintf(o->f, "<h2>Per-layer time</h2>\n<p>Median time of each GPU step over 20 step-by-step "
            "runs (<code>--profile</code>): %s ms in all, %zu steps.</p>\n<p class=\"legend\">",
            val(b1, "%.3f", total), n);
    static const char *const families[] = {"wgmma", "wmma", "cuDNN", "cuBLASLt", "tcinfer",
                                           "other"};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        fprintf(o->f, "<span><i class=\"sw\" style=\"background:%s\"></i>%s</span>",
                kernel_family_colour(families[i]), families[i]);
    fputs("<span><i class=\"sw\" style=\"border:2px solid #000\"></i>kept in fp32</span>"
          "<span><i class=\"sw\" style=\"border:2px dashed #000\"></i>kept in bf16</span></p>\n",
          o->f);
    fprintf(o->f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%s\" "
            "viewBox=\"0 0 %g %s\" role=\"img\">\n", W, svg_num(b1, H), W, b1);
    double y = T;
    for (size_t i = 0; i < r->num_steps; i++) {
        const rep_step *s = &r->steps[i];
        if (!s->timed) continue;
        const char *family = kernel_family(s->kernel);
        const char *precision = step_precision(s->layout);
        double w = max_ms > 0 ? (W - L - RT) * s->ms / max_ms : 0;
        char label[72];
        snprintf(label, sizeof label, "%zu %.60s%s", s->index, s->node,
                 strlen(s->node) > 60 ? "..." : "");
        fprintf(o->f, "<g><title>step %zu: ", s->index);
        esc(o, s->node);
        fputs(" (", o->f);
        esc(o, s->fused);
        fputs(") ", o->f);
        esc(o, s->kernel);
        fprintf(o->f, "%s%s</title><text x=\"%g\" y=\"%s\" text-anchor=\"end\" "
                "dominant-baseline=\"middle\">", *precision ? ", " : "", precision, L - 6,
                svg_num(b1, y + row / 2));
        esc(o, label);
        fprintf(o->f, "</text><rect x=\"%g\" y=\"%s\" width=\"%s\" height=\"%g\" fill=\"%s\"%s/>"
                "<text x=\"%s\" y=\"%s\" dominant-baseline=\"middle\">%s ms ",
                L, svg_num(b1, y + 2), svg_num(b2, w < 1 ? 1 : w), row - 4,
                kernel_family_colour(family),
                !*precision                      ? ""
                : strcmp(precision, "fp32") == 0 ? " stroke=\"#000\" stroke-width=\"2\""
                                                 : " stroke=\"#000\" stroke-width=\"2\" "
                                                   "stroke-dasharray=\"3 2\"",
                svg_num(b3, L + (w < 1 ? 1 : w) + 4), svg_num(b4, y + row / 2),
                val(b5, "%.4f", s->ms));
        esc(o, family);
        fputs("</text></g>\n", o->f);
        y += row;
    }
    fputs("</svg>\n", o->f);
}

static void hist_path(out *o, const unsigned *counts, unsigned peak, double L, double T,
                      double pw, double ph, bool closed) {
    char b1[32], b2[32], b3[32];
    double bw = pw / HIST_BINS;
    fprintf(o->f, "M%g,%g", L, T + ph);
    for (int i = 0; i < HIST_BINS; i++) {
        double y = T + ph - (peak ? ph * counts[i] / peak : 0);
        fprintf(o->f, " L%s,%s L%s,%s", svg_num(b1, L + bw * i), svg_num(b2, y),
                svg_num(b3, L + bw * (i + 1)), b2);
    }
    fprintf(o->f, " L%g,%g%s", L + pw, T + ph, closed ? " Z" : "");
}

static void write_histograms(out *o, const tci_context *ctx) {
    cli_report *r = o->r;
    const cli_args *a = o->a;
    if (r->num_hist == 0) { /* no --compare: the engine's outputs alone */
        size_t n = 0;
        tci_tensor t;
        while (tci_context_output(ctx, n, &t) == TCI_OK) n++;
        if (a->compare_layers && r->have_model && r->model.num_outputs < n) n = r->model.num_outputs;
        for (size_t i = 0; i < n; i++)
            if (tci_context_output(ctx, i, &t) == TCI_OK) add_hist(r, &t, NULL);
    }
    if (r->num_hist == 0) {
        omitted(o, "Output histograms", "The model has no float outputs.");
        return;
    }
    fputs("<h2>Output histograms</h2>\n<p>", o->f);
    fputs(a->compare ? "Values of each output: the engine (blue, filled) over the fp32 baseline "
                       "(black line); linear count scale."
                     : "Values of each output of the engine; <code>--compare</code> overlays the "
                       "fp32 baseline.", o->f);
    fputs("</p>\n<div class=\"hists\">\n", o->f);
    const double W = 540, H = 210, L = 48, R = 10, T = 24, B = 34;
    const double pw = W - L - R, ph = H - T - B;
    for (size_t i = 0; i < r->num_hist; i++) {
        const rep_hist *h = &r->hist[i];
        unsigned peak = 0;
        char b1[32], b2[32];
        for (int k = 0; k < HIST_BINS; k++) {
            if (h->engine[k] > peak) peak = h->engine[k];
            if (h->has_base && h->base[k] > peak) peak = h->base[k];
        }
        fprintf(o->f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
                "viewBox=\"0 0 %g %g\" role=\"img\">\n<text x=\"%g\" y=\"14\" "
                "font-weight=\"bold\">", W, H, W, H, L);
        esc(o, h->name);
        fprintf(o->f, " (%zu values", h->count);
        if (h->nonfinite) fprintf(o->f, ", %zu non-finite not drawn", h->nonfinite);
        fprintf(o->f, ")</text>\n<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" "
                "fill=\"#fafafa\" stroke=\"#ccc\"/>\n<path fill=\"#4393c3\" fill-opacity=\"0.45\" "
                "stroke=\"#2166ac\" d=\"", L, T, pw, ph);
        hist_path(o, h->engine, peak, L, T, pw, ph, true);
        fputs("\"/>\n", o->f);
        if (h->has_base) {
            fputs("<path fill=\"none\" stroke=\"#000\" stroke-width=\"1.2\" d=\"", o->f);
            hist_path(o, h->base, peak, L, T, pw, ph, false);
            fputs("\"/>\n", o->f);
        }
        fprintf(o->f, "<text x=\"%g\" y=\"%g\">%s</text><text x=\"%g\" y=\"%g\" "
                "text-anchor=\"end\">%s</text>\n", L, T + ph + 16, val(b1, "%.4g", h->lo), L + pw,
                T + ph + 16, val(b2, "%.4g", h->hi));
        fprintf(o->f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%u</text><text x=\"%g\" "
                "y=\"%g\" text-anchor=\"end\">0</text>\n</svg>\n", L - 4, T + 10, peak, L - 4,
                T + ph);
    }
    fputs("</div>\n", o->f);
    if (r->hist_left_out)
        fprintf(o->f, "<p>%zu more float outputs not drawn (the first %d are).</p>\n",
                r->hist_left_out, MAX_HISTOGRAMS);
}

static void write_precision(out *o) {
    const cli_report *r = o->r;
    const cli_args *a = o->a;
    if (a->backend != TCI_BACKEND_GPU) {
        omitted(o, "Layers kept in higher precision",
                "The CPU reference backend computes every layer in fp32: a GPU run "
                "(<code>--backend gpu</code>, with <code>--fp32-layers</code> or "
                "<code>--precision bf16</code>) fills it.");
        return;
    }
    fputs("<h2>Layers kept in higher precision</h2>\n", o->f);
    if (a->fp32_text) {
        fputs("<p><code>--fp32-layers</code>: ", o->f);
        for (int i = 0; a->fp32_layers[i]; i++) {
            fputs(i ? ", <code>" : "<code>", o->f);
            esc(o, a->fp32_layers[i]);
            fputs("</code>", o->f);
        }
        fputs("</p>\n", o->f);
    }
    if (a->precision == TCI_PRECISION_FP32 || a->precision == TCI_PRECISION_TF32) {
        fprintf(o->f, "<p>The whole engine stores fp32 (<code>--precision %s</code>).</p>\n",
                cli_precision_name(a->precision));
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < r->num_steps; i++) {
        const char *p = step_precision(r->steps[i].layout);
        if (!*p || (a->precision == TCI_PRECISION_BF16 && strcmp(p, "bf16") == 0)) continue;
        if (n++ == 0)
            fputs("<table>\n<tr><th class=\"n\">step</th><th>node</th><th>fused ops</th>"
                  "<th>kernel</th><th>output</th></tr>\n", o->f);
        fprintf(o->f, "<tr><td class=\"n\">%zu</td><td class=\"name\">", r->steps[i].index);
        esc(o, r->steps[i].node);
        fputs("</td><td>", o->f);
        esc(o, r->steps[i].fused);
        fputs("</td><td>", o->f);
        esc(o, r->steps[i].kernel);
        fputs("</td><td>", o->f);
        esc(o, r->steps[i].layout);
        fputs("</td></tr>\n", o->f);
    }
    if (n) fputs("</table>\n", o->f);
    else if (a->fp32_text)
        fprintf(o->f, "<p class=\"bad\">Yet no step stores fp32: every step stores %s.</p>\n",
                cli_precision_name(a->precision));
    else
        fprintf(o->f, "<p>Every step stores %s: no layer kept in higher precision "
                "(<code>--fp32-layers NAMES</code> keeps some in fp32).</p>\n",
                cli_precision_name(a->precision));
}

/* The compared entry of tensor `name` (-1: none). */
static long find_compared(const cli_report *r, const char *name) {
    for (size_t i = 0; *name && i < r->num_compared; i++)
        if (!r->compared[i].model_output || !r->layers_done)
            if (strcmp(r->compared[i].name, name) == 0) return (long)i;
    for (size_t i = 0; *name && i < r->num_compared; i++)
        if (strcmp(r->compared[i].name, name) == 0) return (long)i;
    return -1;
}

/* The node of g that consumes tensor t and has op type op (its length: n), when exactly one
 * does (-1 else); with `also`, a node that consumes that tensor too. */
static long consumer(const cli_onnx_graph *g, const char *t, const char *op, size_t n,
                     const char *also) {
    long found = -1;
    for (size_t i = 0; *t && i < g->num_nodes; i++) {
        const cli_onnx_node *nd = &g->nodes[i];
        if (strlen(nd->op_type) != n || strncmp(nd->op_type, op, n) != 0) continue;
        bool uses = false, uses_also = !also;
        for (size_t k = 0; k < nd->num_inputs; k++) {
            uses = uses || strcmp(nd->inputs[k], t) == 0;
            uses_also = uses_also || strcmp(nd->inputs[k], also) == 0;
        }
        if (!uses || !uses_also) continue;
        if (found >= 0) return -1;
        found = (long)i;
    }
    return found;
}

/* Marks in fused_into the nodes of the model that the step beginning at node `first` fused:
 * the chain its label names ("Conv+BatchNormalization+Add+Relu", "+SiLU" for Sigmoid and Mul),
 * each consuming the one before; it stops where the model does not follow the label. */
static void mark_fused(const cli_onnx_graph *g, size_t first, const char *label, long step,
                       long *fused_into) {
    const char *cur = g->nodes[first].output;
    const char *part = strchr(label, '+');
    while (part) {
        part++;
        size_t n = strcspn(part, "+(");
        long next;
        if (n == 4 && strncmp(part, "SiLU", 4) == 0) {
            long sig = consumer(g, cur, "Sigmoid", 7, NULL);
            next = sig >= 0 ? consumer(g, cur, "Mul", 3, g->nodes[sig].output) : -1;
            if (next >= 0) fused_into[sig] = step;
        } else {
            next = consumer(g, cur, part, n, NULL);
        }
        if (next < 0 || fused_into[next] >= 0) return;
        fused_into[next] = step;
        cur = g->nodes[next].output;
        part = strchr(part, '+');
    }
}

static void step_cells(out *o, const rep_step *s, long fused_into) {
    char b[32];
    if (!s && fused_into >= 0) {
        fprintf(o->f, "<td class=\"n\">(%ld)</td><td class=\"fused\">fused into step %ld</td>"
                "<td></td><td></td>%s", fused_into, fused_into, o->r->profiled ? "<td></td>" : "");
        return;
    }
    if (!s) {
        fputs(o->r->profiled ? "<td></td><td></td><td></td><td></td><td></td>"
                             : "<td></td><td></td><td></td><td></td>", o->f);
        return;
    }
    fprintf(o->f, "<td class=\"n\">%zu</td><td>", s->index);
    esc(o, s->fused);
    fputs("</td><td>", o->f);
    esc(o, s->kernel);
    fputs("</td><td>", o->f);
    esc(o, s->layout);
    fprintf(o->f, "</td>");
    if (o->r->profiled)
        fprintf(o->f, "<td class=\"n\">%s</td>", s->timed ? val(b, "%.4f", s->ms) : "");
}

/* Every node of the model in file order, with its GPU step (the step that begins at it), its
 * error (--compare-layers) and its time (--profile); then steps that begin at no node of the
 * model (layout conversions, casts). */
static void write_layer_table(out *o) {
    const cli_report *r = o->r;
    bool steps = r->num_steps > 0, err = r->layers_done;
    bool *used = calloc(r->num_steps + 1, sizeof *used);
    long *fused_into = malloc((r->model.num_nodes + 1) * sizeof *fused_into);
    long *step_of = malloc((r->model.num_nodes + 1) * sizeof *step_of);
    if (!used || !fused_into || !step_of) {
        free(used);
        free(fused_into);
        free(step_of);
        omitted(o, "Layers", "Out of memory listing them.");
        return;
    }
    /* the step that begins at each node (of several, the one running the node's op rather than
     * a cast or layout conversion before it), then the nodes the steps fused */
    for (size_t i = 0; i < r->model.num_nodes; i++) {
        const cli_onnx_node *nd = &r->model.nodes[i];
        fused_into[i] = step_of[i] = -1;
        for (int pass = 0; pass < 2 && step_of[i] < 0; pass++)
            for (size_t k = 0; *nd->name && k < r->num_steps && step_of[i] < 0; k++) {
                const char *label = r->steps[k].fused;
                size_t n = strlen(nd->op_type);
                bool runs_op = strncmp(label, nd->op_type, n) == 0 &&
                               (label[n] == '\0' || label[n] == '+');
                if (!used[k] && strcmp(r->steps[k].node, nd->name) == 0 && (pass || runs_op))
                    step_of[i] = (long)k;
            }
        if (step_of[i] >= 0) used[step_of[i]] = true;
    }
    for (size_t i = 0; i < r->model.num_nodes; i++)
        if (step_of[i] >= 0) fused_into[i] = (long)r->steps[step_of[i]].index;
    for (size_t i = 0; i < r->model.num_nodes; i++)
        if (step_of[i] >= 0)
            mark_fused(&r->model, i, r->steps[step_of[i]].fused,
                       (long)r->steps[step_of[i]].index, fused_into);
    fputs("<h2>Layers</h2>\n", o->f);
    fprintf(o->f, "<p>%s", r->have_model ? "Every node of the model, in the file's order "
                                           "(ONNX node names)" : "Every step of the engine");
    if (!steps) fputs("; <code>--backend gpu</code> adds the GPU step of each", o->f);
    if (!err) fputs("; <code>--compare-layers</code> adds each layer's error", o->f);
    if (steps && !r->profiled) fputs("; <code>--profile FILE</code> adds times", o->f);
    fputs(".</p>\n<table class=\"layers\">\n<tr><th class=\"n\">#</th><th>node</th>", o->f);
    if (r->have_model) fputs("<th>op</th>", o->f);
    if (err) fputs("<th class=\"n\">rel L2</th><th class=\"n\">max abs</th>", o->f);
    if (steps) fputs("<th class=\"n\">step</th><th>fused ops</th><th>kernel</th><th>output</th>",
                     o->f);
    if (steps && r->profiled) fputs("<th class=\"n\">ms</th>", o->f);
    fputs("</tr>\n", o->f);
    size_t rows = r->have_model ? r->model.num_nodes : r->num_steps;
    for (size_t i = 0; i < rows; i++) {
        const cli_onnx_node *nd = r->have_model ? &r->model.nodes[i] : NULL;
        const rep_step *s = nd ? (step_of[i] >= 0 ? &r->steps[step_of[i]] : NULL) : &r->steps[i];
        fprintf(o->f, "<tr><td class=\"n\">%zu</td><td class=\"name\">", i);
        esc(o, nd ? nd->name : s->node);
        fputs("</td>", o->f);
        if (nd) {
            fputs("<td>", o->f);
            esc(o, nd->op_type);
            fputs("</td>", o->f);
        }
        if (err) {
            long c = find_compared(r, nd ? nd->output : "");
            char b1[32], b2[32];
            bool over = c >= 0 && !(r->compared[c].r.relative_l2 <= r->threshold);
            if (c >= 0 && r->compared[c].step) { /* a fused step's output: say which nodes */
                fprintf(o->f, "<td class=\"n%s\" title=\"step ", over ? " bad" : "");
                esc(o, r->compared[c].step);
                fputs("\">", o->f);
            } else if (c >= 0) {
                fprintf(o->f, "<td class=\"n%s\">", over ? " bad" : "");
            }
            if (c >= 0)
                fprintf(o->f, "%s</td><td class=\"n\">%s</td>",
                        val(b1, "%.3g", r->compared[c].r.relative_l2),
                        val(b2, "%.3g", r->compared[c].r.max_abs));
            else
                fputs("<td class=\"n\">-</td><td class=\"n\">-</td>", o->f);
        }
        if (steps) step_cells(o, s, nd && !s ? fused_into[i] : -1);
        fputs("</tr>\n", o->f);
    }
    fputs("</table>\n", o->f);
    size_t extra = 0;
    for (size_t k = 0; r->have_model && k < r->num_steps; k++) {
        if (used[k]) continue;
        if (extra++ == 0)
            fputs("<p>The other steps: casts and layout conversions the engine added, by the "
                  "node they serve:</p>\n<table>\n"
                  "<tr><th>node</th><th class=\"n\">step</th><th>fused ops</th><th>kernel</th>"
                  "<th>output</th>", o->f);
        if (extra == 1 && r->profiled) fputs("<th class=\"n\">ms</th>", o->f);
        if (extra == 1) fputs("</tr>\n", o->f);
        fputs("<tr><td class=\"name\">", o->f);
        esc(o, r->steps[k].node);
        fputs("</td>", o->f);
        step_cells(o, &r->steps[k], -1);
        fputs("</tr>\n", o->f);
    }
    if (extra) fputs("</table>\n", o->f);
    free(used);
    free(fused_into);
    free(step_of);
}

int cli_write_report(const cli_args *a, cli_report *r, const tci_engine *engine,
                     const tci_context *ctx, json_value *json) {
    /* the GPU plan's steps: kernels and storage precision (no plan on the CPU backend) */
    tci_engine_layers(engine, collect_layer, r);
    qsort(r->steps, r->num_steps, sizeof *r->steps, by_index);
    FILE *f = fopen(a->report, "w");
    if (!f) {
        fprintf(stderr, "tcinfer: cannot write the report '%s': %s\n", a->report, strerror(errno));
        return EXIT_FAILURE;
    }
    out o = {f, a, r};
    write_header(&o, engine);
    write_outputs(&o);
    write_layer_errors(&o);
    write_times(&o);
    write_histograms(&o, ctx);
    write_precision(&o);
    write_layer_table(&o);
    fputs("</body>\n</html>\n", f);
    bool ok = !ferror(f);
    if (fclose(f) != 0) ok = false;
    if (!ok || r->failed) {
        fprintf(stderr, "tcinfer: %s '%s'\n",
                r->failed ? "out of memory writing the report" : "error writing the report",
                a->report);
        return EXIT_FAILURE;
    }
    if (json) json_add_string(json, "report", a->report);
    else if (!a->quiet) printf("report written to %s\n", a->report);
    return 0;
}
