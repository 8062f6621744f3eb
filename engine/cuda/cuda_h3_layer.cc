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
      : prefill_(std::move(prefill)),
        stream_(stream),
        owner_(owner),
        type_(owner.activation_type()) {}

  ~CudaH3Layer() override { cudaFree(scratch_); }

  absl::Status Prefill(int64_t start, int64_t length, const void* qkv,
                       void* out, const kernels::H3State& state) override {
    const int d = prefill_->device_weights().shape.d_model;
    kernels::H3PrefillCudaParams p;
    p.batch = 1;
    p.start = start;
    p.length = length;
    p.type = type_;
    p.shift_state = state.shift;
    p.diag_state = state.diag;
    if (prefill_->path() == kernels::H3PrefillPath::kCufft) {
      // cuFFT reads any layout: q, k, v straight from the q|k|v rows.
      p.layout = {length * 3 * d, 3 * d, 1};
      p.q = qkv;
      p.k = ElementAt(qkv, d, type_);
      p.v = ElementAt(qkv, 2 * d, type_);
      return RunCufft(p, length, d, out);
    }
    // The fused kernel reads channel-major q, k, v: transpose in and out.
    H3_RETURN_IF_ERROR(Reserve(4 * length * d));
    Profiler* const prof = owner_.profiler();
    {
      ProfileRange range(prof, "transpose_in");
      H3_CUDA_RETURN_IF_ERROR(kernels::TransposeToChannelMajor(
          qkv, length, 3 * d, 3 * d, type_, scratch_, stream_));
    }
    p.layout = SequenceLayout::ChannelMajor(d, length);
    p.q = scratch_;
    p.k = ElementAt(scratch_, d * length, type_);
    p.v = ElementAt(scratch_, 2 * d * length, type_);
    p.out = ElementAt(scratch_, 3 * d * length, type_);
    {
      ProfileRange range(prof, "fused_conv");
      H3_CUDA_RETURN_IF_ERROR(prefill_->Run(p, stream_));
    }
    ProfileRange range(prof, "transpose_out");
    H3_CUDA_RETURN_IF_ERROR(kernels::TransposeToTokenMajor(
        p.out, length, d, type_, out, d, stream_));
    return absl::OkStatus();
  }

  absl::Status Step(int batch, const void* qkv, void* out,
                    const kernels::H3State* states,
                    const int64_t* positions) override {
    const kernels::H3Weights& w = prefill_->device_weights();
    const int64_t d = w.shape.d_model;
    kernels::H3StepParams p;
    p.w = w;
    p.batch = batch;
    p.q = qkv;
    p.k = ElementAt(qkv, d, type_);
    p.v = ElementAt(qkv, 2 * d, type_);
    p.out = out;
    p.io_type = type_;
    p.states = states;
    p.input_stride = 3 * d;
    p.positions = positions;
    H3_CUDA_RETURN_IF_ERROR(kernels::H3StepCuda(p, stream_));
    return absl::OkStatus();
  }

 private:
  // The cuFFT path with token-major strided inputs; its output layout is the
  // inputs' (row stride 3d), so it lands in scratch and is compacted.
  absl::Status RunCufft(kernels::H3PrefillCudaParams& p, int64_t length, int d,
                        void* out) {
    H3_RETURN_IF_ERROR(Reserve(3 * length * d));
    p.out = scratch_;
    {
      ProfileRange range(owner_.profiler(), "cufft_conv");
      H3_CUDA_RETURN_IF_ERROR(prefill_->Run(p, stream_));
    }
    ProfileRange range(owner_.profiler(), "compact");
    const size_t size = ElementSize(type_);
    H3_CUDA_RETURN_IF_ERROR(
        cudaMemcpy2DAsync(out, d * size, scratch_, 3 * d * size, d * size,
                          length, cudaMemcpyDeviceToDevice, stream_));
    return absl::OkStatus();
  }

  // Scratch of at least `elements` of the activation type; prefill is never
  // captured into a graph, so growing it (after the stream has drained) is
  // safe.
  absl::Status Reserve(int64_t elements) {
    if (elements <= capacity_) return absl::OkStatus();
    H3_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    cudaFree(scratch_);
    scratch_ = nullptr;
    capacity_ = 0;
    H3_CUDA_RETURN_IF_ERROR(
        cudaMalloc(&scratch_, elements * ElementSize(type_)));
    capacity_ = elements;
    return absl::OkStatus();
  }

  std::unique_ptr<kernels::H3PrefillCuda> prefill_;
  cudaStream_t stream_;
  const Backend& owner_;
  const ElementType type_;  // of qkv, out and the scratch
  void* scratch_ = nullptr;
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
