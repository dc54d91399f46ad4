/* The op descriptor: what every supported ONNX op provides, and helpers its family files share. */
#ifndef TCI_LAYERS_OP_H
#define TCI_LAYERS_OP_H

#include "graph/lower.h"
#include "util/half.h"

/* Flags of a descriptor. */
enum {
    /* Output value follows from the input's shape alone (Shape, Size): constant folding may run
     * cpu_forward with in[0]->data == NULL once the input's dims are known. */
    OP_FOLD_FROM_SHAPE = 1u << 0,
    /* The op never needs evaluation: the executor forwards input 0 as output 0 (Identity,
     * inference-mode Dropout). Passes remove such nodes. */
    OP_PASSTHROUGH = 1u << 1,
    /* The op only moves or selects data (Reshape, Concat, Slice, Gather...): exact in any
     * precision, so on the GPU it keeps the precision of its first input. */
    OP_MOVES_DATA = 1u << 2,
    /* The GPU path reads input 0 in NHWC8 (Conv, pooling, BatchNormalization, Resize): the layout
     * pass lays out a 4-D float engine input that feeds such a node NHWC8, so that it is
     * converted on the way in. */
    OP_NHWC_INPUT = 1u << 3,
    /* What the GPU fusion passes (src/graph/passes/fuse.c) may fold into the op's step: */
    OP_EPILOGUE_ACT = 1u << 4,         /* any following activation (or SiLU pair) */
    /* a division of the sum by a constant before the activation (GEMM: alpha, beta and bias
     * scaled), so the erf-expanded Gelu after it (Div by c, Erf, Add 1, Mul, Mul 0.5) folds */
    OP_EPILOGUE_SCALE = 1u << 5,
    OP_EPILOGUE_RESIDUAL = 1u << 6,    /* Add of a same-shape tensor computed earlier (Conv, GEMM) */
    OP_EPILOGUE_BIAS = 1u << 7,        /* Add of a constant vector over the last dim (MatMul) */
    OP_FOLDS_BATCHNORM = 1u << 8,      /* a following inference BatchNormalization (Conv) */
    /* What the layout pass (src/graph/passes/layout.c) records for the op's outputs; without
     * either (and without keeps_nhwc) they are dense: */
    /* the step writes NHWC8 (Conv, ConvTranspose, pooling, BatchNormalization, Resize) */
    OP_NHWC_OUTPUT = 1u << 9,
    /* an element-wise step in its inputs' layout (activations, binaries, Concat): NHWC8 when a
     * non-constant input is NHWC8 and every non-constant input is float */
    OP_FOLLOWS_LAYOUT = 1u << 10,
    /* The step may add a preceding residual Add's operands itself (LayerNormalization,
     * RMSNormalization): an Add of two computed tensors of input 0's shape that produces input 0
     * folds into it (fuse.c). */
    OP_PROLOGUE_RESIDUAL = 1u << 11,
    /* Control flow (If, Loop, Scan): the node runs subgraphs (GRAPH attributes) as run-time values
     * decide; no GPU path, and the planner says to run it on the CPU reference. */
    OP_CONTROL_FLOW = 1u << 12,
};

/* What a node is to the attention fusion (src/graph/passes/attention.c), from its parsed params:
 * the pass matches the subgraph by these roles (and by `binary`), never by op names. */
typedef enum op_pattern_kind {
    OP_PATTERN_NONE = 0,
    OP_PATTERN_MATMUL,       /* a batched product of inputs 0 and 1, no other input (MatMul) */
    OP_PATTERN_SOFTMAX_LAST, /* softmax of input 0 over its last axis alone (Softmax) */
    OP_PATTERN_TRANSPOSE,    /* output dim d is input dim perm[d] (Transpose) */
    /* output 0 holds input 0's elements in the same row-major order, other dims (Reshape,
     * Flatten, Squeeze, Unsqueeze) */
    OP_PATTERN_RESHAPE,
    /* output 0 is a constant strided selection of input 0: its element i along input dim d is
     * input element start[d] + step[d] * i (step > 0); drop_axis >= 0: that input dim (length 1
     * in the selection) is left out of the output (Gather of one constant index, Slice of
     * constant starts and steps) */
    OP_PATTERN_SELECT,
    /* the outputs are consecutive blocks of input 0 along `axis`, in output order (Split) */
    OP_PATTERN_SPLIT,
    /* output 0 is bool, true exactly where input 0 is NaN (IsNaN) */
    OP_PATTERN_IS_NAN,
    /* output 0 is input 0 broadcast to output 0's dims, nothing else (Expand) */
    OP_PATTERN_BROADCAST,
    /* output 0 is input 0 quantised / dequantised by the scale (input 1) and the zero point
     * (input 2, absent: 0), per tensor (axis -1) or per axis `axis` (QuantizeLinear,
     * DequantizeLinear; blocked ones play no role) */
    OP_PATTERN_QUANTIZE,
    OP_PATTERN_DEQUANTIZE,
    /* row i of output 0 (along its last dim) is a function of row i of input 0 alone, the other
     * inputs the same for every row (Gemm without transA, its C one row or none): a permutation
     * of input 0's rows permutes output 0's the same way (rows.c). A MatMul by a 2-D input 1 is
     * such a product too, from its MATMUL role and shapes. */
    OP_PATTERN_ROWS,
} op_pattern_kind;

typedef struct op_pattern {
    op_pattern_kind kind;
    int rank;                /* TRANSPOSE: the permutation's length; SELECT: input 0's rank */
    int perm[TCI_MAX_RANK];  /* TRANSPOSE */
    int axis;                /* SPLIT, QUANTIZE, DEQUANTIZE: normalised (per tensor: -1) */
    int drop_axis;           /* SELECT: the dim left out, else -1 */
    int64_t start[TCI_MAX_RANK], step[TCI_MAX_RANK]; /* SELECT, per input dim */
} op_pattern;

/* In infer and cpu_forward, in[] has node->num_inputs entries and out[] node->num_outputs; an
 * omitted optional input or output is NULL. */
typedef struct op_desc {
    const char *op_type;
    /* The ONNX since-versions this descriptor implements, ascending, 0-terminated. It must list
     * every version ONNX defined from its first entry up to IR_MAX_KNOWN_OPSET, so that the
     * version a model's opset selects is always the largest entry <= that opset. */
    const int *versions;
    /* Validates input/output counts and attributes (ir_check_attrs first, then values), and
     * stores parsed attributes in node->params (allocated from arena). Runs once at load. */
    tci_status (*parse)(ir_node *node, mem_arena *arena);
    /* Sets dtype, rank and dims of every non-NULL out[] from in[]. in[i]->data is non-NULL when
     * the value is known (always at run time; for constants during the build). rank may be -1
     * and dims -1 while unknown at build: produce what can be known and -1 elsewhere. Every
     * inconsistency that the known values show is an error naming the node. */
    tci_status (*infer)(const ir_node *node, const tci_tensor *const *in, tci_tensor *const *out);
    /* fp32 reference forward. Shapes are fully known and out[]->data is allocated (not zeroed)
     * for the inferred shape. */
    tci_status (*cpu_forward)(const ir_node *node, const tci_tensor *const *in,
                              tci_tensor *const *out);
    unsigned flags;
    /* Emits the node's GPU plan steps through the lowering interface (graph/lower.h) from
     * node->params and the inputs' known shapes; attributes are never parsed a second time.
     * What the fusion passes folded into it is in node->epilogue (lower_epilogue). NULL: the op
     * has no GPU path. */
    tci_status (*gpu_lower)(plan_builder *b, const ir_node *node);
    /* The activation the op computes, when a producer's step may apply it as an epilogue
     * (Relu, Clip, Gelu...); NULL for every other op. */
    tci_status (*epilogue)(const ir_node *node, act_params *out);
    /* The element-wise binary op it computes (Add, Mul, Sum...), BINARY_NONE otherwise: what
     * fusion patterns (residual Add, SiLU's Mul, a Linear layer's bias) look for. */
    binary_op binary;
    /* For an op whose step keeps an NHWC8 input 0 NHWC8 for some parameters only (a ReduceMean
     * over H and W is a global average pool): whether node's does. The layout pass asks it when
     * input 0 is laid out NHWC8 and records the output NHWC8 if so; NULL: never. */
    bool (*keeps_nhwc)(const ir_node *node);
    /* The node's role in the fusion patterns, filled into *out for a node whose input shapes are
     * known (kind OP_PATTERN_NONE when it plays none with these params); NULL: never any. */
    void (*pattern)(const ir_node *node, op_pattern *out);
    /* For an op whose output, for some parameters, is its computed dense input 0's bytes seen as
     * NHWC8 (a Transpose of a channels-last tensor to NCHW, the channels a multiple of 8): whether
     * node's is. The layout pass then records the output NHWC8, and the step is an alias
     * (lower_alias_across_layouts). NULL: never. */
    bool (*views_as_nhwc)(const ir_node *node);
    /* For an op whose output holds the channels of a product with constant weights along one
     * dim (Gemm, MatMul: the last; Conv: 1): points node at new constants (copies added to g,
     * the old ones left as they are) that multiply channel j of its result along output dim
     * axis by scale[j] (count: the channels, or 1 for all), so that a per-channel Mul after it
     * folds away (pass_fold_layer_scale). *done false, and nothing changed, where axis is not
     * that dim or its weights (or its bias) are not constant float. NULL: never. */
    tci_status (*scale_columns)(ir_graph *g, ir_node *node, int axis, const float *scale,
                                int64_t count, bool *done);
    /* For an op whose output's last dim holds the columns of a product of input 0 with constant
     * weights (Gemm, MatMul): points nodes[0] at new constants (copies added to g, the old ones
     * left as they are) whose columns are those of nodes[0], nodes[1], ... nodes[count - 1] in
     * that order, so that it computes every one's result, side by side in its last dim, from its
     * own input 0 (the caller has checked that all read the same values there; the siblings'
     * merge, pass_merge_sibling_gemms). *done false, and nothing changed, where the nodes are
     * not all this op with the same attributes, or their weights (and any bias the op holds)
     * are not constant float of one K. NULL: never. */
    tci_status (*merge_columns)(ir_graph *g, ir_node *const *nodes, int count, bool *done);
    /* Control flow, whose output shapes follow only from running it: replaces infer, the
     * allocation and cpu_forward on the reference (op_run_node), allocating each non-NULL out[]
     * with malloc (the names kept), no output over max_elements elements. NULL: every other op. */
    tci_status (*cpu_run)(const ir_node *node, const tci_tensor *const *in,
                          tci_tensor *const *out, int64_t max_elements);
    /* Control flow: the subgraph the node runs, when its inputs known at build (constants) choose
     * it (an If's condition), so that a pass can put its nodes in the node's place; else NULL. */
    const ir_graph *(*known_branch)(const ir_node *node);
} op_desc;

/* Defines descriptor var: versions is a 0-terminated int array (OP_VERSIONS(...) for a literal);
 * epilogue NULL and binary BINARY_NONE for ops that are neither activations nor binaries. */
#define OP_DESC(var, name, version_list, parse_fn, infer_fn, forward_fn, op_flags, lower,         \
                epilogue_fn, binary_op)                                                           \
    static const op_desc var = {.op_type = name,                                                  \
                                .versions = version_list,                                         \
                                .parse = parse_fn,                                                \
                                .infer = infer_fn,                                                \
                                .cpu_forward = forward_fn,                                        \
                                .flags = op_flags,                                                \
                                .gpu_lower = lower,                                               \
                                .epilogue = epilogue_fn,                                          \
                                .binary = binary_op}
/* OP_DESC (neither activation nor binary) with a keeps_nhwc. */
#define OP_DESC_KEEPS_NHWC(var, name, version_list, parse_fn, infer_fn, forward_fn, op_flags,     \
                           lower, keeps_fn)                                                       \
    static const op_desc var = {.op_type = name,                                                  \
                                .versions = version_list,                                         \
                                .parse = parse_fn,                                                \
                                .infer = infer_fn,                                                \
                                .cpu_forward = forward_fn,                                        \
                                .flags = op_flags,                                                \
                                .gpu_lower = lower,                                               \
                                .binary = BINARY_NONE,                                            \
                                .keeps_nhwc = keeps_fn}
/* OP_DESC (neither activation nor binary) with a pattern role. */
#define OP_DESC_PATTERN(var, name, version_list, parse_fn, infer_fn, forward_fn, op_flags, lower, \
                        pattern_fn)                                                               \
    static const op_desc var = {.op_type = name,                                                  \
                                .versions = version_list,                                         \
                                .parse = parse_fn,                                                \
                                .infer = infer_fn,                                                \
                                .cpu_forward = forward_fn,                                        \
                                .flags = op_flags,                                                \
                                .gpu_lower = lower,                                               \
                                .binary = BINARY_NONE,                                            \
                                .pattern = pattern_fn}
#define OP_VERSIONS(...)                                                                          \
    (const int[]) {                                                                               \
        __VA_ARGS__, 0                                                                            \
    }

/* ---- helpers shared by family files (src/layers/op_util.c) ---- */

/* Declares var, allocates it from the arena as node->params, or returns the error. */
#define OP_ALLOC_PARAMS(node, arena, type, var)                                                   \
    type *var = arena_alloc((arena), sizeof(type));                                           \
    if (!var) return ir_node_error((node), TCI_ERR_OUT_OF_MEMORY, "out of memory for parameters"); \
    (node)->params = var

/* Checks min <= num_inputs <= max and that required inputs (indices < min) are present; same for
 * outputs. Errors name the node. */
tci_status op_check_arity(const ir_node *node, int min_in, int max_in, int min_out, int max_out);

/* t is a constant float tensor of known dims. */
bool op_constant_float(const ir_tensor *t);

/* The role node plays for the graph passes, from its descriptor's pattern, into out (zeroed
 * first; kind OP_PATTERN_NONE for a NULL node or an op without one); returns out->kind. */
op_pattern_kind op_node_pattern(const ir_node *node, op_pattern *out);

/* A copy of the constant float w, each element multiplied by the scale of its index along dim
 * col (scale[0] throughout when count is 1), added to g (the layer-scale folds). */
tci_status op_scaled_copy(ir_graph *g, const ir_tensor *w, int col, const float *scale,
                          int64_t count, ir_tensor **out);

/* Requires in->dtype to be one of the listed types (0-terminated); UNSUPPORTED otherwise, naming
 * node, input index and dtype. An UNDEFINED dtype passes (not yet known). */
tci_status op_check_dtype(const ir_node *node, const tci_tensor *in, int index,
                          const tci_dtype *allowed);

/* Numpy-style multidirectional broadcast of a and b into out's rank/dims. Unknown dims (-1)
 * broadcast to -1 unless the other side fixes them. Incompatible dims are an error. */
tci_status op_broadcast_shape(const ir_node *node, int rank_a, const int64_t *dims_a, int rank_b,
                              const int64_t *dims_b, int *out_rank, int64_t *out_dims);

/* INVALID_MODEL naming the node when a and b (inputs ia and ib) have different known dtypes. */
tci_status op_check_same_dtype(const ir_node *node, const tci_tensor *a, int ia,
                               const tci_tensor *b, int ib);

/* op_check_arity, then refuses every attribute (ops that have none). */
tci_status op_parse_no_attrs(const ir_node *node, int min_in, int max_in, int min_out,
                             int max_out);

/* cblas takes int sizes (OpenBLAS without INTERFACE64): UNSUPPORTED naming the node when an
 * M x N x K product exceeds them. */
tci_status op_check_blas_dims(const ir_node *node, int64_t m, int64_t n, int64_t k);

/* Element count of a fully known tensor (0 if any dim is 0). */
int64_t op_count(const tci_tensor *t);

/* Normalises an axis in [-rank, rank) to [0, rank); error naming the node otherwise. */
tci_status op_normalize_axis(const ir_node *node, int64_t axis, int rank, int *out_axis);

/* Reads element i of an integer tensor (int32 or int64) as int64. */
int64_t op_read_int(const tci_tensor *t, int64_t i);
/* Reads element i of any numeric tensor as double / writes value to element i. */
double op_read_number(const tci_tensor *t, int64_t i);
void op_write_number(tci_tensor *t, int64_t i, double value);


/* Element i of raw data of dtype as double / value v stored there, converting to integers as
 * x86 onnxruntime does (truncation; NaN and out-of-range values give the integer minimum). */
double op_load_number(tci_dtype dtype, const void *p, int64_t i);
void op_store_number(tci_dtype dtype, void *p, int64_t i, double v);

/* Row-major strides of dims. */
void op_strides(int rank, const int64_t *dims, int64_t *strides);

/* Sets out to the same dtype/rank/dims as in (data untouched). */
void op_same_shape(tci_tensor *out, const tci_tensor *in);
/* Sets t to dtype with unknown rank and dims. */
void op_set_unknown(tci_tensor *t, tci_dtype dtype);

/* Reads a 0/1 attribute (def when absent), refusing other values so that a typo is not silently
 * taken as true. */
tci_status op_read_flag(const ir_node *node, const char *name, int64_t def, int *out);

/* numpy.matmul's view of one operand: batch dims, rows and cols, a 1-D A being (1, K) and a 1-D
 * B (K, 1) (MatMul and the integer products). */
typedef struct op_matmul_side {
    int batch_rank;
    const int64_t *batch;
    int64_t rows, cols;
} op_matmul_side;
void op_matmul_side_of(const tci_tensor *t, bool is_b, op_matmul_side *s);
/* y's rank and dims from A and B by numpy.matmul's rules (y untouched while a rank is unknown);
 * errors name the node: a rank-0 operand, inner dims that differ. */
tci_status op_matmul_shape(const ir_node *node, const tci_tensor *a, const tci_tensor *b,
                           tci_tensor *y);
/* Matrix offsets of operand s's batch index along the output's out_batch_rank batch dims (0
 * where it broadcasts). */
void op_matmul_batch_strides(const op_matmul_side *s, int out_batch_rank, int64_t *strides);

/* node = x * c, c * x (Mul) or x / c (Div) with c a finite, nonzero constant float scalar
 * (ir_float_scalar) and the output of x's dims: x's input index and *factor (c, or 1 / c where
 * that is finite); else -1. */
int op_scaling_input(const ir_node *node, float *factor);

/* The TensorProto.DataType name of an attribute's type value ("INT16", "FLOAT8E4M3FN"), for
 * messages about types tcinfer does not hold; NULL when type is no ONNX data type. */
const char *op_onnx_type_name(int64_t type);

/* Lists of dtypes for op_check_dtype. */
extern const tci_dtype op_float_types[];   /* float */
extern const tci_dtype op_numeric_types[]; /* float, double, float16, int8/32/64, uint8 */
extern const tci_dtype op_index_types[];   /* int32, int64 */

/* ---- the numpy broadcast walk of the element-wise families (op_util.c) ---- */

#define OP_BCAST_MAX_OPS 3

/* Hands out the output in rows. Size-1 dims are dropped and neighbouring dims that every operand
 * walks as one are merged, so a row is as long as possible and each operand moves through it
 * with stride 0 (broadcast) or 1; the same-shape case becomes a single row. */
typedef struct op_bcast {
    int num_ops;
    int outer_rank;
    int64_t outer_dims[TCI_MAX_RANK];
    int64_t outer_strides[OP_BCAST_MAX_OPS][TCI_MAX_RANK];
    int64_t row;                        /* elements per row */
    int64_t row_stride[OP_BCAST_MAX_OPS];  /* 0 or 1 */
    int64_t rows, next;
    int64_t index[TCI_MAX_RANK];
    int64_t offset[OP_BCAST_MAX_OPS];
} op_bcast;

/* Starts a walk: out's dims must be the broadcast of the num_ops operands' dims. */
void op_bcast_init(op_bcast *it, const tci_tensor *out, const tci_tensor *const *ops,
                   int num_ops);
/* Next row: its output element offset and each operand's element offset; false when done. */
bool op_bcast_next(op_bcast *it, int64_t *out_offset, int64_t *op_offsets);
/* The address of element `offset` of t's data. */
const void *op_element(const tci_tensor *t, int64_t offset);

/* ---- registry (src/layers/registry.c) ---- */

/* Finds the descriptor for op_type in domain at the model's opset; sets *out_since to the
 * version selected. Errors name the node: unknown op, unknown domain, opset out of range. */
tci_status op_registry_resolve(const ir_node *node, const op_desc **out_desc, int *out_since);

/* Resolves node->desc and node->since_version, then runs the descriptor's parse. */
tci_status op_prepare_node(ir_node *node, mem_arena *arena);

/* ---- shared between families ---- */

/* Global average/max pooling of a 4-D input to (N, C, 1, 1) in NHWC8 (pool.c): GlobalAveragePool,
 * GlobalMaxPool, and a ReduceMean or ReduceMax over the spatial dims of an NHWC8 activation
 * (reduce.c). */
tci_status layer_lower_global_pool(plan_builder *b, const ir_node *node, const ir_tensor *x,
                                   const ir_tensor *out, pool_kind kind);
/* Whether node is an inference BatchNormalization whose statistics are constants of k channels
 * (norm.c); if so, folds it into the per-channel scale and shift of the values that feed it
 * (shift holds their bias on entry): x*scale + shift. */
tci_status layer_batchnorm_fold(const ir_node *node, int64_t k, float *scale, float *shift,
                                bool *folded);

/* y = act(x * scale + shift) per channel of a 4-D x (NHWC8) as one depthwise 1x1 convolution
 * step (conv.c): fp32 arithmetic, the shift in fp32 and one rounding, any activation fused.
 * scale and shift hold x's C values. Standalone BatchNormalization's step. */
tci_status layer_lower_channel_affine(plan_builder *b, const ir_node *node, const ir_tensor *x,
                                      const float *scale, const float *shift, act_params act,
                                      const ir_tensor *out, const char *label);

/* One PLAN_STEP_LAYERNORM for node (norm.c): LayerNormalization (bias may be NULL) or, rms,
 * RMSNormalization (inputs X and scale) over X's dims from axis_attr on, with the residual Add
 * the fusion folded in (OP_PROLOGUE_RESIDUAL). Refused naming the node where scale or bias is
 * not one full row of those dims for every row of X (it varies before the axis or broadcasts
 * after it), or where epsilon is negative. */
tci_status layer_lower_norm_rows(plan_builder *b, const ir_node *node, int64_t axis_attr,
                                 float epsilon, const ir_tensor *bias, bool rms);

/* The GPU lowering of a MatMul that the attention fusion made the owner of a whole attention
 * (e->attention; attention.c): one fused attention step (*out_fused), or, where the kernel has no
 * variant for it, the steps of every other node of the chain, leaving the MatMul's own GEMM to
 * the caller, labelled with *out_reason (why it is unfused, for --info). */
tci_status layer_lower_attention(plan_builder *b, const ir_node *node, const ir_epilogue *e,
                                 bool *out_fused, const char **out_reason);
/* After the owner's plain lowering of an unfused attention: the nodes after it (Transposes and
 * Reshapes of Y the fusion had folded), each lowered on its own. */
tci_status layer_lower_attention_after(plan_builder *b, const ir_epilogue *e);

/* Runs one prepared node on the fp32 reference: infers output shapes from the input values,
 * allocates each non-NULL out[] data with malloc (the caller frees it; on failure it is freed and
 * set NULL) and runs the op's cpu_forward. in[] has node->num_inputs entries (NULL where
 * omitted), all with data. */
tci_status op_run_node(const ir_node *node, const tci_tensor *const *in, tci_tensor *const *out);
/* Same, refusing (TCI_ERR_UNSUPPORTED) to allocate an output of more than max_elements elements
 * (op_run_node: the default limit). */
tci_status op_run_node_limited(const ir_node *node, const tci_tensor *const *in,
                               tci_tensor *const *out, int64_t max_elements);

/* ---- subgraphs of control-flow ops (subgraph.c) ---- */

/* Sorts a subgraph and prepares its nodes (op_prepare_node, at any depth), once; errors name
 * the subgraph and its node. */
tci_status op_prepare_subgraph(ir_graph *sub, const ir_node *owner, const char *attr);
/* Infers sub's outputs (dtype, rank, dims; data NULL) into outs[sub->num_outputs] without
 * changing the IR: inputs[i] (NULL: as declared) feeds sub->inputs[i], node_in[] are the owning
 * node's inputs, of which sub reads node_in[sub->outer_slot[i]]. Nodes whose inputs are all
 * known and small are evaluated, so that values computed inside (shapes) carry on. */
tci_status op_infer_subgraph(const ir_graph *sub, const tci_tensor *const *inputs,
                             const tci_tensor *const *node_in, tci_tensor *outs);
/* Runs sub on the fp32 reference, bound as op_infer_subgraph; outs[i] receives sub->outputs[i]
 * with malloc'd data the caller frees (on failure none). */
tci_status op_run_subgraph(const ir_graph *sub, const tci_tensor *const *inputs,
                           const tci_tensor *const *node_in, tci_tensor *outs,
                           int64_t max_elements);

/* The values Loop (loop-carried values) and Scan (state values) carry from one iteration's body
 * outputs to the next iteration's inputs; `what` names them in errors. */
typedef struct op_carried {
    const char *what;
    int count;
    tci_tensor *v; /* the values the next iteration reads: the node's inputs at first */
    bool *owned;   /* v[k].data is a body output's, freed when replaced */
} op_carried;
/* Carried value k's inferred output: init's dtype (the body's must be the same: INVALID_MODEL
 * naming the node, `what` and k), the dims body leaves as in init, -1 where it changes them. */
tci_status op_carried_infer(const ir_node *node, const char *what, int k, const tci_tensor *init,
                            const tci_tensor *body, tci_tensor *out);
/* c (zeroed by the caller, freed by op_carried_free even on failure) holds n values, *init[k]. */
tci_status op_carried_init(const ir_node *node, op_carried *c, const char *what, int n,
                           const tci_tensor *const *init);
/* body[0..count) become the values (owned ones replaced are freed; each taken body[k].data set
 * NULL), each keeping its value's dtype: otherwise INVALID_MODEL naming `what` and k, none taken. */
tci_status op_carried_take(const ir_node *node, op_carried *c, tci_tensor *body);
/* Each non-NULL out[k] (its name kept) receives value k: moved when owned, else a copy. */
tci_status op_carried_out(const ir_node *node, op_carried *c, tci_tensor *const *out);
void op_carried_free(op_carried *c);

/* The iterations' values of one scan output, stacked as they come. */
typedef struct op_value_stack {
    tci_tensor first;   /* shape and dtype of every iteration's value */
    unsigned char *data;
    size_t bytes, cap;  /* bytes used and allocated */
    int64_t count;      /* iterations stacked */
} op_value_stack;
/* Appends v (a copy of its data) to s; scan output k's iterations must agree in dtype and shape
 * (INVALID_ARGUMENT naming the node otherwise). The caller frees s->data. */
tci_status op_stack_push(const ir_node *node, int k, op_value_stack *s, const tci_tensor *v);
/* When no iteration ran: stacks[0..n) (scan outputs first_out..) take their per-iteration dtype
 * and dims from infer(node, in) (the node's outputs, stacked along axes[k]; NULL: 0), which must
 * know them (UNSUPPORTED naming the node otherwise). Nothing when every stack has a value. */
tci_status op_stack_infer_empty(const ir_node *node,
                                tci_status (*infer)(const ir_node *, const tci_tensor *const *,
                                                    tci_tensor *const *),
                                const tci_tensor *const *in, int first_out, int n,
                                op_value_stack *stacks, const int64_t *axes);
/* out (its name kept) becomes scan output k: s's iterations along axis (reverse: the last
 * first), s->count of them (0: an empty output of s->first's other dims), in data it takes from
 * s or allocates; UNSUPPORTED naming the node past TCI_MAX_RANK or max_elements. */
tci_status op_stack_output(const ir_node *node, int k, op_value_stack *s, int64_t axis,
                           bool reverse, int64_t max_elements, tci_tensor *out);

/* Calls fn for every registered descriptor. */
void op_registry_each(void (*fn)(const op_desc *desc, void *user), void *user);

/* Each family file exports a NULL-terminated table of its descriptors. */
extern const op_desc *const layer_deform_conv_ops[]; /* deform_conv.c: DeformConv */
extern const op_desc *const layer_linear_attention_ops[]; /* linear_attention.c:
                                                   CausalConvWithState, LinearAttention */
extern const op_desc *const layer_conv_ops[];      /* conv.c: Conv, ConvTranspose */
extern const op_desc *const layer_pool_ops[];      /* pool.c: MaxPool, AveragePool, Global*, LRN,
                                                      LpPool */
extern const op_desc *const layer_eltwise_ops[];   /* eltwise.c: binary, variadic, Where, Equal,
                                                      Mod, PRelu */
extern const op_desc *const layer_einsum_ops[];    /* einsum.c: Einsum */
extern const op_desc *const layer_grid_sample_ops[]; /* grid_sample.c: GridSample, AffineGrid */
extern const op_desc *const layer_select_ops[];    /* select.c: NonZero, NonMaxSuppression */
extern const op_desc *const layer_unary_ops[];     /* unary.c: activations, math functions, Clip */
extern const op_desc *const layer_logic_ops[];     /* logic.c: Less, Greater, And, Or, Xor, Not,
                                                      IsNaN, IsInf... (bool results) */
extern const op_desc *const layer_cast_ops[];      /* cast.c: Cast */
extern const op_desc *const layer_range_ops[];     /* range.c: Range */
extern const op_desc *const layer_rnn_ops[];       /* rnn.c: LSTM, GRU, RNN */
extern const op_desc *const layer_shape_ops[];     /* shape_ops.c: Reshape, Gather, Shape ... */
extern const op_desc *const layer_movement_ops[];  /* movement.c: Concat, Split, Transpose, Slice,
                                                      Pad, Expand */
extern const op_desc *const layer_index_ops[];     /* index.c: GatherElements, ScatterElements,
                                                      Scatter, ScatterND, OneHot */
extern const op_desc *const layer_rearrange_ops[]; /* rearrange.c: Tile, DepthToSpace,
                                                      SpaceToDepth, Trilu */
extern const op_desc *const layer_linear_ops[];    /* gemm.c: Gemm, MatMul */
extern const op_desc *const layer_norm_ops[];      /* norm.c: BatchNormalization, LayerNorm,
                                                      Softmax, LogSoftmax */
extern const op_desc *const layer_groupnorm_ops[]; /* groupnorm.c: InstanceNormalization,
                                                      GroupNormalization */
extern const op_desc *const layer_reduce_ops[];    /* reduce.c: ReduceSum, ReduceMean, ReduceMax,
                                                      ReduceMin, ReduceProd, ReduceL1, ReduceL2,
                                                      ReduceLogSumExp, ReduceSumSquare,
                                                      ReduceLogSum */
extern const op_desc *const layer_argreduce_ops[]; /* argreduce.c: ArgMax, ArgMin, CumSum, CumProd,
                                                      TopK */
extern const op_desc *const layer_resize_ops[];    /* resize.c: Resize, Upsample */
extern const op_desc *const layer_quant_ops[];     /* quant.c: QuantizeLinear, DequantizeLinear,
                                                      DynamicQuantizeLinear */
extern const op_desc *const layer_quant_linear_ops[]; /* quant_linear.c: MatMulInteger,
                                                         QLinearMatMul, ConvInteger, QLinearConv */
extern const op_desc *const layer_rmsnorm_ops[];   /* rmsnorm.c: RMSNormalization */
extern const op_desc *const layer_rotary_ops[];    /* rotary.c: RotaryEmbedding */
extern const op_desc *const layer_sdpa_ops[];      /* sdpa.c: Attention (ONNX's own op) */
extern const op_desc *const layer_control_ops[];   /* control.c: If, Loop */
extern const op_desc *const layer_scan_ops[];      /* scan.c: Scan */
extern const op_desc *const layer_axisnorm_ops[];  /* axisnorm.c: Hardmax, LpNormalization,
                                                      MeanVarianceNormalization */
extern const op_desc *const layer_generate_ops[];  /* generate.c: EyeLike, HannWindow,
                                                      HammingWindow, BlackmanWindow */
extern const op_desc *const layer_pick_ops[];      /* pick.c: GatherND, Compress,
                                                      ReverseSequence */
extern const op_desc *const layer_linalg_ops[];    /* linalg.c: Det */
extern const op_desc *const layer_image_ops[];     /* image.c: CenterCropPad, Col2Im */
extern const op_desc *const layer_loss_ops[];      /* loss.c: NegativeLogLikelihoodLoss,
                                                      SoftmaxCrossEntropyLoss */
extern const op_desc *const layer_roi_ops[];       /* roi.c: RoiAlign */
extern const op_desc *const layer_spectral_ops[];  /* spectral.c: DFT, STFT, MelWeightMatrix */
extern const op_desc *const layer_unique_ops[];    /* unique.c: Unique */
extern const op_desc *const layer_unpool_ops[];    /* unpool.c: MaxUnpool */
extern const op_desc *const layer_tfidf_ops[];     /* tfidf.c: TfIdfVectorizer */
extern const op_desc *const layer_bitwise_ops[];   /* bitwise.c: BitwiseAnd, BitwiseOr, BitwiseXor,
                                                      BitwiseNot, BitShift */

#endif
