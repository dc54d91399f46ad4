/* The graph IR: tensors, nodes and attributes of one model, all in one arena. */
#ifndef TCI_GRAPH_IR_H
#define TCI_GRAPH_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tcinfer.h"
#include "util/arena.h"
#include "util/elementwise.h"
#include "util/status.h"

/* Newest ONNX opset whose operator history the registry knows (onnx 1.23). */
#define IR_MAX_KNOWN_OPSET 28

struct op_desc;
struct ir_node;

/* How a tensor is stored on the GPU. The layout pass (src/graph/passes/layout.c) chooses it for
 * every IR tensor a step computes (ir_tensor.layout); the plan's tensors carry it. */
typedef enum plan_layout {
    PLAN_LAYOUT_DENSE = 0, /* row-major in logical order */
    PLAN_LAYOUT_NHWC8,     /* 4-D (N,C,H,W) stored NHWC, C padded with zeros to a multiple of 8 */
} plan_layout;

typedef struct ir_tensor {
    const char *name;
    tci_dtype dtype;                         /* TCI_DTYPE_UNDEFINED until inferred */
    int rank;                                /* -1 while unknown */
    int64_t dims[TCI_MAX_RANK];              /* -1 where unknown or symbolic */
    const char *dim_names[TCI_MAX_RANK];     /* symbolic dim names, NULL otherwise */
    void *data;                              /* known value (initializer or folded), else NULL */
    struct ir_node *producer;                /* NULL for graph inputs and constants */
    bool is_graph_input;
    bool is_graph_output;
    /* In a subgraph: a value of an enclosing graph the subgraph reads by name (ir_graph.outer) */
    bool is_outer;
    size_t index;                            /* position in graph->tensors */
    plan_layout layout;                      /* on the GPU (pass_assign_layouts); constants are
                                                uploaded in whatever layout a reader wants */
    /* Bit d: dim d has length 1 here but not in the graph of the shape this one is a smaller
     * variant of (a batch or sequence of 1 re-planned from an engine built for more): a
     * Transpose that moves it is a copy there, and stays one here (pass_mark_variant_dims). */
    unsigned variant_dims;
    /* Holds other values than the model's tensor of this name: a layer scale was folded into
     * the GEMM computing it (pass_fold_layer_scale), so per-layer comparisons with the CPU
     * reference, which runs the model's graph, leave it out. */
    bool rescaled;
} ir_tensor;

/* Values follow ONNX's AttributeProto.AttributeType. */
typedef enum ir_attr_type {
    IR_ATTR_UNDEFINED = 0,
    IR_ATTR_FLOAT = 1,
    IR_ATTR_INT = 2,
    IR_ATTR_STRING = 3,
    IR_ATTR_TENSOR = 4,
    IR_ATTR_GRAPH = 5,
    IR_ATTR_FLOATS = 6,
    IR_ATTR_INTS = 7,
    IR_ATTR_STRINGS = 8,
    IR_ATTR_TENSORS = 9,
    IR_ATTR_GRAPHS = 10,
} ir_attr_type;

typedef struct ir_attr {
    const char *name;
    ir_attr_type type;
    int64_t i;
    float f;
    const char *s;           /* NUL-terminated copy of the string */
    const int64_t *ints;     /* IR_ATTR_INTS */
    const float *floats;     /* IR_ATTR_FLOATS */
    const char **strings;    /* IR_ATTR_STRINGS */
    size_t count;            /* element count of ints/floats/strings */
    ir_tensor *tensor;       /* IR_ATTR_TENSOR: a constant tensor (data set) */
    struct ir_graph *graph;  /* IR_ATTR_GRAPH: the subgraph (ir_graph.parent is the node's) */
} ir_attr;

/* A scaled-dot-product attention, softmax(scale * Q K^T + mask) V, that one GPU step computes:
 * what the attention fusion (src/graph/passes/attention.c) found. Q, K and V are logical
 * (batch..., position, head_dim) operands of rank 3 or 4 with equal batch dims; each is read
 * from the dense tensor q, k or v at an element offset through element strides along (batch,
 * head, position, head_dim) (rank 3: batch stride 0), which fold the Transposes, Reshapes and
 * constant selections (Gather, Slice, Split) of a packed projection before them. The result
 * (batch, head, query, head_dim) is written into the dense tensor y (ir_epilogue.output: the P V
 * MatMul's output, or what Transposes and Reshapes after it make of it) through y_strides. */
typedef struct ir_attention {
    ir_tensor *q, *k, *v;
    int64_t q_strides[4], k_strides[4], v_strides[4], y_strides[4];
    int64_t q_offset, k_offset, v_offset;
    int64_t batch, heads, q_len, kv_len, head_dim;
    int rank;                /* of the logical operands: 3 or 4 */
    ir_tensor *mask;         /* additive, broadcastable to the scores; NULL: none */
    /* > 0: the mask holds this many batch entries and batch b adds entry b % mask_batch_mod (a
     * mask repeating along the batch: Swin's shifted windows, the masks of the nW windows of
     * every image, the windows of all images making the batch); 0: it broadcasts as usual */
    int64_t mask_batch_mod;
    float scale;             /* the product of the constant scalings folded (Div: 1/c) */
    bool causal;             /* mask is a constant that keeps exactly the keys j <= i */
    /* A bool mask broadcastable to the scores, the condition of the Where(keep, 0, fill) whose
     * result the scores are added to: key j is seen by query i where it is true; NULL: none
     * (mask holds any additive mask). A row it drops every key of gets zeros (fill -inf, with
     * the softmax's NaN guard Where(IsNaN(p), 0, p) folded) or, with keep_row_mean (fill
     * finite, at most -1e30: every score of the row rounds to fill), the mean of V over every
     * key, as the softmax of equal scores gives. */
    ir_tensor *keep;
    bool keep_row_mean;
    struct ir_node **nodes;  /* every node the step computes, in graph order */
    int num_nodes;
    int owner;               /* nodes[owner] is the P V MatMul; the nodes after it reshape Y */
} ir_attention;

/* What a GPU step computes beyond its node's op: the nodes after it that the fusion passes
 * (src/graph/passes/fuse.c) folded into it. The IR stays a valid ONNX graph: the fused nodes stay
 * in it, marked (ir_node.fused_into), and the CPU executor ignores both. */
typedef struct ir_epilogue {
    const char *label;       /* the op types the step computes, "Conv+BatchNormalization+Relu" */
    ir_tensor *output;       /* what the step writes: the last fused node's output */
    ir_tensor *weights;      /* Conv: weights with a BatchNormalization folded in, else NULL */
    ir_tensor *bias;         /* Conv: the folded bias (K values); MatMul: a fused Add's constant
                                vector of N values; else NULL */
    ir_tensor *residual;     /* Conv: the other operand of a fused Add; OP_PROLOGUE_RESIDUAL:
                                the Add's second operand; else NULL */
    const struct ir_node *residual_add; /* that Add (conversions of residual are its steps) */
    act_params act;          /* the fused activation (ACT_NONE: none) */
    /* OP_EPILOGUE_SCALE ops: the step divides its sum (bias and residual included) by this
     * before the activation (the Div of an erf-expanded Gelu, act GeluOfDiv); 0: no division */
    float divisor;
    ir_attention *attention; /* MatMul of P and V: the whole attention it computes, else NULL */
    /* OP_PROLOGUE_RESIDUAL ops: residual_add is the Add before the node folded into its step
     * (residual its second operand); sum_output that Add's result when something else reads it
     * (the step writes it too), else NULL */
    ir_tensor *sum_output;
    /* A GEMM whose channels-last result [N, H, W, C] went on through a Transpose to NCHW that
     * views it as NHWC8 (C a multiple of 8: the same bytes): output is laid out NHWC8, the
     * step's rows, and its residual is read NHWC8, the same rows */
    bool nhwc_output;
} ir_epilogue;

typedef struct ir_node {
    const char *name;        /* never NULL: the loader names unnamed nodes "<op>_<index>" */
    const char *op_type;
    const char *domain;      /* "" for the default ONNX domain */
    int opset;               /* opset the model imports for the node's domain */
    int since_version;       /* the version of the op's definition that opset selects */
    const struct op_desc *desc;
    /* NULL entries for omitted optional inputs. The last num_implicit_inputs of them are the
     * enclosing graph's tensors that the node's subgraphs read (ir_graph.outer_slot), so that
     * sorting, dead-node removal and the executors see those reads as uses. */
    ir_tensor **inputs;
    int num_inputs;
    int num_implicit_inputs;
    ir_tensor **outputs;     /* NULL entries for omitted optional outputs */
    int num_outputs;
    ir_attr *attrs;
    int num_attrs;
    void *params;            /* op-specific parsed attributes, in the graph arena */
    size_t index;            /* position in graph->nodes, kept by ir_graph_sort */
    ir_epilogue *epilogue;   /* set by the GPU fusion passes, else NULL */
    struct ir_node *fused_into; /* computed by that node's GPU step (fusion passes), else NULL */
    /* The GPU plan keeps it out of 16-bit storage (plan_options.fp32_layers; every node of an
     * FP32 or TF32 plan): set by the api before pass_prepare_for_gpu (api_mark_kept_nodes), so
     * that a pass leaves out what pays only in 16-bit steps (an attention with a kept node
     * lowers as its unfused steps: the siblings' merge). */
    bool kept;
} ir_node;

typedef struct ir_opset {
    const char *domain;
    int64_t version;
} ir_opset;

/* Limits against hostile models (docs/robustness.md); ir_limits_default gives the defaults,
 * which tci_engine_options' zero fields select. */
typedef struct ir_limits {
    uint64_t max_model_bytes;     /* serialized ModelProto */
    int64_t max_tensor_elements;  /* any one tensor, constant or inferred */
    uint64_t max_constant_bytes;  /* all initializers, attribute tensors and folded constants */
    uint64_t max_nodes;           /* NodeProtos in the file (subgraphs included) */
    int max_nesting;              /* protobuf message nesting (ModelProto = 1) */
    uint64_t max_parse_bytes;     /* memory protobuf-c may take to unpack the file */
    uint64_t max_loop_iterations; /* of one run of a Loop node */
} ir_limits;

#define IR_DEFAULT_MAX_MODEL_BYTES ((uint64_t)2 << 30)
#define IR_DEFAULT_MAX_TENSOR_ELEMENTS (((int64_t)1 << 31) - 1)
#define IR_DEFAULT_MAX_CONSTANT_BYTES ((uint64_t)4 << 30)
#define IR_DEFAULT_MAX_NODES ((uint64_t)1 << 20)
#define IR_DEFAULT_MAX_NESTING 64
#define IR_DEFAULT_MAX_PARSE_BYTES ((uint64_t)4 << 30)
#define IR_DEFAULT_MAX_LOOP_ITERATIONS ((uint64_t)1 << 20)

void ir_limits_default(ir_limits *limits);

typedef struct ir_graph {
    mem_arena *arena;
    const char *name;
    ir_node **nodes;         /* topological order once ir_graph_sort succeeded */
    size_t num_nodes, cap_nodes;
    ir_tensor **tensors;     /* every tensor, named ones unique */
    size_t num_tensors, cap_tensors;
    ir_tensor **inputs;      /* graph inputs that are not initializers */
    size_t num_inputs;
    ir_tensor **outputs;
    size_t num_outputs;
    ir_opset *opsets;
    size_t num_opsets;
    int64_t ir_version;
    bool layouts_assigned;   /* pass_assign_layouts ran: what the planner needs */
    /* A shape variant's: the same model optimised and fused for the GPU at the shapes the
     * engine was built for (src/api/shapes.c); pass_fuse_attention folds here only the movement
     * nodes it folded there, so that the two plans have the same steps. NULL: none. */
    const struct ir_graph *like;
    ir_limits limits;        /* the defaults unless the loader was given others */
    uint64_t constant_bytes; /* data of constants so far, against limits.max_constant_bytes */
    ir_tensor **by_name;     /* open-addressing hash index of the named tensors (malloc'd) */
    size_t by_name_cap;      /* a power of two, 0 while empty */
    /* A subgraph (a GRAPH attribute of a node of parent; ir_graph_add_subgraph) shares its root's
     * arena, limits and opsets. outer[i] (is_outer) stands for the value of the owning node's
     * input outer_slot[i]: a tensor of parent the subgraph reads by name. */
    const struct ir_graph *parent;
    ir_tensor **outer;
    int *outer_slot;
    size_t num_outer;
    bool prepared;           /* sorted and its nodes prepared (op_prepare_subgraph) */
    /* The root's: every subgraph of the model, at any depth (malloc'd; destroyed with it) */
    struct ir_graph **subgraphs;
    size_t num_subgraphs;
} ir_graph;

tci_status ir_graph_create(ir_graph **out_graph);
void ir_graph_destroy(ir_graph *graph);
/* A new empty subgraph of parent, in the root's arena and with its limits and opsets, owned by
 * the root (destroyed with it). */
tci_status ir_graph_add_subgraph(ir_graph *parent, ir_graph **out_graph);
/* The outermost graph parent links lead to. */
const ir_graph *ir_graph_root(const ir_graph *graph);

/* A structural copy: its own tensors, nodes and arrays, so that passes may run on it
 * independently (the GPU engine re-plans a pristine copy for another batch size). Names,
 * attributes and constant data are shared with src, read-only: src must outlive the copy, and
 * passes must not write into existing constant data (they allocate folded values anew). Node
 * params (made by op_prepare_node) are not copied. */
tci_status ir_graph_clone(const ir_graph *src, ir_graph **out_graph);

/* Finds a tensor by name; NULL if none. */
ir_tensor *ir_graph_find_tensor(const ir_graph *graph, const char *name);
/* Adds a tensor with that name (copied); error if one exists. name may be NULL for an anonymous
 * temporary. */
tci_status ir_graph_add_tensor(ir_graph *graph, const char *name, ir_tensor **out_tensor);
/* Adds an anonymous float constant of the given shape holding a copy of values (in the graph's
 * arena): what passes that fold weights make, never writing into existing constant data. */
tci_status ir_graph_add_float_constant(ir_graph *graph, const float *values, int rank,
                                       const int64_t *dims, ir_tensor **out_tensor);
/* The same for int64 values (a Reshape's shape, a Slice's starts). */
tci_status ir_graph_add_int64_constant(ir_graph *graph, const int64_t *values, int rank,
                                       const int64_t *dims, ir_tensor **out_tensor);
/* Adds a node; inputs/outputs arrays are allocated (NULL-filled) with the given counts. */
tci_status ir_graph_add_node(ir_graph *graph, const char *name, const char *op_type,
                             const char *domain, int num_inputs, int num_outputs,
                             ir_node **out_node);

/* Orders nodes topologically; a cycle, or an input produced by no node, no initializer, no
 * graph input and no outer value, is an error naming the node. Also sets each tensor's producer. */
tci_status ir_graph_sort(ir_graph *graph);

/* Counts bytes of new constant data against limits.max_constant_bytes and refuses a tensor of
 * more than limits.max_tensor_elements; what names the tensor in the message. */
tci_status ir_graph_charge_constant(ir_graph *graph, const char *what, int64_t elements,
                                    size_t elem_size);

/* Element count of a tensor with known dims: -1 if the rank or any dim is unknown; an error if
 * the product overflows int64. */
tci_status ir_count_elements(int rank, const int64_t *dims, int64_t *out_count);

/* Attribute access. Absent attributes give the default; a present attribute of another type is
 * an error naming the node. */
const ir_attr *ir_node_attr(const ir_node *node, const char *name);
tci_status ir_attr_int(const ir_node *node, const char *name, int64_t def, int64_t *out);
tci_status ir_attr_float(const ir_node *node, const char *name, float def, float *out);
tci_status ir_attr_string(const ir_node *node, const char *name, const char *def,
                          const char **out);
/* Absent: *out = NULL, *count = 0. */
tci_status ir_attr_ints(const ir_node *node, const char *name, const int64_t **out,
                        size_t *count);
tci_status ir_attr_floats(const ir_node *node, const char *name, const float **out,
                          size_t *count);
/* Refuses any attribute not in the NULL-terminated list `known` (TCI_ERR_UNSUPPORTED, naming
 * node and attribute). */
tci_status ir_check_attrs(const ir_node *node, const char *const *known);

/* Records an error prefixed with "node 'NAME' (OP): ". */
tci_status ir_node_error(const ir_node *node, tci_status status, const char *fmt, ...)
    UTIL_PRINTF(3, 4);

/* Sets a tensor's dtype/rank/dims from another (not data). */
void ir_tensor_copy_shape(ir_tensor *dst, const tci_tensor *src);
/* Fills a tci_tensor view of an IR tensor (data included). */
void ir_tensor_view(const ir_tensor *t, tci_tensor *out);

/* How many times each tensor (by index) is read: once per node input naming it and once per
 * graph output it is. calloc'd, num_tensors + 1 entries; NULL when out of memory. */
int *ir_graph_count_readers(const ir_graph *graph);

/* *readers (ir_graph_count_readers' counts, or NULL) freed and counted again for the graph as it
 * is now: a pass that rewrites while it walks calls it after each rewrite, which adds tensors
 * (indices the old counts do not reach) and readers. On out of memory *readers is NULL and the
 * status names what (the pass's words). */
tci_status ir_graph_recount_readers(const ir_graph *graph, int **readers, const char *what);

/* The first node at graph position `from` or later reading t, and (slot not NULL) the input
 * slot it reads t at; NULL where none does. */
ir_node *ir_graph_reader(const ir_graph *graph, const ir_tensor *t, size_t from, int *slot);

/* t's only reader where readers (counts as ir_graph_count_readers gives, or the caller's own)
 * holds 1 for t and t is no graph output; else NULL. */
ir_node *ir_graph_sole_reader(const ir_graph *graph, const int *readers, const ir_tensor *t);

/* The value of a constant float tensor of one element (rank 0, or dims of 1), else false. */
bool ir_float_scalar(const ir_tensor *t, float *out_value);

/* "1x3x224x224" or "?x3x224x224" into buf. */
const char *ir_format_dims(int rank, const int64_t *dims, char *buf, size_t size);

#endif
