// The load generator of `h3 bench` against a real h3serve in-process on
// loopback, serving a small random model: counts add up, percentiles are
// ordered, a rate-limited run lasts as long as its arrivals, the
// concurrency limit holds, failures are counted, and a stopped run reports
// what finished. Nothing here asserts speed.
#include "clients/h3/bench_runner.h"

#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "clients/h3/bench_openai.h"
#include "clients/h3/bench_report.h"
#include "gtest/gtest.h"
#include "server/testing/test_server.h"

namespace h3::cli {
namespace {

using Outcome = RequestRecord::Outcome;
using server::testing::ChannelTo;
using server::testing::LoopbackOptions;
using server::testing::StartServer;

constexpr double kAtOnce = std::numeric_limits<double>::infinity();

class BenchRunnerTest : public ::testing::Test {
 protected:
  void Start(const server::ServerOptions& options) {
    server_ = StartServer(options);
    ASSERT_NE(server_, nullptr);
    stub_ = v1::TextGeneration::NewStub(ChannelTo(*server_));
    grpc::ClientContext context;
    v1::ModelInfo model;
    ASSERT_TRUE(
        stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &model).ok());
    const v1::TokenizerInfo& t = model.tokenizer();
    absl::StatusOr<TokenPool> pool =
        TokenPool::Create(t.vocab_size(), {t.eos_token_id(), t.bos_token_id()});
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::make_unique<TokenPool>(*pool);
  }

  std::vector<BenchPrompt> Prompts(int n, int32_t input_len, int32_t output_len,
                                   double ratio = 0) {
    RandomPromptOptions options;
    options.num_prompts = n;
    options.input_len = input_len;
    options.output_len = output_len;
    options.range_ratio = ratio;
    std::mt19937_64 rng(n);
    return RandomPrompts(options, *pool_, rng);
  }

  RunRecord Run(const LoadOptions& load, const std::vector<BenchPrompt>& p,
                double rate = kAtOnce, uint64_t seed = 0) {
    BenchRunner runner(stub_.get(), load);
    return runner.Run(p, ArrivalTimes(p.size(), rate, 1, seed));
  }

  // The same through the server's OpenAI-compatible HTTP API.
  static server::ServerOptions WithHttp(server::ServerOptions options) {
    options.http.port = 0;
    return options;
  }
  std::unique_ptr<OpenAiBenchBackend> HttpBackend() {
    return std::make_unique<OpenAiBenchBackend>(
        HttpEndpoint{"127.0.0.1", server_->http_port()}, "");
  }
  RunRecord RunHttp(const LoadOptions& load,
                    const std::vector<BenchPrompt>& p) {
    std::unique_ptr<OpenAiBenchBackend> backend = HttpBackend();
    BenchRunner runner(backend.get(), load);
    return runner.Run(p, ArrivalTimes(p.size(), kAtOnce, 1, 0));
  }

  std::unique_ptr<server::Server> server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
  std::unique_ptr<TokenPool> pool_;
};

TEST_F(BenchRunnerTest, CountsAddUp) {
  Start(LoopbackOptions());
  const std::vector<BenchPrompt> prompts = Prompts(12, 16, 6, 0.5);
  LoadOptions load;
  load.max_concurrency = 4;
  const RunRecord run = Run(load, prompts);
  ASSERT_EQ(run.requests.size(), prompts.size());
  int64_t input = 0;
  int64_t output = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestRecord& r = run.requests[i];
    ASSERT_EQ(r.outcome, Outcome::kSucceeded) << i << " " << r.error_code;
    EXPECT_EQ(r.input_tokens, static_cast<int64_t>(prompts[i].ids.size()));
    EXPECT_EQ(r.output_tokens(), prompts[i].output_len);
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_LE(r.start_s, r.chunk_times_s.front());
    EXPECT_LE(r.chunk_times_s.back(), r.end_s);
    input += r.input_tokens;
    output += r.output_tokens();
  }
  const BenchMetrics m = ComputeMetrics(run);
  EXPECT_EQ(m.succeeded, 12);
  EXPECT_EQ(m.failed + m.stopped + m.not_sent, 0);
  EXPECT_EQ(m.total_input_tokens, input);
  EXPECT_EQ(m.total_output_tokens, output);
  EXPECT_EQ(m.ttft_ms.count, 12);
  EXPECT_EQ(m.e2el_ms.count, 12);
  EXPECT_GT(m.duration_s, 0);
  EXPECT_GT(m.output_throughput, 0);
  EXPECT_LE(m.peak_concurrency, 4);
  EXPECT_TRUE(m.stopped_by.empty());
}

TEST_F(BenchRunnerTest, PercentilesAreOrdered) {
  Start(LoopbackOptions());
  LoadOptions load;
  load.max_concurrency = 8;
  const BenchMetrics m = ComputeMetrics(Run(load, Prompts(24, 32, 8, 0.5)));
  ASSERT_EQ(m.succeeded, 24);
  for (const Distribution& d : {m.ttft_ms, m.tpot_ms, m.itl_ms, m.e2el_ms}) {
    EXPECT_GT(d.count, 0);
    EXPECT_LE(d.min, d.median);
    EXPECT_LE(d.median, d.p90);
    EXPECT_LE(d.p90, d.p99);
    EXPECT_LE(d.p99, d.max);
    EXPECT_LE(d.min, d.mean);
    EXPECT_LE(d.mean, d.max);
  }
  EXPECT_LE(m.ttft_ms.max, m.e2el_ms.max);
}

TEST_F(BenchRunnerTest, ARateLimitedRunLastsAsLongAsItsArrivals) {
  Start(LoopbackOptions());
  const std::vector<BenchPrompt> prompts = Prompts(15, 8, 2);
  const std::vector<double> arrivals = ArrivalTimes(15, 20, 1, 3);
  const RunRecord run = Run(LoadOptions(), prompts, 20, 3);
  ASSERT_EQ(ComputeMetrics(run).succeeded, 15);
  for (size_t i = 0; i < prompts.size(); ++i) {
    // Not before its arrival (the clock's start is the first send).
    EXPECT_GE(run.requests[i].start_s, arrivals[i] - 1e-3) << i;
  }
  EXPECT_GE(run.duration_s, arrivals.back());
  // Generous: the last request's own time, on a loaded machine.
  EXPECT_LT(run.duration_s, arrivals.back() + 30);
}

TEST_F(BenchRunnerTest, TheConcurrencyLimitHolds) {
  Start(LoopbackOptions());
  LoadOptions load;
  load.max_concurrency = 2;
  const RunRecord run = Run(load, Prompts(10, 8, 4));
  EXPECT_EQ(ComputeMetrics(run).succeeded, 10);
  EXPECT_LE(PeakConcurrency(run.requests), 2);
}

TEST_F(BenchRunnerTest, FailuresAreCountedByCode) {
  server::ServerOptions options = LoopbackOptions();
  options.slots = 1;
  options.scheduler.max_waiting = 1;
  options.max_sequence_length = 4096;
  options.max_new_tokens = 4000;
  Start(options);
  // All at once into one slot and a waiting queue of one: while the first
  // request's 2000 tokens take far longer than sending six, at most two are
  // taken and the others are refused.
  const RunRecord run = Run(LoadOptions(), Prompts(6, 8, 2000));
  const BenchMetrics m = ComputeMetrics(run);
  EXPECT_EQ(m.succeeded + m.failed, 6);
  EXPECT_GE(m.succeeded, 1);
  EXPECT_GE(m.failed, 1);
  EXPECT_EQ(m.failures_by_code.size(), 1u);
  EXPECT_EQ(m.failures_by_code.count("RESOURCE_EXHAUSTED"), 1u);
  EXPECT_EQ(m.total_output_tokens, m.succeeded * 2000);
}

TEST_F(BenchRunnerTest, StopCancelsInFlightAndLeavesTheRestUnsent) {
  Start(LoopbackOptions());
  LoadOptions load;
  load.max_concurrency = 1;
  BenchRunner runner(stub_.get(), load);
  const std::vector<BenchPrompt> prompts = Prompts(5, 8, 400);
  // The first progress report comes while the first request runs and the
  // second waits for its place.
  const RunRecord run =
      runner.Run(prompts, ArrivalTimes(5, kAtOnce, 1, 0),
                 [&runner](const Progress&) { runner.Stop("interrupted"); });
  const BenchMetrics m = ComputeMetrics(run);
  EXPECT_EQ(m.stopped_by, "interrupted");
  EXPECT_EQ(m.not_sent, 4);
  EXPECT_EQ(m.succeeded + m.stopped, 1);
  EXPECT_EQ(m.failed, 0);
  // Later runs of a stopped runner send nothing.
  EXPECT_EQ(
      ComputeMetrics(runner.Run(prompts, std::vector<double>(5, 0.0))).not_sent,
      5);
}

TEST_F(BenchRunnerTest, TheTimeLimitStopsTheRun) {
  Start(LoopbackOptions());
  LoadOptions load;
  load.max_concurrency = 1;
  load.time_limit_s = 0.2;
  // One at a time, 5000 requests would take far longer than 0.2 s.
  const RunRecord run = Run(load, Prompts(5000, 4, 1));
  const BenchMetrics m = ComputeMetrics(run);
  EXPECT_EQ(m.stopped_by, "time limit");
  EXPECT_GT(m.not_sent, 0);
  EXPECT_EQ(m.failed, 0);
  EXPECT_EQ(m.succeeded + m.stopped + m.not_sent, 5000);
  EXPECT_GE(run.duration_s, 0.2);
}

TEST_F(BenchRunnerTest, OpenAiBackendCountsLikeGrpc) {
  Start(WithHttp(LoopbackOptions()));
  const std::vector<BenchPrompt> prompts = Prompts(8, 16, 6, 0.5);
  LoadOptions load;
  load.max_concurrency = 4;
  const RunRecord run = RunHttp(load, prompts);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestRecord& r = run.requests[i];
    ASSERT_EQ(r.outcome, Outcome::kSucceeded) << i << " " << r.error_code;
    EXPECT_EQ(r.input_tokens, static_cast<int64_t>(prompts[i].ids.size()));
    EXPECT_EQ(r.output_tokens(), prompts[i].output_len);
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_LE(r.start_s, r.chunk_times_s.front());
    EXPECT_LE(r.chunk_times_s.back(), r.end_s);
  }
  const BenchMetrics m = ComputeMetrics(run);
  EXPECT_EQ(m.succeeded, 8);
  EXPECT_LE(m.peak_concurrency, 4);
}

TEST_F(BenchRunnerTest, OpenAiBackendCountsFailuresByHttpStatus) {
  server::ServerOptions options = WithHttp(LoopbackOptions());
  options.slots = 1;
  options.scheduler.max_waiting = 1;
  options.max_sequence_length = 4096;
  options.max_new_tokens = 4000;
  Start(options);
  const BenchMetrics m =
      ComputeMetrics(RunHttp(LoadOptions(), Prompts(6, 8, 2000)));
  EXPECT_EQ(m.succeeded + m.failed, 6);
  EXPECT_GE(m.failed, 1);
  EXPECT_EQ(m.failures_by_code.count("HTTP_429"), 1u);
}

TEST_F(BenchRunnerTest, OpenAiBackendStopCancelsInFlight) {
  Start(WithHttp(LoopbackOptions()));
  std::unique_ptr<OpenAiBenchBackend> backend = HttpBackend();
  LoadOptions load;
  load.max_concurrency = 1;
  BenchRunner runner(backend.get(), load);
  const RunRecord run =
      runner.Run(Prompts(3, 8, 400), ArrivalTimes(3, kAtOnce, 1, 0),
                 [&runner](const Progress&) { runner.Stop("interrupted"); });
  const BenchMetrics m = ComputeMetrics(run);
  EXPECT_EQ(m.not_sent, 2);
  EXPECT_EQ(m.succeeded + m.stopped, 1);
  EXPECT_EQ(m.failed, 0);
}

TEST(BaseUrlTest, HostPortAndPath) {
  const absl::StatusOr<HttpEndpoint> e =
      ParseBaseUrl("http://127.0.0.2:8080/v1");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "127.0.0.2");
  EXPECT_EQ(e->port, 8080);
  EXPECT_EQ(ParseBaseUrl("http://localhost")->port, 80);
  EXPECT_FALSE(ParseBaseUrl("https://localhost:8443").ok());
  EXPECT_FALSE(ParseBaseUrl("http://host:99999").ok());
}

}  // namespace
}  // namespace h3::cli
