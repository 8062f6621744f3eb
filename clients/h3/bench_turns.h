#ifndef H3_CLIENTS_H3_BENCH_TURNS_H_
#define H3_CLIENTS_H3_BENCH_TURNS_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "clients/h3/bench_dataset.h"
#include "clients/h3/bench_report.h"
#include "clients/h3/bench_result.h"
#include "clients/h3/bench_runner.h"
#include "nlohmann/json.hpp"

namespace h3::cli {

// The multi-turn data set of `h3 bench --multi-turn N`: each prompt of the
// random data set starts a conversation; the prompt of its turn k + 1 is the
// prompt of turn k, the answer of turn k as generated, and new random ids.

// The prompt of a conversation's next turn: `previous.ids`, then `answer`,
// then `new_len` ids drawn from `pool`; it asks for `output_len` tokens.
BenchPrompt NextTurnPrompt(const BenchPrompt& previous,
                           const std::vector<int32_t>& answer, int32_t new_len,
                           int32_t output_len, const TokenPool& pool,
                           std::mt19937_64& rng);

struct TurnOptions {
  int turns = 2;           // >= 1
  int32_t input_len = 0;   // new tokens per turn after the first
  int32_t output_len = 0;  // tokens to generate per turn
  double range_ratio = 0;  // both vary by up to this fraction (SampleLength)
  double rate = 0;         // arrivals of each turn (ArrivalTimes)
  double burstiness = 1;
  uint64_t seed = 0;  // turn k's arrivals use seed + k - 1
};

// One turn of every conversation still going: the run, and the
// conversation (its index in the first turn) of each request.
struct TurnRecord {
  RunRecord run;
  std::vector<int> conversations;
};

// Runs the conversations that start with `first` (token-id prompts), turn by
// turn, in waves: turn k of every conversation is one BenchRunner::Run
// (arrivals and concurrency as options and `runner` say), and turn k + 1 is
// built from its results once the whole wave has ended. Waves are the
// simplest design that keeps the turns of a conversation sequential (a turn
// is sent only after the previous one has ended) without a scheduler of
// dependent requests; the price is that a wave waits for its slowest
// conversation. A conversation whose turn did not succeed has no later
// turns; a stopped run (Ctrl-C, time limit) ends the waves. Returns one
// record per turn that ran; `progress` as BenchRunner::Run.
std::vector<TurnRecord> RunTurns(BenchRunner& runner,
                                 const std::vector<BenchPrompt>& first,
                                 const TurnOptions& options,
                                 const TokenPool& pool, std::mt19937_64& rng,
                                 const BenchRunner::ProgressFn& progress);

// Every turn's requests as one run, turn by turn: durations and client CPU
// times summed, the first stop reason.
RunRecord MergeTurns(const std::vector<TurnRecord>& turns);

// What the report says of one turn (successful requests' tokens and TTFT).
struct TurnMetrics {
  int turn = 0;          // from 1
  int64_t requests = 0;  // sent in this turn's wave, or not sent after a stop
  int64_t succeeded = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // Usage.cached_prompt_tokens summed
  Distribution ttft_ms;
};
std::vector<TurnMetrics> ComputeTurnMetrics(
    const std::vector<TurnRecord>& turns);

// The per-turn table printed after FormatTable's.
std::string FormatTurnsTable(const std::vector<TurnMetrics>& turns);

// The "turns" array of --json.
nlohmann::ordered_json TurnsJson(const std::vector<TurnMetrics>& turns);

// RequestsJson of every turn in turn order, each request with its "turn"
// (from 1) and "conversation" (from 0).
nlohmann::ordered_json TurnRequestsJson(const std::vector<TurnRecord>& turns);

}  // namespace h3::cli

#endif  // H3_CLIENTS_H3_BENCH_TURNS_H_
