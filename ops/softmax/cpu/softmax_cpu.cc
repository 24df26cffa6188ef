// softmax's cpu backend: the readable reference, one row at a time: the row's
// maximum, then the sum of exp(x - max) (in float lanes, blocks of them summed in
// double), then each exp(x - max) / sum. Rows are split across the cores
// (parallel_for) when there are enough of them. The loops are written to vectorise
// (ops/<op>/cpu compiles with tools/cc's CPU_KERNEL_COPTS): independent lanes instead
// of one running maximum or sum (reduction_cpu.h), and a branch-free exponential
// instead of libm's, computed once per element.
#include <cstring>
#include <memory>
#include <new>

#include "runtime/core/convert_cpu.h"
#include "runtime/core/parallel.h"
#include "runtime/reduction/reduction.h"
#include "runtime/reduction/reduction_cpu.h"

namespace oprt {
namespace cpu {
namespace {

// e^x for softmax's arguments x - max: x <= 0, -inf or NaN. Branch-free, so loops
// over it vectorise (std::exp is a libm call per element): x = k ln 2 + r with
// |r| <= ln 2 / 2 (Cody-Waite: ln 2 in two parts), Cephes' degree-6 polynomial for
// e^r, and 2^k built in the exponent field. Within 2 ulp of std::exp; below -87
// (e^x < 1.7e-38, far under any row's largest term, which is 1) it returns 0.
inline float exp_nonpositive(float x) {
  constexpr float kLowest = -87.0f;
  const float clamped = x >= kLowest ? x : kLowest;  // -inf and NaN too: keeps k an int
  // round(clamped / ln 2): adding 1.5 * 2^23 leaves the integer part in the significand.
  const float k = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (clamped - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e_r = p * r * r + r + 1.0f;
  const uint32_t scale_bits = static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const float result = x < kLowest ? 0.0f : e_r * scale;
  return x == x ? result : x;  // NaN stays NaN
}

// The three passes over one row: its maximum, the sum of its exponentials, each
// exponential over the sum. x(i) reads element i as a float, store(i, value)
// writes result i; kept, when not null, holds the row's exponentials between the
// second pass and the third (recomputing them there doubled the time, and keeping
// them in a half-precision output would round them twice). store(j, ...) comes
// after the last read of x(j), so the results may overwrite the input or kept.
template <class X, class Store>
inline void softmax_row(int64_t length, X x, float* kept, Store store) {
  // A NaN is skipped by the maximum and spreads through the sum.
  const float max = max_in_lanes(length, x);
  auto exponential = [&](int64_t i) { return exp_nonpositive(x(i) - max); };
  const auto normalize = [&](double sum, auto exponential_at) {
    const float scale = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < length; ++j) store(j, exponential_at(j) * scale);
  };
  if (kept != nullptr) {
    normalize(sum_in_lanes(length, [&](int64_t i) { return kept[i] = exponential(i); }),
              [&](int64_t j) { return kept[j]; });
  } else {
    normalize(sum_in_lanes(length, exponential), exponential);
  }
}

// kContiguous: the rows have stride 1 in in and out, known to the compiler, which
// vectorises the lanes only then.
template <class T, bool kContiguous>
OPRT_CPU_CLONES_AVX512 void softmax_rows(const ReductionPlan& plan, int64_t row_begin,
                                         int64_t row_end, T* out, const T* in) {
  const int64_t length = plan.row_length;
  const int64_t in_stride = kContiguous ? 1 : plan.in_axis_stride;
  const int64_t out_stride = kContiguous ? 1 : plan.out_axis_stride;
  // Where the buffer cannot be had, the third pass computes the exponentials
  // again (an exception must not leave a cpu thread).
  const std::unique_ptr<float[]> exponentials(new (std::nothrow) float[length]);
  float* const kept = exponentials.get();
  for (int64_t row = row_begin; row < row_end; ++row) {
    const RowStart start = row_start(plan.row_offsets, row);
    const T* const source = in + start.in;
    T* const target = out + start.out;
    if constexpr (kContiguous && kConvertsInBlocks<T>) {
      // The row converted to floats into kept and back (convert_cpu.h): every pass
      // runs on floats and the results round once.
      if (kept != nullptr) {
        to_floats(source, kept, length);
        softmax_row(length, [&](int64_t i) { return kept[i]; }, kept,
                    [&](int64_t j, float value) { kept[j] = value; });
        from_floats(kept, target, length);
        continue;
      }
    }
    softmax_row(length, [&](int64_t i) -> float { return to_float(source[i * in_stride]); }, kept,
                [&](int64_t j, float value) { target[j * out_stride] = from_float<T>(value); });
  }
}

oprt_status_t execute(const ReductionPlan& plan, void* /*workspace*/, void* out,
                      const void* const* inputs, void* /*stream*/) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* const target = static_cast<T*>(out);
    const T* const source = static_cast<const T*>(inputs[0]);
    const bool contiguous = plan.in_axis_stride == 1 && plan.out_axis_stride == 1;
    parallel_for_rows(plan.rows, plan.row_length, [&](int64_t begin, int64_t end) {
      if (contiguous) {
        softmax_rows<T, true>(plan, begin, end, target, source);
      } else {
        softmax_rows<T, false>(plan, begin, end, target, source);
      }
    });
    return OPRT_SUCCESS;
  });
}

const ReductionKernels kSoftmaxCpu = {&prepare_whole_rows, &execute};

}  // namespace
}  // namespace cpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(softmax, OPRT_BACKEND_CPU, &oprt::cpu::kSoftmaxCpu);
