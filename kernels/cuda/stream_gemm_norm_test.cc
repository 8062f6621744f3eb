// AddNormStreamGemmCuda (label gpu: the device cases skip without one; the
// refusals run anywhere, they launch nothing): the norm inside the product
// gives the bits of AddLayerNormCuda followed by StreamGemmCuda, output and
// residual sum alike, and leaves the norm's output unwritten.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/stream_gemm.h"
#include "tests/support/gpu_test.h"

namespace h3::kernels {
namespace {

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess)

std::vector<float> Normal(size_t n, float mean, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(mean, scale);
  std::vector<float> v(n);
  for (float& e : v) e = normal(rng);
  return v;
}

std::vector<uint16_t> Halves(const std::vector<float>& v, ElementType type) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    h[i] =
        type == ElementType::kF16 ? FloatToHalf(v[i]) : FloatToBFloat16(v[i]);
  }
  return h;
}

template <typename T>
std::vector<T> Download(const DeviceBuffer& b, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(
      cudaMemcpy(host.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost),
      cudaSuccess);
  return host;
}

// (weight type, rows, cols (the norm's kPer 4, 8, 16), add the residual)
using Case = std::tuple<ElementType, int64_t, int64_t, bool>;

class AddNormStreamGemmGpuTest : public h3::testing::GpuTestWithParam<Case> {};

TEST_P(AddNormStreamGemmGpuTest, EqualsTheNormThenTheProduct) {
  const auto [type, rows, cols, add] = GetParam();
  constexpr int64_t kN = 200;  // 13 blocks: slices of the residual each
  // A residual stream with a large mean, as after many layers.
  DeviceBuffer x, res_in, res_a, res_b, gamma, beta, w, bias, normed, y_a, y_b;
  ASSERT_CUDA_OK(CopyToDevice(Normal(rows * cols, 3.0f, 1.0f, 1), &x));
  ASSERT_CUDA_OK(CopyToDevice(Normal(rows * cols, -2.0f, 2.0f, 2), &res_in));
  ASSERT_CUDA_OK(CopyToDevice(Normal(cols, 1.0f, 0.2f, 3), &gamma));
  ASSERT_CUDA_OK(CopyToDevice(Normal(cols, 0.0f, 0.2f, 4), &beta));
  ASSERT_CUDA_OK(
      CopyToDevice(Halves(Normal(kN * cols, 0.0f, 1.0f / 45, 5), type), &w));
  ASSERT_CUDA_OK(CopyToDevice(Normal(kN, 0.0f, 1.0f, 6), &bias));
  ASSERT_CUDA_OK(res_a.Reserve(rows * cols * sizeof(float)));
  ASSERT_CUDA_OK(res_b.Reserve(rows * cols * sizeof(float)));
  ASSERT_CUDA_OK(normed.Reserve(rows * cols * sizeof(uint16_t)));
  ASSERT_CUDA_OK(y_a.Reserve(rows * kN * sizeof(float)));
  ASSERT_CUDA_OK(y_b.Reserve(rows * kN * sizeof(float)));
  for (DeviceBuffer* b : {&res_a, &res_b, &normed, &y_a, &y_b}) {
    ASSERT_CUDA_OK(cudaMemset(b->get(), 0xff, b->bytes()));
  }

  AddLayerNormParams norm;
  norm.x = x.as<float>();
  norm.residual_in = res_in.as<float>();
  norm.residual = res_a.as<float>();
  norm.add_residual = add;
  norm.gamma = gamma.as<float>();
  norm.beta = beta.as<float>();
  norm.out = normed.get();
  norm.out_type = type;
  norm.rows = rows;
  norm.cols = cols;
  StreamGemmParams product{.x = normed.get(),
                           .x_type = type,
                           .w = w.get(),
                           .w_type = type,
                           .bias = bias.get(),
                           .y = y_a.get(),
                           .rows = rows,
                           .n = kN,
                           .k = cols,
                           .gelu = true};
  ASSERT_STREQ(AddNormStreamGemmCheck(norm, product), "");
  ASSERT_CUDA_OK(AddLayerNormCuda(norm, nullptr));
  ASSERT_CUDA_OK(StreamGemmCuda(product, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const auto want_y = Download<uint32_t>(y_a, rows * kN);
  const auto want_res = Download<uint32_t>(res_a, rows * cols);

  ASSERT_CUDA_OK(cudaMemset(normed.get(), 0xff, normed.bytes()));
  norm.residual = res_b.as<float>();
  product.y = y_b.get();
  ASSERT_CUDA_OK(AddNormStreamGemmCuda(norm, product, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(Download<uint32_t>(y_b, rows * kN), want_y);
  EXPECT_EQ(Download<uint32_t>(res_b, rows * cols), want_res);
  for (uint16_t e : Download<uint16_t>(normed, rows * cols)) {
    ASSERT_EQ(e, 0xffff) << "the fused kernel wrote the norm's output";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AddNormStreamGemmGpuTest,
    ::testing::Combine(::testing::Values(ElementType::kF16, ElementType::kBF16),
                       ::testing::Values(1, 3, 4),
                       ::testing::Values(768, 2048, 2560), ::testing::Bool()),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return std::string(ElementTypeName(std::get<0>(c))) + "_rows" +
             std::to_string(std::get<1>(c)) + "_cols" +
             std::to_string(std::get<2>(c)) +
             (std::get<3>(c) ? "_add" : "_first");
    });

// Each rule of AddNormStreamGemmCheck, and the refusal without a launch.
TEST(AddNormStreamGemmRefusalTest, NamesWhatItDoesNotTake) {
  alignas(16) static float x[16], res_in[16], res[16], gamma[8], beta[8];
  alignas(16) static uint16_t normed[16], w[64];
  alignas(16) static float y[16];
  AddLayerNormParams norm;
  norm.x = x;
  norm.residual_in = res_in;
  norm.residual = res;
  norm.gamma = gamma;
  norm.beta = beta;
  norm.out = normed;
  norm.out_type = ElementType::kF16;
  norm.rows = 2;
  norm.cols = 8;
  const StreamGemmParams product{.x = normed,
                                 .x_type = ElementType::kF16,
                                 .w = w,
                                 .y = y,
                                 .rows = 2,
                                 .n = 8,
                                 .k = 8};
  EXPECT_STREQ(AddNormStreamGemmCheck(norm, product), "");
  auto refused = [&](AddLayerNormParams n, StreamGemmParams p) {
    return std::string(AddNormStreamGemmCheck(n, p));
  };
  AddLayerNormParams n = norm;
  StreamGemmParams p = product;
  n.rows = p.rows = 5;
  EXPECT_NE(refused(n, p).find("rows"), std::string::npos);
  n = norm;
  n.cols = 16;
  EXPECT_NE(refused(n, product).find("k"), std::string::npos);
  n = norm;
  p = product;
  n.cols = p.k = kNormStreamMaxCols + 8;
  EXPECT_NE(refused(n, p).find("kNormStreamMaxCols"), std::string::npos);
  p = product;
  p.x = x;
  EXPECT_NE(refused(norm, p).find("x must be"), std::string::npos);
  n = norm;
  n.out_type = ElementType::kBF16;
  EXPECT_NE(refused(n, product).find("x must be"), std::string::npos);
  n = norm;
  n.residual_in = nullptr;
  EXPECT_NE(refused(n, product).find("residual_in"), std::string::npos);
  n.add_residual = false;  // the first norm reads no residual
  EXPECT_STREQ(AddNormStreamGemmCheck(n, product), "");
  n = norm;
  n.residual_in = res + 4;
  EXPECT_NE(refused(n, product).find("overlap"), std::string::npos);
  n = norm;
  n.residual = x;
  EXPECT_NE(refused(n, product).find("overlap"), std::string::npos);
  n = norm;
  n.residual = y;
  EXPECT_NE(refused(n, product).find("overlap"), std::string::npos);
  p = product;
  p.y = x + 8;
  EXPECT_NE(refused(norm, p).find("y must overlap neither"), std::string::npos);
  p.y = res_in;
  EXPECT_NE(refused(norm, p).find("y must overlap neither"), std::string::npos);
  n = norm;
  n.add_residual = false;  // residual_in unread: y may be there
  EXPECT_STREQ(AddNormStreamGemmCheck(n, p), "");
  p = product;
  p.n = 0;
  EXPECT_NE(refused(norm, p).find("n must be at least 1"), std::string::npos);

  n = norm;
  p = product;
  n.rows = p.rows = 5;
  EXPECT_EQ(AddNormStreamGemmCuda(n, p, nullptr), cudaErrorNotSupported);
}

}  // namespace
}  // namespace h3::kernels
