"""TileLang building blocks shared by the kernels in ops/<op>/tilelang/.

Imported only by those kernel modules, which the tilelang backend imports when
it first compiles a kernel, so `import operator_runtime` never imports TileLang.
Each kernel module defines its operator once as a `T.macro` over these blocks
and wraps it twice: `<op>_eager`, an eager kernel (`@tilelang.jit` whose body
is the kernel, its tensors typed inside), and `<op>_lazy`, a lazy factory
(`@tilelang.jit` returning a `T.prim_func`). Extents are `T.dynamic`, so one compiled kernel serves every
size; only the dtype is fixed at compile time.

Layouts the kernels assume (the host side in backend.py brings operands there):
elementwise kernels see flat, contiguous, 16-byte-aligned vectors of n < 2^31
elements; row kernels see a contiguous (m, n) matrix whose rows are the
reduced axis, with m * n < 2^31.
"""

import tilelang.language as T

# Elementwise: a block of THREADS threads covers BLOCK consecutive elements
# (8 per thread: one 16-byte vector of f16/bf16, two of f32).
BLOCK = 1024
THREADS = 128

# Rows: a block of ROW_THREADS threads owns BLOCK_M rows and walks them in
# tiles of BLOCK_N columns, accumulating in f32.
BLOCK_M = 4
BLOCK_N = 256
ROW_THREADS = 128


@T.macro
def elementwise_kernel(n, element, *operands):
    """The launch of an elementwise kernel: element(i, *operands) for every i < n.

    A block covers BLOCK indices; a full block runs without bounds checks, so
    TileLang emits 16-byte vector loads and stores; only the last, partial
    block checks each index.
    """
    with T.Kernel(T.ceildiv(n, BLOCK), threads=THREADS) as bx:
        if (bx + 1) * BLOCK <= n:
            for i in T.Parallel(BLOCK):
                element(bx * BLOCK + i, *operands)
        else:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    element(bx * BLOCK + i, *operands)


@T.macro
def row_kernel(m, rows, *operands):
    """The launch of a row kernel: rows(first_row, *operands) per block of BLOCK_M rows."""
    with T.Kernel(T.ceildiv(m, BLOCK_M), threads=ROW_THREADS) as bx:
        rows(bx * BLOCK_M, *operands)


@T.macro
def load_tile(x, tile, m, n, row, column, fill):
    """tile[i, j] = x[row + i, column + j] as f32, or `fill` outside the matrix."""
    for i, j in T.Parallel(BLOCK_M, BLOCK_N):
        tile[i, j] = T.if_then_else(
            row + i < m and column + j < n,
            T.Cast("float32", x[row + i, column + j]),
            fill,
        )
