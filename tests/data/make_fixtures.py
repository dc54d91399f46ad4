#!/usr/bin/env python3
"""Writes the tiny ONNX fixtures of tests/unit/test_loader.c (and the few of test_api.c) into
tests/data/loader/.

Run from anywhere: python3 tests/data/make_fixtures.py (needs the onnx and numpy packages).
Many fixtures are deliberately invalid, so protos are built field by field and never checked.
"""
import os
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loader")
T = TensorProto


def tensor(name, dtype, dims, **fields):
    """A TensorProto with exactly the given storage fields (no validation)."""
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    for key, value in fields.items():
        if key == "raw_data":
            t.raw_data = value
        else:
            getattr(t, key).extend(value)
    return t


def external(name, dtype, dims, **entries):
    t = tensor(name, dtype, dims)
    t.data_location = T.EXTERNAL
    for key, value in entries.items():
        e = t.external_data.add()
        e.key, e.value = key, str(value)
    return t


def model(nodes=(), inits=(), inputs=(), outputs=(), opsets=(("", 13),), ir_version=8,
          name="g"):
    g = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = ir_version
    return m


def out(name, dtype=T.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def save(m, filename):
    with open(os.path.join(OUT, filename), "wb") as f:
        f.write(m.SerializeToString() if hasattr(m, "SerializeToString") else m)


def le(fmt, values):
    return struct.pack("<" + fmt * len(values), *values)


def initializers():
    """Every dtype in raw_data and in its typed field, plus an empty and a scalar tensor."""
    f16 = np.array([1.0, -2.5, 65504.0], dtype=np.float16).view(np.uint16).tolist()
    inits = [
        tensor("f32_raw", T.FLOAT, [2, 2], raw_data=le("f", [1.5, -2.0, 3.25, 0.0])),
        tensor("f32_typed", T.FLOAT, [2, 2], float_data=[1.5, -2.0, 3.25, 0.0]),
        tensor("f16_raw", T.FLOAT16, [3], raw_data=le("H", f16)),
        tensor("f16_typed", T.FLOAT16, [3], int32_data=f16),
        tensor("f64_raw", T.DOUBLE, [2], raw_data=le("d", [0.1, -1e300])),
        tensor("f64_typed", T.DOUBLE, [2], double_data=[0.1, -1e300]),
        tensor("i64_raw", T.INT64, [2], raw_data=le("q", [-(2**40), 7])),
        tensor("i64_typed", T.INT64, [2], int64_data=[-(2**40), 7]),
        tensor("i32_raw", T.INT32, [3], raw_data=le("i", [-(2**31), 5, 2**31 - 1])),
        tensor("i32_typed", T.INT32, [3], int32_data=[-(2**31), 5, 2**31 - 1]),
        tensor("i8_raw", T.INT8, [3], raw_data=le("b", [-128, 0, 127])),
        tensor("i8_typed", T.INT8, [3], int32_data=[-128, 0, 127]),
        tensor("u8_raw", T.UINT8, [3], raw_data=le("B", [0, 128, 255])),
        tensor("u8_typed", T.UINT8, [3], int32_data=[0, 128, 255]),
        tensor("bool_raw", T.BOOL, [3], raw_data=bytes([1, 0, 1])),
        tensor("bool_typed", T.BOOL, [3], int32_data=[1, 0, 7]),
        tensor("empty", T.FLOAT, [2, 0]),
        tensor("scalar", T.INT64, [], int64_data=[42]),
    ]
    save(model(inits=inits, outputs=[out("f32_raw")]), "initializers.onnx")


def graph():
    """Inputs (one an initializer, as old exporters write), symbolic and unknown dims, nodes with
    every attribute kind, omitted optional tensors, domains and opsets."""
    x_type = helper.make_tensor_type_proto(T.FLOAT, ["N", 3, None, 4])
    inputs = [helper.make_value_info("x", x_type), out("W", T.FLOAT, [2, 3]),
              out("noshape", T.INT64, None)]
    sub = helper.make_graph([], "body", [], [])
    sparse = helper.make_sparse_tensor(tensor("v", T.FLOAT, [1], float_data=[1.0]),
                                       tensor("i", T.INT64, [1], int64_data=[0]), [2])
    attrs = helper.make_node(
        "Custom", ["x", "", "W"], ["y", ""], domain="com.example",
        f=0.5, i=-3, s=b"hello", t=tensor("y", T.INT32, [2], int32_data=[4, 5]),
        floats=[1.0, 2.0], ints=[1, -2, 3], strings=[b"a", b"bc"], g=sub,
        sp=sparse)
    relu = helper.make_node("Relu", ["y"], ["z"], domain="ai.onnx")  # unnamed
    const = helper.make_node("Constant", [], ["c"], name="const",
                             value=tensor("c", T.FLOAT16, [1], int32_data=[0x3C00]))
    m = model(nodes=[attrs, relu, const], inits=[tensor("W", T.FLOAT, [2, 3],
                                                        float_data=[1, 2, 3, 4, 5, 6])],
              inputs=inputs, outputs=[out("z"), out("c", T.FLOAT16, [1]), out("W")],
              opsets=[("", 13), ("com.example", 2)], ir_version=7, name="main_graph")
    save(m, "graph.onnx")


def newer_ir():
    """A model as onnx 1.23 writes it: newest IR version, fields onnx.proto of IR 8 lacks."""
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    node.metadata_props.add(key="origin", value="test")
    g = helper.make_graph([node], "g", [out("x", T.FLOAT, [1])], [out("y", T.FLOAT, [1])])
    g.metadata_props.add(key="k", value="v")
    g.input[0].metadata_props.add(key="k", value="v")
    fn = helper.make_function("local", "Fn", ["a"], ["b"],
                              [helper.make_node("Relu", ["a"], ["b"])],
                              [helper.make_opsetid("", 23)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23),
                                            helper.make_opsetid("local", 1)],
                          functions=[fn])
    assert m.ir_version >= 10
    save(m, "newer_ir.onnx")


def external_data():
    with open(os.path.join(OUT, "ext_weights.bin"), "wb") as f:
        f.write(le("f", [1.0, 2.0, 3.0, 4.0]) + le("q", [-1, 9]))  # 32 bytes
    os.makedirs(os.path.join(OUT, "ext_sub"), exist_ok=True)
    with open(os.path.join(OUT, "ext_sub", "half.bin"), "wb") as f:
        f.write(le("H", [0x3C00, 0xC000]))
    good = [external("w", T.FLOAT, [2, 2], location="ext_weights.bin", offset=0, length=16),
            external("tail", T.INT64, [2], location="ext_weights.bin", offset=16),  # to the end
            external("h", T.FLOAT16, [2], location="ext_sub/half.bin")]
    save(model(inits=good, outputs=[out("w")]), "ext_good.onnx")

    def single(filename, **entries):
        t = external("w", T.FLOAT, [4], **entries)
        save(model(inits=[t], outputs=[out("w")]), filename)

    single("ext_dotdot.onnx", location="ext_sub/../../loader/ext_weights.bin", length=16)
    single("ext_absolute.onnx", location="/etc/passwd", length=16)
    single("ext_link.onnx", location="link.bin", length=16)
    single("ext_short.onnx", location="ext_weights.bin", offset=24, length=16)
    single("ext_length.onnx", location="ext_weights.bin", offset=0, length=12)
    single("ext_missing.onnx", location="missing.bin")
    single("ext_bad_offset.onnx", location="ext_weights.bin", offset="-4")


def invalid_models():
    m = model(outputs=[out("y")])
    m.ClearField("graph")
    save(m, "no_graph.onnx")

    relu = helper.make_node("Relu", ["x"], ["y"], name="r")
    x = out("x", T.FLOAT, [1])
    save(model([relu], inputs=[x], outputs=[out("ghost")]), "undefined_output.onnx")
    save(model([helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.unknown")],
               inputs=[x], outputs=[out("y")]), "unknown_domain.onnx")
    save(model([relu], inputs=[x], outputs=[out("y")], opsets=[("", 13), ("ai.onnx", 11)]),
         "conflicting_opsets.onnx")
    one = tensor("w", T.FLOAT, [1], float_data=[1])
    save(model(inits=[one, one], outputs=[out("w")]), "dup_initializer.onnx")
    save(model([relu], inputs=[x, x], outputs=[out("y")]), "dup_input.onnx")
    save(model([relu], inputs=[helper.make_value_info(
        "x", helper.make_sequence_type_proto(helper.make_tensor_type_proto(T.FLOAT, [1])))],
        outputs=[out("y")]), "sequence_input.onnx")
    save(model([relu], inputs=[helper.make_value_info(
        "x", helper.make_map_type_proto(T.INT64, helper.make_tensor_type_proto(T.FLOAT, [1])))],
        outputs=[out("y")]), "map_input.onnx")
    save(model([relu], inputs=[out("x", T.BFLOAT16, [1])], outputs=[out("y")]),
         "bfloat16_input.onnx")

    def bad_init(filename, t):
        save(model(inits=[t], outputs=[out(t.name)]), filename)

    bad_init("raw_length.onnx", tensor("w", T.FLOAT, [2, 3], raw_data=bytes(20)))
    bad_init("typed_length.onnx", tensor("w", T.INT64, [2, 3], int64_data=[1, 2, 3, 4, 5]))
    bad_init("wrong_field.onnx", tensor("w", T.FLOAT, [2], int32_data=[1, 2]))
    bad_init("negative_dim.onnx", tensor("w", T.FLOAT, [2, -3], float_data=[]))
    bad_init("overflow_dims.onnx", tensor("w", T.FLOAT, [2**40, 2**40], float_data=[]))
    bad_init("int8_range.onnx", tensor("w", T.INT8, [2], int32_data=[1, 300]))
    bad_init("bfloat16_init.onnx", tensor("w", T.BFLOAT16, [1], raw_data=bytes(2)))
    bad_init("string_init.onnx", tensor("w", T.STRING, [1], string_data=[b"s"]))
    bad_init("float8_init.onnx", tensor("w", 17, [1], raw_data=bytes(1)))
    bad_init("uint16_init.onnx", tensor("w", T.UINT16, [1], int32_data=[1]))
    const = helper.make_node("Constant", [], ["c"], name="k",
                             value=tensor("", T.COMPLEX64, [1], float_data=[1, 2]))
    save(model([const], outputs=[out("c")]), "bad_attr_tensor.onnx")


def more_invalid_models():
    """One fixture per remaining error path, each named after it."""
    x = out("x", T.FLOAT, [1])

    def relu_model(filename, relu=None, inputs=None, outputs=None, **kw):
        relu = relu or helper.make_node("Relu", ["x"], ["y"], name="r")
        save(model([relu], inputs=inputs or [x], outputs=outputs or [out("y")], **kw), filename)

    def bad_init(filename, t):
        save(model(inits=[t], outputs=[out(t.name or "y")]), filename)

    relu = helper.make_node("Relu", ["x"], ["y"], name="r", alpha=1.0)
    relu.attribute.extend([relu.attribute[0]])
    relu_model("dup_attr.onnx", relu)
    relu = helper.make_node("Relu", ["x"], ["y"], name="r")
    relu.attribute.add(name="alpha", ref_attr_name="outer", type=onnx.AttributeProto.FLOAT)
    relu_model("ref_attr.onnx", relu)
    relu = helper.make_node("Relu", ["x"], ["y"], name="r")
    relu.attribute.add(type=onnx.AttributeProto.INT, i=1)
    relu_model("attr_no_name.onnx", relu)
    relu = helper.make_node("Relu", ["x"], ["y"], name="r")
    relu.attribute.add(name="value", type=onnx.AttributeProto.TENSOR)
    relu_model("attr_tensor_missing.onnx", relu)
    relu = helper.make_node("Relu", ["x"], ["y"], name="r")
    relu.attribute.add(name="count", i=5)  # IR version 1: no type field
    relu.attribute.add(name="names", strings=[b"p", b"q"])
    relu_model("untyped_attrs.onnx", relu)
    relu_model("no_op_type.onnx", helper.make_node("", ["x"], ["y"], name="n"))
    relu_model("bad_opset_version.onnx", opsets=[("", 0)])
    relu_model("input_no_type.onnx", inputs=[onnx.ValueInfoProto(name="x")])
    relu_model("input_no_elem.onnx", inputs=[helper.make_value_info(
        "x", helper.make_tensor_type_proto(0, [1]))])
    relu_model("optional_input.onnx", inputs=[helper.make_value_info(
        "x", helper.make_optional_type_proto(helper.make_tensor_type_proto(T.FLOAT, [1])))])
    relu_model("sparse_input.onnx", inputs=[helper.make_value_info(
        "x", helper.make_sparse_tensor_type_proto(T.FLOAT, [1]))])
    relu_model("rank9_input.onnx", inputs=[out("x", T.FLOAT, [1] * 9)])
    relu_model("unnamed_input.onnx", inputs=[out("", T.FLOAT, [1])])
    relu_model("unnamed_output.onnx", outputs=[out("", T.FLOAT, [1])])
    relu_model("sequence_output.onnx", outputs=[helper.make_value_info(
        "y", helper.make_sequence_type_proto(helper.make_tensor_type_proto(T.FLOAT, [1])))])
    bad_init("unnamed_init.onnx", tensor("", T.FLOAT, [1], float_data=[1]))
    bad_init("no_dtype.onnx", tensor("w", 0, [1], float_data=[1]))
    bad_init("rank9_init.onnx", tensor("w", T.FLOAT, [1] * 9, float_data=[1]))
    seg = tensor("w", T.FLOAT, [1], float_data=[1])
    seg.segment.begin, seg.segment.end = 0, 1
    bad_init("segment.onnx", seg)
    bad_init("uint8_range.onnx", tensor("w", T.UINT8, [1], int32_data=[-1]))
    bad_init("ext_no_location.onnx", external("w", T.FLOAT, [1], offset=0))
    bad_init("ext_directory.onnx", external("w", T.FLOAT, [1], location="ext_sub"))
    sparse = helper.make_sparse_tensor(tensor("s", T.FLOAT, [1], float_data=[1.0]),
                                       tensor("i", T.INT64, [1], int64_data=[0]), [2])
    m = model(outputs=[out("y")])
    m.graph.sparse_initializer.extend([sparse])
    save(m, "sparse_initializer.onnx")


def tensor_files():
    t = tensor("f16", T.FLOAT16, [2], raw_data=le("H", [0x3C00, 0x4200]))  # 1.0, 3.0
    save(t, "tensor_f16.pb")
    save(external("e", T.FLOAT, [1], location="x.bin"), "tensor_external.pb")


def api_models():
    """test_api.c: two inputs whose order matters (binding by name), and two unsupported nodes
    (every one named in the error)."""
    a, b = out("a", shape=[2, 3]), out("b", shape=[2, 3])
    save(model([helper.make_node("Sub", ["a", "b"], ["diff"], name="sub"),
                helper.make_node("Add", ["a", "b"], ["sum"], name="add")],
               inputs=[a, b], outputs=[out("diff", shape=[2, 3]), out("sum", shape=[2, 3])]),
         "two_inputs.onnx")
    save(model([helper.make_node("NoSuchOpA", ["a"], ["t"], name="first"),
                helper.make_node("Relu", ["t"], ["u"], name="fine"),
                helper.make_node("NoSuchOpB", ["u"], ["y"], name="second")],
               inputs=[a], outputs=[out("y")]),
         "two_unsupported.onnx")


def control_flow():
    """test_control.c: If branches reading the enclosing graphs' tensors (one level and two), a
    condition known at build (inlined), and the subgraph errors the loader names."""
    x, c = out("x", shape=[3]), out("c", T.BOOL, [])
    two = helper.make_tensor("two", T.FLOAT, [], [2.0])
    # then: t * 2 (t is only read by the branch), else: -t
    then_g = helper.make_graph([helper.make_node("Mul", ["t", "two"], ["tt"], name="double")],
                               "then", [], [out("tt")], [two])
    else_g = helper.make_graph([helper.make_node("Neg", ["t"], ["te"], name="negate")],
                               "else", [], [out("te")])
    relu = helper.make_node("Relu", ["x"], ["t"], name="relu")
    save(model([relu, helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                                       else_branch=else_g)],
               inputs=[x, c], outputs=[out("y")]), "if_outer.onnx")
    # nested: the inner If (condition c2) reads x from two levels up and t from one
    inner_then = helper.make_graph([helper.make_node("Add", ["x", "u"], ["a"], name="add_x")],
                                   "inner_then", [], [out("a")])
    inner_else = helper.make_graph([helper.make_node("Sub", ["x", "u"], ["b"], name="sub_x")],
                                   "inner_else", [], [out("b")])
    outer_then = helper.make_graph(
        [helper.make_node("Relu", ["t"], ["u"], name="relu_t"),
         helper.make_node("If", ["c2"], ["v"], name="inner", then_branch=inner_then,
                          else_branch=inner_else)], "outer_then", [], [out("v")])
    outer_else = helper.make_graph([], "outer_else", [], [out("x")])  # forwards an outer value
    save(model([helper.make_node("Neg", ["x"], ["t"], name="neg"),
                helper.make_node("If", ["c"], ["y"], name="outer", then_branch=outer_then,
                                 else_branch=outer_else)],
               inputs=[x, c, out("c2", T.BOOL, [])], outputs=[out("y")]), "if_nested.onnx")
    # a condition from shapes: Shape(x)[0] == 3 folds to true at build
    three = helper.make_tensor("three", T.INT64, [], [3])
    zero = helper.make_tensor("zero", T.INT64, [], [0])
    save(model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                helper.make_node("Gather", ["s", "zero"], ["n"], name="first"),
                helper.make_node("Equal", ["n", "three"], ["k"], name="is3"),
                relu,
                helper.make_node("If", ["k"], ["y"], name="if", then_branch=then_g,
                                 else_branch=else_g),
                helper.make_node("Add", ["y", "x"], ["z"], name="add")],
               inits=[three, zero], inputs=[x], outputs=[out("z")]), "if_known.onnx")
    # errors: a branch reading a name nothing defines; a node of a branch with a bad attribute
    bad_read = helper.make_graph([helper.make_node("Neg", ["nowhere"], ["q"], name="neg_q")],
                                 "bad", [], [out("q")])
    save(model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=bad_read,
                                 else_branch=else_g), relu],
               inputs=[x, c], outputs=[out("y")]), "if_unbound.onnx")
    dup = helper.make_node("Relu", ["t"], ["q"], name="r")
    dup.attribute.extend([helper.make_attribute("alpha", 1.0), helper.make_attribute("alpha", 2.0)])
    save(model([relu, helper.make_node("If", ["c"], ["y"], name="if",
                                       then_branch=helper.make_graph([dup], "dup", [], [out("q")]),
                                       else_branch=else_g)],
               inputs=[x, c], outputs=[out("y")]), "if_bad_branch.onnx")
    empty = helper.make_node("If", ["c"], ["y"], name="if", else_branch=else_g)
    empty.attribute.append(helper.make_attribute("then_branch", then_g))
    empty.attribute[-1].ClearField("g")
    save(model([relu, empty], inputs=[x, c], outputs=[out("y")]), "if_no_graph.onnx")


def loops():
    """test_control.c: Loop with a trip count and a condition (the body reads an outer value),
    one whose carried value grows, one with neither bound; Scan along axis 1 in reverse, and its
    attribute errors."""
    one = helper.make_tensor("one", T.FLOAT, [], [1.0])
    body = helper.make_graph(
        [helper.make_node("Add", ["x_in", "one"], ["x_out"], name="inc"),
         helper.make_node("Cast", ["i"], ["i_f"], name="to_float", to=T.FLOAT),
         helper.make_node("Less", ["i_f", "limit"], ["cond_out"], name="below"),
         helper.make_node("Identity", ["x_out"], ["y"], name="scan_y")],
        "body", [out("i", T.INT64, []), out("cond_in", T.BOOL, []), out("x_in", shape=[3])],
        [out("cond_out", T.BOOL, []), out("x_out", shape=[3]), out("y", shape=[3])], [one])
    save(model([helper.make_node("Loop", ["M", "c", "x"], ["x_final", "ys"], name="loop",
                                 body=body)],
               inputs=[out("M", T.INT64, []), out("c", T.BOOL, []), out("x", shape=[3]),
                       out("limit", shape=[])],
               outputs=[out("x_final"), out("ys")]), "loop_while.onnx")
    save(model([helper.make_node("Loop", ["", "", "x"], ["x_final", "ys"], name="loop",
                                 body=body)],
               inputs=[out("x", shape=[3]), out("limit", shape=[])],
               outputs=[out("x_final"), out("ys")]), "loop_forever.onnx")
    grow = helper.make_graph(
        [helper.make_node("Concat", ["x_in", "ones"], ["x_out"], name="append", axis=0),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep")],
        "grow", [out("i", T.INT64, []), out("cond_in", T.BOOL, []), out("x_in")],
        [out("cond_out", T.BOOL, []), out("x_out"), out("x_out")],
        [helper.make_tensor("ones", T.FLOAT, [1], [1.0])])
    save(model([helper.make_node("Loop", ["M", "", "x"], ["x_final", "ys"], name="loop",
                                 body=grow)],
               inputs=[out("M", T.INT64, []), out("x", shape=[3])],
               outputs=[out("x_final"), out("ys")]), "loop_grow.onnx")
    step = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"], name="acc"),
         helper.make_node("Identity", ["s_out"], ["y_t"], name="emit")],
        "step", [out("s_in", shape=[2]), out("x_t", shape=[2])],
        [out("s_out", shape=[2]), out("y_t", shape=[2])])

    def scan(name, inputs, **attrs):
        return model([helper.make_node("Scan", inputs, ["s_final", "y"], name="scan", body=step,
                                       **attrs)],
                     inputs=[out("s", shape=[2]), out("xs", shape=[2, 3])],
                     outputs=[out("s_final"), out("y")], opsets=(("", 11),))
    save(scan("scan", ["s", "xs"], num_scan_inputs=1, scan_input_axes=[1],
              scan_input_directions=[1], scan_output_axes=[-1], scan_output_directions=[1]),
         "scan_axes.onnx")
    save(scan("scan", ["s", "xs"], num_scan_inputs=1, scan_input_directions=[2]),
         "scan_bad_direction.onnx")
    save(scan("scan", ["s", "xs"], num_scan_inputs=3), "scan_bad_count.onnx")
    # a state and a loop-carried value the body turns into int64: errors naming the value
    cast = helper.make_graph(
        [helper.make_node("Cast", ["s_in"], ["s_out"], name="to_int", to=T.INT64),
         helper.make_node("Identity", ["x_t"], ["y_t"], name="emit")],
        "cast", [out("s_in", shape=[2]), out("x_t", shape=[2])],
        [out("s_out", T.INT64, [2]), out("y_t", shape=[2])])
    save(model([helper.make_node("Scan", ["s", "xs"], ["s_final", "y"], name="scan", body=cast,
                                 num_scan_inputs=1)],
               inputs=[out("s", shape=[2]), out("xs", shape=[3, 2])],
               outputs=[out("s_final"), out("y")], opsets=(("", 11),)), "scan_state_dtype.onnx")
    cast_loop = helper.make_graph(
        [helper.make_node("Cast", ["x_in"], ["x_out"], name="to_int", to=T.INT64),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep")],
        "cast_loop", [out("i", T.INT64, []), out("cond_in", T.BOOL, []), out("x_in", shape=[3])],
        [out("cond_out", T.BOOL, []), out("x_out", T.INT64, [3])])
    save(model([helper.make_node("Loop", ["M", "", "x"], ["x_final"], name="loop",
                                 body=cast_loop)],
               inputs=[out("M", T.INT64, []), out("x", shape=[3])],
               outputs=[out("x_final")]), "loop_carried_dtype.onnx")
    # a scan input of any length (a run may give it none), s + x_t stacked along the last axis
    add_step = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"], name="acc"),
         helper.make_node("Identity", ["s_out"], ["y_t"], name="emit")],
        "add_step", [out("s_in", shape=[2]), out("x_t", shape=[])],
        [out("s_out", shape=[2]), out("y_t", shape=[2])])
    save(model([helper.make_node("Scan", ["s", "xs"], ["s_final", "y"], name="scan",
                                 body=add_step, num_scan_inputs=1, scan_output_axes=[-1])],
               inputs=[out("s", shape=[2]), out("xs", shape=["t"])],
               outputs=[out("s_final"), out("y")], opsets=(("", 11),)), "scan_any_length.onnx")
    # Scan-8: batch axis 0 on every value, sequence_lens first
    save(model([helper.make_node("Scan", ["lens", "s", "xs"], ["s_final", "y"], name="scan",
                                 body=step, num_scan_inputs=1)],
               inputs=[out("lens", T.INT64, [2]), out("s", shape=[2, 2]),
                       out("xs", shape=[2, 3, 2])],
               outputs=[out("s_final"), out("y")], opsets=(("", 8),)), "scan8_lens.onnx")


def main():
    os.makedirs(OUT, exist_ok=True)
    control_flow()
    loops()
    api_models()
    initializers()
    graph()
    newer_ir()
    external_data()
    invalid_models()
    more_invalid_models()
    tensor_files()


if __name__ == "__main__":
    main()
