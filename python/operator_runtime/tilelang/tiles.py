"""TileLang building blocks shared by the kernels in ops/<op>/tilelang/.

Imported only by those kernel modules, so `import operator_runtime` never
imports TileLang. Each kernel module defines its kernels once as `T.macro`s
over these blocks and wraps each twice: `<kernel>_eager`, an eager kernel
(`@tilelang.jit` whose body is the kernel, its tensors typed inside), and
`<kernel>_lazy`, a lazy factory (`@tilelang.jit` returning a `T.prim_func`).
Extents are `T.dynamic`, so one compiled kernel serves every size; the dtype
and the tile shape (a `Tile`, below) are fixed at compile time. Indexing is
64-bit (TileLang widens it), so no extent limits the number of elements.

Layouts the kernels see (backend.py brings operands there from the C
runtime's plan):
- elementwise, flat: contiguous, 16-byte-aligned operands of n elements;
- elementwise, broadcast: out a contiguous (outer, m, nv, vec) tensor, each
  input of extent 1 or out's along outer and m (repeated along the dims of
  extent 1), and either out's nv vectors along the inner dim or one element
  (constant along it);
- rows: a contiguous (m, n) matrix whose rows are the reduced axis, seen as
  (m, n / vec, vec) so that every row starts on a vector boundary and TileLang
  emits 16-byte loads and stores (vec = 1 for rows of any other length);
- columns: a contiguous (outer, n, inner) tensor reduced along n, seen as
  (outer, n, inner / vec, vec).
"""

from typing import NamedTuple

import tilelang.language as T

# Elementwise: a block of THREADS threads covers BLOCK consecutive elements
# (8 per thread: one 16-byte vector of f16/bf16, two of f32).
BLOCK = 1024
THREADS = 128
# The broadcast kernel: each of its THREADS threads takes this many 16-byte vectors.
BROADCAST_VECTORS_PER_THREAD = 2

MINUS_INF = -T.infinity("float32")
LOG2_E = T.float32(1.4426950408889634)


class Tile(NamedTuple):
    """A row kernel's compile-time shape: a block of `threads` threads holds
    `block_m` rows (or chunks of rows) of `width` elements in registers, read
    in vectors of `vec` elements."""

    block_m: int
    width: int
    vec: int
    threads: int


def _loads(inputs, index):
    """Each input's element at index(input). A plain function called while a
    macro is traced: TVMScript has no comprehensions."""
    return [tensor[index(tensor)] for tensor in inputs]


def _everywhere(i):
    """The index function reading every flat operand at i."""
    return lambda tensor: i


@T.macro
def flat_element(value, out, inputs, scalars, i):
    out[i] = T.Cast(out.dtype, value(*_loads(inputs, _everywhere(i)), *scalars))


@T.macro
def elementwise_kernel(n, value, out, inputs, scalars):
    """The launch of an elementwise kernel over flat operands: out[i] =
    value(input[i] for each input, *scalars) for every i < n.

    A block covers BLOCK indices; a full block runs without bounds checks, so
    TileLang emits 16-byte vector loads and stores; only the last, partial
    block checks each index.
    """
    with T.Kernel(T.ceildiv(n, BLOCK), threads=THREADS) as bx:
        if (bx + 1) * BLOCK <= n:
            for i in T.Parallel(BLOCK):
                flat_element(value, out, inputs, scalars, bx * BLOCK + i)
        else:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < n:
                    flat_element(value, out, inputs, scalars, bx * BLOCK + i)


def broadcast_shape(name, vec, constant_inner):
    """The shape of a broadcast_kernel input (module docstring), its extents
    dynamic: (outer or 1, m or 1, nv, vec), or (.., .., 1, 1) when it is
    constant along the inner dim."""
    outer, m, nv = T.dynamic(f"{name}_outer, {name}_m, {name}_nv")
    return (outer, m, 1, 1) if constant_inner else (outer, m, nv, vec)


def _broadcast_index(q, k, out):
    """Where vector q of out, element k, reads each input: out's (outer, m,
    vector) position, clamped to the input's extents (0 along a repeated dim)."""
    _, m, nv, _ = out.shape
    o, i, j = T.truncdiv(T.truncdiv(q, nv), m), T.truncmod(T.truncdiv(q, nv), m), T.truncmod(q, nv)

    def index(tensor):
        outer_extent, m_extent, _, vec = tensor.shape
        if int(vec) == 1:  # vec is a compile-time constant
            return T.min(o, outer_extent - 1), T.min(i, m_extent - 1), 0, 0
        return T.min(o, outer_extent - 1), T.min(i, m_extent - 1), j, k

    return (o, i, j, k), index


@T.macro
def broadcast_element(value, out, inputs, scalars, q, k):
    position, index = _broadcast_index(q, k, out)
    out[position] = T.Cast(out.dtype, value(*_loads(inputs, index), *scalars))


@T.macro
def broadcast_kernel(value, out, inputs, scalars, vec):
    """The launch of an elementwise kernel over broadcast operands (module
    docstring): out = value(inputs, *scalars) at every position of out.

    A thread takes BROADCAST_VECTORS_PER_THREAD whole vectors of out (16-byte
    loads and stores) whatever the dtype (one per thread left 16-bit dtypes at
    0.86-0.95x the CUDA backend on an H100, two gave 0.91-0.97x, four
    0.87-0.96x), and finds their (outer, m, vector) position by two divisions
    per vector; full blocks run without bounds checks, as in
    elementwise_kernel. Counts are 64-bit.
    """
    per_block = BROADCAST_VECTORS_PER_THREAD * THREADS
    vectors = T.Cast("int64", out.shape[0]) * out.shape[1] * out.shape[2]
    with T.Kernel(T.Cast("int32", T.ceildiv(vectors, per_block)), threads=THREADS) as bx:
        first = T.Cast("int64", bx) * per_block
        if first + per_block <= vectors:
            for v, k in T.Parallel(per_block, vec):
                broadcast_element(value, out, inputs, scalars, first + v, k)
        else:
            for v, k in T.Parallel(per_block, vec):
                if first + v < vectors:
                    broadcast_element(value, out, inputs, scalars, first + v, k)


@T.macro
def load_rows(x, tile, row, first_vector, m, nv, vec, fill):
    """tile[i, j] = element j of rows row + i of x (m, nv, vec) from vector
    first_vector on, as f32, or `fill` past the matrix.

    One element at a time (rows of odd length), the per-element bounds checks
    cost more instructions than the loads, so a tile wholly inside the matrix
    loads without them (with 16-byte vectors the second copy of the loop
    measured slower: softmax_backward 1024x32768 bf16 in chunks 0.67 -> 0.63x
    the nvidia backend on an H100)."""
    block_m, width = tile.shape
    if vec == 1 and row + block_m <= m and first_vector + width <= nv:
        for i, j in T.Parallel(block_m, width):
            tile[i, j] = T.Cast("float32", x[row + i, first_vector + j // vec, j % vec])
    else:
        for i, j in T.Parallel(block_m, width):
            tile[i, j] = T.if_then_else(
                row + i < m and first_vector + j // vec < nv,
                T.Cast("float32", x[row + i, first_vector + j // vec, j % vec]),
                fill,
            )


@T.macro
def store_rows(tile, out, row, first_vector, m, nv, vec):
    """The inverse of load_rows, for the elements inside the matrix."""
    block_m, width = tile.shape
    if vec == 1 and row + block_m <= m and first_vector + width <= nv:
        for i, j in T.Parallel(block_m, width):
            out[row + i, first_vector + j // vec, j % vec] = T.Cast(out.dtype, tile[i, j])
    else:
        for i, j in T.Parallel(block_m, width):
            if row + i < m and first_vector + j // vec < nv:
                out[row + i, first_vector + j // vec, j % vec] = T.Cast(out.dtype, tile[i, j])


@T.macro
def load_columns(x, tile, outer, first_row, first_column, n, iv, vec, fill):
    """tile[k, j] = x[outer, first_row + k, column first_column + j] in tile's
    dtype (x is (outer, n, iv, vec), columns count elements), or `fill` past it.
    A tile wholly inside loads without per-element checks, with vectors too
    (measured on an H100 against the nvidia backend, reduce_sum along dim 0:
    100x1342177 bf16 one element at a time 0.35 -> 0.85x, 3001x22363 f32
    0.54 -> 0.69x, 8192x8192 bf16 in vectors 0.82 -> 0.95x)."""
    block_k, width = tile.shape
    if first_row + block_k <= n and (first_column + width) // vec <= iv:
        for k, j in T.Parallel(block_k, width):
            tile[k, j] = T.Cast(tile.dtype, x[outer, first_row + k, (first_column + j) // vec, j % vec])
    else:
        for k, j in T.Parallel(block_k, width):
            tile[k, j] = T.if_then_else(
                first_row + k < n and (first_column + j) // vec < iv,
                T.Cast(tile.dtype, x[outer, first_row + k, (first_column + j) // vec, j % vec]),
                fill,
            )


def column_layout(block_m, width, vec, threads):
    """A (block_m, width) column tile's fragment layout: each thread holds whole
    vec-element vectors of consecutive columns (16-byte loads), the threads of
    a row group side by side across the width, row groups stacked."""
    lanes_per_row = width // vec
    row_groups = threads // lanes_per_row

    def forward(i, j):
        return (i % row_groups) * lanes_per_row + j // vec, (i // row_groups) * vec + j % vec

    return T.Fragment((block_m, width), forward_fn=forward)


@T.macro
def store_columns(tile, out, outer, first_row, first_column, n, iv, vec):
    """The inverse of load_columns, for the elements inside the tensor."""
    block_k, width = tile.shape
    if first_row + block_k <= n and (first_column + width) // vec <= iv:
        for k, j in T.Parallel(block_k, width):
            out[outer, first_row + k, (first_column + j) // vec, j % vec] = T.Cast(out.dtype, tile[k, j])
    else:
        for k, j in T.Parallel(block_k, width):
            if first_row + k < n and (first_column + j) // vec < iv:
                out[outer, first_row + k, (first_column + j) // vec, j % vec] = T.Cast(out.dtype, tile[k, j])


@T.macro
def weight(x, maximum):
    """exp(x - maximum), and 0 for x = -inf whatever the maximum (so a masked
    entry never makes a row NaN while its maximum is still -inf). As 2^((x -
    maximum) * log2(e)): exp2f is a few instructions where expf is many."""
    return T.if_then_else(x == MINUS_INF, T.float32(0), T.exp2((x - maximum) * LOG2_E))
