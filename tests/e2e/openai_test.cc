// The OpenAI-compatible HTTP API of the h3serve binary, on the embedded
// default model h3-kjv, one server for the suite: routes, greedy output
// equal to gRPC's, streaming, stop strings, logprobs, echo, every error
// status of a request in OpenAI's JSON shape, and the official `openai`
// JavaScript client from the npm registry (skipped, with the reason, when
// npm cannot install it). openai_server_test.cc has the cases that need a
// server of their own.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/openai_support.h"
#include "tests/support/raw_http.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_path.h"

namespace h3 {
namespace {

using ::h3::testing::Body;
using ::h3::testing::Complete;
using ::h3::testing::Events;
using ::h3::testing::OpenAiServer;
using ::h3::testing::RawHttp;
using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::h3::testing::StartOpenAiServer;
using ::h3::testing::Subprocess;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kClientScript = H3_OPENAI_CLIENT_SCRIPT;
// The openai package's version the client test installs (one that runs on
// Node 20).
const std::string kOpenAiPackage = "openai@6.30.1";

class OpenAiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new OpenAiServer(StartOpenAiServer());
  }
  static void TearDownTestSuite() {
    if (server_->process != nullptr) server_->process->Stop(SIGTERM, 20s);
    delete server_;
  }
  void SetUp() override {
    ASSERT_GT(server_->http, 0) << server_->process->output();
  }
  static int port() { return server_->http; }

  static inline OpenAiServer* server_ = nullptr;
};

TEST_F(OpenAiTest, ModelsHealthAndNoChatForABaseModel) {
  httplib::Client client("127.0.0.1", port());
  const Json models = Body(client.Get("/v1/models"));
  ASSERT_EQ(models["data"].size(), 1u) << models;
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "h3-kjv");
  EXPECT_EQ(models["data"][0]["max_model_len"], 2048);
  EXPECT_EQ(client.Get("/v1/models/h3-kjv")->status, 200);
  EXPECT_EQ(client.Get("/v1/models/gpt-4")->status, 404);
  EXPECT_EQ(client.Get("/health")->status, 200);

  const httplib::Result chat = client.Post(
      "/v1/chat/completions",
      R"({"model": "h3-kjv", "messages": [{"role": "user", "content": "Hi"}]})",
      "application/json");
  EXPECT_EQ(chat->status, 404);
  EXPECT_THAT(Body(chat)["error"]["message"].get<std::string>(),
              HasSubstr("base model"));
}

// The same greedy request over gRPC and over HTTP, whole and streamed, with
// a text prompt and a token-id prompt.
TEST_F(OpenAiTest, GreedyOutputEqualsGrpcs) {
  auto stub = v1::TextGeneration::NewStub(
      grpc::CreateChannel(server_->grpc, grpc::InsecureChannelCredentials()));
  for (const Json& prompt : {Json("And God said"), Json({6, 7, 8, 9})}) {
    v1::GenerateRequest request;
    if (prompt.is_string()) {
      request.set_text(prompt.get<std::string>());
    } else {
      for (int id : prompt) request.mutable_token_ids()->add_ids(id);
    }
    request.mutable_sampling()->set_temperature(0);
    request.mutable_stop()->set_max_new_tokens(40);
    grpc::ClientContext context;
    v1::GenerateResponse grpc_out;
    ASSERT_TRUE(stub->Complete(&context, request, &grpc_out).ok());
    const std::vector<int> grpc_ids(grpc_out.token_ids().begin(),
                                    grpc_out.token_ids().end());

    const Json body = {{"model", "h3-kjv"},
                       {"prompt", prompt},
                       {"max_tokens", 40},
                       {"temperature", 0},
                       {"return_token_ids", true}};
    const httplib::Result whole = Complete(port(), body);
    ASSERT_EQ(whole->status, 200) << whole->body;
    const Json choice = Body(whole)["choices"][0];
    EXPECT_EQ(choice["text"], grpc_out.text()) << prompt;
    EXPECT_EQ(choice["token_ids"].get<std::vector<int>>(), grpc_ids);
    EXPECT_EQ(Body(whole)["usage"]["prompt_tokens"],
              grpc_out.usage().prompt_tokens());

    Json streamed = body;
    streamed["stream"] = true;
    streamed["stream_options"] = {{"include_usage", true}};
    const httplib::Result stream = Complete(port(), streamed);
    ASSERT_EQ(stream->status, 200);
    EXPECT_EQ(stream->get_header_value("Content-Type"), "text/event-stream");
    const std::vector<std::string> events = Events(stream->body);
    ASSERT_GE(events.size(), 3u) << stream->body;
    EXPECT_EQ(events.back(), "[DONE]");
    std::string text;
    std::vector<int> ids;
    for (size_t i = 0; i + 2 < events.size(); ++i) {
      const Json chunk = Json::parse(events[i]);
      EXPECT_EQ(chunk["object"], "text_completion");
      EXPECT_TRUE(chunk["usage"].is_null());
      text += chunk["choices"][0]["text"].get<std::string>();
      for (int id : chunk["choices"][0]["token_ids"]) ids.push_back(id);
    }
    EXPECT_EQ(text, grpc_out.text());
    EXPECT_EQ(ids, grpc_ids);
    const Json last = Json::parse(events[events.size() - 3]);
    EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
    const Json usage = Json::parse(events[events.size() - 2]);
    EXPECT_TRUE(usage["choices"].empty());
    EXPECT_EQ(usage["usage"]["completion_tokens"], 40);
  }
}

TEST_F(OpenAiTest, StopStringsLogprobsAndEcho) {
  const Json base = {
      {"prompt", "And God said"}, {"max_tokens", 12}, {"temperature", 0}};
  const std::string text =
      Body(Complete(port(), base))["choices"][0]["text"].get<std::string>();
  const size_t cut = text.find(' ', 4);
  ASSERT_NE(cut, std::string::npos) << text;

  Json stop = base;
  stop["stop"] = text.substr(cut, 3);
  const Json stopped = Body(Complete(port(), stop))["choices"][0];
  EXPECT_EQ(stopped["finish_reason"], "stop");
  EXPECT_EQ(stopped["stop_reason"], text.substr(cut, 3));
  EXPECT_EQ(stopped["text"], text.substr(0, cut));

  Json logprobs = base;
  logprobs["logprobs"] = 3;
  const Json lp = Body(Complete(port(), logprobs))["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 12u) << lp;
  std::string joined;
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(lp["text_offset"][i], joined.size());  // ASCII text
    joined += lp["tokens"][i].get<std::string>();
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0);
    EXPECT_GE(lp["top_logprobs"][i].size(), 3u);
  }
  EXPECT_EQ(joined, text);

  Json echo = base;
  echo["echo"] = true;
  EXPECT_EQ(Body(Complete(port(), echo))["choices"][0]["text"],
            "And God said" + text);
}

// Each error the API documents, in OpenAI's shape with its HTTP status.
TEST_F(OpenAiTest, ErrorsAreOpenAiJsonWithTheirStatus) {
  struct Case {
    Json body;
    int status;
    const char* param;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{{"prompt", "x"}, {"temperature", "hot"}}, 400, "temperature", "number"},
      {{{"prompt", "x"}, {"max_tokens", 100000}}, 400, "max_tokens", "at most"},
      {{{"prompt", "x"}, {"top_p", 2}}, 400, "top_p", "(0, 1]"},
      {{{"prompt", {1, 2, 999999}}}, 400, "prompt", "999999"},
      {{{"prompt", std::vector<int>(3000, 5)}}, 400, "prompt", "context"},
      {{{"prompt", "x"}, {"stop", {""}}}, 400, "stop", "stop[0]: empty"},
      {{{"prompt", "x"}, {"n", 3}}, 400, "n", "only 1"},
      {{{"prompt", "x"}, {"echo", true}, {"logprobs", 1}}, 400, "echo", ""},
      {{{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}},
       400,
       "stream_options",
       "stream: true"},
      {{{"prompt", "x"}, {"model", "gpt-4"}}, 404, "model", "gpt-4"},
  };
  for (const Case& c : cases) {
    const httplib::Result r = Complete(port(), c.body);
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, c.status) << c.body << " " << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    const Json error = Body(r)["error"];
    EXPECT_EQ(error["param"], c.param) << r->body;
    EXPECT_THAT(error["message"].get<std::string>(), HasSubstr(c.says));
    EXPECT_TRUE(error.contains("type") && error.contains("code")) << r->body;
  }

  httplib::Client client("127.0.0.1", port());
  const httplib::Result not_json =
      client.Post("/v1/completions", "{not json", "application/json");
  EXPECT_EQ(not_json->status, 400);
  EXPECT_TRUE(Body(not_json)["error"]["param"].is_null());
  const httplib::Result route = client.Get("/v2/anything");
  EXPECT_EQ(route->status, 404);
  EXPECT_THAT(Body(route)["error"]["message"].get<std::string>(),
              HasSubstr("no route"));
  EXPECT_EQ(client.Get("/v1/completions")->status, 405);

  // By hand: refusals before the body is sent, and framing cpp-httplib's
  // client does not send.
  RawHttp too_large(port());
  too_large.Send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
      "Content-Length: 3000000\r\n\r\n");
  const std::string large = too_large.ReadAll(5s);
  EXPECT_THAT(large, HasSubstr("HTTP/1.1 413"));
  EXPECT_THAT(large, HasSubstr("at most 2097152"));
  RawHttp chunked(port());
  chunked.Send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
      "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n0\r\n\r\n");
  EXPECT_THAT(chunked.ReadAll(5s), HasSubstr("HTTP/1.1 411"));
  RawHttp gzip(port());
  gzip.Send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
      "Content-Length: 2\r\n\r\n{}");
  EXPECT_THAT(gzip.ReadAll(5s), HasSubstr("HTTP/1.1 415"));
  RawHttp headers(port());  // a head over the 64 KiB bound
  headers.Send("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " +
               std::string(70 * 1024, 'a') + "\r\n\r\n");
  EXPECT_THAT(headers.ReadAll(5s), HasSubstr("HTTP/1.1 400"));
}

TEST_F(OpenAiTest, OfficialOpenAiJavaScriptClient) {
  const std::string dir = h3::testing::TempPath("openai_client");
  std::filesystem::create_directories(dir);
  const RunResult npm = RunCommand(
      {"/bin/sh", "-c",
       "command -v node >/dev/null && command -v npm >/dev/null || "
       "{ echo 'node or npm is not installed'; exit 1; }; cd '" +
           dir +
           "' && timeout 120 npm install --no-audit --no-fund --loglevel=error "
           "--prefer-offline --fetch-retries=1 --fetch-retry-maxtimeout=2000 "
           "--fetch-timeout=20000 " +
           kOpenAiPackage + " 2>&1"},
      150s);
  if (npm.exit_code != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "cannot install " << kOpenAiPackage
                 << " from the npm registry: " << npm.out;
  }
  std::filesystem::copy_file(kClientScript, dir + "/client.mjs");
  const RunResult node =
      RunCommand({"/bin/sh", "-c",
                  "node '" + dir + "/client.mjs' http://127.0.0.1:" +
                      std::to_string(port()) + "/v1 2>&1"},
                 120s);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(node.exit_code, 0) << node.out;
  EXPECT_THAT(node.out, HasSubstr("all checks passed"));
}

}  // namespace
}  // namespace h3
