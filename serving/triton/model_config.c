/* Model configuration of the tcinfer backend: reading Triton's JSON with cJSON, auto-completion. */
#include "model_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TRITONSERVER_Error *tct_error(TRITONSERVER_Error_Code code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return TRITONSERVER_ErrorNew(code, msg);
}

static const struct {
    const char *config_name;
    TRITONSERVER_DataType triton;
    tci_dtype tci;
} dtypes[] = {
    {"TYPE_BOOL", TRITONSERVER_TYPE_BOOL, TCI_DTYPE_BOOL},
    {"TYPE_UINT8", TRITONSERVER_TYPE_UINT8, TCI_DTYPE_UINT8},
    {"TYPE_INT8", TRITONSERVER_TYPE_INT8, TCI_DTYPE_INT8},
    {"TYPE_INT32", TRITONSERVER_TYPE_INT32, TCI_DTYPE_INT32},
    {"TYPE_INT64", TRITONSERVER_TYPE_INT64, TCI_DTYPE_INT64},
    {"TYPE_FP16", TRITONSERVER_TYPE_FP16, TCI_DTYPE_FLOAT16},
    {"TYPE_FP32", TRITONSERVER_TYPE_FP32, TCI_DTYPE_FLOAT},
    {"TYPE_FP64", TRITONSERVER_TYPE_FP64, TCI_DTYPE_DOUBLE},
    {"TYPE_BF16", TRITONSERVER_TYPE_BF16, TCI_DTYPE_BFLOAT16},
};
#define NUM_DTYPES (sizeof dtypes / sizeof dtypes[0])

TRITONSERVER_DataType tct_triton_dtype(tci_dtype dtype) {
    for (size_t i = 0; i < NUM_DTYPES; i++)
        if (dtypes[i].tci == dtype) return dtypes[i].triton;
    return TRITONSERVER_TYPE_INVALID;
}

tci_dtype tct_tci_dtype(TRITONSERVER_DataType dtype) {
    for (size_t i = 0; i < NUM_DTYPES; i++)
        if (dtypes[i].triton == dtype) return dtypes[i].tci;
    return TCI_DTYPE_UNDEFINED;
}

static const char *config_dtype_name(tci_dtype dtype) {
    for (size_t i = 0; i < NUM_DTYPES; i++)
        if (dtypes[i].tci == dtype) return dtypes[i].config_name;
    return NULL;
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* an integer that Triton's JSON writes as a number or (int64 fields) as a string */
static int json_int(const cJSON *item, int64_t *out) {
    if (cJSON_IsNumber(item)) {
        double v = item->valuedouble; /* converted only within int64's range (else undefined) */
        if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return 0;
        *out = (int64_t)v;
        return (double)*out == v;
    }
    if (cJSON_IsString(item) && item->valuestring[0]) {
        char *end;
        errno = 0;
        long long v = strtoll(item->valuestring, &end, 10);
        if (errno || *end) return 0;
        *out = v;
        return 1;
    }
    return 0;
}

static TRITONSERVER_Error *parse_tensors(const cJSON *root, const char *key,
                                         tct_tensor_config **out, size_t *out_count) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = NULL;
    *out_count = 0;
    if (!list) return NULL;
    if (!cJSON_IsArray(list)) return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "'%s' is not a list", key);
    int n = cJSON_GetArraySize(list);
    if (n == 0) return NULL;
    *out = calloc((size_t)n, sizeof **out);
    if (!*out) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    *out_count = (size_t)n;
    for (int i = 0; i < n; i++) {
        const cJSON *t = cJSON_GetArrayItem(list, i);
        tct_tensor_config *tc = &(*out)[i];
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        if (!cJSON_IsString(name))
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "%s %d has no name", key, i);
        if (!(tc->name = dup_string(name->valuestring)))
            return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "data_type");
        tc->dtype = TCI_DTYPE_UNDEFINED;
        for (size_t d = 0; cJSON_IsString(dt) && d < NUM_DTYPES; d++)
            if (strcmp(dt->valuestring, dtypes[d].config_name) == 0) tc->dtype = dtypes[d].tci;
        if (tc->dtype == TCI_DTYPE_UNDEFINED)
            return tct_error(TRITONSERVER_ERROR_UNSUPPORTED,
                             "%s '%s': data_type %s is not one tcinfer runs (TYPE_BOOL, TYPE_UINT8, "
                             "TYPE_INT8, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64, "
                             "TYPE_BF16)", key, tc->name,
                             cJSON_IsString(dt) ? dt->valuestring : "(none)");
        const cJSON *reshape = cJSON_GetObjectItemCaseSensitive(t, "reshape");
        if (reshape && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(reshape, "shape")) > 0)
            return tct_error(TRITONSERVER_ERROR_UNSUPPORTED,
                             "%s '%s': reshape is not supported by the tcinfer backend", key,
                             tc->name);
        const cJSON *dims = cJSON_GetObjectItemCaseSensitive(t, "dims");
        int rank = cJSON_GetArraySize(dims);
        if (!cJSON_IsArray(dims) || rank > TCI_MAX_RANK)
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "%s '%s': dims missing or over %d",
                             key, tc->name, TCI_MAX_RANK);
        tc->rank = rank;
        for (int d = 0; d < rank; d++)
            if (!json_int(cJSON_GetArrayItem(dims, d), &tc->dims[d]) || tc->dims[d] < -1)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "%s '%s': dim %d is not an "
                                 "integer >= -1", key, tc->name, d);
    }
    return NULL;
}

/* key's comma-separated value as a NULL-terminated list, spaces around entries trimmed. */
static TRITONSERVER_Error *split_list(const char *key, const char *text, char ***out) {
    size_t n = 1;
    for (const char *p = text; *p; p++) n += *p == ',';
    char **list = calloc(n + 1, sizeof *list);
    if (!list) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    *out = list;
    size_t k = 0;
    for (const char *p = text;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && *p == ' ') p++, len--;
        while (len && p[len - 1] == ' ') len--;
        if (len == 0)
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG,
                             "parameter %s '%s' has an empty entry", key, text);
        if (!(list[k] = malloc(len + 1))) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        memcpy(list[k], p, len);
        list[k++][len] = '\0';
        if (!end) break;
        p = end + 1;
    }
    return NULL;
}

/* "none", or increasing batch sizes from 1 up, comma-separated */
static TRITONSERVER_Error *parse_buckets(const char *text, tct_model_config *c) {
    c->buckets_set = 1;
    if (strcmp(text, "none") == 0) return NULL;
    char **list = NULL;
    TRITONSERVER_Error *err = split_list("batch_buckets", text, &list);
    size_t n = 0;
    while (list && list[n]) n++;
    if (!err && !(c->batch_buckets = calloc(n + 1, sizeof *c->batch_buckets)))
        err = tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    for (size_t i = 0; !err && i < n; i++) {
        char *end;
        errno = 0;
        long long v = strtoll(list[i], &end, 10);
        if (*end || errno || v < 1 || (i > 0 && v <= c->batch_buckets[i - 1]))
            err = tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter batch_buckets '%s': "
                            "expected 'none' or increasing batch sizes from 1 up", text);
        else c->batch_buckets[c->num_batch_buckets++] = v;
    }
    for (size_t i = 0; list && list[i]; i++) free(list[i]);
    free(list);
    return err;
}

static TRITONSERVER_Error *parse_parameters(const cJSON *root, tct_model_config *c) {
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
    const cJSON *p;
    cJSON_ArrayForEach(p, params) {
        const cJSON *sv = cJSON_GetObjectItemCaseSensitive(p, "string_value");
        if (!cJSON_IsString(sv))
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter '%s' has no string_value",
                             p->string);
        const char *v = sv->valuestring;
        if (strcmp(p->string, "precision") == 0) {
            static const struct { const char *name; tci_precision p; } precisions[] = {
                {"fp16", TCI_PRECISION_FP16}, {"bf16", TCI_PRECISION_BF16},
                {"tf32", TCI_PRECISION_TF32}, {"fp32", TCI_PRECISION_FP32},
                {"auto", TCI_PRECISION_AUTO}};
            size_t i = 0;
            while (i < 5 && strcmp(v, precisions[i].name) != 0) i++;
            if (i == 5)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter precision '%s': "
                                 "expected fp16, bf16, tf32, fp32 or auto", v);
            c->precision = precisions[i].p;
            c->precision_set = 1;
        } else if (strcmp(p->string, "keep_precision") == 0) {
            if (strcmp(v, "fp32") == 0) c->kept_precision = TCI_PRECISION_FP32;
            else if (strcmp(v, "tf32") == 0) c->kept_precision = TCI_PRECISION_TF32;
            else if (strcmp(v, "bf16") == 0) c->kept_precision = TCI_PRECISION_BF16;
            else
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter keep_precision '%s': "
                                 "expected fp32, tf32 or bf16", v);
            c->kept_set = 1;
        } else if (strcmp(p->string, "fp32_layers") == 0) {
            TRITONSERVER_Error *err = split_list(p->string, v, &c->fp32_layers);
            if (err) return err;
        } else if (strcmp(p->string, "accuracy_target") == 0) {
            char *end;
            errno = 0;
            c->accuracy_target = strtod(v, &end);
            if (!v[0] || *end || errno || !(c->accuracy_target > 0) || isinf(c->accuracy_target))
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter accuracy_target '%s': "
                                 "expected a relative L2 error above 0", v);
        } else if (strcmp(p->string, "calibration_inputs") == 0) {
            TRITONSERVER_Error *err = split_list(p->string, v, &c->calibration_inputs);
            if (err) return err;
        } else if (strcmp(p->string, "timing_cache") == 0) {
            if (!v[0]) return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter timing_cache is empty");
            if (!(c->timing_cache = dup_string(v))) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        } else if (strcmp(p->string, "cpu_threads") == 0) {
            char *end;
            long n = strtol(v, &end, 10);
            if (!v[0] || *end || n < 0 || n > 1024)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter cpu_threads '%s': "
                                 "expected a count 0..1024", v);
            c->cpu_threads = (int)n;
        } else if (strcmp(p->string, "batch_buckets") == 0) {
            TRITONSERVER_Error *err = parse_buckets(v, c);
            if (err) return err;
        } else if (strcmp(p->string, "pipeline_depth") == 0) {
            if (strcmp(v, "1") != 0 && strcmp(v, "2") != 0 && strcmp(v, "3") != 0)
                return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter pipeline_depth '%s': "
                                 "expected 1 (each batch answered before the next is gathered), "
                                 "2 (the next gathered while the engine runs one) or 3 (a "
                                 "third batch in flight)", v);
            c->pipeline_depth = v[0] - '0';
        } else {
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "unknown parameter '%s' (the tcinfer "
                             "backend takes precision, fp32_layers, keep_precision, timing_cache, "
                             "cpu_threads, accuracy_target, calibration_inputs, batch_buckets, "
                             "pipeline_depth)",
                             p->string);
        }
    }
    if ((c->accuracy_target > 0 || c->calibration_inputs) && c->precision != TCI_PRECISION_AUTO)
        return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameters accuracy_target and "
                         "calibration_inputs steer the search of precision 'auto': give "
                         "parameter precision 'auto' with them");
    if (c->kept_set && c->precision != TCI_PRECISION_FP16 && c->precision != TCI_PRECISION_AUTO)
        return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter keep_precision sets what fp16 "
                         "engines keep their fp32_layers in (and precision 'auto' the layers it "
                         "keeps); not with another parameter precision");
    if (c->kept_set && !c->fp32_layers && c->precision != TCI_PRECISION_AUTO)
        return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter keep_precision sets the "
                         "precision of the kept layers: give parameter fp32_layers or precision "
                         "'auto' with it");
    if (c->kept_precision == TCI_PRECISION_BF16 && c->accuracy_target > 0)
        return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "parameter keep_precision 'bf16' holds "
                         "fp32's range with less precision than fp16: it fixes overflow, not "
                         "accuracy; accuracy_target wants keep_precision fp32 or tf32");
    return NULL;
}

TRITONSERVER_Error *tct_config_parse(const char *json, size_t size, tct_model_config *out) {
    memset(out, 0, sizeof *out);
    out->precision = TCI_PRECISION_FP16;
    out->kept_precision = TCI_PRECISION_FP32;
    cJSON *root = cJSON_ParseWithLength(json, size);
    if (!root) return tct_error(TRITONSERVER_ERROR_INTERNAL, "model configuration is not JSON");
    TRITONSERVER_Error *err = NULL;
    int64_t mb = 0;
    const cJSON *mbi = cJSON_GetObjectItemCaseSensitive(root, "max_batch_size");
    if (mbi && (!json_int(mbi, &mb) || mb < 0 || mb > (1 << 20)))
        err = tct_error(TRITONSERVER_ERROR_INVALID_ARG, "max_batch_size is not a count");
    out->max_batch = (int)mb;
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(root, "default_model_filename");
    if (!err && cJSON_IsString(fn) && fn->valuestring[0]) {
        if (strchr(fn->valuestring, '/') || strcmp(fn->valuestring, "..") == 0)
            err = tct_error(TRITONSERVER_ERROR_INVALID_ARG, "default_model_filename '%s' is not "
                            "a file name", fn->valuestring);
        else if (!(out->model_filename = dup_string(fn->valuestring)))
            err = tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
    if (!err) err = parse_parameters(root, out);
    if (!err) err = parse_tensors(root, "input", &out->inputs, &out->num_inputs);
    if (!err) err = parse_tensors(root, "output", &out->outputs, &out->num_outputs);
    cJSON_Delete(root);
    if (err) tct_config_free(out);
    return err;
}

static void free_tensors(tct_tensor_config *t, size_t n) {
    for (size_t i = 0; t && i < n; i++) free(t[i].name);
    free(t);
}

void tct_config_free(tct_model_config *c) {
    for (size_t i = 0; c->fp32_layers && c->fp32_layers[i]; i++) free(c->fp32_layers[i]);
    free(c->fp32_layers);
    for (size_t i = 0; c->calibration_inputs && c->calibration_inputs[i]; i++)
        free(c->calibration_inputs[i]);
    free(c->calibration_inputs);
    free(c->timing_cache);
    free(c->batch_buckets);
    free(c->model_filename);
    free_tensors(c->inputs, c->num_inputs);
    free_tensors(c->outputs, c->num_outputs);
    memset(c, 0, sizeof *c);
}

/* ---- auto-completion ---- */

static int leading_dim_symbolic(const tci_tensor_info *info) {
    return info->rank >= 1 && info->dims[0] < 0;
}

static TRITONSERVER_Error *engine_info(const tci_engine *engine, int is_output, size_t i,
                                       tci_tensor_info *info) {
    tci_tensor_info_init(info);
    tci_status st = is_output ? tci_engine_output_info(engine, i, info)
                              : tci_engine_input_info(engine, i, info);
    if (st != TCI_OK) return tct_error(TRITONSERVER_ERROR_INTERNAL, "%s", tci_last_error());
    if (info->rank < 0)
        return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "the model does not give the rank of %s "
                         "'%s': declare it in config.pbtxt", is_output ? "output" : "input",
                         info->name);
    if (!config_dtype_name(info->dtype))
        return tct_error(TRITONSERVER_ERROR_UNSUPPORTED, "%s '%s' has dtype %s, which Triton's "
                         "configuration cannot express here", is_output ? "output" : "input",
                         info->name, tci_dtype_name(info->dtype));
    return NULL;
}

static TRITONSERVER_Error *add_tensors(cJSON *root, const char *key, const tci_engine *engine,
                                       int is_output, int batched) {
    cJSON *list = cJSON_CreateArray();
    if (!list) return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    cJSON_AddItemToObject(root, key, list);
    size_t n = is_output ? tci_engine_output_count(engine) : tci_engine_input_count(engine);
    for (size_t i = 0; i < n; i++) {
        tci_tensor_info info;
        TRITONSERVER_Error *err = engine_info(engine, is_output, i, &info);
        if (err) return err;
        if (batched && !leading_dim_symbolic(&info))
            return tct_error(TRITONSERVER_ERROR_INVALID_ARG, "max_batch_size > 0 but %s '%s' has "
                             "no symbolic leading (batch) dim: set max_batch_size: 0",
                             is_output ? "output" : "input", info.name);
        cJSON *t = cJSON_CreateObject();
        cJSON *dims = cJSON_CreateArray();
        if (!t || !dims) {
            cJSON_Delete(t);
            cJSON_Delete(dims);
            return tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
        }
        cJSON_AddItemToArray(list, t);
        cJSON_AddStringToObject(t, "name", info.name);
        cJSON_AddStringToObject(t, "data_type", config_dtype_name(info.dtype));
        for (int d = batched ? 1 : 0; d < info.rank; d++)
            cJSON_AddItemToArray(dims, cJSON_CreateNumber((double)(info.dims[d] < 0 ? -1 : info.dims[d])));
        cJSON_AddItemToObject(t, "dims", dims);
    }
    return NULL;
}

TRITONSERVER_Error *tct_config_autocomplete(const char *json, size_t size, const tci_engine *engine,
                                            char **out_json) {
    *out_json = NULL;
    cJSON *root = cJSON_ParseWithLength(json, size);
    if (!root) return tct_error(TRITONSERVER_ERROR_INTERNAL, "model configuration is not JSON");
    int has_inputs = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "input")) > 0;
    int has_outputs = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "output")) > 0;
    int64_t max_batch = 0;
    const cJSON *mbi = cJSON_GetObjectItemCaseSensitive(root, "max_batch_size");
    if (mbi) json_int(mbi, &max_batch);
    TRITONSERVER_Error *err = NULL;
    int changed = 0;
    if (max_batch == 0 && !has_inputs && !has_outputs) {
        int batchable = 1;
        for (int o = 0; o < 2 && !err; o++) {
            size_t n = o ? tci_engine_output_count(engine) : tci_engine_input_count(engine);
            for (size_t i = 0; i < n && !err; i++) {
                tci_tensor_info info;
                err = engine_info(engine, o, i, &info);
                if (!err && !leading_dim_symbolic(&info)) batchable = 0;
            }
        }
        if (!err && batchable) {
            max_batch = TCT_DEFAULT_MAX_BATCH;
            cJSON_DeleteItemFromObjectCaseSensitive(root, "max_batch_size");
            cJSON_AddNumberToObject(root, "max_batch_size", (double)max_batch);
            changed = 1;
        }
    }
    if (!err && !has_inputs) {
        err = add_tensors(root, "input", engine, 0, max_batch > 0);
        changed = 1;
    }
    if (!err && !has_outputs) {
        err = add_tensors(root, "output", engine, 1, max_batch > 0);
        changed = 1;
    }
    if (!err && changed && !(*out_json = cJSON_PrintUnformatted(root)))
        err = tct_error(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    cJSON_Delete(root);
    return err;
}

/* The buckets of tct_default_buckets for one step, into out where given; returns their count. */
static size_t buckets_of_step(int64_t max_batch, int64_t step, int64_t *out) {
    size_t n = 0;
    for (int64_t b = 1; b < step && b < max_batch; b *= 2, n++)
        if (out) out[n] = b;
    for (int64_t b = step; b < max_batch; b += step, n++)
        if (out) out[n] = b;
    if (out) out[n] = max_batch;
    return n + 1;
}

size_t tct_default_buckets(int64_t max_batch, int64_t *out) {
    int64_t step = 8;
    while (step < max_batch && buckets_of_step(max_batch, step, NULL) > TCT_DEFAULT_BUCKETS_MAX)
        step *= 2;
    return buckets_of_step(max_batch, step, out);
}
