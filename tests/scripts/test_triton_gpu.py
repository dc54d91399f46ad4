#!/usr/bin/env python3
"""bench/triton_gpu.py and bench/triton_load.py without a GPU or a server: the --gpus,
--concurrency and --model handling, the configuration of a two-GPU instance group, the inputs of
an image and of a token model (ids, mask), a whole --dry-run on tiny generated models standing
in for ResNet-50 and BERT, the CLI command of the accuracy check run through the real tcinfer on
the CPU backend, and the load generator's inputs."""
import argparse
import contextlib
import io
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
    assert a.gpus == [0] and a.concurrency == [1, 16, 128] and a.instances == 2, vars(a)
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
                         "--max-batch", "32", "--concurrency", "1,16,128", "--dry-run"])
    text = out.getvalue()
    for name in ("resnet_like", "bert_like"):
        config = open(os.path.join(work, "repo", name, "config.pbtxt")).read()
        assert "instance_group [{ kind: KIND_GPU, count: 3, gpus: [0, 1] }]" in config, config
        assert "max_batch_size: 32" in config, config
        assert 'string_value: "fp16"' in config, config
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tcinfer", required=True)
    args = p.parse_args()
    check_arguments()
    check_load_inputs()
    with tempfile.TemporaryDirectory() as tmp:
        image, tokens = check_inputs(tmp)
        check_dry_run(tmp, os.path.abspath(args.tcinfer), image, tokens)
        check_cli_command(tmp, os.path.abspath(args.tcinfer), tokens)
    print("triton_gpu.py: 5 checks passed")


if __name__ == "__main__":
    main()
