"""Writes each model of SRC to DST with every float initializer of more than 16 elements made by
a ConstantOfShape node of the same shape: the graph's structure (attention blocks, transformer
layers, CNN blocks) in a few kilobytes, as seeds for the model fuzzers (scripts/run_fuzz.sh),
whose mutations would otherwise mostly land in weights. The values (a constant 0.02) do not
matter to the passes the fuzzers reach: constant folding makes the tensors constants again.

usage: shrink_models.py SRC DST"""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def shrink(model):
    g = model.graph
    kept, made = [], []
    for init in g.initializer:
        if init.data_type != TensorProto.FLOAT or int(np.prod(init.dims)) <= 16:
            kept.append(init)
            continue
        shape = numpy_helper.from_array(np.array(init.dims, np.int64), init.name + "__shape")
        kept.append(shape)
        made.append(helper.make_node(
            "ConstantOfShape", [shape.name], [init.name], name=init.name + "__fill",
            value=numpy_helper.from_array(np.array([0.02], np.float32))))
    del g.initializer[:]
    g.initializer.extend(kept)
    nodes = made + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    return model


def main():
    src, dst = sys.argv[1:3]
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src)):
        if not name.endswith(".onnx"):
            continue
        model = onnx.load(os.path.join(src, name), load_external_data=False)
        if any(i.data_location for i in model.graph.initializer):
            continue  # its weights live in another file
        onnx.save(shrink(model), os.path.join(dst, "shrunk_" + name))


if __name__ == "__main__":
    main()
