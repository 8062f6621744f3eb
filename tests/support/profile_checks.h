#ifndef H3_TESTS_SUPPORT_PROFILE_CHECKS_H_
#define H3_TESTS_SUPPORT_PROFILE_CHECKS_H_

// Profiled runner steps (engine/profiler.h) and the structural checks of
// their breakdown, shared by the CPU and the CUDA tests: names, call counts,
// times that sum to no more than the steps' wall time. Nothing about speed.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/profiler.h"
#include "engine/runner.h"

namespace h3::testing {

struct ProfiledSteps {
  std::vector<engine::OpTotal> totals;  // empty when not profiled
  int64_t steps = 0;
  double wall_ms = 0;         // Runner::Execute's, summed over the steps
  std::vector<float> logits;  // every step's logits, in order
  std::vector<int32_t> ids;   // every step's sampled ids, in order
};

// `batch` fresh sequences fed `context` tokens each, then `steps` steps of
// one token per sequence (sampled greedily on the backend, the next token
// being the sampled id; logits to the host). The profiler is on during the
// timed steps only when `profile`, and off after. Releases the slots.
absl::StatusOr<ProfiledSteps> RunDecode(engine::Runner& runner, int batch,
                                        int64_t context, int64_t steps,
                                        bool profile);

// One step feeding `length` tokens to a fresh sequence, its first token
// sampled greedily, its logits to the host.
absl::StatusOr<ProfiledSteps> RunPrefill(engine::Runner& runner, int64_t length,
                                         bool profile);

// The names each step times once per layer of their type, once per step
// ("model"), or once per sequence of the step.
struct ExpectedOps {
  std::vector<std::string> h3, attention, model, per_sequence;
};
ExpectedOps DecodeOps();
// For a prompt shorter than the model's prefill chunk.
ExpectedOps PrefillOps();

// GoogleTest checks of `run` (steps of `sequences` sequences each): every
// expected (layer type, name) is there, timed layers x steps times (model
// ops: steps times); any other name is nested under an expected one
// ("h3_prefill/fused_conv"); every time is >= 0 and all of them sum to no
// more than run.wall_ms.
void ExpectBreakdown(const ProfiledSteps& run, const ExpectedOps& ops,
                     int h3_layers, int attention_layers, int sequences);

// a and b hold the same floats, bit for bit.
bool SameBits(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_PROFILE_CHECKS_H_
