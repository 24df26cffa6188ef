"""The host side of the tilelang backend: checks, layouts, launches.

Every call is first checked by the C runtime itself: ops.Prepared creates a cpu
descriptor for the same views (create validates views, dtypes, shapes, axis and
aliasing and never touches memory) before asking this backend to prepare, and
re-checks the bound tensors with it before each run, so a bad call fails with
exactly the C runtime's status and message. The kernels then need simple
layouts; this module brings operands there:

- elementwise (copy, vector_add, relu): the kernel runs over flat vectors.
  Operands that are dense in the same memory order as `out` (contiguous, or
  permuted alike) and 16-byte aligned are used in place; any other input
  (broadcast, strided, misaligned) is first copied by torch into a dense
  buffer in out's order, and a non-dense or misaligned `out` is written
  through a dense buffer copied into it afterwards.
- reduction (reduce_sum, and the normalizations softmax and softmax_backward),
  the C runtime's family of the same name: the kernel wants the reduced
  axis innermost and contiguous, as (m, n) matrices, one per input (all of one
  shape). Each input whose `movedim(axis, -1)` is contiguous is used in place;
  any other is copied there first (one transposed or compacting copy per run).
  A non-contiguous output goes through a buffer.

Kernels index with 32-bit extents: elementwise work is launched in chunks of
2^30 elements, row work in chunks of whole rows below 2^31 elements; a single
row of 2^31 elements or more is NotSupportedError. One thread block walks each
row, so very long rows use few SMs (slow, never wrong).
"""

from __future__ import annotations

import importlib.util
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import torch

from operator_runtime.errors import NotSupportedError
from operator_runtime.ops import OPERATORS, Kind
from operator_runtime.tilelang import compiler

ALIGNMENT = 16
FLAT_CHUNK = 2**30
MAX_ELEMENTS = 2**31 - 1


def is_dense(tensor: torch.Tensor) -> bool:
    """Whether the elements fill a span of numel elements exactly, in some dim order."""
    expected = 1
    for extent, stride in sorted(
        ((e, s) for e, s in zip(tensor.shape, tensor.stride()) if e != 1), key=lambda pair: pair[1]
    ):
        if stride != expected:
            return False
        expected *= extent
    return True


def _aligned(tensor: torch.Tensor) -> bool:
    return tensor.data_ptr() % ALIGNMENT == 0


def _flat(tensor: torch.Tensor) -> torch.Tensor:
    """The elements of a dense tensor as a 1-d view in memory order."""
    return tensor.as_strided((tensor.numel(),), (1,))


class ElementwisePlan:
    """How an elementwise call's operands reach the flat kernel."""

    family = "elementwise"

    def __init__(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]):
        self.shape = tuple(out.shape)
        self.numel = out.numel()
        self.out_dense = is_dense(out)
        # The memory order every operand is brought to: out's when it is dense.
        self.strides = out.stride() if self.out_dense else None
        self.inputs_dense = [
            self.out_dense and tuple(t.shape) == self.shape and t.stride() == out.stride() for t in inputs
        ]

    def _buffer(self, like: torch.Tensor) -> torch.Tensor:
        if self.strides is None:
            return torch.empty(self.shape, dtype=like.dtype, device=like.device)
        return torch.empty_strided(self.shape, self.strides, dtype=like.dtype, device=like.device)

    def run(self, kernel, out: torch.Tensor, inputs: Sequence[torch.Tensor], scalars: Sequence[float]) -> None:
        if self.numel == 0:
            return
        flat_inputs = []
        for tensor, dense in zip(inputs, self.inputs_dense):
            if not (dense and _aligned(tensor)):
                tensor = self._buffer(tensor).copy_(tensor)
            flat_inputs.append(_flat(tensor))
        target = out if self.out_dense and _aligned(out) else self._buffer(out)
        flat_out = _flat(target)
        for start in range(0, self.numel, FLAT_CHUNK):
            part = slice(start, start + FLAT_CHUNK)
            kernel(*(flat[part] for flat in flat_inputs), flat_out[part], *scalars)
        if target is not out:
            out.copy_(target)


class ReductionPlan:
    """How a call of the reduction family reaches the (m, n) row kernel: its
    inputs (one, or two of one shape as softmax_backward's) as matrices, then out."""

    family = "reduction"

    def __init__(self, op: str, out: torch.Tensor, inputs: Sequence[torch.Tensor], axis: float):
        self.keeps_axis = OPERATORS[op].kind == Kind.NORMALIZATION
        self.axis = int(axis) % inputs[0].dim()
        moved = inputs[0].movedim(self.axis, -1)
        self.moved_shape = tuple(moved.shape)
        self.row_length = moved.shape[-1]
        self.rows = math.prod(self.moved_shape[:-1])
        if self.row_length > MAX_ELEMENTS:
            raise NotSupportedError(
                f"{op}: the tilelang kernels take rows of at most 2^31-1 elements; "
                f"dim {self.axis} has {self.row_length}"
            )
        self.rows_per_launch = max(1, MAX_ELEMENTS // max(self.row_length, 1))
        self.inputs_direct = [tensor.movedim(self.axis, -1).is_contiguous() for tensor in inputs]
        self.out_direct = self._out_rows(out).is_contiguous()

    def _out_rows(self, out: torch.Tensor) -> torch.Tensor:
        """out with the rows in the input's order: (..., n) for softmax, (...) for reduce_sum."""
        if self.keeps_axis:
            return out.movedim(self.axis, -1)
        # reduce_sum's out has the axis removed, or kept with extent 1.
        return out.squeeze(self.axis) if out.dim() == len(self.moved_shape) else out

    def run(self, kernel, out: torch.Tensor, inputs: Sequence[torch.Tensor], scalars: Sequence[float]) -> None:
        if self.rows == 0:
            return
        if self.row_length == 0:
            if not self.keeps_axis:
                out.zero_()
            return
        matrices = []
        for tensor, direct in zip(inputs, self.inputs_direct):
            moved = tensor.movedim(self.axis, -1)
            matrices.append((moved if direct else moved.contiguous()).view(self.rows, self.row_length))
        out_rows = self._out_rows(out)
        target = out_rows if self.out_direct else torch.empty(out_rows.shape, dtype=out.dtype, device=out.device)
        result = target.view(self.rows, self.row_length) if self.keeps_axis else target.view(self.rows)
        for start in range(0, self.rows, self.rows_per_launch):
            part = slice(start, start + self.rows_per_launch)
            kernel(*(matrix[part] for matrix in matrices), result[part])
        if target is not out_rows:
            out_rows.copy_(target)


def family(op: str) -> str:
    return ElementwisePlan.family if OPERATORS[op].kind == Kind.ELEMENTWISE else ReductionPlan.family


def warm(ops: Sequence[str], target: dict | str, workers: int) -> list[compiler.CacheKey]:
    """Compiles every kernel of ops (both styles, every dtype) for target on
    `workers` threads, filling this process's cache and TileLang's disk cache,
    so that later processes load kernels instead of compiling them."""
    jobs = [
        (op, style, dtype, family(op))
        for op in ops
        for style in compiler.STYLES
        for dtype in compiler.DTYPE_NAMES.values()
    ]
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda job: compiler.KERNELS.get(*job, target), jobs))
    return compiler.KERNELS.keys()


def _layout(tensor: torch.Tensor) -> tuple:
    return tuple(tensor.shape), tensor.stride()


def _with_layout(tensor: torch.Tensor, layout: tuple) -> torch.Tensor:
    """tensor's memory seen with the layout it had at prepare (its metadata may have changed since)."""
    return tensor.as_strided(*layout, tensor.storage_offset())


class TileLangKernel:
    """A prepared call: its plan, the layouts it was made for and its compiled
    kernel, all fixed at prepare; runs only rebind memory."""

    def __init__(self, plan, compiled, scalars: Sequence[float], out: torch.Tensor, inputs: Sequence[torch.Tensor]):
        self._plan = plan
        self._compiled = compiled
        self._scalars = tuple(scalars)
        self._out_layout = _layout(out)
        self._input_layouts = [_layout(tensor) for tensor in inputs]

    def run(self, out: torch.Tensor, inputs: Sequence[torch.Tensor], stream: int) -> None:
        # TileLang launches on torch's current stream, which is `stream`.
        self._plan.run(
            self._compiled,
            _with_layout(out, self._out_layout),
            [_with_layout(tensor, layout) for tensor, layout in zip(inputs, self._input_layouts)],
            self._scalars,
        )

    def destroy(self) -> None:
        self._compiled = None


class TileLangBackend:
    """backend="tilelang": the kernels of ops/<op>/tilelang/ on CUDA devices."""

    def unavailable_reason(self) -> str | None:
        if not torch.cuda.is_available():
            return "torch sees no CUDA device"
        if importlib.util.find_spec("tilelang") is None:
            return "the tilelang package is not installed (tilelang==0.1.15, apache-tvm-ffi==0.1.12)"
        try:
            compiler.import_tilelang()
        except NotSupportedError as error:
            return error.message.removeprefix("tilelang backend is not available: ")
        return None

    def available(self) -> bool:
        return self.unavailable_reason() is None

    def runs_on(self, device: torch.device) -> bool:
        return device.type == "cuda"

    def prepare(self, op: str, out: torch.Tensor, inputs: Sequence[torch.Tensor], params: Sequence[float]):
        if OPERATORS[op].kind == Kind.ELEMENTWISE:
            plan, scalars = ElementwisePlan(out, inputs), params
        else:
            plan, scalars = ReductionPlan(op, out, inputs, params[0]), ()
        compiled = compiler.KERNELS.get(
            op, compiler.get_style(), compiler.DTYPE_NAMES[out.dtype], family(op),
            compiler.cuda_target(out.device),
        )
        return TileLangKernel(plan, compiled, scalars, out, inputs)
