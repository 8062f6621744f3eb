#ifndef H3_KERNELS_BIAS_GELU_H_
#define H3_KERNELS_BIAS_GELU_H_

// Bias + tanh-GELU: the epilogue of the MLP's first matrix product
// (fc1 in docs/model.md), out = gelu_tanh(x + bias). The CPU function here is
// the specification; kernels/cuda/bias_gelu.cu is its GPU twin and takes the
// same Params.

#include <cmath>
#include <cstdint>

#include "base/element_type.h"
#include "kernels/host_device.h"

namespace h3::kernels {

// The whole host/device interface of the op: plain pointers and sizes.
// REQUIRES: x holds rows * cols floats and out rows * cols elements of
// out_type (kF32, kF16 or kBF16), row-major and contiguous; bias holds cols
// elements of bias_type (kF32, or out_type when out_type is 16-bit) or is
// nullptr (no bias). out may equal x (in place) when out_type is kF32;
// otherwise they must not overlap. rows, cols >= 0.
// A 16-bit bias is widened exactly and a 16-bit out is the fp32 result
// rounded once (to nearest even): out = round(gelu_tanh(x + float(bias))).
struct BiasGeluParams {
  const float* x;    // [rows, cols]
  const void* bias;  // [cols] of bias_type, or nullptr
  void* out;         // [rows, cols] of out_type
  int64_t rows;
  int64_t cols;
  ElementType bias_type = ElementType::kF32;
  ElementType out_type = ElementType::kF32;
};

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as GPT-2 and the H3
// reference compute it ("gelu_new" / approximate="tanh").
H3_HOST_DEVICE inline float GeluTanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr float kCoeff = 0.044715f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCoeff * x * x * x)));
}

// The CPU twin. Single-threaded; callers split rows across threads.
void BiasGeluCpu(const BiasGeluParams& params);

}  // namespace h3::kernels

#endif  // H3_KERNELS_BIAS_GELU_H_
