/* A reader of the few ModelProto fields the report needs, on the protobuf wire format:
 * ModelProto.graph (7), GraphProto.node (1) and .output (12), NodeProto.input (1), .output (2),
 * .name (3),
 * .op_type (4), ValueInfoProto.name (1). Every other field is skipped by its wire type. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/onnx_nodes.h"

typedef struct wire {
    const unsigned char *p, *end;
} wire;

static int read_varint(wire *w, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (w->p >= w->end) return -1;
        unsigned char b = *w->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* The next field: its number and wire type; a length-delimited one's bytes in *body. */
static int next_field(wire *w, uint32_t *field, wire *body) {
    uint64_t tag, len;
    if (read_varint(w, &tag)) return -1;
    *field = (uint32_t)(tag >> 3);
    body->p = body->end = NULL;
    switch (tag & 7) {
    case 0: return read_varint(w, &len);
    case 1:
        if (w->end - w->p < 8) return -1;
        w->p += 8;
        return 0;
    case 5:
        if (w->end - w->p < 4) return -1;
        w->p += 4;
        return 0;
    case 2:
        if (read_varint(w, &len) || len > (uint64_t)(w->end - w->p)) return -1;
        body->p = w->p;
        body->end = w->p + len;
        w->p += len;
        return 0;
    default: return -1; /* groups (3, 4) are not in ONNX; 6, 7 do not exist */
    }
}

static char *copy_bytes(const wire *b) {
    size_t n = b->p ? (size_t)(b->end - b->p) : 0;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, b->p, n);
    s[n] = '\0';
    return s;
}

/* Room for item `count` in an array whose capacity is 16, then doubles at powers of two. */
static int grow(void **items, size_t count, size_t item_size) {
    if (count && (count < 16 || (count & (count - 1)))) return 0;
    void *p = realloc(*items, (count ? 2 * count : 16) * item_size);
    if (!p) return -2;
    *items = p;
    return 0;
}

static int parse_node(wire w, cli_onnx_node *n) {
    uint32_t field;
    wire body;
    while (w.p < w.end) {
        if (next_field(&w, &field, &body)) return -1;
        if (field == 1 && body.p) {
            if (grow((void **)&n->inputs, n->num_inputs, sizeof *n->inputs)) return -2;
            if (!(n->inputs[n->num_inputs] = copy_bytes(&body))) return -2;
            n->num_inputs++;
            continue;
        }
        char **slot = field == 3 ? &n->name : field == 4 ? &n->op_type
                      : field == 2 && !n->output ? &n->output : NULL;
        if (!slot || !body.p) continue;
        free(*slot);
        if (!(*slot = copy_bytes(&body))) return -2;
    }
    wire none = {NULL, NULL};
    if (!n->name && !(n->name = copy_bytes(&none))) return -2;
    if (!n->op_type && !(n->op_type = copy_bytes(&none))) return -2;
    if (!n->output && !(n->output = copy_bytes(&none))) return -2;
    return 0;
}

static int parse_graph(wire w, cli_onnx_graph *g) {
    uint32_t field;
    wire body;
    while (w.p < w.end) {
        if (next_field(&w, &field, &body)) return -1;
        if (field == 1 && body.p) {
            if (grow((void **)&g->nodes, g->num_nodes, sizeof *g->nodes)) return -2;
            cli_onnx_node *n = &g->nodes[g->num_nodes++];
            memset(n, 0, sizeof *n);
            int rc = parse_node(body, n);
            if (rc) return rc;
        } else if (field == 12 && body.p) {
            wire v = body, name = {NULL, NULL};
            while (v.p < v.end) {
                wire b;
                if (next_field(&v, &field, &b)) return -1;
                if (field == 1 && b.p) name = b;
            }
            if (grow((void **)&g->outputs, g->num_outputs, sizeof *g->outputs)) return -2;
            if (!(g->outputs[g->num_outputs] = copy_bytes(&name))) return -2;
            g->num_outputs++;
        }
    }
    return 0;
}

int cli_onnx_graph_parse(const unsigned char *bytes, size_t size, cli_onnx_graph *g, char *err,
                         size_t err_size) {
    memset(g, 0, sizeof *g);
    wire w = {bytes, bytes + size}, body;
    uint32_t field;
    int rc = 0, graphs = 0;
    while (rc == 0 && w.p < w.end) {
        rc = next_field(&w, &field, &body);
        if (rc == 0 && field == 7 && body.p) {
            rc = parse_graph(body, g);
            graphs++;
        }
    }
    if (rc == 0 && graphs != 1) {
        snprintf(err, err_size, "%s", graphs ? "more than one graph" : "no graph");
        return -1;
    }
    if (rc) snprintf(err, err_size, "%s", rc == -2 ? "out of memory" : "malformed wire format");
    return rc ? -1 : 0;
}

int cli_onnx_graph_read(const char *path, cli_onnx_graph *g, char *err, size_t err_size) {
    memset(g, 0, sizeof *g);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_size, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    unsigned char *bytes = NULL;
    size_t size = 0, cap = 0;
    int rc = 0;
    while (rc == 0) {
        if (size == cap) {
            unsigned char *p = realloc(bytes, cap ? 2 * cap : (size_t)1 << 20);
            if (!p) {
                snprintf(err, err_size, "out of memory reading '%s'", path);
                rc = -1;
                break;
            }
            bytes = p;
            cap = cap ? 2 * cap : (size_t)1 << 20;
        }
        size_t got = fread(bytes + size, 1, cap - size, f);
        size += got;
        if (got == 0 && ferror(f)) {
            snprintf(err, err_size, "error reading '%s'", path);
            rc = -1;
        }
        if (got == 0) break;
    }
    fclose(f);
    if (rc == 0) rc = cli_onnx_graph_parse(bytes, size, g, err, err_size);
    free(bytes);
    return rc;
}

void cli_onnx_graph_free(cli_onnx_graph *g) {
    for (size_t i = 0; i < g->num_nodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].op_type);
        free(g->nodes[i].output);
        for (size_t k = 0; k < g->nodes[i].num_inputs; k++) free(g->nodes[i].inputs[k]);
        free(g->nodes[i].inputs);
    }
    for (size_t i = 0; i < g->num_outputs; i++) free(g->outputs[i]);
    free(g->nodes);
    free(g->outputs);
    memset(g, 0, sizeof *g);
}
