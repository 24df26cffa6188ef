// vector_add on CUDA-dialect GPUs (nvidia; metax with -DOPRT_METAX): the shared
// elementwise kernels instantiated for its functor.
#include "ops/vector_add/vector_add_functor.h"
#include "runtime/elementwise/elementwise_cuda.cuh"

OPRT_REGISTER_KERNEL(vector_add, OPRT_GPU_BACKEND, oprt::gpu::elementwise_kernel<oprt::VectorAddFunctor>);
