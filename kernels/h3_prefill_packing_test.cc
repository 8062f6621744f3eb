// Tests of the host side of packed H3 prefill calls: CheckPacked's refusals
// and PlanPackedLaunches' grouping (no GPU needed).
#include "kernels/h3_prefill_packing.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/flashconv.h"

namespace h3::kernels {
namespace {

namespace fc = flashconv;

std::vector<H3PrefillSegment> Segments(const std::vector<int64_t>& lengths) {
  static float state;  // a non-null address; never dereferenced here
  std::vector<H3PrefillSegment> s;
  int64_t offset = 0;
  for (int64_t length : lengths) {
    s.push_back({0, length, offset, &state, &state});
    offset += length;
  }
  return s;
}

std::vector<PackedLaunch> Plan(const std::vector<H3PrefillSegment>& segments,
                               int max) {
  return PlanPackedLaunches(segments.data(), static_cast<int>(segments.size()),
                            max);
}

// The properties every plan must have, for any input.
void ExpectGoodPlan(const std::vector<H3PrefillSegment>& segments,
                    const std::vector<PackedLaunch>& plan, int max) {
  std::vector<int> seen(segments.size(), 0);
  std::vector<int> last_in_size(fc::kNumFftSizes, -1);
  for (const PackedLaunch& launch : plan) {
    ASSERT_FALSE(launch.segments.empty());
    EXPECT_LE(static_cast<int>(launch.segments.size()), max);
    for (int i : launch.segments) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, static_cast<int>(segments.size()));
      ++seen[i];
      EXPECT_EQ(fc::FftSizeIndex(segments[i].length), launch.size_index)
          << "segment " << i << " of length " << segments[i].length;
      // Input order within a size, across the size's launches too.
      EXPECT_GT(i, last_in_size[launch.size_index]) << "segment " << i;
      last_in_size[launch.size_index] = i;
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i], 1) << "segment " << i;
  }
}

TEST(PlanPackedLaunchesTest, GroupsBySizeInInputOrder) {
  // Sizes 0 (<= 256 tokens), 1 (<= 512), 2 (<= 1024), 3 (longer).
  const auto segments = Segments({1, 17, 255, 700, 1500, 3000, 256, 257, 512});
  const std::vector<PackedLaunch> plan = Plan(segments, 64);
  ExpectGoodPlan(segments, plan, 64);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].segments, (std::vector<int>{0, 1, 2, 6}));
  EXPECT_EQ(plan[1].segments, (std::vector<int>{7, 8}));
  EXPECT_EQ(plan[2].segments, (std::vector<int>{3}));
  EXPECT_EQ(plan[3].segments, (std::vector<int>{4, 5}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(plan[i].size_index, i);
}

TEST(PlanPackedLaunchesTest, SplitsGroupsAtTheLimit) {
  // 2 max + 1 short segments of one size, and exactly max of another.
  const int max = 5;
  std::vector<int64_t> lengths(2 * max + 1, 8);
  lengths.insert(lengths.end(), max, 5000);
  const auto segments = Segments(lengths);
  const std::vector<PackedLaunch> plan = Plan(segments, max);
  ExpectGoodPlan(segments, plan, max);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].segments.size(), 5u);
  EXPECT_EQ(plan[1].segments.size(), 5u);
  EXPECT_EQ(plan[2].segments, (std::vector<int>{10}));
  EXPECT_EQ(plan[3].segments.size(), 5u);
  EXPECT_EQ(plan[3].segments[0], 11);
}

TEST(PlanPackedLaunchesTest, RandomCallsMakeGoodPlans) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int count = std::uniform_int_distribution<int>(0, 150)(random);
    const int max = std::uniform_int_distribution<int>(1, 70)(random);
    std::vector<int64_t> lengths(count);
    for (int64_t& l : lengths) {
      l = std::uniform_int_distribution<int64_t>(1, 5000)(random);
    }
    const auto segments = Segments(lengths);
    const std::vector<PackedLaunch> plan = Plan(segments, max);
    ExpectGoodPlan(segments, plan, max);
    // No more launches than needed: per size, ceil(count / max).
    std::vector<int> per_size(fc::kNumFftSizes, 0);
    for (int64_t l : lengths) ++per_size[fc::FftSizeIndex(l)];
    size_t needed = 0;
    for (int n : per_size) needed += (n + max - 1) / max;
    EXPECT_EQ(plan.size(), needed) << "trial " << trial;
  }
  EXPECT_TRUE(PlanPackedLaunches(nullptr, 0, 4).empty());
}

class CheckPackedTest : public ::testing::Test {
 protected:
  CheckPackedTest() : segments_(Segments({3, 9})) {
    good_.time = 1;
    good_.channel = 12;
    good_.q = good_.k = good_.v = &element_;
    good_.out = &element_;
    good_.segments = 2;
    good_.seqs = segments_.data();
  }
  // Expects `p` refused with a reason that contains `field`.
  void ExpectRefused(const H3PrefillPackedParams& p, const std::string& field) {
    std::string why;
    EXPECT_FALSE(CheckPacked(shape_, p, &why)) << field;
    EXPECT_NE(why.find(field), std::string::npos) << why;
  }
  const H3Shape shape_{16, 1, 64};
  float element_ = 0;
  std::vector<H3PrefillSegment> segments_;
  H3PrefillPackedParams good_;
};

TEST_F(CheckPackedTest, AcceptsGoodCallsAndEmptyOnes) {
  std::string why;
  EXPECT_TRUE(CheckPacked(shape_, good_, &why)) << why;
  H3PrefillPackedParams empty;  // everything null or zero
  EXPECT_TRUE(CheckPacked(shape_, empty, &why)) << why;
}

TEST_F(CheckPackedTest, RefusesBrokenCallsNamingTheField) {
  H3PrefillPackedParams p = good_;
  p.segments = -1;
  ExpectRefused(p, "segments -1");
  p = good_;
  p.seqs = nullptr;
  ExpectRefused(p, "seqs");
  p = good_;
  p.type = ElementType::kI32;
  ExpectRefused(p, "type");
  p = good_;
  p.time = 0;
  ExpectRefused(p, "time stride 0");
  p = good_;
  p.channel = -12;
  ExpectRefused(p, "channel stride -12");
  const char* names[] = {"q", "k", "v", "out"};
  for (int i = 0; i < 4; ++i) {
    p = good_;
    if (i == 3) {
      p.out = nullptr;
    } else {
      (i == 0 ? p.q : i == 1 ? p.k : p.v) = nullptr;
    }
    ExpectRefused(p, std::string(names[i]) + " is null");
  }
}

TEST_F(CheckPackedTest, RefusesBrokenSegmentsNamingThem) {
  auto refused = [&](auto mend, const std::string& field) {
    std::vector<H3PrefillSegment> s = segments_;
    mend(s[1]);
    H3PrefillPackedParams p = good_;
    p.seqs = s.data();
    ExpectRefused(p, "segment 1: " + field);
  };
  refused([](H3PrefillSegment& s) { s.start = -1; }, "start -1");
  refused([](H3PrefillSegment& s) { s.length = 0; }, "length 0");
  refused([](H3PrefillSegment& s) { s.offset = -3; }, "offset -3");
  refused([](H3PrefillSegment& s) { s.shift_state = nullptr; }, "shift_state");
  refused([](H3PrefillSegment& s) { s.diag_state = nullptr; }, "diag_state");
  refused(
      [](H3PrefillSegment& s) {
        s.offset = std::numeric_limits<int64_t>::max() - 100;
      },
      "offset + (length - 1) * time");
}

// Packed rows with an out stride of their own (the engine's q|k|v rows,
// [R, 3d], into out [R, d]): accepted with channel 1 and whole-row
// offsets, refused otherwise, naming the field.
TEST_F(CheckPackedTest, TakesAnOutStrideOnlyForPackedRows) {
  std::vector<H3PrefillSegment> rows = {{0, 3, 0, &element_, &element_},
                                        {5, 9, 3 * 48, &element_, &element_}};
  H3PrefillPackedParams p = good_;
  p.time = 48;
  p.channel = 1;
  p.out_time = 16;
  p.seqs = rows.data();
  std::string why;
  EXPECT_TRUE(CheckPacked(shape_, p, &why)) << why;
  EXPECT_EQ(OutTime(p), 16);
  p.out_time = 0;
  EXPECT_EQ(OutTime(p), 48);
  EXPECT_TRUE(CheckPacked(shape_, p, &why)) << why;

  p.out_time = -2;
  ExpectRefused(p, "out time stride -2 < 0");
  p.out_time = 16;
  p.channel = 12;
  p.time = 1;
  ExpectRefused(p, "only packed rows (channel stride 1)");
  p.channel = 1;
  p.time = 48;
  rows[1].offset = 3 * 48 + 5;
  ExpectRefused(p, "segment 1: offset 149 is not a whole number of rows");
  rows[1].offset = 3 * 48;
  p.out_time = std::numeric_limits<int64_t>::max() / 2;
  ExpectRefused(p, "segment 0: its rows in out");
}

}  // namespace
}  // namespace h3::kernels
