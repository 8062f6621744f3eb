#ifndef H3_KERNELS_CUDA_H3_PREFILL_CUFFT_H_
#define H3_KERNELS_CUDA_H3_PREFILL_CUFFT_H_

// The unfused H3 prefill (the baseline and the fallback of H3PrefillCuda):
// the shift convolution and kv in one elementwise kernel, the long
// convolution by cuFFT (R2C, pointwise product with the kernel spectrum, C2R),
// then elementwise kernels for the skip, the carried state's output, the
// output gate and the end states. Any H3Shape, any SequenceLayout.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "kernels/cuda/h3_prefill.h"
#include "kernels/h3.h"

namespace h3::kernels {

// Calls longer than 8192 tokens run as pieces of at most 8192 tokens, one
// after another, each starting from the state the previous one left, so
// kernel spectra and FFTs exist only up to 16384 points. The object keeps,
// growing them as calls need: the kernel spectra (one [H, nfft/2 + 1] per FFT
// size used), cuFFT plans per (FFT size, transform count), and scratch of
// about 8 KV nfft bytes per sequence processed at once. Calls on different
// streams are ordered by the object (each waits for the previous one).
class H3PrefillCufft {
 public:
  struct Options {
    // The sequences of a call are processed in groups whose scratch fits
    // this budget (at least one sequence per group).
    int64_t scratch_budget_bytes = int64_t{1} << 30;
  };

  // `device_weights` holds device pointers that outlive this object.
  // InvalidValue for a malformed shape or a null weight, NotSupported for a
  // head_dim too large for the kernels' tiles (above about 1500).
  static cudaError_t Create(const H3Weights& device_weights,
                            std::unique_ptr<H3PrefillCufft>* out) {
    return Create(device_weights, Options(), out);
  }
  static cudaError_t Create(const H3Weights& device_weights,
                            const Options& options,
                            std::unique_ptr<H3PrefillCufft>* out);
  ~H3PrefillCufft();

  // Enqueues one call on `stream` (the contract of H3PrefillCuda::Run; also
  // InvalidValue for an unknown element type or `out` equal to q, k or v).
  // The first call of a new FFT size computes its kernel spectrum and waits
  // for `stream`.
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
