#!/usr/bin/env python3
"""Triton with GPU instances of the tcinfer backend, on the GPU machine (docs/serving.md): one
ONNX image classifier (e.g. ResNet-50 exported by bench_models.py) served with KIND_GPU
instances and dynamic batching; then

1. accuracy: a seeded batch through gRPC against the CLI on the same input (the fp32 CPU
   reference: relative L2 and top-1; and the CLI's own fp16 GPU engine);
2. a malformed request (wrong shape) answered with tcinfer's error, the server serving on;
3. load: bench/triton_load.py at the given concurrencies (batch-1 requests);
4. the CLI's --bench at batch 1 and at the largest concurrency, for the engine's own time.

Prints one JSON object per result and a markdown table at the end.

  triton_gpu.py --tcinfer build/tcinfer --backend-dir build/triton_backends \
      --server SITE_PACKAGES --model out/bench/resnet50.onnx --work /tmp/tg

SITE_PACKAGES holds pytriton/tritonserver/bin/tritonserver and nvidia_pytriton.libs/ (the PyPI
nvidia-pytriton package, installed or unpacked). Needs numpy, onnx and tritonclient[grpc].
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import onnx
import tritonclient.grpc as grpcclient

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_RE = re.compile(r"median ([0-9.]+) ms, p90 ([0-9.]+) ms, p99 ([0-9.]+) ms, throughput "
                      r"([0-9.]+)/s")


def free_ports(count):
    socks = [socket.socket() for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


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
    args = p.parse_args()

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
                f'dynamic_batching {{ max_queue_delay_microseconds: {args.queue_delay_us} }}\n')

    binary = os.path.join(args.server, "pytriton", "tritonserver", "bin", "tritonserver")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = (os.path.join(args.server, "nvidia_pytriton.libs") + os.pathsep +
                              env.get("LD_LIBRARY_PATH", ""))
    http_port, grpc_port, metrics_port = free_ports(3)
    log_path = os.path.join(args.work, "server.log")
    log = open(log_path, "w")
    t0 = time.monotonic()
    server = subprocess.Popen(
        [binary, "--model-repository", repo, "--backend-directory", args.backend_dir,
         "--http-address", "127.0.0.1", "--http-port", str(http_port),
         "--grpc-address", "127.0.0.1", "--grpc-port", str(grpc_port),
         "--metrics-address", "127.0.0.1", "--metrics-port", str(metrics_port),
         "--exit-timeout-secs", "5"], stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"127.0.0.1:{grpc_port}"
    rows = []
    try:
        client = grpcclient.InferenceServerClient(url)
        while True:
            if server.poll() is not None:
                sys.exit("tritonserver exited:\n" + open(log_path).read()[-4000:])
            try:
                if client.is_server_ready() and client.is_model_ready(name):
                    break
            except Exception:
                pass
            if time.monotonic() - t0 > 300:
                sys.exit("not ready in 300 s:\n" + open(log_path).read()[-4000:])
            time.sleep(0.5)
        print(json.dumps({"ready_s": round(time.monotonic() - t0, 1), "model": name,
                          "instances": args.instances, "max_batch": args.max_batch}), flush=True)

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
                run([args.tcinfer, "--backend", backend if args.kind == "gpu" else "cpu", "--shape", shape, "--quiet", "-o", o,
                     args.model, x_path])
                outs[backend] = np.load(o)
            ref = outs["cpu"]
            print(json.dumps({"check": "accuracy", "batch": n,
                              "triton_vs_fp32_rel_l2": rel_l2(got, ref),
                              "cli_gpu_vs_fp32_rel_l2": rel_l2(outs["gpu"], ref),
                              "triton_vs_cli_gpu_rel_l2": rel_l2(got, outs["gpu"]),
                              "top1_agree": int((got.argmax(1) == ref.argmax(1)).sum()),
                              "finite": bool(np.isfinite(got).all())}), flush=True)

        # 2. a wrong shape: tcinfer's error, and the server serves on
        bad = grpcclient.InferInput(in_name, [1] + in_dims[:-1] + [in_dims[-1] + 1], "FP32")
        bad.set_data_from_numpy(np.zeros([1] + in_dims[:-1] + [in_dims[-1] + 1], np.float32))
        try:
            client.infer(name, [bad])
            err = None
        except Exception as e:
            err = str(e)
        again = client.infer(name, [inp]).as_numpy(out_name)
        print(json.dumps({"check": "wrong shape", "error": err,
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
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()

    # 4. the engine's own time, by the CLI
    cli = {}
    for b in [] if args.kind == "cpu" else sorted({1, max(int(c) for c in args.concurrency.split(","))}):
        if b > args.max_batch:
            continue
        r = run([args.tcinfer, "--backend", "gpu", "--shape",
                 f"{in_name}:{b}x" + "x".join(str(d) for d in in_dims), "--random", "0",
                 "--quiet", "--bench", "200", args.model])
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
