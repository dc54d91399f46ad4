/* --compare against the fp32 baseline, and what NaN/Inf in the outputs mean: text or JSON. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* The engine options of the command line's arguments for the baseline (fp32, as --baseline),
 * run on the inputs engine ran. Each --shape is the largest shape an engine runs, and a GPU
 * engine also runs smaller ones; the baseline is built for the inputs' own shapes. */
static tci_status run_baseline(const cli_args *a, const tci_engine *engine, bool all_outputs,
                               const tci_tensor *inputs, size_t num_inputs,
                               tci_engine **out_engine, tci_context **out_context) {
    tci_engine_options options;
    tci_engine_options_init(&options);
    tci_shape_override shapes[MAX_ITEMS];
    for (int k = 0; k < a->num_shapes; k++) {
        shapes[k] = a->shapes[k];
        size_t i = 0;
        if (tci_engine_input_index(engine, shapes[k].name, &i) == TCI_OK && i < num_inputs &&
            inputs[i].rank == shapes[k].rank)
            memcpy(shapes[k].dims, inputs[i].dims, sizeof shapes[k].dims);
    }
    options.shapes = shapes;
    options.num_shapes = (size_t)a->num_shapes;
    options.backend = a->baseline_gpu ? TCI_BACKEND_GPU : TCI_BACKEND_CPU;
    if (a->baseline_gpu) options.device = a->device; /* beside the engine compared */
    options.precision = TCI_PRECISION_FP32;
    /* every node's output: a superset of the layers of either marking of the engine compared,
     * matched by name */
    options.mark_all_outputs = all_outputs ? TCI_MARK_OUTPUTS_UNFUSED : TCI_MARK_OUTPUTS_NONE;
    options.cpu_threads = a->threads;
    options.log_fn = cli_log;
    options.log_level = a->verbose ? TCI_LOG_DEBUG : TCI_LOG_ERROR;
    options.progress_fn = cli_progress_update;
    options.progress_user = a->progress;
    *out_context = NULL;
    tci_status st = tci_engine_create_from_file(a->model, &options, out_engine);
    cli_progress_end(a->progress);
    if (st == TCI_OK) st = tci_context_create(*out_engine, out_context);
    if (st == TCI_OK) st = tci_context_run(*out_context, inputs, num_inputs);
    return st;
}

/* NaN or Inf in the outputs: where they first appeared and whether the fp32 reference has them
 * too. An fp16/bf16 overflow (the reference finite) is an error with the fix to try. */
int cli_check_nonfinite(const cli_args *a, const tci_engine *engine, tci_context *ctx,
                        const tci_tensor *inputs, size_t num_inputs, json_value *json) {
    tci_nonfinite_report r;
    tci_nonfinite_report_init(&r);
    tci_status st = tci_context_nonfinite(ctx, &r);
    if (st != TCI_OK) return cli_fail(st);
    json_value *j = json ? json_add_object(json, "nonfinite") : NULL;
    if (j) json_add_number(j, "count", (double)r.count);
    if (!r.count) return 0;
    tci_tensor out;
    tci_context_output(ctx, r.output_index, &out);
    if (j) {
        json_add_string(j, "first_output", out.name);
        if (r.found) json_add_string(j, "layer", r.layer);
        if (r.found) json_add_string(j, "ops", r.op_type);
        if (r.input_index >= 0) json_add_number(j, "input_index", (double)r.input_index);
    }
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
    if (!a->model) { /* --load-engine: no ONNX model to build the fp32 reference from */
        fprintf(stderr,
                "tcinfer: error: the GPU outputs hold %llu NaN/Inf values (first in '%s'); %s. "
                "An engine file holds no fp32 reference to tell an overflow from NaN/Inf of the "
                "model itself: run the ONNX model (without --load-engine) on the same inputs to "
                "compare.\n",
                (unsigned long long)r.count, out.name, where);
        return EXIT_FAILURE;
    }
    tci_engine *ref_engine = NULL;
    tci_context *ref = NULL;
    tci_nonfinite_report rr;
    tci_nonfinite_report_init(&rr);
    st = run_baseline(a, engine, false, inputs, num_inputs, &ref_engine, &ref);
    if (st == TCI_OK) st = tci_context_nonfinite(ref, &rr);
    tci_context_destroy(ref);
    tci_engine_destroy(ref_engine);
    if (st != TCI_OK) return cli_fail(st);
    /* --precision auto builds an fp16 engine (with the fp32 layers its inputs needed) */
    const char *precision =
        a->precision == TCI_PRECISION_AUTO ? "fp16" : cli_precision_name(a->precision);
    if (j) json_add_number(j, "reference_count", (double)rr.count);
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
                        "fp32: --fp32-layers '%s' (with --keep-precision bf16: in bf16, at "
                        "tensor-core speed)\n", r.layer);
    return EXIT_FAILURE;
}

static const char *engine_label(const cli_args *a) {
    if (a->backend == TCI_BACKEND_CPU) return "fp32 CPU";
    bool tf32 = a->kept_precision == TCI_PRECISION_TF32,
         bf16 = a->kept_precision == TCI_PRECISION_BF16;
    return a->precision == TCI_PRECISION_FP32   ? "fp32"
           : a->precision == TCI_PRECISION_TF32 ? "tf32"
           : a->precision == TCI_PRECISION_BF16 ? (a->fp32_text ? "bf16+fp32-layers" : "bf16")
           : a->precision == TCI_PRECISION_AUTO
               ? (tf32 ? "fp16+auto-tf32-layers" : bf16 ? "fp16+auto-bf16-layers"
                                                        : "fp16+auto-fp32-layers")
           : a->fp32_text ? (tf32 ? "fp16+tf32-layers" : bf16 ? "fp16+bf16-layers"
                                                               : "fp16+fp32-layers")
                          : "fp16";
}

/* The coordinates of flat (row-major) element `index` of t. */
static void unflatten(const tci_tensor *t, size_t index, int64_t *coords) {
    for (int d = t->rank - 1; d >= 0; d--) {
        coords[d] = t->dims[d] ? (int64_t)(index % (size_t)t->dims[d]) : 0;
        index = t->dims[d] ? index / (size_t)t->dims[d] : 0;
    }
}

/* "[0, 3]": the position of flat element `index` in t */
static const char *element_position(const tci_tensor *t, size_t index, char *buf, size_t size) {
    int64_t coords[TCI_MAX_RANK];
    unflatten(t, index, coords);
    size_t pos = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->rank && pos < size; d++) {
        int w = snprintf(buf + pos, size - pos, "%s%lld", d ? ", " : "[", (long long)coords[d]);
        if (w < 0) break;
        pos += (size_t)w;
    }
    if (pos < size) snprintf(buf + pos, size - pos, "%s", t->rank ? "]" : "[]");
    return buf;
}

/* What --compare-layers says of one engine output: the ONNX nodes of the step that computes it
 * (tci_engine_output_nodes), the last of them the output's own. */
typedef struct layer_nodes {
    char names[1024], ops[512];
    const char *last, *last_op; /* into the engine, valid while it lives */
    size_t count;
} layer_nodes;

static void append(char *buf, size_t size, const char *sep, const char *text) {
    size_t len = strlen(buf);
    if (len + 1 < size) snprintf(buf + len, size - len, "%s%s", len ? sep : "", text);
}

static void add_layer_node(const char *node, const char *op_type, void *user) {
    layer_nodes *l = user;
    append(l->names, sizeof l->names, "+", node);
    append(l->ops, sizeof l->ops, "+", op_type);
    l->last = node;
    l->last_op = op_type;
    l->count++;
}

static void add_json_node(const char *node, const char *op_type, void *user) {
    (void)op_type;
    json_add(user, NULL, json_string(node));
}

/* --atol / --rtol given */
static bool has_bound(const cli_args *a) { return a->atol >= 0 || a->rtol >= 0; }

static json_value *json_result(const char *name, const tci_compare_result *r) {
    json_value *o = json_object();
    json_add_string(o, "name", name);
    json_add_number(o, "max_abs", r->max_abs);
    json_add_number(o, "mean_abs", r->mean_abs);
    json_add_number(o, "relative_l2", r->relative_l2);
    json_add_number(o, "cosine", r->cosine);
    json_add_number(o, "non_finite", (double)r->non_finite);
    if (r->rows) {
        json_add_number(o, "rows", (double)r->rows);
        json_add_number(o, "top1_agree", (double)r->top1_agree);
        json_add_number(o, "top5_agree", (double)r->top5_agree);
    }
    json_add_number(o, "max_rel", r->max_rel);
    return o;
}

/* Whether ref (a file) can be compared with output test: same dtype and shape (reported). */
static int check_reference(const tci_tensor *test, const tci_tensor *ref, const char *path) {
    char got[256], want[256];
    if (ref->dtype != test->dtype) {
        fprintf(stderr,
                "tcinfer: the reference '%s' for output '%s' is %s; the output is %s%s\n",
                path, test->name, tci_dtype_name(ref->dtype), tci_dtype_name(test->dtype),
                test->dtype == TCI_DTYPE_FLOAT ? " (save it as float32)" : "");
        return EXIT_FAILURE;
    }
    bool same = ref->rank == test->rank;
    for (int d = 0; same && d < ref->rank; d++) same = ref->dims[d] == test->dims[d];
    if (!same) {
        tci_tensor_info ri, ti;
        tci_tensor_info_init(&ri);
        tci_tensor_info_init(&ti);
        ri.rank = ref->rank;
        ti.rank = test->rank;
        memcpy(ri.dims, ref->dims, sizeof ri.dims);
        memcpy(ti.dims, test->dims, sizeof ti.dims);
        fprintf(stderr, "tcinfer: the reference '%s' for output '%s' has shape %s; the output "
                        "has %s\n",
                path, test->name, cli_format_info_dims(&ri, got, sizeof got),
                cli_format_info_dims(&ti, want, sizeof want));
        return EXIT_FAILURE;
    }
    return 0;
}

/* The bound of --atol / --rtol on one output: its text, JSON and exit status. */
static int report_bound(const tci_tensor *test, const tci_compare_result *r, json_value *o) {
    char where[256];
    element_position(test, r->worst_index, where, sizeof where);
    int64_t count = tci_tensor_count(test);
    if (o) {
        json_add_number(o, "atol", r->atol);
        json_add_number(o, "rtol", r->rtol);
        json_add_number(o, "bound_failures", (double)r->bound_failures);
        json_add_number(o, "elements", (double)count);
        if (count > 0) {
            json_value *w = json_add_object(o, "worst");
            int64_t coords[TCI_MAX_RANK];
            unflatten(test, r->worst_index, coords);
            json_add(w, "index", cli_json_shape(test->rank, coords));
            json_add_number(w, "flat_index", (double)r->worst_index);
            json_add_number(w, "got", r->worst_test);
            json_add_number(w, "ref", r->worst_baseline);
        }
        json_add_bool(o, "within_bound", r->bound_failures == 0);
    } else {
        printf("  atol %g, rtol %g: %zu of %lld elements fail", r->atol, r->rtol,
               r->bound_failures, (long long)count);
        if (count > 0)
            printf("; worst at %s: got %.9g, ref %.9g", where, r->worst_test, r->worst_baseline);
        printf("\n");
    }
    if (!r->bound_failures) return 0;
    fprintf(stderr,
            "tcinfer: output '%s': %zu of %lld elements exceed |got - ref| <= --atol %g + --rtol "
            "%g * |ref|; the worst, at %s, is %.9g against %.9g\n",
            test->name, r->bound_failures, (long long)count, r->atol, r->rtol, where,
            r->worst_test, r->worst_baseline);
    return EXIT_FAILURE;
}

/* The baseline (the fp32 run of --baseline, or the files of --reference) on the same inputs, and
 * the error of every output. */
int cli_run_compare(const cli_args *a, const tci_engine *engine, const tci_context *ctx,
                    const tci_tensor *inputs, size_t num_inputs, json_value *json) {
    tci_engine *cpu = NULL;
    tci_context *base = NULL;
    cli_reference files;
    memset(&files, 0, sizeof files);
    bool saved = a->num_references > 0;
    size_t n = 0;
    int rc = 0;
    if (saved) {
        n = tci_engine_output_count(engine);
        rc = cli_load_references(a, ctx, n, &files);
    } else {
        tci_status st =
            run_baseline(a, engine, a->compare_layers, inputs, num_inputs, &cpu, &base);
        rc = st == TCI_OK ? 0 : cli_fail(st);
        n = rc == 0 ? tci_engine_output_count(engine) : 0;
    }
    double *errors = calloc(n + 1, sizeof *errors);
    const char **names = calloc(n + 1, sizeof *names), **node_names = calloc(n + 1, sizeof *names);
    size_t layers = 0;
    if (!errors || !names || !node_names) rc = EXIT_FAILURE;
    json_value *j = json ? json_add_object(json, "compare") : NULL;
    json_value *list = NULL;
    if (j) {
        json_add_string(j, "engine", engine_label(a));
        json_add_string(j, "baseline", saved ? "reference" : a->baseline_gpu ? "gpu-fp32" : "cpu");
        if (a->tolerance >= 0) json_add_number(j, "tolerance", a->tolerance);
        if (has_bound(a)) json_add_number(j, "atol", a->atol >= 0 ? a->atol : 0);
        if (has_bound(a)) json_add_number(j, "rtol", a->rtol >= 0 ? a->rtol : 0);
        list = json_add_array(j, a->compare_layers ? "layers" : "outputs");
    }
    bool bounded = a->tolerance >= 0 || has_bound(a);
    size_t unmatched = 0;
    if (!j && a->compare_layers && rc == 0)
        printf("per-layer error against the fp32 %s, %s:\n", a->baseline_gpu ? "GPU" : "CPU",
               a->compare_unfused ? "every node's output of the engine built unfused"
                                  : "every step's output of the engine as it ships");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        tci_tensor test, ref;
        tci_context_output(ctx, i, &test);
        size_t at = i;
        if (saved) {
            ref = files.tensors[i];
            rc = check_reference(&test, &ref, files.paths[i]);
            if (rc) break;
        } else if (a->compare_layers && tci_engine_output_index(cpu, test.name, &at) != TCI_OK) {
            unmatched++; /* a tensor the GPU passes made, which the model does not have */
            continue;
        } else {
            tci_context_output(base, at, &ref);
        }
        if (test.dtype != TCI_DTYPE_FLOAT) {
            size_t bytes = (size_t)tci_tensor_count(&ref) * tci_dtype_size(ref.dtype);
            bool same = test.dtype == ref.dtype && memcmp(test.data, ref.data, bytes) == 0;
            if (list) {
                json_value *o = json_object();
                json_add_string(o, "name", test.name);
                json_add_string(o, "dtype", tci_dtype_name(test.dtype));
                if (saved) json_add_string(o, "reference", files.paths[i]);
                json_add_bool(o, "identical", same);
                json_add(list, NULL, o);
            } else {
                printf("compare '%s' (%s): %s\n", test.name, tci_dtype_name(test.dtype),
                       same ? "identical" : "DIFFERENT");
            }
            if (!same && bounded) {
                fprintf(stderr, "tcinfer: output '%s' (%s) differs from its baseline\n",
                        test.name, tci_dtype_name(test.dtype));
                rc = EXIT_FAILURE;
            }
            continue;
        }
        tci_compare_result r;
        tci_compare_result_init(&r);
        r.atol = a->atol >= 0 ? a->atol : 0;
        r.rtol = a->rtol >= 0 ? a->rtol : 0;
        tci_status st = tci_compare(&test, &ref, &r);
        if (st != TCI_OK) {
            rc = cli_fail(st);
            break;
        }
        layer_nodes nodes;
        memset(&nodes, 0, sizeof nodes);
        if (a->compare_layers) tci_engine_output_nodes(engine, i, add_layer_node, &nodes);
        errors[layers] = r.relative_l2;
        names[layers] = test.name;
        node_names[layers++] = nodes.last ? nodes.last : test.name;
        cli_report_compared(a->collect, a->compare_layers, &test, &ref, &r,
                            nodes.count > 1 ? nodes.names : NULL);
        bool over = a->tolerance >= 0 && !(r.relative_l2 <= a->tolerance);
        json_value *o = NULL;
        if (list) {
            o = json_result(test.name, &r);
            if (saved) json_add_string(o, "reference", files.paths[i]);
            if (a->tolerance >= 0) json_add_bool(o, "within_tolerance", !over);
            if (nodes.last) {
                json_add_string(o, "node", nodes.last);
                json_add_string(o, "op", nodes.last_op);
                json_add_string(o, "step_ops", nodes.ops);
                tci_engine_output_nodes(engine, i, add_json_node, json_add_array(o, "step_nodes"));
            }
            json_add(list, NULL, o);
        } else if (a->compare_layers) {
            printf("  %4zu  %-40s rel L2 %-10.3g max abs %-10.3g", i, test.name, r.relative_l2,
                   r.max_abs);
            if (nodes.count > 1) printf(" %s: %s (%s)\n", nodes.last, nodes.names, nodes.ops);
            else if (nodes.count) printf(" %s (%s)\n", nodes.last, nodes.ops);
            else printf("\n");
        } else {
            if (saved)
                printf("compare '%s' (%s vs reference %s): ", test.name, engine_label(a),
                       files.paths[i]);
            else
                printf("compare '%s' (%s GPU vs fp32 %s): ", test.name, engine_label(a),
                       a->baseline_gpu ? "GPU" : "CPU");
            printf("max abs %.3g, mean abs %.3g, rel L2 %.3g, cosine %.6f", r.max_abs,
                   r.mean_abs, r.relative_l2, r.cosine);
            if (r.rows)
                printf(", top-1 %zu/%zu, top-5 %zu/%zu", r.top1_agree, r.rows, r.top5_agree, r.rows);
            if (r.non_finite) printf(", %zu non-finite", r.non_finite);
            printf("\n");
        }
        if (!a->compare_layers && over) {
            fprintf(stderr, "tcinfer: output '%s': relative L2 error %.3g exceeds --tolerance %g\n",
                    test.name, r.relative_l2, a->tolerance);
            rc = EXIT_FAILURE;
        }
        if (has_bound(a) && report_bound(&test, &r, o)) rc = EXIT_FAILURE;
    }
    if (rc == 0 && a->compare_layers) {
        double threshold = a->tolerance >= 0 ? a->tolerance : 1e-2;
        int jump = -1, over = -1;
        tci_status st = tci_find_error_jump(errors, layers, threshold, 10.0, &jump, &over);
        if (st == TCI_OK) cli_report_layer_jump(a->collect, threshold, jump, over);
        if (st != TCI_OK) {
            rc = cli_fail(st);
        } else if (j) {
            json_add_number(j, "threshold", threshold);
            json_add(j, "first_jump", jump >= 0 ? json_string(names[jump])
                                                             : json_null());
            json_add(j, "first_jump_node", jump >= 0 ? json_string(node_names[jump])
                                                     : json_null());
            json_add(j, "first_over", over >= 0 ? json_string(names[over])
                                                             : json_null());
            json_add(j, "first_over_node", over >= 0 ? json_string(node_names[over])
                                                     : json_null());
            if (unmatched) json_add_number(j, "not_in_baseline", (double)unmatched);
        } else if (jump >= 0) {
            printf("first layer whose error jumps past %g: '%s' (node %s; rel L2 %.3g%s)\n",
                   threshold, names[jump], node_names[jump], errors[jump],
                   jump ? ", 10x the layer before" : "");
        } else if (over >= 0) {
            printf("no jump; the error first exceeds %g at '%s' (node %s; rel L2 %.3g)\n",
                   threshold, names[over], node_names[over], errors[over]);
        } else {
            printf("every layer within relative L2 %g of the fp32 baseline\n", threshold);
        }
        if (unmatched && !j)
            printf("%zu engine outputs not compared: tensors the GPU passes made, which the "
                   "model does not have\n", unmatched);
        if (over >= 0 && a->tolerance >= 0) rc = EXIT_FAILURE;
    }
    free(errors);
    free(names);
    free(node_names);
    cli_free_references(&files);
    tci_context_destroy(base);
    tci_engine_destroy(cpu);
    return rc;
}
