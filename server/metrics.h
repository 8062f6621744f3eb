#ifndef H3_SERVER_METRICS_H_
#define H3_SERVER_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace h3::server {

// The Prometheus endpoint: an HTTP server of its own serving /metrics.
// Metric names follow Prometheus conventions with the h3_ prefix. Today it
// exports h3_build_info and h3_start_time_seconds; request, token and latency
// metrics arrive with the engine loop. Thread-safe.
class Metrics {
 public:
  // Listens on "host:port"; port 0 picks a free one (see port()).
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const std::string& host,
                                                        int port);

  // The port actually listened on.
  int port() const { return port_; }
  prometheus::Registry& registry() { return *registry_; }

 private:
  Metrics() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace h3::server

#endif  // H3_SERVER_METRICS_H_
