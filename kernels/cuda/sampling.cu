// Scaffold: replaced by the implementation.
#include "kernels/cuda/sampling.h"
namespace h3::kernels {
size_t SampleWorkspaceBytes(int, int32_t) { return 0; }
cudaError_t SampleCuda(const SampleParams&, void*, size_t, cudaStream_t) { return cudaErrorNotSupported; }
}  // namespace h3::kernels
