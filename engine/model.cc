#include "engine/model.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/model_layer.h"

namespace h3::engine {

namespace {

// A weight of the model file as fp32 host values. ModelFile::Open has
// checked every weight's shape and dtype against the config.
absl::StatusOr<std::vector<float>> ReadWeight(const loader::ModelFile& file,
                                              const std::string& name) {
  H3_ASSIGN_OR_RETURN(loader::WeightView view, file.Weight(name));
  std::vector<float> values(view.bytes.size() / loader::DTypeSize(view.dtype));
  H3_RETURN_IF_ERROR(loader::ConvertFloats(
      view.dtype, view.bytes, loader::DType::kF32,
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
  if (options.prefill_chunk < 1 || options.max_sequence_length < 1) {
    return absl::InvalidArgumentError(
        "prefill_chunk and max_sequence_length must be positive");
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

  H3_RETURN_IF_ERROR(
      upload(std::string(loader::kEmbeddingTensor), &embedding_));
  H3_RETURN_IF_ERROR(upload("backbone.ln_f.weight", &ln_f_weight_));
  H3_RETURN_IF_ERROR(upload("backbone.ln_f.bias", &ln_f_bias_));
  layers_.resize(config_.n_layer);
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    Layer& layer = layers_[i];
    auto name = [i](absl::string_view rest) {
      return loader::LayerTensorName(i, rest);
    };
    layer.attention = config_.IsAttention(i);
    for (auto [rest, buffer] : {std::pair{"norm1.weight", &layer.norm1_w},
                                std::pair{"norm1.bias", &layer.norm1_b},
                                std::pair{"norm2.weight", &layer.norm2_w},
                                std::pair{"norm2.bias", &layer.norm2_b},
                                std::pair{"mlp.fc1.weight", &layer.fc1_w},
                                std::pair{"mlp.fc1.bias", &layer.fc1_b},
                                std::pair{"mlp.fc2.weight", &layer.fc2_w},
                                std::pair{"mlp.fc2.bias", &layer.fc2_b}}) {
      H3_RETURN_IF_ERROR(upload(name(rest), buffer));
    }
    if (layer.attention) {
      for (auto [rest, buffer] :
           {std::pair{"mixer.Wqkv.weight", &layer.wqkv_w},
            std::pair{"mixer.Wqkv.bias", &layer.wqkv_b},
            std::pair{"mixer.out_proj.weight", &layer.out_w},
            std::pair{"mixer.out_proj.bias", &layer.out_b}}) {
        H3_RETURN_IF_ERROR(upload(name(rest), buffer));
      }
      if (config_.rotary_dim > 0) {
        H3_RETURN_IF_ERROR(
            upload(name("mixer.rotary_emb.inv_freq"), &layer.inv_freq));
      }
      continue;
    }
    for (auto [rest, buffer] :
         {std::pair{"mixer.q_proj.weight", &layer.q_w},
          std::pair{"mixer.q_proj.bias", &layer.q_b},
          std::pair{"mixer.k_proj.weight", &layer.k_w},
          std::pair{"mixer.k_proj.bias", &layer.k_b},
          std::pair{"mixer.v_proj.weight", &layer.v_w},
          std::pair{"mixer.v_proj.bias", &layer.v_b},
          std::pair{"mixer.output_linear.weight", &layer.out_w},
          std::pair{"mixer.output_linear.bias", &layer.out_b}}) {
      H3_RETURN_IF_ERROR(upload(name(rest), buffer));
    }
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
    for (auto [host, buffer] :
         {std::pair{&shift_kernel, &layer.shift_kernel},
          std::pair{&shift_B, &layer.shift_B},
          std::pair{&shift_C, &layer.shift_C},
          std::pair{&shift_D, &layer.shift_D}, std::pair{&dA, &layer.dA},
          std::pair{&dB, &layer.dB}, std::pair{&C, &layer.C},
          std::pair{&D, &layer.D}}) {
      H3_RETURN_IF_ERROR(upload_host(*host, buffer));
    }
  }
  return absl::OkStatus();
}

kernels::H3Shape Model::H3ShapeOf() const {
  return {static_cast<int>(config_.d_model), static_cast<int>(config_.head_dim),
          static_cast<int>(config_.d_state)};
}

kernels::H3Weights Model::H3WeightsOf(const Layer& layer) const {
  return {H3ShapeOf(),          layer.shift_kernel.data(),
          layer.shift_B.data(), layer.shift_C.data(),
          layer.shift_D.data(), layer.dA.data(),
          layer.dB.data(),      layer.C.data(),
          layer.D.data()};
}

absl::StatusOr<std::unique_ptr<SequenceState>> Model::NewSequence() {
  std::unique_ptr<SequenceState> seq(new SequenceState());
  const kernels::H3Shape shape = H3ShapeOf();
  for (const Layer& layer : layers_) {
    const int64_t size =
        layer.attention ? 2 * options_.max_sequence_length * config_.d_model
                        : int64_t{shape.d_model} * shape.d_state +
                              2 * int64_t{shape.kv_channels()} * shape.modes();
    H3_ASSIGN_OR_RETURN(Buffer buffer, backend_->Allocate(size));
    H3_RETURN_IF_ERROR(backend_->Fill(buffer.data(), size, 0.0f));
    seq->layers_.push_back(std::move(buffer));
  }
  return seq;
}

absl::Status Model::ResetSequence(SequenceState& sequence) {
  for (size_t i = 0; i < sequence.layers_.size(); ++i) {
    // Attention reads only the positions written since: no need to clear.
    if (layers_[i].attention) continue;
    Buffer& b = sequence.layers_[i];
    H3_RETURN_IF_ERROR(backend_->Fill(b.data(), b.size(), 0.0f));
  }
  sequence.position_ = 0;
  return absl::OkStatus();
}

absl::Status Model::CopySequence(const SequenceState& from, SequenceState* to) {
  const int64_t kv_half = options_.max_sequence_length * config_.d_model;
  for (size_t i = 0; i < from.layers_.size(); ++i) {
    const float* src = from.layers_[i].data();
    float* dst = to->layers_[i].data();
    if (!layers_[i].attention) {
      H3_RETURN_IF_ERROR(backend_->Copy(src, from.layers_[i].size(), dst));
      continue;
    }
    // Attention caches: only the filled positions of K and of V matter.
    const int64_t filled = from.position_ * config_.d_model;
    H3_RETURN_IF_ERROR(backend_->Copy(src, filled, dst));
    H3_RETURN_IF_ERROR(backend_->Copy(src + kv_half, filled, dst + kv_half));
  }
  to->position_ = from.position_;
  return absl::OkStatus();
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

absl::Status Model::EnsureScratch(int64_t rows) {
  if (rows <= scratch_rows_) return absl::OkStatus();
  const int64_t d = config_.d_model;
  for (Buffer* b : {&hidden_, &residual_, &normed_, &q_, &k_, &v_, &mixed_}) {
    H3_ASSIGN_OR_RETURN(*b, backend_->Allocate(rows * d));
  }
  H3_ASSIGN_OR_RETURN(qkv_, backend_->Allocate(rows * 3 * d));
  H3_ASSIGN_OR_RETURN(mlp_, backend_->Allocate(rows * config_.d_inner));
  scratch_rows_ = rows;
  return absl::OkStatus();
}

absl::StatusOr<const float*> Model::Spectrum(Layer& layer, int nfft) {
  auto it = layer.spectra.find(nfft);
  if (it != layer.spectra.end()) return it->second.data();
  H3_ASSIGN_OR_RETURN(
      Buffer spectrum,
      backend_->Allocate(2 * config_.ssm_heads() * (nfft / 2 + 1)));
  H3_RETURN_IF_ERROR(
      backend_->H3KernelSpectrum(H3WeightsOf(layer), nfft, spectrum.data()));
  const float* data = spectrum.data();
  layer.spectra.emplace(nfft, std::move(spectrum));
  return data;
}

}  // namespace h3::engine
