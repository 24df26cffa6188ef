"""relu_backward's tables: reference, tolerances, correctness, API-error and benchmark cases."""

from __future__ import annotations

import torch

import operator_runtime as ort
from operator_runtime_testing.api_errors import common_api_error_cases
from operator_runtime_testing.cases import (
    ApiErrorCase,
    BenchmarkCase,
    CorrectnessCase,
    OpSpec,
    Tolerance,
    Values,
    numel,
    out_shape,
    spec,
    tolerances,
)
from operator_runtime_testing.tables import DTYPES, elementwise_cases, named


def torch_gradient(dy: torch.Tensor, x: torch.Tensor, negative_slope: float) -> torch.Tensor:
    """What torch's autograd computes: relu's backward for slope 0 (threshold_backward, so
    x <= 0 gives 0 even for an inf or NaN dy), leaky_relu's for the others."""
    if negative_slope == 0:
        return torch.ops.aten.threshold_backward(dy, x, 0)
    return torch.ops.aten.leaky_relu_backward(dy, x, negative_slope, False)


def reference(dy: torch.Tensor, x: torch.Tensor, negative_slope: float = 0.0) -> torch.Tensor:
    """relu_backward computed by torch in f32, returned in the inputs' dtype."""
    return torch_gradient(dy.float(), x.float(), negative_slope).to(dy.dtype)


OP = OpSpec(
    name="relu_backward",
    reference=reference,
    # A select or one f32 multiply, as torch does them: exact, signed zeros included.
    tolerances={
        dtype: Tolerance(tolerance.atol, tolerance.rtol, signed_zeros=True)
        for dtype, tolerance in tolerances(f32=Tolerance(0.0, 0.0)).items()
    },
    # One compare (and for x <= 0 one multiply) per output element.
    flops=lambda case: numel(out_shape("relu_backward", case.shapes, case.params)),
    peer=lambda out, dy, x, negative_slope: torch_gradient(dy, x, negative_slope),
)

SLOPES = [
    ("leaky_0p01", 0.01),
    ("identity_slope_1", 1.0),
    ("negative_slope", -0.5),
    ("slope_2", 2.0),
    ("negative_zero_slope", -0.0),
]
# NaN, infinities and signed zeros in dy and x. Where both inputs have the same shape
# they land at the same positions; a row of one broadcast against the other (spacing 7
# does not divide the row of 20) pairs them with ordinary values of the other input too.
SPECIALS = Values(specials=(float("nan"), float("inf"), -float("inf"), -0.0, 0.0), spacing=7)
SPECIAL_GEOMETRIES = [
    ("specials", (spec((9, 20)), spec((9, 20)))),
    ("specials_dy_row", (spec((20,)), spec((9, 20)))),
    ("specials_x_row", (spec((9, 20)), spec((20,)))),
]


def correctness_cases() -> list[CorrectnessCase]:
    return (
        elementwise_cases(num_inputs=2, params={"negative_slope": 0.0})
        + [
            CorrectnessCase(
                named(name, dtype), (spec((37, 41)), spec((37, 41))), dtype, {"negative_slope": slope}
            )
            for dtype in DTYPES
            for name, slope in SLOPES
        ]
        + [
            CorrectnessCase(
                named(f"{name}_{slope_name}", dtype), inputs, dtype, {"negative_slope": slope},
                values=SPECIALS,
            )
            for dtype in DTYPES
            for name, inputs in SPECIAL_GEOMETRIES
            for slope_name, slope in [("relu", 0.0), ("leaky_0p1", 0.1), ("negative_slope", -0.5)]
        ]
    )


def api_error_cases():
    return common_api_error_cases(OP) + [
        ApiErrorCase(
            "slope_not_a_number",
            lambda ctx: ort.relu_backward(ctx.tensor((4, 6)), ctx.tensor((4, 6)), "0.1", backend=ctx.backend),
            ort.InvalidArgumentError,
            ort.InvalidArgumentError.default_status,
            "relu_backward: negative_slope must be a number, got str",
        ),
        ApiErrorCase(
            "x_dtype_differs_from_dy",
            lambda ctx: ort.relu_backward_(
                ctx.tensor((4, 6)), ctx.tensor((4, 6)), ctx.tensor((4, 6), torch.float16), backend=ctx.backend
            ),
            ort.UnsupportedDtypeError,
            ort.UnsupportedDtypeError.default_status,
            "relu_backward: x has dtype f16 but out has dtype f32",
        ),
    ]


def benchmark_cases() -> list[BenchmarkCase]:
    problems = [
        ("2p28", (2**28,), 0.0),
        ("2p20", (2**20,), 0.0),
        ("2p20_leaky_0p01", (2**20,), 0.01),
        ("8192x8192", (8192, 8192), 0.0),
    ]
    return [
        BenchmarkCase(named(name, dtype), (shape,) * 2, dtype, {"negative_slope": slope})
        for dtype in DTYPES
        for name, shape, slope in problems
    ]
