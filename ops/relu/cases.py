"""relu's tables: reference, tolerances, correctness, API-error and benchmark cases."""

from __future__ import annotations

import torch

from operator_runtime_testing.api_errors import common_api_error_cases
from operator_runtime_testing.cases import (
    BenchmarkCase,
    CorrectnessCase,
    OpSpec,
    Tolerance,
    tolerances,
    Values,
    numel,
    spec,
)
from operator_runtime_testing.tables import DTYPES, elementwise_cases, named


def reference(input: torch.Tensor, negative_slope: float = 0.0) -> torch.Tensor:
    """torch.relu for slope 0 (so -inf gives 0, not -inf * 0 = NaN), else leaky_relu."""
    x = input.float()
    result = torch.relu(x) if negative_slope == 0 else torch.nn.functional.leaky_relu(x, negative_slope)
    return result.to(input.dtype)


OP = OpSpec(
    name="relu",
    reference=reference,
    tolerances=tolerances(f32=Tolerance(1e-6, 1.3e-6)),
    # One compare (and for negative inputs one multiply) per element.
    flops=lambda case: numel(case.shapes[0]),
    peer=lambda out, x, negative_slope: torch.nn.functional.leaky_relu(x, negative_slope),
)


def correctness_cases() -> list[CorrectnessCase]:
    slopes = [("leaky_0p01", 0.01), ("identity_slope_1", 1.0), ("negative_slope", -0.5), ("slope_2", 2.0)]
    specials = Values(specials=(float("nan"), float("inf"), -float("inf"), -0.0), spacing=5)
    return (
        elementwise_cases(num_inputs=1, params={"negative_slope": 0.0})
        + [
            CorrectnessCase(named(name, dtype), (spec((37, 41)),), dtype, {"negative_slope": slope})
            for dtype in DTYPES
            for name, slope in slopes
        ]
        + [
            CorrectnessCase(
                named("leaky_nan_and_inf", dtype), (spec((9, 20)),), dtype,
                {"negative_slope": 0.1}, values=specials,
            )
            for dtype in DTYPES
        ]
    )


def api_error_cases():
    return common_api_error_cases(OP)


def benchmark_cases() -> list[BenchmarkCase]:
    problems = [("2p28", (2**28,)), ("2p20", (2**20,)), ("8192x8192", (8192, 8192))]
    return [
        BenchmarkCase(named(name, dtype), (shape,), dtype, {"negative_slope": 0.0})
        for dtype in DTYPES
        for name, shape in problems
    ]
