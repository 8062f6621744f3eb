#ifndef H3_TESTS_SUPPORT_CACHE_CHECKS_H_
#define H3_TESTS_SUPPORT_CACHE_CHECKS_H_

// The prefix-cache tests' steps (CPU and CUDA), failing the test on an
// error: cache_calls.h's helpers with the gtest expectations around them,
// and their token sequences. Header-only: the test binaries link gtest.

#include <cstdint>
#include <random>
#include <vector>

#include "engine/runner.h"
#include "gtest/gtest.h"
#include "tests/support/cache_calls.h"

namespace h3::testing {

// `n` ids in [0, 61) drawn from `seed`.
inline std::vector<int32_t> CacheTokens(int n, int seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % 61);
  return t;
}

inline std::vector<int32_t> Join(std::vector<int32_t> a,
                                 const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// FreshLogits; empty (and a failure) on an error.
inline std::vector<float> Solo(engine::Runner& runner,
                               const std::vector<int32_t>& tokens) {
  auto logits = FreshLogits(runner, tokens);
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : std::vector<float>{};
}

inline void Snapshot(engine::Runner& runner,
                     const std::vector<int32_t>& tokens) {
  ASSERT_TRUE(SaveSnapshot(runner, tokens).ok());
}

// ResumeFromCache's logits; *restored gets the tokens the snapshot covered
// (-1, and a failure, on an error).
inline std::vector<float> Resumed(engine::Runner& runner,
                                  const std::vector<int32_t>& tokens,
                                  int64_t* restored) {
  std::vector<float> logits;
  auto hit = ResumeFromCache(runner, tokens, &logits);
  EXPECT_TRUE(hit.ok()) << hit.status();
  *restored = hit.ok() ? *hit : -1;
  return logits;
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_CACHE_CHECKS_H_
