#!/usr/bin/env python3
"""Triton with GPU instances of the tcinfer backend, on the GPU machine (docs/serving.md): one
ONNX image classifier (e.g. ResNet-50 exported by bench_models.py) served with KIND_GPU
instances and dynamic batching; then

1. accuracy: a seeded batch through gRPC against the CLI on the same input (the fp32 CPU
   reference: relative L2 and top-1; and the CLI's own fp16 GPU engine);
   the same batch with its input and output in GPU memory (CUDA shared memory,
   bench/triton_cuda_shm.py) against the request-body answer;
   the same batch over HTTP against the gRPC answer;
2. malformed requests (wrong shape, wrong dtype, a missing input, an unknown output) each
   answered with its error, the server serving on;
3. load: bench/triton_load.py at the given concurrencies (batch-1 requests);
4. the CLI's --bench at batch 1 and at the largest concurrency, for the engine's own time.

Prints one JSON object per result and a markdown table at the end.

  triton_gpu.py --tcinfer build/tcinfer --backend-dir build/triton_backends \
      --server SITE_PACKAGES --model out/bench/resnet50.onnx --work /tmp/tg

SITE_PACKAGES holds pytriton/tritonserver/bin/tritonserver and nvidia_pytriton.libs/ (the PyPI
nvidia-pytriton package, installed or unpacked). Needs numpy, onnx and tritonclient[grpc].

--precision auto (with --accuracy-target) serves the model with the backend's parameter
precision "auto" (seeded random calibration inputs), and the CLI's GPU engine and --bench use
--precision auto too; the server log's line on the layers it kept in fp32 is printed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serving", "triton"))
from local_server import LocalServer  # noqa: E402
import triton_cuda_shm  # noqa: E402

BENCH_RE = re.compile(r"median ([0-9.]+) ms, p90 ([0-9.]+) ms, p99 ([0-9.]+) ms, throughput "
                      r"([0-9.]+)/s")


def io_of(model_path):
    """(input name, input dims without batch, output name, output dims without batch)"""
    g = onnx.load(model_path, load_external_data=False).graph
    init = {t.name for t in g.initializer}
    inp = [i for i in g.input if i.name not in init][0]
    out = g.output[0]
    dims = lambda v: [d.dim_value for d in v.type.tensor_type.shape.dim][1:]
    return inp.name, dims(inp), out.name, dims(out)


def run(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r


def rel_l2(a, b):
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tcinfer", required=True)
    p.add_argument("--backend-dir", required=True, help="holds tcinfer/libtriton_tcinfer.so")
    p.add_argument("--server", required=True, help="site-packages with nvidia-pytriton")
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--instances", type=int, default=2)
    p.add_argument("--queue-delay-us", type=int, default=200)
    p.add_argument("--concurrency", default="1,8,64")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--accuracy-batch", type=int, default=8)
    p.add_argument("--kind", choices=("gpu", "cpu"), default="gpu",
                   help="cpu: CPU instances and no CLI timing (to try the script without a GPU)")
    p.add_argument("--precision", choices=("fp16", "bf16", "tf32", "fp32", "auto"),
                   default="fp16", help="the engines' precision (server and CLI)")
    p.add_argument("--accuracy-target", type=float, default=0,
                   help="with --precision auto: the outputs' relative L2 error to meet")
    args = p.parse_args()
    if args.accuracy_target and args.precision != "auto":
        p.error("--accuracy-target goes with --precision auto")
    precision_args = ["--precision", args.precision] + (
        ["--accuracy-target", str(args.accuracy_target)] if args.accuracy_target else [])
    parameters = f'parameters {{ key: "precision" value {{ string_value: "{args.precision}" }} }}\n'
    if args.accuracy_target:
        parameters += (f'parameters {{ key: "accuracy_target" value {{ string_value: '
                       f'"{args.accuracy_target}" }} }}\n')

    shutil.rmtree(args.work, ignore_errors=True)
    repo = os.path.join(args.work, "repo")
    name = os.path.splitext(os.path.basename(args.model))[0]
    os.makedirs(os.path.join(repo, name, "1"))
    shutil.copy(args.model, os.path.join(repo, name, "1", "model.onnx"))
    in_name, in_dims, out_name, out_dims = io_of(args.model)
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        instances = (f'{{ kind: KIND_GPU, count: {args.instances}, gpus: [0] }}'
                     if args.kind == "gpu" else f'{{ kind: KIND_CPU, count: {args.instances} }}')
        f.write(f'backend: "tcinfer"\nmax_batch_size: {args.max_batch}\n'
                f'input [{{ name: "{in_name}", data_type: TYPE_FP32, dims: {in_dims} }}]\n'
                f'output [{{ name: "{out_name}", data_type: TYPE_FP32, dims: {out_dims} }}]\n'
                f'instance_group [{instances}]\n'
                f'dynamic_batching {{ max_queue_delay_microseconds: {args.queue_delay_us} }}\n'
                + (parameters if args.kind == "gpu" else ""))

    rows = []
    try:
        server = LocalServer(repo, args.backend_dir, os.path.join(args.work, "server.log"),
                             site_packages=args.server)
    except RuntimeError as e:
        sys.exit(str(e))
    url = server.grpc_url
    try:
        client = grpcclient.InferenceServerClient(url)
        try:
            ready_s = server.wait_ready(
                lambda: client.is_server_ready() and client.is_model_ready(name), 300, 0.5)
        except RuntimeError as e:
            sys.exit(str(e))
        print(json.dumps({"ready_s": round(ready_s, 1), "model": name, "precision":
                          args.precision, "instances": args.instances,
                          "max_batch": args.max_batch}), flush=True)
        for line in server.log_text(None).splitlines():
            if "precision auto kept" in line:
                print(json.dumps({"check": "precision auto", "server_log": line.strip()}),
                      flush=True)

        # 1. accuracy against the CLI on the same input, at several batch sizes (the engine is
        # built for max_batch and runs the smaller batches dynamic batching forms)
        for n in sorted({1, 3, args.accuracy_batch}):
            x = np.random.default_rng(n).uniform(-1, 1, [n] + in_dims).astype(np.float32)
            inp = grpcclient.InferInput(in_name, list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            got = client.infer(name, [inp]).as_numpy(out_name)
            x_path = os.path.join(args.work, "x.npy")
            np.save(x_path, x)
            shape = f"{in_name}:" + "x".join(str(d) for d in x.shape)
            outs = {}
            for backend in ("cpu", "gpu"):
                o = os.path.join(args.work, f"{backend}.npy")
                gpu = backend == "gpu" and args.kind == "gpu"
                run([args.tcinfer, "--backend", "gpu" if gpu else "cpu", "--shape", shape,
                     "--quiet", "-o", o, args.model, x_path] + (precision_args if gpu else []))
                outs[backend] = np.load(o)
            ref = outs["cpu"]
            print(json.dumps({"check": "accuracy", "batch": n,
                              "triton_vs_fp32_rel_l2": rel_l2(got, ref),
                              "cli_gpu_vs_fp32_rel_l2": rel_l2(outs["gpu"], ref),
                              "triton_vs_cli_gpu_rel_l2": rel_l2(got, outs["gpu"]),
                              "top1_agree": int((got.argmax(1) == ref.argmax(1)).sum()),
                              "finite": bool(np.isfinite(got).all())}), flush=True)

        # 1b. the same batch with input and output in GPU memory (CUDA shared memory)
        if args.kind == "gpu":
            print(json.dumps(triton_cuda_shm.check(client, grpcclient, name, in_name, in_dims,
                                                   out_name, out_dims, got, x)), flush=True)

        # the same batch over HTTP
        http = httpclient.InferenceServerClient(server.http_url)
        hin = httpclient.InferInput(in_name, list(x.shape), "FP32")
        hin.set_data_from_numpy(x)
        over_http = http.infer(name, [hin]).as_numpy(out_name)
        print(json.dumps({"check": "http", "batch": int(x.shape[0]),
                          "vs_grpc_rel_l2": rel_l2(over_http, got)}), flush=True)

        # 2. malformed requests (a wrong shape over gRPC; a wrong dtype, a missing input and an
        # unknown output over HTTP): each answered with its error, the server serving on
        wrong = [1] + in_dims[:-1] + [in_dims[-1] + 1]
        bad_shape = grpcclient.InferInput(in_name, wrong, "FP32")
        bad_shape.set_data_from_numpy(np.zeros(wrong, np.float32))
        bad_dtype = httpclient.InferInput(in_name, list(x.shape), "FP64")
        bad_dtype.set_data_from_numpy(x.astype(np.float64))
        bad_name = httpclient.InferInput(in_name + "_missing", list(x.shape), "FP32")
        bad_name.set_data_from_numpy(x)
        malformed = {
            "wrong shape": lambda: client.infer(name, [bad_shape]),
            "wrong dtype": lambda: http.infer(name, [bad_dtype]),
            "missing input": lambda: http.infer(name, [bad_name]),
            "unknown output": lambda: http.infer(
                name, [hin], outputs=[httpclient.InferRequestedOutput("no_such_output")]),
        }
        for what, call in malformed.items():
            try:
                call()
                err = None
            except Exception as e:
                err = str(e)
            again = client.infer(name, [inp]).as_numpy(out_name)
            print(json.dumps({"check": what, "error": err,
                              "serves_on": bool(np.array_equal(again, got))}), flush=True)

        # 3. load
        r = run([sys.executable, os.path.join(HERE, "triton_load.py"), "--url", url,
                 "--model", name, "--concurrency", args.concurrency, "--seconds",
                 str(args.seconds)], timeout=60 + 20 * len(args.concurrency.split(",")) *
                (args.seconds + 3))
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                rows.append(json.loads(line))
                print(line, flush=True)
        stats = client.get_inference_statistics(name, as_json=True)["model_stats"][0]
        print(json.dumps({"check": "statistics", "inference_count":
                          stats.get("inference_count"), "execution_count":
                          stats.get("execution_count")}), flush=True)
    finally:
        server.stop(20)

    # 4. the engine's own time, by the CLI
    cli = {}
    for b in [] if args.kind == "cpu" else sorted({1, max(int(c) for c in args.concurrency.split(","))}):
        if b > args.max_batch:
            continue
        r = run([args.tcinfer, "--backend", "gpu", "--shape",
                 f"{in_name}:{b}x" + "x".join(str(d) for d in in_dims), "--random", "0",
                 "--quiet", "--bench", "200", args.model] + precision_args)
        m = BENCH_RE.search(r.stdout + r.stderr)
        cli[b] = {"median_ms": float(m.group(1)), "p99_ms": float(m.group(3)),
                  "items_per_s": float(m.group(4))}  # the CLI's throughput counts images
        print(json.dumps({"check": "cli bench", "batch": b, **cli[b]}), flush=True)

    print(f"\n| concurrency | requests/s | p50 ms | p99 ms | errors |\n| --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| {row['concurrency']} | {row['requests_per_s']:.0f} | {row['p50_ms']:.2f} | "
              f"{row['p99_ms']:.2f} | {row['errors']} |")
    for b, c in cli.items():
        print(f"\nCLI --bench batch {b}: median {c['median_ms']:.3f} ms, p99 {c['p99_ms']:.3f} ms, "
              f"{c['items_per_s']:.0f} images/s")


if __name__ == "__main__":
    main()
