"""reduce_sum's tables: reference, tolerances, correctness, API-error and benchmark cases."""

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
    Tolerance,
    tolerances,
    Values,
    numel,
    reduced_length,
    spec,
)
from operator_runtime_testing.tables import DTYPES, axis_cases, named

F32_EPS = torch.finfo(torch.float32).eps


def reference(input: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    return torch.sum(input.double(), dim, keepdim=keepdim).to(input.dtype)


def tolerance_rule(base: Tolerance, case: CorrectnessCase) -> Tolerance:
    """A sum of n values of magnitude s has magnitude up to n*s, and f32
    accumulation in any order errs by about n*eps*s at worst: atol grows with
    n*s, while rtol stays the dtype's rounding of the result."""
    n = max(reduced_length(case), 1)
    scale = case.values.scale
    return Tolerance(base.atol * scale * math.sqrt(n) + F32_EPS * n * scale, base.rtol)


OP = OpSpec(
    name="reduce_sum",
    reference=reference,
    tolerances=tolerances(f32=Tolerance(1e-5, 1.3e-6)),
    tolerance_rule=tolerance_rule,
    # One addition per input element.
    flops=lambda case: numel(case.shapes[0]),
    peer=lambda out, x, dim: torch.sum(x, dim=dim, out=out),
)

INF, NAN = float("inf"), float("nan")


def correctness_cases() -> list[CorrectnessCase]:
    extremes = [
        ("magnitudes_1e4", Values("uniform", 1e4)),
        ("all_equal_1e4", Values("constant", 1e4)),
        ("nan_and_inf", Values(specials=(NAN, INF, -INF), spacing=13)),
        ("one_inf_per_row", Values(specials=(INF, -INF), spacing=301)),
    ]
    # Columns whose every group starts past a vector boundary, so each group
    # spans two vectors (sum_columns' shifted loads), over a short and a long
    # leading axis.
    columns_off_vectors = [
        CorrectnessCase(named(f"axis_0_columns_off_vectors_{rows}", dtype),
                        (spec((rows, 24), Offset(Contiguous(), 3)),), dtype, {"dim": 0})
        for dtype in DTYPES
        for rows in (40, 20000)
    ]
    # Short leading axes over many columns, where sum_columns' teams shrink to
    # 1, 2 and 4 threads and a block takes up to 256 column groups: odd column
    # counts (a partial last block, groups shifted), whole vectors, and lines
    # of columns repeated along an outer dimension.
    short_axis_many_columns = [
        CorrectnessCase(named(f"short_axis_{name}", dtype), (spec(shape),), dtype, {"dim": dim})
        for dtype in DTYPES
        for name, shape, dim in (("7_x_3001", (7, 3001), 0), ("33_x_1027", (33, 1027), 0),
                                 ("100_x_1000", (100, 1000), 0), ("20_in_lines", (3, 20, 515), 1))
    ]
    # Leading axes of contiguous inputs whose column count no vector divides:
    # the GPU folds 2, 4 or 8 lines of 16-bit columns into one line of whole
    # vectors (1030 columns: 4), over axes that leave 0 to 7 lines unfolded and
    # a few columns on a long axis (folded sums in chunks); misaligned, the same
    # plan unfolded; 64 x 3001 too short an axis to fold; f32 never folds.
    folded_lines = [
        CorrectnessCase(named(f"axis_0_folded_{length}_x_{columns}{'_offset_1' if offset else ''}", dtype),
                        (spec((length, columns), Offset(Contiguous(), offset)),), dtype, {"dim": 0})
        for dtype in DTYPES
        for length, columns, offset in ((20003, 37, 0), (1003, 1030, 0), (999, 4100, 0),
                                        (64, 3001, 0), (1001, 37, 1))
    ]
    # Rows of exactly eight 16-byte vectors, summed four at a time by teams of
    # eight lanes (sum_short_rows), in a row count that leaves a block's last
    # teams past the end.
    rows_of_8_vectors = [
        CorrectnessCase(named("rows_of_8_vectors", dtype), (spec((1001, 128 // dtype.itemsize)),),
                        dtype, {"dim": -1})
        for dtype in DTYPES
    ]
    # More rows than SMs, of 16385 to 32768 elements: the tilelang rows kernel
    # holds each whole in a block of 1024 threads (one element at a time when odd).
    rows_of_one_block = [
        CorrectnessCase(named(f"rows_of_one_block_{columns}", dtype), (spec((160, columns)),), dtype, {"dim": -1})
        for dtype in DTYPES
        for columns in (24577, 32768)
    ]
    extreme_rows = [
        CorrectnessCase(named(name, dtype), (spec((6, 300)),), dtype, {"dim": -1}, values=values)
        for dtype in DTYPES
        for name, values in extremes
    ]
    return (axis_cases(keeps_axis=False) + columns_off_vectors + short_axis_many_columns
            + folded_lines + rows_of_8_vectors + rows_of_one_block + extreme_rows)


def api_error_cases():
    return common_api_error_cases(OP)


def benchmark_cases() -> list[BenchmarkCase]:
    problems = [((8192, 8192), -1), ((65536, 256), -1), ((8192, 8192), 0), ((256, 262144), -1)]
    return [
        BenchmarkCase(named(f"{'x'.join(map(str, shape))}_dim{dim}", dtype), (shape,), dtype, {"dim": dim})
        for dtype in DTYPES
        for shape, dim in problems
    ]
