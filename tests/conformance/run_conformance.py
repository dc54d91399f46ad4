#!/usr/bin/env python3
"""Runs ONNX's backend node test cases through tcinfer and checks them as onnx's runner does.

Cases come from onnx.backend.test.case.node.collect_testcases() (in memory, no data files).
A case runs when all its ops (every node, subgraphs included, default domain) are in
`tcinfer --list-ops` for the case's opset. Results:
  passed
  failed                 wrong dtype/shape/values, crash, timeout, or exit status other than 0/3
  skipped-unsupported-op not run: an op or opset tcinfer does not list
  skipped-unsupported    tcinfer exited 3 (TCI_ERR_UNSUPPORTED), or the case needs a non-tensor
                         value (sequence, optional) that the CLI cannot pass
The last line is "conformance: N passed, N failed, N skipped"; the exit status is non-zero when
a case failed or fewer than --min-passed cases passed.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_RTOL = 1e-3  # what onnx's backend runner uses when a case does not say
DEFAULT_ATOL = 1e-7

PASSED, FAILED, SKIP_OP, SKIP_UNSUPPORTED = "passed", "failed", "skip-op", "skip-unsupported"


def supported_ops(tcinfer):
    proc = subprocess.run([tcinfer, "--list-ops"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        sys.exit(f"run_conformance: `{tcinfer} --list-ops` exited {proc.returncode}: "
                 f"{proc.stderr.strip()}")
    ops = {}
    for line in proc.stdout.splitlines():
        m = re.fullmatch(r"\s*(\w+)\s+(\d+)-(\d+)\s+(cpu|cpu,gpu)\s*", line)
        if m:
            ops[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return ops


def all_nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from all_nodes(g)


def default_opset(model):
    for op in model.opset_import:
        if op.domain in ("", "ai.onnx"):
            return op.version
    return None


def missing_ops(model, ops):
    """Reasons the case cannot run (empty when every op is listed for the model's opset)."""
    opset = default_opset(model)
    reasons = set()
    for node in all_nodes(model.graph):
        if node.domain not in ("", "ai.onnx"):
            reasons.add(f"domain {node.domain}")
        elif node.op_type not in ops:
            reasons.add(node.op_type)
        elif opset is None or not ops[node.op_type][0] <= opset <= ops[node.op_type][1]:
            reasons.add(f"{node.op_type}-{opset}")
    return sorted(reasons)


def op_label(model):
    return "+".join(sorted({n.op_type for n in all_nodes(model.graph)}))


def runtime_inputs(model):
    initializers = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


def non_tensor_reason(case):
    inputs, outputs = case.data_sets[0]
    for value in list(runtime_inputs(case.model)) + list(case.model.graph.output):
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            return f"runner: {kind} value '{value.name}' cannot be passed to the CLI"
    for v in list(inputs) + list(outputs):
        if not isinstance(v, (np.ndarray, np.generic, onnx.TensorProto)):
            return f"runner: {type(v).__name__} value cannot be passed to the CLI"
        if isinstance(v, (np.ndarray, np.generic)) and np.asarray(v).dtype.kind in "OSU":
            return "runner: string tensors cannot be passed to the CLI"
    return None


def as_array(value):
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value)


def relative_l2(actual, expected):
    """||a - e|| / ||e|| over the finite positions; non-finite ones must match exactly."""
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    finite = np.isfinite(e)
    if not np.array_equal(np.isnan(a), np.isnan(e)) or \
            not np.array_equal(a[np.isinf(e)], e[np.isinf(e)]) or not np.isfinite(a[finite]).all():
        return float("inf")
    diff = np.linalg.norm((a - e)[finite])
    norm = np.linalg.norm(e[finite])
    return diff / norm if norm > 0 else (0.0 if diff <= 1e-3 else float("inf"))


def compare(index, name, actual, expected, rtol, atol, l2_bound=None):
    """None when the output matches, else a one-line reason. With l2_bound (the fp16 GPU
    engine), float outputs are held to a relative L2 error instead of element-wise closeness."""
    what = f"output {index} '{name}'"
    if actual.dtype != expected.dtype:
        return f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"{what}: shape {list(actual.shape)}, expected {list(expected.shape)}"
    if l2_bound is not None and np.issubdtype(expected.dtype, np.floating):
        rel = relative_l2(actual, expected)
        return None if rel <= l2_bound else f"{what}: relative L2 error {rel:.3g} above {l2_bound:g}"
    if expected.dtype == np.bool_ or not np.issubdtype(expected.dtype, np.number):
        bad = actual != expected
    else:
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        with np.errstate(invalid="ignore"):
            # np.testing.assert_allclose: NaN must meet NaN, inf must meet the same inf
            close = np.abs(a - e) <= atol + rtol * np.abs(e)
            close |= (np.isnan(a) & np.isnan(e)) | (np.isinf(e) & (a == e))
        bad = ~close
    if not bad.any():
        return None
    first = np.unravel_index(np.argmax(bad), bad.shape) if bad.ndim else ()
    return (f"{what}: {int(bad.sum())}/{bad.size} elements differ, first at "
            f"{list(map(int, first))}: got {actual[first].item()!r}, "
            f"expected {expected[first].item()!r}")


def run_case(case, tcinfer, root, timeout, backend="cpu", l2_bound=None, extra=()):
    """(status, reason) for one case whose ops tcinfer lists."""
    reason = non_tensor_reason(case)
    if reason:
        return SKIP_UNSUPPORTED, reason
    folder = os.path.join(root, case.name)
    os.makedirs(folder, exist_ok=True)
    model_path = os.path.join(folder, "model.onnx")
    with open(model_path, "wb") as f:
        f.write(case.model.SerializeToString())
    inputs, expected = case.data_sets[0]
    out_dir = os.path.join(folder, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    args = [tcinfer, "--backend", backend, *extra, "--quiet", "--json", "--output-dir", out_dir,
            model_path]
    for i, (value, info) in enumerate(zip(inputs, runtime_inputs(case.model))):
        tensor = value if isinstance(value, onnx.TensorProto) else \
            numpy_helper.from_array(np.asarray(value))
        path = os.path.join(folder, f"input_{i}.pb")
        with open(path, "wb") as f:
            f.write(tensor.SerializeToString())
        args.append(f"{info.name}={path}")
    with open(os.path.join(folder, "command.txt"), "w") as f:
        f.write(" ".join(args) + "\n")
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return FAILED, f"timeout after {timeout} s"
    # progress lines ("tcinfer: choosing kernels: 12/53") say nothing about a failure
    err = re.sub(r"(?m)^tcinfer: [a-z -]+: \d+/\d+( \(\d+\.\d s\))?\n", "", proc.stderr)
    message = (err.strip() or proc.stdout.strip() or "(no message)").splitlines()[0]
    message = message.replace(f"{model_path}: ", "")  # the same in every case, noise in reports
    if proc.returncode == 3:
        return SKIP_UNSUPPORTED, message
    if proc.returncode < 0:
        return FAILED, f"crashed (signal {-proc.returncode})"
    if proc.returncode != 0:
        return FAILED, f"exit {proc.returncode}: {message}"
    names = [o.name for o in case.model.graph.output]
    try:  # --json names the file of every output (written as OUT_DIR/NAME.npy)
        files = [o.get("file") for o in json.loads(proc.stdout)["outputs"]]
    except (ValueError, KeyError, TypeError) as e:
        return FAILED, f"unreadable --json output ({e})"
    got = []
    for i in range(len(expected)):
        path = files[i] if i < len(files) else None
        if not path or not os.path.exists(path):
            return FAILED, f"output {i} '{names[i]}' not written"
        try:
            got.append(np.load(path, allow_pickle=False))
        except Exception as e:  # a malformed .npy is a tcinfer bug, not a runner crash
            return FAILED, f"output {i} '{names[i]}': unreadable .npy ({e})"
    return check_outputs(case, got, l2_bound)


def check_outputs(case, got, l2_bound=None):
    """(status, reason) of a case's outputs against its expected ones."""
    expected = case.data_sets[0][1]
    rtol = case.rtol if case.rtol is not None else DEFAULT_RTOL
    atol = case.atol if case.atol is not None else DEFAULT_ATOL
    names = [o.name for o in case.model.graph.output]
    if len(got) != len(expected):
        return FAILED, f"{len(got)} outputs, expected {len(expected)}"
    for i, want in enumerate(expected):
        problem = compare(i, names[i], got[i], as_array(want), rtol, atol, l2_bound)
        if problem:
            return FAILED, problem
    return PASSED, ""


def run_case_in_process(case, tcinfer_module):
    """run_case on the CPU backend through the Python package, in this process: one case costs
    what the library does, where a CUDA build's CLI spends ~0.2 s per start mapping the CUDA
    libraries (over 1,000 cases, most of the runner's time)."""
    reason = non_tensor_reason(case)
    if reason:
        return SKIP_UNSUPPORTED, reason
    inputs = case.data_sets[0][0]
    feeds = {info.name: as_array(value)
             for value, info in zip(inputs, runtime_inputs(case.model))}
    error = tcinfer_module.TcinferError
    try:
        with tcinfer_module.Engine(case.model.SerializeToString(), backend="cpu") as engine:
            got = engine.run(feeds)
    except error as e:
        message = str(e).splitlines()[0] if str(e) else "(no message)"
        if e.status_name in ("TCI_ERR_UNSUPPORTED",) or "no tcinfer counterpart" in message \
                or "no numpy counterpart" in message:
            return SKIP_UNSUPPORTED, message
        return FAILED, f"{e.status_name}: {message}"
    return check_outputs(case, got)


def reason_group(message):
    """An unsupported message without what differs between cases (node and value names):
    "Op: unsupported attribute 'x'", "graph input has element type int4, ..."."""
    message = re.sub(r"^tcinfer: ", "", message)
    m = re.match(r"node '.*?' \((\w+)\): (.*)", message)
    if m:
        return f"{m.group(1)}: {m.group(2)}"
    return re.sub(r"^(graph (?:input|output)) '.*?'", r"\1", message)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tcinfer", required=True, help="path of the tcinfer binary")
    p.add_argument("--min-passed", type=int, default=0,
                   help="fail when fewer cases pass (guards against everything being skipped)")
    p.add_argument("--filter", default="",
                   help="only cases whose name this regular expression matches somewhere "
                        "(a plain word: the names that contain it; 'split|slice': either)")
    p.add_argument("--keep", help="write the case folders here and keep them")
    p.add_argument("--jobs", type=int, default=2, help="cases run at once")
    p.add_argument("--timeout", type=float, default=60, help="seconds per case")
    p.add_argument("--verbose", action="store_true", help="print every case's result")
    p.add_argument("--backend", choices=("cpu", "gpu"), default="cpu",
                   help="gpu: the fp16 engine, float outputs held to --l2-bound")
    p.add_argument("--l2-bound", type=float, default=5e-3,
                   help="relative L2 bound of float outputs on the GPU backend; 0: the cases' "
                        "own rtol/atol, as on the CPU (for --precision fp32)")
    p.add_argument("--known-failure", action="append", default=[], metavar="CASE",
                   help="a case expected to fail in this configuration (repeatable): reported "
                        "apart, not counted as a failure; passing it is reported too")
    p.add_argument("--in-process", action="store_true",
                   help="CPU backend: run the cases through the Python package (python/, the "
                        "library named by TCINFER_LIBRARY) in this process instead of one "
                        "tcinfer process per case")
    p.add_argument("--tcinfer-arg", action="append", default=[],
                   help="one more tcinfer argument (repeatable), e.g. --tcinfer-arg=--precision "
                        "--tcinfer-arg=fp32")
    args = p.parse_args(argv)
    if args.in_process and (args.backend != "cpu" or args.tcinfer_arg):
        p.error("--in-process runs the CPU backend with default options only")
    module = None
    if args.in_process:
        import tcinfer as module

    start = time.time()
    ops = supported_ops(args.tcinfer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # onnx's case generators warn about deliberate overflow
        from onnx.backend.test.case.node import collect_testcases
        pattern = re.compile(args.filter)
        cases = [c for c in collect_testcases() if pattern.search(c.name)]
    cases.sort(key=lambda c: c.name)

    results = {}
    missing = collections.Counter()
    runnable = []
    for case in cases:
        reasons = missing_ops(case.model, ops)
        if reasons:
            results[case.name] = (SKIP_OP, ", ".join(reasons))
            missing.update(reasons)
        else:
            runnable.append(case)

    root = args.keep or tempfile.mkdtemp(prefix="tci_conformance_")
    os.makedirs(root, exist_ok=True)
    try:
        # threads suffice: each one waits on its own tcinfer process, which does the work
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            l2 = args.l2_bound if args.backend == "gpu" and args.l2_bound > 0 else None
            if module is not None:  # ctypes lets go of the GIL inside the library's calls
                futures = {pool.submit(run_case_in_process, c, module): c for c in runnable}
            else:
                futures = {pool.submit(run_case, c, args.tcinfer, root, args.timeout,
                                       args.backend, l2, args.tcinfer_arg): c
                           for c in runnable}
            for future in concurrent.futures.as_completed(futures):
                case = futures[future]
                try:
                    results[case.name] = future.result()
                except Exception as e:  # a runner bug on one case must not hide the others
                    results[case.name] = (FAILED, f"runner error: {type(e).__name__}: {e}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    labels = {c.name: op_label(c.model) for c in cases}
    by_status = collections.defaultdict(list)
    for name in sorted(results):
        status, reason = results[name]
        by_status[status].append(name)
        if args.verbose:
            print(f"{status:16} {name}  {reason}")

    if missing:
        print(f"not run, ops or opsets tcinfer does not list ({len(by_status[SKIP_OP])} cases):")
        for op, n in sorted(missing.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {op}: {n}")
    if by_status[SKIP_UNSUPPORTED]:
        groups = collections.Counter(reason_group(results[n][1])
                                     for n in by_status[SKIP_UNSUPPORTED])
        print(f"skipped as unsupported ({len(by_status[SKIP_UNSUPPORTED])} cases):")
        for reason, n in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {reason}: {n}")
    if by_status[FAILED]:
        per_op = collections.defaultdict(list)
        for name in by_status[FAILED]:
            per_op[labels[name]].append(name)
        print(f"failed by op ({len(by_status[FAILED])} cases):")
        for label, names in sorted(per_op.items()):
            print(f"  {label}: {len(names)}")
        print("failed cases:")
        for name in by_status[FAILED]:
            print(f"  FAIL {name} [{labels[name]}]: {results[name][1]}")

    known = [n for n in by_status[FAILED] if n in args.known_failure]
    if known:
        print(f"known failures in this configuration ({len(known)}): {', '.join(known)}")
    fixed = [n for n in by_status[PASSED] if n in args.known_failure]
    if fixed:
        print(f"listed as known failures but passed: {', '.join(fixed)}")
    passed, failed = len(by_status[PASSED]), len(by_status[FAILED]) - len(known)
    skipped = len(by_status[SKIP_OP]) + len(by_status[SKIP_UNSUPPORTED])
    print(f"({len(cases)} cases, {len(runnable)} run, {len(by_status[SKIP_OP])} not run for "
          f"missing ops, {len(by_status[SKIP_UNSUPPORTED])} unsupported; "
          f"{time.time() - start:.0f} s)")
    if passed < args.min_passed:
        print(f"only {passed} cases passed, fewer than the floor --min-passed {args.min_passed}")
    print(f"conformance: {passed} passed, {failed} failed, {skipped} skipped"
          + (f", {len(known)} known failures" if known else ""))
    return 1 if failed or passed < args.min_passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
