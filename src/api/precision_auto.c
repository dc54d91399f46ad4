/* TCI_PRECISION_AUTO: builds the fp16 engine, runs it on calibration inputs against the GPU
 * fp32 engine, and while its outputs hold NaN or Inf that the fp32 ones do not, keeps out of fp16
 * (in fp32, or tci_engine_options.kept_precision: tf32, bf16) the first layer producing them
 * together with every layer that produces them from finite inputs in a run with every layer
 * marked (parallel branches), and builds again; where that layer is kept already, the layers
 * producing what it reads join it. With an accuracy target,
 * while the error is over it, the layers are ranked by the error each adds (both engines built
 * with every layer marked) and the fewest from the top of that ranking that meet the target are
 * found by bisection, each try measured on the engine as it ships (fused). Every build is an
 * ordinary one (api_finish_create) of a copy of the loaded graph; the result is an fp16 engine
 * with fp32 layers, which an engine file stores like any other. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/precision_auto.h"
#include "graph/plan.h"
#include "layers/op.h"
#include "util/half.h"

#define HALF_MAX 65504.0 /* fp16's largest finite value */

const char *api_auto_kept_name(const tci_engine_options *options) {
    return options->kept_precision == TCI_PRECISION_BF16   ? "bf16"
           : options->kept_precision == TCI_PRECISION_TF32 ? "tf32"
                                                            : "fp32";
}

tci_status api_auto_next_layer(const auto_round *r, const char **out_layer) {
    *out_layer = NULL;
    if (!r->mismatches) return TCI_OK;
    const tci_nonfinite_report *n = r->report;
    if (n->input_index >= 0)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: engine input %ld holds NaN/Inf in fp16 (its "
                            "values are past fp16's range): no layer kept out of fp16 avoids "
                            "that",
                            n->input_index);
    if (!n->found)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: the fp16 outputs hold %llu NaN/Inf values where "
                            "the fp32 engine's are finite, but no layer of the re-run produced "
                            "them",
                            (unsigned long long)r->mismatches);
    const char *kept = r->kept ? r->kept : "fp32";
    if (r->layer_in_fp32 && !r->upstream)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: layer '%s' (%s) is kept in %s, and so are the "
                            "layers producing what it reads, and it is still the first to produce "
                            "NaN/Inf (%llu in the outputs where the fp32 engine's are finite): "
                            "%s does not fix it",
                            n->layer, n->op_type, kept, (unsigned long long)r->mismatches, kept);
    if (r->round >= TCI_PRECISION_AUTO_MAX_ROUNDS)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "TCI_PRECISION_AUTO: after %d rounds the fp16 outputs still hold %llu "
                            "NaN/Inf values where the fp32 engine's are finite (next: layer '%s', "
                            "%s); use TCI_PRECISION_BF16 or TCI_PRECISION_FP32",
                            r->round, (unsigned long long)r->mismatches, n->layer, n->op_type);
    *out_layer = n->layer;
    return TCI_OK;
}

/* descending by added error, then by node order (a stable ranking) */
typedef struct ranked_layer {
    double added;
    int index;
} ranked_layer;

static int by_added(const void *a, const void *b) {
    const ranked_layer *x = a, *y = b;
    if (x->added != y->added) return x->added > y->added ? -1 : 1;
    return x->index - y->index;
}

size_t api_auto_rank(size_t count, const double *errors, const double *input_errors,
                     const bool *in_fp32, int *order) {
    ranked_layer *r = malloc((count + 1) * sizeof *r);
    if (!r) return 0;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        double added = errors[i] - input_errors[i];
        if (in_fp32[i] || !(added > 0)) continue; /* NaN (not measured) adds nothing */
        r[n++] = (ranked_layer){added, (int)i};
    }
    qsort(r, n, sizeof *r, by_added);
    for (size_t i = 0; i < n; i++) order[i] = r[i].index;
    free(r);
    /* then the measured layers adding none, in node order: the fp16 storage of their outputs
     * (a ReLU between two fp32 convolutions) still rounds what the next layer reads */
    for (size_t i = 0; i < count; i++)
        if (!in_fp32[i] && isfinite(errors[i]) && !(errors[i] - input_errors[i] > 0))
            order[n++] = (int)i;
    return n;
}

void api_auto_overflow_layers(size_t count, const uint64_t *nonfinite,
                              const uint64_t *input_nonfinite, const double *range,
                              const double *input_range, const bool *in_fp32, bool *pick) {
    for (size_t i = 0; i < count; i++)
        pick[i] = !in_fp32[i] && ((nonfinite[i] > 0 && input_nonfinite[i] == 0) ||
                                  range[i] > HALF_MAX || input_range[i] > HALF_MAX);
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
    char build[96];
    char stage[160];
} auto_progress;

static void auto_progress_update(const char *stage, size_t done, size_t total, void *user) {
    auto_progress *p = user;
    snprintf(p->stage, sizeof p->stage, "%s: %s", p->build, stage);
    p->fn(p->stage, done, total, p->user);
}

/* An engine from a copy of g: options with this precision and these fp32 layers (kept in
 * options->kept_precision in an fp16 engine; the fp32 engine keeps nothing). */
static tci_status build_copy(const ir_graph *g, const tci_engine_options *options,
                             tci_precision precision, char *const *fp32_layers, int mark_all,
                             auto_progress *progress, tci_engine **out) {
    ir_graph *copy = NULL;
    TRY_STATUS(ir_graph_clone(g, &copy));
    tci_engine_options o = *options;
    o.precision = precision;
    o.fp32_layers = (const char *const *)fp32_layers;
    if (precision != TCI_PRECISION_FP16) o.kept_precision = TCI_PRECISION_FP32;
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
static bool node_in_fp32(const ir_node *node, char *const *entries) {
    for (char *const *x = entries; x && *x; x++)
        if (plan_fp32_selects(*x, node)) return true;
    return false;
}

static const ir_node *find_node(const tci_engine *e, const char *name) {
    const ir_graph *g = e->graph;
    for (size_t i = 0; i < g->num_nodes; i++)
        if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    return NULL;
}

static bool layer_in_fp32(const tci_engine *e, const char *name, char *const *entries) {
    const ir_node *node = find_node(e, name);
    return node && node_in_fp32(node, entries);
}

/* The fp32 layers: the user's, then those the search moved; NULL-terminated, as
 * tci_engine_options.fp32_layers takes them. */
typedef struct layer_list {
    char **names;
    size_t count, cap;
} layer_list;

static tci_status list_push(layer_list *l, const char *name) {
    if (l->count + 1 >= l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **grown = realloc(l->names, cap * sizeof *grown);
        if (!grown) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        l->names = grown;
        l->cap = cap;
    }
    if (!(l->names[l->count] = strdup(name)))
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    l->names[++l->count] = NULL;
    return TCI_OK;
}

/* Drops the names past the first count. */
static void list_truncate(layer_list *l, size_t count) {
    while (l->count > count) {
        free(l->names[--l->count]);
        l->names[l->count] = NULL;
    }
}

static void list_free(layer_list *l) {
    list_truncate(l, 0);
    free(l->names);
}

/* The layers producing the float tensors node reads, not in fp32 yet by list: each producer, and
 * through data movement (Reshape, Expand, Concat...: they keep the precision of what they move)
 * the producer of what it moves too. *count: how many; pushed onto list when push (a layer
 * reached twice counts once there). */
static tci_status node_upstream(const ir_node *node, layer_list *list, bool push, size_t *count) {
    for (int i = 0; node && i < node->num_inputs; i++) {
        const ir_tensor *t = node->inputs[i];
        while (t && t->producer &&
               (t->dtype == TCI_DTYPE_FLOAT || t->dtype == TCI_DTYPE_FLOAT16 ||
                t->dtype == TCI_DTYPE_BFLOAT16)) {
            const ir_node *p = t->producer;
            if (!node_in_fp32(p, list->names)) {
                ++*count;
                if (push) TRY_STATUS(list_push(list, p->name));
            }
            if (!(p->desc->flags & OP_MOVES_DATA) || p->num_inputs < 1) break;
            t = p->inputs[0];
        }
    }
    return TCI_OK;
}

/* Whether two node names differ only in their numbers ("/blocks.3/attn/Div_1" and
 * "/blocks.7/attn/Div_2"): the same layer of repeated blocks, as exporters name them. */
static bool same_but_numbers(const char *a, const char *b) {
    while (*a || *b) {
        bool da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
        if (da != db) return false;
        if (da) {
            while (*a >= '0' && *a <= '9') a++;
            while (*b >= '0' && *b <= '9') b++;
            continue;
        }
        if (*a++ != *b++) return false;
    }
    return true;
}

/* The walk back from layer name of e, kept already and still producing NaN/Inf: *count the layers
 * producing what it reads not kept yet (none: the walk cannot help). With push, those join list,
 * and so does the same layer of every other repeated block (same op type, a name that differs
 * only in its numbers) with the layers producing what it reads: the first NaN/Inf hides those
 * blocks' own underflow, which would otherwise take two rounds a block. */
static tci_status upstream_layers(const tci_engine *e, const char *name, layer_list *list,
                                  bool push, size_t *count) {
    *count = 0;
    const ir_node *node = find_node(e, name);
    if (!push || !node) return node_upstream(node, list, false, count);
    const ir_graph *g = e->graph;
    for (size_t i = 0; i < g->num_nodes; i++) {
        const ir_node *n = g->nodes[i];
        if (n != node && (strcmp(n->op_type, node->op_type) != 0 ||
                          !same_but_numbers(n->name, node->name)))
            continue;
        if (n != node && !node_in_fp32(n, list->names)) {
            ++*count;
            TRY_STATUS(list_push(list, n->name));
        }
        TRY_STATUS(node_upstream(n, list, true, count));
    }
    return TCI_OK;
}

/* The measurements that look inside: the fp32 engine with every layer's output marked and its
 * run on the calibration inputs, built the first time they are needed. */
typedef struct auto_marked {
    tci_engine *fp32;
    tci_context *base;
} auto_marked;

/* Per node of the marked fp16 engine e (run as c) against the marked fp32 run: errors, the
 * relative L2 error of its first output (NaN: not measured), input_errors the largest of the
 * nodes it reads; nonfinite, the NaN/Inf of its output where fp32's is finite, and
 * input_nonfinite the most of the nodes it reads. */
typedef struct layer_errors {
    size_t count;
    double *errors, *input_errors;
    double *range, *input_range; /* the largest magnitude of the fp32 run's output, and of what
                                    the node reads */
    uint64_t *nonfinite, *input_nonfinite;
    bool *in_fp32;
} layer_errors;

static void layer_errors_free(layer_errors *l) {
    free(l->errors);
    free(l->input_errors);
    free(l->range);
    free(l->input_range);
    free(l->nonfinite);
    free(l->input_nonfinite);
    free(l->in_fp32);
}

static tci_status measure_layers(const tci_engine *e, const tci_context *c,
                                 const tci_context *base, layer_errors *l) {
    const ir_graph *g = e->graph;
    tci_status st = TCI_OK;
    for (size_t i = 0; i < l->count; i++) l->errors[i] = NAN;
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
        if (st != TCI_OK) break;
        l->nonfinite[t->producer->index] = r.non_finite;
        double most = 0;
        const float *v = b.data;
        for (int64_t x = 0, n = tci_tensor_count(&b); x < n; x++)
            if (fabs(v[x]) > most && isfinite(v[x])) most = fabs(v[x]);
        l->range[t->producer->index] = most;
        if (isfinite(r.relative_l2)) l->errors[t->producer->index] = r.relative_l2;
    }
    for (size_t i = 0; st == TCI_OK && i < g->num_nodes; i++) {
        const ir_node *node = g->nodes[i];
        for (int j = 0; j < node->num_inputs; j++) {
            const ir_tensor *x = node->inputs[j];
            if (!x || !x->producer) continue;
            size_t from = x->producer->index;
            if (l->errors[from] > l->input_errors[i]) l->input_errors[i] = l->errors[from];
            if (l->nonfinite[from] > l->input_nonfinite[i])
                l->input_nonfinite[i] = l->nonfinite[from];
            if (l->range[from] > l->input_range[i]) l->input_range[i] = l->range[from];
        }
    }
    return st;
}

/* Builds the fp16 engine with list's fp32 layers and every layer marked, runs it and measures
 * each layer against the marked fp32 run (*l: allocated here; *names: the nodes' names, valid
 * until the engine, returned in *out_engine, is destroyed). */
static tci_status measure(const ir_graph *g, const tci_engine_options *options,
                          const tci_tensor *inputs, size_t num_inputs, const layer_list *list,
                          auto_marked *m, auto_progress *progress, layer_errors *l,
                          tci_engine **out_engine) {
    memset(l, 0, sizeof *l);
    *out_engine = NULL;
    tci_status st = TCI_OK;
    if (!m->fp32) {
        snprintf(progress->build, sizeof progress->build, "precision auto, fp32 layers");
        st = build_copy(g, options, TCI_PRECISION_FP32, NULL, TCI_MARK_OUTPUTS_UNFUSED, progress,
                        &m->fp32);
        if (st == TCI_OK) st = tci_context_create(m->fp32, &m->base);
        if (st == TCI_OK) st = tci_context_run(m->base, inputs, num_inputs);
        TRY_STATUS(st);
    }
    tci_engine *e = NULL;
    tci_context *c = NULL;
    snprintf(progress->build, sizeof progress->build, "precision auto, fp16 layers");
    st = build_copy(g, options, TCI_PRECISION_FP16, list->names, TCI_MARK_OUTPUTS_UNFUSED, progress,
                    &e);
    if (st == TCI_OK) st = tci_context_create(e, &c);
    if (st == TCI_OK) st = tci_context_run(c, inputs, num_inputs);
    size_t n = st == TCI_OK ? e->graph->num_nodes : 0;
    l->count = n;
    l->errors = calloc(n + 1, sizeof *l->errors);
    l->input_errors = calloc(n + 1, sizeof *l->input_errors);
    l->nonfinite = calloc(n + 1, sizeof *l->nonfinite);
    l->input_nonfinite = calloc(n + 1, sizeof *l->input_nonfinite);
    l->in_fp32 = calloc(n + 1, sizeof *l->in_fp32);
    l->range = calloc(n + 1, sizeof *l->range);
    l->input_range = calloc(n + 1, sizeof *l->input_range);
    if (st == TCI_OK && (!l->errors || !l->input_errors || !l->nonfinite ||
                         !l->input_nonfinite || !l->in_fp32 || !l->range || !l->input_range))
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == TCI_OK && e->graph->num_outputs != m->fp32->graph->num_outputs)
        st = status_error(TCI_ERR_INTERNAL, "TCI_PRECISION_AUTO: the marked fp16 and fp32 "
                          "engines have %zu and %zu outputs", e->graph->num_outputs,
                          m->fp32->graph->num_outputs);
    if (st == TCI_OK) st = measure_layers(e, c, m->base, l);
    plan_options fp32_of = {(const char *const *)list->names, TCI_PRECISION_FP16,
                            TCI_PRECISION_FP32};
    if (st == TCI_OK) st = plan_fp32_nodes(e->graph, &fp32_of, l->in_fp32);
    tci_context_destroy(c);
    if (st != TCI_OK) {
        layer_errors_free(l);
        tci_engine_destroy(e);
        return st;
    }
    *out_engine = e;
    return TCI_OK;
}

/* Overflow round: the report's layer, and with it every other layer of the marked run that
 * produces NaN/Inf from finite inputs (parallel branches overflow in the same round), and every
 * layer whose output or input in the fp32 run is past fp16's range (their casts would
 * overflow next). */
static tci_status overflow_layers(const ir_graph *g, const tci_engine_options *options,
                                  const tci_tensor *inputs, size_t num_inputs, layer_list *list,
                                  auto_marked *m, auto_progress *progress, const char *first) {
    layer_errors l;
    tci_engine *marked = NULL;
    TRY_STATUS(list_push(list, first));
    TRY_STATUS(measure(g, options, inputs, num_inputs, list, m, progress, &l, &marked));
    bool *pick = calloc(l.count + 1, sizeof *pick);
    tci_status st = pick ? TCI_OK : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == TCI_OK)
        api_auto_overflow_layers(l.count, l.nonfinite, l.input_nonfinite, l.range, l.input_range,
                                 l.in_fp32, pick);
    for (size_t i = 0; st == TCI_OK && i < l.count; i++)
        if (pick[i]) /* not in fp32 yet, so not on the list */
            st = list_push(list, marked->graph->nodes[i]->name);
    free(pick);
    layer_errors_free(&l);
    tci_engine_destroy(marked);
    return st;
}

/* Builds the fused fp16 engine with list's fp32 layers and runs it against base: *error, and
 * *mismatches with *report as run_round gives them. */
static tci_status try_list(const ir_graph *g, const tci_engine_options *options,
                           const tci_tensor *inputs, size_t num_inputs, const tci_context *base,
                           const layer_list *list, auto_progress *progress, const char *what,
                           tci_engine **out, double *error, uint64_t *mismatches,
                           tci_nonfinite_report *report) {
    snprintf(progress->build, sizeof progress->build, "precision auto, %s", what);
    TRY_STATUS(build_copy(g, options, TCI_PRECISION_FP16, list->names, TCI_MARK_OUTPUTS_NONE,
                          progress, out));
    tci_status st = run_round(*out, base, inputs, num_inputs, mismatches, error, report);
    if (st != TCI_OK) {
        tci_engine_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* accuracy_target: ranks the layers not in fp32 by the error each adds (the marked engines),
 * then finds by bisection the fewest of that ranking, from the top, that bring the fused
 * engine's error to the target. *e (the engine so far, over the target) is replaced by the
 * one that meets it; list gets its layers. */
static tci_status meet_target(const ir_graph *g, const tci_engine_options *options,
                              const tci_tensor *inputs, size_t num_inputs,
                              const tci_context *base, layer_list *list, auto_marked *m,
                              auto_progress *progress, tci_engine **e, double *error) {
    const api_log log = {options->log_fn, options->log_user, options->log_level};
    double target = options->accuracy_target;
    layer_errors l;
    tci_engine *marked = NULL;
    TRY_STATUS(measure(g, options, inputs, num_inputs, list, m, progress, &l, &marked));
    int *order = calloc(l.count + 1, sizeof *order);
    tci_status st = order ? TCI_OK : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    size_t ranked = order ? api_auto_rank(l.count, l.errors, l.input_errors, l.in_fp32, order) : 0;
    if (st == TCI_OK && !ranked)
        st = status_error(TCI_ERR_UNSUPPORTED,
                          "TCI_PRECISION_AUTO: the outputs' relative L2 error is %.3g, over "
                          "tci_engine_options.accuracy_target %g, and no layer left in fp16 "
                          "has a measured error to rank",
                          *error, target);
    size_t kept = list->count, lo = 0, hi = ranked; /* lo: over the target; hi: to be tried */
    bool hi_known = false;
    tci_engine *best = NULL;
    double best_error = 0;
    int tries = 0;
    while (st == TCI_OK && (!hi_known || hi - lo > 1)) {
        size_t k = hi_known ? lo + (hi - lo) / 2 : hi; /* all of them first */
        list_truncate(list, kept);
        for (size_t i = 0; st == TCI_OK && i < k; i++)
            st = list_push(list, marked->graph->nodes[order[i]]->name);
        char what[48];
        snprintf(what, sizeof what, "%zu of %zu ranked layers in %s", k, ranked,
                 api_auto_kept_name(options));
        tci_engine *t = NULL;
        double err = 0;
        uint64_t mismatches = 0;
        tci_nonfinite_report report;
        tci_nonfinite_report_init(&report);
        if (st == TCI_OK)
            st = try_list(g, options, inputs, num_inputs, base, list, progress, what, &t, &err,
                          &mismatches, &report);
        if (st != TCI_OK) break;
        tries++;
        bool meets = !mismatches && err <= target;
        api_log_message(&log, TCI_LOG_INFO,
                        "TCI_PRECISION_AUTO: the %zu layers adding the most error in %s: "
                        "relative L2 error %.3g (%s the target %g)",
                        k, api_auto_kept_name(options), err, meets ? "meets" : "over", target);
        if (!hi_known && !meets) {
            tci_engine_destroy(t);
            st = status_error(TCI_ERR_UNSUPPORTED,
                              "TCI_PRECISION_AUTO: with all %zu measured layers in %s "
                              "the outputs' relative L2 error is %.3g, over "
                              "tci_engine_options.accuracy_target %g",
                              k, api_auto_kept_name(options), err, target);
            break;
        }
        hi_known = true;
        if (meets) {
            tci_engine_destroy(best);
            best = t;
            best_error = err;
            hi = k;
        } else {
            tci_engine_destroy(t);
            lo = k;
        }
    }
    if (st == TCI_OK) {
        /* the list as the best engine was built */
        list_truncate(list, kept);
        for (size_t i = 0; st == TCI_OK && i < hi; i++)
            st = list_push(list, marked->graph->nodes[order[i]]->name);
        api_log_message(&log, TCI_LOG_INFO,
                        "TCI_PRECISION_AUTO: %zu of %zu ranked layers in %s meet the target "
                        "%g (relative L2 error %.3g; %d builds)",
                        hi, ranked, api_auto_kept_name(options), target, best_error, tries);
    }
    free(order);
    layer_errors_free(&l);
    tci_engine_destroy(marked);
    if (st != TCI_OK) {
        tci_engine_destroy(best);
        return st;
    }
    tci_engine_destroy(*e);
    *e = best;
    *error = best_error;
    return TCI_OK;
}

/* The search: overflow rounds, then the accuracy target; list holds the user's fp32 layers
 * (num_user), then those moved; *out the engine that meets the criteria. */
static tci_status search(const ir_graph *g, const tci_engine_options *options,
                         const tci_tensor *inputs, size_t num_inputs, const tci_context *base,
                         layer_list *list, size_t num_user, auto_progress *progress,
                         tci_engine **out) {
    const api_log log = {options->log_fn, options->log_user, options->log_level};
    auto_marked m = {NULL, NULL};
    tci_engine *e = NULL;
    double error = 0;
    tci_status st = TCI_OK;
    for (int round = 1; st == TCI_OK; round++) {
        char what[48];
        snprintf(what, sizeof what, "round %d", round);
        tci_nonfinite_report report;
        tci_nonfinite_report_init(&report);
        auto_round r = {round, 0, &report, false, 0, api_auto_kept_name(options)};
        const char *first = NULL;
        st = try_list(g, options, inputs, num_inputs, base, list, progress, what, &e, &error,
                      &r.mismatches, &report);
        if (st == TCI_OK && r.mismatches) {
            r.layer_in_fp32 = layer_in_fp32(e, report.layer, list->names);
            if (r.layer_in_fp32)
                st = upstream_layers(e, report.layer, list, false, &r.upstream);
        }
        if (st == TCI_OK) st = api_auto_next_layer(&r, &first);
        if (st != TCI_OK || !first) break;
        size_t before = list->count;
        if (r.layer_in_fp32) {
            st = upstream_layers(e, first, list, true, &r.upstream);
            api_log_message(&log, TCI_LOG_INFO,
                            "TCI_PRECISION_AUTO round %d: layer '%s' (%s) is in %s and still "
                            "produces NaN/Inf from what it reads (%llu in the outputs): %zu "
                            "layers join it in %s: those producing its inputs, and the same layer "
                            "of the other repeated blocks (named alike but for numbers) with "
                            "theirs",
                            round, report.layer, report.op_type, api_auto_kept_name(options),
                            (unsigned long long)r.mismatches, list->count - before,
                            api_auto_kept_name(options));
            tci_engine_destroy(e);
            e = NULL;
            continue;
        }
        api_log_message(&log, TCI_LOG_INFO,
                        "TCI_PRECISION_AUTO round %d: %llu NaN/Inf values in the fp16 outputs "
                        "where the fp32 engine's are finite; layer '%s' (%s) produces them "
                        "first: kept in %s",
                        round, (unsigned long long)r.mismatches, report.layer, report.op_type,
                        api_auto_kept_name(options));
        st = overflow_layers(g, options, inputs, num_inputs, list, &m, progress, first);
        if (st == TCI_OK && list->count > before + 1)
            api_log_message(&log, TCI_LOG_INFO,
                            "TCI_PRECISION_AUTO round %d: %zu more layers produce NaN/Inf from "
                            "finite inputs in the marked run: kept in %s too",
                            round, list->count - before - 1, api_auto_kept_name(options));
        tci_engine_destroy(e);
        e = NULL;
    }
    double target = options->accuracy_target;
    if (st == TCI_OK && target > 0 && error > target) {
        api_log_message(&log, TCI_LOG_INFO,
                        "TCI_PRECISION_AUTO: the outputs' relative L2 error %.3g is over the "
                        "target %g: ranking the layers by the error each adds",
                        error, target);
        st = meet_target(g, options, inputs, num_inputs, base, list, &m, progress, &e, &error);
    }
    tci_context_destroy(m.base);
    tci_engine_destroy(m.fp32);
    if (st != TCI_OK) {
        tci_engine_destroy(e);
        return st;
    }
    e->num_auto_fp32 = list->count - num_user;
    e->auto_error = error;
    e->auto_target = options->accuracy_target;
    *out = e;
    return TCI_OK;
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
                        "TCI_PRECISION_AUTO: %zu layer%s kept in %s: %s; the outputs' "
                        "relative L2 error against the fp32 engine: %.3g",
                        count, count == 1 ? "" : "s", api_auto_kept_name(options), names, error);
    else
        api_log_message(&log, TCI_LOG_INFO,
                        "TCI_PRECISION_AUTO: no layer kept out of fp16; the outputs' relative "
                        "L2 error against the fp32 engine: %.3g",
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
    if (o->accuracy_target > 0 && o->kept_precision == TCI_PRECISION_BF16)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.accuracy_target %g with kept_precision "
                            "TCI_PRECISION_BF16: bf16 holds fp32's range with less precision "
                            "than fp16, so keeping layers in it fixes overflow, not accuracy; "
                            "keep them in TCI_PRECISION_TF32 or TCI_PRECISION_FP32 to meet a "
                            "target",
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
    layer_list list = {NULL, 0, 0}; /* the user's layers, then those moved */
    tci_status st = check_options(options);
    for (size_t i = 0; st == TCI_OK && i < num_user; i++)
        st = list_push(&list, options->fp32_layers[i]);
    snprintf(progress.build, sizeof progress.build, "precision auto, fp32 engine");
    if (st == TCI_OK)
        st = build_copy(g, options, TCI_PRECISION_FP32, NULL, TCI_MARK_OUTPUTS_NONE, &progress,
                        &fp32);
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
        st = search(g, options, inputs, num_inputs, base, &list, num_user, &progress, &e);
    tci_context_destroy(base);
    tci_engine_destroy(fp32);
    size_t moved = e ? e->num_auto_fp32 : 0;
    double error = e ? e->auto_error : -1;
    if (st == TCI_OK && options->mark_all_outputs) {
        /* the search compares the engine as it runs (fused); the layers marked as asked, it is
         * rebuilt */
        tci_engine_destroy(e);
        e = NULL;
        snprintf(progress.build, sizeof progress.build, "precision auto, all outputs marked");
        st = build_copy(g, options, TCI_PRECISION_FP16, list.names, options->mark_all_outputs,
                        &progress, &e);
        if (st == TCI_OK) {
            e->num_auto_fp32 = moved;
            e->auto_error = error;
            e->auto_target = options->accuracy_target;
        }
    }
    if (st == TCI_OK) log_result(options, list.names ? list.names + num_user : NULL, moved, error);
    for (size_t i = 0; random && i < num_inputs; i++) tci_tensor_release(&random[i]);
    free(random);
    list_free(&list);
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
