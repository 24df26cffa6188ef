"""The C ABI seen from Python through ctypes, for tests that call it directly.

`load_library()` opens liboperator_runtime.so, from Bazel runfiles or from the
GPU-runner bundle (see libraries.py).
"""

from __future__ import annotations

import ctypes

import torch

from operator_runtime import _C
from operator_runtime._internal.tensors import DTYPE_CODES
from operator_runtime_testing.libraries import runtime_library

# The ABI's constants as _C exports them from api.h (tests/api_test.py checks that it
# exports every one, with api.h's value).
MAX_DIMS = _C.OPRT_MAX_DIMS
SUCCESS = _C.OPRT_SUCCESS
INVALID_ARG = _C.OPRT_ERR_INVALID_ARG
UNSUPPORTED_DTYPE = _C.OPRT_ERR_UNSUPPORTED_DTYPE
RUNTIME = _C.OPRT_ERR_RUNTIME
INSUFFICIENT_WORKSPACE = _C.OPRT_ERR_INSUFFICIENT_WORKSPACE
NOT_SUPPORTED = _C.OPRT_ERR_NOT_SUPPORTED
BACKEND_NVIDIA, BACKEND_METAX, BACKEND_CPU = (
    _C.OPRT_BACKEND_NVIDIA, _C.OPRT_BACKEND_METAX, _C.OPRT_BACKEND_CPU)
BACKEND_CODES = {"nvidia": BACKEND_NVIDIA, "metax": BACKEND_METAX, "cpu": BACKEND_CPU}
KIND_ELEMENTWISE, KIND_REDUCTION, KIND_NORMALIZATION = (
    _C.OPRT_KIND_ELEMENTWISE, _C.OPRT_KIND_REDUCTION, _C.OPRT_KIND_NORMALIZATION)


class TensorView(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
    ]


ViewPointer = ctypes.POINTER(TensorView)
Status = ctypes.c_int


class Operator(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("kind", ctypes.c_int),
        ("num_inputs", ctypes.c_int32),
        ("input_names", ctypes.POINTER(ctypes.c_char_p)),
        ("num_params", ctypes.c_int32),
        ("param_names", ctypes.POINTER(ctypes.c_char_p)),
        ("param_defaults", ctypes.POINTER(ctypes.c_double)),
        ("create", ctypes.CFUNCTYPE(
            Status, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ViewPointer,
            ctypes.POINTER(ViewPointer), ctypes.POINTER(ctypes.c_double))),
        ("get_workspace_size", ctypes.CFUNCTYPE(
            Status, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t))),
        ("execute", ctypes.CFUNCTYPE(
            Status, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)),
        ("destroy", ctypes.CFUNCTYPE(Status, ctypes.c_void_p)),
    ]


def load_library() -> ctypes.CDLL:
    lib = ctypes.CDLL(runtime_library("liboperator_runtime.so"))
    lib.oprt_last_error_message.restype = ctypes.c_char_p
    lib.oprt_find_operator.restype = ctypes.POINTER(Operator)
    lib.oprt_find_operator.argtypes = [ctypes.c_char_p]
    lib.oprt_operator_count.restype = ctypes.c_int32
    lib.oprt_operator_at.restype = ctypes.POINTER(Operator)
    lib.oprt_operator_at.argtypes = [ctypes.c_int32]
    lib.oprt_set_backend.argtypes = [ctypes.c_int]
    lib.oprt_backend_available.argtypes = [ctypes.c_int]
    lib.oprt_backend_available.restype = ctypes.c_int32
    return lib


def operator_names(lib: ctypes.CDLL) -> list[str]:
    return [lib.oprt_operator_at(i).contents.name.decode() for i in range(lib.oprt_operator_count())]


def make_view(data: int, dtype: torch.dtype | int, shape, strides) -> TensorView:
    """A view of `shape` and element `strides` over the memory at address `data`;
    `dtype` may also be a raw code (invalid ones included, for error tests)."""
    view = TensorView()
    view.data = data
    view.dtype = DTYPE_CODES[dtype] if isinstance(dtype, torch.dtype) else dtype
    view.ndim = len(shape)
    for d, (extent, stride) in enumerate(zip(shape, strides)):
        view.shape[d] = extent
        view.strides[d] = stride
    return view
