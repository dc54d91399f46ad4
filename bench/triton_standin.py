#!/usr/bin/env python3
"""A stand-in for ResNet-50 in serving measurements without a GPU (docs/serving.md, "Why serving
fell over at high concurrency"): ResNet-50's input (Nx3x224x224 float, 602 KB a row) and output
(Nx1000 float), with almost no compute between them (GlobalAveragePool, then a seeded 3x1000
MatMul), so that on CPU instances the serving path, not the engine, takes the time.

  triton_standin.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def standin_model():
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((3, 1000))
                                .astype(np.float32), "w")
    nodes = [helper.make_node("GlobalAveragePool", ["input"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["features"]),
             helper.make_node("MatMul", ["features", "w"], ["output"])]
    graph = helper.make_graph(
        nodes, "resnet50_io_standin",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 1000])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    onnx.save(standin_model(), sys.argv[1])


if __name__ == "__main__":
    main()
