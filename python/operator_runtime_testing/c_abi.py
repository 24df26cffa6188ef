"""The C ABI seen from Python through ctypes, for tests that call it directly.

`load_library()` opens liboperator_runtime.so, from Bazel runfiles or from the
GPU-runner bundle (see libraries.py).
"""

from __future__ import annotations

import ctypes

import torch

from operator_runtime import _C
from operator_runtime._internal.tensors import DTYPE_CODES
from operator_runtime.backends import NATIVE_BACKEND_CODES as BACKEND_CODES
from operator_runtime_testing.libraries import runtime_library

# The ABI's numbers come from api.h through _C (tests/api_test.py checks that _C exports
# each with api.h's value); statuses are operator_runtime.errors.Status, operator kinds
# operator_runtime.operator_table.Kind.
MAX_DIMS = _C.OPRT_MAX_DIMS
BACKEND_NVIDIA, BACKEND_METAX, BACKEND_CPU = (
    BACKEND_CODES["nvidia"], BACKEND_CODES["metax"], BACKEND_CODES["cpu"])


class TensorView(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
    ]


ViewPointer = ctypes.POINTER(TensorView)
CStatus = ctypes.c_int  # oprt_status_t as a ctypes return type


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
            CStatus, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ViewPointer,
            ctypes.POINTER(ViewPointer), ctypes.POINTER(ctypes.c_double))),
        ("get_workspace_size", ctypes.CFUNCTYPE(
            CStatus, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t))),
        ("execute", ctypes.CFUNCTYPE(
            CStatus, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)),
        ("destroy", ctypes.CFUNCTYPE(CStatus, ctypes.c_void_p)),
    ]


def load_library(name: str = "liboperator_runtime.so") -> ctypes.CDLL:
    """One of the C libraries (`name`, liboperator_runtime.so by default), typed for ctypes."""
    lib = ctypes.CDLL(runtime_library(name))
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
