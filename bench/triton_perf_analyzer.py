"""Triton's own load generator, perf_analyzer (C++), on a served model, for bench/triton_gpu.py:
the same seeded batch-1 input as bench/triton_load.py (with a request batch of b, the row b
times in each request), at one concurrency per run, the tensors in the requests or in shared
memory (system, or cuda: GPU memory), its results as the same JSON rows as triton_load.py's
(client "perf_analyzer").

perf_analyzer comes from the pinned tritonclient 2.51.0 wheel (tests/requirements-perf-analyzer.txt;
the newer perf-analyzer wheels need glibc 2.38), which scripts/setup.sh unpacks into
.venv/perf_analyzer: bin/perf_analyzer and lib/ with the two libraries it loads (libb64,
CUDA 12's runtime), copied from nvidia-pytriton's. That folder is what --perf-analyzer names.
"""
import csv
import io
import json
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton_load  # noqa: E402

COUNT_RE = re.compile(r"Inference count: (\d+)\s+Execution count: (\d+)")
# perf_analyzer's CSV columns (microseconds) -> the names of triton_load.py's "server" entry
SERVER_COLUMNS = {"Server Queue": "queue_us", "Server Compute Input": "compute_input_us",
                  "Server Compute Infer": "compute_infer_us",
                  "Server Compute Output": "compute_output_us"}


def input_json(config, path):
    """Writes perf_analyzer's --input-data file: one row (batch 1) of each input, the seeded
    data of triton_load.py."""
    row = {name: data[0].ravel().tolist() if int(config.get("max_batch_size", 0)) > 0
           else data.ravel().tolist()
           for name, _, data in triton_load.input_arrays(config, 1)}
    with open(path, "w") as f:
        json.dump({"data": [row]}, f)


def output_bytes(config):
    """The largest output of one request (batch 1), for --output-shared-memory-size."""
    sizes = [int(np.prod(triton_load.tensor_shape(config, t, 1))) *
             np.dtype(triton_load.triton_to_np_dtype(
                 triton_load.CONFIG_TYPES[t["data_type"]])).itemsize
             for t in config["output"]]
    return max(sizes)


def command(folder, url, model, concurrency, seconds, shm, input_path, out_bytes, csv_path,
            batch=1):
    """(argv, environment) of one run: --concurrency-range concurrency, requests of batch rows
    (out_bytes: the largest output of one row), three
    measurement windows of seconds / 3, averaged. Their agreement is not required (-s 999): a
    fixed time, as triton_load.py's, where perf_analyzer's own stability check would give up on
    a busy machine and the point would be lost."""
    window_ms = max(200, int(seconds * 1000 / 3))
    argv = [os.path.join(folder, "bin", "perf_analyzer"), "-m", model, "-u", url, "-i", "grpc",
            "-b", str(batch), "--concurrency-range", str(concurrency), "-p", str(window_ms),
            "-s", "999", "-r", "3", "--input-data", input_path, "--shared-memory", shm,
            "-f", csv_path]
    if shm != "none":
        argv += ["--output-shared-memory-size", str(out_bytes * batch)]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(folder, "lib") + os.pathsep + env.get("LD_LIBRARY_PATH",
                                                                                "")
    return argv, env


def parse(stdout, csv_text, concurrency, model, shm, batch=1):
    """A triton_load.py-like row from perf_analyzer's output and CSV (its Inferences/Second are
    rows: requests times batch)."""
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    if len(rows) != 1 or int(rows[0]["Concurrency"]) != concurrency:
        raise ValueError(f"perf_analyzer's CSV holds no row of concurrency {concurrency}:\n"
                         f"{csv_text}")
    r = rows[0]
    counts = COUNT_RE.search(stdout)
    inferences, executions = (int(counts.group(1)), int(counts.group(2))) if counts else (0, 0)
    server = {"inferences": inferences, "executions": executions,
              "rows_per_execution": inferences / executions if executions else None}
    server.update({key: float(r[col]) for col, key in SERVER_COLUMNS.items()})
    return {"concurrency": concurrency, "client": "perf_analyzer", "model": model, "batch": batch,
            "shm": shm, "errors": 0, "first_error": None,
            "requests_per_s": float(r["Inferences/Second"]) / batch,
            "items_per_s": float(r["Inferences/Second"]),
            "p50_ms": float(r["p50 latency"]) / 1e3, "p90_ms": float(r["p90 latency"]) / 1e3,
            "p99_ms": float(r["p99 latency"]) / 1e3,
            "client_send_us": float(r["Client Send"]),
            "network_server_us": float(r["Network+Server Send/Recv"]),
            "client_recv_us": float(r["Client Recv"]), "server": server}


def run(folder, url, model, config, concurrency, seconds, shm, work, batch=1):
    """One perf_analyzer run; its row, or a row with the error (the run's last output)."""
    os.makedirs(work, exist_ok=True)
    input_path = os.path.join(work, f"pa_{model}_input.json")
    csv_path = os.path.join(work, f"pa_{model}_{shm}_{concurrency}_b{batch}.csv")
    input_json(config, input_path)
    argv, env = command(folder, url, model, concurrency, seconds, shm, input_path,
                        output_bytes(config), csv_path, batch)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=env,
                           timeout=60 + 10 * seconds)
        if p.returncode != 0:
            raise RuntimeError(f"perf_analyzer exited {p.returncode}: "
                               f"{(p.stdout + p.stderr)[-600:]}")
        with open(csv_path) as f:
            return parse(p.stdout, f.read(), concurrency, model, shm, batch)
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        return {"concurrency": concurrency, "client": "perf_analyzer", "model": model,
                "batch": batch, "shm": shm, "error": str(e)}
