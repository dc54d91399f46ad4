#!/usr/bin/env python3
"""The error that TF32 itself gives on the generated models: each model run by onnx's reference
evaluator with the inputs of every MatMul, Gemm, Conv and LSTM (X, W, R) rounded to TF32's 10-bit
mantissa (round to nearest even) and the products summed in float64, against onnxruntime's fp32,
on the inputs tests/models/run_models.py feeds. The GPU suite's TF32 bounds must lie above these:
a model whose exact TF32 emulation misses a bound cannot be held to it.

usage: emulate_tf32.py MODELS_DIR [--only a,b]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_conv import Conv as ReferenceConv
from onnx.reference.ops.op_lstm import LSTM as ReferenceLSTM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_models  # noqa: E402


def tf32(x):
    """x rounded to TF32 (fp32 with the low 13 mantissa bits cleared, to nearest even)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
    return bits.astype(np.uint32).view(np.float32)


def product(a, b):
    return tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)


class MatMul(OpRun):
    op_domain = ""

    def _run(self, a, b):
        return (product(a, b).astype(np.float32),)


class Gemm(OpRun):
    op_domain = ""

    def _run(self, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0):
        y = alpha * product(a.T if transA else a, b.T if transB else b)
        if c is not None:
            y = y + beta * c
        return (y.astype(np.float32),)


class Conv(ReferenceConv):
    def _run(self, x, w, b=None, **attributes):
        return super()._run(tf32(x), tf32(w), b, **attributes)


class LSTM(ReferenceLSTM):
    def _run(self, x, w, r, *rest, **attributes):
        return super()._run(tf32(x), tf32(w), tf32(r), *rest, **attributes)


def rel_l2(x, ref):
    ref = ref.astype(np.float64)
    return np.linalg.norm(x.astype(np.float64) - ref) / np.linalg.norm(ref)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models_dir")
    p.add_argument("--only", help="comma-separated model names (default: all)")
    args = p.parse_args(argv)
    for name in args.only.split(",") if args.only else run_models.MODELS:
        path = os.path.join(args.models_dir, name + ".onnx")
        model = onnx.load(path)
        specs = run_models.input_specs(model)
        evaluator = ReferenceEvaluator(model, new_ops=[MatMul, Gemm, Conv, LSTM])
        exact = ReferenceEvaluator(model)
        runs = [run_models.FIRST_DIMS]
        if any(isinstance(d, str) for _, _, dims in specs for d in dims):
            runs.append(run_models.SECOND_DIMS)
        for seed, sizes in enumerate(runs):
            feeds = run_models.make_inputs(specs, sizes, seed)
            names, want = run_models.run_onnxruntime(path, feeds)
            for out, got, plain, ref in zip(names, evaluator.run(None, feeds),
                                            exact.run(None, feeds), want):
                rel, plain_rel = (rel_l2(x, ref) for x in (got, plain))
                # the evaluator's own fp32 ops must agree with onnxruntime's first
                note = "" if plain_rel <= 1e-5 else \
                    f"  (not measured: onnx's evaluator in fp32 is {plain_rel:.1e} off)"
                print(f"{name:22s} run {seed}  {out:16s} TF32 emulated rel L2 {rel:.2e}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
