#ifndef H3_ENGINE_SCHEDULER_REQUEST_OUTPUT_H_
#define H3_ENGINE_SCHEDULER_REQUEST_OUTPUT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/scheduler/request.h"
#include "engine/scheduler/result_stream.h"
#include "tokenizer/incremental_decoder.h"

namespace h3::engine {

// The reader's side of one request (Scheduler::Submit makes it): the
// engine loop sends token ids through a ResultStream; this stage, on the
// reader's thread, turns them into text (tokenizer::IncrementalDecoder) and
// matches stop strings, so that detokenization never slows the loop. When a
// stop string completes, the delta that completed it becomes the final one
// (its tokens up to that token, its text up to the stop string) and the
// loop is asked to end the request there; the final delta waits for the
// loop's usage, which comes within one iteration.
//
// Not thread-safe: one reader. The tokenizer must outlive it.
class RequestOutput {
 public:
  // `decoder` is empty for a scheduler without a tokenizer (no text, no
  // stop strings); `stop_strings` are those it matches.
  RequestOutput(std::shared_ptr<ResultStream> stream,
                std::optional<tokenizer::IncrementalDecoder> decoder,
                std::vector<std::string> stop_strings);

  // The next delta, with its text, waiting up to `timeout`; nullopt on
  // timeout and after the final delta (finish != kNone) was returned. A
  // final delta of kError carries the engine's error and no text.
  std::optional<Delta> Next(std::chrono::milliseconds timeout);
  // The client is gone or cancelled: the loop ends the request (kCancelled)
  // at its next iteration.
  void Cancel() { stream_->Cancel(); }

 private:
  // Adds the text of `delta`'s tokens; on a stop string, cuts the tokens
  // after the one that completed it, marks the delta kStop and asks the
  // loop to end the request.
  void MakeText(Delta& delta);

  std::shared_ptr<ResultStream> stream_;
  std::optional<tokenizer::IncrementalDecoder> decoder_;
  std::vector<std::string> stop_strings_;
  int64_t delivered_ = 0;         // tokens in the deltas made so far
  std::optional<Delta> stopped_;  // final by a stop string, awaiting usage
  bool done_ = false;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_SCHEDULER_REQUEST_OUTPUT_H_
