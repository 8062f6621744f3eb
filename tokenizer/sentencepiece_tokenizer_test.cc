// The sentencepiece tokenizer against Debian's python3-sentencepiece
// (reference ids in testdata/spm/reference.json, written by
// testdata/spm/make_reference.py for testdata/spm/h3_test.model).
#include "tokenizer/sentencepiece_tokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/test_fixtures.h"
#include "tokenizer/utf8.h"

namespace h3::tokenizer {
namespace {

using ::testing::HasSubstr;
using testing::ReadTestJson;
using testing::SentencePiece;

class SentencePieceReferenceTest : public testing::ReferenceTest {
 protected:
  void SetUp() override { LoadReference("spm/reference.json"); }
};

TEST_F(SentencePieceReferenceTest, VocabularyFacts) {
  EXPECT_EQ(SentencePiece().kind(), "sentencepiece");
  EXPECT_EQ(SentencePiece().vocab_size(), reference_["vocab_size"].get<int>());
  EXPECT_EQ(SentencePiece().bos_id(), reference_["bos_id"].get<int>());
  EXPECT_EQ(SentencePiece().eos_id(), reference_["eos_id"].get<int>());
  EXPECT_EQ(SentencePiece().TokenText(SentencePiece().eos_id()).value(),
            "</s>");
  EXPECT_EQ(SentencePiece().TokenText(3 + 0x0A).value(), "<0x0A>");
}

TEST_F(SentencePieceReferenceTest, EncodeAgreesExactly) {
  for (size_t i = 0; i < corpus_.size(); ++i) {
    absl::StatusOr<std::vector<int32_t>> ids =
        SentencePiece().Encode(corpus_[i]);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, reference_["encode"][i].get<std::vector<int32_t>>())
        << "corpus[" << i << "] = " << nlohmann::json(corpus_[i]).dump();
  }
}

TEST_F(SentencePieceReferenceTest, RoundTripsTheCorpus) {
  // The fixture model does not normalize, so decoding gives the text back.
  for (size_t i = 0; i < corpus_.size(); ++i) {
    const std::vector<int32_t> ids = SentencePiece().Encode(corpus_[i]).value();
    const std::string text = SentencePiece().Decode(ids).value();
    EXPECT_EQ(text, reference_["decode_of_encode"][i].get<std::string>());
    EXPECT_EQ(text, corpus_[i]);
  }
}

TEST_F(SentencePieceReferenceTest, DecodeAgreesIncludingBrokenCharacters) {
  for (const nlohmann::json& c : reference_["decode"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    absl::StatusOr<std::string> text = SentencePiece().Decode(ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, c["text"].get<std::string>()) << c["ids"].dump();
    EXPECT_TRUE(ValidateUtf8(*text).ok());
  }
}

TEST(SentencePieceTokenizer, RefusesInvalidUtf8AndBadIds) {
  absl::StatusOr<std::vector<int32_t>> ids = SentencePiece().Encode("ab\xC3(");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(), HasSubstr("byte offset 2"));
  for (const int32_t id : {-1, SentencePiece().vocab_size()}) {
    EXPECT_EQ(SentencePiece().Decode({5, id}).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(SentencePiece().TokenText(id).ok());
  }
}

TEST(SentencePieceTokenizer, EndsInsideCharacterOnlyForSplitBytes) {
  // "𝄞" (F0 9D 84 9E) is not in the small vocabulary: four byte pieces.
  const std::vector<int32_t> ids = SentencePiece().Encode("\U0001D11E").value();
  ASSERT_GE(ids.size(), 4u);
  const size_t first_byte = ids.size() - 4;
  for (size_t n = first_byte + 1; n < ids.size(); ++n) {
    EXPECT_TRUE(SentencePiece().EndsInsideCharacter({ids.data(), n})) << n;
  }
  EXPECT_FALSE(SentencePiece().EndsInsideCharacter(ids));
  EXPECT_FALSE(SentencePiece().EndsInsideCharacter(
      SentencePiece().Encode("the").value()));
}

TEST(SentencePieceTokenizer, RefusesAModelThatIsNotOne) {
  absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> t =
      SentencePieceTokenizer::Create("this is not a protobuf");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace h3::tokenizer
