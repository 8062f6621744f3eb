// HttpServer's bounds, on loopback with small limits: a request that
// trickles in is dropped at the read timeout, a head over its budget is
// 400, a handler sees its client leave, the admission hook answers before
// any handler, and Shutdown ends handlers that wait for the client.
#include "server/http_server.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/raw_http.h"

namespace h3::server {
namespace {

using ::h3::testing::RawHttp;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string Body(const HttpError& e) { return "error: " + e.message; }

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpServer::Admission admission = nullptr) {
    HttpOptions options;
    options.host = "127.0.0.1";
    options.threads = 2;
    options.max_queued_connections = 2;
    options.max_header_bytes = 2048;
    options.max_body_bytes = 4096;
    options.read_timeout = 300ms;
    options.idle_timeout = 300ms;
    std::vector<HttpRoute> routes = {
        {"GET", "/ok", "/ok",
         [](const httplib::Request&, httplib::Response& r,
            const HttpConnection&) { r.set_content("ok", "text/plain"); }},
        {"POST", "/size", "/size",
         [](const httplib::Request& q, httplib::Response& r,
            const HttpConnection&) {
           r.set_content(std::to_string(q.body.size()), "text/plain");
         }},
        // Waits (at most 10 s) for its client to leave.
        {"GET", "/wait", "/wait",
         [this](const httplib::Request&, httplib::Response& r,
                const HttpConnection& c) {
           const auto until = Clock::now() + 10s;
           while (!c.Gone() && Clock::now() < until) {
             std::this_thread::sleep_for(5ms);
           }
           saw_gone_.store(c.Gone());
           r.set_content("late", "text/plain");
         }},
    };
    auto server = HttpServer::Start(options, std::move(routes), Body,
                                    std::move(admission), nullptr);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::unique_ptr<HttpServer> server_;
  std::atomic<bool> saw_gone_{false};
};

TEST_F(HttpServerTest, ServesKeepAliveRequests) {
  Start();
  RawHttp c(server_->port());
  c.Send(
      "GET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n");
  // Both answered on the one connection, which closes when idle.
  const std::string both = c.ReadAll(2s);
  const size_t first = both.find("HTTP/1.1 200 OK");
  ASSERT_NE(first, std::string::npos) << both;
  EXPECT_NE(both.find("HTTP/1.1 200 OK", first + 1), std::string::npos);
  RawHttp post(server_->port());
  post.Send("POST /size HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_THAT(post.ReadUntil("\r\n\r\n5", 2s), HasSubstr("\r\n\r\n5"));
}

TEST_F(HttpServerTest, ARequestThatTricklesInIsDropped) {
  Start();
  RawHttp c(server_->port());
  const auto start = Clock::now();
  c.Send("GET /ok HTTP/1.1\r\n");  // and never the rest
  const std::string got = c.ReadAll(5s);
  EXPECT_THAT(got, Not(HasSubstr("200 OK")));
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST_F(HttpServerTest, AHeadOverItsBudgetIs400) {
  Start();
  RawHttp c(server_->port());
  c.Send("GET /ok HTTP/1.1\r\nX-A: " + std::string(4096, 'a') + "\r\n\r\n");
  EXPECT_THAT(c.ReadAll(2s), HasSubstr("HTTP/1.1 400"));
}

TEST_F(HttpServerTest, ABodyOverTheLimitIs413UnreadAndTheConnectionCloses) {
  Start();
  RawHttp c(server_->port());
  c.Send("POST /size HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n");
  const std::string got = c.ReadAll(2s);
  EXPECT_THAT(got, HasSubstr("HTTP/1.1 413"));
  EXPECT_THAT(got, HasSubstr("error: the body is 5000 bytes; at most 4096"));
}

TEST_F(HttpServerTest, AHandlerSeesItsClientLeave) {
  Start();
  {
    RawHttp c(server_->port());
    c.Send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
    std::this_thread::sleep_for(50ms);
  }  // closed
  const auto left = Clock::now();
  while (!saw_gone_.load() && Clock::now() - left < 5s) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(saw_gone_.load());
  EXPECT_LT(Clock::now() - left, 1s);
}

TEST_F(HttpServerTest, AdmissionAnswersBeforeAnyHandler) {
  Start([](const httplib::Request& r) -> std::optional<HttpError> {
    if (r.get_header_value("Authorization") == "Bearer key") {
      return std::nullopt;
    }
    return ToHttpError(absl::UnauthenticatedError("no key"));
  });
  RawHttp denied(server_->port());
  denied.Send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(denied.ReadUntil("no key", 2s), HasSubstr("HTTP/1.1 401"));
  RawHttp allowed(server_->port());
  allowed.Send(
      "GET /ok HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key\r\n\r\n");
  EXPECT_THAT(allowed.ReadUntil("ok", 2s), HasSubstr("HTTP/1.1 200"));
}

TEST_F(HttpServerTest, ShutdownEndsHandlersWaitingForTheirClient) {
  Start();
  RawHttp c(server_->port());
  c.Send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(50ms);
  const auto start = Clock::now();
  server_->Shutdown(100ms);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_TRUE(saw_gone_.load());
}

}  // namespace
}  // namespace h3::server
