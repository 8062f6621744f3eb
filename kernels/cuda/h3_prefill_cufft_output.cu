// The output gate of the cuFFT prefill path (the end of PrefillHead in
// kernels/cpu/h3_prefill.cc): out[t][d2 H + h] = sum_d1 q[t][h p + d1] *
// (y[(d1, d2, h)][t] + D[h] kv[(d1, d2, h)][t]).
#include "kernels/cuda/h3_prefill_cufft_device.cuh"
#include "kernels/cuda/h3_prefill_cufft_kernels.h"

namespace h3::kernels {
namespace {

// Grid: (time tiles covering the piece, head groups, batch). q is staged
// through shared memory in the layout's coalesced order, the products are
// formed reading y and kv along time (their rows are contiguous), and the
// outputs go back through shared memory in the layout's order.
template <typename T>
__global__ void __launch_bounds__(kCufftThreads)
    OutputKernel(CufftPieceParams p) {
  extern __shared__ float smem[];
  const int pd = p.w.shape.head_dim, heads = DeviceHeads(p.w.shape);
  const int64_t kv_channels = DeviceKvChannels(p.w.shape);
  const int tt = p.tile.time, stride = tt + 1;
  const int h0 = blockIdx.y * p.tile.heads;
  const int g_heads = min(p.tile.heads, heads - h0);
  const int g_channels = g_heads * pd, c0 = h0 * pd;
  const int b = blockIdx.z;
  const int t0 = blockIdx.x * tt, len = p.length, nfft = p.nfft;
  float* sq = smem;                             // [channels][time + 1]
  float* so = smem + p.tile.channels * stride;  // [outputs][time + 1]

  const T* q = static_cast<const T*>(p.q);
  for (int e = threadIdx.x; e < g_channels * tt; e += blockDim.x) {
    int ci, ti;
    TileCoords(p, e, g_channels, tt, &ci, &ti);
    const int t = t0 + ti;
    sq[ci * stride + ti] =
        t < len ? LoadElement(q, ElementOffset(p, b, t, c0 + ci)) : 0.0f;
  }
  __syncthreads();

  // Output o = (head, d2) of the tile, o = hl p + d2.
  const float* kv = p.kv + b * kv_channels * nfft;
  const float* y = p.y + b * kv_channels * (nfft + 2);
  for (int e = threadIdx.x; e < g_channels * tt; e += blockDim.x) {
    const int o = e / tt, ti = e % tt, t = t0 + ti;
    if (t >= len) continue;
    const int hl = o / pd, d2 = o % pd, h = h0 + hl;
    const float skip = p.w.D[h];
    float sum = 0.0f;
    for (int d1 = 0; d1 < pd; ++d1) {
      const int64_t row = (int64_t{d1} * pd + d2) * heads + h;
      const float yv = y[row * (nfft + 2) + t] + skip * kv[row * nfft + t];
      sum += sq[(hl * pd + d1) * stride + ti] * yv;
    }
    so[o * stride + ti] = sum;
  }
  __syncthreads();

  // Stored in the layout's order; output channel d2 H + h is contiguous in h
  // for a fixed d2, so the tile is walked as [d2][head] for token-major.
  T* out = static_cast<T*>(p.out);
  for (int e = threadIdx.x; e < g_channels * tt; e += blockDim.x) {
    int oi, ti;
    TileCoords(p, e, g_channels, tt, &oi, &ti);
    const int t = t0 + ti;
    if (t >= len) continue;
    const int d2 = oi / g_heads, hl = oi % g_heads;
    StoreElement(out, ElementOffset(p, b, t, int64_t{d2} * heads + h0 + hl),
                 so[(hl * pd + d2) * stride + ti]);
  }
}

size_t OutputSharedBytes(const ChannelTile& t) {
  return sizeof(float) * 2 * static_cast<size_t>(t.channels) * (t.time + 1);
}

}  // namespace

cudaError_t LaunchOutput(const CufftPieceParams& p, cudaStream_t stream) {
  const int heads = p.w.shape.heads();
  const dim3 grid((p.length + p.tile.time - 1) / p.tile.time,
                  (heads + p.tile.heads - 1) / p.tile.heads, p.batch);
  const size_t smem = OutputSharedBytes(p.tile);
  switch (p.type) {
    case ElementType::kF32:
      OutputKernel<float><<<grid, kCufftThreads, smem, stream>>>(p);
      break;
    case ElementType::kF16:
      OutputKernel<__half><<<grid, kCufftThreads, smem, stream>>>(p);
      break;
    case ElementType::kBF16:
      OutputKernel<__nv_bfloat16><<<grid, kCufftThreads, smem, stream>>>(p);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace h3::kernels
