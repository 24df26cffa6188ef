"""softmax_backward in TileLang along the rows of contiguous (m, n) dy and y, in f32.

A block owns BLOCK_M rows and reads them twice, tile by tile. The first pass
adds dy * y into per-lane f32 partial sums, and one `T.reduce_sum` combines the
lanes of each row; the second writes y * (dy - sum). NaN and inf reach the
whole row through the sum, as in PyTorch. A block writes only rows it has read
itself, after reading them, so out may be dy or y.
`softmax_backward_eager` is the kernel itself (tensors typed inside its body);
`softmax_backward_lazy` is a factory returning the same kernel as a
`T.prim_func`. The tilelang backend (python/operator_runtime/tilelang/)
compiles the one the style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.tiles import BLOCK_M, BLOCK_N, load_tile, row_kernel


@T.macro
def softmax_backward_rows(row, dy, y, out, m, n):
    dy_tile = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
    y_tile = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
    lanes = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
    dot = T.alloc_fragment((BLOCK_M,), "float32")
    T.fill(lanes, 0)
    for k in T.serial(T.ceildiv(n, BLOCK_N)):
        load_tile(dy, dy_tile, m, n, row, k * BLOCK_N, T.float32(0))
        load_tile(y, y_tile, m, n, row, k * BLOCK_N, T.float32(0))
        for i, j in T.Parallel(BLOCK_M, BLOCK_N):
            lanes[i, j] += dy_tile[i, j] * y_tile[i, j]
    T.reduce_sum(lanes, dot, dim=1)
    for k in T.serial(T.ceildiv(n, BLOCK_N)):
        load_tile(dy, dy_tile, m, n, row, k * BLOCK_N, T.float32(0))
        load_tile(y, y_tile, m, n, row, k * BLOCK_N, T.float32(0))
        for i, j in T.Parallel(BLOCK_M, BLOCK_N):
            if row + i < m and k * BLOCK_N + j < n:
                out[row + i, k * BLOCK_N + j] = T.Cast(out.dtype, y_tile[i, j] * (dy_tile[i, j] - dot[i]))


@tilelang.jit
def softmax_backward_eager(dy, y, out, dtype="float32"):
    m, n = T.dynamic("m, n")
    dy: T.Tensor[[m, n], dtype]
    y: T.Tensor[[m, n], dtype]
    out: T.Tensor[[m, n], dtype]
    row_kernel(m, softmax_backward_rows, dy, y, out, m, n)


@tilelang.jit
def softmax_backward_lazy(dtype="float32"):
    m, n = T.dynamic("m, n")

    @T.prim_func
    def softmax_backward_lazy(
        dy: T.Tensor((m, n), dtype), y: T.Tensor((m, n), dtype), out: T.Tensor((m, n), dtype)
    ):
        row_kernel(m, softmax_backward_rows, dy, y, out, m, n)

    return softmax_backward_lazy
