"""reduce_sum in TileLang, summing in f32, in two kernels:

- `rows`: sums of chunks of the rows of a contiguous input, seen as its whole
  vectors and its (m, n) rows (tiles.py). Block (c, b) holds chunk c, `width`
  elements of whole vectors, of rows b * block_m ... in registers (chunk 0
  also each row's edges), and `tiles.reduce_rows_sum` (a tree TileLang emits
  over the block's threads) writes out[r, c]. With one chunk per row, out is
  the result (m, 1); with several, out is f32 partial sums (m, chunks) that the
  same kernel then sums as rows of f32 (the backend repeats this until one
  chunk is left), so a row of any length spreads over the whole GPU.
- `columns`: sums along the middle axis of a contiguous (outer, n, iv, vec)
  input (a leading or middle dim) into out (outer, splits, iv, vec): block
  (c, o, s) walks split s of n, `block_m` steps at a time, adding a (block_m,
  width) tile of neighbouring columns into per-lane partial sums, and reduces
  the lanes along n at the end. Reads are along the contiguous inner columns,
  so no transposing copy is needed; with several splits (few columns, long n)
  out is f32 partial sums that the same kernel then sums along splits. The
  tile holds the input's dtype, and with vectors each thread a whole vector of
  a row (tiles.column_layout): TileLang's own layout for an f32 tile gave each
  thread four columns, 8-byte loads of 16-bit inputs.

`<kernel>_eager` is the kernel itself (tensors typed inside its body);
`<kernel>_lazy` a factory returning it as a `T.prim_func`; the tilelang backend
(python/operator_runtime/tilelang/) compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.registry import register
from operator_runtime.tilelang.tiles import alloc_rows, column_layout, load_columns, load_rows, reduce_rows_sum


@T.macro
def sum_rows(input_vectors, input, out, block_m, width, vec, peeled, threads, batch):
    m = input.shape[0]
    chunks = out.shape[1]
    with T.Kernel(chunks, T.ceildiv(m, block_m), threads=threads) as (c, b):
        tile = alloc_rows("tile", block_m, width, vec, peeled)
        total = T.alloc_fragment((block_m,), "float32")
        load_rows(input_vectors, input, tile, b * block_m, c, T.float32(0))
        reduce_rows_sum(tile, total, batch)
        for i in T.Parallel(block_m):
            if b * block_m + i < m:
                out[b * block_m + i, c] = T.Cast(out.dtype, total[i])


@tilelang.jit
def rows_eager(
    input_vectors, input, out, dtype="float32", out_dtype="float32", block_m=1, width=1024, vec=1, peeled=False,
    threads=128, batch=1,
):
    m, n, vectors, chunks = T.dynamic("m, n, vectors, chunks")
    input_vectors: T.Tensor[[vectors, vec], dtype]
    input: T.Tensor[[m, n], dtype]
    out: T.Tensor[[m, chunks], out_dtype]
    sum_rows(input_vectors, input, out, block_m, width, vec, peeled, threads, batch)


@tilelang.jit
def rows_lazy(dtype="float32", out_dtype="float32", block_m=1, width=1024, vec=1, peeled=False, threads=128, batch=1):
    m, n, vectors, chunks = T.dynamic("m, n, vectors, chunks")

    @T.prim_func
    def rows_lazy(
        input_vectors: T.Tensor((vectors, vec), dtype),
        input: T.Tensor((m, n), dtype),
        out: T.Tensor((m, chunks), out_dtype),
    ):
        sum_rows(input_vectors, input, out, block_m, width, vec, peeled, threads, batch)

    return rows_lazy


@T.macro
def sum_columns(input, out, outer, n, iv, block_m, width, vec, threads, batch):
    splits = out.shape[1]
    with T.Kernel(T.ceildiv(iv * vec, width), outer, splits, threads=threads) as (c, o, s):
        per_split = T.ceildiv(n, splits)
        tile = T.alloc_fragment((block_m, width), input.dtype)
        lanes = T.alloc_fragment((block_m, width), "float32")
        total = T.alloc_fragment((width,), "float32")
        if vec > 1:
            T.annotate_layout({tile: column_layout(block_m, width, vec, threads),
                               lanes: column_layout(block_m, width, vec, threads)})
        T.fill(lanes, 0)
        for k in T.serial(T.ceildiv(per_split, block_m)):
            first = s * per_split + k * block_m
            load_columns(input, tile, o, first, c * width, T.min(n, (s + 1) * per_split), iv, vec, T.Cast(input.dtype, 0))
            for i, j in T.Parallel(block_m, width):
                lanes[i, j] += T.Cast("float32", tile[i, j])
        T.reduce_sum(lanes, total, dim=0, batch=batch)
        for j in T.Parallel(width):
            if (c * width + j) // vec < iv:
                out[o, s, (c * width + j) // vec, j % vec] = T.Cast(out.dtype, total[j])


@tilelang.jit
def columns_eager(
    input, out, dtype="float32", out_dtype="float32", block_m=16, width=256, vec=1, threads=128, batch=1,
):
    outer, n, iv, splits = T.dynamic("outer, n, iv, splits")
    input: T.Tensor[[outer, n, iv, vec], dtype]
    out: T.Tensor[[outer, splits, iv, vec], out_dtype]
    sum_columns(input, out, outer, n, iv, block_m, width, vec, threads, batch)


@tilelang.jit
def columns_lazy(dtype="float32", out_dtype="float32", block_m=16, width=256, vec=1, threads=128, batch=1):
    outer, n, iv, splits = T.dynamic("outer, n, iv, splits")

    @T.prim_func
    def columns_lazy(
        input: T.Tensor((outer, n, iv, vec), dtype), out: T.Tensor((outer, splits, iv, vec), out_dtype)
    ):
        sum_columns(input, out, outer, n, iv, block_m, width, vec, threads, batch)

    return columns_lazy


register("reduce_sum", "rows", eager=rows_eager, lazy=rows_lazy)
# Sums of chunks of long rows are the same kernel writing f32 partials (m, chunks).
register("reduce_sum", "chunk_sums", eager=rows_eager, lazy=rows_lazy)
register("reduce_sum", "columns", eager=columns_eager, lazy=columns_lazy)
