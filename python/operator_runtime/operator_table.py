"""The C runtime's operator table as Python sees it, and the shape rules that
follow from an operator's kind (used by the torch.library fake kernels too)."""

from __future__ import annotations

import enum
import operator as _operator
from dataclasses import dataclass
from typing import Any, Sequence

from operator_runtime import _C
from operator_runtime.errors import InvalidArgumentError

# The parameter that names the axis of reductions and normalizations.
AXIS_PARAM = "dim"


class Kind(enum.IntEnum):
    """How an operator's output shape follows from its inputs."""

    ELEMENTWISE = _C.OPRT_KIND_ELEMENTWISE
    REDUCTION = _C.OPRT_KIND_REDUCTION
    NORMALIZATION = _C.OPRT_KIND_NORMALIZATION


@dataclass(frozen=True)
class OperatorInfo:
    """One entry of the C runtime's operator table; index is its position there."""

    index: int
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
        OperatorInfo(index, name, Kind(kind), tuple(inputs), tuple(params), tuple(defaults))
        for index, (name, kind, inputs, params, defaults) in enumerate(_C.operators())
    ]


def shape_text(shape: Sequence[int]) -> str:
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
        raise InvalidArgumentError(f"{op}: dim {dim} out of range for ndim {ndim}")
    return dim % ndim


def _broadcast_shape(op: str, shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """numpy's broadcast of shapes (torch.broadcast_shapes costs ~15 us a call)."""
    result = [1] * max(len(shape) for shape in shapes)
    for shape in shapes:
        for axis, extent in enumerate(shape, len(result) - len(shape)):
            if extent != result[axis] and extent != 1:
                if result[axis] != 1:
                    shapes_text = " and ".join(shape_text(shape) for shape in shapes)
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


OPERATORS: dict[str, OperatorInfo] = {info.name: info for info in operators()}
