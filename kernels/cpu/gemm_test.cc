#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "base/parallel.h"
#include "gtest/gtest.h"
#include "tests/support/random.h"

namespace h3::kernels {

// Names the instruction set in failure messages.
void PrintTo(GemmIsa isa, std::ostream* os) { *os << GemmIsaName(isa); }

namespace {

std::vector<float> Pack(const std::vector<float>& w, int64_t n, int64_t k) {
  std::vector<float> packed(GemmPackedFloats(n, k), NAN);
  GemmPack(w.data(), n, k, packed.data());
  return packed;
}

// The bits of a float, so that EXPECT_EQ tells +0 from -0 and NaNs apart.
uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// The contract's summation order, spelled out: acc = fmaf(x_i, w_i, acc).
float FmaChain(const float* x, const float* w, int64_t k) {
  float acc = 0.0f;
  for (int64_t i = 0; i < k; ++i) acc = std::fma(x[i], w[i], acc);
  return acc;
}

std::vector<GemmIsa> SupportedIsas() {
  std::vector<GemmIsa> isas;
  for (GemmIsa isa : {GemmIsa::kPortable, GemmIsa::kAvx2, GemmIsa::kAvx512}) {
    if (GemmIsaSupported(isa)) isas.push_back(isa);
  }
  return isas;
}

TEST(GemmPack, UnpackRowGivesBackEveryRowAndPaddingIsZero) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1},
                      {3, 17},
                      {17, 3},
                      {32, 5},
                      {33, 7},
                      {1000, 3}}) {
    const auto w = h3::testing::RandomNormal(n * k, 7);
    const auto packed = Pack(w, n, k);
    std::vector<float> row(k);
    for (int64_t j = 0; j < n; ++j) {
      GemmUnpackRow(packed.data(), n, k, j, row.data());
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(Bits(row[i]), Bits(w[j * k + i])) << n << "x" << k;
    }
    // The last panel's missing columns are +0.
    const int64_t last = GemmPanels(n) - 1;
    for (int64_t c = n - last * kGemmPanel; c < kGemmPanel; ++c) {
      for (int64_t i = 0; i < k; ++i) {
        EXPECT_EQ(Bits(packed[(last * k + i) * kGemmPanel + c]), 0u);
      }
    }
  }
}

class GemmTest : public ::testing::TestWithParam<GemmIsa> {
 protected:
  // y for all of W's panels, split into `ranges` ranges as threads would.
  std::vector<float> Run(const float* x, const std::vector<float>& packed,
                         int64_t rows, int64_t n, int64_t k, int ranges = 1) {
    std::vector<float> y(rows * n, NAN);
    const int64_t panels = GemmPanels(n);
    for (int t = 0; t < ranges; ++t) {
      GemmCpuWithIsa(GetParam(), x, packed.data(), y.data(), rows, n, k,
                     panels * t / ranges, panels * (t + 1) / ranges);
    }
    return y;
  }
};

TEST_P(GemmTest, MatchesDoublePrecisionWithinTheFp32ChainBound) {
  for (int64_t rows : {1, 3, 13, 64}) {
    for (int64_t n : {1, 3, 17, 1000}) {
      for (int64_t k : {1, 3, 17, 1000}) {
        const auto x = h3::testing::RandomNormal(rows * k, 1);
        const auto w = h3::testing::RandomNormal(n * k, 2);
        const auto y = Run(x.data(), Pack(w, n, k), rows, n, k);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            double want = 0, scale = 0;
            for (int64_t i = 0; i < k; ++i) {
              want += double{x[r * k + i]} * w[j * k + i];
              scale += std::abs(double{x[r * k + i]} * w[j * k + i]);
            }
            // A chain of k fp32 FMAs errs by at most k u sum|x_i w_i|
            // (u = 2^-24), a bound that grows with k and the terms.
            const double bound = 1.01 * k * std::ldexp(1.0, -24) * scale;
            ASSERT_NEAR(y[r * n + j], want, bound)
                << rows << "x" << n << "x" << k << " at " << r << "," << j;
          }
        }
      }
    }
  }
}

TEST_P(GemmTest, EveryElementIsTheFmaChainInOrder) {
  for (auto [rows, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                            {2, 33, 129},
                            {5, 100, 300},
                            {13, 65, 257},
                            {30, 17, 1000}}) {
    const auto x = h3::testing::RandomNormal(rows * k, 11);
    const auto w = h3::testing::RandomNormal(n * k, 12);
    const auto y = Run(x.data(), Pack(w, n, k), rows, n, k, 2);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(Bits(y[r * n + j]), Bits(FmaChain(&x[r * k], &w[j * k], k)))
            << rows << "x" << n << "x" << k << " at " << r << "," << j;
      }
    }
  }
}

// The guarantee the engine's mixed steps rely on: a row computed alone is
// bitwise the same row at every index of a call of any size, under any
// split of the columns. Every row of every call is checked, so the indices
// cover first, last, middle and the edges of the tiles (12 rows with
// AVX-512, 2 with AVX2), of the packed chunks (240 rows) and of the k blocks.
TEST_P(GemmTest, ARowIsBitwiseTheSameInEveryCallAndSplit) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{300, 300}, {17, 1000}}) {
    const int64_t start = 5, max_rows = 1000;  // a call's rows: x[start...]
    const auto x = h3::testing::RandomNormal((start + max_rows) * k, 3);
    const auto packed = Pack(h3::testing::RandomNormal(n * k, 4), n, k);
    std::vector<float> alone((start + max_rows) * n);
    for (int64_t r = 0; r < start + max_rows; ++r) {
      const auto row = Run(x.data() + r * k, packed, 1, n, k);
      std::copy(row.begin(), row.end(), alone.begin() + r * n);
    }
    for (int64_t rows : {2, 3, 7, 64, 65, 300, 1000}) {
      for (int ranges : {1, 2, 3}) {
        const auto batch =
            Run(x.data() + start * k, packed, rows, n, k, ranges);
        for (int64_t index = 0; index < rows; ++index) {
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_EQ(Bits(batch[index * n + j]),
                      Bits(alone[(start + index) * n + j]))
                << "n " << n << " k " << k << ": row at index " << index
                << " of " << rows << ", " << ranges << " ranges, column " << j;
          }
        }
      }
    }
  }
}

TEST_P(GemmTest, ThreadsSplittingThePanelsGiveTheSameBits) {
  const int64_t rows = 37, n = 1000, k = 200;
  const auto x = h3::testing::RandomNormal(rows * k, 5);
  const auto packed = Pack(h3::testing::RandomNormal(n * k, 6), n, k);
  const auto want = Run(x.data(), packed, rows, n, k);
  std::vector<float> y(rows * n, NAN);
  ParallelFor(GemmPanels(n), 1, [&](int64_t begin, int64_t end) {
    GemmCpuWithIsa(GetParam(), x.data(), packed.data(), y.data(), rows, n, k,
                   begin, end);
  });
  for (int64_t e = 0; e < rows * n; ++e) ASSERT_EQ(Bits(y[e]), Bits(want[e]));
}

TEST_P(GemmTest, WritesOnlyItsPanelsAndEmptySumsAreZero) {
  const int64_t rows = 3, n = 70, k = 9;
  const auto x = h3::testing::RandomNormal(rows * k, 8);
  const auto packed = Pack(h3::testing::RandomNormal(n * k, 9), n, k);
  std::vector<float> y(rows * n, NAN);
  GemmCpuWithIsa(GetParam(), x.data(), packed.data(), y.data(), rows, n, k, 1,
                 2);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_EQ(std::isnan(y[r * n + j]), j < 32 || j >= 64) << r << "," << j;
    }
  }
  // k == 0: every element is the empty chain, +0.
  std::vector<float> zero(rows * n, NAN);
  GemmCpuWithIsa(GetParam(), x.data(), packed.data(), zero.data(), rows, n, 0,
                 0, GemmPanels(n));
  for (float v : zero) EXPECT_EQ(Bits(v), 0u);
  // rows == 0 and an empty range write nothing.
  GemmCpuWithIsa(GetParam(), x.data(), packed.data(), nullptr, 0, n, k, 0,
                 GemmPanels(n));
  GemmCpuWithIsa(GetParam(), x.data(), packed.data(), y.data(), rows, n, k, 2,
                 2);
  EXPECT_TRUE(std::isnan(y[0]));
}

INSTANTIATE_TEST_SUITE_P(Isas, GemmTest, ::testing::ValuesIn(SupportedIsas()),
                         [](const ::testing::TestParamInfo<GemmIsa>& info) {
                           return std::string(GemmIsaName(info.param));
                         });

TEST(GemmCpu, UsesTheBestSupportedIsa) {
  EXPECT_TRUE(GemmIsaSupported(GemmSelectedIsa()));
  const int64_t rows = 4, n = 40, k = 50;
  const auto x = h3::testing::RandomNormal(rows * k, 10);
  const auto packed = Pack(h3::testing::RandomNormal(n * k, 11), n, k);
  std::vector<float> a(rows * n), b(rows * n);
  GemmCpu(x.data(), packed.data(), a.data(), rows, n, k, 0, GemmPanels(n));
  GemmCpuWithIsa(GemmIsa::kPortable, x.data(), packed.data(), b.data(), rows, n,
                 k, 0, GemmPanels(n));
  for (int64_t e = 0; e < rows * n; ++e) ASSERT_EQ(Bits(a[e]), Bits(b[e]));
}

}  // namespace
}  // namespace h3::kernels
