// vector_add on CUDA-dialect GPUs (nvidia; metax with -DOPRT_METAX): the shared
// elementwise kernels instantiated for its functor.
#include "ops/vector_add/vector_add_functor.h"
#include "runtime/elementwise/elementwise_cuda.cuh"

#if OPRT_CUTE
// --@//tools/cuda:cute chose CuTe: contiguous adds run the CuTe tiled copy of elementwise_cute.cuh.
#include "runtime/elementwise/elementwise_cute.cuh"

OPRT_REGISTER_KERNEL(vector_add, OPRT_GPU_BACKEND,
                     (oprt::gpu::elementwise_kernel<oprt::VectorAddFunctor, oprt::gpu::CuteContiguous>));
#else
OPRT_REGISTER_KERNEL(vector_add, OPRT_GPU_BACKEND, oprt::gpu::elementwise_kernel<oprt::VectorAddFunctor>);
#endif
