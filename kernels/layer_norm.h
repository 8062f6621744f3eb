#ifndef H3_KERNELS_LAYER_NORM_H_
#define H3_KERNELS_LAYER_NORM_H_

// Residual add + layer norm, as the prenorm blocks use it (docs/model.md):
//   residual = x + residual   (residual = x when there is none yet)
//   out      = LayerNorm(residual) * gamma + beta
// with mean and variance over the row, eps inside the square root. The CPU
// function is the specification; the CUDA kernel takes the same Params.

#include <cstdint>

#include "base/element_type.h"

namespace h3::kernels {

// REQUIRES: x, residual, out hold [rows, cols]; gamma and beta [cols].
// residual is read (unless add_residual is false) and overwritten with the
// sum; with residual_in, the sum of x and residual_in goes to residual
// instead (residual_in is only read; the two do not overlap). out holds
// elements of out_type (kF32, kF16 or kBF16): the fp32 result rounded once
// to it, to nearest even. out may alias x only for kF32 out.
struct AddLayerNormParams {
  const float* x = nullptr;
  float* residual = nullptr;
  bool add_residual = true;  // false for the first block: residual = x
  const float* gamma = nullptr;
  const float* beta = nullptr;
  void* out = nullptr;  // [rows, cols] of out_type
  ElementType out_type = ElementType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  float eps = 1e-5f;
  // [rows, cols], or null: residual is read and written in place.
  const float* residual_in = nullptr;
};

void AddLayerNormCpu(const AddLayerNormParams& params);

}  // namespace h3::kernels

#endif  // H3_KERNELS_LAYER_NORM_H_
