#ifndef H3_KERNELS_CUDA_ATTENTION_DEVICE_CUH_
#define H3_KERNELS_CUDA_ATTENTION_DEVICE_CUH_

// Pieces shared by the prefill (attention.cu) and decode (attention_decode.cu)
// attention kernels: argument checks, rotary, the K/V cache write and warp
// reductions.

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cuda/io_element.cuh"

namespace h3::kernels::attention_detail {

// Both kernels keep a row's accumulator in registers, head_dim / 32 values
// per lane (see DimsPerLane); 8 per lane bounds head_dim at 256, above the
// target model's 128.
constexpr int kMaxHeadDim = 256;

inline bool ValidShape(const AttentionShape& s, const float* inv_freq) {
  return s.heads > 0 && s.head_dim > 0 && s.head_dim <= kMaxHeadDim &&
         s.rotary_dim >= 0 && s.rotary_dim % 2 == 0 &&
         s.rotary_dim <= s.head_dim &&
         (s.rotary_dim == 0 || inv_freq != nullptr);
}

// The values of a head vector each lane of a warp holds when lanes split the
// head's dims (lane owns dims lane, lane + 32, ...): a template argument, so
// the accumulators stay in registers. 1, 2, 4 or 8.
inline int DimsPerLane(int head_dim) {
  if (head_dim <= 32) return 1;
  if (head_dim <= 64) return 2;
  if (head_dim <= 128) return 4;
  return 8;
}

// Scale of the scores, 1 / sqrt(head_dim) rounded once to fp32.
inline float ScoreScale(int head_dim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

// Element i of head vector x after ApplyRotary at `position`, computed as the
// CPU twin does (fp32 angle, then cos, sin and the rotation in fp64, rounded
// once), so GPU and CPU caches agree to the last bit almost always. The
// explicit _rn intrinsics stop nvcc from fusing into FMAs, which the CPU
// (x86-64 without -mfma) does not do. Double precision costs little here:
// it runs once per element of each new query and key, not per score.
// x holds fp32, fp16 or bf16 elements (read widened exactly).
template <typename T>
__device__ inline float RotatedElement(const T* x, int i, int rotary_dim,
                                       const float* inv_freq,
                                       int64_t position) {
  if (i >= rotary_dim) return io::ToFloat(x[i]);
  const int half = rotary_dim / 2;
  const int f = i < half ? i : i - half;
  const float angle = __fmul_rn(static_cast<float>(position), inv_freq[f]);
  double s, c;
  sincos(static_cast<double>(angle), &s, &c);
  const double x1 = io::ToFloat(x[f]), x2 = io::ToFloat(x[f + half]);
  return i < half ? static_cast<float>(
                        __dadd_rn(__dmul_rn(x1, c), -__dmul_rn(x2, s)))
                  : static_cast<float>(
                        __dadd_rn(__dmul_rn(x2, c), __dmul_rn(x1, s)));
}

// The KV caches the kernels take: elements of kF32 or of the kernel's I/O
// type (io_type), so that the I/O element type T a kernel is instantiated
// for also covers its cache (one run-time flag: fp32 cache or not).
__host__ __device__ inline bool CacheTypeOk(ElementType cache, ElementType io) {
  return cache == ElementType::kF32 || cache == io;
}

// Element i of a cache array whose elements are fp32 (f32) or T, widened
// exactly.
template <typename T>
__device__ __forceinline__ float CacheLoad(const void* cache, bool f32,
                                           int64_t i) {
  if (f32) return static_cast<const float*>(cache)[i];
  return io::ToFloat(static_cast<const T*>(cache)[i]);
}

// Element i of a cache array of fp32 (f32) or T = x rounded once to it.
template <typename T>
__device__ __forceinline__ void CacheStore(void* cache, bool f32, int64_t i,
                                           float x) {
  if (f32) {
    static_cast<float*>(cache)[i] = x;
  } else {
    static_cast<T*>(cache)[i] = io::FromFloat<T>(x);
  }
}

// The block writes one token's rotated keys and its values into `cache` at
// `position`. qkv: [3, heads, head_dim], that token's Wqkv output (its
// elements T are widened exactly); the cache's elements are fp32 or T
// (CacheTypeOk), each rounded once from the fp32 value.
template <typename T>
__device__ inline void WriteTokenKv(const T* qkv, const AttentionShape& s,
                                    const float* inv_freq, int64_t position,
                                    const KvCache& cache) {
  const int d = s.heads * s.head_dim;
  const T* k_in = qkv + d;
  const T* v_in = qkv + 2 * d;
  const bool f32 = cache.type == ElementType::kF32;
  const int64_t at = position * d;
  for (int e = threadIdx.x; e < d; e += blockDim.x) {
    const int h = e / s.head_dim, i = e % s.head_dim;
    CacheStore<T>(cache.k, f32, at + e,
                  RotatedElement(k_in + h * s.head_dim, i, s.rotary_dim,
                                 inv_freq, position));
    CacheStore<T>(cache.v, f32, at + e, io::ToFloat(v_in[e]));
  }
}

__device__ inline int64_t MinI64(int64_t a, int64_t b) { return a < b ? a : b; }

__device__ inline float WarpSum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;
}

__device__ inline float WarpMax(float x) {
  for (int offset = 16; offset > 0; offset /= 2) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

}  // namespace h3::kernels::attention_detail

#endif  // H3_KERNELS_CUDA_ATTENTION_DEVICE_CUH_
