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
#include "kernels/cuda/launch_order.h"

namespace h3::engine::cuda {

// Weights in `type`. From `options` (engine/backend.h, BackendOptions):
// `attention`, the prefill attention kernel (kFlash uses `type`, fp16 or
// bf16, for its operands); `batch_invariant`, every Linear by SkinnyGemmCuda
// (in pieces of at most 64 rows), or with `batch_invariant_kernel` kCublasLt
// by cuBLASLt with one pinned algorithm per shape, or with kStream by
// StreamGemmCuda in pieces of 64 rows (REQUIRES: 16-bit `type`);
// `decode_products` kStream, without batch_invariant, the products of at most
// 64 rows by StreamGemmCuda where it takes them; `half_activations`, the
// activations that feed products in `type` (REQUIRES: 16-bit `type`); `pdl`,
// on a device of compute capability 9.0 or later, the decode kernels that
// take a kernels::LaunchOrder launched with kOverlapPrior while the
// profiler is off. The device and the weight type in `options` are not
// read.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(
    int device, ElementType type, const BackendOptions& options);

// Device memory the backend's H3 layers share for their prefill (q|k|v
// transposed and the outputs, or the cuFFT path's strided output): they run
// one at a time on the backend's stream, so one buffer serves every layer.
// It grows (after the stream has drained; prefill is never captured in a
// graph) and never shrinks. cuda_h3_layer.cc.
class PrefillScratch {
 public:
  explicit PrefillScratch(cudaStream_t stream) : stream_(stream) {}
  ~PrefillScratch();
  // At least `bytes` of device memory, valid until the next Reserve.
  absl::StatusOr<void*> Reserve(int64_t bytes);

  PrefillScratch(const PrefillScratch&) = delete;
  PrefillScratch& operator=(const PrefillScratch&) = delete;

 private:
  cudaStream_t stream_;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

// The backend's H3 layer (cuda_h3_layer.cc). `stream` is the backend's.
// fp32 weights take the cuFFT prefill (exact fp32 arithmetic); 16-bit ones
// the fused FlashConv kernel, or the chunked one (`kernel`), where the
// layer's shape allows it. Prefill
// times its parts (transposes, convolution) in nested ranges of
// owner.profiler() while it is on; `owner` must outlive the layer.
// qkv and out hold owner.activation_type(). `scratch` (the owner's) must
// outlive the layer. `pdl`: the decode step launches with
// kernels::LaunchOrder::kOverlapPrior while owner.profiler() is off.
absl::StatusOr<std::unique_ptr<H3Layer>> MakeCudaH3Layer(
    const kernels::H3Weights& weights, ElementType type, H3PrefillKernel kernel,
    bool pdl, cudaStream_t stream, const Backend& owner,
    PrefillScratch& scratch);

// How the decode kernels that take a kernels::LaunchOrder launch on a
// backend whose BackendOptions::pdl resolved to `pdl` (requested, and the
// device takes it): overlapped, except while owner.profiler() times each op
// alone.
inline kernels::LaunchOrder DecodeLaunchOrder(bool pdl, const Backend& owner) {
  return pdl && owner.profiler() == nullptr
             ? kernels::LaunchOrder::kOverlapPrior
             : kernels::LaunchOrder::kAfterPrior;
}

// CUDA events recorded on `stream` (cuda_profile_clock.cc).
std::unique_ptr<ProfileClock> MakeCudaProfileClock(cudaStream_t stream);

}  // namespace h3::engine::cuda

#endif  // H3_ENGINE_CUDA_CUDA_BACKEND_H_
