/* What the shape-op families (shape_ops.c, movement.c) share: byte-moving helpers for every
 * dtype, integer-list inputs, parameter allocation. Internal to src/layers/. */
#ifndef TCI_LAYERS_SHAPE_UTIL_H
#define TCI_LAYERS_SHAPE_UTIL_H

#include "layers/op.h"

/* A shape-family descriptor; the trailing arguments are the ONNX since-versions. */
#define SHAPE_OP(var, name, parse_fn, infer_fn, forward_fn, op_flags, lower, ...)                \
    OP_DESC(var, name, OP_VERSIONS(__VA_ARGS__), parse_fn, infer_fn, forward_fn, op_flags, lower, \
            NULL, BINARY_NONE)

/* SHAPE_OP with a pattern role (op_desc.pattern). */
#define SHAPE_OP_PATTERN(var, name, parse_fn, infer_fn, forward_fn, op_flags, lower, pattern_fn,  \
                         ...)                                                                     \
    OP_DESC_PATTERN(var, name, OP_VERSIONS(__VA_ARGS__), parse_fn, infer_fn, forward_fn,          \
                    op_flags, lower, pattern_fn)

/* Declares var, allocates it from the arena as node->params, or returns the error. */
#define PARAMS(type, var)                                                                          \
    type *var = shape_params_alloc(node, arena, sizeof(type));                                     \
    if (!var) return shape_out_of_memory(node)

/* Params of ops with one axis attribute (Concat, Gather). */
typedef struct {
    int64_t axis;
} axis_params;

tci_status shape_check_elem_dtype(const ir_node *node, const tci_tensor *t, int index);
bool shape_dims_known(int rank, const int64_t *dims);
/* An empty tensor's value is known even without a buffer (an empty initializer may have none). */
bool shape_value_known(const tci_tensor *t);
/* Product of dims, -1 when any is unknown; errors on overflow. */
tci_status shape_dims_product(const ir_node *node, int rank, const int64_t *dims, int64_t *out);
tci_status shape_check_out_rank(const ir_node *node, int64_t rank);
/* Reads a 1-D integer input (shape, axes, pads, ...). *out_len is -1 while its length is unknown
 * and *out_known says whether vals holds the values; lists longer than max are refused. */
tci_status shape_read_int_list(const ir_node *node, const tci_tensor *t, int index,
                               const char *what, int max, int64_t *vals, int *out_len,
                               bool *out_known);
/* Normalises a list of axes against rank; duplicates are an error. */
tci_status shape_normalize_axes(const ir_node *node, const int64_t *axes, int count, int rank,
                                int *out);
void shape_copy_elem(char *dst, const char *src, size_t es);
void shape_copy_all(tci_tensor *out, const tci_tensor *in);
/* The index maps of shape_copy_by_maps for out (its rank and dims), one per dim: maps[d][i] is
 * the source element offset that output index i of dim d contributes, or -1 for "fill". Sum over
 * dims gives the source element; this one kernel serves Transpose, Slice, Expand, Tile,
 * DepthToSpace, SpaceToDepth and every Pad mode. *out_maps is one malloc'd block (free), or NULL
 * where out has no element: nothing to copy, and the caller returns TCI_OK (the maps take 8
 * bytes per index of every dim, and a zero dim beside a huge one would ask gigabytes for
 * nothing). Out of memory is an error naming node. */
tci_status shape_maps_alloc(const ir_node *node, const tci_tensor *out, int64_t ***out_maps);
void shape_copy_by_maps(tci_tensor *out, const tci_tensor *in, int64_t *const *maps,
                        const void *fill);
tci_status shape_out_of_memory(const ir_node *node);
void *shape_params_alloc(ir_node *node, mem_arena *arena, size_t size);
/* Parses an op of num_inputs inputs, one output and only the attribute axis (default def) into
 * axis_params. */
tci_status shape_parse_axis(ir_node *node, mem_arena *arena, int num_inputs, int64_t def);

#endif
