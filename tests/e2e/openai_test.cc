// The OpenAI-compatible HTTP API of the h3serve binary, on the embedded
// default model h3-kjv: routes, greedy output equal to gRPC's, streaming,
// every error status in OpenAI's JSON shape, the connection bounds, a
// client leaving mid-stream or while queued, the metrics, and the official
// `openai` JavaScript client from the npm registry (skipped, with the
// reason, when npm cannot install it).
#include <signal.h>
#include <unistd.h>

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
#include "tests/support/raw_http.h"
#include "tests/support/subprocess.h"

namespace h3 {
namespace {

using ::h3::testing::RawHttp;
using ::h3::testing::RunCommand;
using ::h3::testing::RunResult;
using ::h3::testing::Subprocess;
using ::testing::HasSubstr;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kH3serve = H3SERVE_BIN;
const std::string kClientScript = H3_OPENAI_CLIENT_SCRIPT;
// The openai package's version the client test installs (one that runs on
// Node 20).
const std::string kOpenAiPackage = "openai@6.30.1";

// An h3serve on the embedded model, on free loopback ports.
struct Server {
  std::unique_ptr<Subprocess> process;
  std::string grpc;  // HOST:PORT
  int http = -1;
  int metrics = -1;
};

int PortAfter(const std::string& line, const std::string& key) {
  const size_t at = line.find(key);
  if (at == std::string::npos) return -1;
  const size_t colon = line.find(':', at + key.size());
  return std::atoi(line.c_str() + colon + 1);
}

Server Start(const std::vector<std::string>& flags = {}) {
  std::vector<std::string> argv = {
      kH3serve,      "--host", "127.0.0.1",      "--port", "0",
      "--http-port", "0",      "--metrics-port", "0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Server s;
  s.process = std::make_unique<Subprocess>(argv);
  s.grpc = testing::WaitForGrpcAddress(*s.process, 60s);
  const std::string& out = s.process->output();
  s.http = PortAfter(out, "http=http://127.0.0.1");
  s.metrics = PortAfter(out, "metrics=http://127.0.0.1");
  return s;
}

Json Body(const httplib::Result& result) {
  if (!result) return nullptr;
  return Json::parse(result->body, nullptr, false);
}

// POSTs `body` to /v1/completions.
httplib::Result Complete(int port, const Json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  return client.Post("/v1/completions", body.dump(), "application/json");
}

// The "data:" payloads of an event stream, in order.
std::vector<std::string> Events(const std::string& stream) {
  std::vector<std::string> events;
  size_t at = 0;
  while ((at = stream.find("data: ", at)) != std::string::npos) {
    const size_t end = stream.find("\n\n", at);
    events.push_back(stream.substr(at + 6, end - at - 6));
    at = end;
  }
  return events;
}

v1::ServerInfo Info(const std::string& grpc) {
  auto stub = v1::TextGeneration::NewStub(
      grpc::CreateChannel(grpc, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::ServerInfo info;
  EXPECT_TRUE(stub->GetServerInfo(&context, {}, &info).ok());
  return info;
}

bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

class OpenAiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new Server(Start()); }
  static void TearDownTestSuite() {
    if (server_->process != nullptr) server_->process->Stop(SIGTERM, 20s);
    delete server_;
  }
  void SetUp() override {
    ASSERT_GT(server_->http, 0) << server_->process->output();
  }
  static int port() { return server_->http; }

  static inline Server* server_ = nullptr;
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

// One slot and one place in the queue: with a stream running and a request
// waiting, a third is 429; after SIGTERM the server drains (503) and lets
// the stream run out its grace.
TEST(OpenAiServerTest, QueueFullIs429AndDrainingIs503) {
  Server s =
      Start({"--slots", "1", "--max-waiting", "1", "--max-sequence-length",
             "16384", "--max-new-tokens", "16000", "--shutdown-grace", "1"});
  ASSERT_GT(s.http, 0) << s.process->output();
  RawHttp stream(s.http);
  stream.PostJson("/v1/completions", R"({"prompt": "And", "max_tokens": 16000,
      "ignore_eos": true, "stream": true})");
  ASSERT_THAT(stream.ReadUntil("data: ", 10s), HasSubstr("200 OK"));
  RawHttp waiting(s.http);
  waiting.PostJson("/v1/completions", R"({"prompt": "And"})");
  ASSERT_TRUE(
      WaitFor([&] { return Info(s.grpc).waiting_requests() == 1; }, 10s));

  const httplib::Result full = Complete(s.http, {{"prompt", "x"}});
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429) << full->body;
  EXPECT_EQ(Body(full)["error"]["type"], "rate_limit_error");
  EXPECT_EQ(Body(full)["error"]["code"], "queue_full");

  ASSERT_EQ(kill(s.process->pid(), SIGTERM), 0);
  ASSERT_NE(s.process->WaitForLine("draining", 10s), "");
  httplib::Client client("127.0.0.1", s.http);
  const httplib::Result health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  const httplib::Result refused = Complete(s.http, {{"prompt", "x"}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(Body(refused)["error"]["code"], "unavailable");
  EXPECT_EQ(s.process->Stop(0, 30s), 0) << s.process->output();
}

TEST(OpenAiServerTest, NoModelIs503) {
  Server s = Start({"--no-model"});
  ASSERT_GT(s.http, 0) << s.process->output();
  httplib::Client client("127.0.0.1", s.http);
  EXPECT_EQ(client.Get("/health")->status, 503);
  EXPECT_TRUE(Body(client.Get("/v1/models"))["data"].empty());
  const httplib::Result r = Complete(s.http, {{"prompt", "x"}});
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(Body(r)["error"]["message"].get<std::string>(),
              HasSubstr("no model"));
}

// A client that leaves frees its slot (streaming) or its place in the queue
// (waiting for a slot) within an engine iteration or so.
TEST(OpenAiServerTest, ClientThatLeavesFreesItsSlotAndItsPlace) {
  Server s =
      Start({"--slots", "1", "--max-waiting", "1", "--max-sequence-length",
             "16384", "--max-new-tokens", "16000"});
  ASSERT_GT(s.http, 0) << s.process->output();
  const std::string long_request = R"({"prompt": "And", "max_tokens": 16000,
      "ignore_eos": true, "stream": true})";
  auto stream = std::make_unique<RawHttp>(s.http);
  stream->PostJson("/v1/completions", long_request);
  ASSERT_THAT(stream->ReadUntil("data: ", 10s), HasSubstr("200 OK"));
  auto waiting = std::make_unique<RawHttp>(s.http);
  waiting->PostJson("/v1/completions",
                    R"({"prompt": "And", "max_tokens": 10})");
  ASSERT_TRUE(
      WaitFor([&] { return Info(s.grpc).waiting_requests() == 1; }, 10s));

  waiting.reset();  // closes the connection
  EXPECT_TRUE(
      WaitFor([&] { return Info(s.grpc).waiting_requests() == 0; }, 2s));
  EXPECT_EQ(Info(s.grpc).running_requests(), 1);
  const auto left = std::chrono::steady_clock::now();
  stream.reset();
  EXPECT_TRUE(
      WaitFor([&] { return Info(s.grpc).running_requests() == 0; }, 2s));
  std::cout << "slot freed "
            << std::chrono::duration<double, std::milli>(
                   std::chrono::steady_clock::now() - left)
                   .count()
            << " ms after the client left\n";
  // The slot serves the next request.
  EXPECT_EQ(Complete(s.http, {{"prompt", "x"}, {"max_tokens", 2}})->status,
            200);

  httplib::Client metrics("127.0.0.1", s.metrics);
  const std::string text = metrics.Get("/metrics")->body;
  EXPECT_THAT(text,
              HasSubstr("h3_requests_total{finish_reason=\"cancelled\"} 2"));
  EXPECT_THAT(text, HasSubstr("h3_http_responses_total{code=\"200\",route="
                              "\"/v1/completions\"}"));
}

TEST(OpenAiServerTest, RefusalsAreCountedByProtocol) {
  Server s = Start();
  ASSERT_GT(s.http, 0) << s.process->output();
  EXPECT_EQ(Complete(s.http, {{"prompt", "x"}, {"top_p", 5}})->status, 400);
  httplib::Client metrics("127.0.0.1", s.metrics);
  const std::string text = metrics.Get("/metrics")->body;
  EXPECT_THAT(text, HasSubstr("h3_requests_rejected_total{code=\"invalid_"
                              "argument\",protocol=\"http\"} 1"));
  EXPECT_THAT(text, HasSubstr("h3_http_responses_total{code=\"400\",route="
                              "\"/v1/completions\"} 1"));
}

// With one worker and one queued connection, a third connection is told
// 503 at once instead of waiting.
TEST(OpenAiServerTest, ConnectionsPastTheBoundGet503) {
  Server s = Start({"--http-threads", "1"});
  ASSERT_GT(s.http, 0) << s.process->output();
  RawHttp idle(s.http);  // taken by the worker, waiting for a request
  std::this_thread::sleep_for(100ms);
  RawHttp queued(s.http);  // waits in the queue
  std::this_thread::sleep_for(100ms);
  RawHttp third(s.http);
  EXPECT_THAT(third.ReadAll(5s), HasSubstr("HTTP/1.1 503"));
}

TEST_F(OpenAiTest, OfficialOpenAiJavaScriptClient) {
  const std::string dir =
      ::testing::TempDir() + "/openai_client_" + std::to_string(getpid());
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
