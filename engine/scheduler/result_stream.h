#ifndef H3_ENGINE_SCHEDULER_RESULT_STREAM_H_
#define H3_ENGINE_SCHEDULER_RESULT_STREAM_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/scheduler/request.h"

namespace h3::engine {

// The hand-over of token ids from the engine loop (producer) to one
// request's reader (RequestOutput, on the client's handler thread). The loop
// never waits on it: when `capacity` deltas are already waiting, a new one
// is merged into the last (tokens and logprobs appended), so a slow client
// costs memory bounded by its max_new_tokens, never time. The deltas carry
// no text. Thread-safe.
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
  // Consumer: a stop string completed with the request's `generated`-th
  // token (>= 1). The loop ends the request there (kStop, usage counting
  // `generated` tokens) at its next iteration, unless it has ended already.
  void RequestStop(int64_t generated) {
    stop_at_.store(generated, std::memory_order_relaxed);
  }
  // 0 when no stop was requested.
  int64_t stop_requested() const {
    return stop_at_.load(std::memory_order_relaxed);
  }
  // Whether the final delta was taken.
  bool done() const;

  // Producer. REQUIRES: nothing pushed after a delta with finish != kNone.
  void Push(Delta delta);

 private:
  const size_t capacity_;
  std::atomic<bool> cancelled_{false};
  std::atomic<int64_t> stop_at_{0};
  mutable absl::Mutex mu_;
  absl::CondVar ready_;
  std::deque<Delta> queue_ ABSL_GUARDED_BY(mu_);
  bool final_taken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_SCHEDULER_RESULT_STREAM_H_
