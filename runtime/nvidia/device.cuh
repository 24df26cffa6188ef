// Host-side helpers every CUDA-dialect kernel source shares: the current
// device's limits (asked once per device, never per call) and the launch check.
#ifndef OPERATOR_RUNTIME_NVIDIA_DEVICE_CUH_
#define OPERATOR_RUNTIME_NVIDIA_DEVICE_CUH_

#include <cuda_runtime.h>

#include <atomic>

#include "runtime/core/core.h"

namespace oprt {
namespace gpu {

struct DeviceLimits {
  int multiprocessors;
  int threads_per_multiprocessor;  // resident threads an SM holds at most
};

// The current device's limits. Queried on the first call per device, then
// read from a cache, so launches stay cheap and capturable in CUDA graphs.
inline oprt_status_t device_limits(const char* op, DeviceLimits* limits) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached_multiprocessors[kMaxDevices];
  static std::atomic<int> cached_threads[kMaxDevices];
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  const bool cacheable = error == cudaSuccess && device >= 0 && device < kMaxDevices;
  if (cacheable && cached_multiprocessors[device].load(std::memory_order_acquire) > 0) {
    limits->threads_per_multiprocessor = cached_threads[device].load(std::memory_order_relaxed);
    limits->multiprocessors = cached_multiprocessors[device].load(std::memory_order_relaxed);
    return OPRT_SUCCESS;
  }
  if (error == cudaSuccess) {
    error = cudaDeviceGetAttribute(&limits->multiprocessors, cudaDevAttrMultiProcessorCount, device);
  }
  if (error == cudaSuccess) {
    error = cudaDeviceGetAttribute(&limits->threads_per_multiprocessor,
                                   cudaDevAttrMaxThreadsPerMultiProcessor, device);
  }
  if (error != cudaSuccess) {
    return fail(OPRT_ERR_RUNTIME, "%s: cannot query the device: %s", op,
                cudaGetErrorString(error));
  }
  if (cacheable) {
    cached_threads[device].store(limits->threads_per_multiprocessor, std::memory_order_relaxed);
    cached_multiprocessors[device].store(limits->multiprocessors, std::memory_order_release);
  }
  return OPRT_SUCCESS;
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
