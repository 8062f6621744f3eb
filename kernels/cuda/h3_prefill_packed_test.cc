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
#include "kernels/cuda/h3_prefill_test_support.h"
#include "kernels/h3.h"
#include "tests/support/gpu_test.h"
#include "tests/support/random.h"
#include "tests/support/random_h3_layer.h"

namespace h3::kernels {
namespace {

using h3::testing::RandomH3Layer;
using testing::DeviceTensor;
using testing::Stream;

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

const H3Shape kShape{8, 1, 64};

// The rows of a packed step: segments back to back ([R, d] token-major or
// [d, R] channel-major, R the rows of all segments), q, k, v random, out
// NaN, and every segment's states in its own slot of two state buffers.
struct Packed {
  Packed(const std::vector<int64_t>& lengths,
         const std::vector<int64_t>& starts, ElementType type,
         bool channel_major) {
    int64_t rows = 0;
    for (int64_t l : lengths) rows += l;
    const int d = kShape.d_model;
    layout = channel_major ? SequenceLayout::ChannelMajor(d, rows)
                           : SequenceLayout::TokenMajor(d, rows);
    const testing::Inputs in(kShape, 1, rows, type, 40);
    auto tensor = [&](const std::vector<float>* values, DeviceTensor* t) {
      *t = DeviceTensor{1, rows, d, type, layout};
      if (values != nullptr) return testing::Upload(*values, t);
      cudaError_t err = t->memory.Reserve(t->bytes());
      if (err != cudaSuccess) return err;
      return cudaMemset(t->memory.get(), 0xff, t->bytes());
    };
    ok = tensor(&in.q, &q) == cudaSuccess && tensor(&in.k, &k) == cudaSuccess &&
         tensor(&in.v, &v) == cudaSuccess &&
         tensor(nullptr, &out) == cudaSuccess;
    // One random state per segment, zero for every fourth (a new sequence).
    const testing::Inputs states(kShape, static_cast<int>(lengths.size()), 1,
                                 ElementType::kF32, 50);
    ok = ok &&
         testing::CopyToDevice(states.state.shift, &shift) == cudaSuccess &&
         testing::CopyToDevice(states.state.diag, &diag) == cudaSuccess;
    const int64_t shift_size = int64_t{d} * kShape.d_state;
    const int64_t diag_size = 2 * int64_t{d} * kShape.modes();
    int64_t row = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      // Segment i's states in slot (count - 1 - i): not in segment order.
      const int64_t slot = static_cast<int64_t>(lengths.size() - 1 - i);
      segments.push_back({starts[i], lengths[i], row * layout.time,
                          shift.as<float>() + slot * shift_size,
                          diag.as<float>() + slot * diag_size});
      row += lengths[i];
    }
  }
  H3PrefillPackedParams Params(ElementType type) const {
    H3PrefillPackedParams p;
    p.type = type;
    p.time = layout.time;
    p.channel = layout.channel;
    p.q = q.memory.get();
    p.k = k.memory.get();
    p.v = v.memory.get();
    p.out = out.memory.get();
    p.segments = static_cast<int>(segments.size());
    p.seqs = segments.data();
    return p;
  }
  // Each segment as its own batch-1 Run.
  cudaError_t RunOneByOne(H3PrefillCuda& op, ElementType type,
                          cudaStream_t stream) {
    const int64_t size = ElementSize(type);
    for (const H3PrefillSegment& s : segments) {
      H3PrefillCudaParams p;
      p.batch = 1;
      p.start = s.start;
      p.length = s.length;
      p.type = type;
      p.layout = {0, layout.time, layout.channel};
      p.q = static_cast<const char*>(q.memory.get()) + size * s.offset;
      p.k = static_cast<const char*>(k.memory.get()) + size * s.offset;
      p.v = static_cast<const char*>(v.memory.get()) + size * s.offset;
      p.out = static_cast<char*>(out.memory.get()) + size * s.offset;
      p.shift_state = s.shift_state;
      p.diag_state = s.diag_state;
      const cudaError_t err = op.Run(p, stream);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }
  // out, then the shift states, then the diagonal states, as raw bytes.
  cudaError_t Bytes(std::vector<char>* bytes) const {
    const DeviceBuffer* parts[] = {&out.memory, &shift, &diag};
    bytes->clear();
    for (const DeviceBuffer* part : parts) {
      const size_t at = bytes->size();
      bytes->resize(at + part->bytes());
      const cudaError_t err = cudaMemcpy(bytes->data() + at, part->get(),
                                         part->bytes(), cudaMemcpyDeviceToHost);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }

  bool ok = false;
  SequenceLayout layout;
  DeviceTensor q, k, v, out;
  DeviceBuffer shift, diag;
  std::vector<H3PrefillSegment> segments;
};

// Expects every output element written (out starts as NaN), so that two
// calls that wrote nothing cannot look equal.
void ExpectAllWritten(const DeviceTensor& out) {
  std::vector<float> values;
  ASSERT_EQ(testing::Download(out, &values), cudaSuccess);
  size_t nan = 0;
  for (float x : values) nan += std::isnan(x) ? 1 : 0;
  EXPECT_EQ(nan, 0u) << "of " << values.size() << " output elements";
}

// Expects two byte images equal; reports the first difference.
void ExpectSameBytes(const std::vector<char>& got,
                     const std::vector<char>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t first = 0;
  while (first < got.size() && got[first] == want[first]) ++first;
  EXPECT_EQ(first, got.size())
      << "first difference at byte " << first << " of " << got.size();
}

// (type, prefer, channel_major)
using PackedCase = std::tuple<ElementType, H3PrefillPath, bool>;

class H3PrefillPackedGpuTest
    : public h3::testing::GpuTestWithParam<PackedCase> {};

// Lengths in all four FFT sizes (<= 256, <= 512, <= 1024, longer, the
// longest walking two chunks), starts at 0 and past d_state (the rings
// matter), random states.
TEST_P(H3PrefillPackedGpuTest, EqualsOneRunPerSegmentBitForBit) {
  const auto [type, prefer, channel_major] = GetParam();
  const RandomH3Layer layer(kShape, 11);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {prefer}, &op));
  const std::vector<int64_t> lengths = {1, 17, 255, 700, 1500, 3000};
  const std::vector<int64_t> starts = {0, 100, 70001, 0, 63, 130};
  Packed packed(lengths, starts, type, channel_major);
  Packed single(lengths, starts, type, channel_major);
  ASSERT_TRUE(packed.ok && single.ok);
  EXPECT_EQ(op->RunsFused(packed.layout),
            prefer != H3PrefillPath::kCufft && channel_major);
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
        PackedCase{ElementType::kF16, H3PrefillPath::kChunked, false},
        PackedCase{ElementType::kF32, H3PrefillPath::kChunkedMma, true},
        PackedCase{ElementType::kF16, H3PrefillPath::kChunkedMma, true},
        PackedCase{ElementType::kBF16, H3PrefillPath::kChunkedMma, true}),
    CaseName);

class H3PrefillPackedLimitsGpuTest : public h3::testing::GpuTest {};
class H3PrefillPackedGraphGpuTest
    : public h3::testing::GpuTestWithParam<H3PrefillPath> {};

// More segments of one FFT size than one launch takes (two launches), the
// call captured in a CUDA graph (no allocation, no synchronisation inside).
TEST_P(H3PrefillPackedGraphGpuTest, SplitsLargeGroupsAndCapturesInAGraph) {
  const RandomH3Layer layer(kShape, 12);
  std::unique_ptr<H3PrefillCuda> op;
  ASSERT_CUDA_OK(H3PrefillCuda::Create(layer.weights(), {GetParam()}, &op));
  ASSERT_EQ(op->path(), GetParam()) << op->reason();
  const int count = kMaxPackedSegments + 6;
  std::vector<int64_t> lengths(count, 8), starts(count);
  for (int i = 0; i < count; ++i) starts[i] = 37 * i;
  const ElementType type = ElementType::kF16;
  Packed packed(lengths, starts, type, true);
  Packed single(lengths, starts, type, true);
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

INSTANTIATE_TEST_SUITE_P(Paths, H3PrefillPackedGraphGpuTest,
                         ::testing::Values(H3PrefillPath::kFused,
                                           H3PrefillPath::kChunked,
                                           H3PrefillPath::kChunkedMma),
                         [](const ::testing::TestParamInfo<H3PrefillPath>& i) {
                           return std::string(H3PrefillPathName(i.param));
                         });

// Broken calls are InvalidValue and write nothing; an empty call succeeds.
TEST_F(H3PrefillPackedLimitsGpuTest, RefusesBrokenCalls) {
  const RandomH3Layer layer(kShape, 13);
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
