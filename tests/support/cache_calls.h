#ifndef H3_TESTS_SUPPORT_CACHE_CALLS_H_
#define H3_TESTS_SUPPORT_CACHE_CALLS_H_

// Short ways for the prefix-cache tests (CPU and CUDA) to make a model and
// to take and resume snapshots through an engine::Runner.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/runner.h"
#include "loader/config.h"
#include "loader/model_file.h"

namespace h3::testing {

// d_model 16, 3 layers (attention at 1: 2 heads, rotary 4), head_dim 1,
// d_state 8, a vocabulary of 61 ids padded to 64.
loader::ModelConfig TinyPaddedConfig();

// Writes a random model of `config` to `path` and opens it.
absl::StatusOr<std::unique_ptr<loader::ModelFile>> OpenRandomModel(
    const loader::ModelConfig& config, const std::string& path);

// The last logits of `tokens` fed to a fresh slot in one step.
absl::StatusOr<std::vector<float>> FreshLogits(
    engine::Runner& runner, absl::Span<const int32_t> tokens);

// Feeds `tokens` to a fresh slot and saves it in the runner's prefix cache.
absl::Status SaveSnapshot(engine::Runner& runner,
                          absl::Span<const int32_t> tokens);

// Restores the longest snapshot of `tokens` (at most all but the last) into
// a fresh slot, feeds the rest in one step, and puts the last logits in
// *logits. Returns the tokens the snapshot covered.
absl::StatusOr<int64_t> ResumeFromCache(engine::Runner& runner,
                                        absl::Span<const int32_t> tokens,
                                        std::vector<float>* logits);

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_CACHE_CALLS_H_
