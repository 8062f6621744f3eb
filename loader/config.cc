#include "loader/config.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace h3::loader {

std::string LayerTensorName(int64_t layer, absl::string_view rest) {
  return absl::StrCat("backbone.layers.", layer, ".", rest);
}

namespace {

constexpr int64_t kGpt2Vocab = 50257;
constexpr int64_t kMaxSize = int64_t{1} << 24;  // bounds every dimension

absl::StatusOr<std::vector<int64_t>> ShapeOf(const ShapeMap& shapes,
                                             const std::string& name,
                                             size_t rank) {
  auto it = shapes.find(name);
  if (it == shapes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint has no tensor ", name));
  }
  if (it->second.size() != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " has shape ", ShapeString(it->second),
                     ", expected ", rank, " dimensions"));
  }
  return it->second;
}

absl::Status Contradiction(absl::string_view what, int64_t given,
                           int64_t found) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " is ", given, " but the checkpoint has ", found));
}

}  // namespace

bool ModelConfig::IsAttention(int64_t layer) const {
  return std::find(attn_layer_idx.begin(), attn_layer_idx.end(), layer) !=
         attn_layer_idx.end();
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

const std::vector<Preset>& Presets() {
  static const std::vector<Preset>* presets = new std::vector<Preset>{
      {"h3-125m", 768, 12, {6}, 12, 0},
      {"h3-355m", 1024, 24, {8, 16}, 16, 0},
      {"h3-1.3b", 2048, 24, {8, 16}, 16, 0},
      {"h3-2.7b", 2560, 32, {8, 16, 24}, 20, 0},
      {"h3-2.7b-rotary", 2560, 32, {10, 21}, 20, 64},
  };
  return *presets;
}

absl::StatusOr<const Preset*> FindPreset(absl::string_view name) {
  std::vector<absl::string_view> names;
  for (const Preset& p : Presets()) {
    if (p.name == name) return &p;
    names.push_back(p.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown preset '", name, "' (known: ", absl::StrJoin(names, ", "), ")"));
}

absl::Status ValidateConfig(const ModelConfig& c) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("model config: ", what));
  };
  for (int64_t v : {c.d_model, c.n_layer, c.head_dim, c.d_state, c.d_inner,
                    c.vocab_size, c.padded_vocab_size}) {
    if (v <= 0 || v > kMaxSize) return bad("sizes must be in [1, 2^24]");
  }
  if (c.d_model % c.head_dim != 0) {
    return bad(absl::StrCat("head_dim ", c.head_dim,
                            " does not divide d_model ", c.d_model));
  }
  if (c.d_state % 2 != 0) return bad("d_state must be even");
  if (c.vocab_size > c.padded_vocab_size) {
    return bad(absl::StrCat("vocab_size ", c.vocab_size,
                            " exceeds the embedding's ", c.padded_vocab_size,
                            " rows"));
  }
  for (size_t i = 0; i < c.attn_layer_idx.size(); ++i) {
    const int64_t l = c.attn_layer_idx[i];
    if (l < 0 || l >= c.n_layer || (i > 0 && l <= c.attn_layer_idx[i - 1])) {
      return bad("attn_layer_idx must be ascending layer indices");
    }
  }
  if (c.attn_layer_idx.empty()) {
    if (c.n_heads != 0 || c.rotary_dim != 0) {
      return bad("n_heads and rotary_dim must be 0 without attention layers");
    }
    return absl::OkStatus();
  }
  if (c.n_heads <= 0 || c.d_model % c.n_heads != 0) {
    return bad(absl::StrCat("n_heads ", c.n_heads, " does not divide d_model ",
                            c.d_model));
  }
  if (c.rotary_dim < 0 || c.rotary_dim % 2 != 0 ||
      c.rotary_dim > c.d_model / c.n_heads) {
    return bad(absl::StrCat("rotary_dim ", c.rotary_dim,
                            " must be even and at most the head size ",
                            c.d_model / c.n_heads));
  }
  return absl::OkStatus();
}

std::string ConfigToJson(const ModelConfig& c) {
  nlohmann::ordered_json j = {
      {"d_model", c.d_model},
      {"n_layer", c.n_layer},
      {"attn_layer_idx", c.attn_layer_idx},
      {"n_heads", c.n_heads},
      {"head_dim", c.head_dim},
      {"d_state", c.d_state},
      {"d_inner", c.d_inner},
      {"vocab_size", c.vocab_size},
      {"padded_vocab_size", c.padded_vocab_size},
      {"rotary_dim", c.rotary_dim},
      {"layer_norm_epsilon", c.layer_norm_epsilon},
      {"dtype", DTypeFlag(c.dtype)},
  };
  return j.dump();
}

absl::StatusOr<ModelConfig> ConfigFromJson(absl::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("model config: ", what));
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  ModelConfig c;
  auto get_int = [&](const char* key, int64_t* out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) {
      return bad(absl::StrCat("'", key, "' missing or not an integer"));
    }
    *out = it->get<int64_t>();
    return absl::OkStatus();
  };
  H3_RETURN_IF_ERROR(get_int("d_model", &c.d_model));
  H3_RETURN_IF_ERROR(get_int("n_layer", &c.n_layer));
  H3_RETURN_IF_ERROR(get_int("n_heads", &c.n_heads));
  H3_RETURN_IF_ERROR(get_int("head_dim", &c.head_dim));
  H3_RETURN_IF_ERROR(get_int("d_state", &c.d_state));
  H3_RETURN_IF_ERROR(get_int("d_inner", &c.d_inner));
  H3_RETURN_IF_ERROR(get_int("vocab_size", &c.vocab_size));
  H3_RETURN_IF_ERROR(get_int("padded_vocab_size", &c.padded_vocab_size));
  H3_RETURN_IF_ERROR(get_int("rotary_dim", &c.rotary_dim));
  auto attn = j.find("attn_layer_idx");
  if (attn == j.end() || !attn->is_array() || attn->size() > kMaxSize) {
    return bad("'attn_layer_idx' missing or not an array");
  }
  for (const auto& v : *attn) {
    if (!v.is_number_integer()) return bad("'attn_layer_idx' not integers");
    c.attn_layer_idx.push_back(v.get<int64_t>());
  }
  auto eps = j.find("layer_norm_epsilon");
  if (eps == j.end() || !eps->is_number()) {
    return bad("'layer_norm_epsilon' missing or not a number");
  }
  c.layer_norm_epsilon = eps->get<double>();
  auto dtype = j.find("dtype");
  if (dtype == j.end() || !dtype->is_string()) return bad("'dtype' missing");
  absl::StatusOr<ElementType> dt = DTypeFromFlag(dtype->get<std::string>());
  if (!dt.ok()) return bad(dt.status().message());
  c.dtype = *dt;
  absl::Status valid = ValidateConfig(c);
  if (!valid.ok()) return absl::DataLossError(valid.message());
  return c;
}

absl::StatusOr<ModelConfig> InferConfig(const ShapeMap& shapes,
                                        const ConfigHints& hints) {
  ModelConfig c;
  H3_ASSIGN_OR_RETURN(std::vector<int64_t> emb,
                      ShapeOf(shapes, std::string(kEmbeddingTensor), 2));
  c.padded_vocab_size = emb[0];
  c.d_model = emb[1];

  // Layers present: backbone.layers.<i>.*
  std::set<int64_t> layers;
  for (const auto& [name, shape] : shapes) {
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, "backbone.layers.")) continue;
    int64_t i;
    if (!absl::SimpleAtoi(rest.substr(0, rest.find('.')), &i) || i < 0 ||
        i >= kMaxSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, " has no valid layer index"));
    }
    layers.insert(i);
    if (absl::EndsWith(rest, ".mixer.Wqkv.weight"))
      c.attn_layer_idx.push_back(i);
  }
  if (layers.empty()) {
    return absl::InvalidArgumentError("checkpoint has no backbone.layers.*");
  }
  c.n_layer = *layers.rbegin() + 1;
  std::sort(c.attn_layer_idx.begin(), c.attn_layer_idx.end());

  H3_ASSIGN_OR_RETURN(std::vector<int64_t> fc1,
                      ShapeOf(shapes, LayerTensorName(0, "mlp.fc1.weight"), 2));
  c.d_inner = fc1[0];

  for (int64_t i = 0; i < c.n_layer; ++i) {
    if (c.IsAttention(i)) continue;
    H3_ASSIGN_OR_RETURN(
        std::vector<int64_t> log_dt,
        ShapeOf(shapes, LayerTensorName(i, "mixer.kernel.kernel.log_dt"), 1));
    H3_ASSIGN_OR_RETURN(
        std::vector<int64_t> a_real,
        ShapeOf(shapes, LayerTensorName(i, "mixer.kernel.kernel.inv_A_real"),
                2));
    if (log_dt[0] <= 0 || c.d_model % log_dt[0] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", LayerTensorName(i, "mixer.kernel.kernel.log_dt"), " has ",
          log_dt[0], " heads, which do not divide d_model ", c.d_model));
    }
    c.head_dim = c.d_model / log_dt[0];
    c.d_state = 2 * a_real[1];
    break;
  }

  if (!c.attn_layer_idx.empty()) {
    const std::string inv_freq =
        LayerTensorName(c.attn_layer_idx[0], "mixer.rotary_emb.inv_freq");
    if (shapes.contains(inv_freq)) {
      H3_ASSIGN_OR_RETURN(std::vector<int64_t> f, ShapeOf(shapes, inv_freq, 1));
      c.rotary_dim = 2 * f[0];
    }
  }

  if (const Preset* p = hints.preset) {
    const std::string what = absl::StrCat("preset ", p->name, ": ");
    if (p->d_model != c.d_model) {
      return Contradiction(what + "d_model", p->d_model, c.d_model);
    }
    if (p->n_layer != c.n_layer) {
      return Contradiction(what + "n_layer", p->n_layer, c.n_layer);
    }
    if (p->attn_layer_idx != c.attn_layer_idx) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, "attention layers are [",
          absl::StrJoin(p->attn_layer_idx, ", "), "] but the checkpoint has [",
          absl::StrJoin(c.attn_layer_idx, ", "), "]"));
    }
    if (c.rotary_dim != 0 && p->rotary_dim != c.rotary_dim) {
      return Contradiction(what + "rotary_dim", p->rotary_dim, c.rotary_dim);
    }
    c.rotary_dim = p->rotary_dim;
    c.n_heads = p->n_heads;
  }
  if (hints.rotary_dim) {
    if (c.rotary_dim != 0 && *hints.rotary_dim != c.rotary_dim) {
      return Contradiction("--rotary-dim", *hints.rotary_dim, c.rotary_dim);
    }
    c.rotary_dim = *hints.rotary_dim;
  }
  if (hints.n_heads) c.n_heads = *hints.n_heads;
  if (c.attn_layer_idx.empty()) {
    c.n_heads = 0;  // no attention: heads and rotary mean nothing
    if (c.rotary_dim != 0) {
      return absl::InvalidArgumentError(
          "rotary_dim given for a model without attention layers");
    }
  } else if (c.n_heads == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint has attention layers [",
        absl::StrJoin(c.attn_layer_idx, ", "),
        "]; their number of heads cannot be read from the shapes: give "
        "--n-heads or --preset"));
  }
  if (hints.vocab_size) {
    c.vocab_size = *hints.vocab_size;
  } else if (c.padded_vocab_size >= kGpt2Vocab &&
             c.padded_vocab_size <= kGpt2Vocab + 7) {
    c.vocab_size = kGpt2Vocab;
  } else {
    c.vocab_size = c.padded_vocab_size;
  }
  H3_RETURN_IF_ERROR(ValidateConfig(c));
  return c;
}

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c) {
  const int64_t d = c.d_model;
  const int64_t h = c.ssm_heads();
  const int64_t n = c.d_state;
  std::vector<ExpectedTensor> out;
  auto add = [&](std::string name, std::vector<int64_t> shape,
                 bool fp32 = false) {
    out.push_back({std::move(name), std::move(shape), fp32, false});
  };
  add(std::string(kEmbeddingTensor), {c.padded_vocab_size, d});
  for (int64_t i = 0; i < c.n_layer; ++i) {
    for (const char* norm : {"norm1", "norm2"}) {
      add(LayerTensorName(i, absl::StrCat(norm, ".weight")), {d});
      add(LayerTensorName(i, absl::StrCat(norm, ".bias")), {d});
    }
    if (c.IsAttention(i)) {
      add(LayerTensorName(i, "mixer.Wqkv.weight"), {3 * d, d});
      add(LayerTensorName(i, "mixer.Wqkv.bias"), {3 * d});
      add(LayerTensorName(i, "mixer.out_proj.weight"), {d, d});
      add(LayerTensorName(i, "mixer.out_proj.bias"), {d});
      if (c.rotary_dim > 0) {
        out.push_back({LayerTensorName(i, "mixer.rotary_emb.inv_freq"),
                       {c.rotary_dim / 2},
                       true,
                       true});
      }
    } else {
      for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
        add(LayerTensorName(i, absl::StrCat("mixer.", proj, ".weight")),
            {d, d});
        add(LayerTensorName(i, absl::StrCat("mixer.", proj, ".bias")), {d});
      }
      add(LayerTensorName(i, "mixer.ssm_k_kernel.kernel.B"), {d, n}, true);
      add(LayerTensorName(i, "mixer.ssm_k_kernel.kernel.C"), {1, d, n}, true);
      add(LayerTensorName(i, "mixer.ssm_k_D"), {d}, true);
      add(LayerTensorName(i, "mixer.kernel.kernel.log_dt"), {h}, true);
      add(LayerTensorName(i, "mixer.kernel.kernel.inv_A_real"), {h, n / 2},
          true);
      add(LayerTensorName(i, "mixer.kernel.kernel.A_imag"), {h, n / 2}, true);
      add(LayerTensorName(i, "mixer.kernel.kernel.B"), {h, n / 2, 2}, true);
      add(LayerTensorName(i, "mixer.kernel.kernel.C"), {1, h, n / 2, 2}, true);
      add(LayerTensorName(i, "mixer.D"), {h}, true);
      add(LayerTensorName(i, "mixer.output_linear.weight"), {d, d});
      add(LayerTensorName(i, "mixer.output_linear.bias"), {d});
    }
    add(LayerTensorName(i, "mlp.fc1.weight"), {c.d_inner, d});
    add(LayerTensorName(i, "mlp.fc1.bias"), {c.d_inner});
    add(LayerTensorName(i, "mlp.fc2.weight"), {d, c.d_inner});
    add(LayerTensorName(i, "mlp.fc2.bias"), {d});
  }
  add("backbone.ln_f.weight", {d});
  add("backbone.ln_f.bias", {d});
  return out;
}

absl::Status CheckShapes(const ModelConfig& config, const ShapeMap& shapes) {
  std::set<std::string> expected;
  for (const ExpectedTensor& e : ExpectedTensors(config)) {
    expected.insert(e.name);
    auto it = shapes.find(e.name);
    if (it == shapes.end()) {
      if (e.computable) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("missing tensor ", e.name, " (expected shape ",
                       ShapeString(e.shape), ")"));
    }
    if (it->second != e.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", e.name, ": expected shape ", ShapeString(e.shape),
          ", found ", ShapeString(it->second)));
    }
  }
  for (const auto& [name, shape] : shapes) {
    if (expected.contains(name)) continue;
    if (name == "lm_head.weight") {
      const std::vector<int64_t> want = {config.padded_vocab_size,
                                         config.d_model};
      if (shape != want) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor lm_head.weight: expected shape ",
                         ShapeString(want), ", found ", ShapeString(shape)));
      }
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected tensor ", name, " ", ShapeString(shape),
                     " for a model with this config"));
  }
  return absl::OkStatus();
}

}  // namespace h3::loader
