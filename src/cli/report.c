/* The command's reports: the model, the outputs, --compare, --bench, --profile and NaN/Inf, as
 * text on stdout or as members of the --json document. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

const char *cli_precision_name(tci_precision p) {
    return p == TCI_PRECISION_BF16   ? "bf16"
           : p == TCI_PRECISION_FP32 ? "fp32"
           : p == TCI_PRECISION_TF32 ? "tf32"
           : p == TCI_PRECISION_AUTO ? "auto"
                                     : "fp16";
}

const char *cli_format_info_dims(const tci_tensor_info *info, char *buf, size_t size) {
    if (info->rank < 0) return "(unknown rank)";
    size_t pos = 0;
    buf[0] = '\0';
    for (int i = 0; i < info->rank && pos < size; i++) {
        int w;
        if (info->dims[i] >= 0)
            w = snprintf(buf + pos, size - pos, "%s%" PRId64, i ? "x" : "", info->dims[i]);
        else
            w = snprintf(buf + pos, size - pos, "%s%s", i ? "x" : "",
                         info->dim_names[i] ? info->dim_names[i] : "?");
        if (w < 0) break;
        pos += (size_t)w;
    }
    return info->rank == 0 ? "scalar" : buf;
}

static const char *format_dims(const tci_tensor *t, char *buf, size_t size) {
    tci_tensor_info info;
    tci_tensor_info_init(&info);
    info.rank = t->rank;
    for (int i = 0; i < t->rank; i++) info.dims[i] = t->dims[i];
    return cli_format_info_dims(&info, buf, size);
}

json_value *cli_json_shape(int rank, const int64_t *dims) {
    if (rank < 0) return json_null();
    json_value *a = json_array();
    for (int i = 0; a && i < rank; i++) json_add(a, NULL, json_number((double)dims[i]));
    return a;
}

/* An info's shape: numbers, and the names of symbolic dims as strings. */
static json_value *json_info_shape(const tci_tensor_info *info) {
    if (info->rank < 0) return json_null();
    json_value *a = json_array();
    for (int i = 0; a && i < info->rank; i++)
        json_add(a, NULL, info->dims[i] >= 0
                                    ? json_number((double)info->dims[i])
                                    : json_string(info->dim_names[i] ? info->dim_names[i]
                                                                            : "?"));
    return a;
}

static json_value *json_info(const tci_tensor_info *info) {
    json_value *o = json_object();
    json_add_string(o, "name", info->name);
    json_add_string(o, "dtype", tci_dtype_name(info->dtype));
    json_add(o, "shape", json_info_shape(info));
    return o;
}

static void print_histogram_entry(const char *op_type, size_t count, void *user) {
    if (user) json_add_number(user, op_type, (double)count);
    else printf("    %-24s %zu\n", op_type, count);
}

static void print_layer(size_t index, const char *node, const char *fused_ops, const char *kernel,
                        const char *layout, void *user) {
    if (user) {
        json_value *o = json_object();
        json_add_number(o, "step", (double)index);
        json_add_string(o, "node", node);
        json_add_string(o, "ops", fused_ops);
        json_add_string(o, "output_layout", layout);
        json_add_string(o, "kernel", kernel);
        json_add(user, NULL, o);
        return;
    }
    printf("  %4zu  %-28s %-40s %-10s %s\n", index, node, fused_ops, layout, kernel);
}

/* ---- the precision of the kept layers ---- */

static void count_kept(const char *layer, int automatic, void *user) {
    (void)layer, (void)automatic;
    ++*(size_t *)user;
}

const char *cli_kept_name(const cli_args *a, const tci_engine *engine) {
    if (a->backend != TCI_BACKEND_GPU) return NULL;
    size_t count = 0;
    if (tci_engine_fp32_layers(engine, count_kept, &count) != TCI_OK || !count) return NULL;
    /* (an engine file's precisions are in a already: run_cli reads them from the engine) */
    return a->precision == TCI_PRECISION_FP16 || a->precision == TCI_PRECISION_AUTO
               ? cli_precision_name(a->kept_precision)
               : "fp32";
}

/* One fp32 layer of the engine: a JSON entry, or appended to the text line. */
typedef struct fp32_list {
    json_value *json;
    size_t count;
    const char *kept; /* what they are kept in (cli_kept_name) */
} fp32_list;

static void print_fp32_layer(const char *layer, int automatic, void *user) {
    fp32_list *l = user;
    if (l->json) {
        json_value *o = json_object();
        json_add_string(o, "layer", layer);
        json_add_bool(o, "automatic", automatic != 0);
        json_add(l->json, NULL, o);
    } else {
        if (!l->count && l->kept && strcmp(l->kept, "fp32") != 0)
            printf("  fp32 layers (kept in %s): ", l->kept);
        else if (!l->count)
            printf("  fp32 layers: ");
        printf("%s'%s'%s", l->count ? ", " : "", layer, automatic ? " (precision auto)" : "");
    }
    l->count++;
}

/* choices_from: where choices not timed came from ("timing cache", "engine file") */
static void print_gpu_info(const tci_engine *engine, const char *choices_from, const char *kept,
                           json_value *json) {
    tci_gpu_report r;
    tci_gpu_report_init(&r);
    if (tci_engine_gpu_report(engine, &r) != TCI_OK) return;
    if (json) {
        json_value *g = json_add_object(json, "gpu_plan");
        json_add_number(g, "steps", (double)r.num_steps);
        json_add_number(g, "layout_conversions", (double)r.layout_conversions);
        json_add_number(g, "views", (double)r.views);
        json_add_number(g, "weight_bytes", (double)r.weight_bytes);
        json_add_number(g, "arena_bytes", (double)r.arena_bytes);
        json_add_number(g, "naive_activation_bytes", (double)r.naive_activation_bytes);
        json_add_number(g, "layers_timed", (double)r.layers_timed);
        json_add_number(g, "layers_cached", (double)r.layers_cached);
        if (kept) json_add_string(g, "kept_precision", kept);
        fp32_list l = {json_add_array(g, "fp32_layers"), 0, kept};
        tci_engine_fp32_layers(engine, print_fp32_layer, &l);
        tci_engine_layers(engine, print_layer, json_add_array(g, "layers"));
        return;
    }
    printf("GPU plan: %zu steps, %zu layout conversions, %zu parts read in place\n", r.num_steps,
           r.layout_conversions, r.views);
    printf("  weights on the device: %.2f MB\n", (double)r.weight_bytes / 1e6);
    printf("  activation arena: %.2f MB (naive sum of activations %.2f MB, %.1f%%)\n",
           (double)r.arena_bytes / 1e6, (double)r.naive_activation_bytes / 1e6,
           r.naive_activation_bytes ? 100.0 * (double)r.arena_bytes / (double)r.naive_activation_bytes : 100.0);
    if (r.layers_timed || r.layers_cached)
        printf("  kernel choices: %zu layers timed, %zu from the %s\n", r.layers_timed,
               r.layers_cached, choices_from);
    fp32_list l = {NULL, 0, kept};
    tci_engine_fp32_layers(engine, print_fp32_layer, &l);
    if (l.count) printf("\n");
    printf("  step  node                         fused ops                                output     kernel\n");
    tci_engine_layers(engine, print_layer, NULL);
}

void cli_print_info(const tci_engine *engine, const char *choices_from, const char *kept,
                    json_value *json) {
    char dims[256];
    tci_tensor_info info;
    tci_tensor_info_init(&info);
    tci_engine_stats stats;
    tci_engine_stats_init(&stats);
    tci_engine_stats_get(engine, &stats);
    if (json) {
        json_value *ins = json_add_array(json, "inputs");
        for (size_t i = 0; i < tci_engine_input_count(engine); i++)
            if (tci_engine_input_info(engine, i, &info) == TCI_OK)
                json_add(ins, NULL, json_info(&info));
        json_value *outs = json_add_array(json, "outputs");
        for (size_t i = 0; i < tci_engine_output_count(engine); i++)
            if (tci_engine_output_info(engine, i, &info) == TCI_OK)
                json_add(outs, NULL, json_info(&info));
        json_add_number(json, "nodes", (double)stats.num_nodes);
        tci_engine_op_histogram(engine, print_histogram_entry, json_add_object(json, "ops"));
        json_add_number(json, "parameters", (double)stats.num_parameters);
        json_add_number(json, "constant_tensors", (double)stats.num_initializers);
        json_add_number(json, "parameter_bytes", (double)stats.parameter_bytes);
        print_gpu_info(engine, choices_from, kept, json);
        return;
    }
    printf("inputs:\n");
    for (size_t i = 0; i < tci_engine_input_count(engine); i++)
        if (tci_engine_input_info(engine, i, &info) == TCI_OK)
            printf("  %-24s %-8s %s\n", info.name, tci_dtype_name(info.dtype),
                   cli_format_info_dims(&info, dims, sizeof dims));
    printf("outputs:\n");
    for (size_t i = 0; i < tci_engine_output_count(engine); i++)
        if (tci_engine_output_info(engine, i, &info) == TCI_OK)
            printf("  %-24s %-8s %s\n", info.name, tci_dtype_name(info.dtype),
                   cli_format_info_dims(&info, dims, sizeof dims));
    printf("nodes after optimisation: %zu\n", stats.num_nodes);
    printf("ops:\n");
    tci_engine_op_histogram(engine, print_histogram_entry, NULL);
    printf("parameters: %" PRId64 " (%zu constant tensors, %.2f MB)\n", stats.num_parameters,
           stats.num_initializers, (double)stats.parameter_bytes / 1e6);
    print_gpu_info(engine, choices_from, kept, NULL);
}

/* Top-5 classes of row r of an NxC float output into best (nb of them). */
static int top5(const tci_tensor *t, int64_t r, int64_t best[5]) {
    int64_t cols = t->dims[1];
    const float *row = (const float *)t->data + r * cols;
    int nb = 0;
    for (int64_t c = 0; c < cols; c++) {
        if (nb == 5 && !(row[c] > row[best[4]])) continue;
        int pos = nb < 5 ? nb++ : 4;
        while (pos > 0 && row[c] > row[best[pos - 1]]) {
            best[pos] = best[pos - 1];
            pos--;
        }
        best[pos] = c;
    }
    return nb;
}

void cli_report_output(const tci_tensor *t, bool print, json_value *outputs) {
    char dims[256];
    bool classes = t->dtype == TCI_DTYPE_FLOAT && t->rank == 2 && t->dims[1] > 1 && t->dims[0] > 0;
    json_value *o = NULL;
    if (outputs) {
        o = json_object();
        json_add(outputs, NULL, o);
        json_add_string(o, "name", t->name);
        json_add_string(o, "dtype", tci_dtype_name(t->dtype));
        json_add(o, "shape", cli_json_shape(t->rank, t->dims));
        if (!print) return; /* --quiet: no statistics */
    } else if (print) {
        printf("output '%s': %s %s\n", t->name, tci_dtype_name(t->dtype),
               format_dims(t, dims, sizeof dims));
    }
    if (classes) {
        int64_t rows = t->dims[0];
        json_value *all = o ? json_add_array(o, "top5") : NULL;
        for (int64_t r = 0; r < rows && (o || r < 8); r++) {
            int64_t best[5];
            int nb = top5(t, r, best);
            const float *row = (const float *)t->data + r * t->dims[1];
            json_value *list = all ? json_array() : NULL;
            if (list) json_add(all, NULL, list);
            else if (print) printf("  row %" PRId64 " top-5:", r);
            for (int k = 0; k < nb; k++) {
                if (list) {
                    json_value *c = json_object();
                    json_add_number(c, "class", (double)best[k]);
                    json_add_number(c, "score", (double)row[best[k]]);
                    json_add(list, NULL, c);
                } else if (print) {
                    printf("  class %" PRId64 " (%.4f)", best[k], (double)row[best[k]]);
                }
            }
            if (!list && print) printf("\n");
        }
        if (!o && print && rows > 8) printf("  ... %" PRId64 " more rows\n", rows - 8);
        return;
    }
    if (t->dtype != TCI_DTYPE_FLOAT) return;
    int64_t n = tci_tensor_count(t);
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    const float *p = t->data;
    for (int64_t i = 0; i < n; i++) {
        sum += p[i];
        if (p[i] < mn) mn = p[i];
        if (p[i] > mx) mx = p[i];
    }
    if (!n) return;
    if (o) {
        json_add_number(o, "min", mn);
        json_add_number(o, "max", mx);
        json_add_number(o, "mean", sum / (double)n);
    } else if (print) {
        printf("  min %.6g  max %.6g  mean %.6g\n", mn, mx, sum / (double)n);
    }
}

static int compare_floats(const void *x, const void *y) {
    float a = *(const float *)x, b = *(const float *)y;
    return a < b ? -1 : a > b;
}

/* The warm-up and timed runs in about 20 slices, for the progress line: each run is timed on
 * its own, so slicing changes nothing measured. */
static tci_status bench_with_progress(const cli_args *a, tci_context *ctx, float *ms) {
    static const char stage[] = "bench runs";
    size_t total = (size_t)a->warmup + (size_t)a->bench, done = 0;
    int slice = (int)(total / 20) > 1 ? (int)(total / 20) : 1;
    float *discard = calloc((size_t)slice, sizeof(float));
    if (!discard) return TCI_ERR_OUT_OF_MEMORY;
    cli_progress_update(stage, 0, total, a->progress);
    tci_status st = TCI_OK;
    while (st == TCI_OK && done < total) {
        bool warm = done < (size_t)a->warmup;
        size_t left = warm ? (size_t)a->warmup - done : total - done;
        int runs = left < (size_t)slice ? (int)left : slice;
        st = tci_context_benchmark(ctx, runs, 0, warm ? discard : ms + (done - (size_t)a->warmup));
        done += (size_t)runs;
        if (st == TCI_OK) cli_progress_update(stage, done, total, a->progress);
    }
    cli_progress_end(a->progress);
    free(discard);
    return st;
}

int cli_run_bench(const cli_args *a, tci_context *ctx, const tci_tensor *inputs, json_value *json) {
    float *ms = calloc((size_t)a->bench, sizeof(float));
    if (!ms) return EXIT_FAILURE;
    tci_status st = bench_with_progress(a, ctx, ms);
    if (st != TCI_OK) {
        free(ms);
        return cli_fail(st);
    }
    qsort(ms, (size_t)a->bench, sizeof(float), compare_floats);
    int n = a->bench;
    double median = ms[n / 2], p90 = ms[(int)(0.9 * (n - 1))], p99 = ms[(int)(0.99 * (n - 1))];
    int64_t batch = inputs[0].rank > 0 ? inputs[0].dims[0] : 1;
    double throughput = median > 0 ? 1000.0 * (double)batch / median : 0.0;
    if (json) {
        json_value *b = json_add_object(json, "bench");
        json_add_number(b, "runs", n);
        json_add_number(b, "warmup", a->warmup);
        json_add_number(b, "batch", (double)batch);
        json_add_number(b, "median_ms", median);
        json_add_number(b, "p90_ms", p90);
        json_add_number(b, "p99_ms", p99);
        json_add_number(b, "min_ms", ms[0]);
        json_add_number(b, "max_ms", ms[n - 1]);
        json_add_number(b, "throughput_per_s", throughput);
    } else {
        printf("bench: %d runs after %d warm-up: median %.3f ms, p90 %.3f ms, p99 %.3f ms, "
               "throughput %.1f/s (batch %lld)\n",
               n, a->warmup, median, p90, p99, throughput, (long long)batch);
    }
    free(ms);
    return 0;
}

typedef struct profile_row {
    size_t index;
    char node[128], fused[128], kernel[128];
    float ms;
} profile_row;

typedef struct profile_table {
    profile_row *rows;
    size_t count, cap;
} profile_table;

static void collect_profile(size_t index, const char *node, const char *fused_ops,
                            const char *kernel, float median_ms, void *user) {
    profile_table *t = user;
    if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        profile_row *r = realloc(t->rows, cap * sizeof *r);
        if (!r) return;
        t->rows = r;
        t->cap = cap;
    }
    profile_row *r = &t->rows[t->count++];
    r->index = index;
    snprintf(r->node, sizeof r->node, "%s", node);
    snprintf(r->fused, sizeof r->fused, "%s", fused_ops);
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    r->ms = median_ms;
}

static int by_time(const void *x, const void *y) {
    const profile_row *a = x, *b = y;
    return a->ms > b->ms ? -1 : a->ms < b->ms;
}

/* The Chrome trace: steps laid end to end in execution order, median times. */
static bool write_trace(const char *path, const profile_table *t, double *total) {
    json_value *doc = json_object();
    json_value *events = json_add_array(doc, "traceEvents");
    double ts = 0;
    *total = 0;
    for (size_t i = 0; i < t->count; i++) {
        const profile_row *r = &t->rows[i];
        json_value *e = json_object();
        json_add_string(e, "name", r->fused);
        json_add_string(e, "cat", "layer");
        json_add_string(e, "ph", "X");
        json_add_number(e, "pid", 0);
        json_add_number(e, "tid", 0);
        json_add_number(e, "ts", ts);
        json_add_number(e, "dur", r->ms * 1000.0);
        json_value *args = json_add_object(e, "args");
        json_add_string(args, "node", r->node);
        json_add_string(args, "kernel", r->kernel);
        json_add(events, NULL, e);
        ts += r->ms * 1000.0;
        *total += r->ms;
    }
    json_add_string(doc, "displayTimeUnit", "ms");
    FILE *f = fopen(path, "w");
    bool ok = f && json_print(doc, f);
    if (f && fclose(f) != 0) ok = false;
    json_free(doc);
    return ok;
}

int cli_run_profile(const cli_args *a, tci_context *ctx, json_value *json) {
    profile_table t = {0};
    tci_status st = tci_context_profile(ctx, 20, collect_profile, &t);
    if (st != TCI_OK) {
        free(t.rows);
        return cli_fail(st);
    }
    for (size_t i = 0; i < t.count; i++)
        cli_report_profile_step(a->collect, t.rows[i].index, t.rows[i].node, t.rows[i].fused,
                                t.rows[i].kernel, t.rows[i].ms);
    double total = 0;
    if (!write_trace(a->profile, &t, &total)) {
        fprintf(stderr, "tcinfer: cannot write '%s': %s\n", a->profile, strerror(errno));
        free(t.rows);
        return EXIT_FAILURE;
    }
    qsort(t.rows, t.count, sizeof *t.rows, by_time);
    if (json) {
        json_value *p = json_add_object(json, "profile");
        json_add_string(p, "trace", a->profile);
        json_add_number(p, "total_ms", total);
        json_value *steps = json_add_array(p, "steps");
        for (size_t i = 0; i < t.count; i++) {
            json_value *s = json_object();
            json_add_number(s, "step", (double)t.rows[i].index);
            json_add_string(s, "node", t.rows[i].node);
            json_add_string(s, "ops", t.rows[i].fused);
            json_add_string(s, "kernel", t.rows[i].kernel);
            json_add_number(s, "median_ms", t.rows[i].ms);
            json_add(steps, NULL, s);
        }
        free(t.rows);
        return 0;
    }
    printf("profile: %zu steps, %.3f ms in total (median of 20 step-by-step runs); trace in %s\n",
           t.count, total, a->profile);
    printf("  %8s %6s  %-5s %-28s %-40s %s\n", "ms", "%", "step", "node", "fused ops", "kernel");
    for (size_t i = 0; i < t.count; i++) {
        const profile_row *r = &t.rows[i];
        printf("  %8.4f %5.1f%%  %-5zu %-28s %-40s %s\n", r->ms, total > 0 ? 100.0 * r->ms / total : 0,
               r->index, r->node, r->fused, r->kernel);
    }
    free(t.rows);
    return 0;
}
