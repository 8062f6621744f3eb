#ifndef H3_KERNELS_CUDA_H3_ROWS_SHIFT_MMA_CUH_
#define H3_KERNELS_CUDA_H3_ROWS_SHIFT_MMA_CUH_

// The packed-rows kernel's shift convolution on tensor cores
// (h3_prefill_rows_kernel.cu, its kShiftMma instances), one warp per
// channel, every operand in registers: no shared memory beyond the warp's
// own (kernels/h3_chunked.h, "Shift convolution on tensor cores", has the
// math; this is its transposed form).
//
// For the tile's tokens t = 16 g + j (column g, row j):
//   Y^T[g][j] = sum_r sum_i K[16 (g - r) + i] A_r[i][j],
//   A_r[i][j] = taps[16 r + j - i] (zero off 0 .. 63),
// five k16 steps of an m16n16 product: M = the 16 columns g, N = the 16
// tokens j of a column, K = 16 inputs. The A operand (rows of 16
// consecutive inputs, the history for g < r) comes from shared memory in
// fp16; the B operand (the taps' Toeplitz blocks) is built in registers
// from the taps, since a lane needs only the tap pairs
// (taps[x], taps[x - 1]) at x = 16 r + g - 2 t + {-8, 0, 8} (g = lane / 4,
// t = lane % 4). The accumulators then hold, per lane, four pairs of
// adjacent tokens (MmaPairToken).
//
// Precision: the taps go in as two fp16 parts, hi = fp16(tap / 2^et) and
// lo = fp16(tap / 2^et - hi), and the inputs likewise scaled by 2^(15 -
// ek) (2^ek > max |k| over the history and the tile): three products (hi
// hi, hi lo, lo hi) summed in fp32 carry some 22 bits of each operand, as
// the fp32 FMAs they replace nearly do. 16-bit activations are exact in
// fp16 after the scaling, so their lo parts are zeros and the warp skips
// those products (a vote a tile); only the first tile's history from an
// fp32 ring, or fp32 activations, take them.

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/h3_chunked_device.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/h3_chunked.h"

namespace h3::kernels::chunked {

// The first of the two adjacent tokens of pair p (< 4) that a lane's
// accumulators hold: p & 1 picks the N tile (tokens j + 8), p >> 1 the
// accumulator rows (columns g + 8).
__device__ __forceinline__ int MmaPairToken(int lane, int p) {
  return kColumn * (lane / 4 + 8 * (p >> 1)) + 8 * (p & 1) + 2 * (lane % 4);
}

// Two fp16 parts of a pair of floats, as fragment registers (first value
// in the low half).
struct SplitPair {
  uint32_t hi, lo;
};
__device__ __forceinline__ SplitPair SplitHalves(float a, float b) {
  const __half2 hi = __floats2half2_rn(a, b);
  const float2 back = __half22float2(hi);
  const __half2 lo = __floats2half2_rn(a - back.x, b - back.y);
  return {*reinterpret_cast<const uint32_t*>(&hi),
          *reinterpret_cast<const uint32_t*>(&lo)};
}

// (taps[x], taps[x - 1]) split, zero off 0 .. kShiftTaps - 1.
__device__ __forceinline__ SplitPair TapPair(const float* taps, int x) {
  const float a = static_cast<unsigned>(x) < kShiftTaps ? taps[x] : 0.0f;
  const float b =
      static_cast<unsigned>(x - 1) < kShiftTaps ? taps[x - 1] : 0.0f;
  return SplitHalves(a, b);
}

// e with 2^e > max |x[i]| over i < count (ScaleExponent), the lanes of one
// warp reading x[lane], x[lane + 32], ...
__device__ __forceinline__ int WarpScaleExponent(const float* x, int count) {
  float most = 0.0f;
  for (int i = threadIdx.x % 32; i < count; i += 32) {
    most = fmaxf(most, fabsf(x[i]));
  }
  return ScaleExponent(WarpMax(most));
}

// The taps scaled into (-1, 1) in place (lanes of one warp, then
// __syncwarp); returns et, 2^et > max |tap|.
__device__ __forceinline__ int ScaleTaps(float* taps) {
  const int lane = threadIdx.x % 32;
  const int et = WarpScaleExponent(taps, kShiftTaps);
  const float down = ldexpf(1.0f, -et);
  for (int j = lane; j < kShiftTaps; j += 32) taps[j] *= down;
  __syncwarp();
  return et;
}

// Step 1's shift convolution: kbar[2 p + e] = shift_d k[t] + sum_j taps[j]
// k[t - j] for the lane's tokens t = MmaPairToken(lane, p) + e, from the
// inputs at kf[KfSlot(i)] (input kShiftTaps + t is k of the tile's token t,
// the history first: the packed-rows kernel's layout, kernels/h3_chunked.h)
// and the taps scaled by 2^-et (ScaleTaps). hi and lo: the warp's room for
// the inputs' fp16 parts, kShiftTaps + kTile each, 4-byte aligned.
__device__ __forceinline__ void ShiftByRegisterMma(const float* kf,
                                                   const float* taps, int et,
                                                   float shift_d, __half* hi,
                                                   __half* lo,
                                                   float (&kbar)[8]) {
  constexpr int kAll = kShiftTaps + kTile;
  const int lane = threadIdx.x % 32;
  const int ek = WarpScaleExponent(kf, kAll);
  const float up_k = ldexpf(1.0f, 15 - ek);
  bool has_lo = false;
  for (int i = 2 * lane; i < kAll; i += 64) {
    const float* pair = kf + KfSlot(i);  // i even: KfSlot(i + 1) follows
    const SplitPair k = SplitHalves(pair[0] * up_k, pair[1] * up_k);
    *reinterpret_cast<uint32_t*>(hi + i) = k.hi;
    *reinterpret_cast<uint32_t*>(lo + i) = k.lo;
    has_lo |= k.lo != 0u;
  }
  const bool any_lo = __any_sync(0xffffffffu, has_lo);
  __syncwarp();

  const int g = lane / 4, t = lane % 4;
  float acc[2][4] = {};  // [N tile][accumulator]
  uint32_t own[4];       // r = 0's A fragments: the lane's own tokens' hi
  SplitPair below = TapPair(taps, g - 2 * t - 8);  // x = 16 r + g - 2 t - 8
#pragma unroll
  for (int r = 0; r < kShiftBlocks; ++r) {
    const int x = kColumn * r + g - 2 * t;
    const SplitPair at = TapPair(taps, x), above = TapPair(taps, x + 8);
    // A: rows g and g + 8 of K_(g - r), inputs 2 t .. and 2 t + 8 ..
    const int first = kShiftTaps + kColumn * (g - r) + 2 * t;
    auto a_of = [&](const __half* part, uint32_t(&a)[4]) {
      a[0] = *reinterpret_cast<const uint32_t*>(part + first);
      a[1] = *reinterpret_cast<const uint32_t*>(part + first + 8 * kColumn);
      a[2] = *reinterpret_cast<const uint32_t*>(part + first + 8);
      a[3] = *reinterpret_cast<const uint32_t*>(part + first + 8 * kColumn + 8);
    };
    uint32_t a[4];
    a_of(hi, a);
    if (r == 0) {
      for (int i = 0; i < 4; ++i) own[i] = a[i];
    }
    // B, N tile 0 (j = g): k rows 2 t .. -> x, 2 t + 8 .. -> x - 8;
    // N tile 1 (j = g + 8): x + 8 and x.
    HalfOps<__half>::Mma(acc[0], a, at.hi, below.hi);
    HalfOps<__half>::Mma(acc[1], a, above.hi, at.hi);
    HalfOps<__half>::Mma(acc[0], a, at.lo, below.lo);
    HalfOps<__half>::Mma(acc[1], a, above.lo, at.lo);
    if (any_lo) {
      a_of(lo, a);
      HalfOps<__half>::Mma(acc[0], a, at.hi, below.hi);
      HalfOps<__half>::Mma(acc[1], a, above.hi, at.hi);
    }
    below = above;
  }
  // The skip term's k: without lo parts, hi * 2^(ek - 15) is k exactly,
  // and r = 0's A fragments hold the lane's own tokens (pair p in a[0], a[2],
  // a[1], a[3]); else from kf.
  const float up = ldexpf(1.0f, et + ek - 15), down_k = ldexpf(1.0f, ek - 15);
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    float2 k;
    if (any_lo) {
      const float* pair = kf + KfSlot(kShiftTaps + MmaPairToken(lane, p));
      k = make_float2(pair[0], pair[1]);
    } else {
      const uint32_t bits = own[((p & 1) << 1) | (p >> 1)];
      k = __half22float2(*reinterpret_cast<const __half2*>(&bits));
      k = make_float2(k.x * down_k, k.y * down_k);
    }
    kbar[2 * p] = fmaf(up, acc[p & 1][2 * (p >> 1)], shift_d * k.x);
    kbar[2 * p + 1] = fmaf(up, acc[p & 1][2 * (p >> 1) + 1], shift_d * k.y);
  }
}

}  // namespace h3::kernels::chunked

#endif  // H3_KERNELS_CUDA_H3_ROWS_SHIFT_MMA_CUH_
