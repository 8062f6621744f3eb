// What one client can make the server hold: prompt text is bounded before
// tokenizing (gRPC and HTTP), gRPC messages and metadata are bounded, text
// fields with invalid UTF-8 get INVALID_ARGUMENT naming the field without a
// log line, and idle connections do not blind /metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/test_server.h"
#include "tests/support/raw_http.h"

namespace h3::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace testing;  // NOLINT: the test server helpers

const grpc::StatusCode kInvalid = grpc::StatusCode::INVALID_ARGUMENT;

class LimitsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options = LoopbackOptions();
    options.max_sequence_length = 256;  // prompt text: 4096 bytes
    options.max_new_tokens = 16;
    options.metrics_port = 0;
    options.http.port = 0;
    options.grpc.max_message_bytes = 64 << 10;
    options.grpc.max_metadata_bytes = 8 << 10;
    server_ = StartServer(options).release();
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = Connect(*server_);
  }
  grpc::Status Complete(const v1::GenerateRequest& request,
                        grpc::ClientContext* context = nullptr) {
    grpc::ClientContext own;
    v1::GenerateResponse response;
    return stub_->Complete(context != nullptr ? context : &own, request,
                           &response);
  }
  grpc::Status Tokenize(const std::string& text) {
    grpc::ClientContext context;
    v1::TokenizeRequest request;
    request.set_text(text);
    v1::TokenizeResponse response;
    return stub_->Tokenize(&context, request, &response);
  }
  static v1::GenerateRequest Text(const std::string& text) {
    v1::GenerateRequest request = GreedyIds({}, 2);
    request.set_text(text);
    return request;
  }

  static Server* server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
};

Server* LimitsTest::server_ = nullptr;

TEST_F(LimitsTest, PromptTextIsBoundedBeforeTokenizing) {
  const grpc::Status prompt = Complete(Text(std::string(4097, 'a')));
  EXPECT_EQ(prompt.error_code(), kInvalid);
  EXPECT_THAT(prompt.error_message(),
              HasSubstr("text: 4097 bytes; this server takes at most 4096"));
  const grpc::Status tokenize = Tokenize(std::string(4097, 'a'));
  EXPECT_EQ(tokenize.error_code(), kInvalid);
  EXPECT_THAT(tokenize.error_message(), HasSubstr("at most 4096"));
  EXPECT_TRUE(Tokenize(std::string(4096, 'a')).ok());
  EXPECT_TRUE(Complete(Text("In the beginning")).ok());
}

TEST_F(LimitsTest, HttpPromptTextIsBoundedToo) {
  h3::testing::RawHttp http(server_->http_port());
  http.PostJson("/v1/completions", "{\"prompt\": \"" + std::string(5000, 'a') +
                                       "\", \"max_tokens\": 2}");
  const std::string response = http.ReadUntil("}}", std::chrono::seconds(20));
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(response,
              HasSubstr("5000 bytes; this server takes at most 4096"));
  EXPECT_THAT(response, HasSubstr("\"param\":\"prompt\""));
}

TEST_F(LimitsTest, MessagesAndMetadataAreBounded) {
  v1::GenerateRequest big = GreedyIds(std::vector<int32_t>(100000, 1), 2);
  EXPECT_EQ(Complete(big).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  grpc::ClientContext context;
  context.AddMetadata("x-padding", std::string(100 << 10, 'p'));
  const grpc::Status header = Complete(Text("hi"), &context);
  EXPECT_FALSE(header.ok());
  EXPECT_THAT(header.error_message(), Not(HasSubstr("ppppp")));
  // The server keeps serving. gRPC closes the connection that carried the
  // oversized headers, and a call the client sends before it learns so ends
  // UNAVAILABLE ("Socket closed"): the next calls go on a new connection.
  grpc::Status served;
  for (int attempt = 0; attempt < 10; ++attempt) {
    served = Complete(Text("hi"));
    if (served.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served.ok()) << served.error_code() << " "
                           << served.error_message();
}

TEST_F(LimitsTest, InvalidUtf8IsInvalidArgumentNamingTheField) {
  const std::string bad = "ok \xc3(";
  struct Case {
    std::string field;
    grpc::Status status;
  };
  ::testing::internal::CaptureStderr();
  v1::GenerateRequest stop = Text("hi");
  stop.mutable_stop()->add_stop_strings(bad);
  v1::GenerateRequest id = Text("hi");
  id.set_request_id(bad);
  grpc::ClientContext abort_context;
  v1::AbortRequest abort;
  abort.set_request_id(bad);
  v1::AbortResponse found;
  const std::vector<Case> cases = {
      {"text", Complete(Text(bad))},
      {"stop.stop_strings[0]", Complete(stop)},
      {"request_id", Complete(id)},
      {"text", Tokenize(bad)},
      {"request_id", stub_->Abort(&abort_context, abort, &found)},
  };
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.error_code(), kInvalid) << c.field;
    EXPECT_THAT(c.status.error_message(), HasSubstr(c.field));
  }
  EXPECT_THAT(log, Not(HasSubstr("libprotobuf")));
}

// Idle TCP connections to /metrics: each holds one civetweb worker until
// its request timeout; the scrape still gets a worker.
TEST_F(LimitsTest, IdleConnectionsDoNotBlindMetrics) {
  std::vector<int> idle;
  for (int i = 0; i < kMetricsThreads / 2; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server_->metrics_port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    idle.push_back(fd);
  }
  // A liveness bound, not a timing assertion: the old endpoint (2 workers,
  // 30 s request timeout) answered after 30 s.
  h3::testing::RawHttp scrape(server_->metrics_port());
  scrape.Send("GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
  EXPECT_THAT(scrape.ReadUntil("h3_build_info", std::chrono::seconds(10)),
              HasSubstr("h3_build_info"));
  for (int fd : idle) close(fd);
}

// Each gRPC call in flight holds a thread; past --grpc-max-threads calls are
// refused at once instead of each taking one more thread.
TEST(ThreadQuotaTest, CallsPastTheQuotaAreResourceExhausted) {
  ServerOptions options = LoopbackOptions();
  options.max_sequence_length = 1 << 16;
  options.max_new_tokens = 60000;
  options.slots = 16;
  options.grpc.max_threads = 6;
  std::unique_ptr<Server> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);
  struct Call {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  };
  std::vector<std::unique_ptr<Call>> calls;
  int refused = 0;
  for (int i = 0; i < 12 && refused == 0; ++i) {
    auto call = std::make_unique<Call>();
    call->reader = stub->Generate(&call->context, GreedyIds({1, 2}, 60000));
    v1::GenerateResponse first;
    if (!call->reader->Read(&first)) {
      const grpc::Status status = call->reader->Finish();
      EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
          << status.error_message();
      ++refused;
      continue;
    }
    calls.push_back(std::move(call));
  }
  EXPECT_EQ(refused, 1);
  EXPECT_LT(calls.size(), 6u);
  for (auto& call : calls) {
    call->context.TryCancel();
    v1::GenerateResponse ignored;
    while (call->reader->Read(&ignored)) {
    }
    call->reader->Finish();
  }
  // Threads come back: calls are served again.
  EXPECT_TRUE(WaitFor([&] {
    grpc::ClientContext context;
    v1::GenerateResponse response;
    return stub->Complete(&context, GreedyIds({1}, 1), &response).ok();
  }));
}

}  // namespace
}  // namespace h3::server
