// The cpu backends' reductions over one row, written in the shape GCC vectorises
// (ops/<op>/cpu compiles with -O3, tools/cc's CPU_KERNEL_COPTS): the row is dealt
// across kLanes independent partial results (element i to lane i % kLanes) instead of
// one running sum or maximum, whose every step would wait on the one before (and
// float additions may not be reordered without -ffast-math).
#ifndef OPERATOR_RUNTIME_REDUCTION_REDUCTION_CPU_H_
#define OPERATOR_RUNTIME_REDUCTION_REDUCTION_CPU_H_

#include <algorithm>
#include <cstdint>
#include <limits>

#include "runtime/core/convert_cpu.h"

namespace oprt {
namespace cpu {

constexpr int64_t kLanes = 16;
// Elements whose float lanes are summed before they join the row's double total: a
// lane adds at most kLaneBlock / kLanes values in float, so the sum keeps about the
// accuracy of a double accumulator (the case tables' f32 tolerance is n * eps).
constexpr int64_t kLaneBlock = 4096;

// The total of the kLanes float lanes, in double, added pairwise (four levels
// of independent additions) rather than one after another: on softmax_backward's
// 128-element rows that chain of sixteen dependent additions took about 40 % of
// the time.
inline double fold_lanes(const float* lanes) {
  static_assert(kLanes == 16, "four levels of pairs");
  double wide[kLanes];
  for (int64_t k = 0; k < 16; ++k) wide[k] = lanes[k];
  for (int64_t k = 0; k < 8; ++k) wide[k] += wide[k + 8];
  for (int64_t k = 0; k < 4; ++k) wide[k] += wide[k + 4];
  for (int64_t k = 0; k < 2; ++k) wide[k] += wide[k + 2];
  return wide[0] + wide[1];
}

// The sum of term(i) over i in [0, length), term returning a float.
template <class Term>
double sum_in_lanes(int64_t length, Term term) {
  double total = 0.0;
  for (int64_t block = 0; block < length; block += kLaneBlock) {
    const int64_t end = std::min(length, block + kLaneBlock);
    float lanes[kLanes] = {};
    int64_t i = block;
    for (; i + kLanes <= end; i += kLanes) {
      for (int64_t k = 0; k < kLanes; ++k) lanes[k] += term(i + k);
    }
    for (; i < end; ++i) lanes[0] += term(i);
    total += fold_lanes(lanes);
  }
  return total;
}

#if OPRT_HAS_X86_PATHS
// fold_lanes of lanes 0-7 in low and 8-15 in high, the same additions in
// registers.
OPRT_X86_AVX2 inline double fold_lanes8(__m256 low, __m256 high) {
  const __m256d first_four = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(low)),
                                           _mm256_cvtps_pd(_mm256_castps256_ps128(high)));
  const __m256d last_four = _mm256_add_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(low, 1)),
                                          _mm256_cvtps_pd(_mm256_extractf128_ps(high, 1)));
  const __m256d four = _mm256_add_pd(first_four, last_four);
  const __m128d two = _mm_add_pd(_mm256_castpd256_pd128(four), _mm256_extractf128_pd(four, 1));
  return _mm_cvtsd_f64(_mm_add_sd(two, _mm_unpackhi_pd(two, two)));
}

// sum_in_lanes in OPRT_X86_AVX2 code: eight_terms(i) is terms i to i + 7 in one
// register, term(i) one term (for the row's last length % 16). Lanes 0-7 and
// 8-15 are two registers that add the same terms in the same order, and fold
// alike, so the sum is sum_in_lanes' to the bit.
template <class EightTerms, class Term>
OPRT_X86_AVX2 double sum_in_lanes8(int64_t length, EightTerms eight_terms, Term term) {
  static_assert(kLanes == 16, "lanes 0-7 and 8-15 are two registers of eight floats");
  double total = 0.0;
  for (int64_t block = 0; block < length; block += kLaneBlock) {
    const int64_t end = std::min(length, block + kLaneBlock);
    __m256 low = _mm256_setzero_ps();
    __m256 high = _mm256_setzero_ps();
    int64_t i = block;
    for (; i + kLanes <= end; i += kLanes) {
      low = _mm256_add_ps(low, eight_terms(i));
      high = _mm256_add_ps(high, eight_terms(i + 8));
    }
    if (i < end) {
      float first = _mm256_cvtss_f32(low);
      for (; i < end; ++i) first += term(i);
      low = _mm256_blend_ps(low, _mm256_set1_ps(first), 1);
    }
    total += fold_lanes8(low, high);
  }
  return total;
}
#endif

// The largest value(i) over i in [0, length) (-inf when empty); a NaN is skipped.
template <class Value>
float max_in_lanes(int64_t length, Value value) {
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= length; i += kLanes) {
    for (int64_t k = 0; k < kLanes; ++k) lanes[k] = std::max(lanes[k], value(i + k));
  }
  for (; i < length; ++i) lanes[0] = std::max(lanes[0], value(i));
  float max = lanes[0];
  for (int64_t k = 1; k < kLanes; ++k) max = std::max(max, lanes[k]);
  return max;
}

}  // namespace cpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_REDUCTION_REDUCTION_CPU_H_
