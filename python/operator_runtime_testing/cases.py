"""The case types every operator's ``ops/<op>/cases.py`` declares.

An operator's table is one ``OpSpec`` (dtypes, tolerances, reference, bytes
and FLOPs formulas) plus three lists: ``CorrectnessCase`` (inputs built from a
shape and a memory ``Layout``, filled with ``Values``), ``ApiErrorCase`` (a call
and the error it must raise) and ``BenchmarkCase`` (shapes, dtype, params).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch

import operator_runtime as ort
from operator_runtime.backends import NATIVE_BACKEND_CODES
from operator_runtime.ops import OPERATORS, output_shape

Shape = tuple[int, ...]


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class Placement:
    """Where a view's elements sit in a flat storage of `storage` elements."""

    strides: tuple[int, ...]
    offset: int
    storage: int


def _placement(shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> Placement:
    if any(extent == 0 for extent in shape):
        return Placement(tuple(strides), offset, offset)
    reach = sum((extent - 1) * stride for extent, stride in zip(shape, strides))
    return Placement(tuple(strides), offset, offset + reach + 1)


class Layout:
    """How a tensor of a given logical shape is laid out in memory."""

    def place(self, shape: Shape) -> Placement:
        raise NotImplementedError


@dataclass(frozen=True)
class Contiguous(Layout):
    def place(self, shape: Shape) -> Placement:
        return _placement(shape, contiguous_strides(shape))


@dataclass(frozen=True)
class Permuted(Layout):
    """A permutation of a contiguous tensor: `order` lists the logical dims
    from outermost to innermost in memory."""

    order: tuple[int, ...]

    def place(self, shape: Shape) -> Placement:
        strides, step = [0] * len(shape), 1
        for dim in reversed(self.order):
            strides[dim] = step
            step *= max(shape[dim], 1)
        return _placement(shape, strides)


def transposed(ndim: int) -> Permuted:
    """The last two dims swapped in memory (a .t() / .transpose(-1, -2) view)."""
    order = list(range(ndim))
    order[-1], order[-2] = order[-2], order[-1]
    return Permuted(tuple(order))


@dataclass(frozen=True)
class Sliced(Layout):
    """Every steps[d]-th element of a larger contiguous tensor (x[::s0, ::s1, ...])."""

    steps: tuple[int, ...]

    def place(self, shape: Shape) -> Placement:
        parent = contiguous_strides([extent * step for extent, step in zip(shape, self.steps)])
        return _placement(shape, [stride * step for stride, step in zip(parent, self.steps)])


@dataclass(frozen=True)
class Padded(Layout):
    """Rows (the last dim) followed by `pad` unused elements, as in a pitched buffer."""

    pad: int

    def place(self, shape: Shape) -> Placement:
        if len(shape) < 2:
            return Contiguous().place(shape)
        padded = (*shape[:-1], shape[-1] + self.pad)
        return _placement(shape, contiguous_strides(padded))


@dataclass(frozen=True)
class Strided(Layout):
    """Explicit strides (in elements); a stride of 0 broadcasts that dim."""

    strides: tuple[int, ...]

    def place(self, shape: Shape) -> Placement:
        return _placement(shape, self.strides)


@dataclass(frozen=True)
class Broadcast(Layout):
    """A tensor of shape `source` expanded to the logical shape (stride 0 on the
    dims source lacks or has as 1), like torch's expand."""

    source: tuple[int, ...]

    def place(self, shape: Shape) -> Placement:
        source = (1,) * (len(shape) - len(self.source)) + tuple(self.source)
        source_strides = contiguous_strides(source)
        strides = [
            0 if from_extent == 1 and extent != 1 else stride
            for extent, from_extent, stride in zip(shape, source, source_strides)
        ]
        return _placement(shape, strides)


@dataclass(frozen=True)
class Offset(Layout):
    """`inner` starting `elements` into its storage (misaligned for vector loads)."""

    inner: Layout
    elements: int

    def place(self, shape: Shape) -> Placement:
        placement = self.inner.place(shape)
        return Placement(
            placement.strides, placement.offset + self.elements, placement.storage + self.elements
        )


CONTIGUOUS = Contiguous()


@dataclass(frozen=True)
class Values:
    """How a case's input values are drawn (always on the CPU, from a seeded generator).

    distribution: "normal" (std `scale`), "uniform" (in [-scale, scale]) or
    "constant" (every element `scale`). `specials` (NaN, +-inf, ...) replace
    every `spacing`-th element, cycling through them.
    """

    distribution: str = "normal"
    scale: float = 1.0
    specials: tuple[float, ...] = ()
    spacing: int = 7

    def generate(self, shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
        shape = tuple(shape)
        if self.distribution == "normal":
            values = torch.randn(shape, generator=generator) * self.scale
        elif self.distribution == "uniform":
            values = (torch.rand(shape, generator=generator) * 2 - 1) * self.scale
        elif self.distribution == "constant":
            values = torch.full(shape, self.scale)
        else:
            raise ValueError(f"unknown distribution {self.distribution!r}")
        if self.specials:
            flat = values.view(-1)
            positions = torch.arange(0, flat.numel(), self.spacing)
            specials = torch.tensor(self.specials, dtype=values.dtype)
            flat[positions] = specials[torch.arange(positions.numel()) % len(self.specials)]
        return values


NORMAL = Values()


@dataclass(frozen=True)
class TensorSpec:
    """A tensor of logical `shape` laid out by `layout`."""

    shape: Shape
    layout: Layout = CONTIGUOUS


def spec(shape: Sequence[int], layout: Layout = CONTIGUOUS) -> TensorSpec:
    return TensorSpec(tuple(shape), layout)


@dataclass(frozen=True)
class CorrectnessCase:
    """One run compared with the reference.

    params holds the operator's parameters (and, for reductions, "keepdim",
    which only decides the out shape). out is the layout of the output, whose
    shape is the reference's unless out_shape asks for a larger one that the
    result is broadcast to (elementwise operators only); in_place makes out
    the input of that index.
    """

    name: str
    inputs: tuple[TensorSpec, ...]
    dtype: torch.dtype
    params: Mapping[str, Any] = field(default_factory=dict)
    out: Layout = CONTIGUOUS
    out_shape: Shape | None = None
    in_place: int | None = None
    values: Values = NORMAL


@dataclass(frozen=True)
class ErrorContext:
    """What an API-error call needs to build its tensors for the backend under test."""

    backend: str
    device: torch.device

    def tensor(self, shape: Sequence[int], dtype: torch.dtype = torch.float32, device=None):
        return torch.ones(tuple(shape), dtype=dtype, device=device or self.device)

    @property
    def foreign_device(self) -> torch.device:
        """A device this backend cannot run: meta for cpu, the CPU for GPU backends."""
        return torch.device("meta" if self.device.type == "cpu" else "cpu")

    @property
    def c_backend(self) -> str:
        """The C runtime backend whose create validates this backend's calls:
        itself, or cpu for a Python backend (which validates through it)."""
        return self.backend if self.backend in NATIVE_BACKEND_CODES else "cpu"

    @property
    def unavailable_backend(self) -> str:
        """A GPU backend that cannot run here (never every one is available at once)."""
        available = ort.available_backends()
        return next(name for name in ("metax", "nvidia") if name not in available)


@dataclass(frozen=True)
class ApiErrorCase:
    """call(ctx) must raise `error` with `status` and `message` in its text."""

    name: str
    call: Callable[[ErrorContext], Any]
    error: type[Exception]
    status: int
    message: str


@dataclass(frozen=True)
class BenchmarkCase:
    """A problem to time: the inputs' real shapes (a broadcast input at its
    stored size), dtype and params."""

    name: str
    shapes: tuple[Shape, ...]
    dtype: torch.dtype
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    # Where result and reference are both zero, their signs must agree too (for an
    # operator whose results are exact, like relu_backward's selects and products).
    signed_zeros: bool = False


DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def tolerances(f32: Tolerance) -> dict[torch.dtype, Tolerance]:
    """An op's base tolerance per dtype: its own f32 one, and for f16/bf16 the
    dtype's rounding of a result computed in f32 (shared by every op)."""
    return {
        torch.float32: f32,
        torch.float16: Tolerance(1e-3, 1e-3),
        torch.bfloat16: Tolerance(1.6e-2, 1.6e-2),
    }


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def out_shape(op: str, shapes: Sequence[Sequence[int]], params: Mapping[str, Any]) -> Shape:
    info = OPERATORS[op]
    op_params = {name: params.get(name, info.default(name)) for name in info.param_names}
    return output_shape(info, shapes, op_params, bool(params.get("keepdim", False)))


def moved_bytes(op: str, case: BenchmarkCase) -> int:
    """Each input read once at its real size plus the output written once."""
    elements = sum(numel(shape) for shape in case.shapes)
    elements += numel(out_shape(op, case.shapes, case.params))
    return elements * element_size(case.dtype)


@dataclass(frozen=True)
class OpSpec:
    """Everything about an operator that its tests and benchmarks share.

    reference(*inputs, **params) returns the expected output in the inputs'
    dtype, computed at least in float32. tolerances holds the base tolerance
    per dtype; tolerance_rule, when given, widens it for a case (e.g. with the
    length of the reduced axis). flops(case) counts arithmetic per benchmark
    case; bytes(case) is the memory moved (default: moved_bytes). peer(out,
    *inputs, **params) is PyTorch's own way to compute the same thing, the
    benchmark's baseline.
    """

    name: str
    reference: Callable[..., torch.Tensor]
    tolerances: Mapping[torch.dtype, Tolerance]
    flops: Callable[[BenchmarkCase], int]
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
    tolerance_rule: Callable[[Tolerance, CorrectnessCase], Tolerance] | None = None
    bytes_formula: Callable[[BenchmarkCase], int] | None = None
    peer: Callable[..., Any] | None = None

    @property
    def info(self):
        return OPERATORS[self.name]

    def tolerance(self, case: CorrectnessCase) -> Tolerance:
        base = self.tolerances[case.dtype]
        return self.tolerance_rule(base, case) if self.tolerance_rule else base

    def bytes(self, case: BenchmarkCase) -> int:
        return self.bytes_formula(case) if self.bytes_formula else moved_bytes(self.name, case)


def reduced_length(case: CorrectnessCase) -> int:
    """The extent of the axis a reduction or normalization case works along."""
    shape = case.inputs[0].shape
    if not shape:
        return 1
    return shape[case.params.get("dim", -1)]
