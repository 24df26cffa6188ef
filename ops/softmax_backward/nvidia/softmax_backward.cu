// softmax_backward on CUDA-dialect GPUs: the nvidia backend, and metax when
// compiled with -DOPRT_METAX (runtime/metax/dialect.cuh).
//
// A team of threads takes a row: it sums dy * y along the row (team.reduce
// combines the members' partial sums), then writes y * (dy - sum). Rows of
// stride 1 up to kMaxBlockThreads * vectors_per_thread vectors are read once into
// registers (a warp's lanes per short row, a block of just enough warps per
// longer one): one read of dy and y and one write, the least memory traffic.
// Longer rows, and axes whose stride is not 1, take the two-walk path: a walk
// summing, then a walk reading dy and y again (from the caches where the rows
// in flight fit there) and writing. Rows along a strided axis go to
// ColumnTeams blocks of neighbouring rows, so every step along the axis reads
// consecutive memory. Rows too few to fill the GPU are cut into chunks: a
// first kernel writes each chunk's partial sum to the workspace, a second
// combines a row's partial sums and writes its chunk.
//
// dy and y are walked in step in aligned 16-byte vectors when the axis has
// stride 1 in all three tensors and their rows sit at one offset from a vector
// boundary (rows_take_vectors); otherwise element by element.
//
// In place (out == dy or out == y) is safe: the first walk only reads, and the
// second writes each element after reading it.
#include <cuda_runtime.h>

#include "runtime/reduction/reduction_cuda.cuh"

namespace oprt {
namespace gpu {
namespace {

// Vectors of each of dy and y a thread loads before using any, and holds at
// most on the register path: 4, but 2 for 16-bit types, 32 floats in all (with
// 4, their rows with partial vectors spilled 480 bytes). A warp team's lanes
// hold half as many (they spilled 52-168 bytes at this many).
OPRT_HOST_DEVICE constexpr int vectors_per_thread(int vec) { return vec > 4 ? 16 / vec : 4; }
constexpr int kWarpRowsBlockThreads = 128;

template <class Team, class T, int kVec, int kHeld, bool kWholeVectors>
__global__ void __launch_bounds__(kMaxBlockThreads)
    softmax_backward_rows_in_registers(ReductionPlan plan, Team team, int64_t groups, T* out,
                                       const T* dy, const T* y) {
  const int first = team.member() * kVec;
  const int step = team.width() * kVec;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = group * team.teams_per_block() + team.slot();
    const bool active = row < plan.rows;
    const RowStart start = active ? row_start(plan.row_offsets, row) : RowStart{0, 0, 0};
    const auto dy_walk = input_walk<kVec, kWholeVectors>(plan, dy, start);
    const auto y_walk = second_input_walk<kWholeVectors>(plan, y, start, dy_walk.lead);
    const int64_t end = active ? dy_walk.end() : 0;
    float g[kHeld][kVec], p[kHeld][kVec];
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < kHeld; ++j) {
      if (first + j * step < end) {
        dy_walk.template load<kVec>(first + j * step, 0.0f, g[j]);
        y_walk.template load<kVec>(first + j * step, 0.0f, p[j]);
#pragma unroll
        for (int k = 0; k < kVec; ++k) dot += g[j][k] * p[j][k];
      }
    }
    dot = team.reduce(dot, AddOp{});
    const auto out_walk = output_walk<kWholeVectors>(plan, out, start, dy_walk.lead);
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
      const int64_t vectors = ceil_div(walk, kVec);
      constexpr int kBlockHeld = vectors_per_thread(kVec);
      constexpr int kLaneHeld = kBlockHeld / 2;
      if (plan.row_splits > 1 || vectors > int64_t{kMaxBlockThreads} * kBlockHeld) {
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
          softmax_backward_rows_in_registers<WarpTeams, T, kVec, decltype(held)::value, kWhole>
              <<<row_grid(groups, 1), kWarpRowsBlockThreads, 0, stream>>>(
                  plan, WarpTeams{lanes}, groups, out, dy, y);
          return OPRT_SUCCESS;
        });
      }
      // Just enough whole warps for kBlockHeld vectors per thread.
      const auto threads = static_cast<unsigned>(
          ceil_div(ceil_div(vectors, kBlockHeld), kWarpSize) * kWarpSize);
      const auto held_per_thread = static_cast<int>(ceil_div(vectors, threads));
      return dispatch_pow2<kBlockHeld>(held_per_thread, [&](auto held) {
        softmax_backward_rows_in_registers<BlockTeam, T, kVec, decltype(held)::value, kWhole>
            <<<row_grid(plan.rows, 1), threads, 0, stream>>>(plan, BlockTeam{}, plan.rows, out,
                                                             dy, y);
        return OPRT_SUCCESS;
      });
    });
  }));
  return check_launch("softmax_backward");
}

oprt_status_t prepare(ReductionPlan* plan, size_t* workspace_bytes) {
  return prepare_split_rows("softmax_backward", sizeof(float), row_blocks(*plan), plan,
                            workspace_bytes);
}

oprt_status_t execute(const ReductionPlan& plan, void* workspace, void* out,
                      const void* const* inputs, void* stream) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch<T>(plan, static_cast<float*>(workspace), static_cast<T*>(out),
                     static_cast<const T*>(inputs[0]), static_cast<const T*>(inputs[1]),
                     static_cast<cudaStream_t>(stream));
  });
}

const ReductionKernels kSoftmaxBackwardGpu = {&prepare, &execute};

}  // namespace
}  // namespace gpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(softmax_backward, OPRT_GPU_BACKEND, &oprt::gpu::kSoftmaxBackwardGpu);
