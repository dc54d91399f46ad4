#!/usr/bin/env python3
"""Writes the test models (and, with --demo, the committed demo assets) with onnx's helper API.

Every weight comes from a fixed-seed generator, so two runs with the same onnx/numpy versions
write byte-identical files. The test models need only onnx and numpy; --demo also uses
onnxruntime for the expected output.

  generate.py OUT_DIR           all test models (what tests/models/run_models.py runs)
  generate.py --demo OUT_DIR    the tiny demo classifier and its input (models/demo/)
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT_MIN = float(np.finfo(np.float32).min)


class Builder:
    """Accumulates nodes and initializers of one graph; layer helpers return output names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.initializers = []
        self.counter = {}

    def unique(self, prefix):
        n = self.counter.get(prefix, 0)
        self.counter[prefix] = n + 1
        return f"{prefix}_{n}"

    def const(self, array, prefix="const"):
        name = self.unique(prefix)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def ints(self, values, prefix="shape"):
        return self.const(np.array(values, dtype=np.int64), prefix)

    def scalar(self, value, prefix="scalar"):
        return self.const(np.array(value, dtype=np.float32), prefix)

    def weight(self, shape, fan_in, gain=2.0, prefix="w"):
        # He-style scale so activations neither vanish nor explode through the depth
        std = math.sqrt(gain / fan_in)
        return self.const((self.rng.standard_normal(shape) * std).astype(np.float32), prefix)

    def bias(self, n, prefix="b"):
        return self.const((self.rng.standard_normal(n) * 0.05).astype(np.float32), prefix)

    def node(self, op, inputs, outputs=1, name=None, **attrs):
        name = name or self.unique(op.lower())
        outs = [f"{name}_out{i}" if outputs > 1 else f"{name}_out" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs if outputs > 1 else outs[0]

    # layers --------------------------------------------------------------------------------
    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, dilation=1, bias=True,
             gain=2.0):
        pad = (k // 2) * dilation if pad is None else pad
        w = self.weight((cout, cin // group, k, k), cin // group * k * k, gain, "conv_w")
        inputs = [x, w] + ([self.bias(cout, "conv_b")] if bias else [])
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
        if group != 1:
            attrs["group"] = group
        if dilation != 1:
            attrs["dilations"] = [dilation, dilation]
        return self.node("Conv", inputs, **attrs)

    def bn(self, x, c):
        r = self.rng
        scale = self.const(r.uniform(0.5, 1.5, c).astype(np.float32), "bn_scale")
        shift = self.const((r.standard_normal(c) * 0.1).astype(np.float32), "bn_bias")
        mean = self.const((r.standard_normal(c) * 0.1).astype(np.float32), "bn_mean")
        var = self.const(r.uniform(0.5, 1.5, c).astype(np.float32), "bn_var")
        return self.node("BatchNormalization", [x, scale, shift, mean, var], epsilon=1e-5)

    def relu6(self, x):
        return self.node("Clip", [x, self.scalar(0.0, "clip_min"), self.scalar(6.0, "clip_max")])

    def linear(self, x, din, dout, prefix="fc"):
        """PyTorch nn.Linear on a 3-D activation: MatMul by W^T stored [din, dout], then Add."""
        w = self.weight((din, dout), din, 1.0, f"{prefix}_w")
        return self.node("Add", [self.node("MatMul", [x, w]), self.bias(dout, f"{prefix}_b")])

    def gemm(self, x, din, dout, gain=2.0):
        """PyTorch nn.Linear on a 2-D activation: Gemm with the weight stored [dout, din]."""
        w = self.weight((dout, din), din, gain, "fc_w")
        return self.node("Gemm", [x, w, self.bias(dout, "fc_b")], transB=1)

    def model(self, name, inputs, outputs, opset, doc):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        opsets = [helper.make_opsetid("", opset)]
        m = helper.make_model(graph, opset_imports=opsets, producer_name="tcinfer-generate",
                              ir_version=helper.find_min_ir_version_for(opsets))
        m.doc_string = doc
        onnx.checker.check_model(m, full_check=True)
        return m


def tensor(name, dims, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, dims)


# models --------------------------------------------------------------------------------------
def small_cnn():
    b = Builder(1)
    x = b.conv("input", 3, 16, 3)
    x = b.node("Relu", [b.bn(x, 16)])
    x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.conv(x, 16, 32, 3)
    x = b.node("Relu", [b.bn(x, 32)])
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = b.node("Relu", [b.conv(x, 32, 64, 3)])
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.node("Gemm", [x, b.weight((10, 64), 64, 1.0), b.bias(10)], name="logits", transB=1)
    return b.model("small_cnn", [tensor("input", ["N", 3, 32, 32])],
                   [tensor("logits_out", ["N", 10])], 9,
                   "Small CNN, opset 9, symbolic batch.")


def bottleneck(b, x, cin, mid, cout, stride):
    y = b.node("Relu", [b.bn(b.conv(x, cin, mid, 1, bias=False), mid)])
    y = b.node("Relu", [b.bn(b.conv(y, mid, mid, 3, stride=stride, bias=False), mid)])
    y = b.bn(b.conv(y, mid, cout, 1, bias=False, gain=1.0), cout)
    if stride != 1 or cin != cout:
        x = b.bn(b.conv(x, cin, cout, 1, stride=stride, pad=0, bias=False, gain=1.0), cout)
    return b.node("Relu", [b.node("Add", [y, x])])


def resnet_mini():
    b = Builder(2)
    x = b.node("Relu", [b.bn(b.conv("input", 3, 16, 7, stride=2, bias=False), 16)])
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = bottleneck(b, x, 16, 16, 64, 1)    # projection: channels change
    x = bottleneck(b, x, 64, 16, 64, 1)    # identity
    x = bottleneck(b, x, 64, 32, 128, 2)   # strided, projection
    x = bottleneck(b, x, 128, 32, 128, 1)
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.node("Gemm", [x, b.weight((10, 128), 128, 1.0), b.bias(10)], name="fc", transB=1)
    return b.model("resnet_mini", [tensor("input", [1, 3, 64, 64])],
                   [tensor("fc_out", [1, 10])], 17,
                   "ResNet-style bottleneck network, opset 17.")


def resnet50():
    """ResNet-50 v1.5 as torchvision lays it out (stride on the 3x3 conv), random weights: the
    memory planner's reference network, planned without a GPU by `tcinfer --plan`."""
    b = Builder(50)
    x = b.node("Relu", [b.bn(b.conv("input", 3, 64, 7, stride=2, bias=False), 64)])
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for mid, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            x = bottleneck(b, x, cin, mid, mid * 4, stride if i == 0 else 1)
            cin = mid * 4
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.node("Gemm", [x, b.weight((1000, 2048), 2048, 1.0), b.bias(1000)], name="fc", transB=1)
    return b.model("resnet50", [tensor("input", ["N", 3, 224, 224])],
                   [tensor("fc_out", ["N", 1000])], 17, "ResNet-50 v1.5 layout, opset 17.")


def mobilenetv2_mini():
    b = Builder(3)
    x = b.relu6(b.bn(b.conv("input", 3, 16, 3, stride=2, bias=False), 16))
    cin = 16
    # (expansion, out channels, repeats, first stride), as in the MobileNetV2 paper's table
    for t, c, n, s in [(1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2), (6, 24, 2, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x
            if t != 1:
                y = b.relu6(b.bn(b.conv(y, cin, hidden, 1, bias=False), hidden))
            y = b.relu6(b.bn(b.conv(y, hidden, hidden, 3, stride=stride, group=hidden,
                                    bias=False), hidden))
            y = b.bn(b.conv(y, hidden, c, 1, bias=False, gain=1.0), c)  # linear bottleneck
            x = b.node("Add", [x, y]) if stride == 1 and cin == c else y
            cin = c
    x = b.relu6(b.bn(b.conv(x, cin, 128, 1, bias=False), 128))
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.node("Gemm", [x, b.weight((10, 128), 128, 1.0), b.bias(10)], name="classifier",
           transB=1)
    return b.model("mobilenetv2_mini", [tensor("input", [1, 3, 64, 64])],
                   [tensor("classifier_out", [1, 10])], 13,
                   "MobileNetV2-style network: depthwise convs, ReLU6 as Clip, opset 13.")


def mlp():
    b = Builder(4)
    x = b.node("Relu", [b.gemm("input", 784, 256)])
    x = b.node("Relu", [b.gemm(x, 256, 128)])
    x = b.gemm(x, 128, 10, gain=1.0)
    b.node("Softmax", [x], name="probs", axis=1)
    return b.model("mlp", [tensor("input", ["N", 784])], [tensor("probs_out", ["N", 10])], 13,
                   "MLP classifier, opset 13, symbolic batch.")


D_MODEL, HEADS, D_FF = 64, 4, 256
D_HEAD = D_MODEL // HEADS


def heads_shape(b, x):
    """PyTorch's dynamic view(): [N, S, H, Dh] built from Shape(x) at run time."""
    shape = b.node("Shape", [x])
    n = b.node("Unsqueeze", [b.node("Gather", [shape, b.ints(0, "idx")], axis=0),
                             b.ints([0], "axes")])
    s = b.node("Unsqueeze", [b.node("Gather", [shape, b.ints(1, "idx")], axis=0),
                             b.ints([0], "axes")])
    return b.node("Concat", [n, s, b.ints([HEADS, D_HEAD])], axis=0)


def gelu_erf(b, x):
    inner = b.node("Erf", [b.node("Div", [x, b.scalar(math.sqrt(2.0))])])
    return b.node("Mul", [b.node("Mul", [x, b.node("Add", [inner, b.scalar(1.0)])]),
                          b.scalar(0.5)])


def layer_norm(b, x):
    gamma = b.const((1.0 + 0.1 * b.rng.standard_normal(D_MODEL)).astype(np.float32), "ln_g")
    beta = b.const((0.1 * b.rng.standard_normal(D_MODEL)).astype(np.float32), "ln_b")
    return b.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)


def layer_norm_decomposed(b, x):
    """LayerNorm as exported before opset 17: ReduceMean/Sub/Pow/Sqrt/Div (axes as input)."""
    axes = b.ints([-1], "axes")
    centered = b.node("Sub", [x, b.node("ReduceMean", [x, axes], keepdims=1)])
    var = b.node("ReduceMean", [b.node("Pow", [centered, b.scalar(2.0)]), axes], keepdims=1)
    std = b.node("Sqrt", [b.node("Add", [var, b.scalar(1e-5)])])
    gamma = b.const((1.0 + 0.1 * b.rng.standard_normal(D_MODEL)).astype(np.float32), "ln_g")
    beta = b.const((0.1 * b.rng.standard_normal(D_MODEL)).astype(np.float32), "ln_b")
    return b.node("Add", [b.node("Mul", [b.node("Div", [centered, std]), gamma]), beta])


def encoder_block(b, x, mask_bias_cond, variant):
    shape = heads_shape(b, x)
    q = b.node("Transpose", [b.node("Reshape", [b.linear(x, D_MODEL, D_MODEL, "q"), shape])],
               perm=[0, 2, 1, 3])
    k = b.node("Transpose", [b.node("Reshape", [b.linear(x, D_MODEL, D_MODEL, "k"), shape])],
               perm=[0, 2, 3, 1])
    v = b.node("Transpose", [b.node("Reshape", [b.linear(x, D_MODEL, D_MODEL, "v"), shape])],
               perm=[0, 2, 1, 3])
    scores = b.node("Div", [b.node("MatMul", [q, k]), b.scalar(math.sqrt(D_HEAD))])
    scores = b.node("Where", [mask_bias_cond, b.scalar(FLOAT_MIN, "mask_value"), scores])
    probs = b.node("Softmax", [scores], axis=-1)
    ctx = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = b.node("Reshape", [ctx, b.ints([0, 0, -1])])  # merge heads, batch/seq copied
    h = b.node("Add", [x, b.linear(ctx, D_MODEL, D_MODEL, "o")])
    h = layer_norm(b, h) if variant == "erf" else layer_norm_decomposed(b, h)
    f = b.linear(h, D_MODEL, D_FF, "ff1")
    f = gelu_erf(b, f) if variant == "erf" else b.node("Gelu", [f])
    f = b.linear(f, D_FF, D_MODEL, "ff2")
    return b.node("Add", [h, f]), probs


def transformer_block():
    b = Builder(5)
    # mask [N, S]: 1 keeps a key position, 0 masks it; broadcast as [N, 1, 1, S]
    pad = b.node("Equal", ["mask", b.const(np.array(0, dtype=np.int64), "zero")])
    cond = b.node("Unsqueeze", [pad, b.ints([1, 2], "axes")])
    h, probs = encoder_block(b, "input", cond, "erf")
    h = layer_norm(b, h)
    h2, _ = encoder_block(b, h, cond, "gelu_op")
    b.node("Identity", [layer_norm(b, h2)], name="hidden")
    b.node("Identity", [probs], name="attention")
    return b.model("transformer_block",
                   [tensor("input", ["N", "S", D_MODEL]),
                    tensor("mask", ["N", "S"], TensorProto.INT64)],
                   [tensor("hidden_out", ["N", "S", D_MODEL]),
                    tensor("attention_out", ["N", HEADS, "S", "S"])], 20,
                   "Two post-LN encoder blocks (Erf-GELU and Gelu op), opset 20, symbolic "
                   "batch and sequence.")


ATT_MODEL = 128


def split_heads(b, x, heads, d_head, perm):
    """[N, S, heads*d_head] -> Reshape [N, S, heads, d_head] (shape from Shape(x), as PyTorch's
    view() exports) -> Transpose(perm)."""
    shape = b.node("Shape", [x])
    n = b.node("Unsqueeze", [b.node("Gather", [shape, b.ints(0, "idx")], axis=0),
                             b.ints([0], "axes")])
    s = b.node("Unsqueeze", [b.node("Gather", [shape, b.ints(1, "idx")], axis=0),
                             b.ints([0], "axes")])
    dims = b.node("Concat", [n, s, b.ints([heads, d_head])], axis=0)
    return b.node("Transpose", [b.node("Reshape", [x, dims])], perm=perm)


def merge_heads(b, ctx, width, x):
    """[N, H, S, Dh] -> [N, S, H*Dh], then the output projection and the residual."""
    ctx = b.node("Reshape", [b.node("Transpose", [ctx], perm=[0, 2, 1, 3]), b.ints([0, 0, -1])])
    return b.node("Add", [x, b.linear(ctx, width, ATT_MODEL, "o")])


def sdpa_export_block(b, x, mask_bias):
    """F.scaled_dot_product_attention(q, k, v, attn_mask) as torch.onnx (opset 14+) writes it:
    Q and K^T each scaled by sqrt(1/sqrt(Dh)), MatMul, Add(mask), Softmax, MatMul."""
    heads, dh = 2, 64
    q = split_heads(b, b.linear(x, ATT_MODEL, heads * dh, "q"), heads, dh, [0, 2, 1, 3])
    k = split_heads(b, b.linear(x, ATT_MODEL, heads * dh, "k"), heads, dh, [0, 2, 1, 3])
    v = split_heads(b, b.linear(x, ATT_MODEL, heads * dh, "v"), heads, dh, [0, 2, 1, 3])
    root = b.scalar(math.sqrt(1.0 / math.sqrt(dh)), "sqrt_scale")
    kt = b.node("Transpose", [k], perm=[0, 1, 3, 2])
    scores = b.node("MatMul", [b.node("Mul", [q, root]), b.node("Mul", [kt, root])])
    probs = b.node("Softmax", [b.node("Add", [scores, mask_bias])], axis=-1)
    return merge_heads(b, b.node("MatMul", [probs, v]), heads * dh, x)


def causal_mask(b, q):
    """is_causal=True as torch.onnx writes it: ones(L, L) from Shape, Trilu (lower), and
    Where(== 0, -inf, 0): a constant once the sequence length is known."""
    shape = b.node("Shape", [q])
    length = b.node("Unsqueeze", [b.node("Gather", [shape, b.ints(2, "idx")], axis=0),
                                  b.ints([0], "axes")])
    ones = b.node("ConstantOfShape", [b.node("Concat", [length, length], axis=0)],
                  value=numpy_helper.from_array(np.array([1.0], np.float32)))
    lower = b.node("Trilu", [ones], upper=0)
    cond = b.node("Equal", [lower, b.scalar(0.0, "zero_f")])
    return b.node("Where", [cond, b.scalar(float("-inf"), "neg_inf"), b.scalar(0.0, "zero_f")])


def manual_causal_block(b, x):
    """q @ k.transpose(-2, -1) / sqrt(Dh) + causal mask, softmax, @ v: the hand-written form,
    K^T as one Transpose of the projection (PyTorch merges the two)."""
    heads, dh = 4, 32
    q = split_heads(b, b.linear(x, ATT_MODEL, heads * dh, "q"), heads, dh, [0, 2, 1, 3])
    kt = split_heads(b, b.linear(x, ATT_MODEL, heads * dh, "k"), heads, dh, [0, 2, 3, 1])
    v = split_heads(b, b.linear(x, ATT_MODEL, heads * dh, "v"), heads, dh, [0, 2, 1, 3])
    scores = b.node("Div", [b.node("MatMul", [q, kt]), b.scalar(math.sqrt(dh))])
    probs = b.node("Softmax", [b.node("Add", [scores, causal_mask(b, q)])], axis=-1)
    return merge_heads(b, b.node("MatMul", [probs, v]), heads * dh, x)


def unmasked_block(b, x, heads, dh):
    """Softmax(Q K^T * (1/sqrt(Dh))) V with no mask (Mul after the MatMul)."""
    q = split_heads(b, b.linear(x, ATT_MODEL, heads * dh, "q"), heads, dh, [0, 2, 1, 3])
    kt = split_heads(b, b.linear(x, ATT_MODEL, heads * dh, "k"), heads, dh, [0, 2, 3, 1])
    v = split_heads(b, b.linear(x, ATT_MODEL, heads * dh, "v"), heads, dh, [0, 2, 1, 3])
    scores = b.node("Mul", [b.node("MatMul", [q, kt]), b.scalar(1.0 / math.sqrt(dh))])
    probs = b.node("Softmax", [scores], axis=-1)
    return merge_heads(b, b.node("MatMul", [probs, v]), heads * dh, x)


def attention_block():
    b = Builder(10)
    # mask [N, S]: 1 keeps a key, 0 pads it; the additive bias (1 - mask) * -10000 as [N,1,1,S]
    keep = b.node("Sub", [b.scalar(1.0, "one"),
                          b.node("Cast", ["mask"], to=TensorProto.FLOAT)])
    bias = b.node("Unsqueeze", [b.node("Mul", [keep, b.scalar(-10000.0, "big")]),
                                b.ints([1, 2], "axes")])
    h = sdpa_export_block(b, "input", bias)          # heads 2 x 64, padding mask
    h = manual_causal_block(b, h)                    # heads 4 x 32, causal
    h = unmasked_block(b, h, 2, 40)                  # head dim 40: no kernel, unfused steps
    b.node("Identity", [unmasked_block(b, h, 1, 128)], name="hidden")  # head dim 128
    return b.model("attention_block",
                   [tensor("input", ["N", "S", ATT_MODEL]),
                    tensor("mask", ["N", "S"], TensorProto.INT64)],
                   [tensor("hidden_out", ["N", "S", ATT_MODEL])], 17,
                   "Four self-attention blocks as exporters write them (PyTorch's SDPA export "
                   "with a padding mask, the manual form with a causal mask, no mask with head "
                   "dims 40 and 128), opset 17, symbolic batch and sequence.")


def dims_of(b, x, axes):
    """The dims `axes` of x, from Shape(x), each as a 1-element vector (PyTorch's size() export)."""
    shape = b.node("Shape", [x])
    return [b.node("Unsqueeze", [b.node("Gather", [shape, b.ints(a, "idx")], axis=0),
                                 b.ints([0], "axes")]) for a in axes]


def torchvision_mha_block(b, x, mask_bias):
    """torchvision's ViT encoder attention (nn.MultiheadAttention, batch_first=False) as
    torch.onnx writes it: Transpose [N, S, E] -> [S, N, E], the packed in_proj (MatMul + Add,
    3E wide), Reshape [S, N, 3, E], Unsqueeze(0), Transpose(3, 1, 2, 0, 4), Squeeze(3), three
    Gathers, each Reshape [S, N*H, Dh] + Transpose(1, 0, 2) + Reshape [N, H, S, Dh]; the SDPA
    export with a padding mask; Transpose(2, 0, 1, 3), Reshape [S*N, E], out_proj Gemm, Reshape
    [S, N, E], Transpose back and the residual."""
    heads, dh = 2, 64
    e = heads * dh
    xt = b.node("Transpose", [x], perm=[1, 0, 2])
    s, n = dims_of(b, xt, [0, 1])
    qkv = b.linear(xt, ATT_MODEL, 3 * e, "in_proj")
    qkv = b.node("Reshape", [qkv, b.node("Concat", [s, n, b.ints([3, e])], axis=0)])
    qkv = b.node("Transpose", [b.node("Unsqueeze", [qkv, b.ints([0], "axes")])],
                 perm=[3, 1, 2, 0, 4])
    qkv = b.node("Squeeze", [qkv, b.ints([3], "axes")])
    nh = b.node("Mul", [n, b.ints([heads])])
    ops = []
    for i in range(3):
        part = b.node("Gather", [qkv, b.const(np.array(i, dtype=np.int64), "idx")], axis=0)
        part = b.node("Reshape", [part, b.node("Concat", [s, nh, b.ints([dh])], axis=0)])
        part = b.node("Transpose", [part], perm=[1, 0, 2])
        ops.append(b.node("Reshape", [part, b.node("Concat", [n, b.ints([heads]), s,
                                                                  b.ints([dh])], axis=0)]))
    root = b.scalar(math.sqrt(1.0 / math.sqrt(dh)), "sqrt_scale")
    kt = b.node("Transpose", [ops[1]], perm=[0, 1, 3, 2])
    scores = b.node("MatMul", [b.node("Mul", [ops[0], root]), b.node("Mul", [kt, root])])
    probs = b.node("Softmax", [b.node("Add", [scores, mask_bias])], axis=-1)
    ctx = b.node("Transpose", [b.node("MatMul", [probs, ops[2]])], perm=[2, 0, 1, 3])
    ctx = b.node("Reshape", [ctx, b.ints([-1, e])])
    out = b.gemm(ctx, e, ATT_MODEL, gain=1.0)
    out = b.node("Reshape", [out, b.node("Concat", [s, n, b.ints([ATT_MODEL])], axis=0)])
    return b.node("Add", [x, b.node("Transpose", [out], perm=[1, 0, 2])])


def timm_attention_block(b, x):
    """timm's Attention: the packed qkv Linear, Reshape [N, S, 3, H, Dh], Transpose(2, 0, 3, 1,
    4), Split into three along axis 0 and Squeeze each, q * scale @ k^T, Softmax (no mask), @ v,
    Transpose(1, 2), Reshape [N, S, E], proj."""
    heads, dh = 4, 32
    e = heads * dh
    n, s = dims_of(b, x, [0, 1])
    qkv = b.linear(x, ATT_MODEL, 3 * e, "qkv")
    qkv = b.node("Reshape", [qkv, b.node("Concat", [n, s, b.ints([3, heads, dh])], axis=0)])
    qkv = b.node("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
    q, k, v = [b.node("Squeeze", [part, b.ints([0], "axes")])
               for part in b.node("Split", [qkv, b.ints([1, 1, 1], "split")], outputs=3, axis=0)]
    q = b.node("Mul", [q, b.scalar(1.0 / math.sqrt(dh), "scale")])
    probs = b.node("Softmax", [b.node("MatMul", [q, b.node("Transpose", [k],
                                                             perm=[0, 1, 3, 2])])], axis=-1)
    return merge_heads(b, b.node("MatMul", [probs, v]), e, x)


def sliced_causal_block(b, x):
    """A packed projection cut into Q, K, V by constant Slices of its last dim (head dim 96), each
    split into heads, a causal mask: the hand-written form of a GPT-style block."""
    heads, dh = 2, 96
    e = heads * dh
    qkv = b.linear(x, ATT_MODEL, 3 * e, "c_attn")
    axis = b.ints([2], "axes")
    q, k, v = [split_heads(b, b.node("Slice", [qkv, b.ints([i * e], "starts"),
                                               b.ints([(i + 1) * e], "ends"), axis]),
                           heads, dh, [0, 2, 1, 3]) for i in range(3)]
    scores = b.node("Div", [b.node("MatMul", [q, b.node("Transpose", [k], perm=[0, 1, 3, 2])]),
                            b.scalar(math.sqrt(dh))])
    probs = b.node("Softmax", [b.node("Add", [scores, causal_mask(b, q)])], axis=-1)
    return merge_heads(b, b.node("MatMul", [probs, v]), e, x)


def packed_attention_block():
    b = Builder(11)
    keep = b.node("Sub", [b.scalar(1.0, "one"),
                          b.node("Cast", ["mask"], to=TensorProto.FLOAT)])
    bias = b.node("Unsqueeze", [b.node("Mul", [keep, b.scalar(-10000.0, "big")]),
                                b.ints([1, 2], "axes")])
    h = torchvision_mha_block(b, "input", bias)      # Gathers, heads 2 x 64, padding mask
    h = timm_attention_block(b, h)                   # Split, heads 4 x 32, no mask
    b.node("Identity", [sliced_causal_block(b, h)], name="hidden")  # Slices, 2 x 96, causal
    return b.model("packed_attention_block",
                   [tensor("input", ["N", "S", ATT_MODEL]),
                    tensor("mask", ["N", "S"], TensorProto.INT64)],
                   [tensor("hidden_out", ["N", "S", ATT_MODEL])], 17,
                   "Three self-attention blocks on packed QKV projections as exporters write "
                   "them (torchvision's MultiheadAttention with Gathers and a padding mask, "
                   "timm's Split, constant Slices with a causal mask), opset 17, symbolic batch "
                   "and sequence.")



def mixed_attention_block():
    b = Builder(32)
    keep = b.node("Sub", [b.scalar(1.0, "one"),
                          b.node("Cast", ["mask"], to=TensorProto.FLOAT)])
    bias = b.node("Unsqueeze", [b.node("Mul", [keep, b.scalar(-10000.0, "big")]),
                                b.ints([1, 2], "axes")])
    h = torchvision_mha_block(b, "input", bias)      # packed in_proj between Transposes
    b.node("Identity", [sdpa_export_block(b, h, bias)], name="hidden")  # separate Q, K, V
    return b.model("mixed_attention_block",
                   [tensor("input", ["N", "S", ATT_MODEL]),
                    tensor("mask", ["N", "S"], TensorProto.INT64)],
                   [tensor("hidden_out", ["N", "S", ATT_MODEL])], 17,
                   "torchvision's MultiheadAttention (its (batch, seq) Transposes around the "
                   "packed projections) then PyTorch's SDPA export on separate query, key and "
                   "value Linears, one padding mask, opset 17, symbolic batch and sequence.")


# Hugging Face transformers' eager attention as torch.onnx (opset 17) writes it: the attention
# mask built as bools (padding from the attention_mask input, GPT-2's causal part from Range
# comparisons, And-ed and Expanded to [N, 1, S, S]), added to the scores as Where(keep, 0, fill),
# and the softmax guarded by Where(IsNaN(p), 0, p) (a row that keeps no key is NaN, then 0).
HF_HEADS, HF_DH = 2, 64
HF_E = HF_HEADS * HF_DH


def hf_keep_mask(b, x, causal):
    """keep [N, 1, S, S] (bool): key j of sequence n seen by query i when mask[n, j] != 0 and,
    with causal, j <= i; the shapes come from Shape(x) as the export computes them."""
    n, s = dims_of(b, x, [0, 1])
    pad = b.node("Unsqueeze", [b.node("Cast", ["mask"], to=TensorProto.BOOL),
                               b.ints([1, 2], "axes")])                       # [N, 1, 1, S]
    pos = b.node("Range", [b.const(np.array(0, dtype=np.int64), "start"),
                           b.node("Squeeze", [s, b.ints([0], "axes")]),
                           b.const(np.array(1, dtype=np.int64), "step")])
    q_idx = b.node("Unsqueeze", [pos, b.ints([0, 1, 3], "axes")])              # [1, 1, S, 1]
    kv_idx = b.node("Unsqueeze", [pos, b.ints([0, 1, 2], "axes")])             # [1, 1, 1, S]
    if causal:
        base = b.node("LessOrEqual", [kv_idx, q_idx])
    else:
        base = b.node("GreaterOrEqual", [q_idx, b.const(np.array(0, dtype=np.int64), "zero")])
    keep = b.node("And", [base, pad])
    return b.node("Expand", [keep, b.node("Concat", [n, b.ints([1]), s, s], axis=0)])


def hf_attention(b, q, kt, v, keep, fill, guard):
    """Q and K^T each scaled by Dh^-1/4, MatMul, + Where(keep, 0, fill), Softmax, [NaN guard],
    MatMul by V."""
    root = b.scalar(HF_DH ** -0.25, "quarter_scale")
    scores = b.node("MatMul", [b.node("Mul", [q, root]), b.node("Mul", [kt, root])])
    bias = b.node("Where", [keep, b.const(np.array([0.0], np.float32), "zero_f"),
                            b.const(np.array([fill], np.float32), "fill")])
    probs = b.node("Softmax", [b.node("Add", [scores, bias])], axis=-1)
    if guard:
        probs = b.node("Where", [b.node("IsNaN", [probs]),
                                 b.const(np.array(0.0, np.float32), "zero_f"), probs])
    return b.node("MatMul", [probs, v])


def bert_block():
    b = Builder(12)
    keep = hf_keep_mask(b, "input", causal=False)
    h = "input"
    # transformers 5's -inf fill with the NaN guard, then the finite torch.finfo.min fill alone
    for fill, guard in ((float("-inf"), True), (FLOAT_MIN, False)):
        q = split_heads(b, b.linear(h, ATT_MODEL, HF_E, "query"), HF_HEADS, HF_DH, [0, 2, 1, 3])
        kt = split_heads(b, b.linear(h, ATT_MODEL, HF_E, "key"), HF_HEADS, HF_DH, [0, 2, 3, 1])
        v = split_heads(b, b.linear(h, ATT_MODEL, HF_E, "value"), HF_HEADS, HF_DH, [0, 2, 1, 3])
        h = merge_heads(b, hf_attention(b, q, kt, v, keep, fill, guard), HF_E, h)
    b.node("Identity", [h], name="hidden")
    return b.model("bert_block",
                   [tensor("input", ["N", "S", ATT_MODEL]),
                    tensor("mask", ["N", "S"], TensorProto.INT64)],
                   [tensor("hidden_out", ["N", "S", ATT_MODEL])], 17,
                   "Two BERT self-attention blocks as transformers' eager attention exports "
                   "(bool padding mask, Where(keep, 0, -inf) with the softmax's IsNaN guard, "
                   "then Where(keep, 0, finfo.min)), opset 17, symbolic batch and sequence.")


def gpt2_block():
    b = Builder(13)
    keep = hf_keep_mask(b, "input", causal=True)
    h = "input"
    for _ in range(2):
        n, s = dims_of(b, h, [0, 1])
        flat = b.node("Reshape", [h, b.ints([-1, ATT_MODEL])])
        qkv = b.node("Reshape", [b.gemm(flat, ATT_MODEL, 3 * HF_E, gain=1.0),
                                 b.node("Concat", [n, s, b.ints([3 * HF_E])], axis=0)])
        parts = b.node("Split", [qkv, b.ints([HF_E] * 3, "split")], outputs=3, axis=2)
        heads = [b.node("Reshape", [p, b.node("Concat", [n, s, b.ints([HF_HEADS, HF_DH])],
                                               axis=0)]) for p in parts]
        q = b.node("Transpose", [heads[0]], perm=[0, 2, 1, 3])
        kt = b.node("Transpose", [heads[1]], perm=[0, 2, 3, 1])
        v = b.node("Transpose", [heads[2]], perm=[0, 2, 1, 3])
        ctx = hf_attention(b, q, kt, v, keep, float("-inf"), True)
        ctx = b.node("Reshape", [b.node("Transpose", [ctx], perm=[0, 2, 1, 3]),
                                 b.ints([-1, HF_E])])
        out = b.node("Reshape", [b.gemm(ctx, HF_E, ATT_MODEL, gain=1.0),
                                 b.node("Concat", [n, s, b.ints([ATT_MODEL])], axis=0)])
        h = b.node("Add", [h, out])
    b.node("Identity", [h], name="hidden")
    return b.model("gpt2_block",
                   [tensor("input", ["N", "S", ATT_MODEL]),
                    tensor("mask", ["N", "S"], TensorProto.INT64)],
                   [tensor("hidden_out", ["N", "S", ATT_MODEL])], 17,
                   "Two GPT-2 self-attention blocks as transformers' eager attention exports "
                   "(packed c_attn Gemm and Split, causal and padding bools And-ed, "
                   "Where(keep, 0, -inf), the softmax's IsNaN guard), opset 17, symbolic batch "
                   "and sequence.")

def norm(b, x, width):
    """LayerNormalization over the last dim (width) with a generated scale and shift."""
    gamma = b.const((1.0 + 0.1 * b.rng.standard_normal(width)).astype(np.float32), "ln_g")
    beta = b.const((0.1 * b.rng.standard_normal(width)).astype(np.float32), "ln_b")
    return b.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)


def rows_linear(b, x, n, s, din, dout, gain=1.0):
    """A Linear on [N, S, din] through its rows (GPT-2's Conv1D, the dynamo exporter's linear):
    Reshape [-1, din], Gemm, Reshape [N, S, dout] with the shape from Shape(x)."""
    y = b.gemm(b.node("Reshape", [x, b.ints([-1, din])]), din, dout, gain)
    return b.node("Reshape", [y, b.node("Concat", [n, s, b.ints([dout])], axis=0)])


def gelu_tanh_hf(b, x):
    """transformers' NewGELUActivation (GPT-2's gelu_new) as torch.onnx writes it:
    0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3)))), (0.5 x) times the sum."""
    cube = b.node("Pow", [x, b.scalar(3.0, "three")])
    inner = b.node("Add", [x, b.node("Mul", [cube, b.scalar(0.044715, "kappa")])])
    t = b.node("Tanh", [b.node("Mul", [inner, b.scalar(math.sqrt(2.0 / math.pi), "beta")])])
    return b.node("Mul", [b.node("Mul", [x, b.scalar(0.5, "half")]),
                          b.node("Add", [t, b.scalar(1.0, "one")])])


def gelu_tanh_torch(b, x):
    """torch's gelu(approximate="tanh") as its opset-9 symbolic expands it: x * (x * x), the
    constants first, 0.5 * (x * (1 + tanh(...)))."""
    cube = b.node("Mul", [x, b.node("Mul", [x, x])])
    inner = b.node("Add", [x, b.node("Mul", [b.scalar(0.044715, "kappa"), cube])])
    t = b.node("Tanh", [b.node("Mul", [b.scalar(math.sqrt(2.0 / math.pi), "beta"), inner])])
    return b.node("Mul", [b.scalar(0.5, "half"),
                          b.node("Mul", [x, b.node("Add", [b.scalar(1.0, "one"), t])])])


def gpt2_layers():
    """Two whole GPT-2 layers (pre-LN): c_attn, c_proj, c_fc and the MLP's c_proj as Conv1D
    (Reshape, Gemm, Reshape), the residuals added after the Reshape, the MLP's tanh Gelu
    expanded (transformers' NewGELUActivation in the first layer, torch's own expansion in the
    second)."""
    b = Builder(15)
    keep = hf_keep_mask(b, "input", causal=True)
    h = "input"
    for gelu in (gelu_tanh_hf, gelu_tanh_torch):
        n, s = dims_of(b, h, [0, 1])
        qkv = rows_linear(b, norm(b, h, ATT_MODEL), n, s, ATT_MODEL, 3 * HF_E)
        parts = b.node("Split", [qkv, b.ints([HF_E] * 3, "split")], outputs=3, axis=2)
        heads = [b.node("Reshape", [p, b.node("Concat", [n, s, b.ints([HF_HEADS, HF_DH])],
                                               axis=0)]) for p in parts]
        q = b.node("Transpose", [heads[0]], perm=[0, 2, 1, 3])
        kt = b.node("Transpose", [heads[1]], perm=[0, 2, 3, 1])
        v = b.node("Transpose", [heads[2]], perm=[0, 2, 1, 3])
        ctx = hf_attention(b, q, kt, v, keep, float("-inf"), True)
        ctx = b.node("Reshape", [b.node("Transpose", [ctx], perm=[0, 2, 1, 3]),
                                 b.node("Concat", [n, s, b.ints([HF_E])], axis=0)])
        h = b.node("Add", [h, rows_linear(b, ctx, n, s, HF_E, ATT_MODEL)])
        f = gelu(b, rows_linear(b, norm(b, h, ATT_MODEL), n, s, ATT_MODEL, 4 * ATT_MODEL))
        h = b.node("Add", [h, rows_linear(b, f, n, s, 4 * ATT_MODEL, ATT_MODEL)])
    b.node("Identity", [norm(b, h, ATT_MODEL)], name="hidden")
    return b.model("gpt2_layers",
                   [tensor("input", ["N", "S", ATT_MODEL]),
                    tensor("mask", ["N", "S"], TensorProto.INT64)],
                   [tensor("hidden_out", ["N", "S", ATT_MODEL])], 17,
                   "Two GPT-2 layers as transformers exports them (Conv1D as Reshape, Gemm, "
                   "Reshape; residuals after the Reshape; the tanh Gelu expanded, Pow(x, 3) "
                   "in the first layer, x * (x * x) in the second), opset 17, symbolic batch "
                   "and sequence.")


def vit_layers():
    """Two pre-LN ViT encoder layers as the dynamo exporter writes a Linear on [N, S, E]
    (Reshape, Gemm, Reshape): separate q, k, v projections, unmasked attention of 2 heads x 64,
    the residual Adds after the output projections' Reshapes, the MLP's erf Gelu expanded (Div,
    Erf, Add, Mul, Mul) after its Reshape."""
    b = Builder(16)
    h = "input"
    for _ in range(2):
        n, s = dims_of(b, h, [0, 1])
        x = norm(b, h, ATT_MODEL)
        q, k, v = [split_heads(b, rows_linear(b, x, n, s, ATT_MODEL, HF_E), HF_HEADS, HF_DH,
                               perm) for perm in ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3])]
        scores = b.node("Div", [b.node("MatMul", [q, k]), b.scalar(math.sqrt(HF_DH))])
        ctx = b.node("MatMul", [b.node("Softmax", [scores], axis=-1), v])
        ctx = b.node("Reshape", [b.node("Transpose", [ctx], perm=[0, 2, 1, 3]),
                                 b.ints([0, 0, -1])])
        h = b.node("Add", [h, rows_linear(b, ctx, n, s, HF_E, ATT_MODEL)])
        f = gelu_erf(b, rows_linear(b, norm(b, h, ATT_MODEL), n, s, ATT_MODEL, 4 * ATT_MODEL))
        h = b.node("Add", [rows_linear(b, f, n, s, 4 * ATT_MODEL, ATT_MODEL), h])
    b.node("Identity", [norm(b, h, ATT_MODEL)], name="hidden")
    return b.model("vit_layers", [tensor("input", ["N", "S", ATT_MODEL])],
                   [tensor("hidden_out", ["N", "S", ATT_MODEL])], 17,
                   "Two pre-LN ViT encoder layers with the dynamo exporter's Linear (Reshape, "
                   "Gemm, Reshape; residuals after the Reshape) and the erf Gelu expanded, "
                   "opset 17, symbolic batch and sequence.")


def convnext_blocks():
    """ConvNeXt as torchvision exports it: a 4x4 stride-4 stem, LayerNorm over the channels between
    Transposes to channels-last and back, blocks of depthwise 7x7 convolution, Transpose, LayerNorm,
    Linear + erf Gelu, Linear, Transpose back, the layer scale (Mul by a (C, 1, 1) constant) and
    the residual Add; a downsampling LayerNorm + 2x2 stride-2 convolution; channels 32 and 64
    (whole groups of 8: NHWC8 is the channels-last tensor) and a last block of 20 (not), and the
    stem's channels-last LayerNorm output, transposed back, as a second output."""
    b = Builder(17)
    r = b.rng

    def channels_norm(x, c):
        gamma = b.const((1.0 + 0.1 * r.standard_normal(c)).astype(np.float32), "ln_g")
        beta = b.const((0.1 * r.standard_normal(c)).astype(np.float32), "ln_b")
        return b.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-6)

    def block(x, c):
        y = b.conv(x, c, c, 7, group=c, gain=1.0)
        y = channels_norm(b.node("Transpose", [y], perm=[0, 2, 3, 1]), c)
        y = gelu_erf(b, b.linear(y, c, 4 * c, "pw1"))
        y = b.node("Transpose", [b.linear(y, 4 * c, c, "pw2")], perm=[0, 3, 1, 2])
        scale = b.const((0.5 + 0.1 * r.standard_normal((c, 1, 1))).astype(np.float32), "gamma")
        return b.node("Add", [b.node("Mul", [y, scale]), x])

    def norm_nchw(x, c, name=None):
        y = channels_norm(b.node("Transpose", [x], perm=[0, 2, 3, 1]), c)
        return b.node("Transpose", [y], perm=[0, 3, 1, 2], name=name)

    stem = norm_nchw(b.conv("input", 3, 32, 4, stride=4, pad=0), 32, name="stem")
    x = block(block(stem, 32), 32)
    x = b.conv(norm_nchw(x, 32), 32, 64, 2, stride=2, pad=0)
    x = block(x, 64)
    x = block(b.conv(norm_nchw(x, 64), 64, 20, 1, pad=0), 20)
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.node("Gemm", [x, b.weight((10, 20), 20, 1.0), b.bias(10)], name="logits", transB=1)
    return b.model("convnext_blocks", [tensor("input", ["N", 3, 32, 32])],
                   [tensor("logits_out", ["N", 10]), tensor("stem_out", ["N", 32, 8, 8])], 17,
                   "ConvNeXt blocks as torchvision exports them (Transposes around the "
                   "channels-last LayerNorm and Linears), channels 32, 64 and 20, opset 17.")


def split_blocks():
    """Channel splits and slices between convolutions, as CSP nets, Res2Net and GhostNet export
    them: Split (opset 13, sizes 16/20/12, and Res2Net's four 6-channel chunks added in turn),
    Slice of the channels GhostNet keeps (20 of 40), a spatial Slice with steps and one reversed
    along W; a channel Slice also as a second output."""
    b = Builder(18)
    x = b.node("Relu", [b.conv("input", 3, 48, 3)])
    parts = b.node("Split", [x, b.ints([16, 20, 12], "split")], outputs=3, axis=1)
    parts = [b.node("Relu", [b.conv(p, c, c, 3, group=g)])
             for p, c, g in zip(parts, (16, 20, 12), (1, 20, 1))]
    x = b.node("Concat", parts, axis=1)
    chunks = b.node("Split", [b.conv(x, 48, 24, 1, pad=0), b.ints([6, 6, 6, 6], "split")],
                    outputs=4, axis=1)
    y, outs = None, [chunks[0]]
    for c in chunks[1:]:
        y = b.node("Relu", [b.conv(c if y is None else b.node("Add", [c, y]), 6, 6, 3)])
        outs.append(y)
    x = b.node("Concat", outs, axis=1)
    ghost = b.node("Concat", [x, b.node("Relu", [b.conv(x, 24, 16, 3, group=8)])], axis=1)
    x = b.node("Slice", [ghost, b.ints([0]), b.ints([20]), b.ints([1])])
    x = b.node("Slice", [b.conv(x, 20, 32, 3), b.ints([1, 0]), b.ints([32, 32]), b.ints([2, 3]),
                         b.ints([1, 2])])
    x = b.node("Slice", [x, b.ints([-1]), b.ints([-1000]), b.ints([3]), b.ints([-1])])
    b.node("Slice", [x, b.ints([4]), b.ints([17]), b.ints([1])], name="channels")
    x = b.node("Flatten", [b.node("GlobalAveragePool", [b.conv(x, 32, 16, 3)])], axis=1)
    b.node("Gemm", [x, b.weight((10, 16), 16, 1.0), b.bias(10)], name="logits", transB=1)
    return b.model("split_blocks", [tensor("input", ["N", 3, 32, 32])],
                   [tensor("logits_out", ["N", 10]), tensor("channels_out", ["N", 13, 31, 16])],
                   13, "Channel Splits and Slices between convolutions (CSP, Res2Net, GhostNet) "
                   "and spatial Slices with steps, opset 13.")


def segmentation_decoder():
    b = Builder(6)
    e1 = b.node("Relu", [b.bn(b.conv("input", 3, 16, 3), 16)])               # 16 x 64 x 64
    e2 = b.node("Relu", [b.conv(e1, 16, 32, 3, stride=2)])                   # 32 x 32 x 32
    e3 = b.node("Relu", [b.conv(e2, 32, 64, 3, stride=2)])                   # 64 x 16 x 16
    e4 = b.node("Relu", [b.conv(e3, 64, 64, 3, dilation=2)])                 # atrous
    empty = b.const(np.zeros(0, dtype=np.float32), "empty")
    up = b.node("Resize", [e4, empty, b.const(np.array([1, 1, 2, 2], np.float32), "scales")],
                mode="linear", coordinate_transformation_mode="half_pixel")
    d3 = b.node("Relu", [b.conv(b.node("Concat", [up, e2], axis=1), 96, 32, 3)])
    w = b.weight((32, 16, 4, 4), 32 * 4, 2.0, "deconv_w")
    up2 = b.node("ConvTranspose", [d3, w, b.bias(16)], kernel_shape=[4, 4], strides=[2, 2],
                 pads=[1, 1, 1, 1])
    d2 = b.node("Relu", [b.conv(b.node("Concat", [up2, e1], axis=1), 32, 16, 3)])
    aux = b.conv(e3, 64, 1, 1, gain=1.0)
    aux = b.node("Resize", [aux, empty, empty, b.ints([1, 1, 64, 64], "sizes")],
                 mode="nearest", coordinate_transformation_mode="asymmetric",
                 nearest_mode="floor")
    logits = b.node("Add", [b.conv(d2, 16, 1, 1, gain=1.0), aux])
    b.node("Sigmoid", [logits], name="mask")
    return b.model("segmentation_decoder", [tensor("input", [1, 3, 64, 64])],
                   [tensor("mask_out", [1, 1, 64, 64])], 18,
                   "U-Net-like segmentation: strided/dilated encoder, Resize and ConvTranspose "
                   "decoder with skip connections, opset 18.")


def dense_concat():
    b = Builder(7)
    widths = [2, 3] * 10                                                       # 50 channels
    feats = [b.node("Relu", [b.conv("input", 4, w, 3)]) for w in widths]
    cat = b.node("Concat", feats, axis=1)                                     # 20 inputs
    parts = b.node("Split", [cat, b.ints(widths, "split")], outputs=20, axis=1)
    x = b.node("Concat", parts[::-1], axis=1)
    x = b.conv(x, 50, 16, 1, gain=1.0)
    x = b.node("DepthToSpace", [x], blocksize=2, mode="CRD")                  # 4 x 16 x 16
    x = b.node("Tile", [x, b.ints([1, 1, 1, 2], "repeats")])                   # 4 x 16 x 32
    b.node("Trilu", [x, b.ints(-3, "k")], name="tri", upper=1)
    return b.model("dense_concat", [tensor("input", ["N", 4, 8, 8])],
                   [tensor("tri_out", ["N", 4, 16, 32])], 14,
                   "DenseNet-style Concat of 20 feature maps and Split into 20, then "
                   "DepthToSpace (CRD), Tile and Trilu, opset 14, symbolic batch.")


def crnn():
    """Text-line recogniser in the CRNN style: a conv feature extractor whose columns become a
    sequence for a bidirectional LSTM, then per-step class logits."""
    b = Builder(8)
    x = b.node("MaxPool", [b.node("Relu", [b.conv("image", 1, 16, 3)])],
               kernel_shape=[2, 2], strides=[2, 2])                         # 16 x 16 x 32
    x = b.node("MaxPool", [b.node("Relu", [b.bn(b.conv(x, 16, 32, 3, bias=False), 32)])],
               kernel_shape=[2, 2], strides=[2, 2])                         # 32 x 8 x 16
    seq = b.node("Transpose", [b.node("Reshape", [x, b.ints([0, 256, 16])])],
                 perm=[2, 0, 1])                                            # 16 x N x 256
    hidden = 32
    w = b.weight((2, 4 * hidden, 256), 256, 1.0, "lstm_w")
    r = b.weight((2, 4 * hidden, hidden), hidden, 1.0, "lstm_r")
    bias = b.const((b.rng.standard_normal((2, 8 * hidden)) * 0.1).astype(np.float32), "lstm_b")
    y, _, _ = b.node("LSTM", [seq, w, r, bias], outputs=3, hidden_size=hidden,
                     direction="bidirectional")                             # 16 x 2 x N x 32
    y = b.node("Reshape", [b.node("Transpose", [y], perm=[0, 2, 1, 3]),
                           b.ints([0, 0, 2 * hidden])])                     # 16 x N x 64
    b.node("Add", [b.node("MatMul", [y, b.weight((2 * hidden, 11), 2 * hidden, 1.0, "cls_w")]),
                   b.bias(11, "cls_b")], name="logits")
    return b.model("crnn", [tensor("image", ["N", 1, 32, 64])],
                   [tensor("logits_out", [16, "N", 11])], 17,
                   "CRNN-style recogniser: conv features read column by column by a "
                   "bidirectional LSTM, opset 17, symbolic batch.")


def resnext_block():
    """ResNeXt-style bottlenecks: 3x3 convolutions in 32 groups of 4 channels (grouped
    convolution whose groups are not multiples of 8), with BatchNormalization and residuals."""
    b = Builder(7)
    x = b.node("Relu", [b.bn(b.conv("input", 3, 64, 3, stride=2, bias=False), 64)])
    for cout, stride in ((128, 1), (128, 2)):
        cin = 64 if stride == 1 else 128
        y = b.node("Relu", [b.bn(b.conv(x, cin, 128, 1, bias=False), 128)])
        y = b.node("Relu", [b.bn(b.conv(y, 128, 128, 3, stride=stride, group=32, bias=False),
                                 128)])
        y = b.bn(b.conv(y, 128, cout, 1, bias=False, gain=1.0), cout)
        if stride != 1 or cin != cout:
            x = b.bn(b.conv(x, cin, cout, 1, stride=stride, pad=0, bias=False, gain=1.0), cout)
        x = b.node("Relu", [b.node("Add", [y, x])])
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    b.node("Gemm", [x, b.weight((10, 128), 128, 1.0), b.bias(10)], name="logits", transB=1)
    return b.model("resnext_block", [tensor("input", ["N", 3, 32, 32])],
                   [tensor("logits_out", ["N", 10])], 13,
                   "ResNeXt-style blocks (grouped 3x3 convolutions, 32 groups x 4 channels), "
                   "opset 13.")


def grouped_norms():
    """Grouped convolutions of 6 channels per group (ShuffleNet/FastViT-like group counts) and a
    1x1 convolution in 3 groups, with the per-image normalisations: InstanceNormalization,
    GroupNormalization (per-channel scale, opset 21), LRN, a 3-D BatchNormalization (LeViT) and
    NF-Net weight standardisation (training-mode BatchNormalization on constant weights)."""
    b = Builder(8)
    r = b.rng
    x = b.conv("input", 3, 48, 3, bias=False)
    x = b.node("InstanceNormalization", [x, b.const(r.uniform(0.5, 1.5, 48).astype(np.float32)),
                                         b.const((r.standard_normal(48) * 0.1).astype(np.float32))],
               epsilon=1e-5)
    x = b.node("Relu", [x])
    x = b.node("Relu", [b.conv(x, 48, 48, 3, group=8)])                 # 6 channels per group
    x = b.conv(x, 48, 24, 1, group=3)                                    # 16 -> 8 per group
    x = b.node("GroupNormalization",
               [x, b.const(r.uniform(0.5, 1.5, 24).astype(np.float32)),
                b.const((r.standard_normal(24) * 0.1).astype(np.float32))],
               num_groups=4, epsilon=1e-5)
    x = b.node("LRN", [b.node("Relu", [x])], size=5, alpha=1e-3, beta=0.75, bias=1.0)
    # weight standardisation: the raw (48, 12, 3, 3) weights, statistics per output channel
    # through BatchNormalization in training mode on their (1, 48, 108) view
    raw = b.weight((1, 48, 12 * 9), 12 * 9, 2.0, "ws_raw")
    ones, zeros = np.ones(48, np.float32), np.zeros(48, np.float32)
    std = b.node("BatchNormalization", [raw, b.const(ones), b.const(zeros), b.const(zeros),
                                        b.const(ones)], outputs=3, epsilon=1e-5,
                 training_mode=1)
    w = b.node("Mul", [b.node("Reshape", [std[0], b.ints([48, 12, 3, 3])]),
                       b.scalar(math.sqrt(2.0 / (12 * 9)), "ws_gain")])
    x = b.node("Relu", [b.node("Conv", [x, w, b.bias(48)], kernel_shape=[3, 3], pads=[1] * 4,
                               group=2)])                               # 12 per group
    x = b.node("Reshape", [x, b.ints([0, 48, -1])])                      # (N, 48, H*W)
    x = b.bn(x, 48)
    b.node("ReduceMean", [x, b.ints([2], "axes")], name="features", keepdims=0)
    return b.model("grouped_norms", [tensor("input", ["N", 3, 16, 16])],
                   [tensor("features_out", ["N", 48])], 21,
                   "Grouped convolutions of 6 and 8 channels per group, InstanceNormalization, "
                   "GroupNormalization, LRN, 3-D BatchNormalization and weight standardisation, "
                   "opset 21.")


def conv1d(b, x, cin, cout, k, stride=1, pad=0, group=1, bias=True, gain=2.0):
    w = b.weight((cout, cin // group, k), cin // group * k, gain, "conv1d_w")
    inputs = [x, w] + ([b.bias(cout, "conv1d_b")] if bias else [])
    return b.node("Conv", inputs, kernel_shape=[k], strides=[stride], pads=[pad, pad],
                  group=group)


def audio_frontend():
    """A wav2vec2-style audio encoder front: strided 1-D convolutions on the raw signal
    (InstanceNormalization after the first, as wav2vec2's per-channel GroupNorm exports), a
    LayerNorm over the frames, the grouped positional 1-D convolution with its trailing frame
    cut, 1-D depthwise, small-group and transposed convolutions; and RoBERTa's position ids from
    the padding mask in int32 (Cast, CumSum, Mul, Sub, Div truncating the negative values of the
    padded frames toward zero, Add) gathering a position embedding."""
    b = Builder(9)
    r = b.rng
    frames, width = 19, 32
    x = conv1d(b, "audio", 1, 16, 10, stride=5, bias=False)                # 16 x 79
    x = b.node("InstanceNormalization", [x, b.const(r.uniform(0.5, 1.5, 16).astype(np.float32)),
                                         b.const((r.standard_normal(16) * 0.1)
                                                 .astype(np.float32))], epsilon=1e-5)
    x = gelu_erf(b, x)
    x = gelu_erf(b, conv1d(b, x, 16, width, 3, stride=2, bias=False))     # 32 x 39
    x = gelu_erf(b, conv1d(b, x, width, width, 2, stride=2, bias=False))  # 32 x 19
    gamma = b.const((1.0 + 0.1 * r.standard_normal(width)).astype(np.float32), "ln_g")
    beta = b.const((0.1 * r.standard_normal(width)).astype(np.float32), "ln_b")
    h = b.node("LayerNormalization", [b.node("Transpose", [x], perm=[0, 2, 1]), gamma, beta],
               axis=-1, epsilon=1e-5)                                      # N x 19 x 32
    # positional convolution: 4 groups of 8 channels, even kernel, the extra frame sliced off
    pos = conv1d(b, b.node("Transpose", [h], perm=[0, 2, 1]), width, width, 8, pad=4, group=4,
                 gain=1.0)                                                 # 32 x 20
    pos = gelu_erf(b, b.node("Slice", [pos, b.ints([0]), b.ints([frames]), b.ints([2])]))
    y = b.node("Add", [h, b.node("Transpose", [pos], perm=[0, 2, 1])])
    # position ids (int32) from the frame mask, as RoBERTa's create_position_ids_from_input_ids
    keep = b.node("Cast", [b.node("Not", [b.node("Equal", [
        "mask", b.const(np.array(0, np.int64), "pad")])])], to=TensorProto.INT32)
    ids = b.node("Mul", [b.node("CumSum", [keep, b.const(np.array(1, np.int32), "axis")]), keep])
    # padded frames: (0 * 3 - 1) / 2 truncates to 0 (floor would give -1)
    ids = b.node("Div", [b.node("Sub", [b.node("Mul", [ids, b.const(np.array(3, np.int32))]),
                                        b.const(np.array(1, np.int32))]),
                         b.const(np.array(2, np.int32))])
    ids = b.node("Cast", [b.node("Add", [ids, b.const(np.array(1, np.int32))])],
                 to=TensorProto.INT64)                                     # 1..29
    table = b.const((r.standard_normal((32, width)) * 0.5).astype(np.float32), "pos_emb")
    y = b.node("Add", [y, b.node("Gather", [table, ids], axis=0)], name="features")
    # 1-D depthwise, small groups (2 channels each: merged) and a transposed convolution
    z = b.node("Transpose", [y], perm=[0, 2, 1])
    z = b.node("Relu", [conv1d(b, z, width, width, 3, pad=1, group=width)])
    z = b.node("Relu", [conv1d(b, z, width, width, 3, pad=1, group=16)])
    w = b.weight((width, 16, 4), width * 4, 1.0, "convt1d_w")
    b.node("ConvTranspose", [z, w, b.bias(16)], name="upsampled", kernel_shape=[4],
           strides=[2], pads=[1, 1])                                       # 16 x 38
    return b.model("audio_frontend", [tensor("audio", ["N", 1, 400]),
                                      tensor("mask", ["N", frames], TensorProto.INT64)],
                   [tensor("features_out", ["N", frames, width]),
                    tensor("upsampled_out", ["N", 16, 2 * frames])], 17,
                   "wav2vec2-style 1-D convolution stack (strided, grouped, depthwise, "
                   "transposed) and RoBERTa-style int32 position ids, opset 17.")


# LLaMA-style decoder layers with ONNX's own ops (opset 23): RMSNormalization, RotaryEmbedding
# and Attention, as newer exporters write them.
LLAMA_E, LLAMA_HEADS, LLAMA_KV_HEADS, LLAMA_FF, LLAMA_POSITIONS = 64, 4, 2, 128, 64


def rope_caches(b, d_head):
    """cos and sin of position p times LLaMA's frequencies 10000^(-2i/d), (positions, d/2)."""
    freqs = 10000.0 ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)
    angles = np.arange(LLAMA_POSITIONS, dtype=np.float64)[:, None] * freqs[None, :]
    return (b.const(np.cos(angles).astype(np.float32), "rope_cos"),
            b.const(np.sin(angles).astype(np.float32), "rope_sin"))


def rms_norm(b, x):
    scale = b.const((1.0 + 0.1 * b.rng.standard_normal(LLAMA_E)).astype(np.float32), "rms_w")
    return b.node("RMSNormalization", [x, scale], axis=-1, epsilon=1e-6)


def llama_layer(b, x, caches, positions, keep, four_d, q_heads, kv_heads):
    """Pre-norm attention (grouped-query where kv_heads < q_heads, causal, the padding as a bool
    mask) and a SwiGLU MLP. Three-D: Q, K and V stay (N, S, heads * D); four-D: split into heads
    first."""
    cos, sin = caches
    d_head = LLAMA_E // q_heads
    n = rms_norm(b, x)
    proj = {}
    for name, heads in (("q", q_heads), ("k", kv_heads), ("v", kv_heads)):
        w = b.weight((LLAMA_E, heads * d_head), LLAMA_E, 1.0, f"{name}_w")
        t = b.node("MatMul", [n, w])
        if four_d:
            t = split_heads(b, t, heads, d_head, [0, 2, 1, 3])
        proj[name] = t
    rope = {} if four_d else {"num_heads": q_heads}
    q = b.node("RotaryEmbedding", [proj["q"], cos, sin, positions], **rope)
    if not four_d:
        rope["num_heads"] = kv_heads
    k = b.node("RotaryEmbedding", [proj["k"], cos, sin, positions], **rope)
    heads = {} if four_d else {"q_num_heads": q_heads, "kv_num_heads": kv_heads}
    ctx = b.node("Attention", [q, k, proj["v"], keep], is_causal=1, **heads)
    if four_d:
        ctx = b.node("Reshape", [b.node("Transpose", [ctx], perm=[0, 2, 1, 3]),
                                 b.ints([0, 0, -1])])
    wo = b.weight((LLAMA_E, LLAMA_E), LLAMA_E, 1.0, "o_w")
    h = b.node("Add", [x, b.node("MatMul", [ctx, wo])])
    n = rms_norm(b, h)
    gate = b.node("MatMul", [n, b.weight((LLAMA_E, LLAMA_FF), LLAMA_E, 1.0, "gate_w")])
    up = b.node("MatMul", [n, b.weight((LLAMA_E, LLAMA_FF), LLAMA_E, 1.0, "up_w")])
    act = b.node("Mul", [b.node("Mul", [gate, b.node("Sigmoid", [gate])]), up])
    down = b.weight((LLAMA_FF, LLAMA_E), LLAMA_FF, 1.0, "down_w")
    return b.node("Add", [h, b.node("MatMul", [act, down])])


def llama_layers(name, q_heads, kv_heads, doc):
    b = Builder(29)
    n, s = dims_of(b, "input", [0, 1])
    # position ids 0..S-1 for every sequence; the padding mask (N, S) as a bool (N, 1, S, S)
    seq = b.node("Squeeze", [s, b.ints([0], "axes")])
    pos = b.node("Range", [b.const(np.array(0, np.int64), "zero"), seq,
                           b.const(np.array(1, np.int64), "one")])
    positions = b.node("Expand", [b.node("Unsqueeze", [pos, b.ints([0], "axes")]),
                                  b.node("Concat", [n, s], axis=0)])
    # (onnxruntime wants the mask's query dim spelled out: Expanded to (N, 1, S, S))
    keep = b.node("Unsqueeze", [b.node("Cast", ["mask"], to=TensorProto.BOOL),
                                b.ints([1, 2], "axes")])
    keep = b.node("Expand", [keep, b.node("Concat", [n, b.ints([1]), s, s], axis=0)])
    caches = rope_caches(b, LLAMA_E // q_heads)
    h = llama_layer(b, "input", caches, positions, keep, False, q_heads, kv_heads)
    h = llama_layer(b, h, caches, positions, keep, True, q_heads, kv_heads)
    b.node("Identity", [rms_norm(b, h)], name="hidden")
    return b.model(name,
                   [tensor("input", ["N", "S", LLAMA_E]),
                    tensor("mask", ["N", "S"], TensorProto.INT64)],
                   [tensor("hidden_out", ["N", "S", LLAMA_E])], 23, doc)


def llama_block():
    return llama_layers("llama_block", LLAMA_HEADS, LLAMA_KV_HEADS,
                        "Two LLaMA-style decoder layers with ONNX's own RMSNormalization, "
                        "RotaryEmbedding and Attention (grouped-query, causal, a bool padding "
                        "mask; 3-D Q/K/V in the first layer, 4-D in the second), opset 23, "
                        "symbolic batch and sequence.")


def llama_mha_block():
    """llama_block with as many K/V heads as query heads, of size 32: what the GPU's fused
    attention step takes, so the whole block (RMSNormalization, RotaryEmbedding) runs there."""
    return llama_layers("llama_mha_block", 2, 2,
                        "llama_block's two decoder layers with multi-head attention (2 heads of "
                        "32 for Q, K and V), which the GPU's fused attention step takes; opset "
                        "23, symbolic batch and sequence.")


def onnx_attention_block():
    """Two self-attention layers through ONNX's own Attention op with head size 64 (what the fused
    GPU step takes): 3-D Q/K/V, is_causal and the padding as a bool mask; then 4-D heads with the
    padding as an additive -10000 (within fp16's range), no causal."""
    b = Builder(31)
    e, heads = 256, 4
    n, s = dims_of(b, "input", [0, 1])
    full = b.node("Concat", [n, b.ints([1]), s, s], axis=0)  # onnxruntime wants (N, 1, S, S)
    pad = b.node("Unsqueeze", ["mask", b.ints([1, 2], "axes")])
    keep = b.node("Expand", [b.node("Cast", [pad], to=TensorProto.BOOL), full])
    dropped = b.node("Sub", [b.scalar(1.0), b.node("Cast", [pad], to=TensorProto.FLOAT)])
    bias = b.node("Mul", [dropped, b.scalar(-10000.0)])
    bias = b.node("Expand", [bias, full])
    h = "input"
    for four_d, mask in ((False, keep), (True, bias)):
        proj = []
        for name in "qkv":
            t = b.node("MatMul", [h, b.weight((e, e), e, 1.0, f"{name}_w")])
            proj.append(split_heads(b, t, heads, e // heads, [0, 2, 1, 3]) if four_d else t)
        attrs = {} if four_d else {"q_num_heads": heads, "kv_num_heads": heads, "is_causal": 1}
        ctx = b.node("Attention", proj + [mask], **attrs)
        if four_d:
            ctx = b.node("Reshape", [b.node("Transpose", [ctx], perm=[0, 2, 1, 3]),
                                     b.ints([0, 0, -1])])
        h = b.node("Add", [h, b.node("MatMul", [ctx, b.weight((e, e), e, 1.0, "o_w")])])
    b.node("Identity", [h], name="hidden")
    return b.model("onnx_attention_block",
                   [tensor("input", ["N", "S", e]), tensor("mask", ["N", "S"], TensorProto.INT64)],
                   [tensor("hidden_out", ["N", "S", e])], 23,
                   "Two self-attention layers through ONNX's Attention op (head size 64; 3-D, "
                   "causal, bool padding mask; 4-D, additive padding mask), opset 23, symbolic "
                   "batch and sequence.")


MODELS = {
    "small_cnn": small_cnn,
    "resnet_mini": resnet_mini,
    "mobilenetv2_mini": mobilenetv2_mini,
    "mlp": mlp,
    "transformer_block": transformer_block,
    "attention_block": attention_block,
    "packed_attention_block": packed_attention_block,
    "mixed_attention_block": mixed_attention_block,
    "bert_block": bert_block,
    "gpt2_block": gpt2_block,
    "gpt2_layers": gpt2_layers,
    "vit_layers": vit_layers,
    "segmentation_decoder": segmentation_decoder,
    "dense_concat": dense_concat,
    "crnn": crnn,
    "resnext_block": resnext_block,
    "grouped_norms": grouped_norms,
    "audio_frontend": audio_frontend,
    "convnext_blocks": convnext_blocks,
    "split_blocks": split_blocks,
    "llama_block": llama_block,
    "llama_mha_block": llama_mha_block,
    "onnx_attention_block": onnx_attention_block,
}


def write_all(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, make in MODELS.items():
        model = make()
        onnx.save_model(model, os.path.join(out_dir, f"{name}.onnx"))
        if name == "resnet_mini":
            # same weights again, stored beside the model, so the loader's external-data path
            # is checked against the identical inline model
            ext = onnx.ModelProto()
            ext.CopyFrom(model)
            data = "resnet_mini_external.onnx.data"
            if os.path.exists(os.path.join(out_dir, data)):
                os.remove(os.path.join(out_dir, data))  # save_model appends to an existing file
            onnx.save_model(ext, os.path.join(out_dir, "resnet_mini_external.onnx"),
                            save_as_external_data=True, all_tensors_to_one_file=True,
                            location=data, size_threshold=256)
        print(f"wrote {name}.onnx")


# demo ----------------------------------------------------------------------------------------
def demo_cnn():
    b = Builder(7)
    x = b.node("Relu", [b.bn(b.conv("image", 3, 8, 3, stride=2), 8)])       # 8 x 32 x 32
    x = b.node("Relu", [b.conv(x, 8, 16, 3, stride=2)])                       # 16 x 16 x 16
    x = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])           # 16 x 8 x 8
    x = b.node("Relu", [b.conv(x, 16, 32, 3)])
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    x = b.node("Gemm", [x, b.weight((10, 32), 32, 4.0), b.bias(10)], transB=1)
    b.node("Softmax", [x], name="probabilities", axis=1)
    return b.model("tiny_cnn", [tensor("image", [1, 3, 64, 64])],
                   [tensor("probabilities_out", [1, 10])], 13,
                   "Tiny demo classifier with fixed random weights (10 classes).")


def demo_image():
    """A synthetic 64x64 RGB pattern (stripes, a disc, a gradient), normalised like ImageNet."""
    yy, xx = np.mgrid[0:64, 0:64].astype(np.float32) / 63.0
    r = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * xx)
    g = ((xx - 0.6) ** 2 + (yy - 0.4) ** 2 < 0.08).astype(np.float32)
    bl = yy
    img = np.stack([r, g, bl])
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    return ((img - mean) / std)[None].astype(np.float32)


def write_demo(out_dir):
    # onnxruntime, not onnx.reference: the latter runs BatchNormalization-9..14 in training
    # mode whenever momentum has its default, which is wrong for inference
    import onnxruntime

    os.makedirs(out_dir, exist_ok=True)
    model = demo_cnn()
    image = demo_image()
    onnx.save_model(model, os.path.join(out_dir, "tiny_cnn.onnx"))
    np.save(os.path.join(out_dir, "input.npy"), image)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    (probs,) = session.run(None, {"image": image})
    np.save(os.path.join(out_dir, "expected_output.npy"), probs.astype(np.float32))
    print(f"wrote tiny_cnn.onnx, input.npy, expected_output.npy (top class {int(probs.argmax())})")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--demo", action="store_true", help="write the demo assets instead")
    p.add_argument("--resnet50", action="store_true",
                   help="write only resnet50.onnx (about 100 MB)")
    args = p.parse_args(argv)
    if args.demo:
        write_demo(args.out_dir)
    elif args.resnet50:
        os.makedirs(args.out_dir, exist_ok=True)
        onnx.save_model(resnet50(), os.path.join(args.out_dir, "resnet50.onnx"))
    else:
        write_all(args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
