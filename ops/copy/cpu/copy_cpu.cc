// copy on the cpu: the shared reference loops instantiated for its functor.
#include "ops/copy/copy_functor.h"
#include "runtime/elementwise/elementwise_cpu.h"

OPRT_REGISTER_KERNEL(copy, OPRT_BACKEND_CPU, oprt::cpu::elementwise_kernel<oprt::CopyFunctor>);
