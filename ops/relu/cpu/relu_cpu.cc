// relu on the cpu: the shared reference loops instantiated for its functor.
#include "ops/relu/relu_functor.h"
#include "runtime/elementwise/elementwise_cpu.h"

OPRT_REGISTER_KERNEL(relu, OPRT_BACKEND_CPU, oprt::cpu::elementwise_kernel<oprt::ReluFunctor>);
