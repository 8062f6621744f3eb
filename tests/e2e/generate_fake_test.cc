// `h3 generate` and the Python example client against a scripted in-process
// server (tests/e2e/fake_server.h): the requests they send for each flag,
// their output for a known answer, gRPC errors, deadlines, Ctrl-C and usage
// errors. Needs no model; generate_test.cc runs them against h3serve.
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/fake_server.h"
#include "tests/support/subprocess.h"

namespace h3 {
namespace {

using ::h3::testing::FakeTextGeneration;
using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::h3::testing::Subprocess;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kH3 = H3_BIN;
const std::string kPython = "/usr/bin/python3";
const std::string kPythonClient = H3_PYTHON_CLIENT;
const std::string kPythonStubs = H3_PYTHON_STUBS;  // "" when not built

template <typename Message>
Message Parse(const std::string& text) {
  Message m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

// "Hello" in three pieces: ids 11..14, logprobs, a matched stop string and
// usage. Every number is exact in binary, so JSON compares exactly.
FakeTextGeneration::Script HelloScript() {
  return {.pieces = {
              Parse<v1::GenerateResponse>(R"pb(
                request_id: "req-7"
                token_ids: 11
                text: "He"
                logprobs {
                  token_id: 11
                  logprob: -0.5
                  top { token_id: 11 logprob: -0.5 text: "He" }
                })pb"),
              Parse<v1::GenerateResponse>(R"pb(
                request_id: "req-7"
                token_ids: [ 12, 13 ]
                text: "llo"
                logprobs { token_id: 12 logprob: -1.5 }
                logprobs { token_id: 13 logprob: -0.25 })pb"),
              Parse<v1::GenerateResponse>(R"pb(
                request_id: "req-7"
                token_ids: 14
                logprobs { token_id: 14 logprob: -2 }
                finish_reason: FINISH_REASON_STOP
                stop_string: "\n\n"
                usage {
                  prompt_tokens: 5
                  generated_tokens: 4
                  cached_prompt_tokens: 2
                  queue_seconds: 0.125
                  time_to_first_token_seconds: 0.5
                  total_seconds: 1
                })pb"),
          }};
}

const nlohmann::json kHelloJson = nlohmann::json::parse(R"({
  "request_id": "req-7", "generated_ids": [11, 12, 13, 14], "text": "Hello",
  "finish_reason": "stop", "stop_string": "\n\n",
  "usage": {"prompt_tokens": 5, "generated_tokens": 4,
            "cached_prompt_tokens": 2, "queue_seconds": 0.125,
            "time_to_first_token_seconds": 0.5, "total_seconds": 1.0}})");

// `args`, with --unary when `unary`.
std::vector<std::string> WithCall(bool unary, std::vector<std::string> args) {
  if (unary) args.push_back("--unary");
  return args;
}

class GenerateAgainstFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = FakeTextGeneration::Start();
    ASSERT_NE(fake_, nullptr);
  }

  // Runs `h3 generate --server FAKE args...`.
  RunResult Generate(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kH3, "generate", "--server",
                                     fake_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  // The request of the latest call, as the fake received it.
  v1::GenerateRequest LastRequest() {
    std::vector<v1::GenerateRequest> requests = fake_->requests();
    return requests.empty() ? v1::GenerateRequest() : requests.back();
  }

  std::unique_ptr<FakeTextGeneration> fake_;
};

TEST_F(GenerateAgainstFakeTest, SendsOnlyTheFieldsGiven) {
  const struct {
    std::vector<std::string> args;
    const char* request;  // text format
  } cases[] = {
      {{"--prompt-ids", "5, 6"}, R"pb(token_ids { ids: [ 5, 6 ] }
                                      sampling {}
                                      stop {})pb"},
      {{"Once upon", "--greedy"}, R"pb(text: "Once upon"
                                       sampling { temperature: 0 }
                                       stop {})pb"},
      {{"--prompt", "x", "--logprobs", "0", "--temperature", "1"},
       R"pb(text: "x"
            sampling { temperature: 1 }
            stop {}
            logprobs { enabled: true })pb"},
      {{"--prompt-ids",
        "1",
        "--max-tokens",
        "7",
        "--min-tokens",
        "2",
        "--temperature",
        "0.5",
        "--top-k",
        "3",
        "--top-p",
        "0.75",
        "--min-p",
        "0.125",
        "--repetition-penalty",
        "1.25",
        "--presence-penalty",
        "0.5",
        "--frequency-penalty",
        "-0.5",
        "--seed",
        "9",
        "--stop",
        "a",
        "--stop",
        "b c",
        "--stop-token-id",
        "4",
        "--stop-token-id",
        "8",
        "--ignore-eos",
        "--logprobs",
        "2",
        "--request-id",
        "r1",
        "--unary"},
       R"pb(request_id: "r1"
            token_ids { ids: 1 }
            sampling {
              temperature: 0.5
              top_k: 3
              top_p: 0.75
              min_p: 0.125
              repetition_penalty: 1.25
              presence_penalty: 0.5
              frequency_penalty: -0.5
              seed: 9
            }
            stop {
              max_new_tokens: 7
              min_new_tokens: 2
              stop_strings: [ "a", "b c" ]
              stop_token_ids: [ 4, 8 ]
              ignore_eos: true
            }
            logprobs { enabled: true top_n: 2 })pb"},
  };
  fake_->SetScript(HelloScript());
  for (const auto& c : cases) {
    RunResult result = Generate(c.args);
    EXPECT_EQ(result.exit_code, 0) << result.out;
    const auto want = Parse<v1::GenerateRequest>(c.request);
    const v1::GenerateRequest got = LastRequest();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(want, got))
        << "want " << want.ShortDebugString() << "\ngot  "
        << got.ShortDebugString();
  }
}

TEST_F(GenerateAgainstFakeTest, JsonHoldsTheWholeGeneration) {
  fake_->SetScript(HelloScript());
  for (bool unary : {false, true}) {
    RunResult result =
        Generate(WithCall(unary, {"--prompt-ids", "1", "--json"}));
    ASSERT_EQ(result.exit_code, 0) << result.out;
    EXPECT_EQ(nlohmann::json::parse(result.out), kHelloJson) << unary;
  }
  RunResult result =
      Generate({"--prompt-ids", "1", "--json", "--logprobs", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.out;
  nlohmann::json want = kHelloJson;
  want["logprobs"] = nlohmann::json::parse(R"([
      {"token_id": 11, "logprob": -0.5,
       "top": [{"token_id": 11, "logprob": -0.5, "text": "He"}]},
      {"token_id": 12, "logprob": -1.5, "top": []},
      {"token_id": 13, "logprob": -0.25, "top": []},
      {"token_id": 14, "logprob": -2.0, "top": []}])");
  EXPECT_EQ(nlohmann::json::parse(result.out), want);
}

TEST_F(GenerateAgainstFakeTest, PlainOutputIsTheTextAndASummary) {
  fake_->SetScript(HelloScript());
  for (bool unary : {false, true}) {
    RunResult result = Generate(WithCall(unary, {"--prompt-ids", "1"}));
    ASSERT_EQ(result.exit_code, 0) << result.out;
    EXPECT_THAT(result.out, HasSubstr("Hello\n"));
    EXPECT_THAT(result.out,
                HasSubstr("h3 generate: finish stop \"\\n\\n\"; 5 prompt "
                          "tokens (2 cached); 4 tokens in 1.000 s (4.0 "
                          "tok/s); first token after 0.500 s\n"));
  }
  // No text at all, as from a model without a tokenizer: the ids instead.
  fake_->SetScript({.pieces = {Parse<v1::GenerateResponse>(
                        "token_ids: [ 3, 4 ] finish_reason: "
                        "FINISH_REASON_LENGTH")}});
  RunResult result = Generate({"--prompt-ids", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("[3,4]\n"));
  EXPECT_THAT(result.out, HasSubstr("finish length;"));
}

TEST_F(GenerateAgainstFakeTest, ServerErrorsPrintTheirCodeName) {
  fake_->SetScript(
      {.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "sampling.temperature is -1, must be >= 0")});
  for (bool unary : {false, true}) {
    RunResult result = Generate(WithCall(unary, {"--prompt-ids", "1"}));
    EXPECT_EQ(result.exit_code, 1) << result.out;
    EXPECT_THAT(result.out,
                HasSubstr("h3 generate: INVALID_ARGUMENT: sampling.temperature "
                          "is -1, must be >= 0\n"));
  }
}

TEST_F(GenerateAgainstFakeTest, AnAnswerWithoutAFinishReasonIsAnError) {
  // As gRPC ends a stream whose message did not parse: quietly.
  fake_->SetScript({.pieces = {Parse<v1::GenerateResponse>(
                        R"pb(token_ids: 1 text: "cut")pb")}});
  for (bool unary : {false, true}) {
    RunResult result = Generate(WithCall(unary, {"--prompt-ids", "1"}));
    EXPECT_EQ(result.exit_code, 1) << result.out;
    EXPECT_THAT(result.out, HasSubstr("ended without a finish reason"));
  }
}

TEST_F(GenerateAgainstFakeTest, TimeoutIsTheCallsDeadline) {
  FakeTextGeneration::Script script = HelloScript();
  script.pieces.pop_back();  // never finishes
  script.hold_open = true;
  fake_->SetScript(script);
  RunResult result = Generate({"--prompt-ids", "1", "--timeout", "0.5"});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out, HasSubstr("Hello\nh3 generate: DEADLINE_EXCEEDED"));
}

TEST_F(GenerateAgainstFakeTest, CtrlCCancelsTheStream) {
  fake_->SetScript({.pieces = {Parse<v1::GenerateResponse>(
                        R"pb(token_ids: 1 text: "partial line\n")pb")},
                    .hold_open = true});
  // A background job's ignored SIGINT would be inherited and stay ignored.
  signal(SIGINT, SIG_DFL);
  Subprocess generate(
      {kH3, "generate", "--server", fake_->address(), "--prompt-ids", "1"});
  ASSERT_NE(generate.WaitForLine("partial line", 30s), "") << generate.output();
  EXPECT_EQ(generate.Stop(SIGINT, 20s), 130) << generate.output();
  EXPECT_TRUE(fake_->WaitForCancel(10s));
  EXPECT_THAT(generate.output(), HasSubstr("interrupted"));
}

TEST(GenerateUsageTest, NoServerIsUnavailable) {
  RunResult result = RunCommand({kH3, "generate", "--server", "127.0.0.1:1",
                                 "--timeout", "10", "--prompt-ids", "1"});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out, HasSubstr("h3 generate: UNAVAILABLE: "));
}

TEST(GenerateUsageTest, BadCommandLinesExitWith2) {
  const struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{}, "give a PROMPT or --prompt-ids 1,2,3"},
      {{"text", "--prompt-ids", "1"},
       "give a PROMPT or --prompt-ids, not both"},
      {{"--prompt-ids", "1,x"}, "--prompt-ids: \"x\" is not a token id"},
      {{"--prompt-ids", "1", "--no-such-flag"}, "--no-such-flag"},
      {{"--prompt-ids", "1", "--greedy", "--top-k", "5"}, "excludes"},
      {{"--prompt-ids", "1", "--logprobs", "21"}, "--logprobs"},
      {{"--prompt-ids", "1", "--timeout", "0"}, "--timeout"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {kH3, "generate", "--server",
                                     "127.0.0.1:1"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    RunResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 2) << c.message << ": " << result.out;
    EXPECT_THAT(result.out, HasSubstr(c.message));
  }
}

TEST_F(GenerateAgainstFakeTest, PythonClientSendsAndPrintsTheSame) {
  if (const std::string why = testing::PythonClientUnavailable(kPythonStubs);
      !why.empty()) {
    GTEST_SKIP() << why;
  }
  fake_->SetScript(HelloScript());
  const std::vector<std::string> args = {
      "--prompt-ids", "5,6", "--greedy", "--max-tokens", "4", "--stop", "a",
      "--stop",       "b",   "--json"};
  RunResult h3 = Generate(args);
  ASSERT_EQ(h3.exit_code, 0) << h3.out;
  const v1::GenerateRequest h3_request = LastRequest();

  std::vector<std::string> argv = {
      "/usr/bin/env", "H3_PYTHON_STUBS=" + kPythonStubs,
      kPython,        kPythonClient,
      "--server",     fake_->address()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult python = RunCommand(argv);
  ASSERT_EQ(python.exit_code, 0) << python.out;
  EXPECT_EQ(nlohmann::json::parse(python.out), nlohmann::json::parse(h3.out));
  EXPECT_EQ(nlohmann::json::parse(python.out), kHelloJson);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(LastRequest(),
                                                                 h3_request))
      << LastRequest().ShortDebugString() << "\n"
      << h3_request.ShortDebugString();

  // Plain output streams the text; an error names its code.
  argv = {kPython,    kPythonClient,    "--stubs", kPythonStubs,
          "--server", fake_->address(), "hi"};
  python = RunCommand(argv);
  ASSERT_EQ(python.exit_code, 0) << python.out;
  EXPECT_EQ(python.out, "Hello\n");
  fake_->SetScript({.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                           "top_p is 2")});
  python = RunCommand(argv);
  EXPECT_EQ(python.exit_code, 1) << python.out;
  EXPECT_THAT(python.out, HasSubstr("h3_client: INVALID_ARGUMENT: top_p is 2"));
  fake_->SetScript({.pieces = {Parse<v1::GenerateResponse>("text: \"cut\"")}});
  python = RunCommand(argv);
  EXPECT_EQ(python.exit_code, 1) << python.out;
  EXPECT_THAT(python.out, HasSubstr("ended without a finish reason"));
}

}  // namespace
}  // namespace h3
