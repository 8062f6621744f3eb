#include "tokenizer/stop_strings.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/utf8.h"

namespace h3::tokenizer {

absl::StatusOr<StopStringMatcher> StopStringMatcher::Create(
    std::vector<std::string> stop_strings) {
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop string ", i, " is empty"));
    }
    if (absl::Status s = ValidateUtf8(stop_strings[i]); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop string ", i, ": ", s.message()));
    }
  }
  return StopStringMatcher(std::move(stop_strings));
}

StopStringMatcher::Result StopStringMatcher::Add(absl::string_view text) {
  Result result;
  if (stopped_) return result;
  pending_.append(text.data(), text.size());
  // Everything before pending_ was emitted only because no stop string could
  // start there, so a match lies wholly inside pending_.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t start = pending_.find(stops_[i]);
    if (start == std::string::npos) continue;
    const size_t end = start + stops_[i].size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      result.stop_index = static_cast<int>(i);
    }
  }
  if (result.stop_index >= 0) {
    result.text = pending_.substr(0, best_start);
    pending_.clear();
    stopped_ = true;
    return result;
  }
  const size_t hold = HoldFrom();
  result.text = pending_.substr(0, hold);
  pending_.erase(0, hold);
  return result;
}

size_t StopStringMatcher::HoldFrom() const {
  size_t longest = 0;
  for (const std::string& stop : stops_)
    longest = std::max(longest, stop.size());
  // A held suffix is a proper prefix of a stop string, so shorter than it.
  const size_t first =
      pending_.size() >= longest ? pending_.size() - longest + 1 : 0;
  for (size_t i = first; i < pending_.size(); ++i) {
    const absl::string_view suffix = absl::string_view(pending_).substr(i);
    for (const std::string& stop : stops_) {
      if (absl::StartsWith(stop, suffix)) return i;
    }
  }
  return pending_.size();
}

std::string StopStringMatcher::Finish() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace h3::tokenizer
