#ifndef H3_SERVER_SERVER_H_
#define H3_SERVER_SERVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/scheduler/scheduler.h"
#include "grpcpp/server.h"
#include "server/api_keys.h"
#include "server/grpc_limits.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_service.h"
#include "server/text_generation_service.h"
#include "tokenizer/tokenizer.h"

namespace h3::server {

struct ServerOptions {
  // Loopback unless told otherwise: the images pass 0.0.0.0 (docs/security.md).
  std::string host = "127.0.0.1";
  int port = 50051;          // 0: pick a free port
  int metrics_port = 8000;   // 0: pick a free port; -1: no metrics endpoint
  std::string metrics_host;  // empty: `host`

  // Without keys every caller is trusted alike; with keys every RPC but
  // health, and every HTTP route but /health, needs one (docs/security.md).
  ApiKeys api_keys;
  GrpcLimits grpc;

  std::string model_path;  // a model file (h3 convert); empty: see below
  // With no model_path: serve the embedded default model (h3-kjv) if true,
  // else no model (health NOT_SERVING, generation UNAVAILABLE).
  bool default_model = false;
  std::string model_name;  // reported by GetModelInfo; empty: the file name
  // Prompt plus generated tokens per request (sizes each slot's KV cache).
  int64_t max_sequence_length = 2048;
  int64_t prefill_chunk = 1024;  // tokens per H3 prefill call
  int64_t max_new_tokens = 512;  // per request
  // Prompt text bytes per request; 0: DefaultMaxPromptBytes of the context.
  int64_t max_prompt_bytes = 0;
  int slots = 8;                       // requests generating at once
  engine::BackendOptions backend;      // --device, --dtype
  engine::SchedulerOptions scheduler;  // its observer is set by Start
  // Off here (programs and tests embedding the server opt in); h3serve's
  // --prefix-cache-memory defaults to 0.1 of free memory.
  engine::PrefixCacheOptions prefix_cache;
  // Before serving, one decode step of padding rows per batch bucket
  // (Runner::WarmUp: graphs captured, measured products chosen, the
  // activations at their largest) on a backend with graphs; the CPU has
  // nothing to warm.
  bool warm_up = true;
  // The OpenAI-compatible HTTP API, on `host` too. http.host is ignored;
  // port -1 (the default here, so that programs and tests embedding the
  // server open no fixed port; h3serve's --http-port defaults to 8080) serves
  // none, 0 picks a free port.
  HttpOptions http = {.port = -1};
};

// h3serve: loads the model, starts the engine loop, and serves the
// TextGeneration service, the standard grpc.health.v1.Health service and
// server reflection on one gRPC port, the OpenAI-compatible HTTP API
// (OpenAiService) on another, and /metrics on a third. Both APIs submit to
// the one engine loop.
//
// Health: the overall status ("") and "h3.v1.TextGeneration" are SERVING
// while a model is loaded and the server is not draining, NOT_SERVING
// otherwise. Thread-safe; Drain and Shutdown may be called from any thread.
class Server {
 public:
  // Loads the model (errors name the file and the problem), then binds both
  // ports (Unavailable naming the address when one cannot be bound) and
  // starts serving.
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerOptions& options);

  ~Server();

  int port() const { return port_; }
  // -1 when the HTTP API is off.
  int http_port() const { return http_ != nullptr ? http_->port() : -1; }
  // -1 when metrics are disabled.
  int metrics_port() const { return metrics_->port(); }
  bool model_loaded() const { return scheduler_ != nullptr; }

  // Health goes NOT_SERVING (HTTP /health 503) and new generation requests
  // are refused (UNAVAILABLE, HTTP 503) from when this returns.
  void BeginDrain();
  // BeginDrain, then waits up to `timeout` for the running and waiting
  // requests to finish. True when none is left.
  bool Drain(std::chrono::milliseconds timeout);

  // Stops accepting calls and HTTP requests, lets those in flight finish for
  // up to `grace`, then cancels the rest. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

  // Blocks until Shutdown has completed.
  void Wait();

 private:
  Server() = default;
  // Loads the model and starts the engine loop; fills what `served` says of
  // the model.
  absl::Status LoadModel(const ServerOptions& options, ServedModel* served);

  // Destroyed bottom-up: HTTP and gRPC first (no handler runs afterwards),
  // then the engine loop, then what it uses.
  std::unique_ptr<Metrics> metrics_;
  ApiKeys keys_;
  RequestIds ids_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<engine::Scheduler> scheduler_;
  std::unique_ptr<TextGenerationService> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<OpenAiService> openai_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
};

}  // namespace h3::server

#endif  // H3_SERVER_SERVER_H_
