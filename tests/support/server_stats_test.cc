// ThreadGrowth: a thread name that grew is named, except gRPC's own pools
// within their bound.
#include "tests/support/server_stats.h"

#include <algorithm>
#include <map>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace h3::testing {
namespace {

TEST(ThreadGrowthTest, NamesWhatGrewButLetsGrpcPoolsGrowToTheirBound) {
  const int bound =
      2 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::map<std::string, int> before = {
      {"h3serve", 1}, {"grpc_global_tim", 2}, {"event_engine", 1}};
  EXPECT_EQ(ThreadGrowth(before, before), "");
  EXPECT_EQ(ThreadGrowth(before, {{"h3serve", 2}}), "h3serve: 1 -> 2; ");
  EXPECT_EQ(ThreadGrowth(before, {{"worker", 1}}), "worker: 0 -> 1; ");
  for (const char* pool :
       {"grpc_global_tim", "event_engine", "default-executo"}) {
    EXPECT_EQ(ThreadGrowth(before, {{pool, bound}}), "") << pool;
    EXPECT_NE(ThreadGrowth(before, {{pool, bound + 1}}), "") << pool;
  }
}

}  // namespace
}  // namespace h3::testing
