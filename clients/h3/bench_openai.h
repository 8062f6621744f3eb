#ifndef H3_CLIENTS_H3_BENCH_OPENAI_H_
#define H3_CLIENTS_H3_BENCH_OPENAI_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "clients/h3/bench_backend.h"

namespace h3::cli {

// Where an OpenAI-compatible API listens: "http://HOST:PORT" with an
// optional path (e.g. "/v1", which is what requests go under either way).
struct HttpEndpoint {
  std::string host;
  int port = 80;
  std::string api_key;  // sent as "Authorization: Bearer <key>" when set
};

// InvalidArgument for anything but http://HOST[:PORT][/PATH] (no TLS yet).
absl::StatusOr<HttpEndpoint> ParseBaseUrl(const std::string& url);

// The OpenAI-compatible HTTP front end (h3serve's --http-port, or any
// server that accepts vLLM's extensions): each request is a POST
// /v1/completions with stream: true, stream_options.include_usage, and
// vLLM's min_tokens, ignore_eos and return_token_ids (so that each event's
// token count is exact, as gRPC's messages give it), read as server-sent
// events on a thread and a connection of its own (cpp-httplib's client).
// A chunk's arrival is timed when its event has been read whole.
class OpenAiBenchBackend final : public BenchBackend {
 public:
  // `model` is sent as the request's model.
  OpenAiBenchBackend(HttpEndpoint endpoint, std::string model);

  std::shared_ptr<BenchCall> Start(
      const BenchPrompt& prompt, float temperature, RequestRecord* record,
      Clock::time_point start,
      std::function<void(const CallEnd&)> ended) override;

 private:
  class Call;
  const HttpEndpoint endpoint_;
  const std::string model_;
};

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_BENCH_OPENAI_H_
