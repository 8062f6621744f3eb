#include "tokenizer/gpt2_pretokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer/utf8.h"

namespace h3::tokenizer {
namespace {

using ::testing::ElementsAreArray;

std::vector<std::string> Split(absl::string_view text) {
  static const Gpt2PreTokenizer pretokenizer;
  std::vector<absl::string_view> pieces;
  pretokenizer.Split(text, &pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(Gpt2PreTokenizer, WhitespaceRunsLeaveTheirLastSpaceToTheNextWord) {
  using V = std::vector<std::string>;
  EXPECT_THAT(Split("a   b"), ElementsAreArray(V{"a", "  ", " b"}));
  EXPECT_THAT(Split("a b"), ElementsAreArray(V{"a", " b"}));
  EXPECT_THAT(Split("trailing   "), ElementsAreArray(V{"trailing", "   "}));
  EXPECT_THAT(Split("\n\n\n"), ElementsAreArray(V{"\n\n\n"}));
  EXPECT_THAT(Split("x \n y"), ElementsAreArray(V{"x", " \n", " y"}));
  EXPECT_THAT(Split("x\ny"), ElementsAreArray(V{"x", "\n", "y"}));
  EXPECT_THAT(Split("x  \ny"), ElementsAreArray(V{"x", "  ", "\n", "y"}));
  EXPECT_THAT(Split("word  ."), ElementsAreArray(V{"word", " ", " ."}));
  EXPECT_THAT(Split("  42"), ElementsAreArray(V{" ", " 42"}));
  EXPECT_THAT(Split("\t\tx"), ElementsAreArray(V{"\t", "\t", "x"}));
  // U+3000 is whitespace, U+0085 is not (JavaScript's \s).
  EXPECT_THAT(Split("a\u3000\u3000b"),
              ElementsAreArray(V{"a", "\u3000", "\u3000", "b"}));
  EXPECT_THAT(Split("a\u0085b"), ElementsAreArray(V{"a", "\u0085", "b"}));
}

TEST(Gpt2PreTokenizer, ContractionsAreCaseSensitive) {
  using V = std::vector<std::string>;
  EXPECT_THAT(Split("it's we'll"),
              ElementsAreArray(V{"it", "'s", " we", "'ll"}));
  EXPECT_THAT(Split("IT'S"), ElementsAreArray(V{"IT", "'", "S"}));
  EXPECT_THAT(Split("'re'd"), ElementsAreArray(V{"'re", "'d"}));
}

TEST(Gpt2PreTokenizer, LettersNumbersAndOtherSymbols) {
  using V = std::vector<std::string>;
  EXPECT_THAT(Split("Hello, world! 123abc"),
              ElementsAreArray(V{"Hello", ",", " world", "!", " 123", "abc"}));
  EXPECT_THAT(Split("caf\u00e9 \u65e5\u672c \U0001F600\U0001F600"),
              ElementsAreArray(
                  V{"caf\u00e9", " \u65e5\u672c", " \U0001F600\U0001F600"}));
}

TEST(Gpt2PreTokenizer, PiecesConcatenateToTheText) {
  const std::string text =
      "  Mixed\t\ttext:\n\n  code(x) { return 1; }  \r\n\u00a0\u00a0end   ";
  std::string joined;
  for (const std::string& piece : Split(text)) {
    EXPECT_FALSE(piece.empty());
    joined += piece;
  }
  EXPECT_EQ(joined, text);
}

TEST(Gpt2PreTokenizer, WhitespaceSetMatchesThePattern) {
  // IsWhitespace and the whitespace class inside the RE2 pattern must be the
  // same set. In "cc!", a whitespace c is a piece on its own (the run leaves
  // its last character, which cannot join "!" unless it is ' '), while a
  // letter, number or symbol c makes "cc" or "cc!".
  for (char32_t cp = 1; cp < 0x20000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string c;
    AppendUtf8(cp, &c);
    ASSERT_EQ(Split(c + c + "!").front() == c,
              Gpt2PreTokenizer::IsWhitespace(cp))
        << std::hex << static_cast<uint32_t>(cp);
  }
}

}  // namespace
}  // namespace h3::tokenizer
