#!/usr/bin/env python3
"""Times tcinfer against PyTorch (fp16, CUDA graph) on two families of models.

cnn: torchvision ResNet-50, MobileNetV2, EfficientNet-B0, VGG16 (PyTorch channels_last).
transformer: ViT-B/16, DeiT-S, Swin-T, ConvNeXt-T, BERT-base (sequence 128 and 384), GPT-2
small (a 512-token prefill), PyTorch with scaled_dot_product_attention (transformer_bench.py).

Runs on the GPU machine: exports the models to ONNX, times both per batch size, prints a markdown
table and the project's headline checks, optionally the accuracy of tcinfer. --dry-run needs no
GPU: the export and tcinfer's GPU plan of every timed shape (and, with --accuracy, tcinfer's CPU
reference against PyTorch fp32). Standard library + numpy + torch/torchvision (+ timm and
transformers for the transformer family); torch is imported lazily so the parsing and
formatting parts can be exercised without it.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transformer_bench  # noqa: E402
from model_export import error_text  # noqa: E402

MODELS = ("resnet50", "mobilenet_v2", "efficientnet_b0", "vgg16")
FAMILIES = {"cnn": MODELS, "transformer": transformer_bench.MODELS}
FAMILIES["all"] = FAMILIES["cnn"] + FAMILIES["transformer"]
CNN_BATCHES = [1, 32, 256]
CNN_KERNELS = "auto,cudnn"
# "the CNN rows no slower than before" (--baseline): run to run one binary moved by up to 6%
# (docs/benchmarks.md, 2026-12-01 15:15)
BASELINE_NOISE = 1.06
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
    bad = [n for n in names if n not in FAMILIES["all"]]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            "unknown model(s) %s; choose from %s" % (", ".join(bad) or "(none)",
                                                     ",".join(FAMILIES["all"])))
    return names


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Benchmark tcinfer against PyTorch (fp16, CUDA graph) on torchvision CNNs "
                    "(channels_last) and on transformers (scaled_dot_product_attention), "
                    "exported to ONNX.")
    p.add_argument("--out", default="out/bench", help="folder for the ONNX files (default %(default)s)")
    p.add_argument("--force", action="store_true", help="re-export models whose ONNX file exists")
    p.add_argument("--family", choices=("cnn", "transformer", "all"),
                   help="cnn: %s; transformer: %s; all: both (default cnn, or the family of "
                        "--models)" % (",".join(FAMILIES["cnn"]), ",".join(FAMILIES["transformer"])))
    p.add_argument("--models", type=_model_list,
                   help="comma-separated models of either family (default: every model of "
                        "--family)")
    p.add_argument("--batches", type=_int_list,
                   help="comma-separated batch sizes (default 1,32,256 for the CNNs; for the "
                        "transformers 1,64, BERT 1,32)")
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
    p.add_argument("--kernels",
                   help="tcinfer --kernels families to time, comma-separated; the first is the "
                        "one compared with PyTorch (default %s for the CNNs, auto for the "
                        "transformers)" % CNN_KERNELS)
    p.add_argument("--report", metavar="FILE", help="also write the report (markdown) to FILE")
    p.add_argument("--json", metavar="FILE",
                   help="also write every measurement, check and the environment to FILE")
    p.add_argument("--baseline", metavar="JSON",
                   help="an earlier run's --json file (or bench/cnn_baseline.json): check that "
                        "each CNN row's tcinfer time is no slower than its time there (x%g for "
                        "run-to-run noise)" % BASELINE_NOISE)
    p.add_argument("--from-json", metavar="JSON[,JSON...]",
                   help="run nothing: print (and --report) the report of earlier --json files, "
                        "parts of one benchmark run in several calls or a run cut short")
    p.add_argument("--dry-run", action="store_true",
                   help="no GPU needed: export the models and build tcinfer's GPU plan "
                        "(--plan) for every timed shape; with --accuracy, tcinfer's CPU "
                        "reference against PyTorch fp32 on the CPU (transformers)")
    p.add_argument("--accuracy", action="store_true",
                   help="also run tcinfer --compare (fp16 GPU vs fp32 CPU) at batch %d" % ACCURACY_BATCH)
    p.add_argument("--accuracy-kernels", default="auto",
                   help="tcinfer --kernels families whose accuracy --accuracy measures, "
                        "comma-separated (default %(default)s; auto,wmma,cudnn covers every family)")
    p.add_argument("--no-pytorch", action="store_true",
                   help="time tcinfer only (the models must be exported already, or torch present)")
    args = p.parse_args(argv)
    if args.models is None:
        args.models = list(FAMILIES[args.family or "cnn"])
    elif args.family:
        bad = [m for m in args.models if m not in FAMILIES[args.family]]
        if bad:
            p.error("--models %s: not in --family %s" % (",".join(bad), args.family))
    return args


def model_batches(args, model):
    if args.batches:
        return args.batches
    if model in transformer_bench.SPEC:
        return list(transformer_bench.SPEC[model].batches)
    return CNN_BATCHES


def kernel_families(args, model):
    text = args.kernels or (CNN_KERNELS if model in MODELS else "auto")
    return [f for f in text.split(",") if f]


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
    return tcinfer_bench_inputs(binary, model_path, batch,
                                ["--shape", "input:%dx%dx%dx%d" % ((batch,) + IMAGE)],
                                ["--random", "0"], iters, warmup, timeout, kernels)


def tcinfer_bench_inputs(binary, model_path, batch, shape_args, input_args, iters, warmup,
                         timeout, kernels="auto", backend="gpu"):
    """tcinfer --bench with these --shape and input arguments (NAME=FILE or --random SEED)."""
    args = ([model_path, "--backend", backend] + shape_args + ["--kernels", kernels] + input_args
            + ["--quiet", "--bench", str(iters), "--warmup", str(warmup)])
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


def record_row(model, batch, row, results, rf):
    """Logs a timed row (both engines and the speed-up) and keeps it in results and the
    --json file."""
    s = speedup(row["pytorch"], row["tcinfer"])
    log(("%-16s b%-4d PyTorch %-24s tcinfer %-24s %s" % (
        model, batch, fmt_time_cell(row["pytorch"], batch), fmt_time_cell(row["tcinfer"], batch),
        ("speed-up %.2fx" % s) if s is not None else "")).rstrip())
    results.append(row)
    rf.add("rows", row)


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
    try:
        return time_pytorch(torch, lambda: model(x), iters, warmup, cell_seconds, batch)
    finally:
        x = None
        torch.cuda.empty_cache()


def time_pytorch(torch, step, iters, warmup, cell_seconds, batch, eager_fallback=False):
    """CUDA-graph replays of step() (the model on inputs already on the GPU); median ms and
    the iters used. eager_fallback: where capture fails, time eager calls and say so ("how")."""
    graph = y = None
    how = "graph"
    try:
        with torch.inference_mode():
            # warm-up (and cuDNN autotuning) on a side stream before capture, as the CUDA graph docs show
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    y = step()
            except Exception as e:
                if not eager_fallback:
                    raise
                torch.cuda.synchronize()
                graph = None
                how = "eager (graph capture failed: %s)" % error_text(e)
                warn("PyTorch batch %d: %s" % (batch, how))
            replay = graph.replay if graph is not None else step
            for _ in range(warmup):
                y2 = replay()
            torch.cuda.synchronize()
            outs = y if graph is not None else y2
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            if not all(torch.isfinite(o.float()).all().item() for o in outs
                       if o.is_floating_point()):
                warn("PyTorch output has non-finite values (batch %d)" % batch)
            # shrink iters where one replay is slow so a cell stays within cell_seconds
            t0 = time.perf_counter()
            for _ in range(3):
                replay()
            torch.cuda.synchronize()
            est_ms = (time.perf_counter() - t0) * 1000.0 / 3
            n = max(10, min(iters, int(cell_seconds * 1000.0 / max(est_ms, 1e-3))))
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(n)]
            for start, end in events:
                start.record()
                replay()
                end.record()
            torch.cuda.synchronize()
            times = [s.elapsed_time(e) for s, e in events]
        ms = statistics.median(times)
        times.sort()
        r = {"median_ms": ms, "p90_ms": times[int(0.9 * (n - 1))], "runs": n}
        if eager_fallback:
            r["how"] = how
        return r
    finally:
        graph = y = y2 = outs = replay = None  # so empty_cache can return the graph's pool
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
            env["gpu"] = (torch.cuda.get_device_name() if torch.cuda.is_available()
                          else "none (torch sees no CUDA device)")
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


def baseline_checks(results, path):
    """'PASS/FAIL: ...' for each CNN row that the baseline (an earlier --json file) also timed:
    tcinfer's median no slower than there, within BASELINE_NOISE."""
    with open(path) as f:
        base = json.load(f)
    before = {(r["model"], r["batch"]): r["tcinfer"]["median_ms"] for r in base.get("rows", [])
              if r.get("tcinfer") and "median_ms" in r["tcinfer"]}
    lines = []
    for r in results:
        b = before.get((r["model"], r["batch"]))
        if b is None or r["model"] not in MODELS:
            continue
        tc = r["tcinfer"]
        if not tc or "error" in tc:
            lines.append("n/a : %s batch %d no slower than before (%s ms; no result now)"
                         % (r["model"], r["batch"], fmt_ms(b)))
            continue
        lines.append("%s: %s batch %d no slower than before: %s ms <= %s ms x%g (%s)" % (
            "PASS" if tc["median_ms"] <= b * BASELINE_NOISE else "FAIL", r["model"], r["batch"],
            fmt_ms(tc["median_ms"]), fmt_ms(b), BASELINE_NOISE, base.get("source", path)))
    return lines


def export_models(args, torch, torchvision, paths):
    """The ONNX files; {model: error text} of those that failed."""
    export_error = {}
    for m in args.models:
        try:
            if m in MODELS:
                note = export_onnx(torch, torchvision, m, paths[m], args.force)
            else:
                note = transformer_bench.export(torch, m, paths[m], args.force)
            log("export %s: %s (%s)" % (m, paths[m], note))
        except Exception as e:
            export_error[m] = error_text(e)
            log("export %s FAILED: %s" % (m, export_error[m]))
            traceback.print_exc()
            sys.stderr.flush()
    return export_error


def _pytorch_cell(torch, fn):
    try:
        return fn()
    except Exception as e:
        traceback.print_exc()
        sys.stderr.flush()
        try:
            torch.cuda.empty_cache()
        except Exception:
            pass
        return {"error": error_text(e)}


def time_transformers(args, torch, binary, paths, export_error, env, rf):
    """Rows of the transformer family: PyTorch fp16 (SDPA, CUDA graph) and tcinfer per batch."""
    results = []
    use_torch = torch is not None and not args.no_pytorch
    env["sdpa"] = transformer_bench.sdpa_settings(torch) if torch is not None else {}
    env["libraries"] = transformer_bench.library_versions() if torch is not None else {}
    env["attention"] = {}
    for m in [m for m in args.models if m in transformer_bench.SPEC]:
        spec = transformer_bench.SPEC[m]
        families = kernel_families(args, m)
        model, model_error, desc = None, None, None
        try:
            if torch is not None:
                model, desc = transformer_bench.build(torch, m)
                if use_torch:
                    model = model.half().to("cuda")
                    if spec.channels_last:
                        model = model.to(memory_format=torch.channels_last)
        except Exception as e:
            model_error = error_text(e)
        for b in model_batches(args, m):
            row = {"family": "transformer", "model": m, "batch": b, "pytorch": None,
                   "tcinfer": None, "by_family": {}}
            iters = args.iters
            x = transformer_bench.timing_inputs(torch, desc, b) if desc else None
            if model_error is not None:
                row["pytorch"] = {"error": model_error}
            elif use_torch:
                step = transformer_bench.pytorch_step(torch, spec, model, x)
                if m not in env["attention"]:
                    try:
                        env["attention"][m] = transformer_bench.attention_kernels(torch, step)
                    except Exception as e:
                        env["attention"][m] = "profiler failed: " + error_text(e)
                row["pytorch"] = _pytorch_cell(torch, lambda: time_pytorch(
                    torch, step, args.iters, args.warmup, args.cell_seconds, b, True))
                step = None
                if "runs" in row["pytorch"]:
                    iters = row["pytorch"]["runs"]
            if m in export_error:
                row["tcinfer"] = {"error": "export failed: " + export_error[m]}
            elif x is None and spec.seq:
                row["tcinfer"] = {"error": "token inputs need torch to be made (%s)"
                                  % (model_error or "torch not importable")}
            else:
                shapes, inputs = transformer_bench.tcinfer_input_args(
                    spec.desc, b, os.path.join(args.out, "inputs", m), x)
                for f in families:
                    row["by_family"][f] = tcinfer_bench_inputs(binary, paths[m], b, shapes, inputs,
                                                               iters, args.warmup, args.timeout, f)
                row["tcinfer"] = row["by_family"][families[0]]
            record_row(m, b, row, results, rf)
        model = None
        if use_torch:
            torch.cuda.empty_cache()
    return results


def transformer_accuracy(args, torch, binary, paths, export_error, rf=None):
    """[(model, result)]: on the GPU zoo.py's check against PyTorch fp32; in a dry run
    tcinfer's CPU reference against PyTorch fp32 on the CPU."""
    acc = []
    work = os.path.join(args.out, "accuracy")
    for m in [m for m in args.models if m in transformer_bench.SPEC]:
        if m in export_error:
            a = {"error": "export failed: " + export_error[m]}
        elif torch is None:
            a = {"error": "torch not importable"}
        else:
            try:
                model, desc = transformer_bench.build(torch, m)
                check = (transformer_bench.cpu_accuracy if args.dry_run
                         else transformer_bench.gpu_accuracy)
                a = check(torch, binary, m, model, desc, paths[m], work, args.timeout)
            except Exception as e:
                a = {"error": "PyTorch: " + error_text(e)}
                traceback.print_exc()
                sys.stderr.flush()
            model = None
            if not args.dry_run:
                torch.cuda.empty_cache()
        acc.append((m, a))
        if rf:
            rf.add("transformer_accuracy", dict(a, model=m))
        log("accuracy %-16s %s" % (m, transformer_bench.accuracy_checks([(m, a)])[0]))
    return acc


def dry_run_plans(args, torch, binary, paths, export_error):
    """tcinfer --plan (the GPU plan, no GPU needed) with each timed shape: rows of model,
    batch, and ok or the error."""
    rows = []
    for m in args.models:
        for b in model_batches(args, m):
            if m in export_error:
                rows.append({"model": m, "batch": b, "error": "export failed: " + export_error[m]})
                continue
            if m in MODELS:
                shapes = ["--shape", "input:%dx%dx%dx%d" % ((b,) + IMAGE)]
            else:
                shapes = transformer_bench.shape_args(transformer_bench.SPEC[m].desc, b)
            _, err = run_tcinfer(binary, [paths[m], "--plan"] + shapes, args.timeout)
            rows.append({"model": m, "batch": b, "error": err} if err else
                        {"model": m, "batch": b, "ok": True})
            log("plan %-16s b%-4d %s" % (m, b, ("error: " + err) if err else "ok"))
    return rows


class ResultsFile:
    """The --json document, written again after every row and accuracy result, so that a run
    cut short (a time limit) leaves what it measured ("complete": false)."""

    def __init__(self, path, env, argv, started):
        self.path, self.started = path, started
        self.doc = {"environment": env, "argv": argv, "complete": False, "rows": [],
                    "accuracy": [], "transformer_accuracy": [], "checks": []}

    def add(self, key, item):
        self.doc[key].append(item)
        self.save()

    def save(self, complete=False):
        if not self.path:
            return True
        self.doc["complete"] = complete
        self.doc["run_s"] = round(time.time() - self.started, 1)
        try:
            d = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(d, exist_ok=True)
            with open(self.path + ".tmp", "w") as f:
                f.write(json.dumps(self.doc, indent=1) + "\n")
            os.replace(self.path + ".tmp", self.path)
            return True
        except OSError as e:
            warn("cannot write the results: %s" % e)
            return False


def write_file(path, text, what):
    try:
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        log("%s written to %s" % (what, path))
        return True
    except OSError as e:
        warn("cannot write the %s: %s" % (what, e))
        return False


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        return render_from_json(args)
    binary = resolve_binary(args.tcinfer)
    out_dir = args.out
    paths = {m: os.path.join(out_dir, m + ".onnx") for m in args.models}
    cnn = [m for m in args.models if m in MODELS]
    tf = [m for m in args.models if m in transformer_bench.SPEC]
    if args.dry_run:
        args.no_pytorch = True  # no timing: torch only exports (on the CPU)
    need_torch = (not args.no_pytorch or args.force or (args.dry_run and args.accuracy and tf)
                  or any(not os.path.exists(p) for p in paths.values()))
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
    rf = ResultsFile(None if args.dry_run else args.json, env,
                     sys.argv[1:] if argv is None else list(argv), started)

    # 1. ONNX files
    export_error = export_models(args, torch, torchvision, paths)
    failures += len(export_error)

    if args.dry_run:
        return dry_run_main(args, torch, binary, paths, export_error, env, started)

    # 2. timings
    results = []
    families = kernel_families(args, cnn[0]) if cnn else ["auto"]
    if torch is not None and not args.no_pytorch:
        torch.backends.cudnn.benchmark = True
    for m in cnn:
        model, model_error = None, None
        if torch is not None and not args.no_pytorch:
            try:
                model = build_model(torch, torchvision, m).half().to("cuda")
                model = model.to(memory_format=torch.channels_last)
            except Exception as e:
                model_error = error_text(e)
        for b in model_batches(args, m):
            row = {"family": "cnn", "model": m, "batch": b, "pytorch": None, "tcinfer": None,
                   "by_family": {}}
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
            record_row(m, b, row, results, rf)
        del model
        if torch is not None and not args.no_pytorch:
            torch.cuda.empty_cache()
    tf_results = time_transformers(args, torch, binary, paths, export_error, env, rf) if tf else []
    for row in results + tf_results:
        failures += sum(1 for k in ("pytorch",) if row[k] and "error" in row[k])
        failures += sum(1 for v in row["by_family"].values() if "error" in v)

    # 3. accuracy
    acc = []
    if args.accuracy and cnn:
        input_path = os.path.join(out_dir, "accuracy_input.npy")
        x = accuracy_input(input_path)
        acc_families = [f for f in args.accuracy_kernels.split(",") if f]
        for m in cnn:
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
                rf.add("accuracy", dict(a, model=m, kernels=fam))
                log("accuracy %-16s %-6s %s" % (m, fam, ("error: " + a["error"]) if "error" in a else
                                                "rel L2 %.3g, top-1 %s/%s" % (a["rel_l2"], a["top1"], a["rows"])))
    tf_acc = []
    if args.accuracy and tf:
        tf_acc = transformer_accuracy(args, torch, binary, paths, export_error, rf)
        failures += sum(1 for _, a in tf_acc if "error" in a)

    text, checks = render_report(args, env, cnn, families, results, acc, tf, tf_results, tf_acc,
                                 time.time() - started)
    log("")
    log(text)
    if args.report and not write_file(args.report, text, "report"):
        failures += 1
    if args.json:
        rf.doc["checks"] = checks
        if rf.save(complete=True):
            log("results written to %s" % args.json)
        else:
            failures += 1
    return 1 if failures else 0


def render_report(args, env, cnn, families, results, acc, tf, tf_results, tf_acc, run_s):
    """(markdown text, check lines) of a run: the CNN part as it always was, then the
    transformer section."""
    report = ["# tcinfer vs PyTorch on %s" % env["gpu"], "",
              "%s; torch %s, cuDNN %s; %s." % (env["date"], env["torch"], env["cudnn"], env["tcinfer"])]
    checks = []
    if cnn:
        checks = headline_checks(results, cnn) + family_checks(results, families)
        if args.baseline:
            checks += baseline_checks(results, args.baseline)
        report += ["PyTorch: fp16, channels_last, cuDNN benchmark mode, CUDA graph replay. tcinfer: "
                   "--backend gpu --bench. Median of up to %d timed runs after %d warm-up; random "
                   "weights (seed 0) and inputs. Speed-up = PyTorch ms / tcinfer ms." % (args.iters, args.warmup),
                   "", timing_table(results, families), "", "Targets:", ""] + ["- " + c for c in checks]
    if acc:
        report += ["", "Accuracy, tcinfer fp16 GPU vs its fp32 CPU reference, batch %d of seeded "
                       "uniform [-1, 1) inputs; the last column is PyTorch fp16 against PyTorch "
                       "fp64 on the same inputs and weights:" % ACCURACY_BATCH, "",
                   accuracy_table(acc)]
    if tf:
        tf_checks = transformer_bench.checks(tf_results) + transformer_bench.accuracy_checks(tf_acc)
        checks += tf_checks
        report += transformer_section(args, env, tf_results, tf_acc, tf_checks)
    report += ["", "Run time %.0f s." % run_s]
    return "\n".join(report) + "\n", checks


def render_from_json(args):
    """--from-json: the report of one or more earlier --json files (several calls' parts, or a
    run cut short), with the options of the first file's command line."""
    docs = []
    for path in args.from_json.split(","):
        with open(path) as f:
            docs.append(json.load(f))
    first = parse_args(docs[0]["argv"])
    first.baseline = args.baseline or first.baseline
    env = dict(docs[0]["environment"])
    for d in docs[1:]:
        env.setdefault("attention", {}).update(d["environment"].get("attention", {}))
    rows = [r for d in docs for r in d["rows"]]
    results = [r for r in rows if r.get("family", "cnn") == "cnn"]
    tf_results = [r for r in rows if r.get("family") == "transformer"]
    cnn = list(dict.fromkeys(r["model"] for r in results))
    tf = list(dict.fromkeys(r["model"] for r in tf_results))
    families = kernel_families(first, cnn[0]) if cnn else ["auto"]
    acc = [(a["model"], a["kernels"], a) for d in docs for a in d.get("accuracy", [])]
    tf_acc = [(a["model"], a) for d in docs for a in d.get("transformer_accuracy", [])]
    text, _ = render_report(first, env, cnn, families, results, acc, tf, tf_results, tf_acc,
                            sum(d.get("run_s", 0) for d in docs))
    incomplete = [p for p, d in zip(args.from_json.split(","), docs) if not d.get("complete")]
    if incomplete:
        text += "\nIncomplete (the run was cut short): %s.\n" % ", ".join(incomplete)
    log(text)
    if args.report and not write_file(args.report, text, "report"):
        return 1
    return 0


def transformer_section(args, env, results, acc, checks):
    lines = ["", "## Transformers", "",
             "PyTorch: fp16, scaled_dot_product_attention, CUDA graph replay (eager where capture "
             "fails, marked); tcinfer: --backend gpu --bench, token models on seeded ids with an "
             "all-ones mask, images on --random 0. Median of up to %d timed runs after %d "
             "warm-up; random weights (seed 0). Speed-up = PyTorch ms / tcinfer ms; targets: "
             "batch 1 latency <= %.1fx PyTorch's, the large batch's throughput >= %.1fx."
             % (args.iters, args.warmup, transformer_bench.TARGET_B1_LATENCY_RATIO,
                transformer_bench.TARGET_THROUGHPUT_RATIO),
             "", transformer_bench.timing_table(results, fmt_ms, markdown_table)]
    if acc:
        lines += ["", "Accuracy (zoo.py's check): tcinfer fp16 GPU and PyTorch fp16, each "
                      "against PyTorch fp32 (TF32 off), %d seeded inputs (token models: a padded "
                      "mask tail); pass: no worse than PyTorch fp16 (x1.1) and the same top-1:"
                  % transformer_bench.ACC_BATCH, "",
                  transformer_bench.accuracy_table(acc, markdown_table)]
    lines += ["", "Targets:", ""] + ["- " + c for c in checks]
    lines += ["", "Environment:", ""] + transformer_bench.environment_lines(env)
    return lines


def dry_run_main(args, torch, binary, paths, export_error, env, started):
    """--dry-run: exports, the GPU plan of every timed shape, and (--accuracy) tcinfer's CPU
    reference against PyTorch fp32, without a GPU."""
    plans = dry_run_plans(args, torch, binary, paths, export_error)
    tf = [m for m in args.models if m in transformer_bench.SPEC]
    acc = transformer_accuracy(args, torch, binary, paths, export_error) if args.accuracy and tf else []
    checks = ["%s: %s batch %d GPU plan%s" % ("PASS" if r.get("ok") else "FAIL", r["model"],
                                             r["batch"], "" if r.get("ok") else ": " + r["error"])
              for r in plans] + transformer_bench.accuracy_checks(acc)
    for m in tf if torch is not None else []:
        try:
            r = transformer_bench.dry_step_check(torch, m)
            checks.append("%s: %s the timed PyTorch call (CPU, fp32) gives the exported "
                          "inputs' outputs: rel L2 %.3g%s" % (
                              "PASS" if r["ok"] else "FAIL", m, r["rel_l2"],
                              " (%s)" % r["problem"] if r["problem"] else ""))
        except Exception as e:
            checks.append("FAIL: %s the timed PyTorch call: %s" % (m, error_text(e)))
            traceback.print_exc()
        log(checks[-1])
    report = ["# tcinfer bench_models.py dry run (no GPU)", "",
              "%s; torch %s; %s." % (env["date"], env["torch"], env["tcinfer"]), "",
              "Exports, tcinfer --plan at every timed shape, the timed PyTorch call%s:" % (
                  ", tcinfer's CPU reference against PyTorch fp32" if acc else ""), ""]
    report += ["- " + c for c in checks]
    report += ["", "Run time %.0f s." % (time.time() - started)]
    text = "\n".join(report) + "\n"
    log("")
    log(text)
    failures = len(export_error) + sum(1 for c in checks if not c.startswith("PASS"))
    if args.report and not write_file(args.report, text, "report"):
        failures += 1
    if args.json:
        doc = {"environment": env, "dry_run": plans,
               "transformer_accuracy": [dict(a, model=m) for m, a in acc], "checks": checks,
               "run_s": round(time.time() - started, 1)}
        if not write_file(args.json, json.dumps(doc, indent=1) + "\n", "results"):
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
