// Block conversions of the cpu backend (convert_cpu.h).
#include "runtime/core/convert_cpu.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OPRT_HAS_X86_PATHS 1
#endif

namespace oprt {
namespace cpu {
namespace {

#if OPRT_HAS_X86_PATHS
// Compiled for F16C or AVX2 whatever the build's target; called only where the
// CPU has it.
__attribute__((target("avx,f16c"))) void f16_to_floats_f16c(const f16* in, float* out,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
  }
  for (; i < n; ++i) out[i] = to_float(in[i]);
}

__attribute__((target("avx,f16c"))) void floats_to_f16_f16c(const float* in, f16* out,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), halves);
  }
  for (; i < n; ++i) out[i] = from_float<f16>(in[i]);
}

// The same loop as from_floats' portable one, vectorised for AVX2: SSE2 has no
// 32-to-16-bit pack of unsigned values, which made that loop 7x slower than the
// bf16-to-float one.
__attribute__((target("avx2"))) void floats_to_bf16_avx2(const float* in, bf16* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = from_float<bf16>(in[i]);
}

bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

}  // namespace

void to_floats(const float* in, float* out, int64_t n) {
  std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
}

void to_floats(const f16* in, float* out, int64_t n) {
#if OPRT_HAS_X86_PATHS
  if (cpu_has_f16c()) return f16_to_floats_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = to_float(in[i]);
}

void to_floats(const bf16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = to_float(in[i]);
}

void from_floats(const float* in, float* out, int64_t n) {
  std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
}

void from_floats(const float* in, f16* out, int64_t n) {
#if OPRT_HAS_X86_PATHS
  if (cpu_has_f16c()) return floats_to_f16_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = from_float<f16>(in[i]);
}

void from_floats(const float* in, bf16* out, int64_t n) {
#if OPRT_HAS_X86_PATHS
  if (cpu_has_avx2()) return floats_to_bf16_avx2(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = from_float<bf16>(in[i]);
}

}  // namespace cpu
}  // namespace oprt
