#include <algorithm>

#include "kernels/cuda/bias_add.h"
#include "kernels/cuda/grid.h"

namespace h3::kernels {
namespace {

// The launch shape of BiasGeluCuda (bias_gelu.cu): a memory-bound grid-stride
// loop, 256 threads per block, at most 32 blocks per SM.
constexpr int kThreads = 256;
constexpr int kMaxBlocksPerSm = 32;

__global__ void AddBiasKernel(const float* bias, int64_t rows, int64_t cols,
                              float* y) {
  const int64_t n = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    y[i] += bias[i % cols];
  }
}

}  // namespace

cudaError_t AddBiasCuda(const float* bias, int64_t rows, int64_t cols, float* y,
                        cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  int blocks = 0;
  const cudaError_t err =
      GridStrideBlocks(n, kThreads, kMaxBlocksPerSm, &blocks);
  if (err != cudaSuccess) return err;
  AddBiasKernel<<<blocks, kThreads, 0, stream>>>(bias, rows, cols, y);
  return cudaGetLastError();
}

}  // namespace h3::kernels
