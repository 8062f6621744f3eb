#ifndef H3_BASE_HALF_FLOAT_H_
#define H3_BASE_HALF_FLOAT_H_

// IEEE half (fp16) and bfloat16 bits to and from float on the host, and
// elements of a float tensor of any of kF32, kF16 and kBF16. The loader
// converts checkpoints with these; the CPU kernels read and write 16-bit
// activations with them (the CUDA kernels' __float2half_rn and
// __float2bfloat16_rn give the same bits for every non-NaN value).

#include <cstdint>
#include <cstring>

#include "base/element_type.h"

namespace h3 {

// Narrowing rounds to nearest, ties to even; overflow gives infinity; NaN
// stays NaN (quiet). Widening is exact.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

// Element i of `data`, an array of `type` (kF32, kF16 or kBF16), as float.
inline float LoadFloat(const void* data, ElementType type, int64_t i) {
  switch (type) {
    case ElementType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case ElementType::kBF16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

// Stores `value` rounded once to `type` (kF32, kF16 or kBF16) as element i.
inline void StoreFloat(void* data, ElementType type, int64_t i, float value) {
  switch (type) {
    case ElementType::kF16:
      static_cast<uint16_t*>(data)[i] = FloatToHalf(value);
      return;
    case ElementType::kBF16:
      static_cast<uint16_t*>(data)[i] = FloatToBFloat16(value);
      return;
    default:
      static_cast<float*>(data)[i] = value;
  }
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

#endif  // H3_BASE_HALF_FLOAT_H_
