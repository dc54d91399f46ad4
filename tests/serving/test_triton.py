#!/usr/bin/env python3
"""The Triton backend (libtriton_tcinfer.so) inside the Triton Inference Server of the PyPI package
nvidia-pytriton, on CPU instances: HTTP and gRPC requests against the CLI's outputs, a batch of
concurrent requests, auto-completed configurations, malformed requests answered with clear
errors while the server keeps serving, and the load generators (bench/triton_load.py with the
tensors in the requests and in system shared memory, perf_analyzer) with the server's
statistics. The test starts the server on free local ports and always stops it.

  test_triton.py --tcinfer build/tcinfer --backend-dir build/triton_backends
                 --models-dir build/models --perf-analyzer .venv/perf_analyzer
                 [unittest options]
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "serving",
                                "triton"))
from local_server import LocalServer  # noqa: E402

ARGS = None
SERVER_START_TIMEOUT_S = 60
STATS_SETTLE_TIMEOUT_S = 10


def write_model(repo, name, onnx_path, config, filename="model.onnx"):
    os.makedirs(os.path.join(repo, name, "1"))
    if onnx_path is not None:
        shutil.copy(onnx_path, os.path.join(repo, name, "1", filename))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(f'backend: "tcinfer"\n{config}')


def cli_outputs(model, x, workdir, tag):
    """The CLI's (CPU backend) outputs for input array x, one .npy per output."""
    inp = os.path.join(workdir, f"{tag}_in.npy")
    out_dir = os.path.join(workdir, f"{tag}_out")
    np.save(inp, x)
    proc = subprocess.run([ARGS.tcinfer, "--backend", "cpu", "--quiet", "--output-dir", out_dir,
                           model, inp], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"tcinfer CLI failed: {proc.stderr}")
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)}


class TritonBackendTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="tci_triton_")
        cls.small = os.path.join(ARGS.models_dir, "small_cnn.onnx")
        cls.mlp = os.path.join(ARGS.models_dir, "mlp.onnx")
        cls.demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models",
                                "demo", "tiny_cnn.onnx")
        repo = os.path.join(cls.workdir, "repo")
        os.makedirs(repo)
        # everything from the model: inputs, outputs, max_batch_size (auto-completion)
        write_model(repo, "small", cls.small,
                    'instance_group [{ kind: KIND_CPU, count: 1 }]\n'
                    'dynamic_batching { max_queue_delay_microseconds: 300000 }\n')
        # a full configuration, two instances sharing one engine, a parameter
        write_model(repo, "mlp", cls.mlp,
                    'max_batch_size: 4\n'
                    'input [{ name: "input", data_type: TYPE_FP32, dims: [784] }]\n'
                    'output [{ name: "probs_out", data_type: TYPE_FP32, dims: [10] }]\n'
                    'instance_group [{ kind: KIND_CPU, count: 2 }]\n'
                    'parameters { key: "cpu_threads" value { string_value: "1" } }\n'
                    'parameters { key: "precision" value { string_value: "bf16" } }\n')
        # batches padded up to 4 or 8 rows (on a GPU instance: few shape variants to plan)
        write_model(repo, "mlp_buckets", cls.mlp,
                    'max_batch_size: 8\n'
                    'instance_group [{ kind: KIND_CPU, count: 1 }]\n'
                    'dynamic_batching { max_queue_delay_microseconds: 100000 }\n'
                    'parameters { key: "batch_buckets" value { string_value: "4, 8" } }\n')
        # the next batch gathered while the engine runs one (the default on GPU instances; CPU
        # instances answer each batch before the execute call returns)
        write_model(repo, "mlp_pipelined", cls.mlp,
                    'max_batch_size: 4\n'
                    'instance_group [{ kind: KIND_CPU, count: 1 }]\n'
                    'dynamic_batching { max_queue_delay_microseconds: 2000 }\n'
                    'parameters { key: "pipeline_depth" value { string_value: "2" } }\n')
        write_model(repo, "mlp_pipelined3", cls.mlp,
                    'max_batch_size: 4\n'
                    'instance_group [{ kind: KIND_CPU, count: 1 }]\n'
                    'dynamic_batching { max_queue_delay_microseconds: 2000 }\n'
                    'parameters { key: "pipeline_depth" value { string_value: "3" } }\n')
        write_model(repo, "bad_pipeline", cls.mlp,
                    'max_batch_size: 4\n'
                    'instance_group [{ kind: KIND_CPU }]\n'
                    'parameters { key: "pipeline_depth" value { string_value: "4" } }\n')
        write_model(repo, "bad_buckets", cls.mlp,
                    'max_batch_size: 8\n'
                    'instance_group [{ kind: KIND_CPU }]\n'
                    'parameters { key: "batch_buckets" value { string_value: "8,4" } }\n')
        write_model(repo, "bad_buckets_max", cls.mlp,
                    'max_batch_size: 8\n'
                    'instance_group [{ kind: KIND_CPU }]\n'
                    'parameters { key: "batch_buckets" value { string_value: "4,16" } }\n')
        # variable channels in the config: a wrong count reaches tcinfer, whose error is returned
        write_model(repo, "small_var", cls.small,
                    'max_batch_size: 0\n'
                    'input [{ name: "input", data_type: TYPE_FP32, dims: [-1, -1, 32, 32] }]\n'
                    'output [{ name: "logits_out", data_type: TYPE_FP32, dims: [-1, 10] }]\n'
                    'instance_group [{ kind: KIND_CPU }]\n')
        # models that must fail to load, each with a clear reason
        write_model(repo, "bad_param", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n'
                    'parameters { key: "precison" value { string_value: "fp16" } }\n')
        write_model(repo, "bad_dtype", cls.small,
                    'max_batch_size: 8\n'
                    'input [{ name: "input", data_type: TYPE_INT32, dims: [3, 32, 32] }]\n'
                    'output [{ name: "logits_out", data_type: TYPE_FP32, dims: [10] }]\n'
                    'instance_group [{ kind: KIND_CPU }]\n')
        # inputs given, outputs auto-completed: the given part is still checked against the model
        write_model(repo, "bad_partial", cls.small,
                    'max_batch_size: 8\n'
                    'input [{ name: "input", data_type: TYPE_INT32, dims: [3, 32, 32] }]\n'
                    'instance_group [{ kind: KIND_CPU }]\n')
        # a model with a fixed batch of 1 cannot take batches up to 8
        demo = cls.demo
        write_model(repo, "bad_batch", demo,
                    'max_batch_size: 8\n'
                    'input [{ name: "image", data_type: TYPE_FP32, dims: [3, 64, 64] }]\n'
                    'output [{ name: "probabilities_out", data_type: TYPE_FP32, dims: [10] }]\n'
                    'instance_group [{ kind: KIND_CPU }]\n')
        # the same model served as it is: no batch dim in the configuration
        write_model(repo, "demo", demo, 'instance_group [{ kind: KIND_CPU }]\n')
        # precision auto chooses fp32 layers by running GPU engines: refused on CPU instances;
        # its parameters are checked when the configuration is read (before any instance: CPU
        # ones here, Triton refusing KIND_GPU without a GPU), and refused without it
        auto = 'parameters { key: "precision" value { string_value: "auto" } }\n'
        write_model(repo, "bad_auto_cpu", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n' + auto +
                    'parameters { key: "accuracy_target" value { string_value: "1e-3" } }\n')
        write_model(repo, "bad_target", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n'
                    'parameters { key: "accuracy_target" value { string_value: "1e-3" } }\n')
        write_model(repo, "bad_target_value", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n' + auto +
                    'parameters { key: "accuracy_target" value { string_value: "0" } }\n')
        write_model(repo, "bad_calibration", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n' + auto +
                    'parameters { key: "calibration_inputs" value { string_value: "a.npy,,b.npy" '
                    '} }\n')
        # keep_precision: a known value, with fp32_layers (or precision auto), with fp16 or
        # auto, bf16 not with accuracy_target
        keep_bf16 = 'parameters { key: "keep_precision" value { string_value: "bf16" } }\n'
        write_model(repo, "bad_keep", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n'
                    'parameters { key: "keep_precision" value { string_value: "fp64" } }\n')
        write_model(repo, "bad_keep_alone", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n' + keep_bf16)
        write_model(repo, "bad_keep_fp32", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n' + keep_bf16 +
                    'parameters { key: "precision" value { string_value: "fp32" } }\n'
                    'parameters { key: "fp32_layers" value { string_value: "Conv" } }\n')
        write_model(repo, "bad_keep_target", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n' + keep_bf16 + auto +
                    'parameters { key: "accuracy_target" value { string_value: "1e-3" } }\n')
        write_model(repo, "bad_precision", cls.small,
                    'instance_group [{ kind: KIND_CPU }]\n'
                    'parameters { key: "precision" value { string_value: "fast" } }\n')
        write_model(repo, "no_file", None, 'instance_group [{ kind: KIND_CPU }]\n')
        write_model(repo, "broken", None, 'instance_group [{ kind: KIND_CPU }]\n')
        with open(os.path.join(repo, "broken", "1", "model.onnx"), "wb") as f:
            f.write(b"\x08\x07\x12\xff\xff\xff\xff\x0fnot a model")

        try:
            cls.server = LocalServer(repo, ARGS.backend_dir, os.path.join(cls.workdir,
                                                                          "server.log"),
                                     extra_args=("--exit-on-error", "false",
                                                 "--strict-readiness", "false"))
            cls.http = httpclient.InferenceServerClient(cls.server.http_url, concurrency=8)
            cls.grpc_url = cls.server.grpc_url
            cls.grpc = grpcclient.InferenceServerClient(cls.grpc_url)
            cls.server.wait_ready(
                lambda: cls.http.is_server_ready() and cls.http.is_model_ready("small"),
                SERVER_START_TIMEOUT_S)
        except BaseException:
            cls.stop_server()
            raise

    @classmethod
    def server_log(cls, tail=6000):
        return cls.server.log_text(tail)

    @classmethod
    def stop_server(cls):
        if cls.server is not None:
            cls.server.stop()
        shutil.rmtree(cls.workdir, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        cls.stop_server()

    # ---- helpers ----
    def http_infer(self, model, x, name="input", dtype="FP32", shape=None, outputs=None):
        inp = httpclient.InferInput(name, list(shape or x.shape), dtype)
        inp.set_data_from_numpy(x)
        return self.http.infer(model, [inp], outputs=outputs)

    def grpc_infer(self, model, x, name="input", dtype="FP32"):
        inp = grpcclient.InferInput(name, list(x.shape), dtype)
        inp.set_data_from_numpy(x)
        return self.grpc.infer(model, [inp])

    def assert_close(self, got, want):
        self.assertEqual(got.shape, want.shape)
        self.assertGreater(np.abs(want).max(), 1e-3)  # not a trivial output
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def assert_serving(self):
        x = np.random.default_rng(99).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
        want = cli_outputs(self.small, x, self.workdir, "alive")["logits_out"]
        self.assert_close(self.http_infer("small", x).as_numpy("logits_out"), want)

    def batch_rows(self, stats):
        """The model's reported executions by batch size (rows: the sum of size times count)."""
        return {int(b["batch_size"]): int(b["compute_infer"]["count"])
                for b in stats["batch_stats"]}

    def settled_statistics(self, model, before, rows):
        """The model's statistics once they account for rows more answered rows than before, in
        inferences and in executed batches. Triton's statistics trail the answers: a backend
        reports a request after sending its response and its batch after the batch's last
        response (Triton's own backends in the same order), so a client that has every answer can
        read statistics that lack the last batch. Waits up to STATS_SETTLE_TIMEOUT_S; what it
        returns then is for the caller's assertions to judge."""
        old = self.batch_rows(before)
        deadline = time.monotonic() + STATS_SETTLE_TIMEOUT_S
        while True:
            after = self.http.get_inference_statistics(model)["model_stats"][0]
            new = self.batch_rows(after)
            executed = sum(b * (n - old.get(b, 0)) for b, n in new.items())
            if ((after["inference_count"] - before["inference_count"] >= rows and executed >= rows)
                    or time.monotonic() > deadline):
                return after
            time.sleep(0.02)

    def expect_error(self, call, *fragments):
        with self.assertRaises(InferenceServerException) as ctx:
            call()
        text = str(ctx.exception)
        for fragment in fragments:
            self.assertIn(fragment, text)
        self.assert_serving()
        return text

    # ---- tests ----
    def test_http_matches_cli(self):
        x = np.random.default_rng(1).uniform(-1, 1, (4, 3, 32, 32)).astype(np.float32)
        want = cli_outputs(self.small, x, self.workdir, "http")["logits_out"]
        self.assert_close(self.http_infer("small", x).as_numpy("logits_out"), want)

    def test_grpc_matches_cli(self):
        x = np.random.default_rng(2).uniform(-1, 1, (2, 784)).astype(np.float32)
        want = cli_outputs(self.mlp, x, self.workdir, "grpc")["probs_out"]
        self.assert_close(self.grpc_infer("mlp", x).as_numpy("probs_out"), want)

    def test_concurrent_requests_are_batched(self):
        rng = np.random.default_rng(3)
        xs = [rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32) for _ in range(8)]
        want = cli_outputs(self.small, np.concatenate(xs), self.workdir, "batch")["logits_out"]
        before = self.http.get_inference_statistics("small")["model_stats"][0]
        pending = []  # the HTTP client's own concurrency (gevent): 8 requests in flight
        for x in xs:
            inp = httpclient.InferInput("input", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            pending.append(self.http.async_infer("small", [inp]))
        results = [p.get_result() for p in pending]
        for k, r in enumerate(results):
            self.assert_close(r.as_numpy("logits_out"), want[k:k + 1])
        after = self.settled_statistics("small", before, 8)
        inferences = after["inference_count"] - before["inference_count"]
        executions = after["execution_count"] - before["execution_count"]
        self.assertEqual(inferences, 8)
        self.assertLess(executions, 8, "the 8 concurrent requests ran one by one")
        self.assertGreater(int(after["inference_stats"]["compute_infer"]["ns"]), 0)
        old, new = self.batch_rows(before), self.batch_rows(after)
        batches = {b: n - old.get(b, 0) for b, n in new.items() if n > old.get(b, 0)}
        self.assertEqual(sum(b * n for b, n in batches.items()), 8, batches)
        self.assertTrue(any(b > 1 for b in batches), batches)

    def test_mlp_concurrent_grpc_two_instances(self):
        rng = np.random.default_rng(4)
        xs = [rng.uniform(-1, 1, (k % 4 + 1, 784)).astype(np.float32) for k in range(6)]
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda x: self.grpc_infer("mlp", x), xs))
        for k, (x, r) in enumerate(zip(xs, results)):
            want = cli_outputs(self.mlp, x, self.workdir, f"mlp{k}")["probs_out"]
            self.assert_close(r.as_numpy("probs_out"), want)

    def test_pipeline_depth_two_and_three(self):
        for model in ("mlp_pipelined", "mlp_pipelined3"):
            rng = np.random.default_rng(6)
            xs = [rng.uniform(-1, 1, (k % 3 + 1, 784)).astype(np.float32) for k in range(8)]
            before = self.http.get_inference_statistics(model)["model_stats"][0]
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                results = list(pool.map(lambda x: self.grpc_infer(model, x), xs))
            for k, (x, r) in enumerate(zip(xs, results)):
                want = cli_outputs(self.mlp, x, self.workdir, f"{model}_{k}")["probs_out"]
                self.assert_close(r.as_numpy("probs_out"), want)
            rows = sum(x.shape[0] for x in xs)
            after = self.settled_statistics(model, before, rows)
            self.assertEqual(after["inference_count"] - before["inference_count"], rows, model)

    def test_batch_buckets_pad_and_split(self):
        # requests of 1, 3 and 5 rows, alone and together: runs of 4 or 8 rows, the padding rows
        # zeros, each request answered with its own rows only
        rng = np.random.default_rng(5)
        xs = [rng.uniform(-1, 1, (k, 784)).astype(np.float32) for k in (1, 3, 5, 1, 2)]
        before = self.http.get_inference_statistics("mlp_buckets")["model_stats"][0]
        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            results = list(pool.map(lambda x: self.grpc_infer("mlp_buckets", x), xs))
        results.append(self.grpc_infer("mlp_buckets", xs[2]))  # alone: 5 rows run as 8
        for k, (x, r) in enumerate(zip(xs + [xs[2]], results)):
            want = cli_outputs(self.mlp, x, self.workdir, f"bucket{k}")["probs_out"]
            self.assert_close(r.as_numpy("probs_out"), want)
        stats = self.settled_statistics("mlp_buckets", before, 17)
        self.assertEqual(stats["inference_count"] - before["inference_count"], 17)

    def test_load_script(self):
        # bench/triton_load.py, the load generator for the GPU measurements (docs/serving.md):
        # tensors in the requests, then in system shared memory (two client processes, each
        # with its own region), with the server's statistics over each measured window
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                              "triton_load.py")
        for shm, processes in (("none", 1), ("system", 2)):
            proc = subprocess.run([sys.executable, script, "--url", self.grpc_url, "--model",
                                   "mlp", "--concurrency", "1,4", "--batch", "2", "--seconds",
                                   "0.5", "--warmup", "0.1", "--shm", shm, "--processes",
                                   str(processes)], capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            reports = [json.loads(line) for line in proc.stdout.splitlines()]
            self.assertEqual([r["concurrency"] for r in reports], [1, 4])
            for r in reports:
                self.assertEqual(r["errors"], 0, r["first_error"])
                self.assertEqual(r["shm"], shm)
                self.assertGreater(r["requests"], 0)
                self.assertAlmostEqual(r["items_per_s"], 2 * r["requests_per_s"])
                self.assertLessEqual(r["p50_ms"], r["p99_ms"])
                s = r["server"]  # the window's statistics (read by another clock): batch 2 each
                self.assertGreater(s["requests"], 0.8 * r["requests"])
                # the snapshots are read under load, and Triton counts a request's success and
                # its batch's inferences at separate moments: a request in flight at either end
                # of the window (at most `concurrency` at each) can be counted on one side only
                # (962 inferences for 482 requests seen once)
                self.assertLessEqual(abs(s["inferences"] - 2 * s["requests"]),
                                     2 * 2 * r["concurrency"])
                # every execution runs 2 to 4 rows (max_batch_size); a request's inferences and
                # its batch's execution are counted at separate moments too (the answers, then
                # the batch), so the window's counts may differ by the requests in flight at
                # either end (observed: 647 inferences in 324 executions)
                skew = 2 * 2 * r["concurrency"]
                self.assertGreaterEqual(s["inferences"], 2 * s["executions"] - skew)
                self.assertLessEqual(s["inferences"], 4 * s["executions"] + skew)
                phases = sum(s[k] for k in ("queue_us", "compute_input_us", "compute_infer_us",
                                            "compute_output_us"))
                self.assertGreater(s["compute_infer_us"], 0)
                self.assertLessEqual(phases, s["request_us"] * 1.001)
                if shm == "none":
                    self.assertNotIn("shm_max_abs_diff", r)
                else:  # the answers in shared memory are the body's
                    self.assertEqual(r["shm_max_abs_diff"], 0.0)
            self.assertEqual(reports[1]["processes"], processes)
        status = self.grpc.get_system_shared_memory_status(as_json=True)
        self.assertEqual(status.get("regions", {}), {})  # every region unregistered

    def test_perf_analyzer(self):
        # Triton's C++ load generator through bench/triton_perf_analyzer.py, as
        # bench/triton_gpu.py --perf-analyzer runs it: tensors in the requests and in system
        # shared memory, each row with the server's statistics
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "bench"))
        import triton_perf_analyzer
        binary = os.path.join(ARGS.perf_analyzer, "bin", "perf_analyzer")
        self.assertTrue(os.path.isfile(binary), f"{binary} is missing: run scripts/setup.sh")
        config = self.grpc.get_model_config("mlp", as_json=True)["config"]
        for shm in ("none", "system"):
            row = triton_perf_analyzer.run(ARGS.perf_analyzer, self.grpc_url, "mlp", config, 2,
                                           0.6, shm, os.path.join(self.workdir, "pa"))
            self.assertNotIn("error", row)
            self.assertEqual((row["shm"], row["concurrency"]), (shm, 2))
            self.assertGreater(row["requests_per_s"], 0)
            self.assertLessEqual(row["p50_ms"], row["p99_ms"])
            s = row["server"]
            self.assertGreater(s["inferences"], 0)
            # two requests of one row in flight: 1 or 2 rows an execution, give or take the
            # requests in flight at the measurement's ends (counted at the answer and at the
            # batch's report: test_load_script)
            skew = 2 * 2
            self.assertGreaterEqual(s["inferences"], s["executions"] - skew)
            self.assertLessEqual(s["inferences"], 2 * s["executions"] + skew)
            self.assertGreater(s["compute_infer_us"], 0)
        status = self.grpc.get_system_shared_memory_status(as_json=True)
        self.assertEqual(status.get("regions", {}), {})  # perf_analyzer unregistered its own

    def test_fixed_shape_model(self):
        # auto-completion of a model without a symbolic batch dim: max_batch_size 0, full dims
        cfg = self.http.get_model_config("demo")
        self.assertEqual(cfg.get("max_batch_size", 0), 0)
        self.assertEqual(cfg["input"][0]["dims"], [1, 3, 64, 64])
        x = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                 "models", "demo", "input.npy"))
        want = cli_outputs(self.demo, x, self.workdir, "demo")["probabilities_out"]
        got = self.grpc_infer("demo", x, name="image").as_numpy("probabilities_out")
        self.assert_close(got, want)

    def test_gpu_parameters_on_cpu_instances_are_reported(self):
        self.assertIn("model 'mlp': the parameters precision, fp32_layers, keep_precision and "
                      "timing_cache apply to GPU instances", self.server_log(tail=None))

    def test_autocomplete(self):
        cfg = self.http.get_model_config("small")
        self.assertEqual(cfg["max_batch_size"], 8)
        self.assertEqual([(t["name"], t["data_type"], t["dims"]) for t in cfg["input"]],
                         [("input", "TYPE_FP32", [3, 32, 32])])
        self.assertEqual([(t["name"], t["data_type"], t["dims"]) for t in cfg["output"]],
                         [("logits_out", "TYPE_FP32", [10])])

    def test_wrong_shape(self):
        x = np.zeros((1, 3, 31, 32), np.float32)
        self.expect_error(lambda: self.http_infer("small", x), "unexpected shape", "input")
        x = np.zeros((1, 4, 32, 32), np.float32)  # passes Triton's check; tcinfer refuses it
        self.expect_error(lambda: self.http_infer("small_var", x), "model 'small_var': tcinfer:",
                          "input 'input' has shape 1x4x32x32")

    def test_wrong_dtype(self):
        x = np.zeros((1, 3, 32, 32), np.float64)
        self.expect_error(lambda: self.http_infer("small", x, dtype="FP64"), "FP64", "FP32")
        # over gRPC too
        self.expect_error(lambda: self.grpc_infer("small", x.astype(np.int32), dtype="INT32"),
                          "INT32", "FP32")

    def test_missing_and_unknown(self):
        x = np.zeros((1, 3, 32, 32), np.float32)
        self.expect_error(lambda: self.http_infer("small", x, name="image"), "image")
        self.expect_error(lambda: self.http_infer("no_such_model", x), "no_such_model")
        self.expect_error(lambda: self.grpc_infer("no_such_model", x), "no_such_model")
        self.expect_error(lambda: self.http_infer("small", x, outputs=[
            httpclient.InferRequestedOutput("nope")]), "nope")

    def test_bad_models_fail_to_load_with_reasons(self):
        index = {m["name"]: m for m in self.http.get_model_repository_index()}
        expected = {"bad_param": "unknown parameter 'precison'",
                    "bad_dtype": "config.pbtxt input 'input' is int32; the model's is float",
                    "bad_partial": "config.pbtxt input 'input' is int32; the model's is float",
                    "bad_batch": "input 'image' has a fixed batch dim of 1, which cannot run "
                                 "batches of 1..8",
                    "bad_auto_cpu": "model 'bad_auto_cpu': parameter precision 'auto' builds "
                                    "and runs the fp16 and fp32 GPU engines to choose the fp32 "
                                    "layers; KIND_CPU instances run the fp32 reference",
                    "bad_target": "parameters accuracy_target and calibration_inputs steer the "
                                  "search of precision 'auto'",
                    "bad_target_value": "parameter accuracy_target '0': expected a relative L2 "
                                        "error above 0",
                    "bad_calibration": "parameter calibration_inputs 'a.npy,,b.npy' has an empty "
                                       "entry",
                    "bad_precision": "parameter precision 'fast': expected fp16, bf16, tf32, fp32 "
                                     "or auto",
                    "bad_keep": "parameter keep_precision 'fp64': expected fp32, tf32 or bf16",
                    "bad_keep_alone": "parameter keep_precision sets the precision of the kept "
                                      "layers: give parameter fp32_layers or precision 'auto'",
                    "bad_keep_fp32": "parameter keep_precision sets what fp16 engines keep their "
                                     "fp32_layers in",
                    "bad_keep_target": "it fixes overflow, not accuracy",
                    "bad_buckets": "parameter batch_buckets '8,4': expected 'none' or "
                                   "increasing batch sizes from 1 up",
                    "bad_buckets_max": "parameter batch_buckets has 16, above max_batch_size 8",
                    "bad_pipeline": "parameter pipeline_depth '4': expected 1 (each batch "
                                    "answered before the next is gathered), 2",
                    "no_file": "no model file",
                    "broken": "model 'broken': tcinfer: model file"}
        for name, reason in expected.items():
            self.assertEqual(index[name].get("state"), "UNAVAILABLE", name)
            self.assertIn(reason, index[name].get("reason", ""), name)
        self.assertEqual(index["small"].get("state"), "READY")


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tcinfer", required=True)
    p.add_argument("--backend-dir", required=True)
    p.add_argument("--models-dir", required=True)
    p.add_argument("--perf-analyzer", required=True,
                   help="the folder scripts/setup.sh unpacks perf_analyzer into "
                        "(.venv/perf_analyzer)")
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
