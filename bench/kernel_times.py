#!/usr/bin/env python3
"""Where a model's time goes, kernel by kernel, on the GPU machine: tcinfer's engine and PyTorch
fp16 on the same model and batch, each kernel family's total, count and mean.

tcinfer: the engine is built once and saved (--save-engine), then one run of the saved engine
(--load-engine, no tuning kernels) is timed kernel by kernel under Nsight Compute (`ncu
--clock-control none --cache-control none --metrics gpu__time_duration.sum`: the clocks as the
benchmark runs them, the caches not flushed between kernels). PyTorch: one eager forward after
5 warm-up calls under torch.profiler (CUDA activity), as bench/transformer_bench.py calls it
(fp16 weights, SDPA). Kernels serialised this way leave out the gaps between launches that a
CUDA graph hides: the sums are kernel time, not latency (bench_models.py measures that).

usage: bench/kernel_times.py MODEL --batch B [--tcinfer PATH] [--work DIR] [--top N]
       [--no-pytorch]        (MODEL: a name of bench/transformer_bench.py's SPEC)"""
import argparse
import collections
import csv
import io
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def short_name(kernel):
    """A kernel's family: the demangled name without 'void', namespaces of the anonymous kind,
    template arguments and parameters ('void <unnamed>::attention_fa2_kernel<__half, 64>(...)'
    -> 'attention_fa2_kernel'); cuBLAS's nvjet names stay whole (their tile is the point)."""
    n = re.sub(r"^void ", "", kernel.strip())
    n = n.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    n = re.sub(r"[(<].*", "", n)
    return n.strip()[:80]


def parse_ncu_csv(text):
    """[(family, microseconds)] in launch order from `ncu --csv --metrics
    gpu__time_duration.sum` output (ncu's own lines before the header are passed over; values
    in ns, with thousands separators)."""
    rows, header, kernels = csv.reader(io.StringIO(text)), None, []
    for r in rows:
        if "Kernel Name" in r and "Metric Value" in r:
            header = r
            continue
        if not header or len(r) != len(header):
            continue
        d = dict(zip(header, r))
        if d.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(d["Metric Value"].replace(",", ""))
        scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "nsecond": 1e-3, "ms": 1e3,
                 "msecond": 1e3}.get(d.get("Metric Unit", "ns"), 1e-3)
        kernels.append((short_name(d["Kernel Name"]), value * scale))
    return kernels


def group(kernels):
    """[(family, count, total us)], the largest total first."""
    agg = collections.OrderedDict()
    for name, us in kernels:
        c, t = agg.get(name, (0, 0.0))
        agg[name] = (c + 1, t + us)
    return sorted(((n, c, t) for n, (c, t) in agg.items()), key=lambda r: -r[2])


def table(title, kernels, top):
    total = sum(us for _, us in kernels)
    lines = ["%s: %.1f us of kernel time in %d kernels" % (title, total, len(kernels)),
             "      total us  count   mean us  family"]
    for name, count, t in group(kernels)[:top]:
        lines.append("  %12.1f  %5d  %8.2f  %s" % (t, count, t / count, name))
    return "\n".join(lines)


def tcinfer_kernels(args, tb, torch, spec, path):
    shapes = tb.shape_args(spec.desc, args.batch)
    x = tb.timing_inputs(torch, spec.desc, args.batch) if spec.seq else None
    _, inputs = tb.tcinfer_input_args(spec.desc, args.batch, args.work, x)
    engine = os.path.join(args.work, "%s_b%d.tci" % (args.model, args.batch))
    subprocess.run([args.tcinfer, path, "--quiet", "--save-engine", engine] + shapes,
                   check=True, capture_output=True, text=True)
    out = subprocess.run(["ncu", "--clock-control", "none", "--cache-control", "none",
                          "--metrics", "gpu__time_duration.sum", "--csv", args.tcinfer,
                          "--load-engine", engine, "--quiet"] + inputs,
                         check=True, capture_output=True, text=True)
    return parse_ncu_csv(out.stdout)


def pytorch_kernels(tb, torch, spec, model_name, batch):
    from torch.profiler import ProfilerActivity, profile
    model, desc = tb.build(torch, model_name)
    model = model.half().cuda().eval()
    step = tb.pytorch_step(torch, spec, model, tb.timing_inputs(torch, desc, batch))
    with torch.inference_mode():
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
    kernels = []
    for e in prof.events():
        if e.device_type.name != "CUDA":
            continue
        us = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        kernels.append((short_name(e.name), float(us)))
    return kernels


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--tcinfer", default="build/tcinfer")
    p.add_argument("--work", default="/tmp/tcinfer_kernel_times")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--no-pytorch", action="store_true")
    args = p.parse_args(argv)
    import torch
    import transformer_bench as tb
    if args.model not in tb.SPEC:
        p.error("unknown model %r (bench/transformer_bench.py has %s)" %
                (args.model, ", ".join(sorted(tb.SPEC))))
    spec = tb.SPEC[args.model]
    os.makedirs(args.work, exist_ok=True)
    path = os.path.join(args.work, args.model + ".onnx")
    tb.export(torch, args.model, path, False)
    print(table("tcinfer %s batch %d" % (args.model, args.batch),
                tcinfer_kernels(args, tb, torch, spec, path), args.top))
    if not args.no_pytorch:
        print(table("PyTorch fp16 %s batch %d" % (args.model, args.batch),
                    pytorch_kernels(tb, torch, spec, args.model, args.batch), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
