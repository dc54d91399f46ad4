"""Inputs and outputs in GPU memory (Triton's CUDA shared memory) through the tcinfer backend, for
bench/triton_gpu.py on the GPU machine.

The client allocates two buffers on GPU 0 with the CUDA runtime (through ctypes: tritonclient's
own cuda_shared_memory helper needs the cuda-python package), copies a batch into the first and
NaN into the second, shares both with the server by their CUDA IPC handles and asks for the
input to be read from the first and the output written into the second. The backend then reads
its input from GPU memory and writes its output into GPU memory (serving/triton/backend.c,
copy_bytes); the result must equal the same batch sent in the request body.
"""
import base64
import ctypes

import numpy as np

H2D, D2H = 1, 2  # cudaMemcpyKind


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * 64)]


def _cudart():
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    raise RuntimeError("libcudart.so not found (LD_LIBRARY_PATH)")


def check(client, grpcclient, model, in_name, in_dims, out_name, out_dims, expected, x):
    """Runs x (numpy, float32) with input and output in CUDA shared memory; returns a dict of
    results: the relative L2 difference from expected (the same batch through the request body),
    or the error."""
    regions, buffers = [], []
    try:
        rt = _cudart()

        def ok(err, what):
            if err != 0:
                raise RuntimeError(f"{what} failed: CUDA error {err}")

        x = np.ascontiguousarray(x, np.float32)
        y = np.full([x.shape[0]] + list(out_dims), np.nan, np.float32)
        for region, host in (("tcinfer_x", x), ("tcinfer_y", y)):
            ptr = ctypes.c_void_p()
            ok(rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(host.nbytes)), "cudaMalloc")
            buffers.append(ptr)
            ok(rt.cudaMemcpy(ptr, host.ctypes.data_as(ctypes.c_void_p),
                             ctypes.c_size_t(host.nbytes), H2D), "cudaMemcpy")
            handle = _IpcHandle()
            ok(rt.cudaIpcGetMemHandle(ctypes.byref(handle), ptr), "cudaIpcGetMemHandle")
            raw = ctypes.string_at(ctypes.addressof(handle), ctypes.sizeof(handle))
            client.register_cuda_shared_memory(region, base64.b64encode(raw), 0, host.nbytes)
            regions.append(region)
        inp = grpcclient.InferInput(in_name, list(x.shape), "FP32")
        inp.set_shared_memory("tcinfer_x", x.nbytes)
        out = grpcclient.InferRequestedOutput(out_name)
        out.set_shared_memory("tcinfer_y", y.nbytes)
        client.infer(model, [inp], outputs=[out])
        ok(rt.cudaMemcpy(y.ctypes.data_as(ctypes.c_void_p), buffers[1],
                         ctypes.c_size_t(y.nbytes), D2H), "cudaMemcpy")
        diff = float(np.linalg.norm((y - expected).ravel()) /
                     max(np.linalg.norm(expected.ravel()), 1e-30))
        status = client.get_cuda_shared_memory_status(as_json=True)
        return {"check": "cuda shared memory", "batch": int(x.shape[0]),
                "regions": len(status.get("regions", [])), "vs_request_body_rel_l2": diff,
                "finite": bool(np.isfinite(y).all())}
    except Exception as e:  # reported as the row's result, the load test goes on
        return {"check": "cuda shared memory", "error": str(e)}
    finally:
        for r in regions:
            client.unregister_cuda_shared_memory(r)
        if buffers:
            rt = _cudart()
            for ptr in buffers:
                rt.cudaFree(ptr)
