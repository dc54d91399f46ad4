/* The plan's vocabulary and the lowering interface: what an op's gpu_lower (src/layers/) emits
 * (plan tensors with layouts, steps with fused epilogues) and the builder calls it uses to do so.
 * The plan builder (src/graph/plan/) implements the calls; this header sits at the IR's level so
 * that the op families can lower themselves without depending on the planner. Pure C, no CUDA. */
#ifndef TCI_GRAPH_LOWER_H
#define TCI_GRAPH_LOWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/ir.h"
#include "util/conv_geom.h"
#include "util/elementwise.h"
#include "util/grid_sample_math.h"
#include "util/pool_kinds.h"
#include "util/reduce_ops.h"
#include "util/resize_modes.h"

/* every arena tensor starts at a multiple of this many bytes (what the kernels and cuBLASLt's
 * heuristics assume of their operands), views included */
enum { PLAN_ALIGNMENT = 256 };

typedef enum plan_memory {
    PLAN_MEM_ARENA = 0, /* an activation: offset in the context's arena */
    PLAN_MEM_CONSTANT,  /* uploaded once at build from host_data (already in device layout) */
    PLAN_MEM_INPUT,     /* an engine input, converted from the caller's buffer */
} plan_memory;

typedef struct plan_tensor {
    const char *name;            /* the IR tensor's name, or a made-up one for temporaries */
    tci_dtype dtype;             /* device dtype: FLOAT16 (BFLOAT16 in bf16 plans) or FLOAT
                                    (fp32 layers; BFLOAT16 where an fp16 plan keeps them in
                                    bf16), INT64, INT32, BOOL (1 byte) */
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
    size_t view_bytes;           /* alias_of >= 0: where it starts in that memory (a contiguous
                                    part a Split or Slice selects), a multiple of
                                    PLAN_ALIGNMENT; 0 for a whole-tensor alias */
    int input_index;             /* PLAN_MEM_INPUT: engine input index */
    int output_index;            /* an engine output: its index, else -1 */
    int first_step, last_step;   /* lifetime in steps, for the memory planner */
    size_t offset;               /* PLAN_MEM_ARENA: planned offset */
} plan_tensor;

typedef enum plan_step_kind {
    PLAN_STEP_CONV = 1,   /* y = act(conv(x, w) + bias + residual) */
    PLAN_STEP_GEMM,       /* y = act(alpha op(A) op(B) + beta C + bias), batched */
    PLAN_STEP_ELTWISE,    /* y = act(binary(a, b[, c])) or act(a), broadcast by strides */
    PLAN_STEP_POOL,       /* 2-D max/avg pooling, NHWC8 */
    PLAN_STEP_GLOBAL_POOL,
    PLAN_STEP_COPY,       /* strided copy (Concat part, Slice, Transpose, Expand, Split part) */
    PLAN_STEP_FILL,       /* fill with a constant (ConstantOfShape, zero padding of Concat) */
    PLAN_STEP_LAYOUT,     /* NHWC8 <-> dense conversion */
    PLAN_STEP_CAST,       /* dtype conversion, dense */
    PLAN_STEP_SOFTMAX,    /* rows of the last axis; log flag */
    PLAN_STEP_LAYERNORM,  /* rows of the last axes, optionally of x + residual; or RMS rows */
    PLAN_STEP_REDUCE,     /* a reduce_op (util/reduce_ops.h) over dims */
    PLAN_STEP_RESIZE,     /* NHWC8 2-D nearest/linear */
    PLAN_STEP_GATHER,
    PLAN_STEP_PAD,
    PLAN_STEP_CONV_TRANSPOSE, /* y = conv_transpose(x, w) + bias, then post_act */
    PLAN_STEP_GATHER_ELEMENTS, /* y[i] = x[i with the axis coordinate replaced by idx[i]] */
    PLAN_STEP_SCATTER,         /* y = x, then updates applied at indices, in order (ScatterND
                                  when u.index.nd, else along an axis) */
    PLAN_STEP_TRILU,           /* zero above or below a diagonal of the last two dims; the
                                  diagonal k, or an int64 read from inputs[1] when present */
    PLAN_STEP_ONE_HOT,         /* y = on where the index names the position along depth */
    PLAN_STEP_RNN,        /* a recurrent layer's state set-up, time steps or final state */
    PLAN_STEP_ARG_REDUCE, /* int64 position of the max / min along an axis (ArgMax, ArgMin) */
    PLAN_STEP_CUMSUM,     /* running sum along an axis */
    PLAN_STEP_TOPK,       /* the k best values along an axis and their int64 positions */
    PLAN_STEP_GROUPNORM,  /* per (image, channel group) statistics, NHWC8 or dense */
    PLAN_STEP_LRN,        /* across-channel local response normalisation, NHWC8 or dense */
    PLAN_STEP_ATTENTION,  /* y = softmax(scale q k^T + mask) v in one kernel (plan_attention) */
    PLAN_STEP_ROTARY,     /* rotary positional embedding of each head's first values (u.rotary) */
    PLAN_STEP_GRID_SAMPLE, /* y (N, C, out...) = x (N, C, in...) sampled at grid (N, out..., r),
                              all dense (u.grid_sample) */
} plan_step_kind;

/* How a scatter combines an update with the element it lands on (ONNX 'reduction'). */
typedef enum plan_scatter_reduce {
    PLAN_SCATTER_NONE = 0,
    PLAN_SCATTER_ADD,
    PLAN_SCATTER_MUL,
    PLAN_SCATTER_MAX,
    PLAN_SCATTER_MIN,
} plan_scatter_reduce;

#define PLAN_MAX_STEP_INPUTS 5
#define PLAN_MAX_PHYS_RANK 6
/* The largest K a PLAN_STEP_TOPK takes (kern_topk keeps the best K of a run per thread). */
#define PLAN_TOPK_MAX_K 64

/* One input of a Concat as a 2-D block of its output, in elements: rows x len read src_ld
 * apart from src_offset, written dst_ld apart from dst_offset. */
typedef struct plan_copy_block {
    int64_t rows, len, src_ld, dst_ld, dst_offset;
    int64_t src_offset; /* from the start of the input (a Slice read in place) */
} plan_copy_block;

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
    conv_geom geom;
    bool has_bias, has_residual;
    bool depthwise;           /* groups == C == K: our own kernel, any activation fused */
    act_params act;      /* applied after bias and residual */
    act_params post_act; /* what the library cannot fuse runs as an extra eltwise step */
    const char *fused;        /* e.g. "Conv+BatchNormalization+Add+Relu" (for reports) */
} plan_conv;

typedef struct plan_gemm {
    int64_t batch, m, n, k;
    bool trans_a, trans_b;
    int64_t stride_a, stride_b, stride_c; /* per batch, elements; 0 broadcasts */
    int64_t lda, ldb, ldc;
    float alpha, beta;
    bool has_bias;       /* per column of the output (N), fused; inputs[2] */
    bool has_c;          /* beta * C, C in inputs[3] in y's layout (ldc, stride_c): a residual */
    act_params act;      /* any; applied last (cuBLASLt: as a step of its own where its
                            epilogues lack the function) */
    const char *fused;
} plan_gemm;

typedef struct plan_pool {
    pool_kind kind;
    bool count_include_pad;
    /* PLAN_STEP_POOL: the window, pad_bottom and pad_right what the output size implies beyond
     * the input (the ceil-mode overhang included); PLAN_STEP_GLOBAL_POOL: n, c, h, w and a 1x1
     * output */
    conv_geom geom;
} plan_pool;

/* The recurrence of LSTM, GRU and RNN (src/layers/rnn.c) as three steps over one fp32 state
 * tensor (PLAN_RNN_STATE_ROWS x directions*batch*hidden, each row indexed (direction, batch,
 * unit): h before even steps, h before odd steps (the steps read one and write the other, so
 * that the units of one sequence are computed by several blocks), c (GRU keeps its update gate
 * there), and GRU's r (.) h_{t-1} when the reset comes first):
 *   INIT   inputs initial_h, initial_c (-1: zeros)                  output state
 *   STEPS  inputs xw, weights, sequence_lens (-1: all full), state, X
 *                                                                   output Y, or none
 *   FINAL  inputs state, sequence_lens                              outputs Y_h and/or Y_c
 * xw is the input projection X W^T + Wb (a GEMM step before them): a row per row of X, in X's
 * order, columns direction-major in ONNX's gate order. weights is fp32: per direction R
 * transposed ((hidden) x gates*hidden), then Rb (gates*hidden) per direction, then P (3*hidden)
 * per direction (zeros when absent). STEPS reads X itself for the candidate that computes the
 * projection too (cuDNN's RNN; then the executor skips the GEMM step writing xw): X's tensor
 * lives until STEPS. */
typedef enum plan_rnn_phase { PLAN_RNN_INIT = 0, PLAN_RNN_STEPS, PLAN_RNN_FINAL } plan_rnn_phase;
#define PLAN_RNN_STATE_ROWS 4
typedef enum plan_rnn_cell {
    PLAN_RNN_TANH = 0, /* RNN: one gate, tanh */
    PLAN_RNN_GRU,      /* gates z, r, h */
    PLAN_RNN_LSTM,     /* gates i, o, f, c; peepholes i, o, f */
} plan_rnn_cell;

typedef struct plan_rnn {
    plan_rnn_phase phase;
    plan_rnn_cell cell;
    int64_t seq_length, batch, hidden, directions;
    bool reverse;             /* one direction, run backward */
    bool batch_major;         /* layout 1: X (B, T, I), Y (B, T, D, H), Y_h (B, D, H) */
    bool linear_before_reset; /* GRU */
    bool has_y_h, has_y_c;    /* FINAL: which outputs it writes (in this order) */
} plan_rnn;

/* A fused attention (src/layers/attention.c, src/kernels/attention.h): inputs q, k, v, the
 * optional additive mask or the optional bool keep mask, q, k and v read from their element
 * offsets through element strides
 * along (batch, head, position, head_dim) (mask: (batch, head, query, key), 0 where it
 * broadcasts); output y written through y_strides along (batch, head, query, head_dim), all in
 * the storage type, which is fp16 or bf16. */
typedef struct plan_attention {
    int64_t batch, heads, q_len, kv_len, head_dim;
    int64_t q_strides[4], k_strides[4], v_strides[4], mask_strides[4], y_strides[4];
    int64_t q_offset, k_offset, v_offset;
    /* the bool keep mask's element strides along (batch, head, query, key); 0 broadcasts */
    int64_t keep_strides[4];
    int64_t mask_batch_mod; /* > 0: batch b reads the mask's batch b % mask_batch_mod */
    float scale;
    bool causal;   /* keys j > query i masked without reading a mask */
    bool has_mask; /* inputs[3] is the additive mask */
    /* inputs[3] is instead the bool keep mask: key j seen by query i where true
     * (ir_attention.keep); never both */
    bool has_keep;
    bool keep_row_mean; /* a row keep drops every key of: the mean of V, else zeros */
} plan_attention;

/* The head dims the fused attention kernel is built for; another lowers the unfused steps. */
static inline bool plan_attention_head_dim_ok(int64_t d) {
    return d == 32 || d == 64 || d == 80 || d == 96 || d == 128;
}

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
            binary_op op;
            act_params act;
            plan_strided view;
        } eltwise;
        struct {
            plan_strided view;
            size_t elem_size;
            /* num_blocks > 0: a Concat's inputs (inputs[k]) copied as 2-D blocks in one launch
             * (view unused) */
            int num_blocks;
            plan_copy_block blocks[PLAN_MAX_STEP_INPUTS];
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
            /* inputs x, scale, bias (-1: none), residual (-1: none): normalises x + residual;
             * outputs y and, when num_outputs is 2, that sum */
            bool has_residual;
            bool rms; /* RMSNormalization: no mean subtracted, no bias */
        } layernorm;
        struct {
            plan_strided view; /* dims of the input; strides[0] of the input */
            bool reduce_dim[PLAN_MAX_PHYS_RANK];
            reduce_op op;
        } reduce;
        struct {
            int64_t n, c, h, w, out_h, out_w;
            resize_mode mode;         /* nearest, linear or cubic */
            resize_coord coord;
            resize_rounding rounding; /* nearest only */
            float scale_h, scale_w;
            float cubic_a;            /* cubic only */
            bool exclude_outside;     /* linear and cubic: taps past the edge weigh 0 */
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
        struct {
            int rank;                               /* of the data (x and y) */
            int64_t data_dims[PLAN_MAX_PHYS_RANK];
            int64_t index_dims[PLAN_MAX_PHYS_RANK]; /* the indices' (same rank) unless nd */
            int axis;                               /* unless nd */
            bool nd;                                /* ScatterND: tuples of k leading indices */
            int k;
            int64_t num_updates;                    /* nd: number of index tuples */
            plan_scatter_reduce reduce;
            size_t elem_size;
        } index;
        struct {
            int64_t batch, rows, cols, k;
            bool upper;
            size_t elem_size;
        } trilu;
        struct {
            int64_t outer, depth, inner; /* y viewed as (outer, depth, inner) */
            double off, on;
        } one_hot;
        plan_rnn rnn;
        plan_attention attention;
        struct {
            int64_t outer, len, inner; /* the input viewed around its axis */
            int64_t k;                 /* TOPK: how many */
            bool is_min, select_last;  /* ARG_REDUCE */
            bool exclusive, reverse;   /* CUMSUM */
            bool largest;              /* TOPK */
        } axis;
        struct {
            int64_t n, c, spatial, groups;
            /* > 1: each group's statistics gathered by up to `chunks` blocks, which meet in the
             * step's second output (float, 2 * n * groups * chunks values) */
            int64_t chunks;
            float epsilon;
            bool scale_per_group; /* scale/bias hold one value per group, else per channel */
        } groupnorm;
        struct {
            int64_t n, c, spatial; /* spatial: product of the dims after C */
            int64_t size;
            float alpha, beta, bias;
        } lrn;
        struct {
            int64_t n, c;
            int r;                              /* spatial dims */
            int64_t in[GS_MAX_SPATIAL], out[GS_MAX_SPATIAL];
            gs_mode mode;
            gs_padding padding;
            bool align_corners;
        } grid_sample;
        /* inputs x, cos_cache, sin_cache, position_ids (-1: none), all dense; output y, x's
         * shape: (batch, heads, seq, head_size) when heads_first, else (batch, seq,
         * heads * head_size). The caches are (cache_batch, seq, rotary_dim / 2) without
         * position ids, (positions, rotary_dim / 2) with them; ids (ids_batch, seq). */
        struct {
            int64_t batch, heads, seq, head_size, rotary_dim;
            int64_t cache_batch, positions, ids_batch;
            bool heads_first, interleaved;
        } rotary;
    } u;
} plan_step;

typedef struct plan {
    mem_arena *arena;            /* host_data, names, labels */
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
    int num_views;               /* Split and Slice parts read in place (view_bytes), no step */
} plan;

/* ---- the lowering interface (implemented by src/graph/plan/builder.c) ---- */

/* The state of one plan build: the plan so far, which IR tensor lives in which plan tensor, the
 * precision of the node being lowered, and which nodes were fused into earlier steps. */
typedef struct plan_builder plan_builder;

/* The plan tensor holding IR tensor t in layout `want` (what the node's step reads) and, for
 * float values, in the float precision of the node being lowered; inserts a layout conversion
 * and/or a cast step the first time one is needed and uploads constants. */
tci_status lower_input(plan_builder *b, const ir_node *node, const ir_tensor *t, plan_layout want,
                       int *out_index);
/* Creates the plan tensor of node output t, in the layout the layout pass recorded for it
 * (t->layout). Errors when a dim of t depends on runtime values. */
tci_status lower_output(plan_builder *b, const ir_node *node, const ir_tensor *t, int *out_index);
/* Node output t (laid out dense) shares the memory of plan tensor src with t's dims (dense
 * reshapes). */
tci_status lower_alias(plan_builder *b, const ir_node *node, const ir_tensor *t, int src,
                       int *out_index);
/* Node output t, in the layout recorded for it, shares the memory of plan tensor src, a computed
 * tensor in the other layout holding the same bytes: a channels-last dense (N, H, W, C) tensor
 * and the NHWC8 (N, C, H, W) one where C is a multiple of 8 (no padding), either way round (the
 * Transposes between NCHW and NHWC). An internal error where the bytes differ. */
tci_status lower_alias_across_layouts(plan_builder *b, const ir_node *node, const ir_tensor *t,
                                      int src, int *out_index);
/* Node output t is plan tensor src as it is (same layout, the one recorded for t, and dims):
 * Identity. */
tci_status lower_forward(plan_builder *b, const ir_node *node, const ir_tensor *t, int src);
/* A temporary activation (name interned). */
tci_status lower_temporary(plan_builder *b, const char *name, tci_dtype dtype,
                           plan_layout layout, int rank, const int64_t *dims, int *out_index);
/* A float constant made at build (folded weights, BN scale...): dense fp32 ones are packing
 * sources for the Conv/ConvTranspose/GEMM step that reads them; others are stored in dtype. */
tci_status lower_host_constant(plan_builder *b, const char *name, const float *values, int rank,
                               const int64_t *dims, tci_dtype dtype, plan_layout layout,
                               int *out_index);
/* A float constant made at build that a step reads as it is (never a packing source), stored
 * dense in dtype. */
tci_status lower_host_data(plan_builder *b, const char *name, const float *values, int rank,
                           const int64_t *dims, tci_dtype dtype, int *out_index);
/* A layout conversion step from plan tensor src to plan tensor dst, one dense and the other
 * NHWC8 (4-D), of one dtype and the same N, C and product of the dims after C: a dense
 * N x C x L is in memory the N x C x 1 x L that an NHWC8 tensor of those dims holds (the 1-D
 * convolutions run as 2-D ones so). */
tci_status lower_layout_step(plan_builder *b, const ir_node *node, int src, int dst);
/* Appends a step (zeroed, inputs and outputs -1); label NULL means the node's op type. */
tci_status lower_step(plan_builder *b, plan_step_kind kind, const ir_node *node,
                      const char *label, plan_step **out_step);
/* Sets a step's inputs and outputs (-1 for an absent input). */
void lower_step_io(plan_step *s, int num_inputs, const int *inputs, int num_outputs,
                   const int *outputs);
const plan_tensor *lower_tensor(const plan_builder *b, int index);
const char *lower_intern(plan_builder *b, const char *text);
/* The device float dtype of the node being lowered: FLOAT16 (BFLOAT16 in bf16 plans), or in
 * kept layers FLOAT (BFLOAT16 where an fp16 plan keeps them in bf16). */
tci_dtype lower_float_dtype(const plan_builder *b);
/* "fp32", "tf32" or "bf16": what the plan's kept layers run in, for labels. */
const char *lower_kept_name(const plan_builder *b);
/* The device dtype of a host dtype in the node being lowered, or UNSUPPORTED naming the node. */
tci_status lower_device_dtype(const plan_builder *b, const ir_node *node, tci_dtype dtype,
                              tci_dtype *out);
/* Errors, naming the node, when a dim of t is not known at build. */
tci_status lower_require_known(const ir_node *node, const ir_tensor *t);
/* Whether some node (or the graph's outputs) reads t. */
bool lower_is_read(const plan_builder *b, const ir_tensor *t);

/* ---- fusion (decided by the passes, src/graph/passes/fuse.c) ---- */

/* Whether the options keep node (any node, fused ones too) out of fp16 (--fp32-layers, in the
 * kept precision; every node of an fp32 or tf32 plan). */
bool lower_node_kept(const plan_builder *b, const ir_node *node);
/* Lowers node, one that the passes fused into the node being lowered, on its own after all, in
 * its own precision, as the planner lowers an unfused node (a fused attention whose kernel has no
 * variant lowers its chain so); the precision of the node being lowered is restored after. */
tci_status lower_fused_node(plan_builder *b, const ir_node *node);

/* node->epilogue, or (none filled in) an empty one: label the op type, output outputs[0]. */
const ir_epilogue *lower_epilogue(const ir_node *node, ir_epilogue *none);

/* ---- views of plan tensors, for strided steps ---- */

/* The contiguous output view of y: physical dims (NHWC8: N, H, W, Cp) and its strides; a y of
 * more than PLAN_MAX_PHYS_RANK dims is TCI_ERR_UNSUPPORTED naming node. */
tci_status lower_output_view(const ir_node *node, const plan_tensor *y, plan_strided *view);
/* Strides (elements) of operand `in` read along the physical dims of `out`, 0 where in
 * broadcasts. in has out's layout; a dense operand of lower rank is right-aligned. */
void lower_operand_strides(const plan_tensor *out, const plan_tensor *in, int64_t *strides);
/* A strided copy of plan tensor xi (dense) into the dense plan tensor yt:
 * y[i] = x[in_offset + sum_d i_d * strides[d]] over y's dims (a transpose, a slice...). */
tci_status lower_copy_step(plan_builder *b, const ir_node *node, int xi, int yt,
                           const int64_t *strides, int64_t in_offset);
/* A strided selection of plan tensor xi into yt, both dense or both NHWC8 (4-D): along each
 * logical dim d of x, yt's element i is x's element start[d] + step[d] * i. One copy step; in
 * NHWC8 a zero fill before it where yt's padding channels would stay unwritten. */
tci_status lower_select_step(plan_builder *b, const ir_node *node, int xi, int yt,
                             const int64_t *start, const int64_t *step);
/* A step setting every element of plan tensor yt (padding included) to value. */
tci_status lower_fill_step(plan_builder *b, const ir_node *node, int yt, double value);
/* One element-wise step y = act(op(inputs...)) over IR inputs, in the layout recorded for `out`
 * (the inputs are read in it); out_override >= 0 writes into that plan tensor instead of
 * creating one for `out`. */
tci_status lower_eltwise_step(plan_builder *b, const ir_node *node, binary_op op,
                              const ir_tensor *const *inputs, int num_inputs,
                              const ir_tensor *out, act_params act, const char *label,
                              int out_override);

/* ---- small helpers ---- */

/* round_up(c, 8) */
int64_t plan_pad8(int64_t c);
/* Product of dims[from..to). */
int64_t lower_prod(const int64_t *dims, int from, int to);
/* Element count of an IR tensor with known dims. */
int64_t lower_count(const ir_tensor *t);
/* The fp32 values of a float constant (NULL for other dtypes or non-constants). */
const float *lower_const_floats(const ir_tensor *t);
/* Scalar value of an optional constant float input; def when absent. */
tci_status lower_scalar_input(const ir_node *n, int index, float def, float *out);

#endif
