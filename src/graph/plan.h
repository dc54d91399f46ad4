/* The GPU plan, logical half: the optimised IR lowered to a list of steps over device tensors with
 * layouts (NHWC fp16 padded to 8 channels, or dense), fused epilogues, BN folded into weights, and
 * arena offsets from the memory planner. Pure C with no CUDA: built and unit-tested anywhere;
 * exec_gpu.c turns it into device buffers and kernel launches. */
#ifndef TCI_GRAPH_PLAN_H
#define TCI_GRAPH_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/ir.h"

typedef enum plan_layout {
    PLAN_LAYOUT_DENSE = 0, /* row-major in logical order */
    PLAN_LAYOUT_NHWC8,     /* 4-D (N,C,H,W) stored NHWC, C padded with zeros to a multiple of 8 */
} plan_layout;

typedef enum plan_memory {
    PLAN_MEM_ARENA = 0, /* an activation: offset in the context's arena */
    PLAN_MEM_CONSTANT,  /* uploaded once at build from host_data (already in device layout) */
    PLAN_MEM_INPUT,     /* an engine input, converted from the caller's buffer */
} plan_memory;

typedef struct plan_tensor {
    const char *name;            /* the IR tensor's name, or a made-up one for temporaries */
    tci_dtype dtype;             /* device dtype: FLOAT16 (BFLOAT16 in bf16 plans) or FLOAT
                                    (fp32 layers), INT64, INT32, BOOL (1 byte) */
    plan_layout layout;
    int rank;
    int64_t dims[TCI_MAX_RANK];  /* logical (NCHW) dims */
    int64_t padded_channels;     /* NHWC8: round_up(dims[1], 8) */
    size_t bytes;
    plan_memory memory;
    const void *host_data;       /* PLAN_MEM_CONSTANT: bytes in device dtype and layout */
    bool packed_source;          /* PLAN_MEM_CONSTANT fp32 weights / bias a Conv, ConvTranspose or
                                    GEMM step packs for its kernel: not uploaded as such */
    int alias_of;                /* shares the memory of this tensor (Reshape of dense), or -1 */
    int input_index;             /* PLAN_MEM_INPUT: engine input index */
    int output_index;            /* an engine output: its index, else -1 */
    int first_step, last_step;   /* lifetime in steps, for the memory planner */
    size_t offset;               /* PLAN_MEM_ARENA: planned offset */
} plan_tensor;

typedef enum plan_act {
    PLAN_ACT_NONE = 0,
    PLAN_ACT_RELU,
    PLAN_ACT_LEAKY_RELU, /* alpha */
    PLAN_ACT_CLIP,       /* [alpha, beta]; Relu6 is CLIP 0..6 */
    PLAN_ACT_SIGMOID,
    PLAN_ACT_HARD_SIGMOID, /* alpha, beta */
    PLAN_ACT_HARD_SWISH,
    PLAN_ACT_TANH,
    PLAN_ACT_ELU,        /* alpha */
    PLAN_ACT_SELU,       /* alpha, beta=gamma */
    PLAN_ACT_SOFTPLUS,
    PLAN_ACT_SILU,
    PLAN_ACT_GELU,       /* erf form */
    PLAN_ACT_GELU_TANH,
    PLAN_ACT_SQRT,
    PLAN_ACT_ERF,
} plan_act;

typedef struct plan_activation {
    plan_act kind;
    float alpha, beta;
} plan_activation;

typedef enum plan_binary {
    PLAN_BIN_NONE = 0,
    PLAN_BIN_ADD,
    PLAN_BIN_SUB,
    PLAN_BIN_MUL,
    PLAN_BIN_DIV,
    PLAN_BIN_POW,
    PLAN_BIN_MAX,
    PLAN_BIN_MIN,
    PLAN_BIN_PRELU,
    PLAN_BIN_EQUAL,
    PLAN_BIN_WHERE, /* ternary: inputs cond, x, y */
} plan_binary;

typedef enum plan_step_kind {
    PLAN_STEP_CONV = 1,   /* y = act(conv(x, w) + bias + residual) */
    PLAN_STEP_GEMM,       /* y = act(alpha op(A) op(B) + bias) [+ beta C], batched */
    PLAN_STEP_ELTWISE,    /* y = act(binary(a, b[, c])) or act(a), broadcast by strides */
    PLAN_STEP_POOL,       /* 2-D max/avg pooling, NHWC8 */
    PLAN_STEP_GLOBAL_POOL,
    PLAN_STEP_COPY,       /* strided copy (Concat part, Slice, Transpose, Expand, Split part) */
    PLAN_STEP_FILL,       /* fill with a constant (ConstantOfShape, zero padding of Concat) */
    PLAN_STEP_LAYOUT,     /* NHWC8 <-> dense conversion */
    PLAN_STEP_CAST,       /* dtype conversion, dense */
    PLAN_STEP_SOFTMAX,    /* rows of the last axis; log flag */
    PLAN_STEP_LAYERNORM,  /* rows of the last axes */
    PLAN_STEP_REDUCE,     /* mean/sum over dims */
    PLAN_STEP_RESIZE,     /* NHWC8 2-D nearest/linear */
    PLAN_STEP_GATHER,
    PLAN_STEP_PAD,
    PLAN_STEP_CONV_TRANSPOSE, /* y = conv_transpose(x, w) + bias, then post_act */
} plan_step_kind;

#define PLAN_MAX_STEP_INPUTS 4
#define PLAN_NEAREST_LEGACY 4
#define PLAN_MAX_PHYS_RANK 6

/* Physical view for strided kernels: shape of the output and the strides of each operand (in
 * elements, 0 where broadcast). */
typedef struct plan_strided {
    int rank;
    int64_t dims[PLAN_MAX_PHYS_RANK];
    int64_t strides[PLAN_MAX_STEP_INPUTS][PLAN_MAX_PHYS_RANK];
    int64_t out_strides[PLAN_MAX_PHYS_RANK];
    int64_t in_offset[PLAN_MAX_STEP_INPUTS]; /* element offset of the first element read */
    int64_t out_offset;
    int pad_dim;       /* physical dim of NHWC8 channels in the output, -1 if none */
    int64_t real_channels;
} plan_strided;

typedef struct plan_conv {
    int64_t n, c, h, w, k, r, s, out_h, out_w;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int64_t stride_h, stride_w, dilation_h, dilation_w, groups;
    bool has_bias, has_residual;
    bool depthwise;           /* groups == C == K: our own kernel, any activation fused */
    plan_activation act;      /* applied after bias and residual */
    plan_activation post_act; /* what the library cannot fuse runs as an extra eltwise step */
    const char *fused;        /* e.g. "Conv+BatchNormalization+Add+Relu" (for reports) */
} plan_conv;

typedef struct plan_gemm {
    int64_t batch, m, n, k;
    bool trans_a, trans_b;
    int64_t stride_a, stride_b, stride_c; /* per batch, elements; 0 broadcasts */
    int64_t lda, ldb, ldc;
    float alpha, beta;
    bool has_bias;       /* per column of the output (N), fused */
    bool has_c;          /* beta * C, C in inputs[2] broadcast to (M,N) by c_strided */
    plan_activation act;
    const char *fused;
} plan_gemm;

typedef struct plan_pool {
    bool max;
    bool count_include_pad;
    int64_t n, c, h, w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w;
    int64_t pad_top, pad_left, dilation_h, dilation_w;
} plan_pool;

typedef struct plan_step {
    plan_step_kind kind;
    const ir_node *node;          /* first node it implements (names, reports) */
    const char *label;            /* op types fused into it, e.g. "Conv+Relu" */
    int inputs[PLAN_MAX_STEP_INPUTS]; /* plan tensor indices, -1 unused */
    int num_inputs;
    int outputs[2];
    int num_outputs;
    union {
        plan_conv conv;
        plan_gemm gemm;
        plan_pool pool;
        struct {
            plan_binary op;
            plan_activation act;
            plan_strided view;
        } eltwise;
        struct {
            plan_strided view;
            size_t elem_size;
        } copy;
        struct {
            double value;
            int64_t count;
        } fill;
        struct {
            bool to_dense; /* NHWC8 -> dense NCHW, else dense -> NHWC8 */
        } layout;
        struct {
            int64_t count;
        } cast;
        struct {
            int64_t rows, length;
            bool log;
        } softmax;
        struct {
            int64_t rows, length;
            float epsilon;
            bool has_bias;
        } layernorm;
        struct {
            plan_strided view; /* dims of the input; strides[0] of the input */
            bool reduce_dim[PLAN_MAX_PHYS_RANK];
            bool mean;
        } reduce;
        struct {
            int64_t n, c, h, w, out_h, out_w;
            bool linear;
            int coord_mode;   /* half_pixel, pytorch_half_pixel, align_corners, asymmetric,
                                 half_pixel_symmetric: 0..4 */
            int nearest_mode; /* round_prefer_floor, round_prefer_ceil, floor, ceil: 0..3, or
                                 PLAN_NEAREST_LEGACY (Upsample, Resize-10) */
            float scale_h, scale_w;
        } resize;
        struct {
            int64_t outer, axis_dim, inner, num_indices;
            size_t elem_size;
        } gather;
        struct {
            int rank;
            int64_t dims[PLAN_MAX_PHYS_RANK];
            int64_t pads_begin[PLAN_MAX_PHYS_RANK], pads_end[PLAN_MAX_PHYS_RANK];
            int mode; /* 0 constant, 1 reflect, 2 edge */
            double value;
            size_t elem_size;
        } pad;
    } u;
} plan_step;

typedef struct plan {
    tci_arena *arena;            /* host_data, names, labels */
    plan_tensor *tensors;
    int num_tensors, cap_tensors;
    plan_step *steps;
    int num_steps, cap_steps;
    int *input_tensors;          /* per engine input */
    int num_inputs;
    int *output_tensors;         /* per engine output */
    int num_outputs;
    size_t arena_bytes;          /* planned activation arena */
    size_t naive_bytes;          /* one buffer per activation */
    size_t weight_bytes;         /* constants */
    int num_layout_conversions;  /* conversions inserted between layouts */
} plan;

typedef struct plan_options {
    /* Nodes kept in fp32 (--fp32-layers): each entry is a node name or an op type (every node of
     * that type) or a shell pattern over node names (fnmatch without flags: '*' also
     * matches '/'); NULL-terminated, may be NULL. An entry that matches no node's name and is
     * no op type is an error (an op type the model lacks selects nothing). Such a
     * node computes in fp32 and stores its float outputs as FLOAT; nodes fused into its step
     * follow it, data-movement nodes (Reshape, Concat, Slice...) keep the precision of their
     * first input, every other node reads fp16 (a cast step where needed). */
    const char *const *fp32_layers;
    /* Every node in fp32, with tensor-op math off in the libraries: the GPU fp32 baseline. */
    bool all_fp32;
    /* fp32 steps may use TF32 tensor cores in cuDNN / cuBLASLt (--precision tf32); the plan
     * itself is that of all_fp32. */
    bool tf32;
    /* bfloat16 instead of fp16 for every float tensor of the nodes not kept in fp32
     * (--precision bf16); everything else as for fp16. */
    bool bf16;
} plan_options;

/* Lowers an optimised graph (pass_optimize done; every dim of every tensor known) to a plan.
 * An op without a GPU path is an error naming the node; so is a shape that depends on runtime
 * values. */
tci_status plan_build(const ir_graph *graph, const plan_options *options, plan **out_plan);
void plan_destroy(plan *p);

/* Which nodes of graph plan_build runs in fp32 (by node index, graph->num_nodes entries), or the
 * error it would give for options->fp32_layers. */
tci_status plan_fp32_nodes(const ir_graph *graph, const plan_options *options, bool *out);

/* Whether one fp32_layers entry selects node: its name, its op type, or a pattern matching its
 * name. */
bool plan_fp32_selects(const char *entry, const ir_node *node);

/* The kernel family a step runs on ("cuDNN convolution", "tcinfer eltwise", ...); the executor
 * replaces library families with the algorithm it chose. */
const char *plan_step_kernel(const plan_step *step);

/* round_up(c, 8) */
int64_t plan_pad8(int64_t c);

#endif
