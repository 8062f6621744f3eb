#ifndef H3_SERVER_HTTP_SERVER_H_
#define H3_SERVER_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "httplib.h"
#include "server/status.h"

namespace h3::server {

// Bounds on what HTTP clients may make the server hold. With them, memory
// and threads stay bounded whatever clients send: at most `threads`
// connections are served and `max_queued_connections` wait (further ones
// get 503 at once, and the kernel's listen backlog holds the rest); a
// request's head is read within max_header_bytes and its body within
// max_body_bytes; a request must arrive whole within the read timeout of its
// first byte, a peer that stops reading is dropped after the write timeout,
// and an idle keep-alive connection after idle_timeout.
struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free port (see HttpServer::port)
  int threads = 64;
  int max_queued_connections = 64;
  std::size_t max_header_bytes = 64 * 1024;  // request line and headers
  std::size_t max_body_bytes = 2 * 1024 * 1024;
  std::chrono::milliseconds read_timeout{30'000};
  std::chrono::milliseconds write_timeout{30'000};
  std::chrono::milliseconds idle_timeout{5'000};
  int max_requests_per_connection = 1000;
};

// The connection a request came on, as its handler sees it.
class HttpConnection {
 public:
  virtual ~HttpConnection() = default;
  // True once the peer has closed or reset the connection, or the server
  // stops: nothing written any more reaches anyone. Cheap (one poll).
  virtual bool Gone() const = 0;
};

// A route: an HTTP method and a path pattern (an ECMAScript regular
// expression matched against the whole path, as cpp-httplib does).
struct HttpRoute {
  using Handler = std::function<void(
      const httplib::Request&, httplib::Response&, const HttpConnection&)>;
  std::string method;  // "GET" or "POST"
  std::string pattern;
  std::string name;  // its label in metrics, e.g. "/v1/models/{id}"
  Handler handler;
};

// An HTTP/1.1 server on cpp-httplib (Debian's libcpp-httplib) that serves
// fixed routes under HttpOptions' bounds. cpp-httplib parses the requests
// and writes the responses; this class owns the connections: it reads each
// one through a stream that enforces the byte bounds, answers transport
// errors itself (400 unreadable request, 404 unknown route, 405 wrong
// method, 411 body without Content-Length, 413 body too large, 415 encoded
// body, 503 too many connections) through the ErrorFormatter, and tells
// handlers whether their client is still there (HttpConnection).
//
// Every request passes one Admission check after its head is read and
// before its body is read or any handler runs; that is where API keys
// (Authorization: Bearer, 401) belong.
//
// Handlers run on the server's worker threads, one request per thread at a
// time, and may block (they wait for the engine). Thread-safe.
class HttpServer {
 public:
  // The body of an error response (Content-Type: application/json).
  using ErrorFormatter = std::function<std::string(const HttpError&)>;
  // nullopt lets the request through; an error is answered instead.
  using Admission =
      std::function<std::optional<HttpError>(const httplib::Request&)>;
  // Called after each response is written, with the route's name ("other"
  // when none matched) and the status.
  using ResponseObserver = std::function<void(const std::string&, int)>;

  // Binds options.host:options.port and starts serving `routes`.
  // Unavailable naming the address when it cannot be bound; InvalidArgument
  // for bad options. `admission` and `observer` may be empty.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpOptions& options, std::vector<HttpRoute> routes,
      ErrorFormatter errors, Admission admission, ResponseObserver observer);

  // Shutdown(0).
  ~HttpServer();

  int port() const { return port_; }

  // Stops accepting connections and starting requests, gives requests in
  // flight up to `grace` to finish, then tells the rest their client is
  // gone (HttpConnection::Gone) and waits for every worker to end.
  // Idempotent; later calls return at once.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  class Listener;
  class WorkerPool;

  explicit HttpServer(const HttpOptions& options);
  // The admission checks of every request: the body's framing and size,
  // then `admission_`. Sets the response and returns true when it refuses.
  bool Refuse(const httplib::Request& request, httplib::Response& response);
  void SetError(httplib::Response& response, const HttpError& error) const;
  // Serves one accepted connection on a worker thread until it closes.
  void Serve(int socket);
  // Answers 503 on an accepted connection that no worker can take.
  void Reject(int socket) const;

  const HttpOptions options_;
  std::vector<HttpRoute> routes_;
  std::vector<std::regex> patterns_;  // of routes_, in order
  ErrorFormatter errors_;
  Admission admission_;
  ResponseObserver observer_;
  std::unique_ptr<Listener> listener_;
  std::thread accept_thread_;
  int port_ = 0;
  std::atomic<bool> closing_{false};   // no new requests
  std::atomic<bool> stopping_{false};  // every client counts as gone
  std::atomic<int> requests_in_flight_{0};
  std::atomic<bool> shut_down_{false};
};

}  // namespace h3::server

#endif  // H3_SERVER_HTTP_SERVER_H_
