#include "tokenizer/utf8.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace h3::tokenizer {
namespace {

using ::testing::HasSubstr;

TEST(ValidateUtf8, AcceptsWellFormedText) {
  for (const char* text :
       {"", "plain ascii", "caf\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC",
        "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF", "\xEF\xBB\xBF",
        "\xED\x9F\xBF"}) {
    EXPECT_TRUE(ValidateUtf8(text).ok()) << text;
  }
  EXPECT_TRUE(ValidateUtf8(std::string("a\0b", 3)).ok());
}

TEST(ValidateUtf8, RefusesIllFormedTextNamingTheOffset) {
  struct Case {
    std::string text;
    size_t offset;
  };
  const Case cases[] = {
      {"ab\x80", 2},            // lone continuation byte
      {"abc\xC3", 3},           // truncated 2-byte character
      {"\xC0\xAF", 0},          // overlong '/'
      {"x\xC1\xBF", 1},         // overlong
      {"\xE0\x80\xAF", 0},      // overlong 3-byte
      {"ok\xED\xA0\x80", 2},    // surrogate U+D800
      {"\xF4\x90\x80\x80", 0},  // above U+10FFFF
      {"\xF5\x80\x80\x80", 0},  // invalid lead byte
      {"\xFF", 0},
      {"\xE6\x97", 0},      // truncated 3-byte
      {"\xF0\x9F\x98", 0},  // truncated 4-byte
      {"a\xE6\x97z", 1},    // broken 3-byte
  };
  for (const Case& c : cases) {
    const absl::Status status = ValidateUtf8(c.text);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.offset;
    EXPECT_THAT(status.message(),
                HasSubstr("byte offset " + std::to_string(c.offset) + " "));
  }
}

TEST(IncompleteUtf8Suffix, CountsOnlyCompletableTails) {
  EXPECT_EQ(IncompleteUtf8Suffix(""), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Suffix("a\xC3"), 1u);
  EXPECT_EQ(IncompleteUtf8Suffix("a\xE6\x97"), 2u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(IncompleteUtf8Suffix("\xF0\x9F\x98\x80"), 0u);  // complete
  EXPECT_EQ(IncompleteUtf8Suffix("\xE0\x80"), 0u);  // can never be completed
  EXPECT_EQ(IncompleteUtf8Suffix("\x80"), 0u);      // no lead byte
  EXPECT_EQ(IncompleteUtf8Suffix("\xFF"), 0u);
}

TEST(ReplaceInvalidUtf8, OneReplacementPerMaximalSubpart) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(ReplaceInvalidUtf8("ok"), "ok");
  EXPECT_EQ(ReplaceInvalidUtf8("a\x80"
                               "b"),
            "a" + r + "b");
  EXPECT_EQ(ReplaceInvalidUtf8("\xE6\x97z"), r + "z");
  EXPECT_EQ(ReplaceInvalidUtf8("\xE6\x97"), r);
  EXPECT_EQ(ReplaceInvalidUtf8("\xF0\x9F\x98"), r);
  EXPECT_EQ(ReplaceInvalidUtf8("\xC0\xAF"), r + r);
  EXPECT_EQ(ReplaceInvalidUtf8("\xED\xA0\x80"), r + r + r);
  EXPECT_EQ(ReplaceInvalidUtf8("\xF0\x9F\x98\xE6\x97\xA5"), r + "\xE6\x97\xA5");
}

TEST(Utf8, EncodeDecodeEveryScalarValue) {
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    AppendUtf8(cp, &s);
    ASSERT_TRUE(ValidateUtf8(s).ok()) << static_cast<uint32_t>(cp);
    size_t pos = 0;
    ASSERT_EQ(DecodeUtf8At(s, &pos), cp);
    ASSERT_EQ(pos, s.size());
  }
}

}  // namespace
}  // namespace h3::tokenizer
