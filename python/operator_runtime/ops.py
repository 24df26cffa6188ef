"""The operators, generated at import from the C runtime's operator table.

For every operator ``op`` this module defines three functions:

- ``op(*inputs, **params, backend=None)`` allocates and returns the output;
- ``op_(out, *inputs, **params, backend=None)`` writes into ``out`` and returns it;
- ``prepare_op(out, *inputs, **params, backend=None)`` returns a ``Prepared``
  whose descriptor and workspace are reused by every ``run()``.

Adding an operator to the C runtime adds its functions here with no edit.
"""

from __future__ import annotations

import enum
import inspect
import textwrap
import operator as _operator
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import torch

from operator_runtime import _C, backends
from operator_runtime._internal import tensors
from operator_runtime.errors import InvalidArgumentError, from_c_error

# The parameter that names the axis of reductions and normalizations.
AXIS_PARAM = "dim"


class Kind(enum.IntEnum):
    """How an operator's output shape follows from its inputs."""

    ELEMENTWISE = _C.OPRT_KIND_ELEMENTWISE
    REDUCTION = _C.OPRT_KIND_REDUCTION
    NORMALIZATION = _C.OPRT_KIND_NORMALIZATION


@dataclass(frozen=True)
class OperatorInfo:
    """One entry of the C runtime's operator table."""

    name: str
    kind: Kind
    input_names: tuple[str, ...]
    param_names: tuple[str, ...]
    param_defaults: tuple[float, ...]

    def default(self, param: str) -> float | int:
        value = self.param_defaults[self.param_names.index(param)]
        return int(value) if param == AXIS_PARAM else value


def operators() -> list[OperatorInfo]:
    """The operators built into the C runtime."""
    return [
        OperatorInfo(name, Kind(kind), tuple(inputs), tuple(params), tuple(defaults))
        for name, kind, inputs, params, defaults in _C.operators()
    ]


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(extent) for extent in shape) + "]"


def axis_value(op: str, dim: Any) -> int:
    """dim as a Python int, or InvalidArgumentError for bools and non-integers."""
    if isinstance(dim, bool):
        raise InvalidArgumentError(f"{op}: {AXIS_PARAM} must be an integer, got a bool")
    try:
        return _operator.index(dim)
    except TypeError:
        raise InvalidArgumentError(
            f"{op}: {AXIS_PARAM} must be an integer, got {type(dim).__name__}"
        ) from None


def normalize_axis(op: str, dim: Any, ndim: int) -> int:
    """dim as a non-negative axis of an ndim tensor (a 0-d tensor has none)."""
    dim = axis_value(op, dim)
    if not -ndim <= dim < ndim:
        raise InvalidArgumentError(f"{op}: axis {dim} out of range for ndim {ndim}")
    return dim % ndim


def _broadcast_shape(op: str, shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """numpy's broadcast of shapes (torch.broadcast_shapes costs ~15 us a call)."""
    result = [1] * max(len(shape) for shape in shapes)
    for shape in shapes:
        for axis, extent in enumerate(shape, len(result) - len(shape)):
            if extent != result[axis] and extent != 1:
                if result[axis] != 1:
                    shapes_text = " and ".join(_shape_text(shape) for shape in shapes)
                    raise InvalidArgumentError(f"{op}: shapes {shapes_text} are not broadcastable")
                result[axis] = extent
    return tuple(result)


def output_shape(
    info: OperatorInfo,
    input_shapes: Sequence[Sequence[int]],
    params: dict[str, Any],
    keepdim: bool = False,
) -> tuple[int, ...]:
    """The shape of op's output for inputs of input_shapes."""
    if info.kind == Kind.ELEMENTWISE:
        return _broadcast_shape(info.name, input_shapes)
    shape = tuple(input_shapes[0])
    if info.kind == Kind.NORMALIZATION:
        return shape
    axis = normalize_axis(info.name, params[AXIS_PARAM], len(shape))
    return shape[:axis] + ((1,) if keepdim else ()) + shape[axis + 1 :]


def _param_values(info: OperatorInfo, params: dict[str, Any]) -> list[float]:
    return [
        float(axis_value(info.name, params[name]) if name == AXIS_PARAM else params[name])
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
            f"shape {_shape_text(self.shape)}, strides {_shape_text(self.strides)}, "
            f"{dtype} on {self.device}"
        )


def _aliasing(out_ptr: int, out: _Layout, in_ptr: int, inp: _Layout) -> str:
    """How out and an input share memory: "same", "disjoint" or "partial"."""
    if out_ptr == in_ptr and out == inp:
        return "same"
    if out_ptr + out.span_bytes() <= in_ptr or in_ptr + inp.span_bytes() <= out_ptr:
        return "disjoint"
    return "partial"


class Prepared:
    """An operator descriptor created once for fixed tensor layouts.

    ``run()`` executes it on the current stream; ``run(*inputs, out=None)``
    first rebinds to new tensors of exactly the same shapes, strides, dtype and
    device. The workspace is allocated once per stream the descriptor runs
    on. Use as a context manager, or call ``destroy()``.
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
        out = tensors.as_tensor(op, "out", out)
        inputs = tuple(
            tensors.as_tensor(op, role, value) for role, value in zip(info.input_names, inputs)
        )
        named = [("out", out), *zip(info.input_names, inputs)]
        device = tensors.common_device(op, named)
        # Inputs first, so a bad dtype is reported where the caller gave it.
        input_views = [tensors.view(op, role, tensor) for role, tensor in named[1:]]
        out_view = tensors.view(op, "out", out)
        self.backend = backends.resolve(op, backend, device)
        param_values = _param_values(info, params)

        python_backend = backends.python_backend(self.backend)
        if python_backend is not None:
            self._kernel = python_backend.prepare(op, out, inputs, param_values)
            self._execute = self._execute_python
            self.workspace_size = 0
        else:
            code = backends.NATIVE_BACKEND_CODES[self.backend]
            try:
                self._descriptor = _C.Descriptor(op, code, out_view, input_views, param_values)
            except _C.Error as error:
                raise from_c_error(error) from None
            self._execute = self._descriptor.execute
            self.workspace_size = self._descriptor.workspace_size
        self._device = device
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
        self._bind(out, inputs)
        self._created_ptrs = (self._out_ptr, self._input_ptrs)

    def _bind(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> None:
        # The tensors are held so their memory outlives every launch using it.
        self._out = out
        self._inputs = tuple(inputs)
        self._out_ptr = out.data_ptr()
        self._input_ptrs = tuple(tensor.data_ptr() for tensor in inputs)

    def _add_workspace(self, stream: int) -> int:
        # Allocated while `stream` is current, so the caching allocator ties it to that stream.
        workspace = torch.empty(self.workspace_size, dtype=torch.uint8, device=self._device)
        self._workspaces[stream] = workspace
        self._workspace_ptrs[stream] = workspace.data_ptr()
        return workspace.data_ptr()

    def _execute_python(self, out_ptr, input_ptrs, stream, workspace_ptr, workspace_size) -> None:
        if self._destroyed:
            raise InvalidArgumentError(f"{self.op}: descriptor was destroyed")
        self._kernel.run(self._out, self._inputs, stream)

    def _checked(self, role: str, value: Any, expected: _Layout) -> torch.Tensor:
        tensor = tensors.as_tensor(self.op, role, value)
        layout = _Layout.of(tensor)
        if layout != expected:
            raise InvalidArgumentError(
                f"{self.op}: prepared run got {role} with {layout.describe()}, but the descriptor "
                f"was created for {expected.describe()}; prepare a new descriptor for a new layout"
            )
        return tensor

    def _rebind(self, inputs: Sequence[Any], out: Any) -> None:
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
        self._bind(new_out, new_inputs)

    def run(self, *inputs: Any, out: Any = None) -> torch.Tensor:
        """Executes on the current stream and returns out; with arguments,
        first rebinds to new inputs and/or out of the same layouts."""
        if inputs or out is not None:
            self._rebind(inputs, out)
        stream = self._stream()
        workspace_ptr = self._workspace_ptrs.get(stream, 0) if self.workspace_size else 0
        if self.workspace_size and not workspace_ptr:
            workspace_ptr = self._add_workspace(stream)
        try:
            self._execute(
                self._out_ptr, self._input_ptrs, stream, workspace_ptr, self.workspace_size
            )
        except _C.Error as error:
            raise from_c_error(error) from None
        return self._out

    @property
    def out(self) -> torch.Tensor:
        return self._out

    def destroy(self) -> None:
        """Releases the descriptor and workspace; later runs raise InvalidArgumentError."""
        if self._destroyed:
            return
        self._destroyed = True
        if hasattr(self, "_kernel"):
            self._kernel.destroy()
        else:
            try:
                self._descriptor.destroy()
            except _C.Error as error:
                raise from_c_error(error) from None
        self._workspaces.clear()
        self._workspace_ptrs.clear()

    def __enter__(self) -> Prepared:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.destroy()

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else f"workspace {self.workspace_size} B"
        return f"<Prepared {self.op} on {self.backend}, {state}>"


def _on_device(device: torch.device, execute):
    def execute_on_device(*args):
        with torch.cuda.device(device):
            execute(*args)

    return execute_on_device


def _input_tensors(info: OperatorInfo, arguments: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    return tuple(tensors.as_tensor(info.name, name, arguments[name]) for name in info.input_names)


def _param_arguments(info: OperatorInfo, arguments: dict[str, Any]) -> dict[str, Any]:
    return {name: arguments[name] for name in info.param_names}


def _out_of_place(info: OperatorInfo, arguments: dict[str, Any]) -> torch.Tensor:
    inputs = _input_tensors(info, arguments)
    params = _param_arguments(info, arguments)
    shape = output_shape(
        info, [tensor.shape for tensor in inputs], params, arguments.get("keepdim", False)
    )
    device = tensors.common_device(info.name, list(zip(info.input_names, inputs)))
    out = torch.empty(shape, dtype=inputs[0].dtype, device=device)
    return _out_variant(info, dict(arguments, out=out, **dict(zip(info.input_names, inputs))))


def _out_variant(info: OperatorInfo, arguments: dict[str, Any]) -> torch.Tensor:
    prepared = Prepared(
        info,
        arguments["out"],
        _input_tensors(info, arguments),
        _param_arguments(info, arguments),
        arguments["backend"],
    )
    try:
        return prepared.run()
    finally:
        prepared.destroy()


def _prepare(info: OperatorInfo, arguments: dict[str, Any]) -> Prepared:
    return Prepared(
        info,
        arguments["out"],
        _input_tensors(info, arguments),
        _param_arguments(info, arguments),
        arguments["backend"],
    )


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
_VARIANT_TEXT = {
    "out_of_place": "Returns {output}.",
    "out": (
        "Writes the result into `out` and returns it; out may be an input itself "
        "(in-place) but must not otherwise overlap one."
    ),
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
    what = _VARIANT_TEXT[variant].format(output=_KIND_OUTPUT[info.kind])
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


def _binder(function_name: str, signature: inspect.Signature):
    """A fast equivalent of signature.bind + apply_defaults for these simple
    signatures (inspect's costs ~10 us per call, more than a whole launch)."""
    parameters = signature.parameters.values()
    positional = [p.name for p in parameters if p.kind == p.POSITIONAL_OR_KEYWORD]
    names = set(signature.parameters)
    required = [p.name for p in parameters if p.default is p.empty]
    defaults = {p.name: p.default for p in parameters if p.default is not p.empty}

    def bind(args: tuple, kwargs: dict) -> dict[str, Any]:
        if len(args) > len(positional):
            raise TypeError(
                f"{function_name}() takes {len(positional)} positional arguments "
                f"but {len(args)} were given"
            )
        arguments = dict(zip(positional, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{function_name}() got an unexpected keyword argument {key!r}")
            if key in arguments:
                raise TypeError(f"{function_name}() got multiple values for argument {key!r}")
            arguments[key] = value
        missing = [name for name in required if name not in arguments]
        if missing:
            raise TypeError(f"{function_name}() missing required arguments: {', '.join(missing)}")
        return {**defaults, **arguments}

    return bind


def _define(info: OperatorInfo, name: str, variant: str, implementation) -> Any:
    keepdim = variant == "out_of_place" and info.kind == Kind.REDUCTION
    leading = list(info.input_names) if variant == "out_of_place" else ["out", *info.input_names]
    signature = _signature(info, leading, keepdim)
    bind = _binder(name, signature)

    def function(*args: Any, **kwargs: Any) -> Any:
        return implementation(info, bind(args, kwargs))

    function.__name__ = function.__qualname__ = name
    function.__module__ = "operator_runtime"
    function.__doc__ = _docstring(info, variant, signature)
    function.__signature__ = signature
    return function


_IMPLEMENTATIONS = {"out_of_place": _out_of_place, "out": _out_variant, "prepare": _prepare}
OPERATORS: dict[str, OperatorInfo] = {info.name: info for info in operators()}

__all__ = ["Kind", "OperatorInfo", "Prepared", "operators", "output_shape", "OPERATORS"]
for _info in OPERATORS.values():
    for _variant, _name in _variant_names(_info.name):
        globals()[_name] = _define(_info, _name, _variant, _IMPLEMENTATIONS[_variant])
        __all__.append(_name)
del _info, _name, _variant
