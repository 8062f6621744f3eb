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
                            absl::Span<const int32_t> tokens, float* logits,
                            const StepSampling* sampling) {
  if (tokens.empty()) return absl::InvalidArgumentError("no tokens to prefill");
  if (sampling != nullptr && sampling->rows.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefill samples one token, not ", sampling->rows.size()));
  }
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
    // The previous chunk's upload may still be reading the staging area.
    H3_RETURN_IF_ERROR(backend_->Synchronize());
    std::copy_n(tokens.data() + start, rows,
                Staged<int32_t>(StagedIdsOffset()));
    const bool last = start + rows == tokens.size();
    int64_t staged = rows * sizeof(int32_t);
    if (last && sampling != nullptr) {
      Staged<kernels::SamplingRow>(StagedSamplingOffset())[0] =
          sampling->rows[0];
      Staged<kernels::TokenHistory>(StagedHistoriesOffset())[0] =
          HistoryOf(sequence);
      staged = StagedStatesOffset(0);
    }
    H3_RETURN_IF_ERROR(backend_->Upload(staging_, staged));
    H3_RETURN_IF_ERROR(
        backend_->Embedding(StagedOnDevice<int32_t>(StagedIdsOffset()), rows,
                            embedding_, hidden_.data()));
    H3_RETURN_IF_ERROR(
        Forward(rows, absl::MakeSpan(&seq, 1), /*prefill=*/true));
    sequence.position_ += rows;
    if (last && (logits != nullptr || sampling != nullptr)) {
      H3_RETURN_IF_ERROR(LmHead(rows - 1, 1));
      if (sampling != nullptr) {
        H3_RETURN_IF_ERROR(SampleStaged(1));
        H3_RETURN_IF_ERROR(CopySampled(1, *sampling));
      }
      if (logits != nullptr) H3_RETURN_IF_ERROR(CopyLogits(1, logits));
    }
  }
  return absl::OkStatus();
}

absl::Status Model::Decode(absl::Span<SequenceState* const> sequences,
                           absl::Span<const int32_t> tokens, float* logits,
                           const StepSampling* sampling) {
  if (sequences.size() != tokens.size() || sequences.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("decode: ", sequences.size(),
                                                   " sequences but ",
                                                   tokens.size(), " tokens"));
  }
  if (sampling != nullptr && sampling->rows.size() != sequences.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode: ", sequences.size(), " sequences but ",
                     sampling->rows.size(), " sampling rows"));
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
  const int64_t bucket = Bucket(rows);
  H3_RETURN_IF_ERROR(EnsureScratch(bucket));
  if (bucket > rows && pad_ == nullptr) {
    H3_ASSIGN_OR_RETURN(pad_, NewSequence());
  }

  // Stage the step's arguments; padding rows decode token 0 at position 0
  // of the pad state.
  H3_RETURN_IF_ERROR(backend_->Synchronize());
  auto sequence_of = [&](int64_t b) {
    return b < rows ? sequences[b] : pad_.get();
  };
  int32_t* ids = Staged<int32_t>(StagedIdsOffset());
  int64_t* positions = Staged<int64_t>(StagedPositionsOffset());
  for (int64_t b = 0; b < bucket; ++b) {
    ids[b] = b < rows ? tokens[b] : 0;
    positions[b] = sequence_of(b)->position();
  }
  if (sampling != nullptr) {
    // Padding rows: greedy, without a history (rows may not share one).
    auto* rows_out = Staged<kernels::SamplingRow>(StagedSamplingOffset());
    auto* histories = Staged<kernels::TokenHistory>(StagedHistoriesOffset());
    for (int64_t b = 0; b < bucket; ++b) {
      rows_out[b] = b < rows ? sampling->rows[b]
                             : kernels::SamplingRow{.temperature = 0.0f};
      histories[b] =
          b < rows ? HistoryOf(*sequences[b]) : kernels::TokenHistory{};
    }
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int slot = layers_[i].attention ? h3_layers_ + slot_of_layer_[i]
                                          : slot_of_layer_[i];
    for (int64_t b = 0; b < bucket; ++b) {
      SequenceState& seq = *sequence_of(b);
      if (layers_[i].attention) {
        Staged<kernels::KvCache>(StagedStatesOffset(slot))[b] =
            KvCacheOf(seq, i);
      } else {
        Staged<kernels::H3State>(StagedStatesOffset(slot))[b] =
            H3StateOf(seq, i);
      }
    }
  }

  const bool sample = sampling != nullptr;
  auto graph = std::find_if(
      graphs_.begin(), graphs_.end(),
      [&](const Graph& g) { return g.bucket == bucket && g.sample == sample; });
  if (graph != graphs_.end()) {
    H3_RETURN_IF_ERROR(backend_->Replay(graph->id));
  } else {
    H3_RETURN_IF_ERROR(DecodeStep(bucket, sample));
    if (use_graphs_) {
      // Captured after one uncaptured run of the same shape, which has
      // chosen the matrix product algorithms and sized every workspace.
      // Capture records without running, so nothing is sampled twice.
      H3_RETURN_IF_ERROR(backend_->BeginCapture());
      const absl::Status step = DecodeStep(bucket, sample);
      absl::StatusOr<int> id = backend_->EndCapture();
      H3_RETURN_IF_ERROR(step);
      if (!id.ok()) return id.status();
      graphs_.push_back({bucket, sample, *id});
    }
  }
  for (SequenceState* seq : sequences) seq->position_ += 1;
  if (sample) H3_RETURN_IF_ERROR(CopySampled(rows, *sampling));
  return CopyLogits(rows, logits);
}

absl::Status Model::DecodeStep(int64_t rows, bool sample) {
  H3_RETURN_IF_ERROR(backend_->Upload(staging_, StagedBytes()));
  H3_RETURN_IF_ERROR(
      backend_->Embedding(StagedOnDevice<int32_t>(StagedIdsOffset()), rows,
                          embedding_, hidden_.data()));
  H3_RETURN_IF_ERROR(Forward(rows, {}, /*prefill=*/false));
  H3_RETURN_IF_ERROR(LmHead(0, rows));
  return sample ? SampleStaged(rows) : absl::OkStatus();
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
    H3_RETURN_IF_ERROR(
        backend_->Linear({normed_.data(), &layer.fc1_w, layer.fc1_b.data(),
                          mlp_.data(), rows, Epilogue::kGeluTanh}));
    H3_RETURN_IF_ERROR(backend_->Linear(
        {mlp_.data(), &layer.fc2_w, layer.fc2_b.data(), hidden_.data(), rows}));
  }
  return backend_->AddLayerNorm({hidden_.data(), residual_.data(), true,
                                 ln_f_weight_.data(), ln_f_bias_.data(),
                                 normed_.data(), rows, d, eps});
}

// Prefill: `sequences` holds the one sequence. Decode: the per-row
// arguments are staged (Decode) and `sequences` is empty.
absl::Status Model::H3Mixer(Layer& layer, int layer_index, int64_t rows,
                            absl::Span<SequenceState* const> sequences,
                            bool prefill) {
  H3_RETURN_IF_ERROR(backend_->Linear(
      {normed_.data(), &layer.wqkv_w, layer.wqkv_b.data(), qkv_.data(), rows}));
  // The inner output goes to normed_ (read by the product above; free until
  // out_proj).
  float* inner = normed_.data();
  if (prefill) {
    SequenceState& seq = *sequences[0];
    H3_RETURN_IF_ERROR(layer.h3->Prefill(seq.position(), rows, qkv_.data(),
                                         inner, H3StateOf(seq, layer_index)));
  } else {
    H3_RETURN_IF_ERROR(
        layer.h3->Step(static_cast<int>(rows), qkv_.data(), inner,
                       StagedOnDevice<kernels::H3State>(
                           StagedStatesOffset(slot_of_layer_[layer_index])),
                       StagedOnDevice<int64_t>(StagedPositionsOffset())));
  }
  return backend_->Linear(
      {inner, &layer.out_w, layer.out_b.data(), mixed_.data(), rows});
}

absl::Status Model::AttentionMixer(Layer& layer, int layer_index, int64_t rows,
                                   absl::Span<SequenceState* const> sequences,
                                   bool prefill) {
  const int64_t d = config_.d_model;
  H3_RETURN_IF_ERROR(backend_->Linear(
      {normed_.data(), &layer.wqkv_w, layer.wqkv_b.data(), qkv_.data(), rows}));
  const kernels::AttentionShape shape{static_cast<int>(config_.n_heads),
                                      static_cast<int>(d / config_.n_heads),
                                      static_cast<int>(config_.rotary_dim)};
  const float* inv_freq = layer.inv_freq.data();
  // The attention output goes to normed_ (free until out_proj).
  float* out = normed_.data();
  if (prefill) {
    SequenceState* seq = sequences[0];
    H3_RETURN_IF_ERROR(
        backend_->Attention({shape, seq->position(), rows, qkv_.data(),
                             inv_freq, KvCacheOf(*seq, layer_index), out}));
  } else {
    const int slot = h3_layers_ + slot_of_layer_[layer_index];
    H3_RETURN_IF_ERROR(backend_->AttentionDecode(
        {shape, static_cast<int>(rows), qkv_.data(), inv_freq,
         StagedOnDevice<kernels::KvCache>(StagedStatesOffset(slot)),
         StagedOnDevice<int64_t>(StagedPositionsOffset()), out},
        options_.max_sequence_length));
  }
  return backend_->Linear(
      {out, &layer.out_w, layer.out_b.data(), mixed_.data(), rows});
}

absl::Status Model::LmHead(int64_t first_row, int64_t rows) {
  // The LM head is tied to the embedding: logits = LN_f(residual) E^T.
  return backend_->Linear({normed_.data() + first_row * config_.d_model,
                           &embedding_, nullptr, logits_.data(), rows});
}

absl::Status Model::SampleStaged(int64_t rows) {
  kernels::SampleParams p;
  p.batch = static_cast<int>(rows);
  p.vocab_size = static_cast<int32_t>(config_.vocab_size);
  p.row_stride = config_.padded_vocab_size;
  p.logits = logits_.data();
  p.rows = StagedOnDevice<kernels::SamplingRow>(StagedSamplingOffset());
  p.histories = StagedOnDevice<kernels::TokenHistory>(StagedHistoriesOffset());
  p.ids = reinterpret_cast<int32_t*>(sampled_.data());
  p.logprobs = sampled_.data() + scratch_rows_;
  return backend_->Sample(p);
}

absl::Status Model::CopySampled(int64_t rows, const StepSampling& sampling) {
  static_assert(sizeof(int32_t) == sizeof(float));
  H3_RETURN_IF_ERROR(backend_->CopyToHost(
      sampled_.data(), rows, reinterpret_cast<float*>(sampling.ids)));
  if (sampling.logprobs == nullptr) return absl::OkStatus();
  return backend_->CopyToHost(sampled_.data() + scratch_rows_, rows,
                              sampling.logprobs);
}

absl::Status Model::CopyLogits(int64_t rows, float* logits) {
  if (logits == nullptr) return backend_->Synchronize();
  return backend_->CopyToHost(logits_.data(), rows * config_.padded_vocab_size,
                              logits);
}

}  // namespace h3::engine
