// GPU tests of H3PrefillCuda::RunPacked: a packed call over segments of
// varied lengths (several FFT sizes), starts and states equals, bit for bit,
// one batch-1 Run per segment, on the fused kernel and on the cuFFT path, in
// every element type; groups larger than one launch's table; graph capture;
// refusals (label gpu: skipped without a device).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/h3_prefill.h"
#include "kernels/cuda/h3_prefill_packed_support.h"
#include "kernels/cuda/h3_prefill_test_support.h"
#include "kernels/h3.h"
#include "tests/support/gpu_test.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::RandomH3Layer;
using testing::DeviceTensor;
using testing::ExpectAllWritten;
using testing::ExpectSameBytes;
using testing::kPackedShape;
using testing::Packed;
using testing::Stream;

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// (type, prefer, channel_major)
using PackedCase = std::tuple<ElementType, H3PrefillPath, bool>;

class H3PrefillPackedGpuTest
    : public h3::testing::GpuTestWithParam<PackedCase> {};

// Lengths in all four FFT sizes (<= 256, <= 512, <= 1024, longer, the
// longest walking two chunks), starts at 0 and past d_state (the rings
// matter), random states.
TEST_P(H3PrefillPackedGpuTest, EqualsOneRunPerSegmentBitForBit) {
  const auto [type, prefer, channel_major] = GetParam();
  const RandomH3Layer layer(kPackedShape, 11);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {prefer}, &op));
  const std::vector<int64_t> lengths = {1, 17, 255, 700, 1500, 3000};
  const std::vector<int64_t> starts = {0, 100, 70001, 0, 63, 130};
  Packed packed(lengths, starts, type, channel_major);
  Packed single(lengths, starts, type, channel_major);
  ASSERT_TRUE(packed.ok && single.ok);
  // Token-major calls take the chunked kernel's packed-rows form.
  const bool chunked =
      prefer == H3PrefillPath::kChunked || prefer == H3PrefillPath::kChunkedMma;
  EXPECT_EQ(op->RunsFused(packed.layout),
            prefer != H3PrefillPath::kCufft && (channel_major || chunked));
  EXPECT_EQ(op->RunsRows(packed.Params(type)), chunked && !channel_major);
  Stream stream;
  ASSERT_CUDA_OK(stream.created);
  ASSERT_CUDA_OK(op->RunPacked(packed.Params(type), stream.stream));
  ASSERT_CUDA_OK(single.RunOneByOne(*op, type, stream.stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream.stream));
  std::vector<char> got, want;
  ASSERT_CUDA_OK(packed.Bytes(&got));
  ASSERT_CUDA_OK(single.Bytes(&want));
  ExpectSameBytes(got, want);
  ExpectAllWritten(packed.out);
}

std::string CaseName(const ::testing::TestParamInfo<PackedCase>& info) {
  const ElementType type = std::get<0>(info.param);
  return std::string(ElementTypeName(type)) + "_" +
         H3PrefillPathName(std::get<1>(info.param)) +
         (std::get<2>(info.param) ? "_channel_major" : "_token_major");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, H3PrefillPackedGpuTest,
    ::testing::Values(
        PackedCase{ElementType::kF32, H3PrefillPath::kFused, true},
        PackedCase{ElementType::kF16, H3PrefillPath::kFused, true},
        PackedCase{ElementType::kBF16, H3PrefillPath::kFused, true},
        PackedCase{ElementType::kF32, H3PrefillPath::kFused, false},
        PackedCase{ElementType::kF16, H3PrefillPath::kFused, false},
        PackedCase{ElementType::kBF16, H3PrefillPath::kFused, false},
        PackedCase{ElementType::kF16, H3PrefillPath::kCufft, true},
        PackedCase{ElementType::kF32, H3PrefillPath::kChunked, true},
        PackedCase{ElementType::kF16, H3PrefillPath::kChunked, true},
        PackedCase{ElementType::kBF16, H3PrefillPath::kChunked, true},
        PackedCase{ElementType::kF32, H3PrefillPath::kChunked, false},
        PackedCase{ElementType::kF16, H3PrefillPath::kChunked, false},
        PackedCase{ElementType::kBF16, H3PrefillPath::kChunked, false},
        PackedCase{ElementType::kF16, H3PrefillPath::kChunkedMma, false},
        PackedCase{ElementType::kF32, H3PrefillPath::kChunkedMma, false},
        PackedCase{ElementType::kF32, H3PrefillPath::kChunkedMma, true},
        PackedCase{ElementType::kF16, H3PrefillPath::kChunkedMma, true},
        PackedCase{ElementType::kBF16, H3PrefillPath::kChunkedMma, true}),
    CaseName);

class H3PrefillPackedLimitsGpuTest : public h3::testing::GpuTest {};
// (prefer, channel_major)
class H3PrefillPackedGraphGpuTest
    : public h3::testing::GpuTestWithParam<std::tuple<H3PrefillPath, bool>> {};

// More segments of one FFT size than one launch takes (two launches), the
// call captured in a CUDA graph (no allocation, no synchronisation inside).
TEST_P(H3PrefillPackedGraphGpuTest, SplitsLargeGroupsAndCapturesInAGraph) {
  const auto [prefer, channel_major] = GetParam();
  const RandomH3Layer layer(kPackedShape, 12);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {prefer}, &op));
  ASSERT_EQ(op->path(), prefer) << op->reason();
  const int count = kMaxPackedSegments + 6;
  std::vector<int64_t> lengths(count, 8), starts(count);
  for (int i = 0; i < count; ++i) starts[i] = 37 * i;
  const ElementType type = ElementType::kF16;
  Packed packed(lengths, starts, type, channel_major);
  Packed single(lengths, starts, type, channel_major);
  ASSERT_TRUE(packed.ok && single.ok);
  Stream stream;
  ASSERT_CUDA_OK(stream.created);
  cudaGraph_t graph = nullptr;
  ASSERT_CUDA_OK(
      cudaStreamBeginCapture(stream.stream, cudaStreamCaptureModeThreadLocal));
  const cudaError_t run = op->RunPacked(packed.Params(type), stream.stream);
  ASSERT_CUDA_OK(cudaStreamEndCapture(stream.stream, &graph));
  ASSERT_CUDA_OK(run);
  size_t nodes = 0;
  ASSERT_CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 2u);  // two kernel launches (each at most 64 segments)
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream.stream));
  ASSERT_CUDA_OK(single.RunOneByOne(*op, type, stream.stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream.stream));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::vector<char> got, want;
  ASSERT_CUDA_OK(packed.Bytes(&got));
  ASSERT_CUDA_OK(single.Bytes(&want));
  ExpectSameBytes(got, want);
  ExpectAllWritten(packed.out);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, H3PrefillPackedGraphGpuTest,
    ::testing::Values(std::tuple{H3PrefillPath::kFused, true},
                      std::tuple{H3PrefillPath::kChunked, true},
                      std::tuple{H3PrefillPath::kChunked, false},
                      std::tuple{H3PrefillPath::kChunkedMma, true},
                      std::tuple{H3PrefillPath::kChunkedMma, false}),
    [](const ::testing::TestParamInfo<std::tuple<H3PrefillPath, bool>>& i) {
      return std::string(H3PrefillPathName(std::get<0>(i.param))) +
             (std::get<1>(i.param) ? "_channel_major" : "_token_major");
    });

// Broken calls are InvalidValue and write nothing; an empty call succeeds.
TEST_F(H3PrefillPackedLimitsGpuTest, RefusesBrokenCalls) {
  const RandomH3Layer layer(kPackedShape, 13);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(
      H3PrefillCuda::Create(layer.weights(), {H3PrefillPath::kFused}, &op));
  Packed packed({5, 9}, {0, 3}, ElementType::kF32, true);
  ASSERT_TRUE(packed.ok);
  std::vector<char> before, after;
  ASSERT_CUDA_OK(packed.Bytes(&before));
  H3PrefillPackedParams empty;
  EXPECT_EQ(op->RunPacked(empty, nullptr), cudaSuccess);
  std::vector<H3PrefillPackedParams> bad(4, packed.Params(ElementType::kF32));
  bad[0].segments = -1;
  bad[1].channel = 0;
  bad[2].out = nullptr;
  std::vector<H3PrefillSegment> broken = packed.segments;
  broken[1].length = 0;
  bad[3].seqs = broken.data();
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(op->RunPacked(bad[i], nullptr), cudaErrorInvalidValue) << i;
  }
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_CUDA_OK(packed.Bytes(&after));
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace h3::kernels
