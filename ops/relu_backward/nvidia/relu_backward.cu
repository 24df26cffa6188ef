// relu_backward on CUDA-dialect GPUs (nvidia; metax with -DOPRT_METAX): the shared
// elementwise kernels instantiated for its functor.
#include "ops/relu_backward/relu_backward_functor.h"
#include "runtime/elementwise/elementwise_cuda.cuh"

OPRT_REGISTER_KERNEL(relu_backward, OPRT_GPU_BACKEND,
                     oprt::gpu::elementwise_kernel<oprt::ReluBackwardFunctor>);
