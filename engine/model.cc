#include "engine/model.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/half_float.h"
#include "base/status_macros.h"
#include "engine/model_layer.h"

namespace h3::engine {

namespace {

// A weight of the model file as fp32 host values. ModelFile::Open has
// checked every weight's shape and dtype against the config.
absl::StatusOr<std::vector<float>> ReadWeight(const loader::ModelFile& file,
                                              const std::string& name) {
  H3_ASSIGN_OR_RETURN(loader::WeightView view, file.Weight(name));
  std::vector<float> values(view.bytes.size() / ElementSize(view.dtype));
  H3_RETURN_IF_ERROR(loader::ConvertFloats(
      view.dtype, view.bytes, ElementType::kF32,
      absl::Span<uint8_t>(reinterpret_cast<uint8_t*>(values.data()),
                          values.size() * sizeof(float))));
  return values;
}

}  // namespace

Model::Model(loader::ModelConfig config, std::unique_ptr<Backend> backend,
             const ModelOptions& options)
    : config_(std::move(config)),
      backend_(std::move(backend)),
      options_(options) {}

Model::~Model() = default;

absl::StatusOr<std::unique_ptr<Model>> Model::Load(
    const loader::ModelFile& file, std::unique_ptr<Backend> backend,
    const ModelOptions& options) {
  const loader::ModelConfig& config = file.config();
  if (config.d_state % 2 != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "d_state ", config.d_state, " is odd; the diagonal SSM needs pairs"));
  }
  if (options.prefill_chunk < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefill_chunk is ", options.prefill_chunk, "; it must be >= 1"));
  }
  std::unique_ptr<Model> model(new Model(config, std::move(backend), options));
  H3_RETURN_IF_ERROR(model->LoadWeights(file));
  return model;
}

absl::Status Model::LoadWeights(const loader::ModelFile& file) {
  auto upload_host = [&](const std::vector<float>& host,
                         Buffer* out) -> absl::Status {
    H3_ASSIGN_OR_RETURN(*out, backend_->Allocate(host.size()));
    return backend_->CopyFromHost(host.data(), host.size(), out->data());
  };
  auto upload = [&](const std::string& name, Buffer* out) -> absl::Status {
    H3_ASSIGN_OR_RETURN(std::vector<float> host, ReadWeight(file, name));
    return upload_host(host, out);
  };
  // The biases of the products that write 16-bit activations (q|k|v, fc1):
  // stored once in activation_type(), rounded to nearest even here, so that
  // the product's epilogue reads a bias of its output's type (LinearParams).
  const ElementType at = backend_->activation_type();
  auto upload_bias = [&](const std::vector<float>& host,
                         Buffer* out) -> absl::Status {
    if (at == ElementType::kF32) return upload_host(host, out);
    const int64_t n = static_cast<int64_t>(host.size());
    std::vector<float> packed(FloatsHolding(n, at), 0.0f);
    StoreFloats(host.data(), n, packed.data(), at, 0);
    return upload_host(packed, out);
  };
  // Several weights' values back to back (q, k, v stacked by rows).
  auto read_stacked = [&](std::initializer_list<std::string> names)
      -> absl::StatusOr<std::vector<float>> {
    std::vector<float> host;
    for (const std::string& name : names) {
      H3_ASSIGN_OR_RETURN(std::vector<float> part, ReadWeight(file, name));
      host.insert(host.end(), part.begin(), part.end());
    }
    return host;
  };
  // Matrices: one or several weights [rows_i, cols] stacked by rows.
  auto upload_matrix = [&](std::initializer_list<std::string> names,
                           Matrix* out) -> absl::Status {
    H3_ASSIGN_OR_RETURN(std::vector<float> host, read_stacked(names));
    H3_ASSIGN_OR_RETURN(loader::WeightView view, file.Weight(*names.begin()));
    const int64_t cols = view.shape.back();
    H3_ASSIGN_OR_RETURN(
        *out, backend_->UploadMatrix(host.data(), host.size() / cols, cols));
    return absl::OkStatus();
  };

  H3_RETURN_IF_ERROR(
      upload_matrix({std::string(loader::kEmbeddingTensor)}, &embedding_));
  H3_RETURN_IF_ERROR(upload("backbone.ln_f.weight", &ln_f_weight_));
  H3_RETURN_IF_ERROR(upload("backbone.ln_f.bias", &ln_f_bias_));
  layers_.resize(config_.n_layer);
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    Layer& layer = layers_[i];
    auto name = [i](absl::string_view rest) {
      return loader::LayerTensorName(i, rest);
    };
    layer.attention = config_.IsAttention(i);
    index_of_layer_.push_back(layer.attention ? attention_layers_++
                                              : h3_layers_++);
    for (auto [rest, buffer] : {std::pair{"norm1.weight", &layer.norm1_w},
                                std::pair{"norm1.bias", &layer.norm1_b},
                                std::pair{"norm2.weight", &layer.norm2_w},
                                std::pair{"norm2.bias", &layer.norm2_b},
                                std::pair{"mlp.fc2.bias", &layer.fc2_b}}) {
      H3_RETURN_IF_ERROR(upload(name(rest), buffer));
    }
    H3_ASSIGN_OR_RETURN(std::vector<float> fc1_b,
                        ReadWeight(file, name("mlp.fc1.bias")));
    H3_RETURN_IF_ERROR(upload_bias(fc1_b, &layer.fc1_b));
    H3_RETURN_IF_ERROR(upload_matrix({name("mlp.fc1.weight")}, &layer.fc1_w));
    H3_RETURN_IF_ERROR(upload_matrix({name("mlp.fc2.weight")}, &layer.fc2_w));
    if (layer.attention) {
      H3_RETURN_IF_ERROR(
          upload_matrix({name("mixer.Wqkv.weight")}, &layer.wqkv_w));
      H3_ASSIGN_OR_RETURN(std::vector<float> wqkv_b,
                          ReadWeight(file, name("mixer.Wqkv.bias")));
      H3_RETURN_IF_ERROR(upload_bias(wqkv_b, &layer.wqkv_b));
      H3_RETURN_IF_ERROR(
          upload_matrix({name("mixer.out_proj.weight")}, &layer.out_w));
      H3_RETURN_IF_ERROR(upload(name("mixer.out_proj.bias"), &layer.out_b));
      if (config_.rotary_dim > 0) {
        H3_RETURN_IF_ERROR(
            upload(name("mixer.rotary_emb.inv_freq"), &layer.inv_freq));
      }
      continue;
    }
    H3_RETURN_IF_ERROR(
        upload_matrix({name("mixer.q_proj.weight"), name("mixer.k_proj.weight"),
                       name("mixer.v_proj.weight")},
                      &layer.wqkv_w));
    H3_ASSIGN_OR_RETURN(
        std::vector<float> qkv_b,
        read_stacked({name("mixer.q_proj.bias"), name("mixer.k_proj.bias"),
                      name("mixer.v_proj.bias")}));
    H3_RETURN_IF_ERROR(upload_bias(qkv_b, &layer.wqkv_b));
    H3_RETURN_IF_ERROR(
        upload_matrix({name("mixer.output_linear.weight")}, &layer.out_w));
    H3_RETURN_IF_ERROR(upload(name("mixer.output_linear.bias"), &layer.out_b));
    // SSM parameters: discretised once, here, on the host.
    H3_ASSIGN_OR_RETURN(auto shift_B,
                        ReadWeight(file, name("mixer.ssm_k_kernel.kernel.B")));
    H3_ASSIGN_OR_RETURN(auto shift_C,
                        ReadWeight(file, name("mixer.ssm_k_kernel.kernel.C")));
    H3_ASSIGN_OR_RETURN(auto shift_D, ReadWeight(file, name("mixer.ssm_k_D")));
    H3_ASSIGN_OR_RETURN(auto log_dt,
                        ReadWeight(file, name("mixer.kernel.kernel.log_dt")));
    H3_ASSIGN_OR_RETURN(
        auto inv_A_real,
        ReadWeight(file, name("mixer.kernel.kernel.inv_A_real")));
    H3_ASSIGN_OR_RETURN(auto A_imag,
                        ReadWeight(file, name("mixer.kernel.kernel.A_imag")));
    H3_ASSIGN_OR_RETURN(auto B,
                        ReadWeight(file, name("mixer.kernel.kernel.B")));
    H3_ASSIGN_OR_RETURN(auto C,
                        ReadWeight(file, name("mixer.kernel.kernel.C")));
    H3_ASSIGN_OR_RETURN(auto D, ReadWeight(file, name("mixer.D")));
    const kernels::H3Shape shape = H3ShapeOf();
    std::vector<float> shift_kernel(shift_B.size()), dA(B.size()), dB(B.size());
    kernels::H3Discretize(
        {shape, shift_B.data(), shift_C.data(), shift_D.data(), log_dt.data(),
         inv_A_real.data(), A_imag.data(), B.data(), C.data(), D.data()},
        {shift_kernel.data(), dA.data(), dB.data()});
    H3_ASSIGN_OR_RETURN(
        layer.h3,
        backend_->MakeH3Layer({shape, shift_kernel.data(), shift_D.data(),
                               dA.data(), dB.data(), C.data(), D.data()}));
  }
  return absl::OkStatus();
}

kernels::H3Shape Model::H3ShapeOf() const {
  return {static_cast<int>(config_.d_model), static_cast<int>(config_.head_dim),
          static_cast<int>(config_.d_state)};
}

int64_t Model::H3StateFloats() const {
  const kernels::H3Shape shape = H3ShapeOf();
  return int64_t{shape.d_model} * shape.d_state +
         2 * int64_t{shape.kv_channels()} * shape.modes();
}

absl::Status Model::CheckTokens(absl::Span<const int32_t> tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", tokens[i], " at index ", i,
          " is outside the vocabulary [0, ", config_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Activations> Model::NewActivations(int64_t rows) {
  if (rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("activations for ", rows, " rows"));
  }
  const int64_t d = config_.d_model;
  Activations act;
  act.rows = rows;
  act.type = backend_->activation_type();
  for (Buffer* b :
       {&act.hidden, &act.residual, &act.residual_next, &act.mixed}) {
    H3_ASSIGN_OR_RETURN(*b, backend_->Allocate(rows * d));
  }
  auto allocate = [&](int64_t elements) {
    return backend_->Allocate(FloatsHolding(elements, act.type));
  };
  H3_ASSIGN_OR_RETURN(act.normed, allocate(rows * d));
  H3_ASSIGN_OR_RETURN(act.qkv, allocate(rows * 3 * d));
  H3_ASSIGN_OR_RETURN(act.mlp, allocate(rows * config_.d_inner));
  return act;
}

}  // namespace h3::engine
