#ifndef H3_KERNELS_CUDA_LAYER_NORM_DEVICE_CUH_
#define H3_KERNELS_CUDA_LAYER_NORM_DEVICE_CUH_

// The arithmetic of AddLayerNorm on rows held in registers, shared by the
// norm's row kernel (elementwise.cu) and the decode product that norms its
// own input (stream_gemm.cu, AddNormStreamGemmCuda), so that both give the
// same bits. A block of kNormThreads threads; thread t holds columns
// t + i kNormThreads, i < kPer, of each row.

#include <cuda_runtime.h>

#include <cstdint>

namespace h3::kernels::layer_norm {

// 256 threads: enough loads in flight per row, and few idle threads for the
// smallest models (d_model 768).
constexpr int kNormThreads = 256;
constexpr int kNormWarps = kNormThreads / 32;

// The sums of s[r] over the block, returned to every thread: for each r the
// same shuffle tree over the warp, then the warps' sums in warp order.
// `shared` holds kRows * kNormWarps floats; the leading barrier lets a
// second call reuse it.
template <int kRows>
__device__ __forceinline__ void BlockSums(float (&s)[kRows], float* shared) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    for (int offset = 16; offset > 0; offset /= 2) {
      s[r] += __shfl_xor_sync(0xffffffffu, s[r], offset);
    }
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) shared[r * kNormWarps + warp] = s[r];
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    s[r] = lane < kNormWarps ? shared[r * kNormWarps + lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) {
      s[r] += __shfl_xor_sync(0xffffffffu, s[r], offset);
    }
  }
}

// Each row's mean and 1 / sqrt(variance + eps) from its values v[r] (the
// residual sums; only columns below `cols` count). Two passes: the variance
// is the mean squared deviation, not E[v^2] - mean^2, which cancels badly
// when |mean| >> std. Every thread calls it (it synchronises).
template <int kRows, int kPer>
__device__ __forceinline__ void RowStats(const float (&v)[kRows][kPer],
                                         int cols, float eps, float* shared,
                                         float (&mean)[kRows],
                                         float (&inv)[kRows]) {
  float s[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    s[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      if (threadIdx.x + i * kNormThreads < cols) s[r] += v[r][i];
    }
  }
  BlockSums<kRows>(s, shared);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    mean[r] = s[r] / static_cast<float>(cols);
    s[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      if (threadIdx.x + i * kNormThreads >= cols) continue;
      const float dev = __fsub_rn(v[r][i], mean[r]);
      s[r] = __fmaf_rn(dev, dev, s[r]);
    }
  }
  BlockSums<kRows>(s, shared);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    inv[r] = rsqrtf(s[r] / static_cast<float>(cols) + eps);
  }
}

// One normed value, before its rounding to the output type.
__device__ __forceinline__ float NormValue(float v, float mean, float inv,
                                           float gamma, float beta) {
  return __fmaf_rn(__fmul_rn(__fsub_rn(v, mean), inv), gamma, beta);
}

}  // namespace h3::kernels::layer_norm

#endif  // H3_KERNELS_CUDA_LAYER_NORM_DEVICE_CUH_
