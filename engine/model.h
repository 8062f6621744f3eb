#ifndef H3_ENGINE_MODEL_H_
#define H3_ENGINE_MODEL_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/backend.h"
#include "kernels/sampling.h"
#include "loader/config.h"
#include "loader/model_file.h"

namespace h3::engine {

struct ModelOptions {
  // Prompts are prefilled in chunks of at most this many tokens, each chunk
  // starting from the state the previous one left (state passing).
  int64_t prefill_chunk = 1024;
  // Positions a sequence may reach: the attention layers' KV cache capacity.
  int64_t max_sequence_length = 2048;
  // On a backend with graphs (CUDA), decode steps are padded to a batch-size
  // bucket and each bucket's step is captured once and replayed. Off: the
  // same padded steps, run op by op.
  bool decode_graphs = true;
};

// Everything a sequence remembers: per H3 layer the shift and diagonal
// states, per attention layer its K/V cache, its sampling history (token
// counts and flags, kernels/sampling.h), and how many tokens it has
// consumed. Lives in the model's backend memory. Made by Model::NewSequence.
class SequenceState {
 public:
  int64_t position() const { return position_; }

 private:
  friend class Model;
  SequenceState() = default;
  // Per layer: H3 layers [d * N + 2 * p*p*H * M] (shift, then diagonal);
  // attention layers [2 * capacity * d] (K, then V).
  std::vector<Buffer> layers_;
  // int32 counts [vocab_size], then uint8 flags [vocab_size].
  Buffer history_;
  int64_t position_ = 0;
};

// Token sampling on the model's backend after a step, so that only ids
// (and their logprobs) come back to the host: one row per sequence, each
// sequence's history supplying the penalties and banned tokens and counting
// the draw.
struct StepSampling {
  absl::Span<const kernels::SamplingRow> rows;
  int32_t* ids = nullptr;     // host [rows.size()] out
  float* logprobs = nullptr;  // host [rows.size()] out, or null
};

// The hybrid H3 language model, written once over a Backend.
// Not thread-safe: one thread drives a model (the engine loop).
class Model {
 public:
  // Copies the weights of `file` into the backend as fp32 and precomputes the
  // discretised SSM parameters. Unimplemented for shapes the model cannot run
  // (e.g. an odd d_state).
  static absl::StatusOr<std::unique_ptr<Model>> Load(
      const loader::ModelFile& file, std::unique_ptr<Backend> backend,
      const ModelOptions& options);

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const loader::ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }

  // A sequence at position 0 (all states zero).
  absl::StatusOr<std::unique_ptr<SequenceState>> NewSequence();
  // InvalidArgument naming the first id outside [0, vocab_size) and its
  // index (padding rows of the embedding are not tokens).
  absl::Status CheckTokens(absl::Span<const int32_t> tokens) const;

  // Returns `sequence` to position 0 with zero states, counts and flags,
  // reusing its memory (a slot taken by the next request).
  absl::Status ResetSequence(SequenceState& sequence);
  // Makes *to a copy of `from` (prefix-state reuse, snapshots).
  absl::Status CopySequence(const SequenceState& from, SequenceState* to);
  // Replaces the sequence's token flags (kTokenInPrompt, kTokenBanned;
  // [vocab_size]); counts are kept.
  absl::Status SetTokenFlags(SequenceState& sequence,
                             absl::Span<const uint8_t> flags);

  // Feeds `tokens` (at least one) to the sequence from its current position,
  // in chunks of options().prefill_chunk. If `logits` (host,
  // [padded_vocab_size]) is not null it receives the last token's logits;
  // with `sampling` (one row), the next token is sampled from them.
  // InvalidArgument for an out-of-vocabulary id or a sequence that would
  // outgrow max_sequence_length; the state is unchanged then.
  absl::Status Prefill(SequenceState& sequence,
                       absl::Span<const int32_t> tokens, float* logits,
                       const StepSampling* sampling = nullptr);

  // One token for each of a batch of sequences, each at its own position.
  // `logits` (host, or null) receives [batch, padded_vocab_size]; with
  // `sampling` (a row per sequence) the next tokens are sampled. Same
  // errors, and InvalidArgument if sampling's rows do not match.
  absl::Status Decode(absl::Span<SequenceState* const> sequences,
                      absl::Span<const int32_t> tokens, float* logits,
                      const StepSampling* sampling = nullptr);

 private:
  struct Layer;

  Model(loader::ModelConfig config, std::unique_ptr<Backend> backend,
        const ModelOptions& options);
  absl::Status LoadWeights(const loader::ModelFile& file);

  // Runs all layers over `rows` tokens: for prefill, one sequence's chunk
  // (rows = chunk length); for decode, one token of each sequence. hidden_ is
  // the input; the final-norm output is left in normed_.
  absl::Status Forward(int64_t rows, absl::Span<SequenceState* const> sequences,
                       bool prefill);
  absl::Status H3Mixer(Layer& layer, int layer_index, int64_t rows,
                       absl::Span<SequenceState* const> sequences,
                       bool prefill);
  absl::Status AttentionMixer(Layer& layer, int layer_index, int64_t rows,
                              absl::Span<SequenceState* const> sequences,
                              bool prefill);
  // The LM head over normed_ rows [first_row, first_row + rows) into
  // logits_ (backend memory).
  absl::Status LmHead(int64_t first_row, int64_t rows);
  absl::Status CopyLogits(int64_t rows, float* logits);
  // Samples `rows` rows of logits_ with the staged rows and histories into
  // sampled_.
  absl::Status SampleStaged(int64_t rows);
  // Copies the first `rows` sampled ids and logprobs to the host.
  absl::Status CopySampled(int64_t rows, const StepSampling& sampling);
  // Grows the activations and the staging area to `rows` rows. Growth moves
  // memory that captured graphs point to: it drops them.
  absl::Status EnsureScratch(int64_t rows);
  // The decode step over staged arguments, for `rows` (a bucket) rows:
  // upload, embedding, layers, LM head, and sampling if `sample`.
  absl::Status DecodeStep(int64_t rows, bool sample);

  kernels::H3Shape H3ShapeOf() const;
  kernels::H3State H3StateOf(SequenceState& sequence, int layer_index) const;
  kernels::KvCache KvCacheOf(SequenceState& sequence, int layer_index) const;
  kernels::TokenHistory HistoryOf(SequenceState& sequence) const;
  // A history's size in floats: int32 counts, then uint8 flags rounded up.
  int64_t HistoryFloats() const {
    return config_.vocab_size + (config_.vocab_size + 3) / 4;
  }
  // The padded batch a decode step of `rows` sequences runs as.
  int64_t Bucket(int64_t rows) const;

  // Where the per-call arguments live in the staging area (byte offsets),
  // for up to scratch_rows_ rows: token ids, positions, sampling rows and
  // histories, then per H3 layer an H3State per row and per attention layer
  // a KvCache per row.
  int64_t StagedIdsOffset() const { return 0; }
  int64_t StagedPositionsOffset() const;
  int64_t StagedSamplingOffset() const;
  int64_t StagedHistoriesOffset() const;
  int64_t StagedStatesOffset(int layer_index) const;
  // The staging area's size: everything above.
  int64_t StagedBytes() const {
    return StagedStatesOffset(h3_layers_ + attention_layers_);
  }
  template <typename T>
  T* Staged(int64_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(staging_.host()) + offset);
  }
  template <typename T>
  T* StagedOnDevice(int64_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(staging_.device()) + offset);
  }

  loader::ModelConfig config_;
  std::unique_ptr<Backend> backend_;
  ModelOptions options_;
  std::vector<Layer> layers_;
  std::vector<int> slot_of_layer_;  // layer -> its index among H3 or attn
  int h3_layers_ = 0, attention_layers_ = 0;
  Matrix embedding_;  // [V_pad, d]; also the LM head
  Buffer ln_f_weight_, ln_f_bias_;

  // Activations and staged arguments for up to scratch_rows_ tokens.
  int64_t scratch_rows_ = 0;
  Buffer hidden_, residual_, normed_, qkv_, mixed_, mlp_;
  Buffer logits_;   // [rows, V_pad]
  Buffer sampled_;  // int32 ids [rows], then float logprobs [rows]
  Staging staging_;

  bool use_graphs_ = false;
  struct Graph {
    int64_t bucket;
    bool sample;
    int id;
  };
  std::vector<Graph> graphs_;
  // The state padding rows of a bucketed decode step run on; its results
  // are never read (several rows may share it).
  std::unique_ptr<SequenceState> pad_;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_MODEL_H_
