// relu's math, shared by every backend: leaky ReLU computed in f32.
#ifndef OPERATOR_RUNTIME_OPS_RELU_RELU_FUNCTOR_H_
#define OPERATOR_RUNTIME_OPS_RELU_RELU_FUNCTOR_H_

#include "runtime/core/numeric.h"

namespace oprt {

struct ReluFunctor {
  static constexpr int kNumInputs = 1;
  float negative_slope;
  // As torch: NaN propagates; with slope 0 this is torch.relu (so -inf -> 0,
  // not -inf * 0 = NaN), otherwise torch's leaky_relu, x > 0 ? x : x * slope.
  OPRT_HOST_DEVICE float operator()(float x) const {
    if (!(x <= 0.0f)) return x;  // positive or NaN
    return negative_slope == 0.0f ? 0.0f : x * negative_slope;
  }
};

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_OPS_RELU_RELU_FUNCTOR_H_
