#include "tests/support/runner_calls.h"

#include <algorithm>
#include <utility>

#include "base/status_macros.h"
#include "engine/offline.h"

namespace h3::testing {

absl::StatusOr<std::unique_ptr<engine::Runner>> MakeRunner(
    const loader::ModelFile& file, std::unique_ptr<engine::Backend> backend,
    int slots, int64_t context, int64_t prefill_chunk, bool graphs,
    engine::PrefixCacheOptions prefix_cache) {
  H3_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model,
                      engine::Model::Load(file, std::move(backend),
                                          {.prefill_chunk = prefill_chunk}));
  return engine::Runner::Create(
      std::move(model),
      {.slots = slots,
       .max_sequence_length = context,
       .max_step_tokens = std::max<int64_t>(context * slots, 4096),
       .graphs = graphs,
       .prefix_cache = prefix_cache});
}

absl::Status Feed(engine::Runner& runner, engine::SlotId slot,
                  absl::Span<const int32_t> tokens,
                  std::vector<float>* logits) {
  engine::StepPlan plan;
  plan.sequences.push_back(
      {.slot = slot, .tokens = tokens, .logits = logits != nullptr});
  engine::StepResult result;
  H3_RETURN_IF_ERROR(runner.Execute(plan, &result));
  if (logits != nullptr) *logits = std::move(result.logits);
  return absl::OkStatus();
}

absl::Status FeedEach(engine::Runner& runner,
                      absl::Span<const engine::SlotId> slots,
                      absl::Span<const int32_t> tokens,
                      std::vector<float>* logits) {
  engine::StepPlan plan;
  for (size_t i = 0; i < slots.size(); ++i) {
    plan.sequences.push_back({.slot = slots[i],
                              .tokens = tokens.subspan(i, 1),
                              .logits = logits != nullptr});
  }
  engine::StepResult result;
  H3_RETURN_IF_ERROR(runner.Execute(plan, &result));
  if (logits != nullptr) *logits = std::move(result.logits);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> GreedyIds(engine::Runner& runner,
                                               absl::Span<const int32_t> prompt,
                                               int max_tokens) {
  engine::OfflineRequest request;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.sampling.temperature = 0;
  request.max_new_tokens = max_tokens;
  std::vector<engine::OfflineResult> results;
  H3_RETURN_IF_ERROR(engine::GenerateOffline(runner, {request},
                                             runner.options().max_step_tokens,
                                             &results)
                         .status());
  return results[0].generated;
}

}  // namespace h3::testing
