"""softmax_backward's tables: reference, tolerances, correctness, API-error and benchmark cases."""

from __future__ import annotations

import math

import torch

import operator_runtime as ort
from operator_runtime_testing.api_errors import common_api_error_cases
from operator_runtime_testing.cases import (
    CONTIGUOUS,
    ApiErrorCase,
    BenchmarkCase,
    Contiguous,
    CorrectnessCase,
    Offset,
    OpSpec,
    Tolerance,
    tolerances,
    Values,
    numel,
    reduced_length,
    spec,
)
from operator_runtime_testing.tables import DTYPES, axis_cases, named

F32_EPS = torch.finfo(torch.float32).eps


def reference(dy: torch.Tensor, y: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch._softmax_backward_data(dy.double(), y.double(), dim, torch.float64).to(dy.dtype)


def tolerance_rule(base: Tolerance, case: CorrectnessCase) -> Tolerance:
    """On the tables' normal values the row's sum of n products, and so the
    results, grow as sqrt(n); its f32 rounding error grows about as fast."""
    root_n = math.sqrt(max(reduced_length(case), 1))
    return Tolerance(base.atol * root_n, base.rtol + 2 * F32_EPS * root_n)


OP = OpSpec(
    name="softmax_backward",
    reference=reference,
    tolerances=tolerances(f32=Tolerance(1e-5, 1e-5)),
    tolerance_rule=tolerance_rule,
    # multiply and add for the row's sum, subtract and multiply per element.
    flops=lambda case: 4 * numel(case.shapes[0]),
    peer=lambda out, dy, y, dim: torch._softmax_backward_data(dy, y, dim, dy.dtype),
)

INF, NAN = float("inf"), float("nan")


def correctness_cases() -> list[CorrectnessCase]:
    extremes = [
        ("nan_and_inf", Values(specials=(NAN, INF, -INF), spacing=11)),
        ("all_equal_rows", Values("constant", 3.0)),
    ]
    shape = (6, 300)
    return (
        axis_cases(keeps_axis=True, num_inputs=2)
        + [
            CorrectnessCase(named(name, dtype), (spec(shape), spec(shape)), dtype, {"dim": -1},
                            values=values)
            for dtype in DTYPES
            for name, values in extremes
        ]
        # Rows at the limit of what the nvidia register path's 512 threads hold on
        # sm_90 (8192 f32, 16384 16-bit elements), starting on a vector boundary
        # and one element past it (dy, y and out alike), which needs one vector more.
        + [
            CorrectnessCase(named(f"register_row_limit_{length}{where}", dtype), (spec((5, length), layout),) * 2,
                            dtype, {"dim": -1}, out=layout)
            for dtype in DTYPES
            for length in (8192, 16384)
            for where, layout in (("", CONTIGUOUS), ("_off_a_vector", Offset(Contiguous(), 1)))
        ]
        # Rows longer than a block holds, more of them than the GPU holds at once.
        + [
            CorrectnessCase(named("many_long_rows", dtype), (spec((300, 40001)),) * 2, dtype,
                            {"dim": -1})
            for dtype in DTYPES
        ]
        # Odd rows, every row at another lead, written over dy and over y: on the
        # nvidia register path's blocks (3001) and on its cluster path (40001), which
        # both peel each row's partial first and last vectors, an element per thread
        # (on the cluster path, the threads of the row's first block); then the
        # cluster path with dy, y and out off a vector boundary.
        + [
            CorrectnessCase(named(f"{name}_in_place_{over}", dtype), (spec(shape),) * 2, dtype,
                            {"dim": -1}, in_place=which)
            for dtype in DTYPES
            for name, shape in (("block_rows_odd", (40, 3001)), ("many_long_rows_odd", (64, 40001)))
            for over, which in (("dy", 0), ("y", 1))
        ]
        + [
            CorrectnessCase(named("many_long_rows_odd_misaligned", dtype),
                            (spec((40, 40001), Offset(Contiguous(), 3)),) * 2, dtype, {"dim": -1},
                            out=Offset(Contiguous(), 3))
            for dtype in DTYPES
        ]
        # Rows no cluster holds (over 147456 f32, 294912 16-bit), more than the
        # whole GPU holds at once: the nvidia grid path, in several rounds.
        + [
            CorrectnessCase(named(name, dtype), (spec(shape),) * 2, dtype, {"dim": -1}, **fields)
            for dtype in DTYPES
            for name, shape, fields in [
                ("rows_beyond_a_cluster_odd", (50, 300001), {}),
                ("rows_beyond_a_cluster_in_place", (50, 300000), {"in_place": 0}),
                ("rows_beyond_a_cluster_odd_in_place_y", (50, 300001), {"in_place": 1}),
            ]
        ]
    )


def api_error_cases():
    def pair(ctx, y_shape=(4, 6), y_dtype=torch.float32):
        return ctx.tensor((4, 6)), ctx.tensor(y_shape, y_dtype)

    return common_api_error_cases(OP) + [
        ApiErrorCase(
            "y_shape_differs_from_dy",
            lambda ctx: ort.softmax_backward(*pair(ctx, y_shape=(4, 5)), backend=ctx.backend),
            ort.InvalidArgumentError,
            ort.InvalidArgumentError.default_status,
            "softmax_backward: y shape [4, 5] must equal dy shape [4, 6]",
        ),
        ApiErrorCase(
            "y_dtype_differs_from_dy",
            lambda ctx: ort.softmax_backward_(
                ctx.tensor((4, 6)), *pair(ctx, y_dtype=torch.float16), backend=ctx.backend
            ),
            ort.UnsupportedDtypeError,
            ort.UnsupportedDtypeError.default_status,
            "softmax_backward: out dtype f32 differs from y dtype f16",
        ),
        ApiErrorCase(
            "out_partially_overlaps_y",
            lambda ctx: _out_over_part_of_y(ctx),
            ort.InvalidArgumentError,
            ort.InvalidArgumentError.default_status,
            "softmax_backward: out partially overlaps y",
        ),
    ]


def _out_over_part_of_y(ctx):
    storage = ctx.tensor((5, 6))
    dy, y = ctx.tensor((4, 6)), storage[:4]
    return ort.softmax_backward_(storage[1:], dy, y, backend=ctx.backend)


def benchmark_cases() -> list[BenchmarkCase]:
    shapes = [(8192, 8192), (1024, 32768), (32768, 1024), (4096, 128), (256, 262144),
              (2671, 50257), (64, 1048576), (8, 1048576)]
    return [
        BenchmarkCase(named(f"{rows}x{columns}", dtype), ((rows, columns),) * 2, dtype, {"dim": -1})
        for dtype in DTYPES
        for rows, columns in shapes
    ]
