// LinearCuda with 16-bit activations (x_type, y_type = w_type) against the
// fp32-activation path (label gpu: skipped without a device), and the
// refusals of other activation types.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/linear_test_support.h"
#include "tests/support/gpu_test.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"

namespace h3::kernels::linear_testing {
namespace {

using h3::testing::NormalisedError;
using h3::testing::RandomNormal;

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess)

// (n, k): multiples of 8, odd ones, a long k.
constexpr int64_t kHalfShapes[][2] = {{64, 128}, {97, 65}, {250, 1031}};

// (weights type, rows, n, k, bias, gelu, fused) over the 16-bit types.
std::vector<Case> HalfCases() {
  std::vector<Case> cases;
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    for (int64_t rows : {1, 17, 512}) {
      for (const auto& shape : kHalfShapes) {
        const int64_t n = shape[0], k = shape[1];
        for (int epilogue = 0; epilogue < 8; ++epilogue) {
          if ((epilogue & 4) != 0 && (epilogue & 3) == 0) continue;  // = 0
          cases.push_back({type, rows, n, k, (epilogue & 1) != 0,
                           (epilogue & 2) != 0, (epilogue & 4) != 0});
        }
      }
    }
  }
  return cases;
}

class LinearHalfGpuTest : public h3::testing::GpuTestWithParam<Case> {};

// A 16-bit x is the product's operand as it is: the same operand the fp32-x
// path rounds into scratch, so the same result within the path's bound.
TEST_P(LinearHalfGpuTest, HalfXMatchesFloatXPath) {
  const Case& c = GetParam();
  const Problem p = MakeProblem(c, 31);
  const std::vector<float> from_fp32 = RunCase(c, p, OptionsFor(c));
  const std::vector<float> from_half = RunCase(c, p, OptionsFor(c), 0, c.type);
  EXPECT_LE(NormalisedError(from_half, from_fp32), Tolerance(c));
  EXPECT_LE(NormalisedError(from_half, p.want), Tolerance(c));
}

// A 16-bit y is the fp32 y rounded once: within one ulp of the type of
// round(fp32 y), plus what a different cuBLASLt algorithm may change in fp32
// (the path's bound).
TEST_P(LinearHalfGpuTest, HalfYIsTheRoundedFloatY) {
  const Case& c = GetParam();
  const Problem p = MakeProblem(c, 37);
  const std::vector<float> y32 = RunCase(c, p, OptionsFor(c));
  const std::vector<float> y16 =
      RunCase(c, p, OptionsFor(c), 0, c.type, c.type);
  double largest = 0;
  for (float v : p.want) largest = std::max(largest, double{std::fabs(v)});
  const int bits = c.type == ElementType::kF16 ? 10 : 7;
  for (size_t i = 0; i < y32.size(); ++i) {
    const float rounded = Round(c.type, y32[i]);
    const float big = std::max(std::fabs(rounded), std::fabs(y16[i]));
    const double ulp = big == 0 ? 0 : std::ldexp(1.0, std::ilogb(big) - bits);
    ASSERT_LE(std::fabs(y16[i] - rounded), ulp + Tolerance(c) * largest)
        << "element " << i << ": got " << y16[i] << ", fp32 " << y32[i];
  }
}

// A bias of y's 16-bit type is widened exactly: y16 against the fp32-y
// product with the same (widened) bias values, rounded. Unfused, both run the
// same cuBLASLt product into fp32 D and the same bias (+ GELU) kernel, and
// the bias is added before the one rounding, so they agree bitwise. Fused,
// the 16-bit D may take another algorithm (the path's bound), and cuBLASLt's
// epilogue behaves as if it rounded the product to y's type before adding the
// bias: on an H200 with CUDA 13.0, y was off by up to 3 ulps of y where the
// bias cancels most of the product, within half an ulp of the product. So
// the fused bound adds an ulp of the product, through GELU's slope (at most
// 1.13), to y's ulp.
TEST_P(LinearHalfGpuTest, HalfBiasIsWidenedBeforeTheOneRounding) {
  const Case& c = GetParam();
  if (!c.bias) GTEST_SKIP() << "no bias";
  Problem p = MakeProblem(c, 41);
  for (float& b : p.bias) b = Round(c.type, b);
  const std::vector<float> y32 = RunCase(c, p, OptionsFor(c), 0, c.type);
  const std::vector<float> y16 =
      RunCase(c, p, OptionsFor(c), 0, c.type, c.type, c.type);
  Case bare = c;
  bare.bias = bare.gelu = false;
  const std::vector<float> product =
      c.fused ? RunCase(bare, p, OptionsFor(bare), 0, c.type) : y32;
  double largest = 0;
  for (float v : p.want) largest = std::max(largest, double{std::fabs(v)});
  const int bits = c.type == ElementType::kF16 ? 10 : 7;
  const auto ulp = [bits](float v) {
    return v == 0 ? 0.0 : std::ldexp(1.0, std::ilogb(std::fabs(v)) - bits);
  };
  for (size_t i = 0; i < y32.size(); ++i) {
    const float rounded = Round(c.type, y32[i]);
    if (!c.fused) {
      ASSERT_EQ(y16[i], rounded) << "element " << i << ": fp32 " << y32[i];
      continue;
    }
    const float big = std::max(std::fabs(rounded), std::fabs(y16[i]));
    const double bound = ulp(big) + (c.gelu ? 1.13 : 1.0) * ulp(product[i]) +
                         Tolerance(c) * largest;
    ASSERT_LE(std::fabs(y16[i] - rounded), bound)
        << "element " << i << ": got " << y16[i] << ", fp32 " << y32[i]
        << ", product " << product[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearHalfGpuTest,
                         ::testing::ValuesIn(HalfCases()), CaseName);

class LinearCudaHalfTest : public h3::testing::GpuTest {};

// Each refusal names its field.
TEST_F(LinearCudaHalfTest, RefusesActivationTypesOtherThanFp32OrW) {
  std::unique_ptr<LinearCuda> linear;
  ASSERT_EQ(LinearCuda::Create(
                {.max_rows_times_k = 100, .max_rows_times_n = 40}, &linear),
            "");
  DeviceBuffer x, w, y, bias;
  ASSERT_CUDA_OK(x.Reserve(10 * 10 * sizeof(float)));
  ASSERT_CUDA_OK(w.Reserve(8 * 10 * sizeof(float)));
  ASSERT_CUDA_OK(y.Reserve(10 * 8 * sizeof(float)));
  ASSERT_CUDA_OK(bias.Reserve(8 * sizeof(float)));
  for (DeviceBuffer* b : {&x, &w, &y, &bias}) {
    ASSERT_CUDA_OK(cudaMemset(b->get(), 0, b->bytes()));
  }
  LinearCudaParams params{.x = x.get(),
                          .x_type = ElementType::kBF16,
                          .w = w.get(),
                          .w_type = ElementType::kF16,
                          .y = y.get(),
                          .rows = 5,
                          .n = 8,
                          .k = 10};
  std::string error = linear->Run(params, nullptr);
  EXPECT_NE(error.find("x_type bf16"), std::string::npos) << error;
  params.x_type = ElementType::kF16;
  params.y_type = ElementType::kF64;
  error = linear->Run(params, nullptr);
  EXPECT_NE(error.find("y_type fp64"), std::string::npos) << error;
  params.y_type = ElementType::kF16;
  EXPECT_EQ(linear->Run(params, nullptr), "");
  params.w_type = ElementType::kF32;  // 16-bit activations need 16-bit W
  error = linear->Run(params, nullptr);
  EXPECT_NE(error.find("x_type fp16"), std::string::npos) << error;
  // A 16-bit y with a bias goes through the fp32 scratch: rows * n <= 40.
  params.w_type = ElementType::kF16;
  params.bias = bias.as<float>();
  EXPECT_EQ(linear->Run(params, nullptr), "");
  params.rows = 6;
  error = linear->Run(params, nullptr);
  EXPECT_NE(error.find("max_rows_times_n"), std::string::npos) << error;
  // A bias: fp32, or y's type when that is 16-bit.
  params.rows = 5;
  params.bias_type = ElementType::kBF16;
  error = linear->Run(params, nullptr);
  EXPECT_NE(error.find("bias_type bf16"), std::string::npos) << error;
  params.bias_type = ElementType::kF16;
  params.y_type = ElementType::kF32;
  error = linear->Run(params, nullptr);
  EXPECT_NE(error.find("bias_type fp16"), std::string::npos) << error;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// With a bias of y's 16-bit type the fused epilogue writes y itself: no
// fp32 D scratch (the engine's q|k|v and fc1 with half activations). An
// fp32 bias, or unfused epilogues, still take rows * n of it.
TEST_F(LinearCudaHalfTest, SixteenBitBiasNeedsNoScratchD) {
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    for (bool gelu : {false, true}) {
      const Case c{type, 512, 64, 128, true, gelu, true};
      Problem p = MakeProblem(c, 43);
      for (float& b : p.bias) b = Round(type, b);
      std::unique_ptr<LinearCuda> linear;
      ASSERT_EQ(LinearCuda::Create({.max_rows_times_n = 0}, &linear), "");
      DeviceBuffer x, w, bias, y;
      Upload(Encode(type, p.x), &x);
      Upload(Encode(type, p.w), &w);
      Upload(Encode(type, p.bias), &bias);
      Upload(Encode(type, std::vector<float>(c.rows * c.n, NAN)), &y);
      LinearCudaParams params{.x = x.get(),
                              .x_type = type,
                              .w = w.get(),
                              .w_type = type,
                              .bias = bias.get(),
                              .bias_type = type,
                              .y = y.get(),
                              .y_type = type,
                              .rows = c.rows,
                              .n = c.n,
                              .k = c.k,
                              .gelu = gelu};
      int64_t elements = -1;
      ASSERT_EQ(linear->ScratchDElements(params, &elements), "");
      EXPECT_EQ(elements, 0) << TypeName(type) << (gelu ? " gelu" : "");
      EXPECT_EQ(linear->Run(params, nullptr), "");
      std::vector<uint8_t> bytes(c.rows * c.n * ElementSize(type));
      ASSERT_CUDA_OK(cudaMemcpy(bytes.data(), y.get(), bytes.size(),
                                cudaMemcpyDeviceToHost));
      std::vector<float> got(c.rows * c.n);
      for (size_t i = 0; i < got.size(); ++i) {
        got[i] = LoadFloat(bytes.data(), type, i);
      }
      // Within the 16-bit rounding of y and the path's bound.
      const double u = type == ElementType::kF16 ? 0x1p-11 : 0x1p-8;
      EXPECT_LE(NormalisedError(got, p.want), u + Tolerance(c));
      params.bias_type = ElementType::kF32;  // fp32 D, then rounded
      ASSERT_EQ(linear->ScratchDElements(params, &elements), "");
      EXPECT_EQ(elements, c.rows * c.n);
    }
  }
  std::unique_ptr<LinearCuda> unfused;
  ASSERT_EQ(LinearCuda::Create({.fused_epilogues = false}, &unfused), "");
  int64_t elements = -1;
  // ScratchDElements reads none of the tensors: host memory will do.
  std::vector<uint16_t> host(256);
  ASSERT_EQ(unfused->ScratchDElements({.x = host.data(),
                                       .x_type = ElementType::kF16,
                                       .w = host.data(),
                                       .w_type = ElementType::kF16,
                                       .bias = host.data(),
                                       .bias_type = ElementType::kF16,
                                       .y = host.data() + 128,
                                       .y_type = ElementType::kF16,
                                       .rows = 4,
                                       .n = 8,
                                       .k = 8},
                                      &elements),
            "");
  EXPECT_EQ(elements, 32);
}

}  // namespace
}  // namespace h3::kernels::linear_testing
