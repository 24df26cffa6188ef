// Host-side helpers every CUDA-dialect kernel source shares: the current
// device's attributes (asked once per device, never per call), the launch
// check and grid arithmetic; and the backend those sources register as.
//
// The same sources build the nvidia backend and, compiled with -DOPRT_METAX, the
// metax one (by mxcc, or by nvcc for the compatibility check): everything MACA
// needs differently is in runtime/metax/dialect.cuh.
#ifndef OPERATOR_RUNTIME_NVIDIA_DEVICE_CUH_
#define OPERATOR_RUNTIME_NVIDIA_DEVICE_CUH_

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "runtime/core/core.h"

#if defined(OPRT_METAX)
#include "runtime/metax/dialect.cuh"
#else
// The backend whose kernels these sources register (OPRT_REGISTER_KERNEL).
#define OPRT_GPU_BACKEND OPRT_BACKEND_NVIDIA
// Thread-block clusters and distributed shared memory (used on sm_90 and newer).
#define OPRT_HAS_THREAD_BLOCK_CLUSTERS 1
#endif

// Threads of a warp, and the mask naming all of them in *_sync intrinsics.
#ifndef OPRT_WARP_SIZE
#define OPRT_WARP_SIZE 32
#define OPRT_FULL_WARP_MASK 0xffffffffu
#endif

namespace oprt {
namespace gpu {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A fact about the current device that `query(device, &value)` asks CUDA for:
// asked on the first call per device, then read from `cache` (one slot per
// device, 0 while unknown), so launches stay cheap and graph-capturable.
constexpr int kMaxCachedDevices = 64;
template <class Query>
oprt_status_t cached_device_fact(const char* op, std::atomic<int> (&cache)[kMaxCachedDevices],
                                 Query&& query, int* value) {
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  const bool cacheable = error == cudaSuccess && device >= 0 && device < kMaxCachedDevices;
  if (cacheable && cache[device].load(std::memory_order_relaxed) > 0) {
    *value = cache[device].load(std::memory_order_relaxed);
    return OPRT_SUCCESS;
  }
  int queried = 0;
  if (error == cudaSuccess) error = query(device, &queried);
  if (error != cudaSuccess) {
    return fail(OPRT_ERR_RUNTIME, "%s: cannot query the device: %s", op,
                cudaGetErrorString(error));
  }
  if (cacheable) cache[device].store(queried, std::memory_order_relaxed);
  *value = queried;
  return OPRT_SUCCESS;
}

template <cudaDeviceAttr kAttribute>
oprt_status_t device_attribute(const char* op, int* value) {
  static std::atomic<int> cache[kMaxCachedDevices];
  return cached_device_fact(
      op, cache,
      [](int device, int* queried) { return cudaDeviceGetAttribute(queried, kAttribute, device); },
      value);
}

// Blocks of kKernel, launched with kThreads threads and no dynamic shared
// memory, that one SM holds at once: fewer than its threads allow when the
// kernel's registers run out first.
template <auto kKernel, int kThreads>
oprt_status_t resident_blocks_per_sm(const char* op, int* blocks) {
  static std::atomic<int> cache[kMaxCachedDevices];
  return cached_device_fact(
      op, cache,
      [](int, int* queried) {
        return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            queried, reinterpret_cast<const void*>(kKernel), kThreads, 0);
      },
      blocks);
}

inline oprt_status_t multiprocessor_count(const char* op, int* count) {
  return device_attribute<cudaDevAttrMultiProcessorCount>(op, count);
}

// Turns a failed launch (bad configuration, no kernel image for this GPU, or
// an earlier asynchronous fault) into OPRT_ERR_RUNTIME with CUDA's words.
inline oprt_status_t check_launch(const char* op) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    return fail(OPRT_ERR_RUNTIME, "%s: kernel launch failed: %s", op, cudaGetErrorString(error));
  }
  return OPRT_SUCCESS;
}

}  // namespace gpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_NVIDIA_DEVICE_CUH_
