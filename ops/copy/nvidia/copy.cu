// copy on CUDA-dialect GPUs (nvidia; metax with -DOPRT_METAX): the shared
// elementwise kernels instantiated for its functor.
#include "ops/copy/copy_functor.h"
#include "runtime/elementwise/elementwise_cuda.cuh"

OPRT_REGISTER_KERNEL(copy, OPRT_GPU_BACKEND, oprt::gpu::elementwise_kernel<oprt::CopyFunctor>);
