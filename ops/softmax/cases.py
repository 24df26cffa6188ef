"""softmax's tables: reference, tolerances, correctness, API-error and benchmark cases."""

from __future__ import annotations

import math

import torch

from operator_runtime_testing.api_errors import common_api_error_cases
from operator_runtime_testing.cases import (
    BenchmarkCase,
    Contiguous,
    CorrectnessCase,
    Offset,
    OpSpec,
    Padded,
    Tolerance,
    tolerances,
    Values,
    numel,
    reduced_length,
    spec,
)
from operator_runtime_testing.tables import DTYPES, axis_cases, named

F32_EPS = torch.finfo(torch.float32).eps
# The smallest step a dtype can represent near 0; results of long rows get that small.
_SMALLEST_STEP = {torch.float32: 0.0, torch.float16: 2.0**-24, torch.bfloat16: 0.0}


def reference(input: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch.softmax(input.double(), dim).to(input.dtype)


def tolerance_rule(base: Tolerance, case: CorrectnessCase) -> Tolerance:
    """Outputs average 1/n, so atol shrinks with the row length n; the f32 sum
    of n exponentials adds about sqrt(n) roundings of relative error."""
    n = max(reduced_length(case), 1)
    return Tolerance(
        max(base.atol / n, _SMALLEST_STEP[case.dtype]),
        base.rtol + 2 * F32_EPS * math.sqrt(n),
    )


OP = OpSpec(
    name="softmax",
    reference=reference,
    tolerances=tolerances(f32=Tolerance(1e-6, 1e-5)),
    tolerance_rule=tolerance_rule,
    # max, subtract, exp, sum, divide per element.
    flops=lambda case: 5 * numel(case.shapes[0]),
    peer=lambda out, x, dim: torch.softmax(x, dim=dim),
)

INF, NAN = float("inf"), float("nan")


def correctness_cases() -> list[CorrectnessCase]:
    extremes = [
        ("magnitudes_1e4", Values(scale=1e4)),
        ("masked_minus_inf", Values(specials=(-INF,), spacing=3)),
        ("all_minus_inf", Values(specials=(-INF,), spacing=1)),
        ("nan_and_inf", Values(specials=(NAN, INF, -INF), spacing=11)),
        ("all_equal_rows", Values("constant", 3.0)),
    ]
    # More long rows than the GPU holds at once, so the thread-block clusters of
    # the nvidia long-row path (a cluster per row) run in several waves: aligned,
    # in place, padded, and of odd length, every row at another lead, whose
    # partial first and last vectors the first block of a row holds, an element
    # per thread (in and out of place, off a vector boundary, and with -inf at
    # the edges).
    many_long_rows = [
        ("many_long_rows", spec((300, 40000)), {}),
        ("many_long_rows_in_place", spec((300, 40000)), {"in_place": 0}),
        ("many_long_rows_padded", spec((300, 40000), Padded(8)), {}),
        ("many_long_rows_odd", spec((300, 40001)), {}),
        ("many_long_rows_odd_in_place", spec((300, 40001)), {"in_place": 0}),
        ("many_long_rows_odd_misaligned", spec((40, 40001), Offset(Contiguous(), 3)), {}),
        ("many_long_rows_odd_masked", spec((40, 40001)), {"values": Values(specials=(-INF,), spacing=3)}),
        # Rows no cluster holds (over 2^20 f32, 2^21 16-bit), more than the whole
        # GPU holds at once: the nvidia grid path, in several rounds; odd rows in
        # and out of place, their edges held by the blocks of each row's first chunk.
        ("rows_beyond_a_cluster_odd", spec((7, 2097153)), {}),
        ("rows_beyond_a_cluster_odd_in_place", spec((7, 2097153)), {"in_place": 0}),
        ("rows_beyond_a_cluster_in_place", spec((7, 2097152)), {"in_place": 0}),
    ]
    # Rows of 8193 to 32768 elements, which the nvidia register path holds in one
    # block per row: aligned, odd with a misaligned start, in place, padded, masked
    # with -inf; and 32768 with a misaligned start, one position more than that path
    # holds, which takes the online path unsplit.
    register_rows = [
        ("register_rows", spec((40, 20000)), {}),
        ("register_rows_odd_misaligned", spec((33, 12345), Offset(Contiguous(), 3)), {}),
        ("register_rows_in_place", spec((24, 16384)), {"in_place": 0}),
        ("register_rows_padded", spec((20, 9000), Padded(8)), {}),
        ("register_rows_longest_misaligned", spec((12, 32768), Offset(Contiguous(), 1)), {}),
        ("register_rows_masked", spec((16, 10007)), {"values": Values(specials=(-INF,), spacing=3)}),
        # More rows than SMs, of 16385 to 32768 elements: the tilelang rows kernel
        # holds each whole in a block of 1024 threads (one element at a time when odd).
        ("rows_of_one_block_odd", spec((160, 24577)), {}),
        ("rows_of_one_block_in_place", spec((140, 32768)), {"in_place": 0}),
        # Partial vectors in place: the nvidia register path reads a warp's edges
        # element by element there (out of place, whole and masked); blocks peel
        # them, in and out of place, every row at another lead. On a warp, a block,
        # and a block holding 16-bit elements as loaded.
        ("block_rows_odd_misaligned", spec((40, 2047), Offset(Contiguous(), 5)), {}),
        ("warp_rows_odd_in_place", spec((96, 777)), {"in_place": 0}),
        ("block_rows_odd_in_place", spec((48, 3001)), {"in_place": 0}),
        ("held_rows_odd_in_place", spec((33, 12345)), {"in_place": 0}),
    ]
    return (
        axis_cases(keeps_axis=True)
        + [
            CorrectnessCase(named(name, dtype), (spec((6, 300)),), dtype, {"dim": -1}, values=values)
            for dtype in DTYPES
            for name, values in extremes
        ]
        + [
            CorrectnessCase(named(name, dtype), (input_spec,), dtype, {"dim": -1}, **fields)
            for dtype in DTYPES
            for name, input_spec, fields in many_long_rows + register_rows
        ]
    )


def api_error_cases():
    return common_api_error_cases(OP)


def benchmark_cases() -> list[BenchmarkCase]:
    shapes = [(8192, 8192), (1024, 32768), (32768, 1024), (256, 262144), (4096, 128)]
    # Long rows (2^17 ... 2^20): one row must be split across blocks. Few rows (the
    # whole tensor near L2's size), then 256 MiB of f32 like the other shapes.
    shapes += [(64, 131072), (16, 524288), (8, 1048576)]
    shapes += [(512, 131072), (128, 524288), (64, 1048576)]
    return [
        BenchmarkCase(named(f"{rows}x{columns}", dtype), ((rows, columns),), dtype, {"dim": -1})
        for dtype in DTYPES
        for rows, columns in shapes
    ]
