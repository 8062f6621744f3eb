#ifndef H3_CLIENTS_H3_BENCH_RESULT_H_
#define H3_CLIENTS_H3_BENCH_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace h3::cli {

// What `h3 bench` measured of one request, on the client's monotonic clock.
// Times are seconds since the start of the runner's first run (its first
// send), so that the waves of a multi-turn run share one clock.
struct RequestRecord {
  enum class Outcome {
    kNotSent,   // the run stopped (Ctrl-C, time limit) before its turn
    kStopped,   // sent, then cancelled by the client when the run stopped
    kFailed,    // the call ended with a gRPC error
    kSucceeded  // the call ended OK
  };
  Outcome outcome = Outcome::kNotSent;
  // The canonical gRPC code name of a failed call ("RESOURCE_EXHAUSTED").
  std::string error_code;
  // When the request was sent.
  double start_s = 0;
  // When the call ended.
  double end_s = 0;
  // One entry per streamed message that carried tokens: when it arrived and
  // how many tokens it carried. Empty when none came.
  std::vector<double> chunk_times_s;
  std::vector<int32_t> chunk_tokens;
  // The generated token ids in order, as received (the gRPC backend; the
  // OpenAI backend leaves it empty). A multi-turn run appends them to the
  // conversation's next prompt.
  std::vector<int32_t> output_ids;
  // Prompt tokens: the server's count (usage) when it answered, else the
  // client's (token-id prompts); -1 when neither is known (a text prompt
  // that failed).
  int64_t input_tokens = -1;
  // Prompt tokens whose state the server took from its prefix cache.
  int64_t cached_input_tokens = 0;
  // The finish reason of the last message, lower case ("length"), or "" when
  // none came.
  std::string finish_reason;

  int64_t output_tokens() const {
    int64_t n = 0;
    for (int32_t t : chunk_tokens) n += t;
    return n;
  }
};

// A whole run: one record per request of the data set, in its order.
struct RunRecord {
  std::vector<RequestRecord> requests;
  // From the first send to the end of the last call.
  double duration_s = 0;
  // CPU time (user + system) of the whole client process, all its threads,
  // during the run.
  double client_cpu_s = 0;
  // Why the run ended before sending everything, or "" when it did not:
  // "interrupted" (Ctrl-C) or "time limit".
  std::string stopped_by;
};

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_BENCH_RESULT_H_
