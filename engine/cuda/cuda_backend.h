#ifndef H3_ENGINE_CUDA_CUDA_BACKEND_H_
#define H3_ENGINE_CUDA_CUDA_BACKEND_H_

// The CUDA backend: every op on one GPU, in order on one stream; weights in
// fp32, fp16 or bf16; SSM states, the KV cache and the residual stream in
// fp32; the activations that feed products in fp32 or, with
// half_activations, in the weights' type.

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"

namespace h3::engine::cuda {

// Weights in `type`. From `options` (engine/backend.h, BackendOptions):
// `attention`, the prefill attention kernel (kFlash uses `type`, fp16 or
// bf16, for its operands); `batch_invariant`, every Linear by SkinnyGemmCuda
// (in pieces of at most 64 rows), never cuBLASLt; `half_activations`, the
// activations that feed products in `type` (REQUIRES: 16-bit `type`). The
// device and the weight type in `options` are not read.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(
    int device, ElementType type, const BackendOptions& options);

// The backend's H3 layer (cuda_h3_layer.cc). `stream` is the backend's.
// fp32 weights take the cuFFT prefill (exact fp32 arithmetic); 16-bit ones
// the fused FlashConv kernel where the layer's shape allows it. Prefill
// times its parts (transposes, convolution) in nested ranges of
// owner.profiler() while it is on; `owner` must outlive the layer.
// qkv and out hold owner.activation_type().
absl::StatusOr<std::unique_ptr<H3Layer>> MakeCudaH3Layer(
    const kernels::H3Weights& weights, ElementType type, cudaStream_t stream,
    const Backend& owner);

// CUDA events recorded on `stream` (cuda_profile_clock.cc).
std::unique_ptr<ProfileClock> MakeCudaProfileClock(cudaStream_t stream);

}  // namespace h3::engine::cuda

#endif  // H3_ENGINE_CUDA_CUDA_BACKEND_H_
