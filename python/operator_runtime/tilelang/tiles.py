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
- rows: a contiguous, 16-byte-aligned (m, n) matrix whose rows are the
  reduced axis, of any n, passed twice: as the whole 16-byte vectors of its
  data, (m * n // vec, vec), and as its rows, (m, n). Row r spans elements
  r * n ... r * n + n - 1, which need not start or end on a vector boundary:
  its body, the whole vectors inside it (RowSpan), is read and written
  through the first view, a vector at a time (16-byte loads and stores), and
  the up to vec - 1 elements before and after the body, its edges, through
  the second, an element at a time, as the CUDA backend peels its rows. A
  block of several such rows stages them instead: their elements are one
  contiguous run of the data, read and written in whole vectors through
  shared memory (only that run's partial first and last vectors element by
  element). A kernel compiled with peeled=False has no edges: n is a multiple
  of vec, or vec = 1 (misaligned data, f32 partial sums) and the body is the
  whole row;
- columns: a contiguous (outer, n, inner) tensor reduced along n, seen as
  (outer, n, inner / vec, vec).
"""

from typing import Any, NamedTuple

import tilelang.language as T

# TileLang's own TVM, importable once tilelang is: names the row tiles' fragments in the CUDA.
from tvm.script.ir_builder import IRBuilder

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


class RowSpan(NamedTuple):
    """Where one row of n elements lies in the flat data (module docstring):
    `head` elements before its first whole 16-byte vector, `vectors` whole
    vectors from vector `first` of the (vectors, vec) view on, `tail` elements
    after them (head and tail are fewer than vec each; with vec = 1, none)."""

    first: Any
    vectors: Any
    head: Any
    tail: Any


def row_span(row, n, vec, peeled):
    """The RowSpan of row `row` of n elements: it starts at element row * n,
    (row * n) % vec elements past a vector boundary, or on one when not
    `peeled` (n is a multiple of vec). A plain function called while a macro is
    traced, giving expressions inlined where they are used (a name bound inside
    a T.Parallel loop would become a TIR let in front of the vectorised loads)."""
    if not peeled:
        return RowSpan(first=T.Cast("int64", row) * T.truncdiv(n, vec), vectors=T.truncdiv(n, vec), head=0, tail=0)
    past_boundary = T.truncmod(T.truncmod(row, vec) * T.truncmod(n, vec), vec)
    head = T.min(T.truncmod(vec - past_boundary, vec), n)
    return RowSpan(
        first=T.truncdiv(T.Cast("int64", row) * n + head, vec),
        vectors=T.truncdiv(n - head, vec),
        head=head,
        tail=T.truncmod(n - head, vec),
    )


def edge_column(e, n, vec):
    """The row column of edge slot e: slots 0 .. vec-1 are the row's first vec
    columns (the head), slots vec .. 2*vec-1 its last vec columns (the tail)."""
    return T.if_then_else(e < vec, e, n - 2 * vec + e)


def holds_edge(e, span, vec):
    """Whether edge slot e is one of the row's head or tail elements."""
    return T.if_then_else(e < vec, e < span.head, e >= 2 * vec - span.tail)


class RowTile(NamedTuple):
    """A block's rows in registers: `body` (block_m, width) holds whole 16-byte
    vectors of each row (of the block's chunk of it), `edges` (block_m, 2 * vec)
    each row's head and tail elements (edge_column), or None when no row has
    any (alloc_rows). Every row's edges are held by the block of its first
    chunk only. `staged`: the body holds whole rows, staged through shared
    memory (load_rows), and there are no edges."""

    body: Any
    edges: Any
    staged: bool


def alloc_rows(name, block_m, width, vec, peeled):
    """A RowTile `name` for block_m rows (or chunks of rows) of `width` elements,
    in f32, with edges when `peeled` (a compile-time flag: rows whose length is
    not a multiple of vec; rows of whole vectors compile without the edges'
    loads, reductions and barrier) and the block holds one row; a block of
    several rows that are not whole vectors stages them instead. TileLang lays
    edges out like the rows' results, so a thread of such a block would hold
    the edges of all its rows: 16 to 64 slots, 113-154 registers (sm_90,
    softmax's rows of 128 to 2048 elements, against 51-63 without edges)."""
    body = IRBuilder.name(name, T.alloc_fragment((block_m, width), "float32"))
    staged = peeled and block_m > 1
    edges = None
    if peeled and not staged:
        edges = IRBuilder.name(f"{name}_edges", T.alloc_fragment((block_m, 2 * vec), "float32"))
    return RowTile(body, edges, staged)


def _rows_geometry(tile, vectors, matrix):
    """What load_rows and store_rows read off their operands: the matrix's
    (m, n), the vector's elements, whether the tile has edges, the tile's
    (block_m, width) and its vectors per chunk."""
    m, n = matrix.shape
    vec = int(vectors.shape[1])
    block_m, width = tile.body.shape
    return m, n, vec, tile.edges is not None, block_m, width, width // vec


class BlockSpan(NamedTuple):
    """The run of the flat data that rows row ... of a staged tile hold (those
    below m): `length` elements from element `start`, which lies `lead`
    elements into vector `first`; a staging buffer's vector v is the data's
    vector first + v."""

    start: Any
    length: Any
    lead: Any
    first: Any


def block_span(row, block_m, m, n, vec):
    """The BlockSpan of rows row ... row + block_m - 1 of an (m, n) matrix. A plain
    function called while a macro is traced, as row_span."""
    start = T.Cast("int64", row) * n
    return BlockSpan(start=start, length=T.min(block_m, m - row) * n, lead=T.truncmod(start, vec),
                     first=T.truncdiv(start, vec))


def _staged_position(span, i, j, n, vec):
    """(vector, lane) of element j of the tile's row i in its staging buffer."""
    return T.truncdiv(span.lead + i * n + j, vec), T.truncmod(span.lead + i * n + j, vec)


def in_run(span, position):
    """Whether staging position `position` (lane k of staging vector v at v * vec
    + k) holds an element of the run: kernels that work on a staged run in
    place, whose elements need no row and column."""
    return T.And(span.lead <= position, position < span.lead + span.length)


def _wholly_inside(span, v, vec):
    """Whether staging vector v lies wholly inside the block's run."""
    return T.And(v * vec >= span.lead, (v + 1) * vec <= span.lead + span.length)


def _matrix_index(n, element):
    """The (row, column) of flat element `element` of a matrix of rows of n."""
    return T.truncdiv(element, n), T.truncmod(element, n)


def _staging(tile, vec, dtype):
    """A shared buffer of the vectors a staged tile's run covers: its
    block_m * width elements start at most vec - 1 into the first of them."""
    block_m, width = tile.body.shape
    return T.alloc_shared((block_m * width // vec + 1, vec), dtype)


# The staging buffer's last vector, which only a run starting off a vector
# boundary reaches, is copied by a loop of its own: with it, the copy's extent
# is no multiple of the block's threads and TileLang copies element by element.


@T.macro
def _stage_vector(x_vectors, staged, span, v, k):
    """Lane k of staging vector v, when it is whole in the data and covers the run."""
    if span.first + v < x_vectors.shape[0] and v * x_vectors.shape[1] < span.lead + span.length:
        staged[v, k] = x_vectors[span.first + v, k]


@T.macro
def _unstage_vector(staged, out_vectors, span, v, k):
    """Lane k of staging vector v, when it lies wholly inside the run."""
    if _wholly_inside(span, v, out_vectors.shape[1]):
        out_vectors[span.first + v, k] = staged[v, k]


@T.macro
def stage_run(x_vectors, x, staged, span, vectors):
    """staged = the vectors covering `span`'s run of x (staged vector v is the
    data's vector span.first + v; a run of at most `vectors` * vec elements
    covers at most vectors + 1): each whole in the data loaded whole (16-byte
    loads; elements outside the run, a neighbour's, are read and never used),
    the data's last, partial vector element by element."""
    vec = int(x_vectors.shape[1])
    whole = x_vectors.shape[0]
    for v, k in T.Parallel(vectors, vec):
        _stage_vector(x_vectors, staged, span, v, k)
    for k in T.Parallel(vec):
        _stage_vector(x_vectors, staged, span, vectors, k)
    for k in T.Parallel(vec):
        if span.start <= T.Cast("int64", whole) * vec + k < span.start + span.length:
            staged[whole - span.first, k] = x[_matrix_index(x.shape[1], T.Cast("int64", whole) * vec + k)]


@T.macro
def unstage_run(staged, out_vectors, out, span, vectors):
    """The inverse of stage_run for the run's own elements: the vectors wholly
    inside it (16-byte stores), then its elements in its first and last vectors
    when those are not, one by one; a block writes nothing else."""
    vec = int(out_vectors.shape[1])
    for v, k in T.Parallel(vectors, vec):
        _unstage_vector(staged, out_vectors, span, v, k)
    for k in T.Parallel(vec):
        _unstage_vector(staged, out_vectors, span, vectors, k)
    last = T.truncdiv(span.lead + span.length - 1, vec)
    for s, k in T.Parallel(2, vec):
        # s = 0: the run's first vector, 1: its last (the same one in a short run).
        if (span.lead <= s * last * vec + k < span.lead + span.length
                and T.Not(_wholly_inside(span, s * last, vec))):
            out[_matrix_index(out.shape[1], span.start - span.lead + s * last * vec + k)] = staged[s * last, k]


@T.macro
def _load_staged(x_vectors, x, tile, row, fill):
    """load_rows of a staged tile: the block's run into shared memory
    (stage_run), then each row out of it."""
    m, n, vec, _, block_m, width, _ = _rows_geometry(tile, x_vectors, x)
    staged = _staging(tile, vec, x.dtype)
    span = block_span(row, block_m, m, n, vec)
    stage_run(x_vectors, x, staged, span, block_m * width // vec)
    for i, j in T.Parallel(block_m, width):
        tile.body[i, j] = T.if_then_else(
            row + i < m and j < n, T.Cast("float32", staged[_staged_position(span, i, j, n, vec)]), fill)


@T.macro
def _store_staged(tile, out_vectors, out, row):
    """store_rows of a staged tile: each row into shared memory, then the run
    out of it (unstage_run)."""
    m, n, vec, _, block_m, width, _ = _rows_geometry(tile, out_vectors, out)
    staged = _staging(tile, vec, out.dtype)
    span = block_span(row, block_m, m, n, vec)
    for i, j in T.Parallel(block_m, width):
        if row + i < m and j < n:
            staged[_staged_position(span, i, j, n, vec)] = T.Cast(out.dtype, tile.body[i, j])
    unstage_run(staged, out_vectors, out, span, block_m * width // vec)


@T.macro
def load_rows(x_vectors, x, tile, row, chunk, fill):
    """tile = chunk `chunk` of rows row ... row + block_m of x as f32 (`fill`
    past a row or the matrix): x is the (m, n) matrix, x_vectors the same data
    as (vectors, vec) (module docstring). The body loads whole vectors under a
    condition uniform per vector, which TileLang turns into 16-byte loads; the
    edges (the first chunk's only) load element by element. A staged tile
    holds whole rows, loaded through shared memory, and ignores `chunk`: only
    whole-row launches use one (tilelang_host_test checks the backend's).

    One element at a time (vec = 1), the per-element bounds checks cost more
    instructions than the loads, so a tile wholly inside the matrix loads
    without them (with 16-byte vectors the second copy of the loop measured
    slower: softmax_backward 1024x32768 bf16 in chunks 0.67 -> 0.63x the
    nvidia backend on an H100)."""
    m, n, vec, peeled, block_m, width, per_chunk = _rows_geometry(tile, x_vectors, x)
    if tile.staged:
        _load_staged(x_vectors, x, tile, row, fill)
    elif vec == 1 and row + block_m <= m and (chunk + 1) * width <= n:
        for i, j in T.Parallel(block_m, width):
            tile.body[i, j] = T.Cast("float32", x[row + i, chunk * width + j])
    else:
        for i, j in T.Parallel(block_m, width):
            tile.body[i, j] = T.if_then_else(
                row + i < m and chunk * per_chunk + j // vec < row_span(row + i, n, vec, peeled).vectors,
                T.Cast("float32", x_vectors[row_span(row + i, n, vec, peeled).first + chunk * per_chunk + j // vec, j % vec]),
                fill,
            )
    if tile.edges is not None:
        for i, e in T.Parallel(block_m, 2 * vec):
            tile.edges[i, e] = T.if_then_else(
                chunk == 0 and row + i < m and holds_edge(e, row_span(row + i, n, vec, peeled), vec),
                T.Cast("float32", x[row + i, edge_column(e, n, vec)]),
                fill,
            )


@T.macro
def store_rows(tile, out_vectors, out, row, chunk):
    """The inverse of load_rows, for the elements of the matrix."""
    m, n, vec, peeled, block_m, width, per_chunk = _rows_geometry(tile, out_vectors, out)
    if tile.staged:
        _store_staged(tile, out_vectors, out, row)
    elif vec == 1 and row + block_m <= m and (chunk + 1) * width <= n:
        for i, j in T.Parallel(block_m, width):
            out[row + i, chunk * width + j] = T.Cast(out.dtype, tile.body[i, j])
    else:
        for i, j in T.Parallel(block_m, width):
            if row + i < m and chunk * per_chunk + j // vec < row_span(row + i, n, vec, peeled).vectors:
                out_vectors[row_span(row + i, n, vec, peeled).first + chunk * per_chunk + j // vec, j % vec] = T.Cast(
                    out.dtype, tile.body[i, j])
    if tile.edges is not None:
        # TileLang repeats a fragment smaller than the block on every group of
        # threads, and each copy of an edge slot loads it: all have read the
        # edges before one writes them (out may be the input).
        T.sync_threads()
        for i, e in T.Parallel(block_m, 2 * vec):
            if chunk == 0 and row + i < m and holds_edge(e, row_span(row + i, n, vec, peeled), vec):
                out[row + i, edge_column(e, n, vec)] = T.Cast(out.dtype, tile.edges[i, e])


def _elements(tiles, part, i, j):
    """Element (i, j) of `part` ("body" or "edges") of each RowTile of tiles."""
    return [getattr(tile, part)[i, j] for tile in tiles]


@T.macro
def map_rows(out, value, tiles):
    """out[i, j] = value(tile[i, j] of each of tiles, i) over the body and the
    edges of RowTiles of one shape."""
    for i, j in T.Parallel(*out.body.shape):
        out.body[i, j] = value(*_elements(tiles, "body", i, j), i)
    if out.edges is not None:
        for i, e in T.Parallel(*out.edges.shape):
            out.edges[i, e] = value(*_elements(tiles, "edges", i, e), i)


@T.macro
def _fold_edges(tile, result, reduce, combine):
    """result[i] = combine(result[i], reduce of row i's edges). The edges'
    results go through shared memory: TileLang lays the edges out from their
    own loads, and a reduction into a fragment laid out like the body's
    results finds no layout when the block holds several rows."""
    if tile.edges is not None:
        edge_results = T.alloc_shared(result.shape, "float32")
        reduce(tile.edges, edge_results, dim=1)
        for i in T.Parallel(*result.shape):
            result[i] = combine(result[i], edge_results[i])


@T.macro
def reduce_rows_max(tile, result, batch):
    """result[i] = the maximum of row i's body and edges."""
    T.reduce_max(tile.body, result, dim=1, clear=True, batch=batch)
    _fold_edges(tile, result, T.reduce_max, T.max)


@T.macro
def reduce_rows_sum(tile, result, batch):
    """result[i] = the sum of row i's body and edges."""
    T.reduce_sum(tile.body, result, dim=1, batch=batch)
    _fold_edges(tile, result, T.reduce_sum, lambda total, edges: total + edges)


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
