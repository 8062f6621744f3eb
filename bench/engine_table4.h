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
#include "loader/config.h"
#include "nlohmann/json.hpp"

namespace h3::bench {

using Clock = std::chrono::steady_clock;

struct EngineBenchFlags {
  std::string model;
  std::string what = "both";
  std::string device = "cpu";
  std::string dtype = "fp32";
  std::string graphs = "on";
  int64_t prompt_len = 512;
  int64_t decode_context = 128;
  int64_t decode_steps = 32;
  int64_t batch = 1;
  int reps = 5;
  int64_t prefill_chunk = 1024;
  std::string random_shape;
};

// `n` ids uniform in [0, vocab), the same for the same seed.
std::vector<int32_t> RandomTokens(int64_t n, int32_t vocab, uint32_t seed);

// next[b] = argmax over the real vocabulary of row b of `logits` (host,
// [next.size(), padded_vocab_size]).
void GreedyNext(const loader::ModelConfig& config,
                const std::vector<float>& logits, std::vector<int32_t>& next);

// The backend --device and --dtype name (engine::MakeBackend).
absl::StatusOr<std::unique_ptr<engine::Backend>> MakeBenchBackend(
    const EngineBenchFlags& flags);

// What the numbers were measured on: the CPU's model name, and for a CUDA
// backend (name "cuda" or "cuda:N") that GPU's name, compute capability and
// memory, the driver and runtime versions; and the build's commit.
nlohmann::ordered_json MachineJson(const std::string& backend_name);

// --what table4. After one untimed run of the same shape, --reps timed runs
// of: --batch fresh sequences, each prefilled with its own --prompt-len
// random tokens by one Model::Prefill call (as the engine prefills a
// request), which samples its first token greedily on the backend; then
// --decode-steps batched Model::Decode steps, sampling greedily on the
// backend as the server does (only ids come back).
// Sequences are allocated before the clock starts and reset between runs.
// Reports per run the prefill, decode and total seconds, and tokens/s =
// batch * decode_steps / total.
absl::StatusOr<nlohmann::ordered_json> RunTable4(engine::Model& model,
                                                 const EngineBenchFlags& flags);

// --what latency: one sequence prefilled with --prompt-len tokens (untimed),
// then --decode-steps single-sequence decode steps, each timed alone
// (including greedy sampling on the backend and the id's copy to the host);
// after one untimed run of the same shape, --reps runs. Reports every step
// and the median.
absl::StatusOr<nlohmann::ordered_json> RunLatency(
    engine::Model& model, const EngineBenchFlags& flags);

// --what write-random: writes an fp32 model file of --random-shape (a
// released preset: d_state 64, head_dim 1, d_inner 4 * d_model, the GPT-2
// vocabulary padded to a multiple of 8; or "small": d_model 256, 4 layers,
// attention at 2) with tests/support/random_model.h's weights to --model.
absl::StatusOr<nlohmann::ordered_json> WriteRandomModelFile(
    const EngineBenchFlags& flags);

}  // namespace h3::bench

#endif  // H3_BENCH_ENGINE_TABLE4_H_
