#ifndef H3_SERVER_CACHE_METRICS_H_
#define H3_SERVER_CACHE_METRICS_H_

#include "engine/prefix_cache.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace h3::server {

// The prefix cache's metrics: h3_prefix_cache_queries_total,
// _hit_tokens_total, _evictions_total (counters), _snapshots and _bytes
// (gauges), _max_bytes (gauge). Fed the cache's running totals once per
// engine iteration; the counters move by the difference. Called from the
// engine loop's thread only.
class PrefixCacheMetrics {
 public:
  explicit PrefixCacheMetrics(prometheus::Registry& registry);
  void Update(const engine::PrefixCacheStats& stats);

 private:
  prometheus::Counter& queries_;
  prometheus::Counter& hit_tokens_;
  prometheus::Counter& evictions_;
  prometheus::Gauge& snapshots_;
  prometheus::Gauge& bytes_;
  prometheus::Gauge& max_bytes_;
  engine::PrefixCacheStats last_;
};

}  // namespace h3::server

#endif  // H3_SERVER_CACHE_METRICS_H_
