// LinearCuda vs a double-precision x W^T + bias (label gpu: skipped without
// a device). For 16-bit weights the reference multiplies the same rounded x
// and W the GPU multiplies, so only the accumulation differs.
#include "kernels/cuda/linear.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/half_float.h"
#include "gtest/gtest.h"
#include "kernels/bias_gelu.h"
#include "kernels/cuda/device_buffer.h"
#include "loader/dtype.h"
#include "tests/support/gpu_test.h"
#include "tests/support/normalised_error.h"
#include "tests/support/random.h"

namespace h3::kernels {
namespace {

using h3::testing::NormalisedError;
using h3::testing::RandomNormal;

#define ASSERT_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess)

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

std::string TypeName(ElementType type) { return ElementTypeName(type); }

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return TypeName(c.type) + "_" + std::to_string(c.rows) + "x" +
         std::to_string(c.n) + "x" + std::to_string(c.k) +
         (c.bias ? "_bias" : "") + (c.gelu ? "_gelu" : "") +
         (c.fused ? "_fused" : "_unfused");
}

// v rounded to `type` by the loader's conversions, and back.
float Round(ElementType type, float v) {
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
std::vector<uint8_t> Encode(ElementType type,
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
std::vector<float> Reference(const Case& c, const std::vector<float>& x,
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

Problem MakeProblem(const Case& c, uint32_t seed) {
  Problem p;
  p.x = RandomNormal(c.rows * c.k, seed);
  p.w = RandomNormal(c.n * c.k, seed + 1);
  for (float& v : p.w) v /= std::sqrt(static_cast<float>(c.k));
  p.bias = RandomNormal(c.n, seed + 2);
  p.want = Reference(c, p.x, p.w, p.bias);
  return p;
}

template <typename T>
void Upload(const std::vector<T>& host, DeviceBuffer* buffer, size_t pad = 0) {
  ASSERT_CUDA_OK(buffer->Reserve(host.size() * sizeof(T) + pad + 1));
  ASSERT_CUDA_OK(cudaMemcpy(buffer->as<uint8_t>() + pad, host.data(),
                            host.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// Runs the case with every pointer offset by `offset_bytes` from cudaMalloc's
// 256-byte alignment, x given to the product as x_type (p.x rounded to it)
// and y written as y_type; returns y widened to float.
std::vector<float> RunCase(const Case& c, const Problem& p,
                           const LinearCuda::Options& options,
                           size_t offset_bytes = 0,
                           ElementType x_type = ElementType::kF32,
                           ElementType y_type = ElementType::kF32) {
  DeviceBuffer x, w, bias, y;
  Upload(Encode(x_type, p.x), &x, offset_bytes);
  Upload(Encode(c.type, p.w), &w, offset_bytes);
  Upload(p.bias, &bias, offset_bytes);
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
  params.bias =
      c.bias ? reinterpret_cast<const float*>(bias.as<uint8_t>() + offset_bytes)
             : nullptr;
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
LinearCuda::Options OptionsFor(const Case& c) {
  return {.max_rows_times_k = c.rows * c.k,
          .fused_epilogues = c.fused,
          .max_rows_times_n = c.rows * c.n};
}

double Tolerance(const Case& c) {
  return (c.type == ElementType::kF32 ? kFloat32Tolerance : kHalfTolerance) +
         (c.gelu ? kGeluExtra : 0.0);
}

class LinearGpuTest : public h3::testing::GpuTestWithParam<Case> {};

TEST_P(LinearGpuTest, MatchesDoubleReference) {
  const Case& c = GetParam();
  const Problem p = MakeProblem(c, 17);
  EXPECT_LE(NormalisedError(RunCase(c, p, OptionsFor(c)), p.want),
            Tolerance(c));
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  const ElementType types[] = {ElementType::kF32, ElementType::kF16,
                               ElementType::kBF16};
  // (n, k): multiples of 8 (tensor-core friendly), odd ones (each row of W
  // starts at a 4- or 2-byte boundary), and a long k.
  const int64_t shapes[][2] = {{64, 128}, {97, 65}, {33, 31}, {250, 1031}};
  for (ElementType type : types) {
    for (int64_t rows : {1, 3, 17, 512}) {
      for (const auto& shape : shapes) {
        for (int epilogue = 0; epilogue < 8; ++epilogue) {
          cases.push_back({type, rows, shape[0], shape[1], (epilogue & 1) != 0,
                           (epilogue & 2) != 0, (epilogue & 4) != 0});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearGpuTest, ::testing::ValuesIn(AllCases()),
                         CaseName);

class LinearCudaTest : public h3::testing::GpuTest {};

// cuBLASLt's documentation does not say which GELU its epilogue computes;
// the model needs the tanh approximation. The fused result must sit much
// closer to it than to the erf GELU.
TEST_F(LinearCudaTest, FusedGeluIsTheTanhApproximation) {
  const Case c{ElementType::kF32, 64, 256, 256, true, false, true};
  const Problem p = MakeProblem(c, 5);  // p.want: the product + bias
  Case with_gelu = c;
  with_gelu.gelu = true;
  const std::vector<float> got = RunCase(with_gelu, p, {0, false, true});
  std::vector<double> tanh_gelu(p.want.size()), erf_gelu(p.want.size());
  for (size_t i = 0; i < p.want.size(); ++i) {
    const double v = p.want[i];
    tanh_gelu[i] =
        0.5 * v *
        (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    erf_gelu[i] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  }
  const double tanh_error = NormalisedError(got, tanh_gelu);
  const double erf_error = NormalisedError(got, erf_gelu);
  EXPECT_LE(tanh_error, kFloat32Tolerance + kGeluExtra);
  EXPECT_GE(erf_error, 8 * tanh_error);
}

TEST_F(LinearCudaTest, Tf32WhenAllowed) {
  const Case c{ElementType::kF32, 128, 192, 320, true, false, true};
  const Problem p = MakeProblem(c, 9);
  EXPECT_LE(NormalisedError(RunCase(c, p, {0, true, true}), p.want),
            kTf32Tolerance);
}

// x, y, bias and W all 4 bytes past a 256-byte boundary (for 16-bit weights
// the product reads our aligned scratch instead of x): the heuristic must not
// pick an algorithm that assumes 16-byte alignment.
TEST_F(LinearCudaTest, MisalignedPointers) {
  for (ElementType type : {ElementType::kF32, ElementType::kF16}) {
    for (bool gelu : {false, true}) {
      const Case c{type, 19, 72, 40, true, gelu, true};
      const Problem p = MakeProblem(c, 3);
      EXPECT_LE(NormalisedError(RunCase(c, p, {c.rows * c.k, false, true}, 4),
                                p.want),
                Tolerance(c))
          << TypeName(type) << (gelu ? " gelu" : "");
    }
  }
}

TEST_F(LinearCudaTest, RoundedXBeyondScratchFails) {
  std::unique_ptr<LinearCuda> linear;
  ASSERT_EQ(LinearCuda::Create({100, false, true}, &linear), "");
  DeviceBuffer x, w, y;
  ASSERT_CUDA_OK(x.Reserve(11 * 10 * sizeof(float)));
  ASSERT_CUDA_OK(w.Reserve(8 * 10 * sizeof(float)));
  ASSERT_CUDA_OK(y.Reserve(11 * 8 * sizeof(float)));
  ASSERT_CUDA_OK(cudaMemset(x.get(), 0, x.bytes()));
  ASSERT_CUDA_OK(cudaMemset(w.get(), 0, w.bytes()));
  LinearCudaParams params;
  params.x = x.as<float>();
  params.w = w.get();
  params.w_type = ElementType::kF16;
  params.y = y.as<float>();
  params.n = 8;
  params.k = 10;
  params.rows = 10;  // rows * k = 100: fits
  EXPECT_EQ(linear->Run(params, nullptr), "");
  params.rows = 11;  // 110
  const std::string error = linear->Run(params, nullptr);
  EXPECT_NE(error.find("max_rows_times_k"), std::string::npos) << error;
  // fp32 weights read x directly: no limit.
  params.w_type = ElementType::kF32;
  EXPECT_EQ(linear->Run(params, nullptr), "");
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// After a first call has chosen the algorithm, a captured call replays with
// whatever x holds at replay time.
TEST_F(LinearCudaTest, ReplaysFromACudaGraph) {
  const Case c{ElementType::kF16, 33, 96, 160, true, true, true};
  const Problem p = MakeProblem(c, 21);
  DeviceBuffer x, w, bias, y;
  Upload(p.x, &x);
  Upload(Encode(c.type, p.w), &w);
  Upload(p.bias, &bias);
  Upload(std::vector<float>(c.rows * c.n, 0.0f), &y);
  std::unique_ptr<LinearCuda> linear;
  ASSERT_EQ(LinearCuda::Create({c.rows * c.k, false, true}, &linear), "");
  const LinearCudaParams params{.x = x.get(),
                                .w = w.get(),
                                .w_type = c.type,
                                .bias = bias.as<float>(),
                                .y = y.get(),
                                .rows = c.rows,
                                .n = c.n,
                                .k = c.k,
                                .gelu = c.gelu};
  cudaStream_t stream = nullptr;
  ASSERT_CUDA_OK(cudaStreamCreate(&stream));
  ASSERT_EQ(linear->Run(params, stream), "");
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const std::string error = linear->Run(params, stream);
  ASSERT_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_EQ(error, "");
  ASSERT_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  // The same W and bias, a new x.
  const std::vector<float> x2 = RandomNormal(c.rows * c.k, 99);
  const std::vector<float> want = Reference(c, x2, p.w, p.bias);
  ASSERT_CUDA_OK(cudaMemcpy(x.get(), x2.data(), x2.size() * sizeof(float),
                            cudaMemcpyHostToDevice));
  ASSERT_CUDA_OK(cudaMemset(y.get(), 0, y.bytes()));
  ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<float> got(c.rows * c.n);
  ASSERT_CUDA_OK(cudaMemcpy(got.data(), y.get(), got.size() * sizeof(float),
                            cudaMemcpyDeviceToHost));
  EXPECT_LE(NormalisedError(got, want), Tolerance(c));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// ---- 16-bit activations (x_type, y_type = w_type) ---------------------------

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

// Each refusal names its field.
TEST_F(LinearCudaTest, RefusesActivationTypesOtherThanFp32OrW) {
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
}  // namespace h3::kernels
