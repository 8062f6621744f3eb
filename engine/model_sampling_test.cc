// Sampling on the model's backend (StepSampling): the ids a prefill or a
// decode step samples are the ones the specification (SampleCpu) draws from
// the same logits with a history kept by hand, the history counts the draws,
// and the token flags ban and unban.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/model.h"
#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/random_model.h"

namespace h3::engine {
namespace {

// A history kept on the host, for SampleCpu.
struct HostHistory {
  std::vector<int32_t> counts;
  std::vector<uint8_t> flags;
};

class ModelSamplingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = h3::testing::SmallHybridConfig(61);
    config_.padded_vocab_size = 64;  // three rows that are never tokens
    const std::string path = ::testing::TempDir() + "/model_sampling.h3";
    ASSERT_TRUE(h3::testing::WriteRandomModel(config_, path).ok());
    auto file = loader::ModelFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
    auto model = Model::Load(*file_, MakeCpuBackend(), {1024, 256});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
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
  std::unique_ptr<Model> model_;
};

TEST_F(ModelSamplingTest, PrefillAndDecodeSampleWhatTheSpecificationDraws) {
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
  std::vector<std::unique_ptr<SequenceState>> seqs;
  std::vector<HostHistory> histories;
  std::vector<int32_t> next(n);
  const int64_t v_pad = config_.padded_vocab_size;
  std::vector<float> logits(n * v_pad);
  for (size_t i = 0; i < n; ++i) {
    seqs.push_back(*model_->NewSequence());
    histories.push_back(EmptyHistory());
    for (int32_t id : prompts[i]) {
      histories[i].flags[id] |= kernels::kTokenInPrompt;
    }
    ASSERT_TRUE(model_->SetTokenFlags(*seqs[i], histories[i].flags).ok());
    float logprob = 0;
    const StepSampling sampling{{&params[i], 1}, &next[i], &logprob};
    ASSERT_TRUE(
        model_->Prefill(*seqs[i], prompts[i], logits.data(), &sampling).ok());
    const auto [id, want_logprob] =
        Expected(logits.data(), params[i], histories[i]);
    EXPECT_EQ(next[i], id) << "prefill of sequence " << i;
    EXPECT_FLOAT_EQ(logprob, want_logprob);
  }
  std::vector<SequenceState*> ptrs;
  for (auto& s : seqs) ptrs.push_back(s.get());
  std::vector<kernels::SamplingRow> rows = params;
  std::set<int32_t> distinct;
  for (int step = 1; step <= 12; ++step) {
    for (auto& row : rows) row.step = step;
    std::vector<int32_t> ids(n);
    std::vector<float> logprobs(n);
    const StepSampling sampling{rows, ids.data(), logprobs.data()};
    ASSERT_TRUE(model_->Decode(ptrs, next, logits.data(), &sampling).ok());
    for (size_t i = 0; i < n; ++i) {
      const auto [id, logprob] =
          Expected(logits.data() + i * v_pad, rows[i], histories[i]);
      ASSERT_EQ(ids[i], id) << "step " << step << ", sequence " << i;
      EXPECT_FLOAT_EQ(logprobs[i], logprob);
      distinct.insert(id);
    }
    next = ids;
  }
  // The penalised, tempered rows do draw: not one token throughout.
  EXPECT_GT(distinct.size(), 3u);
}

TEST_F(ModelSamplingTest, BannedTokensAreNeverChosenUntilUnbanned) {
  auto seq = *model_->NewSequence();
  const std::vector<int32_t> prompt = {3, 1, 4};
  std::vector<float> logits(config_.padded_vocab_size);
  const kernels::SamplingRow greedy{.temperature = 0.0f};
  int32_t id = -1;
  const StepSampling sampling{{&greedy, 1}, &id, nullptr};
  ASSERT_TRUE(model_->Prefill(*seq, prompt, logits.data(), &sampling).ok());
  const int32_t best = id;
  // Ban the greedy choice: the runner-up comes instead.
  std::vector<uint8_t> flags(config_.vocab_size);
  flags[best] = kernels::kTokenBanned;
  ASSERT_TRUE(model_->ResetSequence(*seq).ok());
  ASSERT_TRUE(model_->SetTokenFlags(*seq, flags).ok());
  ASSERT_TRUE(model_->Prefill(*seq, prompt, logits.data(), &sampling).ok());
  std::vector<float> others(logits.begin(),
                            logits.begin() + config_.vocab_size);
  others[best] = -1e30f;
  EXPECT_EQ(id,
            std::max_element(others.begin(), others.end()) - others.begin());
  // Reset clears the flags.
  ASSERT_TRUE(model_->ResetSequence(*seq).ok());
  ASSERT_TRUE(model_->Prefill(*seq, prompt, logits.data(), &sampling).ok());
  EXPECT_EQ(id, best);
}

TEST_F(ModelSamplingTest, ResetClearsTheCounts) {
  // A strong frequency penalty makes each step depend on the counts.
  const kernels::SamplingRow row{.temperature = 0.0f,
                                 .frequency_penalty = 2.0f};
  const std::vector<int32_t> prompt = {7, 7, 7};
  auto run = [&](SequenceState& seq) {
    std::vector<int32_t> out;
    int32_t id = -1;
    const StepSampling one{{&row, 1}, &id, nullptr};
    EXPECT_TRUE(model_->Prefill(seq, prompt, nullptr, &one).ok());
    out.push_back(id);
    for (int step = 0; step < 8; ++step) {
      SequenceState* s = &seq;
      const int32_t token = id;
      EXPECT_TRUE(model_->Decode({&s, 1}, {&token, 1}, nullptr, &one).ok());
      out.push_back(id);
    }
    return out;
  };
  auto seq = *model_->NewSequence();
  const std::vector<int32_t> first = run(*seq);
  ASSERT_TRUE(model_->ResetSequence(*seq).ok());
  EXPECT_EQ(run(*seq), first);
  // The penalty spreads the choices (greedy alone may repeat one token).
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 2u);
}

TEST_F(ModelSamplingTest, MismatchedArgumentsAreRefused) {
  auto seq = *model_->NewSequence();
  EXPECT_EQ(model_->SetTokenFlags(*seq, std::vector<uint8_t>(5)).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<kernels::SamplingRow> two(2);
  int32_t ids[2];
  const StepSampling sampling{two, ids, nullptr};
  const int32_t token = 1;
  SequenceState* s = seq.get();
  EXPECT_EQ(model_->Decode({&s, 1}, {&token, 1}, nullptr, &sampling).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->Prefill(*seq, {&token, 1}, nullptr, &sampling).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(seq->position(), 0);
}

}  // namespace
}  // namespace h3::engine
