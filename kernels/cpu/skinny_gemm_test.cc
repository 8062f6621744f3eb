#include "kernels/cpu/skinny_gemm.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/random.h"

namespace h3::kernels {
namespace {

TEST(SkinnyGemm, MatchesDoublePrecisionDotProducts) {
  for (int64_t rows :
       {int64_t{1}, int64_t{3}, int64_t{8}, kSkinnyGemmMaxRows}) {
    for (int64_t k : {1, 17, 64, 100, 768}) {
      const int64_t n = 37;
      const auto x = h3::testing::RandomNormal(rows * k, 1);
      const auto w = h3::testing::RandomNormal(n * k, 2);
      std::vector<float> y(rows * n, NAN);
      // Two slices of the columns, as two threads would compute them.
      SkinnyGemmCpu(x.data(), w.data(), y.data(), rows, n, k, 0, 20);
      SkinnyGemmCpu(x.data(), w.data(), y.data(), rows, n, k, 20, n);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          double want = 0, scale = 0;
          for (int64_t i = 0; i < k; ++i) {
            want += double{x[r * k + i]} * w[j * k + i];
            scale += std::abs(double{x[r * k + i]} * w[j * k + i]);
          }
          // fp32 summation error grows with the terms' magnitudes.
          EXPECT_NEAR(y[r * n + j], want, 1e-6 * scale + 1e-30)
              << "rows " << rows << " k " << k << " at " << r << "," << j;
        }
      }
    }
  }
}

TEST(SkinnyGemm, ARowDoesNotDependOnTheOthers) {
  const int64_t k = 300, n = 50;
  const auto w = h3::testing::RandomNormal(n * k, 4);
  const int64_t rows = kSkinnyGemmMaxRows;
  const auto x = h3::testing::RandomNormal(rows * k, 3);
  std::vector<float> batch(rows * n), alone(n);
  SkinnyGemmCpu(x.data(), w.data(), batch.data(), rows, n, k, 0, n);
  for (int64_t r : {int64_t{0}, int64_t{5}, rows - 1}) {
    SkinnyGemmCpu(x.data() + r * k, w.data(), alone.data(), 1, n, k, 0, n);
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(batch[r * n + j], alone[j]);
  }
}

}  // namespace
}  // namespace h3::kernels
