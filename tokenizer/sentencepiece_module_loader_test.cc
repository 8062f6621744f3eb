// Finding and loading h3_sentencepiece_module, and the models it holds.
#include "tokenizer/sentencepiece_module_loader.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer/sentencepiece_library.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/test_fixtures.h"

namespace h3::tokenizer::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

TEST(SentencePieceModuleCandidates, TheVariableAloneWhenSet) {
  EXPECT_THAT(SentencePieceModuleCandidates("/x/module.so", "/opt/h3/bin/h3"),
              ElementsAre("/x/module.so"));
}

TEST(SentencePieceModuleCandidates, NextToTheProgramThenLibThenBuildTree) {
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    const std::vector<std::string> paths =
        SentencePieceModuleCandidates(unset, "/opt/h3/bin/h3");
    ASSERT_THAT(paths, SizeIs(3));
    EXPECT_EQ(paths[0], "/opt/h3/bin/" H3_SENTENCEPIECE_MODULE_FILE_NAME);
    EXPECT_EQ(paths[1], "/opt/h3/lib/h3/" H3_SENTENCEPIECE_MODULE_FILE_NAME);
    EXPECT_EQ(paths[2], H3_SENTENCEPIECE_MODULE_BUILD_PATH);
  }
  EXPECT_THAT(SentencePieceModuleCandidates(nullptr, ""),
              ElementsAre(H3_SENTENCEPIECE_MODULE_BUILD_PATH));
}

TEST(SentencePieceModule, AMissingModuleIsAClearError) {
  std::string error;
  EXPECT_EQ(SentencePieceModule::Open(
                {"/nonexistent/a.so", "/nonexistent/b.so"}, &error),
            nullptr);
  EXPECT_THAT(error, HasSubstr("cannot load the sentencepiece module"));
  EXPECT_THAT(error, HasSubstr("/nonexistent/a.so: no such file"));
  EXPECT_THAT(error, HasSubstr("/nonexistent/b.so: no such file"));
  EXPECT_THAT(error, HasSubstr("H3_SENTENCEPIECE_MODULE"));
}

TEST(SentencePieceModule, AFileThatIsNotAModuleGivesDlerror) {
  const std::string not_elf = testing::TestDataPath("corpus.json");
  std::string error;
  EXPECT_EQ(SentencePieceModule::Open({not_elf}, &error), nullptr);
  EXPECT_THAT(error, HasSubstr(not_elf + ": "));
  EXPECT_THAT(error, HasSubstr("invalid ELF header"));
}

TEST(SentencePieceModule, TheProcessFindsItsModule) {
  std::string error;
  const SentencePieceModule* module = SentencePieceModule::ForProcess(&error);
  ASSERT_NE(module, nullptr) << error;
  EXPECT_EQ(SentencePieceModule::ForProcess(&error), module);
  EXPECT_THAT(module->path(),
              ::testing::EndsWith(H3_SENTENCEPIECE_MODULE_FILE_NAME));
}

TEST(SentencePieceLibrary, ModelsAreFreedWithTheirOwner) {
  absl::StatusOr<std::string> model =
      testing::ReadTestData("spm/h3_test.model");
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t before = SentencePieceLibrary::LiveModelsForTesting();
  {
    std::vector<std::unique_ptr<SentencePieceTokenizer>> tokenizers;
    for (int i = 0; i < 3; ++i) {
      auto t = SentencePieceTokenizer::Create(*model);
      ASSERT_TRUE(t.ok()) << t.status();
      tokenizers.push_back(*std::move(t));
    }
    EXPECT_EQ(SentencePieceLibrary::LiveModelsForTesting(), before + 3);
  }
  EXPECT_EQ(SentencePieceLibrary::LiveModelsForTesting(), before);
  // A model that fails to parse leaves nothing behind either.
  EXPECT_FALSE(SentencePieceTokenizer::Create("not a model").ok());
  EXPECT_EQ(SentencePieceLibrary::LiveModelsForTesting(), before);
}

TEST(SentencePieceModule, ReportsTheSizeItNeedsAndWritesNoMore) {
  // The protocol the client's buffers rely on: a call with too small a buffer
  // fills it, writes nothing past it, and returns the whole size.
  std::string error;
  const SentencePieceModule* module = SentencePieceModule::ForProcess(&error);
  ASSERT_NE(module, nullptr) << error;
  absl::StatusOr<std::string> bytes =
      testing::ReadTestData("spm/h3_test.model");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  char message[256] = "";
  H3SpmModel* model =
      module->load(bytes->data(), bytes->size(), message, sizeof(message));
  ASSERT_NE(model, nullptr) << message;

  const std::string text = "hello world, caf\u00e9";
  const int64_t n = module->encode(model, text.data(), text.size(), nullptr, 0,
                                   message, sizeof(message));
  ASSERT_GT(n, 2) << message;
  std::vector<int32_t> ids(n + 1, -7);
  EXPECT_EQ(module->encode(model, text.data(), text.size(), ids.data(), 2,
                           message, sizeof(message)),
            n);
  EXPECT_EQ(ids[2], -7);
  EXPECT_EQ(module->encode(model, text.data(), text.size(), ids.data(), n,
                           message, sizeof(message)),
            n);
  EXPECT_EQ(ids[n], -7);

  std::string decoded(text.size() + 1, '#');
  EXPECT_EQ(module->decode(model, ids.data(), n, decoded.data(), 3, message,
                           sizeof(message)),
            static_cast<int64_t>(text.size()));
  EXPECT_EQ(decoded.substr(0, 4), text.substr(0, 3) + "#");
  EXPECT_EQ(module->decode(model, ids.data(), n, decoded.data(), text.size(),
                           message, sizeof(message)),
            static_cast<int64_t>(text.size()));
  EXPECT_EQ(decoded, text + "#");

  char piece[4] = {'#', '#', '#', '#'};
  const int32_t newline = 3 + 0x0A;  // "<0x0A>"
  EXPECT_EQ(module->id_to_piece(model, newline, piece, 3), 6);
  EXPECT_EQ(std::string(piece, 4), "<0x#");
  EXPECT_EQ(module->id_to_piece(model, -1, piece, 4), -1);
  EXPECT_EQ(module->id_to_piece(model, module->piece_size(model), piece, 4),
            -1);
  EXPECT_EQ(module->is_byte(model, newline), 1);
  EXPECT_EQ(module->is_byte(model, -1), 0);
  module->free(model);
}

TEST(SentencePieceModule, ErrorMessagesAreTruncatedAndTerminated) {
  std::string error;
  const SentencePieceModule* module = SentencePieceModule::ForProcess(&error);
  ASSERT_NE(module, nullptr) << error;
  char message[8];
  std::memset(message, '#', sizeof(message));
  const std::string junk = "not a model";
  EXPECT_EQ(module->load(junk.data(), junk.size(), message, sizeof(message)),
            nullptr);
  EXPECT_EQ(std::strlen(message), sizeof(message) - 1);
  EXPECT_EQ(module->load(junk.data(), junk.size(), nullptr, 0), nullptr);
}

TEST(SentencePieceLibrary, EncodesFromManyThreadsAtOnce) {
  const Tokenizer& t = testing::SentencePiece();
  const std::string text =
      "State-space models such as H3 process long sequences; caf\u00e9 "
      "\u65e5\u672c\u8a9e \U0001F600\n";
  const std::vector<int32_t> expected = t.Encode(text).value();
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 200; ++round) {
        absl::StatusOr<std::vector<int32_t>> ids = t.Encode(text);
        if (!ids.ok() || *ids != expected) ++mismatches[i];
        absl::StatusOr<std::string> back = t.Decode(expected);
        if (!back.ok() || *back != text) ++mismatches[i];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace h3::tokenizer::internal
