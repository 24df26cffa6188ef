"""Turning torch tensors into the C ABI's tensor views.

A view is the tuple ``(data_ptr, dtype_code, shape, strides)`` that
``_C.Descriptor`` reads; strides are in elements, as torch reports them.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from operator_runtime import _C
from operator_runtime.errors import InvalidArgumentError, UnsupportedDtypeError

DTYPE_CODES = {
    torch.float32: _C.OPRT_DTYPE_F32,
    torch.float16: _C.OPRT_DTYPE_F16,
    torch.bfloat16: _C.OPRT_DTYPE_BF16,
}
SUPPORTED_DTYPE_NAMES = "float32, float16, bfloat16"


def as_tensor(op: str, role: str, value: Any) -> torch.Tensor:
    """value itself if it is a torch tensor, else a zero-copy torch view of a
    ``__dlpack__`` tensor (NumPy, CuPy, JAX, ...)."""
    if isinstance(value, torch.Tensor):
        return value
    if hasattr(value, "__dlpack__"):
        return torch.from_dlpack(value)
    raise InvalidArgumentError(
        f"{op}: {role} must be a torch tensor or support __dlpack__, got {type(value).__name__}"
    )


def dtype_code(op: str, role: str, tensor: torch.Tensor) -> int:
    code = DTYPE_CODES.get(tensor.dtype)
    if code is None:
        dtype_name = str(tensor.dtype).removeprefix("torch.")
        raise UnsupportedDtypeError(
            f"{op}: {role} has dtype {dtype_name}; supported dtypes are {SUPPORTED_DTYPE_NAMES}"
        )
    return code


def view(op: str, role: str, tensor: torch.Tensor) -> tuple:
    return (tensor.data_ptr(), dtype_code(op, role, tensor), tuple(tensor.shape), tensor.stride())


def common_device(op: str, named_tensors: Sequence[tuple[str, torch.Tensor]]) -> torch.device:
    """The one device every tensor is on, else InvalidArgumentError naming them."""
    device = named_tensors[0][1].device
    if any(tensor.device != device for _, tensor in named_tensors):
        where = ", ".join(f"{role} on {tensor.device}" for role, tensor in named_tensors)
        raise InvalidArgumentError(f"{op}: tensors are on different devices ({where})")
    return device


def stream_getter(device: torch.device):
    """A cheap function returning the device's current stream handle (0 on CPU)."""
    if device.type != "cuda":
        return lambda: 0
    index = device.index if device.index is not None else torch.cuda.current_device()
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw_stream is not None:
        return lambda: raw_stream(index)
    return lambda: torch.cuda.current_stream(index).cuda_stream
