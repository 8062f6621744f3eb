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

// The kernel's partials: each warp accumulator lands at its own entry, and
// the entries name every output of a block (128 columns x 8 tiles rows)
// exactly once, as the MMA's C fragment places them (c0, c1 at W row g and
// x rows 2t, 2t + 1; c2, c3 at W row g + 8).
TEST(StreamSplitShapeTest, EntriesNameEveryOutputOfABlockOnce) {
  for (const int tiles : {1, 2, 4, 8}) {
    const int entries = StreamSplitEntries(tiles);
    ASSERT_EQ(entries, kSplitBlockCols * 8 * tiles);
    std::vector<int> seen(entries, 0);
    for (int warp = 0; warp < kSplitWarps; ++warp) {
      for (int tile = 0; tile < 2; ++tile) {
        for (int r = 0; r < tiles; ++r) {
          for (int c = 0; c < 4; ++c) {
            for (int lane = 0; lane < 32; ++lane) {
              const int f =
                  StreamSplitEntryIndex(warp, tile, r, c, lane, tiles);
              ASSERT_GE(f, 0);
              ASSERT_LT(f, entries);
              const StreamSplitOutput out = StreamSplitEntryOutput(f, tiles);
              EXPECT_EQ(out.row, 8 * r + 2 * (lane % 4) + c % 2);
              EXPECT_EQ(out.col,
                        32 * warp + 16 * tile + lane / 4 + 8 * (c / 2));
              ASSERT_GE(out.row, 0);
              ASSERT_LT(out.row, 8 * tiles);
              ASSERT_GE(out.col, 0);
              ASSERT_LT(out.col, kSplitBlockCols);
              ++seen[out.row * kSplitBlockCols + out.col];
            }
          }
        }
      }
    }
    for (int i = 0; i < entries; ++i) {
      ASSERT_EQ(seen[i], 1) << "output " << i << ", tiles " << tiles;
    }
  }
}

// The cluster's blocks sum contiguous shares of the entries that cover them
// all once.
TEST(StreamSplitShapeTest, ReductionSharesCoverEveryEntryOnce) {
  for (const int tiles : {1, 8}) {
    for (int splits = 1; splits <= kSplitMaxSplits; ++splits) {
      EXPECT_EQ(StreamSplitShare(tiles, splits, 0), 0);
      EXPECT_EQ(StreamSplitShare(tiles, splits, splits),
                StreamSplitEntries(tiles));
      for (int q = 0; q < splits; ++q) {
        EXPECT_LT(StreamSplitShare(tiles, splits, q),
                  StreamSplitShare(tiles, splits, q + 1));
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
