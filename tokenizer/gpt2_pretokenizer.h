#ifndef H3_TOKENIZER_GPT2_PRETOKENIZER_H_
#define H3_TOKENIZER_GPT2_PRETOKENIZER_H_

#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "re2/re2.h"

namespace h3::tokenizer {

// Splits text into the pieces GPT-2 runs BPE on, exactly as the regular
// expression of GPT-2's encoder does (matched with JavaScript's /u flag, as in
// the gpt-3-encoder reference):
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// RE2 has no look-ahead, so the alternatives up to the whitespace ones run in
// RE2 and `\s+(?!\S)|\s+` is applied by hand: a run of whitespace that ends
// the text is one piece; a run of n >= 2 followed by other text gives its
// first n-1 characters as one piece, and the last one joins what follows
// (" b" in "a   b") or stands alone. `\s` is JavaScript's whitespace set
// (tab, LF, VT, FF, CR, space, U+00A0, U+1680, U+2000..U+200A, U+2028,
// U+2029, U+202F, U+205F, U+3000, U+FEFF). The contractions are
// case-sensitive ("'S" is not one).
//
// Thread-safe after construction.
class Gpt2PreTokenizer {
 public:
  Gpt2PreTokenizer();

  // Appends the pieces of `text` to *pieces, in order; they concatenate to
  // `text`. Each view points into `text`. REQUIRES: `text` is valid UTF-8.
  void Split(absl::string_view text,
             std::vector<absl::string_view>* pieces) const;

  // Whether `code_point` is in JavaScript's `\s`.
  static bool IsWhitespace(char32_t code_point);

 private:
  std::unique_ptr<RE2> re_;
};

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_GPT2_PRETOKENIZER_H_
