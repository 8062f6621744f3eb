#include "server/server.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"

namespace h3::server {

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const ServerOptions& options) {
  std::unique_ptr<Server> server(new Server());
  if (options.metrics_port >= 0) {
    auto metrics = Metrics::Start(options.host, options.metrics_port);
    if (!metrics.ok()) return metrics.status();
    server->metrics_ = *std::move(metrics);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  server->service_ = std::make_unique<TextGenerationService>();

  const std::string address = absl::StrCat(options.host, ":", options.port);
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which lets a second h3serve silently
  // share the port; a port in use must be an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", address,
                     " (is the port in use? choose another with --port)"));
  }

  // No model is loaded: say so to load balancers and probes.
  grpc::HealthCheckServiceInterface* health =
      server->grpc_server_->GetHealthCheckService();
  health->SetServingStatus("", false);
  health->SetServingStatus(v1::TextGeneration::service_full_name(), false);
  return server;
}

Server::~Server() {
  if (grpc_server_ == nullptr) return;  // Start failed part-way
  Shutdown(std::chrono::milliseconds(0));
  Wait();
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  service_->SetDraining();
  // gRPC marks every health status NOT_SERVING and makes Shutdown idempotent.
  grpc_server_->Shutdown(std::chrono::system_clock::now() + grace);
}

void Server::Wait() { grpc_server_->Wait(); }

}  // namespace h3::server
