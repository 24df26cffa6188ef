"""Turning torch tensors into the C ABI's tensor views.

A view is the tuple ``(data_ptr, dtype_code, shape, strides)`` that
``_C.Descriptor`` reads; strides are in elements, as torch reports them.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from operator_runtime import _C
from operator_runtime._internal import dlpack
from operator_runtime.errors import InvalidArgumentError, UnsupportedDtypeError

DTYPE_CODES = {
    torch.float32: _C.OPRT_DTYPE_F32,
    torch.float16: _C.OPRT_DTYPE_F16,
    torch.bfloat16: _C.OPRT_DTYPE_BF16,
}
SUPPORTED_DTYPE_NAMES = "float32, float16, bfloat16"


def as_tensor(op: str, role: str, value: Any, writable: bool = False) -> torch.Tensor:
    """value itself if it is a dense torch tensor, else a zero-copy torch view of a
    ``__dlpack__`` tensor (NumPy, CuPy, JAX, ...). writable: the operator writes
    into it (out), so read-only foreign memory and lazily negated or conjugated
    views are refused."""
    if isinstance(value, torch.Tensor):
        tensor = value
    elif isinstance(value, torch.fx.Proxy):  # it has every attribute, __dlpack__ too
        raise InvalidArgumentError(
            f"{op}: {role} is a torch.fx Proxy; symbolic tracing records the calls of "
            f"ort.{op}() and ort.{op}_(), not of a prepared descriptor"
        )
    elif hasattr(value, "__dlpack__"):
        tensor = _from_dlpack(op, role, value, writable)
    else:
        raise InvalidArgumentError(
            f"{op}: {role} must be a torch tensor or support __dlpack__, got {type(value).__name__}"
        )
    if tensor.layout != torch.strided or tensor.is_nested:
        kind = "nested" if tensor.is_nested else str(tensor.layout).removeprefix("torch.")
        raise InvalidArgumentError(
            f"{op}: {role} is a {kind} tensor; oprt takes dense (strided) tensors"
        )
    if tensor.is_quantized:  # torch's dispatcher has no oprt kernel for them
        raise UnsupportedDtypeError(
            f"{op}: {role} has dtype {str(tensor.dtype).removeprefix('torch.')}; "
            f"supported dtypes are {SUPPORTED_DTYPE_NAMES}"
        )
    # Dynamo cannot trace is_neg(); compiled graphs meet such an out in torch's
    # own negation fallback, which raises.
    if writable and not torch.compiler.is_compiling() and (tensor.is_neg() or tensor.is_conj()):
        raise InvalidArgumentError(
            f"{op}: {role} is a lazily {'negated' if tensor.is_neg() else 'conjugated'} view; "
            f"write into a tensor without torch's negation or conjugation bit"
        )
    return tensor


def _from_dlpack(op: str, role: str, value: Any, writable: bool) -> torch.Tensor:
    # A buffer the producer marks read-only (NumPy's flags, the buffer protocol, or
    # DLPack 1.0's flag, which dlpack.take reads) is refused as out.
    if writable and _read_only(value):
        raise InvalidArgumentError(f"{op}: {role} is read-only memory and cannot be written")
    try:
        return dlpack.take(value, writable)
    except dlpack.ForeignTensorError as error:
        raise InvalidArgumentError(f"{op}: {role} {error}") from None


def _read_only(value: Any) -> bool:
    flags = getattr(value, "flags", None)
    if flags is not None and getattr(flags, "writeable", True) is False:
        return True
    try:
        with memoryview(value) as view:
            return view.readonly
    except (TypeError, ValueError, BufferError):
        return False


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


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream(index: int) -> int:
    """The handle of CUDA device index's current stream, as torch's own ops use."""
    if _raw_stream is not None:
        return _raw_stream(index)
    return torch.cuda.current_stream(index).cuda_stream


def stream_getter(device: torch.device):
    """A cheap function returning the device's current stream handle (0 on CPU)."""
    if device.type != "cuda":
        return lambda: 0
    index = device.index if device.index is not None else torch.cuda.current_device()
    return lambda: current_stream(index)
