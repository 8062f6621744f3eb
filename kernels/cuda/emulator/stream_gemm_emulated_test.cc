// The decode products on tensor cores run on the CPU by the emulator
// (stream_gemm_emulated.cc and friends; mma.sync with the PTX fragment
// layout, emulator/mma.h): StreamGemmCuda against the plain reference on
// every tail case of its GPU test (it ran on an H200, so this also checks
// the emulator's MMA layout), and AddNormStreamGemmCuda, never run on a
// GPU, bit for bit against AddLayerNormCuda followed by StreamGemmCuda, as
// its GPU test asks.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/emulator/fibers.h"
#include "kernels/cuda/stream_gemm.h"
#include "tests/support/normalised_error.h"
#include "tests/support/stream_gemm_case.h"

namespace h3::kernels {
namespace {

using h3::testing::StreamCase;

class StreamGemmEmulatedTest : public ::testing::TestWithParam<StreamCase> {};

TEST_P(StreamGemmEmulatedTest, MatchesThePlainProduct) {
  const StreamCase c = GetParam();
  const h3::testing::StreamOperands o = h3::testing::MakeStreamOperands(c, 7);
  std::vector<uint8_t> y(c.rows * c.n * ElementSize(h3::testing::YType(c)));
  ASSERT_EQ(StreamGemmCuda(h3::testing::StreamParams(c, o.x.data(), o.w.data(),
                                                     o.bias.data(), y.data()),
                           nullptr),
            cudaSuccess)
      << emulator::LastRunError();
  EXPECT_LE(h3::testing::NormalisedError(h3::testing::DecodeY(c, y),
                                         h3::testing::StreamReference(c, o)),
            h3::testing::StreamTolerance(c));
}

INSTANTIATE_TEST_SUITE_P(Cases, StreamGemmEmulatedTest,
                         ::testing::ValuesIn(h3::testing::StreamCases()),
                         [](const ::testing::TestParamInfo<StreamCase>& i) {
                           return h3::testing::StreamCaseName(i.param);
                         });

TEST(StreamGemmEmulatedIndexTest, CountsEveryElementOnce) {
  EXPECT_EQ(h3::testing::FirstElementNotCountedOnce(
                [](const StreamGemmParams& p) {
                  ASSERT_EQ(StreamGemmCuda(p, nullptr), cudaSuccess)
                      << emulator::LastRunError();
                }),
            -1);
}

std::vector<float> Normal(size_t n, float mean, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(mean, scale);
  std::vector<float> v(n);
  for (float& e : v) e = normal(rng);
  return v;
}

// (weight type, rows, cols (the norm's kPer 4, 8, 16), add the residual)
using NormCase = std::tuple<ElementType, int64_t, int64_t, bool>;

class AddNormStreamGemmEmulatedTest
    : public ::testing::TestWithParam<NormCase> {};

TEST_P(AddNormStreamGemmEmulatedTest, EqualsTheNormThenTheProduct) {
  const auto [type, rows, cols, add] = GetParam();
  constexpr int64_t kN = 200;  // 13 blocks: slices of the residual each
  // A residual stream with a large mean, as after many layers.
  const std::vector<float> x = Normal(rows * cols, 3.0f, 1.0f, 1);
  const std::vector<float> res_in = Normal(rows * cols, -2.0f, 2.0f, 2);
  const std::vector<float> gamma = Normal(cols, 1.0f, 0.2f, 3);
  const std::vector<float> beta = Normal(cols, 0.0f, 0.2f, 4);
  const std::vector<uint8_t> w =
      h3::testing::Encode(Normal(kN * cols, 0.0f, 1.0f / 45, 5), type, 1.0f);
  const std::vector<float> bias = Normal(kN, 0.0f, 1.0f, 6);
  // 16-byte aligned buffers, 0xff (NaN) where nothing should be read.
  std::vector<uint4> res_a(rows * cols / 4 + 1), res_b(res_a.size());
  std::vector<uint4> normed(rows * cols / 8 + 1), y_a(rows * kN / 4 + 1),
      y_b(y_a.size());
  for (auto* b : {&res_a, &res_b, &normed, &y_a, &y_b}) {
    std::memset(b->data(), 0xff, b->size() * sizeof(uint4));
  }
  AddLayerNormParams norm;
  norm.x = x.data();
  norm.residual_in = res_in.data();
  norm.residual = reinterpret_cast<float*>(res_a.data());
  norm.add_residual = add;
  norm.gamma = gamma.data();
  norm.beta = beta.data();
  norm.out = normed.data();
  norm.out_type = type;
  norm.rows = rows;
  norm.cols = cols;
  StreamGemmParams product{.x = normed.data(),
                           .x_type = type,
                           .w = w.data(),
                           .w_type = type,
                           .bias = bias.data(),
                           .y = y_a.data(),
                           .rows = rows,
                           .n = kN,
                           .k = cols,
                           .gelu = true};
  ASSERT_STREQ(AddNormStreamGemmCheck(norm, product), "");
  ASSERT_EQ(AddLayerNormCuda(norm, nullptr), cudaSuccess)
      << emulator::LastRunError();
  ASSERT_EQ(StreamGemmCuda(product, nullptr), cudaSuccess)
      << emulator::LastRunError();

  std::memset(normed.data(), 0xff, normed.size() * sizeof(uint4));
  norm.residual = reinterpret_cast<float*>(res_b.data());
  product.y = y_b.data();
  ASSERT_EQ(AddNormStreamGemmCuda(norm, product, nullptr), cudaSuccess)
      << emulator::LastRunError();
  EXPECT_EQ(std::memcmp(y_b.data(), y_a.data(), rows * kN * sizeof(float)), 0)
      << "outputs";
  EXPECT_EQ(std::memcmp(res_b.data(), res_a.data(),
                        rows * cols * sizeof(float)),
            0)
      << "residual sums";
  const uint16_t* out = reinterpret_cast<const uint16_t*>(normed.data());
  for (int64_t i = 0; i < rows * cols; ++i) {
    ASSERT_EQ(out[i], 0xffff) << "the fused kernel wrote the norm's output";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AddNormStreamGemmEmulatedTest,
    ::testing::Combine(::testing::Values(ElementType::kF16, ElementType::kBF16),
                       ::testing::Values(1, 3, 4),
                       ::testing::Values(768, 2048, 2560), ::testing::Bool()),
    [](const ::testing::TestParamInfo<NormCase>& info) {
      const NormCase& c = info.param;
      return std::string(ElementTypeName(std::get<0>(c))) + "_rows" +
             std::to_string(std::get<1>(c)) + "_cols" +
             std::to_string(std::get<2>(c)) +
             (std::get<3>(c) ? "_add" : "_first");
    });

}  // namespace
}  // namespace h3::kernels
