#ifndef H3_TOKENIZER_GPT2_VOCAB_FILES_H_
#define H3_TOKENIZER_GPT2_VOCAB_FILES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace h3::tokenizer {

// The contents of a GPT-2 style byte-level BPE vocabulary, whatever files it
// came from. Token spellings use GPT-2's byte-level alphabet
// (bytes_to_unicode.h), as in the files.
struct Gpt2Vocabulary {
  // A token that is matched in text before pre-tokenization (Hugging Face's
  // "added tokens", GPT-2's "<|endoftext|>"). `content` is plain UTF-8 text,
  // not byte-level spelling.
  struct AddedToken {
    std::string content;
    int32_t id = 0;
    bool special = false;  // matched only when EncodeOptions::parse_special
  };

  std::vector<std::pair<std::string, int32_t>> tokens;  // spelling -> id
  // Merges in rank order: merges[0] has rank 0, the highest priority.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added_tokens;
  int32_t eos_id = -1;  // "<|endoftext|>" when present
};

// From Hugging Face's vocab.json + merges.txt, or OpenAI's encoder.json +
// vocab.bpe (the same formats). "<|endoftext|>", when in the vocabulary,
// becomes the special end-of-text token. DataLoss, naming the file and
// line or entry, for malformed contents.
absl::StatusOr<Gpt2Vocabulary> ParseGpt2VocabAndMerges(
    absl::string_view vocab_json, absl::string_view merges_txt);

// From a Hugging Face tokenizer.json whose model is BPE with a ByteLevel
// pre-tokenizer and no normalizer (GPT-2's). DataLoss for malformed JSON;
// Unimplemented, naming the setting, for tokenizers of another kind.
absl::StatusOr<Gpt2Vocabulary> ParseHfTokenizerJson(absl::string_view json);

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_GPT2_VOCAB_FILES_H_
