// The arrival process of `h3 bench` (ArrivalTimes in bench_runner.h): gaps
// of the asked mean, and the variance of a gamma distribution of the asked
// shape.
#include <cmath>
#include <limits>
#include <vector>

#include "clients/h3/bench_runner.h"
#include "gtest/gtest.h"

namespace h3::cli {
namespace {

struct GapMoments {
  double mean;
  double squared_cv;  // variance / mean^2; 1 / shape for a gamma
};

GapMoments Moments(const std::vector<double>& times) {
  const double n = static_cast<double>(times.size() - 1);
  double sum = 0;
  for (size_t i = 1; i < times.size(); ++i) sum += times[i] - times[i - 1];
  const double mean = sum / n;
  double squares = 0;
  for (size_t i = 1; i < times.size(); ++i) {
    const double d = times[i] - times[i - 1] - mean;
    squares += d * d;
  }
  return {mean, squares / n / (mean * mean)};
}

TEST(ArrivalTimesTest, InfiniteRateSendsEverythingAtOnce) {
  const std::vector<double> times =
      ArrivalTimes(5, std::numeric_limits<double>::infinity(), 1, 0);
  EXPECT_EQ(times, std::vector<double>(5, 0.0));
}

TEST(ArrivalTimesTest, StartsAtZeroRisesAndRepeatsForASeed) {
  const std::vector<double> times = ArrivalTimes(100, 5, 1, 42);
  ASSERT_EQ(times.size(), 100u);
  EXPECT_EQ(times[0], 0);
  for (size_t i = 1; i < times.size(); ++i) EXPECT_GE(times[i], times[i - 1]);
  EXPECT_EQ(ArrivalTimes(100, 5, 1, 42), times);
  EXPECT_NE(ArrivalTimes(100, 5, 1, 43), times);
}

// 20,000 gaps. At shape 0.5 (the heaviest tail here) the relative standard
// error of the mean gap is 1%, that of the squared coefficient of variation
// about 3%; the tolerances are four of them.
class ArrivalShapeTest : public ::testing::TestWithParam<double> {};

TEST_P(ArrivalShapeTest, MeanIsOneOverRateAndShapeIsBurstiness) {
  const double burstiness = GetParam();
  const double rate = 8;
  const GapMoments m = Moments(ArrivalTimes(20001, rate, burstiness, 7));
  EXPECT_NEAR(m.mean, 1 / rate, 0.04 / rate);
  EXPECT_NEAR(m.squared_cv, 1 / burstiness, 0.12 / burstiness);
}

INSTANTIATE_TEST_SUITE_P(Burstiness, ArrivalShapeTest,
                         ::testing::Values(0.5, 1.0, 4.0));

}  // namespace
}  // namespace h3::cli
