#ifndef H3_KERNELS_CUDA_H3_PREFILL_FUSED_H_
#define H3_KERNELS_CUDA_H3_PREFILL_FUSED_H_

// FlashConv: the fused H3 prefill kernel (see h3_prefill_fused_kernel.cu for
// the algorithm). Internal to H3PrefillCuda, which checks H3FusedSupports
// first.

#include <cuda_runtime_api.h>

#include <memory>

#include "kernels/cuda/h3_prefill.h"
#include "kernels/h3.h"
#include "kernels/h3_prefill_packing.h"

namespace h3::kernels {

class H3PrefillFused {
 public:
  // `device_weights` holds device pointers that outlive this object;
  // `host_weights` the same layer in host memory (read during the call).
  // Precomputes the DFT matrices and the permuted kernel spectra of every
  // chunk size the kernel uses, and the weights' tables of
  // kernels/flashconv_setup.h (on the host; synchronous).
  static cudaError_t Create(const H3Weights& host_weights,
                            const H3Weights& device_weights,
                            std::unique_ptr<H3PrefillFused>* out);
  ~H3PrefillFused();

  // REQUIRES: params.time == 1, H3FusedSupports(shape), CheckPacked(params).
  // One launch per PlanPackedLaunches entry, all on `stream`.
  cudaError_t RunPacked(const H3PrefillPackedParams& params,
                        cudaStream_t stream);

 private:
  struct Impl;
  explicit H3PrefillFused(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace h3::kernels

#endif  // H3_KERNELS_CUDA_H3_PREFILL_FUSED_H_
