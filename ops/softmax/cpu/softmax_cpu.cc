// softmax's cpu backend: the readable reference, one row at a time: the row's
// maximum, then sum(exp(x - max)) in double, then each exp(x - max) / sum.
#include <cmath>
#include <limits>

#include "runtime/reduction/reduction.h"

namespace oprt {
namespace cpu {
namespace {

template <class T>
void softmax_rows(const ReductionPlan& plan, T* out, const T* in) {
  for (int64_t row = 0; row < plan.rows; ++row) {
    const RowStart start = row_start(plan.row_offsets, row);
    auto x = [&](int64_t i) -> double { return to_float(in[start.in + i * plan.in_axis_stride]); };
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < plan.row_length; ++i) max = std::fmax(max, x(i));
    double sum = 0.0;
    for (int64_t i = 0; i < plan.row_length; ++i) sum += std::exp(x(i) - max);
    // In-place is safe: element i is read just before it is overwritten.
    for (int64_t i = 0; i < plan.row_length; ++i) {
      out[start.out + i * plan.out_axis_stride] =
          from_float<T>(static_cast<float>(std::exp(x(i) - max) / sum));
    }
  }
}

oprt_status_t execute(const ReductionPlan& plan, void* /*workspace*/, void* out, const void* in,
                      void* /*stream*/) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_rows(plan, static_cast<T*>(out), static_cast<const T*>(in));
    return OPRT_SUCCESS;
  });
}

const ReductionKernels kSoftmaxCpu = {&prepare_whole_rows, &execute};

}  // namespace
}  // namespace cpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(softmax, OPRT_BACKEND_CPU, &oprt::cpu::kSoftmaxCpu);
