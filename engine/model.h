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
  // An H3 layer prefills at most this many tokens of a sequence per call;
  // a longer segment is split, each piece starting from the state the
  // previous one left (state passing). Bounds the FFT scratch of a call.
  int64_t prefill_chunk = 1024;
};

// One sequence's memory as a forward reads and updates it: per H3 layer its
// state, per attention layer its K/V cache (engine/sequence_memory.h owns
// them). The arrays are host memory; the states and caches they point to
// are the backend's.
struct SequenceView {
  absl::Span<const kernels::H3State> h3;  // [H3 layers]
  absl::Span<const kernels::KvCache> kv;  // [attention layers]
};

// The first `count` rows of a forward: one token of each of `count`
// distinct sequences, run by the recurrent step kernels. Every array lives
// in backend memory (a Staging's device side), so that a captured graph
// serves any set of sequences: positions [count]; h3[i] points to the
// [count] states of H3 layer i, kv[j] to the [count] caches of attention
// layer j, each holding kv_capacity positions.
struct StepRows {
  int64_t count = 0;
  const int64_t* positions = nullptr;
  std::vector<const kernels::H3State*> h3;  // [H3 layers]
  std::vector<const kernels::KvCache*> kv;  // [attention layers]
  int64_t kv_capacity = 0;
};

// `length` consecutive tokens of one sequence at positions [position,
// position + length): a prompt chunk (prefill by FFT convolution with state
// passing, or whatever the backend's H3 layer does).
struct Segment {
  int64_t position = 0;
  int64_t length = 0;
  SequenceView memory;
};

// The rows of one forward: the step rows first, then each segment's rows in
// order. Distinct rows belong to distinct sequences except within a
// segment.
struct ForwardBatch {
  int64_t rows = 0;              // step.count + the segments' lengths
  const int32_t* ids = nullptr;  // backend memory [rows], in the vocabulary
  StepRows step;
  absl::Span<const Segment> segments;
};

// A forward's activations for up to `rows` rows, in backend memory; made by
// Model::NewActivations, owned by whoever runs forwards (the Runner).
// hidden, residual, residual_next and mixed are fp32 (the residual stream,
// which each norm reads from one of the two residual buffers and writes to
// the other, engine/model_forward.cc); normed, qkv and
// mlp, which feed products, hold elements of `type` (the backend's
// activation_type()): with 16-bit activations their Buffers' sizes in floats
// are not their element counts.
struct Activations {
  int64_t rows = 0;
  ElementType type = ElementType::kF32;           // of normed, qkv and mlp
  Buffer hidden, residual, residual_next, mixed;  // [rows, d]
  Buffer normed;  // [rows, d]: the final norm's output
  Buffer qkv;     // [rows, 3d]
  Buffer mlp;     // [rows, d_inner]
};

// The hybrid H3 language model, written once over a Backend: its weights and
// the forward over rows. It holds no sequence: each forward reads and
// updates the memory its batch points to. Not thread-safe: one thread
// drives a model (the engine loop).
class Model {
 public:
  // Copies the weights of `file` into the backend (matrices in the backend's
  // weight type, the q|k|v and fc1 biases in its activation_type(), the rest
  // fp32) and precomputes the discretised SSM
  // parameters. Unimplemented for shapes the model cannot run (e.g. an odd
  // d_state); InvalidArgument for bad options.
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
  int h3_layers() const { return h3_layers_; }
  int attention_layers() const { return attention_layers_; }
  // Floats of one sequence's state in one H3 layer: the shift ring [d, N],
  // then the diagonal state [p, p, H, M] complex.
  int64_t H3StateFloats() const;
  kernels::H3Shape H3ShapeOf() const;

  // InvalidArgument naming the first id outside [0, vocab_size) and its
  // index (padding rows of the embedding are not tokens).
  absl::Status CheckTokens(absl::Span<const int32_t> tokens) const;

  // Activations for forwards of up to `rows` rows.
  absl::StatusOr<Activations> NewActivations(int64_t rows);

  // Embeds batch.ids and runs every layer and the final norm over the
  // batch's rows, leaving the final norm's output in act.normed. Reads and
  // updates each row's sequence memory (states, caches).
  // REQUIRES: batch.rows <= act.rows, ids in the vocabulary, every position
  // below its cache's capacity. InvalidArgument for a broken contract the
  // backend detects; Internal for a device failure.
  absl::Status Forward(const ForwardBatch& batch, Activations& act);

  // The tied LM head: logits [rows, padded_vocab] = normed [rows, d] E^T,
  // normed of the backend's activation_type(), the logits fp32.
  absl::Status LmHead(const void* normed, int64_t rows, float* logits);

 private:
  struct Layer;

  Model(loader::ModelConfig config, std::unique_ptr<Backend> backend,
        const ModelOptions& options);
  absl::Status LoadWeights(const loader::ModelFile& file);
  // The sequence mixing of layer `layer` (its index among the H3 or the
  // attention layers: `index`): from act.qkv into act.normed.
  absl::Status H3Mixer(Layer& layer, int index, const ForwardBatch& batch,
                       Activations& act);
  absl::Status AttentionMixer(Layer& layer, int index,
                              const ForwardBatch& batch, Activations& act);

  loader::ModelConfig config_;
  std::unique_ptr<Backend> backend_;
  ModelOptions options_;
  std::vector<Layer> layers_;
  std::vector<int> index_of_layer_;  // layer -> its index among H3 or attn
  int h3_layers_ = 0, attention_layers_ = 0;
  Matrix embedding_;  // [V_pad, d]; also the LM head
  Buffer ln_f_weight_, ln_f_bias_;
  // A forward's prompt segments for one packed mixer call, reused.
  std::vector<H3Segment> h3_segments_;
  std::vector<AttentionSegment> attention_segments_;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_MODEL_H_
