// Device machinery of the reduction family, written once in the CUDA dialect
// that MetaX's MACA shares: teams of threads that cooperate on one row, their
// reductions, vector loads and stores, the online (max, sum) pair of softmax,
// and the host-side launch choices common to reduce_sum and softmax.
//
// The shuffle intrinsic is named only in this header; the warp width comes from
// runtime/nvidia/device.cuh (64 on MetaX).
#ifndef OPERATOR_RUNTIME_REDUCTION_REDUCTION_CUDA_CUH_
#define OPERATOR_RUNTIME_REDUCTION_REDUCTION_CUDA_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "runtime/core/numeric.h"
#include "runtime/nvidia/device.cuh"
#include "runtime/reduction/reduction.h"

namespace oprt {
namespace gpu {

constexpr int kWarpSize = OPRT_WARP_SIZE;
// Every kernel here is declared for blocks of up to this many threads, which
// also caps its registers so that such a block always fits on one SM.
constexpr int kMaxBlockThreads = 1024;
// Threads of a block whose threads walk rows side by side (ColumnTeams).
constexpr int kColumnBlockThreads = 256;
// Threads of a block that works alone on a long row (or a chunk of one).
constexpr int kLongRowBlockThreads = 512;
// Bytes of one vector access: a row is read 16 bytes at a time when aligned.
constexpr int kVectorBytes = 16;
// Chunk lengths are multiples of this, so a chunk starts on a vector boundary
// for every dtype (a 16-byte vector holds at most 8 elements).
constexpr int64_t kChunkQuantum = 16;

__device__ inline float shuffle_xor(float value, int lane_mask, int width) {
  return __shfl_xor_sync(OPRT_FULL_WARP_MASK, value, lane_mask, width);
}

// The running state of an online softmax: the largest value seen and the sum
// of exp(x - max) over the values seen.
struct alignas(8) MaxSum {
  float max;
  float sum;
};

__device__ inline MaxSum shuffle_xor(MaxSum value, int lane_mask, int width) {
  return MaxSum{shuffle_xor(value.max, lane_mask, width), shuffle_xor(value.sum, lane_mask, width)};
}

// e^x for softmax, whose arguments are x - max <= 0: the hardware's base-2
// exponential of x * log2(e) (two instructions instead of expf's range
// reduction). Its relative error, a few ulp times |x|, and its flushing of
// results below 2^-126 to 0 stay inside every dtype's tolerance; with expf the
// long-row kernels were bound by instruction issue (bf16 512x131072 on the
// H200: 120 us, 101 with __expf). On nvidia it is ex2.approx.ftz itself:
// __expf's ex2.approx without .ftz costs three more instructions per element
// to keep subnormal results, which a softmax never needs. (MACA has no PTX.)
__device__ inline float softmax_exp(float x) {
#if defined(OPRT_METAX)
  return __expf(x);
#else
  constexpr float kLog2E = 1.4426950408889634f;
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * kLog2E));
  return y;
#endif
}

// exp(x - max), except that a -inf entry weighs 0 even when max is -inf too:
// without that, the empty state (-inf, 0) or a run of -inf entries would turn
// the sum into NaN (-inf - -inf) before a finite maximum arrives.
__device__ inline float softmax_weight(float x, float max) {
  return x == -INFINITY ? 0.0f : softmax_exp(x - max);
}

struct AddOp {
  __device__ static float identity() { return 0.0f; }
  __device__ float operator()(float a, float b) const { return a + b; }
};

struct MaxOp {
  __device__ static float identity() { return -INFINITY; }
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

struct MaxSumOp {
  __device__ static MaxSum identity() { return MaxSum{-INFINITY, 0.0f}; }
  __device__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float max = fmaxf(a.max, b.max);
    return MaxSum{max, a.sum * softmax_weight(a.max, max) + b.sum * softmax_weight(b.max, max)};
  }
};

// Folds n more values into an online softmax state. The running sum is
// rescaled only when the maximum grows, which after the first few values is
// rare, so most values cost one exponential. While every value seen is -inf
// the state stays empty: -inf - -inf would make the sum NaN.
template <int kCount>
__device__ inline MaxSum absorb(MaxSum state, const float (&x)[kCount]) {
  float max = state.max;
#pragma unroll
  for (int k = 0; k < kCount; ++k) max = fmaxf(max, x[k]);
  if (max == -INFINITY) return state;
  float sum = state.sum;
  if (max != state.max) sum *= softmax_exp(state.max - max);
#pragma unroll
  for (int k = 0; k < kCount; ++k) sum += softmax_exp(x[k] - max);
  return MaxSum{max, sum};
}

// kCount values reduced by a team as one, lane by lane: the sums of kCount
// neighbouring columns, or the maxima and sums of kCount rows a team holds.
template <int kCount>
struct FloatVector {
  float lanes[kCount];
};

template <int kCount>
__device__ inline FloatVector<kCount> shuffle_xor(FloatVector<kCount> value, int lane_mask,
                                                  int width) {
#pragma unroll
  for (int k = 0; k < kCount; ++k) value.lanes[k] = shuffle_xor(value.lanes[k], lane_mask, width);
  return value;
}

// Op applied to each lane of two FloatVectors.
template <class Op, int kCount>
struct LanewiseOp {
  __device__ FloatVector<kCount> operator()(FloatVector<kCount> a, FloatVector<kCount> b) const {
#pragma unroll
    for (int k = 0; k < kCount; ++k) a.lanes[k] = Op{}(a.lanes[k], b.lanes[k]);
    return a;
  }
};

template <class V, class Op>
__device__ inline V butterfly_reduce(V value, Op op, int width) {
  for (int lane_mask = width / 2; lane_mask > 0; lane_mask /= 2) {
    value = op(value, shuffle_xor(value, lane_mask, width));
  }
  return value;
}

// Teams: the threads that share one row. Each has a member index in
// [0, width()), a slot (which of the block's teams_per_block() rows it works
// on) and reduce(), which gives every member the team-wide result. A team
// reduction may synchronise the block, so every thread of a block calls it the
// same number of times, active or not.

// `width` lanes (a power of two up to a warp) per row, several rows per block.
struct WarpTeams {
  int lanes;
  __device__ int width() const { return lanes; }
  __device__ int member() const { return static_cast<int>(threadIdx.x) & (lanes - 1); }
  __device__ int slot() const { return static_cast<int>(threadIdx.x) / lanes; }
  __device__ int teams_per_block() const { return static_cast<int>(blockDim.x) / lanes; }
  template <class V, class Op>
  __device__ V reduce(V value, Op op) const {
    return butterfly_reduce(value, op, lanes);
  }
};

// The whole block (a multiple of the warp size) on one row.
struct BlockTeam {
  __device__ int width() const { return static_cast<int>(blockDim.x); }
  __device__ int member() const { return static_cast<int>(threadIdx.x); }
  __device__ int slot() const { return 0; }
  __device__ int teams_per_block() const { return 1; }
  template <class V, class Op>
  __device__ V reduce(V value, Op op) const {
    __shared__ V warp_results[kMaxBlockThreads / kWarpSize];
    value = butterfly_reduce(value, op, kWarpSize);
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
    if (static_cast<int>(threadIdx.x) % kWarpSize == 0) warp_results[warp] = value;
    __syncthreads();
    V total = warp_results[0];
    for (int w = 1; w < static_cast<int>(blockDim.x) / kWarpSize; ++w) {
      total = op(total, warp_results[w]);
    }
    __syncthreads();  // the next reduction may reuse warp_results
    return total;
  }
};

// blockDim.x neighbouring rows per block (threadIdx.x picks the row, so a warp
// reads neighbouring rows' elements together) and blockDim.y threads (a power
// of two) along each row. For axes whose stride is not 1.
struct ColumnTeams {
  __device__ int width() const { return static_cast<int>(blockDim.y); }
  __device__ int member() const { return static_cast<int>(threadIdx.y); }
  __device__ int slot() const { return static_cast<int>(threadIdx.x); }
  __device__ int teams_per_block() const { return static_cast<int>(blockDim.x); }
  template <class V, class Op>
  __device__ V reduce(V value, Op op) const {
    __shared__ V cells[kColumnBlockThreads];
    const int slots = static_cast<int>(blockDim.x);
    const int cell = static_cast<int>(threadIdx.y) * slots + static_cast<int>(threadIdx.x);
    cells[cell] = value;
    __syncthreads();
    for (int half = static_cast<int>(blockDim.y) / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.y) < half) {
        cells[cell] = op(cells[cell], cells[cell + half * slots]);
      }
      __syncthreads();
    }
    const V total = cells[threadIdx.x];
    __syncthreads();  // the next reduction may reuse cells
    return total;
  }
};

// The integer type of an access of kBytes bytes: memory is moved as these
// (one 16-byte instruction for a uint4) and the elements are bit-copied out.
template <int kBytes>
struct AccessWord;
template <>
struct AccessWord<2> {
  using type = uint16_t;
};
template <>
struct AccessWord<4> {
  using type = uint32_t;
};
template <>
struct AccessWord<8> {
  using type = uint2;
};
template <>
struct AccessWord<16> {
  using type = uint4;
};

// Stores one access word as a single instruction. A plain `*target = word` is
// split into 4-byte stores when nvcc cannot prove that loads between them touch
// other memory (out may alias in), which costs bandwidth; the write-back store
// intrinsic takes the word whole and caches like `=`. The metax build does not
// rely on MACA having that intrinsic (OPRT_LACKS_STWB_INTRINSIC): it assigns.
template <class Word>
__device__ inline void store_word(Word* target, Word word) {
#if defined(OPRT_LACKS_STWB_INTRINSIC)
  *target = word;
#else
  __stwb(target, word);
#endif
}

// Loads kCount consecutive elements (aligned to their total size) as floats.
template <int kCount, class T>
__device__ inline void load_floats(const T* source, float (&x)[kCount]) {
  if constexpr (kCount == 1) {
    x[0] = to_float(*source);
  } else {
    using Word = typename AccessWord<sizeof(T) * kCount>::type;
    const Word word = *reinterpret_cast<const Word*>(source);
    T lanes[kCount];
    memcpy(lanes, &word, sizeof(word));
#pragma unroll
    for (int k = 0; k < kCount; ++k) x[k] = to_float(lanes[k]);
  }
}

// Calls fn(std::integral_constant<int, lead>) for a lead of 0 .. kCount - 1.
template <int kCount, int kLead = 0, class Fn>
__device__ inline void with_constant_lead(int lead, Fn&& fn) {
  if constexpr (kLead < kCount) {
    if (lead == kLead) {
      fn(std::integral_constant<int, kLead>{});
      return;
    }
    with_constant_lead<kCount, kLead + 1>(lead, fn);
  }
}

// Loads the first `count` (1 .. kCount) of kCount consecutive elements that
// start anywhere in an aligned kCount-element vector, as floats (0 past
// count): the one or two aligned vectors holding them are read whole and the
// elements shifted out, two instructions where loading them one by one took
// up to kCount. A whole vector holding one of the elements never crosses a
// page, so the bytes around them that it also reads cannot fault.
template <int kCount, class T>
__device__ inline void load_floats_unaligned(const T* source, int count, float (&x)[kCount]) {
  using Word = typename AccessWord<sizeof(T) * kCount>::type;
  const int lead =
      static_cast<int>(reinterpret_cast<uintptr_t>(source) % sizeof(Word) / sizeof(T));
  const Word* const vectors = reinterpret_cast<const Word*>(source - lead);
  const Word low = vectors[0];
  const Word high = lead + count > kCount ? vectors[1] : Word{};
  T lanes[2 * kCount];
  memcpy(lanes, &low, sizeof(Word));
  memcpy(lanes + kCount, &high, sizeof(Word));
  with_constant_lead<kCount>(lead, [&](auto shift) {
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      x[k] = k < count ? to_float(lanes[decltype(shift)::value + k]) : 0.0f;
    }
  });
}

// kCount floats converted to T, as the access word that stores them together.
template <int kCount, class T>
__device__ inline typename AccessWord<sizeof(T) * kCount>::type pack_floats(
    const float (&x)[kCount]) {
  T lanes[kCount];
#pragma unroll
  for (int k = 0; k < kCount; ++k) lanes[k] = from_float<T>(x[k]);
  typename AccessWord<sizeof(T) * kCount>::type word;
  memcpy(&word, lanes, sizeof(word));
  return word;
}

template <int kCount, class T>
__device__ inline void store_floats(T* target, const float (&x)[kCount]) {
  if constexpr (kCount == 1) {
    *target = from_float<T>(x[0]);
  } else {
    using Word = typename AccessWord<sizeof(T) * kCount>::type;
    store_word(reinterpret_cast<Word*>(target), pack_floats<kCount, T>(x));
  }
}

// kVec 16-bit elements (f16 or bf16) as loaded, two to a 32-bit word: how the
// register path holds long 16-bit rows, in half the registers of floats (an
// array of 16-bit values would take a register per element).
template <class T, int kVec>
struct PackedElements {
  static_assert(sizeof(T) == 2 && kVec % 2 == 0, "16-bit elements, whole words");
  uint32_t words[kVec / 2];

  __device__ float operator[](int k) const {
    const uint32_t word = words[k / 2];
    return to_float(T{static_cast<uint16_t>(k % 2 == 0 ? word & 0xffffu : word >> 16)});
  }

  __device__ void fill(uint16_t bits) {
#pragma unroll
    for (int w = 0; w < kVec / 2; ++w) words[w] = bits | uint32_t{bits} << 16;
  }
};

// Whether a launch walks 16-bit elements in vectors, which a register path may
// hold as loaded (PackedElements).
template <class T, int kVec>
constexpr bool walks_half_words() {
  return sizeof(T) == 2 && kVec > 1;
}

// How a register path holds a vector of kVec elements: as floats, or
// (kPacked, 16-bit elements walked in vectors) as loaded, two to a word.
template <class T, int kVec, bool kPacked>
using HeldVector = std::conditional_t<kPacked, PackedElements<T, kVec>, float[kVec]>;

// One row as a kernel walks it. Position p of the walk holds element p - lead
// of the row, and positions outside [lead, lead + length) read as a fill value
// and are never written. With lead the row's offset (in elements) past a vector
// boundary, every position that is a multiple of kVec starts an aligned vector:
// rows of any length and start are read and written 16 bytes at a time, and
// only a row's first and last vector, when partial, go element by element. A
// walk with kVec == 1 has lead 0 and may step by any stride.
//
// kWholeVectors: the launch's rows start on vector boundaries and are whole
// vectors long (lead 0, no partial vector), which the host checks once per
// launch; the walk then skips the partial-vector checks, whose registers the
// bf16 kernels cannot spare without spilling.
//
// Index: the type of positions and lengths; kernels whose rows are known to be
// short count in 32 bits, which saves them registers.
template <class T, bool kWholeVectors = false, class Index = int64_t>
struct RowWalk {
  T* first;  // element 0 of the row
  Index stride;
  Index length;
  int lead;

  // One past the last position that holds an element.
  __device__ Index end() const { return kWholeVectors ? length : lead + length; }

  // Whether row element i exists (a partial vector's lanes ask one by one).
  __device__ bool holds(Index i) const { return i >= 0 && i < length; }

  // x = positions p .. p + kVec - 1; p is a multiple of kVec, and below end().
  template <int kVec>
  __device__ void load(Index p, float fill, float (&x)[kVec]) const {
    if constexpr (kVec == 1) {
      x[0] = to_float(first[p * stride]);
    } else if constexpr (kWholeVectors) {
      load_floats<kVec>(first + p, x);
    } else {
      const Index i = p - lead;
      if (holds(i) && holds(i + kVec - 1)) {
        load_floats<kVec>(first + i, x);
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) x[k] = holds(i + k) ? to_float(first[i + k]) : fill;
      }
    }
  }

  // Like load, but positions p .. p + kVec - 1 as the 16-bit elements themselves,
  // two to a word (fill_bits where there is no element).
  template <int kVec, class Element>
  __device__ void load_packed(Index p, uint16_t fill_bits, PackedElements<Element, kVec>& x) const {
    const Index i = p - lead;
    if (kWholeVectors || (holds(i) && holds(i + kVec - 1))) {
      using Word = typename AccessWord<sizeof(Element) * kVec>::type;
      const Word word = *reinterpret_cast<const Word*>(first + i);
      memcpy(x.words, &word, sizeof(word));
    } else {
#pragma unroll
      for (int k = 0; k < kVec; k += 2) {
        const uint32_t low = holds(i + k) ? first[i + k].bits : fill_bits;
        const uint32_t high = holds(i + k + 1) ? first[i + k + 1].bits : fill_bits;
        x.words[k / 2] = low | high << 16;
      }
    }
  }

  template <int kVec>
  __device__ void store(Index p, const float (&x)[kVec]) const {
    using Element = std::remove_const_t<T>;
    if constexpr (kVec == 1) {
      first[p * stride] = from_float<Element>(x[0]);
    } else if constexpr (kWholeVectors) {
      store_floats<kVec>(first + p, x);
    } else {
      const Index i = p - lead;
      if (holds(i) && holds(i + kVec - 1)) {
        store_floats<kVec>(first + i, x);
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if (holds(i + k)) first[i + k] = from_float<Element>(x[k]);
        }
      }
    }
  }
};

// A RowWalk for reading a row whose tensor no kernel writes meanwhile (reduce_sum,
// softmax out of place): a partial vector is read as the whole aligned vector
// holding it, the positions outside the row set to fill, one access where
// element by element took up to kVec. The aligned vector holds at least one of
// the row's elements, so it never crosses a page and cannot fault; its other
// bytes may belong to neighbouring rows, which a kernel writing in place would
// race with.
template <class T, bool kWholeVectors, class Index = int64_t>
struct MaskedRowWalk : RowWalk<const T, kWholeVectors, Index> {
  template <int kVec>
  __device__ void load(Index p, float fill, float (&x)[kVec]) const {
    if constexpr (kVec == 1 || kWholeVectors) {
      RowWalk<const T, kWholeVectors, Index>::template load<kVec>(p, fill, x);
    } else {
      const Index i = p - this->lead;
      load_floats<kVec>(this->first + i, x);
      if (!(this->holds(i) && this->holds(i + kVec - 1))) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) x[k] = this->holds(i + k) ? x[k] : fill;
      }
    }
  }
};

// Elements of T from the last kVec-aligned address at or below p to p (p is
// aligned to sizeof(T), as the host checks): the lead of a walk starting at p.
template <int kVec, class T>
__device__ inline int vector_lead(const T* p) {
  if constexpr (kVec == 1) {
    return 0;
  } else {
    return static_cast<int>(reinterpret_cast<uintptr_t>(p) / sizeof(T) % kVec);
  }
}

// A row of stride 1 with its partial first and last vectors peeled off, as a
// team of at least 2 * kVec members walks it: the body, the whole aligned
// vectors between the edges, is walked in slots without any check (a RowWalk of
// whole vectors starting at body_begin), and the edges' elements, fewer than
// kVec at each end, are held one per member, members 0 .. kVec - 1 the first
// edge's and kVec .. 2 * kVec - 1 the last edge's. Nothing outside the row is
// read, so a kernel may write it in place. Where RowWalk checks every slot of a
// row with partial vectors, this checks once per row.
template <int kVec>
struct PeeledRow {
  int body_begin;   // row element at which the body starts: the first vector boundary
  int body_length;  // elements of the body, a multiple of kVec
  int edge;         // the row element this member holds beside the body, or -1

  template <class T>
  __device__ static PeeledRow of(const T* first, int length, int member) {
    const int head = min((kVec - vector_lead<kVec>(first)) % kVec, length);
    const int body_length = (length - head) / kVec * kVec;
    const int tail = member - kVec + head + body_length;
    int edge = -1;
    if (member < head) {
      edge = member;
    } else if (member >= kVec && tail < length) {
      edge = tail;
    }
    return PeeledRow{head, body_length, edge};
  }

  // The walk of the body of a row whose element 0 is `first`: the row of an
  // input, or of the output, which sit at one lead.
  template <class Index = int64_t, class T>
  __device__ RowWalk<T, true, Index> body(T* first) const {
    return {first + body_begin, 1, body_length, 0};
  }

  // This member's edge element of the row at `first`, as a float; fill where none.
  template <class T>
  __device__ float load_edge(const T* first, float fill) const {
    return edge >= 0 ? to_float(first[edge]) : fill;
  }

  // Writes value as this member's edge element of the row at `first`, if it holds one.
  template <class T>
  __device__ void store_edge(T* first, float value) const {
    if (edge >= 0) first[edge] = from_float<T>(value);
  }
};

// How a register path reads a row's partial first and last vectors.
enum class PartialVectors {
  kElementwise,  // element by element (RowWalk)
  kMasked,       // read whole and masked (MaskedRowWalk): out of place only
  kPeeled,       // out of the slots, an element per member (PeeledRow): block teams
};

// How the block teams of softmax's and softmax_backward's register paths read
// rows with partial vectors: they peel them, which leaves every slot a whole
// vector read and written without checks. H200, 256 MiB per point: softmax bf16
// and f16 rows of 1025-7001 elements ran 1.14-1.23x faster, 8191-32761
// 1.40-1.60x; softmax_backward bf16 1025 1.17x, f32 1025-5003 1.07-1.13x. f32
// softmax rows peeled ran 0.94-1.02x while blocks were sized by the walk, and
// 16383 1.04x (H100) once sized by the body (block_slot_vectors).
template <int kVec, bool kWholeVectors>
constexpr PartialVectors block_edges() {
  return !kWholeVectors && kVec > 1 ? PartialVectors::kPeeled : PartialVectors::kElementwise;
}

// Vectors a block team's slots must hold for a row of `length` elements whose
// walk covers `walk_vectors`: a peeled row's body only, at most length / kVec
// whole vectors (sized by the walk, up to kVec - 1 positions longer, f32 rows of
// 16383 took 544 threads, one block an SM, where 512 hold them).
template <int kVec, bool kWholeVectors>
constexpr int64_t block_slot_vectors(int64_t length, int64_t walk_vectors) {
  return block_edges<kVec, kWholeVectors>() == PartialVectors::kPeeled
             ? std::max<int64_t>(1, length / kVec)
             : walk_vectors;
}

// The walks of row `row`'s input and output. They share one lead: the host
// takes vectors only when in and out rows sit at the same offset from a vector
// boundary (rows_take_vectors). The input's Index: as RowWalk's (int for
// kernels whose walks are known to end below 2^31).
template <int kVec, bool kWholeVectors, class Index = int64_t, class T>
__device__ inline RowWalk<const T, kWholeVectors, Index> input_walk(const ReductionPlan& plan,
                                                                    const T* in, RowStart start) {
  const T* first = in + start.in;
  const int lead = kWholeVectors ? 0 : vector_lead<kVec>(first);
  return {first, static_cast<Index>(plan.in_axis_stride), static_cast<Index>(plan.row_length),
          lead};
}

// The walk of row `start`'s second input (softmax_backward's y), at the first
// input's lead: rows_take_vectors allows vectors only when the two share it.
template <bool kWholeVectors, class T>
__device__ inline RowWalk<const T, kWholeVectors> second_input_walk(const ReductionPlan& plan,
                                                                    const T* second_in,
                                                                    RowStart start, int lead) {
  return {second_in + start.second_in, plan.second_in_axis_stride, plan.row_length, lead};
}

template <bool kWholeVectors, class T>
__device__ inline RowWalk<T, kWholeVectors> output_walk(const ReductionPlan& plan, T* out,
                                                        RowStart start, int lead) {
  return {out + start.out, plan.out_axis_stride, plan.row_length, lead};
}

namespace detail {
template <class Visit, class Held, size_t... kWalk>
__device__ inline void visit_held(Visit& visit, int64_t p, Held& x, int u,
                                  std::index_sequence<kWalk...>) {
  visit(p, x[kWalk][u]...);
}
}  // namespace detail

// Visits this member's share of positions [begin, end) of one or more walks of
// equal leads, in step: visit(p, x...) gets, per walk, x = positions p .. p +
// kVec - 1 (fill outside the row). Members take vectors in turn (so a team
// reads consecutive memory together) and kUnroll vectors of every walk are
// loaded before any is visited, to keep several loads in flight. The fewer
// than kUnroll left are loaded one after another, or with kTailInOneRound in
// one round too (positions past the end re-load p and are not visited), so
// they wait on memory together: a caller opts in where that was measured to
// pay. begin is a multiple of kVec and end at most the walks' end().
template <int kVec, int kUnroll, bool kTailInOneRound = false, class Visit, class... Walks>
__device__ inline void for_each_vectors(float fill, int64_t begin, int64_t end, int member,
                                        int width, Visit visit, const Walks&... walks) {
  constexpr size_t kWalks = sizeof...(Walks);
  const auto each_walk = std::make_index_sequence<kWalks>{};
  const int64_t step = static_cast<int64_t>(width) * kVec;
  int64_t p = begin + static_cast<int64_t>(member) * kVec;
  for (; p + (kUnroll - 1) * step < end; p += kUnroll * step) {
    float x[kWalks][kUnroll][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int w = 0;
      (walks.template load<kVec>(p + u * step, fill, x[w++][u]), ...);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) detail::visit_held(visit, p + u * step, x, u, each_walk);
  }
  if constexpr (kTailInOneRound && kUnroll > 1) {
    if (p >= end) return;
    float x[kWalks][kUnroll - 1][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll - 1; ++u) {
      const int64_t q = p + u * step < end ? p + u * step : p;
      int w = 0;
      (walks.template load<kVec>(q, fill, x[w++][u]), ...);
    }
#pragma unroll
    for (int u = 0; u < kUnroll - 1; ++u) {
      if (p + u * step < end) detail::visit_held(visit, p + u * step, x, u, each_walk);
    }
  } else {
    for (; p < end; p += step) {
      float x[kWalks][1][kVec];
      int w = 0;
      (walks.template load<kVec>(p, fill, x[w++][0]), ...);
      detail::visit_held(visit, p, x, 0, each_walk);
    }
  }
}

// for_each_vectors over one walk: visit(p, x).
template <int kVec, int kUnroll, bool kTailInOneRound = false, class Walk, class Visit>
__device__ inline void for_each_vector(const Walk& walk, float fill, int64_t begin, int64_t end,
                                       int member, int width, Visit visit) {
  for_each_vectors<kVec, kUnroll, kTailInOneRound>(fill, begin, end, member, width, visit, walk);
}

// ---- Host side: launch choices shared by the family's operators ----

// The smallest power of two >= value, for value in [1, 2^30].
inline int next_pow2(int64_t value) {
  int result = 1;
  while (result < value) result *= 2;
  return result;
}

// Calls fn(std::integral_constant<int, P>{}) with P the smallest power of two
// >= count, for count in [1, kMax].
template <int kMax, int kCandidate = 1, class Fn>
oprt_status_t dispatch_pow2(int count, Fn&& fn) {
  if constexpr (kCandidate >= kMax) {
    return fn(std::integral_constant<int, kMax>{});
  } else {
    if (count <= kCandidate) return fn(std::integral_constant<int, kCandidate>{});
    return dispatch_pow2<kMax, kCandidate * 2>(count, fn);
  }
}

// Blocks of a grid-stride launch over `groups` groups of rows, row chunks in y.
inline dim3 row_grid(int64_t groups, int64_t splits) {
  return dim3(static_cast<unsigned>(std::min<int64_t>(groups, INT_MAX)),
              static_cast<unsigned>(splits));
}

// Elements of each of a row's `splits` chunks, a multiple of kChunkQuantum.
inline int64_t chunk_length(int64_t row_length, int64_t splits) {
  return ceil_div(ceil_div(row_length, splits), kChunkQuantum) * kChunkQuantum;
}

// Rows per ColumnTeams block: up to `most` neighbouring rows (a power of two),
// a warp's worth unless an operator sizes its teams otherwise.
inline int column_slots(int64_t rows, int64_t most = kWarpSize) {
  return next_pow2(std::min<int64_t>(rows, most));
}

// A ColumnTeams block of `slots` rows side by side, its other threads along the axis.
inline dim3 column_block_of(int slots) {
  return dim3(static_cast<unsigned>(slots), static_cast<unsigned>(kColumnBlockThreads / slots));
}

inline dim3 column_block(int64_t rows) { return column_block_of(column_slots(rows)); }

// Elements of T in one vector access.
template <class T>
constexpr int kWide = kVectorBytes / static_cast<int>(sizeof(T));

// Vector width in elements for this launch: 16 bytes' worth when the rows may
// be walked in aligned vectors (rows_take_vectors), else 1. ins: the plan's inputs.
template <class T, class... In>
int vector_width(const ReductionPlan& plan, const void* out, const In*... ins) {
  const void* const inputs[] = {ins...};
  return rows_take_vectors(plan, out, inputs, kVectorBytes) ? kWide<T> : 1;
}

// Calls fn(std::bool_constant<W>{}, walk) for this launch's walks of
// kVec-element vectors: W whether they are whole vectors (RowWalk's
// kWholeVectors; walks of single elements always are), walk the most positions
// one covers (the row length plus the largest lead, which is 0 when every row
// starts on a vector boundary). The alignment is read once per launch.
template <int kVec, class Fn>
oprt_status_t dispatch_whole_vectors(const ReductionPlan& plan, const void* in, Fn&& fn) {
  if constexpr (kVec == 1) {
    return fn(std::true_type{}, plan.row_length);
  } else {
    if (!rows_start_on_vectors(plan, in, kVectorBytes)) {
      return fn(std::false_type{}, plan.row_length + kVec - 1);
    }
    if (plan.row_length % kVec != 0) return fn(std::false_type{}, plan.row_length);
    return fn(std::true_type{}, plan.row_length);
  }
}

// Calls fn(std::integral_constant<int, W>{}) with W = width, which is 1 or
// kWide<T>: the kernels' vector width as a template argument.
template <class T, class Fn>
oprt_status_t dispatch_vector_width(int width, Fn&& fn) {
  if (width == kWide<T>) return fn(std::integral_constant<int, kWide<T>>{});
  return fn(std::integral_constant<int, 1>{});
}

// How a kernel covers the rows of one chunk index: `blocks` blocks, each on
// `rows_per_block` rows, of which one SM holds `blocks_per_sm` at once.
struct RowBlocks {
  int64_t blocks;
  int64_t rows_per_block;
  int64_t blocks_per_sm;
};

// An SM holds 2048 threads on the GPUs of interest; a kernel whose registers
// run out first holds fewer blocks (resident_blocks_per_sm asks CUDA).
constexpr int64_t kThreadsPerSm = 2048;

// One block of kLongRowBlockThreads per row of stride 1, or ColumnTeams blocks
// of single rows otherwise, each as many per SM as their threads allow.
inline RowBlocks row_blocks(const ReductionPlan& plan) {
  if (plan.in_axis_stride == 1) {
    return RowBlocks{plan.rows, 1, kThreadsPerSm / kLongRowBlockThreads};
  }
  const int64_t slots = column_slots(plan.rows);
  return RowBlocks{ceil_div(plan.rows, slots), slots, kThreadsPerSm / kColumnBlockThreads};
}

// How many chunks prepare_split_rows cuts rows into, given the blocks that
// fill the GPU's SMs once: enough to cover them all, the last wave partial
// (kCoverOneWave), or as many as fit in them (kWithinOneWave). On the H100
// (docs/performance.md, eleventh session) reduce_sum, its wave counted in the
// blocks CUDA says an SM holds, ran up to 1.31x faster within it (leading axis
// and few long rows, no point slower beyond run-to-run spread); softmax and
// softmax_backward's online kernels lost with it (leading axis 2048 x 8192
// 0.88-0.94x), so they cover it.
enum class SplitRounding { kCoverOneWave, kWithinOneWave };

// Sets plan->row_splits and returns the workspace for one `partial_bytes`
// partial result per (row, chunk): when `shape` is too few blocks to fill the
// GPU's SMs once, rows are cut into chunks (each block still getting at least
// kMinBlockElements elements), as many as `rounding` says, whose partial
// results meet in the workspace.
inline oprt_status_t prepare_split_rows(const char* op, size_t partial_bytes, RowBlocks shape,
                                        SplitRounding rounding, ReductionPlan* plan,
                                        size_t* workspace_bytes) {
  constexpr int64_t kMinBlockElements = 8192;
  constexpr int64_t kMaxSplits = 1024;
  int multiprocessors = 0;
  OPRT_RETURN_IF_ERROR(multiprocessor_count(op, &multiprocessors));
  const int64_t wave = shape.blocks_per_sm * multiprocessors;
  const int64_t min_chunk =
      std::max<int64_t>(kChunkQuantum, kMinBlockElements / shape.rows_per_block);
  int64_t wanted_splits = 1;
  if (shape.blocks > 0) {
    wanted_splits = rounding == SplitRounding::kCoverOneWave ? ceil_div(wave, shape.blocks)
                                                             : wave / shape.blocks;
  }
  plan->row_splits = 1;
  if (wanted_splits > 1 && plan->row_length >= 2 * min_chunk) {
    plan->row_splits = std::min({wanted_splits, plan->row_length / min_chunk, kMaxSplits});
  }
  *workspace_bytes = plan->row_splits > 1
                         ? static_cast<size_t>(plan->rows * plan->row_splits) * partial_bytes
                         : 0;
  return OPRT_SUCCESS;
}

// The body of a family operator's ReductionKernels::execute on the GPU: the
// plan's dtype is dispatched here, once for the family, and launch(workspace,
// out, in, stream) gets typed pointers: the workspace as Workspace*, out as T*,
// in as an array of the plan's inputs as const T*.
template <class Workspace, class Launch>
oprt_status_t launch_typed(const ReductionPlan& plan, void* workspace, void* out,
                           const void* const* inputs, void* stream, Launch&& launch) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::array<const T*, kMaxReductionInputs> in{};
    for (int32_t i = 0; i < plan.num_inputs; ++i) in[i] = static_cast<const T*>(inputs[i]);
    return launch(static_cast<Workspace*>(workspace), static_cast<T*>(out), in,
                  static_cast<cudaStream_t>(stream));
  });
}

}  // namespace gpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_REDUCTION_REDUCTION_CUDA_CUH_
