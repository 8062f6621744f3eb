#ifndef H3_SERVER_SERVER_H_
#define H3_SERVER_SERVER_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "server/metrics.h"
#include "server/text_generation_service.h"

namespace h3::server {

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 50051;         // 0: pick a free port
  int metrics_port = 8000;  // 0: pick a free port; -1: no metrics endpoint
};

// h3serve: the TextGeneration service, the standard grpc.health.v1.Health
// service and server reflection on one gRPC port, and /metrics on another.
//
// Health: the overall status ("") and "h3.v1.TextGeneration" are SERVING only
// while a model is loaded; today no model can be loaded, so both report
// NOT_SERVING. Thread-safe; Shutdown may be called from any thread.
class Server {
 public:
  // Binds both ports and starts serving. Unavailable (naming the address)
  // when a port cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerOptions& options);

  ~Server();

  int port() const { return port_; }
  // -1 when metrics are disabled.
  int metrics_port() const { return metrics_ ? metrics_->port() : -1; }

  // Stops accepting calls, lets calls in flight finish for up to `grace`,
  // then cancels the rest. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

  // Blocks until Shutdown has completed.
  void Wait();

 private:
  Server() = default;

  std::unique_ptr<TextGenerationService> service_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
};

}  // namespace h3::server

#endif  // H3_SERVER_SERVER_H_
