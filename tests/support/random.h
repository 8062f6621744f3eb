#ifndef H3_TESTS_SUPPORT_RANDOM_H_
#define H3_TESTS_SUPPORT_RANDOM_H_

#include <cstdint>
#include <random>
#include <vector>

namespace h3::testing {

// n values from N(0, 1), the same for the same seed on every machine
// (std::mt19937 is fully specified; only the distribution could differ
// between standard libraries, and we build with one).
inline std::vector<float> RandomNormal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

}  // namespace h3::testing

#endif  // H3_TESTS_SUPPORT_RANDOM_H_
