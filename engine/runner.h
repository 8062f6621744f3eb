#ifndef H3_ENGINE_RUNNER_H_
#define H3_ENGINE_RUNNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model.h"
#include "engine/prefix_cache.h"
#include "engine/sequence_memory.h"
#include "engine/step_plan.h"

namespace h3::engine {

struct RunnerOptions {
  // Sequences held at once: each slot holds SSM states and a K/V cache of
  // max_sequence_length positions, allocated at creation.
  int slots = 8;
  // Positions a sequence may reach (prompt plus generated tokens).
  int64_t max_sequence_length = 2048;
  // Rows (tokens) one step may feed; the activations grow to it on demand.
  // A bigger plan is refused.
  int64_t max_step_tokens = 8192;
  // On a backend with graphs (CUDA), steps of single tokens only are padded
  // to a batch-size bucket and each bucket's step is captured once and
  // replayed. Off: the same padded steps, run op by op. While the backend's
  // profiler is on (Backend::EnableProfiler), steps run op by op whatever
  // this says.
  bool graphs = true;
  // Snapshots of sequences kept for later requests with the same prefix
  // (off unless max_bytes > 0).
  PrefixCacheOptions prefix_cache;
};

// Executes step plans: the model's forward over the plan's rows, then
// sampling on the backend. Owns the model, the sequence memory, the
// activations, the staging area of per-step arguments and the captured
// graphs; the forward math never sees slots or staging offsets.
//
// A plan runs as ONE forward: every sequence's single token (the step
// rows: the recurrent H3 step and batched attention decoding) and every
// longer prompt chunk (segments: H3 prefill with state passing, attention
// prefill) share the products and norms. Only the last row of each sequence
// reaches the LM head, and only when it samples or asks for logits.
//
// Not thread-safe: one thread (the engine loop) drives a Runner.
class Runner {
 public:
  // InvalidArgument for bad options; the backend's allocation errors.
  static absl::StatusOr<std::unique_ptr<Runner>> Create(
      std::unique_ptr<Model> model, const RunnerOptions& options);
  ~Runner();

  Model& model() { return *model_; }
  const Model& model() const { return *model_; }
  SequenceMemory& memory() { return *memory_; }
  const SequenceMemory& memory() const { return *memory_; }
  const RunnerOptions& options() const { return options_; }
  PrefixCache& prefix_cache() { return *prefix_cache_; }
  const PrefixCache& prefix_cache() const { return *prefix_cache_; }

  // Runs `plan` and fills *result (reused between calls), then advances
  // each slot's position by its tokens. InvalidArgument, with nothing run or
  // changed, for an empty plan, a slot not acquired or named twice, an entry
  // without tokens, an id outside the vocabulary ("token ... at index ..."),
  // a sequence that would pass max_sequence_length, or more than
  // max_step_tokens rows. Internal for a device failure; the memory of the
  // plan's slots is then undefined.
  absl::Status Execute(const StepPlan& plan, StepResult* result);

  // Rows a step of single tokens of `sequences` sequences runs as (padded
  // to a bucket on backends with graphs).
  int64_t Bucket(int64_t sequences) const;

  // Makes the first requests' steps as fast as later ones, on a backend
  // with graphs (else it does nothing and returns 0): sizes the activations
  // for max_step_tokens rows (a step that grows them later drops every
  // graph), then runs one sampling step of padding rows at each batch
  // bucket up to Bucket(slots), which captures its graph and (CUDA,
  // --decode-products measured) times its products. No sequence's state
  // changes. The number of steps run; the backend's error.
  absl::StatusOr<int> WarmUp();

  // Why a step's graph could not be captured, the last time one could not
  // (OK if every capture succeeded). The step itself had run uncaptured
  // and stands; its shape runs op by op from then on.
  const absl::Status& capture_error() const { return capture_error_; }

 private:
  struct Layout;
  struct Graph {
    int64_t bucket;
    bool sample;
    int id;  // -1: its capture failed; the shape runs op by op
  };

  Runner(std::unique_ptr<Model> model, const RunnerOptions& options);
  absl::Status Validate(const StepPlan& plan, int64_t* rows) const;
  // Activations for `rows` rows and the staging area for them; growth drops
  // the captured graphs (they point into the old memory).
  absl::Status Reserve(int64_t rows);
  // A step of single tokens (the staged batch): upload, forward, LM head
  // and sampling, replayed from a graph of its bucket when there is one.
  absl::Status RunGraphed(const ForwardBatch& batch, bool sample);
  // The LM head over the first `head_rows` rows of the final norm's output,
  // then, if `sample`, the draw of each row with its staged sampling row.
  absl::Status HeadAndSample(int64_t head_rows, bool sample);
  ForwardBatch StepBatch(int64_t bucket) const;
  // pad_, with its one slot acquired, made on first use.
  absl::Status MakePad();
  // The step rows into staging_: the entries of `plan` at `singles` (one
  // token each; no plan without them), then padding rows up to `bucket`
  // (REQUIRES pad_ if there are any).
  void StageStepRows(const StepPlan* plan, absl::Span<const size_t> singles,
                     int64_t bucket);

  std::unique_ptr<Model> model_;
  RunnerOptions options_;
  std::unique_ptr<SequenceMemory> memory_;
  std::unique_ptr<PrefixCache> prefix_cache_;
  std::unique_ptr<SequenceMemory> pad_;  // padding rows' slot 0
  int64_t head_capacity_ = 0;            // LM-head rows: Bucket(slots)
  Activations act_;
  Buffer logits_;  // [head_capacity_, padded_vocab]
  // The sampler's output: int32 ids [head_capacity_], then the logprobs;
  // copied to its host side by the step itself (in its graph).
  Staging sampled_;
  Staging staging_;
  std::unique_ptr<Layout> layout_;
  bool use_graphs_ = false;
  std::vector<Graph> graphs_;
  absl::Status capture_error_;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_RUNNER_H_
