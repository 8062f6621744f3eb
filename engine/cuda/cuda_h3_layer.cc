// The CUDA backend's H3 layer: H3PrefillCuda for prefill, H3StepCuda for
// decoding, both over the device copy of the layer's parameters that
// H3PrefillCuda owns.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/h3_prefill.h"
#include "kernels/cuda/h3_step.h"

namespace h3::engine::cuda {
namespace {

using kernels::SequenceLayout;

class CudaH3Layer final : public H3Layer {
 public:
  CudaH3Layer(std::unique_ptr<kernels::H3PrefillCuda> prefill,
              cudaStream_t stream, const Backend& owner)
      : prefill_(std::move(prefill)), stream_(stream), owner_(owner) {}

  ~CudaH3Layer() override { cudaFree(channel_major_); }

  absl::Status Prefill(int64_t start, int64_t length, const float* qkv,
                       float* out, const kernels::H3State& state) override {
    const int d = prefill_->device_weights().shape.d_model;
    kernels::H3PrefillCudaParams p;
    p.batch = 1;
    p.start = start;
    p.length = length;
    p.type = ElementType::kF32;
    p.shift_state = state.shift;
    p.diag_state = state.diag;
    if (prefill_->path() == kernels::H3PrefillPath::kCufft) {
      // cuFFT reads any layout: q, k, v straight from the q|k|v rows.
      p.layout = {length * 3 * d, 3 * d, 1};
      p.q = qkv;
      p.k = qkv + d;
      p.v = qkv + 2 * d;
      return RunCufft(p, length, d, out);
    }
    // The fused kernel reads channel-major q, k, v: transpose in and out.
    H3_RETURN_IF_ERROR(Reserve(4 * length * d));
    Profiler* const prof = owner_.profiler();
    float* cm = channel_major_;
    {
      ProfileRange range(prof, "transpose_in");
      H3_CUDA_RETURN_IF_ERROR(kernels::TransposeToChannelMajor(
          qkv, length, 3 * d, 3 * d, ElementType::kF32, cm, stream_));
    }
    p.layout = SequenceLayout::ChannelMajor(d, length);
    p.q = cm;
    p.k = cm + d * length;
    p.v = cm + 2 * d * length;
    p.out = cm + 3 * d * length;
    {
      ProfileRange range(prof, "fused_conv");
      H3_CUDA_RETURN_IF_ERROR(prefill_->Run(p, stream_));
    }
    ProfileRange range(prof, "transpose_out");
    H3_CUDA_RETURN_IF_ERROR(kernels::TransposeToTokenMajor(
        cm + 3 * d * length, length, d, ElementType::kF32, out, d, stream_));
    return absl::OkStatus();
  }

  absl::Status Step(int batch, const float* qkv, float* out,
                    const kernels::H3State* states,
                    const int64_t* positions) override {
    const kernels::H3Weights& w = prefill_->device_weights();
    const int64_t d = w.shape.d_model;
    H3_CUDA_RETURN_IF_ERROR(kernels::H3StepCuda(
        {w, batch, qkv, qkv + d, qkv + 2 * d, out, states, 3 * d, positions},
        stream_));
    return absl::OkStatus();
  }

 private:
  // The cuFFT path with token-major strided inputs; its output layout is the
  // inputs' (row stride 3d), so it lands in scratch and is compacted.
  absl::Status RunCufft(kernels::H3PrefillCudaParams& p, int64_t length, int d,
                        float* out) {
    H3_RETURN_IF_ERROR(Reserve(3 * length * d));
    p.out = channel_major_;
    {
      ProfileRange range(owner_.profiler(), "cufft_conv");
      H3_CUDA_RETURN_IF_ERROR(prefill_->Run(p, stream_));
    }
    ProfileRange range(owner_.profiler(), "compact");
    H3_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
        out, d * sizeof(float), channel_major_, 3 * d * sizeof(float),
        d * sizeof(float), length, cudaMemcpyDeviceToDevice, stream_));
    return absl::OkStatus();
  }

  // Scratch of at least `floats`; prefill is never captured into a graph,
  // so growing it (after the stream has drained) is safe.
  absl::Status Reserve(int64_t floats) {
    if (floats <= capacity_) return absl::OkStatus();
    H3_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    cudaFree(channel_major_);
    channel_major_ = nullptr;
    capacity_ = 0;
    H3_CUDA_RETURN_IF_ERROR(cudaMalloc(
        reinterpret_cast<void**>(&channel_major_), floats * sizeof(float)));
    capacity_ = floats;
    return absl::OkStatus();
  }

  std::unique_ptr<kernels::H3PrefillCuda> prefill_;
  cudaStream_t stream_;
  const Backend& owner_;
  float* channel_major_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<H3Layer>> MakeCudaH3Layer(
    const kernels::H3Weights& weights, ElementType type, cudaStream_t stream,
    const Backend& owner) {
  kernels::H3PrefillCuda::Options options;
  // The fused kernel rounds its operands to fp16 (docs/flashconv.md): exact
  // fp32 serving takes the cuFFT path.
  options.prefer = type == ElementType::kF32 ? kernels::H3PrefillPath::kCufft
                                             : kernels::H3PrefillPath::kFused;
  std::unique_ptr<kernels::H3PrefillCuda> prefill;
  H3_CUDA_RETURN_IF_ERROR(
      kernels::H3PrefillCuda::Create(weights, options, &prefill));
  return std::make_unique<CudaH3Layer>(std::move(prefill), stream, owner);
}

}  // namespace h3::engine::cuda
