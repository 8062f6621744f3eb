#include "clients/h3/bench_report.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"

namespace h3::cli {
namespace {

using Outcome = RequestRecord::Outcome;

std::string OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kNotSent:
      return "not_sent";
    case Outcome::kStopped:
      return "stopped";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kSucceeded:
      return "succeeded";
  }
  return "unknown";
}

nlohmann::ordered_json DistributionJson(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean},     {"std", d.stddev},
          {"min", d.min},     {"median", d.median}, {"p90", d.p90},
          {"p99", d.p99},     {"max", d.max}};
}

double PerSecond(double count, double seconds) {
  return seconds > 0 ? count / seconds : 0;
}

}  // namespace

double Percentile(const std::vector<double>& sorted, double q) {
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  if (below + 1 >= sorted.size()) return sorted.back();
  const double fraction = rank - static_cast<double>(below);
  return sorted[below] + (sorted[below + 1] - sorted[below]) * fraction;
}

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int64_t>(values.size());
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / static_cast<double>(d.count);
  double squares = 0;
  for (double v : values) squares += (v - d.mean) * (v - d.mean);
  d.stddev = std::sqrt(squares / static_cast<double>(d.count));
  d.min = values.front();
  d.median = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  d.max = values.back();
  return d;
}

double PeakOutputThroughput(const std::vector<RequestRecord>& requests) {
  // (arrival, tokens) of every message; the busiest interval starts at one.
  std::vector<std::pair<double, int64_t>> messages;
  for (const RequestRecord& r : requests) {
    if (r.outcome != Outcome::kSucceeded) continue;
    for (size_t i = 0; i < r.chunk_times_s.size(); ++i) {
      messages.emplace_back(r.chunk_times_s[i], r.chunk_tokens[i]);
    }
  }
  std::sort(messages.begin(), messages.end());
  int64_t in_window = 0;  // tokens of messages [begin, end)
  int64_t peak = 0;
  size_t end = 0;
  for (size_t begin = 0; begin < messages.size(); ++begin) {
    while (end < messages.size() &&
           messages[end].first < messages[begin].first + 1.0) {
      in_window += messages[end++].second;
    }
    peak = std::max(peak, in_window);
    in_window -= messages[begin].second;
  }
  return static_cast<double>(peak);
}

int64_t PeakConcurrency(const std::vector<RequestRecord>& requests) {
  // (time, +1 at a start or -1 at an end); at equal times ends come first.
  std::vector<std::pair<double, int>> events;
  for (const RequestRecord& r : requests) {
    if (r.outcome == Outcome::kNotSent) continue;
    events.emplace_back(r.start_s, +1);
    events.emplace_back(r.end_s, -1);
  }
  std::sort(events.begin(), events.end());
  int64_t now = 0;
  int64_t peak = 0;
  for (const auto& [time, delta] : events) {
    now += delta;
    peak = std::max(peak, now);
  }
  return peak;
}

BenchMetrics ComputeMetrics(const RunRecord& run) {
  BenchMetrics m;
  m.requests = static_cast<int64_t>(run.requests.size());
  m.stopped_by = run.stopped_by;
  m.duration_s = run.duration_s;
  m.client_cpu_s = run.client_cpu_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestRecord& r : run.requests) {
    switch (r.outcome) {
      case Outcome::kNotSent:
        ++m.not_sent;
        continue;
      case Outcome::kStopped:
        ++m.stopped;
        continue;
      case Outcome::kFailed:
        ++m.failed;
        ++m.failures_by_code[r.error_code];
        continue;
      case Outcome::kSucceeded:
        ++m.succeeded;
        break;
    }
    if (!r.finish_reason.empty()) ++m.finish_reasons[r.finish_reason];
    const int64_t output = r.output_tokens();
    m.total_input_tokens += std::max<int64_t>(r.input_tokens, 0);
    m.total_output_tokens += output;
    m.cached_input_tokens += r.cached_input_tokens;
    const double latency = r.end_s - r.start_s;
    e2el.push_back(latency * 1e3);
    if (r.chunk_times_s.empty()) continue;
    const double first = r.chunk_times_s.front() - r.start_s;
    ttft.push_back(first * 1e3);
    if (output > 1) {
      tpot.push_back((latency - first) / static_cast<double>(output - 1) * 1e3);
    }
    for (size_t i = 1; i < r.chunk_times_s.size(); ++i) {
      itl.push_back((r.chunk_times_s[i] - r.chunk_times_s[i - 1]) * 1e3);
    }
  }
  m.request_throughput =
      PerSecond(static_cast<double>(m.succeeded), m.duration_s);
  m.output_throughput =
      PerSecond(static_cast<double>(m.total_output_tokens), m.duration_s);
  m.total_token_throughput = PerSecond(
      static_cast<double>(m.total_input_tokens + m.total_output_tokens),
      m.duration_s);
  m.peak_output_throughput = PeakOutputThroughput(run.requests);
  m.peak_concurrency = PeakConcurrency(run.requests);
  m.ttft_ms = Summarize(std::move(ttft));
  m.tpot_ms = Summarize(std::move(tpot));
  m.itl_ms = Summarize(std::move(itl));
  m.e2el_ms = Summarize(std::move(e2el));
  return m;
}

std::string FormatTable(const BenchMetrics& m) {
  std::string out = "============ h3 bench ============\n";
  auto line = [&out](const std::string& name, const std::string& value) {
    absl::StrAppendFormat(&out, "%-38s %12s\n", name, value);
  };
  auto count = [](int64_t n) { return absl::StrFormat("%d", n); };
  auto rate = [](double x) { return absl::StrFormat("%.2f", x); };
  line("Successful requests:", count(m.succeeded));
  line("Failed requests:", count(m.failed));
  for (const auto& [code, n] : m.failures_by_code) {
    line("  " + code + ":", count(n));
  }
  if (!m.stopped_by.empty()) {
    out += "Stopped early (" + m.stopped_by + "):\n";
    line("  cancelled in flight:", count(m.stopped));
    line("  not sent:", count(m.not_sent));
  }
  line("Benchmark duration (s):", rate(m.duration_s));
  line("Total input tokens:", count(m.total_input_tokens));
  if (m.cached_input_tokens > 0) {
    line("  of which from the prefix cache:", count(m.cached_input_tokens));
  }
  line("Total generated tokens:", count(m.total_output_tokens));
  line("Request throughput (req/s):", rate(m.request_throughput));
  line("Output token throughput (tok/s):", rate(m.output_throughput));
  line("Peak output token throughput (tok/s):", rate(m.peak_output_throughput));
  line("Peak concurrent requests:", count(m.peak_concurrency));
  line("Total token throughput (tok/s):", rate(m.total_token_throughput));
  line("Client CPU time (s):", rate(m.client_cpu_s));
  absl::StrAppendFormat(&out, "%-10s %10s %10s %10s %10s\n", "(ms)", "mean",
                        "median", "p90", "p99");
  auto latency = [&out](const char* name, const Distribution& d) {
    absl::StrAppendFormat(&out, "%-10s %10.2f %10.2f %10.2f %10.2f\n", name,
                          d.mean, d.median, d.p90, d.p99);
  };
  latency("TTFT", m.ttft_ms);
  latency("TPOT", m.tpot_ms);
  latency("ITL", m.itl_ms);
  latency("E2E", m.e2el_ms);
  out += "==================================\n";
  return out;
}

nlohmann::ordered_json MetricsJson(const BenchMetrics& m) {
  return {{"requests",
           {{"total", m.requests},
            {"succeeded", m.succeeded},
            {"failed", m.failed},
            {"stopped", m.stopped},
            {"not_sent", m.not_sent},
            {"failures_by_code", m.failures_by_code},
            {"finish_reasons", m.finish_reasons}}},
          {"stopped_by", m.stopped_by},
          {"duration_s", m.duration_s},
          {"total_input_tokens", m.total_input_tokens},
          {"total_output_tokens", m.total_output_tokens},
          {"cached_input_tokens", m.cached_input_tokens},
          {"request_throughput", m.request_throughput},
          {"output_throughput", m.output_throughput},
          {"total_token_throughput", m.total_token_throughput},
          {"peak_output_throughput", m.peak_output_throughput},
          {"peak_concurrency", m.peak_concurrency},
          {"ttft_ms", DistributionJson(m.ttft_ms)},
          {"tpot_ms", DistributionJson(m.tpot_ms)},
          {"itl_ms", DistributionJson(m.itl_ms)},
          {"e2el_ms", DistributionJson(m.e2el_ms)},
          {"client_cpu_s", m.client_cpu_s}};
}

nlohmann::ordered_json RequestsJson(const RunRecord& run) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const RequestRecord& r : run.requests) {
    nlohmann::ordered_json one = {{"outcome", OutcomeName(r.outcome)}};
    if (r.outcome == Outcome::kFailed) one["code"] = r.error_code;
    if (r.outcome != Outcome::kNotSent) {
      one["start_s"] = r.start_s;
      one["end_s"] = r.end_s;
      one["ttft_s"] =
          r.chunk_times_s.empty()
              ? nlohmann::ordered_json(nullptr)
              : nlohmann::ordered_json(r.chunk_times_s.front() - r.start_s);
      one["input_tokens"] = r.input_tokens;
      one["cached_input_tokens"] = r.cached_input_tokens;
      one["output_tokens"] = r.output_tokens();
      one["messages"] = r.chunk_times_s.size();
      one["finish_reason"] = r.finish_reason;
    }
    out.push_back(std::move(one));
  }
  return out;
}

std::string ProgressLine(int64_t done, int64_t failed, int64_t in_flight,
                         int64_t total, double elapsed_s, int width) {
  const int64_t filled =
      total > 0 ? std::min<int64_t>(width, done * width / total) : 0;
  return absl::StrFormat("[%s%s] %*d/%d done, %d failed, %d in flight, %.1f s",
                         std::string(filled, '#'),
                         std::string(width - filled, '.'),
                         static_cast<int>(std::to_string(total).size()), done,
                         total, failed, in_flight, elapsed_s);
}

}  // namespace h3::cli
