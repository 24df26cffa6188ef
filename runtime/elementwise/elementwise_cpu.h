// The cpu backend's elementwise loops: the readable reference every other
// backend is checked against, split across the cores (parallel_for) for large
// tensors. A backend file only instantiates cpu::elementwise_kernel<Functor>
// and registers it.
#ifndef OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CPU_H_
#define OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CPU_H_

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "runtime/core/convert_cpu.h"
#include "runtime/core/numeric.h"
#include "runtime/core/parallel.h"
#include "runtime/elementwise/elementwise.h"
#include "runtime/elementwise/functor.h"

namespace oprt {
namespace cpu {

template <class T, class Functor, size_t... I>
T evaluate_at(const Functor& functor, const T* const* in, const int64_t* offsets,
              std::index_sequence<I...>) {
  return evaluate<T>(functor, in[I][offsets[I]]...);
}

// Elements [begin, end) of contiguous operands, compiled per vector width
// (OPRT_CPU_CLONES_AVX512). float and bf16 (whose conversions are shifts and
// integer rounding) go element by element in one loop that vectorises; f16 a
// block at a time (kConvertsInBlocks, convert_cpu.h): the inputs to floats, the
// functor over floats, the results back (in place too: a block is read before it
// is written). bf16 through blocks took twice as long on one core (8192x8192
// vector_add: 27.9 ms against 15.7 in one loop, torch 15.4-16.6).
template <class T, class Functor, size_t... I>
OPRT_CPU_CLONES_AVX512 void run_contiguous(const Functor& functor, int64_t begin, int64_t end,
                                           T* out, const T* const* in,
                                           std::index_sequence<I...>) {
  if constexpr (moves_storage<Functor>::value) {
    if (out != in[0]) {
      std::memcpy(out + begin, in[0] + begin, static_cast<size_t>(end - begin) * sizeof(T));
    }
  } else if constexpr (!kConvertsInBlocks<T>) {
    for (int64_t i = begin; i < end; ++i) out[i] = evaluate<T>(functor, in[I][i]...);
  } else {
    float values[sizeof...(I)][kConvertBlock];
    float results[kConvertBlock];
    for (int64_t block = begin; block < end; block += kConvertBlock) {
      const int64_t count = std::min(kConvertBlock, end - block);
      (to_floats(in[I] + block, values[I], count), ...);
      for (int64_t j = 0; j < count; ++j) results[j] = functor(values[I][j]...);
      from_floats(results, out + block, count);
    }
  }
}

// Innermost rows [row_begin, row_end) of the plan, walked like an odometer: a
// tight loop over the innermost dim, then one carry step over the outer dims.
template <class T, class Functor>
void run_strided(const Functor& functor, const ElementwisePlan& plan, int64_t row_begin,
                 int64_t row_end, T* out, const T* const* in) {
  constexpr int kInputs = Functor::kNumInputs;
  const int inner = plan.ndim - 1;
  const int64_t extent = plan.shape[inner];
  int64_t index[OPRT_MAX_DIMS] = {};
  int64_t out_base = 0;
  int64_t in_base[kInputs] = {};
  int64_t offsets[kInputs];
  // The odometer's position at row_begin: its outer indices, innermost first.
  int64_t rest = row_begin;
  for (int d = inner - 1; d >= 0; --d) {
    index[d] = rest % plan.shape[d];
    rest /= plan.shape[d];
    out_base += index[d] * plan.out_strides[d];
    for (int k = 0; k < kInputs; ++k) in_base[k] += index[d] * plan.in_strides[k][d];
  }
  // Innermost rows of stride 1 everywhere (a broadcast row, a slice of whole
  // rows) run as contiguous ranges, vectorised and block-converted.
  bool rows_contiguous = plan.out_strides[inner] == 1;
  for (int k = 0; k < kInputs; ++k) rows_contiguous &= plan.in_strides[k][inner] == 1;
  for (int64_t row = row_begin; row < row_end; ++row) {
    if (rows_contiguous) {
      const T* row_in[kInputs];
      for (int k = 0; k < kInputs; ++k) row_in[k] = in[k] + in_base[k];
      run_contiguous(functor, 0, extent, out + out_base, row_in,
                     std::make_index_sequence<kInputs>{});
    } else {
      for (int64_t j = 0; j < extent; ++j) {
        for (int k = 0; k < kInputs; ++k) offsets[k] = in_base[k] + j * plan.in_strides[k][inner];
        out[out_base + j * plan.out_strides[inner]] =
            evaluate_at(functor, in, offsets, std::make_index_sequence<kInputs>{});
      }
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
    T* const target = static_cast<T*>(out);
    if (plan.contiguous) {
      parallel_for(plan.numel, kMinElementsPerThread, [&](int64_t begin, int64_t end) {
        run_contiguous(functor, begin, end, target, in,
                       std::make_index_sequence<Functor::kNumInputs>{});
      });
    } else if (plan.numel > 0) {
      const int64_t extent = plan.shape[plan.ndim - 1];
      parallel_for_rows(plan.numel / extent, extent, [&](int64_t begin, int64_t end) {
        run_strided(functor, plan, begin, end, target, in);
      });
    }
    return OPRT_SUCCESS;
  });
}

}  // namespace cpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_ELEMENTWISE_ELEMENTWISE_CPU_H_
