"""The operators, generated at import from the C runtime's operator table.

For every operator ``op`` this module defines three functions:

- ``op(*inputs, **params, backend=None)`` allocates and returns the output;
- ``op_(out, *inputs, **params, backend=None)`` writes into ``out`` and returns it;
- ``prepare_op(out, *inputs, **params, backend=None)`` returns a ``Prepared``
  whose descriptor and workspace are reused by every ``run()``.

``op`` and ``op_`` call the torch.library ops ``torch.ops.oprt.op`` and
``torch.ops.oprt.op_out`` (library.py), so torch.compile, torch.export,
FakeTensor and autograd's checks see them like any torch op. Adding an
operator to the C runtime adds its functions here with no edit.
"""

from __future__ import annotations

import inspect
import numbers
import textwrap
import weakref
from typing import Any, NamedTuple, NoReturn, Sequence

import torch

from operator_runtime import _C, backends, library
from operator_runtime._internal import tensors
from operator_runtime._internal.bounded_cache import BoundedCache, ForkSafeLock, params_key
from operator_runtime.errors import InvalidArgumentError, RuntimeFailure, from_c_error
from operator_runtime.operator_table import (
    AXIS_PARAM,
    OPERATORS,
    Kind,
    OperatorInfo,
    axis_value,
    operators,
    output_shape,
    shape_text,
)


def _param_values(info: OperatorInfo, params: dict[str, Any], first_input: torch.Tensor) -> list[float]:
    """params as the C ABI takes them (doubles), once a dim is known to be an axis
    of first_input (library.check_axis); other params checked as the other forms
    check them (_number)."""
    library.check_axis(info, [first_input], [params[name] for name in info.param_names])
    return [
        float(axis_value(info.name, params[name])) if name == AXIS_PARAM
        else _number(info.name, name, params[name])
        for name in info.param_names
    ]


class _Layout(NamedTuple):
    """What a prepared descriptor fixed about a tensor."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    @staticmethod
    def of(tensor: torch.Tensor) -> _Layout:
        return _Layout(tuple(tensor.shape), tensor.stride(), tensor.dtype, tensor.device)

    def span_bytes(self) -> int:
        """Bytes from the first element to just past the last one (strides are >= 0 in torch)."""
        if 0 in self.shape:
            return 0
        last = sum((extent - 1) * stride for extent, stride in zip(self.shape, self.strides))
        return (last + 1) * self.dtype.itemsize

    def describe(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return (
            f"shape {shape_text(self.shape)}, strides {shape_text(self.strides)}, "
            f"{dtype} on {self.device}"
        )


def _aliasing(out_ptr: int, out: _Layout, in_ptr: int, inp: _Layout) -> str:
    """How out and an input share memory: "same", "disjoint" or "partial"."""
    if out_ptr == in_ptr and out == inp:
        return "same"
    if out_ptr + out.span_bytes() <= in_ptr or in_ptr + inp.span_bytes() <= out_ptr:
        return "disjoint"
    return "partial"


class _Created(NamedTuple):
    """A call create has validated: its tensors, device and backend, and the
    descriptor (a cpu one for a Python backend, whose kernel it holds too)."""

    out: torch.Tensor
    inputs: tuple[torch.Tensor, ...]
    device: torch.device
    backend: str
    descriptor: Any
    kernel: backends.PythonKernel | None


# What a Python backend's prepare must return (backends.PythonKernel).
_KERNEL_METHODS = ("run", "release", "destroy")


def _create(info: OperatorInfo, out: Any, inputs: Sequence[Any], params: dict[str, Any],
            backend: str | None) -> _Created:
    """Validates a call as the C runtime's create does (raising its error) and, on a
    Python backend, prepares the backend's kernel from the descriptor's plan."""
    op = info.name
    out = tensors.as_tensor(op, "out", out, writable=True)
    inputs = tuple(tensors.as_tensor(op, role, value) for role, value in zip(info.input_names, inputs))
    named = [("out", out), *zip(info.input_names, inputs)]
    device = tensors.common_device(op, named)
    # Inputs first, so a bad dtype is reported where the caller gave it.
    input_views = [tensors.view(op, role, tensor) for role, tensor in named[1:]]
    out_view = tensors.view(op, "out", out)
    name = backends.resolve(op, backend, device)
    param_values = _param_values(info, params, inputs[0])
    python_backend = None if name in backends.NATIVE_BACKEND_CODES else backends.registered_python_backend(op, name)
    # A Python backend's calls are checked and planned by a cpu descriptor of the
    # same views (create never touches memory): the backend launches from its plan,
    # and each run re-checks the layouts and storage with it.
    code = backends.NATIVE_BACKEND_CODES.get(name, _C.OPRT_BACKEND_CPU)
    try:
        descriptor = _C.Descriptor(op, code, out_view, input_views, param_values)
    except _C.Error as error:
        raise from_c_error(error) from None
    kernel = None
    if python_backend is not None:
        kernel = python_backend.prepare(op, descriptor.plan, out, inputs, param_values)
        if not all(callable(getattr(kernel, method, None)) for method in _KERNEL_METHODS):
            descriptor.destroy()
            raise RuntimeFailure(
                f"{op}: backend {name!r} prepared no kernel (its prepare returned "
                f"{type(kernel).__name__}, which has no {', '.join(_KERNEL_METHODS)})"
            )
    return _Created(out, inputs, device, name, descriptor, kernel)


class Prepared:
    """An operator descriptor created once for fixed tensor layouts.

    ``run()`` executes it on the current stream; ``run(*inputs, out=None)``
    first rebinds to new tensors of exactly the same shapes, strides, dtype and
    device. Every run reads the bound tensors as they are then: one whose
    layout changed since (``resize_``, ``set_``, ``t_()``) or that reaches past
    its storage (``untyped_storage().resize_(0)``) is refused, and a tensor whose
    memory moved (``.data = ...``) is run where it now is. Runs, rebinds and
    ``destroy()`` may come from several threads. The workspace is allocated once
    per stream the descriptor runs on. Use as a context manager, or call
    ``destroy()``.
    """

    def __init__(
        self,
        info: OperatorInfo,
        out: Any,
        inputs: Sequence[Any],
        params: dict[str, Any],
        backend: str | None = None,
    ):
        op = info.name
        self.op = op
        self._info = info
        self._destroyed = False
        created = _create(info, out, inputs, params, backend)
        out, inputs, device = created.out, created.inputs, created.device
        self.backend = created.backend
        self._descriptor = created.descriptor
        python_backend = created.kernel is not None
        if python_backend:
            self._kernel = created.kernel
            self._kernel_lock = ForkSafeLock()
            self._execute = self._execute_python
            self.workspace_size = 0
        else:
            self._execute = self._execute_native
            self.workspace_size = self._descriptor.workspace_size
        self._device = device
        self._device_index = out.get_device()
        # Runs go through torch's oprt::_prepared_run (C++, library.PREPARED_RUN) when
        # the descriptor is native; 0: always the Python path (a Python backend).
        self._prepared_id = 0 if python_backend else self._descriptor.prepared_id(self._device_index)
        self._stream = tensors.stream_getter(device)
        # One workspace per stream, so runs on different streams never share one.
        self._workspaces: dict[int, torch.Tensor] = {}
        self._workspace_ptrs: dict[int, int] = {}
        if self.workspace_size:
            self._add_workspace(self._stream())
        if device.type == "cuda" and torch.cuda.device_count() > 1:
            self._execute = _on_device(device, self._execute)

        self._out_layout = _Layout.of(out)
        self._input_layouts = tuple(_Layout.of(tensor) for tensor in inputs)
        self._created_ptrs = (out.data_ptr(), tuple(tensor.data_ptr() for tensor in inputs))
        self._bound = (out, tuple(inputs))

    @property
    def _out(self) -> torch.Tensor:
        return self._bound[0]

    @property
    def _inputs(self) -> tuple[torch.Tensor, ...]:
        return self._bound[1]

    def _add_workspace(self, stream: int) -> int:
        # Allocated while `stream` is current, so the caching allocator ties it to that stream.
        workspace = torch.empty(self.workspace_size, dtype=torch.uint8, device=self._device)
        self._workspaces[stream] = workspace
        self._workspace_ptrs[stream] = workspace.data_ptr()
        return workspace.data_ptr()

    def _execute_native(self, out, inputs, stream, workspace_ptr, workspace_size) -> None:
        self._descriptor.run(out, inputs, self._device_index, stream, workspace_ptr, workspace_size)

    def _execute_python(self, out, inputs, stream, workspace_ptr, workspace_size) -> None:
        # destroy() waits for a run in flight: the kernel never runs once destroyed.
        with self._kernel_lock:
            self._descriptor.check_bound(out, inputs, self._device_index)  # raises once destroyed
            self._kernel.run(out, inputs, stream)

    def _checked(self, role: str, value: Any, expected: _Layout) -> torch.Tensor:
        tensor = tensors.as_tensor(self.op, role, value, writable=role == "out")
        layout = _Layout.of(tensor)
        if layout != expected:
            raise InvalidArgumentError(
                f"{self.op}: prepared run got {role} with {layout.describe()}, but the descriptor "
                f"was created for {expected.describe()}; prepare a new descriptor for a new layout"
            )
        return tensor

    def _rebind(self, inputs: Sequence[Any], out: Any) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        info = self._info
        if inputs and len(inputs) != len(info.input_names):
            raise InvalidArgumentError(
                f"{self.op}: prepared run takes all {len(info.input_names)} inputs "
                f"({', '.join(info.input_names)}) or none, got {len(inputs)}"
            )
        new_out = self._out if out is None else self._checked("out", out, self._out_layout)
        new_inputs = (
            tuple(
                self._checked(role, value, layout)
                for role, value, layout in zip(info.input_names, inputs, self._input_layouts)
            )
            if inputs
            else self._inputs
        )
        created_out_ptr, created_input_ptrs = self._created_ptrs
        for role, tensor, layout, created_ptr in zip(
            info.input_names, new_inputs, self._input_layouts, created_input_ptrs
        ):
            created = _aliasing(created_out_ptr, self._out_layout, created_ptr, layout)
            now = _aliasing(new_out.data_ptr(), self._out_layout, tensor.data_ptr(), layout)
            if now not in ("disjoint", created):
                raise InvalidArgumentError(
                    f"{self.op}: prepared run makes out overlap {role} ({now}) unlike the tensors "
                    f"the descriptor was created for; prepare a new descriptor"
                )
        bound = (new_out, new_inputs)
        self._bound = bound
        return bound

    def run(self, *inputs: Any, out: Any = None) -> torch.Tensor:
        """Executes on the current stream and returns out; with arguments,
        first rebinds to new inputs and/or out of the same layouts."""
        # This call's tensors, read once: they stay referenced by this call, and so
        # alive, and run, whatever another thread rebinds meanwhile.
        if inputs or out is not None:
            out, bound_inputs = self._rebind(inputs, out)
        else:
            out, bound_inputs = self._bound
        stream = self._stream()
        workspace_ptr = self._workspace_ptrs.get(stream, 0) if self.workspace_size else 0
        if self.workspace_size and not workspace_ptr:
            workspace_ptr = self._add_workspace(stream)
        if self._prepared_id:
            try:
                ran = not library.PREPARED_RUN(
                    out, bound_inputs, self._prepared_id, workspace_ptr, self.workspace_size
                )
            except RuntimeError:  # torch's dispatcher refused the call (a negated out)
                ran = False
            if ran:
                return out
        # The Python path: it runs the call the C++ one refused, or raises why.
        library.check_autograd(self.op, out, bound_inputs, self._info.input_names, out_form=True)
        try:
            self._execute(out, bound_inputs, stream, workspace_ptr, self.workspace_size)
        except _C.Error as error:
            raise from_c_error(error) from None
        torch.autograd.graph.increment_version(out)
        return out

    @property
    def out(self) -> torch.Tensor:
        return self._out

    def destroy(self) -> None:
        """Releases the descriptor and workspace; later runs raise InvalidArgumentError."""
        if self._destroyed:
            return
        self._destroyed = True
        self._workspaces.clear()
        self._workspace_ptrs.clear()
        if hasattr(self, "_kernel"):
            with self._kernel_lock:
                try:
                    self._destroy_descriptor()
                finally:
                    self._kernel.destroy()
        else:
            self._destroy_descriptor()

    def _destroy_descriptor(self) -> None:
        try:
            self._descriptor.destroy()
        except _C.Error as error:
            raise from_c_error(error) from None

    def __enter__(self) -> Prepared:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.destroy()

    def _refuse_copy(self) -> NoReturn:
        # A copy would share the descriptor, which either one's destroy() releases.
        raise TypeError(f"{self.op}: a Prepared cannot be copied or pickled; call "
                        f"prepare_{self.op} again for another descriptor")

    def __copy__(self) -> NoReturn:
        self._refuse_copy()

    def __deepcopy__(self, memo: dict) -> NoReturn:
        self._refuse_copy()

    def __reduce_ex__(self, protocol: int) -> NoReturn:
        self._refuse_copy()

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else f"workspace {self.workspace_size} B"
        return f"<Prepared {self.op} on {self.backend}, {state}>"


def _on_device(device: torch.device, execute):
    def execute_on_device(*args):
        with torch.cuda.device(device):
            execute(*args)

    return execute_on_device


class _PythonBackendCall:
    """ort.<op>() and <op>_() on a Python backend, for one call signature: the cpu
    descriptor that checks the call and the backend's kernel, made by the first
    call of that signature and kept, holding no tensor between calls. The kernel
    is destroyed once the call is dropped (evicted or made anew) and no thread
    still runs it: a finalizer, so an eviction never destroys a kernel in use."""

    def __init__(self, created: _Created):
        self._descriptor = created.descriptor
        self._kernel = created.kernel
        weakref.finalize(self, created.kernel.destroy).atexit = False
        self._device_index = created.out.get_device()
        self._stream = tensors.stream_getter(created.device)
        self._execute = self._launch
        if created.device.type == "cuda" and torch.cuda.device_count() > 1:
            self._execute = _on_device(created.device, self._launch)

    def _launch(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> None:
        self._descriptor.check_bound(out, inputs, self._device_index)
        try:
            self._kernel.run(out, inputs, self._stream())
        finally:
            self._kernel.release()

    def run(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> None:
        self._execute(out, inputs)


# Python-backend calls kept by signature: the op, the backend object (one registered
# anew is another), what its prepare also depends on (prepare_key), the params, and
# _C.signature's bytes (every tensor's dtype, device, shape, strides and alignment,
# how out overlaps each input).
PYTHON_BACKEND_CALLS: BoundedCache[_PythonBackendCall] = BoundedCache(capacity=64)


def run_on_python_backend(info: OperatorInfo, out: torch.Tensor, inputs: Sequence[torch.Tensor],
                          params: Sequence[Any], name: str) -> None:
    """Runs a call of ort.<op>() or <op>_() on the Python backend `name`. A call of a
    signature seen before creates and plans nothing; one its kept descriptor refuses
    (a tensor past its storage, ...) is made anew, which raises what is wrong."""
    python_backend = backends.registered_python_backend(info.name, name)
    try:
        key = (info.name, python_backend, python_backend.prepare_key(), params_key(params),
               _C.signature(out, *inputs))
    except _C.Error:
        key = None  # a tensor the runtime refuses: made anew below, which says why
    try:
        call = PYTHON_BACKEND_CALLS.get(key)
    except TypeError:
        raise RuntimeFailure(
            f"{info.name}: backend {name!r}'s prepare_key() returned an unhashable "
            f"{type(python_backend.prepare_key()).__name__}"
        ) from None
    if call is not None:
        try:
            call.run(out, inputs)
            return
        except _C.Error:
            PYTHON_BACKEND_CALLS.discard(key)
    call = _PythonBackendCall(_create(info, out, inputs, dict(zip(info.param_names, params)), name))
    try:
        call.run(out, inputs)
    except _C.Error as error:
        raise from_c_error(error) from None
    if key is not None:
        PYTHON_BACKEND_CALLS.put(key, call)


def _prepare(info: OperatorInfo, out: Any, inputs: Sequence[Any], params: dict[str, Any],
             backend: str | None) -> Prepared:
    return Prepared(info, out, inputs, params, backend)


_KIND_SUMMARY = {
    Kind.ELEMENTWISE: "Elementwise `{name}` of {inputs}.",
    Kind.REDUCTION: "`{name}` of {inputs} over axis `dim` (negative counts from the end).",
    Kind.NORMALIZATION: "`{name}` of {inputs} along axis `dim` (negative counts from the end).",
}
_KIND_OUTPUT = {
    Kind.ELEMENTWISE: "a new contiguous tensor of the inputs' broadcast shape",
    Kind.REDUCTION: "a new tensor of the input's shape without `dim` (kept as 1 with keepdim=True)",
    Kind.NORMALIZATION: "a new tensor of the input's shape",
}
# How out may share memory with the inputs, by kind (docs/operators.md).
_KIND_ALIASING = {
    Kind.ELEMENTWISE: "out may be an input itself (in-place) but must not otherwise overlap one",
    Kind.REDUCTION: "out must not share memory with the input",
    Kind.NORMALIZATION: "out may be an input itself (in-place) but must not otherwise overlap one",
}
_VARIANT_TEXT = {
    "out_of_place": "Returns {output}.",
    "out": "Writes the result into `out` and returns it; {aliasing}.",
    "prepare": (
        "Validates once and returns a Prepared: .run() executes on the current stream, "
        ".run(*inputs, out=...) first rebinds tensors of the same layouts, .destroy() "
        "releases it (or use it as a context manager)."
    ),
}
_ARGUMENT_TEXT = {
    "out": "the output tensor, of any strides.",
    "keepdim": "keep the reduced axis as extent 1 (default False).",
    "backend": (
        "'cpu', 'nvidia', 'metax' or 'tilelang'; None uses set_default_backend's "
        "choice, else the tensors' device (CPU -> cpu, CUDA -> nvidia)."
    ),
}
_INPUT_TEXT = "float32, float16 or bfloat16; a torch tensor or any __dlpack__ tensor; any strides."
_RAISES_TEXT = (
    "InvalidArgumentError (a ValueError), UnsupportedDtypeError (a TypeError), "
    "NotSupportedError, RuntimeFailure; each carries .status and .message."
)


def _variant_names(op: str) -> list[tuple[str, str]]:
    """(variant, function name) of the three functions each operator gets."""
    return [("out_of_place", op), ("out", op + "_"), ("prepare", "prepare_" + op)]


def _docstring(info: OperatorInfo, variant: str, signature: inspect.Signature) -> str:
    inputs = ", ".join(f"`{name}`" for name in info.input_names)
    summary = _KIND_SUMMARY[info.kind].format(name=info.name, inputs=inputs)
    if info.kind == Kind.ELEMENTWISE and len(info.input_names) > 1:
        summary = summary[:-1] + ", broadcast together."
    what = _VARIANT_TEXT[variant].format(output=_KIND_OUTPUT[info.kind], aliasing=_KIND_ALIASING[info.kind])
    lines = []
    for name in signature.parameters:
        if name in info.input_names:
            text = _INPUT_TEXT
        elif name in info.param_names:
            text = f"default {info.default(name)!r}."
        else:
            text = _ARGUMENT_TEXT[name]
        lines.append(textwrap.fill(f"{name}: {text}", 88, initial_indent="    ", subsequent_indent="        "))
    others = [name for kind, name in _variant_names(info.name) if kind != variant]
    return "\n".join(
        [
            textwrap.fill(f"{summary} {what}", 88),
            "",
            "Args:",
            *lines,
            "",
            "Raises:",
            textwrap.fill(_RAISES_TEXT, 88, initial_indent="    ", subsequent_indent="    "),
            "",
            f"See also: {', '.join(others)}.",
        ]
    )


def _signature(info: OperatorInfo, leading: Sequence[str], keepdim: bool) -> inspect.Signature:
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter(name, positional) for name in leading]
    parameters += [
        inspect.Parameter(name, positional, default=info.default(name)) for name in info.param_names
    ]
    if keepdim:
        parameters.append(inspect.Parameter("keepdim", positional, default=False))
    parameters.append(inspect.Parameter("backend", inspect.Parameter.KEYWORD_ONLY, default=None))
    return inspect.Signature(parameters)


def _source(info: OperatorInfo, name: str, variant: str, signature: inspect.Signature) -> str:
    """The Python source of one generated function: argument checks that need no
    tensor data (each skipped when the argument is already what the op takes: this
    runs on every call), then one call of the torch op (or of Prepared)."""
    op = info.name
    lines = [f"def {name}{signature}:"]
    if variant == "prepare":
        param_dict = ", ".join(f"{param!r}: {param}" for param in info.param_names)
        input_tuple = "".join(f"{role}, " for role in info.input_names)
        lines.append(f"    return _prepare(_info, out, ({input_tuple}), {{{param_dict}}}, backend)")
        return "\n".join(lines) + "\n"
    if variant == "out":
        lines.append(f"    out = _tensor({op!r}, 'out', out, True)")
    for role in info.input_names:
        lines += [
            f"    if type({role}) is not _Tensor or {role}.layout is not _strided or {role}.is_nested:",
            f"        {role} = _tensor({op!r}, {role!r}, {role})",
        ]
    for param in info.param_names:
        if param == AXIS_PARAM:
            # torch's schema takes an int64 dim; past it, torch's own parser would say
            # "Expected a value of type 'int'" for an int.
            lines += [
                f"    if type({param}) is not int or not -0x8000000000000000 <= {param} <= 0x7FFFFFFFFFFFFFFF:",
                f"        {param} = _axis({op!r}, {param}, {info.input_names[0]})",
            ]
        else:
            lines += [
                f"    if type({param}) is not float:",
                f"        {param} = _number({op!r}, {param!r}, {param})",
            ]
    arguments = [*info.input_names, *info.param_names]
    if variant == "out_of_place":
        if info.kind == Kind.REDUCTION:
            lines += ["    if type(keepdim) is not bool:", f"        _keepdim({op!r}, keepdim)"]
            arguments.append("keepdim")
        call = "_functional"
    else:
        arguments.insert(0, "out")
        call = "_out_variant"
    listed = ", ".join(arguments)
    lines += [
        "    if backend is not None:",
        "        _backend(backend)",
        f"    {'return ' if variant == 'out_of_place' else ''}{call}({listed}, backend)",
    ]
    if variant == "out":
        lines.append("    return out")
    return "\n".join(lines) + "\n"


def _axis(op: str, dim: Any, tensor: torch.Tensor) -> int:
    """dim as an int64 (operator_table.axis_value's checks, then the range torch's
    schema holds: beyond it no tensor has that axis)."""
    dim = axis_value(op, dim)
    if not -(2**63) <= dim < 2**63:
        raise InvalidArgumentError(f"{op}: dim {dim} out of range for ndim {tensor.dim()}")
    return dim


def _operand(op: str, role: str, value: Any, writable: bool = False) -> Any:
    """A tensor argument of the generated functions (tensors.as_tensor), except
    that torch.fx's symbolic tracing passes Proxies, which go to the torch op as
    they are: it records the call."""
    if isinstance(value, torch.fx.Proxy):
        return value
    return tensors.as_tensor(op, role, value, writable)


def _keepdim(op: str, keepdim: Any) -> bool:
    if not isinstance(keepdim, bool):
        raise InvalidArgumentError(f"{op}: keepdim must be a bool, got {type(keepdim).__name__}")
    return keepdim


def _number(op: str, name: str, value: Any) -> float:
    """value as a float: any real number (int, float, NumPy's scalars), never a bool
    (NumPy's bool is no numbers.Real)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(f"{op}: {name} must be a number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise InvalidArgumentError(f"{op}: {name} {value} does not fit a double") from None


def _backend(name: Any) -> str | None:
    if name is not None:
        backends.check_name(name)
    return name


def _define(info: OperatorInfo, name: str, variant: str) -> Any:
    keepdim = variant == "out_of_place" and info.kind == Kind.REDUCTION
    leading = list(info.input_names) if variant == "out_of_place" else ["out", *info.input_names]
    signature = _signature(info, leading, keepdim)
    functional, out_variant = library.TORCH_OPS[info.name]
    scope = {
        "_info": info,
        "_functional": functional,
        "_out_variant": out_variant,
        "_prepare": _prepare,
        "_tensor": _operand,
        "_Tensor": torch.Tensor,
        "_strided": torch.strided,
        "_axis": _axis,
        "_number": _number,
        "_keepdim": _keepdim,
        "_backend": _backend,
    }
    exec(compile(_source(info, name, variant, signature), f"<operator_runtime.{name}>", "exec"), scope)
    function = scope[name]
    function.__module__ = "operator_runtime"
    function.__doc__ = _docstring(info, variant, signature)
    return function


__all__ = ["Kind", "OperatorInfo", "Prepared", "operators", "output_shape", "OPERATORS"]
for _info in OPERATORS.values():
    for _variant, _name in _variant_names(_info.name):
        globals()[_name] = _define(_info, _name, _variant)
        __all__.append(_name)
del _info, _name, _variant
