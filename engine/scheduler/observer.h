#ifndef H3_ENGINE_SCHEDULER_OBSERVER_H_
#define H3_ENGINE_SCHEDULER_OBSERVER_H_

#include <cstdint>
#include <vector>

#include "engine/prefix_cache.h"
#include "engine/scheduler/request.h"

namespace h3::engine {

// What one iteration of the engine loop did, and the load after it.
struct IterationReport {
  int prefill_sequences = 0;  // sequences that got a prompt chunk
  int64_t prefill_tokens = 0;
  // Each prompt chunk of the step: where it starts, its tokens, and the
  // whole prompt's length.
  struct PromptChunk {
    int64_t start = 0;
    int64_t tokens = 0;
    int64_t prompt = 0;
  };
  std::vector<PromptChunk> prompt_chunks;
  int decode_batch = 0;  // sequences in the batched decode step
  int64_t generated_tokens = 0;
  // For every token sampled after a sequence's first: the seconds since
  // that sequence's previous token.
  std::vector<double> inter_token_seconds;
  // Wall time of the step's Runner::Execute (the forward, sampling and the
  // wait for the sampled ids), 0 without a step; and of the whole
  // iteration (ending expired requests, admission, planning, the step,
  // handing out the tokens, retiring): what is not the step is the engine
  // loop's own time, during which the device idles.
  double step_seconds = 0;
  double iteration_seconds = 0;
  int running = 0;  // in slots, after retiring
  int waiting = 0;
  int free_slots = 0;
  PrefixCacheStats prefix_cache;  // totals so far
};

// Receives the engine loop's measurements (the server turns them into
// Prometheus metrics). Called on the loop thread, so implementations must
// be quick and must not call back into the Scheduler.
class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  // After every iteration that held at least one request.
  virtual void OnIteration(const IterationReport& report) = 0;
  // When a request ends, whatever the reason (waiting requests included).
  virtual void OnFinish(FinishReason reason, const Usage& usage) = 0;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_SCHEDULER_OBSERVER_H_
