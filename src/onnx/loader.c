/* ModelProto -> IR graph: decodes initializers (inline and external), inputs, nodes, attributes
 * and opsets into the graph arena, then frees the protobuf structs. */
#define _XOPEN_SOURCE 700 /* realpath, pread, O_NOFOLLOW */

#include "onnx/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "onnx/wire_scan.h"

typedef struct loader {
    ir_graph *graph;      /* the graph being loaded: the model's, or a subgraph of it */
    ir_graph *root;       /* the model's: constants of every subgraph count against its limits */
    const char *base_dir; /* NULL: external data refused */
    char *base_real;      /* realpath(base_dir), resolved on first external tensor; malloc'd */
} loader;

/* Allocation target of decoded tensor data: the graph arena, or malloc for tensor files. */
typedef void *(*data_alloc_fn)(void *ctx, size_t size);

static void *alloc_arena(void *ctx, size_t size) { return arena_alloc(ctx, size); }
static void *alloc_malloc(void *ctx, size_t size) {
    (void)ctx;
    return malloc(size ? size : 1);
}

/* ONNX TensorProto.DataType names, for messages about types we refuse. */
static const char *onnx_type_name(int32_t t) {
    static const char *names[] = {
        "undefined",      "float",      "uint8",     "int8",        "uint16",   "int16",
        "int32",          "int64",      "string",    "bool",        "float16",  "double",
        "uint32",         "uint64",     "complex64", "complex128",  "bfloat16", "float8e4m3fn",
        "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4",  "int4",     "float4e2m1",
        "float8e8m0",     "uint2",      "int2",      "float6e2m3",  "float6e3m2"};
    return t >= 0 && (size_t)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

/* tci_dtype values are ONNX's, for the types we run. */
static bool onnx_type_supported(int32_t t) {
    switch (t) {
    case TCI_DTYPE_FLOAT:
    case TCI_DTYPE_UINT8:
    case TCI_DTYPE_INT8:
    case TCI_DTYPE_INT32:
    case TCI_DTYPE_INT64:
    case TCI_DTYPE_BOOL:
    case TCI_DTYPE_FLOAT16:
    case TCI_DTYPE_DOUBLE: return true;
    default: return false;
    }
}

static bool is_empty(const char *s) { return !s || !s[0]; }

/* "" and "ai.onnx" name the same default domain. */
static const char *normalize_domain(const char *domain) {
    if (is_empty(domain) || strcmp(domain, "ai.onnx") == 0) return "";
    return domain;
}

bool onnx_host_little_endian(void) {
    const uint16_t probe = 1;
    unsigned char first;
    memcpy(&first, &probe, 1);
    return first == 1;
}

/* Serialized ONNX data is little-endian; swap each element in place on big-endian hosts. */
static void from_little_endian(void *data, size_t count, size_t elem_size) {
    if (elem_size == 1 || onnx_host_little_endian()) return;
    unsigned char *p = data;
    for (size_t i = 0; i < count; i++, p += elem_size)
        for (size_t a = 0, b = elem_size - 1; a < b; a++, b--) {
            unsigned char tmp = p[a];
            p[a] = p[b];
            p[b] = tmp;
        }
}

/* ---- external data ---- */

static tci_status parse_size_value(const char *label, const char *key, const char *value,
                                   uint64_t *out) {
    uint64_t v = 0;
    if (is_empty(value)) goto bad;
    for (const char *c = value; *c; c++) {
        if (*c < '0' || *c > '9') goto bad;
        unsigned d = (unsigned)(*c - '0');
        if (v > (UINT64_MAX - d) / 10) goto bad;
        v = v * 10 + d;
    }
    if (v > INT64_MAX) goto bad;
    *out = v;
    return TCI_OK;
bad:
    return status_error(TCI_ERR_INVALID_MODEL, "%s: external data %s '%s' is not a byte count",
                     label, key, value ? value : "");
}

/* A location may only name a file below the model's folder: relative, no '..' component, and
 * (checked after resolving symlinks) still inside it. */
static tci_status check_location_syntax(const char *label, const char *location) {
    if (is_empty(location))
        return status_error(TCI_ERR_INVALID_MODEL, "%s: external data has no location", label);
    if (location[0] == '/' || location[0] == '\\')
        return status_error(TCI_ERR_INVALID_MODEL,
                         "%s: external data location '%s' is an absolute path; it must be "
                         "relative to the model's folder",
                         label, location);
    /* backslashes too: models written on Windows use them as separators */
    const char *p = location;
    while (*p) {
        size_t n = strcspn(p, "/\\");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return status_error(TCI_ERR_INVALID_MODEL,
                             "%s: external data location '%s' contains '..'; it must stay "
                             "inside the model's folder",
                             label, location);
        p += n;
        if (*p) p++;
    }
    return TCI_OK;
}

static bool path_inside(const char *path, const char *dir) {
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/') return true;
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* Opens the external file of a tensor after the containment checks; *out_fd is -1 on failure. */
static tci_status open_external(loader *ld, const char *label, const char *location,
                                int *out_fd, uint64_t *out_file_size) {
    *out_fd = -1;
    if (!ld || !ld->base_dir)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: external data '%s' needs the model's folder, but the model was "
                         "loaded from memory without a base directory",
                         label, location);
    TRY_STATUS(check_location_syntax(label, location));
    if (!ld->base_real) {
        ld->base_real = realpath(ld->base_dir, NULL);
        if (!ld->base_real)
            return status_error(TCI_ERR_IO, "%s: cannot resolve the model's folder '%s': %s", label,
                             ld->base_dir, strerror(errno));
    }
    size_t len = strlen(ld->base_dir) + strlen(location) + 2;
    char *joined = malloc(len);
    if (!joined) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(joined, len, "%s/%s", ld->base_dir, location);
    char *real = realpath(joined, NULL);
    int err = errno;
    free(joined);
    if (!real)
        return status_error(TCI_ERR_IO, "%s: cannot open external data file '%s': %s", label,
                         location, strerror(err));
    if (!path_inside(real, ld->base_real)) {
        free(real);
        return status_error(TCI_ERR_INVALID_MODEL,
                         "%s: external data file '%s' resolves outside the model's folder",
                         label, location);
    }
    /* a FIFO or device would block in open or read without end: only regular files */
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
        free(real);
        return status_error(TCI_ERR_IO, "%s: external data '%s' is not a regular file", label,
                            location);
    }
    /* open the resolved path, refusing a symlink swapped in since the check, and not blocking
     * on a FIFO swapped in since the check (fstat below refuses it) */
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    err = errno;
    free(real);
    if (fd < 0)
        return status_error(TCI_ERR_IO, "%s: cannot open external data file '%s': %s", label,
                         location, strerror(err));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return status_error(TCI_ERR_IO, "%s: external data '%s' is not a regular file", label,
                         location);
    }
    *out_fd = fd;
    *out_file_size = (uint64_t)st.st_size;
    return TCI_OK;
}

static tci_status read_exactly(int fd, void *dst, size_t size, uint64_t offset, const char *label,
                               const char *location) {
    unsigned char *p = dst;
    while (size > 0) {
        size_t chunk = size > (size_t)1 << 30 ? (size_t)1 << 30 : size;
        ssize_t n = pread(fd, p, chunk, (off_t)offset);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return status_error(TCI_ERR_IO, "%s: reading external data file '%s' failed: %s", label,
                             location, n < 0 ? strerror(errno) : "unexpected end of file");
        p += n;
        size -= (size_t)n;
        offset += (uint64_t)n;
    }
    return TCI_OK;
}

/* ---- tensors ---- */

/* Where a tensor's values are stored and how many of them there are. */
typedef enum storage {
    STORE_RAW,
    STORE_FLOAT,
    STORE_INT32,
    STORE_INT64,
    STORE_DOUBLE,
} storage;

static const char *storage_name(storage s) {
    static const char *names[] = {"raw_data", "float_data", "int32_data", "int64_data",
                                  "double_data"};
    return names[s];
}

/* The typed field ONNX stores each dtype in when raw_data is not used. */
static storage typed_storage(tci_dtype dtype) {
    switch (dtype) {
    case TCI_DTYPE_FLOAT: return STORE_FLOAT;
    case TCI_DTYPE_DOUBLE: return STORE_DOUBLE;
    case TCI_DTYPE_INT64: return STORE_INT64;
    default: return STORE_INT32; /* int32, int8, uint8, bool, float16 bits */
    }
}

static size_t storage_count(const Onnx__TensorProto *tp, storage s) {
    switch (s) {
    case STORE_FLOAT: return tp->n_float_data;
    case STORE_INT32: return tp->n_int32_data;
    case STORE_INT64: return tp->n_int64_data;
    case STORE_DOUBLE: return tp->n_double_data;
    default: return tp->has_raw_data ? tp->raw_data.len : 0;
    }
}

/* Widens/narrows int32_data into the tensor's dtype; int8/uint8 values out of range are errors
 * rather than silently wrapped. */
static tci_status copy_int32_data(const Onnx__TensorProto *tp, tci_dtype dtype, void *dst,
                                  const char *label) {
    const int32_t *src = tp->int32_data;
    size_t n = tp->n_int32_data;
    for (size_t i = 0; i < n; i++) {
        int32_t v = src[i];
        switch (dtype) {
        case TCI_DTYPE_INT32: ((int32_t *)dst)[i] = v; break;
        case TCI_DTYPE_BOOL: ((uint8_t *)dst)[i] = v != 0; break;
        case TCI_DTYPE_FLOAT16: ((uint16_t *)dst)[i] = (uint16_t)((uint32_t)v & 0xFFFFu); break;
        case TCI_DTYPE_INT8:
            if (v < INT8_MIN || v > INT8_MAX)
                return status_error(TCI_ERR_INVALID_MODEL,
                                 "%s: int32_data value %" PRId32 " is out of range for int8",
                                 label, v);
            ((int8_t *)dst)[i] = (int8_t)v;
            break;
        case TCI_DTYPE_UINT8:
            if (v < 0 || v > UINT8_MAX)
                return status_error(TCI_ERR_INVALID_MODEL,
                                 "%s: int32_data value %" PRId32 " is out of range for uint8",
                                 label, v);
            ((uint8_t *)dst)[i] = (uint8_t)v;
            break;
        default: return status_error(TCI_ERR_INTERNAL, "%s: int32_data for %s", label,
                                  tci_dtype_name(dtype));
        }
    }
    return TCI_OK;
}

/* The external-data entries of a tensor. */
typedef struct external_ref {
    const char *location;
    uint64_t offset, length;
    bool has_length;
} external_ref;

static tci_status parse_external_ref(const Onnx__TensorProto *tp, const char *label,
                                     external_ref *out) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e || !e->key) continue;
        if (strcmp(e->key, "location") == 0) {
            out->location = e->value;
        } else if (strcmp(e->key, "offset") == 0) {
            TRY_STATUS(parse_size_value(label, "offset", e->value, &out->offset));
        } else if (strcmp(e->key, "length") == 0) {
            TRY_STATUS(parse_size_value(label, "length", e->value, &out->length));
            out->has_length = true;
        }
        /* "checksum" and unknown keys carry nothing we need */
    }
    return check_location_syntax(label, out->location);
}

/* Decodes a TensorProto's dtype, dims and values. The data is allocated through alloc only once
 * the stored length is known to match the dims. label names the tensor in messages. */
static tci_status decode_tensor(loader *ld, const Onnx__TensorProto *tp, const char *label,
                                data_alloc_fn alloc, void *alloc_ctx, tci_tensor *out) {
    memset(out, 0, sizeof *out);
    int32_t type = tp->has_data_type ? tp->data_type : 0;
    if (type == 0) return status_error(TCI_ERR_INVALID_MODEL, "%s has no data type", label);
    if (!onnx_type_supported(type))
        return status_error(TCI_ERR_UNSUPPORTED, "%s has data type %s, which is not supported",
                         label, onnx_type_name(type));
    tci_dtype dtype = (tci_dtype)type;
    if (tp->n_dims > TCI_MAX_RANK)
        return status_error(TCI_ERR_UNSUPPORTED, "%s has rank %zu; at most %d is supported", label,
                         tp->n_dims, TCI_MAX_RANK);
    if (tp->segment)
        return status_error(TCI_ERR_UNSUPPORTED, "%s is segmented, which is not supported", label);
    for (size_t i = 0; i < tp->n_dims; i++)
        if (tp->dims[i] < 0)
            return status_error(TCI_ERR_INVALID_MODEL, "%s has negative dim %" PRId64 " at axis %zu",
                             label, tp->dims[i], i);
    int64_t count;
    tci_status st = ir_count_elements((int)tp->n_dims, tp->dims, &count);
    if (st != TCI_OK) return status_error_prefix(st, "%s", label);
    size_t elem = tci_dtype_size(dtype);
    if ((uint64_t)count > SIZE_MAX / elem)
        return status_error(TCI_ERR_UNSUPPORTED, "%s has %" PRId64 " elements, too many for memory",
                         label, count);
    size_t bytes = (size_t)count * elem;
    if (ld && ld->root) {
        TRY_STATUS(ir_graph_charge_constant(ld->root, label, count, elem));
    } else if (count > IR_DEFAULT_MAX_TENSOR_ELEMENTS) {
        return status_error(TCI_ERR_UNSUPPORTED,
                            "%s has %" PRId64 " elements, over the limit of %" PRId64, label,
                            count, IR_DEFAULT_MAX_TENSOR_ELEMENTS);
    }
    char shape[160];
    ir_format_dims((int)tp->n_dims, tp->dims, shape, sizeof shape);

    out->dtype = dtype;
    out->rank = (int)tp->n_dims;
    for (int i = 0; i < out->rank; i++) out->dims[i] = tp->dims[i];

    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        external_ref ref;
        TRY_STATUS(parse_external_ref(tp, label, &ref));
        int fd;
        uint64_t file_size = 0;
        TRY_STATUS(open_external(ld, label, ref.location, &fd, &file_size));
        uint64_t length = ref.has_length ? ref.length
                          : file_size > ref.offset ? file_size - ref.offset
                                                   : 0;
        if (ref.offset > file_size || length > file_size - ref.offset) {
            close(fd);
            return status_error(TCI_ERR_INVALID_MODEL,
                             "%s: external data file '%s' has %" PRIu64
                             " bytes, too short for offset %" PRIu64 " + length %" PRIu64,
                             label, ref.location, file_size, ref.offset, length);
        }
        if (length != bytes) {
            close(fd);
            return status_error(TCI_ERR_INVALID_MODEL,
                             "%s: external data in '%s' is %" PRIu64
                             " bytes, expected %zu (%s of %s)",
                             label, ref.location, length, bytes, shape, tci_dtype_name(dtype));
        }
        out->data = alloc(alloc_ctx, bytes);
        if (!out->data) {
            close(fd);
            return status_error(TCI_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", label,
                             bytes);
        }
        st = read_exactly(fd, out->data, bytes, ref.offset, label, ref.location);
        close(fd);
        TRY_STATUS(st);
        from_little_endian(out->data, (size_t)count, elem);
    } else {
        /* raw_data wins when present, as in onnx's numpy_helper */
        storage s = tp->has_raw_data ? STORE_RAW : typed_storage(dtype);
        size_t got = storage_count(tp, s);
        size_t want = s == STORE_RAW ? bytes : (size_t)count;
        if (got != want) {
            if (s == STORE_RAW)
                return status_error(TCI_ERR_INVALID_MODEL,
                                 "%s: raw_data has %zu bytes, expected %zu (%s of %s)", label,
                                 got, want, shape, tci_dtype_name(dtype));
            return status_error(TCI_ERR_INVALID_MODEL, "%s: %s has %zu values, expected %zu (%s)",
                             label, storage_name(s), got, want, shape);
        }
        out->data = alloc(alloc_ctx, bytes);
        if (!out->data)
            return status_error(TCI_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", label,
                             bytes);
        switch (s) {
        case STORE_RAW:
            if (bytes) memcpy(out->data, tp->raw_data.data, bytes);
            from_little_endian(out->data, (size_t)count, elem);
            break;
        case STORE_FLOAT:
            if (bytes) memcpy(out->data, tp->float_data, bytes);
            break;
        case STORE_DOUBLE:
            if (bytes) memcpy(out->data, tp->double_data, bytes);
            break;
        case STORE_INT64:
            if (bytes) memcpy(out->data, tp->int64_data, bytes);
            break;
        case STORE_INT32: TRY_STATUS(copy_int32_data(tp, dtype, out->data, label)); break;
        }
    }
    /* consumers of bool data may test == 1 */
    if (dtype == TCI_DTYPE_BOOL) {
        uint8_t *b = out->data;
        for (size_t i = 0; i < bytes; i++) b[i] = b[i] != 0;
    }
    return TCI_OK;
}

/* Fills an IR tensor from a TensorProto, data in the graph arena. */
static tci_status decode_into(loader *ld, const Onnx__TensorProto *tp, const char *label,
                              ir_tensor *t) {
    tci_tensor v;
    TRY_STATUS(decode_tensor(ld, tp, label, alloc_arena, ld->graph->arena, &v));
    ir_tensor_copy_shape(t, &v);
    t->data = v.data;
    return TCI_OK;
}

/* ---- value infos ---- */

/* Sets dtype and shape of a graph input from its declared type. */
static tci_status decode_value_type(loader *ld, const Onnx__ValueInfoProto *vi, const char *label,
                                    ir_tensor *t) {
    const Onnx__TypeProto *type = vi->type;
    if (!type) return status_error(TCI_ERR_INVALID_MODEL, "%s has no type", label);
    switch (type->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: break;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        return status_error(TCI_ERR_UNSUPPORTED, "%s is a sequence; only tensors are supported",
                         label);
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        return status_error(TCI_ERR_UNSUPPORTED, "%s is a map; only tensors are supported", label);
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        return status_error(TCI_ERR_UNSUPPORTED, "%s is an optional; only tensors are supported",
                         label);
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        return status_error(TCI_ERR_UNSUPPORTED,
                         "%s is a sparse tensor; only dense tensors are supported", label);
    default:
        return status_error(TCI_ERR_UNSUPPORTED, "%s has no tensor type (a kind we do not know)",
                         label);
    }
    const Onnx__TypeProto__Tensor *tt = type->tensor_type;
    int32_t elem = tt && tt->has_elem_type ? tt->elem_type : 0;
    if (elem == 0) return status_error(TCI_ERR_INVALID_MODEL, "%s has no element type", label);
    if (!onnx_type_supported(elem))
        return status_error(TCI_ERR_UNSUPPORTED, "%s has element type %s, which is not supported",
                         label, onnx_type_name(elem));
    if (!t) return TCI_OK;
    t->dtype = (tci_dtype)elem;
    if (!tt->shape) return TCI_OK; /* rank unknown */
    if (tt->shape->n_dim > TCI_MAX_RANK)
        return status_error(TCI_ERR_UNSUPPORTED, "%s has rank %zu; at most %d is supported", label,
                         tt->shape->n_dim, TCI_MAX_RANK);
    t->rank = (int)tt->shape->n_dim;
    for (int i = 0; i < t->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        t->dims[i] = -1;
        t->dim_names[i] = NULL;
        if (!d) continue;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            /* some exporters write -1 for a dynamic dim: treat as unknown */
            if (d->dim_value >= 0) t->dims[i] = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   !is_empty(d->dim_param)) {
            t->dim_names[i] = arena_strdup(ld->graph->arena, d->dim_param);
            if (!t->dim_names[i]) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    return TCI_OK;
}

/* ---- nodes and attributes ---- */

/* IR version 1 had no attribute type field: infer it from the field that is set. */
static int32_t attr_guess_type(const Onnx__AttributeProto *a) {
    if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (a->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    if (a->n_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
    if (a->n_graphs) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static char *arena_bytes_to_string(mem_arena *arena, const ProtobufCBinaryData *b) {
    char *s = arena_alloc(arena, b->len + 1);
    if (s && b->len) memcpy(s, b->data, b->len);
    return s;
}

static tci_status load_subgraph(loader *ld, ir_node *node, const char *attr,
                                const Onnx__GraphProto *gp, ir_graph **out);

static tci_status decode_attr(loader *ld, ir_node *node, const Onnx__AttributeProto *ap,
                              ir_attr *out) {
    mem_arena *arena = ld->graph->arena;
    if (is_empty(ap->name))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL, "an attribute has no name");
    if (!is_empty(ap->ref_attr_name))
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "attribute '%s' refers to function attribute '%s', which is only "
                             "valid inside a function body",
                             ap->name, ap->ref_attr_name);
    out->name = arena_strdup(arena, ap->name);
    int32_t type = ap->has_type && ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED
                       ? (int32_t)ap->type
                       : attr_guess_type(ap);
    out->type = (ir_attr_type)type;
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: out->f = ap->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: out->i = ap->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        out->s = arena_bytes_to_string(arena, &ap->s);
        if (!out->s) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!ap->t)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute '%s' is a tensor attribute without a tensor",
                                 ap->name);
        /* anonymous: the tensor's own name may repeat a graph tensor's */
        TRY_STATUS(ir_graph_add_tensor(ld->graph, NULL, &out->tensor));
        char label[320];
        snprintf(label, sizeof label, "attribute '%.200s'", ap->name);
        tci_status st = decode_into(ld, ap->t, label, out->tensor);
        if (st != TCI_OK)
            return status_error_prefix(st, "node '%s' (%s)", node->name, node->op_type);
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        out->count = ap->n_floats;
        out->floats = arena_memdup(arena, ap->floats, ap->n_floats * sizeof(float));
        if (!out->floats) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        out->count = ap->n_ints;
        out->ints = arena_memdup(arena, ap->ints, ap->n_ints * sizeof(int64_t));
        if (!out->ints) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
        out->count = ap->n_strings;
        const char **list = arena_alloc(arena, (ap->n_strings + 1) * sizeof *list);
        if (!list) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t k = 0; k < ap->n_strings; k++) {
            list[k] = arena_bytes_to_string(arena, &ap->strings[k]);
            if (!list[k]) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        }
        out->strings = list;
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
        if (!ap->g)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                 "attribute '%s' is a graph attribute without a graph", ap->name);
        TRY_STATUS(load_subgraph(ld, node, ap->name, ap->g, &out->graph));
        break;
    default:
        /* graph lists, sparse tensors, tensor lists, type protos: the type alone lets the op
         * refuse */
        break;
    }
    if (!out->name) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    return TCI_OK;
}

static const ir_opset *find_opset(const ir_graph *g, const char *domain) {
    for (size_t i = 0; i < g->num_opsets; i++)
        if (strcmp(g->opsets[i].domain, domain) == 0) return &g->opsets[i];
    return NULL;
}

/* A node's input or output by name: "" is an omitted optional (NULL), others are created on
 * first sight. */
static tci_status node_tensor(ir_graph *g, const char *name, ir_tensor **out) {
    *out = NULL;
    if (is_empty(name)) return TCI_OK;
    *out = ir_graph_find_tensor(g, name);
    if (*out) return TCI_OK;
    return ir_graph_add_tensor(g, name, out);
}

static tci_status load_node(loader *ld, const Onnx__NodeProto *np, size_t index) {
    ir_graph *g = ld->graph;
    if (is_empty(np->op_type))
        return status_error(TCI_ERR_INVALID_MODEL, "node %zu ('%s') has no op_type", index,
                         np->name ? np->name : "");
    if (np->n_input > INT_MAX / 2 || np->n_output > INT_MAX / 2)
        return status_error(TCI_ERR_INVALID_MODEL, "node '%s' has too many inputs or outputs",
                         np->name ? np->name : "");
    ir_node *node;
    TRY_STATUS(ir_graph_add_node(g, np->name, np->op_type, normalize_domain(np->domain),
                              (int)np->n_input, (int)np->n_output, &node));
    const ir_opset *opset = find_opset(g, node->domain);
    if (!opset)
        return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                             "the model imports no opset for domain '%s'",
                             node->domain[0] ? node->domain : "ai.onnx");
    node->opset = (int)opset->version;
    for (size_t k = 0; k < np->n_input; k++)
        TRY_STATUS(node_tensor(g, np->input[k], &node->inputs[k]));
    for (size_t k = 0; k < np->n_output; k++)
        TRY_STATUS(node_tensor(g, np->output[k], &node->outputs[k]));
    if (np->n_attribute) {
        if (np->n_attribute > INT_MAX / 2)
            return ir_node_error(node, TCI_ERR_INVALID_MODEL, "too many attributes");
        node->attrs = arena_alloc(g->arena, np->n_attribute * sizeof *node->attrs);
        if (!node->attrs) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t k = 0; k < np->n_attribute; k++) {
            const Onnx__AttributeProto *ap = np->attribute[k];
            if (!ap) continue;
            TRY_STATUS(decode_attr(ld, node, ap, &node->attrs[node->num_attrs]));
            if (ir_node_attr(node, node->attrs[node->num_attrs].name))
                return ir_node_error(node, TCI_ERR_INVALID_MODEL,
                                     "attribute '%s' is given twice", ap->name);
            node->num_attrs++;
        }
    }
    return TCI_OK;
}

/* ---- the model ---- */

static tci_status load_opsets(ir_graph *g, const Onnx__ModelProto *m) {
    g->opsets = arena_alloc(g->arena, (m->n_opset_import + 1) * sizeof *g->opsets);
    if (!g->opsets) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *op = m->opset_import[i];
        if (!op) continue;
        const char *domain = normalize_domain(op->domain);
        int64_t version = op->has_version ? op->version : 0;
        const char *shown = domain[0] ? domain : "ai.onnx";
        if (version < 1 || version > INT_MAX)
            return status_error(TCI_ERR_INVALID_MODEL,
                             "opset import for domain '%s' has invalid version %" PRId64, shown,
                             version);
        const ir_opset *prev = find_opset(g, domain);
        if (prev) {
            if (prev->version != version)
                return status_error(TCI_ERR_INVALID_MODEL,
                                 "domain '%s' is imported twice, as opset %" PRId64
                                 " and %" PRId64,
                                 shown, prev->version, version);
            continue;
        }
        g->opsets[g->num_opsets].domain = arena_strdup(g->arena, domain);
        g->opsets[g->num_opsets].version = version;
        if (!g->opsets[g->num_opsets].domain)
            return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        g->num_opsets++;
    }
    return TCI_OK;
}

/* A subgraph's value info may leave the type out, or give it without its kind. */
static bool typed(const Onnx__ValueInfoProto *vi) {
    return vi->type && vi->type->value_case != ONNX__TYPE_PROTO__VALUE__NOT_SET;
}

/* Initializers, inputs, nodes and outputs of gp into ld->graph (the model's or a subgraph's: a
 * subgraph's input may leave its type to the op, and its outputs may be values of an enclosing
 * graph). */
static tci_status load_graph_body(loader *ld, const Onnx__GraphProto *gp) {
    ir_graph *g = ld->graph;
    bool sub = g->parent != NULL;
    if (gp->n_sparse_initializer)
        return status_error(TCI_ERR_UNSUPPORTED, "sparse initializers are not supported (%zu found)",
                         gp->n_sparse_initializer);

    char label[320];
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp) continue;
        if (is_empty(tp->name))
            return status_error(TCI_ERR_INVALID_MODEL, "initializer %zu has no name", i);
        snprintf(label, sizeof label, "initializer '%.200s'", tp->name);
        if (ir_graph_find_tensor(g, tp->name))
            return status_error(TCI_ERR_INVALID_MODEL, "%s is defined twice", label);
        ir_tensor *t;
        TRY_STATUS(ir_graph_add_tensor(g, tp->name, &t));
        TRY_STATUS(decode_into(ld, tp, label, t));
    }

    g->inputs = arena_alloc(g->arena, (gp->n_input + 1) * sizeof *g->inputs);
    if (!g->inputs) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi) continue;
        if (is_empty(vi->name))
            return status_error(TCI_ERR_INVALID_MODEL, "graph input %zu has no name", i);
        snprintf(label, sizeof label, "graph input '%.200s'", vi->name);
        ir_tensor *t = ir_graph_find_tensor(g, vi->name);
        if (t && t->data) continue; /* an initializer listed as input: a constant */
        if (t) return status_error(TCI_ERR_INVALID_MODEL, "%s is listed twice", label);
        TRY_STATUS(ir_graph_add_tensor(g, vi->name, &t));
        if (!sub || typed(vi)) TRY_STATUS(decode_value_type(ld, vi, label, t));
        t->is_graph_input = true;
        g->inputs[g->num_inputs++] = t;
    }

    for (size_t i = 0; i < gp->n_node; i++)
        if (gp->node[i]) TRY_STATUS(load_node(ld, gp->node[i], i));

    /* which tensors some node defines, to check the graph outputs against */
    bool *produced = calloc(g->num_tensors + 1, sizeof *produced);
    if (!produced) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < g->nodes[i]->num_outputs; k++)
            if (g->nodes[i]->outputs[k]) produced[g->nodes[i]->outputs[k]->index] = true;
    tci_status st = TCI_OK;
    g->outputs = arena_alloc(g->arena, (gp->n_output + 1) * sizeof *g->outputs);
    if (!g->outputs) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; st == TCI_OK && i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        if (!vi) continue;
        if (is_empty(vi->name)) {
            st = status_error(TCI_ERR_INVALID_MODEL, "graph output %zu has no name", i);
            break;
        }
        snprintf(label, sizeof label, "graph output '%.200s'", vi->name);
        ir_tensor *t = ir_graph_find_tensor(g, vi->name);
        if (sub && !t) st = ir_graph_add_tensor(g, vi->name, &t); /* an enclosing graph's value */
        if (st != TCI_OK) break;
        if (!sub && !(t && (t->data || t->is_graph_input || produced[t->index]))) {
            st = status_error(TCI_ERR_INVALID_MODEL,
                           "%s is not produced by any node, initializer or graph input", label);
            break;
        }
        /* the declared type is only checked; shape inference gives outputs their shapes */
        if (vi->type && (!sub || typed(vi))) st = decode_value_type(ld, vi, label, NULL);
        if (st != TCI_OK) break;
        t->is_graph_output = true;
        g->outputs[g->num_outputs++] = t;
    }
    free(produced);
    return st;
}

static tci_status load_graph(loader *ld, const Onnx__ModelProto *m) {
    ir_graph *g = ld->graph;
    const Onnx__GraphProto *gp = m->graph;
    g->ir_version = m->has_ir_version ? m->ir_version : 0;
    g->name = arena_strdup(g->arena, gp->name ? gp->name : "");
    if (!g->name) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    TRY_STATUS(load_opsets(g, m));
    return load_graph_body(ld, gp);
}

/* The subgraph's tensors that nothing in it defines are values of the enclosing graph: each
 * becomes an outer value of sub, bound to an implicit input of node (found or created by name in
 * the enclosing graph, where the same happens in turn if it is a subgraph itself). */
static tci_status bind_outer(ir_graph *sub, ir_node *node) {
    ir_graph *parent = (ir_graph *)sub->parent;
    bool *produced = calloc(sub->num_tensors + 1, sizeof *produced);
    if (!produced) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < sub->num_nodes; i++)
        for (int k = 0; k < sub->nodes[i]->num_outputs; k++)
            if (sub->nodes[i]->outputs[k]) produced[sub->nodes[i]->outputs[k]->index] = true;
    size_t free_count = 0;
    for (size_t i = 0; i < sub->num_tensors; i++) {
        const ir_tensor *t = sub->tensors[i];
        if (t->name && !t->data && !t->is_graph_input && !produced[i]) free_count++;
    }
    tci_status st = TCI_OK;
    sub->outer = arena_alloc(sub->arena, (free_count + 1) * sizeof *sub->outer);
    sub->outer_slot = arena_alloc(sub->arena, (free_count + 1) * sizeof *sub->outer_slot);
    ir_tensor **inputs = arena_alloc(sub->arena, ((size_t)node->num_inputs + free_count + 1) *
                                                     sizeof *inputs);
    if (!sub->outer || !sub->outer_slot || !inputs)
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == TCI_OK) memcpy(inputs, node->inputs, (size_t)node->num_inputs * sizeof *inputs);
    for (size_t i = 0; st == TCI_OK && i < sub->num_tensors; i++) {
        ir_tensor *t = sub->tensors[i];
        if (!t->name || t->data || t->is_graph_input || produced[i]) continue;
        ir_tensor *value;
        st = node_tensor(parent, t->name, &value);
        if (st != TCI_OK) break;
        int slot = node->num_inputs - node->num_implicit_inputs;
        while (slot < node->num_inputs && inputs[slot] != value) slot++;
        if (slot == node->num_inputs) {
            inputs[node->num_inputs++] = value;
            node->num_implicit_inputs++;
        }
        t->is_outer = true;
        sub->outer[sub->num_outer] = t;
        sub->outer_slot[sub->num_outer++] = slot;
    }
    if (st == TCI_OK) node->inputs = inputs;
    free(produced);
    return st;
}

static tci_status load_subgraph(loader *ld, ir_node *node, const char *attr,
                                const Onnx__GraphProto *gp, ir_graph **out) {
    ir_graph *parent = ld->graph, *sub;
    TRY_STATUS(ir_graph_add_subgraph(parent, &sub));
    sub->name = arena_strdup(sub->arena, gp->name ? gp->name : "");
    if (!sub->name) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    ld->graph = sub;
    tci_status st = load_graph_body(ld, gp);
    ld->graph = parent;
    if (st == TCI_OK) st = bind_outer(sub, node);
    if (st != TCI_OK)
        return status_error_prefix(st, "node '%s' (%s), subgraph '%s'", node->name, node->op_type,
                                   attr);
    *out = sub;
    return TCI_OK;
}

tci_status onnx_load_model(const void *bytes, size_t size, const char *base_dir,
                           ir_graph **out_graph) {
    return onnx_load_model_limits(bytes, size, base_dir, NULL, out_graph);
}

tci_status onnx_load_model_limits(const void *bytes, size_t size, const char *base_dir,
                                  const ir_limits *limits, ir_graph **out_graph) {
    if (!out_graph) return status_error(TCI_ERR_INVALID_ARGUMENT, "onnx_load_model: NULL out_graph");
    *out_graph = NULL;
    if (!bytes && size)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "onnx_load_model: NULL bytes");
    ir_limits defaults;
    if (!limits) {
        ir_limits_default(&defaults);
        limits = &defaults;
    }
    if (size > limits->max_model_bytes)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "the model is %zu bytes, over the limit of %" PRIu64
                            " (max_model_bytes)",
                            size, limits->max_model_bytes);
    TRY_STATUS(onnx_wire_check(bytes, size, &onnx__model_proto__descriptor, limits, "model"));
    onnx_budget budget;
    onnx_budget_init(&budget, limits->max_parse_bytes);
    Onnx__ModelProto *model = onnx__model_proto__unpack(&budget.allocator, size, bytes);
    if (!model && budget.refused)
        return status_error(TCI_ERR_UNSUPPORTED,
                            "unpacking the model needs more than %" PRIu64
                            " bytes of memory (max_parse_bytes)",
                            limits->max_parse_bytes);
    if (!model)
        return status_error(TCI_ERR_PARSE, "not a valid ONNX model (protobuf parse failed)");
    if (!model->graph) {
        onnx__model_proto__free_unpacked(model, &budget.allocator);
        return status_error(TCI_ERR_INVALID_MODEL, "the model has no graph");
    }
    loader ld = {.base_dir = base_dir};
    tci_status st = ir_graph_create(&ld.graph);
    ld.root = ld.graph;
    if (st == TCI_OK) {
        ld.graph->limits = *limits;
        st = load_graph(&ld, model);
    }
    onnx__model_proto__free_unpacked(model, &budget.allocator);
    free(ld.base_real);
    if (st != TCI_OK) {
        ir_graph_destroy(ld.graph);
        return st;
    }
    *out_graph = ld.graph;
    return TCI_OK;
}

/* Whole file into a malloc'd buffer; errors name the file. */
static tci_status read_file(const char *path, uint64_t max_bytes, unsigned char **out_bytes,
                            size_t *out_size) {
    *out_bytes = NULL;
    *out_size = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return status_error(TCI_ERR_IO, "cannot open model file '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return status_error(TCI_ERR_IO, "model file '%s' is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX - 1 || (uint64_t)sb.st_size > max_bytes) {
        close(fd);
        return status_error(TCI_ERR_UNSUPPORTED,
                            "model file '%s' is %" PRIu64 " bytes, over the limit of %" PRIu64
                            " (max_model_bytes)",
                            path, (uint64_t)sb.st_size, max_bytes);
    }
    size_t size = (size_t)sb.st_size;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory reading model file '%s'", path);
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = read(fd, buf + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int err = errno;
            close(fd);
            free(buf);
            return status_error(TCI_ERR_IO, "reading model file '%s' failed: %s", path,
                             n < 0 ? strerror(err) : "unexpected end of file");
        }
        done += (size_t)n;
    }
    close(fd);
    *out_bytes = buf;
    *out_size = size;
    return TCI_OK;
}

tci_status onnx_load_file(const char *path, ir_graph **out_graph) {
    return onnx_load_file_limits(path, NULL, out_graph);
}

tci_status onnx_load_file_limits(const char *path, const ir_limits *limits, ir_graph **out_graph) {
    if (!out_graph) return status_error(TCI_ERR_INVALID_ARGUMENT, "onnx_load_file: NULL out_graph");
    *out_graph = NULL;
    if (!path) return status_error(TCI_ERR_INVALID_ARGUMENT, "onnx_load_file: NULL path");
    unsigned char *bytes;
    size_t size;
    TRY_STATUS(read_file(path, limits ? limits->max_model_bytes : IR_DEFAULT_MAX_MODEL_BYTES,
                         &bytes, &size));
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    char *dir = malloc(dir_len + 1);
    if (!dir) {
        free(bytes);
        return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    memcpy(dir, slash ? path : ".", dir_len);
    dir[dir_len] = '\0';
    tci_status st = onnx_load_model_limits(bytes, size, dir, limits, out_graph);
    free(dir);
    free(bytes);
    if (st == TCI_ERR_PARSE) status_error_prefix(st, "model file '%s'", path);
    return st;
}

tci_status onnx_decode_tensor_file(const void *bytes, size_t size, tci_tensor *out_tensor) {
    if (!out_tensor) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL out_tensor");
    memset(out_tensor, 0, sizeof *out_tensor);
    if (!bytes && size) return status_error(TCI_ERR_INVALID_ARGUMENT, "NULL bytes");
    ir_limits limits;
    ir_limits_default(&limits);
    TRY_STATUS(onnx_wire_check(bytes, size, &onnx__tensor_proto__descriptor, &limits, "TensorProto"));
    onnx_budget budget;
    onnx_budget_init(&budget, limits.max_parse_bytes);
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&budget.allocator, size, bytes);
    if (!tp)
        return status_error(TCI_ERR_PARSE, "not a valid ONNX TensorProto (protobuf parse failed)");
    char label[320];
    snprintf(label, sizeof label, "tensor '%.200s'", tp->name ? tp->name : "");
    /* no loader: a lone tensor file has no folder to take external data from */
    tci_status st = decode_tensor(NULL, tp, label, alloc_malloc, NULL, out_tensor);
    onnx__tensor_proto__free_unpacked(tp, &budget.allocator);
    if (st != TCI_OK) {
        free(out_tensor->data);
        memset(out_tensor, 0, sizeof *out_tensor);
    }
    return st;
}
