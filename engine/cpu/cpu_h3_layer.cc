// The CPU backend's H3 layer: prefill and decoding both by the recurrence
// (H3ScanCpu, H3StepCpu over one H3RecurrentWeightsCpu), reading q, k and v
// in place from the fused projection's rows. A prefill runs the step's own
// arithmetic token by token, so a sequence's outputs and state are the same
// bits however its prompt is split into chunks and whether its tokens were
// prefilled or decoded. With 16-bit activations, q|k|v is widened to fp32
// first and the output rounded once.
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/half_float.h"
#include "engine/cpu/cpu_backend.h"

namespace h3::engine {
namespace {

class CpuH3Layer final : public H3Layer {
 public:
  CpuH3Layer(const kernels::H3Weights& w, ElementType activations)
      : weights_(w), type_(activations) {}

  // The recurrence gives the same bits however a segment is cut, so each
  // segment goes whole, whatever `piece`.
  absl::Status Prefill(absl::Span<const H3Segment> segments, int64_t,
                       const void* qkv, void* out) override {
    const int64_t d = weights_.shape().d_model;
    int64_t row = 0;
    for (const H3Segment& s : segments) {
      if (s.length < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("h3 prefill: a segment of length ", s.length));
      }
      const float* in =
          Widen(ElementAt(qkv, row * 3 * d, type_), s.length * 3 * d);
      void* seg_out = ElementAt(out, row * d, type_);
      kernels::H3ScanParams params;
      params.w.shape = weights_.shape();
      params.start = s.start;
      params.length = s.length;
      params.q = in;  // [length, 3d]: q | k | v
      params.k = in + d;
      params.v = in + 2 * d;
      params.input_stride = 3 * d;
      params.out = Output(seg_out, s.length * d);
      params.state = s.state;
      kernels::H3ScanCpu(params, weights_);
      Narrow(seg_out, s.length * d);
      row += s.length;
    }
    return absl::OkStatus();
  }

  absl::Status Step(int batch, const void* qkv, void* out,
                    const kernels::H3State* states,
                    const int64_t* positions) override {
    const int64_t d = weights_.shape().d_model;
    const float* in = Widen(qkv, batch * 3 * d);
    kernels::H3StepParams params;
    params.w.shape = weights_.shape();
    params.batch = batch;
    params.q = in;  // [batch, 3d]: q | k | v
    params.k = in + d;
    params.v = in + 2 * d;
    params.out = Output(out, batch * d);
    params.states = states;
    params.input_stride = 3 * d;
    params.positions = positions;
    kernels::H3StepCpu(params, weights_);
    Narrow(out, batch * d);
    return absl::OkStatus();
  }

 private:
  // 16-bit activations around the fp32 recurrence: the inputs widened into
  // in_, the outputs computed into out_ and rounded once.
  const float* Widen(const void* qkv, int64_t n) {
    if (type_ == ElementType::kF32) return static_cast<const float*>(qkv);
    in_.resize(n);
    LoadFloats(qkv, type_, 0, n, in_.data());
    return in_.data();
  }
  float* Output(void* out, int64_t n) {
    if (type_ == ElementType::kF32) return static_cast<float*>(out);
    out_.resize(n);
    return out_.data();
  }
  void Narrow(void* out, int64_t n) {
    if (type_ != ElementType::kF32) StoreFloats(out_.data(), n, out, type_, 0);
  }

  const kernels::H3RecurrentWeightsCpu weights_;  // copied at construction
  const ElementType type_;                        // of qkv and out
  std::vector<float> in_, out_;
};

}  // namespace

std::unique_ptr<H3Layer> MakeCpuH3Layer(const kernels::H3Weights& weights,
                                        ElementType activations) {
  return std::make_unique<CpuH3Layer>(weights, activations);
}

}  // namespace h3::engine
