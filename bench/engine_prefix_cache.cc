#include "bench/engine_prefix_cache.h"

#include <algorithm>
#include <vector>

#include "base/status_macros.h"

namespace h3::bench {
namespace {

using Json = nlohmann::ordered_json;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Seconds of the prefill, the save and the restore of one prefix.
struct Times {
  double prefill = 0, save = 0, restore = 0;
};

absl::StatusOr<Times> TimeOnce(engine::Runner& runner,
                               const std::vector<int32_t>& prefix) {
  engine::SequenceMemory& memory = runner.memory();
  engine::PrefixCache& cache = runner.prefix_cache();
  Times t;
  H3_ASSIGN_OR_RETURN(const engine::SlotId from, memory.Acquire());
  engine::StepPlan plan;
  plan.sequences.push_back({.slot = from, .tokens = prefix});
  engine::StepResult result;
  Clock::time_point start = Clock::now();
  absl::Status status = runner.Execute(plan, &result);
  if (status.ok()) status = runner.model().backend().Synchronize();
  t.prefill = Since(start);
  if (status.ok()) {
    start = Clock::now();
    status = cache.Save(from, prefix);
    if (status.ok()) status = runner.model().backend().Synchronize();
    t.save = Since(start);
  }
  memory.Release(from);
  H3_RETURN_IF_ERROR(status);
  H3_ASSIGN_OR_RETURN(const engine::SlotId to, memory.Acquire());
  // The whole prefix plus one token: the snapshot covers all of the prefix.
  std::vector<int32_t> query = prefix;
  query.push_back(prefix.front());
  start = Clock::now();
  absl::StatusOr<engine::PrefixCache::Match> match =
      cache.Restore(query, static_cast<int64_t>(prefix.size()), to);
  status = match.status();
  if (status.ok()) status = runner.model().backend().Synchronize();
  t.restore = Since(start);
  memory.Release(to);
  H3_RETURN_IF_ERROR(status);
  if (match->restored != static_cast<int64_t>(prefix.size())) {
    return absl::InternalError("prefix cache bench: the snapshot was not hit");
  }
  return t;
}

}  // namespace

absl::StatusOr<Json> RunPrefixCache(engine::Runner& runner,
                                    const EngineBenchFlags& flags) {
  if (!runner.prefix_cache().enabled()) {
    return absl::FailedPreconditionError("the runner's prefix cache is off");
  }
  const int32_t vocab =
      static_cast<int32_t>(runner.model().config().vocab_size);
  const engine::SequenceMemory& memory = runner.memory();
  Json rows = Json::array();
  uint32_t seed = 1;
  for (int64_t divisor : {8, 4, 2, 1}) {
    const int64_t length = std::max<int64_t>(1, flags.prompt_len / divisor);
    std::vector<double> prefill, save, restore;
    // The first, untimed, is the warm-up.
    for (int r = 0; r <= flags.reps; ++r) {
      const int64_t bytes_before = runner.prefix_cache().stats().bytes;
      H3_ASSIGN_OR_RETURN(
          Times t, TimeOnce(runner, RandomTokens(length, vocab, ++seed)));
      if (runner.prefix_cache().stats().bytes - bytes_before <= 0) {
        return absl::ResourceExhaustedError(
            "prefix cache bench: the snapshot was not kept (too little "
            "memory?)");
      }
      if (r == 0) continue;
      prefill.push_back(t.prefill);
      save.push_back(t.save);
      restore.push_back(t.restore);
    }
    const double n = static_cast<double>(length);
    rows.push_back({
        {"prefix_tokens", length},
        {"snapshot_bytes",
         length * memory.KvBytesPerPosition() + 4 * memory.StateFloats()},
        {"prefill_s", prefill},
        {"save_s", save},
        {"restore_s", restore},
        {"prefill_us_per_token", 1e6 * Median(prefill) / n},
        {"save_us_per_token", 1e6 * Median(save) / n},
        {"restore_us_per_token", 1e6 * Median(restore) / n},
        {"restore_over_prefill", Median(restore) / Median(prefill)},
    });
  }
  return Json{{"prompt_len", flags.prompt_len},
              {"state_bytes", 4 * memory.StateFloats()},
              {"kv_bytes_per_token", memory.KvBytesPerPosition()},
              {"prefixes", rows}};
}

}  // namespace h3::bench
