/* Iterative pre-scan of protobuf wire format (nesting depth, node count) and the byte-budget
 * allocator protobuf-c unpacks through. */
#include "onnx/wire_scan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

/* Reads a varint; false when it runs past end or over 10 bytes. */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= end) return false;
        uint8_t byte = *(*p)++;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

typedef struct scan_frame {
    const uint8_t *p, *end;
    const ProtobufCMessageDescriptor *desc;
} scan_frame;

tci_status onnx_wire_check(const void *bytes, size_t size, const ProtobufCMessageDescriptor *root,
                           const ir_limits *limits, const char *what) {
    int max_depth = limits->max_nesting < 1 ? 1 : limits->max_nesting;
    scan_frame *stack = malloc((size_t)max_depth * sizeof *stack);
    if (!stack) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory checking the %s", what);
    int depth = 1;
    stack[0] = (scan_frame){.p = bytes, .end = (const uint8_t *)bytes + size, .desc = root};
    uint64_t nodes = 0;
    tci_status st = TCI_OK;
    while (depth > 0) {
        scan_frame *f = &stack[depth - 1];
        if (f->p == f->end) {
            depth--;
            continue;
        }
        uint64_t tag, len;
        if (!read_varint(&f->p, f->end, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX) {
            st = TCI_ERR_PARSE;
            break;
        }
        switch (tag & 7) {
        case 0:
            if (!read_varint(&f->p, f->end, &len)) st = TCI_ERR_PARSE;
            break;
        case 1:
            if (f->end - f->p < 8) st = TCI_ERR_PARSE;
            else f->p += 8;
            break;
        case 5:
            if (f->end - f->p < 4) st = TCI_ERR_PARSE;
            else f->p += 4;
            break;
        case 2: {
            if (!read_varint(&f->p, f->end, &len) || len > (uint64_t)(f->end - f->p)) {
                st = TCI_ERR_PARSE;
                break;
            }
            const uint8_t *body = f->p;
            f->p += len;
            const ProtobufCFieldDescriptor *fd =
                protobuf_c_message_descriptor_get_field(f->desc, (unsigned)(tag >> 3));
            if (!fd || fd->type != PROTOBUF_C_TYPE_MESSAGE) break;
            const ProtobufCMessageDescriptor *sub = fd->descriptor;
            if (sub == &onnx__node_proto__descriptor && ++nodes > limits->max_nodes) {
                st = status_error(TCI_ERR_UNSUPPORTED,
                                  "the %s has more than %" PRIu64 " nodes (max_nodes)", what,
                                  limits->max_nodes);
                break;
            }
            if (depth == max_depth) {
                st = status_error(TCI_ERR_UNSUPPORTED,
                                  "the %s nests messages more than %d deep (max_nesting_depth; "
                                  "deeply nested subgraphs or types)",
                                  what, max_depth);
                break;
            }
            stack[depth++] = (scan_frame){.p = body, .end = body + len, .desc = sub};
            break;
        }
        default: st = TCI_ERR_PARSE; /* groups (3, 4), which protobuf-c does not read, and 6, 7 */
        }
        if (st != TCI_OK) break;
    }
    free(stack);
    if (st == TCI_ERR_PARSE)
        return status_error(TCI_ERR_PARSE, "not a valid ONNX %s (protobuf parse failed)", what);
    return st;
}

/* Each block carries its size in front, so that free can give it back to the budget. */
typedef union block_header {
    size_t size;
    max_align_t align;
} block_header;

static void *budget_alloc(void *data, size_t size) {
    onnx_budget *b = data;
    if (size > b->budget || b->taken > b->budget - size || size > SIZE_MAX - sizeof(block_header)) {
        b->refused = true;
        return NULL;
    }
    block_header *h = malloc(sizeof *h + size);
    if (!h) return NULL;
    h->size = size;
    b->taken += size;
    if (b->taken > b->peak) b->peak = b->taken;
    return h + 1;
}

static void budget_free(void *data, void *pointer) {
    if (!pointer) return;
    onnx_budget *b = data;
    block_header *h = (block_header *)pointer - 1;
    b->taken -= h->size;
    free(h);
}

void onnx_budget_init(onnx_budget *b, uint64_t budget) {
    memset(b, 0, sizeof *b);
    b->budget = budget;
    b->allocator.alloc = budget_alloc;
    b->allocator.free = budget_free;
    b->allocator.allocator_data = b;
}
