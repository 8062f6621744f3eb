#ifndef H3_CLIENTS_H3_BENCH_RUNNER_H_
#define H3_CLIENTS_H3_BENCH_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "clients/h3/bench_backend.h"
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
  // The run stops after this many seconds (0: no limit), counted from the
  // start of the runner's first run (so that the waves of a multi-turn run
  // share it): nothing more is sent and the calls in flight are cancelled.
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

// The gRPC front end: Generate calls through the asynchronous (callback)
// gRPC API, so that gRPC's threads record each streamed message's arrival
// however many calls are open. A failed call ends with its gRPC code name.
class GrpcBenchBackend final : public BenchBackend {
 public:
  // `stub` must outlive the backend.
  explicit GrpcBenchBackend(v1::TextGeneration::Stub* stub) : stub_(stub) {}
  std::shared_ptr<BenchCall> Start(
      const BenchPrompt& prompt, float temperature, RequestRecord* record,
      Clock::time_point start,
      std::function<void(const CallEnd&)> ended) override;

 private:
  class Call;
  v1::TextGeneration::Stub* stub_;
};

// The load generator of `h3 bench`: sends requests at given arrival times
// through a BenchBackend (gRPC or the HTTP API), from one dispatching
// thread; the backend records each streamed message's arrival on the
// monotonic clock.
//
// Each request asks for exactly its BenchPrompt::output_len tokens
// (min_new_tokens = max_new_tokens, eos ignored). A call that fails is
// recorded with its error code and the run goes on.
//
// Thread-compatible, except Stop, which may be called from any thread.
class BenchRunner {
 public:
  using ProgressFn = std::function<void(const Progress&)>;

  // Over gRPC; `stub` must outlive the runner.
  BenchRunner(v1::TextGeneration::Stub* stub, LoadOptions options);
  // Over `backend`, which must outlive the runner.
  BenchRunner(BenchBackend* backend, LoadOptions options);
  ~BenchRunner();
  BenchRunner(const BenchRunner&) = delete;
  BenchRunner& operator=(const BenchRunner&) = delete;

  // Sends prompts[i] at arrivals[i] seconds after the start (as
  // ArrivalTimes gives them) within the concurrency limit, waits for every
  // call to end, and returns what each one measured (times on the clock of
  // the runner's first run; duration_s is this run's). Calls `progress`, if
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
  using Clock = std::chrono::steady_clock;

  // Called by a call, from any thread, when it has ended.
  void Ended(const CallEnd& end, RequestRecord* record);
  // Waits until `until`, Stop, or a call's end, at most 100 ms; calls
  // `progress` (without the lock) when its time has come.
  void WaitAWhile(Clock::time_point until, const ProgressFn& progress)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Progress ProgressLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the run stopped for `why` (the first reason counts); true if it
  // was not stopped before, and then the calls to cancel (after unlocking).
  bool StopLocked(const std::string& why,
                  std::vector<std::shared_ptr<BenchCall>>* to_cancel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<GrpcBenchBackend> owned_backend_;  // the stub's
  BenchBackend* backend_;
  const LoadOptions options_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // a call ended, or Stop
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::string stopped_by_ ABSL_GUARDED_BY(mu_);
  // The current run's calls, by request index (null: not sent); shared so
  // that a call taken under the lock can be cancelled after releasing it.
  std::vector<std::shared_ptr<BenchCall>> calls_ ABSL_GUARDED_BY(mu_);
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::time_point start_ ABSL_GUARDED_BY(mu_);  // of the current run
  // The start of the first run: the records' clock and the time limit's.
  std::optional<Clock::time_point> origin_ ABSL_GUARDED_BY(mu_);
  Clock::time_point next_progress_ ABSL_GUARDED_BY(mu_);
};

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_BENCH_RUNNER_H_
