#ifndef H3_ENGINE_SCHEDULER_RESULT_STREAM_H_
#define H3_ENGINE_SCHEDULER_RESULT_STREAM_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

#include "engine/scheduler/request.h"

namespace h3::engine {

// The hand-over from the engine loop (producer) to one client's handler
// (consumer). The loop never waits on it: when `capacity` deltas are
// already waiting, a new one is merged into the last (tokens, text and
// logprobs appended), so a slow client costs memory bounded by its
// max_new_tokens, never time. Thread-safe.
class ResultStream {
 public:
  explicit ResultStream(size_t capacity) : capacity_(capacity) {}

  // Consumer. The next delta, waiting up to `timeout`; nullopt on timeout
  // and after the final delta (finish != kNone) was taken.
  std::optional<Delta> Next(std::chrono::milliseconds timeout);
  // Consumer: the client is gone or cancelled. The loop ends the request
  // (kCancelled) at its next iteration.
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  // Whether the final delta was taken.
  bool done() const;

  // Producer. REQUIRES: nothing pushed after a delta with finish != kNone.
  void Push(Delta delta);

 private:
  const size_t capacity_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Delta> queue_;   // guarded by mu_
  bool final_taken_ = false;  // guarded by mu_
};

}  // namespace h3::engine

#endif  // H3_ENGINE_SCHEDULER_RESULT_STREAM_H_
