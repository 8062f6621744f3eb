#include "server/server.h"

#include <filesystem>
#include <iostream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "engine/runner.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "loader/model_file.h"
#include "models/default_model.h"
#include "server/openai_response.h"
#include "tokenizer/load.h"

namespace h3::server {

absl::Status Server::LoadModel(const ServerOptions& options,
                               ServedModel* served) {
  H3_ASSIGN_OR_RETURN(std::unique_ptr<loader::ModelFile> file,
                      options.model_path.empty()
                          ? models::OpenDefaultModel()
                          : loader::ModelFile::Open(options.model_path));
  if (!file->tokenizer_kind().empty()) {
    H3_ASSIGN_OR_RETURN(tokenizer_, tokenizer::LoadEmbeddedTokenizer(*file));
  }
  H3_ASSIGN_OR_RETURN(std::unique_ptr<engine::Backend> backend,
                      engine::MakeBackend(options.backend));
  H3_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::Model> model,
      engine::Model::Load(*file, std::move(backend),
                          {.prefill_chunk = options.prefill_chunk}));
  served->config = model->config();
  served->device = model->backend().name();
  engine::SchedulerOptions scheduler = options.scheduler;
  scheduler.observer = metrics_.get();
  if (scheduler.step_tokens == 0) {
    scheduler.step_tokens =
        engine::DefaultStepTokens(model->backend(), options.slots);
  }
  engine::PrefixCacheOptions cache = options.prefix_cache;
  if (options.backend.batch_invariant && served->device != "cpu") {
    // Batch invariance end to end: prompts cut at fixed positions, and no
    // states restored from another request's cuts or decode steps
    // (docs/cuda-engine.md, "Batch invariance"). The CPU needs neither.
    scheduler.fixed_chunk_tokens = scheduler.step_tokens - options.slots;
    if (scheduler.fixed_chunk_tokens < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--batch-invariant cuts prompts into chunks of --prefill-tokens (",
          scheduler.step_tokens, ") less --slots (", options.slots,
          ") tokens: raise --prefill-tokens"));
    }
    cache.max_bytes = 0;
    cache.memory_fraction = 0;
  }
  // The activations are sized for the scheduler's step budget.
  H3_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::Runner> runner,
      engine::Runner::Create(
          std::move(model), {.slots = options.slots,
                             .max_sequence_length = options.max_sequence_length,
                             .max_step_tokens = scheduler.step_tokens,
                             .prefix_cache = cache}));
  if (options.warm_up) {
    H3_RETURN_IF_ERROR(
        Annotate(runner->WarmUp().status(), "warming up the engine"));
    // The server serves all the same, slower: say so once.
    if (const absl::Status& e = runner->capture_error(); !e.ok()) {
      std::cerr << "h3serve: warning: a decode step's CUDA graph could not "
                   "be captured, so its steps run op by op: "
                << e.message() << std::endl;
    }
  }
  H3_ASSIGN_OR_RETURN(
      scheduler_, engine::Scheduler::Create(std::move(runner), tokenizer_.get(),
                                            scheduler));
  metrics_->SetSlots(options.slots);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const ServerOptions& options) {
  if (options.max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max new tokens is ", options.max_new_tokens, "; it must be >= 1"));
  }
  std::unique_ptr<Server> server(new Server());
  H3_ASSIGN_OR_RETURN(
      server->metrics_,
      Metrics::Start(
          options.metrics_host.empty() ? options.host : options.metrics_host,
          options.metrics_port));
  server->keys_ = options.api_keys;
  ServedModel served;
  served.ids = &server->ids_;
  served.keys = &server->keys_;
  if (!options.model_path.empty() || options.default_model) {
    const bool embedded = options.model_path.empty();
    H3_RETURN_IF_ERROR(Annotate(
        server->LoadModel(options, &served),
        absl::StrCat("cannot serve ", embedded ? "the default model h3-kjv"
                                               : options.model_path)));
    served.scheduler = server->scheduler_.get();
    served.tokenizer = server->tokenizer_.get();
    served.limits = {
        .max_sequence_length = options.max_sequence_length,
        .max_new_tokens = options.max_new_tokens,
        .max_prompt_bytes =
            options.max_prompt_bytes > 0
                ? options.max_prompt_bytes
                : DefaultMaxPromptBytes(options.max_sequence_length)};
    served.name = options.model_name;
    if (served.name.empty()) {
      served.name =
          embedded ? std::string(models::kDefaultModelName)
                   : std::filesystem::path(options.model_path).stem().string();
    }
  }

  if (options.http.port >= 0) {
    server->openai_ =
        std::make_unique<OpenAiService>(served, server->metrics_.get());
    HttpOptions http = options.http;
    http.host = options.host;
    Metrics* metrics = server->metrics_.get();
    OpenAiService* openai = server->openai_.get();
    H3_ASSIGN_OR_RETURN(
        server->http_,
        HttpServer::Start(
            http, server->openai_->Routes(),
            [](const HttpError& error) { return ErrorJson(error); },
            // The one check of every HTTP request before its body is read.
            [openai](const httplib::Request& request) {
              return openai->Admit(request);
            },
            [metrics](const std::string& route, int status) {
              metrics->OnHttpResponse(route, status);
            }));
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  server->service_ = std::make_unique<TextGenerationService>(
      std::move(served), server->metrics_.get());

  const std::string address = absl::StrCat(options.host, ":", options.port);
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which lets a second h3serve silently
  // share the port; a port in use must be an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  ApplyGrpcLimits(options.grpc, &builder);
  H3_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      GrpcServerCredentials(options.grpc));
  builder.AddListeningPort(address, credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", address,
                     " (is the port in use? choose another with --port)"));
  }
  // Each service name must be set once; later calls of SetServingStatus(bool)
  // change them all.
  grpc::HealthCheckServiceInterface* health =
      server->grpc_server_->GetHealthCheckService();
  health->SetServingStatus("", server->model_loaded());
  health->SetServingStatus(v1::TextGeneration::service_full_name(),
                           server->model_loaded());
  return server;
}

Server::~Server() {
  if (grpc_server_ == nullptr) return;  // Start failed part-way
  Shutdown(std::chrono::milliseconds(0));
  Wait();
}

void Server::BeginDrain() {
  grpc_server_->GetHealthCheckService()->SetServingStatus(false);
  service_->SetDraining();
  if (openai_ != nullptr) openai_->SetDraining();
}

bool Server::Drain(std::chrono::milliseconds timeout) {
  BeginDrain();
  if (scheduler_ == nullptr) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const engine::Scheduler::Stats stats = scheduler_->stats();
    if (stats.running == 0 && stats.waiting == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  service_->SetDraining();
  if (openai_ != nullptr) openai_->SetDraining();
  // Both wait up to `grace` for what is in flight; HTTP's Shutdown, like
  // gRPC's, is idempotent, and gRPC marks every health status NOT_SERVING.
  std::thread http;
  if (http_ != nullptr)
    http = std::thread([this, grace] { http_->Shutdown(grace); });
  grpc_server_->Shutdown(std::chrono::system_clock::now() + grace);
  if (http.joinable()) http.join();
}

void Server::Wait() { grpc_server_->Wait(); }

}  // namespace h3::server
