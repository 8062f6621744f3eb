#ifndef H3_TOKENIZER_STOP_STRINGS_H_
#define H3_TOKENIZER_STOP_STRINGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace h3::tokenizer {

// Watches streamed text for stop strings. Text arrives in pieces of any
// size; a stop string may span pieces. What Add returns is safe to show:
// text that could still be the beginning of a stop string is held back, and
// once a stop string is complete, it and everything after it are dropped.
// The stream stops at the stop string that is complete first (the earliest
// end; on a tie, the one that starts earliest), so the result does not
// depend on how the text was cut into pieces.
//
// Not thread-safe: one matcher per stream.
class StopStringMatcher {
 public:
  // InvalidArgument if a stop string is empty or not valid UTF-8. No stop
  // strings is fine: then text passes through unchanged.
  static absl::StatusOr<StopStringMatcher> Create(
      std::vector<std::string> stop_strings);

  struct Result {
    std::string text;     // to emit now
    int stop_index = -1;  // index of the stop string just completed, or -1
  };

  // Adds the next piece of text. REQUIRES: `text` is valid UTF-8 made of
  // whole characters. After a stop, returns empty results.
  Result Add(absl::string_view text);

  // The end of the stream: returns the held-back text, which no stop string
  // completed. Empty after a stop.
  std::string Finish();

  bool stopped() const { return stopped_; }

 private:
  explicit StopStringMatcher(std::vector<std::string> stops)
      : stops_(std::move(stops)) {}

  // The start of the longest suffix of pending_ that begins some stop
  // string (pending_.size() if none).
  size_t HoldFrom() const;

  std::vector<std::string> stops_;
  std::string pending_;  // received, not yet emitted
  bool stopped_ = false;
};

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_STOP_STRINGS_H_
