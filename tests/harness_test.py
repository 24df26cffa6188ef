"""Tests of the shared test harness itself: layouts, values, gap detection,
the bytes formula, tolerance rules, and op_test_main's exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import operator_runtime as ort
from operator_runtime_testing import op_test_main
from operator_runtime_testing.cases import (
    BenchmarkCase,
    Broadcast,
    Contiguous,
    CorrectnessCase,
    Offset,
    Padded,
    Permuted,
    Sliced,
    Strided,
    Values,
    spec,
    transposed,
)
from operator_runtime_testing.tensors import gaps_untouched, generator_for, make_input, placed


@pytest.mark.parametrize(
    "layout, shape, strides, offset, storage",
    [
        (Contiguous(), (2, 3, 4), (12, 4, 1), 0, 24),
        (transposed(2), (3, 5), (1, 3), 0, 15),
        (transposed(3), (2, 3, 5), (15, 1, 3), 0, 30),
        (Permuted((2, 0, 1)), (2, 3, 4), (3, 1, 6), 0, 24),
        (Sliced((2, 3)), (4, 5), (30, 3), 0, 103),
        (Padded(3), (4, 5), (8, 1), 0, 29),
        (Broadcast((1, 5)), (4, 5), (0, 1), 0, 5),
        (Broadcast((4, 1)), (4, 5), (1, 0), 0, 4),
        (Broadcast((5,)), (2, 4, 5), (0, 0, 1), 0, 5),
        (Offset(Padded(1), 3), (2, 2), (3, 1), 3, 8),
        (Strided((0, 2)), (3, 4), (0, 2), 0, 7),
        (Contiguous(), (3, 0), (1, 1), 0, 0),
        (Contiguous(), (), (), 0, 1),
    ],
)
def test_layouts_place_elements_where_torch_would(layout, shape, strides, offset, storage):
    placement = layout.place(shape)
    assert (placement.strides, placement.offset, placement.storage) == (strides, offset, storage)


def test_transposed_matches_torch():
    x = torch.empty(5, 3).t()
    assert transposed(2).place(tuple(x.shape)).strides == x.stride()


def test_inputs_fill_their_view_and_leave_gaps_nan():
    tensor = make_input(spec((4, 5), Padded(2)), torch.float32, "cpu", Values(), generator_for("x"))
    assert tensor.shape == (4, 5) and tensor.stride() == (7, 1)
    assert not torch.isnan(tensor).any()
    storage = torch.as_strided(tensor, (tensor.untyped_storage().nbytes() // 4,), (1,), 0)
    assert torch.isnan(storage).sum() == 3 * 2 + 0  # the pads after rows 0..2; none after the last row


def test_inputs_are_deterministic_per_case_name():
    def make(name):
        return make_input(spec((64,)), torch.float16, "cpu", Values(), generator_for(name))

    assert torch.equal(make("a"), make("a"))
    assert not torch.equal(make("a"), make("b"))


def test_broadcast_inputs_share_their_values():
    tensor = make_input(spec((3, 4), Broadcast((1, 4))), torch.float32, "cpu", Values(), generator_for("b"))
    assert tensor.stride() == (0, 1)
    assert torch.equal(tensor[0], tensor[2])


def test_values_specials_and_constants():
    values = Values(specials=(float("nan"), -float("inf")), spacing=2).generate((6,), generator_for("s"))
    assert torch.isnan(values[0]) and values[2] == -float("inf") and torch.isnan(values[4])
    assert torch.isfinite(values[1::2]).all()
    assert torch.equal(Values("constant", 3.0).generate((2, 2), generator_for("c")), torch.full((2, 2), 3.0))
    uniform = Values("uniform", 1e4).generate((1000,), generator_for("u"))
    assert uniform.abs().max() <= 1e4 and uniform.abs().max() > 5e3


def test_gaps_untouched_sees_a_write_into_padding():
    out = placed((3, 4), Padded(2), torch.float32, "cpu")
    out.fill_(1.0)
    assert gaps_untouched(out)
    torch.as_strided(out, (1,), (1,), 4).fill_(2.0)  # the first pad element
    assert not gaps_untouched(out)


def test_bytes_count_broadcast_inputs_at_their_real_size():
    from ops.vector_add.cases import OP

    case = BenchmarkCase("b", ((8, 16), (1, 16)), torch.float16)
    assert OP.bytes(case) == (8 * 16 + 16 + 8 * 16) * 2
    assert OP.flops(case) == 8 * 16


def test_reduction_bytes_use_the_reduced_out_shape():
    from ops.reduce_sum.cases import OP

    case = BenchmarkCase("r", ((64, 32),), torch.float32, {"dim": 0})
    assert OP.bytes(case) == (64 * 32 + 32) * 4


def test_sum_tolerance_grows_with_row_length():
    from ops.reduce_sum.cases import OP

    def tolerance(n):
        return OP.tolerance(CorrectnessCase("t", (spec((2, n)),), torch.float32, {"dim": -1}))

    assert tolerance(2**20).atol > 100 * tolerance(16).atol
    assert tolerance(16).rtol == tolerance(2**20).rtol


def _run_main(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run(
        [sys.executable, op_test_main.__file__, *args], capture_output=True, text=True, env=env
    )


def test_op_test_main_fails_for_a_backend_without_its_device():
    missing = next(name for name in ("metax", "nvidia") if name not in ort.available_backends())
    result = _run_main("--op=relu", f"--backend={missing}")
    assert result.returncode == 1
    assert f"need backend '{missing}', which cannot run here" in result.stderr


def test_op_test_main_fails_when_no_test_runs():
    result = _run_main("--op=relu", "--backend=cpu", "-k", "no_such_test")
    assert result.returncode != 0
    assert "deselected" in result.stdout


def test_op_test_main_passes_and_prints_the_summary():
    result = _run_main("--op=copy", "--backend=cpu", "-k", "odd_1d")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
