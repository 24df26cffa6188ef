// How every backend applies an elementwise functor to stored values.
//
// A functor is a small trivially copyable struct (its fields are the
// operator's parameters) with `static constexpr int kNumInputs` and an
// OPRT_HOST_DEVICE `float operator()(float...) const`. A functor that only
// moves values (copy) sets `kMovesStorage = true` and takes and returns the
// storage type, so it stays bit-exact and skips the f32 round trip. A functor
// whose math is not written yet (as //tools:new_op generates it) sets
// `kNotImplemented = true`, and every backend's kernel then fails with
// NOT_SUPPORTED instead of computing anything.
#ifndef OPERATOR_RUNTIME_ELEMENTWISE_FUNCTOR_H_
#define OPERATOR_RUNTIME_ELEMENTWISE_FUNCTOR_H_

#include <type_traits>

#include "runtime/core/numeric.h"

namespace oprt {

template <class Functor, class = void>
struct moves_storage : std::false_type {};
template <class Functor>
struct moves_storage<Functor, std::enable_if_t<Functor::kMovesStorage>> : std::true_type {};

template <class Functor, class = void>
struct not_implemented : std::false_type {};
template <class Functor>
struct not_implemented<Functor, std::enable_if_t<Functor::kNotImplemented>> : std::true_type {};

// What a kernel returns for a functor that is not_implemented.
inline oprt_status_t fail_not_implemented(const char* op) {
  return fail(OPRT_ERR_NOT_SUPPORTED,
              "%s: not implemented: ops/%s/%s_functor.h still sets kNotImplemented; write its "
              "operator() and delete that line",
              op, op, op);
}

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
