#ifndef H3_ENGINE_MODEL_H_
#define H3_ENGINE_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/backend.h"
#include "loader/config.h"
#include "loader/model_file.h"

namespace h3::engine {

struct ModelOptions {
  // Prompts are prefilled in chunks of at most this many tokens, each chunk
  // starting from the state the previous one left (state passing).
  int64_t prefill_chunk = 1024;
  // Positions a sequence may reach: the attention layers' KV cache capacity.
  int64_t max_sequence_length = 2048;
};

// Everything a sequence remembers: per H3 layer the shift and diagonal
// states, per attention layer its K/V cache, and how many tokens it has
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
  int64_t position_ = 0;
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

  // Returns `sequence` to position 0 with zero states, reusing its memory
  // (a slot taken by the next request).
  absl::Status ResetSequence(SequenceState& sequence);
  // Makes *to a copy of `from` (prefix-state reuse, snapshots).
  absl::Status CopySequence(const SequenceState& from, SequenceState* to);

  // Feeds `tokens` (at least one) to the sequence from its current position,
  // in chunks of options().prefill_chunk. If `logits` (host,
  // [padded_vocab_size]) is not null it receives the last token's logits.
  // InvalidArgument for an out-of-vocabulary id or a sequence that would
  // outgrow max_sequence_length; the state is unchanged then.
  absl::Status Prefill(SequenceState& sequence,
                       absl::Span<const int32_t> tokens, float* logits);

  // One token for each of a batch of sequences, each at its own position.
  // `logits` (host) receives [batch, padded_vocab_size]. Same errors.
  absl::Status Decode(absl::Span<SequenceState* const> sequences,
                      absl::Span<const int32_t> tokens, float* logits);

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
  absl::Status Logits(int64_t first_row, int64_t rows, float* logits);
  absl::StatusOr<const float*> Spectrum(Layer& layer, int nfft);
  absl::Status EnsureScratch(int64_t rows);

  kernels::H3Shape H3ShapeOf() const;
  kernels::H3Weights H3WeightsOf(const Layer& layer) const;

  loader::ModelConfig config_;
  std::unique_ptr<Backend> backend_;
  ModelOptions options_;
  std::vector<Layer> layers_;
  Buffer embedding_, ln_f_weight_, ln_f_bias_;  // embedding: [V_pad, d]

  // Activations for up to scratch_rows_ tokens.
  int64_t scratch_rows_ = 0;
  Buffer hidden_, residual_, normed_, q_, k_, v_, qkv_, mixed_, mlp_;
  Buffer logits_;  // [rows, V_pad]
};

}  // namespace h3::engine

#endif  // H3_ENGINE_MODEL_H_
