#include "tokenizer/gpt2_pretokenizer.h"

#include "tokenizer/utf8.h"

namespace h3::tokenizer {
namespace {

// JavaScript's \s as the body of an RE2 character class; IsWhitespace below
// is the same set.
#define H3_JS_WHITESPACE                                           \
  "\\t\\n\\x0B\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}" \
  "\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"

// GPT-2's pattern without the look-ahead alternative; the last alternative
// takes a whole run of whitespace, which Split then shortens when needed.
constexpr char kPattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+"
    "| ?[^" H3_JS_WHITESPACE "\\p{L}\\p{N}]+|[" H3_JS_WHITESPACE "]+";

#undef H3_JS_WHITESPACE

// Start of the last character of non-empty, valid UTF-8 `s`.
size_t LastCharacterStart(absl::string_view s) {
  size_t pos = s.size() - 1;
  while (pos > 0 && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

}  // namespace

Gpt2PreTokenizer::Gpt2PreTokenizer() {
  RE2::Options options;
  options.set_encoding(RE2::Options::EncodingUTF8);
  options.set_log_errors(false);
  // The pattern is a constant checked by the tests; ok() cannot be false
  // for a correct build.
  re_ = std::make_unique<RE2>(kPattern, options);
}

bool Gpt2PreTokenizer::IsWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

void Gpt2PreTokenizer::Split(absl::string_view text,
                             std::vector<absl::string_view>* pieces) const {
  size_t pos = 0;
  re2::StringPiece match;
  while (pos < text.size()) {
    // Every character is whitespace, a letter, a number or none of these, so
    // some alternative always matches right at `pos`.
    if (!re_->Match(re2::StringPiece(text.data(), text.size()), pos,
                    text.size(), RE2::ANCHOR_START, &match, 1) ||
        match.empty()) {
      // Unreachable for valid UTF-8; keep making progress regardless.
      size_t next = pos;
      DecodeUtf8At(text, &next);
      pieces->push_back(text.substr(pos, next - pos));
      pos = next;
      continue;
    }
    absl::string_view piece(match.data(), match.size());
    const size_t last = LastCharacterStart(piece);
    size_t last_pos = last;
    const bool whitespace_run = IsWhitespace(DecodeUtf8At(piece, &last_pos));
    // `\s+(?!\S)`: a run followed by more text leaves its last character
    // for the next piece, unless that would leave nothing (then `\s+` takes
    // the single character).
    if (whitespace_run && pos + piece.size() < text.size() && last > 0) {
      piece = piece.substr(0, last);
    }
    pieces->push_back(piece);
    pos += piece.size();
  }
}

}  // namespace h3::tokenizer
