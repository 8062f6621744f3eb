// The prefix cache seen from outside: cached_prompt_tokens in Usage,
// GetServerInfo and the h3_prefix_cache_* metrics agree with what the
// requests restored, and the tokens do not change.
#include "gtest/gtest.h"
#include "server/testing/test_server.h"

namespace h3::server {
namespace {

using namespace testing;  // NOLINT: the test server helpers

TEST(PrefixCacheServerTest, UsageServerInfoAndMetricsCountEveryHit) {
  ServerOptions options = LoopbackOptions();
  options.metrics_port = 0;
  options.prefix_cache = {.max_bytes = 64 << 20, .interval = 16};
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);
  // Shown before the first request too.
  EXPECT_TRUE(Info(*stub).prefix_cache().enabled());
  EXPECT_EQ(Info(*stub).prefix_cache().max_bytes(), 64u << 20);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 7) % 50);

  // Alone: nothing cached. Again: the snapshot at 32 (the interval), and a
  // branch snapshot at 39 is taken. Again: 39, all but the last token.
  std::vector<int32_t> first_ids;
  int64_t hits = 0;
  for (uint32_t expected : {0u, 32u, 39u}) {
    const Generation g = Generate(*stub, GreedyIds(prompt, 6));
    ASSERT_TRUE(g.status.ok()) << g.status.error_message();
    const v1::Usage& usage = g.last().usage();
    EXPECT_EQ(usage.prompt_tokens(), 40u);
    EXPECT_EQ(usage.cached_prompt_tokens(), expected);
    hits += expected;
    if (first_ids.empty()) first_ids = g.ids;
    EXPECT_EQ(g.ids, first_ids);
  }

  // The metrics are updated at the end of each iteration; the last
  // request's snapshot with its final token comes one iteration later.
  std::map<std::string, double> m;
  ASSERT_TRUE(WaitFor([&] {
    m = ParseMetrics(HttpGetMetrics(server->metrics_port()));
    return m["h3_prefix_cache_queries_total"] == 3 &&
           m["h3_requests_running"] == 0;
  }));
  const v1::ServerInfo info = Info(*stub);
  const v1::PrefixCacheInfo& cache = info.prefix_cache();
  EXPECT_TRUE(cache.enabled());
  EXPECT_EQ(cache.max_bytes(), 64u << 20);
  EXPECT_EQ(cache.interval_tokens(), 16u);
  EXPECT_EQ(cache.queries(), 3u);
  EXPECT_EQ(cache.hit_tokens(), static_cast<uint64_t>(hits));
  EXPECT_EQ(cache.evictions(), 0u);
  // Snapshots at 16, 32, 39, 40 and 46 (prompt and answer).
  EXPECT_EQ(cache.snapshots(), 5u);
  EXPECT_GT(cache.bytes(), 0u);
  EXPECT_EQ(m["h3_prefix_cache_hit_tokens_total"], hits);
  EXPECT_EQ(m["h3_prefix_cache_snapshots"], cache.snapshots());
  EXPECT_EQ(m["h3_prefix_cache_bytes"], cache.bytes());
  EXPECT_EQ(m["h3_prefix_cache_evictions_total"], 0);
  EXPECT_EQ(m["h3_prefix_cache_max_bytes"], 64 << 20);
}

TEST(PrefixCacheServerTest, OffByDefaultInEmbeddedServers) {
  auto server = StartServer(LoopbackOptions());
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);
  for (int i = 0; i < 2; ++i) {
    const Generation g = Generate(*stub, GreedyIds({5, 6, 7, 8, 9}, 2));
    ASSERT_TRUE(g.status.ok());
    EXPECT_EQ(g.last().usage().cached_prompt_tokens(), 0u);
  }
  EXPECT_FALSE(Info(*stub).prefix_cache().enabled());
}

}  // namespace
}  // namespace h3::server
