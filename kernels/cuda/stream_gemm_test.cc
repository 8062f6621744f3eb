// StreamGemmCuda, StreamSplitGemmCuda and TileGemmCuda (label gpu: skipped
// without a device; the split and tile kernels also before compute
// capability 9.0) against the plain product, and a row's bits alone against
// the same row in batches of 7 and 64 at the first, a middle and the last
// position; the split kernel's two kernels (16-bit x from 17 rows, fp32 x)
// against each other, bit for bit.
#include "kernels/cuda/stream_gemm.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/device_major.h"
#include "kernels/cuda/stream_split_gemm.h"
#include "kernels/cuda/tile_gemm.h"
#include "tests/support/gpu_test.h"
#include "tests/support/normalised_error.h"
#include "tests/support/stream_gemm_case.h"

namespace h3::kernels {
namespace {

using h3::testing::StreamCase;
using h3::testing::StreamOperands;

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess)

enum class Kernel { kStream, kSplit, kTile };

// y's bytes for case c (c.rows rows of o.x) from the device; the tile
// kernel with blocks `tile_cols` wide where that is positive (at the split
// count it chose).
void RunOnDevice(Kernel kernel, const StreamCase& c, const StreamOperands& o,
                 std::vector<uint8_t>* y, int tile_cols = 0) {
  const ElementType y_type = h3::testing::YType(c);
  DeviceBuffer dx, dw, db, dy;
  ASSERT_CUDA_OK(dx.Reserve(o.x.size()));
  ASSERT_CUDA_OK(dw.Reserve(o.w.size()));
  ASSERT_CUDA_OK(db.Reserve(o.bias.size()));
  y->assign(c.rows * c.n * ElementSize(y_type), 0xff);
  ASSERT_CUDA_OK(dy.Reserve(y->size()));
  ASSERT_CUDA_OK(
      cudaMemcpy(dx.get(), o.x.data(), o.x.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(
      cudaMemcpy(dw.get(), o.w.data(), o.w.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(cudaMemcpy(db.get(), o.bias.data(), o.bias.size(),
                            cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(cudaMemset(dy.get(), 0xff, y->size()));  // NaNs
  const StreamGemmParams params =
      h3::testing::StreamParams(c, dx.get(), dw.get(), db.get(), dy.get());
  if (kernel == Kernel::kTile && tile_cols > 0) {
    TileGemmShape shape;
    ASSERT_CUDA_OK(TileGemmCudaShape(c.n, c.k, &shape));
    ASSERT_CUDA_OK(TileGemmCudaCut(params, tile_cols, shape.splits, nullptr));
  } else {
    ASSERT_CUDA_OK(kernel == Kernel::kStream ? StreamGemmCuda(params, nullptr)
                   : kernel == Kernel::kSplit
                       ? StreamSplitGemmCuda(params, nullptr)
                       : TileGemmCuda(params, nullptr));
  }
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_CUDA_OK(
      cudaMemcpy(y->data(), dy.get(), y->size(), cudaMemcpyDeviceToHost));
}

class StreamGemmGpuTest
    : public h3::testing::GpuTestWithParam<std::tuple<Kernel, StreamCase>> {
 protected:
  void SetUp() override {
    h3::testing::GpuTestWithParam<std::tuple<Kernel, StreamCase>>::SetUp();
    if (IsSkipped()) return;
    int major = 0;
    ASSERT_CUDA_OK(CurrentDeviceMajor(&major));
    if (kernel() != Kernel::kStream && major < 9) {
      GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
    }
  }
  Kernel kernel() const { return std::get<0>(GetParam()); }
  const StreamCase& test_case() const { return std::get<1>(GetParam()); }
};

TEST_P(StreamGemmGpuTest, MatchesThePlainProduct) {
  const StreamCase& c = test_case();
  const StreamOperands o = h3::testing::MakeStreamOperands(c, 11);
  std::vector<uint8_t> y;
  RunOnDevice(kernel(), c, o, &y);
  EXPECT_LE(h3::testing::NormalisedError(h3::testing::DecodeY(c, y),
                                         h3::testing::StreamReference(c, o)),
            h3::testing::StreamTolerance(c));
}

TEST_P(StreamGemmGpuTest, ARowGetsTheSameBitsInAnyBatch) {
  h3::testing::ExpectARowGetsTheSameBitsInAnyBatch(
      test_case(),
      [&](const StreamCase& c, const StreamOperands& o,
          std::vector<uint8_t>* y) { RunOnDevice(kernel(), c, o, y); });
}

// StreamCases, the 1.3B q|k|v, and for the split kernel's column blocks of
// 128 and its clusters: several blocks with a partial last one, 5 and 8 splits
// of unequal shares (on 132 multiprocessors), an LM-head-like width; the
// 1.3B products at 1, 8 and a batch's rows.
std::vector<StreamCase> GpuCases() {
  std::vector<StreamCase> cases = h3::testing::StreamCases();
  for (const ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    cases.push_back(
        {.w_type = type, .bias = true, .rows = 64, .n = 300, .k = 1096});
    cases.push_back({.w_type = type,
                     .half_x = true,
                     .half_y = true,
                     .bias = true,
                     .gelu = true,
                     .rows = 40,
                     .n = 6144,
                     .k = 2048});
    cases.push_back(
        {.w_type = type, .half_x = true, .rows = 16, .n = 2048, .k = 8192});
    // The 1.3B q|k|v, fc1 and fc2 at 1 and 8 rows: built for 3 and 4
    // blocks a multiprocessor (StreamGemmFitFor) on 132, and fc2 on the
    // default instance.
    cases.push_back({.w_type = type,
                     .half_x = true,
                     .bias = true,
                     .rows = 1,
                     .n = 6144,
                     .k = 2048});
    cases.push_back({.w_type = type,
                     .half_x = true,
                     .half_y = true,
                     .bias = true,
                     .rows = 8,
                     .n = 6144,
                     .k = 2048});
    for (const auto& [n, k] :
         {std::pair<int64_t, int64_t>{8192, 2048}, {2048, 8192}}) {
      cases.push_back({.w_type = type,
                       .half_x = true,
                       .bias = n > k,
                       .gelu = n > k,
                       .rows = 1,
                       .n = n,
                       .k = k});
      cases.push_back(
          {.w_type = type, .half_x = true, .rows = 8, .n = n, .k = k});
    }
    cases.push_back(
        {.w_type = type, .half_x = true, .rows = 5, .n = 50264, .k = 512});
    // The 1.3B out and fc2 at a batch's rows: the tile kernel's 8 splits
    // (on 132 multiprocessors), with 64 and 32 rows of x.
    cases.push_back({.w_type = type,
                     .half_x = true,
                     .half_y = true,
                     .bias = true,
                     .rows = 64,
                     .n = 2048,
                     .k = 2048});
    cases.push_back(
        {.w_type = type, .half_x = true, .rows = 24, .n = 2048, .k = 8192});
  }
  return cases;
}

// Each kernel with every case it takes (the tile kernel: x of W's type).
std::vector<std::tuple<Kernel, StreamCase>> KernelCases() {
  std::vector<std::tuple<Kernel, StreamCase>> cases;
  for (const Kernel kernel : {Kernel::kStream, Kernel::kSplit, Kernel::kTile}) {
    for (const StreamCase& c : GpuCases()) {
      if (kernel != Kernel::kTile || c.half_x) cases.emplace_back(kernel, c);
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StreamGemmGpuTest, ::testing::ValuesIn(KernelCases()),
    [](const ::testing::TestParamInfo<std::tuple<Kernel, StreamCase>>& info) {
      const Kernel kernel = std::get<0>(info.param);
      return std::string(kernel == Kernel::kStream  ? "stream_"
                         : kernel == Kernel::kSplit ? "split_"
                                                    : "tile_") +
             h3::testing::StreamCaseName(std::get<1>(info.param));
    });

// The tile kernel's two widths (kTileCols, kTileWideCols) at the split
// count it chose give the same bits: an output's sums depend on the splits
// alone. Every case the tile kernel takes.
class TileWidthsGpuTest : public h3::testing::GpuTestWithParam<StreamCase> {};

TEST_P(TileWidthsGpuTest, GiveTheSameBits) {
  int major = 0;
  ASSERT_CUDA_OK(CurrentDeviceMajor(&major));
  if (major < 9) {
    GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
  }
  const StreamCase& c = GetParam();
  const StreamOperands o = h3::testing::MakeStreamOperands(c, 13);
  std::vector<uint8_t> narrow, wide;
  RunOnDevice(Kernel::kTile, c, o, &narrow, kTileCols);
  RunOnDevice(Kernel::kTile, c, o, &wide, kTileWideCols);
  EXPECT_EQ(narrow, wide);
}

std::vector<StreamCase> TileCases() {
  std::vector<StreamCase> cases;
  for (const StreamCase& c : GpuCases()) {
    if (c.half_x) cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, TileWidthsGpuTest,
                         ::testing::ValuesIn(TileCases()),
                         [](const ::testing::TestParamInfo<StreamCase>& info) {
                           return h3::testing::StreamCaseName(info.param);
                         });

// For the split kernel from 17 rows: its shared-x kernel (16-bit x,
// stream_split_shared_x.cu) gives its L1 kernel's bits (the same values as
// fp32 x): the two compute one algorithm.
class StreamSplitGpuTest : public h3::testing::GpuTest {};

TEST_F(StreamSplitGpuTest, FloatXGivesTheSameBits) {
  int major = 0;
  ASSERT_CUDA_OK(CurrentDeviceMajor(&major));
  if (major < 9) {
    GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
  }
  h3::testing::ExpectFloatXGivesTheSameBits(
      [](const StreamCase& c, const StreamOperands& o,
         std::vector<uint8_t>* y) { RunOnDevice(Kernel::kSplit, c, o, y); });
}

TEST(StreamGemmRefusalTest, RefusesWithoutEnqueuing) {
  uint16_t w[8];
  float x[8], y[1];
  StreamGemmParams p{.x = x, .w = w, .y = y, .rows = 1, .n = 1, .k = 12};
  EXPECT_EQ(StreamGemmCuda(p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(StreamSplitGemmCuda(p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(TileGemmCuda(p, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace h3::kernels
