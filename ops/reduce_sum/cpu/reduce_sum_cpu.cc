// reduce_sum's cpu backend: the readable reference, one row at a time with a
// double accumulator.
#include "runtime/reduction/reduction.h"

namespace oprt {
namespace cpu {
namespace {

template <class T>
void sum_rows(const ReductionPlan& plan, T* out, const T* in) {
  for (int64_t row = 0; row < plan.rows; ++row) {
    const RowStart start = row_start(plan.row_offsets, row);
    double sum = 0.0;
    for (int64_t i = 0; i < plan.row_length; ++i) {
      sum += to_float(in[start.in + i * plan.in_axis_stride]);
    }
    out[start.out] = from_float<T>(static_cast<float>(sum));
  }
}

oprt_status_t execute(const ReductionPlan& plan, void* /*workspace*/, void* out, const void* in,
                      void* /*stream*/) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_rows(plan, static_cast<T*>(out), static_cast<const T*>(in));
    return OPRT_SUCCESS;
  });
}

const ReductionKernels kReduceSumCpu = {&prepare_whole_rows, &execute};

}  // namespace
}  // namespace cpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(reduce_sum, OPRT_BACKEND_CPU, &oprt::cpu::kReduceSumCpu);
