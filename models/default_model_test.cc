// The embedded default model: it is the committed file, it loads and writes
// text, and it predicts held-out Bible text better than a trigram model
// trained on the same tokens (both computed here).
#include "models/default_model.h"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "engine/backend.h"
#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/mapped_file.h"
#include "models/perplexity.h"
#include "nlohmann/json.hpp"
#include "tests/support/runner_calls.h"
#include "tests/support/subprocess.h"
#include "tokenizer/load.h"

namespace h3::models {
namespace {

const std::string kModelDir = H3_MODEL_DIR;  // models/h3-kjv

// Word separators for checking generated text against the corpus.
constexpr absl::string_view kWordSeparators = " \t\n,.;:?!()'";

std::string ReadFile(const std::string& path) {
  absl::StatusOr<std::string> contents = loader::ReadFileToString(path);
  EXPECT_TRUE(contents.ok()) << contents.status();
  return contents.ok() ? *std::move(contents) : std::string();
}

struct Loaded {
  std::unique_ptr<loader::ModelFile> file;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<engine::Runner> runner;  // 64 slots
};

Loaded Load() {
  Loaded l;
  auto file = OpenDefaultModel();
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return l;
  l.file = *std::move(file);
  auto tok = tokenizer::LoadEmbeddedTokenizer(*l.file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  if (tok.ok()) l.tokenizer = *std::move(tok);
  auto runner = h3::testing::MakeRunner(*l.file, engine::MakeCpuBackend(),
                                        /*slots=*/64, /*context=*/2048);
  EXPECT_TRUE(runner.ok()) << runner.status();
  if (runner.ok()) l.runner = *std::move(runner);
  return l;
}

TEST(DefaultModelTest, EmbedsTheCommittedFile) {
  const std::string committed = ReadFile(kModelDir + "/h3-kjv.h3");
  ASSERT_FALSE(committed.empty());
  const absl::Span<const uint8_t> bytes = DefaultModelBytes();
  ASSERT_EQ(bytes.size(), committed.size());
  EXPECT_EQ(0, std::memcmp(bytes.data(), committed.data(), bytes.size()));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % 64, 0u);
  EXPECT_LT(bytes.size(), 8u << 20);  // the budget for the repository
}

TEST(DefaultModelTest, IsTheTrainedHybridWithItsTokenizer) {
  Loaded l = Load();
  ASSERT_NE(l.runner, nullptr);
  const nlohmann::json log =
      nlohmann::json::parse(ReadFile(kModelDir + "/train_log.json"));
  const loader::ModelConfig& c = l.runner->model().config();
  EXPECT_EQ(c.d_model, log["config"]["d_model"].get<int64_t>());
  EXPECT_EQ(c.n_layer, log["config"]["n_layer"].get<int64_t>());
  EXPECT_EQ(c.attn_layer_idx,
            log["config"]["attn"].get<std::vector<int64_t>>());
  EXPECT_EQ(c.vocab_size, log["vocab"].get<int64_t>());
  EXPECT_EQ(l.file->tokenizer_kind(), "sentencepiece");
  EXPECT_EQ(l.tokenizer->vocab_size(), c.vocab_size);
}

// Held-out text as models/h3-kjv/corpus.py splits it, tokenized by the
// model's own tokenizer, with the training text for the n-gram.
class HeldOutTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/h3-kjv-corpus-" +
                           std::to_string(getpid()));
    testing::RunResult r = testing::RunCommand(
        {"/usr/bin/python3", kModelDir + "/corpus.py", *dir_});
    if (r.exit_code != 0) {
      *dir_ =
          "corpus.py failed (scripts/install-deps.sh --test installs "
          "bible-kjv): " +
          r.out;
    }
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  // Documents of split `name` as one stream, each followed by </s>.
  static std::vector<int32_t> Stream(const tokenizer::Tokenizer& tok,
                                     const std::string& name) {
    std::vector<int32_t> stream;
    for (absl::string_view line : absl::StrSplit(
             ReadFile(*dir_ + "/" + name + ".txt"), '\n', absl::SkipEmpty())) {
      auto ids = tok.Encode(absl::StrReplaceAll(line, {{"\t", "\n"}}));
      EXPECT_TRUE(ids.ok()) << ids.status();
      if (!ids.ok()) return {};
      stream.insert(stream.end(), ids->begin(), ids->end());
      stream.push_back(tok.eos_id());
    }
    return stream;
  }

  static std::string* dir_;
};
std::string* HeldOutTest::dir_ = nullptr;

TEST_F(HeldOutTest, PerplexityBeatsATrigramModelAndMatchesTraining) {
  ASSERT_TRUE(std::filesystem::is_directory(*dir_)) << *dir_;
  Loaded l = Load();
  ASSERT_NE(l.runner, nullptr);
  const std::vector<int32_t> train = Stream(*l.tokenizer, "train");
  const std::vector<int32_t> valid = Stream(*l.tokenizer, "valid");
  const nlohmann::json log =
      nlohmann::json::parse(ReadFile(kModelDir + "/train_log.json"));
  // The same tokens PyTorch trained and validated on.
  ASSERT_EQ(int64_t(train.size()), log["train_tokens"].get<int64_t>());
  ASSERT_EQ(int64_t(valid.size()), log["valid_tokens"].get<int64_t>());

  const KneserNeyTrigram trigram(int32_t(l.runner->model().config().vocab_size),
                                 train);
  const double ngram_loss = NgramLoss(trigram, valid);
  auto model_loss = ModelLoss(*l.runner, valid, log["seq_len"].get<int64_t>());
  ASSERT_TRUE(model_loss.ok()) << model_loss.status();
  std::cout << "held-out tokens " << valid.size() << ": h3-kjv " << *model_loss
            << " nats/token (perplexity " << std::exp(*model_loss)
            << "), Kneser-Ney trigram " << ngram_loss << " (perplexity "
            << std::exp(ngram_loss) << ")\n";
  EXPECT_LT(*model_loss, ngram_loss);
  // The engine on the fp16 model file agrees with the fp32 PyTorch
  // evaluation at the end of training.
  const double torch_loss = log["evals"].back()["valid_loss"].get<double>();
  EXPECT_NEAR(*model_loss, torch_loss, 0.01);
}

TEST_F(HeldOutTest, GreedyTextIsMadeOfBibleWords) {
  ASSERT_TRUE(std::filesystem::is_directory(*dir_)) << *dir_;
  Loaded l = Load();
  ASSERT_NE(l.runner, nullptr);
  std::set<std::string> words;
  for (absl::string_view w :
       absl::StrSplit(ReadFile(*dir_ + "/train.txt"),
                      absl::ByAnyChar(kWordSeparators), absl::SkipEmpty())) {
    words.emplace(w);
  }
  auto prompt = l.tokenizer->Encode("And God said");
  ASSERT_TRUE(prompt.ok());
  const engine::SlotId slot = *l.runner->memory().Acquire();
  std::vector<float> logits;
  ASSERT_TRUE(h3::testing::Feed(*l.runner, slot, *prompt, &logits).ok());
  std::vector<int32_t> out;
  for (int i = 0; i < 48; ++i) {
    const int32_t next =
        int32_t(std::max_element(
                    logits.begin(),
                    logits.begin() + l.runner->model().config().vocab_size) -
                logits.begin());
    if (next == l.tokenizer->eos_id()) break;
    out.push_back(next);
    ASSERT_TRUE(h3::testing::Feed(*l.runner, slot, {&next, 1}, &logits).ok());
  }
  auto text = l.tokenizer->Decode(out);
  ASSERT_TRUE(text.ok());
  std::cout << "And God said" << *text << "\n";
  int known = 0, all = 0;
  for (absl::string_view w : absl::StrSplit(
           *text, absl::ByAnyChar(kWordSeparators), absl::SkipEmpty())) {
    ++all;
    known += words.count(std::string(w));
  }
  EXPECT_GE(all, 8) << *text;
  EXPECT_GE(known, all * 9 / 10) << *text;
}

}  // namespace
}  // namespace h3::models
