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
// of independent additions) rather than one after another: perf put about 40 %
// of the samples of softmax_backward's 128-element rows on that chain of sixteen
// dependent additions.
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
// The low and high four floats of a register, widened to double.
OPRT_X86_AVX2 inline __m256d low_half_in_double(__m256 r) {
  return _mm256_cvtps_pd(_mm256_castps256_ps128(r));
}
OPRT_X86_AVX2 inline __m256d high_half_in_double(__m256 r) {
  return _mm256_cvtps_pd(_mm256_extractf128_ps(r, 1));
}

// Four partial totals: slots 0 + 2 and 1 + 3, then those two.
OPRT_X86_AVX2 inline double fold_four(__m256d four) {
  const __m128d two = _mm_add_pd(_mm256_castpd256_pd128(four), _mm256_extractf128_pd(four, 1));
  return _mm_cvtsd_f64(_mm_add_sd(two, _mm_unpackhi_pd(two, two)));
}

// fold_lanes of 16 lanes held in a Floats16 in T's layout (convert_cpu.h), the
// same additions in registers: lanes k and k + 8 (then k + 4, k + 2) are the
// same slot of the two registers in the consecutive layout, and slots m and
// m + 4 (then m + 2, m + 1) of one register in the even-odd one.
template <class T>
OPRT_X86_AVX2 double fold_lanes16(Floats16 lanes) {
  const __m256d first_low = low_half_in_double(lanes.first);
  const __m256d first_high = high_half_in_double(lanes.first);
  const __m256d second_low = low_half_in_double(lanes.second);
  const __m256d second_high = high_half_in_double(lanes.second);
  if constexpr (kEvenOddLayout<T>) {
    return fold_four(_mm256_add_pd(first_low, first_high)) +
           fold_four(_mm256_add_pd(second_low, second_high));
  } else {
    return fold_four(_mm256_add_pd(_mm256_add_pd(first_low, second_low),
                                   _mm256_add_pd(first_high, second_high)));
  }
}

// sum_in_lanes in OPRT_X86_AVX2 code: sixteen_terms(i) is terms i to i + 15 in
// T's layout (load_floats16), term(i) one term (for the row's last length % 16,
// which go to lane 0, slot 0 of first in either layout). Each lane adds the
// same terms in the same order as sum_in_lanes' array, and fold_lanes16 adds the
// lanes alike, so the sum is sum_in_lanes' to the bit.
template <class T, class SixteenTerms, class Term>
OPRT_X86_AVX2 double sum_in_lanes16(int64_t length, SixteenTerms sixteen_terms, Term term) {
  static_assert(kLanes == 16, "the lanes are one Floats16");
  double total = 0.0;
  for (int64_t block = 0; block < length; block += kLaneBlock) {
    const int64_t end = std::min(length, block + kLaneBlock);
    Floats16 lanes = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = block;
    for (; i + kLanes <= end; i += kLanes) {
      const Floats16 terms = sixteen_terms(i);
      lanes.first = _mm256_add_ps(lanes.first, terms.first);
      lanes.second = _mm256_add_ps(lanes.second, terms.second);
    }
    if (i < end) {
      float lane_0 = _mm256_cvtss_f32(lanes.first);
      for (; i < end; ++i) lane_0 += term(i);
      lanes.first = _mm256_blend_ps(lanes.first, _mm256_set1_ps(lane_0), 1);
    }
    total += fold_lanes16<T>(lanes);
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
