#ifndef H3_KERNELS_CUDA_FLASHCONV_DEVICE_CUH_
#define H3_KERNELS_CUDA_FLASHCONV_DEVICE_CUH_

// Device helpers of the fused H3 prefill kernel (h3_prefill_fused_kernel.cu):
// element conversion, complex arithmetic, block reductions, tensor-core
// fragments, and the shared-memory map of one thread block.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>

#include "kernels/cuda/io_element.cuh"
#include "kernels/flashconv.h"

namespace h3::kernels::flashconv {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// ---- elements (kernels/cuda/io_element.cuh)

using io::FromFloat;
using io::ToFloat;

// ---- complex numbers as float2 (x real, y imaginary)

__device__ inline float2 CMul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ inline float2 CMulConj(float2 a, float2 b) {  // a * conj(b)
  return make_float2(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y);
}
__device__ inline float2 CAdd(float2 a, float2 b) {
  return make_float2(a.x + b.x, a.y + b.y);
}
__device__ inline float2 CScale(float2 a, float s) {
  return make_float2(a.x * s, a.y * s);
}

// z^n for z = exp(log_r + i theta), in double: exact to float precision for
// any n we use (up to millions), unlike n repeated float products.
__device__ inline float2 PowPolar(double log_r, double theta, double n) {
  const double r = exp(n * log_r);
  double s, c;
  sincos(n * theta, &s, &c);
  return make_float2(static_cast<float>(r * c), static_cast<float>(r * s));
}

// exp(-2 pi i r / n) for integers 0 <= r < n; n a power of two, so r / n is
// exact and sincospif reduces the angle exactly.
__device__ inline float2 Twiddle(int r, int n) {
  float s, c;
  sincospif(-2.0f * static_cast<float>(r) / static_cast<float>(n), &s, &c);
  return make_float2(c, s);
}

// The largest v over the thread block. Every thread must call it; `slots`
// holds kWarps floats of shared memory.
__device__ inline float BlockMax(float v, float* slots) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  __syncthreads();  // the previous reduction has read its slots
  if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = v;
  __syncthreads();
  float result = slots[0];
  for (int i = 1; i < kWarps; ++i) result = fmaxf(result, slots[i]);
  return result;
}

// ---- tensor-core fragments (16 x 16 x 16, fp16 operands, fp32 accumulation)

namespace wmma = nvcuda::wmma;
using FragARow =
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major>;
using FragACol =
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::col_major>;
using FragBRow =
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major>;
using FragBCol =
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

template <typename Frag>
__device__ inline void Negate(Frag& f) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = __hneg(f.x[i]);
}

// ---- shared memory

// The fixed-size part of a block's shared memory.
struct alignas(128) SmallShared {
  __half pcat[16][2 * kMaxModes];  // P[j][m] = C dA^(j+1), scaled
  __half ecat[2 * kMaxModes][16];  // E[m][i] = dA^(15-i) dB, scaled
  float history[kHistory];         // the last kHistory inputs k by position
  float taps[kHistory];            // shift kernel of the channel
  float2 x[kMaxModes];             // diagonal state at the chunk's start
  float2 x_next[kMaxModes];        // ... at its end
  float2 dA16[kMaxModes];          // dA^16
  float2 dA256[kMaxModes];         // dA^256
  float2 partial[kMaxChunk / kStateTile][kMaxModes];
  double log_r[kMaxModes];  // dA = exp(log_r + i theta)
  double theta[kMaxModes];
  float slots[kWarps];
  float scale_p, scale_e;
};

// Byte offsets of a block's shared memory for FFT size n (chunk n / 2).
struct SharedMap {
  __host__ __device__ explicit constexpr SharedMap(int n)
      : plane_p(0),
        plane_q(plane_p + 4 * n),
        extra(plane_q + 4 * n),
        scratch(extra + 2 * n),
        small(scratch + ScratchBytes(n)),
        total(small + sizeof(SmallShared)) {}

  // kf (history + chunk, fp32) or the warps' fp32 tiles or the setup
  // tables of P and E (fp32 complex), whichever is largest.
  __host__ __device__ static constexpr int ScratchBytes(int n) {
    const int kf = 4 * (kHistory + n / 2);
    const int tiles = kWarps * 2 * 256 * 4;
    const int setup = 2 * 16 * kMaxModes * 8;
    const int most = kf > tiles ? kf : tiles;
    return most > setup ? most : setup;
  }

  int plane_p;  // __half re[n], im[n]
  int plane_q;  // __half re[n], im[n]
  int extra;    // float [n / 2]
  int scratch;
  int small;
  int total;
};

}  // namespace h3::kernels::flashconv

#endif  // H3_KERNELS_CUDA_FLASHCONV_DEVICE_CUH_
