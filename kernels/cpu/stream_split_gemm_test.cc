// StreamSplitGemmEmulation (kernels/stream_split_gemm.h) against the plain
// product at several split counts, each element counted once across the
// splits, and how StreamSplitShapeFor cuts the products of a decode step.
#include "kernels/stream_split_gemm.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/normalised_error.h"
#include "tests/support/stream_gemm_case.h"

namespace h3::kernels {
namespace {

using h3::testing::StreamCase;

class StreamSplitEmulationTest
    : public ::testing::TestWithParam<std::tuple<StreamCase, int>> {};

TEST_P(StreamSplitEmulationTest, MatchesThePlainProduct) {
  const StreamCase& c = std::get<0>(GetParam());
  const int splits = std::get<1>(GetParam());
  const auto o = h3::testing::MakeStreamOperands(c, 11);
  std::vector<uint8_t> y(c.rows * c.n * ElementSize(h3::testing::YType(c)));
  const StreamGemmParams p = h3::testing::StreamParams(
      c, o.x.data(), o.w.data(), o.bias.data(), y.data());
  ASSERT_STREQ(StreamGemmCheck(p, false), "");
  StreamSplitGemmEmulation(p, splits);
  EXPECT_LE(h3::testing::NormalisedError(h3::testing::DecodeY(c, y),
                                         h3::testing::StreamReference(c, o)),
            h3::testing::StreamTolerance(c));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StreamSplitEmulationTest,
    ::testing::Combine(::testing::ValuesIn(h3::testing::StreamCases()),
                       ::testing::Values(1, 5, 8)),
    [](const ::testing::TestParamInfo<std::tuple<StreamCase, int>>& info) {
      return h3::testing::StreamCaseName(std::get<0>(info.param)) + "_s" +
             std::to_string(std::get<1>(info.param));
    });

// Each element counted once (FirstElementNotCountedOnce: k = 200, 4
// steps) with the steps cut into three unequal splits of 1, 1 and 2.
TEST(StreamSplitEmulationTest, EachElementCountsOnce) {
  EXPECT_EQ(
      h3::testing::FirstElementNotCountedOnce(
          [](const StreamGemmParams& p) { StreamSplitGemmEmulation(p, 3); }),
      -1);
}

// The splits' shares of the steps: contiguous, every step once, sizes
// within one of each other.
TEST(StreamSplitShapeTest, SharesCoverEveryStepOnce) {
  for (int64_t steps : {1, 2, 7, 32, 128}) {
    for (int splits = 1; splits <= kSplitMaxSplits; ++splits) {
      EXPECT_EQ(StreamSplitFirstStep(steps, splits, 0), 0);
      EXPECT_EQ(StreamSplitFirstStep(steps, splits, splits), steps);
      for (int q = 0; q < splits; ++q) {
        const int64_t size = StreamSplitFirstStep(steps, splits, q + 1) -
                             StreamSplitFirstStep(steps, splits, q);
        EXPECT_GE(size, steps / splits) << steps << " / " << splits;
        EXPECT_LE(size, steps / splits + 1) << steps << " / " << splits;
      }
    }
  }
}

// An H3-1.3B decode step's products on 132 multiprocessors (an H100 SXM):
// two blocks a multiprocessor where the columns allow, at most 8 splits,
// at least 2 steps each.
TEST(StreamSplitShapeTest, CutsTheDecodeProducts) {
  struct Want {
    int64_t n, k, col_blocks, steps;
    int splits;
  };
  for (const Want& want : std::vector<Want>{
           {6144, 2048, 48, 32, 5},  // q|k|v
           {8192, 2048, 64, 32, 4},  // fc1
           {2048, 2048, 16, 32, 8},  // out projection: 16 splits capped
           {2048, 8192, 16, 128, 8},
           {50264, 2048, 393, 32, 1},  // LM head: enough columns alone
           {16, 72, 1, 2, 1},          // 2 steps: one split
           {16, 200, 1, 4, 2},
           {0, 64, 0, 1, 1}}) {
    const StreamSplitShape shape = StreamSplitShapeFor(want.n, want.k, 132);
    EXPECT_EQ(shape.col_blocks, want.col_blocks) << want.n << " x " << want.k;
    EXPECT_EQ(shape.steps, want.steps) << want.n << " x " << want.k;
    EXPECT_EQ(shape.splits, want.splits) << want.n << " x " << want.k;
  }
  EXPECT_EQ(StreamSplitShapeFor(2048, 8192, 0).splits, 1);
}

}  // namespace
}  // namespace h3::kernels
