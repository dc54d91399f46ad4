"""tcinfer: run ONNX networks from Python through libtcinfer.so (ctypes).

    engine = tcinfer.Engine("model.onnx", backend="cpu")
    ctx = engine.create_context()          # one per thread; the engine may be shared
    outputs = ctx.run([x])                 # or ctx.run({"input": x}); numpy arrays out

Failures raise TcinferError, whose text is the library's tci_last_error().
"""
from ._lib import TcinferError, version, gpu_count, list_ops
from .engine import Engine, Context, TensorInfo

__all__ = ["Engine", "Context", "TensorInfo", "TcinferError", "version", "gpu_count",
           "list_ops"]
__version__ = "0.2.0"
