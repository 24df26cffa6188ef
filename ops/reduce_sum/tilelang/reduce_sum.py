"""reduce_sum in TileLang: out[r] = sum of row r of a contiguous (m, n) input, in f32.

A block owns BLOCK_M rows and walks them in (BLOCK_M, BLOCK_N) tiles, adding
each tile into per-lane f32 partial sums; one `T.reduce_sum` at the end (a
tree TileLang emits over the block's threads) adds the lanes of each row.
`reduce_sum_eager` is the kernel itself (tensors typed inside its body);
`reduce_sum_lazy` is a factory returning the same kernel as a `T.prim_func`.
The tilelang backend (python/operator_runtime/tilelang/) compiles the one the
style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.tiles import BLOCK_M, BLOCK_N, load_tile, row_kernel


@T.macro
def sum_rows(row, input, out, m, n):
    tile = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
    lanes = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
    total = T.alloc_fragment((BLOCK_M,), "float32")
    T.fill(lanes, 0)
    for k in T.serial(T.ceildiv(n, BLOCK_N)):
        load_tile(input, tile, m, n, row, k * BLOCK_N, T.float32(0))
        for i, j in T.Parallel(BLOCK_M, BLOCK_N):
            lanes[i, j] += tile[i, j]
    T.reduce_sum(lanes, total, dim=1)
    for i in T.Parallel(BLOCK_M):
        if row + i < m:
            out[row + i] = T.Cast(out.dtype, total[i])


@tilelang.jit
def reduce_sum_eager(input, out, dtype="float32"):
    m, n = T.dynamic("m, n")
    input: T.Tensor[[m, n], dtype]
    out: T.Tensor[[m], dtype]
    row_kernel(m, sum_rows, input, out, m, n)


@tilelang.jit
def reduce_sum_lazy(dtype="float32"):
    m, n = T.dynamic("m, n")

    @T.prim_func
    def reduce_sum_lazy(input: T.Tensor((m, n), dtype), out: T.Tensor((m,), dtype)):
        row_kernel(m, sum_rows, input, out, m, n)

    return reduce_sum_lazy
