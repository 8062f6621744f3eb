// GPU twin vs CPU twin for BiasGelu, and AddBiasCuda with 16-bit bias and
// output (label gpu: skipped without a device).
#include "kernels/cuda/bias_gelu.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/bias_gelu.h"
#include "kernels/cuda/bias_add.h"
#include "tests/support/gpu_test.h"

namespace h3::kernels {
namespace {

#define ASSERT_CUDA_OK(expr) \
  ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

// (rows, cols, with_bias, in_place)
using Shape = std::tuple<int64_t, int64_t, bool, bool>;

std::string ShapeName(const ::testing::TestParamInfo<Shape>& info) {
  const auto [rows, cols, with_bias, in_place] = info.param;
  return std::to_string(rows) + "x" + std::to_string(cols) +
         (with_bias ? "_bias" : "_nobias") + (in_place ? "_inplace" : "");
}

class BiasGeluGpuTest : public h3::testing::GpuTestWithParam<Shape> {};

TEST_P(BiasGeluGpuTest, MatchesCpuTwin) {
  const auto [rows, cols, with_bias, in_place] = GetParam();
  const int64_t n = rows * cols;
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(n), bias(cols), cpu(n), gpu(n);
  for (float& v : x) v = dist(rng);
  for (float& v : bias) v = dist(rng);

  float *d_x = nullptr, *d_bias = nullptr, *d_out = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&d_x, std::max<int64_t>(n, 1) * sizeof(float)));
  ASSERT_CUDA_OK(
      cudaMalloc(&d_bias, std::max<int64_t>(cols, 1) * sizeof(float)));
  ASSERT_CUDA_OK(cudaMalloc(&d_out, std::max<int64_t>(n, 1) * sizeof(float)));
  ASSERT_CUDA_OK(
      cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(cudaMemcpy(d_bias, bias.data(), cols * sizeof(float),
                            cudaMemcpyHostToDevice));

  const float* b = with_bias ? bias.data() : nullptr;
  BiasGeluCpu({x.data(), b, cpu.data(), rows, cols});
  float* d_dst = in_place ? d_x : d_out;
  ASSERT_CUDA_OK(BiasGeluCuda(
      {d_x, with_bias ? d_bias : nullptr, d_dst, rows, cols}, nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  ASSERT_CUDA_OK(
      cudaMemcpy(gpu.data(), d_dst, n * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(d_x);
  cudaFree(d_bias);
  cudaFree(d_out);

  // Hold the GPU to at most twice the CPU twin's error against a double
  // reference (plus one float ulp at the value's scale for tanh's rounding).
  double cpu_err = 0, gpu_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double in = double{x[i]} + (with_bias ? bias[i % cols] : 0.0);
    const double want =
        0.5 * in *
        (1 + std::tanh(0.7978845608028654 * (in + 0.044715 * in * in * in)));
    const double scale = 1 + std::abs(want);
    cpu_err = std::max(cpu_err, std::abs(cpu[i] - want) / scale);
    gpu_err = std::max(gpu_err, std::abs(gpu[i] - want) / scale);
  }
  EXPECT_LE(gpu_err, 2 * cpu_err + 1.2e-7) << "cpu_err=" << cpu_err;
}

INSTANTIATE_TEST_SUITE_P(Shapes, BiasGeluGpuTest,
                         ::testing::Values(Shape{0, 8, true, false},
                                           Shape{1, 1, true, false},
                                           Shape{97, 1025, true, false},
                                           Shape{64, 3072, true, true},
                                           Shape{5, 768, false, false},
                                           Shape{1025, 97, false, true}),
                         ShapeName);

class BiasKernelsHalfGpuTest : public h3::testing::GpuTest {};

// The unfused route of LinearCuda with a 16-bit y: fp32 x (the product's D)
// plus a bias of y's type, widened, then rounded once into y. AddBiasCuda is
// exact arithmetic then one rounding: bitwise the host's. BiasGeluCuda's
// tanhf may differ from the host's by a few fp32 ulps (~6e-8 near -1, where
// 1 + tanh cancels and the GELU, 0.5 v (1 + tanh), is small), an absolute
// error of at most |v| 1.2e-7 in fp32; its 16-bit result may then differ from
// the CPU twin's by one 16-bit ulp plus that (the bound below, with room).
TEST_F(BiasKernelsHalfGpuTest, SixteenBitBiasAndOutRoundOnce) {
  const int64_t rows = 33, cols = 515, n = rows * cols;
  std::mt19937 rng(99);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(n), bias(cols);
  for (float& v : x) v = dist(rng);
  for (float& v : bias) v = dist(rng);
  float* d_x = nullptr;
  void *d_bias = nullptr, *d_y = nullptr;
  ASSERT_CUDA_OK(cudaMalloc(&d_x, n * sizeof(float)));
  ASSERT_CUDA_OK(cudaMalloc(&d_bias, cols * sizeof(uint16_t)));
  ASSERT_CUDA_OK(cudaMalloc(&d_y, n * sizeof(uint16_t)));
  ASSERT_CUDA_OK(
      cudaMemcpy(d_x, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  for (ElementType t : {ElementType::kF16, ElementType::kBF16}) {
    std::vector<uint16_t> bias16(cols), want(n), got(n);
    for (int64_t c = 0; c < cols; ++c) StoreFloat(bias16.data(), t, c, bias[c]);
    ASSERT_CUDA_OK(cudaMemcpy(d_bias, bias16.data(), cols * sizeof(uint16_t),
                              cudaMemcpyHostToDevice));
    for (int64_t i = 0; i < n; ++i) {
      StoreFloat(want.data(), t, i,
                 x[i] + LoadFloat(bias16.data(), t, i % cols));
    }
    ASSERT_CUDA_OK(AddBiasCuda(d_x, d_bias, t, rows, cols, d_y, t, nullptr));
    ASSERT_CUDA_OK(cudaMemcpy(got.data(), d_y, n * sizeof(uint16_t),
                              cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, want) << "AddBiasCuda " << ElementTypeName(t);

    BiasGeluCpu({x.data(), bias16.data(), want.data(), rows, cols, t, t});
    ASSERT_CUDA_OK(BiasGeluCuda({d_x, d_bias, d_y, rows, cols, t, t}, nullptr));
    ASSERT_CUDA_OK(cudaMemcpy(got.data(), d_y, n * sizeof(uint16_t),
                              cudaMemcpyDeviceToHost));
    const int bits = t == ElementType::kF16 ? 10 : 7;
    for (int64_t i = 0; i < n; ++i) {
      const float g = LoadFloat(got.data(), t, i),
                  w = LoadFloat(want.data(), t, i);
      const float big = std::max(std::fabs(g), std::fabs(w));
      const double ulp = big == 0 ? 0 : std::ldexp(1.0, std::ilogb(big) - bits);
      const double v = x[i] + LoadFloat(bias16.data(), t, i % cols);
      ASSERT_LE(std::fabs(g - w), ulp + 2.5e-7 * (1 + std::fabs(v)))
          << "BiasGeluCuda " << ElementTypeName(t) << " element " << i
          << ": got " << g << " want " << w;
    }
    // A bias of another 16-bit type than y's is refused.
    const ElementType other =
        t == ElementType::kF16 ? ElementType::kBF16 : ElementType::kF16;
    EXPECT_EQ(AddBiasCuda(d_x, d_bias, other, rows, cols, d_y, t, nullptr),
              cudaErrorInvalidValue);
    EXPECT_EQ(BiasGeluCuda({d_x, d_bias, d_y, rows, cols, other, t}, nullptr),
              cudaErrorInvalidValue);
  }
  cudaFree(d_x);
  cudaFree(d_bias);
  cudaFree(d_y);
}

}  // namespace
}  // namespace h3::kernels
