"""softmax in TileLang along the rows of a contiguous (m, n) input, in f32.

A block owns BLOCK_M rows and reads them twice, tile by tile. The first pass
keeps, per lane of the (BLOCK_M, BLOCK_N) tile, a running maximum and the sum
of exp(x - maximum), rescaling the sum when the maximum grows; then one
`T.reduce_max` and one `T.reduce_sum` combine the lanes of each row. The
second pass writes exp(x - max) / sum. A -inf entry weighs 0 even while a
maximum is still -inf (so a masked entry never makes a row NaN; a row of only
-inf gives 0 / 0 = NaN, as PyTorch). A block writes only rows it has read
itself, after reading them, so out may be the input.
`softmax_eager` is the kernel itself (tensors typed inside its body);
`softmax_lazy` is a factory returning the same kernel as a `T.prim_func`. The
tilelang backend (python/operator_runtime/tilelang/) compiles the one the
style option picks.
"""

import tilelang
import tilelang.language as T

from operator_runtime.tilelang.tiles import BLOCK_M, BLOCK_N, load_tile, row_kernel


@T.macro
def weight(x, maximum):
    """exp(x - maximum), and 0 for x = -inf whatever the maximum."""
    return T.if_then_else(x == -T.infinity("float32"), T.float32(0), T.exp(x - maximum))


@T.macro
def softmax_rows(row, input, out, m, n):
    minus_inf = -T.infinity("float32")
    tile = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
    lane_max = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
    lane_sum = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")
    row_max = T.alloc_fragment((BLOCK_M,), "float32")
    row_sum = T.alloc_fragment((BLOCK_M,), "float32")
    T.fill(lane_max, minus_inf)
    T.fill(lane_sum, 0)
    for k in T.serial(T.ceildiv(n, BLOCK_N)):
        load_tile(input, tile, m, n, row, k * BLOCK_N, minus_inf)
        for i, j in T.Parallel(BLOCK_M, BLOCK_N):
            grown = T.max(lane_max[i, j], tile[i, j])
            lane_sum[i, j] = lane_sum[i, j] * weight(lane_max[i, j], grown) + weight(tile[i, j], grown)
            lane_max[i, j] = grown
    T.reduce_max(lane_max, row_max, dim=1, clear=True)
    for i, j in T.Parallel(BLOCK_M, BLOCK_N):
        lane_sum[i, j] *= weight(lane_max[i, j], row_max[i])
    T.reduce_sum(lane_sum, row_sum, dim=1)
    for k in T.serial(T.ceildiv(n, BLOCK_N)):
        load_tile(input, tile, m, n, row, k * BLOCK_N, minus_inf)
        for i, j in T.Parallel(BLOCK_M, BLOCK_N):
            if row + i < m and k * BLOCK_N + j < n:
                out[row + i, k * BLOCK_N + j] = T.Cast(out.dtype, weight(tile[i, j], row_max[i]) / row_sum[i])


@tilelang.jit
def softmax_eager(input, out, dtype="float32"):
    m, n = T.dynamic("m, n")
    input: T.Tensor[[m, n], dtype]
    out: T.Tensor[[m, n], dtype]
    row_kernel(m, softmax_rows, input, out, m, n)


@tilelang.jit
def softmax_lazy(dtype="float32"):
    m, n = T.dynamic("m, n")

    @T.prim_func
    def softmax_lazy(input: T.Tensor((m, n), dtype), out: T.Tensor((m, n), dtype)):
        row_kernel(m, softmax_rows, input, out, m, n)

    return softmax_lazy
