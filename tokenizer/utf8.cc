#include "tokenizer/utf8.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace h3::tokenizer {
namespace {

// The replacement character U+FFFD in UTF-8.
constexpr char kReplacement[] = "\xEF\xBF\xBD";

// What a lead byte asks for: how many continuation bytes follow, and the
// range the first of them must lie in (narrower than 80..BF for E0, ED, F0
// and F4, which is how overlong forms, surrogates and values above U+10FFFF
// are excluded). `continuations` is -1 for a byte that cannot start a
// character.
struct LeadInfo {
  int continuations;
  uint8_t low;
  uint8_t high;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {0, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {2, 0x80, 0xBF};
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {3, 0x80, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};
  return {-1, 0, 0};
}

// How many bytes of a well-formed character start at bytes[pos]: the whole
// character's length when it is complete and well-formed; otherwise -k where
// k >= 1 is the length of the maximal subpart (the bytes that are a valid
// beginning of a character) before the sequence breaks or the input ends.
// `truncated` is set when the sequence was cut short only by the end of input.
int ScanCharacter(absl::string_view bytes, size_t pos, bool* truncated) {
  *truncated = false;
  const LeadInfo lead = Lead(static_cast<uint8_t>(bytes[pos]));
  if (lead.continuations < 0) return -1;
  for (int i = 1; i <= lead.continuations; ++i) {
    if (pos + i >= bytes.size()) {
      *truncated = true;
      return -i;
    }
    const uint8_t b = static_cast<uint8_t>(bytes[pos + i]);
    const uint8_t low = i == 1 ? lead.low : 0x80;
    const uint8_t high = i == 1 ? lead.high : 0xBF;
    if (b < low || b > high) return -i;
  }
  return lead.continuations + 1;
}

}  // namespace

absl::Status ValidateUtf8(absl::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    bool truncated;
    const int n = ScanCharacter(text, pos, &truncated);
    if (n < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "text is not valid UTF-8: the sequence at byte offset %d (first "
          "byte 0x%02X) %s",
          pos, static_cast<uint8_t>(text[pos]),
          truncated ? "is cut short by the end of the text"
                    : "is not a well-formed character"));
    }
    pos += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

size_t IncompleteUtf8Suffix(absl::string_view bytes) {
  // A character is at most 4 bytes, so an unfinished one starts within the
  // last 3.
  const size_t first = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t pos = bytes.size(); pos-- > first;) {
    const uint8_t b = static_cast<uint8_t>(bytes[pos]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    bool truncated;
    const int n = ScanCharacter(bytes, pos, &truncated);
    return n < 0 && truncated ? bytes.size() - pos : 0;
  }
  return 0;
}

std::string ReplaceInvalidUtf8(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    bool truncated;
    const int n = ScanCharacter(bytes, pos, &truncated);
    if (n > 0) {
      out.append(bytes.data() + pos, static_cast<size_t>(n));
      pos += static_cast<size_t>(n);
    } else {
      out.append(kReplacement);
      pos += static_cast<size_t>(-n);
    }
  }
  return out;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t DecodeUtf8At(absl::string_view bytes, size_t* pos) {
  const uint8_t b0 = static_cast<uint8_t>(bytes[*pos]);
  const int extra = b0 < 0x80 ? 0 : b0 < 0xE0 ? 1 : b0 < 0xF0 ? 2 : 3;
  char32_t cp = extra == 0   ? b0
                : extra == 1 ? (b0 & 0x1F)
                : extra == 2 ? (b0 & 0x0F)
                             : (b0 & 0x07);
  for (int i = 1; i <= extra; ++i) {
    cp = (cp << 6) | (static_cast<uint8_t>(bytes[*pos + i]) & 0x3F);
  }
  *pos += static_cast<size_t>(extra) + 1;
  return cp;
}

}  // namespace h3::tokenizer
