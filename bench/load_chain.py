#!/usr/bin/env python3
"""Load time of a long chain of nodes: `tcinfer --info` on an N-node chain of Relu (plain file
order and reversed order, the worst case of a sort by repeated sweeps) and an 8 MB file of empty
nodes, with the CPU time and peak resident memory (through GNU time, /usr/bin/time). A
benchmark, not a test: docs/robustness.md has the numbers.

usage: bench/load_chain.py TCINFER [N ...]   (default N: 10000 40000 100000)
"""
import os
import subprocess
import sys
import tempfile
import time

import onnx
from onnx import TensorProto, helper


def chain(n, reverse):
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"n{i}") for i in range(n)]
    if reverse:
        nodes.reverse()
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def empty_nodes(size):
    # GraphProto.node (field 1) holding an empty NodeProto is 2 bytes on the wire: 0x0a 0x00
    graph = b"\x0a\x00" * (size // 2)
    opset = b"\x42\x02\x10\x11"                     # ModelProto.opset_import {version: 17}
    return b"\x08\x08" + opset + b"\x3a" + _varint(len(graph)) + graph


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def run(tcinfer, path, label):
    # GNU time execs tcinfer from a small process, so the peak RSS is tcinfer's own (a fork of
    # this Python process would count Python's pages too)
    with tempfile.NamedTemporaryFile("r") as rep:
        p = subprocess.run(["/usr/bin/time", "-o", rep.name, "-f", "%e %U %S %M", tcinfer, "--info",
                            path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall, user, sys_, kb = rep.read().split()[-4:]
    last = p.stderr.strip().splitlines()
    result = "ok" if p.returncode == 0 else f"exit {p.returncode}: {last[-1] if last else ''}"
    print(f"{label:<30} {float(wall):7.2f} s wall {float(user) + float(sys_):6.2f} s CPU "
          f"peak RSS {int(kb) / 1024:7.1f} MB  {result[:80]}")
    sys.stdout.flush()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tcinfer = sys.argv[1]
    sizes = [int(a) for a in sys.argv[2:]] or [10000, 40000, 100000]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "empty.onnx")
        with open(path, "wb") as f:
            f.write(empty_nodes(8 << 20))
        run(tcinfer, path, "8 MB of empty nodes")
        for n in sizes:
            for reverse in (False, True):
                path = os.path.join(d, f"chain_{n}_{int(reverse)}.onnx")
                onnx.save(chain(n, reverse), path)
                run(tcinfer, path, f"{n}-node chain{' reversed' if reverse else ''}")


if __name__ == "__main__":
    main()
