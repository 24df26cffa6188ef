"""The C ABI seen from Python through ctypes, for tests that call it directly.

`load_library()` opens liboperator_runtime.so, from Bazel runfiles or from the
GPU-runner bundle (see libraries.py).
"""

from __future__ import annotations

import ctypes

import torch

from operator_runtime_testing.libraries import runtime_library

MAX_DIMS = 8
SUCCESS, INVALID_ARG, UNSUPPORTED_DTYPE, RUNTIME, INSUFFICIENT_WORKSPACE, NOT_SUPPORTED = range(6)
BACKEND_NVIDIA, BACKEND_METAX, BACKEND_CPU = 1, 2, 3
BACKEND_CODES = {"nvidia": BACKEND_NVIDIA, "metax": BACKEND_METAX, "cpu": BACKEND_CPU}
DTYPE_CODES = {torch.float16: 0, torch.float32: 1, torch.bfloat16: 2}
KIND_ELEMENTWISE, KIND_REDUCTION, KIND_NORMALIZATION = range(3)


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
