#!/usr/bin/env python3
"""Where a zoo row's fp16 error comes from, step by step, on the GPU machine.

For each model named (bench/zoo.py's names, e.g. timm/fastvit_t8), exports it as the sweep does,
runs the sweep's seeded inputs through the CPU fp32 reference with every node's output marked,
and through the GPU engine as it ships (every step's output marked), unfused (every node's),
and as it ships with the WMMA kernels only; then prints, for each step output of the shipped
engine in order, against the CPU reference:

  rel       the relative L2 error of the tensor, shipped and unfused;
  mean      the relative L2 error of its mean over the spatial dims (rank 4) or the tokens
            (rank 3), shipped and unfused, and their ratio ("<<" past 1.3): averaging keeps a
            systematic error and removes random rounding, so a step whose mean error leaves the
            unfused engine's while its elementwise error does not has a bias;
  chbias    the largest per-channel mean error over batch and space, relative to the tensor's
            mean magnitude.

This found the erf Gelu whose Div read sqrt(2) in fp16 (every output 1.07e-4 too large; see
docs/zoo.md, 2026-12-03). Needs PyTorch with timm/torchvision/transformers, the tcinfer Python
package (python/) and TCINFER_LIBRARY or an installed libtcinfer.

    TCINFER_LIBRARY=build/libtcinfer.so python3 bench/zoo_trace.py --work /tmp/trace \\
        timm/fastvit_t8 tv/maxvit_t
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def stats(got, ref):
    """(relative L2, relative L2 of the spatial/token mean, largest per-channel bias)."""
    e = got.astype(np.float64) - ref.astype(np.float64)
    r = ref.astype(np.float64)
    rel = np.linalg.norm(e) / max(np.linalg.norm(r), 1e-30)
    if r.ndim == 4:
        axes = (2, 3)
    elif r.ndim == 3:
        axes = (1,)
    else:
        return rel, float("nan"), float("nan")
    em, rm = e.mean(axis=axes), r.mean(axis=axes)
    bias = np.abs(e.mean(axis=(0,) + axes)).max() / max(np.abs(r).mean(), 1e-30)
    return rel, np.linalg.norm(em) / max(np.linalg.norm(rm), 1e-30), bias


def float_outputs(engine, inputs):
    names = [o.name for o in engine.outputs]
    return {n: v for n, v in zip(names, engine.run(inputs)) if v.dtype.kind == "f"}


def trace(zoo, torch, tcinfer, name, work):
    t0 = time.time()
    info = zoo.export_one(name, work)
    if "error" in info:
        print(name, info["error"])
        return
    _, feeds, _, _ = zoo.accuracy_inputs(torch, info, work)
    shapes = {n: v.shape for n, v in feeds.items()}
    cpu = tcinfer.Engine(info["onnx"], backend="cpu", shapes=shapes, mark_all_outputs="unfused")
    ref = float_outputs(cpu, feeds)
    cpu.close()
    engines = (("shipped", dict(mark_all_outputs="shipped")),
               ("unfused", dict(mark_all_outputs="unfused")),
               ("wmma", dict(mark_all_outputs="shipped", kernels="wmma")))
    res, order = {}, []
    for label, options in engines:
        try:
            gpu = tcinfer.Engine(info["onnx"], backend="gpu", shapes=shapes, **options)
            outs = float_outputs(gpu, feeds)
            gpu.close()
        except tcinfer.TcinferError as exc:
            print(name, label, "failed:", exc)
            continue
        res[label] = {n: stats(v, ref[n]) for n, v in outs.items()
                      if n in ref and v.shape == ref[n].shape}
        if label == "shipped":
            order = [n for n in outs if n in res[label]]
    print("== %s (%.0f s)" % (name, time.time() - t0))
    print("%-62s %9s %9s | %9s %9s %6s | %9s %9s" % (
        "tensor (shipped order)", "rel sh", "rel un", "mean sh", "mean un", "ratio",
        "chbias sh", "chbias un"))
    for n in order:
        s, u = res["shipped"][n], res.get("unfused", {}).get(n)
        if u is None:
            print("%-62s %9.2e %9s | %9.2e" % (n[-62:], s[0], "-", s[1]))
            continue
        ratio = s[1] / u[1] if u[1] == u[1] and u[1] > 0 else float("nan")
        print("%-62s %9.2e %9.2e | %9.2e %9.2e %6.2f | %9.2e %9.2e%s" % (
            n[-62:], s[0], u[0], s[1], u[1], ratio, s[2], u[2], " <<" if ratio > 1.3 else ""))
    sys.stdout.flush()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+", help="zoo names, e.g. timm/fastvit_t8")
    p.add_argument("--work", default="out/trace", help="exports and inputs (default %(default)s)")
    args = p.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    import torch
    import tcinfer
    import zoo
    for name in args.models:
        trace(zoo, torch, tcinfer, name, args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
