"""Exceptions raised by operator_runtime.

Every error carries the C status code (``.status``) and the message that says
what was wrong (``.message``). Errors detected in Python before reaching the C
runtime carry the status the C runtime would have returned.
"""

from __future__ import annotations

import enum

from operator_runtime import _C


class Status(enum.IntEnum):
    """The C ABI's oprt_status_t."""

    SUCCESS = _C.OPRT_SUCCESS
    INVALID_ARG = _C.OPRT_ERR_INVALID_ARG
    UNSUPPORTED_DTYPE = _C.OPRT_ERR_UNSUPPORTED_DTYPE
    RUNTIME = _C.OPRT_ERR_RUNTIME
    INSUFFICIENT_WORKSPACE = _C.OPRT_ERR_INSUFFICIENT_WORKSPACE
    NOT_SUPPORTED = _C.OPRT_ERR_NOT_SUPPORTED


class OperatorRuntimeError(Exception):
    """Base class, raised as ``Error(message)`` or ``Error(message, status)``:
    ``status`` is the C status (the class's default unless given), ``message``
    what was wrong. Both are read from ``args``, with no ``__init__``: under
    ``torch.compile(fullgraph=True)`` Dynamo cannot call an exception's own
    ``__init__`` and then reports that failure instead of the message."""

    default_status = Status.RUNTIME

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    @property
    def status(self) -> Status:
        return Status(self.args[1]) if len(self.args) > 1 else Status(self.default_status)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status.name})"


class InvalidArgumentError(OperatorRuntimeError, ValueError):
    """A shape, stride, dim, device, backend name or pointer was not acceptable."""

    default_status = Status.INVALID_ARG


class UnsupportedDtypeError(OperatorRuntimeError, TypeError):
    """The dtype (or the mix of dtypes) is not supported."""

    default_status = Status.UNSUPPORTED_DTYPE


class NotSupportedError(OperatorRuntimeError):
    """The backend is not built in, has no device, or cannot run this problem."""

    default_status = Status.NOT_SUPPORTED


class AutogradError(NotSupportedError, RuntimeError):
    """A tensor that requires grad was passed while oprt has no backward for the
    operator, or out is a leaf that requires grad (torch refuses in-place writes
    into those too). A RuntimeError, as torch's own autograd errors are."""


class RuntimeFailure(OperatorRuntimeError):
    """The backend failed while running (e.g. a kernel launch error)."""

    default_status = Status.RUNTIME


class InsufficientWorkspaceError(OperatorRuntimeError):
    """The workspace handed to execute is smaller than the descriptor needs."""

    default_status = Status.INSUFFICIENT_WORKSPACE


_ERROR_BY_STATUS = {
    error.default_status: error
    for error in (
        InvalidArgumentError,
        UnsupportedDtypeError,
        NotSupportedError,
        RuntimeFailure,
        InsufficientWorkspaceError,
    )
}


def error_for_status(status: int, message: str) -> OperatorRuntimeError:
    """The exception matching a C status code."""
    return _ERROR_BY_STATUS.get(status, OperatorRuntimeError)(message, status)


class BindingError(OperatorRuntimeError, RuntimeError):
    """What the binding (_C) raises, as ``_C.Error(status, message)``; the package
    turns it into the exception of its status (from_c_error)."""

    @property
    def message(self) -> str:
        return str(self.args[1])

    @property
    def status(self) -> Status:
        return Status(self.args[0])


_C.set_error_type(BindingError)


def from_c_error(error: BindingError) -> OperatorRuntimeError:
    """Converts the binding's ``_C.Error(status, message)``."""
    status, message = error.args
    return error_for_status(status, message)
