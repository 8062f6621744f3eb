#ifndef H3_SERVER_TEXT_GENERATION_SERVICE_H_
#define H3_SERVER_TEXT_GENERATION_SERVICE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "engine/scheduler/scheduler.h"
#include "h3/v1/text_generation.grpc.pb.h"
#include "loader/config.h"
#include "server/api_keys.h"
#include "server/generate_request.h"
#include "server/metrics.h"
#include "server/request_ids.h"

namespace h3::server {

// What the service serves; the Server owns all of it.
struct ServedModel {
  engine::Scheduler* scheduler = nullptr;           // null: no model loaded
  const tokenizer::Tokenizer* tokenizer = nullptr;  // null: token ids only
  std::string name;
  loader::ModelConfig config;
  std::string device;             // the backend's name ("cpu", "cuda:0")
  RequestLimits limits;           // the context, prompt bytes, max_new_tokens
  RequestIds* ids = nullptr;      // the ids in flight, shared by both APIs
  const ApiKeys* keys = nullptr;  // null or empty: no authentication
};

// The h3.v1.TextGeneration service over the engine loop. Generation
// methods submit to the Scheduler and relay the request's RequestOutput
// (which makes the text on the handler's thread); a client that
// cancels, disconnects or passes its deadline ends its request (and frees
// its slot) within one engine iteration. Without a model, the model methods
// answer UNAVAILABLE.
//
// With API keys, every method checks the call's "authorization: Bearer
// <key>" metadata first (UNAUTHENTICATED without a valid key); the key's
// name is the caller's scope for request ids and Abort (RequestIds).
//
// gRPC's synchronous server: each call holds one gRPC thread while it
// waits for the engine. Thread-safe.
class TextGenerationService final : public v1::TextGeneration::Service {
 public:
  // `metrics` must outlive the service.
  TextGenerationService(ServedModel model, Metrics* metrics);

  // From now on generation requests answer UNAVAILABLE; GetServerInfo
  // reports draining.
  void SetDraining();

  grpc::Status Generate(
      grpc::ServerContext* context, const v1::GenerateRequest* request,
      grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Complete(grpc::ServerContext* context,
                        const v1::GenerateRequest* request,
                        v1::GenerateResponse* response) override;
  grpc::Status Tokenize(grpc::ServerContext* context,
                        const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override;
  grpc::Status Detokenize(grpc::ServerContext* context,
                          const v1::DetokenizeRequest* request,
                          v1::DetokenizeResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context,
                            const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override;
  grpc::Status GetServerInfo(grpc::ServerContext* context,
                             const v1::GetServerInfoRequest* request,
                             v1::ServerInfo* response) override;
  grpc::Status Abort(grpc::ServerContext* context,
                     const v1::AbortRequest* request,
                     v1::AbortResponse* response) override;

 private:
  // Submits the request and hands every delta of its stream to `sink`
  // until the final one; false from `sink` (the client is gone) cancels it.
  // `held` is the request's id, held for the call.
  grpc::Status Run(grpc::ServerContext* context,
                   const v1::GenerateRequest& request,
                   const RequestIds::Held& held,
                   const std::function<bool(const engine::Delta&)>& sink);
  // Authenticates the call and holds its request id (a new one when it
  // names none); fills `held` or returns the refusal.
  grpc::Status Admit(const grpc::ServerContext& context,
                     const v1::GenerateRequest& request,
                     std::unique_ptr<RequestIds::Held>* held);
  // The caller's scope: its key's name, or "" without keys. Unauthenticated
  // (counted in the metrics) without a valid key.
  absl::StatusOr<std::string> Caller(const grpc::ServerContext& context);
  // Counts a refusal in the metrics and returns it.
  grpc::Status Refuse(const absl::Status& status);
  const tokenizer::Tokenizer* tokenizer() const { return model_.tokenizer; }

  const ServedModel model_;
  Metrics* const metrics_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<bool> draining_{false};
};

}  // namespace h3::server

#endif  // H3_SERVER_TEXT_GENERATION_SERVICE_H_
