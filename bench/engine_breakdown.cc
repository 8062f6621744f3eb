#include "bench/engine_breakdown.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/profiler.h"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;

// One timed step: its wall time in ms.
using TimedStep = std::function<absl::StatusOr<double>()>;

double Mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Json StepStats(const std::vector<double>& ms) {
  return {{"mean", Mean(ms)},
          {"median", MedianOf(ms)},
          {"min", *std::min_element(ms.begin(), ms.end())},
          {"max", *std::max_element(ms.begin(), ms.end())}};
}

// One kind of run: appends the wall time of each timed step to *ms; when
// `profile`, with the backend's profiler on for the timed steps (and still
// on at the return, its ranges collected).
using Run = std::function<absl::Status(bool profile, std::vector<double>* ms)>;

void AddTotals(const std::vector<engine::OpTotal>& add,
               std::vector<engine::OpTotal>* totals) {
  for (const engine::OpTotal& a : add) {
    auto it = std::find_if(totals->begin(), totals->end(), [&](const auto& t) {
      return t.layer_type == a.layer_type && t.name == a.name;
    });
    if (it == totals->end()) {
      totals->push_back(a);
    } else {
      it->calls += a.calls;
      it->ms += a.ms;
    }
  }
}

// `rounds` times a run without the profiler and one with it, in turn, so
// that the machine's drift falls on both; the profiled runs' ranges summed.
absl::StatusOr<Json> Phase(engine::Backend& backend, int rounds,
                           const Run& run) {
  std::vector<double> off, on;
  std::vector<engine::OpTotal> totals;
  absl::Cleanup disable = [&] { (void)backend.EnableProfiler(false); };
  for (int r = 0; r < rounds; ++r) {
    H3_RETURN_IF_ERROR(run(false, &off));
    H3_RETURN_IF_ERROR(run(true, &on));
    if (backend.profiler() == nullptr) {
      return absl::InternalError("breakdown: a profiled run left no profiler");
    }
    AddTotals(backend.profiler()->Totals(), &totals);
    H3_RETURN_IF_ERROR(backend.EnableProfiler(false));
  }
  const double steps = static_cast<double>(on.size());
  const double step_ms = Mean(on);
  Json ops = Json::array();
  std::map<std::string, double> by_type;
  double covered = 0;
  for (const engine::OpTotal& t : totals) {
    const double ms = t.ms / steps;
    ops.push_back({{"name", t.name},
                   {"layer_type", t.layer_type},
                   {"calls", t.calls},
                   {"calls_per_step", t.calls / steps},
                   {"ms_per_step", ms},
                   {"share", ms / step_ms}});
    by_type[t.layer_type] += ms;
    covered += ms;
  }
  Json types = Json::array();
  for (const auto& [type, ms] : by_type) {
    types.push_back(
        {{"layer_type", type}, {"ms_per_step", ms}, {"share", ms / step_ms}});
  }
  return Json{
      {"steps", on.size()},
      {"step_ms",
       {{"profiler_off", StepStats(off)}, {"profiler_on", StepStats(on)}}},
      {"profiler_overhead", step_ms / Mean(off) - 1},
      {"profiler_overhead_median", MedianOf(on) / MedianOf(off) - 1},
      {"ops_ms_per_step", covered},
      {"covered_share", covered / step_ms},
      {"layer_types", types},
      {"ops", ops},
  };
}

// Wall ms of Runner::Execute(plan); with the profiler on, its ranges are
// collected after the step (the step has synchronised by then).
absl::StatusOr<double> TimedExecute(engine::Runner& runner,
                                    const engine::StepPlan& plan,
                                    engine::StepResult* result) {
  const Clock::time_point start = Clock::now();
  H3_RETURN_IF_ERROR(runner.Execute(plan, result));
  const double ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  engine::Profiler* profiler = runner.model().backend().profiler();
  if (profiler != nullptr) H3_RETURN_IF_ERROR(profiler->Collect());
  return ms;
}

}  // namespace

int64_t BreakdownSequenceLength(const EngineBenchFlags& flags) {
  return std::max(
      flags.prompt_len,
      flags.decode_context + kBreakdownWarmupSteps + flags.decode_steps);
}

absl::StatusOr<Json> RunBreakdown(engine::Runner& runner,
                                  const EngineBenchFlags& flags) {
  engine::Backend& backend = runner.model().backend();
  if (backend.SupportsGraphs() && runner.options().graphs) {
    return absl::FailedPreconditionError(
        "breakdown: the runner must not use graphs");
  }
  engine::SequenceMemory& memory = runner.memory();
  const int32_t vocab =
      static_cast<int32_t>(runner.model().config().vocab_size);
  const kernels::SamplingRow greedy{.temperature = 0.0f};
  engine::StepResult result;

  // --prefill-batch prompts of their own in one step, as a Table 4 prefill
  // step packs them.
  if (flags.prefill_batch < 1 || flags.prefill_batch > flags.batch ||
      flags.prefill_batch * flags.prompt_len >
          runner.options().max_step_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("breakdown: --prefill-batch ", flags.prefill_batch,
                     " must be in [1, --batch ", flags.batch,
                     "] and its prompts fit the "
                     "step's ",
                     runner.options().max_step_tokens, " tokens"));
  }
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t b = 0; b < flags.prefill_batch; ++b) {
    prompts.push_back(
        RandomTokens(flags.prompt_len, vocab, static_cast<uint32_t>(1 + b)));
  }
  auto prefill = [&]() -> absl::StatusOr<double> {
    std::vector<engine::SlotId> slots;
    absl::Cleanup release = [&] {
      for (engine::SlotId slot : slots) memory.Release(slot);
    };
    engine::StepPlan plan;
    for (const std::vector<int32_t>& prompt : prompts) {
      H3_ASSIGN_OR_RETURN(const engine::SlotId slot, memory.Acquire());
      slots.push_back(slot);
      plan.sequences.push_back(
          {.slot = slot, .tokens = prompt, .sample = true, .sampling = greedy});
    }
    return TimedExecute(runner, plan, &result);
  };
  H3_RETURN_IF_ERROR(prefill().status());  // warm-up
  H3_ASSIGN_OR_RETURN(
      Json prefill_json,
      Phase(backend, flags.reps,
            [&](bool profile, std::vector<double>* ms) -> absl::Status {
              H3_RETURN_IF_ERROR(backend.EnableProfiler(profile));
              H3_ASSIGN_OR_RETURN(const double m, prefill());
              ms->push_back(m);
              return absl::OkStatus();
            }));

  // Decode on fresh slots each run, so both runs decode at the same
  // positions; the profiler is off during the context and the warm-up.
  const Run decode = [&](bool profile,
                         std::vector<double>* ms) -> absl::Status {
    H3_RETURN_IF_ERROR(backend.EnableProfiler(false));
    std::vector<engine::SlotId> slots;
    absl::Cleanup release = [&] {
      for (engine::SlotId slot : slots) memory.Release(slot);
    };
    H3_RETURN_IF_ERROR(PrefillContexts(runner, flags, &slots));
    engine::StepPlan plan;
    std::vector<int32_t> next = RandomTokens(flags.batch, vocab, 7);
    for (int64_t step = 0; step < kBreakdownWarmupSteps + flags.decode_steps;
         ++step) {
      if (step == kBreakdownWarmupSteps && profile) {
        H3_RETURN_IF_ERROR(backend.EnableProfiler(true));
      }
      plan.sequences.clear();
      for (int64_t b = 0; b < flags.batch; ++b) {
        plan.sequences.push_back({.slot = slots[b],
                                  .tokens = absl::MakeConstSpan(&next[b], 1),
                                  .sample = true,
                                  .sampling = greedy});
      }
      H3_ASSIGN_OR_RETURN(const double m, TimedExecute(runner, plan, &result));
      if (step >= kBreakdownWarmupSteps) ms->push_back(m);
      std::copy(result.ids.begin(), result.ids.end(), next.begin());
    }
    return absl::OkStatus();
  };
  H3_ASSIGN_OR_RETURN(Json decode_json, Phase(backend, flags.reps, decode));
  return Json{
      {"batch", flags.batch},
      {"prefill_batch", flags.prefill_batch},
      {"prompt_len", flags.prompt_len},
      {"decode_context", flags.decode_context},
      {"decode_steps", flags.decode_steps},
      {"reps", flags.reps},
      {"method",
       "engine/profiler.h: named ranges around every backend operation of a "
       "Runner step, timed by the backend's clock (steady_clock on the CPU; "
       "CUDA events on the stream, read after the step) and summed per "
       "(layer type, op); a nested range's time is not in its outer one's. "
       "Graphs are off (forced): each op is launched and timed alone. "
       "ms_per_step = an op's total / steps; share = ms_per_step / the mean "
       "wall time (steady_clock around Runner::Execute) of the profiled "
       "steps; profiler_overhead = that mean / the same steps' mean without "
       "the profiler - 1 (_median: of the medians). The rest of a step (1 - "
       "covered_share) is host "
       "work outside the ops: staging, validation, waits. Runs without and "
       "with the profiler alternate, reps rounds of each. prefill: "
       "prefill_batch sequences of prompt_len tokens in one step, first "
       "tokens sampled greedily, one "
       "untimed warm-up, then reps steps each way; decode: per run, batch "
       "fresh sequences after decode_context tokens and 3 untimed steps, "
       "decode_steps timed steps, sampled greedily on the backend; reps "
       "runs each way"},
      {"prefill", prefill_json},
      {"decode", decode_json},
  };
}

}  // namespace h3::bench
