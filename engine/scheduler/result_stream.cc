#include "engine/scheduler/result_stream.h"

#include <utility>

namespace h3::engine {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kDeadline:
      return "deadline";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

void ResultStream::Push(Delta delta) {
  {
    absl::MutexLock lock(&mu_);
    if (queue_.empty() || queue_.size() < capacity_) {
      queue_.push_back(std::move(delta));
    } else {
      Delta& last = queue_.back();
      last.token_ids.insert(last.token_ids.end(), delta.token_ids.begin(),
                            delta.token_ids.end());
      last.logprobs.insert(last.logprobs.end(), delta.logprobs.begin(),
                           delta.logprobs.end());
      last.finish = delta.finish;
      last.matched_stop = std::move(delta.matched_stop);
      last.matched_stop_token = delta.matched_stop_token;
      last.usage = delta.usage;
      last.error = std::move(delta.error);
    }
  }
  ready_.SignalAll();
}

std::optional<Delta> ResultStream::Next(std::chrono::milliseconds timeout) {
  absl::MutexLock lock(&mu_);
  if (final_taken_) return std::nullopt;
  const absl::Time deadline = absl::Now() + absl::FromChrono(timeout);
  while (queue_.empty()) {
    if (ready_.WaitWithDeadline(&mu_, deadline) && queue_.empty()) {
      return std::nullopt;
    }
  }
  Delta delta = std::move(queue_.front());
  queue_.pop_front();
  if (delta.finish != FinishReason::kNone) final_taken_ = true;
  return delta;
}

bool ResultStream::done() const {
  absl::MutexLock lock(&mu_);
  return final_taken_;
}

}  // namespace h3::engine
