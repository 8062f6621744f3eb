// The h3 and h3serve binaries as a user runs them: flags, exit codes, and a
// server on loopback queried by the h3 tool and through reflection.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/random_model.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"
#include "tokenizer/test_fixtures.h"

namespace h3 {
namespace {

using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::h3::testing::Subprocess;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using namespace std::chrono_literals;

const std::string kH3 = H3_BIN;
const std::string kH3serve = H3SERVE_BIN;
const std::string kLoaderTestdata = H3_LOADER_TESTDATA;

TEST(BinariesTest, VersionAndHelp) {
  for (const std::string& bin : {kH3, kH3serve}) {
    RunResult version = RunCommand({bin, "--version"});
    EXPECT_EQ(version.exit_code, 0) << version.out;
    EXPECT_THAT(version.out, HasSubstr(" 0."));
    EXPECT_THAT(version.out, HasSubstr("commit "));
    RunResult help = RunCommand({bin, "--help"});
    EXPECT_EQ(help.exit_code, 0) << help.out;
    EXPECT_THAT(help.out, HasSubstr("Usage:"));
  }
}

TEST(BinariesTest, H3WithoutCommandIsAUsageError) {
  RunResult result = RunCommand({kH3});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("subcommand"));
}

TEST(BinariesTest, BadServerFlagsAreRefused) {
  RunResult result = RunCommand({kH3serve, "--port", "70000"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("--port"));
  result = RunCommand({kH3serve, "--no-such-flag"});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("--no-such-flag"));
}

TEST(BinariesTest, DevicesJsonIsWellFormed) {
  RunResult result = RunCommand({kH3, "devices", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.out;
  nlohmann::json devices = nlohmann::json::parse(result.out);
  ASSERT_TRUE(devices["devices"].is_array());
  if (devices["devices"].empty()) {
    EXPECT_FALSE(devices["no_device_reason"].get<std::string>().empty());
  }
  for (const auto& d : devices["devices"]) {
    if (d["supported_by_this_build"].get<bool>()) {
      EXPECT_TRUE(d["self_test"]["ok"].get<bool>()) << d.dump();
    }
  }
}

TEST(BinariesTest, ConvertThenInspect) {
  const std::string out = h3::testing::TempPath("e2e_model.h3");
  RunResult convert = RunCommand(
      {kH3, "convert", kLoaderTestdata + "/model_lightning.pt", "-o", out,
       "--n-heads", "2", "--vocab-size", "61", "--dtype", "bf16"});
  ASSERT_EQ(convert.exit_code, 0) << convert.out;
  EXPECT_THAT(convert.out, HasSubstr("lightning"));
  RunResult inspect = RunCommand({kH3, "inspect", out, "--json"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.out;
  nlohmann::json info = nlohmann::json::parse(inspect.out);
  for (const char* key :
       {"d_model", "n_layer", "attn_layer_idx", "n_heads", "head_dim",
        "d_state", "vocab_size", "rotary_dim", "dtype"}) {
    EXPECT_TRUE(info.contains(key)) << key;
  }
  EXPECT_EQ(info["d_model"], 16);
  EXPECT_EQ(info["n_heads"], 2);
  EXPECT_EQ(info["vocab_size"], 61);
  EXPECT_EQ(info["dtype"], "bf16");
}

TEST(BinariesTest, ConvertRefusesHostileAndBrokenCheckpoints) {
  const std::string out = h3::testing::TempPath("e2e_refused.h3");
  for (const char* name : {"hostile_os_system.pt", "hostile_eval.pt",
                           "short_storage.pt", "bad_shape.pt"}) {
    RunResult result = RunCommand({kH3, "convert", kLoaderTestdata + "/" + name,
                                   "-o", out, "--n-heads", "2"});
    EXPECT_EQ(result.exit_code, 1) << name << ": " << result.out;
    EXPECT_THAT(result.out, HasSubstr(name));
    EXPECT_NE(access(out.c_str(), F_OK), 0) << name << " left " << out;
  }
}

// The corpus texts the tokenizer tests use, and a reference's ids for them
// (tokenizer/testdata: "gpt2/reference.json" or "spm/reference.json").
struct TokenizerReference {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
};

TokenizerReference ReadTokenizerReference(const std::string& reference) {
  namespace tt = ::h3::tokenizer::testing;
  const nlohmann::json corpus = tt::ReadTestJson("corpus.json").value();
  const nlohmann::json expected = tt::ReadTestJson(reference).value();
  TokenizerReference out;
  // Prose, punctuation, digits, accents and CJK, as command-line arguments.
  for (const int i : {2, 4, 5, 29}) {
    out.texts.push_back(corpus[i].get<std::string>());
    out.ids.push_back(expected["encode"][i].get<std::vector<int32_t>>());
  }
  return out;
}

// Runs `h3 tokenize` with `source` (--tokenizer PATH or --model PATH) on
// each reference text and expects the reference's ids, and the text back
// from --decode.
void ExpectTokenizeAgrees(const std::vector<std::string>& source,
                          const TokenizerReference& reference) {
  for (size_t i = 0; i < reference.texts.size(); ++i) {
    std::vector<std::string> argv = {kH3, "tokenize"};
    argv.insert(argv.end(), source.begin(), source.end());
    argv.push_back(reference.texts[i]);
    RunResult result = RunCommand(argv);
    ASSERT_EQ(result.exit_code, 0) << result.out;
    EXPECT_EQ(nlohmann::json::parse(result.out),
              nlohmann::json(reference.ids[i]))
        << reference.texts[i];
    argv.back() = "--decode";
    argv.push_back(nlohmann::json(reference.ids[i]).dump().substr(1));
    argv.back().pop_back();  // "[1,2,3]" -> "1,2,3"
    result = RunCommand(argv);
    ASSERT_EQ(result.exit_code, 0) << result.out;
    EXPECT_EQ(result.out, reference.texts[i] + "\n");
  }
}

const std::string kSentencePieceModel =
    ::h3::tokenizer::testing::TestDataPath("spm/h3_test.model");

TEST(TokenizeTest, SentencePieceWorksInTheH3Binary) {
  // h3 links libprotobuf (h3_proto) when the server is built: the
  // sentencepiece library, in its own namespace, must not mind.
  ExpectTokenizeAgrees({"--tokenizer", kSentencePieceModel},
                       ReadTokenizerReference("spm/reference.json"));
}

TEST(TokenizeTest, AMissingSentencePieceModuleIsAnError) {
  RunResult result = RunCommand(
      {"/usr/bin/env", "H3_SENTENCEPIECE_MODULE=/nonexistent/h3spm.so", kH3,
       "tokenize", "--tokenizer", kSentencePieceModel, "some text"});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out, HasSubstr("cannot load the sentencepiece module"));
  EXPECT_THAT(result.out, HasSubstr("/nonexistent/h3spm.so: no such file"));
}

// Converts the Lightning fixture into `out`, embedding `tokenizer` unless it
// is empty.
void ConvertFixture(const std::string& out, const std::string& tokenizer) {
  std::vector<std::string> argv = {
      kH3,  "convert", kLoaderTestdata + "/model_lightning.pt",
      "-o", out,       "--n-heads",
      "2"};
  if (!tokenizer.empty()) {
    argv.push_back("--tokenizer");
    argv.push_back(tokenizer);
  }
  RunResult convert = RunCommand(argv);
  ASSERT_EQ(convert.exit_code, 0) << convert.out;
}

TEST(TokenizeTest, ModelFilesWithEmbeddedTokenizers) {
  // GPT-2's files, gunzipped from tokenizer/testdata into a directory.
  namespace tt = ::h3::tokenizer::testing;
  const std::filesystem::path gpt2 =
      std::filesystem::path(h3::testing::TempPath("e2e_gpt2"));
  std::filesystem::create_directories(gpt2);
  for (const char* name : {"encoder.json", "vocab.bpe"}) {
    std::ofstream(gpt2 / name, std::ios::binary)
        << tt::ReadTestData(std::string("gpt2/") + name + ".gz").value();
  }
  const std::string gpt2_model = h3::testing::TempPath("e2e_gpt2.h3");
  ConvertFixture(gpt2_model, gpt2.string());
  ExpectTokenizeAgrees({"--model", gpt2_model},
                       ReadTokenizerReference("gpt2/reference.json"));

  const std::string spm_model = h3::testing::TempPath("e2e_spm.h3");
  ConvertFixture(spm_model, kSentencePieceModel);
  ExpectTokenizeAgrees({"--model", spm_model},
                       ReadTokenizerReference("spm/reference.json"));
}

TEST(TokenizeTest, AModelWithoutATokenizerSaysHowToEmbedOne) {
  const std::string model = h3::testing::TempPath("e2e_no_tokenizer.h3");
  ConvertFixture(model, "");
  RunResult result = RunCommand({kH3, "tokenize", "--model", model, "text"});
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.out, HasSubstr("has no tokenizer embedded"));
  EXPECT_THAT(result.out, HasSubstr("h3 convert"));
  EXPECT_THAT(result.out, HasSubstr("--tokenizer PATH"));
}

TEST(TokenizeTest, NeedsExactlyOneOfTokenizerAndModel) {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{kH3, "tokenize", "text"},
        std::vector<std::string>{kH3, "tokenize", "--tokenizer",
                                 kSentencePieceModel, "--model", "x.h3",
                                 "text"}}) {
    RunResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 1) << result.out;
    EXPECT_THAT(result.out,
                HasSubstr("exactly one of --tokenizer PATH and --model"));
  }
}

// Starts h3serve on free loopback ports and returns its gRPC port (0 on
// failure).
int StartServer(Subprocess& server) {
  const std::string address = testing::WaitForGrpcAddress(server, 30s);
  const std::string prefix = "127.0.0.1:";
  if (address.rfind(prefix, 0) != 0) return 0;
  return std::stoi(address.substr(prefix.size()));
}

TEST(ServeTest, AnswersH3ToolReflectionAndStopsOnSigterm) {
  Subprocess server({kH3serve, "--no-model", "--host", "127.0.0.1", "--port",
                     "0", "--metrics-port", "0", "--http-port", "-1",
                     "--shutdown-grace", "1"});
  const int port = StartServer(server);
  ASSERT_GT(port, 0) << server.output();
  const std::string address = "127.0.0.1:" + std::to_string(port);

  RunResult info =
      RunCommand({kH3, "server-info", "--server", address, "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.out;
  nlohmann::json json = nlohmann::json::parse(info.out);
  EXPECT_EQ(json["health"], "NOT_SERVING");
  EXPECT_EQ(json["model_loaded"], false);
  EXPECT_FALSE(json["version"].get<std::string>().empty());

  // Server reflection, as grpcurl uses it.
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  auto stream = stub->ServerReflectionInfo(&context);
  grpc::reflection::v1alpha::ServerReflectionRequest request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> services;
  for (const auto& s : response.list_services_response().service()) {
    services.push_back(s.name());
  }
  EXPECT_THAT(services, UnorderedElementsAre(
                            "h3.v1.TextGeneration", "grpc.health.v1.Health",
                            "grpc.reflection.v1alpha.ServerReflection"));
  request.set_file_containing_symbol("h3.v1.GenerateRequest");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_GT(response.file_descriptor_response().file_descriptor_proto_size(),
            0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  EXPECT_EQ(server.Stop(SIGTERM, 20s), 0) << server.output();
  EXPECT_THAT(server.output(), HasSubstr("SIGTERM, draining"));
  EXPECT_THAT(server.output(), HasSubstr("shutting down"));
}

TEST(ServeTest, SigtermLetsRunningStreamsFinishThenExitsZero) {
  const std::string model = h3::testing::TempPath("serve_drain.h3");
  ASSERT_TRUE(
      testing::WriteRandomModel(testing::SmallHybridConfig(64), model).ok());
  Subprocess server({kH3serve, "--model", model, "--host", "127.0.0.1",
                     "--port", "0", "--metrics-port", "-1", "--http-port", "-1",
                     "--max-sequence-length", "16384", "--max-new-tokens",
                     "12000", "--shutdown-grace", "60"});
  const int port = StartServer(server);
  ASSERT_GT(port, 0) << server.output();
  auto stub = v1::TextGeneration::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  // Long enough (attention over a growing context) to outlast the signal.
  grpc::ClientContext context;
  v1::GenerateRequest request;
  request.mutable_token_ids()->add_ids(1);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stop()->set_max_new_tokens(12000);
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse message;
  ASSERT_TRUE(reader->Read(&message));
  size_t tokens = message.token_ids_size();

  kill(server.pid(), SIGTERM);
  while (reader->Read(&message)) tokens += message.token_ids_size();
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(message.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(tokens, 12000u);
  EXPECT_EQ(server.Stop(0, 30s), 0) << server.output();
  EXPECT_THAT(server.output(), HasSubstr("SIGTERM, draining"));
  EXPECT_THAT(server.output(), HasSubstr("all requests finished"));
}

// The README's path: h3serve with no flags serves the embedded default model.
TEST(ServeTest, ServesTheDefaultModelWithNoConfiguration) {
  Subprocess server({kH3serve, "--host", "127.0.0.1", "--port", "0",
                     "--metrics-port", "-1", "--http-port", "-1"});
  const int port = StartServer(server);
  ASSERT_GT(port, 0) << server.output();
  EXPECT_THAT(server.output(), HasSubstr("embedded default model h3-kjv"));
  const std::string address = "127.0.0.1:" + std::to_string(port);

  RunResult info =
      RunCommand({kH3, "server-info", "--server", address, "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.out;
  nlohmann::json json = nlohmann::json::parse(info.out);
  EXPECT_EQ(json["health"], "SERVING");
  EXPECT_EQ(json["model_loaded"], true);

  RunResult generated =
      RunCommand({kH3, "generate", "--server", address, "--greedy",
                  "--max-tokens", "24", "--json", "And God said"});
  ASSERT_EQ(generated.exit_code, 0) << generated.out;
  json = nlohmann::json::parse(generated.out);
  EXPECT_FALSE(json["text"].get<std::string>().empty());
  EXPECT_GT(json["usage"]["generated_tokens"].get<int>(), 0) << generated.out;
  EXPECT_EQ(server.Stop(SIGTERM, 20s), 0) << server.output();
}

TEST(ServeTest, NoModelExcludesModel) {
  RunResult result = RunCommand({kH3serve, "--no-model", "--model", kH3});
  EXPECT_NE(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("excludes"));
}

TEST(ServeTest, SecondServerOnTheSamePortFailsClearly) {
  Subprocess first({kH3serve, "--no-model", "--host", "127.0.0.1", "--port",
                    "0", "--metrics-port", "-1", "--http-port", "-1"});
  const int port = StartServer(first);
  ASSERT_GT(port, 0) << first.output();
  RunResult second = RunCommand({kH3serve, "--host", "127.0.0.1", "--port",
                                 std::to_string(port), "--metrics-port", "-1",
                                 "--http-port", "-1"});
  EXPECT_EQ(second.exit_code, 1) << second.out;
  EXPECT_THAT(second.out, HasSubstr("cannot serve gRPC on 127.0.0.1:" +
                                    std::to_string(port)));
  EXPECT_EQ(first.Stop(SIGINT, 20s), 0) << first.output();
}

TEST(ServeTest, UnreachableServerIsAnErrorNotAHang) {
  RunResult result = RunCommand(
      {kH3, "server-info", "--server", "127.0.0.1:1", "--timeout", "2"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, HasSubstr("127.0.0.1:1: UNAVAILABLE"));
}

}  // namespace
}  // namespace h3
