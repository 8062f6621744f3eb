#ifndef H3_CLIENTS_H3_BENCH_REPORT_H_
#define H3_CLIENTS_H3_BENCH_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "clients/h3/bench_result.h"
#include "nlohmann/json.hpp"

namespace h3::cli {

// The statistics of `h3 bench`: pure functions of what a run recorded, with
// the definitions of vLLM's serving benchmark.

// The q-th percentile (q in [0, 100]) of `sorted`, interpolating linearly
// between the two nearest ranks (NumPy's default).
// REQUIRES: `sorted` is non-empty and sorted ascending.
double Percentile(const std::vector<double>& sorted, double q);

// The summary of a sample; every field 0 when it is empty.
struct Distribution {
  int64_t count = 0;
  double mean = 0;
  double stddev = 0;  // population standard deviation
  double min = 0;
  double median = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};
Distribution Summarize(std::vector<double> values);

// The most output tokens of successful requests that arrived within any
// 1-second interval [t, t + 1) of the run (a sliding window), counted per
// streamed message by its arrival; in tokens per second.
double PeakOutputThroughput(const std::vector<RequestRecord>& requests);

// The largest number of requests in flight at once (sent, not yet ended).
int64_t PeakConcurrency(const std::vector<RequestRecord>& requests);

// The report of a run. Token counts, throughputs and latencies cover the
// successful requests only.
struct BenchMetrics {
  int64_t requests = 0;   // in the data set
  int64_t succeeded = 0;  // ended OK
  int64_t failed = 0;     // ended with a gRPC error
  int64_t stopped = 0;    // cancelled in flight when the run stopped early
  int64_t not_sent = 0;   // never sent because the run stopped early
  std::map<std::string, int64_t> failures_by_code;  // "UNAVAILABLE" -> n
  std::map<std::string, int64_t> finish_reasons;    // "length" -> n
  std::string stopped_by;  // "", "interrupted" or "time limit"

  double duration_s = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  int64_t cached_input_tokens = 0;
  double request_throughput = 0;      // succeeded / duration, per second
  double output_throughput = 0;       // output tokens / duration
  double total_token_throughput = 0;  // (input + output tokens) / duration
  double peak_output_throughput = 0;  // PeakOutputThroughput
  int64_t peak_concurrency = 0;       // PeakConcurrency

  // Milliseconds. TTFT: send to the first token. TPOT: per request,
  // (e2e - ttft) / (output tokens - 1), for requests of 2 or more tokens.
  // ITL: the gaps between successive token-carrying messages of a request,
  // all requests pooled. E2EL: send to the end of the call.
  Distribution ttft_ms;
  Distribution tpot_ms;
  Distribution itl_ms;
  Distribution e2el_ms;

  double client_cpu_s = 0;  // the client process's CPU time during the run
};

BenchMetrics ComputeMetrics(const RunRecord& run);

// The human-readable table that `h3 bench` prints at the end.
std::string FormatTable(const BenchMetrics& metrics);

// Every number of `metrics`, for --json.
nlohmann::ordered_json MetricsJson(const BenchMetrics& metrics);

// One object per request: outcome, code, times and token counts (not the
// per-message arrival times).
nlohmann::ordered_json RequestsJson(const RunRecord& run);

// A progress bar of `width` columns for the terminal, e.g.
// "[#######.............]  35/100 done, 2 failed, 8 in flight, 12.3 s".
std::string ProgressLine(int64_t done, int64_t failed, int64_t in_flight,
                         int64_t total, double elapsed_s, int width);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_BENCH_REPORT_H_
