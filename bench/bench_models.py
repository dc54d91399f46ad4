#!/usr/bin/env python3
"""Times tcinfer against PyTorch (fp16, channels_last, CUDA graph) on torchvision models.

Runs on the GPU machine: exports the models to ONNX, times both per batch size, prints a markdown
table and the project's headline checks, optionally the fp16-vs-fp32 accuracy of tcinfer.
Standard library + numpy + torch/torchvision only; torch is imported lazily so the parsing and
formatting parts can be exercised without it.
"""

import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import time
import traceback
import warnings

MODELS = ("resnet50", "mobilenet_v2", "efficientnet_b0", "vgg16")
IMAGE = (3, 224, 224)
ACCURACY_BATCH = 64
OPSET = 17
CALIBRATION_BATCHES = 4  # of 32 random images, for the BatchNorm statistics (build_model)

# Project targets (see the brief / DESIGN.md)
TARGET_B256_SPEEDUP = 1.2  # resnet50, batch 256: PyTorch ms / tcinfer ms
TARGET_B1_LATENCY_RATIO = 1.0  # every model, batch 1: tcinfer ms / PyTorch ms
TARGET_TOP1 = ACCURACY_BATCH  # top-1 agreement out of ACCURACY_BATCH
TARGET_REL_L2 = 2e-3

_NUM = r"([-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|inf|nan|-nan))"
BENCH_RE = re.compile(
    r"bench: (\d+) runs after (\d+) warm-up: median " + _NUM + r" ms, p90 " + _NUM
    + r" ms, p99 " + _NUM + r" ms, throughput " + _NUM + r"/s \(batch (\d+)\)")
COMPARE_RE = re.compile(
    r"compare '([^']*)' \(fp16 GPU vs fp32 CPU\): max abs " + _NUM + r", mean abs " + _NUM
    + r", rel L2 " + _NUM + r", cosine " + _NUM
    + r"(?:, top-1 (\d+)/(\d+), top-5 (\d+)/(\d+))?(?:, (\d+) non-finite)?")


def log(*parts):
    print(*parts, flush=True)


def warn(msg):
    print("warning: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- arguments

def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not an integer: %r" % text)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be positive: %r" % text)
    return v


def _int_list(text):
    items = [t.strip() for t in text.split(",")]
    if not items or any(not t for t in items):
        raise argparse.ArgumentTypeError("want a comma-separated list of integers, got %r" % text)
    return [_positive_int(t) for t in items]


def _model_list(text):
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in MODELS]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            "unknown model(s) %s; choose from %s" % (", ".join(bad) or "(none)", ",".join(MODELS)))
    return names


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Benchmark tcinfer against PyTorch (fp16, channels_last, CUDA graph) on "
                    "torchvision models exported to ONNX.")
    p.add_argument("--out", default="out/bench", help="folder for the ONNX files (default %(default)s)")
    p.add_argument("--force", action="store_true", help="re-export models whose ONNX file exists")
    p.add_argument("--models", type=_model_list, default=list(MODELS),
                   help="comma-separated subset of %s" % ",".join(MODELS))
    p.add_argument("--batches", type=_int_list, default=[1, 32, 256],
                   help="comma-separated batch sizes (default 1,32,256)")
    p.add_argument("--iters", type=_positive_int, default=100,
                   help="timed runs per cell (default %(default)s; fewer where one run is slow, "
                        "see --cell-seconds)")
    p.add_argument("--warmup", type=_positive_int, default=20, help="untimed runs first (default %(default)s)")
    p.add_argument("--cell-seconds", type=float, default=3.0,
                   help="cap on the timed part of one cell: iters shrink (not below 10) so that "
                        "iters x PyTorch median stays under this (default %(default)s)")
    p.add_argument("--tcinfer", default="build/tcinfer", help="tcinfer binary (default %(default)s)")
    p.add_argument("--timeout", type=float, default=180.0,
                   help="seconds one tcinfer call may take (default %(default)s)")
    p.add_argument("--kernels", default="auto,cudnn",
                   help="tcinfer --kernels families to time, comma-separated; the first is the "
                        "one compared with PyTorch (default %(default)s)")
    p.add_argument("--report", metavar="FILE", help="also write the report (markdown) to FILE")
    p.add_argument("--accuracy", action="store_true",
                   help="also run tcinfer --compare (fp16 GPU vs fp32 CPU) at batch %d" % ACCURACY_BATCH)
    p.add_argument("--accuracy-kernels", default="auto",
                   help="tcinfer --kernels families whose accuracy --accuracy measures, "
                        "comma-separated (default %(default)s; auto,wmma,cudnn covers every family)")
    p.add_argument("--no-pytorch", action="store_true",
                   help="time tcinfer only (the models must be exported already, or torch present)")
    return p.parse_args(argv)


# ---------------------------------------------------------------- tcinfer runs

def parse_bench(text):
    """The numbers of tcinfer's --bench line, or None."""
    m = BENCH_RE.search(text)
    if not m:
        return None
    return {"runs": int(m.group(1)), "warmup": int(m.group(2)), "median_ms": float(m.group(3)),
            "p90_ms": float(m.group(4)), "p99_ms": float(m.group(5)),
            "throughput": float(m.group(6)), "batch": int(m.group(7))}


def parse_compare(text, output="logits"):
    """The numbers of tcinfer's --compare line for OUTPUT (else the first float output), or None."""
    found = None
    for m in COMPARE_RE.finditer(text):
        if found is None or m.group(1) == output:
            found = m
        if m.group(1) == output:
            break
    if not found:
        return None
    g = found.groups()
    r = {"output": g[0], "max_abs": float(g[1]), "mean_abs": float(g[2]), "rel_l2": float(g[3]),
         "cosine": float(g[4]), "top1": None, "top5": None, "rows": None,
         "non_finite": int(g[9]) if g[9] else 0}
    if g[5] is not None:
        r["top1"], r["rows"], r["top5"] = int(g[5]), int(g[6]), int(g[7])
    return r


def first_error_line(stderr, stdout, rc):
    """The line that best says why tcinfer failed."""
    # progress lines ("tcinfer: choosing kernels: 12/53") say nothing about a failure
    lines = [l.strip() for l in (stderr or "").splitlines()
             if l.strip() and not re.fullmatch(r"tcinfer: [a-z -]+: \d+/\d+( \(\d+\.\d s\))?",
                                                l.strip())]
    for l in lines:
        if "error" in l.lower() or l.startswith("tcinfer:"):
            return l
    if lines:
        return lines[0]
    lines = [l.strip() for l in (stdout or "").splitlines() if l.strip()]
    if rc != 0:
        return "exit status %d%s" % (rc, (": " + lines[-1]) if lines else "")
    return "no result line in the output" + ((": " + lines[-1]) if lines else "")


def run_tcinfer(binary, args, timeout):
    """(stdout, error): error is None on exit status 0, else a one-line reason."""
    cmd = [binary] + args
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           errors="replace", timeout=timeout)
    except FileNotFoundError:
        return "", "tcinfer not found at %s" % binary
    except PermissionError as e:
        return "", "cannot run %s: %s" % (binary, e)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return out, "timed out after %gs" % timeout
    if p.returncode != 0:
        return p.stdout, first_error_line(p.stderr, p.stdout, p.returncode)
    return p.stdout, None


def tcinfer_bench(binary, model_path, batch, iters, warmup, timeout, kernels="auto"):
    """{'median_ms',...} or {'error': line}."""
    args = [model_path, "--backend", "gpu", "--shape", "input:%dx%dx%dx%d" % ((batch,) + IMAGE),
            "--kernels", kernels, "--random", "0", "--quiet", "--bench", str(iters), "--warmup",
            str(warmup)]
    out, err = run_tcinfer(binary, args, timeout)
    r = parse_bench(out)
    if err is not None:
        return {"error": err}
    if r is None:
        return {"error": first_error_line("", out, 0)}
    if r["batch"] != batch:
        return {"error": "tcinfer reports batch %d, asked for %d" % (r["batch"], batch)}
    return r


def accuracy_input(path):
    """The accuracy batch (uniform [-1, 1), seed 0) as a .npy file both engines read."""
    import numpy as np
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (ACCURACY_BATCH,) + IMAGE).astype(np.float32)
    np.save(path, x)
    return x


def pytorch_fp16_error(torch, torchvision, name, x):
    """PyTorch fp16 (channels_last) against PyTorch fp64 on the same batch: what an fp16 engine
    built on cuDNN gets on this model, for reading tcinfer's error."""
    import numpy as np
    model = build_model(torch, torchvision, name).cuda()
    try:
        with torch.no_grad():
            xs = torch.from_numpy(x).cuda()
            ref = model.double()(xs.double()).cpu().numpy()
            half = model.half().to(memory_format=torch.channels_last)
            got = half(xs.half().contiguous(memory_format=torch.channels_last)).double().cpu().numpy()
    finally:
        del model
        torch.cuda.empty_cache()
    rel = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    return {"rel_l2": rel, "top1": int((got.argmax(1) == ref.argmax(1)).sum())}


def tcinfer_accuracy(binary, model_path, timeout, input_path, kernels="auto"):
    args = [model_path, "--backend", "gpu", "--kernels", kernels, "--shape",
            "input:%dx%dx%dx%d" % ((ACCURACY_BATCH,) + IMAGE), "input=" + input_path, "--compare",
            "--quiet"]
    out, err = run_tcinfer(binary, args, timeout)
    r = parse_compare(out)
    if err is not None:
        return {"error": err}
    if r is None:
        return {"error": first_error_line("", out, 0)}
    return r


def tcinfer_version(binary):
    out, err = run_tcinfer(binary, ["--version"], 30)
    return out.strip() if err is None and out.strip() else "unknown (%s)" % (err or "no output")


def resolve_binary(path):
    """A relative path that is not there from the working folder is tried from the repository root."""
    if os.path.isabs(path) or os.path.exists(path):
        return os.path.abspath(path)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    alt = os.path.join(root, path)
    return alt if os.path.exists(alt) else os.path.abspath(path)


# ---------------------------------------------------------------- formatting

def fmt_rate(images_per_s):
    if images_per_s >= 10000:
        return "%.1fk/s" % (images_per_s / 1000.0)
    return "%.0f/s" % images_per_s


def fmt_ms(ms):
    if ms >= 100:
        return "%.1f" % ms
    if ms >= 10:
        return "%.2f" % ms
    return "%.3f" % ms


def _cell_text(text, limit=80):
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def fmt_time_cell(result, batch):
    if result is None:
        return "-"
    if "error" in result:
        return _cell_text("error: " + result["error"])
    ms = result["median_ms"]
    rate = 1000.0 * batch / ms if ms > 0 else 0.0
    return "%s (%s)" % (fmt_ms(ms), fmt_rate(rate))


def speedup(pt, tc):
    """PyTorch ms / tcinfer ms (> 1: tcinfer faster), or None."""
    if not pt or not tc or "error" in pt or "error" in tc:
        return None
    if pt["median_ms"] <= 0 or tc["median_ms"] <= 0:
        return None
    return pt["median_ms"] / tc["median_ms"]


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def timing_table(results, families):
    """results: list of dicts model, batch, pytorch, tcinfer (each a result dict or None) and
    by_family (tcinfer results of the other --kernels families)."""
    rows = []
    for r in results:
        s = speedup(r["pytorch"], r["tcinfer"])
        rows.append([r["model"], r["batch"], fmt_time_cell(r["pytorch"], r["batch"]),
                     fmt_time_cell(r["tcinfer"], r["batch"]), "%.2fx" % s if s is not None else "-"]
                    + [fmt_time_cell(r["by_family"].get(f), r["batch"]) for f in families[1:]])
    return markdown_table(["model", "batch", "PyTorch ms (img/s)",
                           "tcinfer %s ms (img/s)" % families[0], "speed-up"]
                          + ["tcinfer %s ms (img/s)" % f for f in families[1:]], rows)


def family_checks(results, families):
    """The first family (auto) must be at least as fast as each other one, within 3% of noise."""
    lines = []
    for r in results:
        for f in families[1:]:
            a, b = r["tcinfer"], r["by_family"].get(f)
            if not a or not b or "error" in a or "error" in b:
                continue
            ok = a["median_ms"] <= b["median_ms"] * 1.03
            lines.append("%s: %s batch %d: %s %s ms <= %s %s ms (+3%% noise)"
                         % ("PASS" if ok else "FAIL", r["model"], r["batch"], families[0],
                            fmt_ms(a["median_ms"]), f, fmt_ms(b["median_ms"])))
    return lines


def headline_checks(results, models):
    """Lines 'PASS/FAIL/n/a: ...' for the project's performance targets."""
    by = {(r["model"], r["batch"]): r for r in results}
    lines = []
    r = by.get(("resnet50", 256))
    s = speedup(r["pytorch"], r["tcinfer"]) if r else None
    if s is None:
        why = "not measured" if r is None else "no result"
        lines.append("n/a : resnet50 batch 256 throughput speed-up >= %.1f (%s)" % (TARGET_B256_SPEEDUP, why))
    else:
        lines.append("%s: resnet50 batch 256 throughput speed-up %.2f >= %.1f"
                     % ("PASS" if s >= TARGET_B256_SPEEDUP else "FAIL", s, TARGET_B256_SPEEDUP))
    for m in models:
        r = by.get((m, 1))
        s = speedup(r["pytorch"], r["tcinfer"]) if r else None
        if s is None:
            why = "not measured" if r is None else "no result"
            lines.append("n/a : %s batch 1 latency tcinfer/PyTorch <= %.1f (%s)"
                         % (m, TARGET_B1_LATENCY_RATIO, why))
        else:
            ratio = 1.0 / s
            lines.append("%s: %s batch 1 latency tcinfer/PyTorch %.2f <= %.1f (%s vs %s ms)"
                         % ("PASS" if ratio <= TARGET_B1_LATENCY_RATIO else "FAIL", m, ratio,
                            TARGET_B1_LATENCY_RATIO, fmt_ms(r["tcinfer"]["median_ms"]),
                            fmt_ms(r["pytorch"]["median_ms"])))
    return lines


def accuracy_ok(a):
    return ("error" not in a and a.get("top1") == TARGET_TOP1 and a.get("rows") == ACCURACY_BATCH
            and a["rel_l2"] <= TARGET_REL_L2 and not a.get("non_finite"))


def accuracy_table(acc):
    """acc: list of (model, --kernels family, result dict); a result may carry "pytorch"
    (pytorch_fp16_error)."""
    rows = []
    for model, fam, a in acc:
        if "error" in a:
            rows.append([model, fam, _cell_text("error: " + a["error"]), "", "", "", "", "", "FAIL", "-"])
            continue
        pt = a.get("pytorch")
        pt_cell = ("%.3g, top-1 %d/%d" % (pt["rel_l2"], pt["top1"], ACCURACY_BATCH)
                   if pt and "error" not in pt else _cell_text((pt or {}).get("error", "-")))
        t1 = "%d/%d" % (a["top1"], a["rows"]) if a["top1"] is not None else "-"
        t5 = "%d/%d" % (a["top5"], a["rows"]) if a["top5"] is not None else "-"
        nf = (" (%d non-finite)" % a["non_finite"]) if a["non_finite"] else ""
        rows.append([model, fam, "%.3g" % a["max_abs"], "%.3g" % a["mean_abs"],
                     "%.3g%s" % (a["rel_l2"], nf), "%.6f" % a["cosine"], t1, t5,
                     "PASS" if accuracy_ok(a) else "FAIL", pt_cell])
    return markdown_table(["model", "kernels", "max abs", "mean abs", "rel L2", "cosine", "top-1", "top-5",
                           "top-1 %d/%d, rel L2 <= %g" % (TARGET_TOP1, ACCURACY_BATCH, TARGET_REL_L2),
                           "PyTorch fp16 vs fp64: rel L2, top-1"],
                          rows)


def error_text(exc):
    first = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, first[0] if first else "")


# ---------------------------------------------------------------- torch parts

def build_model(torch, torchvision, name):
    """Random weights (seed 0) with BatchNorm statistics measured on random images.

    torchvision's initialisation in eval mode leaves BatchNorm as the identity, and in
    MobileNetV2 / EfficientNet-B0 activations then shrink by ~50x per block: logits of 1e-9 and
    1e-14, below fp16's range, which no fp16 engine can represent. Recalibrating the running
    statistics (as after training) keeps every layer near unit scale, like a trained network,
    while the weights stay random."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if norms:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model.to(device).eval()  # dropout and stochastic depth off; only BatchNorm measures
        for m in norms:
            m.train()
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for _ in range(CALIBRATION_BATCHES):
                model(torch.randn((32,) + IMAGE, generator=g).to(device))
        model.cpu()
    return model.eval()


def export_onnx(torch, torchvision, name, path, force):
    """Writes PATH unless it exists (or force). Returns a note on how it was made."""
    if os.path.exists(path) and not force:
        return "exists"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    model = build_model(torch, torchvision, name)
    # batch 2: torch.export specialises a batch of 1, and the TorchScript exporter does not care
    x = torch.randn((2,) + IMAGE)
    tmp = path + ".tmp"
    t0 = time.time()
    try:
        how = _export_to(torch, name, model, x, tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    os.replace(tmp, path)
    return "%s, %.1f s, %.1f MB" % (how, time.time() - t0, os.path.getsize(path) / 1e6)


def _export_to(torch, name, model, x, tmp):
    how = "TorchScript exporter"
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            torch.onnx.export(model, (x,), tmp, dynamo=False, opset_version=OPSET,
                              input_names=["input"], output_names=["logits"],
                              dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                              do_constant_folding=True)
    except Exception as e:  # removed or failing: the dynamo exporter is the fallback
        warn("%s: TorchScript ONNX export unavailable (%s); using dynamo=True (BatchNorm may stay "
             "unfused in the file)" % (name, error_text(e)))
        how = "dynamo exporter"
        batch = torch.export.Dim("batch", min=1, max=4096)
        with torch.no_grad():
            prog = torch.onnx.export(model, (x,), tmp, dynamo=True, opset_version=OPSET,
                                     input_names=["input"], output_names=["logits"],
                                     dynamic_shapes=({0: batch},))
        if prog is not None and not os.path.exists(tmp):
            prog.save(tmp)
    return how


def pytorch_bench(torch, model, batch, iters, warmup, cell_seconds):
    """CUDA-graph replays of the fp16 channels_last model; median ms and the iters used."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn((batch,) + IMAGE, generator=g).to("cuda", torch.float16)
    x = x.contiguous(memory_format=torch.channels_last)
    graph = y = None
    try:
        with torch.inference_mode():
            # warm-up (and cuDNN autotuning) on a side stream before capture, as the CUDA graph docs show
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    model(x)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                y = model(x)
            for _ in range(warmup):
                graph.replay()
            torch.cuda.synchronize()
            if not torch.isfinite(y.float()).all().item():
                warn("PyTorch output has non-finite values (batch %d)" % batch)
            # shrink iters where one replay is slow so a cell stays within cell_seconds
            t0 = time.perf_counter()
            for _ in range(3):
                graph.replay()
            torch.cuda.synchronize()
            est_ms = (time.perf_counter() - t0) * 1000.0 / 3
            n = max(10, min(iters, int(cell_seconds * 1000.0 / max(est_ms, 1e-3))))
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(n)]
            for start, end in events:
                start.record()
                graph.replay()
                end.record()
            torch.cuda.synchronize()
            times = [s.elapsed_time(e) for s, e in events]
        ms = statistics.median(times)
        times.sort()
        return {"median_ms": ms, "p90_ms": times[int(0.9 * (n - 1))], "runs": n}
    finally:
        graph = y = x = None  # so empty_cache can return the graph's pool
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


# ---------------------------------------------------------------- main

def environment(torch, binary):
    env = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "gpu": "unknown",
           "torch": "not available", "cudnn": "unknown", "tcinfer": tcinfer_version(binary)}
    if torch is not None:
        env["torch"] = torch.__version__
        try:
            env["cudnn"] = str(torch.backends.cudnn.version())
        except Exception as e:
            env["cudnn"] = error_text(e)
        try:
            env["gpu"] = torch.cuda.get_device_name()
        except Exception as e:
            env["gpu"] = error_text(e)
    return env


def import_torch(need):
    try:
        import torch
        import torchvision
        return torch, torchvision
    except Exception as e:
        if need:
            raise SystemExit("bench_models: torch and torchvision are needed (%s)" % error_text(e))
        warn("torch not importable (%s): tcinfer only, with the ONNX files already in --out"
             % error_text(e))
        return None, None


def main(argv=None):
    args = parse_args(argv)
    binary = resolve_binary(args.tcinfer)
    out_dir = args.out
    paths = {m: os.path.join(out_dir, m + ".onnx") for m in args.models}
    need_torch = not args.no_pytorch or args.force or any(not os.path.exists(p) for p in paths.values())
    torch, torchvision = import_torch(need_torch)
    if torch is not None and not args.no_pytorch and not torch.cuda.is_available():
        raise SystemExit("bench_models: PyTorch sees no CUDA device")
    if not os.path.exists(binary):
        warn("no tcinfer at %s: every tcinfer cell will be an error (build it, or give --tcinfer)" % binary)
    env = environment(torch, binary)
    log("# tcinfer vs PyTorch, %s" % env["date"])
    log("GPU %s; torch %s, cuDNN %s; %s" % (env["gpu"], env["torch"], env["cudnn"], env["tcinfer"]))
    started = time.time()
    failures = 0

    # 1. ONNX files
    export_error = {}
    for m in args.models:
        try:
            note = export_onnx(torch, torchvision, m, paths[m], args.force)
            log("export %s: %s (%s)" % (m, paths[m], note))
        except Exception as e:
            export_error[m] = error_text(e)
            failures += 1
            log("export %s FAILED: %s" % (m, export_error[m]))
            traceback.print_exc()
            sys.stderr.flush()

    # 2. timings
    results = []
    families = [f for f in args.kernels.split(",") if f]
    if torch is not None and not args.no_pytorch:
        torch.backends.cudnn.benchmark = True
    for m in args.models:
        model, model_error = None, None
        if torch is not None and not args.no_pytorch:
            try:
                model = build_model(torch, torchvision, m).half().to("cuda")
                model = model.to(memory_format=torch.channels_last)
            except Exception as e:
                model_error = error_text(e)
        for b in args.batches:
            row = {"model": m, "batch": b, "pytorch": None, "tcinfer": None, "by_family": {}}
            iters = args.iters
            if model_error is not None:
                row["pytorch"] = {"error": model_error}
            elif model is not None:
                try:
                    row["pytorch"] = pytorch_bench(torch, model, b, args.iters, args.warmup, args.cell_seconds)
                    iters = row["pytorch"]["runs"]
                except Exception as e:
                    row["pytorch"] = {"error": error_text(e)}
                    traceback.print_exc()
                    sys.stderr.flush()
                    try:
                        torch.cuda.empty_cache()
                    except Exception:
                        pass
            if m in export_error:
                row["tcinfer"] = {"error": "export failed: " + export_error[m]}
            else:
                for f in families:
                    row["by_family"][f] = tcinfer_bench(binary, paths[m], b, iters, args.warmup,
                                                        args.timeout, f)
                row["tcinfer"] = row["by_family"][families[0]]
            failures += sum(1 for k in ("pytorch",) if row[k] and "error" in row[k])
            failures += sum(1 for v in row["by_family"].values() if "error" in v)
            s = speedup(row["pytorch"], row["tcinfer"])
            log(("%-16s b%-4d PyTorch %-24s tcinfer %-24s %s" % (
                m, b, fmt_time_cell(row["pytorch"], b), fmt_time_cell(row["tcinfer"], b),
                ("speed-up %.2fx" % s) if s is not None else "")).rstrip())
            results.append(row)
        del model
        if torch is not None and not args.no_pytorch:
            torch.cuda.empty_cache()

    # 3. accuracy
    acc = []
    if args.accuracy:
        input_path = os.path.join(out_dir, "accuracy_input.npy")
        x = accuracy_input(input_path)
        acc_families = [f for f in args.accuracy_kernels.split(",") if f]
        for m in args.models:
            pt = None  # PyTorch's own fp16 error: once per model, shown on every family's row
            for fam in acc_families:
                if m in export_error:
                    a = {"error": "export failed: " + export_error[m]}
                else:
                    a = tcinfer_accuracy(binary, paths[m], args.timeout, input_path, fam)
                    if torch is not None and not args.no_pytorch and "error" not in a and pt is None:
                        try:
                            pt = pytorch_fp16_error(torch, torchvision, m, x)
                        except Exception as e:
                            pt = {"error": error_text(e)}
                    if pt is not None and "error" not in a:
                        a["pytorch"] = pt
                if "error" in a:
                    failures += 1
                acc.append((m, fam, a))
                log("accuracy %-16s %-6s %s" % (m, fam, ("error: " + a["error"]) if "error" in a else
                                                "rel L2 %.3g, top-1 %s/%s" % (a["rel_l2"], a["top1"], a["rows"])))

    table = timing_table(results, families)
    checks = headline_checks(results, args.models) + family_checks(results, families)
    report = ["# tcinfer vs PyTorch on %s" % env["gpu"], "",
              "%s; torch %s, cuDNN %s; %s." % (env["date"], env["torch"], env["cudnn"], env["tcinfer"]),
              "PyTorch: fp16, channels_last, cuDNN benchmark mode, CUDA graph replay. tcinfer: "
              "--backend gpu --bench. Median of up to %d timed runs after %d warm-up; random "
              "weights (seed 0) and inputs. Speed-up = PyTorch ms / tcinfer ms." % (args.iters, args.warmup),
              "", table, "", "Targets:", ""] + ["- " + c for c in checks]
    if acc:
        report += ["", "Accuracy, tcinfer fp16 GPU vs its fp32 CPU reference, batch %d of seeded "
                       "uniform [-1, 1) inputs; the last column is PyTorch fp16 against PyTorch "
                       "fp64 on the same inputs and weights:" % ACCURACY_BATCH, "",
                   accuracy_table(acc)]
    report += ["", "Run time %.0f s." % (time.time() - started)]
    text = "\n".join(report) + "\n"
    log("")
    log(text)
    if args.report:
        try:
            d = os.path.dirname(os.path.abspath(args.report))
            os.makedirs(d, exist_ok=True)
            with open(args.report, "w") as f:
                f.write(text)
            log("report written to %s" % args.report)
        except OSError as e:
            warn("cannot write the report: %s" % e)
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
