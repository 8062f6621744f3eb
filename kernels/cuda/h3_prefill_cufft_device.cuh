#ifndef H3_KERNELS_CUDA_H3_PREFILL_CUFFT_DEVICE_CUH_
#define H3_KERNELS_CUDA_H3_PREFILL_CUFFT_DEVICE_CUH_

// Device helpers of the cuFFT prefill kernels (include from .cu files only):
// element loads and stores in fp32 / fp16 / bf16, double-precision complex
// arithmetic for powers of dA, and the tile walk that keeps global accesses
// coalesced in either sequence layout.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/h3_prefill_cufft_kernels.h"

namespace h3::kernels {

// Elements are converted to fp32 on load and rounded to nearest on store.
__device__ inline float LoadElement(const float* p, int64_t i) { return p[i]; }
__device__ inline float LoadElement(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
__device__ inline float LoadElement(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ inline void StoreElement(float* p, int64_t i, float x) { p[i] = x; }
__device__ inline void StoreElement(__half* p, int64_t i, float x) {
  p[i] = __float2half_rn(x);
}
__device__ inline void StoreElement(__nv_bfloat16* p, int64_t i, float x) {
  p[i] = __float2bfloat16_rn(x);
}

// H3Shape's accessors are host functions; these are their device twins.
__device__ inline int DeviceHeads(const H3Shape& s) {
  return s.d_model / s.head_dim;
}
__device__ inline int DeviceModes(const H3Shape& s) { return s.d_state / 2; }
__device__ inline int64_t DeviceKvChannels(const H3Shape& s) {
  return int64_t{s.head_dim} * s.head_dim * DeviceHeads(s);
}

// Offset of element (b, t, c) of the piece in the call's tensors.
__device__ inline int64_t ElementOffset(const CufftPieceParams& p, int64_t b,
                                        int64_t t, int64_t c) {
  return (p.first_sequence + b) * p.layout.batch +
         (p.first_token + t) * p.layout.time + c * p.layout.channel;
}

// Element e of a [channels, time] tile, numbered so that consecutive threads
// touch consecutive addresses of the global tensor: time fastest when a
// channel's tokens are contiguous (or neither stride is 1), else channel
// fastest.
__device__ inline void TileCoords(const CufftPieceParams& p, int e,
                                  int channels, int time, int* ci, int* ti) {
  if (p.layout.time == 1 || p.layout.channel != 1) {
    *ci = e / time;
    *ti = e % time;
  } else {
    *ci = e % channels;
    *ti = e / channels;
  }
}

// A complex array stored as interleaved (re, im) floats, read one float at a
// time: H3Weights and the states promise only float alignment (H3PrefillCuda
// packs the weights back to back, so dA starts at an odd float offset when
// d_model is odd), and an 8-byte float2 load from there faults.
template <typename F>  // float or const float
struct Complexes {
  F* data;
  __device__ float2 operator[](int64_t i) const {
    return make_float2(data[2 * i], data[2 * i + 1]);
  }
  __device__ Complexes operator+(int64_t i) const { return {data + 2 * i}; }
};
__device__ inline void StoreComplex(float* data, int64_t i, float2 value) {
  data[2 * i] = value.x;
  data[2 * i + 1] = value.y;
}

// Complex numbers in double: powers of dA are formed here and rounded once,
// so that dA^n is accurate to fp32 for every n a piece uses (repeated fp32
// multiplication would lose about n ulps).
__device__ inline double2 ToDouble2(float2 a) { return make_double2(a.x, a.y); }
__device__ inline float2 ToFloat2(double2 a) {
  return make_float2(static_cast<float>(a.x), static_cast<float>(a.y));
}
__device__ inline double2 CMul(double2 a, double2 b) {
  return make_double2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ inline double2 CAdd(double2 a, double2 b) {
  return make_double2(a.x + b.x, a.y + b.y);
}
// a^n by binary exponentiation in double. Each squaring doubles the relative
// error carried so far, so the result is within a small multiple of
// n * 2^-53: about 2^-38 for the largest n here (2^14), far below fp32's
// 2^-24.
__device__ inline double2 CPow(double2 a, int64_t n) {
  double2 result = make_double2(1.0, 0.0);
  while (n > 0) {
    if (n & 1) result = CMul(result, a);
    a = CMul(a, a);
    n >>= 1;
  }
  return result;
}

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_H3_PREFILL_CUFFT_DEVICE_CUH_
