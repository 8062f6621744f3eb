// SkinnyGemmEmulation, the specification of the batch-invariant decode
// product (kernels/skinny_gemm.h): close to a double-precision reference with
// a bound derived from its arithmetic, and bitwise independent of the batch.
#include "kernels/skinny_gemm.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "tests/support/skinny_gemm_data.h"

namespace h3::kernels {
namespace {

using h3::testing::MakeSkinnyGemmData;
using h3::testing::SkinnyGemmData;

constexpr double kUnit = 0x1p-24;  // fp32 unit roundoff

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

std::vector<float> Emulate(const SkinnyGemmData& d, const float* x,
                           int64_t rows, bool bias, bool gelu) {
  std::vector<float> y(rows * d.n, NAN);
  const SkinnyGemmParams p{.x = x,
                           .w = d.w_bits.data(),
                           .w_type = d.type,
                           .bias = bias ? d.bias.data() : nullptr,
                           .y = y.data(),
                           .rows = rows,
                           .n = d.n,
                           .k = d.k,
                           .gelu = gelu};
  EXPECT_STREQ(SkinnyGemmCheck(p), "");
  SkinnyGemmEmulation(p);
  return y;
}

// 0.5 v (1 + tanh(a)) = v / (1 + e^(-2a)): the second form, since 1 + tanh(a)
// cancels in double too for a < -10 (v < -5).
double GeluTanhDouble(double v) {
  const double a = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
  return v / (1.0 + std::exp(-2 * a));
}

struct Case {
  ElementType type;
  int64_t n, k;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << ElementTypeName(c.type) << " n " << c.n << " k " << c.k;
}

class SkinnyGemmEmulationTest : public ::testing::TestWithParam<Case> {};

// The error bound, per output. Each slice sums m = 8 ceil(k / 256) products
// by fma (one rounding a step) and the fold adds 5 levels, the bias one more:
// by the standard recursive-summation bound the pre-activation errs by at
// most gamma(m + 6) (sum |x_i w_i| + |bias|), gamma(j) = j u / (1 - j u).
// The GELU's slope is at most 1.13, and its own evaluation adds: 5 roundings
// in the exponent's argument a (relative, so |a| 5u absolute, which e^a turns
// into a relative |a| 5u), e^a's 3 ulp, and the add and divide: at most
// (8 + 5 |a|) u relative to the result.
TEST_P(SkinnyGemmEmulationTest, CloseToDoubleReference) {
  const Case c = GetParam();
  constexpr int64_t kRows = 7;
  const SkinnyGemmData d = MakeSkinnyGemmData(c.type, kRows, c.n, c.k, 11);
  const int64_t m = 8 * ((c.k + kSkinnyChunk - 1) / kSkinnyChunk);
  const double gamma = (m + 6) * kUnit / (1 - (m + 6) * kUnit);
  for (const bool gelu : {false, true}) {
    const std::vector<float> y = Emulate(d, d.x.data(), kRows, true, gelu);
    double worst = 0;  // largest error / bound
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = d.bias[j], size = std::fabs(d.bias[j]);
        for (int64_t i = 0; i < c.k; ++i) {
          const double term = double{d.x[r * c.k + i]} * d.w[j * c.k + i];
          sum += term;
          size += std::fabs(term);
        }
        double want = sum, bound = gamma * size;
        if (gelu) {
          want = GeluTanhDouble(sum);
          const double a = std::fabs(2 * std::sqrt(2.0 / M_PI) *
                                     (sum + 0.044715 * sum * sum * sum));
          bound = 1.13 * bound + (8 + 5 * a) * kUnit * std::fabs(want);
        }
        const double err = std::fabs(y[r * c.n + j] - want);
        ASSERT_LE(err, bound) << "row " << r << " col " << j << " want " << want
                              << " got " << y[r * c.n + j];
        worst = std::max(worst, err / bound);
      }
    }
    // The bound is a worst case; typical errors are far below it.
    EXPECT_GT(worst, 0.0) << "exact everywhere: the reference is suspect";
  }
}

// A row's outputs alone are bitwise those of the same row in batches of 1, 7
// and 64, at every position, whatever the other rows hold.
TEST_P(SkinnyGemmEmulationTest, RowsAreBatchInvariant) {
  const Case c = GetParam();
  const SkinnyGemmData d =
      MakeSkinnyGemmData(c.type, kSkinnyMaxRows, c.n, c.k, 23);
  for (const int64_t row : {int64_t{0}, int64_t{41}}) {
    const float* x_row = d.x.data() + row * c.k;
    const std::vector<float> alone = Emulate(d, x_row, 1, true, true);
    for (const int64_t batch : {1, 7, 64}) {
      for (int64_t at = 0; at < batch; ++at) {
        // The pool's rows in order, with `row` moved to position `at`.
        std::vector<float> x(d.x.begin(), d.x.begin() + batch * c.k);
        std::copy(x_row, x_row + c.k, x.begin() + at * c.k);
        const std::vector<float> y = Emulate(d, x.data(), batch, true, true);
        for (int64_t j = 0; j < c.n; ++j) {
          ASSERT_EQ(Bits(y[at * c.n + j]), Bits(alone[j]))
              << "row " << row << " at " << at << " of " << batch << ", col "
              << j;
        }
      }
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(ElementTypeName(info.param.type)) + "_n" +
         std::to_string(info.param.n) + "_k" + std::to_string(info.param.k);
}

// k: a multiple of the chunk, a tail of whole slices, an odd tail.
INSTANTIATE_TEST_SUITE_P(Shapes, SkinnyGemmEmulationTest,
                         ::testing::Values(Case{ElementType::kF16, 13, 512},
                                           Case{ElementType::kBF16, 13, 1000},
                                           Case{ElementType::kF32, 13, 301},
                                           Case{ElementType::kF16, 5, 301},
                                           Case{ElementType::kBF16, 5, 7}),
                         CaseName);

// 16-bit activations: x of type T is read exactly, y of type T is the fp32
// result rounded once. W is fp16 (the activation type need not be W's).
class SkinnyGemmHalfIoTest : public ::testing::TestWithParam<ElementType> {};

std::vector<uint16_t> ToHalfBits(const std::vector<float>& v, ElementType t) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    bits[i] =
        t == ElementType::kF16 ? FloatToHalf(v[i]) : FloatToBFloat16(v[i]);
  }
  return bits;
}

TEST_P(SkinnyGemmHalfIoTest, HalfXEqualsFloatXOfTheSameValues) {
  const ElementType t = GetParam();
  const SkinnyGemmData d = MakeSkinnyGemmData(ElementType::kF16, 7, 13, 301, 3);
  const std::vector<uint16_t> x16 = ToHalfBits(d.x, t);
  std::vector<float> x32(x16.size());  // the same values, widened
  for (size_t i = 0; i < x16.size(); ++i) x32[i] = LoadFloat(x16.data(), t, i);
  const std::vector<float> want = Emulate(d, x32.data(), 7, true, true);
  std::vector<float> got(want.size(), NAN);
  SkinnyGemmEmulation({.x = x16.data(),
                       .x_type = t,
                       .w = d.w_bits.data(),
                       .w_type = d.type,
                       .bias = d.bias.data(),
                       .y = got.data(),
                       .rows = 7,
                       .n = d.n,
                       .k = d.k,
                       .gelu = true});
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(Bits(got[i]), Bits(want[i])) << "element " << i;
  }
}

TEST_P(SkinnyGemmHalfIoTest, HalfYIsTheRoundedFloatY) {
  const ElementType t = GetParam();
  const SkinnyGemmData d =
      MakeSkinnyGemmData(ElementType::kBF16, 5, 13, 1000, 4);
  for (const bool gelu : {false, true}) {
    const std::vector<float> y32 = Emulate(d, d.x.data(), 5, true, gelu);
    std::vector<uint16_t> y16(y32.size(), 0xffff);
    SkinnyGemmEmulation({.x = d.x.data(),
                         .w = d.w_bits.data(),
                         .w_type = d.type,
                         .bias = d.bias.data(),
                         .y = y16.data(),
                         .y_type = t,
                         .rows = 5,
                         .n = d.n,
                         .k = d.k,
                         .gelu = gelu});
    EXPECT_EQ(y16, ToHalfBits(y32, t));
  }
}

// A bias of y's 16-bit type is widened exactly and added before the one
// rounding: bitwise the fp32-bias product on the widened values, rounded.
TEST_P(SkinnyGemmHalfIoTest, HalfBiasIsWidenedBeforeTheOneRounding) {
  const ElementType t = GetParam();
  const SkinnyGemmData d = MakeSkinnyGemmData(t, 6, 19, 777, 8);
  const std::vector<uint16_t> bias16 = ToHalfBits(d.bias, t);
  std::vector<float> widened(bias16.size());
  LoadFloats(bias16.data(), t, 0, d.n, widened.data());
  for (const bool gelu : {false, true}) {
    std::vector<float> y32(6 * d.n, NAN);
    SkinnyGemmEmulation({.x = d.x.data(),
                         .w = d.w_bits.data(),
                         .w_type = d.type,
                         .bias = widened.data(),
                         .y = y32.data(),
                         .rows = 6,
                         .n = d.n,
                         .k = d.k,
                         .gelu = gelu});
    std::vector<uint16_t> y16(y32.size(), 0xffff);
    const SkinnyGemmParams p{.x = d.x.data(),
                             .w = d.w_bits.data(),
                             .w_type = d.type,
                             .bias = bias16.data(),
                             .bias_type = t,
                             .y = y16.data(),
                             .y_type = t,
                             .rows = 6,
                             .n = d.n,
                             .k = d.k,
                             .gelu = gelu};
    ASSERT_STREQ(SkinnyGemmCheck(p), "");
    SkinnyGemmEmulation(p);
    EXPECT_EQ(y16, ToHalfBits(y32, t)) << (gelu ? "gelu" : "no epilogue");
  }
}

// With 16-bit x and y, a row alone is bitwise the same row in a batch of 64.
TEST_P(SkinnyGemmHalfIoTest, RowsAreBatchInvariant) {
  const ElementType t = GetParam();
  const SkinnyGemmData d = MakeSkinnyGemmData(t, kSkinnyMaxRows, 11, 777, 6);
  const std::vector<uint16_t> x = ToHalfBits(d.x, t);
  auto run = [&](const uint16_t* rows_x, int64_t rows) {
    std::vector<uint16_t> y(rows * d.n, 0xffff);
    SkinnyGemmEmulation({.x = rows_x,
                         .x_type = t,
                         .w = d.w_bits.data(),
                         .w_type = d.type,
                         .bias = d.bias.data(),
                         .y = y.data(),
                         .y_type = t,
                         .rows = rows,
                         .n = d.n,
                         .k = d.k,
                         .gelu = true});
    return y;
  };
  const int64_t row = 41;
  const std::vector<uint16_t> alone = run(x.data() + row * d.k, 1);
  const std::vector<uint16_t> batch = run(x.data(), kSkinnyMaxRows);
  const std::vector<uint16_t> in_batch(batch.begin() + row * d.n,
                                       batch.begin() + (row + 1) * d.n);
  EXPECT_EQ(in_batch, alone);
}

INSTANTIATE_TEST_SUITE_P(Types, SkinnyGemmHalfIoTest,
                         ::testing::Values(ElementType::kF16,
                                           ElementType::kBF16),
                         [](const auto& info) {
                           return std::string(ElementTypeName(info.param));
                         });

TEST(SkinnyExpTest, WithinThreeUlpsOfLibm) {
  for (float a = -87.0f; a <= 88.0f; a += 0.01171875f) {
    const double want = std::exp(double{a});
    const double got = SkinnyExp(a);
    ASSERT_LE(std::fabs(got - want), 3 * 0x1p-23 * want) << "e^" << a;
  }
  EXPECT_EQ(SkinnyExp(-200.0f), 0.0f);
  EXPECT_EQ(SkinnyExp(100.0f), INFINITY);
  EXPECT_TRUE(std::isnan(SkinnyExp(NAN)));
}

// The GELU against the double reference over [-10, 10], with the bound of
// CloseToDoubleReference for an exact input: (8 + 5 |a|) u relative.
TEST(SkinnyExpTest, GeluWithinItsBound) {
  for (float v = -10.0f; v <= 10.0f; v += 0.0009765625f) {
    const double want = GeluTanhDouble(v);
    if (want == 0) continue;  // v = 0
    const double a = std::fabs(2 * std::sqrt(2.0 / M_PI) *
                               (v + 0.044715 * double{v} * v * v));
    ASSERT_LE(std::fabs(SkinnyGeluTanh(v) - want),
              (8 + 5 * a) * kUnit * std::fabs(want))
        << "GELU(" << v << ")";
  }
}

TEST(SkinnyGemmCheckTest, NamesTheFieldAndTheLimit) {
  const float x = 0, w = 0;
  float y = 0;
  SkinnyGemmParams p{.x = &x,
                     .w = &w,
                     .w_type = ElementType::kF32,
                     .y = &y,
                     .rows = 1,
                     .n = 1,
                     .k = 1};
  EXPECT_STREQ(SkinnyGemmCheck(p), "");
  p.rows = 65;
  EXPECT_STREQ(SkinnyGemmCheck(p), "rows: 0 to 64");
  p.rows = 1;
  p.k = 6145;
  EXPECT_STREQ(SkinnyGemmCheck(p), "k: 1 to 6144 for fp32 weights");
  p.w_type = ElementType::kF16;
  EXPECT_STREQ(SkinnyGemmCheck(p), "");
  p.k = 12289;
  EXPECT_STREQ(SkinnyGemmCheck(p), "k: 1 to 12288 for 16-bit weights");
  p.k = 0;
  EXPECT_STREQ(SkinnyGemmCheck(p), "k: 1 to 12288 for 16-bit weights");
  p.k = 1;
  p.w_type = ElementType::kI8;
  EXPECT_STREQ(SkinnyGemmCheck(p), "w_type: fp32, fp16 or bf16 only");
  p.w_type = ElementType::kF16;
  p.x_type = ElementType::kF64;
  EXPECT_STREQ(SkinnyGemmCheck(p), "x_type: fp32, fp16 or bf16 only");
  p.x_type = ElementType::kBF16;
  p.y_type = ElementType::kI32;
  EXPECT_STREQ(SkinnyGemmCheck(p), "y_type: fp32, fp16 or bf16 only");
  p.y_type = ElementType::kF16;
  EXPECT_STREQ(SkinnyGemmCheck(p), "");
  // The bias: fp32, or y's type when that is 16-bit.
  p.bias_type = ElementType::kF16;
  EXPECT_STREQ(SkinnyGemmCheck(p), "");
  const char* bias_rule = "bias_type: fp32, or y_type when y_type is 16-bit";
  p.bias_type = ElementType::kBF16;
  EXPECT_STREQ(SkinnyGemmCheck(p), bias_rule);
  p.bias_type = ElementType::kF16;
  p.y_type = ElementType::kF32;
  EXPECT_STREQ(SkinnyGemmCheck(p), bias_rule);
  p.bias_type = ElementType::kF64;
  EXPECT_STREQ(SkinnyGemmCheck(p), bias_rule);
  p.bias_type = ElementType::kF32;
  p.y = nullptr;
  EXPECT_STREQ(SkinnyGemmCheck(p), "x, w and y: must not be null");
}

}  // namespace
}  // namespace h3::kernels
