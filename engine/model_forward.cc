// The forward pass (H3_MODEL.md, "Forward pass"), for prefill chunks of one
// sequence and for decoding steps of a batch of sequences.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/model.h"
#include "engine/model_layer.h"

namespace h3::engine {

absl::Status Model::Prefill(SequenceState& sequence,
                            absl::Span<const int32_t> tokens, float* logits) {
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens to prefill");
  H3_RETURN_IF_ERROR(CheckTokens(tokens));
  const int64_t end = sequence.position() + static_cast<int64_t>(tokens.size());
  if (!config_.attn_layer_idx.empty() && end > options_.max_sequence_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the sequence would reach ", end, " tokens; this server allows ",
        options_.max_sequence_length));
  }
  SequenceState* seq = &sequence;
  for (size_t start = 0; start < tokens.size();
       start += options_.prefill_chunk) {
    const int64_t rows =
        std::min<int64_t>(options_.prefill_chunk, tokens.size() - start);
    H3_RETURN_IF_ERROR(EnsureScratch(rows));
    H3_RETURN_IF_ERROR(backend_->Embedding(tokens.data() + start, rows,
                                           embedding_.data(), config_.d_model,
                                           hidden_.data()));
    H3_RETURN_IF_ERROR(
        Forward(rows, absl::MakeSpan(&seq, 1), /*prefill=*/true));
    sequence.position_ += rows;
    if (logits != nullptr && start + rows == tokens.size()) {
      H3_RETURN_IF_ERROR(Logits(rows - 1, 1, logits));
    }
  }
  return absl::OkStatus();
}

absl::Status Model::Decode(absl::Span<SequenceState* const> sequences,
                           absl::Span<const int32_t> tokens, float* logits) {
  if (sequences.size() != tokens.size() || sequences.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("decode: ", sequences.size(),
                                                   " sequences but ",
                                                   tokens.size(), " tokens"));
  }
  H3_RETURN_IF_ERROR(CheckTokens(tokens));
  for (const SequenceState* seq : sequences) {
    if (!config_.attn_layer_idx.empty() &&
        seq->position() + 1 > options_.max_sequence_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a sequence would exceed ", options_.max_sequence_length, " tokens"));
    }
  }
  const int64_t rows = static_cast<int64_t>(sequences.size());
  H3_RETURN_IF_ERROR(EnsureScratch(rows));
  H3_RETURN_IF_ERROR(backend_->Embedding(tokens.data(), rows, embedding_.data(),
                                         config_.d_model, hidden_.data()));
  H3_RETURN_IF_ERROR(Forward(rows, sequences, /*prefill=*/false));
  for (SequenceState* seq : sequences) seq->position_ += 1;
  return Logits(0, rows, logits);
}

absl::Status Model::Forward(int64_t rows,
                            absl::Span<SequenceState* const> sequences,
                            bool prefill) {
  const int64_t d = config_.d_model;
  const float eps = static_cast<float>(config_.layer_norm_epsilon);
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = layers_[i];
    H3_RETURN_IF_ERROR(backend_->AddLayerNorm(
        {hidden_.data(), residual_.data(), /*add_residual=*/i > 0,
         layer.norm1_w.data(), layer.norm1_b.data(), normed_.data(), rows, d,
         eps}));
    H3_RETURN_IF_ERROR(layer.attention
                           ? AttentionMixer(layer, i, rows, sequences, prefill)
                           : H3Mixer(layer, i, rows, sequences, prefill));
    H3_RETURN_IF_ERROR(backend_->AddLayerNorm(
        {mixed_.data(), residual_.data(), true, layer.norm2_w.data(),
         layer.norm2_b.data(), normed_.data(), rows, d, eps}));
    H3_RETURN_IF_ERROR(backend_->Linear(
        {normed_.data(), layer.fc1_w.data(), layer.fc1_b.data(), mlp_.data(),
         rows, config_.d_inner, d, Epilogue::kGeluTanh}));
    H3_RETURN_IF_ERROR(
        backend_->Linear({mlp_.data(), layer.fc2_w.data(), layer.fc2_b.data(),
                          hidden_.data(), rows, d, config_.d_inner}));
  }
  return backend_->AddLayerNorm({hidden_.data(), residual_.data(), true,
                                 ln_f_weight_.data(), ln_f_bias_.data(),
                                 normed_.data(), rows, d, eps});
}

absl::Status Model::H3Mixer(Layer& layer, int layer_index, int64_t rows,
                            absl::Span<SequenceState* const> sequences,
                            bool prefill) {
  const int64_t d = config_.d_model;
  for (auto [w, b, out] : {std::tuple{&layer.q_w, &layer.q_b, &q_},
                           std::tuple{&layer.k_w, &layer.k_b, &k_},
                           std::tuple{&layer.v_w, &layer.v_b, &v_}}) {
    H3_RETURN_IF_ERROR(backend_->Linear(
        {normed_.data(), w->data(), b->data(), out->data(), rows, d, d}));
  }
  const kernels::H3Weights w = H3WeightsOf(layer);
  const int64_t shift_size = d * config_.d_state;
  auto state_of = [&](SequenceState* seq) {
    float* base = seq->layers_[layer_index].data();
    return kernels::H3State{base, base + shift_size};
  };
  // The inner output goes to qkv_ (free in H3 layers), then output_linear.
  float* inner = qkv_.data();
  if (prefill) {
    const int nfft = kernels::H3FftSize(rows);
    H3_ASSIGN_OR_RETURN(const float* spectrum, Spectrum(layer, nfft));
    H3_RETURN_IF_ERROR(
        backend_->H3Prefill({w, rows, q_.data(), k_.data(), v_.data(), inner,
                             state_of(sequences[0]), spectrum, nfft}));
  } else {
    std::vector<kernels::H3State> states;
    for (SequenceState* seq : sequences) states.push_back(state_of(seq));
    H3_RETURN_IF_ERROR(
        backend_->H3Step({w, static_cast<int>(rows), q_.data(), k_.data(),
                          v_.data(), inner, states.data()}));
  }
  return backend_->Linear({inner, layer.out_w.data(), layer.out_b.data(),
                           mixed_.data(), rows, d, d});
}

absl::Status Model::AttentionMixer(Layer& layer, int layer_index, int64_t rows,
                                   absl::Span<SequenceState* const> sequences,
                                   bool prefill) {
  const int64_t d = config_.d_model;
  H3_RETURN_IF_ERROR(
      backend_->Linear({normed_.data(), layer.wqkv_w.data(),
                        layer.wqkv_b.data(), qkv_.data(), rows, 3 * d, d}));
  const kernels::AttentionShape shape{static_cast<int>(config_.n_heads),
                                      static_cast<int>(d / config_.n_heads),
                                      static_cast<int>(config_.rotary_dim)};
  auto cache_of = [&](SequenceState* seq) {
    float* base = seq->layers_[layer_index].data();
    const int64_t capacity = options_.max_sequence_length;
    return kernels::KvCache{base, base + capacity * d, capacity};
  };
  const float* inv_freq = layer.inv_freq.data();
  // The attention output goes to q_ (free here), then out_proj.
  if (prefill) {
    SequenceState* seq = sequences[0];
    H3_RETURN_IF_ERROR(
        backend_->Attention({shape, seq->position(), rows, qkv_.data(),
                             inv_freq, cache_of(seq), q_.data()}));
  } else {
    for (int64_t b = 0; b < rows; ++b) {
      SequenceState* seq = sequences[b];
      H3_RETURN_IF_ERROR(backend_->Attention(
          {shape, seq->position(), 1, qkv_.data() + b * 3 * d, inv_freq,
           cache_of(seq), q_.data() + b * d}));
    }
  }
  return backend_->Linear({q_.data(), layer.out_w.data(), layer.out_b.data(),
                           mixed_.data(), rows, d, d});
}

absl::Status Model::Logits(int64_t first_row, int64_t rows, float* logits) {
  const int64_t vocab = config_.padded_vocab_size, d = config_.d_model;
  if (logits_.size() < rows * vocab) {
    H3_ASSIGN_OR_RETURN(logits_, backend_->Allocate(rows * vocab));
  }
  // The LM head is tied to the embedding: logits = LN_f(residual) E^T.
  H3_RETURN_IF_ERROR(
      backend_->Linear({normed_.data() + first_row * d, embedding_.data(),
                        nullptr, logits_.data(), rows, vocab, d}));
  return backend_->CopyToHost(logits_.data(), rows * vocab, logits);
}

}  // namespace h3::engine
