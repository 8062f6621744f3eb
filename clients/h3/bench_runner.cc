#include "clients/h3/bench_runner.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "clients/h3/grpc_status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"

namespace h3::cli {
namespace {

constexpr auto kProgressInterval = std::chrono::milliseconds(100);

// CPU time (user + system) of the whole process so far.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

v1::GenerateRequest MakeRequest(const BenchPrompt& prompt, float temperature) {
  v1::GenerateRequest request;
  if (prompt.ids.empty()) {
    request.set_text(prompt.text);
  } else {
    request.mutable_token_ids()->mutable_ids()->Add(prompt.ids.begin(),
                                                    prompt.ids.end());
  }
  request.mutable_sampling()->set_temperature(temperature);
  v1::StopConditions& stop = *request.mutable_stop();
  stop.set_min_new_tokens(prompt.output_len);
  stop.set_max_new_tokens(prompt.output_len);
  stop.set_ignore_eos(true);
  return request;
}

}  // namespace

std::vector<double> ArrivalTimes(int n, double rate, double burstiness,
                                 uint64_t seed) {
  std::vector<double> times(n, 0.0);
  if (std::isinf(rate)) return times;
  std::mt19937_64 rng(seed);
  // Shape k and scale theta have mean k * theta = 1 / rate.
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  for (int i = 1; i < n; ++i) times[i] = times[i - 1] + gap(rng);
  return times;
}

// One Generate call: records the arrival of each streamed message on the
// run's clock, and says when the call has ended. Kept alive by the runner;
// gRPC does not touch it after OnDone.
class GrpcBenchBackend::Call final
    : public BenchCall,
      public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  Call(RequestRecord* record, Clock::time_point start,
       std::function<void(const CallEnd&)> ended)
      : record_(record), start_(start), ended_(std::move(ended)) {}

  // Sends the request. REQUIRES: called once.
  void Start(v1::TextGeneration::Stub* stub, v1::GenerateRequest request) {
    request_ = std::move(request);
    if (request_.has_token_ids()) {
      record_->input_tokens = request_.token_ids().ids_size();
    }
    record_->chunk_times_s.reserve(request_.stop().max_new_tokens());
    record_->chunk_tokens.reserve(request_.stop().max_new_tokens());
    record_->output_ids.reserve(request_.stop().max_new_tokens());
    stub->async()->Generate(&context_, &request_, this);
    StartRead(&response_);
    record_->start_s = Now();
    StartCall();
  }

  // Thread-safe; the call ends with CANCELLED unless it has already ended.
  void Cancel() override { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream has ended; OnDone follows
    const double now = Now();
    if (response_.token_ids_size() > 0) {
      record_->chunk_times_s.push_back(now);
      record_->chunk_tokens.push_back(response_.token_ids_size());
      record_->output_ids.insert(record_->output_ids.end(),
                                 response_.token_ids().begin(),
                                 response_.token_ids().end());
    }
    if (response_.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      record_->finish_reason = absl::AsciiStrToLower(absl::StripPrefix(
          v1::FinishReason_Name(response_.finish_reason()), "FINISH_REASON_"));
    }
    if (response_.has_usage()) {
      record_->input_tokens = response_.usage().prompt_tokens();
      record_->cached_input_tokens = response_.usage().cached_prompt_tokens();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    record_->end_s = Now();
    CallEnd end;
    end.ok = status.ok();
    end.cancelled = status.error_code() == grpc::StatusCode::CANCELLED;
    if (!end.ok) end.error_code = GrpcCodeName(status.error_code());
    ended_(end);
  }

 private:
  double Now() const {
    return std::chrono::duration<double>(Clock::now() - start_).count();
  }

  RequestRecord* record_;
  const Clock::time_point start_;
  const std::function<void(const CallEnd&)> ended_;
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
};

std::shared_ptr<BenchCall> GrpcBenchBackend::Start(
    const BenchPrompt& prompt, float temperature, RequestRecord* record,
    Clock::time_point start, std::function<void(const CallEnd&)> ended) {
  auto call = std::make_shared<Call>(record, start, std::move(ended));
  call->Start(stub_, MakeRequest(prompt, temperature));
  return call;
}

BenchRunner::BenchRunner(v1::TextGeneration::Stub* stub, LoadOptions options)
    : owned_backend_(std::make_unique<GrpcBenchBackend>(stub)),
      backend_(owned_backend_.get()),
      options_(options) {}

BenchRunner::BenchRunner(BenchBackend* backend, LoadOptions options)
    : backend_(backend), options_(options) {}

BenchRunner::~BenchRunner() = default;

RunRecord BenchRunner::Run(const std::vector<BenchPrompt>& prompts,
                           const std::vector<double>& arrivals,
                           const ProgressFn& progress) {
  RunRecord run;
  run.requests.resize(prompts.size());
  absl::MutexLock lock(&mu_);
  calls_.clear();
  calls_.resize(prompts.size());
  in_flight_ = done_ = failed_ = 0;
  const double cpu_before = ProcessCpuSeconds();
  start_ = Clock::now();
  if (!origin_.has_value()) origin_ = start_;
  next_progress_ = start_;
  const Clock::time_point limit =
      options_.time_limit_s > 0
          ? *origin_ + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options_.time_limit_s))
          : Clock::time_point::max();
  // At the time limit, stops the run; the calls are cancelled without the
  // lock.
  auto stop_at_limit = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::shared_ptr<BenchCall>> to_cancel;
    if (Clock::now() < limit || !StopLocked("time limit", &to_cancel)) {
      return;
    }
    mu_.Unlock();
    for (const auto& call : to_cancel) call->Cancel();
    mu_.Lock();
  };

  for (size_t i = 0; i < prompts.size(); ++i) {
    const Clock::time_point arrival =
        start_ + std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(arrivals[i]));
    auto full = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return options_.max_concurrency > 0 &&
             in_flight_ >= options_.max_concurrency;
    };
    while (true) {
      stop_at_limit();
      if (stopped_ || (Clock::now() >= arrival && !full())) break;
      WaitAWhile(std::min(full() ? limit : arrival, limit), progress);
    }
    if (stopped_) break;
    ++in_flight_;
    RequestRecord* record = &run.requests[i];
    const Clock::time_point origin = *origin_;
    mu_.Unlock();
    std::shared_ptr<BenchCall> call = backend_->Start(
        prompts[i], options_.temperature, record, origin,
        [this, record](const CallEnd& end) { Ended(end, record); });
    mu_.Lock();
    calls_[i] = call;
    if (stopped_) {  // Stop came while it started, and did not see it
      mu_.Unlock();
      call->Cancel();
      mu_.Lock();
    }
  }
  while (in_flight_ > 0) {
    stop_at_limit();
    // Once stopped, wait for the calls' ends (each signals), not the limit.
    WaitAWhile(stopped_ ? Clock::time_point::max() : limit, progress);
  }
  run.duration_s = std::chrono::duration<double>(Clock::now() - start_).count();
  run.client_cpu_s = ProcessCpuSeconds() - cpu_before;
  run.stopped_by = stopped_by_;
  const Progress last = ProgressLocked();
  if (progress != nullptr) {
    mu_.Unlock();
    progress(last);
    mu_.Lock();
  }
  return run;
}

bool BenchRunner::StopLocked(
    const std::string& why,
    std::vector<std::shared_ptr<BenchCall>>* to_cancel) {
  if (stopped_) return false;
  stopped_ = true;
  stopped_by_ = why;
  for (const std::shared_ptr<BenchCall>& call : calls_) {
    if (call != nullptr) to_cancel->push_back(call);
  }
  changed_.SignalAll();
  return true;
}

void BenchRunner::Stop(const std::string& why) {
  std::vector<std::shared_ptr<BenchCall>> to_cancel;
  {
    absl::MutexLock lock(&mu_);
    if (!StopLocked(why, &to_cancel)) return;
  }
  for (const auto& call : to_cancel) call->Cancel();
}

void BenchRunner::Ended(const CallEnd& end, RequestRecord* record) {
  absl::MutexLock lock(&mu_);
  using Outcome = RequestRecord::Outcome;
  if (end.ok) {
    record->outcome = Outcome::kSucceeded;
  } else if (stopped_ && end.cancelled) {
    record->outcome = Outcome::kStopped;
  } else {
    record->outcome = Outcome::kFailed;
    record->error_code = end.error_code;
    ++failed_;
  }
  --in_flight_;
  ++done_;
  changed_.SignalAll();
}

void BenchRunner::WaitAWhile(Clock::time_point until,
                             const ProgressFn& progress) {
  Clock::time_point now = Clock::now();
  if (progress != nullptr && now >= next_progress_) {
    next_progress_ = now + kProgressInterval;
    const Progress p = ProgressLocked();
    mu_.Unlock();
    progress(p);
    mu_.Lock();
    now = Clock::now();
  }
  until = std::min(until, now + kProgressInterval);
  if (progress != nullptr) until = std::min(until, next_progress_);
  if (until > now) {
    changed_.WaitWithTimeout(&mu_, absl::FromChrono(until - now));
  }
}

Progress BenchRunner::ProgressLocked() const {
  Progress p;
  p.done = done_;
  p.failed = failed_;
  p.in_flight = in_flight_;
  p.total = static_cast<int64_t>(calls_.size());
  p.elapsed_s = std::chrono::duration<double>(Clock::now() - start_).count();
  return p;
}

}  // namespace h3::cli
