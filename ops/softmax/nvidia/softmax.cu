// softmax on CUDA-dialect GPUs: the nvidia backend, and metax when compiled
// with -DOPRT_METAX (runtime/metax/dialect.cuh).
//
// Rows of stride 1 are walked in aligned 16-byte vectors whatever their length
// and start (RowWalk in reduction_cuda.cuh): only a row's partial first and
// last vectors go element by element, or for 16-bit rows are read whole and
// masked (warp teams, out of place) or peeled off the vectors, an element per
// member (block teams and the on-chip paths, PeeledRow), so odd lengths run about
// as fast as aligned ones.
//
// Rows of stride 1 up to kMaxRegisterRow elements are read once into registers
// by a team per row (lanes of a warp, or a whole block), which finds the
// maximum, then sum(exp(x - max)), and writes exp(x - max) / sum: one read and
// one write of the data. Short rows give each warp team several rows at once,
// so every thread has a few 16-byte loads in flight; long 16-bit rows are held
// as loaded, two elements a register, by blocks of half the threads. Longer
// rows, and axes whose stride is not 1, take the online path: a pass folding
// each chunk into a (max, sum) pair, then a pass that reads the input again and
// writes the result. Rows too few to fill the GPU are cut into chunks whose
// pairs meet in the workspace between two kernels.
//
// On Hopper and newer (sm_90+), long rows of stride 1 instead take the cluster
// path, which again reads the data once: a thread-block cluster of up to 16
// blocks holds one row on chip (each block its chunk, in registers and then
// shared memory), and the blocks exchange their (max, sum) pairs through
// distributed shared memory. Rows over kGridFirstRowBytes (and rows no
// cluster holds) take the grid path first: the co-resident blocks of the
// whole GPU hold rows_per_round rows at a time, a chunk each, and a row's
// blocks combine their pairs through the workspace. (MetaX has no clusters:
// OPRT_HAS_THREAD_BLOCK_CLUSTERS is unset there, so its long rows take the
// online path.)
//
// In-place (out == in) is safe: every thread writes only elements it has read
// itself, after reading them.
#include <cuda_runtime.h>

#include "runtime/reduction/cluster_cuda.cuh"
#include "runtime/reduction/packed_rows_cuda.cuh"
#include "runtime/reduction/reduction_cuda.cuh"

namespace oprt {
namespace gpu {
namespace {

// Floats one thread holds for the register path, fewer without vectors (each
// scalar carries its own index arithmetic); with kMaxBlockThreads threads that
// makes the longest row kept in registers. 16-bit rows of more than
// kHeldElementsFromRow elements hold their elements instead (kHoldElements:
// twice as many in the same registers, so half the threads hold a row).
constexpr int kMaxFloatsPerThread = 32;
constexpr int kMaxScalarsPerThread = 16;
constexpr int64_t kMaxRegisterRow = int64_t{kMaxBlockThreads} * kMaxFloatsPerThread;
constexpr int64_t kHeldElementsFromRow = 8192;

// Vectors of kVec elements one thread of the register path holds at most, as
// floats; held as 16-bit elements, twice as many.
constexpr int max_vectors_per_thread(int vec) {
  return vec == 1 ? kMaxScalarsPerThread : kMaxFloatsPerThread / vec;
}

constexpr int kWarpRowsBlockThreads = 128;
constexpr int kMinRowBlockThreads = 128;
// Vectors (16-byte loads) each thread of the register path keeps in flight
// where the row allows: the kernels use 32 to 64 registers, so an SM holds
// 1024 to 2048 of their threads, and on the H200 it streamed at about 4 TB/s
// with 64 KiB in flight per SM.
constexpr int kRegisterVectorsPerThread = 4;
// Vectors per thread of 16-bit rows with partial vectors on the block path:
// two of their vectors carry as many elements as four of f32, and that kernel
// fits in 32 registers (an SM runs 2048 of its threads) where four take 57
// and leave the SM at 960.
constexpr int kHalfWordVectorsPerThread = 2;
constexpr int kUnroll = 4;

// Rows a warp team holds at once on the register path: short rows, whose
// lanes hold one or two vectors each, take several rows per team so that every
// thread keeps kRegisterVectorsPerThread loads in flight, up to 32 floats per
// thread and 4 rows, 3 when rows have partial vectors (4 bf16 rows spilled 128
// bytes per thread, 3 rows 20). Without vectors (a fallback) one row.
constexpr int rows_per_team(int vectors_per_thread, int vec, bool whole_vectors) {
  if (vec == 1) return 1;
  return std::max(1, std::min({whole_vectors ? 4 : 3,
                               kRegisterVectorsPerThread / vectors_per_thread,
                               kMaxFloatsPerThread / (vectors_per_thread * vec)}));
}

// kHoldElements: each thread holds its 16-bit elements as loaded (PackedElements)
// instead of their exponentials as floats, and computes each exponential again
// when it writes it: half the registers, so a block of half the threads holds the
// row and an SM twice the blocks, one block's loads running while another
// reduces. The results are the same either way (the same float operations).
// kEdges: how a row's partial first and last vectors are read (rows with
// partial vectors; launches of whole vectors have none), see PartialVectors.
template <class Team, class T, int kVec, int kPerThread, int kRows, bool kWholeVectors,
          bool kHoldElements, PartialVectors kEdges>
__global__ void __launch_bounds__(kMaxBlockThreads)
    softmax_rows_in_registers(ReductionPlan plan, Team team, int64_t groups, T* out, const T* in) {
  // Positions count in 32 bits (the rows this path holds are short and read at
  // stride 1), and so do the output's where it is written in vectors, at stride
  // 1; single elements may be written at any stride. Peeled rows walk their
  // body as whole vectors.
  constexpr bool kPeeled = kEdges == PartialVectors::kPeeled;
  constexpr bool kWholeSlots = kWholeVectors || kPeeled;
  using InputWalk =
      std::conditional_t<kEdges == PartialVectors::kMasked, MaskedRowWalk<T, kWholeVectors, int>,
                         RowWalk<const T, kWholeSlots, int>>;
  using OutputIndex = std::conditional_t<(kVec > 1), int, int64_t>;
  using Held = HeldVector<T, kVec, kHoldElements>;
  const int first = team.member() * kVec;
  const int step = team.width() * kVec;
  const int64_t rows_per_group = int64_t{team.teams_per_block()} * kRows;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    // The team's r-th row sits teams_per_block() rows after its (r-1)-th, so at
    // each r a warp's teams read neighbouring rows together.
    InputWalk rows[kRows];
    T* outs[kRows];
    Held x[kRows][kPerThread];
    PeeledRow<kVec> peeled[kRows];
    float edge[kRows];  // the element peeled[r].edge (kPeeled), -inf where none
    FloatVector<kRows> max;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = group * rows_per_group + r * team.teams_per_block() + team.slot();
      const bool active = row < plan.rows;
      const RowStart start = active ? row_start(plan.row_offsets, row) : RowStart{0, 0};
      outs[r] = out + start.out;
      max.lanes[r] = -INFINITY;
      if constexpr (kPeeled) {
        const T* row_first = in + start.in;
        peeled[r] = PeeledRow<kVec>::of(row_first, active ? static_cast<int>(plan.row_length) : 0,
                                        team.member());
        rows[r] = peeled[r].template body<int>(row_first);
        outs[r] += peeled[r].body_begin;
        edge[r] = peeled[r].load_edge(row_first, -INFINITY);
        max.lanes[r] = edge[r];
      } else {
        rows[r] = InputWalk{active ? input_walk<kVec, kWholeVectors, int>(plan, in, start)
                                   : RowWalk<const T, kWholeVectors, int>{in, 1, 0, 0}};
      }
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int p = first + j * step;
        if constexpr (kHoldElements) {
          const uint16_t negative_infinity = from_float<T>(-INFINITY).bits;
          if (p < rows[r].end()) {
            rows[r].template load_packed<kVec>(p, negative_infinity, x[r][j]);
          } else {
            x[r][j].fill(negative_infinity);
          }
        } else if (p < rows[r].end()) {
          rows[r].template load<kVec>(p, -INFINITY, x[r][j]);
        } else {
#pragma unroll
          for (int k = 0; k < kVec; ++k) x[r][j][k] = -INFINITY;
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) max.lanes[r] = fmaxf(max.lanes[r], x[r][j][k]);
      }
    }
    max = team.reduce(max, LanewiseOp<MaxOp, kRows>{});
    FloatVector<kRows> sum;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      // exp(-inf - max) is 0: a member without an edge element adds nothing.
      sum.lanes[r] = kPeeled ? softmax_exp(edge[r] - max.lanes[r]) : 0.0f;
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        if (first + j * step < rows[r].end()) {
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            const float e = softmax_exp(x[r][j][k] - max.lanes[r]);
            if constexpr (!kHoldElements) x[r][j][k] = e;
            sum.lanes[r] += e;
          }
        }
      }
    }
    sum = team.reduce(sum, LanewiseOp<AddOp, kRows>{});
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float scale = 1.0f / sum.lanes[r];
      if constexpr (kPeeled) {
        if (peeled[r].edge >= 0) {
          outs[r][peeled[r].edge - peeled[r].body_begin] =
              from_float<T>(softmax_exp(edge[r] - max.lanes[r]) * scale);
        }
      }
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int p = first + j * step;
        if (p < rows[r].end()) {
          float y[kVec];
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            y[k] = (kHoldElements ? softmax_exp(x[r][j][k] - max.lanes[r]) : x[r][j][k]) * scale;
          }
          const RowWalk<T, kWholeSlots, OutputIndex> out_walk{
              outs[r], static_cast<OutputIndex>(plan.out_axis_stride), rows[r].length,
              rows[r].lead};
          out_walk.template store<kVec>(p, y);
        }
      }
    }
  }
}

// Rows at one uniform stride (contiguous or padded: row_offsets.ndim <= 1) of
// at most two vectors per lane of a warp: the register path's commonest
// launches, with each row's address one multiplication, positions in 32 bits
// and the team's shape known at compile time. kLanes lanes per row, each
// holding kPerLane vectors of each of 2 / kPerLane rows (32 bytes in flight a
// thread). The kernel fits in 40 registers, so an SM holds 1536 of its
// threads; the general kernel's per-row walk state takes 46 to 64 registers
// (1024 threads per SM). On the H200 (sweep, 256 MiB) bf16 rows of 32 to 256
// went from 2.8-3.0 TB/s to 4.0-4.1 (97-100 % of copy), 500 from 2.4 to 3.3;
// at 32 registers (2048 threads, but spilling) whole rows ran 3-7 % slower.
constexpr int kShortRowBlockThreads = 256;
constexpr int kShortRowThreadsPerSm = 1536;
constexpr int kShortRowVectorsPerLane = 2;

struct UniformRows {
  int64_t rows;
  int length;
  int64_t in_stride;  // elements from one row's start to the next
  int64_t out_stride;
};

template <class T, int kVec, int kLanes, int kPerLane, bool kWholeVectors>
__global__ void __launch_bounds__(kShortRowBlockThreads,
                                  kShortRowThreadsPerSm / kShortRowBlockThreads)
    softmax_short_rows(UniformRows rows, int64_t groups, T* out, const T* in) {
  constexpr int kRows = kShortRowVectorsPerLane / kPerLane;
  constexpr int kTeams = kShortRowBlockThreads / kLanes;
  const int member = static_cast<int>(threadIdx.x) % kLanes;
  const int slot = static_cast<int>(threadIdx.x) / kLanes;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    // A warp's teams read neighbouring rows together at each r.
    const int64_t first_row = group * (kTeams * kRows) + slot;
    RowWalk<const T, kWholeVectors, int> walks[kRows];
    float x[kRows][kPerLane][kVec];
    FloatVector<kRows> max;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = first_row + r * kTeams;
      const T* first = in + (row < rows.rows ? row : 0) * rows.in_stride;
      walks[r] = {first, 1, row < rows.rows ? rows.length : 0,
                  kWholeVectors ? 0 : vector_lead<kVec>(first)};
      max.lanes[r] = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int p = (member + j * kLanes) * kVec;
        if (p < walks[r].end()) {
          walks[r].template load<kVec>(p, -INFINITY, x[r][j]);
        } else {
#pragma unroll
          for (int k = 0; k < kVec; ++k) x[r][j][k] = -INFINITY;
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) max.lanes[r] = fmaxf(max.lanes[r], x[r][j][k]);
      }
    }
    max = butterfly_reduce(max, LanewiseOp<MaxOp, kRows>{}, kLanes);
    FloatVector<kRows> sum;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      sum.lanes[r] = 0.0f;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          x[r][j][k] = softmax_exp(x[r][j][k] - max.lanes[r]);
          sum.lanes[r] += x[r][j][k];
        }
      }
    }
    sum = butterfly_reduce(sum, LanewiseOp<AddOp, kRows>{}, kLanes);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float scale = 1.0f / sum.lanes[r];
      const RowWalk<T, kWholeVectors, int> out_walk{
          out + (first_row + r * kTeams) * rows.out_stride, 1, walks[r].length, walks[r].lead};
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int p = (member + j * kLanes) * kVec;
        if (p < walks[r].end()) {
#pragma unroll
          for (int k = 0; k < kVec; ++k) x[r][j][k] *= scale;
          out_walk.template store<kVec>(p, x[r][j]);
        }
      }
    }
  }
}

// Rows with partial vectors packed back to back in in and out, up to
// kMaxPackedRowBytes a row (runtime/reduction/packed_rows_cuda.cuh): after a
// block stages a span, teams of kLanes lanes normalise its rows, each lane
// reading its elements of a row from the tile into registers once and writing
// them back, and the block stores the span. Longer f32 rows run as fast in
// register walks (measured on the H200: 777 and 1023 at 95 % of copy either way).
constexpr int kPackedBlocksPerSm = 6;
constexpr int64_t kMaxPackedRowBytes = 2048;

// kPerLane: a row's elements each lane holds in registers (the row is read
// from the tile once); more of them need more registers, so fewer blocks.
template <class T, int kVec, int kLanes, int kPerLane>
__global__ void __launch_bounds__(kPackedBlockThreads, kPerLane > 8 ? 4 : kPackedBlocksPerSm)
    softmax_packed_rows(PackedSpans spans, T* out, const T* in) {
  constexpr int kTeams = kPackedBlockThreads / kLanes;
  __shared__ alignas(kVectorBytes) T tile[kPackedTileBytes / sizeof(T)];
  const int member = static_cast<int>(threadIdx.x) % kLanes;
  const int slot = static_cast<int>(threadIdx.x) / kLanes;
  const int length = spans.length;
  for (int64_t span = blockIdx.x; span < spans.count; span += gridDim.x) {
    const int span_rows = spans.rows_in(span);
    const int lead = spans.stage<kVec>(tile, in, span);
    __syncthreads();
    // Every team takes the same number of turns, so the butterflies' shuffles
    // see whole warps; a team past the span's last row walks an empty row.
    for (int turn = 0; turn < span_rows; turn += kTeams) {
      const int r = turn + slot;
      const int row_end = r < span_rows ? length : 0;
      T* row = tile + lead + r * length;
      float values[kPerLane];
      float max = -INFINITY;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        const int i = member + k * kLanes;
        values[k] = i < row_end ? to_float(row[i]) : -INFINITY;
        max = fmaxf(max, values[k]);
      }
      max = butterfly_reduce(max, MaxOp{}, kLanes);
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        values[k] = softmax_exp(values[k] - max);
        sum += values[k];
      }
      sum = butterfly_reduce(sum, AddOp{}, kLanes);
      const float scale = 1.0f / sum;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        const int i = member + k * kLanes;
        if (i < row_end) row[i] = from_float<T>(values[k] * scale);
      }
    }
    __syncthreads();
    copy_span<kVec>(out + spans.first_row(span) * length, tile, int64_t{span_rows} * length, lead,
                    false);
    __syncthreads();  // the next span may overwrite the tile only once it is stored
  }
}

enum class OnlinePass : int {
  kStatsAndNormalize,  // whole rows: fold, then normalise, in one kernel
  kStats,              // split rows, first kernel: each chunk's pair to the workspace
  kNormalize,          // split rows, second kernel: combine the row's pairs, normalise the chunk
};

// chunk is in walk positions (RowWalk): chunk blockIdx.y covers positions
// [blockIdx.y * chunk, (blockIdx.y + 1) * chunk) of its row.
template <class Team, class T, int kVec, bool kWholeVectors>
__global__ void __launch_bounds__(kMaxBlockThreads)
    softmax_rows_online(ReductionPlan plan, Team team, int64_t groups, int64_t chunk,
                        OnlinePass pass, MaxSum* partials, T* out, const T* in) {
  const int64_t splits = gridDim.y;
  const int64_t begin = blockIdx.y * chunk;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = group * team.teams_per_block() + team.slot();
    const bool active = row < plan.rows;
    const RowStart start = active ? row_start(plan.row_offsets, row) : RowStart{0, 0};
    const auto walk = input_walk<kVec, kWholeVectors>(plan, in, start);
    const int64_t end = min(walk.end(), begin + chunk);
    MaxSum stats = MaxSumOp::identity();
    if (pass == OnlinePass::kNormalize) {
      // The team combines the row's pairs together: one thread walking all
      // of them waited on a workspace load per chunk (one row of 2^22 f32,
      // 528 chunks, took 147 us against torch's 28).
      for (int64_t split = team.member(); active && split < splits; split += team.width()) {
        stats = MaxSumOp{}(stats, partials[row * splits + split]);
      }
      stats = team.reduce(stats, MaxSumOp{});
    } else {
      const auto fold = [&](int64_t, const float(&x)[kVec]) { stats = absorb(stats, x); };
      if (active) {
        for_each_vector<kVec, kUnroll>(walk, -INFINITY, begin, end, team.member(), team.width(),
                                       fold);
      }
      stats = team.reduce(stats, MaxSumOp{});
      if (pass == OnlinePass::kStats) {
        if (active && team.member() == 0) partials[row * splits + blockIdx.y] = stats;
        continue;
      }
    }
    if (!active) continue;
    const auto out_walk = output_walk<kWholeVectors>(plan, out, start, walk.lead);
    const float scale = 1.0f / stats.sum;
    const auto normalize = [&](int64_t p, const float(&x)[kVec]) {
      float y[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) y[k] = softmax_exp(x[k] - stats.max) * scale;
      out_walk.template store<kVec>(p, y);
    };
    for_each_vector<kVec, kUnroll>(walk, -INFINITY, begin, end, team.member(), team.width(),
                                   normalize);
  }
}

#if OPRT_HAS_THREAD_BLOCK_CLUSTERS
// Threads of a cluster-path block, and the elements each holds in registers;
// the rest of its chunk (the tail) goes to shared memory. Two such blocks fit
// on one SM when their tails are short enough.
constexpr int kClusterBlockThreads = 512;
constexpr int kClusterRegisterFloats = 16;
constexpr int64_t kClusterRegisterElements = int64_t{kClusterBlockThreads} * kClusterRegisterFloats;
// chunk is in positions of the row's walk (OnChipRow: whole vectors, a peeled
// row's body). Each member reads back only the tail vectors it staged itself
// (for_each_vector visits the same positions for the same member), so the tail
// needs no barrier.
template <class T, int kVec, bool kWholeVectors>
__global__ void __launch_bounds__(kClusterBlockThreads, 2)
    softmax_rows_in_cluster(ReductionPlan plan, int64_t chunk, T* out, const T* in) {
#if __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int kRegisterVectors = kClusterRegisterFloats / kVec;
  extern __shared__ uint4 chunk_tail_words[];
  T* const chunk_tail = reinterpret_cast<T*>(chunk_tail_words);
  __shared__ MaxSum block_stats;
  const BlockTeam team;
  const unsigned rank = cg::this_cluster().block_rank();
  const int64_t begin = static_cast<int64_t>(rank) * chunk;
  const int first = team.member() * kVec;
  const int step = team.width() * kVec;
  for (int64_t row = blockIdx.y; row < plan.rows; row += gridDim.y) {
    const RowStart start = row_start(plan.row_offsets, row);
    const auto held_row = OnChipRow<kVec, kWholeVectors>::of(in + start.in, plan.row_length,
                                                             team.member(), rank == 0);
    const auto walk = held_row.walk(in + start.in, plan.in_axis_stride, plan.row_length);
    const auto out_walk = held_row.walk(out + start.out, plan.out_axis_stride, plan.row_length);
    const float edge = held_row.load_edge(in + start.in, -INFINITY);
    const int64_t end = min(walk.end(), begin + chunk);
    const int64_t tail_begin = min(end, begin + kClusterRegisterElements);
    const RowWalk<const T, true> tail{chunk_tail, 1, end - tail_begin, 0};
    // Read the chunk once: the tail is copied to shared memory while the head
    // is loaded into registers.
    stage_vectors<T, kVec>(chunk_tail, walk, tail_begin, end, team.member(), team.width());
    float x[kRegisterVectors][kVec];
    float max = edge;
#pragma unroll
    for (int j = 0; j < kRegisterVectors; ++j) {
      const int64_t p = begin + first + j * step;
      if (p < tail_begin) {
        walk.template load<kVec>(p, -INFINITY, x[j]);
#pragma unroll
        for (int k = 0; k < kVec; ++k) max = fmaxf(max, x[j][k]);
      }
    }
    wait_async_copies();
    for_each_vector<kVec, kUnroll>(tail, -INFINITY, 0, tail.length, team.member(), team.width(),
                                   [&](int64_t, const float(&v)[kVec]) {
#pragma unroll
                                     for (int k = 0; k < kVec; ++k) max = fmaxf(max, v[k]);
                                   });
    // This block's (max, sum) pair; a chunk of only -inf gives the empty pair.
    max = team.reduce(max, MaxOp{});
    const float shift = max == -INFINITY ? 0.0f : max;
    float sum = softmax_exp(edge - shift);
#pragma unroll
    for (int j = 0; j < kRegisterVectors; ++j) {
      if (begin + first + j * step < tail_begin) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) sum += softmax_exp(x[j][k] - shift);
      }
    }
    for_each_vector<kVec, kUnroll>(tail, -INFINITY, 0, tail.length, team.member(), team.width(),
                                   [&](int64_t, const float(&v)[kVec]) {
#pragma unroll
                                     for (int k = 0; k < kVec; ++k) {
                                       sum += softmax_exp(v[k] - shift);
                                     }
                                   });
    sum = team.reduce(sum, AddOp{});
    const MaxSum stats = cluster_reduce(MaxSum{max, sum}, MaxSumOp{}, &block_stats);
    const float scale = 1.0f / stats.sum;
    held_row.store_edge(out + start.out, softmax_exp(edge - stats.max) * scale);
#pragma unroll
    for (int j = 0; j < kRegisterVectors; ++j) {
      const int64_t p = begin + first + j * step;
      if (p < tail_begin) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) x[j][k] = softmax_exp(x[j][k] - stats.max) * scale;
        out_walk.template store<kVec>(p, x[j]);
      }
    }
    for_each_vector<kVec, kUnroll>(tail, -INFINITY, 0, tail.length, team.member(), team.width(),
                                   [&](int64_t i, const float(&v)[kVec]) {
                                     float y[kVec];
#pragma unroll
                                     for (int k = 0; k < kVec; ++k) {
                                       y[k] = softmax_exp(v[k] - stats.max) * scale;
                                     }
                                     out_walk.template store<kVec>(tail_begin + i, y);
                                   });
  }
#endif
}

// The grid path (runtime/reduction/cluster_cuda.cuh), for long rows
// (prepare_on_chip): the blocks of the whole GPU, rows_per_round rows at a time, each block
// staging its chunk in shared memory, folding it into a (max, sum) pair and
// combining the pairs with the row's other blocks through the workspace. Rows
// walk as OnChipRow: the blocks of each row's first chunk hold its edges.
template <class T, int kVec, bool kWholeVectors>
__global__ void __launch_bounds__(kGridBlockThreads, kGridBlocksPerSm)
    softmax_rows_across_grid(ReductionPlan plan, int64_t chunk, RowMeeting<MaxSum> meeting, T* out,
                             const T* in) {
#if __CUDA_ARCH__ >= 900
  extern __shared__ uint4 staged_words[];
  const BlockTeam team;
  const int64_t begin = blockIdx.x % meeting.splits * chunk;
  struct Walk {
    OnChipRow<kVec, kWholeVectors> row;
    RowStart start;
    RowWalk<const T, true> in;
    int64_t end;
  };
  const auto walk_of = [&](int64_t row) {
    const RowStart start = row_start(plan.row_offsets, row);
    const auto held_row = OnChipRow<kVec, kWholeVectors>::of(in + start.in, plan.row_length,
                                                             team.member(), begin == 0);
    const auto walk = held_row.walk(in + start.in, plan.in_axis_stride, plan.row_length);
    return Walk{held_row, start, walk, min(walk.end(), begin + chunk)};
  };
  // The staged chunk, in whole vectors.
  T* const staged = reinterpret_cast<T*>(staged_words);
  const auto held_of = [&](const Walk& walk) {
    const int64_t length = begin < walk.end ? walk.end - begin : 0;
    return RowWalk<const T, true>{staged, 1, length, 0};
  };
  for_each_grid_row<MaxSum, MaxSumOp>(
      plan.rows, plan.rows_per_round, meeting,
      [&](int64_t row) {
        const Walk walk = walk_of(row);
        stage_vectors<T, kVec>(staged, walk.in, begin, walk.end, team.member(), team.width());
      },
      [&](int64_t row) {
        const Walk walk = walk_of(row);
        const auto held = held_of(walk);
        const float edge[1] = {walk.row.load_edge(in + walk.start.in, -INFINITY)};
        MaxSum state = absorb(MaxSumOp::identity(), edge);
        for_each_vector<kVec, kUnroll>(
            held, -INFINITY, 0, held.length, team.member(), team.width(),
            [&](int64_t, const float(&v)[kVec]) { state = absorb(state, v); });
        return team.reduce(state, MaxSumOp{});
      },
      [&](int64_t row, MaxSum stats) {
        const Walk walk = walk_of(row);
        const auto held = held_of(walk);
        const float scale = 1.0f / stats.sum;
        T* const row_out = out + walk.start.out;
        const float edge = walk.row.load_edge(in + walk.start.in, -INFINITY);
        walk.row.store_edge(row_out, softmax_exp(edge - stats.max) * scale);
        const auto out_walk = walk.row.walk(row_out, plan.out_axis_stride, plan.row_length);
        for_each_vector<kVec, kUnroll>(
            held, -INFINITY, 0, held.length, team.member(), team.width(),
            [&](int64_t i, const float(&v)[kVec]) {
              float y[kVec];
#pragma unroll
              for (int k = 0; k < kVec; ++k) y[k] = softmax_exp(v[k] - stats.max) * scale;
              out_walk.template store<kVec>(begin + i, y);
            });
      });
#endif
}
#endif  // OPRT_HAS_THREAD_BLOCK_CLUSTERS

// Whether rows may take the register path, which needs no workspace. Without
// vectors the register path holds shorter rows; longer ones then take the
// online path unsplit, which needs no workspace either.
bool may_use_registers(const ReductionPlan& plan) {
  return plan.in_axis_stride == 1 && plan.row_length <= kMaxRegisterRow;
}

// Whether a walk of `walk` positions fits the register path's threads.
template <class T, int kVec>
bool fits_in_registers(int64_t walk) {
  const int per_thread = max_vectors_per_thread(kVec) * (walks_half_words<T, kVec>() ? 2 : 1);
  return walk <= int64_t{kMaxBlockThreads} * per_thread * kVec;
}

template <class T, int kVec, bool kWholeVectors>
oprt_status_t launch_short_rows(const ReductionPlan& plan, int64_t vectors, T* out, const T* in,
                                cudaStream_t stream) {
  const RowOffsets& offsets = plan.row_offsets;
  const UniformRows rows{plan.rows, static_cast<int>(plan.row_length), offsets.ndim == 1 ? offsets.in_strides[0] : 0,
                         offsets.ndim == 1 ? offsets.out_strides[0] : 0};
  const auto launch = [&](auto lanes, auto per_lane) {
    constexpr int kLanes = decltype(lanes)::value;
    constexpr int kPerLane = decltype(per_lane)::value;
    constexpr int kRowsPerBlock =
        kShortRowBlockThreads / kLanes * (kShortRowVectorsPerLane / kPerLane);
    const int64_t groups = ceil_div(plan.rows, kRowsPerBlock);
    softmax_short_rows<T, kVec, kLanes, kPerLane, kWholeVectors>
        <<<row_grid(groups, 1), kShortRowBlockThreads, 0, stream>>>(rows, groups, out, in);
    return OPRT_SUCCESS;
  };
  if (vectors > kWarpSize) {
    return launch(std::integral_constant<int, kWarpSize>{},
                  std::integral_constant<int, kShortRowVectorsPerLane>{});
  }
  return dispatch_pow2<kWarpSize>(static_cast<int>(vectors), [&](auto lanes) {
    return launch(lanes, std::integral_constant<int, 1>{});
  });
}

// Whether rows take softmax_packed_rows: rows with partial vectors, back to
// back in in and out (a row's stride is its length, which leaves in and out
// at one lead, as vectors need).
template <class T, bool kWholeVectors>
bool rows_are_packed(const ReductionPlan& plan) {
  return !kWholeVectors && plan.row_length * int64_t{sizeof(T)} <= kMaxPackedRowBytes &&
         input_rows_are_packed(plan) &&
         (plan.row_offsets.ndim == 0 || plan.row_offsets.out_strides[0] == plan.row_length);
}

// Lanes per row: about 8 elements a lane, at most a warp; rows over 256
// elements take a warp with the fewest of 12, 16, 24 or 32 elements a lane
// that hold them (slots past the row's end cost as much as elements).
template <class T, int kVec>
oprt_status_t launch_packed_rows(const ReductionPlan& plan, T* out, const T* in,
                                 cudaStream_t stream) {
  const PackedSpans spans = packed_spans<T, kVec>(plan);
  const int length = spans.length;
  auto launch = [&](auto lanes, auto per_lane) {
    softmax_packed_rows<T, kVec, decltype(lanes)::value, decltype(per_lane)::value>
        <<<row_grid(spans.count, 1), kPackedBlockThreads, 0, stream>>>(spans, out, in);
    return OPRT_SUCCESS;
  };
  using Warp = std::integral_constant<int, kWarpSize>;
  if (length > 8 * kWarpSize) {
    const int per_lane = static_cast<int>(ceil_div(length, kWarpSize));
    if (per_lane <= 12) return launch(Warp{}, std::integral_constant<int, 12>{});
    if (per_lane <= 16) return launch(Warp{}, std::integral_constant<int, 16>{});
    if (per_lane <= 24) return launch(Warp{}, std::integral_constant<int, 24>{});
    return launch(Warp{}, std::integral_constant<int, 32>{});
  }
  return dispatch_pow2<kWarpSize>(static_cast<int>(ceil_div(length, 8)), [&](auto lanes) {
    return launch(lanes, std::integral_constant<int, 8>{});
  });
}

template <class T, int kVec, bool kWholeVectors, PartialVectors kWarpEdges>
oprt_status_t launch_register_rows(const ReductionPlan& plan, int64_t walk, T* out, const T* in,
                                   cudaStream_t stream) {
  constexpr int kMaxPerThread = max_vectors_per_thread(kVec);
  constexpr PartialVectors kBlockEdges = block_edges<kVec, kWholeVectors>();
  const int64_t vectors = ceil_div(walk, kVec);
  if constexpr (kVec > 1) {
    if (rows_are_packed<T, kWholeVectors>(plan)) return launch_packed_rows<T, kVec>(plan, out, in, stream);
    if (plan.row_offsets.ndim <= 1 && vectors <= int64_t{kWarpSize} * kShortRowVectorsPerLane) {
      return launch_short_rows<T, kVec, kWholeVectors>(plan, vectors, out, in, stream);
    }
  }
  if (vectors <= int64_t{kWarpSize} * kMaxPerThread) {
    // Lanes first, then vectors per lane: short rows keep whole warps busy.
    const int lanes = next_pow2(std::min<int64_t>(vectors, kWarpSize));
    const int per_thread = static_cast<int>(ceil_div(vectors, lanes));
    return dispatch_pow2<kMaxPerThread>(per_thread, [&](auto per) {
      constexpr int kRows = rows_per_team(decltype(per)::value, kVec, kWholeVectors);
      const int64_t groups = ceil_div(plan.rows, kWarpRowsBlockThreads / lanes * kRows);
      softmax_rows_in_registers<WarpTeams, T, kVec, decltype(per)::value, kRows, kWholeVectors,
                                false, kWarpEdges>
          <<<row_grid(groups, 1), kWarpRowsBlockThreads, 0, stream>>>(plan, WarpTeams{lanes},
                                                                       groups, out, in);
      return OPRT_SUCCESS;
    });
  }
  const int64_t slot_vectors = block_slot_vectors<kVec, kWholeVectors>(plan.row_length, vectors);
  if constexpr (walks_half_words<T, kVec>()) {
    if (walk > kHeldElementsFromRow) {
      // Twice the vectors per thread that floats would take, and just enough whole
      // warps to hold the row (at least kHeldElementsFromRow / 64 = 128).
      constexpr int kPerThread = 2 * kMaxPerThread;
      const int64_t threads = ceil_div(ceil_div(slot_vectors, kPerThread), kWarpSize) * kWarpSize;
      softmax_rows_in_registers<BlockTeam, T, kVec, kPerThread, 1, kWholeVectors, true,
                                kBlockEdges>
          <<<row_grid(plan.rows, 1), static_cast<unsigned>(threads), 0, stream>>>(
              plan, BlockTeam{}, plan.rows, out, in);
      return OPRT_SUCCESS;
    }
  }
  // The most vectors per thread (loads in flight) that still leaves the block
  // kMinRowBlockThreads threads, but at least kRegisterVectorsPerThread (16-bit
  // rows with partial vectors: kHalfWordVectorsPerThread), and then just enough
  // whole warps to hold the row: a power-of-two block would leave up to half
  // its threads idle. Measured, 256 MiB per point: partial 16-bit rows of 1500
  // to 7001 elements ran 1.09-1.16x faster with two vectors a thread than with
  // four on the H100, while whole ones of 3000 to 4000 ran 1.04-1.05x faster
  // with four on the H200.
  int per_thread = walks_half_words<T, kVec>() && !kWholeVectors ? kHalfWordVectorsPerThread
                                                                   : kMaxPerThread;
  while (per_thread > kRegisterVectorsPerThread &&
         ceil_div(slot_vectors, per_thread) < kMinRowBlockThreads) {
    per_thread /= 2;
  }
  const int64_t threads = std::min<int64_t>(
      ceil_div(ceil_div(slot_vectors, per_thread), kWarpSize) * kWarpSize, kMaxBlockThreads);
  per_thread = static_cast<int>(ceil_div(slot_vectors, threads));
  return dispatch_pow2<kMaxPerThread>(per_thread, [&](auto per) {
    softmax_rows_in_registers<BlockTeam, T, kVec, decltype(per)::value, 1, kWholeVectors, false,
                              kBlockEdges>
        <<<row_grid(plan.rows, 1), static_cast<unsigned>(threads), 0, stream>>>(
            plan, BlockTeam{}, plan.rows, out, in);
    return OPRT_SUCCESS;
  });
}

// Warp teams on 16-bit rows with partial vectors read their first and last
// vectors whole and masked unless the call is in place: the bytes outside a row
// then belong to rows that other blocks write. Measured while block teams read
// them so too (H100, 256 MiB per point): bf16 rows of 1025-7001 elements ran
// 1.02-1.10x faster than element by element, 8191-32761 1.01-1.04x; rows on
// warps were not measured apart. f32 rows, whose partial vectors hold at most
// three elements, ran masked up to 1.56x slower (16383: 96 -> 62 %) and are read
// element by element there. Block teams peel the edges (block_edges).
template <class T, int kVec, bool kWholeVectors>
oprt_status_t launch_in_registers(const ReductionPlan& plan, int64_t walk, T* out, const T* in,
                                  cudaStream_t stream) {
  if constexpr (!kWholeVectors && walks_half_words<T, kVec>()) {
    if (static_cast<const void*>(out) != static_cast<const void*>(in)) {
      return launch_register_rows<T, kVec, kWholeVectors, PartialVectors::kMasked>(plan, walk, out,
                                                                                  in, stream);
    }
  }
  return launch_register_rows<T, kVec, kWholeVectors, PartialVectors::kElementwise>(plan, walk,
                                                                                   out, in, stream);
}

template <class Team, class T, int kVec, bool kWholeVectors>
void launch_online(const ReductionPlan& plan, int64_t walk, Team team, dim3 block, int64_t groups,
                   MaxSum* partials, T* out, const T* in, cudaStream_t stream) {
  const int64_t chunk = chunk_length(walk, plan.row_splits);
  const dim3 grid = row_grid(groups, plan.row_splits);
  if (plan.row_splits == 1) {
    softmax_rows_online<Team, T, kVec, kWholeVectors><<<grid, block, 0, stream>>>(
        plan, team, groups, chunk, OnlinePass::kStatsAndNormalize, partials, out, in);
    return;
  }
  for (OnlinePass pass : {OnlinePass::kStats, OnlinePass::kNormalize}) {
    softmax_rows_online<Team, T, kVec, kWholeVectors>
        <<<grid, block, 0, stream>>>(plan, team, groups, chunk, pass, partials, out, in);
  }
}

#if OPRT_HAS_THREAD_BLOCK_CLUSTERS
template <class T>
ClusterLaunch cluster_launch(const ReductionPlan& plan, int64_t chunk, cudaStream_t stream) {
  const int64_t tail = std::max<int64_t>(0, chunk - kClusterRegisterElements);
  return ClusterLaunch(plan, kClusterBlockThreads, static_cast<size_t>(tail) * sizeof(T), stream);
}

// Chooses the cluster path for plan when a cluster of at most
// kMaxClusterBlocks blocks holds a row (choose_cluster); hold_rows_on_chip
// calls it on devices with clusters only.
template <class T>
oprt_status_t prepare_cluster(ReductionPlan* plan) {
  size_t dynamic_limit = 0;
  OPRT_RETURN_IF_ERROR(allow_large_clusters(
      "softmax", &dynamic_limit, softmax_rows_in_cluster<T, 1, true>,
      softmax_rows_in_cluster<T, kWide<T>, true>, softmax_rows_in_cluster<T, kWide<T>, false>));
  // Chunks are sized as if a block held half its register share: on the H100,
  // sizing by the whole share gave f32 rows of 65536 and 131072 clusters of
  // half the blocks, which ran 0.95x and 0.89x.
  const int64_t capacity =
      kClusterRegisterElements / 2 + static_cast<int64_t>(dynamic_limit / sizeof(T));
  return choose_cluster<T>(
      "softmax", softmax_rows_in_cluster<T, kWide<T>, false>,
      [&](int64_t chunk) { return chunk <= capacity; },
      [&](const ReductionPlan& candidate, int64_t chunk) {
        return cluster_launch<T>(candidate, chunk, nullptr);
      },
      plan);
}

// Chooses the grid path for rows of stride 1 (choose_grid_rows).
template <class T>
oprt_status_t prepare_grid(ReductionPlan* plan) {
  return choose_grid_rows<T>("softmax", 1, plan, softmax_rows_across_grid<T, kWide<T>, false>,
                             softmax_rows_across_grid<T, kWide<T>, true>,
                             softmax_rows_across_grid<T, 1, true>);
}

// Rows of more than this try the grid path before the cluster path. H200, the
// same rows on each path, us: f32 rows of 1048576 (4 MiB) 218 on the grid path
// against 246-256 in clusters (64 rows), 8 rows 46 against 53, 524288: 208
// against 213-217; rows of 1 MiB ran alike (262144 f32: 186 against 189),
// shorter ones better in clusters (131072 bf16, 512 rows: 112 against 104;
// 131072 f32, 64 rows: 44 against 39).
constexpr size_t kGridFirstRowBytes = 512 * 1024;

template <class T>
oprt_status_t prepare_on_chip(ReductionPlan* plan) {
  return hold_rows_on_chip("softmax", static_cast<size_t>(plan->row_length) * sizeof(T),
                           kGridFirstRowBytes, prepare_grid<T>, prepare_cluster<T>, plan);
}

template <class T, int kVec, bool kWholeVectors>
oprt_status_t launch_across_grid(const ReductionPlan& plan, void* workspace, T* out, const T* in,
                                 cudaStream_t stream) {
  const int64_t chunk = cluster_chunk<T>(plan, plan.row_splits);
  const auto meeting = row_meeting<MaxSum>(plan, workspace);
  return launch_grid_rows("softmax", plan, meeting, static_cast<size_t>(chunk) * sizeof(T), stream,
                          softmax_rows_across_grid<T, kVec, kWholeVectors>, plan, chunk, meeting,
                          out, in);
}

template <class T, int kVec, bool kWholeVectors>
void launch_in_cluster(const ReductionPlan& plan, T* out, const T* in, cudaStream_t stream) {
  const int64_t chunk = cluster_chunk<T>(plan, plan.row_splits);
  const ClusterLaunch launch = cluster_launch<T>(plan, chunk, stream);
  cudaLaunchKernelEx(&launch.config, softmax_rows_in_cluster<T, kVec, kWholeVectors>, plan, chunk,
                     out, in);
}
#endif  // OPRT_HAS_THREAD_BLOCK_CLUSTERS

template <class T>
oprt_status_t launch(const ReductionPlan& plan, MaxSum* partials, T* out, const T* in,
                     cudaStream_t stream) {
  if (plan.in_axis_stride != 1) {
    const dim3 block = column_block(plan.rows);
    launch_online<ColumnTeams, T, 1, true>(plan, plan.row_length, ColumnTeams{}, block,
                                           ceil_div(plan.rows, block.x), partials, out, in, stream);
  } else {
    OPRT_RETURN_IF_ERROR(dispatch_vector_width<T>(vector_width<T>(plan, out, in), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      return dispatch_whole_vectors<kVec>(plan, in, [&](auto whole, int64_t walk) {
        constexpr bool kWhole = decltype(whole)::value;
#if OPRT_HAS_THREAD_BLOCK_CLUSTERS
        if (plan.splits_share_cluster) {
          launch_in_cluster<T, kVec, kWhole>(plan, out, in, stream);
          return OPRT_SUCCESS;
        }
        if (plan.rows_per_round > 0) {
          return launch_across_grid<T, kVec, kWhole>(plan, partials, out, in, stream);
        }
#endif
        if (may_use_registers(plan) && fits_in_registers<T, kVec>(walk)) {
          return launch_in_registers<T, kVec, kWhole>(plan, walk, out, in, stream);
        }
        launch_online<BlockTeam, T, kVec, kWhole>(plan, walk, BlockTeam{},
                                                  dim3(kLongRowBlockThreads), plan.rows, partials,
                                                  out, in, stream);
        return OPRT_SUCCESS;
      });
    }));
  }
  return check_launch("softmax");
}


oprt_status_t prepare(ReductionPlan* plan, size_t* workspace_bytes) {
  if (may_use_registers(*plan)) return prepare_whole_rows(plan, workspace_bytes);
#if OPRT_HAS_THREAD_BLOCK_CLUSTERS
  if (plan->in_axis_stride == 1) {
    OPRT_RETURN_IF_ERROR(dispatch_dtype(plan->dtype, [&](auto tag) {
      return prepare_on_chip<typename decltype(tag)::type>(plan);
    }));
    if (plan->splits_share_cluster) {
      *workspace_bytes = 0;
      return OPRT_SUCCESS;
    }
    if (plan->rows_per_round > 0) {
      *workspace_bytes = row_meeting_bytes<MaxSum>(*plan);
      return OPRT_SUCCESS;
    }
  }
#endif
  return prepare_split_rows("softmax", sizeof(MaxSum), row_blocks(*plan),
                            SplitRounding::kCoverOneWave, plan, workspace_bytes);
}

oprt_status_t execute(const ReductionPlan& plan, void* workspace, void* out,
                      const void* const* inputs, void* stream) {
  return launch_typed<MaxSum>(plan, workspace, out, inputs, stream,
                              [&](MaxSum* partials, auto* typed_out, auto in, cudaStream_t s) {
                                return launch(plan, partials, typed_out, in[0], s);
                              });
}

const ReductionKernels kSoftmaxGpu = {&prepare, &execute};

}  // namespace
}  // namespace gpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(softmax, OPRT_GPU_BACKEND, &oprt::gpu::kSoftmaxGpu);
