// TileGemmCuda (kernels/cuda/tile_gemm.cu: cp.async stages, ldmatrix,
// mma.sync, thread-block clusters) on the CPU emulator: bit for bit its
// specification, TileGemmEmulation (the emulator's MMA adds its 16 products
// in fp32 in k order, as the specification does), at the split count the
// host entry chose, with blocks of either width (64 and 128 columns), in
// both fiber orders; each element counted once; a row's bits the same in
// any batch.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "base/element_type.h"
#include "gtest/gtest.h"
#include "kernels/cuda/emulator/fibers.h"
#include "kernels/cuda/tile_gemm.h"
#include "tests/support/normalised_error.h"
#include "tests/support/stream_gemm_case.h"

namespace h3::kernels {
namespace {

using h3::testing::StreamCase;
using h3::testing::StreamOperands;

// y of case c over operands o, by TileGemmCuda on the emulator, or where
// `cols` is positive by TileGemmCudaCut with blocks that wide and `splits`.
void RunEmulated(const StreamCase& c, const StreamOperands& o,
                 std::vector<uint8_t>* y, int cols = 0, int splits = 0) {
  y->assign(c.rows * c.n * ElementSize(h3::testing::YType(c)), 0xff);
  const StreamGemmParams p = h3::testing::StreamParams(
      c, o.x.data(), o.w.data(), o.bias.data(), y->data());
  ASSERT_EQ(cols > 0 ? TileGemmCudaCut(p, cols, splits, nullptr)
                     : TileGemmCuda(p, nullptr),
            cudaSuccess)
      << emulator::LastRunError();
}

// The half-x StreamCases (every row-tile instance, k under a step, partial
// steps and column blocks), and some with several column blocks of 64, a
// partial last one, and k cut into unequal splits (on the emulator's 132
// multiprocessors: 4 splits of 18 steps at k 1096, 8 of 33 at k 2056, 4 of
// 16 at k 1024).
std::vector<StreamCase> TileCases() {
  std::vector<StreamCase> cases;
  for (const StreamCase& c : h3::testing::StreamCases()) {
    if (c.half_x && c.k <= 4104) cases.push_back(c);
  }
  for (const ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    cases.push_back({.w_type = type,
                     .half_x = true,
                     .bias = true,
                     .rows = 64,
                     .n = 300,
                     .k = 1096});
    cases.push_back({.w_type = type,
                     .half_x = true,
                     .half_y = true,
                     .bias = true,
                     .gelu = true,
                     .rows = 20,
                     .n = 136,
                     .k = 2056});
    cases.push_back(
        {.w_type = type, .half_x = true, .rows = 40, .n = 64, .k = 1024});
  }
  return cases;
}

class TileGemmEmulatedTest : public ::testing::TestWithParam<StreamCase> {};

TEST_P(TileGemmEmulatedTest, GivesTheBitsOfItsSpecification) {
  const StreamCase& c = GetParam();
  const StreamOperands o = h3::testing::MakeStreamOperands(c, 7);
  TileGemmShape shape;
  ASSERT_EQ(TileGemmCudaShape(c.n, c.k, &shape), cudaSuccess);
  std::vector<uint8_t> want(c.rows * c.n * ElementSize(h3::testing::YType(c)));
  TileGemmEmulation(h3::testing::StreamParams(c, o.x.data(), o.w.data(),
                                              o.bias.data(), want.data()),
                    shape.splits);
  const int64_t size = ElementSize(h3::testing::YType(c));
  // Both widths at the chosen split count (the width changes no bits).
  for (const int cols : {kTileCols, kTileWideCols}) {
    for (const emulator::Order order :
         {emulator::Order::kForward, emulator::Order::kBackward}) {
      const emulator::ScopedOrder scoped(order);
      std::vector<uint8_t> y;
      RunEmulated(c, o, &y, cols, shape.splits);
      if (HasFatalFailure()) return;
      ASSERT_EQ(y.size(), want.size());
      for (int64_t i = 0; i < c.rows * c.n; ++i) {
        ASSERT_EQ(
            std::memcmp(y.data() + i * size, want.data() + i * size, size), 0)
            << "row " << i / c.n << " column " << i % c.n << ", "
            << shape.splits << " splits, " << cols << " columns a block";
      }
    }
  }
  // And the specification is the product.
  EXPECT_LE(h3::testing::NormalisedError(h3::testing::DecodeY(c, want),
                                         h3::testing::StreamReference(c, o)),
            h3::testing::StreamTolerance(c));
}

INSTANTIATE_TEST_SUITE_P(Cases, TileGemmEmulatedTest,
                         ::testing::ValuesIn(TileCases()),
                         [](const ::testing::TestParamInfo<StreamCase>& info) {
                           return h3::testing::StreamCaseName(info.param);
                         });

// Batches of 7 and 64 (row tile instances 2 and 8) over 3 column blocks
// of 128 and 4 splits.
TEST(TileGemmEmulatedBatchTest, ARowGetsTheSameBitsInAnyBatch) {
  for (const ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    SCOPED_TRACE(ElementTypeName(type));
    h3::testing::ExpectARowGetsTheSameBitsInAnyBatch(
        {.w_type = type,
         .half_x = true,
         .half_y = true,
         .bias = true,
         .gelu = true,
         .n = 300,
         .k = 1096},
        [](const StreamCase& c, const StreamOperands& o,
           std::vector<uint8_t>* y) { RunEmulated(c, o, y); });
  }
}

// TileGemmCudaSplits: every split count the kernel takes gives the
// specification's bits at that count (33 steps: shares of 33 to 4 steps,
// unequal), and the counts it refuses.
TEST(TileGemmEmulatedSplitsTest, EachCountGivesItsSpecificationsBits) {
  const StreamCase c{.w_type = ElementType::kBF16,
                     .half_x = true,
                     .bias = true,
                     .rows = 36,
                     .n = 72,
                     .k = 2056};
  const StreamOperands o = h3::testing::MakeStreamOperands(c, 17);
  const size_t bytes = c.rows * c.n * sizeof(float);
  for (int splits = 1; splits <= kTileMaxSplits; ++splits) {
    std::vector<uint8_t> want(bytes), got(bytes, 0xff);
    TileGemmEmulation(h3::testing::StreamParams(c, o.x.data(), o.w.data(),
                                                o.bias.data(), want.data()),
                      splits);
    ASSERT_EQ(
        TileGemmCudaSplits(h3::testing::StreamParams(c, o.x.data(), o.w.data(),
                                                     o.bias.data(), got.data()),
                           splits, nullptr),
        cudaSuccess)
        << emulator::LastRunError();
    EXPECT_EQ(got, want) << splits << " splits";
  }
  std::vector<uint8_t> y(bytes);
  StreamCase shallow = c;
  shallow.k = 3 * kTileStep;  // 3 steps
  for (const auto& [k_case, splits] :
       {std::pair{c, 0}, std::pair{c, kTileMaxSplits + 1},
        std::pair{shallow, 4}}) {
    EXPECT_EQ(TileGemmCudaSplits(
                  h3::testing::StreamParams(k_case, o.x.data(), o.w.data(),
                                            o.bias.data(), y.data()),
                  splits, nullptr),
              cudaErrorInvalidValue)
        << splits << " splits of k " << k_case.k;
  }
  // TileGemmCudaCut: the two widths only, and a split count.
  const StreamGemmParams p = h3::testing::StreamParams(
      c, o.x.data(), o.w.data(), o.bias.data(), y.data());
  EXPECT_EQ(TileGemmCudaCut(p, 32, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(TileGemmCudaCut(p, kTileWideCols, 0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(TileGemmCudaCut(p, kTileWideCols, kTileMaxSplits + 1, nullptr),
            cudaErrorInvalidValue);
}

TEST(TileGemmEmulatedIndexTest, CountsEveryElementOnce) {
  EXPECT_EQ(h3::testing::FirstElementNotCountedOnce(
                [](const StreamGemmParams& p) {
                  ASSERT_EQ(TileGemmCuda(p, nullptr), cudaSuccess)
                      << emulator::LastRunError();
                },
                /*half_x=*/true),
            -1);
}

// What the host entry asks of the device (the emulator's 132
// multiprocessors: 4 blocks of the 64-wide 64-row instance each, 48 KiB of
// shared memory a block; 3 of the 128-wide one, 72 KiB), and its
// refusals.
TEST(TileGemmEmulatedShapeTest, AsksTheDevice) {
  TileGemmShape shape;
  ASSERT_EQ(TileGemmCudaShape(2048, 2048, &shape), cudaSuccess);
  EXPECT_EQ(shape.cols, kTileCols);  // 1,024 warps either way
  EXPECT_EQ(shape.col_blocks, 32);
  EXPECT_EQ(shape.splits, 8);
  ASSERT_EQ(TileGemmCudaShape(6144, 2048, &shape), cudaSuccess);
  EXPECT_EQ(shape.cols, kTileWideCols);  // 384 x 8 warps, not 480 x 4
  EXPECT_EQ(shape.col_blocks, 48);
  EXPECT_EQ(shape.splits, 8);  // 396 blocks at once
}

TEST(TileGemmEmulatedShapeTest, RefusesWithoutEnqueuing) {
  alignas(16) uint16_t w[8], x[8];
  alignas(16) float xf[8], y[4];
  StreamGemmParams p{.x = xf, .w = w, .y = y, .rows = 1, .n = 1, .k = 8};
  EXPECT_EQ(TileGemmCuda(p, nullptr), cudaErrorInvalidValue);  // fp32 x
  p.x = x;
  p.x_type = ElementType::kF16;
  p.n = int64_t{kTileWideCols} * 65536;  // 65536 column blocks: grid.y
  EXPECT_EQ(TileGemmCuda(p, nullptr), cudaErrorInvalidValue);
  p.n = 1;
  y[0] = -1.0f;
  w[0] = 0x3c00;  // 1
  x[0] = 0x4000;  // 2
  for (int i = 1; i < 8; ++i) w[i] = x[i] = 0;
  ASSERT_EQ(TileGemmCuda(p, nullptr), cudaSuccess) << emulator::LastRunError();
  EXPECT_EQ(y[0], 2.0f);
}

}  // namespace
}  // namespace h3::kernels
