// Scaffold: replaced by the implementation.
#include "kernels/cuda/attention.h"
namespace h3::kernels {
cudaError_t AttentionPrefillCuda(const AttentionParams&, cudaStream_t) { return cudaErrorNotSupported; }
size_t AttentionDecodeWorkspaceBytes(const AttentionShape&, int, int64_t) { return 0; }
cudaError_t AttentionDecodeCuda(const AttentionDecodeParams&, int64_t, void*, size_t, cudaStream_t) { return cudaErrorNotSupported; }
}  // namespace h3::kernels
