// reduce_sum on CUDA-dialect GPUs: the nvidia backend, and metax when compiled
// with -DOPRT_METAX (runtime/metax/dialect.cuh).
//
// Rows whose axis has stride 1 are read by a team per row, 16 bytes per access
// whatever the row's length and start (MaskedRowWalk: a partial first or last
// vector is read whole, the elements outside the row masked): a few lanes of a
// warp for short rows (rows of 8 whole vectors: 8 lanes on 4 rows at once,
// sum_short_rows), a whole block for long ones. Rows with partial vectors
// packed back to back, of 768 bytes to 8 KiB each, are staged a span of rows at
// a time through shared memory instead (sum_packed_rows). Other axes use ColumnTeams:
// neighbouring threads take neighbouring rows (16 bytes' worth of them per
// thread when the rows are the contiguous inner dimension) and walk the axis
// together, so a warp reads consecutive memory; a contiguous input whose column
// count no vector divides is read as fewer, longer lines that one divides (fold_lines).
// When there are too few rows to fill the GPU, each row is cut into chunks whose
// partial sums go to the workspace and a second kernel adds them in a fixed
// order, so results are deterministic.
#include <cuda_runtime.h>

#include <cstdint>
#include <numeric>

#include "runtime/reduction/packed_rows_cuda.cuh"
#include "runtime/reduction/reduction_cuda.cuh"

namespace oprt {
namespace gpu {
namespace {

// Vectors each thread of a row team aims to load; decides the team size. 16
// rather than 4 gives an 8192-float row 128 threads instead of 512, which took
// it from 2.95 to 3.88 TB/s on the H200: a block's closing reduction and its
// scheduling are paid over four times the bytes.
constexpr int64_t kVectorsPerThread = 16;
// Short rows of whole vectors, from kShortRowVectors vectors up, take at least
// a lane per kShortRowVectorsPerLane vectors, up to kShortRowLanes lanes: one
// lane walking a row of 16 vectors reads 16 rows' worth of scattered 16-byte
// pieces per warp instruction. On the H100 (256 MiB, against one lane per 16
// vectors): f32 rows of 64 1.23x, 128 1.08x, 256 1.02x; bf16 rows of 128
// 1.28x, 256 1.10x, 512 1.03x. Rows of fewer vectors, and rows with partial
// vectors, lost with more lanes (f32 x 32 0.86x, bf16 x 33 0.39x with two).
constexpr int64_t kShortRowVectors = 16;
constexpr int64_t kShortRowVectorsPerLane = 4;
constexpr int64_t kShortRowLanes = 8;
// Whole rows of exactly kShortTeamLanes vectors (f32 x 32, 16-bit x 64) are
// summed kShortTeamRows at a time by teams of that many lanes, a vector per
// lane per row (sum_short_rows). On the H100 (256 MiB): f32 x 32 1.10x,
// bf16 x 64 1.15x against a lane per row; rows of 4 vectors lost with half the
// lanes idle (bf16 x 32 0.73x), rows of 16 to 64 vectors gained nothing or
// lost (f32 x 256 0.92x).
constexpr int kShortTeamLanes = 8;
constexpr int kShortTeamRows = 4;
constexpr int kWarpRowsBlockThreads = 256;
// Vectors a thread loads per round before adding them. A block team (rows of
// over 32 lanes' worth) walking whole vectors loads twice as many: on the H100
// rows of f32 x 4096 to x 2^22 and bf16 x 16384 to x 2^22 ran 1.01-1.06x faster, where
// warp teams on shorter rows lost (f32 x 64 0.81x, x 1000 0.92x, bf16 x 1000
// 0.91x); 16-bit walks with partial vectors would spill 150 bytes a thread.
constexpr int kUnroll = 4;
constexpr int kBlockTeamUnroll = 8;

// Whether sum_rows loads a walk's last (fewer than kRounds) vectors in one
// round (for_each_vectors' kTailInOneRound). H100, 256 MiB, the same run: f32
// rows of 1000, 4000 and 32000, whose walks end a few vectors short of a
// round, 1.06x, 1.07x and 1.12x, the other f32 lengths 1.00-1.03x; bf16 lost
// (x 127 0.92x, x 1000 0.96x, x 256 and x 512 0.98x).
template <class T>
constexpr bool kTailInOneRound = sizeof(T) == 4;

// A sum_columns block is kColumnBlockThreads threads: slots of column groups
// side by side, each slot a team of kColumnBlockThreads / slots threads taking
// turns along the axis. Along axes under 8 x kColumnPositionsPerThread teams
// shrink, so that each thread still walks about that many positions, and a
// block takes more groups instead: a group's fixed work (finding its columns,
// the team's reduction, the stores) is paid over more loads. On the H100 (256
// MiB, axes of 8 to 127): bf16 x 8 2.12x, x 16 1.38x, x 24 1.14x, x 33 1.18x,
// x 48 to x 127 1.06-1.08x; f32 x 8 1.65x, x 16 1.08x; the others (f32 x 24
// to x 127, bf16 x 32 and x 64) 0.99-1.01x. Longer axes keep teams of 8: with
// 2 or 4 (128 or 64 slots) axes of 500 to 50257 ran 0.93-1.03x.
constexpr int64_t kColumnPositionsPerThread = 16;

inline int sum_columns_slots(int64_t groups, int64_t length) {
  // The largest power of two <= length / kColumnPositionsPerThread, within 1 and
  // the team a warp's worth of slots leaves.
  const int64_t team_rows =
      std::clamp<int64_t>(next_pow2(length / kColumnPositionsPerThread + 1) / 2, 1,
                          kColumnBlockThreads / kWarpSize);
  return column_slots(groups, kColumnBlockThreads / team_rows);
}

template <int kVec>
__device__ inline void add_vector(float& sum, const float (&x)[kVec]) {
#pragma unroll
  for (int k = 0; k < kVec; ++k) sum += x[k];
}

template <class Team, class T, int kVec, bool kWholeVectors>
__global__ void __launch_bounds__(kMaxBlockThreads)
    sum_rows(ReductionPlan plan, Team team, int64_t groups, int64_t chunk, float* partials, T* out,
             const T* in) {
  constexpr int kRounds =
      std::is_same_v<Team, BlockTeam> && kWholeVectors ? kBlockTeamUnroll : kUnroll;
  const int64_t splits = gridDim.y;
  const int64_t begin = blockIdx.y * chunk;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = group * team.teams_per_block() + team.slot();
    const bool active = row < plan.rows;
    const RowStart start = active ? row_start(plan.row_offsets, row) : RowStart{0, 0};
    float sum = 0.0f;
    if (active) {
      const MaskedRowWalk<T, kWholeVectors> walk{input_walk<kVec, kWholeVectors>(plan, in, start)};
      for_each_vector<kVec, kRounds, kTailInOneRound<T>>(
          walk, 0.0f, begin, min(walk.end(), begin + chunk), team.member(), team.width(),
          [&](int64_t, const float(&x)[kVec]) { add_vector(sum, x); });
    }
    sum = team.reduce(sum, AddOp{});
    if (active && team.member() == 0) {
      if (splits == 1) {
        out[start.out] = from_float<T>(sum);
      } else {
        partials[blockIdx.y * plan.rows + row] = sum;
      }
    }
  }
}

// Adds this member's vectors of each walk r (rows of equal length) into
// sum.lanes[r], the loads of all walks in flight together.
template <int kVec, class Walk, size_t... kRow>
__device__ inline void add_rows(FloatVector<sizeof...(kRow)>& sum, int64_t end, int member,
                                int width, const Walk (&walks)[sizeof...(kRow)],
                                std::index_sequence<kRow...>) {
  for_each_vectors<kVec, kUnroll>(
      0.0f, 0, end, member, width,
      [&](int64_t, const auto&... x) { (add_vector(sum.lanes[kRow], x), ...); }, walks[kRow]...);
}

// Whole rows of kShortTeamLanes vectors, kShortTeamRows at a time per team:
// row r of every team of a block is a neighbour of the next team's, so one
// load instruction of a warp reads consecutive memory. A block's teams past
// the last row re-read it rather than branch around the team reduction.
template <class T, int kVec>
__global__ void __launch_bounds__(kMaxBlockThreads)
    sum_short_rows(ReductionPlan plan, int64_t groups, T* out, const T* in) {
  const WarpTeams team{kShortTeamLanes};
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t first_row = group * kShortTeamRows * team.teams_per_block() + team.slot();
    RowWalk<const T, true> walks[kShortTeamRows];
    int64_t outs[kShortTeamRows];
#pragma unroll
    for (int r = 0; r < kShortTeamRows; ++r) {
      const RowStart start =
          row_start(plan.row_offsets, min(first_row + r * team.teams_per_block(), plan.rows - 1));
      walks[r] = input_walk<kVec, true>(plan, in, start);
      outs[r] = start.out;
    }
    FloatVector<kShortTeamRows> sum = {};
    add_rows<kVec>(sum, plan.row_length, team.member(), team.width(), walks,
                   std::make_index_sequence<kShortTeamRows>{});
    sum = team.reduce(sum, LanewiseOp<AddOp, kShortTeamRows>{});
    if (team.member() == 0) {
#pragma unroll
      for (int r = 0; r < kShortTeamRows; ++r) {
        if (first_row + r * team.teams_per_block() < plan.rows) {
          out[outs[r]] = from_float<T>(sum.lanes[r]);
        }
      }
    }
  }
}

// Each thread sums a group of kVec neighbouring rows (columns: the rows'
// innermost dimension has stride 1) over its share of the chunk, loading
// kUnroll positions of the axis before adding any, so several loads are in
// flight. kAligned: every group is kVec whole rows in one aligned 16-byte
// vector at every position (columns_are_vector_aligned, or a folded launch),
// loaded as one; otherwise (odd f32 column counts, an odd count in lines repeated
// along an outer dimension, or an input off a 16-byte boundary) a group's columns may start anywhere in
// a vector, and the last group of each line of columns may be partial: the
// loads stay 16 bytes' worth per thread, which a column per thread was not
// (bf16 with 268436 columns: 1.6 TB/s against torch's 3.4). 16-bit groups are
// shifted out of the one or two aligned vectors that hold them
// (load_floats_unaligned), f32 groups loaded column by column: on the H100,
// odd column counts (33 to 65521) ran 1.02-1.07x faster shifted in bf16 and
// 0.85-0.97x in f32.
// kVec == 1: rows of any layout. kToWorkspace: every sum goes to partials,
// even unsplit (a folded launch, fold_lines).
template <class T, int kVec, bool kAligned, bool kToWorkspace = false>
__global__ void __launch_bounds__(kMaxBlockThreads)
    sum_columns(ReductionPlan plan, int64_t groups, int64_t chunk, float* partials, T* out,
                const T* in) {
  const ColumnTeams team{};
  const int64_t begin = blockIdx.y * chunk;
  const int64_t end = min(plan.row_length, begin + chunk);
  const int64_t stride = plan.in_axis_stride;
  const int64_t step = team.width();
  // Unaligned groups tile each line of sizes[0] columns (the rows' innermost
  // dimension) separately; aligned ones tile the rows evenly.
  const int64_t line = plan.row_offsets.sizes[0];
  const int64_t groups_per_line = (line + kVec - 1) / kVec;
  for (int64_t group_block = blockIdx.x; group_block < groups; group_block += gridDim.x) {
    const int64_t group = group_block * team.teams_per_block() + team.slot();
    int64_t first_row = group * kVec;
    int count = kVec;
    if constexpr (!kAligned) {
      const int64_t line_index = group / groups_per_line;
      const int64_t first_column = (group - line_index * groups_per_line) * kVec;
      first_row = line_index * line + first_column;
      count = static_cast<int>(min(int64_t{kVec}, line - first_column));
    }
    const bool active = first_row < plan.rows;
    const RowStart start = active ? row_start(plan.row_offsets, first_row) : RowStart{0, 0};
    FloatVector<kVec> total = {};
    if (active) {
      const T* column = in + start.in;
      int64_t i = begin + team.member();
      // Whole batches, then one batch whose loads past the chunk are skipped:
      // the remainder's loads are in flight together too.
      for (; i < end; i += kUnroll * step) {
        const bool whole = i + (kUnroll - 1) * step < end;
        float x[kUnroll][kVec];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const T* position = column + (i + u * step) * stride;
          const bool inside = whole || i + u * step < end;
#pragma unroll
          for (int k = 0; k < kVec; ++k) x[u][k] = 0.0f;
          if (inside) {
            if constexpr (kAligned) {
              load_floats<kVec>(position, x[u]);
            } else if constexpr (sizeof(T) == 2) {
              load_floats_unaligned<kVec>(position, count, x[u]);
            } else {
#pragma unroll
              for (int k = 0; k < kVec; ++k) {
                if (k < count) x[u][k] = to_float(position[k]);
              }
            }
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
          for (int k = 0; k < kVec; ++k) total.lanes[k] += x[u][k];
        }
      }
    }
    total = team.reduce(total, LanewiseOp<AddOp, kVec>{});
    if (active && team.member() == 0) {
      // A group's rows share their innermost dimension, so they step by its stride.
      const int64_t out_step = plan.row_offsets.out_strides[0];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        if (k >= count) break;
        if (!kToWorkspace && gridDim.y == 1) {
          out[start.out + k * out_step] = from_float<T>(total.lanes[k]);
        } else {
          partials[blockIdx.y * plan.rows + first_row + k] = total.lanes[k];
        }
      }
    }
  }
}

// Rows with partial vectors packed back to back, of kMinPackedRowBytes to
// kMaxPackedRowBytes (runtime/reduction/packed_rows_cuda.cuh): after a block
// stages a span of rows, teams of kLanes lanes sum them from the tile, each
// lane the aligned 16-byte words of the tile that its row overlaps (every
// kLanes-th one, the elements outside the row masked), so shared memory too is
// read 16 bytes at a time. Measured on the H200 (256 MiB, GB/s, walks ->
// packed) when walks still loaded partial vectors element by element: bf16 x
// 500 2108 -> 3089, x 777 2221 -> 2949, x 1023 2240 -> 3487, x 3001 2196 ->
// 3276, f32 x 777 3425 -> 3610, f32 x 257 3536 -> 3439; below
// kMinPackedRowBytes the per-row work of a team outweighs it (f32 x 127 3433
// -> 3122, bf16 x 257 2027 -> 1991). Against walks that read them whole
// (MaskedRowWalk), on the H100, packed rows still ran bf16 x 1500 and x 3001
// 1.15x, x 500 1.04x and f32 x 777 1.04x faster, and bf16 x 777 and x 2047
// 0.96-0.98x.
constexpr int64_t kMinPackedRowBytes = 768;
constexpr int64_t kMaxPackedRowBytes = kPackedTileBytes / 4;

template <class T, int kVec, int kLanes>
__global__ void __launch_bounds__(kPackedBlockThreads)
    sum_packed_rows(PackedSpans spans, int64_t out_stride, T* out, const T* in) {
  using Word = typename AccessWord<sizeof(T) * kVec>::type;
  constexpr int kTeams = kPackedBlockThreads / kLanes;
  __shared__ alignas(kVectorBytes) T tile[kPackedTileBytes / sizeof(T)];
  const int member = static_cast<int>(threadIdx.x) % kLanes;
  const int slot = static_cast<int>(threadIdx.x) / kLanes;
  const int length = spans.length;
  for (int64_t span = blockIdx.x; span < spans.count; span += gridDim.x) {
    const int span_rows = spans.rows_in(span);
    const int64_t first_row = spans.first_row(span);
    const int lead = spans.stage<kVec>(tile, in, span);
    __syncthreads();
    // Every team takes the same number of turns, so the butterflies' shuffles
    // see whole warps; a team past the span's last row sums an empty row.
    for (int turn = 0; turn < span_rows; turn += kTeams) {
      const int r = turn + slot;
      // An empty row at 0: its first word, rounded down from row_begin, would
      // lie past the tile's end.
      const bool active = r < span_rows;
      const int row_begin = active ? lead + r * length : 0;
      const int row_end = active ? row_begin + length : 0;
      float sum = 0.0f;
      for (int p = (row_begin / kVec + member) * kVec; p < row_end; p += kLanes * kVec) {
        const Word word = *reinterpret_cast<const Word*>(tile + p);
        T lanes[kVec];
        memcpy(lanes, &word, sizeof(word));
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if (p + k >= row_begin && p + k < row_end) sum += to_float(lanes[k]);
        }
      }
      sum = butterfly_reduce(sum, AddOp{}, kLanes);
      if (member == 0 && active) out[(first_row + r) * out_stride] = from_float<T>(sum);
    }
    __syncthreads();  // the next span may overwrite the tile only once it is read
  }
}

// Lanes per row: about two words a lane, at most a warp.
template <class T, int kVec>
void launch_packed_rows(const ReductionPlan& plan, T* out, const T* in, cudaStream_t stream) {
  const PackedSpans spans = packed_spans<T, kVec>(plan);
  const int64_t out_stride = plan.row_offsets.ndim == 0 ? 0 : plan.row_offsets.out_strides[0];
  const int words = static_cast<int>(ceil_div(plan.row_length, kVec)) + 1;
  dispatch_pow2<kWarpSize>(static_cast<int>(ceil_div(words, 2)), [&](auto lanes) {
    sum_packed_rows<T, kVec, decltype(lanes)::value>
        <<<row_grid(spans.count, 1), kPackedBlockThreads, 0, stream>>>(spans, out_stride, out, in);
    return OPRT_SUCCESS;
  });
}

// Adds each row's partial sums in a fixed order, so results stay deterministic:
// a team of lanes per row (chunk_sum_lanes), each adding every team.width()-th
// term in order, kChunkTermsInFlight loads at a time (one thread waiting on
// each workspace load in turn was slow), then a butterfly. A term is a chunk's
// sum or a fold's line's per chunk (partials[term * plan.rows + row]); a folded
// launch leaves the last row_length % lines positions of each row to be read
// here, from `in`.
constexpr int kChunkTermsInFlight = 8;

template <class T>
__global__ void __launch_bounds__(kMaxBlockThreads)
    sum_chunks(ReductionPlan plan, WarpTeams team, int64_t groups, int64_t parts,
               int64_t first_unfolded, const float* partials, T* out, const T* in) {
  const int64_t terms = parts + plan.row_length - first_unfolded;
  const int64_t step = team.width();
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = group * team.teams_per_block() + team.slot();
    float sum = 0.0f;
    for (int64_t first = team.member(); row < plan.rows && first < terms;
         first += kChunkTermsInFlight * step) {
      float values[kChunkTermsInFlight];
#pragma unroll
      for (int u = 0; u < kChunkTermsInFlight; ++u) {
        const int64_t term = first + u * step;
        values[u] = term >= terms  ? 0.0f
                    : term < parts ? partials[term * plan.rows + row]
                                   : to_float(in[row + (first_unfolded + term - parts) *
                                                           plan.in_axis_stride]);
      }
#pragma unroll
      for (int u = 0; u < kChunkTermsInFlight; ++u) {
        if (first + u * step < terms) sum += values[u];
      }
    }
    sum = team.reduce(sum, AddOp{});
    if (row < plan.rows && team.member() == 0) {
      out[row_start(plan.row_offsets, row).out] = from_float<T>(sum);
    }
  }
}

// Lanes per row for sum_chunks: as few as leave rows x lanes threads enough to
// fill the GPU (kChunkSumThreads), so that a warp's loads of one term read
// neighbouring rows' cells, consecutive in the workspace; more for fewer rows,
// up to one per term and a warp. (Teams of up to a warp whatever the rows
// count read a 4-byte cell per team from each line: bf16 172739x777 along
// axis 0, folded into 8 lines, spent 29.5 of its 132 us there, at 6 % of the
// DRAM bandwidth, H100.)
constexpr int64_t kChunkSumThreads = int64_t{1} << 18;

int chunk_sum_lanes(int64_t rows, int64_t terms) {
  return next_pow2(std::clamp<int64_t>(std::min(ceil_div(kChunkSumThreads, rows), terms), 1,
                                       kWarpSize));
}

// Lines of columns that a launch folds into one (0: none). A contiguous
// `row_length x rows` input of 16-bit columns whose count no vector divides is
// read as `row_length / lines` lines of `rows * lines` columns, a multiple of
// the vector width: every group is then one aligned vector at every position,
// read once, where unfolded it straddles two. Column c of the input is column
// c + p * rows (p < lines) of the folded lines, whose sums sum_chunks adds with
// the last row_length % lines lines. f32 stays unfolded: its groups load
// column by column at 2.4-2.7 TB/s already, and on the H100 folding ran
// 0.62-0.95x at 33 to 1000 columns (lines times the parts for sum_chunks to add
// along long axes) and at most 1.03x elsewhere; bf16 ran 1.07-1.37x at 4000 to
// 1000003 columns and 1.00-1.01x below.
template <class T>
constexpr bool kFoldsLines = sizeof(T) == 2;

template <class T>
int64_t fold_lines(const ReductionPlan& plan) {
  const RowOffsets& offsets = plan.row_offsets;
  if (!kFoldsLines<T> || offsets.ndim != 1 || offsets.in_strides[0] != 1 ||
      plan.in_axis_stride != plan.rows) {
    return 0;
  }
  const int64_t lines = kWide<T> / std::gcd(plan.rows, int64_t{kWide<T>});
  // The folded sums cost 8 bytes a column per line folded (written, then read):
  // fold only where that is at most an eighth of the bytes read.
  if (lines == 1 || plan.row_length * int64_t{sizeof(T)} < 64 * lines) return 0;
  return lines;
}

// The plan of a folded launch: `lines` lines of plan's columns make one.
ReductionPlan folded_plan(const ReductionPlan& plan, int64_t lines) {
  ReductionPlan folded = plan;
  folded.rows = plan.rows * lines;
  folded.row_length = plan.row_length / lines;
  folded.in_axis_stride = folded.rows;
  folded.row_offsets.sizes[0] = folded.rows;
  return folded;
}

template <class T>
oprt_status_t launch(const ReductionPlan& plan, float* partials, T* out, const T* in,
                     cudaStream_t stream) {
  int64_t parts = plan.row_splits;
  int64_t first_unfolded = plan.row_length;
  if (plan.in_axis_stride != 1) {
    const auto launch_columns = [&](const ReductionPlan& columns, auto vec, auto aligned,
                                    auto to_workspace) {
      constexpr int kVec = decltype(vec)::value;
      const int64_t chunk = chunk_length(columns.row_length, columns.row_splits);
      const int64_t line = kVec == 1 ? 1 : columns.row_offsets.sizes[0];
      const int64_t column_groups = columns.rows / line * ceil_div(line, int64_t{kVec});
      const dim3 block = column_block_of(sum_columns_slots(column_groups, columns.row_length));
      const int64_t groups = ceil_div(column_groups, block.x);
      sum_columns<T, kVec, decltype(aligned)::value, decltype(to_workspace)::value>
          <<<row_grid(groups, columns.row_splits), block, 0, stream>>>(columns, groups, chunk,
                                                                       partials, out, in);
    };
    // Whether the input was read folded: an aligned launch of the folded plan,
    // which only types that fold instantiate.
    const auto launch_folded = [&] {
      if constexpr (kFoldsLines<T>) {
        const int64_t lines = fold_lines<T>(plan);
        if (lines == 0) return false;
        const ReductionPlan folded = folded_plan(plan, lines);
        if (!columns_are_vector_aligned(folded, in, kVectorBytes)) return false;
        launch_columns(folded, std::integral_constant<int, kWide<T>>{}, std::true_type{},
                       std::true_type{});
        parts = plan.row_splits * lines;
        first_unfolded = plan.row_length / lines * lines;
        return true;
      }
      return false;
    };
    if (!launch_folded()) {
      if (columns_are_vector_aligned(plan, in, kVectorBytes)) {
        launch_columns(plan, std::integral_constant<int, kWide<T>>{}, std::true_type{},
                       std::false_type{});
      } else if (rows_are_neighbours(plan)) {
        launch_columns(plan, std::integral_constant<int, kWide<T>>{}, std::false_type{},
                       std::false_type{});
      } else {
        launch_columns(plan, std::integral_constant<int, 1>{}, std::true_type{},
                       std::false_type{});
      }
    }
  } else {
    OPRT_RETURN_IF_ERROR(dispatch_vector_width<T>(vector_width<T>(plan, out, in), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      return dispatch_whole_vectors<kVec>(plan, in, [&](auto whole, int64_t walk) {
        constexpr bool kWhole = decltype(whole)::value;
        if constexpr (!kWhole) {
          const int64_t row_bytes = plan.row_length * int64_t{sizeof(T)};
          if (plan.row_splits == 1 && input_rows_are_packed(plan) &&
              row_bytes >= kMinPackedRowBytes && row_bytes <= kMaxPackedRowBytes) {
            launch_packed_rows<T, kVec>(plan, out, in, stream);
            return OPRT_SUCCESS;
          }
        }
        const int64_t vectors = ceil_div(walk, kVec);
        if constexpr (kWhole && kVec > 1) {
          if (vectors == kShortTeamLanes && plan.row_splits == 1) {
            const int64_t groups = ceil_div(
                plan.rows, int64_t{kWarpRowsBlockThreads / kShortTeamLanes * kShortTeamRows});
            sum_short_rows<T, kVec>
                <<<row_grid(groups, 1), kWarpRowsBlockThreads, 0, stream>>>(plan, groups, out, in);
            return OPRT_SUCCESS;
          }
        }
        const int64_t chunk = chunk_length(walk, plan.row_splits);
        int64_t fewest_lanes = ceil_div(vectors, kVectorsPerThread);
        if (kWhole && kVec > 1 && vectors >= kShortRowVectors) {
          fewest_lanes =
              std::max(fewest_lanes, std::min(kShortRowLanes, vectors / kShortRowVectorsPerLane));
        }
        const int lanes = next_pow2(std::min<int64_t>(fewest_lanes, kLongRowBlockThreads));
        if (lanes <= kWarpSize) {
          const WarpTeams team{lanes};
          const int64_t groups = ceil_div(plan.rows, kWarpRowsBlockThreads / lanes);
          sum_rows<WarpTeams, T, kVec, kWhole>
              <<<row_grid(groups, plan.row_splits), kWarpRowsBlockThreads, 0, stream>>>(
                  plan, team, groups, chunk, partials, out, in);
        } else {
          sum_rows<BlockTeam, T, kVec, kWhole>
              <<<row_grid(plan.rows, plan.row_splits), lanes, 0, stream>>>(
                  plan, BlockTeam{}, plan.rows, chunk, partials, out, in);
        }
        return OPRT_SUCCESS;
      });
    }));
  }
  if (parts > 1) {
    constexpr int kThreads = 256;
    const int64_t terms = parts + plan.row_length - first_unfolded;
    const int lanes = chunk_sum_lanes(plan.rows, terms);
    const int64_t groups = ceil_div(plan.rows, kThreads / lanes);
    sum_chunks<T><<<row_grid(groups, 1), kThreads, 0, stream>>>(
        plan, WarpTeams{lanes}, groups, parts, first_unfolded, partials, out, in);
  }
  return check_launch("reduce_sum");
}

// Splits are chosen for the kernel an aligned launch runs (vector width and
// whole vectors), counting the blocks of it an SM holds: an unaligned launch
// has more blocks and needs no more splits.
oprt_status_t prepare(ReductionPlan* plan, size_t* workspace_bytes) {
  RowBlocks shape{};
  int64_t lines = 0;
  ReductionPlan folded{};
  OPRT_RETURN_IF_ERROR(dispatch_dtype(plan->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    int blocks_per_sm = 0;
    if (plan->in_axis_stride == 1) {
      OPRT_RETURN_IF_ERROR((resident_blocks_per_sm<&sum_rows<BlockTeam, T, kWide<T>, true>,
                                                   kLongRowBlockThreads>("reduce_sum",
                                                                         &blocks_per_sm)));
      shape = RowBlocks{plan->rows, 1, blocks_per_sm};
    } else {
      OPRT_RETURN_IF_ERROR(
          (resident_blocks_per_sm<&sum_columns<T, kWide<T>, true>, kColumnBlockThreads>(
              "reduce_sum", &blocks_per_sm)));
      lines = fold_lines<T>(*plan);
      if (lines > 0) folded = folded_plan(*plan, lines);
      const ReductionPlan& walked = lines > 0 ? folded : *plan;
      const int64_t columns = ceil_div(walked.rows, int64_t{kWide<T>});
      const int64_t slots = sum_columns_slots(columns, walked.row_length);
      shape = RowBlocks{ceil_div(columns, slots), slots * kWide<T>, blocks_per_sm};
    }
    return OPRT_SUCCESS;
  }));
  if (lines == 0) {
    return prepare_split_rows("reduce_sum", sizeof(float), shape, SplitRounding::kWithinOneWave,
                              plan, workspace_bytes);
  }
  // Splits of the folded lines; the workspace holds every folded sum, split or not
  // (a launch whose input turns out misaligned runs unfolded on the same splits).
  OPRT_RETURN_IF_ERROR(prepare_split_rows("reduce_sum", sizeof(float), shape,
                                          SplitRounding::kWithinOneWave, &folded,
                                          workspace_bytes));
  plan->row_splits = folded.row_splits;
  *workspace_bytes = static_cast<size_t>(folded.rows * folded.row_splits) * sizeof(float);
  return OPRT_SUCCESS;
}

oprt_status_t execute(const ReductionPlan& plan, void* workspace, void* out,
                      const void* const* inputs, void* stream) {
  return launch_typed<float>(plan, workspace, out, inputs, stream,
                             [&](float* partials, auto* typed_out, auto in, cudaStream_t s) {
                               return launch(plan, partials, typed_out, in[0], s);
                             });
}

const ReductionKernels kReduceSumGpu = {&prepare, &execute};

}  // namespace
}  // namespace gpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(reduce_sum, OPRT_GPU_BACKEND, &oprt::gpu::kReduceSumGpu);
