/* tcinfer: the command line. Input files, output files and the order of the work; the options
 * are in options.c, the reports in report.c and compare.c. All work goes through the public API
 * in tcinfer.h. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

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
                    info->name, cli_format_info_dims(info, dims, sizeof dims), info->name);
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
                info->name, path, got, want, cli_format_info_dims(info, dims, sizeof dims),
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
        size_t index = 0;
        tci_tensor_info info;
        tci_tensor_info_init(&info);
        if (!in->name) {
            if (k != 0 || a->num_inputs != 1) {
                fprintf(stderr, "tcinfer: with several inputs, name each one: NAME=FILE\n");
                return EXIT_USAGE;
            }
        } else if (tci_engine_input_index(engine, in->name, &index) != TCI_OK) {
            cli_fail(TCI_ERR_INVALID_ARGUMENT);
            return EXIT_USAGE;
        }
        if (index >= n) {
            fprintf(stderr, "tcinfer: the model has no inputs\n");
            return EXIT_USAGE;
        }
        tci_engine_input_info(engine, index, &info);
        tci_status st;
        if (has_suffix(in->path, ".npy") || has_suffix(in->path, ".pb")) {
            st = tci_tensor_read_file(in->path, &tensors[index]);
            if (st != TCI_OK) return cli_fail(st);
        } else {
            st = read_raw(in->path, &info, &tensors[index]);
            if (st != TCI_OK) return EXIT_FAILURE;
        }
        given[index] = true;
    }
    for (size_t i = 0; i < n; i++) {
        if (given[i]) continue;
        tci_tensor_info info;
        tci_tensor_info_init(&info);
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

static int write_outputs(const cli_args *a, const tci_context *ctx, size_t num_outputs,
                         json_value *outputs) {
    const char *dir = a->output_dir;
    if (a->output_file && cli_is_folder(a->output_file)) dir = a->output_file;
    else if (a->output_file) {
        if (num_outputs != 1 && has_suffix(a->output_file, ".npy"))
            fprintf(stderr, "tcinfer: note: the model has %zu outputs; -o FILE writes output 0 "
                            "(--output-dir or -o DIR/ writes all)\n", num_outputs);
        tci_tensor t;
        tci_context_output(ctx, 0, &t);
        if (has_suffix(a->output_file, ".npy")) {
            tci_status st = tci_tensor_write_npy(a->output_file, &t);
            if (st != TCI_OK) return cli_fail(st);
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
        if (outputs) json_add_string(json_at(outputs, 0), "file", a->output_file);
    }
    if (dir) {
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "tcinfer: cannot create the folder '%s': %s\n", dir, strerror(errno));
            return EXIT_FAILURE;
        }
        size_t len = strlen(dir);
        for (size_t i = 0; i < num_outputs; i++) {
            char name[256], path[4096];
            cli_output_file_name(ctx, i, name, sizeof name);
            snprintf(path, sizeof path, "%s%s%s.npy", dir, len && dir[len - 1] == '/' ? "" : "/",
                     name);
            tci_tensor t;
            tci_context_output(ctx, i, &t);
            tci_status st = tci_tensor_write_npy(path, &t);
            if (st != TCI_OK) return cli_fail(st);
            if (outputs) json_add_string(json_at(outputs, (int)i), "file", path);
        }
    }
    return 0;
}

static void print_op(const char *op_type, int min_opset, int max_opset, int has_gpu,
                     void *user) {
    (void)user;
    printf("%s %d-%d %s\n", op_type, min_opset, max_opset, has_gpu ? "cpu,gpu" : "cpu");
}

/* The --json document, on stdout. */
static int print_json(json_value *json, int rc) {
    if (!json) return rc;
    json_add_string(json, "status", rc == 0 ? "ok" : "failed");
    json_add_number(json, "exit_status", rc);
    if (!json_print(json, stdout) || fflush(stdout) != 0) {
        fprintf(stderr, "tcinfer: cannot print the JSON document\n");
        rc = rc ? rc : EXIT_FAILURE;
    }
    json_free(json);
    return rc;
}

/* The work after the engine is built: inputs, the run, outputs and what was asked of it. */
static int run(const cli_args *a, const tci_engine *engine, json_value *json) {
    size_t num_inputs = tci_engine_input_count(engine);
    tci_tensor *inputs = calloc(num_inputs + 1, sizeof *inputs);
    tci_context *ctx = NULL;
    int rc = inputs ? load_inputs(a, engine, inputs) : EXIT_FAILURE;
    if (rc == 0) {
        tci_status st = tci_context_create(engine, &ctx);
        if (st == TCI_OK) st = tci_context_run(ctx, inputs, num_inputs);
        if (st != TCI_OK) rc = cli_fail(st);
    }
    bool ran = rc == 0;
    if (rc == 0) {
        size_t num_outputs = tci_engine_output_count(engine);
        json_value *outputs = json && !a->compare_layers ? json_add_array(json, "outputs") : NULL;
        for (size_t i = 0; !a->compare_layers && i < num_outputs; i++) {
            tci_tensor t;
            tci_context_output(ctx, i, &t);
            cli_report_output(&t, !a->quiet, outputs);
        }
        rc = write_outputs(a, ctx, num_outputs, outputs);
    }
    /* an overflow fails the call, after --compare and the rest have reported */
    int nonfinite_rc =
        rc == 0 && !a->compare_layers ? cli_check_nonfinite(a, engine, ctx, inputs, num_inputs, json) : 0;
    if (rc == 0 && a->compare) rc = cli_run_compare(a, engine, ctx, inputs, num_inputs, json);
    if (rc == 0 && a->bench) rc = cli_run_bench(a, ctx, inputs, json);
    if (rc == 0 && a->profile) rc = cli_run_profile(a, ctx, json);
    if (rc == 0) rc = nonfinite_rc;
    /* the report also of a run that failed --tolerance or overflowed: the reason is in it */
    if (a->collect && ran) {
        int report_rc = cli_write_report(a, a->collect, engine, ctx, json);
        rc = rc ? rc : report_rc;
    }
    for (size_t i = 0; inputs && i < num_inputs; i++) tci_tensor_release(&inputs[i]);
    free(inputs);
    tci_context_destroy(ctx);
    return rc;
}

/* --precision auto: the run's inputs (files or --random) as the build's calibration inputs,
 * read through a CPU engine of the model, the GPU one not being built yet. None given: *out
 * stays NULL, and the library takes seeded random inputs. */
static int calibration_inputs(const cli_args *a, const tci_engine_options *options,
                              tci_tensor **out, size_t *count) {
    *out = NULL;
    *count = 0;
    if (!a->num_inputs && !a->random) return 0;
    tci_engine_options o = *options;
    o.backend = TCI_BACKEND_CPU;
    o.device = 0; /* the CPU runs on no GPU */
    o.precision = TCI_PRECISION_FP16;
    o.fp32_layers = NULL;
    o.kept_precision = TCI_PRECISION_FP32;
    o.kernels = TCI_KERNELS_AUTO;
    o.timing_cache = NULL;
    o.mark_all_outputs = TCI_MARK_OUTPUTS_NONE;
    o.progress_fn = NULL;
    tci_engine *cpu = NULL;
    tci_status st = tci_engine_create_from_file(a->model, &o, &cpu);
    if (st != TCI_OK) return cli_fail(st);
    *count = tci_engine_input_count(cpu);
    *out = calloc(*count + 1, sizeof **out);
    int rc = *out ? load_inputs(a, cpu, *out) : EXIT_FAILURE;
    tci_engine_destroy(cpu);
    return rc;
}

typedef struct auto_layers {
    char text[2048];
    size_t count, pos;
    json_value *list;
} auto_layers;

static void add_auto_layer(const char *layer, int automatic, void *user) {
    auto_layers *l = user;
    if (!automatic) return;
    if (l->list) json_add(l->list, NULL, json_string(layer));
    if (l->pos < sizeof l->text) {
        int w = snprintf(l->text + l->pos, sizeof l->text - l->pos, "%s'%s'", l->count ? ", " : "",
                         layer);
        l->pos = w < 0 ? sizeof l->text : l->pos + (size_t)w;
    }
    l->count++;
}

/* --precision auto, or an engine file it built: the layers the search kept (ONNX node names)
 * and in what (kept: cli_kept_name), the error reached and the target, on stderr (--json: also
 * the document's "precision_auto"); built here, also the inputs and the time the search took. */
static void report_auto_layers(const cli_args *a, const tci_engine *engine, double seconds,
                               const char *kept, json_value *json) {
    double error = -1, goal = 0;
    if (tci_engine_auto_error(engine, &error) != TCI_OK) return; /* not built by the search */
    tci_engine_auto_target(engine, &goal);
    bool loaded = a->load_engine != NULL;
    auto_layers l;
    memset(&l, 0, sizeof l);
    json_value *j = json ? json_add_object(json, "precision_auto") : NULL;
    l.list = j ? json_add_array(j, "fp32_layers") : NULL;
    tci_engine_fp32_layers(engine, add_auto_layer, &l); /* fails only on NULL arguments */
    if (l.pos >= sizeof l.text) memcpy(l.text + sizeof l.text - 5, "...", 4);
    const char *inputs = loaded                         ? "its calibration"
                         : a->num_inputs || a->random ? "given"
                                                        : "seeded random";
    if (j) {
        json_add_number(j, "relative_l2", error);
        if (goal > 0) json_add_number(j, "accuracy_target", goal);
        if (loaded) {
            json_add_string(j, "from", "engine file");
        } else {
            json_add_string(j, "inputs", inputs);
            json_add_number(j, "seconds", seconds);
        }
    }
    const char *from = loaded ? " (engine file)" : "";
    char target[64] = "", when[64] = "; chosen when the engine file was built";
    if (goal > 0) snprintf(target, sizeof target, " (--accuracy-target %g)", goal);
    if (!loaded) snprintf(when, sizeof when, "; chosen in %.1f s", seconds);
    if (!kept) kept = a->load_engine ? "fp32" : cli_precision_name(a->kept_precision);
    if (j) json_add_string(j, "kept_precision", kept);
    if (l.count)
        fprintf(stderr, "tcinfer: precision auto%s: %zu layer%s kept in %s: %s\n", from,
                l.count, l.count == 1 ? "" : "s", kept, l.text);
    else
        fprintf(stderr, "tcinfer: precision auto%s: no layer kept in %s: the engine is all "
                        "fp16\n", from, kept);
    fprintf(stderr, "tcinfer: precision auto%s: outputs' relative L2 error %.3g against the GPU "
                    "fp32 engine on %s%s inputs%s%s\n",
            from, error, loaded ? "" : "the ", inputs, target, when);
}

/* Everything after the arguments are parsed; main frees them on every path out. */
static int run_cli(cli_args *a) {
    int rc = 0;
    if (a->list_ops) {
        tci_list_ops(print_op, NULL);
        return 0;
    }
    tci_engine_options options;
    tci_engine_options_init(&options);
    options.shapes = a->shapes;
    options.num_shapes = (size_t)a->num_shapes;
    options.no_cuda_graph = a->no_graph;
    options.mark_all_outputs = !a->compare_layers   ? TCI_MARK_OUTPUTS_NONE
                               : a->compare_unfused ? TCI_MARK_OUTPUTS_UNFUSED
                                                    : TCI_MARK_OUTPUTS_AS_SHIPPED;
    options.precision = a->precision;
    options.fp32_layers = a->fp32_text ? a->fp32_layers : NULL;
    options.kept_precision = a->kept_precision;
    options.kernels = a->kernels;
    options.timing_cache = a->timing_cache;
    options.log_fn = cli_log;
    options.log_level = a->verbose ? TCI_LOG_DEBUG : TCI_LOG_ERROR;
    options.max_model_bytes = a->limits.max_model_bytes;
    options.max_tensor_elements = a->limits.max_tensor_elements;
    options.max_constant_bytes = a->limits.max_constant_bytes;
    options.max_nodes = a->limits.max_nodes;
    options.max_nesting_depth = a->limits.max_nesting_depth;
    options.max_parse_bytes = a->limits.max_parse_bytes;
    options.max_loop_iterations = a->limits.max_loop_iterations;
    cli_progress progress;
    cli_progress_init(&progress, !a->quiet);
    a->progress = &progress;
    options.progress_fn = cli_progress_update;
    options.progress_user = &progress;
    if (a->plan) {
        a->backend = TCI_BACKEND_GPU;
        a->info = true;
        options.plan_only = 1;
    }
    /* --compare's default baseline is the CPU reference, so the engine compared is the GPU
     * one; against saved outputs (--reference) it is whichever runs here */
    bool gpu = tci_gpu_count(NULL, 0) > 0;
    if (a->backend < 0)
        a->backend = gpu || a->device_given || (a->compare && !a->num_references)
                         ? TCI_BACKEND_GPU
                         : TCI_BACKEND_CPU;
    if (!gpu && a->compare && !a->num_references && !a->plan) return cli_compare_needs_gpu();
    if (!gpu && a->precision == TCI_PRECISION_AUTO) {
        fprintf(stderr, "tcinfer: --precision auto builds and runs the fp16 and fp32 GPU engines "
                        "to choose the fp32 layers; no GPU is available here\n");
        return EXIT_FAILURE;
    }
    options.backend = (tci_backend)a->backend;
    if (a->backend == TCI_BACKEND_CPU) options.cpu_threads = a->threads;
    else options.device = a->device;
    rc = cli_check_reference_paths(a);
    if (rc) return rc;
    if (a->profile && a->backend != TCI_BACKEND_GPU)
        return cli_usage_error("--profile times GPU layers; use --backend gpu%s", "");
    json_value *json = a->json ? json_object() : NULL;
    if (json) {
        json_add_string(json, "tcinfer", tci_version());
        json_add_string(json, "model", a->load_engine ? a->load_engine : a->model);
        json_add_string(json, "backend", a->backend == TCI_BACKEND_GPU ? "gpu" : "cpu");
        if (a->backend == TCI_BACKEND_GPU && !a->load_engine) /* an engine file's: below */
            json_add_string(json, "precision", cli_precision_name(a->precision));
        if (a->backend == TCI_BACKEND_GPU && !a->plan) json_add_number(json, "device", a->device);
    }
    tci_engine *engine = NULL;
    tci_tensor *calibration = NULL;
    size_t num_calibration = 0;
    if (a->precision == TCI_PRECISION_AUTO) {
        rc = calibration_inputs(a, &options, &calibration, &num_calibration);
        options.calibration_inputs = calibration;
        options.num_calibration_inputs = num_calibration;
    }
    options.accuracy_target = a->accuracy_target;
    double start = cli_now_s();
    tci_status st = rc ? TCI_OK
                    : a->load_engine ? tci_engine_load(a->load_engine, &options, &engine)
                                     : tci_engine_create_from_file(a->model, &options, &engine);
    double seconds = cli_now_s() - start;
    cli_progress_end(&progress);
    for (size_t i = 0; calibration && i < num_calibration; i++) tci_tensor_release(&calibration[i]);
    free(calibration);
    if (rc) return print_json(json, rc);
    if (st == TCI_OK && a->load_engine) { /* what the file holds, for every report below */
        tci_precision precision, kept_precision;
        if (tci_engine_precision(engine, &precision, &kept_precision) == TCI_OK) {
            a->precision = precision;
            a->kept_precision = kept_precision;
        }
        if (json) json_add_string(json, "precision", cli_precision_name(a->precision));
    }
    const char *kept = st == TCI_OK ? cli_kept_name(a, engine) : NULL;
    if (kept && json) json_add_string(json, "kept_precision", kept);
    if (st == TCI_OK && (a->precision == TCI_PRECISION_AUTO || a->load_engine))
        report_auto_layers(a, engine, seconds, kept, json);
    if (st == TCI_OK && a->save_engine) {
        st = tci_engine_save(engine, a->save_engine);
        if (st == TCI_OK && json) json_add_string(json, "engine_saved", a->save_engine);
        else if (st == TCI_OK && !a->quiet) printf("engine saved to %s\n", a->save_engine);
    }
    if (st != TCI_OK) {
        char text[4096];
        json_add_string(json, "error", cli_flag_terms(tci_last_error(), text, sizeof text));
        rc = cli_fail(st);
    } else if (a->info || (a->save_engine && !a->num_inputs && !a->random)) {
        if (a->info)
            cli_print_info(engine, a->load_engine ? "engine file" : "timing cache", kept, json);
    } else if (!a->report || (a->collect = cli_report_create(a))) {
        rc = run(a, engine, json);
        cli_report_destroy(a->collect);
    } else {
        rc = EXIT_FAILURE;
    }
    tci_engine_destroy(engine);
    return print_json(json, rc);
}

int main(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse_args(argc, argv, &a);
    if (rc == 0) rc = run_cli(&a);
    cli_free_args(&a); /* the shape names, on every path out (usage errors included) */
    return rc < 0 ? 0 : rc;
}
