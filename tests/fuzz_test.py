"""Property-based fuzzing of every operator on the cpu backend, through the C ABI
(ctypes on liboperator_runtime.so, via the generic op table) and through the
Python API (op, op_, prepare_op).

Each generated example is one valid problem (random ndim 0..8, extents incl. 0,
permuted / gapped / negative / broadcast strides, any dtype, in-place or not)
checked against the operator's torch reference, plus one invalid call per kind
of defect derived from it, each of which must return its documented status with
a specific message. Every view handed to the runtime that could be executed
covers real host memory; out's buffer carries guard elements checked after every
run. Two seeds run: a fixed one and a rotating one (OPRT_FUZZ_SEED, default
today's date); both are printed with the per-operator call counts.
"""

from __future__ import annotations

import collections
import ctypes
import datetime
import importlib
import math
import os
import re
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import operator_runtime as ort
from operator_runtime.errors import Status
from operator_runtime.operator_table import Kind
from operator_runtime_testing.c_abi import (
    BACKEND_CPU,
    BACKEND_METAX,
    BACKEND_NVIDIA,
    DTYPE_CODES,
    MAX_DIMS,
    TensorView,
    ViewPointer,
    load_library,
    make_view,
    operator_names,
)
from operator_runtime_testing.cases import CorrectnessCase, Values, spec

# ---------------------------------------------------------------- the C ABI

LIB = load_library()
OPERATOR_NAMES = operator_names(LIB)
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def last_message() -> str:
    return LIB.oprt_last_error_message().decode()


# ----------------------------------------------------------- the call counts

FIXED_SEED = 20260101
ROTATING_SEED = int(os.environ.get("OPRT_FUZZ_SEED") or datetime.date.today().strftime("%Y%m%d"))
# Each example makes ~35 calls: two seeds of this many make ~28,000 calls per op in ~45 s.
EXAMPLES_PER_SEED = int(os.environ.get("OPRT_FUZZ_EXAMPLES", "400"))
COUNTS: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def expect_status(op: str, status: int, expected: int, pattern: str, what: str) -> None:
    """An invalid call: the documented status and a specific, non-empty message."""
    COUNTS[op]["invalid"] += 1
    message = last_message()
    assert status == expected, f"{what}: status {status}, expected {expected} ({message!r})"
    assert message, f"{what}: empty error message"
    assert re.search(pattern, message), f"{what}: message {message!r} does not match {pattern!r}"


def expect_success(op: str, status: int, what: str) -> None:
    COUNTS[op]["valid"] += 1
    message = last_message()
    assert status == Status.SUCCESS, f"{what}: status {status} ({message!r})"
    assert message == "", f"{what}: message {message!r} left after a success"


# ------------------------------------------------------------- host buffers

GUARD = 4  # elements on each side of a buffer that no run may write
GUARD_VALUE = 7.0


def span(shape, strides) -> tuple[int, int]:
    """Lowest and highest element offsets a view touches (hi < lo when empty)."""
    if 0 in shape:
        return 0, -1
    lo = sum(min(0, (extent - 1) * stride) for extent, stride in zip(shape, strides))
    hi = sum(max(0, (extent - 1) * stride) for extent, stride in zip(shape, strides))
    return lo, hi


class Buffer:
    """Host memory covering a view's span plus guards, and the view over it."""

    def __init__(self, shape, strides, dtype: torch.dtype, generator: torch.Generator):
        self.shape, self.strides, self.dtype = tuple(shape), tuple(strides), dtype
        lo, hi = span(shape, strides)
        self.length = max(hi - lo + 1, 0)
        values = torch.rand(self.length, generator=generator, dtype=torch.float64) * 2 - 1
        guard = torch.full((GUARD,), GUARD_VALUE, dtype=torch.float64)
        self.storage = torch.cat([guard, values, guard]).to(dtype)
        self.origin = GUARD - lo  # index in storage of the view's element 0
        self.guards = self.storage[:GUARD].clone(), self.storage[-GUARD:].clone()

    @property
    def data(self) -> int:
        return self.storage.data_ptr() + self.origin * self.dtype.itemsize

    def view(self) -> TensorView:
        return make_view(self.data, self.dtype, self.shape, self.strides)

    def offsets(self) -> torch.Tensor:
        offsets = torch.zeros(self.shape, dtype=torch.int64)
        for axis, (extent, stride) in enumerate(zip(self.shape, self.strides)):
            steps = torch.arange(extent, dtype=torch.int64) * stride
            offsets = offsets + steps.view([extent if d == axis else 1 for d in range(len(self.shape))])
        return offsets + self.origin

    def logical(self) -> torch.Tensor:
        return self.storage[self.offsets()]

    def guards_intact(self) -> bool:
        return torch.equal(self.storage[:GUARD], self.guards[0]) and torch.equal(
            self.storage[-GUARD:], self.guards[1]
        )

    def as_torch(self) -> torch.Tensor:
        """The view as a torch tensor (strides must be >= 0)."""
        return self.storage.as_strided(self.shape, self.strides, self.origin)


def copy_view(view: TensorView) -> TensorView:
    copied = TensorView()
    ctypes.pointer(copied)[0] = view
    return copied


# ------------------------------------------------------------- strategies

DTYPES = list(DTYPE_CODES)
MAX_ELEMENTS = 48


@st.composite
def shapes(draw, min_ndim=0) -> tuple[int, ...]:
    ndim = draw(st.integers(min_ndim, MAX_DIMS))
    shape, count = [], 1
    for _ in range(ndim):
        extent = draw(st.integers(0, max(1, min(5, MAX_ELEMENTS // max(count, 1)))))
        shape.append(extent)
        count *= extent
    return tuple(shape)


@st.composite
def strides_for(draw, shape, allow_zero: bool) -> tuple[int, ...]:
    """A layout of shape: dims in any order, gaps between them, any signs, and
    (for inputs, which may read an element twice) stride 0."""
    order = draw(st.permutations(range(len(shape))))
    strides = [0] * len(shape)
    step = draw(st.integers(1, 3))
    for axis in reversed(order):
        extent = shape[axis]
        if extent == 1 and draw(st.booleans()):
            strides[axis] = draw(st.integers(-9, 9))  # never stepped: any value is valid
            continue
        strides[axis] = step * draw(st.sampled_from([1, 1, 1, -1]))
        step *= max(extent, 1) * draw(st.sampled_from([1, 1, 2]))
    if allow_zero and shape:
        for axis in draw(st.sets(st.integers(0, len(shape) - 1), max_size=2)):
            strides[axis] = 0
    return tuple(strides)


def broadcast_source(draw, out_shape) -> tuple[int, ...]:
    """A shape that broadcasts to out_shape: leading dims dropped, some set to 1."""
    dropped = draw(st.integers(0, len(out_shape)))
    return tuple(
        1 if draw(st.integers(0, 3)) == 0 else extent for extent in out_shape[dropped:]
    )


# ----------------------------------------------------------- one problem

class Problem:
    """A valid call of op: buffers, views, params, and the expected output."""

    def __init__(self, draw, name: str):
        self.name = name
        self.entry = LIB.oprt_find_operator(name.encode()).contents
        self.kind = self.entry.kind
        self.num_inputs = self.entry.num_inputs
        self.input_names = [self.entry.input_names[i].decode() for i in range(self.num_inputs)]
        self.cases = importlib.import_module(f"ops.{name}.cases")
        self.dtype = draw(st.sampled_from(DTYPES))
        self.generator = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
        self.params: dict[str, float] = {}
        self.keepdim = False
        self.workspace_size = 0  # what the descriptor asked for, once created
        if self.kind == Kind.ELEMENTWISE:
            self._draw_elementwise(draw)
        else:
            self._draw_reduction(draw)
        self.param_values = (ctypes.c_double * max(1, self.entry.num_params))(
            *[self.params[self.entry.param_names[i].decode()] for i in range(self.entry.num_params)]
        )

    def _draw_elementwise(self, draw) -> None:
        out_shape = draw(shapes())
        self.out = Buffer(out_shape, draw(strides_for(out_shape, False)), self.dtype, self.generator)
        self.in_place = draw(st.integers(0, 4)) == 0
        self.inputs = []
        for index in range(self.num_inputs):
            if index == 0 and self.in_place:
                self.inputs.append(self.out)
                continue
            shape = broadcast_source(draw, out_shape)
            self.inputs.append(Buffer(shape, draw(strides_for(shape, True)), self.dtype, self.generator))
        for i in range(self.entry.num_params):
            param = self.entry.param_names[i].decode()
            self.params[param] = draw(st.sampled_from([0.0, 0.01, -0.5, 1.0, 2.0]))

    def _draw_reduction(self, draw) -> None:
        in_shape = draw(shapes(min_ndim=1))
        ndim = len(in_shape)
        dim = draw(st.integers(-ndim, ndim - 1))
        self.params["dim"] = float(dim)
        axis = dim % ndim
        if self.kind == Kind.NORMALIZATION:
            out_shape = in_shape
        else:
            self.keepdim = draw(st.booleans())
            out_shape = in_shape[:axis] + ((1,) if self.keepdim else ()) + in_shape[axis + 1 :]
        self.out = Buffer(out_shape, draw(strides_for(out_shape, False)), self.dtype, self.generator)
        # A normalization may write over one of its inputs (softmax_backward's dy or y).
        self.in_place = self.kind == Kind.NORMALIZATION and draw(st.integers(0, 4)) == 0
        overwritten = draw(st.integers(0, self.num_inputs - 1)) if self.in_place else None
        self.inputs = [
            self.out if index == overwritten
            else Buffer(in_shape, draw(strides_for(in_shape, True)), self.dtype, self.generator)
            for index in range(self.num_inputs)
        ]

    # -- the expectation

    def reference_params(self) -> dict:
        return {key: int(value) if key == "dim" else value for key, value in self.params.items()}

    def expected(self, inputs: list[torch.Tensor], out_shape, keepdim: bool) -> torch.Tensor:
        extra = {"keepdim": keepdim} if self.kind == Kind.REDUCTION else {}
        result = self.cases.OP.reference(*inputs, **self.reference_params(), **extra)
        return result.expand(out_shape)

    def assert_close(self, actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
        case = CorrectnessCase(
            "fuzz", tuple(spec(buffer.shape) for buffer in self.inputs), self.dtype,
            self.reference_params(), values=Values("uniform", 1.0),
        )
        tolerance = self.cases.OP.tolerance(case)
        torch.testing.assert_close(
            actual.float(), expected.float(), atol=tolerance.atol, rtol=tolerance.rtol,
            equal_nan=True, msg=lambda text: f"{what}: {text}",
        )

    # -- C ABI pieces

    def views(self) -> tuple[TensorView, list[TensorView]]:
        return self.out.view(), [buffer.view() for buffer in self.inputs]

    def create(
        self, out, inputs, params=None, desc_pointer=True, backend=BACKEND_CPU
    ) -> tuple[int, ctypes.c_void_p]:
        desc = ctypes.c_void_p()
        out_pointer = ctypes.pointer(out) if out is not None else None
        input_array = None
        if inputs is not None:
            input_array = (ViewPointer * max(1, len(inputs)))(
                *[ctypes.pointer(view) if view is not None else None for view in inputs]
            )
        status = self.entry.create(
            ctypes.byref(desc) if desc_pointer else None, backend, out_pointer, input_array,
            self.param_values if params is None else params,
        )
        return status, desc

    def execute(self, desc, out_data, input_data, workspace=None, workspace_size=0) -> int:
        array = None
        if input_data is not None:
            array = (ctypes.c_void_p * max(1, len(input_data)))(*input_data)
        return self.entry.execute(desc, workspace, workspace_size, out_data, array, None)

    def has_work(self) -> bool:
        return math.prod(self.out.shape) > 0


# ------------------------------------------------------------ the C checks

def run_valid_c(problem: Problem) -> ctypes.c_void_p:
    """Creates, sizes and runs the valid problem; returns its live descriptor."""
    op = problem.name
    out, inputs = problem.views()
    before = [buffer.logical().clone() for buffer in problem.inputs]
    status, desc = problem.create(out, inputs)
    expect_success(op, status, f"{op}: create")
    size = ctypes.c_size_t(12345)
    expect_success(op, problem.entry.get_workspace_size(desc, ctypes.byref(size)), f"{op}: workspace size")
    workspace = torch.empty(size.value + 16, dtype=torch.uint8)
    workspace_data = workspace.data_ptr() + (-workspace.data_ptr()) % 16
    status = problem.execute(
        desc, problem.out.data, [buffer.data for buffer in problem.inputs], workspace_data, size.value
    )
    expect_success(op, status, f"{op}: execute")
    assert problem.out.guards_intact(), f"{op}: execute wrote outside out's span"
    expected = problem.expected(before, problem.out.shape, problem.keepdim)
    problem.assert_close(problem.out.logical(), expected, f"{op} (C ABI)")
    problem.workspace_size = size.value
    return desc


VALID = object()  # check(): the problem's own view(s)


def invalid_creates(draw, problem: Problem) -> None:
    """One create per kind of defect; each must fail with its own message."""
    op = problem.name
    def check(expected_status, pattern, what, out=VALID, inputs=VALID, **create_args):
        base_out, base_inputs = problem.views()
        status, desc = problem.create(
            base_out if out is VALID else out, base_inputs if inputs is VALID else inputs, **create_args
        )
        if status == Status.SUCCESS:  # never leak a descriptor, even when the check below fails
            problem.entry.destroy(desc)
        expect_status(op, status, expected_status, pattern, f"{op}: create with {what}")
        assert desc.value is None, f"{op}: failed create left a descriptor"

    def mutated(target: int, change) -> dict:
        """create arguments with view `target` (0 = out, i + 1 = input i) changed."""
        out, inputs = problem.views()
        views = [out, *inputs]
        changed = copy_view(views[target])
        change(changed)
        views[target] = changed
        return {"out": views[0], "inputs": views[1:]}

    target = draw(st.integers(0, problem.num_inputs))
    role = (["out"] + problem.input_names)[target]
    # out's role has its own name per operator ("dst" for copy): any word will do.
    role_pattern = (r"\w+" if target == 0 else re.escape(role)) + " .*"

    bad_ndim = draw(st.sampled_from([-1, -(2**31), MAX_DIMS + 1, 100, 2**31 - 1]))
    check(Status.INVALID_ARG, f"{op}: {role_pattern}ndim {bad_ndim}", f"ndim {bad_ndim}",
          **mutated(target, lambda v: setattr(v, "ndim", bad_ndim)))

    def negative_extent(v):
        v.ndim = max(v.ndim, 1)
        v.shape[draw(st.integers(0, v.ndim - 1))] = draw(st.integers(INT64_MIN, -1))
    check(Status.INVALID_ARG, f"{op}: {role_pattern}negative extent", "a negative extent",
          **mutated(target, negative_extent))

    def overflowing_count(v):
        v.ndim = draw(st.integers(2, MAX_DIMS))
        for axis in range(v.ndim):
            v.shape[axis] = draw(st.integers(2**32, INT64_MAX))
            v.strides[axis] = draw(st.integers(-3, 3))
    check(Status.INVALID_ARG, f"{op}: {role_pattern}.*more elements than int64",
          "an element count past int64",
          **mutated(target, overflowing_count))

    def overflowing_strides(v):
        v.ndim = draw(st.integers(1, MAX_DIMS))
        for axis in range(v.ndim):
            v.shape[axis] = 1
            v.strides[axis] = 1
        axis = draw(st.integers(0, v.ndim - 1))
        v.shape[axis] = draw(st.integers(2, 2**31))
        v.strides[axis] = draw(st.integers(2**62, INT64_MAX)) * draw(st.sampled_from([1, -1]))
    check(Status.INVALID_ARG, f"{op}: {role_pattern}.*offsets overflow int64", "strides overflowing offsets",
          **mutated(target, overflowing_strides))

    def min_stride(v):
        v.ndim = max(v.ndim, 1)
        v.strides[draw(st.integers(0, v.ndim - 1))] = INT64_MIN
    check(Status.INVALID_ARG, f"{op}: {role_pattern}stride INT64_MIN", "stride INT64_MIN",
          **mutated(target, min_stride))

    bad_dtype = draw(st.one_of(st.integers(3, 2**31 - 1), st.integers(-(2**31), -1)))
    check(Status.UNSUPPORTED_DTYPE, f"{op}: {role_pattern}unknown dtype {bad_dtype}", f"dtype {bad_dtype}",
          **mutated(target, lambda v: setattr(v, "dtype", bad_dtype)))

    def null_data(v):
        for axis in range(v.ndim):
            v.shape[axis] = max(v.shape[axis], 1)
        v.data = None
    check(Status.INVALID_ARG, f"{op}: {role_pattern}data is null", "null data", **mutated(target, null_data))

    check(Status.INVALID_ARG, f"{op}: desc is null", "a null desc pointer", desc_pointer=False)
    check(Status.INVALID_ARG, f"{op}: inputs is null", "a null inputs array", inputs=None)
    null_views = [*problem.views()[1]]
    if target == 0:
        check(Status.INVALID_ARG, f"{op}: .*view is null", "a null out view", out=None)
    else:
        null_views[target - 1] = None
        check(Status.INVALID_ARG, f"{op}: {role} view is null", f"a null {role} view", inputs=null_views)

    if problem.num_inputs:
        index = draw(st.integers(0, problem.num_inputs - 1))
        other = draw(st.sampled_from([d for d in DTYPES if d != problem.dtype]))
        arguments = mutated(index + 1, lambda v: setattr(v, "dtype", DTYPE_CODES[other]))
        check(Status.UNSUPPORTED_DTYPE, f"{op}: .*dtype", "mismatched dtypes", **arguments)

    check_shape_mismatch(draw, problem, check, mutated)

    if problem.kind != Kind.ELEMENTWISE:
        ndim = len(problem.inputs[0].shape)
        # Any integer an int64 holds is a dim; up to 2^53 a double carries it exactly.
        dim = draw(st.one_of(st.integers(ndim, 2**53), st.integers(-(2**53), -ndim - 1)))
        check(Status.INVALID_ARG, f"{op}: dim {dim} out of range for ndim {ndim}", f"dim {dim}",
              params=(ctypes.c_double * 1)(dim))
        dim = draw(st.sampled_from([0.5, -1.25, math.nan, math.inf, -math.inf, 2.0**63, -(2.0**64)]))
        check(Status.INVALID_ARG, f"{op}: dim must be an integer", f"dim {dim}",
              params=(ctypes.c_double * 1)(dim))

    writes_twice = [axis for axis, extent in enumerate(problem.out.shape) if extent > 1]
    if writes_twice and problem.has_work():
        axis = draw(st.sampled_from(writes_twice))
        check(Status.INVALID_ARG, f"{op}: \\w+ .*(more than once|overlapping elements)", "out of stride 0",
              **mutated(0, lambda v: v.strides.__setitem__(axis, 0)))

    out_lo, out_hi = span(problem.out.shape, problem.out.strides)
    if out_hi > out_lo and not problem.in_place:
        index = draw(st.integers(0, problem.num_inputs - 1))
        source = problem.inputs[index]
        if math.prod(source.shape) > 0:
            # The input's first element one past out's first: inside out's span, not aligned with it.
            in_lo, _ = span(source.shape, source.strides)
            shifted = problem.out.data + (out_lo + 1 - in_lo) * source.dtype.itemsize
            check(Status.INVALID_ARG, f"{op}: .*overlaps", "an input partially overlapping out",
                  **mutated(index + 1, lambda v: setattr(v, "data", shifted)))


def check_shape_mismatch(draw, problem: Problem, check, mutated) -> None:
    op = problem.name
    if problem.kind == Kind.ELEMENTWISE:
        index = draw(st.integers(0, problem.num_inputs - 1))
        out_ndim = len(problem.out.shape)

        def wrong_input(v):
            if out_ndim == 0:
                v.ndim = 1  # more dims than out
            else:
                v.ndim = max(v.ndim, 1)
                axis = draw(st.integers(0, v.ndim - 1))
                v.shape[axis] = problem.out.shape[out_ndim - v.ndim + axis] + 2
        check(Status.INVALID_ARG, f"{op}: {problem.input_names[index]} .*(more dims|does not broadcast)",
              "an input that does not broadcast", **mutated(index + 1, wrong_input))
        return

    def wrong_shape(v):
        if v.ndim == 0:
            v.ndim, v.shape[0], v.strides[0] = 1, 5, 1
        else:
            v.shape[draw(st.integers(0, v.ndim - 1))] += 1
    check(Status.INVALID_ARG, f"{op}: out shape .* must", "an out of the wrong shape",
          **mutated(0, wrong_shape))
    for index in range(1, problem.num_inputs):
        name, first = problem.input_names[index], problem.input_names[0]
        check(Status.INVALID_ARG, f"{op}: {name} shape .* must equal {first} shape",
              f"a {name} of another shape than {first}", **mutated(index + 1, wrong_shape))


def invalid_executes(draw, problem: Problem, desc) -> None:
    """Bad pointers, bad workspaces and dead descriptors at execute time."""
    op = problem.name
    entry = problem.entry
    inputs = [buffer.data for buffer in problem.inputs]
    in_count = math.prod(problem.inputs[0].shape) if problem.inputs else 0
    if problem.has_work():
        expect_status(op, problem.execute(desc, None, inputs), Status.INVALID_ARG, f"{op}: .*is null",
                      f"{op}: execute with a null out")
        if in_count:
            index = draw(st.integers(0, problem.num_inputs - 1))
            nulled = list(inputs)
            nulled[index] = None
            expect_status(op, problem.execute(desc, problem.out.data, nulled), Status.INVALID_ARG,
                          f"{op}: .*is null", f"{op}: execute with a null input")
        if problem.kind == Kind.ELEMENTWISE:
            expect_status(op, problem.execute(desc, problem.out.data, None), Status.INVALID_ARG,
                          f"{op}: inputs is null", f"{op}: execute with a null inputs array")
        if problem.workspace_size:
            short = draw(st.integers(0, problem.workspace_size - 1))
            workspace = torch.empty(problem.workspace_size + 16, dtype=torch.uint8)
            status = problem.execute(desc, problem.out.data, inputs, workspace.data_ptr(), short)
            expect_status(op, status, Status.INSUFFICIENT_WORKSPACE, f"{op}: workspace of {short} bytes",
                          f"{op}: execute with a {short}-byte workspace")
    expect_status(op, entry.get_workspace_size(desc, None), Status.INVALID_ARG, f"{op}: bytes is null",
                  f"{op}: workspace size into null")

    # Descriptors that are not live ones of this operator.
    other = draw(st.sampled_from([name for name in OPERATOR_NAMES if name != op]))
    foreign = torch.zeros(64, dtype=torch.uint8)
    other_problem = other_descriptor(other)
    dead = {
        "a null descriptor": None,
        "a foreign pointer": foreign.data_ptr(),
        f"a {other} descriptor": other_problem.value,
    }
    expect_success(op, entry.destroy(desc), f"{op}: destroy")
    dead["a destroyed descriptor"] = desc.value
    pattern = f"{op}: descriptor is null, destroyed or not a {op} descriptor"
    size = ctypes.c_size_t()
    for what, pointer in dead.items():
        expect_status(op, problem.execute(pointer, problem.out.data, inputs), Status.INVALID_ARG, pattern,
                      f"{op}: execute on {what}")
        expect_status(op, entry.get_workspace_size(pointer, ctypes.byref(size)), Status.INVALID_ARG, pattern,
                      f"{op}: workspace size of {what}")
        expect_status(op, entry.destroy(pointer), Status.INVALID_ARG, pattern, f"{op}: destroy of {what}")
    assert LIB.oprt_find_operator(other.encode()).contents.destroy(other_problem) == Status.SUCCESS


def other_descriptor(name: str) -> ctypes.c_void_p:
    """A live descriptor of operator name on a small contiguous problem (never run)."""
    entry = LIB.oprt_find_operator(name.encode()).contents
    source, result = torch.zeros(4), torch.zeros(4)
    in_view = make_view(source.data_ptr(), torch.float32, (4,), (1,))
    out_shape = () if entry.kind == Kind.REDUCTION else (4,)
    out_view = make_view(result.data_ptr(), torch.float32, out_shape, (1,) * len(out_shape))
    inputs = (ViewPointer * entry.num_inputs)(*[ctypes.pointer(in_view)] * entry.num_inputs)
    desc = ctypes.c_void_p()
    status = entry.create(ctypes.byref(desc), BACKEND_CPU, ctypes.pointer(out_view), inputs, None)
    assert status == Status.SUCCESS, last_message()
    return desc


def invalid_backends(draw, problem: Problem) -> None:
    op = problem.name
    bad = draw(st.one_of(st.integers(4, 2**31 - 1), st.integers(-(2**31), -1)))
    expect_status(op, LIB.oprt_set_backend(bad), Status.INVALID_ARG, f"set_backend: unknown backend {bad}",
                  f"set_backend({bad})")
    out, inputs = problem.views()
    status, _ = problem.create(out, inputs, backend=bad)
    expect_status(op, status, Status.INVALID_ARG, f"{op}: unknown backend {bad}",
                  f"{op}: create on backend {bad}")
    gpu = draw(st.sampled_from([BACKEND_NVIDIA, BACKEND_METAX]))
    if LIB.oprt_backend_available(gpu):
        return
    status, _ = problem.create(out, inputs, backend=gpu)
    expect_status(op, status, Status.NOT_SUPPORTED, f"{op}: .*(nvidia|metax)",
                  f"{op}: create on backend {gpu}")


# -------------------------------------------------------- the Python checks

def python_calls(problem: Problem) -> None:
    """op, op_ and prepare_op on the same problem (torch tensors need strides >= 0)."""
    op = problem.name
    buffers = [problem.out, *problem.inputs]
    if any(stride < 0 for buffer in buffers for stride in buffer.strides):
        return
    params = problem.reference_params()
    for buffer in buffers:
        buffer.storage.copy_(torch.rand(buffer.storage.shape, generator=problem.generator) * 2 - 1)
    inputs = [buffer.as_torch() for buffer in problem.inputs]
    values = [tensor.clone() for tensor in inputs]
    function = getattr(ort, op)
    extra = {"keepdim": problem.keepdim} if problem.kind == Kind.REDUCTION else {}
    result = function(*inputs, **params, **extra, backend="cpu")
    COUNTS[op]["valid"] += 1
    problem.assert_close(result, problem.expected(values, result.shape, problem.keepdim), f"{op}()")

    out = problem.out.as_torch()
    getattr(ort, op + "_")(out, *inputs, **params, backend="cpu")
    COUNTS[op]["valid"] += 1
    expected = problem.expected(values, out.shape, problem.keepdim)
    problem.assert_close(out, expected, f"{op}_()")

    prepared = getattr(ort, "prepare_" + op)(out, *[value.clone() for value in values], **params, backend="cpu")
    prepared.run()
    COUNTS[op]["valid"] += 1
    problem.assert_close(prepared.out, expected, f"prepare_{op}().run()")
    prepared.destroy()
    with pytest.raises(ort.InvalidArgumentError, match=f"{op}: descriptor was destroyed|{op}: .*destroyed"):
        prepared.run()
    COUNTS[op]["invalid"] += 1

    other = [d for d in DTYPES if d != problem.dtype][0]
    wrong_out = torch.empty(out.shape, dtype=other)
    with pytest.raises(ort.UnsupportedDtypeError, match=f"{op}: .*dtype") as raised:
        getattr(ort, op + "_")(wrong_out, *values, **params, backend="cpu")
    assert raised.value.message
    COUNTS[op]["invalid"] += 1
    if problem.kind != Kind.ELEMENTWISE:
        ndim = len(problem.inputs[0].shape)
        with pytest.raises(ort.InvalidArgumentError, match=f"{op}: dim {ndim} out of range for ndim {ndim}"):
            function(*values, dim=ndim, backend="cpu")
        COUNTS[op]["invalid"] += 1


# ------------------------------------------------------------------ the test

def fuzz_one(draw, name: str) -> None:
    problem = Problem(draw, name)
    desc = run_valid_c(problem)
    invalid_executes(draw, problem, desc)
    invalid_creates(draw, problem)
    invalid_backends(draw, problem)
    python_calls(problem)


@pytest.mark.parametrize("name", OPERATOR_NAMES)
@pytest.mark.parametrize("fuzz_seed", [FIXED_SEED, ROTATING_SEED], ids=["fixed", "rotating"])
def test_fuzz(name, fuzz_seed):
    assert LIB.oprt_set_backend(BACKEND_CPU) == Status.SUCCESS
    before = COUNTS[name].copy()

    @seed(fuzz_seed)
    @settings(
        max_examples=EXAMPLES_PER_SEED, deadline=None, database=None, derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.data())
    def fuzz(data):
        fuzz_one(data.draw, name)

    fuzz()
    made = COUNTS[name] - before
    print(f"\n{name} seed {fuzz_seed}: {made['valid']} valid + {made['invalid']} invalid calls")


def test_operator_table_is_fuzzed_whole():
    assert set(OPERATOR_NAMES) == {info.name for info in ort.operators()}


@pytest.fixture(scope="session", autouse=True)
def report_counts():
    yield
    print(f"\nfuzz seeds: fixed {FIXED_SEED}, rotating {ROTATING_SEED} (set OPRT_FUZZ_SEED to change)")
    for name in OPERATOR_NAMES:
        counts = COUNTS[name]
        print(f"{name:12s} {counts['valid']:6d} valid {counts['invalid']:6d} invalid "
              f"{counts['valid'] + counts['invalid']:6d} calls")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-s", "-p", "no:cacheprovider", *sys.argv[1:]]))
