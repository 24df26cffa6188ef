// Rows held on chip by a thread-block cluster (sm_90+), for the operators of
// the reduction family whose result needs the whole row before any element is
// written (softmax, softmax_backward): each of a cluster's blocks holds one
// chunk of a row in shared memory (and registers), filled by asynchronous
// copies, so the row is read from memory once; the blocks then combine their
// partial results through distributed shared memory. A cluster of one block
// is a row held by one block.
//
// OPRT_HAS_THREAD_BLOCK_CLUSTERS is unset on MetaX, which has no clusters.
#ifndef OPERATOR_RUNTIME_REDUCTION_CLUSTER_CUDA_CUH_
#define OPERATOR_RUNTIME_REDUCTION_CLUSTER_CUDA_CUH_

#include "runtime/reduction/reduction_cuda.cuh"

#if OPRT_HAS_THREAD_BLOCK_CLUSTERS
#include <cooperative_groups.h>

namespace oprt {
namespace gpu {

// Blocks per cluster: 8 is portable; Hopper also runs 16 when asked to.
constexpr int kMaxClusterBlocks = 16;

#if __CUDA_ARCH__ >= 900
// Copies this member's vectors of walk positions [from, end) to target
// (position p to target[p - from]); wait_async_copies() completes them. Whole
// 16-byte vectors go by asynchronous copy, which needs no registers, so a whole
// chunk can be in flight at once; a row's partial vectors (and every element
// without vectors) are loaded, with fill outside the row, and stored. Members
// take vectors in turn, as for_each_vectors visits them, so a member that reads
// back only its own positions needs no barrier.
template <class T, int kVec, bool kWholeVectors>
__device__ inline void stage_vectors(T* target, const RowWalk<const T, kWholeVectors>& walk,
                                     int64_t from, int64_t end, int member, int width,
                                     float fill) {
  using Word = typename AccessWord<sizeof(T) * kVec>::type;
  for (int64_t p = from + int64_t{member} * kVec; p < end; p += int64_t{width} * kVec) {
    T* const slot = target + (p - from);
    const int64_t i = p - walk.lead;
    if constexpr (sizeof(T) * kVec == 16) {
      if (kWholeVectors || (walk.holds(i) && walk.holds(i + kVec - 1))) {
        const auto address = static_cast<unsigned>(__cvta_generic_to_shared(slot));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address),
                     "l"(walk.first + i)
                     : "memory");
        continue;
      }
    }
    float x[kVec];
    walk.template load<kVec>(p, fill, x);
    *reinterpret_cast<Word*>(slot) = pack_floats<kVec, T>(x);
  }
}

__device__ inline void wait_async_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// The cluster's blocks' `value`s (each the same in all of its block's threads)
// combined by op in rank order, so that every block gets the same result.
// cell is a __shared__ V of the caller's.
template <class V, class Op>
__device__ inline V cluster_reduce(V value, Op op, V* cell) {
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) *cell = value;
  cluster.sync();
  V total = Op::identity();
  for (unsigned rank = 0; rank < cluster.num_blocks(); ++rank) {
    total = op(total, *cluster.map_shared_rank(cell, rank));
  }
  cluster.sync();  // no block overwrites its cell, or exits, while another reads it
  return total;
}
#endif

// A launch of a cluster-path kernel: plan.row_splits blocks per cluster (one row
// at a time), one cluster per row for up to 65535 rows, looping over the rest.
struct ClusterLaunch {
  cudaLaunchConfig_t config;
  cudaLaunchAttribute cluster_shape;

  ClusterLaunch(const ReductionPlan& plan, int threads, size_t shared_bytes, cudaStream_t stream)
      : config{} {
    const auto blocks = static_cast<unsigned>(plan.row_splits);
    config.gridDim = dim3(blocks, static_cast<unsigned>(std::clamp<int64_t>(plan.rows, 1, 65535)));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    cluster_shape.id = cudaLaunchAttributeClusterDimension;
    cluster_shape.val.clusterDim.x = blocks;
    cluster_shape.val.clusterDim.y = 1;
    cluster_shape.val.clusterDim.z = 1;
    config.attrs = &cluster_shape;
    config.numAttrs = 1;
  }
  // config points into the object itself: it is made in place, never copied.
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

// Lets kernels use all the shared memory a block may opt into, beyond the most
// any of them declares statically, and clusters of 16; returns the dynamic
// shared memory each block may then have.
template <class... Kernels>
oprt_status_t allow_large_clusters(const char* op, size_t* dynamic_limit, Kernels... kernels) {
  int shared_optin = 0;
  OPRT_RETURN_IF_ERROR(
      device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(op, &shared_optin));
  cudaError_t error = cudaSuccess;
  size_t static_bytes = 0;
  for (const auto kernel : {kernels...}) {
    cudaFuncAttributes attributes{};
    if (error == cudaSuccess) error = cudaFuncGetAttributes(&attributes, kernel);
    static_bytes = std::max(static_bytes, attributes.sharedSizeBytes);
  }
  const int dynamic = shared_optin - static_cast<int>(static_bytes);
  for (const auto kernel : {kernels...}) {
    if (error == cudaSuccess) {
      error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic);
    }
    if (error == cudaSuccess) {
      error = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    }
  }
  if (error != cudaSuccess) {
    return fail(OPRT_ERR_RUNTIME, "%s: cannot configure the cluster kernels: %s", op,
                cudaGetErrorString(error));
  }
  *dynamic_limit = static_cast<size_t>(dynamic);
  return OPRT_SUCCESS;
}

// Walk positions each block of a cluster of `blocks` holds: enough for a row
// at any lead, so the plan made at create time holds every launch's rows.
template <class T>
int64_t cluster_chunk(const ReductionPlan& plan, int64_t blocks) {
  return chunk_length(plan.row_length + kWide<T> - 1, blocks);
}

// Sets plan->row_splits to the blocks of the cluster that holds each row, and
// plan->splits_share_cluster, when a cluster of at most kMaxClusterBlocks blocks
// can: each block then holds cluster_chunk positions, fits(chunk) says whether
// a block holds that many, launch_of(plan, chunk) is the ClusterLaunch. The
// fewest blocks whose chunks fit (a block per SM streams best, measured on the
// H200 for softmax), doubled while the rows' clusters still fit in one wave.
// Not every cluster shape can be scheduled (a cluster's blocks share one GPC):
// it falls back to fewer, larger blocks while they still hold the row.
template <class T, class Kernel, class Fits, class LaunchOf>
oprt_status_t choose_cluster(const char* op, Kernel kernel, Fits fits, LaunchOf launch_of,
                             ReductionPlan* plan) {
  const auto chunk_of = [&](int64_t blocks) { return cluster_chunk<T>(*plan, blocks); };
  int widest = 1;
  while (widest <= kMaxClusterBlocks && !fits(chunk_of(widest))) widest *= 2;
  int multiprocessors = 0;
  OPRT_RETURN_IF_ERROR(multiprocessor_count(op, &multiprocessors));
  while (widest < kMaxClusterBlocks && plan->rows * widest * 2 <= multiprocessors) widest *= 2;
  for (int blocks = widest; blocks >= 1; blocks /= 2) {
    const int64_t chunk = chunk_of(blocks);
    if (blocks > kMaxClusterBlocks || !fits(chunk)) continue;
    ReductionPlan candidate = *plan;
    candidate.row_splits = blocks;
    const ClusterLaunch launch = launch_of(candidate, chunk);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &launch.config) != cudaSuccess) {
      cudaGetLastError();  // an unschedulable shape is an answer, not a sticky error
      continue;
    }
    if (clusters > 0) {
      plan->row_splits = blocks;
      plan->splits_share_cluster = true;
      return OPRT_SUCCESS;
    }
  }
  return OPRT_SUCCESS;
}

// Whether the device runs thread-block clusters (sm_90+).
inline oprt_status_t device_has_clusters(const char* op, bool* has_clusters) {
  int major = 0;
  OPRT_RETURN_IF_ERROR(device_attribute<cudaDevAttrComputeCapabilityMajor>(op, &major));
  *has_clusters = major >= 9;
  return OPRT_SUCCESS;
}

}  // namespace gpu
}  // namespace oprt

#endif  // OPRT_HAS_THREAD_BLOCK_CLUSTERS
#endif  // OPERATOR_RUNTIME_REDUCTION_CLUSTER_CUDA_CUH_
