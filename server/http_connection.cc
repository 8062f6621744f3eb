#include "server/http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace h3::server {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// How long a wait runs before it looks at the closing/stopping flags again.
constexpr milliseconds kSlice(100);

void AddressOf(const sockaddr_storage& address, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

}  // namespace

SocketConnection::SocketConnection(int socket, const ConnectionLimits& limits)
    : socket_(socket), limits_(limits) {}

bool SocketConnection::Await(short events, milliseconds timeout,
                             const std::atomic<bool>& until) const {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (!until.load()) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    pollfd p = {.fd = socket_, .events = events, .revents = 0};
    const auto slice = std::min<Clock::duration>(deadline - now, kSlice);
    const int ready =
        poll(&p, 1,
             static_cast<int>(std::chrono::ceil<milliseconds>(slice).count()));
    if (ready > 0) return true;  // errors and hang-ups count: the I/O says
    if (ready < 0 && errno != EINTR) return false;
  }
  return false;
}

bool SocketConnection::WaitForRequest() {
  if (begin_ < end_) return true;  // a pipelined request is buffered
  if (!Await(POLLIN, limits_.idle_timeout, *limits_.closing)) return false;
  char byte;
  return recv(socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

void SocketConnection::BeginRequest() {
  budget_ = limits_.header_bytes;
  deadline_ = Clock::now() + limits_.read_timeout;
  close_after_response_ = false;
  route_ = nullptr;
}

bool SocketConnection::Gone() const {
  if (limits_.stopping->load()) return true;
  pollfd p = {.fd = socket_, .events = POLLRDHUP, .revents = 0};
  return poll(&p, 1, 0) > 0 &&
         (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

bool SocketConnection::is_readable() const {
  return begin_ < end_ ||
         Await(POLLIN, limits_.read_timeout, *limits_.stopping);
}

bool SocketConnection::is_writable() const {
  return !Gone() && Await(POLLOUT, limits_.write_timeout, *limits_.stopping);
}

ssize_t SocketConnection::read(char* ptr, size_t size) {
  if (begin_ == end_) {
    // Past its budget a request cannot be read further: cpp-httplib then
    // fails it (400) and the connection closes.
    if (budget_ == 0) return -1;
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0 || !Await(POLLIN, left, *limits_.stopping)) {
      return -1;
    }
    const ssize_t n =
        recv(socket_, buffer_, std::min(sizeof buffer_, budget_), 0);
    if (n <= 0) return n < 0 ? -1 : 0;
    budget_ -= static_cast<size_t>(n);
    begin_ = 0;
    end_ = static_cast<size_t>(n);
  }
  const size_t n = std::min(size, end_ - begin_);
  std::memcpy(ptr, buffer_ + begin_, n);
  begin_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t SocketConnection::write(const char* ptr, size_t size) {
  while (true) {
    const ssize_t n = send(socket_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    // The peer reads too slowly: wait, but not past the write timeout.
    if (!Await(POLLOUT, limits_.write_timeout, *limits_.stopping)) return -1;
  }
}

void SocketConnection::get_remote_ip_and_port(std::string& ip,
                                              int& port) const {
  sockaddr_storage address = {};
  socklen_t length = sizeof address;
  if (getpeername(socket_, reinterpret_cast<sockaddr*>(&address), &length) ==
      0) {
    AddressOf(address, ip, port);
  }
}

void SocketConnection::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address = {};
  socklen_t length = sizeof address;
  if (getsockname(socket_, reinterpret_cast<sockaddr*>(&address), &length) ==
      0) {
    AddressOf(address, ip, port);
  }
}

}  // namespace h3::server
