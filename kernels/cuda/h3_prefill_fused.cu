// The host side of the fused H3 prefill (the kernel and its algorithm:
// h3_prefill_fused_kernel.cu): the per-model tables (the DFT matrices and
// spectra, and what kernels/flashconv_setup.h computes from the weights),
// and the launches of a batch or packed call.
#include <cmath>
#include <complex>
#include <vector>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/flashconv_device.cuh"
#include "kernels/cuda/h3_prefill_cufft.h"
#include "kernels/cuda/h3_prefill_fused.h"
#include "kernels/cuda/h3_prefill_fused_kernel.h"
#include "kernels/flashconv_setup.h"

namespace h3::kernels {
namespace fc = flashconv;

namespace {

// The DFT tables of one size in fp16, f1 then f2, as the kernel reads them.
std::vector<__half> DftTables(const fc::FftSize& size) {
  const int f1_size = 2 * size.n1 * (size.n1 / 2);
  std::vector<__half> t(f1_size + 2 * size.n2 * size.n2);
  fc::DftTables(
      size, [&](int i, double x) { t[i] = __double2half(x); },
      [&](int i, double x) { t[f1_size + i] = __double2half(x); });
  return t;
}

// spectrum[h][k1][k2] = S[k1 + n1 k2] / scale[h] from the rFFT bins
// rfft[h][0 .. n/2] (S[k] = conj(S[n - k]) above n/2); scale[h] is the
// largest |component| of channel h's spectrum. One block per channel.
__global__ void PermuteSpectrum(const float2* rfft, int n, int n1,
                                float2* spectrum, float* scale) {
  __shared__ float slots[fc::kWarps];
  const int h = blockIdx.x, bins = n / 2 + 1, n2 = n / n1;
  const float2* in = rfft + static_cast<int64_t>(h) * bins;
  float most = 0.0f;
  for (int i = threadIdx.x; i < bins; i += blockDim.x) {
    most = fmaxf(most, fmaxf(fabsf(in[i].x), fabsf(in[i].y)));
  }
  most = fc::BlockMax(most, slots);
  const float inv = most > 0 ? 1.0f / most : 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int freq = fc::PermutedFrequency(i, n1, n2);
    const float2 z =
        freq <= n / 2 ? in[freq] : make_float2(in[n - freq].x, -in[n - freq].y);
    spectrum[static_cast<int64_t>(h) * n + i] = fc::CScale(z, inv);
  }
  if (threadIdx.x == 0) scale[h] = most;
}

}  // namespace

struct H3PrefillFused::Impl {
  H3Weights w;
  // Per size: DFT, spectrum, scale, twiddles, chunk powers.
  DeviceBuffer memory[fc::kNumFftSizes][5];
  DeviceBuffer channels;  // [H] ChannelSetup
  fc::SizeTables tables[fc::kNumFftSizes];
};

H3PrefillFused::H3PrefillFused(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
H3PrefillFused::~H3PrefillFused() = default;

cudaError_t H3PrefillFused::Create(const H3Weights& host_weights,
                                   const H3Weights& w,
                                   std::unique_ptr<H3PrefillFused>* out) {
  auto impl = std::make_unique<Impl>();
  impl->w = w;
  const int heads = w.shape.heads();
  // The weights' tables, on the host once at load (the kernel's blocks only
  // copy them).
  cudaError_t err =
      CopyToDevice(fc::ChannelSetups(host_weights), &impl->channels);
  if (err != cudaSuccess) return err;
  for (int i = 0; i < fc::kNumFftSizes; ++i) {
    const fc::FftSize& size = fc::kFftSizes[i];
    const std::vector<__half> dft = DftTables(size);
    DeviceBuffer& f1 = impl->memory[i][0];
    DeviceBuffer& spectrum = impl->memory[i][1];
    DeviceBuffer& scale = impl->memory[i][2];
    DeviceBuffer& twiddle = impl->memory[i][3];
    DeviceBuffer& powers = impl->memory[i][4];
    DeviceBuffer rfft;  // the rFFT bins, before PermuteSpectrum
    err = CopyToDevice(dft, &f1);
    if (err == cudaSuccess)
      err = CopyToDevice(fc::TwiddleTable(size), &twiddle);
    if (err == cudaSuccess) {
      err = CopyToDevice(fc::ChunkPowers(host_weights, size), &powers);
    }
    if (err == cudaSuccess)
      err = spectrum.Reserve(sizeof(float2) * heads * size.n);
    if (err == cudaSuccess) err = scale.Reserve(sizeof(float) * heads);
    if (err == cudaSuccess) {
      err = rfft.Reserve(sizeof(float2) * heads * (size.n / 2 + 1));
    }
    if (err == cudaSuccess) {
      err = H3KernelSpectrumCuda(w, size.n, rfft.as<float>(), nullptr);
    }
    if (err == cudaSuccess) {
      PermuteSpectrum<<<heads, fc::kThreads>>>(rfft.as<const float2>(), size.n,
                                               size.n1, spectrum.as<float2>(),
                                               scale.as<float>());
      err = cudaGetLastError();
    }
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return err;
    const __half* f1_data = f1.as<const __half>();
    impl->tables[i] = {f1_data,
                       f1_data + 2 * size.n1 * (size.n1 / 2),
                       spectrum.as<const float2>(),
                       scale.as<const float>(),
                       twiddle.as<const float2>(),
                       powers.as<const float2>()};
    for (ElementType type :
         {ElementType::kF32, ElementType::kF16, ElementType::kBF16}) {
      err = cudaFuncSetAttribute(fc::FusedPrefillKernelFor(type, i),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 fc::SharedMap(size.n).total);
      if (err != cudaSuccess) return err;
    }
  }
  out->reset(new H3PrefillFused(std::move(impl)));
  return cudaSuccess;
}

cudaError_t H3PrefillFused::RunPacked(const H3PrefillPackedParams& p,
                                      cudaStream_t stream) {
  const H3Shape& shape = impl_->w.shape;
  if (p.time != 1 || shape.d_model > 65535) return cudaErrorInvalidValue;
  for (int i = 0; i < p.segments; ++i) {  // before any launch
    if (p.seqs[i].start < 0 || p.seqs[i].length < 1) {
      return cudaErrorInvalidValue;
    }
  }
  const std::vector<PackedLaunch> plan =
      PlanPackedLaunches(p.seqs, p.segments, kMaxPackedSegments);
  for (const PackedLaunch& launch : plan) {
    fc::KernelArgs args{impl_->w,
                        impl_->tables[launch.size_index],
                        impl_->channels.as<const fc::ChannelSetup>(),
                        p.channel,
                        p.q,
                        p.k,
                        p.v,
                        p.out,
                        {}};
    const int count = static_cast<int>(launch.segments.size());
    for (int i = 0; i < count; ++i) {
      const H3PrefillSegment& s = p.seqs[launch.segments[i]];
      args.seg[i] = {s.start, s.length, s.offset, s.shift_state, s.diag_state};
    }
    void* params[] = {&args};
    const dim3 grid(count, shape.d_model);
    const cudaError_t err = cudaLaunchKernel(
        fc::FusedPrefillKernelFor(p.type, launch.size_index), grid,
        dim3(fc::kThreads), params,
        fc::SharedMap(fc::kFftSizes[launch.size_index].n).total, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace h3::kernels
