#ifndef H3_TESTS_SUPPORT_SKINNY_GEMM_DATA_H_
#define H3_TESTS_SUPPORT_SKINNY_GEMM_DATA_H_

// Random operands for the skinny GEMM's tests (kernels/skinny_gemm.h): the
// CPU emulation test and the GPU kernel test share them.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/element_type.h"
#include "loader/dtype.h"
#include "tests/support/random.h"

namespace h3::testing {

struct SkinnyGemmData {
  ElementType type = ElementType::kF16;
  int64_t rows = 0, n = 0, k = 0;
  std::vector<float> x;         // [rows, k], N(0, 1)
  std::vector<float> w;         // [n, k], N(0, 1 / k), already rounded to type
  std::vector<uint8_t> w_bits;  // w in type's bytes
  std::vector<float> bias;      // [n], N(0, 1)
};

inline SkinnyGemmData MakeSkinnyGemmData(ElementType type, int64_t rows,
                                         int64_t n, int64_t k, uint32_t seed) {
  SkinnyGemmData d;
  d.type = type;
  d.rows = rows;
  d.n = n;
  d.k = k;
  d.x = RandomNormal(rows * k, seed);
  d.w = RandomNormal(n * k, seed + 1);
  d.bias = RandomNormal(n, seed + 2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(k));
  d.w_bits.resize(d.w.size() * ElementSize(type));
  for (size_t i = 0; i < d.w.size(); ++i) {
    float v = d.w[i] * scale;
    if (type == ElementType::kF32) {
      std::memcpy(&d.w_bits[4 * i], &v, 4);
    } else {
      const uint16_t bits = type == ElementType::kF16
                                ? loader::FloatToHalf(v)
                                : loader::FloatToBFloat16(v);
      v = type == ElementType::kF16 ? loader::HalfToFloat(bits)
                                    : loader::BFloat16ToFloat(bits);
      std::memcpy(&d.w_bits[2 * i], &bits, 2);
    }
    d.w[i] = v;
  }
  return d;
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_SKINNY_GEMM_DATA_H_
