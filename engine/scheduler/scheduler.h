#ifndef H3_ENGINE_SCHEDULER_SCHEDULER_H_
#define H3_ENGINE_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/runner.h"
#include "engine/scheduler/observer.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/request_output.h"
#include "engine/scheduler/result_stream.h"
#include "engine/step_plan.h"
#include "tokenizer/tokenizer.h"

namespace h3::engine {

// The default token budget of an engine step on `backend` with `slots`
// slots (docs/scheduling.md has the measurement behind it): on the CPU 64,
// or 4 per slot when that is more; on a GPU 1024, or 4 per slot (chosen by
// arithmetic from H200 step times, not yet measured as a budget).
int64_t DefaultStepTokens(const Backend& backend, int slots);

struct SchedulerOptions {
  // Requests that may wait for a slot; past it Submit answers
  // ResourceExhausted.
  int max_waiting = 64;
  // Tokens per engine step: every running sequence's next token, then
  // prompt chunks, oldest request first, up to this many in all. A long
  // prompt is split across steps (state passing), so running sequences keep
  // generating between its chunks. At least the runner's slots (so prompts
  // always progress), at most its max_step_tokens; 0: DefaultStepTokens.
  int64_t step_tokens = 0;
  // 0: prompts are cut wherever the step's budget ends. N > 0: a prompt
  // chunk ends only at a multiple of N tokens or at the prompt's end (a
  // chunk that does not fit waits for the next step), so that where a
  // prompt is cut never depends on the other requests: with a
  // batch-invariant backend a request then gets the same bits alone or in
  // a busy server (docs/cuda-engine.md, "Batch invariance"). At most
  // step_tokens - the runner's slots, so that the oldest prompt always fits.
  int64_t fixed_chunk_tokens = 0;
  // Deltas a stream buffers before the loop merges new ones into the last.
  int stream_buffer = 64;
  // Receives per-iteration and per-request measurements; may be null. Must
  // outlive the scheduler.
  SchedulerObserver* observer = nullptr;
};

// The engine loop's policy: continuous batching over the runner's sequence
// slots. Each iteration it (1) ends cancelled, aborted, stopped and expired
// requests, (2) admits waiting requests into free slots, (3) plans one step
// (StepPlan: every running sequence's next token, then prompt chunks within
// the token budget) and has the Runner execute it, (4) hands each sampled id
// to its request's ResultStream, ending requests at end of text, a stop
// token id or max_new_tokens, and (5) frees the slots of finished requests.
// It never calls the model itself, never blocks on a reader, and never makes
// text: each request's RequestOutput does that on the reader's thread.
//
// Thread-safe: Submit, Abort, stats and Drain may be called from any thread;
// one internal thread drives the runner.
class Scheduler {
 public:
  // Starts the loop. `tokenizer` (may be null: token ids only, no stop
  // strings, no text) must outlive the scheduler. InvalidArgument for bad
  // options.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(
      std::unique_ptr<Runner> runner, const tokenizer::Tokenizer* tokenizer,
      SchedulerOptions options);
  // Stops the loop; requests still held end with kCancelled.
  ~Scheduler();

  // Queues `request`; its output is read from the returned object.
  // InvalidArgument naming the field and the limit for a bad request;
  // AlreadyExists for a request id in use; ResourceExhausted when the
  // waiting queue is full; Unavailable while draining.
  absl::StatusOr<std::unique_ptr<RequestOutput>> Submit(
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
    PrefixCacheStats prefix_cache;  // as of the last iteration
  };
  Stats stats() const;

  // The limits requests are checked against (they do not change), and the
  // options with step_tokens resolved.
  int slots() const { return slots_; }
  int64_t max_sequence_length() const { return max_sequence_length_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Sequence;

  Scheduler(std::unique_ptr<Runner> runner,
            const tokenizer::Tokenizer* tokenizer,
            const SchedulerOptions& options);
  absl::Status Validate(const GenerationRequest& request) const;
  void Loop();
  // One iteration.
  void Step();
  void Admit();
  void EndExpired();
  // Plans one step, has the runner execute it and emits its tokens.
  absl::Status RunStep();
  // Restores the longest snapshot of a newly admitted sequence's prompt
  // and notes where its prompt leaves the cached paths.
  absl::Status Restore(Sequence& s);
  // The prompt position where the sequence's next snapshot is due (its
  // prompt chunks end there): the branch point, the next multiple of the
  // cache's interval, or the prompt's end.
  int64_t NextSnapshot(const Sequence& s) const;
  // Saves the sequence's slot in the prefix cache (when it is on).
  absl::Status Snapshot(const Sequence& s);
  // The sampling row of a sequence's next token.
  static kernels::SamplingRow RowOf(const Sequence& s);
  // Hands a sequence's sampled token to its stream; `logits` (host, or
  // null) are its logits, needed for top logprobs.
  void Emit(Sequence& s, int32_t id, float logprob, const float* logits);
  // Ends the sequence; `delta` (completed with the reason and usage) is
  // sent by Retire, or by whoever ends a waiting one.
  void Finish(Sequence& s, FinishReason reason, Delta delta);
  // Frees the slots and request ids of finished sequences, then sends their
  // final deltas.
  void Retire();

  // A request that ended at max_new_tokens keeps its slot for one more
  // step: its last sampled token is fed, so that the snapshot holds the
  // prompt and the whole answer, the way a client sends them back.
  struct Tail {
    SlotId slot;
    std::vector<int32_t> tokens;  // all the slot will have been fed
  };

  // Loop thread only.
  std::unique_ptr<Runner> runner_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<Tail> tails_;
  StepPlan plan_;
  StepResult result_;
  IterationReport report_;  // of the current iteration

  const tokenizer::Tokenizer* tokenizer_;
  const SchedulerOptions options_;
  const int slots_;
  const int64_t max_sequence_length_;
  const int64_t vocab_size_;
  const int64_t padded_vocab_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::deque<std::unique_ptr<Sequence>> waiting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> ids_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> aborted_ ABSL_GUARDED_BY(mu_);
  int running_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t iterations_ ABSL_GUARDED_BY(mu_) = 0;
  PrefixCacheStats prefix_cache_stats_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  // Backend::BindThread's status on thread_: a step fails with it.
  absl::Status bound_;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_SCHEDULER_SCHEDULER_H_
