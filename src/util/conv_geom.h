/* The geometry of one 2-D window operation over an N x C x H x W input, defined once: a
 * convolution (Conv, ConvTranspose, depthwise) or a pooling window. The plan step carries it
 * from the op's lowering (src/layers/) to the executor, which hands it unchanged to the kernel
 * descriptors (src/kernels/): one set of names from the ONNX attributes to the launch. Plain C,
 * included by host code and the CUDA kernels alike. */
#ifndef TCI_UTIL_CONV_GEOM_H
#define TCI_UTIL_CONV_GEOM_H

#include <stdint.h>

/* Output (oh, ow) reads input rows oh*stride_h - pad_top + i*dilation_h (i < kernel_h),
 * likewise for columns. Channel counts are logical (the NHWC8 tensors hold them rounded up to a
 * multiple of 8). For ConvTranspose, n..w describe its input X and out_h, out_w its output Y (the
 * shapes of the convolution it is the data gradient of, the other way round). */
typedef struct conv_geom {
    int64_t n, c, h, w;                       /* input: batch (the largest run), channels, size */
    int64_t k;                                /* output channels (pooling: c) */
    int64_t kernel_h, kernel_w;
    int64_t out_h, out_w;
    int64_t stride_h, stride_w, dilation_h, dilation_w;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int64_t groups;                           /* 1 for pooling */
} conv_geom;

#endif
