#include "server/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <regex>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "server/http_connection.h"

namespace h3::server {
namespace {

using std::chrono::milliseconds;

// The connection the current worker thread serves (null on other threads).
thread_local SocketConnection* tls_connection = nullptr;
// Set while the accept thread runs a job that no worker could take.
thread_local bool tls_rejecting = false;

// How long, and how many bytes, a closing connection reads and drops.
constexpr milliseconds kLinger(500);
constexpr std::size_t kLingerBytes = 1 << 20;

HttpError TransportError(int status, std::string message) {
  HttpError e;
  e.status = status;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  e.message = std::move(message);
  return e;
}

}  // namespace

// cpp-httplib's server with its connection handling replaced by
// HttpServer::Serve (and Reject), so that every byte it reads passes
// through a SocketConnection.
class HttpServer::Listener final : public httplib::Server {
 public:
  explicit Listener(HttpServer& owner) : owner_(owner) {}

  // Binds; returns the port, or -1.
  int Bind(const std::string& host, int port) {
    // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which
    // a second h3serve would silently share the port.
    set_socket_options([](socket_t socket) {
      int yes = 1;
      setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    const int bound = port == 0 ? bind_to_any_port(host)
                                : (bind_to_port(host, port) ? port : -1);
    // cpp-httplib listens with a backlog of 5, which drops the SYNs of a
    // burst of clients (each retried a second later); Linux takes a second
    // listen() as a new backlog.
    if (bound > 0) ::listen(svr_sock_, SOMAXCONN);
    return bound;
  }

  bool Process(httplib::Stream& stream, bool last, bool& closed) {
    return process_request(stream, last, closed, nullptr);
  }

 protected:
  bool process_and_close_socket(socket_t socket) override {
    if (tls_rejecting) {
      owner_.Reject(socket);
    } else {
      owner_.Serve(socket);
    }
    return true;
  }

 private:
  HttpServer& owner_;
};

// The workers: a fixed number of threads taking accepted connections from a
// bounded queue. A connection arriving at a full queue is answered 503 on
// the accept thread (Reject) rather than queued.
class HttpServer::WorkerPool final : public httplib::TaskQueue {
 public:
  WorkerPool(int threads, int max_queued) : max_queued_(max_queued) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] { Work(); });
    }
  }

  void enqueue(std::function<void()> job) override {
    {
      absl::MutexLock lock(&mu_);
      if (!done_ && static_cast<int>(jobs_.size()) < max_queued_) {
        jobs_.push_back(std::move(job));
        return;
      }
    }
    tls_rejecting = true;
    job();
    tls_rejecting = false;
  }

  // Runs the queued jobs (connections close at once when the server is
  // closing), then ends the threads.
  void shutdown() override {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> job;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](WorkerPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
              return p->done_ || !p->jobs_.empty();
            },
            this));
        if (jobs_.empty()) return;  // done
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  const int max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

HttpServer::HttpServer(const HttpOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpOptions& options, std::vector<HttpRoute> routes,
    ErrorFormatter errors, Admission admission, ResponseObserver observer) {
  if (options.threads < 1 || options.max_queued_connections < 0 ||
      options.max_header_bytes < 1024 ||
      options.max_requests_per_connection < 1) {
    return absl::InvalidArgumentError(
        "HTTP options: threads and requests per connection must be >= 1, "
        "queued connections >= 0, header bytes >= 1024");
  }
  std::unique_ptr<HttpServer> server(new HttpServer(options));
  server->routes_ = std::move(routes);
  server->errors_ = std::move(errors);
  server->admission_ = std::move(admission);
  server->observer_ = std::move(observer);
  for (const HttpRoute& route : server->routes_) {
    server->patterns_.emplace_back(route.pattern);
  }

  auto listener = std::make_unique<Listener>(*server);
  Listener& l = *listener;
  for (const HttpRoute& route : server->routes_) {
    httplib::Server::Handler handler = [&route](const httplib::Request& request,
                                                httplib::Response& response) {
      route.handler(request, response, *tls_connection);
    };
    if (route.method == "GET") l.Get(route.pattern, std::move(handler));
    if (route.method == "POST") l.Post(route.pattern, std::move(handler));
  }
  HttpServer* self = server.get();
  l.set_pre_routing_handler(
      [self](const httplib::Request& request, httplib::Response& response) {
        return self->Refuse(request, response)
                   ? httplib::Server::HandlerResponse::Handled
                   : httplib::Server::HandlerResponse::Unhandled;
      });
  // cpp-httplib's own refusals (an unreadable request, a route it cannot
  // find) get a JSON body too.
  l.set_error_handler(httplib::Server::HandlerWithResponse(
      [self](const httplib::Request& request, httplib::Response& response) {
        if (!response.body.empty()) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        std::string message =
            response.status == 404
                ? absl::StrCat("no route ", request.method, " ", request.path)
            : response.status == 400
                ? absl::StrCat(
                      "the request could not be read (malformed, or "
                      "its head is over ",
                      self->options_.max_header_bytes, " bytes)")
                : absl::StrCat("HTTP ", response.status);
        self->SetError(response, TransportError(response.status, message));
        return httplib::Server::HandlerResponse::Handled;
      }));
  l.set_exception_handler([self](const httplib::Request&,
                                 httplib::Response& response,
                                 std::exception_ptr) {
    self->SetError(response, TransportError(500, "internal error"));
  });
  l.set_logger([self](const httplib::Request&, const httplib::Response& r) {
    if (self->observer_ == nullptr || tls_connection == nullptr) return;
    const std::string* route = tls_connection->route();
    self->observer_(route != nullptr ? *route : "other", r.status);
  });
  l.set_payload_max_length(options.max_body_bytes);
  l.set_keep_alive_max_count(options.max_requests_per_connection);
  l.set_keep_alive_timeout(std::max<time_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options.idle_timeout)
             .count()));
  l.new_task_queue = [self] {
    return new WorkerPool(self->options_.threads,
                          self->options_.max_queued_connections);
  };

  const std::string address = absl::StrCat(options.host, ":", options.port);
  server->port_ = l.Bind(options.host, options.port);
  if (server->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", address,
                     " (is the port in use? choose another with --http-port)"));
  }
  server->listener_ = std::move(listener);
  server->accept_thread_ =
      std::thread([self] { self->listener_->listen_after_bind(); });
  // stop() does nothing until the accept loop runs.
  while (!self->listener_->is_running()) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  return server;
}

HttpServer::~HttpServer() { Shutdown(milliseconds(0)); }

void HttpServer::Shutdown(milliseconds grace) {
  if (shut_down_.exchange(true)) return;
  closing_.store(true);
  if (listener_ == nullptr) return;
  listener_->stop();  // the accept loop ends; idle connections close
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (requests_in_flight_.load() > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  stopping_.store(true);  // handlers still waiting see their client gone
  accept_thread_.join();  // after the workers have ended
}

void HttpServer::SetError(httplib::Response& response,
                          const HttpError& error) const {
  response.status = error.status;
  response.set_content(errors_(error), "application/json");
}

bool HttpServer::Refuse(const httplib::Request& request,
                        httplib::Response& response) {
  SocketConnection& connection = *tls_connection;
  const bool has_body = request.has_header("Content-Length") ||
                        request.has_header("Transfer-Encoding");
  auto refuse = [&](HttpError error) {
    if (has_body) connection.CloseAfterResponse();  // its body stays unread
    SetError(response, error);
    return true;
  };

  // The route, for the metrics and 404/405.
  std::vector<std::string> allowed;
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (!std::regex_match(request.path, patterns_[i])) continue;
    connection.set_route(&routes_[i].name);
    allowed.push_back(routes_[i].method);
  }
  if (allowed.empty()) {
    return refuse(TransportError(
        404, absl::StrCat("no route ", request.method, " ", request.path)));
  }
  const std::string method = request.method == "HEAD" ? "GET" : request.method;
  if (std::find(allowed.begin(), allowed.end(), method) == allowed.end()) {
    response.set_header("Allow", absl::StrJoin(allowed, ", "));
    return refuse(TransportError(
        405, absl::StrCat(request.path, " takes ", absl::StrJoin(allowed, ", "),
                          ", not ", request.method)));
  }

  // The body's framing: a Content-Length within the limit, no encodings.
  if (request.has_header("Transfer-Encoding")) {
    return refuse(TransportError(
        411, "send the body with a Content-Length, not chunked"));
  }
  const std::string encoding = request.get_header_value("Content-Encoding");
  if (!encoding.empty() && encoding != "identity") {
    return refuse(TransportError(
        415, absl::StrCat("Content-Encoding ", encoding,
                          " is not accepted; send the body uncompressed")));
  }
  uint64_t length = 0;
  if (request.has_header("Content-Length") &&
      !absl::SimpleAtoi(request.get_header_value("Content-Length"), &length)) {
    return refuse(TransportError(400, "Content-Length is not a number"));
  }
  if (method == "POST" && !request.has_header("Content-Length")) {
    return refuse(TransportError(411, "a POST needs a Content-Length"));
  }
  if (length > options_.max_body_bytes) {
    return refuse(TransportError(
        413, absl::StrCat("the body is ", length, " bytes; at most ",
                          options_.max_body_bytes, " are accepted")));
  }
  if (admission_ != nullptr) {
    if (std::optional<HttpError> error = admission_(request)) {
      return refuse(*std::move(error));
    }
  }
  // A GET's body is not read by cpp-httplib: close rather than parse it as
  // the next request.
  if (method == "POST") {
    connection.AllowBody(length);
  } else if (length > 0) {
    connection.CloseAfterResponse();
  }
  return false;
}

void HttpServer::Serve(int socket) {
  int yes = 1;  // stream each token now, not after Nagle's delay
  setsockopt(socket, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  SocketConnection connection(socket,
                              {.header_bytes = options_.max_header_bytes,
                               .read_timeout = options_.read_timeout,
                               .write_timeout = options_.write_timeout,
                               .idle_timeout = options_.idle_timeout,
                               .closing = &closing_,
                               .stopping = &stopping_});
  tls_connection = &connection;
  for (int n = 0; n < options_.max_requests_per_connection; ++n) {
    if (!connection.WaitForRequest()) break;
    connection.BeginRequest();
    requests_in_flight_.fetch_add(1);
    bool closed = false;
    const bool last =
        n + 1 == options_.max_requests_per_connection || closing_.load();
    const bool ok = listener_->Process(connection, last, closed);
    requests_in_flight_.fetch_sub(1);
    if (!ok || closed || last || connection.close_after_response()) break;
  }
  tls_connection = nullptr;
  // A lingering close: closing with unread bytes (a refused body) would
  // reset the connection, and the peer could lose the response before
  // reading it. So: end our side, then read and drop what the peer still
  // sends, for a short while.
  ::shutdown(socket, SHUT_WR);
  const auto until = std::chrono::steady_clock::now() + kLinger;
  std::size_t drained = 0;
  char sink[4096];
  while (!stopping_.load() && drained < kLingerBytes &&
         std::chrono::steady_clock::now() < until) {
    pollfd p = {.fd = socket, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = recv(socket, sink, sizeof sink, 0);
    if (n <= 0) break;
    drained += static_cast<std::size_t>(n);
  }
  ::close(socket);
}

void HttpServer::Reject(int socket) const {
  const std::string body =
      errors_(TransportError(503, "too many connections; retry shortly"));
  const std::string response = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\n"
      "Content-Type: application/json\r\n"
      "Content-Length: ",
      body.size(), "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n", body);
  // A new socket's send buffer takes this whole; never block the accept
  // thread on it.
  (void)send(socket, response.data(), response.size(),
             MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(socket, SHUT_WR);
  ::close(socket);
  if (observer_ != nullptr) observer_("other", 503);
}

}  // namespace h3::server
