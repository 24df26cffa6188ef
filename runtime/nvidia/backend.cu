// Registers the nvidia backend with the core (the metax one when compiled with
// -DOPRT_METAX). Linking this library in is what "built with <backend>" means; a
// device must also be present at create time.
#include <cuda_runtime.h>

#include "runtime/nvidia/device.cuh"

namespace {

bool has_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear it so no later launch check reports it
    return false;
  }
  return count > 0;
}

const bool registered = (oprt::register_backend(OPRT_GPU_BACKEND, has_device), true);

}  // namespace
