"""Which GPU backend each C library of the nvidia platform links, checked without a GPU.

liboperator_runtime.so carries nvidia and not metax; liboperator_runtime_metax_compat.so,
the metax sources compiled by nvcc (ops/metax.bzl), carries metax and not nvidia. A
backend that is linked in but has no device fails differently from one that is not
linked in, so the C runtime's messages tell them apart on any machine; on a GPU host the
linked backend creates the descriptor.
"""

from __future__ import annotations

import ctypes
import sys

import pytest

from operator_runtime_testing.libraries import runtime_library

NVIDIA, METAX = 1, 2
NOT_SUPPORTED = 5
_NAMES = {NVIDIA: "nvidia", METAX: "metax"}


class View(ctypes.Structure):
    """oprt_tensor_view_t (runtime/include/operator_runtime/api.h)."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * 8),
        ("strides", ctypes.c_int64 * 8),
    ]


def _load(name: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(runtime_library(name))
    lib.oprt_last_error_message.restype = ctypes.c_char_p
    lib.oprt_set_backend.argtypes = [ctypes.c_int]
    return lib


def _create_copy(lib: ctypes.CDLL, backend: int) -> tuple[int, str]:
    """Status and message of creating a 4-element f32 copy descriptor on backend."""
    data = (ctypes.c_float * 4)()
    view = View(ctypes.cast(data, ctypes.c_void_p), 1, 1, (ctypes.c_int64 * 8)(4),
                (ctypes.c_int64 * 8)(1))
    assert lib.oprt_set_backend(backend) == 0
    desc = ctypes.c_void_p()
    status = lib.oprt_create_copy_descriptor(ctypes.byref(desc), ctypes.byref(view),
                                             ctypes.byref(view))
    if status == 0:
        assert lib.oprt_destroy_copy_descriptor(desc) == 0
    return status, lib.oprt_last_error_message().decode()


@pytest.mark.parametrize(
    "library, linked, absent",
    [
        ("liboperator_runtime.so", NVIDIA, METAX),
        ("liboperator_runtime_metax_compat.so", METAX, NVIDIA),
    ],
)
def test_library_links_exactly_its_gpu_backend(library, linked, absent):
    lib = _load(library)
    assert lib.oprt_operator_count() == 5
    assert _create_copy(lib, absent) == (
        NOT_SUPPORTED,
        f"copy: backend {_NAMES[absent]} is not built into this library",
    )
    status, message = _create_copy(lib, linked)
    if lib.oprt_backend_available(linked):
        assert (status, message) == (0, "")
    else:
        assert (status, message) == (NOT_SUPPORTED, f"copy: backend {_NAMES[linked]} has no device")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
