// The model through the Runner on the CPU backend, held to its invariants:
// a sequence's logits do not depend on how its prompt is split into steps
// (bitwise), on what else shares its step (bitwise: other sequences' single
// tokens and prompt chunks, any row), on prefill versus token-by-token
// feeding (bitwise), and a copied state continues like the original. The
// same with 16-bit activations (Backend::activation_type): they round the
// same values whatever the split or the batch, so the invariants hold.
#include "engine/runner.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/random_model.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

using h3::testing::Feed;

loader::ModelConfig TinyConfig(int64_t head_dim, int64_t rotary_dim) {
  loader::ModelConfig c;
  c.d_model = 16;
  c.n_layer = 3;
  c.attn_layer_idx = {1};
  c.n_heads = 2;
  c.head_dim = head_dim;
  c.d_state = 8;
  c.d_inner = 64;
  c.vocab_size = 61;
  c.padded_vocab_size = 64;
  c.rotary_dim = rotary_dim;
  return c;
}

// The H3 layers' head dim, the attention's rotary dim, the activations.
using RunnerParam = std::tuple<int, int, ElementType>;

class RunnerTest : public ::testing::TestWithParam<RunnerParam> {
 protected:
  void SetUp() override {
    auto [head_dim, rotary, activations] = GetParam();
    config_ = TinyConfig(head_dim, rotary);
    activations_ = activations;
    const std::string path =
        h3::testing::TempPath("runner_" + std::to_string(head_dim) + "_" +
                              std::to_string(rotary) + ".h3");
    ASSERT_TRUE(h3::testing::WriteRandomModel(config_, path).ok());
    auto file = loader::ModelFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  std::unique_ptr<Runner> Make(int64_t prefill_chunk = 1024, int slots = 6) {
    auto runner = h3::testing::MakeRunner(*file_, MakeCpuBackend(activations_),
                                          slots, kContext, prefill_chunk);
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  std::vector<int32_t> Tokens(int n, int seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % config_.vocab_size);
    return t;
  }

  // The last logits after feeding `tokens` to a fresh slot in steps of the
  // given sizes (the last size repeats).
  std::vector<float> Split(Runner& runner, const std::vector<int32_t>& tokens,
                           std::vector<int64_t> sizes) {
    const SlotId slot = *runner.memory().Acquire();
    std::vector<float> logits;
    size_t k = 0;
    for (size_t done = 0; done < tokens.size();
         k = std::min(k + 1, sizes.size() - 1)) {
      const size_t n = std::min<size_t>(sizes[k], tokens.size() - done);
      EXPECT_TRUE(Feed(runner, slot,
                       absl::MakeConstSpan(tokens).subspan(done, n), &logits)
                      .ok());
      done += n;
    }
    runner.memory().Release(slot);
    return logits;
  }

  static constexpr int64_t kContext = 1200;
  loader::ModelConfig config_;
  ElementType activations_ = ElementType::kF32;
  std::unique_ptr<loader::ModelFile> file_;
};

TEST_P(RunnerTest, PromptSplitsGiveTheLogitsOfOnePrefillBitwise) {
  auto runner = Make();
  const auto tokens = Tokens(1100, 1);
  const std::vector<float> whole = Split(*runner, tokens, {1100});
  for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{
           {1}, {7}, {64}, {1000}, {3, 500, 13}}) {
    EXPECT_EQ(Split(*runner, tokens, sizes), whole)
        << "steps of " << sizes[0] << ", ...";
  }
  // And H3 prefill calls of 7 tokens inside each step.
  EXPECT_EQ(Split(*Make(7), tokens, {1100}), whole);
}

TEST_P(RunnerTest, ASequenceGetsItsSoloLogitsInAnyMixedStep) {
  auto runner = Make();
  // Sequence under test: a prompt of 40, then single tokens.
  const auto prompt = Tokens(40, 2);
  const std::vector<int32_t> more = {5, 9, 13, 60};
  std::vector<std::vector<float>> solo;
  {
    const SlotId slot = *runner->memory().Acquire();
    std::vector<float> logits;
    ASSERT_TRUE(Feed(*runner, slot, prompt, &logits).ok());
    solo.push_back(logits);
    for (int32_t t : more) {
      ASSERT_TRUE(Feed(*runner, slot, {&t, 1}, &logits).ok());
      solo.push_back(logits);
    }
    runner->memory().Release(slot);
  }
  // The same, with other sequences' prompt chunks and single tokens in every
  // step, the sequence at a different row each time.
  std::vector<SlotId> others;
  for (int i = 0; i < 4; ++i) others.push_back(*runner->memory().Acquire());
  const SlotId slot = *runner->memory().Acquire();
  const auto filler = Tokens(300, 3);
  for (size_t step = 0; step <= more.size(); ++step) {
    StepPlan plan;
    for (size_t i = 0; i < others.size(); ++i) {
      // Others alternate between single tokens and chunks of 1..37 tokens.
      const size_t n = (i + step) % 2 == 0 ? 1 : 1 + (7 * i + 11 * step) % 37;
      plan.sequences.push_back(
          {.slot = others[i],
           .tokens = absl::MakeConstSpan(filler).subspan(10 * i + step, n),
           .sample = i % 2 == 0,
           .sampling = {.temperature = 0.7f, .seed = i},
           .logits = i == 3});
    }
    const SequenceStep self{
        .slot = slot,
        .tokens = step == 0 ? absl::MakeConstSpan(prompt)
                            : absl::MakeConstSpan(&more[step - 1], 1),
        .logits = true};
    const size_t row = step % (others.size() + 1);
    plan.sequences.insert(plan.sequences.begin() + row, self);
    StepResult result;
    ASSERT_TRUE(runner->Execute(plan, &result).ok());
    const float* got = result.LogitsOf(row);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(std::vector<float>(got, got + config_.padded_vocab_size),
              solo[step])
        << "step " << step << " at row " << row;
  }
}

TEST_P(RunnerTest, PrefillEqualsTokenByTokenFeedingBitwise) {
  auto runner = Make();
  const auto tokens = Tokens(70, 4);
  EXPECT_EQ(Split(*runner, tokens, {1}), Split(*runner, tokens, {70}));
}

TEST_P(RunnerTest, CopiedStateContinuesLikeTheOriginal) {
  auto runner = Make();
  SequenceMemory& memory = runner->memory();
  const SlotId original = *memory.Acquire(), copy = *memory.Acquire();
  std::vector<float> a, b;
  ASSERT_TRUE(Feed(*runner, original, Tokens(20, 3), &a).ok());
  ASSERT_TRUE(memory.Copy(original, copy).ok());
  EXPECT_EQ(memory.position(copy), 20);
  const auto more = Tokens(6, 4);
  ASSERT_TRUE(Feed(*runner, original, more, &a).ok());
  ASSERT_TRUE(Feed(*runner, copy, more, &b).ok());
  EXPECT_EQ(b, a);
}

TEST_P(RunnerTest, BadPlansAreRefusedAndLeaveTheStateAlone) {
  auto runner = Make();
  const SlotId slot = *runner->memory().Acquire();
  // 61 is a padding row of the embedding (vocab_size 61, padded to 64): not
  // a token.
  for (int32_t id : {-1, 61, 64}) {
    const std::vector<int32_t> bad = {1, id};
    const absl::Status s = Feed(*runner, slot, bad, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_NE(s.message().find("[0, 61)"), std::string::npos) << s.message();
  }
  const auto too_long = Tokens(kContext + 1, 5);
  const absl::Status s = Feed(*runner, slot, too_long, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("this server allows 1200"), std::string::npos)
      << s.message();
  EXPECT_EQ(runner->memory().position(slot), 0);
}

INSTANTIATE_TEST_SUITE_P(
    HeadDimRotaryActivations, RunnerTest,
    ::testing::Values(RunnerParam{1, 0, ElementType::kF32},
                      RunnerParam{1, 4, ElementType::kF32},
                      RunnerParam{2, 0, ElementType::kF32},
                      RunnerParam{1, 4, ElementType::kF16},
                      RunnerParam{2, 0, ElementType::kBF16}),
    [](const auto& info) {
      return "p" + std::to_string(std::get<0>(info.param)) + "_rotary" +
             std::to_string(std::get<1>(info.param)) + "_" +
             ElementTypeName(std::get<2>(info.param));
    });

}  // namespace
}  // namespace h3::engine
