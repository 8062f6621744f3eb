// SESSION SCAFFOLD: replaced by the real implementation before this session ends.
#include "kernels/cuda/h3_prefill_fused.h"

namespace h3::kernels {

struct H3PrefillFused::Impl {};
H3PrefillFused::H3PrefillFused(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
H3PrefillFused::~H3PrefillFused() = default;
cudaError_t H3PrefillFused::Create(const H3Weights&, std::unique_ptr<H3PrefillFused>*) {
  return cudaErrorNotSupported;
}
cudaError_t H3PrefillFused::Run(const H3PrefillCudaParams&, cudaStream_t) {
  return cudaErrorNotSupported;
}
}  // namespace h3::kernels
