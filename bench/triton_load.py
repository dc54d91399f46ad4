#!/usr/bin/env python3
"""Load on a model served by Triton (docs/serving.md): N requests in flight at all times over
gRPC (tritonclient's asyncio client), for a fixed time after a warm-up; prints throughput,
latency percentiles and the server's own statistics over the measured window as JSON.

  triton_load.py --url 127.0.0.1:8001 --model resnet50 --concurrency 1,8,64,128 \
                 [--batch 1] [--seconds 10] [--warmup 2] [--processes 1] \
                 [--shm none|system|cuda]

--processes P spreads each level's requests in flight over P client processes started together
(their latencies pooled): one Python process is the limit at high concurrency.

--shm keeps the tensors out of the requests, so that the load generator measures the server and
not its own serialisation of large inputs: each client process puts the input in one shared
memory region (system: POSIX shared memory, the server on the same host; cuda: a cudaMalloc
buffer on GPU 0 shared by its CUDA IPC handle, through bench/triton_cuda_shm.py), with one output
slot per request in flight after it, registers the region once per level and has every request
name it. After the level one request in the body checks that the answer in shared memory is the
same (shm_max_abs_diff).

Every request sends the same seeded input of the model's configured shape (batch --batch):
floats uniform in [-1, 1), integer inputs named like a mask all ones, other integers (token ids)
in [0, 1000). It checks that the answer holds every configured output; a failed request counts
as an error (and its message is kept). Output: one JSON object per concurrency, one line each;
its "server" entry holds the model's statistics (Triton's statistics extension) over the
measured window: inferences, executions and their ratio (rows per execution), and per request
the queue, compute input, compute infer and compute output times and their sum (request_us:
Triton's success time, from its arrival at the scheduler to its end).
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
from tritonclient.grpc import InferInput, InferRequestedOutput
from tritonclient.utils import triton_to_np_dtype

CONFIG_TYPES = {"TYPE_FP32": "FP32", "TYPE_FP16": "FP16", "TYPE_BF16": "BF16",
                "TYPE_FP64": "FP64", "TYPE_INT64": "INT64", "TYPE_INT32": "INT32",
                "TYPE_INT8": "INT8", "TYPE_UINT8": "UINT8", "TYPE_BOOL": "BOOL"}
SHM_KINDS = ("none", "system", "cuda")
STAT_PHASES = ("success", "queue", "compute_input", "compute_infer", "compute_output")


def input_data(name, dtype, shape, rng):
    """The data of one input: floats uniform in [-1, 1); an integer input named like a mask all
    ones (every position attended); other integers (token ids of any vocabulary) in [0, 1000)."""
    if np.issubdtype(dtype, np.floating):
        return rng.uniform(-1, 1, shape).astype(dtype)
    if "mask" in name.lower() or dtype == np.bool_:
        return np.ones(shape, dtype)
    return rng.integers(0, 1000, shape).astype(dtype)


def tensor_shape(config, t, batch):
    """The shape of config tensor t in a request of batch rows; variable dims are an error."""
    dims = [int(d) for d in t["dims"]]
    if any(d < 0 for d in dims):
        sys.exit(f"{t['name']} has variable dims {dims}: give the model fixed dims")
    return ([batch] if int(config.get("max_batch_size", 0)) > 0 else []) + dims


def input_arrays(config, batch):
    """[(name, Triton datatype, data)] of the configured inputs, seeded."""
    rng = np.random.default_rng(0)
    arrays = []
    for t in config["input"]:
        dtype = CONFIG_TYPES[t["data_type"]]
        arrays.append((t["name"], dtype, input_data(t["name"], triton_to_np_dtype(dtype),
                                                    tensor_shape(config, t, batch), rng)))
    return arrays


def make_inputs(config, batch):
    """The request-body inputs, the requested outputs and the output names."""
    inputs = []
    for name, dtype, data in input_arrays(config, batch):
        inp = InferInput(name, list(data.shape), dtype)
        inp.set_data_from_numpy(data)
        inputs.append(inp)
    outputs = [InferRequestedOutput(t["name"]) for t in config["output"]]
    return inputs, outputs, [t["name"] for t in config["output"]]


def shm_layout(config, batch, workers):
    """Where everything lies in one process's region: ({input: (offset, bytes)}, [per worker
    {output: (offset, bytes, shape, numpy dtype)}], total bytes), each entry 64-byte aligned."""
    at = 0

    def take(n):
        nonlocal at
        start, at = at, at + (n + 63) // 64 * 64
        return start

    inputs = {}
    for name, _, data in input_arrays(config, batch):
        inputs[name] = (take(data.nbytes), data.nbytes)
    slots = []
    for _ in range(workers):
        slot = {}
        for t in config["output"]:
            shape = tensor_shape(config, t, batch)
            dtype = np.dtype(triton_to_np_dtype(CONFIG_TYPES[t["data_type"]]))
            n = int(np.prod(shape)) * dtype.itemsize
            slot[t["name"]] = (take(n), n, shape, dtype)
        slots.append(slot)
    return inputs, slots, at


class SystemRegion:
    """POSIX shared memory the server maps (it runs on this host)."""

    def __init__(self, name, size):
        import tritonclient.utils.shared_memory as shm
        self.shm, self.name = shm, name
        self.handle = shm.create_shared_memory_region(name, "/" + name, size)

    def write(self, offset, data):
        self.shm.set_shared_memory_region(self.handle, [np.ascontiguousarray(data)], offset)

    def read(self, offset, shape, dtype):
        return self.shm.get_contents_as_numpy(self.handle, dtype, shape, offset).copy()

    async def register(self, client, size):
        await client.register_system_shared_memory(self.name, "/" + self.name, size)

    async def unregister(self, client):
        await client.unregister_system_shared_memory(self.name)

    def close(self):
        self.shm.destroy_shared_memory_region(self.handle)


class CudaRegion:
    """A cudaMalloc buffer on GPU 0, shared with the server by its CUDA IPC handle."""

    def __init__(self, name, size):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import ctypes
        import triton_cuda_shm
        self.ctypes, self.name, self.size = ctypes, name, size
        self.rt = triton_cuda_shm._cudart()
        self.ptr = ctypes.c_void_p()
        self.ok(self.rt.cudaSetDevice(0), "cudaSetDevice")
        self.ok(self.rt.cudaMalloc(ctypes.byref(self.ptr), ctypes.c_size_t(size)), "cudaMalloc")
        handle = triton_cuda_shm._IpcHandle()
        self.ok(self.rt.cudaIpcGetMemHandle(ctypes.byref(handle), self.ptr),
                "cudaIpcGetMemHandle")
        self.raw = ctypes.string_at(ctypes.addressof(handle), ctypes.sizeof(handle))

    @staticmethod
    def ok(err, what):
        if err != 0:
            raise RuntimeError(f"{what} failed: CUDA error {err}")

    def copy(self, dst, src, n, kind):
        self.ok(self.rt.cudaMemcpy(dst, src, self.ctypes.c_size_t(n), kind), "cudaMemcpy")

    def write(self, offset, data):
        data = np.ascontiguousarray(data)
        self.copy(self.ctypes.c_void_p(self.ptr.value + offset),
                  data.ctypes.data_as(self.ctypes.c_void_p), data.nbytes, 1)  # host to device

    def read(self, offset, shape, dtype):
        out = np.empty(shape, dtype)
        self.copy(out.ctypes.data_as(self.ctypes.c_void_p),
                  self.ctypes.c_void_p(self.ptr.value + offset), out.nbytes, 2)  # device to host
        return out

    async def register(self, client, size):
        import base64
        await client.register_cuda_shared_memory(self.name, base64.b64encode(self.raw), 0, size)

    async def unregister(self, client):
        await client.unregister_cuda_shared_memory(self.name)

    def close(self):
        self.rt.cudaFree(self.ptr)


async def run_workers(client, model, requests, names, start_at, seconds, warmup):
    """One worker per (inputs, outputs) of requests, each keeping one request in flight from
    start_at (time.time()) for warmup + seconds; the latencies (s) of the requests within the
    measured window, and the errors' messages."""
    latencies, errors = [], []
    delay = start_at - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
    start = time.perf_counter()
    measure_from = start + warmup
    stop = measure_from + seconds

    async def worker(inputs, outputs):
        while True:
            t0 = time.perf_counter()
            if t0 >= stop:
                return
            try:
                result = await client.infer(model, inputs, outputs=outputs)
                ok = all(result.get_output(n) is not None for n in names)
                err = None if ok else "an output is missing"
            except Exception as e:  # the server's error, kept for the report
                err = str(e)
            t1 = time.perf_counter()
            if t0 >= measure_from and t1 <= stop:
                if err:
                    errors.append(err)
                else:
                    latencies.append(t1 - t0)

    await asyncio.gather(*(worker(i, o) for i, o in requests))
    return latencies, errors


async def process_level(url, model, batch, workers, start_at, seconds, warmup, shm_kind):
    """One process's share of a level: its own client, inputs and shared memory region.
    Returns (latencies, errors, the largest difference between an answer in shared memory and
    the same request's answer in the body, or None without --shm)."""
    client = grpcaio.InferenceServerClient(url)
    region = None
    registered = False
    try:
        config = (await client.get_model_config(model, as_json=True))["config"]
        inputs, outputs, names = make_inputs(config, batch)
        if shm_kind == "none":
            requests = [(inputs, outputs)] * workers
        else:
            in_at, slots, size = shm_layout(config, batch, workers)
            name = f"tcinfer_load_{os.getpid()}"
            region = (SystemRegion if shm_kind == "system" else CudaRegion)(name, size)
            shm_inputs = []
            for (iname, dtype, data), body in zip(input_arrays(config, batch), inputs):
                region.write(in_at[iname][0], data)
                inp = InferInput(iname, list(data.shape), dtype)
                inp.set_shared_memory(name, in_at[iname][1], offset=in_at[iname][0])
                shm_inputs.append(inp)
            await region.register(client, size)
            registered = True
            requests = []
            for slot in slots:
                outs = []
                for oname, (offset, n, _, _) in slot.items():
                    out = InferRequestedOutput(oname)
                    out.set_shared_memory(name, n, offset=offset)
                    outs.append(out)
                requests.append((shm_inputs, outs))
        latencies, errors = await run_workers(client, model, requests, names, start_at, seconds,
                                              warmup)
        diff = None
        if region is not None:  # the last answer of worker 0 against the body's
            body = await client.infer(model, inputs, outputs=outputs)
            diff = 0.0
            for oname, (offset, _, shape, dtype) in slots[0].items():
                got = region.read(offset, shape, dtype).astype(np.float64)
                want = body.as_numpy(oname).astype(np.float64)
                diff = max(diff, float(np.max(np.abs(got - want))) if got.size else 0.0)
        return latencies, errors, diff
    finally:
        if registered:
            await region.unregister(client)
        if region is not None:
            region.close()
        await client.close()


def process_main(task):
    try:
        return asyncio.run(process_level(*task))
    except Exception as e:  # tritonclient's exceptions do not survive the trip back (pickling)
        raise RuntimeError(f"client process: {type(e).__name__}: {e}") from None


def process_init(barrier):
    """A client process is ready (this module and tritonclient imported) once all are."""
    barrier.wait(120)


def server_stats(client, model):
    """The model's cumulative statistics (every version): inference and execution counts, and
    (count, ns) of each phase of STAT_PHASES."""
    total = {"inferences": 0, "executions": 0}
    total.update({p: [0, 0] for p in STAT_PHASES})
    for s in client.get_inference_statistics(model, as_json=True).get("model_stats", []):
        total["inferences"] += int(s.get("inference_count", 0))
        total["executions"] += int(s.get("execution_count", 0))
        for p in STAT_PHASES:
            entry = s.get("inference_stats", {}).get(p, {})
            total[p][0] += int(entry.get("count", 0))
            total[p][1] += int(entry.get("ns", 0))
    return total


def stats_report(before, after):
    """The server's statistics between two snapshots: counts, rows per execution and the mean
    time of each phase per successful request, in microseconds."""
    inferences = after["inferences"] - before["inferences"]
    executions = after["executions"] - before["executions"]
    requests = after["success"][0] - before["success"][0]
    report = {"inferences": inferences, "executions": executions, "requests": requests,
              "rows_per_execution": inferences / executions if executions else None}
    for p in STAT_PHASES:
        key = "request_us" if p == "success" else p + "_us"
        report[key] = (after[p][1] - before[p][1]) / requests / 1e3 if requests else None
    return report


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


def wait_until(pending, t):
    """Waits until time.time() reaches t, or raises at once the error of a client process that
    failed before."""
    pending.wait(max(0.0, t - time.time()))
    if pending.ready() and not pending.successful():
        pending.get()


def run_level(args, level, pool, stats_client):
    """One concurrency level over args.processes client processes started together; the
    server's statistics are read at the start and the end of the measured window."""
    shares = split(level, args.processes)
    start_at = time.time() + 0.5  # every process connected (and its region registered)
    tasks = [(args.url, args.model, args.batch, w, start_at, args.seconds, args.warmup,
              args.shm) for w in shares]
    pending = pool.map_async(process_main, tasks, chunksize=1)
    wait_until(pending, start_at + args.warmup)
    before = server_stats(stats_client, args.model)
    wait_until(pending, start_at + args.warmup + args.seconds)
    after = server_stats(stats_client, args.model)
    results = pending.get()
    latencies = [x for lat, _, _ in results for x in lat]
    errors = [e for _, err, _ in results for e in err]
    report = level_report(level, latencies, errors, args.seconds)
    report.update(client="triton_load.py", model=args.model, batch=args.batch,
                  processes=len(shares), shm=args.shm,
                  items_per_s=report["requests_per_s"] * args.batch,
                  server=stats_report(before, after))
    if args.shm != "none":
        report["shm_max_abs_diff"] = max(d for _, _, d in results)
    return report


def parse_args(argv=None):
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
    p.add_argument("--shm", choices=SHM_KINDS, default="none",
                   help="where the tensors travel: in the requests (none), or in a shared memory "
                        "region per client process (system; cuda: GPU 0)")
    args = p.parse_args(argv)
    if (args.batch < 1 or args.seconds <= 0 or args.warmup < 0 or min(args.concurrency) < 1 or
            args.processes < 1):
        p.error("--batch, --concurrency, --processes >= 1; --seconds > 0; --warmup >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    stats_client = grpcclient.InferenceServerClient(args.url)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(args.processes + 1)
    with ctx.Pool(args.processes, process_init, (ready,)) as pool:
        ready.wait(120)  # every level's processes start at the same moment
        for level in args.concurrency:
            try:
                report = run_level(args, level, pool, stats_client)
            except Exception as e:  # a client process's, or the statistics' request
                sys.exit(f"triton_load.py: concurrency {level}: {e}")
            print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
