#include "engine/scheduler/request_output.h"

#include <algorithm>
#include <utility>

namespace h3::engine {

RequestOutput::RequestOutput(
    std::shared_ptr<ResultStream> stream,
    std::optional<tokenizer::IncrementalDecoder> decoder,
    std::vector<std::string> stop_strings)
    : stream_(std::move(stream)),
      decoder_(std::move(decoder)),
      stop_strings_(std::move(stop_strings)) {}

std::optional<Delta> RequestOutput::Next(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  while (!done_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    std::optional<Delta> delta =
        stream_->Next(std::max(left, std::chrono::milliseconds(0)));
    if (!delta.has_value()) return std::nullopt;
    if (delta->finish == FinishReason::kError) {
      done_ = true;
      return delta;
    }
    if (stopped_.has_value()) {
      // Tokens the loop sampled before it saw the stop are dropped; its
      // final delta brings the usage.
      if (delta->finish == FinishReason::kNone) continue;
      Delta out = *std::move(stopped_);
      out.usage = delta->usage;
      out.usage.generated_tokens = delivered_;
      done_ = true;
      return out;
    }
    const FinishReason engine_finish = delta->finish;
    MakeText(*delta);
    if (delta->finish == FinishReason::kStop && !delta->matched_stop.empty() &&
        engine_finish == FinishReason::kNone) {
      stopped_ = *std::move(delta);
      continue;
    }
    if (delta->finish != FinishReason::kNone) {
      // The engine's final delta: usage counts what the client got.
      delta->usage.generated_tokens = delivered_;
      done_ = true;
    }
    return delta;
  }
  return std::nullopt;
}

void RequestOutput::MakeText(Delta& delta) {
  if (!decoder_.has_value()) {
    delivered_ += static_cast<int64_t>(delta.token_ids.size());
    return;
  }
  for (size_t i = 0; i < delta.token_ids.size(); ++i) {
    const int32_t id = delta.token_ids[i];
    // End of text and stop token ids end the request and have no text.
    const bool last = i + 1 == delta.token_ids.size();
    if (last && delta.finish != FinishReason::kNone &&
        (delta.finish == FinishReason::kEos || delta.matched_stop_token >= 0)) {
      ++delivered_;
      break;
    }
    absl::StatusOr<tokenizer::IncrementalDecoder::Step> step =
        decoder_->Add(id);
    ++delivered_;
    if (!step.ok()) {
      delta.token_ids.resize(i + 1);
      if (delta.logprobs.size() > i + 1) delta.logprobs.resize(i + 1);
      delta.finish = FinishReason::kError;
      delta.error = step.status();
      stream_->Cancel();
      return;
    }
    delta.text += step->text;
    if (step->stop_index >= 0) {
      delta.token_ids.resize(i + 1);
      if (delta.logprobs.size() > i + 1) delta.logprobs.resize(i + 1);
      delta.matched_stop = stop_strings_[step->stop_index];
      delta.matched_stop_token = -1;
      delta.finish = FinishReason::kStop;
      stream_->RequestStop(delivered_);
      return;
    }
  }
  if (delta.finish != FinishReason::kNone && !decoder_->stopped()) {
    // Text held back for a stop string that never completed, or an
    // unfinished character (as U+FFFD).
    if (absl::StatusOr<std::string> rest = decoder_->Finish(); rest.ok()) {
      delta.text += *rest;
    }
  }
}

}  // namespace h3::engine
