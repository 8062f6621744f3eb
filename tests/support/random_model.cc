#include "tests/support/random_model.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "base/status_macros.h"
#include "loader/model_file.h"
#include "loader/safetensors.h"

namespace h3::testing {
namespace {

// Random values shaped like a trained model's, chosen by tensor name.
std::vector<float> RandomTensor(const std::string& name, int64_t numel,
                                const loader::ModelConfig& config,
                                std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> v(numel);
  const int64_t modes = config.d_state / 2;
  for (int64_t i = 0; i < numel; ++i) {
    float x = normal(rng);
    if (absl::EndsWith(name, "inv_freq")) {
      x = static_cast<float>(1.0 /
                             std::pow(10000.0, 2.0 * i / config.rotary_dim));
    } else if (absl::EndsWith(name, "log_dt")) {
      x = std::log(0.001f) + uniform(rng) * std::log(100.0f);
    } else if (absl::EndsWith(name, "inv_A_real")) {
      x = std::log(0.5f) + 0.1f * x;
    } else if (absl::EndsWith(name, "A_imag")) {
      x = 3.14159265f * static_cast<float>(i % modes);
    } else if (absl::StrContains(name, "norm") ||
               absl::StrContains(name, "ln_f")) {
      x = absl::EndsWith(name, "weight") ? 1.0f + 0.1f * x : 0.1f * x;
    } else if (absl::EndsWith(name, ".bias")) {
      x *= 0.02f;
    } else if (absl::StrContains(name, "kernel.")) {
      x *= 0.5f;
    } else if (!absl::EndsWith(name, "D")) {
      x *= 0.1f;  // linear and embedding weights
    }
    v[i] = x;
  }
  return v;
}

}  // namespace

loader::ModelConfig SmallHybridConfig(int64_t vocab_size) {
  loader::ModelConfig c;
  c.d_model = 16;
  c.n_layer = 2;
  c.attn_layer_idx = {1};
  c.n_heads = 2;
  c.head_dim = 1;
  c.d_state = 8;
  c.d_inner = 64;
  c.vocab_size = c.padded_vocab_size = vocab_size;
  return c;
}

absl::Status WriteRandomModel(const loader::ModelConfig& config,
                              const std::string& path, uint32_t seed) {
  std::vector<loader::SafetensorsWriter::Tensor> tensors;
  const auto expected = loader::ExpectedTensors(config);
  for (const auto& t : expected) {
    tensors.push_back({t.name, loader::DType::kF32, t.shape});
  }
  H3_ASSIGN_OR_RETURN(
      std::unique_ptr<loader::SafetensorsWriter> writer,
      loader::SafetensorsWriter::Create(
          path, tensors, loader::ModelFileMetadata(config, "random", "")));
  std::mt19937 rng(seed);
  for (const auto& t : expected) {
    int64_t numel = 1;
    for (int64_t s : t.shape) numel *= s;
    const std::vector<float> values = RandomTensor(t.name, numel, config, rng);
    H3_RETURN_IF_ERROR(
        writer->Append({reinterpret_cast<const uint8_t*>(values.data()),
                        values.size() * sizeof(float)}));
  }
  return writer->Finish();
}

}  // namespace h3::testing
