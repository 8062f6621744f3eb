#ifndef H3_KERNELS_CUDA_GRID_H_
#define H3_KERNELS_CUDA_GRID_H_

// Grid sizes for grid-stride elementwise kernels.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

namespace h3::kernels {

// Blocks of `threads` for `n` elements: one element per thread, capped at
// `max_blocks_per_sm` per multiprocessor of the current device (the kernel
// strides over the rest).
inline cudaError_t GridStrideBlocks(int64_t n, int threads,
                                    int max_blocks_per_sm, int* blocks) {
  int device = 0;
  int sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  if (err != cudaSuccess) return err;
  const int64_t wanted = (n + threads - 1) / threads;
  *blocks = static_cast<int>(
      std::min<int64_t>(wanted, static_cast<int64_t>(sms) * max_blocks_per_sm));
  return cudaSuccess;
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_GRID_H_
