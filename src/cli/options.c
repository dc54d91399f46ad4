/* The command's options: one table that getopt_long parses and the usage text prints, and the
 * command's terms for the API's option names in messages. */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* getopt_long */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

enum {
    OPT_SHAPE = 256, OPT_SHAPES, OPT_RANDOM, OPT_OUTPUT_DIR, OPT_JSON, OPT_QUIET, OPT_BACKEND,
    OPT_THREADS, OPT_PRECISION, OPT_FP32_LAYERS, OPT_KERNELS, OPT_TIMING_CACHE, OPT_NO_GRAPH,
    OPT_SAVE_ENGINE, OPT_LOAD_ENGINE, OPT_COMPARE, OPT_COMPARE_LAYERS, OPT_BASELINE,
    OPT_TOLERANCE, OPT_BENCH, OPT_WARMUP, OPT_PROFILE, OPT_INFO, OPT_PLAN, OPT_LIST_OPS,
    OPT_DEVICES, OPT_VERSION, OPT_LIMIT, OPT_REFERENCE, OPT_ATOL, OPT_RTOL,
    OPT_REPORT, OPT_ACCURACY_TARGET, OPT_KEEP_PRECISION, OPT_DEVICE,
};

/* One row per option (a row without a name is a heading of the usage text). help's lines after
 * the first are indented under it. */
typedef struct cli_option {
    const char *name;
    int id;         /* a short option's letter, else an OPT_ value */
    /* the value's placeholder; NULL: a flag; "=VALUE": a value that may be left out, given only
     * as --name=VALUE */
    const char *value;
    const char *help;
} cli_option;

static bool optional_value(const cli_option *o) { return o->value && o->value[0] == '='; }

static const cli_option options[] = {
    {NULL, 0, NULL, "Inputs and outputs:"},
    {"shape", OPT_SHAPE, "NAME:DxDx...", "fix the shape of input NAME (symbolic dims such as the\n"
                                         "batch); repeatable. A GPU engine also runs inputs\n"
                                         "smaller in those dims and the batch"},
    {"shapes", OPT_SHAPES, "A:DxD,B:DxD", "several shapes at once, as trtexec spells them"},
    {"random", OPT_RANDOM, "SEED", "feed seeded uniform [-1,1) random inputs instead of files"},
    {"output", 'o', "FILE", "write output 0 to FILE (.npy, or raw data for other extensions);\n"
                            "-o DIR/ (a folder) is --output-dir DIR"},
    {"output-dir", OPT_OUTPUT_DIR, "DIR", "write every output to DIR/NAME.npy, NAME the output's\n"
                                          "name (characters other than A-Z a-z 0-9 . _ - as _)"},
    {"json", OPT_JSON, NULL, "print the run, --compare, --bench, --profile and --info results\n"
                             "as one JSON document on stdout (errors stay on stderr)"},
    {"quiet", OPT_QUIET, NULL, "no report of the outputs, no progress line"},
    {"verbose", 'v', NULL, "print the library's log (engine build, GPU plan, kernel per\n"
                           "layer) on stderr"},
    {NULL, 0, NULL, "Backend and precision:"},
    {"backend", OPT_BACKEND, "gpu|cpu", "fp16 tensor-core GPU engine (the default where a GPU\n"
                                        "exists) or the fp32 CPU reference executor"},
    {"device", OPT_DEVICE, "N", "GPU: the CUDA device to build, load and run on (0, the\n"
                                "default, 1, ...: as --devices lists them; implies --backend gpu)"},
    {"threads", OPT_THREADS, "N", "CPU: threads of the reference backend's matrix products"},
    {"precision", OPT_PRECISION, "fp16|bf16|tf32|fp32|auto",
     "GPU float tensors: fp16 (default), bfloat16 (fp32's\n"
     "range, fewer mantissa bits), fp32 with TF32 tensor cores, fp32\n"
     "with tensor-op math off, or auto: fp16 with the layers that\n"
     "overflow it on the inputs (or seeded random ones) kept in fp32"},
    {"accuracy-target", OPT_ACCURACY_TARGET, "TOL",
     "with --precision auto: also keep in fp32 the fewest of the\n"
     "layers adding the most error (ranked, then bisected) that\n"
     "bring the outputs' relative L2 error against the GPU fp32\n"
     "engine to at most TOL"},
    {"fp32-layers", OPT_FP32_LAYERS, "A,B", "GPU: keep these nodes in fp32 (node names, op types, or\n"
                                            "patterns such as '/layer1/*'), against fp16 overflow"},
    {"keep-precision", OPT_KEEP_PRECISION, "fp32|tf32|bf16",
     "what --fp32-layers and --precision auto keep layers in:\n"
     "fp32 (default; tensor-op math off), fp32 storage with TF32\n"
     "tensor cores, or bfloat16 (fp32's range at tensor-core speed;\n"
     "against overflow, not with --accuracy-target)"},
    {"kernels", OPT_KERNELS, "auto|wmma|cudnn",
     "GPU convolutions, GEMMs, recurrences and attention: per\n"
     "layer the faster of tcinfer's kernels and cuDNN / cuBLASLt\n"
     "(auto), or one family"},
    {"timing-cache", OPT_TIMING_CACHE, "FILE", "GPU: reuse and record the per-layer kernel choices"},
    {"no-graph", OPT_NO_GRAPH, NULL, "GPU: launch the steps one by one instead of a CUDA graph"},
    {"save-engine", OPT_SAVE_ENGINE, "FILE", "GPU: write the built engine to FILE; without inputs,\n"
                                             "build, save and exit"},
    {"load-engine", OPT_LOAD_ENGINE, "FILE", "GPU: run an engine file instead of MODEL.onnx, without\n"
                                             "tuning; shapes, precision and kernels come from it"},
    {NULL, 0, NULL, "Accuracy:"},
    {"compare", OPT_COMPARE, NULL, "run the GPU engine and the fp32 baseline on the same input:\n"
                                   "max/mean abs error, relative L2, cosine, top-1/top-5;\n"
                                   "with --reference, the engine that runs (the CPU reference\n"
                                   "where there is no GPU) against saved outputs"},
    {"compare-layers", OPT_COMPARE_LAYERS, "=unfused",
     "--compare for every GPU step's output of the engine as it\n"
     "ships (fused: a fused step at its last node's output),\n"
     "naming the first layer whose error jumps; =unfused: every\n"
     "node's output, the engine built without fusion"},
    {"baseline", OPT_BASELINE, "cpu|gpu-fp32", "the --compare baseline: the fp32 CPU reference\n"
                                               "(default) or the GPU engine in fp32"},
    {"reference", OPT_REFERENCE, "FILE|DIR|NAME=FILE",
     "the --compare baseline from outputs saved by any framework\n"
     "(.npy, or ONNX TensorProto .pb): NAME=FILE per output\n"
     "(repeatable; NAME as --output-dir names it), FILE for a model of\n"
     "one output, or a folder of NAME.npy / NAME.pb, one per output;\n"
     "implies --compare, needs no GPU"},
    {"tolerance", OPT_TOLERANCE, "X", "with --compare: exit 1 when a relative L2 error exceeds X"},
    {"atol", OPT_ATOL, "A", "with --compare: exit 1 when an output element has\n"
                            "|got - ref| > A + R * |ref| (Polygraphy's rule, --rtol R;\n"
                            "the one not given is 0); reports the worst element"},
    {"rtol", OPT_RTOL, "R", "the relative term of that bound (see --atol)"},
    {NULL, 0, NULL, "Performance:"},
    {"bench", OPT_BENCH, "N", "time N runs (after --warmup): median/p90/p99, throughput"},
    {"warmup", OPT_WARMUP, "W", "untimed runs before --bench (default 10)"},
    {"profile", OPT_PROFILE, "FILE", "per-layer GPU times: a table sorted by time and a Chrome\n"
                                     "trace in FILE"},
    {"report", OPT_REPORT, "FILE", "write an HTML report of the run to FILE (one file, no\n"
                                   "script): what --compare, --compare-layers and --profile\n"
                                   "measured, output histograms, every layer (docs/report.md)"},
    {NULL, 0, NULL, "Model and tool:"},
    {"info", OPT_INFO, NULL, "describe the model (inputs, outputs, ops, parameters) and exit;\n"
                             "names every unsupported node"},
    {"plan", OPT_PLAN, NULL, "describe the GPU plan (fusion, layouts, memory) and exit; needs\n"
                             "no GPU"},
    {"limit", OPT_LIMIT, "NAME=N", "a limit against hostile models (0: the default):\n"
                                   "max_model_bytes, max_tensor_elements, max_constant_bytes,\n"
                                   "max_nodes, max_nesting_depth, max_parse_bytes,\n"
                                   "max_loop_iterations; repeatable (docs/robustness.md)"},
    {"list-ops", OPT_LIST_OPS, NULL, "list the supported ops, opsets and backends and exit"},
    {"devices", OPT_DEVICES, NULL, "print the number of usable CUDA GPUs, then each one's index\n"
                                   "(for --device) and name, and exit"},
    {"version", OPT_VERSION, NULL, "print the version and exit"},
    {"help", 'h', NULL, "this text"},
};
enum { NUM_OPTIONS = sizeof options / sizeof options[0] };

static void print_usage(FILE *f) {
    fputs("usage: tcinfer [options] MODEL.onnx [INPUT...]\n"
          "       tcinfer [options] --load-engine PLAN.tci [INPUT...]\n"
          "\n"
          "Runs an ONNX model. INPUT is FILE (feeds the first input) or NAME=FILE; FILE is .npy,\n"
          ".pb (ONNX TensorProto), or raw little-endian data in the input's dtype (fp32 for\n"
          "float) whose shape comes from the model or --shape. Options take their value as\n"
          "--option=VALUE or --option VALUE.\n",
          f);
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const cli_option *o = &options[i];
        if (!o->name) {
            fprintf(f, "\n%s\n", o->help);
            continue;
        }
        char head[80];
        if (o->id < 256)
            snprintf(head, sizeof head, "-%c, --%s%s%s", o->id, o->name, o->value ? " " : "",
                     o->value ? o->value : "");
        else if (optional_value(o))
            snprintf(head, sizeof head, "--%s[%s]", o->name, o->value);
        else
            snprintf(head, sizeof head, "--%s%s%s", o->name, o->value ? " " : "",
                     o->value ? o->value : "");
        const char *h = o->help;
        bool own_line = strlen(head) > 22;
        fprintf(f, "  %-24s%s", head, own_line ? "\n" : "");
        for (bool first = true; *h; first = false) {
            const char *nl = strchr(h, '\n');
            size_t n = nl ? (size_t)(nl - h) : strlen(h);
            if (!first || own_line) fprintf(f, "  %-24s", "");
            fprintf(f, "%.*s\n", (int)n, h);
            h += n + (nl ? 1 : 0);
        }
    }
    fputs("\nexit status: 0 ok, 1 failure, 2 usage error, 3 the model uses something unsupported\n",
          f);
}

int cli_compare_needs_gpu(void) {
    return cli_usage_error(
        "--compare without --reference runs the GPU engine against the fp32 baseline, and needs "
        "a GPU. Without one, compare the CPU reference (or any backend) against outputs saved "
        "from another framework: --compare --reference FILE|DIR|NAME=FILE (.npy or .pb)%s",
        "");
}

int cli_usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "tcinfer: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(tcinfer --help shows the usage)\n");
    return EXIT_USAGE;
}

/* The API's names in messages, and what the command calls them; longest first where one
 * contains another. */
static const char *const flag_terms[][2] = {
    {"TCI_BACKEND_CPU, tci_engine_options.backend", "--backend cpu"},
    {"TCI_BACKEND_CPU (tci_engine_options.backend)", "--backend cpu"},
    {"tci_engine_options.shapes", "--shape"},
    {"tci_engine_options.fp32_layers", "--fp32-layers"},
    {"tci_engine_options.precision", "--precision"},
    {"kept_precision TCI_PRECISION_BF16", "--keep-precision bf16"},
    {"tci_engine_options.kept_precision", "--keep-precision"},
    {"tci_engine_options.calibration_inputs", "the input files (or --random)"},
    {"TCI_PRECISION_AUTO", "--precision auto"},
    {"tci_engine_options.accuracy_target", "--accuracy-target"},
    {"TCI_PRECISION_BF16", "--precision bf16"},
    {"TCI_PRECISION_FP32", "--precision fp32"},
    {"tci_engine_options.kernels", "--kernels"},
    {"tci_engine_options.timing_cache", "--timing-cache"},
    {"tci_engine_options.cpu_threads", "--threads"},
    {"tci_engine_options.no_cuda_graph", "--no-graph"},
    {"tci_engine_options.plan_only", "--plan"},
    {"tci_engine_options.mark_all_outputs", "--compare-layers"},
    {"tci_engine_options.backend", "--backend"},
    {"tci_engine_options.device", "--device"},
    {"tci_engine_options.max_model_bytes", "--limit max_model_bytes"},
    {"tci_engine_options.max_tensor_elements", "--limit max_tensor_elements"},
    {"tci_engine_options.max_constant_bytes", "--limit max_constant_bytes"},
    {"tci_engine_options.max_nodes", "--limit max_nodes"},
    {"tci_engine_options.max_nesting_depth", "--limit max_nesting_depth"},
    {"tci_engine_options.max_parse_bytes", "--limit max_parse_bytes"},
    {"tci_engine_options.max_loop_iterations", "--limit max_loop_iterations"},
    {"tci_list_ops", "tcinfer --list-ops"},
};

const char *cli_flag_terms(const char *text, char *buf, size_t size) {
    size_t pos = 0;
    while (*text && pos + 1 < size) {
        size_t k = 0, n = sizeof flag_terms / sizeof flag_terms[0];
        while (k < n && strncmp(text, flag_terms[k][0], strlen(flag_terms[k][0])) != 0) k++;
        if (k < n) {
            int w = snprintf(buf + pos, size - pos, "%s", flag_terms[k][1]);
            pos = w < 0 || (size_t)w >= size - pos ? size - 1 : pos + (size_t)w;
            text += strlen(flag_terms[k][0]);
        } else {
            buf[pos++] = *text++;
        }
    }
    buf[pos] = '\0';
    return buf;
}

int cli_fail(tci_status st) {
    char text[4096];
    const char *message = tci_last_error()[0] ? tci_last_error() : tci_status_string(st);
    fprintf(stderr, "tcinfer: %s\n", cli_flag_terms(message, text, sizeof text));
    return st == TCI_ERR_UNSUPPORTED ? EXIT_UNSUPPORTED : EXIT_FAILURE;
}

void cli_log(tci_log_level level, const char *message, void *user) {
    (void)user;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (level == TCI_LOG_ERROR) return; /* cli_fail reports it */
    char text[4096];
    fprintf(stderr, "tcinfer: %s: %s\n", names[level], cli_flag_terms(message, text, sizeof text));
}

/* "name:1x3x224x224"; text is left intact so errors can quote it */
static bool parse_shape(const char *text, tci_shape_override *o, char **name_out) {
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text) return false;
    o->rank = 0;
    const char *p = colon + 1;
    if (strcmp(p, "scalar") != 0) {
        while (*p) {
            char *end;
            errno = 0;
            long long d = strtoll(p, &end, 10);
            if (end == p || d < 0 || errno || o->rank == TCI_MAX_RANK) return false;
            o->dims[o->rank++] = d;
            if (*end == 'x' || *end == 'X' || *end == ',') {
                end++;
                if (!*end) return false; /* trailing separator */
            } else if (*end) {
                return false;
            }
            p = end;
        }
        if (o->rank == 0) return false;
    }
    *name_out = strndup(text, (size_t)(colon - text));
    o->name = *name_out;
    return *name_out != NULL;
}

/* One NAME:DxDx... of --shape (whole, quoted on error) or --shapes (whole: the full value). */
static int add_shape(cli_args *a, const char *text, const char *whole) {
    if (a->num_shapes == MAX_ITEMS) return cli_usage_error("too many shapes (at most 64)%s", "");
    if (!parse_shape(text, &a->shapes[a->num_shapes], &a->shape_names[a->num_shapes]))
        return whole ? cli_usage_error("--shapes wants NAME:DxDx...,NAME:DxDx..., got '%s'", whole)
                     : cli_usage_error("--shape wants NAME:DxDx..., got '%s'", text);
    a->num_shapes++;
    return 0;
}

/* --shapes a:1x3x224x224,b:1x10: split at the commas that start another NAME:... */
static int add_shapes(cli_args *a, const char *value) {
    char *copy = strdup(value);
    if (!copy) return EXIT_FAILURE;
    int rc = 0;
    char *start = copy;
    while (rc == 0 && *start) {
        char *end = start;
        for (;;) {
            end = strchr(end, ',');
            if (!end) break;
            const char *next = strchr(end + 1, ','), *colon = strchr(end + 1, ':');
            if (colon && (!next || colon < next)) break; /* the next item names an input */
            end++;
        }
        if (end) *end = '\0';
        rc = add_shape(a, start, value);
        start = end ? end + 1 : start + strlen(start);
        if (rc == 0 && end && !*start) rc = add_shape(a, "", value); /* a trailing comma */
    }
    if (rc == 0 && !*value) rc = add_shape(a, "", value);
    free(copy);
    return rc;
}

static int parse_count(const char *flag, const char *value, long max, int *out) {
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (*end || end == value || errno || v < 0 || v > max) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s wants a count, got '%%s'", flag);
        return cli_usage_error(msg, value);
    }
    *out = (int)v;
    return 0;
}

/* "max_nodes=100000" into the matching limit field of o */
static bool parse_limit(const char *text, tci_engine_options *o) {
    const char *eq = strchr(text, '=');
    if (!eq || !eq[1]) return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(eq + 1, &end, 10);
    if (*end || errno || eq[1] == '-') return false;
    size_t n = (size_t)(eq - text);
#define LIMIT_IS(name) (n == sizeof(name) - 1 && strncmp(text, name, n) == 0)
    if (LIMIT_IS("max_model_bytes")) o->max_model_bytes = v;
    else if (LIMIT_IS("max_tensor_elements") && v <= INT64_MAX) o->max_tensor_elements = (int64_t)v;
    else if (LIMIT_IS("max_constant_bytes")) o->max_constant_bytes = v;
    else if (LIMIT_IS("max_nodes")) o->max_nodes = v;
    else if (LIMIT_IS("max_nesting_depth") && v <= 1000) o->max_nesting_depth = (int)v;
    else if (LIMIT_IS("max_parse_bytes")) o->max_parse_bytes = v;
    else if (LIMIT_IS("max_loop_iterations")) o->max_loop_iterations = v;
    else return false;
#undef LIMIT_IS
    return true;
}

/* One option's value into a; 0 or an exit status. */
static int apply_option(cli_args *a, int id, char *value) {
    char *end;
    switch (id) {
    case 'h': print_usage(stdout); return -1;
    case OPT_VERSION: printf("tcinfer %s\n", tci_version()); return -1;
    case OPT_DEVICES: {
        int n = tci_gpu_count(NULL, 0);
        printf("GPUs: %d\n", n);
        for (int i = 0; i < n; i++) {
            char name[256];
            tci_status st = tci_gpu_name(i, name, sizeof name);
            if (st != TCI_OK) return cli_fail(st);
            printf("device %d: %s\n", i, name);
        }
        return -1;
    }
    case OPT_QUIET: a->quiet = true; return 0;
    case 'v': a->verbose = true; return 0;
    case OPT_JSON: a->json = true; return 0;
    case OPT_INFO: a->info = true; return 0;
    case OPT_LIST_OPS: a->list_ops = true; return 0;
    case OPT_COMPARE: a->compare = true; return 0;
    case OPT_COMPARE_LAYERS:
        if (value && strcmp(value, "unfused") != 0)
            return cli_usage_error("--compare-layers takes no value (the engine as it ships) or "
                                   "=unfused, got '%s'", value);
        a->compare = a->compare_layers = true;
        a->compare_unfused = value != NULL;
        return 0;
    case OPT_NO_GRAPH: a->no_graph = true; return 0;
    case OPT_PLAN: a->plan = true; return 0;
    case OPT_PROFILE: a->profile = value; return 0;
    case OPT_REPORT: a->report = value; return 0;
    case OPT_ACCURACY_TARGET:
        errno = 0;
        a->accuracy_target = strtod(value, &end);
        if (*end || end == value || errno || !(a->accuracy_target > 0))
            return cli_usage_error("--accuracy-target wants a relative L2 error above 0, got '%s'",
                                   value);
        return 0;
    case OPT_TOLERANCE:
        errno = 0;
        a->tolerance = strtod(value, &end);
        if (*end || end == value || errno || a->tolerance < 0)
            return cli_usage_error("--tolerance wants a non-negative number, got '%s'", value);
        return 0;
    case OPT_ATOL:
    case OPT_RTOL: {
        errno = 0;
        double v = strtod(value, &end);
        const char *flag = id == OPT_ATOL ? "--atol" : "--rtol";
        if (*end || end == value || errno || !(v >= 0) || v > 1e300) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s wants a non-negative number, got '%%s'", flag);
            return cli_usage_error(msg, value);
        }
        *(id == OPT_ATOL ? &a->atol : &a->rtol) = v;
        return 0;
    }
    case OPT_REFERENCE: {
        if (a->num_references == MAX_ITEMS) return cli_usage_error("too many --reference%s", "");
        cli_input *r = &a->references[a->num_references++];
        char *eq = strchr(value, '=');
        r->name = NULL;
        r->path = value;
        if (eq) {
            *eq = '\0';
            r->name = value;
            r->path = eq + 1;
            if (!*r->name || !*r->path)
                return cli_usage_error("--reference wants NAME=FILE, FILE or DIR, got '%s='",
                                       value);
        } else if (!*value) {
            return cli_usage_error("--reference wants NAME=FILE, FILE or DIR, got '%s'", value);
        }
        a->compare = true;
        return 0;
    }
    case OPT_BENCH: return parse_count("--bench", value, 1000000, &a->bench);
    case OPT_WARMUP: return parse_count("--warmup", value, 1000000, &a->warmup);
    case OPT_DEVICE: {
        errno = 0;
        long device = strtol(value, &end, 10);
        if (*end || end == value || errno || device < 0 || device > 1000000)
            return cli_usage_error("--device wants a CUDA device index (0, 1, ...; tcinfer "
                                   "--devices lists them), got '%s'",
                                   value);
        a->device = (int)device;
        a->device_given = true;
        return 0;
    }
    case OPT_THREADS:
        if (parse_count("--threads", value, 4096, &a->threads)) return EXIT_USAGE;
        return a->threads ? 0 : cli_usage_error("--threads wants 1 or more, got '%s'", value);
    case OPT_SHAPE: return add_shape(a, value, NULL);
    case OPT_SHAPES: return add_shapes(a, value);
    case OPT_OUTPUT_DIR: a->output_dir = value; return 0;
    case 'o': a->output_file = value; return 0;
    case OPT_BACKEND:
        if (strcmp(value, "cpu") == 0) a->backend = TCI_BACKEND_CPU;
        else if (strcmp(value, "gpu") == 0) a->backend = TCI_BACKEND_GPU;
        else return cli_usage_error("unknown backend '%s' (gpu or cpu)", value);
        return 0;
    case OPT_PRECISION:
        if (strcmp(value, "fp16") == 0) a->precision = TCI_PRECISION_FP16;
        else if (strcmp(value, "fp32") == 0) a->precision = TCI_PRECISION_FP32;
        else if (strcmp(value, "tf32") == 0) a->precision = TCI_PRECISION_TF32;
        else if (strcmp(value, "bf16") == 0) a->precision = TCI_PRECISION_BF16;
        else if (strcmp(value, "auto") == 0) a->precision = TCI_PRECISION_AUTO;
        else return cli_usage_error("unknown precision '%s' (fp16, bf16, tf32, fp32 or auto)",
                                    value);
        return 0;
    case OPT_KEEP_PRECISION:
        if (strcmp(value, "fp32") == 0) a->kept_precision = TCI_PRECISION_FP32;
        else if (strcmp(value, "tf32") == 0) a->kept_precision = TCI_PRECISION_TF32;
        else if (strcmp(value, "bf16") == 0) a->kept_precision = TCI_PRECISION_BF16;
        else return cli_usage_error("unknown --keep-precision '%s' (fp32, tf32 or bf16)", value);
        a->kept_given = true;
        return 0;
    case OPT_TIMING_CACHE: a->timing_cache = value; return 0;
    case OPT_LIMIT:
        if (!parse_limit(value, &a->limits))
            return cli_usage_error("--limit wants NAME=N with a known limit name, got '%s'", value);
        return 0;
    case OPT_SAVE_ENGINE: a->save_engine = value; return 0;
    case OPT_LOAD_ENGINE: a->load_engine = value; return 0;
    case OPT_KERNELS:
        if (strcmp(value, "auto") == 0) a->kernels = TCI_KERNELS_AUTO;
        else if (strcmp(value, "wmma") == 0) a->kernels = TCI_KERNELS_WMMA;
        else if (strcmp(value, "cudnn") == 0 || strcmp(value, "cublas") == 0)
            a->kernels = TCI_KERNELS_LIBRARY;
        else return cli_usage_error("unknown kernel family '%s' (auto, wmma or cudnn)", value);
        return 0;
    case OPT_BASELINE:
        a->baseline_given = true;
        if (strcmp(value, "cpu") == 0) a->baseline_gpu = false;
        else if (strcmp(value, "gpu-fp32") == 0) a->baseline_gpu = true;
        else return cli_usage_error("unknown baseline '%s' (cpu or gpu-fp32)", value);
        return 0;
    case OPT_FP32_LAYERS: {
        int n = 0;
        char *save = NULL;
        for (char *tok = strtok_r(value, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (n == MAX_FP32_LAYERS)
                return cli_usage_error("too many --fp32-layers (at most 4096)%s", "");
            a->fp32_layers[n++] = tok;
        }
        if (n == 0) return cli_usage_error("--fp32-layers wants names, got '%s'", value);
        a->fp32_layers[n] = NULL;
        a->fp32_text = value;
        return 0;
    }
    case OPT_RANDOM:
        errno = 0;
        a->seed = strtoull(value, &end, 10);
        if (*end || end == value || errno)
            return cli_usage_error("--random wants an integer seed, got '%s'", value);
        a->random = true;
        return 0;
    default: return cli_usage_error("unhandled option%s", "");
    }
}

/* The combinations that make no sense, refused before any work. */
static int check_combinations(cli_args *a) {
    if (!a->model && !a->load_engine) return cli_usage_error("no model given%s", "");
    if (a->load_engine &&
        (a->num_shapes || a->precision != TCI_PRECISION_FP16 || a->fp32_text || a->kept_given ||
         a->kernels != TCI_KERNELS_AUTO || a->timing_cache || a->compare || a->plan ||
         a->save_engine || a->backend == TCI_BACKEND_CPU))
        return cli_usage_error("--load-engine runs the engine as it was built: --shape, "
                               "--precision, --fp32-layers, --keep-precision, --kernels, "
                               "--timing-cache, "
                               "--compare (--reference), --plan, --save-engine and --backend cpu "
                               "do not go "
                               "with it%s", "");
    if (a->save_engine && (a->backend == TCI_BACKEND_CPU || a->plan || a->compare_layers))
        return cli_usage_error("--save-engine writes a GPU engine: not with --backend cpu, --plan "
                               "or --compare-layers%s", "");
    if (a->report && (a->info || a->plan || (a->save_engine && !a->num_inputs && !a->random)))
        return cli_usage_error("--report describes a run: not with --info, --plan or "
                               "--save-engine without inputs%s", "");
    if (a->random && a->num_inputs)
        return cli_usage_error("give either input files or --random%s", "");
    if (a->tolerance >= 0 && !a->compare)
        return cli_usage_error("--tolerance goes with --compare%s", "");
    if ((a->atol >= 0 || a->rtol >= 0) && !a->compare)
        return cli_usage_error("--atol and --rtol go with --compare (or --reference)%s", "");
    if ((a->atol >= 0 || a->rtol >= 0) && a->compare_layers)
        return cli_usage_error("--atol and --rtol bound the outputs; --compare-layers flags "
                               "layers by relative L2 (--tolerance)%s", "");
    if (a->num_references && a->compare_layers)
        return cli_usage_error("--compare-layers needs every layer of a baseline run here; "
                               "saved outputs (--reference) have only the outputs%s", "");
    if (a->num_references && a->baseline_given)
        return cli_usage_error("--baseline and --reference both choose the baseline; give "
                               "one%s", "");
    if (a->compare && !a->num_references && a->backend == TCI_BACKEND_CPU)
        return cli_compare_needs_gpu();
    if (a->baseline_given && !a->compare)
        return cli_usage_error("--baseline goes with --compare%s", "");
    if (a->accuracy_target > 0 && a->precision != TCI_PRECISION_AUTO)
        return cli_usage_error("--accuracy-target is the goal of --precision auto's search; give "
                               "both%s", "");
    if (a->precision == TCI_PRECISION_AUTO && (a->backend == TCI_BACKEND_CPU || a->plan))
        return cli_usage_error("--precision auto builds and runs the fp16 and fp32 GPU engines to "
                               "choose the fp32 layers: not with --backend cpu or --plan%s", "");
    if (a->kept_given && a->precision != TCI_PRECISION_FP16 && a->precision != TCI_PRECISION_AUTO)
        return cli_usage_error("--keep-precision sets the precision of the layers an fp16 engine "
                               "keeps (--fp32-layers, --precision auto); not with --precision "
                               "%s", cli_precision_name(a->precision));
    if (a->kept_given && !a->fp32_text && a->precision != TCI_PRECISION_AUTO)
        return cli_usage_error("--keep-precision sets the precision of the kept layers: give "
                               "--fp32-layers or --precision auto with it%s", "");
    if (a->kept_precision == TCI_PRECISION_BF16 && a->accuracy_target > 0)
        return cli_usage_error("--keep-precision bf16 holds fp32's range with less precision "
                               "than fp16: it fixes overflow, not accuracy; --accuracy-target "
                               "wants --keep-precision fp32 or tf32%s", "");
    if ((a->fp32_text || a->kept_given || a->precision != TCI_PRECISION_FP16) &&
        a->backend == TCI_BACKEND_CPU)
        return cli_usage_error("--precision, --fp32-layers and --keep-precision set the GPU "
                               "engine; the CPU backend is fp32 already%s", "");
    if (a->device_given && (a->backend == TCI_BACKEND_CPU || a->plan))
        return cli_usage_error("--device picks the GPU to run on: not with --backend cpu, nor "
                               "with --plan, which builds the plan without a GPU%s", "");
    if (a->threads && a->backend == TCI_BACKEND_GPU && !a->compare)
        return cli_usage_error("--threads sets the CPU backend's threads; not with --backend "
                               "gpu%s", "");
    return 0;
}

int cli_parse_args(int argc, char **argv, cli_args *a) {
    memset(a, 0, sizeof *a);
    a->backend = -1;
    a->tolerance = -1;
    a->atol = a->rtol = -1;
    a->warmup = 10;
    a->kept_precision = TCI_PRECISION_FP32;
    struct option long_options[NUM_OPTIONS + 1];
    char short_options[2 * NUM_OPTIONS + 2] = ":";
    int n = 0;
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const cli_option *o = &options[i];
        if (!o->name) continue;
        int has_arg = optional_value(o) ? optional_argument
                      : o->value  ? required_argument
                                  : no_argument;
        long_options[n++] = (struct option){o->name, has_arg, NULL, o->id};
        if (o->id < 256) {
            size_t len = strlen(short_options);
            short_options[len] = (char)o->id;
            short_options[len + 1] = o->value ? ':' : '\0';
            short_options[len + 2] = '\0';
        }
    }
    long_options[n] = (struct option){NULL, 0, NULL, 0};
    opterr = 0; /* its messages are ours */
    optind = 1;
    int id;
    while ((id = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
        const char *arg = argv[optind - 1];
        if (id == '?') {
            if (optopt && optopt < 256 && arg[0] == '-' && arg[1] != '-') {
                char shown[3] = {'-', (char)optopt, '\0'};
                return cli_usage_error("unknown option '%s'", shown);
            }
            return cli_usage_error("unknown option '%s'", arg);
        }
        if (id == ':') return cli_usage_error("%s needs a value", arg);
        int rc = apply_option(a, id, optarg);
        if (rc) return rc;
    }
    for (int i = optind; i < argc; i++) {
        if (a->num_inputs == MAX_ITEMS + 1) return cli_usage_error("too many inputs%s", "");
        a->inputs[a->num_inputs++].path = argv[i];
    }
    if (a->list_ops) return 0;
    /* positional arguments: MODEL.onnx (unless --load-engine) and the inputs, NAME=FILE or FILE */
    if (!a->load_engine && a->num_inputs) {
        a->model = a->inputs[0].path;
        memmove(a->inputs, a->inputs + 1, (size_t)--a->num_inputs * sizeof *a->inputs);
    }
    if (a->num_inputs > MAX_ITEMS) return cli_usage_error("too many inputs%s", "");
    for (int k = 0; k < a->num_inputs; k++) {
        char *eq = strchr(a->inputs[k].path, '=');
        if (!eq) continue;
        *eq = '\0';
        a->inputs[k].name = a->inputs[k].path;
        a->inputs[k].path = eq + 1;
    }
    return check_combinations(a);
}

void cli_free_args(cli_args *a) {
    for (int i = 0; i < a->num_shapes; i++) free(a->shape_names[i]);
    a->num_shapes = 0;
}
