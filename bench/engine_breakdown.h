#ifndef H3_BENCH_ENGINE_BREAKDOWN_H_
#define H3_BENCH_ENGINE_BREAKDOWN_H_

// h3_engine_bench --what breakdown: where the time of a decode step and of a
// prefill goes, operation by operation (engine/profiler.h), with the same
// steps timed without the profiler so that its overhead shows.

#include <cstdint>

#include "absl/status/statusor.h"
#include "bench/engine_table4.h"
#include "engine/runner.h"
#include "nlohmann/json.hpp"

namespace h3::bench {

// Untimed decode steps before each timed run.
inline constexpr int64_t kBreakdownWarmupSteps = 3;

// Positions a sequence reaches in RunBreakdown.
int64_t BreakdownSequenceLength(const EngineBenchFlags& flags);

// Prefill: one sequence of --prompt-len random tokens in one step, sampling
// its first token greedily on the backend; one untimed warm-up, then --reps
// rounds of a step without the profiler and one with it. Decode: --reps
// rounds of a run without and a run with the profiler, each run on fresh
// slots at the same positions: --batch sequences prefilled with
// --decode-context tokens (untimed), kBreakdownWarmupSteps untimed steps,
// then --decode-steps timed steps of one token each, sampled greedily on
// the backend (only ids come back). Every step is timed alone (steady_clock
// around Runner::Execute). The runner must not use graphs (the profiler
// runs steps op by op; the steps without it must be the same work).
// Per phase: the step's wall time with and without the profiler, and per
// (layer type, op): calls, ms per step and share of the profiled step.
absl::StatusOr<nlohmann::ordered_json> RunBreakdown(
    engine::Runner& runner, const EngineBenchFlags& flags);

}  // namespace h3::bench

#endif  // H3_BENCH_ENGINE_BREAKDOWN_H_
