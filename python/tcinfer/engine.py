"""Engine and Context over the C API."""
import collections
import ctypes
import os

import numpy as np

from . import _lib
from ._lib import TcinferError, check

_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_,
           10: np.float16, 11: np.float64}
try:  # bfloat16 outputs (GPU bf16 engines) where ml_dtypes is installed
    import ml_dtypes
    _DTYPES[16] = ml_dtypes.bfloat16
except ImportError:
    pass
_CODES = {np.dtype(t): code for code, t in _DTYPES.items()}

_BACKENDS = {"cpu": 0, "gpu": 1}
_PRECISIONS = {"fp16": 0, "fp32": 1, "tf32": 2, "bf16": 3, "auto": 4}
_KEPT = {"fp32": 1, "tf32": 2, "bf16": 3}
_KERNELS = {"auto": 0, "wmma": 1, "cudnn": 2, "library": 2}
_MARKS = {"none": 0, "unfused": 1, "shipped": 2}  # tci_mark_outputs

TensorInfo = collections.namedtuple("TensorInfo", "name dtype shape")
TensorInfo.__doc__ = """An engine input or output: numpy dtype (None if tcinfer's dtype has no
numpy counterpart here), and shape as a tuple whose symbolic dims are their names (str) and
which is None where the model gives no rank."""


def _choice(table, value, what):
    if value not in table:
        raise ValueError(f"{what} must be one of {', '.join(sorted(table))}, not {value!r}")
    return table[value]


def _info(engine_handle, getter, index):
    s = _lib._init_struct(_lib.TensorInfoStruct())
    check(getter(engine_handle, index, ctypes.byref(s)))
    shape = None
    if s.rank >= 0:
        shape = tuple(s.dims[d] if s.dims[d] >= 0 or not s.dim_names[d]
                      else s.dim_names[d].decode() for d in range(s.rank))
    return TensorInfo(s.name.decode() if s.name else "", _DTYPES.get(s.dtype), shape)


def _tensors(arrays):
    """tci_tensor views of C-contiguous numpy arrays (which must outlive them)."""
    tensors = (_lib.Tensor * max(len(arrays), 1))()
    for t, x in zip(tensors, arrays):
        if x.dtype not in _CODES:
            raise TcinferError(1, f"dtype {x.dtype.name} has no tcinfer counterpart")
        if x.ndim > _lib.TCI_MAX_RANK:
            raise TcinferError(1, f"rank {x.ndim} above {_lib.TCI_MAX_RANK}")
        t.dtype = _CODES[x.dtype]
        t.rank = x.ndim
        for d, v in enumerate(x.shape):
            t.dims[d] = v
        t.data = x.ctypes.data
    return tensors


class _Closes:
    """Context-manager use and garbage collection both end in close()."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Engine(_Closes):
    """A loaded, optimised model; immutable, shareable by threads (each with its own Context).

    model: a path, or the bytes of a serialized ModelProto (base_dir: where its external data
    lives). backend "cpu" (fp32 reference) or "gpu" (tensor cores); shapes: {input name: dims}
    fixing symbolic dims; precision "fp16"|"bf16"|"tf32"|"fp32"|"auto", fp32_layers, kernels
    "auto"|"wmma"|"cudnn", no_cuda_graph, timing_cache: as in tci_engine_options;
    mark_all_outputs "unfused" (or True: every node's output, the GPU engine unfused) or
    "shipped" (every step's output of the GPU engine as it ships, fused). precision "auto" (GPU) keeps the layers that overflow fp16 in fp32,
    found by running calibration_inputs (numpy arrays in engine input order; None: seeded
    random inputs), and with accuracy_target > 0 also those that hold the outputs' relative L2
    error above it; fp32_layers() lists them, auto_error() gives the error reached.
    keep_precision "fp32"|"tf32"|"bf16": what fp16 and "auto" engines keep those layers in
    (tci_engine_options.kept_precision). device: the CUDA device a GPU engine is built and run
    on (0 by default; as tci_engine_options.device: out of range or negative, or nonzero with
    the CPU backend, is a TcinferError)."""

    def __init__(self, model, backend="cpu", shapes=None, precision="fp16", fp32_layers=None,
                 kernels="auto", no_cuda_graph=False, timing_cache=None,
                 mark_all_outputs=False, base_dir=None, calibration_inputs=None,
                 accuracy_target=0.0, keep_precision="fp32", device=0):
        opts = _lib.EngineOptions()
        _lib.tci_engine_options_init(ctypes.byref(opts))
        _lib._init_struct(opts)
        opts.backend = _choice(_BACKENDS, backend, "backend")
        opts.precision = _choice(_PRECISIONS, precision, "precision")
        opts.kernels = _choice(_KERNELS, kernels, "kernels")
        opts.no_cuda_graph = int(bool(no_cuda_graph))
        if isinstance(mark_all_outputs, str):
            opts.mark_all_outputs = _choice(_MARKS, mark_all_outputs, "mark_all_outputs")
        else:  # True: every node's output, as before the modes had names
            opts.mark_all_outputs = _MARKS["unfused"] if mark_all_outputs else _MARKS["none"]
        opts.accuracy_target = float(accuracy_target)
        opts.kept_precision = _choice(_KEPT, keep_precision, "keep_precision")
        opts.device = int(device)
        keep = []  # buffers the options point into, alive until the engine is built
        if shapes:
            arr = (_lib.ShapeOverride * len(shapes))()
            for i, (name, dims) in enumerate(shapes.items()):
                if len(dims) > _lib.TCI_MAX_RANK:
                    raise ValueError(f"shape of {name!r}: rank above {_lib.TCI_MAX_RANK}")
                arr[i].name = name.encode()
                arr[i].rank = len(dims)
                for d, v in enumerate(dims):
                    arr[i].dims[d] = int(v)
            opts.shapes, opts.num_shapes = arr, len(shapes)
            keep.append(arr)
        if fp32_layers:
            layers = (ctypes.c_char_p * (len(fp32_layers) + 1))(
                *[s.encode() for s in fp32_layers], None)
            opts.fp32_layers = layers
            keep.append(layers)
        if timing_cache is not None:
            opts.timing_cache = os.fsencode(timing_cache)
        if calibration_inputs is not None:
            arrays = [np.ascontiguousarray(x) for x in calibration_inputs]
            tensors = _tensors(arrays)
            opts.calibration_inputs, opts.num_calibration_inputs = tensors, len(arrays)
            keep += [arrays, tensors]

        handle = ctypes.c_void_p()
        if isinstance(model, (bytes, bytearray, memoryview)):
            data = bytes(model)
            check(_lib.tci_engine_create_from_memory(
                data, len(data), os.fsencode(base_dir) if base_dir is not None else None,
                ctypes.byref(opts), ctypes.byref(handle)))
        else:
            check(_lib.tci_engine_create_from_file(os.fsencode(model), ctypes.byref(opts),
                                                   ctypes.byref(handle)))
        self._handle = handle
        n_in = _lib.tci_engine_input_count(handle)
        n_out = _lib.tci_engine_output_count(handle)
        self.inputs = [_info(handle, _lib.tci_engine_input_info, i) for i in range(n_in)]
        self.outputs = [_info(handle, _lib.tci_engine_output_info, i) for i in range(n_out)]
        self._context = None

    def stats(self):
        """{num_nodes, num_initializers, num_parameters, parameter_bytes} of the optimised graph."""
        s = _lib._init_struct(_lib.EngineStats())
        check(_lib.tci_engine_stats_get(self._require(), ctypes.byref(s)))
        return {f: getattr(s, f) for f, _ in _lib.EngineStats._fields_ if f != "struct_size"}

    def fp32_layers(self):
        """A GPU engine's fp32 layers: [(layer, automatic)], the fp32_layers given, then those
        precision "auto" chose (automatic True)."""
        layers = []
        fn = _lib.FP32_LAYER_FN(lambda name, automatic, user:
                                layers.append((name.decode(), bool(automatic))))
        check(_lib.tci_engine_fp32_layers(self._require(), fn, None))
        return layers

    def auto_error(self):
        """Precision "auto": the outputs' relative L2 error against the GPU fp32 engine on the
        calibration inputs, with the fp32 layers chosen."""
        error = ctypes.c_double()
        check(_lib.tci_engine_auto_error(self._require(), ctypes.byref(error)))
        return error.value

    def create_context(self):
        """A new Context (one per thread)."""
        return Context(self)

    def run(self, inputs):
        """Runs on the engine's own context (not for concurrent use: give each thread a
        create_context()). Returns the outputs as a list of numpy arrays."""
        if self._context is None:
            self._context = Context(self)
        return self._context.run(inputs)

    def _require(self):
        if not self._handle:
            raise TcinferError(1, "the engine is closed")
        return self._handle

    def close(self):
        if getattr(self, "_context", None) is not None:
            self._context.close()
            self._context = None
        if getattr(self, "_handle", None):
            _lib.tci_engine_destroy(self._handle)
            self._handle = None


class Context(_Closes):
    """Per-thread run state of an Engine; keeps the engine alive."""

    def __init__(self, engine):
        self.engine = engine
        handle = ctypes.c_void_p()
        check(_lib.tci_context_create(engine._require(), ctypes.byref(handle)))
        self._handle = handle

    def _arrays(self, inputs):
        infos = self.engine.inputs
        if isinstance(inputs, dict):
            names = [i.name for i in infos]
            unknown = [k for k in inputs if k not in names]
            if unknown:
                raise TcinferError(1, f"unknown input {unknown[0]!r}; the engine's inputs are "
                                      f"{', '.join(names)}")
            missing = [n for n in names if n not in inputs]
            if missing:
                raise TcinferError(1, f"input {missing[0]!r} not given")
            inputs = [inputs[n] for n in names]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(infos):
            raise TcinferError(1, f"the engine takes {len(infos)} input(s), got {len(inputs)}")
        arrays = []
        for x, info in zip(inputs, infos):
            if not isinstance(x, np.ndarray) and info.dtype is not None:
                x = np.asarray(x, dtype=info.dtype)  # lists and scalars take the input's dtype
            x = np.asarray(x)
            if not x.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
                x = np.ascontiguousarray(x)
            if info.dtype is not None and x.dtype != np.dtype(info.dtype):
                raise TcinferError(1, f"input {info.name!r} is {np.dtype(info.dtype).name}, "
                                      f"got {x.dtype.name}")
            if x.ndim > _lib.TCI_MAX_RANK:
                raise TcinferError(1, f"input {info.name!r}: rank {x.ndim} above "
                                      f"{_lib.TCI_MAX_RANK}")
            arrays.append(x)
        return arrays

    def run(self, inputs):
        """inputs: a list in engine order, a {name: array} dict, or one array for a one-input
        engine. Returns every output as a numpy array (a copy, owned by Python)."""
        arrays = self._arrays(inputs)
        tensors = _tensors(arrays)
        check(_lib.tci_context_run(self._require(), tensors, len(arrays)))
        return [self.output(i) for i in range(len(self.engine.outputs))]

    def output(self, index):
        """Output `index` of the last run, as a new numpy array."""
        t = _lib.Tensor()
        check(_lib.tci_context_output(self._require(), index, ctypes.byref(t)))
        if t.dtype not in _DTYPES:
            raise TcinferError(5, f"output {index}: dtype {t.dtype} has no numpy counterpart "
                                  "here (bfloat16 needs ml_dtypes)")
        dtype = np.dtype(_DTYPES[t.dtype])
        shape = tuple(t.dims[d] for d in range(t.rank))
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0:
            return np.empty(shape, dtype)
        buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(t.data)
        return np.frombuffer(buf, dtype).reshape(shape).copy()

    def _require(self):
        if not self._handle:
            raise TcinferError(1, "the context is closed")
        return self._handle

    def close(self):
        if getattr(self, "_handle", None):
            _lib.tci_context_destroy(self._handle)
            self._handle = None
