/* Graph passes run at engine build: shape inference with constant folding, pass-through removal,
 * dead-node elimination, and for the GPU the fusions and the layouts. Each takes a sorted graph
 * whose nodes are prepared (op_prepare_node). */
#ifndef TCI_GRAPH_PASSES_H
#define TCI_GRAPH_PASSES_H

#include "graph/ir.h"

/* Infers every tensor's dtype and shape in topological order, and evaluates each node whose
 * inputs are all known (or whose op reads only its input's shape, like Shape) on the CPU
 * reference path, turning its outputs into constants and dropping the node. This is what folds
 * PyTorch's Shape->Gather->Unsqueeze->Concat->Reshape chains once the input shape is known. */
tci_status pass_infer_and_fold(ir_graph *graph);

/* Replaces each node whose constant inputs choose the subgraph it runs (an If whose condition
 * is known: op_desc.known_branch) by that subgraph's nodes, named "<node>/<name>", reading the
 * tensors the subgraph read from the enclosing graph and writing the node's outputs; a node
 * whose graph output the branch only forwards from a non-constant stays. *changed says whether
 * any was replaced: the graph then needs sorting and inference again (pass_optimize does both). */
tci_status pass_inline_known_branches(ir_graph *graph, bool *changed);

/* Removes Identity and inference-mode Dropout nodes by rewiring their consumers. */
tci_status pass_remove_passthrough(ir_graph *graph);

/* Removes nodes none of whose outputs is read by another node or is a graph output. */
tci_status pass_eliminate_dead_nodes(ir_graph *graph);

/* One node's rewrite in a pass_rewrite_each walk: readers counts each tensor's readers
 * (ir_graph_count_readers) as the graph is now; *done (false on entry) set where it rewrote. */
typedef tci_status (*pass_rewrite_fn)(ir_graph *graph, const int *readers, ir_node *node,
                                      bool *done);
/* Offers each node of the graph as it is (not those the rewrites add) to fn, counting the readers
 * again after each rewrite (which adds tensors and readers); where any rewrote, the graph is
 * sorted and the nodes left unread removed. what names the work in an out-of-memory error. */
tci_status pass_rewrite_each(ir_graph *graph, pass_rewrite_fn fn, const char *what);

/* The whole optimisation: sort, prepare every node (resolve op, parse attributes), then the
 * passes above in order (inference and inlining repeated while inlining finds a node). */
tci_status pass_optimize(ir_graph *graph);

/* For the GPU engine, after pass_optimize: the attention subgraphs (pass_fuse_attention), then
 * folds each BatchNormalization that follows a Conv into new weights and bias, and records which
 * following nodes (residual Add, a Linear layer's bias, activations, SiLU's Sigmoid+Mul, the
 * erf and tanh Gelus as exporters expand them, a GEMM result's Reshape that keeps its rows or
 * Transpose of its channels-last rows to NCHW that views them as NHWC8) each
 * node's step computes as its epilogue, as the ops' descriptors allow (OP_FOLDS_BATCHNORM,
 * OP_EPILOGUE_*), and the residual Add before each OP_PROLOGUE_RESIDUAL node
 * (LayerNormalization). The fused nodes stay in the graph, marked fused_into; the CPU executor ignores the marks, the planner lowers the epilogues. Running
 * it again on the same graph changes nothing. */
tci_status pass_fuse_for_gpu(ir_graph *graph);

/* The attention part of pass_fuse_for_gpu (which runs it first): each scaled-dot-product
 * attention subgraph, MatMul(Q, K^T) -> constant scalings -> [Add(mask)] -> Softmax(last axis) ->
 * [Where(IsNaN(p), 0, p)] -> MatMul(P, V) (known shapes, rank 3 or 4, V's head dim Q's; a mask
 * Where(keep, 0, fill) of a bool keep folds as ir_attention.keep where its fill allows), is
 * recorded on its last MatMul
 * (ir_epilogue.attention) with the movement nodes (Transpose, Reshape, Squeeze, Unsqueeze,
 * Flatten, one-index Gather, constant Slice, Split) and constant scalings that lead from the
 * tensors Q, K and V are read from, and the Transposes and Reshapes of its output, as far as
 * strides can say them and nothing outside reads what lies between; those nodes are marked
 * fused_into it. First, each Transpose of the leading dims next to row-wise products (the
 * (batch, seq) swaps around torchvision's projections) is moved through them (rows.c), and the
 * move kept only where an attention step with a kernel head dim folds it: the graph then has new
 * nodes and tensors (the CPU reference computes the same values from it). */
tci_status pass_fuse_attention(ir_graph *graph);

/* For a graph optimised at smaller input shapes than ref (the same model, optimised at the
 * shapes an engine was built for: a batch or sequence variant): sets ir_tensor.variant_dims on
 * each tensor of graph whose same-named tensor in ref has the same rank, for the dims of length 1 in graph that are longer in ref. */
void pass_mark_variant_dims(ir_graph *graph, const ir_graph *ref);

/* For the GPU engine, after pass_fuse_for_gpu: records in ir_tensor.layout the layout each
 * tensor a step computes is stored in, from the descriptors (src/layers/op.h): NHWC8 (4-D float
 * only) for the outputs of OP_NHWC_OUTPUT ops, of OP_FOLLOWS_LAYOUT ops with a computed NHWC8
 * input and only float computed inputs, of pass-throughs of an NHWC8 input, and of ops whose
 * keeps_nhwc says so for their NHWC8 input 0, and of ops whose views_as_nhwc says their dense
 * input 0 is an NHWC8 tensor's bytes; for engine inputs read as input 0 by an
 * OP_NHWC_INPUT op; dense for everything else. The outputs of fused nodes take the layout of the
 * step that computes them (NHWC8 for what a GEMM writes through an NHWC8 view:
 * ir_epilogue.nhwc_output). The planner lowers every tensor in its recorded layout and refuses
 * a graph this pass has not run on. Running it again gives the same layouts. */
tci_status pass_assign_layouts(ir_graph *graph);

/* For the GPU engine, after pass_optimize and before pass_fuse_for_gpu (qdq.c): each
 * DequantizeLinear of a QuantizeLinear's output on a computed float tensor, both with the same
 * constant float scale and zero point per tensor, becomes Mul(Clip(Round(Div(x, s)), lo - z,
 * hi - z), s): the same values on the CPU reference, float ops the GPU runs, Round fused into
 * the Div's step so that x / s is rounded in fp32. Other Q/DQ nodes stay (the planner refuses
 * them by name). */
tci_status pass_emulate_qdq(ir_graph *graph);

/* For the GPU engine, after pass_optimize and before pass_fuse_for_gpu (layer_scale.c): each
 * Mul of a GEMM's result by a constant per output channel (ConvNeXt's layer scale gamma), the
 * result reaching it directly or through a constant bias Add and then a Transpose (the
 * channels-last rows to NCHW), every tensor between read by the next node alone, is folded:
 * the GEMM (op_desc.scale_columns) and the bias Add read new constants, the old ones left as
 * they are for other readers, and the Mul's readers read its input; the Mul is removed. The
 * graph computes the same values in fp32; the residual Add after it can then fuse into the
 * GEMM's step. A graph already fused is left as it is. */
tci_status pass_fold_layer_scale(ir_graph *graph);

/* For the GPU engine, first of the GPU passes (tokens.c): Transpose(0, 2, 1) -> Reshape(B, C, H, W)
 * of tokens (B, H W, C) becomes Reshape(B, H, W, C) -> Transpose(0, 3, 1, 2), and Reshape(B, C,
 * H W) -> Transpose(0, 2, 1) of an image becomes Transpose(0, 2, 3, 1) -> Reshape(B, H W, C),
 * the tensor between read by the second node alone: the same values, whose Transposes view
 * NHWC8 where C is a multiple of 8 (no copies where there were two each way). */
tci_status pass_token_image_views(ir_graph *graph);

/* For the GPU engine, before pass_fold_layer_scale (layer_scale.c): a GroupNorm exported as
 * Reshape(x, (N, G, -1)) -> InstanceNormalization(per-group scale, bias) -> Reshape back to x's
 * shape -> Mul(per-channel gamma) -> Add(per-channel beta), the Mul and Add optional and every
 * tensor between read by the next node alone (TorchScript's export of nn.GroupNorm before
 * opset 18, timm's GroupNorm(1)), becomes one GroupNormalization-21 of x with the combined
 * per-channel scale and bias: one step, in NHWC8 beside convolutions, where the chain took a
 * normalisation, two element-wise steps and layout conversions. Same values in fp32. */
tci_status pass_fold_group_norm_chains(ir_graph *graph);

/* For the GPU engine, after pass_fold_layer_scale and before pass_fuse_for_gpu (merge_gemms.c):
 * two or more products with constant 2-D weights (op_desc.merge_columns: MatMul, Gemm) that
 * read the same activation (one tensor, or reshapes of one tensor to the same dims that nothing
 * else reads), each with its weights read by it alone and, optionally, a bias Add of a constant
 * per column, become one product over their weights side by side (and one Add of the biases
 * side by side): Hugging Face's query, key and value Linears. Each part's tensor is then a Slice
 * of the packed result's last dim; the other products and Adds are removed, the model's
 * constants left as they are. Only where it pays: every part's tensor is what an attention step
 * reads its Q, K or V from (found by pass_fuse_attention on a copy of the graph, since that pass
 * rewrites the graph it fuses; run only where two products could merge at all), read by nothing
 * else, and that step is one kernel (a head dim it has, none of its nodes ir_node.kept), so that
 * it reads the part in place in the packed result and no copy is added; no part kept. The graph
 * computes the same values in fp32. A graph already fused is left as it is. */
tci_status pass_merge_sibling_gemms(ir_graph *graph);

/* For the GPU engine, after pass_assign_layouts: a dense Concat reads an input in place in the
 * tensor a Slice selects it from (the Slice marked fused into the Concat), where the Slice is its
 * only reader, steps by 1 and selects only along the Concat's axis: torch.roll exports as two
 * Slices and a Concat (Swin's shifted windows), one copy instead of three. */
tci_status pass_fold_slices_into_concats(ir_graph *graph);

/* What the GPU planner needs after pass_optimize: pass_emulate_qdq, pass_token_image_views,
 * pass_fold_group_norm_chains, pass_fold_layer_scale,
 * pass_merge_sibling_gemms, pass_fuse_for_gpu, pass_assign_layouts, then
 * pass_fold_slices_into_concats. */
tci_status pass_prepare_for_gpu(ir_graph *graph);

#endif
