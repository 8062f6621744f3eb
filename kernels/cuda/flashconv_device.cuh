#ifndef H3_KERNELS_CUDA_FLASHCONV_DEVICE_CUH_
#define H3_KERNELS_CUDA_FLASHCONV_DEVICE_CUH_

// Device helpers of the fused H3 prefill kernel (h3_prefill_fused_kernel.cu),
// some shared with the chunked one (h3_prefill_chunked_kernel.cu): element
// conversion, complex arithmetic, block reductions, tensor-core
// fragments, and the shared-memory map of one thread block (with the
// channel's record from kernels/flashconv_setup.h).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>

#include "kernels/cuda/h3_prefill_fused_kernel.h"
#include "kernels/cuda/io_element.cuh"
#include "kernels/flashconv.h"
#include "kernels/flashconv_setup.h"

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

// A (re, im) pair of a ChannelSetup (8-byte aligned) as float2.
__device__ inline float2 AsFloat2(const float (&z)[2]) {
  return *reinterpret_cast<const float2*>(z);
}

// z^n for z = exp(log_r + i theta), in double: exact to float precision for
// any n we use (up to millions), unlike n repeated float products.
__device__ inline float2 PowPolar(double log_r, double theta, double n) {
  const double r = exp(n * log_r);
  double s, c;
  sincos(n * theta, &s, &c);
  return make_float2(static_cast<float>(r * c), static_cast<float>(r * s));
}

// The largest v over a thread block of kBlockWarps warps. Every thread
// must call it; `slots` holds kBlockWarps floats of shared memory.
template <int kBlockWarps = kWarps>
__device__ inline float BlockMax(float v, float* slots) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  __syncthreads();  // the previous reduction has read its slots
  if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = v;
  __syncthreads();
  float result = slots[0];
  for (int i = 1; i < kBlockWarps; ++i) result = fmaxf(result, slots[i]);
  return result;
}

// ---- one block's (segment, channel) of a packed launch (both kernels)

// Channel c of segment `seg`: its q, k, v and out at the segment's first
// token (time stride 1, channel stride a.channel), its shift ring [N] and
// diagonal state [M] complex, and its shift_D and D. Args: the fused or the
// chunked kernel's launch arguments.
template <typename T>
struct SegmentChannel {
  const T* q;
  const T* k;
  const T* v;
  T* out;
  float* ring;
  float* diag;
  float shift_d, skip;
};

template <typename T, typename Args>
__device__ inline SegmentChannel<T> ChannelOf(const Args& a,
                                              const BlockSegment& seg, int c) {
  const int ns = a.w.shape.d_state, modes = ns / 2;
  const int64_t base = seg.offset + c * a.channel;
  return {static_cast<const T*>(a.q) + base,
          static_cast<const T*>(a.k) + base,
          static_cast<const T*>(a.v) + base,
          static_cast<T*>(a.out) + base,
          seg.shift_state + static_cast<int64_t>(c) * ns,
          seg.diag_state + 2 * static_cast<int64_t>(c) * modes,
          a.w.shift_D[c],
          a.w.D[c]};
}

// ---- the shift SSM's inputs around a call (both prefill kernels)

// history[kHistory - m] = k at position start - m, from the shift state's
// ring (position P in slot P mod N) for m <= N, zero before position 0 and
// beyond the ring (m > N meets only taps j >= N, which are zero); taps: the
// channel's shift kernel `kernel` [N], zero past N. Threads tid, tid +
// threads, ... of the block.
__device__ inline void LoadHistory(const float* ring, const float* kernel,
                                   int64_t start, int ns, int tid, int threads,
                                   float* history, float* taps) {
  for (int i = tid; i < kHistory; i += threads) {
    const int m = kHistory - i;
    const int64_t position = start - m;
    history[i] = m <= ns && position >= 0 ? ring[position % ns] : 0.0f;
    taps[i] = i < ns ? kernel[i] : 0.0f;
  }
}

// The shift convolution's inputs for tokens offset .. offset + len - 1 of
// `k` (zeros up to `tokens`), after their history: kf[kHistory + t] = k of
// token offset + t, kf[0 .. kHistory) = history. Threads tid, tid + threads,
// ... of the block; the caller synchronises before reading kf.
template <typename T>
__device__ inline void StageInputs(const float* history, const T* k,
                                   int64_t offset, int len, int tokens, int tid,
                                   int threads, float* kf) {
  for (int i = tid; i < kHistory; i += threads) kf[i] = history[i];
  for (int t = tid; t < tokens; t += threads) {
    kf[kHistory + t] = t < len ? ToFloat(k[offset + t]) : 0.0f;
  }
}

// The ring after a call of `length` tokens from `start`: its last
// min(length, N) inputs into their slots, from the history, which holds the
// call's last kHistory inputs k; the other slots keep the inputs still
// within the last N. Only the calling block may touch this ring, and it must
// have read it (LoadHistory) before.
__device__ inline void WriteRing(const float* history, int64_t start,
                                 int64_t length, int ns, int tid, int threads,
                                 float* ring) {
  const int64_t last = start + length - 1;  // the last token's position
  const int written = length < ns ? static_cast<int>(length) : ns;
  for (int j = tid; j < written; j += threads) {
    ring[(last - j) % ns] = history[kHistory - 1 - j];
  }
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
  // The channel's P, E, their scales and powers of dA, copied from the
  // record computed at load.
  ChannelSetup setup;
  float history[kHistory];   // the last kHistory inputs k by position
  float taps[kHistory];      // shift kernel of the channel
  float2 x[kMaxModes];       // diagonal state at the chunk's start
  float2 x_next[kMaxModes];  // ... at its end
  float2 partial[kMaxChunk / kStateTile][kMaxModes];
  float slots[kWarps];

  // P and E as the fp16 operands of the tensor-core products.
  __device__ const __half* pcat() const {
    return reinterpret_cast<const __half*>(&setup.pcat[0][0]);
  }
  __device__ const __half* ecat() const {
    return reinterpret_cast<const __half*>(&setup.ecat[0][0]);
  }
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

  // kf (history + chunk, fp32) or the warps' fp32 tiles, whichever is
  // largest.
  __host__ __device__ static constexpr int ScratchBytes(int n) {
    const int kf = 4 * (kHistory + n / 2);
    const int tiles = kWarps * 2 * 256 * 4;
    return kf > tiles ? kf : tiles;
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
