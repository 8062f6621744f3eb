#ifndef H3_SERVER_TEXT_GENERATION_SERVICE_H_
#define H3_SERVER_TEXT_GENERATION_SERVICE_H_

#include <atomic>
#include <chrono>

#include "h3/v1/text_generation.grpc.pb.h"

namespace h3::server {

// The h3.v1.TextGeneration service. Until an engine is attached (the loader,
// engine and serving issues), it answers GetServerInfo and leaves every
// generation method to the generated base class, which answers UNIMPLEMENTED.
//
// Thread-safe: gRPC calls the methods from its own threads.
class TextGenerationService final : public v1::TextGeneration::Service {
 public:
  TextGenerationService();

  // Marks the server as shutting down (reported by GetServerInfo).
  void SetDraining() { draining_.store(true); }

  grpc::Status GetServerInfo(grpc::ServerContext* context,
                             const v1::GetServerInfoRequest* request,
                             v1::ServerInfo* response) override;

 private:
  const std::chrono::steady_clock::time_point start_;
  std::atomic<bool> draining_{false};
};

}  // namespace h3::server

#endif  // H3_SERVER_TEXT_GENERATION_SERVICE_H_
