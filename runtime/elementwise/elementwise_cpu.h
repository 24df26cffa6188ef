// The cpu backend's elementwise loops: the readable reference every other
// backend is checked against. A backend file only instantiates
// cpu::elementwise_kernel<Functor> and registers it.
#ifndef OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CPU_H_
#define OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CPU_H_

#include <cstring>
#include <utility>

#include "runtime/core/numeric.h"
#include "runtime/elementwise/elementwise.h"
#include "runtime/elementwise/functor.h"

namespace oprt {
namespace cpu {

template <class T, class Functor, size_t... I>
T evaluate_at(const Functor& functor, const T* const* in, const int64_t* offsets,
              std::index_sequence<I...>) {
  return evaluate<T>(functor, in[I][offsets[I]]...);
}

template <class T, class Functor, size_t... I>
void run_contiguous(const Functor& functor, int64_t numel, T* out, const T* const* in,
                    std::index_sequence<I...>) {
  if constexpr (moves_storage<Functor>::value) {
    if (out != in[0]) std::memcpy(out, in[0], static_cast<size_t>(numel) * sizeof(T));
  } else {
    for (int64_t i = 0; i < numel; ++i) out[i] = evaluate<T>(functor, in[I][i]...);
  }
}

// Walks the plan's dims like an odometer: a tight loop over the innermost
// dim, then one carry step over the outer dims.
template <class T, class Functor>
void run_strided(const Functor& functor, const ElementwisePlan& plan, T* out, const T* const* in) {
  constexpr int kInputs = Functor::kNumInputs;
  const int inner = plan.ndim - 1;
  const int64_t extent = plan.shape[inner];
  int64_t index[OPRT_MAX_DIMS] = {};
  int64_t out_base = 0;
  int64_t in_base[kInputs] = {};
  int64_t offsets[kInputs];
  for (int64_t done = 0; done < plan.numel; done += extent) {
    for (int64_t j = 0; j < extent; ++j) {
      for (int k = 0; k < kInputs; ++k) offsets[k] = in_base[k] + j * plan.in_strides[k][inner];
      out[out_base + j * plan.out_strides[inner]] =
          evaluate_at(functor, in, offsets, std::make_index_sequence<kInputs>{});
    }
    for (int d = inner - 1; d >= 0; --d) {
      out_base += plan.out_strides[d];
      for (int k = 0; k < kInputs; ++k) in_base[k] += plan.in_strides[k][d];
      if (++index[d] < plan.shape[d]) break;
      index[d] = 0;
      out_base -= plan.out_strides[d] * plan.shape[d];
      for (int k = 0; k < kInputs; ++k) in_base[k] -= plan.in_strides[k][d] * plan.shape[d];
    }
  }
}

// The ElementwiseKernel of Functor on the cpu; stream is ignored.
template <class Functor>
oprt_status_t elementwise_kernel(const char* op, const ElementwisePlan& plan, const void* params,
                                 void* out, const void* const* inputs, void* /*stream*/) {
  const Functor& functor = *static_cast<const Functor*>(params);
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in[Functor::kNumInputs];
    for (int k = 0; k < Functor::kNumInputs; ++k) in[k] = static_cast<const T*>(inputs[k]);
    if (plan.contiguous) {
      run_contiguous(functor, plan.numel, static_cast<T*>(out), in,
                     std::make_index_sequence<Functor::kNumInputs>{});
    } else {
      run_strided(functor, plan, static_cast<T*>(out), in);
    }
    return OPRT_SUCCESS;
  });
}

}  // namespace cpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CPU_H_
