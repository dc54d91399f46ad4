/* One strided elementwise kernel family for every unary/binary/ternary elementwise op of the GPU
 * engine, on NHWC8 and dense tensors alike: y = act(op(s0*a, s1*b[, s2*c])). C API over
 * src/kernels/eltwise.cu. */
#ifndef TCI_KERNELS_ELTWISE_H
#define TCI_KERNELS_ELTWISE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "tcinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_ELTWISE_MAX_RANK 6
#define KERN_ELTWISE_MAX_INPUTS 3

typedef enum kern_eltwise_op {
    KERN_ELTWISE_UNARY = 0, /* one input: y = act(s0*a); with KERN_ACT_NONE a strided copy */
    KERN_ELTWISE_ADD,
    KERN_ELTWISE_SUB,
    KERN_ELTWISE_MUL,
    KERN_ELTWISE_DIV, /* int64: truncates toward zero; x/0 gives 0 */
    KERN_ELTWISE_POW, /* float only */
    KERN_ELTWISE_MAX, /* NaN propagates (numpy.maximum) */
    KERN_ELTWISE_MIN,
    KERN_ELTWISE_PRELU, /* a < 0 ? b*a : a, b the slope; float only */
    KERN_ELTWISE_EQUAL, /* output uint8 0/1; act must be KERN_ACT_NONE */
    KERN_ELTWISE_WHERE, /* inputs (cond uint8, x, y): cond ? x : y */
    KERN_ELTWISE_OP_COUNT
} kern_eltwise_op;

/* Activation applied after the op, computed in fp32. Parameters in act_alpha / act_beta. */
typedef enum kern_act {
    KERN_ACT_NONE = 0,
    KERN_ACT_RELU,
    KERN_ACT_LEAKY_RELU, /* alpha: slope for x < 0 */
    KERN_ACT_CLIP,       /* alpha: min, beta: max (use -INFINITY/INFINITY for an absent bound);
                            ReLU6 is CLIP(0, 6) */
    KERN_ACT_SIGMOID,
    KERN_ACT_HARD_SIGMOID, /* max(0, min(1, alpha*x + beta)) */
    KERN_ACT_HARD_SWISH,   /* x * max(0, min(1, x/6 + 1/2)) */
    KERN_ACT_TANH,
    KERN_ACT_ELU,  /* alpha */
    KERN_ACT_SELU, /* alpha, beta = gamma */
    KERN_ACT_SOFTPLUS,
    KERN_ACT_SQRT,
    KERN_ACT_ERF,
    KERN_ACT_GELU,      /* 0.5x(1 + erf(x/sqrt 2)) */
    KERN_ACT_GELU_TANH, /* 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) */
    KERN_ACT_SILU,      /* x * sigmoid(x) */
    KERN_ACT_NEG,
    KERN_ACT_ABS,
    KERN_ACT_EXP,
    KERN_ACT_LOG,
    KERN_ACT_RECIPROCAL,
    KERN_ACT_COUNT
} kern_act;

/* The output is contiguous (row-major over dims); input k is read at
 * sum_d index[d] * strides[k][d] elements from inputs[k] (stride 0 broadcasts; negative strides
 * are allowed). dims are physical: an NHWC8 tensor is (N, H, W, Cp) with pad_dim = 3 and
 * real_c = C; output elements whose index along pad_dim is >= real_c are written as +0 whatever
 * the op, and input values there are ignored. Only inputs without broadcasting (strides equal
 * to the output's) may be read there, so a per-channel vector (strides 0 but along pad_dim) may
 * hold just real_c elements.
 * dtype is the type of the value inputs and the output: TCI_DTYPE_FLOAT16 or TCI_DTYPE_BFLOAT16
 * (computed in fp32, with the hardware exp/log/reciprocal/divide approximations, far below fp16
 * and bf16 rounding; one rounding on store), TCI_DTYPE_FLOAT (precise fp32 functions) or
 * TCI_DTYPE_INT64. EQUAL writes TCI_DTYPE_UINT8; WHERE's cond is uint8
 * (ONNX bool). int64 supports UNARY (with act NONE, NEG, ABS or RELU), ADD, SUB, MUL, DIV, MAX,
 * MIN, EQUAL and WHERE, with input scales of 1. */
typedef struct kern_eltwise_desc {
    kern_eltwise_op op;
    kern_act act;
    float act_alpha, act_beta;
    float input_scale[KERN_ELTWISE_MAX_INPUTS]; /* each value input is multiplied first; float
                                                   dtypes only (WHERE's cond ignores its own) */
    tci_dtype dtype;
    int rank; /* 0..KERN_ELTWISE_MAX_RANK */
    int64_t dims[KERN_ELTWISE_MAX_RANK];
    int64_t strides[KERN_ELTWISE_MAX_INPUTS][KERN_ELTWISE_MAX_RANK]; /* in elements */
    int pad_dim;                                                     /* -1: no channel padding */
    int64_t real_c;
} kern_eltwise_desc;

/* Number of inputs op reads (1, 2 or 3). */
int kern_eltwise_num_inputs(kern_eltwise_op op);

/* Defaults: no activation, scales 1, no padding, every input contiguous with the output's dims
 * (dims has rank entries; rank is clamped to 0..KERN_ELTWISE_MAX_RANK). */
void kern_eltwise_desc_init(kern_eltwise_desc *desc, kern_eltwise_op op, tci_dtype dtype, int rank,
                            const int64_t *dims);

/* Sets input's strides for a dense row-major tensor of `rank` dims numpy-broadcast against the
 * output (aligned at the last dim; size-1 dims broadcast). TCI_ERR_INVALID_ARGUMENT if it does
 * not broadcast. */
tci_status kern_eltwise_broadcast_strides(kern_eltwise_desc *desc, int input, int rank,
                                          const int64_t *dims);

/* Enqueues the op on stream. inputs has kern_eltwise_num_inputs(desc->op) device pointers; out
 * must not partly overlap an input (exact in-place, out == an input read with the output's own
 * strides, is fine). Fast paths: contiguous/scalar/last-dim-vector inputs (same shape,
 * per-channel NHWC scale/bias, row bias) run vectorised over 16 bytes (8 fp16 or bf16 values, 4
 * fp32) when the buffers are 16-byte aligned; anything else takes the general strided path. Errors:
 * TCI_ERR_INVALID_ARGUMENT (bad desc or NULL buffer), TCI_ERR_UNSUPPORTED (op/act/dtype
 * combination not provided), TCI_ERR_CUDA. */
tci_status kern_eltwise(const kern_eltwise_desc *desc, const void *const *inputs, void *out,
                        cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
