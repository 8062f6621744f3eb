#ifndef H3_KERNELS_CUDA_LINEAR_TEST_SUPPORT_H_
#define H3_KERNELS_CUDA_LINEAR_TEST_SUPPORT_H_

// Helpers of the LinearCuda GPU tests (linear_test.cc, linear_half_test.cc):
// cases, their tolerances, a double-precision reference and one run of a
// case on the device. For 16-bit weights the reference multiplies the same
// rounded x and W the GPU multiplies, so only the accumulation differs.

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/bias_gelu.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/linear.h"
#include "loader/dtype.h"
#include "tests/support/random.h"

namespace h3::kernels::linear_testing {

// Tolerances on max |got - want| / max |want|. Outputs are ~N(0, 2) (unit
// x, W scaled by 1/sqrt(k), unit bias), so max |want| is about 6.
// fp32: an fp32 dot product of k <= 1031 terms errs by about
// 2^-24 sqrt(k) |partial sums| ~ 2e-6 at worst, well under one at the
// rms; 2e-6 of the max leaves room for blocked summation orders.
constexpr double kFloat32Tolerance = 2e-6;
// 16-bit weights: products of 11- or 8-bit significands are exact in fp32,
// but tensor cores may truncate inside the MMA's fp32 accumulation, an error
// that grows like k 2^-24 / 2 ~ 3e-5 absolute, 5e-6 normalised.
constexpr double kHalfTolerance = 2e-5;
// GELU evaluated in fp32 adds a few ulps. The erf GELU differs from the tanh
// one by up to 4.7e-4 (at x = -2.7), ~6e-5 normalised, which this rejects.
constexpr double kGeluExtra = 4e-6;
// TF32 rounds x and W to 10-bit significands: 2^-11 relative per product.
constexpr double kTf32Tolerance = 3e-3;

struct Case {
  ElementType type;
  int64_t rows, n, k;
  bool bias, gelu, fused;
};

inline std::string TypeName(ElementType type) { return ElementTypeName(type); }

inline std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return TypeName(c.type) + "_" + std::to_string(c.rows) + "x" +
         std::to_string(c.n) + "x" + std::to_string(c.k) +
         (c.bias ? "_bias" : "") + (c.gelu ? "_gelu" : "") +
         (c.fused ? "_fused" : "_unfused");
}

// v rounded to `type` by the loader's conversions, and back.
inline float Round(ElementType type, float v) {
  switch (type) {
    case ElementType::kF16:
      return loader::HalfToFloat(loader::FloatToHalf(v));
    case ElementType::kBF16:
      return loader::BFloat16ToFloat(loader::FloatToBFloat16(v));
    default:  // kF32: the tests use the float types only
      break;
  }
  return v;
}

// `values` in `type`'s bytes.
inline std::vector<uint8_t> Encode(ElementType type,
                                   const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * ElementSize(type));
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == ElementType::kF32) {
      std::memcpy(&bytes[4 * i], &values[i], 4);
      continue;
    }
    const uint16_t bits = type == ElementType::kF16
                              ? loader::FloatToHalf(values[i])
                              : loader::FloatToBFloat16(values[i]);
    std::memcpy(&bytes[2 * i], &bits, 2);
  }
  return bytes;
}

// epilogue(x W^T + bias) in double from x and W rounded to c.type, as the
// GPU sees them; the GELU by the CPU twin.
inline std::vector<float> Reference(const Case& c, const std::vector<float>& x,
                                    const std::vector<float>& w,
                                    const std::vector<float>& bias) {
  std::vector<float> y(c.rows * c.n);
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = c.bias ? bias[j] : 0.0;
      for (int64_t i = 0; i < c.k; ++i) {
        sum += double{Round(c.type, x[r * c.k + i])} *
               double{Round(c.type, w[j * c.k + i])};
      }
      y[r * c.n + j] = static_cast<float>(sum);
    }
  }
  if (c.gelu) BiasGeluCpu({y.data(), nullptr, y.data(), c.rows, c.n});
  return y;
}

// The problem's inputs and its answer.
struct Problem {
  std::vector<float> x, w, bias;
  std::vector<float> want;  // [rows, n]
};

inline Problem MakeProblem(const Case& c, uint32_t seed) {
  Problem p;
  p.x = h3::testing::RandomNormal(c.rows * c.k, seed);
  p.w = h3::testing::RandomNormal(c.n * c.k, seed + 1);
  for (float& v : p.w) v /= std::sqrt(static_cast<float>(c.k));
  p.bias = h3::testing::RandomNormal(c.n, seed + 2);
  p.want = Reference(c, p.x, p.w, p.bias);
  return p;
}

template <typename T>
inline void Upload(const std::vector<T>& host, DeviceBuffer* buffer,
                   size_t pad = 0) {
  ASSERT_EQ(cudaSuccess, buffer->Reserve(host.size() * sizeof(T) + pad + 1));
  ASSERT_EQ(cudaSuccess,
            cudaMemcpy(buffer->as<uint8_t>() + pad, host.data(),
                       host.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// Runs the case with every pointer offset by `offset_bytes` from cudaMalloc's
// 256-byte alignment, x given to the product as x_type (p.x rounded to it),
// the bias as bias_type (p.bias rounded to it) and y written as y_type;
// returns y widened to float.
inline std::vector<float> RunCase(const Case& c, const Problem& p,
                                  const LinearCuda::Options& options,
                                  size_t offset_bytes = 0,
                                  ElementType x_type = ElementType::kF32,
                                  ElementType y_type = ElementType::kF32,
                                  ElementType bias_type = ElementType::kF32) {
  DeviceBuffer x, w, bias, y;
  Upload(Encode(x_type, p.x), &x, offset_bytes);
  Upload(Encode(c.type, p.w), &w, offset_bytes);
  Upload(Encode(bias_type, p.bias), &bias, offset_bytes);
  Upload(Encode(y_type, std::vector<float>(c.rows * c.n, NAN)), &y,
         offset_bytes);
  std::unique_ptr<LinearCuda> linear;
  std::string error = LinearCuda::Create(options, &linear);
  EXPECT_EQ(error, "");
  if (!error.empty()) return {};
  LinearCudaParams params;
  params.x = x.as<uint8_t>() + offset_bytes;
  params.x_type = x_type;
  params.w = w.as<uint8_t>() + offset_bytes;
  params.w_type = c.type;
  params.bias = c.bias ? bias.as<uint8_t>() + offset_bytes : nullptr;
  params.bias_type = bias_type;
  params.y = y.as<uint8_t>() + offset_bytes;
  params.y_type = y_type;
  params.rows = c.rows;
  params.n = c.n;
  params.k = c.k;
  params.gelu = c.gelu;
  EXPECT_EQ(linear->Run(params, nullptr), "");
  std::vector<uint8_t> bytes(c.rows * c.n * ElementSize(y_type));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(
      cudaMemcpy(bytes.data(), params.y, bytes.size(), cudaMemcpyDeviceToHost),
      cudaSuccess);
  std::vector<float> got(c.rows * c.n);
  for (size_t i = 0; i < got.size(); ++i) {
    got[i] = LoadFloat(bytes.data(), y_type, i);
  }
  return got;
}

// Scratch for the case's fp32 x and 16-bit y; c.fused's epilogues.
inline LinearCuda::Options OptionsFor(const Case& c) {
  return {.max_rows_times_k = c.rows * c.k,
          .fused_epilogues = c.fused,
          .max_rows_times_n = c.rows * c.n};
}

inline double Tolerance(const Case& c) {
  return (c.type == ElementType::kF32 ? kFloat32Tolerance : kHalfTolerance) +
         (c.gelu ? kGeluExtra : 0.0);
}

}  // namespace h3::kernels::linear_testing

#endif  // H3_KERNELS_CUDA_LINEAR_TEST_SUPPORT_H_
