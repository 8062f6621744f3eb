#include "server/metrics.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/build_info.h"
#include "server/metric_builders.h"
#include "server/thread_stack.h"

namespace h3::server {
namespace {

using prometheus::Histogram;

Histogram& NewHistogram(prometheus::Registry& registry, const std::string& name,
                        const std::string& help,
                        const Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram()
      .Name(name)
      .Help(help)
      .Register(registry)
      .Add({}, buckets);
}

void RegisterBuildInfo(prometheus::Registry& registry) {
  const BuildInfo& info = GetBuildInfo();
  prometheus::BuildGauge()
      .Name("h3_build_info")
      .Help("Always 1; the labels describe the running h3serve build")
      .Register(registry)
      .Add({{"version", info.version},
            {"git_commit", info.git_commit},
            {"cuda", info.cuda_enabled ? info.cuda_version : "none"}})
      .Set(1);
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  NewGauge(registry, "h3_start_time_seconds",
           "Start time of the h3serve process since the Unix epoch")
      .Set(now);
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("h3_requests_total")
                    .Help("Generation requests ended, by finish reason "
                          "(length, stop, eos, cancelled, deadline, error)")
                    .Register(*registry_)),
      rejected_(prometheus::BuildCounter()
                    .Name("h3_requests_rejected_total")
                    .Help("Requests refused before running, by front end "
                          "(grpc, http) and canonical status code")
                    .Register(*registry_)),
      unauthenticated_(prometheus::BuildCounter()
                           .Name("h3_unauthenticated_requests_total")
                           .Help("Requests refused for want of a valid API "
                                 "key, by front end and reason (missing, "
                                 "malformed, unknown_key)")
                           .Register(*registry_)),
      http_responses_(prometheus::BuildCounter()
                          .Name("h3_http_responses_total")
                          .Help("Responses of the OpenAI-compatible HTTP API, "
                                "by route and HTTP status code")
                          .Register(*registry_)),
      prompt_tokens_(NewCounter(*registry_, "h3_prompt_tokens_total",
                                "Prompt tokens prefilled")),
      generation_tokens_(NewCounter(*registry_, "h3_generation_tokens_total",
                                    "Tokens generated")),
      iterations_(NewCounter(*registry_, "h3_engine_iterations_total",
                             "Iterations of the engine loop")),
      time_to_first_token_(NewHistogram(
          *registry_, "h3_time_to_first_token_seconds",
          "From a request's arrival to its first generated token",
          {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60})),
      inter_token_(NewHistogram(
          *registry_, "h3_inter_token_latency_seconds",
          "Between consecutive generated tokens of a request",
          {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5})),
      request_duration_(NewHistogram(
          *registry_, "h3_request_duration_seconds",
          "From a request's arrival to its end",
          {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300})),
      queue_time_(
          NewHistogram(*registry_, "h3_queue_time_seconds",
                       "From a request's arrival to getting a slot",
                       {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60})),
      prefill_batch_tokens_(
          NewHistogram(*registry_, "h3_prefill_batch_tokens",
                       "Prompt tokens prefilled per engine iteration",
                       {1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096})),
      prefill_batch_sequences_(
          NewHistogram(*registry_, "h3_prefill_batch_sequences",
                       "Sequences given a prompt chunk per engine iteration",
                       {1, 2, 4, 8, 16, 32, 64})),
      decode_batch_(NewHistogram(*registry_, "h3_decode_batch_size",
                                 "Sequences per batched decode step",
                                 {1, 2, 4, 8, 16, 32, 64, 128, 256})),
      step_seconds_(NewHistogram(
          *registry_, "h3_engine_step_seconds",
          "Per engine iteration with a step: the step's forward, sampling "
          "and wait for its tokens",
          {0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
           1})),
      host_seconds_(NewHistogram(
          *registry_, "h3_engine_host_seconds",
          "Per engine iteration: the loop's own time around the step "
          "(admission, planning, handing out tokens), the device idle",
          {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
           0.005, 0.01})),
      running_(NewGauge(*registry_, "h3_requests_running",
                        "Requests holding a slot")),
      waiting_(NewGauge(*registry_, "h3_requests_waiting",
                        "Requests waiting for a slot")),
      slots_used_(
          NewGauge(*registry_, "h3_slots_used", "Sequence slots in use")),
      slots_free_(NewGauge(*registry_, "h3_slots_free", "Sequence slots free")),
      prefix_cache_(*registry_) {
  RegisterBuildInfo(*registry_);
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& host,
                                                        int port) {
  std::unique_ptr<Metrics> metrics(new Metrics());
  if (port < 0) return metrics;
  const std::string address = absl::StrCat(host, ":", port);
  // civetweb's 100 KiB worker stacks lose the static TLS (thread_stack.h);
  // refuse rather than let a scrape overflow one.
  constexpr std::size_t kTlsCivetwebTolerates = 16 * 1024;
  if (!ThreadStacksCoverTls() && StaticTlsBytes() > kTlsCivetwebTolerates) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot serve metrics: this binary's libraries hold ", StaticTlsBytes(),
        " bytes of static TLS and it was linked without ",
        "server/thread_stack.cc's pthread_attr_setstacksize, so civetweb's ",
        "workers would overflow their stacks"));
  }
  try {  // prometheus-cpp (civetweb) reports a failed bind by throwing
    // civetweb holds a worker per connection until its request arrives or
    // the request timeout passes: enough workers and a short timeout keep
    // a few idle connections from blinding the scrape (docs/security.md).
    metrics->exposer_ =
        std::make_unique<prometheus::Exposer>(std::vector<std::string>{
            "listening_ports", address, "num_threads",
            absl::StrCat(kMetricsThreads), "request_timeout_ms",
            absl::StrCat(kMetricsRequestTimeoutMs), "enable_keep_alive", "no"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address, ": ", e.what(),
        " (is the port in use? choose another with --metrics-port)"));
  }
  auto ports = metrics->exposer_->GetListeningPorts();
  metrics->port_ = ports.empty() ? port : ports.front();
  metrics->exposer_->RegisterCollectable(metrics->registry_);
  return metrics;
}

void Metrics::SetSlots(int slots) {
  slots_free_.Set(slots);
  slots_used_.Set(0);
}

void Metrics::OnRejected(const std::string& protocol,
                         const absl::Status& status) {
  rejected_
      .Add({{"protocol", protocol},
            {"code",
             absl::AsciiStrToLower(absl::StatusCodeToString(status.code()))}})
      .Increment();
}

void Metrics::OnUnauthenticated(const std::string& protocol,
                                AuthFailure failure) {
  OnRejected(protocol, absl::UnauthenticatedError(""));
  unauthenticated_
      .Add({{"protocol", protocol},
            {"reason", std::string(AuthFailureName(failure))}})
      .Increment();
}

void Metrics::OnHttpResponse(const std::string& route, int status) {
  http_responses_.Add({{"route", route}, {"code", absl::StrCat(status)}})
      .Increment();
}

void Metrics::OnIteration(const engine::IterationReport& r) {
  iterations_.Increment();
  prompt_tokens_.Increment(static_cast<double>(r.prefill_tokens));
  generation_tokens_.Increment(static_cast<double>(r.generated_tokens));
  if (r.prefill_sequences > 0) {
    prefill_batch_tokens_.Observe(static_cast<double>(r.prefill_tokens));
    prefill_batch_sequences_.Observe(r.prefill_sequences);
  }
  if (r.decode_batch > 0) decode_batch_.Observe(r.decode_batch);
  if (r.step_seconds > 0) step_seconds_.Observe(r.step_seconds);
  host_seconds_.Observe(std::max(0.0, r.iteration_seconds - r.step_seconds));
  for (double s : r.inter_token_seconds) inter_token_.Observe(s);
  running_.Set(r.running);
  waiting_.Set(r.waiting);
  slots_used_.Set(r.running);
  slots_free_.Set(r.free_slots);
  prefix_cache_.Update(r.prefix_cache);
}

void Metrics::OnFinish(engine::FinishReason reason, const engine::Usage& u) {
  requests_.Add({{"finish_reason", engine::FinishReasonName(reason)}})
      .Increment();
  queue_time_.Observe(u.queue_seconds);
  request_duration_.Observe(u.total_seconds);
  if (u.generated_tokens > 0)
    time_to_first_token_.Observe(u.first_token_seconds);
}

}  // namespace h3::server
