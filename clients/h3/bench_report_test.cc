#include "clients/h3/bench_report.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace h3::cli {
namespace {

using Outcome = RequestRecord::Outcome;
using ::testing::HasSubstr;

RequestRecord Succeeded(double start, std::vector<double> chunk_times,
                        std::vector<int32_t> chunk_tokens, double end,
                        int64_t input) {
  RequestRecord r;
  r.outcome = Outcome::kSucceeded;
  r.start_s = start;
  r.chunk_times_s = std::move(chunk_times);
  r.chunk_tokens = std::move(chunk_tokens);
  r.end_s = end;
  r.input_tokens = input;
  r.finish_reason = "length";
  return r;
}

TEST(PercentileTest, InterpolatesLinearlyBetweenRanks) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
}

TEST(SummarizeTest, EmptyIsAllZero) {
  const Distribution d = Summarize({});
  EXPECT_EQ(d.count, 0);
  EXPECT_EQ(d.mean, 0);
  EXPECT_EQ(d.p99, 0);
}

TEST(SummarizeTest, OneToAHundred) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  const Distribution d = Summarize(v);
  EXPECT_EQ(d.count, 100);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_NEAR(d.stddev, std::sqrt((100.0 * 100.0 - 1) / 12), 1e-9);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.median, 50.5);
  EXPECT_NEAR(d.p90, 90.1, 1e-9);
  EXPECT_NEAR(d.p99, 99.01, 1e-9);
  EXPECT_DOUBLE_EQ(d.max, 100);
}

TEST(ComputeMetricsTest, DefinitionsOfVllm) {
  RunRecord run;
  run.duration_s = 2;
  run.client_cpu_s = 0.25;
  // TTFT 100 ms; ITL 100 and 200 ms; 4 tokens in 500 ms: TPOT 400 / 3 ms.
  run.requests.push_back(Succeeded(0, {0.1, 0.2, 0.4}, {1, 1, 2}, 0.5, 10));
  // TTFT 200 ms, one token: no TPOT, no ITL.
  run.requests.push_back(Succeeded(1, {1.2}, {1}, 1.3, 6));
  RequestRecord failed;
  failed.outcome = Outcome::kFailed;
  failed.error_code = "RESOURCE_EXHAUSTED";
  failed.start_s = 0.1;
  failed.end_s = 0.15;
  run.requests.push_back(failed);
  RequestRecord stopped;
  stopped.outcome = Outcome::kStopped;
  stopped.start_s = 1.5;
  stopped.end_s = 2;
  run.requests.push_back(stopped);
  run.requests.push_back(RequestRecord());  // not sent
  run.stopped_by = "interrupted";

  const BenchMetrics m = ComputeMetrics(run);
  EXPECT_EQ(m.requests, 5);
  EXPECT_EQ(m.succeeded, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.stopped, 1);
  EXPECT_EQ(m.not_sent, 1);
  EXPECT_EQ(m.failures_by_code.at("RESOURCE_EXHAUSTED"), 1);
  EXPECT_EQ(m.finish_reasons.at("length"), 2);
  EXPECT_EQ(m.total_input_tokens, 16);
  EXPECT_EQ(m.total_output_tokens, 5);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1);
  EXPECT_DOUBLE_EQ(m.output_throughput, 2.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 10.5);
  EXPECT_DOUBLE_EQ(m.client_cpu_s, 0.25);

  EXPECT_EQ(m.ttft_ms.count, 2);
  EXPECT_NEAR(m.ttft_ms.mean, 150, 1e-9);
  EXPECT_EQ(m.tpot_ms.count, 1);
  EXPECT_NEAR(m.tpot_ms.mean, 400.0 / 3, 1e-9);
  EXPECT_EQ(m.itl_ms.count, 2);
  EXPECT_NEAR(m.itl_ms.min, 100, 1e-9);
  EXPECT_NEAR(m.itl_ms.max, 200, 1e-9);
  EXPECT_EQ(m.e2el_ms.count, 2);
  EXPECT_NEAR(m.e2el_ms.mean, 400, 1e-9);
  // [0.1, 1.1) holds 4 tokens; [0.4, 1.4) 3.
  EXPECT_DOUBLE_EQ(m.peak_output_throughput, 4);
  // [0, 0.5] overlaps [0.1, 0.15]; [1, 1.3] and [1.5, 2] overlap nothing.
  EXPECT_EQ(m.peak_concurrency, 2);
}

TEST(PeakOutputThroughputTest, CountsSuccessfulTokensInTheBusiestSecond) {
  std::vector<RequestRecord> requests = {
      Succeeded(0, {0.5, 1.1, 1.2, 2.1}, {1, 3, 3, 1}, 2.2, 1),
      Succeeded(0, {1.5}, {2}, 2, 1)};
  RequestRecord failed = Succeeded(0, {1.5}, {100}, 2, 1);
  failed.outcome = Outcome::kFailed;
  requests.push_back(failed);
  // [1.1, 2.1): 3 + 3 + 2; the token at 2.1 is outside.
  EXPECT_DOUBLE_EQ(PeakOutputThroughput(requests), 8);
  EXPECT_DOUBLE_EQ(PeakOutputThroughput({}), 0);
}

TEST(PeakOutputThroughputTest, TheWindowSlides) {
  // Whole seconds [0, 1) and [1, 2) would hold 5 each.
  EXPECT_DOUBLE_EQ(
      PeakOutputThroughput({Succeeded(0, {0.9, 1.1}, {5, 5}, 1.2, 1)}), 10);
}

TEST(PeakConcurrencyTest, AnEndAndAStartAtOnceDoNotOverlap) {
  RequestRecord a = Succeeded(0, {}, {}, 1, 1);
  RequestRecord b = Succeeded(0.5, {}, {}, 2, 1);
  RequestRecord c = Succeeded(1, {}, {}, 3, 1);
  EXPECT_EQ(PeakConcurrency({a, b, c}), 2);
  EXPECT_EQ(PeakConcurrency({a, b, c, RequestRecord()}), 2);
  EXPECT_EQ(PeakConcurrency({}), 0);
}

TEST(FormatTableTest, NamesFailuresByCodeAndTheEarlyStop) {
  RunRecord run;
  run.duration_s = 1;
  run.requests.push_back(Succeeded(0, {0.1}, {1}, 0.2, 3));
  RequestRecord failed;
  failed.outcome = Outcome::kFailed;
  failed.error_code = "UNAVAILABLE";
  run.requests.push_back(failed);
  run.stopped_by = "time limit";
  const std::string table = FormatTable(ComputeMetrics(run));
  EXPECT_THAT(table, HasSubstr("Successful requests:"));
  EXPECT_THAT(table, HasSubstr("UNAVAILABLE:"));
  EXPECT_THAT(table, HasSubstr("time limit"));
  EXPECT_THAT(table, HasSubstr("Output token throughput (tok/s):"));
  EXPECT_THAT(table, HasSubstr("TTFT"));
}

TEST(MetricsJsonTest, HoldsEveryNumber) {
  RunRecord run;
  run.duration_s = 1;
  run.requests.push_back(Succeeded(0, {0.1, 0.3}, {1, 1}, 0.4, 3));
  const nlohmann::ordered_json json = MetricsJson(ComputeMetrics(run));
  EXPECT_EQ(json["requests"]["succeeded"], 1);
  EXPECT_EQ(json["total_output_tokens"], 2);
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"}) {
    for (const char* stat :
         {"count", "mean", "std", "min", "median", "p90", "p99", "max"}) {
      EXPECT_TRUE(json[key].contains(stat)) << key << "." << stat;
    }
  }
  const nlohmann::ordered_json requests = RequestsJson(run);
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["outcome"], "succeeded");
  EXPECT_EQ(requests[0]["output_tokens"], 2);
  EXPECT_NEAR(requests[0]["ttft_s"].get<double>(), 0.1, 1e-12);
}

TEST(ProgressLineTest, FillsInProportion) {
  EXPECT_EQ(ProgressLine(5, 1, 2, 10, 3.26, 10),
            "[#####.....]  5/10 done, 1 failed, 2 in flight, 3.3 s");
  EXPECT_EQ(ProgressLine(0, 0, 0, 0, 0, 4),
            "[....] 0/0 done, 0 failed, 0 in flight, 0.0 s");
}

}  // namespace
}  // namespace h3::cli
