/* The timing cache: the kernel choice of each tuned problem, keyed by the problem and valid for
 * one machine (GPU model, CUDA / cuDNN / cuBLASLt versions, WMMA config tables). */
#define _POSIX_C_SOURCE 200809L /* strdup, strtok_r */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/gpu/gpu_internal.h"
#include "kernels/cuda_check.h"
#include "kernels/wgmma_gemm.h"

tci_status exec_gpu_machine(char *buf, size_t size) {
    int device = 0, runtime = 0;
    struct cudaDeviceProp prop;
    KERN_CUDA_CHECK(cudaGetDevice(&device));
    KERN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    KERN_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    /* the WMMA choices are config indices: a build with other configs must not reuse them */
    uint32_t tables = 2166136261u;
    int nc = kern_wmma_conv_config_count(), ng = kern_wmma_gemm_config_count();
    int nw = kern_wgmma_gemm_config_count();
    for (int i = 0; i < nc + ng + nw; i++) {
        const char *name = i < nc        ? kern_wmma_conv_config_name(i)
                           : i < nc + ng ? kern_wmma_gemm_config_name(i - nc)
                                         : kern_wgmma_gemm_config_name(i - nc - ng);
        for (const char *c = name; *c; c++) tables = (tables ^ (unsigned char)*c) * 16777619u;
    }
    snprintf(buf, size,
             "%s\tsm_%d%d\tcudart %d\tcudnn %zu\tcublasLt %zu\twmma %d+%d+%d configs %08x",
             prop.name, prop.major, prop.minor, runtime, cudnnGetVersion(), cublasLtGetVersion(),
             nc, ng, nw, tables);
    return TCI_OK;
}

static tci_status cache_header(char *buf, size_t size) {
    int n = snprintf(buf, size, "tcinfer timing cache 1\t");
    return exec_gpu_machine(buf + n, size - (size_t)n);
}

void gpu_cache_free(timing_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->count; i++) {
        free(c->entries[i].key);
        free(c->entries[i].value);
    }
    free(c->entries);
    free(c);
}

cache_entry *gpu_cache_find(const timing_cache *c, const char *key) {
    for (int i = 0; c && i < c->count; i++)
        if (strcmp(c->entries[i].key, key) == 0) return &c->entries[i];
    return NULL;
}

tci_status gpu_cache_put(timing_cache *c, const char *key, const char *value, float library_ms,
                         float wmma_ms, const char *origin) {
    cache_entry *e = gpu_cache_find(c, key);
    if (!e) {
        if (c->count == c->cap) {
            int cap = c->cap ? 2 * c->cap : 64;
            cache_entry *grown = realloc(c->entries, (size_t)cap * sizeof *grown);
            if (!grown) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
            c->entries = grown;
            c->cap = cap;
        }
        e = &c->entries[c->count];
        e->key = strdup(key);
        e->value = NULL;
        if (!e->key) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        c->count++;
    }
    free(e->value);
    e->value = strdup(value);
    if (!e->value) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    e->library_ms = library_ms;
    e->wmma_ms = wmma_ms;
    e->origin = origin;
    return TCI_OK;
}

/* One "key TAB choice TAB library_ms TAB wmma_ms" line into c; origin names where it comes
 * from, in errors and reports. */
static tci_status cache_parse_line(timing_cache *c, char *line, const char *origin) {
    line[strcspn(line, "\n")] = '\0';
    if (!line[0]) return TCI_OK;
    char *save = NULL;
    char *key = strtok_r(line, "\t", &save), *value = strtok_r(NULL, "\t", &save),
         *lib = strtok_r(NULL, "\t", &save), *wmma = strtok_r(NULL, "\t", &save);
    if (!key || !value || !lib || !wmma)
        return status_error(TCI_ERR_PARSE, "%s: malformed kernel choice '%s'", origin, line);
    return gpu_cache_put(c, key, value, strtof(lib, NULL), strtof(wmma, NULL), origin);
}

/* Reads the cache at path (NULL: none, an in-memory cache). A missing file is an empty cache;
 * one written on another GPU model or with other library versions (another header) is not
 * used, and is replaced on save. choices (may be NULL): lines of choices known to be valid here
 * (an engine file's), added first. */
tci_status gpu_cache_load(const char *path, const char *choices, timing_cache **out) {
    *out = NULL;
    timing_cache *c = calloc(1, sizeof *c);
    if (!c) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    c->path = path;
    tci_status st = cache_header(c->header, sizeof c->header);
    char *text = st == TCI_OK && choices ? strdup(choices) : NULL;
    if (choices && !text && st == TCI_OK) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    char *save = NULL;
    for (char *line = text ? strtok_r(text, "\n", &save) : NULL; st == TCI_OK && line;
         line = strtok_r(NULL, "\n", &save))
        st = cache_parse_line(c, line, "engine file");
    free(text);
    FILE *f = st == TCI_OK && path ? fopen(path, "r") : NULL;
    char line[1024];
    bool valid = false;
    if (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        valid = strcmp(line, c->header) == 0;
    }
    while (st == TCI_OK && valid && fgets(line, sizeof line, f)) {
        st = cache_parse_line(c, line, "timing cache");
        if (st != TCI_OK) status_error_prefix(st, "%s", path);
    }
    if (f) fclose(f);
    if (st != TCI_OK) {
        gpu_cache_free(c);
        return st;
    }
    *out = c;
    return TCI_OK;
}

/* Writes every entry (those loaded and those this engine added) through a temporary file. */
tci_status gpu_cache_save(const timing_cache *c) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", c->path);
    FILE *f = fopen(tmp, "w");
    if (!f) return status_error(TCI_ERR_IO, "cannot write the timing cache %s", tmp);
    bool ok = fprintf(f, "%s\n", c->header) > 0;
    for (int i = 0; ok && i < c->count; i++)
        ok = fprintf(f, "%s\t%s\t%.6f\t%.6f\n", c->entries[i].key, c->entries[i].value,
                     c->entries[i].library_ms, c->entries[i].wmma_ms) > 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, c->path) != 0) {
        remove(tmp);
        return status_error(TCI_ERR_IO, "cannot write the timing cache %s", c->path);
    }
    return TCI_OK;
}

/* The problem a conv, GEMM, recurrence or attention step poses, as a cache key: every field its kernel choice depends
 * on, the kernel families allowed, and the precision. */
void gpu_problem_key(const exec_gpu_engine *e, const plan_step *s, char *buf, size_t size) {
    bool fp32 = gpu_step_fp32(e->plan, s);
    /* the step's own: an fp16 engine's layers kept in bf16 are bf16 problems */
    bool bf16 = s->num_outputs && e->plan->tensors[s->outputs[0]].dtype == TCI_DTYPE_BFLOAT16;
    const char *precision = fp32 ? (gpu_allows_tf32(e) ? "tf32" : "fp32") : bf16 ? "bf16" : "fp16";
    if (s->kind == PLAN_STEP_GEMM) {
        const plan_gemm *g = &s->u.gemm;
        int n = snprintf(buf, size,
                 "gemm %s k%d b%" PRId64 " m%" PRId64 " n%" PRId64 " k%" PRId64 " t%d%d ld%" PRId64
                 ",%" PRId64 ",%" PRId64 " st%" PRId64 ",%" PRId64 ",%" PRId64 " a%g bias%d act%d,%g,%g",
                 precision, (int)e->kernels, g->batch, g->m, g->n, g->k, g->trans_a,
                 g->trans_b, g->lda, g->ldb, g->ldc, g->stride_a, g->stride_b, g->stride_c,
                 g->alpha, g->has_bias, (int)g->act.kind, g->act.alpha, g->act.beta);
        /* a residual (C) only where there is one: the keys of the others stay as they were */
        if (g->has_c && n >= 0 && (size_t)n < size)
            snprintf(buf + n, size - (size_t)n, " c%g", g->beta);
        return;
    }
    if (gpu_attention_tuned_step(s)) {
        const plan_attention *a = &s->u.attention;
        int n = snprintf(buf, size,
                         "attention %s k%d b%" PRId64 " h%" PRId64 " q%" PRId64 " kv%" PRId64
                         " d%" PRId64 " c%d m%d,%d,%" PRId64 " s%g",
                         precision, (int)e->kernels, a->batch, a->heads, a->q_len, a->kv_len,
                         a->head_dim, a->causal, a->has_mask, a->has_keep, a->mask_batch_mod,
                         a->scale);
        /* the operands' strides and offsets (the alignment cuDNN needs) */
        const int64_t *st[4] = {a->q_strides, a->k_strides, a->v_strides, a->y_strides};
        const int64_t off[4] = {a->q_offset, a->k_offset, a->v_offset, 0};
        for (int k = 0; k < 4 && n >= 0 && (size_t)n < size; k++)
            n += snprintf(buf + n, size - (size_t)n,
                          " %" PRId64 ":%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64, off[k],
                          st[k][0], st[k][1], st[k][2], st[k][3]);
        return;
    }
    if (gpu_rnn_tuned_step(s)) {
        const plan_rnn *r = &s->u.rnn;
        /* the projection's size (k) and everything that decides whether cuDNN applies */
        const plan_step *p = NULL;
        for (int j = 0; j < e->plan->num_steps && !p; j++)
            if (e->plan->steps[j].kind == PLAN_STEP_GEMM && e->plan->steps[j].num_outputs == 1 &&
                e->plan->steps[j].outputs[0] == s->inputs[0])
                p = &e->plan->steps[j];
        snprintf(buf, size,
                 "rnn %s k%d cell%d t%" PRId64 " b%" PRId64 " i%" PRId64 " h%" PRId64 " d%" PRId64
                 " rev%d bm%d lbr%d lens%d y%d",
                 precision, (int)e->kernels, (int)r->cell, r->seq_length, r->batch,
                 p ? p->u.gemm.k : (int64_t)-1, r->hidden, r->directions, r->reverse,
                 r->batch_major, r->linear_before_reset, s->inputs[2] >= 0, s->num_outputs);
        return;
    }
    const plan_conv *c = &s->u.conv;
    const conv_geom *g = &c->geom;
    act_params a = gpu_conv_activation(c);
    snprintf(buf, size,
             "conv %s k%d n%" PRId64 " c%" PRId64 " %" PRId64 "x%" PRId64 " k%" PRId64 " %" PRId64
             "x%" PRId64 " o%" PRId64 "x%" PRId64 " p%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
             " s%" PRId64 ",%" PRId64 " d%" PRId64 ",%" PRId64 " g%" PRId64 " b%d z%d act%d,%d,%g,%g",
             precision, (int)e->kernels, g->n, g->c, g->h, g->w, g->k, g->kernel_h, g->kernel_w,
             g->out_h, g->out_w, g->pad_top, g->pad_left, g->pad_bottom, g->pad_right,
             g->stride_h, g->stride_w, g->dilation_h, g->dilation_w, g->groups, c->has_bias,
             c->has_residual, (int)c->act.kind, (int)a.kind, a.alpha, a.beta);
}
