/* TCI_PRECISION_AUTO: builds the fp16 engine, runs it on calibration inputs against the GPU
 * fp32 engine, and while its outputs hold NaN or Inf that the fp32 ones do not, keeps the first
 * layer producing them in fp32 and builds again; with an accuracy target, while their error is
 * over it, the layer adding the most error (both engines built with every layer marked) joins
 * them in the same way. Every build is an ordinary one (api_finish_create)
 * of a copy of the loaded graph; the result is an fp16 engine with fp32 layers, which an engine
 * file stores like any other. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/precision_auto.h"
#include "graph/plan.h"
#include "util/half.h"

tci_status api_auto_next_layer(const auto_round *r, const char **out_layer) {
    *out_layer = NULL;
    if (!r->mismatches) return TCI_OK;
    const tci_nonfinite_report *n = r->report;
    if (n->input_index >= 0)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: engine input %ld holds NaN/Inf in fp16 (its "
                            "values are past fp16's range): no layer kept in fp32 avoids that",
                            n->input_index);
    if (!n->found)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: the fp16 outputs hold %llu NaN/Inf values where "
                            "the fp32 engine's are finite, but no layer of the re-run produced "
                            "them",
                            (unsigned long long)r->mismatches);
    if (r->layer_in_fp32)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: layer '%s' (%s) is kept in fp32 and is still the "
                            "first to produce NaN/Inf (%llu in the outputs where the fp32 engine's "
                            "are finite): fp32 for that layer does not fix it",
                            n->layer, n->op_type, (unsigned long long)r->mismatches);
    if (r->round >= TCI_PRECISION_AUTO_MAX_ROUNDS)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: after %d rounds the fp16 outputs still hold %llu "
                            "NaN/Inf values where the fp32 engine's are finite (next: layer '%s', "
                            "%s); use TCI_PRECISION_BF16 or TCI_PRECISION_FP32",
                            r->round, (unsigned long long)r->mismatches, n->layer, n->op_type);
    *out_layer = n->layer;
    return TCI_OK;
}

int api_auto_worst_layer(size_t count, const double *errors, const double *input_errors,
                         const bool *in_fp32) {
    int worst = -1;
    double most = 0;
    for (size_t i = 0; i < count; i++) {
        double added = errors[i] - input_errors[i];
        if (in_fp32[i] || !(added > most)) continue; /* NaN adds nothing measurable */
        worst = (int)i;
        most = added;
    }
    return worst;
}

/* splitmix64: seeded random inputs, the same for every build */
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random data for input t (dtype and dims set): floats in [-1, 1), integers 0..9, booleans. */
static tci_status fill_random(tci_tensor *t, uint64_t *state) {
    int64_t count = tci_tensor_count(t);
    size_t size = tci_dtype_size(t->dtype);
    if (count < 0 || !size)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: no random data for input '%s' (%s); give "
                            "tci_engine_options.calibration_inputs",
                            t->name, tci_dtype_name(t->dtype));
    t->data = malloc((size_t)count * size + 1);
    if (!t->data) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < count; i++) {
        double u = (double)(next_random(state) >> 11) / 9007199254740992.0; /* [0,1) */
        switch (t->dtype) {
        case TCI_DTYPE_FLOAT: ((float *)t->data)[i] = (float)(2 * u - 1); break;
        case TCI_DTYPE_DOUBLE: ((double *)t->data)[i] = 2 * u - 1; break;
        case TCI_DTYPE_FLOAT16: ((uint16_t *)t->data)[i] = float_to_half((float)(2 * u - 1)); break;
        case TCI_DTYPE_BFLOAT16:
            ((uint16_t *)t->data)[i] = float_to_bfloat16((float)(2 * u - 1));
            break;
        case TCI_DTYPE_INT64: ((int64_t *)t->data)[i] = (int64_t)(u * 10); break;
        case TCI_DTYPE_INT32: ((int32_t *)t->data)[i] = (int32_t)(u * 10); break;
        case TCI_DTYPE_INT8: ((int8_t *)t->data)[i] = (int8_t)(u * 10); break;
        case TCI_DTYPE_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)(u * 10); break;
        case TCI_DTYPE_BOOL: ((uint8_t *)t->data)[i] = u < 0.5; break;
        default:
            return status_error(TCI_ERR_UNSUPPORTED,
                                "TCI_PRECISION_AUTO: no random data for input '%s' (%s); give "
                                "tci_engine_options.calibration_inputs",
                                t->name, tci_dtype_name(t->dtype));
        }
    }
    return TCI_OK;
}

/* Seeded random inputs for engine e, as built (*out: e's input count, released by the caller). */
static tci_status random_inputs(const tci_engine *e, tci_tensor **out) {
    const ir_graph *g = e->graph;
    *out = calloc(g->num_inputs + 1, sizeof **out);
    if (!*out) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    uint64_t state = 0;
    for (size_t i = 0; i < g->num_inputs; i++) {
        const ir_tensor *x = g->inputs[i];
        tci_tensor *t = &(*out)[i];
        t->name = x->name;
        t->dtype = x->dtype;
        t->rank = x->rank;
        for (int d = 0; d < x->rank; d++) t->dims[d] = x->dims[d] < 0 ? 1 : x->dims[d];
        TRY_STATUS(fill_random(t, &state));
    }
    return TCI_OK;
}

/* The inner builds' progress, each stage named after the build it belongs to. */
typedef struct auto_progress {
    tci_progress_fn fn;
    void *user;
    char build[48];
    char stage[128];
} auto_progress;

static void auto_progress_update(const char *stage, size_t done, size_t total, void *user) {
    auto_progress *p = user;
    snprintf(p->stage, sizeof p->stage, "%s: %s", p->build, stage);
    p->fn(p->stage, done, total, p->user);
}

/* An engine from a copy of g: options with this precision and these fp32 layers. */
static tci_status build_copy(const ir_graph *g, const tci_engine_options *options,
                             tci_precision precision, char *const *fp32_layers, bool mark_all,
                             auto_progress *progress, tci_engine **out) {
    ir_graph *copy = NULL;
    TRY_STATUS(ir_graph_clone(g, &copy));
    tci_engine_options o = *options;
    o.precision = precision;
    o.fp32_layers = (const char *const *)fp32_layers;
    o.mark_all_outputs = mark_all;
    o.calibration_inputs = NULL;
    o.num_calibration_inputs = 0;
    o.accuracy_target = 0; /* an ordinary build (the search's options are refused there) */
    if (o.progress_fn) {
        o.progress_fn = auto_progress_update;
        o.progress_user = progress;
    }
    return api_finish_create(copy, &o, NULL, out); /* owns copy */
}

/* Runs test on the inputs; *mismatches: NaN/Inf in its float outputs where the outputs of base
 * (the fp32 run on the same inputs) are finite, and where there are any, *report locates them;
 * *error: the largest relative L2 error of those outputs. */
static tci_status run_round(tci_engine *test, const tci_context *base, const tci_tensor *inputs,
                            size_t num_inputs, uint64_t *mismatches, double *error,
                            tci_nonfinite_report *report) {
    tci_context *c = NULL;
    *mismatches = 0;
    *error = 0;
    tci_status st = tci_context_create(test, &c);
    if (st == TCI_OK) st = tci_context_run(c, inputs, num_inputs);
    for (size_t i = 0; st == TCI_OK && i < test->graph->num_outputs; i++) {
        tci_tensor t, b;
        st = tci_context_output(c, i, &t);
        if (st == TCI_OK) st = tci_context_output(base, i, &b);
        if (st != TCI_OK || t.dtype != TCI_DTYPE_FLOAT) continue;
        tci_compare_result r;
        tci_compare_result_init(&r);
        st = tci_compare(&t, &b, &r);
        *mismatches += r.non_finite;
        if (!(r.relative_l2 <= *error)) *error = r.relative_l2; /* NaN stays */
    }
    if (st == TCI_OK && *mismatches) {
        /* what is found is the search's to report, not a warning of the engine's */
        api_log log = test->log;
        test->log.fn = NULL;
        st = tci_context_nonfinite(c, report);
        test->log = log;
    }
    tci_context_destroy(c);
    return st;
}

/* Whether node `name` of e's graph is in fp32 by one of the entries. */
static bool layer_in_fp32(const tci_engine *e, const char *name, char *const *entries) {
    const ir_graph *g = e->graph;
    for (size_t i = 0; i < g->num_nodes; i++) {
        if (strcmp(g->nodes[i]->name, name) != 0) continue;
        for (char *const *x = entries; x && *x; x++)
            if (plan_fp32_selects(*x, g->nodes[i])) return true;
    }
    return false;
}

/* accuracy_target's measurements: the fp32 engine with every layer's output marked, and its
 * run on the calibration inputs; built the first time a round needs them. */
typedef struct auto_marked {
    tci_engine *fp32;
    tci_context *base;
} auto_marked;

/* The error each layer of the marked fp16 engine e (run as c) adds, against the marked fp32 run:
 * errors (per node) of its first output, input_errors the largest of the nodes it reads. */
static tci_status measure_layers(const tci_engine *e, const tci_context *c,
                                 const tci_context *base, double *errors, double *input_errors) {
    const ir_graph *g = e->graph;
    tci_status st = TCI_OK;
    for (size_t k = 0; st == TCI_OK && k < g->num_outputs; k++) {
        const ir_tensor *t = g->outputs[k];
        if (!t->producer || t->producer->outputs[0] != t) continue;
        tci_tensor a, b;
        st = tci_context_output(c, k, &a);
        if (st == TCI_OK) st = tci_context_output(base, k, &b);
        if (st != TCI_OK || a.dtype != TCI_DTYPE_FLOAT || b.dtype != TCI_DTYPE_FLOAT) continue;
        if (a.name && b.name && strcmp(a.name, b.name) != 0)
            return status_error(TCI_ERR_INTERNAL, "TCI_PRECISION_AUTO: the marked engines' "
                                "output %zu is '%s' in one and '%s' in the other", k, a.name,
                                b.name);
        tci_compare_result r;
        tci_compare_result_init(&r);
        st = tci_compare(&a, &b, &r);
        if (st == TCI_OK && isfinite(r.relative_l2)) errors[t->producer->index] = r.relative_l2;
    }
    for (size_t i = 0; st == TCI_OK && i < g->num_nodes; i++) {
        const ir_node *node = g->nodes[i];
        for (int j = 0; j < node->num_inputs; j++) {
            const ir_tensor *x = node->inputs[j];
            if (x && x->producer && errors[x->producer->index] > input_errors[i])
                input_errors[i] = errors[x->producer->index];
        }
    }
    return st;
}

/* The layer (a node name, malloc'd; NULL: none) that adds the most error with list's fp32
 * layers, and that error (*added). */
static tci_status worst_layer(const ir_graph *g, const tci_engine_options *options,
                              const tci_tensor *inputs, size_t num_inputs, char *const *list,
                              auto_marked *m, auto_progress *progress, char **out_layer,
                              double *added) {
    *out_layer = NULL;
    tci_status st = TCI_OK;
    if (!m->fp32) {
        snprintf(progress->build, sizeof progress->build, "precision auto, fp32 layers");
        st = build_copy(g, options, TCI_PRECISION_FP32, NULL, true, progress, &m->fp32);
        if (st == TCI_OK) st = tci_context_create(m->fp32, &m->base);
        if (st == TCI_OK) st = tci_context_run(m->base, inputs, num_inputs);
        TRY_STATUS(st);
    }
    tci_engine *e = NULL;
    tci_context *c = NULL;
    snprintf(progress->build, sizeof progress->build, "precision auto, fp16 layers");
    st = build_copy(g, options, TCI_PRECISION_FP16, list, true, progress, &e);
    if (st == TCI_OK) st = tci_context_create(e, &c);
    if (st == TCI_OK) st = tci_context_run(c, inputs, num_inputs);
    size_t n = st == TCI_OK ? e->graph->num_nodes : 0;
    double *errors = calloc(n + 1, sizeof *errors), *input_errors = calloc(n + 1, sizeof *errors);
    bool *fp32 = calloc(n + 1, sizeof *fp32);
    if (st == TCI_OK && (!errors || !input_errors || !fp32))
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == TCI_OK && e->graph->num_outputs != m->fp32->graph->num_outputs)
        st = status_error(TCI_ERR_INTERNAL, "TCI_PRECISION_AUTO: the marked fp16 and fp32 "
                          "engines have %zu and %zu outputs", e->graph->num_outputs,
                          m->fp32->graph->num_outputs);
    if (st == TCI_OK) st = measure_layers(e, c, m->base, errors, input_errors);
    plan_options fp32_of = {(const char *const *)list, TCI_PRECISION_FP16};
    if (st == TCI_OK) st = plan_fp32_nodes(e->graph, &fp32_of, fp32);
    int worst = st == TCI_OK ? api_auto_worst_layer(n, errors, input_errors, fp32) : -1;
    if (worst >= 0) {
        *added = errors[worst] - input_errors[worst];
        *out_layer = strdup(e->graph->nodes[worst]->name);
        if (!*out_layer) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    free(errors);
    free(input_errors);
    free(fp32);
    tci_context_destroy(c);
    tci_engine_destroy(e);
    return st;
}

/* One round's next layer (malloc'd into *out_layer; NULL: the engine e is the one), from the
 * overflow and then the accuracy target. */
static tci_status next_layer(const ir_graph *g, const tci_engine_options *options,
                             const tci_tensor *inputs, size_t num_inputs, const tci_context *base,
                             char *const *list, auto_marked *m, auto_progress *progress,
                             int round, tci_engine *e, double *error, char **out_layer) {
    const api_log log = {options->log_fn, options->log_user, options->log_level};
    tci_nonfinite_report report;
    tci_nonfinite_report_init(&report);
    auto_round r = {round, 0, &report, false};
    const char *overflow = NULL;
    *out_layer = NULL;
    TRY_STATUS(run_round(e, base, inputs, num_inputs, &r.mismatches, error, &report));
    if (r.mismatches) r.layer_in_fp32 = layer_in_fp32(e, report.layer, list);
    TRY_STATUS(api_auto_next_layer(&r, &overflow));
    if (overflow) {
        api_log_message(&log, TCI_LOG_INFO,
                        "TCI_PRECISION_AUTO round %d: %llu NaN/Inf values in the fp16 outputs "
                        "where the fp32 engine's are finite; layer '%s' (%s) produces them "
                        "first: kept in fp32",
                        round, (unsigned long long)r.mismatches, report.layer, report.op_type);
        *out_layer = strdup(overflow);
        return *out_layer ? TCI_OK : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    double target = options->accuracy_target;
    if (!(target > 0) || *error <= target) return TCI_OK;
    if (round >= TCI_PRECISION_AUTO_MAX_ROUNDS)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: after %d rounds the outputs' relative L2 error "
                            "is %.3g, over tci_engine_options.accuracy_target %g",
                            round, *error, target);
    double added = 0;
    TRY_STATUS(worst_layer(g, options, inputs, num_inputs, list, m, progress, out_layer, &added));
    if (!*out_layer)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: the outputs' relative L2 error is %.3g, over "
                            "tci_engine_options.accuracy_target %g, and no layer left in fp16 "
                            "adds error",
                            *error, target);
    api_log_message(&log, TCI_LOG_INFO,
                    "TCI_PRECISION_AUTO round %d: the outputs' relative L2 error %.3g is over "
                    "the target %g; layer '%s' adds the most (%.3g): kept in fp32",
                    round, *error, target, *out_layer, added);
    return TCI_OK;
}

/* The rounds: *list holds the user's fp32 layers, then those moved; *out the engine that meets
 * the criteria. */
static tci_status search(const ir_graph *g, const tci_engine_options *options,
                         const tci_tensor *inputs, size_t num_inputs, const tci_context *base,
                         char **list, size_t num_user, auto_progress *progress,
                         tci_engine **out) {
    auto_marked m = {NULL, NULL};
    size_t n = num_user;
    tci_status st = TCI_OK;
    for (int round = 1; st == TCI_OK && !*out; round++) {
        tci_engine *e = NULL;
        char *layer = NULL;
        double error = 0;
        snprintf(progress->build, sizeof progress->build, "precision auto, round %d", round);
        st = build_copy(g, options, TCI_PRECISION_FP16, list, false, progress, &e);
        if (st == TCI_OK)
            st = next_layer(g, options, inputs, num_inputs, base, list, &m, progress, round, e,
                            &error, &layer);
        if (st == TCI_OK && !layer) {
            e->num_auto_fp32 = n - num_user;
            e->auto_error = error;
            e->auto_target = options->accuracy_target;
            *out = e;
            break;
        }
        if (st == TCI_OK) list[n++] = layer; /* at most one a round: list has room */
        tci_engine_destroy(e);
    }
    tci_context_destroy(m.base);
    tci_engine_destroy(m.fp32);
    return st;
}

/* The log's summary: the layers moved, in the order they were. */
static void log_result(const tci_engine_options *options, char *const *moved, size_t count,
                       double error) {
    const api_log log = {options->log_fn, options->log_user, options->log_level};
    char names[1024];
    size_t pos = 0;
    names[0] = '\0';
    for (size_t i = 0; i < count && pos < sizeof names; i++) {
        int w = snprintf(names + pos, sizeof names - pos, "%s'%s'", i ? ", " : "", moved[i]);
        if (w < 0) break;
        pos += (size_t)w;
    }
    if (pos >= sizeof names) memcpy(names + sizeof names - 5, "...", 4);
    if (count)
        api_log_message(&log, TCI_LOG_INFO,
                        "TCI_PRECISION_AUTO: %zu layer%s kept in fp32: %s; the outputs' "
                        "relative L2 error against the fp32 engine: %.3g",
                        count, count == 1 ? "" : "s", names, error);
    else
        api_log_message(&log, TCI_LOG_INFO,
                        "TCI_PRECISION_AUTO: no layer kept in fp32; the outputs' relative L2 "
                        "error against the fp32 engine: %.3g",
                        error);
}

static tci_status check_options(const tci_engine_options *o) {
    if (o->backend != TCI_BACKEND_GPU)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "TCI_PRECISION_AUTO compares the fp16 GPU engine with the fp32 one: "
                            "it needs TCI_BACKEND_GPU (tci_engine_options.backend)");
    if (o->plan_only)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "TCI_PRECISION_AUTO runs the engines it builds: not with "
                            "tci_engine_options.plan_only");
    if (!(o->accuracy_target >= 0) || isinf(o->accuracy_target))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.accuracy_target is %g; 0 (overflow only) or a "
                            "relative L2 error above 0 expected",
                            o->accuracy_target);
    if (o->num_calibration_inputs && !o->calibration_inputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.num_calibration_inputs is %zu but "
                            "calibration_inputs is NULL",
                            o->num_calibration_inputs);
    return TCI_OK;
}

tci_status api_auto_create(ir_graph *g, const tci_engine_options *options,
                           tci_engine **out_engine) {
    auto_progress progress = {options->progress_fn, options->progress_user, "", ""};
    tci_engine *fp32 = NULL, *e = NULL;
    tci_context *base = NULL;
    tci_tensor *random = NULL;
    size_t num_user = 0;
    while (options->fp32_layers && options->fp32_layers[num_user]) num_user++;
    /* the user's layers, then at most one per round */
    char **list = calloc(num_user + TCI_PRECISION_AUTO_MAX_ROUNDS + 1, sizeof *list);
    tci_status st = check_options(options);
    if (st == TCI_OK && !list) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; st == TCI_OK && i < num_user; i++)
        if (!(list[i] = strdup(options->fp32_layers[i])))
            st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(progress.build, sizeof progress.build, "precision auto, fp32 engine");
    if (st == TCI_OK)
        st = build_copy(g, options, TCI_PRECISION_FP32, NULL, false, &progress, &fp32);
    const tci_tensor *inputs = options->calibration_inputs;
    size_t num_inputs = options->num_calibration_inputs;
    if (st == TCI_OK && inputs && num_inputs != fp32->graph->num_inputs)
        st = status_error(TCI_ERR_INVALID_ARGUMENT,
                          "tci_engine_options.num_calibration_inputs is %zu; the model has %zu "
                          "inputs",
                          num_inputs, fp32->graph->num_inputs);
    if (st == TCI_OK && !inputs) {
        num_inputs = fp32->graph->num_inputs;
        st = random_inputs(fp32, &random);
        inputs = random;
    }
    if (st == TCI_OK) st = tci_context_create(fp32, &base);
    if (st == TCI_OK) st = tci_context_run(base, inputs, num_inputs);
    if (st == TCI_OK)
        st = search(g, options, inputs, num_inputs, base, list, num_user, &progress, &e);
    tci_context_destroy(base);
    tci_engine_destroy(fp32);
    size_t moved = e ? e->num_auto_fp32 : 0;
    double error = e ? e->auto_error : -1;
    if (st == TCI_OK && options->mark_all_outputs) {
        /* the search compares the engine as it runs (fused); the layers marked, it is rebuilt */
        tci_engine_destroy(e);
        e = NULL;
        snprintf(progress.build, sizeof progress.build, "precision auto, all outputs marked");
        st = build_copy(g, options, TCI_PRECISION_FP16, list, true, &progress, &e);
        if (st == TCI_OK) {
            e->num_auto_fp32 = moved;
            e->auto_error = error;
            e->auto_target = options->accuracy_target;
        }
    }
    if (st == TCI_OK) log_result(options, list + num_user, moved, error);
    for (size_t i = 0; random && i < num_inputs; i++) tci_tensor_release(&random[i]);
    free(random);
    for (char **s = list; s && *s; s++) free(*s);
    free(list);
    if (st != TCI_OK) {
        tci_engine_destroy(e);
        ir_graph_destroy(g);
        return st;
    }
    /* the engine's graph is a clone of g, sharing its names and constant data (engine files
     * are written from them): g goes with the engine */
    e->clone_source = g;
    *out_engine = e;
    return TCI_OK;
}
