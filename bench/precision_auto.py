#!/usr/bin/env python3
"""The accuracy workbench shown on real exports (GPU machine): `--precision auto` and
`--accuracy-target` on the bench's ResNet-50 and MobileNetV2 (random weights, recalibrated
BatchNorm) and on timm's inception_v3 (random init, seed 0, no recalibration: fp16 overflows).

For each model: the plain fp16 engine against the GPU fp32 engine, the search (its wall time, the
layers it kept in fp32, the error it reached on its calibration input), the chosen layers checked
on a held-out input (`--fp32-layers`, another seed), and the throughput at --bench-batch with and
without them. With --keep-precision fp32,tf32,bf16 the same chosen layers are checked and timed
kept in each of those (`--keep-precision`: the search's result at fp32's, tf32's and bf16's
cost). Writes OUT/precision_auto.json and OUT/precision_auto.md.

usage: bench/precision_auto.py --tcinfer BIN --work DIR --out DIR [--target 2e-3]
                               [--keep-precision fp32,tf32,bf16]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_models  # noqa: E402  (the bench's exports and tcinfer output parsers)

MODELS = ("resnet50", "mobilenet_v2", "timm_inception_v3")
KEPT = ("fp32", "tf32", "bf16")


def export_inception(torch, path):
    """timm's inception_v3 as the accuracy-workbench issue names it: random init (seed 0),
    BatchNorm as initialised, opset 17, symbolic batch."""
    if os.path.exists(path):
        return "exists"
    import timm
    torch.manual_seed(0)
    model = timm.create_model("inception_v3", pretrained=False).eval()
    x = torch.randn(2, 3, 299, 299)
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(model, (x,), tmp, dynamo=False, opset_version=17,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    os.replace(tmp, path)
    return "TorchScript exporter, opset 17"


def image_of(name):
    return (3, 299, 299) if name == "timm_inception_v3" else bench_models.IMAGE


def shape_arg(name, batch):
    return ["--shape", "input:%dx%dx%dx%d" % ((batch,) + image_of(name))]


def compare(binary, model, name, batch, seed, extra, timeout):
    """The engine against the GPU fp32 engine on seeded input: {'rel_l2',...} or {'error'}."""
    out, err = bench_models.run_tcinfer(
        binary, [model, "--backend", "gpu", "--random", str(seed), "--compare", "--baseline",
                 "gpu-fp32", "--json", "--quiet"] + shape_arg(name, batch) + extra, timeout)
    if err is not None:
        return {"error": err}
    try:
        r = json.loads(out)["compare"]["outputs"][0]
    except (ValueError, KeyError, IndexError):
        return {"error": bench_models.first_error_line("", out, 0)}
    r["rel_l2"] = r["relative_l2"]
    return r


def bench(binary, model, name, batch, extra, iters, timeout):
    out, err = bench_models.run_tcinfer(
        binary, [model, "--backend", "gpu", "--random", "0", "--quiet", "--bench", str(iters),
                 "--warmup", "10"] + shape_arg(name, batch) + extra, timeout)
    r = bench_models.parse_bench(out)
    if err is not None or r is None:
        return {"error": err or bench_models.first_error_line("", out, 0)}
    return r


def one_model(args, name, path):
    r = {"model": name, "onnx": os.path.basename(path)}
    # inception_v3 overflows in fp16: --precision auto alone; the bench models meet a target
    target = None if name == "timm_inception_v3" else args.target
    r["fp16"] = compare(args.tcinfer, path, name, args.calib_batch, 1, [], args.timeout)
    search = ["--precision", "auto", "--random", "0", "--json", "--quiet"]
    if target:
        search += ["--accuracy-target", str(target)]
    t0 = time.time()
    out, err = bench_models.run_tcinfer(
        args.tcinfer, [path, "--backend", "gpu"] + search + shape_arg(name, args.calib_batch),
        args.timeout)
    r["search_wall_s"] = round(time.time() - t0, 1)
    r["target"] = target
    try:
        auto = json.loads(out)["precision_auto"] if err is None else None
    except (ValueError, KeyError):
        auto = None
    if auto is None:
        r["search_error"] = err or bench_models.first_error_line("", out, 0)
        return r
    r["auto"] = auto
    layers = auto.get("fp32_layers", [])
    if args.bench_batch:
        r["bench_fp16"] = bench(args.tcinfer, path, name, args.bench_batch, [], args.iters,
                                args.timeout)
    # the same layers kept in each precision asked for: held out (another seed than the
    # search's calibration input), and timed
    r["held_out"], r["bench_kept"] = {}, {}
    for kept in args.keep_precision:
        keep = ["--fp32-layers", ",".join(layers), "--keep-precision", kept] if layers else []
        r["held_out"][kept] = compare(args.tcinfer, path, name, args.calib_batch, 1, keep,
                                      args.timeout)
        if args.bench_batch:
            r["bench_kept"][kept] = bench(args.tcinfer, path, name, args.bench_batch, keep,
                                          args.iters, args.timeout)
    return r


def cell_error(c):
    if not c:
        return "-"
    if "error" in c:
        return c["error"][:90]
    return "%.2e" % c["rel_l2"]


def markdown(results, args):
    lines = ["| model | fp16 rel. L2 | search | layers kept | reached (calibration, fp32) | "
             "kept in | held out (seed 1) | batch %d: fp16 / with the kept layers |"
             % args.bench_batch,
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        auto = r.get("auto")
        if not auto:
            lines.append("| %s | %s | failed after %.1f s: %s | | | | | |" % (
                r["model"], cell_error(r["fp16"]), r["search_wall_s"], r.get("search_error")))
            continue
        layers = auto.get("fp32_layers", [])
        shown = ", ".join(layers[:6]) + (" (+%d)" % (len(layers) - 6) if len(layers) > 6 else "")
        how = "target %g" % r["target"] if r["target"] else "overflow only"
        search = "| %s | %s | %s, %.1f s (tcinfer says %.1f s) | %d: %s | %.2e |" % (
            r["model"], cell_error(r["fp16"]), how, r["search_wall_s"], auto.get("seconds", -1),
            len(layers), shown or "none", auto.get("relative_l2", -1))
        for kept in args.keep_precision:
            speed = "-"
            bf, ba = r.get("bench_fp16"), r["bench_kept"].get(kept)
            if bf and ba and "error" not in bf and "error" not in ba:
                speed = "%.0f / %.0f img/s (%.1f %% slower)" % (
                    bf["throughput"], ba["throughput"],
                    100.0 * (1.0 - ba["throughput"] / bf["throughput"]))
            elif bf or ba:
                speed = cell_error(bf if bf and "error" in bf else ba)
            lines.append("%s %s | %s | %s |" % (search, kept, cell_error(r["held_out"][kept]),
                                                 speed))
            search = "| %s | | | | |" % r["model"]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tcinfer", required=True)
    p.add_argument("--work", required=True, help="folder for the exported models")
    p.add_argument("--out", required=True, help="folder for precision_auto.json / .md")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--target", type=float, default=2e-3)
    p.add_argument("--calib-batch", type=int, default=8,
                   help="rows of the search's calibration input and of the checks")
    p.add_argument("--bench-batch", type=int, default=256, help="0: no throughput runs")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--keep-precision", default="fp32",
                   help="comma-separated precisions (fp32, tf32, bf16) to keep the chosen "
                        "layers in for the held-out check and the throughput")
    args = p.parse_args(argv)
    args.keep_precision = [k for k in args.keep_precision.split(",") if k]
    wrong = [k for k in args.keep_precision if k not in KEPT]
    if wrong or not args.keep_precision:
        p.error("--keep-precision wants some of %s, got '%s'" % (",".join(KEPT),
                                                                  ",".join(wrong)))
    names = [n for n in args.models.split(",") if n]
    bad = [n for n in names if n not in MODELS]
    if bad:
        p.error("unknown model(s) %s; choose from %s" % (", ".join(bad), ",".join(MODELS)))
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    torch, torchvision = bench_models.import_torch(True)
    results = []
    for name in names:
        path = os.path.join(args.work, name + ".onnx")
        if name == "timm_inception_v3":
            export_inception(torch, path)
        else:
            bench_models.export_onnx(torch, torchvision, name, path, False)
        r = one_model(args, name, path)
        results.append(r)
        print(json.dumps(r), flush=True)
    with open(os.path.join(args.out, "precision_auto.json"), "w") as f:
        json.dump(results, f, indent=1)
    text = markdown(results, args)
    with open(os.path.join(args.out, "precision_auto.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
