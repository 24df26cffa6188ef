// The cpu backend's conversions of whole blocks: stored values to float and
// back, n at a time, so that the loops between them run on floats.
//
// Converting element by element inside a loop (to_float/from_float of
// numeric.h) left GCC's f16 loops scalar: relu over 2^20 random f16 values took
// 7.4 ms on one core, where torch takes 0.09 ms. f16 blocks convert with the
// F16C instructions when the CPU has them (checked once; eight values per
// instruction, rounding to nearest even as numeric.h does), else with
// numeric.h's conversions; bf16 is a shift. float data needs none: the
// kernels read and write it in place.
#ifndef OPERATOR_RUNTIME_CORE_CONVERT_CPU_H_
#define OPERATOR_RUNTIME_CORE_CONVERT_CPU_H_

#include <cstdint>

#include "runtime/core/numeric.h"

// OPRT_CPU_CLONES on a cpu kernel's row loop: GCC compiles it twice, for
// x86-64-v3 (AVX2 and FMA: eight floats a vector) and for any x86-64, and the
// loader picks one for the CPU it runs on. Only loops whose work is arithmetic
// (softmax's exponentials, the lanes of a sum) gain. Both copies round every
// operation alike: CPU_KERNEL_COPTS turns off FMA contraction, and each of a
// sum's lanes adds its elements in order whatever the vector width.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OPRT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default"), flatten))
#else
#define OPRT_CPU_CLONES
#endif

namespace oprt {
namespace cpu {

// Values a block loop converts at a time: its float buffers stay in L1.
constexpr int64_t kConvertBlock = 1024;

void to_floats(const f16* in, float* out, int64_t n);
void to_floats(const bf16* in, float* out, int64_t n);
void from_floats(const float* in, f16* out, int64_t n);
void from_floats(const float* in, bf16* out, int64_t n);

}  // namespace cpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_CORE_CONVERT_CPU_H_
