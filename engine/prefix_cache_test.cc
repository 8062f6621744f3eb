// The prefix cache on the CPU backend: a restored snapshot continues
// bitwise like the sequence it was taken from (CPU prefill is chunk-
// invariant), across edge splits at branch points and under eviction, and
// its counters say exactly what happened. With fp32 activations and K/V,
// and with 16-bit ones (--half-activations: K/V snapshots in 16 bits).
#include "engine/prefix_cache.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loader/model_file.h"
#include "tests/support/cache_checks.h"
#include "tests/support/runner_calls.h"
#include "tests/support/temp_path.h"

namespace h3::engine {
namespace {

using h3::testing::Join;
using h3::testing::Resumed;
using h3::testing::Snapshot;
using h3::testing::Solo;
constexpr auto Tokens = h3::testing::CacheTokens;

class PrefixCacheTest : public ::testing::TestWithParam<ElementType> {
 protected:
  void SetUp() override {
    auto file =
        h3::testing::OpenRandomModel(h3::testing::TinyPaddedConfig(),
                                     h3::testing::TempPath("prefix_cache.h3"));
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  std::unique_ptr<Runner> Make(int64_t max_bytes = int64_t{1} << 30) {
    auto runner = h3::testing::MakeRunner(
        *file_, MakeCpuBackend(GetParam()), /*slots=*/4, /*context=*/600,
        /*prefill_chunk=*/1024, /*graphs=*/true,
        {.max_bytes = max_bytes, .interval = 0});
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  std::unique_ptr<loader::ModelFile> file_;
};

TEST_P(PrefixCacheTest, ARestoredSnapshotContinuesBitwise) {
  auto runner = Make();
  const auto prefix = Tokens(100, 1), rest = Tokens(37, 2);
  Snapshot(*runner, prefix);
  int64_t restored = 0;
  const auto whole = Join(prefix, rest);
  EXPECT_EQ(Resumed(*runner, whole, &restored), Solo(*runner, whole));
  EXPECT_EQ(restored, 100);
}

TEST_P(PrefixCacheTest, AWholePromptHitLeavesTheLastTokenToCompute) {
  auto runner = Make();
  const auto prompt = Tokens(50, 3);
  Snapshot(*runner, prompt);
  int64_t restored = 0;
  // No snapshot at 49: nothing restorable, but the match says where one
  // would help.
  const SlotId slot = *runner->memory().Acquire();
  auto match = runner->prefix_cache().Restore(prompt, 49, slot);
  ASSERT_TRUE(match.ok());
  EXPECT_EQ(match->restored, 0);
  EXPECT_EQ(match->matched, 50);
  runner->memory().Release(slot);
  Snapshot(*runner, std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
  EXPECT_EQ(Resumed(*runner, prompt, &restored), Solo(*runner, prompt));
  EXPECT_EQ(restored, 49);
}

TEST_P(PrefixCacheTest, BranchPointsSplitEdgesAndEveryPathStillRestores) {
  auto runner = Make();
  const auto shared = Tokens(60, 4);
  const auto a = Join(shared, Tokens(40, 5));
  auto b = Join(shared, Tokens(30, 6));
  b[60] = (a[60] + 1) % 61;  // b leaves a's path exactly at 60
  Snapshot(*runner, a);
  // b leaves a's path at 60: the cache has no state there yet.
  int64_t restored = -1;
  const auto b_more = Join(b, {7});
  EXPECT_EQ(Resumed(*runner, b_more, &restored), Solo(*runner, b_more));
  EXPECT_EQ(restored, 0);
  Snapshot(*runner, shared);  // splits a's edge at 60
  Snapshot(*runner, b);
  for (const auto& tokens :
       {Join(a, {1, 2}), Join(b, {3}), Join(shared, Tokens(9, 7))}) {
    const std::vector<float> expected = Solo(*runner, tokens);
    EXPECT_EQ(Resumed(*runner, tokens, &restored), expected);
    EXPECT_EQ(restored, tokens.size() == 62 + 40 ? 100
                        : tokens.size() == 91    ? 90
                                                 : 60);
  }
  const PrefixCacheStats stats = runner->prefix_cache().stats();
  EXPECT_EQ(stats.snapshots, 3);
  EXPECT_EQ(stats.queries, 4);
  EXPECT_EQ(stats.hit_tokens, 0 + 100 + 90 + 60);
  // K/V of 60 + 40 + 30 positions, stored once; three states.
  const SequenceMemory& m = runner->memory();
  EXPECT_EQ(stats.bytes,
            130 * m.KvBytesPerPosition() + 4 * 3 * m.StateFloats());
}

TEST_P(PrefixCacheTest, EvictionDropsTheLeastRecentlyUsedAndNeverFails) {
  const auto probe = Make();
  const int64_t per_snapshot = 20 * probe->memory().KvBytesPerPosition() +
                               4 * probe->memory().StateFloats();
  // Room for two snapshots of 20 tokens on separate paths.
  auto runner = Make(2 * per_snapshot + 100);
  const auto p1 = Tokens(20, 8), p2 = Tokens(20, 9), p3 = Tokens(20, 10);
  Snapshot(*runner, p1);
  Snapshot(*runner, p2);
  int64_t restored = 0;
  Resumed(*runner, Join(p1, {1}), &restored);  // p1 is now the newer
  EXPECT_EQ(restored, 20);
  Snapshot(*runner, p3);  // evicts p2
  PrefixCacheStats stats = runner->prefix_cache().stats();
  EXPECT_EQ(stats.snapshots, 2);
  EXPECT_EQ(stats.evictions, 1);
  EXPECT_LE(stats.bytes, stats.max_bytes);
  for (const auto& [tokens, hit] :
       std::vector<std::pair<std::vector<int32_t>, int64_t>>{
           {Join(p1, {2}), 20}, {Join(p2, {2}), 0}, {Join(p3, {2}), 20}}) {
    const std::vector<float> expected = Solo(*runner, tokens);
    EXPECT_EQ(Resumed(*runner, tokens, &restored), expected);
    EXPECT_EQ(restored, hit);
  }
  // A snapshot bigger than the whole budget is taken, then dropped.
  Snapshot(*runner, Tokens(200, 11));
  stats = runner->prefix_cache().stats();
  EXPECT_LE(stats.bytes, stats.max_bytes);
  EXPECT_EQ(stats.evictions, 4);
  EXPECT_EQ(stats.snapshots, 0);
}

TEST_P(PrefixCacheTest, OffMeansNoSnapshotsAndNoQueries) {
  auto runner = Make(0);
  Snapshot(*runner, Tokens(10, 12));
  int64_t restored = -1;
  Resumed(*runner, Tokens(11, 12), &restored);
  EXPECT_EQ(restored, 0);
  const PrefixCacheStats stats = runner->prefix_cache().stats();
  EXPECT_EQ(stats.queries, 0);
  EXPECT_EQ(stats.snapshots, 0);
  EXPECT_EQ(stats.bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(Activations, PrefixCacheTest,
                         ::testing::Values(ElementType::kF32,
                                           ElementType::kF16),
                         [](const auto& info) {
                           return std::string(ElementTypeName(info.param));
                         });

}  // namespace
}  // namespace h3::engine
