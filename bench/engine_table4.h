#ifndef H3_BENCH_ENGINE_TABLE4_H_
#define H3_BENCH_ENGINE_TABLE4_H_

// The parts of h3_engine_bench beyond its CPU prefill/decode timings: the
// backend and device choice, the H3 paper's Table 4 measurement, batch-1
// decode latency, and random model files of the released shapes.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "engine/runner.h"
#include "loader/config.h"
#include "nlohmann/json.hpp"

namespace h3::bench {

using Clock = std::chrono::steady_clock;

struct EngineBenchFlags {
  std::string model;
  std::string what = "both";
  // --device, --dtype, --attention, ... (engine::ParseBackendFlags).
  engine::BackendFlags backend{.device = "cpu", .dtype = "fp32"};
  std::string graphs = "on";
  int64_t prompt_len = 512;
  int64_t decode_context = 128;
  int64_t decode_steps = 32;
  int64_t batch = 1;
  int reps = 5;
  int64_t prefill_chunk = 1024;
  int64_t step_tokens = 0;    // 0: StepTokens picks
  int64_t prefill_batch = 1;  // breakdown: prompts in its prefill step
  std::string random_shape;
};

// The runner's step size for `flags`: --step-tokens, or by default room for
// a whole prompt (or decode context) and for as many of the batch's prompts
// as fit in kAutoStepTokens.
inline constexpr int64_t kAutoStepTokens = 16384;
int64_t StepTokens(const EngineBenchFlags& flags);

// `n` ids uniform in [0, vocab), the same for the same seed.
std::vector<int32_t> RandomTokens(int64_t n, int32_t vocab, uint32_t seed);

// next[b] = argmax over the real vocabulary of row b of `logits` (host,
// [next.size(), padded_vocab_size]).
void GreedyNext(const loader::ModelConfig& config,
                const std::vector<float>& logits, std::vector<int32_t>& next);

// Acquires --batch slots (appended to *slots; the caller releases them)
// and feeds each its own --decode-context random tokens in a step of its
// own, so that decode steps can follow.
absl::Status PrefillContexts(engine::Runner& runner,
                             const EngineBenchFlags& flags,
                             std::vector<engine::SlotId>* slots);

// What the numbers were measured on: the CPU's model name, and for a CUDA
// backend (name "cuda" or "cuda:N") that GPU's name, compute capability and
// memory, the driver and runtime versions; and the build's commit.
nlohmann::ordered_json MachineJson(const std::string& backend_name);

// --what table4, the offline engine (engine::GenerateOffline). After one
// untimed run of the same shape, --reps timed runs of: --batch requests of
// their own --prompt-len random tokens, the prompts packed into steps of
// StepTokens(flags) tokens (as many whole prompts per forward as fit), each
// sampling its first token greedily on the backend; then --decode-steps
// steps of one token for every request, sampling greedily on the backend as
// the server does (only ids come back). Slots are allocated before the clock
// starts. Reports per run the prefill, decode and total seconds, tokens/s =
// batch * decode_steps / total, and how many prompts each prefill step fed.
absl::StatusOr<nlohmann::ordered_json> RunTable4(engine::Runner& runner,
                                                 const EngineBenchFlags& flags);

// --what latency: one sequence prefilled with --prompt-len tokens (untimed),
// then --decode-steps single-sequence decode steps, each timed alone
// (including greedy sampling on the backend and the id's copy to the host);
// after one untimed run of the same shape, --reps runs. Reports every step
// and the median.
absl::StatusOr<nlohmann::ordered_json> RunLatency(
    engine::Runner& runner, const EngineBenchFlags& flags);

// --what write-random: writes an fp32 model file of --random-shape (a
// released preset: d_state 64, head_dim 1, d_inner 4 * d_model, the GPT-2
// vocabulary padded to a multiple of 8; or "small": d_model 256, 4 layers,
// attention at 2) with tests/support/random_model.h's weights to --model.
absl::StatusOr<nlohmann::ordered_json> WriteRandomModelFile(
    const EngineBenchFlags& flags);

}  // namespace h3::bench

#endif  // H3_BENCH_ENGINE_TABLE4_H_
