// reduce_sum's cpu backend: the readable reference, with a double total per
// row. Rows of stride 1 are summed one at a time, in float lanes that vectorise
// (sum_in_lanes, reduction_cpu.h). Along any other axis the
// rows that are neighbours in memory (the input's contiguous innermost
// dimension) are summed side by side, a block of them per step along the axis,
// so every step reads consecutive memory, in floats over kStepsPerFloatSum steps
// at a time before their double totals. Work is split across the cores
// (parallel_for) when there is enough of it.
#include <algorithm>
#include <type_traits>

#include "runtime/core/convert_cpu.h"
#include "runtime/core/parallel.h"
#include "runtime/reduction/reduction.h"
#include "runtime/reduction/reduction_cpu.h"

namespace oprt {
namespace cpu {
namespace {

// Neighbouring rows summed side by side along a strided axis, at most: each step
// along the axis then reads up to 8 KiB of consecutive memory. On the 2-core CI
// machine (8192x8192 summed over dim 0, medians, x torch) 256 of them ran f32 at
// 0.81-0.88x, f16 0.51-0.55x, bf16 0.79-0.80x; 2048 at 1.38-1.44x, 0.95-0.98x and
// 1.85-1.90x. The block is narrower where that gives every thread one.
constexpr int64_t kMaxColumnBlock = 2048;

#if OPRT_HAS_X86_PATHS
template <class T>
OPRT_X86_AVX2 double sum_row_x86(const T* row, int64_t length) {
  return sum_in_lanes16<T>(
      length, [&](int64_t i) OPRT_X86_AVX2 { return load_floats16(row + i); },
      [&](int64_t i) { return to_float(row[i]); });
}
#endif

// The sum of a stride-1 row, in float lanes (sum_in_lanes). On x86 with AVX2 and
// F16C each sixteen values are converted in registers where they are added
// (load_floats16): GCC leaves f16's conversion scalar inside the portable loop,
// and converting through to_floats' blocks made these rows take 1.8x bf16's time
// (256x262144 on one core: 9.3 ms, bf16 5.2, torch's f16 5.0). sum_in_lanes16
// adds the same values in the same lanes and order, so the sum is the portable
// loop's to the bit.
template <class T>
double sum_contiguous_row(const T* row, int64_t length) {
#if OPRT_HAS_X86_PATHS
  if (cpu_has_avx2_f16c()) return sum_row_x86(row, length);
#endif
  return sum_in_lanes(length, [&](int64_t i) { return to_float(row[i]); });
}

template <class T>
OPRT_CPU_CLONES void sum_rows(const ReductionPlan& plan, int64_t row_begin, int64_t row_end,
                              T* out, const T* in) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    const RowStart start = row_start(plan.row_offsets, row);
    double sum = 0.0;
    if (plan.in_axis_stride == 1) {
      sum = sum_contiguous_row(in + start.in, plan.row_length);
    } else {
      for (int64_t i = 0; i < plan.row_length; ++i) {
        sum += to_float(in[start.in + i * plan.in_axis_stride]);
      }
    }
    out[start.out] = from_float<T>(static_cast<float>(sum));
  }
}

// Steps along the axis that a column sums in float before its double total: as
// many values as one of sum_in_lanes' float lanes adds (reduction_cpu.h), so both
// paths keep one accuracy.
constexpr int64_t kStepsPerFloatSum = kLaneBlock / kLanes;

// Rows [first, first + count) that are neighbours in memory (in stride 1
// between them), summed together: sums[j] accumulates row first + j, a float
// per row over kStepsPerFloatSum steps at a time (a loop over j that
// vectorises), then into a double.
template <class T>
OPRT_CPU_CLONES void sum_neighbour_rows(const ReductionPlan& plan, int64_t first, int64_t count,
                                        T* out, const T* in) {
  double sums[kMaxColumnBlock] = {};
  float partial[kMaxColumnBlock];
  [[maybe_unused]] float converted[kMaxColumnBlock];
  const RowStart start = row_start(plan.row_offsets, first);
  for (int64_t group = 0; group < plan.row_length; group += kStepsPerFloatSum) {
    std::fill(partial, partial + count, 0.0f);
    const int64_t group_end = std::min(plan.row_length, group + kStepsPerFloatSum);
    for (int64_t i = group; i < group_end; ++i) {
      const T* step = in + start.in + i * plan.in_axis_stride;
      if constexpr (kConvertsInBlocks<T>) {
        to_floats(step, converted, count);
        for (int64_t j = 0; j < count; ++j) partial[j] += converted[j];
      } else {
        for (int64_t j = 0; j < count; ++j) partial[j] += to_float(step[j]);
      }
    }
    for (int64_t j = 0; j < count; ++j) sums[j] += partial[j];
  }
  const int64_t out_stride = plan.row_offsets.out_strides[0];
  for (int64_t j = 0; j < count; ++j) {
    out[start.out + j * out_stride] = from_float<T>(static_cast<float>(sums[j]));
  }
}

oprt_status_t execute(const ReductionPlan& plan, void* /*workspace*/, void* out,
                      const void* const* inputs, void* /*stream*/) {
  return dispatch_dtype(plan.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* const target = static_cast<T*>(out);
    const T* const source = static_cast<const T*>(inputs[0]);
    if (rows_are_neighbours(plan)) {
      // Blocks of neighbouring rows, never crossing the innermost dimension's end;
      // a column's sum does not depend on the block's width. The block count is
      // recounted from the width so that none is empty: 16 threads over 40
      // columns asked for 16 blocks of 3, and the last two started past the end.
      const int64_t inner = plan.row_offsets.sizes[0];
      const int64_t lines = plan.rows / inner;
      const int64_t wanted_blocks =
          std::min(inner, std::max((inner + kMaxColumnBlock - 1) / kMaxColumnBlock,
                                   (cpu_threads() + lines - 1) / lines));
      const int64_t width = (inner + wanted_blocks - 1) / wanted_blocks;
      const int64_t blocks_per_line = (inner + width - 1) / width;
      parallel_for_rows(lines * blocks_per_line, plan.row_length * width,
                        [&](int64_t begin, int64_t end) {
        for (int64_t block = begin; block < end; ++block) {
          const int64_t line = block / blocks_per_line;
          const int64_t column = block % blocks_per_line * width;
          sum_neighbour_rows(plan, line * inner + column, std::min(width, inner - column),
                             target, source);
        }
      });
      return OPRT_SUCCESS;
    }
    parallel_for_rows(plan.rows, plan.row_length, [&](int64_t begin, int64_t end) {
      sum_rows(plan, begin, end, target, source);
    });
    return OPRT_SUCCESS;
  });
}

const ReductionKernels kReduceSumCpu = {&prepare_whole_rows, &execute};

}  // namespace
}  // namespace cpu
}  // namespace oprt

OPRT_REGISTER_KERNEL(reduce_sum, OPRT_BACKEND_CPU, &oprt::cpu::kReduceSumCpu);
