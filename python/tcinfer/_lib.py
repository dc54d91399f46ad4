"""Loading libtcinfer.so and the ctypes mirror of include/tcinfer.h."""
import ctypes
import ctypes.util
import glob
import os
import sys

# The header's option/info/report structs start with `size_t struct_size`: every struct below
# gets it as its first field, filled in by _init_struct.
HAS_STRUCT_SIZE = True

TCI_MAX_RANK = 8

STATUS_NAMES = ["TCI_OK", "TCI_ERR_INVALID_ARGUMENT", "TCI_ERR_IO", "TCI_ERR_PARSE",
                "TCI_ERR_INVALID_MODEL", "TCI_ERR_UNSUPPORTED", "TCI_ERR_OUT_OF_MEMORY",
                "TCI_ERR_NO_DEVICE", "TCI_ERR_CUDA", "TCI_ERR_INTERNAL", "TCI_ERR_DEVICE_LOST"]


class TcinferError(RuntimeError):
    """A tcinfer call failed: `status` is the tci_status number, `status_name` its enum name and
    the message tci_last_error()'s text."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)
        super().__init__(message)


def _struct(name, fields):
    """A ctypes Structure with the header's fields (and struct_size first once it has one)."""
    if HAS_STRUCT_SIZE:
        fields = [("struct_size", ctypes.c_size_t)] + fields
    return type(name, (ctypes.Structure,), {"_fields_": fields})


def _init_struct(s):
    if HAS_STRUCT_SIZE:
        s.struct_size = ctypes.sizeof(s)
    return s


Dims = ctypes.c_int64 * TCI_MAX_RANK

# tci_tensor, tci_shape_override and tci_tensor_info as in include/tcinfer.h
Tensor = type("Tensor", (ctypes.Structure,), {"_fields_": [
    ("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
    ("dims", Dims), ("data", ctypes.c_void_p)]})
ShapeOverride = type("ShapeOverride", (ctypes.Structure,), {"_fields_": [
    ("name", ctypes.c_char_p), ("rank", ctypes.c_int), ("dims", Dims)]})
TensorInfoStruct = _struct("TensorInfoStruct", [
    ("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
    ("dims", Dims), ("dim_names", ctypes.c_char_p * TCI_MAX_RANK)])
EngineOptions = _struct("EngineOptions", [
    ("backend", ctypes.c_int),
    ("shapes", ctypes.POINTER(ShapeOverride)),
    ("num_shapes", ctypes.c_size_t),
    ("no_cuda_graph", ctypes.c_int),
    ("plan_only", ctypes.c_int),
    ("mark_all_outputs", ctypes.c_int),
    ("precision", ctypes.c_int),
    ("fp32_layers", ctypes.POINTER(ctypes.c_char_p)),
    ("kernels", ctypes.c_int),
    ("timing_cache", ctypes.c_char_p),
    ("cpu_threads", ctypes.c_int),
    ("log_fn", ctypes.c_void_p),
    ("log_user", ctypes.c_void_p),
    ("log_level", ctypes.c_int),
    # since 0.2: limits against hostile models (0: the default)
    ("max_model_bytes", ctypes.c_uint64),
    ("max_tensor_elements", ctypes.c_int64),
    ("max_constant_bytes", ctypes.c_uint64),
    ("max_nodes", ctypes.c_uint64),
    ("max_nesting_depth", ctypes.c_int),
    ("max_parse_bytes", ctypes.c_uint64),
    # since 0.2: the progress callback (left NULL here); every field of the C struct is
    # declared, since tci_engine_options_init writes the whole of it
    ("progress_fn", ctypes.c_void_p),
    ("progress_user", ctypes.c_void_p),
    # since 0.2: the inputs of the precision "auto" search (NULL: seeded random ones)
    ("calibration_inputs", ctypes.POINTER(Tensor)),
    ("num_calibration_inputs", ctypes.c_size_t),
    ("accuracy_target", ctypes.c_double),
    # since 0.2: the CUDA device, and the precision of the layers kept out of fp16
    ("device", ctypes.c_int),
    ("kept_precision", ctypes.c_int),
    ("max_loop_iterations", ctypes.c_uint64)])
EngineStats = _struct("EngineStats", [
    ("num_nodes", ctypes.c_size_t), ("num_initializers", ctypes.c_size_t),
    ("num_parameters", ctypes.c_int64), ("parameter_bytes", ctypes.c_int64)])

FP32_LAYER_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p)
OP_INFO_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_void_p)


def _candidates():
    env = os.environ.get("TCINFER_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield from sorted(glob.glob(os.path.join(here, "libtcinfer.so*")))
    found = ctypes.util.find_library("tcinfer")
    if found:
        yield found
    for prefix in (sys.prefix, "/usr/local", "/usr"):
        for libdir in ("lib", "lib64", "lib/x86_64-linux-gnu"):
            path = os.path.join(prefix, libdir, "libtcinfer.so.0")
            if os.path.exists(path):
                yield path


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError("libtcinfer.so not found; set TCINFER_LIBRARY to its path or install it "
                      "(make install PREFIX=...)" + ("; tried " + "; ".join(tried) if tried else ""))


lib = _load()


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


P = ctypes.POINTER
c_void_pp = P(ctypes.c_void_p)
tci_version = _fn("tci_version", ctypes.c_char_p)
tci_last_error = _fn("tci_last_error", ctypes.c_char_p)
tci_status_string = _fn("tci_status_string", ctypes.c_char_p, ctypes.c_int)
tci_engine_options_init = _fn("tci_engine_options_init", None, P(EngineOptions))
tci_engine_create_from_file = _fn("tci_engine_create_from_file", ctypes.c_int, ctypes.c_char_p,
                                  P(EngineOptions), c_void_pp)
tci_engine_create_from_memory = _fn("tci_engine_create_from_memory", ctypes.c_int,
                                    ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                    P(EngineOptions), c_void_pp)
tci_engine_destroy = _fn("tci_engine_destroy", None, ctypes.c_void_p)
tci_engine_input_count = _fn("tci_engine_input_count", ctypes.c_size_t, ctypes.c_void_p)
tci_engine_output_count = _fn("tci_engine_output_count", ctypes.c_size_t, ctypes.c_void_p)
tci_engine_input_info = _fn("tci_engine_input_info", ctypes.c_int, ctypes.c_void_p,
                            ctypes.c_size_t, P(TensorInfoStruct))
tci_engine_output_info = _fn("tci_engine_output_info", ctypes.c_int, ctypes.c_void_p,
                             ctypes.c_size_t, P(TensorInfoStruct))
tci_engine_stats_get = _fn("tci_engine_stats_get", ctypes.c_int, ctypes.c_void_p, P(EngineStats))
tci_engine_fp32_layers = _fn("tci_engine_fp32_layers", ctypes.c_int, ctypes.c_void_p,
                             FP32_LAYER_FN, ctypes.c_void_p)
tci_engine_auto_error = _fn("tci_engine_auto_error", ctypes.c_int, ctypes.c_void_p,
                            P(ctypes.c_double))
tci_context_create = _fn("tci_context_create", ctypes.c_int, ctypes.c_void_p, c_void_pp)
tci_context_destroy = _fn("tci_context_destroy", None, ctypes.c_void_p)
tci_context_run = _fn("tci_context_run", ctypes.c_int, ctypes.c_void_p, P(Tensor),
                      ctypes.c_size_t)
tci_context_output = _fn("tci_context_output", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                         P(Tensor))
tci_gpu_count = _fn("tci_gpu_count", ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
tci_list_ops = _fn("tci_list_ops", None, OP_INFO_FN, ctypes.c_void_p)


def check(status):
    """Raises TcinferError for a failed status, with tci_last_error()'s text."""
    if status != 0:
        text = tci_last_error().decode("utf-8", "replace")
        raise TcinferError(status, text or tci_status_string(status).decode())


def version():
    """The library's version, "major.minor.patch"."""
    return tci_version().decode()


def gpu_count():
    """(number of usable CUDA GPUs, name of device 0 or "")."""
    name = ctypes.create_string_buffer(256)
    n = tci_gpu_count(name, len(name))
    return n, name.value.decode("utf-8", "replace")


def list_ops():
    """Every supported op: a list of (op_type, min_opset, max_opset, has_gpu)."""
    ops = []

    def collect(op, lo, hi, gpu, _user):
        ops.append((op.decode(), lo, hi, bool(gpu)))

    tci_list_ops(OP_INFO_FN(collect), None)
    return ops
