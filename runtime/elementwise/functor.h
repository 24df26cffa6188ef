// How every backend applies an elementwise functor to stored values.
//
// A functor is a small trivially copyable struct (its fields are the
// operator's parameters) with `static constexpr int kNumInputs` and an
// OPRT_HOST_DEVICE `float operator()(float...) const`. A functor that only
// moves values (copy) sets `kMovesStorage = true` and takes and returns the
// storage type, so it stays bit-exact and skips the f32 round trip.
#ifndef OPERATOR_RUNTIME_ELEMENTWISE_FUNCTOR_H_
#define OPERATOR_RUNTIME_ELEMENTWISE_FUNCTOR_H_

#include <type_traits>

#include "runtime/core/numeric.h"

namespace oprt {

template <class Functor, class = void>
struct moves_storage : std::false_type {};
template <class Functor>
struct moves_storage<Functor, std::enable_if_t<Functor::kMovesStorage>> : std::true_type {};

// One output element from its inputs' stored values: computed in f32 and
// rounded once to T, unless the functor moves storage.
template <class T, class Functor, class... In>
OPRT_HOST_DEVICE inline T evaluate(const Functor& functor, In... values) {
  if constexpr (moves_storage<Functor>::value) {
    return functor(values...);
  } else {
    return from_float<T>(functor(to_float(values)...));
  }
}

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_ELEMENTWISE_FUNCTOR_H_
