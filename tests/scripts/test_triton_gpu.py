#!/usr/bin/env python3
"""bench/triton_gpu.py, bench/triton_load.py and bench/triton_perf_analyzer.py without a GPU or a
server: the --gpus, --concurrency, --load-shm and --model handling, the configuration of a
two-GPU instance group, the inputs of an image and of a token model (ids, mask), a whole
--dry-run on tiny generated models standing in for ResNet-50 and BERT, the CLI command of the
accuracy check run through the real tcinfer on the CPU backend, the load generator's inputs,
shared memory layout, CUDA shared memory region (its copies over a stand-in for the CUDA
runtime) and server statistics, perf_analyzer's command and the parsing of its results, and the
load table."""
import argparse
import contextlib
import ctypes
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import triton_gpu  # noqa: E402
import triton_load  # noqa: E402
import triton_perf_analyzer  # noqa: E402
import triton_standin  # noqa: E402

BASE = ["--tcinfer", "tcinfer", "--backend-dir", "b", "--work", "w", "--model", "m.onnx"]


def expect_usage_error(argv, text):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            triton_gpu.parse_args(argv)
        except SystemExit as e:
            assert e.code == 2, e.code
            assert text in err.getvalue(), err.getvalue()
            return
    raise AssertionError("%s accepted" % argv)


def check_arguments():
    a = triton_gpu.parse_args(BASE + ["--server", "s"])
    assert a.gpus == [0] and a.concurrency == [1, 8, 64, 128] and a.instances == 1, vars(a)
    assert a.load_shm == ["none", "system", "cuda"] and a.queue_delay_us == 0, vars(a)
    assert a.perf_analyzer is None and a.pipeline_depth is None and a.request_batch == [1], vars(a)
    assert triton_gpu.parse_args(BASE + ["--server", "s", "--request-batch", "1,8"]).request_batch \
        == [1, 8]
    assert triton_gpu.bench_batches(a) == [1, 64], triton_gpu.bench_batches(a)
    a8 = triton_gpu.parse_args(BASE + ["--server", "s", "--bench-batches", "24,1,16"])
    assert triton_gpu.bench_batches(a8) == [1, 16, 24], triton_gpu.bench_batches(a8)
    a = triton_gpu.parse_args(BASE + ["--server", "s", "--kind", "cpu"])
    assert a.load_shm == ["none", "system"], vars(a)
    a = triton_gpu.parse_args(BASE + ["--dry-run", "--load-shm", "system"])
    assert a.load_shm == ["system"], vars(a)
    expect_usage_error(BASE + ["--dry-run", "--load-shm", "none,disk"],
                       "--load-shm wants distinct modes")
    expect_usage_error(BASE + ["--dry-run", "--load-shm", "none,none"],
                       "--load-shm wants distinct modes")
    expect_usage_error(BASE + ["--dry-run", "--kind", "cpu", "--load-shm", "cuda"],
                       "--load-shm cuda needs GPU instances")
    expect_usage_error(BASE + ["--dry-run", "--perf-analyzer", "/nonexistent"],
                       "no bin/perf_analyzer there")
    expect_usage_error(BASE + ["--dry-run", "--queue-delay-us", "-1"], "--queue-delay-us wants")
    expect_usage_error(BASE + ["--dry-run", "--bench-batches", "1,65"],
                       "--bench-batches goes up to --max-batch (64)")
    expect_usage_error(BASE + ["--dry-run", "--request-batch", "0"],
                       "--request-batch wants distinct integers >= 1")
    a = triton_gpu.parse_args(BASE + ["--dry-run", "--gpus", "0,1", "--concurrency", "1,16"])
    assert a.gpus == [0, 1] and a.concurrency == [1, 16] and a.server is None, vars(a)
    expect_usage_error(BASE + ["--dry-run", "--gpus", "0,0"], "--gpus wants distinct integers")
    expect_usage_error(BASE + ["--dry-run", "--gpus", "-1"], "--gpus wants distinct integers >= 0")
    expect_usage_error(BASE + ["--dry-run", "--gpus", "0,x"], "--gpus wants a comma-separated")
    expect_usage_error(BASE + ["--dry-run", "--concurrency", "0,16"],
                       "--concurrency wants distinct integers >= 1")
    expect_usage_error(BASE, "--server is needed")
    expect_usage_error(BASE + ["--dry-run", "--kind", "cpu", "--gpus", "0,1"],
                       "--gpus places KIND_GPU instances")
    expect_usage_error(BASE + ["--dry-run", "--model", "other/m.onnx"], "the same model name")
    expect_usage_error(BASE + ["--dry-run", "--instances", "0"], "--instances and --max-batch")
    assert (triton_gpu.instance_group("gpu", 2, [0, 1]) ==
            "{ kind: KIND_GPU, count: 2, gpus: [0, 1] }")
    assert triton_gpu.instance_group("cpu", 3, [0]) == "{ kind: KIND_CPU, count: 3 }"


def image_model(path):
    """A convolution standing in for ResNet-50: input [N,3,8,8] -> logits [N,4]."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 8, 8))
                                .astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["input", "w"], ["c"], name="conv"),
             helper.make_node("Flatten", ["c"], ["logits"], name="flat")]
    g = helper.make_graph(nodes, "image",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                         ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4])],
                          [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              path)


def token_model(path):
    """Standing in for BERT: input_ids and attention_mask [N,16] (int64) -> embeddings of the
    ids times the mask, [N,16,4]."""
    e = numpy_helper.from_array(np.arange(4000, dtype=np.float32).reshape(1000, 4) / 4000, "emb")
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["x"], name="embed"),
             helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["mf", "axes"], ["m3"]),
             helper.make_node("Mul", ["x", "m3"], ["hidden"], name="masked")]
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["N", 16])
           for n in ("input_ids", "attention_mask")]
    g = helper.make_graph(nodes, "tokens", ins,
                          [helper.make_tensor_value_info("hidden", TensorProto.FLOAT,
                                                         ["N", 16, 4])], [e, axes])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              path)


def check_inputs(tmp):
    image, tokens = os.path.join(tmp, "resnet_like.onnx"), os.path.join(tmp, "bert_like.onnx")
    image_model(image)
    token_model(tokens)
    ins, outs = triton_gpu.io_of(tokens)
    assert ins == [("input_ids", "TYPE_INT64", [16]), ("attention_mask", "TYPE_INT64", [16])], ins
    assert outs == [("hidden", "TYPE_FP32", [16, 4])], outs
    b = triton_gpu.make_batch(ins, 3, 7)
    assert b["input_ids"].shape == (3, 16) and b["input_ids"].dtype == np.int64
    assert b["input_ids"].min() >= 0 and b["input_ids"].max() < 1000
    assert len(np.unique(b["input_ids"])) > 1
    assert (b["attention_mask"] == 1).all()
    b2 = triton_gpu.make_batch(ins, 3, 7)
    assert (b2["input_ids"] == b["input_ids"]).all()  # seeded
    standin = os.path.join(tmp, "standin.onnx")  # ResNet-50's input and output
    onnx.save(triton_standin.standin_model(), standin)
    assert triton_gpu.io_of(standin) == ([("input", "TYPE_FP32", [3, 224, 224])],
                                         [("output", "TYPE_FP32", [1000])])
    im_ins, _ = triton_gpu.io_of(image)
    x = triton_gpu.make_batch(im_ins, 2, 1)["input"]
    assert x.shape == (2, 3, 8, 8) and x.dtype == np.float32 and -1 <= x.min() and x.max() < 1
    return image, tokens


def check_dry_run(tmp, tcinfer, image, tokens):
    work = os.path.join(tmp, "work")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        triton_gpu.main(["--tcinfer", tcinfer, "--backend-dir", "b", "--work", work, "--model",
                         image, "--model", tokens, "--gpus", "0,1", "--instances", "3",
                         "--max-batch", "32", "--concurrency", "1,16,128", "--pipeline-depth",
                         "1", "--dry-run"])
    text = out.getvalue()
    for name in ("resnet_like", "bert_like"):
        config = open(os.path.join(work, "repo", name, "config.pbtxt")).read()
        assert "instance_group [{ kind: KIND_GPU, count: 3, gpus: [0, 1] }]" in config, config
        assert "max_batch_size: 32" in config, config
        assert 'string_value: "fp16"' in config, config
        assert 'key: "pipeline_depth" value { string_value: "1" }' in config, config
        assert os.path.exists(os.path.join(work, "repo", name, "1", "model.onnx"))
        assert config in text, text
    config = open(os.path.join(work, "repo", "bert_like", "config.pbtxt")).read()
    assert ('input [{ name: "input_ids", data_type: TYPE_INT64, dims: [16] }, '
            '{ name: "attention_mask", data_type: TYPE_INT64, dims: [16] }]') in config, config
    # the CLI's --bench on each GPU at batch 1 and at 128 capped by max_batch_size 32
    for gpu in (0, 1):
        for b in (1, 32):
            assert (f"--device {gpu} --shapes input_ids:{b}x16,attention_mask:{b}x16 --random 0 "
                    f"--quiet --bench 200 --precision fp16 {tokens}") in text, text
    assert ":128x" not in text, text
    assert "dynamic_batching { max_queue_delay_microseconds: 0 }" in text, text
    assert "# server: tritonserver ... --grpc-infer-allocation-pool-size 128" in text, text
    for shm in ("none", "system", "cuda"):
        assert (f"triton_load.py --url URL --model bert_like --concurrency 1,16,128 --seconds "
                f"10.0 --processes 1 --shm {shm}") in text, text
    assert f"--device 0 --precision fp16 {image} input=" in text, text


def check_cli_command(tmp, tcinfer, tokens):
    """The accuracy check's CPU command, run: every output written where it is read from."""
    args = triton_gpu.parse_args(["--tcinfer", tcinfer, "--backend-dir", "b", "--work", tmp,
                                  "--model", tokens, "--dry-run"])
    ins, outs = triton_gpu.io_of(tokens)
    batch = triton_gpu.make_batch(ins, 3, 3)
    files = {}
    for k, v in batch.items():
        files[k] = os.path.join(tmp, f"cli_{k}.npy")
        np.save(files[k], v)
    shapes = ",".join(f"{k}:" + "x".join(map(str, v.shape)) for k, v in batch.items())
    out_dir = os.path.join(tmp, "cli_out")
    cmd = triton_gpu.cli_command(args, tokens, files, shapes, out_dir, None)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    hidden = np.load(os.path.join(out_dir, "hidden.npy"))
    emb = np.arange(4000, dtype=np.float32).reshape(1000, 4) / 4000
    np.testing.assert_allclose(hidden, emb[batch["input_ids"]], rtol=1e-6)
    gpu = triton_gpu.cli_command(args, tokens, files, shapes, out_dir, 1)
    assert gpu[gpu.index("--device") + 1] == "1" and "--backend" not in gpu, gpu


def check_load_inputs():
    config = {"max_batch_size": 8, "input": [
        {"name": "input_ids", "data_type": "TYPE_INT64", "dims": ["16"]},
        {"name": "attention_mask", "data_type": "TYPE_INT64", "dims": ["16"]},
        {"name": "image", "data_type": "TYPE_FP32", "dims": ["3", "4"]}],
        "output": [{"name": "y"}]}
    inputs, outputs, names = triton_load.make_inputs(config, 2)
    data = {i.name(): i for i in inputs}
    assert data["input_ids"].shape() == [2, 16] and data["input_ids"].datatype() == "INT64"
    assert data["image"].shape() == [2, 3, 4] and data["image"].datatype() == "FP32"
    assert names == ["y"]
    rng = np.random.default_rng(0)
    mask = triton_load.input_data("attention_mask", np.int64, [2, 16], rng)
    ids = triton_load.input_data("input_ids", np.int64, [2, 16], rng)
    x = triton_load.input_data("image", np.float32, [2, 3], rng)
    assert mask.dtype == np.int64 and (mask == 1).all()
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 1000 and len(np.unique(ids)) > 1
    assert x.dtype == np.float32 and -1 <= x.min() and x.max() < 1 and len(np.unique(x)) == 6
    # --processes: a level's requests in flight spread over the client processes
    assert triton_load.split(128, 4) == [32, 32, 32, 32]
    assert triton_load.split(10, 4) == [3, 3, 2, 2]
    assert triton_load.split(1, 4) == [1]


def check_load_statistics():
    """Shared memory layout (inputs, then an output slot per worker, 64-byte aligned) and the
    server's statistics between two snapshots."""
    config = {"max_batch_size": 8, "input": [
        {"name": "a", "data_type": "TYPE_FP32", "dims": ["3"]},
        {"name": "b", "data_type": "TYPE_INT64", "dims": ["2"]}],
        "output": [{"name": "y", "data_type": "TYPE_FP16", "dims": ["5"]},
                   {"name": "z", "data_type": "TYPE_FP32", "dims": ["40"]}]}
    inputs, slots, size = triton_load.shm_layout(config, 2, 3)
    assert inputs == {"a": (0, 24), "b": (64, 32)}, inputs
    assert len(slots) == 3 and slots[0]["y"][:3] == (128, 20, [2, 5]), slots
    assert slots[0]["y"][3] == np.float16 and slots[0]["z"][:3] == (192, 320, [2, 40]), slots
    assert slots[1]["y"][0] == 192 + 320 and slots[2]["z"][0] == 128 + 2 * 384 + 64, slots
    assert size == 128 + 3 * 384, size
    before = {"inferences": 10, "executions": 5, "success": [10, 1000000],
              "queue": [10, 100000], "compute_input": [10, 50000],
              "compute_infer": [10, 400000], "compute_output": [10, 30000]}
    after = {"inferences": 50, "executions": 15, "success": [30, 5000000],
             "queue": [30, 300000], "compute_input": [30, 250000],
             "compute_infer": [30, 2400000], "compute_output": [30, 130000]}
    r = triton_load.stats_report(before, after)
    assert r == {"inferences": 40, "executions": 10, "requests": 20, "rows_per_execution": 4.0,
                 "request_us": 200.0, "queue_us": 10.0, "compute_input_us": 10.0,
                 "compute_infer_us": 100.0, "compute_output_us": 5.0}, r
    r = triton_load.stats_report(before, before)
    assert r["rows_per_execution"] is None and r["queue_us"] is None, r
    a = triton_load.parse_args(["--url", "u", "--model", "m"])
    assert a.shm == "none" and a.processes == 1, vars(a)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            triton_load.parse_args(["--url", "u", "--model", "m", "--shm", "disk"])
            raise AssertionError("--shm disk accepted")
        except SystemExit as e:
            assert e.code == 2 and "invalid choice: 'disk'" in err.getvalue(), err.getvalue()


class FakeCudart:
    """The CUDA runtime calls of triton_load.CudaRegion over host memory: its offsets, copies
    and handle without a GPU."""

    def __init__(self):
        self.buffers, self.freed, self.device = {}, [], None

    def cudaSetDevice(self, device):
        self.device = device
        return 0

    def cudaMalloc(self, ptr_ref, size):
        buf = ctypes.create_string_buffer(size.value)
        ptr_ref._obj.value = ctypes.addressof(buf)
        self.buffers[ctypes.addressof(buf)] = buf
        return 0

    def cudaIpcGetMemHandle(self, handle_ref, ptr):
        ctypes.memmove(ctypes.addressof(handle_ref._obj), b"h" * 64, 64)
        return 0

    def cudaMemcpy(self, dst, src, n, kind):
        assert kind in (1, 2), kind
        ctypes.memmove(dst, src, n.value)
        return 0

    def cudaFree(self, ptr):
        self.freed.append(ptr.value)
        return 0


def check_cuda_region():
    import triton_cuda_shm
    fake = FakeCudart()
    real, triton_cuda_shm._cudart = triton_cuda_shm._cudart, lambda: fake
    try:
        region = triton_load.CudaRegion("r", 256)
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        region.write(64, x)
        region.write(0, np.full(16, 7, np.float32))  # another tensor before it, untouched
        assert np.array_equal(region.read(64, [2, 3], np.float32), x)
        assert np.array_equal(region.read(0, [16], np.float32), np.full(16, 7, np.float32))
        assert region.raw == b"h" * 64 and fake.device == 0
        region.close()
        assert fake.freed == [region.ptr.value]
    finally:
        triton_cuda_shm._cudart = real


PA_STDOUT = """Request concurrency: 16
  Client:
    Request count: 5335
    Throughput: 1444.47 infer/sec
  Server:
    Inference count: 5335
    Execution count: 1384
    Successful request count: 5335
"""
PA_CSV = ("Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
          "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
          "p50 latency,p90 latency,p95 latency,p99 latency\n"
          "16,1444.47,10,2612,1383,1006,4129,1904,2,9926,19487,23629,35260\n")


def check_perf_analyzer(tmp):
    """perf_analyzer's command, input file and results, and the load table."""
    config = {"max_batch_size": 64, "input": [
        {"name": "input", "data_type": "TYPE_FP32", "dims": ["3", "4"]}],
        "output": [{"name": "logits", "data_type": "TYPE_FP32", "dims": ["1000"]},
                   {"name": "ids", "data_type": "TYPE_INT64", "dims": ["7"]}]}
    path = os.path.join(tmp, "pa_input.json")
    triton_perf_analyzer.input_json(config, path)
    data = json.load(open(path))["data"]
    want = triton_load.input_arrays(config, 1)[0][2][0].ravel()
    assert len(data) == 1 and np.array_equal(np.float32(data[0]["input"]), want), data
    assert triton_perf_analyzer.output_bytes(config) == 4000
    argv, env = triton_perf_analyzer.command("/pa", "h:1", "m", 16, 3.0, "system", path, 4000,
                                             "o.csv")
    assert argv[0] == "/pa/bin/perf_analyzer" and env["LD_LIBRARY_PATH"].startswith("/pa/lib")
    joined = " ".join(argv)
    for part in ("-m m -u h:1 -i grpc -b 1 --concurrency-range 16 -p 1000 -s 999 -r 3",
                 f"--input-data {path} --shared-memory system -f o.csv",
                 "--output-shared-memory-size 4000"):
        assert part in joined, joined
    argv, _ = triton_perf_analyzer.command("/pa", "h:1", "m", 1, 0.3, "none", path, 4000, "o.csv")
    assert "--output-shared-memory-size" not in argv and argv[argv.index("-p") + 1] == "200"
    # requests of 8 rows: -b 8, shared memory for 8 rows' outputs; rows/s are perf_analyzer's
    # inferences, requests/s an eighth of them
    argv, _ = triton_perf_analyzer.command("/pa", "h:1", "m", 16, 3.0, "cuda", path, 4000,
                                           "o.csv", 8)
    joined = " ".join(argv)
    assert "-b 8 --concurrency-range 16" in joined and "--output-shared-memory-size 32000" in \
        joined, joined
    row8 = triton_perf_analyzer.parse(PA_STDOUT, PA_CSV, 16, "m", "cuda", 8)
    assert row8["batch"] == 8 and row8["items_per_s"] == 1444.47, row8
    assert abs(row8["requests_per_s"] - 1444.47 / 8) < 1e-9, row8
    row = triton_perf_analyzer.parse(PA_STDOUT, PA_CSV, 16, "m", "system")
    assert row["requests_per_s"] == 1444.47 and row["p50_ms"] == 9.926, row
    assert row["p99_ms"] == 35.26 and row["network_server_us"] == 2612, row
    s = row["server"]
    assert s["inferences"] == 5335 and s["executions"] == 1384, s
    assert abs(s["rows_per_execution"] - 5335 / 1384) < 1e-12 and s["queue_us"] == 1383, s
    assert s["compute_infer_us"] == 4129 and s["compute_output_us"] == 1904, s
    try:
        triton_perf_analyzer.parse(PA_STDOUT, PA_CSV, 8, "m", "system")
        raise AssertionError("a CSV of another concurrency accepted")
    except ValueError as e:
        assert "no row of concurrency 8" in str(e), e
    missing = triton_perf_analyzer.run(os.path.join(tmp, "nowhere"), "h:1", "m", config, 1, 0.3,
                                       "none", tmp)
    assert "No such file" in missing["error"] and missing["client"] == "perf_analyzer", missing
    table = triton_gpu.load_table([row, missing])
    lines = table.splitlines()
    assert lines[2] == ("| m | perf_analyzer | system | 16 | 1 | 1444 | 1444 | 9.93 | 35.26 | 0 | "
                        "3.9 | 1383 | 1006 | 4129 | 1904 |"), lines
    assert lines[3].startswith("| m | perf_analyzer | none | 1 | 1 | failed: "), lines
    assert triton_gpu.load_table([row8]).splitlines()[2].startswith(
        "| m | perf_analyzer | cuda | 16 | 8 | 181 | 1444 | "), triton_gpu.load_table([row8])


def check_failed_load_mode():
    """A load mode whose triton_load.py fails is a row with its error (after the rows it printed),
    in the table too, and the modes after it still run."""
    args = triton_gpu.parse_args(BASE + ["--dry-run", "--kind", "cpu", "--concurrency", "1",
                                         "--seconds", "0.2", "--load-shm", "none,system"])
    row = '{"concurrency": 1, "client": "triton_load.py", "model": "m", "shm": "%s"}'
    fake = {"none": "print('%s'); sys.exit('no server')" % (row % "none"),
            "system": "print('%s')" % (row % "system")}
    real = triton_gpu.load_command
    triton_gpu.load_command = lambda a, url, name, shm: [sys.executable, "-c",
                                                         "import sys; " + fake[shm]]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            rows = triton_gpu.load(args, None, "URL", "m")
    finally:
        triton_gpu.load_command = real
    assert [(r["shm"], r["concurrency"], "error" in r) for r in rows] == [
        ("none", 1, False), ("none", "-", True), ("system", 1, False)], rows
    assert rows[1]["error"] == "triton_load.py exited 1: no server\n", rows[1]
    table = triton_gpu.load_table(rows[1:2])
    assert "| m | triton_load.py | none | - | 1 | failed: triton_load.py exited 1: no server" in table


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tcinfer", required=True)
    args = p.parse_args()
    check_arguments()
    check_load_inputs()
    check_load_statistics()
    check_cuda_region()
    with tempfile.TemporaryDirectory() as tmp:
        check_perf_analyzer(tmp)
        check_failed_load_mode()
        image, tokens = check_inputs(tmp)
        check_dry_run(tmp, os.path.abspath(args.tcinfer), image, tokens)
        check_cli_command(tmp, os.path.abspath(args.tcinfer), tokens)
    print("triton_gpu.py: 9 checks passed")


if __name__ == "__main__":
    main()
