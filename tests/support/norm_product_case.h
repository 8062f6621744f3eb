#ifndef H3_TESTS_SUPPORT_NORM_PRODUCT_CASE_H_
#define H3_TESTS_SUPPORT_NORM_PRODUCT_CASE_H_

// Operands and calls of the tests of the norm inside the decode product
// (AddNormStreamGemmCuda, kernels/cuda/stream_gemm.h): its GPU test and its
// run on the CPU emulator. Header-only.

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "base/element_type.h"
#include "kernels/layer_norm.h"
#include "kernels/stream_gemm.h"
#include "tests/support/random.h"
#include "tests/support/stream_gemm_case.h"

namespace h3::testing {

// (weight type, rows, cols (the norm's kPer 4, 8, 16), add the residual)
using NormProductCase = std::tuple<ElementType, int64_t, int64_t, bool>;

// The product's n: 13 blocks, each a slice of the residual to write.
constexpr int64_t kNormProductN = 200;

inline std::string NormProductCaseName(const NormProductCase& c) {
  return std::string(ElementTypeName(std::get<0>(c))) + "_rows" +
         std::to_string(std::get<1>(c)) + "_cols" +
         std::to_string(std::get<2>(c)) + (std::get<3>(c) ? "_add" : "_first");
}

// n values from N(mean, scale^2).
inline std::vector<float> NormalFloats(size_t n, float mean, float scale,
                                       uint32_t seed) {
  std::vector<float> v = RandomNormal(n, seed);
  for (float& e : v) e = mean + scale * e;
  return v;
}

// The host operands: a residual stream with a large mean, as after many
// layers; W [n, cols] in the case's 16-bit type (as bytes).
struct NormProductOperands {
  explicit NormProductOperands(const NormProductCase& c) {
    const auto [type, rows, cols, add] = c;
    x = NormalFloats(rows * cols, 3.0f, 1.0f, 1);
    residual_in = NormalFloats(rows * cols, -2.0f, 2.0f, 2);
    gamma = NormalFloats(cols, 1.0f, 0.2f, 3);
    beta = NormalFloats(cols, 0.0f, 0.2f, 4);
    w = Encode(RandomNormal(kNormProductN * cols, 5), type, 1.0f / 45);
    bias = NormalFloats(kNormProductN, 0.0f, 1.0f, 6);
  }
  std::vector<float> x, residual_in, gamma, beta, bias;
  std::vector<uint8_t> w;
};

// The norm and the product of case c over operands (host or device) at
// these addresses: the product reads the norm's output (normed), with
// bias and GELU, writing y.
struct NormProductCall {
  kernels::AddLayerNormParams norm;
  kernels::StreamGemmParams product;
};
inline NormProductCall MakeNormProductCall(
    const NormProductCase& c, const float* x, const float* residual_in,
    float* residual, const float* gamma, const float* beta, void* normed,
    const void* w, const float* bias, void* y) {
  const auto [type, rows, cols, add] = c;
  NormProductCall call;
  call.norm.x = x;
  call.norm.residual_in = residual_in;
  call.norm.residual = residual;
  call.norm.add_residual = add;
  call.norm.gamma = gamma;
  call.norm.beta = beta;
  call.norm.out = normed;
  call.norm.out_type = type;
  call.norm.rows = rows;
  call.norm.cols = cols;
  call.product = {.x = normed,
                  .x_type = type,
                  .w = w,
                  .w_type = type,
                  .bias = bias,
                  .y = y,
                  .rows = rows,
                  .n = kNormProductN,
                  .k = cols,
                  .gelu = true};
  return call;
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_NORM_PRODUCT_CASE_H_
