/* One strided elementwise kernel family for every unary/binary/ternary elementwise op of the GPU
 * engine, on NHWC8 and dense tensors alike: y = act(op(s0*a, s1*b[, s2*c])). C API over
 * src/kernels/eltwise.cu. */
#ifndef TCI_KERNELS_ELTWISE_H
#define TCI_KERNELS_ELTWISE_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "tcinfer.h"
#include "util/elementwise.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KERN_ELTWISE_MAX_RANK 6
#define KERN_ELTWISE_MAX_INPUTS 3

/* op and act are util/elementwise.h's (act computed in fp32 with act_alpha / act_beta);
 * BINARY_NONE with ACT_NONE is a strided copy. The output is contiguous (row-major over dims);
 * input k is read at sum_d index[d] * strides[k][d] elements from inputs[k] (stride 0
 * broadcasts; negative strides are allowed). dims are physical: an NHWC8 tensor is
 * (N, H, W, Cp) with pad_dim = 3 and real_c = C; output elements whose index along pad_dim is
 * >= real_c are written as +0 whatever the op, and input values there are ignored. Only inputs
 * without broadcasting (strides equal to the output's) may be read there, so a per-channel vector
 * (strides 0 but along pad_dim) may hold just real_c elements.
 * dtype is the type of the value inputs and the output: TCI_DTYPE_FLOAT16 or TCI_DTYPE_BFLOAT16
 * (computed in fp32, with the hardware exp/log/reciprocal/divide approximations, far below fp16
 * and bf16 rounding; one rounding on store), TCI_DTYPE_FLOAT (precise fp32 functions),
 * TCI_DTYPE_INT32 or TCI_DTYPE_INT64 (index arithmetic: position ids, shapes), or TCI_DTYPE_BOOL
 * (one byte, nonzero reads as true). WHERE's cond is uint8 (ONNX bool). The output is bool bytes
 * (0/1; kern_eltwise_writes_bool) for a BINARY_BOOL_RESULT op (EQUAL, LESS, ..., AND, OR, XOR;
 * these take ACT_NONE), an ACT_BOOL_RESULT activation (IS_NAN, IS_INF, NOT; with op NONE) and a
 * BOOL dtype; else it has dtype's type. int32 and int64 support NONE (with act NONE, NEG, ABS,
 * RELU or SIGN), ADD, SUB, MUL (wrapping on overflow), DIV (truncating toward zero; x/0 gives 0),
 * MAX, MIN, MOD, FMOD, the comparisons and WHERE; bool supports NONE (with act NONE or NOT),
 * EQUAL, AND, OR, XOR and WHERE; all with input scales of 1. */
typedef struct kern_eltwise_desc {
    binary_op op;
    act_kind act;
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

/* Whether the op writes bool bytes (see kern_eltwise_desc) rather than dtype values. */
bool kern_eltwise_writes_bool(const kern_eltwise_desc *desc);

/* Number of inputs op reads (1, 2 or 3). */
int kern_eltwise_num_inputs(binary_op op);

/* Defaults: no activation, scales 1, no padding, every input contiguous with the output's dims
 * (dims has rank entries; rank is clamped to 0..KERN_ELTWISE_MAX_RANK). */
void kern_eltwise_desc_init(kern_eltwise_desc *desc, binary_op op, tci_dtype dtype, int rank,
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
