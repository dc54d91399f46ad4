/* Window geometry of Conv, ConvTranspose and pooling nodes over any number of spatial axes: the
 * numbers infer and the CPU forward use, and (2-D) the conv_geom of the GPU lowering, so the
 * rules live in one place. */
#ifndef TCI_LAYERS_WINDOW_H
#define TCI_LAYERS_WINDOW_H

#include <stdbool.h>

#include "graph/ir.h"
#include "util/conv_geom.h"
#include "util/pool_kinds.h"

#define LAYER_MAX_SPATIAL (TCI_MAX_RANK - 2)

typedef struct layer_window {
    int spatial;
    int64_t batch, in_channels, out_channels, group; /* group: 1 for pooling */
    int64_t offset_group;              /* DeformConv only (1 for the other convolutions) */
    int64_t in[LAYER_MAX_SPATIAL], out[LAYER_MAX_SPATIAL], kernel[LAYER_MAX_SPATIAL];
    int64_t stride[LAYER_MAX_SPATIAL], dilation[LAYER_MAX_SPATIAL];
    int64_t pad_begin[LAYER_MAX_SPATIAL], pad_end[LAYER_MAX_SPATIAL];
    pool_kind kind;                    /* pooling only */
    bool count_include_pad, ceil_mode; /* pooling only */
} layer_window;

/* in[] as for the op's infer (X, W[, B] for Conv; X for pooling). Dims the inputs do not tell
 * yet are -1 (Conv; pooling needs known ranks). */
tci_status layer_conv_window(const ir_node *node, const tci_tensor *const *in,
                             layer_window *out_window);
tci_status layer_pool_window(const ir_node *node, const tci_tensor *const *in,
                             layer_window *out_window);

/* For the integer convolutions (ConvInteger, QLinearConv: quant_linear.c), whose X and W are
 * not inputs 0 and 1 and hold any dtype: Conv's attributes parsed into node->params (the caller
 * checks the arity), and the window of X and W as layer_conv_window gives it. */
tci_status layer_conv_parse_attrs(ir_node *node, mem_arena *arena);
tci_status layer_conv_window_of(const ir_node *node, const tci_tensor *x, const tci_tensor *w,
                                layer_window *out_window);

/* A convolution's float output Y (N, out_channels, output dims) from its window: rank -1 while
 * the spatial rank is unknown, -1 dims where the window has them; an error when too large. */
tci_status layer_conv_output(const layer_window *g, tci_tensor *y);

/* DeformConv (deform_conv.c): Conv's attributes less auto_pad, with offset_group, parsed into
 * node->params (the caller checks the arity); its window is layer_conv_window_of's. */
tci_status layer_deform_conv_parse_attrs(ir_node *node, mem_arena *arena);

/* The 2-D geometry (spatial axes 0 and 1) of a window, as the plan steps carry it. */
void layer_window_geom(const layer_window *win, conv_geom *out);

#endif
