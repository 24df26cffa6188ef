"""The host side of the tilelang backend: from the C runtime's plan to launches.

Every call is checked and planned by the C runtime itself: ops.Prepared creates
a cpu descriptor for the same views (create validates views, dtypes, shapes,
dim and aliasing, and never touches memory) and hands its plan
(`_C.Descriptor.plan`, docs/operators.md §6.1) to `prepare`, and re-checks the
bound tensors with it before each run, so a bad call fails with exactly the C
runtime's status and message. `prepare` reads the plan once, picks the
regime and the kernels' tile shapes and compiles them; a prepared object binds
that run to its tensors once (the kernels' views of them), and a run launches.
The regimes, as the CUDA backend has them:

- elementwise: operands that are contiguous alike (`contiguous` in the plan)
  run as flat vectors in place. Broadcast inputs (each dense or repeated
  along some of at most 3 dims, stride 0) into a contiguous out whose inner
  dim is whole 16-byte vectors run in place too, as (outer, m, vectors)
  (tiles.broadcast_kernel). Any other layout (strided inputs, odd inner
  extents) is gathered by torch into a dense buffer in out's order first, and
  a strided out is written through one.
- reduction family, rows along a contiguous last axis ((m, n) matrices):
  rows that fit a block's registers (n <= 32768 for one input, 16384 for
  two) run whole, several short rows per block; softmax's 16-bit rows too
  long for a block's registers but not for its shared memory
  (SHARED_ROW_WIDTH) run one a block there, as loaded, when there are at
  least SHARED_ROWS_PER_SM rows an SM (`shared_rows`); longer rows, or too
  few rows to fill the GPU, run in chunks spread over every SM, combined by a
  second kernel. softmax's and softmax_backward's chunks run in one kernel
  (`grid`) when a row's chunks fit the blocks the GPU holds at once
  (resident_blocks): each block keeps its chunk in registers across a grid
  barrier, one read and one write; longer rows take the chunk kernels
  (statistics or dot products, their combination, the writes: two reads).
- reduction family along a leading or middle dim of contiguous tensors
  ((outer, n, inner)): a column kernel reads neighbouring columns, no
  transposing copy.
- any other layout (padded or permuted rows): torch gathers each input into a
  contiguous (m, n) matrix in the plan's row order, then as rows.

Rows are read in 16-byte vectors when every operand is 16-byte aligned, of
any n: a block of one row (or chunk) reads the row's whole vectors as vectors
and the elements before and after them (its partial first and last vectors)
one at a time; a block of several rows that are not whole vectors reads their
one contiguous run of the data in whole vectors through shared memory
(tiles.py); columns when the inner extent is a multiple of the vector.
Otherwise one element at a time. Indexing is 64-bit, so rows longer than 2^31-1 elements run too.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple, Protocol, Sequence

import torch

from operator_runtime._internal.bounded_cache import BoundedCache, params_key
from operator_runtime.errors import InvalidArgumentError, NotSupportedError
from operator_runtime.ops import OPERATORS, Kind
from operator_runtime.tilelang import compiler, registry

ALIGNMENT = 16
# The row widths a block holds in registers (a row runs in the narrowest that
# holds it), every power of two, so that a row fills at least half its tile
# (with every other power, rows of 256 ran in tiles of 512: softmax 65536x256
# 0.71-0.79x the nvidia backend on an H100); an op has those its block of at
# most MAX_BLOCK_THREADS threads holds (row_widths). Rows of 32768 held whole
# rather than in chunks, measured on an H100 against the nvidia backend:
# softmax 1024x32768 f32 0.65 -> 1.00x, bf16 0.55 -> 0.84x, 4096x20000 f32
# 0.60 -> 0.97x. Longer rows are cut into the widest of CHUNK_WIDTHS that
# gives every SM blocks, narrower chunks spreading a few rows over every SM.
ROW_WIDTHS = tuple(2**k for k in range(5, 16))
CHUNK_WIDTHS = (16384, 4096, 1024)
# Elements a thread of a rows kernel holds, shared by its inputs' tiles
# (softmax_backward's dy and y: 16 each).
ROW_ELEMENTS_PER_THREAD = 32
# CUDA's limit of threads per block.
MAX_BLOCK_THREADS = 1024
# A row block has at least this many threads (blocks of one warp per row were
# measured slower on the H200: fewer bytes in flight per SM).
ROW_THREADS = 128
# Column kernels: a block of `threads` reads `elements` per step, of `width`
# neighbouring columns (the narrowest of COLUMN_WIDTHS holding them):
# COLUMN_TILE, and SUM_COLUMN_VECTOR_TILE for reduce_sum's in 16-byte vectors
# (each thread a vector of a row, tiles.column_layout). Measured on the H100
# against COLUMN_TILE there, x the nvidia backend: 8192x8192 along dim 0 f32
# 0.91 -> 0.92, bf16 0.85 -> 0.87; 1000x131072 bf16 0.82 -> 0.89; 64x2048x1024
# bf16 along dim 1 0.77 -> 0.88. One element at a time the larger tile lost
# (100x1342177 bf16 0.35 -> 0.26).
COLUMN_WIDTHS = (16, 64, 256)
COLUMN_TILE = (128, 2048)
SUM_COLUMN_VECTOR_TILE = (256, 8192)
# 16-bit rows longer than a block holds in registers (softmax: 32768
# elements) and at most SHARED_ROW_WIDTH run one row a block staged in shared
# memory (softmax's `shared_rows`), when there are SHARED_ROWS_PER_SM rows for
# every SM: a buffer of width + threads 16-byte vectors, 108 KiB, two blocks an
# SM. Their chunks in the grid kernel (rounds of a load, a barrier and a store
# in series) took 1.1-2.8x the time on an H100 (132..2671 rows of
# 32769..50257, 16-bit).
# Shorter rows keep their f32 register tile: staged, 1024x32768 bf16 took 162
# against 81 us.
SHARED_ROW_WIDTH = 53248
SHARED_ROW_THREADS = 256
SHARED_ROWS_PER_SM = 1
SHARED_ROW_DTYPES = ("float16", "bfloat16")
# A thread of a grid kernel keeps to this many registers: the kernel is
# compiled for blocks_per_sm = REGISTERS_PER_SM // (threads * this) resident
# blocks (__launch_bounds__), so that many fit an SM by construction (sm_90
# bf16 chunks of 16384 in 512 threads: 95 registers unbounded, 64 and no
# spills at 2 blocks per SM; the CUDA backend's grid path measured 2 blocks
# per SM faster than 1).
GRID_REGISTERS_PER_THREAD = 64
# 32-bit registers of an SM, on every NVIDIA architecture since sm_50.
REGISTERS_PER_SM = 65536
# What TVM's launch error says when a cooperative launch asks for more blocks
# than the GPU holds at once: the grid regime then falls back to chunks.
GRID_REFUSED = "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"
# What a grid kernel keeps of each chunk, by its op's chunk recipe: softmax's
# (maximum, sum), softmax_backward's dot product.
GRID_CELL = {"chunk_stats": (2,), "chunk_dots": ()}
# softmax's combine reads this many chunks' statistics per block.
COMBINE_WIDTH = 1024
COMBINE_THREADS = 128
# Chunked rows aim at this many blocks per SM (wide chunks measured faster
# than more, narrower ones), split columns at COLUMN_BLOCKS_PER_SM.
BLOCKS_PER_SM = 2
COLUMN_BLOCKS_PER_SM = 8
# A split of a column reduction walks at least this many rows.
MIN_SPLIT_ROWS = 64
# The flat kernel's extent is a 32-bit int.
FLAT_CHUNK = 2**30
# Prepared runs kept for reuse, by op, style, dtype, device, plan and alignment.
RUN_CACHE_SIZE = 256


class Run(Protocol):
    """A prepared call's regime and kernels, for a plan: bind(out, inputs) gives
    the launch for those tensors (the kernels' views of them made once)."""

    def bind(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> Callable[[], None]: ...


def _nothing() -> None:
    """The launch of a call with nothing to compute (an empty tensor)."""


def _bucket(widths: Sequence[int], extent: int) -> int:
    """The narrowest of widths holding extent elements, else the widest."""
    return next((width for width in sorted(widths) if width >= extent), max(widths))


def _aligned(tensor: torch.Tensor) -> bool:
    return tensor.data_ptr() % ALIGNMENT == 0


def _vector_width(dtype: str) -> int:
    """Elements of dtype (a DTYPE_NAMES name) per 16-byte vector."""
    return ALIGNMENT // getattr(torch, dtype).itemsize


def _vector(dtype: str, extent: int) -> int:
    """Elements per 16-byte vector when columns of an inner extent of `extent`
    elements keep vectors aligned, else 1."""
    vec = _vector_width(dtype)
    return vec if extent % vec == 0 else 1


def _row_elements(op: str) -> int:
    """Elements of each input a thread of op's rows kernel holds."""
    return ROW_ELEMENTS_PER_THREAD // len(OPERATORS[op].input_names)


def row_widths(op: str) -> tuple[int, ...]:
    """The ROW_WIDTHS op's rows kernel holds in a block of at most MAX_BLOCK_THREADS threads."""
    return tuple(width for width in ROW_WIDTHS if width <= MAX_BLOCK_THREADS * _row_elements(op))


def row_tile(op: str, width: int, vec: int, peeled: bool = False) -> dict:
    """The tile shape for rows of `width` elements (one of row_widths(op)),
    `peeled` when the rows are not whole vectors (tiles.alloc_rows).

    `batch`: a thread's rows (TileLang gives a row's vectors to consecutive
    threads), all reduced by one batched all-reduce, so a block synchronises
    once rather than once per row."""
    per_thread = _row_elements(op)
    threads = max(ROW_THREADS, width // per_thread)
    block_m = max(1, threads * per_thread // width)
    rows_per_thread = block_m if width // vec >= threads else block_m * width // (vec * threads)
    return {"block_m": block_m, "width": width, "vec": vec, "peeled": peeled, "threads": threads,
            "batch": rows_per_thread}


def chunk_tile(op: str, width: int, vec: int, peeled: bool = False) -> dict:
    """The tile shape for chunks of `width` elements, one chunk per block."""
    tile = row_tile(op, width, vec, peeled)
    del tile["block_m"], tile["batch"]
    return tile


def column_tile(op: str, width: int, vec: int) -> dict:
    """The tile shape of op's column kernel for `width` neighbouring columns (one
    of COLUMN_WIDTHS); `batch`: the columns each thread holds, reduced by one
    batched all-reduce."""
    sums_vectors = OPERATORS[op].kind == Kind.REDUCTION and vec > 1
    threads, elements = SUM_COLUMN_VECTOR_TILE if sums_vectors else COLUMN_TILE
    columns_per_thread = vec * max(1, width // vec // threads)
    return {"block_m": elements // width, "width": width, "vec": vec, "threads": threads, "batch": columns_per_thread}


def grid_tile(op: str, width: int, vec: int, peeled: bool = False) -> dict:
    """The tile shape of op's grid kernel for chunks of `width` elements: a
    chunk tile, compiled to keep blocks_per_sm blocks resident per SM."""
    tile = chunk_tile(op, width, vec, peeled)
    return {**tile, "blocks_per_sm": REGISTERS_PER_SM // (tile["threads"] * GRID_REGISTERS_PER_THREAD)}


def resident_blocks(tile: dict, multiprocessors: int, threads_per_multiprocessor: int) -> int:
    """Blocks of a grid kernel of `tile` the GPU holds at once: its compiled
    blocks_per_sm, or fewer where the SM runs fewer threads, on every SM."""
    return multiprocessors * min(tile["blocks_per_sm"], threads_per_multiprocessor // tile["threads"])


def rows_per_round(m: int, splits: int, blocks: int) -> int:
    """Rows a grid kernel holds at once, each cut into `splits` chunks, with
    `blocks` resident blocks; 0 when one row has more chunks than blocks."""
    return min(m, blocks // splits)


def shared_row_tile(vec: int) -> dict:
    """The tile of softmax's shared_rows kernel: a row of up to SHARED_ROW_WIDTH."""
    return {"width": SHARED_ROW_WIDTH, "vec": vec, "threads": SHARED_ROW_THREADS}


def _has_shared_rows(op: str, dtype: str, vec: int) -> bool:
    """Whether op has a shared_rows kernel for dtype read in vectors of vec:
    16-bit dtypes in 16-byte vectors only."""
    return "shared_rows" in registry.kernels(op) and dtype in SHARED_ROW_DTYPES and vec > 1


def _in_shared_rows(op: str, dtype: str, m: int, n: int, vec: int, sms: int) -> bool:
    """Whether op's rows of n elements run one a block in shared memory
    (SHARED_ROW_WIDTH)."""
    return (_has_shared_rows(op, dtype, vec) and m >= SHARED_ROWS_PER_SM * sms
            and max(row_widths(op)) < n <= SHARED_ROW_WIDTH)


def combine_tile() -> dict:
    return {"width": COMBINE_WIDTH, "threads": COMBINE_THREADS}


def vectors(dtype: str) -> tuple[int, ...]:
    """The vector widths kernels are compiled for: one element, and 16 bytes."""
    return (1, _vector_width(dtype))


def variants(op: str, dtype: str) -> list[tuple[str, str, dict]]:
    """Every (operator, kernel, compile-time arguments) the backend may compile
    for op in dtype: what `warm` compiles ahead of the calls."""
    if OPERATORS[op].kind == Kind.ELEMENTWISE:
        repeats = itertools.product((False, True), repeat=len(OPERATORS[op].input_names))
        return [(op, "flat", {"dtype": dtype})] + [
            (op, "broadcast", {"dtype": dtype, "vec": _vector_width(dtype), "constant_inner": constant_inner})
            for constant_inner in repeats
        ]
    registered = registry.kernels(op)
    recipe = chunk_recipe(registered)
    found = []
    for vec in vectors(dtype):
        extra = {"out_dtype": dtype} if OPERATORS[op].kind == Kind.REDUCTION else {}
        peels = (False, True) if vec > 1 else (False,)
        found += [(op, "rows", {"dtype": dtype, **extra, **row_tile(op, w, vec, peeled)})
                  for w in row_widths(op) for peeled in peels]
        if "columns" in registered:
            outs = [{"out_dtype": out} for out in sorted({dtype, "float32"})] if extra else [{}]
            found += [(op, "columns", {"dtype": dtype, **out, **column_tile(op, w, vec)})
                      for w in COLUMN_WIDTHS if w >= vec for out in outs]
            if extra and vec == 1:  # the second level, summing f32 splits
                found += [(op, "columns", {"dtype": "float32", "out_dtype": dtype, **column_tile(op, w, 1)})
                          for w in COLUMN_WIDTHS]
        if _has_shared_rows(op, dtype, vec):
            found.append((op, "shared_rows", {"dtype": dtype, **shared_row_tile(vec)}))
        for width, peeled in itertools.product(CHUNK_WIDTHS if recipe else (), peels):
            tile = chunk_tile(op, width, vec, peeled)
            if recipe == "chunk_sums":
                found.append((op, recipe, {"dtype": dtype, "out_dtype": "float32", "block_m": 1, **tile}))
            else:
                found += [(op, name, {"dtype": dtype, **tile}) for name in (recipe, "chunk_write")]
            if "grid" in registered:
                found.append((op, "grid", {"dtype": dtype, **grid_tile(op, width, vec, peeled)}))
    if recipe == "chunk_stats":
        found.append((op, "combine_stats", combine_tile()))
    elif recipe:
        last = dtype if recipe == "chunk_sums" else "float32"
        found += [
            ("reduce_sum", "rows", {"dtype": "float32", "out_dtype": out, **row_tile("reduce_sum", w, 1)})
            for w in row_widths("reduce_sum")
            for out in sorted({"float32", last})
        ]
    return found


def chunk_recipe(registered: Sequence[str]) -> str | None:
    """How op's rows run in chunks, by the first chunk kernel it registers:
    "chunk_sums" (partial sums, summed), "chunk_stats" (softmax's statistics,
    combined, then "chunk_write"), "chunk_dots" (partial dot products, summed,
    then "chunk_write"); None: whole rows only."""
    return next((name for name in ("chunk_sums", "chunk_stats", "chunk_dots") if name in registered), None)


def warm(ops: Sequence[str], target: dict | str, workers: int, style: str | None = None) -> list[compiler.CacheKey]:
    """Compiles every variant of ops' kernels (every dtype; `style`, or both) for
    target on `workers` threads, filling this process's cache and TileLang's
    disk cache, so that later calls and processes compile nothing."""
    jobs = [
        (kernel_op, name, chosen, consts)
        for op in ops
        for chosen in ([style] if style else compiler.STYLES)
        for dtype in compiler.DTYPE_NAMES.values()
        for kernel_op, name, consts in variants(op, dtype)
    ]
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda job: compiler.KERNELS.get(job[0], job[1], job[2], job[3], target), jobs))
    return compiler.KERNELS.keys()


@functools.lru_cache(maxsize=None)
def _device(index: int) -> tuple[dict, int, int]:
    """A CUDA device's TileLang target, number of SMs and threads an SM runs at once."""
    device = torch.device("cuda", index)
    properties = torch.cuda.get_device_properties(device)
    return (compiler.cuda_target(device), properties.multi_processor_count,
            properties.max_threads_per_multi_processor)


class Kernels:
    """The compiled kernels of one op, style, dtype and device, by (name, tile)."""

    def __init__(self, op: str, style: str, out: torch.Tensor):
        self.op = op
        self.style = style
        self.dtype = compiler.DTYPE_NAMES[out.dtype]
        self.target, self.multiprocessors, self.threads_per_multiprocessor = _device(out.get_device())

    def get(self, name: str, op: str | None = None, **consts):
        return compiler.KERNELS.get(op or self.op, name, self.style, consts, self.target)


# ---- elementwise ---------------------------------------------------------------


class BroadcastViews(NamedTuple):
    """The broadcast kernel's views of an elementwise plan (tiles.py): out as
    (outer, m, nv, vec), each input as its own (shape, strides) and whether it
    is constant along the inner dim (a compile-time argument)."""

    out_shape: tuple[int, ...]
    inputs: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    constant_inner: tuple[bool, ...]

    @property
    def out_strides(self) -> tuple[int, ...]:
        _, m, nv, vec = self.out_shape
        return (m * nv * vec, nv * vec, vec, 1)


def broadcast_views(shape: Sequence[int], in_strides: Sequence[Sequence[int]], vec: int) -> BroadcastViews | None:
    """The broadcast kernel's views when every input is dense or repeated (stride
    0) along some of at most 3 dims and the inner extent is whole 16-byte
    vectors; None otherwise. `shape` and `in_strides` are the plan's (out's
    memory order, extent-1 dims dropped, mergeable dims merged); `vec` the
    elements of a 16-byte vector."""
    if not shape or len(shape) > 3 or shape[-1] % vec or max(shape) > 2**31 - 1:  # extents are 32-bit ints
        return None
    pad = (0,) * (3 - len(shape))
    dims = (1,) * len(pad) + tuple(shape)
    inputs, constant_inner = [], []
    for strides in in_strides:
        extents = [extent if stride else 1 for extent, stride in zip(dims, pad + tuple(strides))]
        expected = 1
        for extent, stride in reversed(list(zip(extents, pad + tuple(strides)))):
            if stride and stride != expected:
                return None  # strided, not only repeated
            expected *= extent
        outer, m, n = extents
        inner_vec = vec if n > 1 else 1
        inputs.append(((outer, m, n // inner_vec, inner_vec), (m * n, n, inner_vec, 1)))
        constant_inner.append(n == 1)
    return BroadcastViews((dims[0], dims[1], dims[2] // vec, vec), tuple(inputs), tuple(constant_inner))


class FlatRun:
    """Elementwise: the flat kernel over dense operands, the broadcast kernel
    over broadcast ones (BroadcastViews); any other operand is gathered into
    (or, for out, written through) a dense buffer in out's order."""

    def __init__(self, plan: dict, kernels: Kernels, scalars: Sequence[float]):
        self.numel = plan["numel"]
        self.shape = plan["shape"]
        self.out_strides = plan["out_strides"]
        self.in_strides = plan["in_strides"]
        self.scalars = tuple(scalars)
        self.kernel = kernels.get("flat", dtype=kernels.dtype)
        # The plan's dims follow out's memory order, so an operand is dense in
        # that order exactly when its strides are the row-major ones of the shape.
        self.inputs_dense = [self._row_major(strides) for strides in self.in_strides]
        self.out_dense = self._row_major(self.out_strides)
        repeated = self.out_dense and not all(self.inputs_dense)
        vec = _vector_width(kernels.dtype)
        self.broadcast = broadcast_views(self.shape, self.in_strides, vec) if repeated else None
        if self.broadcast is not None:
            self.broadcast_kernel = kernels.get("broadcast", dtype=kernels.dtype, vec=vec,
                                                constant_inner=self.broadcast.constant_inner)

    def _row_major(self, strides: Sequence[int]) -> bool:
        expected = 1
        for extent, stride in reversed(list(zip(self.shape, strides))):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True

    def _view(self, tensor: torch.Tensor, strides: Sequence[int]) -> torch.Tensor:
        return tensor.as_strided(self.shape, strides, tensor.storage_offset())

    def _flat(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.as_strided((self.numel,), (1,), tensor.storage_offset())

    def bind(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> Callable[[], None]:
        if self.numel == 0:
            return _nothing
        aligned = _aligned(out) and all(_aligned(t) for t in inputs)
        if aligned and all(self.inputs_dense) and self.out_dense and self.numel <= FLAT_CHUNK:
            return functools.partial(self.kernel, *(self._flat(t) for t in inputs), self._flat(out), *self.scalars)
        if aligned and self.broadcast is not None:
            views = [t.as_strided(shape, strides, t.storage_offset()) for t, (shape, strides)
                     in zip(inputs, self.broadcast.inputs)]
            out_view = out.as_strided(self.broadcast.out_shape, self.broadcast.out_strides, out.storage_offset())
            return functools.partial(self.broadcast_kernel, *views, out_view, *self.scalars)
        return functools.partial(self._gathered, out, inputs)

    def _gathered(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> None:
        flat_inputs = [
            self._flat(t) if dense and _aligned(t)
            else self._view(t, s).clone(memory_format=torch.contiguous_format).view(-1)
            for t, s, dense in zip(inputs, self.in_strides, self.inputs_dense)
        ]
        direct = self.out_dense and _aligned(out)
        result = self._flat(out) if direct else torch.empty(self.numel, dtype=out.dtype, device=out.device)
        for start in range(0, self.numel, FLAT_CHUNK):  # the flat kernel's extent is a 32-bit int
            part = slice(start, start + FLAT_CHUNK)
            self.kernel(*(flat[part] for flat in flat_inputs), result[part], *self.scalars)
        if not direct:
            self._view(out, self.out_strides).copy_(result.view(self.shape))


# ---- reduction family ------------------------------------------------------------


def _chunk_width(op: str, m: int, n: int, vec: int, sms: int) -> int | None:
    """The chunk width when rows of n elements run in chunks, None when whole.

    Whole rows when they fit the registers and fill the GPU with blocks;
    otherwise the widest of CHUNK_WIDTHS that gives every SM BLOCKS_PER_SM
    blocks (or the narrowest)."""
    if n <= max(row_widths(op)):
        tile = row_tile(op, _bucket(row_widths(op), n), vec)
        if math.ceil(m / tile["block_m"]) >= sms or n < 2 * min(CHUNK_WIDTHS):
            return None
    for chunk in CHUNK_WIDTHS:
        if m * math.ceil(n / chunk) >= BLOCKS_PER_SM * sms:
            break
    return chunk if n > chunk else None


def row_views(matrix: torch.Tensor, m: int, n: int, vec: int) -> list[torch.Tensor]:
    """A rows kernel's two views of a contiguous (m, n) matrix (tiles.py): its
    whole vec-element vectors as (m * n // vec, vec), and its rows (m, n)."""
    offset = matrix.storage_offset()
    return [matrix.as_strided((m * n // vec, vec), (vec, 1), offset), matrix.as_strided((m, n), (n, 1), offset)]


class SumLevels:
    """Sums f32 partials (m, chunks) down to (m, 1) with reduce_sum's rows
    kernel, each level summing up to max(row_widths("reduce_sum")) partials; the last level
    writes `last_dtype`."""

    def __init__(self, kernels: Kernels, m: int, chunks: int, last_dtype: str):
        self.m = m
        self.levels = []
        while chunks > 1:
            width = _bucket(row_widths("reduce_sum"), chunks)
            next_chunks = math.ceil(chunks / width)
            dtype = last_dtype if next_chunks == 1 else "float32"
            kernel = kernels.get("rows", op="reduce_sum", dtype="float32", out_dtype=dtype,
                                 **row_tile("reduce_sum", width, 1))
            self.levels.append((kernel, chunks, next_chunks, getattr(torch, dtype)))
            chunks = next_chunks

    def __call__(self, partials: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        for kernel, chunks, next_chunks, dtype in self.levels:
            last = next_chunks == 1 and out is not None
            result = out if last else torch.empty((self.m, next_chunks), dtype=dtype, device=partials.device)
            kernel(*row_views(partials, self.m, chunks, 1), result)
            partials = result
        return partials


class RowsRun:
    """The reduction family over contiguous (m, n) matrices: whole rows in
    registers or in shared memory, chunks in one grid kernel, or chunks
    combined by a second kernel (module docstring)."""

    def __init__(self, op: str, kernels: Kernels, m: int, n: int, vec: int):
        self.op, self.m, self.n, self.vec = op, m, n, vec
        peeled = n % vec != 0
        dtype = kernels.dtype
        self.reduces = OPERATORS[op].kind == Kind.REDUCTION
        registered = registry.kernels(op)
        self.recipe = chunk_recipe(registered)
        if _in_shared_rows(op, dtype, m, n, vec, kernels.multiprocessors):
            self.chunk = None
            self.whole = kernels.get("shared_rows", dtype=dtype, **shared_row_tile(vec))
            return
        self.chunk = _chunk_width(op, m, n, vec, kernels.multiprocessors) if self.recipe else None
        if self.chunk is None:
            if n > max(row_widths(op)):
                raise NotSupportedError(
                    f"{op}: its TileLang kernels hold rows of at most {max(row_widths(op))} elements "
                    f"and it registers no chunk kernels; dim has {n}"
                )
            tile = row_tile(op, _bucket(row_widths(op), n), vec, peeled)
            extra = {"out_dtype": dtype} if self.reduces else {}
            self.whole = kernels.get("rows", dtype=dtype, **extra, **tile)
            return
        self.chunks = math.ceil(n / self.chunk)
        self.chunk_kernels = (kernels, chunk_tile(op, self.chunk, vec, peeled))
        self.grid = None
        if "grid" in registered:
            tile = grid_tile(op, self.chunk, vec, peeled)
            blocks = resident_blocks(tile, kernels.multiprocessors, kernels.threads_per_multiprocessor)
            self.rows_per_round = rows_per_round(m, self.chunks, blocks)
            if self.rows_per_round:
                self.grid = kernels.get("grid", dtype=dtype, **tile)
                return
        self._get_chunk_kernels()

    def _get_chunk_kernels(self) -> None:
        """The kernels of the chunked regime (module docstring), each got once."""
        kernels, tile = self.chunk_kernels
        dtype = kernels.dtype
        if self.recipe == "chunk_sums":
            self.first = kernels.get(self.recipe, dtype=dtype, out_dtype="float32", block_m=1, **tile)
            self.sums = SumLevels(kernels, self.m, self.chunks, dtype)
            return
        self.first = kernels.get(self.recipe, dtype=dtype, **tile)
        self.write = kernels.get("chunk_write", dtype=dtype, **tile)
        if self.recipe == "chunk_stats":
            self.combine = kernels.get("combine_stats", **combine_tile())
        else:
            self.sums = SumLevels(kernels, self.m, self.chunks, "float32")

    def bind(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> Callable[[], None]:
        views = [view for t in inputs for view in row_views(t, self.m, self.n, self.vec)]
        if self.reduces:
            out_views = [out.as_strided((self.m, 1), (1, 1), out.storage_offset())]
        else:
            out_views = row_views(out, self.m, self.n, self.vec)
        if self.chunk is None:
            return functools.partial(self.whole, *views, *out_views)
        return functools.partial(self._chunked, views, out_views)

    def __call__(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> None:
        self.bind(out, inputs)()

    def _chunked(self, views: Sequence[torch.Tensor], out_views: Sequence[torch.Tensor]) -> None:
        # The partials come from torch's caching allocator at each run, on the
        # stream of that run.
        device = out_views[0].device
        if self.grid is not None and self._on_grid(views, out_views):
            return
        if self.recipe == "chunk_stats":
            stats = torch.empty((self.m, self.chunks, 2), dtype=torch.float32, device=device)
            self.first(*views, stats)
            while stats.shape[1] > 1:
                combined = torch.empty((self.m, math.ceil(stats.shape[1] / COMBINE_WIDTH), 2),
                                       dtype=torch.float32, device=device)
                self.combine(stats, combined)
                stats = combined
            self.write(*views, stats, *out_views)
            return
        partials = torch.empty((self.m, self.chunks), dtype=torch.float32, device=device)
        self.first(*views, partials)
        if self.recipe == "chunk_sums":
            self.sums(partials, *out_views)
        else:
            self.write(*views, self.sums(partials), *out_views)

    def _on_grid(self, views: Sequence[torch.Tensor], out_views: Sequence[torch.Tensor]) -> bool:
        """Launches the grid kernel, whose cells (rounds, rows_per_round, chunks,
        *GRID_CELL[recipe]) give its launch (softmax.py, softmax_backward.py);
        False when CUDA refuses its cooperative launch as more blocks than the
        GPU holds at once (resident_blocks counts what the kernel was compiled
        for; where the GPU holds fewer, CUDA refuses rather than start a grid
        that would wait forever), after which this run takes the chunked
        kernels."""
        rounds = math.ceil(self.m / self.rows_per_round)
        cells = torch.empty((rounds, self.rows_per_round, self.chunks, *GRID_CELL[self.recipe]),
                            dtype=torch.float32, device=out_views[0].device)
        try:
            self.grid(*views, cells, *out_views)
        except Exception as error:  # TVM-FFI raises its own error types
            if GRID_REFUSED not in str(error):
                raise
            self._get_chunk_kernels()
            self.grid = None  # after the chunk kernels: a run on another thread needs them then
            return False
        return True


class ColumnsRun:
    """The reduction family along the middle dim of contiguous (outer, n, inner)
    tensors. A reduction spreads few columns of long n over the GPU: its first
    kernel writes f32 sums of `splits` runs of n, which the same kernel sums."""

    def __init__(self, op: str, kernels: Kernels, outer: int, n: int, inner: int, vec: int):
        self.op, self.outer, self.n, self.inner, self.vec = op, outer, n, inner, vec
        tile = column_tile(op, _bucket(COLUMN_WIDTHS, inner), vec)
        self.reduces = OPERATORS[op].kind == Kind.REDUCTION
        dtype = kernels.dtype
        if not self.reduces:
            self.kernel = kernels.get("columns", dtype=dtype, **tile)
            return
        blocks = math.ceil(inner / tile["width"]) * outer
        self.splits = max(1, min(math.ceil(COLUMN_BLOCKS_PER_SM * kernels.multiprocessors / blocks),
                                 n // MIN_SPLIT_ROWS))
        out_dtype = "float32" if self.splits > 1 else dtype
        self.kernel = kernels.get("columns", dtype=dtype, out_dtype=out_dtype, **tile)
        if self.splits > 1:
            self.finish = kernels.get("columns", dtype="float32", out_dtype=dtype,
                                      **column_tile(op, tile["width"], 1))

    def bind(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> Callable[[], None]:
        iv = self.inner // self.vec
        shape = (self.outer, self.n, iv, self.vec)
        strides = (self.n * self.inner, self.inner, self.vec, 1)
        views = [t.as_strided(shape, strides, t.storage_offset()) for t in inputs]
        if not self.reduces:
            return functools.partial(self.kernel, *views, out.as_strided(shape, strides, out.storage_offset()))
        if self.splits == 1:
            result = out.as_strided((self.outer, 1, iv, self.vec), (self.inner, self.inner, self.vec, 1),
                                    out.storage_offset())
            return functools.partial(self.kernel, *views, result)
        result = out.as_strided((self.outer, 1, self.inner, 1), (self.inner, self.inner, 1, 1), out.storage_offset())
        return functools.partial(self._split, views, result)

    def _split(self, views: Sequence[torch.Tensor], result: torch.Tensor) -> None:
        iv = self.inner // self.vec
        partials = torch.empty((self.outer, self.splits, iv, self.vec), dtype=torch.float32, device=result.device)
        self.kernel(*views, partials)
        self.finish(partials.view(self.outer, self.splits, self.inner, 1), result)


def _row_dims(plan: dict) -> list[tuple[int, tuple[int, ...], int]]:
    """The plan's row dims of extent > 1 as (extent, input strides, out stride), outermost first."""
    return [
        (extent, tuple(strides[d] for strides in plan["in_strides"]), plan["out_strides"][d])
        for d, extent in enumerate(plan["shape"])
        if extent > 1
    ]


class Layout:
    """Which regime a reduction-family plan runs in: "rows" (contiguous (m, n)
    matrices), "columns" (contiguous (outer, n, inner)) or "gather"."""

    def __init__(self, plan: dict, keeps_axis: bool, has_columns: bool):
        n = plan["row_length"]
        dims = _row_dims(plan)
        axis_strides = set(plan["in_axis_strides"])
        out_axis = plan["out_axis_stride"]
        self.outer, self.inner = 1, 1
        if axis_strides == {1} and (not keeps_axis or out_axis == 1) and (
            not dims or (len(dims) == 1 and set(dims[0][1]) == {n} and dims[0][2] == (n if keeps_axis else 1))
        ):
            self.kind = "rows"
            return
        inner = next(iter(axis_strides)) if len(axis_strides) == 1 else 0
        if has_columns and inner > 1 and dims and dims[-1][0] == inner:
            inner_ok = set(dims[-1][1]) == {1} and dims[-1][2] == 1
            outer_dims = dims[:-1]
            outer_ok = not outer_dims or (
                len(outer_dims) == 1
                and set(outer_dims[0][1]) == {n * inner}
                and outer_dims[0][2] == (n * inner if keeps_axis else inner)
            )
            if inner_ok and outer_ok and out_axis == (inner if keeps_axis else 0):
                self.kind = "columns"
                self.inner = inner
                self.outer = outer_dims[0][0] if outer_dims else 1
                return
        self.kind = "gather"


class GatherRun:
    """Any other layout: inputs gathered into contiguous (m, n) matrices in the
    plan's row order, out written through one, around a RowsRun."""

    def __init__(self, plan: dict, keeps_axis: bool, rows_run: RowsRun):
        n = plan["row_length"]
        self.shape = tuple(plan["shape"]) + (n,)
        self.in_strides = [tuple(s) + (a,) for s, a in zip(plan["in_strides"], plan["in_axis_strides"])]
        self.out_shape = self.shape if keeps_axis else tuple(plan["shape"])
        self.out_strides = tuple(plan["out_strides"]) + ((plan["out_axis_stride"],) if keeps_axis else ())
        self.rows_run = rows_run

    def bind(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> Callable[[], None]:
        return functools.partial(self._gathered, out, inputs)

    def _gathered(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> None:
        matrices = [
            t.as_strided(self.shape, s, t.storage_offset()).clone(memory_format=torch.contiguous_format)
            for t, s in zip(inputs, self.in_strides)
        ]
        result = torch.empty(self.out_shape, dtype=out.dtype, device=out.device)
        self.rows_run(result, matrices)
        out.as_strided(self.out_shape, self.out_strides, out.storage_offset()).copy_(result)


class ReductionRun:
    """A reduction-family call: its layout's run, with the 16-byte-vector kernels
    while every operand is aligned and the one-element ones otherwise."""

    def __init__(self, op: str, plan: dict, kernels: Kernels, aligned: bool):
        self.op = op
        self.keeps_axis = OPERATORS[op].kind == Kind.NORMALIZATION
        self.m, self.n = plan["rows"], plan["row_length"]
        self.layout = Layout(plan, self.keeps_axis, "columns" in registry.kernels(op))
        self.plan = plan
        self.kernels = kernels
        self.runs: dict[int, Run] = {}
        if not aligned:
            self.vec = 1
        elif self.layout.kind == "columns":
            self.vec = _vector(kernels.dtype, self.layout.inner)
        else:
            self.vec = _vector_width(kernels.dtype)
        self.run_for(self.vec)

    def run_for(self, vec: int) -> Run:
        run = self.runs.get(vec)
        if run is None:
            if self.layout.kind == "columns":
                run = ColumnsRun(self.op, self.kernels, self.layout.outer, self.n, self.layout.inner, vec)
            else:
                run = RowsRun(self.op, self.kernels, self.m, self.n, vec)
                if self.layout.kind == "gather":
                    run = GatherRun(self.plan, self.keeps_axis, run)
            self.runs[vec] = run
        return run

    def bind(self, out: torch.Tensor, inputs: Sequence[torch.Tensor]) -> Callable[[], None]:
        if self.m == 0 or (self.n == 0 and self.keeps_axis):
            return _nothing
        if self.n == 0:
            return out.zero_
        vec = self.vec
        if vec > 1 and not (_aligned(out) and all(_aligned(t) for t in inputs)):
            vec = 1
        return self.run_for(vec).bind(out, inputs)


class TileLangKernel:
    """A prepared call: its run, chosen and compiled at prepare. A run launches
    what its run bound to the tensors' data pointers (the kernels' views of
    them), bound again only when a pointer moved (a rebind, `.data = ...`): the
    views hold their storage, so an unchanged pointer is the same memory."""

    def __init__(self, op: str, run: Run):
        self._op = op
        self._run: Run | None = run
        self._launch: tuple[tuple[int, ...], Callable[[], None]] | None = None

    def run(self, out: torch.Tensor, inputs: Sequence[torch.Tensor], stream: int) -> None:
        # TileLang launches on torch's current stream, which is `stream`.
        pointers = (out.data_ptr(), *(t.data_ptr() for t in inputs))
        launch = self._launch
        if launch is None or launch[0] != pointers:
            run = self._run
            if run is None:  # destroyed by another thread since this run's check
                raise InvalidArgumentError(f"{self._op}: descriptor was destroyed")
            launch = (pointers, run.bind(out, inputs))
            self._launch = launch  # one assignment: runs from other threads see either
        launch[1]()

    def release(self) -> None:
        self._launch = None

    def destroy(self) -> None:
        self._run = None
        self._launch = None


class TileLangBackend:
    """backend="tilelang": the kernels registered by ops/<op>/tilelang/ on CUDA devices."""

    def __init__(self) -> None:
        self._runs: BoundedCache[Run] = BoundedCache(RUN_CACHE_SIZE)

    def unavailable_reason(self) -> str | None:
        if not torch.cuda.is_available():
            return "torch sees no CUDA device"
        if importlib.util.find_spec("tilelang") is None:
            return "the tilelang package is not installed (tilelang==0.1.15, apache-tvm-ffi==0.1.12)"
        try:
            compiler.import_tilelang()
        except NotSupportedError as error:
            return error.message.removeprefix("tilelang backend is not available: ")
        return None

    def available(self) -> bool:
        return self.unavailable_reason() is None

    def runs_on(self, device: torch.device) -> bool:
        return device.type == "cuda"

    def prepare_key(self) -> str:
        return compiler.get_style()

    def prepare(self, op: str, plan: dict, out: torch.Tensor, inputs: Sequence[torch.Tensor],
                params: Sequence[float]) -> TileLangKernel:
        # Runs depend on the plan, not on the tensors: one run serves every
        # prepare_<op>() and every new signature of ort.<op>() calls of the same plan.
        style = compiler.get_style()
        elementwise = OPERATORS[op].kind == Kind.ELEMENTWISE
        aligned = all(_aligned(t) for t in (out, *inputs))
        key = (op, style, out.dtype, out.get_device(), tuple(sorted(plan.items())), params_key(params), aligned)
        run = self._runs.get(key)
        if run is None:
            kernels = Kernels(op, style, out)
            if elementwise:
                run = FlatRun(plan, kernels, params)
            else:
                run = ReductionRun(op, plan, kernels, aligned)
            self._runs.put(key, run)
        return TileLangKernel(op, run)
