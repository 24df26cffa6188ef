// softmax's cpu backend: the readable reference, one row at a time: the row's
// maximum, then the sum of exp(x - max) (in float lanes, blocks of them summed in
// double), then each exp(x - max) / sum. Rows are split across the cores
// (parallel_for) when there are enough of them. The loops are written to vectorise
// (ops/<op>/cpu compiles with tools/cc's CPU_KERNEL_COPTS): independent lanes instead
// of one running maximum or sum, and a branch-free exponential instead of libm's,
// computed once per element.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/core/parallel.h"
#include "runtime/reduction/reduction.h"

namespace oprt {
namespace cpu {
namespace {

// Independent partial results a row is dealt across (element i to lane i % kLanes),
// and the elements whose float lanes are summed before they join the double total.
constexpr int64_t kLanes = 16;
constexpr int64_t kBlock = 4096;

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

// kContiguous: the rows have stride 1 in in and out, known to the compiler, which
// vectorises the lanes only then.
template <class T, bool kContiguous>
void softmax_rows(const ReductionPlan& plan, int64_t row_begin, int64_t row_end, T* out,
                  const T* in) {
  const int64_t length = plan.row_length;
  const int64_t in_stride = kContiguous ? 1 : plan.in_axis_stride;
  // A row's exponentials, computed once: recomputing them in the last pass doubled
  // the time, and keeping them in a half-precision output would round them twice.
  std::vector<float> row_exponentials(static_cast<size_t>(length));
  float* const exponentials = row_exponentials.data();
  for (int64_t row = row_begin; row < row_end; ++row) {
    const RowStart start = row_start(plan.row_offsets, row);
    const T* const source = in + start.in;
    auto x = [&](int64_t i) -> float { return to_float(source[i * in_stride]); };
    // The maximum, lane by lane (a NaN is skipped here and spreads through the sum).
    float max_lanes[kLanes];
    std::fill(max_lanes, max_lanes + kLanes, -std::numeric_limits<float>::infinity());
    int64_t i = 0;
    for (; i + kLanes <= length; i += kLanes) {
      for (int64_t k = 0; k < kLanes; ++k) {
        const float value = x(i + k);
        max_lanes[k] = std::max(max_lanes[k], value);
      }
    }
    for (; i < length; ++i) max_lanes[0] = std::max(max_lanes[0], x(i));
    float max = max_lanes[0];
    for (int64_t k = 1; k < kLanes; ++k) max = std::max(max, max_lanes[k]);
    // sum(exp(x - max)): float lanes per block, the blocks in double. Each exponential
    // is kept in `exponentials`, so the last pass only scales it.
    double sum = 0.0;
    for (int64_t block = 0; block < length; block += kBlock) {
      const int64_t end = std::min(length, block + kBlock);
      float lanes[kLanes] = {};
      int64_t j = block;
      for (; j + kLanes <= end; j += kLanes) {
        for (int64_t k = 0; k < kLanes; ++k) {
          exponentials[j + k] = exp_nonpositive(x(j + k) - max);
          lanes[k] += exponentials[j + k];
        }
      }
      for (; j < end; ++j) {
        exponentials[j] = exp_nonpositive(x(j) - max);
        lanes[0] += exponentials[j];
      }
      for (int64_t k = 0; k < kLanes; ++k) sum += lanes[k];
    }
    const float scale = static_cast<float>(1.0 / sum);
    // In-place is safe: the input is no longer read.
    T* const target = out + start.out;
    const int64_t out_stride = kContiguous ? 1 : plan.out_axis_stride;
    for (int64_t j = 0; j < length; ++j) {
      target[j * out_stride] = from_float<T>(exponentials[j] * scale);
    }
  }
}

oprt_status_t execute(const ReductionPlan& plan, void* /*workspace*/, void* out, const void* in,
                      void* /*stream*/) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* const target = static_cast<T*>(out);
    const T* const source = static_cast<const T*>(in);
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
