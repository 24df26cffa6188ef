"""softmax in TileLang, computed in f32, in four regimes:

- `rows`: rows of a contiguous input, each operand seen as its whole vectors
  and its (m, n) rows (tiles.py), that fit a block's registers: block b holds
  rows b * block_m ... whole (their whole vectors and their edges), takes
  their maximum and the sum of exp(x - maximum) (`tiles.reduce_rows_max` /
  `reduce_rows_sum`) and writes exp(x - maximum) times 1 / sum: one read and
  one write per element.
- longer rows, in chunks of `width` elements spread over the whole GPU:
  `chunk_stats` writes each chunk's (maximum, sum of exp(x - maximum)) into
  f32 stats (m, chunks, 2); `combine_stats` folds a row's chunks into its
  (maximum, sum) (m, 1, 2), rescaling each sum to the larger maximum (the
  backend repeats it while more than one chunk is left); `chunk_write` reads
  each chunk again and writes exp(x - maximum) / sum. A row's edges belong to
  its first chunk.
- the same chunks in one kernel, `grid`, when a round of rows' chunks fits
  the blocks the GPU holds at once (one cooperative launch): each block loads
  its chunk, writes its (maximum, sum) into the f32 stats (rounds,
  rows_per_round, chunks, 2), waits at a grid barrier (`T.sync_grid`), folds
  its row's cells and writes its chunk, still in registers, scaled: one read
  and one write, as the CUDA backend's grid path.
- `columns`: along the middle axis of a contiguous (outer, n, iv, vec) input
  (a leading or middle dim): block (c, o) walks n twice over neighbouring
  columns, first keeping a running maximum and rescaled sum per lane, then
  writing; no transposing copy.

A -inf entry weighs 0 even while a maximum is still -inf (`tiles.weight`), so a
masked entry never makes a row NaN; a row of only -inf gives 0 / 0 = NaN, as
PyTorch. Every kernel writes only elements it has read itself, after reading
them, so out may be the input.

`<kernel>_eager` is the kernel itself (tensors typed inside its body);
`<kernel>_lazy` a factory returning it as a `T.prim_func`; the tilelang backend
(python/operator_runtime/tilelang/) compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import (
    MINUS_INF,
    alloc_rows,
    block_span,
    column_layout,
    load_columns,
    load_rows,
    map_rows,
    reduce_rows_max,
    reduce_rows_sum,
    in_run,
    stage_run,
    store_columns,
    store_rows,
    unstage_run,
    weight,
)


@T.macro
def load_weights(input_vectors, input, tile, row, chunk, tile_max, tile_sum, batch):
    """tile = exp(x - tile_max) of chunk `chunk` of rows row ..., with each row's
    maximum in tile_max and the sum of its weights in tile_sum."""
    load_rows(input_vectors, input, tile, row, chunk, MINUS_INF)
    reduce_rows_max(tile, tile_max, batch)
    map_rows(tile, lambda x, i: weight(x, tile_max[i]), (tile,))
    reduce_rows_sum(tile, tile_sum, batch)


def stats_cell(row, chunk, k):
    """The index of statistic k (0: maximum, 1: sum) of chunk `chunk` of a row
    of stats (rows, chunks, 2), or of the grid kernel's (rounds, rows_per_round,
    chunks, 2), whose `row` is then (round, row of the round). A plain function
    called while a macro is traced."""
    return (*row, chunk, k) if isinstance(row, tuple) else (row, chunk, k)


@T.macro
def store_stats(stats, row, chunk, chunk_max, chunk_sum):
    for i in T.Parallel(1):
        stats[stats_cell(row, chunk, 0)] = chunk_max[i]
        stats[stats_cell(row, chunk, 1)] = chunk_sum[i]


@T.macro
def fold_stats(stats, row, first, end, lane_max, lane_sum, row_max, row_sum):
    """(row_max, row_sum) = the (maximum, sum) of chunks first ... end - 1 of
    row `row` of stats, each sum rescaled to the larger maximum: a running
    (maximum, sum) per lane of the (1, lanes) fragments over lanes chunks at a
    time, then across the lanes."""
    lanes = lane_max.shape[1]
    T.fill(lane_max, MINUS_INF)
    T.fill(lane_sum, 0)
    for k in T.serial(T.ceildiv(end - first, lanes)):
        for i, j in T.Parallel(1, lanes):
            inside = first + k * lanes + j < end
            seen_max = T.if_then_else(inside, stats[stats_cell(row, first + k * lanes + j, 0)], MINUS_INF)
            seen_sum = T.if_then_else(inside, stats[stats_cell(row, first + k * lanes + j, 1)], T.float32(0))
            grown = T.max(lane_max[i, j], seen_max)
            lane_sum[i, j] = lane_sum[i, j] * weight(lane_max[i, j], grown) + seen_sum * weight(seen_max, grown)
            lane_max[i, j] = grown
    T.reduce_max(lane_max, row_max, dim=1, clear=True)
    for i, j in T.Parallel(1, lanes):
        lane_sum[i, j] = lane_sum[i, j] * weight(lane_max[i, j], row_max[i])
    T.reduce_sum(lane_sum, row_sum, dim=1)


@T.macro
def softmax_rows(input_vectors, input, out_vectors, out, block_m, width, vec, peeled, threads, batch):
    with T.Kernel(T.ceildiv(input.shape[0], block_m), threads=threads) as b:
        tile = alloc_rows("tile", block_m, width, vec, peeled)
        row_max = T.alloc_fragment((block_m,), "float32")
        row_sum = T.alloc_fragment((block_m,), "float32")
        load_weights(input_vectors, input, tile, b * block_m, 0, row_max, row_sum, batch)
        for i in T.Parallel(block_m):
            row_sum[i] = 1 / row_sum[i]  # one division per row, a multiplication per element
        map_rows(tile, lambda x, i: x * row_sum[i], (tile,))
        store_rows(tile, out_vectors, out, b * block_m, 0)


@tilelang.jit
def rows_eager(
    input_vectors, input, out_vectors, out, dtype="float32", block_m=1, width=1024, vec=1, peeled=False, threads=128,
    batch=1,
):
    m, n, vectors = T.dynamic("m, n, vectors")
    input_vectors: T.Tensor[[vectors, vec], dtype]
    input: T.Tensor[[m, n], dtype]
    out_vectors: T.Tensor[[vectors, vec], dtype]
    out: T.Tensor[[m, n], dtype]
    softmax_rows(input_vectors, input, out_vectors, out, block_m, width, vec, peeled, threads, batch)


@tilelang.jit
def rows_lazy(dtype="float32", block_m=1, width=1024, vec=1, peeled=False, threads=128, batch=1):
    m, n, vectors = T.dynamic("m, n, vectors")

    @T.prim_func
    def rows_lazy(
        input_vectors: T.Tensor((vectors, vec), dtype),
        input: T.Tensor((m, n), dtype),
        out_vectors: T.Tensor((vectors, vec), dtype),
        out: T.Tensor((m, n), dtype),
    ):
        softmax_rows(input_vectors, input, out_vectors, out, block_m, width, vec, peeled, threads, batch)

    return rows_lazy


@T.macro
def softmax_shared_rows(input_vectors, input, out_vectors, out, width, vec, threads):
    # Block r holds row r in shared memory, as loaded (tiles.stage_run), and
    # works on its staging vectors in place, a vector a thread and step: a
    # lane's maximum, the row's, a lane's sum of weights, the row's, then each
    # element scaled, stored (tiles.unstage_run). Its registers hold a few
    # vectors, so a block holds a 16-bit row longer than the rows kernel's f32
    # tile does (32768 elements), two blocks an SM.
    m = input.shape[0]
    lanes = threads * vec
    with T.Kernel(m, threads=threads) as r:
        staged = T.alloc_shared((width // vec + threads, vec), input.dtype)
        piece = T.alloc_fragment((1, lanes), input.dtype)
        lane_max = T.alloc_fragment((1, lanes), "float32")
        lane_sum = T.alloc_fragment((1, lanes), "float32")
        row_max = T.alloc_fragment((1,), "float32")
        row_sum = T.alloc_fragment((1,), "float32")
        # A staging vector a thread (16-byte shared loads); TileLang's own
        # layout of the lanes gives a thread lanes a block apart.
        lane_layout = column_layout(1, lanes, vec, threads)
        T.annotate_layout({piece: lane_layout, lane_max: lane_layout, lane_sum: lane_layout})
        span = block_span(r, 1, m, input.shape[1], vec)
        stage_run(input_vectors, input, staged, span, width // vec)
        # Steps over the staging vectors the row covers, not the whole buffer:
        # a row shorter than the buffer skips positions that would be masked.
        steps = T.ceildiv(span.lead + span.length, lanes)
        T.fill(lane_max, MINUS_INF)
        for step in T.serial(steps):
            load_piece(staged, piece, step)
            for i, j in T.Parallel(1, lanes):
                lane_max[i, j] = T.max(lane_max[i, j], T.if_then_else(
                    in_run(span, step * lanes + j), T.Cast("float32", piece[i, j]), MINUS_INF))
        T.reduce_max(lane_max, row_max, dim=1, clear=True)
        T.fill(lane_sum, 0)
        for step in T.serial(steps):
            load_piece(staged, piece, step)
            for i, j in T.Parallel(1, lanes):
                lane_sum[i, j] += T.if_then_else(
                    in_run(span, step * lanes + j), weight(T.Cast("float32", piece[i, j]), row_max[i]), T.float32(0))
        T.reduce_sum(lane_sum, row_sum, dim=1)
        for i in T.Parallel(1):
            row_sum[i] = 1 / row_sum[i]
        for step in T.serial(steps):
            for i, j in T.Parallel(1, lanes):
                # Every staging element, the run's and its neighbours' (never stored).
                staged[step * threads + j // vec, j % vec] = T.Cast(
                    input.dtype, weight(T.Cast("float32", staged[step * threads + j // vec, j % vec]), row_max[i]) * row_sum[i])
        unstage_run(staged, out_vectors, out, span, width // vec)


@T.macro
def load_piece(staged, piece, step):
    """piece = staging vectors step * threads ..., a vector a thread."""
    vec = int(staged.shape[1])
    for i, j in T.Parallel(*piece.shape):
        piece[i, j] = staged[step * (piece.shape[1] // vec) + j // vec, j % vec]


@tilelang.jit
def shared_rows_eager(input_vectors, input, out_vectors, out, dtype="float16", width=53248, vec=8, threads=256):
    m, n, vectors = T.dynamic("m, n, vectors")
    input_vectors: T.Tensor[[vectors, vec], dtype]
    input: T.Tensor[[m, n], dtype]
    out_vectors: T.Tensor[[vectors, vec], dtype]
    out: T.Tensor[[m, n], dtype]
    softmax_shared_rows(input_vectors, input, out_vectors, out, width, vec, threads)


@tilelang.jit
def shared_rows_lazy(dtype="float16", width=53248, vec=8, threads=256):
    m, n, vectors = T.dynamic("m, n, vectors")

    @T.prim_func
    def shared_rows_lazy(
        input_vectors: T.Tensor((vectors, vec), dtype),
        input: T.Tensor((m, n), dtype),
        out_vectors: T.Tensor((vectors, vec), dtype),
        out: T.Tensor((m, n), dtype),
    ):
        softmax_shared_rows(input_vectors, input, out_vectors, out, width, vec, threads)

    return shared_rows_lazy


@T.macro
def softmax_chunk_stats(input_vectors, input, stats, width, vec, peeled, threads):
    with T.Kernel(stats.shape[1], input.shape[0], threads=threads) as (c, r):
        tile = alloc_rows("tile", 1, width, vec, peeled)
        chunk_max = T.alloc_fragment((1,), "float32")
        chunk_sum = T.alloc_fragment((1,), "float32")
        load_weights(input_vectors, input, tile, r, c, chunk_max, chunk_sum, 1)
        store_stats(stats, r, c, chunk_max, chunk_sum)


@tilelang.jit
def chunk_stats_eager(input_vectors, input, stats, dtype="float32", width=1024, vec=1, peeled=False, threads=128):
    m, n, vectors, chunks = T.dynamic("m, n, vectors, chunks")
    input_vectors: T.Tensor[[vectors, vec], dtype]
    input: T.Tensor[[m, n], dtype]
    stats: T.Tensor[[m, chunks, 2], "float32"]
    softmax_chunk_stats(input_vectors, input, stats, width, vec, peeled, threads)


@tilelang.jit
def chunk_stats_lazy(dtype="float32", width=1024, vec=1, peeled=False, threads=128):
    m, n, vectors, chunks = T.dynamic("m, n, vectors, chunks")

    @T.prim_func
    def chunk_stats_lazy(
        input_vectors: T.Tensor((vectors, vec), dtype),
        input: T.Tensor((m, n), dtype),
        stats: T.Tensor((m, chunks, 2), "float32"),
    ):
        softmax_chunk_stats(input_vectors, input, stats, width, vec, peeled, threads)

    return chunk_stats_lazy


@T.macro
def softmax_combine_stats(stats, combined, m, chunks, width, threads):
    # Block (c, r) folds chunks c * width ... of row r into combined[r, c].
    with T.Kernel(combined.shape[1], m, threads=threads) as (c, r):
        lane_max = T.alloc_fragment((1, width), "float32")
        lane_sum = T.alloc_fragment((1, width), "float32")
        row_max = T.alloc_fragment((1,), "float32")
        row_sum = T.alloc_fragment((1,), "float32")
        fold_stats(stats, r, c * width, T.min(chunks, (c + 1) * width), lane_max, lane_sum, row_max, row_sum)
        store_stats(combined, r, c, row_max, row_sum)


@tilelang.jit
def combine_stats_eager(stats, combined, width=1024, threads=128):
    m, chunks, combined_chunks = T.dynamic("m, chunks, combined_chunks")
    stats: T.Tensor[[m, chunks, 2], "float32"]
    combined: T.Tensor[[m, combined_chunks, 2], "float32"]
    softmax_combine_stats(stats, combined, m, chunks, width, threads)


@tilelang.jit
def combine_stats_lazy(width=1024, threads=128):
    m, chunks, combined_chunks = T.dynamic("m, chunks, combined_chunks")

    @T.prim_func
    def combine_stats_lazy(
        stats: T.Tensor((m, chunks, 2), "float32"), combined: T.Tensor((m, combined_chunks, 2), "float32")
    ):
        softmax_combine_stats(stats, combined, m, chunks, width, threads)

    return combine_stats_lazy


@T.macro
def softmax_chunk_write(input_vectors, input, stats, out_vectors, out, width, vec, peeled, threads):
    m, n = input.shape
    with T.Kernel(T.ceildiv(n, width), m, threads=threads) as (c, r):
        tile = alloc_rows("tile", 1, width, vec, peeled)
        inverse_sum = T.alloc_fragment((1,), "float32")
        for i in T.Parallel(1):
            inverse_sum[i] = 1 / stats[r, 0, 1]
        load_rows(input_vectors, input, tile, r, c, MINUS_INF)
        map_rows(tile, lambda x, i: weight(x, stats[r, 0, 0]) * inverse_sum[i], (tile,))
        store_rows(tile, out_vectors, out, r, c)


@tilelang.jit
def chunk_write_eager(
    input_vectors, input, stats, out_vectors, out, dtype="float32", width=1024, vec=1, peeled=False, threads=128,
):
    m, n, vectors = T.dynamic("m, n, vectors")
    input_vectors: T.Tensor[[vectors, vec], dtype]
    input: T.Tensor[[m, n], dtype]
    stats: T.Tensor[[m, 1, 2], "float32"]
    out_vectors: T.Tensor[[vectors, vec], dtype]
    out: T.Tensor[[m, n], dtype]
    softmax_chunk_write(input_vectors, input, stats, out_vectors, out, width, vec, peeled, threads)


@tilelang.jit
def chunk_write_lazy(dtype="float32", width=1024, vec=1, peeled=False, threads=128):
    m, n, vectors = T.dynamic("m, n, vectors")

    @T.prim_func
    def chunk_write_lazy(
        input_vectors: T.Tensor((vectors, vec), dtype),
        input: T.Tensor((m, n), dtype),
        stats: T.Tensor((m, 1, 2), "float32"),
        out_vectors: T.Tensor((vectors, vec), dtype),
        out: T.Tensor((m, n), dtype),
    ):
        softmax_chunk_write(input_vectors, input, stats, out_vectors, out, width, vec, peeled, threads)

    return chunk_write_lazy


@T.macro
def softmax_grid(input_vectors, input, stats, out_vectors, out, width, vec, peeled, threads, blocks_per_sm):
    # Every block of the grid is resident at once (a cooperative launch, which
    # T.sync_grid makes TileLang ask for). stats (rounds, rows_per_round,
    # chunks, 2) is the launch: block (c, r) holds chunk c of row round *
    # rows_per_round + r in each round in turn. A cell per (row, chunk), so no
    # round overwrites what a block of an earlier round still reads: one grid
    # barrier a round. Rows past m (the last round's) compute on -inf and
    # store nothing.
    rounds, rows_per_round, chunks = stats.shape[0], stats.shape[1], stats.shape[2]
    with T.Kernel(chunks, rows_per_round, threads=threads) as (c, r):
        # nvcc keeps each thread's registers within what blocks_per_sm blocks
        # leave it, so the backend's count of resident blocks holds.
        T.annotate_min_blocks_per_sm(blocks_per_sm)
        tile = alloc_rows("tile", 1, width, vec, peeled)
        chunk_max = T.alloc_fragment((1,), "float32")
        chunk_sum = T.alloc_fragment((1,), "float32")
        lane_max = T.alloc_fragment((1, threads), "float32")
        lane_sum = T.alloc_fragment((1, threads), "float32")
        row_max = T.alloc_fragment((1,), "float32")
        row_sum = T.alloc_fragment((1,), "float32")
        for step in T.serial(rounds):
            load_weights(input_vectors, input, tile, step * rows_per_round + r, c, chunk_max, chunk_sum, 1)
            store_stats(stats, (step, r), c, chunk_max, chunk_sum)
            T.sync_grid()
            fold_stats(stats, (step, r), 0, chunks, lane_max, lane_sum, row_max, row_sum)
            for i in T.Parallel(1):
                # The chunk holds exp(x - chunk_max): rescaled to the row's maximum, over its sum.
                row_sum[i] = weight(chunk_max[i], row_max[i]) / row_sum[i]
            map_rows(tile, lambda x, i: x * row_sum[i], (tile,))
            store_rows(tile, out_vectors, out, step * rows_per_round + r, c)


@tilelang.jit
def grid_eager(
    input_vectors, input, stats, out_vectors, out, dtype="float32", width=1024, vec=1, peeled=False, threads=128,
    blocks_per_sm=1,
):
    m, n, vectors, rounds, rows_per_round, chunks = T.dynamic("m, n, vectors, rounds, rows_per_round, chunks")
    input_vectors: T.Tensor[[vectors, vec], dtype]
    input: T.Tensor[[m, n], dtype]
    stats: T.Tensor[[rounds, rows_per_round, chunks, 2], "float32"]
    out_vectors: T.Tensor[[vectors, vec], dtype]
    out: T.Tensor[[m, n], dtype]
    softmax_grid(input_vectors, input, stats, out_vectors, out, width, vec, peeled, threads, blocks_per_sm)


@tilelang.jit
def grid_lazy(dtype="float32", width=1024, vec=1, peeled=False, threads=128, blocks_per_sm=1):
    m, n, vectors, rounds, rows_per_round, chunks = T.dynamic("m, n, vectors, rounds, rows_per_round, chunks")

    @T.prim_func
    def grid_lazy(
        input_vectors: T.Tensor((vectors, vec), dtype),
        input: T.Tensor((m, n), dtype),
        stats: T.Tensor((rounds, rows_per_round, chunks, 2), "float32"),
        out_vectors: T.Tensor((vectors, vec), dtype),
        out: T.Tensor((m, n), dtype),
    ):
        softmax_grid(input_vectors, input, stats, out_vectors, out, width, vec, peeled, threads, blocks_per_sm)

    return grid_lazy


@T.macro
def softmax_columns(input, out, outer, n, iv, block_m, width, vec, threads, batch):
    with T.Kernel(T.ceildiv(iv * vec, width), outer, threads=threads) as (c, o):
        tile = T.alloc_fragment((block_m, width), "float32")
        lane_max = T.alloc_fragment((block_m, width), "float32")
        lane_sum = T.alloc_fragment((block_m, width), "float32")
        column_max = T.alloc_fragment((width,), "float32")
        column_sum = T.alloc_fragment((width,), "float32")
        T.fill(lane_max, MINUS_INF)
        T.fill(lane_sum, 0)
        for k in T.serial(T.ceildiv(n, block_m)):
            load_columns(input, tile, o, k * block_m, c * width, n, iv, vec, MINUS_INF)
            for i, j in T.Parallel(block_m, width):
                grown = T.max(lane_max[i, j], tile[i, j])
                lane_sum[i, j] = lane_sum[i, j] * weight(lane_max[i, j], grown) + weight(tile[i, j], grown)
                lane_max[i, j] = grown
        T.reduce_max(lane_max, column_max, dim=0, clear=True, batch=batch)
        for i, j in T.Parallel(block_m, width):
            lane_sum[i, j] = lane_sum[i, j] * weight(lane_max[i, j], column_max[j])
        T.reduce_sum(lane_sum, column_sum, dim=0, batch=batch)
        for j in T.Parallel(width):
            column_sum[j] = 1 / column_sum[j]
        for k in T.serial(T.ceildiv(n, block_m)):
            load_columns(input, tile, o, k * block_m, c * width, n, iv, vec, MINUS_INF)
            for i, j in T.Parallel(block_m, width):
                tile[i, j] = weight(tile[i, j], column_max[j]) * column_sum[j]
            store_columns(tile, out, o, k * block_m, c * width, n, iv, vec)


@tilelang.jit
def columns_eager(input, out, dtype="float32", block_m=16, width=256, vec=1, threads=128, batch=1):
    outer, n, iv = T.dynamic("outer, n, iv")
    input: T.Tensor[[outer, n, iv, vec], dtype]
    out: T.Tensor[[outer, n, iv, vec], dtype]
    softmax_columns(input, out, outer, n, iv, block_m, width, vec, threads, batch)


@tilelang.jit
def columns_lazy(dtype="float32", block_m=16, width=256, vec=1, threads=128, batch=1):
    outer, n, iv = T.dynamic("outer, n, iv")

    @T.prim_func
    def columns_lazy(input: T.Tensor((outer, n, iv, vec), dtype), out: T.Tensor((outer, n, iv, vec), dtype)):
        softmax_columns(input, out, outer, n, iv, block_m, width, vec, threads, batch)

    return columns_lazy


register("softmax", "rows", eager=rows_eager, lazy=rows_lazy)
register("softmax", "shared_rows", eager=shared_rows_eager, lazy=shared_rows_lazy)
register("softmax", "chunk_stats", eager=chunk_stats_eager, lazy=chunk_stats_lazy)
register("softmax", "combine_stats", eager=combine_stats_eager, lazy=combine_stats_lazy)
register("softmax", "chunk_write", eager=chunk_write_eager, lazy=chunk_write_lazy)
register("softmax", "grid", eager=grid_eager, lazy=grid_lazy)
register("softmax", "columns", eager=columns_eager, lazy=columns_lazy)
