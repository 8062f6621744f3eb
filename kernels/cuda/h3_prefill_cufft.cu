// SESSION SCAFFOLD: replaced by the real implementation before this session
// ends.
#include "kernels/cuda/h3_prefill_cufft.h"

namespace h3::kernels {

struct H3PrefillCufft::Impl {};
H3PrefillCufft::H3PrefillCufft(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
H3PrefillCufft::~H3PrefillCufft() = default;
cudaError_t H3PrefillCufft::Create(const H3Weights&,
                                   std::unique_ptr<H3PrefillCufft>*) {
  return cudaErrorNotSupported;
}
cudaError_t H3PrefillCufft::Run(const H3PrefillCudaParams&, cudaStream_t) {
  return cudaErrorNotSupported;
}
cudaError_t H3KernelSpectrumCuda(const H3Weights&, int, float*, cudaStream_t) {
  return cudaErrorNotSupported;
}
}  // namespace h3::kernels
