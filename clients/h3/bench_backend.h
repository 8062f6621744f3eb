#ifndef H3_CLIENTS_H3_BENCH_BACKEND_H_
#define H3_CLIENTS_H3_BENCH_BACKEND_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "clients/h3/bench_dataset.h"
#include "clients/h3/bench_result.h"

namespace h3::cli {

// One request of a run, in flight.
class BenchCall {
 public:
  virtual ~BenchCall() = default;
  // Ends the call soon (it then reports cancelled) unless it has ended.
  // Thread-safe; may come before the call has really started.
  virtual void Cancel() = 0;
};

// How a call ended.
struct CallEnd {
  bool ok = false;
  bool cancelled = false;  // ended by BenchCall::Cancel
  // When !ok: the gRPC code name ("RESOURCE_EXHAUSTED"), or for the HTTP
  // API "HTTP_<status>" ("HTTP_429"), "HTTP_<library error>" when no
  // response came, or "STREAM_ERROR" for an error event or a stream without
  // its final [DONE].
  std::string error_code;
};

// A front end the load generator of `h3 bench` measures: the gRPC API
// (GrpcBenchBackend, bench_runner.h) or the OpenAI-compatible HTTP API
// (OpenAiBenchBackend, bench_openai.h).
class BenchBackend {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~BenchBackend() = default;

  // Sends `prompt` (exactly prompt.output_len tokens asked for: min = max,
  // end of text ignored) at `temperature`. The call records into `record`,
  // on the run's clock that started at `start`: start_s when sent, one
  // chunk time and token count per streamed message that carried tokens,
  // input_tokens (the server's count when it says it), finish_reason (lower
  // case) and end_s; then it calls `ended` once, from any thread, and
  // touches neither afterwards. The caller keeps the returned call (and
  // `record`) alive until then. Thread-safe.
  virtual std::shared_ptr<BenchCall> Start(
      const BenchPrompt& prompt, float temperature, RequestRecord* record,
      Clock::time_point start, std::function<void(const CallEnd&)> ended) = 0;
};

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_BENCH_BACKEND_H_
