// `h3 run` as a user runs it: a released-format checkpoint converted with
// `h3 convert`, generation from ids and from text, the JSON output, and bad
// requests. Logits and greedy tokens are held to the PyTorch reference's
// golden data (engine/testdata/golden.json).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/config.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden.h"
#include "tests/support/random_model.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"

namespace h3 {
namespace {

using ::h3::testing::Golden;
using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::testing::HasSubstr;

const std::string kH3 = H3_BIN;
const std::string kEngineTestdata = h3::testing::EngineTestdata();
const std::string kSpmModel = H3_TOKENIZER_TESTDATA "/spm/h3_test.model";

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// Converts the golden checkpoint `name` to a model file; returns its path.
std::string ConvertGolden(const std::string& name, const nlohmann::json& g) {
  const std::string out = h3::testing::TempPath("run_" + name + ".h3");
  RunResult convert =
      RunCommand({kH3, "convert", kEngineTestdata + "/" + name + ".safetensors",
                  "-o", out, "--dtype", "fp32", "--n-heads",
                  std::to_string(g["config"]["n_heads"].get<int>()),
                  "--vocab-size", std::to_string(g["vocab_size"].get<int>())});
  EXPECT_EQ(convert.exit_code, 0) << convert.out;
  return out;
}

nlohmann::json RunJson(std::vector<std::string> args) {
  args.insert(args.begin(), {kH3, "run"});
  args.push_back("--json");
  RunResult result = RunCommand(args);
  EXPECT_EQ(result.exit_code, 0) << result.out;
  // stdout is the one JSON line; stderr (merged into out) is empty.
  return nlohmann::json::parse(result.out, nullptr, false);
}

TEST(RunTest, GreedyTokensAndLogitsMatchThePyTorchReference) {
  for (const std::string name : {"tiny_p1", "tiny_p8_rotary"}) {
    const nlohmann::json g = Golden(name);
    const std::string model = ConvertGolden(name, g);
    const auto prompt = g["prompt"].get<std::vector<int32_t>>();
    const auto greedy = g["greedy"].get<std::vector<int32_t>>();
    for (const char* chunk : {"1024", "5"}) {
      nlohmann::json out =
          RunJson({"--model", model, "--prompt-ids", Join(prompt), "--greedy",
                   "--max-tokens", std::to_string(greedy.size()), "--logits",
                   "--prefill-chunk", chunk});
      ASSERT_FALSE(out.is_discarded()) << name;
      EXPECT_EQ(out["prompt_ids"].get<std::vector<int32_t>>(), prompt);
      EXPECT_EQ(out["generated_ids"].get<std::vector<int32_t>>(), greedy)
          << name << " chunk " << chunk;
      EXPECT_EQ(out["finish_reason"], "length");
      EXPECT_FALSE(out.contains("text"));  // no tokenizer
      const auto want = g["last_logits"].get<std::vector<double>>();
      const auto got = out["prompt_last_logits"].get<std::vector<double>>();
      // vocab_size entries; the golden data also has the padding rows.
      ASSERT_EQ(got.size(), g["vocab_size"].get<size_t>());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i])))
            << name << " logit " << i;
      }
    }
  }
}

TEST(RunTest, SeededSamplingRepeatsAndStaysInTheVocabulary) {
  const nlohmann::json g = Golden("tiny_p1");
  const std::string model = ConvertGolden("tiny_p1", g);
  const std::vector<std::string> args = {
      "--model", model,           "--prompt-ids", "3,1,4,1,5", "--max-tokens",
      "40",      "--temperature", "1.5",          "--top-k",   "20",
      "--top-p", "0.95",          "--seed",       "11"};
  nlohmann::json a = RunJson(args), b = RunJson(args);
  const auto ids = a["generated_ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, b["generated_ids"].get<std::vector<int32_t>>());
  ASSERT_EQ(ids.size(), 40u);
  for (int32_t id : ids) EXPECT_LT(id, g["vocab_size"].get<int>());
  EXPECT_GT(a["timing"]["decode_tokens_per_s"].get<double>(), 0);
}

TEST(RunTest, BadRequestsAreClearErrors) {
  const nlohmann::json g = Golden("tiny_p1");
  const std::string model = ConvertGolden("tiny_p1", g);
  const struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"--prompt-ids", "1,61"}, "token 61 at index 1 is outside"},
      {{"--prompt-ids", "1,x"}, "--prompt-ids: \"x\" is not a token id"},
      {{"--prompt-ids", ""}, "the prompt has no tokens"},
      {{"--prompt", "hello"}, "has no tokenizer"},
      {{"--prompt-ids", "1", "--top-p", "2"}, "top_p is 2"},
      {{"--prompt-ids", "1", "--greedy", "--temperature", "1"}, "excludes"},
      {{}, "--prompt or --prompt-ids"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {kH3, "run", "--model", model};
    args.insert(args.end(), c.args.begin(), c.args.end());
    RunResult result = RunCommand(args);
    EXPECT_NE(result.exit_code, 0) << c.message;
    EXPECT_THAT(result.out, HasSubstr(c.message));
  }
  RunResult missing = RunCommand(
      {kH3, "run", "--model", "/nonexistent.h3", "--prompt-ids", "1"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.out, HasSubstr("/nonexistent.h3"));
}

TEST(RunTest, TextInTextOutWithAnEmbeddedSentencePieceTokenizer) {
  // A random model over the test tokenizer's 800 pieces, with the tokenizer
  // embedded by h3 convert.
  const loader::ModelConfig c = h3::testing::SmallHybridConfig(800);
  const std::string random = h3::testing::TempPath("run_random.h3");
  ASSERT_TRUE(h3::testing::WriteRandomModel(c, random).ok());
  const std::string model = h3::testing::TempPath("run_spm.h3");
  RunResult convert = RunCommand({kH3, "convert", random, "-o", model,
                                  "--n-heads", "2", "--tokenizer", kSpmModel});
  ASSERT_EQ(convert.exit_code, 0) << convert.out;

  const std::string prompt = "The quick brown fox";
  RunResult ids =
      RunCommand({kH3, "tokenize", "--tokenizer", kSpmModel, prompt});
  ASSERT_EQ(ids.exit_code, 0) << ids.out;
  nlohmann::json out = RunJson({"--model", model, "--prompt", prompt,
                                "--max-tokens", "12", "--seed", "5"});
  EXPECT_EQ(out["prompt_ids"], nlohmann::json::parse(ids.out));
  const auto generated = out["generated_ids"].get<std::vector<int32_t>>();
  ASSERT_FALSE(generated.empty());
  std::vector<int32_t> text_ids = generated;
  if (out["finish_reason"] == "eos") text_ids.pop_back();
  if (!text_ids.empty()) {
    RunResult text = RunCommand({kH3, "tokenize", "--tokenizer", kSpmModel,
                                 "--decode", Join(text_ids)});
    ASSERT_EQ(text.exit_code, 0) << text.out;
    EXPECT_EQ(out["text"].get<std::string>() + "\n", text.out);
  }

  // Plain output streams the same text to stdout.
  RunResult plain = RunCommand({kH3, "run", "--model", model, "--prompt",
                                prompt, "--max-tokens", "12", "--seed", "5"});
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_THAT(plain.out, HasSubstr(out["text"].get<std::string>() + "\n"));
  EXPECT_THAT(plain.out, HasSubstr("prompt tokens in"));
}

}  // namespace
}  // namespace h3
