#!/usr/bin/env python3
"""Runs the generated test models through tcinfer's CPU backend and onnxruntime; compares outputs.

Each model runs on seeded random inputs; models with symbolic dims run a second time with other
sizes passed through --shape. Every output must match onnxruntime to a relative L2 error of 1e-5.

  run_models.py --tcinfer build/tcinfer --models-dir build/models [--only resnet_mini,mlp]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

MODELS = [
    "small_cnn",
    "resnet_mini",
    "resnet_mini_external",
    "mobilenetv2_mini",
    "mlp",
    "transformer_block",
    "attention_block",
    "packed_attention_block",
    "bert_block",
    "gpt2_block",
    "gpt2_layers",
    "vit_layers",
    "segmentation_decoder",
    "dense_concat",
    "crnn",
    "resnext_block",
    "grouped_norms",
    "audio_frontend",
    "convnext_blocks",
    "split_blocks",
    "llama_block",
    "llama_mha_block",
    "onnx_attention_block",
    "mixed_attention_block",
]

# models (and GPU precisions; None: every one) the GPU engine refuses, with the node its error must
# name: ops that run on the CPU reference only (README "What runs where"). The refusal is checked;
# a model here that builds on the GPU fails the run until it is taken off this list.
GPU_REFUSED = {}  # none at present

# sizes of the symbolic dims: the first run leaves them to the .npy files, the second says them
# with --shape (sequence 13: a size no kernel tile divides)
FIRST_DIMS = {"N": 1, "S": 16}
SECOND_DIMS = {"N": 2, "S": 13}


def input_specs(model):
    initializers = {t.name for t in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tt = value.type.tensor_type
        dims = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in tt.shape.dim]
        specs.append((value.name, helper.tensor_dtype_to_np_dtype(tt.elem_type), dims))
    return specs


def make_inputs(specs, sizes, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dtype, dims in specs:
        shape = [sizes[d] if isinstance(d, str) else d for d in dims]
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        else:
            # integer/bool inputs are attention masks: 1 keeps a position; each row pads a
            # different number of trailing positions but always keeps position 0, so no
            # softmax row is fully masked
            data = np.ones(shape, dtype=dtype)
            if len(shape) >= 1 and shape[-1] > 1:
                flat = data.reshape(-1, shape[-1])
                for row in range(flat.shape[0]):
                    flat[row, shape[-1] - min(shape[-1] - 1, 1 + 3 * row):] = 0
            feeds[name] = data
    return feeds


def run_onnxruntime(path, feeds):
    options = ort.SessionOptions()
    # no fusions: the reference is each op's plain kernel
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return names, session.run(None, feeds)


def run_tcinfer(tcinfer, path, feeds, shapes, work, timeout, backend="cpu", extra=()):
    args = [tcinfer, "--backend", backend, *extra, "--quiet", "--json", "--output-dir", work]
    for name, shape in shapes.items():
        args += ["--shape", f"{name}:{'x'.join(str(d) for d in shape)}"]
    args.append(path)
    for name, data in feeds.items():
        file = os.path.join(work, f"in_{len(args)}.npy")
        np.save(file, data)
        args.append(f"{name}={file}")
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    if proc.returncode != 0:
        # progress lines ("tcinfer: choosing kernels: 12/53") say nothing about a failure
        err = re.sub(r"(?m)^tcinfer: [a-z -]+: \d+/\d+( \(\d+\.\d s\))?\n", "", proc.stderr)
        lines = (err.strip() or proc.stdout.strip() or "(no message)").splitlines()
        return None, f"exit {proc.returncode}: {lines[0]}"
    # --json names the file of every output (written as WORK/NAME.npy)
    files = [o["file"] for o in json.loads(proc.stdout)["outputs"]]
    return [np.load(f) for f in files], None


def compare(actual, expected):
    """(relative L2, max abs, problem or None)."""
    if actual.dtype != expected.dtype:
        return None, None, f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return None, None, f"shape {actual.shape}, expected {expected.shape}"
    a = actual.astype(np.float64).ravel()
    b = expected.astype(np.float64).ravel()
    if not np.all(np.isfinite(a)):
        return None, None, f"{np.count_nonzero(~np.isfinite(a))} non-finite values"
    norm = np.linalg.norm(b)
    diff = np.linalg.norm(a - b)
    rel = diff / norm if norm > 0 else diff
    return rel, float(np.max(np.abs(a - b))) if a.size else 0.0, None


def gpu_precision(tcinfer_args):
    """The --precision among the extra tcinfer arguments (fp16, the GPU's default, where none)."""
    for i, arg in enumerate(tcinfer_args):
        if arg == "--precision" and i + 1 < len(tcinfer_args):
            return tcinfer_args[i + 1]
        if arg.startswith("--precision="):
            return arg.split("=", 1)[1]
    return "fp16"


def expected_refusal(args, name):
    """The node the GPU engine's error must name for this model, or None where it must run."""
    if args.backend != "gpu" or name not in GPU_REFUSED:
        return None
    precisions, node = GPU_REFUSED[name]
    precision = gpu_precision(args.tcinfer_arg).split("@")[0]
    return node if precisions is None or precision in precisions else None


def check_model(args, name, rows):
    refusal = expected_refusal(args, name)
    path = os.path.join(args.models_dir, f"{name}.onnx")
    if not os.path.exists(path):
        rows.append((name, "-", "-", "-", "-", f"FAIL: {path} missing (run models/generate.py)"))
        return False
    specs = input_specs(onnx.load(path, load_external_data=False))
    symbolic = sorted({d for _, _, dims in specs for d in dims if isinstance(d, str)})
    unknown = [d for d in symbolic if d not in SECOND_DIMS]
    if unknown:
        rows.append((name, "-", "-", "-", "-", f"FAIL: no size for symbolic dims {unknown}"))
        return False
    runs = [("dims from files", FIRST_DIMS, False)]
    if symbolic:
        runs.append(("--shape " + ",".join(f"{d}={SECOND_DIMS[d]}" for d in symbolic),
                     SECOND_DIMS, True))
    ok = True
    for seed, (label, sizes, pass_shapes) in enumerate(runs):
        feeds = make_inputs(specs, sizes, seed)
        # the GPU engine is built for fixed shapes: it always needs them
        pass_shapes = pass_shapes or args.backend == "gpu"
        shapes = {n: feeds[n].shape for n, _, dims in specs
                  if pass_shapes and any(isinstance(d, str) for d in dims)}
        out_names, expected = run_onnxruntime(path, feeds)
        with tempfile.TemporaryDirectory(prefix=f"tci_{name}_") as work:
            actual, error = run_tcinfer(args.tcinfer, path, feeds, shapes, work, args.timeout,
                                        args.backend, args.tcinfer_arg)
        if refusal is not None:
            if error and "exit 3:" in error and refusal in error:
                rows.append((name, label, "-", "-", "-", "refused as expected: " + refusal))
            else:
                rows.append((name, label, "-", "-", "-", "FAIL: expected the GPU engine to "
                             f"refuse {refusal} (GPU_REFUSED), got: {error or 'a run'}"))
                ok = False
            continue
        if error:
            rows.append((name, label, "-", "-", "-", f"FAIL: {error}"))
            ok = False
            continue
        if len(actual) != len(expected):
            rows.append((name, label, "-", "-", "-",
                         f"FAIL: {len(actual)} outputs written, expected {len(expected)}"))
            ok = False
        for out_name, got, want in zip(out_names, actual, expected):
            rel, max_abs, problem = compare(got, want)
            if problem is None and rel > args.tolerance:
                problem = f"rel L2 above {args.tolerance:g}"
            ok = ok and problem is None
            rows.append((name, label, f"{out_name} {list(want.shape)}",
                         "-" if rel is None else f"{rel:.2e}",
                         "-" if max_abs is None else f"{max_abs:.2e}",
                         "ok" if problem is None else f"FAIL: {problem}"))
    return ok


def print_table(rows):
    header = ("model", "run", "output", "rel L2", "max abs", "result")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header) - 1)]
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tcinfer", required=True, help="path of the tcinfer binary")
    p.add_argument("--models-dir", required=True, help="folder generate.py wrote")
    p.add_argument("--only", help="comma-separated model names (default: all)")
    p.add_argument("--tolerance", type=float, default=1e-5, help="relative L2 bound")
    p.add_argument("--timeout", type=float, default=120, help="seconds per tcinfer run")
    p.add_argument("--backend", choices=("cpu", "gpu"), default="cpu",
                   help="gpu: the fp16 engine (exit 77, skipped, where there is no GPU)")
    p.add_argument("--tcinfer-arg", action="append", default=[],
                   help="one more tcinfer argument (repeatable), e.g. --tcinfer-arg=--precision "
                        "--tcinfer-arg=fp32")
    args = p.parse_args(argv)
    if args.backend == "gpu":
        probe = subprocess.run([args.tcinfer, "--devices"], capture_output=True, text=True)
        if probe.returncode != 0 or probe.stdout.startswith("GPUs: 0"):
            print(f"SKIP: no CUDA GPU on this machine ({probe.stdout.strip()})")
            return 77
    names = args.only.split(",") if args.only else MODELS
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    rows = []
    failed = [n for n in names if not check_model(args, n, rows)]
    print_table(rows)
    if failed:
        print(f"models: {len(failed)} of {len(names)} failed: {', '.join(failed)}")
        return 1
    print(f"models: all {len(names)} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
