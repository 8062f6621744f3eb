// The chunked H3 prefill (kernels/h3_chunked.h) for head_dim 1.
//
// One thread block of kThreads owns one (segment, channel): blockIdx.x picks
// the segment from the launch's table, blockIdx.y the channel. It copies the
// channel's tables (P, E, dA^16, T; computed at load) into shared memory
// and walks the segment in tiles of kTile = 256 tokens, the diagonal state
// and the shift convolution's history staying on chip between tiles. Per
// tile:
//  1. u = kbar v, kbar = shiftconv(k) + shift_D k: fp32, direct, each thread
//     two adjacent tokens (one 8-byte read of k per two taps for both); or,
//     in the kShiftMma variant (kernels/h3_chunked.h, "Shift convolution on
//     tensor cores"), five 16 x 16 x 16 MMAs of the taps' Toeplitz blocks
//     against the tile's and the history's k in fp16, scaled by powers of 2.
//  2. U = u / max|u| in fp16, 16 columns of 16 tokens. R = E U (one 16 x 16
//     x 16 MMA per group of 8 modes) and T U (one MMA), fp32 accumulation.
//  3. The scan, one lane per mode on warp 0: X_{g+1} = dA^16 X_g + R[.][g]
//     in fp32, keeping every X_g; the state after the tile (for a call's
//     last, partial tile: after its last whole column, then the remaining
//     tokens one by one in fp32).
//  4. P X (X_g / max|X| in fp16): 2 M / 16 MMAs on warp 0.
//  5. out = q (2 Re(P X) + T U + D u), the scales put back in fp32.
// kernels/cpu/h3_chunked_emulation_test.cc runs the same steps on the CPU.

#include "kernels/cuda/flashconv_device.cuh"
#include "kernels/cuda/h3_chunked_device.cuh"
#include "kernels/cuda/h3_prefill_chunked_kernel.h"
#include "kernels/cuda/io_element.cuh"
#include "kernels/cuda/launch_order.cuh"

namespace h3::kernels::chunked {
namespace {

namespace fc = flashconv;
namespace wmma = fc::wmma;

constexpr int kWarps = kThreads / 32;
constexpr int kRows = 2 * fc::kMaxModes;  // rows of E and X (ModeRow order)
static_assert(kThreads * 2 == kTile, "two tokens a thread in step 1");
static_assert(kShiftTaps == fc::kHistory, "A_r reads s.taps");

// Shared memory of a block. The MMA operands first: each starts 32-byte
// aligned, as WMMA loads and stores require.
struct alignas(128) Shared {
  __half pcat[kColumn][kRows];     // P / scale_p: Re, -Im columns
  __half ecat[kRows][kColumn];     // E / scale_e (follows pcat, as in setup)
  __half t16[kColumn][kColumn];    // T / scale_t
  __half uh[kTile];                // U: column g holds tokens 16 g ..
  __half xh[kRows][kColumns];      // X_g / x_max: row ModeRow, column g
  float rt[kColumns][kRows];       // (E U)^T: column g's row, then ModeRow
  float yp[kTile];                 // P X, token order
  float yc[kTile];                 // T U, token order
  float kf[fc::kHistory + kTile];  // kf[kHistory + t] = k of the tile's t
  float u[kTile];
  float taps[fc::kHistory];     // the shift kernel (zero past N)
  float history[fc::kHistory];  // the last kHistory inputs k by position
  float2 x[fc::kMaxModes];      // the diagonal state before the tile
  float2 dA16[fc::kMaxModes];
  float slots[kWarps];
  float scale_p, scale_e, scale_t, x_max;
};
static_assert(sizeof(fc::ChannelSetup::pcat) == sizeof(Shared::pcat) &&
                  sizeof(fc::ChannelSetup::ecat) == sizeof(Shared::ecat),
              "P and E are copied as one block");

// The kShiftMma variant's shared memory (kernels/h3_chunked.h): A_r, the
// taps' Toeplitz blocks A_r[i][j] = taps[16 r + i - j] / 2^et (zero outside
// taps 0..kHistory-1), the tile's k and its history in fp16 / 2^ek, and the
// MMA's output in token order.
struct alignas(128) ShiftShared {
  __half a[kShiftBlocks][kColumn][kColumn];
  __half kh[fc::kHistory + kTile];
  float y[kTile];
  int et;  // the taps' scale exponent
};

// The channel's A_r from s.taps (loaded), and its scale exponent.
__device__ void LoadShiftBlocks(Shared& s, ShiftShared& t) {
  const int tid = threadIdx.x;
  float most = 0.0f;
  for (int j = tid; j < fc::kHistory; j += kThreads) {
    most = fmaxf(most, fabsf(s.taps[j]));
  }
  const int et = ScaleExponent(fc::BlockMax<kWarps>(most, s.slots));
  FillShiftBlocks(s.taps, et, &t.a[0][0][0], tid, kThreads);
  if (tid == 0) t.et = et;
  __syncthreads();
}

// The shift convolution of the tile's 256 tokens on tensor cores, from
// s.kf (history and tile, fp32): t.y[t] = sum_j taps[j] k[t - j] /
// 2^(ek + et); returns 2^(ek + et).
__device__ float ShiftByMma(Shared& s, ShiftShared& t) {
  const int tid = threadIdx.x, warp = tid / 32;
  constexpr int kAll = fc::kHistory + kTile;
  float most = 0.0f;
  for (int i = tid; i < kAll; i += kThreads) most = fmaxf(most, fabsf(s.kf[i]));
  const int ek = ScaleExponent(fc::BlockMax<kWarps>(most, s.slots));
  ScaleToHalf(s.kf, kAll, ek, t.kh, tid, kThreads);
  __syncthreads();
  if (warp == 0) ShiftMmas(&t.a[0][0][0], t.kh, t.y);
  __syncthreads();
  return ldexpf(1.0f, ek + t.et);
}

// The channel's tables, taps, history (the ring read in position order:
// history[kHistory - m] = k at position start - m, zero before position 0
// and past the ring) and diagonal state.
__device__ void LoadChannel(const ChunkedArgs& a, int64_t start, int c,
                            const float* ring, const float* diag, Shared& s) {
  const int ns = a.w.shape.d_state, modes = ns / 2, tid = threadIdx.x;
  const fc::ChannelSetup& setup = a.setup[c];
  const ChunkedChannel& toeplitz = a.toeplitz[c];
  {
    const uint4* src = reinterpret_cast<const uint4*>(&setup.pcat[0][0]);
    uint4* dst = reinterpret_cast<uint4*>(&s.pcat[0][0]);
    constexpr int kVectors = (sizeof(s.pcat) + sizeof(s.ecat)) / 16;
    for (int i = tid; i < kVectors; i += kThreads) dst[i] = src[i];
  }
  {
    const uint4* src = reinterpret_cast<const uint4*>(&toeplitz.t16[0][0]);
    uint4* dst = reinterpret_cast<uint4*>(&s.t16[0][0]);
    for (int i = tid; i < static_cast<int>(sizeof(s.t16) / 16); i += kThreads)
      dst[i] = src[i];
  }
  fc::LoadHistory(ring, a.w.shift_kernel + c * ns, start, ns, tid, kThreads,
                  s.history, s.taps);
  if (tid < modes) {
    s.dA16[tid] = make_float2(setup.dA16[tid][0], setup.dA16[tid][1]);
    s.x[tid] = make_float2(diag[2 * tid], diag[2 * tid + 1]);
  }
  if (tid == 0) {
    s.scale_p = setup.scale_p;
    s.scale_e = setup.scale_e;
    s.scale_t = toeplitz.scale_t;
  }
  __syncthreads();
}

// Step 3 on warp 0 (lane = mode): X_g into s.xh (scaled by their largest
// component, which goes to s.x_max) and the state after the tile's `len`
// tokens into s.x.
__device__ void Scan(const ChunkedArgs& a, int c, int len, float u_max,
                     Shared& s) {
  const int modes = a.w.shape.d_state / 2, m = threadIdx.x % 32;
  const bool live = m < modes;
  float2 xg[kColumns];
  float most = 0.0f;
  // A lane past the modes reads an unused s.dA16 entry (it holds
  // kMaxModes) but keeps its zero state.
  float2 state = ScanColumns(&s.rt[0][0], kRows, m, live,
                             live ? s.x[m] : make_float2(0.0f, 0.0f), s.dA16[m],
                             u_max * s.scale_e, xg, &most);
  most = WarpMax(most);
  if (!live) return;
  if (len < kTile) state = PartialStart(xg, len);
  StoreColumnStates(xg, most > 0 ? 1.0f / most : 0.0f, m, s.xh);
  if (len < kTile) {  // the call's last tile: the remaining tokens
    const int i = c * modes + m;
    state =
        PartialEnd(state, len, make_float2(a.w.dA[2 * i], a.w.dA[2 * i + 1]),
                   make_float2(a.w.dB[2 * i], a.w.dB[2 * i + 1]), s.u);
  }
  s.x[m] = state;
  if (m == 0) s.x_max = most;
}

template <typename T, bool kShiftMma>
__global__ void __launch_bounds__(kThreads)
    ChunkedPrefillKernel(const __grid_constant__ ChunkedArgs a) {
  __shared__ Shared s;
  // Only the kShiftMma instances use (and so allocate) it.
  __shared__ ShiftShared shift;
  const fc::BlockSegment& seg = a.seg[blockIdx.x];
  const int64_t start = seg.start, length = seg.length;
  const int c = blockIdx.y, tid = threadIdx.x, warp = tid / 32;
  const int ns = a.w.shape.d_state, modes = ns / 2;
  const auto [q, k, v, out, ring, diag, shift_d, skip] =
      fc::ChannelOf<T>(a, seg, c);

  LoadChannel(a, start, c, ring, diag, s);
  if constexpr (kShiftMma) LoadShiftBlocks(s, shift);
  constexpr int kH = fc::kHistory;
  for (int64_t offset = 0; offset < length; offset += kTile) {
    const int len =
        static_cast<int>(length - offset < kTile ? length - offset : kTile);
    // 1. k with its history; u = kbar v for tokens t0 and t0 + 1.
    fc::StageInputs(s.history, k, offset, len, kTile, tid, kThreads, s.kf);
    __syncthreads();
    // Pairs of inputs and of taps as float2 (kH, t0 and j even): one
    // 8-byte load serves two taps of both tokens; 4-byte loads at stride 2
    // were a 2-way bank conflict. Sums in tap order, as before.
    const int t0 = 2 * tid;
    const float2* kf2 = reinterpret_cast<const float2*>(s.kf);
    float2 pair = kf2[(kH + t0) / 2];  // inputs t0 - j, t0 - j + 1
    float sum0 = shift_d * pair.x, sum1 = shift_d * pair.y;
    if constexpr (kShiftMma) {
      const float up = ShiftByMma(s, shift);
      sum0 += up * shift.y[t0];
      sum1 += up * shift.y[t0 + 1];
    } else {
      const float2* taps2 = reinterpret_cast<const float2*>(s.taps);
      for (int j = 0; j < ns; j += 2) {
        const float2 tap = taps2[j / 2];                   // taps j, j + 1
        const float2 before = kf2[(kH + t0 - j) / 2 - 1];  // t0 - j - 2, - 1
        sum0 += tap.x * pair.x;
        sum1 += tap.x * pair.y;
        sum0 += tap.y * before.y;
        sum1 += tap.y * pair.x;
        pair = before;
      }
    }
    const float u0 = t0 < len ? sum0 * fc::ToFloat(v[offset + t0]) : 0.0f;
    const float u1 =
        t0 + 1 < len ? sum1 * fc::ToFloat(v[offset + t0 + 1]) : 0.0f;
    s.u[t0] = u0;
    s.u[t0 + 1] = u1;
    const float u_max =
        fc::BlockMax<kWarps>(fmaxf(fabsf(u0), fabsf(u1)), s.slots);
    for (int i = tid; i < kH; i += kThreads) s.history[i] = s.kf[len + i];
    const float u_inv = u_max > 0 ? 1.0f / u_max : 0.0f;
    s.uh[t0] = __float2half_rn(u0 * u_inv);
    s.uh[t0 + 1] = __float2half_rn(u1 * u_inv);
    __syncthreads();

    // 2. R = E U (warp g: modes 8 g .. 8 g + 7) and T U (the last warp).
    if (warp < modes / 8 || warp == kWarps - 1) {
      fc::FragBCol ub;  // (i, g) = uh[16 g + i]
      wmma::load_matrix_sync(ub, s.uh, kColumn);
      if (warp < modes / 8) {
        fc::FragARow e;
        fc::FragAcc r;
        wmma::load_matrix_sync(e, &s.ecat[16 * warp][0], kColumn);
        wmma::fill_fragment(r, 0.0f);
        wmma::mma_sync(r, e, ub, r);
        // Transposed, so that the scan's lanes (modes) read along a row.
        wmma::store_matrix_sync(&s.rt[0][16 * warp], r, kRows,
                                wmma::mem_col_major);
      }
      if (warp == kWarps - 1) {
        fc::FragARow tf;
        fc::FragAcc y;
        wmma::load_matrix_sync(tf, &s.t16[0][0], kColumn);
        wmma::fill_fragment(y, 0.0f);
        wmma::mma_sync(y, tf, ub, y);
        // (j, g) -> yc[j + 16 g]: token 16 g + j.
        wmma::store_matrix_sync(s.yc, y, kColumn, wmma::mem_col_major);
      }
    }
    __syncthreads();

    // 3. The scan; 4. P X.
    if (warp == 0) Scan(a, c, len, u_max, s);
    __syncthreads();
    const float x_max = s.x_max;
    if (warp == 0 && x_max > 0)
      CarriedMmas(&s.pcat[0][0], kRows, s.xh, modes, s.yp);
    __syncthreads();

    // 5. The output gate.
    const float p_scale = 2.0f * s.scale_p * x_max;
    const float t_scale = s.scale_t * u_max;
    for (int t = tid; t < len; t += kThreads) {
      const float carried = x_max > 0 ? p_scale * s.yp[t] : 0.0f;
      const float y = carried + t_scale * s.yc[t] + skip * s.u[t];
      out[offset + t] = fc::FromFloat<T>(fc::ToFloat(q[offset + t]) * y);
    }
    __syncthreads();  // the next tile overwrites shared memory
  }

  // The end states: the diagonal state, and the ring (this block read it
  // in LoadChannel).
  if (tid < modes) {
    diag[2 * tid] = s.x[tid].x;
    diag[2 * tid + 1] = s.x[tid].y;
  }
  fc::WriteRing(s.history, start, length, ns, tid, kThreads, ring);
}

}  // namespace

cudaError_t LaunchChunkedPrefill(ElementType type, bool shift_mma,
                                 const ChunkedArgs& a, unsigned segments,
                                 cudaStream_t stream) {
  const dim3 grid(segments, static_cast<unsigned>(a.w.shape.d_model));
  return io::DispatchIo(type, [&](auto element) {
    using T = decltype(element);
    return shift_mma ? LaunchInOrder(LaunchOrder::kAfterPrior,
                                     ChunkedPrefillKernel<T, true>, grid,
                                     dim3(kThreads), 0, stream, a)
                     : LaunchInOrder(LaunchOrder::kAfterPrior,
                                     ChunkedPrefillKernel<T, false>, grid,
                                     dim3(kThreads), 0, stream, a);
  });
}

}  // namespace h3::kernels::chunked
