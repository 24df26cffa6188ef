"""softmax_backward in TileLang: out = y * (dy - sum(dy * y)), computed in f32, in four regimes:

- `rows`: rows of contiguous dy and y, each operand seen as its whole vectors
  and its (m, n) rows (tiles.py), that fit a block's registers: block b holds
  rows b * block_m ... of both whole (whole vectors and edges), takes
  sum(dy * y) (`tiles.reduce_rows_sum`) and writes out: one read of each input
  and one write per element.
- longer rows, in chunks of `width` elements spread over the whole GPU:
  `chunk_dots` writes each chunk's sum(dy * y) into f32 partials (m, chunks);
  the backend sums them with reduce_sum's `rows` kernel in f32; `chunk_write`
  reads each chunk of dy and y again and writes out.
- the same chunks in one kernel, `grid`, when a round of rows' chunks fits
  the blocks the GPU holds at once (one cooperative launch): each block loads
  its chunk of dy and y, writes its dot product into f32 dots (rounds,
  rows_per_round, chunks), waits at a grid barrier (`T.sync_grid`), sums its
  row's cells and writes its chunk from registers: one read of each input
  and one write, as the CUDA backend's grid path.
- `columns`: along the middle axis of contiguous (outer, n, iv, vec) inputs (a
  leading or middle dim): block (c, o) walks n twice over neighbouring columns,
  first adding dy * y per lane, then writing; no transposing copy.

NaN and inf reach the whole row through the sum, as in PyTorch. Every kernel
writes only elements it has read itself, after reading them, so out may be dy
or y.

`<kernel>_eager` is the kernel itself (tensors typed inside its body);
`<kernel>_lazy` a factory returning it as a `T.prim_func`; the tilelang backend
(python/operator_runtime/tilelang/) compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import (
    alloc_rows,
    load_columns,
    load_rows,
    map_rows,
    reduce_rows_sum,
    store_columns,
    store_rows,
)

ZERO = T.float32(0)


@T.macro
def softmax_backward_rows(
    dy_vectors, dy, y_vectors, y, out_vectors, out, block_m, width, vec, peeled, threads, batch,
):
    with T.Kernel(T.ceildiv(dy.shape[0], block_m), threads=threads) as b:
        dy_tile = alloc_rows("dy_tile", block_m, width, vec, peeled)
        y_tile = alloc_rows("y_tile", block_m, width, vec, peeled)
        products = alloc_rows("products", block_m, width, vec, peeled)
        dot = T.alloc_fragment((block_m,), "float32")
        load_rows(dy_vectors, dy, dy_tile, b * block_m, 0, ZERO)
        load_rows(y_vectors, y, y_tile, b * block_m, 0, ZERO)
        map_rows(products, lambda dy, y, i: dy * y, (dy_tile, y_tile))
        reduce_rows_sum(products, dot, batch)
        map_rows(dy_tile, lambda dy, y, i: y * (dy - dot[i]), (dy_tile, y_tile))
        store_rows(dy_tile, out_vectors, out, b * block_m, 0)


@tilelang.jit
def rows_eager(
    dy_vectors, dy, y_vectors, y, out_vectors, out, dtype="float32", block_m=1, width=1024, vec=1, peeled=False,
    threads=128, batch=1,
):
    m, n, vectors = T.dynamic("m, n, vectors")
    dy_vectors: T.Tensor[[vectors, vec], dtype]
    dy: T.Tensor[[m, n], dtype]
    y_vectors: T.Tensor[[vectors, vec], dtype]
    y: T.Tensor[[m, n], dtype]
    out_vectors: T.Tensor[[vectors, vec], dtype]
    out: T.Tensor[[m, n], dtype]
    softmax_backward_rows(dy_vectors, dy, y_vectors, y, out_vectors, out, block_m, width, vec, peeled, threads, batch)


@tilelang.jit
def rows_lazy(dtype="float32", block_m=1, width=1024, vec=1, peeled=False, threads=128, batch=1):
    m, n, vectors = T.dynamic("m, n, vectors")

    @T.prim_func
    def rows_lazy(
        dy_vectors: T.Tensor((vectors, vec), dtype),
        dy: T.Tensor((m, n), dtype),
        y_vectors: T.Tensor((vectors, vec), dtype),
        y: T.Tensor((m, n), dtype),
        out_vectors: T.Tensor((vectors, vec), dtype),
        out: T.Tensor((m, n), dtype),
    ):
        softmax_backward_rows(
            dy_vectors, dy, y_vectors, y, out_vectors, out, block_m, width, vec, peeled, threads, batch,
        )

    return rows_lazy


@T.macro
def softmax_backward_chunk_dots(dy_vectors, dy, y_vectors, y, dots, width, vec, peeled, threads):
    with T.Kernel(dots.shape[1], dy.shape[0], threads=threads) as (c, r):
        dy_tile = alloc_rows("dy_tile", 1, width, vec, peeled)
        y_tile = alloc_rows("y_tile", 1, width, vec, peeled)
        dot = T.alloc_fragment((1,), "float32")
        load_rows(dy_vectors, dy, dy_tile, r, c, ZERO)
        load_rows(y_vectors, y, y_tile, r, c, ZERO)
        map_rows(dy_tile, lambda dy, y, i: dy * y, (dy_tile, y_tile))
        reduce_rows_sum(dy_tile, dot, 1)
        for i in T.Parallel(1):
            dots[r, c] = dot[i]


@tilelang.jit
def chunk_dots_eager(
    dy_vectors, dy, y_vectors, y, dots, dtype="float32", width=1024, vec=1, peeled=False, threads=128,
):
    m, n, vectors, chunks = T.dynamic("m, n, vectors, chunks")
    dy_vectors: T.Tensor[[vectors, vec], dtype]
    dy: T.Tensor[[m, n], dtype]
    y_vectors: T.Tensor[[vectors, vec], dtype]
    y: T.Tensor[[m, n], dtype]
    dots: T.Tensor[[m, chunks], "float32"]
    softmax_backward_chunk_dots(dy_vectors, dy, y_vectors, y, dots, width, vec, peeled, threads)


@tilelang.jit
def chunk_dots_lazy(dtype="float32", width=1024, vec=1, peeled=False, threads=128):
    m, n, vectors, chunks = T.dynamic("m, n, vectors, chunks")

    @T.prim_func
    def chunk_dots_lazy(
        dy_vectors: T.Tensor((vectors, vec), dtype),
        dy: T.Tensor((m, n), dtype),
        y_vectors: T.Tensor((vectors, vec), dtype),
        y: T.Tensor((m, n), dtype),
        dots: T.Tensor((m, chunks), "float32"),
    ):
        softmax_backward_chunk_dots(dy_vectors, dy, y_vectors, y, dots, width, vec, peeled, threads)

    return chunk_dots_lazy


@T.macro
def softmax_backward_chunk_write(dy_vectors, dy, y_vectors, y, dot, out_vectors, out, width, vec, peeled, threads):
    m, n = dy.shape
    with T.Kernel(T.ceildiv(n, width), m, threads=threads) as (c, r):
        dy_tile = alloc_rows("dy_tile", 1, width, vec, peeled)
        y_tile = alloc_rows("y_tile", 1, width, vec, peeled)
        load_rows(dy_vectors, dy, dy_tile, r, c, ZERO)
        load_rows(y_vectors, y, y_tile, r, c, ZERO)
        map_rows(dy_tile, lambda dy, y, i: y * (dy - dot[r, 0]), (dy_tile, y_tile))
        store_rows(dy_tile, out_vectors, out, r, c)


@tilelang.jit
def chunk_write_eager(
    dy_vectors, dy, y_vectors, y, dot, out_vectors, out, dtype="float32", width=1024, vec=1, peeled=False, threads=128,
):
    m, n, vectors = T.dynamic("m, n, vectors")
    dy_vectors: T.Tensor[[vectors, vec], dtype]
    dy: T.Tensor[[m, n], dtype]
    y_vectors: T.Tensor[[vectors, vec], dtype]
    y: T.Tensor[[m, n], dtype]
    dot: T.Tensor[[m, 1], "float32"]
    out_vectors: T.Tensor[[vectors, vec], dtype]
    out: T.Tensor[[m, n], dtype]
    softmax_backward_chunk_write(dy_vectors, dy, y_vectors, y, dot, out_vectors, out, width, vec, peeled, threads)


@tilelang.jit
def chunk_write_lazy(dtype="float32", width=1024, vec=1, peeled=False, threads=128):
    m, n, vectors = T.dynamic("m, n, vectors")

    @T.prim_func
    def chunk_write_lazy(
        dy_vectors: T.Tensor((vectors, vec), dtype),
        dy: T.Tensor((m, n), dtype),
        y_vectors: T.Tensor((vectors, vec), dtype),
        y: T.Tensor((m, n), dtype),
        dot: T.Tensor((m, 1), "float32"),
        out_vectors: T.Tensor((vectors, vec), dtype),
        out: T.Tensor((m, n), dtype),
    ):
        softmax_backward_chunk_write(dy_vectors, dy, y_vectors, y, dot, out_vectors, out, width, vec, peeled, threads)

    return chunk_write_lazy


@T.macro
def sum_dots(dots, step, r, lanes, dot):
    """dot = the sum of row r of round `step`'s chunk dot products, lanes
    chunks at a time into the (1, lanes) fragment, then across the lanes."""
    chunks, lane_count = dots.shape[2], lanes.shape[1]
    T.fill(lanes, 0)
    for k in T.serial(T.ceildiv(chunks, lane_count)):
        for i, j in T.Parallel(1, lane_count):
            lanes[i, j] += T.if_then_else(k * lane_count + j < chunks, dots[step, r, k * lane_count + j], ZERO)
    T.reduce_sum(lanes, dot, dim=1)


@T.macro
def softmax_backward_grid(
    dy_vectors, dy, y_vectors, y, dots, out_vectors, out, width, vec, peeled, threads, blocks_per_sm,
):
    # As softmax's grid kernel (softmax.py): every block resident at once,
    # dots (rounds, rows_per_round, chunks) is the launch, block (c, r) holds
    # chunk c of dy and y of row round * rows_per_round + r in each round,
    # writes its dot product into its own cell, waits at the grid barrier, sums
    # its row's cells and writes its chunk from registers: one read of each
    # input and one write. Rows past m compute on zeros and store nothing.
    rounds, rows_per_round, chunks = dots.shape
    with T.Kernel(chunks, rows_per_round, threads=threads) as (c, r):
        T.annotate_min_blocks_per_sm(blocks_per_sm)
        dy_tile = alloc_rows("dy_tile", 1, width, vec, peeled)
        y_tile = alloc_rows("y_tile", 1, width, vec, peeled)
        products = alloc_rows("products", 1, width, vec, peeled)
        chunk_dot = T.alloc_fragment((1,), "float32")
        lanes = T.alloc_fragment((1, threads), "float32")
        dot = T.alloc_fragment((1,), "float32")
        for step in T.serial(rounds):
            load_rows(dy_vectors, dy, dy_tile, step * rows_per_round + r, c, ZERO)
            load_rows(y_vectors, y, y_tile, step * rows_per_round + r, c, ZERO)
            map_rows(products, lambda dy, y, i: dy * y, (dy_tile, y_tile))
            reduce_rows_sum(products, chunk_dot, 1)
            for i in T.Parallel(1):
                dots[step, r, c] = chunk_dot[i]
            T.sync_grid()
            sum_dots(dots, step, r, lanes, dot)
            map_rows(dy_tile, lambda dy, y, i: y * (dy - dot[i]), (dy_tile, y_tile))
            store_rows(dy_tile, out_vectors, out, step * rows_per_round + r, c)


@tilelang.jit
def grid_eager(
    dy_vectors, dy, y_vectors, y, dots, out_vectors, out, dtype="float32", width=1024, vec=1, peeled=False,
    threads=128, blocks_per_sm=1,
):
    m, n, vectors, rounds, rows_per_round, chunks = T.dynamic("m, n, vectors, rounds, rows_per_round, chunks")
    dy_vectors: T.Tensor[[vectors, vec], dtype]
    dy: T.Tensor[[m, n], dtype]
    y_vectors: T.Tensor[[vectors, vec], dtype]
    y: T.Tensor[[m, n], dtype]
    dots: T.Tensor[[rounds, rows_per_round, chunks], "float32"]
    out_vectors: T.Tensor[[vectors, vec], dtype]
    out: T.Tensor[[m, n], dtype]
    softmax_backward_grid(
        dy_vectors, dy, y_vectors, y, dots, out_vectors, out, width, vec, peeled, threads, blocks_per_sm,
    )


@tilelang.jit
def grid_lazy(dtype="float32", width=1024, vec=1, peeled=False, threads=128, blocks_per_sm=1):
    m, n, vectors, rounds, rows_per_round, chunks = T.dynamic("m, n, vectors, rounds, rows_per_round, chunks")

    @T.prim_func
    def grid_lazy(
        dy_vectors: T.Tensor((vectors, vec), dtype),
        dy: T.Tensor((m, n), dtype),
        y_vectors: T.Tensor((vectors, vec), dtype),
        y: T.Tensor((m, n), dtype),
        dots: T.Tensor((rounds, rows_per_round, chunks), "float32"),
        out_vectors: T.Tensor((vectors, vec), dtype),
        out: T.Tensor((m, n), dtype),
    ):
        softmax_backward_grid(
            dy_vectors, dy, y_vectors, y, dots, out_vectors, out, width, vec, peeled, threads, blocks_per_sm,
        )

    return grid_lazy


@T.macro
def softmax_backward_columns(dy, y, out, outer, n, iv, block_m, width, vec, threads, batch):
    with T.Kernel(T.ceildiv(iv * vec, width), outer, threads=threads) as (c, o):
        dy_tile = T.alloc_fragment((block_m, width), "float32")
        y_tile = T.alloc_fragment((block_m, width), "float32")
        lanes = T.alloc_fragment((block_m, width), "float32")
        dot = T.alloc_fragment((width,), "float32")
        T.fill(lanes, 0)
        for k in T.serial(T.ceildiv(n, block_m)):
            load_columns(dy, dy_tile, o, k * block_m, c * width, n, iv, vec, ZERO)
            load_columns(y, y_tile, o, k * block_m, c * width, n, iv, vec, ZERO)
            for i, j in T.Parallel(block_m, width):
                lanes[i, j] += dy_tile[i, j] * y_tile[i, j]
        T.reduce_sum(lanes, dot, dim=0, batch=batch)
        for k in T.serial(T.ceildiv(n, block_m)):
            load_columns(dy, dy_tile, o, k * block_m, c * width, n, iv, vec, ZERO)
            load_columns(y, y_tile, o, k * block_m, c * width, n, iv, vec, ZERO)
            for i, j in T.Parallel(block_m, width):
                dy_tile[i, j] = y_tile[i, j] * (dy_tile[i, j] - dot[j])
            store_columns(dy_tile, out, o, k * block_m, c * width, n, iv, vec)


@tilelang.jit
def columns_eager(dy, y, out, dtype="float32", block_m=16, width=256, vec=1, threads=128, batch=1):
    outer, n, iv = T.dynamic("outer, n, iv")
    dy: T.Tensor[[outer, n, iv, vec], dtype]
    y: T.Tensor[[outer, n, iv, vec], dtype]
    out: T.Tensor[[outer, n, iv, vec], dtype]
    softmax_backward_columns(dy, y, out, outer, n, iv, block_m, width, vec, threads, batch)


@tilelang.jit
def columns_lazy(dtype="float32", block_m=16, width=256, vec=1, threads=128, batch=1):
    outer, n, iv = T.dynamic("outer, n, iv")

    @T.prim_func
    def columns_lazy(
        dy: T.Tensor((outer, n, iv, vec), dtype),
        y: T.Tensor((outer, n, iv, vec), dtype),
        out: T.Tensor((outer, n, iv, vec), dtype),
    ):
        softmax_backward_columns(dy, y, out, outer, n, iv, block_m, width, vec, threads, batch)

    return columns_lazy


register("softmax_backward", "rows", eager=rows_eager, lazy=rows_lazy)
register("softmax_backward", "chunk_dots", eager=chunk_dots_eager, lazy=chunk_dots_lazy)
register("softmax_backward", "chunk_write", eager=chunk_write_eager, lazy=chunk_write_lazy)
register("softmax_backward", "grid", eager=grid_eager, lazy=grid_lazy)
register("softmax_backward", "columns", eager=columns_eager, lazy=columns_lazy)
