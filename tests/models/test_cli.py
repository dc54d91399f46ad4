#!/usr/bin/env python3
"""Tests of the tcinfer command line: input formats, outputs, and every error path's exit status
and message. Builds its own tiny models, so it needs no generated files.

  test_cli.py --tcinfer build/tcinfer [--demo-dir models/demo] [--models-dir build/models]
              [unittest options]

--models-dir (the generated models) adds the --report check of every generated model.

Exit statuses (the CLI's contract): 0 ok, 1 failure, 2 usage error, 3 unsupported model.
"""
import argparse
import glob
import html.parser
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TCINFER = None
DEMO_DIR = None
MODELS_DIR = None
# ops that a tiny elementwise model may use, first supported one wins
UNARY_CANDIDATES = ["Relu", "Identity", "Abs", "Neg", "Sigmoid"]
# real ONNX ops outside tcinfer's coverage; the first one --list-ops does not name is used
UNSUPPORTED_CANDIDATES = ["Det", "Einsum", "Hardmax", "NonMaxSuppression", "Mish", "Celu"]
NUMPY_OF = {"Relu": lambda x: np.maximum(x, 0), "Identity": lambda x: x, "Abs": np.abs,
            "Neg": np.negative, "Sigmoid": lambda x: 1 / (1 + np.exp(-x))}


def run(*args, timeout=60):
    proc = subprocess.run([TCINFER, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def make_model(nodes, inputs, outputs, opset=13, initializers=()):
    graph = helper.make_graph(nodes, "cli_test", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets,
                             ir_version=helper.find_min_ir_version_for(opsets))


def value(name, dims, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, dims)


def external_tensor(name, dims, **entries):
    """A float initializer whose data is in a file (entries: location, offset, length)."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims,
                    data_location=TensorProto.EXTERNAL)
    for key, val in entries.items():
        entry = t.external_data.add()
        entry.key, entry.value = key, val
    return t


class ReportParser(html.parser.HTMLParser):
    """Checks a --report file as it parses: every element closed in order, nothing fetched
    (no src, no href but same-page anchors, no script, link or import), every number of an SVG
    attribute finite. Collects the layer table's node names and the SVG count."""
    VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr"}
    SVG_NUMBERS = {"x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "r", "width", "height"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.names, self.svgs = [], [], [], 0
        self.in_name_cell, self.cell, self.text = False, "", []

    def handle_starttag(self, tag, attrs):
        self.handle_attrs(tag, attrs)
        if tag in ("script", "link", "iframe", "object", "embed", "img", "image", "use"):
            self.errors.append(f"<{tag}> in the report")
        if tag == "svg":
            self.svgs += 1
        if tag == "td" and ("class", "name") in attrs:
            self.in_name_cell, self.cell = True, ""
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_attrs(tag, attrs)

    def handle_attrs(self, tag, attrs):
        for key, val in attrs:
            if key == "src" or (key in ("href", "xlink:href") and not (val or "").startswith("#")):
                self.errors.append(f"<{tag} {key}={val!r}> fetches something")
            if key == "style" and "url(" in (val or ""):
                self.errors.append(f"<{tag} style> loads a url")
            if key in self.SVG_NUMBERS and self.stack and "svg" in self.stack + [tag]:
                try:
                    if not math.isfinite(float(val)):
                        self.errors.append(f"<{tag} {key}={val}> not finite")
                except ValueError:
                    self.errors.append(f"<{tag} {key}={val!r}> not a number")
            if key == "points" or key == "d":
                for num in re.findall(r"-?[0-9.]+(?:e[-+]?[0-9]+)?|nan|inf", val or "", re.I):
                    if not math.isfinite(float(num)):
                        self.errors.append(f"<{tag} {key}> holds {num}")

    def handle_endtag(self, tag):
        if tag == "td" and self.in_name_cell:
            self.names.append(self.cell)
            self.in_name_cell = False
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()

    def handle_data(self, data):
        if self.in_name_cell:
            self.cell += data
        self.text.append(data)


def check_report(test, path):
    """Parses the report at path with test's assertions; returns the parser."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    test.assertTrue(text.startswith("<!DOCTYPE html>"), text[:80])
    parser = ReportParser()
    parser.feed(text)
    parser.close()
    test.assertEqual(parser.errors, [], path)
    test.assertEqual(parser.stack, [], f"{path}: elements left open")
    test.assertGreater(parser.svgs, 0, f"{path}: no SVG")
    words = re.findall(r"[A-Za-z]+", " ".join(parser.text))
    test.assertFalse({"nan", "inf", "infinity"} & {w.lower() for w in words},
                     f"{path}: a number that is not finite")
    return parser


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tci_cli_")
        cls.dir = cls.tmp.name
        rc, out, err = run("--list-ops")
        cls.list_ops_result = (rc, out, err)
        cls.ops = {line.split()[0] for line in out.splitlines() if line.strip()} if rc == 0 \
            else set()
        cls.unary = next((op for op in UNARY_CANDIDATES if op in cls.ops), None)
        cls.unsupported = next((op for op in UNSUPPORTED_CANDIDATES if op not in cls.ops),
                               "TcinferNoSuchOp")
        cls.rng = np.random.default_rng(0)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, f"{self._testMethodName}_{name}")

    def save(self, model, name="model.onnx"):
        path = self.path(name)
        onnx.save_model(model, path)
        return path

    def unary_model(self, dims, name="model.onnx"):
        """y = Op(x) for the first supported elementwise op; skips the test if none is."""
        if not self.unary:
            self.skipTest(f"none of {UNARY_CANDIDATES} in --list-ops yet")
        node = helper.make_node(self.unary, ["x"], ["y"], name="act")
        return self.save(make_model([node], [value("x", dims)], [value("y", dims)]), name)

    def expected(self, x):
        return NUMPY_OF[self.unary](x).astype(np.float32)

    def assert_error(self, result, codes, *patterns):
        """The run failed with one of codes and a 'tcinfer: ...' message matching patterns."""
        rc, out, err = result
        codes = (codes,) if isinstance(codes, int) else codes
        self.assertIn(rc, codes, f"exit {rc}, expected {codes}; stderr: {err!r}")
        self.assertTrue(err.startswith("tcinfer: "), f"message not 'tcinfer: ...': {err!r}")
        for pattern in patterns:
            self.assertRegex(err, pattern)
        return err

    # informational options -----------------------------------------------------------------
    def test_help(self):
        rc, out, err = run("--help")
        self.assertEqual(rc, 0, err)
        self.assertIn("usage", out.lower())
        for option in ("--shape", "--output-dir", "--backend", "--quiet", "--random",
                       "--list-ops", "--version"):
            self.assertIn(option, out)

    # --device and --devices ------------------------------------------------------------------
    def test_devices_lists_each_device(self):
        """--devices: the count, then one 'device I: NAME' line per GPU, in index order."""
        rc, out, err = run("--devices")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        m = re.fullmatch(r"GPUs: (\d+)", lines[0])
        self.assertIsNotNone(m, out)
        count = int(m.group(1))
        self.assertEqual(len(lines), 1 + count, out)
        for i, line in enumerate(lines[1:]):
            self.assertRegex(line, rf"^device {i}: \S")

    def test_device_argument_errors(self):
        """--device wants an index; it picks a GPU, so --backend cpu and --plan refuse it."""
        path = self.unary_model([2, 3])
        for bad in ("-1", "x", "1.5", "", "0x1"):
            self.assert_error(run(f"--device={bad}", "--random", 1, path), 2,
                              rf"--device wants a CUDA device index \(0, 1, \.\.\.; tcinfer "
                              rf"--devices lists them\), got '{re.escape(bad)}'")
        self.assert_error(run("--device"), 2, r"--device needs a value")
        self.assert_error(run("--device", 1, "--backend", "cpu", "--random", 1, path), 2,
                          r"--device picks the GPU to run on: not with --backend cpu")
        self.assert_error(run("--device", 0, "--plan", path), 2,
                          r"nor with --plan, which builds the plan without a GPU")
        rc, out, err = run("--help")
        self.assertIn("--device N", out)

    def test_device_runs_there(self):
        """Without a GPU, --device (which implies --backend gpu) fails clearly. With one:
        --device 0 gives the default run's bits, an index past the last names the count, and
        on a machine with two GPUs device 1 gives device 0's bits (--load-engine of a file
        saved on device 0 too)."""
        path = self.unary_model([2, 3])
        gpus = self.gpus()
        if gpus == 0:
            self.assert_error(run("--device", 0, "--random", 1, path), 1,
                              r"no CUDA (GPU is available here|support)")
            return
        default, dev0 = self.path("default.npy"), self.path("dev0.npy")
        for args in ((default,), (dev0, "--device", 0)):
            rc, out, err = run("--quiet", "--random", 3, "-o", args[0], *args[1:], path)
            self.assertEqual(rc, 0, err)
        self.assertEqual(np.load(default).tobytes(), np.load(dev0).tobytes())
        rc, out, err = run("--json", "--quiet", "--device", 0, "--random", 3, path)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["device"], 0)
        noun = "is" if gpus == 1 else "are"
        self.assert_error(run("--device", gpus, "--random", 1, path), 1,
                          rf"--device: CUDA device {gpus} does not exist: there {noun} {gpus}")
        if gpus < 2:
            print("  (skipped: --device 1 needs a second GPU)", file=sys.stderr)
            return
        dev1, plan = self.path("dev1.npy"), self.path("model.tci")
        rc, out, err = run("--quiet", "--random", 3, "-o", dev1, "--device", 1, path)
        self.assertEqual(rc, 0, err)
        self.assertEqual(np.load(dev0).tobytes(), np.load(dev1).tobytes())
        rc, out, err = run("--quiet", "--device", 0, "--save-engine", plan, path)
        self.assertEqual(rc, 0, err)
        loaded = self.path("loaded.npy")
        rc, out, err = run("--quiet", "--random", 3, "-o", loaded, "--device", 1,
                           "--load-engine", plan)
        self.assertEqual(rc, 0, err)
        self.assertEqual(np.load(dev0).tobytes(), np.load(loaded).tobytes())

    def test_version(self):
        rc, out, err = run("--version")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"\d+\.\d+\.\d+")

    def test_list_ops_format(self):
        rc, out, err = self.list_ops_result
        self.assertEqual(rc, 0, err)
        for line in out.splitlines():
            m = re.fullmatch(r"(\w+) (\d+)-(\d+) (cpu|cpu,gpu)", line)
            self.assertIsNotNone(m, f"--list-ops line {line!r} is not 'OpType min-max backends'")
            self.assertLessEqual(int(m.group(2)), int(m.group(3)), line)

    def test_info(self):
        path = self.unary_model([1, 3, 4, 4])
        rc, out, err = run("--info", path)
        self.assertEqual(rc, 0, err)
        self.assertIn("x", out)
        self.assertIn("y", out)

    # usage errors: exit 2 -------------------------------------------------------------------
    def test_no_arguments(self):
        self.assert_error(run(), 2)

    def test_unknown_option(self):
        self.assert_error(run("--no-such-option", "m.onnx"), 2, "--no-such-option")

    def test_option_missing_value(self):
        self.assert_error(run("--random"), 2)

    def test_malformed_shape(self):
        path = self.unary_model([1, 3, 4, 4])
        for spec in ("x:1xbadx4x4", "x:1x3x", "x:", "x:-1x3", "x"):
            self.assert_error(run("--shape", spec, path), 2, re.escape(f"'{spec}'"))

    def test_unknown_backend(self):
        path = self.unary_model([1, 3, 4, 4])
        self.assert_error(run("--backend", "tpu", path), 2, "tpu")

    def test_precision_options(self):
        path = self.unary_model([1, 3, 4, 4])
        self.assert_error(run("--precision", "fp8", path), 2, "fp8")
        self.assert_error(run("--baseline", "tpu", "--compare", path), 2, "tpu")
        self.assert_error(run("--baseline", "gpu-fp32", path), 2, "--compare")
        self.assert_error(run("--backend", "cpu", "--fp32-layers", "act", path), 2, "GPU")
        self.assert_error(run("--backend", "cpu", "--precision", "fp32", path), 2, "GPU")

    def test_plan_fp32_layers(self):
        """--fp32-layers by node name and by op type, in the GPU plan (no GPU needed)."""
        path = self.unary_model([1, 3, 4, 4])
        rc, out, err = run("--plan", "--fp32-layers", "act", path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"act\s+cast fp16->fp32\s+NHWC8 fp32|act\s+.*fp32")
        rc, out, err = run("--plan", "--fp32-layers", self.unary, path)
        self.assertEqual(rc, 0, err)
        self.assertIn("fp32", out)
        for precision in ("fp32", "tf32"):
            rc, out, err = run("--plan", "--precision", precision, path)
            self.assertEqual(rc, 0, err)
            self.assertNotIn("cast", out)
        self.assert_error(run("--plan", "--fp32-layers", "nope", path), 1, "'nope'")
        # as many names as --precision auto keeps in a large network (inception_v3: 106)
        rc, out, err = run("--plan", "--fp32-layers", ",".join(["act"] * 300), path)
        self.assertEqual(rc, 0, err)
        self.assert_error(run("--plan", "--fp32-layers", ",".join(["act"] * 4097), path), 2,
                          r"too many --fp32-layers \(at most 4096\)")
        rc, out, err = run("--plan", "--fp32-layers", "a?t", path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"act\s+Relu\s+\S+ fp32")
        self.assert_error(run("--plan", "--fp32-layers", "b*", path), 1, r"'b\*'")
        # --info lists the fp32 layers as given, none chosen by --precision auto
        rc, out, err = run("--plan", "--fp32-layers", f"a?t,{self.unary}", path)
        self.assertEqual(rc, 0, err)
        self.assertIn(f"  fp32 layers: 'a?t', '{self.unary}'\n", out)
        rc, out, err = run("--plan", "--json", "--fp32-layers", "act", path)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["gpu_plan"]["fp32_layers"], [{"layer": "act", "automatic": False}])
        self.assertNotIn("precision_auto", doc)
        rc, out, err = run("--plan", path)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("fp32 layers", out)

    def test_plan_bf16(self):
        """--precision bf16: every float step stores bfloat16, fp32 layers fp32 (the casts between
        them are in tests/unit/test_plan.c)."""
        path = self.unary_model([1, 3, 4, 4])
        rc, out, err = run("--plan", "--precision", "bf16", path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"act\s+Relu\s+dense bf16")
        self.assertNotIn("cast", out)
        rc, out, err = run("--plan", "--precision", "bf16", "--fp32-layers", "act", path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"act\s+Relu\s+dense fp32")
        self.assert_error(run("--backend", "cpu", "--precision", "bf16", path), 2, "GPU")

    def test_keep_precision_plan(self):
        """--keep-precision (no GPU needed): the kept layer's steps store bf16, with casts
        fp16<->bf16 at its boundaries, or fp32 for tf32 and fp32; --info and --json say which."""
        path = self.overflow_model()
        rc, out, err = run("--plan", "--fp32-layers", "mm", "--keep-precision", "bf16", path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"mm\s+cast fp16->bf16\s+dense bf16")
        self.assertRegex(out, r"mm\s+MatMul\s+dense bf16")
        self.assertRegex(out, r"scale\s+Mul\s+dense\s")
        self.assertIn("  fp32 layers (kept in bf16): 'mm'\n", out)
        self.assertNotIn("fp32", re.sub(r"fp32 layers|fp32 reference", "", out.split("step")[-1]))
        rc, out, err = run("--plan", "--fp32-layers", "mm", "--keep-precision", "tf32", path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"mm\s+cast fp16->fp32\s+dense fp32")
        self.assertRegex(out, r"mm\s+MatMul\s+dense fp32")
        self.assertIn("  fp32 layers (kept in tf32): 'mm'\n", out)
        for kept in ("bf16", "tf32", "fp32"):
            rc, out, err = run("--plan", "--json", "--fp32-layers", "mm", "--keep-precision",
                               kept, path)
            self.assertEqual(rc, 0, err)
            doc = json.loads(out)
            self.assertEqual(doc["kept_precision"], kept)
            self.assertEqual(doc["gpu_plan"]["kept_precision"], kept)
            self.assertEqual(doc["precision"], "fp16")
        rc, out, err = run("--plan", "--fp32-layers", "mm", path)
        self.assertEqual(rc, 0, err)
        self.assertIn("  fp32 layers: 'mm'\n", out)
        rc, out, err = run("--plan", "--json", "--fp32-layers", "mm", path)
        self.assertEqual(json.loads(out)["kept_precision"], "fp32")
        rc, out, err = run("--plan", "--json", path)
        self.assertNotIn("kept_precision", json.loads(out))
        # in a bf16 engine the fp32 layers are fp32 (--keep-precision is for fp16 engines)
        rc, out, err = run("--plan", "--json", "--precision", "bf16", "--fp32-layers", "mm", path)
        self.assertEqual(json.loads(out)["kept_precision"], "fp32")

    def test_keep_precision_refused(self):
        path = self.overflow_model()
        self.assert_error(run("--plan", "--fp32-layers", "mm", "--keep-precision", "fp64", path),
                          2, r"unknown --keep-precision 'fp64' \(fp32, tf32 or bf16\)")
        self.assert_error(run("--plan", "--keep-precision", "bf16", path), 2,
                          r"give --fp32-layers or --precision auto with it")
        for precision in ("fp32", "tf32", "bf16"):
            self.assert_error(run("--plan", "--precision", precision, "--fp32-layers", "mm",
                                  "--keep-precision", "tf32", path), 2,
                              r"--keep-precision sets the precision of the layers an fp16 "
                              r"engine keeps", "not with --precision " + precision)
        self.assert_error(run("--backend", "cpu", "--fp32-layers", "mm", "--keep-precision",
                              "bf16", path), 2, "GPU")
        self.assert_error(run("--load-engine", "plan.tci", "--keep-precision", "bf16"), 2,
                          "--load-engine", "--keep-precision")
        self.assert_error(run("--precision", "auto", "--accuracy-target", "1e-3",
                              "--keep-precision", "bf16", path), 2,
                          r"fixes overflow, not accuracy")

    def test_engine_file_options(self):
        """--save-engine / --load-engine: the combinations refused before any work, and files
        that are no engine (GPU runs of real engine files are in scripts/gpu_suite.sh)."""
        path = self.unary_model([1, 3, 4, 4])
        for extra in (["--shape", "x:1x3x4x4"], ["--precision", "fp32"], ["--kernels", "wmma"],
                      ["--compare"], ["--backend", "cpu"], ["--plan"],
                      ["--timing-cache", "t.cache"], ["--fp32-layers", "act"]):
            self.assert_error(run("--load-engine", "plan.tci", *extra), 2, "--load-engine")
        for extra in (["--backend", "cpu"], ["--plan"], ["--compare-layers"]):
            self.assert_error(run("--save-engine", self.path("x.tci"), *extra, path), 2,
                              "--save-engine")
        # an ONNX model is not an engine file; a missing file is named
        self.assert_error(run("--load-engine", path, "--random", "0"), 1,
                          "not a tcinfer engine file")
        self.assert_error(run("--load-engine", self.path("missing.tci"), "--random", "0"), 1,
                          "cannot open the engine file")

    # running ------------------------------------------------------------------------------
    def test_npy_in_npy_out(self):
        path = self.unary_model([1, 3, 4, 4])
        x = self.rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        rc, out, err = run("--quiet", "-o", self.path("y.npy"), path, self.path("x.npy"))
        self.assertEqual(rc, 0, err)
        y = np.load(self.path("y.npy"))
        self.assertEqual(y.dtype, np.float32)
        self.assertEqual(y.shape, (1, 3, 4, 4))
        np.testing.assert_allclose(y, self.expected(x), rtol=1e-6, atol=1e-7)

    def test_control_flow(self):
        """If, Loop and Scan run on the CPU reference only; an If whose condition is data
        dependent is refused by the GPU planner in the command's words, and the CPU runs it."""
        rc, out, err = self.list_ops_result
        for op in ("If", "Loop", "Scan"):
            self.assertRegex(out, rf"(?m)^{op} \d+-\d+ cpu$")
        then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"], name="neg")], "then",
                                   [], [value("t", [2])])
        else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"], name="abs")], "else",
                                   [], [value("e", [2])])
        node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                                else_branch=else_g)
        path = self.save(make_model([node], [value("x", [2]), value("c", [], TensorProto.BOOL)],
                                    [value("y", [2])]))
        self.assert_error(run("--plan", path), 3, r"node 'branch' \(If\): data-dependent "
                          r"control flow runs on the CPU reference: --backend cpu")
        x = np.array([-1.5, 2.0], np.float32)
        np.save(self.path("x.npy"), x)
        for cond, want in ((True, -x), (False, np.abs(x))):
            np.save(self.path("c.npy"), np.array(cond))
            rc, out, err = run("--backend", "cpu", "--quiet", "-o", self.path("y.npy"), path,
                               "x=" + self.path("x.npy"), "c=" + self.path("c.npy"))
            self.assertEqual(rc, 0, err)
            np.testing.assert_array_equal(np.load(self.path("y.npy")), want)

    def test_raw_in_raw_out(self):
        path = self.unary_model([2, 5])
        x = self.rng.standard_normal((2, 5)).astype(np.float32)
        x.tofile(self.path("x.bin"))
        rc, out, err = run("--quiet", "-o", self.path("y.bin"), path, self.path("x.bin"))
        self.assertEqual(rc, 0, err)
        y = np.fromfile(self.path("y.bin"), dtype=np.float32)
        np.testing.assert_allclose(y.reshape(2, 5), self.expected(x), rtol=1e-6, atol=1e-7)

    def test_pb_input_by_name(self):
        path = self.unary_model([3, 4])
        x = self.rng.standard_normal((3, 4)).astype(np.float32)
        with open(self.path("x.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, "x").SerializeToString())
        rc, out, err = run("--quiet", "--output-dir", self.dir, path, f"x={self.path('x.pb')}")
        self.assertEqual(rc, 0, err)
        y = np.load(os.path.join(self.dir, "y.npy"))  # named after the output
        np.testing.assert_allclose(y, self.expected(x), rtol=1e-6, atol=1e-7)

    def test_output_dir_every_output_with_dtype(self):
        if not self.unary or "Shape" not in self.ops:
            self.skipTest("needs a unary op and Shape")
        nodes = [helper.make_node(self.unary, ["x"], ["y"], name="act"),
                 helper.make_node("Shape", ["x"], ["s"], name="shape")]
        path = self.save(make_model(nodes, [value("x", [2, 3])],
                                    [value("y", [2, 3]), value("s", [2], TensorProto.INT64)]))
        out_dir = self.path("out")
        os.makedirs(out_dir)
        x = self.rng.standard_normal((2, 3)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        rc, out, err = run("--quiet", "--output-dir", out_dir, path, self.path("x.npy"))
        self.assertEqual(rc, 0, err)
        np.testing.assert_allclose(np.load(os.path.join(out_dir, "y.npy")),
                                   self.expected(x), rtol=1e-6)
        s = np.load(os.path.join(out_dir, "s.npy"))
        self.assertEqual(s.dtype, np.int64)
        np.testing.assert_array_equal(s, [2, 3])

    def test_random_is_seeded(self):
        path = self.unary_model([4, 4])
        outs = []
        for seed in (7, 7, 8):
            rc, out, err = run("--quiet", "--random", seed, "-o", self.path(f"y{len(outs)}.npy"),
                               path)
            self.assertEqual(rc, 0, err)
            outs.append(np.load(self.path(f"y{len(outs)}.npy")))
        np.testing.assert_array_equal(outs[0], outs[1])
        self.assertFalse(np.array_equal(outs[0], outs[2]), "seeds 7 and 8 gave the same data")

    def test_symbolic_batch_with_shape(self):
        path = self.unary_model(["N", 3])
        x = self.rng.standard_normal((5, 3)).astype(np.float32)
        x.tofile(self.path("x.bin"))
        rc, out, err = run("--quiet", "--shape", "x:5x3", "-o", self.path("y.npy"), path,
                           self.path("x.bin"))
        self.assertEqual(rc, 0, err)
        np.testing.assert_allclose(np.load(self.path("y.npy")), self.expected(x), rtol=1e-6)

    def test_top5_report(self):
        path = self.unary_model([1, 10])
        x = np.arange(10, dtype=np.float32)[None] - 3
        np.save(self.path("x.npy"), x)
        rc, out, err = run(path, self.path("x.npy"))
        self.assertEqual(rc, 0, err)
        self.assertIn("9", out)  # the largest value's index heads the top-5

    def test_demo_model(self):
        model = os.path.join(DEMO_DIR, "tiny_cnn.onnx")
        if not DEMO_DIR or not os.path.exists(model):
            self.skipTest("no --demo-dir")
        missing = {"Conv", "BatchNormalization", "Relu", "MaxPool", "GlobalAveragePool",
                   "Flatten", "Gemm", "Softmax"} - self.ops
        if missing:
            self.skipTest(f"ops not listed yet: {sorted(missing)}")
        rc, out, err = run("--quiet", "-o", self.path("probs.npy"), model,
                           os.path.join(DEMO_DIR, "input.npy"))
        self.assertEqual(rc, 0, err)
        want = np.load(os.path.join(DEMO_DIR, "expected_output.npy"))
        np.testing.assert_allclose(np.load(self.path("probs.npy")), want, rtol=1e-4, atol=1e-6)

    # input errors ---------------------------------------------------------------------------
    def test_wrong_input_size(self):
        path = self.unary_model([2, 3, 5, 7])  # 210 floats = 840 bytes
        with open(self.path("x.bin"), "wb") as f:
            f.write(b"\0" * 100)
        err = self.assert_error(run("--quiet", path, self.path("x.bin")), (1, 2),
                                r"\b840\b", r"\b100\b", r"2\D{1,3}3\D{1,3}5\D{1,3}7")
        self.assertRegex(err.lower(), "expect")

    def test_npy_wrong_shape(self):
        path = self.unary_model([2, 3])
        np.save(self.path("x.npy"), np.zeros((3, 2), np.float32))
        self.assert_error(run("--quiet", path, self.path("x.npy")), (1, 2), "x",
                          r"2\D{1,3}3", r"3\D{1,3}2")

    def test_npy_wrong_dtype(self):
        path = self.unary_model([2, 3])
        np.save(self.path("x.npy"), np.zeros((2, 3), np.float64))
        self.assert_error(run("--quiet", path, self.path("x.npy")), (1, 2), "float|double")

    def test_input_outside_shape(self):
        path = self.unary_model(["N", 3])
        np.save(self.path("x.npy"), np.zeros((4, 3), np.float32))
        self.assert_error(run("--quiet", "--shape", "x:2x3", path, self.path("x.npy")), (1, 2),
                          r"2\D{1,3}3", r"4\D{1,3}3")
        np.zeros((4, 3), np.float32).tofile(self.path("x.bin"))
        self.assert_error(run("--quiet", "--shape", "x:2x3", path, self.path("x.bin")), (1, 2),
                          r"\b24\b", r"\b48\b")

    def test_shape_contradicts_model(self):
        path = self.unary_model([1, 3, 4, 4])
        self.assert_error(run("--quiet", "--random", 1, "--shape", "x:1x3x5x5", path), (1, 2),
                          "x")

    def test_shape_for_unknown_input(self):
        path = self.unary_model([2, 3])
        self.assert_error(run("--quiet", "--random", 1, "--shape", "nosuch:2x3", path), (1, 2),
                          "nosuch")

    def test_unknown_input_name(self):
        path = self.unary_model([2, 3])
        np.save(self.path("x.npy"), np.zeros((2, 3), np.float32))
        self.assert_error(run("--quiet", path, f"nosuch={self.path('x.npy')}"), (1, 2), "nosuch")

    def test_missing_input(self):
        path = self.unary_model([2, 3])
        self.assert_error(run("--quiet", path), (1, 2), "x")

    def test_too_many_inputs(self):
        path = self.unary_model([2, 3])
        np.save(self.path("x.npy"), np.zeros((2, 3), np.float32))
        self.assert_error(run("--quiet", path, self.path("x.npy"), self.path("x.npy")), (1, 2))

    def test_input_file_not_found(self):
        path = self.unary_model([2, 3])
        self.assert_error(run("--quiet", path, self.path("absent.npy")), 1, "absent.npy")

    def test_malformed_npy(self):
        path = self.unary_model([2, 3])
        with open(self.path("x.npy"), "wb") as f:
            f.write(b"\x93NUMPY\x01\x00garbage")
        self.assert_error(run("--quiet", path, self.path("x.npy")), (1, 2), "x.npy")

    # broken models: exit 1 -------------------------------------------------------------------
    def test_model_not_found(self):
        self.assert_error(run("--quiet", "--random", 1, self.path("absent.onnx")), 1,
                          "absent.onnx")

    def test_not_onnx(self):
        path = self.path("text.onnx")
        with open(path, "w") as f:
            f.write("this is not a protobuf, just some text\n" * 20)
        self.assert_error(run("--quiet", "--random", 1, path), 1, "text.onnx")

    def test_empty_file(self):
        path = self.path("empty.onnx")
        open(path, "wb").close()
        self.assert_error(run("--quiet", "--random", 1, path), 1)

    def test_truncated_model(self):
        w = self.rng.standard_normal((64, 64)).astype(np.float32)
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
        model = make_model(nodes, [value("x", [1, 64])], [value("y", [1, 64])],
                           initializers=[numpy_helper.from_array(w, "w")])
        data = model.SerializeToString()
        for cut in (len(data) // 2, len(data) - 7, 10):
            path = self.path(f"cut{cut}.onnx")
            with open(path, "wb") as f:
                f.write(data[:cut])
            self.assert_error(run("--quiet", "--random", 1, path), 1)

    def test_external_data_outside_model_folder(self):
        t = external_tensor("w", [4], location="../outside.bin", offset="0", length="16")
        nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
        sub = os.path.join(self.dir, "sub")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(self.dir, "outside.bin"), "wb") as f:
            f.write(b"\0" * 16)
        path = os.path.join(sub, "model.onnx")
        with open(path, "wb") as f:
            f.write(make_model(nodes, [value("x", [4])], [value("y", [4])],
                               initializers=[t]).SerializeToString())
        self.assert_error(run("--quiet", "--random", 1, path), (1, 3), "outside.bin")

    def test_external_data_missing_file(self):
        t = external_tensor("w", [4], location="weights.bin")
        nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
        path = self.save(make_model(nodes, [value("x", [4])], [value("y", [4])],
                                    initializers=[t]))
        self.assert_error(run("--quiet", "--random", 1, path), 1, "weights.bin")

    # unsupported models: exit 3 ---------------------------------------------------------------
    def test_unsupported_op(self):
        op = self.unsupported
        node = helper.make_node(op, ["x"], ["y"], name="the_node")
        path = self.save(make_model([node], [value("x", [2, 2])], [value("y", None)], opset=17))
        err = self.assert_error(run("--quiet", "--random", 1, path), 3, op, "the_node", r"\b17\b")
        self.assertEqual(len(err.strip().splitlines()), 1, f"one message line expected: {err!r}")

    def test_unsupported_attribute(self):
        if not self.unary:
            self.skipTest("no unary op listed yet")
        node = helper.make_node(self.unary, ["x"], ["y"], name="odd", foo_bar=1)
        path = self.save(make_model([node], [value("x", [2])], [value("y", [2])]))
        self.assert_error(run("--quiet", "--random", 1, path), 3, "foo_bar", "odd")

    # NaN and Inf ------------------------------------------------------------------------------

    def test_nonfinite_output_noted_on_cpu(self):
        """Sqrt of negative inputs: the fp32 reference's own NaN are noted, not an error."""
        node = helper.make_node("Sqrt", ["x"], ["y"], name="root")
        path = self.save(make_model([node], [value("x", [64])], [value("y", [64])]))
        rc, out, err = run("--backend", "cpu", "--quiet", "--random", 1, path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"tcinfer: note: the outputs hold \d+ NaN/Inf values \(first in 'y'\)")

    def overflow_model(self):
        """y = (x * 2000) @ W, W = 100: |y| up to 1.3e7, past fp16's 65504 but fine in fp32."""
        nodes = [helper.make_node("Mul", ["x", "k"], ["xs"], name="scale"),
                 helper.make_node("MatMul", ["xs", "w"], ["y"], name="mm")]
        inits = [numpy_helper.from_array(np.array(2000, np.float32), "k"),
                 numpy_helper.from_array(np.full((64, 8), 100, np.float32), "w")]
        return self.save(make_model(nodes, [value("x", [4, 64])], [value("y", [4, 8])],
                                    initializers=inits))

    def test_fp16_overflow_names_the_layer(self):
        """On the GPU (skipped without one): the overflow fails the run, naming the MatMul and
        the fixes; each fix then runs clean."""
        m = re.search(r"GPUs: (\d+)", run("--devices")[1])
        if not m or m.group(1) == "0":
            self.skipTest("no GPU")
        path = self.overflow_model()
        err = self.assert_error(run("--quiet", "--random", 1, path), 1, "fp16 overflow",
                                r"layer 'mm' \(MatMul\)", r"--precision bf16",
                                r"--fp32-layers 'mm'")
        self.assertRegex(err, r"where the fp32 reference holds none")
        for fix in (["--precision", "bf16"], ["--fp32-layers", "mm"]):
            rc, out, err = run("--quiet", "--random", 1, *fix, path)
            self.assertEqual(rc, 0, f"{fix}: {err}")
            self.assertNotIn("NaN/Inf", err)
        # an engine file has no ONNX model for the fp32 reference: the NaN/Inf still fail the
        # run, said as such (it once failed with "path is NULL")
        plan = self.path("overflow.tci")
        rc, out, err = run("--quiet", "--save-engine", plan, path)
        self.assertEqual(rc, 0, err)
        err = self.assert_error(run("--quiet", "--load-engine", plan, "--random", 1), 1,
                                r"the GPU outputs hold \d+ NaN/Inf values \(first in 'y'\)",
                                r"An engine file holds no fp32 reference")
        self.assertNotIn("path is NULL", err)

    def gpus(self):
        m = re.search(r"GPUs: (\d+)", run("--devices")[1])
        return int(m.group(1)) if m else 0

    def two_overflows_model(self):
        """Two MatMuls of x * 2000, each past fp16's 65504: ya (W = 100) and yb (W = -50)."""
        nodes = [helper.make_node("Mul", ["x", "k"], ["xs"], name="scale"),
                 helper.make_node("MatMul", ["xs", "wa"], ["ya"], name="mm_a"),
                 helper.make_node("MatMul", ["xs", "wb"], ["yb"], name="mm_b")]
        inits = [numpy_helper.from_array(np.array(2000, np.float32), "k"),
                 numpy_helper.from_array(np.full((64, 8), 100, np.float32), "wa"),
                 numpy_helper.from_array(np.full((64, 8), -50, np.float32), "wb")]
        return self.save(make_model(nodes, [value("x", [4, 64])],
                                    [value("ya", [4, 8]), value("yb", [4, 8])],
                                    initializers=inits), "two_overflows.onnx")

    def test_precision_auto_refused(self):
        """--precision auto builds and runs GPU engines: refused with --backend cpu, --plan and
        --load-engine; without a GPU, a clear failure before any work."""
        path = self.overflow_model()
        self.assert_error(run("--precision", "auto", "--backend", "cpu", "--random", 1, path), 2,
                          r"--precision auto builds and runs the fp16 and fp32 GPU engines",
                          r"not with --backend cpu or --plan")
        self.assert_error(run("--precision", "auto", "--plan", path), 2, r"not with --backend cpu")
        self.assert_error(run("--precision", "auto", "--load-engine", path), 2,
                          r"--load-engine runs the engine as it was built")
        self.assert_error(run("--precision", "fast", path), 2,
                          r"unknown precision 'fast' \(fp16, bf16, tf32, fp32 or auto\)")
        if self.gpus() == 0:
            self.assert_error(run("--precision", "auto", "--random", 1, path), 1,
                              r"--precision auto builds and runs the fp16 and fp32 GPU engines "
                              r"to choose the fp32 layers; no GPU is available here")

    def test_precision_auto_fixes_overflow(self):
        """On the GPU (skipped without one): the layer that overflows fp16 is found, named and
        kept in fp32; the output is finite and within the fp16 bound of the fp32 result."""
        if self.gpus() == 0:
            self.skipTest("no GPU")
        path = self.overflow_model()
        x = np.random.default_rng(3).uniform(-1, 1, (4, 64)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        rc, out, err = run("--quiet", "--precision", "auto", "-o", self.path("y.npy"), path,
                           self.path("x.npy"), timeout=300)
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"precision auto: 1 layer kept in fp32: 'mm'\n")
        self.assertRegex(err, r"precision auto: outputs' relative L2 error [0-9.e-]+ against the "
                              r"GPU fp32 engine on the given inputs; chosen in [0-9.]+ s")
        self.assertNotIn("NaN/Inf", err)
        y = np.load(self.path("y.npy"))
        want = (x.astype(np.float64) * 2000) @ np.full((64, 8), 100.0)
        self.assertTrue(np.isfinite(y).all())
        rel = np.linalg.norm(y - want) / np.linalg.norm(want)
        self.assertLessEqual(rel, 5e-3)
        # the same with --compare against the CPU reference, within the fp16 bound
        rc, out, err = run("--quiet", "--precision", "auto", "--compare", "--tolerance", 5e-3,
                           path, self.path("x.npy"), timeout=300)
        self.assertEqual(rc, 0, err)
        self.assertIn("fp16+auto-fp32-layers GPU vs fp32 CPU", out)

    def test_precision_auto_two_layers_and_engine_file(self):
        """On the GPU (skipped without one): two overflowing layers take two rounds, both named
        (--json too); the engine saved holds them, and --load-engine runs the same bits."""
        if self.gpus() == 0:
            self.skipTest("no GPU")
        path = self.two_overflows_model()
        engine = self.path("auto.tci")
        rc, out, err = run("--json", "--precision", "auto", "--random", 2, "--output-dir",
                           self.path("built"), "--save-engine", engine, path, timeout=300)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        auto = doc["precision_auto"]
        self.assertEqual(sorted(auto["fp32_layers"]), ["mm_a", "mm_b"])
        self.assertLessEqual(auto["relative_l2"], 5e-3)
        self.assertGreaterEqual(auto["seconds"], 0)
        self.assertEqual(doc["nonfinite"]["count"], 0)
        self.assertRegex(err, r"precision auto: 2 layers kept in fp32: 'mm_[ab]', 'mm_[ab]'\n")
        rc, out, err = run("--load-engine", engine, "--random", 2, "--quiet", "--output-dir",
                           self.path("loaded"))
        self.assertEqual(rc, 0, err)
        for name in ("ya", "yb"):
            built = np.load(self.path(f"built/{name}.npy"))
            self.assertTrue(np.isfinite(built).all())
            np.testing.assert_array_equal(np.load(self.path(f"loaded/{name}.npy")), built)
        rc, out, err = run("--load-engine", engine, "--info", "--json")
        self.assertEqual(rc, 0, err)
        loaded = json.loads(out)
        layouts = {l["node"]: l["output_layout"] for l in loaded["gpu_plan"]["layers"]}
        self.assertTrue(layouts["mm_a"].endswith("fp32"), layouts)
        self.assertTrue(layouts["mm_b"].endswith("fp32"), layouts)
        self.assertFalse(layouts["scale"].endswith("fp32"), layouts)
        # the engine file still says what the search chose, and the error it reached
        self.assertEqual(sorted(loaded["precision_auto"]["fp32_layers"]), ["mm_a", "mm_b"])
        self.assertEqual(loaded["precision_auto"]["relative_l2"], auto["relative_l2"])
        self.assertEqual(loaded["precision_auto"]["from"], "engine file")
        self.assertNotIn("accuracy_target", loaded["precision_auto"])
        self.assertEqual(sorted((l["layer"], l["automatic"])
                                for l in loaded["gpu_plan"]["fp32_layers"]),
                         [("mm_a", True), ("mm_b", True)])
        self.assertRegex(err, r"precision auto \(engine file\): 2 layers kept in fp32: "
                              r"'mm_[ab]', 'mm_[ab]'\n")
        rc, out, err = run("--load-engine", engine, "--info")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"fp32 layers: 'mm_[ab]' \(precision auto\), 'mm_[ab]' "
                              r"\(precision auto\)\n")
        # an engine without overflow: nothing moved, said so; the seeded random inputs of the
        # library when none are given (--save-engine alone)
        clean = self.unary_model([4, 8])
        rc, out, err = run("--precision", "auto", "--save-engine", self.path("clean.tci"), clean,
                           timeout=300)
        self.assertEqual(rc, 0, err)
        self.assertIn("precision auto: no layer kept in fp32: the engine is all fp16", err)
        self.assertIn("on the seeded random inputs", err)

    def test_keep_precision_runs(self):
        """On the GPU (skipped without one): the overflowing MatMul kept in bf16 or tf32 runs
        finite, within the kept precision's bound of the exact product and of the CPU reference
        (--compare names the engine)."""
        if self.gpus() == 0:
            self.skipTest("no GPU")
        path = self.overflow_model()
        x = np.random.default_rng(7).uniform(-1, 1, (4, 64)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        want = (x.astype(np.float64) * 2000) @ np.full((64, 8), 100.0)
        for kept, bound in (("bf16", 2e-2), ("tf32", 5e-3), ("fp32", 5e-3)):
            rc, out, err = run("--quiet", "--fp32-layers", "mm", "--keep-precision", kept, "-o",
                               self.path(f"y_{kept}.npy"), path, self.path("x.npy"))
            self.assertEqual(rc, 0, f"{kept}: {err}")
            self.assertNotIn("NaN/Inf", err)
            y = np.load(self.path(f"y_{kept}.npy"))
            self.assertTrue(np.isfinite(y).all(), kept)
            self.assertLessEqual(np.linalg.norm(y - want) / np.linalg.norm(want), bound, kept)
            rc, out, err = run("--quiet", "--fp32-layers", "mm", "--keep-precision", kept,
                               "--compare", "--tolerance", bound, path, self.path("x.npy"))
            self.assertEqual(rc, 0, f"{kept}: {err}")
            label = "fp16+fp32-layers" if kept == "fp32" else f"fp16+{kept}-layers"
            self.assertIn(f"{label} GPU vs fp32 CPU", out)

    def test_precision_auto_keeps_in_bf16_and_tf32(self):
        """On the GPU (skipped without one): --precision auto with --keep-precision keeps the
        overflowing layer in bf16 (or tf32), says so, gives finite outputs; the engine file
        keeps the precision: loaded, its steps store the same and its outputs are the same
        bits (tf32 lost would run fp32 math and differ)."""
        if self.gpus() == 0:
            self.skipTest("no GPU")
        path = self.overflow_model()
        x = np.random.default_rng(9).uniform(-1, 1, (4, 64)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        want = (x.astype(np.float64) * 2000) @ np.full((64, 8), 100.0)
        for kept, bound in (("bf16", 2e-2), ("tf32", 5e-3)):
            engine = self.path(f"auto_{kept}.tci")
            rc, out, err = run("--json", "--quiet", "--precision", "auto", "--keep-precision",
                               kept, "-o", self.path(f"built_{kept}.npy"), "--save-engine",
                               engine, path, self.path("x.npy"), timeout=300)
            self.assertEqual(rc, 0, f"{kept}: {err}")
            doc = json.loads(out)
            self.assertEqual(doc["precision_auto"]["fp32_layers"], ["mm"])
            self.assertEqual(doc["precision_auto"]["kept_precision"], kept)
            self.assertEqual(doc["kept_precision"], kept)
            self.assertEqual(doc["nonfinite"]["count"], 0)
            self.assertRegex(err, rf"precision auto: 1 layer kept in {kept}: 'mm'\n")
            y = np.load(self.path(f"built_{kept}.npy"))
            self.assertTrue(np.isfinite(y).all(), kept)
            self.assertLessEqual(np.linalg.norm(y - want) / np.linalg.norm(want), bound, kept)
            rc, out, err = run("--quiet", "--load-engine", engine, "-o",
                               self.path(f"loaded_{kept}.npy"), self.path("x.npy"))
            self.assertEqual(rc, 0, f"{kept}: {err}")
            np.testing.assert_array_equal(np.load(self.path(f"loaded_{kept}.npy")), y)
            rc, out, err = run("--load-engine", engine, "--info", "--json")
            self.assertEqual(rc, 0, err)
            layouts = {l["node"]: l["output_layout"]
                       for l in json.loads(out)["gpu_plan"]["layers"]}
            self.assertTrue(layouts["mm"].endswith("bf16" if kept == "bf16" else "fp32"),
                            layouts)
            # the engine file says what it keeps them in (tci_engine_precision), tf32 too
            self.assertEqual(json.loads(out)["kept_precision"], kept)
            self.assertEqual(json.loads(out)["precision"], "fp16")
            self.assertRegex(err, rf"precision auto \(engine file\): 1 layer kept in {kept}")

    def test_accuracy_target_refused(self):
        path = self.overflow_model()
        self.assert_error(run("--accuracy-target", "1e-3", "--random", 1, path), 2,
                          r"--accuracy-target is the goal of --precision auto's search")
        for bad in ("0", "-1e-3", "x", "nan"):
            self.assert_error(run("--precision", "auto", "--accuracy-target", bad, path), 2,
                              "--accuracy-target wants a relative L2 error above 0, got "
                              + re.escape(f"'{bad}'"))

    def test_accuracy_target_moves_the_layers_adding_error(self):
        """On the GPU (skipped without one): with 'mm' in fp32 against the overflow, the fp16
        rounding of 'scale' still holds the error near 1e-4; a target of 2e-5 moves 'scale'
        too, measured layer by layer, and the error reached is reported."""
        if self.gpus() == 0:
            self.skipTest("no GPU")
        path = self.overflow_model()
        x = np.random.default_rng(5).uniform(-1, 1, (4, 64)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        engine = self.path("target.tci")
        rc, out, err = run("--json", "--quiet", "--precision", "auto", "--accuracy-target",
                           2e-5, "-o", self.path("y.npy"), "--save-engine", engine, path,
                           self.path("x.npy"), timeout=300)
        self.assertEqual(rc, 0, err)
        auto = json.loads(out)["precision_auto"]
        self.assertEqual(auto["fp32_layers"], ["mm", "scale"])  # the overflow first
        self.assertLessEqual(auto["relative_l2"], 2e-5)
        self.assertEqual(auto["accuracy_target"], 2e-5)
        self.assertRegex(err, r"precision auto: 2 layers kept in fp32: 'mm', 'scale'\n")
        self.assertRegex(err, r"on the given inputs \(--accuracy-target 2e-05\); chosen in")
        # the engine file keeps the layers in their order, the error and the target
        rc, out, err = run("--json", "--quiet", "--load-engine", engine, self.path("x.npy"))
        self.assertEqual(rc, 0, err)
        loaded = json.loads(out)["precision_auto"]
        self.assertEqual(loaded["fp32_layers"], ["mm", "scale"])
        self.assertEqual(loaded["relative_l2"], auto["relative_l2"])
        self.assertEqual(loaded["accuracy_target"], 2e-5)
        self.assertRegex(err, r"precision auto \(engine file\): outputs' relative L2 error "
                              r"[0-9.e-]+ against the GPU fp32 engine on its calibration inputs "
                              r"\(--accuracy-target 2e-05\); chosen when the engine file was "
                              r"built\n")
        y = np.load(self.path("y.npy"))
        want = (x.astype(np.float64) * 2000) @ np.full((64, 8), 100.0)
        self.assertLessEqual(np.linalg.norm(y - want) / np.linalg.norm(want), 2e-5)

    def underflow_model(self):
        """y = x / (x @ W), W = 1e-9 on the diagonal: 1e9 in fp32; in fp16 W rounds to 0, so the
        product is 0 and the division Inf."""
        nodes = [helper.make_node("MatMul", ["x", "w"], ["t"], name="mm"),
                 helper.make_node("Div", ["x", "t"], ["y"], name="div")]
        inits = [numpy_helper.from_array(np.eye(64, dtype=np.float32) * 1e-9, "w")]
        return self.save(make_model(nodes, [value("x", [4, 64])], [value("y", [4, 64])],
                                    initializers=inits), "underflow.onnx")

    def test_precision_auto_walks_back_from_an_fp32_layer(self):
        """On the GPU (skipped without one): the Div that turns the underflowed product into Inf
        is kept in fp32 first and still gives Inf (it reads the fp16 zeros); the search then
        keeps the layer producing what it reads, and the output is finite."""
        if self.gpus() == 0:
            self.skipTest("no GPU")
        path = self.underflow_model()
        rc, out, err = run("--json", "--quiet", "--precision", "auto", "--random", 1,
                           "--output-dir", self.path("under"), path, timeout=300)
        self.assertEqual(rc, 0, err)
        auto = json.loads(out)["precision_auto"]
        self.assertEqual(auto["fp32_layers"], ["div", "mm"])
        self.assertRegex(err, r"precision auto: 2 layers kept in fp32: 'div', 'mm'\n")
        y = np.load(self.path("under/y.npy"))
        self.assertTrue(np.isfinite(y).all())
        self.assertLessEqual(np.abs(y / 1e9 - 1).max(), 1e-3)

    def test_precision_auto_cannot_converge(self):
        """On the GPU (skipped without one): an input past fp16's range overflows before any
        layer: no fp32 layer helps, and the failure says so."""
        if self.gpus() == 0:
            self.skipTest("no GPU")
        path = self.overflow_model()
        np.save(self.path("big.npy"), np.full((4, 64), 1e5, np.float32))
        self.assert_error(run("--quiet", "--precision", "auto", path, self.path("big.npy"),
                              timeout=300), 3,
                          r"--precision auto: engine input 0 holds NaN/Inf in fp16",
                          r"no layer kept out of fp16 avoids that")

    def test_unsupported_domain(self):
        node = helper.make_node("Relu", ["x"], ["y"], name="custom", domain="com.example")
        graph = helper.make_graph([node], "g", [value("x", [2])], [value("y", [2])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                        helper.make_opsetid("com.example", 1)])
        self.assert_error(run("--quiet", "--random", 1, self.save(model)), 3, "com.example")

    def test_opset_too_new(self):
        if not self.unary:
            self.skipTest("no unary op listed yet")
        node = helper.make_node(self.unary, ["x"], ["y"], name="act")
        graph = helper.make_graph([node], "g", [value("x", [2])], [value("y", [2])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 99)])
        self.assert_error(run("--quiet", "--random", 1, self.save(model)), 3, r"\b99\b")


    # the habits of trtexec / Polygraphy users -----------------------------------------------
    def test_flag_equals_value(self):
        """--flag=value and --flag value give the same run."""
        path = self.unary_model(["N", 3])
        x = self.rng.standard_normal((4, 3)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        for style in (["--shape=x:4x3", "--output=" + self.path("a.npy")],
                      ["--shape", "x:4x3", "--output", self.path("b.npy")],
                      ["--shapes=x:4x3", "-o", self.path("c.npy")]):
            rc, out, err = run("--quiet", "--backend=cpu", *style, path, self.path("x.npy"))
            self.assertEqual(rc, 0, f"{style}: {err}")
        for name in ("a", "b", "c"):
            np.testing.assert_allclose(np.load(self.path(f"{name}.npy")), self.expected(x),
                                       rtol=1e-6)
        self.assert_error(run("--bench=x", path), 2, "--bench wants a count, got 'x'")
        self.assert_error(run("--quiet", path, "--backend"), 2, "--backend needs a value")

    def test_shapes_several_inputs(self):
        """--shapes a:...,b:... as trtexec spells it; a comma inside a shape still separates dims
        the old way only when no NAME: follows."""
        nodes = [helper.make_node("Add", ["a", "b"], ["y"], name="add")]
        path = self.save(make_model(nodes, [value("a", ["N", 3]), value("b", ["N", 3])],
                                    [value("y", ["N", 3])]))
        rc, out, err = run("--json", "--shapes", "a:2x3,b:2,3", "--random", 5, "--backend",
                           "cpu", path)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["outputs"][0]["shape"], [2, 3])
        for bad in ("a:2x3,", "a:2x3,b", ",a:2x3"):
            self.assert_error(run("--shapes", bad, path), 2, re.escape(f"'{bad}'"))

    def test_output_dir_names_and_json(self):
        """Every output written under its own name (odd characters as _, clashes numbered), and
        the --json document valid and naming the files."""
        if not self.unary:
            self.skipTest("no unary op listed yet")
        nodes = [helper.make_node(self.unary, ["x"], ["out/a:0"], name="act"),
                 helper.make_node(self.unary, ["x"], ["out_a_0"], name="act2"),
                 helper.make_node(self.unary, ["x"], [".hidden"], name="act3")]
        path = self.save(make_model(nodes, [value("x", [2, 3])],
                                    [value("out/a:0", [2, 3]), value("out_a_0", [2, 3]),
                                     value(".hidden", [2, 3])]))
        x = self.rng.standard_normal((2, 3)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        out_dir = self.path("out")
        rc, out, err = run("--json", "--backend", "cpu", "--output-dir", out_dir, path,
                           self.path("x.npy"))
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["status"], "ok")
        self.assertEqual(doc["backend"], "cpu")
        files = [o["file"] for o in doc["outputs"]]
        self.assertEqual([os.path.basename(f) for f in files],
                         ["out_a_0.npy", "out_a_0_1.npy", "output_2.npy"])
        self.assertEqual(sorted(os.listdir(out_dir)), sorted(os.path.basename(f) for f in files))
        for f, o in zip(files, doc["outputs"]):
            np.testing.assert_allclose(np.load(f), self.expected(x), rtol=1e-6)
            self.assertEqual(o["shape"], [2, 3])
            self.assertEqual(o["top5"][1][0]["class"], int(np.argmax(self.expected(x)[1])))
        # -o with a folder is --output-dir
        rc, out, err = run("--quiet", "--backend", "cpu", "-o", self.path("dir") + "/", path,
                           self.path("x.npy"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(os.listdir(self.path("dir"))), 3)

    def test_json_run_bench_and_failure(self):
        path = self.unary_model([2, 10])
        rc, out, err = run("--json", "--backend", "cpu", "--random", 3, "--bench", 3,
                           "--warmup", 1, path)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)  # one valid document, nothing else on stdout
        self.assertEqual(doc["bench"]["runs"], 3)
        self.assertGreaterEqual(doc["bench"]["median_ms"], 0)
        self.assertEqual(len(doc["outputs"][0]["top5"]), 2)
        self.assertEqual(doc["nonfinite"]["count"], 0)
        rc, out, err = run("--json", "--info", path)
        self.assertEqual(rc, 0, err)
        info = json.loads(out)
        self.assertEqual(info["inputs"][0]["name"], "x")
        self.assertEqual(info["inputs"][0]["shape"], [2, 10])
        self.assertIn(self.unary, info["ops"])
        # a failure: the document says so, the message stays on stderr
        rc, out, err = run("--json", "--random", 1, "--shape", "nosuch:2x3", path)
        self.assertIn(rc, (1, 2), err)
        doc = json.loads(out)
        self.assertEqual(doc["status"], "failed")
        self.assertIn("nosuch", doc["error"])
        self.assertTrue(err.startswith("tcinfer: "), err)

    def test_verbose_log(self):
        path = self.unary_model([2, 3])
        rc, out, err = run("--quiet", "--backend", "cpu", "--random", 1, path)
        self.assertEqual((rc, err), (0, ""))  # the library prints nothing by itself
        rc, out, err = run("-v", "--quiet", "--backend", "cpu", "--random", 1, path)
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"tcinfer: info: loaded .*model\.onnx: 1 nodes")
        self.assertIn("CPU reference backend", err)

    def test_info_lists_every_unsupported_node(self):
        op = self.unsupported
        nodes = [helper.make_node(op, ["x"], ["t"], name="first"),
                 helper.make_node("TcinferNoSuchOp", ["t"], ["y"], name="second")]
        path = self.save(make_model(nodes, [value("x", [2, 2])], [value("y", None)], opset=17))
        err = self.assert_error(run("--info", path), 3, "2 nodes use what is not supported",
                                "node 'first'", "node 'second'", "TcinferNoSuchOp",
                                "tcinfer --list-ops lists")
        self.assertNotIn("tci_list_ops", err)

    def test_messages_use_flags(self):
        """The library speaks of tci_engine_options fields; the command of its flags."""
        path = self.unary_model(["N", 3])
        self.assert_error(run("--backend", "gpu", "--plan", path), (1, 2), "--shape")
        err = self.assert_error(run("--backend", "gpu", "--plan", path), (1, 2))
        self.assertNotIn("tci_engine_options", err)

    # --reference, --atol, --rtol: saved outputs as the baseline ------------------------------
    def reference_case(self, dims=(2, 5)):
        """A unary model, an input file and the numpy result (the reference)."""
        path = self.unary_model(list(dims))
        x = self.rng.uniform(-1, 1, dims).astype(np.float32)
        np.save(self.path("x.npy"), x)
        return path, self.path("x.npy"), self.expected(x)

    def two_output_model(self):
        """y = Op(x) and w = Op(x) under two names, with an input file."""
        if not self.unary:
            self.skipTest("no unary op listed yet")
        nodes = [helper.make_node(self.unary, ["x"], ["y"], name="a"),
                 helper.make_node(self.unary, ["x"], ["w"], name="b")]
        path = self.save(make_model(nodes, [value("x", [2, 5])],
                                    [value("y", [2, 5]), value("w", [2, 5])]))
        x = self.rng.uniform(-1, 1, (2, 5)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        return path, self.path("x.npy"), self.expected(x)

    def test_reference_bounds_pass_and_fail(self):
        path, x, ref = self.reference_case()
        np.save(self.path("ref.npy"), ref)
        cpu = ("--backend", "cpu", "--quiet")
        rc, out, err = run(*cpu, "--reference", self.path("ref.npy"), "--atol", "1e-6", path, x)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"compare 'y' \(fp32 CPU vs reference .*ref\.npy\): max abs")
        self.assertIn("atol 1e-06, rtol 0: 0 of 10 elements fail", out)
        # one element off by 0.5: atol, rtol and the relative L2 tolerance each catch it
        bad = ref.copy()
        bad[1, 3] += 0.5
        np.save(self.path("bad.npy"), bad)
        for bound in (["--atol", "1e-3"], ["--rtol", "0.01"], ["--atol", "0.1", "--rtol", "0.1"]):
            self.assert_error(run(*cpu, "--reference", self.path("bad.npy"), *bound, path, x), 1,
                              r"output 'y': 1 of 10 elements exceed \|got - ref\|",
                              r"the worst, at \[1, 3\], is")
        rc, out, err = run(*cpu, "--reference", self.path("bad.npy"), "--atol", "0.6", path, x)
        self.assertEqual(rc, 0, err)  # within the bound: |d| 0.5 <= 0.6
        self.assert_error(run(*cpu, "--reference", self.path("bad.npy"), "--tolerance", "1e-3",
                              path, x), 1, "relative L2 error .* exceeds --tolerance")
        rc, out, err = run(*cpu, "--json", "--reference", f"y={self.path('bad.npy')}",
                           "--atol", "1e-3", path, x)
        self.assertEqual(rc, 1, err)
        doc = json.loads(out)
        o = doc["compare"]["outputs"][0]
        self.assertEqual(doc["compare"]["baseline"], "reference")
        self.assertEqual((o["bound_failures"], o["elements"], o["within_bound"]), (1, 10, False))
        self.assertEqual(o["worst"]["index"], [1, 3])
        self.assertAlmostEqual(o["worst"]["ref"], float(bad[1, 3]), places=6)
        # a TensorProto .pb reference, and --compare given as well
        with open(self.path("ref.pb"), "wb") as f:
            f.write(numpy_helper.from_array(ref, "y").SerializeToString())
        rc, out, err = run(*cpu, "--compare", "--reference", self.path("ref.pb"), "--atol",
                           "1e-6", path, x)
        self.assertEqual(rc, 0, err)

    def test_reference_without_gpu(self):
        """--reference alone picks the backend that runs here; with no GPU, the CPU reference."""
        m = re.search(r"GPUs: (\d+)", run("--devices")[1])
        if not m or int(m.group(1)) > 0:
            self.skipTest("a GPU is present: the default backend is the GPU engine")
        path, x, ref = self.reference_case()
        np.save(self.path("ref.npy"), ref)
        rc, out, err = run("--quiet", "--compare", "--reference", self.path("ref.npy"), "--atol",
                           "1e-6", path, x)
        self.assertEqual(rc, 0, err)
        self.assertIn("fp32 CPU vs reference", out)

    def test_compare_says_what_works(self):
        """--compare without a GPU, or with --backend cpu: one message naming --reference."""
        path, x, _ = self.reference_case()
        err = self.assert_error(run("--compare", "--backend", "cpu", path, x), 2,
                                "needs a GPU", r"--reference FILE\|DIR")
        self.assertNotIn("drop --backend cpu", err)
        m = re.search(r"GPUs: (\d+)", run("--devices")[1])
        if m and int(m.group(1)) == 0:
            self.assertEqual(self.assert_error(run("--compare", path, x), 2), err)
            self.assertEqual(self.assert_error(run("--compare", "--backend", "gpu", path, x), 2),
                             err)

    def test_reference_errors(self):
        path, x, ref = self.two_output_model()
        np.save(self.path("y.npy"), ref)
        cpu = ("--backend", "cpu", "--quiet")
        self.assert_error(run(*cpu, "--reference", self.path("y.npy"), path, x), 2,
                          r"has 2 outputs \(y, w\): name the output of each")
        self.assert_error(run(*cpu, "--reference", f"nope={self.path('y.npy')}", path, x), 2,
                          "the model has no output 'nope' \\(y, w\\)")
        self.assert_error(run(*cpu, "--reference", f"y={self.path('y.npy')}", path, x), 2,
                          "no reference for output 'w': add --reference w=FILE")
        self.assert_error(run(*cpu, "--reference", f"y={self.path('y.npy')}",
                              "--reference", f"y={self.path('y.npy')}", path, x), 2,
                          "gives output 'y' twice")
        np.save(self.path("shape.npy"), ref.reshape(5, 2))
        self.assert_error(run(*cpu, "--reference", f"y={self.path('y.npy')}",
                              "--reference", f"w={self.path('shape.npy')}", path, x), 1,
                          r"shape\.npy' for output 'w' has shape 5x2; the output has 2x5")
        np.save(self.path("f64.npy"), ref.astype(np.float64))
        self.assert_error(run(*cpu, "--reference", f"y={self.path('y.npy')}",
                              "--reference", f"w={self.path('f64.npy')}", path, x), 1,
                          "for output 'w' is double; the output is float \\(save it as float32")
        np.save(self.path("i64.npy"), ref.astype(np.int64))
        self.assert_error(run(*cpu, "--reference", f"y={self.path('i64.npy')}",
                              "--reference", f"w={self.path('y.npy')}", path, x), 1,
                          "for output 'y' is int64; the output is float")
        self.assert_error(run(*cpu, "--reference", f"y={self.path('none.npy')}",
                              "--reference", f"w={self.path('y.npy')}", path, x), 1, "none.npy")
        # a folder: the outputs as --output-dir writes them, compared exactly (same backend)
        folder = self.path("saved")
        rc, out, err = run(*cpu, "--output-dir", folder, path, x)
        self.assertEqual(rc, 0, err)
        rc, out, err = run(*cpu, "--reference", folder, "--atol", "0", path, x)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.count("0 of 10 elements fail"), 2, out)
        np.save(os.path.join(folder, "extra.npy"), ref)
        self.assert_error(run(*cpu, "--reference", folder, path, x), 2,
                          "holds 'extra.npy', which is no output's file", r"\(y\.npy, w\.npy\)")
        os.remove(os.path.join(folder, "extra.npy"))
        with open(os.path.join(folder, "notes.txt"), "w") as f:
            f.write("run of today\n")
        self.assert_error(run(*cpu, "--reference", folder, path, x), 2, "holds 'notes.txt'")
        os.remove(os.path.join(folder, "notes.txt"))
        with open(os.path.join(folder, "w.pb"), "wb") as f:
            f.write(numpy_helper.from_array(ref, "w").SerializeToString())
        self.assert_error(run(*cpu, "--reference", folder, path, x), 2, "gives output 'w' twice")
        os.remove(os.path.join(folder, "w.npy"))
        rc, out, err = run(*cpu, "--reference", folder, "--atol", "0", path, x)
        self.assertEqual(rc, 0, err)  # w.pb stands for w.npy
        os.remove(os.path.join(folder, "w.pb"))
        self.assert_error(run(*cpu, "--reference", folder, path, x), 2,
                          "no reference for output 'w': the folder .* holds neither w.npy nor w.pb")
        self.assert_error(run(*cpu, "--reference", folder, "--reference", f"y={self.path('y.npy')}",
                              path, x), 2, "goes alone")
        # the outputs written over the reference before the comparison: refused
        for out in (["--output-dir", folder], ["-o", folder + "/"],
                    ["--output-dir", self.dir]):
            self.assert_error(run(*cpu, "--reference", folder if out[1] != self.dir else
                                  f"y={self.path('y.npy')}", *out, path, x), 2,
                              "would be written over the reference")
        self.assert_error(run("--backend", "cpu", "--reference", self.path("y.npy"), "-o",
                              self.path("y.npy"), *self.reference_case()[:2]), 2,
                          "would be written over the reference")

    def test_reference_option_errors(self):
        path, x, ref = self.reference_case()
        np.save(self.path("ref.npy"), ref)
        r = self.path("ref.npy")
        self.assert_error(run("--atol", "1e-3", path, x), 2, "--atol and --rtol go with --compare")
        self.assert_error(run("--rtol", "1e-3", path, x), 2, "--atol and --rtol go with --compare")
        for bad in ("-1", "x", "nan", ""):
            self.assert_error(run("--reference", r, "--atol", bad, path, x), 2,
                              "--atol wants a non-negative number")
        self.assert_error(run("--reference", r, "--rtol", "-0.5", path, x), 2, "--rtol wants")
        self.assert_error(run("--reference", r, "--baseline", "cpu", path, x), 2,
                          "--baseline and --reference both choose the baseline")
        self.assert_error(run("--reference", r, "--compare-layers", path, x), 2, "--compare-layers")
        self.assert_error(run("--compare-layers", "--atol", "1", path, x), 2, "--compare-layers")
        self.assert_error(run("--reference", "=x", path, x), 2, "--reference wants NAME=FILE")
        self.assert_error(run("--compare-layers=fused", path, x), 2,
                          r"--compare-layers takes no value .* or =unfused, got 'fused'")
        self.assert_error(run("--reference", r, "--compare-layers=unfused", path, x), 2,
                          "--compare-layers")

    # progress lines ----------------------------------------------------------------------------
    def test_progress_lines_not_a_tty(self):
        """stderr a pipe: plain lines at the quarters of --bench's runs; --quiet: none."""
        path = self.unary_model([2, 3])
        rc, out, err = run("--backend", "cpu", "--random", 1, "--bench", 8, "--warmup", 4, path)
        self.assertEqual(rc, 0, err)
        lines = err.splitlines()
        self.assertTrue(all(re.fullmatch(r"tcinfer: bench runs: \d+/12( \(\d+\.\d s\))?", line)
                            for line in lines), err)
        self.assertNotIn("\r", err)
        done = [int(re.search(r": (\d+)/", line).group(1)) for line in lines]
        self.assertEqual(done, sorted(done))
        self.assertTrue(1 <= len(lines) <= 4, err)
        self.assertRegex(lines[-1], r"12/12 \(\d+\.\d s\)$")
        rc, out, err = run("--quiet", "--backend", "cpu", "--random", 1, "--bench", 8, path)
        self.assertEqual((rc, err), (0, ""))

    def test_progress_line_on_a_tty(self):
        """stderr a terminal: one line redrawn in place (\\r) and cleared at the end."""
        import pty
        path = self.unary_model([2, 3])
        master, slave = pty.openpty()
        proc = subprocess.Popen([TCINFER, "--backend", "cpu", "--random", "1", "--bench", "40",
                                 "--warmup", "0", path], stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        err = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        os.close(master)
        out = proc.communicate(timeout=60)[0]
        self.assertEqual(proc.returncode, 0, err)
        text = err.decode()
        self.assertIn("\r\x1b[Ktcinfer: bench runs: 0/40", text)
        self.assertTrue(text.endswith("\r\x1b[K"), repr(text))  # nothing left on the line
        self.assertNotIn("\n", text)
        self.assertIn(b"bench: 40 runs", out)


    # --report ----------------------------------------------------------------------------------
    def test_report_names_and_escapes_every_node(self):
        """A node name that is HTML comes out as text, and every node is in the layer table."""
        names = ["first<b>&\"x'", "second/conv:0", ""]
        nodes = [helper.make_node("Relu", ["x"], ["h"], name=names[0]),
                 helper.make_node("Neg", ["h"], ["g"], name=names[1]),
                 helper.make_node("Abs", ["g"], ["y"], name=names[2])]
        path = self.save(make_model(nodes, [value("x", [2, 3])], [value("y", [2, 3])]))
        report = self.path("report.html")
        rc, out, err = run(path, "--backend", "cpu", "--random", "3", "--report", report)
        self.assertEqual(rc, 0, err)
        self.assertIn(f"report written to {report}", out)
        parser = check_report(self, report)
        self.assertEqual(parser.names, names)
        text = " ".join(parser.text)
        for flag in ("--compare", "--compare-layers", "--profile"):
            self.assertIn(flag, text)  # the omitted sections name the flag that fills them
        with open(report, encoding="utf-8") as f:
            self.assertNotIn("<b>&", f.read())
        rc, out, err = run(path, "--backend", "cpu", "--random", "3", "--report", report,
                           "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["report"], report)

    def test_report_errors(self):
        path = self.unary_model([1, 4])
        self.assert_error(run("--info", "--report", self.path("r.html"), path), 2, "--report")
        missing = os.path.join(self.dir, "no_such_folder", "r.html")
        self.assert_error(run(path, "--backend", "cpu", "--random", "1", "--report", missing), 1,
                          "cannot write the report", "no_such_folder")
        self.assert_error(run(path, "--random", "1", "--report"), 2, "--report needs a value")

    def test_plan_packed_attention(self):
        """The GPU plan of the generated packed-QKV attention model (no GPU needed): at batch 1
        each block is its projections and one fused attention step, the Gathers, Split, Slices,
        Transposes and Reshapes around it read through strides; at batch 2 too (the packed
        thirds seen as (seq, batch * heads, head) on the way are strided again once split back to
        (batch, heads, ...)), and torchvision's batch/sequence Transposes around the projections
        move onto the attention's reads and writes (rows.c): no copy at either batch, and the
        out_proj's step adds the residual (12 steps: the mask's three, then GEMM, attention,
        GEMM per block)."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.plan_attention)")
        path = os.path.join(MODELS_DIR, "packed_attention_block.onnx")
        for shape in ("1x16", "2x13"):
            with self.subTest(shape=shape):
                rc, out, err = run("--plan", "--json", "--shape", f"input:{shape}x128",
                                   "--shape", f"mask:{shape}", path)
                self.assertEqual(rc, 0, err)
                steps = json.loads(out)["gpu_plan"]["layers"]
                kernels = [s["kernel"] for s in steps]
                self.assertEqual(kernels.count("tcinfer flash_attention"), 3, out)
                self.assertNotIn("tcinfer strided_copy", kernels, out)
                self.assertNotIn("tcinfer gather", kernels, out)
                self.assertEqual(len(steps), 12, out)
                self.assertIn("Gemm+Reshape+Add", [s["ops"] for s in steps], out)

    def test_plan_onnx_attention(self):
        """The GPU plan of the generated ONNX-Attention model (no GPU needed): each of its two
        Attention nodes (3-D with is_causal and a bool mask; 4-D with an additive mask) is one
        fused attention step in fp16 and bf16, and the unfused steps in fp32 and tf32."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.plan_attention)")
        path = os.path.join(MODELS_DIR, "onnx_attention_block.onnx")
        for shape in ("1x16", "2x13"):
            for precision in ("fp16", "bf16", "fp32", "tf32"):
                with self.subTest(shape=shape, precision=precision):
                    rc, out, err = run("--plan", "--precision", precision, "--shape",
                                       f"input:{shape}x256", "--shape", f"mask:{shape}", path)
                    self.assertEqual(rc, 0, err)
                    fused = precision in ("fp16", "bf16")
                    self.assertEqual(out.count("tcinfer flash_attention"), 2 if fused else 0,
                                     out)
                    self.assertEqual(out.count("Attention Q K^T (unfused: fp32 storage"),
                                     0 if fused else 2, out)

    def attention_model(self, name, rank=4, batch=2, q_heads=4, kv_heads=4, q_len=5, kv_len=7,
                        head=32, v_head=None, mask=None, past=0, present=False, qk=False,
                        **attrs):
        """One ONNX Attention node (opset 23) and seeded inputs for it: mask None, "bool"
        (batch, 1, q, keys; row 1 of batch 0 keeps no key) or "float" (batch, 1, q, keys) of
        small values with -inf and -3.4e38 among them, row 1 of batch 0 all -3.4e38 and row 3
        all -inf. Returns the path and the inputs."""
        v_head = v_head or head
        rng = np.random.default_rng(len(name))
        total = past + kv_len

        def dims(heads, length, size):
            return [batch, heads, length, size] if rank == 4 else [batch, length, heads * size]

        feeds = {"q": dims(q_heads, q_len, head), "k": dims(kv_heads, kv_len, head),
                 "v": dims(kv_heads, kv_len, v_head)}
        feeds = {k: rng.uniform(-1, 1, d).astype(np.float32) for k, d in feeds.items()}
        names = ["q", "k", "v"]
        if mask == "bool":
            m = rng.uniform(0, 1, (batch, 1, q_len, total)) < 0.7
            m[..., 0] = True
            m[0, 0, 1, :] = False
            feeds["mask"] = m
        elif mask == "float":
            m = rng.uniform(-1, 1, (batch, 1, q_len, total)).astype(np.float32)
            m[rng.uniform(0, 1, m.shape) < 0.2] = -np.inf
            m[rng.uniform(0, 1, m.shape) < 0.2] = np.finfo(np.float32).min
            m[..., 0] = 0.0
            m[0, 0, 1, :] = np.finfo(np.float32).min
            m[0, 0, 3, :] = -np.inf
            feeds["mask"] = m
        names.append("mask" if mask else "")
        if past:
            feeds["past_key"] = rng.uniform(-1, 1, (batch, kv_heads, past, head)).astype(
                np.float32)
            feeds["past_value"] = rng.uniform(-1, 1, (batch, kv_heads, past, v_head)).astype(
                np.float32)
            names += ["past_key", "past_value"]
        while names and not names[-1]:
            names.pop()
        outs = ["y"] + (["present_key", "present_value"] if present or qk else [])
        outs += ["qk"] if qk else []
        if rank == 3:
            attrs.update(q_num_heads=q_heads, kv_num_heads=kv_heads)
        node = helper.make_node("Attention", names, outs, name="attention", **attrs)
        inputs = [value(k, list(x.shape), TensorProto.BOOL if x.dtype == bool
                        else TensorProto.FLOAT) for k, x in feeds.items()]
        out_dims = {"y": dims(q_heads, q_len, v_head) if rank == 3
                    else [batch, q_heads, q_len, v_head],
                    "present_key": [batch, kv_heads, total, head],
                    "present_value": [batch, kv_heads, total, v_head],
                    "qk": [batch, q_heads, q_len, total]}
        outputs = [value(o, out_dims[o]) for o in outs]
        path = self.save(make_model([node], inputs, outputs, opset=23), name + ".onnx")
        return path, feeds

    # name: (model arguments, whether fp16 and bf16 take the fused step)
    ATTENTION_CASES = {
        "gqa_head8_causal_bool": (dict(rank=3, q_heads=4, kv_heads=2, head=8, mask="bool",
                                       is_causal=1), False),
        "float_mask": (dict(mask="float"), True),
        "float_mask_softcap": (dict(mask="float", softcap=2.0, scale=0.2), False),
        "past_present_qk": (dict(q_heads=4, kv_heads=2, past=6, qk=True, is_causal=1,
                                 qk_matmul_output_mode=3), False),
        "v_head_other": (dict(head=40, v_head=24), False),
    }

    def test_plan_onnx_attention_unfused(self):
        """The GPU plans of ONNX Attention nodes (no GPU needed): in fp32 and tf32 the unfused
        steps (two GEMMs, no fused step), labelled with why; in fp16 and bf16 the fused step
        where it fits, the unfused steps elsewhere (grouped-query heads, head size 8, softcap,
        the caches, V's head size other than Q's)."""
        for name, (kwargs, fused) in self.ATTENTION_CASES.items():
            path, _ = self.attention_model(name, **kwargs)
            for precision in ("fp32", "tf32", "fp16", "bf16"):
                with self.subTest(model=name, precision=precision):
                    rc, out, err = run("--plan", "--precision", precision, path)
                    self.assertEqual(rc, 0, err)
                    takes_step = fused and precision in ("fp16", "bf16")
                    self.assertEqual(out.count("tcinfer flash_attention"), int(takes_step), out)
                    self.assertEqual(out.count("Attention Q K^T (unfused: "), 1 - takes_step, out)
                    self.assertEqual(out.count("Attention P V (unfused: "), 1 - takes_step, out)
                    if precision in ("fp32", "tf32"):
                        self.assertIn("(unfused: fp32 storage", out)

    def test_gpu_onnx_attention(self):
        """On the GPU (skipped without one): each Attention case of test_plan_onnx_attention_unfused
        in every precision against the CPU reference, every output (y, the present states, the
        qk output) finite and within the precision's relative L2 bound. A float mask's -inf and
        -3.4e38 drop their keys; a row of -inf alone is zeros; a row of -3.4e38 alone is the
        mean of V in fp32 and tf32, as on the CPU, and zeros in fp16 and bf16, whose storage
        holds the fill as -inf."""
        if self.gpus() == 0:
            self.skipTest("no GPU")
        bounds = {"fp32": 1e-4, "tf32": 2e-3, "fp16": 5e-3, "bf16": 4e-2}
        for name, (kwargs, _) in self.ATTENTION_CASES.items():
            path, feeds = self.attention_model(name, **kwargs)
            args = []
            for k, x in feeds.items():
                np.save(self.path(f"{name}_{k}.npy"), x)
                args.append(f"{k}={self.path(f'{name}_{k}.npy')}")
            results = {}
            for backend, precision in (("cpu", "fp32"), ("gpu", "fp32"), ("gpu", "tf32"),
                                       ("gpu", "fp16"), ("gpu", "bf16")):
                out_dir = self.path(f"{name}_{backend}_{precision}")
                os.makedirs(out_dir)
                # (the CPU reference is fp32 and takes no --precision)
                chosen = ["--precision", precision] if backend == "gpu" else []
                rc, out, err = run("--quiet", "--backend", backend, *chosen,
                                   "--output-dir", out_dir, path, *args, timeout=300)
                self.assertEqual(rc, 0, f"{name} {backend} {precision}: {err}")
                results[backend, precision] = {
                    f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)}
            want = results["cpu", "fp32"]
            for precision, bound in bounds.items():
                got = results["gpu", precision]
                for out_name, w in want.items():
                    with self.subTest(model=name, precision=precision, output=out_name):
                        g = got[out_name].astype(np.float64)
                        w = w.astype(np.float64)
                        self.assertTrue(np.all(np.isfinite(w)))
                        self.assertTrue(np.all(np.isfinite(g)))
                        if kwargs.get("mask") == "float" and out_name == "y":
                            # batch 0, query 1: every key -3.4e38
                            row = (0, slice(None), 1) if kwargs.get("rank", 4) == 4 else (0, 1)
                            if precision in ("fp16", "bf16"):
                                self.assertTrue(np.all(g[row] == 0.0))
                                g[row] = w[row] = 0.0
                            self.assertTrue(np.all(w[0, :, 3] == 0.0))  # every key -inf
                        rel = np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30)
                        self.assertLessEqual(rel, bound)

    def test_plan_llama(self):
        """RMSNormalization and RotaryEmbedding run on the GPU (--list-ops), and the GPU plans of
        the generated LLaMA blocks (no GPU needed): llama_mha_block's five RMSNormalizations and
        four RotaryEmbeddings are steps of their own, its two Attentions fused; llama_block's
        grouped-query Attention with heads of 16 (no fused variant) runs as unfused steps, each
        labelled with the reason."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.plan_llama)")
        rc, out, err = self.list_ops_result
        self.assertEqual(rc, 0, err)
        for op in ("RMSNormalization", "RotaryEmbedding"):
            self.assertRegex(out, rf"(?m)^{op} 23-\d+ cpu,gpu$")
        path = os.path.join(MODELS_DIR, "llama_mha_block.onnx")
        for shape in ("1x16", "2x13"):
            with self.subTest(shape=shape):
                rc, out, err = run("--plan", "--backend", "gpu", "--shape",
                                   f"input:{shape}x64", "--shape", f"mask:{shape}", path)
                self.assertEqual(rc, 0, err)
                self.assertEqual(out.count("tcinfer rmsnorm"), 5, out)
                self.assertEqual(out.count("tcinfer rotary_embedding"), 4, out)
                self.assertEqual(out.count("tcinfer flash_attention"), 2, out)
        path = os.path.join(MODELS_DIR, "llama_block.onnx")
        rc, out, err = run("--plan", "--backend", "gpu", "--shape", "input:2x13x64",
                           "--shape", "mask:2x13", path)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.count("tcinfer flash_attention"), 0, out)
        self.assertEqual(out.count("tcinfer rmsnorm"), 5, out)
        self.assertEqual(out.count("Attention Q K^T (unfused: grouped-query heads"), 2, out)

    def test_hf_attention_masks(self):
        """Hugging Face's bool attention masks (the generated bert_block and gpt2_block): the GPU
        plan (no GPU needed) is one fused attention step per block, no softmax left, reading
        BERT's query, key and value from one GEMM step with no copy between; the CPU
        backend matches onnxruntime on masks that leave query rows without a key (a sequence all
        padding; GPT-2's left padding under the causal mask), which the -inf fill's NaN guard
        makes zeros and the finite torch.finfo.min fill the mean of V."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.plan_hf_attention)")
        import onnxruntime as ort
        for name in ("bert_block", "gpt2_block"):
            path = os.path.join(MODELS_DIR, name + ".onnx")
            for shape in ("1x16", "2x13"):
                with self.subTest(model=name, shape=shape):
                    rc, out, err = run("--plan", "--shape", f"input:{shape}x128", "--shape",
                                       f"mask:{shape}", path)
                    self.assertEqual(rc, 0, err)
                    self.assertEqual(out.count("tcinfer flash_attention"), 2, out)
                    self.assertEqual(out.count("bool mask"), 2, out)
                    if name == "gpt2_block":  # the causal part a flag, the padding read
                        self.assertEqual(out.count("(attention, causal, bool mask)"), 2, out)
                    if name == "bert_block":
                        # the mask's Cast and And, 2 x (one GEMM for Q, K and V together,
                        # attention reading it in place, output projection)
                        self.assertIn("GPU plan: 8 steps", out)
                        steps = out[out.index("step  node"):].splitlines()[1:]
                        fused = [line.split()[2] for line in steps]
                        self.assertEqual(fused.count("MatMul+Add"), 2, out)
                        self.assertEqual(fused.count("MatMul+Add+Add"), 2, out)
                        self.assertNotIn("strided_copy", out)
                        # fp32 storage: the attention is its unfused steps, where the packed
                        # projection's Slices would be copies; three GEMMs a block instead
                        rc, fp32, err = run("--plan", "--precision", "fp32", "--shape",
                                            f"input:{shape}x128", "--shape", f"mask:{shape}",
                                            path)
                        self.assertEqual(rc, 0, err)
                        self.assertNotIn("Slice", fp32)
                        self.assertEqual(fp32.count("cuBLASLt GEMM"), 12, fp32)
                    self.assertNotIn("tcinfer softmax", out)
            x = self.rng.standard_normal((3, 13, 128)).astype(np.float32)
            mask = np.ones((3, 13), np.int64)
            mask[1, :] = 0   # no key at all
            mask[2, :4] = 0  # left padding: with the causal mask, rows 0-3 keep no key
            np.save(self.path("x.npy"), x)
            np.save(self.path("mask.npy"), mask)
            out_dir = self.path(name)
            os.makedirs(out_dir)
            rc, out, err = run("--quiet", "--backend", "cpu", "--output-dir", out_dir, path,
                               f"input={self.path('x.npy')}", f"mask={self.path('mask.npy')}")
            self.assertEqual(rc, 0, err)
            got = np.load(os.path.join(out_dir, "hidden_out.npy"))
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            want = sess.run(None, {"input": x, "mask": mask})[0]
            self.assertTrue(np.all(np.isfinite(want)), name)
            rel = np.linalg.norm(got - want) / np.linalg.norm(want)
            self.assertLess(rel, 1e-5, name)

    def test_shorter_sequence_than_built(self):
        """On the GPU (skipped without one): bert_block and gpt2_block built with --shape for
        1x128 run input files of 1x77 (the engine re-plans that sequence length): the output is
        1x77x128 and within the fp16 bound of onnxruntime, --compare builds its fp32 baseline
        at the files' shape, and a longer file is refused naming the built size."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.shorter_sequence)")
        if self.gpus() == 0:
            self.skipTest("no GPU")
        import onnxruntime as ort
        shape = ["--shape", "input:1x128x128", "--shape", "mask:1x128"]
        for name in ("bert_block", "gpt2_block"):
            with self.subTest(model=name):
                path = os.path.join(MODELS_DIR, name + ".onnx")
                x = self.rng.standard_normal((1, 77, 128)).astype(np.float32)
                mask = np.ones((1, 77), np.int64)
                mask[0, 70:] = 0
                np.save(self.path("x.npy"), x)
                np.save(self.path("mask.npy"), mask)
                files = [f"input={self.path('x.npy')}", f"mask={self.path('mask.npy')}"]
                rc, out, err = run("--quiet", *shape, "-o", self.path("y.npy"), path, *files,
                                   timeout=300)
                self.assertEqual(rc, 0, err)
                got = np.load(self.path("y.npy"))
                self.assertEqual(got.shape, (1, 77, 128))
                sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                want = sess.run(None, {"input": x, "mask": mask})[0]
                rel = np.linalg.norm(got - want) / np.linalg.norm(want)
                self.assertLess(rel, 5e-3, name)
                rc, out, err = run("--compare", "--tolerance", 5e-3, *shape, path, *files,
                                   timeout=300)
                self.assertEqual(rc, 0, out + err)
                np.save(self.path("x.npy"), np.zeros((1, 129, 128), np.float32))
                np.save(self.path("mask.npy"), np.ones((1, 129), np.int64))
                self.assert_error(run(*shape, path, *files, timeout=300), 1,
                                  r"input 'input' is 1x129x128: axis 1 is 129, more than the 128 "
                                  r"the engine was built for \(built 1x128x128; build for the "
                                  r"largest shape to run with --shape\)")

    def test_plan_gemm_epilogues(self):
        """The GPU plan of the generated transformer block (no GPU needed): each FC1 computes its
        bias and Gelu (the erf-expanded chain in the first block, the Gelu op in the second) and
        each output projection and FC2 its bias and residual Add in the GEMM's epilogue: 42
        steps, no element-wise Gelu or residual Add step left."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.plan_gemm_epilogues)")
        path = os.path.join(MODELS_DIR, "transformer_block.onnx")
        rc, out, err = run("--plan", "--shape", "input:2x16x64", "--shape", "mask:2x16", path)
        self.assertEqual(rc, 0, err)
        self.assertIn("GPU plan: 42 steps", out)
        steps = out[out.index("step  node"):].splitlines()[1:]
        fused = [line.split()[2] for line in steps]
        self.assertEqual(fused.count("MatMul+Add+Add"), 4, out)
        self.assertEqual(fused.count("MatMul+Add+Gelu"), 1, out)
        self.assertEqual(fused.count("MatMul+Add+Div+Erf+Add+Mul+Mul"), 1, out)
        # no element-wise step left for a Gelu, and the only Adds are LayerNorm's decomposition
        self.assertFalse([f for f in fused if f.startswith(("Gelu", "Div+Erf"))], out)
        self.assertEqual([f for f in fused if f.startswith("Add")], ["Add+Sqrt", "Add"], out)

    def test_plan_transformer_layers(self):
        """The GPU plans of the generated GPT-2 and ViT layers (no GPU needed): each Gemm
        followed by a Reshape of its rows takes the residual Add after it (the output
        projection, FC2) and the MLP's expanded Gelu (tanh form: Pow(x, 3) in GPT-2's first
        layer, x * (x * x) in its second; erf form in ViT's) into its epilogue; no element-wise
        step is left for a Gelu or a residual Add, nor for mask nodes the attention does not
        read; ViT's query, key and value Gemms are one GEMM step (pass_merge_sibling_gemms)."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.plan_transformer_layers)")
        cases = {
            # the mask's Cast (the And with the causal constant and the Expand are unread: the
            # attention reads the padding and takes the causal flag), 5 LayerNorms, 2 x (4
            # GEMMs, attention)
            "gpt2_layers": (16, {"Gemm+Reshape+Add": 4,
                                 "Gemm+Reshape+Pow+Mul+Add+Mul+Tanh+Mul+Add+Mul": 1,
                                 "Gemm+Reshape+Mul+Mul+Mul+Add+Mul+Tanh+Add+Mul+Mul": 1}),
            # 5 LayerNorms, 2 x (4 GEMMs: one for Q, K and V together, attention)
            "vit_layers": (15, {"Gemm+Reshape+Add": 4, "Gemm+Reshape+Div+Erf+Add+Mul+Mul": 2,
                                "Gemm": 2}),
        }
        for name, (count, labels) in cases.items():
            with self.subTest(model=name):
                shapes = ["--shape", "input:2x16x128"]
                if name == "gpt2_layers":
                    shapes += ["--shape", "mask:2x16"]
                rc, out, err = run("--plan", *shapes, os.path.join(MODELS_DIR, name + ".onnx"))
                self.assertEqual(rc, 0, err)
                self.assertIn(f"GPU plan: {count} steps", out)
                steps = out[out.index("step  node"):].splitlines()[1:]
                fused = [line.split()[2] for line in steps]
                for label, n in labels.items():
                    self.assertEqual(fused.count(label), n, out)
                gelu = [f for f in fused if "Tanh" in f or "Erf" in f]
                self.assertEqual(len(gelu), 2, out)
                self.assertTrue(all(f.startswith("Gemm+Reshape+") for f in gelu), out)
                left = [f for f in fused if f.startswith(("Add", "Mul", "Pow", "Div", "Tanh",
                                                          "Reshape")) and "Softmax" not in f]
                self.assertFalse(left, out)
                self.assertFalse([f for f in fused if f in ("And", "Expand")], out)

    def test_plan_compare_layers(self):
        """--compare-layers on the GPU plan of resnet_mini (no GPU needed): the engine as it
        ships has the normal build's steps (nodes, fused chains, kernels, layouts and precision),
        one output per step after the model's own, each named after the last node it fuses (the
        Relu of Conv+BatchNormalization+Add+Relu); =unfused plans every node on its own."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.compare_layers)")
        path = os.path.join(MODELS_DIR, "resnet_mini.onnx")
        plans = {}
        for mode in ([], ["--compare-layers"], ["--compare-layers=unfused"]):
            rc, out, err = run("--plan", "--json", *mode, path)
            self.assertEqual(rc, 0, err)
            plans[" ".join(mode)] = json.loads(out)
        plain, shipped = plans[""], plans["--compare-layers"]
        unfused = plans["--compare-layers=unfused"]
        steps = plain["gpu_plan"]["layers"]
        self.assertEqual(shipped["gpu_plan"]["layers"], steps)
        # unfused, each node after optimisation is a step of its own
        self.assertEqual(len(unfused["gpu_plan"]["layers"]), unfused["nodes"])
        self.assertGreater(unfused["nodes"], len(steps) + 30)
        names = [o["name"] for o in shipped["outputs"]]
        self.assertEqual(names[0], "fc_out")
        self.assertEqual(len(names), len(steps))  # fc's step writes the model's output
        self.assertLessEqual(set(names), {o["name"] for o in unfused["outputs"]})
        graph = onnx.load(path, load_external_data=False).graph
        producer = {n.output[0]: n for n in graph.node}
        residual = [s for s in steps if s["ops"] == "Conv+BatchNormalization+Add+Relu"]
        self.assertEqual(len(residual), 4)
        for s in residual:
            # the Relu after the Add the step's BatchNormalization feeds
            bn = next(n for n in graph.node if n.op_type == "BatchNormalization" and
                      producer[n.input[0]].name == s["node"])
            add = next(n for n in graph.node if n.op_type == "Add" and bn.output[0] in n.input)
            relu = next(n for n in graph.node if n.op_type == "Relu" and add.output[0] in n.input)
            self.assertIn(relu.output[0], names)
            self.assertNotIn(add.output[0], names)
            self.assertNotIn(bn.output[0], names)

    def test_gpu_compare_layers(self):
        """On the GPU (skipped without one): --compare-layers compares resnet_mini as it ships
        against the CPU reference, one layer per GPU step of the plan, each fused step at its
        last node's tensor and naming every node it covers; every error finite and within 1e-2
        relative L2 (--tolerance, so the run itself fails past it). The bound: each step rounds
        its inputs, weights and output to fp16 once (2^-11 relative each, fp32 accumulation),
        and the deepest path has 14 steps: the errors add up to about 14 * 3 * 2^-11 = 2e-2
        at worst and 5e-3 by root sum of squares; the model's output is held to 5e-3 in
        scripts/gpu_suite.sh. =unfused compares every node of the unfused engine."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.compare_layers)")
        if self.gpus() == 0:
            self.skipTest("no GPU")
        path = os.path.join(MODELS_DIR, "resnet_mini.onnx")
        rc, out, err = run("--plan", "--json", "--compare-layers", path)
        self.assertEqual(rc, 0, err)
        planned = json.loads(out)
        steps = planned["gpu_plan"]["layers"]
        results = {}
        for mode in ("--compare-layers", "--compare-layers=unfused"):
            rc, out, err = run("--json", "--random", "0", "--tolerance", "1e-2", mode, path,
                               timeout=300)
            self.assertEqual(rc, 0, f"{mode}: {err}\n{out}")
            results[mode] = json.loads(out)["compare"]
        shipped = results["--compare-layers"]
        layers = shipped["layers"]
        self.assertEqual([l["name"] for l in layers],
                         [o["name"] for o in planned["outputs"]])
        self.assertEqual(len(layers), len(steps))
        self.assertNotIn("not_in_baseline", shipped)
        by_first = {l["step_nodes"][0]: l for l in layers}
        for s in steps:
            with self.subTest(step=s["node"], ops=s["ops"]):
                layer = by_first[s["node"]]
                self.assertEqual(layer["step_nodes"][-1], layer["node"])
                self.assertEqual(layer["name"], layer["node"] + "_out")
                if "+" in s["ops"]:
                    self.assertEqual(layer["step_ops"], s["ops"])
                    self.assertEqual(len(layer["step_nodes"]), s["ops"].count("+") + 1)
                if s["ops"] == "Conv+BatchNormalization+Add+Relu":
                    self.assertEqual(layer["op"], "Relu")
        for mode, result in results.items():
            for layer in result["layers"]:
                with self.subTest(mode=mode, layer=layer["name"]):
                    self.assertEqual(layer["non_finite"], 0)
                    self.assertTrue(math.isfinite(layer["relative_l2"]))
                    self.assertLessEqual(layer["relative_l2"], 1e-2)
                    self.assertTrue(layer["within_tolerance"])
            self.assertIsNone(result["first_over"])
        self.assertGreater(len(results["--compare-layers=unfused"]["layers"]), len(layers) + 25)

    def test_report_generated_models(self):
        """--report on the CPU backend for every generated model: well-formed, self-contained,
        finite, and every ONNX node of the model named in the layer table."""
        if not MODELS_DIR:
            self.skipTest("needs --models-dir (ctest runs it as cli.report)")
        models = sorted(glob.glob(os.path.join(MODELS_DIR, "*.onnx")))
        self.assertGreater(len(models), 5, MODELS_DIR)
        for model in models:
            with self.subTest(model=os.path.basename(model)):
                report = self.path(os.path.basename(model) + ".html")
                rc, out, err = run(model, "--backend", "cpu", "--random", "0", "--quiet",
                                   "--report", report, timeout=240)
                self.assertEqual(rc, 0, err)
                parser = check_report(self, report)
                graph = onnx.load(model, load_external_data=False).graph
                self.assertEqual(parser.names, [n.name for n in graph.node])


def main():
    global TCINFER, DEMO_DIR, MODELS_DIR
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tcinfer", required=True, help="path of the tcinfer binary")
    p.add_argument("--demo-dir", help="models/demo, to check the committed demo model")
    p.add_argument("--models-dir", help="the generated models, for the --report check of each")
    args, rest = p.parse_known_args()
    TCINFER = os.path.abspath(args.tcinfer)
    DEMO_DIR = args.demo_dir
    MODELS_DIR = args.models_dir
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
