#include "base/parallel.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace h3 {
namespace {

TEST(ParallelForTest, CoversEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    for (int64_t grain : {1, 16, 1 << 20}) {
      std::vector<std::atomic<int>> seen(n);
      ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
        ASSERT_LE(0, begin);
        ASSERT_LE(begin, end);
        ASSERT_LE(end, n);
        for (int64_t i = begin; i < end; ++i) seen[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << i;
    }
  }
}

TEST(ParallelForTest, NestedCallsRunInline) {
  std::atomic<int64_t> total{0};
  ParallelFor(8, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ParallelFor(100, 1, [&](int64_t b, int64_t e) { total += e - b; });
    }
  });
  EXPECT_EQ(total.load(), 800);
}

TEST(ParallelForTest, NumThreadsIsPositive) { EXPECT_GE(NumThreads(), 1); }

}  // namespace
}  // namespace h3
