// The HTTP API's cases that need an h3serve of their own (the embedded
// model, one slot or no model): 429 when the queue is full, 503 while
// draining and without a model, a client leaving mid-stream or while
// queued, refusals counted by protocol, and 503 for connections past the
// bound.
#include <signal.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/openai_support.h"
#include "tests/support/raw_http.h"

namespace h3 {
namespace {

using ::h3::testing::Body;
using ::h3::testing::Complete;
using ::h3::testing::Info;
using ::h3::testing::OpenAiServer;
using ::h3::testing::RawHttp;
using ::h3::testing::StartOpenAiServer;
using ::h3::testing::WaitFor;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// One slot and one place in the queue: with a stream running and a request
// waiting, a third is 429; after SIGTERM the server drains (503) and lets
// the stream run out its grace.
TEST(OpenAiServerTest, QueueFullIs429AndDrainingIs503) {
  OpenAiServer s = StartOpenAiServer(
      {"--slots", "1", "--max-waiting", "1", "--max-sequence-length", "16384",
       "--max-new-tokens", "16000", "--shutdown-grace", "1"});
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
  OpenAiServer s = StartOpenAiServer({"--no-model"});
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
  OpenAiServer s = StartOpenAiServer({"--slots", "1", "--max-waiting", "1",
                                      "--max-sequence-length", "16384",
                                      "--max-new-tokens", "16000"});
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
  OpenAiServer s = StartOpenAiServer();
  ASSERT_GT(s.http, 0) << s.process->output();
  EXPECT_EQ(Complete(s.http, {{"prompt", "x"}, {"top_p", 5}})->status, 400);
  // The response is counted once it is written, which may be just after
  // the client has read it: poll (bounded) for the counters.
  const std::string rejected =
      "h3_requests_rejected_total{code=\"invalid_argument\",protocol=\"http\"} "
      "1";
  const std::string responded =
      "h3_http_responses_total{code=\"400\",route=\"/v1/completions\"} 1";
  httplib::Client metrics("127.0.0.1", s.metrics);
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text = metrics.Get("/metrics")->body;
    if (text.find(rejected) != std::string::npos &&
        text.find(responded) != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_THAT(text, HasSubstr(rejected));
  EXPECT_THAT(text, HasSubstr(responded));
}

// With one worker and one queued connection, a third connection is told
// 503 at once instead of waiting.
TEST(OpenAiServerTest, ConnectionsPastTheBoundGet503) {
  OpenAiServer s = StartOpenAiServer({"--http-threads", "1"});
  ASSERT_GT(s.http, 0) << s.process->output();
  RawHttp idle(s.http);  // taken by the worker, waiting for a request
  std::this_thread::sleep_for(100ms);
  RawHttp queued(s.http);  // waits in the queue
  std::this_thread::sleep_for(100ms);
  RawHttp third(s.http);
  EXPECT_THAT(third.ReadAll(5s), HasSubstr("HTTP/1.1 503"));
}

}  // namespace
}  // namespace h3
