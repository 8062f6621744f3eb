// SampleCuda against its CPU twin SampleCpu (label gpu: the device tests skip
// without one; the argument checks run anywhere, they launch nothing).
#include "kernels/cuda/sampling.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/sampling.h"
#include "tests/support/gpu_test.h"
#include "tests/support/sampling_batch.h"

namespace h3::kernels {
namespace {

using testing::Batch;
using testing::FirstDifference;
using testing::Histories;
using testing::KeepAwayFromBoundaries;
using testing::OnCpu;
using testing::Params;
using testing::RandomBatch;
using testing::Result;
using testing::RowName;

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

template <typename T>
cudaError_t Upload(const std::vector<T>& host, DeviceBuffer* device) {
  cudaError_t err =
      device->Reserve(std::max<size_t>(host.size(), 1) * sizeof(T));
  if (err != cudaSuccess) return err;
  return cudaMemcpy(device->get(), host.data(), host.size() * sizeof(T),
                    cudaMemcpyHostToDevice);
}

void OnGpu(const Batch& batch, Result* out) {
  const size_t rows = batch.rows.size();
  DeviceBuffer logits, row_params, counts, flags, histories, ids, logprobs, ws;
  ASSERT_CUDA_OK(Upload(batch.logits, &logits));
  ASSERT_CUDA_OK(Upload(batch.rows, &row_params));
  ASSERT_CUDA_OK(Upload(batch.counts, &counts));
  ASSERT_CUDA_OK(Upload(batch.flags, &flags));
  ASSERT_CUDA_OK(Upload(
      Histories(batch, counts.as<int32_t>(), flags.as<uint8_t>()), &histories));
  ASSERT_CUDA_OK(ids.Reserve(rows * sizeof(int32_t)));
  ASSERT_CUDA_OK(logprobs.Reserve(rows * sizeof(float)));
  const size_t ws_bytes =
      SampleWorkspaceBytes(static_cast<int>(rows), batch.vocab);
  ASSERT_CUDA_OK(ws.Reserve(ws_bytes));
  Result device{{}, {}, {}};
  SampleParams p =
      Params(batch, logits.as<float>(), row_params.as<SamplingRow>(),
             histories.as<TokenHistory>(), &device);
  p.ids = ids.as<int32_t>();
  p.logprobs = logprobs.as<float>();
  ASSERT_CUDA_OK(SampleCuda(p, ws.get(), ws_bytes, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  out->ids.resize(rows);
  out->logprobs.resize(rows);
  ASSERT_CUDA_OK(cudaMemcpy(out->ids.data(), ids.get(), rows * sizeof(int32_t),
                            cudaMemcpyDeviceToHost));
  ASSERT_CUDA_OK(cudaMemcpy(out->logprobs.data(), logprobs.get(),
                            rows * sizeof(float), cudaMemcpyDeviceToHost));
  out->counts.resize(batch.counts.size());
  ASSERT_CUDA_OK(cudaMemcpy(out->counts.data(), counts.get(),
                            out->counts.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost));
}

// (vocab, ties, repeats)
using Shape = std::tuple<int32_t, bool, int>;

class SampleCudaTest : public h3::testing::GpuTestWithParam<Shape> {};

TEST_P(SampleCudaTest, MatchesCpuTwin) {
  const auto [vocab, ties, repeats] = GetParam();
  Batch batch = RandomBatch(vocab, ties, repeats, 4321 + vocab);
  KeepAwayFromBoundaries(batch);
  if (HasFatalFailure()) return;
  const Result cpu = OnCpu(batch);
  Result gpu, again;
  OnGpu(batch, &gpu);
  if (HasFatalFailure()) return;
  OnGpu(batch, &again);
  if (HasFatalFailure()) return;
  for (size_t b = 0; b < batch.rows.size(); ++b) {
    EXPECT_EQ(gpu.ids[b], cpu.ids[b])
        << "row " << b << ": " << RowName(batch.rows[b]);
    EXPECT_NEAR(gpu.logprobs[b], cpu.logprobs[b], 1e-5) << "row " << b;
    EXPECT_EQ(again.ids[b], gpu.ids[b]) << "row " << b << " run to run";
  }
  // One more at each chosen id of a row with a history, nothing else.
  EXPECT_EQ(FirstDifference(gpu.counts, cpu.counts), -1);
}

TEST_P(SampleCudaTest, GreedyMatchesWithoutMovingAnyBoundary) {
  const auto [vocab, ties, repeats] = GetParam();
  Batch batch = RandomBatch(vocab, ties, repeats, 99 + vocab);
  for (SamplingRow& row : batch.rows) row.temperature = 0.0f;
  const Result cpu = OnCpu(batch);
  Result gpu;
  OnGpu(batch, &gpu);
  if (HasFatalFailure()) return;
  EXPECT_EQ(gpu.ids, cpu.ids);
  EXPECT_EQ(FirstDifference(gpu.counts, cpu.counts), -1);
}

std::string ShapeName(const ::testing::TestParamInfo<Shape>& info) {
  const auto [vocab, ties, repeats] = info.param;
  return std::to_string(vocab) + (ties ? "_ties" : "") + "_x" +
         std::to_string(repeats);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SampleCudaTest,
    ::testing::Values(Shape{50257, false, 2}, Shape{50257, true, 1},
                      Shape{262144, false, 1}, Shape{1000, false, 3},
                      Shape{7, true, 3}, Shape{1, false, 1}),
    ShapeName);

// Argument checks come before any launch, so these run without a device.
TEST(SampleCudaArgsTest, RejectsBadArgumentsAndSmallWorkspaces) {
  // 8 bytes a token, 24 a chunk of 4096 tokens, per row.
  EXPECT_EQ(SampleWorkspaceBytes(2, 10), 2u * (10u * 8u + 24u));
  EXPECT_EQ(SampleWorkspaceBytes(1, 4097), 4097u * 8u + 2u * 24u);
  EXPECT_EQ(SampleWorkspaceBytes(0, 10), 0u);
  // Never dereferenced: every call below fails its checks or has no rows.
  alignas(16) static char fake[64];
  SampleParams p;
  p.batch = 2;
  p.vocab_size = 10;
  p.row_stride = 12;
  p.logits = reinterpret_cast<const float*>(fake);
  p.rows = reinterpret_cast<const SamplingRow*>(fake);
  p.ids = reinterpret_cast<int32_t*>(fake);
  const size_t need = SampleWorkspaceBytes(2, 10);
  EXPECT_EQ(SampleCuda(p, fake, need - 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(SampleCuda(p, nullptr, need, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(SampleCuda(p, fake + 1, need, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(SampleCuda(p, fake + 4, need, nullptr), cudaErrorInvalidValue);
  SampleParams bad = p;
  bad.row_stride = 9;
  EXPECT_EQ(SampleCuda(bad, fake, need, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.vocab_size = (1 << 24) + 1;
  bad.row_stride = bad.vocab_size;
  EXPECT_EQ(SampleCuda(bad, fake, SIZE_MAX, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.ids = nullptr;
  EXPECT_EQ(SampleCuda(bad, fake, need, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.batch = -1;
  EXPECT_EQ(SampleCuda(bad, fake, need, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.batch = 65536;  // a grid dimension
  EXPECT_EQ(SampleCuda(bad, fake, SIZE_MAX, nullptr), cudaErrorInvalidValue);
  bad = p;
  bad.batch = 0;  // nothing to do, no workspace needed
  EXPECT_EQ(SampleCuda(bad, nullptr, 0, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace h3::kernels
