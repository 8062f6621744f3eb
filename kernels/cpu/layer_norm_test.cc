#include "kernels/layer_norm.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"

namespace h3::kernels {
namespace {

TEST(AddLayerNormCpuTest, NormalisesTheSumAndKeepsIt) {
  const int64_t rows = 2, cols = 4;
  std::vector<float> x = {1, 2, 3, 4, -1, 0, 1, 10};
  std::vector<float> residual = {1, 1, 1, 1, 0, 0, 0, -10};
  std::vector<float> gamma = {1, 2, 1, 1}, beta = {0, 0, 0.5f, 0};
  std::vector<float> out(rows * cols);
  AddLayerNormCpu({x.data(), residual.data(), true, gamma.data(), beta.data(),
                   out.data(), ElementType::kF32, rows, cols, 1e-5f});
  EXPECT_EQ(residual, (std::vector<float>{2, 3, 4, 5, -1, 0, 1, 0}));
  // Row 0: values 2..5, mean 3.5, variance 1.25.
  const double inv = 1 / std::sqrt(1.25 + 1e-5);
  EXPECT_NEAR(out[0], -1.5 * inv, 1e-6);
  EXPECT_NEAR(out[1], 2 * -0.5 * inv, 1e-6);
  EXPECT_NEAR(out[2], 0.5 * inv + 0.5, 1e-6);
  EXPECT_NEAR(out[3], 1.5 * inv, 1e-6);
  // Row 1: -1, 0, 1, 0: mean 0, variance 0.5.
  EXPECT_NEAR(out[4], -1 / std::sqrt(0.5 + 1e-5), 1e-6);
}

TEST(AddLayerNormCpuTest, FirstBlockTakesXAsTheResidualAndMayRunInPlace) {
  std::vector<float> x = {3, 3, 3, 7}, residual(4, 123.0f);
  std::vector<float> gamma(4, 1.0f), beta(4, 0.0f);
  AddLayerNormCpu({x.data(), residual.data(), false, gamma.data(), beta.data(),
                   x.data(), ElementType::kF32, 1, 4, 1e-5f});
  EXPECT_EQ(residual, (std::vector<float>{3, 3, 3, 7}));
  double sum = 0;
  for (float v : x) sum += v;
  EXPECT_NEAR(sum, 0.0, 1e-5);
  EXPECT_NEAR(x[3], 3 / std::sqrt(3 + 1e-5), 1e-5);
}

// With residual_in the sum goes to residual and residual_in stays: the same
// sum and norm as in place.
TEST(AddLayerNormCpuTest, ReadsResidualInAndWritesResidual) {
  const std::vector<float> x = {1, 2, 3, 4, -1, 0, 1, 10};
  const std::vector<float> before = {1, 1, 1, 1, 0, 0, 0, -10};
  const std::vector<float> gamma = {1, 2, 1, 1}, beta = {0, 0, 0.5f, 0};
  std::vector<float> in_place = before, out_in_place(8), out(8);
  AddLayerNormCpu({x.data(), in_place.data(), true, gamma.data(), beta.data(),
                   out_in_place.data(), ElementType::kF32, 2, 4, 1e-5f});
  const std::vector<float> residual_in = before;
  std::vector<float> residual(8, -7.0f);
  AddLayerNormCpu({x.data(), residual.data(), true, gamma.data(), beta.data(),
                   out.data(), ElementType::kF32, 2, 4, 1e-5f,
                   residual_in.data()});
  EXPECT_EQ(residual, in_place);
  EXPECT_EQ(out, out_in_place);
  EXPECT_EQ(residual_in, before);
}

// A 16-bit out is the fp32 out rounded once (to nearest even), bit for bit,
// and the residual is the same either way.
class AddLayerNormHalfOutTest : public ::testing::TestWithParam<ElementType> {};

TEST_P(AddLayerNormHalfOutTest, IsTheRoundedFloatResult) {
  const ElementType type = GetParam();
  const int64_t rows = 7, cols = 97;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols), residual(rows * cols), gamma(cols),
      beta(cols);
  for (float& v : x) v = 2.0f + normal(rng);
  for (float& v : residual) v = normal(rng);
  for (float& v : gamma) v = normal(rng);
  for (float& v : beta) v = normal(rng);

  std::vector<float> res32 = residual, out32(rows * cols);
  AddLayerNormCpu({x.data(), res32.data(), true, gamma.data(), beta.data(),
                   out32.data(), ElementType::kF32, rows, cols, 1e-5f});
  std::vector<float> res16 = residual;
  std::vector<uint16_t> out16(rows * cols, 0xffff);
  AddLayerNormCpu({x.data(), res16.data(), true, gamma.data(), beta.data(),
                   out16.data(), type, rows, cols, 1e-5f});
  EXPECT_EQ(res16, res32);
  int inexact = 0;  // the rounding must have had work to do
  for (int64_t i = 0; i < rows * cols; ++i) {
    const uint16_t want = type == ElementType::kF16 ? FloatToHalf(out32[i])
                                                    : FloatToBFloat16(out32[i]);
    ASSERT_EQ(out16[i], want) << "element " << i;
    inexact += LoadFloat(out16.data(), type, i) != out32[i];
  }
  EXPECT_GT(inexact, rows * cols / 2);
}

INSTANTIATE_TEST_SUITE_P(Types, AddLayerNormHalfOutTest,
                         ::testing::Values(ElementType::kF16,
                                           ElementType::kBF16),
                         [](const auto& info) {
                           return std::string(ElementTypeName(info.param));
                         });

}  // namespace
}  // namespace h3::kernels
