#!/usr/bin/env python3
"""bench/zoo.py's judgement of a row, without a GPU or PyTorch: an fp16 overflow is recognised
from the CLI's message, --precision auto's answer is what the row's verdict, the pass count and
the markdown table show ("pass (auto: N layers fp32)", or the failure), and plain rows are judged
as before."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import zoo  # noqa: E402

OVERFLOW = ("tcinfer: error: the GPU outputs hold 4000 NaN/Inf values (first in 'output_0') where "
            "the fp32 reference holds none: fp16 overflow; they first appear in the output of "
            "layer '/features/attn/Div_3' (Div).")


def row(name, gpu):
    return {"name": name, "exporter": "TorchScript, opset 17", "classifier": True,
            "cpu": {"rel_l2": 5e-7, "ok": True, "problem": None}, "gpu": gpu}


class ZooVerdictTest(unittest.TestCase):
    def test_overflow_recognised(self):
        self.assertTrue(zoo.is_fp16_overflow(OVERFLOW))
        # bf16's overflow, the model's own NaN (a note, not an error) and other failures are not
        self.assertFalse(zoo.is_fp16_overflow(OVERFLOW.replace("fp16 overflow", "bf16 overflow")))
        self.assertFalse(zoo.is_fp16_overflow("tcinfer: error: op 'Foo' has no GPU path"))
        self.assertFalse(zoo.is_fp16_overflow(None))
        self.assertFalse(zoo.is_fp16_overflow(""))

    def test_auto_record(self):
        doc = {"precision_auto": {"fp32_layers": ["a", "b"], "relative_l2": 1e-3,
                                  "inputs": "given", "seconds": 12.5}}
        self.assertEqual(zoo.auto_record(doc, None),
                         {"fp32_layers": ["a", "b"], "relative_l2": 1e-3, "seconds": 12.5})
        self.assertEqual(zoo.auto_record(None, "timed out after 1200s"),
                         {"error": "timed out after 1200s"})
        self.assertIn("error", zoo.auto_record({"outputs": []}, None))
        self.assertEqual(zoo.auto_args("/w/m"),
                         ["--precision", "auto", "--timing-cache", "/w/m/auto.timing"])

    def test_gpu_verdict(self):
        plain = {"rel_l2": 1e-3, "pytorch_fp16_rel_l2": 1e-3, "top1": 4, "pytorch_top1": 4}
        self.assertEqual(zoo.gpu_verdict(plain), (True, "pass"))
        auto2 = dict(plain, auto={"fp32_layers": ["x", "y"], "relative_l2": 1e-3,
                                  "fp16_error": OVERFLOW})
        self.assertEqual(zoo.gpu_verdict(auto2), (True, "pass (auto: 2 layers fp32)"))
        auto1 = dict(plain, auto={"fp32_layers": ["x"], "fp16_error": OVERFLOW})
        self.assertEqual(zoo.gpu_verdict(auto1), (True, "pass (auto: 1 layer fp32)"))
        # PyTorch fp16 overflowing too (its error inf) leaves tcinfer's auto answer judged alone
        swin = {"rel_l2": 2e-3, "pytorch_fp16_rel_l2": float("inf"), "top1": 4,
                "pytorch_top1": 0, "auto": {"fp32_layers": ["d"]}}
        self.assertEqual(zoo.gpu_verdict(swin), (True, "pass (auto: 1 layer fp32)"))
        # the auto engine's result is held to the same rule as any other
        worse = dict(auto1, rel_l2=5e-3)
        ok, text = zoo.gpu_verdict(worse)
        self.assertFalse(ok)
        self.assertEqual(text, "GPU (auto: 1 layer fp32): rel L2 0.005 > 1.1 x PyTorch fp16's "
                               "0.001")
        flipped = dict(auto2, top1=3)
        self.assertEqual(zoo.gpu_verdict(flipped), (False, "GPU (auto: 2 layers fp32): top-1 3/4 "
                                                       "(PyTorch fp16 4/4)"))
        # PyTorch fp16 flipping rows too is shown, and the row still fails
        self.assertEqual(zoo.gpu_verdict(dict(plain, top1=3, pytorch_top1=2)),
                         (False, "GPU: top-1 3/4 (PyTorch fp16 2/4)"))
        # the search failed: the row fails, saying both
        failed = {"error": "fp16 overflow; --precision auto: tcinfer: error: TCI_PRECISION_AUTO: "
                           "engine input 0 holds NaN/Inf in fp16",
                  "pytorch_fp16_rel_l2": 1e-3,
                  "auto": {"error": "...", "fp16_error": OVERFLOW}}
        ok, text = zoo.gpu_verdict(failed)
        self.assertFalse(ok)
        self.assertTrue(text.startswith("GPU: fp16 overflow; --precision auto: "), text)
        # an overflow without a retry (an older result file) stays the failure it was
        self.assertEqual(zoo.gpu_verdict({"error": OVERFLOW}), (False, "GPU: " + OVERFLOW))

    def test_zero_reference_is_a_failure(self):
        import numpy as np
        ref = [np.zeros((4, 10), np.float32)]
        # a zero answer against a zero reference has rel L2 0: nothing was compared
        e, problem = zoo.compare_outputs([np.zeros((4, 10), np.float32)], ref, None)
        self.assertEqual(e, float("inf"))
        self.assertIn("output 0 of the reference is all zeros", problem)
        ok = zoo.compare_outputs([np.ones((2, 3))], [np.full((2, 3), 1.0 + 1e-7)], 1e-5)
        self.assertIsNone(ok[1])

    def test_zero_weights_filled(self):
        import numpy as np

        class Param:  # the part of torch.nn.Parameter that no_zero_weights reads
            def __init__(self, a):
                self.a = a

            def dim(self):
                return self.a.ndim

            def is_floating_point(self):
                return True

            def any(self):
                return bool(self.a.any())

            def normal_(self, mean, std):
                self.a[...] = np.random.default_rng(0).normal(mean, std, self.a.shape)

        class Torch:
            @staticmethod
            def no_grad():
                return contextlib.nullcontext()

        head, bias, conv = Param(np.zeros((10, 8))), Param(np.zeros(10)), Param(np.ones((4, 3)))
        model = type("M", (), {"parameters": lambda self: [head, bias, conv]})()
        self.assertEqual(zoo.no_zero_weights(Torch, model), 1)
        self.assertTrue(head.a.any())         # the zeroed classifier head gets values
        self.assertFalse(bias.a.any())        # a zero bias is a real initialisation: kept
        self.assertTrue((conv.a == 1).all())  # weights with values are left alone

    def test_gpu_only_keeps_earlier_cpu(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "tv__resnet18.json")
            fresh = {"name": "tv/resnet18", "onnx": "/w/new.onnx", "inputs": {"input": []},
                     "exporter": "TorchScript, opset 17"}
            with contextlib.redirect_stdout(io.StringIO()) as said:
                self.assertIsNone(zoo.with_earlier_cpu(dict(fresh), out))  # no earlier file
            self.assertIn("no earlier CPU check", said.getvalue())
            earlier = dict(row("tv/resnet18", {"rel_l2": 1.0, "pytorch_fp16_rel_l2": 1e-3}),
                           onnx="/w/old.onnx", graph_inputs=["input"], cpu_batch=2,
                           bench={"1": {}}, inputs={"input": ["image", [3, 8, 8], None]})
            with open(out, "w") as f:
                json.dump(earlier, f)
            got = zoo.with_earlier_cpu(dict(fresh), out)
            self.assertEqual(got["cpu"], earlier["cpu"])          # the CPU check carried over
            self.assertEqual(got["graph_inputs"], ["input"])
            self.assertEqual(got["cpu_batch"], 2)
            self.assertEqual(got["onnx"], "/w/new.onnx")          # this run's export
            self.assertNotIn("gpu", got)                          # to be measured again
            self.assertNotIn("bench", got)
            # exported into the same folder before: everything else from the earlier file
            got = zoo.with_earlier_cpu({"name": "tv/resnet18", "onnx": "/w/o.onnx"}, out)
            self.assertEqual(got["inputs"], earlier["inputs"])
            self.assertEqual(got["onnx"], "/w/o.onnx")
            with open(out, "w") as f:
                json.dump({"name": "tv/resnet18", "error": "export: failed"}, f)
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertIsNone(zoo.with_earlier_cpu(dict(fresh), out))

    def test_verdict_and_passes(self):
        info = row("tv/swin_v2_t", {"rel_l2": 2e-3, "pytorch_fp16_rel_l2": float("inf"),
                                    "top1": 4, "auto": {"fp32_layers": ["a", "b", "c"]}})
        self.assertEqual(zoo.verdict(info), "pass (auto: 3 layers fp32)")
        self.assertTrue(zoo.passes(info))
        self.assertTrue(zoo.passes(row("tv/resnet18", {"rel_l2": 1e-3,
                                                       "pytorch_fp16_rel_l2": 1e-3, "top1": 4})))
        self.assertFalse(zoo.passes(row("timm/efficientvit_b0", {"error": OVERFLOW})))
        bad_cpu = dict(row("tv/x", {"rel_l2": 1e-3, "pytorch_fp16_rel_l2": 1e-3}),
                       cpu={"rel_l2": 1e-3, "ok": False, "problem": "rel L2 0.001 > 1e-05"})
        self.assertFalse(zoo.passes(bad_cpu))
        self.assertFalse(zoo.passes({"name": "n", "error": "export: failed"}))

    def test_report_shows_auto(self):
        with tempfile.TemporaryDirectory() as d:
            rows = [row("tv/resnet18", {"rel_l2": 1e-3, "pytorch_fp16_rel_l2": 1e-3, "top1": 4}),
                    row("tv/swin_v2_t", {"rel_l2": 2e-3, "pytorch_fp16_rel_l2": float("inf"),
                                         "top1": 4, "auto": {"fp32_layers": ["a", "b"]}}),
                    row("timm/efficientvit_b0",
                        {"rel_l2": 9e-3, "pytorch_fp16_rel_l2": 7.8e-3, "top1": 4,
                         "auto": {"fp32_layers": ["m"]}}),
                    row("tv/swin_v2_b", {"error": OVERFLOW})]
            for info in rows:
                with open(os.path.join(d, zoo.slug(info["name"]) + ".json"), "w") as f:
                    json.dump(info, f)
            md = os.path.join(d, "zoo.md")
            with contextlib.redirect_stdout(io.StringIO()):
                zoo.report(d, md)
            with open(md) as f:
                text = f.read()
        self.assertIn("correct (CPU and GPU): 2 (1 of them with --precision auto after an fp16 "
                      "overflow).", text)
        lines = {l.split("|")[1].strip(): l for l in text.splitlines() if l.startswith("| ")}
        self.assertTrue(lines["tv/resnet18"].rstrip().endswith("| pass |"))
        self.assertIn("| pass (auto: 2 layers fp32) |", lines["tv/swin_v2_t"])
        self.assertIn("| GPU (auto: 1 layer fp32): rel L2 0.009 > 1.1 x PyTorch fp16's 0.0078 |",
                      lines["timm/efficientvit_b0"])
        self.assertIn("GPU: tcinfer: error: the GPU outputs hold 4000 NaN/Inf",
                      lines["tv/swin_v2_b"])



class ZooResumeTest(unittest.TestCase):
    """--resume's choice of rows and the timing runs of an auto row."""

    def write(self, folder, name, doc):
        with open(os.path.join(folder, zoo.slug(name) + ".json"), "w") as fh:
            json.dump(doc, fh)

    def test_failed_timing_is_tried_again(self):
        timed = {"tcinfer": {"median_ms": 0.4}, "pytorch": {"median_ms": 0.9}}
        failed = {"tcinfer": {"error": "tcinfer: cannot write the timing cache x.tmp"},
                  "pytorch": {"median_ms": 0.9}}
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "a/timed", {"gpu": {}, "bench": {"1": timed, "64": timed}})
            self.write(d, "a/failed", {"gpu": {}, "bench": {"1": failed}})
            self.write(d, "a/untimed", {"gpu": {}})
            self.write(d, "a/export_error", {"error": "export: unsupported"})
            done = {n: zoo.phase_done(d, "a/" + n, "bench")
                    for n in ("timed", "failed", "untimed", "export_error", "missing")}
            self.assertEqual(done, {"timed": True, "failed": False, "untimed": False,
                                    "export_error": True, "missing": False})
            # the accuracy phase does not look at timings
            self.assertTrue(zoo.phase_done(d, "a/failed", "acc"))
            self.assertFalse(zoo.phase_done(d, "a/failed", "all"))

    def test_auto_row_timed_with_its_layers(self):
        info = {"name": "tv/swin_v2_t", "onnx": os.path.join("w", "tv__swin_v2_t.onnx")}
        layers = ["/features/attn/MatMul", "/features/attn/Div_3"]
        gpu = {"rel_l2": 1e-3, "auto": {"fp32_layers": layers, "relative_l2": 1e-3}}
        self.assertEqual(zoo.auto_bench_args(info, gpu, 300, ["--x"]),
                         (300, ["--x", "--fp32-layers", ",".join(layers)]))
        # a plain row, or one whose GPU run failed: no precision arguments
        self.assertEqual(zoo.auto_bench_args(info, {"rel_l2": 1e-3}, 300, []), (300, []))
        self.assertEqual(zoo.auto_bench_args(info, {"error": "x", "auto": gpu["auto"]}, 300, []),
                         (300, []))
        # a name --fp32-layers would split or read as a pattern: the search, with its cache
        with tempfile.TemporaryDirectory() as d:
            info["onnx"] = os.path.join(d, "tv__swin_v2_t.onnx")
            gpu["auto"]["fp32_layers"] = ["/a,b/MatMul"]
            timeout, args = zoo.auto_bench_args(info, gpu, 300, [])
            self.assertEqual(timeout, 300 * zoo.AUTO_TIMEOUT_FACTOR)
            self.assertEqual(args[:2], ["--precision", "auto"])
            self.assertTrue(os.path.isdir(os.path.dirname(args[-1])))

    def test_auto_row_overflowing_on_the_timing_input_searches(self):
        """The accuracy phase's fp32 layers overflow on the timing's input: that batch is timed
        with a search of its own, and the table says so."""
        layers = ["/stages/attn/MatMul_1"]
        calls = []

        def fake_bench(binary, onnx_path, shapes, iters, timeout, extra=()):
            calls.append(list(extra))
            if "--fp32-layers" in extra:
                return {"error": OVERFLOW}
            return {"median_ms": 0.5 if shapes[1].startswith("x:1x") else 8.0}

        saved = zoo.tcinfer_bench, zoo.pytorch_bench
        zoo.tcinfer_bench = fake_bench
        zoo.pytorch_bench = lambda torch, model, make, b, iters: {"median_ms": 1.0 * b}
        try:
            with tempfile.TemporaryDirectory() as d:
                info = row("timm/efficientvit_b0", {"rel_l2": 3e-3, "pytorch_fp16_rel_l2": 8e-3,
                                                    "auto": {"fp32_layers": layers}})
                info["onnx"] = os.path.join(d, "timm__efficientvit_b0.onnx")
                zoo.bench(None, "tcinfer", info, None, None, {"x": ("float", [3, 8, 8], None)},
                          ["x"], 300, 5)
        finally:
            zoo.tcinfer_bench, zoo.pytorch_bench = saved
        # each batch: the accuracy phase's layers, then the search
        self.assertEqual([c[:2] for c in calls],
                         [["--fp32-layers", layers[0]], ["--precision", "auto"]] * 2)
        self.assertEqual(info["bench"]["1"]["tcinfer"], {"median_ms": 0.5, "own_search": True})
        self.assertEqual(zoo._bench_cells(info),
                         ["0.500 / 1.000 (2.00x), own search", "8000 / 1000 (8.00x), own search"])


class ZooTraceTest(unittest.TestCase):
    """bench/zoo_trace.py's measures: a systematic error (every value scaled by the same 1e-3)
    and a random one of the same size look alike per element; the spatial mean tells them apart."""

    def test_mean_error_finds_a_bias(self):
        import numpy as np
        import zoo_trace
        rng = np.random.default_rng(0)
        ref = rng.normal(0.0, 1.0, (2, 8, 16, 16)) + rng.normal(0.0, 0.5, (1, 8, 1, 1))
        noisy = ref * (1.0 + 1e-3 * rng.normal(0.0, 1.0, ref.shape))
        biased = ref * (1.0 + 1e-3)
        rel_n, mean_n, bias_n = zoo_trace.stats(noisy, ref)
        rel_b, mean_b, bias_b = zoo_trace.stats(biased, ref)
        self.assertAlmostEqual(rel_b, 1e-3, delta=1e-6)
        self.assertLess(abs(rel_n / rel_b - 1.0), 0.1)  # alike per element
        self.assertAlmostEqual(mean_b, 1e-3, delta=1e-6)  # the bias survives the mean
        self.assertGreater(mean_b, 5 * mean_n)  # random rounding averages away
        self.assertGreater(bias_b, 3 * bias_n)
        # tokens (rank 3): the mean over the sequence; rank 2: no mean
        self.assertAlmostEqual(zoo_trace.stats(biased[0], ref[0])[1], 1e-3, delta=1e-6)
        self.assertTrue(np.isnan(zoo_trace.stats(biased[0, 0], ref[0, 0])[1]))

if __name__ == "__main__":
    unittest.main(verbosity=2)
