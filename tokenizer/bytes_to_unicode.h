#ifndef H3_TOKENIZER_BYTES_TO_UNICODE_H_
#define H3_TOKENIZER_BYTES_TO_UNICODE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace h3::tokenizer {

// GPT-2's byte-level alphabet. Its vocabulary files spell every token as a
// string of printable characters, one per byte: the bytes '!'..'~',
// 0xA1..0xAC and 0xAE..0xFF stand for themselves (as code points), and the
// other 68 bytes (controls, space, DEL, 0x80..0xA0, 0xAD) map in increasing
// order to U+0100, U+0101, ... (so ' ' is 'Ġ' U+0120, '\n' is 'Ċ' U+010A).

// The code point that stands for `byte`.
char32_t ByteToUnicode(uint8_t byte);

// The byte that `code_point` stands for, or -1 if it is not in the alphabet.
int UnicodeToByte(char32_t code_point);

// The bytes a vocabulary entry spells, or nullopt if `byte_level` (UTF-8) has
// a character outside the alphabet. REQUIRES: `byte_level` is valid UTF-8.
std::optional<std::string> ByteLevelToBytes(absl::string_view byte_level);

// The vocabulary spelling (UTF-8) of raw `bytes`.
std::string BytesToByteLevel(absl::string_view bytes);

}  // namespace h3::tokenizer

#endif  // H3_TOKENIZER_BYTES_TO_UNICODE_H_
