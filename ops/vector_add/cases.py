"""vector_add's tables: reference, tolerances, correctness, API-error and benchmark cases."""

from __future__ import annotations

import torch

from operator_runtime_testing.api_errors import common_api_error_cases
from operator_runtime_testing.cases import (
    BenchmarkCase,
    CorrectnessCase,
    OpSpec,
    Tolerance,
    tolerances,
    numel,
    out_shape,
)
from operator_runtime_testing.tables import DTYPES, elementwise_cases, named


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() + b.float()).to(a.dtype)


OP = OpSpec(
    name="vector_add",
    reference=reference,
    tolerances=tolerances(f32=Tolerance(1e-6, 1.3e-6)),
    # One addition per output element.
    flops=lambda case: numel(out_shape("vector_add", case.shapes, case.params)),
    peer=lambda out, a, b: torch.add(a, b, out=out),
)


def correctness_cases() -> list[CorrectnessCase]:
    return elementwise_cases(num_inputs=2, params={})


def api_error_cases():
    return common_api_error_cases(OP)


def benchmark_cases() -> list[BenchmarkCase]:
    problems = [
        ("2p28", ((2**28,), (2**28,))),
        ("2p20", ((2**20,), (2**20,))),
        ("8192x8192_plus_row", ((8192, 8192), (1, 8192))),
    ]
    return [
        BenchmarkCase(named(name, dtype), shapes, dtype)
        for dtype in DTYPES
        for name, shapes in problems
    ]
