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
//     order as the channel-major kernel sums them;
//  2. U = u / max|u| in fp16; R = E U on the tensor cores;
//  3. the scan, lane = mode, the state in registers from tile to tile;
//  4. T U and P X on the tensor cores;
//  5. out = q (2 Re(P X) + T U + D u), written over the staged q;
//  6. the block stores the outputs' rows.
// Only staging and storing need the whole block (three barriers a tile);
// between them each warp works alone. The arithmetic and its order are the
// channel-major kernel's (h3_prefill_chunked_kernel.cu), which
// kernels/cpu/h3_chunked_emulation_test.cc emulates.

#include <cstddef>

#include "kernels/cuda/flashconv_device.cuh"
#include "kernels/cuda/h3_chunked_device.cuh"
#include "kernels/cuda/h3_prefill_rows_kernel.h"
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

// One warp's (channel's) shared memory. WMMA operands start 32-byte
// aligned: every member's size is a multiple of 32 bytes.
struct alignas(128) WarpShared {
  __half pcat[kColumn][kRows];   // P / scale_p: Re, -Im columns
  __half ecat[kRows][kColumn];   // E / scale_e (follows pcat, as in setup)
  __half t16[kColumn][kColumn];  // T / scale_t
  __half xh[kRows][kColumns];    // X_g / x_max: row ModeRow, column g
  __half uh[kTile];              // U: column g holds tokens 16 g ..
  union {                        // the phases of a tile
    float kf[kH + kTile];        // step 1: history, then the tile's k
    float rt[kColumns][kRows];   // steps 2-3: (E U)^T
    struct {
      float yp[kTile];  // steps 4-5: P X, token order
      float yc[kTile];  //            T U
    } y;
  } work;
  float u[kTile];     // v, then u = kbar v
  float taps[kH];     // the shift kernel (zero past N)
  float history[kH];  // the last kH inputs k by position
};
static_assert(offsetof(WarpShared, ecat) == sizeof(WarpShared::pcat),
              "P and E are copied as one block");
static_assert(sizeof(fc::ChannelSetup::pcat) == sizeof(WarpShared::pcat) &&
                  sizeof(fc::ChannelSetup::ecat) == sizeof(WarpShared::ecat),
              "P and E are copied from the channel's setup");
static_assert(sizeof(WarpShared::t16) == 32 * 16, "T: one uint4 a lane");

// The kShiftMma variant's own shared memory, a warp's (kernels/h3_chunked.h,
// "Shift convolution on tensor cores"): A_r, the taps' Toeplitz blocks in
// fp16 / 2^et, and the tile's k after its history in fp16 / 2^ek. The
// products land in WarpShared::work after kf (ShiftProducts).
struct alignas(128) WarpShiftShared {
  __half a[kShiftBlocks][kColumn][kColumn];
  __half kh[kH + kTile];
};
static_assert(sizeof(WarpShared::work) >= sizeof(float) * (kH + 2 * kTile),
              "the shift products fit in work after kf");

// 16-byte vectors in a row of kRowChannels elements of T.
template <typename T>
constexpr int kRowVectors = static_cast<int>(sizeof(T)) * kRowChannels / 16;

// The stage: q, k, v of a tile's rows, [3][kTile][kRowChannels] of T.
template <typename T>
constexpr int kStageBytes = 3 *
                            kTile* kRowChannels* static_cast<int>(sizeof(T));

template <typename T, bool kShiftMma>
constexpr int SharedBytes() {
  return kRowChannels * static_cast<int>(sizeof(WarpShared)) + kStageBytes<T> +
         (kShiftMma ? kRowChannels * static_cast<int>(sizeof(WarpShiftShared))
                    : 0);
}

// Step 0: stage[tensor][t][channel] = q, k, v (tensor 0, 1, 2) of the
// tile's token t and the block's channel, for t < len; zeros past it.
template <typename T>
__device__ void StageRows(const RowsArgs& a, const fc::BlockSegment& seg,
                          int64_t offset, int len, T* stage) {
  constexpr int kV = kRowVectors<T>, kPerTensor = kTile * kV;
  const int64_t column = int64_t{blockIdx.x} * kRowChannels;
  for (int e = threadIdx.x; e < 3 * kPerTensor; e += kRowThreads) {
    const int tensor = e / kPerTensor, t = e / kV % kTile, part = e % kV;
    uint4 x = make_uint4(0u, 0u, 0u, 0u);
    if (t < len) {
      const void* base = tensor == 0 ? a.q : tensor == 1 ? a.k : a.v;
      const T* row = static_cast<const T*>(base) +
                     (seg.offset + offset + t) * a.in_stride + column;
      x = reinterpret_cast<const uint4*>(row)[part];
    }
    reinterpret_cast<uint4*>(stage)[e] = x;
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
  constexpr int kV = kRowVectors<T>, kPerTensor = kTile * kV;
  const int64_t column = int64_t{blockIdx.x} * kRowChannels;
  for (int e = threadIdx.x; e < 3 * kPerTensor; e += kRowThreads) {
    const int tensor = e / kPerTensor, t = e / kV % kTile, part = e % kV;
    if (t >= len) continue;
    const void* base = tensor == 0 ? a.q : tensor == 1 ? a.k : a.v;
    const T* row = static_cast<const T*>(base) +
                   (seg.offset + offset + t) * a.in_stride + column;
    PrefetchL2(reinterpret_cast<const uint4*>(row) + part);
  }
}

// Step 6: the tile's first len rows of out from the staged outputs.
template <typename T>
__device__ void StoreRows(const RowsArgs& a, const fc::BlockSegment& seg,
                          int64_t offset, int len, const T* staged) {
  constexpr int kV = kRowVectors<T>;
  const int64_t column = int64_t{blockIdx.x} * kRowChannels;
  for (int e = threadIdx.x; e < len * kV; e += kRowThreads) {
    const int t = e / kV, part = e % kV;
    T* row = static_cast<T*>(a.out) + (seg.offset + offset + t) * a.out_stride +
             column;
    reinterpret_cast<uint4*>(row)[part] =
        reinterpret_cast<const uint4*>(staged)[e];
  }
}

// The warp's channel c: its tables, taps and history (the ring read in
// position order, as the channel-major kernel's LoadChannel reads it).
__device__ void LoadChannel(const RowsArgs& a, int64_t start, int c,
                            const float* ring, WarpShared& s) {
  const int ns = a.w.shape.d_state, lane = threadIdx.x % 32;
  {
    const uint4* src = reinterpret_cast<const uint4*>(&a.setup[c].pcat[0][0]);
    uint4* dst = reinterpret_cast<uint4*>(&s.pcat[0][0]);
    constexpr int kVectors = (sizeof(s.pcat) + sizeof(s.ecat)) / 16;
    for (int i = lane; i < kVectors; i += 32) dst[i] = src[i];
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

// Where the kShiftMma variant's shift products go: work after kf, token
// order.
__device__ __forceinline__ float* ShiftProducts(WarpShared& s) {
  return s.work.kf + kH + kTile;
}

// The kShiftMma variant's A_r for the warp's channel, from s.taps; returns
// their scale exponent et.
__device__ int LoadShiftBlocks(const WarpShared& s, WarpShiftShared& t) {
  const int lane = threadIdx.x % 32;
  float most = 0.0f;
  for (int j = lane; j < kH; j += 32) most = fmaxf(most, fabsf(s.taps[j]));
  const int et = ScaleExponent(WarpMax(most));
  FillShiftBlocks(s.taps, et, &t.a[0][0][0], lane, 32);
  return et;
}

// The kShiftMma variant's shift convolution of the tile (kf: history and
// tile): ShiftProducts(s)[t] = sum_j taps[j] k[t - j] / 2^(ek + et) by five
// 16 x 16 x 16 MMAs, as the channel-major kernel's ShiftByMma; returns
// 2^(ek + et).
__device__ float ShiftByMma(WarpShared& s, WarpShiftShared& t, int et) {
  const int lane = threadIdx.x % 32;
  constexpr int kAll = kH + kTile;
  float most = 0.0f;
  for (int i = lane; i < kAll; i += 32) most = fmaxf(most, fabsf(s.work.kf[i]));
  const int ek = ScaleExponent(WarpMax(most));
  ScaleToHalf(s.work.kf, kAll, ek, t.kh, lane, 32);
  __syncwarp();
  ShiftMmas(&t.a[0][0][0], t.kh, ShiftProducts(s));
  __syncwarp();
  return ldexpf(1.0f, ek + et);
}

// Step 1 after the shift convolution's sums: u = kbar v for the lane's
// tokens t0 .. t0 + 7 (zero past len) into s.u, U into s.uh, the next
// tile's history into s.history; returns max |u| over the tile (every
// lane).
__device__ float Gate(const float (&sum)[kLaneTokens], int len, WarpShared& s) {
  const int t0 = kLaneTokens * (threadIdx.x % 32);
  float u[kLaneTokens], most = 0.0f;
#pragma unroll
  for (int i = 0; i < kLaneTokens; ++i) {
    u[i] = t0 + i < len ? sum[i] * s.u[t0 + i] : 0.0f;
    most = fmaxf(most, fabsf(u[i]));
  }
  const float u_max = WarpMax(most);
  const float u_inv = u_max > 0 ? 1.0f / u_max : 0.0f;
  float4* u4 = reinterpret_cast<float4*>(s.u + t0);
  u4[0] = make_float4(u[0], u[1], u[2], u[3]);
  u4[1] = make_float4(u[4], u[5], u[6], u[7]);
  *reinterpret_cast<uint4*>(s.uh + t0) =
      make_uint4(HalfPair(u[0] * u_inv, u[1] * u_inv),
                 HalfPair(u[2] * u_inv, u[3] * u_inv),
                 HalfPair(u[4] * u_inv, u[5] * u_inv),
                 HalfPair(u[6] * u_inv, u[7] * u_inv));
  for (int i = threadIdx.x % 32; i < kH; i += 32) {
    s.history[i] = s.work.kf[len + i];
  }
  return u_max;
}

// Step 1: the shift convolution (fp32 FMAs, or kShiftMma's MMAs), then
// Gate; returns max |u|.
template <bool kShiftMma>
__device__ float ShiftAndGate(int ns, int len, float shift_d, int et,
                              WarpShared& s, WarpShiftShared* t) {
  const int t0 = kLaneTokens * (threadIdx.x % 32);
  float sum[kLaneTokens];
  if constexpr (kShiftMma) {
    const float up = ShiftByMma(s, *t, et);
    const float* y = ShiftProducts(s);
#pragma unroll
    for (int i = 0; i < kLaneTokens; ++i) {
      sum[i] = shift_d * s.work.kf[kH + t0 + i];
      sum[i] += up * y[t0 + i];
    }
  } else {
    ShiftSums(s.work.kf, s.taps, ns, shift_d, t0, sum);
  }
  return Gate(sum, len, s);
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
  const float2 state =
      ScanColumns(s.work.rt, m, live, mode.x, mode.dA16, r_scale, xg, &most);
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
  // Only the kShiftMma instances have (and so allocate) it.
  WarpShiftShared* const shift =
      kShiftMma
          ? reinterpret_cast<WarpShiftShared*>(
                smem + kRowChannels * sizeof(WarpShared) + kStageBytes<T>) +
                warp
          : nullptr;
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

  LoadChannel(a, start, c, ring, s);
  int et = 0;  // kShiftMma: the taps' scale exponent
  if constexpr (kShiftMma) {
    __syncwarp();  // s.taps
    et = LoadShiftBlocks(s, *shift);
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
    for (int i = lane; i < kH; i += 32) s.work.kf[i] = s.history[i];
    for (int t = lane; t < kTile; t += 32) {
      s.work.kf[kH + t] = fc::ToFloat(k_staged[t * kRowChannels + warp]);
      s.u[t] = fc::ToFloat(v_staged[t * kRowChannels + warp]);
    }
    __syncwarp();
    const float u_max = ShiftAndGate<kShiftMma>(ns, len, shift_d, et, s, shift);
    __syncwarp();  // kf is read: rt may take its place

    // 2. R = E U, 8 modes an MMA, stored transposed for the scan.
    fc::FragBCol ub;  // (i, g) = uh[16 g + i]
    wmma::load_matrix_sync(ub, s.uh, kColumn);
    for (int group = 0; group < modes / 8; ++group) {
      fc::FragARow e;
      fc::FragAcc r;
      wmma::load_matrix_sync(e, &s.ecat[16 * group][0], kColumn);
      wmma::fill_fragment(r, 0.0f);
      wmma::mma_sync(r, e, ub, r);
      wmma::store_matrix_sync(&s.work.rt[0][16 * group], r, kRows,
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
      // (j, g) -> yc[j + 16 g]: token 16 g + j.
      wmma::store_matrix_sync(s.work.y.yc, y, kColumn, wmma::mem_col_major);
    }
    if (x_max > 0) CarriedMmas(s.pcat, s.xh, modes, s.work.y.yp);
    __syncwarp();

    // 5. The output gate, over the staged q.
    const float p_scale = 2.0f * scale_p * x_max;
    const float t_scale = scale_t * u_max;
    for (int t = lane; t < len; t += 32) {
      const float carried = x_max > 0 ? p_scale * s.work.y.yp[t] : 0.0f;
      const float y = carried + t_scale * s.work.y.yc[t] + skip * s.u[t];
      T& slot = q_staged[t * kRowChannels + warp];
      slot = fc::FromFloat<T>(fc::ToFloat(slot) * y);
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
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           SharedBytes<T, kShiftMma>());
  if (err == cudaSuccess) {
    err = cudaFuncSetAttribute(kernel,
                               cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared);
  }
  return err;
}

template <bool kShiftMma>
int BytesFor(ElementType type) {
  switch (type) {
    case ElementType::kF32:
      return SharedBytes<float, kShiftMma>();
    case ElementType::kF16:
      return SharedBytes<__half, kShiftMma>();
    default:
      return SharedBytes<__nv_bfloat16, kShiftMma>();
  }
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
                               grid, dim3(kRowThreads), SharedBytes<T, true>(),
                               stream, a)
               : LaunchInOrder(LaunchOrder::kAfterPrior, RowsKernel<T, false>,
                               grid, dim3(kRowThreads), SharedBytes<T, false>(),
                               stream, a);
  });
}

int RowsSharedBytes(ElementType type, bool shift_mma) {
  return shift_mma ? BytesFor<true>(type) : BytesFor<false>(type);
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
      if (RowsSharedBytes(type, shift_mma) > *max_shared_bytes) continue;
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
