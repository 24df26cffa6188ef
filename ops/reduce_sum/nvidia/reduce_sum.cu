// reduce_sum on NVIDIA GPUs (CUDA dialect, shared with MetaX).
//
// Rows whose axis has stride 1 are read by a team per row, 16 bytes per access
// when aligned: a few lanes of a warp for short rows, a whole block for long
// ones. Other axes use ColumnTeams: neighbouring threads take neighbouring rows
// and walk the axis together, so reads stay coalesced when rows are adjacent in
// memory. When there are too few rows to fill the GPU, each row is cut into
// chunks whose partial sums go to the workspace and a second kernel adds them
// in a fixed order, so results are deterministic.
#include <cuda_runtime.h>

#include "runtime/reduction/reduction_cuda.cuh"

namespace oprt {
namespace gpu {
namespace {

// Vectors each thread of a row team aims to load; decides the team size.
constexpr int64_t kVectorsPerThread = 4;
constexpr int kWarpRowsBlockThreads = 256;
constexpr int kUnroll = 4;

template <class Team, class T, int kVec>
__global__ void __launch_bounds__(kMaxBlockThreads)
    sum_rows(ReductionPlan plan, Team team, int64_t groups, int64_t chunk, float* partials, T* out,
             const T* in) {
  const int64_t splits = gridDim.y;
  const int64_t begin = blockIdx.y * chunk;
  const int64_t end = min(plan.row_length, begin + chunk);
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = group * team.teams_per_block() + team.slot();
    const bool active = row < plan.rows;
    const RowStart start = active ? row_start(plan.row_offsets, row) : RowStart{0, 0};
    float sum = 0.0f;
    if (active) {
      for_each_vector<kVec, kUnroll>(in + start.in, plan.in_axis_stride, begin, end,
                                     team.member(), team.width(),
                                     [&](int64_t, const float(&x)[kVec]) {
#pragma unroll
                                       for (int k = 0; k < kVec; ++k) sum += x[k];
                                     });
    }
    sum = team.reduce(sum, AddOp{});
    if (active && team.member() == 0) {
      if (splits == 1) {
        out[start.out] = from_float<T>(sum);
      } else {
        partials[row * splits + blockIdx.y] = sum;
      }
    }
  }
}

// Adds each row's chunk sums, in chunk order.
template <class T>
__global__ void __launch_bounds__(kMaxBlockThreads)
    sum_chunks(ReductionPlan plan, const float* partials, T* out) {
  for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; row < plan.rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int64_t split = 0; split < plan.row_splits; ++split) {
      sum += partials[row * plan.row_splits + split];
    }
    out[row_start(plan.row_offsets, row).out] = from_float<T>(sum);
  }
}

template <class T>
oprt_status_t launch(const ReductionPlan& plan, float* partials, T* out, const T* in,
                     cudaStream_t stream) {
  const int64_t chunk = chunk_length(plan.row_length, plan.row_splits);
  if (plan.in_axis_stride != 1) {
    const dim3 block = column_block(plan.rows);
    const int64_t groups = ceil_div(plan.rows, block.x);
    sum_rows<ColumnTeams, T, 1><<<row_grid(groups, plan.row_splits), block, 0, stream>>>(
        plan, ColumnTeams{}, groups, chunk, partials, out, in);
  } else {
    OPRT_RETURN_IF_ERROR(dispatch_vector_width<T>(vector_width<T>(plan, out, in), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const int64_t vectors = ceil_div(plan.row_length, kVec);
      const int lanes = next_pow2(std::min<int64_t>(ceil_div(vectors, kVectorsPerThread),
                                                    kLongRowBlockThreads));
      if (lanes <= kWarpSize) {
        const WarpTeams team{lanes};
        const int64_t groups = ceil_div(plan.rows, kWarpRowsBlockThreads / lanes);
        sum_rows<WarpTeams, T, kVec>
            <<<row_grid(groups, plan.row_splits), kWarpRowsBlockThreads, 0, stream>>>(
                plan, team, groups, chunk, partials, out, in);
      } else {
        sum_rows<BlockTeam, T, kVec><<<row_grid(plan.rows, plan.row_splits), lanes, 0, stream>>>(
            plan, BlockTeam{}, plan.rows, chunk, partials, out, in);
      }
      return OPRT_SUCCESS;
    }));
  }
  if (plan.row_splits > 1) {
    constexpr int kThreads = 256;
    sum_chunks<T><<<row_grid(ceil_div(plan.rows, kThreads), 1), kThreads, 0, stream>>>(
        plan, partials, out);
  }
  return check_launch("reduce_sum");
}

oprt_status_t prepare(ReductionPlan* plan, size_t* workspace_bytes) {
  return prepare_split_rows("reduce_sum", sizeof(float), plan, workspace_bytes);
}

oprt_status_t execute(const ReductionPlan& plan, void* workspace, void* out, const void* in,
                      void* stream) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch<T>(plan, static_cast<float*>(workspace), static_cast<T*>(out),
                     static_cast<const T*>(in), static_cast<cudaStream_t>(stream));
  });
}

const ReductionKernels kReduceSumNvidia = {&prepare, &execute};

}  // namespace
}  // namespace gpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(reduce_sum, OPRT_BACKEND_NVIDIA, &oprt::gpu::kReduceSumNvidia);
