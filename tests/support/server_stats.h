#ifndef H3_TESTS_SUPPORT_SERVER_STATS_H_
#define H3_TESTS_SUPPORT_SERVER_STATS_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace h3::testing {

// The number of entries of /proc/<pid>/task (threads) and /proc/<pid>/fd
// (open files and sockets) of a running process; -1 when it cannot be read.
int CountThreads(pid_t pid);
int CountOpenFiles(pid_t pid);

// The threads of a running process by name (/proc/<pid>/task/*/comm, which
// Linux cuts to 15 characters); empty when it cannot be read.
std::map<std::string, int> ThreadsByName(pid_t pid);

// "" when no thread name has more threads in `after` than in `before`, else
// the names that grew. gRPC's own pools (its executor, its EventEngine,
// its timer manager: "grpc_global_timer", cut to "grpc_global_tim") start
// threads on demand and keep some, up to a bound set by the number of
// cores: they may grow up to twice the hardware threads. (The timer
// manager's 2 -> 3 failed the soak test once, in a fresh-clone CI run on
// a busy machine, 2026-11-27.)
std::string ThreadGrowth(const std::map<std::string, int>& before,
                         const std::map<std::string, int>& after);

// GETs http://127.0.0.1:<port>/metrics; "" when that fails.
std::string ScrapeMetrics(int port);

// The value of the Prometheus sample `sample` in `text`, the exposition
// format: `sample` is the metric name with its labels exactly as exposed,
// e.g. `h3_requests_running` or `h3_requests_total{finish_reason="length"}`.
// nullopt when no such sample is there.
std::optional<double> MetricValue(const std::string& text,
                                  const std::string& sample);

// The load gauges of an h3serve's /metrics; -1 where one is missing.
struct LoadGauges {
  double running = -1;     // h3_requests_running
  double waiting = -1;     // h3_requests_waiting
  double slots_used = -1;  // h3_slots_used
  double slots_free = -1;  // h3_slots_free
  // Nothing running or waiting, every one of `slots` free.
  bool IdleWith(int slots) const;
  std::string ToString() const;
};
LoadGauges ReadLoadGauges(const std::string& metrics);

// Scrapes http://127.0.0.1:<port>/metrics until its gauges are idle with
// `slots` slots or `timeout` passes; returns the last gauges read.
LoadGauges WaitForIdleGauges(int port, int slots,
                             std::chrono::milliseconds timeout);

// The metrics port an h3serve announced in `output` (its line "listening:
// ... metrics=http://HOST:PORT/metrics"); -1 when it announced none.
int MetricsPortOf(const std::string& output);

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_SERVER_STATS_H_
