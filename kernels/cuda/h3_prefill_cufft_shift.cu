// The shift SSM of the cuFFT prefill path (ShiftSsm in kernels/cpu/
// h3_prefill.cc): kbar = shiftconv(k) + shift_D k over the piece's inputs and
// the earlier ones held in the shift state's ring, the kv products that feed
// the long convolution, and the new shift state (the ring with the piece's
// last inputs written in).
#include <algorithm>

#include "kernels/cuda/h3_prefill_cufft_device.cuh"
#include "kernels/cuda/h3_prefill_cufft_kernels.h"

namespace h3::kernels {
namespace {

// Tiles are capped at 2048 elements (see ChannelTile), which keeps ShiftKv's
// shared memory (about 20 bytes per element) within the 48 KiB every GPU
// grants without an opt-in attribute.
constexpr int kTileElements = 2048;
constexpr size_t kSharedLimit = 48 * 1024;
// Grid y counts head groups.
constexpr int kMaxGridY = 65535;

// ShiftKv's shared arrays: k window, v and kbar ([channels][time + 1], the
// +1 keeps channel-fastest stores free of bank conflicts) and a window of
// 2 * time taps per channel.
size_t ShiftKvSharedBytes(const ChannelTile& t) {
  return sizeof(float) * (3 * static_cast<size_t>(t.channels) * (t.time + 1) +
                          2 * static_cast<size_t>(t.channels) * t.time);
}

// The input at piece index t < 0, the position start + t before the piece:
// from the ring (k at position P in slot P mod N), zero before position 0.
// The ring holds positions start - N .. start - 1; earlier ones meet only
// taps j >= N (zero), and read as zero too.
__device__ float EarlierInput(const CufftPieceParams& p, int b, int c, int t) {
  const int d = p.w.shape.d_model, n_state = p.w.shape.d_state;
  const int64_t position = p.start + t;
  if (position < 0 || t < -n_state) return 0.0f;
  const float* ring =
      p.shift_state + ((p.first_sequence + b) * d + c) * int64_t{n_state};
  return ring[position % n_state];
}

// Grid: (time tiles covering nfft, head groups, batch). Writes the kv rows
// of the block's heads for its tokens, zero from `length` to nfft.
//
// The convolution kbar[t] = sum_j kshift[j] k[t - j] (j < N) is computed in
// windows of `time` tokens walking back from the tile, so that shared memory
// holds one k window and the 2 * time taps joining it to the tile whatever N
// is: output t0 + ti and window token ws + i meet at tap
// j = t0 - ws + ti - i, stored at taps[ti - i + time - 1]. Window tokens
// before the piece (t < 0) come from the ring (EarlierInput), so the saved
// state enters as the inputs it holds.
template <typename T>
__global__ void __launch_bounds__(kCufftThreads)
    ShiftKvKernel(CufftPieceParams p) {
  extern __shared__ float smem[];
  const int pd = p.w.shape.head_dim, heads = DeviceHeads(p.w.shape);
  const int n_state = p.w.shape.d_state;
  const int64_t kv_channels = int64_t{pd} * pd * heads;
  const int tt = p.tile.time, stride = tt + 1;
  const int h0 = blockIdx.y * p.tile.heads;
  const int g_heads = min(p.tile.heads, heads - h0);
  const int g_channels = g_heads * pd, c0 = h0 * pd;
  const int rows = g_heads * pd * pd;  // kv rows (head, d1, d2) of the tile
  const int b = blockIdx.z;
  const int t0 = blockIdx.x * tt, len = p.length, nfft = p.nfft;
  float* kv = p.kv + b * kv_channels * nfft;  // [KV, nfft]
  auto kv_row = [&](int r) {
    const int hl = r / (pd * pd), d1 = (r / pd) % pd, d2 = r % pd;
    return (int64_t{d1} * pd + d2) * heads + h0 + hl;
  };

  if (t0 >= len) {  // zero padding only
    for (int e = threadIdx.x; e < rows * tt; e += blockDim.x) {
      const int t = t0 + e % tt;
      if (t < nfft) kv[kv_row(e / tt) * nfft + t] = 0.0f;
    }
    return;
  }

  const int tile_size = p.tile.channels * stride;
  float* sk = smem;                // [channels][time + 1]: k of the window
  float* sv = sk + tile_size;      // [channels][time + 1]: v of the tile
  float* kbar = sv + tile_size;    // [channels][time + 1]
  float* taps = kbar + tile_size;  // [channels][2 time]
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  // Windows reach back to token t0 - (N - 1), and not before position 0
  // (token -start).
  const int before = p.start < n_state ? static_cast<int>(p.start) : n_state;
  const int earliest = max(t0 - (n_state - 1), -before);
  const int windows = (t0 - earliest + tt - 1) / tt + 1;
  for (int w = 0; w < windows; ++w) {
    const int ws = t0 - w * tt;
    for (int e = threadIdx.x; e < g_channels * tt; e += blockDim.x) {
      int ci, ti;
      TileCoords(p, e, g_channels, tt, &ci, &ti);
      const int t = ws + ti;
      const bool inside = t >= 0 && t < len;
      const int64_t at = ElementOffset(p, b, t, c0 + ci);
      sk[ci * stride + ti] = inside  ? LoadElement(k, at)
                             : t < 0 ? EarlierInput(p, b, c0 + ci, t)
                                     : 0.0f;
      if (w == 0) sv[ci * stride + ti] = inside ? LoadElement(v, at) : 0.0f;
    }
    const int first_tap = (w - 1) * tt + 1;
    for (int e = threadIdx.x; e < g_channels * 2 * tt; e += blockDim.x) {
      const int ci = e / (2 * tt), j = first_tap + e % (2 * tt);
      taps[e] = j >= 0 && j < n_state
                    ? p.w.shift_kernel[int64_t{c0 + ci} * n_state + j]
                    : 0.0f;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < g_channels * tt; e += blockDim.x) {
      const int ci = e / tt, ti = e % tt, c = c0 + ci;
      float acc = w == 0 ? p.w.shift_D[c] * sk[ci * stride + ti]
                         : kbar[ci * stride + ti];
      const float* tap = taps + ci * 2 * tt + ti + tt - 1;
      const float* kw = sk + ci * stride;
      for (int i = 0; i < tt; ++i) acc += tap[-i] * kw[i];
      kbar[ci * stride + ti] = acc;
    }
    __syncthreads();
  }

  // kv[(d1, d2, h)][t] = kbar[h p + d1][t] * v[h p + d2][t]
  for (int e = threadIdx.x; e < rows * tt; e += blockDim.x) {
    const int r = e / tt, ti = e % tt, t = t0 + ti;
    if (t >= nfft) continue;
    const int hl = r / (pd * pd), d1 = (r / pd) % pd, d2 = r % pd;
    kv[kv_row(r) * nfft + t] = t < len ? kbar[(hl * pd + d1) * stride + ti] *
                                             sv[(hl * pd + d2) * stride + ti]
                                       : 0.0f;
  }
}

// The piece's last min(L, N) inputs into their ring slots: thread
// (sequence, channel, j) writes k[L - 1 - j] to slot (start + L - 1 - j) mod
// N, for j < min(L, N). The slots are distinct, and the other slots keep
// the inputs still within the last N. The ring holds the inputs as fp32, so
// this is exact.
template <typename T>
__global__ void __launch_bounds__(kCufftThreads)
    ShiftStateKernel(CufftPieceParams p) {
  const int d = p.w.shape.d_model, n_state = p.w.shape.d_state;
  const int len = p.length, written = min(len, n_state);
  const int64_t total = int64_t{p.batch} * d * written;
  const T* k = static_cast<const T*>(p.k);
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int j = static_cast<int>(e % written);
    const int c = static_cast<int>(e / written % d);
    const int b = static_cast<int>(e / (int64_t{written} * d));
    float* ring =
        p.shift_state + ((p.first_sequence + b) * d + c) * int64_t{n_state};
    const int t = len - 1 - j;
    ring[(p.start + t) % n_state] = LoadElement(k, ElementOffset(p, b, t, c));
  }
}

// Grid-stride launches: enough blocks to fill any current GPU many times
// over, few enough that each thread does some work for tiny grids.
constexpr int64_t kMaxGridStrideBlocks = 4096;

}  // namespace

bool ChooseChannelTile(const H3Shape& s, ChannelTile* tile) {
  const int p = s.head_dim;
  tile->heads = std::max(1, std::min(s.heads(), 32 / p));
  tile->channels = tile->heads * p;
  tile->time = 64;
  while (tile->time > 1 && tile->channels * tile->time > kTileElements) {
    tile->time /= 2;
  }
  const int groups = (s.heads() + tile->heads - 1) / tile->heads;
  return ShiftKvSharedBytes(*tile) <= kSharedLimit && groups <= kMaxGridY;
}

cudaError_t LaunchShiftKv(const CufftPieceParams& p, cudaStream_t stream) {
  const int heads = p.w.shape.heads();
  const dim3 grid((p.nfft + p.tile.time - 1) / p.tile.time,
                  (heads + p.tile.heads - 1) / p.tile.heads, p.batch);
  const size_t smem = ShiftKvSharedBytes(p.tile);
  switch (p.type) {
    case ElementType::kF32:
      ShiftKvKernel<float><<<grid, kCufftThreads, smem, stream>>>(p);
      break;
    case ElementType::kF16:
      ShiftKvKernel<__half><<<grid, kCufftThreads, smem, stream>>>(p);
      break;
    case ElementType::kBF16:
      ShiftKvKernel<__nv_bfloat16><<<grid, kCufftThreads, smem, stream>>>(p);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchShiftState(const CufftPieceParams& p, cudaStream_t stream) {
  const int64_t count = int64_t{p.batch} * p.w.shape.d_model *
                        std::min(p.length, p.w.shape.d_state);
  const int blocks = static_cast<int>(std::min(
      (count + kCufftThreads - 1) / kCufftThreads, kMaxGridStrideBlocks));
  switch (p.type) {
    case ElementType::kF32:
      ShiftStateKernel<float><<<blocks, kCufftThreads, 0, stream>>>(p);
      break;
    case ElementType::kF16:
      ShiftStateKernel<__half><<<blocks, kCufftThreads, 0, stream>>>(p);
      break;
    case ElementType::kBF16:
      ShiftStateKernel<__nv_bfloat16><<<blocks, kCufftThreads, 0, stream>>>(p);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace h3::kernels
