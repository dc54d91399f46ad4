#!/usr/bin/env python3
"""Load on a model served by Triton (docs/serving.md): N requests in flight at all times over
gRPC (tritonclient's asyncio client), for a fixed time after a warm-up; prints throughput and
latency percentiles as JSON. For the H200 measurements where perf_analyzer is not at hand.

  triton_load.py --url 127.0.0.1:8001 --model resnet50 --concurrency 1,8,64 \
                 [--batch 1] [--seconds 10] [--warmup 2] [--processes 1]

--processes P spreads each level's requests in flight over P client processes started together
(their latencies pooled): one Python process is the limit at high concurrency.

Every request sends the same seeded input of the model's configured shape (batch --batch):
floats uniform in [-1, 1), integer inputs named like a mask all ones, other integers (token ids)
in [0, 1000). It checks that the answer holds every configured output; a failed request counts
as an error (and its message is kept). Output: one JSON object per concurrency, one line each.
"""
import argparse
import asyncio
import json
import multiprocessing
import sys
import time

import numpy as np
import tritonclient.grpc.aio as grpcaio
from tritonclient.grpc import InferInput, InferRequestedOutput
from tritonclient.utils import triton_to_np_dtype

CONFIG_TYPES = {"TYPE_FP32": "FP32", "TYPE_FP16": "FP16", "TYPE_BF16": "BF16",
                "TYPE_FP64": "FP64", "TYPE_INT64": "INT64", "TYPE_INT32": "INT32",
                "TYPE_INT8": "INT8", "TYPE_UINT8": "UINT8", "TYPE_BOOL": "BOOL"}


def input_data(name, dtype, shape, rng):
    """The data of one input: floats uniform in [-1, 1); an integer input named like a mask all
    ones (every position attended); other integers (token ids of any vocabulary) in [0, 1000)."""
    if np.issubdtype(dtype, np.floating):
        return rng.uniform(-1, 1, shape).astype(dtype)
    if "mask" in name.lower() or dtype == np.bool_:
        return np.ones(shape, dtype)
    return rng.integers(0, 1000, shape).astype(dtype)


def make_inputs(config, batch):
    rng = np.random.default_rng(0)
    inputs = []
    for t in config["input"]:
        dims = [int(d) for d in t["dims"]]
        if any(d < 0 for d in dims):
            sys.exit(f"input {t['name']} has variable dims {dims}: give the model fixed dims")
        shape = ([batch] if int(config.get("max_batch_size", 0)) > 0 else []) + dims
        dtype = CONFIG_TYPES[t["data_type"]]
        data = input_data(t["name"], triton_to_np_dtype(dtype), shape, rng)
        inp = InferInput(t["name"], shape, dtype)
        inp.set_data_from_numpy(data)
        inputs.append(inp)
    outputs = [InferRequestedOutput(t["name"]) for t in config["output"]]
    return inputs, outputs, [t["name"] for t in config["output"]]


async def run_workers(client, model, inputs, outputs, names, workers, start_at, seconds, warmup):
    """workers requests in flight from start_at (time.time()) for warmup + seconds; the latencies
    (s) of the requests within the measured window, and the errors' messages."""
    latencies, errors = [], []
    delay = start_at - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
    start = time.perf_counter()
    measure_from = start + warmup
    stop = measure_from + seconds

    async def worker():
        while True:
            t0 = time.perf_counter()
            if t0 >= stop:
                return
            try:
                result = await client.infer(model, inputs, outputs=outputs)
                ok = all(result.as_numpy(n) is not None for n in names)
                err = None if ok else "an output is missing"
            except Exception as e:  # the server's error, kept for the report
                err = str(e)
            t1 = time.perf_counter()
            if t0 >= measure_from and t1 <= stop:
                if err:
                    errors.append(err)
                else:
                    latencies.append(t1 - t0)

    await asyncio.gather(*(worker() for _ in range(workers)))
    return latencies, errors


async def process_level(url, model, batch, workers, start_at, seconds, warmup):
    """One process's share of a level: its own client and inputs."""
    client = grpcaio.InferenceServerClient(url)
    try:
        config = (await client.get_model_config(model, as_json=True))["config"]
        inputs, outputs, names = make_inputs(config, batch)
        return await run_workers(client, model, inputs, outputs, names, workers, start_at,
                                 seconds, warmup)
    finally:
        await client.close()


def process_main(task):
    return asyncio.run(process_level(*task))


def level_report(concurrency, latencies, errors, seconds):
    ms = np.array(latencies) * 1e3
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "requests_per_s": len(latencies) / seconds,
        "p50_ms": float(np.percentile(ms, 50)) if len(ms) else None,
        "p90_ms": float(np.percentile(ms, 90)) if len(ms) else None,
        "p99_ms": float(np.percentile(ms, 99)) if len(ms) else None,
    }


def split(concurrency, processes):
    """concurrency workers over at most processes processes, as evenly as they go."""
    n = min(concurrency, processes)
    return [concurrency // n + (1 if i < concurrency % n else 0) for i in range(n)]


def run_level(args, level, pool):
    """One concurrency level over args.processes client processes started together."""
    shares = split(level, args.processes)
    start_at = time.time() + (1.0 if len(shares) > 1 else 0.0)  # every process connected
    tasks = [(args.url, args.model, args.batch, w, start_at, args.seconds, args.warmup)
             for w in shares]
    results = pool.map(process_main, tasks) if len(shares) > 1 else [process_main(tasks[0])]
    latencies = [x for lat, _ in results for x in lat]
    errors = [e for _, err in results for e in err]
    report = level_report(level, latencies, errors, args.seconds)
    report.update(model=args.model, batch=args.batch, processes=len(shares),
                  items_per_s=report["requests_per_s"] * args.batch)
    return report


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="gRPC HOST:PORT")
    p.add_argument("--model", required=True)
    p.add_argument("--concurrency", default="1,8,64",
                   type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--batch", type=int, default=1, help="rows per request (batched models)")
    p.add_argument("--seconds", type=float, default=10.0, help="measured time per level")
    p.add_argument("--warmup", type=float, default=2.0, help="unmeasured time before it")
    p.add_argument("--processes", type=int, default=1,
                   help="client processes sharing each level's requests in flight (one Python "
                        "process cannot keep many large requests moving)")
    args = p.parse_args()
    if (args.batch < 1 or args.seconds <= 0 or args.warmup < 0 or min(args.concurrency) < 1 or
            args.processes < 1):
        p.error("--batch, --concurrency, --processes >= 1; --seconds > 0; --warmup >= 0")
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
        for level in args.concurrency:
            print(json.dumps(run_level(args, level, pool)), flush=True)


if __name__ == "__main__":
    main()
