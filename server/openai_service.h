#ifndef H3_SERVER_OPENAI_SERVICE_H_
#define H3_SERVER_OPENAI_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "httplib.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/text_generation_service.h"

namespace h3::server {

// The OpenAI-compatible HTTP API over the same engine loop as the gRPC
// service: POST /v1/completions (streaming as server-sent events ending
// with "data: [DONE]"), GET /v1/models and /v1/models/{id}, GET /health,
// and POST /v1/chat/completions, which answers 404 because model files
// carry no chat template (every served model is a base model).
//
// A completion is read into the gRPC API's request (ParseCompletionRequest)
// and made an engine request by ToGenerationRequest, so defaults, limits and
// checks are the gRPC API's; it is submitted to the Scheduler and its
// RequestOutput read through Relay, as a gRPC call's is. A client that
// disconnects, mid-stream or while waiting, ends its request (and frees its
// slot) within one engine iteration. The response id ("cmpl-" and 128
// random bits) is held in RequestIds under the caller's key, so the gRPC
// API's Abort with the same key can end it.
//
// Errors are OpenAI's JSON objects with the status of ToOpenAiError (400
// bad argument, 404 unknown model, 429 queue full, 503 no model or
// draining); refusals are counted in h3_requests_rejected_total{protocol=
// "http"}. Thread-safe: handlers run on the HTTP server's workers.
class OpenAiService {
 public:
  // `metrics` must outlive the service; the routes' handlers refer to it.
  OpenAiService(ServedModel model, Metrics* metrics);

  // The routes to serve; they refer to this service, which must outlive
  // the server serving them.
  std::vector<HttpRoute> Routes();

  // The check of every request before its body is read (HttpServer's
  // Admission): with API keys, each route but /health needs
  // "Authorization: Bearer <key>"; 401 (OpenAI's invalid_api_key) without.
  std::optional<HttpError> Admit(const httplib::Request& request);

  // From now on completions and /health answer 503.
  void SetDraining() { draining_.store(true); }

 private:
  void Completions(const httplib::Request& request, httplib::Response& response,
                   const HttpConnection& connection);
  void ChatCompletions(const httplib::Request& request,
                       httplib::Response& response);
  void Models(httplib::Response& response) const;
  void Model(const httplib::Request& request,
             httplib::Response& response) const;
  void Health(httplib::Response& response) const;

  // Answers `status` as OpenAI's error, counting it as a refused request.
  void Refuse(httplib::Response& response, const absl::Status& status);
  // The scope of an admitted request's ids: its key's name ("" without keys).
  std::string Caller(const httplib::Request& request) const;

  const ServedModel model_;
  Metrics* const metrics_;
  const int64_t created_;  // Unix seconds at start, for /v1/models
  std::atomic<bool> draining_{false};
};

}  // namespace h3::server

#endif  // H3_SERVER_OPENAI_SERVICE_H_
