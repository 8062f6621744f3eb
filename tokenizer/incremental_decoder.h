#ifndef H3_TOKENIZER_INCREMENTAL_DECODER_H_
#define H3_TOKENIZER_INCREMENTAL_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace h3::tokenizer {

// Streaming detokenization: ids go in one at a time as a model samples them,
// text comes out as soon as it is certain. The concatenation of everything
// Add and Finish return equals Decode(all ids) (up to the first stop string)
// for every tokenizer, sentencepiece's context-dependent spaces included.
//   - A token that ends inside a UTF-8 character gives no text until the
//     character is complete (never a U+FFFD that later tokens would fix).
//   - Text that could still begin a stop string is held back; when a stop
//     string completes, Add reports it, and neither it nor anything after it
//     is ever returned.
//
// Not thread-safe: one decoder per stream. The tokenizer must outlive it.
class IncrementalDecoder {
 public:
  // InvalidArgument for an empty or invalid stop string.
  static absl::StatusOr<IncrementalDecoder> Create(
      const Tokenizer* tokenizer, std::vector<std::string> stop_strings = {});

  struct Step {
    std::string text;     // valid UTF-8, possibly empty
    int stop_index = -1;  // the stop string completed by this id, or -1
  };

  // Adds the next id. InvalidArgument for an id outside the vocabulary (the
  // id is not added); FailedPrecondition after a stop string was reported.
  absl::StatusOr<Step> Add(int32_t id);

  // Ends the stream and returns what was held back: the beginning of a
  // stop string that never completed, and an unfinished character as U+FFFD.
  // Empty after a stop.
  absl::StatusOr<std::string> Finish();

  bool stopped() const { return stops_.stopped(); }

 private:
  IncrementalDecoder(const Tokenizer* tokenizer, StopStringMatcher stops)
      : tokenizer_(tokenizer), stops_(std::move(stops)) {}

  // Decodes ids_[prefix_, ids_.size()) and returns the text after
  // prefix_text_, advancing the window when that text is not empty.
  absl::StatusOr<std::string> TakeNewText();

  const Tokenizer* tokenizer_;
  std::vector<int32_t> ids_;
  // The text of ids_[prefix_, read_) was returned already; it is decoded
  // again with the new ids because a token's text may depend on the one
  // before it (sentencepiece drops the space of the first word). The
  // window's start moves only past tokens that produced text.
  size_t prefix_ = 0;
  size_t read_ = 0;
  std::string prefix_text_;  // Decode(ids_[prefix_, read_))
  StopStringMatcher stops_;
};

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_INCREMENTAL_DECODER_H_
