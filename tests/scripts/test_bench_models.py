#!/usr/bin/env python3
"""bench/bench_models.py without torch or a GPU: the --family/--models/--batches handling, the
transformer targets and accuracy verdicts on made-up numbers, the CNN baseline check, the token
models' input files, and two runs through the real tcinfer on tiny generated models standing in
for the exported ones (a token model with input_ids and attention_mask, and a convolution):
--bench on the CPU backend with the .npy inputs the GPU run passes, and a whole --dry-run
(GPU plans of every timed shape, report and JSON), and a timing run whose every cell
fails (no GPU) still writing its report and JSON, and that report rendered again from the JSON
(whole, and from two parts, one cut short)."""
import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
# the same checks wherever torch happens to be installed: here it never imports
sys.modules["torch"] = sys.modules["torchvision"] = None
import bench_models  # noqa: E402
import transformer_bench as tb  # noqa: E402


def expect_usage_error(argv, text):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            bench_models.parse_args(argv)
        except SystemExit as e:
            assert e.code == 2, e.code
            assert text in err.getvalue(), err.getvalue()
            return
    raise AssertionError("%s accepted" % argv)


def check_arguments():
    a = bench_models.parse_args([])
    assert a.models == list(bench_models.MODELS), a.models  # the CNN run as before
    assert bench_models.model_batches(a, "resnet50") == [1, 32, 256]
    assert bench_models.kernel_families(a, "resnet50") == ["auto", "cudnn"]
    a = bench_models.parse_args(["--family", "transformer"])
    assert a.models == list(tb.MODELS), a.models
    assert set(tb.MODELS) == {"vit_b_16", "deit_small", "swin_t", "convnext_tiny",
                              "bert_base_128", "bert_base_384", "gpt2_512"}
    assert bench_models.model_batches(a, "vit_b_16") == [1, 64]
    assert bench_models.model_batches(a, "bert_base_384") == [1, 32]
    assert bench_models.model_batches(a, "gpt2_512") == [1, 64]
    assert bench_models.kernel_families(a, "bert_base_128") == ["auto"]
    a = bench_models.parse_args(["--family", "all"])
    assert a.models == list(bench_models.MODELS) + list(tb.MODELS)
    a = bench_models.parse_args(["--models", "resnet50,gpt2_512", "--batches", "2,4",
                                 "--kernels", "wmma"])
    assert a.models == ["resnet50", "gpt2_512"]
    assert bench_models.model_batches(a, "gpt2_512") == [2, 4]
    assert bench_models.kernel_families(a, "resnet50") == ["wmma"]
    expect_usage_error(["--family", "cnn", "--models", "bert_base_128"],
                       "--models bert_base_128: not in --family cnn")
    expect_usage_error(["--models", "bert"], "unknown model(s) bert")
    expect_usage_error(["--family", "rnn"], "invalid choice: 'rnn'")
    # the token models' inputs: ids and mask at the sequence length, images as before
    assert tb.shape_args(tb.SPEC["bert_base_384"].desc, 32) == [
        "--shape", "input_ids:32x384", "--shape", "attention_mask:32x384"]
    assert tb.shape_args(tb.SPEC["swin_t"].desc, 64) == ["--shape", "input:64x3x224x224"]


def row(model, batch, pt_ms, tc_ms):
    def cell(ms):
        return {"error": "boom"} if ms is None else {"median_ms": ms}
    return {"model": model, "batch": batch, "pytorch": cell(pt_ms), "tcinfer": cell(tc_ms),
            "by_family": {}}


def check_targets():
    lines = tb.checks([row("vit_b_16", 1, 1.0, 0.7), row("vit_b_16", 64, 15.0, 10.0),
                       row("bert_base_384", 1, 1.0, 0.71), row("bert_base_384", 32, 9.0, 6.1),
                       row("gpt2_512", 1, 2.0, None), row("gpt2_512", 64, 30.0, 10.0)])
    assert lines == [
        "PASS: vit_b_16 batch 1 latency tcinfer/PyTorch 0.70 <= 0.7 (0.700 vs 1.000 ms)",
        "PASS: vit_b_16 batch 64 throughput tcinfer/PyTorch 1.50 >= 1.5 (6400 vs 4267 img/s)",
        "FAIL: bert_base_384 batch 1 latency tcinfer/PyTorch 0.71 <= 0.7 (0.710 vs 1.000 ms)",
        "FAIL: bert_base_384 batch 32 throughput tcinfer/PyTorch 1.48 >= 1.5 (5246 vs 3556 seq/s)",
        "n/a : gpt2_512 batch 1 latency tcinfer/PyTorch <= 0.7 (no result)",
        "PASS: gpt2_512 batch 64 throughput tcinfer/PyTorch 3.00 >= 1.5 (6400 vs 2133 seq/s)",
    ], "\n".join(lines)
    table = tb.timing_table([row("gpt2_512", 64, 30.0, 10.0), row("gpt2_512", 1, None, 1.0)],
                            bench_models.fmt_ms, bench_models.markdown_table)
    assert "| gpt2_512 | 64 | 512 | 30.00 (2133 seq/s) | 10.00 (6400 seq/s) | 3.00x |" in table, table
    assert "| gpt2_512 | 1 | 512 | error: boom | 1.000 (1000 seq/s) | - |" in table, table


def check_accuracy_verdicts():
    good = {"rel_l2": 1.0e-3, "pytorch_fp16_rel_l2": 1.2e-3, "top1": 4, "pytorch_top1": 4,
            "problem": None, "ok": True}
    worse = {"rel_l2": 2e-3, "pytorch_fp16_rel_l2": 1e-3,
             "problem": "rel L2 0.002 > 1.1 x PyTorch fp16's 0.001", "ok": False}
    acc = [("vit_b_16", good), ("bert_base_128", worse), ("gpt2_512", {"error": "tcinfer: x"}),
           ("swin_t", {"rel_l2": 2e-6, "ok": True, "problem": None})]
    lines = tb.accuracy_checks(acc)
    assert lines[0] == ("PASS: vit_b_16 rel L2 against PyTorch fp32 0.001, PyTorch fp16's "
                        "0.0012, top-1 4/4"), lines[0]
    assert lines[1].startswith("FAIL: bert_base_128 rel L2 against PyTorch fp32 0.002, PyTorch "
                               "fp16's 0.001 (rel L2 0.002 > 1.1 x"), lines[1]
    assert lines[2] == "FAIL: gpt2_512 accuracy: tcinfer: x", lines[2]
    assert lines[3].startswith("PASS: swin_t tcinfer CPU reference"), lines[3]
    table = tb.accuracy_table(acc, bench_models.markdown_table)
    assert "| vit_b_16 | 0.001 | 0.0012 | 4/4 vs 4/4 | PASS |" in table, table
    assert "| bert_base_128 | 0.002 | 0.001 | - | FAIL: rel L2 0.002 > 1.1" in table, table


def check_baseline(tmp):
    path = os.path.join(ROOT, "bench", "cnn_baseline.json")
    with open(path) as f:
        base = json.load(f)
    assert {(r["model"], r["batch"]) for r in base["rows"]} == {
        (m, b) for m in bench_models.MODELS for b in (1, 256)}
    results = [row("resnet50", 1, 1.0, 0.357 * 1.05), row("resnet50", 32, 1.0, 9.0),
               row("vgg16", 256, 30.0, 15.01 * 1.07), row("mobilenet_v2", 1, 1.0, None)]
    lines = bench_models.baseline_checks(results, path)
    assert len(lines) == 3, lines  # batch 32 has no earlier time
    assert lines[0].startswith("PASS: resnet50 batch 1 no slower than before: 0.375 ms <= "
                               "0.357 ms x1.06"), lines[0]
    assert lines[1].startswith("FAIL: vgg16 batch 256"), lines[1]
    assert lines[2].startswith("n/a : mobilenet_v2 batch 1"), lines[2]


def token_model(path, vocab=50, width=8):
    """input_ids, attention_mask [batch, seq] int64 -> embedding rows times the mask."""
    emb = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((vocab, width)).astype(np.float32), "emb")
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["e"]),
             helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["m", "axis"], ["mu"]),
             helper.make_node("Mul", ["e", "mu"], ["output_0"])]
    graph = helper.make_graph(
        nodes, "tokens",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("output_0", TensorProto.FLOAT, ["batch", "seq", width])],
        [emb, numpy_helper.from_array(np.array([2], dtype=np.int64), "axis")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def conv_model(path):
    w = numpy_helper.from_array(np.full((8, 3, 3, 3), 0.1, dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w"], ["logits"], pads=[1, 1, 1, 1])], "conv",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 8, 224, 224])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


class Ids:
    """What timing_inputs gives (CPU tensors): anything np.asarray takes."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a


def check_tcinfer_runs(tcinfer, tmp):
    path = os.path.join(tmp, "bert_base_128.onnx")
    token_model(path)
    desc = {"input_ids": ("ids", (16,), 50), "attention_mask": ("mask", (16,), 0)}
    x = {"input_ids": Ids(np.random.default_rng(1).integers(0, 50, (3, 16))),
         "attention_mask": Ids(np.ones((3, 16), dtype=np.int64))}
    shapes, inputs = tb.tcinfer_input_args(desc, 3, os.path.join(tmp, "inputs"), x)
    assert inputs == ["input_ids=%s" % os.path.join(tmp, "inputs", "input_ids_b3.npy"),
                      "attention_mask=%s" % os.path.join(tmp, "inputs", "attention_mask_b3.npy")]
    saved = np.load(os.path.join(tmp, "inputs", "input_ids_b3.npy"))
    assert saved.dtype == np.int64 and saved.shape == (3, 16), (saved.dtype, saved.shape)
    # the GPU run's call on the CPU backend: int64 files in, one bench line out
    r = bench_models.tcinfer_bench_inputs(tcinfer, path, 3, shapes, inputs, 5, 1, 60, "auto",
                                          backend="cpu")
    assert "error" not in r, r
    assert r["batch"] == 3 and r["runs"] == 5 and r["median_ms"] > 0, r
    # a mask input with the wrong name is tcinfer's error, carried into the cell
    r = bench_models.tcinfer_bench_inputs(tcinfer, path, 3, shapes, ["mask=" + inputs[1][15:]],
                                          5, 1, 60, "auto", backend="cpu")
    assert "error" in r and "mask" in r["error"], r

    # a whole dry run without torch: the files exist, so nothing is exported
    conv_model(os.path.join(tmp, "resnet50.onnx"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = bench_models.main(["--dry-run", "--models", "resnet50,bert_base_128", "--out", tmp,
                                "--tcinfer", tcinfer, "--batches", "1,2",
                                "--json", os.path.join(tmp, "r.json"),
                                "--report", os.path.join(tmp, "r.md")])
    assert rc == 0, out.getvalue()
    with open(os.path.join(tmp, "r.json")) as f:
        doc = json.load(f)
    assert doc["dry_run"] == [{"model": m, "batch": b, "ok": True}
                              for m in ("resnet50", "bert_base_128") for b in (1, 2)], doc
    with open(os.path.join(tmp, "r.md")) as f:
        md = f.read()
    assert "- PASS: bert_base_128 batch 2 GPU plan" in md, md
    # a plan that cannot be built fails the dry run and names the model
    with open(os.path.join(tmp, "bert_base_384.onnx"), "wb") as f:
        f.write(b"not a model")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = bench_models.main(["--dry-run", "--models", "bert_base_384", "--out", tmp,
                                "--tcinfer", tcinfer, "--json", os.path.join(tmp, "bad.json")])
    assert rc == 1
    with open(os.path.join(tmp, "bad.json")) as f:
        doc = json.load(f)
    assert [r["batch"] for r in doc["dry_run"]] == [1, 32] and all(
        "error" in r for r in doc["dry_run"]), doc
    assert doc["checks"][0].startswith("FAIL: bert_base_384 batch 1 GPU plan: "), doc["checks"]

    # a timing run without torch or a GPU: every cell is an error, the report and JSON say so
    conv_model(os.path.join(tmp, "vit_b_16.onnx"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = bench_models.main(["--no-pytorch", "--models", "vit_b_16,bert_base_128", "--out",
                                tmp, "--tcinfer", tcinfer, "--json", os.path.join(tmp, "t.json"),
                                "--report", os.path.join(tmp, "t.md")])
    assert rc == 1, out.getvalue()
    with open(os.path.join(tmp, "t.json")) as f:
        doc = json.load(f)
    assert doc["complete"] is True
    assert [(r["model"], r["batch"]) for r in doc["rows"]] == [
        ("vit_b_16", 1), ("vit_b_16", 64), ("bert_base_128", 1), ("bert_base_128", 32)], doc
    assert all(r["family"] == "transformer" and r["pytorch"] is None and "error" in r["tcinfer"]
               for r in doc["rows"]), doc["rows"]
    assert doc["rows"][2]["tcinfer"]["error"].startswith("token inputs need torch"), doc["rows"]
    with open(os.path.join(tmp, "t.md")) as f:
        md = f.read()
    assert "## Transformers" in md and "| vit_b_16 | 64 | - | - | error: " in md, md
    assert "- n/a : bert_base_128 batch 32 throughput tcinfer/PyTorch >= 1.5 (no result)" in md, md

    # the same report again from the JSON file, and from two parts, one cut short
    with contextlib.redirect_stdout(io.StringIO()):
        rc = bench_models.main(["--from-json", os.path.join(tmp, "t.json"), "--report",
                                os.path.join(tmp, "again.md")])
    assert rc == 0
    with open(os.path.join(tmp, "again.md")) as f:
        again = f.read()

    def body(text):
        return [line for line in text.splitlines() if not line.startswith("Run time")]
    assert body(again) == body(md), again
    part1, part2 = dict(doc, rows=doc["rows"][:2]), dict(doc, rows=doc["rows"][2:3])
    part2["complete"] = False
    for name, part in (("p1.json", part1), ("p2.json", part2)):
        with open(os.path.join(tmp, name), "w") as f:
            json.dump(part, f)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = bench_models.main(["--from-json", "%s,%s" % (os.path.join(tmp, "p1.json"),
                                                          os.path.join(tmp, "p2.json"))])
    assert rc == 0
    text = out.getvalue()
    assert "| vit_b_16 | 64 |" in text and "| bert_base_128 | 1 |" in text, text
    assert "| bert_base_128 | 32 |" not in text, text
    assert "Incomplete (the run was cut short): %s." % os.path.join(tmp, "p2.json") in text, text


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tcinfer", required=True)
    args = p.parse_args()
    check_arguments()
    check_targets()
    check_accuracy_verdicts()
    with tempfile.TemporaryDirectory() as tmp:
        check_baseline(tmp)
        check_tcinfer_runs(os.path.abspath(args.tcinfer), tmp)
    print("bench_models.py: 5 checks passed")


if __name__ == "__main__":
    main()
