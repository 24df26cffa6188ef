// Rows with partial vectors (odd lengths, or starts off a vector boundary)
// packed back to back (a row's stride is its length), for the reduction
// family's kernels: a block stages a span of whole rows in a shared-memory
// tile, so global memory moves in aligned 16-byte vectors whatever the rows'
// length (only the span's first and last vector go element by element). Walks
// of single rows load each partial vector element by element, which at
// lengths like 33 or 257 is most of them.
#ifndef OPERATOR_RUNTIME_REDUCTION_PACKED_ROWS_CUDA_CUH_
#define OPERATOR_RUNTIME_REDUCTION_PACKED_ROWS_CUDA_CUH_

#include "runtime/reduction/reduction_cuda.cuh"

namespace oprt {
namespace gpu {

constexpr int kPackedBlockThreads = 256;
constexpr int kPackedTileBytes = 32768;

// Vectors one thread moves between global and shared memory per span, and how
// many of them it has in flight at once (more spilled).
constexpr int kPackedVectorsPerThread = kPackedTileBytes / kVectorBytes / kPackedBlockThreads;
constexpr int kPackedVectorsInFlight = 4;

// Copies `count` elements from `from` to `to` (one of them a tile, whose
// element `lead + i` is the span's element i): full vectors in one access each,
// kPackedVectorsInFlight loads issued before their stores; the partial first
// and last vector element by element.
template <int kVec, class T>
__device__ inline void copy_span(T* to, const T* from, int64_t count, int lead, bool to_tile) {
  using Word = typename AccessWord<sizeof(T) * kVec>::type;
  // Both sides as seen from the span's aligned base: global is aligned there,
  // and the tile's element lead + i is span element i.
  T* to_base = to_tile ? to : to - lead;
  const T* from_base = to_tile ? from - lead : from;
  const int end = static_cast<int>(lead + count);
#pragma unroll
  for (int batch = 0; batch < kPackedVectorsPerThread; batch += kPackedVectorsInFlight) {
    Word words[kPackedVectorsInFlight];
#pragma unroll
    for (int u = 0; u < kPackedVectorsInFlight; ++u) {
      const int p = ((batch + u) * kPackedBlockThreads + static_cast<int>(threadIdx.x)) * kVec;
      if (p >= lead && p + kVec <= end) words[u] = *reinterpret_cast<const Word*>(from_base + p);
    }
#pragma unroll
    for (int u = 0; u < kPackedVectorsInFlight; ++u) {
      const int p = ((batch + u) * kPackedBlockThreads + static_cast<int>(threadIdx.x)) * kVec;
      if (p >= lead && p + kVec <= end) {
        if (to_tile) {
          *reinterpret_cast<Word*>(to_base + p) = words[u];
        } else {
          store_word(reinterpret_cast<Word*>(to_base + p), words[u]);
        }
      } else if (p < end) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if (p + k >= lead && p + k < end) to_base[p + k] = from_base[p + k];
        }
      }
    }
  }
}

// The spans of a launch: `count` spans of rows_per_span rows of `length`
// elements (the last span may hold fewer).
struct PackedSpans {
  int64_t rows;
  int length;
  int rows_per_span;
  int64_t count;

  // Span `span`'s first row and its number of rows.
  __device__ int64_t first_row(int64_t span) const { return span * rows_per_span; }
  __device__ int rows_in(int64_t span) const {
    return static_cast<int>(min(int64_t{rows_per_span}, rows - first_row(span)));
  }

  // Copies span `span` of packed rows `in` to tile (copy_span: the tile's
  // element lead + i is the span's element i) and returns the lead; the block
  // synchronises before reading the tile.
  template <int kVec, class T>
  __device__ int stage(T* tile, const T* in, int64_t span) const {
    const T* const first = in + first_row(span) * length;
    const int lead = vector_lead<kVec>(first);
    copy_span<kVec>(tile, first, int64_t{rows_in(span)} * length, lead, true);
    return lead;
  }
};

// Whether the rows of in are packed: one row, or rows at a stride of their length.
inline bool input_rows_are_packed(const ReductionPlan& plan) {
  const RowOffsets& offsets = plan.row_offsets;
  return offsets.ndim == 0 || (offsets.ndim == 1 && offsets.in_strides[0] == plan.row_length);
}

// As many whole rows per span as the tile holds with the span's lead, rounded
// up to whole vectors (kVec elements).
template <class T, int kVec>
PackedSpans packed_spans(const ReductionPlan& plan) {
  constexpr int64_t kTileElements = kPackedTileBytes / sizeof(T);
  const int rows_per_span = static_cast<int>(
      std::min<int64_t>((kTileElements - 2 * kVec) / plan.row_length, plan.rows));
  return PackedSpans{plan.rows, static_cast<int>(plan.row_length), rows_per_span,
                     ceil_div(plan.rows, rows_per_span)};
}

}  // namespace gpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_REDUCTION_PACKED_ROWS_CUDA_CUH_
