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
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace h3::kernels::linear_testing
