"""Choosing the backend an operator runs on.

Backends: "cpu", "nvidia", "metax" (built into the C runtime) and "tilelang"
(Python TileLang kernels, supplied through ``register_python_backend``). When a
call names no backend, the default set with ``set_default_backend`` is used;
without one, the tensors' device decides: CPU tensors run on "cpu", CUDA
tensors on "nvidia" (or "metax" on a MetaX build, whose devices torch also
calls "cuda").
"""

from __future__ import annotations

from typing import Callable, Hashable, Protocol, Sequence

import torch

from operator_runtime import _C
from operator_runtime._internal.bounded_cache import ForkSafeLock
from operator_runtime.errors import InvalidArgumentError, NotSupportedError, OperatorRuntimeError

BACKEND_NAMES = ("cpu", "nvidia", "metax", "tilelang")

# Backends implemented in the C runtime, by the name oprt_backend_string gives them, so a
# backend has one name in C, in Python and in every message.
NATIVE_BACKEND_CODES = {
    _C.backend_string(code): code
    for code in (_C.OPRT_BACKEND_CPU, _C.OPRT_BACKEND_NVIDIA, _C.OPRT_BACKEND_METAX)
}
# The kind of torch device each native backend runs.
_DEVICE_TYPE = {"cpu": "cpu", "nvidia": "cuda", "metax": "cuda"}


class PythonKernel(Protocol):
    """One prepared kernel of a Python backend (see register_python_backend)."""

    def run(self, out: torch.Tensor, inputs: Sequence[torch.Tensor], stream: int) -> None: ...

    def release(self) -> None:
        """Lets go of anything held from the tensors of the last run (a call of
        ort.<op>() keeps its kernel for the next call of the same signature)."""

    def destroy(self) -> None: ...


class PythonBackend(Protocol):
    """A backend written in Python, such as TileLang."""

    def available(self) -> bool: ...

    def unavailable_reason(self) -> str | None:
        """Why available() is False (None when it is True), for error messages."""

    def runs_on(self, device: torch.device) -> bool: ...

    def prepare_key(self) -> Hashable:
        """What prepare depends on besides the call (TileLang: the kernel style):
        ort.<op>() calls reuse a kernel only while it is the same."""

    def prepare(
        self, op: str, plan: dict, out: torch.Tensor, inputs: Sequence[torch.Tensor],
        params: Sequence[float],
    ) -> PythonKernel:
        """A kernel for these operands, which the C runtime has already validated and
        planned (plan: the cpu descriptor's `_C.Descriptor.plan`, ops.Prepared); it
        re-checks them before each run."""


_python_backends: dict[str, PythonBackend] = {}
_default_backend: str | None = None


_PROTOCOL_METHODS = ("available", "unavailable_reason", "runs_on", "prepare_key", "prepare")


def register_python_backend(name: str, backend: PythonBackend) -> None:
    """Installs the implementation behind a Python backend name ("tilelang"); one
    whose available() raises is not installed (the one before stays)."""
    _install_python_backend(name, backend, probe=True)


def _install_python_backend(name: str, backend: PythonBackend, probe: bool) -> None:
    """register_python_backend; without `probe`, backend.available() is not asked
    (the package's own tilelang backend at import: asking it imports TileLang)."""
    if name in NATIVE_BACKEND_CODES or name not in BACKEND_NAMES:
        raise InvalidArgumentError(f"{name!r} is not a Python backend name")
    missing = [method for method in _PROTOCOL_METHODS if not callable(getattr(backend, method, None))]
    if missing:
        raise InvalidArgumentError(
            f"a Python backend needs the methods {', '.join(_PROTOCOL_METHODS)}; "
            f"{type(backend).__name__} has no {', '.join(missing)}"
        )
    previous = _python_backends.get(name)
    _python_backends[name] = backend
    try:
        if probe:
            backend.available()
        _publish_backend_table()
    except BaseException:
        if previous is None:
            del _python_backends[name]
        else:
            _python_backends[name] = previous
        _publish_backend_table()
        raise


def unregister_python_backend(name: str) -> None:
    _python_backends.pop(name, None)
    _publish_backend_table()


def python_backend(name: str) -> PythonBackend | None:
    return _python_backends.get(name)


def registered_python_backend(op: str, name: str) -> PythonBackend:
    """The Python backend registered as name, which resolve named: another thread
    may have unregistered it since."""
    backend = _python_backends.get(name)
    if backend is None:
        raise NotSupportedError(f"{op}: backend {name!r} was unregistered during the call")
    return backend


def is_available(name: str) -> bool:
    if name in NATIVE_BACKEND_CODES:
        return _C.backend_available(NATIVE_BACKEND_CODES[name])
    backend = _python_backends.get(name)
    return backend is not None and backend.available()


def available_backends() -> list[str]:
    """Names of the backends that can run now (built in and, for GPUs, with a device)."""
    return [name for name in BACKEND_NAMES if is_available(name)]


def check_name(name: str) -> str:
    """name itself if it names a backend, else InvalidArgumentError."""
    if not isinstance(name, str) or name not in BACKEND_NAMES:
        raise InvalidArgumentError(
            f"unknown backend {name!r}; expected one of {', '.join(BACKEND_NAMES)}"
        )
    return name


def set_default_backend(name: str | None) -> None:
    """Makes name the backend of calls that name none; None restores choosing
    by the tensors' device."""
    global _default_backend
    _default_backend = None if name is None else check_name(name)
    _publish_backend_table()


def get_default_backend() -> str | None:
    """The backend set by set_default_backend, or None when the device decides."""
    return _default_backend


def _backend_for_device(device: torch.device) -> str:
    if device.type == "cuda":
        if not is_available("nvidia") and is_available("metax"):
            return "metax"
        return "nvidia"
    return "cpu"


def resolve(op: str, backend: str | None, device: torch.device) -> str:
    """The backend to run op on tensors of device, checked to be usable."""
    name, error = _resolution(backend, device)
    if error is not None:
        raise error(op)
    return name


def _resolution(
    backend: str | None, device: torch.device
) -> tuple[str, Callable[[str], OperatorRuntimeError] | None]:
    """The backend resolve picks for tensors of device, and, when it cannot run
    them, what makes resolve's error for an op. The error is made only when
    raised: its message asks every backend whether it is available, and asking
    TileLang imports it (_publish_backend_table, at import, only needs the name)."""
    name = backend if backend is not None else _default_backend or _backend_for_device(device)
    check_name(name)
    # One look at the registrations, which another thread may change meanwhile.
    python_backend = _python_backends.get(name)
    native = name in NATIVE_BACKEND_CODES
    if not (is_available(name) if native else python_backend is not None and python_backend.available()):

        def unavailable(op: str) -> OperatorRuntimeError:
            if name == "tilelang" and python_backend is None:
                return NotSupportedError("tilelang backend is not available in this build")
            if python_backend is not None:
                return NotSupportedError(
                    f"{op}: backend {name!r} is not available: {python_backend.unavailable_reason()}"
                )
            return NotSupportedError(
                f"{op}: backend {name!r} is not available: it is not built into this runtime "
                f"or has no device (available: {', '.join(available_backends())})"
            )

        return name, unavailable
    runs = device.type == _DEVICE_TYPE[name] if native else python_backend.runs_on(device)
    if not runs:
        needs = f"; it needs {_DEVICE_TYPE[name]} tensors" if name in _DEVICE_TYPE else ""
        return name, lambda op: InvalidArgumentError(
            f"{op}: backend {name!r} cannot run tensors on {device}{needs}"
        )
    return name, None



# The backend names the C++ kernels of the torch ops look up (torch_kernels.h).
_KERNEL_BACKEND_SLOTS = (None, "cpu", "nvidia", "metax")


# Held from reading the registrations to publishing what they resolve to, so that
# of two threads changing them, the later publish is of the later state.
_publish_lock = ForkSafeLock()


def _publish_backend_table() -> None:
    """Publishes resolve's answers, after a change of the default or of the
    Python backends, to the C++ kernels (torch_kernels.cc), which apply no rule
    of their own."""
    with _publish_lock:
        codes = []
        for name in _KERNEL_BACKEND_SLOTS:
            for device_type in ("cpu", "cuda"):
                # -1: the Python path runs the call, or raises its error with the call's op.
                try:
                    resolved, error = _resolution(name, torch.device(device_type))
                    code = -1 if error else NATIVE_BACKEND_CODES.get(resolved, -1)
                except OperatorRuntimeError:
                    code = -1
                codes.append(code)
        _C.set_backend_table(codes)


_publish_backend_table()
