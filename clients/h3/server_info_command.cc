#include "clients/h3/server_info_command.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include "clients/h3/channel.h"
#include "clients/h3/grpc_status.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "h3/v1/text_generation.grpc.pb.h"

namespace h3::cli {
namespace {

struct ServerInfoOptions {
  std::string server = "localhost:50051";
  ChannelFlags channel;
  double timeout_seconds = 5;
  bool json = false;
};

void SetDeadline(grpc::ClientContext& context, double seconds) {
  context.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

int RunServerInfo(const ServerInfoOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> opened =
      OpenChannel(options.server, options.channel);
  if (!opened.ok()) {
    std::cerr << "h3 server-info: " << opened.status().message() << "\n";
    return 2;
  }
  std::shared_ptr<grpc::Channel> channel = *opened;

  v1::ServerInfo info;
  {
    grpc::ClientContext context;
    SetDeadline(context, options.timeout_seconds);
    grpc::Status status = v1::TextGeneration::NewStub(channel)->GetServerInfo(
        &context, v1::GetServerInfoRequest(), &info);
    if (!status.ok()) {
      std::cerr << "h3 server-info: " << options.server << ": "
                << GrpcCodeName(status.error_code()) << ": "
                << status.error_message() << "\n";
      return 1;
    }
  }
  grpc::health::v1::HealthCheckResponse health;
  {
    grpc::ClientContext context;
    SetDeadline(context, options.timeout_seconds);
    grpc::Status status = grpc::health::v1::Health::NewStub(channel)->Check(
        &context, grpc::health::v1::HealthCheckRequest(), &health);
    if (!status.ok()) {
      std::cerr << "h3: health check failed: " << status.error_message()
                << "\n";
      return 1;
    }
  }
  const std::string health_name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
          health.status());
  if (options.json) {
    std::string json;
    google::protobuf::util::JsonPrintOptions print;
    print.always_print_primitive_fields = true;
    print.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(info, &json, print);
    // Splice the health status into the object: {..., "health": "SERVING"}.
    json.insert(json.rfind('}'), ",\"health\":\"" + health_name + "\"");
    std::cout << json << std::endl;
    return 0;
  }
  std::cout << "server:   " << options.server << "\n"
            << "version:  " << info.version() << " (commit "
            << info.git_commit() << ", "
            << (info.cuda_enabled() ? "CUDA" : "no CUDA") << ")\n"
            << "health:   " << health_name << "\n"
            << "model:    " << (info.model_loaded() ? "loaded" : "none") << "\n"
            << "uptime:   " << info.uptime_seconds() << " s\n"
            << "requests: " << info.running_requests() << " running, "
            << info.waiting_requests() << " waiting\n"
            << "slots:    " << info.free_slots() << " free of "
            << info.total_slots() << "\n";
  const h3::v1::PrefixCacheInfo& cache = info.prefix_cache();
  if (cache.enabled()) {
    std::cout << "prefix cache: " << cache.snapshots() << " snapshots, "
              << cache.bytes() << " of " << cache.max_bytes() << " bytes; "
              << cache.hit_tokens() << " prompt tokens restored in "
              << cache.queries() << " requests; " << cache.evictions()
              << " evicted\n";
  } else {
    std::cout << "prefix cache: off\n";
  }
  if (info.draining()) std::cout << "draining: yes\n";
  return 0;
}

}  // namespace

void AddServerInfoCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ServerInfoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "server-info", "Show a running h3serve's version, health and load");
  cmd->add_option("--server", options->server, "h3serve address HOST:PORT")
      ->capture_default_str();
  AddChannelFlags(cmd, &options->channel);
  cmd->add_option("--timeout", options->timeout_seconds, "Seconds to wait")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->callback([options, exit_code] { *exit_code = RunServerInfo(*options); });
}

}  // namespace h3::cli
