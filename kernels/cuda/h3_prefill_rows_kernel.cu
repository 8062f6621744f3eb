// The chunked H3 prefill on packed rows (h3_prefill_rows_kernel.h).
//
// Block (x, y): segment y's channels c = 8 x .. 8 x + 7, warp w computing
// channel 8 x + w. Per 256-token tile of the segment:
//  0. the block stages the tile's rows of q, k and v for its 8 channels in
//     shared memory, token-major (16 bytes a row and tensor for 16-bit
//     elements, 32 for fp32), zeros past the segment's end, and sends the
//     next tile's rows towards L2 (PrefetchRows);
//  1. each warp takes its channel's k (after its history) and v to fp32;
//     u = kbar v, kbar = shift_D k + shiftconv(k): a lane 8 adjacent tokens,
//     its 8 sums and a sliding window of inputs in registers, taps in tap
//     order as the channel-major kernel sums them (kShiftMma: on tensor
//     cores, h3_rows_shift_mma.cuh, a lane four pairs of tokens);
//  2. U = u / max|u| in fp16; R = E U on the tensor cores;
//  3. the scan, lane = mode, the state in registers from tile to tile;
//  4. T U and P X on the tensor cores;
//  5. out = q (2 Re(P X) + T U + D u), written over the staged q;
//  6. the block stores the outputs' rows.
// Only staging and storing need the whole block (three barriers a tile);
// between them each warp works alone. The arithmetic and its order are the
// channel-major kernel's (h3_prefill_chunked_kernel.cu), which
// kernels/cpu/h3_chunked_emulation_test.cc emulates.

#include <cstdint>

#include "kernels/cuda/flashconv_device.cuh"
#include "kernels/cuda/h3_chunked_device.cuh"
#include "kernels/cuda/h3_prefill_rows_kernel.h"
#include "kernels/cuda/h3_rows_shift_mma.cuh"
#include "kernels/cuda/io_element.cuh"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/prefetch.cuh"
#include "kernels/cuda/shared_memory.cuh"

namespace h3::kernels::chunked {
namespace {

namespace fc = flashconv;
namespace wmma = fc::wmma;

constexpr int kRows = 2 * fc::kMaxModes;  // rows of E and X (ModeRow order)
constexpr int kH = fc::kHistory;
static_assert(kLaneTokens == 8, "step 1 writes a lane's u as 2 float4");
static_assert(kShiftTaps == kH, "step 1 reads 64 inputs before a token");

// Row strides of the fp32 products that the tensor cores store column-major
// (store_matrix_sync): 4 floats past a multiple of 32 banks, so that the 4
// lanes holding one row's elements of a column pair hit 4 different banks
// (a stride of 64 or 16 floats put them on one: a 4-way conflict).
constexpr int kRtStride = kRows + 4;   // (E U)^T, a column g a row
constexpr int kYStride = kColumn + 4;  // P X and T U, a column g a row
// P's row stride in halves: 16 bytes past a multiple of 128, so that the 8
// rows of each 8 x 8 piece that a fragment load reads fall in 8 different
// 16-byte bank groups (at 64 halves, 128 bytes, all 8 shared one: an
// 8-way conflict).
constexpr int kPStride = kRows + 8;

// One warp's (channel's) shared memory. WMMA operands start 32-byte
// aligned: every member's size is a multiple of 32 bytes.
struct alignas(128) WarpShared {
  __half pcat[kColumn][kPStride];  // P / scale_p: Re, -Im columns
  __half ecat[kRows][kColumn];     // E / scale_e
  __half t16[kColumn][kColumn];    // T / scale_t
  __half xh[kRows][kColumns];      // X_g / x_max: row ModeRow, column g
  union {                          // the phases of a tile
    struct {
      float f[kH + kTile];    // step 1: history, then the tile's k (KfSlot)
      __half hi[kH + kTile];  // kShiftMma: f's fp16 parts
      __half lo[kH + kTile];  //   (ShiftByRegisterMma)
      __half uh[kTile];       // U (Gate): column g holds tokens 16 g ..
    } k;
    float rt[kColumns][kRtStride];  // steps 2-3: (E U)^T
    struct {
      float yp[kColumns][kYStride];  // steps 4-5: P X, column g's tokens
      float yc[kColumns][kYStride];  //            T U
    } y;
  } work;
  float u[kTile];     // v, then u = kbar v
  float taps[kH];     // the shift kernel (zero past N)
  float history[kH];  // the last kH inputs k by position
};
static_assert(sizeof(fc::ChannelSetup::pcat) ==
                      kColumn * kRows * sizeof(__half) &&
                  sizeof(fc::ChannelSetup::ecat) == sizeof(WarpShared::ecat),
              "P and E are copied from the channel's setup");
static_assert(sizeof(WarpShared::t16) == 32 * 16, "T: one uint4 a lane");

// 16-byte vectors in a row of kRowChannels elements of T.
template <typename T>
constexpr int kRowVectors = static_cast<int>(sizeof(T)) * kRowChannels / 16;

// The stage: q, k, v of a tile's rows, [3][kTile][kRowChannels] of T (each
// row's words swizzled: Staged).
template <typename T>
constexpr int kStageBytes = 3 *
                            kTile* kRowChannels* static_cast<int>(sizeof(T));

template <typename T>
constexpr int SharedBytes() {
  return kRowChannels * static_cast<int>(sizeof(WarpShared)) + kStageBytes<T>;
}
// Two blocks an SM on compute capability 9.0 (228 KB, 1 KB of it reserved
// a block) with 16-bit activations.
static_assert(2 * (SharedBytes<__half>() + 1024) <= 228 * 1024,
              "16 warps an SM");

static_assert(kRowThreads == kTile, "thread t stages and stores token t");

// Where token t's rows of the block's channels start: q, k and v (in_stride
// apart) or out (out_stride).
__device__ __forceinline__ int64_t RowAt(const fc::BlockSegment& seg,
                                         int64_t offset, int t,
                                         int64_t stride) {
  return (seg.offset + offset + t) * stride +
         int64_t{blockIdx.x} * kRowChannels;
}

// Token t's row of q, k or v (tensor 0, 1, 2) for the block's channels, at
// `at` = RowAt(.., in_stride).
template <typename T>
__device__ __forceinline__ const uint4* InputRow(const RowsArgs& a, int tensor,
                                                 int64_t at) {
  const void* const base = tensor == 0 ? a.q : tensor == 1 ? a.k : a.v;
  return reinterpret_cast<const uint4*>(static_cast<const T*>(base) + at);
}

// The stage's rows are swizzled: row t's kStageWords 32-bit words are
// rotated by (t / (32 / kStageWords)) % kStageWords, so that a warp reading
// one channel of 32 consecutive rows (steps 1 and 5) meets 32 different
// banks; unrotated, the rows' words for that channel shared 32 /
// kStageWords banks (a 4-way conflict for 16-bit elements, 8-way for fp32).
template <typename T>
constexpr int kStageWords = kRowChannels* static_cast<int>(sizeof(T)) / 4;

// Where word j of row t goes in the row's kStageWords words.
template <typename T>
__device__ __forceinline__ int StagedWord(int t, int j) {
  constexpr int kW = kStageWords<T>;
  return (j + t / (32 / kW)) % kW;
}

// The index in a staged tensor ([kTile][kRowChannels] of T) of token t's
// element for channel c.
template <typename T>
__device__ __forceinline__ int Staged(int t, int c) {
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
  return t * kRowChannels + StagedWord<T>(t, c / kPerWord) * kPerWord +
         c % kPerWord;
}

// Step 0: stage[tensor][t][channel] = q, k, v (tensor 0, 1, 2) of the
// tile's token t and the block's channel, for t < len; zeros past it;
// swizzled (Staged). Thread t stages token t's three rows, 16 bytes at a
// time from global memory, a word at a time into the stage.
template <typename T>
__device__ void StageRows(const RowsArgs& a, const fc::BlockSegment& seg,
                          int64_t offset, int len, T* stage) {
  constexpr int kV = kRowVectors<T>, kW = kStageWords<T>;
  const int t = threadIdx.x;
  const int64_t at = RowAt(seg, offset, t, a.in_stride);
#pragma unroll
  for (int tensor = 0; tensor < 3; ++tensor) {
    const uint4* row = InputRow<T>(a, tensor, at);
    uint32_t words[kW];
#pragma unroll
    for (int part = 0; part < kV; ++part) {
      const uint4 x = t < len ? row[part] : make_uint4(0u, 0u, 0u, 0u);
      words[4 * part] = x.x;
      words[4 * part + 1] = x.y;
      words[4 * part + 2] = x.z;
      words[4 * part + 3] = x.w;
    }
    uint32_t* to = reinterpret_cast<uint32_t*>(stage + (tensor * kTile + t) *
                                                           kRowChannels);
#pragma unroll
    for (int j = 0; j < kW; ++j) to[StagedWord<T>(t, j)] = words[j];
  }
}

// A hint: the next tile's rows of q, k and v (from `offset`, len rows) for
// the block's channels into L2, one prefetch per 16-byte piece (each its
// own line: the rows are in_stride apart), so that its StageRows waits on
// L2 rather than HBM. Sent as a tile's work starts, it has the whole tile
// to land.
template <typename T>
__device__ void PrefetchRows(const RowsArgs& a, const fc::BlockSegment& seg,
                             int64_t offset, int len) {
  constexpr int kV = kRowVectors<T>;
  const int t = threadIdx.x;
  if (t >= len) return;
  const int64_t at = RowAt(seg, offset, t, a.in_stride);
#pragma unroll
  for (int tensor = 0; tensor < 3; ++tensor) {
    const uint4* row = InputRow<T>(a, tensor, at);
#pragma unroll
    for (int part = 0; part < kV; ++part) PrefetchL2(row + part);
  }
}

// Step 6: the tile's first len rows of out from the staged (swizzled)
// outputs, thread t token t's.
template <typename T>
__device__ void StoreRows(const RowsArgs& a, const fc::BlockSegment& seg,
                          int64_t offset, int len, const T* staged) {
  constexpr int kV = kRowVectors<T>;
  const int t = threadIdx.x;
  if (t >= len) return;
  uint4* row = reinterpret_cast<uint4*>(static_cast<T*>(a.out) +
                                        RowAt(seg, offset, t, a.out_stride));
  const uint32_t* from =
      reinterpret_cast<const uint32_t*>(staged + t * kRowChannels);
#pragma unroll
  for (int part = 0; part < kV; ++part) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = from[StagedWord<T>(t, 4 * part + i)];
    row[part] = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// The warp's channel c: its tables, taps and history (the ring read in
// position order, as the channel-major kernel's LoadChannel reads it).
__device__ void LoadChannel(const RowsArgs& a, int64_t start, int c,
                            const float* ring, WarpShared& s) {
  const int ns = a.w.shape.d_state, lane = threadIdx.x % 32;
  {
    // P row by row (padded to kPStride), E as one block.
    constexpr int kRowVectors = kRows * sizeof(__half) / 16;
    constexpr int kPadded = kPStride * sizeof(__half) / 16;
    const uint4* p = reinterpret_cast<const uint4*>(&a.setup[c].pcat[0][0]);
    uint4* p_to = reinterpret_cast<uint4*>(&s.pcat[0][0]);
    for (int i = lane; i < kColumn * kRowVectors; i += 32) {
      p_to[i / kRowVectors * kPadded + i % kRowVectors] = p[i];
    }
    const uint4* e = reinterpret_cast<const uint4*>(&a.setup[c].ecat[0][0]);
    uint4* e_to = reinterpret_cast<uint4*>(&s.ecat[0][0]);
    for (int i = lane; i < static_cast<int>(sizeof(s.ecat) / 16); i += 32) {
      e_to[i] = e[i];
    }
  }
  reinterpret_cast<uint4*>(&s.t16[0][0])[lane] =
      reinterpret_cast<const uint4*>(&a.toeplitz[c].t16[0][0])[lane];
  fc::LoadHistory(ring, a.w.shift_kernel + c * ns, start, ns, lane, 32,
                  s.history, s.taps);
}

// What lane m keeps of its mode m (< modes) from tile to tile; zeros for
// the lanes past the modes.
struct Mode {
  float2 x;     // the diagonal state
  float2 dA16;  // dA^16
  float2 da;    // dA, dB: the partial last column's recurrence
  float2 db;
};

// Step 1 after the shift convolution: u = kbar v for the lane's tokens
// (zero past len) into s.u, U into s.work.k.uh, the next tile's history into
// s.history; returns max |u| over the tile (every lane). The lane's tokens:
// t0 .. t0 + 7 (t0 = 8 lane) after ShiftSums, the pairs
// MmaPairToken(lane, p) + 0, 1 (kbar[2 p ..]) after ShiftByRegisterMma.
template <bool kShiftMma>
__device__ float Gate(const float (&kbar)[kLaneTokens], int len,
                      WarpShared& s) {
  const int lane = threadIdx.x % 32, t0 = kLaneTokens * lane;
  auto token = [&](int i) {
    return kShiftMma ? MmaPairToken(lane, i / 2) + i % 2 : t0 + i;
  };
  // v for all the lane's tokens (zeros past len), in vectors: element
  // loads, each behind its own t < len, were an 8-way bank conflict.
  float v[kLaneTokens];
  if constexpr (kShiftMma) {
#pragma unroll
    for (int p = 0; p < kLaneTokens / 2; ++p) {
      const float2 x = *reinterpret_cast<const float2*>(s.u + token(2 * p));
      v[2 * p] = x.x;
      v[2 * p + 1] = x.y;
    }
  } else {
    const float4* v4 = reinterpret_cast<const float4*>(s.u + t0);
    const float4 lo = v4[0], hi = v4[1];
    v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
    v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
  }
  float u[kLaneTokens], most = 0.0f;
#pragma unroll
  for (int i = 0; i < kLaneTokens; ++i) {
    u[i] = token(i) < len ? kbar[i] * v[i] : 0.0f;
    most = fmaxf(most, fabsf(u[i]));
  }
  const float u_max = WarpMax(most);
  const float u_inv = u_max > 0 ? 1.0f / u_max : 0.0f;
  if constexpr (kShiftMma) {
#pragma unroll
    for (int p = 0; p < kLaneTokens / 2; ++p) {
      const int t = token(2 * p);
      *reinterpret_cast<float2*>(s.u + t) = make_float2(u[2 * p], u[2 * p + 1]);
      *reinterpret_cast<unsigned*>(s.work.k.uh + t) =
          HalfPair(u[2 * p] * u_inv, u[2 * p + 1] * u_inv);
    }
  } else {
    float4* u4 = reinterpret_cast<float4*>(s.u + t0);
    u4[0] = make_float4(u[0], u[1], u[2], u[3]);
    u4[1] = make_float4(u[4], u[5], u[6], u[7]);
    *reinterpret_cast<uint4*>(s.work.k.uh + t0) =
        make_uint4(HalfPair(u[0] * u_inv, u[1] * u_inv),
                   HalfPair(u[2] * u_inv, u[3] * u_inv),
                   HalfPair(u[4] * u_inv, u[5] * u_inv),
                   HalfPair(u[6] * u_inv, u[7] * u_inv));
  }
  for (int i = lane; i < kH; i += 32) {
    s.history[i] = s.work.k.f[KfSlot(len + i)];
  }
  return u_max;
}

// Step 1: the shift convolution (fp32 FMAs, or kShiftMma's MMAs with the
// taps scaled by 2^-et), then Gate; returns max |u|.
template <bool kShiftMma>
__device__ float ShiftAndGate(int ns, int len, float shift_d, int et,
                              WarpShared& s) {
  float kbar[kLaneTokens];
  if constexpr (kShiftMma) {
    ShiftByRegisterMma(s.work.k.f, s.taps, et, shift_d, s.work.k.hi,
                       s.work.k.lo, kbar);
  } else {
    // d_state 64 (every H3 model released) unrolled whole.
    const int t0 = kLaneTokens * (threadIdx.x % 32);
    if (ns == kShiftTaps) {
      ShiftSums<kShiftTaps>(s.work.k.f, s.taps, ns, shift_d, t0, kbar);
    } else {
      ShiftSums(s.work.k.f, s.taps, ns, shift_d, t0, kbar);
    }
  }
  return Gate<kShiftMma>(kbar, len, s);
}

// Step 3, lane = mode: X_g into s.xh (scaled by their largest component,
// returned to every lane) and the state after the tile's len tokens into
// mode.x, as the channel-major kernel's Scan.
__device__ float Scan(int modes, int len, float r_scale, Mode& mode,
                      WarpShared& s) {
  const int m = threadIdx.x % 32;
  const bool live = m < modes;
  float2 xg[kColumns];
  float most = 0.0f;
  const float2 state = ScanColumns(&s.work.rt[0][0], kRtStride, m, live, mode.x,
                                   mode.dA16, r_scale, xg, &most);
  most = WarpMax(most);
  if (!live) return most;
  const float2 partial = len < kTile ? PartialStart(xg, len) : state;
  StoreColumnStates(xg, most > 0 ? 1.0f / most : 0.0f, m, s.xh);
  mode.x =
      len < kTile ? PartialEnd(partial, len, mode.da, mode.db, s.u) : state;
  return most;
}

template <typename T, bool kShiftMma>
__global__ void __launch_bounds__(kRowThreads, 2)
    RowsKernel(const __grid_constant__ RowsArgs a) {
  H3_DYNAMIC_SHARED(unsigned char, smem, 128);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  WarpShared& s = reinterpret_cast<WarpShared*>(smem)[warp];
  T* const stage =
      reinterpret_cast<T*>(smem + kRowChannels * sizeof(WarpShared));
  T* const q_staged = stage;  // the outputs go over it
  const T* const k_staged = stage + kTile * kRowChannels;
  const T* const v_staged = stage + 2 * kTile * kRowChannels;

  const fc::BlockSegment& seg = a.seg[blockIdx.y];
  const int64_t start = seg.start, length = seg.length;
  const int c = blockIdx.x * kRowChannels + warp;
  const int ns = a.w.shape.d_state, modes = ns / 2;
  float* const ring = seg.shift_state + int64_t{c} * ns;
  float* const diag = seg.diag_state + 2 * int64_t{c} * modes;
  const float shift_d = a.w.shift_D[c], skip = a.w.D[c];
  const fc::ChannelSetup& setup = a.setup[c];
  const float scale_p = setup.scale_p, scale_e = setup.scale_e;
  const float scale_t = a.toeplitz[c].scale_t;
  // Steps 1 and 5 walk tokens t = lane + 32 i: their staged elements
  // (Staged: the swizzle repeats every 32 rows) and their P X and T U
  // (column t / 16, row t % 16) move by constant steps.
  constexpr int kStagedStep = 32 * kRowChannels;
  constexpr int kYStep = 32 / kColumn * kYStride;
  const int staged_lane = Staged<T>(lane, warp);
  const int y_lane = lane / kColumn * kYStride + lane % kColumn;

  LoadChannel(a, start, c, ring, s);
  int et = 0;  // kShiftMma: the taps' scale exponent
  if constexpr (kShiftMma) {
    __syncwarp();  // s.taps
    et = ScaleTaps(s.taps);
  }
  Mode mode{};
  if (lane < modes) {
    const int i = c * modes + lane;
    mode.x = make_float2(diag[2 * lane], diag[2 * lane + 1]);
    mode.dA16 = make_float2(setup.dA16[lane][0], setup.dA16[lane][1]);
    mode.da = make_float2(a.w.dA[2 * i], a.w.dA[2 * i + 1]);
    mode.db = make_float2(a.w.dB[2 * i], a.w.dB[2 * i + 1]);
  }
  __syncwarp();

  for (int64_t offset = 0; offset < length; offset += kTile) {
    const int len =
        static_cast<int>(length - offset < kTile ? length - offset : kTile);
    __syncthreads();  // the last tile's outputs are stored
    StageRows(a, seg, offset, len, stage);
    __syncthreads();
    if (offset + kTile < length) {
      PrefetchRows<T>(a, seg, offset + kTile,
                      static_cast<int>(length - offset - kTile < kTile
                                           ? length - offset - kTile
                                           : kTile));
    }

    // 1. The channel's inputs in fp32; u = kbar v; U.
    for (int i = lane; i < kH; i += 32) s.work.k.f[KfSlot(i)] = s.history[i];
    for (int t = lane, at = staged_lane; t < kTile;
         t += 32, at += kStagedStep) {
      s.work.k.f[KfSlot(kH + t)] = fc::ToFloat(k_staged[at]);
      s.u[t] = fc::ToFloat(v_staged[at]);
    }
    __syncwarp();
    const float u_max = ShiftAndGate<kShiftMma>(ns, len, shift_d, et, s);
    __syncwarp();  // kf is read: rt may take its place

    // 2. R = E U, 8 modes an MMA, stored transposed for the scan (over
    // uh: U stays in ub, for T U too).
    fc::FragBCol ub;  // (i, g) = uh[16 g + i]
    wmma::load_matrix_sync(ub, s.work.k.uh, kColumn);
    __syncwarp();
    for (int group = 0; group < modes / 8; ++group) {
      fc::FragARow e;
      fc::FragAcc r;
      wmma::load_matrix_sync(e, &s.ecat[16 * group][0], kColumn);
      wmma::fill_fragment(r, 0.0f);
      wmma::mma_sync(r, e, ub, r);
      wmma::store_matrix_sync(&s.work.rt[0][16 * group], r, kRtStride,
                              wmma::mem_col_major);
    }
    __syncwarp();

    // 3. The scan.
    const float x_max = Scan(modes, len, u_max * scale_e, mode, s);
    __syncwarp();  // rt is read: yp and yc may take its place

    // 4. T U and P X.
    {
      fc::FragARow tf;
      fc::FragAcc y;
      wmma::load_matrix_sync(tf, &s.t16[0][0], kColumn);
      wmma::fill_fragment(y, 0.0f);
      wmma::mma_sync(y, tf, ub, y);
      // (j, g) -> yc[g][j]: token 16 g + j.
      wmma::store_matrix_sync(&s.work.y.yc[0][0], y, kYStride,
                              wmma::mem_col_major);
    }
    if (x_max > 0) {
      CarriedMmas(&s.pcat[0][0], kPStride, s.xh, modes, &s.work.y.yp[0][0],
                  kYStride);
    }
    __syncwarp();

    // 5. The output gate, over the staged q.
    const float p_scale = 2.0f * scale_p * x_max;
    const float t_scale = scale_t * u_max;
    const float* const yp = &s.work.y.yp[0][0];
    const float* const yc = &s.work.y.yc[0][0];
    for (int t = lane, at = staged_lane, y_at = y_lane; t < len;
         t += 32, at += kStagedStep, y_at += kYStep) {
      const float carried = x_max > 0 ? p_scale * yp[y_at] : 0.0f;
      const float y = carried + t_scale * yc[y_at] + skip * s.u[t];
      q_staged[at] = fc::FromFloat<T>(fc::ToFloat(q_staged[at]) * y);
    }
    __syncthreads();
    StoreRows(a, seg, offset, len, q_staged);
  }

  // The end states: the diagonal state, and the ring (read in LoadChannel).
  if (lane < modes) {
    diag[2 * lane] = mode.x.x;
    diag[2 * lane + 1] = mode.x.y;
  }
  fc::WriteRing(s.history, start, length, ns, lane, 32, ring);
}

template <typename T, bool kShiftMma>
cudaError_t SetUp() {
  const void* kernel = reinterpret_cast<const void*>(&RowsKernel<T, kShiftMma>);
  cudaError_t err = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SharedBytes<T>());
  if (err == cudaSuccess) {
    err = cudaFuncSetAttribute(kernel,
                               cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared);
  }
  return err;
}

}  // namespace

cudaError_t LaunchRows(ElementType type, bool shift_mma, const RowsArgs& a,
                       unsigned segments, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.w.shape.d_model / kRowChannels),
                  segments);
  return io::DispatchIo(type, [&](auto element) {
    using T = decltype(element);
    return shift_mma
               ? LaunchInOrder(LaunchOrder::kAfterPrior, RowsKernel<T, true>,
                               grid, dim3(kRowThreads), SharedBytes<T>(),
                               stream, a)
               : LaunchInOrder(LaunchOrder::kAfterPrior, RowsKernel<T, false>,
                               grid, dim3(kRowThreads), SharedBytes<T>(),
                               stream, a);
  });
}

int RowsSharedBytes(ElementType type) {
  switch (type) {
    case ElementType::kF32:
      return SharedBytes<float>();
    case ElementType::kF16:
      return SharedBytes<__half>();
    default:
      return SharedBytes<__nv_bfloat16>();
  }
}

cudaError_t RowsKernelSetUp(int* max_shared_bytes) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(
        max_shared_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (err != cudaSuccess) return err;
  // Every instance fits on 8.0 (A100: 163 KB) and 9.x; on 8.6 and 8.9
  // (99 KB) none does, and TakesRows turns the calls away.
  for (const bool shift_mma : {false, true}) {
    for (const ElementType type :
         {ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
      if (RowsSharedBytes(type) > *max_shared_bytes) continue;
      err = io::DispatchIo(type, [shift_mma](auto element) {
        using T = decltype(element);
        return shift_mma ? SetUp<T, true>() : SetUp<T, false>();
      });
      if (err != cudaSuccess) return err;
    }
  }
  return cudaSuccess;
}

}  // namespace h3::kernels::chunked
