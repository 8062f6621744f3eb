#ifndef H3_ENGINE_CUDA_CUDA_BACKEND_H_
#define H3_ENGINE_CUDA_CUDA_BACKEND_H_

// The CUDA backend: every op on one GPU, in order on one stream; weights in
// fp32, fp16 or bf16, activations, SSM states and the KV cache in fp32.

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"

namespace h3::engine::cuda {

// `attention`: the prefill attention kernel (engine/backend.h); kFlash
// uses `type` (fp16 or bf16) for its operands. batch_invariant: every Linear
// by SkinnyGemmCuda (in pieces of at most 64 rows), never cuBLASLt; see
// BackendOptions::batch_invariant.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(
    int device, ElementType type,
    AttentionKernel attention = AttentionKernel::kFma,
    bool batch_invariant = false);

// The backend's H3 layer (cuda_h3_layer.cc). `stream` is the backend's.
// fp32 weights take the cuFFT prefill (exact fp32 arithmetic); 16-bit ones
// the fused FlashConv kernel where the layer's shape allows it. Prefill
// times its parts (transposes, convolution) in nested ranges of
// owner.profiler() while it is on; `owner` must outlive the layer.
absl::StatusOr<std::unique_ptr<H3Layer>> MakeCudaH3Layer(
    const kernels::H3Weights& weights, ElementType type, cudaStream_t stream,
    const Backend& owner);

// CUDA events recorded on `stream` (cuda_profile_clock.cc).
std::unique_ptr<ProfileClock> MakeCudaProfileClock(cudaStream_t stream);

}  // namespace h3::engine::cuda

#endif  // H3_ENGINE_CUDA_CUDA_BACKEND_H_
