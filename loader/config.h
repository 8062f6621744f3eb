#ifndef H3_LOADER_CONFIG_H_
#define H3_LOADER_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loader/dtype.h"

namespace h3::loader {

// The canonical (layout 1) tensor names of docs/model.md.
inline constexpr absl::string_view kEmbeddingTensor =
    "backbone.embeddings.word_embeddings.weight";
// "backbone.layers.<layer>.<rest>", e.g. LayerTensorName(3, "norm1.weight").
std::string LayerTensorName(int64_t layer, absl::string_view rest);

// The shape of a hybrid H3 language model (docs/model.md).
struct ModelConfig {
  int64_t d_model = 0;
  int64_t n_layer = 0;
  std::vector<int64_t> attn_layer_idx;  // ascending, 0-based
  int64_t n_heads = 0;     // attention heads; 0 when there is no attention
  int64_t head_dim = 1;    // H3 head dimension (1 in the hybrid models)
  int64_t d_state = 64;    // SSM state size N
  int64_t d_inner = 0;     // MLP hidden size (4 * d_model in released models)
  int64_t vocab_size = 0;  // real tokens (50257 for GPT-2 BPE)
  int64_t padded_vocab_size = 0;  // rows of the embedding
  int64_t rotary_dim = 0;         // 0: no rotary embedding
  double layer_norm_epsilon = 1e-5;
  ElementType dtype = ElementType::kF32;  // of linear/embedding/norm weights

  bool IsAttention(int64_t layer) const;
  // H3 heads H = d_model / head_dim.
  int64_t ssm_heads() const { return head_dim > 0 ? d_model / head_dim : 0; }

  bool operator==(const ModelConfig&) const = default;
};

// The config as the JSON object stored in model files (keys d_model, n_layer,
// attn_layer_idx, n_heads, head_dim, d_state, d_inner, vocab_size,
// padded_vocab_size, rotary_dim, layer_norm_epsilon, dtype).
std::string ConfigToJson(const ModelConfig& config);

// Inverse of ConfigToJson, with ValidateConfig. DataLoss for malformed JSON,
// missing keys or values out of range.
absl::StatusOr<ModelConfig> ConfigFromJson(absl::string_view json);

// Checks the config's internal consistency (sizes positive and divisible,
// attention indices in range, rotary_dim even and within an attention head).
// InvalidArgument naming the offending field.
absl::Status ValidateConfig(const ModelConfig& config);

// A released model (the table of docs/model.md).
struct Preset {
  absl::string_view name;
  int64_t d_model;
  int64_t n_layer;
  std::vector<int64_t> attn_layer_idx;
  int64_t n_heads;
  int64_t rotary_dim;
};

// The presets h3-125m, h3-355m, h3-1.3b, h3-2.7b and h3-2.7b-rotary.
const std::vector<Preset>& Presets();

// The preset called `name`; InvalidArgument listing the known names.
absl::StatusOr<const Preset*> FindPreset(absl::string_view name);

// Tensor name -> shape, as found in a checkpoint (canonical names).
using ShapeMap = std::map<std::string, std::vector<int64_t>>;

// What shapes cannot tell, from the command line.
struct ConfigHints {
  const Preset* preset = nullptr;
  std::optional<int64_t> n_heads;
  std::optional<int64_t> rotary_dim;
  std::optional<int64_t> vocab_size;
};

// Infers the config from tensor names and shapes (d_model and the padded
// vocabulary from the embedding, n_layer from layer indices, attention layers
// from Wqkv, head_dim and d_state from the SSM kernel, rotary_dim from
// inv_freq) and completes it with `hints`. The real vocabulary is 50257 when
// the padded one is 50257..50264 (GPT-2 BPE), else the padded size, unless a
// hint gives it. InvalidArgument when a hint contradicts the shapes, when a
// model with attention gets no head count, or when the shapes needed for
// inference are missing or inconsistent (naming the tensor).
absl::StatusOr<ModelConfig> InferConfig(const ShapeMap& shapes,
                                        const ConfigHints& hints);

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool keep_fp32 = false;   // SSM parameters and inv_freq: never narrowed
  bool computable = false;  // inv_freq: computed when the checkpoint lacks it
};

// Every tensor a model of `config` has, in serving order (embedding, layers,
// final norm), without the tied lm_head.
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& config);

// Checks `shapes` against ExpectedTensors(config): every tensor present
// (except computable ones) with its shape, nothing unexpected except an
// `lm_head.weight` shaped like the embedding. InvalidArgument naming the
// tensor and the expected and found shapes.
absl::Status CheckShapes(const ModelConfig& config, const ShapeMap& shapes);

// "[a, b, c]".
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace h3::loader

#endif  // H3_LOADER_CONFIG_H_
