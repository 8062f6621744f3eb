// Sampling on the backend in the Runner's steps: the ids a prompt chunk or
// a single-token step samples are the ones the specification (SampleCpu)
// draws from the same logits with a history kept by hand, the history counts
// the draws, and the token flags ban and unban.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/runner.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/random_model.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

// A history kept on the host, for SampleCpu.
struct HostHistory {
  std::vector<int32_t> counts;
  std::vector<uint8_t> flags;
};

class RunnerSamplingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = h3::testing::SmallHybridConfig(61);
    config_.padded_vocab_size = 64;  // three rows that are never tokens
    const std::string path = h3::testing::TempPath("model_sampling.h3");
    ASSERT_TRUE(h3::testing::WriteRandomModel(config_, path).ok());
    auto file = loader::ModelFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
    auto model = Model::Load(*file_, MakeCpuBackend(), {});
    ASSERT_TRUE(model.ok()) << model.status();
    auto runner = Runner::Create(*std::move(model),
                                 {.slots = 4, .max_sequence_length = 256});
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = *std::move(runner);
  }

  SequenceMemory& memory() { return runner_->memory(); }

  // One step feeding `tokens` to `slot`, sampling with `row`; the logits the
  // draw saw into *logits.
  std::pair<int32_t, float> Sample(SlotId slot,
                                   absl::Span<const int32_t> tokens,
                                   const kernels::SamplingRow& row,
                                   std::vector<float>* logits = nullptr) {
    StepPlan plan;
    plan.sequences.push_back({.slot = slot,
                              .tokens = tokens,
                              .sample = true,
                              .sampling = row,
                              .logits = logits != nullptr});
    StepResult result;
    const absl::Status status = runner_->Execute(plan, &result);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) return {-1, 0.0f};
    if (logits != nullptr) *logits = result.logits;
    return {result.ids[0], result.logprobs[0]};
  }

  HostHistory EmptyHistory() const {
    return {std::vector<int32_t>(config_.vocab_size),
            std::vector<uint8_t>(config_.vocab_size)};
  }

  // What the specification samples from one row of `logits`, counting the
  // draw in `history`.
  std::pair<int32_t, float> Expected(const float* logits,
                                     const kernels::SamplingRow& row,
                                     HostHistory& history) const {
    kernels::TokenHistory h{history.counts.data(), history.flags.data()};
    int32_t id = -1;
    float logprob = 0;
    kernels::SampleParams p;
    p.batch = 1;
    p.vocab_size = static_cast<int32_t>(config_.vocab_size);
    p.row_stride = config_.padded_vocab_size;
    p.logits = logits;
    p.rows = &row;
    p.histories = &h;
    p.ids = &id;
    p.logprobs = &logprob;
    kernels::SampleCpu(p);
    return {id, logprob};
  }

  loader::ModelConfig config_;
  std::unique_ptr<loader::ModelFile> file_;
  std::unique_ptr<Runner> runner_;
};

TEST_F(RunnerSamplingTest, PrefillAndDecodeSampleWhatTheSpecificationDraws) {
  // Greedy; tempered top-k; penalties with top-p and min-p.
  const std::vector<kernels::SamplingRow> params = {
      {.temperature = 0.0f, .seed = 1},
      {.temperature = 0.8f, .top_k = 5, .seed = 2},
      {.temperature = 1.2f,
       .top_p = 0.9f,
       .min_p = 0.02f,
       .repetition_penalty = 1.5f,
       .presence_penalty = 0.7f,
       .frequency_penalty = 0.4f,
       .seed = 3},
  };
  const std::vector<std::vector<int32_t>> prompts = {
      {4, 8, 15}, {16, 23, 42, 4, 8}, {1, 1, 2, 3, 5, 8, 13}};
  const size_t n = prompts.size();
  std::vector<SlotId> slots;
  std::vector<HostHistory> histories;
  std::vector<int32_t> next(n);
  std::vector<float> logits;
  for (size_t i = 0; i < n; ++i) {
    slots.push_back(*memory().Acquire());
    histories.push_back(EmptyHistory());
    for (int32_t id : prompts[i]) {
      histories[i].flags[id] |= kernels::kTokenInPrompt;
    }
    ASSERT_TRUE(memory().SetTokenFlags(slots[i], histories[i].flags).ok());
    const auto [got, logprob] =
        Sample(slots[i], prompts[i], params[i], &logits);
    const auto [id, want_logprob] =
        Expected(logits.data(), params[i], histories[i]);
    EXPECT_EQ(got, id) << "prefill of sequence " << i;
    EXPECT_FLOAT_EQ(logprob, want_logprob);
    next[i] = got;
  }
  std::vector<kernels::SamplingRow> rows = params;
  std::set<int32_t> distinct;
  for (int step = 1; step <= 12; ++step) {
    StepPlan plan;
    for (size_t i = 0; i < n; ++i) {
      rows[i].step = step;
      plan.sequences.push_back({.slot = slots[i],
                                .tokens = absl::MakeConstSpan(&next[i], 1),
                                .sample = true,
                                .sampling = rows[i],
                                .logits = true});
    }
    StepResult result;
    ASSERT_TRUE(runner_->Execute(plan, &result).ok());
    for (size_t i = 0; i < n; ++i) {
      const auto [id, logprob] =
          Expected(result.LogitsOf(i), rows[i], histories[i]);
      ASSERT_EQ(result.ids[i], id) << "step " << step << ", sequence " << i;
      EXPECT_FLOAT_EQ(result.logprobs[i], logprob);
      distinct.insert(id);
    }
    next = result.ids;
  }
  // The penalised, tempered rows do draw: not one token throughout.
  EXPECT_GT(distinct.size(), 3u);
}

TEST_F(RunnerSamplingTest, BannedTokensAreNeverChosenUntilUnbanned) {
  const SlotId slot = *memory().Acquire();
  const std::vector<int32_t> prompt = {3, 1, 4};
  const kernels::SamplingRow greedy{.temperature = 0.0f};
  std::vector<float> logits;
  const int32_t best = Sample(slot, prompt, greedy).first;
  // Ban the greedy choice: the runner-up comes instead.
  std::vector<uint8_t> flags(config_.vocab_size);
  flags[best] = kernels::kTokenBanned;
  ASSERT_TRUE(memory().Reset(slot).ok());
  ASSERT_TRUE(memory().SetTokenFlags(slot, flags).ok());
  const int32_t id = Sample(slot, prompt, greedy, &logits).first;
  std::vector<float> others(logits.begin(),
                            logits.begin() + config_.vocab_size);
  others[best] = -1e30f;
  EXPECT_EQ(id,
            std::max_element(others.begin(), others.end()) - others.begin());
  // Reset clears the flags.
  ASSERT_TRUE(memory().Reset(slot).ok());
  EXPECT_EQ(Sample(slot, prompt, greedy).first, best);
}

TEST_F(RunnerSamplingTest, ResetClearsTheCounts) {
  // A strong frequency penalty makes each step depend on the counts.
  const kernels::SamplingRow row{.temperature = 0.0f,
                                 .frequency_penalty = 2.0f};
  const std::vector<int32_t> prompt = {7, 7, 7};
  const SlotId slot = *memory().Acquire();
  auto run = [&] {
    std::vector<int32_t> out = {Sample(slot, prompt, row).first};
    for (int step = 0; step < 8; ++step) {
      const int32_t token = out.back();
      out.push_back(Sample(slot, {&token, 1}, row).first);
    }
    return out;
  };
  const std::vector<int32_t> first = run();
  ASSERT_TRUE(memory().Reset(slot).ok());
  EXPECT_EQ(run(), first);
  // The penalty spreads the choices (greedy alone may repeat one token).
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 2u);
}

TEST_F(RunnerSamplingTest, BrokenPlansAreRefusedAndChangeNothing) {
  const SlotId slot = *memory().Acquire();
  EXPECT_EQ(memory().SetTokenFlags(slot, std::vector<uint8_t>(5)).code(),
            absl::StatusCode::kInvalidArgument);
  const int32_t token = 1;
  StepResult result;
  auto refused = [&](StepPlan plan) {
    return runner_->Execute(plan, &result).code() ==
           absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused({}));                                      // empty
  EXPECT_TRUE(refused({{{.slot = 3, .tokens = {&token, 1}}}}));  // not taken
  EXPECT_TRUE(refused({{{.slot = slot, .tokens = {}}}}));        // no tokens
  EXPECT_TRUE(refused({{{.slot = slot, .tokens = {&token, 1}},
                        {.slot = slot, .tokens = {&token, 1}}}}));  // twice
  EXPECT_EQ(memory().position(slot), 0);
}

}  // namespace
}  // namespace h3::engine
