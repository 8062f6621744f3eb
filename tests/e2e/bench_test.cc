// `h3 bench` as a user runs it, against a real h3serve in-process on
// loopback serving a small random model with the test sentencepiece
// tokenizer: the --json file holds the options, the server's model, the
// client's build and numbers that add up; failures against a tiny waiting
// queue are counted and the exit status is still 0; text prompts from a
// JSON-lines file; usage and connection errors. Against a scripted server
// (fake_server.h): Ctrl-C cancels the calls in flight and still reports,
// and --progress draws the bar. Nothing here asserts speed.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/testing/test_server.h"
#include "tests/e2e/bench_support.h"
#include "tests/e2e/fake_server.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"

namespace h3 {
namespace {

using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::h3::testing::Subprocess;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kH3 = H3_BIN;

class BenchTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(server::testing::LoopbackOptions()); }

  void TearDown() override {
    std::remove(json_path_.c_str());
    std::remove(prompts_path_.c_str());
  }

  void Start(const server::ServerOptions& options) {
    server_.reset();
    server_ = server::testing::StartServer(options);
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(server_->port());
  }

  // `h3 bench --server ADDRESS args... --json FILE`.
  RunResult Bench(std::vector<std::string> args) {
    return testing::RunBench(kH3, address_, std::move(args), json_path_);
  }

  nlohmann::json ReadJson() { return testing::ReadJsonFile(json_path_); }

  std::unique_ptr<server::Server> server_;
  std::string address_;
  const std::string stem_ = h3::testing::TempPath("bench");
  const std::string json_path_ = stem_ + ".json";
  const std::string prompts_path_ = stem_ + ".jsonl";
};

TEST_F(BenchTest, JsonHoldsOptionsModelBuildAndNumbersThatAddUp) {
  const RunResult result =
      Bench({"--num-prompts", "10", "--input-len", "12", "--output-len", "5",
             "--max-concurrency", "3", "--request-rate", "50", "--seed", "9"});
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("Successful requests:"));
  EXPECT_THAT(result.out, HasSubstr("Output token throughput (tok/s):"));
  EXPECT_THAT(result.out, Not(HasSubstr("done, ")))  // no progress bar: a pipe
      << result.out;

  const nlohmann::json out = ReadJson();
  EXPECT_EQ(out["benchmark"], "h3 bench");
  const nlohmann::json& options = out["options"];
  EXPECT_EQ(options["num_prompts"], 10);
  EXPECT_EQ(options["request_rate"], 50.0);
  EXPECT_EQ(options["max_concurrency"], 3);
  EXPECT_EQ(options["seed"], 9);
  EXPECT_EQ(out["server"]["model_info"]["tokenizer"]["kind"], "sentencepiece");
  EXPECT_EQ(out["server"]["model_info"]["limits"]["max_running_requests"], 4);
  EXPECT_FALSE(
      out["server"]["server_info"]["version"].get<std::string>().empty());
  EXPECT_FALSE(out["client"]["git_commit"].get<std::string>().empty());
  EXPECT_GT(out["machine"]["cores"].get<int>(), 0);
  EXPECT_EQ(out["warmup"]["requests"], 1);

  const nlohmann::json& results = out["results"];
  EXPECT_EQ(results["requests"]["total"], 10);
  EXPECT_EQ(results["requests"]["succeeded"], 10);
  EXPECT_EQ(results["requests"]["failed"], 0);
  EXPECT_EQ(results["total_input_tokens"], 120);
  EXPECT_EQ(results["total_output_tokens"], 50);
  EXPECT_EQ(results["requests"]["finish_reasons"]["length"], 10);
  EXPECT_LE(results["peak_concurrency"].get<int>(), 3);
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"}) {
    const nlohmann::json& d = results[key];
    EXPECT_LE(d["min"].get<double>(), d["median"].get<double>()) << key;
    EXPECT_LE(d["median"].get<double>(), d["p90"].get<double>()) << key;
    EXPECT_LE(d["p90"].get<double>(), d["p99"].get<double>()) << key;
    EXPECT_LE(d["p99"].get<double>(), d["max"].get<double>()) << key;
  }
  ASSERT_EQ(out["per_request"].size(), 10u);
  for (const nlohmann::json& r : out["per_request"]) {
    EXPECT_EQ(r["outcome"], "succeeded");
    EXPECT_EQ(r["input_tokens"], 12);
    EXPECT_EQ(r["output_tokens"], 5);
  }
}

TEST_F(BenchTest, FailuresAgainstATinyQueueAreCountedNotFatal) {
  server::ServerOptions options = server::testing::LoopbackOptions();
  options.slots = 1;
  options.scheduler.max_waiting = 1;
  options.max_sequence_length = 4096;
  options.max_new_tokens = 4000;
  Start(options);
  // All at once into one slot and a waiting queue of one: while the first
  // request's 2000 tokens take far longer than sending eight, at most two
  // are taken and the others are refused.
  const RunResult result =
      Bench({"--num-prompts", "8", "--input-len", "8", "--output-len", "2000",
             "--num-warmups", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("RESOURCE_EXHAUSTED:"));
  const nlohmann::json requests = ReadJson()["results"]["requests"];
  const int succeeded = requests["succeeded"];
  const int failed = requests["failed"];
  EXPECT_EQ(succeeded + failed, 8);
  EXPECT_GE(succeeded, 1);
  EXPECT_GE(failed, 1);
  EXPECT_EQ(requests["failures_by_code"]["RESOURCE_EXHAUSTED"], failed);
}

TEST_F(BenchTest, TextPromptsFromAJsonLinesFile) {
  std::ofstream(prompts_path_)
      << "{\"prompt\": \"The quick brown fox\", \"output_len\": 3}\n"
      << "{\"prompt\": \"jumps over the lazy dog\"}\n";
  const RunResult result = Bench(
      {"--dataset", prompts_path_, "--num-prompts", "5", "--output-len", "4"});
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const nlohmann::json out = ReadJson();
  EXPECT_EQ(out["results"]["requests"]["succeeded"], 5);
  // Prompts 0, 2, 4 ask for 3 tokens, 1 and 3 for 4.
  EXPECT_EQ(out["results"]["total_output_tokens"], 17);
  for (const nlohmann::json& r : out["per_request"]) {
    EXPECT_GT(r["input_tokens"].get<int>(), 0);
  }
}

TEST_F(BenchTest, UsageErrorsExit2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--request-rate", "fast"},
        {"--request-rate", "0"},
        {"--num-prompts", "0"},
        {"--burstiness", "-1"},
        {"--random-range-ratio", "1.5"},
        {"--dataset", "prompts.jsonl", "--input-len", "5"},
        {"--no-such-flag"}}) {
    const RunResult result = Bench(args);
    EXPECT_EQ(result.exit_code, 2) << args[0] << "\n" << result.out;
  }
}

TEST_F(BenchTest, NoServerOrNoFileExits1) {
  address_ = "127.0.0.1:1";
  RunResult result = Bench({"--num-prompts", "1"});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out, HasSubstr("UNAVAILABLE"));
  address_ = "127.0.0.1:" + std::to_string(server_->port());
  result = Bench({"--dataset", stem_ + ".missing.jsonl"});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out, HasSubstr("cannot open"));
}

TEST(BenchScriptedTest, CtrlCCancelsTheCallsInFlightAndStillReports) {
  auto fake = testing::ScriptedServer({5}, /*hold_open=*/true);
  ASSERT_NE(fake, nullptr);
  Subprocess bench({kH3, "bench", "--server", fake->address(), "--num-prompts",
                    "6", "--max-concurrency", "2", "--output-len", "4",
                    "--num-warmups", "0"});
  ASSERT_TRUE(bench.started());
  // The line comes once Ctrl-C is handled; the two calls stay open.
  ASSERT_THAT(bench.WaitForLine("h3 bench: 6 requests", 30s),
              HasSubstr("max concurrency 2"))
      << bench.output();
  ASSERT_TRUE(server::testing::WaitFor([&fake] {
    return fake->requests().size() == 2;
  })) << bench.output();
  EXPECT_EQ(bench.Stop(SIGINT, 30s), 130) << bench.output();
  EXPECT_THAT(bench.output(), HasSubstr("Stopped early (interrupted)"));
  EXPECT_THAT(bench.output(), HasSubstr("cancelled in flight:"));
  EXPECT_THAT(bench.output(), HasSubstr("not sent:"));
  EXPECT_EQ(fake->requests().size(), 2u);
}

TEST(BenchScriptedTest, ProgressBarOnRequest) {
  auto fake = testing::ScriptedServer({5, 5, 5}, /*hold_open=*/false);
  ASSERT_NE(fake, nullptr);
  const RunResult result =
      RunCommand({kH3, "bench", "--server", fake->address(), "--num-prompts",
                  "4", "--output-len", "3", "--progress"});
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("4/4 done, 0 failed, 0 in flight"));
  EXPECT_THAT(result.out, HasSubstr("Successful requests:"));
  // Every request asked for exactly its output length, eos ignored.
  for (const v1::GenerateRequest& request : fake->requests()) {
    EXPECT_EQ(request.stop().min_new_tokens(), 3u);
    EXPECT_EQ(request.stop().max_new_tokens(), 3u);
    EXPECT_TRUE(request.stop().ignore_eos());
    EXPECT_EQ(request.token_ids().ids_size(), 128);
    for (int32_t id : request.token_ids().ids()) {
      EXPECT_GT(id, 0);  // eos is 0
      EXPECT_LT(id, 100);
    }
  }
}

}  // namespace
}  // namespace h3
