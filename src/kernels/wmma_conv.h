/* Convolution (and, as its 1x1 case, GEMM) as an implicit GEMM on tensor cores through the CUDA WMMA
 * API, NHWC8 fp16 (or bf16) in and out, fp32 accumulation, fused epilogue y = act(alpha*conv + bias + z): a
 * family of tile configs the planner times beside cuDNN. C API over src/kernels/wmma_conv.cu. */
#ifndef TCI_KERNELS_WMMA_CONV_H
#define TCI_KERNELS_WMMA_CONV_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "tcinfer.h"
#include "util/conv_geom.h"
#include "util/elementwise.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Taps outside the input read as zero, so the bottom/right padding is whatever out_h/out_w imply
 * (asymmetric pads are fine). */
typedef struct kern_wmma_conv_desc {
    /* n the largest batch; logical channels c, stored Cp = round_up(c, 8) (NHWC fp16, padded
     * channels zero); k output channels, stored Kp = round_up(k, 8); pad_top, pad_left >= 0
     * (pad_bottom and pad_right are not read); groups 1, or > 1 with c/groups and k/groups
     * multiples of 8 (nothing padded) */
    conv_geom geom;
    float alpha;               /* scale of the accumulator, normally 1 */
    act_kind act;              /* any; the fast (fp16-kernel) forms of util/elementwise.h's */
    float act_alpha, act_beta;
    /* element type of x, w, z and y: TCI_DTYPE_FLOAT16 (or 0), or TCI_DTYPE_BFLOAT16, which the
     * configs with 16x16x16 fragments offer (the others say TCI_ERR_UNSUPPORTED) */
    tci_dtype dtype;
} kern_wmma_conv_desc;

/* The configs, numbered 0 .. count-1, named like "wmma 128x64x32 w4 16x16x16 s4 splitk4" (block tile
 * M x N x K, warps, fragment shape, pipeline stages, split-K factor). Names are static strings; NULL
 * for an unknown config. */
int kern_wmma_conv_config_count(void);
const char *kern_wmma_conv_config_name(int config);

/* TCI_OK if config can run desc at batch desc->n; TCI_ERR_INVALID_ARGUMENT for a bad desc or config,
 * TCI_ERR_UNSUPPORTED (message says why) where config does not apply: sizes past the 32-bit indexing
 * limits, or a split-K config where it is pointless (fewer K tiles than splits, or more than 512
 * output tiles before splitting: split-K only helps grids too small to fill the GPU). */
tci_status kern_wmma_conv_supports(const kern_wmma_conv_desc *desc, int config);

/* Workspace bytes config needs at batch desc->n (split-K fp32 partials, with slack for aligning the
 * pointer); 0 for configs without split-K, and for a desc or config supports() refuses. */
size_t kern_wmma_conv_workspace(const kern_wmma_conv_desc *desc, int config);

/* y = act(alpha*conv(x, w) + bias + z) for batch n (1 <= n <= desc->n), computed in fp32 and rounded
 * to fp16 (bf16: desc->dtype) once; every "fp16" below means desc->dtype.
 * x: (n, h, w, Cp) fp16. w: packed by kern_wmma_conv_pack_weights. bias: NULL or Kp floats
 * (zero-padded). z: NULL or a residual shaped as y (fp16 NHWC, Kp channels); it may be y itself
 * (exactly); nothing else may overlap y. y: (n, out_h, out_w, Kp) fp16; padded channels are written
 * as +0 whatever act gives. workspace: kern_wmma_conv_workspace(desc, config) bytes (may be NULL
 * when that is 0); its contents need no initialising. Every buffer 16-byte aligned.
 * No allocation, no synchronisation: capturable in a CUDA graph (configs with more than 48 KB of
 * shared memory set the kernel's attribute on each call, which capture allows).
 * Errors: TCI_ERR_INVALID_ARGUMENT (bad desc, config, n, NULL / misaligned / overlapping buffer,
 * workspace too small), TCI_ERR_UNSUPPORTED (as supports()), TCI_ERR_CUDA. */
tci_status kern_wmma_conv_run(const kern_wmma_conv_desc *desc, int config, int64_t n, const void *x,
                              const void *w, const void *bias, const void *z, void *y, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream);

/* Host packing of ONNX weights K x (C/groups) x R x S fp32 into the layout tcinfer's cuDNN wrapper
 * uses (kern_conv_pack_weights, fp16 or bf16 mode), so one device copy serves both:
 * groups == 1: Kp x R x S x Cp (zero where k >= K or c >= C); groups > 1: K x R x S x (C/groups).
 * out: kern_wmma_conv_weight_elements(desc) fp16 (bf16 when desc->dtype says so) bits, round to
 * nearest even. Only c, k, r, s, groups and dtype of desc are read. weight_elements is 0 for a bad desc; pack_weights says
 * TCI_ERR_INVALID_ARGUMENT for it or for NULL pointers. */
size_t kern_wmma_conv_weight_elements(const kern_wmma_conv_desc *desc);
tci_status kern_wmma_conv_pack_weights(const kern_wmma_conv_desc *desc, const float *w_oihw, uint16_t *out);

#ifdef __cplusplus
}
#endif

#endif
