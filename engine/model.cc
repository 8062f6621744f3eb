#include "engine/model.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/model_layer.h"

namespace h3::engine {

namespace {

// A weight of the model file as fp32 host values, checked to hold `numel`.
absl::StatusOr<std::vector<float>> ReadWeight(const loader::ModelFile& file,
                                              const std::string& name,
                                              int64_t numel) {
  H3_ASSIGN_OR_RETURN(loader::WeightView view, file.Weight(name));
  const int64_t count =
      static_cast<int64_t>(view.bytes.size() / loader::DTypeSize(view.dtype));
  if (count != numel) {
    return absl::DataLossError(absl::StrCat(file.path(), ": ", name, " has ",
                                            count, " elements, expected ",
                                            numel));
  }
  std::vector<float> values(count);
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
  const int64_t d = config_.d_model, n = config_.d_state;
  const int64_t inner = config_.d_inner, vocab = config_.padded_vocab_size;
  const int64_t heads = config_.ssm_heads(), modes = n / 2;
  auto upload = [&](const std::string& name, int64_t numel,
                    Buffer* out) -> absl::Status {
    H3_ASSIGN_OR_RETURN(std::vector<float> host, ReadWeight(file, name, numel));
    H3_ASSIGN_OR_RETURN(*out, backend_->Allocate(numel));
    return backend_->CopyFromHost(host.data(), numel, out->data());
  };
  auto upload_host = [&](const std::vector<float>& host,
                         Buffer* out) -> absl::Status {
    H3_ASSIGN_OR_RETURN(*out, backend_->Allocate(host.size()));
    return backend_->CopyFromHost(host.data(), host.size(), out->data());
  };

  H3_RETURN_IF_ERROR(upload("backbone.embeddings.word_embeddings.weight",
                            vocab * d, &embedding_));
  H3_RETURN_IF_ERROR(upload("backbone.ln_f.weight", d, &ln_f_weight_));
  H3_RETURN_IF_ERROR(upload("backbone.ln_f.bias", d, &ln_f_bias_));
  layers_.resize(config_.n_layer);
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    Layer& layer = layers_[i];
    const std::string p = absl::StrCat("backbone.layers.", i, ".");
    layer.attention = config_.IsAttention(i);
    H3_RETURN_IF_ERROR(upload(p + "norm1.weight", d, &layer.norm1_w));
    H3_RETURN_IF_ERROR(upload(p + "norm1.bias", d, &layer.norm1_b));
    H3_RETURN_IF_ERROR(upload(p + "norm2.weight", d, &layer.norm2_w));
    H3_RETURN_IF_ERROR(upload(p + "norm2.bias", d, &layer.norm2_b));
    H3_RETURN_IF_ERROR(upload(p + "mlp.fc1.weight", inner * d, &layer.fc1_w));
    H3_RETURN_IF_ERROR(upload(p + "mlp.fc1.bias", inner, &layer.fc1_b));
    H3_RETURN_IF_ERROR(upload(p + "mlp.fc2.weight", d * inner, &layer.fc2_w));
    H3_RETURN_IF_ERROR(upload(p + "mlp.fc2.bias", d, &layer.fc2_b));
    const std::string m = p + "mixer.";
    if (layer.attention) {
      H3_RETURN_IF_ERROR(upload(m + "Wqkv.weight", 3 * d * d, &layer.wqkv_w));
      H3_RETURN_IF_ERROR(upload(m + "Wqkv.bias", 3 * d, &layer.wqkv_b));
      H3_RETURN_IF_ERROR(upload(m + "out_proj.weight", d * d, &layer.out_w));
      H3_RETURN_IF_ERROR(upload(m + "out_proj.bias", d, &layer.out_b));
      if (config_.rotary_dim > 0) {
        H3_RETURN_IF_ERROR(upload(m + "rotary_emb.inv_freq",
                                  config_.rotary_dim / 2, &layer.inv_freq));
      }
      continue;
    }
    for (auto [name, w, b] :
         {std::tuple{"q_proj", &layer.q_w, &layer.q_b},
          std::tuple{"k_proj", &layer.k_w, &layer.k_b},
          std::tuple{"v_proj", &layer.v_w, &layer.v_b},
          std::tuple{"output_linear", &layer.out_w, &layer.out_b}}) {
      H3_RETURN_IF_ERROR(upload(absl::StrCat(m, name, ".weight"), d * d, w));
      H3_RETURN_IF_ERROR(upload(absl::StrCat(m, name, ".bias"), d, b));
    }
    // SSM parameters: discretised once, here, on the host.
    const std::string sk = m + "ssm_k_kernel.kernel.",
                      dk = m + "kernel.kernel.";
    H3_ASSIGN_OR_RETURN(auto shift_B, ReadWeight(file, sk + "B", d * n));
    H3_ASSIGN_OR_RETURN(auto shift_C, ReadWeight(file, sk + "C", d * n));
    H3_ASSIGN_OR_RETURN(auto shift_D, ReadWeight(file, m + "ssm_k_D", d));
    H3_ASSIGN_OR_RETURN(auto log_dt, ReadWeight(file, dk + "log_dt", heads));
    H3_ASSIGN_OR_RETURN(auto inv_A_real,
                        ReadWeight(file, dk + "inv_A_real", heads * modes));
    H3_ASSIGN_OR_RETURN(auto A_imag,
                        ReadWeight(file, dk + "A_imag", heads * modes));
    H3_ASSIGN_OR_RETURN(auto B, ReadWeight(file, dk + "B", heads * modes * 2));
    H3_ASSIGN_OR_RETURN(auto C, ReadWeight(file, dk + "C", heads * modes * 2));
    H3_ASSIGN_OR_RETURN(auto D, ReadWeight(file, m + "D", heads));
    const kernels::H3Shape shape{static_cast<int>(d),
                                 static_cast<int>(config_.head_dim),
                                 static_cast<int>(n)};
    std::vector<float> shift_kernel(d * n), dA(heads * modes * 2),
        dB(heads * modes * 2);
    kernels::H3Discretize(
        {shape, shift_B.data(), shift_C.data(), shift_D.data(), log_dt.data(),
         inv_A_real.data(), A_imag.data(), B.data(), C.data(), D.data()},
        {shift_kernel.data(), dA.data(), dB.data()});
    H3_RETURN_IF_ERROR(upload_host(shift_kernel, &layer.shift_kernel));
    H3_RETURN_IF_ERROR(upload_host(shift_B, &layer.shift_B));
    H3_RETURN_IF_ERROR(upload_host(shift_C, &layer.shift_C));
    H3_RETURN_IF_ERROR(upload_host(shift_D, &layer.shift_D));
    H3_RETURN_IF_ERROR(upload_host(dA, &layer.dA));
    H3_RETURN_IF_ERROR(upload_host(dB, &layer.dB));
    H3_RETURN_IF_ERROR(upload_host(C, &layer.C));
    H3_RETURN_IF_ERROR(upload_host(D, &layer.D));
  }
  return absl::OkStatus();
}

kernels::H3Weights Model::H3WeightsOf(const Layer& layer) const {
  return {
      {static_cast<int>(config_.d_model), static_cast<int>(config_.head_dim),
       static_cast<int>(config_.d_state)},
      layer.shift_kernel.data(),
      layer.shift_B.data(),
      layer.shift_C.data(),
      layer.shift_D.data(),
      layer.dA.data(),
      layer.dB.data(),
      layer.C.data(),
      layer.D.data()};
}

absl::StatusOr<std::unique_ptr<SequenceState>> Model::NewSequence() {
  std::unique_ptr<SequenceState> seq(new SequenceState());
  const kernels::H3Shape shape{static_cast<int>(config_.d_model),
                               static_cast<int>(config_.head_dim),
                               static_cast<int>(config_.d_state)};
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

absl::Status Model::CopySequence(const SequenceState& from, SequenceState* to) {
  for (size_t i = 0; i < from.layers_.size(); ++i) {
    // Attention caches: only the filled positions matter.
    const int64_t n = layers_[i].attention ? from.position_ * config_.d_model
                                           : from.layers_[i].size();
    std::vector<float> host(n);
    const float* src = from.layers_[i].data();
    float* dst = to->layers_[i].data();
    H3_RETURN_IF_ERROR(backend_->CopyToHost(src, n, host.data()));
    H3_RETURN_IF_ERROR(backend_->CopyFromHost(host.data(), n, dst));
    if (layers_[i].attention) {  // V follows K at max_sequence_length * d
      const int64_t offset = options_.max_sequence_length * config_.d_model;
      H3_RETURN_IF_ERROR(backend_->CopyToHost(src + offset, n, host.data()));
      H3_RETURN_IF_ERROR(backend_->CopyFromHost(host.data(), n, dst + offset));
    }
  }
  to->position_ = from.position_;
  return absl::OkStatus();
}

absl::Status Model::CheckTokens(absl::Span<const int32_t> tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.padded_vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", tokens[i], " at index ", i,
          " is outside the vocabulary [0, ", config_.padded_vocab_size, ")"));
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
