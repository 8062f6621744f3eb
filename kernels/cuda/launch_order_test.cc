// LaunchOrder::kOverlapPrior (label gpu: skipped without a device; on a
// device before sm_90 the launches fall back to stream order and the test
// still holds). A long product writes y1, a norm launched overlapped reads
// it, and a short product launched overlapped (StreamGemmCuda, or
// TileGemmCuda from compute capability 9.0) reads the norm's output: each
// overlapped kernel starts while the one before still runs, and must still
// read that one's finished output. Every buffer the chain writes is poisoned
// before each run, so a read that came too early shows in the result, which
// must be bit for bit the chain's in plain stream order, run eagerly and
// replayed from a captured graph.
#include "kernels/cuda/launch_order.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/device_major.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/kernel_image.h"
#include "kernels/cuda/stream_gemm.h"
#include "kernels/cuda/tile_gemm.h"
#include "tests/support/gpu_test.h"

namespace h3::kernels {
namespace {

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess)

// y1 [rows, kWide] = W1 x0, fp32: 256 MiB of fp16 weights, long enough
// (tens of microseconds) for the kernels after it to start and wait. kWide
// is a row the norm keeps in registers (its row kernel, as the engine's).
constexpr int64_t kK = 32768, kWide = 4096, kNarrow = 16;

std::vector<uint16_t> RandomHalves(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (uint16_t& e : v) e = FloatToHalf(normal(rng));
  return v;
}

// The rows, and whether the short product runs on TileGemmCuda.
using OrderCase = std::tuple<int64_t, bool>;

class LaunchOrderGpuTest : public h3::testing::GpuTestWithParam<OrderCase> {
 protected:
  void SetUp() override {
    h3::testing::GpuTestWithParam<OrderCase>::SetUp();
    if (IsSkipped()) return;
    rows_ = std::get<0>(GetParam());
    tile_ = std::get<1>(GetParam());
    if (tile_ && !CurrentImageTakesSm90()) {
      GTEST_SKIP() << "the tile kernel needs compute capability 9.0";
    }
    ASSERT_CUDA_OK(CopyToDevice(RandomHalves(rows_ * kK, 1.0f, 1), &x0_));
    ASSERT_CUDA_OK(CopyToDevice(RandomHalves(kWide * kK, 1.0f / 181, 2), &w1_));
    ASSERT_CUDA_OK(
        CopyToDevice(RandomHalves(kNarrow * kWide, 1.0f / 64, 3), &w2_));
    std::vector<float> gamma(kWide), beta(kWide);
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
    for (int64_t c = 0; c < kWide; ++c) {
      gamma[c] = uniform(rng);
      beta[c] = uniform(rng) - 1.0f;
    }
    ASSERT_CUDA_OK(CopyToDevice(gamma, &gamma_));
    ASSERT_CUDA_OK(CopyToDevice(beta, &beta_));
    ASSERT_CUDA_OK(y1_.Reserve(rows_ * kWide * sizeof(float)));
    ASSERT_CUDA_OK(residual_.Reserve(rows_ * kWide * sizeof(float)));
    ASSERT_CUDA_OK(normed_.Reserve(rows_ * kWide * sizeof(uint16_t)));
    ASSERT_CUDA_OK(y2_.Reserve(rows_ * kNarrow * sizeof(float)));
    ASSERT_CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Poisons what the chain writes (0xff bytes: NaNs in every type), then
  // enqueues it: the long product in stream order, the norm and the short
  // product in `order`.
  cudaError_t Enqueue(LaunchOrder order) {
    for (const DeviceBuffer* b : {&y1_, &residual_, &normed_, &y2_}) {
      if (cudaError_t err =
              cudaMemsetAsync(b->get(), 0xff, b->bytes(), stream_);
          err != cudaSuccess) {
        return err;
      }
    }
    const StreamGemmParams p1{.x = x0_.get(),
                              .x_type = ElementType::kF16,
                              .w = w1_.get(),
                              .y = y1_.get(),
                              .rows = rows_,
                              .n = kWide,
                              .k = kK};
    if (cudaError_t err = StreamGemmCuda(p1, stream_); err != cudaSuccess) {
      return err;
    }
    AddLayerNormParams norm;
    norm.x = y1_.as<float>();
    norm.residual = residual_.as<float>();
    norm.add_residual = false;
    norm.gamma = gamma_.as<float>();
    norm.beta = beta_.as<float>();
    norm.out = normed_.get();
    norm.out_type = ElementType::kF16;
    norm.rows = rows_;
    norm.cols = kWide;
    norm.eps = 1e-5f;
    if (cudaError_t err = AddLayerNormCuda(norm, stream_, order);
        err != cudaSuccess) {
      return err;
    }
    const StreamGemmParams p2{.x = normed_.get(),
                              .x_type = ElementType::kF16,
                              .w = w2_.get(),
                              .y = y2_.get(),
                              .rows = rows_,
                              .n = kNarrow,
                              .k = kWide};
    return tile_ ? TileGemmCuda(p2, stream_, order)
                 : StreamGemmCuda(p2, stream_, order);
  }

  // y2, residual and normed after the stream drains, as bytes.
  void Results(std::vector<uint8_t>* out) {
    out->clear();
    for (const DeviceBuffer* b : {&y2_, &residual_, &normed_}) {
      std::vector<uint8_t> host(b->bytes());
      ASSERT_CUDA_OK(cudaMemcpyAsync(host.data(), b->get(), host.size(),
                                     cudaMemcpyDeviceToHost, stream_));
      ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
      out->insert(out->end(), host.begin(), host.end());
    }
  }

  int64_t rows_ = 0;
  bool tile_ = false;
  DeviceBuffer x0_, w1_, w2_, gamma_, beta_, y1_, residual_, normed_, y2_;
  cudaStream_t stream_ = nullptr;
};

TEST_P(LaunchOrderGpuTest, OverlappedKernelsReadTheKernelBeforesOutput) {
  std::vector<uint8_t> want, got;
  ASSERT_CUDA_OK(Enqueue(LaunchOrder::kAfterPrior));
  ASSERT_NO_FATAL_FAILURE(Results(&want));
  // The norm's outputs are finite: the poison is gone.
  const float y2 = reinterpret_cast<const float*>(want.data())[0];
  ASSERT_TRUE(std::isfinite(y2)) << y2;

  for (int run = 0; run < 10; ++run) {
    ASSERT_CUDA_OK(Enqueue(LaunchOrder::kOverlapPrior));
    ASSERT_NO_FATAL_FAILURE(Results(&got));
    ASSERT_EQ(got, want) << "eager run " << run;
  }

  cudaGraph_t graph = nullptr;
  ASSERT_CUDA_OK(
      cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  const cudaError_t captured = Enqueue(LaunchOrder::kOverlapPrior);
  ASSERT_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  ASSERT_CUDA_OK(captured);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  ASSERT_CUDA_OK(instantiated);
  for (int replay = 0; replay < 10; ++replay) {
    ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream_));
    ASSERT_NO_FATAL_FAILURE(Results(&got));
    EXPECT_EQ(got, want) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
}

// On a device of compute capability 9.x the default build's sm_90a image
// runs, so kOverlapPrior does overlap: were the image's architecture read
// wrong (CurrentImageArch), the test above would pass in stream order and
// --pdl on, and the cluster kernel, would quietly be off.
TEST_P(LaunchOrderGpuTest, OverlapsWhereTheDeviceAndImageTakeIt) {
  int major = 0, arch = 0;
  ASSERT_CUDA_OK(CurrentDeviceMajor(&major));
  ASSERT_CUDA_OK(CurrentImageArch(&arch));
  RecordProperty("image_arch", arch);
  if (major != 9) GTEST_SKIP() << "compute capability " << major << ".x";
  EXPECT_EQ(arch, 90);
  EXPECT_TRUE(CurrentImageTakesSm90());
}

INSTANTIATE_TEST_SUITE_P(Rows, LaunchOrderGpuTest,
                         ::testing::Values(OrderCase{1, false},
                                           OrderCase{4, false},
                                           OrderCase{16, true}),
                         [](const ::testing::TestParamInfo<OrderCase>& info) {
                           return "rows" +
                                  std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_tile" : "");
                         });

}  // namespace
}  // namespace h3::kernels
