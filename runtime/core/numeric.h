// Element types shared by host and device code: 16-bit float storage with
// exact round-to-nearest-even conversions, dtype -> storage-type traits, and
// dispatch_dtype(), which instantiates a backend's code once per dtype.
//
// Kernels load storage values, compute in f32 and store back in the dtype.
// f16/bf16 are plain 16-bit structs on host and device alike; only the
// conversion functions differ (hardware intrinsics in device code).
#ifndef OPERATOR_RUNTIME_CORE_NUMERIC_H_
#define OPERATOR_RUNTIME_CORE_NUMERIC_H_

#include <cstdint>
#include <cstring>

#include "runtime/core/core.h"

// nvcc, or MetaX's mxcc (whose CUDA-named headers come from its cu-bridge).
#if defined(__CUDACC__) || defined(__MACACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define OPRT_HOST_DEVICE __host__ __device__
#else
#define OPRT_HOST_DEVICE
#endif
// The device pass of either compiler: conversions use the hardware intrinsics.
#if defined(__CUDA_ARCH__) || defined(__MACA_ARCH__)
#define OPRT_DEVICE_PASS 1
#endif

namespace oprt {

struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};

namespace detail {

inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The host conversions are branch-free (selects, not ifs), so the cpu backend's loops
// over them vectorise: with branches relu on f16 ran at 0.03x torch.

inline uint16_t host_float_to_f16(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  // |value|'s bits; as a signed int the comparisons below are single instructions.
  const int32_t magnitude = static_cast<int32_t>(bits & 0x7fffffffu);
  const uint32_t m = static_cast<uint32_t>(magnitude);
  // NaN stays a quiet NaN and keeps the top payload bits.
  const uint32_t nan = 0x7e00u | ((m >> 13) & 0x3ffu);
  // Normal f16: rebias the exponent 127 -> 15 (adding -112 << 23) and round to
  // nearest even by adding 0xfff plus the lowest kept bit before the shift. Values
  // from 65520 up round into the exponent's all-ones pattern: inf.
  const uint32_t normal = (m + 0xc8000fffu + ((m >> 13) & 1u)) >> 13;
  // Subnormal f16 (below 2^-14): adding 0.5 lines the value up with f16's last
  // subnormal bit, and the float addition rounds it (to nearest even); a carry
  // into bit 10 yields the smallest normal, which is correct.
  const uint32_t subnormal = float_bits(bits_float(m) + 0.5f) - 0x3f000000u;
  const uint32_t result = magnitude > 0x7f800000   ? nan
                          : magnitude >= 0x47800000 ? 0x7c00u
                          : magnitude >= 0x38800000 ? normal
                                                    : subnormal;
  return static_cast<uint16_t>(sign | result);
}

inline float host_f16_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  // Exponent and significand moved to their float positions.
  const uint32_t magnitude = static_cast<uint32_t>(half & 0x7fffu) << 13;
  // Normal and subnormal f16: a float multiply by 2^112 rebiases the exponent
  // 15 -> 127 and normalises a subnormal, exactly. Inf and NaN: all-ones exponent.
  const uint32_t finite = float_bits(bits_float(magnitude) * 0x1p112f);
  const uint32_t special = magnitude | 0x7f800000u;
  return bits_float(sign | (magnitude >= (0x7c00u << 13) ? special : finite));
}

inline uint16_t host_float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  // NaN: truncate, forcing the quiet bit. Otherwise round to nearest even; overflow
  // carries into the exponent and produces inf, as it should.
  const uint32_t nan = (bits >> 16) | 0x0040u;
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float host_bf16_to_float(uint16_t value) {
  return bits_float(static_cast<uint32_t>(value) << 16);
}

}  // namespace detail

OPRT_HOST_DEVICE inline float to_float(float value) { return value; }

OPRT_HOST_DEVICE inline float to_float(f16 value) {
#if defined(OPRT_DEVICE_PASS)
  return __half2float(__ushort_as_half(value.bits));
#else
  return detail::host_f16_to_float(value.bits);
#endif
}

OPRT_HOST_DEVICE inline float to_float(bf16 value) {
#if defined(OPRT_DEVICE_PASS)
  return __bfloat162float(__ushort_as_bfloat16(value.bits));
#else
  return detail::host_bf16_to_float(value.bits);
#endif
}

template <class T>
OPRT_HOST_DEVICE T from_float(float value);

template <>
OPRT_HOST_DEVICE inline float from_float<float>(float value) {
  return value;
}

template <>
OPRT_HOST_DEVICE inline f16 from_float<f16>(float value) {
#if defined(OPRT_DEVICE_PASS)
  return f16{__half_as_ushort(__float2half_rn(value))};
#else
  return f16{detail::host_float_to_f16(value)};
#endif
}

template <>
OPRT_HOST_DEVICE inline bf16 from_float<bf16>(float value) {
#if defined(OPRT_DEVICE_PASS)
  return bf16{__bfloat16_as_ushort(__float2bfloat16_rn(value))};
#else
  return bf16{detail::host_float_to_bf16(value)};
#endif
}

// The storage type of each dtype: DtypeTraits<OPRT_DTYPE_BF16>::type is bf16.
template <oprt_dtype_t dtype>
struct DtypeTraits;
template <>
struct DtypeTraits<OPRT_DTYPE_F32> {
  using type = float;
};
template <>
struct DtypeTraits<OPRT_DTYPE_F16> {
  using type = f16;
};
template <>
struct DtypeTraits<OPRT_DTYPE_BF16> {
  using type = bf16;
};

template <class T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) with T the storage type of dtype and returns its
// status: `dispatch_dtype(dt, [&](auto tag) { using T = typename decltype(tag)::type; ... })`.
template <class Fn>
oprt_status_t dispatch_dtype(oprt_dtype_t dtype, Fn&& fn) {
  switch (dtype) {
    case OPRT_DTYPE_F32: return fn(TypeTag<float>{});
    case OPRT_DTYPE_F16: return fn(TypeTag<f16>{});
    case OPRT_DTYPE_BF16: return fn(TypeTag<bf16>{});
  }
  return fail(OPRT_ERR_UNSUPPORTED_DTYPE, "unknown dtype %d", static_cast<int>(dtype));
}

}  // namespace oprt

#endif  // OPERATOR_RUNTIME_CORE_NUMERIC_H_
