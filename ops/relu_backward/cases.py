"""relu_backward's tables: reference, tolerances, correctness, API-error and benchmark cases."""

from __future__ import annotations

import torch

from operator_runtime_testing.api_errors import common_api_error_cases
from operator_runtime_testing.cases import (
    BenchmarkCase,
    CorrectnessCase,
    OpSpec,
    Tolerance,
    numel,
    out_shape,
    tolerances,
)
from operator_runtime_testing.tables import DTYPES, elementwise_cases, named


def reference(dy: torch.Tensor, x: torch.Tensor, negative_slope: float = 0.0) -> torch.Tensor:
    """relu_backward computed by torch in f32 (or wider), returned in the inputs' dtype."""
    # ====== Write relu_backward's torch reference here, then delete the raise. ======
    raise NotImplementedError("relu_backward: not implemented: write reference() in ops/relu_backward/cases.py")


OP = OpSpec(
    name="relu_backward",
    reference=reference,
    tolerances=tolerances(f32=Tolerance(1e-6, 1.3e-6)),
    # Arithmetic per output element: count the operations ReluBackwardFunctor does.
    flops=lambda case: numel(out_shape("relu_backward", case.shapes, case.params)),
)


def correctness_cases() -> list[CorrectnessCase]:
    return elementwise_cases(num_inputs=2, params={"negative_slope": 0.0})


def api_error_cases():
    return common_api_error_cases(OP)


def benchmark_cases() -> list[BenchmarkCase]:
    problems = [("2p28", (2**28,)), ("2p20", (2**20,)), ("8192x8192", (8192, 8192))]
    return [
        BenchmarkCase(named(name, dtype), (shape,) * 2, dtype, {"negative_slope": 0.0})
        for dtype in DTYPES
        for name, shape in problems
    ]
