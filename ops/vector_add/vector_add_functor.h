// vector_add's math, shared by every backend: out = a + b in f32, rounded once.
#ifndef OPERATOR_RUNTIME_OPS_VECTOR_ADD_VECTOR_ADD_FUNCTOR_H_
#define OPERATOR_RUNTIME_OPS_VECTOR_ADD_VECTOR_ADD_FUNCTOR_H_

#include "runtime/core/numeric.h"

namespace oprt {

struct VectorAddFunctor {
  static constexpr int kNumInputs = 2;
  OPRT_HOST_DEVICE float operator()(float a, float b) const { return a + b; }
};

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_OPS_VECTOR_ADD_VECTOR_ADD_FUNCTOR_H_
