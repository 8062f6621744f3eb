#include "clients/h3/bench_turns.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace h3::cli {

BenchPrompt NextTurnPrompt(const BenchPrompt& previous,
                           const std::vector<int32_t>& answer, int32_t new_len,
                           int32_t output_len, const TokenPool& pool,
                           std::mt19937_64& rng) {
  BenchPrompt next;
  next.ids = previous.ids;
  next.ids.reserve(previous.ids.size() + answer.size() + new_len);
  next.ids.insert(next.ids.end(), answer.begin(), answer.end());
  for (int32_t i = 0; i < new_len; ++i) next.ids.push_back(pool.Sample(rng));
  next.output_len = output_len;
  return next;
}

std::vector<TurnRecord> RunTurns(BenchRunner& runner,
                                 const std::vector<BenchPrompt>& first,
                                 const TurnOptions& options,
                                 const TokenPool& pool, std::mt19937_64& rng,
                                 const BenchRunner::ProgressFn& progress) {
  std::vector<TurnRecord> turns;
  std::vector<BenchPrompt> prompts = first;
  std::vector<int> conversations(first.size());
  for (size_t i = 0; i < first.size(); ++i) conversations[i] = i;
  for (int turn = 1; turn <= options.turns && !prompts.empty(); ++turn) {
    TurnRecord& record = turns.emplace_back();
    record.conversations = conversations;
    record.run =
        runner.Run(prompts,
                   ArrivalTimes(static_cast<int>(prompts.size()), options.rate,
                                options.burstiness, options.seed + turn - 1),
                   progress);
    if (!record.run.stopped_by.empty()) break;
    std::vector<BenchPrompt> next;
    std::vector<int> next_conversations;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const RequestRecord& r = record.run.requests[i];
      if (r.outcome != RequestRecord::Outcome::kSucceeded) continue;
      // Drawn in this order (not as arguments, whose order is unspecified)
      // so that a seed gives the same prompts with every compiler.
      const int32_t new_len =
          SampleLength(options.input_len, options.range_ratio, rng);
      const int32_t output_len =
          SampleLength(options.output_len, options.range_ratio, rng);
      next.push_back(NextTurnPrompt(prompts[i], r.output_ids, new_len,
                                    output_len, pool, rng));
      next_conversations.push_back(conversations[i]);
    }
    prompts = std::move(next);
    conversations = std::move(next_conversations);
  }
  return turns;
}

RunRecord MergeTurns(const std::vector<TurnRecord>& turns) {
  RunRecord all;
  for (const TurnRecord& t : turns) {
    all.requests.insert(all.requests.end(), t.run.requests.begin(),
                        t.run.requests.end());
    all.duration_s += t.run.duration_s;
    all.client_cpu_s += t.run.client_cpu_s;
    if (all.stopped_by.empty()) all.stopped_by = t.run.stopped_by;
  }
  return all;
}

std::vector<TurnMetrics> ComputeTurnMetrics(
    const std::vector<TurnRecord>& turns) {
  std::vector<TurnMetrics> out;
  for (size_t k = 0; k < turns.size(); ++k) {
    const BenchMetrics m = ComputeMetrics(turns[k].run);
    TurnMetrics& t = out.emplace_back();
    t.turn = static_cast<int>(k) + 1;
    t.requests = m.requests;
    t.succeeded = m.succeeded;
    t.prompt_tokens = m.total_input_tokens;
    t.cached_prompt_tokens = m.cached_input_tokens;
    t.ttft_ms = m.ttft_ms;
  }
  return out;
}

std::string FormatTurnsTable(const std::vector<TurnMetrics>& turns) {
  std::string out = absl::StrFormat(
      "%-5s %9s %10s %12s %12s %12s %10s\n", "Turn", "requests", "succeeded",
      "prompt tok", "cached tok", "TTFT median", "TTFT p99");
  for (const TurnMetrics& t : turns) {
    absl::StrAppendFormat(&out, "%-5d %9d %10d %12d %12d %12.2f %10.2f\n",
                          t.turn, t.requests, t.succeeded, t.prompt_tokens,
                          t.cached_prompt_tokens, t.ttft_ms.median,
                          t.ttft_ms.p99);
  }
  out += "==================================\n";
  return out;
}

nlohmann::ordered_json TurnsJson(const std::vector<TurnMetrics>& turns) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const TurnMetrics& t : turns) {
    out.push_back({{"turn", t.turn},
                   {"requests", t.requests},
                   {"succeeded", t.succeeded},
                   {"prompt_tokens", t.prompt_tokens},
                   {"cached_prompt_tokens", t.cached_prompt_tokens},
                   {"ttft_ms",
                    {{"count", t.ttft_ms.count},
                     {"mean", t.ttft_ms.mean},
                     {"median", t.ttft_ms.median},
                     {"p99", t.ttft_ms.p99}}}});
  }
  return out;
}

nlohmann::ordered_json TurnRequestsJson(const std::vector<TurnRecord>& turns) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t k = 0; k < turns.size(); ++k) {
    nlohmann::ordered_json requests = RequestsJson(turns[k].run);
    for (size_t i = 0; i < requests.size(); ++i) {
      requests[i]["turn"] = k + 1;
      requests[i]["conversation"] = turns[k].conversations[i];
      out.push_back(std::move(requests[i]));
    }
  }
  return out;
}

}  // namespace h3::cli
