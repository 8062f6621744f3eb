// SampleCpu, the specification of kernels/sampling.h, on logits small enough
// to work out by hand; and the Philox generator its draw uses.
#include "kernels/sampling.h"

#include <cmath>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/philox.h"

namespace h3::kernels {
namespace {

TEST(PhiloxTest, Random123KnownAnswers) {
  const Philox4 zero = Philox4x32(0, {{0u, 0u, 0u, 0u}});
  EXPECT_EQ(zero.x[0], 0x6627e8d5u);
  EXPECT_EQ(zero.x[1], 0xe169c58du);
  EXPECT_EQ(zero.x[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.x[3], 0x9b00dbd8u);
  const Philox4 ones = Philox4x32(~uint64_t{0}, {{~0u, ~0u, ~0u, ~0u}});
  EXPECT_EQ(ones.x[0], 0x408f276du);
  EXPECT_EQ(ones.x[1], 0x41c83b0eu);
  EXPECT_EQ(ones.x[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.x[3], 0x6d5451fdu);
}

TEST(PhiloxTest, UniformIsInUnitIntervalWithMeanOneHalf) {
  double sum = 0;
  int n = 0;
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}}) {
    for (uint64_t step = 0; step < 100000; ++step, ++n) {
      const float u = PhiloxUniform(seed, step + (seed << 40));
      ASSERT_GE(u, 0.0f);
      ASSERT_LT(u, 1.0f);
      sum += u;
    }
  }
  // The mean's standard deviation is 0.29 / sqrt(n) = 5e-4.
  EXPECT_NEAR(sum / n, 0.5, 5e-3);
}

SamplingRow Row(float temperature) {
  SamplingRow row;
  row.temperature = temperature;
  row.seed = 1234;
  return row;
}

struct Sampled {
  int32_t id;
  float logprob;
};

// One row; empty counts / flags: none (no history when both are). The
// counts are a copy: the sampler's increment stays here.
Sampled SampleOne(const std::vector<float>& logits, const SamplingRow& row,
                  std::vector<int32_t> counts = {},
                  std::vector<uint8_t> flags = {}) {
  Sampled out{-1, 0.0f};
  const TokenHistory history{counts.empty() ? nullptr : counts.data(),
                             flags.empty() ? nullptr : flags.data()};
  SampleParams p;
  p.batch = 1;
  p.vocab_size = static_cast<int32_t>(logits.size());
  p.row_stride = p.vocab_size;
  p.logits = logits.data();
  p.rows = &row;
  if (!counts.empty() || !flags.empty()) p.histories = &history;
  p.ids = &out.id;
  p.logprobs = &out.logprob;
  SampleCpu(p);
  return out;
}

// How often each id is drawn over steps [0, n) of `row`'s seed, sampled as
// one batch of n rows, each with its own copy of `flags` (empty: none).
std::vector<int> Histogram(const std::vector<float>& logits, SamplingRow row,
                           int n, const std::vector<uint8_t>& flags = {}) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  std::vector<float> all;
  std::vector<uint8_t> all_flags;
  std::vector<SamplingRow> rows(n, row);
  for (int i = 0; i < n; ++i) {
    all.insert(all.end(), logits.begin(), logits.end());
    all_flags.insert(all_flags.end(), flags.begin(), flags.end());
    rows[i].step = i;
  }
  std::vector<TokenHistory> histories(n);
  if (!flags.empty()) {
    for (int i = 0; i < n; ++i) histories[i].flags = &all_flags[i * vocab];
  }
  std::vector<int32_t> ids(n, -1);
  SampleParams p;
  p.batch = n;
  p.vocab_size = vocab;
  p.row_stride = vocab;
  p.logits = all.data();
  p.rows = rows.data();
  p.histories = flags.empty() ? nullptr : histories.data();
  p.ids = ids.data();
  SampleCpu(p);
  std::vector<int> hist(vocab, 0);
  for (int32_t id : ids) ++hist.at(id);
  return hist;
}

std::set<int> Drawn(const std::vector<float>& logits, const SamplingRow& row,
                    const std::vector<uint8_t>& flags = {}) {
  const std::vector<int> hist = Histogram(logits, row, 2000, flags);
  std::set<int> ids;
  for (size_t i = 0; i < hist.size(); ++i) {
    if (hist[i] > 0) ids.insert(static_cast<int>(i));
  }
  return ids;
}

std::vector<float> LogOf(const std::vector<double>& p) {
  std::vector<float> logits;
  for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
  return logits;
}

double LogSumExp(const std::vector<float>& x) {
  double sum = 0;
  for (float v : x) sum += std::exp(double{v});
  return std::log(sum);
}

TEST(SampleCpuTest, GreedyTakesTheLowestIdAmongEqualMaxima) {
  const std::vector<float> logits = {1.0f, 3.0f, 0.5f, 3.0f};
  SamplingRow row = Row(0.0f);
  row.top_k = 1;  // the filters do not apply to greedy rows
  row.top_p = 0.1f;
  const Sampled s = SampleOne(logits, row);
  EXPECT_EQ(s.id, 1);
  EXPECT_NEAR(s.logprob, 3.0 - LogSumExp(logits), 1e-6);
}

TEST(SampleCpuTest, TopKKeepsTheLowerIdsOfATieAtTheBoundary) {
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, 2.0f, 0.0f};
  SamplingRow row = Row(1.0f);
  row.top_k = 2;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{1, 2}));
  row.top_k = 1;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{1}));
  row.top_k = 4;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{0, 1, 2, 3}));
}

TEST(SampleCpuTest, TopPKeepsTheSmallestMostLikelySetReachingIt) {
  // Most likely first: 1 (0.5), 3 (0.3), 0 (0.15), 2 (0.05).
  const std::vector<float> logits = LogOf({0.15, 0.5, 0.05, 0.3});
  SamplingRow row = Row(1.0f);
  row.top_p = 0.4f;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{1}));
  row.top_p = 0.79f;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{1, 3}));
  row.top_p = 0.81f;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{0, 1, 3}));
  row.top_p = 0.96f;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{0, 1, 2, 3}));
}

TEST(SampleCpuTest, TopPTakesLowerIdsFirstAmongEqualTokens) {
  const std::vector<float> logits(4, 0.0f);
  SamplingRow row = Row(1.0f);
  row.top_p = 0.2f;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{0}));
  row.top_p = 0.3f;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{0, 1}));
}

TEST(SampleCpuTest, MinPDropsTokensBelowAFractionOfTheMostLikely) {
  const std::vector<float> logits = LogOf({0.4, 0.2, 0.1, 0.3});
  SamplingRow row = Row(1.0f);
  row.min_p = 0.6f;  // keeps p >= 0.24
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{0, 3}));
  row.min_p = 0.45f;  // keeps p >= 0.18
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{0, 1, 3}));
}

TEST(SampleCpuTest, RepetitionPenaltyMakesSeenTokensLessLikely) {
  // Penalised: {2 / 2, -1 * 2, 1.5, 0.5}: token 0 (prompt) drops below 2.
  const std::vector<float> logits = {2.0f, -1.0f, 1.5f, 0.5f};
  SamplingRow row = Row(0.0f);
  row.repetition_penalty = 2.0f;
  EXPECT_EQ(SampleOne(logits, row, {0, 1, 0, 0}, {kTokenInPrompt, 0, 0, 0}).id,
            2);
  EXPECT_EQ(SampleOne(logits, row).id, 0);  // nothing seen
  // Only the prompt bit counts: a banned token elsewhere changes nothing.
  EXPECT_EQ(SampleOne(logits, row, {}, {kTokenInPrompt, 0, 0, kTokenBanned}).id,
            2);
  EXPECT_EQ(SampleOne(logits, row, {}, {0, 0, 0, kTokenBanned}).id, 0);
  // A negative logit is multiplied: -1 * 2 < -1.5.
  EXPECT_EQ(SampleOne({-1.0f, -1.5f}, row, {}, {kTokenInPrompt, 0}).id, 1);
  EXPECT_EQ(SampleOne({-1.0f, -1.5f}, row, {1, 0}, {}).id, 1);
  row.repetition_penalty = 1.0f;  // off
  EXPECT_EQ(SampleOne({-1.0f, -1.5f}, row, {}, {kTokenInPrompt, 0}).id, 0);
}

TEST(SampleCpuTest, PresenceAndFrequencyPenaltiesSubtractPerCount) {
  const std::vector<float> logits = {3.0f, 2.5f, 1.0f};
  const std::vector<int32_t> counts = {2, 0, 0};
  SamplingRow row = Row(0.0f);
  row.presence_penalty = 0.5f;  // 3 - 0.5 == 2.5: a tie, to the lower id
  EXPECT_EQ(SampleOne(logits, row, counts).id, 0);
  row.frequency_penalty = 0.1f;  // 3 - 0.5 - 2 * 0.1 < 2.5
  const Sampled s = SampleOne(logits, row, counts);
  EXPECT_EQ(s.id, 1);
  // logprobs see the model's logits, not the penalised ones.
  EXPECT_NEAR(s.logprob, 2.5 - LogSumExp(logits), 1e-6);
  row.presence_penalty = 0.0f;
  row.frequency_penalty = 0.2f;  // 3 - 2 * 0.2 = 2.6 > 2.5
  EXPECT_EQ(SampleOne(logits, row, counts).id, 0);
  row.frequency_penalty = -0.5f;  // negative: more likely
  EXPECT_EQ(SampleOne({1.0f, 2.0f}, row, {3, 0}).id, 0);
}

TEST(SampleCpuTest, BannedTokenIsNeverChosenEvenWithTheLargestLogit) {
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 0.5f};
  const std::vector<uint8_t> flags = {0, kTokenBanned, 0, 0};
  EXPECT_EQ(SampleOne(logits, Row(0.0f), {}, flags).id, 2);
  const Sampled s = SampleOne(logits, Row(1.0f), {}, flags);
  EXPECT_NE(s.id, 1);
  // logprobs still see every token, the banned one included.
  EXPECT_NEAR(s.logprob, logits[s.id] - LogSumExp(logits), 1e-6);
  EXPECT_EQ(Drawn(logits, Row(1.0f), flags), (std::set<int>{0, 2, 3}));
  SamplingRow row = Row(1.0f);
  row.min_p = 2.0f;  // drops every token: the most likely candidate
  EXPECT_EQ(SampleOne(logits, row, {}, flags).id, 2);
}

TEST(SampleCpuTest, TopKCountsOnlyCandidates) {
  // Candidates, most likely first: 2, 3, 0.
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 0.5f, 4.0f};
  const std::vector<uint8_t> flags = {0, kTokenBanned, 0, 0, kTokenBanned};
  SamplingRow row = Row(1.0f);
  row.top_k = 1;
  EXPECT_EQ(Drawn(logits, row, flags), (std::set<int>{2}));
  row.top_k = 2;
  EXPECT_EQ(Drawn(logits, row, flags), (std::set<int>{2, 3}));
  row.top_k = 3;  // every candidate
  EXPECT_EQ(Drawn(logits, row, flags), (std::set<int>{0, 2, 3}));
  row.top_k = 4;  // more than the candidates, fewer than the vocabulary
  EXPECT_EQ(Drawn(logits, row, flags), (std::set<int>{0, 2, 3}));
}

TEST(SampleCpuTest, BannedMassDoesNotCountTowardsTopP) {
  // Token 0 holds 0.9 of the mass; the candidates' shares are 0.5, 0.3, 0.2.
  const std::vector<float> logits = LogOf({0.9, 0.05, 0.03, 0.02});
  const std::vector<uint8_t> flags = {kTokenBanned, 0, 0, 0};
  SamplingRow row = Row(1.0f);
  row.top_p = 0.4f;
  EXPECT_EQ(Drawn(logits, row, flags), (std::set<int>{1}));
  row.top_p = 0.6f;
  EXPECT_EQ(Drawn(logits, row, flags), (std::set<int>{1, 2}));
  row.top_p = 0.9f;
  EXPECT_EQ(Drawn(logits, row, flags), (std::set<int>{1, 2, 3}));
}

// Three greedy steps replayed with the same params: each counts its token,
// which the next step's presence penalty then sees.
TEST(SampleCpuTest, CountsTheChosenTokenInItsRowsHistory) {
  const std::vector<float> logits = {1.0f, 0.8f, 0.0f};
  SamplingRow row = Row(0.0f);
  row.presence_penalty = 0.5f;
  std::vector<int32_t> counts(3, 0);
  const TokenHistory history{counts.data(), nullptr};
  int32_t id = -1;
  SampleParams p;
  p.batch = 1;
  p.vocab_size = 3;
  p.row_stride = 3;
  p.logits = logits.data();
  p.rows = &row;
  p.histories = &history;
  p.ids = &id;
  SampleCpu(p);
  EXPECT_EQ(id, 0);
  EXPECT_EQ(counts, (std::vector<int32_t>{1, 0, 0}));
  SampleCpu(p);  // 1 - 0.5 < 0.8
  EXPECT_EQ(id, 1);
  EXPECT_EQ(counts, (std::vector<int32_t>{1, 1, 0}));
  SampleCpu(p);  // 0.5 > 0.3
  EXPECT_EQ(id, 0);
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 1, 0}));
  // Without a history nothing is counted, nor penalised.
  p.histories = nullptr;
  SampleCpu(p);
  EXPECT_EQ(id, 0);
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 1, 0}));
}

// A null-pointer history in the array is no history: its row samples as
// with none at all, and the row with one beside it counts only its own.
TEST(SampleCpuTest, NullHistoryInTheArrayIsNone) {
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, 3.0f, 2.0f, 1.5f};
  std::vector<SamplingRow> rows(2, Row(0.0f));
  for (SamplingRow& row : rows) row.repetition_penalty = 2.0f;
  std::vector<int32_t> counts = {0, 0, 0};
  std::vector<uint8_t> flags = {kTokenBanned, kTokenInPrompt, 0};
  const TokenHistory histories[2] = {{}, {counts.data(), flags.data()}};
  int32_t ids[2] = {-1, -1};
  float logprobs[2];
  SampleParams p;
  p.batch = 2;
  p.vocab_size = 3;
  p.row_stride = 3;
  p.logits = logits.data();
  p.rows = rows.data();
  p.histories = histories;
  p.ids = ids;
  p.logprobs = logprobs;
  SampleCpu(p);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 2);  // 0 banned, 1 penalised to 1 < 1.5
  EXPECT_EQ(counts, (std::vector<int32_t>{0, 0, 1}));
  const Sampled alone = SampleOne({3.0f, 2.0f, 1.0f}, rows[0]);
  EXPECT_EQ(ids[0], alone.id);
  EXPECT_EQ(logprobs[0], alone.logprob);
}

TEST(SampleCpuTest, LowTemperatureConcentratesOnTheMaximum) {
  // At temperature 0.01 token 0 has probability e^-100.
  const std::vector<int> hist = Histogram({0.0f, 1.0f}, Row(0.01f), 500);
  EXPECT_EQ(hist[1], 500);
}

TEST(SampleCpuTest, OutOfRangeParametersStillGiveAnId) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f};
  EXPECT_EQ(SampleOne(logits, Row(-1.0f)).id, 1);  // greedy
  SamplingRow row = Row(1.0f);
  row.min_p = 2.0f;  // drops every token: the most likely
  EXPECT_EQ(SampleOne(logits, row).id, 1);
  row.min_p = 0.0f;
  row.top_k = -3;  // all
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{0, 1, 2}));
  row.top_k = 100;
  EXPECT_EQ(Drawn(logits, row), (std::set<int>{0, 1, 2}));
}

TEST(SampleCpuTest, DrawDependsOnlyOnSeedAndStepNotOnTheBatch) {
  std::vector<float> logits(64);
  for (int i = 0; i < 64; ++i) logits[i] = 0.1f * static_cast<float>(i % 7);
  SamplingRow row = Row(1.0f);
  row.seed = 77;
  row.step = 5;
  const Sampled alone = SampleOne(logits, row);
  EXPECT_EQ(SampleOne(logits, row).id, alone.id);

  // The same row third in a batch of four with other logits and seeds.
  std::vector<float> batch_logits;
  std::vector<SamplingRow> rows;
  for (int b = 0; b < 4; ++b) {
    SamplingRow other = Row(0.5f + b);
    other.seed = 1000 + b;
    rows.push_back(b == 2 ? row : other);
    for (int i = 0; i < 64; ++i) {
      batch_logits.push_back(b == 2 ? logits[i] : 0.3f * ((i * (b + 3)) % 11));
    }
  }
  std::vector<int32_t> ids(4);
  std::vector<float> logprobs(4);
  SampleParams p;
  p.batch = 4;
  p.vocab_size = 64;
  p.row_stride = 64;
  p.logits = batch_logits.data();
  p.rows = rows.data();
  p.ids = ids.data();
  p.logprobs = logprobs.data();
  SampleCpu(p);
  EXPECT_EQ(ids[2], alone.id);
  EXPECT_EQ(logprobs[2], alone.logprob);

  // Steps and seeds do move the draw.
  std::set<int> by_step, by_seed;
  for (int i = 0; i < 50; ++i) {
    SamplingRow r = row;
    r.step = i;
    by_step.insert(SampleOne(logits, r).id);
    r = row;
    r.seed = i;
    by_seed.insert(SampleOne(logits, r).id);
  }
  EXPECT_GT(by_step.size(), 10u);
  EXPECT_GT(by_seed.size(), 10u);
}

TEST(SampleCpuTest, DrawWalksTheKeptTokensInIdOrder) {
  // p = {0.25, 0.5, 0.25}: id 0 for u < 0.25, id 1 below 0.75, else id 2,
  // whatever the order of likelihood.
  const std::vector<float> logits = LogOf({0.25, 0.5, 0.25});
  SamplingRow row = Row(1.0f);
  int checked = 0;
  for (uint64_t step = 0; step < 200; ++step) {
    row.step = step;
    const double u = PhiloxUniform(row.seed, step);
    if (std::abs(u - 0.25) < 1e-4 || std::abs(u - 0.75) < 1e-4) continue;
    EXPECT_EQ(SampleOne(logits, row).id, u < 0.25   ? 0
                                         : u < 0.75 ? 1
                                                    : 2)
        << "u = " << u;
    ++checked;
  }
  EXPECT_GT(checked, 190);
}

// Over many steps, the ids follow the filtered distribution: p proportional
// to q^(1 / temperature) over the `kept` ids (worked out by hand below),
// none elsewhere.
struct StatsCase {
  const char* name;
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  std::set<int> kept;
};

void PrintTo(const StatsCase& c, std::ostream* os) { *os << c.name; }

class SampleCpuStatsTest : public ::testing::TestWithParam<StatsCase> {};

TEST_P(SampleCpuStatsTest, FrequenciesMatchTheFilteredDistribution) {
  const StatsCase& c = GetParam();
  const std::vector<double> q = {0.05, 0.30, 0.02, 0.20,
                                 0.15, 0.10, 0.13, 0.05};
  SamplingRow row = Row(c.temperature);
  row.top_k = c.top_k;
  row.top_p = c.top_p;
  row.min_p = c.min_p;
  row.seed = 2024;
  constexpr int kDraws = 20000;
  const std::vector<int> hist = Histogram(LogOf(q), row, kDraws);
  double total = 0;
  for (int id : c.kept) total += std::pow(q[id], 1.0 / c.temperature);
  double chi2 = 0;
  for (int id = 0; id < 8; ++id) {
    if (c.kept.count(id) == 0) {
      EXPECT_EQ(hist[id], 0) << "id " << id;
      continue;
    }
    const double want = kDraws * std::pow(q[id], 1.0 / c.temperature) / total;
    chi2 += (hist[id] - want) * (hist[id] - want) / want;
  }
  // Above the 1e-6 tail of chi-square with up to 7 degrees of freedom
  // (40.5); a wrong temperature or a missed filter gives thousands.
  EXPECT_LT(chi2, 45.0);
}

// Temperature 2: weights sqrt(q); most likely first 1, 3, 4, 6, 5, 0, 7, 2
// with cumulative shares 0.21 0.38 0.52 0.66 0.78 0.86 0.95 1; relative to
// the largest 1, 0.82, 0.71, 0.66, 0.58, 0.41, 0.41, 0.26.
INSTANTIATE_TEST_SUITE_P(
    Filters, SampleCpuStatsTest,
    ::testing::Values(
        StatsCase{"plain", 1.0f, 0, 1.0f, 0.0f, {0, 1, 2, 3, 4, 5, 6, 7}},
        StatsCase{"temperature", 2.0f, 0, 1.0f, 0.0f, {0, 1, 2, 3, 4, 5, 6, 7}},
        // 0 and 7 tie at the boundary: the lower id stays.
        StatsCase{"top_k", 2.0f, 6, 1.0f, 0.0f, {0, 1, 3, 4, 5, 6}},
        StatsCase{"top_p", 2.0f, 0, 0.75f, 0.0f, {1, 3, 4, 5, 6}},
        StatsCase{"min_p", 2.0f, 0, 1.0f, 0.6f, {1, 3, 4, 6}},
        // Temperature 1, top 6 (share of the six: 0.32 0.54 0.70 0.84 ...),
        // then top_p 0.8 keeps four; min_p 0.3 (p >= 0.09) keeps them.
        StatsCase{"all", 1.0f, 6, 0.8f, 0.3f, {1, 3, 4, 6}}),
    [](const ::testing::TestParamInfo<StatsCase>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace h3::kernels
