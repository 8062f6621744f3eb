#include "server/metrics.h"

#include <chrono>
#include <exception>

#include "absl/strings/str_cat.h"
#include "base/build_info.h"
#include "prometheus/gauge.h"

namespace h3::server {

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& host,
                                                        int port) {
  std::unique_ptr<Metrics> metrics(new Metrics());
  metrics->registry_ = std::make_shared<prometheus::Registry>();
  const std::string address = absl::StrCat(host, ":", port);
  try {  // prometheus-cpp (civetweb) reports a failed bind by throwing
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address, ": ", e.what(),
        " (is the port in use? choose another with --metrics-port)"));
  }
  auto ports = metrics->exposer_->GetListeningPorts();
  metrics->port_ = ports.empty() ? port : ports.front();

  const BuildInfo& info = GetBuildInfo();
  prometheus::BuildGauge()
      .Name("h3_build_info")
      .Help("Always 1; the labels describe the running h3serve build")
      .Register(*metrics->registry_)
      .Add({{"version", info.version},
            {"git_commit", info.git_commit},
            {"cuda", info.cuda_enabled ? info.cuda_version : "none"}})
      .Set(1);
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  prometheus::BuildGauge()
      .Name("h3_start_time_seconds")
      .Help("Start time of the h3serve process since the Unix epoch")
      .Register(*metrics->registry_)
      .Add({})
      .Set(now);

  metrics->exposer_->RegisterCollectable(metrics->registry_);
  return metrics;
}

}  // namespace h3::server
