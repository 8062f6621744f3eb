#include "server/text_generation_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/build_info.h"
#include "base/status_macros.h"
#include "loader/dtype.h"
#include "server/relay.h"
#include "server/status.h"

namespace h3::server {
namespace {

grpc::Status NoModel() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "no model is loaded (start h3serve with --model)");
}

grpc::Status NoTokenizer() {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "the served model has no tokenizer (embed one with "
                      "`h3 convert --tokenizer`); use token ids");
}

// The call's gRPC deadline on the engine's clock; nullopt when it has none.
std::optional<engine::SteadyTime> Deadline(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  const auto now = std::chrono::system_clock::now();
  // Calls without a deadline report one at the end of time.
  if (deadline - now > std::chrono::hours(24 * 365)) return std::nullopt;
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             deadline - now);
}

}  // namespace

TextGenerationService::TextGenerationService(ServedModel model,
                                             Metrics* metrics)
    : model_(std::move(model)),
      metrics_(metrics),
      start_(std::chrono::steady_clock::now()) {}

void TextGenerationService::SetDraining() {
  draining_.store(true);
  if (model_.scheduler != nullptr) model_.scheduler->Drain();
}

grpc::Status TextGenerationService::Refuse(const absl::Status& status) {
  metrics_->OnRejected("grpc", status);
  return ToGrpcStatus(status);
}

absl::StatusOr<std::string> TextGenerationService::Caller(
    const grpc::ServerContext& context) {
  if (model_.keys == nullptr || model_.keys->empty()) return std::string();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const absl::string_view authorization =
      it == metadata.end()
          ? absl::string_view()
          : absl::string_view(it->second.data(), it->second.size());
  AuthFailure failure;
  absl::StatusOr<std::string> name =
      model_.keys->Authenticate(authorization, &failure);
  if (!name.ok()) metrics_->OnUnauthenticated("grpc", failure);
  return name;
}

grpc::Status TextGenerationService::Admit(
    const grpc::ServerContext& context, const v1::GenerateRequest& request,
    std::unique_ptr<RequestIds::Held>* held) {
  absl::StatusOr<std::string> caller = Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (model_.scheduler == nullptr) return NoModel();
  if (absl::Status id = CheckRequestId(request.request_id()); !id.ok()) {
    return Refuse(id);
  }
  absl::StatusOr<std::unique_ptr<RequestIds::Held>> h =
      model_.ids->Hold(*caller, request.request_id(), "h3-",
                       [&context] { return context.IsCancelled(); });
  if (!h.ok()) return Refuse(h.status());
  *held = *std::move(h);
  return grpc::Status::OK;
}

grpc::Status TextGenerationService::Run(
    grpc::ServerContext* context, const v1::GenerateRequest& request,
    const RequestIds::Held& held,
    const std::function<bool(const engine::Delta&)>& sink) {
  if (draining_.load()) {
    return Refuse(absl::UnavailableError("the server is shutting down"));
  }
  absl::StatusOr<engine::GenerationRequest> r = ToGenerationRequest(
      request, held.engine_id(), model_.limits, tokenizer());
  if (!r.ok()) return Refuse(r.status());
  r->deadline = Deadline(*context);
  absl::StatusOr<std::unique_ptr<engine::RequestOutput>> output =
      model_.scheduler->Submit(*std::move(r));
  if (!output.ok()) return Refuse(output.status());

  engine::FinishReason finish = engine::FinishReason::kNone;
  const absl::Status relayed = Relay(
      **output, [context] { return context->IsCancelled(); },
      [&](const engine::Delta& delta) {
        finish = delta.finish;
        return sink(delta);
      });
  // The engine's deadline is the call's: it ends as gRPC ends a call past
  // its deadline, whether the engine or gRPC's timer saw it first.
  if (relayed.ok() && finish == engine::FinishReason::kDeadline) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the call's deadline passed");
  }
  if (relayed.ok()) return grpc::Status::OK;
  if (relayed.code() == absl::StatusCode::kCancelled) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        context->IsCancelled() ? "the call was cancelled"
                                               : "the client went away");
  }
  return ToGrpcStatus(relayed);
}

grpc::Status TextGenerationService::Generate(
    grpc::ServerContext* context, const v1::GenerateRequest* request,
    grpc::ServerWriter<v1::GenerateResponse>* writer) {
  std::unique_ptr<RequestIds::Held> held;
  if (grpc::Status admitted = Admit(*context, *request, &held);
      !admitted.ok()) {
    return admitted;
  }
  return Run(context, *request, *held, [&](const engine::Delta& delta) {
    v1::GenerateResponse response;
    response.set_request_id(held->id());
    AppendDelta(delta, tokenizer(), &response);
    return writer->Write(response);
  });
}

grpc::Status TextGenerationService::Complete(grpc::ServerContext* context,
                                             const v1::GenerateRequest* request,
                                             v1::GenerateResponse* response) {
  std::unique_ptr<RequestIds::Held> held;
  if (grpc::Status admitted = Admit(*context, *request, &held);
      !admitted.ok()) {
    return admitted;
  }
  response->set_request_id(held->id());
  return Run(context, *request, *held, [&](const engine::Delta& delta) {
    AppendDelta(delta, tokenizer(), response);
    return true;
  });
}

grpc::Status TextGenerationService::Tokenize(grpc::ServerContext* context,
                                             const v1::TokenizeRequest* request,
                                             v1::TokenizeResponse* response) {
  if (absl::StatusOr<std::string> caller = Caller(*context); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  if (model_.scheduler == nullptr) return NoModel();
  const tokenizer::Tokenizer* t = tokenizer();
  if (t == nullptr) return NoTokenizer();
  if (absl::Status size = CheckTextBytes("text", request->text(),
                                         model_.limits.max_prompt_bytes);
      !size.ok()) {
    return ToGrpcStatus(size);
  }
  absl::StatusOr<std::vector<int32_t>> ids = t->Encode(request->text());
  if (!ids.ok()) return ToGrpcStatus(Annotate(ids.status(), "text"));
  if (request->add_bos() && t->bos_id() >= 0) {
    ids->insert(ids->begin(), t->bos_id());
  }
  for (int32_t id : *ids) {
    response->add_token_ids(id);
    absl::StatusOr<std::string> piece = t->TokenText(id);
    response->add_pieces(piece.ok() ? *std::move(piece) : std::string());
  }
  return grpc::Status::OK;
}

grpc::Status TextGenerationService::Detokenize(
    grpc::ServerContext* context, const v1::DetokenizeRequest* request,
    v1::DetokenizeResponse* response) {
  if (absl::StatusOr<std::string> caller = Caller(*context); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  if (model_.scheduler == nullptr) return NoModel();
  const tokenizer::Tokenizer* t = tokenizer();
  if (t == nullptr) return NoTokenizer();
  std::vector<int32_t> ids;
  for (int32_t id : request->token_ids()) {
    const bool special = id == t->eos_id() || id == t->bos_id();
    if (!(request->skip_special_tokens() && special)) ids.push_back(id);
  }
  absl::StatusOr<std::string> text = t->Decode(ids);
  if (!text.ok()) return ToGrpcStatus(Annotate(text.status(), "token_ids"));
  response->set_text(*std::move(text));
  return grpc::Status::OK;
}

grpc::Status TextGenerationService::GetModelInfo(
    grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
    v1::ModelInfo* response) {
  if (absl::StatusOr<std::string> caller = Caller(*context); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  if (model_.scheduler == nullptr) return NoModel();
  engine::Scheduler& scheduler = *model_.scheduler;
  const loader::ModelConfig& c = model_.config;
  response->set_name(model_.name);
  v1::ModelConfig* config = response->mutable_config();
  config->set_d_model(c.d_model);
  config->set_n_layer(c.n_layer);
  config->set_padded_vocab_size(c.padded_vocab_size);
  for (int64_t layer : c.attn_layer_idx) config->add_attention_layers(layer);
  config->set_n_attention_heads(c.n_heads);
  config->set_rotary_dim(c.rotary_dim);
  config->set_d_state(c.d_state);
  config->set_h3_head_dim(c.head_dim);
  v1::TokenizerInfo* tok = response->mutable_tokenizer();
  if (const tokenizer::Tokenizer* t = tokenizer(); t != nullptr) {
    tok->set_kind(std::string(t->kind()));
    tok->set_vocab_size(t->vocab_size());
    tok->set_eos_token_id(t->eos_id());
    tok->set_bos_token_id(t->bos_id());
  } else {
    tok->set_vocab_size(c.vocab_size);
    tok->set_eos_token_id(-1);
    tok->set_bos_token_id(-1);
  }
  v1::ServingLimits* limits = response->mutable_limits();
  limits->set_max_sequence_length(model_.limits.max_sequence_length);
  limits->set_max_new_tokens(model_.limits.max_new_tokens);
  limits->set_max_running_requests(scheduler.slots());
  limits->set_max_waiting_requests(scheduler.options().max_waiting);
  response->set_dtype(std::string(loader::DTypeFlag(c.dtype)));
  response->set_device(model_.device);
  return grpc::Status::OK;
}

grpc::Status TextGenerationService::GetServerInfo(
    grpc::ServerContext* context, const v1::GetServerInfoRequest* request,
    v1::ServerInfo* response) {
  if (absl::StatusOr<std::string> caller = Caller(*context); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  const BuildInfo& info = GetBuildInfo();
  response->set_version(info.version);
  response->set_git_commit(info.git_commit);
  response->set_cuda_enabled(info.cuda_enabled);
  response->set_uptime_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count());
  response->set_model_loaded(model_.scheduler != nullptr);
  response->set_draining(draining_.load());
  if (model_.scheduler != nullptr) {
    const engine::Scheduler::Stats stats = model_.scheduler->stats();
    response->set_running_requests(stats.running);
    response->set_waiting_requests(stats.waiting);
    response->set_total_slots(stats.slots);
    response->set_free_slots(stats.free_slots);
    const engine::PrefixCacheStats& cache = stats.prefix_cache;
    v1::PrefixCacheInfo* out = response->mutable_prefix_cache();
    out->set_enabled(cache.max_bytes > 0);
    out->set_max_bytes(cache.max_bytes);
    out->set_bytes(cache.bytes);
    out->set_snapshots(cache.snapshots);
    out->set_interval_tokens(cache.interval);
    out->set_queries(cache.queries);
    out->set_hit_tokens(cache.hit_tokens);
    out->set_evictions(cache.evictions);
  }
  return grpc::Status::OK;
}

grpc::Status TextGenerationService::Abort(grpc::ServerContext* context,
                                          const v1::AbortRequest* request,
                                          v1::AbortResponse* response) {
  absl::StatusOr<std::string> caller = Caller(*context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (request->request_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "request_id is empty");
  }
  if (model_.scheduler == nullptr) return NoModel();
  if (absl::Status id = CheckRequestId(request->request_id()); !id.ok()) {
    return ToGrpcStatus(id);
  }
  // Only the caller's own requests: another scope's ids are not found.
  const std::optional<std::string> engine_id =
      model_.ids->Find(*caller, request->request_id());
  response->set_found(engine_id.has_value() &&
                      model_.scheduler->Abort(*engine_id));
  return grpc::Status::OK;
}

}  // namespace h3::server
