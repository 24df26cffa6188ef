// softmax_backward's cpu backend: the readable reference, one row at a time: the
// row's sum of dy * y (in float lanes, blocks of them summed in double,
// reduction_cpu.h), then y * (dy - sum) for each element. Rows are split across
// the cores (parallel_for) when there are enough of them. Stride-1 rows take an
// x86 path where the CPU has AVX2 and F16C: the same arithmetic sixteen values a
// step, converted where they are used.
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

#if OPRT_HAS_X86_PATHS
// Stride-1 rows on x86 (cpu_has_avx2_f16c): softmax_backward_rows<T, true>'s
// arithmetic in the same order (sum_in_lanes16), so the same bits, with 16-bit
// values converted in registers where they are used: the portable loops leave
// f16's conversions scalar (and went through float buffers for them). 4096x128
// on one core took 328 us (f16) and 400 us (bf16) there, 159 and 233 here; torch
// 130-138 and 152-160.
template <class T>
OPRT_X86_AVX2 void softmax_backward_rows_x86(const ReductionPlan& plan, int64_t row_begin,
                                             int64_t row_end, T* out, const T* dy, const T* y) {
  const int64_t length = plan.row_length;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const RowStart start = row_start(plan.row_offsets, row);
    const T* const dy_row = dy + start.in;
    const T* const y_row = y + start.second_in;
    T* const target = out + start.out;
    const auto dot = static_cast<float>(sum_in_lanes16<T>(
        length,
        [&](int64_t i) OPRT_X86_AVX2 {
          const Floats16 dy16 = load_floats16(dy_row + i);
          const Floats16 y16 = load_floats16(y_row + i);
          return Floats16{_mm256_mul_ps(dy16.first, y16.first),
                          _mm256_mul_ps(dy16.second, y16.second)};
        },
        [&](int64_t i) { return to_float(dy_row[i]) * to_float(y_row[i]); }));
    const __m256 dots = _mm256_set1_ps(dot);
    const auto dx = [&](__m256 y8, __m256 dy8) OPRT_X86_AVX2 {
      return _mm256_mul_ps(y8, _mm256_sub_ps(dy8, dots));
    };
    int64_t i = 0;
    for (; i + 16 <= length; i += 16) {
      const Floats16 y16 = load_floats16(y_row + i);
      const Floats16 dy16 = load_floats16(dy_row + i);
      store_floats16(target + i, {dx(y16.first, dy16.first), dx(y16.second, dy16.second)});
    }
    for (; i < length; ++i) {
      target[i] = from_float<T>(to_float(y_row[i]) * (to_float(dy_row[i]) - dot));
    }
  }
}
#endif

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
#if OPRT_HAS_X86_PATHS
      if (contiguous && cpu_has_avx2_f16c()) {
        softmax_backward_rows_x86<T>(plan, begin, end, target, dy, y);
        return;
      }
#endif
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
