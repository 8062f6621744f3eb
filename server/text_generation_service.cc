#include "server/text_generation_service.h"

#include "base/build_info.h"

namespace h3::server {

TextGenerationService::TextGenerationService()
    : start_(std::chrono::steady_clock::now()) {}

grpc::Status TextGenerationService::GetServerInfo(
    grpc::ServerContext* context, const v1::GetServerInfoRequest* request,
    v1::ServerInfo* response) {
  const BuildInfo& info = GetBuildInfo();
  response->set_version(info.version);
  response->set_git_commit(info.git_commit);
  response->set_cuda_enabled(info.cuda_enabled);
  response->set_uptime_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count());
  response->set_model_loaded(false);
  response->set_draining(draining_.load());
  return grpc::Status::OK;
}

}  // namespace h3::server
