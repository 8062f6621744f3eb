// The CPU backend's H3 layer: prefill and decoding both by the recurrence
// (H3ScanCpu, H3StepCpu over one H3RecurrentWeightsCpu), reading q, k and v
// in place from the fused projection's rows. A prefill runs the step's own
// arithmetic token by token, so a sequence's outputs and state are the same
// bits however its prompt is split into chunks and whether its tokens were
// prefilled or decoded.
#include "engine/cpu/cpu_backend.h"

namespace h3::engine {
namespace {

class CpuH3Layer final : public H3Layer {
 public:
  explicit CpuH3Layer(const kernels::H3Weights& w) : weights_(w) {}

  absl::Status Prefill(int64_t start, int64_t length, const float* qkv,
                       float* out, const kernels::H3State& state) override {
    const int64_t d = weights_.shape().d_model;
    kernels::H3ScanParams params;
    params.w.shape = weights_.shape();
    params.start = start;
    params.length = length;
    params.q = qkv;  // [length, 3d]: q | k | v
    params.k = qkv + d;
    params.v = qkv + 2 * d;
    params.input_stride = 3 * d;
    params.out = out;
    params.state = state;
    kernels::H3ScanCpu(params, weights_);
    return absl::OkStatus();
  }

  absl::Status Step(int batch, const float* qkv, float* out,
                    const kernels::H3State* states,
                    const int64_t* positions) override {
    const int64_t d = weights_.shape().d_model;
    kernels::H3StepParams params;
    params.w.shape = weights_.shape();
    params.batch = batch;
    params.q = qkv;  // [batch, 3d]: q | k | v
    params.k = qkv + d;
    params.v = qkv + 2 * d;
    params.out = out;
    params.states = states;
    params.input_stride = 3 * d;
    params.positions = positions;
    kernels::H3StepCpu(params, weights_);
    return absl::OkStatus();
  }

 private:
  const kernels::H3RecurrentWeightsCpu weights_;  // copied at construction
};

}  // namespace

std::unique_ptr<H3Layer> MakeCpuH3Layer(const kernels::H3Weights& weights) {
  return std::make_unique<CpuH3Layer>(weights);
}

}  // namespace h3::engine
