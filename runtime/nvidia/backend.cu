// Registers the nvidia backend with the core. Linking this library in is what
// "built with nvidia" means; a device must also be present at create time.
#include <cuda_runtime.h>

#include "runtime/core/core.h"

namespace {

bool nvidia_has_device() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear it so no later launch check reports it
    return false;
  }
  return count > 0;
}

const bool nvidia_registered = (oprt::register_backend(OPRT_BACKEND_NVIDIA, nvidia_has_device), true);

}  // namespace
