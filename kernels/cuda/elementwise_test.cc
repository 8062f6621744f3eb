// The small GPU kernels vs their CPU twins and the loader's rounding (label
// gpu: skipped without a device).
#include "kernels/cuda/elementwise.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/layer_norm.h"
#include "loader/dtype.h"
#include "tests/support/gpu_test.h"
#include "tests/support/half_io.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"

namespace h3::kernels {
namespace {

using h3::testing::NormalisedError;
using h3::testing::RandomNormal;

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess)

std::string TypeName(const ::testing::TestParamInfo<ElementType>& info) {
  return ElementTypeName(info.param);
}

template <typename T>
void Upload(const std::vector<T>& host, DeviceBuffer* buffer) {
  ASSERT_CUDA_OK(buffer->Reserve(host.size() * sizeof(T) + 1));
  ASSERT_CUDA_OK(cudaMemcpy(buffer->get(), host.data(), host.size() * sizeof(T),
                            cudaMemcpyHostToDevice));
}

template <typename T>
std::vector<T> Download(const DeviceBuffer& buffer, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), buffer.get(), n * sizeof(T),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  return host;
}

// ---- AddLayerNorm ---------------------------------------------------------

// (rows, cols, add_residual, out aliases x)
using NormCase = std::tuple<int64_t, int64_t, bool, bool>;

std::string NormName(const ::testing::TestParamInfo<NormCase>& info) {
  const auto [rows, cols, add, alias] = info.param;
  return std::to_string(rows) + "x" + std::to_string(cols) +
         (add ? "_add" : "_first") + (alias ? "_inplace" : "");
}

class AddLayerNormGpuTest : public h3::testing::GpuTestWithParam<NormCase> {};

TEST_P(AddLayerNormGpuTest, MatchesCpuTwin) {
  const auto [rows, cols, add_residual, alias] = GetParam();
  std::vector<float> x = RandomNormal(rows * cols, 1);
  // An offset makes |mean| > std, so the variance must not cancel.
  for (float& v : x) v += 2.0f;
  std::vector<float> residual = RandomNormal(rows * cols, 2);
  const std::vector<float> gamma = RandomNormal(cols, 3);
  const std::vector<float> beta = RandomNormal(cols, 4);

  DeviceBuffer d_x, d_res, d_gamma, d_beta, d_out;
  Upload(x, &d_x);
  Upload(residual, &d_res);
  Upload(gamma, &d_gamma);
  Upload(beta, &d_beta);
  Upload(std::vector<float>(rows * cols, NAN), &d_out);

  std::vector<float> cpu_res = residual, cpu_out(rows * cols);
  AddLayerNormCpu({x.data(), cpu_res.data(), add_residual, gamma.data(),
                   beta.data(), cpu_out.data(), ElementType::kF32, rows, cols,
                   1e-5f});
  DeviceBuffer& out = alias ? d_x : d_out;
  ASSERT_CUDA_OK(
      AddLayerNormCuda({d_x.as<float>(), d_res.as<float>(), add_residual,
                        d_gamma.as<float>(), d_beta.as<float>(),
                        out.as<float>(), ElementType::kF32, rows, cols, 1e-5f},
                       nullptr));
  // The sum is one fp32 addition on both sides: bit-equal.
  EXPECT_EQ(Download<float>(d_res, rows * cols), cpu_res);
  // fp32 mean, variance and rsqrtf against the CPU's double: a few ulps of
  // each output, ~1e-6 of the largest.
  EXPECT_LE(NormalisedError(Download<float>(out, rows * cols), cpu_out), 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AddLayerNormGpuTest,
                         ::testing::Values(NormCase{1, 1, true, false},
                                           NormCase{3, 17, true, true},
                                           NormCase{3, 17, false, false},
                                           NormCase{64, 768, true, false},
                                           NormCase{64, 768, false, true},
                                           NormCase{5, 2560, true, true},
                                           NormCase{97, 1025, false, false},
                                           NormCase{4, 2048, true, false},
                                           // Past the register kernels' 4096.
                                           NormCase{2, 5000, true, true},
                                           NormCase{0, 768, true, false}),
                         NormName);

// A 16-bit out: the kernel's own fp32 result rounded once, bit for bit (the
// same arithmetic, so no tolerance), hence within one ulp of the CPU twin's
// 16-bit result; the residual as with fp32 out.
class AddLayerNormHalfGpuTest
    : public h3::testing::GpuTestWithParam<ElementType> {};

TEST_P(AddLayerNormHalfGpuTest, IsTheRoundedFloatResult) {
  const ElementType type = GetParam();
  const int64_t rows = 97, cols = 1025;
  std::vector<float> x = RandomNormal(rows * cols, 1);
  for (float& v : x) v += 2.0f;
  const std::vector<float> residual = RandomNormal(rows * cols, 2);
  const std::vector<float> gamma = RandomNormal(cols, 3);
  const std::vector<float> beta = RandomNormal(cols, 4);
  DeviceBuffer d_x, d_res32, d_res16, d_gamma, d_beta, d_out32, d_out16;
  Upload(x, &d_x);
  Upload(residual, &d_res32);
  Upload(residual, &d_res16);
  Upload(gamma, &d_gamma);
  Upload(beta, &d_beta);
  Upload(std::vector<float>(rows * cols, NAN), &d_out32);
  Upload(std::vector<uint16_t>(rows * cols, 0xffff), &d_out16);
  ASSERT_CUDA_OK(AddLayerNormCuda(
      {d_x.as<float>(), d_res32.as<float>(), true, d_gamma.as<float>(),
       d_beta.as<float>(), d_out32.get(), ElementType::kF32, rows, cols, 1e-5f},
      nullptr));
  ASSERT_CUDA_OK(AddLayerNormCuda(
      {d_x.as<float>(), d_res16.as<float>(), true, d_gamma.as<float>(),
       d_beta.as<float>(), d_out16.get(), type, rows, cols, 1e-5f},
      nullptr));
  std::vector<float> cpu_res = residual;
  std::vector<uint16_t> cpu_out(rows * cols);
  AddLayerNormCpu({x.data(), cpu_res.data(), true, gamma.data(), beta.data(),
                   cpu_out.data(), type, rows, cols, 1e-5f});

  const std::vector<float> out32 = Download<float>(d_out32, rows * cols);
  const std::vector<uint16_t> out16 = Download<uint16_t>(d_out16, rows * cols);
  EXPECT_EQ(Download<float>(d_res16, rows * cols), cpu_res);
  float largest = 0.0f;
  for (float v : out32) largest = std::max(largest, std::abs(v));
  const bool half = type == ElementType::kF16;
  const int bits = half ? 10 : 7;  // the type's explicit significand bits
  for (int64_t i = 0; i < rows * cols; ++i) {
    ASSERT_EQ(out16[i], half ? loader::FloatToHalf(out32[i])
                             : loader::FloatToBFloat16(out32[i]))
        << "element " << i;
    // Each side rounds its fp32 result once: they differ by at most the
    // fp32 difference (2e-6 of the largest, as above) plus one ulp.
    const float gpu = LoadFloat(out16.data(), type, i);
    const float cpu = LoadFloat(cpu_out.data(), type, i);
    const float big = std::max(std::abs(gpu), std::abs(cpu));
    const float ulp =
        big == 0.0f ? 0.0f : std::ldexp(1.0f, std::ilogb(big) - bits);
    ASSERT_LE(std::abs(gpu - cpu), ulp + 2e-6f * largest) << "element " << i;
  }
}

TEST_P(AddLayerNormHalfGpuTest, RefusesHalfOutAliasingX) {
  std::vector<float> x(4, 1.0f);
  DeviceBuffer d_x, d_res, d_gamma;
  Upload(x, &d_x);
  Upload(x, &d_res);
  Upload(x, &d_gamma);
  EXPECT_EQ(AddLayerNormCuda(
                {d_x.as<float>(), d_res.as<float>(), true, d_gamma.as<float>(),
                 d_gamma.as<float>(), d_x.get(), GetParam(), 1, 4, 1e-5f},
                nullptr),
            cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(Types, AddLayerNormHalfGpuTest,
                         ::testing::Values(ElementType::kF16,
                                           ElementType::kBF16),
                         TypeName);

// ---- Embedding -------------------------------------------------------------

class EmbeddingGpuTest : public h3::testing::GpuTestWithParam<ElementType> {};

TEST_P(EmbeddingGpuTest, GathersRowsAsFloat) {
  const ElementType type = GetParam();
  const int64_t vocab = 50, cols = 97, n = 301;
  const std::vector<float> values = RandomNormal(vocab * cols, 7);
  // The table in `type` and what each entry means as a float.
  std::vector<uint8_t> table(values.size() * ElementSize(type));
  std::vector<float> meaning(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t bits = 0;
    switch (type) {
      case ElementType::kF32:
        std::memcpy(&table[4 * i], &values[i], 4);
        meaning[i] = values[i];
        continue;
      case ElementType::kF16:
        bits = loader::FloatToHalf(values[i]);
        meaning[i] = loader::HalfToFloat(bits);
        break;
      case ElementType::kBF16:
        bits = loader::FloatToBFloat16(values[i]);
        meaning[i] = loader::BFloat16ToFloat(bits);
        break;
      default:
        ADD_FAILURE() << "no table of " << ElementTypeName(type);
        break;
    }
    std::memcpy(&table[2 * i], &bits, 2);
  }
  std::mt19937 rng(8);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> ids(n);
  for (int32_t& v : ids) v = id(rng);
  ids[0] = 0;
  ids[1] = vocab - 1;

  DeviceBuffer d_ids, d_table, d_out;
  Upload(ids, &d_ids);
  Upload(table, &d_table);
  ASSERT_CUDA_OK(d_out.Reserve(n * cols * sizeof(float)));
  ASSERT_CUDA_OK(EmbeddingCuda(d_ids.as<int32_t>(), n, d_table.get(), type,
                               cols, d_out.as<float>(), nullptr));
  const std::vector<float> got = Download<float>(d_out, n * cols);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(got[i * cols + c], meaning[ids[i] * cols + c])
          << "token " << i << " column " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, EmbeddingGpuTest,
                         ::testing::Values(ElementType::kF32, ElementType::kF16,
                                           ElementType::kBF16),
                         TypeName);

// ---- Transposes ------------------------------------------------------------

// (rows, cols, stride of the token-major side)
using TransposeCase = std::tuple<int64_t, int64_t, int64_t>;

std::string TransposeName(const ::testing::TestParamInfo<TransposeCase>& info) {
  const auto [rows, cols, stride] = info.param;
  return std::to_string(rows) + "x" + std::to_string(cols) + "_stride" +
         std::to_string(stride);
}

class TransposeGpuTest : public h3::testing::GpuTestWithParam<TransposeCase> {};

// Moves `tokens` ([rows, stride] elements of `type`, stored as E: float or
// uint16_t bits) to channel-major and back; every element must arrive bit for
// bit and the padding columns stay untouched.
template <typename E>
void CheckTranspose(int64_t rows, int64_t cols, int64_t stride,
                    ElementType type, const std::vector<E>& tokens,
                    E untouched) {
  DeviceBuffer d_tokens, d_channels, d_back;
  Upload(tokens, &d_tokens);
  ASSERT_CUDA_OK(d_channels.Reserve(rows * cols * sizeof(E) + 1));
  ASSERT_CUDA_OK(TransposeToChannelMajor(d_tokens.get(), rows, cols, stride,
                                         type, d_channels.get(), nullptr));
  const std::vector<E> channels = Download<E>(d_channels, rows * cols);
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(channels[c * rows + r], tokens[r * stride + c])
          << "row " << r << " column " << c;
    }
  }

  // Back into a buffer whose padding columns must stay untouched.
  Upload(std::vector<E>(rows * stride, untouched), &d_back);
  ASSERT_CUDA_OK(TransposeToTokenMajor(d_channels.get(), rows, cols, type,
                                       d_back.get(), stride, nullptr));
  const std::vector<E> back = Download<E>(d_back, rows * stride);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < stride; ++c) {
      ASSERT_EQ(back[r * stride + c],
                c < cols ? tokens[r * stride + c] : untouched)
          << "row " << r << " column " << c;
    }
  }
}

TEST_P(TransposeGpuTest, ToChannelMajorAndBack) {
  const auto [rows, cols, stride] = GetParam();
  const std::vector<float> tokens = RandomNormal(rows * stride, 11);
  CheckTranspose(rows, cols, stride, ElementType::kF32, tokens, -12345.0f);
}

// fp16 and bf16 elements: the bits of the rounded values, padding 0xdead.
TEST_P(TransposeGpuTest, SixteenBitToChannelMajorAndBack) {
  const auto [rows, cols, stride] = GetParam();
  const std::vector<float> tokens = RandomNormal(rows * stride, 12);
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    SCOPED_TRACE(ElementTypeName(type));
    CheckTranspose(rows, cols, stride, type,
                   h3::testing::HalfBits(tokens, type), uint16_t{0xdead});
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TransposeGpuTest,
    ::testing::Values(TransposeCase{1, 1, 1}, TransposeCase{97, 65, 65},
                      TransposeCase{33, 31, 93}, TransposeCase{1025, 7, 9},
                      TransposeCase{3, 2049, 2049},
                      // taller than gridDim.y's 65535 tiles of 32 would cover
                      // in one pass
                      TransposeCase{32 * 65535 + 40, 2, 3}),
    TransposeName);

class TransposeApiTest : public h3::testing::GpuTest {};

TEST_F(TransposeApiTest, RejectsAStrideShorterThanARowAndOtherTypes) {
  DeviceBuffer a, b;
  ASSERT_CUDA_OK(a.Reserve(64 * sizeof(float)));
  ASSERT_CUDA_OK(b.Reserve(64 * sizeof(float)));
  EXPECT_EQ(TransposeToChannelMajor(a.get(), 4, 8, 7, ElementType::kF32,
                                    b.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(TransposeToTokenMajor(a.get(), 4, 8, ElementType::kF32, b.get(), 7,
                                  nullptr),
            cudaErrorInvalidValue);
  // Element types other than fp32, fp16 and bf16.
  EXPECT_EQ(TransposeToChannelMajor(a.get(), 4, 8, 8, ElementType::kI32,
                                    b.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(TransposeToTokenMajor(a.get(), 4, 8, ElementType::kF64, b.get(), 8,
                                  nullptr),
            cudaErrorInvalidValue);
}

// ---- ConvertFromFloat ------------------------------------------------------

// Values where rounding can go wrong: signed zeros, infinities, NaN,
// overflow, subnormals of both targets, ties in both targets, random values
// over many scales.
std::vector<float> HardValues() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,     -0.0f,    inf,      -inf,      NAN,
                          65504.0f, 65519.0f, 65520.0f, -65536.0f, 1e-8f,
                          -3e-8f,   6e-5f,    1e-40f,   -1e-44f,   3.4e38f};
  for (uint32_t upper = 0x3f80; upper < 0x3f90; ++upper) {
    // bf16 ties: the 16 dropped bits are exactly half an ulp.
    const uint32_t bits = (upper << 16) | 0x8000u;
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
  }
  for (uint32_t m = 0; m < 16; ++m) {
    // fp16 ties: the 13 dropped bits of a normal fp16 are half an ulp.
    const uint32_t bits = 0x3f800000u | (m << 13) | 0x1000u;
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
    v.push_back(-f);
  }
  const float scales[] = {1e-6f, 1e-3f, 1.0f, 1e3f, 3e4f, 1e30f};
  for (size_t s = 0; s < std::size(scales); ++s) {
    for (float r : RandomNormal(1 << 16, 100 + s)) v.push_back(r * scales[s]);
  }
  return v;
}

class ConvertGpuTest : public h3::testing::GpuTestWithParam<ElementType> {};

TEST_P(ConvertGpuTest, RoundsLikeTheLoader) {
  const ElementType type = GetParam();
  const std::vector<float> in = HardValues();
  const int64_t n = in.size();
  DeviceBuffer d_in, d_out;
  Upload(in, &d_in);
  ASSERT_CUDA_OK(d_out.Reserve(n * ElementSize(type)));
  ASSERT_CUDA_OK(
      ConvertFromFloat(d_in.as<float>(), n, type, d_out.get(), nullptr));
  if (type == ElementType::kF32) {
    const std::vector<float> got = Download<float>(d_out, n);
    EXPECT_EQ(std::memcmp(got.data(), in.data(), n * sizeof(float)), 0);
    return;
  }
  const std::vector<uint16_t> got = Download<uint16_t>(d_out, n);
  for (int64_t i = 0; i < n; ++i) {
    const bool half = type == ElementType::kF16;
    const uint16_t want =
        half ? loader::FloatToHalf(in[i]) : loader::FloatToBFloat16(in[i]);
    if (std::isnan(in[i])) {
      // NaN payloads may differ; NaN must stay NaN.
      const float back =
          half ? loader::HalfToFloat(got[i]) : loader::BFloat16ToFloat(got[i]);
      EXPECT_TRUE(std::isnan(back)) << "element " << i;
      continue;
    }
    ASSERT_EQ(got[i], want) << "element " << i << " = " << in[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ConvertGpuTest,
                         ::testing::Values(ElementType::kF32, ElementType::kF16,
                                           ElementType::kBF16),
                         TypeName);

}  // namespace
}  // namespace h3::kernels
