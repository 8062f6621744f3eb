#ifndef H3_KERNELS_CUDA_H3_PREFILL_CUFFT_H_
#define H3_KERNELS_CUDA_H3_PREFILL_CUFFT_H_

// The unfused H3 prefill (the baseline and the fallback of H3PrefillCuda):
// the shift convolution and kv in one elementwise kernel, the long
// convolution by cuFFT (R2C, pointwise product with the kernel spectrum, C2R),
// then elementwise kernels for the skip, the carried state's output, the
// output gate and the end states. Any H3Shape, any SequenceLayout.

#include <cuda_runtime_api.h>

#include <memory>

#include "kernels/cuda/h3_prefill.h"
#include "kernels/h3.h"

namespace h3::kernels {

class H3PrefillCufft {
 public:
  // `device_weights` holds device pointers that outlive this object.
  static cudaError_t Create(const H3Weights& device_weights,
                            std::unique_ptr<H3PrefillCufft>* out);
  ~H3PrefillCufft();

  // Enqueues one call on `stream` (the contract of H3PrefillCuda::Run).
  cudaError_t Run(const H3PrefillCudaParams& params, cudaStream_t stream);

 private:
  struct Impl;
  explicit H3PrefillCufft(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The GPU twin of H3KernelSpectrum: the rFFT of the diagonal SSM's kernel
// K[h][l] = 2 Re(sum_m C dB dA^l) for l < nfft / 2, zero-padded to nfft.
// device_weights: device pointers; out: device [H, nfft/2 + 1] complex.
// REQUIRES: nfft a power of two >= 2. Synchronous with respect to `stream`'s
// earlier work; allocates and frees its own scratch and cuFFT plan.
cudaError_t H3KernelSpectrumCuda(const H3Weights& device_weights, int nfft,
                                 float* out, cudaStream_t stream);

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_H3_PREFILL_CUFFT_H_
