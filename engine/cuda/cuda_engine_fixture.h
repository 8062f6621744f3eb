#ifndef H3_ENGINE_CUDA_CUDA_ENGINE_FIXTURE_H_
#define H3_ENGINE_CUDA_CUDA_ENGINE_FIXTURE_H_

// The fixture of the CUDA engine's tests (label gpu): a small random model
// on disk, runners over it on any backend, greedy decoding.

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/gpu_test.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {

// A small hybrid model the fused prefill kernel also takes (head_dim 1,
// d_state 16): 3 layers, attention at 1 with 4 heads of 16 (or 1 head of
// 64, a shape the tensor-core attention has an instance for) and rotary.
inline loader::ModelConfig SmallConfig(int64_t head_dim, int64_t n_heads = 4) {
  loader::ModelConfig c;
  c.d_model = 64;
  c.n_layer = 3;
  c.attn_layer_idx = {1};
  c.n_heads = n_heads;
  c.head_dim = head_dim;
  c.d_state = 16;
  c.d_inner = 256;
  c.vocab_size = 61;
  c.padded_vocab_size = 64;
  c.rotary_dim = 8;
  return c;
}

// The 16-bit weight types and the normalised logit error each may reach
// against the CPU's fp32 (SixteenBitWeightsStayCloseToTheCpu says why).
inline constexpr std::pair<ElementType, double> kSixteenBitBounds[] = {
    {ElementType::kF16, 1e-2}, {ElementType::kBF16, 5e-2}};

inline std::vector<int32_t> Tokens(int n, int seed, int64_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

inline int32_t Argmax(const float* logits, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) -
                              logits);
}

class CudaEngineTest : public h3::testing::GpuTest {
 protected:
  void Open(int64_t head_dim = 1, int64_t n_heads = 4) {
    config_ = SmallConfig(head_dim, n_heads);
    const std::string path =
        h3::testing::TempPath("cuda_engine_p" + std::to_string(head_dim) +
                              "_h" + std::to_string(n_heads) + ".h3");
    ASSERT_TRUE(h3::testing::WriteRandomModel(config_, path).ok());
    auto file = loader::ModelFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  // fp32 activations, whatever the weights (the tests written before half
  // activations became the default with 16-bit weights hold that path); the
  // BackendOptions overload takes the defaults.
  std::unique_ptr<Runner> Load(
      const std::string& device, std::optional<ElementType> type,
      bool graphs = true, int64_t chunk = 48,
      AttentionKernel attention = AttentionKernel::kFma) {
    BackendOptions options{device, type, attention};
    options.half_activations = false;
    return Load(options, graphs, chunk);
  }
  std::unique_ptr<Runner> Load(const BackendOptions& options,
                               bool graphs = true, int64_t chunk = 48) {
    auto backend = MakeBackend(options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return nullptr;
    auto runner =
        h3::testing::MakeRunner(*file_, *std::move(backend),
                                /*slots=*/16, /*context=*/512, chunk, graphs);
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  // The fp16 model of Open(1) twice: decode graphs on, and off.
  void LoadGraphsOnAndOff(std::unique_ptr<Runner>* with,
                          std::unique_ptr<Runner>* without) {
    Open(1);
    *with = Load("cuda", ElementType::kF16, /*graphs=*/true);
    *without = Load("cuda", ElementType::kF16, /*graphs=*/false);
    ASSERT_NE(*with, nullptr);
    ASSERT_NE(*without, nullptr);
  }

  // Prefills `prompt` in one step, then feeds `steps` greedy tokens; returns
  // every step's logits (the prefill's first), concatenated.
  std::vector<float> Greedy(Runner& runner, const std::vector<int32_t>& prompt,
                            int steps, std::vector<int32_t>* tokens) {
    const SlotId slot = *runner.memory().Acquire();
    std::vector<float> all, logits;
    EXPECT_TRUE(h3::testing::Feed(runner, slot, prompt, &logits).ok());
    all = logits;
    for (int i = 0; i < steps; ++i) {
      const int32_t next = Argmax(logits.data(), config_.vocab_size);
      tokens->push_back(next);
      const absl::Status status =
          h3::testing::Feed(runner, slot, {&next, 1}, &logits);
      EXPECT_TRUE(status.ok()) << status;
      if (!status.ok()) break;
      all.insert(all.end(), logits.begin(), logits.end());
    }
    runner.memory().Release(slot);
    return all;
  }

  // Greedy(prompt, steps) on the CPU backend (the specification); empty
  // (and a failure) when the CPU runner cannot be made.
  std::vector<float> CpuGreedy(const std::vector<int32_t>& prompt, int steps) {
    auto cpu = Load("cpu", std::nullopt);
    if (cpu == nullptr) return {};
    std::vector<int32_t> ignored;
    return Greedy(*cpu, prompt, steps, &ignored);
  }

  loader::ModelConfig config_;
  std::unique_ptr<loader::ModelFile> file_;
};

}  // namespace h3::engine

#endif  // H3_ENGINE_CUDA_CUDA_ENGINE_FIXTURE_H_
