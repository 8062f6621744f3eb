// The fused prefill's load-time tables (kernels/flashconv_setup.h) against
// direct std::complex<double> formulas. Powers here come from std::pow on
// the complex dA, not from its polar form as in the module, so a wrong
// exponent, index, sign or scale shows. Bounds: one rounding of the exact
// value (to float, or to float then fp16), plus 1e-11 of the value for the
// two double formulas' difference: a power n theta of up to 2048 pi carries
// about n theta 2^-53 < 1e-12 of error in either.
#include "kernels/flashconv_setup.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels::flashconv {
namespace {

using cdouble = std::complex<double>;
constexpr double kDoubleSlack = 1e-11;

// The largest error of rounding x to float: half an ulp (of the
// subnormals' below 2^-126).
double HalfUlpFloat(double x) {
  const int e = x == 0 ? -126 : std::max(std::ilogb(x), -126);
  return std::ldexp(1.0, e - 24);
}

// The largest error of rounding x (|x| <= 1) to float, then to fp16: half an
// fp16 ulp (its subnormals' below 2^-14) plus the float rounding before it.
double HalfRoundingBound(double x) {
  const int e = x == 0 ? -14 : std::max(std::ilogb(x), -14);
  return std::ldexp(1.0, e - 11) + HalfUlpFloat(x) + kDoubleSlack;
}

cdouble At(const float* pairs, int64_t i) {
  return cdouble(pairs[2 * i], pairs[2 * i + 1]);
}

// Expects the float pair z to be the rounding of `exact`.
void ExpectRounded(const float* z, cdouble exact) {
  const double slack = kDoubleSlack * std::abs(exact);
  EXPECT_NEAR(z[0], exact.real(), HalfUlpFloat(exact.real()) + slack);
  EXPECT_NEAR(z[1], exact.imag(), HalfUlpFloat(exact.imag()) + slack);
}

double LargestComponent(const std::vector<cdouble>& v) {
  double most = 0;
  for (const cdouble& z : v) {
    most = std::max({most, std::abs(z.real()), std::abs(z.imag())});
  }
  return most;
}

class FlashConvSetupTest : public ::testing::TestWithParam<int> {};

TEST_P(FlashConvSetupTest, ChannelRecordsMatchTheFormulas) {
  const int d_state = GetParam(), modes = d_state / 2, d = 3;
  const h3::testing::RandomH3Layer layer(H3Shape{d, 1, d_state}, 21);
  const H3Weights w = layer.weights();
  const std::vector<ChannelSetup> setups = ChannelSetups(w);
  ASSERT_EQ(setups.size(), static_cast<size_t>(d));
  for (int c = 0; c < d; ++c) {
    SCOPED_TRACE("channel " + std::to_string(c));
    const ChannelSetup& s = setups[c];
    std::vector<cdouble> p(16 * modes), e(16 * modes);  // [j][m], [m][i]
    for (int m = 0; m < modes; ++m) {
      const int64_t i = int64_t{c} * modes + m;
      const cdouble da = At(w.dA, i), cm = At(w.C, i), bm = At(w.dB, i);
      for (int j = 0; j < 16; ++j) {
        p[j * modes + m] = cm * std::pow(da, j + 1);
        e[m * 16 + j] = bm * std::pow(da, 15 - j);
      }
      ExpectRounded(s.dA16[m], std::pow(da, 16));
      ExpectRounded(s.dA256[m], std::pow(da, 256));
      EXPECT_NEAR(s.log_r[m], std::log(std::abs(da)), 1e-15);
      EXPECT_NEAR(s.theta[m], std::arg(da), 1e-15);
    }
    const double p_max = LargestComponent(p), e_max = LargestComponent(e);
    ASSERT_GT(p_max, 0);
    ASSERT_GT(e_max, 0);
    EXPECT_NEAR(s.scale_p, p_max, HalfUlpFloat(p_max) + kDoubleSlack * p_max);
    EXPECT_NEAR(s.scale_e, e_max, HalfUlpFloat(e_max) + kDoubleSlack * e_max);
    float p_most = 0, e_most = 0;  // the largest scaled entry is +-1
    for (int j = 0; j < 16; ++j) {
      for (int m = 0; m < modes; ++m) {
        const double pr = p[j * modes + m].real() / p_max;
        const double pi = -p[j * modes + m].imag() / p_max;
        const double er = e[m * 16 + j].real() / e_max;
        const double ei = e[m * 16 + j].imag() / e_max;
        const float got_pr = HalfToFloat(s.pcat[j][ModeRow(m, 0)]);
        const float got_pi = HalfToFloat(s.pcat[j][ModeRow(m, 1)]);
        const float got_er = HalfToFloat(s.ecat[ModeRow(m, 0)][j]);
        const float got_ei = HalfToFloat(s.ecat[ModeRow(m, 1)][j]);
        EXPECT_NEAR(got_pr, pr, HalfRoundingBound(pr)) << j << " " << m;
        EXPECT_NEAR(got_pi, pi, HalfRoundingBound(pi)) << j << " " << m;
        EXPECT_NEAR(got_er, er, HalfRoundingBound(er)) << m << " " << j;
        EXPECT_NEAR(got_ei, ei, HalfRoundingBound(ei)) << m << " " << j;
        p_most = std::max({p_most, std::abs(got_pr), std::abs(got_pi)});
        e_most = std::max({e_most, std::abs(got_er), std::abs(got_ei)});
      }
    }
    EXPECT_EQ(p_most, 1.0f);
    EXPECT_EQ(e_most, 1.0f);
  }
}

// Records hold kMaxModes modes; a smaller state leaves the rest zero.
TEST(FlashConvSetupZeroTest, ModesPastTheStateAreZero) {
  for (int d_state : {16, 32}) {
    SCOPED_TRACE("d_state " + std::to_string(d_state));
    const int modes = d_state / 2;
    const h3::testing::RandomH3Layer layer(H3Shape{2, 1, d_state}, 22);
    for (const ChannelSetup& s : ChannelSetups(layer.weights())) {
      for (int m = modes; m < kMaxModes; ++m) {
        for (int part = 0; part < 2; ++part) {
          const int row = ModeRow(m, part);
          for (int j = 0; j < 16; ++j) {
            EXPECT_EQ(s.pcat[j][row], 0) << j << " " << m;
            EXPECT_EQ(s.ecat[row][j], 0) << m << " " << j;
          }
          EXPECT_EQ(s.dA16[m][part], 0.0f);
          EXPECT_EQ(s.dA256[m][part], 0.0f);
        }
        EXPECT_EQ(s.log_r[m], 0.0);
        EXPECT_EQ(s.theta[m], 0.0);
      }
    }
  }
}

TEST_P(FlashConvSetupTest, ChunkPowersMatchTheFormula) {
  const int d_state = GetParam(), modes = d_state / 2, d = 2;
  const h3::testing::RandomH3Layer layer(H3Shape{d, 1, d_state}, 23);
  const H3Weights w = layer.weights();
  for (const FftSize& size : kFftSizes) {
    SCOPED_TRACE("n " + std::to_string(size.n));
    const std::vector<float> powers = ChunkPowers(w, size);
    ASSERT_EQ(powers.size(),
              static_cast<size_t>(2 * d * kCarrySegments * modes));
    for (int c = 0; c < d; ++c) {
      for (int g = 1; g <= kCarrySegments; ++g) {
        for (int m = 0; m < modes; ++m) {
          const cdouble da = At(w.dA, int64_t{c} * modes + m);
          const int64_t at = (int64_t{c} * kCarrySegments + g - 1) * modes + m;
          ExpectRounded(&powers[2 * at],
                        std::pow(da, g * size.n / 2 / kCarrySegments));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DState, FlashConvSetupTest,
                         ::testing::Values(16, 32, 64));

// T[k1][k2] = W_n^(k1 k2): the rounding of each component to float.
TEST(FlashConvTwiddleTest, MatchesThePolarForm) {
  const double pi = 3.14159265358979323846;
  for (const FftSize& size : kFftSizes) {
    SCOPED_TRACE("n " + std::to_string(size.n));
    const std::vector<float> t = TwiddleTable(size);
    ASSERT_EQ(t.size(), static_cast<size_t>(2 * size.n));
    for (int k1 = 0; k1 < size.n1; ++k1) {
      for (int k2 = 0; k2 < size.n2; ++k2) {
        const double angle = -2.0 * pi * k1 * k2 / size.n;
        ExpectRounded(&t[2 * (k1 * size.n2 + k2)], std::polar(1.0, angle));
      }
    }
  }
}

}  // namespace
}  // namespace h3::kernels::flashconv
