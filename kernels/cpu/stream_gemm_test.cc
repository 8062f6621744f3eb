// StreamGemmEmulation (kernels/stream_gemm.h) against the plain product: the
// fragment mapping, the warps' shares of k, the tails and the epilogue; and
// StreamGemmCheck's refusals.
#include "kernels/stream_gemm.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/normalised_error.h"
#include "tests/support/stream_gemm_case.h"

namespace h3::kernels {
namespace {

using h3::testing::StreamCase;

class StreamGemmEmulationTest : public ::testing::TestWithParam<StreamCase> {};

TEST_P(StreamGemmEmulationTest, MatchesThePlainProduct) {
  const StreamCase& c = GetParam();
  const auto o = h3::testing::MakeStreamOperands(c, 11);
  std::vector<uint8_t> y(c.rows * c.n * ElementSize(h3::testing::YType(c)));
  const StreamGemmParams p = h3::testing::StreamParams(
      c, o.x.data(), o.w.data(), o.bias.data(), y.data());
  ASSERT_STREQ(StreamGemmCheck(p, false), "");
  StreamGemmEmulation(p);
  const std::vector<float> want = h3::testing::StreamReference(c, o);
  EXPECT_LE(h3::testing::NormalisedError(h3::testing::DecodeY(c, y), want),
            h3::testing::StreamTolerance(c));
}

INSTANTIATE_TEST_SUITE_P(Cases, StreamGemmEmulationTest,
                         ::testing::ValuesIn(h3::testing::StreamCases()),
                         [](const ::testing::TestParamInfo<StreamCase>& info) {
                           return h3::testing::StreamCaseName(info.param);
                         });

// Every element is one product, once: W = e_i (a one at column i of row 0)
// picks x's element i exactly, for every i of a k with a partial step.
TEST(StreamGemmEmulationTest, EachElementCountsOnce) {
  EXPECT_EQ(h3::testing::FirstElementNotCountedOnce(
                [](const StreamGemmParams& p) { StreamGemmEmulation(p); }),
            -1);
}

TEST(StreamGemmCheckTest, NamesTheBrokenField) {
  float x[64], y[64];
  uint16_t w[64];
  const StreamGemmParams ok{.x = x, .w = w, .y = y, .rows = 1, .n = 1, .k = 8};
  EXPECT_STREQ(StreamGemmCheck(ok, false), "");
  const auto check = [&](auto edit) {
    StreamGemmParams p = ok;
    edit(p);
    return std::string(StreamGemmCheck(p, false));
  };
  EXPECT_EQ(check([](auto& p) { p.w_type = ElementType::kF32; }),
            "w_type: fp16 or bf16 only");
  EXPECT_EQ(check([](auto& p) { p.x_type = ElementType::kBF16; }),
            "x_type: fp32 or w_type");
  EXPECT_EQ(check([](auto& p) { p.y_type = ElementType::kBF16; }),
            "y_type: fp32 or w_type");
  EXPECT_EQ(check([](auto& p) { p.bias_type = ElementType::kF16; }),
            "bias_type: fp32, or y_type when y_type is 16-bit");
  EXPECT_EQ(check([](auto& p) { p.rows = 65; }), "rows: 0 to 64");
  EXPECT_EQ(check([](auto& p) { p.n = -1; }), "n: must not be negative");
  EXPECT_EQ(check([](auto& p) { p.k = 12; }), "k: a positive multiple of 8");
  EXPECT_EQ(check([](auto& p) { p.y = nullptr; }),
            "x, w and y: must not be null");
  StreamGemmParams odd = ok;
  odd.x = reinterpret_cast<const char*>(x) + 4;
  EXPECT_STREQ(StreamGemmCheck(odd, false), "");
  EXPECT_STREQ(StreamGemmCheck(odd, true),
               "x, w and y: must be 16-byte aligned");
}

}  // namespace
}  // namespace h3::kernels
