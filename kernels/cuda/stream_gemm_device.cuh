#ifndef H3_KERNELS_CUDA_STREAM_GEMM_DEVICE_CUH_
#define H3_KERNELS_CUDA_STREAM_GEMM_DEVICE_CUH_

// What the decode product's kernels share (stream_gemm.cu: StreamGemmCuda;
// stream_gemm_norm.cu: AddNormStreamGemmCuda): the loads, the block's main
// loop over k and its epilogue (kernels/stream_gemm.h gives the order of
// every sum). Internal to them.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/io_element.cuh"
#include "kernels/cuda/launch_order.cuh"
#include "kernels/cuda/mma_half.cuh"
#include "kernels/skinny_gemm.h"
#include "kernels/stream_gemm.h"

namespace h3::kernels::stream_gemm {

constexpr int kThreads = kStreamWarps * 32;

// The steps a warp loads ahead with kTiles row tiles in the default
// instances: 4, 2 or 1 (8, 4 or 2 KiB of W a warp in flight) as more x rows
// take more registers (StreamGemmFitFor gives the others).
H3_HOST_DEVICE constexpr int StreamUnroll(int tiles) {
  if (tiles == 1) return 4;
  return tiles == 2 ? 2 : 1;
}

// The 8 elements [e, e + 8) of a 16-bit row as 4 fragment registers.
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

// A tile's W rows g and g + 8 (w_row[h], null past n) at step s for lane
// t: wv[h][v] = elements 64 s + 16 t + 8 v .. + 7 (StreamElement's), zeros
// past k, past n or where the step is not `live`. k % 8 == 0: a vector is
// wholly inside k or wholly past it.
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

// MMA j's A fragment from a tile's step of W (wv as LoadWStep leaves it):
// StreamElement(t, j, half) is vector j / 2, word 2 (j % 2) + half.
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

// The epilogue of column col's sum v, in fp32: the bias, then GELU.
__device__ __forceinline__ float Epilogue(const StreamGemmParams& p,
                                          int64_t col, float v) {
  if (p.bias != nullptr) v = __fadd_rn(v, io::LoadAs(p.bias, p.bias_type, col));
  if (p.gelu) v = SkinnyGeluTanh(v);
  return v;
}

// y[row, col] = epilogue(v), rounded once to y_type.
__device__ inline void Finish(const StreamGemmParams& p, int64_t row,
                              int64_t col, float v) {
  if (row >= p.rows || col >= p.n) return;
  io::StoreAs(p.y, p.y_type, row * p.n + col, Epilogue(p, col, v));
}

// y[row, col + c] for the c < live (1 .. 4) of a quad whose first element
// is at y: one store of the 4 when they are all there and aligned for it.
template <typename T>
__device__ __forceinline__ void StoreQuad(T* y, const float (&v)[4], int live) {
  struct alignas(4 * sizeof(T)) Quad {
    T e[4];
  };
  if (live == 4 && reinterpret_cast<uintptr_t>(y) % sizeof(Quad) == 0) {
    Quad q;
#pragma unroll
    for (int c = 0; c < 4; ++c) q.e[c] = io::FromFloat<T>(v[c]);
    *reinterpret_cast<Quad*>(y) = q;
    return;
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    if (c < live) y[c] = io::FromFloat<T>(v[c]);
  }
}

// Finish of the 4 outputs (row, col + c), c = 0..3, those inside n: the
// same arithmetic and roundings as four Finish calls, with the types
// dispatched once and, where the 4 are whole and aligned, one store.
__device__ __forceinline__ void FinishQuad(const StreamGemmParams& p,
                                           int64_t row, int64_t col,
                                           float4 sum) {
  if (row >= p.rows || col >= p.n) return;
  const int live = p.n - col < 4 ? static_cast<int>(p.n - col) : 4;
  float v[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    if (c < live) v[c] = Epilogue(p, col + c, v[c]);
  }
  const int64_t at = row * p.n + col;
  if (p.y_type == ElementType::kF16) {
    StoreQuad(static_cast<__half*>(p.y) + at, v, live);
  } else if (p.y_type == ElementType::kBF16) {
    StoreQuad(static_cast<__nv_bfloat16*>(p.y) + at, v, live);
  } else {
    StoreQuad(static_cast<float*>(p.y) + at, v, live);
  }
}

// One block's share of the product: its kStreamCols outputs of every row.
// load_x(r, e): the 8 elements [e, e + 8) of the x row that lane group
// g = lane / 4 takes in row tile r (row 8 r + g), as 4 fragment registers;
// zeros past the rows. Each warp issues a group of steps' W loads, then
// waits for the kernel before (LaunchOrder: x may be its output; a no-op
// once waited, or when launched in stream order), then loads x. `partial`:
// the block's shared memory for the warps' sums. kUnroll: the steps a warp
// loads before the first of them is multiplied (W's registers); the sums'
// order does not depend on it.
template <typename T, int kTiles, int kUnroll = StreamUnroll(kTiles),
          typename LoadXFn>
__device__ __forceinline__ void StreamBlock(
    const StreamGemmParams& p, int64_t steps, LoadXFn load_x,
    float (&partial)[kStreamWarps - 1][kTiles][4][32]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t col0 = int64_t{blockIdx.x} * kStreamCols;
  const T* w = static_cast<const T*>(p.w);
  // W's rows col0 + g + 8 h, or null past n (their values count as 0).
  const T* w_row[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t col = col0 + g + 8 * h;
    w_row[h] = col < p.n ? w + col * p.k : nullptr;
  }

  float acc[1][kTiles][4] = {};  // one tile of 16 W rows
  for (int64_t s0 = warp; s0 < steps; s0 += kStreamWarps * kUnroll) {
    uint4 wv[kUnroll][1][2][2], xv[kUnroll][kTiles][2];
    // The first of the 8 elements vector v of step s0 + 8 u holds. k % 8 ==
    // 0: a vector is wholly inside k or wholly past it.
    const auto element = [&](int u, int v) {
      return (s0 + kStreamWarps * u) * kStreamStep + 16 * t + 8 * v;
    };
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      LoadWStep(p, w_row, s0 + kStreamWarps * u, true, t, wv[u][0]);
    }
    WaitForPriorKernel();  // x is the kernel before's output
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        const int64_t e = element(u, v);
#pragma unroll
        for (int r = 0; r < kTiles; ++r) {
          xv[u][r][v] = e < p.k ? load_x(r, e) : make_uint4(0, 0, 0, 0);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (s0 + kStreamWarps * u >= steps) break;  // the same for the warp
      StepMmas<T, 1, kTiles>(wv[u], xv[u], acc);
    }
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
