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
  // Selects, not branches: on random signs a branch mispredicts every other
  // element (the cpu loop took ~3 ns per element).
  OPRT_HOST_DEVICE float operator()(float x) const {
    const float negative = negative_slope == 0.0f ? 0.0f : x * negative_slope;
    return x <= 0.0f ? negative : x;  // positive or NaN: x
  }
};

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_OPS_RELU_RELU_FUNCTOR_H_
