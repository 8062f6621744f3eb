#include "tokenizer/incremental_decoder.h"

#include "base/status_macros.h"

namespace h3::tokenizer {

absl::StatusOr<IncrementalDecoder> IncrementalDecoder::Create(
    const Tokenizer* tokenizer, std::vector<std::string> stop_strings) {
  H3_ASSIGN_OR_RETURN(StopStringMatcher stops,
                      StopStringMatcher::Create(std::move(stop_strings)));
  return IncrementalDecoder(tokenizer, std::move(stops));
}

absl::StatusOr<IncrementalDecoder::Step> IncrementalDecoder::Add(int32_t id) {
  if (stops_.stopped()) {
    return absl::FailedPreconditionError(
        "the stream already ended at a stop string");
  }
  H3_RETURN_IF_ERROR(CheckTokenId(id, tokenizer_->vocab_size()));
  ids_.push_back(id);
  Step step;
  const absl::Span<const int32_t> window =
      absl::MakeConstSpan(ids_).subspan(prefix_);
  if (tokenizer_->EndsInsideCharacter(window)) return step;
  absl::StatusOr<std::string> text = TakeNewText();
  if (!text.ok()) {
    ids_.pop_back();
    return text.status();
  }
  StopStringMatcher::Result result = stops_.Add(*text);
  step.text = std::move(result.text);
  step.stop_index = result.stop_index;
  return step;
}

absl::StatusOr<std::string> IncrementalDecoder::TakeNewText() {
  const absl::Span<const int32_t> all = absl::MakeConstSpan(ids_);
  H3_ASSIGN_OR_RETURN(std::string text,
                      tokenizer_->Decode(all.subspan(prefix_)));
  // The window's text starts with prefix_text_ (the same ids, decoded the
  // same way); only its end can have grown.
  std::string new_text = text.size() > prefix_text_.size()
                             ? text.substr(prefix_text_.size())
                             : std::string();
  if (new_text.empty()) {
    prefix_text_ = std::move(text);
  } else {
    prefix_ = read_;
    H3_ASSIGN_OR_RETURN(prefix_text_, tokenizer_->Decode(all.subspan(prefix_)));
  }
  read_ = ids_.size();
  return new_text;
}

absl::StatusOr<std::string> IncrementalDecoder::Finish() {
  if (stops_.stopped()) return std::string();
  std::string out;
  if (read_ < ids_.size()) {  // ids held back inside a character
    H3_ASSIGN_OR_RETURN(std::string text, TakeNewText());
    StopStringMatcher::Result result = stops_.Add(text);
    out = std::move(result.text);
    if (result.stop_index >= 0) return out;
  }
  return out + stops_.Finish();
}

}  // namespace h3::tokenizer
