#ifndef H3_KERNELS_CUDA_BIAS_ADD_H_
#define H3_KERNELS_CUDA_BIAS_ADD_H_

// y[r][c] = x[r][c] + bias[c]: LinearCuda's bias when it is not fused into
// the product's epilogue (Options::fused_epilogues false, or no cuBLASLt
// algorithm with the epilogue for a shape). With GELU, BiasGeluCuda instead.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/element_type.h"

namespace h3::kernels {

// REQUIRES: x holds [rows, cols] floats, y [rows, cols] elements of y_type
// (kF32, kF16 or kBF16), bias [cols] elements of bias_type (kF32, or y_type
// when y_type is 16-bit); all device memory. y may equal x when y_type is
// kF32 (in place); otherwise they must not overlap. The bias is widened
// exactly, the sum rounded once to y_type (to nearest even).
// Enqueues on `stream`; returns the launch error (cudaErrorInvalidValue for
// types outside the contract). Empty y launches nothing.
cudaError_t AddBiasCuda(const float* x, const void* bias, ElementType bias_type,
                        int64_t rows, int64_t cols, void* y, ElementType y_type,
                        cudaStream_t stream);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_BIAS_ADD_H_
