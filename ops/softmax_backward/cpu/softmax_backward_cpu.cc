// softmax_backward's cpu backend: the readable reference, one row at a time: the
// row's sum of dy * y (in float lanes, blocks of them summed in double,
// reduction_cpu.h), then y * (dy - sum) for each element. Rows are split across
// the cores (parallel_for) when there are enough of them.
#include <algorithm>

#include "runtime/core/convert_cpu.h"
#include "runtime/core/parallel.h"
#include "runtime/reduction/reduction.h"
#include "runtime/reduction/reduction_cpu.h"

namespace oprt {
namespace cpu {
namespace {

// kContiguous: the rows have stride 1 in dy, y and out, known to the compiler,
// which vectorises the lanes only then.
template <class T, bool kContiguous>
OPRT_CPU_CLONES void softmax_backward_rows(const ReductionPlan& plan, int64_t row_begin,
                                           int64_t row_end, T* out, const T* dy, const T* y) {
  const int64_t length = plan.row_length;
  const int64_t dy_stride = kContiguous ? 1 : plan.in_axis_stride;
  const int64_t y_stride = kContiguous ? 1 : plan.second_in_axis_stride;
  const int64_t out_stride = kContiguous ? 1 : plan.out_axis_stride;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const RowStart start = row_start(plan.row_offsets, row);
    const T* const dy_row = dy + start.in;
    const T* const y_row = y + start.second_in;
    T* const target = out + start.out;
    if constexpr (kContiguous && kConvertsInBlocks<T>) {
      // A block at a time through float buffers (convert_cpu.h): f16 converted
      // element by element left these loops scalar (4096x128 ran at 0.03x torch).
      float dy_block[kConvertBlock];
      float y_block[kConvertBlock];
      const auto load = [&](int64_t first, int64_t count) {
        to_floats(dy_row + first, dy_block, count);
        to_floats(y_row + first, y_block, count);
      };
      double dot = 0.0;
      for (int64_t first = 0; first < length; first += kConvertBlock) {
        const int64_t count = std::min(kConvertBlock, length - first);
        load(first, count);
        dot += sum_in_lanes(count, [&](int64_t i) { return dy_block[i] * y_block[i]; });
      }
      // A row of one block is still in the buffers: it is converted once.
      const bool row_in_one_block = length <= kConvertBlock;
      for (int64_t first = 0; first < length; first += kConvertBlock) {
        const int64_t count = std::min(kConvertBlock, length - first);
        if (!row_in_one_block) load(first, count);
        for (int64_t i = 0; i < count; ++i) {
          dy_block[i] = y_block[i] * (dy_block[i] - static_cast<float>(dot));
        }
        from_floats(dy_block, target + first, count);
      }
      continue;
    }
    auto dy_at = [&](int64_t i) -> float { return to_float(dy_row[i * dy_stride]); };
    auto y_at = [&](int64_t i) -> float { return to_float(y_row[i * y_stride]); };
    const auto dot =
        static_cast<float>(sum_in_lanes(length, [&](int64_t i) { return dy_at(i) * y_at(i); }));
    // In place (out is dy or y) is safe: each element is read before it is written.
    for (int64_t i = 0; i < length; ++i) {
      target[i * out_stride] = from_float<T>(y_at(i) * (dy_at(i) - dot));
    }
  }
}

oprt_status_t execute(const ReductionPlan& plan, void* /*workspace*/, void* out,
                      const void* const* inputs, void* /*stream*/) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* const target = static_cast<T*>(out);
    const T* const dy = static_cast<const T*>(inputs[0]);
    const T* const y = static_cast<const T*>(inputs[1]);
    const bool contiguous = plan.in_axis_stride == 1 && plan.second_in_axis_stride == 1 &&
                            plan.out_axis_stride == 1;
    parallel_for_rows(plan.rows, plan.row_length, [&](int64_t begin, int64_t end) {
      if (contiguous) {
        softmax_backward_rows<T, true>(plan, begin, end, target, dy, y);
      } else {
        softmax_backward_rows<T, false>(plan, begin, end, target, dy, y);
      }
    });
    return OPRT_SUCCESS;
  });
}

const ReductionKernels kSoftmaxBackwardCpu = {&prepare_whole_rows, &execute};

}  // namespace
}  // namespace cpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(softmax_backward, OPRT_BACKEND_CPU, &oprt::cpu::kSoftmaxBackwardCpu);
