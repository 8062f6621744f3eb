#include "kernels/bias_gelu.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"

namespace h3::kernels {
namespace {

// Independent double-precision formula, written from the erf-free definition.
double GeluTanhReference(double x) {
  const double kPi = 3.14159265358979323846;
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
}

TEST(BiasGeluCpuTest, KnownValues) {
  // Values of GPT-2's gelu_new, computed independently in double precision.
  EXPECT_FLOAT_EQ(GeluTanh(0.0f), 0.0f);
  EXPECT_NEAR(GeluTanh(1.0f), 0.8411920, 1e-6);
  EXPECT_NEAR(GeluTanh(-1.0f), -0.1588080, 1e-6);
  EXPECT_NEAR(GeluTanh(3.0f), 2.9963627, 1e-6);
  EXPECT_NEAR(GeluTanh(-10.0f), 0.0, 1e-6);
}

TEST(BiasGeluCpuTest, AddsBiasPerColumnAndMatchesReference) {
  const int64_t rows = 3, cols = 5;
  std::vector<float> x(rows * cols), bias(cols), out(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) x[i] = 0.37f * (i - 7);
  for (int64_t c = 0; c < cols; ++c) bias[c] = 0.1f * c - 0.2f;
  BiasGeluCpu({x.data(), bias.data(), out.data(), rows, cols});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      double want = GeluTanhReference(double{x[r * cols + c]} + bias[c]);
      EXPECT_NEAR(out[r * cols + c], want, 1e-6 * (1 + std::abs(want)))
          << "r=" << r << " c=" << c;
    }
  }
}

TEST(BiasGeluCpuTest, InPlaceWithoutBias) {
  std::vector<float> x = {-2.0f, -0.5f, 0.5f, 2.0f};
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = GeluTanhReference(x[i]);
  BiasGeluCpu({x.data(), nullptr, x.data(), 2, 2});
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], want[i], 1e-6);
}

// A 16-bit bias is widened exactly and a 16-bit out is the fp32 result
// rounded once: bitwise the fp32 op on the widened bias, then rounded. An
// fp32 bias with a 16-bit out rounds the same way.
TEST(BiasGeluCpuTest, SixteenBitBiasAndOutRoundOnce) {
  const int64_t rows = 4, cols = 37, n = rows * cols;
  std::vector<float> x(n), bias(cols);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.173f * (i % 41 - 20);
  for (int64_t c = 0; c < cols; ++c) bias[c] = 0.0371f * c - 0.6f;
  for (ElementType t : {ElementType::kF16, ElementType::kBF16}) {
    const bool f16 = t == ElementType::kF16;
    auto narrow = [&](float v) {
      return f16 ? FloatToHalf(v) : FloatToBFloat16(v);
    };
    auto widen = [&](uint16_t b) {
      return f16 ? HalfToFloat(b) : BFloat16ToFloat(b);
    };
    std::vector<uint16_t> bias16(cols), want(n), got(n, 0xffff);
    std::vector<float> widened(cols), y32(n);
    for (int64_t c = 0; c < cols; ++c) {
      bias16[c] = narrow(bias[c]);
      widened[c] = widen(bias16[c]);
    }
    BiasGeluCpu({x.data(), widened.data(), y32.data(), rows, cols});
    for (int64_t i = 0; i < n; ++i) want[i] = narrow(y32[i]);
    BiasGeluCpu({x.data(), bias16.data(), got.data(), rows, cols, t, t});
    EXPECT_EQ(got, want) << ElementTypeName(t);
    // fp32 bias, 16-bit out.
    BiasGeluCpu({x.data(), bias.data(), y32.data(), rows, cols});
    for (int64_t i = 0; i < n; ++i) want[i] = narrow(y32[i]);
    BiasGeluCpu(
        {x.data(), bias.data(), got.data(), rows, cols, ElementType::kF32, t});
    EXPECT_EQ(got, want) << ElementTypeName(t) << ", fp32 bias";
  }
}

}  // namespace
}  // namespace h3::kernels
