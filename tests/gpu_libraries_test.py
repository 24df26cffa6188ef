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
import torch

from operator_runtime.errors import Status
from operator_runtime.ops import OPERATORS
from operator_runtime_testing.c_abi import BACKEND_METAX, BACKEND_NVIDIA, load_library, make_view, operator_names

_NAMES = {BACKEND_NVIDIA: "nvidia", BACKEND_METAX: "metax"}


def _create_copy(lib: ctypes.CDLL, backend: int) -> tuple[int, str]:
    """Status and message of creating a 4-element f32 copy descriptor on backend."""
    data = (ctypes.c_float * 4)()
    view = make_view(ctypes.addressof(data), torch.float32, (4,), (1,))
    assert lib.oprt_set_backend(backend) == Status.SUCCESS
    desc = ctypes.c_void_p()
    status = lib.oprt_create_copy_descriptor(ctypes.byref(desc), ctypes.byref(view),
                                             ctypes.byref(view))
    if status == Status.SUCCESS:
        assert lib.oprt_destroy_copy_descriptor(desc) == Status.SUCCESS
    return status, lib.oprt_last_error_message().decode()


@pytest.mark.parametrize(
    "library, linked, absent",
    [
        ("liboperator_runtime.so", BACKEND_NVIDIA, BACKEND_METAX),
        ("liboperator_runtime_metax_compat.so", BACKEND_METAX, BACKEND_NVIDIA),
    ],
)
def test_library_links_exactly_its_gpu_backend(library, linked, absent):
    lib = load_library(library)
    assert sorted(operator_names(lib)) == sorted(OPERATORS)
    assert _create_copy(lib, absent) == (
        Status.NOT_SUPPORTED,
        f"copy: backend {_NAMES[absent]} is not built into this library",
    )
    status, message = _create_copy(lib, linked)
    if lib.oprt_backend_available(linked):
        assert (status, message) == (Status.SUCCESS, "")
    else:
        assert (status, message) == (Status.NOT_SUPPORTED, f"copy: backend {_NAMES[linked]} has no device")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
