// The GPU decode step's split of the shift SSM's sum over a channel's lanes
// (kernels/h3_step_lanes.h): the lanes' shares add up to the plain sum over
// the taps that reach no further back than position 0, for rings of 8 to
// 256 slots and positions before, at and far past the ring's length.
#include "kernels/h3_step_lanes.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace h3::kernels {
namespace {

TEST(OctetShiftSumTest, LanesAddUpToTheTapSum) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal;
  for (int n : {8, 16, 64, 256}) {
    std::vector<float> taps(n), ring(n), taps2(2 * n);
    for (float& t : taps) t = normal(gen);
    for (float& x : ring) x = normal(gen);
    for (int t = 0; t < 2 * n; ++t) taps2[t] = taps[t % n];
    for (int64_t pos :
         {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{n - 1}, int64_t{n},
          int64_t{n + 3}, int64_t{1000}, (int64_t{1} << 40) + 3}) {
      double want = 0;  // sum_{j <= min(pos, N - 1)} taps[j] ring[pos - j]
      for (int64_t j = 0; j < n && j <= pos; ++j) {
        want += double{taps[j]} * ring[(pos - j) % n];
      }
      float got = 0;
      for (int lane = 0; lane * kOctet < n; ++lane) {
        float slots[kOctet];
        for (int i = 0; i < kOctet; ++i) slots[i] = ring[kOctet * lane + i];
        got += OctetShiftSum(taps2.data(), slots, pos, lane, n);
      }
      EXPECT_NEAR(got, want, 1e-5 * (1 + std::abs(want)))
          << "N " << n << " position " << pos;
    }
  }
}

}  // namespace
}  // namespace h3::kernels
