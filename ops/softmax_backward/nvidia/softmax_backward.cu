// softmax_backward on CUDA-dialect GPUs: the nvidia backend, and metax when
// compiled with -DOPRT_METAX (runtime/metax/dialect.cuh).
//
// A team of threads takes a row: it sums dy * y along the row (team.reduce
// combines the members' partial sums), then writes y * (dy - sum). Rows of
// stride 1 up to kMaxBlockThreads * kRegisterVectorsPerThread vectors are read
// once into registers (a warp's lanes per short row, a block of just enough
// warps per longer one): one read of dy and y and one write, the least memory
// traffic. 16-bit elements are held as loaded, two to a word.
// Longer rows, and axes whose stride is not 1, take the two-walk path: a walk
// summing, then a walk reading dy and y again (from the caches where the rows
// in flight fit there) and writing. Rows along a strided axis go to
// ColumnTeams blocks of neighbouring rows, so every step along the axis reads
// consecutive memory. Rows too few to fill the GPU are cut into chunks: a
// first kernel writes each chunk's partial sum to the workspace, a second
// combines a row's partial sums and writes its chunk.
//
// On Hopper and newer (sm_90+), rows of stride 1 that two blocks of an SM may
// not hold in registers (fits_in_registers) are planned for the cluster path,
// and take it unless their walk fits after all (fits_register_walk), when
// a cluster of up to 16 blocks of at most kStagedChunkBytes each holds a row
// (up to 147456 f32 or 294912 16-bit elements): each block copies its chunk of
// dy and y into shared memory, the blocks add their partial sums through
// distributed shared memory, and the row is read once (1024x32768 f32 on the
// H200: 58 -> 77 % of the copy bandwidth; 2671x50257: 43-63 -> 76-83 %). Rows
// whose dy and y take over kGridFirstRowBytes, and rows no cluster holds, take
// the grid path first: the co-resident blocks of the whole GPU hold
// rows_per_round rows at a time, a chunk each, and add a row's partial sums
// through the workspace (256x262144 f32: 58 -> 80 %, 64x1048576: 55 -> 66 %).
//
// dy and y are walked in step in aligned 16-byte vectors when the axis has
// stride 1 in all three tensors and their rows sit at one offset from a vector
// boundary (rows_take_vectors); otherwise element by element. Block teams of
// the register path peel a row's partial first and last vectors off the
// vectors (PeeledRow), an element per member.
//
// In place (out == dy or out == y) is safe: the first walk only reads, and the
// second writes each element after reading it (the cluster path writes from
// shared memory, after its copies of the chunk completed).
#include <cuda_runtime.h>

#include "runtime/reduction/cluster_cuda.cuh"
#include "runtime/reduction/reduction_cuda.cuh"

namespace oprt {
namespace gpu {
namespace {

// Vectors of each of dy and y a thread of the two-walk path loads before using
// any: 4, but 2 for 16-bit types, 32 floats in all (with 4, their rows with
// partial vectors spilled 480 bytes).
OPRT_HOST_DEVICE constexpr int vectors_per_thread(int vec) { return vec > 4 ? 16 / vec : 4; }
// Vectors of each of dy and y a thread of the register path holds at most; a
// warp team's lanes hold half as many. 16-bit vectors are held as loaded, two
// elements to a word (PackedElements), so four take the registers of four f32
// vectors: held as floats, two fitted, and 16-bit 8192x8192 ran at 70-73 % of
// the copy bandwidth against f32's 93 % (H200), half the bytes in flight.
constexpr int kRegisterVectorsPerThread = 4;
constexpr int kWarpRowsBlockThreads = 128;

// kEdges: kPeeled or kElementwise, how a row's partial first and last vectors
// are read (rows with partial vectors; launches of whole vectors have none).
template <class Team, class T, int kVec, int kHeld, bool kWholeVectors, PartialVectors kEdges>
__global__ void __launch_bounds__(kMaxBlockThreads)
    softmax_backward_rows_in_registers(ReductionPlan plan, Team team, int64_t groups, T* out,
                                       const T* dy, const T* y) {
  constexpr bool kPeeled = kEdges == PartialVectors::kPeeled;
  constexpr bool kWholeSlots = kWholeVectors || kPeeled;
  const int first = team.member() * kVec;
  const int step = team.width() * kVec;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = group * team.teams_per_block() + team.slot();
    const bool active = row < plan.rows;
    const RowStart start = active ? row_start(plan.row_offsets, row) : RowStart{0, 0, 0};
    // Peeled rows: the body's walks, and this member's edge element of dy and y
    // (0 where none, which adds nothing to the dot product).
    PeeledRow<kVec> peeled{0, 0, -1};
    RowWalk<const T, kWholeSlots> dy_walk, y_walk;
    RowWalk<T, kWholeSlots> out_walk;
    float edge_dy = 0.0f, edge_y = 0.0f;
    if constexpr (kPeeled) {
      peeled = PeeledRow<kVec>::of(dy + start.in, active ? static_cast<int>(plan.row_length) : 0,
                                   team.member());
      dy_walk = peeled.body(dy + start.in);
      y_walk = peeled.body(y + start.second_in);
      out_walk = peeled.body(out + start.out);
      edge_dy = peeled.load_edge(dy + start.in, 0.0f);
      edge_y = peeled.load_edge(y + start.second_in, 0.0f);
    } else {
      dy_walk = input_walk<kVec, kWholeVectors>(plan, dy, start);
      y_walk = second_input_walk<kWholeVectors>(plan, y, start, dy_walk.lead);
      out_walk = output_walk<kWholeVectors>(plan, out, start, dy_walk.lead);
    }
    const int64_t end = active ? dy_walk.end() : 0;
    constexpr bool kPacked = walks_half_words<T, kVec>();
    HeldVector<T, kVec, kPacked> g[kHeld], p[kHeld];
    float dot = edge_dy * edge_y;
#pragma unroll
    for (int j = 0; j < kHeld; ++j) {
      if (first + j * step < end) {
        if constexpr (kPacked) {
          dy_walk.template load_packed<kVec>(first + j * step, 0, g[j]);
          y_walk.template load_packed<kVec>(first + j * step, 0, p[j]);
        } else {
          dy_walk.template load<kVec>(first + j * step, 0.0f, g[j]);
          y_walk.template load<kVec>(first + j * step, 0.0f, p[j]);
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) dot += g[j][k] * p[j][k];
      }
    }
    dot = team.reduce(dot, AddOp{});
    if (kPeeled && peeled.edge >= 0) {
      out[start.out + peeled.edge] = from_float<T>(edge_y * (edge_dy - dot));
    }
#pragma unroll
    for (int j = 0; j < kHeld; ++j) {
      if (first + j * step < end) {
        float x[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) x[k] = p[j][k] * (g[j][k] - dot);
        out_walk.template store<kVec>(first + j * step, x);
      }
    }
  }
}

#if OPRT_HAS_THREAD_BLOCK_CLUSTERS
// The cluster path (runtime/reduction/cluster_cuda.cuh): each block of a
// cluster copies its chunk of the row's dy and y into shared memory, all of it
// in flight at once, sums dy * y there, and the blocks add their sums through
// distributed shared memory; the output is then written from shared memory.
// Blocks hold at most kStagedChunkBytes where the row allows, so that several
// blocks share an SM and one block's loads overlap another's stores.
constexpr int kStagedBlockThreads = 256;
constexpr size_t kStagedChunkBytes = 72 * 1024;
// Blocks per SM the kernels' registers allow.
constexpr int kStagedBlocksPerSm = 4;

// chunk is in positions of the row's walk (OnChipRow: whole vectors, a peeled
// row's body); dy's chunk is staged at the start of the dynamic shared memory,
// y's after it.
template <class T, int kVec, bool kWholeVectors>
__global__ void __launch_bounds__(kStagedBlockThreads, kStagedBlocksPerSm)
    softmax_backward_rows_in_cluster(ReductionPlan plan, int64_t chunk, T* out, const T* dy,
                                     const T* y) {
#if __CUDA_ARCH__ >= 900
  // Vectors of each walk a thread reads from shared memory before using any:
  // 16 floats of each (more spilled in 16-bit rows with partial vectors).
  constexpr int kStagedUnroll = 16 / kVec;
  extern __shared__ uint4 staged_words[];
  T* const staged_dy = reinterpret_cast<T*>(staged_words);
  T* const staged_y = staged_dy + chunk;
  __shared__ float block_dot;
  const BlockTeam team;
  const unsigned rank = cooperative_groups::this_cluster().block_rank();
  const int64_t begin = static_cast<int64_t>(rank) * chunk;
  for (int64_t row = blockIdx.y; row < plan.rows; row += gridDim.y) {
    const RowStart start = row_start(plan.row_offsets, row);
    const auto held_row = OnChipRow<kVec, kWholeVectors>::of(dy + start.in, plan.row_length,
                                                             team.member(), rank == 0);
    const auto dy_walk = held_row.walk(dy + start.in, plan.in_axis_stride, plan.row_length);
    const auto y_walk =
        held_row.walk(y + start.second_in, plan.second_in_axis_stride, plan.row_length);
    const int64_t end = min(dy_walk.end(), begin + chunk);
    const int64_t staged = begin < end ? end - begin : 0;
    stage_vectors<T, kVec>(staged_dy, dy_walk, begin, end, team.member(), team.width());
    stage_vectors<T, kVec>(staged_y, y_walk, begin, end, team.member(), team.width());
    const float dy_edge = held_row.load_edge(dy + start.in, 0.0f);
    const float y_edge = held_row.load_edge(y + start.second_in, 0.0f);
    wait_async_copies();
    const RowWalk<const T, true> held_dy{staged_dy, 1, staged, 0};
    const RowWalk<const T, true> held_y{staged_y, 1, staged, 0};
    float dot = dy_edge * y_edge;
    for_each_vectors<kVec, kStagedUnroll>(
        0.0f, 0, staged, team.member(), team.width(),
        [&](int64_t, const float(&g)[kVec], const float(&p)[kVec]) {
#pragma unroll
          for (int k = 0; k < kVec; ++k) dot += g[k] * p[k];
        },
        held_dy, held_y);
    dot = cluster_reduce(team.reduce(dot, AddOp{}), AddOp{}, &block_dot);
    held_row.store_edge(out + start.out, y_edge * (dy_edge - dot));
    const auto out_walk = held_row.walk(out + start.out, plan.out_axis_stride, plan.row_length);
    for_each_vectors<kVec, kStagedUnroll>(
        0.0f, 0, staged, team.member(), team.width(),
        [&](int64_t i, const float(&g)[kVec], const float(&p)[kVec]) {
          float x[kVec];
#pragma unroll
          for (int k = 0; k < kVec; ++k) x[k] = p[k] * (g[k] - dot);
          out_walk.template store<kVec>(begin + i, x);
        },
        held_dy, held_y);
  }
#endif
}

// The grid path (runtime/reduction/cluster_cuda.cuh), for long rows
// (prepare_on_chip): the blocks of the whole GPU, rows_per_round rows at a time, each block
// staging its chunk of dy and y in shared memory and adding the row's partial
// sums with the row's other blocks through the workspace. Rows walk as
// OnChipRow: the blocks of each row's first chunk hold its edges.
template <class T, int kVec, bool kWholeVectors>
__global__ void __launch_bounds__(kGridBlockThreads, kGridBlocksPerSm)
    softmax_backward_rows_across_grid(ReductionPlan plan, int64_t chunk, RowMeeting<float> meeting,
                                      T* out, const T* dy, const T* y) {
#if __CUDA_ARCH__ >= 900
  constexpr int kStagedUnroll = 16 / kVec;
  extern __shared__ uint4 staged_words[];
  const BlockTeam team;
  const int64_t begin = blockIdx.x % meeting.splits * chunk;
  struct Walks {
    OnChipRow<kVec, kWholeVectors> row;
    RowStart start;
    RowWalk<const T, true> dy, y;
    int64_t end;
  };
  const auto walks_of = [&](int64_t row) {
    const RowStart start = row_start(plan.row_offsets, row);
    const auto held_row = OnChipRow<kVec, kWholeVectors>::of(dy + start.in, plan.row_length,
                                                             team.member(), begin == 0);
    const auto dy_walk = held_row.walk(dy + start.in, plan.in_axis_stride, plan.row_length);
    const auto y_walk =
        held_row.walk(y + start.second_in, plan.second_in_axis_stride, plan.row_length);
    return Walks{held_row, start, dy_walk, y_walk, min(dy_walk.end(), begin + chunk)};
  };
  // The staged chunks, dy's then y's, in whole vectors.
  T* const staged_dy = reinterpret_cast<T*>(staged_words);
  const auto held_of = [&](const Walks& walks) {
    const int64_t staged = begin < walks.end ? walks.end - begin : 0;
    return std::make_pair(RowWalk<const T, true>{staged_dy, 1, staged, 0},
                          RowWalk<const T, true>{staged_dy + chunk, 1, staged, 0});
  };
  // This member's edge elements of dy and y (0 where none).
  const auto edges_of = [&](const Walks& walks) {
    return std::make_pair(walks.row.load_edge(dy + walks.start.in, 0.0f),
                          walks.row.load_edge(y + walks.start.second_in, 0.0f));
  };
  for_each_grid_row<float, AddOp>(
      plan.rows, plan.rows_per_round, meeting,
      [&](int64_t row) {
        const Walks walks = walks_of(row);
        stage_vectors<T, kVec>(staged_dy, walks.dy, begin, walks.end, team.member(), team.width());
        stage_vectors<T, kVec>(staged_dy + chunk, walks.y, begin, walks.end, team.member(),
                               team.width());
      },
      [&](int64_t row) {
        const Walks walks = walks_of(row);
        const auto held = held_of(walks);
        const auto edges = edges_of(walks);
        float dot = edges.first * edges.second;
        for_each_vectors<kVec, kStagedUnroll>(
            0.0f, 0, held.first.length, team.member(), team.width(),
            [&](int64_t, const float(&g)[kVec], const float(&p)[kVec]) {
#pragma unroll
              for (int k = 0; k < kVec; ++k) dot += g[k] * p[k];
            },
            held.first, held.second);
        return team.reduce(dot, AddOp{});
      },
      [&](int64_t row, float dot) {
        const Walks walks = walks_of(row);
        const auto held = held_of(walks);
        const auto edges = edges_of(walks);
        T* const row_out = out + walks.start.out;
        walks.row.store_edge(row_out, edges.second * (edges.first - dot));
        const auto out_walk = walks.row.walk(row_out, plan.out_axis_stride, plan.row_length);
        for_each_vectors<kVec, kStagedUnroll>(
            0.0f, 0, held.first.length, team.member(), team.width(),
            [&](int64_t i, const float(&g)[kVec], const float(&p)[kVec]) {
              float x[kVec];
#pragma unroll
              for (int k = 0; k < kVec; ++k) x[k] = p[k] * (g[k] - dot);
              out_walk.template store<kVec>(begin + i, x);
            },
            held.first, held.second);
      });
#endif
}
#endif  // OPRT_HAS_THREAD_BLOCK_CLUSTERS

enum class DotPass : int {
  kDotAndWrite,  // whole rows: sum, then write, in one kernel
  kDot,          // split rows, first kernel: each chunk's partial sum to the workspace
  kWrite,        // split rows, second kernel: combine the row's partial sums, write the chunk
};

// chunk is in walk positions (RowWalk): chunk blockIdx.y covers positions
// [blockIdx.y * chunk, (blockIdx.y + 1) * chunk) of its row.
template <class Team, class T, int kVec, bool kWholeVectors>
__global__ void __launch_bounds__(kMaxBlockThreads)
    softmax_backward_rows(ReductionPlan plan, Team team, int64_t groups, int64_t chunk,
                          DotPass pass, float* partials, T* out, const T* dy, const T* y) {
  const int64_t splits = gridDim.y;
  const int64_t begin = blockIdx.y * chunk;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = group * team.teams_per_block() + team.slot();
    const bool active = row < plan.rows;
    const RowStart start = active ? row_start(plan.row_offsets, row) : RowStart{0, 0, 0};
    const auto dy_walk = input_walk<kVec, kWholeVectors>(plan, dy, start);
    const auto y_walk = second_input_walk<kWholeVectors>(plan, y, start, dy_walk.lead);
    const int64_t end = min(dy_walk.end(), begin + chunk);
    float dot = 0.0f;
    if (pass == DotPass::kWrite) {
      for (int64_t split = team.member(); active && split < splits; split += team.width()) {
        dot += partials[row * splits + split];
      }
    } else if (active) {
      for_each_vectors<kVec, vectors_per_thread(kVec)>(
          0.0f, begin, end, team.member(), team.width(),
          [&](int64_t, const float(&g)[kVec], const float(&p)[kVec]) {
#pragma unroll
            for (int k = 0; k < kVec; ++k) dot += g[k] * p[k];
          },
          dy_walk, y_walk);
    }
    dot = team.reduce(dot, AddOp{});
    if (pass == DotPass::kDot) {
      if (active && team.member() == 0) partials[row * splits + blockIdx.y] = dot;
      continue;
    }
    if (!active) continue;
    const auto out_walk = output_walk<kWholeVectors>(plan, out, start, dy_walk.lead);
    for_each_vectors<kVec, vectors_per_thread(kVec)>(
        0.0f, begin, end, team.member(), team.width(),
        [&](int64_t position, const float(&g)[kVec], const float(&p)[kVec]) {
          float x[kVec];
#pragma unroll
          for (int k = 0; k < kVec; ++k) x[k] = p[k] * (g[k] - dot);
          out_walk.template store<kVec>(position, x);
        },
        dy_walk, y_walk);
  }
}

template <class Team, class T, int kVec, bool kWholeVectors>
void launch_rows(const ReductionPlan& plan, int64_t walk, Team team, dim3 block, int64_t groups,
                 float* partials, T* out, const T* dy, const T* y, cudaStream_t stream) {
  const int64_t chunk = chunk_length(walk, plan.row_splits);
  const dim3 grid = row_grid(groups, plan.row_splits);
  if (plan.row_splits == 1) {
    softmax_backward_rows<Team, T, kVec, kWholeVectors><<<grid, block, 0, stream>>>(
        plan, team, groups, chunk, DotPass::kDotAndWrite, partials, out, dy, y);
    return;
  }
  for (DotPass pass : {DotPass::kDot, DotPass::kWrite}) {
    softmax_backward_rows<Team, T, kVec, kWholeVectors>
        <<<grid, block, 0, stream>>>(plan, team, groups, chunk, pass, partials, out, dy, y);
  }
}

#if OPRT_HAS_THREAD_BLOCK_CLUSTERS
template <class T>
size_t staged_bytes(int64_t chunk) {
  return 2 * static_cast<size_t>(chunk) * sizeof(T);
}

// Rows the register path holds in preference to a cluster: the whole vectors
// of kRegisterRowThreads threads, so that two blocks share an SM (the kernels
// take 64 registers a thread). H100, 256 MiB per input: 16-bit rows of 16384
// ran at 97 % of the copy bandwidth on 512 threads against 91 % in clusters,
// rows of 20000 at 74 % on 640 threads against 89 %; f32 rows of 8193 and
// 10007 at 94 and 92 % in clusters against 71 and 75 % on 544 and 640 threads.
// The host cannot see where rows start, and a row that starts off a vector
// boundary may need one vector more (a block of one more warp, alone on its SM:
// bf16 16380 at an odd offset ran at 67 %). So prepare keeps the cluster plan
// for every row that might not fit (fits_in_registers) and launch takes the
// register path when the walk does fit (fits_register_walk). H100, rows of
// 16378-16384 16-bit or 8190-8192 f32 that start off a boundary: 67-71 % ->
// 84-93 % of the copy bandwidth; aligned rows of 16384 or 8192 unchanged.
constexpr int kRegisterRowThreads = 512;
bool fits_register_walk(int64_t walk, int vec) {
  return ceil_div(walk, int64_t{vec}) <= int64_t{kRegisterRowThreads} * kRegisterVectorsPerThread;
}

// The longest walk a row of plan.row_length may need: kWide - 1 positions of lead.
template <class T>
bool fits_in_registers(const ReductionPlan& plan) {
  return fits_register_walk(plan.row_length + kWide<T> - 1, kWide<T>);
}

// Chooses the cluster path (prepare_on_chip) when a cluster of at most
// kMaxClusterBlocks blocks of at most kStagedChunkBytes holds a row. (Clusters
// of blocks of all the shared memory a block may have held 256x262144 f32 at
// 49 % of the copy bandwidth, against the two walks' 60 % and the grid path's
// 80 %: H200.)
template <class T>
oprt_status_t prepare_cluster(ReductionPlan* plan) {
  const auto kernel = softmax_backward_rows_in_cluster<T, kWide<T>, false>;
  size_t dynamic_limit = 0;
  OPRT_RETURN_IF_ERROR(allow_large_clusters("softmax_backward", &dynamic_limit,
                                            softmax_backward_rows_in_cluster<T, 1, true>,
                                            softmax_backward_rows_in_cluster<T, kWide<T>, true>,
                                            kernel));
  const size_t block_bytes = std::min(kStagedChunkBytes, dynamic_limit);
  return choose_cluster<T>(
      "softmax_backward", kernel,
      [&](int64_t chunk) { return staged_bytes<T>(chunk) <= block_bytes; },
      [&](const ReductionPlan& candidate, int64_t chunk) {
        return ClusterLaunch(candidate, kStagedBlockThreads, staged_bytes<T>(chunk), nullptr);
      },
      plan);
}

// Chooses the grid path (prepare_on_chip; choose_grid_rows).
template <class T>
oprt_status_t prepare_grid(ReductionPlan* plan) {
  return choose_grid_rows<T>("softmax_backward", 2, plan,
                             softmax_backward_rows_across_grid<T, kWide<T>, false>,
                             softmax_backward_rows_across_grid<T, kWide<T>, true>,
                             softmax_backward_rows_across_grid<T, 1, true>);
}

// Rows whose dy and y take more than this try the grid path before the
// cluster path. H200, the same rows on each path, us: f32 rows of 40000
// (320 KB) 742 on the grid path against 896 in clusters (6000 rows), 65536:
// 449 against 496, 131072: 249 against 311; rows of 256 KiB ran better in
// clusters (32768 f32: 127 against 138, 65536 bf16: 239 against 254).
constexpr size_t kGridFirstRowBytes = 256 * 1024;

// Rows of stride 1 too long for the register path are held on chip when a
// path holds them (hold_rows_on_chip).
template <class T>
oprt_status_t prepare_on_chip(ReductionPlan* plan) {
  if (plan->in_axis_stride != 1 || fits_in_registers<T>(*plan)) return OPRT_SUCCESS;
  return hold_rows_on_chip("softmax_backward", staged_bytes<T>(plan->row_length),
                           kGridFirstRowBytes, prepare_grid<T>, prepare_cluster<T>, plan);
}

template <class T, int kVec, bool kWholeVectors>
oprt_status_t launch_across_grid(const ReductionPlan& plan, void* workspace, T* out, const T* dy,
                                 const T* y, cudaStream_t stream) {
  const int64_t chunk = cluster_chunk<T>(plan, plan.row_splits);
  const auto meeting = row_meeting<float>(plan, workspace);
  return launch_grid_rows("softmax_backward", plan, meeting, staged_bytes<T>(chunk), stream,
                          softmax_backward_rows_across_grid<T, kVec, kWholeVectors>, plan, chunk,
                          meeting, out, dy, y);
}

template <class T, int kVec, bool kWholeVectors>
void launch_in_cluster(const ReductionPlan& plan, T* out, const T* dy, const T* y,
                       cudaStream_t stream) {
  const int64_t chunk = cluster_chunk<T>(plan, plan.row_splits);
  const ClusterLaunch launch(plan, kStagedBlockThreads, staged_bytes<T>(chunk), stream);
  cudaLaunchKernelEx(&launch.config, softmax_backward_rows_in_cluster<T, kVec, kWholeVectors>,
                     plan, chunk, out, dy, y);
}
#endif  // OPRT_HAS_THREAD_BLOCK_CLUSTERS

template <class T>
oprt_status_t launch(const ReductionPlan& plan, float* partials, T* out, const T* dy, const T* y,
                     cudaStream_t stream) {
  if (plan.in_axis_stride != 1) {
    const dim3 block = column_block(plan.rows);
    launch_rows<ColumnTeams, T, 1, true>(plan, plan.row_length, ColumnTeams{}, block,
                                         ceil_div(plan.rows, block.x), partials, out, dy, y,
                                         stream);
    return check_launch("softmax_backward");
  }
  OPRT_RETURN_IF_ERROR(dispatch_vector_width<T>(vector_width<T>(plan, out, dy, y), [&](auto vec) {
    constexpr int kVec = decltype(vec)::value;
    return dispatch_whole_vectors<kVec>(plan, dy, [&](auto whole, int64_t walk) {
      constexpr bool kWhole = decltype(whole)::value;
#if OPRT_HAS_THREAD_BLOCK_CLUSTERS
      if (plan.splits_share_cluster && !fits_register_walk(walk, kVec)) {
        launch_in_cluster<T, kVec, kWhole>(plan, out, dy, y, stream);
        return OPRT_SUCCESS;
      }
      if (plan.rows_per_round > 0) {
        return launch_across_grid<T, kVec, kWhole>(plan, partials, out, dy, y, stream);
      }
#endif
      // A cluster plan whose walk fits runs on the register path, unsplit.
      const bool split = plan.row_splits > 1 && !plan.splits_share_cluster;
      const int64_t vectors = ceil_div(walk, kVec);
      constexpr int kBlockHeld = kRegisterVectorsPerThread;
      constexpr int kLaneHeld = kBlockHeld / 2;
      if (split || vectors > int64_t{kMaxBlockThreads} * kBlockHeld) {
        launch_rows<BlockTeam, T, kVec, kWhole>(plan, walk, BlockTeam{},
                                                dim3(kLongRowBlockThreads), plan.rows, partials,
                                                out, dy, y, stream);
        return OPRT_SUCCESS;
      }
      if (vectors <= int64_t{kWarpSize} * kLaneHeld) {
        // Lanes first, then vectors per lane: short rows keep whole warps busy.
        const int lanes = next_pow2(std::min<int64_t>(vectors, kWarpSize));
        const int64_t groups = ceil_div(plan.rows, kWarpRowsBlockThreads / lanes);
        return dispatch_pow2<kLaneHeld>(static_cast<int>(ceil_div(vectors, lanes)), [&](auto held) {
          softmax_backward_rows_in_registers<WarpTeams, T, kVec, decltype(held)::value, kWhole,
                                             PartialVectors::kElementwise>
              <<<row_grid(groups, 1), kWarpRowsBlockThreads, 0, stream>>>(
                  plan, WarpTeams{lanes}, groups, out, dy, y);
          return OPRT_SUCCESS;
        });
      }
      // Just enough whole warps for kBlockHeld vectors per thread (sized by the
      // walk instead of block_slot_vectors, bf16 rows of 1025, 2047 and 8191 ran
      // 1.05-1.09x slower on an H100).
      const int64_t slot_vectors = block_slot_vectors<kVec, kWhole>(plan.row_length, vectors);
      const auto threads = static_cast<unsigned>(
          ceil_div(ceil_div(slot_vectors, kBlockHeld), kWarpSize) * kWarpSize);
      const auto held_per_thread = static_cast<int>(ceil_div(slot_vectors, threads));
      return dispatch_pow2<kBlockHeld>(held_per_thread, [&](auto held) {
        softmax_backward_rows_in_registers<BlockTeam, T, kVec, decltype(held)::value, kWhole,
                                           block_edges<kVec, kWhole>()>
            <<<row_grid(plan.rows, 1), threads, 0, stream>>>(plan, BlockTeam{}, plan.rows, out,
                                                             dy, y);
        return OPRT_SUCCESS;
      });
    });
  }));
  return check_launch("softmax_backward");
}

oprt_status_t prepare(ReductionPlan* plan, size_t* workspace_bytes) {
#if OPRT_HAS_THREAD_BLOCK_CLUSTERS
  OPRT_RETURN_IF_ERROR(dispatch_dtype(plan->dtype, [&](auto tag) {
    return prepare_on_chip<typename decltype(tag)::type>(plan);
  }));
  if (plan->splits_share_cluster) {
    *workspace_bytes = 0;
    return OPRT_SUCCESS;
  }
  if (plan->rows_per_round > 0) {
    *workspace_bytes = row_meeting_bytes<float>(*plan);
    return OPRT_SUCCESS;
  }
#endif
  return prepare_split_rows("softmax_backward", sizeof(float), row_blocks(*plan),
                            SplitRounding::kCoverOneWave, plan, workspace_bytes);
}

oprt_status_t execute(const ReductionPlan& plan, void* workspace, void* out,
                      const void* const* inputs, void* stream) {
  return launch_typed<float>(plan, workspace, out, inputs, stream,
                             [&](float* partials, auto* typed_out, auto in, cudaStream_t s) {
                               return launch(plan, partials, typed_out, in[0], in[1], s);
                             });
}

const ReductionKernels kSoftmaxBackwardGpu = {&prepare, &execute};

}  // namespace
}  // namespace gpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(softmax_backward, OPRT_GPU_BACKEND, &oprt::gpu::kSoftmaxBackwardGpu);
