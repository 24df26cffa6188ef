// softmax_backward on CUDA-dialect GPUs: the nvidia backend, and metax when
// compiled with -DOPRT_METAX (runtime/metax/dialect.cuh).
//
// A team of threads takes a row: it sums dy * y along the row (team.reduce
// combines the members' partial sums), then walks the row again writing
// y * (dy - sum). Short rows give each warp several rows (WarpTeams), longer
// rows a block each (BlockTeam), and rows along an axis whose stride is not 1
// go to ColumnTeams blocks of neighbouring rows, so every step along the axis
// reads consecutive memory. The second walk reads what the first brought into
// the caches for all but the longest rows. Rows too few to fill the GPU are cut
// into chunks: a first kernel writes each chunk's partial sum to the
// workspace, a second combines a row's partial sums and writes its chunk.
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

// Vectors of each of dy and y a thread loads before using any: 4, but 2 for
// 16-bit types (with 4, their rows with partial vectors spilled 480 bytes).
OPRT_HOST_DEVICE constexpr int unroll(int vec) { return 16 / vec < 4 ? 16 / vec : 4; }
constexpr int kWarpRowsBlockThreads = 128;
// Rows of at most this many vectors per lane of a warp take WarpTeams.
constexpr int kMaxVectorsPerLane = 4;

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
    // y's rows share dy's lead whenever vectors are used (rows_take_vectors).
    const RowWalk<const T, kWholeVectors> y_walk{y + start.second_in, plan.second_in_axis_stride,
                                                 plan.row_length, dy_walk.lead};
    const int64_t end = min(dy_walk.end(), begin + chunk);
    float dot = 0.0f;
    if (pass == DotPass::kWrite) {
      for (int64_t split = team.member(); active && split < splits; split += team.width()) {
        dot += partials[row * splits + split];
      }
    } else if (active) {
      for_each_vectors<kVec, unroll(kVec)>(
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
    for_each_vectors<kVec, unroll(kVec)>(
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
      if (plan.row_splits == 1 && vectors <= int64_t{kWarpSize} * kMaxVectorsPerLane) {
        const int lanes = next_pow2(std::min<int64_t>(vectors, kWarpSize));
        const int64_t groups = ceil_div(plan.rows, kWarpRowsBlockThreads / lanes);
        launch_rows<WarpTeams, T, kVec, kWhole>(plan, walk, WarpTeams{lanes},
                                                dim3(kWarpRowsBlockThreads), groups, partials,
                                                out, dy, y, stream);
      } else {
        launch_rows<BlockTeam, T, kVec, kWhole>(plan, walk, BlockTeam{},
                                                dim3(kLongRowBlockThreads), plan.rows, partials,
                                                out, dy, y, stream);
      }
      return OPRT_SUCCESS;
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
