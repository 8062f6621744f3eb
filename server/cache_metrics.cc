#include "server/cache_metrics.h"

#include "server/metric_builders.h"

namespace h3::server {

PrefixCacheMetrics::PrefixCacheMetrics(prometheus::Registry& registry)
    : queries_(NewCounter(registry, "h3_prefix_cache_queries_total",
                          "Requests that looked up their prompt in the prefix "
                          "cache")),
      hit_tokens_(NewCounter(registry, "h3_prefix_cache_hit_tokens_total",
                             "Prompt tokens restored from the prefix cache "
                             "instead of computed")),
      evictions_(NewCounter(registry, "h3_prefix_cache_evictions_total",
                            "Prefix cache snapshots dropped to make room")),
      snapshots_(NewGauge(registry, "h3_prefix_cache_snapshots",
                          "Prefix cache snapshots held")),
      bytes_(NewGauge(registry, "h3_prefix_cache_bytes",
                      "Bytes the prefix cache holds (states and K/V)")),
      max_bytes_(NewGauge(registry, "h3_prefix_cache_max_bytes",
                          "Bytes the prefix cache may hold; 0: off")) {}

void PrefixCacheMetrics::Update(const engine::PrefixCacheStats& s) {
  queries_.Increment(static_cast<double>(s.queries - last_.queries));
  hit_tokens_.Increment(static_cast<double>(s.hit_tokens - last_.hit_tokens));
  evictions_.Increment(static_cast<double>(s.evictions - last_.evictions));
  snapshots_.Set(static_cast<double>(s.snapshots));
  bytes_.Set(static_cast<double>(s.bytes));
  max_bytes_.Set(static_cast<double>(s.max_bytes));
  last_ = s;
}

}  // namespace h3::server
