// softmax's cpu backend: the readable reference, one row at a time: the row's
// maximum, then the sum of exp(x - max) (each exponential in float, summed in
// double), then each exp(x - max) / sum. Rows are split across the cores
// (parallel_for) when there are enough of them.
#include <cmath>
#include <limits>

#include "runtime/core/parallel.h"
#include "runtime/reduction/reduction.h"

namespace oprt {
namespace cpu {
namespace {

template <class T>
void softmax_rows(const ReductionPlan& plan, int64_t row_begin, int64_t row_end, T* out,
                  const T* in) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    const RowStart start = row_start(plan.row_offsets, row);
    auto x = [&](int64_t i) -> float { return to_float(in[start.in + i * plan.in_axis_stride]); };
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < plan.row_length; ++i) max = std::fmax(max, x(i));
    double sum = 0.0;
    for (int64_t i = 0; i < plan.row_length; ++i) sum += std::exp(x(i) - max);
    const float scale = static_cast<float>(1.0 / sum);
    // In-place is safe: element i is read just before it is overwritten.
    for (int64_t i = 0; i < plan.row_length; ++i) {
      out[start.out + i * plan.out_axis_stride] = from_float<T>(std::exp(x(i) - max) * scale);
    }
  }
}

oprt_status_t execute(const ReductionPlan& plan, void* /*workspace*/, void* out, const void* in,
                      void* /*stream*/) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    parallel_for_rows(plan.rows, plan.row_length, [&](int64_t begin, int64_t end) {
      softmax_rows(plan, begin, end, static_cast<T*>(out), static_cast<const T*>(in));
    });
    return OPRT_SUCCESS;
  });
}

const ReductionKernels kSoftmaxCpu = {&prepare_whole_rows, &execute};

}  // namespace
}  // namespace cpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(softmax, OPRT_BACKEND_CPU, &oprt::cpu::kSoftmaxCpu);
