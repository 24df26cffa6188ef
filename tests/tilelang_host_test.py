"""The tilelang backend's host side without a GPU (python/operator_runtime/tilelang/backend.py).

Its kernels are stood in for by recorders, so what is checked is what the host side
decides from the C runtime's plan: which kernels a call launches, on which views of
which memory, and when a prepared run binds its views again. The kernels' math is
checked by the case tables on a GPU (docs/tilelang.md §5).
"""

from __future__ import annotations

import sys

import pytest
import torch

import operator_runtime as ort
from operator_runtime.tilelang import backend, registry

KERNEL_NAMES = ["chunk_stats", "chunk_write", "columns", "combine_stats", "grid", "rows", "shared_rows"]


class RecordingKernels:
    """backend.Kernels for cpu tensors: each kernel records its launches, as
    (name, [(shape, strides, data pointer) of each tensor argument]) and the
    constants it was compiled with (launched_consts); an H100's
    SMs unless told."""

    def __init__(self, dtype: str = "float32", multiprocessors: int = 132):
        self.dtype = dtype
        self.multiprocessors = multiprocessors
        self.threads_per_multiprocessor = 2048
        self.launches: list[tuple[str, list[tuple]]] = []
        self.launched_consts: list[dict] = []
        self.compiled: list[tuple[str, dict]] = []

    def get(self, name: str, op: str | None = None, **consts):
        self.compiled.append((name, consts))
        def launch(*args):
            self.launches.append((name, [(tuple(a.shape), a.stride(), a.data_ptr()) for a in args
                                         if isinstance(a, torch.Tensor)]))
            self.launched_consts.append(consts)
        return launch


@pytest.fixture(autouse=True)
def softmax_kernels(monkeypatch):
    """softmax as if its TileLang kernels were registered (importing them needs TileLang)."""
    monkeypatch.setattr(registry, "kernels", lambda op: KERNEL_NAMES)


def plan_of(out: torch.Tensor, x: torch.Tensor) -> dict:
    """The C runtime's plan of softmax(x) into out along the last dim."""
    with ort.prepare_softmax(out, x, -1, backend="cpu") as prepared:
        return prepared._descriptor.plan


def prepared(out: torch.Tensor, x: torch.Tensor, kernels: RecordingKernels) -> backend.TileLangKernel:
    run = backend.ReductionRun("softmax", plan_of(out, x), kernels, aligned=True)
    return backend.TileLangKernel("softmax", run)


def test_a_prepared_run_binds_its_views_once_per_set_of_pointers_until_released():
    kernels = RecordingKernels()
    x, out = torch.randn(64, 100), torch.empty(64, 100)
    kernel = prepared(out, x, kernels)
    kernel.run(out, [x], 0)
    assert not kernels.compiled[-1][1]["peeled"]
    first = kernel._launch[1]
    kernel.run(out, [x], 0)
    assert kernel._launch[1] is first  # the same launch, no new views
    # Whole rows of 100 f32 in 16-byte vectors: one launch of `rows` per run, on
    # each tensor's vectors and rows, compiled without edges (rows of whole vectors).
    assert kernels.launches == [("rows", [((1600, 4), (4, 1), x.data_ptr()), ((64, 100), (100, 1), x.data_ptr()),
                                          ((1600, 4), (4, 1), out.data_ptr()),
                                          ((64, 100), (100, 1), out.data_ptr())])] * 2
    x.data = torch.randn(64, 100)  # the memory moved: the next run binds again, to it
    kernel.run(out, [x], 0)
    assert kernel._launch[1] is not first
    assert kernels.launches[-1][1][0][2] == x.data_ptr()
    # release (after each ort.<op>() call, whose kernel is kept) lets go of the views.
    kernel.release()
    assert kernel._launch is None


def test_regimes_from_the_plan():
    # Rows longer than a block holds run in chunks held by blocks resident at once: one grid kernel.
    kernels = RecordingKernels()
    x, out = torch.randn(4, 100_000), torch.empty(4, 100_000)
    prepared(out, x, kernels).run(out, [x], 0)
    assert [name for name, _ in kernels.launches] == ["grid"]
    # On a GPU that holds fewer chunks than a row has: statistics, their combination, the writes.
    kernels = RecordingKernels(multiprocessors=2)
    prepared(out, x, kernels).run(out, [x], 0)
    assert [name for name, _ in kernels.launches] == ["chunk_stats", "combine_stats", "chunk_write"]
    # softmax over dim 0 of a contiguous (n, inner) tensor: columns, read in place.
    kernels = RecordingKernels()
    x, out = torch.randn(300, 64), torch.empty(300, 64)
    with ort.prepare_softmax(out, x, 0, backend="cpu") as p:
        run = backend.ReductionRun("softmax", p._descriptor.plan, kernels, aligned=True)
    backend.TileLangKernel("softmax", run).run(out, [x], 0)
    assert kernels.launches == [("columns", [((1, 300, 16, 4), (19200, 64, 4, 1), x.data_ptr()),
                                             ((1, 300, 16, 4), (19200, 64, 4, 1), out.data_ptr())])]
    # Transposed rows are gathered into a contiguous matrix first: the kernel reads a copy.
    kernels = RecordingKernels()
    x, out = torch.randn(100, 64).t(), torch.empty(64, 100)
    prepared(out, x, kernels).run(out, [x], 0)
    (name, args), = kernels.launches
    assert name == "rows" and args[0][2] != x.data_ptr()


def test_rows_of_up_to_32768_run_whole_in_one_block_when_they_fill_the_gpu():
    kernels = RecordingKernels()
    x, out = torch.randn(160, 24577), torch.empty(160, 24577)
    prepared(out, x, kernels).run(out, [x], 0)
    assert [name for name, _ in kernels.launches] == ["rows"]
    assert kernels.compiled[-1][1] | {"batch": None} == {
        "dtype": "float32", "block_m": 1, "width": 32768, "vec": 4, "peeled": True, "threads": 1024, "batch": None}
    # Fewer rows than SMs: chunks spread them over the GPU instead.
    kernels = RecordingKernels()
    x, out = torch.randn(100, 24577), torch.empty(100, 24577)
    prepared(out, x, kernels).run(out, [x], 0)
    assert [name for name, _ in kernels.launches] == ["grid"]
    # Two inputs of 16 elements a thread: 16384 is the widest row a block of 1024 threads holds.
    assert max(backend.row_widths("softmax_backward")) == 16384
    assert max(backend.row_widths("softmax")) == max(backend.row_widths("reduce_sum")) == 32768


def test_long_16_bit_rows_run_one_a_block_in_shared_memory_when_they_fill_the_gpu():
    def launched(shape, dtype, multiprocessors=132):
        kernels = RecordingKernels(dtype, multiprocessors)
        x = torch.randn(shape).to(getattr(torch, dtype))
        out = torch.empty_like(x)
        prepared(out, x, kernels).run(out, [x], 0)
        return kernels
    # Longer than a register block holds (32768), up to 53248 elements, with
    # SHARED_ROWS_PER_SM rows an SM: one row a block, on the same two views as `rows`.
    rows = backend.SHARED_ROWS_PER_SM * 132
    kernels = launched((rows, 50257), "bfloat16")
    assert kernels.compiled == [("shared_rows", {"dtype": "bfloat16", "width": 53248, "vec": 8, "threads": 256})]
    (name, args), = kernels.launches
    assert name == "shared_rows" and [shape for shape, _, _ in args] == [(rows * 50257 // 8, 8), (rows, 50257)] * 2
    assert launched((rows, 32769), "float16").compiled[-1][0] == "shared_rows"
    # Rows a register block holds, f32 rows, rows past the widest width and fewer
    # rows than that (spread over the GPU in chunks) take the other regimes.
    assert [name for name, _ in launched((rows, 32768), "bfloat16").launches] == ["rows"]
    assert [name for name, _ in launched((rows, 24577), "bfloat16").launches] == ["rows"]
    assert [name for name, _ in launched((rows, 50257), "float32").launches] == ["grid"]
    assert [name for name, _ in launched((rows, 53249), "bfloat16").launches] == ["grid"]
    assert [name for name, _ in launched((rows - 1, 50257), "bfloat16").launches] == ["grid"]
    # Misaligned data reads one element at a time (vec 1) and keeps the grid kernel.
    kernels = RecordingKernels("bfloat16")
    x = torch.randn(rows, 50257).to(torch.bfloat16)
    run = backend.ReductionRun("softmax", plan_of(x, x), kernels, aligned=False)
    backend.TileLangKernel("softmax", run).run(x, [x], 0)
    assert [name for name, _ in kernels.launches] == ["grid"] and kernels.compiled[-1][1]["vec"] == 1


def test_rows_of_any_length_are_read_in_vectors_and_their_edges_element_by_element():
    # 24577 f32 a row, one row a block: the kernels see the whole data as 983080
    # vectors (the last element, in a partial last vector, only through the rows)
    # and as (160, 24577) rows.
    kernels = RecordingKernels()
    x, out = torch.randn(160, 24577), torch.empty(160, 24577)
    prepared(out, x, kernels).run(out, [x], 0)
    assert kernels.compiled[-1][1]["vec"] == 4 and kernels.compiled[-1][1]["peeled"]
    assert kernels.launches == [("rows", [((983080, 4), (4, 1), x.data_ptr()),
                                          ((160, 24577), (24577, 1), x.data_ptr()),
                                          ((983080, 4), (4, 1), out.data_ptr()),
                                          ((160, 24577), (24577, 1), out.data_ptr())])]
    # Short odd rows, several to a block (staged through shared memory by tiles.load_rows),
    # see the same two views.
    kernels = RecordingKernels()
    x, out = torch.randn(64, 101), torch.empty(64, 101)
    prepared(out, x, kernels).run(out, [x], 0)
    assert kernels.compiled[-1][1]["vec"] == 4 and kernels.compiled[-1][1]["peeled"]
    assert kernels.compiled[-1][1]["block_m"] > 1
    assert kernels.launches[0][1][:2] == [((1616, 4), (4, 1), x.data_ptr()), ((64, 101), (101, 1), x.data_ptr())]
    # Long odd rows in chunks: the grid kernel and every chunk kernel see the same two views.
    kernels = RecordingKernels("bfloat16")
    x = torch.randn(4, 100_001, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    prepared(out, x, kernels).run(out, [x], 0)
    (grid,) = kernels.launches
    assert grid[1][:2] == [((50_000, 8), (8, 1), x.data_ptr()), ((4, 100_001), (100_001, 1), x.data_ptr())]
    assert grid[1][-1] == ((4, 100_001), (100_001, 1), out.data_ptr())
    kernels = RecordingKernels("bfloat16", multiprocessors=2)
    prepared(out, x, kernels).run(out, [x], 0)
    stats, combine, write = kernels.launches
    assert stats[1][:2] == [((50_000, 8), (8, 1), x.data_ptr()), ((4, 100_001), (100_001, 1), x.data_ptr())]
    assert write[1][0] == stats[1][0] and write[1][-1] == ((4, 100_001), (100_001, 1), out.data_ptr())
    assert all(consts.get("vec", 8) == 8 and consts.get("peeled", True) for _, consts in kernels.compiled)


def test_the_grid_regime_holds_as_many_rows_as_the_resident_blocks_hold_chunks():
    # 256 rows of 262144 on 132 SMs: chunks of 16384 in 512 threads, compiled for 2
    # blocks per SM (64 registers a thread): 264 blocks hold 16 rows of 16 chunks at once.
    kernels = RecordingKernels()
    run = backend.RowsRun("softmax", kernels, 256, 262_144, 4)
    assert kernels.compiled == [("grid", {"dtype": "float32", "width": 16384, "vec": 4, "peeled": False,
                                          "threads": 512, "blocks_per_sm": 2})]
    assert (run.chunks, run.rows_per_round) == (16, 16)
    x, out = torch.randn(256, 262_144), torch.empty(256, 262_144)
    run.bind(out, [x])()
    (name, args), = kernels.launches
    # A (max, sum) cell per (row, chunk), as (rounds, rows_per_round, chunks, 2): the launch.
    assert name == "grid" and args[2][:2] == ((16, 16, 16, 2), (512, 32, 2, 1))
    # Rows of 4194304: 256 chunks, one row a round; fewer rows than a round holds: all at once.
    assert backend.RowsRun("softmax", RecordingKernels(), 16, 4_194_304, 4).rows_per_round == 1
    assert backend.RowsRun("softmax", RecordingKernels(), 8, 65_536, 4).rows_per_round == 8
    # Narrow chunks run in blocks of 128 threads, 8 a SM; an SM of fewer threads holds fewer.
    assert backend.grid_tile("softmax", 1024, 4)["blocks_per_sm"] == 8
    assert backend.resident_blocks(backend.grid_tile("softmax", 16384, 4), 132, 768) == 132
    assert backend.rows_per_round(10, 300, 264) == 0


def test_softmax_backward_runs_long_rows_on_the_grid_with_a_dot_product_cell_per_chunk(monkeypatch):
    # 1024 rows of 32768 bf16 on 132 SMs: dy and y in chunks of 16384, 16 elements of each a
    # thread (1024 threads, one block an SM): 132 blocks hold 66 rows of 2 chunks at once.
    monkeypatch.setattr(registry, "kernels", lambda op: ["chunk_dots", "chunk_write", "columns", "grid", "rows"])
    kernels = RecordingKernels("bfloat16")
    run = backend.RowsRun("softmax_backward", kernels, 1024, 32_768, 8)
    assert kernels.compiled == [("grid", {"dtype": "bfloat16", "width": 16384, "vec": 8, "peeled": False,
                                          "threads": 1024, "blocks_per_sm": 1})]
    dy, y = torch.randn(1024, 32_768, dtype=torch.bfloat16), torch.randn(1024, 32_768, dtype=torch.bfloat16)
    out = torch.empty_like(dy)
    run.bind(out, [dy, y])()
    (name, args), = kernels.launches
    # dy's and y's views, then the dots (rounds, rows_per_round, chunks), then out's views.
    assert name == "grid" and args[4][:2] == ((16, 66, 2), (132, 2, 1))
    assert [arg[2] for arg in args[:4] + args[5:]] == [dy.data_ptr()] * 2 + [y.data_ptr()] * 2 + [out.data_ptr()] * 2


def test_a_refused_grid_launch_falls_back_to_chunks_and_other_errors_raise():
    class RefusingKernels(RecordingKernels):
        def __init__(self, error: str):
            super().__init__()
            self.error = error

        def get(self, name: str, op: str | None = None, **consts):
            launch = super().get(name, op, **consts)
            if name != "grid":
                return launch
            def refuse(*args):
                launch(*args)
                raise RuntimeError(self.error)
            return refuse

    x, out = torch.randn(4, 100_000), torch.empty(4, 100_000)
    kernels = RefusingKernels("CUDALaunch Error: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE\n grid=(98,4,1)")
    kernel = prepared(out, x, kernels)
    kernel.run(out, [x], 0)
    kernel.run(out, [x], 0)  # the next run goes to the chunks at once
    assert [name for name, _ in kernels.launches] == [
        "grid", "chunk_stats", "combine_stats", "chunk_write", "chunk_stats", "combine_stats", "chunk_write"]
    kernels = RefusingKernels("CUDALaunch Error: CUDA_ERROR_ILLEGAL_ADDRESS")
    with pytest.raises(RuntimeError, match="ILLEGAL_ADDRESS"):
        prepared(out, x, kernels).run(out, [x], 0)


def test_f32_partial_sums_are_summed_by_the_one_element_rows_kernel():
    kernels = RecordingKernels()
    partials, out = torch.randn(4, 100), torch.empty(4)
    backend.SumLevels(kernels, 4, 100, "float32")(partials, out.view(4, 1))
    assert kernels.compiled[-1][1]["vec"] == 1
    assert kernels.launches == [("rows", [((400, 1), (1, 1), partials.data_ptr()),
                                          ((4, 100), (100, 1), partials.data_ptr()), ((4, 1), (1, 1), out.data_ptr())])]


@pytest.mark.parametrize("multiprocessors", [132, 2])
@pytest.mark.parametrize("shape", [(4096, 33), (64, 101), (1000, 255), (8, 2049), (3, 100_001), (1, 1 << 20)])
def test_reduce_sum_launches_staged_tiles_over_whole_rows_only(monkeypatch, shape, multiprocessors):
    # A staged tile (several odd rows a block) holds whole rows and ignores the chunk
    # (tiles.load_rows): reduce_sum's rows kernel, which also sums chunks, must be launched
    # with one when its out has one column.
    monkeypatch.setattr(registry, "kernels", lambda op: ["rows", "chunk_sums", "columns"])
    kernels = RecordingKernels("bfloat16", multiprocessors)
    m, n = shape
    backend.RowsRun("reduce_sum", kernels, m, n, 8)(torch.empty(m, dtype=torch.bfloat16),
                                                   [torch.randn(m, n, dtype=torch.bfloat16)])
    staged = [(name, views[-1][0]) for (name, views), consts in zip(kernels.launches, kernels.launched_consts)
              if consts["block_m"] > 1 and consts.get("peeled")]
    assert all(out_shape == (m, 1) for _, out_shape in staged), staged
    assert bool(staged) == (n < 256)  # the short odd rows are the staged ones


def test_misaligned_tensors_take_the_one_element_kernels():
    kernels = RecordingKernels()
    x, out = torch.randn(64 * 100 + 1)[1:].view(64, 100), torch.empty(64, 100)
    prepared(out, x, kernels).run(out, [x], 0)
    assert kernels.compiled[-1][1]["vec"] == 1
    assert kernels.launches[0][1][:2] == [((6400, 1), (1, 1), x.data_ptr()), ((64, 100), (100, 1), x.data_ptr())]


def test_a_run_after_destroy_is_refused():
    kernels = RecordingKernels()
    x, out = torch.randn(8, 32), torch.empty(8, 32)
    kernel = prepared(out, x, kernels)
    kernel.destroy()
    with pytest.raises(ort.InvalidArgumentError, match="softmax: descriptor was destroyed"):
        kernel.run(out, [x], 0)
    assert kernels.launches == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))


def added(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, kernels: RecordingKernels) -> None:
    """Runs vector_add(a, b) into out through the tilelang host side on kernels."""
    with ort.prepare_vector_add(out, a, b, backend="cpu") as p:
        run = backend.FlatRun(p._descriptor.plan, kernels, [])
    backend.TileLangKernel("vector_add", run).run(out, [a, b], 0)


def test_broadcast_inputs_run_in_place_as_outer_rows_and_vectors():
    # A row added to every row of a matrix: b read in place, repeated along the rows.
    kernels = RecordingKernels()
    a, b, out = torch.randn(8, 64), torch.randn(1, 64), torch.empty(8, 64)
    added(out, a, b, kernels)
    assert kernels.compiled[-1] == ("broadcast", {"dtype": "float32", "vec": 4, "constant_inner": (False, False)})
    assert kernels.launches == [("broadcast", [((1, 8, 16, 4), (512, 64, 4, 1), a.data_ptr()),
                                               ((1, 1, 16, 4), (64, 64, 4, 1), b.data_ptr()),
                                               ((1, 8, 16, 4), (512, 64, 4, 1), out.data_ptr())])]
    # A per-channel bias of an (n, c, hw) tensor: constant along the inner dim, one element each.
    kernels = RecordingKernels("bfloat16")
    a, b, out = torch.randn(4, 6, 32, dtype=torch.bfloat16), torch.randn(1, 6, 1, dtype=torch.bfloat16), \
        torch.empty(4, 6, 32, dtype=torch.bfloat16)
    added(out, a, b.expand(4, 6, 32), kernels)
    assert kernels.compiled[-1][1]["constant_inner"] == (False, True)
    assert kernels.launches[0][1][1] == ((1, 6, 1, 1), (6, 1, 1, 1), b.data_ptr())
    assert kernels.launches[0][1][2][:2] == ((4, 6, 4, 8), (192, 32, 8, 1))
    # A scalar added to a vector, and a column repeated along the rows of a matrix.
    kernels = RecordingKernels()
    a, b, out = torch.randn(1000), torch.randn(1), torch.empty(1000)
    added(out, a, b, kernels)
    assert [args[1][:2] for _, args in kernels.launches] == [((1, 1, 1, 1), (1, 1, 1, 1))]
    kernels = RecordingKernels()
    a, b, out = torch.randn(1, 64), torch.randn(8, 1), torch.empty(8, 64)
    added(out, a, b, kernels)
    assert kernels.compiled[-1][1]["constant_inner"] == (False, True)
    assert [args[:2] for args in [arg[:2] for arg in kernels.launches[0][1]]] == [
        ((1, 1, 16, 4), (64, 64, 4, 1)), ((1, 8, 1, 1), (8, 1, 1, 1)), ((1, 8, 16, 4), (512, 64, 4, 1))]


@pytest.mark.parametrize("layout", ["odd_inner", "strided", "misaligned", "four_dims"])
def test_other_broadcast_layouts_are_gathered_first(layout):
    kernels = RecordingKernels()
    if layout == "odd_inner":  # 63 f32 per row: rows are not whole 16-byte vectors
        a, b = torch.randn(8, 63), torch.randn(1, 63)
    elif layout == "strided":  # a column of a wider matrix is neither dense nor repeated
        a, b = torch.randn(8, 128)[:, :64], torch.randn(1, 64)
    elif layout == "misaligned":
        a, b = torch.randn(8 * 64 + 1)[1:].view(8, 64), torch.randn(1, 64)
    else:  # repeats alternating over four dims
        a, b = torch.randn(2, 1, 3, 1).expand(2, 5, 3, 8), torch.randn(1, 5, 1, 8)
    out = torch.empty(torch.broadcast_shapes(a.shape, b.shape))
    added(out, a, b, kernels)
    (name, args), = kernels.launches
    assert name == "flat" and args[1][2] not in (a.data_ptr(), b.data_ptr())  # b read from a copy
