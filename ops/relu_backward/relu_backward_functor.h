// relu_backward's math, shared by every backend: computed in f32, rounded once to the dtype.
#ifndef OPERATOR_RUNTIME_OPS_RELU_BACKWARD_RELU_BACKWARD_FUNCTOR_H_
#define OPERATOR_RUNTIME_OPS_RELU_BACKWARD_RELU_BACKWARD_FUNCTOR_H_

#include <cmath>

#include "runtime/core/numeric.h"

namespace oprt {

struct ReluBackwardFunctor {
  static constexpr int kNumInputs = 2;
  float negative_slope;
  // Every backend reports "relu_backward: not implemented" while this is set: write
  // operator() below, then delete this line.
  static constexpr bool kNotImplemented = true;

  // ====== Write relu_backward here: one output element from one element of each input. ======
  // The cpu backend runs it on the host and the nvidia backend on the GPU, so use
  // what both have: arithmetic and <cmath>'s float functions (expf, tanhf, erff, ...).
  // A parameter of the operator becomes a field of this struct (see ops/relu/).
  OPRT_HOST_DEVICE float operator()(float dy, float x) const { return dy; }
};

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_OPS_RELU_BACKWARD_RELU_BACKWARD_FUNCTOR_H_
