#!/usr/bin/env python3
"""The malformed corpus (docs/robustness.md): hostile and broken models, external data, input
files and command lines, each with the exact status and message it must give.

usage: make_corpus.py OUT_DIR

Writes OUT_DIR/<case files> and OUT_DIR/cases.tsv, one case a line:
    name  kind  file-or-args  status  message-substring  option
kind: model (tci_engine_create_from_file), memory (tci_engine_create_from_memory with option as
base_dir), input (tci_tensor_read_file), cli (the tcinfer command; args separated by '|', {dir}
is OUT_DIR; status is the exit code). option of model cases: limit=value for a
tci_engine_options limit. FIFOs and symlinks are made here, so the corpus is generated at test
time (tests/malformed/CMakeLists.txt) rather than stored.
"""
import os
import struct
import sys

import numpy as np
from onnx import TensorProto, helper

OUT = None
CASES = []


def case(name, kind, target, status, message, option=""):
    assert "\t" not in message and name not in {c[0] for c in CASES}, name
    CASES.append((name, kind, target, status, message, option))


def save(name, data):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.SerializeToString())
    return name


def vi(name, dims=(1, 4), dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, list(dims) if dims is not None else None)


def model(nodes, inputs=None, outputs=None, inits=(), opset=17, domain_opsets=(), **kw):
    inputs = [vi("x")] if inputs is None else inputs
    outputs = [vi("y")] if outputs is None else outputs
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), **kw)
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domain_opsets]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    return m


def raw_tensor(name, dtype, dims, raw):
    """A TensorProto whose raw_data need not match its dims (make_tensor checks that)."""
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def relu(i="x", o="y", **kw):
    return helper.make_node("Relu", [i], [o], **kw)


def mcase(name, m, status, message, option=""):
    case(name, "model", save(name + ".onnx", m), status, message, option)


# ---- protobuf wire helpers, for files onnx's Python API will not write ----

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, payload):  # length-delimited
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vfield(num, v):
    return varint(num << 3) + varint(v)


def model_bytes(graph):
    return vfield(1, 8) + field(8, vfield(2, 17)) + field(7, graph)


def parse_cases():
    case("empty_file", "model", save("empty.onnx", b""), "TCI_ERR_INVALID_MODEL", "the model has no graph")
    case("garbage", "model", save("garbage.onnx", bytes(range(7, 250, 3)) * 4), "TCI_ERR_PARSE",
         "not a valid ONNX model")
    good = model([relu()]).SerializeToString()
    case("truncated", "model", save("truncated.onnx", good[: len(good) - 7]), "TCI_ERR_PARSE",
         "not a valid ONNX model")
    case("group_wire_type", "model", save("group.onnx", vfield(1, 8) + varint(7 << 3 | 3)),
         "TCI_ERR_PARSE", "not a valid ONNX model")
    case("length_past_end", "model", save("length.onnx", vfield(1, 8) + varint(7 << 3 | 2) + varint(1000) + b"\0" * 10),
         "TCI_ERR_PARSE", "not a valid ONNX model")
    case("field_zero", "model", save("field_zero.onnx", b"\x02\x00"), "TCI_ERR_PARSE", "not a valid ONNX model")
    # If branches nested 3,000 deep (~100 KB): protobuf-c's recursive unpack overflowed the stack
    inner = b""
    for _ in range(3000):
        attr = field(1, b"then_branch") + vfield(20, 5) + field(6, inner)
        inner = field(1, field(4, b"If") + field(5, attr))
    case("deep_if_subgraphs", "model", save("deep_if.onnx", model_bytes(inner)), "TCI_ERR_UNSUPPORTED",
         "nests messages more than 64 deep")
    # a graph input's type: sequence of sequence of ... 20,000 deep
    t = field(1, vfield(1, 1))
    for _ in range(20000):
        t = field(4, field(1, t))
    case("deep_nested_types", "model", save("deep_types.onnx", model_bytes(field(11, field(1, b"x") + field(2, t)))),
         "TCI_ERR_UNSUPPORTED", "nests messages more than 64 deep")
    # 2^20 + 1 empty nodes (2 MB): refused before protobuf-c allocates a struct per node
    case("too_many_nodes", "model", save("many_nodes.onnx", model_bytes(b"\x0a\x00" * ((1 << 20) + 1))),
         "TCI_ERR_UNSUPPORTED", "more than 1048576 nodes (max_nodes)")
    case("nodes_over_limit", "model", save("nodes_limit.onnx", model_bytes(b"\x0a\x00" * 11)),
         "TCI_ERR_UNSUPPORTED", "more than 10 nodes (max_nodes)", "max_nodes=10")
    case("model_over_size_limit", "model", "truncated.onnx", "TCI_ERR_UNSUPPORTED",
         "over the limit of 16 (max_model_bytes)", "max_model_bytes=16")
    case("parse_budget", "model", save("parse_budget.onnx", model([relu()], doc_string="d" * 4096)),
         "TCI_ERR_UNSUPPORTED", "(max_parse_bytes)", "max_parse_bytes=1024")
    case("nesting_limit_option", "model", save("nest4.onnx", model([relu()])), "TCI_ERR_UNSUPPORTED",
         "nests messages more than 3 deep", "max_nesting_depth=3")


def tensor_cases():
    def init(name, t, status, msg, option=""):
        mcase(name, model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[t]), status, msg, option)
    t = raw_tensor("w", TensorProto.FLOAT, [1, 4], b"\0" * 12)
    init("raw_data_short", t, "TCI_ERR_INVALID_MODEL", "raw_data has 12 bytes, expected 16")
    t = helper.make_tensor("w", TensorProto.FLOAT, [1, 2], [1.0, 2.0])
    t.dims[1] = 4
    init("float_data_count", t,
         "TCI_ERR_INVALID_MODEL", "float_data has 2 values, expected 4")
    t = helper.make_tensor("w", TensorProto.FLOAT, [1, 4], [1.0] * 4)
    t.dims[1] = -4
    init("negative_dim", t, "TCI_ERR_INVALID_MODEL", "has negative dim -4 at axis 1")
    init("rank9", raw_tensor("w", TensorProto.FLOAT, [1] * 9, b"\0" * 4), "TCI_ERR_UNSUPPORTED",
         "has rank 9; at most 8")
    t = raw_tensor("w", TensorProto.FLOAT, [1 << 40, 1 << 40], b"")
    init("dims_overflow", t, "TCI_ERR_INVALID_MODEL", "element count of shape overflows int64")
    t = raw_tensor("w", TensorProto.FLOAT, [1 << 20, 1 << 20], b"")
    init("elements_over_limit", t, "TCI_ERR_UNSUPPORTED", "over the limit of 2147483647 (max_tensor_elements)")
    init("constant_bytes_limit", helper.make_tensor("w", TensorProto.FLOAT, [1, 4], [1.0] * 4),
         "TCI_ERR_UNSUPPORTED", "(max_constant_bytes", "max_constant_bytes=8")
    init("string_initializer", helper.make_tensor("w", TensorProto.STRING, [1], [b"a"]),
         "TCI_ERR_UNSUPPORTED", "has data type string, which is not supported")
    t = helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])
    t.ClearField("data_type")
    init("no_data_type", t, "TCI_ERR_INVALID_MODEL", "initializer 'w' has no data type")
    t = TensorProto(name="w", data_type=TensorProto.INT8, dims=[1], int32_data=[300])
    init("int8_out_of_range", t,
         "TCI_ERR_INVALID_MODEL", "int32_data value 300 is out of range for int8")
    t = helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])
    t.segment.begin = 0
    t.segment.end = 1
    init("segmented", t, "TCI_ERR_UNSUPPORTED", "is segmented")
    t = helper.make_tensor("", TensorProto.FLOAT, [1], [1.0])
    mcase("unnamed_initializer", model([relu()], inits=[t]), "TCI_ERR_INVALID_MODEL", "initializer 0 has no name")
    w = helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])
    mcase("duplicate_initializer", model([relu()], inits=[w, w]), "TCI_ERR_INVALID_MODEL",
          "initializer 'w' is defined twice")
    m = model([relu()])
    m.graph.sparse_initializer.add().values.CopyFrom(w)
    mcase("sparse_initializer", m, "TCI_ERR_UNSUPPORTED", "sparse initializers are not supported")


def graph_cases():
    m = model([relu()])
    m.ClearField("graph")
    mcase("no_graph", m, "TCI_ERR_INVALID_MODEL", "the model has no graph")
    mcase("cycle", model([helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                          helper.make_node("Relu", ["a"], ["b"], name="n2"), relu("a")]),
          "TCI_ERR_INVALID_MODEL", "the graph has a cycle")
    mcase("undefined_node_input", model([helper.make_node("Add", ["x", "nowhere"], ["y"])]),
          "TCI_ERR_INVALID_MODEL", "input 'nowhere' is not produced by any node")
    mcase("output_produced_twice", model([relu(name="a"), relu(name="b")]), "TCI_ERR_INVALID_MODEL",
          "output 'y' is also produced by node")
    mcase("undefined_graph_output", model([relu()], outputs=[vi("zz")]), "TCI_ERR_INVALID_MODEL",
          "graph output 'zz' is not produced by any node")
    w = helper.make_tensor("y", TensorProto.FLOAT, [1, 4], [1.0] * 4)
    mcase("output_is_initializer", model([relu()], inits=[w], outputs=[vi("z")],
                                         ) if False else model([relu(), helper.make_node("Relu", ["y"], ["z"])],
                                                               inits=[w], outputs=[vi("z")]),
          "TCI_ERR_INVALID_MODEL", "output 'y' is also a graph input or initializer")
    mcase("duplicate_input", model([relu()], inputs=[vi("x"), vi("x")]), "TCI_ERR_INVALID_MODEL",
          "graph input 'x' is listed twice")
    m = model([relu()])
    m.graph.input[0].ClearField("type")
    mcase("input_without_type", m, "TCI_ERR_INVALID_MODEL", "graph input 'x' has no type")
    seq = helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [1])
    mcase("sequence_input", model([relu()], inputs=[seq]), "TCI_ERR_UNSUPPORTED", "is a sequence")
    m = model([relu()])
    m.graph.input[0].type.ClearField("tensor_type")
    m.graph.input[0].type.map_type.key_type = TensorProto.INT64
    mcase("map_input", m, "TCI_ERR_UNSUPPORTED", "is a map")
    mcase("node_without_op_type", model([helper.make_node("", ["x"], ["y"])]), "TCI_ERR_INVALID_MODEL",
          "has no op_type")
    mcase("unknown_op", model([helper.make_node("NoSuchOp", ["x"], ["y"])]), "TCI_ERR_UNSUPPORTED",
          "op 'NoSuchOp' (opset 17) is not supported")
    mcase("input_without_shape", model([relu()], inputs=[vi("x", None)]), "TCI_ERR_INVALID_MODEL",
          "input 'x' has no declared type or shape")
    mcase("input_unsupported_dtype", model([relu()], inputs=[vi("x", (1,), TensorProto.COMPLEX64)]),
          "TCI_ERR_UNSUPPORTED", "has element type complex64")


def opset_cases():
    mcase("domain_without_opset", model([helper.make_node("Relu", ["x"], ["y"], domain="com.x")]),
          "TCI_ERR_INVALID_MODEL", "imports no opset for domain 'com.x'")
    mcase("opset_zero", model([relu()], opset=0), "TCI_ERR_INVALID_MODEL", "has invalid version 0")
    mcase("opset_conflict", model([relu()], domain_opsets=[("ai.onnx", 13)]), "TCI_ERR_INVALID_MODEL",
          "is imported twice, as opset 17 and 13")
    mcase("foreign_domain", model([helper.make_node("Relu", ["x"], ["y"], domain="com.x")],
                                  domain_opsets=[("com.x", 1)]),
          "TCI_ERR_UNSUPPORTED", "op domain 'com.x' is not supported")
    mcase("op_newer_than_opset", model([helper.make_node("Gelu", ["x"], ["y"])]), "TCI_ERR_UNSUPPORTED",
          "opset 17 selects a version of Gelu older than tcinfer supports (from opset 20)")


def attribute_cases():
    def node_case(name, node, status, msg, inputs=None, outputs=None, inits=()):
        mcase(name, model([node], inputs=inputs, outputs=outputs, inits=inits), status, msg)
    n = relu()
    n.attribute.add().i = 1
    node_case("attribute_without_name", n, "TCI_ERR_INVALID_MODEL", "an attribute has no name")
    n = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    n.attribute.extend([helper.make_attribute("axis", 1)])
    node_case("duplicate_attribute", n, "TCI_ERR_INVALID_MODEL", "attribute 'axis' is given twice")
    n = helper.make_node("Softmax", ["x"], ["y"])
    a = n.attribute.add()
    a.name, a.ref_attr_name, a.type = "axis", "outer", 2
    node_case("ref_attribute", n, "TCI_ERR_INVALID_MODEL", "refers to function attribute 'outer'")
    n = helper.make_node("Constant", [], ["y"])
    a = n.attribute.add()
    a.name, a.type = "value", 4
    node_case("tensor_attribute_missing", n, "TCI_ERR_INVALID_MODEL", "is a tensor attribute without a tensor",
              inputs=[])
    n = helper.make_node("Softmax", ["x"], ["y"], axis=1.5)
    node_case("attribute_wrong_type", n, "TCI_ERR_INVALID_MODEL", "attribute 'axis'")
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 1, 3, 3], [0.1] * 18)
    x4 = [vi("x", (1, 1, 8, 8))]
    n = helper.make_node("Conv", ["x", "w"], ["y"])
    n.attribute.extend([helper.make_attribute("pads", [], attr_type=7)])
    node_case("conv_empty_pads", n, "TCI_ERR_INVALID_MODEL", "attribute 'pads' is given with no values", inputs=x4, outputs=[vi("y", None)], inits=[w])
    n = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, -1, 1, 1])
    node_case("conv_negative_pads", n, "TCI_ERR_INVALID_MODEL", "pads", inputs=x4, outputs=[vi("y", None)], inits=[w])
    n = helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1])
    node_case("conv_zero_stride", n, "TCI_ERR_INVALID_MODEL", "strides", inputs=x4, outputs=[vi("y", None)], inits=[w])
    n = helper.make_node("Transpose", ["x"], ["y"], perm=[0, 0])
    node_case("transpose_bad_perm", n, "TCI_ERR_INVALID_MODEL", "perm")
    n = helper.make_node("Softmax", ["x"], ["y"], axis=5)
    node_case("softmax_axis_range", n, "TCI_ERR_INVALID_MODEL", "axis 5 out of range for rank 2")
    n = helper.make_node("Relu", ["x"], ["y"], alpha=2.0)
    node_case("unknown_attribute", n, "TCI_ERR_UNSUPPORTED", "alpha")


def subgraph_cases():
    """Subgraphs (If, Loop, Scan): each error names the node and the subgraph; their constants
    count against the model's limits."""
    c = vi("c", (), TensorProto.BOOL)

    def if_model(then_nodes, then_outputs=None, then_inits=(), **kw):
        then_g = helper.make_graph(then_nodes, "then", [], then_outputs or [vi("t", None)],
                                   list(then_inits))
        else_g = helper.make_graph([relu("x", "e")], "else", [], [vi("e", None)])
        return model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                                       else_branch=else_g)], inputs=[vi("x"), c], **kw)
    mcase("subgraph_node_without_op", if_model([helper.make_node("", ["x"], ["t"])]),
          "TCI_ERR_INVALID_MODEL", "node 'if' (If), subgraph 'then_branch': node 0 ('') has no op_type")
    mcase("subgraph_undefined_read", if_model([helper.make_node("Add", ["x", "nowhere"], ["t"])]),
          "TCI_ERR_INVALID_MODEL", "node 'if' (If): input 'nowhere' is not produced by any node")
    mcase("subgraph_writes_outer_value", if_model([relu("t", "x"), relu("x", "t")]),
          "TCI_ERR_INVALID_MODEL", "subgraph 'then_branch': node 'Relu_0' (Relu): the graph has a cycle")
    mcase("subgraph_unknown_op", if_model([helper.make_node("NoSuchOp", ["x"], ["t"])]),
          "TCI_ERR_UNSUPPORTED", "node 'if' (If), subgraph 'then_branch': node 'NoSuchOp_0' (NoSuchOp): "
          "op 'NoSuchOp' (opset 17) is not supported")
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 4], [1.0] * 4)
    case("subgraph_constant_limit", "model",
         save("subgraph_constant_limit.onnx", if_model([helper.make_node("Add", ["x", "w"], ["t"])],
                                                       then_inits=[w])),
         "TCI_ERR_UNSUPPORTED", "node 'if' (If), subgraph 'then_branch': initializer 'w'", "max_constant_bytes=8")
    m = if_model([relu("x", "t")])
    for a in m.graph.node[0].attribute:
        if a.name == "then_branch":
            a.type = TensorProto.FLOAT  # a graph typed as a float
    mcase("branch_not_a_graph", m, "TCI_ERR_INVALID_MODEL", "node 'if' (If): attribute 'then_branch' is not a graph")
    body = helper.make_graph([relu("x_in", "x_out")], "body", [vi("x_in")], [vi("x_out")])
    mcase("loop_body_arity", model([helper.make_node("Loop", ["m", "", "x"], ["y"], name="loop", body=body)],
                                   inputs=[vi("x"), vi("m", (), TensorProto.INT64)]),
          "TCI_ERR_INVALID_MODEL", "node 'loop' (Loop): the body has 1 inputs and 1 outputs")
    mcase("scan_scalar_input", model([helper.make_node("Scan", ["x"], ["y"], name="scan", body=body,
                                                       num_scan_inputs=1)],
                                     inputs=[vi("x", ())], opset=11),
          "TCI_ERR_INVALID_MODEL", "node 'scan' (Scan): scan input 0 is a scalar")


def shape_cases():
    def c(name, nodes, inits, status, msg, inputs=None):
        mcase(name, model(nodes, inputs=inputs, outputs=[vi("y", None)], inits=inits), status, msg)
    def i64(name, vals):
        return helper.make_tensor(name, TensorProto.INT64, [len(vals)], vals)
    c("reshape_two_minus_one", [helper.make_node("Reshape", ["x", "s"], ["y"])], [i64("s", [-1, -1])],
      "TCI_ERR_INVALID_MODEL", "-1")
    c("reshape_count_mismatch", [helper.make_node("Reshape", ["x", "s"], ["y"])], [i64("s", [3, 3])],
      "TCI_ERR_INVALID_MODEL", "Reshape")
    c("constant_of_shape_negative", [helper.make_node("ConstantOfShape", ["s"], ["y"])], [i64("s", [-2])],
      "TCI_ERR_INVALID_MODEL", "negative", inputs=[])
    # 123-byte class: a 3e9-element ConstantOfShape (12 GB); the limit refuses it before any allocation
    c("constant_of_shape_huge", [helper.make_node("ConstantOfShape", ["s"], ["y"])], [i64("s", [3000000000])],
      "TCI_ERR_UNSUPPORTED", "(max_tensor_elements)", inputs=[])
    # the folding pass's size bound multiplied these without a check (UBSan)
    c("constant_of_shape_overflow", [helper.make_node("ConstantOfShape", ["s"], ["y"])],
      [i64("s", [1 << 31, 1 << 31, 1 << 31])], "TCI_ERR_INVALID_MODEL", "overflows int64", inputs=[])
    c("pad_int64_max", [helper.make_node("Pad", ["x", "p"], ["y"])], [i64("p", [0, 0, 0, (1 << 63) - 1])],
      "TCI_ERR_INVALID_MODEL", "overflow int64")
    c("pad_int64_min", [helper.make_node("Pad", ["x", "p"], ["y"])], [i64("p", [0, -(1 << 63), 0, 0])],
      "TCI_ERR_INVALID_MODEL", "overflow int64")
    c("expand_incompatible", [helper.make_node("Expand", ["x", "s"], ["y"])], [i64("s", [3, 5])],
      "TCI_ERR_INVALID_MODEL", "Expand")
    c("concat_rank_mismatch", [helper.make_node("Concat", ["x", "w"], ["y"], axis=0)],
      [helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0] * 4)], "TCI_ERR_INVALID_MODEL", "rank")
    c("slice_zero_step", [helper.make_node("Slice", ["x", "b", "e", "a", "st"], ["y"])],
      [i64("b", [0]), i64("e", [2]), i64("a", [1]), i64("st", [0])], "TCI_ERR_INVALID_MODEL", "step")
    c("tile_negative_repeats", [helper.make_node("Tile", ["x", "r"], ["y"])], [i64("r", [1, -2])],
      "TCI_ERR_INVALID_MODEL", "repeats")
    # found by fuzz_model: the output dims were the input's times the repeats, unchecked (UBSan)
    c("tile_repeats_overflow", [helper.make_node("Tile", ["x", "r"], ["y"])], [i64("r", [1, 1 << 62])],
      "TCI_ERR_INVALID_MODEL", "overflows int64")
    # found by fuzz_model: split sizes were summed unchecked (UBSan)
    c("split_sizes_overflow", [helper.make_node("Split", ["x", "s"], ["y", "z"], axis=1)],
      [i64("s", [1 << 62, 1 << 62])], "TCI_ERR_INVALID_MODEL", "split sizes add up past int64")
    c("matmul_mismatch", [helper.make_node("MatMul", ["x", "w"], ["y"])],
      [helper.make_tensor("w", TensorProto.FLOAT, [3, 2], [1.0] * 6)], "TCI_ERR_INVALID_MODEL", "MatMul")
    c("broadcast_mismatch", [helper.make_node("Add", ["x", "w"], ["y"])],
      [helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0] * 3)], "TCI_ERR_INVALID_MODEL", "broadcast")
    c("gather_axis_range", [helper.make_node("Gather", ["x", "i"], ["y"], axis=4)], [i64("i", [0])],
      "TCI_ERR_INVALID_MODEL", "axis 4 out of range")


def external_cases():
    os.makedirs(os.path.join(OUT, "ext"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "outside"), exist_ok=True)
    with open(os.path.join(OUT, "ext", "w.bin"), "wb") as f:
        f.write(b"\0" * 16)
    with open(os.path.join(OUT, "outside", "secret.bin"), "wb") as f:
        f.write(b"\0" * 16)
    def ext(name, entries, status, msg, kind="model", option=""):
        t = raw_tensor("w", TensorProto.FLOAT, [1, 4], b"")
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for k, v in entries:
            e = t.external_data.add()
            e.key, e.value = k, v
        m = model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[t])
        case(name, kind, save(os.path.join("ext", name + ".onnx"), m), status, msg, option)
    ext("ext_dotdot", [("location", "../outside/secret.bin")], "TCI_ERR_INVALID_MODEL", "contains '..'")
    ext("ext_backslash_dotdot", [("location", "sub\\..\\..\\outside\\secret.bin")], "TCI_ERR_INVALID_MODEL",
        "contains '..'")
    ext("ext_absolute", [("location", "/etc/passwd")], "TCI_ERR_INVALID_MODEL", "is an absolute path")
    link = os.path.join(OUT, "ext", "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../outside/secret.bin", link)
    ext("ext_symlink_out", [("location", "link.bin")], "TCI_ERR_INVALID_MODEL", "resolves outside the model's folder")
    fifo = os.path.join(OUT, "ext", "fifo.bin")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    ext("ext_fifo", [("location", "fifo.bin")], "TCI_ERR_IO", "is not a regular file")
    dev = os.path.join(OUT, "ext", "zero.bin")
    if os.path.lexists(dev):
        os.remove(dev)
    os.symlink("/dev/zero", dev)
    ext("ext_device_symlink", [("location", "zero.bin")], "TCI_ERR_INVALID_MODEL", "resolves outside")
    # a device inside the model's folder: a model in memory whose folder is /dev
    ext("ext_device_file", [("location", "zero")], "TCI_ERR_IO", "is not a regular file", "memory", "/dev")
    ext("ext_offset_past_end", [("location", "w.bin"), ("offset", "64")], "TCI_ERR_INVALID_MODEL",
        "too short for offset 64")
    ext("ext_offset_huge", [("location", "w.bin"), ("offset", "18446744073709551615")], "TCI_ERR_INVALID_MODEL",
        "is not a byte count")
    ext("ext_length_mismatch", [("location", "w.bin"), ("length", "8")], "TCI_ERR_INVALID_MODEL",
        "is 8 bytes, expected 16")
    ext("ext_missing_file", [("location", "nothing.bin")], "TCI_ERR_IO", "cannot open external data file")
    os.makedirs(os.path.join(OUT, "ext", "subdir"), exist_ok=True)
    ext("ext_directory", [("location", "subdir")], "TCI_ERR_IO", "is not a regular file")
    ext("ext_folder_itself", [("location", ".")], "TCI_ERR_INVALID_MODEL", "resolves outside the model's folder")
    ext("ext_no_location", [("offset", "0")], "TCI_ERR_INVALID_MODEL", "has no location")
    ext("ext_bad_offset", [("location", "w.bin"), ("offset", "12x")], "TCI_ERR_INVALID_MODEL", "is not a byte count")
    ext("ext_without_base_dir", [("location", "w.bin")], "TCI_ERR_INVALID_ARGUMENT",
        "without a base directory", "memory", "")
    model_fifo = os.path.join(OUT, "model_fifo.onnx")
    if not os.path.exists(model_fifo):
        os.mkfifo(model_fifo)
    case("model_is_fifo", "model", "model_fifo.onnx", "TCI_ERR_IO", "is not a regular file")
    case("model_is_directory", "model", "ext", "TCI_ERR_IO", "is not a regular file")


def npy(dtype_descr, shape, data, fortran="False", version=1):
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (dtype_descr, fortran, shape)
    header += " " * ((64 - (len(header) + 11) % 64) % 64) + "\n"
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header.encode() + data


def input_cases():
    def inp(name, fname, data, status, msg):
        case(name, "input", save(fname, data), status, msg)
    inp("npy_bad_magic", "bad_magic.npy", b"NUMPY" + b"\0" * 20, "TCI_ERR_PARSE", "is not a .npy file")
    inp("npy_truncated_header", "trunc.npy", b"\x93NUMPY\x01\x00\xff\x00{'descr'", "TCI_ERR_PARSE",
        "truncated .npy header")
    inp("npy_version", "version.npy", b"\x93NUMPY\x09\x00" + b"\0" * 8, "TCI_ERR_PARSE", "unsupported .npy version 9")
    inp("npy_fortran", "fortran.npy", npy("<f4", "(2,)", b"\0" * 8, "True"), "TCI_ERR_UNSUPPORTED",
        "Fortran-order .npy is not supported")
    inp("npy_dtype", "dtype.npy", npy("<c8", "(1,)", b"\0" * 8), "TCI_ERR_UNSUPPORTED", "unsupported .npy dtype")
    inp("npy_rank9", "rank9.npy", npy("<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 1)", b"\0" * 4), "TCI_ERR_UNSUPPORTED",
        "rank above 8")
    inp("npy_data_size", "size.npy", npy("<f4", "(3,)", b"\0" * 8), "TCI_ERR_PARSE",
        ".npy data is 8 bytes, its header says 12")
    inp("npy_shape_overflow", "overflow.npy", npy("<f4", "(4611686018427387904, 4)", b""), "TCI_ERR_PARSE",
        ".npy shape overflows")
    inp("npy_negative_dim", "negative.npy", npy("<f4", "(-1,)", b""), "TCI_ERR_PARSE", "malformed .npy shape")
    inp("npy_no_shape", "noshape.npy", npy("<f4", "[]", b"").replace(b"'shape'", b"'shap_'"), "TCI_ERR_PARSE",
        "malformed .npy header")
    inp("pb_garbage", "garbage.pb", b"\xff" * 9, "TCI_ERR_PARSE", "not a valid ONNX TensorProto")
    t = raw_tensor("t", TensorProto.FLOAT, [4], b"")
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "/etc/passwd"
    inp("pb_external", "external.pb", t.SerializeToString(), "TCI_ERR_INVALID_MODEL", "is an absolute path")
    t = raw_tensor("t", TensorProto.FLOAT, [1 << 20, 1 << 20], b"")
    inp("pb_elements_over_limit", "huge.pb", t.SerializeToString(), "TCI_ERR_UNSUPPORTED", "over the limit of")
    fifo = os.path.join(OUT, "input_fifo.npy")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    case("input_is_fifo", "input", "input_fifo.npy", "TCI_ERR_IO", "is not a regular file")


def cli_cases():
    save("ok.onnx", model([relu()]))
    np.save(os.path.join(OUT, "ok_input.npy"), np.zeros((1, 4), np.float32))
    def cli(name, args, code, msg):
        case(name, "cli", "|".join(args), str(code), msg)
    cli("cli_no_args", [], 2, "no model given")
    # found by fuzz_model: an empty output ([0, 4 + 2^40]) made Pad's CPU forward ask for an index
    # map of 8 bytes per index of every dim (8 TB) for nothing to copy; it runs, and gives nothing
    pad = helper.make_tensor("p", TensorProto.INT64, [4], [0, 1 << 40, 0, 0])
    save("pad_empty_huge_dim.onnx", model([helper.make_node("Pad", ["x", "p"], ["y"])],
                                          inputs=[vi("x", (0, 4))], outputs=[vi("y", None)],
                                          inits=[pad]))
    cli("pad_empty_huge_dim", ["--backend", "cpu", "--random", "0", "{dir}/pad_empty_huge_dim.onnx"],
        0, "")
    # found by fuzz_gpu_plan: a rank-8 element-wise op overran the GPU plan's 6-dim step view;
    # the GPU planner (--plan needs no GPU) refuses it, naming the node
    save("relu_rank8.onnx", model([helper.make_node("Relu", ["x"], ["y"], name="relu8")],
                                  inputs=[vi("x", (1, 2, 1, 2, 1, 2, 1, 2))],
                                  outputs=[vi("y", None)]))
    cli("gpu_plan_rank8_eltwise", ["--backend", "gpu", "--plan", "{dir}/relu_rank8.onnx"], 3,
        "node 'relu8' (Relu): a rank-8 output of an element-wise or strided step; the GPU path "
        "has at most 6 dims")
    cli("cli_unknown_option", ["--frobnicate", "{dir}/ok.onnx"], 2, "unknown option '--frobnicate'")
    cli("cli_bad_shape", ["--shape", "x:1xx4", "{dir}/ok.onnx"], 2, "--shape wants NAME:DxDx...")
    cli("cli_shape_then_usage_error", ["--shape", "x:1x4", "--bench", "many", "{dir}/ok.onnx"], 2,
        "--bench wants a count, got 'many'")
    cli("cli_missing_value", ["{dir}/ok.onnx", "--shape"], 2, "--shape needs a value")
    cli("cli_missing_model", ["--backend", "cpu", "{dir}/none.onnx", "{dir}/ok_input.npy"], 1,
        "cannot open model file")
    cli("cli_input_wrong_size", ["--backend", "cpu", "{dir}/ok.onnx", "{dir}/size.npy"], 1,
        ".npy data is 8 bytes")
    cli("cli_raw_input_size", ["--backend", "cpu", "{dir}/ok.onnx", "{dir}/garbage.pb.raw"], 1, "expected 16 bytes")
    save("garbage.pb.raw", b"\0" * 9)
    cli("cli_shape_unknown_input", ["--backend", "cpu", "--shape", "q:1x4", "{dir}/ok.onnx", "{dir}/ok_input.npy"],
        1, "shape given for 'q', which is not a model input")
    cli("cli_limit_option", ["--backend", "cpu", "--limit", "max_nodes=0", "--limit", "max_model_bytes=64",
                             "{dir}/deep_if.onnx", "{dir}/ok_input.npy"], 3, "over the limit of 64 (max_model_bytes)")
    cli("cli_limit_unknown", ["--limit", "max_widgets=3", "{dir}/ok.onnx"], 2, "--limit wants NAME=N")
    cli("cli_limit_negative", ["--limit", "max_nodes=-1", "{dir}/ok.onnx"], 2, "--limit wants NAME=N")
    # a shape known only at run time: ConstantOfShape of the input's values (3e9 floats, 12 GB)
    save("runtime_shape.onnx", model([helper.make_node("ConstantOfShape", ["x"], ["y"])],
                                     inputs=[vi("x", (1,), TensorProto.INT64)], outputs=[vi("y", None)]))
    np.save(os.path.join(OUT, "runtime_shape.npy"), np.array([3000000000], np.int64))
    cli("cli_runtime_allocation_limit", ["--backend", "cpu", "{dir}/runtime_shape.onnx", "{dir}/runtime_shape.npy"],
        3, "would have 3000000000 elements, over the limit of 2147483647 (max_tensor_elements)")
    cli("cli_malformed_model", ["--backend", "cpu", "{dir}/deep_if.onnx", "{dir}/ok_input.npy"], 3,
        "nests messages more than 64 deep")


def main():
    global OUT
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    OUT = sys.argv[1]
    os.makedirs(OUT, exist_ok=True)
    for gen in (parse_cases, tensor_cases, graph_cases, opset_cases, attribute_cases,
                subgraph_cases, shape_cases, external_cases, input_cases, cli_cases):
        gen()
    with open(os.path.join(OUT, "cases.tsv"), "w") as f:
        for c in CASES:
            f.write("\t".join(c) + "\n")
    print(f"{len(CASES)} cases in {OUT}")


if __name__ == "__main__":
    main()
