#ifndef H3_TESTS_SUPPORT_RAW_HTTP_H_
#define H3_TESTS_SUPPORT_RAW_HTTP_H_

#include <chrono>
#include <string>

namespace h3::testing {

// A TCP connection to 127.0.0.1:port for HTTP written by hand: framing that
// ordinary clients never send, and a client that leaves without a word. The
// destructor closes the connection. Failures are test failures. One thread.
class RawHttp {
 public:
  explicit RawHttp(int port);
  ~RawHttp();
  RawHttp(const RawHttp&) = delete;
  RawHttp& operator=(const RawHttp&) = delete;

  void Send(const std::string& bytes);
  // Sends an HTTP/1.1 POST of a JSON body with its Content-Length.
  void PostJson(const std::string& path, const std::string& body);
  // Reads until what was read contains `needle`, the peer closes, or
  // `timeout` passes; returns everything read so far.
  std::string ReadUntil(const std::string& needle,
                        std::chrono::milliseconds timeout);
  // Reads until the peer closes or `timeout` passes.
  std::string ReadAll(std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
  std::string read_;
};

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_RAW_HTTP_H_
