// relu_backward on the cpu: the shared reference loops instantiated for its functor.
#include "ops/relu_backward/relu_backward_functor.h"
#include "runtime/elementwise/elementwise_cpu.h"

OPRT_REGISTER_KERNEL(relu_backward, OPRT_BACKEND_CPU,
                     oprt::cpu::elementwise_kernel<oprt::ReluBackwardFunctor>);
