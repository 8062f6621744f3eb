#include "engine/offline.h"

#include <algorithm>
#include <chrono>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace h3::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One wave's request in flight.
struct Live {
  size_t index;  // into the requests
  SlotId slot;
  int64_t prefilled = 0;
  bool done = false;
};

}  // namespace

absl::StatusOr<OfflineStats> GenerateOffline(
    Runner& runner, absl::Span<const OfflineRequest> requests,
    int64_t step_tokens, std::vector<OfflineResult>* results,
    const std::function<void(size_t, int32_t)>& on_token) {
  if (step_tokens < 1 || step_tokens > runner.options().max_step_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens per step: ", step_tokens, "; it must be in [1, ",
                     runner.options().max_step_tokens, "]"));
  }
  SequenceMemory& memory = runner.memory();
  const int64_t vocab = runner.model().config().vocab_size;
  results->assign(requests.size(), {});
  OfflineStats stats;
  StepPlan plan;
  StepResult step;
  std::vector<Live> live;
  auto release = absl::MakeCleanup([&] {
    for (const Live& l : live) memory.Release(l.slot);
  });
  // The sampling row of request l's next token.
  auto row = [&](const Live& l) {
    const OfflineRequest& r = requests[l.index];
    return SamplingRowOf(r.sampling, r.seed,
                         (*results)[l.index].generated.size());
  };
  // Records request l's sampled token; true when it ends the request.
  auto take = [&](Live& l, int32_t id) {
    const OfflineRequest& r = requests[l.index];
    OfflineResult& out = (*results)[l.index];
    out.generated.push_back(id);
    if (on_token) on_token(l.index, id);
    out.eos = id == r.eos_id;
    l.done = out.eos ||
             static_cast<int64_t>(out.generated.size()) >= r.max_new_tokens;
  };

  for (size_t next = 0; next < requests.size();) {
    // A wave: as many requests as there are free slots.
    for (; next < requests.size() && memory.free_slots() > 0; ++next) {
      const OfflineRequest& r = requests[next];
      if (r.prompt.empty() || r.max_new_tokens < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "request ", next, ": a prompt and max_new_tokens >= 0 are needed"));
      }
      H3_RETURN_IF_ERROR(runner.model().CheckTokens(r.prompt));
      H3_ASSIGN_OR_RETURN(SlotId slot, memory.Acquire());
      live.push_back({next, slot});
      const int32_t listed = r.listed < 0 ? static_cast<int32_t>(vocab)
                                          : std::min<int32_t>(r.listed, vocab);
      H3_RETURN_IF_ERROR(memory.SetTokenFlags(
          slot, RequestTokenFlags(vocab, listed, r.prompt, {})));
    }
    if (live.empty()) {
      return absl::ResourceExhaustedError("the runner has no free slot");
    }
    // Prompts, packed.
    const Clock::time_point prefill_start = Clock::now();
    for (size_t first = 0; first < live.size();) {
      plan.sequences.clear();
      std::vector<Live*> who;
      int64_t budget = step_tokens;
      for (size_t i = first; i < live.size() && budget > 0; ++i) {
        Live& l = live[i];
        const OfflineRequest& r = requests[l.index];
        const int64_t prompt = static_cast<int64_t>(r.prompt.size());
        const int64_t n = std::min(prompt - l.prefilled, budget);
        const bool last = l.prefilled + n == prompt;
        plan.sequences.push_back(
            {.slot = l.slot,
             .tokens = absl::MakeConstSpan(r.prompt).subspan(l.prefilled, n),
             .sample = last && r.max_new_tokens > 0,
             .sampling = row(l),
             .logits = last && r.prompt_logits});
        who.push_back(&l);
        budget -= n;
      }
      H3_RETURN_IF_ERROR(runner.Execute(plan, &step));
      stats.sequences_per_prefill_step.push_back(static_cast<int>(who.size()));
      ++stats.prefill_steps;
      for (size_t i = 0; i < who.size(); ++i) {
        Live& l = *who[i];
        const OfflineRequest& r = requests[l.index];
        l.prefilled += static_cast<int64_t>(plan.sequences[i].tokens.size());
        if (l.prefilled < static_cast<int64_t>(r.prompt.size())) continue;
        if (const float* logits = step.LogitsOf(i); logits != nullptr) {
          (*results)[l.index].prompt_logits.assign(logits,
                                                   logits + step.padded_vocab);
        }
        if (r.max_new_tokens > 0) {
          take(l, step.ids[i]);
        } else {
          l.done = true;
        }
        ++first;
      }
    }
    H3_RETURN_IF_ERROR(runner.model().backend().Synchronize());
    stats.prefill_seconds += Since(prefill_start);
    // Then one token a step for every unfinished request.
    const Clock::time_point decode_start = Clock::now();
    while (true) {
      plan.sequences.clear();
      std::vector<Live*> who;
      for (Live& l : live) {
        if (l.done) continue;
        plan.sequences.push_back({.slot = l.slot,
                                  .tokens = absl::MakeConstSpan(
                                      &(*results)[l.index].generated.back(), 1),
                                  .sample = true,
                                  .sampling = row(l)});
        who.push_back(&l);
      }
      if (who.empty()) break;
      H3_RETURN_IF_ERROR(runner.Execute(plan, &step));
      ++stats.decode_steps;
      for (size_t i = 0; i < who.size(); ++i) take(*who[i], step.ids[i]);
    }
    stats.decode_seconds += Since(decode_start);
    for (const Live& l : live) memory.Release(l.slot);
    live.clear();
  }
  return stats;
}

}  // namespace h3::engine
