// The diagonal SSM's kernel spectrum on the GPU (H3KernelSpectrum in
// kernels/cpu/h3_setup.cc): the taps K[h][l] in double, then a cuFFT R2C.
#include <cuda_runtime.h>

#include "kernels/cuda/cufft_plan.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/h3_prefill_cufft.h"
#include "kernels/cuda/h3_prefill_cufft_device.cuh"
#include "kernels/cuda/h3_prefill_cufft_kernels.h"

namespace h3::kernels {
namespace {

// Tap l = l0 + 16 j + r of a 256-tap block: dA^l = dA^(l0 + 16 j) dA^r from
// two 16-entry tables per mode, each entry a binary power in double, so the
// sum over modes is as accurate as the CPU's double recurrence. 32 modes per
// pass keep the tables at 2 x 8 KiB.
constexpr int kTapsLow = 16;
constexpr int kTapsPerBlock = kTapsLow * kTapsLow;
constexpr int kTapsModes = 32;
static_assert(kTapsPerBlock == kCufftThreads, "one tap per thread");

// Grid: (H, nfft / 256 rounded up). taps: [H, nfft].
__global__ void __launch_bounds__(kCufftThreads)
    KernelTapsKernel(H3Weights w, int nfft, float* taps) {
  __shared__ double2 high[kTapsModes][kTapsLow];  // C dB dA^(l0 + 16 j)
  __shared__ double2 low[kTapsModes][kTapsLow];   // dA^r
  const int h = blockIdx.x, modes = DeviceModes(w.shape);
  const int64_t l0 = int64_t{blockIdx.y} * kTapsPerBlock;
  const int64_t l = l0 + threadIdx.x;
  const int64_t half = nfft / 2;
  float* out = taps + int64_t{h} * nfft;
  if (l0 >= half) {  // the zero padding: the whole block
    if (l < nfft) out[l] = 0.0f;
    return;
  }
  const Complexes<const float> da{w.dA + 2 * int64_t{h} * modes};
  const Complexes<const float> db{w.dB + 2 * int64_t{h} * modes};
  const Complexes<const float> c{w.C + 2 * int64_t{h} * modes};
  const int j = threadIdx.x / kTapsLow, r = threadIdx.x % kTapsLow;
  double sum = 0.0;
  for (int m0 = 0; m0 < modes; m0 += kTapsModes) {
    const int mc = min(kTapsModes, modes - m0);
    for (int e = threadIdx.x; e < mc * kTapsLow; e += blockDim.x) {
      const int m = e / kTapsLow, i = e % kTapsLow;
      const double2 a = ToDouble2(da[m0 + m]);
      const double2 coeff = CMul(ToDouble2(c[m0 + m]), ToDouble2(db[m0 + m]));
      high[m][i] = CMul(coeff, CPow(a, l0 + int64_t{kTapsLow} * i));
      low[m][i] = CPow(a, i);
    }
    __syncthreads();
    for (int m = 0; m < mc; ++m) {
      const double2 hi = high[m][j], lo = low[m][r];
      sum += hi.x * lo.x - hi.y * lo.y;
    }
    __syncthreads();
  }
  if (l < half) {
    out[l] = static_cast<float>(2.0 * sum);
  } else if (l < nfft) {
    out[l] = 0.0f;
  }
}

}  // namespace

cudaError_t LaunchKernelTaps(const H3Weights& w, int nfft, float* taps,
                             cudaStream_t stream) {
  const dim3 grid(w.shape.heads(), (nfft + kTapsPerBlock - 1) / kTapsPerBlock);
  KernelTapsKernel<<<grid, kCufftThreads, 0, stream>>>(w, nfft, taps);
  return cudaGetLastError();
}

cudaError_t H3KernelSpectrumCuda(const H3Weights& w, int nfft, float* out,
                                 cudaStream_t stream) {
  const H3Shape& s = w.shape;
  if (nfft < 2 || (nfft & (nfft - 1)) != 0 || out == nullptr ||
      s.d_model <= 0 || s.head_dim <= 0 || s.d_model % s.head_dim != 0 ||
      s.d_state <= 0 || s.d_state % 2 != 0 || w.dA == nullptr ||
      w.dB == nullptr || w.C == nullptr) {
    return cudaErrorInvalidValue;
  }
  const int heads = s.heads();
  CufftPlan plan;
  cudaError_t err = plan.Make(CUFFT_R2C, nfft, heads, nfft, nfft / 2 + 1,
                              /*auto_allocate=*/true);
  if (err == cudaSuccess) {
    err = CufftToCuda(cufftSetStream(plan.get(), stream));
  }
  DeviceBuffer taps;  // [H, nfft]
  if (err == cudaSuccess) {
    err = taps.Reserve(sizeof(float) * heads * int64_t{nfft});
  }
  if (err != cudaSuccess) return err;
  err = LaunchKernelTaps(w, nfft, taps.as<float>(), stream);
  if (err == cudaSuccess) {
    err = CufftToCuda(cufftExecR2C(plan.get(), taps.as<cufftReal>(),
                                   reinterpret_cast<cufftComplex*>(out)));
  }
  // The taps and the plan are released on return: wait for the work that
  // uses them, also after a failed launch.
  const cudaError_t sync = cudaStreamSynchronize(stream);
  return err != cudaSuccess ? err : sync;
}

}  // namespace h3::kernels
