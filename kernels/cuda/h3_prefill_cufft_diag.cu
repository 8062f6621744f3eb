// The diagonal SSM of the cuFFT prefill path around the FFTs (DiagSsm in
// kernels/cpu/h3_prefill.cc): the pointwise product with the kernel spectrum,
// the carried state's output and the end state.
#include <algorithm>

#include "kernels/cuda/h3_prefill_cufft_device.cuh"
#include "kernels/cuda/h3_prefill_cufft_kernels.h"

namespace h3::kernels {
namespace {

// DiagState works on tiles of 32 tokens (one warp) and 32 modes (all of them
// for d_state 64), staging 32 tiles (1024 tokens) at a time: its shared
// arrays are then 8 + 8 + 4 KiB.
constexpr int kTile = 32;
constexpr int kModes = 32;
constexpr int kChunkTiles = 32;
constexpr int kChunk = kTile * kChunkTiles;
constexpr int64_t kMaxGridStrideBlocks = 4096;

// spec[b][row][f] *= spectrum[row % H][f] / nfft over the group's rows
// ([batch * KV, nfft/2 + 1] complex; row % H is the head since KV = p^2 H).
__global__ void __launch_bounds__(kCufftThreads)
    SpectrumProductKernel(CufftPieceParams p) {
  const int bins = p.nfft / 2 + 1, heads = DeviceHeads(p.w.shape);
  const int64_t total =
      int64_t{p.batch} * DeviceKvChannels(p.w.shape) * int64_t{bins};
  const float scale = 1.0f / static_cast<float>(p.nfft);
  float2* spec = reinterpret_cast<float2*>(p.y);
  const float2* kernel = reinterpret_cast<const float2*>(p.spectrum);
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = e / bins;
    const int f = static_cast<int>(e - row * bins);
    const float2 a = spec[e];
    const float2 s = kernel[(row % heads) * bins + f];
    spec[e] = make_float2(scale * (a.x * s.x - a.y * s.y),
                          scale * (a.x * s.y + a.y * s.x));
  }
}

// y[t] += 2 Re(sum_m C[m] dA[m]^(t+1) x0[m]) for the modes [m0, m0 + mc).
// Token t = aT + i of the piece factors as dA^(t+1) = dA^(aT+1) dA^i: the
// coefficients C dA^(aT+1) x0 follow tile by tile in double, the powers
// dA^i (i < T) are a table, and each output is an mc-term dot product.
__device__ void CarriedOutput(const CufftPieceParams& p,
                              Complexes<const float> dA,
                              Complexes<const float> C,
                              Complexes<const float> x0, int mc, float* y,
                              float2* table, float2* coef) {
  const int len = p.length;
  for (int e = threadIdx.x; e < mc * kTile; e += blockDim.x) {
    table[e] = ToFloat2(CPow(ToDouble2(dA[e / kTile]), e % kTile));  // [m][i]
  }
  double2 z{}, step{}, c{};
  if (threadIdx.x < mc) {
    const double2 a = ToDouble2(dA[threadIdx.x]);
    z = CMul(a, ToDouble2(x0[threadIdx.x]));  // dA^(aT+1) x0 for tile a = 0
    step = CPow(a, kTile);
    c = ToDouble2(C[threadIdx.x]);
  }
  for (int c0 = 0; c0 < len; c0 += kChunk) {
    const int tiles = min(kChunkTiles, (len - c0 + kTile - 1) / kTile);
    if (threadIdx.x < mc) {
      for (int a = 0; a < tiles; ++a) {
        coef[a * kModes + threadIdx.x] = ToFloat2(CMul(c, z));
        z = CMul(z, step);
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < tiles * kTile; e += blockDim.x) {
      const int t = c0 + e;
      if (t >= len) continue;
      const float2* q = coef + (e / kTile) * kModes;
      const float2* pw = table + e % kTile;
      float acc = 0.0f;
      for (int m = 0; m < mc; ++m) {
        acc += q[m].x * pw[m * kTile].x - q[m].y * pw[m * kTile].y;
      }
      y[t] += 2.0f * acc;
    }
    __syncthreads();
  }
}

// x_end = dA^L x0 + sum_j dA^(L-1-j) dB kv[j] for the modes [m0, m0 + mc),
// returned by threads m < mc. Tiles of T tokens are aligned to end at L (the
// first may reach before token 0, where kv reads as 0). Per tile,
// u = sum_i dB dA^(T-1-i) kv[i] in fp32 from a table; across tiles Horner's
// rule x <- dA^T x + u runs in double.
__device__ double2 EndState(const CufftPieceParams& p,
                            Complexes<const float> dA,
                            Complexes<const float> dB,
                            Complexes<const float> x0, int mc, const float* kv,
                            float2* table, float2* coef, float* staged) {
  const int len = p.length;
  for (int e = threadIdx.x; e < mc * kTile; e += blockDim.x) {
    const int i = e / mc, m = e % mc;  // [i][m]
    table[i * kModes + m] =
        ToFloat2(CMul(ToDouble2(dB[m]), CPow(ToDouble2(dA[m]), kTile - 1 - i)));
  }
  double2 acc = make_double2(0.0, 0.0), step{};
  if (threadIdx.x < mc) step = CPow(ToDouble2(dA[threadIdx.x]), kTile);
  const int tiles_total = (len + kTile - 1) / kTile;
  for (int c0 = len - tiles_total * kTile; c0 < len; c0 += kChunk) {
    const int tiles = min(kChunkTiles, (len - c0) / kTile);
    for (int e = threadIdx.x; e < tiles * kTile; e += blockDim.x) {
      staged[e] = c0 + e >= 0 ? kv[c0 + e] : 0.0f;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < tiles * mc; e += blockDim.x) {
      const int a = e / mc, m = e % mc;
      const float* s = staged + a * kTile;
      float2 u = make_float2(0.0f, 0.0f);
      for (int i = 0; i < kTile; ++i) {
        const float2 w = table[i * kModes + m];
        u.x += w.x * s[i];
        u.y += w.y * s[i];
      }
      coef[a * kModes + m] = u;
    }
    __syncthreads();
    if (threadIdx.x < mc) {
      for (int a = 0; a < tiles; ++a) {
        acc = CAdd(CMul(acc, step), ToDouble2(coef[a * kModes + threadIdx.x]));
      }
    }
    __syncthreads();
  }
  if (threadIdx.x >= mc) return acc;
  const double2 a = ToDouble2(dA[threadIdx.x]);
  return CAdd(acc, CMul(CPow(a, len), ToDouble2(x0[threadIdx.x])));
}

// Grid: (KV, batch); one block per (sequence, kv channel). Runs after the
// inverse FFT (y holds conv / nfft) and before Output. The carried output is
// skipped where x0 is zero (a new sequence's first piece).
__global__ void __launch_bounds__(kCufftThreads)
    DiagStateKernel(CufftPieceParams p) {
  __shared__ float2 table[kModes * kTile];
  __shared__ float2 coef[kChunkTiles * kModes];
  __shared__ float staged[kChunk];
  const int heads = DeviceHeads(p.w.shape), modes = DeviceModes(p.w.shape);
  const int64_t kv_channels = DeviceKvChannels(p.w.shape);
  const int row = blockIdx.x, b = blockIdx.y, h = row % heads;
  const int64_t local = b * kv_channels + row;  // row in the group's scratch
  float* x = p.diag_state +                     // [M] complex
             2 * ((p.first_sequence + b) * kv_channels + row) * modes;
  const float* kv = p.kv + local * p.nfft;
  float* y = p.y + local * (p.nfft + 2);
  const Complexes<const float> dA{p.w.dA + 2 * h * modes};
  const Complexes<const float> dB{p.w.dB + 2 * h * modes};
  const Complexes<const float> C{p.w.C + 2 * h * modes};
  const Complexes<const float> x0{x};
  for (int m0 = 0; m0 < modes; m0 += kModes) {
    const int mc = min(kModes, modes - m0);
    bool nonzero = false;
    if (threadIdx.x < mc) {
      const float2 s = x0[m0 + threadIdx.x];
      nonzero = s.x != 0.0f || s.y != 0.0f;
    }
    if (__syncthreads_or(nonzero)) {
      CarriedOutput(p, dA + m0, C + m0, x0 + m0, mc, y, table, coef);
    }
    const double2 end =
        EndState(p, dA + m0, dB + m0, x0 + m0, mc, kv, table, coef, staged);
    if (threadIdx.x < mc) StoreComplex(x, m0 + threadIdx.x, ToFloat2(end));
    __syncthreads();
  }
}

}  // namespace

cudaError_t LaunchSpectrumProduct(const CufftPieceParams& p,
                                  cudaStream_t stream) {
  const int64_t count =
      int64_t{p.batch} * p.w.shape.kv_channels() * (p.nfft / 2 + 1);
  const int blocks = static_cast<int>(std::min(
      (count + kCufftThreads - 1) / kCufftThreads, kMaxGridStrideBlocks));
  SpectrumProductKernel<<<blocks, kCufftThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t LaunchDiagState(const CufftPieceParams& p, cudaStream_t stream) {
  const dim3 grid(p.w.shape.kv_channels(), p.batch);
  DiagStateKernel<<<grid, kCufftThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace h3::kernels
