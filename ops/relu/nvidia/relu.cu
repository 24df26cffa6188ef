// relu on nvidia: the shared CUDA elementwise kernels instantiated for its functor.
#include "ops/relu/relu_functor.h"
#include "runtime/elementwise/elementwise_cuda.cuh"

OPRT_REGISTER_KERNEL(relu, OPRT_BACKEND_NVIDIA, oprt::gpu::elementwise_kernel<oprt::ReluFunctor>);
