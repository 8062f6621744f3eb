#ifndef H3_SERVER_METRICS_H_
#define H3_SERVER_METRICS_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/scheduler/observer.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/api_keys.h"
#include "server/cache_metrics.h"

namespace h3::server {

// h3serve's Prometheus metrics (names with the h3_ prefix, units in the
// names, as Prometheus' conventions say) and, optionally, the HTTP endpoint
// serving them at /metrics. It observes the engine loop: requests by finish
// reason, token counters, latency histograms (time to first token,
// inter-token, end to end, queue), batch sizes and the load gauges, for
// every request whichever front end (gRPC, HTTP) sent it; the front ends add
// refused requests (labelled by protocol) and the HTTP API its responses by
// route and status. Thread-safe.
// The /metrics endpoint's civetweb workers (each holds one connection) and
// how long a connection may take to send its request.
inline constexpr int kMetricsThreads = 8;
inline constexpr int kMetricsRequestTimeoutMs = 5000;

class Metrics : public engine::SchedulerObserver {
 public:
  // Listens on "host:port" (0 picks a free port; see port()); port -1 keeps
  // the metrics without an endpoint.
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const std::string& host,
                                                        int port);

  // The port actually listened on; -1 without an endpoint.
  int port() const { return port_; }
  prometheus::Registry& registry() { return *registry_; }

  // The slot pool's size, for the slot gauges before the first iteration.
  void SetSlots(int slots);
  // A generation request refused before it reached the engine loop, by the
  // front end `protocol` ("grpc" or "http"), counted under the canonical
  // code of `status` in lower case, e.g. "invalid_argument", the same for
  // both protocols.
  void OnRejected(const std::string& protocol, const absl::Status& status);
  // A request of `protocol` refused for want of a valid API key: counted in
  // h3_requests_rejected_total{code="unauthenticated"} and by `failure` in
  // h3_unauthenticated_requests_total{protocol, reason}.
  void OnUnauthenticated(const std::string& protocol, AuthFailure failure);
  // An HTTP response of the OpenAI-compatible API: `route` is one of the
  // server's routes (a fixed set, or "other"), `status` the HTTP status.
  void OnHttpResponse(const std::string& route, int status);

  void OnIteration(const engine::IterationReport& report) override;
  void OnFinish(engine::FinishReason reason,
                const engine::Usage& usage) override;

 private:
  Metrics();

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = -1;

  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Family<prometheus::Counter>& unauthenticated_;
  prometheus::Family<prometheus::Counter>& http_responses_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generation_tokens_;
  prometheus::Counter& iterations_;
  prometheus::Histogram& time_to_first_token_;
  prometheus::Histogram& inter_token_;
  prometheus::Histogram& request_duration_;
  prometheus::Histogram& queue_time_;
  prometheus::Histogram& prefill_batch_tokens_;
  prometheus::Histogram& prefill_batch_sequences_;
  prometheus::Histogram& decode_batch_;
  prometheus::Histogram& step_seconds_;
  prometheus::Histogram& host_seconds_;
  prometheus::Gauge& running_;
  prometheus::Gauge& waiting_;
  prometheus::Gauge& slots_used_;
  prometheus::Gauge& slots_free_;
  PrefixCacheMetrics prefix_cache_;
};

}  // namespace h3::server

#endif  // H3_SERVER_METRICS_H_
