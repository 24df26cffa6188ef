// copy's math, shared by every backend: dst = src, moved bit for bit.
#ifndef OPERATOR_RUNTIME_OPS_COPY_COPY_FUNCTOR_H_
#define OPERATOR_RUNTIME_OPS_COPY_COPY_FUNCTOR_H_

#include "runtime/core/numeric.h"

namespace oprt {

struct CopyFunctor {
  static constexpr int kNumInputs = 1;
  static constexpr bool kMovesStorage = true;  // no f32 round trip: NaN payloads survive
  template <class T>
  OPRT_HOST_DEVICE T operator()(T value) const {
    return value;
  }
};

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_OPS_COPY_COPY_FUNCTOR_H_
