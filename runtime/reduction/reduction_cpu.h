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

namespace oprt {
namespace cpu {

constexpr int64_t kLanes = 16;
// Elements whose float lanes are summed before they join the row's double total: a
// lane adds at most kLaneBlock / kLanes values in float, so the sum keeps about the
// accuracy of a double accumulator (the case tables' f32 tolerance is n * eps).
constexpr int64_t kLaneBlock = 4096;

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
    for (int64_t k = 0; k < kLanes; ++k) total += lanes[k];
  }
  return total;
}

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
