// API keys end to end: every RPC but health needs a valid key, the HTTP API
// checks the same keys (401 in OpenAI's shape, /health open), refusals are
// counted by reason, and a key's name scopes request ids and Abort.
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/testing/test_server.h"
#include "tests/support/raw_http.h"

namespace h3::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace testing;  // NOLINT: the test server helpers

constexpr char kAlice[] = "alice-key-0123456789";
constexpr char kBob[] = "bob-key-0123456789ab";

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options = LoopbackOptions();
    options.max_sequence_length = 1 << 16;
    options.max_new_tokens = 60000;
    options.slots = 2;
    options.metrics_port = 0;
    options.http.port = 0;
    options.api_keys =
        *ApiKeys::Parse(absl::StrCat("alice:", kAlice, "\nbob:", kBob, "\n"));
    server_ = StartServer(options).release();
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = Connect(*server_);
  }

  // A context carrying `key` (none when empty).
  static void WithKey(grpc::ClientContext* context, const std::string& key) {
    if (!key.empty()) context->AddMetadata("authorization", "Bearer " + key);
  }
  grpc::Status Info(const std::string& key) {
    grpc::ClientContext context;
    WithKey(&context, key);
    v1::ServerInfo info;
    return stub_->GetServerInfo(&context, {}, &info);
  }
  v1::AbortResponse Abort(const std::string& key, const std::string& id) {
    grpc::ClientContext context;
    WithKey(&context, key);
    v1::AbortRequest request;
    request.set_request_id(id);
    v1::AbortResponse response;
    EXPECT_TRUE(stub_->Abort(&context, request, &response).ok());
    return response;
  }
  std::string Http(const std::string& head) {
    h3::testing::RawHttp http(server_->http_port());
    http.Send(head + "Host: x\r\nConnection: close\r\n\r\n");
    return http.ReadAll(std::chrono::seconds(10));
  }
  double Unauthenticated(const std::string& protocol,
                         const std::string& reason) {
    return ParseMetrics(HttpGetMetrics(server_->metrics_port()))[absl::StrCat(
        "h3_unauthenticated_requests_total{protocol=\"", protocol,
        "\",reason=\"", reason, "\"}")];
  }

  static Server* server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
};

Server* AuthTest::server_ = nullptr;

TEST_F(AuthTest, EveryRpcNeedsAValidKey) {
  const double missing = Unauthenticated("grpc", "missing");
  const double unknown = Unauthenticated("grpc", "unknown_key");
  EXPECT_TRUE(Info(kAlice).ok());
  EXPECT_EQ(Info("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status wrong = Info("not-a-key-0123456789");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), Not(HasSubstr("not-a-key")));

  grpc::ClientContext context;
  v1::GenerateResponse response;
  EXPECT_EQ(
      stub_->Complete(&context, GreedyIds({1}, 1), &response).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext tokenize;
  v1::TokenizeRequest text;
  text.set_text("hello");
  v1::TokenizeResponse ids;
  EXPECT_EQ(stub_->Tokenize(&tokenize, text, &ids).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Unauthenticated("grpc", "missing"), missing + 3);
  EXPECT_EQ(Unauthenticated("grpc", "unknown_key"), unknown + 1);

  // Health stays open.
  auto health = grpc::health::v1::Health::NewStub(ChannelTo(*server_));
  grpc::ClientContext probe;
  grpc::health::v1::HealthCheckResponse serving;
  EXPECT_TRUE(health->Check(&probe, {}, &serving).ok());
}

TEST_F(AuthTest, HttpApiNeedsTheSameKeys) {
  const std::string refused = Http("GET /v1/models HTTP/1.1\r\n");
  EXPECT_THAT(refused, HasSubstr("HTTP/1.1 401"));
  EXPECT_THAT(refused, HasSubstr("\"code\":\"invalid_api_key\""));
  EXPECT_THAT(Http(absl::StrCat("GET /v1/models HTTP/1.1\r\nAuthorization: "
                                "Bearer ",
                                kBob, "\r\n")),
              HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(Http("GET /health HTTP/1.1\r\n"), HasSubstr("HTTP/1.1 200"));
  EXPECT_GE(Unauthenticated("http", "missing"), 1);
}

TEST_F(AuthTest, IdsAndAbortBelongToTheirKey) {
  v1::GenerateRequest request = GreedyIds({1, 2, 3}, 60000);
  request.set_request_id("mine");
  grpc::ClientContext alice;
  WithKey(&alice, kAlice);
  auto reader = stub_->Generate(&alice, request);
  v1::GenerateResponse first;
  ASSERT_TRUE(reader->Read(&first));

  // Bob may use the same id, and cannot abort Alice's request.
  grpc::ClientContext bob;
  WithKey(&bob, kBob);
  request.mutable_stop()->set_max_new_tokens(2);
  v1::GenerateResponse bobs;
  EXPECT_TRUE(stub_->Complete(&bob, request, &bobs).ok());
  EXPECT_FALSE(Abort(kBob, "mine").found());
  EXPECT_TRUE(Abort(kAlice, "mine").found());

  v1::GenerateResponse message, last;
  while (reader->Read(&message)) last = message;
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_CANCELLED);
}

}  // namespace
}  // namespace h3::server
