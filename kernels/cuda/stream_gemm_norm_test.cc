// AddNormStreamGemmCuda (label gpu: the device cases skip without one; the
// refusals run anywhere, they launch nothing): the norm inside the product
// gives the bits of AddLayerNormCuda followed by StreamGemmCuda, output and
// residual sum alike, and leaves the norm's output unwritten.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/stream_gemm.h"
#include "tests/support/gpu_test.h"
#include "tests/support/norm_product_case.h"

namespace h3::kernels {
namespace {

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess)

template <typename T>
std::vector<T> Download(const DeviceBuffer& b, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(
      cudaMemcpy(host.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost),
      cudaSuccess);
  return host;
}

using h3::testing::NormProductCase;

class AddNormStreamGemmGpuTest
    : public h3::testing::GpuTestWithParam<NormProductCase> {};

TEST_P(AddNormStreamGemmGpuTest, EqualsTheNormThenTheProduct) {
  const auto [type, rows, cols, add] = GetParam();
  constexpr int64_t kN = h3::testing::kNormProductN;
  const h3::testing::NormProductOperands o(GetParam());
  DeviceBuffer x, res_in, res_a, res_b, gamma, beta, w, bias, normed, y_a, y_b;
  ASSERT_CUDA_OK(CopyToDevice(o.x, &x));
  ASSERT_CUDA_OK(CopyToDevice(o.residual_in, &res_in));
  ASSERT_CUDA_OK(CopyToDevice(o.gamma, &gamma));
  ASSERT_CUDA_OK(CopyToDevice(o.beta, &beta));
  ASSERT_CUDA_OK(CopyToDevice(o.w, &w));
  ASSERT_CUDA_OK(CopyToDevice(o.bias, &bias));
  ASSERT_CUDA_OK(res_a.Reserve(rows * cols * sizeof(float)));
  ASSERT_CUDA_OK(res_b.Reserve(rows * cols * sizeof(float)));
  ASSERT_CUDA_OK(normed.Reserve(rows * cols * sizeof(uint16_t)));
  ASSERT_CUDA_OK(y_a.Reserve(rows * kN * sizeof(float)));
  ASSERT_CUDA_OK(y_b.Reserve(rows * kN * sizeof(float)));
  for (DeviceBuffer* b : {&res_a, &res_b, &normed, &y_a, &y_b}) {
    ASSERT_CUDA_OK(cudaMemset(b->get(), 0xff, b->bytes()));
  }
  h3::testing::NormProductCall call = h3::testing::MakeNormProductCall(
      GetParam(), x.as<float>(), res_in.as<float>(), res_a.as<float>(),
      gamma.as<float>(), beta.as<float>(), normed.get(), w.get(),
      bias.as<float>(), y_a.get());
  ASSERT_STREQ(AddNormStreamGemmCheck(call.norm, call.product), "");
  ASSERT_CUDA_OK(AddLayerNormCuda(call.norm, nullptr));
  ASSERT_CUDA_OK(StreamGemmCuda(call.product, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const auto want_y = Download<uint32_t>(y_a, rows * kN);
  const auto want_res = Download<uint32_t>(res_a, rows * cols);

  ASSERT_CUDA_OK(cudaMemset(normed.get(), 0xff, normed.bytes()));
  call.norm.residual = res_b.as<float>();
  call.product.y = y_b.get();
  ASSERT_CUDA_OK(AddNormStreamGemmCuda(call.norm, call.product, nullptr));
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
    [](const ::testing::TestParamInfo<NormProductCase>& info) {
      return h3::testing::NormProductCaseName(info.param);
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
