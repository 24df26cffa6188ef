"""Taking a foreign tensor through ``__dlpack__``, checked before torch sees it.

torch's importer aborts the process (an uncaught C++ error) on strides it cannot
size (negative, or a span past 2^63 bytes), and ignores DLPack 1.0's read-only
flag. So the capsule is asked for here, as ``torch.from_dlpack`` asks (a
versioned one first, the producer's stream for CUDA memory), its header is read
with ctypes, and only a capsule that passes goes on to torch.
"""

from __future__ import annotations

import ctypes
from typing import Any, NamedTuple

import torch

_CUDA_DEVICE_TYPES = (2, 10)  # kDLCUDA, kDLROCM
_READ_ONLY_FLAG = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
_INT64_MAX = 2**63 - 1


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype_code", ctypes.c_uint8),
        ("dtype_bits", ctypes.c_uint8),
        ("dtype_lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.argtypes = (ctypes.py_object, ctypes.c_char_p)
_capsule_is_valid.restype = ctypes.c_int
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)
_capsule_pointer.restype = ctypes.c_void_p


class Header(NamedTuple):
    """What a capsule says of its tensor (strides None: compact row-major)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    item_bits: int
    read_only: bool


def read_header(capsule: Any) -> Header | None:
    """The capsule's header, or None when it is no unused DLPack capsule."""
    if _capsule_is_valid(capsule, b"dltensor_versioned"):
        managed = _DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))
        tensor, read_only = managed.dl_tensor, bool(managed.flags & _READ_ONLY_FLAG)
    elif _capsule_is_valid(capsule, b"dltensor"):
        tensor = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor")).dl_tensor
        read_only = False  # DLPack before 1.0 cannot say
    else:
        return None
    ndim = tensor.ndim
    shape = tuple(tensor.shape[d] for d in range(ndim))
    strides = tuple(tensor.strides[d] for d in range(ndim)) if tensor.strides else None
    return Header(shape, strides, tensor.dtype_bits * tensor.dtype_lanes, read_only)


def problem(header: Header, writable: bool) -> str | None:
    """Why torch must not take the tensor (as out when writable), or None."""
    if writable and header.read_only:
        return "is read-only memory and cannot be written"
    if any(extent < 0 for extent in header.shape):
        return f"has a negative extent in its shape {header.shape}"
    if header.strides is None or 0 in header.shape:
        return None
    if any(stride < 0 for stride in header.strides):
        return f"has negative strides {header.strides}; pass a copy with non-negative strides"
    span = sum((extent - 1) * stride for extent, stride in zip(header.shape, header.strides))
    if (span + 1) * max(header.item_bits // 8, 1) > _INT64_MAX:
        return f"has strides {header.strides} that reach past 2^63 bytes"
    return None


class ForeignTensorError(Exception):
    """Why a __dlpack__ object cannot be taken (the caller words it for the op)."""


def take(value: Any, writable: bool) -> torch.Tensor:
    """A zero-copy torch view of value's memory, or ForeignTensorError saying why not."""
    try:
        device_type, device_id = value.__dlpack_device__()
    except Exception as error:  # a producer's own failure, whatever its type
        raise ForeignTensorError(f"has no usable __dlpack_device__ ({type(error).__name__}: {error})") from None
    kwargs: dict[str, Any] = {"max_version": (1, 0)}
    if device_type in _CUDA_DEVICE_TYPES:
        if not torch.cuda.is_available():
            raise ForeignTensorError("is on a CUDA device, and this torch sees none")
        stream = torch.cuda.current_stream(f"cuda:{device_id}").cuda_stream
        kwargs["stream"] = 1 if device_type == 2 and stream == 0 else stream
    try:
        try:
            capsule = value.__dlpack__(**kwargs)
        except TypeError:  # a producer before DLPack 1.0
            del kwargs["max_version"]
            capsule = value.__dlpack__(**kwargs)
    except Exception as error:
        raise ForeignTensorError(f"could not be taken through __dlpack__ ({type(error).__name__}: {error})") from None
    header = read_header(capsule)
    if header is None:
        raise ForeignTensorError("could not be taken through __dlpack__: it returned no unused DLPack capsule")
    reason = problem(header, writable)
    if reason is not None:
        raise ForeignTensorError(reason)
    try:
        return torch.from_dlpack(capsule)
    except Exception as error:
        raise ForeignTensorError(f"could not be taken through __dlpack__ ({type(error).__name__}: {error})") from None
