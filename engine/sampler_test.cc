#include "engine/sampler.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace h3::engine {
namespace {

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

TEST(SamplingRowOf, CarriesEveryParameterTheSeedAndTheStep) {
  const SamplingParams params{.temperature = 0.7f,
                              .top_k = 40,
                              .top_p = 0.9f,
                              .min_p = 0.05f,
                              .repetition_penalty = 1.3f,
                              .presence_penalty = 0.5f,
                              .frequency_penalty = -0.25f,
                              .seed = 99};
  const kernels::SamplingRow row = SamplingRowOf(params, 1234, 7);
  EXPECT_EQ(row.temperature, 0.7f);
  EXPECT_EQ(row.top_k, 40);
  EXPECT_EQ(row.top_p, 0.9f);
  EXPECT_EQ(row.min_p, 0.05f);
  EXPECT_EQ(row.repetition_penalty, 1.3f);
  EXPECT_EQ(row.presence_penalty, 0.5f);
  EXPECT_EQ(row.frequency_penalty, -0.25f);
  EXPECT_EQ(row.seed, 1234u);  // the caller resolves params.seed
  EXPECT_EQ(row.step, 7u);
}

TEST(TopLogprobs, AreTheModelsLogSoftmaxBestFirst) {
  // Index 5 pads the vocabulary: neither listed nor in the normaliser.
  const std::vector<float> logits = {0.3f, -2.0f, 1.7f, 1.7f, 0.0f, 50.0f};
  double z = 0;
  for (int i = 0; i < 5; ++i) z += std::exp(double{logits[i]});
  const std::vector<TokenLogprob> top = TopLogprobs(logits, 5, 5, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 2);  // ties: the lower id first
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 0);
  EXPECT_NEAR(top[0].logprob, logits[2] - std::log(z), 1e-6);
  EXPECT_NEAR(top[2].logprob, logits[0] - std::log(z), 1e-6);
  EXPECT_TRUE(TopLogprobs(logits, 5, 5, 0).empty());
}

TEST(TopLogprobs, ListOnlyTheFirstIdsButNormaliseOverTheVocabulary) {
  const std::vector<float> logits = {0.5f, -1.0f, 3.0f};
  double z = 0;
  for (float x : logits) z += std::exp(double{x});
  const std::vector<TokenLogprob> top = TopLogprobs(logits, 3, 2, 5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, 0);
  EXPECT_EQ(top[1].id, 1);
  EXPECT_NEAR(top[1].logprob, logits[1] - std::log(z), 1e-6);
}

}  // namespace
}  // namespace h3::engine
