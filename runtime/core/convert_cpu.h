// The cpu backend's conversions of whole blocks of f16: stored values to float
// and back, n at a time, so that the loops between them run on floats.
//
// Converting element by element inside a loop (to_float/from_float of
// numeric.h) left GCC's f16 loops scalar: relu over 2^20 random f16 values took
// 7.4 ms on one core, where torch takes 0.09 ms. f16 blocks convert with the
// F16C instructions when the CPU has them (checked once; eight values per
// instruction, rounding to nearest even as numeric.h does), else with
// numeric.h's conversions. bf16 needs no blocks (a shift, and integer rounding,
// vectorise inside the loops: kConvertsInBlocks), float data no conversion.
#ifndef OPERATOR_RUNTIME_CORE_CONVERT_CPU_H_
#define OPERATOR_RUNTIME_CORE_CONVERT_CPU_H_

#include <cstdint>
#include <type_traits>

#include "runtime/core/numeric.h"

// OPRT_CPU_CLONES on a cpu kernel's loop: GCC compiles it twice, for x86-64-v3
// (AVX2 and FMA: eight floats a vector) and for any x86-64, and the loader picks
// one for the CPU it runs on. OPRT_CPU_CLONES_AVX512 adds a copy for x86-64-v4
// (AVX-512: sixteen floats), which on the 2-core CI machine ran softmax's rows
// (4096x128 f32: 485 -> 304 us) and the elementwise loops (relu_backward 2^20 f32:
// 220 -> 160 us) faster, but softmax_backward's 128-element rows (85 -> 106 us)
// and reduce_sum's 256-element f16 rows slower. Only loops whose work is
// arithmetic gain. Every copy rounds every operation alike: CPU_KERNEL_COPTS
// turns off FMA contraction, and each of a sum's lanes adds its elements in
// order whatever the vector width.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OPRT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default"), flatten))
#define OPRT_CPU_CLONES_AVX512 \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#else
#define OPRT_CPU_CLONES
#define OPRT_CPU_CLONES_AVX512
#endif

namespace oprt {
namespace cpu {

// Values a block loop converts at a time: its float buffers stay in L1.
constexpr int64_t kConvertBlock = 1024;

// Whether the cpu kernels' loops (OPRT_CPU_CLONES) read 16-bit T through
// to_floats' blocks rather than converting each element where they use it: f16,
// whose conversion GCC leaves scalar in a loop. bf16's is a shift that vectorises
// in place; through blocks, reduce_sum's bf16 rows took longer (256x262144: 8.9
// -> 10.8 ms, medians of 5), softmax's and softmax_backward's no less time, and
// the elementwise loops twice as long.
template <class T>
constexpr bool kConvertsInBlocks = std::is_same_v<T, f16>;

// Whether this CPU has the F16C instructions (and AVX), asked once: the x86 paths
// compiled for them (target attributes) run only where it does.
bool cpu_has_f16c();

void to_floats(const f16* in, float* out, int64_t n);
void from_floats(const float* in, f16* out, int64_t n);

}  // namespace cpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_CORE_CONVERT_CPU_H_
