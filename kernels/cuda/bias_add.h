#ifndef H3_KERNELS_CUDA_BIAS_ADD_H_
#define H3_KERNELS_CUDA_BIAS_ADD_H_

// y[r][c] += bias[c]: LinearCuda's bias when it is not fused into the
// product's epilogue (Options::fused_epilogues false, or no cuBLASLt
// algorithm with the epilogue for a shape). With GELU, BiasGeluCuda instead.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace h3::kernels {

// REQUIRES: y holds [rows, cols] floats, bias [cols]; both device memory.
// Enqueues on `stream`; returns the launch error. Empty y launches nothing.
cudaError_t AddBiasCuda(const float* bias, int64_t rows, int64_t cols, float* y,
                        cudaStream_t stream);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_BIAS_ADD_H_
