"""API-error cases every operator shares, built from its kind and names.

An operator's ``api_error_cases()`` returns ``common_api_error_cases(OP)``
plus the cases only it has. Calls go through the public API with the backend
under test, so each error is checked where users meet it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

import operator_runtime as ort
from operator_runtime import _C, backends
from operator_runtime._internal.tensors import view as tensor_view
from operator_runtime.backends import NATIVE_BACKEND_CODES
from operator_runtime.errors import from_c_error
from operator_runtime.ops import Kind
from operator_runtime_testing.cases import ApiErrorCase, ErrorContext, OpSpec, out_shape

SHAPE = (4, 6)


class Operands:
    """Valid operands of an operator: inputs of `shape` and a matching out."""

    def __init__(
        self,
        op: OpSpec,
        ctx: ErrorContext,
        shape: Sequence[int] = SHAPE,
        dtype: torch.dtype = torch.float32,
        device: Any = None,
    ):
        self.op = op
        self.ctx = ctx
        names = op.info.input_names
        self.inputs = [ctx.tensor(shape, dtype, device) for _ in names]
        self.out = ctx.tensor(out_shape(op.name, [tuple(shape)] * len(names), {}), dtype, device)

    def out_variant(self, out=None, inputs=None, **kwargs):
        function = getattr(ort, self.op.name + "_")
        kwargs.setdefault("backend", self.ctx.backend)
        return function(self.out if out is None else out, *(inputs or self.inputs), **kwargs)

    def out_of_place(self, inputs=None, **kwargs):
        function = getattr(ort, self.op.name)
        kwargs.setdefault("backend", self.ctx.backend)
        return function(*(inputs or self.inputs), **kwargs)

    def prepare(self, **kwargs):
        function = getattr(ort, "prepare_" + self.op.name)
        return function(self.out, *self.inputs, backend=self.ctx.backend, **kwargs)


def _case(name: str, error: type, message: str, call: Callable[[ErrorContext], Any]) -> ApiErrorCase:
    return ApiErrorCase(name, call, error, error.default_status, message)


def _overlapping_operands(op: OpSpec, ctx: ErrorContext) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """An out that shares some but not all memory with the first input."""
    operands = Operands(op, ctx)
    first = operands.inputs[0]
    buffer = ctx.tensor((first.numel() + 1,))
    inputs = [buffer[:-1].view(first.shape), *operands.inputs[1:]]
    out = buffer[1 : 1 + operands.out.numel()].view(operands.out.shape)
    return out, inputs


def _create_through_binding(op: OpSpec, ctx: ErrorContext, backend: str, dtype_code=None) -> None:
    """Creates a descriptor with _C directly, past the Python checks, so the C
    runtime's own answer is what is tested."""
    operands = Operands(op, ctx)
    out_view = tensor_view(op.name, "out", operands.out)
    input_views = [tensor_view(op.name, "input", tensor) for tensor in operands.inputs]
    if dtype_code is not None:
        out_view = (out_view[0], dtype_code, *out_view[2:])
        input_views = [(view[0], dtype_code, *view[2:]) for view in input_views]
    params = [float(op.info.default(name)) for name in op.info.param_names]
    try:
        _C.Descriptor(op.name, NATIVE_BACKEND_CODES[backend], out_view, input_views, params).destroy()
    except _C.Error as error:
        raise from_c_error(error) from None


def _without_python_backend(name: str, call: Callable[[], Any]) -> Any:
    """call() with no Python backend registered under name (restored afterwards)."""
    registered = backends.python_backend(name)
    backends.unregister_python_backend(name)
    try:
        return call()
    finally:
        if registered is not None:
            backends.register_python_backend(name, registered)


def _run_after_destroy(op: OpSpec, ctx: ErrorContext) -> None:
    prepared = Operands(op, ctx).prepare()
    prepared.destroy()
    prepared.run()


def _rebind(op: OpSpec, ctx: ErrorContext, make_inputs) -> None:
    operands = Operands(op, ctx)
    with operands.prepare() as prepared:
        prepared.run(*make_inputs(operands))


def _transposed_like(tensor: torch.Tensor) -> torch.Tensor:
    return torch.ones(tuple(reversed(tensor.shape)), device=tensor.device).t()


def _rebind_overlapping_out(op: OpSpec, ctx: ErrorContext) -> None:
    out, inputs = _overlapping_operands(op, ctx)
    with Operands(op, ctx).prepare() as prepared:
        prepared.run(*inputs, out=out)


def common_api_error_cases(op: OpSpec) -> list[ApiErrorCase]:
    """The errors every operator reports the same way."""
    num_inputs = len(op.info.input_names)
    invalid = ort.InvalidArgumentError
    cases = [
        _case(
            "int32_tensors",
            ort.UnsupportedDtypeError,
            "has dtype int32; supported dtypes are float32, float16, bfloat16",
            lambda ctx: Operands(op, ctx, dtype=torch.int32).out_variant(),
        ),
        _case(
            "float64_out_of_place",
            ort.UnsupportedDtypeError,
            "has dtype float64",
            lambda ctx: Operands(op, ctx, dtype=torch.float64).out_of_place(),
        ),
        _case(
            "out_dtype_differs_from_input",
            ort.UnsupportedDtypeError,
            "dtype f16",
            lambda ctx: Operands(op, ctx).out_variant(
                out=Operands(op, ctx, dtype=torch.float16).out
            ),
        ),
        _case(
            "stride0_out",
            invalid,
            "overlapping",
            lambda ctx: Operands(op, ctx).out_variant(
                out=ctx.tensor((1,)).expand(Operands(op, ctx).out.shape)
            ),
        ),
        _case(
            "out_partially_overlaps_input",
            invalid,
            "overlap",
            lambda ctx: Operands(op, ctx).out_variant(*_overlapping_operands(op, ctx)),
        ),
        _case(
            "tensors_on_different_devices",
            invalid,
            "tensors are on different devices",
            lambda ctx: Operands(op, ctx).out_variant(
                inputs=Operands(op, ctx, device=ctx.foreign_device).inputs
            ),
        ),
        _case(
            "backend_cannot_run_the_device",
            invalid,
            "cannot run tensors on",
            lambda ctx: Operands(op, ctx, device=ctx.foreign_device).out_variant(),
        ),
        _case(
            "backend_not_available",
            ort.NotSupportedError,
            "is not available",
            lambda ctx: Operands(op, ctx).out_variant(backend=ctx.unavailable_backend),
        ),
        _case(
            "c_runtime_rejects_an_unavailable_backend",
            ort.NotSupportedError,
            f"{op.name}: backend ",
            lambda ctx: _create_through_binding(op, ctx, ctx.unavailable_backend),
        ),
        _case(
            "c_runtime_rejects_an_unknown_dtype_code",
            ort.UnsupportedDtypeError,
            "has unknown dtype 7",
            lambda ctx: _create_through_binding(op, ctx, ctx.c_backend, dtype_code=7),
        ),
        _case(
            "tilelang_not_in_this_build",
            ort.NotSupportedError,
            "tilelang backend is not available in this build",
            lambda ctx: _without_python_backend(
                "tilelang", lambda: Operands(op, ctx).out_of_place(backend="tilelang")
            ),
        ),
        _case(
            "unknown_backend_name",
            invalid,
            "unknown backend 'cuda'",
            lambda ctx: Operands(op, ctx).out_of_place(backend="cuda"),
        ),
        _case(
            "more_than_8_dims",
            invalid,
            "ndim 9",
            lambda ctx: Operands(op, ctx, shape=(1,) * 8 + (2,)).out_variant(),
        ),
        _case(
            "prepared_run_after_destroy",
            invalid,
            "destroyed",
            lambda ctx: _run_after_destroy(op, ctx),
        ),
        _case(
            "prepared_rebind_other_strides",
            invalid,
            "prepared run got",
            lambda ctx: _rebind(
                op, ctx, lambda operands: [_transposed_like(t) for t in operands.inputs]
            ),
        ),
        _case(
            "prepared_rebind_other_dtype",
            invalid,
            "prepared run got",
            lambda ctx: _rebind(
                op, ctx, lambda operands: [t.to(torch.float16) for t in operands.inputs]
            ),
        ),
        _case(
            "prepared_rebind_other_shape",
            invalid,
            "prepared run got",
            lambda ctx: _rebind(
                op, ctx, lambda operands: [ctx.tensor((5, 6)) for _ in operands.inputs]
            ),
        ),
        _case(
            "prepared_rebind_too_many_inputs",
            invalid,
            f"takes all {num_inputs} inputs",
            lambda ctx: _rebind(op, ctx, lambda operands: operands.inputs * 2),
        ),
        _case(
            "prepared_rebind_makes_out_overlap_input",
            invalid,
            "prepared run makes out overlap",
            lambda ctx: _rebind_overlapping_out(op, ctx),
        ),
    ]
    return cases + _KIND_CASES[op.info.kind](op)


def _wrong_out_shape(op: OpSpec, message: str) -> ApiErrorCase:
    return _case(
        "wrong_out_shape",
        ort.InvalidArgumentError,
        message,
        lambda ctx: Operands(op, ctx).out_variant(out=ctx.tensor((5, 7))),
    )


def _elementwise_cases(op: OpSpec) -> list[ApiErrorCase]:
    cases = [
        _wrong_out_shape(op, "of shape [4, 6] does not broadcast to"),
        _case(
            "input_not_broadcastable_to_out",
            ort.InvalidArgumentError,
            "broadcast",
            lambda ctx: Operands(op, ctx).out_variant(out=ctx.tensor((4, 5))),
        )
    ]
    if len(op.info.input_names) > 1:
        cases.append(
            _case(
                "inputs_not_broadcastable_out_of_place",
                ort.InvalidArgumentError,
                "are not broadcastable",
                lambda ctx: Operands(op, ctx).out_of_place(
                    inputs=[ctx.tensor((4, 6 + i)) for i in range(len(op.info.input_names))]
                ),
            )
        )
    return cases


def _axis_cases(op: OpSpec) -> list[ApiErrorCase]:
    invalid = ort.InvalidArgumentError
    return [
        _wrong_out_shape(op, "out shape [5, 7] must"),
        _case(
            "axis_out_of_range",
            invalid,
            "dim 2 out of range for ndim 2",
            lambda ctx: Operands(op, ctx).out_variant(dim=2),
        ),
        _case(
            "negative_axis_out_of_range_out_of_place",
            invalid,
            "dim -3 out of range for ndim 2",
            lambda ctx: Operands(op, ctx).out_of_place(dim=-3),
        ),
        _case(
            "axis_of_a_0d_tensor",
            invalid,
            "out of range for ndim 0",
            lambda ctx: Operands(op, ctx).out_of_place(
                inputs=[ctx.tensor(()) for _ in op.info.input_names]
            ),
        ),
        _case(
            "non_integer_dim",
            invalid,
            "dim must be an integer",
            lambda ctx: Operands(op, ctx).out_of_place(dim=1.5),
        ),
    ]


_KIND_CASES = {
    Kind.ELEMENTWISE: _elementwise_cases,
    Kind.REDUCTION: _axis_cases,
    Kind.NORMALIZATION: _axis_cases,
}
