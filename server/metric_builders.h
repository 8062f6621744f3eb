#ifndef H3_SERVER_METRIC_BUILDERS_H_
#define H3_SERVER_METRIC_BUILDERS_H_

// One unlabelled counter or gauge registered under `name` (the server's
// metrics.cc and cache_metrics.cc).

#include <string>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace h3::server {

inline prometheus::Counter& NewCounter(prometheus::Registry& registry,
                                       const std::string& name,
                                       const std::string& help) {
  return prometheus::BuildCounter()
      .Name(name)
      .Help(help)
      .Register(registry)
      .Add({});
}

inline prometheus::Gauge& NewGauge(prometheus::Registry& registry,
                                   const std::string& name,
                                   const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(
      {});
}

}  // namespace h3::server

#endif  // H3_SERVER_METRIC_BUILDERS_H_
