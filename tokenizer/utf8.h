#ifndef H3_TOKENIZER_UTF8_H_
#define H3_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace h3::tokenizer {

// OK if `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF); otherwise InvalidArgument naming the
// byte offset of the first byte that cannot start or continue a character.
absl::Status ValidateUtf8(absl::string_view text);

// The number of bytes at the end of `bytes` that are the beginning of a
// well-formed UTF-8 character which more bytes could still complete (1 to 3),
// or 0 when `bytes` does not end inside a character. Bytes before the tail
// are not examined.
size_t IncompleteUtf8Suffix(absl::string_view bytes);

// `bytes` with every ill-formed sequence replaced by U+FFFD, one replacement
// per maximal subpart (the WHATWG Encoding standard's UTF-8 decoder, which is
// what JavaScript's TextDecoder and Python's errors="replace" do). Well-formed
// input is returned unchanged.
std::string ReplaceInvalidUtf8(absl::string_view bytes);

// Appends the UTF-8 encoding of `code_point` (REQUIRES: a Unicode scalar
// value, i.e. <= 0x10FFFF and not a surrogate) to *out.
void AppendUtf8(char32_t code_point, std::string* out);

// Decodes the character starting at bytes[*pos] and advances *pos past it.
// REQUIRES: `bytes` is well-formed UTF-8 and *pos < bytes.size() is the start
// of a character.
char32_t DecodeUtf8At(absl::string_view bytes, size_t* pos);

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_UTF8_H_
