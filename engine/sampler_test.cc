#include "engine/sampler.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace h3::engine {
namespace {

// Logits whose softmax is `probs`.
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

Sampler Make(const SamplingParams& params, int32_t vocab,
             std::vector<int32_t> prompt = {}) {
  absl::StatusOr<Sampler> s = Sampler::Create(params, vocab, prompt);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// How often each id is drawn in n draws.
std::vector<double> Frequencies(Sampler& s, const std::vector<float>& logits,
                                int n) {
  std::vector<double> freq(logits.size());
  for (int i = 0; i < n; ++i) freq[s.Sample(logits).id] += 1.0 / n;
  return freq;
}

TEST(SamplingParams, BadValuesNameTheField) {
  const struct {
    SamplingParams params;
    const char* field;
  } cases[] = {
      {{.temperature = -1}, "temperature"},
      {{.temperature = NAN}, "temperature"},
      {{.top_k = -3}, "top_k"},
      {{.top_p = 0}, "top_p"},
      {{.top_p = 1.5}, "top_p"},
      {{.min_p = -0.1f}, "min_p"},
      {{.repetition_penalty = 0}, "repetition_penalty"},
      {{.presence_penalty = 2.5}, "presence_penalty"},
      {{.frequency_penalty = -3}, "frequency_penalty"},
  };
  for (const auto& c : cases) {
    const absl::Status s = ValidateSamplingParams(c.params);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
  }
  EXPECT_TRUE(ValidateSamplingParams({}).ok());
}

TEST(Sampler, GreedyTakesTheFirstMaximumAndIgnoresPadding) {
  // Ids 4 and 5 are padding rows with larger logits: never candidates.
  const std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f, 9.0f, 9.0f};
  Sampler s = Make({.temperature = 0}, /*vocab=*/4);
  EXPECT_EQ(s.Sample(logits).id, 1);
  Sampler sampled = Make({.seed = 1}, 4);
  for (int i = 0; i < 200; ++i) EXPECT_LT(sampled.Sample(logits).id, 4);
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  const std::vector<float> logits(16, 0.0f);
  Sampler a = Make({.seed = 7}, 16), b = Make({.seed = 7}, 16),
          c = Make({.seed = 8}, 16);
  int differ = 0;
  for (int i = 0; i < 64; ++i) {
    const int32_t x = a.Sample(logits).id;
    EXPECT_EQ(x, b.Sample(logits).id);
    differ += x != c.Sample(logits).id;
  }
  EXPECT_GT(differ, 32);
}

TEST(Sampler, FollowsTheDistributionAndTemperature) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  Sampler s = Make({.seed = 3}, 4);
  std::vector<double> f = Frequencies(s, LogitsOf(p), 40000);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], p[i], 0.01) << i;
  // Temperature 2 draws from p^(1/2), renormalised.
  Sampler hot = Make({.temperature = 2, .seed = 4}, 4);
  f = Frequencies(hot, LogitsOf(p), 40000);
  double z = 0;
  for (double x : p) z += std::sqrt(x);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], std::sqrt(p[i]) / z, 0.01);
}

TEST(Sampler, TopKTopPAndMinPKeepTheRightTokens) {
  const std::vector<float> logits = LogitsOf({0.05, 0.5, 0.15, 0.3});
  const struct {
    SamplingParams params;
    std::vector<double> expected;
  } cases[] = {
      {{.top_k = 2}, {0, 0.5 / 0.8, 0, 0.3 / 0.8}},
      {{.top_p = 0.7f}, {0, 0.5 / 0.8, 0, 0.3 / 0.8}},
      {{.top_p = 0.45f}, {0, 1, 0, 0}},
      {{.top_p = 0.81f}, {0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95}},
      // 0.3 / 0.5 = 0.6 stays, 0.15 / 0.5 = 0.3 goes.
      {{.min_p = 0.5f}, {0, 0.5 / 0.8, 0, 0.3 / 0.8}},
      {{.top_k = 3, .top_p = 0.9f, .min_p = 0.35f},
       {0, 0.5 / 0.8, 0, 0.3 / 0.8}},
  };
  uint64_t seed = 10;
  for (const auto& c : cases) {
    SamplingParams params = c.params;
    params.seed = ++seed;
    Sampler s = Make(params, 4);
    const std::vector<double> f = Frequencies(s, logits, 20000);
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(f[i], c.expected[i], 0.015) << "case " << seed << " id " << i;
      if (c.expected[i] == 0) {
        EXPECT_EQ(f[i], 0) << "case " << seed;
      }
    }
  }
}

TEST(Sampler, RepetitionPenaltyCoversPromptAndOutput) {
  // Id 0 leads; the prompt has it, so a penalty of 2 halves its logit.
  const std::vector<float> logits = {2.0f, 1.5f, -1.0f, -0.5f};
  Sampler s = Make({.temperature = 0, .repetition_penalty = 2}, 4, {0, 2});
  EXPECT_EQ(s.Sample(logits).id, 1);  // 1.0 < 1.5
  // Now 1 was generated too: 0.75 < 1.0, so 0 wins again.
  EXPECT_EQ(s.Sample(logits).id, 0);
  // Negative logits are multiplied: id 1 falls from -1.0 to -2.0.
  Sampler neg = Make({.temperature = 0, .repetition_penalty = 2}, 2, {1});
  EXPECT_EQ(neg.Sample(std::vector<float>{-1.5f, -1.0f}).id, 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountOutputOnly) {
  const std::vector<float> logits = {1.0f, 0.9f, 0.0f};
  // The prompt does not count for these penalties.
  Sampler s = Make({.temperature = 0, .presence_penalty = 0.05f,
                    .frequency_penalty = 0.1f},
                   3, {0, 0, 0});
  EXPECT_EQ(s.Sample(logits).id, 0);  // 1.0 vs 0.9
  EXPECT_EQ(s.Sample(logits).id, 1);  // 0.85 vs 0.9
  EXPECT_EQ(s.Sample(logits).id, 0);  // 0.85 vs 0.75
  s.Accept(0);                        // 0.65 vs 0.75
  EXPECT_EQ(s.Sample(logits).id, 1);
}

TEST(Sampler, LogprobsAreTheModelsLogSoftmax) {
  const std::vector<float> logits = {0.3f, -2.0f, 1.7f, 1.7f, 0.0f, 50.0f};
  Sampler s = Make({.temperature = 0, .repetition_penalty = 3}, 5, {2});
  const SampledToken t = s.Sample(logits, /*logprobs=*/3);
  double z = 0;
  for (int i = 0; i < 5; ++i) z += std::exp(double{logits[i]});
  // The penalty changed the choice (3 rather than 2), not the logprobs.
  EXPECT_EQ(t.id, 3);
  EXPECT_NEAR(t.logprob, logits[3] - std::log(z), 1e-6);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].id, 2);
  EXPECT_EQ(t.top[1].id, 3);
  EXPECT_EQ(t.top[2].id, 0);
  EXPECT_NEAR(t.top[2].logprob, logits[0] - std::log(z), 1e-6);
  EXPECT_TRUE(s.Sample(logits).top.empty());
}

}  // namespace
}  // namespace h3::engine
