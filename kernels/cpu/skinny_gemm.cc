// SkinnyGemmEmulation: the batch-invariant decode product's algorithm
// (kernels/skinny_gemm.h) step by step on the host; the GPU kernel must give
// the same bits. Compiled with -ffp-contract=off (kernels/CMakeLists.txt), so
// every * and + rounds on its own, as the kernel's _rn intrinsics do.
#include "kernels/skinny_gemm.h"

#include <cstdint>
#include <cstring>

namespace h3::kernels {
namespace {

// IEEE half to float, exactly (every half is a float).
float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {  // infinity or NaN
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | static_cast<uint32_t>(exponent + 112) << 23 | mantissa << 13;
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    bits = sign | static_cast<uint32_t>(e) << 23 | (mantissa & 0x3ffu) << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

float BFloat16BitsToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// W[j][i] widened to fp32.
float Weight(const SkinnyGemmParams& p, int64_t j, int64_t i) {
  const int64_t at = j * p.k + i;
  switch (p.w_type) {
    case ElementType::kF16:
      return HalfBitsToFloat(static_cast<const uint16_t*>(p.w)[at]);
    case ElementType::kBF16:
      return BFloat16BitsToFloat(static_cast<const uint16_t*>(p.w)[at]);
    default:  // kF32: SkinnyGemmCheck refuses the other types
      break;
  }
  return static_cast<const float*>(p.w)[at];
}

}  // namespace

void SkinnyGemmEmulation(const SkinnyGemmParams& p) {
  const int64_t chunks = (p.k + kSkinnyChunk - 1) / kSkinnyChunk;
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * p.k;
    for (int64_t j = 0; j < p.n; ++j) {
      float partial[kSkinnyLanes];
      for (int lane = 0; lane < kSkinnyLanes; ++lane) {
        float acc = 0.0f;
        for (int64_t c = 0; c < chunks; ++c) {
          for (int e = 0; e < kSkinnyLaneElems; ++e) {
            const int64_t i = c * kSkinnyChunk + lane * kSkinnyLaneElems + e;
            const float xv = i < p.k ? x[i] : 0.0f;
            const float wv = i < p.k ? Weight(p, j, i) : 0.0f;
            acc = SkinnyFma(xv, wv, acc);
          }
        }
        partial[lane] = acc;
      }
      for (int width = kSkinnyLanes / 2; width > 0; width /= 2) {
        for (int l = 0; l < width; ++l) {
          partial[l] = SkinnyAdd(partial[l], partial[l + width]);
        }
      }
      float out = partial[0];
      if (p.bias != nullptr) out = SkinnyAdd(out, p.bias[j]);
      if (p.gelu) out = SkinnyGeluTanh(out);
      p.y[r * p.n + j] = out;
    }
  }
}

}  // namespace h3::kernels
