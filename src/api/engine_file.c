/* The engine file container (see engine_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "api/engine_file.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/file.h"
#include "util/status.h"

enum {
    TAG_MACHINE = 1,
    TAG_PRODUCER,
    TAG_OPTIONS,
    TAG_FP32_LAYERS,
    TAG_MODEL,
    TAG_FP16_TENSORS,
    TAG_CHOICES,
    TAG_AUTO, /* format 2, optional */
    TAG_KEPT, /* format 3, optional */
    AUTO_BYTES = 24,
    KEPT_BYTES = 8,
    HEADER_BYTES = 32,
    RECORD_HEADER = 12,
};

static const char magic[8] = {'T', 'C', 'I', 'E', 'N', 'G', 'I', 'N'};

static uint64_t fnv1a64(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_double(unsigned char *p, double d) {
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_le(p, v, 8);
}

static double get_double(const unsigned char *p) {
    uint64_t v = get_le(p, 8);
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

/* A growing byte buffer. */
typedef struct buffer {
    unsigned char *data;
    size_t size, cap;
} buffer;

static tci_status append(buffer *b, const void *p, size_t n) {
    if (b->size + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->size + n) cap *= 2;
        unsigned char *grown = realloc(b->data, cap);
        if (!grown) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory writing the engine");
        b->data = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->size, p, n);
    b->size += n;
    return TCI_OK;
}

static tci_status record(buffer *b, uint32_t tag, const void *p, size_t n) {
    unsigned char head[RECORD_HEADER];
    put_le(head, tag, 4);
    put_le(head + 4, n, 8);
    TRY_STATUS(append(b, head, sizeof head));
    return append(b, p, n);
}

static tci_status string_record(buffer *b, uint32_t tag, const char *s) {
    return record(b, tag, s ? s : "", s ? strlen(s) : 0);
}

/* A NULL-terminated list as its strings, each followed by NUL. */
static tci_status list_record(buffer *b, uint32_t tag, char *const *list) {
    buffer l = {0};
    tci_status st = TCI_OK;
    for (char *const *s = list; st == TCI_OK && s && *s; s++) st = append(&l, *s, strlen(*s) + 1);
    if (st == TCI_OK) st = record(b, tag, l.data, l.size);
    free(l.data);
    return st;
}

tci_status engine_file_write(const char *path, const engine_file *file) {
    buffer payload = {0};
    unsigned char options[8];
    put_le(options, (uint32_t)file->precision, 4);
    put_le(options + 4, (uint32_t)file->kernels, 4);
    tci_status st = string_record(&payload, TAG_MACHINE, file->machine);
    if (st == TCI_OK) st = string_record(&payload, TAG_PRODUCER, file->producer);
    if (st == TCI_OK) st = record(&payload, TAG_OPTIONS, options, sizeof options);
    if (st == TCI_OK) st = list_record(&payload, TAG_FP32_LAYERS, file->fp32_layers);
    if (st == TCI_OK) st = record(&payload, TAG_MODEL, file->model, file->model_size);
    if (st == TCI_OK) st = list_record(&payload, TAG_FP16_TENSORS, file->fp16_tensors);
    if (st == TCI_OK) st = string_record(&payload, TAG_CHOICES, file->choices);
    if (st == TCI_OK && file->has_auto) {
        unsigned char chosen[AUTO_BYTES] = {0};
        put_le(chosen, file->num_auto_fp32, 4);
        put_double(chosen + 8, file->auto_error);
        put_double(chosen + 16, file->auto_target);
        st = record(&payload, TAG_AUTO, chosen, sizeof chosen);
    }
    /* FP32 (and a zeroed struct's 0) is the absence of the record */
    bool kept = file->kept_precision == TCI_PRECISION_TF32 ||
                file->kept_precision == TCI_PRECISION_BF16;
    if (st == TCI_OK && kept) {
        unsigned char precision[KEPT_BYTES] = {0};
        put_le(precision, (uint32_t)file->kept_precision, 4);
        st = record(&payload, TAG_KEPT, precision, sizeof precision);
    }
    if (st != TCI_OK) {
        free(payload.data);
        return st;
    }
    unsigned char header[HEADER_BYTES] = {0};
    memcpy(header, magic, sizeof magic);
    put_le(header + 8, kept ? 3 : file->has_auto ? 2 : ENGINE_FILE_MIN_VERSION, 4);
    put_le(header + 16, payload.size, 8);
    put_le(header + 24, fnv1a64(payload.data, payload.size), 8);
    size_t len = strlen(path) + 5;
    char *tmp = malloc(len);
    FILE *f = NULL;
    if (tmp) {
        snprintf(tmp, len, "%s.tmp", path);
        f = fopen(tmp, "wb");
    }
    bool ok = f && fwrite(header, 1, sizeof header, f) == sizeof header &&
              fwrite(payload.data, 1, payload.size, f) == payload.size;
    if (f) ok = fclose(f) == 0 && ok;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) {
        if (tmp) remove(tmp);
        st = status_error(TCI_ERR_IO, "cannot write the engine file %s", path);
    }
    free(tmp);
    free(payload.data);
    return st;
}

static char *dup_bytes(const unsigned char *p, size_t n) {
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* NUL-separated strings -> a NULL-terminated list (NULL when empty). */
static tci_status parse_list(const unsigned char *p, size_t n, char ***out) {
    *out = NULL;
    if (n == 0) return TCI_OK;
    if (p[n - 1] != '\0') return TCI_ERR_PARSE;
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += p[i] == '\0';
    char **list = calloc(count + 1, sizeof *list);
    if (!list) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    *out = list;
    for (size_t i = 0, at = 0; i < count; i++) {
        size_t len = strlen((const char *)p + at);
        list[i] = dup_bytes(p + at, len);
        if (!list[i]) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        at += len + 1;
    }
    return TCI_OK;
}

/* The auto record's fields; checked against the fp32 layers once every record is read. */
static tci_status parse_auto(const unsigned char *d, uint64_t size, engine_file *f) {
    if (size != AUTO_BYTES || get_le(d + 4, 4) != 0) return TCI_ERR_PARSE;
    f->has_auto = 1;
    f->num_auto_fp32 = (uint32_t)get_le(d, 4);
    f->auto_error = get_double(d + 8);
    f->auto_target = get_double(d + 16);
    if (f->auto_error < 0 || !(f->auto_target >= 0) || isinf(f->auto_target)) return TCI_ERR_PARSE;
    return TCI_OK;
}

/* The kept-precision record: TF32 or BF16 (FP32 is written as no record). */
static tci_status parse_kept(const unsigned char *d, uint64_t size, engine_file *f) {
    if (size != KEPT_BYTES || get_le(d + 4, 4) != 0) return TCI_ERR_PARSE;
    f->kept_precision = (int32_t)get_le(d, 4);
    if (f->kept_precision != TCI_PRECISION_TF32 && f->kept_precision != TCI_PRECISION_BF16)
        return TCI_ERR_PARSE;
    return TCI_OK;
}

static tci_status parse_payload(const unsigned char *p, size_t n, unsigned version,
                                engine_file *f) {
    const unsigned last = version >= 3 ? TAG_KEPT : version >= 2 ? TAG_AUTO : TAG_CHOICES;
    f->kept_precision = TCI_PRECISION_FP32;
    unsigned seen = 0;
    for (size_t at = 0; at < n;) {
        if (n - at < RECORD_HEADER) return TCI_ERR_PARSE;
        uint32_t tag = (uint32_t)get_le(p + at, 4);
        uint64_t size = get_le(p + at + 4, 8);
        at += RECORD_HEADER;
        if (size > n - at || tag < TAG_MACHINE || tag > last || (seen & (1u << tag)))
            return TCI_ERR_PARSE;
        seen |= 1u << tag;
        const unsigned char *d = p + at;
        tci_status st = TCI_OK;
        char **text = tag == TAG_MACHINE    ? &f->machine
                      : tag == TAG_PRODUCER ? &f->producer
                      : tag == TAG_CHOICES  ? &f->choices
                                            : NULL;
        switch (tag) {
        case TAG_MACHINE:
        case TAG_PRODUCER:
        case TAG_CHOICES:
            *text = dup_bytes(d, size);
            if (!*text) st = TCI_ERR_OUT_OF_MEMORY;
            break;
        case TAG_OPTIONS:
            if (size != 8) return TCI_ERR_PARSE;
            f->precision = (int32_t)get_le(d, 4);
            f->kernels = (int32_t)get_le(d + 4, 4);
            break;
        case TAG_FP32_LAYERS: st = parse_list(d, size, &f->fp32_layers); break;
        case TAG_FP16_TENSORS: st = parse_list(d, size, &f->fp16_tensors); break;
        case TAG_AUTO: st = parse_auto(d, size, f); break;
        case TAG_KEPT: st = parse_kept(d, size, f); break;
        case TAG_MODEL:
            f->model = malloc(size ? size : 1);
            if (!f->model) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
            memcpy(f->model, d, size);
            f->model_size = size;
            break;
        }
        if (st == TCI_ERR_OUT_OF_MEMORY) return status_error(st, "out of memory reading the engine");
        if (st != TCI_OK) return st;
        at += size;
    }
    unsigned all = 0;
    for (unsigned t = TAG_MACHINE; t <= TAG_CHOICES; t++) all |= 1u << t;
    if ((seen & all) != all) return TCI_ERR_PARSE;
    size_t num_fp32 = 0;
    while (f->fp32_layers && f->fp32_layers[num_fp32]) num_fp32++;
    return f->num_auto_fp32 <= num_fp32 ? TCI_OK : TCI_ERR_PARSE;
}

tci_status engine_file_read(const char *path, engine_file *out) {
    memset(out, 0, sizeof *out);
    unsigned char *bytes = NULL;
    size_t size = 0;
    TRY_STATUS(util_read_file(path, "the engine file ", &bytes, &size));
    tci_status st = engine_file_parse(bytes, size, path, out);
    free(bytes);
    return st;
}

tci_status engine_file_parse(const unsigned char *bytes, size_t size, const char *path,
                             engine_file *out) {
    memset(out, 0, sizeof *out);
    tci_status st = TCI_OK;
    if (size < HEADER_BYTES || memcmp(bytes, magic, sizeof magic) != 0) {
        st = status_error(TCI_ERR_PARSE, "%s is not a tcinfer engine file", path);
    } else if (get_le(bytes + 8, 4) < ENGINE_FILE_MIN_VERSION ||
               get_le(bytes + 8, 4) > ENGINE_FILE_VERSION) {
        st = status_error(TCI_ERR_UNSUPPORTED,
                       "%s is an engine file of format %u; this tcinfer reads formats %d to %d: "
                       "rebuild it from the ONNX model",
                       path, (unsigned)get_le(bytes + 8, 4), ENGINE_FILE_MIN_VERSION,
                       ENGINE_FILE_VERSION);
    } else if (get_le(bytes + 16, 8) != size - HEADER_BYTES) {
        st = status_error(TCI_ERR_PARSE, "engine file %s is truncated or padded (%zu payload bytes, "
                       "the header says %llu)", path, size - HEADER_BYTES,
                       (unsigned long long)get_le(bytes + 16, 8));
    } else if (get_le(bytes + 24, 8) != fnv1a64(bytes + HEADER_BYTES, size - HEADER_BYTES)) {
        st = status_error(TCI_ERR_PARSE, "engine file %s is damaged (checksum mismatch)", path);
    } else {
        st = parse_payload(bytes + HEADER_BYTES, size - HEADER_BYTES,
                           (unsigned)get_le(bytes + 8, 4), out);
        if (st == TCI_ERR_PARSE)
            st = status_error(TCI_ERR_PARSE, "engine file %s has malformed records", path);
    }
    if (st != TCI_OK) engine_file_free(out);
    return st;
}

static void free_list(char **list) {
    for (char **s = list; s && *s; s++) free(*s);
    free(list);
}

void engine_file_free(engine_file *file) {
    if (!file) return;
    free(file->machine);
    free(file->producer);
    free_list(file->fp32_layers);
    free(file->model);
    free_list(file->fp16_tensors);
    free(file->choices);
    memset(file, 0, sizeof *file);
}
