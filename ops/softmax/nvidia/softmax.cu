// softmax on CUDA-dialect GPUs: the nvidia backend, and metax when compiled
// with -DOPRT_METAX (runtime/metax/dialect.cuh).
//
// Rows of stride 1 up to kMaxRegisterRow elements are read once into registers
// by a team per row (lanes of a warp, or a whole block), which finds the
// maximum, then sum(exp(x - max)), and writes exp(x - max) / sum: one read and
// one write of the data. Longer rows, and axes whose stride is not 1, take the
// online path: a pass folding each chunk into a (max, sum) pair, then a pass
// that reads the input again and writes the result. Rows too few to fill the
// GPU are cut into chunks whose pairs meet in the workspace between two kernels.
//
// In-place (out == in) is safe: every thread writes only elements it has read
// itself, after reading them.
#include <cuda_runtime.h>

#include "runtime/reduction/reduction_cuda.cuh"

namespace oprt {
namespace gpu {
namespace {

// Floats one thread holds for the register path, fewer without vectors (each
// scalar carries its own index arithmetic); with kMaxBlockThreads threads that
// makes the longest row kept in registers.
constexpr int kMaxFloatsPerThread = 32;
constexpr int kMaxScalarsPerThread = 16;
constexpr int64_t kMaxRegisterRow = int64_t{kMaxBlockThreads} * kMaxFloatsPerThread;

// Vectors of kVec elements one thread of the register path holds at most.
constexpr int max_vectors_per_thread(int vec) {
  return vec == 1 ? kMaxScalarsPerThread : kMaxFloatsPerThread / vec;
}
constexpr int kWarpRowsBlockThreads = 128;
constexpr int kMinRowBlockThreads = 128;
// Vectors per thread the register path aims for before it widens the block.
constexpr int64_t kRegisterVectorsPerThread = 4;
constexpr int kUnroll = 4;

template <class Team, class T, int kVec, int kPerThread>
__global__ void __launch_bounds__(kMaxBlockThreads)
    softmax_rows_in_registers(ReductionPlan plan, Team team, int64_t groups, T* out, const T* in) {
  // Rows here are at most kMaxRegisterRow long, so positions in a row fit in int.
  const int length = static_cast<int>(plan.row_length);
  const int first = team.member() * kVec;
  const int step = team.width() * kVec;
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = group * team.teams_per_block() + team.slot();
    const bool active = row < plan.rows;
    const RowStart start = active ? row_start(plan.row_offsets, row) : RowStart{0, 0};
    float x[kPerThread][kVec];
    float max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = first + j * step;
      if (active && i < length) {
        load_floats<kVec>(in + start.in + i, x[j]);
      } else {
#pragma unroll
        for (int k = 0; k < kVec; ++k) x[j][k] = -INFINITY;
      }
#pragma unroll
      for (int k = 0; k < kVec; ++k) max = fmaxf(max, x[j][k]);
    }
    max = team.reduce(max, MaxOp{});
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      if (active && first + j * step < length) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          x[j][k] = expf(x[j][k] - max);
          sum += x[j][k];
        }
      }
    }
    sum = team.reduce(sum, AddOp{});
    const float scale = 1.0f / sum;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = first + j * step;
      if (active && i < length) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) x[j][k] *= scale;
        store_floats<kVec>(out + start.out + i * plan.out_axis_stride, x[j]);
      }
    }
  }
}

enum class OnlinePass : int {
  kStatsAndNormalize,  // whole rows: fold, then normalise, in one kernel
  kStats,              // split rows, first kernel: each chunk's pair to the workspace
  kNormalize,          // split rows, second kernel: combine the row's pairs, normalise the chunk
};

template <class Team, class T, int kVec>
__global__ void __launch_bounds__(kMaxBlockThreads)
    softmax_rows_online(ReductionPlan plan, Team team, int64_t groups, int64_t chunk,
                        OnlinePass pass, MaxSum* partials, T* out, const T* in) {
  const int64_t splits = gridDim.y;
  const int64_t begin = blockIdx.y * chunk;
  const int64_t end = min(plan.row_length, begin + chunk);
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t row = group * team.teams_per_block() + team.slot();
    const bool active = row < plan.rows;
    const RowStart start = active ? row_start(plan.row_offsets, row) : RowStart{0, 0};
    MaxSum stats = MaxSumOp::identity();
    if (pass == OnlinePass::kNormalize) {
      for (int64_t split = 0; active && split < splits; ++split) {
        stats = MaxSumOp{}(stats, partials[row * splits + split]);
      }
    } else {
      const auto fold = [&](int64_t, const float(&x)[kVec]) { stats = absorb(stats, x); };
      if (active) {
        for_each_vector<kVec, kUnroll>(in + start.in, plan.in_axis_stride, begin, end,
                                       team.member(), team.width(), fold);
      }
      stats = team.reduce(stats, MaxSumOp{});
      if (pass == OnlinePass::kStats) {
        if (active && team.member() == 0) partials[row * splits + blockIdx.y] = stats;
        continue;
      }
    }
    if (!active) continue;
    const float scale = 1.0f / stats.sum;
    const auto normalize = [&](int64_t i, const float(&x)[kVec]) {
      float y[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) y[k] = expf(x[k] - stats.max) * scale;
      store_floats<kVec>(out + start.out + i * plan.out_axis_stride, y);
    };
    for_each_vector<kVec, kUnroll>(in + start.in, plan.in_axis_stride, begin, end, team.member(),
                                   team.width(), normalize);
  }
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

// Whether rows may take the register path, which needs no workspace. Without
// vectors the register path holds shorter rows; longer ones then take the
// online path unsplit, which needs no workspace either.
bool may_use_registers(const ReductionPlan& plan) {
  return plan.in_axis_stride == 1 && plan.row_length <= kMaxRegisterRow;
}

template <int kVec>
bool fits_in_registers(const ReductionPlan& plan) {
  return plan.row_length <= int64_t{kMaxBlockThreads} * max_vectors_per_thread(kVec) * kVec;
}

template <class T, int kVec>
oprt_status_t launch_in_registers(const ReductionPlan& plan, T* out, const T* in,
                                  cudaStream_t stream) {
  constexpr int kMaxPerThread = max_vectors_per_thread(kVec);
  const int64_t vectors = ceil_div(plan.row_length, kVec);
  if (vectors <= int64_t{kWarpSize} * kMaxPerThread) {
    // Lanes first, then vectors per lane: short rows keep whole warps busy.
    const int lanes = next_pow2(std::min<int64_t>(vectors, kWarpSize));
    const int per_thread = static_cast<int>(ceil_div(vectors, lanes));
    return dispatch_pow2<kMaxPerThread>(per_thread, [&](auto per) {
      const int64_t groups = ceil_div(plan.rows, kWarpRowsBlockThreads / lanes);
      softmax_rows_in_registers<WarpTeams, T, kVec, decltype(per)::value>
          <<<row_grid(groups, 1), kWarpRowsBlockThreads, 0, stream>>>(plan, WarpTeams{lanes},
                                                                       groups, out, in);
      return OPRT_SUCCESS;
    });
  }
  const int threads = next_pow2(std::clamp<int64_t>(ceil_div(vectors, kRegisterVectorsPerThread),
                                                    kMinRowBlockThreads, kMaxBlockThreads));
  const int per_thread = static_cast<int>(ceil_div(vectors, threads));
  return dispatch_pow2<kMaxPerThread>(per_thread, [&](auto per) {
    softmax_rows_in_registers<BlockTeam, T, kVec, decltype(per)::value>
        <<<row_grid(plan.rows, 1), threads, 0, stream>>>(plan, BlockTeam{}, plan.rows, out, in);
    return OPRT_SUCCESS;
  });
}

template <class Team, class T, int kVec>
void launch_online(const ReductionPlan& plan, Team team, dim3 block, int64_t groups,
                   MaxSum* partials, T* out, const T* in, cudaStream_t stream) {
  const int64_t chunk = chunk_length(plan.row_length, plan.row_splits);
  const dim3 grid = row_grid(groups, plan.row_splits);
  if (plan.row_splits == 1) {
    softmax_rows_online<Team, T, kVec><<<grid, block, 0, stream>>>(
        plan, team, groups, chunk, OnlinePass::kStatsAndNormalize, partials, out, in);
    return;
  }
  for (OnlinePass pass : {OnlinePass::kStats, OnlinePass::kNormalize}) {
    softmax_rows_online<Team, T, kVec>
        <<<grid, block, 0, stream>>>(plan, team, groups, chunk, pass, partials, out, in);
  }
}

template <class T>
oprt_status_t launch(const ReductionPlan& plan, MaxSum* partials, T* out, const T* in,
                     cudaStream_t stream) {
  if (plan.in_axis_stride != 1) {
    const dim3 block = column_block(plan.rows);
    launch_online<ColumnTeams, T, 1>(plan, ColumnTeams{}, block, ceil_div(plan.rows, block.x),
                                     partials, out, in, stream);
  } else {
    OPRT_RETURN_IF_ERROR(dispatch_vector_width<T>(vector_width<T>(plan, out, in), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      if (may_use_registers(plan) && fits_in_registers<kVec>(plan)) {
        return launch_in_registers<T, kVec>(plan, out, in, stream);
      }
      launch_online<BlockTeam, T, kVec>(plan, BlockTeam{}, dim3(kLongRowBlockThreads), plan.rows,
                                        partials, out, in, stream);
      return OPRT_SUCCESS;
    }));
  }
  return check_launch("softmax");
}

oprt_status_t prepare(ReductionPlan* plan, size_t* workspace_bytes) {
  if (may_use_registers(*plan)) return prepare_whole_rows(plan, workspace_bytes);
  return prepare_split_rows("softmax", sizeof(MaxSum), row_blocks(*plan), plan, workspace_bytes);
}

oprt_status_t execute(const ReductionPlan& plan, void* workspace, void* out, const void* in,
                      void* stream) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch<T>(plan, static_cast<MaxSum*>(workspace), static_cast<T*>(out),
                     static_cast<const T*>(in), static_cast<cudaStream_t>(stream));
  });
}

const ReductionKernels kSoftmaxGpu = {&prepare, &execute};

}  // namespace
}  // namespace gpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(softmax, OPRT_GPU_BACKEND, &oprt::gpu::kSoftmaxGpu);
