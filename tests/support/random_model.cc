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

// How RandomTensor shapes a tensor's values, from its name.
enum class Kind {
  kInvFreq,
  kLogDt,
  kInvAReal,
  kAImag,
  kNormWeight,
  kNormBias,
  kBias,
  kSsmKernel,
  kD,
  kLinear
};

Kind KindOf(const std::string& name) {
  if (absl::EndsWith(name, "inv_freq")) return Kind::kInvFreq;
  if (absl::EndsWith(name, "log_dt")) return Kind::kLogDt;
  if (absl::EndsWith(name, "inv_A_real")) return Kind::kInvAReal;
  if (absl::EndsWith(name, "A_imag")) return Kind::kAImag;
  if (absl::StrContains(name, "norm") || absl::StrContains(name, "ln_f")) {
    return absl::EndsWith(name, "weight") ? Kind::kNormWeight : Kind::kNormBias;
  }
  if (absl::EndsWith(name, ".bias")) return Kind::kBias;
  if (absl::StrContains(name, "kernel.")) return Kind::kSsmKernel;
  if (absl::EndsWith(name, "D")) return Kind::kD;
  return Kind::kLinear;  // linear and embedding weights
}

// Random values shaped like a trained model's, chosen by tensor name. The
// name is classified once, outside the loop over elements: a 1.3B model
// has 1.3e9 of them (bench/engine_table4.cc writes one).
std::vector<float> RandomTensor(const std::string& name, int64_t numel,
                                const loader::ModelConfig& config,
                                std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> v(numel);
  const int64_t modes = config.d_state / 2;
  const Kind kind = KindOf(name);
  for (int64_t i = 0; i < numel; ++i) {
    float x = normal(rng);
    switch (kind) {
      case Kind::kInvFreq:
        x = static_cast<float>(1.0 /
                               std::pow(10000.0, 2.0 * i / config.rotary_dim));
        break;
      case Kind::kLogDt:
        x = std::log(0.001f) + uniform(rng) * std::log(100.0f);
        break;
      case Kind::kInvAReal:
        x = std::log(0.5f) + 0.1f * x;
        break;
      case Kind::kAImag:
        x = 3.14159265f * static_cast<float>(i % modes);
        break;
      case Kind::kNormWeight:
        x = 1.0f + 0.1f * x;
        break;
      case Kind::kNormBias:
        x = 0.1f * x;
        break;
      case Kind::kBias:
        x *= 0.02f;
        break;
      case Kind::kSsmKernel:
        x *= 0.5f;
        break;
      case Kind::kD:
        break;
      case Kind::kLinear:
        x *= 0.1f;
        break;
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
    tensors.push_back({t.name, ElementType::kF32, t.shape});
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
