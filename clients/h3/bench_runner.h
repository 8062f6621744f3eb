#ifndef H3_CLIENTS_H3_BENCH_RUNNER_H_
#define H3_CLIENTS_H3_BENCH_RUNNER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "clients/h3/bench_dataset.h"
#include "clients/h3/bench_result.h"
#include "h3/v1/text_generation.grpc.pb.h"

namespace h3::cli {

// When each of `n` requests arrives, in seconds from the start of a run: the
// first at 0, then gaps drawn from a gamma distribution of shape
// `burstiness` and mean 1 / `rate` (a Poisson process when burstiness is 1;
// burstier below 1, more regular above). All 0 when `rate` is infinite.
// Reproducible from `seed`. REQUIRES: rate > 0, burstiness > 0.
std::vector<double> ArrivalTimes(int n, double rate, double burstiness,
                                 uint64_t seed);

struct LoadOptions {
  // Requests in flight at most; 0 means no limit. A request whose arrival
  // time has come waits for a free place; its latencies are timed from its
  // send, not from its arrival.
  int max_concurrency = 0;
  // The run stops after this many seconds (0: no limit): nothing more is
  // sent and the calls in flight are cancelled.
  double time_limit_s = 0;
  // Sampling temperature of every request; 0 is greedy.
  float temperature = 0;
};

// Progress of a run, for a progress bar.
struct Progress {
  int64_t done = 0;  // ended, successfully or not
  int64_t failed = 0;
  int64_t in_flight = 0;
  int64_t total = 0;
  double elapsed_s = 0;
};

// The load generator of `h3 bench`: sends Generate requests at given arrival
// times through the asynchronous (callback) gRPC API, so that one thread
// dispatches and gRPC's threads record each streamed message's arrival on
// the monotonic clock, however many calls are open.
//
// Each request asks for exactly its BenchPrompt::output_len tokens
// (min_new_tokens = max_new_tokens, eos ignored). A call that fails is
// recorded with its gRPC code and the run goes on.
//
// Thread-compatible, except Stop, which may be called from any thread.
class BenchRunner {
 public:
  using ProgressFn = std::function<void(const Progress&)>;

  // `stub` must outlive the runner.
  BenchRunner(v1::TextGeneration::Stub* stub, LoadOptions options);
  ~BenchRunner();
  BenchRunner(const BenchRunner&) = delete;
  BenchRunner& operator=(const BenchRunner&) = delete;

  // Sends prompts[i] at arrivals[i] seconds after the start (as
  // ArrivalTimes gives them) within the concurrency limit, waits for every
  // call to end, and returns what each one measured. Calls `progress`, if
  // set, from this thread about ten times a second and once at the end.
  // REQUIRES: arrivals.size() == prompts.size(), arrivals non-decreasing.
  RunRecord Run(const std::vector<BenchPrompt>& prompts,
                const std::vector<double>& arrivals,
                const ProgressFn& progress = nullptr);

  // Ends the current run, and makes later ones end at once: nothing more is
  // sent, calls in flight are cancelled (and recorded as stopped), and Run
  // returns when they have ended. `why` becomes RunRecord::stopped_by; only
  // the first Stop counts.
  void Stop(const std::string& why);

 private:
  class Call;
  using Clock = std::chrono::steady_clock;

  // Called by a Call from a gRPC thread when it has ended.
  void Ended(const grpc::Status& status, RequestRecord* record);
  // Waits until `until`, Stop, or a call's end, at most 100 ms; calls
  // `progress` when its time has come. Returns with `lock` held.
  void WaitAWhile(std::unique_lock<std::mutex>& lock, Clock::time_point until,
                  const ProgressFn& progress);
  Progress ProgressLocked() const;

  v1::TextGeneration::Stub* stub_;
  const LoadOptions options_;

  std::mutex mu_;
  std::condition_variable changed_;  // a call ended, or Stop
  bool stopped_ = false;             // guarded by mu_
  std::string stopped_by_;           // guarded by mu_
  // The current run's calls, by request index (null: not sent); guarded by
  // mu_, as are the counters.
  std::vector<std::unique_ptr<Call>> calls_;
  int64_t in_flight_ = 0;
  int64_t done_ = 0;
  int64_t failed_ = 0;
  Clock::time_point start_;
  Clock::time_point next_progress_;
};

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_BENCH_RUNNER_H_
