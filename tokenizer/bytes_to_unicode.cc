#include "tokenizer/bytes_to_unicode.h"

#include <array>

#include "tokenizer/utf8.h"

namespace h3::tokenizer {
namespace {

// The highest code point in the alphabet: 256 + 68 - 1.
constexpr char32_t kMaxCodePoint = 0x143;

bool StandsForItself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
         (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_unicode;
  std::array<int16_t, kMaxCodePoint + 1> to_byte;
};

const Tables& GetTables() {
  static const Tables tables = [] {
    Tables t;
    t.to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      t.to_unicode[b] = StandsForItself(b) ? static_cast<char32_t>(b) : next++;
      t.to_byte[t.to_unicode[b]] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

char32_t ByteToUnicode(uint8_t byte) { return GetTables().to_unicode[byte]; }

int UnicodeToByte(char32_t code_point) {
  return code_point <= kMaxCodePoint ? GetTables().to_byte[code_point] : -1;
}

std::optional<std::string> ByteLevelToBytes(absl::string_view byte_level) {
  std::string out;
  out.reserve(byte_level.size());
  size_t pos = 0;
  while (pos < byte_level.size()) {
    const int b = UnicodeToByte(DecodeUtf8At(byte_level, &pos));
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

std::string BytesToByteLevel(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    AppendUtf8(ByteToUnicode(static_cast<uint8_t>(c)), &out);
  }
  return out;
}

}  // namespace h3::tokenizer
