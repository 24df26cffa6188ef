"""copy's tables: reference, tolerances, correctness, API-error and benchmark cases."""

from __future__ import annotations

import torch

from operator_runtime_testing.api_errors import common_api_error_cases
from operator_runtime_testing.cases import BenchmarkCase, CorrectnessCase, OpSpec, Tolerance
from operator_runtime_testing.tables import DTYPES, elementwise_cases, named


def reference(src: torch.Tensor) -> torch.Tensor:
    return src.clone()


EXACT = Tolerance(0.0, 0.0)

OP = OpSpec(
    name="copy",
    reference=reference,
    # A copy moves bits: any difference, NaN payloads aside, is a bug.
    tolerances={dtype: EXACT for dtype in DTYPES},
    flops=lambda case: 0,
    peer=lambda out, src: out.copy_(src),
)


def correctness_cases() -> list[CorrectnessCase]:
    return elementwise_cases(num_inputs=1, params={})


def api_error_cases():
    return common_api_error_cases(OP)


def benchmark_cases() -> list[BenchmarkCase]:
    problems = [("2p28", (2**28,)), ("2p20", (2**20,)), ("8192x8192", (8192, 8192))]
    return [
        BenchmarkCase(named(name, dtype), (shape,), dtype)
        for dtype in DTYPES
        for name, shape in problems
    ]
