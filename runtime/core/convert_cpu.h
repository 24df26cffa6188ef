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

// OPRT_HAS_X86_PATHS: this build has the x86 paths of the cpu kernels, compiled
// for instructions beyond the build's target (target attributes) and run only
// where the CPU has them (cpu_has_f16c, cpu_has_avx2_f16c).
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OPRT_HAS_X86_PATHS 1
#endif

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

#if OPRT_HAS_X86_PATHS
// On a cpu kernel's stride-1 path (a function, or a lambda after its parameter
// list): compiled for AVX2 and F16C, run only where cpu_has_avx2_f16c().
#define OPRT_X86_AVX2 __attribute__((target("avx2,f16c")))

// Whether this CPU has AVX2 and F16C, asked once.
bool cpu_has_avx2_f16c();

// Eight consecutive values of T as the floats of one AVX register, and back,
// for OPRT_X86_AVX2 code: f16 through F16C, rounding back to nearest even as
// numeric.h's from_float does, so a loop over these gives the portable loop's
// results to the bit. (bf16 goes sixteen at a time: load_floats16.)
OPRT_X86_AVX2 inline __m256 load_floats8(const float* values) { return _mm256_loadu_ps(values); }
OPRT_X86_AVX2 inline __m256 load_floats8(const f16* values) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
}

OPRT_X86_AVX2 inline void store_floats8(float* values, __m256 floats) {
  _mm256_storeu_ps(values, floats);
}
OPRT_X86_AVX2 inline void store_floats8(f16* values, __m256 floats) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(values),
                   _mm256_cvtps_ph(floats, _MM_FROUND_TO_NEAREST_INT));
}
// bf16 rounded to nearest even in the high half of each 32-bit lane (the low
// half is left over), a quiet NaN for a NaN as numeric.h's from_float.
OPRT_X86_AVX2 inline __m256i round_to_bf16_high(__m256 floats) {
  const __m256i bits = _mm256_castps_si256(floats);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
  const __m256i quiet_nan = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
  const __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(floats, floats, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
}

// Sixteen consecutive values of T as the floats of two registers, in T's
// layout: float and f16 values 0-7 in first and 8-15 in second; bf16 its even
// values in first and its odd ones in second (kEvenOddLayout), which a shift and
// a mask separate and an OR joins again, where widening eight in order costs
// lane-crossing shuffles (the port that limited softmax_backward's bf16 rows).
// Elementwise work does not care which value is in which lane; a sum does, and
// folds by the layout (fold_lanes16).
struct Floats16 {
  __m256 first;
  __m256 second;
};

template <class T>
constexpr bool kEvenOddLayout = std::is_same_v<T, bf16>;

template <class T>
OPRT_X86_AVX2 inline Floats16 load_floats16(const T* values) {
  if constexpr (kEvenOddLayout<T>) {
    const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16)),
            _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32(-65536)))};
  } else {
    return {load_floats8(values), load_floats8(values + 8)};
  }
}

template <class T>
OPRT_X86_AVX2 inline void store_floats16(T* values, Floats16 floats) {
  if constexpr (kEvenOddLayout<T>) {
    const __m256i even = _mm256_srli_epi32(round_to_bf16_high(floats.first), 16);
    const __m256i odd =
        _mm256_and_si256(round_to_bf16_high(floats.second), _mm256_set1_epi32(-65536));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(values), _mm256_or_si256(even, odd));
  } else {
    store_floats8(values, floats.first);
    store_floats8(values + 8, floats.second);
  }
}
#endif

void to_floats(const f16* in, float* out, int64_t n);
void from_floats(const float* in, f16* out, int64_t n);

}  // namespace cpu
}  // namespace oprt

#endif  // OPERATOR_RUNTIME_CORE_CONVERT_CPU_H_
