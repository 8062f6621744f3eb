#include "kernels/layer_norm.h"

#include <cmath>
#include <vector>

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
                   out.data(), rows, cols, 1e-5f});
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
                   x.data(), 1, 4, 1e-5f});
  EXPECT_EQ(residual, (std::vector<float>{3, 3, 3, 7}));
  double sum = 0;
  for (float v : x) sum += v;
  EXPECT_NEAR(sum, 0.0, 1e-5);
  EXPECT_NEAR(x[3], 3 / std::sqrt(3 + 1e-5), 1e-5);
}

}  // namespace
}  // namespace h3::kernels
