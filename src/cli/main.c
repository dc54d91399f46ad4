/* tcinfer: the command line. Argument parsing, input files and reports only; all work goes
 * through the public API in tcinfer.h. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tcinfer.h"

enum { EXIT_USAGE = 2, EXIT_UNSUPPORTED = 3, MAX_ITEMS = 64 };

typedef struct cli_input {
    const char *name; /* NULL: the first input */
    const char *path;
} cli_input;

typedef struct cli_args {
    const char *model;
    cli_input inputs[MAX_ITEMS + 1];
    int num_inputs;
    tci_shape_override shapes[MAX_ITEMS];
    char *shape_names[MAX_ITEMS];
    int num_shapes;
    const char *output_file;
    const char *output_dir;
    bool quiet, info, list_ops, random, compare, compare_layers, no_graph, plan;
    uint64_t seed;
    int backend; /* -1: GPU where one exists, else CPU */
    double tolerance; /* < 0: none */
    int bench, warmup;
    const char *profile;
    tci_precision precision;
    tci_kernels kernels;
    const char *timing_cache;
    const char *save_engine, *load_engine;
    bool baseline_gpu;       /* --baseline gpu-fp32 */
    char *fp32_text;         /* --fp32-layers value, split in place into fp32_layers */
    tci_engine_options limits; /* --limit: only its limit fields are used */
    const char *fp32_layers[MAX_ITEMS + 1];
} cli_args;

static const char usage_text[] =
    "usage: tcinfer [options] MODEL.onnx [INPUT...]\n"
    "       tcinfer [options] --load-engine PLAN.tci [INPUT...]\n"
    "\n"
    "Runs an ONNX model. INPUT is FILE (feeds the first input) or NAME=FILE; FILE is .npy,\n"
    ".pb (ONNX TensorProto), or raw little-endian data in the input's dtype (fp32 for float)\n"
    "whose shape comes from the model or --shape.\n"
    "\n"
    "options:\n"
    "  --shape NAME:DxDx...  fix the shape of input NAME (symbolic dims such as the batch)\n"
    "  -o, --output FILE     write output 0 to FILE (.npy, or raw data for other extensions)\n"
    "  --output-dir DIR      write every output i to DIR/output_<i>.npy\n"
    "  --backend gpu|cpu     fp16 tensor-core GPU engine (the default where a GPU exists)\n"
    "                        or the fp32 CPU reference executor\n"
    "  --compare             run the GPU engine and the fp32 baseline on the same input and\n"
    "                        print max/mean abs error, relative L2, cosine, top-1/top-5\n"
    "  --baseline cpu|gpu-fp32  the --compare baseline: the fp32 CPU reference (default) or\n"
    "                        the GPU engine in fp32 with tensor-op math off\n"
    "  --precision fp16|bf16|tf32|fp32  GPU float tensors: fp16 (default), bfloat16 (fp32's\n"
    "                        range, fewer mantissa bits), fp32 with TF32 tensor cores, or fp32\n"
    "                        with tensor-op math off\n"
    "  --fp32-layers A,B     GPU: keep these nodes in fp32 (node names, op types, or patterns\n"
    "                        such as '/layer1/*'), against fp16 overflow or rounding\n"
    "  --kernels auto|wmma|cudnn  GPU convolutions and GEMMs: per layer the faster of tcinfer's\n"
    "                        WMMA kernels and cuDNN / cuBLASLt (auto, default), or one family\n"
    "  --timing-cache FILE   GPU: reuse and record the per-layer kernel choices (no timing for\n"
    "                        layers the file holds for this GPU and these library versions)\n"
    "  --save-engine FILE    GPU: write the built engine (optimised graph, fp16 weights, kernel\n"
    "                        choices) to FILE; without inputs, build, save and exit\n"
    "  --load-engine FILE    GPU: run an engine file instead of MODEL.onnx, without tuning;\n"
    "                        shapes, precision and kernels come from the file\n"
    "  --tolerance X         with --compare: exit 1 when a relative L2 error exceeds X\n"
    "  --compare-layers      --compare for every layer's output (unfused), naming the first\n"
    "                        layer whose error jumps (past --tolerance, default 1e-2)\n"
    "  --bench N             time N runs (after --warmup W, default 10): median/p90/p99\n"
    "  --warmup W            untimed runs before --bench\n"
    "  --profile FILE        per-layer GPU times: a table sorted by time and a Chrome trace\n"
    "  --no-graph            GPU: launch the steps one by one instead of a CUDA graph\n"
    "  --plan                describe the GPU plan (fusion, layouts, memory) and exit; needs\n"
    "                        no GPU\n"
    "  --random SEED         feed seeded uniform [-1,1) random inputs instead of files\n"
    "  --limit NAME=N        a limit against hostile models (0: the default): max_model_bytes,\n"
    "                        max_tensor_elements, max_constant_bytes, max_nodes,\n"
    "                        max_nesting_depth, max_parse_bytes (docs/robustness.md)\n"
    "  --quiet               no report of the outputs\n"
    "  --info                describe the model (inputs, outputs, ops, parameters) and exit\n"
    "  --list-ops            list the supported ops, opsets and backends and exit\n"
    "  --devices             print the number of usable CUDA GPUs and exit\n"
    "  --version             print the version and exit\n"
    "  -h, --help            this text\n"
    "\n"
    "exit status: 0 ok, 1 failure, 2 usage error, 3 the model uses something unsupported\n";

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "tcinfer: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(tcinfer --help shows the usage)\n");
    return EXIT_USAGE;
}

static int fail(tci_status st) {
    fprintf(stderr, "tcinfer: %s\n", tci_last_error()[0] ? tci_last_error() : tci_status_string(st));
    return st == TCI_ERR_UNSUPPORTED ? EXIT_UNSUPPORTED : EXIT_FAILURE;
}

/* "name:1x3x224x224"; text is left intact so errors can quote it */
static bool parse_shape(char *text, tci_shape_override *o, char **name_out) {
    char *colon = strrchr(text, ':');
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
    else return false;
#undef LIMIT_IS
    return true;
}

static int parse_args(int argc, char **argv, cli_args *a) {
    memset(a, 0, sizeof *a);
    a->backend = -1;
    a->tolerance = -1;
    a->warmup = 10;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(usage_text, stdout);
            exit(0);
        } else if (strcmp(arg, "--version") == 0) {
            printf("tcinfer %s\n", tci_version());
            exit(0);
        } else if (strcmp(arg, "--devices") == 0) {
            char name[256];
            int n = tci_gpu_count(name, sizeof name);
            printf("GPUs: %d", n);
            if (n) printf(" (device 0: %s)", name);
            printf("\n");
            exit(0);
        } else if (strcmp(arg, "--quiet") == 0) {
            a->quiet = true;
        } else if (strcmp(arg, "--info") == 0) {
            a->info = true;
        } else if (strcmp(arg, "--list-ops") == 0) {
            a->list_ops = true;
        } else if (strcmp(arg, "--compare") == 0) {
            a->compare = true;
        } else if (strcmp(arg, "--compare-layers") == 0) {
            a->compare = a->compare_layers = true;
        } else if (strcmp(arg, "--no-graph") == 0) {
            a->no_graph = true;
        } else if (strcmp(arg, "--plan") == 0) {
            a->plan = true;
        } else if (strcmp(arg, "--limit") == 0) {
            if (!has_value) return usage_error("%s needs a value", arg);
            if (!parse_limit(argv[++i], &a->limits))
                return usage_error("--limit wants NAME=N with a known limit name, got '%s'", argv[i]);
        } else if (strcmp(arg, "--tolerance") == 0 || strcmp(arg, "--bench") == 0 ||
                   strcmp(arg, "--warmup") == 0 || strcmp(arg, "--profile") == 0) {
            if (!has_value) return usage_error("%s needs a value", arg);
            char *value = argv[++i], *end;
            errno = 0;
            if (strcmp(arg, "--profile") == 0) {
                a->profile = value;
            } else if (strcmp(arg, "--tolerance") == 0) {
                a->tolerance = strtod(value, &end);
                if (*end || end == value || errno || a->tolerance < 0)
                    return usage_error("--tolerance wants a non-negative number, got '%s'", value);
            } else {
                long v = strtol(value, &end, 10);
                if (*end || end == value || errno || v < 0 || v > 1000000)
                    return usage_error("--bench and --warmup want a count, got '%s'", value);
                if (strcmp(arg, "--bench") == 0) a->bench = (int)v;
                else a->warmup = (int)v;
            }
        } else if (strcmp(arg, "--shape") == 0 || strcmp(arg, "-o") == 0 ||
                   strcmp(arg, "--output") == 0 || strcmp(arg, "--output-dir") == 0 ||
                   strcmp(arg, "--backend") == 0 || strcmp(arg, "--random") == 0 ||
                   strcmp(arg, "--precision") == 0 || strcmp(arg, "--baseline") == 0 ||
                   strcmp(arg, "--fp32-layers") == 0 || strcmp(arg, "--kernels") == 0 ||
                   strcmp(arg, "--timing-cache") == 0 || strcmp(arg, "--save-engine") == 0 ||
                   strcmp(arg, "--load-engine") == 0) {
            if (!has_value) return usage_error("%s needs a value", arg);
            char *value = argv[++i];
            if (strcmp(arg, "--shape") == 0) {
                if (a->num_shapes == MAX_ITEMS) return usage_error("too many %s", arg);
                tci_shape_override *o = &a->shapes[a->num_shapes];
                if (!parse_shape(value, o, &a->shape_names[a->num_shapes]))
                    return usage_error("--shape wants NAME:DxDx..., got '%s'", value);
                a->num_shapes++;
            } else if (strcmp(arg, "--output-dir") == 0) {
                a->output_dir = value;
            } else if (strcmp(arg, "--backend") == 0) {
                if (strcmp(value, "cpu") == 0) a->backend = TCI_BACKEND_CPU;
                else if (strcmp(value, "gpu") == 0) a->backend = TCI_BACKEND_GPU;
                else return usage_error("unknown backend '%s' (gpu or cpu)", value);
            } else if (strcmp(arg, "--precision") == 0) {
                if (strcmp(value, "fp16") == 0) a->precision = TCI_PRECISION_FP16;
                else if (strcmp(value, "fp32") == 0) a->precision = TCI_PRECISION_FP32;
                else if (strcmp(value, "tf32") == 0) a->precision = TCI_PRECISION_TF32;
                else if (strcmp(value, "bf16") == 0) a->precision = TCI_PRECISION_BF16;
                else return usage_error("unknown precision '%s' (fp16, bf16, tf32 or fp32)", value);
            } else if (strcmp(arg, "--timing-cache") == 0) {
                a->timing_cache = value;
            } else if (strcmp(arg, "--save-engine") == 0) {
                a->save_engine = value;
            } else if (strcmp(arg, "--load-engine") == 0) {
                a->load_engine = value;
            } else if (strcmp(arg, "--kernels") == 0) {
                if (strcmp(value, "auto") == 0) a->kernels = TCI_KERNELS_AUTO;
                else if (strcmp(value, "wmma") == 0) a->kernels = TCI_KERNELS_WMMA;
                else if (strcmp(value, "cudnn") == 0 || strcmp(value, "cublas") == 0)
                    a->kernels = TCI_KERNELS_LIBRARY;
                else return usage_error("unknown kernel family '%s' (auto, wmma or cudnn)", value);
            } else if (strcmp(arg, "--baseline") == 0) {
                if (strcmp(value, "cpu") == 0) a->baseline_gpu = false;
                else if (strcmp(value, "gpu-fp32") == 0) a->baseline_gpu = true;
                else return usage_error("unknown baseline '%s' (cpu or gpu-fp32)", value);
            } else if (strcmp(arg, "--fp32-layers") == 0) {
                int n = 0;
                for (char *tok = strtok(value, ","); tok; tok = strtok(NULL, ",")) {
                    if (n == MAX_ITEMS) return usage_error("too many %s", arg);
                    a->fp32_layers[n++] = tok;
                }
                if (n == 0) return usage_error("--fp32-layers wants names, got '%s'", value);
                a->fp32_layers[n] = NULL;
                a->fp32_text = value;
            } else if (strcmp(arg, "--random") == 0) {
                char *end;
                errno = 0;
                a->seed = strtoull(value, &end, 10);
                if (*end || end == value || errno)
                    return usage_error("--random wants an integer seed, got '%s'", value);
                a->random = true;
            } else {
                a->output_file = value;
            }
        } else if (arg[0] == '-' && arg[1]) {
            return usage_error("unknown option '%s'", arg);
        } else {
            if (a->num_inputs == MAX_ITEMS + 1) return usage_error("too many inputs%s", "");
            a->inputs[a->num_inputs++].path = argv[i];
        }
    }
    if (a->list_ops) return 0;
    /* positional arguments: MODEL.onnx (unless --load-engine) and the inputs, NAME=FILE or FILE */
    if (!a->load_engine && a->num_inputs) {
        a->model = a->inputs[0].path;
        memmove(a->inputs, a->inputs + 1, (size_t)--a->num_inputs * sizeof *a->inputs);
    }
    if (a->num_inputs > MAX_ITEMS) return usage_error("too many inputs%s", "");
    for (int k = 0; k < a->num_inputs; k++) {
        char *eq = strchr(a->inputs[k].path, '=');
        if (!eq) continue;
        *eq = '\0';
        a->inputs[k].name = a->inputs[k].path;
        a->inputs[k].path = eq + 1;
    }
    if (!a->model && !a->load_engine) return usage_error("no model given%s", "");
    if (a->load_engine &&
        (a->num_shapes || a->precision != TCI_PRECISION_FP16 || a->fp32_text ||
         a->kernels != TCI_KERNELS_AUTO || a->timing_cache || a->compare || a->plan ||
         a->save_engine || a->backend == TCI_BACKEND_CPU))
        return usage_error("--load-engine runs the engine as it was built: --shape, --precision, "
                           "--fp32-layers, --kernels, --timing-cache, --compare, --plan, "
                           "--save-engine and --backend cpu do not go with it%s", "");
    if (a->save_engine && (a->backend == TCI_BACKEND_CPU || a->plan || a->compare_layers))
        return usage_error("--save-engine writes a GPU engine: not with --backend cpu, --plan or "
                           "--compare-layers%s", "");
    if (a->random && a->num_inputs)
        return usage_error("give either input files or --random%s", "");
    if (a->tolerance >= 0 && !a->compare) return usage_error("--tolerance goes with --compare%s", "");
    if (a->compare && a->backend == TCI_BACKEND_CPU)
        return usage_error("--compare measures the GPU engine against the CPU baseline; drop "
                           "--backend cpu%s", "");
    if (a->baseline_gpu && !a->compare) return usage_error("--baseline goes with --compare%s", "");
    if ((a->fp32_text || a->precision != TCI_PRECISION_FP16) && a->backend == TCI_BACKEND_CPU)
        return usage_error("--precision and --fp32-layers set the GPU engine; the CPU backend "
                           "is fp32 already%s", "");
    return 0;
}

static void print_op(const char *op_type, int min_opset, int max_opset, int has_gpu,
                     void *user) {
    (void)user;
    printf("%s %d-%d %s\n", op_type, min_opset, max_opset, has_gpu ? "cpu,gpu" : "cpu");
}

static const char *format_info_dims(const tci_tensor_info *info, char *buf, size_t size) {
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
    memset(&info, 0, sizeof info);
    info.rank = t->rank;
    for (int i = 0; i < t->rank; i++) info.dims[i] = t->dims[i];
    return format_info_dims(&info, buf, size);
}

static void print_histogram_entry(const char *op_type, size_t count, void *user) {
    (void)user;
    printf("    %-24s %zu\n", op_type, count);
}

static void print_info(const tci_engine *engine) {
    char dims[256];
    tci_tensor_info info;
    printf("inputs:\n");
    for (size_t i = 0; i < tci_engine_input_count(engine); i++) {
        tci_engine_input_info(engine, i, &info);
        printf("  %-24s %-8s %s\n", info.name, tci_dtype_name(info.dtype),
               format_info_dims(&info, dims, sizeof dims));
    }
    printf("outputs:\n");
    for (size_t i = 0; i < tci_engine_output_count(engine); i++) {
        tci_engine_output_info(engine, i, &info);
        printf("  %-24s %-8s %s\n", info.name, tci_dtype_name(info.dtype),
               format_info_dims(&info, dims, sizeof dims));
    }
    tci_engine_stats stats;
    tci_engine_stats_get(engine, &stats);
    printf("nodes after optimisation: %zu\n", stats.num_nodes);
    printf("ops:\n");
    tci_engine_op_histogram(engine, print_histogram_entry, NULL);
    printf("parameters: %" PRId64 " (%zu constant tensors, %.2f MB)\n", stats.num_parameters,
           stats.num_initializers, (double)stats.parameter_bytes / 1e6);
}

/* splitmix64: seeded, portable random inputs */
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static tci_status make_random(const tci_tensor_info *info, uint64_t *state, tci_tensor *t) {
    memset(t, 0, sizeof *t);
    t->dtype = info->dtype;
    t->rank = info->rank;
    for (int i = 0; i < info->rank; i++) {
        if (info->dims[i] < 0) {
            fprintf(stderr, "tcinfer: note: input '%s' dim %d (%s) set to 1; use --shape to choose\n",
                    info->name, i, info->dim_names[i] ? info->dim_names[i] : "?");
        }
        t->dims[i] = info->dims[i] < 0 ? 1 : info->dims[i];
    }
    int64_t count = tci_tensor_count(t);
    t->data = malloc((size_t)count * tci_dtype_size(t->dtype) + 1);
    if (!t->data) return TCI_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < count; i++) {
        double u = (double)(next_random(state) >> 11) / 9007199254740992.0; /* [0,1) */
        switch (t->dtype) {
        case TCI_DTYPE_FLOAT: ((float *)t->data)[i] = (float)(2 * u - 1); break;
        case TCI_DTYPE_DOUBLE: ((double *)t->data)[i] = 2 * u - 1; break;
        case TCI_DTYPE_INT64: ((int64_t *)t->data)[i] = (int64_t)(u * 10); break;
        case TCI_DTYPE_INT32: ((int32_t *)t->data)[i] = (int32_t)(u * 10); break;
        case TCI_DTYPE_BOOL: ((uint8_t *)t->data)[i] = u < 0.5; break;
        case TCI_DTYPE_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)(u * 256); break;
        case TCI_DTYPE_INT8: ((int8_t *)t->data)[i] = (int8_t)(u * 256 - 128); break;
        default: memset(t->data, 0, (size_t)count * tci_dtype_size(t->dtype)); i = count; break;
        }
    }
    return TCI_OK;
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Raw little-endian data in the input's dtype; the shape must be fully known. */
static tci_status read_raw(const char *path, const tci_tensor_info *info, tci_tensor *t) {
    char dims[256];
    memset(t, 0, sizeof *t);
    t->dtype = info->dtype;
    t->rank = info->rank;
    for (int i = 0; i < info->rank; i++) {
        if (info->dims[i] < 0) {
            fprintf(stderr,
                    "tcinfer: input '%s' has shape %s with symbolic dims; a raw file needs "
                    "--shape %s:... (or use .npy / .pb)\n",
                    info->name, format_info_dims(info, dims, sizeof dims), info->name);
            return TCI_ERR_INVALID_ARGUMENT;
        }
        t->dims[i] = info->dims[i];
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tcinfer: cannot open '%s': %s\n", path, strerror(errno));
        return TCI_ERR_IO;
    }
    struct stat st;
    long long got = fstat(fileno(f), &st) == 0 ? (long long)st.st_size : -1;
    long long want = (long long)tci_tensor_count(t) * (long long)tci_dtype_size(t->dtype);
    if (got != want) {
        fprintf(stderr,
                "tcinfer: input '%s': '%s' has %lld bytes, expected %lld bytes (shape %s, %s)\n",
                info->name, path, got, want, format_info_dims(info, dims, sizeof dims),
                tci_dtype_name(info->dtype));
        fclose(f);
        return TCI_ERR_INVALID_ARGUMENT;
    }
    t->data = malloc((size_t)want + 1);
    bool ok = t->data && fread(t->data, 1, (size_t)want, f) == (size_t)want;
    fclose(f);
    if (!ok) {
        fprintf(stderr, "tcinfer: error reading '%s'\n", path);
        return TCI_ERR_IO;
    }
    return TCI_OK;
}

static int load_inputs(const cli_args *a, const tci_engine *engine, tci_tensor *tensors) {
    size_t n = tci_engine_input_count(engine);
    uint64_t state = a->seed;
    bool given[MAX_ITEMS] = {false};
    if (n > MAX_ITEMS) {
        fprintf(stderr, "tcinfer: the model has %zu inputs; at most %d are supported here\n", n,
                MAX_ITEMS);
        return EXIT_FAILURE;
    }
    for (int k = 0; k < a->num_inputs; k++) {
        const cli_input *in = &a->inputs[k];
        size_t index = n;
        tci_tensor_info info;
        if (!in->name) {
            if (k != 0 || a->num_inputs != 1) {
                fprintf(stderr, "tcinfer: with several inputs, name each one: NAME=FILE\n");
                return EXIT_USAGE;
            }
            index = 0;
        } else {
            for (size_t i = 0; i < n; i++) {
                tci_engine_input_info(engine, i, &info);
                if (strcmp(info.name, in->name) == 0) index = i;
            }
        }
        if (index >= n) {
            fprintf(stderr, "tcinfer: the model has no input named '%s'\n",
                    in->name ? in->name : "(first)");
            return EXIT_USAGE;
        }
        tci_engine_input_info(engine, index, &info);
        tci_status st;
        if (has_suffix(in->path, ".npy") || has_suffix(in->path, ".pb")) {
            st = tci_tensor_read_file(in->path, &tensors[index]);
            if (st != TCI_OK) return fail(st);
        } else {
            st = read_raw(in->path, &info, &tensors[index]);
            if (st != TCI_OK) return EXIT_FAILURE;
        }
        given[index] = true;
    }
    for (size_t i = 0; i < n; i++) {
        if (given[i]) continue;
        tci_tensor_info info;
        tci_engine_input_info(engine, i, &info);
        if (!a->random) {
            fprintf(stderr, "tcinfer: no data for input '%s' (give NAME=FILE or --random SEED)\n",
                    info.name);
            return EXIT_USAGE;
        }
        if (make_random(&info, &state, &tensors[i]) != TCI_OK) {
            fprintf(stderr, "tcinfer: out of memory\n");
            return EXIT_FAILURE;
        }
    }
    return 0;
}

/* Top-5 classes of each row of an NxC float output. */
static void print_top5(const tci_tensor *t) {
    int64_t rows = t->dims[0], cols = t->dims[1];
    const float *p = t->data;
    for (int64_t r = 0; r < rows && r < 8; r++) {
        const float *row = p + r * cols;
        int64_t best[5];
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
        printf("  row %" PRId64 " top-5:", r);
        for (int k = 0; k < nb; k++) printf("  class %" PRId64 " (%.4f)", best[k], (double)row[best[k]]);
        printf("\n");
    }
    if (rows > 8) printf("  ... %" PRId64 " more rows\n", rows - 8);
}

static void print_summary(const tci_tensor *t) {
    char dims[256];
    printf("output '%s': %s %s\n", t->name, tci_dtype_name(t->dtype), format_dims(t, dims, sizeof dims));
    if (t->dtype == TCI_DTYPE_FLOAT && t->rank == 2 && t->dims[1] > 1 && t->dims[0] > 0) {
        print_top5(t);
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
    if (n) printf("  min %.6g  max %.6g  mean %.6g\n", mn, mx, sum / (double)n);
}

static int write_outputs(const cli_args *a, const tci_context *ctx, size_t num_outputs) {
    if (a->output_file) {
        if (num_outputs != 1 && has_suffix(a->output_file, ".npy"))
            fprintf(stderr, "tcinfer: note: the model has %zu outputs; -o writes output 0 "
                            "(--output-dir writes all)\n", num_outputs);
        tci_tensor t;
        tci_context_output(ctx, 0, &t);
        if (has_suffix(a->output_file, ".npy")) {
            tci_status st = tci_tensor_write_npy(a->output_file, &t);
            if (st != TCI_OK) return fail(st);
        } else {
            FILE *f = fopen(a->output_file, "wb");
            size_t bytes = (size_t)tci_tensor_count(&t) * tci_dtype_size(t.dtype);
            bool ok = f && fwrite(t.data, 1, bytes, f) == bytes;
            if (f && fclose(f) != 0) ok = false;
            if (!ok) {
                fprintf(stderr, "tcinfer: cannot write '%s'\n", a->output_file);
                return EXIT_FAILURE;
            }
        }
    }
    if (a->output_dir) {
        mkdir(a->output_dir, 0777);
        for (size_t i = 0; i < num_outputs; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/output_%zu.npy", a->output_dir, i);
            tci_tensor t;
            tci_context_output(ctx, i, &t);
            tci_status st = tci_tensor_write_npy(path, &t);
            if (st != TCI_OK) return fail(st);
        }
    }
    return 0;
}

static void print_layer(size_t index, const char *node, const char *fused_ops, const char *kernel,
                        const char *layout, void *user) {
    (void)user;
    printf("  %4zu  %-28s %-40s %-10s %s\n", index, node, fused_ops, layout, kernel);
}

/* choices_from: where choices not timed came from ("timing cache", "engine file") */
static void print_gpu_info(const tci_engine *engine, const char *choices_from) {
    tci_gpu_report r;
    if (tci_engine_gpu_report(engine, &r) != TCI_OK) return;
    printf("GPU plan: %zu steps, %zu layout conversions\n", r.num_steps, r.layout_conversions);
    printf("  weights on the device: %.2f MB\n", (double)r.weight_bytes / 1e6);
    printf("  activation arena: %.2f MB (naive sum of activations %.2f MB, %.1f%%)\n",
           (double)r.arena_bytes / 1e6, (double)r.naive_activation_bytes / 1e6,
           r.naive_activation_bytes ? 100.0 * (double)r.arena_bytes / (double)r.naive_activation_bytes : 100.0);
    if (r.layers_timed || r.layers_cached)
        printf("  kernel choices: %zu layers timed, %zu from the %s\n", r.layers_timed,
               r.layers_cached, choices_from);
    printf("  step  node                         fused ops                                output     kernel\n");
    tci_engine_layers(engine, print_layer, NULL);
}

static int compare_floats(const void *x, const void *y) {
    float a = *(const float *)x, b = *(const float *)y;
    return a < b ? -1 : a > b;
}

static int run_bench(const cli_args *a, tci_context *ctx, const tci_tensor *inputs) {
    float *ms = calloc((size_t)a->bench, sizeof(float));
    if (!ms) return EXIT_FAILURE;
    tci_status st = tci_context_benchmark(ctx, a->bench, a->warmup, ms);
    if (st != TCI_OK) {
        free(ms);
        return fail(st);
    }
    qsort(ms, (size_t)a->bench, sizeof(float), compare_floats);
    int n = a->bench;
    double median = ms[n / 2], p90 = ms[(int)(0.9 * (n - 1))], p99 = ms[(int)(0.99 * (n - 1))];
    int64_t batch = inputs[0].rank > 0 ? inputs[0].dims[0] : 1;
    printf("bench: %d runs after %d warm-up: median %.3f ms, p90 %.3f ms, p99 %.3f ms, "
           "throughput %.1f/s (batch %lld)\n",
           n, a->warmup, median, p90, p99, median > 0 ? 1000.0 * (double)batch / median : 0.0,
           (long long)batch);
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

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

static int run_profile(const cli_args *a, tci_context *ctx) {
    profile_table t = {0};
    tci_status st = tci_context_profile(ctx, 20, collect_profile, &t);
    if (st != TCI_OK) {
        free(t.rows);
        return fail(st);
    }
    FILE *f = fopen(a->profile, "w");
    if (!f) {
        fprintf(stderr, "tcinfer: cannot write '%s': %s\n", a->profile, strerror(errno));
        free(t.rows);
        return EXIT_FAILURE;
    }
    /* Chrome trace: steps laid end to end in execution order, median times */
    fprintf(f, "{\"traceEvents\": [\n");
    double ts = 0, total = 0;
    for (size_t i = 0; i < t.count; i++) {
        const profile_row *r = &t.rows[i];
        fprintf(f, "%s  {\"name\": ", i ? ",\n" : "");
        json_string(f, r->fused);
        fprintf(f, ", \"cat\": \"layer\", \"ph\": \"X\", \"pid\": 0, \"tid\": 0, \"ts\": %.3f, "
                   "\"dur\": %.3f, \"args\": {\"node\": ", ts, r->ms * 1000.0);
        json_string(f, r->node);
        fprintf(f, ", \"kernel\": ");
        json_string(f, r->kernel);
        fprintf(f, "}}");
        ts += r->ms * 1000.0;
        total += r->ms;
    }
    fprintf(f, "\n], \"displayTimeUnit\": \"ms\"}\n");
    bool ok = fclose(f) == 0;
    qsort(t.rows, t.count, sizeof *t.rows, by_time);
    printf("profile: %zu steps, %.3f ms in total (median of 20 step-by-step runs); trace in %s\n",
           t.count, total, a->profile);
    printf("  %8s %6s  %-5s %-28s %-40s %s\n", "ms", "%", "step", "node", "fused ops", "kernel");
    for (size_t i = 0; i < t.count; i++) {
        const profile_row *r = &t.rows[i];
        printf("  %8.4f %5.1f%%  %-5zu %-28s %-40s %s\n", r->ms, total > 0 ? 100.0 * r->ms / total : 0,
               r->index, r->node, r->fused, r->kernel);
    }
    free(t.rows);
    if (!ok) {
        fprintf(stderr, "tcinfer: error writing '%s'\n", a->profile);
        return EXIT_FAILURE;
    }
    return 0;
}

/* The fp32 baseline (--baseline) built and run on the same inputs. */
static tci_status run_baseline(const cli_args *a, bool all_outputs, const tci_tensor *inputs,
                               size_t num_inputs, tci_engine **out_engine,
                               tci_context **out_context) {
    tci_engine_options options;
    tci_engine_options_init(&options);
    options.shapes = a->shapes;
    options.num_shapes = (size_t)a->num_shapes;
    options.backend = a->baseline_gpu ? TCI_BACKEND_GPU : TCI_BACKEND_CPU;
    options.precision = TCI_PRECISION_FP32;
    options.mark_all_outputs = all_outputs;
    *out_context = NULL;
    tci_status st = tci_engine_create_from_file(a->model, &options, out_engine);
    if (st == TCI_OK) st = tci_context_create(*out_engine, out_context);
    if (st == TCI_OK) st = tci_context_run(*out_context, inputs, num_inputs);
    return st;
}

/* NaN or Inf in the outputs: where they first appeared and whether the fp32 reference has them
 * too. An fp16/bf16 overflow (the reference finite) is an error with the fix to try. */
static int check_nonfinite(const cli_args *a, tci_context *ctx, const tci_tensor *inputs,
                           size_t num_inputs) {
    tci_nonfinite_report r;
    tci_status st = tci_context_nonfinite(ctx, &r);
    if (st != TCI_OK) return fail(st);
    if (!r.count) return 0;
    tci_tensor out;
    tci_context_output(ctx, r.output_index, &out);
    if (a->backend != TCI_BACKEND_GPU) {
        fprintf(stderr, "tcinfer: note: the outputs hold %llu NaN/Inf values (first in '%s')\n",
                (unsigned long long)r.count, out.name);
        return 0;
    }
    char where[512] = "no layer of the re-run produced them";
    if (r.input_index >= 0)
        snprintf(where, sizeof where, "engine input %ld already holds NaN/Inf", r.input_index);
    else if (r.found)
        snprintf(where, sizeof where, "they first appear in the output of layer '%s' (%s)",
                 r.layer, r.op_type);
    tci_engine *ref_engine = NULL;
    tci_context *ref = NULL;
    tci_nonfinite_report rr;
    st = run_baseline(a, false, inputs, num_inputs, &ref_engine, &ref);
    if (st == TCI_OK) st = tci_context_nonfinite(ref, &rr);
    tci_context_destroy(ref);
    tci_engine_destroy(ref_engine);
    if (st != TCI_OK) return fail(st);
    const char *precision = a->precision == TCI_PRECISION_BF16   ? "bf16"
                            : a->precision == TCI_PRECISION_FP32 ? "fp32"
                            : a->precision == TCI_PRECISION_TF32 ? "tf32"
                                                                 : "fp16";
    if (rr.count) {
        fprintf(stderr,
                "tcinfer: note: the GPU outputs hold %llu NaN/Inf values (first in '%s'); the "
                "fp32 reference holds %llu: they come from the model and its inputs, not from "
                "%s (%s)\n",
                (unsigned long long)r.count, out.name, (unsigned long long)rr.count, precision,
                where);
        return 0;
    }
    fprintf(stderr,
            "tcinfer: error: the GPU outputs hold %llu NaN/Inf values (first in '%s') where the "
            "fp32 reference holds none: %s overflow; %s.\n",
            (unsigned long long)r.count, out.name, precision, where);
    if (r.found)
        fprintf(stderr, "tcinfer: try --precision bf16 (fp32's range), or keep that layer in "
                        "fp32: --fp32-layers '%s'\n", r.layer);
    return EXIT_FAILURE;
}

/* The fp32 CPU baseline on the same inputs, and the error of every float output. */
static int run_compare(const cli_args *a, const tci_context *ctx, const tci_tensor *inputs,
                       size_t num_inputs) {
    tci_engine *cpu = NULL;
    tci_context *base = NULL;
    tci_status st = run_baseline(a, a->compare_layers, inputs, num_inputs, &cpu, &base);
    int rc = st == TCI_OK ? 0 : fail(st);
    size_t n = rc == 0 ? tci_engine_output_count(cpu) : 0;
    double *errors = calloc(n + 1, sizeof *errors);
    const char **names = calloc(n + 1, sizeof *names);
    size_t layers = 0;
    if (!errors || !names) rc = EXIT_FAILURE;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        tci_tensor test, ref;
        tci_context_output(ctx, i, &test);
        tci_context_output(base, i, &ref);
        if (test.dtype != TCI_DTYPE_FLOAT) {
            size_t bytes = (size_t)tci_tensor_count(&ref) * tci_dtype_size(ref.dtype);
            bool same = test.dtype == ref.dtype && memcmp(test.data, ref.data, bytes) == 0;
            printf("compare '%s' (%s): %s\n", test.name, tci_dtype_name(test.dtype),
                   same ? "identical" : "DIFFERENT");
            if (!same && a->tolerance >= 0) rc = EXIT_FAILURE;
            continue;
        }
        tci_compare_result r;
        st = tci_compare(&test, &ref, &r);
        if (st != TCI_OK) {
            rc = fail(st);
            break;
        }
        errors[layers] = r.relative_l2;
        names[layers++] = test.name;
        if (a->compare_layers) {
            printf("  %4zu  %-40s rel L2 %-10.3g max abs %.3g\n", i, test.name, r.relative_l2,
                   r.max_abs);
            continue;
        }
        printf("compare '%s' (%s GPU vs fp32 %s): max abs %.3g, mean abs %.3g, rel L2 %.3g, "
               "cosine %.6f",
               test.name,
               a->precision == TCI_PRECISION_FP32   ? "fp32"
               : a->precision == TCI_PRECISION_TF32 ? "tf32"
               : a->precision == TCI_PRECISION_BF16 ? (a->fp32_text ? "bf16+fp32-layers" : "bf16")
               : a->fp32_text                       ? "fp16+fp32-layers"
                                                    : "fp16",
               a->baseline_gpu ? "GPU" : "CPU", r.max_abs, r.mean_abs, r.relative_l2, r.cosine);
        if (r.rows) printf(", top-1 %zu/%zu, top-5 %zu/%zu", r.top1_agree, r.rows, r.top5_agree, r.rows);
        if (r.non_finite) printf(", %zu non-finite", r.non_finite);
        printf("\n");
        if (a->tolerance >= 0 && !(r.relative_l2 <= a->tolerance)) {
            fprintf(stderr, "tcinfer: output '%s': relative L2 error %.3g exceeds --tolerance %g\n",
                    test.name, r.relative_l2, a->tolerance);
            rc = EXIT_FAILURE;
        }
    }
    if (rc == 0 && a->compare_layers) {
        double threshold = a->tolerance >= 0 ? a->tolerance : 1e-2;
        int jump = -1, over = -1;
        st = tci_find_error_jump(errors, layers, threshold, 10.0, &jump, &over);
        if (st != TCI_OK) rc = fail(st);
        else if (jump >= 0)
            printf("first layer whose error jumps past %g: '%s' (rel L2 %.3g%s)\n", threshold,
                   names[jump], errors[jump], jump ? ", 10x the layer before" : "");
        else if (over >= 0)
            printf("no jump; the error first exceeds %g at '%s' (rel L2 %.3g)\n", threshold,
                   names[over], errors[over]);
        else
            printf("every layer within relative L2 %g of the fp32 baseline\n", threshold);
        if (over >= 0 && a->tolerance >= 0) rc = EXIT_FAILURE;
    }
    free(errors);
    free(names);
    tci_context_destroy(base);
    tci_engine_destroy(cpu);
    return rc;
}

static int run_cli(int argc, char **argv, cli_args *a) {
    int rc = parse_args(argc, argv, a);
    if (rc) return rc;
    if (a->list_ops) {
        tci_list_ops(print_op, NULL);
        return 0;
    }
    tci_engine_options options;
    tci_engine_options_init(&options);
    options.shapes = a->shapes;
    options.num_shapes = (size_t)a->num_shapes;
    options.no_cuda_graph = a->no_graph;
    options.mark_all_outputs = a->compare_layers;
    options.precision = a->precision;
    options.fp32_layers = a->fp32_text ? a->fp32_layers : NULL;
    options.kernels = a->kernels;
    options.timing_cache = a->timing_cache;
    options.max_model_bytes = a->limits.max_model_bytes;
    options.max_tensor_elements = a->limits.max_tensor_elements;
    options.max_constant_bytes = a->limits.max_constant_bytes;
    options.max_nodes = a->limits.max_nodes;
    options.max_nesting_depth = a->limits.max_nesting_depth;
    options.max_parse_bytes = a->limits.max_parse_bytes;
    if (a->plan) {
        a->backend = TCI_BACKEND_GPU;
        a->info = true;
        options.plan_only = 1;
    }
    if (a->backend < 0) a->backend = tci_gpu_count(NULL, 0) > 0 || a->compare ? TCI_BACKEND_GPU : TCI_BACKEND_CPU;
    options.backend = (tci_backend)a->backend;
    if (a->profile && a->backend != TCI_BACKEND_GPU)
        return usage_error("--profile times GPU layers; use --backend gpu%s", "");
    tci_engine *engine = NULL;
    tci_status st = a->load_engine ? tci_engine_load(a->load_engine, &options, &engine)
                                  : tci_engine_create_from_file(a->model, &options, &engine);
    if (st != TCI_OK) return fail(st);
    if (a->save_engine) {
        st = tci_engine_save(engine, a->save_engine);
        if (st != TCI_OK) {
            tci_engine_destroy(engine);
            return fail(st);
        }
        if (!a->quiet) printf("engine saved to %s\n", a->save_engine);
    }
    if (a->info || (a->save_engine && !a->num_inputs && !a->random)) {
        if (a->info) {
            print_info(engine);
            print_gpu_info(engine, a->load_engine ? "engine file" : "timing cache");
        }
        tci_engine_destroy(engine);
        return 0;
    }
    size_t num_inputs = tci_engine_input_count(engine);
    tci_tensor *inputs = calloc(num_inputs + 1, sizeof *inputs);
    tci_context *ctx = NULL;
    rc = inputs ? load_inputs(a, engine, inputs) : EXIT_FAILURE;
    if (rc == 0) {
        st = tci_context_create(engine, &ctx);
        if (st == TCI_OK) st = tci_context_run(ctx, inputs, num_inputs);
        if (st != TCI_OK) rc = fail(st);
    }
    if (rc == 0) {
        size_t num_outputs = tci_engine_output_count(engine);
        if (!a->quiet && !a->compare_layers)
            for (size_t i = 0; i < num_outputs; i++) {
                tci_tensor t;
                tci_context_output(ctx, i, &t);
                print_summary(&t);
            }
        rc = write_outputs(a, ctx, num_outputs);
    }
    /* an overflow fails the call, after --compare and the rest have reported */
    int nonfinite_rc = rc == 0 && !a->compare_layers ? check_nonfinite(a, ctx, inputs, num_inputs) : 0;
    if (rc == 0 && a->compare) rc = run_compare(a, ctx, inputs, num_inputs);
    if (rc == 0 && a->bench) rc = run_bench(a, ctx, inputs);
    if (rc == 0 && a->profile) rc = run_profile(a, ctx);
    if (rc == 0) rc = nonfinite_rc;
    for (size_t i = 0; inputs && i < num_inputs; i++) tci_tensor_release(&inputs[i]);
    free(inputs);
    tci_context_destroy(ctx);
    tci_engine_destroy(engine);
    return rc;
}

/* The shape names parse_args allocates, on every path out (usage errors included). */
static void free_args(cli_args *a) {
    for (int i = 0; i < a->num_shapes; i++) free(a->shape_names[i]);
    a->num_shapes = 0;
}

int main(int argc, char **argv) {
    cli_args a;
    int rc = run_cli(argc, argv, &a);
    free_args(&a);
    return rc;
}
