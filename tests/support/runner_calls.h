#ifndef H3_TESTS_SUPPORT_RUNNER_CALLS_H_
#define H3_TESTS_SUPPORT_RUNNER_CALLS_H_

// Short ways for tests to drive an engine::Runner: one-entry and one-token
// step plans, and a runner made from a model file.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/backend.h"
#include "engine/runner.h"
#include "loader/model_file.h"

namespace h3::testing {

// A runner over `file` on `backend` with `slots` slots of `context`
// positions.
absl::StatusOr<std::unique_ptr<engine::Runner>> MakeRunner(
    const loader::ModelFile& file, std::unique_ptr<engine::Backend> backend,
    int slots, int64_t context, int64_t prefill_chunk = 1024,
    bool graphs = true, engine::PrefixCacheOptions prefix_cache = {});

// Feeds `tokens` to `slot` in one step; *logits (if not null) receives the
// last token's logits [padded_vocab].
absl::Status Feed(engine::Runner& runner, engine::SlotId slot,
                  absl::Span<const int32_t> tokens, std::vector<float>* logits);

// One token to each slot in one step; *logits (if not null) receives
// [slots.size(), padded_vocab].
absl::Status FeedEach(engine::Runner& runner,
                      absl::Span<const engine::SlotId> slots,
                      absl::Span<const int32_t> tokens,
                      std::vector<float>* logits);

// The first max_tokens greedy ids after `prompt`, in a slot of its own.
absl::StatusOr<std::vector<int32_t>> GreedyIds(engine::Runner& runner,
                                               absl::Span<const int32_t> prompt,
                                               int max_tokens);

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_RUNNER_CALLS_H_
