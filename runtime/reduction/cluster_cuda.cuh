// Rows held on chip by several blocks (sm_90+), for the operators of the
// reduction family whose result needs the whole row before any element is
// written (softmax, softmax_backward): each block holds one chunk of a row in
// shared memory (and registers), filled by asynchronous copies, so the row is
// read from memory once; the blocks then combine their partial results.
//
// The cluster path: the blocks of one thread-block cluster (up to 16) hold a
// row and combine through distributed shared memory. A cluster of one block is
// a row held by one block.
//
// The grid path, for rows no cluster holds or holds worse: every block the GPU
// holds at once (one cooperative launch, two blocks per SM), rows_per_round
// rows at a time, each cut into row_splits chunks; the blocks of a row meet in
// the workspace (partial results and an arrival count per row). It has no
// 16-block limit and keeps every SM busy whatever the row length, where
// clusters of 8 or 16 leave SMs idle (../shared/notes/long-row-softmax.md).
//
// OPRT_HAS_THREAD_BLOCK_CLUSTERS is unset on MetaX, which has neither path.
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
// (position p to target[p - from]); wait_async_copies() completes them. The
// on-chip paths walk rows in whole vectors (OnChipRow), so 16-byte vectors go
// by asynchronous copy, which needs no registers, and a whole chunk can be in
// flight at once; narrower vectors (elements without vectors) are loaded and
// stored. Members take vectors in turn, as for_each_vectors visits them, so a
// member that reads back only its own positions needs no barrier.
template <class T, int kVec>
__device__ inline void stage_vectors(T* target, const RowWalk<const T, true>& walk, int64_t from,
                                     int64_t end, int member, int width) {
  using Word = typename AccessWord<sizeof(T) * kVec>::type;
  for (int64_t p = from + int64_t{member} * kVec; p < end; p += int64_t{width} * kVec) {
    T* const slot = target + (p - from);
    if constexpr (sizeof(T) * kVec == 16) {
      const auto address = static_cast<unsigned>(__cvta_generic_to_shared(slot));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address),
                   "l"(walk.first + (p - walk.lead))
                   : "memory");
    } else {
      float x[kVec];
      walk.template load<kVec>(p, 0.0f, x);
      *reinterpret_cast<Word*>(slot) = pack_floats<kVec, T>(x);
    }
  }
}

__device__ inline void wait_async_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// A row as the on-chip paths walk it, in whole vectors. A row with partial
// vectors (kWholeVectors false, vectors only) has them peeled off (PeeledRow):
// the chunks walk its body, and the members of the block whose chunk starts
// the row (holds_edges) hold the edges' elements, one each, which they read
// and write themselves. The rows of a launch's inputs and output sit at one
// lead (rows_take_vectors), so one OnChipRow serves them all. Walked in checked
// vectors instead, 16-bit rows with partial vectors ran softmax at about 58 %
// of the copy bandwidth on the H200 (x 65521, 151936, 1000003), where aligned
// neighbours ran at 75 %.
template <int kVec, bool kWholeVectors>
struct OnChipRow {
  PeeledRow<kVec> peeled;  // edge -1 in every block but the one holding the edges

  // first: element 0 of the row in any of the launch's tensors.
  template <class T>
  __device__ static OnChipRow of(const T* first, int64_t length, int member, bool holds_edges) {
    if constexpr (kWholeVectors) {
      return {{0, 0, -1}};
    } else {
      // The on-chip paths hold rows far shorter than 2^31 elements.
      PeeledRow<kVec> peeled = PeeledRow<kVec>::of(first, static_cast<int>(length), member);
      if (!holds_edges) peeled.edge = -1;
      return {peeled};
    }
  }

  // The walk of the row whose element 0 is first, in one of the tensors.
  template <class T>
  __device__ RowWalk<T, true> walk(T* first, int64_t stride, int64_t length) const {
    if constexpr (kWholeVectors) {
      return {first, stride, length, 0};
    } else {
      return peeled.body(first);
    }
  }

  template <class T>
  __device__ float load_edge(const T* first, float fill) const {
    return peeled.load_edge(first, fill);
  }

  template <class T>
  __device__ void store_edge(T* first, float value) const {
    peeled.store_edge(first, value);
  }
};

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

// ---- The grid path ----

// Threads of a grid-path block, and blocks per SM: two blocks of half the
// shared memory each, so that one block's loads overlap the other's meeting
// and stores. Measured on the H200 (softmax_backward 256x262144 f32): 255 us,
// against 265 with one block per SM, and 291 with three rows staged per
// block, the next two in flight while a row's blocks meet (more, smaller
// rounds: each costs a meeting that the loads in flight did not hide).
constexpr int kGridBlockThreads = 256;
constexpr int kGridBlocksPerSm = 2;
// Shared memory a grid-path block stages its chunk in: two of them and the
// kernels' static shared memory fit the 228 KiB of an sm_90 SM.
constexpr size_t kGridStagingBytes = 110 * 1024;

// Where the blocks of one row meet: a partial result per (row, chunk) and an
// arrival count per row, which the launch zeroes first.
template <class Partial>
struct RowMeeting {
  Partial* partials;
  unsigned* arrivals;
  int64_t splits;
};

// The workspace's layout: the partial results, then (16-byte aligned) the counts.
template <class Partial>
size_t row_meeting_arrivals_offset(const ReductionPlan& plan) {
  const size_t partials = static_cast<size_t>(plan.rows * plan.row_splits) * sizeof(Partial);
  return (partials + 15) / 16 * 16;
}

template <class Partial>
size_t row_meeting_bytes(const ReductionPlan& plan) {
  return row_meeting_arrivals_offset<Partial>(plan) +
         static_cast<size_t>(plan.rows) * sizeof(unsigned);
}

template <class Partial>
RowMeeting<Partial> row_meeting(const ReductionPlan& plan, void* workspace) {
  return {static_cast<Partial*>(workspace),
          reinterpret_cast<unsigned*>(static_cast<char*>(workspace) +
                                      row_meeting_arrivals_offset<Partial>(plan)),
          plan.row_splits};
}

#if __CUDA_ARCH__ >= 900
template <class V>
__device__ inline V load_from_l2(const V* cell) {
  using Word = typename AccessWord<sizeof(V)>::type;
  const Word word = __ldcg(reinterpret_cast<const Word*>(cell));
  V value;
  memcpy(&value, &word, sizeof(V));
  return value;
}

// The row's blocks' partial results combined by op: this block publishes its
// own (`mine`, the same in all of its threads) and counts itself in, waits
// until every block of the row has, and combines them all in chunk order, so
// that every block gets the same result, bit for bit.
template <class Partial, class Op>
__device__ inline Partial meet_row(const RowMeeting<Partial>& meeting, int64_t row, int64_t part,
                                   Partial mine, Op op) {
  Partial* const cells = meeting.partials + row * meeting.splits;
  if (threadIdx.x == 0) {
    cells[part] = mine;
    __threadfence();
    unsigned* const arrivals = meeting.arrivals + row;
    atomicAdd(arrivals, 1u);
    for (;;) {
      unsigned arrived = 0;
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(arrived) : "l"(arrivals) : "memory");
      if (arrived >= meeting.splits) break;
      __nanosleep(32);
    }
  }
  __syncthreads();
  Partial total = Op::identity();
  for (int64_t i = threadIdx.x; i < meeting.splits; i += blockDim.x) {
    total = op(total, load_from_l2(cells + i));
  }
  return BlockTeam{}.reduce(total, op);
}

// The grid path's loop, one call per block: block b works on chunk b %
// splits of rows b / splits, b / splits + rows_per_round, ... For each row:
// stage(row) issues the asynchronous copies of the block's chunk into shared
// memory; reduce(row) returns the block's partial result from it (the same in
// all threads); finish(row, total) writes the chunk.
template <class Partial, class Op, class Stage, class Reduce, class Finish>
__device__ inline void for_each_grid_row(int64_t rows, int64_t rows_per_round,
                                         const RowMeeting<Partial>& meeting, Stage stage,
                                         Reduce reduce, Finish finish) {
  const int64_t part = blockIdx.x % meeting.splits;
  for (int64_t row = blockIdx.x / meeting.splits; row < rows; row += rows_per_round) {
    stage(row);
    wait_async_copies();
    __syncthreads();
    finish(row, meet_row(meeting, row, part, reduce(row), Op{}));
    __syncthreads();  // the chunk is staged again only after every thread wrote from it
  }
}
#endif

// Sets plan->row_splits and plan->rows_per_round for the grid path when the
// GPU's co-resident blocks, kGridBlocksPerSm per SM, hold at least one row,
// each staging its chunk of staged_tensors tensors in kGridStagingBytes: as
// many rows at once as fit (so that every block has a chunk), each cut into
// as many chunks as the rows leave blocks. kernels are the path's kernels
// (every vector width and whole-vector variant), each allowed the shared
// memory; the first is the one sized for.
template <class T, class Kernel, class... Kernels>
oprt_status_t choose_grid_rows(const char* op, int staged_tensors, ReductionPlan* plan,
                               Kernel kernel, Kernels... others) {
  size_t dynamic_limit = 0;
  OPRT_RETURN_IF_ERROR(allow_large_clusters(op, &dynamic_limit, kernel, others...));
  int multiprocessors = 0;
  OPRT_RETURN_IF_ERROR(multiprocessor_count(op, &multiprocessors));
  if (dynamic_limit < kGridStagingBytes || plan->rows == 0) return OPRT_SUCCESS;
  int blocks_per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, kGridBlockThreads,
                                                    kGridStagingBytes) != cudaSuccess) {
    cudaGetLastError();
    return OPRT_SUCCESS;
  }
  const int64_t blocks = int64_t{std::min(blocks_per_sm, kGridBlocksPerSm)} * multiprocessors;
  const auto most_per_block = static_cast<int64_t>(
      kGridStagingBytes / (static_cast<size_t>(staged_tensors) * sizeof(T)) / kChunkQuantum *
      kChunkQuantum);
  const int64_t fewest_splits = ceil_div(plan->row_length + kWide<T> - 1, most_per_block);
  if (blocks == 0 || fewest_splits > blocks) return OPRT_SUCCESS;
  const int64_t rows_per_round = std::min(plan->rows, blocks / fewest_splits);
  plan->rows_per_round = rows_per_round;
  plan->row_splits = blocks / rows_per_round;
  return OPRT_SUCCESS;
}

// Chooses how rows of row_bytes are held on chip, if at all: not on devices
// without clusters (both paths need sm_90); rows of more than grid_first_bytes
// try the grid path first, the others a cluster first (each operator measured
// where its two paths cross), and each path is tried once. prepare_grid and
// prepare_cluster set the plan when their path holds the rows.
template <class PrepareGrid, class PrepareCluster>
oprt_status_t hold_rows_on_chip(const char* op, size_t row_bytes, size_t grid_first_bytes,
                                PrepareGrid prepare_grid, PrepareCluster prepare_cluster,
                                ReductionPlan* plan) {
  bool has_clusters = false;
  OPRT_RETURN_IF_ERROR(device_has_clusters(op, &has_clusters));
  if (!has_clusters) return OPRT_SUCCESS;
  const bool grid_first = row_bytes > grid_first_bytes;
  if (grid_first) {
    OPRT_RETURN_IF_ERROR(prepare_grid(plan));
    if (plan->rows_per_round > 0) return OPRT_SUCCESS;
  }
  OPRT_RETURN_IF_ERROR(prepare_cluster(plan));
  return plan->splits_share_cluster || grid_first ? OPRT_SUCCESS : prepare_grid(plan);
}

// A launch of a grid-path kernel: rows_per_round * row_splits blocks, all
// resident at once (a cooperative launch fails rather than run fewer, which
// would leave a row's blocks waiting for ones never started).
struct GridLaunch {
  cudaLaunchConfig_t config;
  cudaLaunchAttribute cooperative;

  GridLaunch(const ReductionPlan& plan, size_t shared_bytes, cudaStream_t stream) : config{} {
    config.gridDim = dim3(static_cast<unsigned>(plan.rows_per_round * plan.row_splits));
    config.blockDim = dim3(kGridBlockThreads);
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    config.attrs = &cooperative;
    config.numAttrs = 1;
  }
  GridLaunch(const GridLaunch&) = delete;
  GridLaunch& operator=(const GridLaunch&) = delete;
};

// Zeroes the arrival counts, then launches kernel(args...) on the grid path.
template <class Partial, class Kernel, class... Args>
oprt_status_t launch_grid_rows(const char* op, const ReductionPlan& plan,
                               const RowMeeting<Partial>& meeting, size_t shared_bytes,
                               cudaStream_t stream, Kernel kernel, Args... args) {
  cudaError_t error = cudaMemsetAsync(meeting.arrivals, 0,
                                      static_cast<size_t>(plan.rows) * sizeof(unsigned), stream);
  const GridLaunch launch(plan, shared_bytes, stream);
  if (error == cudaSuccess) error = cudaLaunchKernelEx(&launch.config, kernel, args...);
  if (error != cudaSuccess) {
    return fail(OPRT_ERR_RUNTIME, "%s: grid-path launch failed: %s", op, cudaGetErrorString(error));
  }
  return OPRT_SUCCESS;
}

}  // namespace gpu
}  // namespace oprt

#endif  // OPRT_HAS_THREAD_BLOCK_CLUSTERS
#endif  // OPERATOR_RUNTIME_REDUCTION_CLUSTER_CUDA_CUH_
