// The server in-process on loopback: ports, health, GetServerInfo, metrics.
#include "server/server.h"

#include <string>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "server/testing/test_server.h"

namespace h3::server {
namespace {

using testing::ChannelTo;
using ::testing::HasSubstr;
using testing::HttpGetMetrics;

// No model, both ports picked free.
std::unique_ptr<Server> StartOnLoopback() {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.metrics_port = 0;
  return testing::StartServer(options);
}

// One server for the suite: stopping the metrics endpoint takes ~2 s
// (civetweb's poll quantum), too long to pay per test.
class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartOnLoopback().release(); }
  static void TearDownTestSuite() { delete server_; }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    channel_ = ChannelTo(*server_);
  }

  static Server* server_;
  std::shared_ptr<grpc::Channel> channel_;
};

Server* ServerTest::server_ = nullptr;

TEST_F(ServerTest, PicksFreePorts) {
  EXPECT_GT(server_->port(), 0);
  EXPECT_GT(server_->metrics_port(), 0);
  EXPECT_NE(server_->port(), server_->metrics_port());
}

TEST_F(ServerTest, ServerInfoReportsBuildAndNoModel) {
  auto stub = v1::TextGeneration::NewStub(channel_);
  grpc::ClientContext context;
  v1::ServerInfo info;
  grpc::Status status =
      stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(info.version().empty());
  EXPECT_FALSE(info.git_commit().empty());
  EXPECT_FALSE(info.model_loaded());
  EXPECT_FALSE(info.draining());
  EXPECT_GE(info.uptime_seconds(), 0.0);
}

TEST_F(ServerTest, GenerationWithoutModelIsUnavailable) {
  auto stub = v1::TextGeneration::NewStub(channel_);
  grpc::ClientContext context;
  v1::GenerateRequest request;
  request.set_text("Hello");
  v1::GenerateResponse response;
  grpc::Status status = stub->Complete(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("--model"));
}

TEST_F(ServerTest, HealthIsNotServingWithoutModel) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const char* service : {"", "h3.v1.TextGeneration"}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status = health->Check(&context, request, &response);
    ASSERT_TRUE(status.ok()) << service << ": " << status.error_message();
    EXPECT_EQ(response.status(),
              grpc::health::v1::HealthCheckResponse::NOT_SERVING)
        << "service '" << service << "'";
  }
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_EQ(health->Check(&context, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, MetricsEndpointExportsBuildInfo) {
  std::string response = HttpGetMetrics(server_->metrics_port());
  EXPECT_THAT(response, HasSubstr("200 OK"));
  EXPECT_THAT(response, HasSubstr("# TYPE h3_build_info gauge"));
  EXPECT_THAT(response, HasSubstr("h3_start_time_seconds "));
}

TEST(ServerShutdownTest, ShutdownDrainsAndIsIdempotent) {
  std::unique_ptr<Server> server = StartOnLoopback();
  ASSERT_NE(server, nullptr);
  auto channel = ChannelTo(*server);
  server->Shutdown(std::chrono::milliseconds(100));
  server->Shutdown(std::chrono::milliseconds(100));
  server->Wait();
  auto stub = v1::TextGeneration::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(2));
  v1::ServerInfo info;
  EXPECT_FALSE(
      stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &info).ok());
}

TEST(ServerStartTest, PortInUseIsAClearError) {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.metrics_port = -1;
  auto first = Server::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  options.port = (*first)->port();
  auto second = Server::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(std::to_string(options.port)));
}

TEST(ServerStartTest, MetricsPortInUseIsAClearError) {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.metrics_port = 0;
  auto first = Server::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  options.metrics_port = (*first)->metrics_port();
  auto second = Server::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("--metrics-port"));
}

}  // namespace
}  // namespace h3::server
