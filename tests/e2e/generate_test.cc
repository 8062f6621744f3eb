// `h3 generate` and the Python example client against a real h3serve serving
// a small random model with an embedded sentencepiece tokenizer: greedy
// generation gives what `h3 run` gives offline, seeded sampling repeats, stop
// strings and stop tokens end generation, and bad sampling parameters are
// INVALID_ARGUMENT. generate_fake_test.cc covers the flags and the output
// format against a scripted server.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "loader/config.h"
#include "nlohmann/json.hpp"
#include "tests/support/random_model.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"

namespace h3 {
namespace {

using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::h3::testing::Subprocess;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

const std::string kH3 = H3_BIN;
const std::string kH3serve = H3SERVE_BIN;
const std::string kSpmModel = H3_TOKENIZER_TESTDATA "/spm/h3_test.model";
const std::string kPython = "/usr/bin/python3";
const std::string kPythonClient = H3_PYTHON_CLIENT;
const std::string kPythonStubs = H3_PYTHON_STUBS;  // "" when not built

const std::string kPromptIds = "3,1,4,1,5,9,2,6";
const std::string kPromptText = "The quick brown fox";

// The bytes of `text` from `begin` to `end`, both moved forward to the next
// UTF-8 character boundary, so that the piece is valid UTF-8.
std::string Utf8Piece(const std::string& text, size_t begin, size_t end) {
  auto boundary = [&text](size_t i) {
    while (i < text.size() && (text[i] & 0xC0) == 0x80) ++i;
    return i;
  };
  begin = boundary(begin);
  return text.substr(begin, boundary(std::max(end, begin + 1)) - begin);
}

std::vector<int32_t> Ids(const nlohmann::json& out) {
  return out.value("generated_ids", nlohmann::json::array())
      .get<std::vector<int32_t>>();
}

// One h3serve for the whole suite, serving a random model over the test
// tokenizer's 800 pieces with that tokenizer embedded.
class GenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const loader::ModelConfig config = h3::testing::SmallHybridConfig(800);
    // ctest runs each test in a process of its own, some at once.
    const std::string stem = h3::testing::TempPath("generate");
    const std::string random = stem + "_random.h3";
    model_ = stem + "_spm.h3";
    const absl::Status written = h3::testing::WriteRandomModel(config, random);
    if (!written.ok()) {
      setup_error_ = std::string(written.message());
      return;
    }
    RunResult convert =
        RunCommand({kH3, "convert", random, "-o", model_, "--n-heads", "2",
                    "--tokenizer", kSpmModel});
    std::remove(random.c_str());
    if (convert.exit_code != 0) {
      setup_error_ = "h3 convert: " + convert.out;
      return;
    }
    server_ = StartServer({}, &address_);
    if (address_.empty()) {
      setup_error_ = "h3serve did not start: " + server_->output();
    }
  }

  static std::unique_ptr<Subprocess> StartServer(
      const std::vector<std::string>& flags, std::string* address) {
    return testing::StartH3serve(kH3serve, model_, flags, address);
  }

  static void TearDownTestSuite() {
    if (server_ != nullptr) server_->Stop(SIGTERM, 30s);
    server_.reset();
    std::remove(model_.c_str());
  }

  void SetUp() override { ASSERT_FALSE(address_.empty()) << setup_error_; }

  // `h3 generate --server ADDRESS args... --json`, expected to succeed.
  static nlohmann::json Generate(std::vector<std::string> args) {
    args.insert(args.begin(), {kH3, "generate", "--server", address_});
    args.push_back("--json");
    return JsonOf(RunCommand(args));
  }

  // `h3 run --model MODEL args... --json`, expected to succeed.
  static nlohmann::json Run(std::vector<std::string> args) {
    args.insert(args.begin(), {kH3, "run", "--model", model_});
    args.push_back("--json");
    return JsonOf(RunCommand(args));
  }

  static nlohmann::json JsonOf(const RunResult& result) {
    EXPECT_EQ(result.exit_code, 0) << result.out;
    nlohmann::json out = nlohmann::json::parse(result.out, nullptr, false);
    EXPECT_FALSE(out.is_discarded()) << result.out;
    return out.is_discarded() ? nlohmann::json::object() : out;
  }

  static inline std::string model_;
  static inline std::string address_;  // HOST:PORT; "" when setup failed
  static inline std::string setup_error_;
  static inline std::unique_ptr<Subprocess> server_;
};

TEST_F(GenerateTest, GreedyIdsMatchH3Run) {
  const std::vector<std::string> args = {"--prompt-ids", kPromptIds,
                                         "--greedy",     "--max-tokens",
                                         "12",           "--ignore-eos"};
  const std::vector<int32_t> want = Ids(Run(args));
  ASSERT_EQ(want.size(), 12u);
  for (bool unary : {false, true}) {
    std::vector<std::string> call = args;
    if (unary) call.push_back("--unary");
    nlohmann::json out = Generate(call);
    EXPECT_EQ(Ids(out), want) << "unary " << unary;
    EXPECT_EQ(out["finish_reason"], "length");
    EXPECT_FALSE(out["request_id"].get<std::string>().empty());
    EXPECT_EQ(out["usage"]["prompt_tokens"], 8);
    EXPECT_EQ(out["usage"]["generated_tokens"], 12);
    EXPECT_GT(out["usage"]["total_seconds"].get<double>(), 0);
  }
}

TEST_F(GenerateTest, TextMatchesH3Run) {
  nlohmann::json want = Run({"--prompt", kPromptText, "--greedy",
                             "--max-tokens", "16", "--ignore-eos"});
  for (bool unary : {false, true}) {
    std::vector<std::string> args = {kPromptText, "--greedy", "--max-tokens",
                                     "16", "--ignore-eos"};
    if (unary) args.push_back("--unary");
    nlohmann::json out = Generate(args);
    EXPECT_EQ(Ids(out), Ids(want)) << "unary " << unary;
    EXPECT_EQ(out["text"], want["text"]) << "unary " << unary;
    EXPECT_EQ(out["usage"]["prompt_tokens"], want["prompt_ids"].size());
  }
  // Plain output: the streamed text on stdout, the summary on stderr.
  RunResult plain =
      RunCommand({kH3, "generate", "--server", address_, kPromptText,
                  "--greedy", "--max-tokens", "16", "--ignore-eos"});
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_THAT(plain.out, HasSubstr(want["text"].get<std::string>() + "\n"));
  EXPECT_THAT(plain.out, HasSubstr("h3 generate: finish length;"));
}

TEST_F(GenerateTest, SeededSamplingRepeats) {
  std::vector<std::string> args = {"--prompt-ids",
                                   kPromptIds,
                                   "--temperature",
                                   "1.5",
                                   "--top-k",
                                   "20",
                                   "--top-p",
                                   "0.95",
                                   "--max-tokens",
                                   "40",
                                   "--ignore-eos",
                                   "--seed",
                                   "11"};
  const std::vector<int32_t> first = Ids(Generate(args));
  ASSERT_EQ(first.size(), 40u);
  EXPECT_EQ(Ids(Generate(args)), first);
  args.back() = "12";  // another seed, other tokens
  EXPECT_NE(Ids(Generate(args)), first);
}

TEST_F(GenerateTest, StopStringsAndStopTokensEndGeneration) {
  const std::vector<std::string> args = {kPromptText, "--greedy",
                                         "--max-tokens", "24", "--ignore-eos"};
  const nlohmann::json full = Generate(args);
  const std::string text = full["text"].get<std::string>();
  const std::vector<int32_t> ids = Ids(full);
  ASSERT_GE(text.size(), 8u) << full.dump();

  // A stop string from the middle of the text: generation ends at its first
  // occurrence, and the string is left out.
  std::vector<std::string> stop_args = args;
  const std::string stop =
      Utf8Piece(text, text.size() / 2, text.size() / 2 + 3);
  stop_args.push_back("--stop=" + stop);  // it may begin with a '-'
  nlohmann::json out = Generate(stop_args);
  EXPECT_EQ(out["finish_reason"], "stop");
  EXPECT_EQ(out["stop_string"], stop);
  EXPECT_EQ(out["text"], text.substr(0, text.find(stop))) << "stop " << stop;
  EXPECT_THAT(out["text"].get<std::string>(), Not(HasSubstr(stop)));

  // A stop token: the id is returned, generation ends after it.
  std::vector<std::string> token_args = args;
  const int32_t token = ids[4];
  token_args.insert(token_args.end(),
                    {"--stop-token-id", std::to_string(token)});
  out = Generate(token_args);
  EXPECT_EQ(out["finish_reason"], "stop");
  EXPECT_EQ(out["stop_token_id"], token);
  const auto first = std::find(ids.begin(), ids.end(), token);
  EXPECT_EQ(Ids(out), std::vector<int32_t>(ids.begin(), first + 1));
}

// Waits up to `timeout` for the server at `address` to report `running`
// running requests.
bool WaitForRunning(const std::string& address, uint32_t running,
                    std::chrono::seconds timeout) {
  auto stub = v1::TextGeneration::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const auto deadline = std::chrono::system_clock::now() + timeout;
  while (std::chrono::system_clock::now() < deadline) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    v1::ServerInfo info;
    if (!stub->GetServerInfo(&context, {}, &info).ok()) return false;
    if (info.running_requests() == running) return true;
  }
  return false;
}

TEST_F(GenerateTest, CtrlCCancelsAndFreesTheSlot) {
  // One slot, and a generation that would run for many seconds.
  std::string address;
  std::unique_ptr<Subprocess> server =
      StartServer({"--slots", "1", "--max-sequence-length", "200000",
                   "--max-new-tokens", "199000"},
                  &address);
  ASSERT_FALSE(address.empty()) << server->output();
  signal(SIGINT, SIG_DFL);  // a background job's ignored SIGINT is inherited
  Subprocess generate({kH3, "generate", "--server", address, "--prompt-ids",
                       kPromptIds, "--max-tokens", "199000", "--ignore-eos"});
  ASSERT_TRUE(WaitForRunning(address, 1, 30s)) << generate.output();
  EXPECT_EQ(generate.Stop(SIGINT, 20s), 130) << generate.output();

  // The next request gets the slot long before the first would have ended.
  // --ignore-eos: a sampled end-of-sequence token would stop it short of
  // the 4 tokens (a CI run saw 3).
  nlohmann::json out = JsonOf(RunCommand(
      {kH3, "generate", "--server", address, "--prompt-ids", kPromptIds,
       "--max-tokens", "4", "--ignore-eos", "--timeout", "20", "--json"}));
  EXPECT_EQ(Ids(out).size(), 4u);
  EXPECT_EQ(server->Stop(SIGTERM, 30s), 0) << server->output();
}

TEST_F(GenerateTest, BadSamplingParametersAreInvalidArgument) {
  const struct {
    std::vector<std::string> args;
    const char* field;
  } cases[] = {
      {{"--temperature", "-1"}, "temperature"},
      {{"--top-p", "2"}, "top_p"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {kH3,      "generate",     "--server",
                                     address_, "--prompt-ids", kPromptIds};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    RunResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 1) << result.out;
    EXPECT_THAT(result.out, HasSubstr("h3 generate: INVALID_ARGUMENT: "));
    EXPECT_THAT(result.out, HasSubstr(c.field));
  }
}

TEST_F(GenerateTest, PythonClientGivesTheSameIds) {
  if (const std::string why = testing::PythonClientUnavailable(kPythonStubs);
      !why.empty()) {
    GTEST_SKIP() << why;
  }
  const std::vector<std::string> args = {"--prompt-ids", kPromptIds, "--greedy",
                                         "--max-tokens", "12"};
  const nlohmann::json want = Generate(args);
  std::vector<std::string> argv = {kPython,      kPythonClient, "--stubs",
                                   kPythonStubs, "--server",    address_,
                                   "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  const nlohmann::json out = JsonOf(RunCommand(argv));
  EXPECT_EQ(Ids(out), Ids(want));
  EXPECT_EQ(out["text"], want["text"]);
  EXPECT_EQ(out["finish_reason"], want["finish_reason"]);
}

}  // namespace
}  // namespace h3
