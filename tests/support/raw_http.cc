#include "tests/support/raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace h3::testing {

RawHttp::RawHttp(int port) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address),
            0)
      << "connect to port " << port;
}

RawHttp::~RawHttp() { close(fd_); }

void RawHttp::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n =
        send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << "send";
    sent += static_cast<size_t>(n);
  }
}

void RawHttp::PostJson(const std::string& path, const std::string& body) {
  Send("POST " + path +
       " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
       "Content-Length: " +
       std::to_string(body.size()) + "\r\n\r\n" + body);
}

std::string RawHttp::ReadUntil(const std::string& needle,
                               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (needle.empty() || read_.find(needle) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p = {.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    read_.append(buffer, static_cast<size_t>(n));
  }
  return read_;
}

std::string RawHttp::ReadAll(std::chrono::milliseconds timeout) {
  return ReadUntil("", timeout);
}

}  // namespace h3::testing
