#ifndef H3_BASE_HALF_H_
#define H3_BASE_HALF_H_

// IEEE half and bfloat16 conversions on the host, and reading and writing
// float arrays of kF32, kF16 or kBF16 elements: the one copy the loader
// (loader/dtype.h) and the kernels' CPU twins share. Header-only.
//
// Narrowing rounds to nearest, ties to even (the bits of CUDA's
// __float2half_rn / __float2bfloat16_rn); overflow gives infinity; NaN stays
// NaN (quiet). Widening is exact.

#include <cstdint>
#include <cstring>

#include "base/element_type.h"

namespace h3 {

namespace half_internal {
inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace half_internal

inline uint16_t FloatToHalf(float value) {
  const uint32_t f = half_internal::FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  const int32_t exp = static_cast<int32_t>(abs >> 23) - 127;
  if (exp >= -14) {  // normal half
    const uint32_t mant = abs & 0x7fffffu;
    uint32_t h = (static_cast<uint32_t>(exp + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry
    return sign | static_cast<uint16_t>(h);
  }
  if (exp < -25) return sign;  // below half the smallest subnormal: zero
  // Subnormal half: value = m * 2^-24, m = full mantissa >> shift.
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const int shift = -exp - 1;  // 14..24: 2^-24 units
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

inline float HalfToFloat(uint16_t bits) {
  using half_internal::BitsFloat;
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return BitsFloat(sign);
  int e = -1;  // normalise the subnormal
  do {
    ++e;
    mant <<= 1;
  } while ((mant & 0x400u) == 0);
  return BitsFloat(sign | (static_cast<uint32_t>(112 - e) << 23) |
                   ((mant & 0x3ffu) << 13));
}

inline uint16_t FloatToBFloat16(float value) {
  const uint32_t f = half_internal::FloatBits(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet
    return static_cast<uint16_t>((f >> 16) | 0x40u);
  }
  const uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>((f + rounding) >> 16);
}

inline float BFloat16ToFloat(uint16_t bits) {
  return half_internal::BitsFloat(static_cast<uint32_t>(bits) << 16);
}

// x rounded once to `type` (kF32, kF16 or kBF16) and widened back: the value
// a tensor of that type stores for x.
inline float RoundToType(float x, ElementType type) {
  switch (type) {
    case ElementType::kF16:
      return HalfToFloat(FloatToHalf(x));
    case ElementType::kBF16:
      return BFloat16ToFloat(FloatToBFloat16(x));
    default:
      return x;
  }
}

// dst[i] = element offset + i of `src`, an array of `type` (kF32, kF16 or
// kBF16), widened exactly, for i < count.
inline void LoadFloats(const void* src, ElementType type, int64_t offset,
                       int64_t count, float* dst) {
  if (type == ElementType::kF32) {
    std::memcpy(dst, static_cast<const float*>(src) + offset,
                count * sizeof(float));
    return;
  }
  const uint16_t* in = static_cast<const uint16_t*>(src) + offset;
  for (int64_t i = 0; i < count; ++i) {
    dst[i] =
        type == ElementType::kF16 ? HalfToFloat(in[i]) : BFloat16ToFloat(in[i]);
  }
}

// Element offset + i of `dst`, an array of `type`, = src[i] rounded once, for
// i < count.
inline void StoreFloats(const float* src, int64_t count, void* dst,
                        ElementType type, int64_t offset) {
  if (type == ElementType::kF32) {
    std::memcpy(static_cast<float*>(dst) + offset, src, count * sizeof(float));
    return;
  }
  uint16_t* out = static_cast<uint16_t*>(dst) + offset;
  for (int64_t i = 0; i < count; ++i) {
    out[i] = type == ElementType::kF16 ? FloatToHalf(src[i])
                                       : FloatToBFloat16(src[i]);
  }
}

}  // namespace h3

#endif  // H3_BASE_HALF_H_
