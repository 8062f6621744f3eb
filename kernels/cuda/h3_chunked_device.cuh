#ifndef H3_KERNELS_CUDA_H3_CHUNKED_DEVICE_CUH_
#define H3_KERNELS_CUDA_H3_CHUNKED_DEVICE_CUH_

// What the chunked H3 prefill's two kernels share
// (h3_prefill_chunked_kernel.cu, channel-major, and
// h3_prefill_rows_kernel.cu, packed rows): the kShiftMma variant's five
// MMAs (kernels/h3_chunked.h, "Shift convolution on tensor cores") and the
// scan (step 3): one lane per mode m, the tile's 16 column states X_g from
// R = E U, their fp16 copy for P X, and the state after a partial last
// column.

#include <cuda_fp16.h>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/flashconv_device.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/h3_chunked.h"

namespace h3::kernels::chunked {

// The shift convolution of a tile on tensor cores, one warp: y (token
// order) = sum_r A_r K_(g - r) for output column g (tokens 16 g ..), K_c
// the k column c (negative: the history), read as a col-major B with ldm
// 16: (j, g) = kh[kHistory - 16 r + 16 g + j]. a: the A_r blocks
// [kShiftBlocks][16][16]; kh: the history and the tile's k in fp16 / 2^ek.
__device__ __forceinline__ void ShiftMmas(const __half* a, const __half* kh,
                                          float* y) {
  namespace fc = flashconv;
  namespace wmma = fc::wmma;
  fc::FragAcc acc;
  wmma::fill_fragment(acc, 0.0f);
#pragma unroll
  for (int r = 0; r < kShiftBlocks; ++r) {
    fc::FragARow ar;
    fc::FragBCol kr;
    wmma::load_matrix_sync(ar, a + r * kColumn * kColumn, kColumn);
    wmma::load_matrix_sync(kr, kh + fc::kHistory - kColumn * r, kColumn);
    wmma::mma_sync(acc, ar, kr, acc);
  }
  wmma::store_matrix_sync(y, acc, kColumn, wmma::mem_col_major);
}

// The carried state's output on tensor cores (step 4), one warp: yp
// (col-major 16 x 16, ldm floats a column: token order for ldm 16) = P X,
// P [16][2 M] (pcat, row j at pcat + j * p_ldm, column ModeRow) and X
// [2 M][16] (xh, the column states) in fp16, summed over the modes' rows 16
// at a time.
__device__ __forceinline__ void CarriedMmas(const __half* pcat, int p_ldm,
                                            const __half (*xh)[kColumns],
                                            int modes, float* yp,
                                            int ldm = kColumn) {
  namespace fc = flashconv;
  namespace wmma = fc::wmma;
  fc::FragAcc y;
  wmma::fill_fragment(y, 0.0f);
  for (int kk = 0; kk < 2 * modes / 16; ++kk) {
    fc::FragARow p;
    fc::FragBRow xb;
    wmma::load_matrix_sync(p, pcat + 16 * kk, p_ldm);
    wmma::load_matrix_sync(xb, &xh[16 * kk][0], kColumns);
    wmma::mma_sync(y, p, xb, y);
  }
  wmma::store_matrix_sync(yp, y, ldm, wmma::mem_col_major);
}

// a and b rounded to fp16, as the bits of a __half2 (a in the low half).
__device__ __forceinline__ unsigned HalfPair(float a, float b) {
  return HalfOps<__half>::PackFloats(a, b);
}

// The largest v over the warp, in every lane.
__device__ __forceinline__ float WarpMax(float v) {
  return WarpAllReduce(v, [](float a, float b) { return fmaxf(a, b); });
}

// The kShiftMma variant's A_r ([kShiftBlocks][16][16] at a): taps / 2^et in
// fp16, A_r[i][j] = taps[16 r + i - j] where that tap is one of the 64
// (ShiftBlockTap), else 0. Elements first, first + stride, ... (a block's
// or a warp's threads).
__device__ __forceinline__ void FillShiftBlocks(const float* taps, int et,
                                                __half* a, int first,
                                                int stride) {
  const float down = ldexpf(1.0f, -et);
  constexpr int kElements = kShiftBlocks * kColumn * kColumn;
  for (int e = first; e < kElements; e += stride) {
    const int tap = ShiftBlockTap(e / (kColumn * kColumn),
                                  e / kColumn % kColumn, e % kColumn);
    a[e] = __float2half_rn(tap >= 0 ? taps[tap] * down : 0.0f);
  }
}

// out[i] = in[i] / 2^e in fp16 for i < count: elements first, first +
// stride, ...
__device__ __forceinline__ void ScaleToHalf(const float* in, int count, int e,
                                            __half* out, int first,
                                            int stride) {
  const float down = ldexpf(1.0f, -e);
  for (int i = first; i < count; i += stride) {
    out[i] = __float2half_rn(in[i] * down);
  }
}

// X_{g+1} = dA^16 X_g + r_scale R[.][g] from `state` (X_0), lane m's mode:
// xg[g] = X_g (the state before column g); returns X_16. rt: (E U)^T,
// rt[g * stride + ModeRow(m, .)]. A lane past the modes (live false) keeps
// zeros. *most: the largest |component| of the lane's X_g.
__device__ __forceinline__ float2 ScanColumns(const float* rt, int stride,
                                              int m, bool live, float2 state,
                                              const float2& dA16, float r_scale,
                                              float2 (&xg)[kColumns],
                                              float* most) {
  namespace fc = flashconv;
  *most = 0.0f;
#pragma unroll
  for (int g = 0; g < kColumns; ++g) {
    xg[g] = state;
    *most = fmaxf(*most, fmaxf(fabsf(state.x), fabsf(state.y)));
    if (live) {
      const float* row = rt + g * stride;
      const float2 r =
          make_float2(row[fc::ModeRow(m, 0)], row[fc::ModeRow(m, 1)]);
      state = fc::CAdd(fc::CMul(dA16, state), fc::CScale(r, r_scale));
    }
  }
  return state;
}

// Lane m's two rows of xh (row ModeRow(m, .), column g: X_g * inv in fp16),
// each 16 halves as two 16-byte stores (a store per element was an 8-way
// bank conflict).
__device__ __forceinline__ void StoreColumnStates(const float2 (&xg)[kColumns],
                                                  float inv, int m,
                                                  __half (*xh)[kColumns]) {
  namespace fc = flashconv;
  static_assert(kColumns == 16, "a row of xh is two uint4");
  unsigned re[kColumns / 2], im[kColumns / 2];  // fp16 pairs (g, g + 1)
#pragma unroll
  for (int g = 0; g < kColumns; g += 2) {
    re[g / 2] = HalfPair(xg[g].x * inv, xg[g + 1].x * inv);
    im[g / 2] = HalfPair(xg[g].y * inv, xg[g + 1].y * inv);
  }
  uint4* re_row = reinterpret_cast<uint4*>(&xh[fc::ModeRow(m, 0)][0]);
  uint4* im_row = reinterpret_cast<uint4*>(&xh[fc::ModeRow(m, 1)][0]);
  re_row[0] = make_uint4(re[0], re[1], re[2], re[3]);
  re_row[1] = make_uint4(re[4], re[5], re[6], re[7]);
  im_row[0] = make_uint4(im[0], im[1], im[2], im[3]);
  im_row[1] = make_uint4(im[4], im[5], im[6], im[7]);
}

// A call's last tile of len < kTile tokens ends by the plain recurrence from
// the state before its first partial column: PartialStart picks that state
// (take it before xg is packed: xg then dies, and its registers with it),
// PartialEnd runs the remaining tokens one by one in fp32 (dA, dB the
// mode's, u the tile's u = kbar v).
__device__ __forceinline__ float2 PartialStart(const float2 (&xg)[kColumns],
                                               int len) {
  const int whole = len / kColumn;
  float2 state = xg[0];
#pragma unroll
  for (int g = 1; g < kColumns; ++g) {
    if (g == whole) state = xg[g];
  }
  return state;
}
__device__ __forceinline__ float2 PartialEnd(float2 state, int len, float2 da,
                                             float2 db, const float* u) {
  namespace fc = flashconv;
  for (int t = kColumn * (len / kColumn); t < len; ++t) {
    state = fc::CAdd(fc::CMul(da, state), fc::CScale(db, u[t]));
  }
  return state;
}

}  // namespace h3::kernels::chunked

#endif  // H3_KERNELS_CUDA_H3_CHUNKED_DEVICE_CUH_
