#ifndef H3_KERNELS_CUDA_STREAM_GEMM_DEVICE_CUH_
#define H3_KERNELS_CUDA_STREAM_GEMM_DEVICE_CUH_

// What the decode product's kernels share (stream_gemm.cu: StreamGemmCuda;
// stream_gemm_norm.cu: AddNormStreamGemmCuda): the loads, the block's main
// loop over k and its epilogue (kernels/stream_gemm.h gives the order of
// every sum). Internal to them.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/device_major.h"
#include "kernels/cuda/io_element.cuh"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/skinny_gemm.h"
#include "kernels/stream_gemm.h"

namespace h3::kernels::stream_gemm {

constexpr int kThreads = kStreamWarps * 32;

// The 8 elements [e, e + 8) of a 16-bit row as 4 fragment registers,
// streamed past L1.
template <typename T>
__device__ __forceinline__ uint4 LoadStreamed(const T* row, int64_t e) {
  return __ldcs(reinterpret_cast<const uint4*>(row + e));
}

// x through L1 (.ca, where the split kernel's warps share it), not the
// read-only path (.nc): with LaunchOrder::kOverlapPrior the kernel is
// alive while the kernel before writes x, and .nc is defined only for data
// read-only for the reader's whole life; an SM may hold lines of x that an
// earlier kernel read before this one's wait.
template <typename T>
__device__ __forceinline__ uint4 LoadX(const T* row, int64_t e) {
  return __ldca(reinterpret_cast<const uint4*>(row + e));
}

// fp32 x: 8 values rounded to T's type, packed as LoadX packs 16-bit ones.
template <typename T>
__device__ __forceinline__ uint4 LoadX(const float* row, int64_t e) {
  const float4 a = __ldca(reinterpret_cast<const float4*>(row + e));
  const float4 b = __ldca(reinterpret_cast<const float4*>(row + e + 4));
  return make_uint4(
      HalfOps<T>::PackFloats(a.x, a.y), HalfOps<T>::PackFloats(a.z, a.w),
      HalfOps<T>::PackFloats(b.x, b.y), HalfOps<T>::PackFloats(b.z, b.w));
}

// The current device's limits for StreamStagePlanFor.
inline cudaError_t CurrentLimits(StreamDeviceLimits* limits) {
  int mps = 0, sm = 0, block = 0;
  cudaError_t err = CurrentDeviceMultiprocessors(&mps);
  if (err == cudaSuccess) {
    err =
        CachedDeviceAttribute<cudaDevAttrMaxSharedMemoryPerMultiprocessor>(&sm);
  }
  if (err == cudaSuccess) {
    err =
        CachedDeviceAttribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(&block);
  }
  if (err != cudaSuccess) return err;
  *limits = {.multiprocessors = mps, .sm_bytes = sm, .block_bytes = block};
  return cudaSuccess;
}

// Above the 48 KiB every kernel gets, dynamic shared memory needs an
// opt-in: a host-side attribute, not a stream operation (so it may be set
// during graph capture), set to the most the device allows next to the
// kernel's static shared memory (the opt-in limit covers both), so that
// any later plan fits too. cudaErrorInvalidValue when `bytes` does not.
template <auto kKernel>
cudaError_t AllowDynamicShared(int64_t bytes,
                               const StreamDeviceLimits& limits) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  const void* const kernel = reinterpret_cast<const void*>(kKernel);
  static std::atomic<int64_t> static_bytes{-1};  // the kernel's, once known
  int64_t own = static_bytes.load(std::memory_order_relaxed);
  if (own < 0) {
    cudaFuncAttributes attributes{};
    if (const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel);
        err != cudaSuccess) {
      return err;
    }
    own = static_cast<int64_t>(attributes.sharedSizeBytes);
    static_bytes.store(own, std::memory_order_relaxed);
  }
  const int64_t most = limits.block_bytes - own;
  if (bytes > most) return cudaErrorInvalidValue;
  return cudaFuncSetAttribute(kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(most));
}

// x_row[r]: the x row lane group g takes in row tile r (row 8 r + g), or
// null past the rows (its values count as 0).
template <typename X, int kTiles>
__device__ __forceinline__ void XRows(const StreamGemmParams& p, int g,
                                      const X* (&x_row)[kTiles]) {
  const X* x = static_cast<const X*>(p.x);
#pragma unroll
  for (int r = 0; r < kTiles; ++r) {
    const int64_t row = kStreamRowTile * r + g;
    x_row[r] = row < p.rows ? x + row * p.k : nullptr;
  }
}

__device__ __forceinline__ uint32_t Word(const uint4& v, int q) {
  return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
}

// The split kernels' loads of W into registers (stream_split_gemm.cu,
// stream_split_shared_x.cu): a tile's W rows g and g + 8 (w_row[h], null
// past n) at step s for lane t: wv[h][v] = elements 64 s + 16 t + 8 v ..
// + 7 (StreamElement's), zeros past k, past n or where the step is not
// `live`. k % 8 == 0: a vector is wholly inside k or wholly past it.
template <typename T>
__device__ __forceinline__ void LoadWStep(const StreamGemmParams& p,
                                          const T* const (&w_row)[2], int64_t s,
                                          bool live, int t, uint4 (&wv)[2][2]) {
#pragma unroll
  for (int v = 0; v < 2; ++v) {
    const int64_t e = s * kStreamStep + 16 * t + 8 * v;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      wv[h][v] = live && e < p.k && w_row[h] != nullptr
                     ? LoadStreamed(w_row[h], e)
                     : make_uint4(0, 0, 0, 0);
    }
  }
}

// StreamGemm's: a lane's 4 vectors of a step of W in a warp's stage: vector (h,
// v) at stage[(2 h + v) * 32 + lane], so a quarter warp's 16-byte accesses
// cover 128 contiguous bytes.
constexpr int kStageVectors = 4 * 32;
static_assert(kStreamStageBytes == kStreamWarps * kStageVectors * 16);

// Whether lane t's vector v of W row w_row[h] at step s holds elements of
// W: vector e = 64 s + 16 t + 8 v .. + 7 is inside k (k % 8 == 0: wholly
// inside or wholly past) and the row inside n. Else its values count as 0.
__device__ __forceinline__ bool WVectorLive(const StreamGemmParams& p,
                                            const void* w_row, int64_t s, int t,
                                            int v) {
  return w_row != nullptr && s * kStreamStep + 16 * t + 8 * v < p.k;
}

// Lane t's copies of step s of its tile's W rows g and g + 8 (w_row[h],
// null past n) into `stage` (the lane's first vector of a warp's stage),
// streamed past L1.
template <typename T>
__device__ __forceinline__ void CopyWStep(const StreamGemmParams& p,
                                          const T* const (&w_row)[2], int64_t s,
                                          int t, uint4* stage) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      if (WVectorLive(p, w_row[h], s, t, v)) {
        CopyAsync<16>(stage + (2 * h + v) * 32,
                      w_row[h] + s * kStreamStep + 16 * t + 8 * v);
      }
    }
  }
}

// What CopyWStep copied, once its group has landed: wv[h][v] = elements
// 64 s + 16 t + 8 v .. + 7 of row w_row[h] (StreamElement's), zeros where
// no copy was made.
__device__ __forceinline__ void ReadWStep(const StreamGemmParams& p,
                                          const void* const (&w_row)[2],
                                          int64_t s, int t, const uint4* stage,
                                          uint4 (&wv)[2][2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      wv[h][v] = WVectorLive(p, w_row[h], s, t, v) ? stage[(2 * h + v) * 32]
                                                   : make_uint4(0, 0, 0, 0);
    }
  }
}

// MMA j's A fragment from a tile's step of W (wv as LoadWStep or ReadWStep
// leaves it): StreamElement(t, j, half) is vector j / 2, word 2 (j % 2) + half.
__device__ __forceinline__ void WFragment(const uint4 (&wv)[2][2], int j,
                                          uint32_t (&a)[4]) {
  const int v = j / 2, q = 2 * (j % 2);
  a[0] = Word(wv[0][v], q);
  a[1] = Word(wv[1][v], q);
  a[2] = Word(wv[0][v], q + 1);
  a[3] = Word(wv[1][v], q + 1);
}

// One step's four MMAs (kernels/stream_gemm.h) for kW tiles of 16 W rows:
// wv[w][h][v], vector v of tile w's row g + 8 h; xv[r][v], vector v of x's
// row in tile r; into acc[w][r], j = 0..3 in order.
template <typename T, int kW, int kTiles>
__device__ __forceinline__ void StepMmas(const uint4 (&wv)[kW][2][2],
                                         const uint4 (&xv)[kTiles][2],
                                         float (&acc)[kW][kTiles][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int v = j / 2, q = 2 * (j % 2);  // x's words, as WFragment's
#pragma unroll
    for (int w = 0; w < kW; ++w) {
      uint32_t a[4];
      WFragment(wv[w], j, a);
#pragma unroll
      for (int r = 0; r < kTiles; ++r) {
        HalfOps<T>::Mma(acc[w][r], a, Word(xv[r][v], q), Word(xv[r][v], q + 1));
      }
    }
  }
}

// y[row, col] = epilogue(v), rounded once to y_type.
__device__ inline void Finish(const StreamGemmParams& p, int64_t row,
                              int64_t col, float v) {
  if (row >= p.rows || col >= p.n) return;
  if (p.bias != nullptr) v = __fadd_rn(v, io::LoadAs(p.bias, p.bias_type, col));
  if (p.gelu) v = SkinnyGeluTanh(v);
  io::StoreAs(p.y, p.y_type, row * p.n + col, v);
}

// W's rows col0 + g + 8 h of the block's 16 columns (col0 = 16 blockIdx.x),
// or null past n (their values count as 0).
template <typename T>
__device__ __forceinline__ void WRows(const StreamGemmParams& p,
                                      const T* (&w_row)[2]) {
  const int g = threadIdx.x % 32 / 4;
  const int64_t col0 = int64_t{blockIdx.x} * kStreamCols;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t col = col0 + g + 8 * h;
    w_row[h] = col < p.n ? static_cast<const T*>(p.w) + col * p.k : nullptr;
  }
}

// The steps warp w takes: w, w + 8, ... below `steps`.
__device__ __forceinline__ int64_t WarpSteps(int64_t steps, int warp) {
  return warp < steps ? (steps - 1 - warp) / kStreamWarps + 1 : 0;
}

// This lane's first vector of its warp's stage `slot`, in the block's
// `stages` x kStreamWarps stages (dynamic shared memory, 16-byte aligned).
__device__ __forceinline__ uint4* LaneStage(uint4* shared_stages, int stages,
                                            int slot) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  return shared_stages + (warp * stages + slot) * kStageVectors + lane;
}

// The start of a block's product, before it waits for the kernel before
// (W is no kernel's output): each warp asks for its first `stages` steps
// of W (kernels/stream_gemm.h, StreamStagePlan), one group a step, empty
// past its steps, so that StreamSteps' wait count is the same at every
// step.
template <typename T>
__device__ __forceinline__ void CopyFirstSteps(const StreamGemmParams& p,
                                               int64_t steps, int stages,
                                               uint4* shared_stages) {
  const int warp = threadIdx.x / 32, t = threadIdx.x % 4;
  const T* w_row[2];
  WRows(p, w_row);
  const int64_t mine = WarpSteps(steps, warp);
  for (int i = 0; i < stages; ++i) {
    if (i < mine) {
      CopyWStep(p, w_row, warp + int64_t{kStreamWarps} * i, t,
                LaneStage(shared_stages, stages, i));
    }
    CommitCopies();
  }
}

// The rest of a block's product after CopyFirstSteps, once x may be read:
// its kStreamCols outputs of every row. Warp w takes its steps in order,
// each from the stage its copy landed in; the stage it frees takes the
// copy of its step `stages` later. load_x(r, e): the 8 elements [e, e + 8)
// of the x row that lane group g = lane / 4 takes in row tile r (row 8 r +
// g), as 4 fragment registers; zeros past the rows. `partial`: the block's
// shared memory for the warps' sums.
template <typename T, int kTiles, typename LoadXFn>
__device__ __forceinline__ void StreamSteps(
    const StreamGemmParams& p, int64_t steps, int stages, uint4* shared_stages,
    LoadXFn load_x, float (&partial)[kStreamWarps - 1][kTiles][4][32]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t col0 = int64_t{blockIdx.x} * kStreamCols;
  const T* w_row[2];
  WRows(p, w_row);
  const void* const w_live[2] = {w_row[0], w_row[1]};
  const int64_t mine = WarpSteps(steps, warp);

  float acc[1][kTiles][4] = {};  // one tile of 16 W rows
  int slot = 0;
  for (int64_t i = 0; i < mine; ++i) {
    const int64_t s = warp + int64_t{kStreamWarps} * i;
    uint4 xv[kTiles][2];
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      const int64_t e = s * kStreamStep + 16 * t + 8 * v;
#pragma unroll
      for (int r = 0; r < kTiles; ++r) {
        xv[r][v] = e < p.k ? load_x(r, e) : make_uint4(0, 0, 0, 0);
      }
    }
    // Committed after step i's group: `stages` - 1 groups (CopyFirstSteps'
    // later ones, then one a step).
    WaitCopiesAtMost(stages - 1);
    uint4* const stage = LaneStage(shared_stages, stages, slot);
    uint4 wv[1][2][2];
    ReadWStep(p, w_live, s, t, stage, wv[0]);
    StepMmas<T, 1, kTiles>(wv, xv, acc);
    // The stage's values are in registers the MMAs have taken: refill it.
    if (i + stages < mine) {
      CopyWStep(p, w_row, s + int64_t{kStreamWarps} * stages, t, stage);
    }
    CommitCopies();
    slot = slot + 1 == stages ? 0 : slot + 1;
  }

  WaitForPriorKernel();  // a warp without steps: before warp 0 writes y
  if (warp > 0) {
#pragma unroll
    for (int r = 0; r < kTiles; ++r) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        partial[warp - 1][r][c][lane] = acc[0][r][c];
      }
    }
  }
  __syncthreads();
  if (warp > 0) return;
#pragma unroll
  for (int r = 0; r < kTiles; ++r) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float v = acc[0][r][c];
      for (int from = 0; from < kStreamWarps - 1; ++from) {
        v = __fadd_rn(v, partial[from][r][c][lane]);
      }
      // C fragment: c0, c1 at W row g, x rows 2t, 2t + 1; c2, c3 at g + 8.
      const int64_t col = col0 + g + 8 * (c / 2);
      const int64_t row = kStreamRowTile * r + 2 * t + c % 2;
      Finish(p, row, col, v);
    }
  }
}

}  // namespace h3::kernels::stream_gemm

#endif  // H3_KERNELS_CUDA_STREAM_GEMM_DEVICE_CUH_
