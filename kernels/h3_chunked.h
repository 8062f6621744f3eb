#ifndef H3_KERNELS_H3_CHUNKED_H_
#define H3_KERNELS_H3_CHUNKED_H_

// The conventions of the chunked H3 prefill
// (kernels/cuda/h3_prefill_chunked*.cu), shared with its host code and with the
// CPU emulation that checks the algorithm
// (kernels/cpu/h3_chunked_emulation_test.cc).
//
// The chunked prefill computes what the FlashConv kernel computes (head_dim 1,
// d_state a multiple of 16 up to 64) without an FFT. The diagonal SSM of H3
// has M = d_state / 2 <= 32 complex modes, so its long convolution is a
// linear recurrence with a small state, and a chunked scan at a granularity
// of 16 tokens costs a few small matrix products per 16 tokens:
//
//   tokens t = 16 g + j of a tile (g < 16 columns, j < 16), u = kbar v;
//   R  = E U                 R[m][g] = sum_i dA^(15-i) dB u[16 g + i]
//   X_{g+1} = dA^16 X_g + R[.][g]       (fp32, one lane per mode)
//   Y  = 2 Re(P X) + T U + D u          P[j][m] = C dA^(j+1),
//                                       T[j][i] = K[j - i] (i <= j),
//                                       K[i] = 2 Re(sum_m C dA^i dB)
//
// with X_g the state before column g. E, P, T, U and X go to tensor cores
// as fp16 scaled into [-1, 1] (E, P, T per channel at load, U and X per
// tile), accumulating in fp32; the scan, the skip term D u, the shift
// convolution and the states stay fp32. A tile holds 256 tokens; after the
// last one of a call a partial column (its length not a multiple of 16)
// ends the state by the plain recurrence, token by token, in fp32.
//
// Shift convolution on tensor cores (the kernel's kShiftMma variant, taken
// on request: H3PrefillPath::kChunkedMma; slower than the direct sums on an
// H200 at every length, docs/h3-chunked.md). The shift
// SSM's kbar[t] = shift_D k[t] + sum_{j < 64} taps[j] k[t - j] is, per
// output column g, sum_{r < 5} A_r K_(g - r): K_c the 16 inputs of column c
// (negative c: the 64 inputs before the tile) and A_r[i][j] = taps[16 r +
// i - j] where 0 <= 16 r + i - j < 64, else 0 (ShiftBlockTap). A_r goes to
// the tensor cores as taps / 2^et in fp16, K as k / 2^ek (2^et > max|taps|
// per channel, 2^ek > max|k| over the tile and its history: powers of two
// keep fp16 inputs exact), the products summed in fp32 and scaled back by
// 2^(ek + et): five 16 x 16 x 16 MMAs a tile instead of 64 fp32 FMAs a
// token.

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/h3.h"
#include "kernels/host_device.h"

namespace h3::kernels::chunked {

constexpr int kColumn = 16;                // tokens per column (MMA size)
constexpr int kColumns = 16;               // columns per tile
constexpr int kTile = kColumn * kColumns;  // tokens per tile
constexpr int kShiftBlocks = 5;            // A_0 .. A_4 (64 taps)
constexpr int kShiftTaps = 64;             // taps the blocks cover

// The exponent e of the power of two that scales x into fp16 for the shift
// MMAs: 2^e > x >= 0 (frexp's exponent); 0 for x = 0.
H3_HOST_DEVICE inline int ScaleExponent(float x) {
  int e = 0;
  frexpf(x, &e);
  return x > 0 ? e : 0;
}

// The tap in row i, column j of A_r, or -1 where A_r is zero.
H3_HOST_DEVICE constexpr int ShiftBlockTap(int r, int i, int j) {
  const int tap = kColumn * r + i - j;
  return tap >= 0 && tap < kShiftTaps ? tap : -1;
}

// ---- The packed-rows kernel's shift convolution (h3_prefill_rows_kernel.cu)

constexpr int kLaneTokens = kTile / 32;  // adjacent tokens a lane sums

// Four floats from p: one 16-byte load on the GPU (p 16-byte aligned).
struct Four {
  float v[4];
};
H3_HOST_DEVICE inline Four LoadFour(const float* p) {
#if defined(__CUDA_ARCH__)
  const float4 f = *reinterpret_cast<const float4*>(p);
  return {{f.x, f.y, f.z, f.w}};
#else
  return {{p[0], p[1], p[2], p[3]}};
#endif
}

// Where the packed-rows kernel keeps input i of its kf array (the
// kShiftTaps inputs before the tile, then the tile's): bit 2 of i flipped
// where bit 5 is set. Aligned fours stay together, and ShiftSums' lanes,
// whose 16-byte window loads are 32 bytes apart, then meet 8 different
// 16-byte bank groups in each quarter of a warp (in order, lanes i and
// i + 4 of a quarter shared one: a 2-way conflict).
H3_HOST_DEVICE constexpr int KfSlot(int i) { return i ^ ((i >> 3) & 4); }

// The shift SSM's kbar for the kLaneTokens adjacent tokens t0 .. t0 + 7 of a
// tile (t0 a multiple of 8): sum[i] = shift_D k[t0 + i] + sum_{j < ns}
// taps[j] k[t0 + i - j], each sum in tap order (as the channel-major kernel
// sums: the same rounding), from kf[KfSlot(kShiftTaps + t)] = k of the
// tile's token t, the kShiftTaps inputs before the tile first. Reads inputs
// and taps four at a time, keeping a sliding window of inputs in registers:
// kf and taps 16-byte aligned, ns a multiple of 4 up to kShiftTaps. kNs,
// when not 0, is ns known at compile time: the loop over the taps is then
// unrolled whole, and the window's moves from one block of taps to the next
// become register names.
template <int kNs = 0>
H3_HOST_DEVICE inline void ShiftSums(const float* kf, const float* taps, int ns,
                                     float shift_d, int t0,
                                     float (&sum)[kLaneTokens]) {
  const int at = kShiftTaps + t0;  // the lane's first token
  float win[kLaneTokens];          // inputs t0 - 4 jb + i
  const Four lo = LoadFour(kf + KfSlot(at)), hi = LoadFour(kf + KfSlot(at + 4));
  H3_UNROLL
  for (int i = 0; i < 4; ++i) {
    win[i] = lo.v[i];
    win[4 + i] = hi.v[i];
  }
  H3_UNROLL
  for (int i = 0; i < kLaneTokens; ++i) sum[i] = shift_d * win[i];
  // Taps 4 jb .. 4 jb + 3.
  auto taps_block = [&](int jb) {
    const Four tap = LoadFour(taps + 4 * jb);
    const Four before = LoadFour(kf + KfSlot(at - 4 * jb - 4));
    // e[q] = input t0 - 4 jb - 4 + q; tap 4 jb + r meets e[4 + i - r].
    float e[kLaneTokens + 4];
    H3_UNROLL
    for (int q = 0; q < 4; ++q) e[q] = before.v[q];
    H3_UNROLL
    for (int i = 0; i < kLaneTokens; ++i) e[4 + i] = win[i];
    H3_UNROLL
    for (int r = 0; r < 4; ++r) {
      H3_UNROLL
      for (int i = 0; i < kLaneTokens; ++i) sum[i] += tap.v[r] * e[4 + i - r];
    }
    H3_UNROLL
    for (int i = 0; i < kLaneTokens; ++i) win[i] = e[i];
  };
  if constexpr (kNs > 0) {
    static_assert(kNs % 4 == 0 && kNs <= kShiftTaps, "whole blocks of taps");
    H3_UNROLL
    for (int jb = 0; jb < kNs / 4; ++jb) taps_block(jb);
  } else {
    for (int jb = 0; jb < ns / 4; ++jb) taps_block(jb);
  }
}

// One channel's T = Toeplitz(K[0 .. 15]) / scale_t in fp16 bits, row j,
// column i (zero above the diagonal), and scale_t, the largest |K[i]|,
// i < 16 (0 when K is zero there). 528 bytes, a multiple of 16, so that the
// kernel copies it with 16-byte loads.
struct alignas(16) ChunkedChannel {
  uint16_t t16[kColumn][kColumn];
  float scale_t;
  float unused[3];
};
static_assert(sizeof(ChunkedChannel) % 16 == 0, "copied with 16-byte loads");

// Every channel's ChunkedChannel: [H] records.
// REQUIRES: w.shape.head_dim == 1; w.dA, w.dB and w.C are host arrays.
std::vector<ChunkedChannel> ChunkedChannels(const H3Weights& w);

}  // namespace h3::kernels::chunked

#endif  // H3_KERNELS_H3_CHUNKED_H_
