"""Inputs and outputs in GPU memory (Triton's CUDA shared memory) through the tcinfer backend, for
bench/triton_gpu.py on the GPU machine.

The client puts a batch in GPU memory with PyTorch, shares it with the server by its CUDA IPC handle
(tritonclient's own cuda_shared_memory helper needs the cuda-python package; PyTorch's storage
sharing gives the same handle without it), and asks for the output in a
second GPU region. The backend then reads its input from GPU memory and writes its output into
GPU memory (serving/triton/backend.c, copy_bytes); the result must equal the same batch sent in
the request body.
"""
import base64

import numpy as np


def _region(client, name, tensor):
    """Registers tensor's CUDA allocation as region name; returns the tensor's offset in it."""
    shared = tensor.untyped_storage()._share_cuda_()
    device, handle, size, offset = shared[0], shared[1], shared[2], shared[3]
    client.register_cuda_shared_memory(name, base64.b64encode(handle), device, offset + size)
    return offset


def check(client, grpcclient, model, in_name, in_dims, out_name, out_dims, expected, x):
    """Runs x (numpy, float32) with input and output in CUDA shared memory; returns a dict of
    results: the relative L2 difference from expected (the same batch through the request body),
    or the error."""
    import torch

    xt = torch.from_numpy(x).cuda()
    yt = torch.full([x.shape[0]] + list(out_dims), float("nan"), dtype=torch.float32,
                    device="cuda")
    torch.cuda.synchronize()
    regions = []
    try:
        x_off = _region(client, "tcinfer_x", xt)
        regions.append("tcinfer_x")
        y_off = _region(client, "tcinfer_y", yt)
        regions.append("tcinfer_y")
        inp = grpcclient.InferInput(in_name, list(x.shape), "FP32")
        inp.set_shared_memory("tcinfer_x", x.nbytes, offset=x_off)
        out = grpcclient.InferRequestedOutput(out_name)
        out.set_shared_memory("tcinfer_y", yt.numel() * 4, offset=y_off)
        client.infer(model, [inp], outputs=[out])
        torch.cuda.synchronize()
        got = yt.cpu().numpy()
        diff = float(np.linalg.norm((got - expected).ravel()) /
                     max(np.linalg.norm(expected.ravel()), 1e-30))
        status = client.get_cuda_shared_memory_status(as_json=True)
        return {"check": "cuda shared memory", "batch": int(x.shape[0]),
                "regions": len(status.get("regions", [])), "vs_request_body_rel_l2": diff,
                "finite": bool(np.isfinite(got).all())}
    except Exception as e:  # reported as the row's result, the load test goes on
        return {"check": "cuda shared memory", "error": str(e)}
    finally:
        for r in regions:
            client.unregister_cuda_shared_memory(r)
