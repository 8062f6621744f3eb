// SkinnyGemmCuda: the algorithm of kernels/skinny_gemm.h for 1 to 64 rows.
//
// A block owns kSkinnyCols = 4 output columns. It first copies those 4 rows
// of W, the whole k (zero-padded to a multiple of 256), into shared memory
// with 16-byte loads: W is read from HBM exactly once per call whatever the
// row count. Then its 4 warps multiply the tile with every row of x: the rows
// are cut into groups of kRows (1 up to 4 rows, 2 up to 8, 4 up to 16, else
// 8), warp w takes groups w, w + 4, ..., and multiplies each with all 4
// columns. Each x value a lane loads (from L1/L2: x is small and every block
// reads it) thus serves 4 columns, and each row of x is read once per block:
// per block, x traffic is rows / 2 times the W bytes, the tile's shared-memory
// reads (groups) times. kRows x 4 accumulators a lane.
// An output is always reduced by one warp in the fixed order of the header:
// lane = slice, chunks in order, then the xor butterfly. Only which warp
// computes it changes with the row count, never how.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/io_element.cuh"
#include "kernels/cuda/skinny_gemm.h"

namespace h3::kernels {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
// 4 warps: enough threads to issue the tile's loads together (16 KiB at
// k = 2048, 16-bit W: 8 loads a thread), and 4 row groups to spread rows over.
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
// 16-byte vectors each thread loads before storing any to shared memory, so
// that enough loads are in flight to cover HBM latency: the whole tile at
// k = 2048 (1024 vectors of 16-bit W over 128 threads).
constexpr int kFillBatch = 8;

// W's element bits (the tile copy does not interpret them) and widening.
__device__ float2 ToFloat2(__half2 h) { return __half22float2(h); }
__device__ float2 ToFloat2(__nv_bfloat162 h) { return __bfloat1622float2(h); }

// out[at, at + 8) = the 8 16-bit values of v, as pairs of Pair.
template <typename Pair>
__device__ void WidenPairs(const uint4& v, float* out, int at) {
  const Pair* h = reinterpret_cast<const Pair*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = ToFloat2(h[i]);
    out[at + 2 * i] = f.x;
    out[at + 2 * i + 1] = f.y;
  }
}

template <typename T>
struct Weight;
template <>
struct Weight<__half> {
  using Bits = uint16_t;
  static __device__ void Widen(const uint4& v, float* out, int at) {
    WidenPairs<__half2>(v, out, at);
  }
};
template <>
struct Weight<__nv_bfloat16> {
  using Bits = uint16_t;
  static __device__ void Widen(const uint4& v, float* out, int at) {
    WidenPairs<__nv_bfloat162>(v, out, at);
  }
};
template <>
struct Weight<float> {
  using Bits = uint32_t;
  static __device__ void Widen(const uint4& v, float* out, int at) {
    out[at] = __uint_as_float(v.x);
    out[at + 1] = __uint_as_float(v.y);
    out[at + 2] = __uint_as_float(v.z);
    out[at + 3] = __uint_as_float(v.w);
  }
};

// Copies W rows [j0, j0 + 4) into tile [4, k_pad], zeros past k and past n.
// Vector i of the tile is elements [i kVec, (i + 1) kVec) of one row.
// w_vec: every W row starts 16-byte aligned (k kVec-divisible, w aligned).
template <typename T>
__device__ void FillTile(const SkinnyGemmParams& p, int64_t j0, int64_t k_pad,
                         bool w_vec, uint4* tile) {
  using Bits = typename Weight<T>::Bits;
  constexpr int kVec = 16 / sizeof(Bits);
  const Bits* w = static_cast<const Bits*>(p.w);
  // 32-bit: a tile holds at most 6144 vectors, and a 64-bit division per
  // 16-byte load would cost about as many instructions as the SM can issue
  // while HBM delivers it.
  const unsigned row_vecs = static_cast<unsigned>(k_pad / kVec);
  const unsigned total = kSkinnyCols * row_vecs;
  for (unsigned first = threadIdx.x; first < total;
       first += kThreads * kFillBatch) {
    uint4 data[kFillBatch];
#pragma unroll
    for (int b = 0; b < kFillBatch; ++b) {
      const unsigned v = first + b * kThreads;
      const unsigned col = v / row_vecs;
      const int64_t j = j0 + col;
      const int64_t i = int64_t{v - col * row_vecs} * kVec;
      data[b] = make_uint4(0, 0, 0, 0);
      if (v >= total || j >= p.n || i >= p.k) continue;
      const Bits* src = w + j * p.k + i;
      if (w_vec) {
        data[b] = __ldcs(reinterpret_cast<const uint4*>(src));  // read once
      } else {
        Bits* bits = reinterpret_cast<Bits*>(&data[b]);
#pragma unroll
        for (int e = 0; e < kVec; ++e) bits[e] = i + e < p.k ? src[e] : 0;
      }
    }
#pragma unroll
    for (int b = 0; b < kFillBatch; ++b) {
      const unsigned v = first + b * kThreads;
      if (v < total) tile[v] = data[b];
    }
  }
}

// x[i0, i0 + 8) of row `row` widened to fp32, zeros past k. x_vec: every row
// starts 16-byte aligned (fp32: k % 4 == 0, 16-bit: k % 8 == 0).
template <typename Pair, typename Half>
__device__ void LoadHalfX(const Half* row, int64_t i0, int64_t k, bool x_vec,
                          float (&out)[kSkinnyLaneElems]) {
  if (x_vec && i0 + kSkinnyLaneElems <= k) {
    WidenPairs<Pair>(__ldg(reinterpret_cast<const uint4*>(row + i0)), out, 0);
    return;
  }
#pragma unroll
  for (int e = 0; e < kSkinnyLaneElems; ++e) {
    out[e] = i0 + e < k ? static_cast<float>(row[i0 + e]) : 0.0f;
  }
}

__device__ void LoadX(const SkinnyGemmParams& p, int64_t row, int64_t i0,
                      bool x_vec, float (&out)[kSkinnyLaneElems]) {
  const int64_t k = p.k;
  if (p.x_type == ElementType::kF16) {
    const __half* x = static_cast<const __half*>(p.x) + row * k;
    LoadHalfX<__half2>(x, i0, k, x_vec, out);
    return;
  }
  if (p.x_type == ElementType::kBF16) {
    const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x) + row * k;
    LoadHalfX<__nv_bfloat162>(x, i0, k, x_vec, out);
    return;
  }
  const float* x = static_cast<const float*>(p.x) + row * k;
  if (x_vec && i0 + kSkinnyLaneElems <= k) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(x + i0));
    const float4 b = __ldg(reinterpret_cast<const float4*>(x + i0 + 4));
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    return;
  }
#pragma unroll
  for (int e = 0; e < kSkinnyLaneElems; ++e) {
    out[e] = i0 + e < k ? x[i0 + e] : 0.0f;
  }
}

// Rows [r0, r0 + kRows) against the tile's columns: steps 2-4 of the
// header's algorithm, lane = slice.
template <typename T, int kRows>
__device__ void MultiplyTile(const SkinnyGemmParams& p, const uint4* tile,
                             int64_t k_pad, int64_t j0, int64_t r0,
                             bool x_vec) {
  constexpr int kCols = kSkinnyCols;
  constexpr int kVec = 16 / sizeof(typename Weight<T>::Bits);
  constexpr int kLoads = kSkinnyLaneElems / kVec;  // 16-byte loads a slice
  const int lane = threadIdx.x % 32;
  const int64_t row_vecs = k_pad / kVec;
  float acc[kRows][kCols] = {};
  for (int64_t i0 = lane * kSkinnyLaneElems; i0 < k_pad; i0 += kSkinnyChunk) {
    float w[kCols][kSkinnyLaneElems];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        Weight<T>::Widen(tile[c * row_vecs + i0 / kVec + l], w[c], l * kVec);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float x[kSkinnyLaneElems] = {};
      if (r0 + r < p.rows) LoadX(p, r0 + r, i0, x_vec, x);
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
#pragma unroll
        for (int e = 0; e < kSkinnyLaneElems; ++e) {
          acc[r][c] = SkinnyFma(x[e], w[c][e], acc[r][c]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      float v = acc[r][c];
      for (int width = kSkinnyLanes / 2; width > 0; width /= 2) {
        v = SkinnyAdd(v, __shfl_xor_sync(kFullMask, v, width));
      }
      const int64_t j = j0 + c;
      if (lane == 0 && r0 + r < p.rows && j < p.n) {
        if (p.bias != nullptr) {
          v = SkinnyAdd(v, io::LoadAs(p.bias, p.bias_type, j));
        }
        if (p.gelu) v = SkinnyGeluTanh(v);
        io::StoreAs(p.y, p.y_type, (r0 + r) * p.n + j, v);
      }
    }
  }
}

template <typename T, int kRows>
__global__ void __launch_bounds__(kThreads)
    SkinnyGemmKernel(SkinnyGemmParams p, int64_t k_pad, bool w_vec,
                     bool x_vec) {
  extern __shared__ uint4 tile[];  // [kSkinnyCols, k_pad] of T
  const int64_t j0 = int64_t{blockIdx.x} * kSkinnyCols;
  FillTile<T>(p, j0, k_pad, w_vec, tile);
  __syncthreads();
  const int warp = threadIdx.x / 32;
  for (int64_t r0 = warp * kRows; r0 < p.rows; r0 += kWarps * kRows) {
    MultiplyTile<T, kRows>(p, tile, k_pad, j0, r0, x_vec);
  }
}

template <typename T, int kRows>
cudaError_t Launch(const SkinnyGemmParams& p, cudaStream_t stream) {
  const int64_t size = sizeof(typename Weight<T>::Bits);
  const int64_t k_pad = (p.k + kSkinnyChunk - 1) / kSkinnyChunk * kSkinnyChunk;
  const size_t shared = static_cast<size_t>(kSkinnyCols * k_pad * size);
  const bool w_vec = Aligned(p.w, 16) && (p.k * size) % 16 == 0;
  const bool x_vec =
      Aligned(p.x, 16) && (p.k * ElementSize(p.x_type)) % 16 == 0;
  auto* kernel = SkinnyGemmKernel<T, kRows>;
  // Above the 48 KiB every kernel gets, shared memory needs an opt-in: a
  // host-side attribute, not a stream operation, so it may be set during
  // graph capture (flash-attention does the same at every launch).
  if (shared > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(kSkinnyMaxSharedBytes));
    if (err != cudaSuccess) return err;
  }
  const int64_t blocks = (p.n + kSkinnyCols - 1) / kSkinnyCols;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  kernel<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(
      p, k_pad, w_vec, x_vec);
  return cudaGetLastError();
}

// Groups small enough that every warp gets one when there are 4 or more
// rows, and at most 8 rows (32 accumulators a lane).
template <typename T>
cudaError_t LaunchForRows(const SkinnyGemmParams& p, cudaStream_t stream) {
  if (p.rows <= kWarps) return Launch<T, 1>(p, stream);
  if (p.rows <= 2 * kWarps) return Launch<T, 2>(p, stream);
  if (p.rows <= 4 * kWarps) return Launch<T, 4>(p, stream);
  return Launch<T, 8>(p, stream);
}

}  // namespace

cudaError_t SkinnyGemmCuda(const SkinnyGemmParams& p, cudaStream_t stream) {
  if (SkinnyGemmCheck(p)[0] != '\0') return cudaErrorInvalidValue;
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  switch (p.w_type) {
    case ElementType::kF16:
      return LaunchForRows<__half>(p, stream);
    case ElementType::kBF16:
      return LaunchForRows<__nv_bfloat16>(p, stream);
    default:  // kF32: SkinnyGemmCheck refuses the rest
      break;
  }
  return LaunchForRows<float>(p, stream);
}

}  // namespace h3::kernels
