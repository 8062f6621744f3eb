// `h3 bench --multi-turn` as a user runs it. Against the h3serve binary
// with its prefix cache on: from turn 2 on, the prompt tokens the server took
// from its cache are exactly the previous turn's prompt and answer, summed
// over the conversations. Against a scripted
// server (fake_server.h): each turn's prompt holds the previous one and the
// answer's ids as streamed, and the context warning counts the last turn.
// Usage errors. Nothing here asserts speed.

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/testing/test_server.h"
#include "tests/e2e/bench_support.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"

namespace h3 {
namespace {

using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kH3 = H3_BIN;
const std::string kH3serve = H3SERVE_BIN;

class BenchTurnsTest : public ::testing::Test {
 protected:
  void TearDown() override { std::remove(json_path_.c_str()); }

  // `h3 bench --server ADDRESS args... --json FILE`.
  RunResult Bench(const std::string& address, std::vector<std::string> args) {
    return testing::RunBench(kH3, address, std::move(args), json_path_);
  }

  nlohmann::json ReadJson() { return testing::ReadJsonFile(json_path_); }

  const std::string json_path_ = h3::testing::TempPath("bench_turns.json");
};

TEST_F(BenchTurnsTest, FromTurnTwoTheCacheHoldsThePreviousPromptAndAnswer) {
  // The h3serve binary on the in-process tests' small random model.
  std::string address;
  std::unique_ptr<testing::Subprocess> server = testing::StartH3serve(
      kH3serve, server::testing::SpmModelPath(),
      {"--prefix-cache-memory", "64M", "--prefix-cache-interval", "16"},
      &address);
  ASSERT_FALSE(address.empty()) << server->output();
  const RunResult result = Bench(
      address, {"--multi-turn", "4", "--num-prompts", "3", "--input-len", "6",
                "--output-len", "4", "--max-concurrency", "2", "--temperature",
                "0", "--num-warmups", "0", "--seed", "5"});
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("3 conversations of 4 turns"));
  EXPECT_THAT(result.out, HasSubstr("cached tok"));

  const nlohmann::json out = ReadJson();
  EXPECT_EQ(out["options"]["multi_turn"], 4);
  EXPECT_EQ(out["results"]["requests"]["succeeded"], 12);
  const nlohmann::json& turns = out["turns"];
  ASSERT_EQ(turns.size(), 4u) << out.dump(1);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(turns[k]["turn"], k + 1);
    EXPECT_EQ(turns[k]["succeeded"], 3);
    // 6 new ids per turn, 4 answered per earlier turn, 3 conversations.
    EXPECT_EQ(turns[k]["prompt_tokens"], 3 * (6 + k * 10)) << k;
    if (k > 0) {
      EXPECT_EQ(turns[k]["cached_prompt_tokens"],
                turns[k - 1]["prompt_tokens"].get<int>() + 3 * 4)
          << "turn " << k + 1;
    }
  }
  // The same per conversation.
  std::map<int, int> previous;  // conversation -> prompt + answer
  ASSERT_EQ(out["per_request"].size(), 12u);
  for (const nlohmann::json& r : out["per_request"]) {
    const int c = r["conversation"];
    if (r["turn"] > 1) {
      EXPECT_EQ(r["cached_input_tokens"], previous[c]) << r.dump();
    }
    previous[c] = r["input_tokens"].get<int>() + r["output_tokens"].get<int>();
  }
}

TEST_F(BenchTurnsTest, EachPromptHoldsThePreviousOneAndTheStreamedAnswer) {
  auto fake = testing::ScriptedServer({7, 8, 9}, /*hold_open=*/false);
  ASSERT_NE(fake, nullptr);

  // The last turn: 3 * 400 new ids and 2 answers of 3, then 3 more.
  const RunResult result =
      Bench(fake->address(), {"--multi-turn", "3", "--num-prompts", "2",
                              "--input-len", "400", "--output-len", "3",
                              "--max-concurrency", "1", "--num-warmups", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("up to 1209 tokens per sequence"));
  const std::vector<v1::GenerateRequest> requests = fake->requests();
  ASSERT_EQ(requests.size(), 6u);
  // One at a time: turn 1 of conversations 0 and 1, then turn 2, turn 3.
  for (size_t i = 2; i < requests.size(); ++i) {
    const auto& before = requests[i - 2].token_ids().ids();
    std::vector<int32_t> expected(before.begin(), before.end());
    expected.insert(expected.end(), {7, 8, 9});
    const auto& ids = requests[i].token_ids().ids();
    ASSERT_EQ(ids.size(), static_cast<int>(expected.size()) + 400) << i;
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), ids.begin())) << i;
  }
  const nlohmann::json out = ReadJson();
  ASSERT_EQ(out["turns"].size(), 3u);
  EXPECT_EQ(out["turns"][2]["prompt_tokens"], 2 * 1206);
}

TEST_F(BenchTurnsTest, UsageErrorsExit2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--multi-turn", "0"},
        {"--multi-turn", "2", "--backend", "openai"},
        {"--multi-turn", "2", "--dataset", "prompts.jsonl"}}) {
    const RunResult result = Bench("127.0.0.1:1", args);
    EXPECT_EQ(result.exit_code, 2) << args.back() << "\n" << result.out;
    EXPECT_THAT(result.out, HasSubstr("--multi-turn")) << result.out;
    EXPECT_THAT(result.out, Not(HasSubstr("UNAVAILABLE"))) << result.out;
  }
}

}  // namespace
}  // namespace h3
