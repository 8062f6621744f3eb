#include "tests/support/cache_calls.h"

#include "absl/cleanup/cleanup.h"
#include "base/status_macros.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"

namespace h3::testing {

loader::ModelConfig TinyPaddedConfig() {
  loader::ModelConfig c = SmallHybridConfig(61);
  c.n_layer = 3;
  c.padded_vocab_size = 64;
  c.rotary_dim = 4;
  return c;
}

absl::StatusOr<std::unique_ptr<loader::ModelFile>> OpenRandomModel(
    const loader::ModelConfig& config, const std::string& path) {
  H3_RETURN_IF_ERROR(WriteRandomModel(config, path));
  return loader::ModelFile::Open(path);
}

absl::StatusOr<std::vector<float>> FreshLogits(
    engine::Runner& runner, absl::Span<const int32_t> tokens) {
  H3_ASSIGN_OR_RETURN(const engine::SlotId slot, runner.memory().Acquire());
  absl::Cleanup release = [&] { runner.memory().Release(slot); };
  std::vector<float> logits;
  H3_RETURN_IF_ERROR(Feed(runner, slot, tokens, &logits));
  return logits;
}

absl::Status SaveSnapshot(engine::Runner& runner,
                          absl::Span<const int32_t> tokens) {
  H3_ASSIGN_OR_RETURN(const engine::SlotId slot, runner.memory().Acquire());
  absl::Cleanup release = [&] { runner.memory().Release(slot); };
  H3_RETURN_IF_ERROR(Feed(runner, slot, tokens, nullptr));
  return runner.prefix_cache().Save(slot, tokens);
}

absl::StatusOr<int64_t> ResumeFromCache(engine::Runner& runner,
                                        absl::Span<const int32_t> tokens,
                                        std::vector<float>* logits) {
  H3_ASSIGN_OR_RETURN(const engine::SlotId slot, runner.memory().Acquire());
  absl::Cleanup release = [&] { runner.memory().Release(slot); };
  const int64_t limit = static_cast<int64_t>(tokens.size()) - 1;
  H3_ASSIGN_OR_RETURN(const engine::PrefixCache::Match match,
                      runner.prefix_cache().Restore(tokens, limit, slot));
  if (runner.memory().position(slot) != match.restored) {
    return absl::InternalError("the restored slot is not at its snapshot");
  }
  H3_RETURN_IF_ERROR(
      Feed(runner, slot, tokens.subspan(match.restored), logits));
  return match.restored;
}

}  // namespace h3::testing
