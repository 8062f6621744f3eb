// TileGemmEmulation (kernels/tile_gemm.h) against the plain product at
// several split counts, each element counted once across the splits, and
// how TileGemmShapeFor cuts the products of a decode step.
#include "kernels/tile_gemm.h"

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

// StreamCases with x in W's type (the only x TileGemmCheck takes).
std::vector<StreamCase> HalfXCases() {
  std::vector<StreamCase> cases;
  for (const StreamCase& c : h3::testing::StreamCases()) {
    if (c.half_x) cases.push_back(c);
  }
  return cases;
}

class TileGemmEmulationTest
    : public ::testing::TestWithParam<std::tuple<StreamCase, int>> {};

TEST_P(TileGemmEmulationTest, MatchesThePlainProduct) {
  const StreamCase& c = std::get<0>(GetParam());
  const int splits = std::get<1>(GetParam());
  const auto o = h3::testing::MakeStreamOperands(c, 13);
  std::vector<uint8_t> y(c.rows * c.n * ElementSize(h3::testing::YType(c)));
  const StreamGemmParams p = h3::testing::StreamParams(
      c, o.x.data(), o.w.data(), o.bias.data(), y.data());
  ASSERT_STREQ(TileGemmCheck(p, false), "");
  TileGemmEmulation(p, splits);
  EXPECT_LE(h3::testing::NormalisedError(h3::testing::DecodeY(c, y),
                                         h3::testing::StreamReference(c, o)),
            h3::testing::StreamTolerance(c));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TileGemmEmulationTest,
    ::testing::Combine(::testing::ValuesIn(HalfXCases()),
                       ::testing::Values(1, 3, 8)),
    [](const ::testing::TestParamInfo<std::tuple<StreamCase, int>>& info) {
      return h3::testing::StreamCaseName(std::get<0>(info.param)) + "_s" +
             std::to_string(std::get<1>(info.param));
    });

// k = 200 (4 steps, the last partial) in three unequal splits of 1, 1 and
// 2 steps.
TEST(TileGemmEmulationTest, EachElementCountsOnce) {
  EXPECT_EQ(h3::testing::FirstElementNotCountedOnce(
                [](const StreamGemmParams& p) { TileGemmEmulation(p, 3); },
                /*half_x=*/true),
            -1);
}

TEST(TileGemmCheckTest, TakesOnlyXOfWsType) {
  uint16_t x[8], w[8], y[1];
  StreamGemmParams p{.x = x,
                     .x_type = ElementType::kF16,
                     .w = w,
                     .w_type = ElementType::kF16,
                     .bias_type = ElementType::kF16,
                     .y = y,
                     .y_type = ElementType::kF16,
                     .rows = 1,
                     .n = 1,
                     .k = 8};
  EXPECT_STREQ(TileGemmCheck(p, false), "");
  p.x_type = ElementType::kF32;
  EXPECT_STREQ(TileGemmCheck(p, false), "x_type: w_type only");
  p.x_type = ElementType::kBF16;
  EXPECT_STRNE(TileGemmCheck(p, false), "");
  p.x_type = ElementType::kF16;
  p.k = 12;  // StreamGemmCheck's rules come first
  EXPECT_STREQ(TileGemmCheck(p, false), "k: a positive multiple of 8");
}

// A device of 132 multiprocessors, 3 blocks each, every cluster size
// filling it (as the CPU emulator reports).
TileGemmDevice FullDevice() {
  TileGemmDevice d;
  d.blocks = 3 * 132;
  for (int s = 2; s <= kTileMaxSplits; ++s) d.clusters[s] = d.blocks / s;
  return d;
}

TEST(TileGemmShapeTest, OneWaveOfAsManySplitsAsFit) {
  const TileGemmDevice d = FullDevice();
  // The H3-1.3B products (d_model 2048).
  const TileGemmShape qkv = TileGemmShapeFor(6144, 2048, d);
  EXPECT_EQ(qkv.col_blocks, 96);
  EXPECT_EQ(qkv.steps, 32);
  EXPECT_EQ(qkv.splits, 4);  // 8 would take 768 blocks
  EXPECT_EQ(TileGemmShapeFor(8192, 2048, d).splits, 3);   // fc1: 384 blocks
  EXPECT_EQ(TileGemmShapeFor(2048, 2048, d).splits, 8);   // out
  EXPECT_EQ(TileGemmShapeFor(2048, 8192, d).splits, 8);   // fc2
  EXPECT_EQ(TileGemmShapeFor(50264, 2048, d).splits, 1);  // the LM head
  // At least kTileMinSteps steps a split.
  EXPECT_EQ(TileGemmShapeFor(64, 4 * kTileStep, d).splits, 1);
  EXPECT_EQ(TileGemmShapeFor(64, 8 * kTileStep, d).splits, 2);
  EXPECT_EQ(TileGemmShapeFor(64, 8 * kTileStep + 8, d).splits, 2);
  EXPECT_EQ(TileGemmShapeFor(64, 9 * kTileStep + 8, d).splits, 2);
  EXPECT_EQ(TileGemmShapeFor(64, 12 * kTileStep, d).splits, 3);
}

TEST(TileGemmShapeTest, FewerSplitsWhereTheClustersDoNotFit) {
  TileGemmDevice d = FullDevice();
  d.clusters[8] = 31;  // a cluster's blocks share a GPC
  EXPECT_EQ(TileGemmShapeFor(2048, 2048, d).splits, 7);
  d.clusters[7] = 0;  // none fits
  EXPECT_EQ(TileGemmShapeFor(2048, 2048, d).splits, 6);
  // Nothing fits but single blocks: 1, in as many waves as it takes.
  const TileGemmDevice none;
  EXPECT_EQ(TileGemmShapeFor(2048, 2048, none).splits, 1);
}

// The H3-1.3B products on 132 multiprocessors, 4 blocks 64 wide or 3
// blocks 128 wide each (their shared memory at 64 rows), every cluster size
// filling it.
TEST(TileGemmShapeTest, TheWidthWhoseFirstWaveHoldsMoreWarps) {
  TileGemmDevice narrow, wide;
  narrow.blocks = 4 * 132;
  wide.blocks = 3 * 132;
  for (int s = 2; s <= kTileMaxSplits; ++s) {
    narrow.clusters[s] = narrow.blocks / s;
    wide.clusters[s] = wide.blocks / s;
  }
  // q|k|v: 384 wide blocks of 8 warps against 480 narrow ones of 4.
  const TileGemmShape qkv = TileGemmChooseShape(6144, 2048, narrow, wide);
  EXPECT_EQ(qkv.cols, kTileWideCols);
  EXPECT_EQ(qkv.col_blocks, 48);
  EXPECT_EQ(qkv.steps, 32);
  EXPECT_EQ(qkv.splits, 8);
  const TileGemmShape fc1 = TileGemmChooseShape(8192, 2048, narrow, wide);
  EXPECT_EQ(fc1.cols, kTileWideCols);  // 384 x 8 warps against 512 x 4
  EXPECT_EQ(fc1.splits, 6);
  // out and fc2: 1,024 warps either way; the narrow blocks at a tie.
  for (const int64_t k : {2048, 8192}) {
    const TileGemmShape s = TileGemmChooseShape(2048, k, narrow, wide);
    EXPECT_EQ(s.cols, kTileCols) << k;
    EXPECT_EQ(s.col_blocks, 32) << k;
    EXPECT_EQ(s.splits, 8) << k;
  }
  // The LM head: one split either way; 393 wide blocks fit one wave.
  const TileGemmShape head = TileGemmChooseShape(50264, 2048, narrow, wide);
  EXPECT_EQ(head.cols, kTileWideCols);
  EXPECT_EQ(head.col_blocks, 393);
  EXPECT_EQ(head.splits, 1);
  // A device that holds nothing: the narrow blocks, one split.
  const TileGemmShape none =
      TileGemmChooseShape(6144, 2048, TileGemmDevice{}, TileGemmDevice{});
  EXPECT_EQ(none.cols, kTileCols);
  EXPECT_EQ(none.splits, 1);
  // TileGemmShapeFor at the wide width alone.
  EXPECT_EQ(TileGemmShapeFor(300, 1096, wide, kTileWideCols).col_blocks, 3);
}

}  // namespace
}  // namespace h3::kernels
