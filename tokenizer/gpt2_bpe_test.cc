// The GPT-2 tokenizer against the gpt-3-encoder npm package (reference ids in
// testdata/gpt2/reference.json, written by testdata/make_reference.js).
#include "tokenizer/gpt2_bpe.h"

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/test_fixtures.h"
#include "tokenizer/utf8.h"

namespace h3::tokenizer {
namespace {

using testing::Gpt2;
using ::testing::HasSubstr;
using testing::ReadTestJson;

class Gpt2ReferenceTest : public testing::ReferenceTest {
 protected:
  void SetUp() override { LoadReference("gpt2/reference.json"); }
};

TEST_F(Gpt2ReferenceTest, EncodeAgreesExactly) {
  for (size_t i = 0; i < corpus_.size(); ++i) {
    absl::StatusOr<std::vector<int32_t>> ids = Gpt2().Encode(corpus_[i]);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, reference_["encode"][i].get<std::vector<int32_t>>())
        << "corpus[" << i << "] = " << nlohmann::json(corpus_[i]).dump();
  }
}

TEST_F(Gpt2ReferenceTest, EncodeWithSpecialTokensAgrees) {
  for (size_t i = 0; i < corpus_.size(); ++i) {
    absl::StatusOr<std::vector<int32_t>> ids =
        Gpt2().Encode(corpus_[i], {.parse_special = true});
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, reference_["encode_special"][i].get<std::vector<int32_t>>())
        << "corpus[" << i << "] = " << nlohmann::json(corpus_[i]).dump();
  }
}

TEST_F(Gpt2ReferenceTest, DecodeAgreesIncludingBrokenCharacters) {
  for (const nlohmann::json& c : reference_["decode"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    absl::StatusOr<std::string> text = Gpt2().Decode(ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, c["text"].get<std::string>()) << c["ids"].dump();
    EXPECT_TRUE(ValidateUtf8(*text).ok());
  }
}

TEST_F(Gpt2ReferenceTest, RoundTripsTheCorpus) {
  for (const std::string& text : corpus_) {
    for (const bool special : {false, true}) {
      absl::StatusOr<std::vector<int32_t>> ids =
          Gpt2().Encode(text, {.parse_special = special});
      ASSERT_TRUE(ids.ok());
      EXPECT_EQ(Gpt2().Decode(*ids).value(), text);
    }
  }
}

TEST_F(Gpt2ReferenceTest, ManyThreadsGetTheSameIds) {
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < corpus_.size(); ++i) {
          const size_t k = (i + t * 7) % corpus_.size();
          absl::StatusOr<std::vector<int32_t>> ids = Gpt2().Encode(corpus_[k]);
          if (!ids.ok() ||
              *ids != reference_["encode"][k].get<std::vector<int32_t>>()) {
            ++mismatches[t];
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

// Random valid UTF-8 from several scripts, with runs of whitespace and
// control characters.
std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x00, 0x7F},     {0x20, 0x7E},       {0x20, 0x7E},
      {0xA0, 0x24F},    {0x370, 0x3FF},     {0x400, 0x4FF},
      {0x600, 0x6FF},   {0x900, 0x97F},     {0x2000, 0x206F},
      {0x3000, 0x30FF}, {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},
      {0xFE00, 0xFFFD}, {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF}};
  std::string text;
  const int length = std::uniform_int_distribution<int>(0, 40)(rng);
  for (int i = 0; i < length; ++i) {
    const auto& [lo, hi] = ranges[rng() % ranges.size()];
    char32_t cp = std::uniform_int_distribution<char32_t>(lo, hi)(rng);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = ' ';
    if (rng() % 5 == 0) cp = " \t\n"[rng() % 3];
    AppendUtf8(cp, &text);
  }
  return text;
}

TEST(Gpt2Bpe, RoundTripsRandomText) {
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    const std::string text = RandomText(rng);
    absl::StatusOr<std::vector<int32_t>> ids = Gpt2().Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    ASSERT_EQ(Gpt2().Decode(*ids).value(), text);
  }
}

TEST(Gpt2Bpe, RefusesInvalidUtf8) {
  for (const std::string& text : {std::string("abc\xFF"), std::string("\xC3"),
                                  std::string("ok \xED\xA0\x80 surrogate"),
                                  std::string("\xF0\x9F\x98")}) {
    absl::StatusOr<std::vector<int32_t>> ids = Gpt2().Encode(text);
    ASSERT_FALSE(ids.ok());
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ids.status().message(), HasSubstr("not valid UTF-8"));
  }
}

TEST(Gpt2Bpe, VocabularyFacts) {
  EXPECT_EQ(Gpt2().kind(), "gpt2-bpe");
  EXPECT_EQ(Gpt2().vocab_size(), 50257);
  EXPECT_EQ(Gpt2().eos_id(), 50256);
  EXPECT_EQ(Gpt2().bos_id(), -1);
  EXPECT_EQ(Gpt2().TokenText(50256).value(), "<|endoftext|>");
  EXPECT_EQ(Gpt2().TokenText(262).value(), "\u0120the");  // "Ġthe"
  EXPECT_EQ(Gpt2().Decode({262}).value(), " the");
  EXPECT_TRUE(Gpt2().Encode("").value().empty());
}

TEST(Gpt2Bpe, RefusesIdsOutsideTheVocabulary) {
  for (const int32_t id : {-1, 50257, 1 << 30}) {
    absl::StatusOr<std::string> text = Gpt2().Decode({464, id});
    ASSERT_FALSE(text.ok());
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(text.status().message(), HasSubstr(std::to_string(id)));
    EXPECT_FALSE(Gpt2().TokenText(id).ok());
  }
}

TEST(Gpt2Bpe, EndsInsideCharacter) {
  // "日" is E6 97 A5; GPT-2 has byte tokens for each.
  const std::vector<int32_t> ids = Gpt2().Encode("\u65e5").value();
  ASSERT_GT(ids.size(), 1u);
  for (size_t n = 1; n < ids.size(); ++n) {
    EXPECT_TRUE(Gpt2().EndsInsideCharacter({ids.data(), n})) << n;
  }
  EXPECT_FALSE(Gpt2().EndsInsideCharacter(ids));
  EXPECT_FALSE(Gpt2().EndsInsideCharacter({}));
  EXPECT_FALSE(Gpt2().EndsInsideCharacter({464}));
}

TEST(Gpt2Bpe, LongPiecesAreMergedLikeShortOnes) {
  // The reference turns "a" * 300 into "aaaa" tokens (corpus.json); a
  // 20,000-byte piece, past the cache's limit, must do the same.
  const std::vector<int32_t> four = Gpt2().Encode("aaaa").value();
  ASSERT_EQ(four.size(), 1u);
  const std::vector<int32_t> ids =
      Gpt2().Encode(std::string(20000, 'a')).value();
  EXPECT_EQ(ids, std::vector<int32_t>(5000, four[0]));
}

}  // namespace
}  // namespace h3::tokenizer
