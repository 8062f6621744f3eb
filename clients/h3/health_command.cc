#include "clients/h3/health_command.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include "clients/h3/channel.h"
#include "clients/h3/grpc_status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"

namespace h3::cli {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

struct HealthOptions {
  std::string server = "localhost:50051";
  ChannelFlags channel;
  double timeout_seconds = 5;
  std::string service;
};

int RunHealth(const HealthOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> opened =
      OpenChannel(options.server, options.channel);
  if (!opened.ok()) {
    std::cerr << "h3 health: " << opened.status().message() << "\n";
    return 2;
  }
  std::shared_ptr<grpc::Channel> channel = *opened;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(
                           options.timeout_seconds * 1000)));
  HealthCheckRequest request;
  request.set_service(options.service);
  HealthCheckResponse response;
  const grpc::Status status = grpc::health::v1::Health::NewStub(channel)->Check(
      &context, request, &response);
  const std::string where =
      options.server +
      (options.service.empty() ? "" : " (service " + options.service + ")");
  if (!status.ok()) {
    std::cerr << "h3 health: " << where << ": "
              << GrpcCodeName(status.error_code()) << ": "
              << status.error_message() << "\n";
    return 1;
  }
  const std::string name =
      HealthCheckResponse::ServingStatus_Name(response.status());
  std::cout << name << std::endl;
  if (response.status() == HealthCheckResponse::SERVING) return 0;
  std::cerr << "h3 health: " << where << ": " << name << "\n";
  return 1;
}

}  // namespace

void AddHealthCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<HealthOptions>();
  CLI::App* cmd = app.add_subcommand(
      "health",
      "Ask a server's grpc.health.v1 service; exit 0 only when SERVING");
  cmd->add_option("--server", options->server, "h3serve address HOST:PORT")
      ->capture_default_str();
  AddChannelFlags(cmd, &options->channel);
  cmd->add_option("--timeout", options->timeout_seconds, "Seconds to wait")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--service", options->service,
                  "Service to ask about (\"\": the whole server)");
  cmd->callback([options, exit_code] { *exit_code = RunHealth(*options); });
}

}  // namespace h3::cli
