#ifndef H3_SERVER_HTTP_CONNECTION_H_
#define H3_SERVER_HTTP_CONNECTION_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

#include "httplib.h"
#include "server/http_server.h"

namespace h3::server {

// What a connection's reads and writes obey.
struct ConnectionLimits {
  std::size_t header_bytes = 0;  // each request's head may use this many
  std::chrono::milliseconds read_timeout{0};
  std::chrono::milliseconds write_timeout{0};
  std::chrono::milliseconds idle_timeout{0};
  const std::atomic<bool>* closing = nullptr;   // ends waits between requests
  const std::atomic<bool>* stopping = nullptr;  // ends every wait
};

// One accepted TCP connection as cpp-httplib reads and writes it: a
// buffered stream over the socket that counts the bytes each request may
// still read (its head's budget, plus its body once admitted), so that no
// client can make the parser hold more than that; reads and writes give up
// after their timeouts, and at once when the server stops. It does not own
// the socket. One thread at a time.
class SocketConnection final : public httplib::Stream, public HttpConnection {
 public:
  // REQUIRES: limits.closing and limits.stopping outlive this.
  SocketConnection(int socket, const ConnectionLimits& limits);

  // Waits for the first byte of the next request, up to the idle timeout;
  // false when the peer closed, the time is up or the server is closing.
  bool WaitForRequest();
  // A new request begins: its head may read limits.header_bytes, and all of
  // it (head and body) must arrive within limits.read_timeout, so that a
  // client trickling bytes cannot hold a worker longer.
  void BeginRequest();
  // The request's head is read and its body of `bytes` admitted.
  void AllowBody(std::size_t bytes) { budget_ += bytes; }
  // The connection must close after this response (its body was not read).
  void CloseAfterResponse() { close_after_response_ = true; }
  bool close_after_response() const { return close_after_response_; }
  // The current request's route, for metrics ("other" when none).
  void set_route(const std::string* route) { route_ = route; }
  const std::string* route() const { return route_; }

  bool Gone() const override;

  // httplib::Stream.
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return socket_; }

 private:
  // Waits up to `timeout` for `events` on the socket, in short slices so
  // that `until` (closing or stopping) is noticed; true when ready.
  bool Await(short events, std::chrono::milliseconds timeout,
             const std::atomic<bool>& until) const;

  const int socket_;
  const ConnectionLimits limits_;
  std::size_t budget_ = 0;  // bytes the current request may still read
  std::chrono::steady_clock::time_point deadline_;  // to read it by
  char buffer_[4096];
  std::size_t begin_ = 0;  // unread bytes are buffer_[begin_, end_)
  std::size_t end_ = 0;
  bool close_after_response_ = false;
  const std::string* route_ = nullptr;
};

}  // namespace h3::server

#endif  // H3_SERVER_HTTP_CONNECTION_H_
