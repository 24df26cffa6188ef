"""Correctness geometries shared by operators of one kind.

Every elementwise operator is checked on the same shapes, layouts, broadcasts
and in-place forms (``elementwise_cases``); every reduction and normalization
on the same axes and layouts (``axis_cases``). An operator's cases.py adds the
values and parameters only it cares about.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

from operator_runtime_testing.cases import (
    CONTIGUOUS,
    DTYPE_NAMES,
    Broadcast,
    Contiguous,
    CorrectnessCase,
    Layout,
    Offset,
    Padded,
    Permuted,
    Sliced,
    TensorSpec,
    Values,
    spec,
    transposed,
)

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LARGE_1D = 2**20 + 3
LONG_ROW = 2**20


def named(name: str, dtype: torch.dtype) -> str:
    return f"{name}_{DTYPE_NAMES[dtype]}"


def _same_layout(num_inputs: int, shape: Sequence[int], layout: Layout = CONTIGUOUS):
    return tuple(spec(shape, layout) for _ in range(num_inputs))


def elementwise_cases(
    num_inputs: int, params: Mapping[str, Any], dtypes: Sequence[torch.dtype] = DTYPES
) -> list[CorrectnessCase]:
    """Shapes (0-d to 8-d, empty, odd, 2^20+3 elements), layouts (transposed,
    permuted, sliced, padded, misaligned), stride-0 and shape broadcasts,
    in-place and strided outputs, in every dtype."""
    same = lambda shape, layout=CONTIGUOUS: _same_layout(num_inputs, shape, layout)  # noqa: E731
    geometries: list[tuple[str, tuple[TensorSpec, ...], dict]] = [
        ("scalar_0d", same(()), {}),
        ("one_element", same((1,)), {}),
        ("empty_1d", same((0,)), {}),
        ("empty_middle_dim", same((3, 0, 5)), {}),
        ("odd_1d", same((1023,)), {}),
        ("large_1d", same((LARGE_1D,)), {}),
        ("odd_matrix", same((17, 129)), {}),
        ("ndim_8", same((2, 3, 1, 2, 3, 1, 2, 3)), {}),
        ("transposed", same((33, 65), transposed(2)), {}),
        ("permuted_4d", same((4, 5, 6, 7), Permuted((2, 0, 3, 1))), {}),
        ("sliced_steps", same((16, 31), Sliced((2, 3))), {}),
        ("padded_rows", same((9, 100), Padded(3)), {}),
        ("misaligned_start", same((1001,), Offset(Contiguous(), 1)), {}),
        ("stride0_rows", same((30, 40), Broadcast((1, 40))), {}),
        ("stride0_columns", same((30, 40), Broadcast((30, 1))), {}),
        ("broadcast_to_larger_out", same((5,)), {"out_shape": (4, 5)}),
        ("out_transposed", same((33, 65)), {"out": transposed(2)}),
        ("out_padded", same((9, 100)), {"out": Padded(7)}),
        ("out_sliced", same((12, 10)), {"out": Sliced((3, 2))}),
        ("in_place", same((64, 33)), {"in_place": 0}),
        ("in_place_transposed", same((40, 24), transposed(2)), {"in_place": 0}),
        ("large_magnitudes", same((2, 500)), {"values": Values("uniform", 1e4)}),
        ("nan_and_inf", same((3, 77)), {"values": Values(specials=(float("nan"), float("inf"), -float("inf")), spacing=3)}),
    ]
    if num_inputs > 1:
        shapes = [(4, 1, 6), (5, 1)] + [(6,)] * (num_inputs - 2)
        mixed = [transposed(2), Sliced((2, 1)), Padded(2)]
        geometries += [
            ("broadcast_shapes", tuple(spec(shape) for shape in shapes), {}),
            ("broadcast_scalar_0d", (spec((7, 9)), *_same_layout(num_inputs - 1, ())), {}),
            (
                "mixed_layouts",
                tuple(spec((20, 30), mixed[i % len(mixed)]) for i in range(num_inputs)),
                {},
            ),
            ("in_place_second_input", same((50, 3)), {"in_place": 1}),
        ]
    return [
        CorrectnessCase(named(name, dtype), inputs, dtype, dict(params), **fields)
        for dtype in dtypes
        for name, inputs, fields in geometries
    ]


def axis_cases(
    keeps_axis: bool, dtypes: Sequence[torch.dtype] = DTYPES, num_inputs: int = 1
) -> list[CorrectnessCase]:
    """Rows of 1 to 2^20 elements, every axis position (negative too, 1-d to
    8-d), strided axes, transposed, sliced, padded, misaligned and stride-0
    inputs, empty tensors, strided outputs, and (keeps_axis: normalizations)
    in-place or (reductions) keepdim, in every dtype. With two inputs (of one
    shape, as softmax_backward's) both take each geometry's layout, and a few
    cases give them different layouts or write out over the second."""
    geometries: list[tuple[str, TensorSpec, dict]] = [
        ("rows_of_one", spec((7, 1)), {}),
        ("one_dim", spec((1000,)), {}),
        ("odd_rows", spec((3, 1023)), {}),
        ("odd_rows_longer", spec((17, 4097)), {}),
        ("long_row_2p20", spec((1, LONG_ROW)), {}),
        ("many_short_rows", spec((4096, 7)), {}),
        ("axis_0_strided", spec((1000, 33)), {"dim": 0}),
        # A long leading axis over an odd number of columns: column groups that
        # straddle no line, a partial last group, chunks combined after.
        ("axis_0_long_odd_columns", spec((20000, 13)), {"dim": 0}),
        ("middle_axis", spec((6, 50, 7)), {"dim": 1}),
        ("middle_axis_negative", spec((6, 50, 7)), {"dim": -2}),
        ("ndim_8", spec((2, 3, 2, 3, 2, 3, 2, 3)), {"dim": -4}),
        ("ndim_8_first_axis", spec((3, 2, 2, 3, 2, 1, 2, 3)), {"dim": 0}),
        ("transposed", spec((65, 33), transposed(2)), {}),
        ("transposed_axis_0", spec((65, 33), transposed(2)), {"dim": 0}),
        ("permuted_4d", spec((4, 5, 6, 7), Permuted((3, 1, 0, 2))), {"dim": 1}),
        ("sliced_steps", spec((16, 40), Sliced((2, 3))), {}),
        ("padded_rows", spec((9, 100), Padded(5)), {}),
        ("misaligned_start", spec((8, 256), Offset(Contiguous(), 1)), {}),
        # Rows whose starts fall at every offset from a 16-byte boundary (vector
        # kernels walk them with partial first and last vectors), short rows
        # batched several per team, a long odd row cut into chunks, and an out
        # whose rows sit at other offsets than in's (no common vectors).
        ("rows_at_every_offset", spec((24, 333)), {}),
        ("odd_rows_misaligned_start", spec((9, 1001), Offset(Contiguous(), 3)), {}),
        ("short_rows_batched", spec((1001, 24)), {}),
        # Packed odd rows over many shared-memory spans (softmax_packed_rows),
        # the last span partial and the rows not a multiple of the teams.
        ("odd_rows_many_spans", spec((5000, 37)), {}),
        ("long_odd_rows", spec((3, 300007)), {}),
        ("out_at_other_offset", spec((12, 40)), {"out": Offset(Contiguous(), 1)}),
        ("stride0_rows", spec((32, 64), Broadcast((1, 64))), {}),
        ("stride0_axis", spec((32, 64), Broadcast((32, 1))), {}),
        ("no_rows", spec((0, 5)), {}),
        ("empty_axis", spec((5, 0)), {}),
        ("out_sliced", spec((12, 30)), {"out": Sliced((3,) if not keeps_axis else (3, 2))}),
    ]
    if keeps_axis:
        geometries += [
            ("out_transposed", spec((33, 65)), {"out": transposed(2)}),
            ("in_place", spec((64, 33)), {"in_place": 0}),
            ("in_place_axis_0", spec((64, 33)), {"in_place": 0, "dim": 0}),
        ]
    else:
        geometries += [
            ("keepdim", spec((6, 50, 7)), {"dim": 1, "keepdim": True}),
            ("keepdim_last", spec((10, 33)), {"keepdim": True}),
        ]
    if num_inputs > 1:
        geometries += [
            ("in_place_second_input", spec((64, 33)), {"in_place": 1}),
            ("second_input_transposed", spec((33, 65)), {"second": transposed(2)}),
            ("second_input_at_other_offset", spec((12, 40)), {"second": Offset(Contiguous(), 1)}),
            ("second_input_padded_axis_0", spec((40, 24)), {"second": Padded(3), "dim": 0}),
            ("second_input_stride0_rows", spec((32, 64)), {"second": Broadcast((1, 64))}),
        ]
    cases = []
    for dtype in dtypes:
        for name, input_spec, fields in geometries:
            fields = dict(fields)
            params = {"dim": fields.pop("dim", -1)}
            if fields.pop("keepdim", False):
                params["keepdim"] = True
            second = fields.pop("second", input_spec.layout)
            inputs = (input_spec, spec(input_spec.shape, second))[:num_inputs]
            cases.append(CorrectnessCase(named(name, dtype), inputs, dtype, params, **fields))
    return cases
