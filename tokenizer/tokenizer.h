#ifndef H3_TOKENIZER_TOKENIZER_H_
#define H3_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace h3::tokenizer {

// How Encode treats text.
struct EncodeOptions {
  // When true, the text of a special token (e.g. "<|endoftext|>") becomes that
  // token's id. When false (the default, and what requests from users get),
  // it is encoded as ordinary text, so a prompt cannot inject control tokens.
  bool parse_special = false;
};

// Text in, ids out, and back: the one interface the server, the engine and
// the `h3` tool use for every tokenizer (GPT-2 byte-level BPE, sentencepiece).
//
// Thread-safe: every method is const and may be called from many threads at
// once. Encode never adds a BOS or EOS token; callers add bos_id() themselves
// when it is >= 0 and the model wants one.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "gpt2-bpe" or "sentencepiece": the kind stored in model files.
  virtual absl::string_view kind() const = 0;

  // Ids are in [0, vocab_size()).
  virtual int32_t vocab_size() const = 0;

  // The end-of-text token, or -1 if the vocabulary has none.
  virtual int32_t eos_id() const = 0;

  // The beginning-of-sequence token, or -1 if the model uses none (GPT-2).
  virtual int32_t bos_id() const = 0;

  // The ids of `text`. InvalidArgument, naming the byte offset, if `text` is
  // not well-formed UTF-8. An empty text gives no ids.
  absl::StatusOr<std::vector<int32_t>> Encode(
      absl::string_view text, const EncodeOptions& options = {}) const;

  // The text of `ids`. Bytes that do not form well-formed UTF-8 (a character
  // split at the end, or ids a model sampled in a senseless order) become
  // U+FFFD, so the result is always valid UTF-8. InvalidArgument, naming the
  // id, for an id outside [0, vocab_size()).
  virtual absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const = 0;

  // Whether the bytes of `ids` end with the beginning of a UTF-8 character
  // that later ids could complete. Streaming detokenization holds such text
  // back instead of emitting U+FFFD. Ids out of range count as complete.
  virtual bool EndsInsideCharacter(absl::Span<const int32_t> ids) const = 0;

  // The vocabulary's own spelling of `id`, as in the tokenizer's files (e.g.
  // "Ġthe" for GPT-2, "▁the" or "<0x0A>" for sentencepiece); for debugging
  // and token listings, not for producing text. InvalidArgument if out of
  // range.
  virtual absl::StatusOr<std::string> TokenText(int32_t id) const = 0;

 protected:
  // Encode after validation. REQUIRES: `text` is well-formed UTF-8.
  virtual absl::StatusOr<std::vector<int32_t>> EncodeValidUtf8(
      absl::string_view text, const EncodeOptions& options) const = 0;
};

// InvalidArgument naming `id` and the range unless 0 <= id < vocab_size.
absl::Status CheckTokenId(int32_t id, int32_t vocab_size);

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_TOKENIZER_H_
