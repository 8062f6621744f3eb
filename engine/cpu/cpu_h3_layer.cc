// The CPU backend's H3 layer: the kernels' CPU twins over the layer's own
// copy of its SSM parameters, with the kernel spectrum of each FFT size
// computed on first use.
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_backend.h"

namespace h3::engine {
namespace {

class CpuH3Layer final : public H3Layer {
 public:
  explicit CpuH3Layer(const kernels::H3Weights& w) : shape_(w.shape) {
    const int64_t d = shape_.d_model, n = shape_.d_state;
    const int64_t complex = 2 * int64_t{shape_.heads()} * shape_.modes();
    auto copy = [](const float* src, int64_t size) {
      return std::vector<float>(src, src + size);
    };
    shift_kernel_ = copy(w.shift_kernel, d * n);
    shift_D_ = copy(w.shift_D, d);
    dA_ = copy(w.dA, complex);
    dB_ = copy(w.dB, complex);
    C_ = copy(w.C, complex);
    D_ = copy(w.D, shape_.heads());
  }

  absl::Status Prefill(int64_t start, int64_t length, const float* qkv,
                       float* out, const kernels::H3State& state) override {
    const int64_t d = shape_.d_model;
    // The CPU prefill reads q, k and v as separate [length, d] blocks.
    q_.resize(length * d);
    k_.resize(length * d);
    v_.resize(length * d);
    for (int64_t t = 0; t < length; ++t) {
      const float* row = qkv + t * 3 * d;
      std::copy(row, row + d, q_.data() + t * d);
      std::copy(row + d, row + 2 * d, k_.data() + t * d);
      std::copy(row + 2 * d, row + 3 * d, v_.data() + t * d);
    }
    const int nfft = kernels::H3FftSize(length);
    kernels::H3PrefillCpu({Weights(), start, length, q_.data(), k_.data(),
                           v_.data(), out, state, Spectrum(nfft), nfft});
    return absl::OkStatus();
  }

  absl::Status Step(int batch, const float* qkv, float* out,
                    const kernels::H3State* states,
                    const int64_t* positions) override {
    const int64_t d = shape_.d_model;
    kernels::H3StepCpu({Weights(), batch, qkv, qkv + d, qkv + 2 * d, out,
                        states, 3 * d, positions});
    return absl::OkStatus();
  }

 private:
  kernels::H3Weights Weights() const {
    return {shape_,     shift_kernel_.data(), shift_D_.data(),
            dA_.data(), dB_.data(),           C_.data(),
            D_.data()};
  }

  const float* Spectrum(int nfft) {
    auto [it, inserted] = spectra_.try_emplace(nfft);
    if (inserted) {
      it->second.resize(2 * int64_t{shape_.heads()} * (nfft / 2 + 1));
      kernels::H3KernelSpectrum(Weights(), nfft, it->second.data());
    }
    return it->second.data();
  }

  kernels::H3Shape shape_;
  std::vector<float> shift_kernel_, shift_D_, dA_, dB_, C_, D_;
  std::map<int, std::vector<float>> spectra_;  // nfft -> H3KernelSpectrum
  std::vector<float> q_, k_, v_;
};

}  // namespace

std::unique_ptr<H3Layer> MakeCpuH3Layer(const kernels::H3Weights& weights) {
  return std::make_unique<CpuH3Layer>(weights);
}

}  // namespace h3::engine
