// vector_add on the cpu: the shared reference loops instantiated for its functor.
#include "ops/vector_add/vector_add_functor.h"
#include "runtime/elementwise/elementwise_cpu.h"

OPRT_REGISTER_KERNEL(vector_add, OPRT_BACKEND_CPU, oprt::cpu::elementwise_kernel<oprt::VectorAddFunctor>);
