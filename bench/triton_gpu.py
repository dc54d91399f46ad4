#!/usr/bin/env python3
"""Triton with GPU instances of the tcinfer backend, on the GPU machine (docs/serving.md): ONNX
models (e.g. ResNet-50 and BERT-base at sequence 128, exported by bench/bench_models.py) served
in one server with KIND_GPU instances on one GPU or several (--gpus 0,1: --instances on each)
and dynamic batching; then, per model,

1. accuracy: seeded batches through gRPC against the CLI on the same inputs (the fp32 CPU
   reference: relative L2 of every output, top-1 for classifier outputs; and the CLI's own GPU
   engine on the first of --gpus); for a model of one float input, the last batch again with
   its input and output in GPU memory (CUDA shared memory, bench/triton_cuda_shm.py) against
   the request-body answer;
   the last batch over HTTP against the gRPC answer;
2. malformed requests (a wrong shape over gRPC; a wrong dtype, a missing input and an unknown
   output over HTTP), each answered with its error, the server serving on;
3. load at the given concurrencies (default 1, 8, 64, 128; batch-1 requests): bench/triton_load.py
   with the tensors in the requests and in shared memory (--load-shm; default none, system and,
   with GPU instances, cuda), and with --perf-analyzer Triton's C++ perf_analyzer in the same
   modes; each point with the server's statistics over it (rows per execution, queue and
   compute times per request);
4. the CLI's --bench at batch 1 and at the largest concurrency (at most --max-batch), on each
   of --gpus, for the engine's own time.

Prints one JSON object per result and markdown tables at the end.

  triton_gpu.py --tcinfer build/tcinfer --backend-dir build/triton_backends \\
      --server SITE_PACKAGES --model out/bench/resnet50.onnx \\
      --model out/bench/bert_base_128.onnx --gpus 0,1 --work /tmp/tg

SITE_PACKAGES holds pytriton/tritonserver/bin/tritonserver and nvidia_pytriton.libs/ (the PyPI
nvidia-pytriton package, installed or unpacked). Needs numpy, onnx and tritonclient[grpc].
--dry-run writes the model repository and prints each config.pbtxt and the CLI commands of
steps 1 and 4, and starts nothing: no GPU, server or tritonclient needed.

--precision auto (with --accuracy-target) serves the models with the backend's parameter
precision "auto" (seeded random calibration inputs), and the CLI's GPU engine and --bench use
--precision auto too; the server log's lines on the layers kept in fp32 are printed.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serving", "triton"))

BENCH_RE = re.compile(r"median ([0-9.]+) ms, p90 ([0-9.]+) ms, p99 ([0-9.]+) ms, throughput "
                      r"([0-9.]+)/s")
# ONNX element types -> (config.pbtxt data_type, numpy dtype)
TYPES = {onnx.TensorProto.FLOAT: ("TYPE_FP32", np.float32),
         onnx.TensorProto.FLOAT16: ("TYPE_FP16", np.float16),
         onnx.TensorProto.INT64: ("TYPE_INT64", np.int64),
         onnx.TensorProto.INT32: ("TYPE_INT32", np.int32),
         onnx.TensorProto.BOOL: ("TYPE_BOOL", np.bool_)}


def index_list(text, what, minimum):
    """'0,1' -> [0, 1]: distinct integers >= minimum, in order; else an ArgumentTypeError."""
    items = [t.strip() for t in text.split(",")]
    try:
        values = [int(t) for t in items]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} wants a comma-separated list of integers, "
                                         f"got {text!r}")
    if any(v < minimum for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{what} wants distinct integers >= {minimum}, "
                                         f"got {text!r}")
    return values


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tcinfer", required=True)
    p.add_argument("--backend-dir", required=True, help="holds tcinfer/libtriton_tcinfer.so")
    p.add_argument("--server", help="site-packages with nvidia-pytriton (not for --dry-run)")
    p.add_argument("--model", action="append", required=True,
                   help="an ONNX model (repeatable: each is served as its own Triton model, "
                        "named after the file)")
    p.add_argument("--work", required=True)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--gpus", type=lambda t: index_list(t, "--gpus", 0), default=[0],
                   help="the GPUs of the instance group (default 0), e.g. 0,1")
    p.add_argument("--instances", type=int, default=1,
                   help="KIND_GPU instances on each of --gpus (Triton's count: per listed GPU; "
                        "default 1, the fastest on the H200: docs/serving.md)")
    p.add_argument("--queue-delay-us", type=int, default=0,
                   help="dynamic_batching's max_queue_delay_microseconds (default 0: a request "
                        "waits only while the instances are busy; a delay is added to every "
                        "request that finds an instance idle)")
    p.add_argument("--pipeline-depth", type=int, choices=(1, 2, 3), default=None,
                   help="the backend's parameter pipeline_depth (default: left out, the "
                        "backend's choice: 2 on GPU instances, the next batch gathered while the "
                        "engine runs one and the last answered; 1 on CPU instances)")
    p.add_argument("--batch-buckets", metavar="LIST",
                   help="the backend's parameter batch_buckets, e.g. 1,2,4,8,16,32,64 (default: "
                        "left out, the backend's choice: 1,2,4, then steps of 8 to max_batch_size)")
    p.add_argument("--concurrency", type=lambda t: index_list(t, "--concurrency", 1),
                   default=[1, 8, 64, 128])
    p.add_argument("--seconds", type=float, default=10.0, help="measured time per load point")
    p.add_argument("--load-processes", type=int, default=1,
                   help="client processes of bench/triton_load.py (one Python process limits "
                        "the load at high concurrency)")
    p.add_argument("--load-shm", type=shm_list, default=None,
                   help="comma-separated: where the load's tensors travel, none (in the "
                        "requests), system or cuda (shared memory); default none,system and, "
                        "with --kind gpu, cuda")
    p.add_argument("--perf-analyzer", metavar="DIR",
                   help="also load with perf_analyzer (DIR/bin/perf_analyzer, its libraries in "
                        "DIR/lib: .venv/perf_analyzer, which scripts/setup.sh installs), in the "
                        "modes of --load-shm")
    p.add_argument("--request-batch", type=lambda t: index_list(t, "--request-batch", 1),
                   default=[1], metavar="LIST",
                   help="rows per perf_analyzer request, e.g. 1,8 (default 1): each point of "
                        "--concurrency at each; bench/triton_load.py sends batch 1")
    p.add_argument("--bench-batches", type=lambda t: index_list(t, "--bench-batches", 1),
                   metavar="LIST",
                   help="the CLI's --bench at these batches, e.g. 1,16,24,32,64 (the engine's own "
                        "rate at the batch sizes the server forms; default 1 and the largest "
                        "concurrency, at most --max-batch)")
    p.add_argument("--accuracy-batch", type=int, default=8)
    p.add_argument("--kind", choices=("gpu", "cpu"), default="gpu",
                   help="cpu: CPU instances and no CLI timing (to try the script without a GPU)")
    p.add_argument("--precision", choices=("fp16", "bf16", "tf32", "fp32", "auto"),
                   default="fp16", help="the engines' precision (server and CLI)")
    p.add_argument("--accuracy-target", type=float, default=0,
                   help="with --precision auto: the outputs' relative L2 error to meet")
    p.add_argument("--dry-run", action="store_true",
                   help="write the repository, print the configurations and CLI commands, run "
                        "nothing")
    args = p.parse_args(argv)
    if args.accuracy_target and args.precision != "auto":
        p.error("--accuracy-target goes with --precision auto")
    if args.instances < 1 or args.max_batch < 1:
        p.error("--instances and --max-batch want 1 or more")
    if args.kind == "cpu" and args.gpus != [0]:
        p.error("--gpus places KIND_GPU instances: not with --kind cpu")
    if not args.dry_run and not args.server:
        p.error("--server is needed (all but --dry-run start the server)")
    if args.load_shm is None:
        args.load_shm = ["none", "system"] + (["cuda"] if args.kind == "gpu" else [])
    if "cuda" in args.load_shm and args.kind == "cpu":
        p.error("--load-shm cuda needs GPU instances (--kind gpu)")
    if args.perf_analyzer and not os.path.isfile(os.path.join(args.perf_analyzer, "bin",
                                                               "perf_analyzer")):
        p.error(f"--perf-analyzer {args.perf_analyzer}: no bin/perf_analyzer there")
    if args.bench_batches and max(args.bench_batches) > args.max_batch:
        p.error(f"--bench-batches goes up to --max-batch ({args.max_batch})")
    if args.queue_delay_us < 0:
        p.error("--queue-delay-us wants 0 or more")
    names = [model_name(m) for m in args.model]
    if len(set(names)) != len(names):
        p.error(f"two --model files give the same model name: {names}")
    return args


def shm_list(text):
    """'none,system' -> ['none', 'system']: distinct modes of triton_load.py's --shm."""
    items = [t.strip() for t in text.split(",")]
    if not items or any(t not in ("none", "system", "cuda") for t in items) or \
            len(set(items)) != len(items):
        raise argparse.ArgumentTypeError(f"--load-shm wants distinct modes of none, system and "
                                         f"cuda, got {text!r}")
    return items


def model_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def io_of(model_path):
    """([(name, data_type, dims)] of the inputs, the same of the outputs), dims without the
    batch dim; a symbolic dim other than the batch is an error."""
    g = onnx.load(model_path, load_external_data=False).graph
    init = {t.name for t in g.initializer}

    def describe(v):
        t = v.type.tensor_type
        if t.elem_type not in TYPES:
            sys.exit(f"{model_path}: '{v.name}' has ONNX element type {t.elem_type}, which this "
                     f"script does not feed")
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim][1:]
        if any(d < 1 for d in dims):
            sys.exit(f"{model_path}: '{v.name}' has symbolic dims {dims} past the batch: export "
                     f"it with fixed ones (a sequence length)")
        return v.name, TYPES[t.elem_type][0], dims

    return ([describe(i) for i in g.input if i.name not in init],
            [describe(o) for o in g.output])


def instance_group(kind, instances, gpus):
    """The instance_group entry: count instances on each GPU listed (Triton's rule), or on the
    CPU."""
    if kind == "cpu":
        return f"{{ kind: KIND_CPU, count: {instances} }}"
    return f"{{ kind: KIND_GPU, count: {instances}, gpus: [{', '.join(map(str, gpus))}] }}"


def model_config(args, inputs, outputs):
    """config.pbtxt of one model."""
    tensors = lambda ts: ", ".join(f'{{ name: "{n}", data_type: {t}, dims: {d} }}'
                                   for n, t, d in ts)
    text = (f'backend: "tcinfer"\nmax_batch_size: {args.max_batch}\n'
            f'input [{tensors(inputs)}]\n'
            f'output [{tensors(outputs)}]\n'
            f'instance_group [{instance_group(args.kind, args.instances, args.gpus)}]\n'
            f'dynamic_batching {{ max_queue_delay_microseconds: {args.queue_delay_us} }}\n')
    if args.pipeline_depth:
        text += (f'parameters {{ key: "pipeline_depth" value {{ string_value: '
                 f'"{args.pipeline_depth}" }} }}\n')
    if args.batch_buckets:
        text += (f'parameters {{ key: "batch_buckets" value {{ string_value: '
                 f'"{args.batch_buckets}" }} }}\n')
    if args.kind == "gpu":
        text += f'parameters {{ key: "precision" value {{ string_value: "{args.precision}" }} }}\n'
        if args.accuracy_target:
            text += (f'parameters {{ key: "accuracy_target" value {{ string_value: '
                     f'"{args.accuracy_target}" }} }}\n')
    return text


def make_batch(inputs, n, seed):
    """Seeded inputs of batch n: floats uniform in [-1, 1), masks (an integer input whose name
    holds 'mask') all ones, other integers (token ids) in [0, 1000)."""
    rng = np.random.default_rng(seed)
    batch = {}
    for name, data_type, dims in inputs:
        dtype = next(d for t, d in TYPES.values() if t == data_type)
        shape = [n] + dims
        if np.issubdtype(dtype, np.floating):
            batch[name] = rng.uniform(-1, 1, shape).astype(dtype)
        elif "mask" in name.lower() or dtype == np.bool_:
            batch[name] = np.ones(shape, dtype)
        else:
            batch[name] = rng.integers(0, 1000, shape).astype(dtype)
    return batch


def cli_command(args, model, files, shapes, out_dir, gpu):
    """The CLI on the given input files: the fp32 CPU reference, or (gpu: a device index) the GPU
    engine of --precision on that device; every output into out_dir."""
    cmd = [args.tcinfer, "--quiet", "--output-dir", out_dir, "--shapes", shapes]
    if gpu is None:
        cmd += ["--backend", "cpu"]
    else:
        cmd += ["--device", str(gpu), "--precision", args.precision]
        if args.accuracy_target:
            cmd += ["--accuracy-target", str(args.accuracy_target)]
    return cmd + [model] + [f"{name}={path}" for name, path in files.items()]


def bench_command(args, model, inputs, batch, gpu):
    shapes = ",".join(f"{n}:{batch}x" + "x".join(map(str, d)) for n, _, d in inputs)
    cmd = [args.tcinfer, "--device", str(gpu), "--shapes", shapes, "--random", "0", "--quiet",
           "--bench", "200", "--precision", args.precision]
    if args.accuracy_target:
        cmd += ["--accuracy-target", str(args.accuracy_target)]
    return cmd + [model]


def bench_batches(args):
    """--bench-batches, else batch 1 and the largest batch the server forms: the largest
    concurrency, at most max_batch_size."""
    if args.bench_batches:
        return sorted(set(args.bench_batches))
    return sorted({1, min(max(args.concurrency), args.max_batch)})


def run(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r


def rel_l2(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30))


def write_repository(args):
    """{model name: (path, inputs, outputs)}, each written to <work>/repo/<name>."""
    shutil.rmtree(args.work, ignore_errors=True)
    repo = os.path.join(args.work, "repo")
    models = {}
    for path in args.model:
        name = model_name(path)
        inputs, outputs = io_of(path)
        os.makedirs(os.path.join(repo, name, "1"))
        shutil.copy(path, os.path.join(repo, name, "1", "model.onnx"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(model_config(args, inputs, outputs))
        models[name] = (path, inputs, outputs)
    return repo, models


def request_input(grpcclient, tensor, data):
    """A gRPC input of tensor (name, data_type, dims) holding data."""
    inp = grpcclient.InferInput(tensor[0], list(data.shape), tensor[1][len("TYPE_"):])
    inp.set_data_from_numpy(data)
    return inp


def accuracy(args, client, grpcclient, name, path, inputs, outputs):
    """Step 1 for one model: batches of 1, 3 and --accuracy-batch through the server against the
    CLI on the same inputs."""
    last = None
    for n in sorted({1, 3, args.accuracy_batch}):
        batch = make_batch(inputs, n, n)
        req = [request_input(grpcclient, t, batch[t[0]]) for t in inputs]
        result = client.infer(name, req)
        got = {o: result.as_numpy(o) for o, _, _ in outputs}
        files = {}
        for k, v in batch.items():
            files[k] = os.path.join(args.work, f"{name}_{k}.npy")
            np.save(files[k], v)
        shapes = ",".join(f"{k}:" + "x".join(map(str, v.shape)) for k, v in batch.items())
        outs = {}
        for backend in ("cpu", "gpu"):
            gpu = args.gpus[0] if backend == "gpu" and args.kind == "gpu" else None
            out_dir = os.path.join(args.work, f"{name}_{backend}")
            run(cli_command(args, path, files, shapes, out_dir, gpu))
            outs[backend] = {o: np.load(os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]", "_", o)
                                                     + ".npy")) for o, _, _ in outputs}
        row = {"check": "accuracy", "model": name, "batch": n}
        for o, _, _ in outputs:
            ref = outs["cpu"][o]
            row[o] = {"triton_vs_fp32_rel_l2": rel_l2(got[o], ref),
                      "cli_gpu_vs_fp32_rel_l2": rel_l2(outs["gpu"][o], ref),
                      "triton_vs_cli_gpu_rel_l2": rel_l2(got[o], outs["gpu"][o]),
                      "finite": bool(np.isfinite(got[o]).all())}
            if ref.ndim == 2 and ref.shape[1] > 1:
                row[o]["top1_agree"] = int((got[o].argmax(1) == ref.argmax(1)).sum())
        print(json.dumps(row), flush=True)
        last = (req, got, batch)
    # 1b. the last batch with input and output in GPU memory (CUDA shared memory)
    if args.kind == "gpu" and len(inputs) == 1 and inputs[0][1] == "TYPE_FP32":
        import triton_cuda_shm
        (in_name, _, in_dims), (out_name, _, out_dims) = inputs[0], outputs[0]
        shm = triton_cuda_shm.check(client, grpcclient, name, in_name, in_dims, out_name,
                                    out_dims, last[1][out_name], batch[in_name])
        print(json.dumps({"model": name, **shm}), flush=True)
    return last


def http_checks(server, client, name, inputs, outputs, req, got, batch):
    """The last accuracy batch over HTTP against the gRPC answer; then malformed HTTP requests (a
    wrong dtype, a missing input, an unknown output), each answered with its error and followed
    by the good gRPC request, whose answer must not change."""
    import tritonclient.http as httpclient
    http = httpclient.InferenceServerClient(server.http_url)

    def http_input(tensor, data, name=None, dtype=None):
        inp = httpclient.InferInput(name or tensor[0], list(data.shape),
                                    dtype or tensor[1][len("TYPE_"):])
        inp.set_data_from_numpy(data)
        return inp

    good = [http_input(t, batch[t[0]]) for t in inputs]
    over_http = http.infer(name, good)
    print(json.dumps({"check": "http", "model": name, "vs_grpc_rel_l2": {
        o: rel_l2(over_http.as_numpy(o), got[o]) for o, _, _ in outputs}}), flush=True)
    first = inputs[0]
    wrong_dtype = np.float64 if first[1] != "TYPE_FP64" else np.float32
    malformed = {
        "wrong dtype": [http_input(first, batch[first[0]].astype(wrong_dtype),
                                   dtype="FP64" if wrong_dtype == np.float64 else "FP32")]
        + good[1:],
        "missing input": [http_input(first, batch[first[0]], name=first[0] + "_missing")]
        + good[1:],
    }
    calls = {what: (lambda r=r: http.infer(name, r)) for what, r in malformed.items()}
    calls["unknown output"] = lambda: http.infer(
        name, good, outputs=[httpclient.InferRequestedOutput("no_such_output")])
    for what, call in calls.items():
        try:
            call()
            err = None
        except Exception as e:
            err = str(e)
        again = client.infer(name, req).as_numpy(outputs[0][0])
        print(json.dumps({"check": what, "model": name, "error": err,
                          "serves_on": bool(np.array_equal(again, got[outputs[0][0]]))}),
              flush=True)


def server_args(args):
    """tritonserver's options besides the repository and ports: its gRPC front end keeps as many
    request and response objects for reuse as the most requests in flight (default 8: past that
    each request allocates and frees its own, with the tensors' bytes)."""
    return ["--grpc-infer-allocation-pool-size", str(max(8, max(args.concurrency)))]


def load_command(args, url, name, shm):
    return [sys.executable, os.path.join(HERE, "triton_load.py"), "--url", url, "--model", name,
            "--concurrency", ",".join(map(str, args.concurrency)), "--seconds",
            str(args.seconds), "--processes", str(args.load_processes), "--shm", shm]


def load(args, client, url, name):
    """Step 3 for one model: triton_load.py, then perf_analyzer, in each --load-shm mode; the
    rows (triton_load.py's JSON)."""
    rows = []
    for shm in args.load_shm:
        try:  # a mode that fails is a row with its error; the others still run
            r = subprocess.run(load_command(args, url, name, shm), capture_output=True, text=True,
                               timeout=60 + 20 * len(args.concurrency) * (args.seconds + 3))
            failure = f"exited {r.returncode}: {r.stderr[-600:]}" if r.returncode else None
            out = r.stdout
        except subprocess.TimeoutExpired as e:
            failure, out = "timed out", e.stdout or ""
            out = out.decode() if isinstance(out, bytes) else out
        done = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if failure:
            done.append({"concurrency": "-", "client": "triton_load.py", "model": name,
                         "shm": shm, "error": f"triton_load.py {failure}"})
        for row in done:
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.perf_analyzer:
        import triton_perf_analyzer
        config = client.get_model_config(name, as_json=True)["config"]
        for shm in args.load_shm:
            for b in args.request_batch:
                for c in args.concurrency:
                    row = triton_perf_analyzer.run(args.perf_analyzer, url, name, config, c,
                                                   args.seconds, shm, os.path.join(args.work, "pa"),
                                                   b)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    return rows


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def load_table(rows):
    """The load rows as a markdown table: the client's view and the server's statistics."""
    lines = ["| model | client | shm | concurrency | rows/request | requests/s | rows/s | p50 ms | "
             "p99 ms | errors | rows/exec | queue us | compute input us | infer us | output us |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
             "| --- |"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['model']} | {row['client']} | {row['shm']} | "
                         f"{row['concurrency']} | {row.get('batch', 1)} | failed: "
                         f"{row['error'][:120]} |")
            continue
        s = row.get("server", {})
        lines.append(f"| {row['model']} | {row['client']} | {row['shm']} | {row['concurrency']} | "
                     f"{row['batch']} | {row['requests_per_s']:.0f} | {row['items_per_s']:.0f} | "
                     f"{fmt(row['p50_ms'], '.2f')} | "
                     f"{fmt(row['p99_ms'], '.2f')} | {row['errors']} | "
                     f"{fmt(s.get('rows_per_execution'), '.1f')} | "
                     f"{fmt(s.get('queue_us'), '.0f')} | {fmt(s.get('compute_input_us'), '.0f')} | "
                     f"{fmt(s.get('compute_infer_us'), '.0f')} | "
                     f"{fmt(s.get('compute_output_us'), '.0f')} |")
    return "\n".join(lines)


def serve_and_measure(args, repo, models):
    import tritonclient.grpc as grpcclient
    from local_server import LocalServer
    rows = []
    try:
        server = LocalServer(repo, args.backend_dir, os.path.join(args.work, "server.log"),
                             site_packages=args.server, extra_args=server_args(args))
    except RuntimeError as e:
        sys.exit(str(e))
    url = server.grpc_url
    try:
        client = grpcclient.InferenceServerClient(url)
        try:
            ready_s = server.wait_ready(lambda: client.is_server_ready() and all(
                client.is_model_ready(n) for n in models), 600, 0.5)
        except RuntimeError as e:
            sys.exit(str(e))
        print(json.dumps({"ready_s": round(ready_s, 1), "models": list(models), "precision":
                          args.precision, "gpus": args.gpus, "instances_per_gpu": args.instances,
                          "max_batch": args.max_batch}), flush=True)
        for line in server.log_text(None).splitlines():
            if "precision auto kept" in line:
                print(json.dumps({"check": "precision auto", "server_log": line.strip()}),
                      flush=True)
        for name, (path, inputs, outputs) in models.items():
            req, got, batch = accuracy(args, client, grpcclient, name, path, inputs, outputs)
            # 2. a wrong shape (the first input's last dim one longer): an error, and the
            # server serves on
            n0, _, d0 = inputs[0]
            one = make_batch(inputs, 1, 0)
            bad_dims = [1] + d0[:-1] + [d0[-1] + 1]
            bad = [request_input(grpcclient, inputs[0], np.zeros(bad_dims, one[n0].dtype))]
            bad += [request_input(grpcclient, t, one[t[0]]) for t in inputs[1:]]
            try:
                client.infer(name, bad)
                err = None
            except Exception as e:
                err = str(e)
            again = client.infer(name, req).as_numpy(outputs[0][0])
            print(json.dumps({"check": "wrong shape", "model": name, "error": err,
                              "serves_on": bool(np.array_equal(again, got[outputs[0][0]]))}),
                  flush=True)
            http_checks(server, client, name, inputs, outputs, req, got, batch)
            # 3. load
            rows += load(args, client, url, name)
            stats = client.get_inference_statistics(name, as_json=True)["model_stats"][0]
            print(json.dumps({"check": "statistics", "model": name, "inference_count":
                              stats.get("inference_count"), "execution_count":
                              stats.get("execution_count")}), flush=True)
    finally:
        server.stop(20)
    return rows


def main(argv=None):
    args = parse_args(argv)
    repo, models = write_repository(args)
    if args.dry_run:
        for name, (path, inputs, _) in models.items():
            print(f"# {repo}/{name}/config.pbtxt\n"
                  + open(os.path.join(repo, name, "config.pbtxt")).read())
            batch = make_batch(inputs, args.accuracy_batch, args.accuracy_batch)
            files = {k: f"{args.work}/{name}_{k}.npy" for k in batch}
            shapes = ",".join(f"{k}:" + "x".join(map(str, v.shape)) for k, v in batch.items())
            print("# accuracy: " + " ".join(cli_command(args, path, files, shapes, "OUT", None)))
            if args.kind == "gpu":
                print("# accuracy: " + " ".join(cli_command(args, path, files, shapes, "OUT",
                                                            args.gpus[0])))
                for gpu in args.gpus:
                    for b in bench_batches(args):
                        print("# bench: " + " ".join(bench_command(args, path, inputs, b, gpu)))
            for shm in args.load_shm:
                print("# load: " + " ".join(load_command(args, "URL", name, shm)))
        print("# server: tritonserver ... " + " ".join(server_args(args)))
        return
    rows = serve_and_measure(args, repo, models)

    # 4. the engine's own time, by the CLI, on each GPU
    cli = []
    for name, (path, inputs, _) in models.items():
        for gpu in [] if args.kind == "cpu" else args.gpus:
            for b in bench_batches(args):
                r = run(bench_command(args, path, inputs, b, gpu))
                m = BENCH_RE.search(r.stdout + r.stderr)
                row = {"check": "cli bench", "model": name, "device": gpu, "batch": b,
                       "median_ms": float(m.group(1)), "p99_ms": float(m.group(3)),
                       "items_per_s": float(m.group(4))}  # the CLI's throughput counts items
                cli.append(row)
                print(json.dumps(row), flush=True)

    print(f"\nGPUs {args.gpus}, {args.instances} instance(s) per GPU, max_batch_size "
          f"{args.max_batch}\n")
    print(load_table(rows))
    for c in cli:
        print(f"\nCLI --bench {c['model']} device {c['device']} batch {c['batch']}: median "
              f"{c['median_ms']:.3f} ms, p99 {c['p99_ms']:.3f} ms, {c['items_per_s']:.0f} items/s")


if __name__ == "__main__":
    main()
