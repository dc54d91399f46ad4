"""The tcinfer Python package on the demo model (CPU backend). TCINFER_LIBRARY names the built
libtcinfer.so; TCI_DEMO_DIR the folder of tiny_cnn.onnx."""
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import tcinfer

DEMO = pathlib.Path(os.environ.get("TCI_DEMO_DIR", pathlib.Path(__file__).parents[2] / "models/demo"))
MODEL = str(DEMO / "tiny_cnn.onnx")
PYTHON_DIR = pathlib.Path(__file__).parents[1]


@pytest.fixture(scope="module")
def x():
    return np.load(DEMO / "input.npy")


@pytest.fixture(scope="module")
def engine():
    with tcinfer.Engine(MODEL) as e:
        yield e


def test_version_is_the_headers():
    header = (PYTHON_DIR.parent / "include/tcinfer.h").read_text()
    parts = [header.split(f"#define TCI_VERSION_{p} ")[1].split()[0]
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert tcinfer.version() == ".".join(parts)


def test_engine_options_declare_the_whole_c_struct():
    """tci_engine_options_init writes the C struct's size: the ctypes struct must not be
    smaller (a field added to the header and not here would be written past its end)."""
    import ctypes
    from tcinfer import _lib
    size = ctypes.sizeof(_lib.EngineOptions)
    buf = (ctypes.c_ubyte * (size + 256))(*([0xcd] * (size + 256)))
    _lib.tci_engine_options_init(ctypes.cast(buf, ctypes.POINTER(_lib.EngineOptions)))
    c_size = ctypes.c_size_t.from_buffer(buf).value
    assert c_size == size


def test_engine_describes_inputs_and_outputs(engine, x):
    assert len(engine.inputs) == 1 and len(engine.outputs) == 1
    assert engine.inputs[0].dtype == np.float32
    assert engine.inputs[0].shape == x.shape
    assert engine.outputs[0].name == "probabilities_out"
    stats = engine.stats()
    assert stats["num_nodes"] > 0 and stats["num_parameters"] > 0


def test_run_matches_the_expected_output(engine, x):
    (probs,) = engine.run([x])
    expected = np.load(DEMO / "expected_output.npy")
    assert probs.dtype == np.float32 and probs.shape == expected.shape
    np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-6)
    assert int(probs[0].argmax()) == 6


def test_inputs_by_name_and_as_one_array(engine, x):
    name = engine.inputs[0].name
    a = engine.run({name: x})[0]
    b = engine.run(x)[0]
    assert np.array_equal(a, b)


def test_outputs_are_copies(engine, x):
    first = engine.run(x)[0]
    kept = first.copy()
    engine.run(x * 0.5)
    assert np.array_equal(first, kept)


def test_wrong_input_name_lists_the_valid_ones(engine, x):
    with pytest.raises(tcinfer.TcinferError, match=engine.inputs[0].name):
        engine.run({"nope": x})


def test_wrong_dtype_is_an_error(engine, x):
    with pytest.raises(tcinfer.TcinferError, match="float32"):
        engine.run(x.astype(np.float64))


def test_wrong_shape_carries_the_library_message(engine, x):
    with pytest.raises(tcinfer.TcinferError) as err:
        engine.run(x[..., :-1])
    assert err.value.status_name == "TCI_ERR_INVALID_ARGUMENT"
    assert str(err.value)  # tci_last_error()'s text


def test_missing_file_is_an_io_error(tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(tcinfer.TcinferError) as err:
        tcinfer.Engine(missing)
    assert err.value.status_name == "TCI_ERR_IO"
    assert "missing.onnx" in str(err.value)


def test_engine_from_memory(x):
    with tcinfer.Engine(pathlib.Path(MODEL).read_bytes()) as e:
        assert np.array_equal(e.run(x)[0], tcinfer.Engine(MODEL).run(x)[0])


def test_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="backend"):
        tcinfer.Engine(MODEL, backend="tpu")


def test_mark_all_outputs(x):
    """mark_all_outputs: True and "unfused" mark every node's output; "shipped" marks the GPU
    engine's steps, and on the CPU backend (no fusion) every node's as well."""
    with tcinfer.Engine(MODEL) as plain, tcinfer.Engine(MODEL, mark_all_outputs=True) as a, \
            tcinfer.Engine(MODEL, mark_all_outputs="unfused") as b, \
            tcinfer.Engine(MODEL, mark_all_outputs="shipped") as c:
        assert len(a.outputs) > len(plain.outputs) + 2
        assert a.outputs == b.outputs == c.outputs
        assert len(c.run(x)) == len(c.outputs)
    with pytest.raises(ValueError, match="mark_all_outputs"):
        tcinfer.Engine(MODEL, mark_all_outputs="fused")


def test_device_option(x):
    """device reaches tci_engine_options: refused with the CPU backend, negative, or past the
    last GPU (a clear failure where there is none); device 0 given explicitly runs as the
    default does."""
    with pytest.raises(tcinfer.TcinferError, match="device is 1, but the backend is TCI_BACKEND_CPU"):
        tcinfer.Engine(MODEL, device=1)
    with pytest.raises(tcinfer.TcinferError, match="device is -1"):
        tcinfer.Engine(MODEL, backend="gpu", device=-1)
    n = tcinfer.gpu_count()[0]
    with pytest.raises(tcinfer.TcinferError) as e:
        tcinfer.Engine(MODEL, backend="gpu", device=n)
    assert e.value.status_name == "TCI_ERR_NO_DEVICE", e.value
    with tcinfer.Engine(MODEL, device=0) as a, tcinfer.Engine(MODEL) as b:
        assert np.array_equal(a.run(x)[0], b.run(x)[0])


def test_list_ops_and_gpu_count():
    ops = {op for op, lo, hi, gpu in tcinfer.list_ops()}
    assert {"Conv", "Relu", "Softmax"} <= ops
    n, name = tcinfer.gpu_count()
    assert n >= 0 and (n == 0) == (name == "")


def test_threads_share_an_engine(engine, x):
    expected = [engine.run(x * s)[0] for s in (1.0, 0.5)]
    bad = []

    def worker(t):
        with engine.create_context() as ctx:
            for i in range(50):
                s = i % 2
                if not np.array_equal(ctx.run(x * (1.0, 0.5)[s])[0], expected[s]):
                    bad.append((t, i))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_closed_engine_is_an_error(x):
    e = tcinfer.Engine(MODEL)
    e.close()
    with pytest.raises(tcinfer.TcinferError, match="closed"):
        e.stats()


def test_pip_install_and_library_next_to_the_package(tmp_path, x):
    """pip install . into a folder, then import it with the library found next to the package
    (TCINFER_LIBRARY unset)."""
    target, source = tmp_path / "site", tmp_path / "python"
    # from a copy: setuptools writes build/ and *.egg-info next to pyproject.toml
    shutil.copytree(PYTHON_DIR, source, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                       "*.egg-info", "*.so*"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--disable-pip-version-check", "--target",
                    str(target), str(source)], check=True, cwd=tmp_path)
    lib = pathlib.Path(os.environ["TCINFER_LIBRARY"]).resolve()
    shutil.copy(lib, target / "tcinfer" / "libtcinfer.so.0")
    env = {k: v for k, v in os.environ.items() if k != "TCINFER_LIBRARY"}
    env["PYTHONPATH"] = str(target)
    code = ("import numpy as np, tcinfer, sys; "
            "assert tcinfer.__file__.startswith(sys.argv[1]), tcinfer.__file__; "
            "assert tcinfer._lib.lib._name.startswith(sys.argv[1]), tcinfer._lib.lib._name; "
            "print(int(tcinfer.Engine(sys.argv[2]).run(np.load(sys.argv[3]))[0].argmax()))")
    out = subprocess.run([sys.executable, "-c", code, str(target), MODEL,
                          str(DEMO / "input.npy")], env=env, check=True, cwd=tmp_path,
                         capture_output=True, text=True).stdout
    assert out.strip() == "6"


def test_scalar_input_keeps_rank_0():
    """A 0-d input stays 0-d (np.ascontiguousarray would make it 1-d, which the model refuses)."""
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "s"], ["y"])], "scalar",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with tcinfer.Engine(model.SerializeToString()) as engine:
        for s in (np.array(2, dtype=np.float32), np.float32(2)):
            y = engine.run({"x": np.arange(3, dtype=np.float32), "s": s})[0]
            assert y.tolist() == [2.0, 3.0, 4.0]


def test_precision_auto_options(x):
    """precision "auto" is the GPU's: refused on the CPU backend with the library's message;
    calibration inputs with another precision too. A CPU engine lists no fp32 layers."""
    with pytest.raises(tcinfer.TcinferError, match="TCI_PRECISION_AUTO compares the fp16 GPU"):
        tcinfer.Engine(MODEL, precision="auto", calibration_inputs=[x])
    with pytest.raises(tcinfer.TcinferError, match="calibration_inputs and accuracy_target are for"):
        tcinfer.Engine(MODEL, calibration_inputs=[x])
    with pytest.raises(tcinfer.TcinferError, match="accuracy_target is -1"):
        tcinfer.Engine(MODEL, backend="gpu", precision="auto", accuracy_target=-1)
    with tcinfer.Engine(MODEL) as e:
        assert e.fp32_layers() == []
        with pytest.raises(tcinfer.TcinferError, match="not built with TCI_PRECISION_AUTO"):
            e.auto_error()


def test_keep_precision_options():
    """keep_precision: one of fp32, tf32, bf16; tf32 and bf16 only with fp16 and auto engines
    (the library's refusal), bf16 not with an accuracy target."""
    with pytest.raises(ValueError, match="keep_precision must be one of bf16, fp32, tf32"):
        tcinfer.Engine(MODEL, keep_precision="fp16")
    with pytest.raises(tcinfer.TcinferError, match="kept_precision TCI_PRECISION_BF16 is for"):
        tcinfer.Engine(MODEL, precision="fp32", keep_precision="bf16")
    with pytest.raises(tcinfer.TcinferError, match="fixes overflow, not accuracy"):
        tcinfer.Engine(MODEL, backend="gpu", precision="auto", keep_precision="bf16",
                       accuracy_target=1e-3)
    with tcinfer.Engine(MODEL, keep_precision="tf32") as e:
        assert e.fp32_layers() == []


def test_precision_auto_on_the_gpu(x):
    """On the GPU (skipped without one): the demo model does not overflow fp16 on its input, so
    nothing is moved and the result is within the fp16 bound of the CPU reference."""
    if tcinfer.gpu_count()[0] == 0:
        pytest.skip("no GPU")
    with tcinfer.Engine(MODEL) as cpu, tcinfer.Engine(
            MODEL, backend="gpu", precision="auto", calibration_inputs=[x]) as gpu:
        assert not [name for name, automatic in gpu.fp32_layers() if automatic]
        (want,), (got,) = cpu.run([x]), gpu.run([x])
        assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 5e-3
        assert 0 <= gpu.auto_error() <= 5e-3
