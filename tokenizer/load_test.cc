#include "tokenizer/load.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/test_fixtures.h"

namespace h3::tokenizer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A sample of texts that exercises merges, whitespace and specials.
const char* const kTexts[] = {"Hello world", "it's   spaced\n\n out  ",
                              "caf\u00e9 \u65e5\u672c \U0001F600",
                              "x<|endoftext|>y"};

// Every tokenizer loaded from GPT-2's data in another format must give the
// ids of the reference one.
void ExpectSameAsGpt2(const Tokenizer& t) {
  EXPECT_EQ(t.kind(), "gpt2-bpe");
  EXPECT_EQ(t.vocab_size(), testing::Gpt2().vocab_size());
  EXPECT_EQ(t.eos_id(), 50256);
  for (const char* text : kTexts) {
    for (const bool special : {false, true}) {
      EXPECT_EQ(
          t.Encode(text, {.parse_special = special}).value(),
          testing::Gpt2().Encode(text, {.parse_special = special}).value())
          << text;
    }
  }
}

// GPT-2's data as a Hugging Face tokenizer.json.
std::string MakeTokenizerJson(const testing::Gpt2Files& files) {
  nlohmann::json merges = nlohmann::json::array();
  for (absl::string_view line : absl::StrSplit(files.vocab_bpe, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    merges.push_back(std::string(line));
  }
  nlohmann::json json = {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", nlohmann::json::parse(files.encoder_json)},
        {"merges", merges}}},
  };
  return json.dump();
}

class LoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<testing::Gpt2Files> files = testing::ReadGpt2Files();
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *std::move(files);
    dir_ = fs::temp_directory_path() /
           ("h3_load_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const fs::path& path, const std::string& contents) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << contents;
  }

  testing::Gpt2Files files_;
  fs::path dir_;
};

TEST_F(LoadTest, Gpt2FromEveryFileLayout) {
  Write(dir_ / "hf/vocab.json", files_.encoder_json);
  Write(dir_ / "hf/merges.txt", files_.vocab_bpe);
  Write(dir_ / "openai/encoder.json", files_.encoder_json);
  Write(dir_ / "openai/vocab.bpe", files_.vocab_bpe);
  Write(dir_ / "json/tokenizer.json", MakeTokenizerJson(files_));
  for (const char* path : {"hf", "openai", "json/tokenizer.json"}) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::unique_ptr<Tokenizer>> t =
        LoadTokenizerFromPath((dir_ / path).string());
    ASSERT_TRUE(t.ok()) << t.status();
    ExpectSameAsGpt2(**t);
  }
}

TEST_F(LoadTest, SentencePieceFromAModelFile) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t =
      LoadTokenizerFromPath(testing::TestDataPath("spm/h3_test.model"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->kind(), "sentencepiece");
  EXPECT_EQ((*t)->Encode("Hello world").value(),
            testing::SentencePiece().Encode("Hello world").value());
}

TEST_F(LoadTest, RefusesPathsOfAnotherKind) {
  Write(dir_ / "empty/readme.txt", "nothing here");
  Write(dir_ / "vocab.txt", "a\nb\n");
  for (const fs::path& path : {dir_ / "empty", dir_ / "vocab.txt"}) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t =
        LoadTokenizerFromPath(path.string());
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(".model"));
    EXPECT_THAT(t.status().message(), HasSubstr("vocab.json + merges.txt"));
  }
  EXPECT_EQ(LoadTokenizerFromPath((dir_ / "missing").string()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(LoadTest, RefusesWrongFileSetsAndKinds) {
  EXPECT_EQ(LoadTokenizer("gpt2-bpe", {{"vocab.json", files_.encoder_json}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadTokenizer("sentencepiece", {{"x.json", "{}"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadTokenizer("wordpiece", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LoadTest, ReportsCorruptFiles) {
  auto load = [&](const std::string& vocab, const std::string& merges) {
    return LoadTokenizer("gpt2-bpe",
                         {{"vocab.json", vocab}, {"merges.txt", merges}})
        .status();
  };
  EXPECT_EQ(load("{not json", files_.vocab_bpe).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(load("[1, 2]", files_.vocab_bpe).code(),
            absl::StatusCode::kDataLoss);
  const absl::Status bad_merge =
      load(files_.encoder_json, "#version: 0.2\na b c\n");
  EXPECT_EQ(bad_merge.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad_merge.message(), HasSubstr("line 2"));
  EXPECT_EQ(load(files_.encoder_json, "#version: 0.2\nzzzz qqqq\n").code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(load("{\"a\": 0}", "").code(),
            absl::StatusCode::kDataLoss);  // no bytes

  nlohmann::json other = nlohmann::json::parse(MakeTokenizerJson(files_));
  other["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(LoadTokenizer("gpt2-bpe", {{"tokenizer.json", other.dump()}})
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace h3::tokenizer
