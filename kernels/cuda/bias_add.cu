#include <algorithm>

#include "kernels/cuda/bias_add.h"
#include "kernels/cuda/grid.h"
#include "kernels/cuda/io_element.cuh"

namespace h3::kernels {
namespace {

// The launch shape of BiasGeluCuda (bias_gelu.cu): a memory-bound grid-stride
// loop, 256 threads per block, at most 32 blocks per SM.
constexpr int kThreads = 256;
constexpr int kMaxBlocksPerSm = 32;

template <typename B, typename Y>
__global__ void AddBiasKernel(const float* x, const B* bias, int64_t rows,
                              int64_t cols, Y* y) {
  const int64_t n = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    y[i] = io::FromFloat<Y>(x[i] + io::ToFloat(bias[i % cols]));
  }
}

}  // namespace

cudaError_t AddBiasCuda(const float* x, const void* bias, ElementType bias_type,
                        int64_t rows, int64_t cols, void* y, ElementType y_type,
                        cudaStream_t stream) {
  if (bias_type != ElementType::kF32 && bias_type != y_type) {
    return cudaErrorInvalidValue;
  }
  const int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  int blocks = 0;
  const cudaError_t err =
      GridStrideBlocks(n, kThreads, kMaxBlocksPerSm, &blocks);
  if (err != cudaSuccess) return err;
  return io::DispatchIo(bias_type, [&](auto bias_element) {
    using B = decltype(bias_element);
    return io::DispatchIo(y_type, [&](auto y_element) {
      using Y = decltype(y_element);
      AddBiasKernel<<<blocks, kThreads, 0, stream>>>(
          x, static_cast<const B*>(bias), rows, cols, static_cast<Y*>(y));
      return cudaGetLastError();
    });
  });
}

}  // namespace h3::kernels
