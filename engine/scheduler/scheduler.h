#ifndef H3_ENGINE_SCHEDULER_SCHEDULER_H_
#define H3_ENGINE_SCHEDULER_SCHEDULER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "engine/model.h"
#include "engine/scheduler/observer.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/result_stream.h"
#include "tokenizer/tokenizer.h"

namespace h3::engine {

struct SchedulerOptions {
  // Sequences decoded together; each holds SSM states and a KV cache of the
  // model's max_sequence_length, allocated at start-up.
  int slots = 8;
  // Requests that may wait for a slot; past it Submit answers
  // ResourceExhausted.
  int max_waiting = 64;
  // Prompt tokens prefilled per iteration, over all sequences: a long
  // prompt is split across iterations (state passing), so running
  // sequences keep decoding between its chunks.
  int64_t prefill_tokens_per_iteration = 256;
  // Deltas a stream buffers before the loop merges new ones into the last.
  int stream_buffer = 64;
  // Receives per-iteration and per-request measurements; may be null. Must
  // outlive the scheduler.
  SchedulerObserver* observer = nullptr;
};

// The engine loop: continuous batching over a pool of sequence slots.
// Each iteration (1) ends cancelled, aborted and expired requests, (2) admits
// waiting requests into free slots, (3) prefills prompt chunks within the
// token budget, oldest first, sampling a sequence's first token when its
// prompt is done, (4) runs one batched decode step for every sequence past
// its prompt and samples, (5) frees the slots of finished sequences.
// Results go to each request's ResultStream and never wait for its reader.
//
// Thread-safe: Submit, Abort, stats and Drain may be called from any thread;
// one internal thread drives the model.
class Scheduler {
 public:
  // Starts the loop. `tokenizer` (may be null: token ids only, no stop
  // strings, no text) must outlive the scheduler. InvalidArgument for bad
  // options; errors of allocating the slots.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(
      std::unique_ptr<Model> model, const tokenizer::Tokenizer* tokenizer,
      const SchedulerOptions& options);
  // Stops the loop; requests still held end with kCancelled.
  ~Scheduler();

  // Queues `request`. InvalidArgument naming the field and the limit for a
  // bad request; AlreadyExists for a request id in use; ResourceExhausted
  // when the waiting queue is full; Unavailable while draining.
  absl::StatusOr<std::shared_ptr<ResultStream>> Submit(
      GenerationRequest request);

  // Ends the request with kCancelled at the next iteration. False if no
  // request with this id is held.
  bool Abort(const std::string& request_id);

  // Refuses new requests from now on; held ones run to their end.
  void Drain();

  struct Stats {
    int running = 0;  // in slots
    int waiting = 0;
    int free_slots = 0;
    int slots = 0;
    int64_t iterations = 0;
  };
  Stats stats() const;

  const Model& model() const { return *model_; }
  // Null when the scheduler serves token ids only.
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Sequence;

  Scheduler(std::unique_ptr<Model> model, const tokenizer::Tokenizer* tokenizer,
            const SchedulerOptions& options);
  absl::Status Validate(const GenerationRequest& request) const;
  void Loop();
  // One iteration.
  void Step();
  void Admit();
  void EndExpired();
  absl::Status Prefill();
  absl::Status Decode();
  // The sampling row of a sequence's next token.
  static kernels::SamplingRow RowOf(const Sequence& s);
  // Streams a sequence's sampled token; `logits` (host, or null) are its
  // logits, needed for top logprobs.
  void Emit(Sequence& s, int32_t id, float logprob, const float* logits);
  // Ends the sequence; `delta` (completed with the reason, usage and any
  // held-back text) is sent by Retire, or by whoever ends a waiting one.
  void Finish(Sequence& s, FinishReason reason, Delta delta);
  // Frees the slots and request ids of finished sequences, then sends their
  // final deltas.
  void Retire();

  std::unique_ptr<Model> model_;
  const tokenizer::Tokenizer* tokenizer_;
  const SchedulerOptions options_;
  std::vector<float> logits_;  // [slots, padded_vocab], for top logprobs

  // Owned by the loop thread.
  std::vector<std::unique_ptr<SequenceState>> free_states_;
  std::vector<std::unique_ptr<Sequence>> running_;
  IterationReport report_;  // of the current iteration

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> waiting_;  // guarded by mu_
  absl::flat_hash_set<std::string> ids_;           // guarded by mu_
  absl::flat_hash_set<std::string> aborted_;       // guarded by mu_
  int running_count_ = 0;                          // guarded by mu_
  int64_t iterations_ = 0;                         // guarded by mu_
  bool draining_ = false;                          // guarded by mu_
  bool stopping_ = false;                          // guarded by mu_
  std::thread thread_;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_SCHEDULER_SCHEDULER_H_
