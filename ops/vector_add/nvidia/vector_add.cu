// vector_add on nvidia: the shared CUDA elementwise kernels instantiated for its functor.
#include "ops/vector_add/vector_add_functor.h"
#include "runtime/elementwise/elementwise_cuda.cuh"

OPRT_REGISTER_KERNEL(vector_add, OPRT_BACKEND_NVIDIA, oprt::gpu::elementwise_kernel<oprt::VectorAddFunctor>);
