// Block conversions of the cpu backend (convert_cpu.h).
#include "runtime/core/convert_cpu.h"

#include <type_traits>

namespace oprt {
namespace cpu {
namespace {

template <class From, class To>
using Converter = void (*)(const From* in, To* out, int64_t n);

// The portable loop, numeric.h's conversion of each value. Always inlined, so
// that an x86 path compiled for more instructions vectorises it with them.
template <class From, class To>
__attribute__((always_inline)) inline void convert_each(const From* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<To, float>) {
      out[i] = to_float(in[i]);
    } else {
      out[i] = from_float<To>(in[i]);
    }
  }
}

#if OPRT_HAS_X86_PATHS
// Compiled for F16C whatever the build's target; called only where the
// CPU has it.
__attribute__((target("avx,f16c"))) void f16_to_floats_f16c(const f16* in, float* out,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
  }
  convert_each(in + i, out + i, n - i);
}

__attribute__((target("avx,f16c"))) void floats_to_f16_f16c(const float* in, f16* out,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), halves);
  }
  convert_each(in + i, out + i, n - i);
}

#endif

// The conversions this CPU runs, chosen once: the portable loops, replaced by
// the x86 paths where the CPU has their instructions.
struct Converters {
  Converter<f16, float> f16_to_floats = convert_each<f16, float>;
  Converter<float, f16> floats_to_f16 = convert_each<float, f16>;

  Converters() {
#if OPRT_HAS_X86_PATHS
    if (cpu_has_f16c()) {
      f16_to_floats = f16_to_floats_f16c;
      floats_to_f16 = floats_to_f16_f16c;
    }
#endif
  }
};

const Converters& converters() {
  static const Converters chosen;
  return chosen;
}

}  // namespace

bool cpu_has_f16c() {
#if OPRT_HAS_X86_PATHS
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

#if OPRT_HAS_X86_PATHS
bool cpu_has_avx2_f16c() {
  static const bool has = __builtin_cpu_supports("avx2") && cpu_has_f16c();
  return has;
}
#endif

void to_floats(const f16* in, float* out, int64_t n) { converters().f16_to_floats(in, out, n); }
void from_floats(const float* in, f16* out, int64_t n) { converters().floats_to_f16(in, out, n); }

}  // namespace cpu
}  // namespace oprt
